//! Runtime-predictor speed on the bundled Philly trace: end-to-end training, one online
//! prediction (features + model), 100k batch predictions.
//!
//! `cargo bench -p augur-predictor --bench runtime` (plain timing, no harness; prints a table).

use std::time::Instant;

use augur_datasets::bundled::Dataset;
use augur_datasets::split::clamp_duration;
use augur_datasets::{ReadOptions, TimeSplit};
use augur_features::{batch_features, FeatureSchema, FeatureState, JobHandle, TraceEvent};
use augur_models::Matrix;
use augur_predictor::{RuntimePredictor, RuntimeTrainer};

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let (table, _) = Dataset::Philly.load(&ReadOptions::default())?;
    let jobs = table.to_records()?;
    let load_s = t.elapsed().as_secs_f64();

    // end to end: schema, features of every job, training (2 members + refits)
    let t = Instant::now();
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let train_rows: Vec<usize> = split
        .train()
        .iter()
        .copied()
        .filter(|&i| jobs[i].duration.is_some())
        .collect();
    let train_jobs: Vec<_> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
    let schema = FeatureSchema::for_jobs(&train_jobs);
    let x = batch_features(&jobs, &schema);
    let features_s = t.elapsed().as_secs_f64();
    let y: Vec<f64> = jobs
        .iter()
        .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
        .collect();
    let predictor: RuntimePredictor =
        RuntimeTrainer::default().train(&schema, &x, &y, &train_rows)?;
    let train_s = t.elapsed().as_secs_f64();

    // online: replay the training period into a FeatureState, then time features + model
    // for each test job at its submit (the service's path), feeding events as they happen
    let d = schema.len();
    let mut state = FeatureState::new(schema.clone());
    let mut handles: Vec<Option<JobHandle>> = vec![None; jobs.len()];
    let mut is_test = vec![false; jobs.len()];
    for &i in split.test() {
        is_test[i] = true;
    }
    let mut row = vec![0f32; d];
    let mut single_us = Vec::new();
    let mut sink = 0.0;
    for ev in TraceEvent::of_trace(&jobs) {
        match ev {
            TraceEvent::Submit { index, at } => {
                let timed = is_test[index];
                let t = Instant::now();
                state.features_for(&jobs[index], at, &mut row)?;
                if timed {
                    let p = predictor.predict_row(&row);
                    single_us.push(t.elapsed().as_secs_f64() * 1e6);
                    sink += p.seconds;
                }
                handles[index] = Some(state.observe_submit(&jobs[index]));
            }
            TraceEvent::Finish { index, at } => {
                if let Some(h) = handles[index] {
                    let j = &jobs[index];
                    state.observe_finish(h, at, j.duration.unwrap_or(0.0), j.status)?;
                }
            }
        }
    }

    // batch: 100k rows (test rows repeated) through the model
    let test: Vec<usize> = split.test().to_vec();
    let n_batch = 100_000;
    let mut bx = Vec::with_capacity(n_batch * d);
    for k in 0..n_batch {
        let i = test[k % test.len()];
        bx.extend_from_slice(&x[i * d..(i + 1) * d]);
    }
    let m = Matrix::new(&bx, n_batch, d)?;
    let mut batch_s = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let p = predictor.predict_batch(&m)?;
        batch_s.push(t.elapsed().as_secs_f64());
        sink += p[0].seconds;
    }

    let n_single = single_us.len();
    let p50 = percentile(&mut single_us, 0.5);
    let p99 = percentile(&mut single_us, 0.99);
    let batch_best = batch_s.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "runtime predictor on philly ({} jobs, {d} features)",
        jobs.len()
    );
    println!("  load trace                      {load_s:8.3} s");
    println!("  features (all jobs)             {features_s:8.3} s");
    println!("  train end to end (target < 20)  {train_s:8.3} s");
    println!("  one prediction, features+model  {p50:8.2} µs p50, {p99:.2} µs p99 over {n_single} jobs (target < 50)");
    println!("  100k batch predictions          {batch_best:8.3} s best of 5 (target < 1)");
    println!(
        "  members: {}",
        predictor
            .members
            .iter()
            .map(|m| format!("{:.2} × {}", m.weight, m.name))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    if sink.is_nan() {
        println!("(nan)");
    }
    Ok(())
}
