//! A trace prepared for the failure predictor: the shared time-ordered split, its labelled
//! rows and every job's failure features under the schema of the training period.

use std::time::Instant;

use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{failure_batch_features, failure_label, FailureSchema};

use crate::PredictorError;

/// A trace prepared for the failure predictor: the shared time-ordered split (80/20 of all
/// jobs by submit time), its labelled rows, and every job's failure features under the
/// schema of the training period.
#[derive(Debug, Clone)]
pub struct FailureData<'a> {
    pub jobs: &'a [JobRecord],
    /// Labelled training / test jobs (indices into `jobs`, submit order).
    pub train_rows: Vec<usize>,
    pub test_rows: Vec<usize>,
    /// Jobs without a known outcome.
    pub n_censored: usize,
    pub schema: FailureSchema,
    /// [`failure_batch_features`] of every job, `schema.len()` values a row.
    pub x: Vec<f32>,
    /// Seconds the features took.
    pub features_s: f64,
}

impl<'a> FailureData<'a> {
    /// Splits `jobs` and computes their features; an error when either part holds no
    /// labelled job.
    pub fn new(jobs: &'a [JobRecord]) -> Result<FailureData<'a>, PredictorError> {
        let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
        let split = TimeSplit::default_for(&submit);
        let labelled = |rows: &[usize]| -> Vec<usize> {
            rows.iter()
                .copied()
                .filter(|&i| failure_label(jobs[i].status).is_some())
                .collect()
        };
        let train_rows = labelled(split.train());
        let test_rows = labelled(split.test());
        let n_censored = jobs.len() - train_rows.len() - test_rows.len();
        if test_rows.is_empty() || train_rows.is_empty() {
            return Err(PredictorError::not_enough("jobs with a known outcome", format!(
                "{} training and {} test jobs with a known outcome (status failed / completed / killed); {} jobs have none (censored or no status column)",
                train_rows.len(),
                test_rows.len(),
                n_censored
            )));
        }
        let train_jobs: Vec<JobRecord> = split.train().iter().map(|&i| jobs[i].clone()).collect();
        let schema = FailureSchema::for_jobs(&train_jobs);
        let t0 = Instant::now();
        let x = failure_batch_features(jobs, &schema);
        let features_s = t0.elapsed().as_secs_f64();
        Ok(FailureData {
            jobs,
            train_rows,
            test_rows,
            n_censored,
            schema,
            x,
            features_s,
        })
    }

    /// Whether job `i` failed (censored jobs count as not failed; they are never in the
    /// labelled rows).
    pub(super) fn label(&self, i: usize) -> bool {
        failure_label(self.jobs[i].status).unwrap_or(false)
    }
}
