//! The DAG predictor's online state ([`DagOnline`]): nothing is learned from events (the
//! model reads only a job's graph), so it answers a DAG's makespan from its stages.

use std::sync::Arc;

use augur_datasets::dag::DagJob;
use serde::Serialize;

use super::DagPredictor;
use crate::contract::{JobEvent, JobQuery, OnlinePredictor};
use crate::PredictorError;

/// A DAG prediction as served (no interval: the model gives none).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DagAnswer {
    pub model_version: u32,
    /// Predicted makespan: the critical path of the predicted stage times with the learned
    /// correction.
    pub makespan_s: f64,
    /// The critical path of the predicted stage times.
    pub critical_path_s: f64,
    /// Predicted seconds of each stage, in the job's stage order.
    pub stage_seconds: Vec<f64>,
    /// What turned the critical path into the makespan: `makespan_correction`.
    pub calibration: &'static str,
}

/// The online state of a served [`DagPredictor`]: stateless, it answers DAG jobs with
/// [`DagOnline::predict_dag`]. A [`JobQuery`] holds a job profile, not its stages, so the
/// [`OnlinePredictor::predict`] path refuses it ([`PredictorError::NoDagStages`]).
#[derive(Debug, Clone)]
pub struct DagOnline {
    model: Arc<DagPredictor>,
    model_version: u32,
}

impl DagPredictor {
    /// The online state serving this predictor as registry version `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> DagOnline {
        DagOnline {
            model: self,
            model_version,
        }
    }
}

impl DagOnline {
    /// The predictor served.
    pub fn model(&self) -> &Arc<DagPredictor> {
        &self.model
    }

    /// The stage times and makespan of `job` before it runs (only its graph, task counts,
    /// kinds and declared inputs are read).
    pub fn predict_dag(&self, job: &DagJob) -> Result<DagAnswer, PredictorError> {
        let p = self.model.predict(job)?;
        Ok(DagAnswer {
            model_version: self.model_version,
            makespan_s: p.makespan_s,
            critical_path_s: p.critical_path_s,
            stage_seconds: p.stage_seconds,
            calibration: "makespan_correction",
        })
    }
}

impl OnlinePredictor for DagOnline {
    type Answer = DagAnswer;

    /// Nothing to learn from events: always None.
    fn observe(&mut self, _event: &JobEvent<'_>) -> Option<Result<DagAnswer, PredictorError>> {
        None
    }

    fn predict(&self, query: &JobQuery<'_>) -> Result<DagAnswer, PredictorError> {
        Err(PredictorError::NoDagStages {
            job_id: query.job.job_id.clone(),
        })
    }

    /// Keeps nothing per job.
    fn forget(&mut self, _job_id: &str) -> bool {
        false
    }
}
