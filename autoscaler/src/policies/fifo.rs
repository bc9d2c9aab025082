//! First-in first-out with static sizes ([`Fifo`]).

use super::in_order::admit_in_order;
use super::planner::Planner;
use super::policy::Policy;
use crate::cluster::ClusterState;
use crate::decision::{Decision, Reason};

/// First-in first-out, static sizes: jobs start in submit order; a job that does not fit is
/// skipped (later, smaller jobs may start) until it has waited `block_after_s`, then it blocks
/// everything behind it until it starts. `block_after_s = 0` is strict FIFO.
#[derive(Debug)]
pub struct Fifo {
    pub block_after_s: f64,
    planner: Planner,
    order: Vec<usize>,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            block_after_s: 12.0 * 3600.0,
            planner: Planner::default(),
            order: Vec::new(),
        }
    }
}

impl Fifo {
    /// Strict FIFO: the head of the queue blocks everything behind it.
    pub fn strict() -> Fifo {
        Fifo {
            block_after_s: 0.0,
            ..Fifo::default()
        }
    }
}

impl Policy for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        self.order.clear();
        self.order.extend(0..snap.queued.len());
        // a preempted/failed job keeps its place by submit time
        self.order.sort_by(|&a, &b| {
            let (x, y) = (&snap.queued[a], &snap.queued[b]);
            x.submitted.total_cmp(&y.submitted).then(x.id.cmp(&y.id))
        });
        // (a job that starts to block needs no wake-up: blocking only matters when GPUs free up)
        admit_in_order(
            snap,
            &mut self.planner,
            &self.order,
            self.block_after_s,
            &|_| Reason::Fifo,
            out,
        )
    }
}
