//! Adaptive conformal inference in offset form: a one-sided bound's offset that follows the
//! outcomes of the jobs it bounded, so the long-run miss rate tracks the nominal one under
//! drift.

use serde::{Deserialize, Serialize};

/// Online adaptive correction of the bound (adaptive conformal inference, Gibbs & Candès
/// 2021, in offset form), as the service runs it: each time a job's outcome becomes known,
/// the offset (ln(1 + s) space) moves up by `step · coverage` after a miss and down by
/// `step · (1 − coverage)` after a hit, so the long-run share of misses tracks
/// `1 − coverage` whatever the drift. An outcome is known at `submit + min(wait, bound)`:
/// a job that starts reveals a hit (or a miss), a job still queued past its bound is a miss
/// before it ever starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdaptiveBound {
    pub offset: f64,
    pub step: f64,
    pub coverage: f64,
}

impl AdaptiveBound {
    /// Starts at `offset` (the static conformal offset).
    pub fn new(offset: f64, step: f64, coverage: f64) -> Self {
        AdaptiveBound {
            offset,
            step,
            coverage,
        }
    }

    /// A job's outcome became known: its wait exceeded its bound (`miss`) or not.
    pub fn observe(&mut self, miss: bool) {
        self.offset += if miss {
            self.step * self.coverage
        } else {
            -self.step * (1.0 - self.coverage)
        };
    }

    /// Replays jobs in submit order, each `(submit, wait, raw bound ln(1 + s))`: every job
    /// is given the bound of the offset in force at its submit, after the outcomes known by
    /// then were observed. Returns each job's bound in ln(1 + s).
    pub fn replay(&mut self, jobs: &[(f64, f64, f64)]) -> Vec<f64> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        // (time the outcome is known, miss)
        let mut pending: BinaryHeap<Reverse<(i64, bool)>> = BinaryHeap::new();
        let key = |t: f64| (t * 1000.0).round() as i64;
        let mut out = Vec::with_capacity(jobs.len());
        for &(submit, wait, raw) in jobs {
            while let Some(Reverse((t, miss))) = pending.peek().copied() {
                if t > key(submit) {
                    break;
                }
                pending.pop();
                self.observe(miss);
            }
            let b = raw + self.offset;
            out.push(b);
            let bound_s = b.exp_m1().max(0.0);
            let miss = wait > bound_s;
            pending.push(Reverse((key(submit + wait.min(bound_s)), miss)));
        }
        out
    }
}
