//! The risk-split (two-group Mondrian) conformal bound: jobs split at submit by a risk
//! score into a low-risk and a high-risk group, each bounded at its own level with its own
//! conformal offset ([`RiskSplitBound`]); online, each group's offset follows its own
//! outcomes and the split threshold follows recent scores ([`RiskSplitState`]).

use std::collections::VecDeque;

use augur_models::AnyModel;
use serde::{Deserialize, Serialize};

use crate::calibration::adaptive::{replay_delayed, AdaptiveBound};
use crate::calibration::conformal::conformal_offset;
use crate::metrics::regression::bound_metrics;
use crate::metrics::{quantile, quantile_sorted};

/// Fewest calibration jobs a risk group needs.
pub const RISK_MIN_GROUP: usize = 20;

/// Which of the two risk groups of a [`RiskSplitBound`] a job falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskGroup {
    /// Risk score at or below the group threshold: the predictable jobs, a tight bound at a
    /// level below the overall one.
    Low,
    /// Above it: an honest wide bound at a level above the overall one.
    High,
}

impl RiskGroup {
    /// The group of risk score `score` under group threshold `threshold`.
    pub fn of(score: f64, threshold: f64) -> RiskGroup {
        if score <= threshold {
            RiskGroup::Low
        } else {
            RiskGroup::High
        }
    }

    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            RiskGroup::Low => "low",
            RiskGroup::High => "high",
        }
    }
}

/// The score that ranks jobs by risk of a long wait in a [`RiskSplitBound`] (known at
/// submit; higher = riskier).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskScore {
    /// The bound model's own output (the 0.95 quantile of ln(1 + wait)).
    UpperModel,
    /// Log-odds of a classifier of "the wait is at least `threshold_s`" (`threshold_s`: a
    /// quantile of the fit period's waits). Training no longer fits one (the search chose
    /// the bound model's output on every trace it was measured on: `docs/queue-wait.md`);
    /// models saved with one still load and answer with it.
    Classifier { model: AnyModel, threshold_s: f64 },
}

impl RiskScore {
    /// Lowercase name.
    pub fn name(&self) -> &'static str {
        match self {
            RiskScore::UpperModel => "upper_model",
            RiskScore::Classifier { .. } => "classifier",
        }
    }
}

/// A risk-split (two-group Mondrian) conformal 95% bound: jobs are split at submit by a risk
/// score into a low-risk group (the `share_low` of jobs with the lowest scores) and a
/// high-risk group; each group's bound is the bound model's output plus its own conformal
/// offset at its own level, the levels chosen so that
/// `share_low · level_low + (1 − share_low) · level_high` is the overall coverage. Online
/// ([`RiskSplitState`]), the group threshold is the `share_low` quantile of the last
/// `window` submitted jobs' scores and each group's offset follows its own outcomes
/// ([`AdaptiveBound`]); offline ([`crate::QueueWaitPredictor::predict_row`]) the threshold and
/// offsets are those of the calibration slice.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RiskSplitBound {
    pub score: RiskScore,
    /// Share of jobs in the low-risk group.
    pub share_low: f64,
    pub level_low: f64,
    pub level_high: f64,
    /// Conformal offsets (ln(1 + s)) of each group on the calibration slice.
    pub offset_low: f64,
    pub offset_high: f64,
    /// Step of each group's [`AdaptiveBound`].
    pub step: f64,
    /// Recent submits whose scores set the online threshold.
    pub window: usize,
    /// The `share_low` quantile of the calibration slice's scores (the offline split).
    pub threshold: f64,
    /// The calibration slice's last `window` scores, in submit order: the online threshold's
    /// starting window.
    pub seed_scores: Vec<f64>,
}

/// The level of the high-risk group that makes the overall level `overall` when a share
/// `share_low` of jobs is bounded at `level_low`.
pub fn high_level(overall: f64, share_low: f64, level_low: f64) -> f64 {
    (overall - share_low * level_low) / (1.0 - share_low)
}

impl RiskSplitBound {
    /// Split-conformal calibration on labelled jobs (`raw`: the bound model's output,
    /// `scores`: risk scores, `y_log`: ln(1 + actual wait), in submit order): the threshold
    /// is the `share_low` quantile of the scores, each group's offset the conformal quantile
    /// of its residuals (y_log − raw) at its level, the high group's level keeping `overall`.
    /// The last `window` scores seed the online threshold. None when the levels are not
    /// valid or a group has fewer than 20 jobs.
    #[allow(clippy::too_many_arguments)]
    pub fn calibrated(
        score: RiskScore,
        share_low: f64,
        level_low: f64,
        overall: f64,
        step: f64,
        window: usize,
        raw: &[f64],
        scores: &[f64],
        y_log: &[f64],
    ) -> Option<RiskSplitBound> {
        let level_high = high_level(overall, share_low, level_low);
        if !(share_low > 0.0 && share_low < 1.0 && level_high < 1.0 && level_high >= overall) {
            return None;
        }
        let threshold = quantile(scores, share_low);
        let (mut lo, mut hi) = (Vec::new(), Vec::new());
        for ((&u, &s), &y) in raw.iter().zip(scores).zip(y_log) {
            if s <= threshold {
                lo.push(y - u);
            } else {
                hi.push(y - u);
            }
        }
        if lo.len() < RISK_MIN_GROUP || hi.len() < RISK_MIN_GROUP {
            return None;
        }
        Some(RiskSplitBound {
            score,
            share_low,
            level_low,
            level_high,
            offset_low: conformal_offset(&lo, level_low)?,
            offset_high: conformal_offset(&hi, level_high)?,
            step,
            window,
            threshold,
            seed_scores: scores[scores.len().saturating_sub(window)..].to_vec(),
        })
    }

    /// The overall nominal coverage of the two groups together.
    pub fn overall_level(&self) -> f64 {
        self.share_low * self.level_low + (1.0 - self.share_low) * self.level_high
    }

    /// The group of a job with risk score `score` under the fixed (offline) threshold.
    pub fn group(&self, score: f64) -> RiskGroup {
        RiskGroup::of(score, self.threshold)
    }

    /// (offset, level) of `group` on the calibration slice.
    pub fn of(&self, group: RiskGroup) -> (f64, f64) {
        match group {
            RiskGroup::Low => (self.offset_low, self.level_low),
            RiskGroup::High => (self.offset_high, self.level_high),
        }
    }

    /// The online state at deployment: the calibration offsets and the seed window, no
    /// bound above `ceiling_s` seconds when given.
    pub fn new_state_capped(&self, ceiling_s: Option<f64>) -> RiskSplitState {
        let mut s = self.new_state();
        s.low.ceiling_s = ceiling_s;
        s.high.ceiling_s = ceiling_s;
        s
    }

    /// The online state at deployment: the calibration offsets and the seed window.
    pub fn new_state(&self) -> RiskSplitState {
        let mut s = RiskSplitState {
            share_low: self.share_low,
            window: self.window.max(1),
            recent: VecDeque::with_capacity(self.window.max(1)),
            sorted: Vec::with_capacity(self.window.max(1)),
            fallback_threshold: self.threshold,
            low: AdaptiveBound::new(self.offset_low, self.step, self.level_low),
            high: AdaptiveBound::new(self.offset_high, self.step, self.level_high),
        };
        for &v in &self.seed_scores {
            s.record_submit(v);
        }
        s
    }
}

/// The online state of a [`RiskSplitBound`]: the window of recent submits' risk scores
/// (the threshold) and one [`AdaptiveBound`] per group, each moved only by its own group's
/// outcomes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RiskSplitState {
    share_low: f64,
    window: usize,
    /// Scores in submit order.
    recent: VecDeque<f64>,
    /// The same scores, sorted.
    sorted: Vec<f64>,
    /// Threshold while the window is empty.
    fallback_threshold: f64,
    pub low: AdaptiveBound,
    pub high: AdaptiveBound,
}

impl RiskSplitState {
    /// The current group threshold: the `share_low` quantile of the window's scores.
    pub fn threshold(&self) -> f64 {
        if self.sorted.is_empty() {
            return self.fallback_threshold;
        }
        quantile_sorted(&self.sorted, self.share_low)
    }

    /// The group of a job with risk score `score` now.
    pub fn group(&self, score: f64) -> RiskGroup {
        RiskGroup::of(score, self.threshold())
    }

    /// The adaptive bound of `group`.
    pub fn bound(&self, group: RiskGroup) -> &AdaptiveBound {
        match group {
            RiskGroup::Low => &self.low,
            RiskGroup::High => &self.high,
        }
    }

    /// A job with risk score `score` was submitted (it joins the threshold's window).
    /// Non-finite scores are ignored.
    pub fn record_submit(&mut self, score: f64) {
        if !score.is_finite() {
            return;
        }
        if self.recent.len() == self.window {
            if let Some(old) = self.recent.pop_front() {
                let i = self.sorted.partition_point(|v| *v < old);
                if i < self.sorted.len() {
                    self.sorted.remove(i);
                }
            }
        }
        self.recent.push_back(score);
        let i = self.sorted.partition_point(|v| *v < score);
        self.sorted.insert(i, score);
    }

    /// A job of `group` revealed its outcome: its wait exceeded its bound (`miss`) or not.
    /// Only that group's offset moves.
    pub fn observe(&mut self, group: RiskGroup, miss: bool) {
        self.bound_mut(group).observe(miss);
    }

    /// A bound of `group` was issued: its outcome is in flight.
    pub fn issue(&mut self, group: RiskGroup) {
        self.bound_mut(group).issue();
    }

    /// A bound of `group` will give no outcome (its job left the queue without starting).
    pub fn withdraw(&mut self, group: RiskGroup) {
        self.bound_mut(group).withdraw();
    }

    fn bound_mut(&mut self, group: RiskGroup) -> &mut AdaptiveBound {
        match group {
            RiskGroup::Low => &mut self.low,
            RiskGroup::High => &mut self.high,
        }
    }

    /// Replays jobs in submit order, each `(submit, wait, raw bound ln(1 + s), risk score)`,
    /// as the service runs: each job is grouped by the threshold in force at its submit and
    /// bounded with its group's offset after the outcomes known by then were observed, each
    /// judged by the bound issued to it when that bound runs out ([`replay_delayed`]).
    /// Returns each job's bound (ln(1 + s)) and group.
    pub fn replay(&mut self, jobs: &[(f64, f64, f64, f64)]) -> Vec<(f64, RiskGroup)> {
        let timed: Vec<(f64, f64, f64)> = jobs.iter().map(|&(s, w, r, _)| (s, w, r)).collect();
        let mut bounds = [self.low.clone(), self.high.clone()];
        let out = replay_delayed(&mut bounds, &timed, |k, _| {
            let score = jobs[k].3;
            let g = self.group(score);
            self.record_submit(score);
            usize::from(g == RiskGroup::High)
        });
        [self.low, self.high] = bounds;
        out.into_iter()
            .map(|(b, g)| {
                let g = if g == 1 {
                    RiskGroup::High
                } else {
                    RiskGroup::Low
                };
                (b, g)
            })
            .collect()
    }
}

/// Coverage and median bound of a risk-split bound, overall and per group.
#[derive(Debug, Clone, Serialize)]
pub struct RiskSplitSummary {
    /// Which score split the groups (`upper_model` or `classifier`).
    pub score: String,
    /// Nominal share of the low-risk group and the levels.
    pub share_low_nominal: f64,
    pub level_low: f64,
    pub level_high: f64,
    /// Share of the evaluated jobs that fell in the low-risk group.
    pub share_low: f64,
    pub coverage: f64,
    pub median_bound_s: f64,
    pub coverage_low: f64,
    pub median_bound_low_s: f64,
    pub coverage_high: f64,
    pub median_bound_high_s: f64,
}

impl RiskSplitSummary {
    /// Summarises bounds (seconds) and groups against actual waits.
    pub fn measure(
        split: &RiskSplitBound,
        upper: &[f64],
        groups: &[RiskGroup],
        actual: &[f64],
    ) -> RiskSplitSummary {
        let pick = |g: RiskGroup| -> (Vec<f64>, Vec<f64>) {
            upper
                .iter()
                .zip(actual)
                .zip(groups)
                .filter(|(_, gg)| **gg == g)
                .map(|((u, a), _)| (*u, *a))
                .unzip()
        };
        let (ul, al) = pick(RiskGroup::Low);
        let (uh, ah) = pick(RiskGroup::High);
        let (coverage, median_bound_s) = bound_metrics(upper, actual);
        let (coverage_low, median_bound_low_s) = bound_metrics(&ul, &al);
        let (coverage_high, median_bound_high_s) = bound_metrics(&uh, &ah);
        RiskSplitSummary {
            score: split.score.name().to_string(),
            share_low_nominal: split.share_low,
            level_low: split.level_low,
            level_high: split.level_high,
            share_low: ul.len() as f64 / actual.len().max(1) as f64,
            coverage,
            median_bound_s,
            coverage_low,
            median_bound_low_s,
            coverage_high,
            median_bound_high_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(window: usize) -> RiskSplitBound {
        RiskSplitBound {
            score: RiskScore::UpperModel,
            share_low: 0.6,
            level_low: 0.93,
            level_high: high_level(0.95, 0.6, 0.93),
            offset_low: -0.5,
            offset_high: 0.5,
            step: 0.05,
            window,
            threshold: 0.0,
            seed_scores: Vec::new(),
        }
    }

    #[test]
    fn the_low_group_includes_its_threshold() {
        assert_eq!(RiskGroup::of(0.5, 0.5), RiskGroup::Low);
        assert_eq!(RiskGroup::of(0.500_001, 0.5), RiskGroup::High);
        assert_eq!(
            (RiskGroup::Low.name(), RiskGroup::High.name()),
            ("low", "high")
        );
        assert_eq!(RiskScore::UpperModel.name(), "upper_model");
    }

    #[test]
    fn calibration_needs_enough_jobs_in_each_group() {
        // SYNTHETIC: scores 0, 1, 2, ... with zero residuals
        let cal = |n: usize| {
            let s: Vec<f64> = (0..n).map(|k| k as f64).collect();
            RiskSplitBound::calibrated(RiskScore::UpperModel, 0.5, 0.94, 0.95, 0.05, 10, &s, &s, &s)
        };
        // 39 jobs: 20 at or below the median score, 19 above
        assert!(cal(39).is_none());
        let b = cal(60).expect("30 jobs a group");
        assert_eq!(b.threshold, 29.5);
        assert_eq!((b.offset_low, b.offset_high), (0.0, 0.0));
        assert!((b.level_high - 0.96).abs() < 1e-12);
        assert_eq!(
            b.seed_scores,
            (50..60).map(|k| k as f64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_online_threshold_is_the_share_quantile_of_the_window() {
        let mut st = bound(5).new_state();
        // an empty window falls back to the calibration threshold
        assert_eq!(st.threshold(), 0.0);
        for v in [5.0, 1.0, 7.0, 3.0, 8.0, 2.0, 6.0, 4.0] {
            st.record_submit(v);
        }
        assert_eq!(st.threshold(), quantile(&[3.0, 8.0, 2.0, 6.0, 4.0], 0.6));
        assert_eq!(st.group(4.8), RiskGroup::Low);
        assert_eq!(st.group(4.9), RiskGroup::High);
        // each group's offset starts at its calibration offset
        assert_eq!(
            (st.bound(RiskGroup::Low).offset, st.high.offset),
            (-0.5, 0.5)
        );
    }

    #[test]
    fn a_summary_counts_each_group_on_its_own() {
        let b = bound(5);
        let upper = [10.0, 10.0, 100.0, 100.0];
        let actual = [5.0, 20.0, 50.0, 60.0];
        let groups = [
            RiskGroup::Low,
            RiskGroup::Low,
            RiskGroup::High,
            RiskGroup::High,
        ];
        let m = RiskSplitSummary::measure(&b, &upper, &groups, &actual);
        assert_eq!(
            (m.share_low, m.coverage_low, m.coverage_high),
            (0.5, 0.5, 1.0)
        );
        assert_eq!((m.coverage, m.median_bound_s), (0.75, 55.0));
        assert_eq!(m.score, "upper_model");
    }
}
