//! An Optimus-style allocator (Peng et al., EuroSys'18): jobs start at their minimum size in
//! submit order; every reallocation interval the free GPUs go, one at a time, to the elastic job
//! whose predicted remaining time drops most from one more worker (marginal gain, from the
//! speedup curve and the predicted remaining work); when jobs wait, workers above a job's
//! request are taken back from the jobs that lose least.

use super::marginal::{fill_by_marginal_gain, predicted_remaining, time_at, GrowCandidate};
use super::planner::Planner;
use super::policy::Policy;
use crate::cluster::{ClusterState, JobId, QueuedJob, RunningJob, Slot};
use crate::decision::{Action, Decision, Reason};
use crate::scaling::ScalingModel;

/// The Optimus-style allocator.
#[derive(Debug)]
pub struct Optimus {
    pub scaling: ScalingModel,
    /// Seconds between reallocations (and the least time between two rescales of a job).
    pub interval_s: f64,
    pub starvation_s: f64,
    pub unknown_runtime_s: f64,
    planner: Planner,
    last_realloc: f64,
    order: Vec<usize>,
    freed: Vec<Slot>,
}

impl Optimus {
    /// With a 10-minute reallocation interval.
    pub fn new(scaling: ScalingModel) -> Optimus {
        Optimus {
            scaling,
            interval_s: 600.0,
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            planner: Planner::default(),
            last_realloc: f64::NEG_INFINITY,
            order: Vec::new(),
            freed: Vec::new(),
        }
    }

    fn remaining(&self, r: &RunningJob) -> f64 {
        predicted_remaining(r.predicted_runtime, r.progress_s, self.unknown_runtime_s)
    }

    fn may_rescale(&self, r: &RunningJob, now: f64) -> bool {
        r.elastic() && !r.restarting && r.last_rescale.is_none_or(|t| now - t >= self.interval_s)
    }

    /// Admits queued jobs in submit order at their minimum size, skipping what does not fit
    /// until it starves. Returns which queued jobs were admitted and whether the queue is
    /// blocked (no free GPU left, or a starving job does not fit).
    fn admit_at_minimum(
        &mut self,
        snap: &ClusterState,
        planner: &mut Planner,
        out: &mut Vec<Decision>,
    ) -> (Vec<bool>, bool) {
        self.order.clear();
        self.order.extend(0..snap.queued.len());
        self.order.sort_by(|&a, &b| {
            let (x, y) = (&snap.queued[a], &snap.queued[b]);
            x.submitted.total_cmp(&y.submitted).then(x.id.cmp(&y.id))
        });
        let mut admitted = vec![false; snap.queued.len()];
        for &k in &self.order {
            let Some(q) = snap.queued.get(k) else {
                continue;
            };
            if planner.cap.total_free() == 0 {
                return (admitted, true);
            }
            if planner.admit(snap, q, q.min_workers) {
                admitted[k] = true;
                out.push(Decision {
                    action: Action::Admit {
                        job: q.id,
                        workers: q.min_workers,
                        gpu_type: None,
                    },
                    reason: Reason::Fifo,
                });
            } else if snap.time - q.queued_since >= self.starvation_s {
                return (admitted, true);
            }
        }
        (admitted, false)
    }

    /// Takes back workers above request from the jobs that lose least, to start the head of
    /// the queue at its minimum; plans nothing unless the head then starts.
    fn reclaim_for_head(
        &mut self,
        snap: &ClusterState,
        planner: &mut Planner,
        head: &QueuedJob,
        out: &mut Vec<Decision>,
    ) {
        let now = snap.time;
        let need = head.min_workers.saturating_sub(planner.cap.total_free());
        let mut cands: Vec<(f64, usize)> = snap
            .running
            .iter()
            .enumerate()
            .filter(|(_, r)| r.workers > r.requested && self.may_rescale(r, now))
            .map(|(k, r)| {
                let rem = self.remaining(r);
                let loss = time_at(&self.scaling, rem, r.requested, r.requested)
                    - time_at(&self.scaling, rem, r.requested, r.workers);
                (loss, k)
            })
            .collect();
        cands.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut freed_total = 0;
        let mut plan: Vec<(JobId, u32)> = Vec::new();
        for (_, k) in cands {
            if freed_total >= need {
                break;
            }
            let Some(r) = snap.running.get(k) else {
                continue;
            };
            let give = (r.workers - r.requested).min(need - freed_total);
            let mut freed = std::mem::take(&mut self.freed);
            planner.shrink(snap, r, r.workers - give, &mut freed);
            self.freed = freed;
            freed_total += give;
            plan.push((r.id, r.workers - give));
        }
        if freed_total >= need && planner.admit(snap, head, head.min_workers) {
            for (job, workers) in plan {
                out.push(Decision {
                    action: Action::SetWorkers { job, workers },
                    reason: Reason::QueueWaitHigh {
                        predicted_wait_s: now - head.queued_since,
                    },
                });
            }
            out.push(Decision {
                action: Action::Admit {
                    job: head.id,
                    workers: head.min_workers,
                    gpu_type: None,
                },
                reason: Reason::Fifo,
            });
        }
    }

    /// Distributes the free GPUs over the elastic jobs by marginal gain.
    fn grow_by_marginal_gain(
        &self,
        snap: &ClusterState,
        planner: &mut Planner,
        out: &mut Vec<Decision>,
    ) {
        let now = snap.time;
        let mut target: Vec<u32> = snap.running.iter().map(|r| r.workers).collect();
        let (idx, cands): (Vec<usize>, Vec<GrowCandidate>) = snap
            .running
            .iter()
            .enumerate()
            .filter(|(_, r)| r.workers < r.max_workers && self.may_rescale(r, now))
            .map(|(k, r)| (k, GrowCandidate::of(r, self.remaining(r))))
            .unzip();
        let sizes = fill_by_marginal_gain(&self.scaling, &cands, planner.cap.total_free());
        for (k, t) in idx.into_iter().zip(sizes) {
            if let Some(slot) = target.get_mut(k) {
                *slot = t;
            }
        }
        for (k, r) in snap.running.iter().enumerate() {
            let t = target[k];
            if t > r.workers && planner.grow(snap, r, t) {
                let rem = self.remaining(r);
                out.push(Decision {
                    action: Action::SetWorkers {
                        job: r.id,
                        workers: t,
                    },
                    reason: Reason::MarginalGain {
                        gain_s: time_at(&self.scaling, rem, r.requested, r.workers)
                            - time_at(&self.scaling, rem, r.requested, t),
                    },
                });
            }
        }
    }
}

impl Policy for Optimus {
    fn name(&self) -> &str {
        "optimus"
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        let mut planner = std::mem::take(&mut self.planner);
        planner.reset(snap);
        let now = snap.time;
        let (admitted, blocked) = self.admit_at_minimum(snap, &mut planner, out);
        let realloc_due = now - self.last_realloc >= self.interval_s;
        let has_elastic = snap.running.iter().any(RunningJob::elastic);
        if realloc_due && has_elastic {
            self.last_realloc = now;
            let head = self
                .order
                .iter()
                .filter(|&&k| !admitted[k])
                .find_map(|&k| snap.queued.get(k));
            if let Some(head) = head {
                self.reclaim_for_head(snap, &mut planner, head, out);
            } else if !blocked {
                self.grow_by_marginal_gain(snap, &mut planner, out);
            }
        }
        self.planner = planner;
        has_elastic.then_some(self.last_realloc + self.interval_s)
    }
}
