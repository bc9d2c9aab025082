//! A Gavel-style max-throughput allocation on a cluster of mixed GPU types
//! ([`GavelMaxThroughput`]): static sizes, jobs in submit order, each on the GPU type where it
//! runs fastest among those with room now.

use super::in_order::block_or_skip;
use super::planner::Planner;
use super::policy::Policy;
use crate::cluster::{ClusterState, QueuedJob};
use crate::decision::{Action, Decision, Reason};

/// Gavel's max-sum-throughput objective solved greedily per decision, without Gavel's
/// time-sharing rounds: queued jobs in submit order (FIFO, a job that does not fit is skipped
/// until it has waited `block_after_s`, then blocks the rest), each at its requested size on
/// the type with the highest measured throughput for it that has room (each job adds the most
/// throughput it can); a gang bigger than every type's GPUs runs over mixed types. No
/// elasticity, no preemption.
#[derive(Debug)]
pub struct GavelMaxThroughput {
    pub block_after_s: f64,
    planner: Planner,
    order: Vec<usize>,
    types: Vec<(f64, u16)>,
}

impl Default for GavelMaxThroughput {
    fn default() -> Self {
        GavelMaxThroughput {
            block_after_s: 12.0 * 3600.0,
            planner: Planner::default(),
            order: Vec::new(),
            types: Vec::new(),
        }
    }
}

impl GavelMaxThroughput {
    /// Plans `q` on its fastest type with room; the decision when it fits.
    fn place(&mut self, snap: &ClusterState, q: &QueuedJob) -> Option<Decision> {
        self.types.clear();
        for t in 0..snap.gpu_types.len() {
            let Ok(t) = u16::try_from(t) else { break };
            self.types.push((snap.job_speed(q.id, t), t));
        }
        self.types
            .sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        if self.types.is_empty() {
            return self
                .planner
                .admit(snap, q, q.requested)
                .then_some(Decision {
                    action: Action::Admit {
                        job: q.id,
                        workers: q.requested,
                        gpu_type: None,
                    },
                    reason: Reason::Fifo,
                });
        }
        for k in 0..self.types.len() {
            let (speed, t) = self.types[k];
            if self.planner.admit_on(snap, q, q.requested, Some(t)) {
                let typical = snap.gpu_types.get(usize::from(t)).map_or(1.0, |g| g.speed);
                return Some(Decision {
                    action: Action::Admit {
                        job: q.id,
                        workers: q.requested,
                        gpu_type: Some(t),
                    },
                    reason: Reason::TypeGain {
                        gpu_type: t,
                        speed,
                        gain: speed / typical.max(f64::MIN_POSITIVE),
                        step: "max_throughput",
                    },
                });
            }
        }
        // a gang bigger than every type's GPUs can only run over mixed types
        if q.requested > self.planner.largest_type() && self.planner.admit(snap, q, q.requested) {
            return Some(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                    gpu_type: None,
                },
                reason: Reason::Fifo,
            });
        }
        None
    }
}

impl Policy for GavelMaxThroughput {
    fn name(&self) -> &str {
        "gavel"
    }

    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        self.planner.reset(snap);
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(0..snap.queued.len());
        order.sort_by(|&a, &b| {
            let (x, y) = (&snap.queued[a], &snap.queued[b]);
            x.submitted.total_cmp(&y.submitted).then(x.id.cmp(&y.id))
        });
        let mut wake = None;
        for &k in &order {
            let Some(q) = snap.queued.get(k) else {
                continue;
            };
            if self.planner.cap.total_free() == 0 {
                break;
            }
            match self.place(snap, q) {
                Some(d) => out.push(d),
                None => {
                    if block_or_skip(snap, q, self.block_after_s, &mut wake) {
                        break;
                    }
                }
            }
        }
        self.order = order;
        wake
    }
}
