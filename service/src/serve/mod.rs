//! `augur serve`: the prediction and autoscaling service.
//!
//! - [`AppState`] is what every handler sees (cheap to clone: every field is shared).
//! - [`kinds`]: the served kinds behind one trait and the one list of them.
//! - [`backends`]: the clusters behind one trait (none, sim, kubernetes, slurm).
//! - [`state`]: the events, the event store, the ingest pipeline ([`state::ingest`]: validate,
//!   store, apply to the online state, commit, broadcast, reply, and why in that order), the
//!   online state and its snapshots.
//! - [`http`]: the route table ([`http::routes`]), the handlers ([`http::api`]), auth, the
//!   one error type, the accept loop, the status page and `/metrics`; [`http::openapi`]
//!   generates the document of every route.
//! - [`advice`]: the advisor (what to ask for), over the online state and the measured
//!   scaling.
//! - [`tasks`]: first-start training, retraining through the model gate, compaction,
//!   write-back.
//! - [`run()`] opens the data folder (event store, model registry, auth token), loads or
//!   trains the models, serves until SIGTERM/SIGINT and then finishes the requests in flight.
//!
//! State the other parts need goes into [`Extensions`] (built in [`Extensions::new`]); what
//! happens in the service is broadcast as [`ServeEvent`]s on [`AppState::events`] (subscribe
//! with `state.events.subscribe()`); background tasks are started by [`run()`] and stop when
//! [`AppState::shutdown`] turns true.

pub mod advice;
pub mod backends;
pub mod config;
pub mod heap;
pub mod http;
pub mod kinds;
mod run;
pub mod state;
pub mod tasks;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use anyhow::Context;
use augur_predictor::{ModelKind, ModelRegistry};
use tokio::sync::{broadcast, watch};

pub use config::ServeConfig;
pub use http::routes::router;
pub use run::run;

use http::auth::{Auth, TokenSource};
use state::online::{Online, Outcome, ServedModels};
use state::store::EventLog;

/// Something that happened in the service, broadcast to whoever listens (metrics, status
/// page). Sending never blocks; a slow listener misses events (`RecvError::Lagged`).
#[derive(Debug, Clone)]
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
    /// The served models changed (first load, retrain, promote, roll back): the version
    /// served now of every kind served.
    ModelsSwapped { versions: BTreeMap<ModelKind, u32> },
}

/// State owned by the parts of the service around the API: metrics, the status page's
/// recent outcomes, the cluster and its controller loop.
#[derive(Debug)]
pub struct Extensions {
    /// `/metrics`.
    pub metrics: Arc<http::metrics::Metrics>,
    /// Recently finished jobs, predicted vs actual (status page).
    pub recent: http::status::RecentOutcomes,
    /// The cluster backend (built from the configuration, [`backends::build`]).
    pub backend: Arc<dyn backends::ServeBackend>,
    /// The controller loop and its switches.
    pub live: Arc<backends::controller::Live>,
    /// Where prediction batches run (off the async workers, bounded).
    pub predictions: http::api::pool::PredictionPool,
    /// Snapshots of the online state (`<data_dir>/snapshot/`).
    pub snapshots: state::snapshot::Snapshots,
    /// The measured scaling the advisor reads (built once; missing data is logged and
    /// said in every advice).
    pub scaling: advice::Scaling,
}

impl Extensions {
    /// Builds the extensions for a configuration and its backend.
    pub fn new(config: &ServeConfig, backend: Arc<dyn backends::ServeBackend>) -> Extensions {
        Extensions {
            metrics: Arc::new(http::metrics::Metrics::new()),
            recent: http::status::RecentOutcomes::default(),
            backend,
            live: Arc::new(backends::controller::Live::new(
                config.speed,
                config.data_dir.join("operator.json"),
            )),
            predictions: http::api::pool::PredictionPool::new(config.prediction_workers),
            snapshots: state::snapshot::Snapshots::new(&config.data_dir),
            scaling: advice::Scaling::bundled(),
        }
    }
}

impl Extensions {
    /// The health of the cluster backend (none without a cluster).
    pub fn backend_health(&self) -> Option<backends::health::BackendHealth> {
        self.backend.health(&self.live)
    }
}

/// The state of a retrain (`GET /v1/models/retrain`).
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RetrainStatus {
    /// No retrain since the service started.
    #[default]
    Idle,
    Running {
        started_at: String,
        source: String,
        trigger: tasks::retrain::Trigger,
    },
    Succeeded {
        finished_at: String,
        report: Box<tasks::training::TrainReport>,
        trigger: tasks::retrain::Trigger,
    },
    Failed {
        finished_at: String,
        error: String,
        trigger: tasks::retrain::Trigger,
    },
}

/// Everything a handler can reach. All fields are shared (`Arc` or cheap handles).
#[derive(Clone)]
pub struct AppState {
    /// The resolved configuration.
    pub config: Arc<ServeConfig>,
    /// The durable event store.
    pub store: EventLog,
    /// Served models + online feature/queue state + what is known about each job.
    /// Predictions read it under a shared lock (off the async workers, see
    /// [`http::api::predict`]); the store's writer applies events under the exclusive lock, held
    /// briefly (microseconds). Never hold it across an `.await`.
    pub online: Arc<RwLock<Online>>,
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
    pub retrain_stats: Arc<tasks::retrain::RetrainStats>,
    /// The kinds the first-start training has still to serve, and those it failed to.
    pub first_start: Arc<tasks::first_start::FirstStart>,
    /// Held by a model swap: one at a time, and a swap from the registry serves what the
    /// registry holds when it swaps ([`AppState::reload_models`]).
    swapping: Arc<Mutex<()>>,
    /// Turns true when the service is shutting down (background tasks should stop).
    pub shutdown: watch::Receiver<bool>,
    /// State of the parts around the API (see [`Extensions`]).
    pub ext: Arc<Extensions>,
}

/// What [`AppState::open`] found and did.
#[derive(Debug)]
pub struct OpenInfo {
    pub token_source: TokenSource,
    pub events_replayed: usize,
    /// What became of the snapshot of the online state.
    pub snapshot: state::snapshot::LoadOutcome,
    /// The kinds trained on a job history to train at this start (see
    /// [`tasks::first_start`]): all of them when the registry had none.
    pub needs_history: Vec<ModelKind>,
    /// The kinds trained on bundled data the registry has no version of: train them.
    pub needs_bundled: Vec<ModelKind>,
    /// Sends `true` to [`AppState::shutdown`].
    pub shutdown_tx: watch::Sender<bool>,
}

impl AppState {
    /// Opens the data folder: auth token, registry (loading the served models), event store
    /// (replaying every stored event into the online state).
    /// The cluster backend is built from the configuration ([`backends::build`]).
    pub fn open(config: ServeConfig) -> anyhow::Result<(AppState, OpenInfo)> {
        let backend = backends::build(&config)?;
        AppState::open_with(config, backend, &http::starting::Progress::default())
    }

    /// [`AppState::open`] with its `backend` built, telling `progress` what it is doing
    /// (`/readyz` during start-up).
    pub fn open_with(
        config: ServeConfig,
        backend: Arc<dyn backends::ServeBackend>,
        progress: &http::starting::Progress,
    ) -> anyhow::Result<(AppState, OpenInfo)> {
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!(
                "cannot create the data folder {}",
                config.data_dir.display()
            )
        })?;
        let cluster = backend.cluster();
        state::identity::DataIdentity::new(config.backend.name(), &cluster)
            .claim(&config.data_dir)?;
        let (auth, token_source) =
            Auth::resolve(config.token.as_deref(), config.insecure, &config.data_dir)?;
        let registry = tasks::training::open_registry(&config.data_dir)?;
        let needs_history = tasks::first_start::needs_history(&registry)?;
        let needs_bundled = tasks::training::needs_bundled(&registry)?;
        let ext = Arc::new(Extensions::new(&config, backend));
        let models = tasks::training::load_serving(&registry, &ext.metrics)?;
        let ready = models.get(ModelKind::Runtime).is_some();
        let live = config.backend.is_live();
        let mut online = Online::new(models)
            .with_wall_clock(live)
            .with_retention(config.retention_secs());
        online.not_trained = tasks::training::load_not_trained(&registry);
        let online = Arc::new(RwLock::new(online));
        let (events_tx, _) = broadcast::channel(4096);
        let pipeline = state::ingest::Pipeline::new(online.clone(), events_tx.clone());
        let owner = state::store::event_log::Owner {
            backend: config.backend.name(),
            cluster: &cluster,
        };
        let store_path = config.data_dir.join("events.sqlite");
        progress.phase("opening and checking the event store", 0);
        let store = EventLog::open_unread(
            config.store.as_deref(),
            &store_path,
            owner,
            Box::new(pipeline),
        )?;
        state::snapshot::check_log_reaches(&ext.snapshots, &store)?;
        let (snapshot, replayed) = {
            let mut o = write(&online);
            progress.phase("loading the snapshot of the online state", 0);
            let setting = state::snapshot::Setting {
                backend: config.backend.name().to_string(),
                cluster: cluster.clone(),
                retention_secs: config.retention_secs(),
            };
            let loaded =
                state::snapshot::load(&ext.snapshots, setting, &store, &mut o, &ext.metrics);
            (
                loaded,
                replay(&store, &mut o, i64::MAX, i64::MAX, progress)?,
            )
        };
        // from here on, what other replicas append is applied after what was read above
        store.follow()?;
        let finished_at_open = read(&online).counts.job_finished;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let state = AppState {
            config: Arc::new(config),
            store,
            online,
            registry: Arc::new(registry),
            auth: Arc::new(auth),
            ready: Arc::new(AtomicBool::new(ready)),
            events: events_tx,
            retrain: Arc::new(Mutex::new(RetrainStatus::Idle)),
            retrain_stats: Arc::new(tasks::retrain::RetrainStats::new(finished_at_open)),
            first_start: Arc::default(),
            swapping: Arc::default(),
            shutdown: shutdown_rx,
            ext,
        };
        Ok((
            state,
            OpenInfo {
                token_source,
                events_replayed: replayed,
                snapshot,
                needs_history,
                needs_bundled,
                shutdown_tx,
            },
        ))
    }

    /// Reads the online state (a shared lock; recovering from a poisoned lock: the state is
    /// only written by code that does not panic on input).
    pub fn online(&self) -> RwLockReadGuard<'_, Online> {
        read(&self.online)
    }

    /// Writes the online state (the exclusive lock: hold it briefly).
    pub(crate) fn online_mut(&self) -> RwLockWriteGuard<'_, Online> {
        write(&self.online)
    }

    /// Serves `models` from now on: rebuilds the online state for them by replaying the
    /// event store (off the lock; each model's state from the first event of the history
    /// it was trained on, [`augur_predictor::ArtifactMeta::history_from_seq`], the job
    /// table from the start, the answers at submit taken from the old state), then swaps
    /// it in, catching up under the lock with events committed meanwhile, and for a group
    /// the writer applied but has not committed yet (the writer then skips what the new
    /// state already has). Requests are served throughout; none is dropped. Blocking (call
    /// from a blocking context). One swap at a time.
    pub fn swap_models(&self, models: ServedModels) {
        let _one = lock(&self.swapping);
        self.swap_in(models);
    }

    /// Serves the versions the registry says to serve ([`tasks::training::load_serving`]),
    /// read and swapped in under the swap lock, so two writers never swap at once and the
    /// last swap serves what the registry holds then; no swap when those are the versions
    /// served already. Whether it swapped. Blocking.
    pub fn reload_models(&self) -> Result<bool, tasks::training::LoadError> {
        let _one = lock(&self.swapping);
        let models = tasks::training::load_serving(&self.registry, &self.ext.metrics)?;
        {
            let o = self.online();
            if models.versions() == o.models.versions() && models.unloadable == o.models.unloadable
            {
                return Ok(false);
            }
        }
        self.swap_in(models);
        Ok(true)
    }

    /// [`AppState::swap_models`], the swap lock held by the caller.
    fn swap_in(&self, models: ServedModels) {
        let versions = models.versions();
        let upto = self.online().last_seq;
        let mut fresh = Online::new(models)
            .with_wall_clock(self.config.backend.is_live())
            .with_retention(self.config.retention_secs());
        // what was answered at the submits the old state has seen is taken from it below
        fresh.skip_answers_upto(upto);
        if let Err(e) = self.replay_store(&mut fresh, upto, upto) {
            tracing::error!(error = %e, "replaying the event store for the new models failed");
        }
        {
            let mut o = self.online_mut();
            // The writer applies a group to the online state before committing it (its
            // answers at submit commit with it) and commits without this lock, so events the
            // old state holds may not be readable yet: wait for them rather than drop them.
            let deadline = std::time::Instant::now() + IN_FLIGHT_COMMIT_WAIT;
            loop {
                if let Err(e) = self.replay_store(&mut fresh, i64::MAX, o.last_seq) {
                    tracing::error!(error = %e, "catching up with the event store failed");
                    break;
                }
                if fresh.last_seq >= o.last_seq || std::time::Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if fresh.last_seq < o.last_seq {
                tracing::error!(
                    applied = o.last_seq,
                    committed = fresh.last_seq,
                    "events the service applied were not committed to the event store in time; the new models' state lacks them until a restart rebuilds it from the log"
                );
            }
            fresh.keep_answers_of(&o);
            *o = fresh;
        }
        self.ready
            .store(versions.contains_key(&ModelKind::Runtime), Ordering::SeqCst);
        tracing::info!(?versions, "serving models swapped");
        let _ = self.events.send(ServeEvent::ModelsSwapped { versions });
        // the snapshot on disk was built with the models served before
        state::snapshot::write_logged(self, "model swap");
    }
}

/// How long a model swap waits for a group the writer applied but has not committed yet.
const IN_FLIGHT_COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl AppState {
    /// Applies the stored events after `online.last_seq`, up to `upto`, to `online`.
    fn replay_store(
        &self,
        online: &mut Online,
        upto: i64,
        keep_issued_after: i64,
    ) -> Result<(), state::store::StoreError> {
        let progress = http::starting::Progress::default();
        replay(&self.store, online, upto, keep_issued_after, &progress).map(|_| ())
    }
}

/// Applies the stored events after `online.last_seq`, up to `upto`, page by page (archive,
/// then database), each submit with the answers recorded for it; returns how many. Answers
/// issued for submits stored without a record are dropped when their seq is at or below
/// `keep_issued_after` (a model swap keeps what the old state answered; at start-up they
/// come from the models served now, not what was said then), so a long replay holds one
/// page of them at most.
fn replay(
    store: &EventLog,
    online: &mut Online,
    upto: i64,
    keep_issued_after: i64,
    progress: &http::starting::Progress,
) -> Result<usize, state::store::StoreError> {
    let total = store
        .last_seq_hint()
        .min(upto)
        .saturating_sub(online.last_seq);
    progress.phase("replaying events", u64::try_from(total).unwrap_or(0));
    let mut applied = 0;
    loop {
        let page = store.read_after(online.last_seq, 10_000)?;
        let (Some(a), Some(b)) = (page.first(), page.last()) else {
            break;
        };
        let from = a.seq.max(online.answers_wanted_from());
        if from <= b.seq {
            online.use_records(&store.read_predictions_between(from, b.seq)?);
        }
        let mut done = false;
        for e in &page {
            if e.seq > upto {
                done = true;
                break;
            }
            online.apply(e);
            applied += 1;
        }
        online.drop_issued_upto(keep_issued_after);
        progress.advance(page.len() as u64);
        if done {
            break;
        }
    }
    Ok(applied)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}
