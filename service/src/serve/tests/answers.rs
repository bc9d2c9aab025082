//! One meaning per answer: for one job at one moment, "now" is the same answer however it is
//! asked (by job id, `runtime_now` of `GET /v1/jobs/{id}`, by its profile with and without
//! `at` = now); "at submit" is the record issued before the job's own submit entered its
//! user's history, by the same model.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;

async fn runtime(state: &AppState, job: Value) -> Value {
    let (st, v) = call(
        state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": job })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["prediction"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ways_of_asking_one_jobs_runtime_now_agree() {
    let (state, _dir) = service(true);
    // some history first, so the job's features see its user's past jobs
    let history = &philly()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events(history)).await;
    let job = &philly()[TRAIN_JOBS + 300];
    let now = state.online().now();
    let submit = json!({
        "type": "job_submitted", "job_id": "five-ways", "at": now,
        "profile": profile_json(job),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(submit), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let at_submit_time = now;
    // time passes: "now" is no longer the submit time
    let later = json!({
        "type": "job_submitted", "job_id": "later", "at": now + 7200.0,
        "profile": profile_json(&philly()[TRAIN_JOBS + 301]),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(later), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let now = state.online().now();
    assert!(now > at_submit_time);

    let (st, view) = call(&state, "GET", "/v1/jobs/five-ways", None, false).await;
    assert_eq!(st, StatusCode::OK, "{view}");
    let at_submit = view["job"]["runtime_at_submit"].clone();
    let runtime_now = view["runtime_now"].clone();
    let by_id = runtime(&state, json!({ "job_id": "five-ways" })).await;
    let by_profile = runtime(&state, json!({ "profile": profile_json(job) })).await;
    let by_profile_at_now =
        runtime(&state, json!({ "profile": profile_json(job), "at": now })).await;
    for (name, v) in [
        ("predict by job_id", &by_id),
        ("predict by profile", &by_profile),
        ("predict by profile at now", &by_profile_at_now),
    ] {
        assert_eq!(v, &runtime_now, "{name} differs from runtime_now");
    }
    assert_eq!(at_submit["model_version"], runtime_now["model_version"]);
    let (a, b) = (
        at_submit["seconds"].as_f64().unwrap(),
        runtime_now["seconds"].as_f64().unwrap(),
    );
    assert!((a / b).ln().abs() < 0.5, "at submit {a} s, now {b} s");
}
