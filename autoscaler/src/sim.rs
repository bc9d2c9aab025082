//! The discrete-event simulator backend: replays a job table on a configurable cluster.
//!
//! - Cluster: nodes × GPUs per node in racks ([`ClusterSpec`]), optionally heterogeneous GPU
//!   types with speeds relative to the GPUs the trace durations were measured on (e.g. from
//!   Gavel throughputs, [`ClusterSpec::heterogeneous`]). A job on mixed types runs at the
//!   slowest; a job spread over more nodes than it needs, or over racks, pays a penalty.
//! - Gang scheduling: a job gets all its workers or none; placement follows the backend's
//!   [`PlacementRules`] (PACK/SPREAD, locality relaxing with waiting time).
//! - Work: a job's trace duration is its work at its requested size on reference GPUs; on `w`
//!   workers it progresses at `speedup(w) / speedup(requested)` × GPU speed × placement
//!   penalty ([`ScalingModel`]), so work is conserved across rescales. A rescale or a resume
//!   checkpoints and then pauses the job for `rescale_pause_s` (it holds its GPUs, no progress).
//! - Elastic jobs: a seeded share of jobs gets `[min, max]` workers around their request
//!   ([`ElasticSpec`]); the others are rigid.
//! - Node failures ([`NodeFault`], e.g. from the StepFun fault trace): a failed node's jobs lose
//!   the work since their last checkpoint (periodic every `checkpoint_interval_s`, and at every
//!   rescale/suspend) and go back to the queue; the node's GPUs are gone until it recovers.
//! - Deterministic: the event queue is ordered by (time, sequence number); the only randomness
//!   (which jobs are elastic) comes from the seed.
//!
//! Speed: a binary-heap event queue, arrivals read from a sorted cursor, per-job state updated
//! lazily (only when the job is touched), snapshot buffers reused between decisions.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Instant;

use augur_datasets::JobRecord;
use serde::Serialize;

use crate::backend::{
    Action, ClusterBackend, ClusterSnapshot, Decision, DecisionRecord, GpuType, JobId, NodeInfo,
    QueuedJob, RunningJob, Slot,
};
use crate::error::{BackendError, ErrorKind, SimError};
use crate::metrics::{JobOutcome, SimResult, TimelinePoint};
use crate::placement::{shrink_plan, subtract, Capacity, NodeMeta, PlacementRules};
use crate::policies::policy::Policy;
use crate::scaling::ScalingModel;

/// One job to replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimJob {
    /// Row of the job table it came from.
    pub row: usize,
    pub submit: f64,
    /// Run time at its requested size on reference GPUs, seconds (≥ 1).
    pub duration: f64,
    /// Requested GPUs (one worker per GPU).
    pub gpus: u32,
    /// Predicted run time, when a predictor gave one.
    pub predicted: Option<f64>,
}

/// Turns a job table into jobs to replay: rows without a finite duration or submit time are
/// skipped (counted in the second value); fractional GPU requests (openb) round up to whole
/// GPUs; durations are clamped to ≥ 1 s. `predicted[i]` belongs to `records[i]` (shorter or
/// empty means no predictions).
pub fn jobs_from_records(records: &[JobRecord], predicted: &[Option<f64>]) -> (Vec<SimJob>, usize) {
    let mut out = Vec::with_capacity(records.len());
    let mut skipped = 0;
    for (row, r) in records.iter().enumerate() {
        let Some(d) = r.duration.filter(|d| d.is_finite() && *d >= 0.0) else {
            skipped += 1;
            continue;
        };
        if !r.submit_time.is_finite() {
            skipped += 1;
            continue;
        }
        let g = r
            .num_gpus
            .filter(|g| g.is_finite() && *g > 0.0)
            .unwrap_or(1.0);
        out.push(SimJob {
            row,
            submit: r.submit_time,
            duration: d.max(1.0),
            gpus: g.ceil().min(f64::from(u32::MAX)) as u32,
            predicted: predicted
                .get(row)
                .copied()
                .flatten()
                .filter(|p| p.is_finite() && *p > 0.0),
        });
    }
    (out, skipped)
}

/// One machine of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSpec {
    pub name: String,
    /// Index into [`ClusterSpec::gpu_types`].
    pub gpu_type: u16,
    pub gpus: u32,
    pub rack: u32,
}

/// The machines of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSpec {
    pub gpu_types: Vec<GpuType>,
    pub nodes: Vec<NodeSpec>,
}

impl ClusterSpec {
    /// `total_gpus` GPUs of one type (speed 1) on nodes of `gpus_per_node` (the last node takes
    /// the remainder), `nodes_per_rack` nodes per rack.
    pub fn homogeneous(
        total_gpus: u32,
        gpus_per_node: u32,
        nodes_per_rack: u32,
    ) -> Result<ClusterSpec, SimError> {
        ClusterSpec::heterogeneous(
            total_gpus,
            gpus_per_node,
            nodes_per_rack,
            &[("gpu".to_string(), 1.0, 1.0)],
        )
    }

    /// `total_gpus` GPUs split over GPU types `(name, speed, share of GPUs)`; each node holds
    /// one type; racks hold `nodes_per_rack` nodes.
    pub fn heterogeneous(
        total_gpus: u32,
        gpus_per_node: u32,
        nodes_per_rack: u32,
        types: &[(String, f64, f64)],
    ) -> Result<ClusterSpec, SimError> {
        if total_gpus == 0 || gpus_per_node == 0 || nodes_per_rack == 0 {
            return Err(SimError::Cluster(
                "GPUs, GPUs per node and nodes per rack must be > 0".into(),
            ));
        }
        if types.is_empty() || types.len() > usize::from(u16::MAX) {
            return Err(SimError::Cluster("need at least one GPU type".into()));
        }
        let share_sum: f64 = types.iter().map(|t| t.2).sum();
        if types
            .iter()
            .any(|t| !(t.1.is_finite() && t.1 > 0.0 && t.2.is_finite() && t.2 >= 0.0))
            || share_sum <= 0.0
        {
            return Err(SimError::Cluster(
                "GPU type speeds must be > 0 and shares ≥ 0 with a positive sum".into(),
            ));
        }
        let mut nodes = Vec::new();
        let mut assigned = 0u32;
        for (ti, (name, _, share)) in types.iter().enumerate() {
            let want = if ti + 1 == types.len() {
                total_gpus - assigned
            } else {
                ((f64::from(total_gpus) * share / share_sum).round() as u32)
                    .min(total_gpus - assigned)
            };
            assigned += want;
            let mut left = want;
            while left > 0 {
                let g = left.min(gpus_per_node);
                let i = nodes.len() as u32;
                nodes.push(NodeSpec {
                    name: format!("{name}-{i:04}"),
                    gpu_type: ti as u16,
                    gpus: g,
                    rack: i / nodes_per_rack,
                });
                left -= g;
            }
        }
        Ok(ClusterSpec {
            gpu_types: types
                .iter()
                .map(|(name, speed, _)| GpuType {
                    name: name.clone(),
                    speed: *speed,
                })
                .collect(),
            nodes,
        })
    }

    /// GPUs in total.
    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }
}

/// Which jobs are elastic and their bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ElasticSpec {
    /// Share of jobs (drawn with the seed) that are elastic.
    pub share: f64,
    /// `min = max(1, ceil(requested × min_fraction))`.
    pub min_fraction: f64,
    /// `max = min(max_workers, ceil(requested × max_factor))`.
    pub max_factor: f64,
    pub max_workers: u32,
}

impl Default for ElasticSpec {
    fn default() -> Self {
        ElasticSpec {
            share: 0.5,
            min_fraction: 0.5,
            max_factor: 4.0,
            max_workers: 64,
        }
    }
}

/// A node out of service from `start` to `end` (simulation time, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeFault {
    pub node: u32,
    pub start: f64,
    pub end: f64,
}

/// Number of servers the StepFun fault trace sampled (its node ids map onto this many slots).
pub const FAULT_TRACE_SERVERS: u64 = 400;

/// Maps real fault episodes onto `n_nodes` simulated nodes, keeping each node's fault rate:
/// every fault-trace node id hashes to one of `max(400, n_nodes)` server slots and only slots
/// `< n_nodes` are kept; episode times are shifted by `t0` (the replay's first submit).
pub fn faults_from_episodes(
    episodes: &[augur_datasets::cluster::FaultEpisode],
    n_nodes: u32,
    t0: f64,
) -> Vec<NodeFault> {
    let slots = FAULT_TRACE_SERVERS.max(u64::from(n_nodes));
    let mut out: Vec<NodeFault> = episodes
        .iter()
        .filter(|e| e.end_s > e.start_s)
        .filter_map(|e| {
            // FNV-1a: stable across runs and platforms
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in e.node_id.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            let slot = h % slots;
            (slot < u64::from(n_nodes)).then_some(NodeFault {
                node: slot as u32,
                start: t0 + e.start_s,
                end: t0 + e.end_s,
            })
        })
        .collect();
    out.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.node.cmp(&b.node)));
    out
}

/// Everything the simulator needs besides the jobs and the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    pub cluster: ClusterSpec,
    pub rules: PlacementRules,
    pub elastic: ElasticSpec,
    pub scaling: ScalingModel,
    /// Checkpoint-restart pause of a rescale or resume, seconds.
    pub rescale_pause_s: f64,
    /// Periodic checkpoint interval of a running job, seconds of run.
    pub checkpoint_interval_s: f64,
    /// Speed factor of a job on more nodes than it needs.
    pub spread_penalty: f64,
    /// Speed factor of a job spanning racks.
    pub cross_rack_penalty: f64,
    pub faults: Vec<NodeFault>,
    pub seed: u64,
    /// Timeline samples to keep (queue length, utilisation) over the replay.
    pub timeline_points: usize,
    /// Decisions to keep in the log (the rest are only counted).
    pub max_logged_decisions: usize,
}

impl SimConfig {
    /// Defaults around a cluster: PACK with Philly-like locality relaxing, half the jobs
    /// elastic, the Pollux-fitted Amdahl curve, 30 s rescale pause, 30 min checkpoints.
    pub fn new(cluster: ClusterSpec) -> SimConfig {
        SimConfig {
            cluster,
            rules: PlacementRules::default(),
            elastic: ElasticSpec::default(),
            scaling: ScalingModel::default(),
            rescale_pause_s: 30.0,
            checkpoint_interval_s: 1800.0,
            spread_penalty: 0.95,
            cross_rack_penalty: 0.9,
            faults: Vec::new(),
            seed: 0,
            timeline_points: 2000,
            max_logged_decisions: 200_000,
        }
    }

    fn validate(&self) -> Result<(), SimError> {
        let e = &self.elastic;
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        let elastic_ok = (0.0..=1.0).contains(&e.share)
            && (0.0..=1.0).contains(&e.min_fraction)
            && e.max_factor.is_finite()
            && e.max_factor >= 1.0;
        if !elastic_ok {
            return Err(SimError::Config(
                "elastic share and min fraction must be in [0, 1], max factor ≥ 1".into(),
            ));
        }
        let times_ok = ok(self.rescale_pause_s)
            && self.checkpoint_interval_s.is_finite()
            && self.checkpoint_interval_s > 0.0
            && self.spread_penalty > 0.0
            && self.spread_penalty <= 1.0
            && self.cross_rack_penalty > 0.0
            && self.cross_rack_penalty <= 1.0;
        if !times_ok {
            return Err(SimError::Config(
                "pause ≥ 0, checkpoint interval > 0, penalties in (0, 1]".into(),
            ));
        }
        if self.cluster.nodes.is_empty() || self.cluster.total_gpus() == 0 {
            return Err(SimError::Cluster("the cluster has no GPUs".into()));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Future,
    Queued,
    Running,
    Done,
}

#[derive(Debug, Clone)]
struct Job {
    src: SimJob,
    requested: u32,
    min: u32,
    max: u32,
    work: f64,
    done: f64,
    ckpt: f64,
    rate: f64,
    t_upd: f64,
    attained: f64,
    held_s: f64,
    workers: u32,
    slots: Vec<Slot>,
    state: State,
    restarting: bool,
    seg_start: f64,
    seg_done0: f64,
    epoch: u32,
    first_start: Option<f64>,
    started: f64,
    finish: f64,
    queued_since: f64,
    queued_total: f64,
    last_rescale: Option<f64>,
    rescales: u32,
    preemptions: u32,
    failures: u32,
    lost_work: f64,
    run_pos: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum EvKind {
    Complete(u32, u32),
    Resume(u32, u32),
    NodeDown(u32),
    NodeUp(u32),
    Wake,
}

#[derive(Debug, Clone, Copy)]
struct Ev {
    t: f64,
    seq: u64,
    kind: EvKind,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t.total_cmp(&o.t).then(self.seq.cmp(&o.seq))
    }
}

/// The simulator. Build it with [`Simulator::new`], then either [`Simulator::run`] a policy to
/// the end, or drive it step by step as a [`ClusterBackend`] ([`Simulator::advance`]).
#[derive(Debug)]
pub struct Simulator {
    cfg: SimConfig,
    jobs: Vec<Job>,
    arrivals: Vec<u32>,
    next_arrival: usize,
    heap: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    now: f64,
    t0: f64,
    cap: Capacity,
    speed: Vec<f64>,
    speedup: Vec<f64>,
    queue: Vec<u32>,
    running: Vec<u32>,
    snap: ClusterSnapshot,
    finished: usize,
    skipped_too_big: usize,
    dirty: bool,
    pending_wake: f64,
    busy_gpu_s: f64,
    healthy_gpu_s: f64,
    t_acc: f64,
    timeline: Vec<TimelinePoint>,
    timeline_step: f64,
    next_sample: f64,
    log: Vec<DecisionRecord>,
    decisions: u64,
    rejected: u64,
    events: u64,
    rescales: u64,
    suspensions: u64,
    failures: u64,
    policy_calls: u64,
    tmp: Vec<Slot>,
}

/// SplitMix64 (Steele et al.): a tiny, fast, seedable generator; all the simulator draws is
/// which jobs are elastic.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn job_id(i: u32) -> JobId {
    JobId(u64::from(i))
}

impl Simulator {
    /// A simulator replaying `jobs` (any order) under `cfg`. Jobs asking for more GPUs than
    /// the cluster has are skipped and counted.
    pub fn new(mut jobs: Vec<SimJob>, cfg: SimConfig) -> Result<Simulator, SimError> {
        cfg.validate()?;
        let total = cfg.cluster.total_gpus();
        let before = jobs.len();
        jobs.retain(|j| j.gpus <= total && j.submit.is_finite() && j.duration.is_finite());
        let skipped_too_big = before - jobs.len();
        if jobs.is_empty() {
            return Err(SimError::NoJobs(format!(
                "{before} jobs given, none fits a {total}-GPU cluster"
            )));
        }
        jobs.sort_by(|a, b| a.submit.total_cmp(&b.submit).then(a.row.cmp(&b.row)));
        let mut rng = SplitMix64(cfg.seed);
        let e = cfg.elastic;
        let mut max_workers = 1;
        let states: Vec<Job> = jobs
            .into_iter()
            .map(|src| {
                let r = src.gpus.max(1);
                let elastic = rng.next_f64() < e.share;
                let (min, max) = if elastic {
                    let min = ((f64::from(r) * e.min_fraction).ceil() as u32).clamp(1, r);
                    let max = ((f64::from(r) * e.max_factor).ceil() as u32)
                        .min(e.max_workers.max(r))
                        .min(total)
                        .max(r);
                    (min, max)
                } else {
                    (r, r)
                };
                max_workers = max_workers.max(max);
                Job {
                    requested: r,
                    min,
                    max,
                    work: src.duration,
                    done: 0.0,
                    ckpt: 0.0,
                    rate: 0.0,
                    t_upd: src.submit,
                    attained: 0.0,
                    held_s: 0.0,
                    workers: 0,
                    slots: Vec::new(),
                    state: State::Future,
                    restarting: false,
                    seg_start: 0.0,
                    seg_done0: 0.0,
                    epoch: 0,
                    first_start: None,
                    started: 0.0,
                    finish: f64::NAN,
                    queued_since: src.submit,
                    queued_total: 0.0,
                    last_rescale: None,
                    rescales: 0,
                    preemptions: 0,
                    failures: 0,
                    lost_work: 0.0,
                    run_pos: usize::MAX,
                    src,
                }
            })
            .collect();
        let t0 = states.first().map_or(0.0, |j| j.src.submit);
        let t_last = states.last().map_or(0.0, |j| j.src.submit);
        let speedup = (0..=max_workers.max(1))
            .map(|n| cfg.scaling.speedup(n))
            .collect();
        let meta: Vec<NodeMeta> = cfg
            .cluster
            .nodes
            .iter()
            .map(|n| NodeMeta {
                gpus: n.gpus,
                rack: n.rack,
                speed: cfg
                    .cluster
                    .gpu_types
                    .get(usize::from(n.gpu_type))
                    .map_or(1.0, |t| t.speed),
            })
            .collect();
        let speed = meta.iter().map(|m| m.speed).collect();
        let snap = ClusterSnapshot {
            time: t0,
            gpu_types: cfg.cluster.gpu_types.clone(),
            nodes: cfg
                .cluster
                .nodes
                .iter()
                .map(|n| NodeInfo {
                    name: n.name.clone(),
                    gpu_type: n.gpu_type,
                    rack: n.rack,
                    gpus: n.gpus,
                    free: n.gpus,
                    healthy: true,
                })
                .collect(),
            rules: cfg.rules,
            ..Default::default()
        };
        let mut sim = Simulator {
            arrivals: (0..states.len() as u32).collect(),
            jobs: states,
            next_arrival: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            now: t0,
            t0,
            cap: Capacity::new(meta),
            speed,
            speedup,
            queue: Vec::new(),
            running: Vec::new(),
            snap,
            finished: 0,
            skipped_too_big,
            dirty: false,
            pending_wake: f64::INFINITY,
            busy_gpu_s: 0.0,
            healthy_gpu_s: 0.0,
            t_acc: t0,
            timeline: Vec::new(),
            timeline_step: ((t_last - t0) / cfg.timeline_points.max(1) as f64).max(1.0),
            next_sample: t0,
            log: Vec::new(),
            decisions: 0,
            rejected: 0,
            events: 0,
            rescales: 0,
            suspensions: 0,
            failures: 0,
            policy_calls: 0,
            tmp: Vec::new(),
            cfg,
        };
        let faults = sim.cfg.faults.clone();
        for f in faults {
            if (f.node as usize) < sim.cfg.cluster.nodes.len() {
                sim.push(f.start, EvKind::NodeDown(f.node));
                sim.push(f.end, EvKind::NodeUp(f.node));
            }
        }
        Ok(sim)
    }

    /// Simulation time now.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Jobs that will be replayed (after skipping those bigger than the cluster).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when there is nothing to replay.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Jobs finished so far.
    pub fn finished(&self) -> usize {
        self.finished
    }

    /// Whether job `id` is elastic, and its `[min, max]`.
    pub fn bounds(&self, id: JobId) -> Option<(u32, u32)> {
        self.jobs.get(id.0 as usize).map(|j| (j.min, j.max))
    }

    /// The replayed job behind an id.
    pub fn job(&self, id: JobId) -> Option<&SimJob> {
        self.jobs.get(id.0 as usize).map(|j| &j.src)
    }

    /// When job `id` first started and when it finished (each `None` until it happens).
    pub fn job_times(&self, id: JobId) -> Option<(Option<f64>, Option<f64>)> {
        self.jobs
            .get(id.0 as usize)
            .map(|j| (j.first_start, (j.state == State::Done).then_some(j.finish)))
    }

    fn push(&mut self, t: f64, kind: EvKind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev {
            t,
            seq: self.seq,
            kind,
        }));
    }

    /// Time of the next event (arrival, completion, resume, node change, wake-up).
    pub fn next_event_time(&self) -> Option<f64> {
        let a = self
            .arrivals
            .get(self.next_arrival)
            .and_then(|&i| self.jobs.get(i as usize))
            .map(|j| j.src.submit);
        let h = self.heap.peek().map(|Reverse(e)| e.t);
        match (a, h) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        }
    }

    /// True when every job has finished.
    pub fn all_done(&self) -> bool {
        self.finished == self.jobs.len()
    }

    fn healthy_total(&self) -> u32 {
        self.snap
            .nodes
            .iter()
            .filter(|n| n.healthy)
            .map(|n| n.gpus)
            .sum()
    }

    fn set_time(&mut self, t: f64) {
        if t > self.t_acc {
            let dt = t - self.t_acc;
            let healthy = f64::from(self.cap_healthy());
            let busy = healthy - f64::from(self.cap.total_free());
            self.busy_gpu_s += busy * dt;
            self.healthy_gpu_s += healthy * dt;
            self.t_acc = t;
        }
        if t > self.now {
            self.now = t;
        }
    }

    fn cap_healthy(&self) -> u32 {
        self.cap
            .meta()
            .iter()
            .enumerate()
            .filter(|(i, _)| self.cap.healthy(*i as u32))
            .map(|(_, m)| m.gpus)
            .sum()
    }

    fn sync(&mut self, i: u32) {
        let now = self.now;
        let Some(j) = self.jobs.get_mut(i as usize) else {
            return;
        };
        let dt = now - j.t_upd;
        if dt > 0.0 {
            match j.state {
                State::Running => {
                    j.held_s += dt;
                    j.attained += f64::from(j.workers) * dt;
                    j.done = (j.done + j.rate * dt).min(j.work);
                }
                State::Queued => j.queued_total += dt,
                _ => {}
            }
        }
        j.t_upd = now;
    }

    fn rate_of(&self, j: &Job) -> f64 {
        if j.slots.is_empty() {
            return 0.0;
        }
        let speed = j
            .slots
            .iter()
            .filter_map(|s| self.speed.get(s.node as usize))
            .copied()
            .fold(f64::INFINITY, f64::min);
        let nodes = j.slots.len() as u32;
        let mut penalty = 1.0;
        if nodes > self.cap.min_nodes(j.workers).max(1) {
            penalty *= self.cfg.spread_penalty;
        }
        let meta = self.cap.meta();
        let rack0 = j
            .slots
            .first()
            .and_then(|s| meta.get(s.node as usize))
            .map(|m| m.rack);
        if j.slots
            .iter()
            .any(|s| meta.get(s.node as usize).map(|m| m.rack) != rack0)
        {
            penalty *= self.cfg.cross_rack_penalty;
        }
        let su = |n: u32| self.speedup.get(n as usize).copied().unwrap_or(1.0);
        su(j.workers) / su(j.requested) * speed * penalty
    }

    /// Starts the job's progress at its current placement (after a pause, or at admission).
    fn start_progress(&mut self, i: u32) {
        let rate = self.jobs.get(i as usize).map_or(0.0, |j| self.rate_of(j));
        let now = self.now;
        let Some(j) = self.jobs.get_mut(i as usize) else {
            return;
        };
        j.rate = rate;
        j.restarting = false;
        j.seg_start = now;
        j.seg_done0 = j.done;
        j.epoch += 1;
        let epoch = j.epoch;
        let t = if rate > 0.0 {
            now + (j.work - j.done).max(0.0) / rate
        } else {
            f64::INFINITY
        };
        if t.is_finite() {
            self.push(t, EvKind::Complete(i, epoch));
        }
    }

    /// Holds the job's GPUs without progress for the restart pause.
    fn pause(&mut self, i: u32) {
        let pause = self.cfg.rescale_pause_s;
        let now = self.now;
        let Some(j) = self.jobs.get_mut(i as usize) else {
            return;
        };
        j.ckpt = j.done;
        j.rate = 0.0;
        j.epoch += 1;
        if pause > 0.0 {
            j.restarting = true;
            let epoch = j.epoch;
            self.push(now + pause, EvKind::Resume(i, epoch));
        } else {
            self.start_progress(i);
        }
    }

    fn remove_running(&mut self, i: u32) {
        let Some(pos) = self.jobs.get(i as usize).map(|j| j.run_pos) else {
            return;
        };
        if pos < self.running.len() {
            self.running.swap_remove(pos);
            if let Some(&moved) = self.running.get(pos) {
                if let Some(m) = self.jobs.get_mut(moved as usize) {
                    m.run_pos = pos;
                }
            }
        }
        if let Some(j) = self.jobs.get_mut(i as usize) {
            j.run_pos = usize::MAX;
        }
    }

    fn enqueue(&mut self, i: u32) {
        let now = self.now;
        if let Some(j) = self.jobs.get_mut(i as usize) {
            j.state = State::Queued;
            j.queued_since = now;
            j.t_upd = now;
            j.workers = 0;
            j.rate = 0.0;
            j.restarting = false;
            j.epoch += 1;
        }
        self.queue.push(i);
    }

    fn handle(&mut self, ev: Ev) {
        self.events += 1;
        match ev.kind {
            EvKind::Complete(i, epoch) => {
                let ok = self
                    .jobs
                    .get(i as usize)
                    .is_some_and(|j| j.epoch == epoch && j.state == State::Running);
                if !ok {
                    return;
                }
                self.sync(i);
                let slots = self
                    .jobs
                    .get_mut(i as usize)
                    .map(|j| std::mem::take(&mut j.slots))
                    .unwrap_or_default();
                self.cap.release(&slots);
                self.remove_running(i);
                let now = self.now;
                if let Some(j) = self.jobs.get_mut(i as usize) {
                    j.state = State::Done;
                    j.done = j.work;
                    j.finish = now;
                    j.slots = slots;
                }
                self.finished += 1;
                self.dirty = true;
            }
            EvKind::Resume(i, epoch) => {
                let ok = self
                    .jobs
                    .get(i as usize)
                    .is_some_and(|j| j.epoch == epoch && j.state == State::Running);
                if ok {
                    self.sync(i);
                    self.start_progress(i);
                }
            }
            EvKind::NodeDown(n) => {
                if !self.cap.healthy(n) {
                    return;
                }
                self.failures += 1;
                self.cap.set_down(n);
                let hit: Vec<u32> = self
                    .running
                    .iter()
                    .copied()
                    .filter(|&i| {
                        self.jobs
                            .get(i as usize)
                            .is_some_and(|j| j.slots.iter().any(|s| s.node == n))
                    })
                    .collect();
                for i in hit {
                    self.sync(i);
                    let interval = self.cfg.checkpoint_interval_s;
                    let now = self.now;
                    let slots = if let Some(j) = self.jobs.get_mut(i as usize) {
                        // last checkpoint: the later of the rescale/resume one and the last
                        // periodic one of the current segment
                        let mut ck = j.ckpt;
                        if !j.restarting && j.rate > 0.0 {
                            let k = ((now - j.seg_start) / interval).floor();
                            ck = ck.max(j.seg_done0 + j.rate * k * interval);
                        }
                        let ck = ck.min(j.done);
                        j.lost_work += j.done - ck;
                        j.done = ck;
                        j.ckpt = ck;
                        j.failures += 1;
                        std::mem::take(&mut j.slots)
                    } else {
                        Vec::new()
                    };
                    self.cap.release(&slots);
                    self.remove_running(i);
                    self.enqueue(i);
                }
                self.dirty = true;
            }
            EvKind::NodeUp(n) => {
                self.cap.set_up(n);
                self.dirty = true;
            }
            EvKind::Wake => {
                self.dirty = true;
                if ev.t >= self.pending_wake {
                    self.pending_wake = f64::INFINITY;
                }
            }
        }
    }

    /// Processes every event up to and including time `until` (arrivals, completions,
    /// resumes, node changes) without asking any policy. Returns true when something
    /// happened that a policy should look at.
    pub fn advance(&mut self, until: f64) -> bool {
        loop {
            let heap_t = self.heap.peek().map(|Reverse(e)| e.t);
            let arr_t = self
                .arrivals
                .get(self.next_arrival)
                .and_then(|&i| self.jobs.get(i as usize))
                .map(|j| j.src.submit);
            let (t, is_heap) = match (heap_t, arr_t) {
                (Some(h), Some(a)) if h <= a => (h, true),
                (_, Some(a)) => (a, false),
                (Some(h), None) => (h, true),
                (None, None) => break,
            };
            if t > until {
                break;
            }
            self.set_time(t);
            if is_heap {
                if let Some(Reverse(ev)) = self.heap.pop() {
                    self.handle(ev);
                }
            } else {
                let i = self.arrivals.get(self.next_arrival).copied().unwrap_or(0);
                self.next_arrival += 1;
                self.events += 1;
                self.enqueue(i);
                self.dirty = true;
            }
        }
        if until.is_finite() {
            self.set_time(until);
        }
        std::mem::take(&mut self.dirty)
    }

    /// Fills the reused snapshot buffers with the state now.
    fn fill_snapshot(&mut self) {
        self.queue.retain(|&i| {
            self.jobs
                .get(i as usize)
                .is_some_and(|j| j.state == State::Queued)
        });
        for k in 0..self.running.len() {
            if let Some(&i) = self.running.get(k) {
                self.sync(i);
            }
        }
        let snap = &mut self.snap;
        snap.time = self.now;
        for (k, n) in snap.nodes.iter_mut().enumerate() {
            n.free = self.cap.free(k as u32);
            n.healthy = self.cap.healthy(k as u32);
        }
        snap.running.clear();
        snap.slots.clear();
        for &i in &self.running {
            let Some(j) = self.jobs.get(i as usize) else {
                continue;
            };
            let a = snap.slots.len() as u32;
            snap.slots.extend_from_slice(&j.slots);
            snap.running.push(RunningJob {
                id: job_id(i),
                submitted: j.src.submit,
                first_started: j.first_start.unwrap_or(j.started),
                started: j.started,
                workers: j.workers,
                requested: j.requested,
                min_workers: j.min,
                max_workers: j.max,
                restarting: j.restarting,
                attained_gpu_s: j.attained,
                progress_s: Some(j.done),
                predicted_runtime: j.src.predicted,
                oracle_remaining_s: Some((j.work - j.done).max(0.0)),
                last_rescale: j.last_rescale,
                slots: (a, snap.slots.len() as u32),
            });
        }
        snap.queued.clear();
        for &i in &self.queue {
            let Some(j) = self.jobs.get(i as usize) else {
                continue;
            };
            snap.queued.push(QueuedJob {
                id: job_id(i),
                submitted: j.src.submit,
                queued_since: j.queued_since,
                requested: j.requested,
                min_workers: j.min,
                max_workers: j.max,
                attained_gpu_s: j.attained,
                run_s: j.held_s,
                progress_s: Some(j.done),
                predicted_runtime: j.src.predicted,
                oracle_remaining_s: Some((j.work - j.done).max(0.0)),
            });
        }
    }

    /// The cluster now (snapshot buffers are refreshed).
    pub fn snapshot(&mut self) -> &ClusterSnapshot {
        self.fill_snapshot();
        &self.snap
    }

    fn err(kind: ErrorKind, i: u32, msg: &str) -> BackendError {
        BackendError::new(kind, Some(job_id(i)), msg)
    }

    /// Carries out one action now.
    pub fn apply_action(&mut self, action: Action) -> Result<(), BackendError> {
        let i = u32::try_from(action.job().0).unwrap_or(u32::MAX);
        let Some(j) = self.jobs.get(i as usize) else {
            return Err(Self::err(ErrorKind::NotFound, i, "no such job"));
        };
        let (state, min, max, workers) = (j.state, j.min, j.max, j.workers);
        match action {
            Action::Admit { workers: w, .. } => {
                if state != State::Queued {
                    return Err(Self::err(ErrorKind::Invalid, i, "admit: job is not queued"));
                }
                if w < min || w > max {
                    return Err(Self::err(
                        ErrorKind::Invalid,
                        i,
                        "admit: workers outside [min, max]",
                    ));
                }
                let waited = self.now - j.queued_since;
                let level = self.cfg.rules.level_for(waited);
                let mut slots = std::mem::take(&mut self.tmp);
                slots.clear();
                if !self
                    .cap
                    .place(w, level, self.cfg.rules.strategy, &mut slots)
                {
                    self.tmp = slots;
                    return Err(Self::err(
                        ErrorKind::NoCapacity,
                        i,
                        "admit: gang does not fit",
                    ));
                }
                self.sync(i);
                let now = self.now;
                let resumed = if let Some(j) = self.jobs.get_mut(i as usize) {
                    j.slots.clear();
                    j.slots.extend_from_slice(&slots);
                    j.workers = w;
                    j.state = State::Running;
                    j.started = now;
                    let resumed = j.first_start.is_some();
                    if !resumed {
                        j.first_start = Some(now);
                    }
                    j.run_pos = self.running.len();
                    resumed
                } else {
                    false
                };
                self.tmp = slots;
                self.running.push(i);
                if resumed {
                    self.pause(i);
                } else {
                    self.start_progress(i);
                }
                Ok(())
            }
            Action::SetWorkers { workers: w, .. } => {
                if state != State::Running {
                    return Err(Self::err(
                        ErrorKind::Invalid,
                        i,
                        "rescale: job is not running",
                    ));
                }
                if w < min || w > max {
                    return Err(Self::err(
                        ErrorKind::Invalid,
                        i,
                        "rescale: workers outside [min, max]",
                    ));
                }
                if w == workers {
                    return Ok(());
                }
                let mut delta = std::mem::take(&mut self.tmp);
                delta.clear();
                let strategy = self.cfg.rules.strategy;
                let cur = self
                    .jobs
                    .get(i as usize)
                    .map(|j| j.slots.clone())
                    .unwrap_or_default();
                if w > workers {
                    if !self.cap.grow(&cur, w - workers, strategy, &mut delta) {
                        self.tmp = delta;
                        return Err(Self::err(
                            ErrorKind::NoCapacity,
                            i,
                            "rescale: no room to grow",
                        ));
                    }
                } else {
                    shrink_plan(&cur, workers - w, &mut delta);
                    self.cap.release(&delta);
                }
                self.sync(i);
                let now = self.now;
                if let Some(j) = self.jobs.get_mut(i as usize) {
                    if w > workers {
                        for d in &delta {
                            if let Some(s) = j.slots.iter_mut().find(|s| s.node == d.node) {
                                s.gpus += d.gpus;
                            } else {
                                j.slots.push(*d);
                            }
                        }
                    } else {
                        subtract(&mut j.slots, &delta);
                    }
                    j.workers = w;
                    j.rescales += 1;
                    j.last_rescale = Some(now);
                }
                self.tmp = delta;
                self.rescales += 1;
                self.pause(i);
                Ok(())
            }
            Action::Suspend { .. } => {
                if state != State::Running {
                    return Err(Self::err(
                        ErrorKind::Invalid,
                        i,
                        "suspend: job is not running",
                    ));
                }
                self.sync(i);
                let slots = if let Some(j) = self.jobs.get_mut(i as usize) {
                    // a suspend checkpoints, unless the job is still restoring its last one
                    if !j.restarting {
                        j.ckpt = j.done;
                    } else {
                        j.done = j.ckpt;
                    }
                    j.preemptions += 1;
                    std::mem::take(&mut j.slots)
                } else {
                    Vec::new()
                };
                self.cap.release(&slots);
                self.remove_running(i);
                self.enqueue(i);
                self.suspensions += 1;
                Ok(())
            }
        }
    }

    fn record(&mut self, d: Decision, res: &Result<(), BackendError>) {
        self.decisions += 1;
        if res.is_err() {
            self.rejected += 1;
        }
        if self.log.len() < self.cfg.max_logged_decisions {
            self.log.push(DecisionRecord {
                time: self.now,
                decision: d,
                error: res.as_ref().err().map(|e| e.to_string()),
            });
        }
    }

    fn sample(&mut self, force: bool) {
        if !force && self.now < self.next_sample {
            return;
        }
        let healthy = self.healthy_total_cap();
        self.timeline.push(TimelinePoint {
            t: self.now - self.t0,
            queued: self.queue_len() as u32,
            running: self.running.len() as u32,
            busy_gpus: healthy - self.cap.total_free(),
            healthy_gpus: healthy,
        });
        self.next_sample = self.now + self.timeline_step;
    }

    fn healthy_total_cap(&self) -> u32 {
        self.cap_healthy()
    }

    fn queue_len(&self) -> usize {
        self.queue
            .iter()
            .filter(|&&i| {
                self.jobs
                    .get(i as usize)
                    .is_some_and(|j| j.state == State::Queued)
            })
            .count()
    }

    /// Asks the policy once and applies its decisions in order. Returns how many failed.
    pub fn decide_once(&mut self, policy: &mut dyn Policy) -> usize {
        self.fill_snapshot();
        self.policy_calls += 1;
        let mut out = Vec::new();
        let wake = policy.decide(&self.snap, &mut out);
        let mut failed = 0;
        for d in out {
            let res = self.apply_action(d.action);
            if res.is_err() {
                failed += 1;
            }
            self.record(d, &res);
        }
        if let Some(w) = wake {
            let w = w.max(self.now);
            if w < self.pending_wake && w.is_finite() && self.finished < self.jobs.len() {
                self.pending_wake = w;
                self.push(w, EvKind::Wake);
            }
        }
        failed
    }

    /// Replays every job under `policy` to the end.
    pub fn run(self, policy: &mut dyn Policy) -> SimResult {
        self.run_with_progress(policy, &mut |_, _| {})
    }

    /// As [`Simulator::run`], calling `progress(finished, total)` every 1000 finished jobs.
    pub fn run_with_progress(
        mut self,
        policy: &mut dyn Policy,
        progress: &mut dyn FnMut(usize, usize),
    ) -> SimResult {
        let wall = Instant::now();
        let total = self.jobs.len();
        let mut last_report = 0;
        while self.finished < total {
            let Some(t) = self.next_event_time() else {
                break;
            };
            let changed = self.advance(t);
            self.sample(false);
            if changed {
                self.decide_once(policy);
            }
            if self.finished >= last_report + 1000 {
                last_report = self.finished;
                progress(self.finished, total);
            }
        }
        self.sample(true);
        progress(self.finished, total);
        self.finish(policy.name(), wall.elapsed().as_secs_f64())
    }

    fn finish(mut self, policy: &str, wall_s: f64) -> SimResult {
        let now = self.now;
        for k in 0..self.jobs.len() {
            self.sync(k as u32);
        }
        let jobs: Vec<JobOutcome> = self
            .jobs
            .iter()
            .map(|j| JobOutcome {
                row: j.src.row,
                submit: j.src.submit,
                first_start: j.first_start,
                finish: (j.state == State::Done).then_some(j.finish),
                gpus: j.requested,
                elastic: j.min < j.max,
                duration: j.src.duration,
                queued_s: j.queued_total,
                run_s: j.held_s,
                gpu_s: j.attained,
                rescales: j.rescales,
                preemptions: j.preemptions,
                failures: j.failures,
                lost_work_s: j.lost_work,
            })
            .collect();
        SimResult {
            policy: policy.to_string(),
            total_gpus: self.cfg.cluster.total_gpus(),
            start: self.t0,
            end: now,
            jobs,
            skipped_too_big: self.skipped_too_big,
            busy_gpu_s: self.busy_gpu_s,
            healthy_gpu_s: self.healthy_gpu_s,
            timeline: std::mem::take(&mut self.timeline),
            decisions: std::mem::take(&mut self.log),
            decisions_total: self.decisions,
            rejected_actions: self.rejected,
            rescales: self.rescales,
            suspensions: self.suspensions,
            node_failures: self.failures,
            events: self.events,
            policy_calls: self.policy_calls,
            wall_s,
        }
    }

    /// Ends the replay where it is (for step-by-step use) and returns the results so far.
    pub fn into_result(self, policy: &str) -> SimResult {
        self.finish(policy, 0.0)
    }

    /// GPUs of healthy nodes now.
    pub fn healthy_gpus(&self) -> u32 {
        self.healthy_total()
    }
}

/// The simulator as a backend: actions apply at the current simulation time; move time with
/// [`Simulator::advance`].
impl ClusterBackend for Simulator {
    fn observe(
        &mut self,
    ) -> impl std::future::Future<Output = Result<ClusterSnapshot, BackendError>> + Send {
        std::future::ready(Ok(self.snapshot().clone()))
    }

    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::Admit { job, workers }))
    }

    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::SetWorkers { job, workers }))
    }

    fn suspend(
        &mut self,
        job: JobId,
    ) -> impl std::future::Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::Suspend { job }))
    }
}
