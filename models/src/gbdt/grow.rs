//! Growing one tree: leaf-wise (best gain first) on gradient histograms, the larger child's
//! histogram by subtraction from its parent's.

use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::binning::Binner;
use super::model::{Node, Tree};
use super::objective::Residuals;
use super::params::GbdtParams;

#[derive(Clone, Copy, Default)]
struct Bin {
    g: f64,
    h: f64,
    n: u32,
}

/// Gradient histograms of one leaf, one per feature (empty bins for unsampled features).
type Hist = Vec<Vec<Bin>>;

struct Split {
    gain: f64,
    feature: usize,
    bin: usize,
}

/// A leaf waiting to be split, ordered by the gain of its best split.
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

/// What one tree is grown from: the binned columns, the features sampled for it and the
/// rows' gradients and hessians.
pub(super) struct Grower<'a> {
    pub bins: &'a [Vec<u8>],
    pub binner: &'a Binner,
    pub params: &'a GbdtParams,
    /// The features this tree may split on.
    pub features: Vec<usize>,
    pub g: &'a [f64],
    pub h: &'a [f64],
    /// Every hessian is exactly 1 (squared, absolute and quantile loss without weights):
    /// a bin's hessian sum is then its row count, exactly, and is not summed.
    pub unit_hessians: bool,
    /// Moreover every gradient is +1 or -1 (absolute loss without weights): a bin's
    /// gradient sum is then (rows with +1) − (rows with −1), exactly, and only counted.
    pub sign_gradients: bool,
}

impl Grower<'_> {
    /// Grows one tree on `rows` until `num_leaves` leaves or no split gains, adding each
    /// split's gain to `gain_acc[feature]`. Leaf values are scaled by the learning rate.
    /// Returns the tree and each leaf's node with the rows that reached it.
    pub(super) fn grow(
        &self,
        rows: Vec<u32>,
        fit: &Residuals,
        gain_acc: &mut [f64],
    ) -> (Tree, Vec<(usize, Vec<u32>)>) {
        let p = self.params;
        let mut nodes = vec![Node::EMPTY_LEAF];
        let mut heap = BinaryHeap::new();
        let mut leaves: Vec<(usize, Vec<u32>, f64, f64)> = Vec::new();
        heap.push(self.root(rows));
        let mut n_leaves = 1;
        while let Some(task) = heap.pop() {
            let Some(split) = task.split.as_ref().filter(|_| n_leaves < p.num_leaves) else {
                leaves.push((task.node, task.rows, task.g, task.h));
                continue;
            };
            let (j, b) = (split.feature, split.bin);
            gain_acc[j] += split.gain;
            let [small, large] = self.split_leaf(task, j, b, &mut nodes);
            heap.push(small);
            heap.push(large);
            n_leaves += 1;
        }
        let mut leaf_rows = Vec::with_capacity(leaves.len());
        for (node, rows, sg, sh) in leaves {
            let raw = p.objective.leaf_value(&rows, sg, sh, p.lambda_l2, fit);
            nodes[node].value = raw * p.learning_rate;
            leaf_rows.push((node, rows));
        }
        (Tree { nodes }, leaf_rows)
    }

    /// The root leaf: all `rows`, node 0.
    fn root(&self, rows: Vec<u32>) -> LeafTask {
        let hist = self.histogram(&rows);
        let (g, h) = self.sums(&rows);
        let split = self.best_split(&hist, g, h, rows.len(), 0);
        LeafTask {
            rows,
            hist,
            depth: 0,
            node: 0,
            g,
            h,
            split,
        }
    }

    /// Splits a leaf on feature `j` at bin `b`: its node becomes the split and two new leaf
    /// nodes its children. Returns the smaller child (histogram built from its rows), then the
    /// larger (histogram = parent's minus the smaller's).
    fn split_leaf(
        &self,
        task: LeafTask,
        j: usize,
        b: usize,
        nodes: &mut Vec<Node>,
    ) -> [LeafTask; 2] {
        let col = &self.bins[j];
        let (left, right): (Vec<u32>, Vec<u32>) = task
            .rows
            .iter()
            .partition(|&&r| (col[r as usize] as usize) <= b);
        let (small, large, small_is_left) = if left.len() <= right.len() {
            (left, right, true)
        } else {
            (right, left, false)
        };
        let small_hist = self.histogram(&small);
        let large_hist = subtract(&task.hist, &small_hist);
        let (sgs, shs) = self.sums(&small);
        let (sgl, shl) = (task.g - sgs, task.h - shs);
        let depth = task.depth + 1;
        let small_split = self.best_split(&small_hist, sgs, shs, small.len(), depth);
        let large_split = self.best_split(&large_hist, sgl, shl, large.len(), depth);
        let li = nodes.len();
        nodes.push(Node::EMPTY_LEAF);
        nodes.push(Node::EMPTY_LEAF);
        nodes[task.node] = Node {
            feature: j as u32,
            threshold: self.binner.threshold(j, b),
            left: li as u32,
            right: li as u32 + 1,
            value: 0.0,
        };
        let (small_node, large_node) = if small_is_left {
            (li, li + 1)
        } else {
            (li + 1, li)
        };
        [
            LeafTask {
                rows: small,
                hist: small_hist,
                depth,
                node: small_node,
                g: sgs,
                h: shs,
                split: small_split,
            },
            LeafTask {
                rows: large,
                hist: large_hist,
                depth,
                node: large_node,
                g: sgl,
                h: shl,
                split: large_split,
            },
        ]
    }

    /// Sums of the gradients and hessians of `rows`.
    fn sums(&self, rows: &[u32]) -> (f64, f64) {
        rows.iter().fold((0.0, 0.0), |(a, c), &r| {
            (a + self.g[r as usize], c + self.h[r as usize])
        })
    }

    /// The gradient histograms of `rows`. Their gradients and hessians are gathered in row
    /// order first, so each feature's pass reads them in sequence and only its bin column
    /// at random; the sums are added in the same order as before, to the same bits.
    fn histogram(&self, rows: &[u32]) -> Hist {
        if self.unit_hessians && self.sign_gradients {
            return self.histogram_sign_gradients(rows);
        }
        if self.unit_hessians {
            return self.histogram_unit_hessians(rows);
        }
        let gh: Vec<(f64, f64)> = rows
            .iter()
            .map(|&r| (self.g[r as usize], self.h[r as usize]))
            .collect();
        (0..self.bins.len())
            .into_par_iter()
            .map(|j| {
                let mut hist = vec![Bin::default(); self.binner.n_bins(j)];
                if !self.features.contains(&j) {
                    return hist;
                }
                let col = &self.bins[j];
                for (&r, &(g, h)) in rows.iter().zip(&gh) {
                    let b = &mut hist[col[r as usize] as usize];
                    b.g += g;
                    b.h += h;
                    b.n += 1;
                }
                hist
            })
            .collect()
    }

    /// [`histogram`](Self::histogram) when every hessian is 1: the gradients alone are
    /// summed (in the same order, to the same bits) and each bin's hessian sum is its count
    /// (a sum of ones is exact in any order).
    fn histogram_unit_hessians(&self, rows: &[u32]) -> Hist {
        let g: Vec<f64> = rows.iter().map(|&r| self.g[r as usize]).collect();
        (0..self.bins.len())
            .into_par_iter()
            .map(|j| {
                let mut hist = vec![Bin::default(); self.binner.n_bins(j)];
                if !self.features.contains(&j) {
                    return hist;
                }
                let col = &self.bins[j];
                let mut gn = vec![(0.0f64, 0u32); hist.len()];
                for (&r, &g) in rows.iter().zip(&g) {
                    let b = &mut gn[col[r as usize] as usize];
                    b.0 += g;
                    b.1 += 1;
                }
                for (bin, (g, n)) in hist.iter_mut().zip(gn) {
                    *bin = Bin {
                        g,
                        h: f64::from(n),
                        n,
                    };
                }
                hist
            })
            .collect()
    }

    /// [`histogram`](Self::histogram) when every hessian is 1 and every gradient ±1: each
    /// bin counts its rows and those with +1 (one integer add per row), and its gradient
    /// sum is `2·plus − rows`. Any sum of ±1 below 2^53 is exact in f64 whatever the
    /// order, so these are the bits the summing histogram gives (an empty or balanced bin
    /// is +0.0 either way).
    fn histogram_sign_gradients(&self, rows: &[u32]) -> Hist {
        // a row adds 1 to the high half (rows) and 1 to the low half when its gradient is +1
        let add: Vec<u64> = rows
            .iter()
            .map(|&r| (1u64 << 32) | u64::from(self.g[r as usize] > 0.0))
            .collect();
        (0..self.bins.len())
            .into_par_iter()
            .map(|j| {
                let mut hist = vec![Bin::default(); self.binner.n_bins(j)];
                if !self.features.contains(&j) {
                    return hist;
                }
                let col = &self.bins[j];
                let mut counts = vec![0u64; hist.len()];
                for (&r, &a) in rows.iter().zip(&add) {
                    counts[col[r as usize] as usize] += a;
                }
                for (bin, c) in hist.iter_mut().zip(counts) {
                    let n = (c >> 32) as u32;
                    let plus = c as u32;
                    *bin = Bin {
                        g: 2.0 * f64::from(plus) - f64::from(n),
                        h: f64::from(n),
                        n,
                    };
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

/// The larger child's histogram: the parent's minus the smaller child's, bin by bin.
fn subtract(parent: &Hist, small: &Hist) -> Hist {
    parent
        .iter()
        .zip(small)
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
        .collect()
}
