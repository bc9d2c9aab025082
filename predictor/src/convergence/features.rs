//! The model's features of a running job's curve prefix, from the priors learned across
//! curves and the curve fits of the prefix.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ensemble::{optimus_remaining_s, Crossing, CurveEnsemble};
use super::prior::{accelerator_class, TimePrior};
use super::profile::{axis_value, BenchmarkProfile};
use super::{ConvergenceRun, CurvePoint, Direction, JobContext};

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
pub(super) struct PrefixAnalysis {
    pub(super) features: Vec<f32>,
    pub(super) elapsed: f64,
    /// Truncated-prior median remaining seconds (None: unknown benchmark).
    pub(super) prior_remaining: Option<f64>,
    pub(super) ensemble: Option<CurveEnsemble>,
}

fn ln_ratio(remaining: f64, elapsed: f64) -> f32 {
    (remaining.max(1.0) / elapsed).ln() as f32
}

/// Everything learned across curves that features need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct CurvePriors {
    pub(super) profiles: BTreeMap<String, BenchmarkProfile>,
    pub(super) time: TimePrior,
    accelerator_models: BTreeMap<String, usize>,
}

impl CurvePriors {
    pub(super) fn fit(
        runs: &[&ConvergenceRun],
        profiles: &BTreeMap<String, BenchmarkProfile>,
    ) -> Self {
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

    /// The features of a curve prefix (`points`: validated, at least one) of a job.
    pub(super) fn analyse(&self, ctx: &JobContext, points: &[CurvePoint]) -> PrefixAnalysis {
        let mut f = vec![f32::NAN; FEATURE_NAMES.len()];
        let last = points[points.len() - 1];
        let elapsed = last.wall_time_s.max(1.0);
        let profile = self.profiles.get(&ctx.benchmark);
        let prior_remaining = self.context_features(ctx, profile, elapsed, &mut f);
        let direction = profile.map_or_else(
            || Direction::infer(&points.iter().map(|p| p.value).collect::<Vec<_>>()),
            |p| p.direction,
        );
        let sign = direction.sign();
        let target = profile.map(|p| p.target);
        if let Some(target) = target {
            target_features(points, target, sign, elapsed, &mut f);
        }
        let t: Vec<f64> = points.iter().map(|p| p.wall_time_s.max(0.0)).collect();
        let v: Vec<f64> = points.iter().map(|p| p.value).collect();
        let ensemble = CurveEnsemble::fit(&t, &v, direction).ok();
        if let Some(ens) = &ensemble {
            ensemble_features(ens, target, points[0].value, elapsed, &mut f);
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

    /// The job's context and the time prior (features 0–7); returns the truncated prior's
    /// median remaining seconds (None for an unknown benchmark).
    fn context_features(
        &self,
        ctx: &JobContext,
        profile: Option<&BenchmarkProfile>,
        elapsed: f64,
        f: &mut [f32],
    ) -> Option<f64> {
        let nan = f32::NAN;
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
        let (mu, sigma) = self.time.log_time(ctx)?;
        f[5] = (mu - elapsed.ln()) as f32;
        f[6] = sigma as f32;
        let m = TimePrior::truncated_median(mu, sigma, elapsed);
        let rem = (m.exp() - elapsed).max(1.0);
        f[7] = ln_ratio(rem, elapsed);
        Some(rem)
    }
}

/// Progress towards a known target and the linear extrapolation of the last few points
/// (features 8–10).
fn target_features(points: &[CurvePoint], target: f64, sign: f64, elapsed: f64, f: &mut [f32]) {
    let last = points[points.len() - 1];
    let first = points[0].value;
    let best = points
        .iter()
        .map(|p| p.value)
        .fold(first, |b, v| if sign * (v - b) < 0.0 { v } else { b });
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

/// What the curve-fit ensemble says (features 11, 12, 17, 18): where it crosses the target
/// and its asymptote's gap to it, and where it stops improving.
fn ensemble_features(
    ens: &CurveEnsemble,
    target: Option<f64>,
    first: f64,
    elapsed: f64,
    f: &mut [f32],
) {
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
        f[18] = (ens.direction.sign() * (ens.asymptote() - target) / span) as f32;
    }
    let p = ens.plateau();
    f[17] = ln_ratio(p - now, elapsed);
}
