//! The state of one decision of the elastic controller ([`Round`]): the planned free GPUs, the
//! queue order, the running jobs as the decision sees them ([`View`]), shrinks planned but not
//! yet committed ([`Shrinks`]), what the jobs left waiting hold back, and when to look again.

use super::estimate::Estimates;
use crate::cluster::{ClusterState, JobId, QueuedJob, RunningJob, Slot};
use crate::decision::{Action, Decision, Reason};
use crate::policies::planner::Planner;

/// Per-running-job facts of one decision.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    /// Predicted remaining seconds at its current size (on its GPU type when type-aware).
    pub time: f64,
    /// Predicted remaining GPU-seconds at its requested size (the ranking key; on its GPU
    /// type when type-aware).
    pub key: f64,
    /// Workers it has now in the plan.
    pub workers: u32,
    /// Taken by this decision already (shrunk, preempted).
    pub touched: bool,
}

/// The running jobs as one decision sees them, computed on first need (only a queued job that
/// does not fit as requested needs them). Indices are into the snapshot's running jobs.
#[derive(Debug, Default)]
pub(super) struct View {
    ready: bool,
    pub runs: Vec<Run>,
    /// Jobs above their request, in the order they give lent workers back.
    pub lenders: Vec<usize>,
    /// Preemption order: largest predicted remaining GPU-time first.
    pub victims: Vec<usize>,
    /// Elastic jobs above their minimum, longest predicted remaining time first.
    pub shrinkable: Vec<usize>,
    /// (predicted remaining time, workers) of every running job, soonest done first.
    pub frees: Vec<(f64, u32)>,
}

impl View {
    /// Computes the view of `snap`'s running jobs unless done already this decision.
    pub fn ensure(&mut self, snap: &ClusterState, est: &Estimates) {
        if self.ready {
            return;
        }
        self.ready = true;
        self.runs = snap
            .running
            .iter()
            .map(|r| {
                let work = est.remaining_r(snap, r);
                Run {
                    time: est.time_at(work, r.requested, r.workers),
                    key: work * f64::from(r.requested),
                    workers: r.workers,
                    touched: false,
                }
            })
            .collect();
        let runs = &self.runs;
        let by_time_desc = |v: &mut Vec<usize>| {
            v.sort_by(|&a, &b| runs[b].time.total_cmp(&runs[a].time).then(a.cmp(&b)));
        };
        self.lenders = lenders(snap, est);
        if !est.params.reclaim_least_loss {
            by_time_desc(&mut self.lenders);
        }
        self.victims = (0..snap.running.len()).collect();
        self.victims
            .sort_by(|&a, &b| runs[b].key.total_cmp(&runs[a].key).then(a.cmp(&b)));
        self.shrinkable = (0..snap.running.len())
            .filter(|&i| {
                let r = &snap.running[i];
                r.elastic() && r.workers > r.min_workers && !r.restarting
            })
            .collect();
        by_time_desc(&mut self.shrinkable);
        self.frees = runs.iter().map(|r| (r.time, r.workers)).collect();
        self.frees.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

impl View {
    /// True when running job `k` was shrunk, preempted or moved by this decision.
    pub fn touched(&self, k: usize) -> bool {
        self.ready && self.runs.get(k).is_some_and(|r| r.touched)
    }
}

/// Running jobs above their request; with `reclaim_least_loss`, the one whose last worker
/// saves least gives first (otherwise in index order, for the caller to sort).
fn lenders(snap: &ClusterState, est: &Estimates) -> Vec<usize> {
    let lenders: Vec<usize> = (0..snap.running.len())
        .filter(|&i| snap.running[i].workers > snap.running[i].requested)
        .collect();
    if !est.params.reclaim_least_loss {
        return lenders;
    }
    let last_gain = |i: usize| {
        let r = &snap.running[i];
        let work = est.remaining_r(snap, r);
        est.time_at(work, r.requested, r.workers - 1) - est.time_at(work, r.requested, r.workers)
    };
    let mut keyed: Vec<(f64, usize)> = lenders.iter().map(|&i| (last_gain(i), i)).collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// One planned shrink: the running job's index, its new size, the GPUs it frees.
pub(super) type Shrink = (usize, u32, Vec<Slot>);

/// Shrinks planned for one queued job, committed only if the job then starts.
#[derive(Debug, Default)]
pub(super) struct Shrinks {
    plan: Vec<Shrink>,
    freed: Vec<Slot>,
}

impl Shrinks {
    /// Plans to shrink running jobs `cands` (in order) to free `deficit` GPUs, each down to
    /// `floor(r)`; true when that frees enough (the plan stays), undoing it otherwise.
    pub fn plan(
        &mut self,
        snap: &ClusterState,
        planner: &mut Planner,
        runs: &[Run],
        cands: &[usize],
        floor: &dyn Fn(&RunningJob) -> u32,
        mut deficit: u32,
    ) -> bool {
        self.plan.clear();
        for &k in cands {
            if deficit == 0 {
                break;
            }
            let (Some(r), Some(run)) = (snap.running.get(k), runs.get(k)) else {
                continue;
            };
            let f = floor(r);
            if run.touched || run.workers <= f {
                continue;
            }
            let give = (run.workers - f).min(deficit);
            planner.shrink(snap, r, run.workers - give, &mut self.freed);
            self.plan.push((k, run.workers - give, self.freed.clone()));
            deficit -= give;
        }
        if deficit > 0 {
            self.undo(planner);
            return false;
        }
        true
    }

    /// Gives the planned shrinks' GPUs back to their jobs and forgets the plan.
    pub fn undo(&mut self, planner: &mut Planner) {
        for (_, _, freed) in self.plan.iter().rev() {
            planner.cap.occupy(freed);
        }
        self.plan.clear();
    }

    /// Emits the planned shrinks as decisions with `reason`, marks the jobs taken, and
    /// forgets the plan.
    pub fn commit(
        &mut self,
        snap: &ClusterState,
        runs: &mut [Run],
        reason: Reason,
        out: &mut Vec<Decision>,
    ) {
        for (k, to, _) in &self.plan {
            if let (Some(r), Some(run)) = (snap.running.get(*k), runs.get_mut(*k)) {
                run.workers = *to;
                run.touched = true;
                out.push(Decision {
                    action: Action::SetWorkers {
                        job: r.id,
                        workers: *to,
                    },
                    reason,
                });
            }
        }
        self.plan.clear();
    }
}

/// An elastic job this decision admits at its request: it may start bigger when GPUs are
/// handed out at the end.
#[derive(Debug, Clone)]
pub(super) struct Fresh {
    /// Index into the snapshot's queued jobs.
    pub queued: usize,
    /// Index of its admission in the decision's output.
    pub at: usize,
    /// Its planned placement.
    pub slots: Vec<Slot>,
    /// The GPU type it starts on (type-aware only).
    pub on: Option<TypePref>,
}

/// One GPU type a queued job may start on: the type, the job's speed there (relative to the
/// reference type) and its gain (that speed over the type's typical speed).
#[derive(Debug, Clone, Copy)]
pub(super) struct TypePref {
    pub gpu_type: u16,
    pub speed: f64,
    pub gain: f64,
}

/// The state of one decision (its buffers are kept between decisions).
#[derive(Debug, Default)]
pub(super) struct Round {
    pub planner: Planner,
    /// Place jobs on one GPU type each, in [`Round::prefs`] order.
    pub type_aware: bool,
    /// The GPU types the cluster has nodes of (type-aware only).
    pub types: Vec<u16>,
    /// The GPU types the queued job being started may use, best first (type-aware only).
    pub prefs: Vec<TypePref>,
    /// Per rank, the queued job's fastest GPU type (position in [`Round::types`]) and its
    /// gain there (type-aware only).
    pub fastest: Vec<(usize, f64)>,
    /// GPUs free when the decision began.
    pub free_at_start: u32,
    /// Queue order: (not starving, key, id, index into the queued jobs), sorted.
    pub keyed: Vec<(bool, f64, JobId, usize)>,
    pub view: View,
    pub shrinks: Shrinks,
    pub fresh: Vec<Fresh>,
    /// Queued jobs that reclaimed, preempted or shrank (or tried to) this decision.
    pub pressure: usize,
    /// A starving job waits: nothing behind it starts and nothing grows.
    pub blocked: bool,
    /// Queued jobs left waiting.
    pub waiting: usize,
    /// GPUs the jobs left waiting need (their minimum), kept back from growing.
    pub reserved: u32,
    /// When to look again at the latest (infinite: no need).
    pub wake: f64,
}

impl Round {
    /// Starts a decision on `snap`.
    pub fn reset(&mut self, snap: &ClusterState) {
        self.planner.reset(snap);
        self.types.clear();
        self.prefs.clear();
        self.fastest.clear();
        self.free_at_start = 0;
        self.keyed.clear();
        self.view.ready = false;
        self.shrinks.plan.clear();
        self.fresh.clear();
        self.pressure = 0;
        self.blocked = false;
        self.waiting = 0;
        self.reserved = 0;
        self.wake = f64::INFINITY;
    }

    /// Leaves `q` waiting: its minimum is kept back from growing.
    pub fn wait(&mut self, q: &QueuedJob) {
        self.waiting += 1;
        self.reserved = self.reserved.saturating_add(q.min_workers.max(1));
    }

    /// Plans to admit `q` with `workers`: type-blind (or `q`'s type not open and unknown),
    /// wherever it fits; type-aware, on the first GPU type of [`Round::prefs`] where it fits. `None` when it fits nowhere, else the
    /// type chosen (`None` inside when type-blind).
    pub fn place(
        &mut self,
        snap: &ClusterState,
        q: &QueuedJob,
        workers: u32,
    ) -> Option<Option<TypePref>> {
        if !self.type_aware || (!q.type_open && self.prefs.is_empty()) {
            return self.planner.admit(snap, q, workers).then_some(None);
        }
        for k in 0..self.prefs.len() {
            let p = self.prefs[k];
            if self.planner.admit_on(snap, q, workers, Some(p.gpu_type)) {
                return Some(Some(p));
            }
        }
        // a gang bigger than every type's GPUs can only run over mixed types
        if workers > self.planner.largest_type() {
            return self.planner.admit(snap, q, workers).then_some(None);
        }
        None
    }

    /// Lowers the wake-up time to `t` if it is in the future.
    pub fn wake_at(&mut self, t: f64, now: f64) {
        min_wake(&mut self.wake, t, now);
    }
}

/// The typical speed of GPU type `t` (its nominal speed; 1 when unknown).
pub(super) fn typical_speed(snap: &ClusterState, t: u16) -> f64 {
    snap.gpu_types
        .get(usize::from(t))
        .map_or(1.0, |g| if g.speed > 0.0 { g.speed } else { 1.0 })
}

/// Lowers `w` to `t` if `t` is after `now`.
pub(super) fn min_wake(w: &mut f64, t: f64, now: f64) {
    if t > now && t < *w {
        *w = t;
    }
}

/// Admit `job` with `workers`, for `reason`; on GPU type `on` when chosen (the reason then
/// names the type and the gain, and `reason` becomes its step).
pub(super) fn admit(job: JobId, workers: u32, on: Option<TypePref>, reason: Reason) -> Decision {
    Decision {
        action: Action::Admit {
            job,
            workers,
            gpu_type: on.map(|p| p.gpu_type),
        },
        reason: match on {
            Some(p) => Reason::TypeGain {
                gpu_type: p.gpu_type,
                speed: p.speed,
                gain: p.gain,
                step: reason.name(),
            },
            None => reason,
        },
    }
}
