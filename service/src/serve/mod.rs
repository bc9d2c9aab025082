//! `augur serve`: the prediction and autoscaling service.
//!
//! - [`AppState`] is what every handler sees (cheap to clone: every field is shared).
//! - [`router`] builds the HTTP API ([`api`] handlers; the route table is [`own_routes`],
//!   documented in [`openapi`]).
//! - [`run`] opens the data folder (event [`store`], model registry, auth token), loads or
//!   trains the models, serves until SIGTERM/SIGINT and then finishes the requests in flight.
//!
//! How the other parts of the service plug in (serve-live: `metrics.rs`, `live.rs`,
//! `status.rs`): each file exposes `pub fn routes() -> Router<AppState>` which [`router`]
//! merges (see the marked spot there); state they need goes into [`Extensions`] (built in
//! [`Extensions::new`]); what happens in the service is broadcast as [`ServeEvent`]s on
//! [`AppState::events`] (subscribe with `state.events.subscribe()`); background tasks are
//! started at the marked spot in [`run`] and stop when [`AppState::shutdown`] turns true.

pub mod api;
pub mod auth;
pub mod config;
pub mod error;
pub mod events;
pub mod identity;
pub mod online;
pub mod openapi;
pub mod retrain;
pub mod store;
pub mod training;
// serve-live
pub mod live;
pub mod metrics;
pub mod status;
// `--backend kubernetes` (the simulated replay otherwise)
pub mod kube;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use augur_predictor::ModelRegistry;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use tokio::sync::{broadcast, watch};

pub use config::ServeConfig;

use auth::{Auth, TokenSource};
use online::{Online, Outcome, ServedModels};
use store::Store;

/// Something that happened in the service, broadcast to whoever listens (metrics, status
/// page). Sending never blocks; a slow listener misses events (`RecvError::Lagged`).
#[derive(Debug, Clone)]
#[allow(dead_code)] // read by the listeners that plug in (metrics, status page)
pub enum ServeEvent {
    /// Events were stored durably and applied to the online state (`kinds` in seq order).
    Ingested {
        first_seq: i64,
        kinds: Vec<&'static str>,
    },
    /// A job finished; what was predicted for it at submit and what happened.
    JobFinished(Arc<Outcome>),
    /// Predictions were served.
    Predicted {
        kind: &'static str,
        model_version: u32,
        count: usize,
        seconds: f64,
    },
    /// The served models changed (first load, retrain, promote, roll back).
    ModelsSwapped {
        runtime: Option<u32>,
        queue_wait: Option<u32>,
        failure: Option<u32>,
    },
}

/// State owned by the parts of the service that plug into this module (serve-live adds its
/// fields here and builds them in [`Extensions::new`]).
#[derive(Debug)]
pub struct Extensions {
    /// `/metrics` (serve-live).
    pub metrics: Arc<metrics::Metrics>,
    /// Recently finished jobs, predicted vs actual (status page).
    pub recent: status::RecentOutcomes,
    /// The simulated cluster and the controller loop (serve-live).
    pub live: Arc<live::Live>,
}

impl Extensions {
    /// Builds the extensions for a configuration.
    pub fn new(config: &ServeConfig) -> Extensions {
        Extensions {
            metrics: Arc::new(metrics::Metrics::new()),
            recent: status::RecentOutcomes::default(),
            live: Arc::new(live::Live::new(config.speed)),
        }
    }
}

/// The state of a retrain (`GET /v1/models/retrain`).
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RetrainStatus {
    /// No retrain since the service started.
    #[default]
    Idle,
    Running {
        started_at: String,
        source: String,
        trigger: retrain::Trigger,
    },
    Succeeded {
        finished_at: String,
        report: Box<training::TrainReport>,
        trigger: retrain::Trigger,
    },
    Failed {
        finished_at: String,
        error: String,
        trigger: retrain::Trigger,
    },
}

/// Everything a handler can reach. All fields are shared (`Arc` or cheap handles).
#[derive(Clone)]
pub struct AppState {
    /// The resolved configuration.
    pub config: Arc<ServeConfig>,
    /// The durable event store.
    pub store: Store,
    /// Served models + online feature/queue state + what is known about each job. Lock it
    /// briefly (microseconds); never across an `.await` or a blocking call.
    pub online: Arc<Mutex<Online>>,
    /// The model registry (`<data_dir>/models`).
    pub registry: Arc<ModelRegistry>,
    /// Authentication of mutating endpoints.
    pub auth: Arc<Auth>,
    /// True once the runtime model is loaded (`/readyz`).
    pub ready: Arc<AtomicBool>,
    /// Broadcast of [`ServeEvent`]s.
    pub events: broadcast::Sender<ServeEvent>,
    /// The state of the background retrain.
    pub retrain: Arc<Mutex<RetrainStatus>>,
    /// Counters of the retrains (manual and scheduled) and the schedule's baseline.
    pub retrain_stats: Arc<retrain::RetrainStats>,
    /// Turns true when the service is shutting down (background tasks should stop).
    #[allow(dead_code)] // for background tasks that plug in
    pub shutdown: watch::Receiver<bool>,
    /// State of the parts that plug in (see [`Extensions`]).
    #[allow(dead_code)] // for the parts that plug in
    pub ext: Arc<Extensions>,
}

/// What [`AppState::open`] found and did.
#[derive(Debug)]
pub struct OpenInfo {
    pub token_source: TokenSource,
    pub events_replayed: usize,
    /// The registry had no model: they must be trained (see [`run`]).
    pub needs_bootstrap: bool,
    /// The registry has no convergence model: train it on the bundled MLPerf runs.
    pub needs_convergence: bool,
    /// Sends `true` to [`AppState::shutdown`].
    pub shutdown_tx: watch::Sender<bool>,
}

impl AppState {
    /// Opens the data folder: auth token, registry (loading the served models), event store
    /// (replaying every stored event into the online state).
    pub fn open(config: ServeConfig) -> anyhow::Result<(AppState, OpenInfo)> {
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!(
                "cannot create the data folder {}",
                config.data_dir.display()
            )
        })?;
        let (auth, token_source) =
            Auth::resolve(config.token.as_deref(), config.insecure, &config.data_dir)?;
        let registry = training::open_registry(&config.data_dir)?;
        let needs_bootstrap = training::registry_is_empty(&registry)?;
        let needs_convergence = training::needs_convergence(&registry)?;
        let models = training::load_serving(&registry)?;
        let ready = models.runtime.is_some();
        let online = Arc::new(Mutex::new(Online::new(models)));
        let (events_tx, _) = broadcast::channel(4096);
        let on_commit = {
            let online = online.clone();
            let tx = events_tx.clone();
            Box::new(move |stored: &[store::StoredEvent]| {
                let mut outcomes = Vec::new();
                {
                    let mut o = lock(&online);
                    for e in stored {
                        if let Some(out) = o.apply(e) {
                            outcomes.push(out);
                        }
                    }
                }
                if tx.receiver_count() > 0 {
                    if let Some(first) = stored.first() {
                        let _ = tx.send(ServeEvent::Ingested {
                            first_seq: first.seq,
                            kinds: stored.iter().map(|e| e.event.kind()).collect(),
                        });
                    }
                    for out in outcomes {
                        let _ = tx.send(ServeEvent::JobFinished(Arc::new(out)));
                    }
                }
            })
        };
        let store_path = config.data_dir.join("events.sqlite");
        let (store, existing) = Store::open(&store_path, on_commit)?;
        {
            let mut o = lock(&online);
            for e in &existing {
                o.apply(e);
            }
        }
        let finished_at_open = lock(&online).counts.job_finished;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let ext = Arc::new(Extensions::new(&config));
        let state = AppState {
            config: Arc::new(config),
            store,
            online,
            registry: Arc::new(registry),
            auth: Arc::new(auth),
            ready: Arc::new(AtomicBool::new(ready)),
            events: events_tx,
            retrain: Arc::new(Mutex::new(RetrainStatus::Idle)),
            retrain_stats: Arc::new(retrain::RetrainStats::new(finished_at_open)),
            shutdown: shutdown_rx,
            ext,
        };
        Ok((
            state,
            OpenInfo {
                token_source,
                events_replayed: existing.len(),
                needs_bootstrap,
                needs_convergence,
                shutdown_tx,
            },
        ))
    }

    /// Locks the online state (recovering from a poisoned lock: the state is only written
    /// by code that does not panic on input).
    pub fn online(&self) -> MutexGuard<'_, Online> {
        lock(&self.online)
    }

    /// Serves `models` from now on: rebuilds the online state for them by replaying the
    /// event store (off the lock), then swaps it in, catching up under the lock with events
    /// committed meanwhile (the writer then skips what the new state already has). Requests
    /// are served throughout; none is dropped. Blocking (call from a blocking context).
    pub fn swap_models(&self, models: ServedModels) {
        let runtime = models.runtime.as_ref().map(|s| s.meta.version);
        let queue_wait = models.queue_wait.as_ref().map(|s| s.meta.version);
        let failure = models.failure.as_ref().map(|s| s.meta.version);
        let upto = self.online().last_seq;
        let mut fresh = Online::new(models);
        if let Err(e) = self.replay_store(&mut fresh, upto) {
            tracing::error!(error = %e, "replaying the event store for the new models failed");
        }
        {
            let mut o = self.online();
            if let Err(e) = self.replay_store(&mut fresh, i64::MAX) {
                tracing::error!(error = %e, "catching up with the event store failed");
            }
            *o = fresh;
        }
        self.ready.store(runtime.is_some(), Ordering::SeqCst);
        let _ = self.events.send(ServeEvent::ModelsSwapped {
            runtime,
            queue_wait,
            failure,
        });
        tracing::info!(?runtime, ?queue_wait, ?failure, "serving models swapped");
    }
}

impl AppState {
    /// Applies the stored events after `online.last_seq`, up to `upto`, to `online`.
    fn replay_store(&self, online: &mut Online, upto: i64) -> Result<(), store::StoreError> {
        loop {
            let page = self.store.read_after(online.last_seq, 10_000)?;
            if page.is_empty() {
                return Ok(());
            }
            for e in &page {
                if e.seq > upto {
                    return Ok(());
                }
                online.apply(e);
            }
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One route of the API: method, path, whether it needs the bearer token, handler.
pub struct RouteSpec {
    #[cfg_attr(not(test), allow(dead_code))] // checked against the OpenAPI document
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

/// The routes this module serves (the OpenAPI test checks each is documented).
pub fn own_routes() -> Vec<RouteSpec> {
    vec![
        spec("GET", "/healthz", false, get(api::healthz)),
        spec("GET", "/readyz", false, get(api::readyz)),
        spec("GET", "/openapi.json", false, get(openapi::serve)),
        spec("POST", "/v1/events", true, post(api::ingest_one)),
        spec("GET", "/v1/events", false, get(api::list_events)),
        spec("POST", "/v1/events/batch", true, post(api::ingest_batch)),
        spec("GET", "/v1/jobs/{id}", false, get(api::job)),
        spec(
            "POST",
            "/v1/predict/runtime",
            false,
            post(api::predict_runtime),
        ),
        spec(
            "POST",
            "/v1/predict/queue-wait",
            false,
            post(api::predict_queue_wait),
        ),
        spec(
            "POST",
            "/v1/predict/failure",
            false,
            post(api::predict_failure),
        ),
        spec(
            "POST",
            "/v1/predict/convergence",
            false,
            post(api::predict_convergence),
        ),
        spec(
            "POST",
            "/v1/predict/dag-makespan",
            false,
            post(api::predict_dag),
        ),
        spec("GET", "/v1/models", false, get(api::list_models)),
        spec("GET", "/v1/models/retrain", false, get(api::retrain_status)),
        spec("POST", "/v1/models/retrain", true, post(api::retrain)),
        spec(
            "POST",
            "/v1/models/{kind}/promote",
            true,
            post(api::promote),
        ),
        spec(
            "POST",
            "/v1/models/{kind}/rollback",
            true,
            post(api::rollback),
        ),
    ]
}

/// The HTTP API over `state`.
pub fn router(state: AppState) -> Router {
    let auth_layer = axum::middleware::from_fn_with_state(state.clone(), auth::require_token);
    let mut app: Router<AppState> = Router::new();
    for r in own_routes() {
        let handler = if r.auth {
            r.handler.route_layer(auth_layer.clone())
        } else {
            r.handler
        };
        app = app.route(r.path, handler);
    }
    // ── serve-live plugs in here ──────────────────────────────────────────────────────
    app = app
        .merge(metrics::routes())
        .merge(live::routes())
        .merge(live::mutating_routes().route_layer(auth_layer.clone()))
        .merge(status::routes());
    // every route's latency by route, method and status
    app = metrics::instrument(app, &state.ext.metrics);
    // ─────────────────────────────────────────────────────────────────────────────────
    app.fallback(api::no_such_route)
        .layer(DefaultBodyLimit::max(state.config.body_limit_bytes))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(
                    tower_http::trace::DefaultMakeSpan::new().level(tracing::Level::INFO),
                )
                .on_response(
                    tower_http::trace::DefaultOnResponse::new().level(tracing::Level::INFO),
                )
                // 5xx answers are expected (503 while not ready or a model is missing) and
                // real failures are logged as errors where they happen (e.g. the store)
                .on_failure(tower_http::trace::DefaultOnFailure::new().level(tracing::Level::INFO)),
        )
        .with_state(state)
}

/// Runs the service until SIGTERM or SIGINT; in-flight requests are finished first.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    let addr = config.addr;
    let (state, info) = tokio::task::spawn_blocking(move || AppState::open(config))
        .await
        .context("opening the data folder")??;
    match &info.token_source {
        TokenSource::Generated(p) => eprintln!(
            "augur serve: generated an API token for mutating endpoints in {} (owner-only); send it as `Authorization: Bearer $(cat {})`",
            p.display(),
            p.display()
        ),
        TokenSource::File(p) => eprintln!(
            "augur serve: API token for mutating endpoints: {} (send it as `Authorization: Bearer …`)",
            p.display()
        ),
        TokenSource::Config => {
            eprintln!("augur serve: API token for mutating endpoints from the configuration")
        }
        TokenSource::Insecure => {
            eprintln!("augur serve: --insecure: mutating endpoints need no token")
        }
    }
    tracing::info!(
        store = %state.store.path().display(),
        events = info.events_replayed,
        "event store opened and replayed"
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("listening address")?;
    eprintln!(
        "augur serve: listening on http://{local} (data in {})",
        state.config.data_dir.display()
    );
    if info.needs_bootstrap || info.needs_convergence {
        spawn_bootstrap(state.clone(), info.needs_bootstrap, info.needs_convergence);
    }
    if !info.needs_bootstrap && !state.ready.load(Ordering::SeqCst) {
        tracing::warn!("the registry has no runtime model: predictions answer 503 until one is trained (POST /v1/models/retrain)");
    }
    // ── serve-live starts its background tasks here (simulator, controller loop), e.g.
    // `live::spawn(state.clone());` — they should stop when `state.shutdown` turns true.
    metrics::spawn_listener(&state);
    retrain::spawn_schedule(state.clone());
    kube::spawn_cluster(state.clone());
    let shutdown_tx = info.shutdown_tx;
    let app = router(state.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            let _ = shutdown_tx.send(true);
            eprintln!("augur serve: shutting down (finishing requests in flight)");
        })
        .await
        .context("serving HTTP")?;
    // every request has been answered; stop the store's writer after what it has queued
    let store = state.store.clone();
    drop(state);
    tokio::task::spawn_blocking(move || store.close())
        .await
        .ok();
    eprintln!("augur serve: stopped");
    Ok(())
}

/// Trains the models from the bundled sample in the background and serves them: the
/// job-trace models (`dataset`) when the registry has none, the convergence model (bundled
/// MLPerf runs) when it has none.
fn spawn_bootstrap(state: AppState, dataset_models: bool, convergence: bool) {
    let dataset = state.config.bootstrap_dataset.clone();
    if dataset_models {
        eprintln!(
            "augur serve: no model in the registry; training on the bundled {dataset} trace in the background (/readyz answers 503 until done)"
        );
    }
    // the background retrain schedule waits until this is done
    state.retrain_stats.set_bootstrapping(dataset_models);
    tokio::task::spawn_blocking(move || {
        if dataset_models {
            bootstrap_dataset_models(&state, &dataset);
            state.retrain_stats.set_bootstrapping(false);
        }
        if convergence {
            let started = std::time::Instant::now();
            let result =
                training::train_convergence(&state.registry, state.config.trees).and_then(|r| {
                    let models = training::load_serving(&state.registry)?;
                    state.swap_models(models);
                    Ok(r)
                });
            match result {
                Ok(Ok(meta)) => eprintln!(
                    "augur serve: convergence model v{} trained on the bundled MLPerf runs in {:.1} s",
                    meta.version,
                    started.elapsed().as_secs_f64()
                ),
                Ok(Err(why)) => eprintln!("augur serve:   not trained: convergence: {why}"),
                Err(e) => eprintln!("augur serve: training the convergence model failed: {e:#}"),
            }
        }
    });
}

/// Trains the job-trace models on the bundled `dataset` and serves them.
fn bootstrap_dataset_models(state: &AppState, dataset: &str) {
    {
        let started = std::time::Instant::now();
        let result = (|| -> anyhow::Result<training::TrainReport> {
            let jobs = training::bundled_jobs(dataset, state.config.bootstrap_limit)?;
            let report =
                training::train_and_save(&state.registry, dataset, &jobs, state.config.trees)?;
            let models = training::load_serving(&state.registry)?;
            state.swap_models(models);
            Ok(report)
        })();
        match result {
            Ok(report) => {
                let version = |m: &Option<augur_predictor::ArtifactMeta>| {
                    m.as_ref()
                        .map_or("not trained".to_string(), |m| format!("v{}", m.version))
                };
                eprintln!(
                    "augur serve: models trained on {} ({} jobs) in {:.1} s: runtime {}, queue_wait {}, failure {}",
                    report.source,
                    report.jobs,
                    started.elapsed().as_secs_f64(),
                    version(&report.runtime),
                    version(&report.queue_wait),
                    version(&report.failure),
                );
                for why in &report.skipped {
                    eprintln!("augur serve:   not trained: {why}");
                }
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "training the models at first start failed");
                eprintln!("augur serve: training the models failed: {e:#}");
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
