//! How fast a data-parallel job runs on `n` workers: a speedup curve fitted on real
//! measurements, so the simulator conserves a job's work when it is rescaled.
//!
//! Two fits on the bundled data, both reproducible with [`fit_bundled`] (the test
//! `fitted_constants_match_the_bundled_data` re-fits and checks the constants below):
//!
//! - **Pollux/Sia step times** (`pollux-curves/*placements.csv`, the original Pollux profiles
//!   of 6 models: bert, cifar10, deepspeech2, imagenet, ncf, yolov3): for each model and
//!   per-GPU batch size, speedup(n) = n · step_time(1) / step_time(n) (weak scaling: the
//!   per-GPU batch is fixed, as when an elastic job adds workers). Fitted with Amdahl's law
//!   `speedup(n) = n / (1 + σ (n − 1))`, least squares in log space per model; the median σ
//!   over models is [`POLLUX_AMDAHL_SERIAL`]. This is the simulator's default model.
//! - **MLPerf Training v1.0** time-to-train vs accelerators, per (benchmark, accelerator model)
//!   with successful runs at ≥ 2 scales: `T(n) ∝ n^−α` by least squares on the per-scale median
//!   time; the median α is [`MLPERF_POWER_ALPHA`]. MLPerf runs also grow the global batch with
//!   the scale (strong scaling at tuned hyper-parameters), so this is kept as a cross-check and
//!   an alternative model ([`ScalingModel::PowerLaw`]).
//!
//! [`reshape`] uses these fits (and Gavel's per-type throughputs, and MLPerf pairs) to say how
//! a job's run time changes under another GPU count or type; [`family`] maps job names to
//! model families and spells GPU types one way.

pub mod family;
pub mod holdout;
pub mod reshape;

use std::collections::BTreeMap;

use augur_datasets::curves::{MlperfRun, RunStatus, StepTimeTable};
use augur_numeric::median;
use serde::Serialize;

use crate::error::SimError;

/// Amdahl serial fraction σ fitted on the Pollux placements profiles (median over 6 models).
pub const POLLUX_AMDAHL_SERIAL: f64 = 0.1254;

/// Power-law exponent α of MLPerf v1.0 time-to-train vs accelerators (median over
/// benchmark × accelerator groups).
pub const MLPERF_POWER_ALPHA: f64 = 0.7836;

/// Speedup of a job on `n` workers relative to 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum ScalingModel {
    /// `n / (1 + serial · (n − 1))`.
    Amdahl { serial: f64 },
    /// `n^alpha`.
    PowerLaw { alpha: f64 },
}

impl Default for ScalingModel {
    fn default() -> Self {
        ScalingModel::Amdahl {
            serial: POLLUX_AMDAHL_SERIAL,
        }
    }
}

impl ScalingModel {
    /// Speedup on `n` workers (1 for `n ≤ 1`).
    pub fn speedup(&self, n: u32) -> f64 {
        if n <= 1 {
            return 1.0;
        }
        let x = f64::from(n);
        match *self {
            ScalingModel::Amdahl { serial } => x / (1.0 + serial * (x - 1.0)),
            ScalingModel::PowerLaw { alpha } => x.powf(alpha),
        }
    }
}

/// Run time on `n` GPUs relative to one under Amdahl's law with serial fraction `serial`,
/// `(1 + serial · (n − 1)) / n` (`1 / n` below one GPU: a share of one).
pub fn amdahl_time(n: f64, serial: f64) -> f64 {
    if n <= 1.0 {
        1.0 / n
    } else {
        (1.0 + serial * (n - 1.0)) / n
    }
}

/// The fit of one group (a model, or a benchmark on one accelerator).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupFit {
    pub group: String,
    /// σ (Amdahl) or α (power law).
    pub param: f64,
    pub points: usize,
    /// Root mean squared error of ln speedup (or ln time) of the fit.
    pub rmse_log: f64,
}

/// A fit over several groups and the pooled (median) parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingFit {
    pub source: String,
    pub groups: Vec<GroupFit>,
    pub pooled: f64,
}

fn amdahl_sse(points: &[(f64, f64)], serial: f64) -> f64 {
    points
        .iter()
        .map(|&(n, s)| {
            let m = n / (1.0 + serial * (n - 1.0));
            (s.ln() - m.ln()).powi(2)
        })
        .sum()
}

/// Least-squares σ in [0, 1] for points `(n, speedup)` (golden-section search).
pub fn fit_amdahl(points: &[(f64, f64)]) -> f64 {
    let (mut a, mut b) = (0.0f64, 1.0f64);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..100 {
        let c = b - g * (b - a);
        let d = a + g * (b - a);
        if amdahl_sse(points, c) < amdahl_sse(points, d) {
            b = d;
        } else {
            a = c;
        }
    }
    (a + b) / 2.0
}

/// Measured speedups `(n, speedup)` of each model in Pollux/Sia placements tables (only the
/// original profiles, `gpu == None`, when there are any): `n · step_time(1) / step_time(n)` at
/// the same per-GPU batch size.
pub fn pollux_speedups(tables: &[StepTimeTable]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let originals: Vec<&StepTimeTable> = tables.iter().filter(|t| t.gpu.is_none()).collect();
    let use_tables: Vec<&StepTimeTable> = if originals.is_empty() {
        tables.iter().collect()
    } else {
        originals
    };
    let mut by_model: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for t in use_tables {
        let mut base: BTreeMap<u32, f64> = BTreeMap::new();
        for r in t
            .rows
            .iter()
            .filter(|r| r.num_replicas == 1 && r.step_time_s > 0.0)
        {
            base.entry(r.local_bsz).or_insert(r.step_time_s);
        }
        let pts = by_model.entry(t.model.clone()).or_default();
        for r in t
            .rows
            .iter()
            .filter(|r| r.num_replicas > 1 && r.step_time_s > 0.0)
        {
            if let Some(s1) = base.get(&r.local_bsz) {
                let n = f64::from(r.num_replicas);
                pts.push((n, n * s1 / r.step_time_s));
            }
        }
    }
    by_model
}

/// Amdahl fit on Pollux/Sia placements tables ([`pollux_speedups`]; models with ≥ 3 points).
pub fn fit_amdahl_pollux(tables: &[StepTimeTable]) -> Option<ScalingFit> {
    let mut groups = Vec::new();
    for (model, pts) in pollux_speedups(tables) {
        if pts.len() < 3 {
            continue;
        }
        let sigma = fit_amdahl(&pts);
        let rmse_log = (amdahl_sse(&pts, sigma) / pts.len() as f64).sqrt();
        groups.push(GroupFit {
            group: model,
            param: sigma,
            points: pts.len(),
            rmse_log,
        });
    }
    let mut params: Vec<f64> = groups.iter().map(|g| g.param).collect();
    Some(ScalingFit {
        source: "pollux placements (weak scaling, Amdahl σ)".into(),
        pooled: median(&mut params)?,
        groups,
    })
}

/// Power-law fit of MLPerf time-to-train vs accelerators.
pub fn fit_power_law_mlperf(runs: &[MlperfRun]) -> Option<ScalingFit> {
    let mut by_group: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for r in runs {
        let (Some(n), Some(d), Some(RunStatus::Success)) =
            (r.num_accelerators(), r.duration_s, r.status)
        else {
            continue;
        };
        if n == 0 || d <= 0.0 {
            continue;
        }
        let key = format!(
            "{} on {}",
            r.benchmark,
            r.accelerator_model.as_deref().unwrap_or("?")
        );
        by_group
            .entry(key)
            .or_default()
            .entry(n)
            .or_default()
            .push(d);
    }
    let mut groups = Vec::new();
    for (group, scales) in by_group {
        if scales.len() < 2 {
            continue;
        }
        let pts: Vec<(f64, f64)> = scales
            .into_iter()
            .filter_map(|(n, mut ds)| Some(((n as f64).ln(), median(&mut ds)?.ln())))
            .collect();
        let m = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / m;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / m;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if sxx <= 0.0 {
            continue;
        }
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = sxy / sxx;
        let rmse_log = (pts
            .iter()
            .map(|p| (p.1 - (my + slope * (p.0 - mx))).powi(2))
            .sum::<f64>()
            / m)
            .sqrt();
        groups.push(GroupFit {
            group,
            param: -slope,
            points: pts.len(),
            rmse_log,
        });
    }
    let mut params: Vec<f64> = groups.iter().map(|g| g.param).collect();
    Some(ScalingFit {
        source: "mlperf v1.0 time-to-train (power law α)".into(),
        pooled: median(&mut params)?,
        groups,
    })
}

/// Both fits on the bundled data (Pollux placements profiles, MLPerf v1.0 runs).
pub fn fit_bundled() -> Result<(ScalingFit, ScalingFit), SimError> {
    use augur_datasets::bundled::{bundled_file, data_dir};
    use augur_datasets::curves::{read_mlperf_runs, read_pollux_dir};
    use augur_datasets::ReadOptions;
    let opts = ReadOptions::default();
    let (profiles, _) = read_pollux_dir(&data_dir()?.join("pollux-curves"), &opts)?;
    let pollux = fit_amdahl_pollux(&profiles.placements)
        .ok_or_else(|| SimError::Config("no Pollux placements to fit".into()))?;
    let (runs, _) = read_mlperf_runs(&bundled_file("mlperf-v1.0/runs.csv.gz")?, &opts)?;
    let mlperf = fit_power_law_mlperf(&runs)
        .ok_or_else(|| SimError::Config("no MLPerf runs to fit".into()))?;
    Ok((pollux, mlperf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_fit_recovers_a_known_serial_fraction() {
        let pts: Vec<(f64, f64)> = [2.0, 4.0, 8.0, 16.0]
            .iter()
            .map(|&n| (n, n / (1.0 + 0.07 * (n - 1.0))))
            .collect();
        assert!((fit_amdahl(&pts) - 0.07).abs() < 1e-6);
        let m = ScalingModel::Amdahl { serial: 0.07 };
        assert_eq!(m.speedup(1), 1.0);
        assert!(m.speedup(8) < 8.0 && m.speedup(8) > m.speedup(4));
    }

    #[test]
    fn fitted_constants_match_the_bundled_data() {
        let (pollux, mlperf) = fit_bundled().unwrap();
        eprintln!("{}", serde_json_like(&pollux));
        eprintln!("{}", serde_json_like(&mlperf));
        assert!(
            (pollux.pooled - POLLUX_AMDAHL_SERIAL).abs() < 5e-4,
            "{}",
            pollux.pooled
        );
        assert!(
            (mlperf.pooled - MLPERF_POWER_ALPHA).abs() < 5e-4,
            "{}",
            mlperf.pooled
        );
    }

    fn serde_json_like(f: &ScalingFit) -> String {
        let mut s = format!("{}: pooled {:.4}\n", f.source, f.pooled);
        for g in &f.groups {
            s.push_str(&format!(
                "  {:<50} {:.4}  n={} rmse_log={:.3}\n",
                g.group, g.param, g.points, g.rmse_log
            ));
        }
        s
    }
}
