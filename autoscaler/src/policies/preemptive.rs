//! Preemptive priority scheduling shared by SRTF and Tiresias ([`preemptive_pass`]): queued
//! jobs in priority order start when they fit, preempting running jobs they beat (worst first).

use super::planner::Planner;
use crate::cluster::{ClusterState, QueuedJob};
use crate::decision::{Action, Decision, Reason};

/// A job's priority key (smaller is better: primary, tie-break) and its index in the
/// snapshot's queued or running jobs.
pub type Keyed = (f64, f64, usize);

/// Queued jobs in priority order (`queued`, best first) start when they fit, preempting
/// running jobs (`running`) that `can_preempt(victim key, job key)` allows, worst first. A job
/// is started only if the preemptions make it fit; otherwise its victims keep running.
pub fn preemptive_pass(
    snap: &ClusterState,
    planner: &mut Planner,
    queued: &[Keyed],
    running: &[Keyed],
    can_preempt: &dyn Fn((f64, f64), (f64, f64)) -> bool,
    reason: &dyn Fn(&QueuedJob, (f64, f64)) -> Reason,
    out: &mut Vec<Decision>,
) {
    // victims: worst key first
    let mut victims: Vec<&Keyed> = running.iter().collect();
    victims.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(b.2.cmp(&a.2))
    });
    let mut victims = Victims {
        order: victims,
        next: 0,
        taken: Vec::new(),
    };
    for &(k0, k1, qi) in queued {
        let Some(q) = snap.queued.get(qi) else {
            continue;
        };
        let can_more = victims
            .order
            .get(victims.next)
            .is_some_and(|&&(a, b, _)| can_preempt((a, b), (k0, k1)));
        if planner.cap.total_free() == 0 && !can_more {
            break;
        }
        let admit = |q: &QueuedJob| Decision {
            action: Action::Admit {
                job: q.id,
                workers: q.requested,
                gpu_type: None,
            },
            reason: reason(q, (k0, k1)),
        };
        if planner.admit(snap, q, q.requested) {
            out.push(admit(q));
            continue;
        }
        if victims.preempt_until_fits(snap, planner, q, (k0, k1), can_preempt) {
            for &ri in &victims.taken {
                if let Some(r) = snap.running.get(ri) {
                    out.push(Decision {
                        action: Action::Suspend { job: r.id },
                        reason: Reason::Preempted { by: q.id },
                    });
                }
            }
            out.push(admit(q));
        }
    }
}

/// The running jobs in preemption order and how far the pass has taken them.
struct Victims<'a> {
    order: Vec<&'a Keyed>,
    /// The next job to preempt.
    next: usize,
    /// Indices (into the snapshot's running jobs) preempted for the current queued job.
    taken: Vec<usize>,
}

impl Victims<'_> {
    /// Preempts the worst running jobs `q` (with key `key`) beats until it fits; true when it
    /// does (and is planned in). Otherwise gives the victims back, leaving them running.
    fn preempt_until_fits(
        &mut self,
        snap: &ClusterState,
        planner: &mut Planner,
        q: &QueuedJob,
        key: (f64, f64),
        can_preempt: &dyn Fn((f64, f64), (f64, f64)) -> bool,
    ) -> bool {
        self.taken.clear();
        while let Some(&&(a, b, ri)) = self.order.get(self.next) {
            if !can_preempt((a, b), key) {
                break;
            }
            let Some(r) = snap.running.get(ri) else {
                self.next += 1;
                continue;
            };
            planner.suspend(snap, r);
            self.taken.push(ri);
            self.next += 1;
            if q.requested <= planner.cap.total_free() && planner.admit(snap, q, q.requested) {
                return true;
            }
        }
        // give the victims back (in reverse) and leave them running
        for &ri in self.taken.iter().rev() {
            if let Some(r) = snap.running.get(ri) {
                planner.unsuspend(snap, r);
            }
        }
        self.next -= self.taken.len();
        false
    }
}
