//! Snapshots of the online state: a start from a snapshot plus the tail of the log answers
//! what a start that replays the whole log answers; a damaged snapshot, one built with
//! other models and one from another log are not used (the whole log is replayed, the log
//! says why, the metric counts it) and change no answer; on SQLite and on PostgreSQL.

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;
use crate::serve::state::snapshot::{self, LoadOutcome, Written};
use crate::serve::OpenInfo;

use augur_test_fixtures::postgres::TestPostgres;

/// Jobs of the Mira slice ingested (Mira has start times: queue waits are answered).
const JOBS: usize = 900;

fn config(dir: &Path, retention_days: f64, store: Option<&str>) -> ServeConfig {
    ServeConfig {
        data_dir: dir.to_path_buf(),
        store: store.map(str::to_string),
        token: Some(TOKEN.into()),
        trees: Some(15),
        retention_days,
        compaction_interval_secs: 0.0,
        retrain_every_jobs: 0,
        snapshot_interval_secs: 0.0,
        snapshot_every_events: 0,
        ..ServeConfig::default()
    }
}

/// Opens the data folder, capturing the log lines of the start-up.
fn open(dir: &Path, retention_days: f64) -> (AppState, OpenInfo, String) {
    open_on(dir, retention_days, None)
}

/// [`open`] with the event log in `store` (a PostgreSQL URL; `None`: SQLite in the folder).
fn open_on(dir: &Path, retention_days: f64, store: Option<&str>) -> (AppState, OpenInfo, String) {
    let (opened, text) = try_open_on(dir, retention_days, store);
    let (state, info) = opened.unwrap();
    (state, info, text)
}

/// [`open_on`], which may fail.
fn try_open_on(
    dir: &Path,
    retention_days: f64,
    store: Option<&str>,
) -> (anyhow::Result<(AppState, OpenInfo)>, String) {
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Capture::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    // the PostgreSQL client runs its own runtime: opened (and closed, [`stop`]) outside
    // the test's
    let opened = tokio::task::block_in_place(|| {
        tracing::subscriber::with_default(subscriber, || {
            AppState::open(config(dir, retention_days, store))
        })
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    (opened, text)
}

fn stop(state: AppState) {
    tokio::task::block_in_place(|| {
        let store = state.store.clone();
        drop(state);
        store.close();
    });
}

/// The slice's events with starts, a cluster snapshot, metric points and a job that never
/// starts in the first part, another at the end; and the index where the first part ends.
fn events() -> (Vec<Value>, usize) {
    let jobs = &mira()[TRAIN_JOBS..TRAIN_JOBS + JOBS];
    let mut events = trace_events_with_starts(jobs);
    let split = events.len() * 2 / 3;
    let at = events[split - 1]["at"].as_f64().unwrap();
    let running = events[..split]
        .iter()
        .rev()
        .find(|e| e["type"] == "job_started")
        .map(|e| e["job_id"].clone())
        .unwrap();
    let waiting = profile_json(&mira()[TRAIN_JOBS + JOBS + 10]);
    let end = events.last().unwrap()["at"].as_f64().unwrap();
    events.push(
        json!({ "type": "job_submitted", "job_id": "waiting-b", "at": end, "profile": waiting }),
    );
    let extra = [
        json!({ "type": "cluster_snapshot", "at": at, "total_gpus": 100000, "busy_gpus": 12 }),
        json!({ "type": "metric_points", "job_id": running, "points": [
            { "step": 1, "loss": 2.5, "at": at }, { "step": 2, "loss": 1.5, "accuracy": 0.4, "at": at },
        ]}),
        json!({ "type": "job_submitted", "job_id": "waiting-a", "at": at, "profile": waiting }),
    ];
    events.splice(split..split, extra);
    (events, split + 3)
}

/// The retention window: half the time before the snapshot, so runs leave memory before
/// and after it.
fn window_days(events: &[Value], split: usize) -> f64 {
    let t = |e: &Value| e["at"].as_f64().unwrap();
    (t(&events[split - 3]) - t(&events[0])) / 2.0 / 86_400.0
}

/// `POST /v1/predict/{kind}` with `body`, unauthenticated.
async fn predict(state: &AppState, kind: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/v1/predict/{kind}");
    call(state, "POST", &path, Some(body), false).await
}

/// Every answer the service gives about the slice: each 25th submitted job's `GET /v1/jobs/{id}` and
/// its runtime, queue-wait and failure predictions by job id, predictions by profile for
/// probes, the counts, retention figures and the queue-wait risk split's offsets.
async fn answers(state: &AppState) -> Value {
    let jobs = &mira()[TRAIN_JOBS..TRAIN_JOBS + JOBS];
    let (events, split) = events();
    let submits = events.iter().filter(|e| e["type"] == "job_submitted");
    let mut out = Vec::new();
    let waiting = [&events[split - 1], events.last().unwrap()];
    for e in submits.step_by(25).chain(waiting) {
        let id = e["job_id"].as_str().unwrap();
        let j = jobs
            .iter()
            .find(|j| j.job_id == id)
            .unwrap_or(&mira()[TRAIN_JOBS + JOBS + 10]);
        let (st, v) = call(state, "GET", &format!("/v1/jobs/{id}"), None, false).await;
        out.push(json!([id, st.as_u16(), v]));
        for kind in ["runtime", "queue-wait", "failure"] {
            let body = json!({ "job": { "job_id": id, "profile": profile_json(j) } });
            let (st, v) = predict(state, kind, body).await;
            out.push(json!([id, kind, st.as_u16(), v]));
        }
    }
    for probe in &mira()[TRAIN_JOBS + JOBS..TRAIN_JOBS + JOBS + 5] {
        for kind in ["runtime", "queue-wait", "failure"] {
            let body = json!({ "job": { "profile": profile_json(probe) } });
            let (st, v) = predict(state, kind, body).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            out.push(json!([kind, v]));
        }
    }
    let o = state.online();
    let risk = o
        .wait_risk_state()
        .map(|r| (r.low.offset.to_bits(), r.high.offset.to_bits()));
    out.push(json!({
        "counts": o.counts, "last_seq": o.last_seq, "clock": o.clock, "held": o.jobs.len(),
        "earlier": o.earlier_runs.len(), "evicted": o.retention.evicted,
        "horizon": o.retention.horizon, "compactable": o.compactable_upto(),
        "largest_gpus": o.largest_gpus, "cluster": o.last_snapshot, "risk": risk,
    }));
    Value::Array(out)
}

async fn metrics_text(state: &AppState) -> String {
    let req = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A data folder with the slice ingested and a snapshot written after its first part;
/// the answers of the live service, and the window.
async fn scenario() -> (tempfile::TempDir, Value, f64, usize) {
    scenario_on(None).await
}

/// [`scenario`] with the event log in `store`.
async fn scenario_on(store: Option<&str>) -> (tempfile::TempDir, Value, f64, usize) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &dir.path().join("models"));
    let (events, split) = events();
    let days = window_days(&events, split);
    let (state, info, _) = open_on(dir.path(), days, store);
    assert_eq!(info.snapshot, LoadOutcome::Absent);
    ingest(&state, &events[..split]).await;
    let w = tokio::task::block_in_place(|| snapshot::write(&state)).unwrap();
    assert!(
        matches!(w, Written::Written { last_seq, .. } if last_seq == split as i64),
        "{w:?}"
    );
    assert!(
        state.online().retention.evicted > 0,
        "runs left before the snapshot"
    );
    ingest(&state, &events[split..]).await;
    let live = answers(&state).await;
    stop(state);
    (dir, live, days, events.len())
}

/// A start from the snapshot plus the tail answers what a start that replays the whole log
/// answers, and what the live service answered, with the event log in `store`.
async fn a_start_from_the_snapshot_answers_as_a_full_replay(store: Option<&str>) {
    let (dir, live, days, n) = scenario_on(store).await;
    let (state, info, log) = open_on(dir.path(), days, store);
    assert_eq!(info.snapshot, LoadOutcome::Loaded, "{log}");
    let (_, split) = events();
    assert_eq!(info.events_replayed, n - split, "only the tail is replayed");
    assert!(log.contains("snapshot of the online state loaded"), "{log}");
    let restored = answers(&state).await;
    let m = metrics_text(&state).await;
    assert!(
        m.contains(r#"augur_snapshot_loads_total{outcome="loaded"} 1"#),
        "{m}"
    );
    stop(state);

    std::fs::remove_file(dir.path().join("snapshot").join(snapshot::FILE)).unwrap();
    let (state, info, _) = open_on(dir.path(), days, store);
    assert_eq!(info.snapshot, LoadOutcome::Absent);
    assert_eq!(info.events_replayed, n);
    let full = answers(&state).await;
    stop(state);
    assert_eq!(restored, full, "snapshot + tail vs full replay");
    assert_eq!(live, full, "the live service vs a full replay");
    // the comparison is not vacuous: answered jobs, queued and evicted ones among them
    let text = full.to_string();
    assert!(text.contains("runtime_at_submit") && text.contains("retention window"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_from_a_snapshot_and_the_tail_answers_what_a_full_replay_answers() {
    a_start_from_the_snapshot_answers_as_a_full_replay(None).await;
}

/// The same with the event log on a real PostgreSQL 15 (the store replicas share): the
/// snapshot in the data folder is anchored in the shared log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_start_from_a_snapshot_answers_what_a_full_replay_answers() {
    let Some(pg) = TestPostgres::start("snapshot on postgres") else {
        return;
    };
    a_start_from_the_snapshot_answers_as_a_full_replay(Some(&pg.url("postgres"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_not_used_and_changes_no_answer() {
    let (dir, live, days, n) = scenario().await;
    let path = dir.path().join("snapshot").join(snapshot::FILE);
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    for i in [good.len() / 3, good.len() / 2, good.len() - 100] {
        flipped[i] ^= 0x5a;
    }
    let damages = [
        ("bytes flipped", flipped, "checksum mismatch"),
        (
            "truncated",
            good[..good.len() / 2].to_vec(),
            "checksum mismatch",
        ),
        ("empty", Vec::new(), "truncated: 0 bytes"),
    ];
    for (what, bytes, reason) in damages {
        std::fs::write(&path, &bytes).unwrap();
        let (state, info, log) = open(dir.path(), days);
        assert_eq!(info.snapshot, LoadOutcome::Damaged, "{what}: {log}");
        assert_eq!(info.events_replayed, n, "{what}: every event replayed");
        let line = log
            .lines()
            .find(|l| l.contains("snapshot of the online state is damaged"))
            .unwrap_or_else(|| panic!("{what}: no log line in {log}"));
        assert!(
            line.contains("ERROR") && line.contains(reason),
            "{what}: {line}"
        );
        let m = metrics_text(&state).await;
        assert!(
            m.contains(r#"augur_snapshot_loads_total{outcome="damaged"} 1"#),
            "{what}: {m}"
        );
        assert_eq!(answers(&state).await, live, "{what}");
        stop(state);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_changed_between_stop_and_start_makes_the_snapshot_stale() {
    let (dir, live, days, n) = scenario().await;
    let registry = training::open_registry(dir.path()).unwrap();
    let meta = training::train_kind(
        ModelKind::Runtime,
        &registry,
        "philly",
        &philly()[..TRAIN_JOBS],
        Some(5),
    )
    .unwrap()
    .unwrap();
    assert_eq!(meta.version, 2);
    let (state, info, log) = open(dir.path(), days);
    assert_eq!(info.snapshot, LoadOutcome::Stale, "{log}");
    assert_eq!(info.events_replayed, n);
    let line = log
        .lines()
        .find(|l| l.contains("snapshot of the online state is stale"))
        .unwrap_or_else(|| panic!("no log line in {log}"));
    assert!(
        line.contains("INFO") && line.contains("runtime v1") && line.contains("runtime v2"),
        "{line}"
    );
    let m = metrics_text(&state).await;
    assert!(
        m.contains(r#"augur_snapshot_loads_total{outcome="stale"} 1"#),
        "{m}"
    );
    // the new model answers; what was answered at submit stays the record
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": profile_json(&mira()[TRAIN_JOBS]) } })),
        false,
    )
    .await;
    assert_eq!(
        (st, v["model_version"].as_u64()),
        (StatusCode::OK, Some(2)),
        "{v}"
    );
    let (id, then) = live
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|a| a[1] == 200)
        .map(|a| {
            (
                a[0].as_str().unwrap(),
                a[2]["job"]["runtime_at_submit"].clone(),
            )
        })
        .unwrap();
    let (_, now) = call(&state, "GET", &format!("/v1/jobs/{id}"), None, false).await;
    assert_eq!(then["model_version"], 1, "{then}");
    assert_eq!(now["job"]["runtime_at_submit"], then);
    stop(state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_from_another_log_is_refused() {
    let (dir, _, days, _) = scenario().await;
    let snap = std::fs::read(dir.path().join("snapshot").join(snapshot::FILE)).unwrap();
    let (events, split) = events();
    assert_eq!(events[split - 1]["job_id"], "waiting-a");
    // a log of the same kind of events, written afresh: another event has the snapshot's
    // last number
    let other = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &other.path().join("models"));
    let (state, _, _) = open(other.path(), days);
    let mut shifted: Vec<Value> = vec![json!({
        "type": "cluster_snapshot", "at": events[0]["at"], "total_gpus": 50000, "busy_gpus": 1,
    })];
    shifted.extend_from_slice(&events[..split + 10]);
    ingest(&state, &shifted).await;
    let want = answers(&state).await;
    stop(state);
    let to = other.path().join("snapshot");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join(snapshot::FILE), &snap).unwrap();
    let (state, info, log) = open(other.path(), days);
    assert_eq!(info.snapshot, LoadOutcome::Stale, "{log}");
    assert_eq!(info.events_replayed, shifted.len());
    let line = log
        .lines()
        .find(|l| l.contains("does not belong to this event log"))
        .unwrap_or_else(|| panic!("no log line in {log}"));
    assert!(
        line.contains("WARN") && line.contains("is not the one"),
        "{line}"
    );
    assert_eq!(answers(&state).await, want, "nothing of the snapshot shows");
    stop(state);
}

/// A log whose numbers end before the snapshot's last event lost acknowledged events: the
/// start is refused naming both numbers (never handing out a number the snapshot's events
/// had); a repair records the range as lost, after which the start replays the log and
/// numbers new events after the snapshot's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_behind_the_snapshot_is_refused_until_repaired() {
    let (dir, _, days, _) = scenario().await;
    let (_, split) = events();
    let db = dir.path().join("events.sqlite");
    for f in ["events.sqlite", "events.sqlite.hwm"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let _ = std::fs::remove_file(dir.path().join("events.sqlite-wal"));
    let (opened, log) = try_open_on(dir.path(), days, None);
    let err = format!(
        "{:#}",
        opened.err().expect("a log behind the snapshot is refused")
    );
    assert!(
        err.contains("ends at seq 0") && err.contains(&format!("up to seq {split}")),
        "{err}\n{log}"
    );
    assert!(err.contains("augur store repair"), "{err}");
    let witnessed = snapshot::witnessed_seq(&dir.path().join("snapshot").join(snapshot::FILE));
    assert_eq!(witnessed, Some(split as i64));
    let report = crate::serve::state::store::check(&db, split as i64).unwrap();
    assert!(!report.is_sound(), "check finds the lost range");
    let repaired = crate::serve::state::store::repair(&db, split as i64).unwrap();
    assert_eq!(repaired.next_seq, split as i64 + 1);
    assert!(crate::serve::state::store::check(&db, split as i64)
        .unwrap()
        .is_sound());
    let (state, info, _) = open(dir.path(), days);
    assert_eq!(info.snapshot, LoadOutcome::Stale);
    let ev = json!({ "type": "job_started", "job_id": "after-repair", "at": 1.7e9 });
    let (st, v) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["seq"], split as i64 + 1, "{v}");
    stop(state);
}
