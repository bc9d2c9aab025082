//! Loss-curve convergence: when will a running training job reach its target (or stop
//! improving), and at what metric?
//!
//! Input: the metric points a job reported so far ([`MetricPoint`]: wall time since its start,
//! optional epoch/step, value). Output ([`ConvergencePrediction`]): the remaining and total
//! wall time to convergence, the epoch and the final metric, each with an 80% interval.
//!
//! Three layers, each usable on its own:
//!
//! 1. **Parametric curve fits** ([`fit_family`], [`CurveEnsemble`]): Optimus'
//!    `y = 1/(a·k + b) + c` (the baseline), a power law `c + s·(k + d)^−α`, an exponential
//!    `c + s·e^−λk` and a log-power (Domhan et al.) `c + s / (1 + (k/τ)^α)`, each mirrored
//!    (`c − …`) for metrics that rise. Fits are weighted towards recent points; nonlinear
//!    parameters by a log-grid plus golden-section refinement, the linear ones (`c`, `s ≥ 0`)
//!    in closed form (variable projection). The ensemble weights each family by its error on
//!    the last fifth of the points when fitted to the rest. A fit "converges" where it
//!    crosses the target or, without a target, where it moves less than a threshold over a
//!    window ([`CurveEnsemble::plateau`]).
//! 2. **An empirical-Bayes prior over time-to-train** ([`TimePrior`]): per benchmark,
//!    `ln T = a + β·ln(accelerators)`, with the residual means of (benchmark, system size)
//!    and (benchmark, system size, accelerator model) groups shrunk towards it by their size
//!    (method-of-moments between-group variance). The elapsed time truncates it: the job has
//!    not converged yet, so `T > elapsed` ([`TimePrior::truncated_median`]).
//! 3. **A small model conditioned on the prefix** ([`ConvergencePredictor`]): gradient-boosted
//!    trees (median and 10%/90% quantiles, conformalised on the last 15% of training runs)
//!    predict `ln(remaining / elapsed)` from the prior, the truncated prior, the curve fits'
//!    extrapolations, the progress towards the learned target, the epochs-to-target prior
//!    times the observed seconds per epoch, system size, batch and accelerator. It is trained
//!    on prefixes of every training curve with cross-fitted priors (a run never informs its
//!    own prior), so the curve evidence updates the prior the way it does at prediction time.
//!
//! [`evaluate_convergence`] is the protocol of issue #5 on MLPerf v1.0: successful runs split
//! by run start (first 80% train, last 20% test, whole runs), the first 25/50/75% of a test
//! run's points given, remaining wall time to target predicted; median relative error (a
//! run without a finite answer counts 1.0) and 80% interval coverage, overall and per
//! benchmark, beside the Optimus fit over wall time and the median time-to-train prior.

use std::collections::{BTreeMap, HashMap};

use augur_datasets::curves::{Curve, MlperfRun, RunStatus};
use augur_datasets::TimeSplit;
use augur_models::gbdt::{GbdtModel, GbdtParams, Objective, Validation};
use augur_models::{Fit, Matrix, ModelError, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use crate::metrics::quantile;

// =============================================================================================
// Errors and inputs.

/// Errors of curve fitting, convergence prediction and its evaluation.
#[derive(Debug, thiserror::Error)]
pub enum ConvergenceError {
    /// No points at all.
    #[error("no metric points: a convergence estimate needs at least one")]
    Empty,
    /// A point's field is NaN or infinite.
    #[error("metric point {index}: {field} is not finite ({value})")]
    NonFinite {
        index: usize,
        field: &'static str,
        value: f64,
    },
    /// Wall time goes backwards.
    #[error(
        "metric point {index}: wall time {now} s is before the previous point's {prev} s (points must be in time order)"
    )]
    NonMonotoneTime { index: usize, prev: f64, now: f64 },
    /// Too few points (with distinct progress) for a curve family.
    #[error("a {family} fit needs at least {need} points with distinct progress, got {got}")]
    TooFewPoints {
        family: CurveFamily,
        need: usize,
        got: usize,
    },
    /// A target that is NaN or infinite.
    #[error("target metric is not finite ({0})")]
    BadTarget(f64),
    /// Nothing to predict from: an unknown benchmark and too few points for a curve fit.
    #[error("cannot estimate convergence: {0}")]
    NoEvidence(String),
    /// Not enough training curves.
    #[error("not enough training curves: {0}")]
    NotEnoughData(String),
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// One reported evaluation of a running job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricPoint {
    /// Seconds since the job started (may be slightly negative for an evaluation logged
    /// before the start marker).
    pub wall_time_s: f64,
    /// Epoch (or step) at the evaluation, when the job reports one.
    pub epoch: Option<f64>,
    /// Samples seen at the evaluation, when reported.
    pub samples: Option<f64>,
    /// The metric's value.
    pub value: f64,
}

/// Whether the metric improves by falling (loss, WER) or by rising (accuracy, AUC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Falling,
    Rising,
}

impl Direction {
    /// `+1` for falling, `−1` for rising: `y = c + sign·s·φ(x)` with `s ≥ 0`, `φ` decreasing.
    fn sign(self) -> f64 {
        match self {
            Direction::Falling => 1.0,
            Direction::Rising => -1.0,
        }
    }

    /// Guesses the direction from a curve: rising when the later half is higher on average.
    pub fn infer(values: &[f64]) -> Direction {
        let n = values.len();
        if n < 2 {
            return Direction::Falling;
        }
        let half = n / 2;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        if mean(&values[half..]) > mean(&values[..half.max(1)]) {
            Direction::Rising
        } else {
            Direction::Falling
        }
    }
}

/// What is known about a job besides its curve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobContext {
    /// Benchmark / model name (`resnet`, `bert`, ...).
    pub benchmark: String,
    /// Accelerators in total.
    pub accelerators: Option<u64>,
    /// Global batch size.
    pub global_batch_size: Option<u64>,
    /// Accelerator model (`NVIDIA A100-SXM4-80GB (400W)`, `TPU`, ...).
    pub accelerator_model: Option<String>,
}

/// A finished training run: context, its whole curve and its time-to-train.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceRun {
    pub run_id: String,
    pub context: JobContext,
    /// When it started (ms since the Unix epoch): the split key.
    pub start_ms: i64,
    /// Wall seconds from start to reaching the target (MLPerf time-to-train).
    pub time_to_train_s: f64,
    /// Its metric points, in time order.
    pub points: Vec<MetricPoint>,
}

/// The successful MLPerf runs with a time-to-train, as [`ConvergenceRun`]s (run order). A run
/// without scalar eval points (maskrcnn logs a {BBOX,SEGM} object) is kept with no points:
/// it still informs the time-to-train prior.
pub fn mlperf_convergence_runs(runs: &[MlperfRun], curves: &[Curve]) -> Vec<ConvergenceRun> {
    let by_run: HashMap<&str, &Curve> = curves
        .iter()
        .filter(|c| c.metric == "eval_accuracy")
        .map(|c| (c.run_id.as_str(), c))
        .collect();
    runs.iter()
        .filter(|r| r.status == Some(RunStatus::Success))
        .filter_map(|r| {
            let duration = r.duration_s.filter(|d| d.is_finite() && *d > 0.0)?;
            let points: Vec<MetricPoint> = by_run
                .get(r.run_id.as_str())
                .map(|c| c.points.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|p| p.value.is_finite() && p.wall_time_s.is_finite())
                .map(|p| MetricPoint {
                    wall_time_s: p.wall_time_s,
                    epoch: p.epoch.filter(|e| e.is_finite()),
                    samples: p.samples.filter(|s| s.is_finite()),
                    value: p.value,
                })
                .collect();
            Some(ConvergenceRun {
                run_id: r.run_id.clone(),
                context: JobContext {
                    benchmark: r.benchmark.clone(),
                    accelerators: r.num_accelerators(),
                    global_batch_size: r.global_batch_size,
                    accelerator_model: r.accelerator_model.clone(),
                },
                start_ms: r.run_start_ms,
                time_to_train_s: duration,
                points,
            })
        })
        .collect()
}

/// Reads the bundled MLPerf v1.0 `runs.csv.gz` and `eval_curves.csv.gz` (under
/// `datasets/data/mlperf-v1.0`) into [`ConvergenceRun`]s.
pub fn load_bundled_mlperf() -> Result<Vec<ConvergenceRun>, augur_datasets::DatasetError> {
    let opts = augur_datasets::ReadOptions::default();
    let runs_path = augur_datasets::bundled::bundled_file("mlperf-v1.0/runs.csv.gz")?;
    let curves_path = augur_datasets::bundled::bundled_file("mlperf-v1.0/eval_curves.csv.gz")?;
    let (runs, _) = augur_datasets::curves::read_mlperf_runs(&runs_path, &opts)?;
    let (curves, _) = augur_datasets::curves::read_mlperf_curves(&curves_path, &opts)?;
    Ok(mlperf_convergence_runs(&runs, &curves))
}

/// Checks points: at least one, all finite, wall time non-decreasing.
pub fn validate_points(points: &[MetricPoint]) -> Result<(), ConvergenceError> {
    if points.is_empty() {
        return Err(ConvergenceError::Empty);
    }
    let mut prev = f64::NEG_INFINITY;
    for (index, p) in points.iter().enumerate() {
        for (field, value) in [("wall_time_s", p.wall_time_s), ("value", p.value)] {
            if !value.is_finite() {
                return Err(ConvergenceError::NonFinite {
                    index,
                    field,
                    value,
                });
            }
        }
        for (field, value) in [("epoch", p.epoch), ("samples", p.samples)] {
            if let Some(value) = value.filter(|v| !v.is_finite()) {
                return Err(ConvergenceError::NonFinite {
                    index,
                    field,
                    value,
                });
            }
        }
        if p.wall_time_s < prev {
            return Err(ConvergenceError::NonMonotoneTime {
                index,
                prev,
                now: p.wall_time_s,
            });
        }
        prev = p.wall_time_s;
    }
    Ok(())
}

// =============================================================================================
// Parametric curve families.

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
    fn n_params(self) -> usize {
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

/// Fits one family to `(progress, value)` points (progress non-decreasing), weighted towards
/// recent points. Errors when there are fewer distinct-progress points than parameters.
pub fn fit_family(
    family: CurveFamily,
    progress: &[f64],
    values: &[f64],
    direction: Direction,
) -> Result<CurveFit, ConvergenceError> {
    let n = progress.len().min(values.len());
    for (i, (&k, &v)) in progress.iter().zip(values).enumerate() {
        if !k.is_finite() {
            return Err(ConvergenceError::NonFinite {
                index: i,
                field: "progress",
                value: k,
            });
        }
        if !v.is_finite() {
            return Err(ConvergenceError::NonFinite {
                index: i,
                field: "value",
                value: v,
            });
        }
    }
    let mut distinct = 0usize;
    let mut last = f64::NAN;
    for &k in &progress[..n] {
        if k != last {
            distinct += 1;
            last = k;
        }
    }
    if distinct < family.n_params() {
        return Err(ConvergenceError::TooFewPoints {
            family,
            need: family.n_params(),
            got: distinct,
        });
    }
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

/// Where a fitted curve reaches a target, from the last observed progress on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "at", rename_all = "snake_case")]
pub enum Crossing {
    /// The curve is already past the target at the last observed progress.
    Already,
    /// It reaches the target at this progress.
    At(f64),
    /// Its asymptote stops short of the target (or it gets there only beyond 10⁶× the
    /// observed progress).
    Never,
}

/// First `k ≥ from` where the oriented gap `h(k) = sign·(y(k) − target)` (decreasing in k)
/// drops to ≤ 0.
fn crossing_of(value: impl Fn(f64) -> f64, sign: f64, target: f64, from: f64) -> Crossing {
    let h = |k: f64| sign * (value(k) - target);
    let from = from.max(1e-9);
    if h(from) <= 0.0 {
        return Crossing::Already;
    }
    let mut hi = from * 2.0;
    while h(hi) > 0.0 {
        hi *= 2.0;
        if hi > from * 1e6 {
            return Crossing::Never;
        }
    }
    let (mut l, mut r) = (hi / 2.0, hi);
    for _ in 0..60 {
        let m = (l * r).sqrt();
        if h(m) > 0.0 {
            l = m;
        } else {
            r = m;
        }
    }
    Crossing::At(r)
}

/// First `k ≥ from` where the curve moves less than `threshold` over the next `window·k`.
fn plateau_of(value: impl Fn(f64) -> f64, threshold: f64, window: f64, from: f64) -> f64 {
    let moved = |k: f64| (value(k * (1.0 + window)) - value(k)).abs();
    let from = from.max(1e-9);
    if moved(from) <= threshold {
        return from;
    }
    let mut hi = from * 2.0;
    while moved(hi) > threshold {
        hi *= 2.0;
        if hi > from * 1e6 {
            return hi;
        }
    }
    let (mut l, mut r) = (hi / 2.0, hi);
    for _ in 0..60 {
        let m = (l * r).sqrt();
        if moved(m) > threshold {
            l = m;
        } else {
            r = m;
        }
    }
    r
}

impl CurveFit {
    /// Where this fit reaches `target` from progress `from` on.
    pub fn crossing(&self, target: f64, from: f64) -> Crossing {
        crossing_of(|k| self.value_at(k), self.direction.sign(), target, from)
    }
}

/// Optimus' convergence rule: the fitted curve moves less than this share of the observed
/// metric range over a window of [`PLATEAU_WINDOW`] × the progress so far.
pub const PLATEAU_THRESHOLD: f64 = 0.01;
/// The plateau window, as a share of the progress so far.
pub const PLATEAU_WINDOW: f64 = 0.1;

/// A weighted ensemble of curve fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveEnsemble {
    pub direction: Direction,
    /// Members and their weights (summing to 1).
    pub members: Vec<(CurveFit, f64)>,
    /// Observed metric range (for the plateau threshold).
    pub value_range: f64,
    /// Last observed progress.
    pub last_progress: f64,
}

/// At most this many points enter a fit: the latest 40 and an even thinning of the rest.
const MAX_FIT_POINTS: usize = 64;

fn thin(progress: &[f64], values: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = progress.len().min(values.len());
    if n <= MAX_FIT_POINTS {
        return (progress[..n].to_vec(), values[..n].to_vec());
    }
    let keep_tail = 40;
    let head = n - keep_tail;
    let step = head as f64 / (MAX_FIT_POINTS - keep_tail) as f64;
    let mut idx: Vec<usize> = (0..MAX_FIT_POINTS - keep_tail)
        .map(|i| ((i as f64 * step) as usize).min(head - 1))
        .collect();
    idx.dedup();
    idx.extend(head..n);
    (
        idx.iter().map(|&i| progress[i]).collect(),
        idx.iter().map(|&i| values[i]).collect(),
    )
}

impl CurveEnsemble {
    /// Fits every family that has enough points and weights each by the inverse of its
    /// squared error on the last fifth of the points when fitted to the rest (in-sample
    /// error when the hold-out fit is impossible). Errors when no family can be fitted.
    pub fn fit(
        progress: &[f64],
        values: &[f64],
        direction: Direction,
    ) -> Result<CurveEnsemble, ConvergenceError> {
        Self::fit_families(&CurveFamily::ALL, progress, values, direction)
    }

    /// [`fit`](Self::fit) restricted to some families.
    pub fn fit_families(
        families: &[CurveFamily],
        progress: &[f64],
        values: &[f64],
        direction: Direction,
    ) -> Result<CurveEnsemble, ConvergenceError> {
        let (progress, values) = thin(progress, values);
        let n = progress.len();
        let hold = (n / 5).max(1);
        let mut members = Vec::new();
        let mut first_err = None;
        for &family in families {
            match fit_family(family, &progress, &values, direction) {
                Ok(fit) => {
                    let err = if n > hold + family.n_params() {
                        match fit_family(
                            family,
                            &progress[..n - hold],
                            &values[..n - hold],
                            direction,
                        ) {
                            Ok(inner) => {
                                let se: f64 = (n - hold..n)
                                    .map(|i| (inner.value_at(progress[i]) - values[i]).powi(2))
                                    .sum();
                                se / hold as f64
                            }
                            Err(_) => fit.rmse * fit.rmse,
                        }
                    } else {
                        fit.rmse * fit.rmse
                    };
                    members.push((fit, err));
                }
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        if members.is_empty() {
            return Err(first_err.unwrap_or(ConvergenceError::Empty));
        }
        let (lo, hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let range = (hi - lo).abs().max(1e-12);
        let floor = (1e-6 * range).powi(2);
        let inv: Vec<f64> = members.iter().map(|(_, e)| 1.0 / (e + floor)).collect();
        let total: f64 = inv.iter().sum();
        let members = members
            .into_iter()
            .zip(inv)
            .map(|((f, _), w)| (f, w / total))
            .collect();
        Ok(CurveEnsemble {
            direction,
            members,
            value_range: range,
            last_progress: progress.last().copied().unwrap_or(0.0),
        })
    }

    /// The weighted mean of the members at progress `k`.
    pub fn value_at(&self, k: f64) -> f64 {
        self.members.iter().map(|(f, w)| w * f.value_at(k)).sum()
    }

    /// The weighted asymptote.
    pub fn asymptote(&self) -> f64 {
        self.members.iter().map(|(f, w)| w * f.c).sum()
    }

    /// Where the ensemble curve reaches `target`, from the last observed progress on.
    pub fn crossing(&self, target: f64) -> Crossing {
        crossing_of(
            |k| self.value_at(k),
            self.direction.sign(),
            target,
            self.last_progress,
        )
    }

    /// Where the ensemble curve stops improving: it moves less than
    /// [`PLATEAU_THRESHOLD`] × the observed range over [`PLATEAU_WINDOW`] × the progress.
    pub fn plateau(&self) -> f64 {
        plateau_of(
            |k| self.value_at(k),
            PLATEAU_THRESHOLD * self.value_range,
            PLATEAU_WINDOW,
            self.last_progress,
        )
    }

    /// The members' plateau progress, lowest and highest (the ensemble's spread).
    fn plateau_spread(&self) -> (f64, f64) {
        self.members
            .iter()
            .map(|(f, _)| {
                plateau_of(
                    |k| f.value_at(k),
                    PLATEAU_THRESHOLD * self.value_range,
                    PLATEAU_WINDOW,
                    self.last_progress,
                )
            })
            .fold((f64::INFINITY, 0.0f64), |(a, b), p| (a.min(p), b.max(p)))
    }
}

/// Optimus' fit over wall time alone: fit `1/(a·t + b) + c` (mirrored for rising metrics)
/// to the points and return the predicted remaining seconds until it reaches `target`:
/// `Some(0)` when the fit says it is already there, `None` when its asymptote misses it (or
/// there are fewer than 3 distinct times).
pub fn optimus_remaining_s(
    points: &[MetricPoint],
    direction: Direction,
    target: f64,
) -> Option<f64> {
    let t: Vec<f64> = points.iter().map(|p| p.wall_time_s.max(0.0)).collect();
    let v: Vec<f64> = points.iter().map(|p| p.value).collect();
    let fit = fit_family(CurveFamily::Optimus, &t, &v, direction).ok()?;
    let last = t.last().copied()?.max(1e-9);
    match fit.crossing(target, last) {
        Crossing::Already => Some(0.0),
        Crossing::At(k) => Some(k - last),
        Crossing::Never => None,
    }
}

// =============================================================================================
// Normal distribution helpers.

fn norm_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Inverse standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9).
fn norm_ppf(p: f64) -> f64 {
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let plow = 0.02425;
    if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

// =============================================================================================
// Empirical-Bayes prior over time-to-train.

/// A group of runs' residual centre (median) and size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct GroupStat {
    center: f64,
    n: f64,
}

/// Per-benchmark part of the prior.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BenchmarkPrior {
    /// `ln T = intercept + slope·ln(accelerators)`.
    intercept: f64,
    slope: f64,
    /// Median ln(accelerators) (used when a job's is unknown).
    mean_ln_acc: f64,
    /// Within-group residual variance (robust: (1.4826·MAD)²).
    within_var: f64,
    /// Between-group variance of the size-group and accelerator-group centres.
    between_var_size: f64,
    between_var_accel: f64,
    /// Residual centres per system size (accelerators; 0 = unknown).
    by_size: BTreeMap<u64, GroupStat>,
    /// Residual centres per accelerator model (normalised, see [`accelerator_class`]) after
    /// the size effect.
    by_accel: BTreeMap<String, GroupStat>,
    n_runs: usize,
}

/// An empirical-Bayes log-normal prior over time-to-train: per benchmark a regression on
/// ln(system size), plus shrunken (median-based, robust to a few very slow systems) effects
/// of the system size and of the accelerator model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimePrior {
    benchmarks: BTreeMap<String, BenchmarkPrior>,
}

/// An accelerator model as a class: lowercase, no vendor, power rating or spaces, `sxm4` →
/// `sxm` (`NVIDIA A100-SXM4-80GB (400W)` and `A100-SXM-80GB(500W)` → `a100-sxm-80gb`).
pub fn accelerator_class(model: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for ch in model.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 && !c.is_whitespace() => out.extend(c.to_lowercase()),
            _ => {}
        }
    }
    out.replace("nvidia", "")
        .replace("sxm4", "sxm")
        .trim_matches('-')
        .to_string()
}

fn median_of(v: &[f64]) -> f64 {
    median(v.to_vec()).unwrap_or(0.0)
}

/// Robust variance of residuals around their group centres: (1.4826·MAD)².
fn robust_var(dev: &[f64]) -> f64 {
    let abs: Vec<f64> = dev.iter().map(|d| d.abs()).collect();
    (1.4826 * median_of(&abs)).powi(2)
}

/// Method-of-moments between-group variance of group centres around 0.
fn between_var<K: Ord>(groups: &BTreeMap<K, GroupStat>, within: f64) -> f64 {
    let mut num = 0.0;
    let mut k = 0.0;
    for g in groups.values().filter(|g| g.n > 0.0) {
        num += g.center * g.center - within / g.n;
        k += 1.0;
    }
    if k < 1.0 {
        return 0.0;
    }
    (num / k).max(0.0)
}

/// Group centres (medians) of residuals by key.
fn group_centres<K: Ord + Clone>(keys: &[K], resid: &[f64]) -> BTreeMap<K, GroupStat> {
    let mut members: BTreeMap<K, Vec<f64>> = BTreeMap::new();
    for (k, &e) in keys.iter().zip(resid) {
        members.entry(k.clone()).or_default().push(e);
    }
    members
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                GroupStat {
                    center: median_of(&v),
                    n: v.len() as f64,
                },
            )
        })
        .collect()
}

/// The shrunken effect of a group: centre · n / (n + within / between).
fn shrunk(g: Option<&GroupStat>, within: f64, between: f64) -> (f64, f64) {
    match g {
        Some(g) if g.n > 0.0 && between > 0.0 => {
            let k = g.n / (g.n + within / between);
            (k * g.center, k)
        }
        _ => (0.0, 0.0),
    }
}

impl TimePrior {
    /// Fits the prior on finished runs (their time-to-train; curves are not needed).
    pub fn fit<'a>(runs: impl IntoIterator<Item = &'a ConvergenceRun>) -> TimePrior {
        let mut per: BTreeMap<String, Vec<&ConvergenceRun>> = BTreeMap::new();
        for r in runs {
            if r.time_to_train_s.is_finite() && r.time_to_train_s > 0.0 {
                per.entry(r.context.benchmark.clone()).or_default().push(r);
            }
        }
        let mut benchmarks = BTreeMap::new();
        for (name, rs) in per {
            let y: Vec<f64> = rs.iter().map(|r| r.time_to_train_s.ln()).collect();
            let xs: Vec<Option<f64>> = rs
                .iter()
                .map(|r| {
                    r.context
                        .accelerators
                        .filter(|&a| a > 0)
                        .map(|a| (a as f64).ln())
                })
                .collect();
            let known: Vec<(f64, f64)> = xs
                .iter()
                .zip(&y)
                .filter_map(|(x, &y)| x.map(|x| (x, y)))
                .collect();
            let kx: Vec<f64> = known.iter().map(|p| p.0).collect();
            let mean_x = if kx.is_empty() { 0.0 } else { median_of(&kx) };
            let slope = if known.len() >= 3 {
                let mx = kx.iter().sum::<f64>() / kx.len() as f64;
                let my = known.iter().map(|p| p.1).sum::<f64>() / known.len() as f64;
                let sxx: f64 = kx.iter().map(|x| (x - mx).powi(2)).sum();
                let sxy: f64 = known.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
                // time-to-train falls with scale, never faster than linearly
                if sxx > 1e-9 {
                    (sxy / sxx).clamp(-1.0, 0.0)
                } else {
                    0.0
                }
            } else {
                0.0
            };
            let raw: Vec<f64> = y
                .iter()
                .zip(&xs)
                .map(|(&y, &x)| y - slope * x.unwrap_or(mean_x))
                .collect();
            let intercept = median_of(&raw);
            let resid: Vec<f64> = raw.iter().map(|r| r - intercept).collect();
            // level 1: system size
            let size_keys: Vec<u64> = rs
                .iter()
                .map(|r| r.context.accelerators.unwrap_or(0))
                .collect();
            let by_size = group_centres(&size_keys, &resid);
            let dev1: Vec<f64> = size_keys
                .iter()
                .zip(&resid)
                .map(|(k, e)| e - by_size[k].center)
                .collect();
            let within1 = robust_var(&dev1).max(1e-4);
            let bv_size = between_var(&by_size, within1);
            // level 2: accelerator class, on what the size effect leaves
            let resid2: Vec<f64> = size_keys
                .iter()
                .zip(&resid)
                .map(|(k, e)| e - shrunk(by_size.get(k), within1, bv_size).0)
                .collect();
            let accel_keys: Vec<String> = rs
                .iter()
                .map(|r| {
                    r.context
                        .accelerator_model
                        .as_deref()
                        .map_or_else(|| "?".to_string(), accelerator_class)
                })
                .collect();
            let by_accel = group_centres(&accel_keys, &resid2);
            let dev2: Vec<f64> = accel_keys
                .iter()
                .zip(&resid2)
                .map(|(k, e)| e - by_accel[k].center)
                .collect();
            let within2 = robust_var(&dev2).max(1e-4);
            let bv_accel = between_var(&by_accel, within2);
            benchmarks.insert(
                name,
                BenchmarkPrior {
                    intercept,
                    slope,
                    mean_ln_acc: mean_x,
                    within_var: within2,
                    between_var_size: bv_size,
                    between_var_accel: bv_accel,
                    by_size,
                    by_accel,
                    n_runs: rs.len(),
                },
            );
        }
        TimePrior { benchmarks }
    }

    /// Prior mean and standard deviation of `ln T` for a job; `None` for an unknown benchmark.
    pub fn log_time(&self, ctx: &JobContext) -> Option<(f64, f64)> {
        let b = self.benchmarks.get(&ctx.benchmark)?;
        let x = ctx
            .accelerators
            .filter(|&a| a > 0)
            .map(|a| (a as f64).ln())
            .unwrap_or(b.mean_ln_acc);
        let (size_eff, k1) = shrunk(
            b.by_size.get(&ctx.accelerators.unwrap_or(0)),
            b.within_var,
            b.between_var_size,
        );
        let accel = ctx
            .accelerator_model
            .as_deref()
            .map_or_else(|| "?".to_string(), accelerator_class);
        let (accel_eff, k2) = shrunk(b.by_accel.get(&accel), b.within_var, b.between_var_accel);
        let mu = b.intercept + b.slope * x + size_eff + accel_eff;
        let var = b.within_var + (1.0 - k1) * b.between_var_size + (1.0 - k2) * b.between_var_accel;
        Some((mu, var.max(1e-4).sqrt()))
    }

    /// The prior median of `ln T` given `T > elapsed` (a log-normal truncated below).
    pub fn truncated_median(mu: f64, sigma: f64, elapsed_s: f64) -> f64 {
        let l = elapsed_s.max(1e-9).ln();
        let a = norm_cdf((l - mu) / sigma);
        if a > 1.0 - 1e-9 {
            return l + sigma * 1e-3;
        }
        mu + sigma * norm_ppf(a + (1.0 - a) / 2.0)
    }

    /// Runs the prior was fitted on, for a benchmark.
    pub fn runs_of(&self, benchmark: &str) -> usize {
        self.benchmarks.get(benchmark).map_or(0, |b| b.n_runs)
    }
}

// =============================================================================================
// What the predictor learns per benchmark.

/// Which progress axis a benchmark's curves have (besides wall time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgressAxis {
    Epoch,
    Samples,
    /// Epochs are degenerate (bert logs epoch 1 throughout) and no samples are logged.
    WallTime,
}

/// What the training curves of a benchmark say about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkProfile {
    pub direction: Direction,
    /// The quality target: the least-good final value among successful training runs.
    pub target: f64,
    pub axis: ProgressAxis,
    /// Median of ln(final progress) on that axis (epochs or samples to target), per global
    /// batch size, and over all runs.
    pub ln_final_progress_by_batch: BTreeMap<u64, (f64, usize)>,
    pub ln_final_progress: Option<f64>,
    /// Index of the benchmark (a model feature).
    pub index: usize,
    pub n_runs: usize,
}

fn axis_value(p: &MetricPoint, axis: ProgressAxis) -> Option<f64> {
    match axis {
        ProgressAxis::Epoch => p.epoch,
        ProgressAxis::Samples => p.samples,
        ProgressAxis::WallTime => Some(p.wall_time_s),
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

fn profile_benchmarks(runs: &[&ConvergenceRun]) -> BTreeMap<String, BenchmarkProfile> {
    let mut per: BTreeMap<&str, Vec<&ConvergenceRun>> = BTreeMap::new();
    for r in runs {
        per.entry(r.context.benchmark.as_str()).or_default().push(r);
    }
    let mut out = BTreeMap::new();
    for (index, (name, rs)) in per.into_iter().enumerate() {
        let rising = rs
            .iter()
            .filter(|r| {
                let v: Vec<f64> = r.points.iter().map(|p| p.value).collect();
                Direction::infer(&v) == Direction::Rising
            })
            .count();
        let direction = if 2 * rising >= rs.len() {
            Direction::Rising
        } else {
            Direction::Falling
        };
        let finals = rs.iter().filter_map(|r| r.points.last().map(|p| p.value));
        let target = match direction {
            Direction::Rising => finals.fold(f64::INFINITY, f64::min),
            Direction::Falling => finals.fold(f64::NEG_INFINITY, f64::max),
        };
        // an axis is usable when it strictly grows over most runs' curves
        let grows = |axis: ProgressAxis| {
            rs.iter()
                .filter(|r| {
                    let v: Vec<f64> = r
                        .points
                        .iter()
                        .filter_map(|p| axis_value(p, axis))
                        .collect();
                    v.len() == r.points.len()
                        && v.len() >= 2
                        && v.windows(2).all(|w| w[1] >= w[0])
                        && v.last() > v.first()
                })
                .count()
                * 10
                >= rs.len() * 9
        };
        let axis = if grows(ProgressAxis::Epoch) {
            ProgressAxis::Epoch
        } else if grows(ProgressAxis::Samples) {
            ProgressAxis::Samples
        } else {
            ProgressAxis::WallTime
        };
        let mut by_batch: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        let mut all = Vec::new();
        if axis != ProgressAxis::WallTime {
            for r in &rs {
                if let Some(v) = r.points.last().and_then(|p| axis_value(p, axis)) {
                    all.push(v.ln());
                    by_batch
                        .entry(r.context.global_batch_size.unwrap_or(0))
                        .or_default()
                        .push(v.ln());
                }
            }
        }
        out.insert(
            name.to_string(),
            BenchmarkProfile {
                direction,
                target,
                axis,
                ln_final_progress_by_batch: by_batch
                    .into_iter()
                    .filter_map(|(b, v)| {
                        let n = v.len();
                        median(v).map(|m| (b, (m, n)))
                    })
                    .collect(),
                ln_final_progress: median(all),
                index,
                n_runs: rs.len(),
            },
        );
    }
    out
}

impl BenchmarkProfile {
    /// Prior ln(final progress) for a batch size: the batch group's median shrunk towards the
    /// benchmark's by its size (3 pseudo-runs).
    fn ln_final_progress(&self, batch: Option<u64>) -> Option<f64> {
        let all = self.ln_final_progress?;
        match batch.and_then(|b| self.ln_final_progress_by_batch.get(&b)) {
            Some(&(m, n)) => {
                let n = n as f64;
                Some((n * m + 3.0 * all) / (n + 3.0))
            }
            None => Some(all),
        }
    }
}

// =============================================================================================
// Features of a prefix.

/// Names of the model's features, in order.
pub const FEATURE_NAMES: [&str; 20] = [
    "benchmark",
    "ln_elapsed",
    "ln_accelerators",
    "ln_batch",
    "accelerator_model",
    "prior_ln_ratio",
    "prior_sigma",
    "truncated_prior_ln_remaining",
    "best_fraction_to_target",
    "last_fraction_to_target",
    "linear_extrapolation_ln_remaining",
    "ensemble_ln_remaining",
    "ensemble_status",
    "optimus_ln_remaining",
    "ln_points",
    "progress_prior_ln_remaining",
    "progress_fraction",
    "ensemble_plateau_ln_remaining",
    "asymptote_gap",
    "eval_interval_ratio",
];

/// The parts of a prefix's analysis a prediction reports besides the model output.
#[derive(Debug, Clone)]
struct PrefixAnalysis {
    features: Vec<f32>,
    elapsed: f64,
    /// Truncated-prior median remaining seconds (None: unknown benchmark).
    prior_remaining: Option<f64>,
    ensemble: Option<CurveEnsemble>,
}

fn ln_ratio(remaining: f64, elapsed: f64) -> f32 {
    (remaining.max(1.0) / elapsed).ln() as f32
}

/// Everything learned across curves that features need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct CurvePriors {
    profiles: BTreeMap<String, BenchmarkProfile>,
    time: TimePrior,
    accelerator_models: BTreeMap<String, usize>,
}

impl CurvePriors {
    fn fit(runs: &[&ConvergenceRun], profiles: &BTreeMap<String, BenchmarkProfile>) -> Self {
        let mut accelerator_models = BTreeMap::new();
        for r in runs {
            if let Some(m) = &r.context.accelerator_model {
                let next = accelerator_models.len();
                accelerator_models
                    .entry(accelerator_class(m))
                    .or_insert(next);
            }
        }
        CurvePriors {
            profiles: profiles.clone(),
            time: TimePrior::fit(runs.iter().copied()),
            accelerator_models,
        }
    }

    fn analyse(&self, ctx: &JobContext, points: &[MetricPoint]) -> PrefixAnalysis {
        let nan = f32::NAN;
        let mut f = vec![nan; FEATURE_NAMES.len()];
        let last = points[points.len() - 1];
        let elapsed = last.wall_time_s.max(1.0);
        let profile = self.profiles.get(&ctx.benchmark);
        f[0] = profile.map_or(nan, |p| p.index as f32);
        f[1] = elapsed.ln() as f32;
        f[2] = ctx
            .accelerators
            .filter(|&a| a > 0)
            .map_or(nan, |a| (a as f32).ln());
        f[3] = ctx
            .global_batch_size
            .filter(|&b| b > 0)
            .map_or(nan, |b| (b as f32).ln());
        f[4] = ctx
            .accelerator_model
            .as_ref()
            .and_then(|m| self.accelerator_models.get(&accelerator_class(m)))
            .map_or(nan, |&i| i as f32);
        let mut prior_remaining = None;
        if let Some((mu, sigma)) = self.time.log_time(ctx) {
            f[5] = (mu - elapsed.ln()) as f32;
            f[6] = sigma as f32;
            let m = TimePrior::truncated_median(mu, sigma, elapsed);
            let rem = (m.exp() - elapsed).max(1.0);
            prior_remaining = Some(rem);
            f[7] = ln_ratio(rem, elapsed);
        }
        let direction = profile.map_or_else(
            || Direction::infer(&points.iter().map(|p| p.value).collect::<Vec<_>>()),
            |p| p.direction,
        );
        let sign = direction.sign();
        let target = profile.map(|p| p.target);
        let first = points[0].value;
        let best =
            points.iter().map(|p| p.value).fold(
                first,
                |b, v| {
                    if sign * (v - b) < 0.0 {
                        v
                    } else {
                        b
                    }
                },
            );
        if let Some(target) = target {
            let span = target - first;
            if span.abs() > 1e-12 {
                f[8] = ((best - first) / span) as f32;
                f[9] = ((last.value - first) / span) as f32;
            }
            // linear extrapolation of the last few points
            let m = points.len().min(5);
            if m >= 2 {
                let a = points[points.len() - m];
                let dt = last.wall_time_s - a.wall_time_s;
                let improve = -sign * (last.value - a.value);
                let gap = -sign * (target - best);
                if dt > 0.0 && improve > 0.0 && gap > 0.0 {
                    f[10] = ln_ratio(gap / (improve / dt), elapsed);
                } else if gap <= 0.0 {
                    f[10] = ln_ratio(1.0, elapsed);
                }
            }
        }
        let t: Vec<f64> = points.iter().map(|p| p.wall_time_s.max(0.0)).collect();
        let v: Vec<f64> = points.iter().map(|p| p.value).collect();
        let ensemble = CurveEnsemble::fit(&t, &v, direction).ok();
        if let Some(ens) = &ensemble {
            let now = ens.last_progress.max(1e-9);
            if let Some(target) = target {
                match ens.crossing(target) {
                    Crossing::Already => {
                        f[12] = 2.0;
                        f[11] = ln_ratio(1.0, elapsed);
                    }
                    Crossing::At(k) => {
                        f[12] = 1.0;
                        f[11] = ln_ratio(k - now, elapsed);
                    }
                    Crossing::Never => f[12] = 0.0,
                }
                let span = (target - first).abs().max(1e-12);
                f[18] = (sign * (ens.asymptote() - target) / span) as f32;
            }
            let p = ens.plateau();
            f[17] = ln_ratio(p - now, elapsed);
        }
        if let Some(target) = target {
            if let Some(rem) = optimus_remaining_s(points, direction, target) {
                f[13] = ln_ratio(rem, elapsed);
            }
        }
        f[14] = (points.len() as f32).ln();
        if let Some(p) = profile {
            if let (Some(lnp), Some(now)) = (
                p.ln_final_progress(ctx.global_batch_size),
                axis_value(&last, p.axis),
            ) {
                let total = lnp.exp();
                f[16] = (now / total) as f32;
                // remaining progress at the observed seconds per unit of progress
                let rem = (total - now).max(0.0) * (elapsed / now);
                f[15] = ln_ratio(rem, elapsed);
            }
        }
        if points.len() >= 2 {
            let span = last.wall_time_s - points[0].wall_time_s;
            f[19] = (span / (points.len() - 1) as f64 / elapsed) as f32;
        }
        PrefixAnalysis {
            features: f,
            elapsed,
            prior_remaining,
            ensemble,
        }
    }
}

// =============================================================================================
// The predictor.

/// How a prediction was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvergenceBasis {
    /// The learned model on a known benchmark: time to its quality target.
    Target,
    /// An unknown benchmark: where the curve-fit ensemble stops improving.
    Plateau,
}

/// A convergence estimate for a running job. Intervals are 80% (10%–90%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergencePrediction {
    pub basis: ConvergenceBasis,
    /// Seconds since the job started, at its last point.
    pub elapsed_s: f64,
    /// Remaining wall seconds to convergence, and its interval.
    pub remaining_s: f64,
    pub remaining_lower_s: f64,
    pub remaining_upper_s: f64,
    /// Total wall seconds at convergence (`elapsed + remaining`).
    pub total_s: f64,
    /// Epoch at convergence and its interval (when the job reports growing epochs).
    pub epoch: Option<(f64, f64, f64)>,
    /// Final metric and its interval.
    pub final_metric: (f64, f64, f64),
    /// The target the job converges to (basis `Target`).
    pub target: Option<f64>,
    pub direction: Direction,
    /// The curve-fit ensemble over wall time (None with fewer than 3 points).
    pub curve: Option<CurveEnsemble>,
    /// The empirical-Bayes prior truncated at the elapsed time: median remaining seconds.
    pub prior_remaining_s: Option<f64>,
}

/// Training settings of [`ConvergencePredictor`].
#[derive(Debug, Clone)]
pub struct ConvergenceTrainer {
    /// Prefixes per training run (evenly spaced point counts).
    pub prefixes_per_run: usize,
    /// Folds for the cross-fitted priors of training rows.
    pub folds: usize,
    /// Share of training runs (the latest by start) that early-stop and calibrate.
    pub calibration_share: f64,
    pub trees: usize,
}

impl Default for ConvergenceTrainer {
    fn default() -> Self {
        ConvergenceTrainer {
            prefixes_per_run: 16,
            folds: 5,
            calibration_share: 0.15,
            trees: 400,
        }
    }
}

/// Version of the convergence features ([`FEATURE_NAMES`] and how they are computed);
/// bumped whenever a stored predictor would read them differently.
pub const CONVERGENCE_FEATURE_VERSION: u32 = 1;

/// Interval level of every convergence interval.
pub const CONVERGENCE_COVERAGE: f64 = 0.8;

/// The learned convergence predictor: curve priors + three boosted-tree models on
/// `ln(remaining / elapsed)` (median, 10% and 90%), the last two widened by a conformal
/// margin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvergencePredictor {
    priors: CurvePriors,
    median: GbdtModel,
    lower: GbdtModel,
    upper: GbdtModel,
    /// Conformal widening of the quantile band, in ln units, per bin of the predicted
    /// ln(remaining / elapsed): `margins[i]` applies below `margin_edges[i]`, the last one
    /// above every edge (late in a run the band needs more widening than early).
    margin_edges: Vec<f64>,
    margins: Vec<f64>,
    /// [`CONVERGENCE_FEATURE_VERSION`] at training (checked by the registry on load).
    pub feature_version: u32,
    /// Training runs.
    pub n_train_runs: usize,
}

/// A training prefix: features, target, run weight, run position.
struct Rows {
    x: Vec<f32>,
    y: Vec<f64>,
    w: Vec<f64>,
    run: Vec<usize>,
}

fn prefix_counts(n: usize, per_run: usize) -> Vec<usize> {
    if n <= 1 {
        return vec![];
    }
    let max_k = n - 1;
    let m = per_run.min(max_k).max(1);
    let mut ks: Vec<usize> = (0..m)
        .map(|i| 1 + (i * (max_k - 1)) / (m.max(2) - 1).max(1))
        .map(|k| k.clamp(1, max_k))
        .collect();
    ks.dedup();
    ks
}

impl ConvergencePredictor {
    /// Trains on finished runs (any order; the latest [`ConvergenceTrainer::calibration_share`]
    /// by start time early-stop the trees and calibrate the interval).
    pub fn train(
        runs: &[ConvergenceRun],
        trainer: &ConvergenceTrainer,
    ) -> Result<ConvergencePredictor, ConvergenceError> {
        let timed: Vec<&ConvergenceRun> = runs
            .iter()
            .filter(|r| r.time_to_train_s.is_finite() && r.time_to_train_s > 0.0)
            .collect();
        let mut usable: Vec<&ConvergenceRun> = timed
            .iter()
            .copied()
            .filter(|r| r.points.len() >= 2 && validate_points(&r.points).is_ok())
            .collect();
        if usable.len() < 20 {
            return Err(ConvergenceError::NotEnoughData(format!(
                "{} usable runs (need 20 with ≥ 2 valid points and a time-to-train)",
                usable.len()
            )));
        }
        usable.sort_by_key(|r| r.start_ms);
        let profiles = profile_benchmarks(&usable);
        // cross-fitted priors: fold f's rows use priors fitted without fold f (runs without
        // a curve only ever inform priors)
        let folds = trainer.folds.max(2);
        let fold_of = |r: &ConvergenceRun| -> usize {
            r.run_id
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
                % folds
        };
        let fold_priors: Vec<CurvePriors> = (0..folds)
            .map(|f| {
                let others: Vec<&ConvergenceRun> =
                    timed.iter().copied().filter(|r| fold_of(r) != f).collect();
                CurvePriors::fit(&others, &profiles)
            })
            .collect();
        let all_priors = CurvePriors::fit(&timed, &profiles);
        let d = FEATURE_NAMES.len();
        let mut rows = Rows {
            x: Vec::new(),
            y: Vec::new(),
            w: Vec::new(),
            run: Vec::new(),
        };
        for (i, r) in usable.iter().enumerate() {
            let priors = &fold_priors[fold_of(r)];
            let ks = prefix_counts(r.points.len(), trainer.prefixes_per_run);
            let wk = 1.0 / ks.len().max(1) as f64;
            for k in ks {
                let a = priors.analyse(&r.context, &r.points[..k]);
                let remaining =
                    (r.time_to_train_s - a.elapsed.max(r.points[k - 1].wall_time_s)).max(1.0);
                rows.x.extend_from_slice(&a.features);
                rows.y
                    .push((remaining / a.elapsed).ln() - base_margin(&a.features));
                rows.w.push(wk);
                rows.run.push(i);
            }
        }
        let n_cal_runs = ((usable.len() as f64) * trainer.calibration_share).round() as usize;
        let cut_run = usable.len() - n_cal_runs.clamp(1, usable.len() / 2);
        let cut = rows
            .run
            .iter()
            .position(|&r| r >= cut_run)
            .unwrap_or(rows.y.len());
        let fit_x = Matrix::new(&rows.x[..cut * d], cut, d)?;
        let cal_x = Matrix::new(&rows.x[cut * d..], rows.y.len() - cut, d)?;
        let fit_set = TrainSet::new(fit_x, &rows.y[..cut], Some(&rows.w[..cut]))?;
        let params = |objective| GbdtParams {
            objective,
            n_trees: trainer.trees,
            learning_rate: 0.05,
            num_leaves: 15,
            min_data_in_leaf: 20,
            early_stopping_rounds: 40,
            ..GbdtParams::default()
        };
        let fit_q = |objective| -> Result<(GbdtModel, usize), ConvergenceError> {
            let m = params(objective).fit_with_validation(
                &fit_set,
                Some(Validation {
                    x: cal_x,
                    y: &rows.y[cut..],
                }),
            )?;
            let n = m.n_trees().max(10);
            Ok((m, n))
        };
        let (med_early, n_med) = fit_q(Objective::L1)?;
        let (lo_early, n_lo) = fit_q(Objective::Quantile { alpha: 0.1 })?;
        let (hi_early, n_hi) = fit_q(Objective::Quantile { alpha: 0.9 })?;
        // conformal margins (CQR) on the calibration runs, per tercile of the predicted
        // ln(remaining / elapsed)
        let scored: Vec<(f64, f64)> = (cut..rows.y.len())
            .map(|i| {
                let row = &rows.x[i * d..(i + 1) * d];
                let (lo, hi) = (lo_early.predict_row(row), hi_early.predict_row(row));
                let mid = base_margin(row) + med_early.predict_row(row);
                (mid, (lo - rows.y[i]).max(rows.y[i] - hi))
            })
            .collect();
        let mids: Vec<f64> = scored.iter().map(|p| p.0).collect();
        let margin_edges: Vec<f64> = if scored.len() >= 60 {
            vec![quantile(&mids, 1.0 / 3.0), quantile(&mids, 2.0 / 3.0)]
        } else {
            vec![]
        };
        let margins: Vec<f64> = (0..=margin_edges.len())
            .map(|b| {
                let in_bin: Vec<f64> = scored
                    .iter()
                    .filter(|(m, _)| margin_bin(&margin_edges, *m) == b)
                    .map(|p| p.1)
                    .collect();
                if in_bin.is_empty() {
                    0.0
                } else {
                    quantile(&in_bin, CONVERGENCE_COVERAGE)
                }
            })
            .collect();
        // refit on every training run with the early-stopped sizes
        let all_x = Matrix::new(&rows.x, rows.y.len(), d)?;
        let all_set = TrainSet::new(all_x, &rows.y, Some(&rows.w))?;
        let refit = |objective, n: usize| -> Result<GbdtModel, ConvergenceError> {
            Ok(GbdtParams {
                n_trees: n,
                ..params(objective)
            }
            .fit(&all_set)?)
        };
        Ok(ConvergencePredictor {
            priors: all_priors,
            median: refit(Objective::L1, n_med)?,
            lower: refit(Objective::Quantile { alpha: 0.1 }, n_lo)?,
            upper: refit(Objective::Quantile { alpha: 0.9 }, n_hi)?,
            margin_edges,
            margins,
            feature_version: CONVERGENCE_FEATURE_VERSION,
            n_train_runs: usable.len(),
        })
    }

    /// The benchmarks the predictor knows, with their learned target and direction.
    pub fn benchmarks(&self) -> impl Iterator<Item = (&str, &BenchmarkProfile)> {
        self.priors.profiles.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The empirical-Bayes time-to-train prior.
    pub fn time_prior(&self) -> &TimePrior {
        &self.priors.time
    }

    /// Estimates convergence from the points a running job reported so far.
    ///
    /// Errors on empty input, a non-finite field or time going backwards. A known benchmark
    /// gets a prediction from one point on (the prior, truncated at the elapsed time, carries
    /// it); an unknown one needs 3 points for a curve fit.
    pub fn predict(
        &self,
        ctx: &JobContext,
        points: &[MetricPoint],
    ) -> Result<ConvergencePrediction, ConvergenceError> {
        validate_points(points)?;
        let a = self.priors.analyse(ctx, points);
        let last = points[points.len() - 1];
        let profile = self.priors.profiles.get(&ctx.benchmark);
        let epoch_rate = epoch_rate(points);
        let Some(profile) = profile else {
            // unknown benchmark: where the curve stops improving
            let ens = a.ensemble.ok_or_else(|| {
                ConvergenceError::NoEvidence(format!(
                    "benchmark `{}` is not among the {} the predictor was trained on, and {} point(s) are too few for a curve fit (need 3)",
                    ctx.benchmark,
                    self.priors.profiles.len(),
                    points.len()
                ))
            })?;
            let now = ens.last_progress.max(1e-9);
            let p = ens.plateau();
            let (p_lo, p_hi) = ens.plateau_spread();
            let remaining = (p - now).max(0.0);
            let (lo, hi) = ((p_lo.min(p) - now).max(0.0), (p_hi.max(p) - now).max(0.0));
            let fm = ens.value_at(p);
            let (f1, f2) = (ens.value_at(p_lo.min(p)), ens.value_at(p_hi.max(p)));
            return Ok(ConvergencePrediction {
                basis: ConvergenceBasis::Plateau,
                elapsed_s: last.wall_time_s,
                remaining_s: remaining,
                remaining_lower_s: lo,
                remaining_upper_s: hi,
                total_s: last.wall_time_s + remaining,
                epoch: epoch_rate.map(|(e, r)| (e + r * remaining, e + r * lo, e + r * hi)),
                final_metric: (fm, f1.min(f2), f1.max(f2)),
                target: None,
                direction: ens.direction,
                curve: Some(ens),
                prior_remaining_s: None,
            });
        };
        let x = &a.features;
        let base = base_margin(x);
        let mid = base + self.median.predict_row(x);
        let margin = self
            .margins
            .get(margin_bin(&self.margin_edges, mid))
            .copied()
            .unwrap_or(0.0);
        let lo = base + self.lower.predict_row(x) - margin;
        let hi = base + self.upper.predict_row(x) + margin;
        let (lo, hi) = (lo.min(mid), hi.max(mid));
        let rem = |z: f64| (z.exp() * a.elapsed).max(0.0);
        let (remaining, r_lo, r_hi) = (rem(mid), rem(lo), rem(hi));
        let total = last.wall_time_s + remaining;
        let target = profile.target;
        let sign = profile.direction.sign();
        // final metric: the curve at convergence, never short of the target (reaching it is
        // the stop rule); without a curve, the target itself
        let past = |v: f64| if sign * (v - target) > 0.0 { target } else { v };
        let final_metric = match &a.ensemble {
            Some(ens) => {
                let at = |r: f64| past(ens.value_at(ens.last_progress + r));
                let (v, v1, v2) = (at(remaining), at(r_lo), at(r_hi));
                (v, v1.min(v2).min(v), v1.max(v2).max(v))
            }
            None => (target, target, target),
        };
        Ok(ConvergencePrediction {
            basis: ConvergenceBasis::Target,
            elapsed_s: last.wall_time_s,
            remaining_s: remaining,
            remaining_lower_s: r_lo,
            remaining_upper_s: r_hi,
            total_s: total,
            epoch: epoch_rate.map(|(e, r)| (e + r * remaining, e + r * r_lo, e + r * r_hi)),
            final_metric,
            target: Some(target),
            direction: profile.direction,
            curve: a.ensemble,
            prior_remaining_s: a.prior_remaining,
        })
    }

    /// The model's feature importance (total split gain of the median model) by name.
    pub fn feature_importance(&self) -> Vec<(&'static str, f64)> {
        FEATURE_NAMES
            .iter()
            .copied()
            .zip(self.median.feature_gain().iter().copied())
            .collect()
    }
}

/// The conformal bin of a predicted ln(remaining / elapsed).
fn margin_bin(edges: &[f64], mid: f64) -> usize {
    edges.iter().filter(|&&e| mid > e).count()
}

/// What the trees correct: the truncated prior's ln(remaining / elapsed), else the
/// epochs-to-target prior's, else 0 (the trees predict the rest).
fn base_margin(features: &[f32]) -> f64 {
    [7usize, 15]
        .iter()
        .filter_map(|&i| features.get(i).copied())
        .find(|v| v.is_finite())
        .map_or(0.0, f64::from)
}

/// The last epoch and epochs per second, when epochs grow over the points.
fn epoch_rate(points: &[MetricPoint]) -> Option<(f64, f64)> {
    let first = points.first()?;
    let last = points.last()?;
    let (e0, e1) = (first.epoch?, last.epoch?);
    let dt = last.wall_time_s - first.wall_time_s;
    (e1 > e0 && dt > 0.0).then(|| (e1, (e1 - e0) / dt))
}

// =============================================================================================
// Evaluation (issue #5 protocol).

/// The prefixes evaluated: shares of a test run's points.
pub const PREFIXES: [f64; 3] = [0.25, 0.5, 0.75];

/// Points given for a prefix share: `⌈share · n⌉`, at least 1.
pub fn prefix_len(n: usize, share: f64) -> usize {
    ((share * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// One method's result on one group at one prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodScore {
    pub method: String,
    /// Median |pred − actual| / actual of remaining wall time (no finite answer: 1.0).
    pub median_rel_error: f64,
    /// Quartiles of the relative error (for error bars).
    pub q25_rel_error: f64,
    pub q75_rel_error: f64,
    /// Share of runs with a finite answer.
    pub answered: f64,
    /// Share of runs whose actual remaining time is inside the 80% interval (methods with one).
    pub coverage: Option<f64>,
}

/// Scores of every method on one group (all runs, or one benchmark) at one prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefixScores {
    /// `all` or a benchmark.
    pub group: String,
    pub prefix: f64,
    pub runs: usize,
    pub methods: Vec<MethodScore>,
}

/// One test run's predictions at one prefix (for plots).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestCase {
    pub run_id: String,
    pub benchmark: String,
    pub prefix: f64,
    pub points_given: usize,
    pub actual_remaining_s: f64,
    pub prediction: ConvergencePrediction,
}

/// Method names, in table order.
pub const METHOD_AUGUR: &str = "augur (curve evidence + EB prior, GBDT)";
pub const METHOD_TRUNCATED_PRIOR: &str = "EB prior truncated at elapsed (ablation)";
pub const METHOD_ENSEMBLE: &str = "curve ensemble over wall time (ablation)";
pub const METHOD_OPTIMUS: &str = "Optimus fit over wall time (peer)";
pub const METHOD_PRIOR: &str = "median time-to-train, same benchmark+size (peer)";

/// The result of [`evaluate_convergence`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvergenceEvaluation {
    pub n_train_runs: usize,
    pub n_test_runs: usize,
    /// Overall first, then per benchmark, each at every prefix.
    pub scores: Vec<PrefixScores>,
    /// Learned targets per benchmark: (benchmark, direction, target).
    pub targets: Vec<(String, Direction, f64)>,
    /// Seconds to train the predictor.
    pub train_s: f64,
    /// Mean microseconds per prediction on the test prefixes.
    pub predict_us: f64,
    /// Every test prediction (not serialised: large).
    #[serde(skip)]
    pub cases: Vec<TestCase>,
    /// The test runs (not serialised).
    #[serde(skip)]
    pub test_runs: Vec<ConvergenceRun>,
    /// The trained predictor (not serialised here; the registry stores it).
    #[serde(skip)]
    pub predictor: Option<ConvergencePredictor>,
}

impl ConvergenceEvaluation {
    /// The score of `method` on `group` at `prefix`.
    pub fn score(&self, group: &str, prefix: f64, method: &str) -> Option<&MethodScore> {
        self.scores
            .iter()
            .find(|s| s.group == group && (s.prefix - prefix).abs() < 1e-9)?
            .methods
            .iter()
            .find(|m| m.method == method)
    }
}

/// Per-run outcome of one method at one prefix: relative error (1.0 without an answer) and
/// whether the interval covered.
#[derive(Clone, Copy)]
struct Outcome {
    err: f64,
    answered: bool,
    covered: Option<bool>,
}

fn rel_error(pred: Option<f64>, actual: f64) -> Outcome {
    match pred.filter(|p| p.is_finite()) {
        Some(p) => Outcome {
            err: (p - actual).abs() / actual,
            answered: true,
            covered: None,
        },
        None => Outcome {
            err: 1.0,
            answered: false,
            covered: None,
        },
    }
}

/// The issue #5 evaluation on MLPerf runs: split by run start (the shared [`TimeSplit`],
/// first 80% of successful runs with a curve train, the rest test), predict the remaining
/// wall time to target from the first 25/50/75% of each test run's points.
pub fn evaluate_convergence(
    runs: &[ConvergenceRun],
    trainer: &ConvergenceTrainer,
) -> Result<ConvergenceEvaluation, ConvergenceError> {
    let starts: Vec<f64> = runs.iter().map(|r| r.start_ms as f64).collect();
    let split = TimeSplit::default_for(&starts);
    let train: Vec<ConvergenceRun> = split.train().iter().map(|&i| runs[i].clone()).collect();
    let test: Vec<ConvergenceRun> = split.test().iter().map(|&i| runs[i].clone()).collect();
    if test.is_empty() {
        return Err(ConvergenceError::NotEnoughData(
            "no test runs after the split".into(),
        ));
    }
    let t0 = std::time::Instant::now();
    let predictor = ConvergencePredictor::train(&train, trainer)?;
    let train_s = t0.elapsed().as_secs_f64();
    // the peer prior: median time-to-train per (benchmark, accelerators) in training runs
    let mut groups: HashMap<(String, u64), Vec<f64>> = HashMap::new();
    for r in &train {
        if let Some(a) = r.context.accelerators {
            groups
                .entry((r.context.benchmark.clone(), a))
                .or_default()
                .push(r.time_to_train_s);
        }
    }
    let peer_median: HashMap<(String, u64), f64> = groups
        .into_iter()
        .filter_map(|(k, v)| median(v).map(|m| (k, m)))
        .collect();
    let methods = [
        METHOD_AUGUR,
        METHOD_TRUNCATED_PRIOR,
        METHOD_ENSEMBLE,
        METHOD_OPTIMUS,
        METHOD_PRIOR,
    ];
    // outcomes[prefix][method] = (benchmark, outcome) per test run
    let mut outcomes: Vec<Vec<Vec<(String, Outcome)>>> =
        vec![vec![Vec::new(); methods.len()]; PREFIXES.len()];
    let mut cases = Vec::new();
    let mut predict_s = 0.0;
    let mut n_pred = 0usize;
    let test: Vec<ConvergenceRun> = test.into_iter().filter(|r| !r.points.is_empty()).collect();
    for r in &test {
        let bench = r.context.benchmark.clone();
        for (pi, &share) in PREFIXES.iter().enumerate() {
            let k = prefix_len(r.points.len(), share);
            let pts = &r.points[..k];
            let elapsed = pts[k - 1].wall_time_s;
            let actual = (r.time_to_train_s - elapsed).max(1.0);
            let t = std::time::Instant::now();
            let pred = predictor.predict(&r.context, pts);
            predict_s += t.elapsed().as_secs_f64();
            n_pred += 1;
            let (augur, trunc, ens) = match &pred {
                Ok(p) => {
                    let mut o = rel_error(Some(p.remaining_s), actual);
                    o.covered =
                        Some(p.remaining_lower_s <= actual && actual <= p.remaining_upper_s);
                    let ens = match (&p.curve, p.target) {
                        (Some(c), Some(target)) => match c.crossing(target) {
                            Crossing::Already => Some(0.0),
                            Crossing::At(x) => Some(x - c.last_progress),
                            Crossing::Never => None,
                        },
                        _ => None,
                    };
                    (
                        o,
                        rel_error(p.prior_remaining_s, actual),
                        rel_error(ens, actual),
                    )
                }
                Err(_) => {
                    let mut o = rel_error(None, actual);
                    o.covered = Some(false);
                    (o, rel_error(None, actual), rel_error(None, actual))
                }
            };
            let target = predictor.priors.profiles.get(&bench);
            let optimus = target.and_then(|p| optimus_remaining_s(pts, p.direction, p.target));
            let peer = r
                .context
                .accelerators
                .and_then(|a| peer_median.get(&(bench.clone(), a)))
                .map(|m| m - elapsed);
            let row = [
                augur,
                trunc,
                ens,
                rel_error(optimus, actual),
                rel_error(peer, actual),
            ];
            for (mi, o) in row.into_iter().enumerate() {
                outcomes[pi][mi].push((bench.clone(), o));
            }
            if let Ok(p) = pred {
                cases.push(TestCase {
                    run_id: r.run_id.clone(),
                    benchmark: bench.clone(),
                    prefix: share,
                    points_given: k,
                    actual_remaining_s: actual,
                    prediction: p,
                });
            }
        }
    }
    let mut benches: Vec<String> = test.iter().map(|r| r.context.benchmark.clone()).collect();
    benches.sort();
    benches.dedup();
    let mut scores = Vec::new();
    for group in std::iter::once("all".to_string()).chain(benches) {
        for (pi, &share) in PREFIXES.iter().enumerate() {
            let mut runs_in = 0;
            let ms = methods
                .iter()
                .enumerate()
                .map(|(mi, &name)| {
                    let os: Vec<Outcome> = outcomes[pi][mi]
                        .iter()
                        .filter(|(b, _)| group == "all" || *b == group)
                        .map(|(_, o)| *o)
                        .collect();
                    runs_in = os.len();
                    let n = os.len().max(1) as f64;
                    let cov: Vec<bool> = os.iter().filter_map(|o| o.covered).collect();
                    let errs: Vec<f64> = os.iter().map(|o| o.err).collect();
                    MethodScore {
                        method: name.to_string(),
                        median_rel_error: median(errs.clone()).unwrap_or(f64::NAN),
                        q25_rel_error: quantile(&errs, 0.25),
                        q75_rel_error: quantile(&errs, 0.75),
                        answered: os.iter().filter(|o| o.answered).count() as f64 / n,
                        coverage: (!cov.is_empty())
                            .then(|| cov.iter().filter(|&&c| c).count() as f64 / cov.len() as f64),
                    }
                })
                .collect();
            scores.push(PrefixScores {
                group: group.clone(),
                prefix: share,
                runs: runs_in,
                methods: ms,
            });
        }
    }
    let targets = predictor
        .benchmarks()
        .map(|(b, p)| (b.to_string(), p.direction, p.target))
        .collect();
    Ok(ConvergenceEvaluation {
        n_train_runs: train.len(),
        n_test_runs: test.len(),
        scores,
        targets,
        train_s,
        predict_us: 1e6 * predict_s / n_pred.max(1) as f64,
        cases,
        test_runs: test,
        predictor: Some(predictor),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_helpers_agree() {
        for p in [0.01, 0.1, 0.5, 0.9, 0.99] {
            assert!((norm_cdf(norm_ppf(p)) - p).abs() < 1e-6, "{p}");
        }
        // truncation far below the mean changes nothing; far above lands just past it
        let m = TimePrior::truncated_median(5.0, 0.5, 1.0);
        assert!((m - 5.0).abs() < 1e-3);
        let m = TimePrior::truncated_median(5.0, 0.5, (8.0f64).exp());
        assert!(m > 8.0 && m < 8.3, "{m}");
    }

    #[test]
    fn prefix_counts_are_proper_prefixes() {
        assert_eq!(prefix_counts(1, 16), Vec::<usize>::new());
        assert_eq!(prefix_counts(2, 16), vec![1]);
        let ks = prefix_counts(100, 16);
        assert_eq!(ks.first(), Some(&1));
        assert_eq!(ks.last(), Some(&99));
        assert!(ks.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(prefix_len(9, 0.25), 3);
        assert_eq!(prefix_len(1, 0.25), 1);
    }
}

// =============================================================================================
// Final-metric extrapolation on full-length curves (Pollux/Sia validation profiles).

/// A full training curve without wall time: (name, progress, metric).
pub type ProgressCurve = (String, Vec<f64>, Vec<f64>);

/// The bundled Pollux/Sia validation curves (`datasets/data/pollux-curves`) with at least
/// 8 points, as `model@batch` with (progress, metric).
pub fn load_bundled_pollux_curves() -> Result<Vec<ProgressCurve>, augur_datasets::DatasetError> {
    let dir = augur_datasets::bundled::bundled_file("pollux-curves")?;
    let (profiles, _) =
        augur_datasets::curves::read_pollux_dir(&dir, &augur_datasets::ReadOptions::default())?;
    Ok(profiles
        .validations
        .into_iter()
        .filter(|v| v.points.len() >= 8)
        .map(|v| {
            let name = format!("{}@{}", v.model, v.global_batch_size);
            let k = v.points.iter().map(|p| p.progress).collect();
            let y = v.points.iter().map(|p| p.metric).collect();
            (name, k, y)
        })
        .collect())
}

/// Median error of each method at one prefix of the full-length curves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalMetricScores {
    pub prefix: f64,
    pub curves: usize,
    /// (method, median |predicted − actual final| / the curve's whole range).
    pub methods: Vec<(String, f64)>,
}

/// Given the first 25/50/75% of each curve's points, predict its last point's metric with
/// each family, the ensemble, and the last observed value (baseline). A family that cannot
/// be fitted to so few points answers with the last observed value. The metric's direction
/// is inferred from the prefix.
pub fn evaluate_final_metric(curves: &[ProgressCurve]) -> Vec<FinalMetricScores> {
    PREFIXES
        .iter()
        .map(|&share| {
            let mut names: Vec<String> = vec!["last observed value (baseline)".into()];
            names.extend(CurveFamily::ALL.iter().map(|f| f.name().to_string()));
            names.push("weighted ensemble".into());
            let mut errs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
            let mut used = 0;
            for (_, k, y) in curves {
                let n = k.len().min(y.len());
                if n < 2 || validate_progress(k, y).is_err() {
                    continue;
                }
                used += 1;
                let m = prefix_len(n, share).min(n - 1);
                let (kp, yp) = (&k[..m], &y[..m]);
                let (k_end, y_end) = (k[n - 1], y[n - 1]);
                let (lo, hi) = y[..n]
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                        (a.min(v), b.max(v))
                    });
                let range = (hi - lo).max(1e-12);
                let dir = Direction::infer(yp);
                let last = yp[m - 1];
                let mut preds = vec![last];
                for &f in &CurveFamily::ALL {
                    preds.push(
                        fit_family(f, kp, yp, dir)
                            .map(|fit| fit.value_at(k_end))
                            .unwrap_or(last),
                    );
                }
                preds.push(
                    CurveEnsemble::fit(kp, yp, dir)
                        .map(|e| e.value_at(k_end))
                        .unwrap_or(last),
                );
                for (e, p) in errs.iter_mut().zip(preds) {
                    e.push((p - y_end).abs() / range);
                }
            }
            FinalMetricScores {
                prefix: share,
                curves: used,
                methods: names
                    .into_iter()
                    .zip(errs)
                    .map(|(n, e)| (n, median(e).unwrap_or(f64::NAN)))
                    .collect(),
            }
        })
        .collect()
}

/// Checks a progress curve: finite values, non-decreasing progress.
fn validate_progress(k: &[f64], y: &[f64]) -> Result<(), ConvergenceError> {
    let points: Vec<MetricPoint> = k
        .iter()
        .zip(y)
        .map(|(&k, &v)| MetricPoint {
            wall_time_s: k,
            epoch: None,
            samples: None,
            value: v,
        })
        .collect();
    validate_points(&points)
}
