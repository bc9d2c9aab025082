//! GRU hyperparameters, checked before fitting.

use serde::{Deserialize, Serialize};

use crate::gbdt::Objective;
use crate::preprocess::PreprocessParams;
use crate::ModelError;

/// GRU sequence-regressor hyperparameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GruParams {
    /// Hidden state width of each direction.
    pub hidden: usize,
    /// Width of the per-step ReLU layer of the head.
    pub head: usize,
    /// Size of the hashed token vocabulary.
    pub n_buckets: usize,
    /// Also run a GRU over the reversed sequence.
    pub bidirectional: bool,
    /// `L1` (default) or `L2`.
    pub objective: Objective,
    /// Maximum passes over the training sequences.
    pub epochs: usize,
    /// Sequences (crops) per mini-batch.
    pub batch_size: usize,
    /// Training sequences longer than this are cut into random windows of this many steps.
    pub crop: usize,
    /// Peak AdamW learning rate (cosine-decayed to 5 % over `epochs`).
    pub learning_rate: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Stop after this many epochs without validation improvement.
    pub early_stopping_epochs: usize,
    /// Step-feature preprocessing, fitted on the training steps.
    pub preprocess: PreprocessParams,
    pub seed: u64,
}

impl Default for GruParams {
    fn default() -> Self {
        GruParams {
            hidden: 32,
            head: 32,
            n_buckets: 64,
            bidirectional: true,
            objective: Objective::L1,
            epochs: 60,
            batch_size: 32,
            crop: 48,
            learning_rate: 3e-3,
            weight_decay: 1e-4,
            early_stopping_epochs: 10,
            preprocess: PreprocessParams::default(),
            seed: 7,
        }
    }
}

impl GruParams {
    /// Refuses zero widths, epochs, batch or crop sizes, a non-positive learning rate, a
    /// negative weight decay and objectives other than L1 and L2.
    pub(super) fn check(&self) -> Result<(), ModelError> {
        let bad = |what: &str| Err(ModelError::InvalidData(format!("GRU: {what}")));
        if self.hidden == 0 || self.head == 0 {
            return bad("hidden and head widths must be > 0");
        }
        if self.epochs == 0 || self.batch_size == 0 || self.crop == 0 {
            return bad("epochs, batch_size and crop must be > 0");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return bad("learning_rate must be > 0");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay must be >= 0");
        }
        if !matches!(self.objective, Objective::L1 | Objective::L2) {
            return bad("objective must be L1 or L2");
        }
        Ok(())
    }
}
