//! The live cluster under the service: the simulator replaying the bundled trace at an
//! accelerated wall clock (`speed` trace seconds per wall second), Augur's elastic controller
//! acting on it through the `ClusterBackend` trait, and the endpoints to watch and steer it.
//!
//! What is replayed: the bootstrap dataset (`bootstrap_dataset`, philly by default) after the
//! part the first-start models were trained on (the last 20% by submit time of the first
//! `bootstrap_limit` jobs, and everything after them), on a homogeneous cluster of
//! [`LIVE_GPUS`] GPUs (8 per node). At the end of the trace the replay starts again, shifted in
//! time.
//!
//! Every tick ([`TICK`]): the simulator advances; arrivals, starts and completions, and a
//! cluster snapshot every 5 trace minutes, are ingested into the service's durable event store
//! like any client's (so the online features and the live accuracy learn from them); each new
//! job's runtime prediction made at its submit is handed to the simulator, so the controller
//! plans with Augur's predictions; then the controller decides and acts (or, paused / dry-run,
//! the simulated cluster's own FIFO scheduler runs and the controller's decisions are only
//! logged). Decisions (with reasons) and the cluster history are kept in bounded buffers.
//!
//! With `--backend kubernetes` ([`super::kube`]) the same loop, endpoints, switches and metrics
//! serve the real cluster: the same [`LiveLoop`] over the `KubeBackend`.
//!
//! | route | |
//! |---|---|
//! | `GET /v1/cluster` | the cluster now: utilisation, queue, running, rescaled jobs; replay speed and lap (simulator) or leader and watch state (Kubernetes) |
//! | `GET /v1/cluster/history?limit=N` | utilisation and queue over time (newest last) |
//! | `GET /v1/autoscaler/decisions?limit=N` | recent decisions with reasons (newest first) and totals |
//! | `POST /v1/autoscaler/dry-run` `{"enabled": bool}` | decide and log, do not act (token) |
//! | `POST /v1/autoscaler/pause`, `/resume` | stop / restart the controller (token) |

mod decision_ids;
pub mod endpoints;
pub mod health;
mod resume;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use augur_autoscaler::kubernetes::KubeBackend;
use augur_autoscaler::live::LiveBackend;
use augur_autoscaler::live::{
    block_on, ClusterPoint, JobLifecycleEvent, JobLifecycleKind, LiveConfig, LiveDecision,
    LiveLoop, LiveSim, Outcome,
};
use augur_autoscaler::sim::{jobs_from_records, ClusterSpec, SimConfig};
use augur_autoscaler::{ElasticController, ElasticParams, JobId, Policy};
use augur_datasets::{JobRecord, JobStatus};

use self::decision_ids::DecisionJobs;
use self::resume::Resume;
use super::events::{ClusterSnapshot, Event, FinishStatus, JobProfile};
use super::metrics::Metrics;
use super::{lock, AppState};

/// GPUs of the simulated cluster.
pub const LIVE_GPUS: u32 = 500;
/// GPUs per simulated node.
pub const LIVE_GPUS_PER_NODE: u32 = 8;
/// Wall time between ticks.
pub const TICK: Duration = Duration::from_millis(100);
/// Trace seconds between two ingested cluster snapshots (and history points).
pub const SNAPSHOT_EVERY_S: f64 = 300.0;

type Loop = LiveLoop<LiveSim, ElasticController>;
/// The controller loop on a Kubernetes cluster.
pub(super) type KubeLoop = LiveLoop<KubeBackend, ElasticController>;

/// The replay being driven.
pub(super) struct Running {
    live: Loop,
    /// The replayed jobs by [`augur_autoscaler::sim::SimJob::row`].
    records: Arc<Vec<JobRecord>>,
    /// Added to the simulator's lap in the jobs' ids (a replay resumed after a restart).
    lap_offset: u32,
    /// The earliest submit of the replayed trace, before any shift: no replayed or
    /// plausible event of this simulation comes before it.
    trace_start: f64,
}

impl Running {
    /// The simulator's clock now.
    fn clock(&self) -> SimClock {
        let sim = self.live.backend();
        SimClock::Running {
            trace_start: self.trace_start,
            now: sim.simulator().now(),
            speed: sim.speed(),
        }
    }
}

/// The simulator's clock, against which ingest checks the times of the events clients send
/// on `--backend sim` (as the live backends check them against the wall clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SimClock {
    /// No simulator drives this state (another backend, or none started in-process).
    Absent,
    /// The replay is loading: its clock is not known yet.
    Loading,
    /// The replay runs: its trace starts at `trace_start`, its clock reads `now`, and it
    /// runs `speed` simulated seconds per wall second.
    Running {
        trace_start: f64,
        now: f64,
        speed: f64,
    },
    /// The replay could not start.
    Failed,
}

/// The loop being driven: the simulated replay, or a Kubernetes cluster.
pub(super) enum Driven {
    Sim(Box<Running>),
    Kube(Box<KubeLoop>),
}

/// What the endpoints read and switch, whichever the backend.
trait View {
    fn history_tail(&self, limit: usize) -> Vec<ClusterPoint>;
    fn recent(&self, limit: usize) -> Vec<LiveDecision>;
    fn counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64>;
    fn set_switches(&mut self, paused: bool, dry_run: bool);
}

impl<B: LiveBackend, P: Policy> View for LiveLoop<B, P> {
    fn history_tail(&self, limit: usize) -> Vec<ClusterPoint> {
        let h = self.history();
        let skip = h.len().saturating_sub(limit);
        h.skip(skip).copied().collect()
    }
    fn recent(&self, limit: usize) -> Vec<LiveDecision> {
        self.decisions().rev().take(limit).cloned().collect()
    }
    fn counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64> {
        self.decision_counts()
    }
    fn set_switches(&mut self, paused: bool, dry_run: bool) {
        if self.paused() != paused {
            self.set_paused(paused);
        }
        if self.dry_run() != dry_run {
            self.set_dry_run(dry_run);
        }
    }
}

impl Driven {
    fn view(&self) -> &dyn View {
        match self {
            Driven::Sim(r) => &r.live,
            Driven::Kube(l) => l.as_ref(),
        }
    }
    fn view_mut(&mut self) -> &mut dyn View {
        match self {
            Driven::Sim(r) => &mut r.live,
            Driven::Kube(l) => l.as_mut(),
        }
    }
    /// Cluster seconds between two history points.
    fn history_every_s(&self) -> f64 {
        match self {
            Driven::Sim(_) => SNAPSHOT_EVERY_S,
            Driven::Kube(l) => l.backend().config().resync.as_secs_f64(),
        }
    }
}

/// Shared state of the live cluster (in [`super::Extensions`]).
pub struct Live {
    pub(super) running: tokio::sync::Mutex<Option<Driven>>,
    /// `loading`, `running`, or `failed: why`.
    status: Mutex<String>,
    speed: f64,
    paused: AtomicBool,
    dry_run: AtomicBool,
    /// Set by `--dry-run`: dry-run for the life of the process, the endpoint cannot turn it
    /// off (a hard guarantee that nothing is patched).
    dry_run_locked: AtomicBool,
    /// Where the operator's switches are kept across restarts (`<data_dir>/operator.json`).
    switches_file: std::path::PathBuf,
    /// The simulator's clock (on `--backend sim`).
    sim_clock: Mutex<SimClock>,
    /// The API job id of each recent decision.
    pub(super) decision_jobs: Mutex<DecisionJobs>,
}

/// The operator's switches as kept on disk: an acknowledged pause or dry-run survives a
/// restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredSwitches {
    pub paused: bool,
    pub dry_run: bool,
}

/// Reads the switches kept in `file`: none kept gives the defaults (running, acting); an
/// unreadable file gives the safe side (paused and dry-run), loudly.
fn load_switches(file: &std::path::Path) -> StoredSwitches {
    match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::error!(file = %file.display(), error = %e,
                "the operator's switches cannot be read: the controller starts paused and in dry-run until an operator resumes it");
            StoredSwitches {
                paused: true,
                dry_run: true,
            }
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => StoredSwitches::default(),
        Err(e) => {
            tracing::error!(file = %file.display(), error = %e,
                "the operator's switches cannot be read: the controller starts paused and in dry-run until an operator resumes it");
            StoredSwitches {
                paused: true,
                dry_run: true,
            }
        }
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("speed", &self.speed)
            .finish_non_exhaustive()
    }
}

impl Live {
    /// Nothing loaded yet; the replay runs at `speed` once [`spawn`] has loaded it. The
    /// operator's switches are read from (and kept in) `switches_file`.
    pub fn new(speed: f64, switches_file: std::path::PathBuf) -> Live {
        let kept = load_switches(&switches_file);
        if kept != StoredSwitches::default() {
            tracing::info!(
                paused = kept.paused,
                dry_run = kept.dry_run,
                "the operator's switches kept from before the restart"
            );
        }
        Live {
            running: tokio::sync::Mutex::new(None),
            status: Mutex::new("loading".to_string()),
            speed,
            paused: AtomicBool::new(kept.paused),
            dry_run: AtomicBool::new(kept.dry_run),
            dry_run_locked: AtomicBool::new(false),
            switches_file,
            sim_clock: Mutex::new(SimClock::Absent),
            decision_jobs: Mutex::new(DecisionJobs::default()),
        }
    }

    /// The simulator's clock now.
    pub fn sim_clock(&self) -> SimClock {
        *lock(&self.sim_clock)
    }

    fn set_sim_clock(&self, clock: SimClock) {
        *lock(&self.sim_clock) = clock;
    }

    /// Sets the switches and keeps them on disk (written whole, synced) before returning; on
    /// a write error the switches stay as they were.
    pub(super) fn store_switches(&self, new: StoredSwitches) -> std::io::Result<()> {
        let file = &self.switches_file;
        let tmp = file.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(serde_json::to_string(&new).unwrap_or_default().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, file)?;
            if let Some(dir) = file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write()?;
        self.paused.store(new.paused, Ordering::SeqCst);
        self.dry_run.store(new.dry_run, Ordering::SeqCst);
        Ok(())
    }

    /// The switches now.
    pub(super) fn stored_switches(&self) -> StoredSwitches {
        StoredSwitches {
            paused: self.paused.load(Ordering::SeqCst),
            dry_run: self.dry_run.load(Ordering::SeqCst),
        }
    }

    pub(super) fn set_status(&self, s: impl Into<String>) {
        *lock(&self.status) = s.into();
    }

    /// `--dry-run`: dry-run on, and `POST /v1/autoscaler/dry-run` may no longer turn it off.
    pub(super) fn lock_dry_run(&self) {
        self.dry_run.store(true, Ordering::SeqCst);
        self.dry_run_locked.store(true, Ordering::SeqCst);
    }

    /// Brings the loop's pause and dry-run switches in line with the endpoints'.
    pub(super) fn sync_switches(&self, d: &mut Driven) {
        d.view_mut().set_switches(
            self.paused.load(Ordering::SeqCst),
            self.dry_run.load(Ordering::SeqCst),
        );
    }

    fn status(&self) -> String {
        lock(&self.status).clone()
    }

    /// The health of the cluster `backend` (none without a cluster).
    pub fn health(&self, backend: crate::serve::config::Backend) -> Option<health::BackendHealth> {
        use crate::serve::config::Backend;
        match backend {
            Backend::None => None,
            b => Some(health::BackendHealth::from_status(b.name(), &self.status())),
        }
    }
}

/// Jobs of the trace to replay: those after the part the first-start models train on.
fn replay_records(jobs: Vec<JobRecord>, trained_on: Option<usize>) -> Vec<JobRecord> {
    let n = trained_on.unwrap_or(jobs.len()).min(jobs.len());
    let from = n * 8 / 10;
    jobs.into_iter()
        .skip(from)
        .filter(|j| j.duration.is_some_and(f64::is_finite))
        .collect()
}

/// Builds the replay (blocking: reads the trace), resuming at `resume`.
fn load(
    dataset: &str,
    trained_on: Option<usize>,
    speed: f64,
    resume: Resume,
) -> anyhow::Result<Running> {
    let all = super::training::bundled_jobs(dataset, None)?;
    let mut records = replay_records(all, trained_on);
    let trace_start = records
        .iter()
        .map(|r| r.submit_time)
        .fold(f64::INFINITY, f64::min);
    resume.shift(&mut records);
    let (jobs, skipped) = jobs_from_records(&records, &vec![None; records.len()]);
    if jobs.is_empty() {
        anyhow::bail!("{dataset}: no job to replay ({skipped} without a usable duration)");
    }
    let cluster =
        ClusterSpec::homogeneous(LIVE_GPUS, LIVE_GPUS_PER_NODE, 16).context("the live cluster")?;
    let cfg = SimConfig::new(cluster);
    let params = ElasticParams {
        rescale_pause_s: cfg.rescale_pause_s,
        ..Default::default()
    };
    let policy = ElasticController::new(params, cfg.scaling);
    let sim = LiveSim::new(jobs, cfg, speed).context("the live simulator")?;
    let live = LiveLoop::new(
        sim,
        policy,
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: SNAPSHOT_EVERY_S,
        },
    );
    Ok(Running {
        live,
        records: Arc::new(records),
        lap_offset: resume.lap,
        trace_start,
    })
}

fn finish_status(s: JobStatus) -> FinishStatus {
    match s {
        JobStatus::Completed => FinishStatus::Completed,
        JobStatus::Failed => FinishStatus::Failed,
        JobStatus::Killed => FinishStatus::Killed,
        JobStatus::Unknown => FinishStatus::Unknown,
    }
}

fn profile_of(r: &JobRecord) -> JobProfile {
    JobProfile {
        num_gpus: r.num_gpus,
        num_nodes: r.num_nodes,
        gpu_type: r.gpu_type.clone(),
        cpus: r.cpus,
        memory_mib: r.memory_mib,
        requested_time: r.requested_time,
        user: r.user.clone(),
        group: r.group.clone(),
        job_name: r.job_name.clone(),
        cluster: r.cluster.clone(),
        queue: r.queue.clone(),
    }
}

/// The service's id of a replayed job in replay lap `lap` (the resumed lap count).
fn service_id(lap: u32, r: &JobRecord) -> String {
    format!("sim{lap}-{}", r.job_id)
}

/// The ingestable events of the simulator's job events; `submitted` gets (simulator id,
/// service id) of each new job.
fn to_events(
    events: &[JobLifecycleEvent],
    records: &[JobRecord],
    lap_offset: u32,
    out: &mut Vec<Event>,
    submitted: &mut Vec<(JobId, String)>,
) {
    for e in events {
        let Some(r) = e.row.and_then(|row| records.get(row)) else {
            continue;
        };
        let job_id = service_id(e.lap + lap_offset, r);
        let ev = match e.kind {
            JobLifecycleKind::Submitted => {
                submitted.push((e.job, job_id.clone()));
                Event::JobSubmitted {
                    job_id,
                    at: e.time,
                    profile: profile_of(r),
                    dag: None,
                }
            }
            JobLifecycleKind::Started { .. } => Event::JobStarted { job_id, at: e.time },
            JobLifecycleKind::Finished { run_s } => Event::JobFinished {
                job_id,
                at: e.time,
                status: finish_status(r.status),
                duration: Some(run_s),
            },
        };
        match ev.validate("") {
            Ok(()) => out.push(ev),
            Err(err) => tracing::warn!(error = ?err, "replayed event not ingestable; skipped"),
        }
    }
}

fn snapshot_event(p: &ClusterPoint) -> Event {
    Event::ClusterSnapshot(ClusterSnapshot {
        at: p.time,
        total_gpus: f64::from(p.healthy_gpus),
        busy_gpus: f64::from(p.busy_gpus),
        queued_jobs: Some(u64::from(p.queued)),
        running_jobs: Some(u64::from(p.running)),
        nodes: Some(u64::from(LIVE_GPUS.div_ceil(LIVE_GPUS_PER_NODE))),
    })
}

/// Loads the replay in the background and drives it every [`TICK`] until shutdown.
pub fn spawn(state: AppState) {
    let dataset = state.config.bootstrap_dataset.clone();
    let limit = state.config.bootstrap_limit;
    let speed = state.ext.live.speed;
    // the store's events were applied at open: the replay continues after them
    let resume = Resume::of(&state.online());
    if resume != Resume::default() {
        tracing::info!(lap = resume.lap, after = ?resume.after, "the replay resumes after the stored events");
    }
    state.ext.live.set_sim_clock(SimClock::Loading);
    tokio::spawn(async move {
        let loaded =
            tokio::task::spawn_blocking(move || load(&dataset, limit, speed, resume)).await;
        let running = match loaded {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "the live simulator could not start");
                state.ext.live.set_status(format!("failed: {e:#}"));
                state.ext.live.set_sim_clock(SimClock::Failed);
                return;
            }
            Err(e) => {
                state.ext.live.set_status(format!("failed: {e}"));
                state.ext.live.set_sim_clock(SimClock::Failed);
                return;
            }
        };
        state.ext.live.set_sim_clock(running.clock());
        let jobs = running.live.backend().simulator().len();
        *state.ext.live.running.lock().await = Some(Driven::Sim(Box::new(running)));
        state.ext.live.set_status("running");
        tracing::info!(jobs, speed, gpus = LIVE_GPUS, "live simulator replaying");
        drive(state).await;
    });
}

async fn drive(state: AppState) {
    let live = state.ext.live.clone();
    let metrics = state.ext.metrics.clone();
    let mut shutdown = state.shutdown.clone();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    let mut pending: Vec<Event> = Vec::new();
    let mut submitted: Vec<(JobId, String)> = Vec::new();
    let mut counted = Counted::new();
    let mut last_snapshot = f64::NEG_INFINITY;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        let now = Instant::now();
        let wall = now.duration_since(last).min(Duration::from_secs(1));
        last = now;
        // 1. time passes; arrivals and completions are ingested. The simulator's work is
        // synchronous (its backend futures are ready at once): it runs in `block_in_place`
        // so requests queued on this worker thread move to another meanwhile.
        let mut busy = Duration::ZERO;
        {
            let mut guard = live.running.lock().await;
            let Some(Driven::Sim(r)) = guard.as_mut() else {
                break;
            };
            let t = Instant::now();
            let evs = tokio::task::block_in_place(|| r.live.advance(wall));
            live.set_sim_clock(r.clock());
            to_events(&evs, &r.records, r.lap_offset, &mut pending, &mut submitted);
            busy += t.elapsed();
        }
        if !pending.is_empty() {
            let batch = std::mem::take(&mut pending);
            if let Err(e) = state.store.append(batch).await {
                tracing::warn!(error = %e, "ingesting the replayed events failed; they are dropped");
            }
        }
        // 2. the predictions made at submit go to the simulator
        let predictions: Vec<(JobId, f64)> = if submitted.is_empty() {
            Vec::new()
        } else {
            let online = state.online();
            submitted
                .drain(..)
                .filter_map(|(id, job)| {
                    online
                        .jobs
                        .get(&job)
                        .and_then(|j| j.runtime_at_submit)
                        .map(|p| (id, p.seconds))
                })
                .collect()
        };
        // 3. the controller decides and acts
        let mut guard = live.running.lock().await;
        let Some(Driven::Sim(r)) = guard.as_mut() else {
            break;
        };
        for (id, secs) in predictions {
            r.live.backend_mut().set_predicted_runtime(id, secs);
        }
        r.live.set_switches(
            live.paused.load(Ordering::SeqCst),
            live.dry_run.load(Ordering::SeqCst),
        );
        let t = Instant::now();
        let report = tokio::task::block_in_place(|| block_on(r.live.control()));
        if let Some(e) = &report.error {
            tracing::warn!(error = %e, "live controller tick failed; retried next tick");
        }
        to_events(
            &report.events,
            &r.records,
            r.lap_offset,
            &mut pending,
            &mut submitted,
        );
        let p = report.cluster;
        let (sim, records) = (r.live.backend(), &r.records);
        lock(&live.decision_jobs).record(&r.live, |id| {
            let job = records.get(sim.job(id)?.row)?;
            Some(service_id(sim.lap() + r.lap_offset, job))
        });
        publish(&metrics, &r.live, &mut counted);
        busy += t.elapsed();
        metrics.observe_tick(busy.as_secs_f64());
        if p.time >= last_snapshot + SNAPSHOT_EVERY_S {
            last_snapshot = p.time;
            pending.push(snapshot_event(&p));
        }
    }
}

/// Decisions counted on `/metrics` so far, by (action, reason, outcome).
pub(super) type Counted = BTreeMap<(&'static str, &'static str, Outcome), u64>;

/// Puts the loop's cluster gauges and its new decisions (since `counted`) on `/metrics`.
pub(super) fn publish<B: LiveBackend, P: Policy>(
    metrics: &Metrics,
    live: &LiveLoop<B, P>,
    counted: &mut Counted,
) {
    let p = live.cluster();
    metrics.set_cluster(p.utilisation, p.queued, p.queued_gpus, p.running);
    for (&(action, reason, outcome), &n) in live.decision_counts() {
        let seen = counted.entry((action, reason, outcome)).or_insert(0);
        for _ in *seen..n {
            metrics.observe_action(action, reason, outcome.name());
        }
        *seen = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, submit: f64, duration: Option<f64>) -> JobRecord {
        JobRecord {
            job_id: id.to_string(),
            submit_time: submit,
            duration,
            num_gpus: Some(4.0),
            user: Some("u1".into()),
            status: JobStatus::Failed,
            source: "test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn replays_what_the_models_did_not_train_on() {
        let jobs: Vec<JobRecord> = (0..100)
            .map(|k| rec(&format!("j{k}"), k as f64, (k != 95).then_some(10.0)))
            .collect();
        let r = replay_records(jobs.clone(), Some(50));
        assert_eq!(r.first().map(|j| j.job_id.as_str()), Some("j40"));
        assert_eq!(r.len(), 59); // rows 40..100 without j95 (no duration)
        let r = replay_records(jobs, None);
        assert_eq!(r.first().map(|j| j.job_id.as_str()), Some("j80"));
    }

    #[test]
    fn simulator_events_become_ingestable_events() {
        let records = vec![rec("a", 0.0, Some(10.0))];
        let mk = |kind| JobLifecycleEvent {
            time: 5.0,
            job: JobId(0),
            row: Some(0),
            lap: 2,
            kind,
        };
        let evs = [
            mk(JobLifecycleKind::Submitted),
            mk(JobLifecycleKind::Started { workers: 4 }),
            mk(JobLifecycleKind::Finished { run_s: 12.5 }),
            JobLifecycleEvent {
                row: Some(7), // no such row: skipped
                ..mk(JobLifecycleKind::Submitted)
            },
        ];
        let (mut out, mut sub) = (Vec::new(), Vec::new());
        to_events(&evs, &records, 0, &mut out, &mut sub);
        assert_eq!(out.len(), 3);
        assert_eq!(sub, vec![(JobId(0), "sim2-a".to_string())]);
        match &out[0] {
            Event::JobSubmitted {
                job_id, profile, ..
            } => {
                assert_eq!(job_id, "sim2-a");
                assert_eq!(profile.num_gpus, Some(4.0));
                assert_eq!(profile.user.as_deref(), Some("u1"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &out[2],
            Event::JobFinished { status: FinishStatus::Failed, duration: Some(d), .. } if *d == 12.5
        ));
    }
}

#[cfg(test)]
mod switch_tests {
    use super::*;

    #[test]
    fn switches_survive_a_restart_and_an_unreadable_file_starts_safe() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("operator.json");
        let live = Live::new(60.0, file.clone());
        assert_eq!(live.stored_switches(), StoredSwitches::default());
        let on = StoredSwitches {
            paused: true,
            dry_run: true,
        };
        live.store_switches(on).unwrap();
        assert_eq!(Live::new(60.0, file.clone()).stored_switches(), on);
        live.store_switches(StoredSwitches::default()).unwrap();
        assert_eq!(
            Live::new(60.0, file.clone()).stored_switches(),
            StoredSwitches::default()
        );
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(Live::new(60.0, file).stored_switches(), on, "safe side");
        // a switch that cannot be kept is not taken
        let live = Live::new(60.0, dir.path().join("missing-dir/operator.json"));
        assert!(live.store_switches(on).is_err());
        assert_eq!(live.stored_switches(), StoredSwitches::default());
    }
}
