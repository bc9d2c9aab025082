//! Shortest remaining GPU-time first with the true remaining run times ([`SrtfOracle`]): the
//! preemptive oracle baseline.

use super::planner::Planner;
use super::policy::Policy;
use super::preemptive::{preemptive_pass, Keyed};
use crate::cluster::{ClusterState, QueuedJob};
use crate::decision::{Decision, Reason};

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

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        let key_q =
            |q: &QueuedJob| q.oracle_remaining_s.unwrap_or(f64::INFINITY) * f64::from(q.requested);
        let mut queued: Vec<Keyed> = snap
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
        let running: Vec<Keyed> = snap
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
