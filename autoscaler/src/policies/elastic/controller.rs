//! The elastic controller ([`ElasticController`]): ranks the queue, tries the admission steps
//! for each queued job in that order, then grows jobs into idle GPUs.

use super::admission::{as_requested, preempt, reclaim, shrink_on_high_wait, start_shrunk};
use super::estimate::Estimates;
use super::grow::grow_into_idle;
use super::params::ElasticParams;
use super::round::Round;
use crate::cluster::{ClusterSnapshot, QueuedJob};
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
        "elastic"
    }

    fn decide(&mut self, snap: &ClusterSnapshot, out: &mut Vec<Decision>) -> Option<f64> {
        let est = Estimates {
            params: self.params,
            scaling: self.scaling,
        };
        let round = &mut self.round;
        round.reset(snap);
        rank_queue(snap, &est, round);
        for i in 0..round.keyed.len() {
            let (not_starving, key, _, k) = round.keyed[i];
            if let Some(q) = snap.queued.get(k) {
                start_queued(snap, &est, round, (q, k), (key, !not_starving), out);
            }
        }
        grow_into_idle(snap, &est, round, out);
        round.wake.is_finite().then_some(round.wake)
    }
}

/// Queue order: starving jobs first (oldest first), then by predicted remaining GPU-time.
fn rank_queue(snap: &ClusterSnapshot, est: &Estimates, round: &mut Round) {
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

/// Tries the admission steps for queued job `q` (index `k`, ranking `key`) in order and
/// leaves it waiting when none starts it. Past `max_pressure_jobs`, only the first step is
/// tried; a starving job left waiting blocks everything behind it.
fn start_queued(
    snap: &ClusterSnapshot,
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
