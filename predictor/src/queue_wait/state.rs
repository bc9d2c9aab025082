//! The cluster's queue as a state fed by events (`submit`, `start`, `end`): queued and
//! running jobs, capacity, the waits of started jobs (also per partition), per-user counts
//! and recent submissions. What it derives from them lives beside it: the forward
//! simulation (`simulate.rs`) and the queue features (`features.rs`).

use std::collections::{BTreeMap, VecDeque};

use augur_datasets::JobRecord;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Errors of the queue state's event API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    /// A job id submitted twice while still queued or running.
    #[error("job {0} is already queued or running")]
    Duplicate(u64),
    /// A start for a job that is not queued.
    #[error("job {0} started but is not queued")]
    NotQueued(u64),
    /// An end for a job that is neither queued nor running.
    #[error("job {0} ended but is neither queued nor running")]
    Unknown(u64),
    /// A feature buffer of the wrong length.
    #[error("queue feature buffer has {got} slots, needs {want}")]
    BufferSize { got: usize, want: usize },
}

/// Which resource a trace's jobs are sized and the cluster's capacity counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    Nodes,
    Gpus,
    Cpus,
    /// Every job counts 1 (traces without sizes).
    Jobs,
}

impl ResourceKind {
    /// The first of nodes, GPUs, CPUs that at least half of `jobs` give, else jobs.
    pub fn for_jobs(jobs: &[JobRecord]) -> ResourceKind {
        let n = jobs.len().max(1);
        let share = |f: fn(&JobRecord) -> Option<f64>| {
            jobs.iter()
                .filter(|j| f(j).is_some_and(|v| v > 0.0))
                .count()
                * 2
                >= n
        };
        if share(|j| j.num_nodes) {
            ResourceKind::Nodes
        } else if share(|j| j.num_gpus) {
            ResourceKind::Gpus
        } else if share(|j| j.cpus) {
            ResourceKind::Cpus
        } else {
            ResourceKind::Jobs
        }
    }

    /// How much of the resource `job` asks for (0 when the trace does not say).
    pub fn amount(self, job: &JobRecord) -> f64 {
        let v = match self {
            ResourceKind::Nodes => job.num_nodes,
            ResourceKind::Gpus => job.num_gpus,
            ResourceKind::Cpus => job.cpus,
            ResourceKind::Jobs => Some(1.0),
        };
        v.filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0)
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Nodes => "nodes",
            ResourceKind::Gpus => "gpus",
            ResourceKind::Cpus => "cpus",
            ResourceKind::Jobs => "jobs",
        }
    }
}

/// What the queue state knows about a job from its submission on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueJob {
    /// Submit time, seconds.
    pub submit: f64,
    /// Resource asked for ([`ResourceKind`]).
    pub resource: f64,
    /// Requested wall time limit, seconds.
    pub requested: Option<f64>,
    /// Run time predicted at submit (the runtime predictor), seconds.
    pub predicted_runtime: f64,
    /// Hashed user (else group) key.
    pub user: Option<u64>,
    /// Hashed partition (the trace's queue) key, when the trace names one.
    #[serde(default)]
    pub partition: Option<u64>,
    /// CPUs and GPUs asked for (0 when the trace does not say), whatever the resource.
    #[serde(default)]
    pub cpus: f64,
    #[serde(default)]
    pub gpus: f64,
}

impl QueueJob {
    /// The queue view of a trace job, with its predicted run time.
    pub fn from_record(job: &JobRecord, resource: ResourceKind, predicted_runtime: f64) -> Self {
        QueueJob {
            submit: job.submit_time,
            resource: resource.amount(job),
            requested: job.requested_time.filter(|r| r.is_finite() && *r > 0.0),
            predicted_runtime: if predicted_runtime.is_finite() {
                predicted_runtime.max(1.0)
            } else {
                job.requested_time.unwrap_or(3600.0).max(1.0)
            },
            user: job.user.as_deref().or(job.group.as_deref()).map(text_key),
            partition: job.queue.as_deref().map(text_key),
            cpus: amount(job.cpus),
            gpus: amount(job.num_gpus),
        }
    }

    /// Run time the forward simulation assumes under `mode`.
    pub(super) fn runtime(&self, mode: SimRuntime) -> f64 {
        match (mode, self.requested) {
            (SimRuntime::Requested, Some(r)) => r,
            (_, Some(r)) => self.predicted_runtime.min(r),
            (_, None) => self.predicted_runtime,
        }
    }
}

/// A request field's amount: 0 when absent, negative or not finite.
fn amount(v: Option<f64>) -> f64 {
    v.filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0)
}

/// FNV-1a of a name (user, group, partition): a stable key.
fn text_key(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Which run times the forward simulation uses for queued and running jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimRuntime {
    /// The runtime predictor's estimates (capped by the requested time).
    Predicted,
    /// The requested wall time (what a backfilling scheduler plans with).
    Requested,
}

/// Queue-state features, in order (appended after the history features).
pub const QUEUE_FEATURES: [&str; 50] = [
    "own_pred_runtime",
    "own_res_share",
    "q_jobs",
    "q_res",
    "q_res_s_req",
    "q_res_s_pred",
    "q_jobs_ge",
    "q_age_max",
    "q_age_median",
    "r_jobs",
    "busy",
    "free",
    "fits_now",
    "r_res_s_pred",
    "r_res_s_req",
    "backlog_pred_s",
    "backlog_req_s",
    "shadow_pred",
    "shadow_req",
    "sim_pred",
    "sim_req",
    "wait_last1",
    "wait_median10",
    "wait_median50",
    "wait_max10",
    "wait_last_same_size",
    "since_last_start",
    "starts_1h",
    "user_queued",
    "user_running",
    "user_last_wait",
    "user_q_res",
    "q_age_ge_max",
    "similar_started_share_24h",
    "similar_queued",
    "similar_queued_age_max",
    "size_started_share_24h",
    "user_q_age_max",
    "q_gpus",
    "q_cpu_s_req",
    "r_cpus",
    "r_gpus",
    "part_q_jobs",
    "part_q_gpus",
    "part_q_cpu_s_req",
    "part_q_age_max",
    "part_r_jobs",
    "part_r_cpus",
    "part_r_gpus",
    "part_wait_median10",
];

/// Index of the forward-simulated wait (predicted run times) in [`QUEUE_FEATURES`].
pub const SIM_PRED_FEATURE: usize = 19;
/// Index of the median wait of the last 10 started jobs in [`QUEUE_FEATURES`].
pub const RECENT_WAIT_FEATURE: usize = 22;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Running {
    pub(super) job: QueueJob,
    pub(super) start: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Started {
    pub(super) at: f64,
    pub(super) wait: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct UserStat {
    pub(super) queued: u32,
    pub(super) running: u32,
    pub(super) queued_res: f64,
    pub(super) last_wait: Option<f64>,
}

/// How many started-job waits the state keeps.
pub(super) const KEEP_WAITS: usize = 64;

/// The cluster's queue at an instant, fed by events in time order. See the
/// [module docs](super).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueState {
    pub(super) capacity: f64,
    pub(super) next_seq: u64,
    /// Queued jobs in submit order: seq → (id, job).
    pub(super) queued: BTreeMap<u64, (u64, QueueJob)>,
    /// Queued jobs' seq by id. This and the other hash maps are read on every event and
    /// never iterated into a number, so they use FxHash (fast, not DoS-hardened): their keys
    /// are job numbers the replay and the online state give out, hashed names and sizes.
    pub(super) queued_seq: FxHashMap<u64, u64>,
    /// Running jobs by id (ordered, so sums and ties are deterministic).
    pub(super) running: BTreeMap<u64, Running>,
    pub(super) busy: f64,
    pub(super) recent: VecDeque<Started>,
    /// Last wait per size class (⌊log2 resource⌉).
    pub(super) last_by_size: FxHashMap<i32, f64>,
    pub(super) users: FxHashMap<u64, UserStat>,
    /// Submissions of the last day or so, in submit order.
    pub(super) submits: VecDeque<Submitted>,
    /// The last [`KEEP_PARTITION_WAITS`] waits of each partition's started jobs.
    #[serde(default)]
    pub(super) partition_waits: FxHashMap<u64, VecDeque<f64>>,
    /// Starts and ends applied (how a kept simulation knows the running jobs are the same).
    #[serde(skip)]
    pub(super) changes: u64,
}

/// How many started-job waits the state keeps per partition.
pub(super) const KEEP_PARTITION_WAITS: usize = 10;

/// Submissions the state remembers for the "similar jobs" features (a little over a day).
pub(super) const DAY: f64 = 86_400.0;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Submitted {
    pub(super) submit: f64,
    pub(super) id: u64,
    pub(super) res_class: i32,
    pub(super) req_class: i32,
}

pub(super) fn req_class(requested: Option<f64>) -> i32 {
    requested.map_or(i32::MIN, |r| size_class(r / 60.0))
}

pub(super) fn size_class(resource: f64) -> i32 {
    if resource > 0.0 {
        resource.log2().round() as i32
    } else {
        i32::MIN
    }
}

impl QueueState {
    /// An empty cluster of `capacity` resource units.
    pub fn new(capacity: f64) -> QueueState {
        QueueState {
            capacity: if capacity.is_finite() && capacity > 0.0 {
                capacity
            } else {
                1.0
            },
            next_seq: 0,
            queued: BTreeMap::new(),
            queued_seq: FxHashMap::default(),
            running: BTreeMap::new(),
            busy: 0.0,
            recent: VecDeque::with_capacity(KEEP_WAITS),
            last_by_size: FxHashMap::default(),
            users: FxHashMap::default(),
            submits: VecDeque::new(),
            partition_waits: FxHashMap::default(),
            changes: 0,
        }
    }

    /// The capacity it was built with.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// Number of queued jobs.
    pub fn queued_jobs(&self) -> usize {
        self.queued.len()
    }

    /// Number of running jobs.
    pub fn running_jobs(&self) -> usize {
        self.running.len()
    }

    /// Resource in use by running jobs.
    pub fn busy(&self) -> f64 {
        self.busy
    }

    /// Job `id` was submitted (at `job.submit`) and is queued.
    pub fn submit(&mut self, id: u64, job: QueueJob) -> Result<(), QueueError> {
        if self.queued_seq.contains_key(&id) || self.running.contains_key(&id) {
            return Err(QueueError::Duplicate(id));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queued.insert(seq, (id, job));
        self.queued_seq.insert(id, seq);
        while self
            .submits
            .front()
            .is_some_and(|r| job.submit - r.submit > 2.0 * DAY)
        {
            self.submits.pop_front();
        }
        self.submits.push_back(Submitted {
            submit: job.submit,
            id,
            res_class: size_class(job.resource),
            req_class: req_class(job.requested),
        });
        if let Some(u) = job.user {
            let s = self.users.entry(u).or_default();
            s.queued += 1;
            s.queued_res += job.resource;
        }
        Ok(())
    }

    /// Queued job `id` started at `at`: its wait becomes known.
    pub fn start(&mut self, id: u64, at: f64) -> Result<(), QueueError> {
        self.changes += 1;
        let seq = self
            .queued_seq
            .remove(&id)
            .ok_or(QueueError::NotQueued(id))?;
        let (_, job) = self.queued.remove(&seq).ok_or(QueueError::NotQueued(id))?;
        let wait = (at - job.submit).max(0.0);
        if let Some(u) = job.user {
            let s = self.users.entry(u).or_default();
            s.queued = s.queued.saturating_sub(1);
            s.queued_res = (s.queued_res - job.resource).max(0.0);
            s.running += 1;
            s.last_wait = Some(wait);
        }
        if self.recent.len() == KEEP_WAITS {
            self.recent.pop_front();
        }
        self.recent.push_back(Started { at, wait });
        self.last_by_size.insert(size_class(job.resource), wait);
        if let Some(p) = job.partition {
            let w = self.partition_waits.entry(p).or_default();
            if w.len() == KEEP_PARTITION_WAITS {
                w.pop_front();
            }
            w.push_back(wait);
        }
        self.busy += job.resource;
        self.running.insert(id, Running { job, start: at });
        Ok(())
    }

    /// Job `id` ended at `at`: a running job finished, or a queued job was withdrawn.
    pub fn end(&mut self, id: u64, _at: f64) -> Result<(), QueueError> {
        self.changes += 1;
        if let Some(r) = self.running.remove(&id) {
            self.busy = (self.busy - r.job.resource).max(0.0);
            if self.running.is_empty() {
                self.busy = 0.0;
            }
            if let Some(u) = r.job.user {
                if let Some(s) = self.users.get_mut(&u) {
                    s.running = s.running.saturating_sub(1);
                }
            }
            return Ok(());
        }
        let seq = self.queued_seq.remove(&id).ok_or(QueueError::Unknown(id))?;
        if let Some((_, job)) = self.queued.remove(&seq) {
            if let Some(u) = job.user {
                if let Some(s) = self.users.get_mut(&u) {
                    s.queued = s.queued.saturating_sub(1);
                    s.queued_res = (s.queued_res - job.resource).max(0.0);
                }
            }
        }
        Ok(())
    }

    /// This queue as a job submitted at `cut` saw it: without the queued jobs submitted at
    /// `cut` or later, nor queued job `own` (the job asked about). `None` when that is this
    /// queue as it is. A copy, so it costs the queue's size; only for such reads.
    pub fn before(&self, cut: f64, own: Option<u64>) -> Option<QueueState> {
        let leave: Vec<u64> = self
            .queued
            .values()
            .filter(|(id, job)| job.submit >= cut || Some(*id) == own)
            .map(|(id, _)| *id)
            .collect();
        if leave.is_empty() {
            return None;
        }
        let mut s = self.clone();
        for id in &leave {
            let Some(seq) = s.queued_seq.remove(id) else {
                continue;
            };
            if let Some((_, job)) = s.queued.remove(&seq) {
                if let Some(u) = job.user {
                    if let Some(st) = s.users.get_mut(&u) {
                        st.queued = st.queued.saturating_sub(1);
                        st.queued_res = (st.queued_res - job.resource).max(0.0);
                    }
                }
            }
        }
        s.submits.retain(|r| !leave.contains(&r.id));
        Some(s)
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &QueueEvent) -> Result<(), QueueError> {
        match *event {
            QueueEvent::Submit { id, job } => self.submit(id, job),
            QueueEvent::Start { id, at } => self.start(id, at),
            QueueEvent::End { id, at } => self.end(id, at),
        }
    }
}

/// One event of the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueEvent {
    Submit { id: u64, job: QueueJob },
    Start { id: u64, at: f64 },
    End { id: u64, at: f64 },
}

impl QueueEvent {
    /// When it happened.
    pub fn at(&self) -> f64 {
        match *self {
            QueueEvent::Submit { job, .. } => job.submit,
            QueueEvent::Start { at, .. } | QueueEvent::End { at, .. } => at,
        }
    }
}
