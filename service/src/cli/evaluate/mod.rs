//! `augur evaluate`: each predictor beside its baselines on the shared time-ordered split,
//! one module per `--task`.

pub mod convergence;
pub mod dag;
pub mod failure;
pub mod queue_wait;
pub mod runtime;
pub mod scaling;

use super::{EvalTask, EvaluateArgs};

/// Runs `augur evaluate` for the task `args` names.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    match args.task {
        EvalTask::Runtime => runtime::run(args),
        EvalTask::QueueWait => queue_wait::run(args),
        EvalTask::Failure => failure::run(args),
        EvalTask::Dag => dag::run(args),
        EvalTask::Convergence => convergence::run(args),
        EvalTask::Scaling => scaling::run(args),
    }
}
