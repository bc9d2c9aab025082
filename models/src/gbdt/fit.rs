//! Boosting: trees fitted one after another to the loss's gradients, with early stopping on a
//! validation set.

use std::marker::PhantomData;

use augur_numeric::SplitMix64;
use rayon::prelude::*;

use super::binning::{Binned, Binner};
use super::grow::Grower;
use super::lead::TreeCountLead;
use super::model::{GbdtModel, Tree, LEAF};
use super::objective::{Objective, Residuals};
use super::params::GbdtParams;
use crate::{Fit, Matrix, ModelError, TrainSet};

/// A training matrix's features as bins, made once by [`GbdtParams::bin`] and shared by
/// every fit on that matrix.
pub struct BinnedFeatures<'a> {
    binner: Binner,
    /// Row-major bins of the columns a split can tell apart, `width` per row (read by the
    /// histogram passes); column `j`'s at `slots[j]`.
    bins: Vec<u8>,
    width: usize,
    /// Per column: its slot in a row of `bins` (equal columns share one), `None` when
    /// constant ([`Binner::column_classes`]).
    slots: Vec<Option<usize>>,
    /// The same bins column by column (column `j`'s at `j * rows`): a split reads one
    /// column of its leaf's rows, in row order, from one place.
    columns: Vec<u8>,
    max_bins: usize,
    /// Address, rows and columns of the matrix binned: a fit on another matrix is refused.
    source: (usize, usize, usize),
    /// Borrows the matrix binned, so it cannot change while its bins are in use.
    _data: PhantomData<&'a [f32]>,
}

/// How a fit relates to another running beside it (see [`TreeCountLead`]).
#[derive(Clone, Copy)]
enum Lead<'a> {
    Alone,
    /// Publishes its tree count.
    Leading(&'a TreeCountLead),
    /// Grows `trees_for(the leader's count)` trees.
    Following {
        lead: &'a TreeCountLead,
        trees_for: &'a dyn Fn(usize) -> usize,
    },
}

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
        let binned = self.bin(train.x);
        self.fit_binned_with_progress(train, &binned, valid, progress)
    }

    /// The features of `x` binned as a fit with these parameters bins them (only
    /// `max_bins` matters): bin once, then [`fit_binned`](Self::fit_binned) several models
    /// on the same rows without binning again.
    pub fn bin<'a>(&self, x: Matrix<'a>) -> BinnedFeatures<'a> {
        let Binned {
            binner,
            rows,
            width,
            slots,
            columns,
            ..
        } = Binner::bin_matrix(&x, self.max_bins);
        BinnedFeatures {
            binner,
            columns,
            bins: rows,
            width,
            slots,
            max_bins: self.max_bins,
            source: (x.data().as_ptr() as usize, x.rows(), x.cols()),
            _data: PhantomData,
        }
    }

    /// [`fit_with_validation`](Self::fit_with_validation) on features binned beforehand by
    /// [`bin`](Self::bin) from `train.x` itself: the same model, without binning again
    /// (binned again when `max_bins` differs). Bins of another matrix are an error.
    pub fn fit_binned(
        &self,
        train: &TrainSet,
        binned: &BinnedFeatures<'_>,
        valid: Option<Validation>,
    ) -> Result<GbdtModel, ModelError> {
        self.fit_binned_with_progress(train, binned, valid, &mut |_, _| {})
    }

    /// [`fit_binned`](Self::fit_binned) with the progress calls of
    /// [`fit_with_progress`](Self::fit_with_progress).
    pub fn fit_binned_with_progress(
        &self,
        train: &TrainSet,
        binned: &BinnedFeatures<'_>,
        valid: Option<Validation>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<GbdtModel, ModelError> {
        self.fit_binned_in(train, binned, valid, progress, Lead::Alone)
    }

    /// [`fit_binned_with_progress`](Self::fit_binned_with_progress), publishing its best
    /// tree count after each tree and the count it keeps at the end to `lead`, for a
    /// [`fit_binned_following`](Self::fit_binned_following) beside it.
    pub fn fit_binned_leading(
        &self,
        train: &TrainSet,
        binned: &BinnedFeatures<'_>,
        valid: Option<Validation>,
        progress: &mut dyn FnMut(usize, usize),
        lead: &TreeCountLead,
    ) -> Result<GbdtModel, ModelError> {
        let _settle = lead.settle_on_drop();
        self.fit_binned_in(train, binned, valid, progress, Lead::Leading(lead))
    }

    /// The model [`fit_binned_with_progress`](Self::fit_binned_with_progress) grows
    /// without validation with `trees_for(n)` trees (at most `n_trees`), `n` being the count
    /// the fit leading `lead` keeps, grown beside that fit: each tree as soon as the
    /// leader's best so far implies it is wanted (see [`TreeCountLead`]). `trees_for`
    /// must not decrease.
    pub fn fit_binned_following(
        &self,
        train: &TrainSet,
        binned: &BinnedFeatures<'_>,
        progress: &mut dyn FnMut(usize, usize),
        lead: &TreeCountLead,
        trees_for: &dyn Fn(usize) -> usize,
    ) -> Result<GbdtModel, ModelError> {
        self.fit_binned_in(
            train,
            binned,
            None,
            progress,
            Lead::Following { lead, trees_for },
        )
    }

    /// The boosting loop behind every fit.
    fn fit_binned_in(
        &self,
        train: &TrainSet,
        binned: &BinnedFeatures<'_>,
        valid: Option<Validation>,
        progress: &mut dyn FnMut(usize, usize),
        lead: Lead<'_>,
    ) -> Result<GbdtModel, ModelError> {
        self.check(train)?;
        let x = train.x;
        let (n, d) = (x.rows(), x.cols());
        if binned.source != (x.data().as_ptr() as usize, n, d) {
            return Err(ModelError::InvalidData(
                "binned features were not binned from this training matrix".into(),
            ));
        }
        // binned with another bin budget: bin again, as an unbinned fit would
        let rebinned;
        let binned = if binned.max_bins == self.max_bins {
            binned
        } else {
            rebinned = self.bin(x);
            &rebinned
        };
        let (binner, bins) = (&binned.binner, &binned.bins);
        let ones = vec![1.0; n];
        let w = train.weights.unwrap_or(&ones);
        let base_score = self.objective.base_score(train.y, w);
        let mut pred = vec![base_score; n];
        let mut stopping = EarlyStopping::new(valid, base_score, self.early_stopping_rounds);
        let mut g = vec![0.0; n];
        let mut h = vec![0.0; n];
        let mut rng = SplitMix64(self.seed);
        let mut trees: Vec<Tree> = Vec::new();
        let mut gain = vec![0.0; d];
        // A row's bin is at most a split's bin exactly when its value is at most the split's
        // threshold, except for values at or below `f32::MIN` (bin 1, yet left of the
        // missing-only split's threshold): without them, a grown row's leaf is known
        // without walking the tree.
        let bins_route_as_thresholds = Binner::bins_route_as_values(&x);
        let mut in_bag = vec![false; if bins_route_as_thresholds { n } else { 0 }];
        if bins_route_as_thresholds {
            stopping.bin(binner, d);
        }
        for it in 0..self.n_trees {
            if let Lead::Following { lead, trees_for } = lead {
                if !lead.wait_to_grow(it, trees_for) {
                    break;
                }
            }
            self.objective.gradients(&pred, train.y, w, &mut g, &mut h);
            let unit_hessians = h.iter().all(|&v| v == 1.0);
            let sign_gradients = g.iter().all(|&v| v == 1.0 || v == -1.0);
            let rows = self.sample_rows(&mut rng, n);
            if rows.len() < 2 * self.min_data_in_leaf.max(1) {
                break;
            }
            let (features, slots) = splittable(self.sample_features(&mut rng, d), &binned.slots);
            let grower = Grower {
                bins,
                width: binned.width,
                slots,
                columns: &binned.columns,
                d,
                binner,
                params: self,
                features,
                g: &g,
                h: &h,
                unit_hessians,
                sign_gradients,
            };
            let fit = Residuals {
                pred: &pred,
                y: train.y,
                w,
            };
            let (tree, leaves) = grower.grow(rows, &fit, &mut gain);
            if bins_route_as_thresholds {
                // the rows the tree was grown on add the leaf they were binned into (the
                // leaf their walk would reach); only the others walk the tree
                in_bag.fill(false);
                for (node, rows) in &leaves {
                    let value = tree.nodes[*node].value;
                    for &r in rows {
                        pred[r as usize] += value;
                        in_bag[r as usize] = true;
                    }
                }
                // and walk it on their bins (a row's bins route as its values do)
                let walk = BinWalk::new(&tree, binner, |j| binned.slots[j]);
                let width = binned.width;
                pred.par_iter_mut()
                    .zip(&in_bag)
                    .enumerate()
                    .with_min_len(4096)
                    .filter(|(_, (_, inside))| !**inside)
                    .for_each(|(i, (p, _))| {
                        *p += match &walk {
                            Some(walk) => walk.predict(&bins[i * width..(i + 1) * width]),
                            None => tree.predict(x.row(i)),
                        }
                    });
            } else {
                // each row adds the same leaf as one after the other, so splitting rows
                // across cores keeps every prediction's bits
                pred.par_iter_mut()
                    .enumerate()
                    .with_min_len(4096)
                    .for_each(|(i, p)| *p += tree.predict(x.row(i)));
            }
            progress(it + 1, self.n_trees);
            let stop = stopping.after_tree(it, &tree, binner, self.objective);
            if let Lead::Leading(lead) = lead {
                lead.publish_best(stopping.best_iter);
            }
            trees.push(tree);
            if stop {
                break;
            }
        }
        trees.truncate(stopping.best_iter.max(1).min(trees.len()));
        if let Lead::Leading(lead) = lead {
            lead.settle(trees.len());
        }
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

/// The sampled `features` a split can be found on, in order, and each one's slot in a row
/// of the binned rows (`slots`: per column, `None` when constant, the same slot for equal
/// columns): without the constant columns (no split leaves rows on both sides) and the
/// columns equal to one kept before them (the same histograms give the same gains, and a
/// split is taken only on a strictly greater gain, so the earlier column always wins). The
/// tree grown is the one all of `features` would grow, without their histograms.
pub(super) fn splittable(
    features: Vec<usize>,
    slots: &[Option<usize>],
) -> (Vec<usize>, Vec<usize>) {
    let mut kept: Vec<usize> = Vec::with_capacity(features.len());
    let mut kept_slots: Vec<usize> = Vec::with_capacity(features.len());
    for j in features {
        let Some(slot) = slots[j] else { continue };
        if !kept_slots.contains(&slot) {
            kept.push(j);
            kept_slots.push(slot);
        }
    }
    (kept, kept_slots)
}

impl Fit for GbdtParams {
    type Model = GbdtModel;
    fn fit(&self, train: &TrainSet) -> Result<GbdtModel, ModelError> {
        self.fit_with_validation(train, None)
    }
}

/// A grown tree read on rows of bins: per node, which byte of a row it reads and the bin at
/// or below which a row goes left (the split's own bin, [`Binner::split_bin`]). A row's
/// bins reach the leaf its values reach, unless a value is at or below `f32::MIN`.
struct BinWalk<'t> {
    tree: &'t Tree,
    /// Per node: (byte of the row, split bin); unused for a leaf.
    cuts: Vec<(u32, u8)>,
}

impl<'t> BinWalk<'t> {
    /// `at(j)`: where a row holds column `j`'s bin. `None` when a column the tree splits on
    /// has no place in a row (a fit never splits on a constant column, the only kind without
    /// one), so the caller walks values instead of misreading a row.
    fn new(tree: &'t Tree, binner: &Binner, at: impl Fn(usize) -> Option<usize>) -> Option<Self> {
        let cuts = tree
            .nodes
            .iter()
            .map(|n| {
                if n.feature == LEAF {
                    return Some((0, 0));
                }
                let j = n.feature as usize;
                let byte = u32::try_from(at(j)?).ok()?;
                Some((byte, binner.split_bin(j, n.threshold)))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(BinWalk { tree, cuts })
    }

    #[inline]
    fn predict(&self, row: &[u8]) -> f64 {
        let mut i = 0usize;
        loop {
            let n = &self.tree.nodes[i];
            if n.feature == LEAF {
                return n.value;
            }
            let (byte, bin) = self.cuts[i];
            i = if row[byte as usize] <= bin {
                n.left as usize
            } else {
                n.right as usize
            };
        }
    }
}

/// Which trees to keep: all of them without a validation set; with one, those up to the
/// best validation loss, stopping `rounds` trees after it.
struct EarlyStopping<'a> {
    /// The validation set and its running predictions.
    valid: Option<(Validation<'a>, Vec<f64>)>,
    /// The validation rows binned by the fit's edges, row by row with every column, when
    /// their bins route as their values (see [`BinWalk`]): each tree walks these.
    bins: Option<Vec<u8>>,
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
            bins: None,
            rounds,
            best_loss: f64::INFINITY,
            best_iter: 0,
        }
    }

    /// Bins the validation rows by the fit's edges (`d` columns) once, when they have every
    /// column and no value at or below `f32::MIN` (nor had the training rows: the caller's
    /// part); else the trees walk their values.
    fn bin(&mut self, binner: &Binner, d: usize) {
        let Some((v, _)) = &self.valid else { return };
        if v.x.cols() == d && Binner::bins_route_as_values(&v.x) {
            self.bins = Some(binner.bin_rows(&v.x));
        }
    }

    /// Adds tree `it` (0-based) to the validation predictions; true when training should stop.
    fn after_tree(
        &mut self,
        it: usize,
        tree: &Tree,
        binner: &Binner,
        objective: Objective,
    ) -> bool {
        let Some((v, vp)) = self.valid.as_mut() else {
            self.best_iter = it + 1;
            return false;
        };
        match self.bins.as_ref().zip(BinWalk::new(tree, binner, Some)) {
            Some((bins, walk)) => {
                let d = v.x.cols();
                vp.par_iter_mut()
                    .enumerate()
                    .with_min_len(1024)
                    .for_each(|(i, p)| *p += walk.predict(&bins[i * d..(i + 1) * d]));
            }
            None => vp
                .par_iter_mut()
                .enumerate()
                .for_each(|(i, p)| *p += tree.predict(v.x.row(i))),
        }
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

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;
    use crate::Matrix;

    /// Rows of six columns: fine values, a few coarse ones, a copy of column 0 (a copy on
    /// the training rows only, when `apart`), a constant, values with NaN, and integers.
    fn rows(rng: &mut SplitMix64, n: usize, apart: bool) -> Vec<f32> {
        let mut x = Vec::with_capacity(n * 6);
        for i in 0..n {
            let a = rng.unit() as f32 * 10.0 - 5.0;
            let copy = if apart {
                rng.unit() as f32 * 12.0 - 6.0
            } else {
                a
            };
            let nan = if i % 7 == 0 {
                f32::NAN
            } else {
                rng.unit() as f32
            };
            x.extend([
                a,
                (rng.below(5) as f32) * 0.25,
                copy,
                3.0,
                nan,
                rng.below(400) as f32,
            ]);
        }
        x
    }

    #[test]
    fn trees_walked_on_bins_reach_the_leaves_walked_on_values() {
        let mut rng = SplitMix64(41);
        let n = 4000;
        let x = rows(&mut rng, n, false);
        let y: Vec<f64> = x
            .chunks_exact(6)
            .map(|r| f64::from(r[0]).sin() + f64::from(r[1]) + f64::from(r[5]) / 100.0)
            .collect();
        let m = Matrix::new(&x, n, 6).unwrap();
        let params = GbdtParams {
            n_trees: 30,
            num_leaves: 31,
            min_data_in_leaf: 5,
            colsample: 0.7,
            ..Default::default()
        };
        let train = TrainSet::new(m, &y, None).unwrap();
        let binned = params.bin(m);
        let model = params.fit_binned(&train, &binned, None).unwrap();
        // other rows: values between, on and beyond the edges, infinities, NaN in every
        // column, and the copied column no longer a copy
        let mut other = rows(&mut rng, 3000, true);
        let (edge_a, edge_f) = (
            binned.binner.threshold(0, 40),
            binned.binner.threshold(5, 9),
        );
        for (i, v) in other.iter_mut().enumerate() {
            match i % 97 {
                0 => *v = f32::NAN,
                1 => *v = f32::INFINITY,
                2 => *v = -1e30,
                3 => *v = 1e30,
                _ => {}
            }
        }
        for r in other.chunks_exact_mut(6).step_by(5) {
            r[0] = edge_a;
            r[5] = edge_f;
        }
        let om = Matrix::new(&other, 3000, 6).unwrap();
        let other_bins = binned.binner.bin_rows(&om);
        let mut splits = 0;
        for tree in &model.trees {
            splits += tree.nodes.iter().filter(|n| n.feature != LEAF).count();
            let by_column = BinWalk::new(tree, &binned.binner, Some).unwrap();
            for i in 0..3000 {
                let got = by_column.predict(&other_bins[i * 6..(i + 1) * 6]);
                assert_eq!(
                    got.to_bits(),
                    tree.predict(om.row(i)).to_bits(),
                    "other row {i}"
                );
            }
            let by_slot = BinWalk::new(tree, &binned.binner, |j| binned.slots[j]).unwrap();
            let w = binned.width;
            for i in 0..n {
                let got = by_slot.predict(&binned.bins[i * w..(i + 1) * w]);
                assert_eq!(
                    got.to_bits(),
                    tree.predict(m.row(i)).to_bits(),
                    "training row {i}"
                );
            }
        }
        assert!(splits > 300, "{splits} splits");
        // a split column with no place in a row: no walk on bins (the values are walked)
        assert!(BinWalk::new(&model.trees[0], &binned.binner, |_| None).is_none());
        // the copied column shares column 0's slot, the constant one has none
        assert_eq!(binned.slots[2], binned.slots[0]);
        assert_eq!(binned.slots[3], None);
    }

    #[test]
    fn early_stopping_on_binned_validation_rows_keeps_the_trees_their_values_keep() {
        // the same fit without validation grows the same trees; walking the validation
        // rows' values after each, the stopping rule keeps as many as the fit kept
        let mut rng = SplitMix64(43);
        let n = 3000;
        let x = rows(&mut rng, n, false);
        let truth = |r: &[f32]| f64::from(r[0]).cos() * 3.0 + f64::from(r[1]);
        let y: Vec<f64> = x.chunks_exact(6).map(truth).collect();
        let m = Matrix::new(&x, n, 6).unwrap();
        let valid_x = rows(&mut rng, 800, true);
        let valid_y: Vec<f64> = valid_x.chunks_exact(6).map(truth).collect();
        let vm = Matrix::new(&valid_x, 800, 6).unwrap();
        let params = GbdtParams {
            n_trees: 300,
            early_stopping_rounds: 10,
            learning_rate: 0.3,
            ..Default::default()
        };
        let train = TrainSet::new(m, &y, None).unwrap();
        let stopped = params
            .fit_with_validation(&train, Some(Validation { x: vm, y: &valid_y }))
            .unwrap();
        let all = params.fit(&train).unwrap();
        let mut vp = vec![all.base_score; 800];
        let (mut best_loss, mut best_iter) = (f64::INFINITY, 0);
        for (it, tree) in all.trees.iter().enumerate() {
            for (i, p) in vp.iter_mut().enumerate() {
                *p += tree.predict(vm.row(i));
            }
            let loss = vp
                .iter()
                .zip(&valid_y)
                .map(|(p, y)| params.objective.loss(*p, *y))
                .sum::<f64>()
                / 800.0;
            if loss < best_loss - 1e-12 {
                (best_loss, best_iter) = (loss, it + 1);
            } else if it + 1 - best_iter >= params.early_stopping_rounds {
                break;
            }
        }
        assert!(best_iter < 300, "early stopping never stopped");
        assert_eq!(stopped.trees.len(), best_iter);
        assert_eq!(stopped.trees[..], all.trees[..best_iter]);
        // tree by tree, the validation predictions walked on bins are those walked on values
        let binned = params.bin(m);
        let valid = || Some(Validation { x: vm, y: &valid_y });
        let mut by_bins = EarlyStopping::new(valid(), all.base_score, 10);
        by_bins.bin(&binned.binner, 6);
        assert!(by_bins.bins.is_some());
        let mut by_values = EarlyStopping::new(valid(), all.base_score, 10);
        for (it, tree) in all.trees.iter().enumerate() {
            let stop = by_bins.after_tree(it, tree, &binned.binner, params.objective);
            let plain = by_values.after_tree(it, tree, &binned.binner, params.objective);
            assert_eq!(stop, plain, "tree {it}");
            let bits = |s: &EarlyStopping| -> Vec<u64> {
                s.valid
                    .as_ref()
                    .unwrap()
                    .1
                    .iter()
                    .map(|p| p.to_bits())
                    .collect()
            };
            assert_eq!(bits(&by_bins), bits(&by_values), "tree {it}");
        }
    }
}
