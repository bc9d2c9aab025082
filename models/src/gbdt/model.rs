//! A fitted GBDT: its trees and how a row walks them.

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

/// A fitted GBDT.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GbdtModel {
    pub(super) objective: Objective,
    pub(super) n_features: usize,
    pub(super) base_score: f64,
    pub(super) trees: Vec<Tree>,
    /// Total split gain per feature (importance).
    pub(super) gain: Vec<f64>,
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
