//! The last step of a decision: hand idle GPUs out to running elastic jobs out of cooldown and
//! to the elastic jobs this decision admits, by marginal gain (or longest job first), growing
//! a job only when the predicted time it saves is worth the restart.

use super::estimate::Estimates;
use super::round::{admit, min_wake, Round};
use crate::cluster::ClusterState;
use crate::decision::{Action, Decision, Reason};
use crate::policies::marginal::{fill_by_marginal_gain, GrowCandidate};

/// Who a grow candidate of a decision is.
#[derive(Debug, Clone, Copy)]
enum Grown {
    /// Index into the snapshot's running jobs.
    Running(usize),
    /// Index into the decision's fresh admissions.
    Fresh(usize),
}

/// Grows jobs into the GPUs idle beyond what the waiting jobs need and the headroom, when
/// nothing is blocked (and nobody waits, unless `grow_past_queue`) and enough of them are idle.
pub(super) fn grow_into_idle(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    out: &mut Vec<Decision>,
) {
    let p = &est.params;
    if round.blocked || !(round.waiting == 0 || p.grow_past_queue) {
        return;
    }
    let healthy = snap.healthy_gpus();
    let idle = round
        .planner
        .cap
        .total_free()
        .saturating_sub(round.reserved);
    let threshold = ((f64::from(healthy) * p.scale_up_idle_share).ceil() as u32).max(1);
    let headroom = (f64::from(healthy) * p.headroom_share).ceil() as u32;
    if idle < threshold || idle <= headroom {
        return;
    }
    let budget = idle - headroom;
    let (who, cands, on) = candidates(snap, est, round);
    if !round.type_aware {
        let sizes = hand_out(est, &cands, budget);
        for ((g, c), to) in who.iter().zip(&cands).zip(sizes) {
            grow_one(snap, est, round, (*g, c, to), idle, out);
        }
        return;
    }
    // type-aware: a job grows on its own type only, so each type's idle GPUs (its share of
    // the budget) are handed out among the jobs on it; gangs over mixed types do not grow
    let free = round.planner.cap.total_free().max(1);
    let shares: Vec<(u16, u32)> = round
        .types
        .iter()
        .map(|&t| {
            let f = u64::from(round.planner.free_of_type(t));
            let share = u64::from(budget) * f / u64::from(free);
            (t, u32::try_from(share).unwrap_or(budget))
        })
        .collect();
    for (t, share) in shares {
        let idx: Vec<usize> = (0..cands.len()).filter(|&i| on[i] == Some(t)).collect();
        if idx.is_empty() || share == 0 {
            continue;
        }
        let sub: Vec<GrowCandidate> = idx.iter().map(|&i| cands[i]).collect();
        let sizes = hand_out(est, &sub, share);
        for (&i, to) in idx.iter().zip(sizes) {
            grow_one(snap, est, round, (who[i], &cands[i], to), idle, out);
        }
    }
}

/// The sizes the hand-out gives `cands` from `budget` idle GPUs.
fn hand_out(est: &Estimates, cands: &[GrowCandidate], budget: u32) -> Vec<u32> {
    if est.params.grow_by_marginal_gain {
        fill_by_marginal_gain(&est.scaling, cands, budget)
    } else {
        longest_first(est, cands, budget)
    }
}

/// Grows candidate `g` (`c`) to `to` workers when that is worth it.
fn grow_one(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    (g, c, to): (Grown, &GrowCandidate, u32),
    idle: u32,
    out: &mut Vec<Decision>,
) {
    if !worth_growing(est, g, c, to) {
        return;
    }
    match g {
        Grown::Running(k) => grow_running(snap, round, k, to, idle, out),
        Grown::Fresh(n) => grow_fresh(snap, round, n, to, idle, out),
    }
}

/// Running elastic jobs below their maximum and out of cooldown (jobs in cooldown lower the
/// wake-up time to its end; jobs this decision moved are left out), then the elastic jobs this
/// decision admits at their request (they start at the size the hand-out gives them, with no
/// restart). Their predicted remaining work is in seconds on the type they run on (or start
/// on) when type-aware, which is also returned.
fn candidates(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
) -> (Vec<Grown>, Vec<GrowCandidate>, Vec<Option<u16>>) {
    let now = snap.time;
    let mut who: Vec<Grown> = Vec::new();
    let mut cands: Vec<GrowCandidate> = Vec::new();
    let mut on: Vec<Option<u16>> = Vec::new();
    for (k, r) in snap.running.iter().enumerate() {
        if !r.elastic() || r.workers >= r.max_workers || r.restarting || round.view.touched(k) {
            continue;
        }
        if !est.cooled(r, now) {
            if let Some(t) = r.last_rescale {
                min_wake(&mut round.wake, t + est.params.cooldown_s, now);
            }
            continue;
        }
        who.push(Grown::Running(k));
        cands.push(GrowCandidate::of(r, est.remaining_r(snap, r)));
        on.push(if round.type_aware {
            snap.type_of(snap.placement_of(r))
        } else {
            None
        });
    }
    for (n, fresh) in round.fresh.iter().enumerate() {
        if let Some(q) = snap.queued.get(fresh.queued) {
            let speed = fresh.on.map_or(1.0, |p| p.speed).max(f64::MIN_POSITIVE);
            who.push(Grown::Fresh(n));
            cands.push(GrowCandidate {
                requested: q.requested,
                workers: q.requested,
                max_workers: q.max_workers,
                remaining: est.remaining_work_q(q) / speed,
            });
            on.push(fresh.on.map(|p| p.gpu_type));
        }
    }
    (who, cands, on)
}

/// The other hand-out: longest predicted remaining time first, each to its maximum.
fn longest_first(est: &Estimates, cands: &[GrowCandidate], budget: u32) -> Vec<u32> {
    let mut order: Vec<(f64, usize)> = cands
        .iter()
        .enumerate()
        .map(|(i, c)| (est.time_at(c.remaining, c.requested, c.workers), i))
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
}

/// True when growing `c` to `to` saves at least `min_gain_s` beyond the restart pause (none
/// for a fresh admission) and at least `min_gain_share` of its predicted remaining time.
fn worth_growing(est: &Estimates, g: Grown, c: &GrowCandidate, to: u32) -> bool {
    let p = &est.params;
    if to <= c.workers {
        return false;
    }
    let now_t = est.time_at(c.remaining, c.requested, c.workers);
    let pause = match g {
        Grown::Running(_) => p.rescale_pause_s,
        Grown::Fresh(_) => 0.0,
    };
    let saved = now_t - est.time_at(c.remaining, c.requested, to) - pause;
    !(saved < p.min_gain_s || saved < p.min_gain_share * now_t)
}

/// Grows running job `k` to `to` workers when the growth fits.
fn grow_running(
    snap: &ClusterState,
    round: &mut Round,
    k: usize,
    to: u32,
    idle: u32,
    out: &mut Vec<Decision>,
) {
    let Some(r) = snap.running.get(k) else {
        return;
    };
    // a type-aware controller grows a job on its own GPU type only (as it was admitted)
    let on = if round.type_aware {
        snap.type_of(snap.placement_of(r))
    } else {
        None
    };
    if round.planner.grow_on(snap, r, to, on) {
        out.push(Decision {
            action: Action::SetWorkers {
                job: r.id,
                workers: to,
            },
            reason: Reason::IdleGpus { idle_gpus: idle },
        });
    }
}

/// Re-plans fresh admission `n` at `to` workers, or keeps its first placement when the bigger
/// one does not fit.
fn grow_fresh(
    snap: &ClusterState,
    round: &mut Round,
    n: usize,
    to: u32,
    idle: u32,
    out: &mut [Decision],
) {
    let Some(fresh) = round.fresh.get(n) else {
        return;
    };
    let Some(q) = snap.queued.get(fresh.queued) else {
        return;
    };
    round.planner.cap.release(&fresh.slots);
    let on = fresh.on;
    if round.planner.admit_on(snap, q, to, on.map(|p| p.gpu_type)) {
        if let Some(d) = out.get_mut(fresh.at) {
            *d = admit(q.id, to, on, Reason::IdleGpus { idle_gpus: idle });
        }
    } else {
        round.planner.cap.occupy(&fresh.slots);
    }
}
