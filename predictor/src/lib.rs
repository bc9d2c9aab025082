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
//!
//! ## The contract every predictor follows
//!
//! ```text
//! XTrainer::train(&XData...) -> Result<XPredictor, PredictorError>  fits, never evaluates
//! XPredictor::online(self: Arc<Self>, model_version) -> XOnline      the online state
//! XOnline: OnlinePredictor       observe(&JobEvent) -> answer at submit; predict(&JobQuery)
//! evaluate_x(...) -> XEvaluation { rows: Vec<MethodRow<XMetrics>>, .. }  never owns the model
//! score_x(.., &XPredictor, ..) -> XEvaluation     the same scoring of a trained predictor
//! impl Artifact for XPredictor                                       in the task's folder
//! ```
//!
//! The online state ([`OnlinePredictor`]) is fed the job events in the store's order; its
//! answers are final (point, interval or bound with coverage, the calibration that made it,
//! the model version), and the answer issued at a job's submit is returned by `observe` for
//! the service to store. Calibration lives in [`calibration`], metrics in [`metrics`], the
//! one error type in [`error`].
//!
//! `rustc-hash` (the compiler's own FxHash, well kept) hashes the queue state's maps, keyed by
//! numbers the replay gives out and read on every event: far cheaper than SipHash there. Maps
//! keyed by callers' raw job ids keep the standard hasher (FxHash has no defence against
//! crafted collisions).

pub mod calibration;
pub mod contract;
pub mod convergence;
pub mod dag;
pub mod error;
pub mod evaluation;
pub mod failure;
mod feature_rows;
pub mod metrics;
pub mod queue_wait;
pub mod registry;
pub mod runtime;
#[cfg(test)]
mod synthetic_trace;
mod threads;

pub use calibration::{
    AdaptiveBound, ConformalWindow, ResidualMemory, RiskGroup, RiskSplitBound, RiskSplitState,
    RiskSplitSummary, ACI_GAMMA, ONLINE_WINDOW,
};
pub use contract::{Interval, JobEvent, JobQuery, OnlinePredictor};
pub use convergence::{
    evaluate_convergence, score_convergence, train_and_evaluate_convergence, ConvergenceData,
    ConvergenceEvaluation, ConvergenceOnline, ConvergenceOnlineAnswer, ConvergenceOnlineState,
    ConvergencePrediction, ConvergencePredictor, ConvergenceRun, ConvergenceTrainer, CurvePoint,
    JobContext,
};
pub use dag::{DagAnswer, DagOnline, DagPredictor, DagTrainer};
pub use error::PredictorError;
pub use evaluation::{Evaluation, MethodRow};
pub use failure::{
    evaluate_failure, score_failure, train_and_evaluate_failure, Calibrator, FailureData,
    FailureEvaluation, FailureModel, FailureOnline, FailureOnlineAnswer, FailureOnlineState,
    FailurePrediction, FailurePredictor, FailureTrainer,
};
pub use queue_wait::{
    evaluate_queue_wait, score_queue_wait, train_and_evaluate_queue_wait,
    train_and_evaluate_queue_wait_with, QueueError, QueueEvent, QueueJob, QueueState,
    QueueWaitEvaluation, QueueWaitOnline, QueueWaitOnlineAnswer, QueueWaitOnlineState,
    QueueWaitPrediction, QueueWaitPredictor, QueueWaitRun, QueueWaitSplit, QueueWaitTrainer,
    WaitEvalRow, WaitMetrics, WaitModel,
};
pub use registry::{Artifact, ArtifactMeta, ModelKind, ModelRegistry, NewArtifact, RegistryError};
pub use runtime::{
    evaluate_runtime, evaluate_runtime_with_progress, score_runtime, train_and_evaluate_runtime,
    BaseMargin, EvalRow, MethodPredictions, RuntimeEvaluation, RuntimeMember, RuntimeMetrics,
    RuntimeOnline, RuntimeOnlineAnswer, RuntimeOnlineState, RuntimePrediction, RuntimePredictor,
    RuntimeSplit, RuntimeTrainer,
};
