//! `GET /metrics`: the service's metrics in the Prometheus / OpenMetrics text format
//! (`prometheus-client`): the handler, the request-latency middleware and the listener that
//! turns the service's events into figures. The families themselves (with the table of
//! every family exposed) and the [`Metrics`] handle that records into them are in
//! `families.rs`; the standard process metrics in `process.rs`.
//!
//! Request latency is recorded by the [`track`] middleware (labelled by the matched route
//! pattern, never the raw path, so labels stay bounded). Prediction and outcome figures come
//! from the service's [`ServeEvent`]s ([`spawn_listener`]); controller and cluster figures
//! from the live loop ([`crate::serve::live`]). Handlers can also record directly through
//! [`Metrics`]' methods.

mod families;
mod process;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::broadcast::error::RecvError;

use crate::serve::{AppState, ServeEvent};

pub use families::{Metrics, ROLLING};

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    summary = "Prometheus metrics (text exposition format): request and prediction latency, predictions by model version, live accuracy, controller actions, cluster utilisation and queue",
    responses((status = 200, description = "OpenMetrics text", body = String, content_type = "application/openmetrics-text"))
)]
pub async fn scrape(State(state): State<AppState>) -> Response {
    if let Some(h) = state.ext.backend_health() {
        state.ext.metrics.set_backend(&h);
    }
    let training: Vec<&str> = state
        .first_start
        .training()
        .into_iter()
        .map(|k| k.name())
        .collect();
    let kinds = crate::serve::kinds::registered()
        .iter()
        .map(|k| k.kind().name());
    state.ext.metrics.set_first_start_training(kinds, &training);
    match state.ext.metrics.encode() {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed",
        )
            .into_response(),
    }
}

/// Middleware recording every request's latency by matched route, method and status.
pub async fn track(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = req.method().as_str().to_string();
    let resp = next.run(req).await;
    metrics.observe_http(
        &route,
        &method,
        resp.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

/// Wraps every route of `app` in [`track`].
pub fn instrument(app: Router<AppState>, metrics: &Arc<Metrics>) -> Router<AppState> {
    app.route_layer(axum::middleware::from_fn_with_state(metrics.clone(), track))
}

/// Scores a finished job's predictions into the metrics and the status page's recent list.
pub fn record_outcome(state: &AppState, out: &crate::serve::state::online::Outcome) {
    let m = &state.ext.metrics;
    let job = out.profile.as_ref().map(|p| p.to_record(&out.job_id, 0.0));
    if let (Some(actual), Some(p)) = (out.actual_runtime, out.runtime.as_ref()) {
        let covered = actual >= p.lower && actual <= p.upper;
        m.observe_outcome("runtime", (p.seconds - actual).abs(), Some(covered));
        if let Some(j) = &job {
            m.observe_group_coverage("runtime", j, covered);
        }
    }
    if let (Some(actual), Some(p)) = (out.actual_wait, out.queue_wait.as_ref()) {
        let covered = actual >= p.lower && actual <= p.upper;
        m.observe_outcome("queue_wait", (p.seconds - actual).abs(), Some(covered));
        if let Some(j) = &job {
            m.observe_group_coverage("queue_wait", j, covered);
        }
    }
    state.ext.recent.push(out);
}

/// Listens to the service's events for prediction and outcome figures until shutdown.
pub fn spawn_listener(state: &AppState) {
    let mut rx = state.events.subscribe();
    let mut shutdown = state.shutdown.clone();
    let state = state.clone();
    tokio::spawn(async move {
        // handles by (predictor, version): no label lookup per prediction
        let mut handles: HashMap<(&'static str, u32), (Histogram, Counter)> = HashMap::new();
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ServeEvent::Predicted { kind, model_version, count, seconds }) => {
                        let (h, c) = handles
                            .entry((kind, model_version))
                            .or_insert_with(|| state.ext.metrics.prediction_handles(kind, model_version));
                        h.observe(seconds);
                        c.inc_by(count as u64);
                    }
                    Ok(ServeEvent::JobFinished(out)) => record_outcome(&state, &out),
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "metrics listener fell behind the service events");
                    }
                    Err(RecvError::Closed) => break,
                },
                _ = shutdown.changed() => {
                    if *shutdown.borrow() { break; }
                }
            }
        }
    });
}
