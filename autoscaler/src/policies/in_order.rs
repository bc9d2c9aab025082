//! Admitting the queue in a policy's order at the requested sizes, with a job that waited long
//! enough blocking the rest ([`admit_in_order`]): the core of FIFO and SJF.

use super::planner::{next_relax, Planner};
use crate::cluster::{ClusterState, QueuedJob};
use crate::decision::{Action, Decision, Reason};

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Admits queued jobs in `order` at their requested size while they fit. A job that does not
/// fit is skipped, unless it has waited `block_after_s` or more: then nothing behind it starts
/// (it keeps the GPUs that free up). Returns when to look again (locality relaxing of the
/// blocking job).
pub fn admit_in_order(
    snap: &ClusterState,
    planner: &mut Planner,
    order: &[usize],
    block_after_s: f64,
    reason: &dyn Fn(&QueuedJob) -> Reason,
    out: &mut Vec<Decision>,
) -> Option<f64> {
    let mut wake = None;
    for &k in order {
        let Some(q) = snap.queued.get(k) else {
            continue;
        };
        if planner.cap.total_free() == 0 {
            break;
        }
        if planner.admit(snap, q, q.requested) {
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                    gpu_type: None,
                },
                reason: reason(q),
            });
        } else if block_or_skip(snap, q, block_after_s, &mut wake) {
            break;
        }
    }
    wake
}

/// For a queued job that does not fit: true when it has waited `block_after_s` or more and
/// so blocks the jobs behind it (lowering `wake` to when its locality relaxes).
pub fn block_or_skip(
    snap: &ClusterState,
    q: &QueuedJob,
    block_after_s: f64,
    wake: &mut Option<f64>,
) -> bool {
    if snap.time - q.queued_since >= block_after_s {
        *wake = min_opt(*wake, next_relax(snap, q));
        return true;
    }
    false
}
