//! Metrics of probabilistic binary classifiers (a job failing, or not): ROC-AUC and its
//! bootstrap interval, the ROC and precision–recall curves, average precision, recall at a
//! false-positive rate, the Brier score, reliability diagrams and the expected calibration
//! error.

use augur_numeric::{RemBy, SplitMix64};
use rayon::prelude::*;
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
        // a run of equal scores (a NaN equals nothing, itself included: its own run)
        let mut j = i + 1;
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
        // a run of equal scores (a NaN equals nothing, itself included: its own run)
        let mut j = i + 1;
        while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
            j += 1;
        }
        for &k in &idx[i..j] {
            if labels[k] {
                tp += 1;
            } else {
                fp += 1;
            }
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
    let mut aucs = resample_aucs(scores, labels, resamples);
    aucs.retain(|a| a.is_finite());
    if aucs.len() < resamples / 2 || aucs.len() < 10 {
        return None;
    }
    aucs.sort_by(f64::total_cmp);
    let at = |q: f64| aucs[((aucs.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// The seed of the bootstrap resamples' draws.
const RESAMPLE_SEED: u64 = 0x5eed;

/// The ROC-AUC of each bootstrap resample, in order (NaN for one without both classes):
/// resample `r` is the jobs at `n` uniform draws ([`SplitMix64::below_mod`], one 64-bit
/// draw each, its remainder taken by [`RemBy`]) from draw `r·n` of one stream seeded with
/// `RESAMPLE_SEED`, and its ROC-AUC is [`roc_auc`]'s of those jobs in draw order. The
/// resamples run on every core, each starting its stretch of the stream by
/// [`SplitMix64::skipped`].
fn resample_aucs(scores: &[f64], labels: &[bool], resamples: usize) -> Vec<f64> {
    let n = scores.len().min(labels.len());
    if n == 0 {
        return Vec::new();
    }
    let groups = TieGroups::new(&scores[..n], &labels[..n]);
    let stream = SplitMix64(RESAMPLE_SEED);
    (0..resamples)
        .into_par_iter()
        .map_init(
            || ResampleCounts::new(groups.n_groups),
            |counts, r| {
                let mut rng = stream.skipped((r as u64).wrapping_mul(n as u64));
                groups.resample_auc(&mut rng, counts)
            },
        )
        .collect()
}

/// A NaN score's group: it is tied with nothing, not even another NaN.
const UNTIED: usize = usize::MAX;

/// The jobs' tie groups, numbered in ascending score order, so that a resample's ROC-AUC
/// follows from how many jobs of each group it drew (and which NaNs, in draw order) without
/// sorting the resample. [`roc_auc`] sorts by `total_cmp` and ties runs of `==` scores; a
/// run holds every number `==` to its first (−0.0 with 0.0), which `total_cmp` keeps
/// together, so the runs of any resample are the groups it draws from. Its positives'
/// mid-rank sum is a sum of half-integers below n(n + 1)/2, exact in `f64` in any order
/// for fewer than 94 million jobs, so the ROC-AUC has the bits of [`roc_auc`]'s.
struct TieGroups<'a> {
    scores: &'a [f64],
    labels: &'a [bool],
    /// Each job's group, or `UNTIED` for a NaN score.
    group: Vec<usize>,
    n_groups: usize,
    /// The number of jobs, for the draws' remainders.
    n: RemBy,
}

/// A resample's per-group (jobs, positives) and its NaN jobs in draw order, reused.
struct ResampleCounts {
    groups: Vec<(usize, usize)>,
    untied: Vec<usize>,
}

impl ResampleCounts {
    fn new(n_groups: usize) -> Self {
        ResampleCounts {
            groups: vec![(0, 0); n_groups],
            untied: Vec::new(),
        }
    }
}

impl<'a> TieGroups<'a> {
    fn new(scores: &'a [f64], labels: &'a [bool]) -> Self {
        let mut order: Vec<usize> = (0..scores.len()).filter(|&i| !scores[i].is_nan()).collect();
        // equal keys are `==` numbers, one group: their order among themselves is free
        order.sort_unstable_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        let mut group = vec![UNTIED; scores.len()];
        let mut n_groups = 0;
        for (k, &i) in order.iter().enumerate() {
            if k == 0 || scores[i] != scores[order[k - 1]] {
                n_groups += 1;
            }
            group[i] = n_groups - 1;
        }
        TieGroups {
            scores,
            labels,
            group,
            n_groups,
            n: RemBy::new(scores.len() as u64),
        }
    }

    /// The ROC-AUC of the resample of `n` draws from `rng` (NaN without both classes).
    fn resample_auc(&self, rng: &mut SplitMix64, counts: &mut ResampleCounts) -> f64 {
        let n = self.group.len();
        counts.groups.fill((0, 0));
        counts.untied.clear();
        let mut n_pos = 0;
        for _ in 0..n {
            let i = rng.below_mod_by(&self.n);
            let pos = usize::from(self.labels[i]);
            n_pos += pos;
            match self.group[i] {
                UNTIED => counts.untied.push(i),
                g => {
                    counts.groups[g].0 += 1;
                    counts.groups[g].1 += pos;
                }
            }
        }
        let n_neg = n - n_pos;
        if n_pos == 0 || n_neg == 0 {
            return f64::NAN;
        }
        // the NaNs where a stable sort by `total_cmp` puts them: negative ones below every
        // number, positive ones above, equal bits in draw order; each its own rank
        let scores = self.scores;
        counts
            .untied
            .sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        let below = counts
            .untied
            .partition_point(|&i| scores[i].is_sign_negative());
        let (mut rank_sum, mut placed) = (0.0, 0usize);
        self.rank_untied(&counts.untied[..below], &mut rank_sum, &mut placed);
        for &(jobs, pos) in &counts.groups {
            if jobs > 0 {
                // ranks placed+1..=placed+jobs
                let mid = (2 * placed + jobs + 1) as f64 / 2.0;
                rank_sum += mid * pos as f64;
                placed += jobs;
            }
        }
        self.rank_untied(&counts.untied[below..], &mut rank_sum, &mut placed);
        let (n_pos, n_neg) = (n_pos as f64, n_neg as f64);
        (rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg)
    }

    /// Places the NaN jobs `untied` one rank each after `placed`, adding the positives' ranks.
    fn rank_untied(&self, untied: &[usize], rank_sum: &mut f64, placed: &mut usize) {
        for &i in untied {
            *placed += 1;
            if self.labels[i] {
                *rank_sum += *placed as f64;
            }
        }
    }
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
    fn a_nan_score_is_its_own_tie_group() {
        // sorted: 0.5, NaN (job 0), NaN (job 2): each NaN its own rank
        let s = [f64::NAN, 0.5, f64::NAN];
        assert_eq!(roc_auc(&s, &[true, false, false]), 0.5);
        assert_eq!(roc_auc(&s, &[false, true, false]), 0.0);
        assert_eq!(roc_auc(&s, &[false, false, true]), 1.0);
        // a negative NaN ranks below every number
        assert_eq!(roc_auc(&[-f64::NAN, 0.5], &[true, false]), 0.0);
        assert_eq!(roc_curve(&s, &[true, false, false]).len(), 4);
    }

    /// The interval as first written: each resample drawn from one stream in turn, copied
    /// and ranked by [`roc_auc`]. Returns every resample's ROC-AUC and the interval.
    fn reference_interval(
        scores: &[f64],
        labels: &[bool],
        resamples: usize,
    ) -> (Vec<f64>, Option<(f64, f64)>) {
        let n = scores.len().min(labels.len());
        if n == 0 {
            return (Vec::new(), None);
        }
        let mut rng = SplitMix64(0x5eed);
        let mut all = Vec::with_capacity(resamples);
        let (mut s, mut l) = (vec![0.0; n], vec![false; n]);
        for _ in 0..resamples {
            for k in 0..n {
                let i = rng.below_mod(n);
                s[k] = scores[i];
                l[k] = labels[i];
            }
            all.push(roc_auc(&s, &l));
        }
        let mut aucs: Vec<f64> = all.iter().copied().filter(|a| a.is_finite()).collect();
        if aucs.len() < resamples / 2 || aucs.len() < 10 {
            return (all, None);
        }
        aucs.sort_by(f64::total_cmp);
        let at = |q: f64| aucs[((aucs.len() - 1) as f64 * q).round() as usize];
        (all, Some((at(0.025), at(0.975))))
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn resampled_aucs_have_the_bits_of_sorting_each_resample() {
        // few distinct values: many ties, −0.0 beside 0.0, NaNs of both signs (one payload
        // shared by several jobs with either label), infinities
        let pool = [
            0.0,
            -0.0,
            0.25,
            0.25 + f64::EPSILON,
            0.7,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0123),
        ];
        let mut rng = SplitMix64(11);
        let mut some = 0;
        let mut none = 0;
        let mut skipped = 0;
        for case in 0..400 {
            let n = match case % 4 {
                0 => 1 + rng.below(6),
                1 => 1 + rng.below(40),
                2 => 40 + rng.below(400),
                _ => 1 + rng.below(3_000),
            };
            // pools of 1 to all values; NaN-free in half the cases
            let k = 1 + rng.below(pool.len());
            let k = if case % 2 == 0 { k.min(8) } else { k };
            let positive = rng.unit() * if case % 5 == 0 { 0.05 } else { 0.6 };
            let scores: Vec<f64> = (0..n).map(|_| pool[rng.below(k)]).collect();
            let labels: Vec<bool> = (0..n).map(|_| rng.unit() < positive).collect();
            let resamples = [0, 1, 19, 60, 300][rng.below(5)];
            let (ref_all, ref_interval) = reference_interval(&scores, &labels, resamples);
            let all = resample_aucs(&scores, &labels, resamples);
            assert_eq!(bits(&all), bits(&ref_all), "case {case}: n {n}, {scores:?}");
            let interval = roc_auc_interval(&scores, &labels, resamples);
            assert_eq!(
                interval.map(|(a, b)| (a.to_bits(), b.to_bits())),
                ref_interval.map(|(a, b)| (a.to_bits(), b.to_bits())),
                "case {case}"
            );
            match interval {
                Some(_) => some += 1,
                None => none += 1,
            }
            skipped += all.iter().filter(|a| !a.is_finite()).count();
        }
        // the cases reach both outcomes, and resamples without both classes
        assert!(some > 50 && none > 50, "{some} intervals, {none} none");
        assert!(skipped > 100, "{skipped} one-class resamples");
        assert_eq!(roc_auc_interval(&[], &[], 300), None);
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
