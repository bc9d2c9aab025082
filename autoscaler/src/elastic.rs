//! Augur's elastic controller.
//!
//! Jobs are ranked by **predicted remaining GPU-time** (Augur's runtime prediction minus the
//! work done, times the requested GPUs; a job that outran its prediction is assumed half done,
//! so its estimate grows with its age, as least-attained-service would rank it). Each decision,
//! for the queued jobs in that order (jobs that waited `starvation_s` first; they block the
//! rest until they start):
//!
//! 1. **Admit** at the requested size when it fits.
//! 2. **Reclaim** workers lent to running jobs above their request (first from the jobs whose
//!    last worker saves least predicted time), just enough to start the job. Lent GPUs are
//!    given back at once: the hysteresis is on the growing side.
//! 3. **Start shrunk**: an elastic job starts below its request, down to its minimum.
//! 4. **Preempt** running jobs whose predicted remaining GPU-time is `preempt_factor` times
//!    the queued job's (worst first, each having run `min_run_s`): they checkpoint and requeue.
//! 5. **Scale down** when the queue's predicted wait is high: if the job's predicted wait
//!    (until running jobs, by predicted remaining time, free enough GPUs) exceeds
//!    `scale_down_wait_s`, shrink running elastic jobs towards their minimum (out of cooldown,
//!    longest predicted remaining first) just enough to start it.
//!
//! Nothing is shrunk or preempted unless the queued job then starts. Finally, **scale up**:
//! when at least `scale_up_idle_share` of the GPUs are idle beyond what the jobs still waiting
//! need (their minimum workers; nothing grows behind a starving job), idle GPUs beyond a
//! `headroom_share` are handed out one at a time by **marginal gain**: each to the running
//! elastic job whose predicted remaining time drops most from one more worker, up to its
//! maximum (the speedup curve is concave, so this maximises the predicted time saved, and a
//! 1-GPU job that runs for days gets its second GPU before a 16-GPU job gets its seventeenth).
//! A job is grown only when that saves at least `min_gain_s` beyond the restart pause and at
//! least `min_gain_share` (10%) of its predicted remaining time. Elastic jobs this decision
//! admits at their request take part in the same hand-out and start at the size it gives them
//! (no restart right after the start).
//!
//! No flapping: a job is grown at most once per `cooldown_s` after any rescale; shrinking
//! below the request also waits for the cooldown; only lent workers come back at once, and a
//! job that gave them back is not grown again before its cooldown ends. Every decision carries
//! its [`Reason`].

use crate::backend::{
    Action, ClusterSnapshot, Decision, JobId, QueuedJob, Reason, RunningJob, Slot,
};
use crate::optimus::{fill_by_marginal_gain, predicted_remaining, time_at, GrowCandidate};
use crate::policy::{next_relax, Planner, Policy};
use crate::scaling::ScalingModel;

/// Knobs of the elastic controller.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ElasticParams {
    /// A queued job that waited this long goes first and blocks (seconds).
    pub starvation_s: f64,
    /// Run time assumed for a job without a prediction (seconds).
    pub unknown_runtime_s: f64,
    /// Least time between a rescale of a job and growing or shrinking it below its request
    /// again (seconds).
    pub cooldown_s: f64,
    /// Shrink running jobs below their request for a queued one only when its predicted wait
    /// exceeds this (seconds).
    pub scale_down_wait_s: f64,
    /// Grow jobs only when at least this share of healthy GPUs is idle (and nobody waits).
    pub scale_up_idle_share: f64,
    /// Share of healthy GPUs kept free when growing (room for arrivals).
    pub headroom_share: f64,
    /// Grow a job only if it saves at least this many seconds of its predicted remaining time
    /// (beyond the restart pause).
    pub min_gain_s: f64,
    /// ...and at least this share of its predicted remaining time: a rescale that speeds a
    /// job up by less than the slowdown a worse placement can cost (more nodes, another rack)
    /// is not worth its restart.
    pub min_gain_share: f64,
    /// Restart pause of a rescale the policy plans with (seconds).
    pub rescale_pause_s: f64,
    /// Start elastic jobs below their request when the request does not fit.
    pub start_shrunk: bool,
    /// Preempt a running job when its predicted remaining GPU-time is this many times the
    /// queued job's; `None` never preempts.
    pub preempt_factor: Option<f64>,
    /// A running job is not preempted before it ran this long in its current run (seconds).
    pub min_run_s: f64,
    /// Queued jobs that may reclaim, preempt or shrink per decision.
    pub max_pressure_jobs: usize,
    /// Grow running jobs into idle GPUs beyond what the waiting jobs need even while some
    /// wait (for placement or behind a starving job, never past a starving one); `false`
    /// grows only when nobody waits.
    pub grow_past_queue: bool,
    /// Hand idle GPUs out one at a time by marginal gain (the job whose predicted remaining
    /// time drops most from one more worker); `false` grows the longest jobs first, each to
    /// its maximum.
    pub grow_by_marginal_gain: bool,
    /// Reclaim lent workers first from the jobs whose last worker saves least.
    pub reclaim_least_loss: bool,
}

impl Default for ElasticParams {
    fn default() -> Self {
        ElasticParams {
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            cooldown_s: 1800.0,
            scale_down_wait_s: 1800.0,
            scale_up_idle_share: 0.02,
            headroom_share: 0.05,
            min_gain_s: 600.0,
            min_gain_share: 0.1,
            rescale_pause_s: 30.0,
            start_shrunk: true,
            preempt_factor: Some(2.0),
            min_run_s: 300.0,
            max_pressure_jobs: 16,
            grow_past_queue: true,
            grow_by_marginal_gain: true,
            reclaim_least_loss: true,
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
    freed: Vec<Slot>,
}

/// Per-running-job facts of one decision.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Predicted remaining seconds at its current size.
    time: f64,
    /// Predicted remaining GPU-seconds at its requested size (the ranking key).
    key: f64,
    /// Workers it has now in the plan.
    workers: u32,
    /// Taken by this decision already (shrunk, preempted).
    touched: bool,
}

impl ElasticController {
    /// A controller with these knobs planning with this speedup curve.
    pub fn new(params: ElasticParams, scaling: ScalingModel) -> ElasticController {
        ElasticController {
            params,
            scaling,
            planner: Planner::default(),
            keyed: Vec::new(),
            freed: Vec::new(),
        }
    }

    fn remaining_work_r(&self, r: &RunningJob) -> f64 {
        predicted_remaining(
            r.predicted_runtime,
            r.progress_s,
            self.params.unknown_runtime_s,
        )
    }

    fn remaining_work_q(&self, q: &QueuedJob) -> f64 {
        predicted_remaining(
            q.predicted_runtime,
            q.progress_s,
            self.params.unknown_runtime_s,
        )
    }

    fn key_q(&self, q: &QueuedJob) -> f64 {
        self.remaining_work_q(q) * f64::from(q.requested)
    }

    fn cooled(&self, r: &RunningJob, now: f64) -> bool {
        r.last_rescale
            .is_none_or(|t| now - t >= self.params.cooldown_s)
    }

    /// Shrinks running jobs `cands` (indices into `snap.running`) in order to free `deficit`
    /// GPUs, each down to `floor(r)`; returns the plan (job index, new size, freed slots) when
    /// it frees enough, undoing it otherwise.
    #[allow(clippy::too_many_arguments)]
    fn plan_shrinks(
        &mut self,
        snap: &ClusterSnapshot,
        planner: &mut Planner,
        runs: &[Run],
        cands: &[usize],
        floor: &dyn Fn(&RunningJob) -> u32,
        mut deficit: u32,
        plan: &mut Vec<(usize, u32, Vec<Slot>)>,
    ) -> bool {
        plan.clear();
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
            let mut freed = std::mem::take(&mut self.freed);
            planner.shrink(snap, r, run.workers - give, &mut freed);
            plan.push((k, run.workers - give, freed.clone()));
            self.freed = freed;
            deficit -= give;
        }
        if deficit > 0 {
            undo(planner, plan);
            return false;
        }
        true
    }
}

fn undo(planner: &mut Planner, plan: &mut Vec<(usize, u32, Vec<Slot>)>) {
    for (_, _, freed) in plan.iter().rev() {
        planner.cap.occupy(freed);
    }
    plan.clear();
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
        planner.reset(snap);
        let mut wake = f64::INFINITY;

        // queue order: starving first (oldest first), then predicted remaining GPU-time
        keyed.clear();
        keyed.extend(snap.queued.iter().enumerate().map(|(k, q)| {
            let starving = now - q.queued_since >= p.starvation_s;
            let key = if starving {
                q.queued_since
            } else {
                self.key_q(q)
            };
            (!starving, key, q.id, k)
        }));
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));

        // running jobs, computed on first need
        let mut runs: Vec<Run> = Vec::new();
        let mut lenders: Vec<usize> = Vec::new();
        let mut victims: Vec<usize> = Vec::new();
        let mut shrinkable: Vec<usize> = Vec::new();
        let mut frees: Vec<(f64, u32)> = Vec::new();
        let mut plan: Vec<(usize, u32, Vec<Slot>)> = Vec::new();
        let mut pressure = 0usize;
        let mut blocked = false;
        let mut waiting = 0usize;
        // GPUs the jobs left waiting need (their minimum), kept back from growing
        let mut reserved = 0u32;
        // elastic jobs admitted at their request by this decision: (queued index, index of
        // the admission in `out`, its planned placement); they may start bigger below
        let mut fresh: Vec<(usize, usize, Vec<Slot>)> = Vec::new();

        for &(not_starving, key, _, k) in keyed.iter() {
            let Some(q) = snap.queued.get(k) else {
                continue;
            };
            if blocked {
                waiting += 1;
                reserved = reserved.saturating_add(q.min_workers.max(1));
                continue;
            }
            let starving = !not_starving;
            let reason = if starving {
                Reason::Starving {
                    waited_s: now - q.queued_since,
                }
            } else {
                Reason::ShortestPredicted {
                    predicted_gpu_s: key,
                }
            };
            // 1. as requested
            if planner.cap.total_free() > 0 && planner.admit(snap, q, q.requested) {
                if q.elastic() {
                    fresh.push((k, out.len(), planner.placed().to_vec()));
                }
                out.push(admit(q.id, q.requested, reason));
                continue;
            }
            if pressure >= p.max_pressure_jobs {
                waiting += 1;
                reserved = reserved.saturating_add(q.min_workers.max(1));
                if starving {
                    blocked = true;
                }
                continue;
            }
            pressure += 1;
            if runs.is_empty() && !snap.running.is_empty() {
                runs = snap
                    .running
                    .iter()
                    .map(|r| {
                        let work = self.remaining_work_r(r);
                        Run {
                            time: time_at(&self.scaling, work, r.requested, r.workers),
                            key: work * f64::from(r.requested),
                            workers: r.workers,
                            touched: false,
                        }
                    })
                    .collect();
                let by_time_desc = |v: &mut Vec<usize>| {
                    v.sort_by(|&a, &b| runs[b].time.total_cmp(&runs[a].time).then(a.cmp(&b)));
                };
                lenders = (0..snap.running.len())
                    .filter(|&i| snap.running[i].workers > snap.running[i].requested)
                    .collect();
                if p.reclaim_least_loss {
                    // the lender whose last worker saves least gives first
                    let last_gain = |i: usize| {
                        let r = &snap.running[i];
                        let work = self.remaining_work_r(r);
                        time_at(&self.scaling, work, r.requested, r.workers - 1)
                            - time_at(&self.scaling, work, r.requested, r.workers)
                    };
                    let mut keyed: Vec<(f64, usize)> =
                        lenders.iter().map(|&i| (last_gain(i), i)).collect();
                    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    lenders = keyed.into_iter().map(|(_, i)| i).collect();
                } else {
                    by_time_desc(&mut lenders);
                }
                victims = (0..snap.running.len()).collect();
                victims.sort_by(|&a, &b| runs[b].key.total_cmp(&runs[a].key).then(a.cmp(&b)));
                shrinkable = (0..snap.running.len())
                    .filter(|&i| {
                        let r = &snap.running[i];
                        r.elastic() && r.workers > r.min_workers && !r.restarting
                    })
                    .collect();
                by_time_desc(&mut shrinkable);
                frees = runs.iter().map(|r| (r.time, r.workers)).collect();
                frees.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            // 2. reclaim lent workers
            let deficit = q.requested.saturating_sub(planner.cap.total_free());
            if deficit > 0
                && self.plan_shrinks(
                    snap,
                    &mut planner,
                    &runs,
                    &lenders,
                    &|r| r.requested,
                    deficit,
                    &mut plan,
                )
            {
                if planner.admit(snap, q, q.requested) {
                    emit_shrinks(snap, &mut runs, &plan, Reason::Reclaimed { by: q.id }, out);
                    out.push(admit(q.id, q.requested, reason));
                    plan.clear();
                    continue;
                }
                undo(&mut planner, &mut plan);
            }
            // 3. start shrunk
            if p.start_shrunk && q.elastic() {
                let free = planner.cap.total_free();
                let first = q.requested.saturating_sub(1).min(free);
                let mut started = false;
                for w in [first, q.min_workers] {
                    if w >= q.min_workers && w > 0 && planner.admit(snap, q, w) {
                        out.push(admit(q.id, w, Reason::StartShrunk { free_gpus: free }));
                        started = true;
                        break;
                    }
                }
                if started {
                    continue;
                }
            }
            // 4. preempt jobs with far more predicted remaining work
            if let Some(factor) = p.preempt_factor {
                let mut taken: Vec<usize> = Vec::new();
                let mut fits = false;
                for &vi in &victims {
                    let (Some(r), Some(run)) = (snap.running.get(vi), runs.get(vi)) else {
                        continue;
                    };
                    if run.key <= factor * key.max(1.0) || starving && run.key <= key {
                        break;
                    }
                    if run.touched || r.restarting || now - r.started < p.min_run_s {
                        continue;
                    }
                    planner.suspend(snap, r);
                    taken.push(vi);
                    if q.requested <= planner.cap.total_free()
                        && planner.admit(snap, q, q.requested)
                    {
                        fits = true;
                        break;
                    }
                }
                if fits {
                    for &vi in &taken {
                        if let (Some(r), Some(run)) = (snap.running.get(vi), runs.get_mut(vi)) {
                            run.touched = true;
                            out.push(Decision {
                                action: Action::Suspend { job: r.id },
                                reason: Reason::Preempted { by: q.id },
                            });
                        }
                    }
                    out.push(admit(q.id, q.requested, reason));
                    continue;
                }
                for &vi in taken.iter().rev() {
                    if let Some(r) = snap.running.get(vi) {
                        planner.unsuspend(snap, r);
                    }
                }
            }
            // 5. shrink below request when the predicted wait is high
            let need = q.min_workers;
            let free = planner.cap.total_free();
            let mut acc = free;
            let mut predicted_wait = if free >= need { 0.0 } else { f64::INFINITY };
            for &(t, w) in &frees {
                if acc >= need {
                    break;
                }
                acc += w;
                if acc >= need {
                    predicted_wait = t;
                }
            }
            if predicted_wait >= p.scale_down_wait_s {
                let cands: Vec<usize> = shrinkable
                    .iter()
                    .copied()
                    .filter(|&i| {
                        let r = &snap.running[i];
                        let ok = self.cooled(r, now);
                        if !ok {
                            if let Some(t) = r.last_rescale {
                                min_wake(&mut wake, t + p.cooldown_s, now);
                            }
                        }
                        ok
                    })
                    .collect();
                let deficit = need.saturating_sub(free);
                if self.plan_shrinks(
                    snap,
                    &mut planner,
                    &runs,
                    &cands,
                    &|r| r.min_workers,
                    deficit,
                    &mut plan,
                ) {
                    let w = if planner.admit(snap, q, need) {
                        Some(need)
                    } else {
                        None
                    };
                    if let Some(w) = w {
                        emit_shrinks(
                            snap,
                            &mut runs,
                            &plan,
                            Reason::QueueWaitHigh {
                                predicted_wait_s: predicted_wait,
                            },
                            out,
                        );
                        out.push(admit(
                            q.id,
                            w,
                            Reason::QueueWaitHigh {
                                predicted_wait_s: predicted_wait,
                            },
                        ));
                        plan.clear();
                        continue;
                    }
                    undo(&mut planner, &mut plan);
                }
            }
            waiting += 1;
            reserved = reserved.saturating_add(q.min_workers.max(1));
            if let Some(t) = next_relax(snap, q) {
                min_wake(&mut wake, t, now);
            }
            if starving {
                blocked = true;
            }
        }

        // scale up into idle GPUs when nobody waits
        if !blocked && (waiting == 0 || p.grow_past_queue) {
            let healthy = snap.healthy_gpus();
            let idle = planner.cap.total_free().saturating_sub(reserved);
            let threshold = ((f64::from(healthy) * p.scale_up_idle_share).ceil() as u32).max(1);
            let headroom = (f64::from(healthy) * p.headroom_share).ceil() as u32;
            if idle >= threshold && idle > headroom {
                let budget = idle - headroom;
                // candidates: running elastic jobs out of cooldown, and the elastic jobs this
                // decision admits at their request (they start at the size the fill gives
                // them, with no restart)
                let mut who: Vec<Grown> = Vec::new();
                let mut cands: Vec<GrowCandidate> = Vec::new();
                for (k, r) in snap.running.iter().enumerate() {
                    if !r.elastic() || r.workers >= r.max_workers || r.restarting {
                        continue;
                    }
                    if !self.cooled(r, now) {
                        if let Some(t) = r.last_rescale {
                            min_wake(&mut wake, t + p.cooldown_s, now);
                        }
                        continue;
                    }
                    who.push(Grown::Running(k));
                    cands.push(GrowCandidate::of(r, self.remaining_work_r(r)));
                }
                for (n, (k, _, _)) in fresh.iter().enumerate() {
                    if let Some(q) = snap.queued.get(*k) {
                        who.push(Grown::Fresh(n));
                        cands.push(GrowCandidate {
                            requested: q.requested,
                            workers: q.requested,
                            max_workers: q.max_workers,
                            remaining: self.remaining_work_q(q),
                        });
                    }
                }
                let sizes = if p.grow_by_marginal_gain {
                    fill_by_marginal_gain(&self.scaling, &cands, budget)
                } else {
                    // longest predicted remaining time first, each to its maximum
                    let mut order: Vec<(f64, usize)> = cands
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            let t = time_at(&self.scaling, c.remaining, c.requested, c.workers);
                            (t, i)
                        })
                        .collect();
                    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    let mut sizes: Vec<u32> = cands.iter().map(|c| c.workers).collect();
                    let mut left = budget;
                    for (_, i) in order {
                        if let (Some(c), Some(t)) = (cands.get(i), sizes.get_mut(i)) {
                            let give = (c.max_workers - c.workers).min(left);
                            *t = c.workers + give;
                            left -= give;
                        }
                    }
                    sizes
                };
                for ((g, c), to) in who.iter().zip(&cands).zip(sizes) {
                    if to <= c.workers {
                        continue;
                    }
                    let now_t = time_at(&self.scaling, c.remaining, c.requested, c.workers);
                    let pause = match g {
                        Grown::Running(_) => p.rescale_pause_s,
                        Grown::Fresh(_) => 0.0,
                    };
                    let saved =
                        now_t - time_at(&self.scaling, c.remaining, c.requested, to) - pause;
                    if saved < p.min_gain_s || saved < p.min_gain_share * now_t {
                        continue;
                    }
                    match *g {
                        Grown::Running(k) => {
                            let Some(r) = snap.running.get(k) else {
                                continue;
                            };
                            if planner.grow(snap, r, to) {
                                out.push(Decision {
                                    action: Action::SetWorkers {
                                        job: r.id,
                                        workers: to,
                                    },
                                    reason: Reason::IdleGpus { idle_gpus: idle },
                                });
                            }
                        }
                        Grown::Fresh(n) => {
                            let Some((k, at, slots)) = fresh.get(n) else {
                                continue;
                            };
                            let Some(q) = snap.queued.get(*k) else {
                                continue;
                            };
                            // re-plan its placement at the bigger size, or keep the first one
                            planner.cap.release(slots);
                            if planner.admit(snap, q, to) {
                                if let Some(d) = out.get_mut(*at) {
                                    d.action = Action::Admit {
                                        job: q.id,
                                        workers: to,
                                    };
                                    d.reason = Reason::IdleGpus { idle_gpus: idle };
                                }
                            } else {
                                planner.cap.occupy(slots);
                            }
                        }
                    }
                }
            }
        }
        self.planner = planner;
        self.keyed = keyed;
        wake.is_finite().then_some(wake)
    }
}

/// Who a grow candidate of a decision is.
#[derive(Debug, Clone, Copy)]
enum Grown {
    /// Index into the snapshot's running jobs.
    Running(usize),
    /// Index into the decision's fresh admissions.
    Fresh(usize),
}

fn admit(job: JobId, workers: u32, reason: Reason) -> Decision {
    Decision {
        action: Action::Admit { job, workers },
        reason,
    }
}

fn emit_shrinks(
    snap: &ClusterSnapshot,
    runs: &mut [Run],
    plan: &[(usize, u32, Vec<Slot>)],
    reason: Reason,
    out: &mut Vec<Decision>,
) {
    for (k, to, _) in plan {
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
}
