//! Tiresias' discretised two-dimensional least-attained-service scheduler ([`Tiresias`]),
//! preemptive.

use super::planner::Planner;
use super::policy::Policy;
use super::preemptive::{preemptive_pass, Keyed};
use crate::cluster::ClusterState;
use crate::decision::{Decision, Reason};

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

    /// Queued jobs by (queue, submit time), best first; lowers `wake` to the next promotion.
    fn queued_keys(&self, snap: &ClusterState, wake: &mut f64) -> Vec<Keyed> {
        let now = snap.time;
        let mut queued: Vec<Keyed> = snap
            .queued
            .iter()
            .enumerate()
            .map(|(k, q)| {
                let promote_at = q.queued_since + self.promote_knob * q.run_s;
                let level = if q.run_s > 0.0 && now >= promote_at {
                    0
                } else {
                    if q.run_s > 0.0 {
                        *wake = wake.min(promote_at);
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
        queued
    }

    /// Running jobs by (queue, submit time); lowers `wake` to when one crosses into the next
    /// queue.
    fn running_keys(&self, snap: &ClusterState, wake: &mut f64) -> Vec<Keyed> {
        let now = snap.time;
        snap.running
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let level = self.level(r.attained_gpu_s);
                // when it crosses into the next queue
                if let Some(&t) = self.thresholds.get(level) {
                    if r.workers > 0 {
                        *wake = wake.min(now + (t - r.attained_gpu_s) / f64::from(r.workers));
                    }
                }
                (level as f64, r.submitted, k)
            })
            .collect()
    }
}

impl Policy for Tiresias {
    fn name(&self) -> &str {
        "tiresias"
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        let mut planner = std::mem::take(&mut self.planner);
        planner.reset(snap);
        let mut wake = f64::INFINITY;
        let queued = self.queued_keys(snap, &mut wake);
        let running = self.running_keys(snap, &mut wake);
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
