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
//! fewer than [`MIN_CALIBRATION_CLASS`] jobs of a class (MLPerf's newest 20% holds one failed
//! run), no slope can be fitted on it: the calibrators then also get forward-chained
//! out-of-fold scores of the later training period (each block scored by models fitted on
//! everything before it). The served model is the one with the higher ROC-AUC on those
//! out-of-sample scores.
//!
//! Labels ([`failure_label`]): `failed` = 1; `completed` and `killed` = 0; `unknown` (still
//! running or pending when the trace ended, or no status) is censored — never a label, in
//! training or in evaluation; such jobs still count as submitted in the features.
//!
//! [`evaluate_failure`] runs the shared protocol (time-ordered 80/20 split of all jobs by
//! submit time; the labelled ones train and test) with two trivial baselines: the training
//! base rate, and the past failure rate of the job's user (or group, queue, cluster when the
//! trace has no users).

use std::time::Instant;

use augur_datasets::{JobRecord, TimeSplit};
use augur_features::failure::FAILURE_KEY_FEATURES;
use augur_features::{
    failure_batch_features, failure_label, FailKey, FailureFeatureState, FailureSchema,
    FEATURE_SCHEMA_VERSION,
};
use augur_models::gbdt::{GbdtModel, GbdtParams, Objective, Validation};
use augur_models::preprocess::{PreprocessParams, Preprocessor};
use augur_models::{Matrix, ModelError, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use crate::registry::Artifact;
use crate::PredictorError;

/// Isotonic calibration needs at least this many jobs of each class in the calibration
/// slice; with fewer, Platt scaling's two parameters are all the slice can support.
pub const ISOTONIC_MIN_CLASS: usize = 30;

/// When the calibration slice holds fewer jobs than this of its rarer class, Platt's slope
/// cannot be fitted on it: the calibrators are then fitted on forward-chained out-of-fold
/// scores of the later training period as well (see [`CROSS_FIT_CUTS`]).
pub const MIN_CALIBRATION_CLASS: usize = 5;

/// Cut points (shares of the fit part, in submit order) of the out-of-fold blocks: each
/// block is scored by models fitted on everything before it.
pub const CROSS_FIT_CUTS: [f64; 4] = [0.4, 0.6, 0.8, 1.0];

/// The false-positive rate at which recall is reported.
pub const RECALL_AT_FPR: f64 = 0.10;

/// Which of the two models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureModel {
    /// The class-weighted kernel SVM.
    Svm,
    /// The log-loss GBDT.
    Gbdt,
}

impl FailureModel {
    /// Name in tables.
    pub fn name(self) -> &'static str {
        match self {
            FailureModel::Svm => "svm",
            FailureModel::Gbdt => "gbdt",
        }
    }
}

// ---------------------------------------------------------------------------------------
// calibration

/// Maps a model score to a probability, monotone non-decreasing, in [0, 1].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Calibrator {
    /// `sigmoid(a · score + b)` with `a ≥ 0` (Platt 1999, with his smoothed targets).
    Platt { a: f64, b: f64 },
    /// Pool-adjacent-violators fit: non-decreasing probabilities `p` at increasing scores
    /// `x`, linearly interpolated between them and flat beyond.
    Isotonic { x: Vec<f64>, p: Vec<f64> },
}

impl Calibrator {
    /// Fits on out-of-sample `scores` with their labels: isotonic when both classes have at
    /// least [`ISOTONIC_MIN_CLASS`] jobs, else Platt.
    pub fn fit(scores: &[f64], labels: &[bool]) -> Calibrator {
        let pos = labels.iter().filter(|&&l| l).count();
        let neg = labels.len() - pos;
        if pos.min(neg) >= ISOTONIC_MIN_CLASS {
            Calibrator::fit_isotonic(scores, labels)
        } else {
            Calibrator::fit_platt(scores, labels)
        }
    }

    /// Platt scaling by Newton's method on the smoothed targets
    /// `(n₊ + 1) / (n₊ + 2)` and `1 / (n₋ + 2)` (Lin, Lin & Weng 2007). A fit that would
    /// decrease with the score (the model ranks backwards on the slice) is flattened to the
    /// slice's smoothed base rate.
    pub fn fit_platt(scores: &[f64], labels: &[bool]) -> Calibrator {
        let pairs: Vec<(f64, bool)> = scores
            .iter()
            .zip(labels)
            .filter(|(s, _)| s.is_finite())
            .map(|(&s, &l)| (s, l))
            .collect();
        let pos = pairs.iter().filter(|p| p.1).count() as f64;
        let neg = pairs.len() as f64 - pos;
        let t_pos = (pos + 1.0) / (pos + 2.0);
        let t_neg = 1.0 / (neg + 2.0);
        let targets: Vec<f64> = pairs
            .iter()
            .map(|p| if p.1 { t_pos } else { t_neg })
            .collect();
        let flat = {
            let p = (pos + 1.0) / (pos + neg + 2.0);
            Calibrator::Platt {
                a: 0.0,
                b: (p / (1.0 - p)).ln(),
            }
        };
        if pairs.is_empty() {
            return flat;
        }
        let (a, b) = platt_newton(&pairs, &targets, true);
        if a.is_finite() && b.is_finite() && a > 0.0 {
            Calibrator::Platt { a, b }
        } else {
            // refit the intercept alone: the slice's smoothed rate
            let (_, b) = platt_newton(&pairs, &targets, false);
            if b.is_finite() {
                Calibrator::Platt { a: 0.0, b }
            } else {
                flat
            }
        }
    }

    /// Isotonic regression (pool adjacent violators) of the labels on the scores.
    pub fn fit_isotonic(scores: &[f64], labels: &[bool]) -> Calibrator {
        let mut pairs: Vec<(f64, f64)> = scores
            .iter()
            .zip(labels)
            .filter(|(s, _)| s.is_finite())
            .map(|(&s, &l)| (s, f64::from(u8::from(l))))
            .collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        // blocks of (sum of scores, sum of labels, count); equal scores always share a block
        let mut blocks: Vec<(f64, f64, f64)> = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let mut j = i;
            let (mut ss, mut sy) = (0.0, 0.0);
            while j < pairs.len() && pairs[j].0 == pairs[i].0 {
                ss += pairs[j].0;
                sy += pairs[j].1;
                j += 1;
            }
            blocks.push((ss, sy, (j - i) as f64));
            i = j;
            while blocks.len() >= 2 {
                let n = blocks.len();
                let (a, b) = (blocks[n - 2], blocks[n - 1]);
                if a.1 / a.2 > b.1 / b.2 {
                    blocks.pop();
                    blocks[n - 2] = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
                } else {
                    break;
                }
            }
        }
        if blocks.is_empty() {
            return Calibrator::fit_platt(scores, labels);
        }
        Calibrator::Isotonic {
            x: blocks.iter().map(|b| b.0 / b.2).collect(),
            p: blocks.iter().map(|b| b.1 / b.2).collect(),
        }
    }

    /// The calibrated probability of a score (NaN scores map to the lowest probability).
    pub fn probability(&self, score: f64) -> f64 {
        match self {
            Calibrator::Platt { a, b } => {
                let z = if score.is_finite() { a * score + b } else { *b };
                sigmoid(z)
            }
            Calibrator::Isotonic { x, p } => {
                let (Some(&x0), Some(&p0)) = (x.first(), p.first()) else {
                    return 0.5;
                };
                if !score.is_finite() || score <= x0 {
                    return p0;
                }
                let k = x.partition_point(|&v| v <= score);
                if k >= x.len() {
                    return p[p.len() - 1];
                }
                let (xl, xr, pl, pr) = (x[k - 1], x[k], p[k - 1], p[k]);
                let t = if xr > xl {
                    (score - xl) / (xr - xl)
                } else {
                    1.0
                };
                (pl + t * (pr - pl)).clamp(0.0, 1.0)
            }
        }
    }

    /// Short description for reports: `platt(a=…, b=…)` or `isotonic(k steps)`.
    pub fn describe(&self) -> String {
        match self {
            Calibrator::Platt { a, b } => format!("platt(a={a:.3}, b={b:.3})"),
            Calibrator::Isotonic { x, .. } => format!("isotonic({} steps)", x.len()),
        }
    }
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Newton's method for the cross-entropy of `sigmoid(a·s + b)` against `targets`; with
/// `fit_slope` false, `a` stays 0. Returns `(a, b)`.
fn platt_newton(pairs: &[(f64, bool)], targets: &[f64], fit_slope: bool) -> (f64, f64) {
    // scale scores for conditioning
    let scale = {
        let m = pairs.iter().map(|p| p.0.abs()).fold(0.0, f64::max);
        if m > 0.0 {
            m
        } else {
            1.0
        }
    };
    let (mut a, mut b) = (0.0f64, {
        let t = targets.iter().sum::<f64>() / targets.len().max(1) as f64;
        (t / (1.0 - t)).ln()
    });
    let loss = |a: f64, b: f64| -> f64 {
        pairs
            .iter()
            .zip(targets)
            .map(|(p, t)| {
                let z = a * p.0 / scale + b;
                // log(1 + e^z) − t·z, stable
                let softplus = if z > 0.0 {
                    z + (-z).exp().ln_1p()
                } else {
                    z.exp().ln_1p()
                };
                softplus - t * z
            })
            .sum()
    };
    let mut f = loss(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-12, 0.0, 1e-12);
        for (p, t) in pairs.iter().zip(targets) {
            let s = p.0 / scale;
            let q = sigmoid(a * s + b);
            let d = q - t;
            let w = q * (1.0 - q);
            ga += d * s;
            gb += d;
            haa += w * s * s;
            hab += w * s;
            hbb += w;
        }
        let (da, db) = if fit_slope {
            let det = haa * hbb - hab * hab;
            if det.abs() < 1e-18 {
                (0.0, gb / hbb)
            } else {
                ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det)
            }
        } else {
            (0.0, gb / hbb)
        };
        // backtracking line search
        let mut step = 1.0;
        let mut improved = false;
        while step > 1e-8 {
            let (na, nb) = (a - step * da, b - step * db);
            let nf = loss(na, nb);
            if nf < f - 1e-12 {
                a = na;
                b = nb;
                f = nf;
                improved = true;
                break;
            }
            step *= 0.5;
        }
        if !improved || (da.abs() + db.abs()) < 1e-10 {
            break;
        }
    }
    (a / scale, b)
}

// ---------------------------------------------------------------------------------------
// the kernel SVM

/// How the SVM is fitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SvmSettings {
    /// Soft-margin penalty, before class weighting.
    pub c: f64,
    /// Gaussian kernel `exp(−‖x − x'‖² / (width · d))`, `d` = preprocessed input width.
    pub width: f64,
    /// At most this many training jobs (the dense kernel matrix is n²).
    pub max_rows: usize,
    /// Standardised inputs are clipped to ±clip.
    pub clip: f32,
    /// Seed of the row sample.
    pub seed: u64,
}

impl Default for SvmSettings {
    fn default() -> Self {
        SvmSettings {
            c: 1.0,
            width: 1.0,
            max_rows: 3000,
            clip: 3.0,
            seed: 11,
        }
    }
}

/// A fitted Gaussian-kernel SVM in plain Rust: the decision value is
/// `Σ coef_i · exp(−‖sv_i − x‖² / eps) − rho` on the preprocessed input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSvm {
    /// Feature columns the SVM reads, in order.
    columns: Vec<u32>,
    pre: Preprocessor,
    /// Support vectors, row-major, `dim` values each.
    support: Vec<f32>,
    dim: usize,
    coef: Vec<f64>,
    rho: f64,
    eps: f64,
}

impl KernelSvm {
    /// Number of support vectors.
    pub fn n_support(&self) -> usize {
        self.coef.len()
    }

    /// The decision value of a full failure-feature row (`scratch`: reused buffers).
    pub fn decision(&self, row: &[f32], scratch: &mut SvmScratch) -> f64 {
        scratch.input.clear();
        scratch.input.extend(
            self.columns
                .iter()
                .map(|&c| row.get(c as usize).copied().unwrap_or(f32::NAN)),
        );
        scratch.z.resize(self.dim, 0.0);
        self.pre.transform_row(&scratch.input, &mut scratch.z);
        self.decision_preprocessed(&scratch.z)
    }

    fn decision_preprocessed(&self, z: &[f32]) -> f64 {
        let mut sum = 0.0;
        for (sv, c) in self.support.chunks_exact(self.dim.max(1)).zip(&self.coef) {
            let d2: f32 = sv.iter().zip(z).map(|(a, b)| (a - b) * (a - b)).sum();
            sum += c * (-(f64::from(d2)) / self.eps).exp();
        }
        sum - self.rho
    }
}

/// Reusable buffers for [`KernelSvm::decision`].
#[derive(Debug, Default, Clone)]
pub struct SvmScratch {
    input: Vec<f32>,
    z: Vec<f32>,
}

/// The columns of a failure-feature row the SVM reads: the request features (the runtime
/// schema's static ones) and the failure histories.
fn svm_columns(schema: &FailureSchema) -> Vec<u32> {
    let empty = augur_features::FeatureSchema {
        version: schema.base.version,
        keys: vec![],
        ratio: false,
    };
    let n_static = empty.len();
    (0..n_static)
        .chain(schema.failure_offset()..schema.len())
        .map(|c| c as u32)
        .collect()
}

/// Fits the SVM on `rows` of `x` (width `d`).
fn fit_svm(
    x: &[f32],
    d: usize,
    rows: &[usize],
    labels: &[bool],
    columns: Vec<u32>,
    settings: &SvmSettings,
) -> Result<KernelSvm, PredictorError> {
    use linfa::prelude::Fit as _;
    // the row sample: every positive up to half the budget, then a seeded sample of the rest
    let mut pos: Vec<usize> = (0..rows.len()).filter(|&k| labels[k]).collect();
    let mut neg: Vec<usize> = (0..rows.len()).filter(|&k| !labels[k]).collect();
    if pos.is_empty() || neg.is_empty() {
        return Err(PredictorError::not_enough(
            "jobs with a known outcome",
            format!(
                "the SVM needs both outcomes in training: {} failed, {} not failed",
                pos.len(),
                neg.len()
            ),
        ));
    }
    let budget = settings.max_rows.max(20);
    let mut rng = SplitMix(settings.seed);
    let n_pos = pos
        .len()
        .min(budget / 2)
        .max(budget.saturating_sub(neg.len()));
    let n_pos = n_pos.min(pos.len());
    let n_neg = (budget - n_pos).min(neg.len());
    rng.shuffle(&mut pos);
    rng.shuffle(&mut neg);
    let mut picked: Vec<usize> = pos[..n_pos].iter().chain(&neg[..n_neg]).copied().collect();
    picked.sort_unstable();

    let w = columns.len();
    let mut input = Vec::with_capacity(picked.len() * w);
    for &k in &picked {
        let r = rows[k];
        input.extend(columns.iter().map(|&c| x[r * d + c as usize]));
    }
    let m = Matrix::new(&input, picked.len(), w)?;
    let pre = PreprocessParams {
        clip: settings.clip,
        ..PreprocessParams::default()
    }
    .fit(&m)?;
    let z = pre.transform(&m)?;
    let dim = pre.n_out();
    let eps = settings.width * dim.max(1) as f64;
    let y: Vec<bool> = picked.iter().map(|&k| labels[k]).collect();
    let (np, nn) = (n_pos as f64, n_neg as f64);
    let n = np + nn;
    let (c_pos, c_neg) = (settings.c * n / (2.0 * np), settings.c * n / (2.0 * nn));

    let records = ndarray::Array2::from_shape_vec(
        (picked.len(), dim),
        z.iter().map(|&v| f64::from(v)).collect(),
    )
    .map_err(|e| ModelError::InvalidData(format!("svm input: {e}")))?;
    let targets = ndarray::Array1::from_vec(y);
    let dataset = linfa::Dataset::new(records, targets);
    let model: linfa_svm::Svm<f64, bool> = linfa_svm::Svm::<f64, bool>::params()
        .pos_neg_weights(c_pos, c_neg)
        .gaussian_kernel(eps)
        .fit(&dataset)
        .map_err(|e| ModelError::Numerical(format!("svm: {e}")))?;
    let tol = 100.0 * f64::EPSILON;
    let mut support = Vec::new();
    let mut coef = Vec::new();
    for (k, &a) in model.alpha.iter().enumerate() {
        if a.abs() > tol {
            support.extend_from_slice(&z[k * dim..(k + 1) * dim]);
            coef.push(a);
        }
    }
    Ok(KernelSvm {
        columns,
        pre,
        support,
        dim,
        coef,
        rho: model.rho,
        eps,
    })
}

/// A small seeded generator for the SVM's row sample and the bootstrap.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------------------
// the predictor

/// The failure probability of one job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FailurePrediction {
    /// Calibrated probability from the served model.
    pub probability: f64,
    /// Calibrated probability from the GBDT.
    pub gbdt: f64,
    /// Calibrated probability from the SVM.
    pub svm: f64,
}

/// The trained failure predictor: features, both models, their calibrators.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailurePredictor {
    /// The feature layout (runtime features, then failure histories).
    pub schema: FailureSchema,
    gbdt: GbdtModel,
    gbdt_calibration: Calibrator,
    svm: KernelSvm,
    svm_calibration: Calibrator,
    /// The model whose probability [`FailurePrediction::probability`] is.
    pub served: FailureModel,
    /// Failed share of the labelled training jobs.
    pub train_base_rate: f64,
    /// ROC-AUC of each model on the calibration slice (how `served` was chosen).
    pub validation_auc: (f64, f64),
}

impl FailurePredictor {
    /// Prediction from a failure-feature row ([`FailureSchema::len`] values).
    pub fn predict_row(&self, row: &[f32], scratch: &mut SvmScratch) -> FailurePrediction {
        let g = self
            .gbdt_calibration
            .probability(self.gbdt.predict_row(row));
        let s = self
            .svm_calibration
            .probability(self.svm.decision(row, scratch));
        FailurePrediction {
            probability: match self.served {
                FailureModel::Gbdt => g,
                FailureModel::Svm => s,
            },
            gbdt: g,
            svm: s,
        }
    }

    /// Prediction for `job`, about to be submitted at `now`, from the online state
    /// (`buf`: a reusable feature buffer).
    pub fn predict(
        &self,
        state: &mut FailureFeatureState,
        job: &JobRecord,
        now: f64,
        buf: &mut Vec<f32>,
        scratch: &mut SvmScratch,
    ) -> Result<FailurePrediction, PredictorError> {
        buf.resize(self.schema.len(), 0.0);
        state.features_for(job, now, buf)?;
        Ok(self.predict_row(buf, scratch))
    }

    /// The two models' raw scores before calibration: (SVM decision value, GBDT log-odds).
    pub fn raw_scores(&self, row: &[f32], scratch: &mut SvmScratch) -> (f64, f64) {
        (self.svm.decision(row, scratch), self.gbdt.predict_row(row))
    }

    /// A fresh online feature state for this predictor's schema.
    pub fn new_state(&self) -> FailureFeatureState {
        FailureFeatureState::new(self.schema.clone())
    }

    /// The calibrators (GBDT, SVM).
    pub fn calibrators(&self) -> (&Calibrator, &Calibrator) {
        (&self.gbdt_calibration, &self.svm_calibration)
    }

    /// Support vectors of the SVM and trees of the GBDT.
    pub fn sizes(&self) -> (usize, usize) {
        (self.svm.n_support(), self.gbdt.n_trees())
    }
}

impl Artifact for FailurePredictor {
    const KIND: &'static str = "failure";
    const CURRENT_FEATURE_SCHEMA_VERSION: u32 = FEATURE_SCHEMA_VERSION;
    fn feature_schema_version(&self) -> u32 {
        self.schema.base.version
    }
}

/// Hyperparameters of the failure predictor.
#[derive(Debug, Clone)]
pub struct FailureTrainer {
    pub gbdt: GbdtParams,
    pub svm: SvmSettings,
    /// Share of the training jobs (the newest) that calibrate and pick the served model.
    pub calibration_fraction: f64,
}

impl Default for FailureTrainer {
    fn default() -> Self {
        FailureTrainer {
            gbdt: GbdtParams {
                objective: Objective::LogLoss,
                n_trees: 400,
                learning_rate: 0.03,
                num_leaves: 15,
                min_data_in_leaf: 10,
                lambda_l2: 1.0,
                subsample: 0.8,
                colsample: 0.8,
                early_stopping_rounds: 60,
                ..GbdtParams::default()
            },
            svm: SvmSettings::default(),
            calibration_fraction: 0.2,
        }
    }
}

/// What training measured on the way (for reports and registry notes).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrainingInfo {
    pub fit_jobs: usize,
    /// Jobs the calibrators were fitted on (and the served model chosen by).
    pub calibration_jobs: usize,
    pub calibration_failed: usize,
    /// True when the slice had too few jobs of a class and the calibration used
    /// forward-chained out-of-fold scores too (see [`MIN_CALIBRATION_CLASS`]).
    pub cross_fitted: bool,
    pub svm_rows: usize,
    pub svm_train_s: f64,
    pub gbdt_train_s: f64,
}

impl FailureTrainer {
    /// Trains on the labelled jobs among `train_rows` (indices into `x`'s rows, in submit
    /// order), `x` being [`failure_batch_features`] of the whole trace under `schema`.
    pub fn train(
        &self,
        schema: &FailureSchema,
        x: &[f32],
        jobs: &[JobRecord],
        train_rows: &[usize],
    ) -> Result<(FailurePredictor, TrainingInfo), PredictorError> {
        let d = schema.len();
        let labelled: Vec<usize> = train_rows
            .iter()
            .copied()
            .filter(|&i| failure_label(jobs[i].status).is_some())
            .collect();
        let n_cal = ((labelled.len() as f64) * self.calibration_fraction.clamp(0.05, 0.5)) as usize;
        if labelled.len() < 50 || n_cal < 10 {
            return Err(PredictorError::not_enough("jobs with a known outcome", format!(
                "{} training jobs with a known outcome (failed / not failed); the failure predictor needs at least 50",
                labelled.len()
            )));
        }
        let (fit, cal) = labelled.split_at(labelled.len() - n_cal);
        let label = |i: usize| failure_label(jobs[i].status).unwrap_or(false);
        let fit_y: Vec<bool> = fit.iter().map(|&i| label(i)).collect();
        let cal_y: Vec<bool> = cal.iter().map(|&i| label(i)).collect();
        let n_failed_fit = fit_y.iter().filter(|&&l| l).count();
        if n_failed_fit == 0 || n_failed_fit == fit_y.len() {
            return Err(PredictorError::not_enough(
                "jobs with a known outcome",
                format!(
                    "the training jobs before the calibration slice are all {}: nothing to learn",
                    if n_failed_fit == 0 {
                        "not failed"
                    } else {
                        "failed"
                    }
                ),
            ));
        }

        // GBDT, early-stopped on the calibration slice
        let t0 = Instant::now();
        let fx = gather(x, d, fit);
        let cx = gather(x, d, cal);
        let fy: Vec<f64> = fit_y.iter().map(|&l| f64::from(u8::from(l))).collect();
        let cy: Vec<f64> = cal_y.iter().map(|&l| f64::from(u8::from(l))).collect();
        let fm = Matrix::new(&fx, fit.len(), d)?;
        let cm = Matrix::new(&cx, cal.len(), d)?;
        let gbdt = self.gbdt.fit_with_validation(
            &TrainSet::new(fm, &fy, None)?,
            Some(Validation { x: cm, y: &cy }),
        )?;
        let mut gbdt_train_s = t0.elapsed().as_secs_f64();

        // SVM
        let t1 = Instant::now();
        let svm = fit_svm(x, d, fit, &fit_y, svm_columns(schema), &self.svm)?;
        let mut svm_train_s = t1.elapsed().as_secs_f64();

        // calibration on the slice; when its rarer class is too small to fit a slope, on
        // forward-chained out-of-fold scores of the later training period plus the slice
        let mut g_scores = vec![0.0; cal.len()];
        gbdt.predict_into(&cm, &mut g_scores)?;
        let mut scratch = SvmScratch::default();
        let mut s_scores: Vec<f64> = cal
            .iter()
            .map(|&i| svm.decision(&x[i * d..(i + 1) * d], &mut scratch))
            .collect();
        let mut calib_y = cal_y.clone();
        let cal_pos = cal_y.iter().filter(|&&l| l).count();
        let cross_fitted = cal_pos.min(cal_y.len() - cal_pos) < MIN_CALIBRATION_CLASS;
        if cross_fitted {
            let t2 = Instant::now();
            let (fg, fs, fy) = self.out_of_fold(schema, x, fit, &fit_y, gbdt.n_trees())?;
            g_scores.splice(0..0, fg);
            s_scores.splice(0..0, fs);
            calib_y.splice(0..0, fy);
            // the extra fits are training time of both models
            let extra = t2.elapsed().as_secs_f64() / 2.0;
            gbdt_train_s += extra;
            svm_train_s += extra;
        }
        let gbdt_calibration = Calibrator::fit(&g_scores, &calib_y);
        let svm_calibration = Calibrator::fit(&s_scores, &calib_y);
        let auc_g = roc_auc(&g_scores, &calib_y);
        let auc_s = roc_auc(&s_scores, &calib_y);
        let served = if auc_s > auc_g {
            FailureModel::Svm
        } else {
            FailureModel::Gbdt
        };
        let all_y = fit_y.iter().chain(&cal_y);
        let train_base_rate = all_y.clone().filter(|&&l| l).count() as f64 / labelled.len() as f64;
        let info = TrainingInfo {
            fit_jobs: fit.len(),
            calibration_jobs: calib_y.len(),
            calibration_failed: calib_y.iter().filter(|&&l| l).count(),
            cross_fitted,
            svm_rows: self.svm.max_rows.max(20).min(fit.len()),
            svm_train_s,
            gbdt_train_s,
        };
        Ok((
            FailurePredictor {
                schema: schema.clone(),
                gbdt,
                gbdt_calibration,
                svm,
                svm_calibration,
                served,
                train_base_rate,
                validation_auc: (auc_s, auc_g),
            },
            info,
        ))
    }
}

/// Out-of-fold (GBDT score, SVM score, label) columns.
type OutOfFold = (Vec<f64>, Vec<f64>, Vec<bool>);

impl FailureTrainer {
    /// Out-of-fold scores of the later part of `fit` (labelled rows in submit order):
    /// for each block between [`CROSS_FIT_CUTS`], both models are fitted on every row before
    /// the block (the GBDT with `n_trees` trees, no early stopping) and score the block.
    /// Blocks whose history lacks a class are left out. Returns (GBDT, SVM, label) per row.
    fn out_of_fold(
        &self,
        schema: &FailureSchema,
        x: &[f32],
        fit: &[usize],
        fit_y: &[bool],
        n_trees: usize,
    ) -> Result<OutOfFold, PredictorError> {
        let d = schema.len();
        let params = GbdtParams {
            n_trees: n_trees.max(1),
            ..self.gbdt.clone()
        };
        let (mut g, mut s, mut y) = (Vec::new(), Vec::new(), Vec::new());
        let at = |f: f64| ((fit.len() as f64) * f) as usize;
        for w in CROSS_FIT_CUTS.windows(2) {
            let (a, b) = (at(w[0]), at(w[1]));
            let head_pos = fit_y[..a].iter().filter(|&&l| l).count();
            if a == 0 || b <= a || head_pos == 0 || head_pos == a {
                continue;
            }
            let hx = gather(x, d, &fit[..a]);
            let hy: Vec<f64> = fit_y[..a].iter().map(|&l| f64::from(u8::from(l))).collect();
            let hm = Matrix::new(&hx, a, d)?;
            let model = params.fit_with_validation(&TrainSet::new(hm, &hy, None)?, None)?;
            let svm = fit_svm(x, d, &fit[..a], &fit_y[..a], svm_columns(schema), &self.svm)?;
            let mut scratch = SvmScratch::default();
            for (k, &i) in fit[a..b].iter().enumerate() {
                let row = &x[i * d..(i + 1) * d];
                g.push(model.predict_row(row));
                s.push(svm.decision(row, &mut scratch));
                y.push(fit_y[a + k]);
            }
        }
        Ok((g, s, y))
    }
}

fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * d);
    for &i in rows {
        out.extend_from_slice(&x[i * d..(i + 1) * d]);
    }
    out
}

// ---------------------------------------------------------------------------------------
// metrics

/// ROC-AUC (ties count one half: the Mann–Whitney statistic). NaN without both classes.
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len().min(labels.len())).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let n_pos = idx.iter().filter(|&&i| labels[i]).count() as f64;
    let n_neg = idx.len() as f64 - n_pos;
    if n_pos == 0.0 || n_neg == 0.0 {
        return f64::NAN;
    }
    // sum of the positives' mid-ranks
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
            j += 1;
        }
        let mid = (i + j + 1) as f64 / 2.0; // ranks i+1..=j
        rank_sum += mid * idx[i..j].iter().filter(|&&k| labels[k]).count() as f64;
        i = j;
    }
    (rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg)
}

/// Points of the ROC curve `(false-positive rate, true-positive rate)`, from (0, 0) to
/// (1, 1), one per distinct score (tied scores move both rates at once).
pub fn roc_curve(scores: &[f64], labels: &[bool]) -> Vec<(f64, f64)> {
    let (n_pos, n_neg, steps) = threshold_steps(scores, labels);
    let mut out = vec![(0.0, 0.0)];
    if n_pos == 0 || n_neg == 0 {
        return out;
    }
    for (tp, fp) in steps {
        out.push((fp as f64 / n_neg as f64, tp as f64 / n_pos as f64));
    }
    out
}

/// Cumulative (true positives, false positives) after each distinct score, highest first.
fn threshold_steps(scores: &[f64], labels: &[bool]) -> (usize, usize, Vec<(usize, usize)>) {
    let mut idx: Vec<usize> = (0..scores.len().min(labels.len())).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let n_pos = idx.iter().filter(|&&i| labels[i]).count();
    let n_neg = idx.len() - n_pos;
    let (mut tp, mut fp) = (0, 0);
    let mut steps = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
            if labels[idx[j]] {
                tp += 1;
            } else {
                fp += 1;
            }
            j += 1;
        }
        steps.push((tp, fp));
        i = j;
    }
    (n_pos, n_neg, steps)
}

/// Recall (true-positive rate) at false-positive rate `fpr`, on the ROC curve linearly
/// interpolated between thresholds. NaN without both classes.
pub fn recall_at_fpr(scores: &[f64], labels: &[bool], fpr: f64) -> f64 {
    let curve = roc_curve(scores, labels);
    if curve.len() < 2 {
        return f64::NAN;
    }
    let mut best = 0.0f64;
    for w in curve.windows(2) {
        let ((f0, t0), (f1, t1)) = (w[0], w[1]);
        if f1 <= fpr {
            best = best.max(t1);
        } else if f0 <= fpr {
            let t = if f1 > f0 { (fpr - f0) / (f1 - f0) } else { 0.0 };
            best = best.max(t0 + t * (t1 - t0));
        }
    }
    best
}

/// Points of the precision–recall curve `(recall, precision)`, one per distinct score.
pub fn pr_curve(scores: &[f64], labels: &[bool]) -> Vec<(f64, f64)> {
    let (n_pos, _, steps) = threshold_steps(scores, labels);
    if n_pos == 0 {
        return Vec::new();
    }
    steps
        .into_iter()
        .map(|(tp, fp)| (tp as f64 / n_pos as f64, tp as f64 / (tp + fp) as f64))
        .collect()
}

/// PR-AUC as average precision: Σ (recallₖ − recallₖ₋₁) · precisionₖ over thresholds
/// (no interpolation, as scikit-learn computes it). Its no-skill value is the base rate.
pub fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
    let curve = pr_curve(scores, labels);
    if curve.is_empty() {
        return f64::NAN;
    }
    let mut prev = 0.0;
    let mut ap = 0.0;
    for (r, p) in curve {
        ap += (r - prev) * p;
        prev = r;
    }
    ap
}

/// Mean squared difference between probability and outcome.
pub fn brier(probs: &[f64], labels: &[bool]) -> f64 {
    let n = probs.len().min(labels.len());
    if n == 0 {
        return f64::NAN;
    }
    probs
        .iter()
        .zip(labels)
        .map(|(p, &l)| (p - f64::from(u8::from(l))).powi(2))
        .sum::<f64>()
        / n as f64
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReliabilityBin {
    /// Bin edges of the predicted probability.
    pub lo: f64,
    pub hi: f64,
    pub jobs: usize,
    /// Mean predicted probability in the bin.
    pub mean_predicted: f64,
    /// Observed failed share in the bin.
    pub observed: f64,
}

/// Reliability diagram over `bins` equal-width probability bins (empty bins left out).
pub fn reliability(probs: &[f64], labels: &[bool], bins: usize) -> Vec<ReliabilityBin> {
    let bins = bins.max(1);
    let mut acc = vec![(0usize, 0.0f64, 0usize); bins];
    for (p, &l) in probs.iter().zip(labels) {
        if !p.is_finite() {
            continue;
        }
        let k = ((p.clamp(0.0, 1.0) * bins as f64) as usize).min(bins - 1);
        acc[k].0 += 1;
        acc[k].1 += p;
        acc[k].2 += usize::from(l);
    }
    acc.iter()
        .enumerate()
        .filter(|(_, a)| a.0 > 0)
        .map(|(k, a)| ReliabilityBin {
            lo: k as f64 / bins as f64,
            hi: (k + 1) as f64 / bins as f64,
            jobs: a.0,
            mean_predicted: a.1 / a.0 as f64,
            observed: a.2 as f64 / a.0 as f64,
        })
        .collect()
}

/// Expected calibration error: job-weighted mean |predicted − observed| over 10 bins.
pub fn expected_calibration_error(probs: &[f64], labels: &[bool]) -> f64 {
    let bins = reliability(probs, labels, 10);
    let n: usize = bins.iter().map(|b| b.jobs).sum();
    if n == 0 {
        return f64::NAN;
    }
    bins.iter()
        .map(|b| b.jobs as f64 * (b.mean_predicted - b.observed).abs())
        .sum::<f64>()
        / n as f64
}

/// A 95% percentile-bootstrap interval of the ROC-AUC (`resamples` seeded resamples of the
/// test jobs; resamples without both classes are skipped). `None` when too few remain.
pub fn roc_auc_interval(scores: &[f64], labels: &[bool], resamples: usize) -> Option<(f64, f64)> {
    let n = scores.len().min(labels.len());
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix(0x5eed);
    let mut aucs = Vec::with_capacity(resamples);
    let (mut s, mut l) = (vec![0.0; n], vec![false; n]);
    for _ in 0..resamples {
        for k in 0..n {
            let i = rng.below(n);
            s[k] = scores[i];
            l[k] = labels[i];
        }
        let a = roc_auc(&s, &l);
        if a.is_finite() {
            aucs.push(a);
        }
    }
    if aucs.len() < resamples / 2 || aucs.len() < 10 {
        return None;
    }
    aucs.sort_by(f64::total_cmp);
    let at = |q: f64| aucs[((aucs.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

// ---------------------------------------------------------------------------------------
// evaluation

/// One method's metrics on the test jobs.
#[derive(Debug, Clone, Serialize)]
pub struct FailureEvalRow {
    pub method: String,
    pub roc_auc: f64,
    /// 95% bootstrap interval of the ROC-AUC.
    pub roc_auc_95: Option<(f64, f64)>,
    /// Average precision (its no-skill value is the test base rate).
    pub pr_auc: f64,
    /// Recall at a 10% false-positive rate.
    pub recall_at_10fpr: f64,
    pub brier: f64,
    /// Expected calibration error (10 bins).
    pub ece: f64,
    pub train_s: Option<f64>,
    /// Per job, batch prediction from feature rows.
    pub predict_us: Option<f64>,
}

/// A method's test probabilities (for curves in reports).
#[derive(Debug, Clone)]
pub struct MethodProbabilities {
    pub method: String,
    pub probs: Vec<f64>,
}

/// The failure evaluation of one trace.
#[derive(Debug, Clone, Serialize)]
pub struct FailureEvaluation {
    /// Labelled training / test jobs.
    pub n_train: usize,
    pub n_test: usize,
    /// Jobs in the trace without a known outcome (censored or no status), not labelled.
    pub n_censored: usize,
    pub base_rate_train: f64,
    pub base_rate_test: f64,
    pub failed_test: usize,
    pub rows: Vec<FailureEvalRow>,
    /// The model the predictor serves, and why.
    pub served: FailureModel,
    /// ROC-AUC of (SVM, GBDT) on the calibration slice.
    pub validation_auc: (f64, f64),
    /// ROC-AUC of the (SVM, GBDT) raw scores on the test jobs, before calibration (a flat
    /// calibration, fitted when a model ranked the slice backwards, hides their ranking).
    pub raw_test_auc: (f64, f64),
    pub gbdt_calibration: String,
    pub svm_calibration: String,
    pub svm_support_vectors: usize,
    pub gbdt_trees: usize,
    pub training: TrainingInfo,
    /// Outcome of each test job, in submit order.
    #[serde(skip)]
    pub test_labels: Vec<bool>,
    /// Each method's test probabilities, in the order of `rows`.
    #[serde(skip)]
    pub test_probs: Vec<MethodProbabilities>,
    /// The trained predictor (for saving).
    #[serde(skip)]
    pub predictor: Option<FailurePredictor>,
}

/// Method names in evaluation tables.
pub const METHOD_BASE_RATE: &str = "base rate (training period)";
pub const METHOD_SVM: &str = "augur svm (class-weighted, rbf)";
pub const METHOD_GBDT: &str = "augur gbdt (log-loss)";

/// The shared protocol on `jobs`: time-ordered 80/20 split of all jobs by submit time; the
/// labelled jobs of the first part train, those of the second are scored.
pub fn evaluate_failure(
    jobs: &[JobRecord],
    trainer: &FailureTrainer,
) -> Result<FailureEvaluation, PredictorError> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled = |rows: &[usize]| -> Vec<usize> {
        rows.iter()
            .copied()
            .filter(|&i| failure_label(jobs[i].status).is_some())
            .collect()
    };
    let train_rows = labelled(split.train());
    let test_rows = labelled(split.test());
    let n_censored = jobs.len() - train_rows.len() - test_rows.len();
    if test_rows.is_empty() || train_rows.is_empty() {
        return Err(PredictorError::not_enough("jobs with a known outcome", format!(
            "{} training and {} test jobs with a known outcome (status failed / completed / killed); {} jobs have none (censored or no status column)",
            train_rows.len(),
            test_rows.len(),
            n_censored
        )));
    }
    let label = |i: usize| failure_label(jobs[i].status).unwrap_or(false);
    let test_y: Vec<bool> = test_rows.iter().map(|&i| label(i)).collect();
    let base_rate_train =
        train_rows.iter().filter(|&&i| label(i)).count() as f64 / train_rows.len() as f64;
    let failed_test = test_y.iter().filter(|&&l| l).count();
    let base_rate_test = failed_test as f64 / test_y.len() as f64;

    let train_jobs: Vec<JobRecord> = split.train().iter().map(|&i| jobs[i].clone()).collect();
    let schema = FailureSchema::for_jobs(&train_jobs);
    let t0 = Instant::now();
    let x = failure_batch_features(jobs, &schema);
    let features_s = t0.elapsed().as_secs_f64();
    let d = schema.len();
    let (predictor, info) = trainer.train(&schema, &x, jobs, &train_rows)?;

    let mut rows = Vec::new();
    let mut probs = Vec::new();
    let mut push = |method: String, p: Vec<f64>, train_s: Option<f64>, predict_us: Option<f64>| {
        rows.push(FailureEvalRow {
            roc_auc: roc_auc(&p, &test_y),
            roc_auc_95: roc_auc_interval(&p, &test_y, 300),
            pr_auc: average_precision(&p, &test_y),
            recall_at_10fpr: recall_at_fpr(&p, &test_y, RECALL_AT_FPR),
            brier: brier(&p, &test_y),
            ece: expected_calibration_error(&p, &test_y),
            method: method.clone(),
            train_s,
            predict_us,
        });
        probs.push(MethodProbabilities { method, probs: p });
    };
    push(
        METHOD_BASE_RATE.into(),
        vec![base_rate_train; test_rows.len()],
        None,
        None,
    );
    if let Some((key, col)) = history_baseline(&schema) {
        let p: Vec<f64> = test_rows
            .iter()
            .map(|&i| {
                let v = f64::from(x[i * d + col]);
                if v.is_finite() {
                    v
                } else {
                    base_rate_train
                }
            })
            .collect();
        push(
            format!("past failure rate of the job's {}", key_label(key)),
            p,
            None,
            None,
        );
    }
    let tx = gather(&x, d, &test_rows);
    let mut scratch = SvmScratch::default();
    let t1 = Instant::now();
    let preds: Vec<FailurePrediction> = tx
        .chunks_exact(d)
        .map(|r| predictor.predict_row(r, &mut scratch))
        .collect();
    let both_us = t1.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    // time each model alone for the table
    let t2 = Instant::now();
    let g_only: Vec<f64> = tx
        .chunks_exact(d)
        .map(|r| predictor.gbdt.predict_row(r))
        .collect();
    let gbdt_us = t2.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    debug_assert_eq!(g_only.len(), preds.len());
    let svm_us = (both_us - gbdt_us).max(0.0);
    push(
        METHOD_SVM.into(),
        preds.iter().map(|p| p.svm).collect(),
        Some(info.svm_train_s + features_s),
        Some(svm_us),
    );
    push(
        METHOD_GBDT.into(),
        preds.iter().map(|p| p.gbdt).collect(),
        Some(info.gbdt_train_s + features_s),
        Some(gbdt_us),
    );

    let mut raw_s = Vec::with_capacity(test_rows.len());
    let mut raw_g = Vec::with_capacity(test_rows.len());
    for r in tx.chunks_exact(d) {
        let (a, b) = predictor.raw_scores(r, &mut scratch);
        raw_s.push(a);
        raw_g.push(b);
    }
    let raw_test_auc = (roc_auc(&raw_s, &test_y), roc_auc(&raw_g, &test_y));
    let (svm_sv, trees) = predictor.sizes();
    Ok(FailureEvaluation {
        raw_test_auc,
        n_train: train_rows.len(),
        n_test: test_rows.len(),
        n_censored,
        base_rate_train,
        base_rate_test,
        failed_test,
        rows,
        served: predictor.served,
        validation_auc: predictor.validation_auc,
        gbdt_calibration: predictor.gbdt_calibration.describe(),
        svm_calibration: predictor.svm_calibration.describe(),
        svm_support_vectors: svm_sv,
        gbdt_trees: trees,
        training: info,
        test_labels: test_y,
        test_probs: probs,
        predictor: Some(predictor),
    })
}

/// The most specific key with a failure history for the "past failure rate" baseline: the
/// user, else the group, queue or the whole cluster; with its `fail_rate` column.
fn history_baseline(schema: &FailureSchema) -> Option<(FailKey, usize)> {
    [FailKey::User, FailKey::Group, FailKey::Queue, FailKey::All]
        .into_iter()
        .find_map(|k| schema.index_of(k, FAILURE_KEY_FEATURES[1]).map(|c| (k, c)))
}

fn key_label(key: FailKey) -> &'static str {
    match key {
        FailKey::User => "user",
        FailKey::Group => "group",
        FailKey::Queue => "queue",
        FailKey::All => "cluster",
        other => other.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        let l = [false, true, false, true];
        assert_eq!(roc_auc(&[0.1, 0.9, 0.2, 0.8], &l), 1.0);
        assert_eq!(roc_auc(&[0.9, 0.1, 0.8, 0.2], &l), 0.0);
        assert_eq!(roc_auc(&[0.5; 4], &l), 0.5);
        assert!(roc_auc(&[0.5; 2], &[true, true]).is_nan());
        // one positive above one negative and tied with the other: (1 + 0.5) / 2
        assert_eq!(roc_auc(&[0.1, 0.5, 0.5], &[false, false, true]), 0.75);
    }

    #[test]
    fn average_precision_and_recall_at_fpr() {
        let l = [true, false, true, false, false];
        let s = [0.9, 0.8, 0.7, 0.2, 0.1];
        // thresholds: (r .5, p 1), (r .5, p .5), (r 1, p 2/3) → .5·1 + .5·2/3
        assert!((average_precision(&s, &l) - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        // constant scores: AP is the base rate, recall at 10% FPR is 10%
        assert!((average_precision(&[0.3; 5], &l) - 0.4).abs() < 1e-12);
        assert!((recall_at_fpr(&[0.3; 5], &l, 0.1) - 0.1).abs() < 1e-12);
        // a perfect ranking has full recall at any FPR
        assert_eq!(recall_at_fpr(&[0.9, 0.1, 0.8, 0.2, 0.3], &l, 0.1), 1.0);
    }

    #[test]
    fn brier_and_reliability() {
        let l = [true, false];
        assert_eq!(brier(&[1.0, 0.0], &l), 0.0);
        assert_eq!(brier(&[0.5, 0.5], &l), 0.25);
        let bins = reliability(&[0.05, 0.05, 0.95, 0.95], &[false, true, true, true], 10);
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].observed, 0.5);
        assert_eq!(bins[1].observed, 1.0);
    }

    #[test]
    fn platt_is_monotone_and_bounded() {
        // scores with a real relation to the outcome
        let scores: Vec<f64> = (0..200).map(|i| f64::from(i) / 20.0 - 5.0).collect();
        let labels: Vec<bool> = (0..200).map(|i| (i * 7919) % 200 < i).collect();
        let c = Calibrator::fit_platt(&scores, &labels);
        let Calibrator::Platt { a, .. } = c else {
            panic!("{c:?}")
        };
        assert!(a > 0.0);
        let mut prev = -1.0;
        for s in (-100..=100).map(|k| f64::from(k) / 10.0) {
            let p = c.probability(s);
            assert!((0.0..=1.0).contains(&p) && p >= prev, "{s} {p} {prev}");
            prev = p;
        }
        // a score that ranks backwards is flattened, not inverted
        let rev: Vec<f64> = scores.iter().map(|s| -s).collect();
        let c = Calibrator::fit_platt(&rev, &labels);
        assert!(
            matches!(c, Calibrator::Platt { a, .. } if a == 0.0),
            "{c:?}"
        );
    }

    #[test]
    fn isotonic_pools_violators() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let l = [false, true, false, false, true, true];
        let c = Calibrator::fit_isotonic(&s, &l);
        let Calibrator::Isotonic { x, p } = &c else {
            panic!("{c:?}")
        };
        // blocks: {1} 0, {2,3,4} 1/3, {5} 1, {6} 1
        assert_eq!(x, &vec![1.0, 3.0, 5.0, 6.0]);
        assert_eq!(p, &vec![0.0, 1.0 / 3.0, 1.0, 1.0]);
        assert_eq!(c.probability(0.0), 0.0);
        assert!((c.probability(4.0) - (1.0 / 3.0 + 0.5 * 2.0 / 3.0)).abs() < 1e-12);
        assert_eq!(c.probability(100.0), 1.0);
    }

    #[test]
    fn served_svm_matches_linfa_decision() {
        use linfa::prelude::Fit as _;
        // two noisy clusters
        let mut rng = SplitMix(3);
        let n = 120;
        let d = 3;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let pos = i % 4 == 0;
            for _ in 0..d {
                let u = (rng.next() % 1000) as f32 / 1000.0;
                x.push(if pos { 1.0 + u } else { u });
            }
            y.push(pos);
        }
        let rows: Vec<usize> = (0..n).collect();
        let svm = fit_svm(
            &x,
            d,
            &rows,
            &y,
            vec![0, 1, 2],
            &SvmSettings {
                max_rows: 1000,
                ..SvmSettings::default()
            },
        )
        .unwrap();
        // refit with linfa directly on the same preprocessed input and compare decisions
        let m = Matrix::new(&x, n, d).unwrap();
        let z = svm.pre.transform(&m).unwrap();
        let records = ndarray::Array2::from_shape_vec(
            (n, svm.dim),
            z.iter().map(|&v| f64::from(v)).collect(),
        )
        .unwrap();
        let (np, nn) = (30.0, 90.0);
        let model: linfa_svm::Svm<f64, bool> = linfa_svm::Svm::<f64, bool>::params()
            .pos_neg_weights(120.0 / (2.0 * np), 120.0 / (2.0 * nn))
            .gaussian_kernel(svm.eps)
            .fit(&linfa::Dataset::new(
                records.clone(),
                ndarray::Array1::from_vec(y.clone()),
            ))
            .unwrap();
        let mut scratch = SvmScratch::default();
        let mut correct = 0;
        for i in 0..n {
            let ours = svm.decision(&x[i * d..(i + 1) * d], &mut scratch);
            let theirs = model.weighted_sum(&records.row(i)) - model.rho;
            assert!((ours - theirs).abs() < 1e-4, "row {i}: {ours} vs {theirs}");
            correct += usize::from((ours > 0.0) == y[i]);
        }
        assert!(correct >= 110, "{correct}/{n}");
    }
}
