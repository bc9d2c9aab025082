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

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;

    #[test]
    fn a_miss_raises_and_a_hit_lowers_the_offset_by_its_step() {
        let mut b = AdaptiveBound::new(1.0, 0.1, 0.95);
        b.observe(true);
        assert!((b.offset - (1.0 + 0.1 * 0.95)).abs() < 1e-12);
        b.observe(false);
        assert!((b.offset - (1.0 + 0.1 * 0.95 - 0.1 * 0.05)).abs() < 1e-12);
    }

    #[test]
    fn an_outcome_is_known_at_the_start_or_when_the_bound_runs_out() {
        // a 100 s bound at offset 0; job 0 waits 1,000 s: a miss known at 100 s; job 1
        // starts at once: a hit known at 50 s
        let raw = 100f64.ln_1p();
        let jobs = [(0.0, 1000.0, raw), (50.0, 0.0, raw), (150.0, 0.0, raw)];
        let mut b = AdaptiveBound::new(0.0, 0.1, 0.9);
        let out = b.replay(&jobs);
        assert_eq!(out[0], raw);
        // at 50 s job 0's miss is not known yet
        assert_eq!(out[1], raw);
        // at 150 s both outcomes are
        assert!(
            (out[2] - (raw - 0.1 * 0.1 + 0.1 * 0.9)).abs() < 1e-12,
            "{out:?}"
        );
    }

    #[test]
    fn the_miss_rate_tracks_the_nominal_level_under_drift() {
        // SYNTHETIC: ln(1 + wait) = 5 + noise whose scale doubles halfway through; one
        // submit a minute; the raw bound is the noise-free 5 (the offset does the work)
        let mut rng = SplitMix64(3);
        let n = 20_000;
        let jobs: Vec<(f64, f64, f64)> = (0..n)
            .map(|i| {
                let scale = if i < n / 2 { 0.5 } else { 1.0 };
                let y: f64 = 5.0 + scale * rng.normal();
                (60.0 * i as f64, y.exp_m1().max(0.0), 5.0)
            })
            .collect();
        let mut b = AdaptiveBound::new(0.0, 0.05, 0.9);
        let out = b.replay(&jobs);
        let tail = n / 2 + 1000..n;
        let misses = tail
            .clone()
            .filter(|&i| jobs[i].1 > out[i].exp_m1().max(0.0))
            .count();
        let rate = misses as f64 / tail.len() as f64;
        assert!((rate - 0.1).abs() < 0.02, "miss rate {rate}");
    }

    #[test]
    fn an_adaptive_bound_survives_serialisation() {
        let mut b = AdaptiveBound::new(0.3, 0.05, 0.93);
        b.observe(true);
        let back: AdaptiveBound =
            serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        assert_eq!(
            (back.offset, back.step, back.coverage),
            (b.offset, b.step, b.coverage)
        );
    }
}
