//! The table and report folder of `augur simulate`, one per cluster size:
//! `DIR/simulate-<trace>-<N>gpus/` with `summary.md` (the table and the plots), `summary.json`,
//! `jct_cdf.png`, `queue_length.png`, `utilisation.png` and `decisions-<policy>.jsonl` (every
//! rescale and preemption, and every start at another size than the job asked for).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use augur_autoscaler::backend::DecisionRecord;
use augur_autoscaler::metrics::{SimResult, Summary};
use augur_autoscaler::sim::AffinityReport;
use augur_autoscaler::{Action, Reason};
use plotters::prelude::*;
use serde::Serialize;

use super::folder_slug;
use super::plot::{legend, plot_err, render, Area, FAMILY};
use super::text::{duration, thousands};

/// One cluster size: the rows of every policy (`--json` prints it, `summary.json` holds it).
#[derive(Debug, Serialize)]
pub struct SizeReport {
    pub trace: String,
    pub gpus: u32,
    pub jobs: usize,
    pub replay: String,
    pub predictions: PredictionInfo,
    pub rows: Vec<Summary>,
    /// Every other policy against FIFO.
    pub versus_fifo: Vec<Versus>,
    /// On mixed GPU types: where each job's per-type speed came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<AffinityReport>,
    /// On mixed GPU types: the type-aware elastic policy against its baselines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub type_aware_vs: Vec<TypeAwareVs>,
}

/// The type-aware elastic policy against one baseline of the same replay.
#[derive(Debug, Serialize)]
pub struct TypeAwareVs {
    pub baseline: String,
    /// 1 − its avg JCT / the baseline's.
    pub avg_jct_cut: f64,
    /// 1 − its total JCT / the baseline's.
    pub total_jct_cut: f64,
}

/// Where the replayed jobs' predictions came from and how good they were.
#[derive(Debug, Serialize, Clone)]
pub struct PredictionInfo {
    pub method: String,
    /// Jobs replayed with a prediction.
    pub predicted_jobs: usize,
    /// mean |ln pred − ln actual| over those jobs.
    pub mae_log: Option<f64>,
}

/// A policy against FIFO on the same replay.
#[derive(Debug, Serialize)]
pub struct Versus {
    pub policy: String,
    /// FIFO avg JCT ÷ this avg JCT.
    pub jct_speedup: f64,
    /// 1 − total JCT / FIFO's ("total run time" cut).
    pub total_jct_cut: f64,
    /// 1 − total wait / FIFO's.
    pub total_wait_cut: f64,
}

/// The printed table of one cluster size: one line per policy and the ratios against FIFO;
/// `skipped` jobs were bigger than the cluster.
pub fn table(r: &SizeReport, skipped: usize) -> String {
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
    if let Some(a) = &r.affinity {
        let _ = writeln!(
            s,
            "  GPU types {} (durations measured on {}): per-job speeds from {}; {} model classes, jobs without a model name: {} (seed {})",
            a.gpu_types.join(", "),
            a.reference,
            a.source,
            a.classes.len(),
            a.mix,
            a.seed
        );
    }
    if !r.type_aware_vs.is_empty() {
        let _ = writeln!(s, "  elastic-typed vs:   avg JCT   total JCT");
        for v in &r.type_aware_vs {
            let _ = writeln!(
                s,
                "  {:<16} {:>+8.1}%   {:>+8.1}%",
                v.baseline,
                -v.avg_jct_cut * 100.0,
                -v.total_jct_cut * 100.0
            );
        }
    }
    s.push('\n');
    s
}

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
    let each_series = |chart_series: &mut SeriesFn| -> anyhow::Result<()> {
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
        each_series(&mut |label, c, pts| {
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
        legend(&mut chart, SeriesLabelPosition::LowerRight, 13)?;
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
        each_series(&mut |label, c, pts| {
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(1)))
                .map_err(plot_err)?
                .label(label.to_string())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
            Ok(())
        })?;
        legend(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
    }
    Ok(())
}

/// Writes the report folder of one cluster size into `dir`; returns the folder.
pub fn write_report(dir: &Path, r: &SizeReport, results: &[SimResult]) -> anyhow::Result<PathBuf> {
    let out = dir.join(format!(
        "simulate-{}-{}gpus",
        folder_slug(&r.trace, false),
        r.gpus
    ));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    write_plots(&out, r, results)?;
    write_decision_logs(&out, results)?;
    if let Some(a) = &r.affinity {
        write_file(
            &out,
            "affinity.json",
            serde_json::to_string_pretty(a)?.as_bytes(),
        )?;
        write_job_types(&out, results)?;
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
    write_file(&out, "summary.md", md.as_bytes())?;
    write_file(
        &out,
        "summary.json",
        serde_json::to_string_pretty(r)?.as_bytes(),
    )?;
    Ok(out)
}

fn write_file(out: &Path, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let path = out.join(file);
    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// One labelled line per policy.
type Series = Vec<(String, Vec<(f64, f64)>)>;

/// The JCT CDF, queue length and utilisation plots.
fn write_plots(out: &Path, r: &SizeReport, results: &[SimResult]) -> anyhow::Result<()> {
    let cdf: Series = results
        .iter()
        .map(|res| (res.policy.clone(), res.jct_cdf(400)))
        .collect();
    let title = format!("{} · {} GPUs: job completion time", r.trace, r.gpus);
    let png = render(|a| lines(a, &title, "JCT (log)", "share of jobs", true, &cdf))?;
    write_file(out, "jct_cdf.png", &png)?;
    let hours = |t: f64| t / 3600.0;
    let queue: Series = results
        .iter()
        .map(|res| {
            let pts = res.timeline.iter();
            let pts = pts.map(|p| (hours(p.t), f64::from(p.queued))).collect();
            (res.policy.clone(), pts)
        })
        .collect();
    let title = format!("{} · {} GPUs: queued jobs", r.trace, r.gpus);
    let x_desc = "hours since the first submit";
    let png = render(|a| lines(a, &title, x_desc, "jobs queued", false, &queue))?;
    write_file(out, "queue_length.png", &png)?;
    let util: Series = results
        .iter()
        .map(|res| {
            let pts = res.timeline.iter().map(|p| {
                let u = if p.healthy_gpus > 0 {
                    f64::from(p.busy_gpus) / f64::from(p.healthy_gpus)
                } else {
                    0.0
                };
                (hours(p.t), u * 100.0)
            });
            (res.policy.clone(), pts.collect())
        })
        .collect();
    let title = format!("{} · {} GPUs: GPUs allocated", r.trace, r.gpus);
    let png = render(|a| lines(a, &title, x_desc, "% of GPUs", false, &util))?;
    write_file(out, "utilisation.png", &png)
}

/// Per policy, each job's model class and the GPU-seconds it held on each type
/// (`jobs-<policy>.csv`, rows in replay order).
fn write_job_types(out: &Path, results: &[SimResult]) -> anyhow::Result<()> {
    for res in results {
        let mut s = String::from("row,class,gpus,jct_s,wait_s");
        for t in &res.gpu_types {
            let _ = write!(s, ",gpu_s_{}", t.name);
        }
        s.push('\n');
        for j in &res.jobs {
            let _ = write!(
                s,
                "{},{},{},{},{:.0}",
                j.row,
                j.class.as_deref().unwrap_or(""),
                j.gpus,
                j.jct().map(|x| format!("{x:.0}")).unwrap_or_default(),
                j.queued_s
            );
            for k in 0..res.gpu_types.len() {
                let _ = write!(s, ",{:.0}", j.gpu_s_by_type.get(k).copied().unwrap_or(0.0));
            }
            s.push('\n');
        }
        let file = format!("jobs-{}.csv", folder_slug(&res.policy, false));
        write_file(out, &file, s.as_bytes())?;
    }
    Ok(())
}

/// The decision logs of the policies that rescale, preempt or choose GPU types.
fn write_decision_logs(out: &Path, results: &[SimResult]) -> anyhow::Result<()> {
    let typed = |d: &DecisionRecord| {
        matches!(
            d.decision.action,
            Action::Admit {
                gpu_type: Some(_),
                ..
            }
        )
    };
    for res in results
        .iter()
        .filter(|res| res.rescales + res.suspensions > 0 || res.decisions.iter().any(typed))
    {
        let mut s = String::new();
        // admissions only when the job starts at another size than it asked for, or on a
        // chosen GPU type
        let off_request = |d: &&DecisionRecord| match d.decision.action {
            Action::Admit {
                job,
                workers,
                gpu_type,
            } => {
                gpu_type.is_some()
                    || usize::try_from(job.0)
                        .ok()
                        .and_then(|i| res.jobs.get(i))
                        .is_some_and(|j| j.gpus != workers)
            }
            _ => true,
        };
        for d in res.decisions.iter().filter(off_request) {
            let mut v = serde_json::to_value(d)?;
            // name the GPU type a typed decision chose
            if let Reason::TypeGain { gpu_type, .. } = d.decision.reason {
                if let (Some(obj), Some(t)) =
                    (v.as_object_mut(), res.gpu_types.get(usize::from(gpu_type)))
                {
                    obj.insert("gpu_type_name".into(), t.name.clone().into());
                }
            }
            // and both types of a move
            if let Reason::Migrated { from, to, .. } = d.decision.reason {
                let name = |t: u16| res.gpu_types.get(usize::from(t)).map(|g| g.name.clone());
                if let (Some(obj), Some(a), Some(b)) = (v.as_object_mut(), name(from), name(to)) {
                    obj.insert("from_name".into(), a.into());
                    obj.insert("to_name".into(), b.into());
                }
            }
            s.push_str(&serde_json::to_string(&v)?);
            s.push('\n');
        }
        let file = format!("decisions-{}.jsonl", folder_slug(&res.policy, false));
        write_file(out, &file, s.as_bytes())?;
    }
    Ok(())
}
