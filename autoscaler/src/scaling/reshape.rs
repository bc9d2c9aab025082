//! A job's run time under another shape (GPU count, GPU type), as a ratio to its run time
//! under the shape it asked for, with an 80% interval and what the ratio rests on.
//!
//! **Assumption.** A job does a fixed amount of work (the same epochs or steps) with the same
//! per-GPU batch at any size (weak scaling, as when the same script is launched on more GPUs).
//! Its run time is then inversely proportional to its throughput:
//! `T(to) / T(from) = speedup(from) / speedup(to) × speed(type from) / speed(type to)`.
//!
//! Evidence, best first: the job's own past runs (at both shapes: the ratio of their run
//! times; at ≥ 2 sizes: Amdahl fitted on them); MLPerf Training v1.0 runs of the same
//! benchmark at other sizes (Amdahl fitted on time to train), and of any benchmark on the two
//! accelerators at one size; Gavel's measured throughputs per GPU type (the job's model
//! family when its name names one, else the median over Gavel's job types); Amdahl's law with
//! the serial fraction fitted on the Pollux profiles ([`super::POLLUX_AMDAHL_SERIAL`]) as the
//! default for size. A single past shape says nothing about a ratio (the caller anchors the
//! absolute run time with it).
//!
//! Each source's 80% interval is the 10%–90% range of its held-out residuals
//! ([`Residuals`]), scaled by `|ln(to/from)|` for size; factors combine in quadrature.

use std::collections::BTreeMap;

use augur_datasets::cluster::GavelThroughput;
use augur_datasets::curves::MlperfRun;
use augur_numeric::{median, quantile};
use serde::{Deserialize, Serialize};

use super::family::{accelerator_variant, gavel_family, mlperf_benchmark, normalize_gpu_type};
use super::holdout::{
    fit_amdahl_times, mlperf_residuals, mlperf_setups, size_groups, type_logs, type_pairs, Pair,
    Setup,
};
use super::{amdahl_time, fit_amdahl, pollux_speedups};
use crate::error::SimError;

/// A job's resource shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// GPUs (a whole job; fractions below 1 are read as a share of one GPU).
    pub gpus: f64,
    /// GPU type as the cluster names it (`None`: unknown or the cluster's only type).
    pub gpu_type: Option<String>,
}

/// A past run of the same job (same user and job name) the caller knows of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PastRun {
    pub shape: Shape,
    pub runtime_s: f64,
}

/// What a ratio rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BasisSource {
    /// Same shape: ratio 1.
    Unchanged,
    /// The job's own past runs at other shapes.
    OwnHistory,
    /// MLPerf Training v1.0 runs of the same benchmark (or, for a type change, of other
    /// benchmarks on the same two accelerators).
    Mlperf,
    /// Gavel's per-GPU-type throughputs.
    Gavel,
    /// Amdahl's law with the serial fraction fitted on the Pollux profiles.
    PolluxAmdahl,
    /// Nothing measured links the two GPU types: assumed equally fast, with the spread of
    /// measured type ratios as the interval.
    Unmeasured,
}

/// What a ratio rests on, for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Basis {
    pub source: BasisSource,
    /// E.g. "MLPerf v1.0 bert: Amdahl serial fraction 0.0012 fitted on 5 submitter groups".
    pub detail: String,
}

/// Run time under `to` / run time under `from`, with an 80% interval of that ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRatio {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub basis: Basis,
}

/// How finely GPU types are told apart: by family (`a100`; what clusters get) or by variant
/// (`a100-pcie` vs `a100-sxm`; what the MLPerf holdout scores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypeGrain {
    Family,
    Variant,
}

impl TypeGrain {
    /// The key of a raw type name at this grain.
    pub fn key(self, raw: &str) -> String {
        match self {
            TypeGrain::Family => normalize_gpu_type(raw),
            TypeGrain::Variant => accelerator_variant(raw),
        }
    }
}

/// Held-out residuals (actual − predicted, ln) of each source, from which its 80% interval is
/// taken (10% and 90% quantiles). Size residuals are per unit of `|ln(to gpus / from gpus)|`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    /// The job's own sizes: MLPerf submitters' other sizes of a benchmark (≥ 3 sizes).
    pub own: Vec<f64>,
    /// MLPerf same benchmark, leave-one-submitter-out.
    pub mlperf_size: Vec<f64>,
    /// MLPerf type pairs, leave-one-benchmark-out.
    pub mlperf_type: Vec<f64>,
    /// Pollux Amdahl, leave-one-model-out on the Pollux profiles.
    pub pollux: Vec<f64>,
    /// Gavel, one model family's type ratios from the other families' median.
    pub gavel: Vec<f64>,
    /// MLPerf run-to-run noise: `ln(run / its system's median)`.
    pub run_noise: Vec<f64>,
    /// Every measured type ratio (Gavel job types, MLPerf type pairs), both directions.
    pub type_spread: Vec<f64>,
}

/// One factor of a ratio in log space: `ln ratio`, the 10% and 90% offsets (≤ 0, ≥ 0).
#[derive(Debug, Clone)]
struct Factor {
    log: f64,
    lo: f64,
    hi: f64,
    source: BasisSource,
    detail: String,
}

/// Gavel's isolated throughputs at scale factor 1: (job type, family, type → steps/s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct GavelSpeeds {
    job_types: Vec<(String, String, BTreeMap<String, f64>)>,
}

/// Built once (from the bundled data; [`Reshaper::bundled`]), cheap to query, `Send + Sync`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reshaper {
    grain: TypeGrain,
    /// Pollux Amdahl serial fraction and the number of models behind it.
    pollux_serial: f64,
    pollux_models: usize,
    gavel: GavelSpeeds,
    /// MLPerf setups (variant grain) the size and type evidence comes from.
    mlperf: Vec<Setup>,
    /// Benchmark → (Amdahl serial fraction on time to train, submitter groups).
    mlperf_serial: BTreeMap<String, (f64, usize)>,
    /// Type pairs at `grain`.
    mlperf_types: Vec<Pair>,
    residuals: Residuals,
}

/// A usable GPU count (finite, positive, at most a million); anything else reads as 1.
fn clean_gpus(n: f64) -> f64 {
    if n.is_finite() && n > 0.0 {
        n.min(1e6)
    } else {
        1.0
    }
}

/// The family of a Gavel job type: its name before ` (batch size …)`.
fn gavel_type_family(job_type: &str) -> &str {
    job_type.split(" (").next().unwrap_or(job_type).trim()
}

/// The 80% band of held-out residuals `res` (of `fallback` when `res` has fewer than 3): the
/// split-conformal quantiles with the finite-sample correction (levels `⌈0.9 (m + 1)⌉ / m` and
/// one minus it, the rule of the predictor's conformal calibration), widened to hold 0 so the
/// point estimate is inside its interval.
fn band(res: &[f64], fallback: &[f64]) -> (f64, f64) {
    let r = if res.len() >= 3 { res } else { fallback };
    if r.is_empty() {
        return (0.0, 0.0);
    }
    let m = r.len() as f64;
    let q = ((0.9 * (m + 1.0)).ceil() / m).clamp(0.0, 1.0);
    let (lo, hi) = (quantile(r, 1.0 - q), quantile(r, q));
    (lo.min(0.0), hi.max(0.0))
}

impl GavelSpeeds {
    fn from_isolated(isolated: &[GavelThroughput]) -> GavelSpeeds {
        let mut by_job: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for t in isolated
            .iter()
            .filter(|t| t.scale_factor == 1 && t.steps_per_s.is_finite() && t.steps_per_s > 0.0)
        {
            // `v100` and `v100_unconsolidated` are the same GPU: keep the first measurement.
            by_job
                .entry(t.job_type.clone())
                .or_default()
                .entry(normalize_gpu_type(&t.gpu))
                .or_insert(t.steps_per_s);
        }
        GavelSpeeds {
            job_types: by_job
                .into_iter()
                .map(|(job, speeds)| {
                    let fam = gavel_type_family(&job).to_string();
                    (job, fam, speeds)
                })
                .collect(),
        }
    }

    fn types(&self) -> Vec<String> {
        self.job_types
            .iter()
            .flat_map(|(_, _, s)| s.keys().cloned())
            .collect()
    }

    /// `ln(T(to)/T(from)) = ln(speed(from)/speed(to))` of each job type measured on both whose
    /// family `keep` accepts.
    fn logs(&self, keep: impl Fn(&str) -> bool, from: &str, to: &str) -> Vec<f64> {
        self.job_types
            .iter()
            .filter(|(_, f, _)| keep(f))
            .filter_map(|(_, _, s)| Some((s.get(from)? / s.get(to)?).ln()))
            .filter(|x| x.is_finite())
            .collect()
    }

    /// Each family's per-type log ratios predicted by the other families' median:
    /// (predicted − actual, 0 − actual) per job type and type pair.
    fn family_holdout(&self) -> (Vec<f64>, Vec<f64>) {
        let mut types = self.types();
        types.sort();
        types.dedup();
        let mut families: Vec<&str> = self.job_types.iter().map(|(_, f, _)| f.as_str()).collect();
        families.sort();
        families.dedup();
        let (mut model, mut none) = (Vec::new(), Vec::new());
        for (i, a) in types.iter().enumerate() {
            for b in types.iter().skip(i + 1) {
                for fam in &families {
                    let others = self.logs(|f| f != *fam, a, b);
                    if others.is_empty() {
                        continue;
                    }
                    let pred = quantile(&others, 0.5);
                    for y in self.logs(|f| f == *fam, a, b) {
                        model.push(pred - y);
                        none.push(-y);
                    }
                }
            }
        }
        (model, none)
    }
}

/// Pollux leave-one-model-out residuals per unit of ln n: each model's measured speedups
/// against Amdahl with the other models' median serial fraction.
fn pollux_residuals(by_model: &BTreeMap<String, Vec<(f64, f64)>>) -> Vec<f64> {
    let fits: BTreeMap<&str, f64> = by_model
        .iter()
        .filter(|(_, p)| p.len() >= 3)
        .map(|(m, p)| (m.as_str(), fit_amdahl(p)))
        .collect();
    let mut out = Vec::new();
    for (model, pts) in by_model
        .iter()
        .filter(|(m, _)| fits.contains_key(m.as_str()))
    {
        let mut others: Vec<f64> = fits
            .iter()
            .filter(|(m, _)| **m != model.as_str())
            .map(|(_, s)| *s)
            .collect();
        let Some(serial) = median(&mut others) else {
            continue;
        };
        for &(n, s) in pts.iter().filter(|p| p.0 > 1.0 && p.1 > 0.0) {
            out.push(((1.0 / s).ln() - amdahl_time(n, serial).ln()) / n.ln());
        }
    }
    out
}

impl Reshaper {
    /// From the bundled Pollux profiles, Gavel throughputs and MLPerf v1.0 runs; the intervals
    /// come from each source's held-out residuals ([`super::holdout`]).
    pub fn bundled() -> Result<Reshaper, SimError> {
        use augur_datasets::bundled::{bundled_file, data_dir};
        use augur_datasets::cluster::read_gavel_throughputs;
        use augur_datasets::curves::{read_mlperf_runs, read_pollux_dir};
        use augur_datasets::ReadOptions;
        let opts = ReadOptions::default();
        let (profiles, _) = read_pollux_dir(&data_dir()?.join("pollux-curves"), &opts)?;
        let (gavel, _) = read_gavel_throughputs(
            &bundled_file("gavel-throughputs/scheduler__simulation_throughputs.json.gz")?,
            &opts,
        )?;
        let (runs, _) = read_mlperf_runs(&bundled_file("mlperf-v1.0/runs.csv.gz")?, &opts)?;
        Reshaper::from_data(
            &pollux_speedups(&profiles.placements),
            &gavel.isolated,
            &runs,
        )
    }

    /// From Pollux speedups by model, Gavel isolated throughputs and MLPerf runs.
    pub fn from_data(
        pollux: &BTreeMap<String, Vec<(f64, f64)>>,
        gavel: &[GavelThroughput],
        runs: &[MlperfRun],
    ) -> Result<Reshaper, SimError> {
        let mut sigmas: Vec<f64> = pollux
            .values()
            .filter(|p| p.len() >= 3)
            .map(|p| fit_amdahl(p))
            .collect();
        let pollux_models = sigmas.len();
        let pollux_serial = median(&mut sigmas)
            .ok_or_else(|| SimError::Config("no Pollux placements to fit".into()))?;
        let gavel = GavelSpeeds::from_isolated(gavel);
        let (setups, run_noise) = mlperf_setups(runs);
        let grain = TypeGrain::Family;
        let tagged = mlperf_residuals(&setups, grain);
        let (gavel_model, _) = gavel.family_holdout();
        let mut type_spread: Vec<f64> = Vec::new();
        let mut types = gavel.types();
        types.sort();
        types.dedup();
        for (i, a) in types.iter().enumerate() {
            for b in types.iter().skip(i + 1) {
                type_spread.extend(gavel.logs(|_| true, a, b));
            }
        }
        type_spread.extend(type_pairs(&setups, grain).iter().map(Pair::actual_log));
        let mirrored: Vec<f64> = type_spread.iter().map(|x| -x).collect();
        type_spread.extend(mirrored);
        let residuals = Residuals {
            own: tagged.own.into_iter().map(|(_, r)| r).collect(),
            mlperf_size: tagged.mlperf_size.into_iter().map(|(_, r)| r).collect(),
            mlperf_type: tagged.mlperf_type.into_iter().map(|(_, r)| r).collect(),
            pollux: pollux_residuals(pollux),
            gavel: gavel_model.iter().map(|e| -e).collect(),
            run_noise,
            type_spread,
        };
        let base = Reshaper {
            grain,
            pollux_serial,
            pollux_models,
            gavel,
            mlperf: Vec::new(),
            mlperf_serial: BTreeMap::new(),
            mlperf_types: Vec::new(),
            residuals: residuals.clone(),
        };
        Ok(base.with_mlperf(setups, grain, residuals))
    }

    /// The same Pollux and Gavel evidence with other MLPerf setups, type grain and residuals
    /// (the holdout builds one per held-out pair).
    pub fn with_mlperf(
        &self,
        setups: Vec<Setup>,
        grain: TypeGrain,
        residuals: Residuals,
    ) -> Reshaper {
        let mut benchmarks: Vec<&str> = setups.iter().map(|s| s.benchmark.as_str()).collect();
        benchmarks.sort();
        benchmarks.dedup();
        let mlperf_serial = benchmarks
            .iter()
            .filter_map(|b| {
                let groups = size_groups(&setups, |s| s.benchmark == *b);
                let serial = fit_amdahl_times(&groups)?;
                Some((b.to_string(), (serial, groups.len())))
            })
            .collect();
        Reshaper {
            grain,
            pollux_serial: self.pollux_serial,
            pollux_models: self.pollux_models,
            gavel: self.gavel.clone(),
            mlperf_types: type_pairs(&setups, grain),
            mlperf_serial,
            mlperf: setups,
            residuals,
        }
    }

    /// The residuals its intervals come from.
    pub fn residuals(&self) -> &Residuals {
        &self.residuals
    }

    /// Benchmark → (Amdahl serial fraction fitted on MLPerf time to train, submitter groups).
    pub fn mlperf_serials(&self) -> &BTreeMap<String, (f64, usize)> {
        &self.mlperf_serial
    }

    /// The Pollux Amdahl serial fraction (the default size law).
    pub fn pollux_serial(&self) -> f64 {
        self.pollux_serial
    }

    /// Gavel leave-one-family-out errors (ln predicted − ln actual) of the other families'
    /// median and of "no change".
    pub fn gavel_family_holdout(&self) -> (Vec<f64>, Vec<f64>) {
        self.gavel.family_holdout()
    }

    /// The GPU types it knows speeds for (lower-case family names: "k80", "v100", "a100", …).
    /// Gavel's types are linked to each other, MLPerf's accelerators to each other; a ratio
    /// between the two sets is [`BasisSource::Unmeasured`].
    pub fn known_types(&self) -> Vec<String> {
        let mut v = self.gavel.types();
        v.extend(
            self.mlperf
                .iter()
                .map(|s| normalize_gpu_type(&s.accelerator)),
        );
        v.sort();
        v.dedup();
        v
    }

    /// Run time under `to` / run time under `from` for the job named `job_name`, using the
    /// job's own past runs `own` where they inform it. Never panics; the ratio and its
    /// interval are finite and positive; `from == to` gives 1 with basis
    /// [`BasisSource::Unchanged`].
    pub fn ratio(
        &self,
        job_name: Option<&str>,
        from: &Shape,
        to: &Shape,
        own: &[PastRun],
    ) -> RuntimeRatio {
        let (n_from, n_to) = (clean_gpus(from.gpus), clean_gpus(to.gpus));
        let key = |t: &Option<String>| -> Option<String> {
            t.as_deref()
                .map(|x| self.grain.key(x))
                .filter(|s| !s.is_empty())
        };
        let (t_from, t_to) = (key(&from.gpu_type), key(&to.gpu_type));
        let size_changed = (n_from - n_to).abs() > 1e-9;
        let type_change = match (&t_from, &t_to) {
            (Some(a), Some(b)) if a != b => Some((a.as_str(), b.as_str())),
            _ => None,
        };
        if !size_changed && type_change.is_none() {
            return combine(Vec::new());
        }
        if let Some(f) = self.own_direct(own, (n_from, &t_from), (n_to, &t_to)) {
            return combine(vec![f]);
        }
        let bench = job_name.and_then(mlperf_benchmark);
        let mut factors = Vec::new();
        if size_changed {
            let f = self
                .own_size(own, n_from, n_to)
                .or_else(|| self.mlperf_size(bench, n_from, n_to))
                .unwrap_or_else(|| self.pollux_size(n_from, n_to));
            factors.push(f);
        }
        if let Some((a, b)) = type_change {
            let f = self
                .mlperf_type(bench, a, b)
                .or_else(|| self.gavel_type(job_name.and_then(gavel_family), a, b))
                .unwrap_or_else(|| self.unmeasured_type(a, b));
            factors.push(f);
        }
        combine(factors)
    }

    /// The job ran at both shapes: the ratio of its median run times there.
    fn own_direct(
        &self,
        own: &[PastRun],
        from: (f64, &Option<String>),
        to: (f64, &Option<String>),
    ) -> Option<Factor> {
        let at = |(n, t): (f64, &Option<String>)| -> Vec<f64> {
            own.iter()
                .filter(|r| r.runtime_s.is_finite() && r.runtime_s > 0.0)
                .filter(|r| (clean_gpus(r.shape.gpus) - n).abs() < 1e-9)
                .filter(|r| {
                    let k = r.shape.gpu_type.as_deref().map(|x| self.grain.key(x));
                    t.is_none() || k.as_ref() == t.as_ref()
                })
                .map(|r| r.runtime_s)
                .collect()
        };
        let (mut a, mut b) = (at(from), at(to));
        let (ka, kb) = (a.len(), b.len());
        let log = (median(&mut b)? / median(&mut a)?).ln();
        let (lo, hi) = band(&self.residuals.run_noise, &[]);
        let w = std::f64::consts::SQRT_2;
        Some(Factor {
            log,
            lo: lo * w,
            hi: hi * w,
            source: BasisSource::OwnHistory,
            detail: format!("the job's own runs at both shapes ({ka} and {kb} runs)"),
        })
    }

    /// Amdahl fitted on the job's own runs at ≥ 2 sizes (each GPU type its own scale).
    fn own_size(&self, own: &[PastRun], n_from: f64, n_to: f64) -> Option<Factor> {
        let mut by_type: BTreeMap<Option<String>, Vec<(f64, f64)>> = BTreeMap::new();
        for r in own
            .iter()
            .filter(|r| r.runtime_s.is_finite() && r.runtime_s > 0.0)
        {
            let k = r.shape.gpu_type.as_deref().map(|x| self.grain.key(x));
            by_type
                .entry(k)
                .or_default()
                .push((clean_gpus(r.shape.gpus), r.runtime_s));
        }
        let groups: Vec<Vec<(f64, f64)>> = by_type.into_values().collect();
        let serial = fit_amdahl_times(&groups)?;
        let points: usize = groups.iter().map(Vec::len).sum();
        let scale = (n_to / n_from).ln().abs();
        let (lo, hi) = band(&self.residuals.own, &self.residuals.mlperf_size);
        Some(Factor {
            log: (amdahl_time(n_to, serial) / amdahl_time(n_from, serial)).ln(),
            lo: lo * scale,
            hi: hi * scale,
            source: BasisSource::OwnHistory,
            detail: format!(
                "Amdahl fitted on the job's own {points} runs, serial fraction {serial:.4}"
            ),
        })
    }

    fn mlperf_size(&self, bench: Option<&str>, n_from: f64, n_to: f64) -> Option<Factor> {
        let b = bench?;
        let &(serial, groups) = self.mlperf_serial.get(b)?;
        let scale = (n_to / n_from).ln().abs();
        let (lo, hi) = band(&self.residuals.mlperf_size, &self.residuals.pollux);
        Some(Factor {
            log: (amdahl_time(n_to, serial) / amdahl_time(n_from, serial)).ln(),
            lo: lo * scale,
            hi: hi * scale,
            source: BasisSource::Mlperf,
            detail: format!(
                "MLPerf v1.0 {b}: Amdahl serial fraction {serial:.4} fitted on time to train of {groups} submitter group(s)"
            ),
        })
    }

    fn pollux_size(&self, n_from: f64, n_to: f64) -> Factor {
        let serial = self.pollux_serial;
        let scale = (n_to / n_from).ln().abs();
        let (lo, hi) = band(&self.residuals.pollux, &[]);
        Factor {
            log: (amdahl_time(n_to, serial) / amdahl_time(n_from, serial)).ln(),
            lo: lo * scale,
            hi: hi * scale,
            source: BasisSource::PolluxAmdahl,
            detail: format!(
                "Amdahl's law, serial fraction {serial:.3} (median of {} Pollux models)",
                self.pollux_models
            ),
        }
    }

    /// MLPerf runs on both accelerators at the same size: the benchmark's own pairs when it
    /// has any, else the median over benchmarks.
    fn mlperf_type(&self, bench: Option<&str>, from: &str, to: &str) -> Option<Factor> {
        let all = type_logs(&self.mlperf_types, from, to, "");
        let own: Vec<f64> = match bench {
            Some(b) => {
                let mine: Vec<Pair> = self
                    .mlperf_types
                    .iter()
                    .filter(|p| p.benchmark == b)
                    .cloned()
                    .collect();
                type_logs(&mine, from, to, "")
            }
            None => Vec::new(),
        };
        let (logs, what) = if own.is_empty() {
            (all, "median over benchmarks".to_string())
        } else {
            (own, bench.unwrap_or("").to_string())
        };
        if logs.is_empty() {
            return None;
        }
        let (lo, hi) = band(&self.residuals.mlperf_type, &self.residuals.type_spread);
        Some(Factor {
            log: quantile(&logs, 0.5),
            lo,
            hi,
            source: BasisSource::Mlperf,
            detail: format!(
                "MLPerf v1.0 {from}→{to} at equal size, {what} ({} pair(s))",
                logs.len()
            ),
        })
    }

    fn gavel_type(&self, family: Option<&str>, from: &str, to: &str) -> Option<Factor> {
        if let Some(f) = family {
            let logs = self.gavel.logs(|x| x == f, from, to);
            if !logs.is_empty() {
                let log = quantile(&logs, 0.5);
                let spread: Vec<f64> = logs.iter().map(|x| x - log).collect();
                let (lo, hi) = band(&spread, &self.residuals.gavel);
                return Some(Factor {
                    log,
                    lo,
                    hi,
                    source: BasisSource::Gavel,
                    detail: format!(
                        "Gavel {from}→{to} throughput, {f} ({} batch sizes)",
                        logs.len()
                    ),
                });
            }
        }
        let logs = self.gavel.logs(|_| true, from, to);
        if logs.is_empty() {
            return None;
        }
        let (lo, hi) = band(&self.residuals.gavel, &self.residuals.type_spread);
        Some(Factor {
            log: quantile(&logs, 0.5),
            lo,
            hi,
            source: BasisSource::Gavel,
            detail: format!(
                "Gavel {from}→{to} throughput, median of {} job types",
                logs.len()
            ),
        })
    }

    fn unmeasured_type(&self, from: &str, to: &str) -> Factor {
        let (lo, hi) = band(&self.residuals.type_spread, &[]);
        Factor {
            log: 0.0,
            lo,
            hi,
            source: BasisSource::Unmeasured,
            detail: format!(
                "no measured speed links {from} and {to}: assumed equally fast (interval: the spread of measured type ratios)"
            ),
        }
    }
}

/// Multiplies the factors (adds logs; interval offsets add in quadrature, as independent
/// errors). No factor: unchanged.
fn combine(factors: Vec<Factor>) -> RuntimeRatio {
    if factors.is_empty() {
        return RuntimeRatio {
            ratio: 1.0,
            low: 1.0,
            high: 1.0,
            basis: Basis {
                source: BasisSource::Unchanged,
                detail: "same shape".into(),
            },
        };
    }
    let log: f64 = factors.iter().map(|f| f.log).sum();
    let lo = -factors.iter().map(|f| f.lo * f.lo).sum::<f64>().sqrt();
    let hi = factors.iter().map(|f| f.hi * f.hi).sum::<f64>().sqrt();
    // The basis named is the least certain factor's; the detail names every factor.
    let source = factors
        .iter()
        .max_by(|a, b| (a.hi - a.lo).total_cmp(&(b.hi - b.lo)))
        .map(|f| f.source)
        .unwrap_or(BasisSource::Unchanged);
    let detail = factors
        .iter()
        .map(|f| f.detail.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let bound = |x: f64| x.clamp(-30.0, 30.0).exp();
    let ratio = bound(log);
    RuntimeRatio {
        ratio,
        low: bound(log + lo).min(ratio),
        high: bound(log + hi).max(ratio),
        basis: Basis { source, detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(gpus: f64, t: Option<&str>) -> Shape {
        Shape {
            gpus,
            gpu_type: t.map(str::to_string),
        }
    }

    #[test]
    fn same_shape_is_unchanged_and_more_gpus_run_shorter() {
        let r = Reshaper::bundled().unwrap();
        let same = r.ratio(
            None,
            &shape(4.0, Some("V100")),
            &shape(4.0, Some("v100")),
            &[],
        );
        assert_eq!(same.ratio, 1.0);
        assert_eq!(same.basis.source, BasisSource::Unchanged);
        let up = r.ratio(None, &shape(1.0, None), &shape(8.0, None), &[]);
        assert_eq!(up.basis.source, BasisSource::PolluxAmdahl);
        assert!(up.ratio > 1.0 / 8.0 && up.ratio < 1.0, "{up:?}");
        assert!(up.low <= up.ratio && up.ratio <= up.high);
        let down = r.ratio(None, &shape(8.0, None), &shape(1.0, None), &[]);
        assert!((up.ratio * down.ratio - 1.0).abs() < 1e-9);
    }

    #[test]
    fn faster_gpu_type_runs_shorter_by_gavel() {
        let r = Reshaper::bundled().unwrap();
        assert!(r.known_types().contains(&"k80".to_string()));
        let x = r.ratio(
            Some("resnet50"),
            &shape(1.0, Some("Tesla K80")),
            &shape(1.0, Some("NVIDIA V100-SXM2-32GB")),
            &[],
        );
        assert_eq!(x.basis.source, BasisSource::Gavel);
        assert!(x.ratio < 0.5, "{x:?}");
        assert!(x.basis.detail.contains("ResNet-50"), "{}", x.basis.detail);
        let unknown = r.ratio(
            None,
            &shape(1.0, Some("k80")),
            &shape(1.0, Some("h100")),
            &[],
        );
        assert_eq!(unknown.basis.source, BasisSource::Unmeasured);
    }

    #[test]
    fn evidence_order_own_runs_then_mlperf_then_pollux() {
        let r = Reshaper::bundled().unwrap();
        let (a8, a64) = (shape(8.0, Some("A100")), shape(64.0, Some("a100")));
        let bert = r.ratio(Some("bert-large-pretrain"), &a8, &a64, &[]);
        assert_eq!(bert.basis.source, BasisSource::Mlperf, "{bert:?}");
        // MLPerf's bert scales far better than the Pollux default.
        let plain = r.ratio(Some("job-42"), &a8, &a64, &[]);
        assert_eq!(plain.basis.source, BasisSource::PolluxAmdahl);
        assert!(bert.ratio < plain.ratio, "{bert:?} {plain:?}");
        let run = |gpus: f64, runtime_s: f64| PastRun {
            shape: shape(gpus, Some("NVIDIA A100-SXM4-80GB")),
            runtime_s,
        };
        // Two past sizes: Amdahl fitted on them (here: perfectly linear).
        let own = r.ratio(Some("bert"), &a8, &a64, &[run(2.0, 400.0), run(4.0, 200.0)]);
        assert_eq!(own.basis.source, BasisSource::OwnHistory);
        assert!((own.ratio - 0.125).abs() < 0.01, "{own:?}");
        // Runs at both shapes: their ratio.
        let both = r.ratio(None, &a8, &a64, &[run(8.0, 1000.0), run(64.0, 300.0)]);
        assert_eq!(both.basis.source, BasisSource::OwnHistory);
        assert!((both.ratio - 0.3).abs() < 1e-9, "{both:?}");
        assert!(both.low < 0.3 && both.high > 0.3);
        // Size and type together: factors multiply, the detail names both.
        let x = r.ratio(
            Some("resnet50"),
            &shape(1.0, Some("k80")),
            &shape(4.0, Some("v100")),
            &[],
        );
        assert!(x.basis.detail.contains("Gavel") && x.basis.detail.contains("MLPerf"));
        assert!(x.ratio < 0.25, "{x:?}");
    }

    #[test]
    fn absurd_input_still_gives_a_finite_positive_ratio() {
        let r = Reshaper::bundled().unwrap();
        for (a, b) in [
            (f64::NAN, 4.0),
            (0.0, 1e12),
            (-3.0, f64::INFINITY),
            (1e6, 0.5),
        ] {
            let x = r.ratio(Some(""), &shape(a, Some("")), &shape(b, None), &[]);
            for v in [x.ratio, x.low, x.high] {
                assert!(v.is_finite() && v > 0.0, "{a} {b} {x:?}");
            }
        }
    }
}
