//! The past failure rate of the job's user (else group, queue, cluster) as a served model:
//! the `fail_rate` history feature of that key, calibrated like the other two. It is the
//! baseline every trained model must beat, so it is a candidate too: served when it ranks
//! the calibration slice better than both, so the served model is never worse than it
//! there. Online it moves as outcomes arrive, since the feature state updates the rate
//! when a job of the key finishes.

use augur_features::failure::FAILURE_KEY_FEATURES;
use augur_features::{FailKey, FailureSchema};
use serde::{Deserialize, Serialize};

use crate::calibration::platt::Calibrator;

/// The past failure rate of one key, read from the failure-feature row, and its calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PastRate {
    /// Whose past failure rate: the user, else the group, the queue or the cluster.
    pub key: FailKey,
    /// Its `fail_rate` column in the failure-feature row.
    column: usize,
    /// The rate used when the row has none (the training base rate).
    fallback: f64,
    pub(super) calibration: Calibrator,
}

impl PastRate {
    /// The most specific key the schema keeps a failure history for (the user, else the
    /// group, the queue, the cluster), with its `fail_rate` column.
    pub fn key_of(schema: &FailureSchema) -> Option<(FailKey, usize)> {
        [FailKey::User, FailKey::Group, FailKey::Queue, FailKey::All]
            .into_iter()
            .find_map(|k| schema.index_of(k, FAILURE_KEY_FEATURES[1]).map(|c| (k, c)))
    }

    /// The uncalibrated rate of a failure-feature row: its `column`, else `fallback`.
    pub fn raw(row: &[f32], column: usize, fallback: f64) -> f64 {
        let v = row.get(column).map_or(f64::NAN, |&v| f64::from(v));
        if v.is_finite() {
            v
        } else {
            fallback
        }
    }

    /// The candidate for `schema` (none when it keeps no failure history), calibrated on
    /// `rows` (failure-feature rows of the calibration slice) with their `labels`.
    pub(super) fn fit<'a>(
        schema: &FailureSchema,
        fallback: f64,
        rows: impl Iterator<Item = &'a [f32]>,
        labels: &[bool],
    ) -> Option<(PastRate, Vec<f64>)> {
        let (key, column) = PastRate::key_of(schema)?;
        let scores: Vec<f64> = rows.map(|r| PastRate::raw(r, column, fallback)).collect();
        let calibration = Calibrator::fit(&scores, labels);
        Some((
            PastRate {
                key,
                column,
                fallback,
                calibration,
            },
            scores,
        ))
    }

    /// The uncalibrated rate of a failure-feature row.
    pub fn score(&self, row: &[f32]) -> f64 {
        PastRate::raw(row, self.column, self.fallback)
    }

    /// The calibrated probability of a failure-feature row.
    pub fn probability(&self, row: &[f32]) -> f64 {
        self.calibration.probability(self.score(row))
    }

    /// Its calibration.
    pub fn calibration(&self) -> &Calibrator {
        &self.calibration
    }

    /// The key in words: `user`, `group`, `queue`, `cluster`.
    pub fn key_label(&self) -> &'static str {
        key_label(self.key)
    }
}

/// A key in words, for tables.
pub fn key_label(key: FailKey) -> &'static str {
    match key {
        FailKey::User => "user",
        FailKey::Group => "group",
        FailKey::Queue => "queue",
        FailKey::All => "cluster",
        other => other.name(),
    }
}
