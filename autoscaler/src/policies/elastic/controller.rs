//! The elastic controller ([`ElasticController`]): ranks the queue, tries the admission steps
//! for each queued job in that order, then grows jobs into idle GPUs.

use super::admission::{as_requested, preempt, reclaim, shrink_on_high_wait, start_shrunk};
use super::estimate::Estimates;
use super::grow::grow_into_idle;
use super::params::ElasticParams;
use super::round::{Round, TypePref};
use crate::cluster::{ClusterState, QueuedJob};
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
}

impl ElasticController {
    /// A controller with these knobs planning with this speedup curve.
    pub fn new(params: ElasticParams, scaling: ScalingModel) -> ElasticController {
        ElasticController {
            params,
            scaling,
            round: Round::default(),
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
        };
        let round = &mut self.round;
        round.reset(snap);
        round.type_aware = self.params.type_aware && !snap.gpu_types.is_empty();
        rank_queue(snap, &est, round);
        if round.type_aware {
            // GPUs requested from each rank on (what competes for a type with that job)
            round.demand_from = vec![0; round.keyed.len() + 1];
            for i in (0..round.keyed.len()).rev() {
                let want = snap.queued.get(round.keyed[i].3).map_or(0, |q| q.requested);
                round.demand_from[i] = round.demand_from[i + 1].saturating_add(want);
            }
        }
        for i in 0..round.keyed.len() {
            let (not_starving, key, _, k) = round.keyed[i];
            if let Some(q) = snap.queued.get(k) {
                if round.type_aware {
                    let demand = round.demand_from.get(i).copied().unwrap_or(0);
                    type_prefs(snap, round, q, demand);
                }
                start_queued(snap, &est, round, (q, k), (key, !not_starving), out);
            }
        }
        grow_into_idle(snap, &est, round, out);
        round.wake.is_finite().then_some(round.wake)
    }
}

/// Queue order: starving jobs first (oldest first), then by predicted remaining GPU-time.
fn rank_queue(snap: &ClusterState, est: &Estimates, round: &mut Round) {
    let now = snap.time;
    round
        .keyed
        .extend(snap.queued.iter().enumerate().map(|(k, q)| {
            let starving = now - q.queued_since >= est.params.starvation_s;
            let key = if starving {
                q.queued_since
            } else {
                est.key_q(q)
            };
            (!starving, key, q.id, k)
        }));
    round
        .keyed
        .sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
}

/// The GPU types `q` may start on, best first, into `round.prefs`. Each type has the job's
/// measured speed there and its gain (that speed over the type's typical speed, the median
/// over the measured models: its comparative advantage there). When the GPUs free on the
/// job's fastest type cover what every job from this one on in the queue asks for (`demand`),
/// nothing competes: fastest first. Otherwise largest gain first, so a type goes to the jobs
/// that gain most from it and the others start sooner on a type where they lose least (the
/// effective-throughput view of Gavel); ties go to the faster type. Every type stays in the
/// list: a job starts on a worse type rather than wait. A gang bigger than every type's GPUs
/// is placed over mixed types (its admission then names no type).
fn type_prefs(snap: &ClusterState, round: &mut Round, q: &QueuedJob, demand: u32) {
    round.prefs.clear();
    for (t, g) in snap.gpu_types.iter().enumerate() {
        let Ok(t) = u16::try_from(t) else { break };
        if !snap.nodes.iter().any(|n| n.gpu_type == t) {
            continue;
        }
        let speed = snap.job_speed(q.id, t);
        let typical = if g.speed > 0.0 { g.speed } else { 1.0 };
        round.prefs.push(TypePref {
            gpu_type: t,
            speed,
            gain: speed / typical,
        });
    }
    let by_speed = |a: &TypePref, b: &TypePref| {
        b.speed
            .total_cmp(&a.speed)
            .then(a.gpu_type.cmp(&b.gpu_type))
    };
    round.prefs.sort_by(by_speed);
    let fastest_free = round
        .prefs
        .first()
        .map_or(0, |p| round.planner.free_of_type(p.gpu_type));
    if demand > fastest_free {
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
