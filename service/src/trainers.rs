//! The training settings `augur evaluate`, `augur train`, `augur simulate` and `augur serve`
//! share: each task's trainer with a tree budget (`--trees`, the service's `trees`) applied.
//! `None` keeps the predictor crate's defaults.

use augur_predictor::dag::DagTrainer;
use augur_predictor::{ConvergenceTrainer, FailureTrainer, QueueWaitTrainer, RuntimeTrainer};

/// The runtime trainer, at most `trees` boosting rounds (at least one).
pub fn runtime(trees: Option<usize>) -> RuntimeTrainer {
    let mut trainer = RuntimeTrainer::default();
    if let Some(n) = trees {
        trainer.params.n_trees = n.max(1);
    }
    trainer
}

/// The queue-wait trainer with its median and bound models capped at `trees`; the run-time
/// model behind its features keeps its default budget (`augur evaluate` / `augur train`).
pub fn queue_wait(trees: Option<usize>) -> QueueWaitTrainer {
    let trainer = QueueWaitTrainer::default();
    match trees {
        Some(n) => trainer.with_trees(n),
        None => trainer,
    }
}

/// [`queue_wait`] with the run-time model behind its features capped at `trees` too: the
/// service's trainer, where every model of a retrain shares one budget.
pub fn queue_wait_all_capped(trees: Option<usize>) -> QueueWaitTrainer {
    let trainer = QueueWaitTrainer {
        runtime: runtime(trees),
        ..QueueWaitTrainer::default()
    };
    match trees {
        Some(n) => trainer.with_trees(n),
        None => trainer,
    }
}

/// The failure trainer, its GBDT at most `trees` rounds (at least one).
pub fn failure(trees: Option<usize>) -> FailureTrainer {
    let mut trainer = FailureTrainer::default();
    if let Some(n) = trees {
        trainer.gbdt.n_trees = n.max(1);
    }
    trainer
}

/// The convergence trainer, its tree models at most `trees` rounds (at least ten).
pub fn convergence(trees: Option<usize>) -> ConvergenceTrainer {
    let mut trainer = ConvergenceTrainer::default();
    if let Some(n) = trees {
        trainer.trees = n.max(10);
    }
    trainer
}

/// The DAG trainer: the GRU for `epochs` epochs when given, the per-stage GBDT at most
/// `trees` rounds (at least one).
pub fn dag(trees: Option<usize>, epochs: Option<usize>) -> DagTrainer {
    let mut trainer = DagTrainer::default();
    if let Some(e) = epochs {
        trainer = trainer.with_epochs(e);
    }
    if let Some(t) = trees {
        trainer.gbdt.n_trees = t.max(1);
    }
    trainer
}
