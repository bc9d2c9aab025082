//! Starting and stopping the service: [`run`] listens first (`/healthz` answers during
//! start-up, [`super::http::starting`]), opens the data folder, says where the API token is, trains the models the registry lacks in the background ([`first_start`]), starts
//! the background tasks (metrics listener, retrain schedule, the cluster and its controller
//! loop), serves HTTP under the connection limits ([`super::http::listen`]), and on SIGTERM or
//! SIGINT finishes the requests in flight (until the shutdown deadline) and closes the store.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use super::backends::{self, ServeBackend};
use super::http::auth::{self, TokenSource};
use super::http::starting::Gate;
use super::{
    http::listen, http::metrics, lock, router, tasks::first_start, tasks::housekeeping,
    tasks::retrain, AppState, OpenInfo, ServeConfig,
};

/// Runs the service until SIGTERM or SIGINT; in-flight requests are finished first.
pub async fn run(config: ServeConfig) -> anyhow::Result<()> {
    // the backend first: a cluster it cannot name (Slurm) stops the start before anything
    // listens or is claimed
    let backend = build_backend(&config).await?;
    let addr = config.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("listening address")?;
    eprintln!(
        "augur serve: listening on http://{local} (data in {}; /readyz is 503 until the store is replayed)",
        config.data_dir.display()
    );
    let limits = listen::ConnectionLimits {
        header_read_timeout: Duration::from_secs_f64(config.header_read_timeout_secs),
        body_deadline: Duration::from_secs_f64(config.request_body_timeout_secs),
        body_limit: u64::try_from(config.body_limit_bytes).unwrap_or(u64::MAX),
        max_connections: listen::fit_to_file_limit(config.max_connections),
        shutdown_deadline: Duration::from_secs_f64(config.shutdown_deadline_secs),
    };
    if limits.max_connections < config.max_connections {
        tracing::warn!(
            max_connections = limits.max_connections,
            "max_connections lowered to fit the open-file limit"
        );
    }
    let deadline = config.shutdown_deadline_secs;
    let gate = Arc::new(Gate::default());
    let opened: Arc<Mutex<Option<OpenedState>>> = Arc::default();
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<anyhow::Error>();
    let opening = {
        let (gate, opened) = (gate.clone(), opened.clone());
        tokio::spawn(async move {
            let progress = gate.progress.clone();
            let result = tokio::task::spawn_blocking(move || {
                AppState::open_with(config, backend, &progress)
            })
            .await
            .context("opening the data folder")
            .and_then(|r| r);
            match result {
                Ok((state, info)) => {
                    let shutdown_tx = start(&state, info);
                    gate.open(router(state.clone()));
                    *lock(&opened) = Some(OpenedState { state, shutdown_tx });
                }
                Err(e) => {
                    let _ = failed_tx.send(e);
                }
            }
        })
    };
    let failure: Arc<Mutex<Option<anyhow::Error>>> = Arc::default();
    let stopped = {
        let (opened, failure) = (opened.clone(), failure.clone());
        listen::serve(listener, gate.router(), limits, async move {
            tokio::select! {
                () = shutdown_signal() => {
                    if let Some(o) = lock(&opened).as_ref() {
                        let _ = o.shutdown_tx.send(true);
                    }
                    eprintln!(
                        "augur serve: shutting down (finishing requests in flight, for up to {deadline} s)"
                    );
                }
                Ok(e) = failed_rx => {
                    *lock(&failure) = Some(e);
                }
            }
        })
        .await
    };
    if let Some(e) = lock(&failure).take() {
        return Err(e);
    }
    if stopped.abandoned > 0 {
        eprintln!(
            "augur serve: {} connections still open at the shutdown deadline were closed",
            stopped.abandoned
        );
    }
    opening.abort();
    let Some(OpenedState { state, .. }) = lock(&opened).take() else {
        eprintln!("augur serve: stopped during start-up");
        return Ok(());
    };
    // the requests have been answered (or abandoned at the deadline, unacknowledged); stop
    // the store's writer after what it has queued
    let store = state.store.clone();
    tokio::task::spawn_blocking(move || super::state::snapshot::write_logged(&state, "stop"))
        .await
        .ok();
    tokio::task::spawn_blocking(move || store.close())
        .await
        .ok();
    eprintln!("augur serve: stopped");
    Ok(())
}

/// The cluster backend the configuration names, built off the async workers (building the
/// Slurm backend runs `scontrol`).
async fn build_backend(config: &ServeConfig) -> anyhow::Result<Arc<dyn ServeBackend>> {
    let config = config.clone();
    let backend = tokio::task::spawn_blocking(move || backends::build(&config))
        .await
        .context("building the cluster backend")??;
    Ok(backend)
}

/// The state once opened, and the sender that tells its background tasks to stop.
struct OpenedState {
    state: AppState,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
}

/// Says where the token is, starts the first-start training and the background tasks;
/// returns the sender that stops them.
fn start(state: &AppState, info: OpenInfo) -> tokio::sync::watch::Sender<bool> {
    match &info.token_source {
        TokenSource::Generated(p) => eprintln!(
            "augur serve: generated an API token for mutating endpoints in {} (owner-only); send it as `Authorization: Bearer $(cat {})`",
            p.display(),
            p.display()
        ),
        TokenSource::File(p) => {
            eprintln!(
                "augur serve: API token for mutating endpoints: {} (send it as `Authorization: Bearer …`)",
                p.display()
            );
            if let Some(mode) = auth::readable_by_others(p) {
                eprintln!(
                    "augur serve: warning: the token file {} is readable by its group or others (mode {mode:o}): `chmod 600 {}`",
                    p.display(),
                    p.display()
                );
                tracing::warn!(path = %p.display(), mode = format!("{mode:o}"), "the token file is readable by its group or others");
            }
        }
        TokenSource::Config => {
            eprintln!("augur serve: API token for mutating endpoints from the configuration")
        }
        TokenSource::Insecure => {
            eprintln!("augur serve: --insecure: mutating endpoints need no token")
        }
    }
    tracing::info!(
        store = %state.store,
        events = info.events_replayed,
        snapshot = info.snapshot.label(),
        "event store opened and replayed"
    );
    let trains_runtime = info
        .needs_history
        .contains(&augur_predictor::ModelKind::Runtime);
    if !info.needs_history.is_empty() || !info.needs_bundled.is_empty() {
        first_start::spawn(
            state.clone(),
            info.needs_history.clone(),
            info.needs_bundled.clone(),
        );
    }
    if !trains_runtime && !state.ready.load(Ordering::SeqCst) {
        tracing::warn!("the registry has no runtime model: predictions answer 503 until one is trained (POST /v1/models/retrain)");
    }
    // background tasks; each stops when `state.shutdown` turns true
    metrics::spawn_listener(state);
    retrain::spawn_schedule(state.clone());
    state.ext.backend.start(state.clone());
    housekeeping::spawn(state.clone());
    super::heap::spawn(state.clone());
    super::state::snapshot::spawn(state.clone());
    info.shutdown_tx
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
