//! **Synthetic** job logs for benchmarks: made-up jobs with plausible values, *not* trace data.
//!
//! Nothing here comes from a real cluster. The only use is to have a file of any size in a
//! real format (to measure how fast and in how much memory the readers go through it); no
//! model is trained or evaluated on it, and no number about jobs should be read off it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use augur_numeric::SplitMix64;

use crate::error::DatasetError;

/// Log-normal with the given median and log-space sigma.
fn log_normal(rng: &mut SplitMix64, median: f64, sigma: f64) -> f64 {
    median * (sigma * rng.normal()).exp()
}

/// Writes a **SYNTHETIC** standard-SWF job log (18 fields, see [`crate::jobs::swf`]) of
/// `rows` made-up jobs to `path`, the same bytes for the same `seed`. It is not a trace: the
/// header says so (`; SYNTHETIC ...`), and it exists to benchmark the readers on files of any
/// size (`datasets/benches/load.rs`).
///
/// The values are plausible for an HPC/GPU batch log, not fitted to one: Poisson arrivals
/// (mean gap 20 s), no queue wait for 40% of jobs and a log-normal one (median 2 min) for the
/// rest, log-normal run times (median 10 min, capped at 7 days), power-of-two processor counts,
/// requested times above the run time, status 85% completed / 10% failed / 5% cancelled, and
/// 5,000 users with a heavy-tailed share of jobs.
pub fn write_synthetic_swf(path: &Path, rows: u64, seed: u64) -> Result<(), DatasetError> {
    let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    write_rows(&mut out, rows, seed)
        .and_then(|()| out.flush())
        .map_err(|e| DatasetError::io(path, e))
}

fn write_rows(out: &mut impl Write, rows: u64, seed: u64) -> std::io::Result<()> {
    const WEEK: f64 = 7.0 * 86_400.0;
    writeln!(
        out,
        "; SYNTHETIC job log: made-up jobs from augur_datasets::synthetic::write_synthetic_swf (seed {seed}), not a trace"
    )?;
    writeln!(out, "; Version: 2.2")?;
    writeln!(out, "; Computer: none (synthetic)")?;
    writeln!(out, "; UnixStartTime: 1700000000")?;
    writeln!(out, "; MaxJobs: {rows}")?;
    writeln!(out, "; MaxRecords: {rows}")?;
    writeln!(out, "; MaxProcs: 4096")?;
    let mut rng = SplitMix64(seed);
    let mut submit = 0.0f64;
    for id in 1..=rows {
        submit += -rng.unit_open().ln() * 20.0;
        let wait = if rng.unit_open() < 0.4 {
            0.0
        } else {
            log_normal(&mut rng, 120.0, 1.5).min(WEEK)
        };
        let run = log_normal(&mut rng, 600.0, 2.0).clamp(1.0, WEEK);
        // 1, 2, 4, ... 4096 processors, small counts most likely.
        let procs = 1u64 << (-rng.unit_open().ln() * 2.0).min(12.0) as u32;
        let cpu = run * (0.5 + 0.5 * rng.unit_open());
        let requested = (run * (1.0 + 3.0 * rng.unit_open())).min(2.0 * WEEK);
        let mem_kb = 1024u64 << (rng.next_u64() % 6);
        let status = match rng.unit_open() {
            u if u < 0.85 => 1,
            u if u < 0.95 => 0,
            _ => 5,
        };
        let user = (5000f64.powf(rng.unit_open()) as u64).clamp(1, 5000);
        let app = 1 + rng.next_u64() % 200;
        let queue = 1 + rng.next_u64() % 4;
        writeln!(
            out,
            "{id} {} {} {} {procs} {} -1 {procs} {} {mem_kb} {status} {user} {} {app} {queue} 1 -1 -1",
            submit as u64,
            wait as u64,
            run as u64,
            cpu as u64,
            requested as u64,
            1 + user % 50,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{read_jobs, ReadOptions, TraceFormat};

    #[test]
    fn synthetic_swf_is_deterministic_labelled_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a.swf"),
            dir.path().join("b.swf"),
            dir.path().join("c.swf"),
        );
        write_synthetic_swf(&a, 2000, 7).unwrap();
        write_synthetic_swf(&b, 2000, 7).unwrap();
        write_synthetic_swf(&c, 2000, 8).unwrap();
        let (bytes_a, bytes_c) = (std::fs::read(&a).unwrap(), std::fs::read(&c).unwrap());
        assert_eq!(bytes_a, std::fs::read(&b).unwrap());
        assert_ne!(bytes_a, bytes_c);
        assert!(bytes_a.starts_with(b"; SYNTHETIC job log"));

        let mut jobs = Vec::new();
        let report = read_jobs(
            &a,
            Some(TraceFormat::Swf),
            &ReadOptions::default(),
            &mut |r| jobs.push(r),
        )
        .unwrap();
        assert_eq!((report.rows_read, report.rows_kept), (2000, 2000));
        assert!(jobs
            .windows(2)
            .all(|w| w[0].submit_time <= w[1].submit_time));
        assert!(jobs[0].submit_time >= 1_700_000_000.0);
        let runs: Vec<f64> = jobs.iter().filter_map(|j| j.duration).collect();
        assert_eq!(runs.len(), 2000);
        assert!(runs.iter().all(|&r| (1.0..=7.0 * 86_400.0).contains(&r)));
        let completed = jobs
            .iter()
            .filter(|j| j.status == crate::JobStatus::Completed)
            .count();
        assert!((1550..1850).contains(&completed), "{completed}");
        assert!(jobs
            .iter()
            .all(|j| j.requested_time >= j.duration && j.cpus.is_some_and(|c| c >= 1.0)));
    }
}
