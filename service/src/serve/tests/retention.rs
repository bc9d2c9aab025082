//! Bounded growth: finished jobs leave memory after the retention window without changing
//! any answer, compaction moves their events to the archive and every event still reads in
//! order, and a restart over the archive answers as before.

use axum::http::StatusCode;
use serde_json::Value;

use super::*;

/// Jobs of the Philly slice ingested.
const JOBS: usize = 1500;

fn open(dir: &Path, retention_days: f64) -> AppState {
    let config = ServeConfig {
        data_dir: dir.to_path_buf(),
        token: Some(TOKEN.into()),
        trees: Some(15),
        retention_days,
        compaction_interval_secs: 0.0,
        retrain_every_jobs: 0,
        ..ServeConfig::default()
    };
    AppState::open(config).unwrap().0
}

fn fresh(retention_days: f64) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &dir.path().join("models"));
    (open(dir.path(), retention_days), dir)
}

/// The runtime answer for a probe job now, and the answer at submit of `id`.
async fn answers(state: &AppState, id: &str) -> (Value, Value) {
    let probe = serde_json::json!({ "job": {
        "job_id": "probe", "profile": profile_json(&philly()[TRAIN_JOBS + JOBS]),
    }});
    let (st, now) = call(state, "POST", "/v1/predict/runtime", Some(probe), false).await;
    assert_eq!(st, StatusCode::OK, "{now}");
    let (st, job) = call(state, "GET", &format!("/v1/jobs/{id}"), None, false).await;
    assert_eq!(st, StatusCode::OK, "{job}");
    (now, job["job"]["runtime_at_submit"].clone())
}

/// Every stored event's seq, read through `GET /v1/events` page by page.
async fn all_seqs(state: &AppState) -> Vec<i64> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let path = format!("/v1/events?after={after}&limit=997");
        let (st, page) = call(state, "GET", &path, None, false).await;
        assert_eq!(st, StatusCode::OK, "{page}");
        let events = page["events"].as_array().unwrap();
        if events.is_empty() {
            return out;
        }
        out.extend(events.iter().map(|e| e["seq"].as_i64().unwrap()));
        after = *out.last().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_jobs_leave_memory_answers_stay_and_compaction_keeps_every_event() {
    let jobs = &philly()[TRAIN_JOBS..TRAIN_JOBS + JOBS];
    let events = trace_events(jobs);
    // a window of a quarter of the slice's time span
    let span = jobs.last().unwrap().submit_time - jobs[0].submit_time;
    let days = span / 4.0 / 86_400.0;
    let (kept, _kept_dir) = fresh(0.0);
    let (state, dir) = fresh(days);
    ingest(&kept, &events).await;
    ingest(&state, &events).await;

    // the oldest finished jobs left memory; the newest are held
    let (held, all) = (state.online().jobs.len(), kept.online().jobs.len());
    assert!(held < all / 2, "{held} of {all} jobs held");
    assert!(state.online().retention.evicted > 0);
    let first = &jobs[0].job_id;
    let (st, v) = call(&state, "GET", &format!("/v1/jobs/{first}"), None, false).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    let msg = v.to_string();
    assert!(
        msg.contains("retention window") && msg.contains("/v1/events"),
        "{msg}"
    );

    // forgetting jobs changed no answer: same prediction now, same records at submit
    let last = &state
        .online()
        .jobs
        .values()
        .max_by_key(|j| j.first_seq)
        .unwrap()
        .job_id
        .clone();
    let before = answers(&state, last).await;
    assert_eq!(before, answers(&kept, last).await);

    // compaction moves the evicted jobs' events to the archive, none lost
    let stored = all_seqs(&state).await;
    assert_eq!(stored, (1..=events.len() as i64).collect::<Vec<_>>());
    let report = crate::serve::tasks::housekeeping::compact_now(&state).unwrap();
    assert!(report.archived >= 1000, "{report:?}");
    assert!(state.store.count().unwrap() < events.len() as i64);
    assert_eq!(
        all_seqs(&state).await,
        stored,
        "reads archive, then database"
    );
    assert_eq!(before, answers(&state, last).await);

    // a restart replays archive then database into the same state
    let store = state.store.clone();
    drop(state);
    store.close();
    let report = crate::serve::state::store::check(&dir.path().join("events.sqlite"), 0).unwrap();
    assert!(report.is_sound(), "{:?}", report.problems());
    assert!(report.archive.as_ref().is_some_and(|a| a.events >= 1000));
    let state = open(dir.path(), days);
    assert_eq!(before, answers(&state, last).await);
    assert_eq!(all_seqs(&state).await, stored);
    // the next event gets the next number, never an archived one
    ingest(
        &state,
        &trace_events(&philly()[TRAIN_JOBS + JOBS..TRAIN_JOBS + JOBS + 1])[..1],
    )
    .await;
    assert_eq!(state.online().last_seq, events.len() as i64 + 1);
}
