//! The measured error of [`Reshaper`] on real pairs it never saw: MLPerf Training v1.0 runs
//! of the same benchmark at two sizes (same submitter and accelerator) or on two accelerator
//! models at the same size, the target being the ratio of their times to train; and Gavel's
//! per-type throughputs of one model family predicted from the others.
//!
//! Hold-out: a size pair's prediction is made by a [`Reshaper`] that has not seen its
//! submitter's runs of its benchmark (leave-one-submitter-out); the job's "own history" is
//! that submitter's runs of the benchmark at sizes other than the target size. A type pair's
//! prediction comes from the other benchmarks (leave-one-benchmark-out). The 80% interval of
//! each held-out prediction is built from the held-out residuals of the *other* benchmarks'
//! pairs, so its coverage is measured, not assumed.

use std::collections::{BTreeMap, BTreeSet};

use augur_datasets::curves::{MlperfRun, RunStatus};
use augur_numeric::{median, quantile};
use serde::Serialize;

use super::amdahl_time;
use super::family::accelerator_variant;
use super::reshape::{BasisSource, PastRun, Reshaper, Residuals, Shape, TypeGrain};

/// One MLPerf setup: a benchmark run by one submitter on `gpus` accelerators of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Setup {
    pub benchmark: String,
    pub submitter: String,
    /// Accelerator ([`accelerator_variant`]: `a100-pcie`, `a100-sxm`, `tpu`, …).
    pub accelerator: String,
    pub gpus: f64,
    /// Median over the submitter's systems of each system's median successful time to train.
    pub time_s: f64,
    /// Successful runs behind it.
    pub runs: usize,
}

/// MLPerf setups from runs (successful runs with a duration and ≥ 1 accelerator), the
/// accelerator named at the variant grain ([`accelerator_variant`]). Also returns the run-to-run noise: `ln(run / its system's
/// median)` for systems with ≥ 3 successful runs.
pub fn mlperf_setups(runs: &[MlperfRun]) -> (Vec<Setup>, Vec<f64>) {
    // (benchmark, submitter, accelerator, gpus) → system → times
    type Key = (String, String, String, u64);
    let mut by: BTreeMap<Key, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in runs {
        let (Some(n), Some(d), Some(RunStatus::Success), Some(acc)) = (
            r.num_accelerators(),
            r.duration_s,
            r.status,
            r.accelerator_model.as_deref(),
        ) else {
            continue;
        };
        let acc = accelerator_variant(acc);
        if n == 0 || d.is_nan() || d <= 0.0 || acc.is_empty() {
            continue;
        }
        by.entry((r.benchmark.clone(), r.submitter.clone(), acc, n))
            .or_default()
            .entry(r.system.clone())
            .or_default()
            .push(d);
    }
    let mut setups = Vec::new();
    let mut noise = Vec::new();
    for ((benchmark, submitter, accelerator, n), systems) in by {
        let mut medians = Vec::new();
        let mut count = 0;
        for (_, mut times) in systems {
            count += times.len();
            let Some(m) = median(&mut times) else {
                continue;
            };
            if times.len() >= 3 {
                noise.extend(times.iter().map(|t| (t / m).ln()));
            }
            medians.push(m);
        }
        if let Some(time_s) = median(&mut medians) {
            setups.push(Setup {
                benchmark,
                submitter,
                accelerator,
                gpus: n as f64,
                time_s,
                runs: count,
            });
        }
    }
    (setups, noise)
}

/// A pair of real runs: the same benchmark under two shapes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Pair {
    pub benchmark: String,
    /// The submitter (size pairs); `*` for a type pair (medians over submitters).
    pub submitter: String,
    pub from_gpus: f64,
    pub to_gpus: f64,
    pub from_accelerator: String,
    pub to_accelerator: String,
    pub from_s: f64,
    pub to_s: f64,
}

impl Pair {
    /// `ln(time under to / time under from)`.
    pub fn actual_log(&self) -> f64 {
        (self.to_s / self.from_s).ln()
    }

    /// The two shapes, as the scaling model is asked about them.
    fn shapes(&self) -> (Shape, Shape) {
        let shape = |gpus: f64, accelerator: &str| Shape {
            gpus,
            gpu_type: Some(accelerator.to_string()),
        };
        (
            shape(self.from_gpus, &self.from_accelerator),
            shape(self.to_gpus, &self.to_accelerator),
        )
    }
}

/// Same benchmark, submitter and accelerator at two sizes (smaller first).
pub fn size_pairs(setups: &[Setup]) -> Vec<Pair> {
    let mut out = Vec::new();
    for (i, a) in setups.iter().enumerate() {
        for b in setups.iter().skip(i + 1) {
            if a.benchmark == b.benchmark
                && a.submitter == b.submitter
                && a.accelerator == b.accelerator
                && a.gpus != b.gpus
            {
                let (x, y) = if a.gpus < b.gpus { (a, b) } else { (b, a) };
                out.push(Pair {
                    benchmark: a.benchmark.clone(),
                    submitter: a.submitter.clone(),
                    from_gpus: x.gpus,
                    to_gpus: y.gpus,
                    from_accelerator: x.accelerator.clone(),
                    to_accelerator: y.accelerator.clone(),
                    from_s: x.time_s,
                    to_s: y.time_s,
                });
            }
        }
    }
    out
}

/// Same benchmark at the same size on two accelerators named at `grain` (each the median
/// over submitters; accelerators in name order).
pub fn type_pairs(setups: &[Setup], grain: TypeGrain) -> Vec<Pair> {
    let mut by: BTreeMap<(String, u64), BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for s in setups {
        by.entry((s.benchmark.clone(), s.gpus as u64))
            .or_default()
            .entry(grain.key(&s.accelerator))
            .or_default()
            .push(s.time_s);
    }
    let mut out = Vec::new();
    for ((benchmark, n), accs) in by {
        let meds: Vec<(String, f64)> = accs
            .into_iter()
            .filter_map(|(a, mut t)| Some((a, median(&mut t)?)))
            .collect();
        for (i, (a, ta)) in meds.iter().enumerate() {
            for (b, tb) in meds.iter().skip(i + 1) {
                out.push(Pair {
                    benchmark: benchmark.clone(),
                    submitter: "*".into(),
                    from_gpus: n as f64,
                    to_gpus: n as f64,
                    from_accelerator: a.clone(),
                    to_accelerator: b.clone(),
                    from_s: *ta,
                    to_s: *tb,
                });
            }
        }
    }
    out
}

/// Size groups `(gpus, time)` by (benchmark, submitter, accelerator) of the setups `keep`
/// selects; groups with ≥ 2 sizes.
pub fn size_groups(setups: &[Setup], keep: impl Fn(&Setup) -> bool) -> Vec<Vec<(f64, f64)>> {
    // (benchmark, submitter, accelerator) → (gpus, time)
    type Group<'a> = (&'a str, &'a str, &'a str);
    let mut by: BTreeMap<Group, Vec<(f64, f64)>> = BTreeMap::new();
    for s in setups.iter().filter(|s| keep(s)) {
        by.entry((&s.benchmark, &s.submitter, &s.accelerator))
            .or_default()
            .push((s.gpus, s.time_s));
    }
    by.into_values()
        .filter(|g| g.iter().map(|p| p.0 as u64).collect::<BTreeSet<_>>().len() >= 2)
        .collect()
}

/// Sum of squared errors of ln time under Amdahl with serial fraction `serial`, each group
/// with its own best scale.
fn grouped_sse(groups: &[Vec<(f64, f64)>], serial: f64) -> f64 {
    groups
        .iter()
        .map(|g| {
            let r: Vec<f64> = g
                .iter()
                .map(|&(n, t)| t.ln() - amdahl_time(n, serial).ln())
                .collect();
            let m = r.iter().sum::<f64>() / r.len().max(1) as f64;
            r.iter().map(|x| (x - m).powi(2)).sum::<f64>()
        })
        .sum()
}

/// Amdahl serial fraction in [1e-5, 1] fitted on groups of `(gpus, time)` (least squares of
/// ln time, each group its own scale; golden-section search over ln σ). `None` without a
/// group of ≥ 2 sizes.
pub fn fit_amdahl_times(groups: &[Vec<(f64, f64)>]) -> Option<f64> {
    let groups: Vec<Vec<(f64, f64)>> = groups
        .iter()
        .filter(|g| {
            g.iter()
                .filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.0.is_finite() && p.1.is_finite())
                .map(|p| p.0.to_bits())
                .collect::<BTreeSet<_>>()
                .len()
                >= 2
        })
        .cloned()
        .collect();
    if groups.is_empty() {
        return None;
    }
    let (mut a, mut b) = (1e-5f64.ln(), 0.0f64);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..80 {
        let c = b - g * (b - a);
        let d = a + g * (b - a);
        if grouped_sse(&groups, c.exp()) < grouped_sse(&groups, d.exp()) {
            b = d;
        } else {
            a = c;
        }
    }
    Some(((a + b) / 2.0).exp())
}

/// A benchmark's size law fitted on MLPerf time to train.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct BenchmarkSerial {
    /// The serial fraction used: the benchmark's own fit shrunk toward `pooled`.
    pub serial: f64,
    /// The benchmark's own fit on its submitter × accelerator groups.
    pub own: f64,
    /// The fit on every other benchmark.
    pub pooled: f64,
    /// Groups behind `own`.
    pub groups: usize,
}

/// The size law of `benchmark` from the setups `keep` accepts among its own (any setup of
/// another benchmark forms the pooled law): `ln σ = (k ln σ_own + ln σ_pooled) / (k + 1)` for
/// `k` groups, the pooled law counting as one more group, so that one submitter's two sizes
/// do not decide alone. `None` when the benchmark has no group of ≥ 2 sizes.
pub fn benchmark_serial(
    setups: &[Setup],
    benchmark: &str,
    keep: impl Fn(&Setup) -> bool,
) -> Option<BenchmarkSerial> {
    let groups = size_groups(setups, |s| s.benchmark == benchmark && keep(s));
    let own = fit_amdahl_times(&groups)?;
    let k = groups.len() as f64;
    let pooled = fit_amdahl_times(&size_groups(setups, |s| s.benchmark != benchmark));
    let serial = match pooled {
        Some(p) => ((k * own.ln() + p.ln()) / (k + 1.0)).exp(),
        None => own,
    };
    Some(BenchmarkSerial {
        serial,
        own,
        pooled: pooled.unwrap_or(own),
        groups: groups.len(),
    })
}

/// `ln(T(to)/T(from))` under Amdahl with `serial`.
pub fn amdahl_log_ratio(from: f64, to: f64, serial: f64) -> f64 {
    (amdahl_time(to, serial) / amdahl_time(from, serial)).ln()
}

/// Error of one method on a set of pairs (|ln predicted − ln actual|).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorStats {
    pub pairs: usize,
    pub median_abs_log: f64,
    pub mean_abs_log: f64,
    pub within_1_25x: f64,
    pub within_2x: f64,
}

impl ErrorStats {
    fn of(errors: &[f64]) -> Option<ErrorStats> {
        if errors.is_empty() {
            return None;
        }
        let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        let n = abs.len() as f64;
        Some(ErrorStats {
            pairs: abs.len(),
            median_abs_log: quantile(&abs, 0.5),
            mean_abs_log: abs.iter().sum::<f64>() / n,
            within_1_25x: abs.iter().filter(|e| **e <= 1.25f64.ln()).count() as f64 / n,
            within_2x: abs.iter().filter(|e| **e <= 2f64.ln()).count() as f64 / n,
        })
    }
}

/// One line of the holdout table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HoldoutRow {
    /// Which pairs (`size: all`, `size: own history available`, `type: mlperf`, …).
    pub subset: String,
    /// The method (`model`, `linear speedup`, `no speedup`, `no change`, …).
    pub method: String,
    pub stats: ErrorStats,
    /// Share of pairs whose actual ratio lies in the method's 80% interval (the model only).
    pub coverage_80: Option<f64>,
}

/// One held-out pair with the model's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairResult {
    pub pair: Pair,
    pub actual: f64,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub source: BasisSource,
    pub detail: String,
}

/// The whole holdout: the table, the pairs, and whether the model beats both naive
/// assumptions on all size pairs and on all type pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingHoldout {
    pub rows: Vec<HoldoutRow>,
    pub pairs: Vec<PairResult>,
    /// Model's median and mean |log error| both below linear and no speedup on size pairs.
    pub size_beats_naive: bool,
    /// Model's median and mean |log error| both at or below "no change" on MLPerf type pairs.
    pub type_beats_no_change: bool,
    /// The fitted size laws the deployed model uses: Pollux σ and each MLPerf benchmark's σ.
    pub pollux_serial: f64,
    pub mlperf_serial: BTreeMap<String, f64>,
    pub notes: Vec<String>,
}

/// Per-source held-out point predictions of one size pair (`None` when a source has no
/// evidence for it).
struct SizeSources {
    own: Option<f64>,
    mlperf_same: Option<f64>,
    mlperf_other: Option<f64>,
}

fn size_sources(p: &Pair, setups: &[Setup]) -> SizeSources {
    let own_group: Vec<(f64, f64)> = setups
        .iter()
        .filter(|s| {
            s.benchmark == p.benchmark
                && s.submitter == p.submitter
                && s.accelerator == p.from_accelerator
                && s.gpus != p.to_gpus
        })
        .map(|s| (s.gpus, s.time_s))
        .collect();
    let own = fit_amdahl_times(&[own_group]).map(|s| amdahl_log_ratio(p.from_gpus, p.to_gpus, s));
    let same = benchmark_serial(setups, &p.benchmark, |s| s.submitter != p.submitter)
        .map(|f| amdahl_log_ratio(p.from_gpus, p.to_gpus, f.serial));
    let other = fit_amdahl_times(&size_groups(setups, |s| s.benchmark != p.benchmark))
        .map(|s| amdahl_log_ratio(p.from_gpus, p.to_gpus, s));
    SizeSources {
        own,
        mlperf_same: same,
        mlperf_other: other,
    }
}

/// Residuals (actual − predicted, in ln) of each source over held-out pairs, tagged by the
/// pair's benchmark so that a pair's interval can leave its own benchmark out. Size residuals
/// are per unit of `|ln(to/from)|`.
#[derive(Debug, Clone, Default)]
pub struct TaggedResiduals {
    pub own: Vec<(String, f64)>,
    pub mlperf_size: Vec<(String, f64)>,
    pub mlperf_type: Vec<(String, f64)>,
}

impl TaggedResiduals {
    /// The residuals of every benchmark but `except`.
    pub fn without(&self, except: Option<&str>, base: &Residuals) -> Residuals {
        let pick = |v: &[(String, f64)]| -> Vec<f64> {
            v.iter()
                .filter(|(b, _)| except != Some(b.as_str()))
                .map(|(_, r)| *r)
                .collect()
        };
        Residuals {
            own: pick(&self.own),
            mlperf_size: pick(&self.mlperf_size),
            mlperf_type: pick(&self.mlperf_type),
            ..base.clone()
        }
    }
}

/// Held-out residuals of the MLPerf-based sources on all pairs (stage one of the holdout;
/// [`Reshaper::bundled`] builds its intervals from them).
pub fn mlperf_residuals(setups: &[Setup], grain: TypeGrain) -> TaggedResiduals {
    let mut out = TaggedResiduals::default();
    for p in size_pairs(setups) {
        let y = p.actual_log();
        let scale = (p.to_gpus / p.from_gpus).ln().abs().max(1e-9);
        let s = size_sources(&p, setups);
        if let Some(x) = s.own {
            out.own.push((p.benchmark.clone(), (y - x) / scale));
        }
        if let Some(x) = s.mlperf_same {
            out.mlperf_size.push((p.benchmark.clone(), (y - x) / scale));
        }
    }
    let pairs = type_pairs(setups, grain);
    for p in &pairs {
        let logs = type_logs(&pairs, &p.from_accelerator, &p.to_accelerator, &p.benchmark);
        if !logs.is_empty() {
            out.mlperf_type
                .push((p.benchmark.clone(), p.actual_log() - quantile(&logs, 0.5)));
        }
    }
    out
}

/// Oriented `ln(T(to)/T(from))` of type pairs `from`→`to` of benchmarks other than `except`.
pub fn type_logs(pairs: &[Pair], from: &str, to: &str, except: &str) -> Vec<f64> {
    pairs
        .iter()
        .filter(|p| p.benchmark != except)
        .filter_map(|p| {
            if p.from_accelerator == from && p.to_accelerator == to {
                Some(p.actual_log())
            } else if p.from_accelerator == to && p.to_accelerator == from {
                Some(-p.actual_log())
            } else {
                None
            }
        })
        .collect()
}

fn row(
    subset: &str,
    method: &str,
    errors: &[f64],
    coverage: Option<f64>,
    rows: &mut Vec<HoldoutRow>,
) {
    if let Some(stats) = ErrorStats::of(errors) {
        rows.push(HoldoutRow {
            subset: subset.into(),
            method: method.into(),
            stats,
            coverage_80: coverage,
        });
    }
}

fn coverage(results: &[&PairResult]) -> Option<f64> {
    if results.is_empty() {
        return None;
    }
    let inside = results
        .iter()
        .filter(|r| r.actual >= r.low * (1.0 - 1e-12) && r.actual <= r.high * (1.0 + 1e-12))
        .count();
    Some(inside as f64 / results.len() as f64)
}

/// Runs the holdout on `runs` (MLPerf v1.0) with `base` (a [`Reshaper`] built from the
/// bundled data: its Pollux law, Gavel speeds and non-MLPerf residuals are used as they are).
pub fn evaluate(runs: &[MlperfRun], base: &Reshaper) -> ScalingHoldout {
    let (variant_setups, _) = mlperf_setups(runs);
    let tagged = mlperf_residuals(&variant_setups, TypeGrain::Variant);
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let mut notes = Vec::new();

    // Size pairs: the deployed model (a Reshaper without the submitter's runs of the
    // benchmark, the submitter's other sizes as own history), beside each source and naive.
    let pairs = size_pairs(&variant_setups);
    let mut errs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for p in &pairs {
        let y = p.actual_log();
        let training: Vec<Setup> = variant_setups
            .iter()
            .filter(|s| !(s.benchmark == p.benchmark && s.submitter == p.submitter))
            .cloned()
            .collect();
        let own: Vec<PastRun> = variant_setups
            .iter()
            .filter(|s| {
                s.benchmark == p.benchmark
                    && s.submitter == p.submitter
                    && s.accelerator == p.from_accelerator
                    && s.gpus != p.to_gpus
            })
            .map(|s| PastRun {
                shape: Shape {
                    gpus: s.gpus,
                    gpu_type: Some(s.accelerator.clone()),
                },
                runtime_s: s.time_s,
            })
            .collect();
        let (from, to) = p.shapes();
        let r = base
            .with_mlperf(
                training,
                TypeGrain::Variant,
                tagged.without(Some(&p.benchmark), base.residuals()),
            )
            .ratio(Some(&p.benchmark), &from, &to, &own);
        let s = size_sources(p, &variant_setups);
        errs.entry("model").or_default().push(r.ratio.ln() - y);
        errs.entry("linear speedup")
            .or_default()
            .push((p.from_gpus / p.to_gpus).ln() - y);
        errs.entry("no speedup").or_default().push(-y);
        errs.entry("pollux amdahl (default for size)")
            .or_default()
            .push(amdahl_log_ratio(p.from_gpus, p.to_gpus, base.pollux_serial()) - y);
        if let Some(x) = s.mlperf_other {
            errs.entry("mlperf, other benchmarks (pooled σ)")
                .or_default()
                .push(x - y);
        }
        results.push(PairResult {
            pair: p.clone(),
            actual: y.exp(),
            ratio: r.ratio,
            low: r.low,
            high: r.high,
            source: r.basis.source,
            detail: r.basis.detail,
        });
    }
    let all: Vec<&PairResult> = results.iter().collect();
    for (method, e) in &errs {
        let cov = (*method == "model").then(|| coverage(&all)).flatten();
        row("size: all pairs", method, e, cov, &mut rows);
    }
    let (model_e, lin_e, none_e) = (
        errs.get("model").cloned().unwrap_or_default(),
        errs.get("linear speedup").cloned().unwrap_or_default(),
        errs.get("no speedup").cloned().unwrap_or_default(),
    );
    // The model per source it rested on, beside the naive assumptions on the same pairs.
    for source in [
        BasisSource::OwnHistory,
        BasisSource::Mlperf,
        BasisSource::PolluxAmdahl,
    ] {
        let idx: Vec<usize> = (0..results.len())
            .filter(|&k| results.get(k).is_some_and(|r| r.source == source))
            .collect();
        if idx.is_empty() {
            continue;
        }
        let subset = format!("size: model rests on {}", source_name(source));
        let pick =
            |v: &[f64]| -> Vec<f64> { idx.iter().filter_map(|&k| v.get(k).copied()).collect() };
        let rs: Vec<&PairResult> = idx.iter().filter_map(|&k| results.get(k)).collect();
        row(&subset, "model", &pick(&model_e), coverage(&rs), &mut rows);
        row(&subset, "linear speedup", &pick(&lin_e), None, &mut rows);
        row(&subset, "no speedup", &pick(&none_e), None, &mut rows);
    }
    // Per benchmark: where the model loses, the table says so.
    let mut benches: Vec<&str> = results.iter().map(|r| r.pair.benchmark.as_str()).collect();
    benches.sort();
    benches.dedup();
    for b in benches {
        let idx: Vec<usize> = (0..results.len())
            .filter(|&k| results.get(k).is_some_and(|r| r.pair.benchmark == b))
            .collect();
        let pick =
            |v: &[f64]| -> Vec<f64> { idx.iter().filter_map(|&k| v.get(k).copied()).collect() };
        let rs: Vec<&PairResult> = idx.iter().filter_map(|&k| results.get(k)).collect();
        let subset = format!("size: {b}");
        row(&subset, "model", &pick(&model_e), coverage(&rs), &mut rows);
        row(&subset, "linear speedup", &pick(&lin_e), None, &mut rows);
        row(&subset, "no speedup", &pick(&none_e), None, &mut rows);
    }
    let beats = |m: &[f64], other: &[f64]| -> bool {
        match (ErrorStats::of(m), ErrorStats::of(other)) {
            (Some(a), Some(b)) => {
                a.median_abs_log < b.median_abs_log && a.mean_abs_log < b.mean_abs_log
            }
            _ => false,
        }
    };
    let size_beats_naive = beats(&model_e, &lin_e) && beats(&model_e, &none_e);

    // Type pairs at the variant grain (A100 PCIe vs SXM, TPU, …), leave-one-benchmark-out.
    let tpairs = type_pairs(&variant_setups, TypeGrain::Variant);
    let mut terrs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut tresults = Vec::new();
    for p in &tpairs {
        let y = p.actual_log();
        let training: Vec<Setup> = variant_setups
            .iter()
            .filter(|s| s.benchmark != p.benchmark)
            .cloned()
            .collect();
        let (from, to) = p.shapes();
        let r = base
            .with_mlperf(
                training,
                TypeGrain::Variant,
                tagged.without(Some(&p.benchmark), base.residuals()),
            )
            .ratio(Some(&p.benchmark), &from, &to, &[]);
        terrs.entry("model").or_default().push(r.ratio.ln() - y);
        terrs.entry("no change").or_default().push(-y);
        tresults.push(PairResult {
            pair: p.clone(),
            actual: y.exp(),
            ratio: r.ratio,
            low: r.low,
            high: r.high,
            source: r.basis.source,
            detail: r.basis.detail,
        });
    }
    let tall: Vec<&PairResult> = tresults.iter().collect();
    for (method, e) in &terrs {
        let cov = (*method == "model").then(|| coverage(&tall)).flatten();
        row("type: mlperf pairs", method, e, cov, &mut rows);
    }
    let measured: Vec<&PairResult> = tresults
        .iter()
        .filter(|r| r.source == BasisSource::Mlperf)
        .collect();
    if !measured.is_empty() {
        let e: Vec<f64> = measured.iter().map(|r| (r.ratio / r.actual).ln()).collect();
        let n: Vec<f64> = measured.iter().map(|r| -r.actual.ln()).collect();
        row(
            "type: mlperf pairs with a measured ratio on other benchmarks",
            "model",
            &e,
            coverage(&measured),
            &mut rows,
        );
        row(
            "type: mlperf pairs with a measured ratio on other benchmarks",
            "no change",
            &n,
            None,
            &mut rows,
        );
    }
    let type_beats_no_change = match (
        ErrorStats::of(&terrs.get("model").cloned().unwrap_or_default()),
        ErrorStats::of(&terrs.get("no change").cloned().unwrap_or_default()),
    ) {
        (Some(a), Some(b)) => {
            a.median_abs_log <= b.median_abs_log && a.mean_abs_log <= b.mean_abs_log
        }
        _ => false,
    };
    notes.push(
        "Gavel's types (k80, p100, v100) never appear in MLPerf v1.0, so the Gavel median cannot \
         be scored on MLPerf type pairs; it is scored on Gavel itself (leave-one-family-out)."
            .into(),
    );

    // Gavel: each model family's per-type ratio from the other families' median.
    let (model_g, none_g) = base.gavel_family_holdout();
    row(
        "type: gavel leave-one-family-out",
        "gavel median (model)",
        &model_g,
        None,
        &mut rows,
    );
    row(
        "type: gavel leave-one-family-out",
        "no change",
        &none_g,
        None,
        &mut rows,
    );

    results.extend(tresults);
    ScalingHoldout {
        rows,
        pairs: results,
        size_beats_naive,
        type_beats_no_change,
        pollux_serial: base.pollux_serial(),
        mlperf_serial: base
            .mlperf_serials()
            .iter()
            .map(|(b, f)| (b.clone(), f.serial))
            .collect(),
        notes,
    }
}

/// The name of a source in the table.
pub fn source_name(s: BasisSource) -> &'static str {
    match s {
        BasisSource::Unchanged => "unchanged",
        BasisSource::OwnHistory => "own history",
        BasisSource::Mlperf => "mlperf",
        BasisSource::Gavel => "gavel",
        BasisSource::PolluxAmdahl => "pollux amdahl",
        BasisSource::Unmeasured => "unmeasured",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::POLLUX_AMDAHL_SERIAL;
    use augur_datasets::bundled::bundled_file;
    use augur_datasets::curves::read_mlperf_runs;
    use augur_datasets::ReadOptions;

    #[test]
    fn amdahl_time_fit_recovers_a_known_serial_fraction() {
        let group = |c: f64| -> Vec<(f64, f64)> {
            [4.0, 8.0, 64.0, 512.0]
                .iter()
                .map(|&n| (n, c * amdahl_time(n, 0.004)))
                .collect()
        };
        let s = fit_amdahl_times(&[group(1.0), group(7.0)]).unwrap();
        assert!((s - 0.004).abs() < 1e-6, "{s}");
        assert_eq!(fit_amdahl_times(&[vec![(8.0, 1.0), (8.0, 2.0)]]), None);
    }

    /// The holdout on the bundled MLPerf pairs: the model beats both naive assumptions on
    /// size pairs, its interval covers about what it promises, and the model's Pollux law is
    /// the documented constant.
    #[test]
    fn scaling_model_beats_naive_assumptions_on_held_out_mlperf_pairs() {
        let reshaper = Reshaper::bundled().unwrap();
        assert!((reshaper.pollux_serial() - POLLUX_AMDAHL_SERIAL).abs() < 5e-4);
        let (runs, _) = read_mlperf_runs(
            &bundled_file("mlperf-v1.0/runs.csv.gz").unwrap(),
            &ReadOptions::default(),
        )
        .unwrap();
        let h = evaluate(&runs, &reshaper);
        let get = |subset: &str, method: &str| -> &HoldoutRow {
            h.rows
                .iter()
                .find(|r| r.subset == subset && r.method == method)
                .unwrap_or_else(|| panic!("no row {subset} / {method}: {:#?}", h.rows))
        };
        let model = get("size: all pairs", "model");
        let linear = get("size: all pairs", "linear speedup");
        let none = get("size: all pairs", "no speedup");
        for r in &h.rows {
            eprintln!(
                "{:<62} {:<38} {:>4} {:.3} {:.3} {:.2} {:.2} {:?}",
                r.subset,
                r.method,
                r.stats.pairs,
                r.stats.median_abs_log,
                r.stats.mean_abs_log,
                r.stats.within_1_25x,
                r.stats.within_2x,
                r.coverage_80
            );
        }
        assert!(model.stats.pairs >= 30, "{}", model.stats.pairs);
        assert_eq!(model.stats.pairs, linear.stats.pairs);
        assert!(h.size_beats_naive);
        assert!(model.stats.median_abs_log < linear.stats.median_abs_log);
        assert!(model.stats.mean_abs_log < none.stats.mean_abs_log);
        let cov = model.coverage_80.unwrap();
        assert!((0.5..=1.0).contains(&cov), "coverage {cov}");
        // Every pair's answer is finite, positive and inside its own interval.
        for p in &h.pairs {
            assert!(p.ratio.is_finite() && p.ratio > 0.0);
            assert!(p.low <= p.ratio && p.ratio <= p.high, "{p:?}");
        }
        let gavel = get("type: gavel leave-one-family-out", "gavel median (model)");
        let no_change = get("type: gavel leave-one-family-out", "no change");
        assert!(gavel.stats.pairs > 20);
        assert!(gavel.stats.median_abs_log < no_change.stats.median_abs_log);
    }
}
