//! Load benchmark (plain `std::time::Instant`, no framework):
//!
//! 1. loading the bundled Philly trace into a `JobTable` (best and median of 10 runs);
//! 2. a **synthetic** 10-million-row standard SWF file (`augur_datasets::synthetic`, made-up
//!    jobs), read the way `augur data inspect` reads (streaming into a `JobSummarizer`) and
//!    loaded whole into a `JobTable`: rows/s and peak RSS. Each peak RSS is the `VmHWM` of a
//!    fresh child process (this binary re-run with `--child MODE FILE`), so each number is
//!    that path's own peak. A 1M-row file is measured too, to show which peak grows with size.
//!
//! ```sh
//! CARGO_TARGET_DIR=/root/.cache/augur-target cargo bench -p augur-datasets --bench load
//! ```
//!
//! `AUGUR_BENCH_ROWS` sets the large file's rows (default 10,000,000), `AUGUR_BENCH_DIR` where
//! the synthetic files go (default: a temporary folder; they are deleted either way). Run
//! without `--bench` (as `cargo test --benches` does) it is a quick smoke run on small sizes.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use augur_datasets::bundled::Dataset;
use augur_datasets::summary::JobSummarizer;
use augur_datasets::synthetic::write_synthetic_swf;
use augur_datasets::{load_jobs, read_jobs, ReadOptions, TraceFormat};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.iter().position(|a| a == "--child") {
        Some(i) => match (args.get(i + 1), args.get(i + 2)) {
            (Some(mode), Some(file)) => child(mode, Path::new(file)),
            _ => Err("usage: load --child MODE FILE".into()),
        },
        None => parent(args.iter().any(|a| a == "--bench")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load bench: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Peak resident set size of this process so far, in KiB (`VmHWM` in `/proc/self/status`).
fn peak_rss_kib() -> Res<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM in /proc/self/status".into())
}

/// One measurement in a fresh process: prints `rows secs peak_kib`.
fn child(mode: &str, file: &Path) -> Res<()> {
    let opts = ReadOptions::default();
    let start = Instant::now();
    let rows = match mode {
        "baseline" => 0,
        "stream" => {
            let mut summary = JobSummarizer::default();
            let report = read_jobs(file, Some(TraceFormat::Swf), &opts, &mut |r| {
                summary.observe(&r)
            })?;
            let s = summary.finish();
            if s.jobs != report.rows_kept {
                return Err(format!("summarised {} of {} jobs", s.jobs, report.rows_kept).into());
            }
            report.rows_kept
        }
        "load" => {
            let (table, _) = load_jobs(file, Some(TraceFormat::Swf), &opts)?;
            table.len() as u64
        }
        other => return Err(format!("unknown mode {other}").into()),
    };
    let secs = start.elapsed().as_secs_f64();
    println!("{rows} {secs} {}", peak_rss_kib()?);
    Ok(())
}

/// What a child measured.
struct Measured {
    rows: u64,
    secs: f64,
    peak_mib: f64,
}

fn run_child(mode: &str, file: &Path) -> Res<Measured> {
    let out = Command::new(std::env::current_exe()?)
        .args(["--child", mode])
        .arg(file)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "child `{mode}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let text = String::from_utf8(out.stdout)?;
    let mut it = text.split_whitespace();
    let mut next = || it.next().ok_or("short child output");
    Ok(Measured {
        rows: next()?.parse()?,
        secs: next()?.parse()?,
        peak_mib: next()?.parse::<f64>()? / 1024.0,
    })
}

fn parent(full: bool) -> Res<()> {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("augur-datasets load benchmark ({profile} build)");

    // 1. The bundled Philly trace into a JobTable.
    let runs = if full { 10 } else { 1 };
    let mut ms = Vec::with_capacity(runs);
    let mut jobs = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let (table, _) = Dataset::Philly.load(&ReadOptions::default())?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
        jobs = table.len();
    }
    let best = ms.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "philly (bundled) → JobTable: {jobs} jobs, best {best:.1} ms, median {:.1} ms of {runs} runs",
        augur_numeric::median(&mut ms).unwrap_or(f64::NAN)
    );

    // 2. Synthetic SWF: streaming summary vs. full load, peak RSS per fresh process.
    let large: u64 = match std::env::var("AUGUR_BENCH_ROWS") {
        Ok(v) => v.parse()?,
        Err(_) if full => 10_000_000,
        Err(_) => 20_000,
    };
    let small = (large / 10).max(1);
    let tmp;
    let dir: PathBuf = match std::env::var_os("AUGUR_BENCH_DIR") {
        Some(d) => d.into(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir)?;
    let baseline = run_child("baseline", Path::new("-"))?;
    println!(
        "baseline peak RSS of a child that reads nothing: {:.1} MiB",
        baseline.peak_mib
    );
    println!(
        "{:>12}  {:<28} {:>10} {:>14} {:>14}",
        "rows", "path", "seconds", "rows/s", "peak RSS MiB"
    );
    for rows in [small, large] {
        let file = dir.join(format!("synthetic-{rows}.swf"));
        let start = Instant::now();
        if let Err(e) = write_synthetic_swf(&file, rows, 42) {
            // A partly written file is not left behind (e.g. a full disk).
            let _ = std::fs::remove_file(&file);
            return Err(e.into());
        }
        let size = std::fs::metadata(&file)?.len();
        println!(
            "{rows:>12}  SYNTHETIC file written: {:.0} MiB in {:.1} s",
            size as f64 / (1u64 << 20) as f64,
            start.elapsed().as_secs_f64()
        );
        let measured = [
            ("streaming summary (inspect)", "stream"),
            ("full load into JobTable", "load"),
        ]
        .map(|(label, mode)| (label, run_child(mode, &file)));
        std::fs::remove_file(&file)?;
        for (label, m) in measured {
            let m = m?;
            if m.rows != rows {
                return Err(format!("{label}: {} of {rows} rows", m.rows).into());
            }
            println!(
                "{rows:>12}  {label:<28} {:>10.2} {:>14.0} {:>14.1}",
                m.secs,
                m.rows as f64 / m.secs,
                m.peak_mib
            );
        }
    }
    Ok(())
}
