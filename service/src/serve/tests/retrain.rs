//! Retraining on the ingested history, by hand and on the schedule, and promotion and
//! rollback: models swap without dropping requests or events, and a scheduled retrain keeps a
//! served model that scores better.

use augur_datasets::JobRecord;
use axum::http::StatusCode;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrain_promote_and_rollback_swap_models_without_dropping_requests() {
    let (state, _dir) = service(true);
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 1200].to_vec();
    ingest(&state, &trace_events(&jobs)).await;
    // predictions keep flowing (and succeeding) while models are swapped
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let state = state.clone();
        let stop = stop.clone();
        let body = json!({ "job": { "profile": profile_json(&jobs[0]) } });
        tokio::spawn(async move {
            let mut n = 0;
            let mut versions = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (st, v) = call(
                    &state,
                    "POST",
                    "/v1/predict/runtime",
                    Some(body.clone()),
                    false,
                )
                .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                versions.insert(v["model_version"].as_u64().unwrap());
                n += 1;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            (n, versions)
        })
    };
    // and events keep being ingested: none may be lost by the rebuild
    let ingester = {
        let state = state.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut acked = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let id = format!("during-swap-{}", acked.len());
                let ev = json!({ "type": "job_submitted", "job_id": id, "at": 2.0e9, "profile": { "num_gpus": 1 } });
                let (st, v) = call(&state, "POST", "/v1/events", Some(ev), true).await;
                assert_eq!(st, StatusCode::OK, "{v}");
                acked.push(id);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            acked
        })
    };
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let (st, _) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "a second retrain while one runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (_, v) = call(&state, "GET", "/v1/models/retrain", None, false).await;
        match v["state"].as_str().unwrap() {
            "running" => {}
            "succeeded" => break,
            other => panic!("retrain {other}: {v}"),
        }
        assert!(std::time::Instant::now() < deadline, "retrain too slow");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // the retrain and the refused second start are on /metrics
    let text = state.ext.metrics.encode().unwrap();
    for line in [
        r#"augur_retrains_total{trigger="manual",outcome="succeeded"} 1"#,
        r#"augur_retrains_total{trigger="manual",outcome="refused_running"} 1"#,
        "augur_retrain_duration_seconds_count 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    // the retrain serves v2 only when it is not worse on the held-out slice; serve it by
    // hand otherwise, so the swaps below go through a promotion either way
    let (_, r) = call(&state, "GET", "/v1/models/retrain", None, false).await;
    let verdicts = r["report"]["verdicts"].as_array().unwrap();
    let runtime = verdicts.iter().find(|v| v["kind"] == "runtime").unwrap();
    assert_eq!(runtime["version"], 2, "{r}");
    if runtime["promoted"] == false {
        let body = Some(json!({ "version": 2 }));
        let (st, v) = call(&state, "POST", "/v1/models/runtime/promote", body, true).await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(v["serving"]["runtime"], 2, "{v}");
    assert_eq!(
        v["kinds"]["runtime"]["versions"].as_array().unwrap().len(),
        2
    );
    assert_eq!(v["kinds"]["runtime"]["versions"][1]["dataset"], "ingested");
    let (st, v) = call(&state, "POST", "/v1/models/runtime/rollback", None, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(v["serving"]["runtime"], 1);
    let (st, v) = call(
        &state,
        "POST",
        "/v1/models/runtime/promote",
        Some(json!({ "version": 9 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "version");
    let (st, _) = call(
        &state,
        "POST",
        "/v1/models/runtime/promote",
        Some(json!({ "version": 2 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (n, versions) = probe.await.unwrap();
    let acked = ingester.await.unwrap();
    assert!(
        acked.len() > 10,
        "{} events ingested during the swaps",
        acked.len()
    );
    assert!(n > 10, "{n} probe requests");
    assert!(versions.contains(&1), "{versions:?}");
    // the online state was rebuilt for the swapped model: still knows every job
    let o = state.online();
    assert_eq!(o.models.runtime.as_ref().unwrap().meta.version, 2);
    assert_eq!(o.jobs.len(), 1200 + acked.len());
    for id in &acked {
        assert!(o.jobs[id].submitted_at.is_some(), "{id} lost by a swap");
    }
    assert_eq!(o.counts.job_submitted as usize, 1200 + acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retrain_serves_a_queue_wait_model_without_a_manual_call() {
    let (state, _dir, _shutdown) = scheduled_service(false, 300);
    crate::serve::retrain::spawn_schedule(state.clone());
    let body = json!({ "jobs": [{ "profile": profile_json(&mira()[0]) }] });
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/queue-wait",
        Some(body.clone()),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    // a real trace with start times, replayed as events; no retrain is asked for
    ingest(&state, &trace_events_with_starts(&mira()[..1200])).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (st, v) = call(
            &state,
            "POST",
            "/v1/predict/queue-wait",
            Some(body.clone()),
            false,
        )
        .await;
        if st == StatusCode::OK {
            break;
        }
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        assert!(std::time::Instant::now() < deadline, "no queue-wait model");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["trigger"], "schedule", "{v}");
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    let qw = v["serving"]["queue_wait"]
        .as_u64()
        .expect("a served queue-wait model");
    let versions = v["kinds"]["queue_wait"]["versions"].as_array().unwrap();
    let served = versions
        .iter()
        .find(|m| m["version"].as_u64() == Some(qw))
        .unwrap();
    assert_eq!(served["dataset"], "ingested", "{v}");
    assert!(v["serving"]["runtime"].as_u64().is_some(), "{v}");
    let stats = &state.retrain_stats;
    let started = stats
        .scheduled_started
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(started >= 1);

    // more history: the schedule fires again; a manual retrain meanwhile is refused
    ingest(&state, &trace_events_with_starts(&mira()[1200..2000])).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (_, v) = call(&state, "GET", "/v1/models/retrain", None, false).await;
        let now = stats
            .scheduled_started
            .load(std::sync::atomic::Ordering::SeqCst);
        if v["state"] == "running" && now > started {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no second retrain");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert!(
        stats
            .refused_running
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    );
    assert_eq!(stats.max_running(), 1, "retrains overlapped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retrain_keeps_a_served_model_that_scores_better() {
    // served: the queue-wait model trained on the first 3000 Mira jobs; the ingested
    // history is only the next 300, so the retrained model learns from 240 jobs
    let (state, _dir, _shutdown) = scheduled_service(true, 250);
    let history = &mira()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events_with_starts(history)).await;
    crate::serve::retrain::spawn_schedule(state.clone());
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["trigger"], "schedule", "{v}");
    let kept = v["report"]["kept"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k
            .as_str()
            .unwrap()
            .starts_with("queue_wait v2: held-out mae_s")),
        "{v}"
    );
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(m["serving"]["queue_wait"], 1, "{m}");
    let versions = m["kinds"]["queue_wait"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "the new version is saved: {m}");
    assert_eq!(versions[1]["dataset"], "ingested");
    // the decision follows the metric: on the newest slice of the history the retrain saw,
    // the served model's mae_s really is lower than the new one's
    let jobs = state.online().history_records();
    let registry = training::open_registry(_dir.path()).unwrap();
    let (old, _) = registry
        .load::<augur_predictor::QueueWaitPredictor>(augur_predictor::registry::Selector::Version(
            1,
        ))
        .unwrap();
    let (new, _) = registry
        .load::<augur_predictor::QueueWaitPredictor>(augur_predictor::registry::Selector::Version(
            2,
        ))
        .unwrap();
    let old_mae = crate::serve::model_gate::queue_wait_mae_s_on_newest(&old, &jobs)
        .unwrap()
        .unwrap();
    let new_mae = crate::serve::model_gate::queue_wait_mae_s_on_newest(&new, &jobs)
        .unwrap()
        .unwrap();
    assert!(new_mae > old_mae, "new {new_mae} vs served {old_mae}");
    // and predictions still come from the served version
    let body = json!({ "jobs": [{ "profile": profile_json(&history[0]) }] });
    let (st, p) = call(&state, "POST", "/v1/predict/queue-wait", Some(body), false).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p["model_version"], 1);
    assert_eq!(state.retrain_stats.max_running(), 1);
}
