//! The simulator's state and its core moves ([`Simulator`]): building a replay, the event
//! queue and the clock, and a job's progress (lazy updates, restart pauses, entering and
//! leaving the running list). Events, actions, snapshots and the replay loop build on these.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use augur_numeric::SplitMix64;

use super::config::SimConfig;
use super::event::{Ev, EvKind};
use super::job::{Job, State};
use super::trace::SimJob;
use crate::cluster::{ClusterState, JobId, Slot, TypeAffinity};
use crate::decision::DecisionRecord;
use crate::error::SimError;
use crate::metrics::TimelinePoint;
use crate::placement::Capacity;

/// The simulator. Build it with [`Simulator::new`], then either [`Simulator::run`] a policy to
/// the end, or drive it step by step as a [`ClusterBackend`](crate::ClusterBackend)
/// ([`Simulator::advance`]).
#[derive(Debug)]
pub struct Simulator {
    pub(super) cfg: SimConfig,
    /// Jobs in submit order; a job's index is its id.
    pub(super) jobs: Vec<Job>,
    /// Job indices in submit order, read from `next_arrival` on.
    pub(super) arrivals: Vec<u32>,
    pub(super) next_arrival: usize,
    pub(super) heap: BinaryHeap<Reverse<Ev>>,
    /// Sequence number of the last event pushed.
    pub(super) seq: u64,
    pub(super) now: f64,
    /// First submit.
    pub(super) t0: f64,
    pub(super) cap: Capacity,
    /// GPU speed of each node.
    pub(super) speed: Vec<f64>,
    /// GPU type of each node.
    pub(super) node_type: Vec<u16>,
    /// Per GPU type, which nodes are of that type.
    pub(super) type_masks: Vec<Vec<bool>>,
    /// Per-job affinity by job index (as the snapshot shows it), when the replay has one.
    pub(super) affinity: Option<Arc<TypeAffinity>>,
    /// Speedup on `n` workers, by `n`.
    pub(super) speedup: Vec<f64>,
    /// Queued jobs in queue order (may hold jobs no longer queued; filtered when read).
    pub(super) queue: Vec<u32>,
    pub(super) running: Vec<u32>,
    /// The reused snapshot buffers.
    pub(super) snap: ClusterState,
    pub(super) finished: usize,
    pub(super) skipped_too_big: usize,
    /// Something happened that a policy should look at.
    pub(super) dirty: bool,
    /// Time of the earliest wake-up a policy asked for and is still pending.
    pub(super) pending_wake: f64,
    pub(super) busy_gpu_s: f64,
    pub(super) healthy_gpu_s: f64,
    /// Time up to which the GPU-seconds are accumulated.
    pub(super) t_acc: f64,
    pub(super) timeline: Vec<TimelinePoint>,
    pub(super) timeline_step: f64,
    pub(super) next_sample: f64,
    pub(super) log: Vec<DecisionRecord>,
    pub(super) decisions: u64,
    pub(super) rejected: u64,
    pub(super) events: u64,
    pub(super) rescales: u64,
    pub(super) suspensions: u64,
    pub(super) failures: u64,
    pub(super) policy_calls: u64,
    /// Scratch placement.
    pub(super) tmp: Vec<Slot>,
    /// The advisor of an advice replay.
    pub(super) advisor: Option<Box<super::advice::Advisor>>,
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
        let mut max_workers = 1;
        let states: Vec<Job> = jobs
            .into_iter()
            .map(|src| {
                let (min, max) = cfg.elastic.draw_bounds(&mut rng, src.gpus.max(1), total);
                max_workers = max_workers.max(max);
                Job::new(src, min, max)
            })
            .collect();
        let t0 = states.first().map_or(0.0, |j| j.src.submit);
        let t_last = states.last().map_or(0.0, |j| j.src.submit);
        let speedup = (0..=max_workers.max(1))
            .map(|n| cfg.scaling.speedup(n))
            .collect();
        let meta = cfg.cluster.node_meta();
        let speed = meta.iter().map(|m| m.speed).collect();
        let node_type: Vec<u16> = cfg.cluster.nodes.iter().map(|n| n.gpu_type).collect();
        let type_masks = (0..cfg.cluster.gpu_types.len())
            .map(|t| node_type.iter().map(|&n| usize::from(n) == t).collect())
            .collect();
        let affinity = cfg.affinity.as_ref().map(|a| {
            Arc::new(by_job_index(
                a,
                states.iter().map(|j| j.src.row),
                states.len(),
            ))
        });
        let snap = ClusterState {
            time: t0,
            gpu_types: cfg.cluster.gpu_types.clone(),
            nodes: cfg.cluster.node_infos(),
            rules: cfg.rules,
            affinity: affinity.clone(),
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
            node_type,
            type_masks,
            affinity,
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
            advisor: None,
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

    /// GPUs of healthy nodes now.
    pub fn healthy_gpus(&self) -> u32 {
        self.healthy_total()
    }

    pub(super) fn push(&mut self, t: f64, kind: EvKind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev {
            t,
            seq: self.seq,
            kind,
        }));
    }

    pub(super) fn healthy_total(&self) -> u32 {
        self.snap
            .nodes
            .iter()
            .filter(|n| n.healthy)
            .map(|n| n.gpus)
            .sum()
    }

    pub(super) fn set_time(&mut self, t: f64) {
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

    pub(super) fn cap_healthy(&self) -> u32 {
        self.cap
            .meta()
            .iter()
            .enumerate()
            .filter(|(i, _)| self.cap.healthy(*i as u32))
            .map(|(_, m)| m.gpus)
            .sum()
    }

    pub(super) fn sync(&mut self, i: u32) {
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
                    for sl in &j.slots {
                        let t = self.node_type.get(sl.node as usize).copied().unwrap_or(0);
                        let t = usize::from(t);
                        if j.gpu_s_by_type.len() <= t {
                            j.gpu_s_by_type.resize(t + 1, 0.0);
                        }
                        if let Some(x) = j.gpu_s_by_type.get_mut(t) {
                            *x += f64::from(sl.gpus) * dt;
                        }
                    }
                    j.done = (j.done + j.rate * dt).min(j.work);
                }
                State::Queued => j.queued_total += dt,
                _ => {}
            }
        }
        j.t_upd = now;
    }

    /// Work per second of job `j` (index `i`) at its placement: the speedup of its workers
    /// over its request, at its slowest node's speed for it, times the placement penalties.
    pub(super) fn rate_of(&self, i: u32, j: &Job) -> f64 {
        if j.slots.is_empty() {
            return 0.0;
        }
        let class = self
            .affinity
            .as_ref()
            .and_then(|a| a.class_of(super::job::job_id(i)));
        let speed = j
            .slots
            .iter()
            .filter_map(|s| {
                let n = s.node as usize;
                let t = usize::from(self.node_type.get(n).copied().unwrap_or(0));
                class
                    .and_then(|c| c.speeds.get(t).copied())
                    .or_else(|| self.speed.get(n).copied())
            })
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
    pub(super) fn start_progress(&mut self, i: u32) {
        let rate = self
            .jobs
            .get(i as usize)
            .map_or(0.0, |j| self.rate_of(i, j));
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
    pub(super) fn pause(&mut self, i: u32) {
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

    pub(super) fn remove_running(&mut self, i: u32) {
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

    pub(super) fn enqueue(&mut self, i: u32) {
        let now = self.now;
        if let Some(j) = self.jobs.get_mut(i as usize) {
            j.state = State::Queued;
            j.queued_since = now;
            j.t_upd = now;
            j.workers = 0;
            j.rate = 0.0;
            j.restarting = false;
            j.epoch += 1;
            j.pinned = None;
        }
        self.queue.push(i);
    }
}

/// The affinity of a config (classes by trace row) re-indexed by job index: `rows` gives each
/// job's row in index order; a row without a class gives its job none.
fn by_job_index(a: &TypeAffinity, rows: impl Iterator<Item = usize>, jobs: usize) -> TypeAffinity {
    let mut job_class = Vec::with_capacity(jobs);
    for row in rows {
        job_class.push(a.job_class.get(row).copied().unwrap_or(u16::MAX));
    }
    TypeAffinity {
        classes: a.classes.clone(),
        job_class,
    }
}
