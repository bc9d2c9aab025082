//! Retraining on the ingested history, by hand and on the schedule, and promotion and
//! rollback: models swap without dropping requests or events, and a scheduled retrain keeps a
//! served model that scores better.

use augur_datasets::JobRecord;
use axum::http::StatusCode;
use serde_json::json;

use super::*;
use crate::serve::state::online::{Online, Served, ServedModels};

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
    assert_eq!(o.models.runtime().unwrap().meta.version, 2);
    assert_eq!(o.jobs.len(), 1200 + acked.len());
    for id in &acked {
        assert!(o.jobs[id].submitted_at.is_some(), "{id} lost by a swap");
    }
    assert_eq!(o.counts.job_submitted as usize, 1200 + acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retrain_serves_a_queue_wait_model_without_a_manual_call() {
    let (state, _dir, _shutdown) = scheduled_service(false, 300);
    crate::serve::tasks::retrain::spawn_schedule(state.clone());
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
    crate::serve::tasks::retrain::spawn_schedule(state.clone());
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
    let old_mae = crate::serve::tasks::model_gate::queue_wait_mae_s_on_newest(&old, &jobs)
        .unwrap()
        .unwrap();
    let new_mae = crate::serve::tasks::model_gate::queue_wait_mae_s_on_newest(&new, &jobs)
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

/// A model a retrain promotes learns online from the first event of the finished jobs it
/// was trained on (the retrain's answer and the version's metadata say which), not from
/// the whole log; a restart builds the same state, from its snapshot or from the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_model_learns_online_from_the_history_it_was_trained_on() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &dir.path().join("models"));
    let config = || ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        trees: Some(15),
        min_retrain_jobs: 200,
        retrain_every_jobs: 0,
        retention_days: 0.0,
        // the newest 500 of the 900 jobs: the history trained on starts well into the log
        retrain_max_jobs: 500,
        compaction_interval_secs: 0.0,
        snapshot_interval_secs: 0.0,
        snapshot_every_events: 0,
        ..ServeConfig::default()
    };
    let (state, _info) = AppState::open(config()).unwrap();
    let jobs: Vec<JobRecord> = mira()[TRAIN_JOBS..TRAIN_JOBS + 900].to_vec();
    ingest(&state, &trace_events_with_starts(&jobs)).await;
    // the oldest job trained on: the 401st by submit time (ties by id), which finished
    let mut by_submit: Vec<&JobRecord> = jobs.iter().collect();
    by_submit.sort_by(|a, b| {
        a.submit_time
            .total_cmp(&b.submit_time)
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    let oldest = by_submit[400];
    assert!(oldest.duration.is_some(), "{oldest:?}");
    let first = state.online().jobs[&oldest.job_id].first_seq;
    assert!(first > 400, "the history trained on starts at seq {first}");

    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["history"]["used_jobs"], 500, "{v}");
    assert_eq!(v["history"]["history_from_seq"], first, "{v}");
    let r = wait_retrain_done(&state).await;
    assert_eq!(r["state"], "succeeded", "{r}");
    // serve the new runtime and queue-wait versions (by hand when the gate kept the old)
    for kind in ["runtime", "queue_wait"] {
        let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
        if m["serving"][kind] != 2 {
            let path = format!("/v1/models/{kind}/promote");
            let (st, v) = call(&state, "POST", &path, Some(json!({ "version": 2 })), true).await;
            assert_eq!(st, StatusCode::OK, "{v}");
        }
    }
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    for kind in ["runtime", "queue_wait"] {
        let versions = m["kinds"][kind]["versions"].as_array().unwrap();
        assert_eq!(versions[1]["history_from_seq"], first, "{m}");
        assert!(versions[0].get("history_from_seq").is_none(), "{m}");
    }

    // the served state answers as a state fed only the events from `first` on does, and
    // not as one fed the whole log
    let now = state.online().now();
    let answers = |o: &Online| -> Vec<(f64, f64, f64)> {
        jobs.iter()
            .map(|j| {
                let p = JobProfile::of_record(j);
                let r = o.predict_runtime(&j.job_id, &p, now).unwrap();
                let w = o.predict_wait(&j.job_id, &p, now).unwrap();
                (r.seconds, r.upper, w.upper)
            })
            .collect()
    };
    let served = answers(&state.online());
    let differ = |a: &[(f64, f64, f64)], b: &[(f64, f64, f64)]| {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).filter(|(x, y)| x != y).count()
    };
    let replayed = |from: i64, models: ServedModels| {
        let mut o = Online::new(models);
        let mut after = from - 1;
        loop {
            let page = state.store.read_after(after, 10_000).unwrap();
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in &page {
                o.apply(e);
            }
        }
        o
    };
    let models = state.online().models.clone();
    let from_first = answers(&replayed(first, models.clone()));
    assert_eq!(
        differ(&served, &from_first),
        0,
        "answers unlike a state fed from {first}"
    );
    fn from_start<T>(s: &Served<T>) -> Served<T> {
        let mut meta = s.meta.clone();
        meta.history_from_seq = None;
        Served {
            model: s.model.clone(),
            meta,
        }
    }
    let whole_log = models
        .clone()
        .with(from_start(models.runtime().unwrap()))
        .with(from_start(models.queue_wait().unwrap()));
    let whole = answers(&replayed(1, whole_log));
    let n = differ(&served, &whole);
    assert!(n > 100, "{n} of 900 answers differ from the whole log's");

    // a restart answers the same: from the snapshot the swap wrote, and from the log
    let store = state.store.clone();
    drop(state);
    store.close();
    for snapshot in [true, false] {
        if !snapshot {
            std::fs::remove_dir_all(dir.path().join("snapshot")).unwrap();
        }
        let (state, info) = AppState::open(config()).unwrap();
        assert_eq!(info.events_replayed > 0, !snapshot, "snapshot {snapshot}");
        let after = answers(&state.online());
        assert_eq!(differ(&after, &served), 0, "restart, snapshot {snapshot}");
        let store = state.store.clone();
        drop(state);
        store.close();
    }
}

/// While the first start still trains kinds on the bootstrap history (it saves and promotes
/// its own versions), a manual retrain is refused with 409 naming them, and counted; once
/// they are served the usual rules apply again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrain_is_refused_while_the_first_start_still_trains() {
    use augur_predictor::ModelKind;
    let (state, _dir) = service(true);
    state
        .first_start
        .begin([ModelKind::QueueWait, ModelKind::Failure]);
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("first start"), "{v}");
    assert!(message.contains("queue_wait, failure"), "{v}");
    let text = state.ext.metrics.encode().unwrap();
    let line = r#"augur_retrains_total{trigger="manual",outcome="refused_first_start"} 1"#;
    assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");

    // served: this empty history is now refused for having too few jobs, not first start
    state.first_start.done(ModelKind::QueueWait);
    state.first_start.done(ModelKind::Failure);
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("min_retrain_jobs"), "{v}");
}
