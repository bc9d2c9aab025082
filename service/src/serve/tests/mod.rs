//! Tests of the service through the real router (`tower::ServiceExt::oneshot`), with models
//! trained on slices of the bundled traces, and the fixtures they share:
//!
//! - [`predictions`]: online predictions equal offline ones, answers carry versions,
//!   intervals and ETAs, the queue-wait risk groups adapt online;
//! - [`routes`]: the token, errors that name their field, the OpenAPI document against the
//!   route table, no input answers 500;
//! - [`retrain`]: retraining, promotion and rollback by hand and on the schedule;
//! - [`lifecycle`]: a retrain never serves a worse model, unloadable versions are refused;
//! - [`records`]: the answers at submit are stored records that swaps and restarts keep;
//! - [`answers`]: the ways of asking one job's runtime at one moment agree;
//! - [`dag`]: the DAG model answers DAGs that carry its features, the critical path the
//!   others (saying why); its promotion and rollback;
//! - [`time_identity`]: wall-clock "now" on live backends, RFC 3339 times, re-used job ids;
//! - [`inputs`]: implausible fields, empty profiles and out-of-order events are refused;
//! - [`auth`]: the token on the reads that name users and jobs (`auth_reads`);
//! - [`readiness`]: `/readyz` checks and the backend's health in metrics and `/v1/cluster`;
//! - [`retention`]: the retention window, compaction to the archive, restart over it;
//! - [`snapshot`]: a start from a snapshot of the online state answers as a full replay;
//!   damaged, stale and foreign snapshots are refused;
//! - [`store_errors`]: a failing store answers 500 without its path or SQL text;
//! - [`kinds`]: every registered kind is loaded, snapshotted and restored, listed, promoted,
//!   rolled back and announced;
//! - [`why`]: a queued job's reading of what holds it, the same in `GET /v1/jobs/{id}` and
//!   `GET /v1/eta?why=true`.

mod answers;
mod auth;
mod dag;
mod inputs;
mod kinds;
mod lifecycle;
mod predictions;
mod readiness;
mod records;
mod retention;
mod retrain;
mod routes;
mod snapshot;
mod store_errors;
mod time_identity;
mod why;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use augur_datasets::JobRecord;
use augur_features::TraceEvent;
use augur_predictor::ModelKind;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::config::ServeConfig;
use super::state::events::JobProfile;
use super::tasks::training;
use super::{router, AppState};

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
/// the queue-wait model on the first [`TRAIN_JOBS`] Mira jobs, the failure model on the
/// first [`TRAIN_JOBS`] openb pods, and the DAG model on [`dag_sample`] (trained once).
fn trained_models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let registry = training::open_registry(&dir).unwrap();
        training::train_kind(
            ModelKind::Runtime,
            &registry,
            "philly",
            &philly()[..TRAIN_JOBS],
            Some(15),
        )
        .unwrap()
        .unwrap();
        training::train_kind(
            ModelKind::QueueWait,
            &registry,
            "mira",
            &mira()[..TRAIN_JOBS],
            Some(15),
        )
        .unwrap()
        .unwrap();
        training::train_kind(
            ModelKind::Failure,
            &registry,
            "openb",
            &openb()[..TRAIN_JOBS],
            Some(15),
        )
        .unwrap()
        .unwrap();
        training::train_bundled(ModelKind::Convergence, &registry, Some(15))
            .unwrap()
            .unwrap();
        crate::serve::kinds::dag::train_dag(&registry, dag_sample(), Some(15), 1)
            .unwrap()
            .unwrap();
        dir.join("models")
    })
}

/// Every 8th job of the bundled TPC-H DAGs and every WfCommons instance (read once): the
/// fixture DAG model's training set.
fn dag_sample() -> &'static augur_predictor::dag::DagDataset {
    static DATA: OnceLock<augur_predictor::dag::DagDataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut all = augur_predictor::dag::load_bundled_dag_sets().expect("bundled DAG sets");
        let keep: Vec<bool> = all
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| j.family != "tpch" || i % 8 == 0)
            .collect();
        let mut k = keep.iter();
        all.jobs.retain(|_| *k.next().unwrap());
        let mut k = keep.iter();
        all.groups.retain(|_| *k.next().unwrap());
        all
    })
}

/// Saves a payload that verifies (size, hash) but is no model, as the next `kind` version
/// in the registry at `models` (feature schema `schema`); returns its number.
fn save_unloadable(models: &Path, kind: &str, schema: u32) -> u32 {
    let registry = augur_predictor::ModelRegistry::open(models).unwrap();
    let info = augur_predictor::NewArtifact::new("garbage", 1);
    let garbage = json!({ "not": format!("a {kind} model") });
    registry
        .save_as(kind, &garbage, schema, info)
        .unwrap()
        .version
}

/// Asks to promote `version` of `kind`, which does not load: refused with 422 naming it.
async fn assert_promote_refused(state: &AppState, kind: &str, version: u32) {
    let path = format!("/v1/models/{kind}/promote");
    let body = json!({ "version": version });
    let (st, v) = call(state, "POST", &path, Some(body), true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "version", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    let expected = format!("{kind} v{version} cannot be loaded");
    assert!(message.contains(&expected), "{v}");
    // the answer does not show where the service keeps its files
    let dir = &state.config.data_dir;
    let resolved = std::fs::canonicalize(dir).unwrap();
    for p in [dir.as_path(), resolved.as_path()] {
        assert!(!message.contains(&*p.to_string_lossy()), "{v}");
    }
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
        // these tests read back early jobs of weeks-long trace slices: every job is kept
        // (the retention window has its own tests in `retention`)
        retention_days: 0.0,
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
