//! The failure predictor's online state ([`FailureOnline`]): the failure feature state fed
//! job by job (submits, and outcomes as jobs finish), and the answer issued at each job's
//! submit.

use std::collections::HashMap;
use std::sync::Arc;

use augur_datasets::{JobRecord, JobStatus};
use augur_features::{FailureFeatureState, JobHandle};
use serde::{Deserialize, Serialize};

use super::svm::with_svm_scratch;
use super::FailurePredictor;
use crate::calibration::platt::Calibrator;
use crate::contract::{JobEvent, JobQuery, OnlinePredictor};
use crate::feature_rows::with_row_buffer;
use crate::PredictorError;

/// A failure prediction as served: a calibrated probability (no interval).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FailureOnlineAnswer {
    pub model_version: u32,
    /// Calibrated probability that the job ends failed (from the served model).
    pub probability: f64,
    /// Which model is served: `gbdt`, `svm` or `past_rate`.
    pub model: &'static str,
    /// The served model's calibration: `platt` or `isotonic`.
    pub calibration: &'static str,
}

/// What the state knows of one job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct JobState {
    submitted: bool,
    started_at: Option<f64>,
    finished: bool,
    /// Its submit in the feature state, until its outcome is reported.
    handle: Option<JobHandle>,
    /// The probability answered at its submit (the rest of the answer is the model's).
    issued: Option<f64>,
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
    state: FailureOnlineState,
}

/// What a [`FailureOnline`] learned from the events, without its model: the part a
/// service's snapshot keeps (restored with [`FailurePredictor::online_from`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureOnlineState {
    features: FailureFeatureState,
    jobs: HashMap<String, JobState>,
}

impl FailurePredictor {
    /// A fresh online state serving this predictor as registry version `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> FailureOnline {
        FailureOnline {
            state: FailureOnlineState {
                features: self.new_state(),
                jobs: HashMap::new(),
            },
            model: self,
            model_version,
        }
    }

    /// The online state `state` (saved from a state serving this model) serving this
    /// predictor as `model_version`; refused when its feature schema is not this model's.
    pub fn online_from(
        self: Arc<Self>,
        model_version: u32,
        state: FailureOnlineState,
    ) -> Result<FailureOnline, PredictorError> {
        if state.features.schema() != &self.schema {
            return Err(PredictorError::StateMismatch {
                kind: "failure",
                what: "feature schema",
            });
        }
        Ok(FailureOnline {
            model: self,
            model_version,
            state,
        })
    }
}

impl FailureOnline {
    /// The predictor served.
    pub fn model(&self) -> &Arc<FailurePredictor> {
        &self.model
    }

    /// What it learned from the events (to save; see [`FailurePredictor::online_from`]).
    pub fn state(&self) -> &FailureOnlineState {
        &self.state
    }

    /// The answer issued at the submit of `job_id`, if it was submitted and answered.
    pub fn issued(&self, job_id: &str) -> Option<FailureOnlineAnswer> {
        let probability = self.state.jobs.get(job_id)?.issued?;
        Some(self.answer(probability))
    }

    fn answer(&self, probability: f64) -> FailureOnlineAnswer {
        FailureOnlineAnswer {
            model_version: self.model_version,
            probability,
            model: self.model.served.name(),
            calibration: match self.model.served_calibrator() {
                Calibrator::Platt { .. } => "platt",
                Calibrator::Isotonic { .. } => "isotonic",
            },
        }
    }

    fn on_submit(
        &mut self,
        job: &JobRecord,
    ) -> Option<Result<FailureOnlineAnswer, PredictorError>> {
        if self
            .state
            .jobs
            .get(&job.job_id)
            .is_some_and(|j| j.submitted)
        {
            return None;
        }
        let answer = with_row_buffer(self.model.schema.len(), |row| {
            self.state
                .features
                .features_for(job, job.submit_time, row)?;
            let p = with_svm_scratch(|scratch| self.model.served_probability(row, scratch));
            Ok(self.answer(p))
        });
        let handle = self.state.features.observe_submit(job);
        let state = self.state.jobs.entry(job.job_id.clone()).or_default();
        state.submitted = true;
        state.handle = Some(handle);
        state.issued = answer.as_ref().ok().map(|a| a.probability);
        Some(answer)
    }

    fn on_finish(&mut self, job_id: &str, at: f64, status: JobStatus, duration: Option<f64>) {
        let state = self.state.jobs.entry(job_id.to_string()).or_default();
        if state.finished {
            return;
        }
        state.finished = true;
        let ran = duration.or_else(|| state.started_at.map(|s| (at - s).max(0.0)));
        if let Some(h) = state.handle.take() {
            // the handle was issued by this state at the job's submit and is finished once
            let _ = self.state.features.observe_finish(h, at, ran, status);
        }
    }
}

impl OnlinePredictor for FailureOnline {
    type Answer = FailureOnlineAnswer;

    fn observe(
        &mut self,
        event: &JobEvent<'_>,
    ) -> Option<Result<FailureOnlineAnswer, PredictorError>> {
        match *event {
            JobEvent::Submitted { job } => self.on_submit(job),
            JobEvent::Started { job_id, at } => {
                let state = self.state.jobs.entry(job_id.to_string()).or_default();
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

    fn predict(&self, query: &JobQuery<'_>) -> Result<FailureOnlineAnswer, PredictorError> {
        let own = self
            .state
            .jobs
            .get(&query.job.job_id)
            .and_then(|j| j.handle);
        with_row_buffer(self.model.schema.len(), |row| {
            self.state
                .features
                .features_before(query.job, query.at, own, row)?;
            let p = with_svm_scratch(|scratch| self.model.served_probability(row, scratch));
            Ok(self.answer(p))
        })
    }

    fn forget(&mut self, job_id: &str) -> bool {
        if !self.state.jobs.get(job_id).is_some_and(|j| j.finished) {
            return false;
        }
        self.state.jobs.remove(job_id).is_some()
    }
}
