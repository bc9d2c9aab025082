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
    /// A convergence estimate was asked of no metric points.
    #[error("no metric points: a convergence estimate needs at least one")]
    NoMetricPoints,
    /// A metric point's field (or a curve point's progress or value) is NaN or infinite.
    #[error("metric point {index}: {field} is not finite ({value})")]
    NonFinitePoint {
        index: usize,
        field: &'static str,
        value: f64,
    },
    /// Metric points whose wall time goes backwards.
    #[error(
        "metric point {index}: wall time {now} s is before the previous point's {prev} s (points must be in time order)"
    )]
    PointsOutOfOrder { index: usize, prev: f64, now: f64 },
    /// Too few points with distinct progress for a curve family's parameters.
    #[error("a {family} fit needs at least {need} points with distinct progress, got {got}")]
    TooFewCurvePoints {
        family: &'static str,
        need: usize,
        got: usize,
    },
    /// Nothing to estimate a job's convergence from (an unknown benchmark and too few points
    /// for a curve fit).
    #[error("cannot estimate convergence: {0}")]
    NoConvergenceEvidence(String),
    /// A saved online state does not fit the model it was to be restored onto (its feature
    /// schema or its queue capacity differs: it was built with another model).
    #[error("the saved {kind} online state was built for another model ({what} differs)")]
    StateMismatch {
        kind: &'static str,
        what: &'static str,
    },
    /// An online state was asked about a job none of its events named.
    #[error("no job `{job_id}` has been ingested")]
    UnknownJob { job_id: String },
    /// A job with neither a start nor a submit: no clock to read its curve against.
    #[error("job `{job_id}` has no start or submit event")]
    NoStartTime { job_id: String },
    /// A job without a metric point that has both a time and the metric its curve is read
    /// from.
    #[error("job `{job_id}` has no metric points with a time (`at`) and a {metric}")]
    NoTimedPoints {
        job_id: String,
        metric: &'static str,
    },
    /// A DAG job whose graph is not a DAG (a cycle, an unknown parent).
    #[error("job `{job}`: {source}")]
    DagShape {
        job: String,
        #[source]
        source: augur_datasets::dag::DagShapeError,
    },
    /// A DAG stage (or the whole job) without a usable measured duration, which training
    /// and evaluation need.
    #[error("job `{job}`, stage `{stage}`: no usable duration")]
    MissingStageDuration { job: String, stage: String },
    /// A DAG makespan was asked of a job query, which holds the job's profile but not its
    /// stages.
    #[error("job `{job_id}`: a DAG makespan needs the job's stages, and the query holds only its profile")]
    NoDagStages { job_id: String },
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
