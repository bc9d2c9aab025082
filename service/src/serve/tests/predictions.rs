//! Predictions through the API: online equals offline on a real trace slice; answers carry
//! the model version, the interval and ETAs; the queue-wait risk groups adapt online.

use augur_datasets::JobRecord;
use augur_features::batch_features;
use augur_predictor::RuntimePredictor;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_predictions_equal_offline_on_a_real_trace_slice() {
    let (state, _dir) = service(true);
    // the 1500 Philly jobs after the training slice, replayed as events
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 1500].to_vec();
    ingest(&state, &trace_events(&jobs)).await;

    let model: std::sync::Arc<RuntimePredictor> = {
        let o = state.online();
        o.models.runtime().unwrap().model.clone()
    };
    // offline: the batch feature replay over the same jobs, same schema, same model
    let x = batch_features(&jobs, &model.schema);
    let d = model.schema.len();
    let mut compared = 0;
    let o = state.online();
    for (i, j) in jobs.iter().enumerate() {
        let offline = model.predict_log(&x[i * d..(i + 1) * d]).exp();
        let info = &o.jobs[&j.job_id];
        let online = info.runtime_at_submit.expect("predicted at submit").seconds;
        assert_eq!(online, offline, "job {} (row {i})", j.job_id);
        compared += 1;
    }
    assert_eq!(compared, 1500);
    // jobs with history really differ from a cold start (the state is doing work)
    let distinct: std::collections::HashSet<u64> = o
        .jobs
        .values()
        .filter_map(|j| j.runtime_at_submit.map(|r| r.seconds.to_bits()))
        .collect();
    assert!(
        distinct.len() > 100,
        "{} distinct predictions",
        distinct.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_carry_version_and_interval_and_jobs_get_etas() {
    let (state, _dir) = service(true);
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 300].to_vec();
    ingest(&state, &trace_events(&jobs)).await;
    let j = &philly()[TRAIN_JOBS + 400];
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": profile_json(j) } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["model_version"], 1);
    let p = &v["prediction"];
    let (s, lo, hi) = (
        p["seconds"].as_f64().unwrap(),
        p["lower"].as_f64().unwrap(),
        p["upper"].as_f64().unwrap(),
    );
    assert!(lo <= s && s <= hi && s > 0.0, "{p}");
    assert_eq!(p["coverage"], 0.8);
    assert_eq!(p["interval"], "online_conformal");
    // a batch answers each job
    let batch: Vec<Value> = mira()[TRAIN_JOBS..TRAIN_JOBS + 10]
        .iter()
        .map(|j| json!({ "profile": profile_json(j) }))
        .collect();
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/queue-wait",
        Some(json!({ "jobs": batch.clone() })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["predictions"].as_array().unwrap().len(), 10);
    assert_eq!(v["model_version"], 1);
    let w = &v["predictions"][0];
    assert!(
        w["upper"].as_f64().unwrap() >= w["seconds"].as_f64().unwrap(),
        "{w}"
    );

    // a submitted, not started job: ETA to start and to finish
    let at = jobs.last().unwrap().submit_time + 10.0;
    let ev = json!({ "type": "job_submitted", "job_id": "new-job", "at": at, "profile": profile_json(j) });
    let (st, _) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = call(&state, "GET", "/v1/jobs/new-job", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["phase"], "queued");
    let start = v["eta"]["start"].as_f64().unwrap();
    let finish = v["eta"]["finish"].as_f64().unwrap();
    let rt = v["job"]["runtime_at_submit"]["seconds"].as_f64().unwrap();
    assert!(start >= at, "{v}");
    assert!(
        (finish - start - rt).abs() < 1e-6 * finish.abs().max(1.0),
        "{v}"
    );
    let (st, v) = call(&state, "GET", "/v1/jobs/nope", None, false).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    // the same ETA in GET /v1/eta, without a scheduler estimate outside Slurm
    let (st, e) = call(&state, "GET", "/v1/eta?job=new-job", None, false).await;
    assert_eq!(st, StatusCode::OK, "{e}");
    assert_eq!(e["backend"], "sim");
    let listed = e["jobs"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{e}");
    assert_eq!(listed[0]["job_id"], "new-job");
    assert_eq!(listed[0]["start"].as_f64(), Some(start), "{e}");
    assert_eq!(listed[0]["end"].as_f64(), Some(finish), "{e}");
    assert!(listed[0]["start_upper"].as_f64() >= Some(start), "{e}");
    assert!(listed[0]["scheduler_start"].is_null(), "{e}");
    // the Philly profile has no user: a user filter matches nothing (the Slurm test filters by one)
    let (_, e) = call(&state, "GET", "/v1/eta?user=nobody-here", None, false).await;
    assert_eq!(e["jobs"].as_array().map(Vec::len), Some(0), "{e}");
    let (st, e) = call(&state, "GET", "/v1/eta?jobs=new-job", None, false).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(e["error"]["field"], "query", "{e}");

    // DAG makespan: a diamond; the critical path goes through the longer branch
    let dag = json!({ "stages": [
        { "id": "a", "estimate_seconds": 10.0 },
        { "id": "b", "depends_on": ["a"], "estimate_seconds": 100.0 },
        { "id": "c", "depends_on": ["a"], "estimate_seconds": 5.0 },
        { "id": "d", "depends_on": ["b", "c"], "estimate_seconds": 1.0 }
    ]});
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/dag-makespan",
        Some(json!({ "job": { "profile": {}, "dag": dag } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["prediction"]["seconds"], 111.0);
    assert_eq!(v["prediction"]["critical_path"], json!(["a", "b", "d"]));
    // failure: a calibrated probability from the served model
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/failure",
        Some(json!({ "jobs": batch })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["model_version"], 1);
    for p in v["predictions"].as_array().unwrap() {
        let pr = p["probability"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pr), "{p}");
    }
    // convergence: a real MLPerf run's first half of eval points, ingested as metric points
    let runs = augur_predictor::convergence::load_bundled_mlperf().unwrap();
    let run = runs.iter().rev().find(|r| r.points.len() >= 6).unwrap();
    let half = &run.points[..run.points.len() / 2];
    let t0 = 5.0e8;
    let mut events = vec![
        json!({ "type": "job_submitted", "job_id": "mlperf-run", "at": t0,
                "profile": { "job_name": run.context.benchmark, "num_gpus": run.context.accelerators } }),
        json!({ "type": "job_started", "job_id": "mlperf-run", "at": t0 }),
    ];
    events.push(
        json!({ "type": "metric_points", "job_id": "mlperf-run", "points": half
        .iter()
        .enumerate()
        .map(|(i, p)| json!({ "step": i, "accuracy": p.value, "at": t0 + p.wall_time_s }))
        .collect::<Vec<_>>() }),
    );
    ingest(&state, &events).await;
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/convergence",
        Some(json!({ "job": { "job_id": "mlperf-run" } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["metric"], "accuracy");
    assert_eq!(p["points"], half.len());
    let (lo, mid, hi) = (
        p["remaining_lower_s"].as_f64().unwrap(),
        p["remaining_s"].as_f64().unwrap(),
        p["remaining_upper_s"].as_f64().unwrap(),
    );
    assert!(lo <= mid && mid <= hi && mid >= 0.0, "{p}");
    // a job without points: 422 naming the job
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/convergence",
        Some(json!({ "job": { "job_id": "new-job" } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "job.job_id");
}

/// The served queue-wait model's risk-split bound online: every job submitted is bounded in
/// a risk group at that group's level, and each group's offset moves exactly by its own
/// group's outcomes as the delayed-feedback rule takes them (when the bound runs out, judged
/// by the bound in force then), never by the other group's. The fixture model gets a risk split built here (upper
/// model score, 60% low share at 93%) so the plumbing is tested whatever the small fixture's
/// search chose.
#[test]
fn queue_wait_risk_groups_adapt_online_from_their_own_outcomes() {
    use crate::serve::state::events::Event;
    use crate::serve::state::online::{Online, Served, ServedModels};
    use crate::serve::state::store::StoredEvent;
    use augur_predictor::calibration::replay_delayed;
    use augur_predictor::queue_wait::{high_level, RiskScore};
    use augur_predictor::registry::Selector;
    use augur_predictor::{QueueWaitPredictor, RiskGroup, RiskSplitBound};

    let registry = training::open_registry(trained_models().parent().unwrap()).unwrap();
    let (mut model, meta) = registry
        .load::<QueueWaitPredictor>(Selector::Serving)
        .unwrap();
    let split = RiskSplitBound {
        score: RiskScore::UpperModel,
        share_low: 0.6,
        level_low: 0.93,
        level_high: high_level(0.95, 0.6, 0.93),
        offset_low: model.upper_offset - 1.0,
        offset_high: model.upper_offset + 1.0,
        step: 0.05,
        window: 100,
        threshold: f64::INFINITY,
        seed_scores: Vec::new(),
    };
    model.risk = Some(split.clone());
    let mut online = Online::new(ServedModels::default().with(Served {
        model: std::sync::Arc::new(model),
        meta,
    }));
    // the 800 Mira jobs after the fixture's training slice: submits and starts in time order
    let jobs = &mira()[TRAIN_JOBS..TRAIN_JOBS + 800];
    let mut events: Vec<(f64, u8, Event)> = Vec::new();
    for j in jobs {
        events.push((
            j.submit_time,
            0,
            Event::JobSubmitted {
                job_id: j.job_id.clone(),
                at: j.submit_time,
                profile: JobProfile::of_record(j),
                dag: None,
            },
        ));
        if let Some(s) = j.start_time {
            let job_id = j.job_id.clone();
            events.push((s.max(j.submit_time), 1, Event::JobStarted { job_id, at: s }));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let start = online.wait_risk_state().expect("risk state").clone();
    // per submit, in order: (submit, wait, raw bound ln(1 + s), group, the group's offset
    // the service answered it with: the one after the submit, whose outcomes due by then
    // are taken before it is answered)
    let mut issued: Vec<(f64, f64, f64, usize, f64)> = Vec::new();
    let mut groups = [0usize; 2];
    let mut seq = 0;
    let mut last_look = 0f64;
    for (_, _, event) in events {
        seq += 1;
        let submitted = match &event {
            Event::JobSubmitted { job_id, at, .. } => Some((job_id.clone(), *at)),
            _ => None,
        };
        online.apply(&StoredEvent {
            seq,
            received_at: 0.0,
            event,
        });
        let Some((id, at)) = submitted else { continue };
        let w = online.jobs[&id]
            .queue_wait_at_submit
            .expect("predicted at submit");
        let g = w.risk_group.expect("a risk group");
        let k = usize::from(g == RiskGroup::High);
        groups[k] += 1;
        let want_level = if k == 0 {
            split.level_low
        } else {
            split.level_high
        };
        assert_eq!(w.coverage, want_level, "{w:?}");
        let after = online.wait_risk_state().expect("risk state");
        let offset = after.bound(g).offset;
        // an answer at the ceiling hides its raw bound; this fixture has none
        assert!(
            after.bound(g).ceiling_s.is_none_or(|c| w.upper < c),
            "{id} at the ceiling"
        );
        let job = jobs.iter().find(|j| j.job_id == id).expect("a fixture job");
        let wait = job.start_time.map_or(f64::INFINITY, |s| (s - at).max(0.0));
        issued.push((at, wait, w.upper.ln_1p() - offset, k, offset));
        last_look = last_look.max(at + w.upper);
    }
    // a clock tick long after every bound ran out: the outcomes still due are taken
    let end = last_look + 1e7;
    online.apply(&StoredEvent {
        seq: seq + 1,
        received_at: 0.0,
        event: Event::ClusterSnapshot(crate::serve::state::events::ClusterSnapshot {
            at: end,
            total_gpus: 1.0,
            busy_gpus: 0.0,
            queued_jobs: None,
            running_jobs: None,
            nodes: None,
        }),
    });
    assert!(groups[0] > 200 && groups[1] > 200, "{groups:?}");
    // the offsets the service held at each submit are those of the delayed-feedback replay
    // of each group's own outcomes (taken when bounds run out, judged by the bound then)
    let mut bounds = [start.low.clone(), start.high.clone()];
    let mut timed: Vec<(f64, f64, f64)> = issued.iter().map(|&(s, w, r, _, _)| (s, w, r)).collect();
    // the replay takes outcomes at submits: one more at the tick's instant takes the rest
    timed.push((end, 0.0, 0.0));
    let replayed = replay_delayed(&mut bounds, &timed, |k, _| issued.get(k).map_or(0, |j| j.3));
    let st = online.wait_risk_state().expect("risk state");
    for (k, (b, start_b)) in [(&st.low, &start.low), (&st.high, &start.high)]
        .into_iter()
        .enumerate()
    {
        assert!(
            (b.offset - bounds[k].offset).abs() < 1e-9,
            "group {k} at the end: the service's offset {}, the replay's {}",
            b.offset,
            bounds[k].offset
        );
        assert!(
            (b.offset - start_b.offset).abs() > 1e-9,
            "group {k}'s offset never moved"
        );
    }
    let mut moved = [false; 2];
    for (k, (&(_, _, raw, g, offset), (b, rg))) in issued.iter().zip(&replayed).enumerate() {
        assert_eq!(*rg, g, "submit {k}");
        assert!(
            (b - raw - offset).abs() < 1e-9,
            "submit {k} (group {g}): the service's offset {offset}, the replay's {}",
            b - raw
        );
        let start_offset = if g == 0 {
            start.low.offset
        } else {
            start.high.offset
        };
        moved[g] |= (offset - start_offset).abs() > 1e-9;
    }
    // the low group's bounds are short: its offset moved while jobs were still submitted
    assert!(moved[0], "the low group's offset moved between submits");
}
