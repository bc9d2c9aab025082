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

/// Gradient histograms of one leaf, one per feature (empty for the features not sampled).
type Hist = Vec<Vec<Bin>>;

struct Split {
    gain: f64,
    feature: usize,
    bin: usize,
}

/// Room for every bin of one feature in a histogram pass's accumulators (bins are `u8`).
const BIN_STRIDE: usize = 256;

/// Leaves with at least this many rows split their histogram pass between the cores;
/// smaller ones are quicker on one.
const PARALLEL_ROWS: usize = 4096;

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
    /// Row-major bins: row `r`'s bin of feature `j` at `r * d + j`.
    pub bins: &'a [u8],
    /// Features (columns) of `bins`.
    pub d: usize,
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
        let d = self.d;
        let (left, right): (Vec<u32>, Vec<u32>) = task
            .rows
            .iter()
            .partition(|&&r| (self.bins[r as usize * d + j] as usize) <= b);
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

    /// The gradient histograms of `rows`, one per sampled feature (the others empty). One
    /// pass over the rows reads each row's bins together and adds its gradient to a bin of
    /// every feature; each bin still sums its rows in row order, to the same bits as a pass
    /// per feature. Large leaves split the features between the cores.
    fn histogram(&self, rows: &[u32]) -> Hist {
        let threads = if rows.len() >= PARALLEL_ROWS {
            rayon::current_num_threads().max(1)
        } else {
            1
        };
        let chunk = self.features.len().div_ceil(threads).max(1);
        let parts: Vec<Vec<Vec<Bin>>> = if threads > 1 {
            self.features
                .par_chunks(chunk)
                .map(|fs| self.histogram_of(fs, rows))
                .collect()
        } else {
            vec![self.histogram_of(&self.features, rows)]
        };
        let mut hist: Hist = vec![Vec::new(); self.d];
        for (&j, h) in self.features.iter().zip(parts.into_iter().flatten()) {
            hist[j] = h;
        }
        hist
    }

    /// The histograms of features `fs` (in that order) over `rows`.
    fn histogram_of(&self, fs: &[usize], rows: &[u32]) -> Vec<Vec<Bin>> {
        let d = self.d;
        // feature k of `fs` accumulates at k * BIN_STRIDE + bin
        let row_bins = |r: u32| &self.bins[r as usize * d..(r as usize + 1) * d];
        // feature j's histogram: its bins read from the accumulators by `bin`
        let finish = |j: usize, bin: &dyn Fn(usize) -> Bin| -> Vec<Bin> {
            (0..self.binner.n_bins(j)).map(bin).collect()
        };
        if self.unit_hessians && self.sign_gradients {
            // a row adds 1 to the high half (rows) and 1 to the low half when its gradient
            // is +1; a bin's gradient sum is then `2·plus − rows`: any sum of ±1 below 2^53
            // is exact in f64 whatever the order, so these are the bits summing gives (an
            // empty or balanced bin is +0.0 either way)
            let mut counts = vec![0u64; fs.len() * BIN_STRIDE];
            for &r in rows {
                let a = (1u64 << 32) | u64::from(self.g[r as usize] > 0.0);
                let rb = row_bins(r);
                for (k, &j) in fs.iter().enumerate() {
                    counts[k * BIN_STRIDE + rb[j] as usize] += a;
                }
            }
            return fs
                .iter()
                .enumerate()
                .map(|(k, &j)| {
                    finish(j, &|b| {
                        let c = counts[k * BIN_STRIDE + b];
                        let n = (c >> 32) as u32;
                        let plus = c as u32;
                        Bin {
                            g: 2.0 * f64::from(plus) - f64::from(n),
                            h: f64::from(n),
                            n,
                        }
                    })
                })
                .collect();
        }
        if self.unit_hessians {
            // every hessian is 1: the gradients alone are summed and a bin's hessian sum is
            // its count (a sum of ones is exact in any order)
            let mut gn = vec![(0.0f64, 0u32); fs.len() * BIN_STRIDE];
            for &r in rows {
                let g = self.g[r as usize];
                let rb = row_bins(r);
                for (k, &j) in fs.iter().enumerate() {
                    let b = &mut gn[k * BIN_STRIDE + rb[j] as usize];
                    b.0 += g;
                    b.1 += 1;
                }
            }
            return fs
                .iter()
                .enumerate()
                .map(|(k, &j)| {
                    finish(j, &|b| {
                        let (g, n) = gn[k * BIN_STRIDE + b];
                        Bin {
                            g,
                            h: f64::from(n),
                            n,
                        }
                    })
                })
                .collect();
        }
        let mut acc = vec![Bin::default(); fs.len() * BIN_STRIDE];
        for &r in rows {
            let (g, h) = (self.g[r as usize], self.h[r as usize]);
            let rb = row_bins(r);
            for (k, &j) in fs.iter().enumerate() {
                let b = &mut acc[k * BIN_STRIDE + rb[j] as usize];
                b.g += g;
                b.h += h;
                b.n += 1;
            }
        }
        fs.iter()
            .enumerate()
            .map(|(k, &j)| finish(j, &|b| acc[k * BIN_STRIDE + b]))
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

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;
    use crate::Matrix;

    /// The histogram of feature `j` summed the plain way: one pass per feature, every row's
    /// gradient and hessian added in row order.
    fn plain(
        bins: &[u8],
        d: usize,
        n_bins: usize,
        j: usize,
        rows: &[u32],
        g: &[f64],
        h: &[f64],
    ) -> Vec<Bin> {
        let mut hist = vec![Bin::default(); n_bins];
        for &r in rows {
            let b = &mut hist[bins[r as usize * d + j] as usize];
            b.g += g[r as usize];
            b.h += h[r as usize];
            b.n += 1;
        }
        hist
    }

    /// Each histogram pass (summed, unit hessians, ±1 gradients; one core and split between
    /// the cores) gives every bin of every sampled feature the bits of the plain per-feature
    /// sum, and leaves the other features empty.
    #[test]
    fn histograms_equal_the_plain_per_feature_sums_bit_for_bit() {
        let (n, d) = (20_000, 7);
        let mut rng = SplitMix64(3);
        let x: Vec<f32> = (0..n * d)
            .map(|i| {
                let v = rng.unit();
                match i % d {
                    0 if v < 0.1 => f32::NAN,
                    1 => (v * 5.0).floor() as f32,
                    _ => (v * 1000.0) as f32,
                }
            })
            .collect();
        let m = Matrix::new(&x, n, d).unwrap();
        let binner = Binner::new(&m, 255);
        let bins = binner.bin_rows(&m);
        let params = GbdtParams::default();
        let signs: Vec<f64> = (0..n)
            .map(|_| if rng.unit() < 0.4 { 1.0 } else { -1.0 })
            .collect();
        let quantile: Vec<f64> = signs
            .iter()
            .map(|&s| if s > 0.0 { 0.05 } else { -0.95 })
            .collect();
        let real: Vec<f64> = (0..n).map(|_| rng.unit() * 3.0 - 1.0).collect();
        let hess: Vec<f64> = (0..n).map(|_| rng.unit() * 0.25).collect();
        let ones = vec![1.0; n];
        let all: Vec<u32> = (0..n as u32).collect();
        let few: Vec<u32> = (0..n as u32).filter(|r| r % 13 == 0).collect();
        assert!(all.len() >= PARALLEL_ROWS && few.len() < PARALLEL_ROWS);
        for (g, h, unit_hessians, sign_gradients) in [
            (&signs, &ones, true, true),
            (&quantile, &ones, true, false),
            (&real, &hess, false, false),
        ] {
            let grower = Grower {
                bins: &bins,
                d,
                binner: &binner,
                params: &params,
                features: vec![0, 2, 3, 5, 6],
                g,
                h,
                unit_hessians,
                sign_gradients,
            };
            for rows in [&all, &few] {
                let hist = grower.histogram(rows);
                assert_eq!(hist.len(), d);
                for (j, got) in hist.iter().enumerate() {
                    if !grower.features.contains(&j) {
                        assert!(got.is_empty());
                        continue;
                    }
                    let want = plain(&bins, d, binner.n_bins(j), j, rows, g, h);
                    assert_eq!(got.len(), want.len());
                    for (a, b) in got.iter().zip(&want) {
                        assert_eq!(a.g.to_bits(), b.g.to_bits(), "feature {j}");
                        assert_eq!(a.h.to_bits(), b.h.to_bits(), "feature {j}");
                        assert_eq!(a.n, b.n);
                    }
                }
            }
        }
    }
}
