//! The fitted convergence predictor and its prediction for a running job.

use augur_models::gbdt::GbdtModel;
use augur_models::Predict;
use serde::{Deserialize, Serialize};

use super::ensemble::CurveEnsemble;
use super::features::{CurvePriors, PrefixAnalysis, FEATURE_NAMES};
use super::prior::TimePrior;
use super::profile::BenchmarkProfile;
use super::{
    validate_points, ConvergenceRun, ConvergenceTrainer, CurvePoint, Direction, JobContext,
};
use crate::calibration::binned_conformal::BinnedConformal;
use crate::PredictorError;

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
    pub(super) priors: CurvePriors,
    pub(super) median: GbdtModel,
    pub(super) lower: GbdtModel,
    pub(super) upper: GbdtModel,
    /// Conformal widening of the quantile band, in ln units, per bin of the predicted
    /// ln(remaining / elapsed) (late in a run the band needs more widening than early).
    #[serde(flatten)]
    pub(super) interval: BinnedConformal,
    /// [`CONVERGENCE_FEATURE_VERSION`] at training (checked by the registry on load).
    pub feature_version: u32,
    /// Training runs.
    pub n_train_runs: usize,
}

impl ConvergencePredictor {
    /// Trains on finished runs: [`ConvergenceTrainer::train`].
    pub fn train(
        runs: &[ConvergenceRun],
        trainer: &ConvergenceTrainer,
    ) -> Result<ConvergencePredictor, PredictorError> {
        trainer.train(runs)
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
        points: &[CurvePoint],
    ) -> Result<ConvergencePrediction, PredictorError> {
        validate_points(points)?;
        let a = self.priors.analyse(ctx, points);
        let last = points[points.len() - 1];
        let profile = self.priors.profiles.get(&ctx.benchmark);
        let epoch_rate = epoch_rate(points);
        match profile {
            Some(profile) => Ok(self.predict_target(profile, a, last, epoch_rate)),
            None => {
                // unknown benchmark: where the curve stops improving
                let ens = a.ensemble.ok_or_else(|| {
                    PredictorError::NoConvergenceEvidence(format!(
                        "benchmark `{}` is not among the {} the predictor was trained on, and {} point(s) are too few for a curve fit (need 3)",
                        ctx.benchmark,
                        self.priors.profiles.len(),
                        points.len()
                    ))
                })?;
                Ok(predict_plateau(ens, last, epoch_rate))
            }
        }
    }

    /// A known benchmark: the models' time to its quality target, with the conformalised
    /// band.
    fn predict_target(
        &self,
        profile: &BenchmarkProfile,
        a: PrefixAnalysis,
        last: CurvePoint,
        epoch_rate: Option<(f64, f64)>,
    ) -> ConvergencePrediction {
        let x = &a.features;
        let base = base_margin(x);
        let mid = base + self.median.predict_row(x);
        let margin = self.interval.margin(mid);
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
        ConvergencePrediction {
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
        }
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

/// An unknown benchmark: where the curve-fit ensemble stops improving, the members' spread
/// as the interval.
fn predict_plateau(
    ens: CurveEnsemble,
    last: CurvePoint,
    epoch_rate: Option<(f64, f64)>,
) -> ConvergencePrediction {
    let now = ens.last_progress.max(1e-9);
    let p = ens.plateau();
    let (p_lo, p_hi) = ens.plateau_spread();
    let remaining = (p - now).max(0.0);
    let (lo, hi) = ((p_lo.min(p) - now).max(0.0), (p_hi.max(p) - now).max(0.0));
    let fm = ens.value_at(p);
    let (f1, f2) = (ens.value_at(p_lo.min(p)), ens.value_at(p_hi.max(p)));
    ConvergencePrediction {
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
    }
}

/// What the trees correct: the truncated prior's ln(remaining / elapsed), else the
/// epochs-to-target prior's, else 0 (the trees predict the rest).
pub(super) fn base_margin(features: &[f32]) -> f64 {
    [7usize, 15]
        .iter()
        .filter_map(|&i| features.get(i).copied())
        .find(|v| v.is_finite())
        .map_or(0.0, f64::from)
}

/// The last epoch and epochs per second, when epochs grow over the points.
fn epoch_rate(points: &[CurvePoint]) -> Option<(f64, f64)> {
    let first = points.first()?;
    let last = points.last()?;
    let (e0, e1) = (first.epoch?, last.epoch?);
    let dt = last.wall_time_s - first.wall_time_s;
    (e1 > e0 && dt > 0.0).then(|| (e1, (e1 - e0) / dt))
}
