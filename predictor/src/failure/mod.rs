//! The failure predictor: the probability that a job ends failed, from what is known when it
//! is submitted (its request, and the failure history of its user, group, job name, queue,
//! ... from [`augur_features::failure`]).
//!
//! Two models, side by side, each with its own calibration:
//!
//! - a **class-weighted kernel SVM** (C-SVC with a Gaussian kernel, fitted with `linfa-svm`'s
//!   SMO solver, class weights `n / (2 n_class)` so the rare class counts as much as the
//!   common one). It reads a lean input — the request features and the failure histories,
//!   not the runtime duration histories — preprocessed with [`augur_models::preprocess`]
//!   (median imputation with missing indicators, robust scaling clipped to ±3). The kernel
//!   matrix is dense (n² memory, SMO time superlinear in n), so at most
//!   [`SvmSettings::max_rows`] training jobs are used: every failed job up to half of that,
//!   the rest a seeded sample of the others. The fitted support vectors and coefficients are
//!   copied out and served in plain Rust ([`KernelSvm`]);
//! - the **gradient-boosted trees** of [`augur_models::gbdt`] with the binary log-loss
//!   objective, on every feature, early-stopped on the calibration slice.
//!
//! Both are fitted on the training period minus its last 20% (by submit time), and
//! calibrated on that last 20% ([`Calibrator`]: Platt scaling, or isotonic regression when
//! the slice has at least [`ISOTONIC_MIN_CLASS`] jobs of each class). When the slice holds
//! fewer than [`MIN_CALIBRATION_CLASS`] jobs of a class, no slope can be fitted on it: the
//! calibrators then also get forward-chained
//! out-of-fold scores of the later training period (each block scored by models fitted on
//! everything before it).
//!
//! A third candidate is the past failure rate of the job's user (else group, queue, cluster;
//! [`PastRate`]), calibrated the same way. The served model is the candidate with the
//! highest ROC-AUC on those out-of-sample scores, unless another is within that ROC-AUC's
//! standard error and has the higher PR-AUC ([`choose_served`]): a model the past rate
//! beats there in both metrics is never served. The GBDT is then refitted on the whole
//! training period (the slice holds the newest jobs), keeping its calibrator.
//!
//! Labels ([`augur_features::failure_label`]): `failed` = 1; `completed` and `killed` = 0;
//! `unknown` (still running or pending when the trace ended, or no status) is censored —
//! never a label, in training or in evaluation; such jobs still count as submitted in the
//! features.
//!
//! [`FailureTrainer::train`] fits on a [`FailureData`] (the shared time-ordered 80/20 split
//! of all jobs by submit time; the labelled ones train and test); [`score_failure`] scores
//! the fitted predictor on the test jobs beside two trivial baselines: the training base
//! rate, and the past failure rate of the job's user (or group, queue, cluster when the
//! trace has no users); [`evaluate_failure`] does both. [`FailureOnline`] serves it.

mod artifact;
mod data;
mod evaluate;
mod online;
mod past_rate;
mod predictor;
mod svm;
mod trainer;

use serde::{Deserialize, Serialize};

pub use crate::calibration::platt::{Calibrator, ISOTONIC_MIN_CLASS};
pub use crate::metrics::classification::{
    average_precision, brier, expected_calibration_error, pr_curve, recall_at_fpr, reliability,
    roc_auc, roc_auc_interval, roc_curve, ReliabilityBin,
};
pub use data::FailureData;
pub use evaluate::{
    evaluate_failure, score_failure, train_and_evaluate_failure, FailureEvalRow, FailureEvaluation,
    FailureMetrics, MethodProbabilities, METHOD_BASE_RATE, METHOD_GBDT, METHOD_PAST_RATE,
    METHOD_SVM,
};
pub use online::{FailureOnline, FailureOnlineAnswer, FailureOnlineState};
pub use past_rate::{key_label, PastRate};
pub use predictor::{
    auc_standard_error, choose_served, CandidateScores, FailurePrediction, FailurePredictor,
};
pub use svm::{KernelSvm, SvmScratch, SvmSettings};
pub use trainer::{FailureTrainer, TrainingInfo};

/// When the calibration slice holds fewer jobs than this of its rarer class, Platt's slope
/// cannot be fitted on it: the calibrators are then fitted on forward-chained out-of-fold
/// scores of the later training period as well (see [`CROSS_FIT_CUTS`]).
pub const MIN_CALIBRATION_CLASS: usize = 5;

/// Cut points (shares of the fit part, in submit order) of the out-of-fold blocks: each
/// block is scored by models fitted on everything before it.
pub const CROSS_FIT_CUTS: [f64; 4] = [0.4, 0.6, 0.8, 1.0];

/// The false-positive rate at which recall is reported.
pub const RECALL_AT_FPR: f64 = 0.10;

/// Which of the candidates is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureModel {
    /// The class-weighted kernel SVM.
    Svm,
    /// The log-loss GBDT.
    Gbdt,
    /// The calibrated past failure rate of the job's user (or group, queue, cluster).
    PastRate,
}

impl FailureModel {
    /// Name in tables.
    pub fn name(self) -> &'static str {
        match self {
            FailureModel::Svm => "svm",
            FailureModel::Gbdt => "gbdt",
            FailureModel::PastRate => "past_rate",
        }
    }
}
