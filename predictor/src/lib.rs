//! # augur-predictor
//!
//! **One job:** the predictors Augur serves — features + model + calibration + evaluation.
//!
//! - [`RuntimePredictor`]: job run time from what is known at submit, in log space, with a
//!   split-conformal 80% interval calibrated on the tail of the training period.
//! - [`evaluate_runtime`]: the shared evaluation protocol (time-ordered 80/20 split, durations
//!   clamped to ≥ 1 s, `mae_log`, `within2x`, interval coverage) with the simple baselines
//!   on the same split: global median, and the mean of the last two finished jobs of the
//!   same user (or VC/group when the trace has no users).
//! - [`QueueWaitPredictor`]: queue wait from the job's request, its history and the cluster's
//!   queue state at submit ([`QueueState`], with a forward simulation of the queue), with a
//!   conformalised 95% upper bound; [`evaluate_queue_wait`] on the same split.
//! - [`ConvergencePredictor`]: when a running job's loss/accuracy curve reaches its target,
//!   from curve fits (Optimus and three other families), an empirical-Bayes prior over
//!   time-to-train and boosted trees on the prefix; [`evaluate_convergence`] on MLPerf.
//! - [`FailurePredictor`]: the probability that a job ends failed, from its request and the
//!   failure history of its user/group/name/queue: a class-weighted kernel SVM and log-loss
//!   GBDT, each calibrated (Platt or isotonic); [`evaluate_failure`] on the same split.
//! - [`dag::DagPredictor`]: stage run times and the makespan of a DAG-structured job (a GRU
//!   over its stages in topological order on a per-stage GBDT base, critical path × a learned
//!   correction); [`dag::evaluate_dag`] by grouped cross-validation.
//! - [`ModelRegistry`]: versioned, hash-checked model artifacts on disk (`v1, v2, ...` per
//!   kind) with a promoted pointer and rollback.

pub mod calibration;
pub mod convergence;
pub mod dag;
pub mod failure;
pub mod metrics;
pub mod queue_wait;
pub mod registry;
mod runtime;

pub use convergence::{
    evaluate_convergence, ConvergenceError, ConvergenceEvaluation, ConvergencePrediction,
    ConvergencePredictor, ConvergenceRun, ConvergenceTrainer, JobContext, MetricPoint,
};
pub use failure::{
    evaluate_failure, Calibrator, FailureEvaluation, FailureModel, FailurePrediction,
    FailurePredictor, FailureTrainer,
};
pub use queue_wait::{
    evaluate_queue_wait, QueueError, QueueEvent, QueueJob, QueueState, QueueWaitEvaluation,
    QueueWaitPrediction, QueueWaitPredictor, QueueWaitTrainer, RiskGroup, RiskSplitBound,
    RiskSplitState, RiskSplitSummary, WaitEvalRow,
};
pub use registry::{Artifact, ArtifactMeta, ModelRegistry, NewArtifact, RegistryError};
pub use runtime::{
    evaluate_runtime, evaluate_runtime_with_progress, BaseMargin, ConformalWindow, EvalRow,
    MethodPredictions, RuntimeEvaluation, RuntimeMember, RuntimePrediction, RuntimePredictor,
    RuntimeTrainer, ACI_GAMMA, ONLINE_WINDOW,
};

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
    Queue(#[from] queue_wait::QueueError),
    /// Not enough labelled jobs to train or evaluate.
    #[error("not enough jobs with a known duration: {0}")]
    NotEnoughData(String),
}
