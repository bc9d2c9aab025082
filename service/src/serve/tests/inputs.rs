//! Sane inputs: implausible fields, empty profiles and a finish before its submit are
//! refused with the field named, and nothing of the request is stored.

use axum::http::StatusCode;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implausible_inputs_are_refused_naming_the_field() {
    let (state, _dir) = service(true);
    let submit = |id: &str, at: f64, profile: serde_json::Value| json!({ "type": "job_submitted", "job_id": id, "at": at, "profile": profile });
    let cases = [
        (
            json!({ "events": [submit("a", 1e9, json!({ "num_gpus": 100_000_000 }))] }),
            "events[0].profile.num_gpus",
        ),
        (
            json!({ "events": [submit("a", 1e9, json!({}))] }),
            "events[0].profile",
        ),
        (
            json!({ "events": [submit("a", 1e9, json!({ "num_gpus": 1, "requested_time": 1e9 }))] }),
            "events[0].profile.requested_time",
        ),
        (
            json!({ "events": [
                submit("a", 1e9, json!({ "num_gpus": 1 })),
                { "type": "job_finished", "job_id": "a", "at": 1e9 - 10.0, "status": "completed" },
            ] }),
            "events[1].at",
        ),
        (
            json!({ "events": [
                submit("a", 1e9, json!({ "num_gpus": 1 })),
                { "type": "job_finished", "job_id": "a", "at": 1e9 + 10.0, "status": "completed",
                  "duration": 1e10 },
            ] }),
            "events[1].duration",
        ),
    ];
    for (body, field) in cases {
        let (st, v) = call(&state, "POST", "/v1/events/batch", Some(body), true).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert_eq!(v["error"]["field"], field, "{v}");
    }
    assert_eq!(
        state.store.count().unwrap(),
        0,
        "a refused batch stores nothing"
    );

    // a finish before the submit ingested earlier is refused too
    let (st, v) = call(
        &state,
        "POST",
        "/v1/events",
        Some(submit("b", 1e9, json!({ "num_gpus": 2 }))),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let early = json!({ "type": "job_started", "job_id": "b", "at": 1e9 - 1.0 });
    let (st, v) = call(&state, "POST", "/v1/events", Some(early), true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "at", "{v}");

    // predictions: an empty or implausible profile is named
    for (job, field) in [
        (json!({ "profile": {} }), "job.profile"),
        (
            json!({ "profile": { "num_gpus": 1e8 } }),
            "job.profile.num_gpus",
        ),
    ] {
        let (st, v) = call(
            &state,
            "POST",
            "/v1/predict/runtime",
            Some(json!({ "job": job })),
            false,
        )
        .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert_eq!(v["error"]["field"], field, "{v}");
    }
}
