//! Shortest predicted GPU-time first ([`SjfPredicted`], Helios' QSSF), non-preemptive, with a
//! starvation guard.

use super::in_order::admit_in_order;
use super::planner::Planner;
use super::policy::Policy;
use crate::cluster::{ClusterState, JobId, QueuedJob};
use crate::decision::{Decision, Reason};

/// Predicted GPU-seconds of a queued job (`fallback_s` when there is no prediction).
pub fn predicted_gpu_s(q: &QueuedJob, fallback_s: f64) -> f64 {
    q.predicted_runtime.unwrap_or(fallback_s) * f64::from(q.requested)
}

/// Shortest predicted GPU-time first, static sizes, non-preemptive; jobs that do not fit are
/// skipped until they have waited `starvation_s`, then they go first and block.
#[derive(Debug)]
pub struct SjfPredicted {
    pub starvation_s: f64,
    /// Run time assumed for jobs without a prediction.
    pub unknown_runtime_s: f64,
    planner: Planner,
    keyed: Vec<(bool, f64, JobId, usize)>,
    order: Vec<usize>,
}

impl Default for SjfPredicted {
    fn default() -> Self {
        SjfPredicted {
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            planner: Planner::default(),
            keyed: Vec::new(),
            order: Vec::new(),
        }
    }
}

/// Queue order of shortest-predicted-first with a starvation guard: jobs that waited
/// `starvation_s` first (oldest first), then by predicted GPU-seconds.
pub fn sjf_order(
    snap: &ClusterState,
    starvation_s: f64,
    unknown_runtime_s: f64,
    keyed: &mut Vec<(bool, f64, JobId, usize)>,
    order: &mut Vec<usize>,
) {
    keyed.clear();
    keyed.extend(snap.queued.iter().enumerate().map(|(k, q)| {
        let starving = snap.time - q.queued_since >= starvation_s;
        let key = if starving {
            q.queued_since
        } else {
            predicted_gpu_s(q, unknown_runtime_s)
        };
        (!starving, key, q.id, k)
    }));
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    order.clear();
    order.extend(keyed.iter().map(|e| e.3));
}

impl Policy for SjfPredicted {
    fn name(&self) -> &str {
        "sjf-pred"
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        sjf_order(
            snap,
            self.starvation_s,
            self.unknown_runtime_s,
            &mut self.keyed,
            &mut self.order,
        );
        let starvation = self.starvation_s;
        let fallback = self.unknown_runtime_s;
        let now = snap.time;
        admit_in_order(
            snap,
            &mut self.planner,
            &self.order,
            starvation,
            &|q| {
                if now - q.queued_since >= starvation {
                    Reason::Starving {
                        waited_s: now - q.queued_since,
                    }
                } else {
                    Reason::ShortestPredicted {
                        predicted_gpu_s: predicted_gpu_s(q, fallback),
                    }
                }
            },
            out,
        )
    }
}
