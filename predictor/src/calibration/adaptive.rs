//! Adaptive conformal inference in offset form: a one-sided bound's offset that follows the
//! outcomes of the jobs it bounded, so the long-run miss rate tracks the nominal one under
//! drift, with feedback that arrives late (a wait is known only when the job starts, or
//! once it has outlasted its bound) and an offset that cannot wind up.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

/// How far (ln(1 + s)) the online offset may move from its calibrated start either way: a
/// factor of about 20 on the bound. Without it, a burst of misses whose hits arrive days
/// later could drive the offset (and the bound) without limit.
pub const MAX_SHIFT: f64 = 3.0;

/// Online adaptive correction of the bound (adaptive conformal inference, Gibbs & Candès
/// 2021, in offset form, as online quantile tracking), as the service runs it. A job's
/// outcome is taken when the bound issued at its submit runs out, never earlier: had the
/// jobs that started quickly been counted at their start, the first outcomes of every
/// period would be hits only (the misses are the jobs still waiting) and the offset would
/// sink. It is judged against that issued bound (a miss when the job still waits at it or
/// started later), the miss rate ACI's guarantee is about. The offset then moves up by
/// `s · coverage` after a miss and down by `s · (1 − coverage)` after a hit, staying within
/// [`MAX_SHIFT`] of its start, where `s` is `step` at most and at most 1 / (the outcomes in
/// flight: bounds issued whose outcome is not yet taken). Outcomes arrive a bound's length
/// late, so every outcome in flight was issued before the last ones moved the offset; with
/// the step shared among them, one full turn of outcomes moves the offset by about 1 at most
/// (a factor of e), however many jobs a day the site submits: a run of late misses cannot
/// wind it up, and a quiet stretch of hits cannot sink it before the misses of the next
/// burst come back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdaptiveBound {
    pub offset: f64,
    pub step: f64,
    pub coverage: f64,
    /// The calibrated start the offset stays within [`MAX_SHIFT`] of.
    pub start: f64,
    /// The highest bound it gives (seconds), when capped.
    pub ceiling_s: Option<f64>,
    /// Bounds issued whose outcome is not taken yet.
    #[serde(default)]
    pub in_flight: u64,
}

/// What is known of a bounded job's outcome at some instant ([`AdaptiveBound::judge`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The wait is known and within the issued bound.
    Hit,
    /// The wait is known to exceed the issued bound (it started later, or still waits past it).
    Miss,
    /// Still waiting, within the issued bound: look again this many seconds after submit.
    Pending { after_submit: f64 },
}

impl AdaptiveBound {
    /// Starts at `offset` (the static conformal offset).
    pub fn new(offset: f64, step: f64, coverage: f64) -> Self {
        AdaptiveBound {
            offset,
            step,
            coverage,
            start: offset,
            ceiling_s: None,
            in_flight: 0,
        }
    }

    /// The same bound never above `ceiling_s` seconds.
    pub fn with_ceiling(mut self, ceiling_s: Option<f64>) -> Self {
        self.ceiling_s = ceiling_s;
        self
    }

    /// A bound was issued: its outcome is in flight until observed or withdrawn.
    pub fn issue(&mut self) {
        self.in_flight += 1;
    }

    /// An issued bound will give no outcome (its job left the queue without starting).
    pub fn withdraw(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The step of the next outcome: `step`, at most 1 / the outcomes in flight.
    pub fn current_step(&self) -> f64 {
        self.step.min(1.0 / self.in_flight.max(1) as f64)
    }

    /// A job's outcome became known: its wait exceeded its issued bound (`miss`) or not.
    pub fn observe(&mut self, miss: bool) {
        let step = self.current_step();
        self.in_flight = self.in_flight.saturating_sub(1);
        let moved = self.offset
            + if miss {
                step * self.coverage
            } else {
                -step * (1.0 - self.coverage)
            };
        self.offset = moved.clamp(self.start - MAX_SHIFT, self.start + MAX_SHIFT);
    }

    /// The bound (seconds) the current offset gives a job whose raw bound is `raw`
    /// (ln(1 + s)), at most the ceiling.
    pub fn seconds(&self, raw: f64) -> f64 {
        self.cap((raw + self.offset).exp_m1())
    }

    /// `bound_s` seconds, at least 0 and at most the ceiling.
    pub fn cap(&self, bound_s: f64) -> f64 {
        bound_s
            .max(0.0)
            .min(self.ceiling_s.unwrap_or(f64::INFINITY))
    }

    /// Judges a job issued the bound `issued_s` (seconds), `elapsed` seconds after its
    /// submit: `wait` is its wait when it has started by then, `None` while it still waits
    /// (a job still queued exactly at the bound is a miss: its wait is longer).
    pub fn judge(issued_s: f64, elapsed: f64, wait: Option<f64>) -> Outcome {
        match wait {
            Some(w) if w > issued_s => Outcome::Miss,
            Some(_) => Outcome::Hit,
            None if elapsed >= issued_s => Outcome::Miss,
            None => Outcome::Pending {
                after_submit: issued_s,
            },
        }
    }

    /// Replays jobs in submit order, each `(submit, wait, raw bound ln(1 + s))`: every job
    /// is given the bound of the offset in force at its submit, after the outcomes known by
    /// then were observed ([`replay_delayed`]). Returns each job's bound in ln(1 + s).
    pub fn replay(&mut self, jobs: &[(f64, f64, f64)]) -> Vec<f64> {
        let mut bounds = [self.clone()];
        let out = replay_delayed(&mut bounds, jobs, |_, _| 0);
        *self = bounds[0].clone();
        out.into_iter().map(|(b, _)| b).collect()
    }
}

/// Replays jobs in submit order, each `(submit, wait, raw bound ln(1 + s))`, as the service
/// runs them: at each submit, the outcomes known by then are observed (each taken when its
/// job's issued bound runs out and judged by it: [`AdaptiveBound::judge`]), then
/// `group(k, bounds)` picks the bound of job `k`, which is issued at its current offset.
/// Returns each job's issued bound (ln(1 + s)) and group.
pub fn replay_delayed(
    bounds: &mut [AdaptiveBound],
    jobs: &[(f64, f64, f64)],
    mut group: impl FnMut(usize, &[AdaptiveBound]) -> usize,
) -> Vec<(f64, usize)> {
    let key = |t: f64| (t * 1000.0).round() as i64;
    // (instant the issued bound runs out, job); the issued bound (seconds), per job
    let mut pending: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut issued = vec![0.0; jobs.len()];
    let mut groups: Vec<usize> = Vec::with_capacity(jobs.len());
    let mut out = Vec::with_capacity(jobs.len());
    for (k, &(submit, _, raw)) in jobs.iter().enumerate() {
        while let Some(&Reverse((t, j))) = pending.peek() {
            if t > key(submit) {
                break;
            }
            pending.pop();
            let b = &mut bounds[groups[j]];
            let (limit, wait_j) = (issued[j], jobs[j].1);
            let started = (wait_j <= limit).then_some(wait_j);
            b.observe(AdaptiveBound::judge(limit, limit, started) == Outcome::Miss);
        }
        let g = group(k, bounds);
        groups.push(g);
        let b = raw + bounds[g].offset;
        out.push((b, g));
        bounds[g].issue();
        issued[k] = bounds[g].cap(b.exp_m1());
        pending.push(Reverse((key(submit + issued[k]), k)));
    }
    out
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
    fn an_outcome_is_taken_when_its_bound_runs_out() {
        // a 100 s bound at offset 0; job 0 waits 1,000 s: a miss taken at 100 s; job 1
        // starts at once: a hit, taken at 150 s when its bound runs out
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

    /// SYNTHETIC waits: ln(1 + wait) = `level` + N(0, 1), `level` 11 (about 17 hours) for
    /// the first half and 11.5 (65% longer) after; one submit a minute, so a job's outcome
    /// arrives hours to days after thousands of later jobs were answered. The raw bound is
    /// the first half's level (the model does not see the shift).
    fn late_and_shifted(n: usize, seed: u64) -> Vec<(f64, f64, f64)> {
        let mut rng = SplitMix64(seed);
        (0..n)
            .map(|i| {
                let level = if i < n / 2 { 11.0 } else { 11.5 };
                let y: f64 = level + rng.normal();
                (60.0 * i as f64, y.exp_m1().max(0.0), 11.0)
            })
            .collect()
    }

    fn coverage(jobs: &[(f64, f64, f64)], bounds: &[f64], range: std::ops::Range<usize>) -> f64 {
        let n = range.len();
        let hits = range
            .filter(|&i| jobs[i].1 <= bounds[i].exp_m1().max(0.0))
            .count();
        hits as f64 / n as f64
    }

    #[test]
    fn outcomes_days_late_and_a_shift_keep_coverage_and_cannot_wind_up() {
        let n = 40_000;
        let jobs = late_and_shifted(n, 11);
        // calibrated on the first half: the 95% quantile of N(0, 1)
        let start = 1.645;
        let mut b = AdaptiveBound::new(start, 0.05, 0.95);
        let out = b.replay(&jobs);
        // from the first job (no early run of hits drags it down) to the shift
        let before = coverage(&jobs, &out, 0..n / 2);
        assert!((0.94..=0.96).contains(&before), "before the shift {before}");
        // after it, thousands of outcomes are in flight (each bound runs days), so each
        // moves the offset by a few ten-thousandths: it climbs toward what the shifted waits
        // need (0.5 + 1.645) without passing it, a step per turn of outcomes
        let offsets: Vec<f64> = out.iter().map(|b| b - 11.0).collect();
        let at = |k: usize| offsets[k];
        assert!(at(n - 1) > start + 0.1, "{}", at(n - 1));
        assert!(at(n - 1) > at(n / 2 + 10_000) + 0.05, "{}", at(n - 1));
        let highest = offsets.iter().copied().fold(f64::MIN, f64::max);
        assert!(highest < 0.5 + start, "wound up to {highest}");
        let after = coverage(&jobs, &out, n / 2 + 10_000..n);
        assert!((0.88..0.95).contains(&after), "after the shift {after}");
        assert!(after > coverage(&jobs, &out, n / 2..n / 2 + 10_000));
    }

    #[test]
    fn quiet_stretches_do_not_sink_the_bound_before_a_burst_whose_misses_come_back_days_late() {
        // SYNTHETIC: 3-day stretches alternate between quiet (ln(1 + wait) = 10 + N(0, 1))
        // and busy (11.3 + N(0, 1)); one submit a minute; the raw bound is 11 throughout.
        // The quiet stretches' outcomes are hits that come back first; the busy ones'
        // misses only when their bounds run out, days later.
        let mut rng = SplitMix64(7);
        let n = 40_000;
        let jobs: Vec<(f64, f64, f64)> = (0..n)
            .map(|i| {
                let level = if (i / (3 * 1440)) % 2 == 0 {
                    10.0
                } else {
                    11.3
                };
                let y: f64 = level + rng.normal();
                (60.0 * i as f64, y.exp_m1().max(0.0), 11.0)
            })
            .collect();
        let start = 1.645;
        let mut b = AdaptiveBound::new(start, 0.05, 0.95);
        let out = b.replay(&jobs);
        for range in [0..n, n / 2..n] {
            let c = coverage(&jobs, &out, range.clone());
            assert!((0.93..=0.97).contains(&c), "{range:?}: {c}");
        }
        // the offset neither sank in the quiet stretches nor wound up in the busy ones
        for o in out.iter().map(|b| b - 11.0) {
            assert!((o - start).abs() < 0.5, "offset {o}");
        }
    }

    #[test]
    fn a_late_outcome_is_judged_by_its_issued_bound_and_shares_the_step_with_those_in_flight() {
        // issued a 100 s bound: a start at 150 s is a miss however the offset moved since;
        // still queued when it runs out, a miss; started within it, a hit
        assert_eq!(
            AdaptiveBound::judge(100.0, 100.0, Some(150.0)),
            Outcome::Miss
        );
        assert_eq!(AdaptiveBound::judge(100.0, 100.0, None), Outcome::Miss);
        assert_eq!(
            AdaptiveBound::judge(100.0, 100.0, Some(100.0)),
            Outcome::Hit
        );
        assert_eq!(
            AdaptiveBound::judge(100.0, 40.0, None),
            Outcome::Pending {
                after_submit: 100.0
            }
        );
        // 20 outcomes in flight: a miss moves the offset by 1/20 · coverage, not the step 0.1
        let mut b = AdaptiveBound::new(0.0, 0.1, 0.9);
        for _ in 0..20 {
            b.issue();
        }
        assert!((b.current_step() - 0.05).abs() < 1e-12);
        b.observe(true);
        assert!((b.offset - 0.05 * 0.9).abs() < 1e-12, "{}", b.offset);
        assert_eq!(b.in_flight, 19);
        b.withdraw();
        assert_eq!(b.in_flight, 18);
        // the offset stays within MAX_SHIFT of its start, however many misses come in
        let mut b = AdaptiveBound::new(1.0, 0.5, 0.95);
        for _ in 0..1000 {
            b.observe(true);
        }
        assert_eq!(b.offset, 1.0 + MAX_SHIFT);
        for _ in 0..100_000 {
            b.observe(false);
        }
        assert_eq!(b.offset, 1.0 - MAX_SHIFT);
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
