//! Why a queued job waits, end to end through the router: `GET /v1/jobs/{id}` of a queued
//! job names the running job whose predicted end frees its GPUs, its queue-drain start
//! beside the queue-wait model's (the ETA's start), and `GET /v1/eta?why=true` gives the
//! same reading; running jobs and plain ETAs carry none.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;
use crate::serve::state::event_time::wall_now;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_names_what_holds_it_in_both_endpoints() {
    let (state, _dir) = service(true);
    let t0 = wall_now();
    let profile = |gpus: f64| json!({ "num_gpus": gpus, "user": "u1", "job_name": "train" });
    let events = vec![
        json!({"type": "job_submitted", "job_id": "hold", "at": t0 - 120.0, "profile": profile(8.0)}),
        json!({"type": "job_started", "job_id": "hold", "at": t0 - 60.0}),
        json!({"type": "cluster_snapshot", "at": t0 - 30.0, "total_gpus": 8, "busy_gpus": 8}),
        json!({"type": "job_submitted", "job_id": "ahead", "at": t0 - 20.0, "profile": profile(2.0)}),
        json!({"type": "job_submitted", "job_id": "me", "at": t0 - 10.0, "profile": profile(4.0)}),
    ];
    ingest(&state, &events).await;

    let (st, hold) = call(&state, "GET", "/v1/jobs/hold", None, false).await;
    assert_eq!(st, StatusCode::OK, "{hold}");
    assert_eq!(hold["phase"], "running");
    assert!(
        hold.get("why").is_none(),
        "a running job waits for nothing: {hold}"
    );
    let hold_end = hold["job"]["started_at"].as_f64().unwrap()
        + hold["job"]["runtime_at_submit"]["seconds"]
            .as_f64()
            .unwrap();

    let (st, view) = call(&state, "GET", "/v1/jobs/me", None, false).await;
    assert_eq!(st, StatusCode::OK, "{view}");
    assert_eq!(view["phase"], "queued");
    let why = &view["why"];
    assert_eq!(why["ahead"]["jobs"], 1, "{why}");
    assert_eq!(why["ahead"]["gpus"], 2.0, "{why}");
    assert_eq!(why["ahead"]["first"], json!(["ahead"]), "{why}");
    assert_eq!(why["free_gpus"], 0.0, "{why}");
    assert_eq!(why["cluster_gpus"], 8.0, "{why}");
    assert_eq!(why["shape"]["description"], "4 GPUs", "{why}");
    // the running job's predicted end frees the GPUs (at its end, or now when past it)
    let releases = why["releases"].as_array().unwrap();
    assert_eq!(releases.len(), 1, "{why}");
    assert_eq!(releases[0]["job_id"], "hold", "{why}");
    assert_eq!(releases[0]["running"], true, "{why}");
    let at = releases[0]["at"].as_f64().unwrap();
    let now = view["now"].as_f64().unwrap();
    assert_eq!(at, hold_end.max(now), "{why}");
    assert_eq!(why["start"]["queue_drain"].as_f64(), Some(at), "{why}");
    // the model's start is the ETA's, named beside the drain's
    assert!(why["start"]["queue_wait_model"].is_number(), "{why}");
    assert_eq!(
        why["start"]["queue_wait_model"], view["eta"]["start"],
        "{view}"
    );
    let reading = why["reading"].as_str().unwrap();
    assert!(
        reading.starts_with("waits for 4 GPUs: 1 job (2 GPUs) ahead, 0 free now; frees")
            && reading.contains("job hold")
            && reading.contains("the queue-wait model's median start is"),
        "{reading}"
    );
    assert!(
        why["scheduler_reason"].is_null(),
        "no scheduler here: {why}"
    );

    // one question, one answer: the ETA list with `why=true` reads the same
    let (st, eta) = call(&state, "GET", "/v1/eta?why=true&job=me", None, false).await;
    assert_eq!(st, StatusCode::OK, "{eta}");
    let from_eta = &eta["jobs"][0]["why"];
    for key in ["ahead", "shape", "free_gpus", "cluster_gpus", "notes"] {
        assert_eq!(from_eta[key], why[key], "{key}: {eta}");
    }
    assert_eq!(from_eta["releases"][0]["job_id"], "hold", "{eta}");
    assert_eq!(
        from_eta["start"]["queue_wait_model"], eta["jobs"][0]["start"],
        "{eta}"
    );
    if hold_end > now + 5.0 {
        // not past its end: the drain's start does not move with the clock
        assert_eq!(
            from_eta["start"]["queue_drain"],
            why["start"]["queue_drain"]
        );
    }
    let (_, plain) = call(&state, "GET", "/v1/eta", None, false).await;
    let listed: Vec<&Value> = plain["jobs"].as_array().unwrap().iter().collect();
    assert_eq!(listed.len(), 2, "{plain}");
    assert!(listed.iter().all(|j| j.get("why").is_none()), "{plain}");
    let (st, bad) = call(&state, "GET", "/v1/eta?why=maybe", None, false).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
}
