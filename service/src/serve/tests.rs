//! Tests of the API through the real router (`tower::ServiceExt::oneshot`), with models
//! trained on a slice of the bundled Philly trace.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use augur_datasets::JobRecord;
use augur_features::{batch_features, TraceEvent};
use augur_predictor::RuntimePredictor;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use serde_json::{json, Value};
use tower::ServiceExt;

use super::config::ServeConfig;
use super::events::JobProfile;
use super::training;
use super::{own_routes, router, AppState};

const TOKEN: &str = "test-token-0123456789";
/// Jobs of the Philly slice the fixture models are trained on.
const TRAIN_JOBS: usize = 3000;

/// The first jobs of the bundled Philly trace by submit time (read once).
fn philly() -> &'static [JobRecord] {
    static JOBS: OnceLock<Vec<JobRecord>> = OnceLock::new();
    JOBS.get_or_init(|| training::bundled_jobs("philly", Some(6000)).expect("bundled philly"))
}

/// The first jobs of the bundled Mira log (Philly has no start times, so no queue waits).
fn mira() -> &'static [JobRecord] {
    static JOBS: OnceLock<Vec<JobRecord>> = OnceLock::new();
    JOBS.get_or_init(|| training::bundled_jobs("mira", Some(4000)).expect("bundled mira"))
}

/// The first jobs of the bundled Alibaba openb pods (it has job outcomes; Philly has none).
fn openb() -> &'static [JobRecord] {
    static JOBS: OnceLock<Vec<JobRecord>> = OnceLock::new();
    JOBS.get_or_init(|| training::bundled_jobs("openb", Some(4000)).expect("bundled openb"))
}

/// A registry with the runtime model trained on the first [`TRAIN_JOBS`] Philly jobs and
/// the queue-wait model on the first [`TRAIN_JOBS`] Mira jobs and the failure model on the
/// first [`TRAIN_JOBS`] openb pods (trained once).
fn trained_models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let registry = training::open_registry(&dir).unwrap();
        training::train_runtime(&registry, "philly", &philly()[..TRAIN_JOBS], Some(15))
            .unwrap()
            .unwrap();
        training::train_queue_wait(&registry, "mira", &mira()[..TRAIN_JOBS], Some(15))
            .unwrap()
            .unwrap();
        training::train_failure(&registry, "openb", &openb()[..TRAIN_JOBS], Some(15))
            .unwrap()
            .unwrap();
        training::train_convergence(&registry, Some(15))
            .unwrap()
            .unwrap();
        dir.join("models")
    })
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A service over a fresh data folder (with the fixture models when `models`).
fn service(models: bool) -> (AppState, tempfile::TempDir) {
    let every = ServeConfig::default().retrain_every_jobs;
    let (state, dir, _shutdown) = scheduled_service(models, every);
    (state, dir)
}

async fn call(
    state: &AppState,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: bool,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    if token {
        req = req.header("authorization", format!("Bearer {TOKEN}"));
    }
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    }
    .unwrap();
    raw(state, req).await
}

async fn raw(state: &AppState, req: Request<Body>) -> (StatusCode, Value) {
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, v)
}

fn profile_json(j: &JobRecord) -> Value {
    serde_json::to_value(JobProfile::of_record(j)).unwrap()
}

/// The events of trace jobs in the order the offline replay applies them.
fn trace_events(jobs: &[JobRecord]) -> Vec<Value> {
    TraceEvent::of_trace(jobs)
        .into_iter()
        .map(|e| match e {
            TraceEvent::Submit { index, at } => json!({
                "type": "job_submitted", "job_id": jobs[index].job_id, "at": at,
                "profile": profile_json(&jobs[index]),
            }),
            TraceEvent::Finish { index, at } => json!({
                "type": "job_finished", "job_id": jobs[index].job_id, "at": at,
                "status": jobs[index].status.as_str(),
                "duration": jobs[index].duration,
            }),
        })
        .collect()
}

async fn ingest(state: &AppState, events: &[Value]) {
    for chunk in events.chunks(500) {
        let (st, v) = call(
            state,
            "POST",
            "/v1/events/batch",
            Some(json!({ "events": chunk })),
            true,
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_predictions_equal_offline_on_a_real_trace_slice() {
    let (state, _dir) = service(true);
    // the 1500 Philly jobs after the training slice, replayed as events
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 1500].to_vec();
    ingest(&state, &trace_events(&jobs)).await;

    let model: std::sync::Arc<RuntimePredictor> = {
        let o = state.online();
        o.models.runtime.as_ref().unwrap().model.clone()
    };
    // offline: the batch feature replay over the same jobs, same schema, same model
    let x = batch_features(&jobs, &model.schema);
    let d = model.schema.len();
    let mut compared = 0;
    let o = state.online();
    for (i, j) in jobs.iter().enumerate() {
        let offline = model.predict_log(&x[i * d..(i + 1) * d]).exp();
        let info = &o.jobs[&j.job_id];
        let online = info.runtime_at_submit.expect("predicted at submit").seconds;
        assert_eq!(online, offline, "job {} (row {i})", j.job_id);
        compared += 1;
    }
    assert_eq!(compared, 1500);
    // jobs with history really differ from a cold start (the state is doing work)
    let distinct: std::collections::HashSet<u64> = o
        .jobs
        .values()
        .filter_map(|j| j.runtime_at_submit.map(|r| r.seconds.to_bits()))
        .collect();
    assert!(
        distinct.len() > 100,
        "{} distinct predictions",
        distinct.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_carry_version_and_interval_and_jobs_get_etas() {
    let (state, _dir) = service(true);
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 300].to_vec();
    ingest(&state, &trace_events(&jobs)).await;
    let j = &philly()[TRAIN_JOBS + 400];
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/runtime",
        Some(json!({ "job": { "profile": profile_json(j) } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["model_version"], 1);
    let p = &v["prediction"];
    let (s, lo, hi) = (
        p["seconds"].as_f64().unwrap(),
        p["lower"].as_f64().unwrap(),
        p["upper"].as_f64().unwrap(),
    );
    assert!(lo <= s && s <= hi && s > 0.0, "{p}");
    assert_eq!(p["coverage"], 0.8);
    assert_eq!(p["interval"], "online_conformal");
    // a batch answers each job
    let batch: Vec<Value> = mira()[TRAIN_JOBS..TRAIN_JOBS + 10]
        .iter()
        .map(|j| json!({ "profile": profile_json(j) }))
        .collect();
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/queue-wait",
        Some(json!({ "jobs": batch.clone() })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["predictions"].as_array().unwrap().len(), 10);
    assert_eq!(v["model_version"], 1);
    let w = &v["predictions"][0];
    assert!(
        w["upper"].as_f64().unwrap() >= w["seconds"].as_f64().unwrap(),
        "{w}"
    );

    // a submitted, not started job: ETA to start and to finish
    let at = jobs.last().unwrap().submit_time + 10.0;
    let ev = json!({ "type": "job_submitted", "job_id": "new-job", "at": at, "profile": profile_json(j) });
    let (st, _) = call(&state, "POST", "/v1/events", Some(ev), true).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = call(&state, "GET", "/v1/jobs/new-job", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["phase"], "queued");
    let start = v["eta"]["start"].as_f64().unwrap();
    let finish = v["eta"]["finish"].as_f64().unwrap();
    let rt = v["job"]["runtime_at_submit"]["seconds"].as_f64().unwrap();
    assert!(start >= at, "{v}");
    assert!(
        (finish - start - rt).abs() < 1e-6 * finish.abs().max(1.0),
        "{v}"
    );
    let (st, v) = call(&state, "GET", "/v1/jobs/nope", None, false).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");

    // DAG makespan: a diamond; the critical path goes through the longer branch
    let dag = json!({ "stages": [
        { "id": "a", "estimate_seconds": 10.0 },
        { "id": "b", "depends_on": ["a"], "estimate_seconds": 100.0 },
        { "id": "c", "depends_on": ["a"], "estimate_seconds": 5.0 },
        { "id": "d", "depends_on": ["b", "c"], "estimate_seconds": 1.0 }
    ]});
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/dag-makespan",
        Some(json!({ "job": { "profile": {}, "dag": dag } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["prediction"]["seconds"], 111.0);
    assert_eq!(v["prediction"]["critical_path"], json!(["a", "b", "d"]));
    // failure: a calibrated probability from the served model
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/failure",
        Some(json!({ "jobs": batch })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["model_version"], 1);
    for p in v["predictions"].as_array().unwrap() {
        let pr = p["probability"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pr), "{p}");
    }
    // convergence: a real MLPerf run's first half of eval points, ingested as metric points
    let runs = augur_predictor::convergence::load_bundled_mlperf().unwrap();
    let run = runs.iter().rev().find(|r| r.points.len() >= 6).unwrap();
    let half = &run.points[..run.points.len() / 2];
    let t0 = 5.0e8;
    let mut events = vec![
        json!({ "type": "job_submitted", "job_id": "mlperf-run", "at": t0,
                "profile": { "job_name": run.context.benchmark, "num_gpus": run.context.accelerators } }),
        json!({ "type": "job_started", "job_id": "mlperf-run", "at": t0 }),
    ];
    events.push(
        json!({ "type": "metric_points", "job_id": "mlperf-run", "points": half
        .iter()
        .enumerate()
        .map(|(i, p)| json!({ "step": i, "accuracy": p.value, "at": t0 + p.wall_time_s }))
        .collect::<Vec<_>>() }),
    );
    ingest(&state, &events).await;
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/convergence",
        Some(json!({ "job": { "job_id": "mlperf-run" } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["metric"], "accuracy");
    assert_eq!(p["points"], half.len());
    let (lo, mid, hi) = (
        p["remaining_lower_s"].as_f64().unwrap(),
        p["remaining_s"].as_f64().unwrap(),
        p["remaining_upper_s"].as_f64().unwrap(),
    );
    assert!(lo <= mid && mid <= hi && mid >= 0.0, "{p}");
    // a job without points: 422 naming the job
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/convergence",
        Some(json!({ "job": { "job_id": "new-job" } })),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "job.job_id");
}

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
        Some(json!({ "job": { "profile": {} } })),
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
        Some(json!({ "jobs": [{ "profile": {} }, { "profile": { "user": 3 } }] })),
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
    for r in own_routes() {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrain_promote_and_rollback_swap_models_without_dropping_requests() {
    let (state, _dir) = service(true);
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 1200].to_vec();
    ingest(&state, &trace_events(&jobs)).await;
    // predictions keep flowing (and succeeding) while models are swapped
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let state = state.clone();
        let stop = stop.clone();
        let body = json!({ "job": { "profile": profile_json(&jobs[0]) } });
        tokio::spawn(async move {
            let mut n = 0;
            let mut versions = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (st, v) = call(
                    &state,
                    "POST",
                    "/v1/predict/runtime",
                    Some(body.clone()),
                    false,
                )
                .await;
                assert_eq!(st, StatusCode::OK, "{v}");
                versions.insert(v["model_version"].as_u64().unwrap());
                n += 1;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            (n, versions)
        })
    };
    // and events keep being ingested: none may be lost by the rebuild
    let ingester = {
        let state = state.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut acked = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let id = format!("during-swap-{}", acked.len());
                let ev = json!({ "type": "job_submitted", "job_id": id, "at": 2.0e9, "profile": { "num_gpus": 1 } });
                let (st, v) = call(&state, "POST", "/v1/events", Some(ev), true).await;
                assert_eq!(st, StatusCode::OK, "{v}");
                acked.push(id);
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            acked
        })
    };
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let (st, _) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "a second retrain while one runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (_, v) = call(&state, "GET", "/v1/models/retrain", None, false).await;
        match v["state"].as_str().unwrap() {
            "running" => {}
            "succeeded" => break,
            other => panic!("retrain {other}: {v}"),
        }
        assert!(std::time::Instant::now() < deadline, "retrain too slow");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // the retrain and the refused second start are on /metrics
    let text = state.ext.metrics.encode().unwrap();
    for line in [
        r#"augur_retrains_total{trigger="manual",outcome="succeeded"} 1"#,
        r#"augur_retrains_total{trigger="manual",outcome="refused_running"} 1"#,
        "augur_retrain_duration_seconds_count 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(v["serving"]["runtime"], 2, "{v}");
    assert_eq!(
        v["kinds"]["runtime"]["versions"].as_array().unwrap().len(),
        2
    );
    assert_eq!(v["kinds"]["runtime"]["versions"][1]["dataset"], "ingested");
    let (st, v) = call(&state, "POST", "/v1/models/runtime/rollback", None, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(v["serving"]["runtime"], 1);
    let (st, v) = call(
        &state,
        "POST",
        "/v1/models/runtime/promote",
        Some(json!({ "version": 9 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "version");
    let (st, _) = call(
        &state,
        "POST",
        "/v1/models/runtime/promote",
        Some(json!({ "version": 2 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (n, versions) = probe.await.unwrap();
    let acked = ingester.await.unwrap();
    assert!(
        acked.len() > 10,
        "{} events ingested during the swaps",
        acked.len()
    );
    assert!(n > 10, "{n} probe requests");
    assert!(versions.contains(&1), "{versions:?}");
    // the online state was rebuilt for the swapped model: still knows every job
    let o = state.online();
    assert_eq!(o.models.runtime.as_ref().unwrap().meta.version, 2);
    assert_eq!(o.jobs.len(), 1200 + acked.len());
    for id in &acked {
        assert!(o.jobs[id].submitted_at.is_some(), "{id} lost by a swap");
    }
    assert_eq!(o.counts.job_submitted as usize, 1200 + acked.len());
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
        let posts: Vec<&str> = own_routes()
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

/// A service over a fresh data folder (with the fixture models when `models`) whose
/// background retrain schedule runs every `every` finished jobs; keep the sender alive
/// (dropping it stops the schedule).
fn scheduled_service(
    models: bool,
    every: usize,
) -> (
    AppState,
    tempfile::TempDir,
    tokio::sync::watch::Sender<bool>,
) {
    let dir = tempfile::tempdir().unwrap();
    if models {
        copy_dir(trained_models(), &dir.path().join("models"));
    }
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        trees: Some(15),
        min_retrain_jobs: 200,
        retrain_every_jobs: every,
        ..ServeConfig::default()
    };
    let (state, info) = AppState::open(config).unwrap();
    (state, dir, info.shutdown_tx)
}

/// [`trace_events`] with a `job_started` event for each job with a start time, all in time
/// order (submit before start before finish at equal times): the ingested history then has
/// queue waits.
fn trace_events_with_starts(jobs: &[JobRecord]) -> Vec<Value> {
    let rank = |e: &Value| match e["type"].as_str() {
        Some("job_submitted") => 0,
        Some("job_started") => 1,
        _ => 2,
    };
    let mut events = trace_events(jobs);
    events.extend(jobs.iter().filter_map(|j| {
        j.start_time
            .map(|at| json!({ "type": "job_started", "job_id": j.job_id, "at": at }))
    }));
    events.sort_by(|a, b| {
        let (x, y) = (a["at"].as_f64().unwrap(), b["at"].as_f64().unwrap());
        x.total_cmp(&y).then(rank(a).cmp(&rank(b)))
    });
    events
}

/// Waits for the retrain status to leave `running`; returns it.
async fn wait_retrain_done(state: &AppState) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (_, v) = call(state, "GET", "/v1/models/retrain", None, false).await;
        if v["state"] != "running" && v["state"] != "idle" {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retrain too slow: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retrain_serves_a_queue_wait_model_without_a_manual_call() {
    let (state, _dir, _shutdown) = scheduled_service(false, 300);
    super::retrain::spawn_schedule(state.clone());
    let body = json!({ "jobs": [{ "profile": profile_json(&mira()[0]) }] });
    let (st, v) = call(
        &state,
        "POST",
        "/v1/predict/queue-wait",
        Some(body.clone()),
        false,
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    // a real trace with start times, replayed as events; no retrain is asked for
    ingest(&state, &trace_events_with_starts(&mira()[..1200])).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (st, v) = call(
            &state,
            "POST",
            "/v1/predict/queue-wait",
            Some(body.clone()),
            false,
        )
        .await;
        if st == StatusCode::OK {
            break;
        }
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
        assert!(std::time::Instant::now() < deadline, "no queue-wait model");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["trigger"], "schedule", "{v}");
    let (_, v) = call(&state, "GET", "/v1/models", None, false).await;
    let qw = v["serving"]["queue_wait"]
        .as_u64()
        .expect("a served queue-wait model");
    let versions = v["kinds"]["queue_wait"]["versions"].as_array().unwrap();
    let served = versions
        .iter()
        .find(|m| m["version"].as_u64() == Some(qw))
        .unwrap();
    assert_eq!(served["dataset"], "ingested", "{v}");
    assert!(v["serving"]["runtime"].as_u64().is_some(), "{v}");
    let stats = &state.retrain_stats;
    let started = stats
        .scheduled_started
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(started >= 1);

    // more history: the schedule fires again; a manual retrain meanwhile is refused
    ingest(&state, &trace_events_with_starts(&mira()[1200..2000])).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let (_, v) = call(&state, "GET", "/v1/models/retrain", None, false).await;
        let now = stats
            .scheduled_started
            .load(std::sync::atomic::Ordering::SeqCst);
        if v["state"] == "running" && now > started {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no second retrain");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert!(
        stats
            .refused_running
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    );
    assert_eq!(stats.max_running(), 1, "retrains overlapped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_retrain_keeps_a_served_model_that_scores_better() {
    // served: the queue-wait model trained on the first 3000 Mira jobs; the ingested
    // history is only the next 300, so the retrained model learns from 240 jobs
    let (state, _dir, _shutdown) = scheduled_service(true, 250);
    let history = &mira()[TRAIN_JOBS..TRAIN_JOBS + 300];
    ingest(&state, &trace_events_with_starts(history)).await;
    super::retrain::spawn_schedule(state.clone());
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["trigger"], "schedule", "{v}");
    let kept = v["report"]["kept"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k
            .as_str()
            .unwrap()
            .starts_with("queue_wait v2: held-out mae_s")),
        "{v}"
    );
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(m["serving"]["queue_wait"], 1, "{m}");
    let versions = m["kinds"]["queue_wait"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "the new version is saved: {m}");
    assert_eq!(versions[1]["dataset"], "ingested");
    // the decision follows the metric: on the newest slice of the history the retrain saw,
    // the served model's mae_s really is lower than the new one's
    let jobs = state.online().history_records();
    let registry = training::open_registry(_dir.path()).unwrap();
    let (old, _) = registry
        .load::<augur_predictor::QueueWaitPredictor>(augur_predictor::registry::Selector::Version(
            1,
        ))
        .unwrap();
    let (new, _) = registry
        .load::<augur_predictor::QueueWaitPredictor>(augur_predictor::registry::Selector::Version(
            2,
        ))
        .unwrap();
    let old_mae = training::queue_wait_mae_s_on_newest(&old, &jobs)
        .unwrap()
        .unwrap();
    let new_mae = training::queue_wait_mae_s_on_newest(&new, &jobs)
        .unwrap()
        .unwrap();
    assert!(new_mae > old_mae, "new {new_mae} vs served {old_mae}");
    // and predictions still come from the served version
    let body = json!({ "jobs": [{ "profile": profile_json(&history[0]) }] });
    let (st, p) = call(&state, "POST", "/v1/predict/queue-wait", Some(body), false).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p["model_version"], 1);
    assert_eq!(state.retrain_stats.max_running(), 1);
}

/// The served queue-wait model's risk-split bound online: every job submitted is bounded in
/// a risk group at that group's level, and each group's offset moves exactly by its own
/// group's outcomes (a start reveals a hit or a miss, a job still queued past its bound is a
/// miss), never by the other group's. The fixture model gets a risk split built here (upper
/// model score, 60% low share at 93%) so the plumbing is tested whatever the small fixture's
/// search chose.
#[test]
fn queue_wait_risk_groups_adapt_online_from_their_own_outcomes() {
    use super::events::Event;
    use super::online::{Online, Served, ServedModels};
    use super::store::StoredEvent;
    use augur_predictor::queue_wait::{high_level, RiskScore};
    use augur_predictor::registry::Selector;
    use augur_predictor::{QueueWaitPredictor, RiskGroup, RiskSplitBound};

    let registry = training::open_registry(trained_models().parent().unwrap()).unwrap();
    let (mut model, meta) = registry
        .load::<QueueWaitPredictor>(Selector::Serving)
        .unwrap();
    let split = RiskSplitBound {
        score: RiskScore::UpperModel,
        share_low: 0.6,
        level_low: 0.93,
        level_high: high_level(0.95, 0.6, 0.93),
        offset_low: model.upper_offset - 1.0,
        offset_high: model.upper_offset + 1.0,
        step: 0.05,
        window: 100,
        threshold: f64::INFINITY,
        seed_scores: Vec::new(),
    };
    model.risk = Some(split.clone());
    let mut online = Online::new(ServedModels {
        queue_wait: Some(Served {
            model: std::sync::Arc::new(model),
            meta,
        }),
        ..ServedModels::default()
    });
    // the 800 Mira jobs after the fixture's training slice: submits and starts in time order
    let jobs = &mira()[TRAIN_JOBS..TRAIN_JOBS + 800];
    let mut events: Vec<(f64, u8, Event)> = Vec::new();
    for j in jobs {
        events.push((
            j.submit_time,
            0,
            Event::JobSubmitted {
                job_id: j.job_id.clone(),
                at: j.submit_time,
                profile: JobProfile::of_record(j),
                dag: None,
            },
        ));
        if let Some(s) = j.start_time {
            let job_id = j.job_id.clone();
            events.push((s.max(j.submit_time), 1, Event::JobStarted { job_id, at: s }));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut clock = f64::NEG_INFINITY;
    for (seq, (t, _, event)) in events.into_iter().enumerate() {
        clock = clock.max(t);
        online.apply(&StoredEvent {
            seq: seq as i64 + 1,
            received_at: 0.0,
            event,
        });
    }
    // expected moves per group from the jobs' own answers and waits
    let ms = |t: f64| (t * 1000.0).round() as i64;
    let mut moves = [(0usize, 0usize); 2]; // (misses, hits) per group
    let mut groups = [0usize; 2];
    for j in jobs {
        let w = online.jobs[&j.job_id]
            .queue_wait_at_submit
            .expect("predicted at submit");
        let g = w.risk_group.expect("a risk group");
        let k = usize::from(g == RiskGroup::High);
        groups[k] += 1;
        let want_level = if k == 0 {
            split.level_low
        } else {
            split.level_high
        };
        assert_eq!(w.coverage, want_level, "{w:?}");
        let info = &online.jobs[&j.job_id];
        match info.started_at {
            Some(s) if s - j.submit_time > w.upper => moves[k].0 += 1,
            Some(_) => moves[k].1 += 1,
            None if ms(j.submit_time + w.upper) < ms(clock) => moves[k].0 += 1,
            None => {}
        }
    }
    assert!(groups[0] > 200 && groups[1] > 200, "{groups:?}");
    let st = online.wait_risk_state().expect("risk state");
    for (k, (b, level, start)) in [
        (&st.low, split.level_low, split.offset_low),
        (&st.high, split.level_high, split.offset_high),
    ]
    .into_iter()
    .enumerate()
    {
        let (miss, hit) = moves[k];
        let want = start + 0.05 * (level * miss as f64 - (1.0 - level) * hit as f64);
        assert!(miss + hit > 100, "group {k}: {moves:?}");
        assert!(
            (b.offset - want).abs() < 1e-9,
            "group {k}: offset {} want {want} ({moves:?})",
            b.offset
        );
    }
}
