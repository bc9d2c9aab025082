//! Platt scaling and isotonic regression: a monotone map from a classifier's score to a
//! calibrated probability ([`Calibrator`]), fitted on out-of-sample scores.

use serde::{Deserialize, Serialize};

/// Isotonic calibration needs at least this many jobs of each class in the calibration
/// slice; with fewer, Platt scaling's two parameters are all the slice can support.
pub const ISOTONIC_MIN_CLASS: usize = 30;

/// Weight of the score's own order in an isotonic probability: the step function is flat
/// beyond its end blocks (and between equal blocks), where it would tie jobs the model
/// ranks apart; this strictly increasing nudge (at most 1e-6 of probability) keeps the
/// model's ranking there without moving the calibration.
const ISOTONIC_TIE_BREAK: f64 = 1e-6;

/// Maps a model score to a probability, monotone non-decreasing, in [0, 1].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Calibrator {
    /// `sigmoid(a · score + b)` with `a ≥ 0` (Platt 1999, with his smoothed targets).
    Platt { a: f64, b: f64 },
    /// Pool-adjacent-violators fit: non-decreasing probabilities `p` at increasing scores
    /// `x`, linearly interpolated between them and flat beyond.
    Isotonic { x: Vec<f64>, p: Vec<f64> },
}

impl Calibrator {
    /// Fits on out-of-sample `scores` with their labels: isotonic when both classes have at
    /// least [`ISOTONIC_MIN_CLASS`] jobs, else Platt.
    pub fn fit(scores: &[f64], labels: &[bool]) -> Calibrator {
        let pos = labels.iter().filter(|&&l| l).count();
        let neg = labels.len() - pos;
        if pos.min(neg) >= ISOTONIC_MIN_CLASS {
            Calibrator::fit_isotonic(scores, labels)
        } else {
            Calibrator::fit_platt(scores, labels)
        }
    }

    /// Platt scaling by Newton's method on the smoothed targets
    /// `(n₊ + 1) / (n₊ + 2)` and `1 / (n₋ + 2)` (Lin, Lin & Weng 2007). A fit that would
    /// decrease with the score (the model ranks backwards on the slice) is flattened to the
    /// slice's smoothed base rate.
    pub fn fit_platt(scores: &[f64], labels: &[bool]) -> Calibrator {
        let pairs: Vec<(f64, bool)> = scores
            .iter()
            .zip(labels)
            .filter(|(s, _)| s.is_finite())
            .map(|(&s, &l)| (s, l))
            .collect();
        let pos = pairs.iter().filter(|p| p.1).count() as f64;
        let neg = pairs.len() as f64 - pos;
        let t_pos = (pos + 1.0) / (pos + 2.0);
        let t_neg = 1.0 / (neg + 2.0);
        let targets: Vec<f64> = pairs
            .iter()
            .map(|p| if p.1 { t_pos } else { t_neg })
            .collect();
        let flat = {
            let p = (pos + 1.0) / (pos + neg + 2.0);
            Calibrator::Platt {
                a: 0.0,
                b: (p / (1.0 - p)).ln(),
            }
        };
        if pairs.is_empty() {
            return flat;
        }
        let (a, b) = platt_newton(&pairs, &targets, true);
        if a.is_finite() && b.is_finite() && a > 0.0 {
            Calibrator::Platt { a, b }
        } else {
            // refit the intercept alone: the slice's smoothed rate
            let (_, b) = platt_newton(&pairs, &targets, false);
            if b.is_finite() {
                Calibrator::Platt { a: 0.0, b }
            } else {
                flat
            }
        }
    }

    /// Isotonic regression (pool adjacent violators) of the labels on the scores.
    pub fn fit_isotonic(scores: &[f64], labels: &[bool]) -> Calibrator {
        let mut pairs: Vec<(f64, f64)> = scores
            .iter()
            .zip(labels)
            .filter(|(s, _)| s.is_finite())
            .map(|(&s, &l)| (s, f64::from(u8::from(l))))
            .collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        // blocks of (sum of scores, sum of labels, count); equal scores always share a block
        let mut blocks: Vec<(f64, f64, f64)> = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let mut j = i;
            let (mut ss, mut sy) = (0.0, 0.0);
            while j < pairs.len() && pairs[j].0 == pairs[i].0 {
                ss += pairs[j].0;
                sy += pairs[j].1;
                j += 1;
            }
            blocks.push((ss, sy, (j - i) as f64));
            i = j;
            while blocks.len() >= 2 {
                let n = blocks.len();
                let (a, b) = (blocks[n - 2], blocks[n - 1]);
                if a.1 / a.2 > b.1 / b.2 {
                    blocks.pop();
                    blocks[n - 2] = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
                } else {
                    break;
                }
            }
        }
        if blocks.is_empty() {
            return Calibrator::fit_platt(scores, labels);
        }
        Calibrator::Isotonic {
            x: blocks.iter().map(|b| b.0 / b.2).collect(),
            p: blocks.iter().map(|b| b.1 / b.2).collect(),
        }
    }

    /// The calibrated probability of a score (NaN scores map to the lowest probability).
    pub fn probability(&self, score: f64) -> f64 {
        match self {
            Calibrator::Platt { a, b } => {
                let z = if score.is_finite() { a * score + b } else { *b };
                sigmoid_stable(z)
            }
            Calibrator::Isotonic { x, p } => {
                let step = isotonic_step(x, p, score);
                if score.is_finite() {
                    let order = 0.5 + score.atan() / std::f64::consts::PI;
                    (1.0 - ISOTONIC_TIE_BREAK) * step + ISOTONIC_TIE_BREAK * order
                } else {
                    (1.0 - ISOTONIC_TIE_BREAK) * step
                }
            }
        }
    }

    /// Short description for reports: `platt(a=…, b=…)` or `isotonic(k steps)`.
    pub fn describe(&self) -> String {
        match self {
            Calibrator::Platt { a, b } => format!("platt(a={a:.3}, b={b:.3})"),
            Calibrator::Isotonic { x, .. } => format!("isotonic({} steps)", x.len()),
        }
    }
}

/// The isotonic step function at `score`: `p` at the block centres `x`, linearly
/// interpolated between them and flat beyond (NaN scores get the lowest).
fn isotonic_step(x: &[f64], p: &[f64], score: f64) -> f64 {
    let (Some(&x0), Some(&p0)) = (x.first(), p.first()) else {
        return 0.5;
    };
    if !score.is_finite() || score <= x0 {
        return p0;
    }
    let k = x.partition_point(|&v| v <= score);
    if k >= x.len() || k >= p.len() {
        return p[p.len() - 1];
    }
    let (xl, xr, pl, pr) = (x[k - 1], x[k], p[k - 1], p[k]);
    let t = if xr > xl {
        (score - xl) / (xr - xl)
    } else {
        1.0
    };
    (pl + t * (pr - pl)).clamp(0.0, 1.0)
}

/// The logistic function, as `e^z / (1 + e^z)` for negative `z`: the fitted calibrators
/// were computed in this form, which rounds differently from `augur_numeric::sigmoid` below
/// zero, and calibrated probabilities must not move.
fn sigmoid_stable(z: f64) -> f64 {
    if z >= 0.0 {
        augur_numeric::sigmoid(z)
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Newton's method for the cross-entropy of `sigmoid(a·s + b)` against `targets`; with
/// `fit_slope` false, `a` stays 0. Returns `(a, b)`.
fn platt_newton(pairs: &[(f64, bool)], targets: &[f64], fit_slope: bool) -> (f64, f64) {
    // scale scores for conditioning
    let scale = {
        let m = pairs.iter().map(|p| p.0.abs()).fold(0.0, f64::max);
        if m > 0.0 {
            m
        } else {
            1.0
        }
    };
    let (mut a, mut b) = (0.0f64, {
        let t = targets.iter().sum::<f64>() / targets.len().max(1) as f64;
        (t / (1.0 - t)).ln()
    });
    let loss = |a: f64, b: f64| -> f64 {
        pairs
            .iter()
            .zip(targets)
            .map(|(p, t)| {
                let z = a * p.0 / scale + b;
                // log(1 + e^z) − t·z, stable
                let softplus = if z > 0.0 {
                    z + (-z).exp().ln_1p()
                } else {
                    z.exp().ln_1p()
                };
                softplus - t * z
            })
            .sum()
    };
    let mut f = loss(a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 1e-12, 0.0, 1e-12);
        for (p, t) in pairs.iter().zip(targets) {
            let s = p.0 / scale;
            let q = sigmoid_stable(a * s + b);
            let d = q - t;
            let w = q * (1.0 - q);
            ga += d * s;
            gb += d;
            haa += w * s * s;
            hab += w * s;
            hbb += w;
        }
        let (da, db) = if fit_slope {
            let det = haa * hbb - hab * hab;
            if det.abs() < 1e-18 {
                (0.0, gb / hbb)
            } else {
                ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det)
            }
        } else {
            (0.0, gb / hbb)
        };
        // backtracking line search
        let mut step = 1.0;
        let mut improved = false;
        while step > 1e-8 {
            let (na, nb) = (a - step * da, b - step * db);
            let nf = loss(na, nb);
            if nf < f - 1e-12 {
                a = na;
                b = nb;
                f = nf;
                improved = true;
                break;
            }
            step *= 0.5;
        }
        if !improved || (da.abs() + db.abs()) < 1e-10 {
            break;
        }
    }
    (a / scale, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_is_monotone_and_bounded() {
        // scores with a real relation to the outcome
        let scores: Vec<f64> = (0..200).map(|i| f64::from(i) / 20.0 - 5.0).collect();
        let labels: Vec<bool> = (0..200).map(|i| (i * 7919) % 200 < i).collect();
        let c = Calibrator::fit_platt(&scores, &labels);
        let Calibrator::Platt { a, .. } = c else {
            panic!("{c:?}")
        };
        assert!(a > 0.0);
        let mut prev = -1.0;
        for s in (-100..=100).map(|k| f64::from(k) / 10.0) {
            let p = c.probability(s);
            assert!((0.0..=1.0).contains(&p) && p >= prev, "{s} {p} {prev}");
            prev = p;
        }
        // a score that ranks backwards is flattened, not inverted
        let rev: Vec<f64> = scores.iter().map(|s| -s).collect();
        let c = Calibrator::fit_platt(&rev, &labels);
        assert!(
            matches!(c, Calibrator::Platt { a, .. } if a == 0.0),
            "{c:?}"
        );
    }

    #[test]
    fn isotonic_pools_violators() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let l = [false, true, false, false, true, true];
        let c = Calibrator::fit_isotonic(&s, &l);
        let Calibrator::Isotonic { x, p } = &c else {
            panic!("{c:?}")
        };
        // blocks: {1} 0, {2,3,4} 1/3, {5} 1, {6} 1
        assert_eq!(x, &vec![1.0, 3.0, 5.0, 6.0]);
        assert_eq!(p, &vec![0.0, 1.0 / 3.0, 1.0, 1.0]);
        assert!(c.probability(0.0).abs() < 1e-6);
        assert!((c.probability(4.0) - (1.0 / 3.0 + 0.5 * 2.0 / 3.0)).abs() < 1e-6);
        assert!((c.probability(100.0) - 1.0).abs() < 1e-6);
        // beyond the end blocks and on the flat stretch between them, the step ties
        // scores the model ranks apart; the probability keeps their order
        assert!(c.probability(100.0) > c.probability(7.0));
        assert!(c.probability(6.0) > c.probability(5.5));
        assert!(c.probability(0.5) > c.probability(-3.0));
        assert!(c.probability(f64::NAN) < c.probability(-3.0));
    }

    /// Seeded scores: positives around `+shift`, negatives around `−shift`, unit noise.
    fn synthetic(n: usize, shift: f64, seed: u64) -> (Vec<f64>, Vec<bool>) {
        let mut rng = augur_numeric::SplitMix64(seed);
        let labels: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        let scores = labels
            .iter()
            .map(|&l| if l { shift } else { -shift } + rng.normal())
            .collect();
        (scores, labels)
    }

    #[test]
    fn platt_on_separable_scores_is_steep_and_confident() {
        let (s, l) = synthetic(300, 6.0, 1);
        let c = Calibrator::fit_platt(&s, &l);
        let Calibrator::Platt { a, .. } = c else {
            panic!("{c:?}")
        };
        assert!(a > 0.5, "{c:?}");
        // confident at the class centres, yet finite: the smoothed targets keep the slope
        // from running off to infinity on separable scores
        let (p_hi, p_lo) = (c.probability(6.0), c.probability(-6.0));
        assert!(p_hi > 0.95 && p_hi < 0.9999, "{c:?}");
        assert!(p_lo < 0.05 && p_lo > 1e-4, "{c:?}");
    }

    #[test]
    fn platt_on_overlapping_scores_matches_the_observed_rates() {
        let (s, l) = synthetic(3000, 0.5, 2);
        let c = Calibrator::fit_platt(&s, &l);
        // the calibrated mean equals the base rate (the fit's intercept condition)
        let mean = s.iter().map(|&x| c.probability(x)).sum::<f64>() / s.len() as f64;
        let rate = l.iter().filter(|&&x| x).count() as f64 / l.len() as f64;
        assert!((mean - rate).abs() < 0.01, "{mean} vs {rate}");
        // high and low scores stay away from certainty when the classes overlap
        assert!(
            c.probability(3.0) < 0.99 && c.probability(-3.0) > 0.01,
            "{c:?}"
        );
        assert!(c.probability(1.0) > c.probability(-1.0));
    }

    #[test]
    fn isotonic_is_monotone_and_within_unit_interval() {
        let (s, l) = synthetic(500, 1.0, 3);
        let c = Calibrator::fit_isotonic(&s, &l);
        let Calibrator::Isotonic { x, p } = &c else {
            panic!("{c:?}")
        };
        assert!(x.windows(2).all(|w| w[0] < w[1]), "{x:?}");
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
        let mut prev = 0.0;
        for k in -80..=80 {
            let v = c.probability(f64::from(k) / 10.0);
            assert!((0.0..=1.0).contains(&v) && v >= prev, "{k} {v} {prev}");
            prev = v;
        }
        assert!((c.probability(f64::NAN) - p[0]).abs() < 1e-6);
    }

    #[test]
    fn fit_picks_isotonic_only_with_enough_of_each_class() {
        let (s, l) = synthetic(300, 1.0, 4);
        assert!(matches!(
            Calibrator::fit(&s, &l),
            Calibrator::Isotonic { .. }
        ));
        let few: Vec<bool> = l
            .iter()
            .enumerate()
            .map(|(i, &y)| y && i < 3 * (ISOTONIC_MIN_CLASS - 1))
            .collect();
        assert!(matches!(
            Calibrator::fit(&s, &few),
            Calibrator::Platt { .. }
        ));
    }

    #[test]
    fn calibrators_round_trip_through_serde() {
        let (s, l) = synthetic(300, 1.0, 5);
        for c in [
            Calibrator::fit_platt(&s, &l),
            Calibrator::fit_isotonic(&s, &l),
        ] {
            let json = serde_json::to_string(&c).unwrap();
            let back: Calibrator = serde_json::from_str(&json).unwrap();
            assert_eq!(back, c);
            assert_eq!(back.probability(0.3), c.probability(0.3));
        }
        let json = serde_json::to_string(&Calibrator::Platt { a: 1.0, b: 0.0 }).unwrap();
        assert_eq!(json, r#"{"method":"platt","a":1.0,"b":0.0}"#);
    }
}
