//! The jobs a replay starts from ([`SimJob`]), read from a job table.

use augur_datasets::JobRecord;
use serde::Serialize;

/// One job to replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimJob {
    /// Row of the job table it came from.
    pub row: usize,
    pub submit: f64,
    /// Run time at its requested size on reference GPUs, seconds (≥ 1).
    pub duration: f64,
    /// Requested GPUs (one worker per GPU).
    pub gpus: u32,
    /// Predicted run time, when a predictor gave one.
    pub predicted: Option<f64>,
}

/// Turns a job table into jobs to replay: rows without a finite duration or submit time are
/// skipped (counted in the second value); fractional GPU requests (openb) round up to whole
/// GPUs; durations are clamped to ≥ 1 s. `predicted[i]` belongs to `records[i]` (shorter or
/// empty means no predictions).
pub fn jobs_from_records(records: &[JobRecord], predicted: &[Option<f64>]) -> (Vec<SimJob>, usize) {
    let mut out = Vec::with_capacity(records.len());
    let mut skipped = 0;
    for (row, r) in records.iter().enumerate() {
        let Some(d) = r.duration.filter(|d| d.is_finite() && *d >= 0.0) else {
            skipped += 1;
            continue;
        };
        if !r.submit_time.is_finite() {
            skipped += 1;
            continue;
        }
        let g = r
            .num_gpus
            .filter(|g| g.is_finite() && *g > 0.0)
            .unwrap_or(1.0);
        out.push(SimJob {
            row,
            submit: r.submit_time,
            duration: d.max(1.0),
            gpus: g.ceil().min(f64::from(u32::MAX)) as u32,
            predicted: predicted
                .get(row)
                .copied()
                .flatten()
                .filter(|p| p.is_finite() && *p > 0.0),
        });
    }
    (out, skipped)
}
