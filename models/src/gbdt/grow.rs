//! Growing one tree: leaf-wise (best gain first) on gradient histograms, the larger child's
//! histogram by subtraction from its parent's.

use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::binning::Binner;
use super::model::{Node, Tree};
use super::objective::Residuals;
use super::params::GbdtParams;

/// One histogram bin's sums as a histogram pass accumulates them; what a bin holds depends
/// on what the tree's gradients are (see [`Signs`], [`UnitHessians`], [`Sums`]).
trait Acc: Copy + Default + Send + Sync {
    /// What one row adds to its bin.
    type Row: Copy;
    fn row(g: f64, h: f64) -> Self::Row;
    fn add(&mut self, v: Self::Row);
    /// The sums of the rows counted in `self` and not in `o` (`o`'s rows are a subset).
    fn minus(self, o: Self) -> Self;
    /// Gradient sum, hessian sum, rows.
    fn get(self) -> (f64, f64, u32);

    /// The candidate splits of one feature's `bins` in a leaf of `n` rows: the bins after
    /// which at least `min` rows lie on either side (a contiguous run, as the left count
    /// only grows). Fills `left_g` and `left_h` with their left sums, in order, each with
    /// the bits of the running sum, and returns (the first candidate bin, candidates).
    fn candidates(
        bins: &[Self],
        (min, n): (usize, usize),
        left_g: &mut [f64; 256],
        left_h: &mut [f64; 256],
    ) -> (usize, usize) {
        let (mut gl, mut hl, mut nl) = (0.0, 0.0, 0usize);
        let (mut first, mut m) = (0, 0);
        for (b, bin) in bins.iter().enumerate().take(bins.len() - 1) {
            let (bg, bh, bn) = bin.get();
            gl += bg;
            hl += bh;
            nl += bn as usize;
            if nl < min {
                first = b + 1;
                continue;
            }
            if n - nl < min {
                break;
            }
            left_g[m] = gl;
            left_h[m] = hl;
            m += 1;
        }
        (first, m)
    }
}

/// Every hessian is 1 and every gradient ±1 (absolute loss without weights): a bin counts
/// its rows (high half) and those with +1 (low half), and its gradient sum is
/// `2·plus − rows`. Any sum of ±1 below 2^53 is exact in f64 whatever the order, so these
/// are the bits summing gives (an empty or balanced bin is +0.0 either way), and the
/// subtraction of counts is the subtraction of those exact sums.
#[derive(Clone, Copy, Default)]
struct Signs(u64);

impl Acc for Signs {
    type Row = u64;
    #[inline]
    fn row(g: f64, _: f64) -> u64 {
        (1u64 << 32) | u64::from(g > 0.0)
    }
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 += v;
    }
    #[inline]
    fn minus(self, o: Self) -> Self {
        // a subset's rows and pluses are at most the superset's: no borrow between halves
        Signs(self.0 - o.0)
    }
    #[inline]
    fn get(self) -> (f64, f64, u32) {
        let n = (self.0 >> 32) as u32;
        let plus = self.0 as u32;
        (2.0 * f64::from(plus) - f64::from(n), f64::from(n), n)
    }

    /// The running counts in one integer (no carry between the halves: a leaf's pluses
    /// are at most its rows), each left sum made from them: the running f64 sums of ±1
    /// and of 1 are those exact integers (never −0: an empty bin adds +0).
    fn candidates(
        bins: &[Self],
        (min, n): (usize, usize),
        left_g: &mut [f64; 256],
        left_h: &mut [f64; 256],
    ) -> (usize, usize) {
        let mut acc = 0u64;
        let (mut first, mut m) = (0, 0);
        for (b, bin) in bins.iter().enumerate().take(bins.len() - 1) {
            acc += bin.0;
            let nl = (acc >> 32) as u32;
            if (nl as usize) < min {
                first = b + 1;
                continue;
            }
            if n - (nl as usize) < min {
                break;
            }
            left_g[m] = 2.0 * f64::from(acc as u32) - f64::from(nl);
            left_h[m] = f64::from(nl);
            m += 1;
        }
        (first, m)
    }
}

/// Every hessian is 1 (squared, absolute and quantile loss without weights): only the
/// gradients are summed, and a bin's hessian sum is its row count (a sum of ones is exact
/// in any order).
#[derive(Clone, Copy, Default)]
struct UnitHessians {
    g: f64,
    n: u32,
}

impl Acc for UnitHessians {
    type Row = f64;
    #[inline]
    fn row(g: f64, _: f64) -> f64 {
        g
    }
    #[inline]
    fn add(&mut self, g: f64) {
        self.g += g;
        self.n += 1;
    }
    #[inline]
    fn minus(self, o: Self) -> Self {
        UnitHessians {
            g: self.g - o.g,
            n: self.n - o.n,
        }
    }
    #[inline]
    fn get(self) -> (f64, f64, u32) {
        (self.g, f64::from(self.n), self.n)
    }
}

/// Gradients and hessians summed.
#[derive(Clone, Copy, Default)]
struct Sums {
    g: f64,
    h: f64,
    n: u32,
}

impl Acc for Sums {
    type Row = (f64, f64);
    #[inline]
    fn row(g: f64, h: f64) -> (f64, f64) {
        (g, h)
    }
    #[inline]
    fn add(&mut self, (g, h): (f64, f64)) {
        self.g += g;
        self.h += h;
        self.n += 1;
    }
    #[inline]
    fn minus(self, o: Self) -> Self {
        Sums {
            g: self.g - o.g,
            h: self.h - o.h,
            n: self.n - o.n,
        }
    }
    #[inline]
    fn get(self) -> (f64, f64, u32) {
        (self.g, self.h, self.n)
    }
}

struct Split {
    gain: f64,
    feature: usize,
    bin: usize,
}

/// Leaves with at least this many rows split their histogram pass between the cores;
/// smaller ones are quicker on one.
const PARALLEL_ROWS: usize = 1024;

/// Trees with at least this many features search a leaf's split in two halves side by side.
const SPLIT_SEARCH_HALVES: usize = 32;

/// A leaf waiting to be split, ordered by the gain of its best split. `hist` is flat: the
/// bins of the tree's `k`-th feature at `offsets[k]..offsets[k + 1]`.
struct LeafTask<A> {
    rows: Vec<u32>,
    hist: Vec<A>,
    depth: usize,
    node: usize,
    g: f64,
    h: f64,
    split: Option<Split>,
}

impl<A> PartialEq for LeafTask<A> {
    fn eq(&self, o: &Self) -> bool {
        self.gain() == o.gain()
    }
}
impl<A> Eq for LeafTask<A> {}
impl<A> PartialOrd for LeafTask<A> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<A> Ord for LeafTask<A> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.gain().total_cmp(&o.gain())
    }
}
impl<A> LeafTask<A> {
    fn gain(&self) -> f64 {
        self.split.as_ref().map_or(f64::NEG_INFINITY, |s| s.gain)
    }
}

/// What one tree is grown from: the binned columns, the features it may split on and the
/// rows' gradients and hessians.
pub(super) struct Grower<'a> {
    /// Row-major bins, `width` per row: row `r`'s bin of the tree's `k`-th feature at
    /// `r * width + slots[k]`.
    pub bins: &'a [u8],
    pub width: usize,
    /// Per feature of the tree, in order: its slot in a row of `bins`.
    pub slots: Vec<usize>,
    /// The same bins column by column: column `j`'s at `j * rows`.
    pub columns: &'a [u8],
    /// Features (columns) of `bins`.
    pub d: usize,
    pub binner: &'a Binner,
    pub params: &'a GbdtParams,
    /// The features this tree may split on, in order.
    pub features: Vec<usize>,
    pub g: &'a [f64],
    pub h: &'a [f64],
    /// Every hessian is exactly 1 (squared, absolute and quantile loss without weights).
    pub unit_hessians: bool,
    /// Moreover every gradient is +1 or -1 (absolute loss without weights).
    pub sign_gradients: bool,
}

/// Histograms of freed leaves, reused for new ones.
type Pool<A> = Vec<Vec<A>>;

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
        if self.unit_hessians && self.sign_gradients {
            self.grow_as::<Signs>(rows, fit, gain_acc)
        } else if self.unit_hessians {
            self.grow_as::<UnitHessians>(rows, fit, gain_acc)
        } else {
            self.grow_as::<Sums>(rows, fit, gain_acc)
        }
    }

    /// Where each of the tree's features starts in a leaf's flat histogram, and the end.
    fn offsets(&self) -> Vec<usize> {
        let mut at = 0;
        let mut offsets = Vec::with_capacity(self.features.len() + 1);
        offsets.push(0);
        for &j in &self.features {
            at += self.binner.n_bins(j);
            offsets.push(at);
        }
        offsets
    }

    fn grow_as<A: Acc>(
        &self,
        rows: Vec<u32>,
        fit: &Residuals,
        gain_acc: &mut [f64],
    ) -> (Tree, Vec<(usize, Vec<u32>)>) {
        let p = self.params;
        let offsets = self.offsets();
        let mut pool: Pool<A> = Vec::new();
        let mut nodes = vec![Node::EMPTY_LEAF];
        let mut heap = BinaryHeap::new();
        let mut leaves: Vec<(usize, Vec<u32>, f64, f64)> = Vec::new();
        heap.push(self.root(rows, &offsets));
        let mut n_leaves = 1;
        while let Some(task) = heap.pop() {
            let Some(split) = task.split.as_ref().filter(|_| n_leaves < p.num_leaves) else {
                pool.push(task.hist);
                leaves.push((task.node, task.rows, task.g, task.h));
                continue;
            };
            let (j, b) = (split.feature, split.bin);
            gain_acc[j] += split.gain;
            let [small, large] = self.split_leaf(task, j, b, &mut nodes, &offsets, &mut pool);
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
    fn root<A: Acc>(&self, rows: Vec<u32>, offsets: &[usize]) -> LeafTask<A> {
        let hist = self.histogram(&rows, offsets, Vec::new());
        let (g, h) = self.sums(&rows);
        let split = self.best_split(&hist, offsets, g, h, rows.len(), 0);
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
    /// larger (histogram = parent's minus the smaller's, in the parent's place).
    fn split_leaf<A: Acc>(
        &self,
        task: LeafTask<A>,
        j: usize,
        b: usize,
        nodes: &mut Vec<Node>,
        offsets: &[usize],
        pool: &mut Pool<A>,
    ) -> [LeafTask<A>; 2] {
        // stable: each child keeps its rows in row order, so its sums keep their bits
        let rows_total = self.columns.len() / self.d.max(1);
        let column = &self.columns[j * rows_total..(j + 1) * rows_total];
        let mut left = task.rows;
        let mut right = Vec::with_capacity(left.len() / 2);
        let mut kept = 0;
        for i in 0..left.len() {
            let r = left[i];
            if (column[r as usize] as usize) <= b {
                left[kept] = r;
                kept += 1;
            } else {
                right.push(r);
            }
        }
        left.truncate(kept);
        let (small, large, small_is_left) = if left.len() <= right.len() {
            (left, right, true)
        } else {
            (right, left, false)
        };
        let small_hist = self.histogram(&small, offsets, pool.pop().unwrap_or_default());
        let mut large_hist = task.hist;
        for (p, s) in large_hist.iter_mut().zip(&small_hist) {
            *p = p.minus(*s);
        }
        let (sgs, shs) = self.sums(&small);
        let (sgl, shl) = (task.g - sgs, task.h - shs);
        let depth = task.depth + 1;
        let small_split = self.best_split(&small_hist, offsets, sgs, shs, small.len(), depth);
        let large_split = self.best_split(&large_hist, offsets, sgl, shl, large.len(), depth);
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

    /// The flat histogram of `rows` over the tree's features (laid out by `offsets`), in
    /// `buf`'s allocation. One pass over the rows reads each row's bins together and adds
    /// its gradient to a bin of every feature; each bin sums its rows in row order, to the
    /// same bits as a pass per feature. Large leaves split the features between the cores,
    /// each filling its own part of the histogram.
    fn histogram<A: Acc>(&self, rows: &[u32], offsets: &[usize], mut buf: Vec<A>) -> Vec<A> {
        let len = offsets.last().copied().unwrap_or(0);
        buf.clear();
        buf.resize(len, A::default());
        let threads = if rows.len() >= PARALLEL_ROWS {
            rayon::current_num_threads().max(1)
        } else {
            1
        };
        let chunk = self.features.len().div_ceil(threads).max(1);
        if threads > 1 {
            // the histogram cut where each chunk of features starts
            let mut parts: Vec<(usize, &mut [A])> = Vec::with_capacity(threads);
            let mut rest: &mut [A] = &mut buf;
            let mut k = 0;
            while k < self.features.len() {
                let end = (k + chunk).min(self.features.len());
                let (part, tail) = rest.split_at_mut(offsets[end] - offsets[k]);
                parts.push((k, part));
                rest = tail;
                k = end;
            }
            parts.into_par_iter().for_each(|(k, part)| {
                let end = (k + chunk).min(self.features.len());
                self.accumulate(rows, k..end, offsets, part);
            });
        } else {
            self.accumulate(rows, 0..self.features.len(), offsets, &mut buf);
        }
        buf
    }

    /// Adds every row of `rows` to the bins of the tree's features `ks` in `part`, which
    /// starts at feature `ks.start`'s offset.
    fn accumulate<A: Acc>(
        &self,
        rows: &[u32],
        ks: std::ops::Range<usize>,
        offsets: &[usize],
        part: &mut [A],
    ) {
        let w = self.width;
        let base = offsets[ks.start];
        // each feature's slot (high half) and histogram offset (low half) in one word, read
        // with one load per bin added (a histogram holds far fewer than 2^32 bins)
        let cols: Vec<u64> = ks
            .map(|k| ((self.slots[k] as u64) << 32) | (offsets[k] - base) as u64)
            .collect();
        for &r in rows {
            let v = A::row(self.g[r as usize], self.h[r as usize]);
            let rb = &self.bins[r as usize * w..(r as usize + 1) * w];
            for &c in &cols {
                part[(c as u32) as usize + rb[(c >> 32) as usize] as usize].add(v);
            }
        }
    }

    /// The best split of a leaf (gradient sum `g`, hessian sum `h`, `n` rows) over the
    /// tree's features: the largest gain, the first feature and bin in order on a tie. The
    /// features are searched in two halves side by side, and the first half's best is kept
    /// unless the second's gains strictly more, as one search in order would choose.
    fn best_split<A: Acc>(
        &self,
        hist: &[A],
        offsets: &[usize],
        g: f64,
        h: f64,
        n: usize,
        depth: usize,
    ) -> Option<Split> {
        let p = self.params;
        if n < 2 * p.min_data_in_leaf || (p.max_depth > 0 && depth >= p.max_depth) {
            return None;
        }
        let k = self.features.len();
        if k < SPLIT_SEARCH_HALVES {
            return self.best_split_of(hist, offsets, 0..k, (g, h, n));
        }
        let (a, b) = rayon::join(
            || self.best_split_of(hist, offsets, 0..k / 2, (g, h, n)),
            || self.best_split_of(hist, offsets, k / 2..k, (g, h, n)),
        );
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.gain > a.gain { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// [`best_split`](Self::best_split) over the tree's features `ks`. Per feature, one
    /// pass sums the bins left to right ([`Acc::candidates`]: the running sums' bits),
    /// keeping the candidate bins; a second computes their gains, each
    /// on its own (the two divisions of a bin no longer wait on the next bin's sums, and
    /// run side by side); a third keeps the first largest.
    fn best_split_of<A: Acc>(
        &self,
        hist: &[A],
        offsets: &[usize],
        ks: std::ops::Range<usize>,
        (g, h, n): (f64, f64, usize),
    ) -> Option<Split> {
        let p = self.params;
        let lambda = p.lambda_l2;
        let parent = g * g / (h + lambda);
        let mut best: Option<Split> = None;
        // a feature has at most 256 bins (255 and the missing one)
        let mut left_g = [0.0f64; 256];
        let mut left_h = [0.0f64; 256];
        let mut gains = [0.0f64; 256];
        for k in ks {
            let j = self.features[k];
            let bins = &hist[offsets[k]..offsets[k + 1]];
            let (first, m) = A::candidates(bins, (p.min_data_in_leaf, n), &mut left_g, &mut left_h);
            for ((gain, &gl), &hl) in gains[..m].iter_mut().zip(&left_g[..m]).zip(&left_h[..m]) {
                let (gr, hr) = (g - gl, h - hl);
                *gain = gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent;
            }
            for (i, &gain) in gains[..m].iter().enumerate() {
                if gain > 1e-9 && best.as_ref().is_none_or(|s| gain > s.gain) {
                    best = Some(Split {
                        gain,
                        feature: j,
                        bin: first + i,
                    });
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;
    use crate::gbdt::binning::Binned;
    use crate::gbdt::fit::splittable;
    use crate::Matrix;

    /// A grower over `binned` (a `d`-column matrix) for the tree's `features` a split can
    /// be found on (constant and copied columns left out, as a fit does), from gradients,
    /// hessians and what they are: (g, h, unit hessians, ±1 gradients).
    fn grower_over<'a>(
        binned: &'a Binned,
        d: usize,
        params: &'a GbdtParams,
        features: Vec<usize>,
        (g, h, unit_hessians, sign_gradients): (&'a [f64], &'a [f64], bool, bool),
    ) -> Grower<'a> {
        let (features, slots) = splittable(features, &binned.slots);
        Grower {
            bins: &binned.rows,
            width: binned.width,
            slots,
            columns: &binned.columns,
            d,
            binner: &binned.binner,
            params,
            features,
            g,
            h,
            unit_hessians,
            sign_gradients,
        }
    }

    /// The histogram of feature `j` summed the plain way: one pass per feature, every row's
    /// gradient and hessian added in row order.
    fn plain(
        columns: &[u8],
        n_bins: usize,
        j: usize,
        rows: &[u32],
        g: &[f64],
        h: &[f64],
    ) -> Vec<(f64, f64, u32)> {
        let n = g.len();
        let mut hist = vec![(0.0, 0.0, 0); n_bins];
        for &r in rows {
            let b = &mut hist[columns[j * n + r as usize] as usize];
            b.0 += g[r as usize];
            b.1 += h[r as usize];
            b.2 += 1;
        }
        hist
    }

    /// Checks every bin of `hist` (from `grower.histogram`) against the plain sums.
    fn check<A: Acc>(grower: &Grower, hist: &[A], rows: &[u32]) {
        let offsets = grower.offsets();
        assert_eq!(hist.len(), *offsets.last().unwrap());
        for (k, &j) in grower.features.iter().enumerate() {
            let got = &hist[offsets[k]..offsets[k + 1]];
            let want = plain(
                grower.columns,
                grower.binner.n_bins(j),
                j,
                rows,
                grower.g,
                grower.h,
            );
            assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(&want) {
                let (g, h, n) = a.get();
                assert_eq!(g.to_bits(), b.0.to_bits(), "feature {j}");
                assert_eq!(h.to_bits(), b.1.to_bits(), "feature {j}");
                assert_eq!(n, b.2);
            }
        }
    }

    /// Each histogram pass (summed, unit hessians, ±1 gradients; one core and split between
    /// the cores; every column or a sample of them, each read from its slot in a row)
    /// gives every bin of every feature of the tree the bits of the plain per-feature sum,
    /// and so does the larger child's histogram made by subtraction.
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
        let binned = Binner::bin_matrix(&m, 255);
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
        let few: Vec<u32> = (0..n as u32).filter(|r| r % 31 == 0).collect();
        let rest: Vec<u32> = (0..n as u32).filter(|r| r % 31 != 0).collect();
        assert!(all.len() >= PARALLEL_ROWS && few.len() < PARALLEL_ROWS);
        let kinds = [
            (&signs[..], &ones[..], true, true),
            (&quantile, &ones, true, false),
            (&real, &hess, false, false),
        ];
        let samples = [vec![0, 2, 3, 5, 6], (0..d).collect()];
        for ((g, h, unit_hessians, sign_gradients), features) in kinds
            .into_iter()
            .flat_map(|k| samples.iter().map(move |f| (k, f.clone())))
        {
            let kind = (g, h, unit_hessians, sign_gradients);
            let grower = grower_over(&binned, d, &params, features, kind);
            // `exact`: the subtraction is of counts, so it has the bits of summing the rest
            fn pass<A: Acc>(grower: &Grower, all: &[u32], few: &[u32], rest: &[u32], exact: bool) {
                let offsets = grower.offsets();
                let whole: Vec<A> = grower.histogram(all, &offsets, Vec::new());
                check(grower, &whole, all);
                let small: Vec<A> = grower.histogram(few, &offsets, Vec::new());
                check(grower, &small, few);
                // the larger child by subtraction
                let large: Vec<A> = whole.iter().zip(&small).map(|(p, s)| p.minus(*s)).collect();
                if exact {
                    check(grower, &large, rest);
                }
            }
            match (unit_hessians, sign_gradients) {
                (true, true) => pass::<Signs>(&grower, &all, &few, &rest, true),
                (true, false) => pass::<UnitHessians>(&grower, &all, &few, &rest, false),
                _ => pass::<Sums>(&grower, &all, &few, &rest, false),
            }
        }
    }

    /// The split search as first written: one pass per feature, each bin's gain computed as
    /// its sums are.
    fn plain_best_split<A: Acc>(
        grower: &Grower,
        hist: &[A],
        offsets: &[usize],
        (g, h, n): (f64, f64, usize),
    ) -> Option<(usize, usize, u64)> {
        let p = grower.params;
        let lambda = p.lambda_l2;
        let parent = g * g / (h + lambda);
        let mut best: Option<Split> = None;
        for (k, &j) in grower.features.iter().enumerate() {
            let bins = &hist[offsets[k]..offsets[k + 1]];
            let (mut gl, mut hl, mut nl) = (0.0, 0.0, 0usize);
            for (b, bin) in bins.iter().enumerate().take(bins.len() - 1) {
                let (bg, bh, bn) = bin.get();
                gl += bg;
                hl += bh;
                nl += bn as usize;
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
        best.map(|s| (s.feature, s.bin, s.gain.to_bits()))
    }

    /// The split search in passes finds the plain search's split, gain to the bit, for
    /// every kind of gradient, on leaves from a few rows (where `min_data_in_leaf` leaves
    /// few candidate bins, or none) to all of them.
    #[test]
    fn the_split_search_in_passes_finds_the_plain_searchs_split() {
        let (n, d) = (6_000, 9);
        let mut rng = SplitMix64(21);
        let x: Vec<f32> = (0..n * d)
            .map(|i| {
                let v = rng.unit();
                match i % d {
                    0 if v < 0.2 => f32::NAN,
                    1 => (v * 3.0).floor() as f32,
                    2 => 1.0,
                    _ => (v * 500.0) as f32,
                }
            })
            .collect();
        let m = Matrix::new(&x, n, d).unwrap();
        let binned = Binner::bin_matrix(&m, 255);
        let signs: Vec<f64> = (0..n)
            .map(|i| {
                if (x[i * d + 3] > 250.0) ^ (rng.unit() < 0.3) {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        let quantile: Vec<f64> = signs
            .iter()
            .map(|&s| if s > 0.0 { 0.1 } else { -0.9 })
            .collect();
        let real: Vec<f64> = (0..n)
            .map(|i| f64::from(x[i * d + 4]) / 100.0 - 2.0 + rng.unit())
            .collect();
        let hess: Vec<f64> = (0..n).map(|_| 0.05 + rng.unit() * 0.2).collect();
        let ones = vec![1.0; n];
        let mut checked = 0;
        for min_data_in_leaf in [1, 20, 700, 2_900] {
            let params = GbdtParams {
                min_data_in_leaf,
                ..GbdtParams::default()
            };
            for (g, h, unit_hessians, sign_gradients) in [
                (&signs[..], &ones[..], true, true),
                (&quantile, &ones, true, false),
                (&real, &hess, false, false),
            ] {
                let kind = (g, h, unit_hessians, sign_gradients);
                let grower = grower_over(&binned, d, &params, (0..d).collect(), kind);
                let offsets = grower.offsets();
                for rows in [
                    (0..n as u32).collect::<Vec<_>>(),
                    (0..n as u32).filter(|r| r % 7 == 0).collect(),
                    (0..60).collect(),
                ] {
                    fn both<A: Acc>(grower: &Grower, rows: &[u32], offsets: &[usize]) -> bool {
                        let hist: Vec<A> = grower.histogram(rows, offsets, Vec::new());
                        let (sg, sh) = grower.sums(rows);
                        let k = grower.features.len();
                        let got = grower
                            .best_split_of(&hist, offsets, 0..k, (sg, sh, rows.len()))
                            .map(|s| (s.feature, s.bin, s.gain.to_bits()));
                        let want = plain_best_split(grower, &hist, offsets, (sg, sh, rows.len()));
                        assert_eq!(got, want, "{} rows", rows.len());
                        want.is_some()
                    }
                    let found = match (unit_hessians, sign_gradients) {
                        (true, true) => both::<Signs>(&grower, &rows, &offsets),
                        (true, false) => both::<UnitHessians>(&grower, &rows, &offsets),
                        _ => both::<Sums>(&grower, &rows, &offsets),
                    };
                    checked += usize::from(found);
                }
            }
        }
        // most leaves have a split; the largest minimum leaves the small ones none
        assert!(checked >= 20, "{checked}");
    }

    /// The split searched in two halves side by side is the one a search of every feature
    /// in order finds, ties included (copies of a column give equal gains; the first wins).
    #[test]
    fn split_search_in_halves_finds_the_split_of_one_search() {
        let (n, d) = (5_000, 48);
        let mut rng = SplitMix64(9);
        let base: Vec<f32> = (0..n * 8).map(|_| rng.unit() as f32).collect();
        // columns 8.. repeat the first eight: every gain appears in both halves
        let x: Vec<f32> = (0..n * d)
            .map(|i| base[(i / d) * 8 + (i % d) % 8])
            .collect();
        let m = Matrix::new(&x, n, d).unwrap();
        let binned = Binner::bin_matrix(&m, 255);
        let params = GbdtParams::default();
        let g: Vec<f64> = (0..n).map(|i| f64::from(x[i * d + 3]) - 0.5).collect();
        let h = vec![1.0; n];
        let rows: Vec<u32> = (0..n as u32).collect();
        for features in [(0..d).collect::<Vec<_>>(), (4..d).rev().collect()] {
            let grower = grower_over(&binned, d, &params, features, (&g, &h, true, false));
            let offsets = grower.offsets();
            let hist: Vec<UnitHessians> = grower.histogram(&rows, &offsets, Vec::new());
            let (sg, sh) = grower.sums(&rows);
            let halves = grower.best_split(&hist, &offsets, sg, sh, n, 0).unwrap();
            let k = grower.features.len();
            let one = grower
                .best_split_of(&hist, &offsets, 0..k, (sg, sh, n))
                .unwrap();
            assert_eq!(halves.feature, one.feature);
            assert_eq!(halves.bin, one.bin);
            assert_eq!(halves.gain.to_bits(), one.gain.to_bits());
            assert_eq!(
                one.feature,
                grower.features[(0..k).find(|&i| grower.features[i] % 8 == 3).unwrap()]
            );
        }
    }
}
