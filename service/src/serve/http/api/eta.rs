//! `GET /v1/eta`: when the queued jobs will start and end — Augur's predicted start (median
//! and 95% bound of the queue wait predicted at submit), the scheduler's own estimate beside
//! it where the backend has one (Slurm's expected start, `squeue --start`), and the predicted
//! end (start plus the predicted run time, [`JobInfo::runtime`]: for the GPU type the job will
//! get). With `why=true` each job carries why it
//! waits ([`crate::serve::state::why`], the same reading as `GET /v1/jobs/{id}`).
//! `augur eta` prints it.

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::serve::http::error::ApiError;
use crate::serve::state::online::JobInfo;
use crate::serve::state::why::{model_start, model_start_upper, QueueSnapshot, WhyWaiting};
use crate::serve::AppState;

/// `?user=U&job=ID[,ID…]&why=true`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EtaQuery {
    /// Only this user's jobs.
    pub user: Option<String>,
    /// Only these jobs (comma-separated): store ids, or under `--backend slurm` Slurm job
    /// ids (`123`, `123_4`).
    pub job: Option<String>,
    /// Add why each job waits (`why`).
    pub why: Option<bool>,
}

/// One queued job's ETA. Times are Unix seconds on the events' clock.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobEta {
    pub job_id: String,
    /// Slurm's job id (`--backend slurm`).
    pub slurm_job_id: Option<String>,
    pub user: Option<String>,
    pub job_name: Option<String>,
    pub submitted_at: f64,
    /// Predicted start: submit + the median queue wait predicted at submit (not before now).
    pub start: Option<f64>,
    /// 95% bound of the start: submit + the wait's upper bound (not before now).
    pub start_upper: Option<f64>,
    /// The queue-wait prediction's coverage of `start_upper`.
    pub start_upper_coverage: Option<f64>,
    /// The scheduler's own expected start (Slurm's `squeue --start`), when it gave one.
    pub scheduler_start: Option<f64>,
    /// Predicted end: the predicted start + the predicted run time (for the GPU type it will
    /// get when one was named after its submit, else the runtime predicted at submit).
    pub end: Option<f64>,
    /// The GPU type named after its submit (steered, a flavor assigned), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// Model versions of the queue-wait and runtime predictions.
    pub queue_wait_model: Option<u32>,
    pub runtime_model: Option<u32>,
    /// With `why=true`: why it waits, as `GET /v1/jobs/{id}` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<WhyWaiting>,
}

/// `GET /v1/eta`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EtaView {
    /// "Now" on the events' clock.
    pub now: f64,
    /// The backend (`slurm` has scheduler estimates).
    pub backend: String,
    /// Queued jobs, earliest predicted start first.
    pub jobs: Vec<JobEta>,
}

/// `GET /v1/eta`: ETAs of the queued jobs.
#[utoipa::path(
    get,
    path = "/v1/eta",
    tag = "jobs",
    summary = "When queued jobs will start and end: Augur's predicted start (median, 95% bound) beside the scheduler's own estimate, and the predicted end; `why=true` adds why each waits (as `GET /v1/jobs/{id}`)",
    params(EtaQuery),
    responses(
        (status = 200, description = "the queued jobs that match", body = EtaView),
        (status = 422, description = "a malformed query (the field is named)")
    )
)]
pub async fn eta(
    State(state): State<AppState>,
    q: Result<Query<EtaQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<EtaView>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let wanted: Option<Vec<String>> = q.job.as_deref().map(|s| {
        s.split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    });
    if wanted.as_ref().is_some_and(Vec::is_empty) {
        return Err(ApiError::invalid("job", "give at least one job id"));
    }
    let backend = &state.ext.backend;
    let o = state.online();
    let now = o.now();
    let mut jobs: Vec<JobEta> = o
        .jobs
        .values()
        .filter(|j| j.started_at.is_none() && j.finished_at.is_none())
        .filter_map(|j| {
            let sid = backend.scheduler_id(&j.job_id);
            let user = j.profile.as_ref().and_then(|p| p.user.clone());
            if q.user.as_ref().is_some_and(|u| user.as_ref() != Some(u)) {
                return None;
            }
            if let Some(w) = &wanted {
                let hit = w
                    .iter()
                    .any(|id| *id == j.job_id || sid.as_ref() == Some(id));
                if !hit {
                    return None;
                }
            }
            let scheduler_start = backend.scheduler_start(&j.job_id);
            job_eta(j, now, sid, user, scheduler_start)
        })
        .collect();
    let queue = q.why.unwrap_or(false).then(|| QueueSnapshot::of(&o, now));
    drop(o);
    if let Some(queue) = queue {
        let queue = queue.with_free_by_type(backend.free_gpus_by_type());
        for j in &mut jobs {
            j.why = queue.why(&j.job_id, backend.as_ref());
        }
    }
    jobs.sort_by(|a, b| {
        a.start
            .unwrap_or(f64::INFINITY)
            .total_cmp(&b.start.unwrap_or(f64::INFINITY))
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    Ok(Json(EtaView {
        now,
        backend: state.config.backend.name().to_string(),
        jobs,
    }))
}

/// The ETA of a queued job `j` at `now` from the predictions made at its submit.
fn job_eta(
    j: &JobInfo,
    now: f64,
    slurm_job_id: Option<String>,
    user: Option<String>,
    scheduler_start: Option<f64>,
) -> Option<JobEta> {
    let submit = j.submitted_at?;
    let wait = j.queue_wait_at_submit;
    let runtime = j.runtime();
    let start = model_start(submit, wait.as_ref(), now);
    Some(JobEta {
        job_id: j.job_id.clone(),
        slurm_job_id,
        user,
        job_name: j.profile.as_ref().and_then(|p| p.job_name.clone()),
        submitted_at: submit,
        start,
        start_upper: model_start_upper(submit, wait.as_ref(), now),
        start_upper_coverage: wait.map(|w| w.coverage),
        scheduler_start,
        end: start.zip(runtime).map(|(s, r)| s + r.seconds),
        gpu_type: j.gpu_type.clone(),
        queue_wait_model: wait.map(|w| w.model_version),
        runtime_model: runtime.map(|r| r.model_version),
        why: None,
    })
}
