//! Prediction latency of the failure predictor (openb) and the queue-wait predictor (mira),
//! on the service's online path: for each test job at its submit, the feature state's
//! `features_for` plus the model(s), with the states fed the trace's events as they happen.
//! Training time is printed too (it is not the point here).
//!
//! `cargo bench -p augur-predictor --bench failure` (plain timing, no harness; prints a table).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions, TimeSplit};
use augur_features::{finish_time, FeatureState, JobHandle};
use augur_predictor::failure::{score_failure, FailureData, SvmScratch};
use augur_predictor::{
    train_and_evaluate_queue_wait, FailureTrainer, QueueEvent, QueueJob, QueueWaitTrainer,
};

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn load(ds: Dataset) -> Result<Vec<JobRecord>, Box<dyn std::error::Error>> {
    let (table, _) = ds.load(&ReadOptions::default())?;
    Ok(table.to_records()?)
}

fn test_mask(jobs: &[JobRecord]) -> Vec<bool> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let mut is_test = vec![false; jobs.len()];
    for &i in split.test() {
        is_test[i] = true;
    }
    is_test
}

/// Jobs in submit order (ties by index).
fn submit_order(jobs: &[JobRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[a]
            .submit_time
            .total_cmp(&jobs[b].submit_time)
            .then(a.cmp(&b))
    });
    order
}

fn failure(rows: &mut Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let jobs = load(Dataset::Openb)?;
    let t = Instant::now();
    let data = FailureData::new(&jobs)?;
    let p = FailureTrainer::default().train(&data)?;
    std::hint::black_box(score_failure(&data, &p));
    let eval_s = t.elapsed().as_secs_f64();
    let is_test = test_mask(&jobs);
    let mut buf = Vec::new();
    let mut scratch = SvmScratch::default();
    let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut handles: Vec<Option<JobHandle>> = vec![None; jobs.len()];
    let mut us = Vec::new();
    let mut sink = 0.0;
    // repeat the online replay a few times: openb has only ~1.6k test pods
    for _ in 0..5 {
        let mut state = p.new_state();
        ends.clear();
        for &i in &submit_order(&jobs) {
            let now = jobs[i].submit_time;
            while let Some(Reverse((t, j))) = ends.peek().copied() {
                if f64::from_bits(t) > now {
                    break;
                }
                ends.pop();
                if let Some(h) = handles[j] {
                    state.observe_finish(h, f64::from_bits(t), jobs[j].duration, jobs[j].status)?;
                }
            }
            if is_test[i] {
                let t = Instant::now();
                let pred = p.predict(&mut state, &jobs[i], now, &mut buf, &mut scratch)?;
                us.push(t.elapsed().as_secs_f64() * 1e6);
                sink += pred.probability;
            }
            handles[i] = Some(state.observe_submit(&jobs[i]));
            if let Some(end) = finish_time(&jobs[i]) {
                // finish times are non-negative in openb, so their bits order like the values
                ends.push(Reverse((end.max(0.0).to_bits(), i)));
            }
        }
    }
    let (sv, trees) = p.sizes();
    rows.push(format!(
        "failure · openb ({} test pods × 5) | features + GBDT ({trees} trees) + SVM ({sv} support vectors), both calibrated | p50 {:.1} µs, p99 {:.1} µs | evaluate (features, both models, baselines) {:.2} s",
        us.len() / 5,
        percentile(&mut us, 0.5),
        percentile(&mut us, 0.99),
        eval_s
    ));
    std::hint::black_box(sink);
    Ok(())
}

fn queue_wait(rows: &mut Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let jobs = load(Dataset::Mira)?;
    let t = Instant::now();
    let (p, _) = train_and_evaluate_queue_wait(&jobs, &QueueWaitTrainer::default())?;
    let eval_s = t.elapsed().as_secs_f64();
    let is_test = test_mask(&jobs);
    let mut history = FeatureState::new(p.runtime.schema.clone());
    let mut queue = p.new_state();
    let placeholders: Vec<QueueJob> = jobs
        .iter()
        .map(|j| QueueJob::from_record(j, p.resource, 0.0))
        .collect();
    let mut row = vec![0f32; p.n_features()];
    let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut handles: Vec<Option<JobHandle>> = vec![None; jobs.len()];
    let mut us = Vec::new();
    let mut sink = 0.0;
    for ev in QueueEvent::of_trace(&jobs, &placeholders) {
        match ev {
            QueueEvent::Submit { id, .. } => {
                let i = id as usize;
                let now = jobs[i].submit_time;
                while let Some(Reverse((t, j))) = ends.peek().copied() {
                    if f64::from_bits(t) > now {
                        break;
                    }
                    ends.pop();
                    if let (Some(h), Some(d)) = (handles[j], jobs[j].duration) {
                        history.observe_finish(h, f64::from_bits(t), d, jobs[j].status)?;
                    }
                }
                let t = Instant::now();
                let qj = p.features_for(&mut history, &queue, &jobs[i], now, &mut row)?;
                let pred = p.predict_row(&row);
                if is_test[i] {
                    us.push(t.elapsed().as_secs_f64() * 1e6);
                    sink += pred.seconds;
                }
                queue.apply(&QueueEvent::Submit { id, job: qj })?;
                handles[i] = Some(history.observe_submit(&jobs[i]));
                if jobs[i].duration.is_some() {
                    if let Some(end) = finish_time(&jobs[i]) {
                        ends.push(Reverse((end.max(0.0).to_bits(), i)));
                    }
                }
            }
            other => queue.apply(&other)?,
        }
    }
    rows.push(format!(
        "queue wait · mira ({} test jobs) | history features + runtime model + queue state (with its forward simulation) + point, short-wait and bound models | p50 {:.1} µs, p99 {:.1} µs | evaluate (train + baselines) {:.2} s",
        us.len(),
        percentile(&mut us, 0.5),
        percentile(&mut us, 0.99),
        eval_s
    ));
    std::hint::black_box(sink);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    failure(&mut rows)?;
    queue_wait(&mut rows)?;
    println!("predictor | one online prediction | latency | training");
    for r in rows {
        println!("{r}");
    }
    Ok(())
}
