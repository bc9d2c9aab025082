//! GBDT hyperparameters, checked before fitting, and the per-tree row and feature samples.

use augur_numeric::SplitMix64;
use serde::{Deserialize, Serialize};

use super::objective::Objective;
use crate::{ModelError, TrainSet};

/// GBDT hyperparameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GbdtParams {
    pub objective: Objective,
    /// Maximum number of trees.
    pub n_trees: usize,
    pub learning_rate: f64,
    /// Maximum leaves per tree.
    pub num_leaves: usize,
    /// Maximum depth (0 = unlimited).
    pub max_depth: usize,
    /// Minimum rows in a leaf.
    pub min_data_in_leaf: usize,
    /// L2 regularisation of leaf values.
    pub lambda_l2: f64,
    /// Share of rows sampled per tree (1.0 = all).
    pub subsample: f64,
    /// Share of features sampled per tree (1.0 = all).
    pub colsample: f64,
    /// Maximum bins per feature (≤ 255).
    pub max_bins: usize,
    /// Stop after this many trees without improvement on the validation set.
    pub early_stopping_rounds: usize,
    pub seed: u64,
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            objective: Objective::L2,
            n_trees: 500,
            learning_rate: 0.05,
            num_leaves: 63,
            max_depth: 0,
            min_data_in_leaf: 20,
            lambda_l2: 1.0,
            subsample: 0.8,
            colsample: 0.8,
            max_bins: 255,
            early_stopping_rounds: 50,
            seed: 7,
        }
    }
}

impl GbdtParams {
    /// Refuses a quantile `alpha` outside (0, 1) and log-loss targets other than 0 and 1.
    pub(super) fn check(&self, train: &TrainSet) -> Result<(), ModelError> {
        if let Objective::Quantile { alpha } = self.objective {
            if !(0.0 < alpha && alpha < 1.0) {
                return Err(ModelError::InvalidData(format!(
                    "quantile alpha must be in (0, 1), got {alpha}"
                )));
            }
        }
        if self.objective == Objective::LogLoss && train.y.iter().any(|&v| v != 0.0 && v != 1.0) {
            return Err(ModelError::InvalidData(
                "log-loss targets must be 0 or 1".into(),
            ));
        }
        Ok(())
    }

    /// The rows one tree is grown on: each of `0..n` kept with probability `subsample`.
    pub(super) fn sample_rows(&self, rng: &mut SplitMix64, n: usize) -> Vec<u32> {
        if self.subsample < 1.0 {
            (0..n as u32)
                .filter(|_| rng.unit() < self.subsample)
                .collect()
        } else {
            (0..n as u32).collect()
        }
    }

    /// The features one tree may split on: each of `0..d` kept with probability
    /// `colsample`, all of them when none is.
    pub(super) fn sample_features(&self, rng: &mut SplitMix64, d: usize) -> Vec<usize> {
        let features: Vec<usize> = (0..d).filter(|_| rng.unit() < self.colsample).collect();
        if features.is_empty() {
            (0..d).collect()
        } else {
            features
        }
    }
}
