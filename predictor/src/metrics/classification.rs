//! Metrics of probabilistic binary classifiers (a job failing, or not): ROC-AUC and its
//! bootstrap interval, the ROC and precision–recall curves, average precision, recall at a
//! false-positive rate, the Brier score, reliability diagrams and the expected calibration
//! error.

use augur_numeric::SplitMix64;
use serde::Serialize;

/// ROC-AUC (ties count one half: the Mann–Whitney statistic). NaN without both classes.
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len().min(labels.len())).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let n_pos = idx.iter().filter(|&&i| labels[i]).count() as f64;
    let n_neg = idx.len() as f64 - n_pos;
    if n_pos == 0.0 || n_neg == 0.0 {
        return f64::NAN;
    }
    // sum of the positives' mid-ranks
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
            j += 1;
        }
        let mid = (i + j + 1) as f64 / 2.0; // ranks i+1..=j
        rank_sum += mid * idx[i..j].iter().filter(|&&k| labels[k]).count() as f64;
        i = j;
    }
    (rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg)
}

/// Points of the ROC curve `(false-positive rate, true-positive rate)`, from (0, 0) to
/// (1, 1), one per distinct score (tied scores move both rates at once).
pub fn roc_curve(scores: &[f64], labels: &[bool]) -> Vec<(f64, f64)> {
    let (n_pos, n_neg, steps) = threshold_steps(scores, labels);
    let mut out = vec![(0.0, 0.0)];
    if n_pos == 0 || n_neg == 0 {
        return out;
    }
    for (tp, fp) in steps {
        out.push((fp as f64 / n_neg as f64, tp as f64 / n_pos as f64));
    }
    out
}

/// Cumulative (true positives, false positives) after each distinct score, highest first.
fn threshold_steps(scores: &[f64], labels: &[bool]) -> (usize, usize, Vec<(usize, usize)>) {
    let mut idx: Vec<usize> = (0..scores.len().min(labels.len())).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let n_pos = idx.iter().filter(|&&i| labels[i]).count();
    let n_neg = idx.len() - n_pos;
    let (mut tp, mut fp) = (0, 0);
    let mut steps = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
            if labels[idx[j]] {
                tp += 1;
            } else {
                fp += 1;
            }
            j += 1;
        }
        steps.push((tp, fp));
        i = j;
    }
    (n_pos, n_neg, steps)
}

/// Recall (true-positive rate) at false-positive rate `fpr`, on the ROC curve linearly
/// interpolated between thresholds. NaN without both classes.
pub fn recall_at_fpr(scores: &[f64], labels: &[bool], fpr: f64) -> f64 {
    let curve = roc_curve(scores, labels);
    if curve.len() < 2 {
        return f64::NAN;
    }
    let mut best = 0.0f64;
    for w in curve.windows(2) {
        let ((f0, t0), (f1, t1)) = (w[0], w[1]);
        if f1 <= fpr {
            best = best.max(t1);
        } else if f0 <= fpr {
            let t = if f1 > f0 { (fpr - f0) / (f1 - f0) } else { 0.0 };
            best = best.max(t0 + t * (t1 - t0));
        }
    }
    best
}

/// Points of the precision–recall curve `(recall, precision)`, one per distinct score.
pub fn pr_curve(scores: &[f64], labels: &[bool]) -> Vec<(f64, f64)> {
    let (n_pos, _, steps) = threshold_steps(scores, labels);
    if n_pos == 0 {
        return Vec::new();
    }
    steps
        .into_iter()
        .map(|(tp, fp)| (tp as f64 / n_pos as f64, tp as f64 / (tp + fp) as f64))
        .collect()
}

/// PR-AUC as average precision: Σ (recallₖ − recallₖ₋₁) · precisionₖ over thresholds
/// (no interpolation, as scikit-learn computes it). Its no-skill value is the base rate.
pub fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
    let curve = pr_curve(scores, labels);
    if curve.is_empty() {
        return f64::NAN;
    }
    let mut prev = 0.0;
    let mut ap = 0.0;
    for (r, p) in curve {
        ap += (r - prev) * p;
        prev = r;
    }
    ap
}

/// Mean squared difference between probability and outcome.
pub fn brier(probs: &[f64], labels: &[bool]) -> f64 {
    let n = probs.len().min(labels.len());
    if n == 0 {
        return f64::NAN;
    }
    probs
        .iter()
        .zip(labels)
        .map(|(p, &l)| (p - f64::from(u8::from(l))).powi(2))
        .sum::<f64>()
        / n as f64
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReliabilityBin {
    /// Bin edges of the predicted probability.
    pub lo: f64,
    pub hi: f64,
    pub jobs: usize,
    /// Mean predicted probability in the bin.
    pub mean_predicted: f64,
    /// Observed failed share in the bin.
    pub observed: f64,
}

/// Reliability diagram over `bins` equal-width probability bins (empty bins left out).
pub fn reliability(probs: &[f64], labels: &[bool], bins: usize) -> Vec<ReliabilityBin> {
    let bins = bins.max(1);
    let mut acc = vec![(0usize, 0.0f64, 0usize); bins];
    for (p, &l) in probs.iter().zip(labels) {
        if !p.is_finite() {
            continue;
        }
        let k = ((p.clamp(0.0, 1.0) * bins as f64) as usize).min(bins - 1);
        acc[k].0 += 1;
        acc[k].1 += p;
        acc[k].2 += usize::from(l);
    }
    acc.iter()
        .enumerate()
        .filter(|(_, a)| a.0 > 0)
        .map(|(k, a)| ReliabilityBin {
            lo: k as f64 / bins as f64,
            hi: (k + 1) as f64 / bins as f64,
            jobs: a.0,
            mean_predicted: a.1 / a.0 as f64,
            observed: a.2 as f64 / a.0 as f64,
        })
        .collect()
}

/// Expected calibration error: job-weighted mean |predicted − observed| over 10 bins.
pub fn expected_calibration_error(probs: &[f64], labels: &[bool]) -> f64 {
    let bins = reliability(probs, labels, 10);
    let n: usize = bins.iter().map(|b| b.jobs).sum();
    if n == 0 {
        return f64::NAN;
    }
    bins.iter()
        .map(|b| b.jobs as f64 * (b.mean_predicted - b.observed).abs())
        .sum::<f64>()
        / n as f64
}

/// A 95% percentile-bootstrap interval of the ROC-AUC (`resamples` seeded resamples of the
/// test jobs; resamples without both classes are skipped). `None` when too few remain.
pub fn roc_auc_interval(scores: &[f64], labels: &[bool], resamples: usize) -> Option<(f64, f64)> {
    let n = scores.len().min(labels.len());
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix64(0x5eed);
    let mut aucs = Vec::with_capacity(resamples);
    let (mut s, mut l) = (vec![0.0; n], vec![false; n]);
    for _ in 0..resamples {
        for k in 0..n {
            let i = rng.below_mod(n);
            s[k] = scores[i];
            l[k] = labels[i];
        }
        let a = roc_auc(&s, &l);
        if a.is_finite() {
            aucs.push(a);
        }
    }
    if aucs.len() < resamples / 2 || aucs.len() < 10 {
        return None;
    }
    aucs.sort_by(f64::total_cmp);
    let at = |q: f64| aucs[((aucs.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        let l = [false, true, false, true];
        assert_eq!(roc_auc(&[0.1, 0.9, 0.2, 0.8], &l), 1.0);
        assert_eq!(roc_auc(&[0.9, 0.1, 0.8, 0.2], &l), 0.0);
        assert_eq!(roc_auc(&[0.5; 4], &l), 0.5);
        assert!(roc_auc(&[0.5; 2], &[true, true]).is_nan());
        // one positive above one negative and tied with the other: (1 + 0.5) / 2
        assert_eq!(roc_auc(&[0.1, 0.5, 0.5], &[false, false, true]), 0.75);
    }

    #[test]
    fn average_precision_and_recall_at_fpr() {
        let l = [true, false, true, false, false];
        let s = [0.9, 0.8, 0.7, 0.2, 0.1];
        // thresholds: (r .5, p 1), (r .5, p .5), (r 1, p 2/3) → .5·1 + .5·2/3
        assert!((average_precision(&s, &l) - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        // constant scores: AP is the base rate, recall at 10% FPR is 10%
        assert!((average_precision(&[0.3; 5], &l) - 0.4).abs() < 1e-12);
        assert!((recall_at_fpr(&[0.3; 5], &l, 0.1) - 0.1).abs() < 1e-12);
        // a perfect ranking has full recall at any FPR
        assert_eq!(recall_at_fpr(&[0.9, 0.1, 0.8, 0.2, 0.3], &l, 0.1), 1.0);
    }

    #[test]
    fn brier_and_reliability() {
        let l = [true, false];
        assert_eq!(brier(&[1.0, 0.0], &l), 0.0);
        assert_eq!(brier(&[0.5, 0.5], &l), 0.25);
        let bins = reliability(&[0.05, 0.05, 0.95, 0.95], &[false, true, true, true], 10);
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].observed, 0.5);
        assert_eq!(bins[1].observed, 1.0);
    }
}
