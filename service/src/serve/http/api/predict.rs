//! The predict endpoints: `POST /v1/predict/{runtime,queue-wait,failure,convergence}` for one
//! job (`{"job": …}`) or a batch (`{"jobs": […]}`); each answer carries the model version.
//! The DAG makespan ([`super::dag`]) reads the same requests.

use std::time::Instant;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use augur_features::OutOfRange;
use augur_predictor::ModelKind;

use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::state::bounds;
use crate::serve::state::events::{Dag, JobProfile, MAX_STRING};
use crate::serve::state::online::{
    ConvergenceAnswer, ConvergenceFailure, FailureAnswer, Online, PredictError, RuntimeAnswer,
    WaitAnswer,
};
use crate::serve::{AppState, ServeEvent};

/// One job to predict for.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictJob {
    /// An ingested job: its profile (and DAG) are used when none is given here.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub job_id: Option<String>,
    /// The moment to answer for (default: now, the service's clock). The answer is "now":
    /// from everything ingested so far and the model served now, for a job with this
    /// profile submitted at `at`, which does not see jobs submitted at `at` or later; with
    /// the `job_id` of an ingested job, that job's own submit is left out of its history.
    /// The answer stored at an ingested job's submit is `runtime_at_submit` of
    /// `GET /v1/jobs/{id}`; asked at its submit time, with nothing ingested since, "now"
    /// equals it.
    #[serde(default)]
    pub at: Option<f64>,
    #[serde(default)]
    pub profile: Option<JobProfile>,
    /// Stages, for `dag-makespan`.
    #[serde(default)]
    pub dag: Option<Dag>,
}

/// Body of the predict endpoints: `{"job": …}` or `{"jobs": […]}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    #[serde(default)]
    pub job: Option<PredictJob>,
    #[serde(default)]
    #[schema(min_items = 1)]
    pub jobs: Option<Vec<PredictJob>>,
}

/// The answer of a predict endpoint: `prediction` for `{"job": …}`, `predictions` (in
/// request order) for `{"jobs": […]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Predictions<T> {
    /// `runtime`, `queue_wait`, `failure`, `convergence` or `dag_makespan`.
    pub kind: &'static str,
    /// The served model's version (none when no model answered).
    pub model_version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictions: Option<Vec<T>>,
}

/// One job's answer with how its profile stands to the served model.
#[derive(Debug, Serialize, ToSchema)]
pub struct Checked<T> {
    #[serde(flatten)]
    pub answer: T,
    /// The profile fields the served model reads (the others do not change its answer).
    pub profile_fields_used: Vec<&'static str>,
    /// Profile values outside what the served model was trained on, each with the training
    /// range `[min, max]`: there the answer extrapolates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub out_of_range: Vec<OutOfRange>,
}

/// The jobs of a request with their field paths (`job` or `jobs[i]`), and whether it asked
/// for one.
pub(super) fn request_jobs(
    req: PredictRequest,
    max: usize,
) -> Result<(bool, Vec<(String, PredictJob)>), ApiError> {
    match (req.job, req.jobs) {
        (Some(j), None) => Ok((true, vec![("job".to_string(), j)])),
        (None, Some(js)) => {
            if js.is_empty() || js.len() > max {
                return Err(ApiError::invalid(
                    "jobs",
                    format!("must hold 1 to {max} jobs, got {}", js.len()),
                ));
            }
            Ok((
                false,
                js.into_iter()
                    .enumerate()
                    .map(|(i, j)| (format!("jobs[{i}]"), j))
                    .collect(),
            ))
        }
        (Some(_), Some(_)) => Err(ApiError::invalid("jobs", "give `job` or `jobs`, not both")),
        (None, None) => Err(ApiError::invalid(
            "job",
            "give `job` (one) or `jobs` (a batch)",
        )),
    }
}

/// A predict job resolved against what is known.
pub(super) struct Resolved {
    /// The job's id, `(request)` when none was given.
    pub id: String,
    pub profile: JobProfile,
    /// Submit time.
    pub at: f64,
    pub dag: Option<Dag>,
}

/// Checks a predict job (at field path `path`) and fills in what the ingested events know
/// about it.
pub(super) fn resolve(o: &Online, path: &str, j: &PredictJob) -> Result<Resolved, ApiError> {
    if let Some(id) = &j.job_id {
        if id.is_empty() || id.len() > MAX_STRING {
            return Err(ApiError::invalid(
                format!("{path}.job_id"),
                "must be 1 to 256 bytes",
            ));
        }
    }
    if let Some(t) = j.at {
        if !t.is_finite() || t.abs() > 1e12 {
            return Err(ApiError::invalid(
                format!("{path}.at"),
                format!("must be a finite time in seconds within ±1e12, got {t}"),
            ));
        }
    }
    if let Some(p) = &j.profile {
        p.validate(&format!("{path}.profile"))?;
    }
    if let Some(d) = &j.dag {
        d.validate(&format!("{path}.dag"))?;
    }
    let known = j.job_id.as_ref().and_then(|id| o.jobs.get(id));
    let profile = match (&j.profile, known) {
        (Some(p), _) => p.clone(),
        (None, Some(info)) => info.profile.clone().ok_or_else(|| {
            ApiError::invalid(
                format!("{path}.profile"),
                "the job's submit was not ingested: give a profile",
            )
        })?,
        (None, None) => {
            return Err(ApiError::invalid(
                format!("{path}.profile"),
                "give a profile, or the job_id of an ingested job",
            ))
        }
    };
    Ok(Resolved {
        id: j.job_id.clone().unwrap_or_else(|| "(request)".to_string()),
        profile,
        at: j.at.unwrap_or_else(|| o.now()),
        dag: j.dag.clone().or_else(|| known.and_then(|i| i.dag.clone())),
    })
}

pub(super) fn predict_error(e: PredictError) -> ApiError {
    match e {
        PredictError::NotAvailable(kind) => ApiError::model_not_available(
            kind,
            "not trained or loaded yet (first-start training still running, or it failed: see the logs and GET /readyz)",
        ),
        PredictError::NotTrained { kind, reason } => {
            ApiError::model_not_available(kind, format!("not trained: {reason}"))
        }
        PredictError::CannotFit { field, reason } => {
            ApiError::invalid(format!("profile.{field}"), reason)
        }
        PredictError::Internal(m) => ApiError::internal("the prediction failed", m),
    }
}

/// The answer to a request (`single`: `{"job": …}`), after telling the listeners what was
/// predicted and how long it took.
pub(super) fn answer<T: Serialize>(
    state: &AppState,
    kind: &'static str,
    single: bool,
    version: Option<u32>,
    preds: Vec<T>,
    started: Instant,
) -> Json<Predictions<T>> {
    if let Some(v) = version {
        let _ = state.events.send(ServeEvent::Predicted {
            kind,
            model_version: v,
            count: preds.len(),
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    let (prediction, predictions) = if single {
        (preds.into_iter().next(), None)
    } else {
        (None, Some(preds))
    };
    Json(Predictions {
        kind,
        model_version: version,
        prediction,
        predictions,
    })
}

/// Refuses a request whose work (`cost`: jobs, or metric points for convergence) is over
/// `max_prediction_points`, before any of it is done.
pub(super) fn check_cost(state: &AppState, cost: usize) -> Result<(), ApiError> {
    let max = state.config.max_prediction_points;
    if cost > max {
        return Err(ApiError::invalid(
            "jobs",
            format!(
                "the request needs {cost} units of prediction work (a job, or a metric point of a convergence job), over the limit of {max} (max_prediction_points): split it"
            ),
        ));
    }
    Ok(())
}

/// A predict request's jobs answered in the prediction pool, after the cost check (`cost`
/// of the request's jobs): `version` names the served model, `one` answers the job at a
/// path (given that version) under the shared lock, taken per job so the store's writer
/// waits for one prediction at most, never for a whole batch.
pub(super) async fn predict_in_pool<T, F>(
    state: &AppState,
    kind: &'static str,
    req: PredictRequest,
    cost: impl FnOnce(&[(String, PredictJob)]) -> usize,
    version: fn(&Online) -> Option<u32>,
    one: F,
) -> Result<Json<Predictions<T>>, ApiError>
where
    T: Serialize + Send + 'static,
    F: Fn(&Online, &str, &PredictJob, Option<u32>) -> Result<T, ApiError> + Send + 'static,
{
    let started = Instant::now();
    let (single, jobs) = request_jobs(req, state.config.max_batch)?;
    check_cost(state, cost(&jobs))?;
    let work = state.clone();
    let (version, preds) = state
        .ext
        .predictions
        .run(move || {
            let version = version(&work.online());
            let preds = jobs
                .iter()
                .map(|(path, j)| one(&work.online(), path, j, version))
                .collect::<Result<Vec<T>, ApiError>>()?;
            Ok((version, preds))
        })
        .await?;
    Ok(answer(state, kind, single, version, preds, started))
}

/// Answers a predict request whose jobs each resolve to a profile (an ingested job, or the
/// profile given): `version` names the served model, `predict` answers one job; each answer
/// names the profile fields the model reads and flags values outside its training ranges.
async fn predict_profiles<T: Serialize + Send + 'static>(
    state: AppState,
    req: PredictRequest,
    kind: ModelKind,
    version: fn(&Online) -> Option<u32>,
    predict: fn(&Online, &str, &JobProfile, f64) -> Result<T, PredictError>,
) -> Result<Json<Predictions<Checked<T>>>, ApiError> {
    predict_in_pool(
        &state,
        kind.name(),
        req,
        <[_]>::len,
        version,
        move |o, path, j, _| {
            let r = resolve(o, path, j)?;
            bounds::check_profile(&r.profile, &format!("{path}.profile"))?;
            let answer = predict(o, &r.id, &r.profile, r.at).map_err(|e| match e {
                PredictError::CannotFit { field, reason } => {
                    ApiError::invalid(format!("{path}.profile.{field}"), reason)
                }
                e => predict_error(e),
            })?;
            Ok(Checked {
                answer,
                profile_fields_used: o.fields_used(kind),
                out_of_range: o.out_of_range(kind, &r.profile),
            })
        },
    )
    .await
}

/// `POST /v1/predict/runtime`.
#[utoipa::path(
    post,
    path = "/v1/predict/runtime",
    tag = "predict",
    summary = "Predict the run time (seconds, 80% interval) for one job (`job`) or a batch (`jobs`)",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`", body = Predictions<Checked<RuntimeAnswer>>),
        (status = 422, description = "a field is invalid, or the job asks for more GPUs than the cluster has (it cannot fit)"),
        (status = 503, description = "model not available yet (first-start training)")
    )
)]
pub async fn predict_runtime(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Predictions<Checked<RuntimeAnswer>>>, ApiError> {
    predict_profiles(
        state,
        req,
        ModelKind::Runtime,
        |o| o.models.version(ModelKind::Runtime),
        Online::predict_runtime,
    )
    .await
}

/// `POST /v1/predict/queue-wait`.
#[utoipa::path(
    post,
    path = "/v1/predict/queue-wait",
    tag = "predict",
    summary = "Predict the queue wait (seconds, 95% upper bound) for one job (`job`) or a batch (`jobs`)",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`", body = Predictions<Checked<WaitAnswer>>),
        (status = 422, description = "a field is invalid, or the job asks for more GPUs than the cluster has (it cannot fit)"),
        (status = 503, description = "model not available yet (first-start training)")
    )
)]
pub async fn predict_queue_wait(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Predictions<Checked<WaitAnswer>>>, ApiError> {
    predict_profiles(
        state,
        req,
        ModelKind::QueueWait,
        |o| o.models.version(ModelKind::QueueWait),
        Online::predict_wait,
    )
    .await
}

/// `POST /v1/predict/failure`: the calibrated probability that each job ends failed.
#[utoipa::path(
    post,
    path = "/v1/predict/failure",
    tag = "predict",
    summary = "Predict the probability that the job ends failed (calibrated; no interval) for one job (`job`) or a batch (`jobs`)",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`", body = Predictions<Checked<FailureAnswer>>),
        (status = 422, description = "a field is invalid, or the job asks for more GPUs than the cluster has (it cannot fit)"),
        (status = 503, description = "model not available: no failure model in the registry (the bundled Philly trace has no job statuses; `augur train --task failure --dataset openb`, or retrain on an ingested history with statuses)")
    )
)]
pub async fn predict_failure(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Predictions<Checked<FailureAnswer>>>, ApiError> {
    predict_profiles(
        state,
        req,
        ModelKind::Failure,
        |o| o.models.version(ModelKind::Failure),
        Online::predict_failure,
    )
    .await
}

/// `POST /v1/predict/convergence`: when an ingested running job's metric curve converges.
#[utoipa::path(
    post,
    path = "/v1/predict/convergence",
    tag = "predict",
    summary = "Predict when an ingested running job's metric curve converges (give its `job_id`; its metric points with `at` are the curve, its `job_name` the benchmark): remaining and total wall seconds, epoch and final metric, each with an 80% interval",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`", body = Predictions<ConvergenceAnswer>),
        (status = 422, description = "no such job, or no metric points with a time, or over max_prediction_points"),
        (status = 503, description = "model not available yet (trained on the bundled MLPerf runs at first start)")
    )
)]
pub async fn predict_convergence(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Predictions<ConvergenceAnswer>>, ApiError> {
    let cost = |jobs: &[(String, PredictJob)]| {
        let o = state.online();
        jobs.iter()
            .map(|(_, j)| {
                let points = j.job_id.as_ref().and_then(|id| o.jobs.get(id));
                1 + points.map_or(0, |info| info.metric_points.len())
            })
            .sum()
    };
    let version = |o: &Online| o.models.version(ModelKind::Convergence);
    predict_in_pool(
        &state,
        ModelKind::Convergence.name(),
        req,
        cost,
        version,
        |o, path, j, _| {
            let Some(id) = &j.job_id else {
                return Err(ApiError::invalid(
                    format!("{path}.job_id"),
                    "convergence needs the job_id of an ingested job with metric points",
                ));
            };
            o.predict_convergence(id).map_err(|e| match e {
                ConvergenceFailure::Predict(e) => predict_error(e),
                ConvergenceFailure::Input(m) => ApiError::invalid(format!("{path}.job_id"), m),
            })
        },
    )
    .await
}
