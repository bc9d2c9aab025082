//! A fitted GBDT: its trees and how a row walks them.
//!
//! Predictions walk a flattened copy of the trees ([`FlatTrees`], built on first use): every
//! node of every tree in one array of 12-byte nodes, a split's two children next to each
//! other and laid out depth first, leaf values apart. Fewer cache lines per walk than the
//! stored `Vec<Tree>` of 24-byte nodes; the same leaves, summed in the same order, so the
//! same bits.

use std::sync::OnceLock;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::objective::Objective;
use crate::{Matrix, ModelError, Predict};

/// A tree node: a split (`feature < u32::MAX`) or a leaf.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub(super) struct Node {
    pub feature: u32,
    /// Go left when `x <= threshold` or `x` is NaN.
    pub threshold: f32,
    pub left: u32,
    pub right: u32,
    pub value: f64,
}

/// The `feature` of a leaf node.
pub(super) const LEAF: u32 = u32::MAX;

impl Node {
    /// A leaf of value 0 (its value is set once the tree is grown).
    pub const EMPTY_LEAF: Node = Node {
        feature: LEAF,
        threshold: 0.0,
        left: 0,
        right: 0,
        value: 0.0,
    };
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    #[inline]
    pub(super) fn predict(&self, row: &[f32]) -> f64 {
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

/// One node of [`FlatTrees`]: a split on `feature` (children at `next` and `next + 1`) or,
/// when `feature` is [`LEAF`], a leaf whose value is `values[next]`.
#[derive(Debug, Clone, Copy)]
struct FlatNode {
    feature: u32,
    threshold: f32,
    next: u32,
}

/// The trees of a model laid out for inference (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct FlatTrees {
    nodes: Vec<FlatNode>,
    /// Index of each tree's root in `nodes`, in the model's tree order.
    roots: Vec<u32>,
    values: Vec<f64>,
}

impl FlatTrees {
    fn new(trees: &[Tree]) -> FlatTrees {
        let mut flat = FlatTrees::default();
        for tree in trees {
            if tree.nodes.is_empty() {
                continue;
            }
            flat.roots.push(flat.nodes.len() as u32);
            flat.nodes.push(FlatNode {
                feature: LEAF,
                threshold: 0.0,
                next: 0,
            });
            flat.place(tree, 0, flat.nodes.len() - 1, 0);
        }
        flat
    }

    /// Writes node `i` of `tree` at slot `at`, then its subtree depth first. A malformed
    /// tree (a child index out of range, or deeper than any grown tree) becomes a leaf
    /// of value 0 where it breaks, as [`Tree::predict`] would not end there either.
    fn place(&mut self, tree: &Tree, i: usize, at: usize, depth: usize) {
        let Some(n) = tree.nodes.get(i).filter(|_| depth < 4096) else {
            self.nodes[at] = self.leaf(0.0);
            return;
        };
        if n.feature == LEAF {
            self.nodes[at] = self.leaf(n.value);
            return;
        }
        let kids = self.nodes.len();
        self.nodes[at] = FlatNode {
            feature: n.feature,
            threshold: n.threshold,
            next: kids as u32,
        };
        let empty = FlatNode {
            feature: LEAF,
            threshold: 0.0,
            next: 0,
        };
        self.nodes.extend([empty, empty]);
        self.place(tree, n.left as usize, kids, depth + 1);
        self.place(tree, n.right as usize, kids + 1, depth + 1);
    }

    fn leaf(&mut self, value: f64) -> FlatNode {
        self.values.push(value);
        FlatNode {
            feature: LEAF,
            threshold: 0.0,
            next: (self.values.len() - 1) as u32,
        }
    }

    /// The value of the leaf `row` reaches in the tree rooted at `root`.
    #[inline]
    fn leaf_value(&self, root: u32, row: &[f32]) -> f64 {
        let mut i = root as usize;
        loop {
            let n = self.nodes[i];
            if n.feature == LEAF {
                return self.values[n.next as usize];
            }
            // missing (NaN, or beyond a short row) goes left, as in `Tree::predict`
            let x = row.get(n.feature as usize).copied().unwrap_or(f32::NAN);
            i = n.next as usize + usize::from(x > n.threshold);
        }
    }

    /// The sum of every tree's leaf for `row`, added in tree order.
    #[inline]
    fn sum(&self, row: &[f32]) -> f64 {
        self.roots
            .iter()
            .map(|&r| self.leaf_value(r, row))
            .sum::<f64>()
    }
}

/// The lazily built [`FlatTrees`] of a model: not serialised, and not part of equality
/// (it is a function of the trees).
#[derive(Debug, Clone, Default)]
pub(super) struct FlatCache(OnceLock<FlatTrees>);

impl PartialEq for FlatCache {
    fn eq(&self, _: &FlatCache) -> bool {
        true
    }
}

/// A fitted GBDT.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GbdtModel {
    pub(super) objective: Objective,
    pub(super) n_features: usize,
    pub(super) base_score: f64,
    pub(super) trees: Vec<Tree>,
    /// Total split gain per feature (importance).
    pub(super) gain: Vec<f64>,
    /// The trees laid out for inference.
    #[serde(skip)]
    pub(super) flat: FlatCache,
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

    fn flat(&self) -> &FlatTrees {
        self.flat.0.get_or_init(|| FlatTrees::new(&self.trees))
    }
}

impl Predict for GbdtModel {
    fn n_features(&self) -> usize {
        self.n_features
    }
    fn predict_row(&self, row: &[f32]) -> f64 {
        self.base_score + self.flat().sum(row)
    }
    fn predict_into(&self, x: &Matrix, out: &mut [f64]) -> Result<(), ModelError> {
        if x.cols() != self.n_features {
            return Err(ModelError::FeatureCount {
                want: self.n_features,
                got: x.cols(),
            });
        }
        let flat = self.flat();
        out.par_iter_mut()
            .enumerate()
            .with_min_len(1024)
            .for_each(|(i, o)| *o = self.base_score + flat.sum(x.row(i)));
        Ok(())
    }
}
