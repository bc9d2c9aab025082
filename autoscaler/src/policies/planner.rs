//! The scratch of one decision ([`Planner`]): the free GPUs as they will be after the decisions
//! taken so far, so every action a policy asks for fits when the backend applies them in order.

use crate::cluster::{ClusterSnapshot, QueuedJob, RunningJob, Slot};
use crate::placement::{shrink_plan, Capacity};

/// Scratch of one decision: the free GPUs as they will be after the decisions so far.
#[derive(Debug, Default)]
pub struct Planner {
    pub cap: Capacity,
    tmp: Vec<Slot>,
}

impl Planner {
    /// Starts a decision on `snap`.
    pub fn reset(&mut self, snap: &ClusterSnapshot) {
        self.cap.reset_from(snap);
    }

    /// Plans to admit `q` with `workers`; true (and the GPUs taken) when it fits under the
    /// locality the job accepts after its wait.
    pub fn admit(&mut self, snap: &ClusterSnapshot, q: &QueuedJob, workers: u32) -> bool {
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
    pub fn suspend(&mut self, snap: &ClusterSnapshot, r: &RunningJob) {
        self.cap.release(snap.placement_of(r));
    }

    /// Undoes [`Planner::suspend`].
    pub fn unsuspend(&mut self, snap: &ClusterSnapshot, r: &RunningJob) -> bool {
        self.cap.occupy(snap.placement_of(r))
    }

    /// Plans to shrink `r` to `workers`; returns the GPUs it frees (in `freed`).
    pub fn shrink(
        &mut self,
        snap: &ClusterSnapshot,
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
    pub fn grow(&mut self, snap: &ClusterSnapshot, r: &RunningJob, workers: u32) -> bool {
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
pub fn next_relax(snap: &ClusterSnapshot, q: &QueuedJob) -> Option<f64> {
    let r = &snap.rules;
    [
        q.queued_since + r.consolidated_for_s,
        q.queued_since + r.rack_for_s,
    ]
    .into_iter()
    .find(|&t| t > snap.time)
}
