//! Replay speed: all 82k Philly jobs through the simulator, per policy.
//!
//! `cargo bench -p augur-autoscaler --bench replay` (release). Environment knobs:
//! `AUGUR_BENCH_GPUS` (cluster size, default 200), `AUGUR_BENCH_POLICIES` (comma-separated,
//! default `fifo,elastic`), `AUGUR_BENCH_REPEAT` (default 3; the best time is reported).
//!
//! Predictions here are the true durations times a deterministic log-normal error with about
//! the spread of Augur's Philly predictor, so the bench does not need the predictor;
//! `augur simulate` uses the real one.

use std::time::Instant;

use augur_autoscaler::by_name;
use augur_autoscaler::sim::{jobs_from_records, ClusterSpec, SimConfig, Simulator};
use augur_datasets::bundled::Dataset;
use augur_datasets::ReadOptions;
use augur_numeric::SplitMix64;

fn noisy(i: usize) -> f64 {
    // two SplitMix64 draws → Box-Muller normal
    let mut rng = SplitMix64((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef);
    let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
    let n = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (1.5 * n).exp() // E|1.5 N| ≈ 1.2
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let gpus: u32 = std::env::var("AUGUR_BENCH_GPUS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let policies = std::env::var("AUGUR_BENCH_POLICIES").unwrap_or_else(|_| "fifo,elastic".into());
    let repeat: usize = std::env::var("AUGUR_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let t = Instant::now();
    let (table, _) = Dataset::Philly.load(&ReadOptions::default())?;
    let records = table.to_records()?;
    let predicted: Vec<Option<f64>> = records
        .iter()
        .enumerate()
        .map(|(i, r)| r.duration.map(|d| d.max(1.0) * noisy(i)))
        .collect();
    let (jobs, _) = jobs_from_records(&records, &predicted);
    println!(
        "philly: {} jobs loaded in {:.2}s; cluster {gpus} GPUs (8 per node)",
        jobs.len(),
        t.elapsed().as_secs_f64()
    );
    for name in policies.split(',') {
        let mut best = f64::INFINITY;
        let mut last = None;
        for _ in 0..repeat.max(1) {
            let cfg = SimConfig::new(ClusterSpec::homogeneous(gpus, 8, 16)?);
            let scaling = cfg.scaling;
            let mut policy = by_name(name, scaling).ok_or(format!("unknown policy {name}"))?;
            let sim = Simulator::new(jobs.clone(), cfg)?;
            let t = Instant::now();
            let res = sim.run(policy.as_mut());
            best = best.min(t.elapsed().as_secs_f64());
            last = Some(res);
        }
        if let Some(res) = last {
            let s = res.summary();
            println!(
                "{name:<12} replay {best:>6.2}s  {:>8.0} jobs/s  events {}  policy calls {}  avg JCT {:.2}h  avg wait {:.2}h  p99 wait {:.1}h  util {:.1}%  rescales {}  suspensions {}  unfinished {}",
                res.jobs.len() as f64 / best,
                res.events,
                res.policy_calls,
                s.avg_jct / 3600.0,
                s.avg_wait / 3600.0,
                s.p99_wait / 3600.0,
                s.utilisation * 100.0,
                s.rescales,
                s.suspensions,
                s.unfinished
            );
        }
    }
    Ok(())
}
