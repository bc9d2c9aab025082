//! The empirical-Bayes prior over time-to-train: per benchmark a regression on ln(system
//! size) plus shrunken effects of the system size and the accelerator model, truncated at the
//! elapsed time of a running job.

use std::collections::BTreeMap;

use augur_numeric::median;
use serde::{Deserialize, Serialize};

use super::{ConvergenceRun, JobContext};

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

/// The median of `v`, 0 when empty.
fn median_of(v: &[f64]) -> f64 {
    median(&mut v.to_vec()).unwrap_or(0.0)
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

impl BenchmarkPrior {
    /// The prior of one benchmark's runs (each with a positive time-to-train).
    fn fit(rs: &[&ConvergenceRun]) -> BenchmarkPrior {
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
        let (slope, mean_x) = scale_regression(&xs, &y);
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
        }
    }
}

/// The least-squares slope of `y` (ln time-to-train) on the known `xs` (ln accelerators),
/// clamped to [−1, 0] (time-to-train falls with scale, never faster than linearly; 0 with
/// fewer than 3 known), and the median of the known `xs` (0 when none).
fn scale_regression(xs: &[Option<f64>], y: &[f64]) -> (f64, f64) {
    let known: Vec<(f64, f64)> = xs
        .iter()
        .zip(y)
        .filter_map(|(x, &y)| x.map(|x| (x, y)))
        .collect();
    let kx: Vec<f64> = known.iter().map(|p| p.0).collect();
    let mean_x = if kx.is_empty() { 0.0 } else { median_of(&kx) };
    let slope = if known.len() >= 3 {
        let mx = kx.iter().sum::<f64>() / kx.len() as f64;
        let my = known.iter().map(|p| p.1).sum::<f64>() / known.len() as f64;
        let sxx: f64 = kx.iter().map(|x| (x - mx).powi(2)).sum();
        let sxy: f64 = known.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        if sxx > 1e-9 {
            (sxy / sxx).clamp(-1.0, 0.0)
        } else {
            0.0
        }
    } else {
        0.0
    };
    (slope, mean_x)
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
        let benchmarks = per
            .into_iter()
            .map(|(name, rs)| (name, BenchmarkPrior::fit(&rs)))
            .collect();
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
}
