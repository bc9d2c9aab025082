//! Evaluation metrics in the shared protocol.

use augur_datasets::split::clamp_duration;

pub mod classification;

/// Mean |ln(pred) − ln(actual)|, durations clamped to ≥ 1 s.
pub fn mae_log(pred: &[f64], actual: &[f64]) -> f64 {
    let n = pred.len().min(actual.len());
    if n == 0 {
        return f64::NAN;
    }
    pred.iter()
        .zip(actual)
        .map(|(p, a)| (clamp_duration(*p).ln() - clamp_duration(*a).ln()).abs())
        .sum::<f64>()
        / n as f64
}

/// Share of jobs with pred/actual in [0.5, 2] (after clamping).
pub fn within2x(pred: &[f64], actual: &[f64]) -> f64 {
    let n = pred.len().min(actual.len());
    if n == 0 {
        return f64::NAN;
    }
    pred.iter()
        .zip(actual)
        .filter(|(p, a)| {
            let r = clamp_duration(**p) / clamp_duration(**a);
            (0.5..=2.0).contains(&r)
        })
        .count() as f64
        / n as f64
}

/// Share of `actual` inside `[lo, hi]` (after clamping).
pub fn coverage(lo: &[f64], hi: &[f64], actual: &[f64]) -> f64 {
    let n = actual.len();
    if n == 0 {
        return f64::NAN;
    }
    actual
        .iter()
        .zip(lo.iter().zip(hi))
        .filter(|(a, (l, h))| {
            let a = clamp_duration(**a);
            **l <= a && a <= **h
        })
        .count() as f64
        / n as f64
}

/// The `q`-quantile of `v` (linear interpolation), NaN for empty input.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, q)
}

/// [`quantile`] of values already sorted ascending (NaN when empty).
pub fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    if s.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_known_values() {
        let actual = [100.0, 100.0, 0.2, 1000.0];
        let pred = [100.0, 300.0, 1.0, 500.0];
        // |ln 1|, |ln 3|, |ln 1/1| (0.2 clamps to 1), |ln 0.5|
        let want = (0.0 + 3f64.ln() + 0.0 + 2f64.ln()) / 4.0;
        assert!((mae_log(&pred, &actual) - want).abs() < 1e-12);
        assert_eq!(within2x(&pred, &actual), 0.75);
        assert_eq!(
            coverage(&[50.0, 50.0, 0.5, 0.0], &[150.0, 90.0, 2.0, 10.0], &actual),
            0.5
        );
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
    }
}
