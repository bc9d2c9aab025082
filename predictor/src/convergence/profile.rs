//! What the training curves of each benchmark say about it: the metric's direction, the
//! quality target, the progress axis and the progress to target.

use std::collections::BTreeMap;

use augur_numeric::median;
use serde::{Deserialize, Serialize};

use super::{ConvergenceRun, CurvePoint, Direction};

/// Which progress axis a benchmark's curves have (besides wall time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgressAxis {
    Epoch,
    Samples,
    /// Epochs are degenerate (bert logs epoch 1 throughout) and no samples are logged.
    WallTime,
}

/// What the training curves of a benchmark say about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkProfile {
    pub direction: Direction,
    /// The quality target: the least-good final value among successful training runs.
    pub target: f64,
    pub axis: ProgressAxis,
    /// Median of ln(final progress) on that axis (epochs or samples to target), per global
    /// batch size, and over all runs.
    pub ln_final_progress_by_batch: BTreeMap<u64, (f64, usize)>,
    pub ln_final_progress: Option<f64>,
    /// Index of the benchmark (a model feature).
    pub index: usize,
    pub n_runs: usize,
}

pub(super) fn axis_value(p: &CurvePoint, axis: ProgressAxis) -> Option<f64> {
    match axis {
        ProgressAxis::Epoch => p.epoch,
        ProgressAxis::Samples => p.samples,
        ProgressAxis::WallTime => Some(p.wall_time_s),
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

pub(super) fn profile_benchmarks(runs: &[&ConvergenceRun]) -> BTreeMap<String, BenchmarkProfile> {
    let mut per: BTreeMap<&str, Vec<&ConvergenceRun>> = BTreeMap::new();
    for r in runs {
        per.entry(r.context.benchmark.as_str()).or_default().push(r);
    }
    let mut out = BTreeMap::new();
    for (index, (name, rs)) in per.into_iter().enumerate() {
        let rising = rs
            .iter()
            .filter(|r| {
                let v: Vec<f64> = r.points.iter().map(|p| p.value).collect();
                Direction::infer(&v) == Direction::Rising
            })
            .count();
        let direction = if 2 * rising >= rs.len() {
            Direction::Rising
        } else {
            Direction::Falling
        };
        let finals = rs.iter().filter_map(|r| r.points.last().map(|p| p.value));
        let target = match direction {
            Direction::Rising => finals.fold(f64::INFINITY, f64::min),
            Direction::Falling => finals.fold(f64::NEG_INFINITY, f64::max),
        };
        // an axis is usable when it strictly grows over most runs' curves
        let grows = |axis: ProgressAxis| {
            rs.iter()
                .filter(|r| {
                    let v: Vec<f64> = r
                        .points
                        .iter()
                        .filter_map(|p| axis_value(p, axis))
                        .collect();
                    v.len() == r.points.len()
                        && v.len() >= 2
                        && v.windows(2).all(|w| w[1] >= w[0])
                        && v.last() > v.first()
                })
                .count()
                * 10
                >= rs.len() * 9
        };
        let axis = if grows(ProgressAxis::Epoch) {
            ProgressAxis::Epoch
        } else if grows(ProgressAxis::Samples) {
            ProgressAxis::Samples
        } else {
            ProgressAxis::WallTime
        };
        let mut by_batch: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        let mut all = Vec::new();
        if axis != ProgressAxis::WallTime {
            for r in &rs {
                if let Some(v) = r.points.last().and_then(|p| axis_value(p, axis)) {
                    all.push(v.ln());
                    by_batch
                        .entry(r.context.global_batch_size.unwrap_or(0))
                        .or_default()
                        .push(v.ln());
                }
            }
        }
        out.insert(
            name.to_string(),
            BenchmarkProfile {
                direction,
                target,
                axis,
                ln_final_progress_by_batch: by_batch
                    .into_iter()
                    .filter_map(|(b, mut v)| {
                        let n = v.len();
                        median(&mut v).map(|m| (b, (m, n)))
                    })
                    .collect(),
                ln_final_progress: median(&mut all),
                index,
                n_runs: rs.len(),
            },
        );
    }
    out
}

impl BenchmarkProfile {
    /// Prior ln(final progress) for a batch size: the batch group's median shrunk towards the
    /// benchmark's by its size (3 pseudo-runs).
    pub(super) fn ln_final_progress(&self, batch: Option<u64>) -> Option<f64> {
        let all = self.ln_final_progress?;
        match batch.and_then(|b| self.ln_final_progress_by_batch.get(&b)) {
            Some(&(m, n)) => {
                let n = n as f64;
                Some((n * m + 3.0 * all) / (n + 3.0))
            }
            None => Some(all),
        }
    }
}
