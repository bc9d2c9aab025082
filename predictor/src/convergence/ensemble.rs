//! Where a fitted curve reaches a target or stops improving, and the weighted ensemble of
//! curve families; Optimus' fit over wall time as a peer.

use serde::{Deserialize, Serialize};

use super::curve::{fit_family, CurveFamily, CurveFit};
use super::{CurvePoint, Direction};
use crate::PredictorError;

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
    ) -> Result<CurveEnsemble, PredictorError> {
        Self::fit_families(&CurveFamily::ALL, progress, values, direction)
    }

    /// [`fit`](Self::fit) restricted to some families.
    pub fn fit_families(
        families: &[CurveFamily],
        progress: &[f64],
        values: &[f64],
        direction: Direction,
    ) -> Result<CurveEnsemble, PredictorError> {
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
            return Err(first_err.unwrap_or(PredictorError::NoMetricPoints));
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
    pub(super) fn plateau_spread(&self) -> (f64, f64) {
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
    points: &[CurvePoint],
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
