//! # augur-models
//!
//! **One job:** model families behind one small trait family, in the spirit of linfa:
//!
//! - [`Fit`]: an algorithm with its hyperparameters; `fit` on a [`TrainSet`] returns a fitted
//!   model and never mutates the algorithm.
//! - [`Predict`]: a fitted model; predicting never mutates it. Batch prediction runs over a
//!   contiguous row-major [`Matrix`] without allocating per row.
//!
//! Every fitted model is `serde`-serialisable and wrapped in [`AnyModel`] for storage, so
//! predictors swap models without code changes.
//!
//! Families:
//!
//! - [`gbdt`]: histogram gradient-boosted trees, L2 / L1 / quantile / log-loss.
//! - [`linear`]: ridge (L2) and robust L1 / quantile linear regression (ADMM with a
//!   certified duality gap).
//! - [`mlp`]: a ReLU multilayer perceptron trained with burn (AdamW, early stopping), served
//!   by a plain-Rust forward pass.
//! - [`gru`]: a bidirectional GRU sequence regressor (one target per step) trained with
//!   burn, served by a plain-Rust recurrence.
//!
//! The linear model and the MLP share [`preprocess`]: median imputation with missing
//! indicators, signed log1p of heavy-tailed columns, robust standardisation clipped to the
//! training range, fitted on the training rows and stored in the model.
//!
//! Why linfa and burn for these two: the linear solves use `linfa-linalg` (the linfa
//! project's pure-Rust Cholesky/triangular solves on `ndarray`, no BLAS or system library);
//! `linfa-linear` itself has OLS and GLMs but no ridge penalty, sample weights or L1/quantile
//! loss (see [`linear`]). burn is the maintained pure-Rust deep-learning framework with
//! autodiff and optimisers; we use only its `ndarray` CPU backend and `autodiff`, with
//! default features off, and never at inference time.
//!
//! Why our own GBDT rather than a crate: the maintained pure-Rust GBDT (`perpetual` 2.x)
//! requires a nightly compiler (`#![feature(array_ptr_get)]`); `forust-ml` is archived and has
//! only squared and log loss (no L1/quantile, which runtime prediction in log space needs);
//! LightGBM bindings (`lightgbm3`) need a C++/CMake build that would add minutes and a
//! system dependency to every cold CI run. A histogram GBDT in the LightGBM style
//! (leaf-wise growth, histogram subtraction, leaf refit for L1/quantile) is small, tested,
//! and lets us train on exactly the loss we evaluate. Nor would LightGBM fit our models
//! faster: on the queue-wait median's own matrix and parameters ([`gbdt::FitInputs`],
//! `scripts/bench-same-matrix.py`) ours takes less time than LightGBM's (docs/speed.md).

pub mod gbdt;
pub mod gru;
pub mod linear;
mod matrix;
pub mod mlp;
pub mod preprocess;

pub use matrix::{Matrix, TrainSet};
use serde::{Deserialize, Serialize};

/// Errors of model fitting and prediction.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The training data is unusable (empty, mismatched lengths, non-finite targets).
    #[error("invalid training data: {0}")]
    InvalidData(String),
    /// A row of the wrong width was given to a fitted model.
    #[error("model expects {want} features, got {got}")]
    FeatureCount { want: usize, got: usize },
    /// The fit failed numerically (singular system, divergence) or in the training backend.
    #[error("numerical failure: {0}")]
    Numerical(String),
}

/// An algorithm with hyperparameters that can be fitted to data.
///
/// `GbdtParams::default().fit(&train)` → a fitted `GbdtModel`.
pub trait Fit {
    /// The fitted model.
    type Model: Predict;
    /// Fits on `train`.
    fn fit(&self, train: &TrainSet) -> Result<Self::Model, ModelError>;
}

/// A fitted model: maps a feature row to a number (a log-duration, a log-odds...).
///
/// `model.predict_row(&x)` never changes `model`.
pub trait Predict {
    /// Number of features a row must have.
    fn n_features(&self) -> usize;
    /// Prediction for one row.
    fn predict_row(&self, row: &[f32]) -> f64;
    /// Predictions for every row of `x` into `out` (`out.len() == x.rows()`).
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        if x.cols() != self.n_features() {
            return Err(ModelError::FeatureCount {
                want: self.n_features(),
                got: x.cols(),
            });
        }
        for (i, o) in out.iter_mut().enumerate().take(x.rows()) {
            *o = self.predict_row(x.row(i));
        }
        Ok(())
    }
}

/// Any fitted model, for storage in the registry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum AnyModel {
    /// Gradient-boosted trees.
    Gbdt(gbdt::GbdtModel),
    /// Linear / quantile regression on preprocessed features.
    Linear(linear::LinearModel),
    /// Multilayer perceptron on preprocessed features.
    Mlp(mlp::MlpModel),
}

impl Predict for AnyModel {
    fn n_features(&self) -> usize {
        match self {
            AnyModel::Gbdt(m) => m.n_features(),
            AnyModel::Linear(m) => m.n_features(),
            AnyModel::Mlp(m) => m.n_features(),
        }
    }
    fn predict_row(&self, row: &[f32]) -> f64 {
        match self {
            AnyModel::Gbdt(m) => m.predict_row(row),
            AnyModel::Linear(m) => m.predict_row(row),
            AnyModel::Mlp(m) => m.predict_row(row),
        }
    }
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        match self {
            AnyModel::Gbdt(m) => m.predict_into(x, out),
            AnyModel::Linear(m) => m.predict_into(x, out),
            AnyModel::Mlp(m) => m.predict_into(x, out),
        }
    }
}
