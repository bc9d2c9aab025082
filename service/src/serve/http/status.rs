//! The status page at `/`: plain HTML and a vendored chart library (uPlot 1.6.32, MIT,
//! `service/assets/status/`), embedded in the binary, no build step. The page reads the JSON
//! endpoints `/v1/cluster/history` (utilisation and queue over time), `/v1/predictions/recent`
//! (predicted vs actual run time of recently finished jobs, served here) and
//! `/v1/autoscaler/decisions` (the controller's decisions with their reasons), draws them, and
//! marks `<body data-ready="...">` once every chart is drawn from data (the headless-Chromium
//! test waits for that mark).

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::ApiError;
use crate::serve::state::online::Outcome;
use crate::serve::{lock, AppState};

const INDEX_HTML: &str = include_str!("../../../assets/status/index.html");
const UPLOT_JS: &str = include_str!("../../../assets/status/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../assets/status/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../../../assets/status/uPlot.LICENSE");

/// Finished jobs kept for `/v1/predictions/recent`.
pub const RECENT_KEPT: usize = 500;

/// A finished job: what was predicted at its submit and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FinishedJob {
    pub job_id: String,
    pub status: crate::serve::state::events::FinishStatus,
    pub actual_runtime: Option<f64>,
    pub predicted_runtime: Option<f64>,
    pub runtime_lower: Option<f64>,
    pub runtime_upper: Option<f64>,
    pub runtime_model_version: Option<u32>,
    pub actual_wait: Option<f64>,
    pub predicted_wait: Option<f64>,
}

/// The last [`RECENT_KEPT`] finished jobs (newest last).
#[derive(Debug, Default)]
pub struct RecentOutcomes {
    jobs: Mutex<VecDeque<FinishedJob>>,
}

impl RecentOutcomes {
    /// Keeps a finished job (dropping the oldest past [`RECENT_KEPT`]).
    pub fn push(&self, out: &Outcome) {
        let job = FinishedJob {
            job_id: out.job_id.clone(),
            status: out.status,
            actual_runtime: out.actual_runtime,
            predicted_runtime: out.runtime.map(|r| r.seconds),
            runtime_lower: out.runtime.map(|r| r.lower),
            runtime_upper: out.runtime.map(|r| r.upper),
            runtime_model_version: out.runtime.map(|r| r.model_version),
            actual_wait: out.actual_wait,
            predicted_wait: out.queue_wait.map(|w| w.seconds),
        };
        let mut q = lock(&self.jobs);
        while q.len() >= RECENT_KEPT {
            q.pop_front();
        }
        q.push_back(job);
    }

    /// The newest `limit`, oldest first.
    pub fn newest(&self, limit: usize) -> Vec<FinishedJob> {
        let q = lock(&self.jobs);
        let skip = q.len().saturating_sub(limit);
        q.iter().skip(skip).cloned().collect()
    }
}

/// `GET /v1/ping`: a trivial handler (the load benchmark's baseline: same server, same
/// middleware, no work).
#[utoipa::path(
    get,
    path = "/v1/ping",
    tag = "ops",
    summary = "A trivial handler (baseline of the load benchmark)",
    responses((status = 200, description = "`pong`", body = String, content_type = "text/plain"))
)]
pub async fn ping() -> &'static str {
    "pong"
}

/// `GET /`: the status page.
#[utoipa::path(
    get,
    path = "/",
    tag = "status",
    summary = "The status page: utilisation and queue over time, predicted vs actual for recent jobs, controller decisions",
    responses((status = 200, description = "the page", body = String, content_type = "text/html"))
)]
pub async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// `GET /status/uPlot.iife.min.js`.
#[utoipa::path(
    get,
    path = "/status/uPlot.iife.min.js",
    tag = "status",
    summary = "The status page's chart library (uPlot, MIT, vendored)",
    responses((status = 200, description = "JavaScript", body = String, content_type = "text/javascript"))
)]
pub async fn uplot_js() -> Response {
    asset("text/javascript; charset=utf-8", UPLOT_JS)
}

/// `GET /status/uPlot.min.css`.
#[utoipa::path(
    get,
    path = "/status/uPlot.min.css",
    tag = "status",
    summary = "The chart library's stylesheet",
    responses((status = 200, description = "CSS", body = String, content_type = "text/css"))
)]
pub async fn uplot_css() -> Response {
    asset("text/css; charset=utf-8", UPLOT_CSS)
}

/// `GET /status/uPlot.LICENSE`.
#[utoipa::path(
    get,
    path = "/status/uPlot.LICENSE",
    tag = "status",
    summary = "The chart library's license",
    responses((status = 200, description = "the license text", body = String, content_type = "text/plain"))
)]
pub async fn uplot_license() -> Response {
    asset("text/plain; charset=utf-8", UPLOT_LICENSE)
}

/// Query of `/v1/predictions/recent`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RecentQuery {
    /// How many (1..=500, default 200).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<usize>,
}

/// Recently finished jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecentView {
    pub count: usize,
    /// Oldest first.
    pub jobs: Vec<FinishedJob>,
}

/// `GET /v1/predictions/recent?limit=N`: recently finished jobs, predicted vs actual.
#[utoipa::path(
    get,
    path = "/v1/predictions/recent",
    tag = "status",
    summary = "Recently finished jobs: predicted (at submit) vs actual",
    params(RecentQuery),
    responses((status = 200, description = "the jobs", body = RecentView))
)]
pub async fn recent(
    State(state): State<AppState>,
    q: Result<Query<RecentQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RecentView>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let limit = q.limit.unwrap_or(200);
    if limit == 0 || limit > RECENT_KEPT {
        return Err(ApiError::invalid(
            "limit",
            format!("must be 1 to {RECENT_KEPT}, got {limit}"),
        ));
    }
    let jobs = state.ext.recent.newest(limit);
    Ok(Json(RecentView {
        count: jobs.len(),
        jobs,
    }))
}
