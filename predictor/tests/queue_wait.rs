//! The queue-wait predictor: its queue state never sees a job's own future, the replay and
//! the online event path agree, and on the bundled Mira trace it meets its targets.

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions};
use augur_predictor::queue_wait::{
    infer_capacity, replay_queue_features, ResourceKind, QUEUE_FEATURES,
};
use augur_predictor::{
    train_and_evaluate_queue_wait, train_and_evaluate_queue_wait_with, QueueJob, QueueState,
    QueueWaitPredictor, QueueWaitRun, QueueWaitTrainer, RiskGroup, RuntimeSplit,
};

fn mira() -> Vec<JobRecord> {
    let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
    table.to_records().unwrap()
}

/// Queue views of the first `n` Mira jobs (in submit order), predicted run time = requested.
fn sample(n: usize) -> (Vec<JobRecord>, Vec<QueueJob>, f64) {
    sample_of(mira(), n)
}

/// Queue views of the first `n` of `jobs` (in submit order), predicted run time = requested,
/// in the resource the trainer would pick for them.
fn sample_of(mut jobs: Vec<JobRecord>, n: usize) -> (Vec<JobRecord>, Vec<QueueJob>, f64) {
    jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    jobs.truncate(n);
    let resource = ResourceKind::for_jobs(&jobs);
    let q: Vec<QueueJob> = jobs
        .iter()
        .map(|j| QueueJob::from_record(j, resource, j.requested_time.unwrap_or(3600.0)))
        .collect();
    let rows: Vec<usize> = (0..jobs.len()).collect();
    let cap = infer_capacity(&jobs, &rows, resource, 0.99);
    (jobs, q, cap)
}

#[test]
fn queue_state_never_counts_a_jobs_own_future() {
    let (jobs, q, cap) = sample(3000);
    let d = QUEUE_FEATURES.len();
    let base = replay_queue_features(&jobs, &q, cap).unwrap();
    // rewrite the future (start, wait, end, duration) of some jobs, one at a time: their own
    // feature rows must not change, bit for bit
    for k in [5usize, 100, 777, 1500, 2999] {
        for (start_shift, dur) in [(0.0, 1.0), (3.0e5, 9.0e4), (17.0, 0.0)] {
            let mut alt = jobs.clone();
            let j = &mut alt[k];
            let start = j.submit_time + start_shift;
            j.start_time = Some(start);
            j.queue_wait = Some(start_shift);
            j.duration = Some(dur);
            j.end_time = Some(start + dur);
            let x = replay_queue_features(&alt, &q, cap).unwrap();
            let (a, b) = (&base[k * d..(k + 1) * d], &x[k * d..(k + 1) * d]);
            assert!(
                a.iter().zip(b).all(|(u, v)| u.to_bits() == v.to_bits()),
                "job {k} saw its own future: {a:?} vs {b:?}"
            );
        }
    }
}

#[test]
fn a_job_starting_at_its_submit_is_not_running_for_itself() {
    let job = |id: &str, submit: f64, wait: f64, dur: f64, nodes: f64| {
        let mut j = JobRecord {
            job_id: id.into(),
            submit_time: submit,
            queue_wait: Some(wait),
            duration: Some(dur),
            num_nodes: Some(nodes),
            requested_time: Some(2.0 * dur),
            user: Some("u".into()),
            ..Default::default()
        };
        j.derive_times();
        j
    };
    // a and b are submitted and start at t = 0; c comes at 50 while both run; d at 100, when
    // a has just ended; e at 300 after both ended
    let jobs = vec![
        job("a", 0.0, 0.0, 100.0, 10.0),
        job("b", 0.0, 0.0, 200.0, 20.0),
        job("c", 50.0, 500.0, 10.0, 5.0),
        job("d", 100.0, 0.0, 10.0, 1.0),
        job("e", 300.0, 0.0, 10.0, 1.0),
    ];
    let q: Vec<QueueJob> = jobs
        .iter()
        .map(|j| QueueJob::from_record(j, ResourceKind::Nodes, j.duration.unwrap()))
        .collect();
    let x = replay_queue_features(&jobs, &q, 40.0).unwrap();
    let d = QUEUE_FEATURES.len();
    let f = |i: usize, name: &str| {
        let c = QUEUE_FEATURES.iter().position(|f| *f == name).unwrap();
        x[i * d + c]
    };
    // a sees an empty cluster; b sees a queued (a's start at t = 0 is not yet applied), not
    // running, and not its own start
    assert_eq!((f(0, "q_jobs"), f(0, "busy")), (0.0, 0.0));
    assert_eq!(
        (f(1, "q_jobs"), f(1, "busy"), f(1, "r_jobs")),
        (1.0, 0.0, 0.0)
    );
    assert_eq!(f(1, "user_queued"), 1.0);
    assert!(
        f(1, "wait_last1").is_nan(),
        "no job has started before t = 0"
    );
    // c: both running (30 nodes), no queue; the last known wait is 0
    assert_eq!(
        (f(2, "busy"), f(2, "r_jobs"), f(2, "q_jobs")),
        (30.0, 2.0, 0.0)
    );
    assert_eq!(f(2, "wait_last1"), 0.0);
    // d at 100: a's end at 100 is known, c is still queued (it starts at 550)
    assert_eq!((f(3, "busy"), f(3, "q_jobs")), (20.0, 1.0));
    assert_eq!(f(3, "q_age_max"), 50.0);
    // e at 300: b ended at 200, d ran 100..110; c still waits
    assert_eq!(
        (f(4, "busy"), f(4, "q_jobs"), f(4, "r_jobs")),
        (0.0, 1.0, 0.0)
    );
    // with c queued and the cluster free, the simulation starts c and e at once
    assert_eq!(f(4, "sim_pred"), 0.0);
    // d's own wait (0) was known to e, c's (500) was not
    assert_eq!(f(4, "wait_last1"), 0.0);
}

#[test]
fn replay_and_online_events_agree() {
    replay_and_online_agree_on(sample(4000));
}

/// The same with partitions, CPUs and GPUs: the first Mira jobs, each given a partition by
/// its size and CPUs and GPUs by its nodes (synthetic requests on real submit, start and end
/// times; Mira's own trace names none), so the per-partition and CPU/GPU features are one
/// computation offline and online too.
#[test]
fn replay_and_online_events_agree_per_partition() {
    let jobs: Vec<JobRecord> = mira()
        .into_iter()
        .map(|mut j| {
            let nodes = j.num_nodes.unwrap_or(1.0);
            j.queue = Some(if nodes >= 1024.0 { "large" } else { "small" }.to_string());
            j.cpus = Some(16.0 * nodes);
            j.num_gpus = Some((nodes / 512.0).floor());
            j
        })
        .collect();
    let (jobs, q, cap) = sample_of(jobs, 4000);
    let batch = replay_queue_features(&jobs, &q, cap).unwrap();
    // the partition columns are filled, and not one value
    let d = QUEUE_FEATURES.len();
    let col = |name: &str| {
        let k = QUEUE_FEATURES.iter().position(|f| *f == name).unwrap();
        batch.chunks(d).map(move |r| r[k])
    };
    for name in ["part_q_jobs", "part_r_gpus", "part_wait_median10", "q_gpus"] {
        assert!(col(name).any(|v| v.is_finite() && v > 0.0), "{name}");
    }
    replay_and_online_agree_on((jobs, q, cap));
}

/// A service that hears of submits, starts and ends as they happen and asks for features at
/// each submit writes the rows the replay writes, bit for bit.
fn replay_and_online_agree_on((jobs, q, cap): (Vec<JobRecord>, Vec<QueueJob>, f64)) {
    let d = QUEUE_FEATURES.len();
    let batch = replay_queue_features(&jobs, &q, cap).unwrap();
    // the online path: a service that hears of submits, starts and ends as they happen and
    // asks for features at each submit; built here from a merge of three time-sorted streams
    let mut submits: Vec<usize> = (0..jobs.len()).collect();
    submits.sort_by(|&a, &b| jobs[a].submit_time.total_cmp(&jobs[b].submit_time));
    let mut starts: Vec<(f64, usize)> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, j)| j.start_time.map(|s| (s.max(j.submit_time), i)))
        .collect();
    starts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut ends: Vec<(f64, usize)> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, j)| j.end_time.map(|e| (e, i)))
        .collect();
    ends.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut state = QueueState::new(cap);
    let (mut si, mut ei) = (0, 0);
    let mut started = vec![false; jobs.len()];
    let mut online = vec![0f32; jobs.len() * d];
    for &i in &submits {
        let now = jobs[i].submit_time;
        // everything that happened strictly before now, ends first at equal times, and ends
        // at `now` too (known at the instant); a job's end waits for its start
        loop {
            let next_end = ends.get(ei).filter(|e| started[e.1]).map(|e| e.0);
            let next_start = starts.get(si).map(|s| s.0);
            match (next_end, next_start) {
                (Some(te), ts) if te <= now && ts.is_none_or(|ts| te <= ts) => {
                    state.end(ends[ei].1 as u64, te).unwrap();
                    ei += 1;
                }
                (_, Some(ts)) if ts < now => {
                    let j = starts[si].1;
                    state.start(j as u64, ts).unwrap();
                    started[j] = true;
                    si += 1;
                }
                _ => break,
            }
        }
        state
            .features(&q[i], now, &mut online[i * d..(i + 1) * d])
            .unwrap();
        state.submit(i as u64, q[i]).unwrap();
    }
    let same = batch
        .iter()
        .zip(&online)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    if !same {
        let bad = (0..jobs.len())
            .find(|&i| {
                batch[i * d..(i + 1) * d]
                    .iter()
                    .zip(&online[i * d..(i + 1) * d])
                    .any(|(a, b)| a.to_bits() != b.to_bits())
            })
            .unwrap();
        panic!(
            "job {bad}: replay {:?} vs online {:?}",
            &batch[bad * d..(bad + 1) * d],
            &online[bad * d..(bad + 1) * d]
        );
    }
}

#[test]
fn mira_queue_wait_against_targets() {
    let jobs = mira();
    let (predictor, eval) =
        train_and_evaluate_queue_wait(&jobs, &QueueWaitTrainer::default()).unwrap();
    let row = |prefix: &str| {
        eval.rows
            .iter()
            .find(|r| r.method.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix}: {:?}", eval.rows))
    };
    let zero = row("predict zero");
    let sim = row("queue simulation");
    let static_cqr = row("augur gbdt + queue state, static");
    let model = row("augur gbdt + queue state, online");
    assert!((zero.metrics.within600 - 0.325).abs() < 0.01, "{zero:?}");
    // targets met: MAE below the LightGBM peer's, within600 above predicting zero's (the
    // short-wait override). The online adaptive 95% bound takes each outcome when its issued
    // bound runs out and judges it by that bound, with a step shared by the outcomes in
    // flight, so late outcomes cannot wind it up: the single bound covers 91.6% with a median
    // of 116k s (not served: the risk split below is; docs/calibration.md)
    assert!(model.metrics.mae_s < 54_651.0, "{model:?}");
    assert!(
        model.metrics.mae_s < sim.metrics.mae_s - 10_000.0,
        "{model:?} vs {sim:?}"
    );
    assert!(
        model.metrics.within600 > zero.metrics.within600,
        "{model:?} vs {zero:?}"
    );
    let cov = model.metrics.coverage95.unwrap();
    let width = model.metrics.median_bound_s.unwrap();
    assert!(
        cov >= 0.91 && width < 140_000.0,
        "coverage {cov}, median bound {width}"
    );
    // Not met: a median bound as narrow as LightGBM's quantile model at that coverage. Guard
    // today's levels: the static bound is as narrow as LightGBM's quantile model while
    // covering as much, and even the hindsight fit on the test period itself covers under
    // 94% (the features' ceiling, reported beside the model).
    let st_cov = static_cqr.metrics.coverage95.unwrap();
    let st_width = static_cqr.metrics.median_bound_s.unwrap();
    assert!(st_cov > 0.78 && st_width < 77_990.0, "{static_cqr:?}");
    let hind = row("hindsight");
    assert!(hind.metrics.coverage95.unwrap() < 0.94, "{hind:?}");
    // The risk-split bound (the served one): low-risk jobs get a tight bound at a lower
    // level, high-risk jobs a wide one at a higher level, 95% overall. Online it covers
    // within the 93–97% band (94.3%) with a median bound (122k s) narrower than the static
    // risk-split bound served before (163k s). Guard the band and the per-group story.
    let split = row("augur gbdt + queue state, risk-split online");
    let split_cov = split.metrics.coverage95.unwrap();
    let split_width = split.metrics.median_bound_s.unwrap();
    assert!((0.93..=0.97).contains(&split_cov), "{split:?}");
    assert!(split_width < 163_000.0, "{split:?}");
    let s = eval.risk_split_online.as_ref().unwrap();
    assert!((s.share_low - s.share_low_nominal).abs() < 0.05, "{s:?}");
    assert!(s.median_bound_low_s < s.median_bound_high_s / 5.0, "{s:?}");
    assert!(
        (s.share_low_nominal * s.level_low + (1.0 - s.share_low_nominal) * s.level_high - 0.95)
            .abs()
            < 1e-9
    );
    // predictions are real numbers with the bound above the point estimate, each in a group
    // at that group's level
    assert!(eval
        .test_pred
        .iter()
        .all(|p| p.seconds.is_finite() && p.seconds >= 0.0 && p.upper >= p.seconds));
    assert!(eval.test_pred.iter().all(|p| match p.risk_group {
        Some(RiskGroup::Low) => p.coverage == s.level_low,
        Some(RiskGroup::High) => p.coverage == s.level_high,
        None => false,
    }));
    // the artifact round trip keeps the bound (and an artifact saved before the risk split,
    // without the field, still loads with the single conformal offset)
    let json = serde_json::to_value(&predictor).unwrap();
    let back: QueueWaitPredictor = serde_json::from_value(json.clone()).unwrap();
    let d = predictor.n_features();
    let row0 = vec![0.5f32; d];
    assert_eq!(back.predict_row(&row0), predictor.predict_row(&row0));
    let mut old = json;
    old.as_object_mut().unwrap().remove("risk");
    let old: QueueWaitPredictor = serde_json::from_value(old).unwrap();
    assert!(old.risk.is_none());
    let p_old = old.predict_row(&row0);
    assert_eq!((p_old.coverage, p_old.risk_group), (0.95, None));
    // the online path with the deployment state gives the offline answer on the same row
    let state = predictor.new_risk_state().unwrap();
    let (on, _, _) = predictor.predict_row_online(&row0, &state);
    assert_eq!(on.seconds, predictor.predict_row(&row0).seconds);
}

/// Handed the run-time model the runtime kind trains on the same jobs, the queue-wait
/// trainer trains the model it trains alone (it only skips training that model again), and
/// scoring the model's rows only gives the same rows for the model.
#[test]
fn a_reused_runtime_model_trains_the_same_queue_wait_model() {
    let jobs: Vec<JobRecord> = mira().into_iter().take(2500).collect();
    let trainer = QueueWaitTrainer::default().with_trees(20);
    let mut trainer = trainer;
    trainer.runtime.params.n_trees = 20;
    let split = RuntimeSplit::build(&jobs).unwrap();
    let runtime = trainer
        .runtime
        .train(&split.schema, &split.x, &split.y_log, &split.train_rows)
        .unwrap();
    let (alone, full) = train_and_evaluate_queue_wait(&jobs, &trainer).unwrap();
    let run = QueueWaitRun {
        runtime: Some(&runtime),
        model_only: true,
        hindsight: false,
    };
    let (reused, model_only) = train_and_evaluate_queue_wait_with(&jobs, &trainer, run).unwrap();
    let json = |p: &QueueWaitPredictor| serde_json::to_string(p).unwrap();
    assert_eq!(json(&reused), json(&alone));
    let augur = |e: &augur_predictor::QueueWaitEvaluation| -> Vec<String> {
        e.rows
            .iter()
            .filter(|r| r.method.starts_with("augur"))
            .map(|r| format!("{} {:?}", r.method, (r.metrics.mae_s, r.metrics.coverage95)))
            .collect()
    };
    assert!(!augur(&full).is_empty());
    assert_eq!(augur(&model_only), augur(&full));
    assert!(model_only.rows.len() < full.rows.len(), "no baselines");
    // the model handed over is the one taken (here a smaller one, to tell them apart)
    let mut small = trainer.runtime.clone();
    small.params.n_trees = 5;
    let small = small
        .train(&split.schema, &split.x, &split.y_log, &split.train_rows)
        .unwrap();
    let run = QueueWaitRun {
        runtime: Some(&small),
        model_only: true,
        hindsight: false,
    };
    let (taken, _) = train_and_evaluate_queue_wait_with(&jobs, &trainer, run).unwrap();
    let rt_json = |p: &augur_predictor::RuntimePredictor| serde_json::to_string(p).unwrap();
    assert_eq!(rt_json(&taken.runtime), rt_json(&small));
    assert_ne!(rt_json(&alone.runtime), rt_json(&small));
    // a model of another schema is not taken: it is trained again
    let mut other = runtime.clone();
    other.schema.keys.pop();
    let run = QueueWaitRun {
        runtime: Some(&other),
        model_only: true,
        hindsight: false,
    };
    let (retrained, _) = train_and_evaluate_queue_wait_with(&jobs, &trainer, run).unwrap();
    assert_eq!(json(&retrained), json(&alone));
}
