//! The API server's responses: `Status` errors, JSON objects, the `410 Expired` watch event
//! and a PyTorchJob's `Scale`.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A `Status` object of a failed request.
pub(crate) fn status_body(code: u16, reason: &str, message: &str, retry_after_s: u32) -> Value {
    let mut v = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if retry_after_s > 0 {
        v["details"] = json!({ "retryAfterSeconds": retry_after_s });
    }
    v
}

/// An error response with a `Status` body.
pub(crate) fn error(code: u16, reason: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [("content-type", "application/json")],
        status_body(code, reason, message, 0).to_string(),
    )
        .into_response()
}

/// A 200 response with a JSON body.
pub(crate) fn ok_json(v: &Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// A watch response holding one `ERROR` event: `410 Expired` (the resource version asked for
/// was compacted away).
pub(crate) fn expired_watch() -> Response {
    let ev = json!({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version", 0)});
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from(format!("{ev}\n")))
        .unwrap_or_else(|_| error(500, "InternalError", "expired watch"))
}

/// The `autoscaling/v1` `Scale` of a PyTorchJob (specpath
/// `.spec.pytorchReplicaSpecs.Worker.replicas`, statuspath
/// `.status.replicaStatuses.Worker.active`).
pub fn scale_of(job: &Value) -> Value {
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": job["metadata"]["name"],
            "namespace": job["metadata"]["namespace"],
            "uid": job["metadata"]["uid"],
            "resourceVersion": job["metadata"]["resourceVersion"],
            "creationTimestamp": job["metadata"]["creationTimestamp"],
        },
        "spec": { "replicas": job.pointer("/spec/pytorchReplicaSpecs/Worker/replicas").cloned().unwrap_or(json!(1)) },
        "status": {
            "replicas": job.pointer("/status/replicaStatuses/Worker/active").cloned().unwrap_or(json!(0)),
            "selector": format!("training.kubeflow.org/job-name={}", job["metadata"]["name"].as_str().unwrap_or("")),
        },
    })
}
