//! `augur data inspect`: what a trace file holds and what our reader makes of it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use augur_datasets::bundled::Dataset;
use augur_datasets::summary::{JobSummarizer, JobSummary, Quantiles};
use augur_datasets::{
    detect_format, read_jobs, summarize_file, FileSummary, ReadOptions, ReadReport, TraceFormat,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cli::InspectArgs;
use crate::report::text::{bar, duration, instant, thousands};
use crate::trace_sources::trace_files;

/// One inspected file, as printed with `--json`.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Inspection {
    Jobs {
        path: String,
        format: TraceFormat,
        report: Box<ReadReport>,
        summary: Box<JobSummary>,
    },
    Other {
        path: String,
        #[serde(flatten)]
        summary: FileSummary,
    },
    Error {
        path: String,
        error: String,
    },
}

/// `augur data inspect`.
pub fn run(args: &InspectArgs) -> anyhow::Result<()> {
    let format = match &args.format {
        None => None,
        Some(name) => Some(TraceFormat::parse(name).with_context(|| {
            format!(
                "unknown --format `{name}`; known formats: {}",
                TraceFormat::names()
            )
        })?),
    };
    let mut opts = ReadOptions {
        strict: args.strict,
        max_detailed_issues: args.show_issues.max(1) * 20,
        timezone: args.timezone.timezone,
        ..ReadOptions::default()
    };
    // a bundled trace is read in the zone it was recorded in
    if let Some(name) = &args.dataset {
        opts = Dataset::parse(name)?.read_options(&opts);
    }
    let files = input_files(args)?;
    let mut failed = 0usize;
    let mut results = Vec::new();
    for (path, fmt) in &files {
        let fmt = fmt.or(format);
        let inspection = inspect_file(path, fmt, &opts);
        if let Inspection::Error { error, .. } = &inspection {
            failed += 1;
            if args.strict || files.len() == 1 {
                bail!("{error}");
            }
        }
        if args.json {
            results.push(inspection);
        } else {
            print_text(&inspection, args.show_issues);
        }
    }
    if args.json {
        let out = if results.len() == 1 {
            serde_json::to_string_pretty(&results[0])?
        } else {
            serde_json::to_string_pretty(&results)?
        };
        println!("{out}");
    }
    if failed > 0 {
        bail!("{failed} of {} file(s) could not be read", files.len());
    }
    Ok(())
}

/// The files to inspect, each with the format implied by how it was named (bundled datasets).
fn input_files(args: &InspectArgs) -> anyhow::Result<Vec<(PathBuf, Option<TraceFormat>)>> {
    if let Some(name) = &args.dataset {
        let ds = Dataset::parse(name)?;
        return Ok(ds
            .files()?
            .into_iter()
            .map(|p| (p, Some(ds.format())))
            .collect());
    }
    if args.paths.is_empty() {
        let ds = Dataset::Philly;
        return Ok(ds
            .files()?
            .into_iter()
            .map(|p| (p, Some(ds.format())))
            .collect());
    }
    let mut out = Vec::new();
    for p in &args.paths {
        if p.is_dir() {
            out.extend(trace_files(p)?.into_iter().map(|f| (f, None)));
        } else if p.exists() {
            out.push((p.clone(), None));
        } else {
            bail!("{}: no such file or folder", p.display());
        }
    }
    Ok(out)
}

fn inspect_file(path: &Path, format: Option<TraceFormat>, opts: &ReadOptions) -> Inspection {
    let shown = path.display().to_string();
    let format = match format.map(Ok).unwrap_or_else(|| detect_format(path)) {
        Ok(f) => f,
        Err(e) => {
            return Inspection::Error {
                path: shown,
                error: e.to_string(),
            }
        }
    };
    if !format.is_job_trace() {
        return match summarize_file(path, format, opts) {
            Ok(summary) => Inspection::Other {
                path: shown,
                summary,
            },
            Err(e) => Inspection::Error {
                path: shown,
                error: e.to_string(),
            },
        };
    }
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {msg} {human_pos} rows ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    progress.set_message(format!("reading {}", path.display()));
    let mut summarizer = JobSummarizer::default();
    let mut seen: u64 = 0;
    let result = read_jobs(path, Some(format), opts, &mut |r| {
        summarizer.observe(&r);
        seen += 1;
        if seen.is_multiple_of(65_536) {
            progress.set_position(seen);
        }
    });
    progress.finish_and_clear();
    match result {
        Ok(report) => Inspection::Jobs {
            path: shown,
            format,
            summary: Box::new(summarizer.finish()),
            report: Box::new(report),
        },
        Err(e) => Inspection::Error {
            path: shown,
            error: e.to_string(),
        },
    }
}

fn print_report(report: &ReadReport, show_issues: usize) {
    println!(
        "  rows       {} read, {} kept, {} dropped",
        thousands(report.rows_read),
        thousands(report.rows_kept),
        thousands(report.rows_dropped())
    );
    for (reason, n) in &report.dropped_by_reason {
        println!("    dropped  {:>8}  {reason}", thousands(*n));
    }
    for issue in report.issues.iter().take(show_issues) {
        println!("    e.g.     {issue}");
    }
    for note in &report.notes {
        println!("  note       {note}");
    }
}

fn print_quantiles(label: &str, q: &Quantiles) {
    if q.count == 0 {
        println!("  {label:<10} (none in this trace)");
        return;
    }
    let f = |v: Option<f64>| v.map(duration).unwrap_or_else(|| "-".into());
    println!(
        "  {label:<10} n={}  min {}  p10 {}  p50 {}  p90 {}  p99 {}  max {}  mean {}",
        thousands(q.count),
        f(q.min),
        f(q.p10),
        f(q.p50),
        f(q.p90),
        f(q.p99),
        f(q.max),
        f(q.mean)
    );
}

fn print_text(inspection: &Inspection, show_issues: usize) {
    match inspection {
        Inspection::Error { path, error } => {
            println!("{path}\n  error      {error}\n");
        }
        Inspection::Other { path, summary } => {
            println!("{path}  [{}]", summary.format);
            print_report(&summary.report, show_issues);
            for (k, v) in &summary.facts {
                println!("  {k:<10} {v}");
            }
            println!();
        }
        Inspection::Jobs {
            path,
            format,
            report,
            summary,
        } => {
            println!("{path}  [{format}]");
            print_report(report, show_issues);
            if let Some((lo, hi)) = summary.submit_span {
                println!(
                    "  submitted  {} .. {}  ({})",
                    instant(lo, report.time_origin),
                    instant(hi, report.time_origin),
                    duration(hi - lo)
                );
            }
            let nulls: Vec<String> = augur_datasets::schema::COLUMNS
                .iter()
                .filter_map(|c| summary.null_share.get(*c).map(|s| (c, s)))
                .filter(|(_, s)| **s > 0.0)
                .map(|(c, s)| format!("{c} {:.1}%", s * 100.0))
                .collect();
            if !nulls.is_empty() {
                println!("  nulls      {}", nulls.join(", "));
            }
            let status: Vec<String> = summary
                .status
                .iter()
                .map(|(s, n)| format!("{s} {}", thousands(*n)))
                .collect();
            println!("  status     {}", status.join(", "));
            let distinct: Vec<String> = summary
                .distinct
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {}", thousands(*n as u64)))
                .collect();
            if !distinct.is_empty() {
                println!("  distinct   {}", distinct.join(", "));
            }
            print_quantiles("runtime", &summary.runtime);
            print_quantiles("queue wait", &summary.queue_wait);
            if !summary.gpu_histogram.is_empty() {
                println!("  GPUs requested");
                let mut rows: Vec<(&String, &u64)> = summary.gpu_histogram.iter().collect();
                rows.sort_by_key(|(label, _)| gpu_sort_key(label));
                let max = rows.iter().map(|(_, n)| **n).max().unwrap_or(0);
                for (label, n) in rows {
                    println!("    {label:>10} {:>9}  {}", thousands(*n), bar(*n, max, 40));
                }
            }
            println!();
        }
    }
}

fn gpu_sort_key(label: &str) -> u64 {
    let head = label.split('-').next_back().unwrap_or(label);
    head.parse::<u64>().unwrap_or(u64::MAX)
}
