//! The queue-wait predictor: how long a job will wait before it starts, with a calibrated
//! 95% upper bound, from what is known when it is submitted.
//!
//! Three parts:
//!
//! - [`QueueState`]: the cluster at an instant — queued jobs, running jobs, capacity, the
//!   waits of jobs that have started — fed by events (`submit`, `start`, `end`). The same
//!   state serves both paths: [`replay_queue_features`] replays a trace's submit/start/end
//!   times through it, and the online service feeds it ingested events. A job's features
//!   are taken when it is submitted, before its own submit is applied, so its own start,
//!   wait and end can never reach them; at equal times, finishes come first, then submits,
//!   then starts (a job starting at the instant another is submitted still counts as queued
//!   for it). [`QueueState::features`] includes a fast forward simulation of the queue
//!   ([`QueueState::simulate_wait`]: FCFS with EASY backfilling, with predicted or requested
//!   run times) whose simulated wait is one feature among the others.
//! - [`QueueWaitTrainer`] / [`QueueWaitPredictor`]: an L1 gradient-boosted model of
//!   `ln(1 + wait)` (its conditional median, which minimises the MAE in seconds too, since the
//!   median commutes with monotone maps) and a 0.95-quantile model of the same target whose
//!   bound is corrected by split-conformal calibration on the tail of the training period
//!   (conformalised quantile regression), or, when the search on the training period's tail
//!   finds one that holds its levels, by a risk-split conformal bound ([`RiskSplitBound`]:
//!   low-risk jobs get a tight bound at a lower level, high-risk jobs a wide one at a
//!   higher level, 95% overall; online, [`RiskSplitState`] adapts each group's offset to its
//!   own outcomes). Features: the runtime predictor's history features
//!   ([`augur_features::batch_features`]) followed by the [`QUEUE_FEATURES`]. Run times of
//!   queued and running jobs come from a [`RuntimePredictor`] trained on the training
//!   period only.
//! - [`evaluate_queue_wait`]: the shared protocol (time-ordered 80/20 split by submit time) with
//!   baselines: predict zero, the training median, the median wait of the last 10 jobs that
//!   started, and the bare queue simulation.
//!
//! Capacity is inferred from the training period: the 0.99 quantile of the resource in use
//! (nodes, else GPUs, else CPUs) sampled at every training job's submit, and at least the
//! largest single request. Not the maximum: reconstructed traces over-commit (Mira's SWF log
//! shows up to 160k nodes busy on a 49,152-node machine, because run times include
//! boot/teardown and waits are rounded), and a single outlier would set it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{batch_features, FeatureSchema, FeatureState};
use augur_models::gbdt::{GbdtParams, Objective, Validation};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use augur_numeric::sigmoid;
use serde::{Deserialize, Serialize};

use crate::calibration::risk_split::RISK_MIN_GROUP;
pub use crate::calibration::{
    conformal_offset, high_level, AdaptiveBound, RiskGroup, RiskScore, RiskSplitBound,
    RiskSplitState, RiskSplitSummary,
};
use crate::metrics::quantile;
use crate::metrics::regression::bound_metrics;
use crate::{PredictorError, RuntimePredictor, RuntimeTrainer};

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
            user: user_key(job),
        }
    }

    /// Run time the forward simulation assumes under `mode`.
    fn runtime(&self, mode: SimRuntime) -> f64 {
        match (mode, self.requested) {
            (SimRuntime::Requested, Some(r)) => r,
            (_, Some(r)) => self.predicted_runtime.min(r),
            (_, None) => self.predicted_runtime,
        }
    }
}

/// FNV-1a of the user (else group) name: a stable key.
fn user_key(job: &JobRecord) -> Option<u64> {
    let s = job.user.as_deref().or(job.group.as_deref())?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Some(h)
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
pub const QUEUE_FEATURES: [&str; 38] = [
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
];

/// Index of the forward-simulated wait (predicted run times) in [`QUEUE_FEATURES`].
pub const SIM_PRED_FEATURE: usize = 19;
/// Index of the median wait of the last 10 started jobs in [`QUEUE_FEATURES`].
pub const RECENT_WAIT_FEATURE: usize = 22;

#[derive(Debug, Clone, Copy)]
struct Running {
    job: QueueJob,
    start: f64,
}

#[derive(Debug, Clone, Copy)]
struct Started {
    at: f64,
    wait: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct UserStat {
    queued: u32,
    running: u32,
    queued_res: f64,
    last_wait: Option<f64>,
}

/// How many started-job waits the state keeps.
const KEEP_WAITS: usize = 64;
/// Upper limit on simulated events per forward simulation (bounds the worst case).
const MAX_SIM_STEPS: usize = 20_000;
/// Wait reported when the simulation cannot place the job (a week).
const SIM_NEVER: f64 = 7.0 * 86_400.0;

/// The cluster's queue at an instant, fed by events in time order. See the
/// [module docs](self).
#[derive(Debug, Clone)]
pub struct QueueState {
    capacity: f64,
    next_seq: u64,
    /// Queued jobs in submit order: seq → (id, job).
    queued: BTreeMap<u64, (u64, QueueJob)>,
    queued_seq: HashMap<u64, u64>,
    /// Running jobs by id (ordered, so sums and ties are deterministic).
    running: BTreeMap<u64, Running>,
    busy: f64,
    recent: VecDeque<Started>,
    /// Last wait per size class (⌊log2 resource⌉).
    last_by_size: HashMap<i32, f64>,
    users: HashMap<u64, UserStat>,
    /// Submissions of the last day or so, in submit order.
    submits: VecDeque<Submitted>,
}

/// Submissions the state remembers for the "similar jobs" features (a little over a day).
const DAY: f64 = 86_400.0;

#[derive(Debug, Clone, Copy)]
struct Submitted {
    submit: f64,
    id: u64,
    res_class: i32,
    req_class: i32,
}

fn req_class(requested: Option<f64>) -> i32 {
    requested.map_or(i32::MIN, |r| size_class(r / 60.0))
}

fn size_class(resource: f64) -> i32 {
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
            queued_seq: HashMap::new(),
            running: BTreeMap::new(),
            busy: 0.0,
            recent: VecDeque::with_capacity(KEEP_WAITS),
            last_by_size: HashMap::new(),
            users: HashMap::new(),
            submits: VecDeque::new(),
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
        self.busy += job.resource;
        self.running.insert(id, Running { job, start: at });
        Ok(())
    }

    /// Job `id` ended at `at`: a running job finished, or a queued job was withdrawn.
    pub fn end(&mut self, id: u64, _at: f64) -> Result<(), QueueError> {
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

    /// Applies one event.
    pub fn apply(&mut self, event: &QueueEvent) -> Result<(), QueueError> {
        match *event {
            QueueEvent::Submit { id, job } => self.submit(id, job),
            QueueEvent::Start { id, at } => self.start(id, at),
            QueueEvent::End { id, at } => self.end(id, at),
        }
    }

    /// Expected remaining run time at `now` of a running job under `mode`: the predicted
    /// run time minus the time elapsed, or half the elapsed time for a job that has
    /// outlived its prediction (heavy tails), never past its requested limit.
    fn remaining(r: &Running, now: f64, mode: SimRuntime) -> f64 {
        let elapsed = (now - r.start).max(0.0);
        let rem = match (mode, r.job.requested) {
            (SimRuntime::Requested, Some(req)) => req - elapsed,
            _ => {
                let p = r.job.predicted_runtime;
                let rem = if p > elapsed {
                    p - elapsed
                } else {
                    0.5 * elapsed
                };
                match r.job.requested {
                    Some(req) => rem.min(req - elapsed),
                    None => rem,
                }
            }
        };
        rem.max(1.0)
    }

    /// Running jobs' (end time, resource) under `mode`, soonest first.
    fn planned_ends(&self, now: f64, mode: SimRuntime) -> Vec<(f64, f64)> {
        let mut ends: Vec<(f64, f64)> = self
            .running
            .values()
            .map(|r| (now + Self::remaining(r, now, mode), r.job.resource))
            .collect();
        ends.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        ends
    }

    /// Seconds from `now` until `need` resource is free if running jobs end as planned and
    /// nothing else starts.
    fn shadow_wait(&self, need: f64, now: f64, mode: SimRuntime) -> f64 {
        let need = need.min(self.capacity);
        let mut free = self.capacity - self.busy;
        if need <= free {
            return 0.0;
        }
        for (t, res) in self.planned_ends(now, mode) {
            free += res;
            if need <= free {
                return t - now;
            }
        }
        SIM_NEVER
    }

    /// Simulated wait of `job`, submitted at `now` behind the queued jobs: first come first
    /// served with EASY backfilling (the head job gets a reservation at the earliest time
    /// enough resource frees; a later job may start early if it fits now and ends before
    /// that reservation or uses only resource the head will not need). Run times under
    /// `mode`. Requests larger than the capacity are clamped to it.
    pub fn simulate_wait(&self, job: &QueueJob, now: f64, mode: SimRuntime) -> f64 {
        let cap = self.capacity;
        let mut free = cap - self.busy;
        let mut ends = self.planned_ends(now, mode);
        // (resource, run time); the new job last
        let mut queue: Vec<(f64, f64)> = self
            .queued
            .values()
            .map(|(_, j)| (j.resource.min(cap), j.runtime(mode).max(1.0)))
            .collect();
        queue.push((job.resource.min(cap), job.runtime(mode).max(1.0)));
        let ours = queue.len() - 1;
        let mut started = vec![false; queue.len()];
        let mut head = 0usize;
        let mut t = now;
        let insert_end = |ends: &mut Vec<(f64, f64)>, e: (f64, f64)| {
            let pos = ends.partition_point(|x| x.0 <= e.0);
            ends.insert(pos, e);
        };
        for _ in 0..MAX_SIM_STEPS {
            // start jobs in order while the head fits
            while head < queue.len() {
                if started[head] {
                    head += 1;
                    continue;
                }
                let (res, rt) = queue[head];
                if res > free {
                    break;
                }
                if head == ours {
                    return t - now;
                }
                free -= res;
                started[head] = true;
                insert_end(&mut ends, (t + rt, res));
                head += 1;
            }
            if head >= queue.len() {
                return t - now;
            }
            // reservation for the head
            let need = queue[head].0;
            let mut f = free;
            let mut shadow = f64::INFINITY;
            for &(te, res) in &ends {
                if shadow.is_finite() && te > shadow {
                    break;
                }
                f += res;
                if shadow.is_infinite() && need <= f {
                    // everything ending at the same instant frees too
                    shadow = te;
                }
            }
            let mut extra = if shadow.is_finite() { f - need } else { 0.0 };
            // backfill
            for k in head + 1..queue.len() {
                if free <= 0.0 {
                    break;
                }
                if started[k] {
                    continue;
                }
                let (res, rt) = queue[k];
                if res > free {
                    continue;
                }
                let ends_in_time = t + rt <= shadow;
                if ends_in_time || res <= extra {
                    if k == ours {
                        return t - now;
                    }
                    if !ends_in_time {
                        extra -= res;
                    }
                    free -= res;
                    started[k] = true;
                    insert_end(&mut ends, (t + rt, res));
                }
            }
            // advance to the next end
            if ends.is_empty() {
                return SIM_NEVER;
            }
            let next = ends[0].0;
            t = t.max(next);
            let n_done = ends.partition_point(|x| x.0 <= t);
            for (_, res) in ends.drain(..n_done) {
                free += res;
            }
            if t - now > SIM_NEVER {
                return SIM_NEVER;
            }
        }
        SIM_NEVER
    }

    /// Writes the [`QUEUE_FEATURES`] of `job`, about to be submitted at `now`, into `out`.
    /// Only the state is read: `job` itself is not in it yet.
    pub fn features(&self, job: &QueueJob, now: f64, out: &mut [f32]) -> Result<(), QueueError> {
        if out.len() != QUEUE_FEATURES.len() {
            return Err(QueueError::BufferSize {
                got: out.len(),
                want: QUEUE_FEATURES.len(),
            });
        }
        let cap = self.capacity;
        let mut q_res = 0.0;
        let mut q_res_req = 0.0;
        let mut q_res_pred = 0.0;
        let mut q_ge = 0.0;
        let mut q_age_ge_max: f64 = 0.0;
        let mut ages: Vec<f64> = Vec::with_capacity(self.queued.len());
        for (_, j) in self.queued.values() {
            q_res += j.resource;
            q_res_req += j.resource * j.runtime(SimRuntime::Requested);
            q_res_pred += j.resource * j.runtime(SimRuntime::Predicted);
            let age = (now - j.submit).max(0.0);
            if j.resource >= job.resource {
                q_ge += 1.0;
                q_age_ge_max = q_age_ge_max.max(age);
            }
            ages.push(age);
        }
        let q_age_max = ages.iter().copied().fold(0.0, f64::max);
        let q_age_median = if ages.is_empty() {
            0.0
        } else {
            quantile(&ages, 0.5)
        };
        let mut r_pred = 0.0;
        let mut r_req = 0.0;
        for r in self.running.values() {
            r_pred += r.job.resource * Self::remaining(r, now, SimRuntime::Predicted);
            r_req += r.job.resource * Self::remaining(r, now, SimRuntime::Requested);
        }
        let free = cap - self.busy;
        let recent =
            |n: usize| -> Vec<f64> { self.recent.iter().rev().take(n).map(|s| s.wait).collect() };
        let last10 = recent(10);
        let nan = f32::NAN;
        let med = |v: &[f64]| {
            if v.is_empty() {
                nan
            } else {
                quantile(v, 0.5) as f32
            }
        };
        let user = job.user.and_then(|u| self.users.get(&u)).copied();
        let user_q_age_max = match job.user {
            Some(u) => self
                .queued
                .values()
                .filter(|(_, j)| j.user == Some(u))
                .map(|(_, j)| now - j.submit)
                .fold(0.0, f64::max),
            None => 0.0,
        };
        // jobs like this one submitted in the last day: how many have started, how long the
        // others have been waiting (a survival view of current conditions, not lagged)
        let (rc, qc) = (size_class(job.resource), req_class(job.requested));
        let (mut sim_n, mut sim_started, mut size_n, mut size_started) = (0u32, 0u32, 0u32, 0u32);
        let mut sim_age_max: f64 = 0.0;
        for r in self.submits.iter().rev() {
            if now - r.submit > DAY {
                break;
            }
            if r.submit > now || r.res_class != rc {
                continue;
            }
            let waiting = self.queued_seq.contains_key(&r.id);
            size_n += 1;
            size_started += u32::from(!waiting);
            if r.req_class == qc {
                sim_n += 1;
                sim_started += u32::from(!waiting);
                if waiting {
                    sim_age_max = sim_age_max.max(now - r.submit);
                }
            }
        }
        let share = |a: u32, n: u32| if n == 0 { nan } else { a as f32 / n as f32 };
        let similar = (
            share(sim_started, sim_n),
            (sim_n - sim_started) as f32,
            sim_age_max as f32,
        );
        let same_size = share(size_started, size_n);
        let vals: [f32; 38] = [
            job.predicted_runtime as f32,
            (job.resource / cap) as f32,
            self.queued.len() as f32,
            q_res as f32,
            q_res_req as f32,
            q_res_pred as f32,
            q_ge as f32,
            q_age_max as f32,
            q_age_median as f32,
            self.running.len() as f32,
            self.busy as f32,
            free as f32,
            f32::from(u8::from(job.resource <= free)),
            r_pred as f32,
            r_req as f32,
            ((q_res_pred + r_pred) / cap) as f32,
            ((q_res_req + r_req) / cap) as f32,
            self.shadow_wait(job.resource, now, SimRuntime::Predicted) as f32,
            self.shadow_wait(job.resource, now, SimRuntime::Requested) as f32,
            self.simulate_wait(job, now, SimRuntime::Predicted) as f32,
            self.simulate_wait(job, now, SimRuntime::Requested) as f32,
            self.recent.back().map_or(nan, |s| s.wait as f32),
            med(&last10),
            med(&recent(50)),
            last10.iter().copied().fold(f64::NAN, f64::max) as f32,
            self.last_by_size
                .get(&size_class(job.resource))
                .map_or(nan, |w| *w as f32),
            self.recent
                .back()
                .map_or(nan, |s| (now - s.at).max(0.0) as f32),
            self.recent.iter().filter(|s| now - s.at <= 3600.0).count() as f32,
            user.map_or(0.0, |u| u.queued as f32),
            user.map_or(0.0, |u| u.running as f32),
            user.and_then(|u| u.last_wait).map_or(nan, |w| w as f32),
            user.map_or(0.0, |u| u.queued_res as f32),
            q_age_ge_max as f32,
            similar.0,
            similar.1,
            similar.2,
            same_size,
            user_q_age_max as f32,
        ];
        out.copy_from_slice(&vals);
        Ok(())
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

    /// The events of a trace (job `i` has id `i`) in time order: at equal times, ends, then
    /// submits, then starts; a job's own events stay in order (a zero-length run ends after
    /// it starts). A job's start is `start_time` (else submit + `queue_wait`), never before
    /// its submit; its end is `end_time` (else start + `duration`). Jobs with an end but no
    /// start leave the queue unstarted (withdrawn).
    pub fn of_trace(jobs: &[JobRecord], queue_jobs: &[QueueJob]) -> Vec<QueueEvent> {
        let mut ev: Vec<(f64, u8, usize, QueueEvent)> = Vec::with_capacity(jobs.len() * 3);
        for (i, (j, qj)) in jobs.iter().zip(queue_jobs).enumerate() {
            if !j.submit_time.is_finite() {
                continue;
            }
            let id = i as u64;
            let submit = j.submit_time;
            ev.push((submit, 1, i, QueueEvent::Submit { id, job: *qj }));
            let start = j
                .start_time
                .or_else(|| j.queue_wait.map(|w| submit + w))
                .filter(|s| s.is_finite())
                .map(|s| s.max(submit));
            let end = j
                .end_time
                .or_else(|| start.zip(j.duration).map(|(s, d)| s + d))
                .filter(|e| e.is_finite());
            if let Some(s) = start {
                ev.push((s, 2, i, QueueEvent::Start { id, at: s }));
            }
            if let Some(e) = end {
                let floor = start.unwrap_or(submit);
                let e = e.max(floor);
                // an end at the instant of the job's own start/submit goes after it
                let rank = if e > floor { 0 } else { 3 };
                ev.push((e, rank, i, QueueEvent::End { id, at: e }));
            }
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        ev.into_iter().map(|e| e.3).collect()
    }
}

/// Queue features of every job of a trace (row `i` = job `i`, `QUEUE_FEATURES.len()`
/// columns), each taken at its submit from the state the events before it built. Jobs
/// with a non-finite submit time get NaN rows.
pub fn replay_queue_features(
    jobs: &[JobRecord],
    queue_jobs: &[QueueJob],
    capacity: f64,
) -> Result<Vec<f32>, PredictorError> {
    let d = QUEUE_FEATURES.len();
    let mut out = vec![f32::NAN; jobs.len() * d];
    let mut state = QueueState::new(capacity);
    for e in QueueEvent::of_trace(jobs, queue_jobs) {
        if let QueueEvent::Submit { id, job } = e {
            let i = id as usize;
            state.features(&job, job.submit, &mut out[i * d..(i + 1) * d])?;
        }
        state.apply(&e)?;
    }
    Ok(out)
}

/// The capacity of the cluster seen by the jobs `rows` of a trace: the `q`-quantile of the
/// resource in use at their submit times (run intervals of the same jobs), and at least the
/// largest single request. See the [module docs](self) for why not the maximum.
pub fn infer_capacity(jobs: &[JobRecord], rows: &[usize], resource: ResourceKind, q: f64) -> f64 {
    // (time, rank, delta): ends before samples before starts at equal times
    let mut ev: Vec<(f64, u8, f64)> = Vec::with_capacity(rows.len() * 3);
    let mut largest: f64 = 0.0;
    for &i in rows {
        let j = &jobs[i];
        let res = resource.amount(j);
        largest = largest.max(res);
        if j.submit_time.is_finite() {
            ev.push((j.submit_time, 1, 0.0));
        }
        let start = j
            .start_time
            .or_else(|| j.queue_wait.map(|w| j.submit_time + w));
        let end = j
            .end_time
            .or_else(|| start.zip(j.duration).map(|(s, d)| s + d));
        if let (Some(s), Some(e)) = (start, end) {
            if s.is_finite() && e.is_finite() && e > s {
                ev.push((s, 2, res));
                ev.push((e, 0, -res));
            }
        }
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut busy = 0.0;
    let mut samples = Vec::new();
    for (_, rank, delta) in ev {
        if rank == 1 {
            samples.push(busy);
        } else {
            busy += delta;
        }
    }
    let cap = if samples.is_empty() {
        0.0
    } else {
        quantile(&samples, q)
    };
    cap.max(largest).max(1.0)
}

/// A queue-wait prediction, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueWaitPrediction {
    /// Point estimate (conditional median).
    pub seconds: f64,
    /// Upper bound the wait stays under with probability `coverage` (the job's risk
    /// group's level when the bound is risk-split).
    pub upper: f64,
    pub coverage: f64,
    /// The job's risk group when the bound is risk-split ([`RiskSplitBound`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_group: Option<RiskGroup>,
}

/// A trained queue-wait predictor. Its feature rows are the runtime predictor's history
/// features followed by the [`QUEUE_FEATURES`] ([`QueueWaitPredictor::features_for`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueWaitPredictor {
    /// Predicts run times of queued and running jobs (trained on the training period).
    pub runtime: RuntimePredictor,
    pub resource: ResourceKind,
    /// Inferred capacity, in `resource` units.
    pub capacity: f64,
    /// Median model of the wait, on `point_target`'s scale.
    pub point: AnyModel,
    pub point_target: WaitTarget,
    /// 0.95-quantile model of ln(1 + wait).
    pub upper: AnyModel,
    /// Conformal correction added to `upper` (ln(1 + s) space).
    pub upper_offset: f64,
    pub coverage: f64,
    /// Optional short-wait override: a log-odds model of "the wait is within 600 s of
    /// `short.seconds`"; when its probability reaches `short.threshold`, the point estimate
    /// is `short.seconds` (or the median model's, when lower). `short.seconds` is the centre
    /// of the ±600 s window holding the most training waits (600 s when most jobs start at
    /// once: the window then catches every wait up to 1,200 s).
    pub short: Option<ShortWait>,
    /// The risk-split bound that replaces `upper_offset` when present (artifacts saved
    /// before it have none and keep the single conformal offset).
    #[serde(default)]
    pub risk: Option<RiskSplitBound>,
}

/// The short-wait override of a [`QueueWaitPredictor`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShortWait {
    pub model: AnyModel,
    /// The wait predicted for jobs classified short (typical short wait of the fit period).
    pub seconds: f64,
    /// Probability threshold, chosen on the validation slice.
    pub threshold: f64,
}

impl ShortWait {
    fn apply(&self, point_s: f64, log_odds: f64) -> f64 {
        if sigmoid(log_odds) >= self.threshold {
            self.seconds.min(point_s)
        } else {
            point_s
        }
    }
}

impl QueueWaitPredictor {
    /// Number of features in a row.
    pub fn n_features(&self) -> usize {
        self.runtime.schema.len() + QUEUE_FEATURES.len()
    }

    /// Feature names in order.
    pub fn feature_names(&self) -> Vec<String> {
        let mut v = self.runtime.schema.names();
        v.extend(QUEUE_FEATURES.iter().map(|s| format!("queue:{s}")));
        v
    }

    /// An empty queue state sized for this predictor.
    pub fn new_state(&self) -> QueueState {
        QueueState::new(self.capacity)
    }

    /// The online path: writes the feature row of `job`, submitted at `now`, from the history
    /// state and the queue state (neither is changed; submit the returned [`QueueJob`] to
    /// both afterwards), and returns the job's queue view with its predicted run time.
    pub fn features_for(
        &self,
        history: &mut FeatureState,
        queue: &QueueState,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<QueueJob, PredictorError> {
        let h = self.runtime.schema.len();
        if out.len() != self.n_features() {
            return Err(QueueError::BufferSize {
                got: out.len(),
                want: self.n_features(),
            }
            .into());
        }
        let (hist, rest) = out.split_at_mut(h);
        history.features_for(job, now, hist)?;
        let rt = self.runtime.predict_row(hist).seconds;
        let qj = QueueJob::from_record(job, self.resource, rt);
        queue.features(&qj, now, rest)?;
        Ok(qj)
    }

    /// Prediction from a feature row (the risk-split bound with its calibration threshold
    /// and offsets when there is one, else the single conformal offset).
    pub fn predict_row(&self, row: &[f32]) -> QueueWaitPrediction {
        let p = self.point_row(row);
        let raw = self.upper.predict_row(row);
        match &self.risk {
            Some(r) => {
                let g = r.group(self.risk_score_row(r, row, raw));
                let (off, level) = r.of(g);
                with_group(to_prediction(p, raw + off, level), g)
            }
            None => to_prediction(p, raw + self.upper_offset, self.coverage),
        }
    }

    /// The online path's prediction: the risk group by `state`'s current threshold and the
    /// bound by that group's adaptive offset. Returns the risk score too (pass it to
    /// [`RiskSplitState::record_submit`] when the job is really submitted). Without a
    /// risk-split bound it is [`predict_row`](Self::predict_row) and the score is NaN.
    pub fn predict_row_online(
        &self,
        row: &[f32],
        state: &RiskSplitState,
    ) -> (QueueWaitPrediction, f64) {
        let Some(r) = &self.risk else {
            return (self.predict_row(row), f64::NAN);
        };
        let p = self.point_row(row);
        let raw = self.upper.predict_row(row);
        let score = self.risk_score_row(r, row, raw);
        let g = state.group(score);
        let b = state.bound(g);
        (
            with_group(to_prediction(p, raw + b.offset, b.coverage), g),
            score,
        )
    }

    /// The online state of the risk-split bound at deployment (None without one).
    pub fn new_risk_state(&self) -> Option<RiskSplitState> {
        self.risk.as_ref().map(RiskSplitBound::new_state)
    }

    fn point_row(&self, row: &[f32]) -> f64 {
        let mut p = self.point_target.to_seconds(self.point.predict_row(row));
        if let Some(s) = &self.short {
            p = s.apply(p, s.model.predict_row(row));
        }
        p
    }

    fn risk_score_row(&self, r: &RiskSplitBound, row: &[f32], raw: f64) -> f64 {
        match &r.score {
            RiskScore::UpperModel => raw,
            RiskScore::Classifier { model, .. } => model.predict_row(row),
        }
    }

    /// The risk score of each row of `x` (None without a risk-split bound).
    pub fn risk_scores(&self, x: &Matrix) -> Result<Option<Vec<f64>>, PredictorError> {
        let Some(r) = &self.risk else {
            return Ok(None);
        };
        let mut s = vec![0.0; x.rows()];
        match &r.score {
            RiskScore::UpperModel => self.upper.predict_into(x, &mut s)?,
            RiskScore::Classifier { model, .. } => model.predict_into(x, &mut s)?,
        }
        Ok(Some(s))
    }

    /// Predictions for every row of `x`.
    pub fn predict_batch(&self, x: &Matrix) -> Result<Vec<QueueWaitPrediction>, PredictorError> {
        let mut p = vec![0.0; x.rows()];
        let mut u = vec![0.0; x.rows()];
        self.point.predict_into(x, &mut p)?;
        self.upper.predict_into(x, &mut u)?;
        let mut c = vec![0.0; x.rows()];
        if let Some(s) = &self.short {
            s.model.predict_into(x, &mut c)?;
        }
        let scores = self.risk_scores(x)?;
        Ok(p.into_iter()
            .zip(u)
            .zip(c)
            .enumerate()
            .map(|(i, ((p, u), c))| {
                let mut p = self.point_target.to_seconds(p);
                if let Some(s) = &self.short {
                    p = s.apply(p, c);
                }
                match (&self.risk, &scores) {
                    (Some(r), Some(sc)) => {
                        let g = r.group(sc[i]);
                        let (off, level) = r.of(g);
                        with_group(to_prediction(p, u + off, level), g)
                    }
                    _ => to_prediction(p, u + self.upper_offset, self.coverage),
                }
            })
            .collect())
    }

    /// The bound's raw model output (ln(1 + s), before the conformal offset) for each row.
    pub fn upper_raw(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
        let mut u = vec![0.0; x.rows()];
        self.upper.predict_into(x, &mut u)?;
        Ok(u)
    }
}

/// The scale a wait model is fitted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitTarget {
    /// ln(1 + seconds).
    Log1p,
    /// Seconds.
    Seconds,
}

impl WaitTarget {
    fn of_log1p(self, y_log: f64) -> f64 {
        match self {
            WaitTarget::Log1p => y_log,
            WaitTarget::Seconds => y_log.exp_m1(),
        }
    }
    fn to_seconds(self, v: f64) -> f64 {
        match self {
            WaitTarget::Log1p => v.exp_m1(),
            WaitTarget::Seconds => v,
        }
    }
}

fn to_prediction(seconds: f64, u_log: f64, coverage: f64) -> QueueWaitPrediction {
    let seconds = if seconds.is_finite() {
        seconds.max(0.0)
    } else {
        0.0
    };
    QueueWaitPrediction {
        seconds,
        upper: u_log.exp_m1().max(seconds),
        coverage,
        risk_group: None,
    }
}

fn with_group(mut p: QueueWaitPrediction, g: RiskGroup) -> QueueWaitPrediction {
    p.risk_group = Some(g);
    p
}

/// How to train a [`QueueWaitPredictor`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueWaitTrainer {
    /// The median model (objective forced to L1).
    pub point: GbdtParams,
    /// The scale the median model is fitted on (early stopping measures its loss there).
    pub point_target: WaitTarget,
    /// The bound model (objective forced to the `coverage` quantile).
    pub upper: GbdtParams,
    /// Trains the runtime predictor behind the predicted run times.
    pub runtime: RuntimeTrainer,
    /// Share of the training period (after the fit part) for early stopping.
    pub valid_fraction: f64,
    /// Share at the end of the training period that calibrates the bound.
    pub calib_fraction: f64,
    /// Coverage of the upper bound.
    pub coverage: f64,
    /// Quantile of busy resource that sets the capacity.
    pub capacity_quantile: f64,
    /// Train the short-wait override ([`ShortWait`]): its threshold is the probability with
    /// the most validation waits within 600 s among those whose validation MAE stays within
    /// `1 + short_mae_slack` of the median model's alone (None: no override).
    pub short_mae_slack: Option<f64>,
    /// Step of the online adaptive bound ([`AdaptiveBound`]), ln(1 + s) units.
    pub adaptive_step: f64,
    /// Fit the risk-split bound ([`RiskSplitBound`]) when the search on the training
    /// period's tail finds a split that holds its levels there (false: the single conformal
    /// offset only).
    #[serde(default = "default_true")]
    pub risk_split: bool,
}

fn default_true() -> bool {
    true
}

/// Jobs whose scores set the risk split's online threshold.
pub const RISK_WINDOW: usize = 500;
/// Shares of the low-risk group the search tries.
pub const RISK_SHARES: [f64; 5] = [0.5, 0.55, 0.6, 0.65, 0.7];
/// Levels of the low-risk group the search tries (the high group's follows).
pub const RISK_LOW_LEVELS: [f64; 5] = [0.90, 0.91, 0.92, 0.93, 0.94];
/// The risk classifier's label is "wait ≥ this quantile of the fit period's waits".
pub const RISK_CLASSIFIER_QUANTILE: f64 = 0.8;

impl Default for QueueWaitTrainer {
    fn default() -> Self {
        let base = GbdtParams {
            objective: Objective::L1,
            n_trees: 600,
            learning_rate: 0.05,
            num_leaves: 31,
            min_data_in_leaf: 40,
            lambda_l2: 1.0,
            subsample: 0.8,
            colsample: 0.8,
            early_stopping_rounds: 60,
            ..Default::default()
        };
        QueueWaitTrainer {
            upper: GbdtParams {
                objective: Objective::Quantile { alpha: 0.95 },
                ..base.clone()
            },
            point: base,
            point_target: WaitTarget::Seconds,
            runtime: RuntimeTrainer::default(),
            valid_fraction: 0.1,
            calib_fraction: 0.1,
            coverage: 0.95,
            capacity_quantile: 0.99,
            short_mae_slack: Some(0.03),
            adaptive_step: 0.05,
            risk_split: true,
        }
    }
}

impl QueueWaitTrainer {
    /// Caps both models at `n` trees (quicker, weaker).
    pub fn with_trees(mut self, n: usize) -> Self {
        self.point.n_trees = n.max(1);
        self.upper.n_trees = n.max(1);
        self
    }
}

fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * d);
    for &r in rows {
        out.extend_from_slice(&x[r * d..(r + 1) * d]);
    }
    out
}

/// The wait of a job, when known and sane.
pub fn known_wait(job: &JobRecord) -> Option<f64> {
    job.queue_wait
        .or_else(|| job.start_time.map(|s| s - job.submit_time))
        .filter(|w| w.is_finite() && *w >= 0.0)
}

/// Everything the training of the queue-wait model builds over a trace: the runtime
/// predictor, the feature matrix of every job and the labelled training rows.
pub struct QueueWaitData {
    pub runtime: RuntimePredictor,
    pub resource: ResourceKind,
    pub capacity: f64,
    /// Row-major, `jobs.len() × n_features`.
    pub x: Vec<f32>,
    pub n_features: usize,
    /// ln(1 + wait) per job (0 where unknown; only labelled rows are used).
    pub y_log: Vec<f64>,
    /// Submit time per job, seconds.
    pub submit: Vec<f64>,
}

impl QueueWaitData {
    /// Builds features for every job; everything learned (run times, capacity) comes from
    /// `train_rows` (all jobs of the training period, in submit order).
    pub fn build(
        jobs: &[JobRecord],
        train_rows: &[usize],
        trainer: &QueueWaitTrainer,
    ) -> Result<QueueWaitData, PredictorError> {
        let train_jobs: Vec<JobRecord> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
        let schema = FeatureSchema::for_jobs(&train_jobs);
        let hx = batch_features(jobs, &schema);
        let h = schema.len();
        let y_rt: Vec<f64> = jobs
            .iter()
            .map(|j| clamp_duration(j.duration.filter(|d| d.is_finite()).unwrap_or(1.0)).ln())
            .collect();
        let rt_rows: Vec<usize> = train_rows
            .iter()
            .copied()
            .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
            .collect();
        let runtime = trainer.runtime.train(&schema, &hx, &y_rt, &rt_rows)?;
        let hm = Matrix::new(&hx, jobs.len(), h)?;
        let rt_pred = runtime.predict_batch(&hm)?;
        let resource = ResourceKind::for_jobs(&train_jobs);
        let capacity = infer_capacity(jobs, train_rows, resource, trainer.capacity_quantile);
        let queue_jobs: Vec<QueueJob> = jobs
            .iter()
            .zip(&rt_pred)
            .map(|(j, p)| QueueJob::from_record(j, resource, p.seconds))
            .collect();
        let qx = replay_queue_features(jobs, &queue_jobs, capacity)?;
        let qd = QUEUE_FEATURES.len();
        let d = h + qd;
        let mut x = Vec::with_capacity(jobs.len() * d);
        for i in 0..jobs.len() {
            x.extend_from_slice(&hx[i * h..(i + 1) * h]);
            x.extend_from_slice(&qx[i * qd..(i + 1) * qd]);
        }
        let y_log = jobs
            .iter()
            .map(|j| known_wait(j).map_or(0.0, f64::ln_1p))
            .collect();
        Ok(QueueWaitData {
            runtime,
            resource,
            capacity,
            x,
            n_features: d,
            y_log,
            submit: jobs.iter().map(|j| j.submit_time).collect(),
        })
    }
}

impl QueueWaitTrainer {
    /// Trains on the labelled `rows` (in submit order) of `data`: the first part fits, the
    /// next `valid_fraction` early-stops, the last `calib_fraction` calibrates the bound.
    pub fn train(
        &self,
        data: &QueueWaitData,
        rows: &[usize],
    ) -> Result<QueueWaitPredictor, PredictorError> {
        let n = rows.len();
        if n < 200 {
            return Err(PredictorError::not_enough(
                "jobs with a known queue wait",
                format!("{n} training jobs with a known wait; at least 200 are needed"),
            ));
        }
        let d = data.n_features;
        let n_cal = ((n as f64) * self.calib_fraction) as usize;
        let n_val = ((n as f64) * self.valid_fraction) as usize;
        let (fit_rows, rest) = rows.split_at(n - n_cal - n_val);
        let (val_rows, cal_rows) = rest.split_at(n_val);
        let fx = gather(&data.x, d, fit_rows);
        let fy: Vec<f64> = fit_rows.iter().map(|&r| data.y_log[r]).collect();
        let vx = gather(&data.x, d, val_rows);
        let vy: Vec<f64> = val_rows.iter().map(|&r| data.y_log[r]).collect();
        let fm = Matrix::new(&fx, fit_rows.len(), d)?;
        let fit = |params: &GbdtParams, target: WaitTarget| -> Result<AnyModel, PredictorError> {
            let fy: Vec<f64> = fy.iter().map(|&v| target.of_log1p(v)).collect();
            let vy: Vec<f64> = vy.iter().map(|&v| target.of_log1p(v)).collect();
            let train = TrainSet::new(fm, &fy, None)?;
            let valid = if val_rows.is_empty() {
                None
            } else {
                Some(Validation {
                    x: Matrix::new(&vx, val_rows.len(), d)?,
                    y: &vy,
                })
            };
            Ok(AnyModel::Gbdt(params.fit_with_validation(&train, valid)?))
        };
        let point = fit(
            &GbdtParams {
                objective: Objective::L1,
                ..self.point.clone()
            },
            self.point_target,
        )?;
        let upper = fit(
            &GbdtParams {
                objective: Objective::Quantile {
                    alpha: self.coverage,
                },
                ..self.upper.clone()
            },
            WaitTarget::Log1p,
        )?;
        let short = match self.short_mae_slack {
            Some(slack) if !val_rows.is_empty() => {
                let fit_w: Vec<f64> = fy.iter().map(|v| v.exp_m1()).collect();
                let val_w: Vec<f64> = vy.iter().map(|v| v.exp_m1()).collect();
                self.fit_short(
                    &train_x(&fx, fit_rows.len(), d)?,
                    &fit_w,
                    &vx,
                    &val_w,
                    d,
                    &point,
                    slack,
                )?
            }
            _ => None,
        };
        // conformalised quantile regression on the calibration slice
        let cx = gather(&data.x, d, cal_rows);
        let cm = Matrix::new(&cx, cal_rows.len(), d)?;
        let mut cu = vec![0.0; cal_rows.len()];
        upper.predict_into(&cm, &mut cu)?;
        let scores: Vec<f64> = cal_rows
            .iter()
            .zip(&cu)
            .map(|(&r, u)| data.y_log[r] - u)
            .collect();
        let upper_offset = conformal_offset(&scores, self.coverage).unwrap_or(0.0);
        let risk = if self.risk_split && !val_rows.is_empty() {
            self.fit_risk(data, fit_rows, val_rows, cal_rows, &fm, &vx, &upper)?
        } else {
            None
        };
        Ok(QueueWaitPredictor {
            runtime: data.runtime.clone(),
            resource: data.resource,
            capacity: data.capacity,
            point,
            point_target: self.point_target,
            upper,
            upper_offset,
            coverage: self.coverage,
            short,
            risk,
        })
    }

    /// Fits the risk-split bound. Candidates: the score (the bound model's output, or a
    /// log-odds classifier of "wait ≥ the fit period's 0.8 quantile" fitted on the fit rows
    /// and early-stopped on the validation rows), the low group's share ([`RISK_SHARES`])
    /// and level ([`RISK_LOW_LEVELS`]; the high group's level keeps the overall one). Each
    /// candidate is calibrated on the validation rows and run online over the calibration
    /// rows; among those whose overall coverage and both groups' coverages reach their
    /// levels there, the narrowest median bound wins, and is recalibrated on the
    /// calibration rows. None when no candidate holds its levels.
    #[allow(clippy::too_many_arguments)]
    fn fit_risk(
        &self,
        data: &QueueWaitData,
        fit_rows: &[usize],
        val_rows: &[usize],
        cal_rows: &[usize],
        fm: &Matrix,
        vx: &[f32],
        upper: &AnyModel,
    ) -> Result<Option<RiskSplitBound>, PredictorError> {
        let d = data.n_features;
        let wait = |r: usize| data.y_log[r].exp_m1().max(0.0);
        let mut candidates = vec![RiskScore::UpperModel];
        let fit_w: Vec<f64> = fit_rows.iter().map(|&r| wait(r)).collect();
        let threshold_s = quantile(&fit_w, RISK_CLASSIFIER_QUANTILE);
        let label = |w: f64| f64::from(u8::from(w >= threshold_s));
        let fy: Vec<f64> = fit_w.iter().map(|&w| label(w)).collect();
        let positives = fy.iter().filter(|&&v| v > 0.0).count();
        if positives >= RISK_MIN_GROUP && fy.len() - positives >= RISK_MIN_GROUP {
            let vy: Vec<f64> = val_rows.iter().map(|&r| label(wait(r))).collect();
            let params = GbdtParams {
                objective: Objective::LogLoss,
                ..self.point.clone()
            };
            let model = AnyModel::Gbdt(params.fit_with_validation(
                &TrainSet::new(*fm, &fy, None)?,
                Some(Validation {
                    x: Matrix::new(vx, val_rows.len(), d)?,
                    y: &vy,
                }),
            )?);
            candidates.push(RiskScore::Classifier { model, threshold_s });
        }
        // raw bound and score of the rows involved
        let seed_fit = &fit_rows[fit_rows.len().saturating_sub(RISK_WINDOW)..];
        let eval_rows =
            |rows: &[usize], score: &RiskScore| -> Result<(Vec<f64>, Vec<f64>), PredictorError> {
                let x = gather(&data.x, d, rows);
                let m = Matrix::new(&x, rows.len(), d)?;
                let mut raw = vec![0.0; rows.len()];
                upper.predict_into(&m, &mut raw)?;
                let sc = match score {
                    RiskScore::UpperModel => raw.clone(),
                    RiskScore::Classifier { model, .. } => {
                        let mut s = vec![0.0; rows.len()];
                        model.predict_into(&m, &mut s)?;
                        s
                    }
                };
                Ok((raw, sc))
            };
        let mut best: Option<(f64, RiskSplitBound)> = None;
        for score in candidates {
            let (_, seed_sc) = eval_rows(seed_fit, &score)?;
            let (val_raw, val_sc) = eval_rows(val_rows, &score)?;
            let (cal_raw, cal_sc) = eval_rows(cal_rows, &score)?;
            let cal_jobs: Vec<(f64, f64, f64, f64)> = cal_rows
                .iter()
                .zip(&cal_raw)
                .zip(&cal_sc)
                .map(|((&r, &u), &s)| (data.submit[r], wait(r), u, s))
                .collect();
            let cal_w: Vec<f64> = cal_rows.iter().map(|&r| wait(r)).collect();
            let val_y: Vec<f64> = val_rows.iter().map(|&r| data.y_log[r]).collect();
            for share in RISK_SHARES {
                for level_low in RISK_LOW_LEVELS {
                    let Some(mut cand) = RiskSplitBound::calibrated(
                        score.clone(),
                        share,
                        level_low,
                        self.coverage,
                        self.adaptive_step,
                        RISK_WINDOW,
                        &val_raw,
                        &val_sc,
                        &val_y,
                    ) else {
                        continue;
                    };
                    // the online threshold starts from the scores before the replayed rows
                    cand.seed_scores.clone_from(&seed_sc);
                    let level_high = cand.level_high;
                    let out = cand.new_state().replay(&cal_jobs);
                    let u: Vec<f64> = out.iter().map(|(b, _)| b.exp_m1().max(0.0)).collect();
                    let g: Vec<RiskGroup> = out.iter().map(|(_, g)| *g).collect();
                    let m = RiskSplitSummary::measure(&cand, &u, &g, &cal_w);
                    let holds = m.coverage >= self.coverage
                        && m.coverage_low >= level_low
                        && m.coverage_high >= level_high;
                    if holds && best.as_ref().is_none_or(|(w, _)| m.median_bound_s < *w) {
                        best = Some((m.median_bound_s, cand));
                    }
                }
            }
        }
        let Some((_, chosen)) = best else {
            return Ok(None);
        };
        // recalibrate the chosen split on the calibration rows
        let (cal_raw, cal_sc) = eval_rows(cal_rows, &chosen.score)?;
        let cal_y: Vec<f64> = cal_rows.iter().map(|&r| data.y_log[r]).collect();
        Ok(RiskSplitBound::calibrated(
            chosen.score,
            chosen.share_low,
            chosen.level_low,
            self.coverage,
            self.adaptive_step,
            RISK_WINDOW,
            &cal_raw,
            &cal_sc,
            &cal_y,
        ))
    }

    /// Fits the short-wait classifier and picks its threshold on the validation slice.
    #[allow(clippy::too_many_arguments)]
    fn fit_short(
        &self,
        fm: &Matrix,
        fit_w: &[f64],
        vx: &[f32],
        val_w: &[f64],
        d: usize,
        point: &AnyModel,
        slack: f64,
    ) -> Result<Option<ShortWait>, PredictorError> {
        // The window centre: the wait whose ±600 s window holds most fit-period waits (waits
        // are ≥ 0, so a centre of 600 s catches every wait up to 1,200 s).
        let mut seconds = 0.0;
        let mut most = 0usize;
        for k in 0..=12 {
            let c = k as f64 * 100.0;
            let hits = fit_w.iter().filter(|&&w| (w - c).abs() <= SHORT).count();
            if hits > most {
                most = hits;
                seconds = c;
            }
        }
        if most < 20 {
            return Ok(None);
        }
        let label: Vec<f64> = fit_w
            .iter()
            .map(|&w| f64::from(u8::from((w - seconds).abs() <= SHORT)))
            .collect();
        let train = TrainSet::new(*fm, &label, None)?;
        let val_label: Vec<f64> = val_w
            .iter()
            .map(|&w| f64::from(u8::from((w - seconds).abs() <= SHORT)))
            .collect();
        let vm = Matrix::new(vx, val_w.len(), d)?;
        let params = GbdtParams {
            objective: Objective::LogLoss,
            ..self.point.clone()
        };
        let model = AnyModel::Gbdt(params.fit_with_validation(
            &train,
            Some(Validation {
                x: vm,
                y: &val_label,
            }),
        )?);
        let mut vp = vec![0.0; val_w.len()];
        point.predict_into(&vm, &mut vp)?;
        let vp: Vec<f64> = vp
            .into_iter()
            .map(|v| self.point_target.to_seconds(v).max(0.0))
            .collect();
        let mut vc = vec![0.0; val_w.len()];
        model.predict_into(&vm, &mut vc)?;
        let (base_mae, _, base_w600) = point_metrics(&vp, val_w);
        // the threshold with the most validation waits within 600 s whose MAE stays within
        // the slack of the median model's alone
        let mut best: Option<(f64, ShortWait)> = None;
        for k in 1..=19 {
            let threshold = k as f64 * 0.05;
            let cand = ShortWait {
                model: model.clone(),
                seconds,
                threshold,
            };
            let p: Vec<f64> = vp
                .iter()
                .zip(&vc)
                .map(|(&p, &c)| cand.apply(p, c))
                .collect();
            let (mae, _, w600) = point_metrics(&p, val_w);
            if mae <= base_mae * (1.0 + slack)
                && w600 > base_w600
                && best.as_ref().is_none_or(|(b, _)| w600 > *b)
            {
                best = Some((w600, cand));
            }
        }
        Ok(best.map(|(_, s)| s))
    }
}

/// Half-width of the "within 600 s" window the short-wait override aims at.
const SHORT: f64 = 600.0;

fn train_x(x: &[f32], rows: usize, d: usize) -> Result<Matrix<'_>, PredictorError> {
    Ok(Matrix::new(x, rows, d)?)
}

/// One row of the queue-wait evaluation table.
#[derive(Debug, Clone, Serialize)]
pub struct WaitEvalRow {
    pub method: String,
    /// Mean absolute error, seconds.
    pub mae_s: f64,
    /// Share of jobs predicted within 60 s / 600 s of the actual wait.
    pub within60: f64,
    pub within600: f64,
    /// Share of test jobs whose wait is at most the 95% bound (methods with a bound).
    pub coverage95: Option<f64>,
    /// Median of the bound over test jobs, seconds.
    pub median_bound_s: Option<f64>,
    pub train_s: Option<f64>,
    pub predict_us: Option<f64>,
}

/// The result of [`evaluate_queue_wait`].
#[derive(Debug, Clone, Serialize)]
pub struct QueueWaitEvaluation {
    pub n_train: usize,
    pub n_test: usize,
    pub resource: ResourceKind,
    pub capacity: f64,
    pub rows: Vec<WaitEvalRow>,
    /// Test-set actual waits and the model's predictions (for plots).
    #[serde(skip)]
    pub test_actual: Vec<f64>,
    #[serde(skip)]
    pub test_pred: Vec<QueueWaitPrediction>,
    /// The trained predictor.
    #[serde(skip)]
    pub predictor: Option<QueueWaitPredictor>,
    /// The risk-split bound per group (calibration threshold and offsets), when fitted.
    pub risk_split_static: Option<RiskSplitSummary>,
    /// The same bound run online over the test period from its deployment state.
    pub risk_split_online: Option<RiskSplitSummary>,
}

fn point_metrics(pred: &[f64], actual: &[f64]) -> (f64, f64, f64) {
    let n = actual.len().max(1) as f64;
    let mut mae = 0.0;
    let (mut w60, mut w600) = (0usize, 0usize);
    for (p, a) in pred.iter().zip(actual) {
        let e = (p - a).abs();
        mae += e;
        w60 += usize::from(e <= 60.0);
        w600 += usize::from(e <= 600.0);
    }
    (mae / n, w60 as f64 / n, w600 as f64 / n)
}

fn row(method: &str, pred: &[f64], actual: &[f64]) -> WaitEvalRow {
    let (mae_s, within60, within600) = point_metrics(pred, actual);
    WaitEvalRow {
        method: method.into(),
        mae_s,
        within60,
        within600,
        coverage95: None,
        median_bound_s: None,
        train_s: None,
        predict_us: None,
    }
}

/// Evaluates the queue-wait predictor and the baselines on the time-ordered 80/20 split of
/// `jobs` (by submit time). Jobs without a known wait feed the queue state but are neither
/// trained on nor scored.
pub fn evaluate_queue_wait(
    jobs: &[JobRecord],
    trainer: &QueueWaitTrainer,
) -> Result<QueueWaitEvaluation, PredictorError> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled = |rows: &[usize]| -> Vec<usize> {
        rows.iter()
            .copied()
            .filter(|&i| known_wait(&jobs[i]).is_some())
            .collect()
    };
    let train_rows = labelled(split.train());
    let test_rows = labelled(split.test());
    if train_rows.len() < 200 || test_rows.is_empty() {
        return Err(PredictorError::not_enough(
            "jobs with a known queue wait",
            format!(
                "{} training and {} test jobs with a known queue wait",
                train_rows.len(),
                test_rows.len()
            ),
        ));
    }
    let wait = |i: usize| known_wait(&jobs[i]).unwrap_or(0.0);
    let actual: Vec<f64> = test_rows.iter().map(|&i| wait(i)).collect();

    let t0 = Instant::now();
    let data = QueueWaitData::build(jobs, split.train(), trainer)?;
    let predictor = trainer.train(&data, &train_rows)?;
    let train_s = t0.elapsed().as_secs_f64();
    let d = data.n_features;
    let h = data.runtime.schema.len();

    let mut rows = Vec::new();
    rows.push(row("predict zero", &vec![0.0; actual.len()], &actual));
    let train_w: Vec<f64> = train_rows.iter().map(|&i| wait(i)).collect();
    let median = quantile(&train_w, 0.5);
    rows.push(row("global median", &vec![median; actual.len()], &actual));
    let feat = |i: usize, f: usize| data.x[i * d + h + f];
    let recent: Vec<f64> = test_rows
        .iter()
        .map(|&i| {
            let v = f64::from(feat(i, RECENT_WAIT_FEATURE));
            if v.is_finite() {
                v
            } else {
                median
            }
        })
        .collect();
    rows.push(row("median wait of last 10 started", &recent, &actual));
    let sim: Vec<f64> = test_rows
        .iter()
        .map(|&i| f64::from(feat(i, SIM_PRED_FEATURE)).max(0.0))
        .collect();
    rows.push(row(
        "queue simulation (FCFS+backfill, predicted run times)",
        &sim,
        &actual,
    ));

    let tx = gather(&data.x, d, &test_rows);
    let tm = Matrix::new(&tx, test_rows.len(), d)?;
    let t1 = Instant::now();
    let preds = predictor.predict_batch(&tm)?;
    let predict_us = t1.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    let p: Vec<f64> = preds.iter().map(|p| p.seconds).collect();
    // the single conformal offset (the served bound is the risk split when there is one)
    let raw_test = predictor.upper_raw(&tm)?;
    let u: Vec<f64> = raw_test
        .iter()
        .zip(&p)
        .map(|(r, p)| (r + predictor.upper_offset).exp_m1().max(*p))
        .collect();
    let mut model_row = row("augur gbdt + queue state, static conformal", &p, &actual);
    let (cov, width) = bound_metrics(&u, &actual);
    model_row.coverage95 = Some(cov);
    model_row.median_bound_s = Some(width);
    model_row.train_s = Some(train_s);
    model_row.predict_us = Some(predict_us);
    rows.push(model_row);

    // online adaptive bound: the offset follows the outcomes known at each submit,
    // starting at the static offset on the calibration slice
    let n_cal = ((train_rows.len() as f64) * trainer.calib_fraction) as usize;
    let cal_rows = &train_rows[train_rows.len() - n_cal..];
    let pool_rows: Vec<usize> = cal_rows.iter().chain(&test_rows).copied().collect();
    let px = gather(&data.x, d, &pool_rows);
    let pm = Matrix::new(&px, pool_rows.len(), d)?;
    let raw = predictor.upper_raw(&pm)?;
    let pool: Vec<(f64, f64, f64)> = pool_rows
        .iter()
        .zip(&raw)
        .map(|(&i, &r)| (jobs[i].submit_time, wait(i), r))
        .collect();
    let mut adaptive = AdaptiveBound::new(
        predictor.upper_offset,
        trainer.adaptive_step,
        trainer.coverage,
    );
    let bounds = adaptive.replay(&pool);
    let u_online: Vec<f64> = bounds[cal_rows.len()..]
        .iter()
        .zip(&p)
        .map(|(b, p)| b.exp_m1().max(*p))
        .collect();
    let mut online_row = row("augur gbdt + queue state, online adaptive", &p, &actual);
    let (cov, width) = bound_metrics(&u_online, &actual);
    online_row.coverage95 = Some(cov);
    online_row.median_bound_s = Some(width);
    online_row.train_s = Some(train_s);
    online_row.predict_us = Some(predict_us);
    rows.push(online_row);

    // risk-split bound: offline (calibration threshold and offsets, what `predict_row`
    // serves without an online state) and online from its deployment state over the test
    // period, each group's offset following its own outcomes
    let mut risk_split_static = None;
    let mut risk_split_online = None;
    if let (Some(r), Some(scores), Some(mut state)) = (
        &predictor.risk,
        predictor.risk_scores(&tm)?,
        predictor.new_risk_state(),
    ) {
        let u_static: Vec<f64> = preds.iter().map(|p| p.upper).collect();
        let g_static: Vec<RiskGroup> = preds
            .iter()
            .map(|p| p.risk_group.unwrap_or(RiskGroup::High))
            .collect();
        let m = RiskSplitSummary::measure(r, &u_static, &g_static, &actual);
        let mut st_row = row("augur gbdt + queue state, risk-split static", &p, &actual);
        st_row.coverage95 = Some(m.coverage);
        st_row.median_bound_s = Some(m.median_bound_s);
        rows.push(st_row);
        risk_split_static = Some(m);
        let test_jobs: Vec<(f64, f64, f64, f64)> = test_rows
            .iter()
            .zip(&raw_test)
            .zip(&scores)
            .map(|((&i, &u), &s)| (jobs[i].submit_time, wait(i), u, s))
            .collect();
        let out = state.replay(&test_jobs);
        let u_on: Vec<f64> = out
            .iter()
            .zip(&p)
            .map(|((b, _), p)| b.exp_m1().max(*p))
            .collect();
        let g_on: Vec<RiskGroup> = out.iter().map(|(_, g)| *g).collect();
        let m = RiskSplitSummary::measure(r, &u_on, &g_on, &actual);
        let mut on_row = row("augur gbdt + queue state, risk-split online", &p, &actual);
        on_row.coverage95 = Some(m.coverage);
        on_row.median_bound_s = Some(m.median_bound_s);
        on_row.train_s = Some(train_s);
        on_row.predict_us = Some(predict_us);
        rows.push(on_row);
        risk_split_online = Some(m);
    }

    // Hindsight ceiling (not a forecast): the same bound model fitted on the test period
    // itself, 5-fold (every fifth test job held out in turn), shows how sharp a 95% bound
    // these features allow when there is no drift between training and test periods.
    let mut u_hind = vec![0.0; test_rows.len()];
    let folds = 5;
    let hind_params = GbdtParams {
        objective: Objective::Quantile {
            alpha: trainer.coverage,
        },
        n_trees: trainer.upper.n_trees.min(200),
        ..trainer.upper.clone()
    };
    for f in 0..folds {
        let (inn, out): (Vec<usize>, Vec<usize>) =
            (0..test_rows.len()).partition(|k| k % folds != f);
        let ix = gather(&tx, d, &inn);
        let iy: Vec<f64> = inn.iter().map(|&k| actual[k].ln_1p()).collect();
        let train = TrainSet::new(Matrix::new(&ix, inn.len(), d)?, &iy, None)?;
        let m = AnyModel::Gbdt(hind_params.fit_with_validation(&train, None)?);
        let ox = gather(&tx, d, &out);
        let mut ou = vec![0.0; out.len()];
        m.predict_into(&Matrix::new(&ox, out.len(), d)?, &mut ou)?;
        for (k, v) in out.iter().zip(ou) {
            u_hind[*k] = v.exp_m1().max(0.0);
        }
    }
    let mut hind_row = row(
        "hindsight: 95% quantile trees fit on test period, 5-fold",
        &p,
        &actual,
    );
    hind_row.mae_s = f64::NAN;
    hind_row.within60 = f64::NAN;
    hind_row.within600 = f64::NAN;
    let (cov, width) = bound_metrics(&u_hind, &actual);
    hind_row.coverage95 = Some(cov);
    hind_row.median_bound_s = Some(width);
    rows.push(hind_row);

    Ok(QueueWaitEvaluation {
        n_train: train_rows.len(),
        n_test: test_rows.len(),
        resource: data.resource,
        capacity: data.capacity,
        rows,
        test_actual: actual,
        test_pred: preds,
        predictor: Some(predictor),
        risk_split_static,
        risk_split_online,
    })
}
