//! The endpoints of the cluster under the controller: each backend's view of its cluster
//! ([`super::views`]), its history and the controller's decisions, and the controller's
//! switches.
//!
//! | route | |
//! |---|---|
//! | `GET /v1/cluster` | the cluster now: utilisation, queue, running, rescaled jobs; replay speed and lap (simulator), leader and watch state (Kubernetes) or the last poll (Slurm) |
//! | `GET /v1/cluster/history?limit=N` | utilisation and queue over time (newest last) |
//! | `GET /v1/autoscaler/decisions?limit=N` | recent decisions with reasons (newest first) and totals |
//! | `POST /v1/autoscaler/dry-run` `{"enabled": bool}` | decide and log, do not act (token) |
//! | `POST /v1/autoscaler/pause`, `/resume` | stop / restart the controller (token) |

use std::sync::atomic::Ordering;

use augur_autoscaler::live::{ClusterPoint, LiveDecision, Outcome};
use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::controller::{DecisionJobs, Driven, Live, StoredSwitches};
use super::sim::SNAPSHOT_EVERY_S;
use super::views::{ClusterView, Switches};
use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::{lock, AppState};

/// `?limit=N`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LimitQuery {
    /// How many (the endpoint says its default and most).
    #[param(minimum = 1)]
    pub limit: Option<usize>,
}

fn limit_of(
    q: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let limit = q.limit.unwrap_or(default);
    if limit == 0 || limit > max {
        return Err(ApiError::invalid(
            "limit",
            format!("must be 1 to {max}, got {limit}"),
        ));
    }
    Ok(limit)
}

fn switches(state: &AppState) -> Switches {
    let live = &state.ext.live;
    Switches {
        health: state.ext.backend_health(),
        status: live.status(),
        policy: "elastic",
        paused: live.paused.load(Ordering::SeqCst),
        dry_run: live.dry_run.load(Ordering::SeqCst),
    }
}

/// `GET /v1/cluster`.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    tag = "autoscaler",
    summary = "The cluster the controller acts on: capacity, use, queue, controller switches",
    responses((status = 200, description = "the cluster now", body = ClusterView))
)]
pub async fn cluster(State(state): State<AppState>) -> Json<ClusterView> {
    // a backend without a controller loop shows its own view
    if let Some(view) = state.ext.backend.cluster_view() {
        return Json(view);
    }
    let live = &state.ext.live;
    let controller = switches(&state);
    let guard = live.running.lock().await;
    Json(match guard.as_ref() {
        None => ClusterView::Loading {
            controller,
            speed: live.speed,
        },
        Some(d) => d.cluster_view(controller),
    })
}

/// Utilisation and queue over time.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryView {
    /// Cluster seconds between two points.
    pub every_s: f64,
    pub count: usize,
    /// Oldest first (`ClusterPoint`s).
    #[schema(value_type = Vec<Object>)]
    pub points: Vec<ClusterPoint>,
}

/// `GET /v1/cluster/history?limit=N` (default and most: 720 points).
#[utoipa::path(
    get,
    path = "/v1/cluster/history",
    tag = "autoscaler",
    summary = "Utilisation and queue over time (newest last; default and most 720 points)",
    params(LimitQuery),
    responses((status = 200, description = "the history", body = HistoryView))
)]
pub async fn history(
    State(state): State<AppState>,
    q: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<HistoryView>, ApiError> {
    let limit = limit_of(q, 720, 720)?;
    let guard = state.ext.live.running.lock().await;
    let points: Vec<ClusterPoint> = guard
        .as_ref()
        .map_or_else(Vec::new, |d| d.view().history_tail(limit));
    let every_s = guard
        .as_ref()
        .map_or(SNAPSHOT_EVERY_S, |d| d.history_every_s());
    Ok(Json(HistoryView {
        every_s,
        count: points.len(),
        points,
    }))
}

/// Decisions so far by action, reason and outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct Total {
    pub action: &'static str,
    pub reason: &'static str,
    /// `applied`, `failed` or `dry_run`.
    #[schema(value_type = String)]
    pub outcome: Outcome,
    pub count: u64,
}

/// A decision of the controller with its reason and outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionView {
    /// The `LiveDecision`: seq, time, action, reason, outcome, error.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub decision: LiveDecision,
    /// The job's id in the API (what `GET /v1/jobs/{id}` takes, percent-encoded): the
    /// replayed job's `sim<lap>-<trace id>`, or a Kubernetes job's `namespace/name`;
    /// recorded when the decision was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// On Kubernetes, the job's `namespace/name` while the job exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// The controller's recent decisions.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionsView {
    pub controller: Switches,
    pub count: usize,
    /// Newest first.
    pub decisions: Vec<DecisionView>,
    pub totals: Vec<Total>,
}

fn decision_view(d: &dyn Driven, ids: &DecisionJobs, x: &LiveDecision) -> DecisionView {
    DecisionView {
        decision: x.clone(),
        job_id: ids.get(x.seq).map(str::to_string),
        job_name: d.job_name(x.decision.action.job()),
    }
}

/// `GET /v1/autoscaler/decisions?limit=N` (default 100, most 1000), newest first.
#[utoipa::path(
    get,
    path = "/v1/autoscaler/decisions",
    tag = "autoscaler",
    summary = "The controller's recent decisions with their reasons, newest first (default 100, most 1000)",
    params(LimitQuery),
    responses((status = 200, description = "the decisions and their totals", body = DecisionsView))
)]
pub async fn decisions(
    State(state): State<AppState>,
    q: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DecisionsView>, ApiError> {
    let limit = limit_of(q, 100, 1000)?;
    let live = &state.ext.live;
    let controller = switches(&state);
    let guard = live.running.lock().await;
    let ids = lock(&live.decision_jobs);
    let (recent, totals): (Vec<DecisionView>, Vec<Total>) =
        guard.as_ref().map_or_else(Default::default, |d| {
            let recent = d
                .view()
                .recent(limit)
                .iter()
                .map(|x| decision_view(d.as_ref(), &ids, x))
                .collect();
            let totals = d
                .view()
                .counts()
                .iter()
                .map(|(&(action, reason, outcome), &count)| Total {
                    action,
                    reason,
                    outcome,
                    count,
                })
                .collect();
            (recent, totals)
        });
    Ok(Json(DecisionsView {
        controller,
        count: recent.len(),
        decisions: recent,
        totals,
    }))
}

/// Body of `POST /v1/autoscaler/dry-run`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DryRunBody {
    pub enabled: bool,
}

/// The controller's switches after a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct ControllerView {
    pub controller: Switches,
}

async fn apply_switches(state: &AppState) -> Json<ControllerView> {
    let live = &state.ext.live;
    // take effect at once when the replay runs (the tick task also syncs them)
    if let Some(d) = live.running.lock().await.as_mut() {
        live.sync_switches(d.as_mut());
    }
    Json(ControllerView {
        controller: switches(state),
    })
}

/// `POST /v1/autoscaler/dry-run {"enabled": bool}`.
#[utoipa::path(
    post,
    path = "/v1/autoscaler/dry-run",
    tag = "autoscaler",
    summary = "Switch dry-run (decide and log, do not act)",
    request_body = DryRunBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{controller}`", body = ControllerView),
        (status = 409, description = "started with --dry-run: dry-run stays on")
    )
)]
pub async fn dry_run(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<DryRunBody>,
) -> Result<Json<ControllerView>, ApiError> {
    if !body.enabled && state.ext.live.dry_run_locked.load(Ordering::SeqCst) {
        return Err(ApiError::conflict(
            "augur serve was started with --dry-run: the controller stays in dry-run for the \
             life of the process; restart without --dry-run to let it act",
        ));
    }
    let live = &state.ext.live;
    keep(
        live,
        StoredSwitches {
            dry_run: body.enabled,
            ..live.stored_switches()
        },
    )?;
    tracing::info!(enabled = body.enabled, "autoscaler dry-run switched");
    Ok(apply_switches(&state).await)
}

/// `POST /v1/autoscaler/pause`.
#[utoipa::path(
    post,
    path = "/v1/autoscaler/pause",
    tag = "autoscaler",
    summary = "Pause the controller loop",
    security(("bearer" = [])),
    responses((status = 200, description = "`{controller}`", body = ControllerView))
)]
pub async fn pause(State(state): State<AppState>) -> Result<Json<ControllerView>, ApiError> {
    let live = &state.ext.live;
    keep(
        live,
        StoredSwitches {
            paused: true,
            ..live.stored_switches()
        },
    )?;
    tracing::info!("autoscaler paused");
    Ok(apply_switches(&state).await)
}

/// Sets and keeps the switches; the change is acknowledged only once it is on disk.
fn keep(live: &Live, new: StoredSwitches) -> Result<(), ApiError> {
    live.store_switches(new)
        .map_err(|e| ApiError::internal("the switch could not be kept on disk; nothing changed", e))
}

/// `POST /v1/autoscaler/resume`.
#[utoipa::path(
    post,
    path = "/v1/autoscaler/resume",
    tag = "autoscaler",
    summary = "Resume the controller loop",
    security(("bearer" = [])),
    responses((status = 200, description = "`{controller}`", body = ControllerView))
)]
pub async fn resume(State(state): State<AppState>) -> Result<Json<ControllerView>, ApiError> {
    let live = &state.ext.live;
    keep(
        live,
        StoredSwitches {
            paused: false,
            ..live.stored_switches()
        },
    )?;
    tracing::info!("autoscaler resumed");
    Ok(apply_switches(&state).await)
}
