//! Split-conformal calibration: the offsets of a two-sided interval and of a one-sided
//! bound from calibration residuals (with the finite-sample correction), and the online
//! [`ConformalWindow`] that recalibrates an interval from the residuals of recently
//! finished jobs.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::metrics::{quantile, quantile_sorted};

/// Split-conformal offsets (lower, upper) in ln space for `coverage`, with the finite-sample
/// correction.
pub fn conformal_offsets(resid: &[f64], coverage: f64) -> (f64, f64) {
    let mut sorted = resid.to_vec();
    sorted.sort_by(f64::total_cmp);
    conformal_offsets_sorted(&sorted, coverage)
}

/// [`conformal_offsets`] of residuals already sorted ascending (by `f64::total_cmp`).
fn conformal_offsets_sorted(sorted: &[f64], coverage: f64) -> (f64, f64) {
    let alpha = 1.0 - coverage;
    let m = sorted.len().max(1) as f64;
    let adj = |q: f64| ((q * (m + 1.0)).ceil() / m).clamp(0.0, 1.0);
    (
        quantile_sorted(sorted, 1.0 - adj(1.0 - alpha / 2.0)),
        quantile_sorted(sorted, adj(1.0 - alpha / 2.0)),
    )
}

/// The split-conformal offset for a one-sided bound: the ⌈(m + 1)·coverage⌉/m quantile of
/// the scores (actual − bound).
pub fn conformal_offset(scores: &[f64], coverage: f64) -> Option<f64> {
    if scores.is_empty() {
        return None;
    }
    let m = scores.len() as f64;
    let q = ((coverage * (m + 1.0)).ceil() / m).clamp(0.0, 1.0);
    Some(quantile(scores, q))
}

/// The calibration level that, learnt from the history itself, restores `coverage` one
/// slice later: `history` (residuals of an out-of-sample stand-in for the model, oldest
/// first) is cut into consecutive slices of `slice` residuals; for each slice the lowest
/// level on the grid whose offsets cover `coverage` of the *next* slice is found, and the
/// median of those levels is answered (in `[coverage, DRIFT_LEVEL_MAX]`). Calibrated on the
/// past, an interval is served on a future that drifts from it; this measures how much
/// wider it had to be, one slice ahead, each time before. `coverage` when there are fewer
/// than two slice pairs.
pub fn drift_level(history: &[f64], slice: usize, coverage: f64) -> f64 {
    let slice = slice.max(20);
    let chunks: Vec<&[f64]> = history.chunks_exact(slice).collect();
    let mut levels: Vec<f64> = chunks
        .windows(2)
        .map(|pair| {
            let mut cal = pair[0].to_vec();
            cal.sort_by(f64::total_cmp);
            let next = pair[1];
            let steps = ((DRIFT_LEVEL_MAX - coverage) / DRIFT_LEVEL_STEP).round() as usize;
            (0..=steps)
                .map(|k| coverage + k as f64 * DRIFT_LEVEL_STEP)
                .find(|&level| {
                    let (lo, hi) = conformal_offsets_sorted(&cal, level);
                    let inside = next.iter().filter(|r| lo <= **r && **r <= hi).count();
                    inside as f64 >= coverage * next.len() as f64
                })
                .unwrap_or(DRIFT_LEVEL_MAX)
        })
        .collect();
    if levels.len() < 2 {
        return coverage;
    }
    levels.sort_by(f64::total_cmp);
    quantile_sorted(&levels, 0.5).clamp(coverage, DRIFT_LEVEL_MAX)
}

/// The highest level [`drift_level`] answers: past it the two-sided interval is the
/// residuals' 2.5%–97.5% range, and wider answers say little.
pub const DRIFT_LEVEL_MAX: f64 = 0.95;

/// The grid step of [`drift_level`].
const DRIFT_LEVEL_STEP: f64 = 0.005;

/// The width in ln space of a [`ResidualMemory`] bin (1% of a run time).
pub const MEMORY_BIN: f64 = 0.01;

/// Every residual since calibration, the calibration slice's first: the long memory under
/// the online window. Counts in bins of [`MEMORY_BIN`], so it stays small however many
/// jobs finish; its offsets are the split-conformal ones at `level`, each widened to its
/// bin's outer edge, so before any outcome they hold the calibration residuals' offsets at
/// that level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResidualMemory {
    level: f64,
    counts: BTreeMap<i32, u64>,
    total: u64,
}

impl ResidualMemory {
    /// A memory of the calibration `residuals`, answering offsets at `level`.
    pub fn new(residuals: &[f64], level: f64) -> ResidualMemory {
        let mut m = ResidualMemory {
            level,
            counts: BTreeMap::new(),
            total: 0,
        };
        for &r in residuals {
            m.add(r);
        }
        m
    }

    /// Counts one residual (non-finite ones are skipped).
    pub fn add(&mut self, residual_log: f64) {
        if !residual_log.is_finite() {
            return;
        }
        let bin = (residual_log / MEMORY_BIN)
            .floor()
            .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
        *self.counts.entry(bin).or_default() += 1;
        self.total += 1;
    }

    /// Residuals counted.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The (lower, upper) offsets at the memory's level: of the two ranks
    /// [`conformal_offsets`] interpolates between on each side, the bin holding the outer
    /// one, its lower edge below and its upper edge above (never inside the static offsets).
    pub fn offsets(&self) -> Option<(f64, f64)> {
        if self.total == 0 {
            return None;
        }
        let m = self.total as f64;
        let alpha = 1.0 - self.level;
        let q_hi = ((1.0 - alpha / 2.0) * (m + 1.0)).ceil() / m;
        let q_hi = q_hi.clamp(0.0, 1.0);
        let q_lo = 1.0 - q_hi;
        // the ranks quantile_sorted interpolates between: the outer one on each side
        let lo_rank = (q_lo * (m - 1.0)).floor() as u64;
        let hi_rank = (q_hi * (m - 1.0)).ceil() as u64;
        let (lo, hi) = (self.bin_of_rank(lo_rank)?, self.bin_of_rank(hi_rank)?);
        Some((
            f64::from(lo) * MEMORY_BIN,
            (f64::from(hi) + 1.0) * MEMORY_BIN,
        ))
    }

    /// The bin holding the residual of 0-based `rank` in ascending order.
    fn bin_of_rank(&self, rank: u64) -> Option<i32> {
        let mut seen = 0;
        for (&bin, &count) in &self.counts {
            seen += count;
            if seen > rank {
                return Some(bin);
            }
        }
        self.counts.keys().next_back().copied()
    }
}

/// Online conformal calibration: the residuals (ln actual − ln predicted) of the most
/// recent finished jobs, fed as jobs finish, so intervals follow drift in the cluster; plus
/// adaptive conformal inference (Gibbs & Candès, 2021): each finished job whose interval was
/// issued at submit nudges the working miscoverage level by `gamma · (α − missed)`, so the
/// long-run share of jobs inside their interval converges to the nominal coverage even when
/// residuals are not exchangeable. The interval it answers is never narrower than its
/// `floor` (the static interval, calibrated on the drift the training period showed): a
/// window of the last jobs holds one or two bursts, and on a trace whose bursts change
/// faster than their outcomes arrive it is narrower than the spread the next burst brings.
/// ACI judges the interval answered, so where the floor over-covers the window narrows.
/// With a [`ResidualMemory`] the floor is instead the memory's offsets over the calibration
/// residuals and every outcome since, so a trace that became more predictable (or less)
/// after training moves the floor as the outcomes pile up, and a burst moves it by its
/// share of them only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConformalWindow {
    capacity: usize,
    residuals: VecDeque<f64>,
    coverage: f64,
    /// Working miscoverage level (starts at 1 − coverage).
    alpha_t: f64,
    /// ACI step size (0 = plain sliding-window conformal).
    gamma: f64,
    /// The narrowest (lower, upper) offsets answered (none: the window's alone).
    #[serde(default)]
    floor: Option<(f64, f64)>,
    /// The long memory whose offsets are the floor instead of `floor` (none: `floor`).
    #[serde(default)]
    memory: Option<ResidualMemory>,
    #[serde(skip)]
    cached: Option<(f64, f64)>,
    /// The residuals sorted ascending, kept as they come and go, so the offsets cost no
    /// sort per submit (not serialised: rebuilt when it does not match `residuals`).
    #[serde(skip)]
    sorted: Vec<f64>,
}

/// Default ACI step size.
pub const ACI_GAMMA: f64 = 0.005;

/// The lowest working miscoverage level. At or below 0 the interval is the window's whole
/// range (then cut at the job's ceiling), and the level keeps counting the misses beyond it,
/// so it stays that wide until enough hits have come in. Clamped at 0, as Gibbs & Candès do
/// not, those misses were forgotten: on a trace whose residuals move faster than outcomes
/// arrive (Graham: `docs/calibration.md`) the online interval covered 65% for 80%. The floor
/// only stops a long run of misses from holding the widest interval for ever. A window with
/// a floor (the static interval, [`ConformalWindow::with_floor`]) stays at or above 0: the
/// floor already answers the spread the window does not hold.
pub const ALPHA_FLOOR: f64 = -1.0;

impl ConformalWindow {
    /// A window of the last `capacity` residuals for intervals of `coverage`, with the
    /// default ACI step.
    pub fn new(capacity: usize, coverage: f64) -> ConformalWindow {
        ConformalWindow {
            capacity: capacity.max(10),
            residuals: VecDeque::new(),
            coverage,
            alpha_t: 1.0 - coverage,
            gamma: ACI_GAMMA,
            floor: None,
            memory: None,
            cached: None,
            sorted: Vec::new(),
        }
    }

    /// The same window with ACI step `gamma` (0 turns adaptation off).
    pub fn with_gamma(mut self, gamma: f64) -> ConformalWindow {
        self.gamma = gamma.max(0.0);
        self
    }

    /// The same window answering intervals at least as wide as the offsets `floor`
    /// (lower ≤ 0 ≤ upper in ln space: the static interval).
    pub fn with_floor(mut self, floor: (f64, f64)) -> ConformalWindow {
        self.floor = Some(floor);
        self.cached = None;
        self
    }

    /// The same window floored at `memory`'s offsets (in place of the fixed floor), fed
    /// by [`ConformalWindow::remember`].
    pub fn with_memory(mut self, memory: ResidualMemory) -> ConformalWindow {
        self.memory = Some(memory);
        self.cached = None;
        self
    }

    /// The long memory, when the window has one.
    pub fn memory(&self) -> Option<&ResidualMemory> {
        self.memory.as_ref()
    }

    /// Counts the residual of a finished job the model never saw (submitted after its
    /// training history) in the long memory; nothing without one.
    pub fn remember(&mut self, residual_log: f64) {
        if let Some(m) = &mut self.memory {
            m.add(residual_log);
            self.cached = None;
        }
    }

    /// A window for intervals of `coverage`, seeded with calibration `residuals` (oldest
    /// first; the runtime predictor's validation residuals).
    pub fn seeded(capacity: usize, coverage: f64, residuals: &[f64]) -> ConformalWindow {
        let mut w = ConformalWindow::new(capacity, coverage);
        for r in residuals {
            w.observe(*r);
        }
        w
    }

    /// Adds the residual of a job that finished (no interval was issued for it).
    pub fn observe(&mut self, residual_log: f64) {
        self.observe_outcome(residual_log, None);
    }

    /// Adds the residual of a finished job and, when the interval offsets `issued` to it at
    /// submit are given, adapts the working level to whether it fell inside.
    pub fn observe_outcome(&mut self, residual_log: f64, issued: Option<(f64, f64)>) {
        if !residual_log.is_finite() {
            return;
        }
        if let Some((lo, hi)) = issued {
            let missed = if lo <= residual_log && residual_log <= hi {
                0.0
            } else {
                1.0
            };
            let alpha = 1.0 - self.coverage;
            // with a floor the level stays at or above 0: the floor is the memory of the
            // spread beyond the window, and the window's whole range on top of it over-covers
            let lowest = if self.floor.is_some() || self.memory.is_some() {
                0.0
            } else {
                ALPHA_FLOOR
            };
            self.alpha_t = (self.alpha_t + self.gamma * (alpha - missed)).clamp(lowest, 1.0);
        }
        self.sync_sorted();
        if self.residuals.len() == self.capacity {
            if let Some(old) = self.residuals.pop_front() {
                let i = self.sorted.partition_point(|v| v.total_cmp(&old).is_lt());
                if i < self.sorted.len() {
                    self.sorted.remove(i);
                }
            }
        }
        self.residuals.push_back(residual_log);
        let i = self
            .sorted
            .partition_point(|v| v.total_cmp(&residual_log).is_le());
        self.sorted.insert(i, residual_log);
        self.cached = None;
    }

    /// Number of residuals held.
    pub fn len(&self) -> usize {
        self.residuals.len()
    }

    /// True when no residual was observed.
    pub fn is_empty(&self) -> bool {
        self.residuals.is_empty()
    }

    /// The working miscoverage level.
    pub fn alpha(&self) -> f64 {
        self.alpha_t
    }

    /// The (lower, upper) offsets in ln space at the working level, with the finite-sample
    /// correction, without caching them (for readers holding a shared borrow).
    pub fn current_offsets(&self) -> Option<(f64, f64)> {
        if self.residuals.is_empty() {
            return None;
        }
        if let Some(c) = self.cached {
            return Some(c);
        }
        let (lo, hi) = if self.sorted.len() == self.residuals.len() {
            conformal_offsets_sorted(&self.sorted, 1.0 - self.alpha_t)
        } else {
            let v: Vec<f64> = self.residuals.iter().copied().collect();
            conformal_offsets(&v, 1.0 - self.alpha_t)
        };
        let floor = match &self.memory {
            Some(m) => m.offsets(),
            None => self.floor,
        };
        Some(match floor {
            Some((flo, fhi)) => (lo.min(flo), hi.max(fhi)),
            None => (lo, hi),
        })
    }

    /// Rebuilds the sorted copy when it does not hold the residuals (a deserialised window).
    fn sync_sorted(&mut self) {
        if self.sorted.len() != self.residuals.len() {
            self.sorted = self.residuals.iter().copied().collect();
            self.sorted.sort_by(f64::total_cmp);
        }
    }

    /// [`ConformalWindow::current_offsets`], cached until the next residual.
    pub fn offsets(&mut self) -> Option<(f64, f64)> {
        let c = self.current_offsets()?;
        self.cached = Some(c);
        Some(c)
    }
}

/// Residuals the online window holds.
pub const ONLINE_WINDOW: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic standard normals (xorshift + Box-Muller), for the calibration tests.
    struct Normals(u64);
    impl Normals {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn next(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// Share of `residuals` inside the interval `w` issued to each just before it, each
    /// job's outcome (whether it fell inside the interval issued, and its residual for the
    /// long memory) reaching `w` `delay` submissions later.
    fn coverage_of_late_outcomes(
        w: &mut ConformalWindow,
        residuals: impl Iterator<Item = f64>,
        delay: usize,
    ) -> f64 {
        let (mut inside, mut n) = (0usize, 0usize);
        let mut pending: VecDeque<(f64, (f64, f64))> = VecDeque::new();
        for r in residuals {
            let issued = w.offsets().expect("seeded");
            inside += usize::from(issued.0 <= r && r <= issued.1);
            n += 1;
            pending.push_back((r, issued));
            if pending.len() > delay {
                if let Some((r, iss)) = pending.pop_front() {
                    w.observe_outcome(r, Some(iss));
                    w.remember(r);
                }
            }
        }
        inside as f64 / n as f64
    }

    /// Share of residuals inside the interval issued just before each was observed, when
    /// the residual spread doubles after calibration.
    fn coverage_under_drift(gamma: f64) -> f64 {
        coverage_under_drift_floored(gamma, false)
    }

    /// [`coverage_under_drift`], the window floored at its seed's own 80% offsets when
    /// `floored` (the static interval, calibrated before the drift).
    fn coverage_under_drift_floored(gamma: f64, floored: bool) -> f64 {
        let mut rng = Normals(0x9e37_79b9_7f4a_7c15);
        let seed: Vec<f64> = (0..1000).map(|_| rng.next()).collect();
        let mut w = ConformalWindow::seeded(1000, 0.8, &seed).with_gamma(gamma);
        if floored {
            w = w.with_floor(conformal_offsets(&seed, 0.8));
        }
        // each job finishes 50 submissions after it was issued its interval
        let drifted = (0..6_000).map(|_| 2.0 * rng.next() + 0.5);
        coverage_of_late_outcomes(&mut w, drifted, 50)
    }

    #[test]
    fn adaptive_conformal_holds_coverage_under_drift() {
        let adaptive = coverage_under_drift(ACI_GAMMA);
        assert!((0.77..=0.83).contains(&adaptive), "{adaptive}");
        // the same stream with adaptation off: the window lags the drift and undercovers
        let plain = coverage_under_drift(0.0);
        assert!(plain < adaptive - 0.01, "{plain} vs {adaptive}");
    }

    /// Share of residuals inside the interval issued just before each, when the residuals
    /// come in bursts (runs of 400 alike, as job arrays) whose outcomes arrive 600
    /// submissions later: by then the next burst, unlike the last, is being answered.
    fn coverage_of_late_bursts(gamma: f64) -> f64 {
        coverage_of_bursts(gamma, 400, false)
    }

    /// The residual of the `k`th job of [`coverage_of_bursts`]: bursts of `burst` alike,
    /// centred at 0, +3, 0, −3 in turn.
    fn burst_residual(rng: &mut Normals, k: usize, burst: usize) -> f64 {
        let centre = match k / burst % 4 {
            1 => 3.0,
            3 => -3.0,
            _ => 0.0,
        };
        centre + 0.3 * rng.next()
    }

    /// [`coverage_of_late_bursts`] with bursts of `burst` jobs and, when `floored`, the
    /// window floored at the static offsets of 8,000 earlier residuals of the same bursts.
    fn coverage_of_bursts(gamma: f64, burst: usize, floored: bool) -> f64 {
        coverage_of_bursts_remembered(gamma, burst, floored, false)
    }

    /// [`coverage_of_bursts`], the floor the long memory of the 8,000 earlier residuals
    /// and of every outcome when `remembered`.
    fn coverage_of_bursts_remembered(
        gamma: f64,
        burst: usize,
        floored: bool,
        remembered: bool,
    ) -> f64 {
        let mut rng = Normals(0x2545_f491_4f6c_dd1d);
        let mut w = ConformalWindow::new(1000, 0.8).with_gamma(gamma);
        if floored {
            let history: Vec<f64> = (0..8000)
                .map(|k| burst_residual(&mut rng, k, burst))
                .collect();
            w = w.with_floor(conformal_offsets(&history, 0.8));
            if remembered {
                w = w.with_memory(ResidualMemory::new(&history, 0.8));
            }
        }
        for _ in 0..1000 {
            w.observe(rng.next());
        }
        // a burst's centre: far off the model (either way) half the time
        let bursts = (0..40_000).map(|k| burst_residual(&mut rng, k, burst));
        coverage_of_late_outcomes(&mut w, bursts, 600)
    }

    #[test]
    fn misses_beyond_the_window_are_remembered_and_coverage_holds_for_late_bursts() {
        let adaptive = coverage_of_late_bursts(ACI_GAMMA);
        assert!((0.77..=0.83).contains(&adaptive), "{adaptive}");
        // the level went below 0 (the window's whole range) and was held there
        let plain = coverage_of_late_bursts(0.0);
        assert!(plain < 0.7, "plain window {plain} vs adaptive {adaptive}");
    }

    #[test]
    fn a_floor_at_the_static_interval_holds_coverage_when_bursts_outlast_the_window() {
        // bursts of 1,000 alike whose outcomes arrive 600 submissions late: the window
        // holds the last burst, the one being answered is another
        let window = coverage_of_bursts(ACI_GAMMA, 1000, false);
        assert!(window < 0.72, "window alone {window}");
        let floored = coverage_of_bursts(ACI_GAMMA, 1000, true);
        assert!((0.78..=0.82).contains(&floored), "floored {floored}");
        // a shift the static interval never saw (spread doubles, outcomes 50 late): the
        // window still widens past the floor
        let shifted = coverage_under_drift_floored(ACI_GAMMA, true);
        assert!(
            (0.77..=0.83).contains(&shifted),
            "floored under drift {shifted}"
        );
    }

    #[test]
    fn a_floored_window_answers_no_narrower_than_its_floor_and_keeps_its_level_at_0() {
        let mut w = ConformalWindow::new(100, 0.8).with_floor((-1.0, 2.0));
        for k in 0..100 {
            w.observe(f64::from(k % 10) * 0.01);
        }
        // the window's residuals span 0..0.09: the floor is answered
        assert_eq!(w.offsets(), Some((-1.0, 2.0)));
        // a run of misses lowers the level to 0 (the window's whole range), not below
        for _ in 0..1000 {
            w.observe_outcome(0.05, Some((1.0, 1.5)));
        }
        assert_eq!(w.alpha(), 0.0);
        // residuals wider than the floor widen the answer past it
        for _ in 0..100 {
            w.observe(5.0);
        }
        assert_eq!(w.offsets(), Some((-1.0, 5.0)));
        // without a floor the same misses take the level below 0
        let mut plain = ConformalWindow::new(100, 0.8);
        for _ in 0..1000 {
            plain.observe_outcome(0.05, Some((1.0, 1.5)));
        }
        assert_eq!(plain.alpha(), ALPHA_FLOOR);
        // the floor is saved with the window; a window saved before it had none
        let back: ConformalWindow =
            serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back.current_offsets(), w.offsets());
        let mut old = serde_json::to_value(&plain).unwrap();
        old.as_object_mut().unwrap().remove("floor");
        let old: ConformalWindow = serde_json::from_value(old).unwrap();
        assert_eq!(old.current_offsets(), plain.offsets());
    }

    /// Share of residuals inside the interval issued just before each, when the residuals
    /// come `scale` times as spread as the 2,000 the window was calibrated on (outcomes 50
    /// submissions late): the window floored at their static offsets, and with
    /// `remembered` at the long memory of them and of every outcome.
    fn coverage_after_a_change_of_spread(scale: f64, remembered: bool) -> f64 {
        let mut rng = Normals(0x9e37_79b9_7f4a_7c15);
        let seed: Vec<f64> = (0..2000).map(|_| rng.next()).collect();
        let mut w = ConformalWindow::seeded(1000, 0.8, &seed[1000..])
            .with_floor(conformal_offsets(&seed, 0.8));
        if remembered {
            w = w.with_memory(ResidualMemory::new(&seed, 0.8));
        }
        let changed = (0..20_000).map(|_| scale * rng.next());
        coverage_of_late_outcomes(&mut w, changed, 50)
    }

    #[test]
    fn a_long_memory_lets_the_floor_follow_a_trace_that_became_more_predictable() {
        // half the spread after calibration: the fixed floor answers the old spread for ever
        let fixed = coverage_after_a_change_of_spread(0.5, false);
        assert!(fixed > 0.95, "fixed floor {fixed}");
        let remembered = coverage_after_a_change_of_spread(0.5, true);
        // the floor narrows as the outcomes outnumber the calibration residuals (a tenth of
        // them here), never below the nominal coverage
        assert!(
            remembered >= 0.78 && remembered < fixed - 0.08,
            "remembered {remembered} (fixed {fixed})"
        );
        // twice the spread: the window widens past the floor either way
        let wider = coverage_after_a_change_of_spread(2.0, true);
        assert!((0.77..=0.83).contains(&wider), "wider {wider}");
        // bursts longer than the window, outcomes 600 late: the memory holds them as the
        // fixed floor does
        let bursts = coverage_of_bursts_remembered(ACI_GAMMA, 1000, true, true);
        assert!((0.78..=0.82).contains(&bursts), "bursts {bursts}");
    }

    #[test]
    fn a_residual_memory_answers_the_static_offsets_widened_to_its_bins() {
        let mut rng = Normals(0x1234_5678_9abc_def1);
        for n in [1usize, 7, 100, 3001] {
            let resid: Vec<f64> = (0..n).map(|_| 1.7 * rng.next() - 0.3).collect();
            for level in [0.5, 0.8, 0.95, 1.0] {
                let (slo, shi) = conformal_offsets(&resid, level);
                let memory = ResidualMemory::new(&resid, level);
                let (lo, hi) = memory.offsets().expect("residuals");
                assert!(
                    lo <= slo && hi >= shi,
                    "{n} {level}: {lo} {hi} vs {slo} {shi}"
                );
                // many residuals, not in the far tails: the neighbours interpolated between
                // share a bin or two
                if n > 1000 && level <= 0.8 {
                    assert!(slo - lo <= 2.0 * MEMORY_BIN, "{n} {level}: {lo} vs {slo}");
                    assert!(hi - shi <= 2.0 * MEMORY_BIN, "{n} {level}: {hi} vs {shi}");
                }
            }
        }
        // non-finite residuals are not counted; an empty memory answers nothing
        let mut m = ResidualMemory::new(&[], 0.8);
        assert_eq!(m.offsets(), None);
        m.add(f64::NAN);
        m.add(f64::INFINITY);
        assert!(m.is_empty());
        m.add(0.5);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_window_with_a_memory_floors_at_it_and_saves_it() {
        let mut w = ConformalWindow::new(100, 0.8)
            .with_floor((-1.0, 2.0))
            .with_memory(ResidualMemory::new(&[-0.5, 0.0, 0.5], 0.8));
        for k in 0..100 {
            w.observe(f64::from(k % 10) * 0.01);
        }
        // the memory's offsets are the floor, not the fixed one
        let (lo, hi) = w.offsets().expect("residuals");
        assert!(
            (lo + 0.5).abs() < 1e-9 && (hi - 0.51).abs() < 1e-9,
            "{lo} {hi}"
        );
        // remembered outcomes move it; observed ones (no memory) only the window
        for _ in 0..1000 {
            w.remember(3.0);
        }
        assert!(w.offsets().expect("residuals").1 > 3.0);
        assert_eq!(w.memory().map(ResidualMemory::len), Some(1003));
        let mut plain = ConformalWindow::new(100, 0.8).with_floor((-1.0, 2.0));
        plain.observe(0.0);
        plain.remember(3.0);
        assert!(plain.memory().is_none());
        assert_eq!(plain.offsets(), Some((-1.0, 2.0)));
        // saved with the window; a window saved before it had none
        let back: ConformalWindow =
            serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back.memory(), w.memory());
        assert_eq!(back.current_offsets(), w.offsets());
        let mut old = serde_json::to_value(&w).unwrap();
        old.as_object_mut().unwrap().remove("memory");
        let old: ConformalWindow = serde_json::from_value(old).unwrap();
        assert!(old.memory().is_none());
        assert_eq!(old.current_offsets().map(|o| o.1), Some(2.0));
    }

    #[test]
    fn the_drift_level_learnt_from_the_history_restores_coverage_one_slice_ahead() {
        // SYNTHETIC residuals whose spread grows 12% a slice of 5,000 (continuously): the
        // interval is calibrated on the last slice of a 6-slice history and served on the
        // next slice
        let mut rng = Normals(0x5851_f42d_4c95_7f2d);
        let slice = 5000;
        let series: Vec<f64> = (0..7 * slice)
            .map(|t| (0.12 * t as f64 / slice as f64).exp() * rng.next())
            .collect();
        let (history, test) = series.split_at(6 * slice);
        let cal = &history[5 * slice..];
        let share = |(lo, hi): (f64, f64)| {
            test.iter().filter(|r| lo <= **r && **r <= hi).count() as f64 / test.len() as f64
        };
        let plain = share(conformal_offsets(cal, 0.8));
        assert!(plain < 0.77, "calibrated on the past alone: {plain}");
        let level = drift_level(history, slice, 0.8);
        assert!(level > 0.8 && level < DRIFT_LEVEL_MAX, "{level}");
        let widened = share(conformal_offsets(cal, level));
        assert!(
            (0.78..=0.82).contains(&widened),
            "widened to {level}: {widened}"
        );
        // residuals that do not drift learn (almost) nothing
        let still: Vec<f64> = (0..6 * slice).map(|_| rng.next()).collect();
        assert!(drift_level(&still, slice, 0.8) < 0.82);
        // too short a history answers the nominal level
        assert_eq!(drift_level(&history[..2 * slice], slice, 0.8), 0.8);
    }

    #[test]
    fn split_conformal_offsets_cover_fresh_synthetic_samples() {
        // SYNTHETIC standard normal residuals: calibrate on 2,000, measure on 20,000 more
        let mut rng = Normals(7);
        let cal: Vec<f64> = (0..2000).map(|_| rng.next()).collect();
        let test: Vec<f64> = (0..20_000).map(|_| rng.next()).collect();
        let share = |f: &dyn Fn(f64) -> bool| {
            test.iter().filter(|r| f(**r)).count() as f64 / test.len() as f64
        };
        let (lo, hi) = conformal_offsets(&cal, 0.8);
        let inside = share(&|r| lo <= r && r <= hi);
        assert!((inside - 0.8).abs() < 0.015, "two-sided {inside}");
        let up = conformal_offset(&cal, 0.95).expect("calibrated");
        let below = share(&|r| r <= up);
        assert!((below - 0.95).abs() < 0.01, "one-sided {below}");
        assert!(conformal_offset(&[], 0.95).is_none());
    }

    #[test]
    fn the_window_keeps_the_last_residuals_and_follows_them() {
        let mut w = ConformalWindow::new(10, 0.8).with_gamma(0.0);
        assert!(w.is_empty() && w.current_offsets().is_none());
        for k in 0..10 {
            w.observe(f64::from(k));
        }
        assert_eq!(w.offsets(), Some((0.0, 9.0)));
        for k in 0..10 {
            w.observe(100.0 + f64::from(k));
        }
        assert_eq!(w.len(), 10);
        assert_eq!(w.offsets(), Some((100.0, 109.0)));
        // non-finite residuals are ignored; the cached and uncached reads agree
        w.observe(f64::NAN);
        assert_eq!(w.len(), 10);
        assert_eq!(w.current_offsets(), w.offsets());
        // without adaptation an outcome moves the window, not the level
        w.observe_outcome(50.0, Some((0.0, 1.0)));
        assert_eq!(w.alpha(), 1.0 - 0.8);
    }

    #[test]
    fn a_window_survives_serialisation() {
        let mut w = ConformalWindow::seeded(50, 0.8, &[-1.0, 0.5, 0.2, 2.0, -0.3]);
        w.observe_outcome(3.0, Some((-1.0, 1.0)));
        let json = serde_json::to_string(&w).unwrap();
        let back: ConformalWindow = serde_json::from_str(&json).unwrap();
        assert_eq!((back.len(), back.alpha()), (w.len(), w.alpha()));
        assert_eq!(back.current_offsets(), w.offsets());
    }
}
