//! `GET /v1/jobs/{id}`: what is known and predicted about one job, with ETAs, and for a
//! queued job why it waits ([`crate::serve::state::why`]).

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::serve::http::error::ApiError;
use crate::serve::state::online::{JobInfo, RuntimeAnswer};
use crate::serve::state::why::{model_start, QueueSnapshot, WhyWaiting};
use crate::serve::AppState;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Finished,
    Running,
    Queued,
    /// Seen only through events other than its submit.
    Unknown,
}

/// When a job is expected to start and finish, on the events' clock (the fields that apply
/// to its phase).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct Eta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_in_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_in_seconds: Option<f64>,
    /// A queued job is past its predicted start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue_start: Option<bool>,
    /// A running job is past its predicted finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue_finish: Option<bool>,
    /// The upper end of a running job's finish interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_upper: Option<f64>,
}

/// What actually happened, seconds.
#[derive(Debug, Serialize, ToSchema)]
pub struct Actual {
    pub runtime: Option<f64>,
    pub queue_wait: Option<f64>,
}

/// What Augur knows and predicts about a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    /// Events seen and the predictions made at its submit (the latest run of this id).
    pub job: JobInfo,
    /// Earlier runs of this id (it was submitted again after it finished), oldest first.
    pub earlier_runs: Vec<JobInfo>,
    pub phase: Phase,
    /// "Now" on the events' clock.
    pub now: f64,
    pub eta: Eta,
    /// The job's predicted run time as every endpoint gives it (the write-back annotations,
    /// `GET /v1/eta`, `eta` here): `job.runtime_on_type` when its GPU type was named after
    /// its submit (`job.gpu_type`), else `job.runtime_at_submit`.
    pub runtime: Option<RuntimeAnswer>,
    pub actual: Actual,
    /// "Now": the runtime answer for this job's profile at `now`, from everything ingested
    /// so far except the job's own submit and jobs submitted at `now` or later, by the model
    /// served now; the same answer as `POST /v1/predict/runtime` with its `job_id`. At the
    /// moment of its submit (nothing ingested since) it equals `job.runtime_at_submit`
    /// and the answer by its profile with `at` = its submit time. "At submit" is
    /// `job.runtime_at_submit`: the stored answer issued when the submit was ingested, by
    /// the model served then, never recomputed.
    pub runtime_now: Option<RuntimeAnswer>,
    /// A queued job only: what holds it — the jobs and GPUs ahead, the shape it waits
    /// for, the running jobs whose predicted ends free enough for it and when (the
    /// queue-drain reading, beside the queue-wait model's start of `eta`), and the
    /// scheduler's own reason (Slurm's `Reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<WhyWaiting>,
}

fn phase_of(info: &JobInfo) -> Phase {
    if info.finished_at.is_some() {
        Phase::Finished
    } else if info.started_at.is_some() {
        Phase::Running
    } else if info.submitted_at.is_some() {
        Phase::Queued
    } else {
        Phase::Unknown
    }
}

/// The ETAs of a job in `phase` at `now`, from the queue wait predicted at its submit and
/// its predicted run time ([`JobInfo::runtime`]: for the GPU type it will get).
fn eta_of(info: &JobInfo, phase: Phase, now: f64) -> Eta {
    let runtime = info.runtime();
    let wait = info.queue_wait_at_submit;
    let mut eta = Eta::default();
    match phase {
        Phase::Queued => {
            if let Some(submit) = info.submitted_at {
                let start = model_start(submit, wait.as_ref(), now).unwrap_or(now);
                eta.start = Some(start);
                eta.start_in_seconds = Some((start - now).max(0.0));
                if let Some(r) = runtime {
                    eta.finish = Some(start + r.seconds);
                    eta.finish_in_seconds = Some((start + r.seconds - now).max(0.0));
                }
                eta.overdue_start = Some(wait.is_some_and(|w| submit + w.seconds < now));
            }
        }
        Phase::Running => {
            if let (Some(s), Some(r)) = (info.started_at, runtime) {
                let finish = (s + r.seconds).max(now);
                eta.start = Some(s);
                eta.finish = Some(finish);
                eta.finish_in_seconds = Some(finish - now);
                eta.overdue_finish = Some(s + r.seconds < now);
                eta.finish_upper = Some((s + r.upper).max(now));
            }
        }
        Phase::Finished | Phase::Unknown => {}
    }
    eta
}

/// The 404 for a job not in memory: never ingested, or finished before the retention
/// window (then it says where its events are).
async fn not_held(state: &AppState, id: String, horizon: Option<f64>) -> ApiError {
    let Some(horizon) = horizon else {
        return ApiError::not_found(format!("no job `{id}` has been ingested"));
    };
    let days = state.config.retention_days;
    let store = state.store.clone();
    let key = id.clone();
    // the answer is a 404 either way: a failed read only loses where the events are
    let stored = match tokio::task::spawn_blocking(move || store.job_events(&key)).await {
        Ok(Ok(stored)) => stored,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "reading a job's events from the store failed");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading a job's events from the store failed");
            None
        }
    };
    match stored {
        Some((first, last, n)) => ApiError::not_found(format!(
            "job `{id}` finished before the retention window ({days} days of job time) and left memory; its {n} events are in the store at seq {first}..={last} (GET /v1/events?after={})",
            first - 1
        )),
        None => ApiError::not_found(format!(
            "no job `{id}` is held: it was never ingested, or it finished before the retention window ({days} days of job time; runs that finished up to {horizon} have left memory) and its events are in the archive (GET /v1/events reads the archive, then the database)"
        )),
    }
}

/// `GET /v1/jobs/{id}`: what is known and predicted about a job, with ETAs.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    summary = "What Augur knows and predicts about a job (its latest run; earlier runs of a re-used id are listed): events seen, the answers stored at submit (`runtime_at_submit`, ...), the runtime answer now (`runtime_now`), ETA to start and to finish, and for a queued job why it waits (`why`)",
    params(("id" = String, Path, description = "The job's id in the ingested events")),
    responses(
        (status = 200, description = "the job", body = JobView),
        (status = 404, description = "no such job ingested, or it finished before the retention window (the message says where its events are)")
    )
)]
pub async fn job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let (held, horizon) = {
        let o = state.online();
        (o.jobs.get(&id).cloned(), o.retention.horizon)
    };
    let Some(info) = held else {
        return Err(not_held(&state, id, horizon).await);
    };
    let o = state.online();
    let now = o.now();
    let earlier_runs = o.earlier_runs.get(&id).cloned().unwrap_or_default();
    // a job not submitted yet has no prediction; one seen only through a finish neither
    let phase = phase_of(&info);
    let eta = eta_of(&info, phase, now);
    let runtime = info.runtime();
    let actual_wait = info
        .started_at
        .zip(info.submitted_at)
        .map(|(s, b)| (s - b).max(0.0));
    // the "now" answer for a job not yet finished (see `JobView::runtime_now`)
    let runtime_now = if phase != Phase::Finished {
        info.profile
            .as_ref()
            .and_then(|p| o.predict_runtime(&id, p, now).ok())
    } else {
        None
    };
    // the queue is copied under the lock, read after it
    let queue = (phase == Phase::Queued).then(|| QueueSnapshot::of(&o, now));
    drop(o);
    let backend = &state.ext.backend;
    let why = queue.and_then(|q| {
        q.with_free_by_type(backend.free_gpus_by_type())
            .why(&id, backend.as_ref())
    });
    let actual = Actual {
        runtime: info.duration,
        queue_wait: actual_wait,
    };
    Ok(Json(JobView {
        job: info,
        earlier_runs,
        phase,
        now,
        eta,
        runtime,
        actual,
        runtime_now,
        why,
    }))
}
