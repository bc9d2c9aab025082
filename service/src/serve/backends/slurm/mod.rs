//! `augur serve --backend slurm`: an observe-only backend for a Slurm cluster.
//!
//! Every `slurm_poll_seconds` (default 15) it polls the Slurm client commands:
//! - `squeue` (pending and running jobs, one line per array task): new jobs become
//!   `job_submitted` events, jobs now running `job_started` ones; a pending job's expected
//!   start (what `squeue --start` prints, the scheduler's estimate) and its reason for
//!   waiting (`%r`: `Priority`, `Resources`, ...) and whether it asks for whole nodes (`%h`)
//!   are kept beside it for `GET /v1/eta` and
//!   `GET /v1/jobs/{id}`;
//! - `sacct` (every job in any state since the last poll, read by the sacct reader): the
//!   finish of every ended job, with its Slurm state as status, and the submit and start of
//!   jobs that began and ended between two polls. On the first start the window is the last
//!   [`HISTORY_DAYS`] days of accounting: the cluster's history goes into the store, and
//!   when it holds at least `min_retrain_jobs` finished jobs the first models are trained on
//!   it instead of the bundled trace ([`bootstrap_history`]);
//! - `sinfo` (nodes, CPUs, GPUs): a `cluster_snapshot` event per poll, busy GPUs summed
//!   over the running jobs; where every node's and running job's GPUs name their type, the
//!   free GPUs by type (for the reading of why a job waits).
//!
//! The events go through the event store like every other backend's and the API's, so the
//! online state, the predictions and retraining learn from them. Job ids in the store are
//! `<cluster>/<slurm id>@<submit>` ([`tracker`]); times are Slurm's wall times, read in UTC
//! ([`commands`] runs every command with `TZ=UTC`).
//!
//! Why polling the command-line tools rather than `slurmrestd`: the REST daemon is not
//! configured on most sites and needs JWT authentication set up by the administrators, while
//! `squeue`, `sacct` and `sinfo` are on every login node and answer any user.
//!
//! Why it does not act: Slurm can change a pending job's size (`scontrol update JobId=…
//! NumNodes=… / TRES`), but a running job cannot be resized without the job's own cooperation
//! (shrinking through `scontrol update` and re-reading the allocation, growing through a
//! second job it merges), and an observer changing other users' pending jobs would need
//! operator rights and surprise their owners. Augur predicts; Slurm's scheduler decides.
//!
//! A failing command (timeout [`commands::COMMAND_TIMEOUT`]) is logged and the poll retried
//! with doubling backoff up to [`MAX_BACKOFF`]; [`SlurmStatus::healthy`] says whether the
//! last poll worked.

pub mod commands;
pub mod tracker;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use augur_datasets::{JobRecord, ReadOptions};

use super::controller::Live;
use super::health::BackendHealth;
use super::views::{ClusterView, SlurmView};
use super::ServeBackend;
use crate::serve::config::{Backend, ServeConfig};
use crate::serve::state::events::{ClusterSnapshot, Event};
use crate::serve::state::store::StoreError;
use crate::serve::{lock, AppState};
use commands::{Capacity, CommandError};
use tracker::Tracker;

/// Days of accounting read on the first start.
pub const HISTORY_DAYS: f64 = 30.0;
/// Longest wait between two polls while commands fail.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How far back each `sacct` window reaches before the previous poll (accounting records
/// can land in slurmdbd a little after the fact).
const SACCT_OVERLAP_S: f64 = 120.0;
/// File (in the data folder) the last `sacct` output is kept in for the reader.
const SACCT_FILE: &str = "slurm-sacct.txt";

/// The Slurm backend: the cluster's name (asked of Slurm when the backend is built: the
/// data folder's identity names it), the poll interval, and what the polls found.
#[derive(Debug)]
pub struct SlurmBackend {
    /// The cluster's name (`scontrol show config` ClusterName).
    cluster: String,
    poll: Duration,
    status: Arc<SlurmStatus>,
}

impl SlurmBackend {
    /// Asks Slurm for the cluster's name (blocking: runs `scontrol`).
    pub fn connect(config: &ServeConfig) -> Result<SlurmBackend, CommandError> {
        let cluster = commands::cluster_name_blocking()?;
        Ok(SlurmBackend::new(cluster, config.slurm_poll_seconds))
    }

    /// The backend of the cluster named `cluster`, polled every `poll_seconds`.
    pub fn new(cluster: String, poll_seconds: f64) -> SlurmBackend {
        SlurmBackend {
            cluster,
            poll: Duration::from_secs_f64(poll_seconds),
            status: Arc::new(SlurmStatus::default()),
        }
    }
}

impl ServeBackend for SlurmBackend {
    fn kind(&self) -> Backend {
        Backend::Slurm
    }

    fn cluster(&self) -> String {
        self.cluster.clone()
    }

    /// The polling loop (observe-only: the controller's switches do nothing here).
    fn start(&self, state: AppState) {
        state.ext.live.set_status(format!(
            "slurm {}: observe-only (no controller)",
            self.cluster
        ));
        tokio::spawn(drive(
            state,
            self.cluster.clone(),
            self.poll,
            self.status.clone(),
        ));
    }

    /// The polls' own state: up while the last poll worked.
    fn health(&self, _controller: &Live) -> Option<BackendHealth> {
        let view = self.status.view();
        let up = self.status.healthy();
        let detail = match (&view.last_error, up) {
            (Some(e), _) => format!("failing: {e}"),
            (None, true) => "running".to_string(),
            (None, false) => "starting".to_string(),
        };
        Some(BackendHealth {
            backend: Backend::Slurm.name(),
            up,
            detail,
        })
    }

    fn cluster_view(&self) -> Option<ClusterView> {
        Some(ClusterView::Slurm(Box::new(self.status.view())))
    }

    fn scheduler_id(&self, store_id: &str) -> Option<String> {
        tracker::slurm_id(&self.cluster, store_id).map(str::to_string)
    }

    fn scheduler_start(&self, store_id: &str) -> Option<f64> {
        self.status.estimate(store_id)
    }

    fn scheduler_reason(&self, store_id: &str) -> Option<String> {
        lock(&self.status.inner).reasons.get(store_id).cloned()
    }

    fn whole_nodes(&self, store_id: &str) -> bool {
        lock(&self.status.inner).whole_nodes.contains(store_id)
    }

    fn free_gpus_by_type(&self) -> Option<BTreeMap<String, f64>> {
        lock(&self.status.inner).free_by_type.clone()
    }

    fn training_history(&self, state: &AppState) -> Option<(String, Vec<JobRecord>)> {
        let jobs = bootstrap_history(state)?;
        Some((format!("slurm:{}", self.cluster), jobs))
    }
}

/// The backend's state for the endpoints: up or not, the last poll, Slurm's own start
/// estimates and reasons of the pending jobs, and the free GPUs by type.
#[derive(Debug, Default)]
pub struct SlurmStatus {
    up: AtomicBool,
    inner: Mutex<StatusInner>,
}

#[derive(Debug, Default)]
struct StatusInner {
    view: SlurmView,
    estimates: HashMap<String, f64>,
    reasons: HashMap<String, String>,
    whole_nodes: std::collections::HashSet<String>,
    free_by_type: Option<BTreeMap<String, f64>>,
}

impl SlurmStatus {
    /// Whether the last poll of the Slurm commands worked (false before the first).
    pub fn healthy(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// Slurm's expected start of the pending job with this store id, if it gave one.
    pub fn estimate(&self, store_id: &str) -> Option<f64> {
        lock(&self.inner).estimates.get(store_id).copied()
    }

    /// What `GET /v1/cluster` shows.
    pub fn view(&self) -> SlurmView {
        let mut v = lock(&self.inner).view.clone();
        v.backend = "slurm";
        v.up = self.healthy();
        v
    }

    fn failed(&self, error: String) {
        self.up.store(false, Ordering::SeqCst);
        let mut i = lock(&self.inner);
        i.view.last_error = Some(error);
        i.view.consecutive_failures += 1;
    }
}

/// Unix seconds now.
fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

async fn drive(state: AppState, cluster: String, poll: Duration, status: Arc<SlurmStatus>) {
    {
        let mut i = lock(&status.inner);
        i.view.cluster = cluster.clone();
        i.view.poll_seconds = poll.as_secs_f64();
    }
    let (mut tracker, mut since) = restore(&state, &cluster);
    let file = state.config.data_dir.join(SACCT_FILE);
    let mut shutdown = state.shutdown.clone();
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        let started = now_unix();
        match poll_once(&state, &status, &mut tracker, &file, since).await {
            Ok(()) => {
                since = started - SACCT_OVERLAP_S;
                wait = poll;
            }
            Err(e) => {
                wait = backoff(wait, poll);
                let msg = format!("{e:#}");
                tracing::warn!(error = %msg, retry_in_s = wait.as_secs_f64(), "polling Slurm failed");
                status.failed(msg);
            }
        }
    }
}

/// The wait before the next try after a failed poll that waited `wait`: twice as long (at
/// least twice the poll interval), at most [`MAX_BACKOFF`].
fn backoff(wait: Duration, poll: Duration) -> Duration {
    (wait.max(poll) * 2).min(MAX_BACKOFF)
}

/// The tracker rebuilt from the runs of this cluster already in the store, and where the
/// first `sacct` window starts: before the newest of them, else [`HISTORY_DAYS`] ago.
fn restore(state: &AppState, cluster: &str) -> (Tracker, f64) {
    let mut tracker = Tracker::new(cluster);
    let mut newest: Option<f64> = None;
    for (id, job) in &state.online().jobs {
        if tracker::slurm_id(cluster, id).is_none() {
            continue;
        }
        tracker.restore(id, job.started_at.is_some(), job.finished_at);
        let last = [job.submitted_at, job.started_at, job.finished_at]
            .into_iter()
            .flatten()
            .fold(f64::NEG_INFINITY, f64::max);
        newest = Some(newest.map_or(last, |n: f64| n.max(last)));
    }
    let since = match newest {
        Some(t) if t.is_finite() => t - SACCT_OVERLAP_S,
        _ => now_unix() - HISTORY_DAYS * 86_400.0,
    };
    (tracker, since)
}

/// Why a poll failed.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("reading the sacct output: {0}")]
    Read(augur_datasets::DatasetError),
    #[error("the sacct reader stopped: {0}")]
    Reader(tokio::task::JoinError),
    #[error("storing the cluster's events: {0}")]
    Store(StoreError),
}

async fn poll_once(
    state: &AppState,
    status: &SlurmStatus,
    tracker: &mut Tracker,
    file: &Path,
    since: f64,
) -> Result<(), PollError> {
    let queue = commands::squeue().await?;
    let capacity = commands::sinfo().await?;
    let records = accounting(file, since).await?;
    let now = now_unix();
    let mut events = tracker.observe_queue(&queue, now);
    events.extend(tracker.observe_accounting(&records, now));
    let running: Vec<_> = queue.iter().filter(|j| j.running).collect();
    let busy: f64 = running.iter().map(|j| j.gpus).sum();
    events.push(Event::ClusterSnapshot(ClusterSnapshot {
        at: now,
        total_gpus: capacity.gpus,
        busy_gpus: busy.min(capacity.gpus),
        queued_jobs: Some((queue.len() - running.len()) as u64),
        running_jobs: Some(running.len() as u64),
        nodes: Some(capacity.nodes),
    }));
    events.retain(|ev| match ev.validate("") {
        Ok(()) => true,
        Err(err) => {
            tracing::warn!(error = ?err, "Slurm event not ingestable; skipped");
            false
        }
    });
    for chunk in events.chunks(state.config.max_batch.max(1)) {
        state
            .store
            .append(chunk.to_vec())
            .await
            .map_err(PollError::Store)?;
    }
    record_poll(status, tracker, &queue, &capacity, busy, now);
    Ok(())
}

fn record_poll(
    status: &SlurmStatus,
    tracker: &Tracker,
    queue: &[commands::QueuedJob],
    capacity: &Capacity,
    busy: f64,
    now: f64,
) {
    let running = queue.iter().filter(|j| j.running).count();
    let free_by_type = free_by_type(capacity, queue);
    let mut i = lock(&status.inner);
    i.estimates = tracker.estimates().clone();
    i.reasons = tracker.reasons().clone();
    i.whole_nodes = tracker.whole_nodes().clone();
    i.free_by_type = free_by_type;
    let v = &mut i.view;
    v.last_poll = Some(now);
    v.last_error = None;
    v.consecutive_failures = 0;
    v.pending_jobs = queue.len() - running;
    v.running_jobs = running;
    v.nodes = capacity.nodes;
    v.cpus = capacity.cpus;
    v.total_gpus = capacity.gpus;
    v.busy_gpus = busy;
    drop(i);
    status.up.store(true, Ordering::SeqCst);
}

/// Free GPUs by type: each type's GPUs less those the running jobs hold; `None` when a
/// node's or a running job's GPUs name no type (which pool they draw from is unknown).
fn free_by_type(
    capacity: &Capacity,
    queue: &[commands::QueuedJob],
) -> Option<BTreeMap<String, f64>> {
    let mut free = capacity.gpus_by_type.clone()?;
    for j in queue.iter().filter(|j| j.running && j.gpus > 0.0) {
        let left = free.entry(j.gpu_type.clone()?).or_insert(0.0);
        *left = (*left - j.gpus).max(0.0);
    }
    Some(free)
}

/// The jobs `sacct` lists since `since`, through the sacct reader (times in UTC).
async fn accounting(file: &Path, since: f64) -> Result<Vec<JobRecord>, PollError> {
    commands::sacct_into(file, since).await?;
    let file = file.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut jobs = Vec::new();
        augur_datasets::jobs::sacct::read(&file, &ReadOptions::default(), &mut |r| jobs.push(r))
            .map_err(PollError::Read)?;
        Ok(jobs)
    })
    .await
    .map_err(PollError::Reader)?
}

/// The cluster's accounting history of the last [`HISTORY_DAYS`] days, when it holds at
/// least `min_retrain_jobs` finished jobs: what the first models are trained on. `None`
/// (with the reason logged) sends the first start to the bundled trace. Blocking.
fn bootstrap_history(state: &AppState) -> Option<Vec<JobRecord>> {
    let file = state.config.data_dir.join("slurm-history.txt");
    let since = now_unix() - HISTORY_DAYS * 86_400.0;
    let handle = tokio::runtime::Handle::current();
    let jobs = match handle.block_on(accounting(&file, since)) {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(error = %e, "reading the Slurm accounting history failed; training on the bundled trace");
            return None;
        }
    };
    let finished = jobs
        .iter()
        .filter(|j| j.duration.is_some_and(f64::is_finite))
        .count();
    if finished < state.config.min_retrain_jobs {
        eprintln!(
            "augur serve: the Slurm accounting of the last {HISTORY_DAYS} days has {finished} finished jobs (fewer than min_retrain_jobs {}); training on the bundled trace",
            state.config.min_retrain_jobs
        );
        return None;
    }
    Some(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_polls_back_off_doubling_up_to_the_cap() {
        let poll = Duration::from_secs(15);
        let mut wait = Duration::ZERO; // the first poll runs at once
        let mut seen = Vec::new();
        for _ in 0..6 {
            wait = backoff(wait, poll);
            seen.push(wait.as_secs());
        }
        assert_eq!(seen, [30, 60, 120, 240, 300, 300]);
    }
}
