//! The HTTP front while the service starts: the listener is bound before the data folder is
//! opened and the stored events are replayed, so `/healthz` answers 200 at once (a liveness
//! probe does not kill a long replay), `/readyz` answers 503 with a `loading` check saying
//! what is loading (e.g. `replaying events 1200000/3000000`), and every other route 503
//! until the full router is installed ([`Gate::open`]); from then on every request goes to
//! it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use tower::ServiceExt;

use super::api::{Health, Readiness, ReadyCheck, ReadyModels};
use crate::serve::lock;

/// What start-up is doing, readable from any thread.
#[derive(Debug, Default)]
pub struct Progress {
    phase: Mutex<String>,
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    /// A new step (`opening the event store`, `replaying events`); the counts restart.
    pub fn phase(&self, what: &str, total: u64) {
        *lock(&self.phase) = what.to_string();
        self.done.store(0, Ordering::SeqCst);
        self.total.store(total, Ordering::SeqCst);
    }

    /// `n` more units of the step done.
    pub fn advance(&self, n: u64) {
        self.done.fetch_add(n, Ordering::SeqCst);
    }

    /// E.g. `replaying events 1200000/3000000`.
    pub fn describe(&self) -> String {
        let phase = lock(&self.phase).clone();
        let phase = if phase.is_empty() {
            "starting".to_string()
        } else {
            phase
        };
        match self.total.load(Ordering::SeqCst) {
            0 => phase,
            total => format!("{phase} {}/{total}", self.done.load(Ordering::SeqCst)),
        }
    }
}

/// The front: answers itself until [`Gate::open`] installs the service's router.
#[derive(Debug, Default)]
pub struct Gate {
    app: OnceLock<Router>,
    pub progress: Arc<Progress>,
}

impl Gate {
    /// From now on every request goes to `app`.
    pub fn open(&self, app: Router) {
        let _ = self.app.set(app);
    }

    /// The router to serve: the gate in front of whatever is installed.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new().fallback(front).with_state(Arc::clone(self))
    }
}

async fn front(State(gate): State<Arc<Gate>>, req: Request) -> Response {
    if let Some(app) = gate.app.get() {
        return match app.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
    }
    let loading = gate.progress.describe();
    match req.uri().path() {
        "/healthz" => Json(Health { status: "ok" }).into_response(),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Readiness {
                ready: false,
                models: ReadyModels {
                    runtime: None,
                    queue_wait: None,
                },
                training: Vec::new(),
                training_failed: Default::default(),
                checks: vec![ReadyCheck {
                    name: "loading".into(),
                    ok: false,
                    detail: loading,
                }],
                reason: Some("loading".into()),
            }),
        )
            .into_response(),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "1")],
            Json(serde_json::json!({
                "error": format!("the service is starting ({loading}); retry when GET /readyz is 200"),
            })),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn health_answers_and_readiness_says_what_loads_until_opened() {
        let gate = Arc::new(Gate::default());
        gate.progress.phase("replaying events", 3_000_000);
        gate.progress.advance(1_200_000);
        let call = |path: &str| {
            let req = Request::builder()
                .uri(path)
                .body(axum::body::Body::empty())
                .unwrap();
            gate.router().oneshot(req)
        };
        assert_eq!(call("/healthz").await.unwrap().status(), StatusCode::OK);
        let ready = call("/readyz").await.unwrap();
        assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(ready.into_body(), 1 << 20)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["checks"][0]["detail"], "replaying events 1200000/3000000");
        assert_eq!(
            call("/v1/ping").await.unwrap().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        gate.open(Router::new().route("/v1/ping", axum::routing::get(|| async { "pong" })));
        assert_eq!(call("/v1/ping").await.unwrap().status(), StatusCode::OK);
    }
}
