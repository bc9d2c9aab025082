//! Readiness and the backend's health: a failed backend makes `/readyz` 503 naming it,
//! `augur_backend_up` 0 with no utilisation figure, and `GET /v1/cluster` says so; a runtime
//! model that does not load makes it name why.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use super::{call, copy_dir, service, trained_models, ServeConfig, TOKEN};
use crate::serve::{router, AppState};

async fn metrics_text(state: &crate::serve::AppState) -> String {
    let req = Request::get("/metrics").body(Body::empty()).unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn a_failed_backend_fails_readiness_and_reads_down_in_metrics_and_cluster() {
    let (state, _dir) = service(true);
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["runtime_model", "store", "backend:sim"], "{v}");
    assert!(metrics_text(&state)
        .await
        .contains("augur_backend_up{backend=\"sim\"} 1"));

    state
        .ext
        .live
        .set_status("failed: the trace cannot be read");
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.starts_with("backend:sim: failed"), "{reason}");
    let text = metrics_text(&state).await;
    assert!(
        text.contains("augur_backend_up{backend=\"sim\"} 0"),
        "{text}"
    );
    assert!(text.contains("augur_cluster_utilisation NaN"), "{text}");
    let (_, v) = call(&state, "GET", "/v1/cluster", None, false).await;
    assert_eq!(v["controller"]["health"]["up"], false, "{v}");

    state.ext.live.set_status("running");
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

/// The default start trains on Philly, which has neither start times nor job statuses: the
/// kinds it skips by design answer 503 naming the field the history lacks, not "still
/// training, or it failed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_skipped_at_first_start_name_the_field_the_history_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::serve::config::ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(super::TOKEN.into()),
        trees: Some(15),
        bootstrap_limit: Some(3000),
        ..Default::default()
    };
    let (state, _info) = crate::serve::AppState::open(config).unwrap();
    let train = state.clone();
    tokio::task::spawn_blocking(move || {
        crate::serve::tasks::first_start::train_history_kinds(
            &train,
            "philly",
            &crate::serve::tasks::first_start::all_history_kinds(),
        );
    })
    .await
    .unwrap();
    assert!(state.online().models.runtime().is_some(), "runtime trained");
    let probe = serde_json::json!({ "job": { "profile": { "num_gpus": 1, "user": "u1" } } });
    for (kind, lacks) in [
        ("queue-wait", "jobs have start times"),
        ("failure", "jobs have job statuses"),
    ] {
        let path = format!("/v1/predict/{kind}");
        let (st, v) = call(&state, "POST", &path, Some(probe.clone()), false).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{kind}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains("not trained: only"), "{kind}: {message}");
        assert!(message.contains(lacks), "{kind}: {message}");
    }
}

/// A promoted runtime model whose payload was modified on disk (none other loads): `/readyz`
/// names the checksum mismatch, not a first-start training that is not happening, and
/// does not show where the data folder is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_runtime_model_makes_readiness_name_the_checksum_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    copy_dir(trained_models(), &models);
    // the runtime kind's largest file is its payload: one byte flipped in its middle
    let mut files = Vec::new();
    let mut stack = vec![models.join("runtime")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                files.push((e.metadata().unwrap().len(), e.path()));
            }
        }
    }
    let (_, payload) = files.into_iter().max().unwrap();
    let mut bytes = std::fs::read(&payload).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&payload, bytes).unwrap();
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        ..ServeConfig::default()
    };
    let (state, _) = AppState::open(config).unwrap();
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("SHA-256 mismatch"), "{v}");
    assert!(!reason.contains("first start"), "{v}");
    let shown = dir.path().to_string_lossy().to_string();
    assert!(!reason.contains(&shown), "{v}");
}

/// A kind whose first-start training fails (here the registry cannot save its version: a
/// file stands where its first version goes) is named in `/readyz`'s `training_failed`, its
/// predictions answer 503 `model_not_available`, and it stays pending for the next start;
/// the service is ready with the kinds that were served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_first_start_training_fails_is_named_and_the_service_stays_ready() {
    use crate::serve::tasks::first_start;
    let dir = tempfile::tempdir().unwrap();
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        trees: Some(10),
        bootstrap_limit: Some(3000),
        ..ServeConfig::default()
    };
    let (state, info) = AppState::open(config).unwrap();
    let kinds = first_start::all_history_kinds();
    assert_eq!(info.needs_history, kinds);
    let in_the_way = dir.path().join("models").join("queue_wait");
    std::fs::create_dir_all(&in_the_way).unwrap();
    std::fs::write(in_the_way.join("v1"), b"not a version").unwrap();
    let train = state.clone();
    tokio::task::spawn_blocking(move || {
        train.first_start.begin(kinds.clone());
        first_start::train_history_kinds(&train, "mira", &kinds);
    })
    .await
    .unwrap();
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["training"], serde_json::json!([]), "{v}");
    let why = v["training_failed"]["queue_wait"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("could not claim a version number"), "{v}");
    assert!(v["training_failed"].get("runtime").is_none(), "{v}");
    assert!(v["training_failed"].get("failure").is_none(), "{v}");
    let probe = serde_json::json!({ "job": { "profile": { "num_nodes": 512, "user": "u1" } } });
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/queue-wait",
        Some(probe.clone()),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "model_not_available", "{v}");
    let (st, v) = call(&state, "POST", "/v1/predict/runtime", Some(probe), false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // the next start trains it again
    assert_eq!(
        first_start::needs_history(&state.registry).unwrap(),
        [augur_predictor::ModelKind::QueueWait]
    );
}

/// `/metrics` says which kinds the first start still trains (1) and which not (0), for every
/// registered kind, as `/readyz`'s `training` list does.
#[tokio::test]
async fn metrics_name_the_kinds_the_first_start_still_trains() {
    use augur_predictor::ModelKind;
    let (state, _dir) = service(true);
    state.first_start.begin([ModelKind::QueueWait]);
    let text = metrics_text(&state).await;
    for line in [
        r#"augur_first_start_training{kind="queue_wait"} 1"#,
        r#"augur_first_start_training{kind="runtime"} 0"#,
        r#"augur_first_start_training{kind="dag"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    state.first_start.done(ModelKind::QueueWait);
    let text = metrics_text(&state).await;
    let line = r#"augur_first_start_training{kind="queue_wait"} 0"#;
    assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
}
