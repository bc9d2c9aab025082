//! End-to-end: the first start of `augur serve` in an empty data folder serves the runtime
//! model first and is ready then, while the other kinds still train; each answers once it
//! is served, and the endpoints that read every kind keep working meanwhile.

mod common;

use std::process::Stdio;
use std::time::Instant;

use common::{augur, free_addr, http, json_of, Server};
use serde_json::{json, Value};

/// `/readyz` (status, body).
fn readyz(addr: std::net::SocketAddr) -> (u16, Value) {
    let (st, body) = http(addr, "GET", "/readyz", None, None).expect("GET /readyz");
    (st, json_of(&body))
}

fn training(v: &Value) -> Vec<String> {
    v["training"]
        .as_array()
        .unwrap_or_else(|| panic!("no `training` list: {v}"))
        .iter()
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect()
}

/// The Mira log (22,508 jobs) trains the queue-wait model far slower than the runtime one
/// (15 fits and a queue simulation at each submit, against one fit): the window in which the
/// service is ready but the queue-wait model still trains lasts seconds (about 5 s at 20
/// trees on the 2-core machine, longer at 60).
#[test]
fn ready_once_the_runtime_model_is_served_while_the_other_kinds_still_train() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut cmd = augur();
    cmd.args(["serve", "--backend", "none", "--addr", &addr.to_string()])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--bootstrap", "mira", "--trees", "60"])
        .env_remove("AUGUR_SERVE_TOKEN")
        .env("AUGUR_LOG", "warn")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let server = Server::spawn(cmd, addr);
    let started = Instant::now();
    server.wait_ready();
    let ready_after = started.elapsed();
    let (st, ready) = readyz(addr);
    assert_eq!(st, 200, "{ready}");
    assert!(
        training(&ready).contains(&"queue_wait".to_string()),
        "ready only once the queue-wait model was trained: {ready}"
    );
    assert!(
        !training(&ready).contains(&"runtime".to_string()),
        "{ready}"
    );
    eprintln!(
        "ready after {ready_after:?}, still training: {:?}",
        training(&ready)
    );

    // while it trains: its predictions answer 503 model_not_available, the runtime ones 200
    let probe = json!({ "job": { "profile": { "num_nodes": 512, "user": "u1", "requested_time": 3600.0 } } })
        .to_string();
    let (st, body) = http(addr, "POST", "/v1/predict/queue-wait", Some(&probe), None).unwrap();
    assert_eq!(st, 503, "{body}");
    let err = json_of(&body);
    assert_eq!(err["error"]["code"], "model_not_available", "{body}");
    let message = err["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("first-start training"), "{body}");
    let (st, body) = http(addr, "POST", "/v1/predict/runtime", Some(&probe), None).unwrap();
    assert_eq!(st, 200, "{body}");
    // the endpoints that read every kind keep working while kinds are missing
    for path in ["/metrics", "/", "/v1/models", "/v1/eta", "/openapi.json"] {
        let (st, body) = http(addr, "GET", path, None, None).unwrap();
        assert_eq!(st, 200, "GET {path}: {body}");
    }
    let (st, body) = http(addr, "GET", "/metrics", None, None).unwrap();
    assert_eq!(st, 200);
    assert!(body.contains("augur_"), "{body}");
    let (_, ready) = readyz(addr);
    assert!(
        training(&ready).contains(&"queue_wait".to_string()),
        "the window closed before the checks above ran (make the bootstrap larger): {ready}"
    );

    // once it is served it answers with a number, and `/readyz` no longer lists it
    common::trained(addr, common::HISTORY_KINDS);
    let trained_after = started.elapsed();
    eprintln!("history kinds trained after {trained_after:?}");
    let (st, body) = http(addr, "POST", "/v1/predict/queue-wait", Some(&probe), None).unwrap();
    assert_eq!(st, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["kind"], "queue_wait", "{body}");
    assert!(v["model_version"].as_u64().is_some(), "{body}");
    let wait = v["prediction"]["seconds"].as_f64();
    assert!(wait.is_some_and(|w| w.is_finite() && w >= 0.0), "{body}");
    let (st, ready) = readyz(addr);
    assert_eq!(st, 200, "{ready}");
    assert!(ready.get("training_failed").is_none(), "{ready}");
    assert!(ready["models"]["queue_wait"].as_u64().is_some(), "{ready}");
}
