//! The fitted DAG predictor: stage times from the GRU on the GBDT base, and the corrected
//! makespan.

use augur_datasets::dag::DagJob;
use augur_models::gbdt::GbdtModel;
use augur_models::gru::GruModel;
use augur_models::Predict;
use serde::{Deserialize, Serialize};

use super::encoder::{with_base, DagEncoder};
use super::makespan::{correction_row, MakespanCorrection};
use crate::PredictorError;

/// A prediction for one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DagPrediction {
    /// Predicted seconds of each stage, in the job's stage (file) order.
    pub stage_seconds: Vec<f64>,
    /// Critical path of the predicted stage times.
    pub critical_path_s: f64,
    /// Makespan: the critical path with the learned correction.
    pub makespan_s: f64,
}

/// The served DAG model: encoder + GRU over stages + makespan correction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DagPredictor {
    /// [`super::DAG_FEATURE_SCHEMA_VERSION`] at training.
    pub schema_version: u32,
    /// What it was trained on (`tpch`, `wfcommons`, ...).
    pub dataset: String,
    pub encoder: DagEncoder,
    /// Per-stage GBDT on the stage rows: its ln seconds are the GRU's base (input column and
    /// offset); the GRU predicts the residual from the sequence context.
    pub base: GbdtModel,
    pub stage_model: GruModel,
    pub correction: MakespanCorrection,
    /// Jobs it was trained on.
    pub training_jobs: usize,
}

impl DagPredictor {
    /// Predicts the stage times and makespan of `job` before it runs (only its graph, task
    /// counts, kinds and declared inputs are read, never its measured durations).
    pub fn predict(&self, job: &DagJob) -> Result<DagPrediction, PredictorError> {
        let enc = self.encoder.encode(job)?;
        let base: Vec<f64> = (0..enc.len())
            .map(|t| self.base.predict_row(enc.row(t)))
            .collect();
        let resid = self.stage_model.predict(&with_base(&enc.sequence, &base))?;
        let secs: Vec<f64> = base
            .iter()
            .zip(&resid)
            .map(|(b, r)| (b + r).exp())
            .collect();
        let row = correction_row(job, &enc, &secs);
        let mut stage_seconds = vec![0.0; secs.len()];
        for (t, &i) in enc.order.iter().enumerate() {
            stage_seconds[i] = secs[t];
        }
        Ok(DagPrediction {
            stage_seconds,
            critical_path_s: f64::from(row[0]).exp(),
            makespan_s: self.correction.apply(&row),
        })
    }
}
