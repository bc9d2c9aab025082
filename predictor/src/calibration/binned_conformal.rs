//! Split-conformal margins per bin of the point prediction: a conformalised quantile band
//! (CQR) whose widening depends on where the prediction lies, for bands that are too narrow
//! in one part of the range and about right in another. Each bin's margin is the plain
//! level-quantile of its scores, without the finite-sample correction of
//! [`super::conformal::conformal_offset`] (the stored convergence models were calibrated
//! so, and their intervals must not move).

use augur_numeric::quantile;
use serde::{Deserialize, Serialize};

/// Calibration pairs needed before the band is binned by terciles of the prediction (with
/// fewer, one margin for every prediction).
pub const MIN_PAIRS_FOR_BINS: usize = 60;

/// Conformal margins, in the units of the band, per bin of the point prediction: `margins[i]`
/// applies below `margin_edges[i]`, the last one above every edge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BinnedConformal {
    pub margin_edges: Vec<f64>,
    pub margins: Vec<f64>,
}

impl BinnedConformal {
    /// Fits on calibration pairs `(point prediction, conformity score)`, the score of a
    /// quantile band `[lo, hi]` around `y` being `max(lo − y, y − hi)`: the edges are the
    /// terciles of the predictions (from [`MIN_PAIRS_FOR_BINS`] pairs on), each bin's margin
    /// the `level`-quantile of its scores (linear interpolation; 0 for an empty bin).
    pub fn fit(scored: &[(f64, f64)], level: f64) -> BinnedConformal {
        let mids: Vec<f64> = scored.iter().map(|p| p.0).collect();
        let margin_edges: Vec<f64> = if scored.len() >= MIN_PAIRS_FOR_BINS {
            vec![quantile(&mids, 1.0 / 3.0), quantile(&mids, 2.0 / 3.0)]
        } else {
            vec![]
        };
        let margins: Vec<f64> = (0..=margin_edges.len())
            .map(|b| {
                let in_bin: Vec<f64> = scored
                    .iter()
                    .filter(|(m, _)| bin_of(&margin_edges, *m) == b)
                    .map(|p| p.1)
                    .collect();
                if in_bin.is_empty() {
                    0.0
                } else {
                    quantile(&in_bin, level)
                }
            })
            .collect();
        BinnedConformal {
            margin_edges,
            margins,
        }
    }

    /// The bin of a point prediction.
    pub fn bin(&self, mid: f64) -> usize {
        bin_of(&self.margin_edges, mid)
    }

    /// The margin that widens the band around point prediction `mid` (0 when none was
    /// fitted for its bin).
    pub fn margin(&self, mid: f64) -> f64 {
        self.margins.get(self.bin(mid)).copied().unwrap_or(0.0)
    }
}

fn bin_of(edges: &[f64], mid: f64) -> usize {
    edges.iter().filter(|&&e| mid > e).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_numeric::SplitMix64;

    /// Pairs whose conformity scores spread more the higher the prediction.
    fn pairs(n: usize, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = SplitMix64(seed);
        (0..n)
            .map(|_| {
                let mid = 3.0 * rng.unit();
                (mid, (1.0 + mid) * rng.normal() - 1.0)
            })
            .collect()
    }

    #[test]
    fn each_bin_covers_its_level_on_fresh_data() {
        let cal = BinnedConformal::fit(&pairs(3000, 1), 0.8);
        assert_eq!(cal.margin_edges.len(), 2);
        assert_eq!(cal.margins.len(), 3);
        // the spread grows with the prediction, so do the margins
        assert!(cal.margins.windows(2).all(|w| w[0] < w[1]), "{cal:?}");
        let fresh = pairs(6000, 2);
        for b in 0..3 {
            let in_bin: Vec<f64> = fresh
                .iter()
                .filter(|p| cal.bin(p.0) == b)
                .map(|p| p.1)
                .collect();
            let covered = in_bin.iter().filter(|&&s| s <= cal.margins[b]).count();
            let share = covered as f64 / in_bin.len() as f64;
            assert!((share - 0.8).abs() < 0.03, "bin {b}: {share}");
        }
    }

    #[test]
    fn few_pairs_give_one_margin_and_none_give_zero() {
        let few = pairs(MIN_PAIRS_FOR_BINS - 1, 3);
        let cal = BinnedConformal::fit(&few, 0.8);
        assert!(cal.margin_edges.is_empty());
        let scores: Vec<f64> = few.iter().map(|p| p.1).collect();
        assert_eq!(cal.margins, vec![quantile(&scores, 0.8)]);
        assert_eq!(cal.margin(-100.0), cal.margin(100.0));
        let empty = BinnedConformal::fit(&[], 0.8);
        assert_eq!(empty.margins, vec![0.0]);
        assert_eq!(BinnedConformal::default().margin(1.0), 0.0);
    }

    #[test]
    fn bins_split_at_the_edges() {
        let cal = BinnedConformal {
            margin_edges: vec![1.0, 2.0],
            margins: vec![0.1, 0.2, 0.3],
        };
        assert_eq!(cal.margin(1.0), 0.1);
        assert_eq!(cal.margin(1.5), 0.2);
        assert_eq!(cal.margin(2.5), 0.3);
    }

    #[test]
    fn serde_keeps_the_field_names_and_values() {
        let cal = BinnedConformal::fit(&pairs(200, 4), 0.8);
        let json = serde_json::to_string(&cal).unwrap();
        assert!(json.starts_with(r#"{"margin_edges":["#), "{json}");
        let back: BinnedConformal = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cal);
    }
}
