//! An Optimus-style allocator (Peng et al., EuroSys'18): jobs start at their minimum size in
//! submit order; every reallocation interval the free GPUs go, one at a time, to the elastic job
//! whose predicted remaining time drops most from one more worker (marginal gain, from the
//! speedup curve and the predicted remaining work); when jobs wait, workers above a job's
//! request are taken back from the jobs that lose least.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::backend::{Action, ClusterSnapshot, Decision, QueuedJob, Reason, RunningJob, Slot};
use crate::policy::{Planner, Policy};
use crate::scaling::ScalingModel;

/// Predicted remaining work of a job (seconds at its requested size): the prediction minus
/// the work done; a job past its prediction is assumed half done.
pub fn predicted_remaining(predicted: Option<f64>, progress: Option<f64>, fallback_s: f64) -> f64 {
    let p = predicted.unwrap_or(fallback_s);
    let done = progress.unwrap_or(0.0);
    if done < p {
        p - done
    } else {
        done.max(1.0) * 0.5
    }
}

/// Seconds `w` workers take for `work` seconds of work measured at `requested` workers.
pub fn time_at(scaling: &ScalingModel, work: f64, requested: u32, w: u32) -> f64 {
    if w == 0 {
        return f64::INFINITY;
    }
    work * scaling.speedup(requested) / scaling.speedup(w)
}

/// A job that may get more workers: its requested size (the reference of its work), its
/// workers now (the fill's starting point), its maximum, and its predicted remaining work
/// (seconds at the requested size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowCandidate {
    pub requested: u32,
    pub workers: u32,
    pub max_workers: u32,
    pub remaining: f64,
}

impl GrowCandidate {
    /// A running job with `remaining` predicted work.
    pub fn of(r: &RunningJob, remaining: f64) -> GrowCandidate {
        GrowCandidate {
            requested: r.requested,
            workers: r.workers,
            max_workers: r.max_workers,
            remaining,
        }
    }
}

/// Hands `free` GPUs out one at a time, each to the candidate whose predicted remaining time
/// drops most from one more worker, up to each one's maximum; returns each candidate's new
/// size (in the order given). Speedup curves are concave, so this maximises the total
/// predicted time saved.
pub fn fill_by_marginal_gain(
    scaling: &ScalingModel,
    cands: &[GrowCandidate],
    free: u32,
) -> Vec<u32> {
    let gain = |c: &GrowCandidate, w: u32| {
        time_at(scaling, c.remaining, c.requested, w)
            - time_at(scaling, c.remaining, c.requested, w + 1)
    };
    let mut target: Vec<u32> = cands.iter().map(|c| c.workers).collect();
    let mut heap = BinaryHeap::new();
    for (k, c) in cands.iter().enumerate() {
        if c.workers < c.max_workers {
            heap.push(Gain(gain(c, c.workers), k));
        }
    }
    let mut free = free;
    while free > 0 {
        let Some(Gain(g, k)) = heap.pop() else {
            break;
        };
        let (Some(c), Some(t)) = (cands.get(k), target.get_mut(k)) else {
            continue;
        };
        if g <= 0.0 {
            break;
        }
        *t += 1;
        free -= 1;
        if *t < c.max_workers {
            heap.push(Gain(gain(c, *t), k));
        }
    }
    target
}

#[derive(Debug, PartialEq)]
struct Gain(f64, usize);
impl Eq for Gain {}
impl PartialOrd for Gain {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Gain {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

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
}

impl Policy for Optimus {
    fn name(&self) -> &str {
        "optimus"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        let mut planner = std::mem::take(&mut self.planner);
        planner.reset(snap);
        let now = snap.time;
        // admissions: submit order at the minimum size, skipping what does not fit until it starves
        self.order.clear();
        self.order.extend(0..snap.queued.len());
        self.order.sort_by(|&a, &b| {
            let (x, y) = (&snap.queued[a], &snap.queued[b]);
            x.submitted.total_cmp(&y.submitted).then(x.id.cmp(&y.id))
        });
        let mut admitted = vec![false; snap.queued.len()];
        let mut blocked = false;
        for &k in &self.order {
            let Some(q) = snap.queued.get(k) else {
                continue;
            };
            if planner.cap.total_free() == 0 {
                blocked = true;
                break;
            }
            if planner.admit(snap, q, q.min_workers) {
                admitted[k] = true;
                out.push(Decision {
                    action: Action::Admit {
                        job: q.id,
                        workers: q.min_workers,
                    },
                    reason: Reason::Fifo,
                });
            } else if now - q.queued_since >= self.starvation_s {
                blocked = true;
                break;
            }
        }
        let waiting: Vec<&QueuedJob> = self
            .order
            .iter()
            .filter(|&&k| !admitted[k])
            .filter_map(|&k| snap.queued.get(k))
            .collect();
        let realloc_due = now - self.last_realloc >= self.interval_s;
        let has_elastic = snap.running.iter().any(RunningJob::elastic);
        if realloc_due && has_elastic {
            self.last_realloc = now;
            if let Some(head) = waiting.first() {
                // take back workers above request from the jobs that lose least, to start the head
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
                let mut plan = Vec::new();
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
                        },
                        reason: Reason::Fifo,
                    });
                }
            } else if !blocked {
                // distribute free GPUs by marginal gain
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
        self.planner = planner;
        has_elastic.then_some(self.last_realloc + self.interval_s)
    }
}
