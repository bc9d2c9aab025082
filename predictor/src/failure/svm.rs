//! The failure predictor's class-weighted Gaussian-kernel SVM: fitted with `linfa-svm`'s SMO
//! solver on a bounded row sample, then copied out and served in plain Rust ([`KernelSvm`]).

use std::cell::RefCell;
use std::sync::OnceLock;

use augur_features::FailureSchema;
use augur_models::preprocess::{PreprocessParams, Preprocessor};
use augur_models::{Matrix, ModelError};
use augur_numeric::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::PredictorError;

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
    /// The support vectors laid out for the decision (see [`Blocked`]).
    #[serde(skip)]
    blocked: Blocked,
}

/// Support vectors in blocks of [`LANES`]: block `b` holds, coordinate by coordinate, that
/// coordinate of vectors `b·LANES ..` (zeros past the last), so the squared distances of
/// `LANES` vectors are summed side by side in vector registers, each in its own coordinate
/// order: the same f32 sums, bit for bit, as one vector at a time. Built on first use; not
/// serialised and not part of equality (a function of `support`).
#[derive(Debug, Clone, Default)]
struct Blocked(OnceLock<Vec<[f32; LANES]>>);

const LANES: usize = 8;

impl PartialEq for Blocked {
    fn eq(&self, _: &Blocked) -> bool {
        true
    }
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
        let dim = self.dim;
        if dim == 0 || z.len() != dim {
            return self.decision_one_by_one(z);
        }
        let blocks = self.blocked.0.get_or_init(|| {
            let n = self.support.len() / dim;
            let mut b = vec![[0f32; LANES]; n.div_ceil(LANES) * dim];
            for (i, sv) in self.support.chunks_exact(dim).enumerate() {
                for (k, v) in sv.iter().enumerate() {
                    b[(i / LANES) * dim + k][i % LANES] = *v;
                }
            }
            b
        });
        let n = (self.support.len() / dim).min(self.coef.len());
        let mut sum = 0.0;
        for (block, coefs) in blocks.chunks_exact(dim).zip(self.coef[..n].chunks(LANES)) {
            let mut d2 = [-0f32; LANES];
            for (col, &zk) in block.iter().zip(z) {
                for (acc, &v) in d2.iter_mut().zip(col) {
                    *acc += (v - zk) * (v - zk);
                }
            }
            for (c, d) in coefs.iter().zip(d2) {
                sum += c * (-(f64::from(d)) / self.eps).exp();
            }
        }
        sum - self.rho
    }

    /// The decision value summed one support vector at a time (the reference the blocked
    /// layout reproduces; used when the input is not `dim` wide).
    fn decision_one_by_one(&self, z: &[f32]) -> f64 {
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

thread_local! {
    static SCRATCH: RefCell<SvmScratch> = RefCell::new(SvmScratch::default());
}

/// Calls `f` with this thread's SVM scratch (a fresh one if the thread's is in use): online
/// predictions under a shared borrow allocate nothing per prediction.
pub(super) fn with_svm_scratch<T>(f: impl FnOnce(&mut SvmScratch) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut SvmScratch::default()),
    })
}

/// The columns of a failure-feature row the SVM reads: the request features (the runtime
/// schema's static ones) and the failure histories.
pub(super) fn svm_columns(schema: &FailureSchema) -> Vec<u32> {
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
pub(super) fn fit_svm(
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
    let mut rng = SplitMix64(settings.seed);
    let n_pos = pos
        .len()
        .min(budget / 2)
        .max(budget.saturating_sub(neg.len()));
    let n_pos = n_pos.min(pos.len());
    let n_neg = (budget - n_pos).min(neg.len());
    rng.shuffle_mod(&mut pos);
    rng.shuffle_mod(&mut neg);
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
        blocked: Blocked::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_svm_matches_linfa_decision() {
        use linfa::prelude::Fit as _;
        // two noisy clusters
        let mut rng = SplitMix64(3);
        let n = 120;
        let d = 3;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let pos = i % 4 == 0;
            for _ in 0..d {
                let u = (rng.next_u64() % 1000) as f32 / 1000.0;
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
            // the blocked layout sums as one vector at a time does, bit for bit
            let one = svm.decision_one_by_one(&scratch.z);
            assert_eq!(ours.to_bits(), one.to_bits(), "row {i}");
            let theirs = model.weighted_sum(&records.row(i)) - model.rho;
            assert!((ours - theirs).abs() < 1e-4, "row {i}: {ours} vs {theirs}");
            correct += usize::from((ours > 0.0) == y[i]);
        }
        assert!(correct >= 110, "{correct}/{n}");
    }
}
