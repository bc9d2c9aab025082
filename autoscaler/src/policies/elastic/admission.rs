//! The ways a queued job gets GPUs, tried in this order by the elastic controller: admitted
//! as requested, by reclaiming lent workers, started shrunk, by preempting a much longer job,
//! by shrinking running jobs when its predicted wait is high. Each returns true when the job
//! starts (its decisions appended), and leaves the plan as it found it otherwise.

use super::estimate::Estimates;
use super::round::{admit, min_wake, Fresh, Round};
use crate::cluster::{ClusterState, QueuedJob};
use crate::decision::{Action, Decision, Reason};

/// Step 1: admits `q` (queued index `k`) at its request when it fits. An elastic job is
/// remembered as fresh: it may start bigger when idle GPUs are handed out.
pub(super) fn as_requested(
    snap: &ClusterState,
    round: &mut Round,
    q: &QueuedJob,
    k: usize,
    reason: Reason,
    out: &mut Vec<Decision>,
) -> bool {
    if round.planner.cap.total_free() == 0 {
        return false;
    }
    let Some(on) = round.place(snap, q, q.requested) else {
        return false;
    };
    if q.elastic() {
        round.fresh.push(Fresh {
            queued: k,
            at: out.len(),
            slots: round.planner.placed().to_vec(),
            on,
        });
    }
    out.push(admit(q.id, q.requested, on, reason));
    true
}

/// Step 2: takes back workers lent to running jobs above their request, just enough to start
/// `q` at its request.
pub(super) fn reclaim(
    snap: &ClusterState,
    round: &mut Round,
    q: &QueuedJob,
    reason: Reason,
    out: &mut Vec<Decision>,
) -> bool {
    let deficit = q.requested.saturating_sub(round.planner.cap.total_free());
    if deficit == 0 {
        return false;
    }
    let (view, planner) = (&mut round.view, &mut round.planner);
    if !round.shrinks.plan(
        snap,
        planner,
        &view.runs,
        &view.lenders,
        &|r| r.requested,
        deficit,
    ) {
        return false;
    }
    if let Some(on) = round.place(snap, q, q.requested) {
        let by = Reason::Reclaimed { by: q.id };
        round.shrinks.commit(snap, &mut round.view.runs, by, out);
        out.push(admit(q.id, q.requested, on, reason));
        return true;
    }
    round.shrinks.undo(&mut round.planner);
    false
}

/// Step 3: starts elastic job `q` below its request: one worker short of it (or what is free),
/// else at its minimum.
pub(super) fn start_shrunk(
    snap: &ClusterState,
    round: &mut Round,
    q: &QueuedJob,
    out: &mut Vec<Decision>,
) -> bool {
    let free = round.planner.cap.total_free();
    let first = q.requested.saturating_sub(1).min(free);
    for w in [first, q.min_workers] {
        if w < q.min_workers || w == 0 {
            continue;
        }
        if let Some(on) = round.place(snap, q, w) {
            out.push(admit(q.id, w, on, Reason::StartShrunk { free_gpus: free }));
            return true;
        }
    }
    false
}

/// Step 4 (unless `preempt_factor` is `None`): preempts running jobs whose predicted remaining
/// GPU-time is `preempt_factor` times `q`'s ranking `key` (a starving job: any longer one),
/// worst first, each having run `min_run_s`, until `q` fits at its request.
pub(super) fn preempt(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    q: &QueuedJob,
    (key, starving): (f64, bool),
    reason: Reason,
    out: &mut Vec<Decision>,
) -> bool {
    let Some(factor) = est.params.preempt_factor else {
        return false;
    };
    let min_run_s = est.params.min_run_s;
    let now = snap.time;
    let mut taken: Vec<usize> = Vec::new();
    let mut fits = None;
    let victims = std::mem::take(&mut round.view.victims);
    for &vi in &victims {
        let (Some(r), Some(run)) = (snap.running.get(vi), round.view.runs.get(vi)) else {
            continue;
        };
        if run.key <= factor * key.max(1.0) || starving && run.key <= key {
            break;
        }
        if run.touched || r.restarting || now - r.started < min_run_s {
            continue;
        }
        round.planner.suspend(snap, r);
        taken.push(vi);
        if q.requested <= round.planner.cap.total_free() {
            if let Some(on) = round.place(snap, q, q.requested) {
                fits = Some(on);
                break;
            }
        }
    }
    round.view.victims = victims;
    let Some(on) = fits else {
        for &vi in taken.iter().rev() {
            if let Some(r) = snap.running.get(vi) {
                round.planner.unsuspend(snap, r);
            }
        }
        return false;
    };
    for &vi in &taken {
        if let (Some(r), Some(run)) = (snap.running.get(vi), round.view.runs.get_mut(vi)) {
            run.touched = true;
            out.push(Decision {
                action: Action::Suspend { job: r.id },
                reason: Reason::Preempted { by: q.id },
            });
        }
    }
    out.push(admit(q.id, q.requested, on, reason));
    true
}

/// Step 5: when `q`'s predicted wait reaches `scale_down_wait_s`, shrinks running elastic jobs
/// out of cooldown towards their minimum (longest predicted remaining first), just enough to
/// start `q` at its minimum.
pub(super) fn shrink_on_high_wait(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    q: &QueuedJob,
    out: &mut Vec<Decision>,
) -> bool {
    let p = &est.params;
    let now = snap.time;
    let need = q.min_workers;
    let free = round.planner.cap.total_free();
    let wait = predicted_wait(&round.view.frees, free, need);
    if wait < p.scale_down_wait_s {
        return false;
    }
    let mut cands: Vec<usize> = Vec::new();
    for &i in &round.view.shrinkable {
        let r = &snap.running[i];
        if est.cooled(r, now) {
            cands.push(i);
        } else if let Some(t) = r.last_rescale {
            min_wake(&mut round.wake, t + p.cooldown_s, now);
        }
    }
    let deficit = need.saturating_sub(free);
    let (view, planner) = (&mut round.view, &mut round.planner);
    if !round.shrinks.plan(
        snap,
        planner,
        &view.runs,
        &cands,
        &|r| r.min_workers,
        deficit,
    ) {
        return false;
    }
    if let Some(on) = round.place(snap, q, need) {
        let reason = Reason::QueueWaitHigh {
            predicted_wait_s: wait,
        };
        round
            .shrinks
            .commit(snap, &mut round.view.runs, reason, out);
        out.push(admit(q.id, need, on, reason));
        return true;
    }
    round.shrinks.undo(&mut round.planner);
    false
}

/// Seconds until `need` GPUs are free: `free` now, plus the workers of running jobs as they
/// finish (`frees`: predicted remaining time and workers, soonest first); infinite when they
/// never add up.
fn predicted_wait(frees: &[(f64, u32)], free: u32, need: u32) -> f64 {
    let mut acc = free;
    let mut wait = if free >= need { 0.0 } else { f64::INFINITY };
    for &(t, w) in frees {
        if acc >= need {
            break;
        }
        acc += w;
        if acc >= need {
            wait = t;
        }
    }
    wait
}
