//! The runtime predictor: job run time from what is known at submit, in log space, with a
//! split-conformal 80% interval calibrated on the tail of the training period and
//! recalibrated online from finished jobs.
//!
//! - [`RuntimeTrainer`] fits a [`RuntimePredictor`] (trees on ln(duration) and trees
//!   correcting a history median, blended);
//! - [`RuntimeOnline`] is its online state (history features, conformal window);
//! - [`evaluate_runtime`] is the shared protocol beside the simple baselines, and
//!   [`score_runtime`] scores an already-trained predictor the same way.

mod artifact;
mod evaluate;
mod online;
mod predictor;
mod trainer;

pub use evaluate::{
    evaluate_runtime, evaluate_runtime_with_progress, score_runtime, train_and_evaluate_runtime,
    EvalRow, MethodPredictions, RuntimeEvaluation, RuntimeMetrics, RuntimeSplit,
};
pub use online::{IntervalSource, RuntimeOnline, RuntimeOnlineAnswer, RuntimeOnlineState};
pub use predictor::{
    runtime_ceiling, BaseMargin, ChoiceInputs, PointChoice, RuntimeMember, RuntimePrediction,
    RuntimePredictor, LIMIT_GRACE_S,
};
pub use trainer::RuntimeTrainer;
