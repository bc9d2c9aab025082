//! The HTTP handlers of the API (routes in [`super::own_routes`], documented in
//! [`super::openapi`]).

use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::{ApiError, ApiJson};
use super::events::{Dag, Event, EventBatch, JobProfile};
use super::online::{ConvergenceFailure, Online, PredictError, RuntimeAnswer};
use super::training::{self, CONVERGENCE_KIND, FAILURE_KIND, QUEUE_WAIT_KIND, RUNTIME_KIND};
use super::{AppState, RetrainStatus, ServeEvent};

/// `GET /healthz`: the process is up and serving HTTP.
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: 200 once the runtime model is loaded, else 503.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let (runtime, queue_wait) = {
        let o = state.online();
        (
            o.models.runtime.as_ref().map(|s| s.meta.version),
            o.models.queue_wait.as_ref().map(|s| s.meta.version),
        )
    };
    let ready = state.ready.load(Ordering::SeqCst) && runtime.is_some();
    let body = json!({
        "ready": ready,
        "models": { "runtime": runtime, "queue_wait": queue_wait },
    });
    if ready {
        (StatusCode::OK, Json(body)).into_response()
    } else {
        let mut body = body;
        body["reason"] = json!("the runtime model is not loaded yet (training at first start?)");
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

/// Fallback: a path the API does not have.
pub async fn no_such_route(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_such_route",
        format!("no route {} (see /openapi.json)", uri.path()),
    )
}

fn store_error(e: super::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "storing events failed");
    ApiError::internal(format!(
        "the events were not stored (not acknowledged): {e}"
    ))
}

/// `POST /v1/events`: one event, stored durably before the answer.
pub async fn ingest_one(
    State(state): State<AppState>,
    ApiJson(event): ApiJson<Event>,
) -> Result<Json<Value>, ApiError> {
    event.validate("")?;
    let seqs = state.store.append(vec![event]).await.map_err(store_error)?;
    Ok(Json(json!({ "seq": seqs.first(), "count": 1 })))
}

/// `POST /v1/events/batch`: up to `max_batch` events, stored together (all or none).
pub async fn ingest_batch(
    State(state): State<AppState>,
    ApiJson(batch): ApiJson<EventBatch>,
) -> Result<Json<Value>, ApiError> {
    let n = batch.events.len();
    if n == 0 || n > state.config.max_batch {
        return Err(ApiError::invalid(
            "events",
            format!("must hold 1 to {} events, got {n}", state.config.max_batch),
        ));
    }
    for (i, e) in batch.events.iter().enumerate() {
        e.validate(&format!("events[{i}]"))?;
    }
    let seqs = state
        .store
        .append(batch.events)
        .await
        .map_err(store_error)?;
    Ok(Json(json!({
        "first_seq": seqs.first(),
        "last_seq": seqs.last(),
        "count": seqs.len(),
    })))
}

/// Query of `GET /v1/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events with a larger sequence number.
    #[serde(default)]
    pub after: i64,
    /// At most this many (1 to 10000, default 1000).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// `GET /v1/events?after=SEQ&limit=N`: the stored events in sequence order.
pub async fn list_events(
    State(state): State<AppState>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("(query)", e.body_text()))?;
    let limit = q.limit.unwrap_or(1000);
    if !(1..=10_000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be from 1 to 10000"));
    }
    let store = state.store.clone();
    let events = tokio::task::spawn_blocking(move || store.read_after(q.after, limit))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let next_after = events.last().map(|e| e.seq);
    Ok(Json(json!({ "events": events, "next_after": next_after })))
}

/// `GET /v1/jobs/{id}`: what is known and predicted about a job, with ETAs.
pub async fn job(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let mut o = state.online();
    let now = o.now();
    let Some(info) = o.jobs.get(&id).cloned() else {
        return Err(ApiError::not_found(format!(
            "no job `{id}` has been ingested"
        )));
    };
    // a job not submitted yet has no prediction; one seen only through a finish neither
    let runtime = info.runtime_at_submit;
    let wait = info.queue_wait_at_submit;
    let phase = if info.finished_at.is_some() {
        "finished"
    } else if info.started_at.is_some() {
        "running"
    } else if info.submitted_at.is_some() {
        "queued"
    } else {
        "unknown"
    };
    let mut eta = json!({});
    if phase == "queued" {
        if let Some(submit) = info.submitted_at {
            let start = wait.map(|w| (submit + w.seconds).max(now));
            let start = start.unwrap_or(now);
            eta["start"] = json!(start);
            eta["start_in_seconds"] = json!((start - now).max(0.0));
            if let Some(r) = runtime {
                eta["finish"] = json!(start + r.seconds);
                eta["finish_in_seconds"] = json!((start + r.seconds - now).max(0.0));
            }
            eta["overdue_start"] = json!(wait.is_some_and(|w| submit + w.seconds < now));
        }
    } else if phase == "running" {
        if let (Some(s), Some(r)) = (info.started_at, runtime) {
            let finish = (s + r.seconds).max(now);
            eta["start"] = json!(s);
            eta["finish"] = json!(finish);
            eta["finish_in_seconds"] = json!(finish - now);
            eta["overdue_finish"] = json!(s + r.seconds < now);
            eta["finish_upper"] = json!((s + r.upper).max(now));
        }
    }
    let actual_wait = info
        .started_at
        .zip(info.submitted_at)
        .map(|(s, b)| (s - b).max(0.0));
    // a fresh runtime prediction for a job not yet finished, from what is known now
    let current = if phase != "finished" {
        info.profile.as_ref().and_then(|p| {
            o.predict_runtime(&id, p, info.submitted_at.unwrap_or(now))
                .ok()
        })
    } else {
        None
    };
    drop(o);
    Ok(Json(json!({
        "job": info,
        "phase": phase,
        "now": now,
        "eta": eta,
        "actual": { "runtime": info.duration, "queue_wait": actual_wait },
        "runtime_now": current,
    })))
}

/// One job to predict for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictJob {
    /// An ingested job: its profile (and DAG) are used when none is given here.
    #[serde(default)]
    pub job_id: Option<String>,
    /// Submit time on the events' clock (default: the latest event time).
    #[serde(default)]
    pub at: Option<f64>,
    #[serde(default)]
    pub profile: Option<JobProfile>,
    /// Stages, for `dag-makespan`.
    #[serde(default)]
    pub dag: Option<Dag>,
}

/// Body of the predict endpoints: `{"job": …}` or `{"jobs": […]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    #[serde(default)]
    pub job: Option<PredictJob>,
    #[serde(default)]
    pub jobs: Option<Vec<PredictJob>>,
}

/// The jobs of a request with their field paths (`job` or `jobs[i]`).
fn request_jobs(
    req: PredictRequest,
    max: usize,
) -> Result<(bool, Vec<(String, PredictJob)>), ApiError> {
    match (req.job, req.jobs) {
        (Some(j), None) => Ok((true, vec![("job".to_string(), j)])),
        (None, Some(js)) => {
            if js.is_empty() || js.len() > max {
                return Err(ApiError::invalid(
                    "jobs",
                    format!("must hold 1 to {max} jobs, got {}", js.len()),
                ));
            }
            Ok((
                false,
                js.into_iter()
                    .enumerate()
                    .map(|(i, j)| (format!("jobs[{i}]"), j))
                    .collect(),
            ))
        }
        (Some(_), Some(_)) => Err(ApiError::invalid("jobs", "give `job` or `jobs`, not both")),
        (None, None) => Err(ApiError::invalid(
            "job",
            "give `job` (one) or `jobs` (a batch)",
        )),
    }
}

/// A predict job resolved against what is known: (id, profile, at, dag).
fn resolve(
    o: &Online,
    path: &str,
    j: &PredictJob,
) -> Result<(String, JobProfile, f64, Option<Dag>), ApiError> {
    if let Some(id) = &j.job_id {
        if id.is_empty() || id.len() > super::events::MAX_STRING {
            return Err(ApiError::invalid(
                format!("{path}.job_id"),
                "must be 1 to 256 bytes",
            ));
        }
    }
    if let Some(t) = j.at {
        if !t.is_finite() || t.abs() > 1e12 {
            return Err(ApiError::invalid(
                format!("{path}.at"),
                format!("must be a finite time in seconds within ±1e12, got {t}"),
            ));
        }
    }
    if let Some(p) = &j.profile {
        p.validate(&format!("{path}.profile"))?;
    }
    if let Some(d) = &j.dag {
        d.validate(&format!("{path}.dag"))?;
    }
    let known = j.job_id.as_ref().and_then(|id| o.jobs.get(id));
    let profile = match (&j.profile, known) {
        (Some(p), _) => p.clone(),
        (None, Some(info)) => info.profile.clone().ok_or_else(|| {
            ApiError::invalid(
                format!("{path}.profile"),
                "the job's submit was not ingested: give a profile",
            )
        })?,
        (None, None) => {
            return Err(ApiError::invalid(
                format!("{path}.profile"),
                "give a profile, or the job_id of an ingested job",
            ))
        }
    };
    let dag = j.dag.clone().or_else(|| known.and_then(|i| i.dag.clone()));
    let at = j.at.unwrap_or_else(|| o.now());
    let id = j.job_id.clone().unwrap_or_else(|| "(request)".to_string());
    Ok((id, profile, at, dag))
}

fn predict_error(e: PredictError) -> ApiError {
    match e {
        PredictError::NotAvailable(kind) => ApiError::model_not_available(
            kind,
            "not trained or loaded yet (first-start training still running, or it failed: see the logs and GET /readyz)",
        ),
        PredictError::Internal(m) => ApiError::internal(m),
    }
}

fn answer<T: Serialize>(
    state: &AppState,
    kind: &'static str,
    single: bool,
    version: Option<u32>,
    preds: Vec<T>,
    started: Instant,
) -> Json<Value> {
    if let Some(v) = version {
        let _ = state.events.send(ServeEvent::Predicted {
            kind,
            model_version: v,
            count: preds.len(),
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    if single {
        let p = preds.into_iter().next();
        Json(json!({ "kind": kind, "model_version": version, "prediction": p }))
    } else {
        Json(json!({ "kind": kind, "model_version": version, "predictions": preds }))
    }
}

/// Answers a predict request whose jobs each resolve to a profile (an ingested job, or the
/// profile given): `version` names the served model, `predict` answers one job.
fn predict_profiles<T: Serialize>(
    state: &AppState,
    req: PredictRequest,
    kind: &'static str,
    version: impl Fn(&Online) -> Option<u32>,
    predict: impl Fn(&mut Online, &str, &JobProfile, f64) -> Result<T, PredictError>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let (single, jobs) = request_jobs(req, state.config.max_batch)?;
    let (version, preds) = {
        let mut o = state.online();
        let version = version(&o);
        let mut preds = Vec::with_capacity(jobs.len());
        for (path, j) in &jobs {
            let (id, profile, at, _) = resolve(&o, path, j)?;
            preds.push(predict(&mut o, &id, &profile, at).map_err(predict_error)?);
        }
        (version, preds)
    };
    Ok(answer(state, kind, single, version, preds, started))
}

/// `POST /v1/predict/runtime`.
pub async fn predict_runtime(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Value>, ApiError> {
    predict_profiles(
        &state,
        req,
        "runtime",
        |o| o.models.runtime.as_ref().map(|s| s.meta.version),
        Online::predict_runtime,
    )
}

/// `POST /v1/predict/queue-wait`.
pub async fn predict_queue_wait(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Value>, ApiError> {
    predict_profiles(
        &state,
        req,
        "queue_wait",
        |o| o.models.queue_wait.as_ref().map(|s| s.meta.version),
        Online::predict_wait,
    )
}

/// `POST /v1/predict/failure`: the calibrated probability that each job ends failed.
pub async fn predict_failure(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Value>, ApiError> {
    predict_profiles(
        &state,
        req,
        "failure",
        |o| o.models.failure.as_ref().map(|s| s.meta.version),
        Online::predict_failure,
    )
}

/// `POST /v1/predict/convergence`: when an ingested running job's metric curve converges.
pub async fn predict_convergence(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let (single, jobs) = request_jobs(req, state.config.max_batch)?;
    let (version, preds) = {
        let o = state.online();
        let version = o.models.convergence.as_ref().map(|s| s.meta.version);
        let mut preds = Vec::with_capacity(jobs.len());
        for (path, j) in &jobs {
            let Some(id) = &j.job_id else {
                return Err(ApiError::invalid(
                    format!("{path}.job_id"),
                    "convergence needs the job_id of an ingested job with metric points",
                ));
            };
            let p = o.predict_convergence(id).map_err(|e| match e {
                ConvergenceFailure::Predict(e) => predict_error(e),
                ConvergenceFailure::Input(m) => ApiError::invalid(format!("{path}.job_id"), m),
            })?;
            preds.push(p);
        }
        (version, preds)
    };
    Ok(answer(
        &state,
        "convergence",
        single,
        version,
        preds,
        started,
    ))
}

/// A DAG makespan prediction.
#[derive(Debug, Clone, Serialize)]
pub struct MakespanAnswer {
    pub model_version: Option<u32>,
    /// Critical path length with every stage at its predicted run time, seconds.
    pub seconds: f64,
    /// Critical path with every stage at the lower / upper end of its interval: the
    /// makespan stays in `[lower, upper]` when every stage stays in its interval (no
    /// calibrated joint coverage is claimed).
    pub lower: f64,
    pub upper: f64,
    pub interval: &'static str,
    /// Stage ids on the critical path (predicted run times), in order.
    pub critical_path: Vec<String>,
    /// Per stage: the run time used and where it came from.
    pub stages: Vec<StageAnswer>,
}

/// One stage of a [`MakespanAnswer`].
#[derive(Debug, Clone, Serialize)]
pub struct StageAnswer {
    pub id: String,
    pub seconds: f64,
    pub lower: f64,
    pub upper: f64,
    /// `given` (estimate_seconds) or `runtime_model`.
    pub source: &'static str,
}

/// Longest path through `dag` with stage times `t`; returns (length, path indices).
fn critical_path(dag: &Dag, order: &[usize], t: &[f64]) -> (f64, Vec<usize>) {
    let index: std::collections::HashMap<&str, usize> = dag
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let n = dag.stages.len();
    let mut finish = vec![0.0; n];
    let mut prev: Vec<Option<usize>> = vec![None; n];
    for &i in order {
        let mut start = 0.0;
        let mut p = None;
        for d in &dag.stages[i].depends_on {
            if let Some(&j) = index.get(d.as_str()) {
                if p.is_none() || finish[j] > start {
                    start = finish[j];
                    p = Some(j);
                }
            }
        }
        finish[i] = start + t[i];
        prev[i] = p;
    }
    let Some(last) = (0..n).max_by(|&a, &b| finish[a].total_cmp(&finish[b])) else {
        return (0.0, Vec::new());
    };
    let mut path = vec![last];
    let mut cur = last;
    while let Some(p) = prev[cur] {
        path.push(p);
        cur = p;
    }
    path.reverse();
    (finish[last], path)
}

/// `POST /v1/predict/dag-makespan`: critical path over the stages' predicted run times
/// (the runtime model per stage, or the stage's `estimate_seconds`).
pub async fn predict_dag(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let (single, jobs) = request_jobs(req, state.config.max_batch)?;
    let mut o = state.online();
    let version = o.models.runtime.as_ref().map(|s| s.meta.version);
    let mut preds = Vec::with_capacity(jobs.len());
    for (path, j) in &jobs {
        let (id, profile, at, dag) = resolve(&o, path, j)?;
        let Some(dag) = dag else {
            return Err(ApiError::invalid(
                format!("{path}.dag"),
                "give the DAG's stages (or the job_id of an ingested job submitted with one)",
            ));
        };
        let order = dag.topological_order().ok_or_else(|| {
            ApiError::invalid(
                format!("{path}.dag.stages"),
                "the dependencies form a cycle",
            )
        })?;
        let mut stages = Vec::with_capacity(dag.stages.len());
        let mut used_model = false;
        for s in &dag.stages {
            let a = match s.estimate_seconds {
                Some(e) => StageAnswer {
                    id: s.id.clone(),
                    seconds: e,
                    lower: e,
                    upper: e,
                    source: "given",
                },
                None => {
                    let p = s.profile.as_ref().unwrap_or(&profile);
                    let r: RuntimeAnswer = o
                        .predict_runtime(&format!("{id}/{}", s.id), p, at)
                        .map_err(predict_error)?;
                    used_model = true;
                    StageAnswer {
                        id: s.id.clone(),
                        seconds: r.seconds,
                        lower: r.lower,
                        upper: r.upper,
                        source: "runtime_model",
                    }
                }
            };
            stages.push(a);
        }
        let mid: Vec<f64> = stages.iter().map(|s| s.seconds).collect();
        let lo: Vec<f64> = stages.iter().map(|s| s.lower).collect();
        let hi: Vec<f64> = stages.iter().map(|s| s.upper).collect();
        let (seconds, cp) = critical_path(&dag, &order, &mid);
        let (lower, _) = critical_path(&dag, &order, &lo);
        let (upper, _) = critical_path(&dag, &order, &hi);
        preds.push(MakespanAnswer {
            model_version: if used_model { version } else { None },
            seconds,
            lower,
            upper,
            interval: "stagewise",
            critical_path: cp.into_iter().map(|i| dag.stages[i].id.clone()).collect(),
            stages,
        });
    }
    drop(o);
    Ok(answer(
        &state,
        "dag_makespan",
        single,
        version,
        preds,
        started,
    ))
}

fn check_kind(kind: &str) -> Result<&'static str, ApiError> {
    match kind {
        RUNTIME_KIND => Ok(RUNTIME_KIND),
        QUEUE_WAIT_KIND => Ok(QUEUE_WAIT_KIND),
        FAILURE_KIND => Ok(FAILURE_KIND),
        CONVERGENCE_KIND => Ok(CONVERGENCE_KIND),
        _ => Err(ApiError::not_found(format!(
            "no model kind `{kind}`; kinds: {RUNTIME_KIND}, {QUEUE_WAIT_KIND}, {FAILURE_KIND}, {CONVERGENCE_KIND}"
        ))),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}

/// `GET /v1/models`: every saved version of each kind with its metrics; which is served.
pub async fn list_models(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let serving = {
        let o = state.online();
        json!({
            RUNTIME_KIND: o.models.runtime.as_ref().map(|s| s.meta.version),
            QUEUE_WAIT_KIND: o.models.queue_wait.as_ref().map(|s| s.meta.version),
            FAILURE_KIND: o.models.failure.as_ref().map(|s| s.meta.version),
            CONVERGENCE_KIND: o.models.convergence.as_ref().map(|s| s.meta.version),
        })
    };
    let registry = state.registry.clone();
    let kinds = blocking(move || {
        let mut kinds = serde_json::Map::new();
        for kind in [
            RUNTIME_KIND,
            QUEUE_WAIT_KIND,
            FAILURE_KIND,
            CONVERGENCE_KIND,
        ] {
            let versions = registry
                .versions(kind)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let promotion = registry
                .promotion(kind)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let list: Vec<Value> = versions
                .into_iter()
                .map(|v| match v.meta {
                    Ok(meta) => json!(meta),
                    Err(e) => json!({ "version": v.version, "error": e.to_string() }),
                })
                .collect();
            kinds.insert(
                kind.to_string(),
                json!({ "promoted": promotion, "versions": list }),
            );
        }
        Ok(kinds)
    })
    .await?;
    Ok(Json(json!({ "serving": serving, "kinds": kinds })))
}

/// `GET /v1/models/retrain`: the state of the last retrain.
pub async fn retrain_status(State(state): State<AppState>) -> Json<RetrainStatus> {
    Json(super::lock(&state.retrain).clone())
}

/// `POST /v1/models/retrain`: retrain the predictors on the ingested history in the
/// background (202); the new versions are saved, promoted and swapped in when done.
pub async fn retrain(State(state): State<AppState>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let started = super::retrain::start(&state, super::retrain::Trigger::Manual)
        .map_err(|why| ApiError::conflict(why.to_string()))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(
            json!({ "state": "running", "jobs": started.jobs, "finished_jobs": started.finished, "status": "/v1/models/retrain" }),
        ),
    ))
}

/// Body of `POST /v1/models/{kind}/promote`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteBody {
    pub version: u32,
}

/// `POST /v1/models/{kind}/promote`: serve a saved version.
pub async fn promote(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    ApiJson(body): ApiJson<PromoteBody>,
) -> Result<Json<Value>, ApiError> {
    let kind = check_kind(&kind)?;
    let st = state.clone();
    blocking(move || {
        let p = st
            .registry
            .promote(kind, body.version)
            .map_err(registry_error("version"))?;
        let models = training::load_serving(&st.registry)
            .map_err(|e| ApiError::internal(format!("{e:#}")))?;
        st.swap_models(models);
        Ok(Json(json!({ "kind": kind, "promoted": p })))
    })
    .await
}

/// `POST /v1/models/{kind}/rollback`: serve the previously promoted version again.
pub async fn rollback(
    State(state): State<AppState>,
    Path(kind): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let kind = check_kind(&kind)?;
    let st = state.clone();
    blocking(move || {
        let p = st.registry.rollback(kind).map_err(registry_error("kind"))?;
        let models = training::load_serving(&st.registry)
            .map_err(|e| ApiError::internal(format!("{e:#}")))?;
        st.swap_models(models);
        Ok(Json(json!({ "kind": kind, "promoted": p })))
    })
    .await
}

fn registry_error(field: &'static str) -> impl Fn(augur_predictor::RegistryError) -> ApiError {
    move |e| {
        use augur_predictor::RegistryError as R;
        match e {
            R::NotPromoted { .. } | R::NothingToRollBack { .. } => {
                ApiError::conflict(e.to_string())
            }
            R::UnknownVersion { .. } | R::Empty { .. } => ApiError::invalid(field, e.to_string()),
            _ => ApiError::internal(e.to_string()),
        }
    }
}
