//! Time and identity: "now" is the wall clock on live backends, events from the future are
//! refused there, times may be RFC 3339 strings, and a job id submitted again after it
//! finished is a new run that keeps the earlier one.

use axum::http::StatusCode;
use serde_json::json;

use super::*;
use crate::serve::config::Backend;
use crate::serve::state::event_time::wall_now;

/// A service with the fixture models on `backend`.
fn service_on(backend: Backend) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &dir.path().join("models"));
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        backend,
        ..ServeConfig::default()
    };
    let (state, _info) = AppState::open(config).unwrap();
    (state, dir)
}

fn submitted(id: &str, at: serde_json::Value) -> serde_json::Value {
    json!({
        "type": "job_submitted", "job_id": id, "at": at,
        "profile": profile_json(&philly()[TRAIN_JOBS]),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_backends_run_on_the_wall_clock_and_refuse_events_from_the_future() {
    let (state, _dir) = service_on(Backend::None);
    let wall = wall_now();
    let batch = json!({ "events": [
        submitted("past", json!(wall - 86_400.0)),
        submitted("future", json!(wall + 3_600.0)),
    ]});
    let (st, v) = call(&state, "POST", "/v1/events/batch", Some(batch), true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "events[1].at", "{v}");
    // and from before 2000 (a negative or unit-mistaken time) too
    let (st, v) = call(
        &state,
        "POST",
        "/v1/events",
        Some(submitted("negative", json!(-5.0))),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "at", "{v}");
    assert_eq!(
        state.store.count().unwrap(),
        0,
        "a refused batch stores nothing"
    );
    // within the allowed skew, and in the past: accepted; "now" stays the wall clock
    let batch = json!({ "events": [
        submitted("past", json!(wall - 86_400.0)),
        submitted("soon", json!(wall + 60.0)),
    ]});
    let (st, v) = call(&state, "POST", "/v1/events/batch", Some(batch), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let now = state.online().now();
    assert!(
        (now - wall_now()).abs() < 5.0,
        "now {now} is not the wall clock"
    );
    let (_, v) = call(&state, "GET", "/v1/jobs/past", None, false).await;
    assert!((v["now"].as_f64().unwrap() - wall_now()).abs() < 5.0, "{v}");

    // the simulator keeps its own clock: the latest event time, however far ahead
    let (sim, _dir) = service_on(Backend::Sim);
    let far = wall + 1e8;
    let (st, v) = call(
        &sim,
        "POST",
        "/v1/events",
        Some(submitted("f", json!(far))),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(sim.online().now(), far);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_may_be_rfc3339_strings() {
    let (state, _dir) = service_on(Backend::None);
    let ev = submitted("rfc", json!("2024-05-01T12:00:00Z"));
    let (st, v) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let fin = json!({
        "type": "job_finished", "job_id": "rfc", "at": "2024-05-01T13:00:00+00:00",
        "status": "completed",
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(fin), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, v) = call(&state, "GET", "/v1/jobs/rfc", None, false).await;
    assert_eq!(v["job"]["submitted_at"], 1_714_564_800.0, "{v}");
    assert_eq!(v["job"]["finished_at"], 1_714_568_400.0, "{v}");
    let bad = submitted("bad", json!("yesterday"));
    let (st, v) = call(&state, "POST", "/v1/events", Some(bad), true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "at", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_id_submitted_again_after_it_finished_is_a_new_run() {
    let (state, _dir) = service(true);
    let t = philly()[TRAIN_JOBS].submit_time;
    let finished = |at: f64, d: f64| {
        json!({ "type": "job_finished", "job_id": "pytorchjob-a", "at": at,
                "status": "completed", "duration": d })
    };
    let events = json!({ "events": [
        submitted("pytorchjob-a", json!(t)),
        finished(t + 100.0, 100.0),
        submitted("pytorchjob-a", json!(t + 200.0)),
    ]});
    let (st, v) = call(&state, "POST", "/v1/events/batch", Some(events), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = call(&state, "GET", "/v1/jobs/pytorchjob-a", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["job"]["run"], 2, "{v}");
    assert_eq!(v["job"]["submitted_at"], t + 200.0, "{v}");
    assert_eq!(v["phase"], "queued", "{v}");
    assert!(
        v["job"]["runtime_at_submit"]["seconds"].is_number(),
        "the new run was answered: {v}"
    );
    assert!(v["job"]["anomalies"].as_array().unwrap().is_empty(), "{v}");
    let earlier = v["earlier_runs"].as_array().unwrap();
    assert_eq!(earlier.len(), 1, "{v}");
    assert_eq!(earlier[0]["run"], 1);
    assert_eq!(earlier[0]["duration"], 100.0);
    // the second run finishes on its own; both runs are in the history retrains learn from
    let (st, v) = call(
        &state,
        "POST",
        "/v1/events",
        Some(finished(t + 500.0, 300.0)),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let history = state.online().history_records();
    let runs: Vec<(String, Option<f64>)> = history
        .iter()
        .map(|r| (r.job_id.clone(), r.duration))
        .collect();
    assert_eq!(
        runs,
        vec![
            ("pytorchjob-a".to_string(), Some(100.0)),
            ("pytorchjob-a#2".to_string(), Some(300.0))
        ]
    );
    // a second submit while the job has not finished is still an anomaly, not a run
    let again = submitted("pytorchjob-b", json!(t));
    for _ in 0..2 {
        let (st, v) = call(&state, "POST", "/v1/events", Some(again.clone()), true).await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    let (_, v) = call(&state, "GET", "/v1/jobs/pytorchjob-b", None, false).await;
    assert_eq!(v["job"]["run"], 1, "{v}");
    assert_eq!(v["job"]["anomalies"].as_array().unwrap().len(), 1, "{v}");
}
