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

async fn post(state: &AppState, ev: Value) {
    let (st, v) = call(state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

/// A job whose GPU type is named after its submit (`job_typed`) is answered then for that
/// type, and the answer is a record like the ones at submit: for a type no held job ran on,
/// the answer at submit times the measured ratio from the history's type; for a type the
/// history has, the runtime model's own answer for the profile with it; a restart keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_typed_after_its_submit_is_answered_for_its_type_and_a_restart_keeps_it() {
    use crate::serve::advice::{choices, Scaling};
    use augur_autoscaler::scaling::reshape::Shape;
    let (state, dir) = service(true);
    let job = &philly()[TRAIN_JOBS];
    let at = job.submit_time;
    // the history: the same job (its profile), finished on k80s
    let mut on_k80 = profile_json(job);
    on_k80["gpu_type"] = json!("k80");
    post(&state, json!({ "type": "job_submitted", "job_id": "typed-0", "at": at - 900.0, "profile": on_k80 })).await;
    post(
        &state,
        json!({ "type": "job_started", "job_id": "typed-0", "at": at - 800.0 }),
    )
    .await;
    post(&state, json!({ "type": "job_finished", "job_id": "typed-0", "at": at - 100.0, "status": "completed" })).await;
    submit(&state, "typed-1", at).await;
    let before = at_submit(&state, "typed-1").await;

    // steered to v100s, which no held job ran on: scaled from the history's k80
    post(
        &state,
        json!({ "type": "job_typed", "job_id": "typed-1", "at": at + 5.0, "gpu_type": "v100" }),
    )
    .await;
    let (_, view) = call(&state, "GET", "/v1/jobs/typed-1", None, false).await;
    assert_eq!(view["job"]["gpu_type"], json!("v100"), "{view}");
    assert_eq!(
        view["job"]["runtime_at_submit"], before,
        "the record at submit stays"
    );
    assert_eq!(view["runtime"], view["job"]["runtime_on_type"], "{view}");
    let profile = JobProfile::of_record(job);
    let ratio = {
        let o = state.online();
        let scaling = Scaling::bundled();
        let shape = |t: &str| Shape {
            gpus: profile.num_gpus.unwrap_or(0.0),
            gpu_type: Some(t.into()),
        };
        let past = choices::past_runs(&o, Some("typed-1"), &profile);
        scaling.reshaper().unwrap().ratio(
            profile.job_name.as_deref(),
            &shape("k80"),
            &shape("v100"),
            &past,
        )
    };
    assert!(
        ratio.ratio < 1.0,
        "v100s are measured faster than k80s: {ratio:?}"
    );
    let on_v100 = view["runtime"].clone();
    let (a, b) = (
        on_v100["seconds"].as_f64().unwrap(),
        before["seconds"].as_f64().unwrap(),
    );
    assert!((a / b - ratio.ratio).abs() < 1e-9, "{a} / {b} vs {ratio:?}");
    assert!(on_v100["lower"].as_f64().unwrap() <= a && a <= on_v100["upper"].as_f64().unwrap());

    // then named k80, a type the history has: the model's own answer for it at that moment
    post(
        &state,
        json!({ "type": "job_typed", "job_id": "typed-1", "at": at + 6.0, "gpu_type": "k80" }),
    )
    .await;
    let (_, view) = call(&state, "GET", "/v1/jobs/typed-1", None, false).await;
    let mut typed = profile.clone();
    typed.gpu_type = Some("k80".into());
    let model = state
        .online()
        .predict_runtime("typed-1", &typed, at + 6.0)
        .unwrap();
    assert_eq!(
        view["runtime"],
        serde_json::to_value(model).unwrap(),
        "{view}"
    );
    let on_k80 = view["runtime"].clone();
    assert_ne!(on_k80, on_v100);

    // a restart replays the log with the records: the same answers, not new ones
    let state = restart(state, dir.path());
    let (_, view) = call(&state, "GET", "/v1/jobs/typed-1", None, false).await;
    assert_eq!(view["runtime"], on_k80, "{view}");
    assert_eq!(view["job"]["runtime_at_submit"], before);
    assert_eq!(state.online().counts.job_typed, 2);
}
