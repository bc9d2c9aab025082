//! Type-aware only: after the queue is served, running jobs move to a GPU type where they run
//! much faster when its GPUs are idle (Gavel re-decides each job's type every round; here a move
//! is a checkpoint and a restart on the other type, paying the restart pause as a rescale
//! does). A move must save what a growth must, goes to a type at least `migrate_min_speedup`
//! times faster (so a job never moves back), and a job moves at most `max_migrations` times.

use std::collections::{HashMap, HashSet};

use super::estimate::Estimates;
use super::round::{admit, typical_speed, Round, TypePref};
use crate::cluster::{ClusterState, JobId};
use crate::decision::{Action, Decision, Reason};

/// One planned move: the running job's index, the type it leaves and its speed there, the
/// type it goes to, and the predicted seconds it saves.
struct Move {
    k: usize,
    from: u16,
    speed_from: f64,
    to: TypePref,
    saved_s: f64,
}

/// Moves running jobs to the GPU type where they save most, largest saving first, into the
/// GPUs of that type idle beyond what the waiting jobs need. `migrations`
/// counts each job's moves across decisions.
pub(super) fn migrate(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    migrations: &mut HashMap<JobId, u32>,
    out: &mut Vec<Decision>,
) {
    if est.params.max_migrations == 0 || round.types.len() < 2 {
        return;
    }
    forget_finished(snap, migrations);
    round.view.ensure(snap, est);
    let mut moves = candidates(snap, est, round, migrations);
    if moves.is_empty() {
        return;
    }
    moves.sort_by(|a, b| b.saved_s.total_cmp(&a.saved_s).then(a.k.cmp(&b.k)));
    let kept_back = if round.waiting > 0 { round.reserved } else { 0 };
    for m in moves {
        let Some(r) = snap.running.get(m.k) else {
            continue;
        };
        let t = m.to.gpu_type;
        let room = round.planner.free_of_type(t).saturating_sub(kept_back);
        if room < r.workers {
            continue;
        }
        // the GPUs it leaves stay taken in this decision's plan: a fresh admission grown
        // below is applied before the move and must not count on them
        if !round.planner.place_on(snap, r.workers, t, 0.0) {
            continue;
        }
        if let Some(run) = round.view.runs.get_mut(m.k) {
            run.touched = true;
        }
        *migrations.entry(r.id).or_insert(0) += 1;
        let reason = Reason::Migrated {
            from: m.from,
            to: t,
            speed_from: m.speed_from,
            speed_to: m.to.speed,
            gain: m.to.speed / m.speed_from,
            saved_s: m.saved_s,
        };
        out.push(Decision {
            action: Action::Suspend { job: r.id },
            reason,
        });
        out.push(admit(r.id, r.workers, Some(m.to), reason));
    }
}

/// The running jobs worth moving, each to the type where it saves most: on one type, not
/// restarting or taken by this decision, having run `min_run_s`, under its move bound.
fn candidates(
    snap: &ClusterState,
    est: &Estimates,
    round: &Round,
    migrations: &HashMap<JobId, u32>,
) -> Vec<Move> {
    let p = &est.params;
    let mut moves = Vec::new();
    for (k, r) in snap.running.iter().enumerate() {
        if r.restarting
            || round.view.touched(k)
            || snap.time - r.started < p.min_run_s
            || migrations.get(&r.id).copied().unwrap_or(0) >= p.max_migrations
        {
            continue;
        }
        let Some(from) = snap.type_of(snap.placement_of(r)) else {
            continue;
        };
        let Some(time) = round.view.runs.get(k).map(|run| run.time) else {
            continue;
        };
        let speed_from = snap.job_speed(r.id, from);
        if !(speed_from > 0.0 && time.is_finite()) {
            continue;
        }
        let mut best: Option<(f64, TypePref)> = None;
        for &t in &round.types {
            let speed = snap.job_speed(r.id, t);
            if t == from || speed < p.migrate_min_speedup * speed_from {
                continue;
            }
            let saved = time * (1.0 - speed_from / speed) - p.rescale_pause_s;
            if best.is_none_or(|(s, _)| saved > s) {
                let to = TypePref {
                    gpu_type: t,
                    speed,
                    gain: speed / typical_speed(snap, t),
                };
                best = Some((saved, to));
            }
        }
        let Some((saved_s, to)) = best else {
            continue;
        };
        if saved_s < p.min_gain_s || saved_s < p.min_gain_share * time {
            continue;
        }
        moves.push(Move {
            k,
            from,
            speed_from,
            to,
            saved_s,
        });
    }
    moves
}

/// Drops the move counts of jobs no longer running or queued once they outnumber those
/// (a long-lived controller would otherwise keep every job it ever moved).
fn forget_finished(snap: &ClusterState, migrations: &mut HashMap<JobId, u32>) {
    let live = snap.running.len() + snap.queued.len();
    if migrations.len() <= 2 * live + 64 {
        return;
    }
    let ids: HashSet<JobId> = snap
        .running
        .iter()
        .map(|r| r.id)
        .chain(snap.queued.iter().map(|q| q.id))
        .collect();
    migrations.retain(|id, _| ids.contains(id));
}
