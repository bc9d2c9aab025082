//! `POST /v1/advise`: the advisor's options for one job (a profile, or an ingested job's
//! `job_id`), computed in the prediction pool under one read of the online state, so every
//! row is predicted from the same moment ([`crate::serve::advice`]).

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::predict::{predict_error, resolve, PredictJob};
use crate::serve::advice::{self, Advice, AdviceError, AdviceRequest, GpuRange};
use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::state::bounds;
use crate::serve::state::events::{JobProfile, MAX_STRING};
use crate::serve::state::online::PredictError;
use crate::serve::AppState;

/// Most GPU types or queues one request may list.
const MAX_NAMES: usize = 64;

/// The job to advise on.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdviseJob {
    /// An ingested job: its profile is used when none is given here.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub job_id: Option<String>,
    /// The moment to advise for (default: now): each option is a submit at `at`.
    #[serde(default)]
    pub at: Option<f64>,
    #[serde(default)]
    pub profile: Option<JobProfile>,
}

/// Body of `POST /v1/advise` (everything but `job` optional).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdviseBody {
    pub job: AdviseJob,
    /// GPU counts to weigh, `{min, max}` (default: a quarter to four times the request).
    #[serde(default)]
    pub gpus: Option<GpuRange>,
    /// GPU types to weigh (default: every type the cluster's jobs named).
    #[serde(default)]
    #[schema(max_items = 64)]
    pub gpu_types: Option<Vec<String>>,
    /// Queues / partitions to weigh (default: the ones the user's jobs used).
    #[serde(default)]
    #[schema(max_items = 64)]
    pub queues: Option<Vec<String>>,
}

/// Each name of a list (`field`) 1 to 256 bytes, at most [`MAX_NAMES`] of them.
fn check_names(field: &str, names: Option<&Vec<String>>) -> Result<(), ApiError> {
    let Some(names) = names else {
        return Ok(());
    };
    if names.is_empty() || names.len() > MAX_NAMES {
        return Err(ApiError::invalid(
            field,
            format!("must list 1 to {MAX_NAMES} names, got {}", names.len()),
        ));
    }
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() || n.len() > MAX_STRING {
            return Err(ApiError::invalid(
                format!("{field}[{i}]"),
                "must be 1 to 256 bytes",
            ));
        }
    }
    Ok(())
}

fn advice_error(e: AdviceError) -> ApiError {
    match e {
        AdviceError::Invalid { field, reason } => ApiError::invalid(field, reason),
        AdviceError::Predict(PredictError::CannotFit { field, reason }) => {
            ApiError::invalid(format!("job.profile.{field}"), reason)
        }
        AdviceError::Predict(e) => predict_error(e),
    }
}

/// `POST /v1/advise`.
#[utoipa::path(
    post,
    path = "/v1/advise",
    tag = "predict",
    summary = "What to ask for: the job's alternatives (GPU counts, GPU types, queues), each with predicted start (median, 95% bound), run time (80% interval, scaled from the request by measured scaling, with its basis), finish and GPU-hours; the earliest finish and the cheapest option near it marked",
    request_body = AdviseBody,
    responses(
        (status = 200, description = "the options, the request first", body = Advice),
        (status = 422, description = "a field is invalid: a GPU range of 0 or beyond any cluster, min over max, a GPU type or queue the cluster's jobs never named, a profile that cannot fit"),
        (status = 503, description = "the runtime or queue-wait model is not available")
    )
)]
pub async fn advise(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<AdviseBody>,
) -> Result<Json<Advice>, ApiError> {
    check_names("gpu_types", body.gpu_types.as_ref())?;
    check_names("queues", body.queues.as_ref())?;
    let job = PredictJob {
        job_id: body.job.job_id,
        at: body.job.at,
        profile: body.job.profile,
        dag: None,
    };
    let req = AdviceRequest {
        gpus: body.gpus,
        gpu_types: body.gpu_types,
        queues: body.queues,
    };
    let work = state.clone();
    let advice = state
        .ext
        .predictions
        .run(move || {
            let o = work.online();
            let r = resolve(&o, "job", &job)?;
            bounds::check_profile(&r.profile, "job.profile")?;
            advice::advise_at(
                &o,
                work.ext.scaling.reshaper(),
                job.job_id.as_deref(),
                &r.profile,
                &req,
                r.at,
            )
            .map_err(advice_error)
        })
        .await?;
    Ok(Json(advice))
}
