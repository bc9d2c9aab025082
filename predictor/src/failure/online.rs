//! The failure predictor's online state ([`FailureOnline`]): the failure feature state fed
//! job by job (submits, and outcomes as jobs finish), and the answer issued at each job's
//! submit.

use std::collections::HashMap;
use std::sync::Arc;

use augur_datasets::{JobRecord, JobStatus};
use augur_features::{FailureFeatureState, JobHandle};
use serde::Serialize;

use super::svm::with_svm_scratch;
use super::{FailureModel, FailurePredictor};
use crate::calibration::platt::Calibrator;
use crate::contract::{JobEvent, JobQuery, OnlinePredictor};
use crate::feature_rows::with_row_buffer;
use crate::PredictorError;

/// A failure prediction as served: a calibrated probability (no interval).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FailureAnswer {
    pub model_version: u32,
    /// Calibrated probability that the job ends failed (from the served model).
    pub probability: f64,
    /// Which model is served: `gbdt` or `svm`.
    pub model: &'static str,
    /// The served model's calibration: `platt` or `isotonic`.
    pub calibration: &'static str,
}

/// What the state knows of one job.
#[derive(Debug, Clone, Default)]
struct JobState {
    submitted: bool,
    started_at: Option<f64>,
    finished: bool,
    /// Its submit in the feature state, until its outcome is reported.
    handle: Option<JobHandle>,
    /// The answer issued at its submit.
    issued: Option<FailureAnswer>,
}

/// The online state of a served [`FailurePredictor`]: its [`FailureFeatureState`] fed by
/// the job events (a job's outcome joins the failure histories when it finishes, with the
/// time it ran: the given duration, else finish − start), so a prediction at a job's
/// submit sees exactly what was known then. A second submit, start or finish of a job is
/// ignored.
#[derive(Debug)]
pub struct FailureOnline {
    model: Arc<FailurePredictor>,
    model_version: u32,
    features: FailureFeatureState,
    jobs: HashMap<String, JobState>,
}

impl FailurePredictor {
    /// A fresh online state serving this predictor as registry version `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> FailureOnline {
        FailureOnline {
            features: self.new_state(),
            model: self,
            model_version,
            jobs: HashMap::new(),
        }
    }
}

impl FailureOnline {
    /// The predictor served.
    pub fn model(&self) -> &Arc<FailurePredictor> {
        &self.model
    }

    /// The answer issued at the submit of `job_id`, if it was submitted and answered.
    pub fn issued(&self, job_id: &str) -> Option<&FailureAnswer> {
        self.jobs.get(job_id)?.issued.as_ref()
    }

    fn answer(&self, probability: f64) -> FailureAnswer {
        let (gbdt, svm) = self.model.calibrators();
        let calibration = match self.model.served {
            FailureModel::Gbdt => gbdt,
            FailureModel::Svm => svm,
        };
        FailureAnswer {
            model_version: self.model_version,
            probability,
            model: self.model.served.name(),
            calibration: match calibration {
                Calibrator::Platt { .. } => "platt",
                Calibrator::Isotonic { .. } => "isotonic",
            },
        }
    }

    fn on_submit(&mut self, job: &JobRecord) -> Option<Result<FailureAnswer, PredictorError>> {
        if self.jobs.get(&job.job_id).is_some_and(|j| j.submitted) {
            return None;
        }
        let answer = with_row_buffer(self.model.schema.len(), |row| {
            self.features.features_for(job, job.submit_time, row)?;
            let p = with_svm_scratch(|scratch| self.model.served_probability(row, scratch));
            Ok(self.answer(p))
        });
        let handle = self.features.observe_submit(job);
        let state = self.jobs.entry(job.job_id.clone()).or_default();
        state.submitted = true;
        state.handle = Some(handle);
        state.issued = answer.as_ref().ok().copied();
        Some(answer)
    }

    fn on_finish(&mut self, job_id: &str, at: f64, status: JobStatus, duration: Option<f64>) {
        let state = self.jobs.entry(job_id.to_string()).or_default();
        if state.finished {
            return;
        }
        state.finished = true;
        let ran = duration.or_else(|| state.started_at.map(|s| (at - s).max(0.0)));
        if let Some(h) = state.handle.take() {
            // the handle was issued by this state at the job's submit and is finished once
            let _ = self.features.observe_finish(h, at, ran, status);
        }
    }
}

impl OnlinePredictor for FailureOnline {
    type Answer = FailureAnswer;

    fn observe(&mut self, event: &JobEvent<'_>) -> Option<Result<FailureAnswer, PredictorError>> {
        match *event {
            JobEvent::Submitted { job } => self.on_submit(job),
            JobEvent::Started { job_id, at } => {
                let state = self.jobs.entry(job_id.to_string()).or_default();
                state.started_at.get_or_insert(at);
                None
            }
            JobEvent::Finished {
                job_id,
                at,
                status,
                duration,
            } => {
                self.on_finish(job_id, at, status, duration);
                None
            }
            JobEvent::MetricPoints { .. } | JobEvent::Clock { .. } => None,
        }
    }

    fn predict(&self, query: &JobQuery<'_>) -> Result<FailureAnswer, PredictorError> {
        with_row_buffer(self.model.schema.len(), |row| {
            self.features.features_at(query.job, query.at, row)?;
            let p = with_svm_scratch(|scratch| self.model.served_probability(row, scratch));
            Ok(self.answer(p))
        })
    }

    fn forget(&mut self, job_id: &str) -> bool {
        if !self.jobs.get(job_id).is_some_and(|j| j.finished) {
            return false;
        }
        self.jobs.remove(job_id).is_some()
    }
}
