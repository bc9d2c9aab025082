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

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use augur_autoscaler::metrics::{SimResult, Summary};
use augur_autoscaler::sim::{
    faults_from_episodes, jobs_from_records, ClusterSpec, SimConfig, SimJob, Simulator,
};
use augur_autoscaler::{by_name, POLICY_NAMES};
use augur_datasets::bundled::{bundled_file, Dataset};
use augur_datasets::cluster::{read_fault_trace, read_gavel_throughputs, relative_speeds};
use augur_datasets::split::clamp_duration;
use augur_datasets::{load_jobs, JobRecord, ReadOptions, TimeSplit, TraceFormat};
use augur_features::{batch_features, FeatureSchema};
use augur_models::Matrix;
use augur_predictor::RuntimeTrainer;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use serde::Serialize;

use crate::cli::{ReplayPart, SimulateArgs};
use crate::render::{duration, thousands};
use crate::report::{folder_slug, plot_err, render, Area, FAMILY};

/// One cluster size: the rows of every policy.
#[derive(Serialize)]
struct SizeReport {
    trace: String,
    gpus: u32,
    jobs: usize,
    replay: String,
    predictions: PredictionInfo,
    rows: Vec<Summary>,
    /// Elastic vs FIFO: ratios the issue's targets are stated in.
    versus_fifo: Vec<Versus>,
}

#[derive(Serialize, Clone)]
struct PredictionInfo {
    method: String,
    /// Jobs replayed with a prediction.
    predicted_jobs: usize,
    /// mean |ln pred − ln actual| over those jobs.
    mae_log: Option<f64>,
}

#[derive(Serialize)]
struct Versus {
    policy: String,
    /// FIFO avg JCT ÷ this avg JCT.
    jct_speedup: f64,
    /// 1 − total JCT / FIFO's ("total run time" cut).
    total_jct_cut: f64,
    /// 1 − total wait / FIFO's.
    total_wait_cut: f64,
}

fn load(args: &SimulateArgs) -> anyhow::Result<(String, Vec<JobRecord>)> {
    let opts = ReadOptions::default();
    if let Some(path) = &args.file {
        let format = match &args.format {
            Some(f) => Some(TraceFormat::parse(f).with_context(|| {
                format!("unknown --format `{f}`; known: {}", TraceFormat::names())
            })?),
            None => None,
        };
        let (table, _) = load_jobs(path, format, &opts)?;
        return Ok((path.display().to_string(), table.to_records()?));
    }
    let ds = Dataset::parse(&args.trace)?;
    let (table, _) = ds.load(&opts)?;
    Ok((ds.name().to_string(), table.to_records()?))
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
    let mut trainer = RuntimeTrainer::default();
    if let Some(t) = args.trees {
        trainer.params.n_trees = t.max(1);
    }
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

fn config(args: &SimulateArgs, gpus: u32, jobs: &[SimJob]) -> anyhow::Result<SimConfig> {
    let cluster = match &args.gpu_types {
        Some(spec) => ClusterSpec::heterogeneous(
            gpus,
            args.gpus_per_node,
            args.nodes_per_rack,
            &gpu_types(spec)?,
        )?,
        None => ClusterSpec::homogeneous(gpus, args.gpus_per_node, args.nodes_per_rack)?,
    };
    let mut cfg = SimConfig::new(cluster);
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
    if name == "elastic" {
        let params = augur_autoscaler::ElasticParams {
            rescale_pause_s: cfg.rescale_pause_s,
            ..Default::default()
        };
        p = Box::new(augur_autoscaler::ElasticController::new(
            params,
            cfg.scaling,
        ));
    }
    Ok(p)
}

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
    let part = match args.replay {
        ReplayPart::Test => "test 20% (out-of-sample predictions)",
        ReplayPart::All => "whole trace",
    };
    for &gpus in &args.gpus {
        let mut results: Vec<SimResult> = Vec::new();
        for policy in &args.policies {
            let cfg = config(args, gpus, &jobs)?;
            let mut p = policy_for(policy, &cfg)?;
            let sim = Simulator::new(jobs.clone(), cfg)?;
            let bar = ProgressBar::new(sim.len() as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {msg} [{bar:30}] {pos}/{len} jobs done [{elapsed}]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("█▉▊▋▌▍▎▏ "),
            );
            bar.set_message(format!("{name} · {gpus} GPUs · {policy}"));
            let res =
                sim.run_with_progress(p.as_mut(), &mut |done, _| bar.set_position(done as u64));
            bar.finish_and_clear();
            results.push(res);
        }
        let rows: Vec<Summary> = results.iter().map(SimResult::summary).collect();
        let versus = versus_fifo(&rows);
        let report = SizeReport {
            trace: name.clone(),
            gpus,
            jobs: jobs.len(),
            replay: part.into(),
            predictions: info.clone(),
            rows,
            versus_fifo: versus,
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

fn table(r: &SizeReport, skipped: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "simulate · {} · {} GPUs · {} jobs replayed ({}){}",
        r.trace,
        r.gpus,
        thousands(r.jobs as u64),
        r.replay,
        if skipped > 0 {
            format!(", {skipped} bigger than the cluster skipped")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "  predictions: {}{}",
        r.predictions.method,
        r.predictions
            .mae_log
            .map(|m| format!(", mae_log {m:.3} on the replayed jobs"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} {:>8}",
        "policy",
        "avg JCT",
        "p50 JCT",
        "p99 JCT",
        "avg wait",
        "p99 wait",
        "makespan",
        "util",
        "rescales",
        "preempt",
        "replay s"
    );
    for row in &r.rows {
        let _ = writeln!(
            s,
            "  {:<12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>5.1}% {:>8} {:>8} {:>8.2}",
            row.policy,
            duration(row.avg_jct),
            duration(row.p50_jct),
            duration(row.p99_jct),
            duration(row.avg_wait),
            duration(row.p99_wait),
            duration(row.makespan),
            row.utilisation * 100.0,
            row.rescales,
            row.suspensions,
            row.wall_s
        );
        if row.unfinished > 0 {
            let _ = writeln!(s, "  {:<12} ({} jobs unfinished)", "", row.unfinished);
        }
    }
    if !r.versus_fifo.is_empty() {
        let _ = writeln!(s, "  vs fifo:     avg JCT ÷   total JCT   total wait");
        for v in &r.versus_fifo {
            let _ = writeln!(
                s,
                "  {:<12} {:>9.2}×   {:>+8.1}%   {:>+9.1}%",
                v.policy,
                v.jct_speedup,
                -v.total_jct_cut * 100.0,
                -v.total_wait_cut * 100.0
            );
        }
    }
    s.push('\n');
    s
}

// ---------------------------------------------------------------------------------------------
// Report folder: summary.md, JCT CDF, queue length and utilisation over time, decision log.

const COLORS: [RGBColor; 6] = [
    RGBColor(127, 127, 127),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(31, 119, 180),
];

/// Draws one labelled series.
type SeriesFn<'a> = dyn FnMut(&str, RGBColor, &[(f64, f64)]) -> anyhow::Result<()> + 'a;

/// Draws one line per policy.
fn lines(
    area: &Area,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    log_x: bool,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0f64);
    for (_, pts) in series {
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    if !x0.is_finite() || !x1.is_finite() {
        return Ok(());
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 > 0.0 { y1 * 1.05 } else { 1.0 };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64);
    let legend = |chart_series: &mut SeriesFn| -> anyhow::Result<()> {
        for ((label, pts), color) in series.iter().zip(COLORS.iter().cycle()) {
            chart_series(label, *color, pts)?;
        }
        Ok(())
    };
    if log_x {
        let x0 = x0.max(1.0);
        let mut chart = builder
            .build_cartesian_2d((x0..x1.max(x0 * 10.0)).log_scale(), 0f64..y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|v| duration(*v))
            .label_style((FAMILY, 13))
            .draw()
            .map_err(plot_err)?;
        legend(&mut |label, c, pts| {
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(x, y)| (x.max(x0), y)),
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(label.to_string())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
            Ok(())
        })?;
        crate::report::legend(&mut chart, SeriesLabelPosition::LowerRight, 13)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x0..x1, 0f64..y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FAMILY, 13))
            .draw()
            .map_err(plot_err)?;
        legend(&mut |label, c, pts| {
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(1)))
                .map_err(plot_err)?
                .label(label.to_string())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
            Ok(())
        })?;
        crate::report::legend(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
    }
    Ok(())
}

fn slug(name: &str) -> String {
    folder_slug(name, false)
}

fn write_report(dir: &Path, r: &SizeReport, results: &[SimResult]) -> anyhow::Result<PathBuf> {
    let out = dir.join(format!("simulate-{}-{}gpus", slug(&r.trace), r.gpus));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let write = |file: &str, bytes: &[u8]| -> anyhow::Result<()> {
        let path = out.join(file);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    let cdf: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|res| (res.policy.clone(), res.jct_cdf(400)))
        .collect();
    let title = format!("{} · {} GPUs: job completion time", r.trace, r.gpus);
    write(
        "jct_cdf.png",
        &render(|a| lines(a, &title, "JCT (log)", "share of jobs", true, &cdf))?,
    )?;
    let hours = |t: f64| t / 3600.0;
    let queue: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|res| {
            (
                res.policy.clone(),
                res.timeline
                    .iter()
                    .map(|p| (hours(p.t), f64::from(p.queued)))
                    .collect(),
            )
        })
        .collect();
    let title = format!("{} · {} GPUs: queued jobs", r.trace, r.gpus);
    write(
        "queue_length.png",
        &render(|a| {
            lines(
                a,
                &title,
                "hours since the first submit",
                "jobs queued",
                false,
                &queue,
            )
        })?,
    )?;
    let util: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|res| {
            (
                res.policy.clone(),
                res.timeline
                    .iter()
                    .map(|p| {
                        let u = if p.healthy_gpus > 0 {
                            f64::from(p.busy_gpus) / f64::from(p.healthy_gpus)
                        } else {
                            0.0
                        };
                        (hours(p.t), u * 100.0)
                    })
                    .collect(),
            )
        })
        .collect();
    let title = format!("{} · {} GPUs: GPUs allocated", r.trace, r.gpus);
    write(
        "utilisation.png",
        &render(|a| {
            lines(
                a,
                &title,
                "hours since the first submit",
                "% of GPUs",
                false,
                &util,
            )
        })?,
    )?;
    // decision logs of the policies that rescale or preempt
    for res in results
        .iter()
        .filter(|res| res.rescales + res.suspensions > 0)
    {
        let mut s = String::new();
        // admissions only when the job starts at another size than it asked for
        let off_request = |d: &&augur_autoscaler::backend::DecisionRecord| match d.decision.action {
            augur_autoscaler::Action::Admit { job, workers } => usize::try_from(job.0)
                .ok()
                .and_then(|i| res.jobs.get(i))
                .is_some_and(|j| j.gpus != workers),
            _ => true,
        };
        for d in res.decisions.iter().filter(off_request) {
            s.push_str(&serde_json::to_string(d)?);
            s.push('\n');
        }
        write(
            &format!("decisions-{}.jsonl", slug(&res.policy)),
            s.as_bytes(),
        )?;
    }
    let mut md = String::new();
    let _ = writeln!(md, "# augur simulate · {} · {} GPUs\n", r.trace, r.gpus);
    let _ = writeln!(md, "```\n{}```\n", table(r, 0));
    let _ = writeln!(
        md,
        "![JCT CDF](jct_cdf.png)\n\n![queue length](queue_length.png)\n\n![utilisation](utilisation.png)\n"
    );
    let _ = writeln!(
        md,
        "`decisions-<policy>.jsonl`: every rescale and preemption, and every start at another size than the job asked for (up to the log cap), with its reason."
    );
    write("summary.md", md.as_bytes())?;
    write("summary.json", serde_json::to_string_pretty(r)?.as_bytes())?;
    Ok(out)
}
