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

/// Closes `state`'s store and opens the service again on its data folder `dir`.
fn restart(state: AppState, dir: &std::path::Path) -> AppState {
    let store = state.store.clone();
    drop(state);
    store.close();
    let config = ServeConfig {
        data_dir: dir.to_path_buf(),
        token: Some(TOKEN.into()),
        ..ServeConfig::default()
    };
    AppState::open(config).unwrap().0
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
    let v2 = training::train_kind(ModelKind::Runtime, &registry, "philly", jobs, Some(15))
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
    assert_eq!(state.online().models.runtime().unwrap().meta.version, v2);
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
    let state = restart(state, dir.path());
    assert_eq!(
        at_submit(&state, "rec-1").await,
        before,
        "a restart re-issued it"
    );
    assert_eq!(at_submit(&state, "rec-2").await, after);
    let records = state.store.read_predictions().unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_at_submit_appears_from_a_model_served_only_later() {
    let (state, dir) = service(false);
    let at = philly()[TRAIN_JOBS].submit_time;
    submit(&state, "before-models", at).await;
    // the models arrive after the submit (first-start training done, or a promote)
    copy_dir(trained_models(), &dir.path().join("models"));
    let registry = training::open_registry(dir.path()).unwrap();
    let models = training::load_serving(&registry, &state.ext.metrics).unwrap();
    assert!(models.runtime().is_some() && models.queue_wait().is_some());
    let swap = state.clone();
    tokio::task::spawn_blocking(move || swap.swap_models(models))
        .await
        .unwrap();
    let (st, v) = call(&state, "GET", "/v1/jobs/before-models", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    for kind in [
        "runtime_at_submit",
        "queue_wait_at_submit",
        "failure_at_submit",
    ] {
        assert!(
            v["job"][kind].is_null(),
            "{kind} appeared after the swap: {v}"
        );
    }
    // "now" is answered by the model served now
    assert!(v["runtime_now"]["seconds"].is_f64(), "{v}");
    // and a restart (replaying the store into the served models) does not invent them either
    let state = restart(state, dir.path());
    let (_, v) = call(&state, "GET", "/v1/jobs/before-models", None, false).await;
    assert!(v["job"]["runtime_at_submit"].is_null(), "{v}");
    assert!(v["job"]["queue_wait_at_submit"].is_null(), "{v}");
}
