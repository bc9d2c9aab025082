//! The route table of the service (method, path, whether it needs the bearer token, handler)
//! and the [`router`] built from it with the service's layers: the token check
//! ([`super::access`]), request metrics, the body limit and timeout, and request tracing.
//! Every route in the table is in the generated OpenAPI document ([`super::openapi`], which
//! does not read this file: the arrow points one way); a test checks both ways.

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use crate::serve::{
    backends, http::access, http::api, http::auth, http::metrics, http::openapi, http::status,
    AppState,
};

/// One route: method, path, whether it needs the bearer token, handler.
pub struct RouteSpec {
    pub method: &'static str,
    pub path: &'static str,
    pub auth: bool,
    pub handler: MethodRouter<AppState>,
}

fn spec(
    method: &'static str,
    path: &'static str,
    auth: bool,
    handler: MethodRouter<AppState>,
) -> RouteSpec {
    RouteSpec {
        method,
        path,
        auth,
        handler,
    }
}

/// Every route the service serves.
pub fn all() -> Vec<RouteSpec> {
    let mut routes = api_routes();
    routes.extend(live_routes());
    routes.extend(page_routes());
    routes
}

/// The API: ingest, jobs, predictions, models, and the service's own health and document.
fn api_routes() -> Vec<RouteSpec> {
    use api::{advise, dag, ingest, jobs, models, predict};
    vec![
        spec("GET", "/healthz", false, get(api::healthz)),
        spec("GET", "/readyz", false, get(api::readyz)),
        spec("GET", "/openapi.json", false, get(openapi::serve)),
        spec("POST", "/v1/events", true, post(ingest::ingest_one)),
        spec("GET", "/v1/events", false, get(ingest::list_events)),
        spec("POST", "/v1/events/batch", true, post(ingest::ingest_batch)),
        spec("GET", "/v1/jobs/{id}", false, get(jobs::job)),
        spec("GET", "/v1/eta", false, get(api::eta::eta)),
        spec(
            "POST",
            "/v1/predict/runtime",
            false,
            post(predict::predict_runtime),
        ),
        spec(
            "POST",
            "/v1/predict/queue-wait",
            false,
            post(predict::predict_queue_wait),
        ),
        spec(
            "POST",
            "/v1/predict/failure",
            false,
            post(predict::predict_failure),
        ),
        spec(
            "POST",
            "/v1/predict/convergence",
            false,
            post(predict::predict_convergence),
        ),
        spec(
            "POST",
            "/v1/predict/dag-makespan",
            false,
            post(dag::predict_dag),
        ),
        spec("POST", "/v1/advise", false, post(advise::advise)),
        spec("GET", "/v1/models", false, get(models::list_models)),
        spec(
            "GET",
            "/v1/models/retrain",
            false,
            get(models::retrain_status),
        ),
        spec("POST", "/v1/models/retrain", true, post(models::retrain)),
        spec(
            "POST",
            "/v1/models/{kind}/promote",
            true,
            post(models::promote),
        ),
        spec(
            "POST",
            "/v1/models/{kind}/rollback",
            true,
            post(models::rollback),
        ),
    ]
}

/// The cluster the controller acts on, and the controller's switches ([`backends::endpoints`]).
fn live_routes() -> Vec<RouteSpec> {
    vec![
        spec(
            "GET",
            "/v1/cluster",
            false,
            get(backends::endpoints::cluster),
        ),
        spec(
            "GET",
            "/v1/cluster/history",
            false,
            get(backends::endpoints::history),
        ),
        spec(
            "GET",
            "/v1/autoscaler/decisions",
            false,
            get(backends::endpoints::decisions),
        ),
        spec(
            "POST",
            "/v1/autoscaler/dry-run",
            true,
            post(backends::endpoints::dry_run),
        ),
        spec(
            "POST",
            "/v1/autoscaler/pause",
            true,
            post(backends::endpoints::pause),
        ),
        spec(
            "POST",
            "/v1/autoscaler/resume",
            true,
            post(backends::endpoints::resume),
        ),
    ]
}

/// The status page and its assets, recent outcomes, `/metrics` and the benchmark's ping.
fn page_routes() -> Vec<RouteSpec> {
    vec![
        spec("GET", "/", false, get(status::index)),
        spec(
            "GET",
            "/status/uPlot.iife.min.js",
            false,
            get(status::uplot_js),
        ),
        spec(
            "GET",
            "/status/uPlot.min.css",
            false,
            get(status::uplot_css),
        ),
        spec(
            "GET",
            "/status/uPlot.LICENSE",
            false,
            get(status::uplot_license),
        ),
        spec("GET", "/v1/predictions/recent", false, get(status::recent)),
        spec("GET", "/v1/ping", false, get(status::ping)),
        spec("GET", "/metrics", false, get(metrics::scrape)),
    ]
}

/// The HTTP service over `state`.
pub fn router(state: AppState) -> Router {
    let auth_layer = axum::middleware::from_fn_with_state(state.clone(), auth::require_token);
    let mut app: Router<AppState> = Router::new();
    for r in all() {
        let handler = if access::needs_token(r.method, r.path, r.auth, state.config.auth_reads) {
            r.handler.route_layer(auth_layer.clone())
        } else {
            r.handler
        };
        app = app.route(r.path, handler);
    }
    // every route's latency by route, method and status
    app = metrics::instrument(app, &state.ext.metrics);
    app.fallback(api::no_such_route)
        .layer(DefaultBodyLimit::max(state.config.body_limit_bytes))
        // a body that stalls between reads fails the request instead of holding it open
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            std::time::Duration::from_secs_f64(state.config.request_body_timeout_secs),
        ))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                // the path and a query with any credential redacted, never the raw URI
                .make_span_with(|req: &axum::http::Request<_>| {
                    tracing::info_span!(
                        "request",
                        method = %req.method(),
                        uri = %auth::redacted_uri(req.uri()),
                        version = ?req.version(),
                    )
                })
                .on_response(
                    tower_http::trace::DefaultOnResponse::new().level(tracing::Level::INFO),
                )
                // 5xx answers are expected (503 while not ready or a model is missing) and
                // real failures are logged as errors where they happen (e.g. the store)
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::INFO)),
        )
        .with_state(state)
}
