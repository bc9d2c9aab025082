//! Sane inputs: implausible fields, empty profiles, a finish before its submit and a finish
//! lasting longer than the time since its submit are refused with the field named, and
//! nothing of the request is stored.

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
        // a plausible duration, but longer than the job has existed
        (
            json!({ "events": [
                submit("a", 1e9, json!({ "num_gpus": 1 })),
                { "type": "job_finished", "job_id": "a", "at": 1e9 + 10.0, "status": "completed",
                  "duration": 100.0 },
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
    // and a finish lasting longer than the time since it
    let long = json!({ "type": "job_finished", "job_id": "b", "at": 1e9 + 60.0,
                       "status": "completed", "duration": 3600.0 });
    let (st, v) = call(&state, "POST", "/v1/events", Some(long), true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "duration", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{v}"
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requested_time_caps_the_runtime_answer() {
    let (state, _dir) = service(true);
    let mut profile = profile_json(&philly()[TRAIN_JOBS]);
    let (st, free) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": profile } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{free}");
    let free = &free["prediction"];
    assert!(free.get("capped_by_requested_time").is_none(), "{free}");
    // a limit below the free answer's upper bound: the job is ended there
    let limit = (free["upper"].as_f64().unwrap() / 2.0).round();
    profile["requested_time"] = json!(limit);
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": profile } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["capped_by_requested_time"], true, "{p}");
    assert_eq!(p["upper"].as_f64().unwrap(), limit, "{p}");
    assert!(p["seconds"].as_f64().unwrap() <= limit, "{p}");
    // and the answer stored at submit is capped the same way
    let ev = json!({ "type": "job_submitted", "job_id": "limited", "at": philly()[TRAIN_JOBS].submit_time, "profile": profile });
    let (st, v) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, v) = call(&state, "GET", "/v1/jobs/limited", None, false).await;
    let at_submit = &v["job"]["runtime_at_submit"];
    assert_eq!(at_submit["upper"].as_f64().unwrap(), limit, "{v}");
    assert_eq!(at_submit["capped_by_requested_time"], true, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_outlier_jobs_do_not_move_another_users_answer_by_orders_of_magnitude() {
    let (state, _dir) = service(true);
    let history = &philly()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events(history)).await;
    let probe = json!({ "job": { "profile": profile_json(&philly()[TRAIN_JOBS + 300]) } });
    let ask = |state: AppState, body: serde_json::Value| async move {
        let (st, v) = call(&state, "POST", "/v1/predict/runtime", Some(body), false).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v["prediction"]["seconds"].as_f64().unwrap()
    };
    let before = ask(state.clone(), probe.clone()).await;
    // 200 jobs of another user, each running nine years (the most a duration may be), then
    // 200 of a third user that ended at once (duration 0)
    let t0 = history.last().unwrap().submit_time;
    for (user, duration, from) in [
        ("outlier-long", 9.0 * 365.0 * 86_400.0, 0.0),
        ("outlier-short", 0.0, 1000.0),
    ] {
        let mut events = Vec::new();
        for i in 0..200 {
            let id = format!("{user}-{i}");
            let at = t0 + from + f64::from(i);
            // submitted the duration before the finish: a run is never longer than its job
            events.push(
                json!({ "type": "job_submitted", "job_id": id, "at": at - duration,
                "profile": { "num_gpus": 8, "user": user } }),
            );
            events.push(
                json!({ "type": "job_finished", "job_id": id, "at": at + 1.0,
                "status": "completed", "duration": duration }),
            );
        }
        ingest(&state, &events).await;
        let after = ask(state.clone(), probe.clone()).await;
        let ratio = (after / before).max(before / after);
        assert!(
            ratio < 10.0,
            "{user}: another user's answer moved {ratio:.1}x ({before} s -> {after} s)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_larger_than_the_cluster_cannot_fit_on_every_prediction_endpoint() {
    let (state, _dir) = service(true);
    let snapshot =
        json!({ "type": "cluster_snapshot", "at": 1e9, "total_gpus": 64, "busy_gpus": 8 });
    let (st, v) = call(&state, "POST", "/v1/events", Some(snapshot), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let ask = |gpus: f64| {
        let dag = |g: f64| json!({ "stages": [{ "id": "train", "profile": { "num_gpus": g } }] });
        json!({ "jobs": [
            { "profile": { "num_gpus": 1 }, "dag": dag(1.0) },
            { "profile": { "num_gpus": gpus }, "dag": dag(gpus) },
        ] })
    };
    for kind in ["queue-wait", "runtime", "failure", "dag-makespan"] {
        let path = format!("/v1/predict/{kind}");
        let (st, v) = call(&state, "POST", &path, Some(ask(64.0)), false).await;
        assert_eq!(st, StatusCode::OK, "{kind}: {v}");
        let (st, v) = call(&state, "POST", &path, Some(ask(65.0)), false).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{kind}: {v}");
        let field = v["error"]["field"].as_str().unwrap();
        assert!(field.ends_with("profile.num_gpus"), "{kind}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains("cannot fit"), "{kind}: {v}");
        assert!(message.contains("64"), "{kind} names the cluster size: {v}");
    }
}
