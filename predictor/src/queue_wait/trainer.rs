//! Fitting a [`QueueWaitPredictor`] on a trace's [`QueueWaitData`]: the median and bound
//! models (early-stopped on a validation slice), the short-wait override, and the bound's
//! calibration on the tail of the training period (a single conformal offset, and the
//! risk-split bound when the search finds one that holds its levels).

use augur_models::gbdt::{BinnedFeatures, FitInputs, GbdtParams, Objective, Validation};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use super::data::QueueWaitData;
use super::predictor::{
    wait_ceiling, QueueWaitPredictor, ShortWait, ShortWaitInside, WaitTarget, SHORT,
};
use super::risk_search::bound_of;
use crate::calibration::conformal_offset;
use crate::feature_rows::gather;
use crate::metrics::regression::wait_errors;
use crate::metrics::within2x;
use crate::runtime::RuntimeTrainer;
use crate::PredictorError;

/// How to train a [`QueueWaitPredictor`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueWaitTrainer {
    /// The median model (objective forced to L1).
    pub point: GbdtParams,
    /// The scale the median model is fitted on (early stopping measures its loss there).
    pub point_target: WaitTarget,
    /// The bound model (objective forced to the `coverage` quantile).
    pub upper: GbdtParams,
    /// Trains the runtime predictor behind the predicted run times.
    pub runtime: RuntimeTrainer,
    /// Share of the training period (after the fit part) for early stopping.
    pub valid_fraction: f64,
    /// Share at the end of the training period that calibrates the bound.
    pub calib_fraction: f64,
    /// Coverage of the upper bound.
    pub coverage: f64,
    /// Quantile of busy resource that sets the capacity.
    pub capacity_quantile: f64,
    /// Train the short-wait override ([`ShortWait`]): its threshold is the probability with
    /// the most validation waits within 600 s among those whose validation MAE stays within
    /// `1 + short_mae_slack` of the median model's alone and whose share within a factor of
    /// two is no lower (None: no override). The jobs it classifies short get their own wait
    /// inside the window blended with the median model's ([`ShortWait::blended`]).
    pub short_mae_slack: Option<f64>,
    /// Step of the online adaptive bound ([`crate::calibration::AdaptiveBound`]), in
    /// ln(1 + s) units.
    pub adaptive_step: f64,
    /// Fit the risk-split bound ([`crate::calibration::RiskSplitBound`]) when the search on
    /// the training period's tail finds a split that holds its levels there (false: the
    /// single conformal offset only).
    #[serde(default = "default_true")]
    pub risk_split: bool,
}

fn default_true() -> bool {
    true
}

/// Jobs whose scores set the risk split's online threshold.
pub const RISK_WINDOW: usize = 500;
/// Shares of the low-risk group the search tries.
pub const RISK_SHARES: [f64; 5] = [0.5, 0.55, 0.6, 0.65, 0.7];
/// Levels of the low-risk group the search tries (the high group's follows).
pub const RISK_LOW_LEVELS: [f64; 5] = [0.90, 0.91, 0.92, 0.93, 0.94];

impl Default for QueueWaitTrainer {
    fn default() -> Self {
        let base = GbdtParams {
            objective: Objective::L1,
            n_trees: 600,
            learning_rate: 0.05,
            num_leaves: 31,
            min_data_in_leaf: 40,
            lambda_l2: 1.0,
            subsample: 0.8,
            colsample: 0.8,
            early_stopping_rounds: 60,
            ..Default::default()
        };
        QueueWaitTrainer {
            upper: GbdtParams {
                objective: Objective::Quantile { alpha: 0.95 },
                ..base.clone()
            },
            point: base,
            point_target: WaitTarget::Log1p,
            runtime: RuntimeTrainer::default(),
            valid_fraction: 0.1,
            calib_fraction: 0.1,
            coverage: 0.95,
            capacity_quantile: 0.99,
            short_mae_slack: Some(0.03),
            adaptive_step: 0.05,
            risk_split: true,
        }
    }
}

impl QueueWaitTrainer {
    /// Caps both models at `n` trees (quicker, weaker).
    pub fn with_trees(mut self, n: usize) -> Self {
        self.point.n_trees = n.max(1);
        self.upper.n_trees = n.max(1);
        self
    }
}

/// The two models of the wait every training fits on the same rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitModel {
    /// The median of the wait ([`QueueWaitPredictor::point`]).
    Median,
    /// The bound's quantile model ([`QueueWaitPredictor::upper`]).
    Bound,
}

/// The labelled training rows as [`QueueWaitTrainer::train`] cuts them, in submit order.
pub(super) struct Parts<'r> {
    /// The rows the models are fitted on.
    pub fit: &'r [usize],
    /// The rows that stop the fits early.
    pub valid: &'r [usize],
    /// The rows at the end that calibrate the bound.
    pub calib: &'r [usize],
}

impl QueueWaitTrainer {
    /// The labelled training `rows` (in submit order) cut into [`Parts`]; refuses fewer
    /// than 200 rows.
    fn parts<'r>(&self, rows: &'r [usize]) -> Result<Parts<'r>, PredictorError> {
        let n = rows.len();
        if n < 200 {
            return Err(PredictorError::not_enough(
                "jobs with a known queue wait",
                format!("{n} training jobs with a known wait; at least 200 are needed"),
            ));
        }
        let n_cal = ((n as f64) * self.calib_fraction) as usize;
        let n_val = ((n as f64) * self.valid_fraction) as usize;
        let (fit_rows, rest) = rows.split_at(n - n_cal - n_val);
        let (val_rows, cal_rows) = rest.split_at(n_val);
        Ok(Parts {
            fit: fit_rows,
            valid: val_rows,
            calib: cal_rows,
        })
    }

    /// The parameters `model` is fitted with, and the scale of its targets.
    fn model_params(&self, model: WaitModel) -> (GbdtParams, WaitTarget) {
        match model {
            WaitModel::Median => (
                GbdtParams {
                    objective: Objective::L1,
                    ..self.point.clone()
                },
                self.point_target,
            ),
            WaitModel::Bound => (
                GbdtParams {
                    objective: Objective::Quantile {
                        alpha: self.coverage,
                    },
                    ..self.upper.clone()
                },
                WaitTarget::Log1p,
            ),
        }
    }

    /// What [`train`](Self::train) fits `model` on, from the labelled `rows` of `data`: its
    /// rows and validation rows, their targets on the model's scale, its parameters and the
    /// feature names. Saved with [`FitInputs::write`], the same fit can be re-run and timed
    /// outside the service, and fitted by another library.
    pub fn fit_inputs(
        &self,
        data: &QueueWaitData,
        rows: &[usize],
        model: WaitModel,
    ) -> Result<FitInputs, PredictorError> {
        let d = data.n_features;
        let Parts {
            fit: fit_rows,
            valid: val_rows,
            ..
        } = self.parts(rows)?;
        let (params, target) = self.model_params(model);
        let y = |rows: &[usize]| -> Vec<f64> {
            rows.iter()
                .map(|&r| target.of_log1p(data.y_log[r]))
                .collect()
        };
        Ok(FitInputs {
            params,
            columns: data.feature_names(),
            fit_x: gather(&data.x, d, fit_rows),
            fit_y: y(fit_rows),
            valid_x: gather(&data.x, d, val_rows),
            valid_y: y(val_rows),
        })
    }

    /// Trains on the labelled `rows` (in submit order) of `data`: the first part fits, the
    /// next `valid_fraction` early-stops, the last `calib_fraction` calibrates the bound.
    pub fn train(
        &self,
        data: &QueueWaitData,
        rows: &[usize],
    ) -> Result<QueueWaitPredictor, PredictorError> {
        let d = data.n_features;
        let parts = self.parts(rows)?;
        let Parts {
            fit: fit_rows,
            valid: val_rows,
            calib: cal_rows,
        } = parts;
        let fx = gather(&data.x, d, fit_rows);
        let fy: Vec<f64> = fit_rows.iter().map(|&r| data.y_log[r]).collect();
        let vx = gather(&data.x, d, val_rows);
        let vy: Vec<f64> = val_rows.iter().map(|&r| data.y_log[r]).collect();
        let fm = Matrix::new(&fx, fit_rows.len(), d)?;
        // the fit rows binned once for the four models fitted on them
        let fbins = self.point.bin(fm);
        let fit = |params: &GbdtParams, target: WaitTarget| -> Result<AnyModel, PredictorError> {
            let fy: Vec<f64> = fy.iter().map(|&v| target.of_log1p(v)).collect();
            let vy: Vec<f64> = vy.iter().map(|&v| target.of_log1p(v)).collect();
            let train = TrainSet::new(fm, &fy, None)?;
            let valid = if val_rows.is_empty() {
                None
            } else {
                Some(Validation {
                    x: Matrix::new(&vx, val_rows.len(), d)?,
                    y: &vy,
                })
            };
            Ok(AnyModel::Gbdt(params.fit_binned(&train, &fbins, valid)?))
        };
        // The models that do not need each other are fitted side by side: the median and
        // the bound, beside the short-wait models (which read neither). Each fit is
        // deterministic (its own seeded sampling), so the result is the sequential one and
        // a fit's serial stretches leave the other core to another fit.
        let want_short = self.short_mae_slack.is_some() && !val_rows.is_empty();
        let want_risk = self.risk_split && !val_rows.is_empty();
        let fit_w: Vec<f64> = fy.iter().map(|v| v.exp_m1()).collect();
        let val_w: Vec<f64> = vy.iter().map(|v| v.exp_m1()).collect();
        let ((point, upper), short_models) = rayon::join(
            || {
                rayon::join(
                    || {
                        let (params, target) = self.model_params(WaitModel::Median);
                        fit(&params, target)
                    },
                    || {
                        let (params, target) = self.model_params(WaitModel::Bound);
                        fit(&params, target)
                    },
                )
            },
            || -> Result<_, PredictorError> {
                if want_short {
                    self.fit_short_models((&fx, &fbins), &fit_w, &vx, &val_w, d)
                } else {
                    Ok(None)
                }
            },
        );
        let (point, upper) = (point?, upper?);
        let short_models = short_models?;
        let (short, bound) = rayon::join(
            || match (self.short_mae_slack, short_models) {
                (Some(slack), Some(models)) => {
                    self.pick_short(models, &vx, &val_w, d, &point, slack)
                }
                _ => Ok(None),
            },
            || -> Result<_, PredictorError> {
                // the bound model's output on the calibration rows, read by both
                let cal = bound_of(data, &upper, cal_rows)?;
                let upper_offset = self.upper_offset(data, cal_rows, &cal);
                let risk = if want_risk {
                    self.fit_risk(data, &parts, &upper, &cal)?
                } else {
                    None
                };
                Ok((upper_offset, risk))
            },
        );
        let short = short?;
        let (upper_offset, risk) = bound?;
        Ok(QueueWaitPredictor {
            runtime: data.runtime.clone(),
            resource: data.resource,
            capacity: data.capacity,
            point,
            point_target: self.point_target,
            upper,
            upper_offset,
            coverage: self.coverage,
            short,
            risk,
            wait_ceiling_s: wait_ceiling(
                &rows
                    .iter()
                    .map(|&r| data.y_log[r].exp_m1())
                    .collect::<Vec<_>>(),
            ),
        })
    }

    /// Conformalised quantile regression on the calibration slice: the offset that makes
    /// the bound model's output (`cal`, on `cal_rows`) cover `coverage` of the calibration
    /// jobs.
    fn upper_offset(&self, data: &QueueWaitData, cal_rows: &[usize], cal: &[f64]) -> f64 {
        let scores: Vec<f64> = cal_rows
            .iter()
            .zip(cal)
            .map(|(&r, u)| data.y_log[r] - u)
            .collect();
        conformal_offset(&scores, self.coverage).unwrap_or(0.0)
    }

    /// Fits the short-wait classifier and the models of the waits inside its window (None
    /// when too few fit-period waits fall in any window). Needs no other model, so it is
    /// fitted beside them.
    fn fit_short_models(
        &self,
        (fx, fbins): (&[f32], &BinnedFeatures),
        fit_w: &[f64],
        vx: &[f32],
        val_w: &[f64],
        d: usize,
    ) -> Result<Option<ShortModels>, PredictorError> {
        // The window centre: the wait whose ±600 s window holds most fit-period waits (waits
        // are ≥ 0, so a centre of 600 s catches every wait up to 1,200 s).
        let mut seconds = 0.0;
        let mut most = 0usize;
        for k in 0..=12 {
            let c = k as f64 * 100.0;
            let hits = fit_w.iter().filter(|&&w| (w - c).abs() <= SHORT).count();
            if hits > most {
                most = hits;
                seconds = c;
            }
        }
        if most < 20 {
            return Ok(None);
        }
        let fm = Matrix::new(fx, fit_w.len(), d)?;
        let label: Vec<f64> = fit_w
            .iter()
            .map(|&w| f64::from(u8::from((w - seconds).abs() <= SHORT)))
            .collect();
        let train = TrainSet::new(fm, &label, None)?;
        let val_label: Vec<f64> = val_w
            .iter()
            .map(|&w| f64::from(u8::from((w - seconds).abs() <= SHORT)))
            .collect();
        let vm = Matrix::new(vx, val_w.len(), d)?;
        let params = GbdtParams {
            objective: Objective::LogLoss,
            ..self.point.clone()
        };
        let model = AnyModel::Gbdt(params.fit_binned(
            &train,
            fbins,
            Some(Validation {
                x: vm,
                y: &val_label,
            }),
        )?);
        let inside = self.fit_inside(fx, fit_w, vx, val_w, d, seconds)?;
        Ok(Some(ShortModels {
            model,
            inside,
            seconds,
        }))
    }

    /// The short-wait override of `models` with the threshold picked on the validation
    /// slice against the median model `point`.
    fn pick_short(
        &self,
        ShortModels {
            model,
            inside,
            seconds,
        }: ShortModels,
        vx: &[f32],
        val_w: &[f64],
        d: usize,
        point: &AnyModel,
        slack: f64,
    ) -> Result<Option<ShortWait>, PredictorError> {
        let vm = Matrix::new(vx, val_w.len(), d)?;
        let mut vp = vec![0.0; val_w.len()];
        point.predict_into(&vm, &mut vp)?;
        let vp: Vec<f64> = vp
            .into_iter()
            .map(|v| self.point_target.to_seconds(v).max(0.0))
            .collect();
        let outputs = ShortWait {
            model: model.clone(),
            seconds,
            threshold: 0.0,
            inside: Some(inside.clone()),
            blend: true,
        }
        .outputs(&vm)?;
        let (base_mae, _, base_w600) = wait_errors(&vp, val_w);
        let base_2x = within2x(&vp, val_w);
        // the threshold with the most validation waits within 600 s whose MAE stays within
        // the slack of the median model's alone and whose share within a factor of two is
        // no lower than the median model's alone
        let mut best: Option<(f64, ShortWait)> = None;
        for k in 1..=19 {
            let threshold = k as f64 * 0.05;
            let cand = ShortWait {
                model: model.clone(),
                seconds,
                threshold,
                inside: Some(inside.clone()),
                blend: true,
            };
            let p: Vec<f64> = vp
                .iter()
                .zip(&outputs)
                .map(|(&p, &o)| cand.apply(p, o))
                .collect();
            let (mae, _, w600) = wait_errors(&p, val_w);
            if mae <= base_mae * (1.0 + slack)
                && w600 > base_w600
                && within2x(&p, val_w) >= base_2x
                && best.as_ref().is_none_or(|(b, _)| w600 > *b)
            {
                best = Some((w600, cand));
            }
        }
        Ok(best.map(|(_, s)| s))
    }

    /// The median and upper-quantile models of the waits inside the short window centred
    /// on `seconds`, fitted on the fit period's jobs whose wait fell in it (early-stopped on
    /// the validation jobs whose wait did, when there are any).
    fn fit_inside(
        &self,
        fx: &[f32],
        fit_w: &[f64],
        vx: &[f32],
        val_w: &[f64],
        d: usize,
        seconds: f64,
    ) -> Result<ShortWaitInside, PredictorError> {
        let inside = |w: &[f64]| -> Vec<usize> {
            (0..w.len())
                .filter(|&i| (w[i] - seconds).abs() <= SHORT)
                .collect()
        };
        let (fi, vi) = (inside(fit_w), inside(val_w));
        let sfx = gather(fx, d, &fi);
        let sfy: Vec<f64> = fi.iter().map(|&i| fit_w[i]).collect();
        let svx = gather(vx, d, &vi);
        let svy: Vec<f64> = vi.iter().map(|&i| val_w[i]).collect();
        let train = TrainSet::new(Matrix::new(&sfx, fi.len(), d)?, &sfy, None)?;
        let fit = |objective: Objective| -> Result<AnyModel, PredictorError> {
            let valid = if vi.is_empty() {
                None
            } else {
                Some(Validation {
                    x: Matrix::new(&svx, vi.len(), d)?,
                    y: &svy,
                })
            };
            let params = GbdtParams {
                objective,
                ..self.point.clone()
            };
            Ok(AnyModel::Gbdt(params.fit_with_validation(&train, valid)?))
        };
        Ok(ShortWaitInside {
            median: fit(Objective::L1)?,
            upper: fit(Objective::Quantile {
                alpha: INSIDE_UPPER_QUANTILE,
            })?,
            upper_quantile: INSIDE_UPPER_QUANTILE,
        })
    }
}

/// The short-wait classifier and the models inside its window, before its threshold is
/// picked ([`QueueWaitTrainer::pick_short`]).
struct ShortModels {
    model: AnyModel,
    inside: ShortWaitInside,
    /// The window's centre, seconds.
    seconds: f64,
}

/// The quantile of the short window's waits that a short job's estimate keeps within
/// 600 s ([`ShortWait::inside`]).
const INSIDE_UPPER_QUANTILE: f64 = 0.9;

#[cfg(test)]
mod tests {
    use augur_datasets::bundled::Dataset;
    use augur_datasets::ReadOptions;
    use augur_numeric::sigmoid;

    use super::*;
    use crate::queue_wait::QueueWaitSplit;

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// A model's fit inputs, fitted alone, give the very model `train` serves (the median
    /// and the bound): the same rows, targets, validation rows and parameters.
    #[test]
    fn the_fit_inputs_fit_the_served_models() {
        let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
        let jobs = table.to_records().unwrap();
        let trainer = QueueWaitTrainer::default().with_trees(40);
        let split = QueueWaitSplit::build(&jobs, &trainer).unwrap();
        let predictor = trainer.train(&split.data, &split.train_rows).unwrap();
        for (model, served) in [
            (WaitModel::Median, &predictor.point),
            (WaitModel::Bound, &predictor.upper),
        ] {
            let inputs = trainer
                .fit_inputs(&split.data, &split.train_rows, model)
                .unwrap();
            assert_eq!(inputs.columns, predictor.feature_names());
            let n = split.train_rows.len();
            assert_eq!(inputs.fit_rows() + inputs.valid_rows(), n - n / 10);
            let alone = AnyModel::Gbdt(inputs.fit(&mut |_, _| {}).unwrap());
            assert_eq!(
                serde_json::to_string(&alone).unwrap(),
                serde_json::to_string(served).unwrap(),
                "{model:?}"
            );
        }
        // fewer rows than training needs are refused, as training refuses them
        let err = trainer
            .fit_inputs(&split.data, &split.train_rows[..150], WaitModel::Median)
            .unwrap_err();
        assert!(err.to_string().contains("150 training jobs"), "{err}");
    }

    /// On Mira's training period the point estimate answers per job: the jobs the
    /// short-wait override classifies short do not all get the window's centre, and jobs of
    /// 4,096 nodes and more get longer estimates than jobs of 512 nodes and fewer.
    #[test]
    fn mira_point_estimate_varies_with_the_job() {
        let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
        let jobs = table.to_records().unwrap();
        let trainer = QueueWaitTrainer::default().with_trees(150);
        let split = QueueWaitSplit::build(&jobs, &trainer).unwrap();
        let predictor = trainer.train(&split.data, &split.train_rows).unwrap();
        let short = predictor.short.as_ref().expect("a short-wait override");
        let rows = &split.train_rows;
        let d = split.data.n_features;
        let x = gather(&split.data.x, d, rows);
        let m = Matrix::new(&x, rows.len(), d).unwrap();
        let pred = predictor.predict_batch(&m).unwrap();
        let outputs = short.outputs(&m).unwrap();

        let classified: Vec<f64> = pred
            .iter()
            .zip(&outputs)
            .filter(|(_, o)| sigmoid(o.log_odds) >= short.threshold)
            .map(|(p, _)| p.seconds)
            .collect();
        assert!(classified.len() > rows.len() / 4, "{}", classified.len());
        let at_centre = classified.iter().filter(|&&s| s == short.seconds).count();
        assert!(
            at_centre < classified.len() / 2,
            "{at_centre} of {} at {} s",
            classified.len(),
            short.seconds
        );
        let mut distinct = classified.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > 100, "{} distinct", distinct.len());

        let by_size = |keep: &dyn Fn(f64) -> bool| -> Vec<f64> {
            rows.iter()
                .zip(&pred)
                .filter(|(&r, _)| jobs[r].num_nodes.is_some_and(keep))
                .map(|(_, p)| p.seconds)
                .collect()
        };
        let (large, small) = (by_size(&|n| n >= 4096.0), by_size(&|n| n <= 512.0));
        assert!(large.len() > 100 && small.len() > 100);
        let (ml, ms) = (median(large), median(small));
        assert!(
            ml > 2.0 * ms,
            "median estimate {ml} s (≥ 4,096 nodes) vs {ms} s (≤ 512)"
        );
    }
}
