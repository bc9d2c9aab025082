//! Configuration of `augur serve`: built-in defaults, then a TOML file, then `AUGUR_SERVE_*`
//! environment variables, then command-line flags (each later source overrides the earlier).
//!
//! Environment variables use the `AUGUR_SERVE_` prefix because `AUGUR_DATA_DIR` already
//! names the folder of the bundled traces (`augur_datasets::bundled`).
//!
//! | key (file) | env | flag | default |
//! |---|---|---|---|
//! | `addr` | `AUGUR_SERVE_ADDR` | `--addr` | `127.0.0.1:8080` |
//! | `data_dir` | `AUGUR_SERVE_DATA_DIR` | `--data-dir` | `./augur-data` |
//! | `store` | `AUGUR_SERVE_STORE` | `--store` | `<data_dir>/events.sqlite` (or `postgres://…`) |
//! | `token` | `AUGUR_SERVE_TOKEN` | — | generated on first start |
//! | `insecure` | `AUGUR_SERVE_INSECURE` | `--insecure` | `false` |
//! | `bootstrap_dataset` | `AUGUR_SERVE_BOOTSTRAP` | `--bootstrap` | `philly` |
//! | `bootstrap_format` | `AUGUR_SERVE_BOOTSTRAP_FORMAT` | `--bootstrap-format` | detected |
//! | `bootstrap_limit` | `AUGUR_SERVE_BOOTSTRAP_LIMIT` | `--bootstrap-limit` | all jobs |
//! | `trees` | `AUGUR_SERVE_TREES` | `--trees` | 1000 (the trainer's default) |
//! | `speed` | `AUGUR_SERVE_SPEED` | `--speed` | 60 |
//! | `body_limit_bytes` | `AUGUR_SERVE_BODY_LIMIT` | — | 4 MiB |
//! | `max_batch` | `AUGUR_SERVE_MAX_BATCH` | — | 10000 |
//! | `min_retrain_jobs` | `AUGUR_SERVE_MIN_RETRAIN_JOBS` | — | 200 |
//! | `min_test_jobs` | `AUGUR_SERVE_MIN_TEST_JOBS` | — | 50 |
//! | `retrain_every_jobs` | `AUGUR_SERVE_RETRAIN_EVERY_JOBS` | `--retrain-every-jobs` | 2000 (0 = off) |
//! | `max_future_skew_seconds` | `AUGUR_SERVE_MAX_FUTURE_SKEW` | — | 300 |
//! | `backend` | `AUGUR_SERVE_BACKEND` | `--backend` | `sim` |
//! | `prediction_workers` | `AUGUR_SERVE_PREDICTION_WORKERS` | — | cores − 1 (at least 1) |
//! | `max_prediction_points` | `AUGUR_SERVE_MAX_PREDICTION_POINTS` | — | 1000000 |
//! | `header_read_timeout_secs` | `AUGUR_SERVE_HEADER_READ_TIMEOUT` | — | 10 (also the idle keep-alive timeout) |
//! | `request_body_timeout_secs` | `AUGUR_SERVE_REQUEST_BODY_TIMEOUT` | — | 30 |
//! | `max_connections` | `AUGUR_SERVE_MAX_CONNECTIONS` | — | 1024 (capped by the open-file limit) |
//! | `shutdown_deadline_secs` | `AUGUR_SERVE_SHUTDOWN_DEADLINE` | — | 10 |
//! | `auth_reads` | `AUGUR_SERVE_AUTH_READS` | — | `false` |
//! | `slurm_poll_seconds` | `AUGUR_SERVE_SLURM_POLL_SECONDS` | `--slurm-poll-seconds` | 15 |
//! | `retention_days` | `AUGUR_SERVE_RETENTION_DAYS` | `--retention-days` | 30 (0 = keep every job) |
//! | `retrain_max_jobs` | `AUGUR_SERVE_RETRAIN_MAX_JOBS` | — | 200000 |
//! | `compaction_interval_secs` | `AUGUR_SERVE_COMPACTION_INTERVAL` | — | 3600 (0 = off) |
//! | `snapshot_interval_secs` | `AUGUR_SERVE_SNAPSHOT_INTERVAL` | — | 600 (0 = only at stop and after a model swap) |
//! | `snapshot_every_events` | `AUGUR_SERVE_SNAPSHOT_EVERY_EVENTS` | — | 500000 (0 = by time only) |

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The resolved configuration of the service.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServeConfig {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// Folder of the durable state: the event store (`events.sqlite`), the model registry
    /// (`models/`) and the generated API token (`auth-token`).
    pub data_dir: PathBuf,
    /// The event log: `None` is the embedded SQLite store in `data_dir`; a `postgres://`
    /// connection string is a PostgreSQL database replicas share (never serialised back
    /// out: it may hold a password).
    #[serde(skip)]
    pub store: Option<String>,
    /// Bearer token for mutating endpoints (never serialised back out).
    #[serde(skip)]
    pub token: Option<String>,
    /// Turn authentication off (only this turns it off).
    pub insecure: bool,
    /// What the models are trained on at first start, when the registry is empty: bundled
    /// dataset names, trace files and folders, comma-separated (the simulator replays a
    /// bundled name).
    pub bootstrap_dataset: String,
    /// Format of the bootstrap trace files when it cannot be detected.
    pub bootstrap_format: Option<String>,
    /// Train on only the first N jobs (by submit time) of the bootstrap dataset (quicker).
    pub bootstrap_limit: Option<usize>,
    /// Maximum boosting rounds when training (first start and retraining); lower is quicker.
    pub trees: Option<usize>,
    /// Clock speed of the simulated cluster the controller loop acts on (simulated seconds
    /// per real second).
    pub speed: f64,
    /// Largest accepted request body, bytes.
    pub body_limit_bytes: usize,
    /// Most events or jobs in one batch request.
    pub max_batch: usize,
    /// Finished jobs needed in the ingested history before a retrain is accepted.
    pub min_retrain_jobs: usize,
    /// Labelled jobs a retrained version must be scored on (in the newest 20% of the
    /// history) before it may replace the served one (see [`super::tasks::model_gate`]).
    pub min_test_jobs: usize,
    /// Retrain in the background on the ingested history after this many newly finished
    /// jobs since the last retrain (0 = never; see [`super::tasks::retrain`]).
    pub retrain_every_jobs: usize,
    /// On the live backends (`none`, `kubernetes`), events whose time is more than this
    /// many seconds after the wall clock are refused.
    pub max_future_skew_seconds: f64,
    /// The cluster the service observes and acts on.
    pub backend: Backend,
    /// Prediction batches computed at once (the rest wait briefly, then get 503).
    pub prediction_workers: usize,
    /// Most work in one prediction request, in job-or-metric-point units (a convergence
    /// job costs its kept metric points, any other job 1).
    pub max_prediction_points: usize,
    /// Seconds a client has to send a request's header, counted from when the connection
    /// waits for one: it also closes connections idle between requests.
    pub header_read_timeout_secs: f64,
    /// Seconds a request body may stall between two reads before the request fails (408).
    pub request_body_timeout_secs: f64,
    /// Most open client connections; at the limit, the longest-idle one is closed to admit
    /// a new one.
    pub max_connections: usize,
    /// Seconds the requests in flight get after SIGTERM/SIGINT before the process exits.
    pub shutdown_deadline_secs: f64,
    /// Require the token for reads that expose users and job names (`GET /v1/events`,
    /// `/v1/jobs/*`, recent predictions).
    pub auth_reads: bool,
    /// `--backend slurm`: seconds between two polls of `squeue`, `sacct` and `sinfo`.
    pub slurm_poll_seconds: f64,
    /// `--backend kubernetes`: the client and the watched namespace (flags only: never read
    /// from the file or the environment, never serialised back out).
    #[serde(skip)]
    pub kubernetes: KubeOptions,
    /// Days of job time a finished job stays in memory (`GET /v1/jobs/{id}`, retraining)
    /// after its finish; its events then move to the archive at the next compaction
    /// (0 = keep every job and never compact).
    pub retention_days: f64,
    /// Most jobs a retrain uses: the newest by submit time (a long history is cut, and the
    /// retrain's answer says so).
    pub retrain_max_jobs: usize,
    /// Seconds between two compactions of the store (0 = never).
    pub compaction_interval_secs: f64,
    /// Seconds between two snapshots of the online state while events arrive (0 = only at a
    /// clean stop and after a model swap); see [`super::state::snapshot`].
    pub snapshot_interval_secs: f64,
    /// A snapshot is also written once this many events arrived since the last one (0 =
    /// by time only).
    pub snapshot_every_events: u64,
}

/// `prediction_workers` by default: one core is left to the async workers (health,
/// readiness, ingest).
fn default_prediction_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .saturating_sub(1)
        .max(1)
}

/// What `--backend kubernetes` was given (`--kubeconfig`, `--namespace`, `--dry-run`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeOptions {
    /// The kubeconfig file; `None`: the in-cluster configuration, else the default one.
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the jobs; `None`: all namespaces.
    pub namespace: Option<String>,
    /// Decide and log, never patch, for the life of the process.
    pub dry_run: bool,
}

/// The cluster behind the service. A data folder belongs to one backend and one cluster
/// ([`super::state::identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// No cluster: a prediction service fed only by its API.
    None,
    /// The simulator replaying the bundled trace at `speed` (a demonstration; its events are
    /// simulated).
    #[default]
    Sim,
    /// A Kubernetes cluster (watches, the elastic controller through `/scale`).
    Kubernetes,
    /// A Slurm cluster, observed through its client commands (no scaling).
    Slurm,
}

impl Backend {
    /// Whether events come from a real cluster on the wall clock (the simulator runs its
    /// own, accelerated clock).
    pub fn is_live(self) -> bool {
        self != Backend::Sim
    }

    /// The name used in flags, files and the data folder's identity.
    pub fn name(self) -> &'static str {
        match self {
            Backend::None => "none",
            Backend::Sim => "sim",
            Backend::Kubernetes => "kubernetes",
            Backend::Slurm => "slurm",
        }
    }
}

/// A backend name that is none of the backends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{0}`: none, sim, kubernetes or slurm")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Backend, UnknownBackend> {
        match s {
            "none" => Ok(Backend::None),
            "sim" => Ok(Backend::Sim),
            "kubernetes" => Ok(Backend::Kubernetes),
            "slurm" => Ok(Backend::Slurm),
            other => Err(UnknownBackend(other.to_string())),
        }
    }
}

impl ServeConfig {
    /// The retention window in seconds of job time (`None`: keep every job).
    pub fn retention_secs(&self) -> Option<f64> {
        (self.retention_days > 0.0).then_some(self.retention_days * 86_400.0)
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("augur-data"),
            store: None,
            token: None,
            insecure: false,
            bootstrap_dataset: "philly".to_string(),
            bootstrap_format: None,
            bootstrap_limit: None,
            trees: None,
            speed: 60.0,
            body_limit_bytes: 4 * 1024 * 1024,
            max_batch: 10_000,
            min_retrain_jobs: 200,
            min_test_jobs: 50,
            retrain_every_jobs: 2000,
            max_future_skew_seconds: 300.0,
            backend: Backend::Sim,
            prediction_workers: default_prediction_workers(),
            max_prediction_points: 1_000_000,
            header_read_timeout_secs: 10.0,
            request_body_timeout_secs: 30.0,
            max_connections: 1024,
            shutdown_deadline_secs: 10.0,
            auth_reads: false,
            slurm_poll_seconds: 15.0,
            kubernetes: KubeOptions::default(),
            retention_days: 30.0,
            retrain_max_jobs: 200_000,
            compaction_interval_secs: 3600.0,
            snapshot_interval_secs: 600.0,
            snapshot_every_events: 500_000,
        }
    }
}

/// One source of settings: every field optional, later sources override earlier ones.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialConfig {
    pub addr: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub store: Option<String>,
    pub token: Option<String>,
    pub insecure: Option<bool>,
    pub bootstrap_dataset: Option<String>,
    pub bootstrap_format: Option<String>,
    pub bootstrap_limit: Option<usize>,
    pub trees: Option<usize>,
    pub speed: Option<f64>,
    pub body_limit_bytes: Option<usize>,
    pub max_batch: Option<usize>,
    pub min_retrain_jobs: Option<usize>,
    pub min_test_jobs: Option<usize>,
    pub max_future_skew_seconds: Option<f64>,
    pub retrain_every_jobs: Option<usize>,
    pub backend: Option<Backend>,
    pub prediction_workers: Option<usize>,
    pub max_prediction_points: Option<usize>,
    pub header_read_timeout_secs: Option<f64>,
    pub request_body_timeout_secs: Option<f64>,
    pub max_connections: Option<usize>,
    pub shutdown_deadline_secs: Option<f64>,
    pub auth_reads: Option<bool>,
    pub slurm_poll_seconds: Option<f64>,
    pub retention_days: Option<f64>,
    pub retrain_max_jobs: Option<usize>,
    pub compaction_interval_secs: Option<f64>,
    pub snapshot_interval_secs: Option<f64>,
    pub snapshot_every_events: Option<u64>,
}

impl PartialConfig {
    /// Reads a TOML config file; unknown keys are an error naming them.
    pub fn from_file(path: &Path) -> anyhow::Result<PartialConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("config file {}", path.display()))
    }

    /// Reads the `AUGUR_SERVE_*` variables from `env` (a snapshot of the environment, so
    /// tests need not touch the process environment).
    pub fn from_env(env: &HashMap<String, String>) -> anyhow::Result<PartialConfig> {
        fn parse<T: std::str::FromStr>(
            env: &HashMap<String, String>,
            key: &str,
        ) -> anyhow::Result<Option<T>>
        where
            T::Err: std::fmt::Display,
        {
            match env.get(key) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<T>()
                    .map(Some)
                    .map_err(|e| anyhow::anyhow!("environment variable {key}=`{v}`: {e}")),
            }
        }
        fn flag(env: &HashMap<String, String>, key: &str) -> anyhow::Result<Option<bool>> {
            Ok(match env.get(key).map(|v| v.trim()) {
                None => None,
                Some("1" | "true" | "yes") => Some(true),
                Some("0" | "false" | "no" | "") => Some(false),
                Some(v) => {
                    anyhow::bail!("environment variable {key}=`{v}`: expected true/false/1/0")
                }
            })
        }
        let insecure = flag(env, "AUGUR_SERVE_INSECURE")?;
        Ok(PartialConfig {
            addr: parse(env, "AUGUR_SERVE_ADDR")?,
            data_dir: env.get("AUGUR_SERVE_DATA_DIR").map(PathBuf::from),
            store: env
                .get("AUGUR_SERVE_STORE")
                .filter(|s| !s.is_empty())
                .cloned(),
            token: env
                .get("AUGUR_SERVE_TOKEN")
                .filter(|t| !t.is_empty())
                .cloned(),
            insecure,
            bootstrap_dataset: env.get("AUGUR_SERVE_BOOTSTRAP").cloned(),
            bootstrap_format: env.get("AUGUR_SERVE_BOOTSTRAP_FORMAT").cloned(),
            bootstrap_limit: parse(env, "AUGUR_SERVE_BOOTSTRAP_LIMIT")?,
            trees: parse(env, "AUGUR_SERVE_TREES")?,
            speed: parse(env, "AUGUR_SERVE_SPEED")?,
            body_limit_bytes: parse(env, "AUGUR_SERVE_BODY_LIMIT")?,
            max_batch: parse(env, "AUGUR_SERVE_MAX_BATCH")?,
            min_retrain_jobs: parse(env, "AUGUR_SERVE_MIN_RETRAIN_JOBS")?,
            min_test_jobs: parse(env, "AUGUR_SERVE_MIN_TEST_JOBS")?,
            max_future_skew_seconds: parse(env, "AUGUR_SERVE_MAX_FUTURE_SKEW")?,
            retrain_every_jobs: parse(env, "AUGUR_SERVE_RETRAIN_EVERY_JOBS")?,
            backend: parse(env, "AUGUR_SERVE_BACKEND")?,
            prediction_workers: parse(env, "AUGUR_SERVE_PREDICTION_WORKERS")?,
            max_prediction_points: parse(env, "AUGUR_SERVE_MAX_PREDICTION_POINTS")?,
            header_read_timeout_secs: parse(env, "AUGUR_SERVE_HEADER_READ_TIMEOUT")?,
            request_body_timeout_secs: parse(env, "AUGUR_SERVE_REQUEST_BODY_TIMEOUT")?,
            max_connections: parse(env, "AUGUR_SERVE_MAX_CONNECTIONS")?,
            shutdown_deadline_secs: parse(env, "AUGUR_SERVE_SHUTDOWN_DEADLINE")?,
            auth_reads: flag(env, "AUGUR_SERVE_AUTH_READS")?,
            slurm_poll_seconds: parse(env, "AUGUR_SERVE_SLURM_POLL_SECONDS")?,
            retention_days: parse(env, "AUGUR_SERVE_RETENTION_DAYS")?,
            retrain_max_jobs: parse(env, "AUGUR_SERVE_RETRAIN_MAX_JOBS")?,
            compaction_interval_secs: parse(env, "AUGUR_SERVE_COMPACTION_INTERVAL")?,
            snapshot_interval_secs: parse(env, "AUGUR_SERVE_SNAPSHOT_INTERVAL")?,
            snapshot_every_events: parse(env, "AUGUR_SERVE_SNAPSHOT_EVERY_EVENTS")?,
        })
    }

    /// `self` with every setting `later` has replaced.
    pub fn merged(self, later: PartialConfig) -> PartialConfig {
        PartialConfig {
            addr: later.addr.or(self.addr),
            data_dir: later.data_dir.or(self.data_dir),
            store: later.store.or(self.store),
            token: later.token.or(self.token),
            insecure: later.insecure.or(self.insecure),
            bootstrap_dataset: later.bootstrap_dataset.or(self.bootstrap_dataset),
            bootstrap_format: later.bootstrap_format.or(self.bootstrap_format),
            bootstrap_limit: later.bootstrap_limit.or(self.bootstrap_limit),
            trees: later.trees.or(self.trees),
            speed: later.speed.or(self.speed),
            body_limit_bytes: later.body_limit_bytes.or(self.body_limit_bytes),
            max_batch: later.max_batch.or(self.max_batch),
            min_retrain_jobs: later.min_retrain_jobs.or(self.min_retrain_jobs),
            min_test_jobs: later.min_test_jobs.or(self.min_test_jobs),
            max_future_skew_seconds: later
                .max_future_skew_seconds
                .or(self.max_future_skew_seconds),
            retrain_every_jobs: later.retrain_every_jobs.or(self.retrain_every_jobs),
            backend: later.backend.or(self.backend),
            prediction_workers: later.prediction_workers.or(self.prediction_workers),
            max_prediction_points: later.max_prediction_points.or(self.max_prediction_points),
            header_read_timeout_secs: later
                .header_read_timeout_secs
                .or(self.header_read_timeout_secs),
            request_body_timeout_secs: later
                .request_body_timeout_secs
                .or(self.request_body_timeout_secs),
            max_connections: later.max_connections.or(self.max_connections),
            shutdown_deadline_secs: later.shutdown_deadline_secs.or(self.shutdown_deadline_secs),
            auth_reads: later.auth_reads.or(self.auth_reads),
            slurm_poll_seconds: later.slurm_poll_seconds.or(self.slurm_poll_seconds),
            retention_days: later.retention_days.or(self.retention_days),
            retrain_max_jobs: later.retrain_max_jobs.or(self.retrain_max_jobs),
            compaction_interval_secs: later
                .compaction_interval_secs
                .or(self.compaction_interval_secs),
            snapshot_interval_secs: later.snapshot_interval_secs.or(self.snapshot_interval_secs),
            snapshot_every_events: later.snapshot_every_events.or(self.snapshot_every_events),
        }
    }

    /// The defaults with these settings applied, checked.
    pub fn resolve(self) -> anyhow::Result<ServeConfig> {
        let d = ServeConfig::default();
        let cfg = ServeConfig {
            addr: self.addr.unwrap_or(d.addr),
            data_dir: self.data_dir.unwrap_or(d.data_dir),
            store: self.store.or(d.store),
            token: self.token.or(d.token),
            insecure: self.insecure.unwrap_or(d.insecure),
            bootstrap_dataset: self.bootstrap_dataset.unwrap_or(d.bootstrap_dataset),
            bootstrap_format: self.bootstrap_format.or(d.bootstrap_format),
            bootstrap_limit: self.bootstrap_limit.or(d.bootstrap_limit),
            trees: self.trees.or(d.trees),
            speed: self.speed.unwrap_or(d.speed),
            body_limit_bytes: self.body_limit_bytes.unwrap_or(d.body_limit_bytes),
            max_batch: self.max_batch.unwrap_or(d.max_batch),
            min_retrain_jobs: self.min_retrain_jobs.unwrap_or(d.min_retrain_jobs),
            min_test_jobs: self.min_test_jobs.unwrap_or(d.min_test_jobs),
            max_future_skew_seconds: self
                .max_future_skew_seconds
                .unwrap_or(d.max_future_skew_seconds),
            retrain_every_jobs: self.retrain_every_jobs.unwrap_or(d.retrain_every_jobs),
            backend: self.backend.unwrap_or(d.backend),
            prediction_workers: self.prediction_workers.unwrap_or(d.prediction_workers),
            max_prediction_points: self
                .max_prediction_points
                .unwrap_or(d.max_prediction_points),
            header_read_timeout_secs: self
                .header_read_timeout_secs
                .unwrap_or(d.header_read_timeout_secs),
            request_body_timeout_secs: self
                .request_body_timeout_secs
                .unwrap_or(d.request_body_timeout_secs),
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            shutdown_deadline_secs: self
                .shutdown_deadline_secs
                .unwrap_or(d.shutdown_deadline_secs),
            auth_reads: self.auth_reads.unwrap_or(d.auth_reads),
            slurm_poll_seconds: self.slurm_poll_seconds.unwrap_or(d.slurm_poll_seconds),
            kubernetes: d.kubernetes,
            retention_days: self.retention_days.unwrap_or(d.retention_days),
            retrain_max_jobs: self.retrain_max_jobs.unwrap_or(d.retrain_max_jobs),
            compaction_interval_secs: self
                .compaction_interval_secs
                .unwrap_or(d.compaction_interval_secs),
            snapshot_interval_secs: self
                .snapshot_interval_secs
                .unwrap_or(d.snapshot_interval_secs),
            snapshot_every_events: self
                .snapshot_every_events
                .unwrap_or(d.snapshot_every_events),
        };
        cfg.check()?;
        Ok(cfg)
    }
}

impl ServeConfig {
    /// Refuses a setting out of its range, naming it.
    fn check(&self) -> anyhow::Result<()> {
        let cfg = self;
        for (key, v) in [
            ("header_read_timeout_secs", cfg.header_read_timeout_secs),
            ("request_body_timeout_secs", cfg.request_body_timeout_secs),
            ("shutdown_deadline_secs", cfg.shutdown_deadline_secs),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                anyhow::bail!("{key} must be a number of seconds in (0, 86400], got {v}");
            }
        }
        for (key, v) in [
            ("prediction_workers", cfg.prediction_workers),
            ("max_prediction_points", cfg.max_prediction_points),
            ("max_connections", cfg.max_connections),
        ] {
            if v == 0 {
                anyhow::bail!("{key} must be at least 1");
            }
        }
        if !(cfg.retention_days.is_finite() && cfg.retention_days >= 0.0) {
            anyhow::bail!(
                "retention_days must be 0 (keep every job) or more, got {}",
                cfg.retention_days
            );
        }
        if cfg.retrain_max_jobs < cfg.min_retrain_jobs.max(1) {
            anyhow::bail!(
                "retrain_max_jobs ({}) must be at least min_retrain_jobs ({})",
                cfg.retrain_max_jobs,
                cfg.min_retrain_jobs
            );
        }
        if !(cfg.compaction_interval_secs.is_finite() && cfg.compaction_interval_secs >= 0.0) {
            anyhow::bail!(
                "compaction_interval_secs must be 0 (off) or more, got {}",
                cfg.compaction_interval_secs
            );
        }
        if !(cfg.snapshot_interval_secs.is_finite() && cfg.snapshot_interval_secs >= 0.0) {
            anyhow::bail!(
                "snapshot_interval_secs must be 0 (off) or more, got {}",
                cfg.snapshot_interval_secs
            );
        }
        if !(cfg.slurm_poll_seconds.is_finite()
            && (0.1..=86_400.0).contains(&cfg.slurm_poll_seconds))
        {
            anyhow::bail!(
                "slurm_poll_seconds must be between 0.1 and 86400, got {}",
                cfg.slurm_poll_seconds
            );
        }
        if !(cfg.speed.is_finite() && cfg.speed > 0.0) {
            anyhow::bail!("speed must be a positive number, got {}", cfg.speed);
        }
        if cfg.body_limit_bytes < 1024 {
            anyhow::bail!(
                "body_limit_bytes must be at least 1024, got {}",
                cfg.body_limit_bytes
            );
        }
        if !(cfg.max_future_skew_seconds.is_finite() && cfg.max_future_skew_seconds >= 0.0) {
            anyhow::bail!(
                "max_future_skew_seconds must be a number of seconds >= 0, got {}",
                cfg.max_future_skew_seconds
            );
        }
        if let Some(s) = &cfg.store {
            if !(s.starts_with("postgres://") || s.starts_with("postgresql://")) {
                anyhow::bail!(
                    "store must be a postgres:// (or postgresql://) connection string, or unset for the SQLite store in the data folder"
                );
            }
        }
        if cfg.max_batch == 0 {
            anyhow::bail!("max_batch must be at least 1");
        }
        if cfg.trees == Some(0) {
            anyhow::bail!("trees must be at least 1");
        }
        if let Some(t) = &cfg.token {
            if t.len() < 16 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
                anyhow::bail!(
                    "token must be at least 16 characters without spaces or control characters"
                );
            }
        }
        Ok(())
    }
}

/// Builds the configuration from defaults, the file (if any), `env` and the flags.
pub fn load(
    file: Option<&Path>,
    env: &HashMap<String, String>,
    flags: PartialConfig,
) -> anyhow::Result<ServeConfig> {
    let from_file = match file {
        Some(p) => PartialConfig::from_file(p)?,
        None => PartialConfig::default(),
    };
    from_file
        .merged(PartialConfig::from_env(env)?)
        .merged(flags)
        .resolve()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn flags_override_env_override_file_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("augur.toml");
        std::fs::write(
            &file,
            "addr = \"127.0.0.1:9000\"\ndata_dir = \"/from/file\"\ntrees = 7\nspeed = 10.0\n",
        )
        .unwrap();
        let e = env(&[
            ("AUGUR_SERVE_DATA_DIR", "/from/env"),
            ("AUGUR_SERVE_TREES", "9"),
        ]);
        let flags = PartialConfig {
            trees: Some(11),
            ..Default::default()
        };
        let cfg = load(Some(&file), &e, flags).unwrap();
        assert_eq!(cfg.addr, "127.0.0.1:9000".parse().unwrap()); // file only
        assert_eq!(cfg.data_dir, PathBuf::from("/from/env")); // env beats file
        assert_eq!(cfg.trees, Some(11)); // flag beats env and file
        assert_eq!(cfg.speed, 10.0);
        assert_eq!(cfg.max_batch, ServeConfig::default().max_batch); // default
        assert_eq!(cfg.retrain_every_jobs, 2000); // default
        let cfg = load(
            Some(&file),
            &env(&[("AUGUR_SERVE_RETRAIN_EVERY_JOBS", "0")]),
            PartialConfig::default(),
        )
        .unwrap();
        assert_eq!(cfg.retrain_every_jobs, 0); // env turns it off
        let flags = PartialConfig {
            retrain_every_jobs: Some(50),
            ..Default::default()
        };
        let cfg = load(
            Some(&file),
            &env(&[("AUGUR_SERVE_RETRAIN_EVERY_JOBS", "0")]),
            flags,
        )
        .unwrap();
        assert_eq!(cfg.retrain_every_jobs, 50); // flag beats env
        let cfg = load(None, &HashMap::new(), PartialConfig::default()).unwrap();
        assert_eq!(cfg, ServeConfig::default());
    }

    #[test]
    fn bad_settings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("augur.toml");
        std::fs::write(&file, "adress = \"x\"\n").unwrap();
        let err = format!(
            "{:#}",
            load(Some(&file), &HashMap::new(), PartialConfig::default()).unwrap_err()
        );
        assert!(err.contains("adress"), "{err}");
        let err = format!(
            "{:#}",
            load(
                None,
                &env(&[("AUGUR_SERVE_TREES", "many")]),
                PartialConfig::default()
            )
            .unwrap_err()
        );
        assert!(err.contains("AUGUR_SERVE_TREES"), "{err}");
        let err = format!(
            "{:#}",
            load(
                None,
                &env(&[("AUGUR_SERVE_TOKEN", "short")]),
                PartialConfig::default()
            )
            .unwrap_err()
        );
        assert!(err.contains("token"), "{err}");
    }
}
