//! Regression metrics of the shared protocol: errors in log space, the share within a
//! factor of two, interval coverage (durations clamped to ≥ 1 s).

use augur_datasets::split::clamp_duration;
use augur_numeric::quantile;

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

/// Mean |log10(pred) − log10(actual)|, durations clamped to ≥ 1 s: [`mae_log`] in decades,
/// the unit published comparisons of queue-wait estimates (`squeue --start`) report. A zero
/// wait (a job that started on submit) counts as 1 s, so predicting 0 s or 1 s for it is
/// exact and predicting 10 s is one decade off.
pub fn mae_log10(pred: &[f64], actual: &[f64]) -> f64 {
    mae_log(pred, actual) / std::f64::consts::LN_10
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

/// One-sided bound metrics: the share of `actual` at or below its bound `upper` (over the
/// number of `actual` values) and the median bound.
pub fn bound_metrics(upper: &[f64], actual: &[f64]) -> (f64, f64) {
    let n = actual.len().max(1) as f64;
    let cov = upper.iter().zip(actual).filter(|(u, a)| a <= u).count() as f64 / n;
    (cov, quantile(upper, 0.5))
}

/// Point errors of waits: the mean absolute error (seconds) and the shares of predictions
/// within 60 s and within 600 s of the actual value (over the number of `actual` values).
pub fn wait_errors(pred: &[f64], actual: &[f64]) -> (f64, f64, f64) {
    let n = actual.len().max(1) as f64;
    let mut mae = 0.0;
    let (mut w60, mut w600) = (0usize, 0usize);
    for (p, a) in pred.iter().zip(actual) {
        let e = (p - a).abs();
        mae += e;
        w60 += usize::from(e <= 60.0);
        w600 += usize::from(e <= 600.0);
    }
    (mae / n, w60 as f64 / n, w600 as f64 / n)
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
        assert!((mae_log10(&pred, &actual) - want / 10f64.ln()).abs() < 1e-12);
        // zero waits count as 1 s: 0 against 0.5 is exact, 10 s against 0 one decade
        assert_eq!(mae_log10(&[0.0, 10.0], &[0.5, 0.0]), 0.5);
        assert_eq!(within2x(&[0.0, 10.0], &[0.5, 0.0]), 0.5);
        assert_eq!(
            coverage(&[50.0, 50.0, 0.5, 0.0], &[150.0, 90.0, 2.0, 10.0], &actual),
            0.5
        );
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
    }

    #[test]
    fn wait_and_bound_metrics_on_known_values() {
        let actual = [0.0, 100.0, 1000.0, 5000.0];
        let pred = [30.0, 200.0, 1500.0, 5000.0];
        let (mae, w60, w600) = wait_errors(&pred, &actual);
        assert_eq!(mae, (30.0 + 100.0 + 500.0 + 0.0) / 4.0);
        assert_eq!((w60, w600), (0.5, 1.0));
        let (cov, median) = bound_metrics(&[10.0, 50.0, 2000.0, 4000.0], &actual);
        assert_eq!(cov, 0.5);
        assert_eq!(median, 1025.0);
    }
}
