//! What `augur serve --backend kubernetes` writes back onto the cluster: each queued or
//! running job's predictions as annotations (through the backend's rate-limited
//! [`KubeBackend::write_back`]), and a Kubernetes Event for each scaling decision carried
//! out. Only the lease holder writes, never in dry-run (the backend checks both).
//!
//! The values are the answers recorded at the job's submit (what `GET /v1/jobs/{id}` shows as
//! `*_at_submit`), the run time being the one for the GPU type the job will get when one was
//! named after its submit ([`JobInfo::runtime`](crate::serve::state::online::JobInfo::runtime),
//! `runtime` in `GET /v1/jobs/{id}`); a job submitted before a runtime model was served gets
//! the current runtime answer for its profile at its submit time instead. A queued job also gets the advisor's
//! headline ([`job_advice`]: what `POST /v1/advise` answers for it now) when its best option
//! differs meaningfully from the request; the backend decides which jobs are advised in a
//! round (a few, each at most every few minutes), so the advisor's cost stays bounded.

use augur_autoscaler::kubernetes::{
    AdviceAnswer, JobAdvice, JobKey, JobPhase, JobPredictions, KubeBackend, Span,
};
use augur_autoscaler::live::{LiveDecision, Outcome};
use augur_autoscaler::Action;
use augur_predictor::ModelKind;

use crate::serve::advice::{self, choices, AdviceRequest, Scaling};
use crate::serve::state::online::Online;
use crate::serve::AppState;

/// The predictions to write for job `key` in `phase`, from the online state.
pub fn job_predictions(online: &Online, key: &JobKey, phase: JobPhase) -> Option<JobPredictions> {
    let id = key.to_string();
    let job = online.jobs.get(&id)?;
    let submitted = job.submitted_at?;
    let runtime = job.runtime().or_else(|| {
        let profile = job.profile.clone().unwrap_or_default();
        online.predict_runtime(&id, &profile, submitted).ok()
    });
    let mut p = JobPredictions::default();
    if let Some(r) = runtime {
        p.runtime = Some((
            r.seconds,
            Span {
                lower: r.lower,
                upper: r.upper,
                coverage: r.coverage,
            },
        ));
        p.model_versions
            .push((ModelKind::Runtime.name(), r.model_version));
    }
    if phase == JobPhase::Queued {
        if let Some(w) = job.queue_wait_at_submit {
            p.start = Some((
                submitted + w.seconds,
                Span {
                    lower: submitted + w.lower,
                    upper: submitted + w.upper,
                    coverage: w.coverage,
                },
            ));
            p.model_versions
                .push((ModelKind::QueueWait.name(), w.model_version));
        }
    }
    let began = match phase {
        JobPhase::Running => job.started_at,
        JobPhase::Queued => p.start.map(|(median, _)| median),
    };
    p.eta = began.zip(p.runtime).map(|(s, (r, _))| s + r);
    if let Some(f) = job.failure_at_submit {
        p.failure_probability = Some(f.probability);
        p.model_versions
            .push((ModelKind::Failure.name(), f.model_version));
    }
    Some(p)
}

/// The advice for the queued job `key` at the online state's now (the options `POST
/// /v1/advise` weighs by default), when its earliest-finishing option differs meaningfully
/// from the request ([`advice::Advice::headline`]); unknown while the job is not ingested yet
/// or the advisor cannot answer (a model not served).
pub fn job_advice(online: &Online, scaling: &Scaling, key: &JobKey) -> AdviceAnswer {
    let id = key.to_string();
    let Some(job) = online.jobs.get(&id) else {
        return AdviceAnswer::Unknown;
    };
    if job.submitted_at.is_none() {
        return AdviceAnswer::Unknown;
    }
    if job.started_at.is_some() {
        return AdviceAnswer::Same;
    }
    let profile = job.profile.clone().unwrap_or_default();
    let req = AdviceRequest::default();
    let advice = match advice::advise_at(
        online,
        scaling.reshaper(),
        Some(&id),
        &profile,
        &req,
        online.now(),
    ) {
        Ok(a) => a,
        Err(e) => {
            tracing::debug!(job = %id, error = %e, "no advice for the queued job");
            return AdviceAnswer::Unknown;
        }
    };
    let Some(headline) = advice.headline() else {
        return AdviceAnswer::Same;
    };
    let request = advice.options.iter().find(|o| o.is_request);
    let best = advice.options.iter().find(|o| o.earliest_finish);
    let (Some(request), Some(best)) = (request, best) else {
        return AdviceAnswer::Same;
    };
    let gpus = best
        .gpus
        .filter(|g| g.is_finite() && *g >= 0.0 && best.gpus != request.gpus)
        .map(|g| g.round() as u32);
    let differs = |a: &Option<String>, b: &Option<String>| !choices::same(a, b);
    AdviceAnswer::Differs(JobAdvice {
        headline,
        gpus,
        gpu_type: best
            .gpu_type
            .clone()
            .filter(|_| differs(&best.gpu_type, &request.gpu_type)),
        queue: best
            .queue
            .clone()
            .filter(|_| differs(&best.queue, &request.queue)),
    })
}

/// Writes the predictions of every queued or running job onto its objects, and the advice of
/// the queued ones.
pub async fn write_predictions(state: &AppState, backend: &mut KubeBackend, dry_run: bool) {
    let scaling = &state.ext.scaling;
    let report = backend
        .write_back(
            |key, phase| job_predictions(&state.online(), key, phase),
            |key| job_advice(&state.online(), scaling, key),
            dry_run,
        )
        .await;
    if report.patched + report.failed > 0 {
        tracing::debug!(?report, "predictions written back");
    }
}

/// The Event of a decision carried out: its reason (CamelCase, as Kubernetes Events name
/// theirs) and message.
pub fn decision_event(d: &LiveDecision) -> Option<(&'static str, String)> {
    if d.outcome != Outcome::Applied {
        return None;
    }
    let why = d.decision.reason.name();
    Some(match d.decision.action {
        Action::Admit { workers, .. } => (
            "AugurAdmitted",
            format!("augur sized the queued job to {workers} GPUs ({why})"),
        ),
        Action::SetWorkers { workers, .. } => (
            "AugurScaled",
            format!("augur rescaled the job to {workers} GPUs ({why})"),
        ),
        Action::Suspend { .. } => ("AugurSuspended", format!("augur suspended the job ({why})")),
    })
}

/// Posts the Events of `decisions` (those carried out) on their jobs.
pub async fn post_decision_events(backend: &KubeBackend, decisions: &[LiveDecision]) {
    for d in decisions {
        let Some((reason, message)) = decision_event(d) else {
            continue;
        };
        let Some(key) = backend.job_key(d.decision.action.job()).cloned() else {
            continue;
        };
        if let Err(e) = backend.record_event(&key, reason, &message).await {
            tracing::warn!(job = %key, error = %e, "posting the decision's Event failed");
        }
    }
}
