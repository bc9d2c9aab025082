//! Fitting a [`RuntimePredictor`]: two tree members (one on ln(duration), one correcting the
//! best history median), blended and calibrated on the tail of the training period, then
//! refitted on all of it.

use augur_features::{FeatureSchema, TrainingRanges};
use augur_models::gbdt::{
    BinnedFeatures, GbdtModel, GbdtParams, Objective, TreeCountLead, Validation,
};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use super::predictor::{BaseMargin, ChoiceInputs, PointChoice, RuntimeMember, RuntimePredictor};
use crate::calibration::conformal::{conformal_offsets, drift_level};
use crate::feature_rows::gather;
use crate::metrics::quantile;
use crate::threads::joined;
use crate::PredictorError;

/// How to train a [`RuntimePredictor`].
///
/// Two members are fitted: trees on ln(duration) directly, and trees correcting a
/// [`BaseMargin`] (the best history median available for the job). Their blend weight is
/// picked on a validation slice at the end of the training period (the last
/// `valid_fraction` of it, by submit time), which also sets the number of trees (early
/// stopping) and calibrates the interval (split-conformal on the validation residuals, at
/// the level [`drift_level`] learns from the training period's own drift).
/// With `refit`, both members are then refitted on the whole training period with that
/// number of trees (+ the validation share), so the most recent jobs are learnt from too.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeTrainer {
    pub params: GbdtParams,
    /// Share at the end of the training period used for early stopping, blending and
    /// interval calibration.
    pub valid_fraction: f64,
    /// Refit on the whole training period after validation.
    pub refit: bool,
    /// Interval coverage to calibrate for.
    pub coverage: f64,
}

impl Default for RuntimeTrainer {
    fn default() -> Self {
        RuntimeTrainer {
            params: GbdtParams {
                objective: Objective::L1,
                n_trees: 1000,
                learning_rate: 0.1,
                num_leaves: 63,
                min_data_in_leaf: 40,
                lambda_l2: 1.0,
                subsample: 0.8,
                colsample: 0.8,
                early_stopping_rounds: 50,
                ..Default::default()
            },
            valid_fraction: 0.15,
            refit: true,
            coverage: 0.8,
        }
    }
}

/// Ranks the `*:median20` history features of `schema` on `rows` of `x` by mean absolute
/// error against `y_log`, keeping those available for at least 5% of the rows.
fn rank_base_margin(
    schema: &FeatureSchema,
    x: &[f32],
    y_log: &[f64],
    rows: &[usize],
) -> BaseMargin {
    let d = schema.len();
    let mut ranked: Vec<(f64, usize)> = schema
        .names()
        .iter()
        .enumerate()
        .filter(|(_, n)| n.ends_with(":median20"))
        .filter_map(|(c, _)| {
            let (mut err, mut n) = (0.0, 0usize);
            for &r in rows {
                let v = x[r * d + c];
                if !v.is_nan() {
                    err += (f64::from(v) - y_log[r]).abs();
                    n += 1;
                }
            }
            (n * 20 >= rows.len() && n > 0).then(|| (err / n as f64, c))
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ys: Vec<f64> = rows.iter().map(|&r| y_log[r]).collect();
    BaseMargin {
        columns: ranked.into_iter().map(|(_, c)| c).collect(),
        default: quantile(&ys, 0.5),
    }
}

/// Blend weight of member 1 (member 0 gets `1 − w`) minimising validation MAE, on a grid.
fn best_blend(p0: &[f64], p1: &[f64], y: &[f64]) -> f64 {
    let mae = |w: f64| -> f64 {
        p0.iter()
            .zip(p1)
            .zip(y)
            .map(|((a, b), t)| ((1.0 - w) * a + w * b - t).abs())
            .sum::<f64>()
    };
    (0..=20)
        .map(|k| f64::from(k) / 20.0)
        .min_by(|a, b| mae(*a).total_cmp(&mae(*b)))
        .unwrap_or(0.0)
}

/// Share of the validation slice a [`PointChoice`] is fitted on; it is early-stopped and
/// judged on the rest (the most recent jobs).
const CHOICE_FIT_SHARE: f64 = 0.7;

/// What landing within 2x is worth in a [`PointChoice`]'s labels, in ln units of absolute
/// error: 0.5 (half the width of the within-2x band, ln 4 ≈ 1.39).
const CHOICE_WITHIN2X_WORTH: f64 = 0.5;

/// Fits the [`PointChoice`] between the validation-stage ensemble's `point` (ln seconds per
/// row of `val`) and `margin` on the gap between the two alone: on each validation row,
/// which of the two has the lower loss (log error, less [`CHOICE_WITHIN2X_WORTH`] when within
/// 2x of `y`), weighted by how much lower. The gap alone, not the job's features: with them
/// the choice learns which bursts of the validation slice were easy, and the test period's
/// bursts are others. Kept only when, on the held-out end of the slice, the chosen points
/// have a lower mean log error than the ensemble's alone and land within 2x at least as
/// often.
fn fit_choice(
    margin: &BaseMargin,
    val: &Matrix,
    point: &[f64],
    y: &[f64],
) -> Result<Option<PointChoice>, PredictorError> {
    let n = val.rows();
    let base: Vec<f64> = (0..n).map(|i| margin.of(val.row(i))).collect();
    let within = |p: f64, t: f64| (p - t).abs() <= std::f64::consts::LN_2;
    let loss = |p: f64, t: f64| {
        (p - t).abs()
            - if within(p, t) {
                CHOICE_WITHIN2X_WORTH
            } else {
                0.0
            }
    };
    // the gap of each row of `range` where the two differ; label 1 where the base's loss is
    // lower, weight the difference
    let rows_of = |range: std::ops::Range<usize>| -> (Vec<f32>, Vec<f64>, Vec<f64>) {
        let (mut rx, mut ry, mut rw) = (Vec::new(), Vec::new(), Vec::new());
        for i in range {
            let gain = loss(point[i], y[i]) - loss(base[i], y[i]);
            if gain != 0.0 {
                rx.push((point[i] - base[i]) as f32);
                ry.push(if gain > 0.0 { 1.0 } else { 0.0 });
                rw.push(gain.abs());
            }
        }
        (rx, ry, rw)
    };
    let cut = ((n as f64) * CHOICE_FIT_SHARE) as usize;
    let (fx, fy, fw) = rows_of(0..cut);
    let (cx, cy, _) = rows_of(cut..n);
    if fy.len() < 200 || cy.len() < 50 {
        return Ok(None);
    }
    // a few wide steps of the gap
    let params = GbdtParams {
        objective: Objective::LogLoss,
        n_trees: 300,
        learning_rate: 0.05,
        num_leaves: 4,
        min_data_in_leaf: 200,
        lambda_l2: 1.0,
        subsample: 0.8,
        colsample: 1.0,
        early_stopping_rounds: 30,
        ..Default::default()
    };
    let train = TrainSet::new(Matrix::new(&fx, fy.len(), 1)?, &fy, Some(&fw))?;
    let valid = Validation {
        x: Matrix::new(&cx, cy.len(), 1)?,
        y: &cy,
    };
    let model = params.fit_with_validation(&train, Some(valid))?;
    let choice = PointChoice {
        margin: margin.clone(),
        model: AnyModel::Gbdt(model),
        inputs: ChoiceInputs::Gap,
    };
    let (mut err_chosen, mut err_alone, mut w2x_chosen, mut w2x_alone) = (0.0, 0.0, 0, 0);
    for i in cut..n {
        let c = choice.choose(val.row(i), point[i]);
        err_chosen += (c - y[i]).abs();
        err_alone += (point[i] - y[i]).abs();
        w2x_chosen += usize::from(within(c, y[i]));
        w2x_alone += usize::from(within(point[i], y[i]));
    }
    Ok((err_chosen < err_alone && w2x_chosen >= w2x_alone).then_some(choice))
}

/// Trees grown so far and the number planned, reported as training goes.
struct TreeProgress<'p> {
    report: &'p mut dyn FnMut(usize, usize),
    done: usize,
    planned: usize,
}

impl TreeProgress<'_> {
    /// Runs `f` with a progress that reports nothing (a fit running beside the one that
    /// reports).
    fn silent<R>(f: impl FnOnce(&mut TreeProgress) -> R) -> R {
        let mut nothing = |_: usize, _: usize| {};
        f(&mut TreeProgress {
            report: &mut nothing,
            done: 0,
            planned: 0,
        })
    }

    /// Counts the `grown` trees of a fit that ran beside the reporting one (`budget`
    /// planned for it) and reports.
    fn add_member(&mut self, budget: usize, grown: usize) {
        self.done += grown;
        self.planned -= budget.saturating_sub(grown).min(self.planned);
        (self.report)(self.done, self.planned.max(self.done));
    }
}

/// The training period cut into the part the members are fitted on and the validation
/// slice after it, with the feature rows of each.
struct Slices<'a> {
    y_log: &'a [f64],
    fit_rows: &'a [usize],
    val_rows: &'a [usize],
    fit: Matrix<'a>,
    /// `fit` binned once for both members.
    fit_bins: BinnedFeatures<'a>,
    val: Matrix<'a>,
}

/// A member fitted on the fit rows: its model and its predictions on the validation slice.
struct ValidatedMember {
    name: &'static str,
    margin: Option<BaseMargin>,
    model: GbdtModel,
    val_pred: Vec<f64>,
}

impl RuntimeTrainer {
    /// Trains on `train_rows` (in submit order) of a feature matrix `x` (row-major,
    /// `schema.len()` columns) with targets `y_log` (ln seconds, indexed like the rows of `x`).
    pub fn train(
        &self,
        schema: &FeatureSchema,
        x: &[f32],
        y_log: &[f64],
        train_rows: &[usize],
    ) -> Result<RuntimePredictor, PredictorError> {
        self.train_with_progress(schema, x, y_log, train_rows, &mut |_, _| {})
    }

    /// [`train`](Self::train), calling `progress(trees_done, max_trees)` as trees are grown
    /// (over all members and refits; `max_trees` may shrink once early stopping has spoken).
    pub fn train_with_progress(
        &self,
        schema: &FeatureSchema,
        x: &[f32],
        y_log: &[f64],
        train_rows: &[usize],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<RuntimePredictor, PredictorError> {
        let d = schema.len();
        let n = train_rows.len();
        if n < 100 {
            return Err(PredictorError::not_enough(
                "jobs with a known duration",
                format!("{n} training jobs; at least 100 are needed"),
            ));
        }
        if x.len() != y_log.len() * d {
            return Err(PredictorError::FeatureShape {
                values: x.len(),
                jobs: y_log.len(),
                features: d,
            });
        }
        let n_val = (((n as f64) * self.valid_fraction) as usize).clamp(20, n / 2);
        let (fit_rows, val_rows) = train_rows.split_at(n - n_val);
        let margin = rank_base_margin(schema, x, y_log, fit_rows);
        let fx = gather(x, d, fit_rows);
        let vx = gather(x, d, val_rows);
        let fit = Matrix::new(&fx, fit_rows.len(), d)?;
        let slices = Slices {
            y_log,
            fit_rows,
            val_rows,
            fit,
            fit_bins: self.params.bin(fit),
            val: Matrix::new(&vx, val_rows.len(), d)?,
        };
        let vy: Vec<f64> = val_rows.iter().map(|&r| y_log[r]).collect();
        let mut tp = TreeProgress {
            report: progress,
            done: 0,
            planned: 2 * self.params.n_trees * if self.refit { 2 } else { 1 },
        };
        // the whole training period for the refits, binned once for both members
        let all_x = if self.refit {
            gather(x, d, train_rows)
        } else {
            Vec::new()
        };
        let all = if self.refit {
            let am = Matrix::new(&all_x, n, d)?;
            Some((am, self.params.bin(am)))
        } else {
            None
        };
        // member 0: trees on ln(duration); member 1: trees on ln(duration) − base margin,
        // fitted side by side, each with its refit on the whole period following it (the
        // refit's tree count is the member's early-stopped count scaled to the longer
        // period, so it grows each tree once the member's best implies it). Each fit is
        // deterministic, so the models are the ones fitted one after the other; member 0
        // reports the progress of the members, the refits are counted when they end.
        let leads = [TreeCountLead::new(), TreeCountLead::new()];
        let margins = [None, Some(&margin)];
        let (plain, corrected, refits) = std::thread::scope(|scope| {
            let refits: Vec<_> = match &all {
                Some((am, bins)) => margins
                    .iter()
                    .zip(&leads)
                    .map(|(&m, lead)| {
                        let refit =
                            move || self.refit_following(m, (*am, bins), y_log, train_rows, lead);
                        Some(scope.spawn(refit))
                    })
                    .collect(),
                None => vec![None, None],
            };
            let other = scope.spawn(|| {
                let _settle = leads[1].settle_on_drop();
                TreeProgress::silent(|tp| self.fit_member(Some(&margin), &slices, tp, &leads[1]))
            });
            let plain = {
                let _settle = leads[0].settle_on_drop();
                self.fit_member(None, &slices, &mut tp, &leads[0])
            };
            let corrected = joined(other);
            let refits: Vec<_> = refits.into_iter().map(|h| h.map(joined)).collect();
            (plain, corrected, refits)
        });
        let (plain, corrected) = (plain?, corrected?);
        tp.add_member(self.params.n_trees, corrected.model.n_trees());
        let w = best_blend(&plain.val_pred, &corrected.val_pred, &vy);
        let blended: Vec<f64> = plain
            .val_pred
            .iter()
            .zip(&corrected.val_pred)
            .map(|(a, b)| (1.0 - w) * a + w * b)
            .collect();
        let choice = fit_choice(&margin, &slices.val, &blended, &vy)?;
        // the interval is calibrated on the residuals of the point served
        let resid: Vec<f64> = vy
            .iter()
            .zip(&blended)
            .enumerate()
            .map(|(i, (t, p))| match &choice {
                Some(c) => t - c.choose(slices.val.row(i), *p),
                None => t - p,
            })
            .collect();
        // widened by the drift the training period showed one slice ahead, measured on the
        // history median's residuals (out of sample at every row, no fit needed)
        let history: Vec<f64> = train_rows
            .iter()
            .map(|&r| y_log[r] - margin.of(&x[r * d..(r + 1) * d]))
            .collect();
        let level = drift_level(&history, n_val, self.coverage);
        let interval_log = conformal_offsets(&resid, level);

        // the members with a weight, each served as refitted (when refitting; the refit of
        // a member without weight is dropped, whatever its outcome)
        let mut kept: Vec<(ValidatedMember, f64, GbdtModel)> = Vec::with_capacity(2);
        for ((member, weight), refit) in [(plain, 1.0 - w), (corrected, w)].into_iter().zip(refits)
        {
            if weight == 0.0 {
                if refit.is_some() {
                    tp.add_member(self.params.n_trees, 0);
                }
                continue;
            }
            let model = match refit {
                Some(refit) => {
                    let refit = refit?;
                    tp.add_member(self.params.n_trees, refit.n_trees());
                    refit
                }
                None => member.model.clone(),
            };
            kept.push((member, weight, model));
        }
        let members: Vec<RuntimeMember> = kept
            .into_iter()
            .map(|(member, weight, model)| RuntimeMember {
                name: member.name.to_string(),
                model: AnyModel::Gbdt(model),
                margin: member.margin,
                weight,
            })
            .collect();
        (tp.report)(tp.done, tp.done);
        Ok(RuntimePredictor {
            schema: schema.clone(),
            members,
            interval_log,
            coverage: self.coverage,
            calibration_residuals: resid,
            training_ranges: TrainingRanges::of_rows(x, d, train_rows),
            choice,
            trained_until: None,
        })
    }

    /// Fits one member on the fit rows, early-stopped on the validation slice: trees on
    /// ln(duration), or on ln(duration) − `margin` when given; its tree count is published
    /// to `lead` as it grows.
    fn fit_member(
        &self,
        margin: Option<&BaseMargin>,
        s: &Slices,
        tp: &mut TreeProgress,
        lead: &TreeCountLead,
    ) -> Result<ValidatedMember, PredictorError> {
        let base = |m: &Matrix, i: usize| margin.map_or(0.0, |b| b.of(m.row(i)));
        let target = |m: &Matrix, rows: &[usize], i: usize| -> f64 {
            match margin {
                Some(_) => s.y_log[rows[i]] - base(m, i),
                None => s.y_log[rows[i]],
            }
        };
        let fy: Vec<f64> = (0..s.fit_rows.len())
            .map(|i| target(&s.fit, s.fit_rows, i))
            .collect();
        let vy: Vec<f64> = (0..s.val_rows.len())
            .map(|i| target(&s.val, s.val_rows, i))
            .collect();
        let train = TrainSet::new(s.fit, &fy, None)?;
        let valid = Validation { x: s.val, y: &vy };
        let (offset, total) = (tp.done, tp.planned);
        let report = &mut *tp.report;
        let model = self.params.fit_binned_leading(
            &train,
            &s.fit_bins,
            Some(valid),
            &mut |k, _| report(offset + k, total),
            lead,
        )?;
        tp.done = offset + model.n_trees();
        tp.planned = tp
            .planned
            .saturating_sub(self.params.n_trees.saturating_sub(model.n_trees()));
        (tp.report)(tp.done, tp.planned);
        let mut val_pred = vec![0.0; s.val_rows.len()];
        model.predict_into(&s.val, &mut val_pred)?;
        if margin.is_some() {
            for (i, p) in val_pred.iter_mut().enumerate() {
                *p += base(&s.val, i);
            }
        }
        Ok(ValidatedMember {
            name: if margin.is_some() {
                "gbdt on history median"
            } else {
                "gbdt"
            },
            margin: margin.cloned(),
            model,
            val_pred,
        })
    }

    /// Refits a member on the whole training period (`all`: its rows, binned), trees on
    /// ln(duration) − `margin` when given, beside the member's fit that leads `lead`: its
    /// tree count is the member's early-stopped count scaled by the longer period.
    fn refit_following(
        &self,
        margin: Option<&BaseMargin>,
        (all, all_bins): (Matrix, &BinnedFeatures),
        y_log: &[f64],
        train_rows: &[usize],
        lead: &TreeCountLead,
    ) -> Result<GbdtModel, PredictorError> {
        let ay: Vec<f64> = (0..train_rows.len())
            .map(|i| y_log[train_rows[i]] - margin.map_or(0.0, |b| b.of(all.row(i))))
            .collect();
        let trees_for =
            |n: usize| (((n as f64) * (1.0 + self.valid_fraction)).ceil() as usize).max(1);
        let params = GbdtParams {
            n_trees: trees_for(self.params.n_trees),
            early_stopping_rounds: 0,
            ..self.params.clone()
        };
        let train = TrainSet::new(all, &ay, None)?;
        Ok(params.fit_binned_following(&train, all_bins, &mut |_, _| {}, lead, &trees_for)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blend_weight_follows_the_better_member() {
        let y = [1.0, 2.0, 3.0, 4.0];
        let good = [1.0, 2.0, 3.0, 4.0];
        let bad = [3.0, 0.0, 5.0, 1.0];
        assert_eq!(best_blend(&bad, &good, &y), 1.0);
        assert_eq!(best_blend(&good, &bad, &y), 0.0);
    }

    #[test]
    fn choice_takes_the_base_on_the_side_of_the_gap_where_jobs_land_on_it() {
        // column 0: the base (ln s). Where the ensemble's point is below the base, jobs run
        // as long as the base says; where it is above, they land on the point.
        let n = 2000;
        let mut x = Vec::new();
        let (mut point, mut y) = (Vec::new(), Vec::new());
        for i in 0..n {
            let b = 5.0 + (i % 7) as f32 * 0.1;
            let gap = if i % 2 == 0 { -1.5 } else { 1.5 };
            x.push(b);
            point.push(f64::from(b) + gap);
            y.push(if gap < 0.0 {
                f64::from(b)
            } else {
                f64::from(b) + gap
            });
        }
        let margin = BaseMargin {
            columns: vec![0],
            default: 0.0,
        };
        let val = Matrix::new(&x, n, 1).unwrap();
        let choice = fit_choice(&margin, &val, &point, &y)
            .unwrap()
            .expect("the choice is kept");
        assert_eq!(choice.inputs, ChoiceInputs::Gap);
        assert_eq!(choice.choose(&[5.0], 3.5), 5.0);
        assert_eq!(choice.choose(&[5.0], 6.5), 6.5);
        // a base that is never nearer is not kept
        let far: Vec<f64> = point.clone();
        assert!(fit_choice(&margin, &val, &point, &far).unwrap().is_none());
    }
}
