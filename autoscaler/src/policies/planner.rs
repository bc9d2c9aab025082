//! The scratch of one decision ([`Planner`]): the free GPUs as they will be after the decisions
//! taken so far, so every action a policy asks for fits when the backend applies them in order.

use crate::cluster::{ClusterState, QueuedJob, RunningJob, Slot};
use crate::placement::{shrink_plan, Capacity};

/// Scratch of one decision: the free GPUs as they will be after the decisions so far.
#[derive(Debug, Default)]
pub struct Planner {
    pub cap: Capacity,
    tmp: Vec<Slot>,
    /// Per GPU type, which nodes are of that type.
    masks: Vec<Vec<bool>>,
}

impl Planner {
    /// Starts a decision on `snap`.
    pub fn reset(&mut self, snap: &ClusterState) {
        self.cap.reset_from(snap);
        let types = snap.gpu_types.len();
        let stale = self.masks.len() != types
            || self.masks.iter().enumerate().any(|(t, m)| {
                m.len() != snap.nodes.len()
                    || m.iter()
                        .zip(&snap.nodes)
                        .any(|(&b, n)| b != (usize::from(n.gpu_type) == t))
            });
        if stale {
            self.masks = (0..types)
                .map(|t| {
                    snap.nodes
                        .iter()
                        .map(|n| usize::from(n.gpu_type) == t)
                        .collect()
                })
                .collect();
        }
    }

    /// GPUs installed of the GPU type that has most (0 without types).
    pub fn largest_type(&self) -> u32 {
        self.masks
            .iter()
            .map(|m| {
                m.iter()
                    .enumerate()
                    .filter(|(_, &b)| b)
                    .map(|(i, _)| self.cap.meta().get(i).map_or(0, |n| n.gpus))
                    .sum::<u32>()
            })
            .max()
            .unwrap_or(0)
    }

    /// Free GPUs of GPU type `t` now in the plan.
    pub fn free_of_type(&self, t: u16) -> u32 {
        self.masks.get(usize::from(t)).map_or(0, |m| {
            m.iter()
                .enumerate()
                .filter(|(_, &b)| b)
                .map(|(i, _)| self.cap.free(i as u32))
                .sum()
        })
    }

    /// As [`Planner::admit`], on nodes of GPU type `gpu_type` only when given.
    pub fn admit_on(
        &mut self,
        snap: &ClusterState,
        q: &QueuedJob,
        workers: u32,
        gpu_type: Option<u16>,
    ) -> bool {
        let Some(t) = gpu_type else {
            return self.admit(snap, q, workers);
        };
        self.place_on(snap, workers, t, snap.time - q.queued_since)
    }

    /// Plans to place `workers` on nodes of GPU type `t` under the locality a job that waited
    /// `waited_s` accepts; true (and the GPUs taken) when they fit.
    pub fn place_on(&mut self, snap: &ClusterState, workers: u32, t: u16, waited_s: f64) -> bool {
        let Some(mask) = self.masks.get(usize::from(t)) else {
            return false;
        };
        if workers > self.cap.total_free() {
            return false;
        }
        let level = snap.rules.level_for(waited_s);
        self.tmp.clear();
        self.cap
            .place_within(workers, level, snap.rules.strategy, mask, &mut self.tmp)
    }

    /// As [`Planner::grow`], on nodes of GPU type `gpu_type` only when given.
    pub fn grow_on(
        &mut self,
        snap: &ClusterState,
        r: &RunningJob,
        workers: u32,
        gpu_type: Option<u16>,
    ) -> bool {
        let Some(mask) = gpu_type.and_then(|t| self.masks.get(usize::from(t))) else {
            return self.grow(snap, r, workers);
        };
        if workers <= r.workers {
            return true;
        }
        self.tmp.clear();
        self.cap.grow_within(
            snap.placement_of(r),
            workers - r.workers,
            snap.rules.strategy,
            mask,
            &mut self.tmp,
        )
    }

    /// Plans to admit `q` with `workers`; true (and the GPUs taken) when it fits under the
    /// locality the job accepts after its wait.
    pub fn admit(&mut self, snap: &ClusterState, q: &QueuedJob, workers: u32) -> bool {
        if workers > self.cap.total_free() {
            return false;
        }
        let level = snap.rules.level_for(snap.time - q.queued_since);
        self.tmp.clear();
        self.cap
            .place(workers, level, snap.rules.strategy, &mut self.tmp)
    }

    /// Where the last successful [`Planner::admit`] placed the job.
    pub fn placed(&self) -> &[Slot] {
        &self.tmp
    }

    /// Plans to suspend `r` (its GPUs become free).
    pub fn suspend(&mut self, snap: &ClusterState, r: &RunningJob) {
        self.cap.release(snap.placement_of(r));
    }

    /// Undoes [`Planner::suspend`].
    pub fn unsuspend(&mut self, snap: &ClusterState, r: &RunningJob) -> bool {
        self.cap.occupy(snap.placement_of(r))
    }

    /// Plans to shrink `r` to `workers`; returns the GPUs it frees (in `freed`).
    pub fn shrink(
        &mut self,
        snap: &ClusterState,
        r: &RunningJob,
        workers: u32,
        freed: &mut Vec<Slot>,
    ) {
        freed.clear();
        if workers < r.workers {
            shrink_plan(snap.placement_of(r), r.workers - workers, freed);
            self.cap.release(freed);
        }
    }

    /// Plans to grow `r` to `workers`; true when it fits.
    pub fn grow(&mut self, snap: &ClusterState, r: &RunningJob, workers: u32) -> bool {
        if workers <= r.workers {
            return true;
        }
        self.tmp.clear();
        self.cap.grow(
            snap.placement_of(r),
            workers - r.workers,
            snap.rules.strategy,
            &mut self.tmp,
        )
    }
}

/// When the locality of queued job `q` next relaxes, if later than now.
pub fn next_relax(snap: &ClusterState, q: &QueuedJob) -> Option<f64> {
    let r = &snap.rules;
    [
        q.queued_since + r.consolidated_for_s,
        q.queued_since + r.rack_for_s,
    ]
    .into_iter()
    .find(|&t| t > snap.time)
}
