//! The convergence predictor's inputs: a running job's metric points, what is known about
//! the job, finished training runs (from the bundled MLPerf v1.0 logs), and their checks.

use std::collections::HashMap;

use crate::PredictorError;
use augur_datasets::curves::{Curve, MlperfRun, RunStatus};
use serde::{Deserialize, Serialize};

/// One evaluation of a job's metric: its value at a wall time since the job's start (may
/// be slightly negative for an evaluation logged before the start marker), with the epoch
/// (or step) and samples seen when reported. The one type for it, from the MLPerf curve
/// reader; a running job's reported training metrics arrive as
/// [`StepMetrics`](crate::contract::StepMetrics) and are turned into these.
pub use augur_datasets::curves::CurvePoint;

/// Whether the metric improves by falling (loss, WER) or by rising (accuracy, AUC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Falling,
    Rising,
}

impl Direction {
    /// `+1` for falling, `−1` for rising: `y = c + sign·s·φ(x)` with `s ≥ 0`, `φ` decreasing.
    pub(super) fn sign(self) -> f64 {
        match self {
            Direction::Falling => 1.0,
            Direction::Rising => -1.0,
        }
    }

    /// Guesses the direction from a curve: rising when the later half is higher on average.
    pub fn infer(values: &[f64]) -> Direction {
        let n = values.len();
        if n < 2 {
            return Direction::Falling;
        }
        let half = n / 2;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        if mean(&values[half..]) > mean(&values[..half.max(1)]) {
            Direction::Rising
        } else {
            Direction::Falling
        }
    }
}

/// What is known about a job besides its curve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobContext {
    /// Benchmark / model name (`resnet`, `bert`, ...).
    pub benchmark: String,
    /// Accelerators in total.
    pub accelerators: Option<u64>,
    /// Global batch size.
    pub global_batch_size: Option<u64>,
    /// Accelerator model (`NVIDIA A100-SXM4-80GB (400W)`, `TPU`, ...).
    pub accelerator_model: Option<String>,
}

/// A finished training run: context, its whole curve and its time-to-train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceRun {
    pub run_id: String,
    pub context: JobContext,
    /// When it started (ms since the Unix epoch): the split key.
    pub start_ms: i64,
    /// Wall seconds from start to reaching the target (MLPerf time-to-train).
    pub time_to_train_s: f64,
    /// Its metric points, in time order.
    pub points: Vec<CurvePoint>,
}

/// The successful MLPerf runs with a time-to-train, as [`ConvergenceRun`]s (run order). A run
/// without scalar eval points (maskrcnn logs a {BBOX,SEGM} object) is kept with no points:
/// it still informs the time-to-train prior.
pub fn mlperf_convergence_runs(runs: &[MlperfRun], curves: &[Curve]) -> Vec<ConvergenceRun> {
    let by_run: HashMap<&str, &Curve> = curves
        .iter()
        .filter(|c| c.metric == "eval_accuracy")
        .map(|c| (c.run_id.as_str(), c))
        .collect();
    runs.iter()
        .filter(|r| r.status == Some(RunStatus::Success))
        .filter_map(|r| {
            let duration = r.duration_s.filter(|d| d.is_finite() && *d > 0.0)?;
            let points: Vec<CurvePoint> = by_run
                .get(r.run_id.as_str())
                .map(|c| c.points.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|p| p.value.is_finite() && p.wall_time_s.is_finite())
                .map(|p| CurvePoint {
                    wall_time_s: p.wall_time_s,
                    epoch: p.epoch.filter(|e| e.is_finite()),
                    samples: p.samples.filter(|s| s.is_finite()),
                    value: p.value,
                })
                .collect();
            Some(ConvergenceRun {
                run_id: r.run_id.clone(),
                context: JobContext {
                    benchmark: r.benchmark.clone(),
                    accelerators: r.num_accelerators(),
                    global_batch_size: r.global_batch_size,
                    accelerator_model: r.accelerator_model.clone(),
                },
                start_ms: r.run_start_ms,
                time_to_train_s: duration,
                points,
            })
        })
        .collect()
}

/// Reads the bundled MLPerf v1.0 `runs.csv.gz` and `eval_curves.csv.gz` (under
/// `datasets/data/mlperf-v1.0`) into [`ConvergenceRun`]s.
pub fn load_bundled_mlperf() -> Result<Vec<ConvergenceRun>, augur_datasets::DatasetError> {
    let opts = augur_datasets::ReadOptions::default();
    let runs_path = augur_datasets::bundled::bundled_file("mlperf-v1.0/runs.csv.gz")?;
    let curves_path = augur_datasets::bundled::bundled_file("mlperf-v1.0/eval_curves.csv.gz")?;
    let (runs, _) = augur_datasets::curves::read_mlperf_runs(&runs_path, &opts)?;
    let (curves, _) = augur_datasets::curves::read_mlperf_curves(&curves_path, &opts)?;
    Ok(mlperf_convergence_runs(&runs, &curves))
}

/// Checks points: at least one, all finite, wall time non-decreasing.
pub fn validate_points(points: &[CurvePoint]) -> Result<(), PredictorError> {
    if points.is_empty() {
        return Err(PredictorError::NoMetricPoints);
    }
    let mut prev = f64::NEG_INFINITY;
    for (index, p) in points.iter().enumerate() {
        for (field, value) in [("wall_time_s", p.wall_time_s), ("value", p.value)] {
            if !value.is_finite() {
                return Err(PredictorError::NonFinitePoint {
                    index,
                    field,
                    value,
                });
            }
        }
        for (field, value) in [("epoch", p.epoch), ("samples", p.samples)] {
            if let Some(value) = value.filter(|v| !v.is_finite()) {
                return Err(PredictorError::NonFinitePoint {
                    index,
                    field,
                    value,
                });
            }
        }
        if p.wall_time_s < prev {
            return Err(PredictorError::PointsOutOfOrder {
                index,
                prev,
                now: p.wall_time_s,
            });
        }
        prev = p.wall_time_s;
    }
    Ok(())
}
