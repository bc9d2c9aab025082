//! The controller loop as a long-running service: a [`Controller`] driving any
//! [`LiveBackend`] tick by tick, with a pause switch, a dry-run switch (decide and log, do not
//! act), and bounded histories of its decisions (each with its reason) and of the cluster.
//!
//! [`LiveSim`] is the simulator as a live backend: it replays a job table at an accelerated
//! wall clock (`speed` seconds of trace per wall second), reports the jobs' lifecycle
//! ([`JobEvent`]s) so a service can ingest them, and starts the replay again when the trace
//! is exhausted (shifted to after the last lap, so time keeps moving forward). The Kubernetes
//! backend ([`crate::kubernetes::KubeBackend`]) implements [`LiveBackend`] too: its clock is
//! wall time, its [`LiveBackend::tick`] reports whether the watches saw a change (or a resync
//! period passed), its own scheduler runs while Augur is paused, and it may act only while it
//! holds the leader lease ([`LiveBackend::may_act`]).
//!
//! The loop is runtime-agnostic (one `async fn step` per tick); the service runs it on a tokio
//! interval. Everything is deterministic given the seed and the sequence of tick lengths.
//!
//! ```
//! use std::time::Duration;
//! use augur_autoscaler::live::{LiveConfig, LiveLoop, LiveSim};
//! use augur_autoscaler::sim::{ClusterSpec, SimConfig, SimJob};
//! use augur_autoscaler::Fifo;
//! let jobs = vec![
//!     SimJob { row: 0, submit: 0.0, duration: 100.0, gpus: 2, predicted: None },
//!     SimJob { row: 1, submit: 10.0, duration: 50.0, gpus: 2, predicted: None },
//! ];
//! let cfg = SimConfig::new(ClusterSpec::homogeneous(2, 2, 1)?);
//! let sim = LiveSim::new(jobs, cfg, 60.0)?; // one wall second = one trace minute
//! let mut live = LiveLoop::new(sim, Fifo::default(), LiveConfig::default());
//! for _ in 0..4 {
//!     let step = augur_autoscaler::live::block_on(live.step(Duration::from_secs(1)));
//!     assert!(step.error.is_none());
//! }
//! assert_eq!(live.backend().finished_total(), 2);
//! assert_eq!(live.decisions().count(), 2); // two admits, each with its reason
//! # Ok::<(), augur_autoscaler::SimError>(())
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use crate::backend::{
    Action, ClusterBackend, ClusterSnapshot, Decision, DecisionRecord, JobId, Reason,
};
use crate::controller::Controller;
use crate::error::{BackendError, SimError};
use crate::policies::fifo::Fifo;
use crate::policies::policy::Policy;
use crate::sim::{SimConfig, SimJob, Simulator};

/// A cluster the live loop can drive: a [`ClusterBackend`] plus how its clock moves and what
/// happens while Augur does not act.
pub trait LiveBackend: ClusterBackend {
    /// Lets `wall` of wall-clock time pass. The simulator advances `speed × wall` of trace
    /// time; a real cluster does nothing (its clock moves on its own). Returns true when
    /// something happened that a policy should look at (a real cluster: always true).
    fn tick(&mut self, wall: Duration) -> bool;

    /// Runs the cluster's own scheduler for one decision while Augur's controller does not act
    /// (paused or dry-run), so the cluster keeps working; returns the actions it took. The
    /// default does nothing: on Kubernetes the default scheduler runs anyway.
    fn unmanaged_step(&mut self) -> usize {
        0
    }

    /// Appends the job lifecycle events since the last call (default: none).
    fn drain_events(&mut self, _out: &mut Vec<JobEvent>) {}

    /// False while this backend must not act (Kubernetes: another replica holds the leader
    /// lease): the loop then neither decides nor acts, and keeps observing. Default: true.
    fn may_act(&self) -> bool {
        true
    }
}

/// What happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JobEventKind {
    /// It entered the queue for the first time.
    Submitted,
    /// It got GPUs for the first time.
    Started { workers: u32 },
    /// It finished; `run_s` is the time from its first start to its end (rescale pauses and
    /// preemptions included).
    Finished { run_s: f64 },
}

/// A job's lifecycle event at a cluster time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JobEvent {
    /// Cluster time (trace seconds in the simulator).
    pub time: f64,
    pub job: JobId,
    /// Row of the replayed job table (the simulator's [`SimJob::row`]).
    pub row: Option<usize>,
    /// Replay lap (0 for the first pass over the trace).
    pub lap: u32,
    #[serde(flatten)]
    pub kind: JobEventKind,
}

/// The simulator replaying a trace at an accelerated wall clock.
#[derive(Debug)]
pub struct LiveSim {
    jobs: Vec<SimJob>,
    cfg: SimConfig,
    sim: Simulator,
    /// Trace seconds per wall second.
    speed: f64,
    /// First submit of the trace.
    first_submit: f64,
    lap: u32,
    finished_before: usize,
    fifo: Fifo,
    /// Per job of the current lap: 0 unseen, 1 queued, 2 started, 3 finished.
    state: Vec<u8>,
    /// Jobs seen and not finished.
    active: Vec<u32>,
    seen_mark: Vec<u32>,
    mark: u32,
    events: Vec<JobEvent>,
    first_start: Vec<f64>,
    /// Runtime predictions given while replaying ([`LiveSim::set_predicted_runtime`]); they
    /// replace the jobs' own in what the policy sees.
    predicted: Vec<Option<f64>>,
}

impl LiveSim {
    /// A live replay of `jobs` under `cfg` at `speed` trace seconds per wall second. The
    /// simulator's own decision log is turned off (the loop keeps a bounded one).
    pub fn new(jobs: Vec<SimJob>, mut cfg: SimConfig, speed: f64) -> Result<LiveSim, SimError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(SimError::Config(format!(
                "live speed must be a positive number of trace seconds per wall second, not {speed}"
            )));
        }
        cfg.max_logged_decisions = 0;
        let sim = Simulator::new(jobs.clone(), cfg.clone())?;
        let first = jobs.iter().map(|j| j.submit).fold(f64::INFINITY, f64::min);
        let n = sim.len();
        Ok(LiveSim {
            jobs,
            cfg,
            sim,
            speed,
            first_submit: if first.is_finite() { first } else { 0.0 },
            lap: 0,
            finished_before: 0,
            fifo: Fifo::default(),
            state: vec![0; n],
            active: Vec::new(),
            seen_mark: vec![0; n],
            mark: 0,
            events: Vec::new(),
            first_start: vec![f64::NAN; n],
            predicted: vec![None; n],
        })
    }

    /// Trace seconds per wall second.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Changes the speed (ignored unless positive and finite).
    pub fn set_speed(&mut self, speed: f64) {
        if speed.is_finite() && speed > 0.0 {
            self.speed = speed;
        }
    }

    /// The simulator of the current lap.
    pub fn simulator(&self) -> &Simulator {
        &self.sim
    }

    /// Replay laps completed.
    pub fn lap(&self) -> u32 {
        self.lap
    }

    /// Jobs finished over every lap.
    pub fn finished_total(&self) -> usize {
        self.finished_before + self.sim.finished()
    }

    /// The replayed job behind an id in the current lap (its `submit` is the trace's, not
    /// shifted by the lap).
    pub fn job(&self, id: JobId) -> Option<&SimJob> {
        self.sim.job(id)
    }

    /// Gives job `id` (of the current lap) a runtime prediction made while replaying (by the
    /// service's online predictor when the job was submitted); the policy sees it instead of
    /// the job's own. Ignored for an unknown id or a non-finite value.
    pub fn set_predicted_runtime(&mut self, id: JobId, seconds: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            if let Some(p) = self.predicted.get_mut(id.0 as usize) {
                *p = Some(seconds);
            }
        }
    }

    /// The snapshot with the predictions given while replaying.
    fn patched_snapshot(&mut self) -> ClusterSnapshot {
        let mut snap = self.sim.snapshot().clone();
        for r in &mut snap.running {
            if let Some(Some(p)) = self.predicted.get(r.id.0 as usize) {
                r.predicted_runtime = Some(*p);
            }
        }
        for q in &mut snap.queued {
            if let Some(Some(p)) = self.predicted.get(q.id.0 as usize) {
                q.predicted_runtime = Some(*p);
            }
        }
        snap
    }

    /// Starts the next lap: the same jobs, shifted to start a minute after the last lap ended.
    fn next_lap(&mut self) {
        let lap = self.lap + 1;
        let shift = (self.sim.now() + 60.0 - self.first_submit).max(0.0);
        let jobs: Vec<SimJob> = self
            .jobs
            .iter()
            .map(|j| SimJob {
                submit: j.submit + shift,
                ..j.clone()
            })
            .collect();
        let mut cfg = self.cfg.clone();
        for f in &mut cfg.faults {
            f.start += shift;
            f.end += shift;
        }
        // The same jobs and config validated for lap 0; a failure here would be a bug, so
        // keep replaying the current (finished) lap rather than panic.
        if let Ok(sim) = Simulator::new(jobs, cfg) {
            self.finished_before += self.sim.finished();
            self.sim = sim;
            self.lap = lap;
            self.state.iter_mut().for_each(|s| *s = 0);
            self.first_start.iter_mut().for_each(|s| *s = f64::NAN);
            self.predicted.iter_mut().for_each(|s| *s = None);
            self.active.clear();
        }
    }

    /// Compares the snapshot with what was seen before and records lifecycle events.
    fn diff(&mut self) {
        self.mark = self.mark.wrapping_add(1).max(1);
        let mark = self.mark;
        let lap = self.lap;
        let snap = self.sim.snapshot();
        let now = snap.time;
        let mut new_events = Vec::new();
        let mut newly_active = Vec::new();
        for q in &snap.queued {
            let i = q.id.0 as usize;
            if let Some(m) = self.seen_mark.get_mut(i) {
                *m = mark;
            }
            if self.state.get(i) == Some(&0) {
                new_events.push((q.id, JobEventKind::Submitted));
                self.state[i] = 1;
                newly_active.push(i as u32);
            }
        }
        for r in &snap.running {
            let i = r.id.0 as usize;
            if let Some(m) = self.seen_mark.get_mut(i) {
                *m = mark;
            }
            match self.state.get(i) {
                Some(0) => {
                    new_events.push((r.id, JobEventKind::Submitted));
                    new_events.push((r.id, JobEventKind::Started { workers: r.workers }));
                    self.state[i] = 2;
                    self.first_start[i] = r.first_started;
                    newly_active.push(i as u32);
                }
                Some(1) => {
                    new_events.push((r.id, JobEventKind::Started { workers: r.workers }));
                    self.state[i] = 2;
                    self.first_start[i] = r.first_started;
                }
                _ => {}
            }
        }
        let mut still = Vec::with_capacity(self.active.len() + newly_active.len());
        for &i in &self.active {
            let k = i as usize;
            if self.seen_mark.get(k) == Some(&mark) {
                still.push(i);
            } else if let Some(s) = self.state.get_mut(k) {
                *s = 3;
                let started = self.first_start.get(k).copied().unwrap_or(f64::NAN);
                let run_s = if started.is_finite() {
                    (now - started).max(0.0)
                } else {
                    0.0
                };
                new_events.push((JobId(u64::from(i)), JobEventKind::Finished { run_s }));
            }
        }
        still.extend(newly_active);
        self.active = still;
        for (job, kind) in new_events {
            let row = self.sim.job(job).map(|j| j.row);
            // exact times from the simulator (the snapshot is only the tick's end)
            let (started, finished) = self.sim.job_times(job).unwrap_or((None, None));
            let (time, kind) = match kind {
                JobEventKind::Submitted => (self.sim.job(job).map_or(now, |j| j.submit), kind),
                JobEventKind::Started { .. } => (started.unwrap_or(now), kind),
                JobEventKind::Finished { run_s } => {
                    let end = finished.unwrap_or(now);
                    let run_s = started.map_or(run_s, |s| (end - s).max(0.0));
                    (end, JobEventKind::Finished { run_s })
                }
            };
            self.events.push(JobEvent {
                time,
                job,
                row,
                lap,
                kind,
            });
        }
    }
}

impl ClusterBackend for LiveSim {
    fn observe(&mut self) -> impl Future<Output = Result<ClusterSnapshot, BackendError>> + Send {
        std::future::ready(Ok(self.patched_snapshot()))
    }
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::Admit { job, workers }))
    }
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::SetWorkers { job, workers }))
    }
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::Suspend { job }))
    }
}

impl LiveBackend for LiveSim {
    fn tick(&mut self, wall: Duration) -> bool {
        if self.sim.all_done() && !self.sim.is_empty() {
            self.diff();
            self.next_lap();
        }
        let until = self.sim.now() + wall.as_secs_f64() * self.speed;
        self.sim.advance(until)
    }

    fn unmanaged_step(&mut self) -> usize {
        let before = self.sim.snapshot().queued.len();
        self.sim.decide_once(&mut self.fifo);
        before.saturating_sub(self.sim.snapshot().queued.len())
    }

    fn drain_events(&mut self, out: &mut Vec<JobEvent>) {
        self.diff();
        self.events.sort_by(|a, b| a.time.total_cmp(&b.time));
        out.append(&mut self.events);
    }
}

/// Knobs of the live loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LiveConfig {
    /// Decisions kept (oldest dropped first).
    pub decisions_kept: usize,
    /// Cluster history points kept.
    pub history_kept: usize,
    /// Least cluster time between two history points (seconds).
    pub history_every_s: f64,
}

impl Default for LiveConfig {
    fn default() -> LiveConfig {
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: 300.0,
        }
    }
}

/// What became of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    Failed,
    /// Decided in dry-run mode: logged, not carried out.
    DryRun,
}

impl Outcome {
    /// Short stable name (metric label).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Failed => "failed",
            Outcome::DryRun => "dry_run",
        }
    }
}

/// A decision of the live loop with its reason and outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveDecision {
    /// Sequence number (1, 2, ...) over the loop's life.
    pub seq: u64,
    /// Cluster time it was taken at.
    pub time: f64,
    #[serde(flatten)]
    pub decision: Decision,
    pub outcome: Outcome,
    pub error: Option<String>,
}

/// The cluster at one instant, summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClusterPoint {
    /// Cluster time (seconds).
    pub time: f64,
    pub healthy_gpus: u32,
    pub busy_gpus: u32,
    /// Allocated share of the healthy GPUs.
    pub utilisation: f64,
    pub running: u32,
    pub queued: u32,
    /// GPUs the queued jobs ask for.
    pub queued_gpus: u32,
    /// Running jobs at a size other than their request.
    pub rescaled: u32,
}

impl ClusterPoint {
    /// Summarises a snapshot.
    pub fn of(snap: &ClusterSnapshot) -> ClusterPoint {
        let healthy = snap.healthy_gpus();
        ClusterPoint {
            time: snap.time,
            healthy_gpus: healthy,
            busy_gpus: healthy.saturating_sub(snap.free_gpus()),
            utilisation: snap
                .measured_utilisation
                .unwrap_or_else(|| snap.allocation()),
            running: snap.running.len() as u32,
            queued: snap.queued.len() as u32,
            queued_gpus: snap.queued.iter().map(|q| q.requested).sum(),
            rescaled: snap
                .running
                .iter()
                .filter(|r| r.workers != r.requested)
                .count() as u32,
        }
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// The policy was asked.
    pub decided: bool,
    /// Decisions taken (applied, failed or dry-run).
    pub decisions: usize,
    /// Actions the cluster's own scheduler took (paused / dry-run).
    pub unmanaged: usize,
    /// Job lifecycle events since the last tick.
    pub events: Vec<JobEvent>,
    /// The cluster after the tick.
    pub cluster: ClusterPoint,
    /// An error observing the cluster (the tick is retried on the next one).
    pub error: Option<String>,
}

/// Short stable name of a reason (metric label, JSON).
pub fn reason_name(r: &Reason) -> &'static str {
    match r {
        Reason::Fifo => "fifo",
        Reason::ShortestPredicted { .. } => "shortest_predicted",
        Reason::ShortestRemaining { .. } => "shortest_remaining",
        Reason::LeastAttained { .. } => "least_attained",
        Reason::Preempted { .. } => "preempted",
        Reason::MarginalGain { .. } => "marginal_gain",
        Reason::Starving { .. } => "starving",
        Reason::StartShrunk { .. } => "start_shrunk",
        Reason::IdleGpus { .. } => "idle_gpus",
        Reason::Reclaimed { .. } => "reclaimed",
        Reason::QueueWaitHigh { .. } => "queue_wait_high",
    }
}

/// Short stable name of an action.
pub fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Admit { .. } => "admit",
        Action::SetWorkers { .. } => "set_workers",
        Action::Suspend { .. } => "suspend",
    }
}

/// The controller loop over a live backend.
#[derive(Debug)]
pub struct LiveLoop<B, P> {
    backend: B,
    controller: Controller<P>,
    cfg: LiveConfig,
    paused: bool,
    dry_run: bool,
    /// Ask the policy at this cluster time even if nothing changed.
    wake_at: Option<f64>,
    decisions: VecDeque<LiveDecision>,
    history: VecDeque<ClusterPoint>,
    last: ClusterPoint,
    seq: u64,
    by_reason: BTreeMap<(&'static str, &'static str, Outcome), u64>,
    ticks: u64,
    /// The backend reported a change since the policy was last asked.
    changed: bool,
    scratch: Vec<Decision>,
}

impl<B: LiveBackend, P: Policy> LiveLoop<B, P> {
    /// A loop driving `backend` with `policy`, acting (not paused, not dry-run).
    pub fn new(backend: B, policy: P, cfg: LiveConfig) -> LiveLoop<B, P> {
        LiveLoop {
            backend,
            controller: Controller::new(policy),
            cfg,
            paused: false,
            dry_run: false,
            wake_at: None,
            decisions: VecDeque::new(),
            history: VecDeque::new(),
            last: ClusterPoint::default(),
            seq: 0,
            by_reason: BTreeMap::new(),
            ticks: 0,
            changed: false,
            scratch: Vec::new(),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }
    pub fn policy_name(&self) -> &str {
        self.controller.policy.name()
    }
    pub fn paused(&self) -> bool {
        self.paused
    }
    /// Paused: the controller neither decides nor acts (the cluster's own scheduler runs).
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        self.wake_at = None;
    }
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }
    /// Dry-run: the controller decides and logs, and does not act.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.dry_run = dry_run;
        self.wake_at = None;
    }
    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }
    /// Recent decisions, oldest first.
    pub fn decisions(&self) -> impl DoubleEndedIterator<Item = &LiveDecision> + ExactSizeIterator {
        self.decisions.iter()
    }
    /// Recent cluster points, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &ClusterPoint> + ExactSizeIterator {
        self.history.iter()
    }
    /// The cluster after the last tick.
    pub fn cluster(&self) -> ClusterPoint {
        self.last
    }
    /// Decisions ever taken by (action, reason, outcome).
    pub fn decision_counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64> {
        &self.by_reason
    }

    fn keep(&mut self, time: f64, decision: Decision, outcome: Outcome, error: Option<String>) {
        self.seq += 1;
        *self
            .by_reason
            .entry((
                action_name(&decision.action),
                reason_name(&decision.reason),
                outcome,
            ))
            .or_insert(0) += 1;
        if self.cfg.decisions_kept == 0 {
            return;
        }
        while self.decisions.len() >= self.cfg.decisions_kept {
            self.decisions.pop_front();
        }
        self.decisions.push_back(LiveDecision {
            seq: self.seq,
            time,
            decision,
            outcome,
            error,
        });
    }

    fn keep_records(&mut self, records: Vec<DecisionRecord>) {
        for r in records {
            let outcome = if r.error.is_some() {
                Outcome::Failed
            } else {
                Outcome::Applied
            };
            self.keep(r.time, r.decision, outcome, r.error);
        }
    }

    /// First half of a tick: lets `wall` pass on the backend and returns the job events
    /// since the last call (arrivals, completions), so the caller can ingest them and give
    /// the new jobs predictions before the policy looks (see [`LiveLoop::control`]).
    pub fn advance(&mut self, wall: Duration) -> Vec<JobEvent> {
        self.ticks += 1;
        self.changed |= self.backend.tick(wall);
        let mut events = Vec::new();
        self.backend.drain_events(&mut events);
        events
    }

    /// Second half of a tick: asks the policy when something changed (or the wake-up time it
    /// asked for has passed, seen one tick late at most), acts unless paused or dry-run (the
    /// cluster's own scheduler runs then), records the cluster, returns the job events of the
    /// actions (starts). While the backend may not act ([`LiveBackend::may_act`]) nothing is
    /// decided; the pending change is kept for when it may.
    pub async fn control(&mut self) -> StepReport {
        let mut report = StepReport::default();
        let now = self.last.time;
        let due = std::mem::take(&mut self.changed)
            || self.wake_at.is_some_and(|w| w <= now)
            || self.ticks <= 1;
        let may_act = self.backend.may_act();
        if due && !may_act {
            self.changed = true;
        }
        if !self.paused && due && may_act {
            report.decided = true;
            if self.dry_run {
                match self.backend.observe().await {
                    Ok(snap) => {
                        let mut out = std::mem::take(&mut self.scratch);
                        out.clear();
                        self.wake_at = self.controller.policy.decide(&snap, &mut out);
                        report.decisions = out.len();
                        for d in out.drain(..) {
                            self.keep(snap.time, d, Outcome::DryRun, None);
                        }
                        self.scratch = out;
                    }
                    Err(e) => report.error = Some(e.to_string()),
                }
            } else {
                match self.controller.reconcile(&mut self.backend).await {
                    Ok(r) => {
                        self.wake_at = r.wake_at;
                        let log = self.controller.take_log();
                        report.decisions = log.len();
                        self.keep_records(log);
                    }
                    Err(e) => report.error = Some(e.to_string()),
                }
            }
        }
        if self.paused || self.dry_run {
            report.unmanaged = self.backend.unmanaged_step();
        }
        self.backend.drain_events(&mut report.events);
        match self.backend.observe().await {
            Ok(snap) => {
                let p = ClusterPoint::of(&snap);
                self.last = p;
                let due_point = self
                    .history
                    .back()
                    .is_none_or(|b| p.time >= b.time + self.cfg.history_every_s);
                if due_point && self.cfg.history_kept > 0 {
                    while self.history.len() >= self.cfg.history_kept {
                        self.history.pop_front();
                    }
                    self.history.push_back(p);
                }
            }
            Err(e) => {
                report.error.get_or_insert_with(|| e.to_string());
            }
        }
        report.cluster = self.last;
        report
    }

    /// One whole tick ([`LiveLoop::advance`] then [`LiveLoop::control`]); the report holds
    /// the events of both halves.
    pub async fn step(&mut self, wall: Duration) -> StepReport {
        let mut events = self.advance(wall);
        let mut report = self.control().await;
        events.append(&mut report.events);
        report.events = events;
        report
    }
}

/// Runs a future whose backend calls are ready at once (the simulator) to completion on the
/// current thread. For tests, examples and offline use; the service awaits `step` on tokio.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::elastic::{ElasticController, ElasticParams};
    use crate::scaling::ScalingModel;
    use crate::sim::ClusterSpec;

    /// A labelled synthetic workload (not a trace): bursts of 4- and 8-GPU jobs, deterministic.
    fn synthetic_jobs(n: usize) -> Vec<SimJob> {
        (0..n)
            .map(|k| SimJob {
                row: k,
                submit: (k as f64) * 120.0 + if k % 7 == 0 { 0.0 } else { 30.0 },
                duration: 600.0 + ((k * 37) % 11) as f64 * 400.0,
                gpus: if k % 3 == 0 { 8 } else { 4 },
                predicted: Some(600.0 + ((k * 37) % 11) as f64 * 350.0),
            })
            .collect()
    }

    fn live(speed: f64) -> LiveLoop<LiveSim, ElasticController> {
        let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
        cfg.seed = 7;
        cfg.elastic.share = 0.5;
        let sim = LiveSim::new(synthetic_jobs(200), cfg, speed).expect("sim");
        let policy = ElasticController::new(ElasticParams::default(), ScalingModel::default());
        LiveLoop::new(
            sim,
            policy,
            LiveConfig {
                decisions_kept: 50,
                history_kept: 20,
                history_every_s: 60.0,
            },
        )
    }

    fn run(l: &mut LiveLoop<LiveSim, ElasticController>, ticks: usize) -> Vec<JobEvent> {
        let mut events = Vec::new();
        for _ in 0..ticks {
            let r = block_on(l.step(Duration::from_millis(100)));
            assert!(r.error.is_none(), "{:?}", r.error);
            events.extend(r.events);
        }
        events
    }

    #[test]
    fn progresses_at_the_given_speed() {
        let mut l = live(600.0);
        let t0 = l.backend().simulator().now();
        run(&mut l, 50);
        // 50 ticks of 0.1 s at 600× = 3000 trace seconds.
        let dt = l.backend().simulator().now() - t0;
        assert!((dt - 3000.0).abs() < 1e-6, "advanced {dt}");
        assert!(l.backend().finished_total() > 0);
        assert!(l.decisions().count() > 0);
        assert!(l.decisions().all(|d| d.outcome != Outcome::DryRun));
        // bounded histories
        assert!(l.decisions().count() <= 50 && l.history().count() <= 20);
        let h: Vec<f64> = l.history().map(|p| p.time).collect();
        assert!(h.windows(2).all(|w| w[1] >= w[0] + 60.0));
    }

    #[test]
    fn events_follow_each_job_lifecycle() {
        let mut l = live(2000.0);
        let events = run(&mut l, 200);
        let mut state = std::collections::HashMap::new();
        let mut times = std::collections::HashMap::new();
        for e in &events {
            let t: &mut Vec<f64> = times.entry(e.job).or_default();
            t.push(e.time);
            if let JobEventKind::Finished { run_s } = e.kind {
                // exact simulator times: run time = finish − first start
                assert!((e.time - t[1] - run_s).abs() < 1e-6, "{e:?} {t:?}");
            }
            assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
            let s = state.entry(e.job).or_insert(0u8);
            let next = match e.kind {
                JobEventKind::Submitted => 1,
                JobEventKind::Started { workers } => {
                    assert!(workers > 0);
                    2
                }
                JobEventKind::Finished { run_s } => {
                    assert!(run_s > 0.0);
                    3
                }
            };
            assert_eq!(next, *s + 1, "job {:?} went {} -> {next}", e.job, *s);
            *s = next;
        }
        let finished = state.values().filter(|&&s| s == 3).count();
        assert_eq!(finished, l.backend().finished_total());
        assert!(finished > 10);
    }

    #[test]
    fn deterministic() {
        let (mut a, mut b) = (live(900.0), live(900.0));
        let ea = run(&mut a, 80);
        let eb = run(&mut b, 80);
        assert_eq!(ea, eb);
        let da: Vec<_> = a.decisions().cloned().collect();
        let db: Vec<_> = b.decisions().cloned().collect();
        assert_eq!(da, db);
    }

    #[test]
    fn paused_takes_no_decision_but_the_cluster_keeps_working() {
        let mut l = live(600.0);
        run(&mut l, 10);
        let seq = l.decisions().last().map(|d| d.seq);
        let done = l.backend().finished_total();
        l.set_paused(true);
        run(&mut l, 60);
        assert_eq!(l.decisions().last().map(|d| d.seq), seq);
        assert!(
            l.backend().finished_total() > done,
            "FIFO kept the cluster working"
        );
        l.set_paused(false);
        run(&mut l, 20);
        assert!(l.decisions().last().map(|d| d.seq) > seq);
    }

    #[test]
    fn dry_run_decides_and_does_not_act() {
        // Acting: the elastic controller rescales some job at some point.
        let mut acting = live(600.0);
        let mut rescaled = false;
        for _ in 0..150 {
            block_on(acting.step(Duration::from_millis(100)));
            rescaled |= acting.cluster().rescaled > 0;
        }
        assert!(
            rescaled,
            "the acting controller never rescaled: test setup too easy"
        );
        // Dry-run on the same replay: decisions logged, never applied, nobody rescaled.
        let mut dry = live(600.0);
        dry.set_dry_run(true);
        for _ in 0..150 {
            block_on(dry.step(Duration::from_millis(100)));
            assert_eq!(dry.cluster().rescaled, 0);
        }
        assert!(dry.decisions().count() > 0);
        assert!(dry.decisions().all(|d| d.outcome == Outcome::DryRun));
    }

    #[test]
    fn replays_again_after_the_trace_ends() {
        let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
        cfg.seed = 1;
        let sim = LiveSim::new(synthetic_jobs(20), cfg, 5000.0).expect("sim");
        let mut l = LiveLoop::new(sim, Fifo::default(), LiveConfig::default());
        let mut last_t = f64::NEG_INFINITY;
        for _ in 0..200 {
            block_on(l.step(Duration::from_millis(100)));
            let t = l.cluster().time;
            assert!(t >= last_t, "time went back {last_t} -> {t}");
            last_t = t;
        }
        assert!(l.backend().lap() >= 1);
        assert!(l.backend().finished_total() > 20);
    }

    #[test]
    fn predictions_given_while_replaying_reach_the_policy() {
        let mut l = live(600.0);
        let events = l.advance(Duration::from_secs(1));
        let submitted: Vec<JobId> = events
            .iter()
            .filter(|e| e.kind == JobEventKind::Submitted)
            .map(|e| e.job)
            .collect();
        assert!(!submitted.is_empty());
        for (k, id) in submitted.iter().enumerate() {
            l.backend_mut()
                .set_predicted_runtime(*id, 1000.0 + k as f64);
        }
        l.backend_mut()
            .set_predicted_runtime(submitted[0], f64::NAN); // ignored
        let snap = block_on(l.backend_mut().observe()).expect("observe");
        for (k, id) in submitted.iter().enumerate() {
            let p = snap
                .queued
                .iter()
                .find(|q| q.id == *id)
                .map(|q| q.predicted_runtime)
                .or_else(|| {
                    snap.running
                        .iter()
                        .find(|r| r.id == *id)
                        .map(|r| r.predicted_runtime)
                });
            assert_eq!(p, Some(Some(1000.0 + k as f64)));
        }
    }

    /// The simulator behind a closed leader gate.
    struct Follower(LiveSim, bool);

    impl ClusterBackend for Follower {
        fn observe(
            &mut self,
        ) -> impl Future<Output = Result<ClusterSnapshot, BackendError>> + Send {
            self.0.observe()
        }
        fn admit(
            &mut self,
            job: JobId,
            workers: u32,
        ) -> impl Future<Output = Result<(), BackendError>> + Send {
            self.0.admit(job, workers)
        }
        fn set_workers(
            &mut self,
            job: JobId,
            workers: u32,
        ) -> impl Future<Output = Result<(), BackendError>> + Send {
            self.0.set_workers(job, workers)
        }
        fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
            self.0.suspend(job)
        }
    }

    impl LiveBackend for Follower {
        fn tick(&mut self, wall: Duration) -> bool {
            self.0.tick(wall)
        }
        fn may_act(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_backend_that_may_not_act_gets_no_decision_until_it_may() {
        let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
        cfg.seed = 3;
        let sim = LiveSim::new(synthetic_jobs(50), cfg, 600.0).expect("sim");
        let mut l = LiveLoop::new(Follower(sim, false), Fifo::default(), LiveConfig::default());
        for _ in 0..30 {
            let r = block_on(l.step(Duration::from_millis(100)));
            assert!(!r.decided && r.error.is_none(), "{r:?}");
        }
        assert_eq!(l.decisions().count(), 0);
        assert!(
            l.cluster().queued > 0,
            "jobs arrived and wait: {:?}",
            l.cluster()
        );
        // the gate opens: the change seen while closed is decided at the next tick
        l.backend_mut().1 = true;
        let r = block_on(l.control());
        assert!(r.decided && r.decisions > 0, "{r:?}");
        assert!(l.decisions().all(|d| d.outcome == Outcome::Applied));
    }

    #[test]
    fn rejects_a_bad_speed() {
        let cfg = SimConfig::new(ClusterSpec::homogeneous(8, 8, 1).expect("cluster"));
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(LiveSim::new(synthetic_jobs(3), cfg.clone(), s).is_err());
        }
    }
}
