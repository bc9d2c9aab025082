//! The risk-split (two-group Mondrian) conformal bound of the queue-wait predictor: its
//! group levels combine to the overall level, each group reaches its own level on a
//! synthetic (labelled: generated here, not real) heteroscedastic set, the online state moves
//! a group's bound only with that group's outcomes and keeps coverage under drift, and
//! everything survives serialisation.

use augur_numeric::SplitMix64;
use augur_predictor::queue_wait::{high_level, RiskScore, RISK_WINDOW};
use augur_predictor::{RiskGroup, RiskSplitBound, RiskSplitState};

/// The workspace's seeded generator, with the normal draw these tests were written with.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64(seed))
    }
    fn next(&mut self) -> f64 {
        self.0.unit()
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Synthetic jobs (SYNTHETIC, not a trace): a risk score s ~ U(0, 1) known at submit;
/// ln(1 + wait) = 5 + 3s + shift + (0.3 + 2s)·z, so riskier jobs wait longer and far less
/// predictably. The bound model's raw output is the noise-free part 5 + 3s (a median, not a
/// 95% quantile: the conformal offsets must do the work). One submit a minute.
/// Returns (submit, wait s, raw, score, y_log) per job.
fn synthetic(n: usize, shift: f64, t0: f64, seed: u64) -> Vec<(f64, f64, f64, f64, f64)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let s = rng.next();
            let raw = 5.0 + 3.0 * s;
            let y = (raw + shift + (0.3 + 2.0 * s) * rng.normal()).max(0.0);
            (t0 + 60.0 * i as f64, y.exp_m1(), raw, s, y)
        })
        .collect()
}

fn calibrate(jobs: &[(f64, f64, f64, f64, f64)], share: f64, level_low: f64) -> RiskSplitBound {
    let raw: Vec<f64> = jobs.iter().map(|j| j.2).collect();
    let scores: Vec<f64> = jobs.iter().map(|j| j.3).collect();
    let y: Vec<f64> = jobs.iter().map(|j| j.4).collect();
    RiskSplitBound::calibrated(
        RiskScore::UpperModel,
        share,
        level_low,
        0.95,
        0.05,
        RISK_WINDOW,
        &raw,
        &scores,
        &y,
    )
    .expect("both groups have jobs")
}

/// (coverage, median bound) of the jobs of `group` (None: all).
fn measure(
    jobs: &[(f64, f64, f64, f64, f64)],
    out: &[(f64, RiskGroup)],
    group: Option<RiskGroup>,
) -> (f64, f64, usize) {
    let mut hits = 0usize;
    let mut bounds = Vec::new();
    for (j, (b, g)) in jobs.iter().zip(out) {
        if group.is_some_and(|want| want != *g) {
            continue;
        }
        let u = b.exp_m1();
        hits += usize::from(j.1 <= u);
        bounds.push(u);
    }
    bounds.sort_by(f64::total_cmp);
    let n = bounds.len();
    (hits as f64 / n.max(1) as f64, bounds[n / 2], n)
}

/// Each job's bound and group from the calibration threshold and offsets (no adaptation).
fn offline_bounds(b: &RiskSplitBound, test: &[(f64, f64, f64, f64, f64)]) -> Vec<(f64, RiskGroup)> {
    test.iter()
        .map(|j| {
            let g = b.group(j.3);
            (j.2 + b.of(g).0, g)
        })
        .collect()
}
#[test]
fn group_levels_combine_to_the_overall_level() {
    for (share, low) in [(0.5, 0.93), (0.6, 0.92), (0.7, 0.94), (0.55, 0.91)] {
        let high = high_level(0.95, share, low);
        assert!(high > 0.95 && high < 1.0, "{share} {low} → {high}");
        assert!((share * low + (1.0 - share) * high - 0.95).abs() < 1e-12);
    }
    let jobs = synthetic(4000, 0.0, 0.0, 1);
    let b = calibrate(&jobs, 0.6, 0.92);
    assert!((b.overall_level() - 0.95).abs() < 1e-12, "{b:?}");
    assert!((b.level_high - high_level(0.95, 0.6, 0.92)).abs() < 1e-12);
    // a low level the high group cannot make up for is refused, as is a share of 0 or 1
    let raw: Vec<f64> = jobs.iter().map(|j| j.2).collect();
    let s: Vec<f64> = jobs.iter().map(|j| j.3).collect();
    let y: Vec<f64> = jobs.iter().map(|j| j.4).collect();
    let cal = |share: f64, low: f64| {
        RiskSplitBound::calibrated(
            RiskScore::UpperModel,
            share,
            low,
            0.95,
            0.05,
            500,
            &raw,
            &s,
            &y,
        )
    };
    assert!(cal(0.6, 0.90).is_none(), "needs the high group at 1.025");
    assert!(cal(0.0, 0.93).is_none() && cal(1.0, 0.95).is_none());
    assert!(cal(0.5, 0.93).is_some());
}

#[test]
fn each_group_reaches_its_level_on_a_synthetic_heteroscedastic_set() {
    let cal = synthetic(6000, 0.0, 0.0, 2);
    let test = synthetic(30_000, 0.0, 6000.0 * 60.0, 3);
    let b = calibrate(&cal, 0.6, 0.92);
    // the low group's residuals are narrow: its bound is far tighter than the high group's
    assert!(b.offset_low < b.offset_high, "{b:?}");
    // offline: the calibration threshold and offsets
    let offline = offline_bounds(&b, &test);
    // online: the threshold from recent scores, each group's offset adapting
    let jobs: Vec<(f64, f64, f64, f64)> = test.iter().map(|j| (j.0, j.1, j.2, j.3)).collect();
    let online = b.new_state().replay(&jobs);
    for (name, out) in [("offline", &offline), ("online", &online)] {
        let (cov_low, med_low, n_low) = measure(&test, out, Some(RiskGroup::Low));
        let (cov_high, med_high, n_high) = measure(&test, out, Some(RiskGroup::High));
        let (cov, _, n) = measure(&test, out, None);
        let share = n_low as f64 / n as f64;
        assert!((share - 0.6).abs() < 0.02, "{name}: share {share}");
        assert_eq!(n_low + n_high, n);
        assert!((cov_low - 0.92).abs() < 0.01, "{name}: low {cov_low}");
        assert!(
            (cov_high - b.level_high).abs() < 0.01,
            "{name}: high {cov_high} vs {}",
            b.level_high
        );
        assert!((cov - 0.95).abs() < 0.01, "{name}: overall {cov}");
        assert!(med_low < med_high / 5.0, "{name}: {med_low} vs {med_high}");
    }
    // one group at the overall level for every job would be wider for the median job
    let single = calibrate(&cal, 0.5, 0.95);
    assert!((single.level_high - 0.95).abs() < 1e-12);
}

#[test]
fn online_state_moves_a_groups_bound_only_with_its_own_outcomes() {
    let b = calibrate(&synthetic(4000, 0.0, 0.0, 4), 0.6, 0.93);
    let mut st = b.new_state();
    let (lo, hi) = (st.low.offset, st.high.offset);
    assert_eq!((lo, hi), (b.offset_low, b.offset_high));
    st.observe(RiskGroup::Low, true);
    assert!((st.low.offset - (lo + 0.05 * 0.93)).abs() < 1e-12);
    assert_eq!(st.high.offset, hi, "a low-group miss moved the high group");
    st.observe(RiskGroup::High, false);
    assert!((st.high.offset - (hi - 0.05 * (1.0 - b.level_high))).abs() < 1e-12);
    assert!((st.low.offset - (lo + 0.05 * 0.93)).abs() < 1e-12);
    // in a replay, drift that hits only the riskiest jobs raises only the high offset: jobs
    // with scores below 0.7 (the low group, threshold ≈ 0.6, and some high ones) start at
    // once; the rest wait e^10 ≈ 22,000 times their raw bound
    let mut rng = Rng::new(9);
    let jobs: Vec<(f64, f64, f64, f64)> = (0..5000)
        .map(|i| {
            let s = rng.next();
            let raw = 5.0 + 3.0 * s;
            let wait = if s < 0.7 { 0.0 } else { (raw + 10.0).exp() };
            (60.0 * i as f64, wait, raw, s)
        })
        .collect();
    let mut st = b.new_state();
    let out = st.replay(&jobs);
    assert_eq!(out.len(), jobs.len());
    assert!(out
        .iter()
        .zip(&jobs)
        .all(|((_, g), j)| j.3 >= 0.7 || *g == RiskGroup::Low || j.3 > 0.55));
    assert!(st.high.offset > hi + 1.0, "{} vs {hi}", st.high.offset);
    assert!(
        st.low.offset < lo,
        "low group only hit: {} vs {lo}",
        st.low.offset
    );
}

#[test]
fn online_threshold_is_the_share_quantile_of_recent_scores() {
    let b = calibrate(&synthetic(4000, 0.0, 0.0, 5), 0.6, 0.93);
    let mut st = b.new_state();
    // seeded from the calibration scores (uniform on 0..1): the threshold is near 0.6
    assert!((st.threshold() - 0.6).abs() < 0.05, "{}", st.threshold());
    // RISK_WINDOW new scores 1000..1000 + W replace the seed entirely
    for k in 0..RISK_WINDOW {
        st.record_submit(1000.0 + k as f64);
    }
    st.record_submit(f64::NAN); // ignored
    let want = 1000.0 + 0.6 * (RISK_WINDOW - 1) as f64;
    assert!((st.threshold() - want).abs() < 1e-9, "{}", st.threshold());
    assert_eq!(st.group(want - 0.5), RiskGroup::Low);
    assert_eq!(st.group(want + 0.5), RiskGroup::High);
    // the offline split keeps the calibration threshold
    assert_eq!(b.group(0.5), RiskGroup::Low);
    assert_eq!(b.group(0.7), RiskGroup::High);
}

#[test]
fn online_groups_keep_their_levels_under_drift_where_the_static_split_does_not() {
    let cal = synthetic(6000, 0.0, 0.0, 6);
    // the test period waits e^0.5 ≈ 1.65× longer for every job
    let test = synthetic(30_000, 0.5, 6000.0 * 60.0, 7);
    let b = calibrate(&cal, 0.6, 0.92);
    let jobs: Vec<(f64, f64, f64, f64)> = test.iter().map(|j| (j.0, j.1, j.2, j.3)).collect();
    let online = b.new_state().replay(&jobs);
    let offline = offline_bounds(&b, &test);
    let (cov_on, _, _) = measure(&test, &online, None);
    let (cov_off, _, _) = measure(&test, &offline, None);
    let (cov_low, _, _) = measure(&test, &online, Some(RiskGroup::Low));
    let (cov_high, _, _) = measure(&test, &online, Some(RiskGroup::High));
    assert!(cov_off < 0.92, "static {cov_off}");
    assert!((cov_on - 0.95).abs() < 0.01, "online {cov_on}");
    assert!((cov_low - 0.92).abs() < 0.015, "online low {cov_low}");
    assert!(
        (cov_high - b.level_high).abs() < 0.015,
        "online high {cov_high}"
    );
}

#[test]
fn risk_split_bound_and_state_survive_serialisation() {
    let b = calibrate(&synthetic(4000, 0.0, 0.0, 8), 0.65, 0.93);
    let mut st = b.new_state();
    st.observe(RiskGroup::Low, true);
    st.record_submit(0.99);
    let b2: RiskSplitBound = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
    let st2: RiskSplitState = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
    assert_eq!(b2.threshold, b.threshold);
    assert_eq!(
        (b2.offset_low, b2.offset_high),
        (b.offset_low, b.offset_high)
    );
    assert_eq!((b2.level_low, b2.level_high), (b.level_low, b.level_high));
    assert_eq!(b2.seed_scores, b.seed_scores);
    assert_eq!(st2.threshold(), st.threshold());
    assert_eq!(
        (st2.low.offset, st2.high.offset),
        (st.low.offset, st.high.offset)
    );
    for s in [0.1, 0.6, 0.64, 0.66, 0.9] {
        assert_eq!(st2.group(s), st.group(s));
        assert_eq!(b2.group(s), b.group(s));
    }
}
