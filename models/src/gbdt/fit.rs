//! Boosting: trees fitted one after another to the loss's gradients, with early stopping on a
//! validation set.

use augur_numeric::SplitMix64;
use rayon::prelude::*;

use super::binning::Binner;
use super::grow::Grower;
use super::model::{GbdtModel, Tree};
use super::objective::{Objective, Residuals};
use super::params::GbdtParams;
use crate::{Fit, Matrix, ModelError, TrainSet};

/// Validation data for early stopping.
pub struct Validation<'a> {
    pub x: Matrix<'a>,
    pub y: &'a [f64],
}

impl GbdtParams {
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
        self.check(train)?;
        let x = train.x;
        let (n, d) = (x.rows(), x.cols());
        let ones = vec![1.0; n];
        let w = train.weights.unwrap_or(&ones);
        let binner = Binner::new(&x, self.max_bins);
        let bins = binner.bin_columns(&x);
        let base_score = self.objective.base_score(train.y, w);
        let mut pred = vec![base_score; n];
        let mut stopping = EarlyStopping::new(valid, base_score, self.early_stopping_rounds);
        let mut g = vec![0.0; n];
        let mut h = vec![0.0; n];
        let mut rng = SplitMix64(self.seed);
        let mut trees: Vec<Tree> = Vec::new();
        let mut gain = vec![0.0; d];
        for it in 0..self.n_trees {
            self.objective.gradients(&pred, train.y, w, &mut g, &mut h);
            let rows = self.sample_rows(&mut rng, n);
            if rows.len() < 2 * self.min_data_in_leaf.max(1) {
                break;
            }
            let grower = Grower {
                bins: &bins,
                binner: &binner,
                params: self,
                features: self.sample_features(&mut rng, d),
                g: &g,
                h: &h,
            };
            let fit = Residuals {
                pred: &pred,
                y: train.y,
                w,
            };
            let tree = grower.grow(rows, &fit, &mut gain);
            for (i, p) in pred.iter_mut().enumerate() {
                *p += tree.predict(x.row(i));
            }
            progress(it + 1, self.n_trees);
            let stop = stopping.after_tree(it, &tree, self.objective);
            trees.push(tree);
            if stop {
                break;
            }
        }
        trees.truncate(stopping.best_iter.max(1).min(trees.len()));
        Ok(GbdtModel {
            objective: self.objective,
            n_features: d,
            base_score,
            trees,
            gain,
            flat: Default::default(),
        })
    }
}

impl Fit for GbdtParams {
    type Model = GbdtModel;
    fn fit(&self, train: &TrainSet) -> Result<GbdtModel, ModelError> {
        self.fit_with_validation(train, None)
    }
}

/// Which trees to keep: all of them without a validation set; with one, those up to the
/// best validation loss, stopping `rounds` trees after it.
struct EarlyStopping<'a> {
    /// The validation set and its running predictions.
    valid: Option<(Validation<'a>, Vec<f64>)>,
    rounds: usize,
    best_loss: f64,
    /// Trees up to the best validation loss.
    best_iter: usize,
}

impl<'a> EarlyStopping<'a> {
    fn new(valid: Option<Validation<'a>>, base_score: f64, rounds: usize) -> Self {
        EarlyStopping {
            valid: valid.map(|v| {
                let pred = vec![base_score; v.x.rows()];
                (v, pred)
            }),
            rounds,
            best_loss: f64::INFINITY,
            best_iter: 0,
        }
    }

    /// Adds tree `it` (0-based) to the validation predictions; true when training should stop.
    fn after_tree(&mut self, it: usize, tree: &Tree, objective: Objective) -> bool {
        let Some((v, vp)) = self.valid.as_mut() else {
            self.best_iter = it + 1;
            return false;
        };
        vp.par_iter_mut()
            .enumerate()
            .for_each(|(i, p)| *p += tree.predict(v.x.row(i)));
        let loss: f64 = vp
            .iter()
            .zip(v.y)
            .map(|(p, y)| objective.loss(*p, *y))
            .sum::<f64>()
            / v.y.len().max(1) as f64;
        if loss < self.best_loss - 1e-12 {
            self.best_loss = loss;
            self.best_iter = it + 1;
            false
        } else {
            it + 1 - self.best_iter >= self.rounds
        }
    }
}
