//! DAG model speed: end-to-end training of the served model (encoder, GBDT base with inner
//! folds, GRU, makespan correction) on every job of each bundled DAG dataset, and the
//! latency of one job's prediction
//! (encoding + GBDT base + GRU forward pass in plain Rust + critical path + correction).
//!
//! `cargo bench -p augur-predictor --bench dag` (plain timing, no harness; prints a table).

use std::path::Path;
use std::time::Instant;

use augur_predictor::dag::{load_tpch, load_wfcommons, DagDataset, DagTrainer};

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn bench(data: &DagDataset) -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let model = DagTrainer::default().fit(&data.name, &data.jobs, &data.groups)?;
    let train_s = t.elapsed().as_secs_f64();
    let stages: usize = data.jobs.iter().map(|j| j.stages.len()).sum();
    // per-job latency, three passes (the first warms caches)
    let mut lat = Vec::with_capacity(data.jobs.len());
    for pass in 0..3 {
        for job in &data.jobs {
            let t = Instant::now();
            let p = model.predict(job)?;
            let dt = t.elapsed().as_secs_f64();
            std::hint::black_box(p);
            if pass > 0 {
                lat.push(dt * 1e6);
            }
        }
    }
    let per_stage = lat.iter().sum::<f64>() / (2 * stages) as f64;
    println!(
        "{:<14} {:>6} {:>7} {:>9.1} {:>7} {:>10.1} {:>10.1} {:>10.2}",
        data.name,
        data.jobs.len(),
        stages,
        train_s,
        model.stage_model.epochs(),
        percentile(&mut lat, 0.5),
        percentile(&mut lat, 0.99),
        per_stage
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/data");
    println!(
        "{:<14} {:>6} {:>7} {:>9} {:>7} {:>10} {:>10} {:>10}",
        "dataset", "jobs", "stages", "train s", "epochs", "p50 µs", "p99 µs", "µs/stage"
    );
    bench(&load_tpch(&data.join("dag-tpch/tpch_dags.json.gz"))?)?;
    bench(&load_wfcommons(&data.join("dag-wfcommons"))?)?;
    Ok(())
}
