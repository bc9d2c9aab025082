//! Makespans: the critical path of stage times, the measured makespan of a job, and the
//! learned correction from the critical path of predicted stage times to the makespan.

use std::collections::HashMap;

use augur_datasets::dag::DagJob;
use augur_models::gbdt::Objective;
use augur_models::linear::{LinearModel, LinearParams};
use augur_models::{Fit, Matrix, ModelError, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use super::encoder::EncodedDag;
use super::ln_s;
use crate::PredictorError;

/// Names of the makespan-correction features, in order (all from predicted stage times and
/// the graph).
pub const CORRECTION_FEATURES: [&str; 6] = [
    "ln_critical_path",
    "ln_total_work",
    "ln_stages",
    "ln_job_depth",
    "ln_max_width",
    "ln_executors",
];

/// Measured stage seconds of `job` in the order of `enc`; an error when one is missing.
pub(super) fn stage_targets(job: &DagJob, enc: &EncodedDag) -> Result<Vec<f64>, PredictorError> {
    enc.order
        .iter()
        .map(|&i| {
            let s = &job.stages[i];
            s.duration_s
                .filter(|d| d.is_finite() && *d >= 0.0)
                .ok_or_else(|| PredictorError::MissingStageDuration {
                    job: job.id.clone(),
                    stage: s.id.clone(),
                })
        })
        .collect()
}

/// Critical path (longest path) in seconds of stage times given in topological order.
pub fn critical_path_ordered(parents: &[Vec<usize>], seconds: &[f64]) -> f64 {
    let mut finish = vec![0.0f64; seconds.len()];
    let mut best = 0.0f64;
    for t in 0..seconds.len() {
        let start = parents[t].iter().map(|&p| finish[p]).fold(0.0, f64::max);
        finish[t] = start + seconds[t].max(0.0);
        best = best.max(finish[t]);
    }
    best
}

/// The measured makespan of a job: the recorded one (WfCommons), else the critical path of
/// its stage durations (TPC-H: the dataset's per-stage estimate at that executor count; no
/// end-to-end makespan was recorded).
pub fn actual_makespan_s(job: &DagJob) -> Option<f64> {
    job.recorded_makespan_s
        .filter(|m| m.is_finite() && *m > 0.0)
        .or_else(|| job.critical_path_s())
}

/// Correction features of a job from predicted stage seconds (topological order).
pub(super) fn correction_row(job: &DagJob, enc: &EncodedDag, seconds: &[f64]) -> [f32; 6] {
    let cp = critical_path_ordered(&enc.parents, seconds);
    let total: f64 = seconds.iter().sum();
    let job_depth = enc.depth.iter().max().map_or(0, |d| d + 1);
    let mut width: HashMap<usize, usize> = HashMap::new();
    for d in &enc.depth {
        *width.entry(*d).or_default() += 1;
    }
    let max_width = width.values().copied().max().unwrap_or(1);
    [
        ln_s(cp) as f32,
        ln_s(total) as f32,
        (enc.len().max(1) as f64).ln() as f32,
        (job_depth.max(1) as f64).ln() as f32,
        (max_width as f64).ln() as f32,
        job.executors.map_or(f32::NAN, |e| f64::from(e).ln() as f32),
    ]
}

/// Makespan = critical path × `exp(model(correction features))`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MakespanCorrection {
    model: LinearModel,
}

impl MakespanCorrection {
    /// Fits ln(actual makespan) − ln(critical path) on the given jobs (L1, ridge 1.0).
    pub(super) fn fit(
        rows: &[[f32; 6]],
        ln_ratio: &[f64],
    ) -> Result<MakespanCorrection, ModelError> {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let x = Matrix::new(&flat, rows.len(), CORRECTION_FEATURES.len())?;
        let params = LinearParams {
            objective: Objective::L1,
            l2: 1.0,
            ..LinearParams::default()
        };
        Ok(MakespanCorrection {
            model: params.fit(&TrainSet::new(x, ln_ratio, None)?)?,
        })
    }
    /// Corrected makespan from a correction row (its first entry is ln critical path).
    pub(super) fn apply(&self, row: &[f32; 6]) -> f64 {
        (f64::from(row[0]) + self.model.predict_row(row)).exp()
    }
}
