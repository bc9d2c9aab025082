//! Linear models: ridge regression (L2) and robust linear regression with absolute-error
//! (L1) or pinball (quantile) loss, on [`preprocess`](crate::preprocess)ed features.
//!
//! The fit works on the standardised problem: features through the stored
//! [`Preprocessor`], targets centred on their median and divided by their robust scale, and
//! an unpenalised intercept. With `S = Σ w_i` it minimises
//!
//! - L2: `(1/2S) Σ w_i (y_i − ẑ_i·β)² + (λ/2)‖β‖²`
//! - L1: `(1/S) Σ w_i |y_i − ẑ_i·β| + (λ/2)‖β‖²`
//! - quantile α: `(1/S) Σ w_i ρ_α(y_i − ẑ_i·β) + (λ/2)‖β‖²`, `ρ_α(r) = r·(α − [r < 0])`
//!
//! where `λ` is [`LinearParams::l2`] (unit-free, thanks to the standardisation).
//!
//! **Solvers.** Everything goes through the `(d+1)×(d+1)` Gram matrix `ẐᵀWẐ`, built in f64
//! blocks with `ndarray`'s pure-Rust GEMM (matrixmultiply; no BLAS or system library),
//! and a Cholesky factorisation from `linfa-linalg`, the linfa project's pure-Rust linear
//! algebra.
//!
//! - L2 is one exact ridge solve. (linfa-linear 0.8 offers OLS via Householder QR and GLMs
//!   via L-BFGS but no ridge penalty and no sample weights, and its QR is much slower than
//!   one Gram matrix and a Cholesky factorisation on our designs.)
//! - L1 and quantile loss have no solver in linfa. They use ADMM in the standard splitting
//!   for quantile regression (Boyd et al. 2011, §6; Gu et al. 2018): with `r = y − Ẑβ`,
//!   - β-step: `(ẐᵀẐ + (Sλ/σ)D) β = Ẑᵀ(y − r − u)` — a solve with the one Cholesky factor,
//!   - r-step: the closed-form proximal operator of the (weighted) pinball loss, row by row,
//!   - u-step: `u += Ẑβ + r − y`,
//!
//!   warm-started from the ridge solution with the intercept moved to the α-quantile of
//!   its residuals, over-relaxed (1.6) and with residual balancing of `σ` (refactoring
//!   costs `O(d³)`, far below one pass over the data). Each iteration is one fused,
//!   parallel pass over the rows, so a fit costs one Gram matrix plus
//!   `iterations × O(n·d)`. ADMM converges to the exact minimiser of the convex objective.
//!   It stops on a *certificate*: every 10 iterations the multipliers `ν = −σu`, projected
//!   onto the dual feasible set, give the Lagrange dual bound
//!   `g(ν) = νᵀy − ‖Ẑ_pᵀν‖²/(2Sλ)`, and the fit is accepted once
//!   `(objective − g) / objective ≤ tol` ([`LinearModel::duality_gap`]); with `l2 = 0`
//!   the bound is vacuous and Boyd's primal/dual residual rule is used.
//!   [`LinearModel::converged`] says whether this happened within
//!   [`LinearParams::max_iter`].

use linfa_linalg::cholesky::CholeskyInplace;
use linfa_linalg::triangular::{SolveTriangularInplace, UPLO};
use ndarray::{linalg::general_mat_mul, Array2};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::gbdt::Objective;
use crate::preprocess::{
    dot_f32_f64, target_center_scale, with_scratch, PreprocessParams, Preprocessor,
};
use crate::{Fit, Matrix, ModelError, Predict, TrainSet};

/// Linear-model hyperparameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearParams {
    /// `L2`, `L1` or `Quantile { alpha }` (`LogLoss` is not supported).
    pub objective: Objective,
    /// Ridge penalty `λ` on the standardised problem (the intercept is not penalised).
    pub l2: f64,
    /// Feature preprocessing, fitted on the training rows and stored in the model.
    pub preprocess: PreprocessParams,
    /// Maximum ADMM iterations (L1 / quantile).
    pub max_iter: usize,
    /// L1 / quantile: stop once the relative duality gap (certified suboptimality of the
    /// objective) is below `tol`; with `l2 = 0`, Boyd's relative residual tolerance.
    pub tol: f64,
}

impl Default for LinearParams {
    fn default() -> Self {
        LinearParams {
            objective: Objective::L2,
            l2: 1e-2,
            preprocess: PreprocessParams::default(),
            max_iter: 1000,
            tol: 1e-3,
        }
    }
}

/// A fitted linear model: `intercept + Σ weights_k · preprocess(x)_k`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearModel {
    objective: Objective,
    preprocess: Preprocessor,
    intercept: f64,
    weights: Vec<f64>,
    /// ADMM iterations used (0 for L2).
    iterations: usize,
    converged: bool,
    /// Relative duality gap at the last ADMM check (L1 / quantile with `l2 > 0`).
    duality_gap: Option<f64>,
}

impl LinearModel {
    /// The objective it was trained with.
    pub fn objective(&self) -> Objective {
        self.objective
    }
    /// Intercept (target units).
    pub fn intercept(&self) -> f64 {
        self.intercept
    }
    /// Weights of the preprocessed features (standardised columns, then indicators).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
    /// The stored preprocessing.
    pub fn preprocessor(&self) -> &Preprocessor {
        &self.preprocess
    }
    /// Slope of the prediction in raw units of input feature `j` (inside the clipping
    /// range), for columns kept untransformed; `None` for log-transformed or dropped ones.
    pub fn slope(&self, j: usize) -> Option<f64> {
        self.preprocess
            .linear_map(j)
            .and_then(|(slot, f)| self.weights.get(slot).map(|w| w * f64::from(f)))
    }
    /// ADMM iterations used (0 for L2).
    pub fn iterations(&self) -> usize {
        self.iterations
    }
    /// Whether the solver met its tolerance (always true for L2).
    pub fn converged(&self) -> bool {
        self.converged
    }
    /// L1 / quantile with `l2 > 0`: the certified relative suboptimality of the fit,
    /// `(objective − dual bound) / objective`, at the last ADMM check.
    pub fn duality_gap(&self) -> Option<f64> {
        self.duality_gap
    }

    #[inline]
    fn predict_with(&self, row: &[f32], buf: &mut [f32]) -> f64 {
        self.preprocess.transform_row(row, buf);
        self.intercept + dot_f32_f64(buf, &self.weights)
    }
}

impl Predict for LinearModel {
    fn n_features(&self) -> usize {
        self.preprocess.n_in()
    }
    /// Prediction for one row; features absent from a short row count as missing.
    fn predict_row(&self, row: &[f32]) -> f64 {
        with_scratch(self.preprocess.n_out(), |buf| self.predict_with(row, buf))
    }
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        check_predict_shape(self.n_features(), x, out)?;
        let n_out = self.preprocess.n_out();
        out.par_chunks_mut(512).enumerate().for_each_init(
            || vec![0.0f32; n_out],
            |buf, (c, o)| {
                for (k, v) in o.iter_mut().enumerate() {
                    *v = self.predict_with(x.row(c * 512 + k), buf);
                }
            },
        );
        Ok(())
    }
}

/// Checks the width of `x` and the length of `out` before batch prediction.
pub(crate) fn check_predict_shape(
    n_features: usize,
    x: &Matrix,
    out: &[f64],
) -> Result<(), ModelError> {
    if x.cols() != n_features {
        return Err(ModelError::FeatureCount {
            want: n_features,
            got: x.cols(),
        });
    }
    if out.len() != x.rows() {
        return Err(ModelError::InvalidData(format!(
            "{} outputs for {} rows",
            out.len(),
            x.rows()
        )));
    }
    Ok(())
}

/// The loss a linear model or MLP can train on: `(positive, negative)` residual slopes of
/// the pinball form, or `None` for squared error.
pub(crate) fn pinball_slopes(objective: Objective) -> Result<Option<(f64, f64)>, ModelError> {
    match objective {
        Objective::L2 => Ok(None),
        Objective::L1 => Ok(Some((1.0, 1.0))),
        Objective::Quantile { alpha } if alpha > 0.0 && alpha < 1.0 => {
            Ok(Some((alpha, 1.0 - alpha)))
        }
        Objective::Quantile { alpha } => Err(ModelError::InvalidData(format!(
            "quantile alpha must be in (0, 1), got {alpha}"
        ))),
        Objective::LogLoss => Err(ModelError::InvalidData(
            "log-loss is only supported by the GBDT".into(),
        )),
    }
}

/// Row-major preprocessed design `n × m` (the intercept column `m` is implicit).
struct Design<'a> {
    z: &'a [f32],
    n: usize,
    m: usize,
}

const CHUNK: usize = 2048;

impl Design<'_> {
    fn row(&self, i: usize) -> &[f32] {
        &self.z[i * self.m..(i + 1) * self.m]
    }

    /// `Σ w_i ẑ_i ẑ_iᵀ` with `ẑ = [z, 1]`, as an `(m+1)²` matrix. Fixed row partitions summed
    /// in order, so the result does not depend on thread scheduling.
    fn gram(&self, w: Option<&[f64]>) -> Array2<f64> {
        let m1 = self.m + 1;
        const BLOCK: usize = 256;
        let parts = self.n.div_ceil(8 * BLOCK).clamp(1, 8);
        let per = self.n.div_ceil(parts);
        let grams: Vec<Array2<f64>> = (0..parts)
            .into_par_iter()
            .map(|p| {
                let mut g = Array2::<f64>::zeros((m1, m1));
                let (lo, hi) = (p * per, ((p + 1) * per).min(self.n));
                let mut blk = Array2::<f64>::zeros((BLOCK, m1));
                let mut start = lo;
                while start < hi {
                    let end = (start + BLOCK).min(hi);
                    let rows = end - start;
                    for (k, i) in (start..end).enumerate() {
                        let s = w.map_or(1.0, |w| w[i].sqrt());
                        let mut br = blk.row_mut(k);
                        for (b, &v) in br.iter_mut().zip(self.row(i)) {
                            *b = f64::from(v) * s;
                        }
                        br[self.m] = s;
                    }
                    let b = blk.slice(ndarray::s![..rows, ..]);
                    general_mat_mul(1.0, &b.t(), &b, 1.0, &mut g);
                    start = end;
                }
                g
            })
            .collect();
        let mut total = Array2::<f64>::zeros((m1, m1));
        for g in &grams {
            total += g;
        }
        total
    }

    /// `Σ w_i v_i ẑ_i`.
    fn xt_weighted(&self, v: &[f64], w: Option<&[f64]>) -> Vec<f64> {
        let m = self.m;
        let parts: Vec<Vec<f64>> = (0..self.n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let mut acc = vec![0.0; m + 1];
                for i in c * CHUNK..((c + 1) * CHUNK).min(self.n) {
                    let s = v[i] * w.map_or(1.0, |w| w[i]);
                    for (a, &z) in acc.iter_mut().zip(self.row(i)) {
                        *a += f64::from(z) * s;
                    }
                    acc[m] += s;
                }
                acc
            })
            .collect();
        sum_in_order(parts, m + 1)
    }

    fn predict(&self, beta: &[f64], i: usize) -> f64 {
        dot_f32_f64(self.row(i), &beta[..self.m]) + beta[self.m]
    }
}

fn sum_in_order(parts: Vec<Vec<f64>>, len: usize) -> Vec<f64> {
    let mut total = vec![0.0; len];
    for p in parts {
        for (t, v) in total.iter_mut().zip(p) {
            *t += v;
        }
    }
    total
}

/// Cholesky factor of `g + diag(add)`, retrying with growing jitter if `g` is singular.
fn factor(g: &Array2<f64>, add: &[f64]) -> Result<Array2<f64>, ModelError> {
    let m1 = g.nrows();
    let mean_diag = (0..m1).map(|i| g[[i, i]]).sum::<f64>() / m1.max(1) as f64;
    let mut jitter = 1e-10 * mean_diag.max(1e-12);
    for _ in 0..6 {
        let mut a = g.clone();
        for (i, v) in add.iter().enumerate() {
            a[[i, i]] += v + jitter;
        }
        if a.cholesky_inplace().is_ok() {
            return Ok(a);
        }
        jitter *= 100.0;
    }
    Err(ModelError::Numerical(
        "normal equations are not positive definite".into(),
    ))
}

/// Solves `L Lᵀ x = b` for a Cholesky factor `L`.
fn solve(l: &Array2<f64>, b: &[f64]) -> Result<Vec<f64>, ModelError> {
    let mut x = Array2::from_shape_vec((b.len(), 1), b.to_vec())
        .map_err(|e| ModelError::Numerical(e.to_string()))?;
    let num = |e: linfa_linalg::LinalgError| ModelError::Numerical(e.to_string());
    l.solve_triangular_inplace(&mut x, UPLO::Lower)
        .map_err(num)?;
    l.t()
        .solve_triangular_inplace(&mut x, UPLO::Upper)
        .map_err(num)?;
    Ok(x.into_iter().collect())
}

/// Proximal operator of `t·ℓ` at `v` for the pinball-form loss with slopes `(a, b)`.
#[inline]
fn prox(v: f64, t: f64, (a, b): (f64, f64)) -> f64 {
    if v > t * a {
        v - t * a
    } else if v < -t * b {
        v + t * b
    } else {
        0.0
    }
}

fn weighted_quantile(values: &mut [(f64, f64)], q: f64) -> f64 {
    values.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = values.iter().map(|v| v.1).sum();
    let mut acc = 0.0;
    for &(v, w) in values.iter() {
        acc += w;
        if acc >= q * total {
            return v;
        }
    }
    values.last().map_or(0.0, |v| v.0)
}

struct Solution {
    beta: Vec<f64>,
    iterations: usize,
    converged: bool,
    gap: Option<f64>,
}

/// Sums over the rows of one ADMM pass.
struct Partial {
    /// `Ẑᵀr` and `Ẑᵀu` (intercept last).
    zr: Vec<f64>,
    zu: Vec<f64>,
    /// `‖Ẑβ + r − y‖²`, `‖Ẑβ‖²`, `‖r‖²`.
    prim2: f64,
    zb2: f64,
    r2: f64,
    /// The weighted loss of the residuals `y − Ẑβ`.
    loss: f64,
}

impl Partial {
    fn zeros(m1: usize) -> Partial {
        Partial {
            zr: vec![0.0; m1],
            zu: vec![0.0; m1],
            prim2: 0.0,
            zb2: 0.0,
            r2: 0.0,
            loss: 0.0,
        }
    }
}

impl LinearParams {
    fn check(&self) -> Result<Option<(f64, f64)>, ModelError> {
        if !(self.l2.is_finite() && self.l2 >= 0.0) {
            return Err(ModelError::InvalidData(format!(
                "l2 must be finite and >= 0, got {}",
                self.l2
            )));
        }
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return Err(ModelError::InvalidData(format!(
                "tol must be > 0, got {}",
                self.tol
            )));
        }
        pinball_slopes(self.objective)
    }

    /// ADMM for `(1/S) Σ w_i ℓ(r_i) + (λ/2)‖β‖²` (see the module docs), from the ridge warm
    /// start until the duality gap (or, without a ridge term, Boyd's residual rule) certifies
    /// the fit or [`LinearParams::max_iter`] runs out.
    fn admm(
        &self,
        d: &Design,
        y: &[f64],
        w: Option<&[f64]>,
        slopes: (f64, f64),
    ) -> Result<Solution, ModelError> {
        let (n, m) = (d.n, d.m);
        let m1 = m + 1;
        let s_total = w.map_or(n as f64, |w| w.iter().sum());
        let g = d.gram(None);
        let zty = d.xt_weighted(y, None);
        let mut beta = self.warm_start(d, y, w, slopes, &g, &zty)?;
        let mut r: Vec<f64> = (0..n).map(|i| y[i] - d.predict(&beta, i)).collect();
        let mut u = vec![0.0; n];
        let mut zr = d.xt_weighted(&r, None);
        let mut zu = vec![0.0; m1];
        let y_norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
        let (eps_rel, eps_abs) = (self.tol, self.tol * 1e-2);
        let mut sigma = 1.0;
        let penalty = |sigma: f64| -> Vec<f64> {
            (0..m1)
                .map(|k| {
                    if k < m {
                        s_total * self.l2 / sigma
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        let mut l = factor(&g, &penalty(sigma))?;
        let mut gap = None;
        for it in 0..self.max_iter {
            let rhs: Vec<f64> = (0..m1).map(|k| zty[k] - zr[k] - zu[k]).collect();
            beta = solve(&l, &rhs)?;
            let pass = admm_pass(d, y, w, &beta, &mut r, &mut u, sigma, slopes);
            let dual = sigma
                * pass
                    .zr
                    .iter()
                    .zip(&zr)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f64>()
                    .sqrt();
            let prim = pass.prim2.sqrt();
            zr = pass.zr;
            zu = pass.zu;
            let eps_pri = (n as f64).sqrt() * eps_abs
                + eps_rel * pass.zb2.sqrt().max(pass.r2.sqrt()).max(y_norm);
            if !(prim.is_finite() && dual.is_finite()) {
                return Err(ModelError::Numerical("ADMM diverged".into()));
            }
            let eps_dual = (m1 as f64).sqrt() * eps_abs
                + eps_rel * sigma * zu.iter().map(|v| v * v).sum::<f64>().sqrt();
            let boyd = prim <= eps_pri && dual <= eps_dual;
            if it % 10 == 9 || boyd || it + 1 == self.max_iter {
                let primal = pass.loss
                    + 0.5 * s_total * self.l2 * beta[..m].iter().map(|b| b * b).sum::<f64>();
                let lower = self.dual_objective(d, y, w, &u, sigma, slopes, s_total);
                gap = lower
                    .is_finite()
                    .then(|| ((primal - lower) / primal.abs().max(1e-12)).max(0.0));
                // without a ridge term the dual bound is vacuous: fall back to Boyd's rule
                if gap.is_some_and(|g| g <= self.tol) || (boyd && gap.is_none()) {
                    return Ok(Solution {
                        beta,
                        iterations: it + 1,
                        converged: true,
                        gap,
                    });
                }
            }
            // residual balancing: u is the dual scaled by 1/σ, so it rescales with σ
            let scale = if prim > 10.0 * dual {
                2.0
            } else if dual > 10.0 * prim {
                0.5
            } else {
                1.0
            };
            if scale != 1.0 {
                sigma *= scale;
                u.par_iter_mut().for_each(|v| *v /= scale);
                zu.iter_mut().for_each(|v| *v /= scale);
                l = factor(&g, &penalty(sigma))?;
            }
        }
        Ok(Solution {
            beta,
            iterations: self.max_iter,
            converged: false,
            gap,
        })
    }

    /// ADMM's starting point: ridge on the unweighted Gram matrix `g` (with `zty = Ẑᵀy`), its
    /// intercept moved to the loss's quantile of the residuals.
    fn warm_start(
        &self,
        d: &Design,
        y: &[f64],
        w: Option<&[f64]>,
        slopes: (f64, f64),
        g: &Array2<f64>,
        zty: &[f64],
    ) -> Result<Vec<f64>, ModelError> {
        let (n, m) = (d.n, d.m);
        let ridge_add: Vec<f64> = (0..=m)
            .map(|k| if k < m { self.l2 * n as f64 } else { 0.0 })
            .collect();
        let mut beta = solve(&factor(g, &ridge_add)?, zty)?;
        let q = slopes.0 / (slopes.0 + slopes.1);
        let mut res: Vec<(f64, f64)> = (0..n)
            .map(|i| (y[i] - d.predict(&beta, i), w.map_or(1.0, |w| w[i])))
            .collect();
        beta[m] += weighted_quantile(&mut res, q);
        Ok(beta)
    }
}

/// One ADMM pass over the rows at `beta`, in parallel chunks summed in order: the r- and
/// u-steps (over-relaxed) update `r` and `u` in place; returns `Ẑᵀr`, `Ẑᵀu`, the residual
/// norms and the loss at `beta`.
#[allow(clippy::too_many_arguments)]
fn admm_pass(
    d: &Design,
    y: &[f64],
    w: Option<&[f64]>,
    beta: &[f64],
    r: &mut [f64],
    u: &mut [f64],
    sigma: f64,
    slopes: (f64, f64),
) -> Partial {
    // over-relaxation (Boyd et al. §3.4.3): Ẑβ is replaced by RELAX·Ẑβ + (1 − RELAX)(y − r)
    const RELAX: f64 = 1.6;
    let (m, m1) = (d.m, d.m + 1);
    let parts: Vec<Partial> = r
        .par_chunks_mut(CHUNK)
        .zip(u.par_chunks_mut(CHUNK))
        .enumerate()
        .map(|(c, (rc, uc))| {
            let mut p = Partial::zeros(m1);
            for (k, (ri, ui)) in rc.iter_mut().zip(uc.iter_mut()).enumerate() {
                let i = c * CHUNK + k;
                let zb = d.predict(beta, i);
                let wi = w.map_or(1.0, |w| w[i]);
                let fit = RELAX * zb + (1.0 - RELAX) * (y[i] - *ri);
                let rn = prox(y[i] - fit - *ui, wi / sigma, slopes);
                let un = *ui + fit + rn - y[i];
                *ri = rn;
                *ui = un;
                for ((a, b), &z) in p.zr.iter_mut().zip(p.zu.iter_mut()).zip(d.row(i)) {
                    *a += f64::from(z) * rn;
                    *b += f64::from(z) * un;
                }
                p.zr[m] += rn;
                p.zu[m] += un;
                let pr = zb + rn - y[i];
                p.prim2 += pr * pr;
                p.zb2 += zb * zb;
                p.r2 += rn * rn;
                let res = y[i] - zb;
                p.loss += wi * (slopes.0 * res).max(-slopes.1 * res);
            }
            p
        })
        .collect();
    let mut total = Partial::zeros(m1);
    for p in parts {
        total.prim2 += p.prim2;
        total.zb2 += p.zb2;
        total.r2 += p.r2;
        total.loss += p.loss;
        for k in 0..m1 {
            total.zr[k] += p.zr[k];
            total.zu[k] += p.zu[k];
        }
    }
    total
}

impl LinearParams {
    /// Lagrange dual of the L1 / quantile problem at the ADMM multipliers, a lower bound
    /// on the optimum: with `ν = −σu` projected onto `{ν_i ∈ [−b·w_i, a·w_i], Σν = 0}`,
    /// `g(ν) = νᵀy − ‖Ẑ_pᵀν‖² / (2Sλ)` (`Ẑ_p`: the penalised columns). `−∞` if `λ = 0`.
    #[allow(clippy::too_many_arguments)]
    fn dual_objective(
        &self,
        d: &Design,
        y: &[f64],
        w: Option<&[f64]>,
        u: &[f64],
        sigma: f64,
        (a, b): (f64, f64),
        s_total: f64,
    ) -> f64 {
        if self.l2 <= 0.0 {
            return f64::NEG_INFINITY;
        }
        let wi = |i: usize| w.map_or(1.0, |w| w[i]);
        let nu = |i: usize, tau: f64| (-sigma * u[i] - tau).clamp(-b * wi(i), a * wi(i));
        // Σ_i nu(i, τ) is non-increasing in τ: bisect for Σν = 0
        let spread = u.iter().map(|v| (sigma * v).abs()).fold(0.0, f64::max)
            + (a + b) * w.map_or(1.0, |w| w.iter().copied().fold(0.0, f64::max));
        let (mut lo, mut hi) = (-spread - 1.0, spread + 1.0);
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            let total: f64 = (0..y.len()).map(|i| nu(i, mid)).sum();
            if total > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let tau = 0.5 * (lo + hi);
        let nu_v: Vec<f64> = (0..y.len()).map(|i| nu(i, tau)).collect();
        let zt_nu = d.xt_weighted(&nu_v, None);
        let lin: f64 = nu_v.iter().zip(y).map(|(n, y)| n * y).sum();
        let quad: f64 = zt_nu[..d.m].iter().map(|v| v * v).sum();
        lin - quad / (2.0 * s_total * self.l2)
    }
}

impl Fit for LinearParams {
    type Model = LinearModel;
    fn fit(&self, train: &TrainSet) -> Result<LinearModel, ModelError> {
        let slopes = self.check()?;
        let pre = self.preprocess.fit(&train.x)?;
        let z = pre.transform(&train.x)?;
        let d = Design {
            z: &z,
            n: train.x.rows(),
            m: pre.n_out(),
        };
        let (cy, sy) = target_center_scale(train.y);
        let y: Vec<f64> = train.y.iter().map(|v| (v - cy) / sy).collect();
        let w = train.weights;
        let s_total = w.map_or(d.n as f64, |w| w.iter().sum());
        if s_total <= 0.0 {
            return Err(ModelError::InvalidData("weights sum to zero".into()));
        }
        let Solution {
            beta,
            iterations,
            converged,
            gap,
        } = match slopes {
            None => {
                let g = d.gram(w);
                let add: Vec<f64> = (0..=d.m)
                    .map(|k| if k < d.m { self.l2 * s_total } else { 0.0 })
                    .collect();
                let c = d.xt_weighted(&y, w);
                Solution {
                    beta: solve(&factor(&g, &add)?, &c)?,
                    iterations: 0,
                    converged: true,
                    gap: None,
                }
            }
            Some(slopes) => self.admm(&d, &y, w, slopes)?,
        };
        let weights: Vec<f64> = beta[..d.m].iter().map(|b| b * sy).collect();
        let intercept = cy + sy * beta[d.m];
        if !intercept.is_finite() || weights.iter().any(|v| !v.is_finite()) {
            return Err(ModelError::Numerical(
                "linear fit produced non-finite weights".into(),
            ));
        }
        Ok(LinearModel {
            objective: self.objective,
            preprocess: pre,
            intercept,
            weights,
            iterations,
            converged,
            duality_gap: gap,
        })
    }
}
