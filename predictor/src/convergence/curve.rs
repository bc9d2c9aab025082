//! Parametric learning-curve families and their weighted least-squares fit (grid search and
//! Nelder–Mead over the nonlinear parameters, the linear ones in closed form).

use serde::{Deserialize, Serialize};

use super::Direction;
use crate::PredictorError;

/// A parametric learning-curve family. In normalised progress `x = k / X` (X = last observed
/// progress) every family is `y = c + sign·s·φ(x; θ)` with `s ≥ 0` and `φ` decreasing to 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CurveFamily {
    /// Optimus: `y = 1/(a·k + b) + c`, `a, b ≥ 0` (`c ≥ 0` for falling metrics).
    Optimus,
    /// `y = c + s·(k + d)^−α`.
    PowerLaw,
    /// `y = c + s·e^(−λ·k)`.
    Exponential,
    /// Log-power (Domhan et al. 2015): `y = c + s / (1 + (k/τ)^α)`.
    LogPower,
}

impl CurveFamily {
    /// Every family, in a fixed order.
    pub const ALL: [CurveFamily; 4] = [
        CurveFamily::Optimus,
        CurveFamily::PowerLaw,
        CurveFamily::Exponential,
        CurveFamily::LogPower,
    ];

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            CurveFamily::Optimus => "optimus",
            CurveFamily::PowerLaw => "power-law",
            CurveFamily::Exponential => "exponential",
            CurveFamily::LogPower => "log-power",
        }
    }

    /// Parameters in total (linear and nonlinear).
    pub(super) fn n_params(self) -> usize {
        match self {
            CurveFamily::Optimus | CurveFamily::Exponential => 3,
            CurveFamily::PowerLaw | CurveFamily::LogPower => 4,
        }
    }

    /// `φ(x; θ)` for normalised progress `x ≥ 0`.
    fn phi(self, x: f64, theta: &[f64]) -> f64 {
        let x = x.max(0.0);
        let t = |i: usize| theta.get(i).copied().unwrap_or(1.0);
        match self {
            CurveFamily::Optimus => 1.0 / (x + t(0)),
            CurveFamily::PowerLaw => (x + t(1)).powf(-t(0)),
            CurveFamily::Exponential => (-t(0) * x).exp(),
            CurveFamily::LogPower => 1.0 / (1.0 + (x / t(1)).powf(t(0))),
        }
    }

    /// The log-grid of the nonlinear parameters θ (each axis `(lo, hi, points)`).
    fn grid(self) -> &'static [(f64, f64, usize)] {
        match self {
            // d = b/a
            CurveFamily::Optimus => &[(1e-3, 1e3, 31)],
            // α, d
            CurveFamily::PowerLaw => &[(0.05, 4.0, 14), (1e-3, 10.0, 9)],
            // λ
            CurveFamily::Exponential => &[(0.02, 100.0, 31)],
            // α, τ
            CurveFamily::LogPower => &[(0.2, 8.0, 10), (0.01, 100.0, 12)],
        }
    }
}

impl std::fmt::Display for CurveFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A fitted curve of one family, in the caller's progress units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveFit {
    pub family: CurveFamily,
    pub direction: Direction,
    /// Progress that normalises `x` (the last fitted point's progress).
    pub x_scale: f64,
    /// Nonlinear parameters in normalised progress.
    pub theta: Vec<f64>,
    /// Asymptote.
    pub c: f64,
    /// Scale (≥ 0).
    pub s: f64,
    /// Weighted RMS residual on the fitted points.
    pub rmse: f64,
}

/// A fit's parameters in the caller's progress units `k`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FamilyParams {
    /// `y = 1/(a·k + b) + c` (mirrored: `c − 1/(a·k + b)`).
    Optimus { a: f64, b: f64, c: f64 },
    /// `y = c ± s·(k + d)^−α`.
    PowerLaw { c: f64, s: f64, d: f64, alpha: f64 },
    /// `y = c ± s·e^(−λ·k)`.
    Exponential { c: f64, s: f64, lambda: f64 },
    /// `y = c ± s / (1 + (k/τ)^α)`.
    LogPower {
        c: f64,
        s: f64,
        tau: f64,
        alpha: f64,
    },
}

impl CurveFit {
    /// The fitted metric at progress `k`.
    pub fn value_at(&self, k: f64) -> f64 {
        let x = k / self.x_scale;
        self.c + self.direction.sign() * self.s * self.family.phi(x, &self.theta)
    }

    /// The parameters in the caller's units.
    pub fn params(&self) -> FamilyParams {
        let (xs, s, c) = (self.x_scale, self.s, self.c);
        let t = |i: usize| self.theta.get(i).copied().unwrap_or(f64::NAN);
        match self.family {
            CurveFamily::Optimus => FamilyParams::Optimus {
                a: 1.0 / (s * xs),
                b: t(0) / s,
                c,
            },
            CurveFamily::PowerLaw => FamilyParams::PowerLaw {
                c,
                s: s * xs.powf(t(0)),
                d: t(1) * xs,
                alpha: t(0),
            },
            CurveFamily::Exponential => FamilyParams::Exponential {
                c,
                s,
                lambda: t(0) / xs,
            },
            CurveFamily::LogPower => FamilyParams::LogPower {
                c,
                s,
                tau: t(1) * xs,
                alpha: t(0),
            },
        }
    }
}

/// Weights of points at normalised progress `x`: `exp(−RECENCY·(1 − x))`, so the latest
/// point weighs 1 and the first about 0.14.
const RECENCY: f64 = 2.0;

/// Closed-form weighted fit of `y = c + sign·s·φ` with `s ≥ 0` (and `c ≥ 0` when asked).
/// Returns `(c, s, weighted SSE)`.
fn fit_linear(phi: &[f64], y: &[f64], w: &[f64], sign: f64, c_nonneg: bool) -> (f64, f64, f64) {
    let (mut sw, mut su, mut sy, mut suu, mut suy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for ((&p, &yv), &wv) in phi.iter().zip(y).zip(w) {
        let u = sign * p;
        sw += wv;
        su += wv * u;
        sy += wv * yv;
        suu += wv * u * u;
        suy += wv * u * yv;
    }
    let mean = if sw > 0.0 { sy / sw } else { 0.0 };
    let det = sw * suu - su * su;
    let (mut c, mut s) = if det > 1e-12 * sw * suu.max(1e-300) {
        let s = (sw * suy - su * sy) / det;
        (((sy - s * su) / sw), s)
    } else {
        (mean, 0.0)
    };
    if !(s.is_finite() && c.is_finite()) || s < 0.0 {
        s = 0.0;
        c = mean;
    }
    if c_nonneg && c < 0.0 {
        c = 0.0;
        s = if suu > 0.0 { (suy / suu).max(0.0) } else { 0.0 };
    }
    let sse = phi
        .iter()
        .zip(y)
        .zip(w)
        .map(|((&p, &yv), &wv)| {
            let r = yv - c - sign * s * p;
            wv * r * r
        })
        .sum();
    (c, s, sse)
}

fn log_grid(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..n).map(move |i| (a + (b - a) * i as f64 / (n.max(2) - 1) as f64).exp())
}

/// Finite progress and values, and at least as many distinct progress values as the
/// family has parameters.
fn check_fit_input(
    family: CurveFamily,
    progress: &[f64],
    values: &[f64],
) -> Result<(), PredictorError> {
    for (i, (&k, &v)) in progress.iter().zip(values).enumerate() {
        if !k.is_finite() {
            return Err(PredictorError::NonFinitePoint {
                index: i,
                field: "progress",
                value: k,
            });
        }
        if !v.is_finite() {
            return Err(PredictorError::NonFinitePoint {
                index: i,
                field: "value",
                value: v,
            });
        }
    }
    let mut distinct = 0usize;
    let mut last = f64::NAN;
    for &k in progress {
        if k != last {
            distinct += 1;
            last = k;
        }
    }
    if distinct < family.n_params() {
        return Err(PredictorError::TooFewCurvePoints {
            family: family.name(),
            need: family.n_params(),
            got: distinct,
        });
    }
    Ok(())
}

/// Fits one family to `(progress, value)` points (progress non-decreasing), weighted towards
/// recent points. Errors when there are fewer distinct-progress points than parameters.
pub fn fit_family(
    family: CurveFamily,
    progress: &[f64],
    values: &[f64],
    direction: Direction,
) -> Result<CurveFit, PredictorError> {
    let n = progress.len().min(values.len());
    check_fit_input(family, &progress[..n], &values[..n])?;
    let x_scale = progress[..n]
        .iter()
        .fold(0.0f64, |m, &k| m.max(k))
        .max(1e-9);
    let xs: Vec<f64> = progress[..n]
        .iter()
        .map(|&k| (k / x_scale).max(0.0))
        .collect();
    let w: Vec<f64> = xs.iter().map(|&x| (-RECENCY * (1.0 - x)).exp()).collect();
    let y = &values[..n];
    let sign = direction.sign();
    let c_nonneg = family == CurveFamily::Optimus && direction == Direction::Falling;
    let mut phi = vec![0.0; n];
    let mut sse_at = |theta: &[f64]| -> f64 {
        for (p, &x) in phi.iter_mut().zip(&xs) {
            *p = family.phi(x, theta);
        }
        if phi.iter().any(|p| !p.is_finite()) {
            return f64::INFINITY;
        }
        fit_linear(&phi, y, &w, sign, c_nonneg).2
    };
    // grid search over θ (log axes)
    let axes = family.grid();
    let mut best = (f64::INFINITY, vec![1.0; axes.len()]);
    let grids: Vec<Vec<f64>> = axes
        .iter()
        .map(|&(lo, hi, m)| log_grid(lo, hi, m).collect())
        .collect();
    let mut idx = vec![0usize; axes.len()];
    'grid: loop {
        let theta: Vec<f64> = idx.iter().zip(&grids).map(|(&i, g)| g[i]).collect();
        let sse = sse_at(&theta);
        if sse < best.0 {
            best = (sse, theta);
        }
        for a in 0..idx.len() {
            idx[a] += 1;
            if idx[a] < grids[a].len() {
                continue 'grid;
            }
            idx[a] = 0;
        }
        break;
    }
    // Nelder–Mead in log θ from the best grid point (the grid steps as the first simplex)
    let steps: Vec<f64> = axes
        .iter()
        .map(|&(lo, hi, m)| (hi.ln() - lo.ln()) / (m.max(2) - 1) as f64)
        .collect();
    let start: Vec<f64> = best.1.iter().map(|t| t.ln()).collect();
    let mut f = |z: &[f64]| -> f64 {
        let th: Vec<f64> = z.iter().map(|v| v.exp()).collect();
        sse_at(&th)
    };
    let z = nelder_mead(&mut f, &start, &steps, 200);
    let theta: Vec<f64> = z.iter().map(|v| v.exp()).collect();
    for (p, &x) in phi.iter_mut().zip(&xs) {
        *p = family.phi(x, &theta);
    }
    let (c, s, sse) = fit_linear(&phi, y, &w, sign, c_nonneg);
    let wsum: f64 = w.iter().sum();
    Ok(CurveFit {
        family,
        direction,
        x_scale,
        theta,
        c,
        s,
        rmse: (sse / wsum.max(1e-300)).sqrt(),
    })
}

/// Minimises `f` from `start` with a Nelder–Mead simplex (initial edge lengths `steps`).
fn nelder_mead(
    f: &mut dyn FnMut(&[f64]) -> f64,
    start: &[f64],
    steps: &[f64],
    iters: usize,
) -> Vec<f64> {
    let d = start.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = Vec::with_capacity(d + 1);
    let f0 = f(start);
    simplex.push((start.to_vec(), f0));
    for i in 0..d {
        let mut p = start.to_vec();
        p[i] += steps[i];
        let v = f(&p);
        simplex.push((p, v));
    }
    let point = |c: &[f64], p: &[f64], t: f64| -> Vec<f64> {
        c.iter().zip(p).map(|(c, p)| c + t * (p - c)).collect()
    };
    for _ in 0..iters {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let spread = simplex[d].1 - simplex[0].1;
        if spread.abs() <= 1e-14 * simplex[0].1.abs().max(1e-300) {
            break;
        }
        let centroid: Vec<f64> = (0..d)
            .map(|j| simplex[..d].iter().map(|(p, _)| p[j]).sum::<f64>() / d as f64)
            .collect();
        let worst = simplex[d].0.clone();
        let refl = point(&centroid, &worst, -1.0);
        let fr = f(&refl);
        if fr < simplex[0].1 {
            let exp = point(&centroid, &worst, -2.0);
            let fe = f(&exp);
            simplex[d] = if fe < fr { (exp, fe) } else { (refl, fr) };
        } else if fr < simplex[d - 1].1 {
            simplex[d] = (refl, fr);
        } else {
            let contr = point(&centroid, &worst, 0.5);
            let fc = f(&contr);
            if fc < simplex[d].1 {
                simplex[d] = (contr, fc);
            } else {
                let best = simplex[0].0.clone();
                for item in simplex.iter_mut().skip(1) {
                    let p = point(&best, &item.0, 0.5);
                    let v = f(&p);
                    *item = (p, v);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0).0
}
