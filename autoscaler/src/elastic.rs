//! Augur's elastic controller.
//!
//! Each decision, in this order:
//! 1. **Admit** queued jobs shortest predicted GPU-time first (jobs that waited
//!    `starvation_s` go first and keep the GPUs that free up). An elastic job that does not fit
//!    at its requested size starts smaller, down to its minimum (`StartShrunk`).
//! 2. **Scale down** when the queue's predicted wait is high: for a job still waiting whose
//!    predicted wait (time until running jobs, by their predicted remaining time, free enough
//!    GPUs) exceeds `scale_down_wait_s`, shrink running elastic jobs towards their minimum —
//!    first those grown above their request, longest predicted remaining first — just enough
//!    to start it, and start it. Nothing is shrunk unless the job then starts.
//! 3. **Scale up** when GPUs sit idle and nobody waits: give idle GPUs (beyond a headroom) to
//!    running elastic jobs with the longest predicted remaining time, up to their maximum,
//!    when the time saved is worth the restart pause.
//!
//! Hysteresis: growing needs an empty queue and at least `scale_up_idle_share` of the GPUs
//! idle, shrinking needs a predicted wait above `scale_down_wait_s`, and a job is rescaled at
//! most once per `cooldown_s`, so it never flaps. Every decision carries its [`Reason`].

use crate::backend::{
    Action, ClusterSnapshot, Decision, JobId, QueuedJob, Reason, RunningJob, Slot,
};
use crate::optimus::{predicted_remaining, time_at};
use crate::policy::{next_relax, sjf_order, Planner, Policy};
use crate::scaling::ScalingModel;

/// Knobs of the elastic controller.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ElasticParams {
    /// A queued job that waited this long goes first and blocks (seconds).
    pub starvation_s: f64,
    /// Run time assumed for a job without a prediction (seconds).
    pub unknown_runtime_s: f64,
    /// Least time between two rescales of one job (seconds).
    pub cooldown_s: f64,
    /// Shrink running jobs for a queued one only when its predicted wait exceeds this (seconds).
    pub scale_down_wait_s: f64,
    /// Grow jobs only when at least this share of healthy GPUs is idle (and nobody waits).
    pub scale_up_idle_share: f64,
    /// Share of healthy GPUs kept free when growing (room for arrivals).
    pub headroom_share: f64,
    /// Grow a job only if it saves at least this many seconds of its predicted remaining time
    /// (on top of the restart pause).
    pub min_gain_s: f64,
    /// Restart pause of a rescale the policy plans with (seconds).
    pub rescale_pause_s: f64,
    /// Start elastic jobs below their request when the request does not fit.
    pub start_shrunk: bool,
    /// Queued jobs considered for scale-down per decision.
    pub max_scale_down_jobs: usize,
}

impl Default for ElasticParams {
    fn default() -> Self {
        ElasticParams {
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            cooldown_s: 1800.0,
            scale_down_wait_s: 1800.0,
            scale_up_idle_share: 0.02,
            headroom_share: 0.0,
            min_gain_s: 600.0,
            rescale_pause_s: 30.0,
            start_shrunk: true,
            max_scale_down_jobs: 4,
        }
    }
}

/// The elastic controller (a [`Policy`]).
#[derive(Debug)]
pub struct ElasticController {
    pub params: ElasticParams,
    pub scaling: ScalingModel,
    planner: Planner,
    keyed: Vec<(bool, f64, JobId, usize)>,
    order: Vec<usize>,
    freed: Vec<Slot>,
}

impl ElasticController {
    /// A controller with these knobs planning with this speedup curve.
    pub fn new(params: ElasticParams, scaling: ScalingModel) -> ElasticController {
        ElasticController {
            params,
            scaling,
            planner: Planner::default(),
            keyed: Vec::new(),
            order: Vec::new(),
            freed: Vec::new(),
        }
    }

    fn remaining_work(&self, r: &RunningJob) -> f64 {
        predicted_remaining(
            r.predicted_runtime,
            r.progress_s,
            self.params.unknown_runtime_s,
        )
    }

    /// Predicted remaining seconds of `r` at its current size.
    fn remaining_time(&self, r: &RunningJob) -> f64 {
        time_at(
            &self.scaling,
            self.remaining_work(r),
            r.requested,
            r.workers,
        )
    }

    fn cooled(&self, r: &RunningJob, now: f64) -> bool {
        r.last_rescale
            .is_none_or(|t| now - t >= self.params.cooldown_s)
    }

    fn predicted_gpu_s(&self, q: &QueuedJob) -> f64 {
        crate::policy::predicted_gpu_s(q, self.params.unknown_runtime_s)
    }
}

fn min_wake(w: &mut f64, t: f64, now: f64) {
    if t > now && t < *w {
        *w = t;
    }
}

impl Policy for ElasticController {
    fn name(&self) -> &str {
        "elastic"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        let p = self.params;
        let now = snap.time;
        let mut planner = std::mem::take(&mut self.planner);
        let mut keyed = std::mem::take(&mut self.keyed);
        let mut order = std::mem::take(&mut self.order);
        planner.reset(snap);
        sjf_order(
            snap,
            p.starvation_s,
            p.unknown_runtime_s,
            &mut keyed,
            &mut order,
        );
        let mut wake = f64::INFINITY;

        // 1. admissions
        let mut waiting: Vec<usize> = Vec::new();
        let mut blocked = false;
        for &k in &order {
            let Some(q) = snap.queued.get(k) else {
                continue;
            };
            if blocked || planner.cap.total_free() == 0 {
                waiting.push(k);
                continue;
            }
            let starving = now - q.queued_since >= p.starvation_s;
            let reason = if starving {
                Reason::Starving {
                    waited_s: now - q.queued_since,
                }
            } else {
                Reason::ShortestPredicted {
                    predicted_gpu_s: self.predicted_gpu_s(q),
                }
            };
            if planner.admit(snap, q, q.requested) {
                out.push(Decision {
                    action: Action::Admit {
                        job: q.id,
                        workers: q.requested,
                    },
                    reason,
                });
                continue;
            }
            if p.start_shrunk && q.elastic() {
                let free = planner.cap.total_free();
                let first = q.requested.saturating_sub(1).min(free);
                let tries = [first, q.min_workers];
                let mut started = false;
                for w in tries {
                    if w >= q.min_workers && w > 0 && planner.admit(snap, q, w) {
                        out.push(Decision {
                            action: Action::Admit {
                                job: q.id,
                                workers: w,
                            },
                            reason: Reason::StartShrunk { free_gpus: free },
                        });
                        started = true;
                        break;
                    }
                }
                if started {
                    continue;
                }
            }
            waiting.push(k);
            if starving {
                blocked = true;
                if let Some(t) = next_relax(snap, q) {
                    min_wake(&mut wake, t, now);
                }
            }
        }
        for &k in &waiting {
            if let Some(q) = snap.queued.get(k) {
                min_wake(&mut wake, q.queued_since + p.starvation_s, now);
            }
        }

        // 2. scale down for jobs whose predicted wait is high
        if !waiting.is_empty() {
            // when running jobs are predicted to free their GPUs
            let mut frees: Vec<(f64, u32)> = snap
                .running
                .iter()
                .map(|r| (self.remaining_time(r), r.workers))
                .collect();
            frees.sort_by(|a, b| a.0.total_cmp(&b.0));
            // shrink candidates: grown jobs first, then longest predicted remaining first
            let mut cands: Vec<(bool, f64, usize)> = snap
                .running
                .iter()
                .enumerate()
                .filter(|(_, r)| r.elastic() && r.workers > r.min_workers && !r.restarting)
                .filter(|(_, r)| {
                    let ok = self.cooled(r, now);
                    if !ok {
                        if let Some(t) = r.last_rescale {
                            min_wake(&mut wake, t + p.cooldown_s, now);
                        }
                    }
                    ok
                })
                .map(|(k, r)| (r.workers <= r.requested, -self.remaining_time(r), k))
                .collect();
            cands.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
            let mut used = vec![false; cands.len()];
            for &k in waiting.iter().take(p.max_scale_down_jobs) {
                let Some(q) = snap.queued.get(k) else {
                    continue;
                };
                let need = q.min_workers;
                let free = planner.cap.total_free();
                // predicted wait: until finishing jobs free `need` GPUs
                let mut acc = free;
                let mut predicted_wait = f64::INFINITY;
                for &(t, w) in &frees {
                    if acc >= need {
                        break;
                    }
                    acc += w;
                    if acc >= need {
                        predicted_wait = t;
                    }
                }
                if acc >= need && free >= need {
                    predicted_wait = 0.0;
                }
                if predicted_wait < p.scale_down_wait_s {
                    continue;
                }
                let mut deficit = need.saturating_sub(free);
                let mut plan: Vec<(usize, u32, Vec<Slot>)> = Vec::new();
                for (ci, &(_, _, rk)) in cands.iter().enumerate() {
                    if deficit == 0 {
                        break;
                    }
                    if used[ci] {
                        continue;
                    }
                    let Some(r) = snap.running.get(rk) else {
                        continue;
                    };
                    let give = (r.workers - r.min_workers).min(deficit);
                    let mut freed = std::mem::take(&mut self.freed);
                    planner.shrink(snap, r, r.workers - give, &mut freed);
                    plan.push((ci, r.workers - give, freed.clone()));
                    self.freed = freed;
                    deficit -= give;
                }
                let workers = if q.requested <= planner.cap.total_free() {
                    q.requested
                } else {
                    need
                };
                let admitted = if deficit != 0 {
                    None
                } else if planner.admit(snap, q, workers) {
                    Some(workers)
                } else if workers != need && planner.admit(snap, q, need) {
                    Some(need)
                } else {
                    None
                };
                if let Some(w) = admitted {
                    for (ci, to, _) in &plan {
                        used[*ci] = true;
                        if let Some(r) = cands.get(*ci).and_then(|c| snap.running.get(c.2)) {
                            out.push(Decision {
                                action: Action::SetWorkers {
                                    job: r.id,
                                    workers: *to,
                                },
                                reason: Reason::QueueWaitHigh {
                                    predicted_wait_s: predicted_wait,
                                },
                            });
                        }
                    }
                    out.push(Decision {
                        action: Action::Admit {
                            job: q.id,
                            workers: w,
                        },
                        reason: Reason::QueueWaitHigh {
                            predicted_wait_s: predicted_wait,
                        },
                    });
                } else {
                    for (_, _, freed) in plan.iter().rev() {
                        planner.cap.occupy(freed);
                    }
                }
            }
        } else {
            // 3. scale up into idle GPUs
            let healthy = snap.healthy_gpus();
            let idle = planner.cap.total_free();
            let threshold = ((f64::from(healthy) * p.scale_up_idle_share).ceil() as u32).max(1);
            let headroom = (f64::from(healthy) * p.headroom_share).floor() as u32;
            if idle >= threshold && idle > headroom {
                let mut budget = idle - headroom;
                let mut cands: Vec<(f64, usize)> = snap
                    .running
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.elastic() && r.workers < r.max_workers && !r.restarting)
                    .filter(|(_, r)| {
                        let ok = self.cooled(r, now);
                        if !ok {
                            if let Some(t) = r.last_rescale {
                                min_wake(&mut wake, t + p.cooldown_s, now);
                            }
                        }
                        ok
                    })
                    .map(|(k, r)| (self.remaining_time(r), k))
                    .collect();
                cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                for (rem_t, k) in cands {
                    if budget == 0 {
                        break;
                    }
                    let Some(r) = snap.running.get(k) else {
                        continue;
                    };
                    let to = (r.workers + budget).min(r.max_workers);
                    let work = self.remaining_work(r);
                    let saved =
                        rem_t - time_at(&self.scaling, work, r.requested, to) - p.rescale_pause_s;
                    if saved < p.min_gain_s {
                        continue;
                    }
                    if planner.grow(snap, r, to) {
                        budget -= to - r.workers;
                        out.push(Decision {
                            action: Action::SetWorkers {
                                job: r.id,
                                workers: to,
                            },
                            reason: Reason::IdleGpus { idle_gpus: idle },
                        });
                    }
                }
            }
        }
        self.planner = planner;
        self.keyed = keyed;
        self.order = order;
        wake.is_finite().then_some(wake)
    }
}
