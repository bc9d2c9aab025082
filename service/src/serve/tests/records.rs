//! Predictions are records: what was answered at a job's submit is stored with it and shown
//! as it was, after a model swap and after a restart.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;

async fn submit(state: &AppState, id: &str, at: f64) {
    let ev = json!({
        "type": "job_submitted", "job_id": id, "at": at,
        "profile": profile_json(&philly()[TRAIN_JOBS]),
    });
    let (st, v) = call(state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

async fn at_submit(state: &AppState, id: &str) -> Value {
    let (st, v) = call(state, "GET", &format!("/v1/jobs/{id}"), None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["job"]["runtime_at_submit"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_at_submit_survives_a_model_swap_and_a_restart() {
    let (state, dir) = service(true);
    let at = philly()[TRAIN_JOBS].submit_time;
    submit(&state, "rec-1", at).await;
    let before = at_submit(&state, "rec-1").await;
    assert_eq!(before["model_version"], 1, "{before}");

    // a second runtime version, trained on other jobs, is served from now on
    let registry = training::open_registry(dir.path()).unwrap();
    let jobs = &philly()[TRAIN_JOBS..TRAIN_JOBS + 1200];
    let v2 = training::train_runtime(&registry, "philly", jobs, Some(15))
        .unwrap()
        .unwrap()
        .version;
    let (st, v) = call(
        &state,
        "POST",
        "/v1/models/runtime/promote",
        Some(json!({ "version": v2 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        state.online().models.runtime.as_ref().unwrap().meta.version,
        v2
    );
    assert_eq!(
        at_submit(&state, "rec-1").await,
        before,
        "a swap re-issued it"
    );
    // a job submitted now is answered by the new version, and differently
    submit(&state, "rec-2", at + 1.0).await;
    let after = at_submit(&state, "rec-2").await;
    assert_eq!(after["model_version"], v2, "{after}");
    assert_ne!(after["seconds"], before["seconds"]);

    // a restart replays the store into the served (v2) model: the records stay
    let store = state.store.clone();
    drop(state);
    store.close();
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        ..ServeConfig::default()
    };
    let (state, _info) = AppState::open(config).unwrap();
    assert_eq!(
        at_submit(&state, "rec-1").await,
        before,
        "a restart re-issued it"
    );
    assert_eq!(at_submit(&state, "rec-2").await, after);
    let records = state.store.read_predictions().unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
}
