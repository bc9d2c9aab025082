//! `augur simulate`: replay a trace on a simulated cluster under several policies, one row
//! per policy (avg / p50 / p99 JCT, avg / p99 queue wait, makespan, GPU utilisation, rescales),
//! and a report folder with plots.
//!
//! Predictions are honest: Augur's runtime predictor is trained on the first 80% of the trace
//! by submit time (the shared evaluation split) and the replay covers the last 20%, so every
//! replayed job has an out-of-sample prediction (its features only see jobs that finished
//! before it was submitted). `--replay all` replays the whole trace instead, but then only the
//! test jobs have out-of-sample predictions; training jobs get none (the policies fall back to
//! a 1-hour guess for them), which is honest but handicaps the prediction-driven policies.

use anyhow::{anyhow, bail, Context};
use augur_autoscaler::metrics::{SimResult, Summary};
use augur_autoscaler::sim::{
    affinity_from_gavel, faults_from_episodes, jobs_from_records, select_takers, AdviceReport,
    AdviceSpec, AffinityReport, ClusterSpec, PredictedEnds, RatioModel, SimConfig, SimJob,
    Simulator, TakerSelection,
};
use augur_autoscaler::TypeAffinity;
use augur_autoscaler::{by_name, POLICY_NAMES};
use augur_datasets::bundled::bundled_file;
use augur_datasets::cluster::{read_fault_trace, read_gavel_throughputs, relative_speeds};
use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, ReadOptions, TimeSplit};
use augur_features::{batch_features, FeatureSchema};
use augur_models::Matrix;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::trace::load_inputs;
use crate::cli::{AdviceEnds, ReplayPart, SimulateArgs};
use crate::report::simulate::{
    table, write_report, PredictionInfo, SizeReport, TypeAwareVs, Versus,
};
use crate::report::text::thousands;
use crate::trainers;

/// The trace of `--file PATH [--format F]`, else the bundled `--trace`, with its name.
fn load(args: &SimulateArgs) -> anyhow::Result<(String, Vec<JobRecord>)> {
    let datasets = [args.trace.clone()];
    let inputs = load_inputs(
        &datasets,
        &args.file.iter().cloned().collect::<Vec<_>>(),
        args.format.as_deref(),
        args.timezone.timezone,
    )?;
    inputs.into_iter().next().context("the trace to replay")
}

/// Keeps the first `limit` jobs by submit time (a quick slice).
fn first_jobs(mut jobs: Vec<JobRecord>, limit: Option<usize>) -> Vec<JobRecord> {
    if let Some(n) = limit {
        jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
        jobs.truncate(n);
    }
    jobs
}

/// Trains the runtime predictor on the first 80% and predicts the rest; returns per-row
/// predictions (None for training rows) and the rows to replay.
fn predict(
    jobs: &[JobRecord],
    args: &SimulateArgs,
    spinner: &ProgressBar,
) -> anyhow::Result<(Vec<Option<f64>>, Vec<usize>, PredictionInfo)> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled = |rows: &[usize]| -> Vec<usize> {
        rows.iter()
            .copied()
            .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
            .collect()
    };
    let train_rows = labelled(split.train());
    let test_rows = labelled(split.test());
    let replay_rows = match args.replay {
        ReplayPart::Test => test_rows.clone(),
        ReplayPart::All => labelled(split.order()),
    };
    let mut predicted = vec![None; jobs.len()];
    if args.no_predictor {
        return Ok((
            predicted,
            replay_rows,
            PredictionInfo {
                method: "none (policies use a 1-hour guess)".into(),
                predicted_jobs: 0,
                mae_log: None,
            },
        ));
    }
    spinner.set_message(format!(
        "training the runtime predictor on {} jobs",
        thousands(train_rows.len() as u64)
    ));
    let train_jobs: Vec<JobRecord> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
    let schema = FeatureSchema::for_jobs(&train_jobs);
    let x = batch_features(jobs, &schema);
    let y_log: Vec<f64> = jobs
        .iter()
        .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
        .collect();
    let trainer = trainers::runtime(args.trees);
    let predictor = trainer
        .train(&schema, &x, &y_log, &train_rows)
        .context("training the runtime predictor")?;
    let d = schema.len();
    let mut tx = Vec::with_capacity(test_rows.len() * d);
    for &r in &test_rows {
        tx.extend_from_slice(x.get(r * d..(r + 1) * d).unwrap_or(&[]));
    }
    let tm = Matrix::new(&tx, test_rows.len(), d)?;
    let preds = predictor.predict_batch(&tm)?;
    let mut err = 0.0;
    for (&r, p) in test_rows.iter().zip(&preds) {
        predicted[r] = Some(p.seconds);
        let actual = clamp_duration(jobs[r].duration.unwrap_or(1.0));
        err += (p.seconds.max(1.0).ln() - actual.ln()).abs();
    }
    let info = PredictionInfo {
        method: "augur runtime predictor (trained on the first 80% by submit time)".into(),
        predicted_jobs: test_rows.len(),
        mae_log: (!test_rows.is_empty()).then(|| err / test_rows.len() as f64),
    };
    Ok((predicted, replay_rows, info))
}

/// The GPU types of `--gpu-types` as the cluster needs them, and each replayed job's speed
/// on them (class by row of the replayed records).
struct GpuTypes {
    types: Vec<(String, f64, f64)>,
    affinity: TypeAffinity,
    report: AffinityReport,
}

/// `--gpu-types` with per-job speeds for the replayed `records` from Gavel's throughputs.
fn gpu_types_for(spec: &str, records: &[JobRecord], seed: u64) -> anyhow::Result<GpuTypes> {
    let types = gpu_types(spec)?;
    let path = bundled_file("gavel-throughputs/scheduler__simulation_throughputs.json.gz")?;
    let (gavel, _) = read_gavel_throughputs(&path, &ReadOptions::default())?;
    let names: Vec<String> = types.iter().map(|t| t.0.clone()).collect();
    let (affinity, report) = affinity_from_gavel(&gavel.isolated, &names, records, seed)
        .context("--gpu-types: per-job speeds from the Gavel throughputs")?;
    Ok(GpuTypes {
        types,
        affinity,
        report,
    })
}

/// `name:share` pairs with Gavel speeds relative to the first type.
fn gpu_types(spec: &str) -> anyhow::Result<Vec<(String, f64, f64)>> {
    let mut parsed = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, share) = part.split_once(':').unwrap_or((part, "1"));
        let share: f64 = share
            .parse()
            .with_context(|| format!("--gpu-types: `{share}` is not a share in `{part}`"))?;
        parsed.push((name.to_lowercase(), share));
    }
    let Some(reference) = parsed.first().map(|p| p.0.clone()) else {
        bail!("--gpu-types is empty");
    };
    let path = bundled_file("gavel-throughputs/scheduler__simulation_throughputs.json.gz")?;
    let (gavel, _) = read_gavel_throughputs(&path, &ReadOptions::default())?;
    let speeds = relative_speeds(&gavel.isolated, &reference);
    parsed
        .into_iter()
        .map(|(name, share)| {
            let speed = speeds.get(&name).copied().ok_or_else(|| {
                anyhow!(
                    "--gpu-types: no Gavel throughput for `{name}` relative to `{reference}`; known: {}",
                    speeds.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?;
            Ok((name, speed, share))
        })
        .collect()
}

fn config(
    args: &SimulateArgs,
    gpus: u32,
    jobs: &[SimJob],
    types: Option<&GpuTypes>,
) -> anyhow::Result<SimConfig> {
    let cluster = match types {
        Some(t) => {
            ClusterSpec::heterogeneous(gpus, args.gpus_per_node, args.nodes_per_rack, &t.types)?
        }
        None => ClusterSpec::homogeneous(gpus, args.gpus_per_node, args.nodes_per_rack)?,
    };
    let mut cfg = SimConfig::new(cluster);
    cfg.affinity = types.map(|t| t.affinity.clone());
    cfg.seed = args.seed;
    cfg.elastic.share = args.elastic_share;
    cfg.elastic.max_factor = args.elastic_max_factor;
    cfg.rescale_pause_s = args.rescale_pause;
    cfg.rules.strategy = match args.placement.as_str() {
        "pack" => augur_autoscaler::placement::Strategy::Pack,
        "spread" => augur_autoscaler::placement::Strategy::Spread,
        other => bail!("--placement must be pack or spread, not `{other}`"),
    };
    if args.faults {
        let path = bundled_file("node-faults/fault_trace.json.gz")?;
        let (episodes, _) = read_fault_trace(&path, &ReadOptions::default())?;
        let t0 = jobs.iter().map(|j| j.submit).fold(f64::INFINITY, f64::min);
        cfg.faults = faults_from_episodes(&episodes, cfg.cluster.nodes.len() as u32, t0);
    }
    Ok(cfg)
}

fn policy_for(name: &str, cfg: &SimConfig) -> anyhow::Result<Box<dyn augur_autoscaler::Policy>> {
    let mut p = by_name(name, cfg.scaling).ok_or_else(|| {
        anyhow!(
            "unknown policy `{name}`; known: {}",
            POLICY_NAMES.join(", ")
        )
    })?;
    if name == "elastic" || name == "elastic-typed" {
        let params = augur_autoscaler::ElasticParams {
            rescale_pause_s: cfg.rescale_pause_s,
            type_aware: name == "elastic-typed",
            ..Default::default()
        };
        p = Box::new(augur_autoscaler::ElasticController::new(
            params,
            cfg.scaling,
        ));
    }
    Ok(p)
}

/// `augur simulate`.
pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    if args.gpus.is_empty() {
        bail!("--gpus: give at least one cluster size");
    }
    for name in &args.policies {
        if !POLICY_NAMES.contains(&name.as_str()) {
            bail!(
                "unknown policy `{name}`; known: {}",
                POLICY_NAMES.join(", ")
            );
        }
    }
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner.set_message("loading the trace");
    let (name, records) = load(args)?;
    let records = first_jobs(records, args.limit);
    let (predicted, replay_rows, info) = predict(&records, args, &spinner)?;
    spinner.finish_and_clear();
    let replay: Vec<JobRecord> = replay_rows.iter().map(|&i| records[i].clone()).collect();
    let replay_pred: Vec<Option<f64>> = replay_rows.iter().map(|&i| predicted[i]).collect();
    let (jobs, skipped) = jobs_from_records(&replay, &replay_pred);
    if jobs.is_empty() {
        bail!("{name}: no job with a duration to replay ({skipped} skipped)");
    }
    let types = match &args.gpu_types {
        Some(spec) => Some(gpu_types_for(spec, &replay, args.seed)?),
        None => None,
    };
    let part = match args.replay {
        ReplayPart::Test => "test 20% (out-of-sample predictions)",
        ReplayPart::All => "whole trace",
    };
    if let Some(share) = args.advice_share {
        return run_advice(
            args,
            &name,
            share,
            &replay,
            &jobs,
            types.as_ref(),
            part,
            &info,
        );
    }
    for &gpus in &args.gpus {
        let results = replay_policies(args, &name, gpus, &jobs, types.as_ref())?;
        let rows: Vec<Summary> = results.iter().map(SimResult::summary).collect();
        let versus = versus_fifo(&rows);
        let type_aware_vs = if types.is_some() {
            type_aware_against(&rows)
        } else {
            Vec::new()
        };
        let report = SizeReport {
            trace: name.clone(),
            gpus,
            jobs: jobs.len(),
            replay: part.into(),
            predictions: info.clone(),
            rows,
            versus_fifo: versus,
            affinity: types.as_ref().map(|t| t.report.clone()),
            type_aware_vs,
        };
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!(
                "{}",
                table(&report, results.first().map_or(0, |r| r.skipped_too_big))
            );
        }
        if let Some(dir) = &args.report {
            let out = write_report(dir, &report, &results)?;
            if !args.json {
                println!("  report: {}\n", out.display());
            }
        }
    }
    Ok(())
}

/// Replays `jobs` on a cluster of `gpus` GPUs under each policy of `--policies`.
fn replay_policies(
    args: &SimulateArgs,
    name: &str,
    gpus: u32,
    jobs: &[SimJob],
    types: Option<&GpuTypes>,
) -> anyhow::Result<Vec<SimResult>> {
    let mut results: Vec<SimResult> = Vec::new();
    for policy in &args.policies {
        let cfg = config(args, gpus, jobs, types)?;
        let mut p = policy_for(policy, &cfg)?;
        let sim = Simulator::new(jobs.to_vec(), cfg)?;
        let bar = ProgressBar::new(sim.len() as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {pos}/{len} jobs done [{elapsed}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("█▉▊▋▌▍▎▏ "),
        );
        bar.set_message(format!("{name} · {gpus} GPUs · {policy}"));
        let res = sim.run_with_progress(p.as_mut(), &mut |done, _| bar.set_position(done as u64));
        bar.finish_and_clear();
        results.push(res);
    }
    Ok(results)
}

/// Every policy but FIFO against FIFO (none when FIFO was not replayed).
fn versus_fifo(rows: &[Summary]) -> Vec<Versus> {
    let Some(fifo) = rows.iter().find(|r| r.policy == "fifo") else {
        return Vec::new();
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    rows.iter()
        .filter(|r| r.policy != "fifo")
        .map(|r| Versus {
            policy: r.policy.clone(),
            jct_speedup: ratio(fifo.avg_jct, r.avg_jct),
            total_jct_cut: 1.0 - ratio(r.total_jct, fifo.total_jct),
            total_wait_cut: 1.0 - ratio(r.total_wait, fifo.total_wait),
        })
        .collect()
}

/// The type-aware elastic policy against every other policy of the replay (none when it was
/// not replayed).
fn type_aware_against(rows: &[Summary]) -> Vec<TypeAwareVs> {
    let Some(typed) = rows.iter().find(|r| r.policy == "elastic-typed") else {
        return Vec::new();
    };
    let cut = |a: f64, b: f64| if b > 0.0 { 1.0 - a / b } else { f64::NAN };
    rows.iter()
        .filter(|r| r.policy != typed.policy)
        .map(|r| TypeAwareVs {
            baseline: r.policy.clone(),
            avg_jct_cut: cut(typed.avg_jct, r.avg_jct),
            total_jct_cut: cut(typed.total_jct, r.total_jct),
        })
        .collect()
}

/// One cluster size of an advice replay: each policy with and without advice.
#[derive(serde::Serialize)]
struct AdviceSizeReport {
    trace: String,
    gpus: u32,
    jobs: usize,
    replay: String,
    predictions: PredictionInfo,
    selection: TakerSelection,
    policies: Vec<AdviceReport>,
}

/// Run time assumed for a job without a prediction (the policies' own fallback).
const UNKNOWN_RUNTIME_S: f64 = 3600.0;

/// `augur simulate --advice-share S`: every policy of `--policies` replayed without advice and
/// with `S` of the users taking the advisor's earliest-finish shape at submit.
#[allow(clippy::too_many_arguments)]
fn run_advice(
    args: &SimulateArgs,
    name: &str,
    share: f64,
    replay: &[JobRecord],
    jobs: &[SimJob],
    types: Option<&GpuTypes>,
    part: &str,
    info: &PredictionInfo,
) -> anyhow::Result<()> {
    if !(share.is_finite() && (0.0..=1.0).contains(&share)) {
        bail!("--advice-share must be in [0, 1], not {share}");
    }
    // the bundled philly and itp tables name no users: each job then stands for its own user
    // (a seeded share of jobs; philly's virtual clusters are too few, 13, to split in half)
    let (key, users): (&str, Vec<Option<&str>>) = if replay.iter().any(|r| r.user.is_some()) {
        ("user", replay.iter().map(|r| r.user.as_deref()).collect())
    } else {
        (
            "job id (the trace names no users)",
            replay.iter().map(|r| Some(r.job_id.as_str())).collect(),
        )
    };
    let (takers, selection) = select_takers(&users, key, share, args.seed);
    let job_names: Vec<Option<String>> = replay.iter().map(|r| r.job_name.clone()).collect();
    let model = ratio_model()?;
    let ends = match args.advice_ends {
        AdviceEnds::Predicted => PredictedEnds::Predicted,
        AdviceEnds::Oracle => PredictedEnds::Oracle,
    };
    let budget = (!args.advice_greedy).then_some(1.0);
    for &gpus in &args.gpus {
        let mut reports = Vec::new();
        for policy in &args.policies {
            let without = replay_one(args, name, gpus, jobs, types, policy, None)?.0;
            let spec = AdviceSpec {
                takers: takers.clone(),
                job_names: job_names.clone(),
                ends,
                types: types.is_some(),
                unknown_runtime_s: UNKNOWN_RUNTIME_S,
                gpu_hours_budget: budget,
            };
            let (with, log) = replay_one(
                args,
                name,
                gpus,
                jobs,
                types,
                policy,
                Some((spec, model.clone())),
            )?;
            let mut report = AdviceReport::compare(
                &without,
                &with,
                &log,
                &takers,
                selection.clone(),
                ends,
                model.describe(),
            );
            report.gpu_hours_budget = budget;
            reports.push(report);
        }
        let report = AdviceSizeReport {
            trace: name.to_string(),
            gpus,
            jobs: jobs.len(),
            replay: part.to_string(),
            predictions: info.clone(),
            selection: selection.clone(),
            policies: reports,
        };
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print!("{}", advice_table(&report));
        }
        if let Some(dir) = &args.report {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join(format!("advice-{name}-{gpus}.json"));
            std::fs::write(&path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", path.display()))?;
            if !args.json {
                println!("  report: {}\n", path.display());
            }
        }
    }
    Ok(())
}

/// The advisor's run-time ratios.
fn ratio_model() -> anyhow::Result<std::sync::Arc<dyn RatioModel>> {
    let reshaper = augur_autoscaler::scaling::reshape::Reshaper::bundled()
        .context("the advisor's scaling model (bundled Pollux, Gavel and MLPerf data)")?;
    Ok(std::sync::Arc::new(reshaper))
}

/// Replays `jobs` under one policy, with an advisor when given.
#[allow(clippy::type_complexity)]
fn replay_one(
    args: &SimulateArgs,
    name: &str,
    gpus: u32,
    jobs: &[SimJob],
    types: Option<&GpuTypes>,
    policy: &str,
    advice: Option<(AdviceSpec, std::sync::Arc<dyn RatioModel>)>,
) -> anyhow::Result<(SimResult, Vec<augur_autoscaler::sim::AdviceRecord>)> {
    let cfg = config(args, gpus, jobs, types)?;
    let mut p = policy_for(policy, &cfg)?;
    let mut sim = Simulator::new(jobs.to_vec(), cfg)?;
    let advised = advice.is_some();
    if let Some((spec, model)) = advice {
        sim = sim.with_advice(spec, model);
    }
    let bar = ProgressBar::new(sim.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} jobs done [{elapsed}]",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("█▉▊▋▌▍▎▏ "),
    );
    let with = if advised { " · with advice" } else { "" };
    bar.set_message(format!("{name} · {gpus} GPUs · {policy}{with}"));
    let out = sim.run_advised(p.as_mut(), &mut |done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    Ok(out)
}

/// The advice replay as text.
fn advice_table(r: &AdviceSizeReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let sel = &r.selection;
    let _ = writeln!(
        s,
        "{} · {} GPUs · {} jobs ({}) · advice: {} of {} users by {} ({} jobs) take the earliest-finish shape (share {}, seed {})",
        r.trace, r.gpus, r.jobs, r.replay, sel.taking_users, sel.users, sel.key, sel.taking_jobs, sel.share, sel.seed
    );
    for p in &r.policies {
        let h = |x: f64| x / 3600.0;
        let _ = writeln!(
            s,
            "  {} (ends: {:?}; GPU-hours budget: {}; ratios: {})",
            p.policy,
            p.ends,
            p.gpu_hours_budget
                .map_or("none (greedy)".to_string(), |b| format!(
                    "{b}× the request's"
                )),
            p.ratio_model
        );
        let _ = writeln!(s, "    mean JCT h      without   with   cut");
        for (label, j) in [
            ("takers", &p.takers),
            ("others", &p.others),
            ("cluster", &p.cluster),
        ] {
            let _ = writeln!(
                s,
                "    {label:<12} {:>9.2} {:>6.2} {:>+6.1}%  ({} jobs)",
                h(j.without),
                h(j.with),
                100.0 * j.cut,
                j.jobs
            );
        }
        let changes: Vec<String> = p
            .changes
            .iter()
            .take(8)
            .map(|c| {
                let ty = c
                    .to_type
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default();
                format!("{}→{}{ty} ×{}", c.from_gpus, c.to_gpus, c.jobs)
            })
            .collect();
        let _ = writeln!(
            s,
            "    {} of {} advised jobs changed shape: {}; GPU-hours with/without {:.3}",
            p.changed_jobs,
            p.advised_jobs,
            changes.join(", "),
            p.gpu_s_ratio
        );
        let e = &p.errors;
        let _ = writeln!(
            s,
            "    advisor error (predicted − actual, h): start median {:+.2} (|·| {:.2}), finish median {:+.2} (|·| {:.2}); run-time ratio |ln| median {:.3} (predicted mean {:.3}, true {:.3})",
            h(e.start_median_s),
            h(e.start_median_abs_s),
            h(e.finish_median_s),
            h(e.finish_median_abs_s),
            e.ratio_median_abs_log,
            e.predicted_ratio_mean,
            e.true_ratio_mean
        );
    }
    s
}
