//! The OpenAPI 3.1 document of the API, served at `/openapi.json`. Hand-written; a test
//! checks that every route of [`super::own_routes`] and of the plugged-in files (live,
//! metrics, status) is in it, and that every path in it is routed.

use axum::Json;
use serde_json::{json, Value};

/// `GET /openapi.json`.
pub async fn serve() -> Json<Value> {
    Json(document())
}

fn op(summary: &str, tag: &str, body: Option<&str>, ok: &str, auth: bool) -> Value {
    let mut o = json!({
        "summary": summary,
        "tags": [tag],
        "responses": {
            "200": { "description": ok, "content": { "application/json": {} } },
            "default": { "description": "an error", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
        }
    });
    if let Some(schema) = body {
        o["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } }
        });
    }
    if auth {
        o["security"] = json!([{ "bearer": [] }]);
    }
    o
}

/// A GET without a JSON schema (pages, assets, text).
fn html(summary: &str, tag: &str) -> Value {
    json!({ "summary": summary, "tags": [tag], "responses": { "200": { "description": "OK" } } })
}

/// A GET with `?limit=N`.
fn limited(summary: &str, tag: &str) -> Value {
    json!({
        "summary": summary,
        "tags": [tag],
        "parameters": [{ "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1 } }],
        "responses": { "200": { "description": "JSON", "content": { "application/json": {} } } }
    })
}

/// The routes of the plugged-in files (status page, metrics, live cluster and controller).
fn plugged_paths() -> Value {
    json!({
            "/": { "get": html("The status page: utilisation and queue over time, predicted vs actual for recent jobs, controller decisions", "status") },
            "/status/uPlot.iife.min.js": { "get": html("The status page's chart library (uPlot, MIT, vendored)", "status") },
            "/status/uPlot.min.css": { "get": html("The chart library's stylesheet", "status") },
            "/status/uPlot.LICENSE": { "get": html("The chart library's license", "status") },
            "/metrics": { "get": html("Prometheus metrics (text exposition format): request and prediction latency, predictions by model version, live accuracy, controller actions, cluster utilisation and queue", "ops") },
            "/v1/ping": { "get": html("A trivial handler (baseline of the load benchmark)", "ops") },
            "/v1/predictions/recent": { "get": limited("Recently finished jobs: predicted (at submit) vs actual", "status") },
            "/v1/cluster": { "get": op("The cluster the controller acts on: capacity, use, queue, controller switches", "autoscaler", None, "", false) },
            "/v1/cluster/history": { "get": limited("Utilisation and queue over time", "autoscaler") },
            "/v1/autoscaler/decisions": { "get": limited("The controller's recent decisions with their reasons, newest first", "autoscaler") },
            "/v1/autoscaler/dry-run": { "post": {
                "summary": "Switch dry-run (decide and log, do not act)",
                "tags": ["autoscaler"],
                "security": [{ "bearer": [] }],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["enabled"], "properties": { "enabled": { "type": "boolean" } }, "additionalProperties": false } } } },
                "responses": { "200": { "description": "`{controller}`" } }
            } },
            "/v1/autoscaler/pause": { "post": op("Pause the controller loop", "autoscaler", None, "`{controller}`", true) },
            "/v1/autoscaler/resume": { "post": op("Resume the controller loop", "autoscaler", None, "`{controller}`", true) }
    })
}

/// The document.
pub fn document() -> Value {
    let predict = |what: &str| {
        op(
            &format!("Predict {what} for one job (`job`) or a batch (`jobs`); each answer carries the model version and its interval"),
            "predict",
            Some("PredictRequest"),
            "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`",
            false,
        )
    };
    let mut failure = predict("the probability that the job ends failed (calibrated; no interval)");
    failure["responses"]["503"] = json!({ "description": "model not available: no failure model in the registry (the bundled Philly trace has no job statuses; `augur train --task failure --dataset openb`, or retrain on an ingested history with statuses)" });
    let mut convergence = predict("when an ingested running job's metric curve converges (give its `job_id`; its metric points with `at` are the curve, its `job_name` the benchmark): remaining and total wall seconds, epoch and final metric, each with an 80% interval");
    convergence["responses"]["503"] = json!({ "description": "model not available yet (trained on the bundled MLPerf runs at first start)" });
    convergence["responses"]["422"] =
        json!({ "description": "no such job, or no metric points with a time" });
    let mut runtime = predict("the run time (seconds, 80% interval)");
    runtime["responses"]["503"] =
        json!({ "description": "model not available yet (first-start training)" });
    let mut wait = predict("the queue wait (seconds, 95% upper bound)");
    wait["responses"]["503"] =
        json!({ "description": "model not available yet (first-start training)" });
    let dag = predict("a DAG's makespan: critical path over the stages' predicted run times");
    let mut retrain_post = op(
        "Retrain both predictors on the ingested history in the background; the new versions are saved, promoted and swapped in without dropping requests",
        "models",
        None,
        "",
        true,
    );
    retrain_post["responses"] = json!({
        "202": { "description": "started; poll GET /v1/models/retrain" },
        "409": { "description": "already running, or too few finished jobs ingested" },
        "default": { "description": "an error" }
    });
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Augur",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Job run-time, queue-wait and DAG-makespan predictions for GPU clusters, from ingested job events. Mutating endpoints need `Authorization: Bearer <token>`."
        },
        "paths": {
            "/healthz": { "get": op("Liveness: the process serves HTTP", "ops", None, "`{status: ok}`", false) },
            "/readyz": { "get": op("Readiness: 200 once the runtime model is loaded, else 503", "ops", None, "`{ready, models}`", false) },
            "/openapi.json": { "get": op("This document", "ops", None, "OpenAPI 3.1", false) },
            "/v1/events": {
                "post": op("Ingest one event; answered once it is stored durably", "ingest", Some("Event"), "`{seq, count}`", true),
                "get": {
                    "summary": "Stored events in sequence order",
                    "tags": ["ingest"],
                    "parameters": [
                        { "name": "after", "in": "query", "schema": { "type": "integer", "default": 0 }, "description": "only events with a larger seq" },
                        { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 1000 } }
                    ],
                    "responses": { "200": { "description": "`{events: [{seq, received_at, event}], next_after}`" } }
                }
            },
            "/v1/events/batch": { "post": op("Ingest a batch of events, stored together (all or none)", "ingest", Some("EventBatch"), "`{first_seq, last_seq, count}`", true) },
            "/v1/jobs/{id}": {
                "get": {
                    "summary": "What Augur knows and predicts about a job: events seen, predictions made at submit, ETA to start and to finish",
                    "tags": ["jobs"],
                    "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": { "200": { "description": "`{job, phase, now, eta, actual, runtime_now}`" }, "404": { "description": "no such job ingested" } }
                }
            },
            "/v1/predict/runtime": { "post": runtime },
            "/v1/predict/queue-wait": { "post": wait },
            "/v1/predict/failure": { "post": failure },
            "/v1/predict/convergence": { "post": convergence },
            "/v1/predict/dag-makespan": { "post": dag },
            "/v1/models": { "get": op("Saved versions of each model kind with their metrics, and the served ones", "models", None, "`{serving, kinds}`", false) },
            "/v1/models/retrain": {
                "get": op("State of the last retrain", "models", None, "`{state: idle|running|succeeded|failed, ...}`", false),
                "post": retrain_post
            },
            "/v1/models/{kind}/promote": {
                "post": {
                    "summary": "Serve a saved version of `runtime`, `queue_wait` or `failure`",
                    "tags": ["models"],
                    "security": [{ "bearer": [] }],
                    "parameters": [{ "name": "kind", "in": "path", "required": true, "schema": { "enum": ["runtime", "queue_wait", "failure"] } }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["version"], "properties": { "version": { "type": "integer", "minimum": 1 } }, "additionalProperties": false } } } },
                    "responses": { "200": { "description": "`{kind, promoted}`" } }
                }
            },
            "/v1/models/{kind}/rollback": {
                "post": {
                    "summary": "Serve the previously promoted version again",
                    "tags": ["models"],
                    "security": [{ "bearer": [] }],
                    "parameters": [{ "name": "kind", "in": "path", "required": true, "schema": { "enum": ["runtime", "queue_wait", "failure"] } }],
                    "responses": { "200": { "description": "`{kind, promoted}`" }, "409": { "description": "nothing to roll back to" } }
                }
            }
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas()
        }
    });
    if let (Some(paths), Value::Object(more)) = (doc["paths"].as_object_mut(), plugged_paths()) {
        paths.extend(more);
    }
    doc
}

fn schemas() -> Value {
    let num = json!({ "type": "number", "minimum": 0 });
    let s = json!({ "type": "string", "maxLength": 256 });
    json!({
        "Error": {
            "type": "object",
            "properties": { "error": { "type": "object", "properties": {
                "code": { "type": "string" }, "field": { "type": "string" }, "message": { "type": "string" } } } }
        },
        "JobProfile": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "num_gpus": num, "num_nodes": num, "gpu_type": s, "cpus": num, "memory_mib": num,
                "requested_time": num, "user": s, "group": s, "job_name": s, "cluster": s, "queue": s
            }
        },
        "Dag": {
            "type": "object", "additionalProperties": false, "required": ["stages"],
            "properties": { "stages": { "type": "array", "minItems": 1, "maxItems": 10000, "items": {
                "type": "object", "additionalProperties": false, "required": ["id"],
                "properties": {
                    "id": s,
                    "depends_on": { "type": "array", "items": s },
                    "profile": { "$ref": "#/components/schemas/JobProfile" },
                    "estimate_seconds": num
                } } } }
        },
        "Event": {
            "oneOf": [
                { "type": "object", "additionalProperties": false, "required": ["type", "job_id", "at"],
                  "properties": { "type": { "const": "job_submitted" }, "job_id": s, "at": { "type": "number" },
                    "profile": { "$ref": "#/components/schemas/JobProfile" }, "dag": { "$ref": "#/components/schemas/Dag" } } },
                { "type": "object", "additionalProperties": false, "required": ["type", "job_id", "at"],
                  "properties": { "type": { "const": "job_started" }, "job_id": s, "at": { "type": "number" } } },
                { "type": "object", "additionalProperties": false, "required": ["type", "job_id", "at", "status"],
                  "properties": { "type": { "const": "job_finished" }, "job_id": s, "at": { "type": "number" },
                    "status": { "enum": ["completed", "failed", "killed", "unknown"] }, "duration": num } },
                { "type": "object", "additionalProperties": false, "required": ["type", "job_id", "points"],
                  "properties": { "type": { "const": "metric_points" }, "job_id": s,
                    "points": { "type": "array", "minItems": 1, "maxItems": 10000, "items": {
                      "type": "object", "additionalProperties": false, "required": ["step"],
                      "properties": { "step": { "type": "integer", "minimum": 0 }, "loss": { "type": "number" },
                        "accuracy": { "type": "number" }, "at": { "type": "number" } } } } } },
                { "type": "object", "additionalProperties": false, "required": ["type", "at", "total_gpus", "busy_gpus"],
                  "properties": { "type": { "const": "cluster_snapshot" }, "at": { "type": "number" },
                    "total_gpus": num, "busy_gpus": num, "queued_jobs": { "type": "integer" },
                    "running_jobs": { "type": "integer" }, "nodes": { "type": "integer" } } }
            ]
        },
        "EventBatch": {
            "type": "object", "additionalProperties": false, "required": ["events"],
            "properties": { "events": { "type": "array", "minItems": 1, "items": { "$ref": "#/components/schemas/Event" } } }
        },
        "PredictJob": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "job_id": s, "at": { "type": "number" },
                "profile": { "$ref": "#/components/schemas/JobProfile" },
                "dag": { "$ref": "#/components/schemas/Dag" }
            }
        },
        "PredictRequest": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "job": { "$ref": "#/components/schemas/PredictJob" },
                "jobs": { "type": "array", "minItems": 1, "items": { "$ref": "#/components/schemas/PredictJob" } }
            }
        }
    })
}
