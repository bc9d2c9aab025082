//! One meaning per answer: for one job, asked at the moment of its submit, the answer stored
//! at its submit (`runtime_at_submit`), `runtime_now` of `GET /v1/jobs/{id}`, predict by its
//! job id and predict by its profile (with `at` = its submit time, and without `at`) are the
//! same number; later, "now" by job id and `runtime_now` stay equal. Each answer names the
//! profile fields its model reads and flags values outside the model's training ranges. The
//! queue-wait and failure answers by job id and by profile equal theirs stored at submit too
//! (a queued job is not ahead of itself).

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;

async fn predict(state: &AppState, kind: &str, job: Value) -> Value {
    let path = format!("/v1/predict/{kind}");
    let (st, v) = call(state, "POST", &path, Some(json!({ "job": job })), false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["prediction"].clone()
}

async fn runtime(state: &AppState, job: Value) -> Value {
    predict(state, "runtime", job).await
}

/// The fields `keys` of an answer (a predict answer also names the fields used).
fn fields(v: &Value, keys: &[&str]) -> Value {
    keys.iter().map(|k| (k.to_string(), v[k].clone())).collect()
}

/// The runtime answer's own fields.
fn answer_of(v: &Value) -> Value {
    let keys = ["model_version", "seconds", "lower", "upper", "coverage"];
    fields(v, &[&keys[..], &["interval"]].concat())
}

/// Some history, so the job's features see its group's past jobs; returns the service and
/// the job to ask about.
async fn with_history() -> (AppState, tempfile::TempDir, &'static JobRecord) {
    let (state, dir) = service(true);
    let history = &philly()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events(history)).await;
    (state, dir, &philly()[TRAIN_JOBS + 300])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_five_ways_of_asking_one_jobs_runtime_agree_at_its_submit() {
    let (state, _dir, job) = with_history().await;
    // a minute after the last event: no other job shares the job's submit instant
    let at = state.online().now() + 60.0;
    let submit = json!({
        "type": "job_submitted", "job_id": "five-ways", "at": at,
        "profile": profile_json(job),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(submit), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(state.online().now(), at, "now is the submit moment");

    let (st, view) = call(&state, "GET", "/v1/jobs/five-ways", None, false).await;
    assert_eq!(st, StatusCode::OK, "{view}");
    let at_submit = answer_of(&view["job"]["runtime_at_submit"]);
    let ways = [
        ("runtime_now", answer_of(&view["runtime_now"])),
        (
            "predict by job_id",
            answer_of(&runtime(&state, json!({ "job_id": "five-ways" })).await),
        ),
        (
            "predict by profile at its submit",
            answer_of(&runtime(&state, json!({ "profile": profile_json(job), "at": at })).await),
        ),
        (
            "predict by profile, no at",
            answer_of(&runtime(&state, json!({ "profile": profile_json(job) })).await),
        ),
    ];
    assert!(at_submit["seconds"].is_f64(), "{view}");
    for (name, v) in &ways {
        assert_eq!(v, &at_submit, "{name} differs from runtime_at_submit");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_now_by_job_id_equals_runtime_now() {
    let (state, _dir, job) = with_history().await;
    let at = state.online().now() + 60.0;
    let submit = json!({
        "type": "job_submitted", "job_id": "asked-later", "at": at,
        "profile": profile_json(job),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(submit), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // time passes: "now" is no longer the submit time
    let later = json!({
        "type": "job_submitted", "job_id": "later", "at": at + 7200.0,
        "profile": profile_json(&philly()[TRAIN_JOBS + 301]),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(later), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let now = state.online().now();
    assert!(now > at);

    let (st, view) = call(&state, "GET", "/v1/jobs/asked-later", None, false).await;
    assert_eq!(st, StatusCode::OK, "{view}");
    let runtime_now = answer_of(&view["runtime_now"]);
    let by_id = answer_of(&runtime(&state, json!({ "job_id": "asked-later" })).await);
    let by_id_at_now =
        answer_of(&runtime(&state, json!({ "job_id": "asked-later", "at": now })).await);
    assert_eq!(by_id, runtime_now);
    assert_eq!(by_id_at_now, runtime_now);
    let at_submit = &view["job"]["runtime_at_submit"];
    assert_eq!(at_submit["model_version"], runtime_now["model_version"]);
    let (a, b) = (
        at_submit["seconds"].as_f64().unwrap(),
        runtime_now["seconds"].as_f64().unwrap(),
    );
    assert!((a / b).ln().abs() < 0.5, "at submit {a} s, now {b} s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_name_the_fields_used_and_flag_a_profile_beyond_training() {
    let (state, _dir) = service(true);
    let max_gpus = philly()[..TRAIN_JOBS]
        .iter()
        .filter_map(|j| j.num_gpus)
        .fold(0.0, f64::max);
    let usual = json!({ "profile": { "num_gpus": 1, "group": "vc1" } });
    let v = runtime(&state, usual).await;
    let used: Vec<&str> = v["profile_fields_used"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Philly jobs carry GPUs and a virtual cluster (group), no user
    assert!(used.contains(&"num_gpus") && used.contains(&"group"), "{v}");
    assert!(!used.contains(&"user"), "{v}");
    // a request field the training jobs never gave is not read
    let jobs = &philly()[..TRAIN_JOBS];
    let absent = [
        ("cpus", jobs.iter().all(|j| j.cpus.is_none())),
        ("memory_mib", jobs.iter().all(|j| j.memory_mib.is_none())),
        (
            "requested_time",
            jobs.iter().all(|j| j.requested_time.is_none()),
        ),
    ];
    assert!(
        absent.iter().any(|(_, a)| *a),
        "philly lacks some request field"
    );
    for (field, _) in absent.iter().filter(|(_, a)| *a) {
        assert!(!used.contains(field), "{field}: {v}");
    }
    assert!(v.get("out_of_range").is_none(), "{v}");

    let big = max_gpus * 8.0;
    let v = runtime(
        &state,
        json!({ "profile": { "num_gpus": big, "group": "vc1" } }),
    )
    .await;
    let flagged = &v["out_of_range"][0];
    assert_eq!(flagged["field"], "num_gpus", "{v}");
    assert_eq!(flagged["value"].as_f64(), Some(big), "{v}");
    let max = flagged["max"].as_f64().unwrap();
    assert!(
        max >= 1.0 && max <= max_gpus,
        "the training range's top: {v}"
    );
    assert!(
        v["seconds"].is_f64(),
        "an extrapolation is still answered: {v}"
    );

    // the other profile answers name their models' fields too
    for kind in ["queue-wait", "failure"] {
        let v = predict(&state, kind, json!({ "profile": { "num_gpus": 1 } })).await;
        let used = v["profile_fields_used"].as_array().unwrap();
        assert!(!used.is_empty(), "{kind}: {v}");
    }
}

/// The queue-wait and failure answers' own fields.
fn wait_or_failure_of(v: &Value) -> Value {
    let keys = ["model_version", "seconds", "lower", "upper", "coverage"];
    let rest = ["risk_group", "probability", "model", "calibration"];
    fields(v, &[&keys[..], &rest[..]].concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_wait_and_failure_by_job_id_and_by_profile_agree_at_its_submit() {
    let (state, _dir) = service(true);
    let history = &mira()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events_with_starts(history)).await;
    let job = &mira()[TRAIN_JOBS + 300];
    let at = state.online().now() + 60.0;
    let submit = json!({
        "type": "job_submitted", "job_id": "asked", "at": at,
        "profile": profile_json(job),
    });
    let (st, v) = call(&state, "POST", "/v1/events", Some(submit), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, view) = call(&state, "GET", "/v1/jobs/asked", None, false).await;
    assert_eq!(st, StatusCode::OK, "{view}");
    for (kind, stored) in [
        ("queue-wait", "queue_wait_at_submit"),
        ("failure", "failure_at_submit"),
    ] {
        let at_submit = wait_or_failure_of(&view["job"][stored]);
        assert!(at_submit["model_version"].is_u64(), "{kind}: {view}");
        let ways = [
            (
                "by job_id",
                predict(&state, kind, json!({ "job_id": "asked" })).await,
            ),
            (
                "by profile at its submit",
                predict(
                    &state,
                    kind,
                    json!({ "profile": profile_json(job), "at": at }),
                )
                .await,
            ),
            (
                "by profile, no at",
                predict(&state, kind, json!({ "profile": profile_json(job) })).await,
            ),
        ];
        for (name, v) in &ways {
            assert_eq!(
                wait_or_failure_of(v),
                at_submit,
                "{kind} {name} differs from {stored}"
            );
        }
    }
}
