//! The queue-wait predictor: how long a job will wait before it starts, with a calibrated
//! 95% upper bound, from what is known when it is submitted.
//!
//! The parts:
//!
//! - [`QueueState`]: the cluster at an instant — queued jobs, running jobs, capacity, the
//!   waits of jobs that have started — fed by events (`submit`, `start`, `end`). The same
//!   state serves both paths: [`replay_queue_features`] replays a trace's submit/start/end
//!   times through it, and the online service feeds it ingested events. A job's features
//!   are taken when it is submitted, before its own submit is applied, so its own start,
//!   wait and end can never reach them; at equal times, finishes come first, then submits,
//!   then starts (a job starting at the instant another is submitted still counts as queued
//!   for it). [`QueueState::features`] includes a fast forward simulation of the queue
//!   ([`QueueState::simulate_wait`]: FCFS with EASY backfilling, with predicted or requested
//!   run times) whose simulated wait is one feature among the others.
//! - [`QueueWaitTrainer`] / [`QueueWaitPredictor`]: an L1 gradient-boosted model of
//!   `ln(1 + wait)` (its conditional median, which minimises the MAE in seconds too, since the
//!   median commutes with monotone maps) and a 0.95-quantile model of the same target whose
//!   bound is corrected by split-conformal calibration on the tail of the training period
//!   (conformalised quantile regression), or, when the search on the training period's tail
//!   finds one that holds its levels, by a risk-split conformal bound ([`RiskSplitBound`]:
//!   low-risk jobs get a tight bound at a lower level, high-risk jobs a wide one at a
//!   higher level, 95% overall; online, [`RiskSplitState`] adapts each group's offset to its
//!   own outcomes). Features: the runtime predictor's history features
//!   ([`augur_features::batch_features`]) followed by the [`QUEUE_FEATURES`]. Run times of
//!   queued and running jobs come from a [`crate::RuntimePredictor`] trained on the
//!   training period only.
//! - [`QueueWaitOnline`]: the online state (history, queue, risk-split state, the deadlines
//!   of the bounds issued), fed job events.
//! - [`evaluate_queue_wait`]: the shared protocol (time-ordered 80/20 split by submit time) with
//!   baselines: predict zero, the training median, the median wait of the last 10 jobs that
//!   started, and the bare queue simulation.
//!
//! Capacity is inferred from the training period: the 0.99 quantile of the resource in use
//! (nodes, else GPUs, else CPUs) sampled at every training job's submit, and at least the
//! largest single request. Not the maximum: reconstructed traces over-commit (run times
//! include boot/teardown and waits are rounded), and a single outlier would set it.

mod artifact;
mod data;
mod evaluate;
mod features;
mod online;
mod predictor;
mod replay;
mod risk_search;
mod simulate;
mod state;
mod trainer;

pub use crate::calibration::{
    conformal_offset, high_level, AdaptiveBound, RiskGroup, RiskScore, RiskSplitBound,
    RiskSplitState, RiskSplitSummary,
};
pub use data::{known_wait, QueueWaitData};
pub use evaluate::{
    evaluate_queue_wait, score_queue_wait, train_and_evaluate_queue_wait,
    train_and_evaluate_queue_wait_with, QueueWaitEvaluation, QueueWaitRun, QueueWaitSplit,
    WaitEvalRow, WaitMetrics,
};
pub use online::{BoundSource, QueueWaitOnline, QueueWaitOnlineAnswer, QueueWaitOnlineState};
pub use predictor::{
    wait_ceiling, QueueWaitPrediction, QueueWaitPredictor, ShortWait, ShortWaitInside, WaitTarget,
    WAIT_CEILING_MARGIN, WAIT_CEILING_QUANTILE,
};
pub use replay::{infer_capacity, replay_queue_features};
pub use state::{
    QueueError, QueueEvent, QueueJob, QueueState, ResourceKind, SimRuntime, QUEUE_FEATURES,
    RECENT_WAIT_FEATURE, SIM_PRED_FEATURE,
};
pub use trainer::{QueueWaitTrainer, WaitModel, RISK_LOW_LEVELS, RISK_SHARES, RISK_WINDOW};
