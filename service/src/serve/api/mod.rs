//! The HTTP handlers of the API (routed in [`super::routes`]). Each answers a typed struct and
//! carries its `#[utoipa::path]`, from which [`super::openapi`] generates the document.
//!
//! - [`ingest`]: storing events and reading them back;
//! - [`jobs`]: what is known and predicted about one job; [`eta`]: when queued jobs start;
//! - [`predict`] and [`dag`]: the predictions;
//! - [`models`]: the served models, retraining, promotion and rollback.
//!
//! Here: liveness, readiness and the fallback for unknown paths.

pub mod dag;
pub mod eta;
pub mod ingest;
pub mod jobs;
pub mod models;
pub mod predict;

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::AppState;

/// The process is up.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

/// `GET /healthz`: the process is up and serving HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    summary = "Liveness: the process serves HTTP",
    responses((status = 200, description = "`{status: ok}`", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The served versions that decide readiness.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyModels {
    pub runtime: Option<u32>,
    pub queue_wait: Option<u32>,
}

/// Whether the service can answer runtime predictions.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub models: ReadyModels,
    /// Why it is not ready (only when not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// `GET /readyz`: 200 once the runtime model is loaded, else 503.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    summary = "Readiness: 200 once the runtime model is loaded, else 503",
    responses(
        (status = 200, description = "ready", body = Readiness),
        (status = 503, description = "not ready yet (first-start training)", body = Readiness)
    )
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let (runtime, queue_wait) = {
        let o = state.online();
        (
            o.models.runtime.as_ref().map(|s| s.meta.version),
            o.models.queue_wait.as_ref().map(|s| s.meta.version),
        )
    };
    let ready = state.ready.load(Ordering::SeqCst) && runtime.is_some();
    let body = Readiness {
        ready,
        models: ReadyModels {
            runtime,
            queue_wait,
        },
        reason: (!ready)
            .then_some("the runtime model is not loaded yet (training at first start?)"),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// Fallback: a path the API does not have.
pub async fn no_such_route(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_such_route",
        format!("no route {} (see /openapi.json)", uri.path()),
    )
}

/// Runs `f` on the blocking thread pool (registry reads and writes, model swaps).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}
