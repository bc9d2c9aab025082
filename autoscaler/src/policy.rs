//! Scheduling policies, all behind one [`Policy`] trait: look at a [`ClusterSnapshot`], append
//! [`Decision`]s in the order they must be applied.
//!
//! Baselines: [`Fifo`] (static, strict submit order), [`SjfPredicted`] (shortest predicted
//! GPU-time first, Helios' QSSF), [`SrtfOracle`] (preemptive, shortest true remaining GPU-time:
//! the ceiling), [`Tiresias`] (2D-LAS over discretised attained service, preemptive),
//! [`Optimus`](crate::optimus::Optimus) (marginal-gain worker allocation), and Augur's own
//! [`ElasticController`](crate::elastic::ElasticController).
//!
//! Policies check every action against a copy of the snapshot's free GPUs with the backend's
//! own placement rules ([`Capacity`]), so what they ask for fits when the backend applies it in
//! order.

use crate::backend::{
    Action, ClusterSnapshot, Decision, JobId, QueuedJob, Reason, RunningJob, Slot,
};
use crate::placement::Capacity;

/// A scheduling policy.
///
/// `decide` appends decisions to `out` in the order they must be applied and returns the
/// latest time it wants to be asked again even if nothing happens (`None`: on the next event).
/// Policies are deterministic: the same snapshots give the same decisions.
pub trait Policy {
    /// Short name (`fifo`, `elastic`, ...).
    fn name(&self) -> &str;
    /// Decides on a snapshot.
    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64>;
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        (**self).decide(snap, out)
    }
}

/// Names accepted by [`by_name`].
pub const POLICY_NAMES: [&str; 6] = [
    "fifo",
    "sjf-pred",
    "srtf-oracle",
    "tiresias",
    "optimus",
    "elastic",
];

/// A policy by name with default parameters; `scaling` is the speedup curve the elastic
/// policies plan with.
pub fn by_name(name: &str, scaling: crate::scaling::ScalingModel) -> Option<Box<dyn Policy>> {
    Some(match name {
        "fifo" => Box::new(Fifo::default()),
        "sjf-pred" => Box::new(SjfPredicted::default()),
        "srtf-oracle" => Box::new(SrtfOracle::default()),
        "tiresias" => Box::new(Tiresias::default()),
        "optimus" => Box::new(crate::optimus::Optimus::new(scaling)),
        "elastic" => Box::new(crate::elastic::ElasticController::new(
            crate::elastic::ElasticParams::default(),
            scaling,
        )),
        _ => return None,
    })
}

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
            crate::placement::shrink_plan(snap.placement_of(r), r.workers - workers, freed);
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

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Admits queued jobs in `order` at their requested size while they fit. A job that does not
/// fit is skipped, unless it has waited `block_after_s` or more: then nothing behind it starts
/// (it keeps the GPUs that free up). Returns when to look again (locality relaxing of the
/// blocking job).
pub fn admit_in_order(
    snap: &ClusterSnapshot,
    planner: &mut Planner,
    order: &[usize],
    block_after_s: f64,
    reason: &dyn Fn(&QueuedJob) -> Reason,
    out: &mut Vec<Decision>,
) -> Option<f64> {
    let mut wake = None;
    for &k in order {
        let Some(q) = snap.queued.get(k) else {
            continue;
        };
        if planner.cap.total_free() == 0 {
            break;
        }
        if planner.admit(snap, q, q.requested) {
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                },
                reason: reason(q),
            });
        } else if snap.time - q.queued_since >= block_after_s {
            wake = min_opt(wake, next_relax(snap, q));
            break;
        }
    }
    wake
}

/// First-in first-out, static sizes: jobs start in submit order; a job that does not fit is
/// skipped (later, smaller jobs may start) until it has waited `block_after_s`, then it blocks
/// everything behind it until it starts. `block_after_s = 0` is strict FIFO.
#[derive(Debug)]
pub struct Fifo {
    pub block_after_s: f64,
    planner: Planner,
    order: Vec<usize>,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            block_after_s: 12.0 * 3600.0,
            planner: Planner::default(),
            order: Vec::new(),
        }
    }
}

impl Fifo {
    /// Strict FIFO: the head of the queue blocks everything behind it.
    pub fn strict() -> Fifo {
        Fifo {
            block_after_s: 0.0,
            ..Fifo::default()
        }
    }
}

impl Policy for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        self.order.clear();
        self.order.extend(0..snap.queued.len());
        // a preempted/failed job keeps its place by submit time
        self.order.sort_by(|&a, &b| {
            let (x, y) = (&snap.queued[a], &snap.queued[b]);
            x.submitted.total_cmp(&y.submitted).then(x.id.cmp(&y.id))
        });
        // (a job that starts to block needs no wake-up: blocking only matters when GPUs free up)
        admit_in_order(
            snap,
            &mut self.planner,
            &self.order,
            self.block_after_s,
            &|_| Reason::Fifo,
            out,
        )
    }
}

/// Predicted GPU-seconds of a queued job (`fallback_s` when there is no prediction).
pub fn predicted_gpu_s(q: &QueuedJob, fallback_s: f64) -> f64 {
    q.predicted_runtime.unwrap_or(fallback_s) * f64::from(q.requested)
}

/// Shortest predicted GPU-time first, static sizes, non-preemptive; jobs that do not fit are
/// skipped until they have waited `starvation_s`, then they go first and block.
#[derive(Debug)]
pub struct SjfPredicted {
    pub starvation_s: f64,
    /// Run time assumed for jobs without a prediction.
    pub unknown_runtime_s: f64,
    planner: Planner,
    keyed: Vec<(bool, f64, JobId, usize)>,
    order: Vec<usize>,
}

impl Default for SjfPredicted {
    fn default() -> Self {
        SjfPredicted {
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            planner: Planner::default(),
            keyed: Vec::new(),
            order: Vec::new(),
        }
    }
}

/// Queue order of shortest-predicted-first with a starvation guard: jobs that waited
/// `starvation_s` first (oldest first), then by predicted GPU-seconds.
pub fn sjf_order(
    snap: &ClusterSnapshot,
    starvation_s: f64,
    unknown_runtime_s: f64,
    keyed: &mut Vec<(bool, f64, JobId, usize)>,
    order: &mut Vec<usize>,
) {
    keyed.clear();
    keyed.extend(snap.queued.iter().enumerate().map(|(k, q)| {
        let starving = snap.time - q.queued_since >= starvation_s;
        let key = if starving {
            q.queued_since
        } else {
            predicted_gpu_s(q, unknown_runtime_s)
        };
        (!starving, key, q.id, k)
    }));
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    order.clear();
    order.extend(keyed.iter().map(|e| e.3));
}

impl Policy for SjfPredicted {
    fn name(&self) -> &str {
        "sjf-pred"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        sjf_order(
            snap,
            self.starvation_s,
            self.unknown_runtime_s,
            &mut self.keyed,
            &mut self.order,
        );
        let starvation = self.starvation_s;
        let fallback = self.unknown_runtime_s;
        let now = snap.time;
        admit_in_order(
            snap,
            &mut self.planner,
            &self.order,
            starvation,
            &|q| {
                if now - q.queued_since >= starvation {
                    Reason::Starving {
                        waited_s: now - q.queued_since,
                    }
                } else {
                    Reason::ShortestPredicted {
                        predicted_gpu_s: predicted_gpu_s(q, fallback),
                    }
                }
            },
            out,
        )
    }
}

/// Preemptive priority scheduling shared by SRTF and Tiresias: queued jobs in priority order
/// start when they fit, preempting running jobs that `can_preempt` allows (worst first).
/// Keys: smaller is better.
fn preemptive_pass(
    snap: &ClusterSnapshot,
    planner: &mut Planner,
    queued: &[(f64, f64, usize)],
    running: &[(f64, f64, usize)],
    can_preempt: &dyn Fn((f64, f64), (f64, f64)) -> bool,
    reason: &dyn Fn(&QueuedJob, (f64, f64)) -> Reason,
    out: &mut Vec<Decision>,
) {
    // victims: worst key first
    let mut victims: Vec<&(f64, f64, usize)> = running.iter().collect();
    victims.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(b.2.cmp(&a.2))
    });
    let mut v = 0;
    let mut taken: Vec<usize> = Vec::new();
    for &(k0, k1, qi) in queued {
        let Some(q) = snap.queued.get(qi) else {
            continue;
        };
        let can_more = victims
            .get(v)
            .is_some_and(|&&(a, b, _)| can_preempt((a, b), (k0, k1)));
        if planner.cap.total_free() == 0 && !can_more {
            break;
        }
        if planner.admit(snap, q, q.requested) {
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                },
                reason: reason(q, (k0, k1)),
            });
            continue;
        }
        // preempt the worst running jobs this one beats until it fits
        taken.clear();
        let mut fits = false;
        while let Some(&&(a, b, ri)) = victims.get(v) {
            if !can_preempt((a, b), (k0, k1)) {
                break;
            }
            let Some(r) = snap.running.get(ri) else {
                v += 1;
                continue;
            };
            planner.suspend(snap, r);
            taken.push(ri);
            v += 1;
            if q.requested <= planner.cap.total_free() && planner.admit(snap, q, q.requested) {
                fits = true;
                break;
            }
        }
        if fits {
            for &ri in &taken {
                if let Some(r) = snap.running.get(ri) {
                    out.push(Decision {
                        action: Action::Suspend { job: r.id },
                        reason: Reason::Preempted { by: q.id },
                    });
                }
            }
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                },
                reason: reason(q, (k0, k1)),
            });
        } else {
            // give the victims back (in reverse) and leave them running
            for &ri in taken.iter().rev() {
                if let Some(r) = snap.running.get(ri) {
                    planner.unsuspend(snap, r);
                }
            }
            v -= taken.len();
        }
    }
}

/// Shortest remaining GPU-time first with the true remaining run times (oracle), preemptive.
/// The ceiling no real scheduler reaches.
#[derive(Debug, Default)]
pub struct SrtfOracle {
    planner: Planner,
}

impl Policy for SrtfOracle {
    fn name(&self) -> &str {
        "srtf-oracle"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        let key_q =
            |q: &QueuedJob| q.oracle_remaining_s.unwrap_or(f64::INFINITY) * f64::from(q.requested);
        let mut queued: Vec<(f64, f64, usize)> = snap
            .queued
            .iter()
            .enumerate()
            .map(|(k, q)| (key_q(q), q.submitted, k))
            .collect();
        queued.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        let running: Vec<(f64, f64, usize)> = snap
            .running
            .iter()
            .enumerate()
            .map(|(k, r)| {
                (
                    r.oracle_remaining_s.unwrap_or(f64::INFINITY) * f64::from(r.requested),
                    r.submitted,
                    k,
                )
            })
            .collect();
        preemptive_pass(
            snap,
            &mut self.planner,
            &queued,
            &running,
            &|victim, job| victim.0 > job.0,
            &|_, k| Reason::ShortestRemaining {
                remaining_gpu_s: k.0,
            },
            out,
        );
        None
    }
}

/// Tiresias' discretised 2D-LAS: jobs in priority queues by attained GPU-seconds (thresholds),
/// FIFO within a queue, higher queues preempt lower ones; a queued job that waited
/// `promote_knob` × its run time goes back to the top queue (starvation guard).
#[derive(Debug)]
pub struct Tiresias {
    /// Attained-service thresholds between queues, GPU-seconds, ascending.
    pub thresholds: Vec<f64>,
    pub promote_knob: f64,
    planner: Planner,
}

impl Default for Tiresias {
    fn default() -> Self {
        Tiresias {
            thresholds: vec![3600.0, 36_000.0],
            promote_knob: 8.0,
            planner: Planner::default(),
        }
    }
}

impl Tiresias {
    fn level(&self, attained: f64) -> usize {
        self.thresholds.iter().filter(|&&t| attained >= t).count()
    }
}

impl Policy for Tiresias {
    fn name(&self) -> &str {
        "tiresias"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        let mut planner = std::mem::take(&mut self.planner);
        planner.reset(snap);
        let now = snap.time;
        let mut wake = f64::INFINITY;
        let mut queued: Vec<(f64, f64, usize)> = snap
            .queued
            .iter()
            .enumerate()
            .map(|(k, q)| {
                let promote_at = q.queued_since + self.promote_knob * q.run_s;
                let level = if q.run_s > 0.0 && now >= promote_at {
                    0
                } else {
                    if q.run_s > 0.0 {
                        wake = wake.min(promote_at);
                    }
                    self.level(q.attained_gpu_s)
                };
                (level as f64, q.submitted, k)
            })
            .collect();
        queued.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        let running: Vec<(f64, f64, usize)> = snap
            .running
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let level = self.level(r.attained_gpu_s);
                // when it crosses into the next queue
                if let Some(&t) = self.thresholds.get(level) {
                    if r.workers > 0 {
                        wake = wake.min(now + (t - r.attained_gpu_s) / f64::from(r.workers));
                    }
                }
                (level as f64, r.submitted, k)
            })
            .collect();
        preemptive_pass(
            snap,
            &mut planner,
            &queued,
            &running,
            &|victim, job| victim.0 > job.0,
            &|_, k| Reason::LeastAttained { queue: k.0 as u8 },
            out,
        );
        self.planner = planner;
        wake.is_finite().then_some(wake)
    }
}
