//! The losses a GBDT minimises: each one's value, gradients, starting score and leaf values.

use augur_numeric::sigmoid;
use serde::{Deserialize, Serialize};

/// The loss a GBDT minimises.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "loss", rename_all = "snake_case")]
pub enum Objective {
    /// Squared error: predicts the conditional mean.
    L2,
    /// Absolute error: predicts the conditional median.
    L1,
    /// Pinball loss at `alpha`: predicts the conditional `alpha`-quantile.
    Quantile { alpha: f64 },
    /// Binary log-loss on 0/1 targets: predicts log-odds.
    LogLoss,
}

impl Objective {
    /// The loss of predicting `pred` for target `y`.
    pub(super) fn loss(self, pred: f64, y: f64) -> f64 {
        match self {
            Objective::L2 => (pred - y) * (pred - y),
            Objective::L1 => (pred - y).abs(),
            Objective::Quantile { alpha } => {
                let d = y - pred;
                if d >= 0.0 {
                    alpha * d
                } else {
                    (alpha - 1.0) * d
                }
            }
            Objective::LogLoss => {
                let p = sigmoid(pred).clamp(1e-12, 1.0 - 1e-12);
                -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
            }
        }
    }

    /// The constant prediction the trees start from: the weighted mean (L2), median (L1),
    /// `alpha`-quantile, or the log-odds of the weighted positive share (log-loss).
    pub(super) fn base_score(self, y: &[f64], w: &[f64]) -> f64 {
        let mut pairs: Vec<(f64, f64)> = y.iter().copied().zip(w.iter().copied()).collect();
        match self {
            Objective::L2 => {
                let tw: f64 = w.iter().sum();
                y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>() / tw.max(1e-12)
            }
            Objective::L1 => weighted_quantile(&mut pairs, 0.5),
            Objective::Quantile { alpha } => weighted_quantile(&mut pairs, alpha),
            Objective::LogLoss => {
                let tw: f64 = w.iter().sum();
                let p = (y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>() / tw.max(1e-12))
                    .clamp(1e-6, 1.0 - 1e-6);
                (p / (1.0 - p)).ln()
            }
        }
    }

    /// Weighted gradients `g` and hessians `h` of the loss at the current predictions.
    pub(super) fn gradients(
        self,
        pred: &[f64],
        y: &[f64],
        w: &[f64],
        g: &mut [f64],
        h: &mut [f64],
    ) {
        for i in 0..pred.len() {
            let (gi, hi) = match self {
                Objective::L2 => (pred[i] - y[i], 1.0),
                Objective::L1 => ((pred[i] - y[i]).signum(), 1.0),
                Objective::Quantile { alpha } => {
                    if y[i] > pred[i] {
                        (-alpha, 1.0)
                    } else {
                        (1.0 - alpha, 1.0)
                    }
                }
                Objective::LogLoss => {
                    let p = sigmoid(pred[i]);
                    (p - y[i], (p * (1.0 - p)).max(1e-12))
                }
            };
            g[i] = gi * w[i];
            h[i] = hi * w[i];
        }
    }

    /// A leaf's value before the learning rate: the Newton step `-g / (h + λ)` for L2 and
    /// log-loss; for L1 and quantile the leaf is refit to its rows' residual median /
    /// `alpha`-quantile, as LightGBM does.
    pub(super) fn leaf_value(
        self,
        rows: &[u32],
        sum_g: f64,
        sum_h: f64,
        lambda_l2: f64,
        fit: &Residuals,
    ) -> f64 {
        match self {
            Objective::L2 | Objective::LogLoss => -sum_g / (sum_h + lambda_l2),
            Objective::L1 | Objective::Quantile { .. } => {
                let alpha = match self {
                    Objective::Quantile { alpha } => alpha,
                    _ => 0.5,
                };
                let mut pairs: Vec<(f64, f64)> = rows
                    .iter()
                    .map(|&r| {
                        let r = r as usize;
                        (fit.y[r] - fit.pred[r], fit.w[r])
                    })
                    .collect();
                weighted_quantile(&mut pairs, alpha)
            }
        }
    }
}

/// The training rows' predictions before the current tree, targets and weights: what a leaf
/// is refit to.
pub(super) struct Residuals<'a> {
    pub pred: &'a [f64],
    pub y: &'a [f64],
    pub w: &'a [f64],
}

/// The `alpha`-quantile of `(value, weight)` pairs: the first value whose cumulative weight
/// reaches `alpha` of the total (sorts `pairs`; 0 when empty).
fn weighted_quantile(pairs: &mut [(f64, f64)], alpha: f64) -> f64 {
    if pairs.is_empty() {
        return 0.0;
    }
    if pairs.iter().all(|p| p.1 == 1.0) {
        // unit weights: the cumulative weight after k values is exactly k, so the answer is
        // the ceil(alpha·n)-th smallest value, found by selection in linear time rather
        // than by a sort (the same value: equal keys under `total_cmp` are equal bits)
        let n = pairs.len();
        let target = alpha * n as f64;
        let k = (target.ceil().max(1.0) as usize).min(n);
        let (_, v, _) = pairs.select_nth_unstable_by(k - 1, |a, b| a.0.total_cmp(&b.0));
        return v.0;
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    let target = alpha * total;
    let mut acc = 0.0;
    for &(v, w) in pairs.iter() {
        acc += w;
        if acc >= target {
            return v;
        }
    }
    pairs[pairs.len() - 1].0
}
