//! Starting and stopping the service: [`run`] listens first (`/healthz` answers during
//! start-up, [`super::http::starting`]), opens the data folder, says where the API token is, trains the models in the background when the registry has none, starts
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
    http::listen, http::metrics, lock, router, tasks::housekeeping, tasks::retrain,
    tasks::training, AppState, OpenInfo, ServeConfig,
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
    if info.needs_bootstrap || !info.needs_bundled.is_empty() {
        spawn_bootstrap(state.clone(), &info);
    }
    if !info.needs_bootstrap && !state.ready.load(Ordering::SeqCst) {
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

/// Trains the models from the bundled sample in the background and serves them: the
/// job-trace models (`dataset`) when the registry has none, and each kind trained on
/// bundled data (the convergence model on MLPerf runs, the DAG model on TPC-H and
/// WfCommons DAGs) when it has none.
fn spawn_bootstrap(state: AppState, info: &super::OpenInfo) {
    let dataset = state.config.bootstrap_dataset.clone();
    let dataset_models = info.needs_bootstrap;
    let bundled = info.needs_bundled.clone();
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
        for kind in bundled {
            bootstrap_bundled(&state, kind);
        }
    });
}

/// Trains the `kind` model on its bundled data and serves it; logs how long it took, or
/// why it was not trained (kept, so its answers can say why).
fn bootstrap_bundled(state: &AppState, kind: augur_predictor::ModelKind) {
    let what = match super::kinds::spec(kind).map(|k| k.trained_on()) {
        Some(super::kinds::TrainedOn::Bundled { what }) => what,
        _ => "bundled data",
    };
    let started = std::time::Instant::now();
    let result = (|| -> anyhow::Result<_> {
        let r = training::train_bundled(kind, &state.registry, state.config.trees)?;
        let models = training::load_serving(&state.registry, &state.ext.metrics)?;
        state.swap_models(models);
        Ok(r)
    })();
    match result {
        Ok(Ok(meta)) => eprintln!(
            "augur serve: {kind} model v{} trained on {what} in {:.1} s",
            meta.version,
            started.elapsed().as_secs_f64()
        ),
        Ok(Err(why)) => {
            eprintln!("augur serve:   not trained: {kind}: {why}");
            let not_trained = {
                let mut o = state.online_mut();
                o.not_trained.insert(kind, why.to_string());
                o.not_trained.clone()
            };
            if let Err(e) = training::save_not_trained(&state.registry, &not_trained) {
                tracing::error!(error = %format!("{e:#}"), "keeping why {kind} was not trained failed");
            }
        }
        Err(e) => eprintln!("augur serve: training the {kind} model failed: {e:#}"),
    }
}

/// Trains the job-trace models on the bootstrap history (`dataset`: bundled names, trace
/// files and folders, comma-separated) and serves them; a kind the history cannot train is
/// answered 503 with the reason.
pub(super) fn bootstrap_dataset_models(state: &AppState, dataset: &str) {
    {
        let started = std::time::Instant::now();
        let result = (|| -> anyhow::Result<training::TrainReport> {
            // the cluster's own history (Slurm's accounting), when it has enough finished jobs
            let history = state.ext.backend.training_history(state);
            let mut trained = None;
            if let Some((source, jobs)) = history {
                let report =
                    training::train_and_save(&state.registry, &source, &jobs, state.config.trees)?;
                match report
                    .not_trained
                    .get(&augur_predictor::ModelKind::Runtime)
                {
                    // without a runtime model nothing is served: the bundled trace instead
                    Some(why) => eprintln!(
                        "augur serve: the Slurm accounting history did not train the runtime model ({why}); training on the bundled trace"
                    ),
                    None => trained = Some(report),
                }
            }
            let report = match trained {
                Some(report) => report,
                None => {
                    let sources = training::bootstrap_sources(dataset);
                    let format = state.config.bootstrap_format.as_deref();
                    let jobs =
                        training::bootstrap_jobs(&sources, format, state.config.bootstrap_limit)?;
                    training::train_and_save(&state.registry, dataset, &jobs, state.config.trees)?
                }
            };
            let models = training::load_serving(&state.registry, &state.ext.metrics)?;
            state.swap_models(models);
            state.online_mut().not_trained = report.not_trained.clone();
            training::save_not_trained(&state.registry, &report.not_trained)?;
            Ok(report)
        })();
        match result {
            Ok(report) => {
                let versions: Vec<String> = report
                    .trained
                    .iter()
                    .map(|(kind, m)| match m {
                        Some(m) => format!("{kind} v{}", m.version),
                        None => format!("{kind} not trained"),
                    })
                    .collect();
                eprintln!(
                    "augur serve: models trained on {} ({} jobs) in {:.1} s: {}",
                    report.source,
                    report.jobs,
                    started.elapsed().as_secs_f64(),
                    versions.join(", "),
                );
                for why in &report.skipped {
                    tracing::warn!("not trained at first start: {why}");
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
