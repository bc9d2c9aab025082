//! The elastic controller ([`ElasticController`]): ranks the queue, tries the admission steps
//! for each queued job in that order, then grows jobs into idle GPUs.

use std::collections::HashMap;

use super::admission::{as_requested, preempt, reclaim, shrink_on_high_wait, start_shrunk};
use super::estimate::Estimates;
use super::grow::grow_into_idle;
use super::migrate::migrate;
use super::params::ElasticParams;
use super::round::{typical_speed, Round, TypePref};
use crate::cluster::{ClusterState, JobId, QueuedJob};
use crate::decision::{Decision, Reason};
use crate::policies::planner::next_relax;
use crate::policies::policy::Policy;
use crate::scaling::ScalingModel;

/// The elastic controller (a [`Policy`]).
#[derive(Debug)]
pub struct ElasticController {
    pub params: ElasticParams,
    pub scaling: ScalingModel,
    round: Round,
    /// Migrations of each job so far (bounded by `max_migrations`).
    migrations: HashMap<JobId, u32>,
}

impl ElasticController {
    /// A controller with these knobs planning with this speedup curve.
    pub fn new(params: ElasticParams, scaling: ScalingModel) -> ElasticController {
        ElasticController {
            params,
            scaling,
            round: Round::default(),
            migrations: HashMap::new(),
        }
    }
}

impl Policy for ElasticController {
    fn name(&self) -> &str {
        if self.params.type_aware {
            "elastic-typed"
        } else {
            "elastic"
        }
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        let est = Estimates {
            params: self.params,
            scaling: self.scaling,
            typed: self.params.type_aware && !snap.gpu_types.is_empty(),
        };
        let round = &mut self.round;
        round.reset(snap);
        round.type_aware = est.typed;
        if round.type_aware {
            round.types.extend(
                (0..snap.gpu_types.len())
                    .filter_map(|t| u16::try_from(t).ok())
                    .filter(|&t| snap.nodes.iter().any(|n| n.gpu_type == t)),
            );
        }
        rank_queue(snap, &est, round);
        if round.type_aware {
            fastest_types(snap, round);
            round.free_at_start = round.planner.cap.total_free();
        }
        for i in 0..round.keyed.len() {
            let (not_starving, key, _, k) = round.keyed[i];
            if let Some(q) = snap.queued.get(k) {
                if round.type_aware {
                    type_prefs(snap, round, q, i);
                }
                start_queued(snap, &est, round, (q, k), (key, !not_starving), out);
            }
        }
        if round.type_aware && !round.blocked {
            migrate(snap, &est, round, &mut self.migrations, out);
        }
        grow_into_idle(snap, &est, round, out);
        round.wake.is_finite().then_some(round.wake)
    }
}

/// Queue order: starving jobs first (oldest first), then by predicted remaining GPU-time (on
/// the type the job would take, when type-aware).
fn rank_queue(snap: &ClusterState, est: &Estimates, round: &mut Round) {
    let now = snap.time;
    let types = &round.types;
    round
        .keyed
        .extend(snap.queued.iter().enumerate().map(|(k, q)| {
            let starving = now - q.queued_since >= est.params.starvation_s;
            let key = if starving {
                q.queued_since
            } else {
                est.key_q(q, est.speed_q(snap, q, types))
            };
            (!starving, key, q.id, k)
        }));
    round
        .keyed
        .sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
}

/// The fastest GPU type of `q` (a position in `round.types`, the first on a tie) and its gain
/// there (its speed over the type's typical speed).
fn fastest(snap: &ClusterState, q: &QueuedJob, types: &[u16]) -> (usize, f64) {
    let mut best = (0, f64::NEG_INFINITY);
    for (k, &t) in types.iter().enumerate() {
        let s = snap.job_speed(q.id, t);
        if s > best.1 {
            best = (k, s);
        }
    }
    let t = types.get(best.0).copied().unwrap_or(0);
    (best.0, best.1 / typical_speed(snap, t))
}

/// Each ranked queued job's fastest type and its gain there, into `round.fastest`.
fn fastest_types(snap: &ClusterState, round: &mut Round) {
    round.fastest.clear();
    for &(_, _, _, k) in &round.keyed {
        let f = snap
            .queued
            .get(k)
            .map_or((0, 0.0), |q| fastest(snap, q, &round.types));
        round.fastest.push(f);
    }
}

/// GPUs the job at rank `rank` competes for on its fastest type: its own request, plus those
/// of the jobs ranked after it that could start in this decision too (while their requests
/// add up to the GPUs free when it began) whose fastest type it is too and who gain more
/// there.
fn competing_demand(snap: &ClusterState, round: &Round, rank: usize) -> u32 {
    let Some(&(f, gain)) = round.fastest.get(rank) else {
        return 0;
    };
    let want = |i: usize| {
        round
            .keyed
            .get(i)
            .and_then(|e| snap.queued.get(e.3))
            .map_or(0, |q| q.requested)
    };
    let mut demand = want(rank);
    let mut window = 0u32;
    for i in rank + 1..round.keyed.len() {
        let w = want(i);
        window = window.saturating_add(w);
        if window > round.free_at_start {
            break;
        }
        if let Some(&(fi, gi)) = round.fastest.get(i) {
            if fi == f && gi > gain {
                demand = demand.saturating_add(w);
            }
        }
    }
    demand
}

/// The GPU types `q` (at rank `rank`) may start on, best first, into `round.prefs`. Each type
/// has the job's measured speed there and its gain (that speed over the type's typical speed,
/// the median over the measured models: its comparative advantage there). When the GPUs free
/// on the job's fastest type cover its request and those of the jobs that could start now too
/// and gain more there ([`competing_demand`]), nothing takes it from them: fastest first.
/// Otherwise largest gain first, so a contended type goes to the jobs that gain most from it
/// and the others start sooner on a type where they lose least (the effective-throughput view
/// of Gavel); ties go to the faster type. Every type stays in the list: a job starts on a
/// worse type rather than wait (and may move later, see [`migrate`]). A gang bigger than every
/// type's GPUs is placed over mixed types (its admission then names no type). A job whose type
/// is not open ([`QueuedJob::type_open`]) has only its own type, or none (placed type-blind).
fn type_prefs(snap: &ClusterState, round: &mut Round, q: &QueuedJob, rank: usize) {
    round.prefs.clear();
    if !q.type_open {
        // bound to its own type already, or placed wherever the scheduler puts it
        if let Some(t) = q.gpu_type.filter(|t| round.types.contains(t)) {
            let speed = snap.job_speed(q.id, t);
            round.prefs.push(TypePref {
                gpu_type: t,
                speed,
                gain: speed / typical_speed(snap, t),
            });
        }
        return;
    }
    for &t in &round.types {
        let speed = snap.job_speed(q.id, t);
        round.prefs.push(TypePref {
            gpu_type: t,
            speed,
            gain: speed / typical_speed(snap, t),
        });
    }
    let by_speed = |a: &TypePref, b: &TypePref| {
        b.speed
            .total_cmp(&a.speed)
            .then(a.gpu_type.cmp(&b.gpu_type))
    };
    round.prefs.sort_by(by_speed);
    let Some(first) = round.prefs.first().map(|p| p.gpu_type) else {
        return;
    };
    if competing_demand(snap, round, rank) > round.planner.free_of_type(first) {
        round
            .prefs
            .sort_by(|a, b| b.gain.total_cmp(&a.gain).then(by_speed(a, b)));
    }
}

/// Tries the admission steps for queued job `q` (index `k`, ranking `key`) in order and
/// leaves it waiting when none starts it. Past `max_pressure_jobs`, only the first step is
/// tried; a starving job left waiting blocks everything behind it.
fn start_queued(
    snap: &ClusterState,
    est: &Estimates,
    round: &mut Round,
    (q, k): (&QueuedJob, usize),
    (key, starving): (f64, bool),
    out: &mut Vec<Decision>,
) {
    if round.blocked {
        round.wait(q);
        return;
    }
    let reason = if starving {
        Reason::Starving {
            waited_s: snap.time - q.queued_since,
        }
    } else {
        Reason::ShortestPredicted {
            predicted_gpu_s: key,
        }
    };
    if as_requested(snap, round, q, k, reason, out) {
        return;
    }
    if round.pressure >= est.params.max_pressure_jobs {
        round.wait(q);
        round.blocked |= starving;
        return;
    }
    round.pressure += 1;
    round.view.ensure(snap, est);
    let started = reclaim(snap, round, q, reason, out)
        || est.params.start_shrunk && q.elastic() && start_shrunk(snap, round, q, out)
        || preempt(snap, est, round, q, (key, starving), reason, out)
        || shrink_on_high_wait(snap, est, round, q, out);
    if started {
        return;
    }
    round.wait(q);
    if let Some(t) = next_relax(snap, q) {
        round.wake_at(t, snap.time);
    }
    round.blocked |= starving;
}
