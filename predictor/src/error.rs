//! The crate's one error type: what can go wrong when training, predicting or evaluating.

use crate::queue_wait::QueueError;

/// Errors of training, prediction and evaluation.
#[derive(Debug, thiserror::Error)]
pub enum PredictorError {
    #[error(transparent)]
    Model(#[from] augur_models::ModelError),
    #[error(transparent)]
    Features(#[from] augur_features::FeatureError),
    #[error(transparent)]
    Dataset(#[from] augur_datasets::DatasetError),
    /// An inconsistent queue event (queue-wait predictor).
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Not enough usable jobs to train or evaluate. `what` names the jobs that were too few
    /// (e.g. "jobs with a known duration", "jobs with a known queue wait"); `detail` says
    /// how many there were and how many are needed.
    #[error("not enough {what}: {detail}")]
    NotEnoughData { what: &'static str, detail: String },
    /// A feature matrix whose length is not jobs × features.
    #[error("{values} feature values for {jobs} jobs × {features} features")]
    FeatureShape {
        values: usize,
        jobs: usize,
        features: usize,
    },
}

impl PredictorError {
    /// [`PredictorError::NotEnoughData`] of `what`, with `detail`.
    pub fn not_enough(what: &'static str, detail: impl Into<String>) -> PredictorError {
        PredictorError::NotEnoughData {
            what,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_enough_data_names_what_is_missing() {
        let e = PredictorError::not_enough("jobs with a known queue wait", "12 training jobs");
        assert_eq!(
            e.to_string(),
            "not enough jobs with a known queue wait: 12 training jobs"
        );
        let e = PredictorError::FeatureShape {
            values: 10,
            jobs: 3,
            features: 4,
        };
        assert_eq!(e.to_string(), "10 feature values for 3 jobs × 4 features");
    }
}
