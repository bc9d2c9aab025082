//! The routes: mutating endpoints need the token, errors name their field, every route is
//! in the generated OpenAPI document and every documented path is routed, and no input makes
//! a handler panic or answer 500.

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use serde_json::json;
use tower::ServiceExt;

use super::*;
use crate::serve::http::routes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_endpoints_need_the_token_and_errors_name_fields() {
    let (state, _dir) = service(false);
    let ev = json!({ "type": "job_started", "job_id": "a", "at": 1.0 });
    let (st, v) = call(&state, "POST", "/v1/events", Some(ev.clone()), false).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"]["code"], "unauthorized");
    for path in ["/v1/models/retrain", "/v1/models/runtime/rollback"] {
        let (st, _) = call(&state, "POST", path, None, false).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{path}");
    }
    let (st, _) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK);
    // reads need no token
    let (st, v) = call(&state, "GET", "/v1/events", None, false).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
    let (st, _) = call(&state, "GET", "/healthz", None, false).await;
    assert_eq!(st, StatusCode::OK);
    // no model: not ready, predictions 503
    let (st, _) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": { "num_gpus": 1 } } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");

    // invalid fields are named
    let cases = [
        (
            json!({ "events": [{ "type": "job_started", "job_id": "a", "at": "soon" }] }),
            "events[0].at",
        ),
        (
            json!({ "events": [{ "type": "job_submitted", "job_id": "a", "at": 1, "profile": { "num_gpus": -2 } }] }),
            "events[0].profile.num_gpus",
        ),
        (json!({ "events": [] }), "events"),
        (json!({ "evts": [] }), "evts"),
    ];
    for (body, field) in cases {
        let (st, v) = call(&state, "POST", "/v1/events/batch", Some(body), true).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert_eq!(v["error"]["field"], field, "{v}");
    }
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "jobs": [{ "profile": { "num_gpus": 1 } }, { "profile": { "user": 3 } }] })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "jobs[1].profile.user");
    // malformed JSON: 400; a body over the limit: 413
    let req = Request::builder()
        .method("POST")
        .uri("/v1/events")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::from("{\"type\": "))
        .unwrap();
    let (st, v) = raw(&state, req).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "malformed_json");
    let big = "x".repeat(state.config.body_limit_bytes + 10);
    let req = Request::builder()
        .method("POST")
        .uri("/v1/events")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::from(format!("{{\"job_id\": \"{big}\"}}")))
        .unwrap();
    let (st, _) = raw(&state, req).await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_in_the_openapi_document_and_every_documented_path_is_routed() {
    let (state, _dir) = service(false);
    let (st, doc) = call(&state, "GET", "/openapi.json", None, false).await;
    assert_eq!(st, StatusCode::OK);
    let paths = doc["paths"].as_object().unwrap();
    for r in routes::all() {
        let m = r.method.to_ascii_lowercase();
        assert!(
            paths.get(r.path).and_then(|p| p.get(&m)).is_some(),
            "{} {} is not documented",
            r.method,
            r.path
        );
        if r.auth {
            assert!(
                paths[r.path][&m].get("security").is_some(),
                "{} {} needs a token but the document does not say so",
                r.method,
                r.path
            );
        }
    }
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            let concrete = path.replace("{id}", "x").replace("{kind}", "runtime");
            let (st, v) = call(
                &state,
                &method.to_ascii_uppercase(),
                &concrete,
                Some(json!({})),
                true,
            )
            .await;
            assert_ne!(st, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert_ne!(v["error"]["code"], "no_such_route", "{method} {path}");
        }
    }
    // the routes the plugged-in files (live.rs, metrics.rs, status.rs) serve
    let plugged = [
        ("GET", "/", false),
        ("GET", "/metrics", false),
        ("GET", "/v1/ping", false),
        ("GET", "/v1/predictions/recent", false),
        ("GET", "/v1/cluster", false),
        ("GET", "/v1/cluster/history", false),
        ("GET", "/v1/autoscaler/decisions", false),
        ("POST", "/v1/autoscaler/dry-run", true),
        ("POST", "/v1/autoscaler/pause", true),
        ("POST", "/v1/autoscaler/resume", true),
    ];
    for (method, path, auth) in plugged {
        let m = method.to_ascii_lowercase();
        assert!(
            paths.get(path).and_then(|p| p.get(&m)).is_some(),
            "{method} {path} is not documented"
        );
        let (st, _) = call(&state, method, path, Some(json!({})), false).await;
        assert_eq!(
            auth,
            st == StatusCode::UNAUTHORIZED,
            "{method} {path}: {st}"
        );
    }
    let (st, v) = call(&state, "GET", "/v2/nothing", None, false).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "no_such_route");
}

/// Arbitrary JSON, biased towards the shapes the API expects.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z_]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("job_submitted"),
            Just("job_started"),
            Just("job_finished"),
            Just("metric_points"),
            Just("cluster_snapshot"),
            Just("completed"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        let key = prop_oneof![
            Just("type".to_string()),
            Just("job_id".to_string()),
            Just("at".to_string()),
            Just("profile".to_string()),
            Just("num_gpus".to_string()),
            Just("events".to_string()),
            Just("job".to_string()),
            Just("jobs".to_string()),
            Just("dag".to_string()),
            Just("stages".to_string()),
            Just("depends_on".to_string()),
            Just("id".to_string()),
            Just("points".to_string()),
            Just("step".to_string()),
            Just("status".to_string()),
            Just("version".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// No input makes a handler panic or answer 500: every POST route, any JSON (or bytes).
    #[test]
    fn no_input_panics_or_answers_500(body in arb_json(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        static STATE: OnceLock<(AppState, tempfile::TempDir, tokio::runtime::Runtime)> = OnceLock::new();
        let (state, _, rt) = STATE.get_or_init(|| {
            let rt = tokio::runtime::Runtime::new().unwrap();
            let (s, d) = rt.block_on(async { service(false) });
            (s, d, rt)
        });
        let posts: Vec<&str> = routes::all()
            .into_iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.path)
            .collect();
        rt.block_on(async {
            for path in &posts {
                let concrete = path.replace("{kind}", "runtime");
                for payload in [body.to_string().into_bytes(), bytes.clone()] {
                    let req = Request::builder()
                        .method("POST")
                        .uri(&concrete)
                        .header("authorization", format!("Bearer {TOKEN}"))
                        .header("content-type", "application/json")
                        .body(Body::from(payload))
                        .unwrap();
                    let resp = router(state.clone()).oneshot(req).await.unwrap();
                    let st = resp.status();
                    prop_assert!(
                        st.as_u16() < 500 || st == StatusCode::SERVICE_UNAVAILABLE,
                        "{path} answered {st} to {body}"
                    );
                }
            }
            Ok(())
        })?;
    }
}
