//! Histogram gradient-boosted decision trees (LightGBM-style).
//!
//! - Features are bucketed into at most 255 quantile bins per feature; bin 0 holds missing
//!   values (NaN), which therefore always go to the left child.
//! - Trees grow leaf-wise (best gain first) up to `num_leaves`, with histogram subtraction
//!   (the larger child's histogram is the parent's minus the smaller child's).
//! - Objectives: squared error, absolute error and quantile (structure from gradient signs,
//!   then each leaf refit to the residuals' median / quantile, as LightGBM does), and binary
//!   log-loss (Newton leaves).
//! - Row and feature subsampling per tree; early stopping on a validation set.

use std::collections::BinaryHeap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{Fit, Matrix, ModelError, Predict, TrainSet};

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

/// GBDT hyperparameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GbdtParams {
    pub objective: Objective,
    /// Maximum number of trees.
    pub n_trees: usize,
    pub learning_rate: f64,
    /// Maximum leaves per tree.
    pub num_leaves: usize,
    /// Maximum depth (0 = unlimited).
    pub max_depth: usize,
    /// Minimum rows in a leaf.
    pub min_data_in_leaf: usize,
    /// L2 regularisation of leaf values.
    pub lambda_l2: f64,
    /// Share of rows sampled per tree (1.0 = all).
    pub subsample: f64,
    /// Share of features sampled per tree (1.0 = all).
    pub colsample: f64,
    /// Maximum bins per feature (≤ 255).
    pub max_bins: usize,
    /// Stop after this many trees without improvement on the validation set.
    pub early_stopping_rounds: usize,
    pub seed: u64,
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            objective: Objective::L2,
            n_trees: 500,
            learning_rate: 0.05,
            num_leaves: 63,
            max_depth: 0,
            min_data_in_leaf: 20,
            lambda_l2: 1.0,
            subsample: 0.8,
            colsample: 0.8,
            max_bins: 255,
            early_stopping_rounds: 50,
            seed: 7,
        }
    }
}

/// A tree node: a split (`feature < u32::MAX`) or a leaf.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
struct Node {
    feature: u32,
    /// Go left when `x <= threshold` or `x` is NaN.
    threshold: f32,
    left: u32,
    right: u32,
    value: f64,
}

const LEAF: u32 = u32::MAX;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    #[inline]
    fn predict(&self, row: &[f32]) -> f64 {
        let mut i = 0usize;
        loop {
            let n = &self.nodes[i];
            if n.feature == LEAF {
                return n.value;
            }
            // a feature missing from a short row is treated as missing (NaN), as the MLP does,
            // so a malformed row gives a prediction, never a panic
            let x = row.get(n.feature as usize).copied().unwrap_or(f32::NAN);
            i = if x.is_nan() || x <= n.threshold {
                n.left as usize
            } else {
                n.right as usize
            };
        }
    }
}

/// A fitted GBDT.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GbdtModel {
    objective: Objective,
    n_features: usize,
    base_score: f64,
    trees: Vec<Tree>,
    /// Total split gain per feature (importance).
    gain: Vec<f64>,
}

impl GbdtModel {
    /// Number of trees kept.
    pub fn n_trees(&self) -> usize {
        self.trees.len()
    }
    /// Total split gain per feature.
    pub fn feature_gain(&self) -> &[f64] {
        &self.gain
    }
    /// The objective it was trained with.
    pub fn objective(&self) -> Objective {
        self.objective
    }
}

impl Predict for GbdtModel {
    fn n_features(&self) -> usize {
        self.n_features
    }
    fn predict_row(&self, row: &[f32]) -> f64 {
        self.base_score + self.trees.iter().map(|t| t.predict(row)).sum::<f64>()
    }
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        if x.cols() != self.n_features {
            return Err(ModelError::FeatureCount {
                want: self.n_features,
                got: x.cols(),
            });
        }
        out.par_iter_mut()
            .enumerate()
            .with_min_len(1024)
            .for_each(|(i, o)| *o = self.predict_row(x.row(i)));
        Ok(())
    }
}

/// Per-feature bin edges: value `v` falls in bin `1 + #{edges < v}`; bin 0 is NaN.
struct Binner {
    edges: Vec<Vec<f32>>,
}

impl Binner {
    fn new(x: &Matrix, max_bins: usize) -> Binner {
        let max_bins = max_bins.clamp(2, 255);
        let step = (x.rows() / 100_000).max(1);
        let edges = (0..x.cols())
            .into_par_iter()
            .map(|j| {
                let mut v: Vec<f32> = (0..x.rows())
                    .step_by(step)
                    .map(|i| x.get(i, j))
                    .filter(|v| !v.is_nan())
                    .collect();
                v.sort_by(f32::total_cmp);
                v.dedup();
                if v.len() < max_bins {
                    // one bin per distinct value: edges at the values themselves
                    return v;
                }
                let mut e: Vec<f32> = (1..max_bins - 1)
                    .map(|k| v[k * v.len() / (max_bins - 1)])
                    .collect();
                e.dedup();
                e
            })
            .collect();
        Binner { edges }
    }

    #[inline]
    fn bin(&self, j: usize, v: f32) -> u8 {
        if v.is_nan() {
            0
        } else {
            1 + self.edges[j].partition_point(|&e| e < v) as u8
        }
    }

    /// Threshold for "bin <= b": the upper edge of bin `b` (bin 0 → only NaN goes left).
    fn threshold(&self, j: usize, b: usize) -> f32 {
        // finite sentinels keep the model JSON-serialisable
        if b == 0 {
            f32::MIN
        } else {
            self.edges[j].get(b - 1).copied().unwrap_or(f32::MAX)
        }
    }

    fn n_bins(&self, j: usize) -> usize {
        self.edges[j].len() + 2
    }
}

#[derive(Clone, Copy, Default)]
struct Bin {
    g: f64,
    h: f64,
    n: u32,
}

type Hist = Vec<Vec<Bin>>;

struct Split {
    gain: f64,
    feature: usize,
    bin: usize,
}

struct LeafTask {
    rows: Vec<u32>,
    hist: Hist,
    depth: usize,
    node: usize,
    g: f64,
    h: f64,
    split: Option<Split>,
}

impl PartialEq for LeafTask {
    fn eq(&self, o: &Self) -> bool {
        self.gain() == o.gain()
    }
}
impl Eq for LeafTask {}
impl PartialOrd for LeafTask {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for LeafTask {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.gain().total_cmp(&o.gain())
    }
}
impl LeafTask {
    fn gain(&self) -> f64 {
        self.split.as_ref().map_or(f64::NEG_INFINITY, |s| s.gain)
    }
}

struct Grower<'a> {
    bins: &'a [Vec<u8>],
    binner: &'a Binner,
    params: &'a GbdtParams,
    features: Vec<usize>,
}

impl Grower<'_> {
    fn histogram(&self, rows: &[u32], g: &[f64], h: &[f64]) -> Hist {
        (0..self.bins.len())
            .into_par_iter()
            .map(|j| {
                let mut hist = vec![Bin::default(); self.binner.n_bins(j)];
                if !self.features.contains(&j) {
                    return hist;
                }
                let col = &self.bins[j];
                for &r in rows {
                    let r = r as usize;
                    let b = &mut hist[col[r] as usize];
                    b.g += g[r];
                    b.h += h[r];
                    b.n += 1;
                }
                hist
            })
            .collect()
    }

    fn best_split(&self, hist: &Hist, g: f64, h: f64, n: usize, depth: usize) -> Option<Split> {
        let p = self.params;
        if n < 2 * p.min_data_in_leaf || (p.max_depth > 0 && depth >= p.max_depth) {
            return None;
        }
        let lambda = p.lambda_l2;
        let parent = g * g / (h + lambda);
        let mut best: Option<Split> = None;
        for &j in &self.features {
            let bins = &hist[j];
            let (mut gl, mut hl, mut nl) = (0.0, 0.0, 0usize);
            for (b, bin) in bins.iter().enumerate().take(bins.len() - 1) {
                gl += bin.g;
                hl += bin.h;
                nl += bin.n as usize;
                let nr = n - nl;
                if nl < p.min_data_in_leaf {
                    continue;
                }
                if nr < p.min_data_in_leaf {
                    break;
                }
                let (gr, hr) = (g - gl, h - hl);
                let gain = gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent;
                if gain > 1e-9 && best.as_ref().is_none_or(|s| gain > s.gain) {
                    best = Some(Split {
                        gain,
                        feature: j,
                        bin: b,
                    });
                }
            }
        }
        best
    }
}

/// Small deterministic PRNG (splitmix64) for subsampling.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn weighted_quantile(pairs: &mut [(f64, f64)], alpha: f64) -> f64 {
    if pairs.is_empty() {
        return 0.0;
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

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Validation data for early stopping.
pub struct Validation<'a> {
    pub x: Matrix<'a>,
    pub y: &'a [f64],
}

impl GbdtParams {
    fn loss(&self, pred: f64, y: f64) -> f64 {
        match self.objective {
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

    /// Fits, stopping early when `valid` stops improving.
    pub fn fit_with_validation(
        &self,
        train: &TrainSet,
        valid: Option<Validation>,
    ) -> Result<GbdtModel, ModelError> {
        self.fit_with_progress(train, valid, &mut |_, _| {})
    }

    /// [`fit_with_validation`](Self::fit_with_validation), calling `progress(trees_done,
    /// n_trees)` after each tree (early stopping may end before `n_trees`).
    pub fn fit_with_progress(
        &self,
        train: &TrainSet,
        valid: Option<Validation>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<GbdtModel, ModelError> {
        let x = train.x;
        let (n, d) = (x.rows(), x.cols());
        let ones = vec![1.0; n];
        let w = train.weights.unwrap_or(&ones);
        if let Objective::Quantile { alpha } = self.objective {
            if !(0.0 < alpha && alpha < 1.0) {
                return Err(ModelError::InvalidData(format!(
                    "quantile alpha must be in (0, 1), got {alpha}"
                )));
            }
        }
        if self.objective == Objective::LogLoss && train.y.iter().any(|&v| v != 0.0 && v != 1.0) {
            return Err(ModelError::InvalidData(
                "log-loss targets must be 0 or 1".into(),
            ));
        }
        let binner = Binner::new(&x, self.max_bins);
        let bins: Vec<Vec<u8>> = (0..d)
            .into_par_iter()
            .map(|j| (0..n).map(|i| binner.bin(j, x.get(i, j))).collect())
            .collect();
        let base_score = {
            let mut pairs: Vec<(f64, f64)> =
                train.y.iter().copied().zip(w.iter().copied()).collect();
            match self.objective {
                Objective::L2 => {
                    let tw: f64 = w.iter().sum();
                    train.y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>() / tw.max(1e-12)
                }
                Objective::L1 => weighted_quantile(&mut pairs, 0.5),
                Objective::Quantile { alpha } => weighted_quantile(&mut pairs, alpha),
                Objective::LogLoss => {
                    let tw: f64 = w.iter().sum();
                    let p = (train.y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>()
                        / tw.max(1e-12))
                    .clamp(1e-6, 1.0 - 1e-6);
                    (p / (1.0 - p)).ln()
                }
            }
        };
        let mut pred = vec![base_score; n];
        let mut valid_pred = valid.as_ref().map(|v| vec![base_score; v.x.rows()]);
        let mut g = vec![0.0; n];
        let mut h = vec![0.0; n];
        let mut rng = Rng(self.seed);
        let mut trees: Vec<Tree> = Vec::new();
        let mut gain = vec![0.0; d];
        let mut best_loss = f64::INFINITY;
        let mut best_iter = 0usize;
        for it in 0..self.n_trees {
            for i in 0..n {
                let (gi, hi) = match self.objective {
                    Objective::L2 => (pred[i] - train.y[i], 1.0),
                    Objective::L1 => ((pred[i] - train.y[i]).signum(), 1.0),
                    Objective::Quantile { alpha } => {
                        if train.y[i] > pred[i] {
                            (-alpha, 1.0)
                        } else {
                            (1.0 - alpha, 1.0)
                        }
                    }
                    Objective::LogLoss => {
                        let p = sigmoid(pred[i]);
                        (p - train.y[i], (p * (1.0 - p)).max(1e-12))
                    }
                };
                g[i] = gi * w[i];
                h[i] = hi * w[i];
            }
            let rows: Vec<u32> = if self.subsample < 1.0 {
                (0..n as u32)
                    .filter(|_| rng.unit() < self.subsample)
                    .collect()
            } else {
                (0..n as u32).collect()
            };
            if rows.len() < 2 * self.min_data_in_leaf.max(1) {
                break;
            }
            let mut features: Vec<usize> = (0..d).filter(|_| rng.unit() < self.colsample).collect();
            if features.is_empty() {
                features = (0..d).collect();
            }
            let grower = Grower {
                bins: &bins,
                binner: &binner,
                params: self,
                features,
            };
            let tree = self.grow(&grower, rows, &g, &h, &pred, train.y, w, &mut gain);
            for (i, p) in pred.iter_mut().enumerate() {
                *p += tree.predict(x.row(i));
            }
            trees.push(tree);
            progress(it + 1, self.n_trees);
            if let (Some(v), Some(vp)) = (valid.as_ref(), valid_pred.as_mut()) {
                if let Some(tree) = trees.last() {
                    vp.par_iter_mut()
                        .enumerate()
                        .for_each(|(i, p)| *p += tree.predict(v.x.row(i)));
                }
                let loss: f64 = vp
                    .iter()
                    .zip(v.y)
                    .map(|(p, y)| self.loss(*p, *y))
                    .sum::<f64>()
                    / v.y.len().max(1) as f64;
                if loss < best_loss - 1e-12 {
                    best_loss = loss;
                    best_iter = it + 1;
                } else if it + 1 - best_iter >= self.early_stopping_rounds {
                    break;
                }
            } else {
                best_iter = it + 1;
            }
        }
        trees.truncate(best_iter.max(1).min(trees.len()));
        Ok(GbdtModel {
            objective: self.objective,
            n_features: d,
            base_score,
            trees,
            gain,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn grow(
        &self,
        grower: &Grower,
        rows: Vec<u32>,
        g: &[f64],
        h: &[f64],
        pred: &[f64],
        y: &[f64],
        w: &[f64],
        gain_acc: &mut [f64],
    ) -> Tree {
        let mut nodes = vec![Node {
            feature: LEAF,
            threshold: 0.0,
            left: 0,
            right: 0,
            value: 0.0,
        }];
        let hist = grower.histogram(&rows, g, h);
        let (sg, sh) = rows.iter().fold((0.0, 0.0), |(a, b), &r| {
            (a + g[r as usize], b + h[r as usize])
        });
        let split = grower.best_split(&hist, sg, sh, rows.len(), 0);
        let mut heap = BinaryHeap::new();
        let mut leaves: Vec<(usize, Vec<u32>, f64, f64)> = Vec::new();
        heap.push(LeafTask {
            rows,
            hist,
            depth: 0,
            node: 0,
            g: sg,
            h: sh,
            split,
        });
        let mut n_leaves = 1;
        while let Some(task) = heap.pop() {
            let Some(split) = task.split.as_ref().filter(|_| n_leaves < self.num_leaves) else {
                leaves.push((task.node, task.rows, task.g, task.h));
                continue;
            };
            let (j, b) = (split.feature, split.bin);
            gain_acc[j] += split.gain;
            let col = &grower.bins[j];
            let (left, right): (Vec<u32>, Vec<u32>) = task
                .rows
                .iter()
                .partition(|&&r| (col[r as usize] as usize) <= b);
            let (small, large, small_is_left) = if left.len() <= right.len() {
                (left, right, true)
            } else {
                (right, left, false)
            };
            let small_hist = grower.histogram(&small, g, h);
            let large_hist: Hist = task
                .hist
                .iter()
                .zip(&small_hist)
                .map(|(p, s)| {
                    p.iter()
                        .zip(s)
                        .map(|(a, b)| Bin {
                            g: a.g - b.g,
                            h: a.h - b.h,
                            n: a.n - b.n,
                        })
                        .collect()
                })
                .collect();
            let sum = |rs: &[u32]| {
                rs.iter().fold((0.0, 0.0), |(a, c), &r| {
                    (a + g[r as usize], c + h[r as usize])
                })
            };
            let (sgs, shs) = sum(&small);
            let (sgl, shl) = (task.g - sgs, task.h - shs);
            let depth = task.depth + 1;
            let small_split = grower.best_split(&small_hist, sgs, shs, small.len(), depth);
            let large_split = grower.best_split(&large_hist, sgl, shl, large.len(), depth);
            let li = nodes.len();
            nodes.push(Node {
                feature: LEAF,
                threshold: 0.0,
                left: 0,
                right: 0,
                value: 0.0,
            });
            nodes.push(nodes[li]);
            nodes[task.node] = Node {
                feature: j as u32,
                threshold: grower.binner.threshold(j, b),
                left: li as u32,
                right: li as u32 + 1,
                value: 0.0,
            };
            let (small_node, large_node) = if small_is_left {
                (li, li + 1)
            } else {
                (li + 1, li)
            };
            heap.push(LeafTask {
                rows: small,
                hist: small_hist,
                depth,
                node: small_node,
                g: sgs,
                h: shs,
                split: small_split,
            });
            heap.push(LeafTask {
                rows: large,
                hist: large_hist,
                depth,
                node: large_node,
                g: sgl,
                h: shl,
                split: large_split,
            });
            n_leaves += 1;
        }
        for (node, rows, sg, sh) in leaves {
            let raw = match self.objective {
                Objective::L2 | Objective::LogLoss => -sg / (sh + self.lambda_l2),
                Objective::L1 | Objective::Quantile { .. } => {
                    let alpha = match self.objective {
                        Objective::Quantile { alpha } => alpha,
                        _ => 0.5,
                    };
                    let mut pairs: Vec<(f64, f64)> = rows
                        .iter()
                        .map(|&r| (y[r as usize] - pred[r as usize], w[r as usize]))
                        .collect();
                    weighted_quantile(&mut pairs, alpha)
                }
            };
            nodes[node].value = raw * self.learning_rate;
        }
        Tree { nodes }
    }
}

impl Fit for GbdtParams {
    type Model = GbdtModel;
    fn fit(&self, train: &TrainSet) -> Result<GbdtModel, ModelError> {
        self.fit_with_validation(train, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> (Vec<f32>, Vec<f64>) {
        // y = 3·[x0 > 0.5] + x1 (+ noise-free), x2 is noise, some x0 missing
        let mut rng = Rng(1);
        let mut x = Vec::with_capacity(n * 3);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let x0 = rng.unit() as f32;
            let x1 = rng.unit() as f32;
            let x2 = rng.unit() as f32;
            let missing = i % 10 == 0;
            x.extend([if missing { f32::NAN } else { x0 }, x1, x2]);
            let step = if missing {
                -2.0
            } else if x0 > 0.5 {
                3.0
            } else {
                0.0
            };
            y.push(step + f64::from(x1));
        }
        (x, y)
    }

    #[test]
    fn learns_a_step_and_a_slope_with_missing_values() {
        let (x, y) = data(4000);
        let m = Matrix::new(&x, 4000, 3).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        for objective in [Objective::L2, Objective::L1] {
            let params = GbdtParams {
                objective,
                n_trees: 300,
                learning_rate: 0.1,
                ..Default::default()
            };
            let model = params.fit(&train).unwrap();
            let mae: f64 = (0..4000)
                .map(|i| (model.predict_row(m.row(i)) - y[i]).abs())
                .sum::<f64>()
                / 4000.0;
            assert!(mae < 0.08, "{objective:?}: mae {mae}");
            if objective == Objective::L2 {
                // the noise feature gets (almost) no gain (L1's sign gradients are noise
                // once the fit converges, so its gains say little)
                let g = model.feature_gain();
                assert!(g[2] < 0.02 * (g[0] + g[1]), "{objective:?} {g:?}");
            }
            assert!(model.predict_row(&[f32::NAN, 0.5, 0.5]) < -1.0);
        }
    }

    #[test]
    fn progress_is_reported_once_per_tree_and_matches_fit() {
        let (x, y) = data(1000);
        let m = Matrix::new(&x, 1000, 3).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let params = GbdtParams {
            n_trees: 25,
            ..Default::default()
        };
        let mut calls = Vec::new();
        let with = params
            .fit_with_progress(&train, None, &mut |done, total| calls.push((done, total)))
            .unwrap();
        let expected: Vec<(usize, usize)> = (1..=25).map(|i| (i, 25)).collect();
        assert_eq!(calls, expected);
        // the callback changes nothing about the model
        assert_eq!(with, params.fit(&train).unwrap());
    }

    #[test]
    fn quantile_objective_covers_its_share() {
        let mut rng = Rng(3);
        let n = 5000;
        let x: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
        let y: Vec<f64> = x.iter().map(|&v| f64::from(v) + rng.unit() * 2.0).collect();
        let m = Matrix::new(&x, n, 1).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let model = GbdtParams {
            objective: Objective::Quantile { alpha: 0.9 },
            n_trees: 200,
            ..Default::default()
        }
        .fit(&train)
        .unwrap();
        let below = (0..n)
            .filter(|&i| y[i] <= model.predict_row(m.row(i)))
            .count() as f64
            / n as f64;
        assert!((below - 0.9).abs() < 0.03, "{below}");
    }

    #[test]
    fn logloss_separates_classes_and_early_stopping_cuts_trees() {
        let mut rng = Rng(5);
        let n = 3000;
        let x: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
        let y: Vec<f64> = x.iter().map(|&v| f64::from(u8::from(v > 0.7))).collect();
        let m = Matrix::new(&x, n, 1).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let model = GbdtParams {
            objective: Objective::LogLoss,
            n_trees: 1000,
            early_stopping_rounds: 20,
            ..Default::default()
        }
        .fit_with_validation(&train, Some(Validation { x: m, y: &y }))
        .unwrap();
        assert!(model.predict_row(&[0.9]) > 2.0);
        assert!(model.predict_row(&[0.1]) < -2.0);
        assert!(model.n_trees() < 1000);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let x = [1.0f32, 2.0];
        assert!(Matrix::new(&x, 3, 1).is_err());
        let m = Matrix::new(&x, 2, 1).unwrap();
        assert!(TrainSet::new(m, &[1.0, f64::NAN], None).is_err());
        assert!(TrainSet::new(m, &[1.0], None).is_err());
        let t = TrainSet::new(m, &[0.0, 2.0], None).unwrap();
        let p = GbdtParams {
            objective: Objective::LogLoss,
            ..Default::default()
        };
        assert!(p.fit(&t).is_err());
        let model = GbdtParams::default().fit(&t).unwrap();
        let wide = [1.0f32, 2.0, 3.0, 4.0];
        let mw = Matrix::new(&wide, 2, 2).unwrap();
        let mut out = [0.0; 2];
        assert!(model.predict_into(&mw, &mut out).is_err());
        // a short row is missing values, not a panic: it predicts as the all-NaN row does
        let (x, y) = data(500);
        let t = TrainSet::new(Matrix::new(&x, 500, 3).unwrap(), &y, None).unwrap();
        let model = GbdtParams {
            n_trees: 20,
            ..Default::default()
        }
        .fit(&t)
        .unwrap();
        let nan = model.predict_row(&[f32::NAN; 3]);
        assert_eq!(model.predict_row(&[]), nan);
        assert!(nan.is_finite());
    }

    #[test]
    fn serialises_round_trip() {
        let (x, y) = data(500);
        let m = Matrix::new(&x, 500, 3).unwrap();
        let model = GbdtParams {
            n_trees: 20,
            ..Default::default()
        }
        .fit(&TrainSet::new(m, &y, None).unwrap())
        .unwrap();
        let s = serde_json::to_string(&model).unwrap();
        let back: GbdtModel = serde_json::from_str(&s).unwrap();
        assert_eq!(back, model);
    }
}
