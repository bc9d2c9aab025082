//! The runtime predictor and its evaluation.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{batch_features, FeatureSchema, TraceEvent};
use augur_models::gbdt::{GbdtParams, Objective, Validation};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use serde::{Deserialize, Serialize};

use crate::calibration::conformal::conformal_offsets;
use crate::calibration::{ConformalWindow, ONLINE_WINDOW};
use crate::metrics::{coverage, mae_log, quantile, within2x};
use crate::PredictorError;

/// A runtime prediction: point estimate and interval, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RuntimePrediction {
    pub seconds: f64,
    pub lower: f64,
    pub upper: f64,
    /// Nominal coverage of `[lower, upper]` (0.8 = 80%).
    pub coverage: f64,
}

/// The starting point a member's trees correct: for each row, the first non-missing of a
/// ranked list of history features (e.g. the median of the last 20 jobs of the same user ×
/// requested time, then of the same user, ...), else a constant. Ranked on the training
/// period by how well each feature alone predicts ln(duration).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaseMargin {
    /// Feature columns, best first.
    pub columns: Vec<usize>,
    /// Used when every column is missing (the training median, ln seconds).
    pub default: f64,
}

impl BaseMargin {
    /// The base value of one row (ln seconds).
    pub fn of(&self, row: &[f32]) -> f64 {
        for &c in &self.columns {
            if let Some(v) = row.get(c) {
                if !v.is_nan() {
                    return f64::from(*v);
                }
            }
        }
        self.default
    }

    /// Ranks the `*:median20` history features of `schema` on `rows` of `x` by mean absolute
    /// error against `y_log`, keeping those available for at least 5% of the rows.
    fn rank(schema: &FeatureSchema, x: &[f32], y_log: &[f64], rows: &[usize]) -> BaseMargin {
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
}

/// One model of the ensemble: trees on ln seconds, optionally correcting a [`BaseMargin`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeMember {
    /// What this member is, for reports ("gbdt", "gbdt on history median", ...).
    pub name: String,
    pub model: AnyModel,
    pub margin: Option<BaseMargin>,
    /// Weight in the ensemble (weights sum to 1).
    pub weight: f64,
}

/// A trained runtime predictor: feature schema, a weighted ensemble of models on ln seconds,
/// and the interval offsets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimePredictor {
    pub schema: FeatureSchema,
    pub members: Vec<RuntimeMember>,
    /// Residual quantiles (ln space) added to the point estimate for the interval.
    pub interval_log: (f64, f64),
    pub coverage: f64,
    /// The validation residuals (ln actual − ln predicted, most recent last) the interval
    /// was calibrated on; they seed the online [`ConformalWindow`].
    #[serde(default)]
    pub calibration_residuals: Vec<f64>,
}

impl RuntimePredictor {
    /// Point estimate in ln seconds for one feature row laid out by `self.schema`.
    pub fn predict_log(&self, features: &[f32]) -> f64 {
        self.members
            .iter()
            .map(|m| {
                let base = m.margin.as_ref().map_or(0.0, |b| b.of(features));
                m.weight * (base + m.model.predict_row(features))
            })
            .sum()
    }

    /// Point estimates in ln seconds for every row of `x`.
    pub fn predict_log_batch(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
        let mut out = vec![0.0; x.rows()];
        let mut tmp = vec![0.0; x.rows()];
        for m in &self.members {
            m.model.predict_into(x, &mut tmp)?;
            for (i, (o, t)) in out.iter_mut().zip(&tmp).enumerate() {
                let base = m.margin.as_ref().map_or(0.0, |b| b.of(x.row(i)));
                *o += m.weight * (base + t);
            }
        }
        Ok(out)
    }

    fn with_interval(&self, log: f64) -> RuntimePrediction {
        RuntimePrediction {
            seconds: log.exp(),
            lower: (log + self.interval_log.0).exp(),
            upper: (log + self.interval_log.1).exp(),
            coverage: self.coverage,
        }
    }

    /// Prediction from a feature row laid out by `self.schema`.
    pub fn predict_row(&self, features: &[f32]) -> RuntimePrediction {
        self.with_interval(self.predict_log(features))
    }

    /// The online [`ConformalWindow`] of `capacity` residuals for this predictor's
    /// coverage, seeded with its calibration residuals.
    pub fn conformal_window(&self, capacity: usize) -> ConformalWindow {
        ConformalWindow::seeded(capacity, self.coverage, &self.calibration_residuals)
    }

    /// Predictions for every row of `x`.
    pub fn predict_batch(&self, x: &Matrix) -> Result<Vec<RuntimePrediction>, PredictorError> {
        Ok(self
            .predict_log_batch(x)?
            .into_iter()
            .map(|l| self.with_interval(l))
            .collect())
    }
}

/// How to train a [`RuntimePredictor`].
///
/// Two members are fitted: trees on ln(duration) directly, and trees correcting a
/// [`BaseMargin`] (the best history median available for the job). Their blend weight is
/// picked on a validation slice at the end of the training period (the last
/// `valid_fraction` of it, by submit time), which also sets the number of trees (early
/// stopping) and calibrates the interval (split-conformal on the validation residuals).
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

fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * d);
    for &r in rows {
        out.extend_from_slice(&x[r * d..(r + 1) * d]);
    }
    out
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
        let margin = BaseMargin::rank(schema, x, y_log, fit_rows);
        let fx = gather(x, d, fit_rows);
        let vx = gather(x, d, val_rows);
        let fm = Matrix::new(&fx, fit_rows.len(), d)?;
        let vm = Matrix::new(&vx, val_rows.len(), d)?;
        let vy: Vec<f64> = val_rows.iter().map(|&r| y_log[r]).collect();
        let base_of = |m: &Matrix, i: usize| margin.of(m.row(i));

        let max_trees = self.params.n_trees;
        let mut planned = 2 * max_trees * if self.refit { 2 } else { 1 };
        let mut done = 0usize;

        // member 0: trees on ln(duration); member 1: trees on ln(duration) − base margin
        let mut members: Vec<(String, Option<BaseMargin>, usize, Vec<f64>)> = Vec::new();
        let mut fitted = Vec::new();
        for with_margin in [false, true] {
            let shift = |m: &Matrix, rows: &[usize], i: usize| -> f64 {
                if with_margin {
                    y_log[rows[i]] - base_of(m, i)
                } else {
                    y_log[rows[i]]
                }
            };
            let fy: Vec<f64> = (0..fit_rows.len())
                .map(|i| shift(&fm, fit_rows, i))
                .collect();
            let vy_shift: Vec<f64> = (0..val_rows.len())
                .map(|i| shift(&vm, val_rows, i))
                .collect();
            let train = TrainSet::new(fm, &fy, None)?;
            let valid = Validation {
                x: vm,
                y: &vy_shift,
            };
            let offset = done;
            let total = planned;
            let model = self
                .params
                .fit_with_progress(&train, Some(valid), &mut |k, _| progress(offset + k, total))?;
            done = offset + model.n_trees();
            planned -= max_trees.saturating_sub(model.n_trees());
            progress(done, planned);
            let mut vp = vec![0.0; val_rows.len()];
            model.predict_into(&vm, &mut vp)?;
            if with_margin {
                for (i, p) in vp.iter_mut().enumerate() {
                    *p += base_of(&vm, i);
                }
            }
            let name = if with_margin {
                "gbdt on history median"
            } else {
                "gbdt"
            };
            members.push((
                name.to_string(),
                with_margin.then(|| margin.clone()),
                model.n_trees(),
                vp,
            ));
            fitted.push(model);
        }
        let w = best_blend(&members[0].3, &members[1].3, &vy);
        let blended: Vec<f64> = members[0]
            .3
            .iter()
            .zip(&members[1].3)
            .map(|(a, b)| (1.0 - w) * a + w * b)
            .collect();
        let resid: Vec<f64> = vy.iter().zip(&blended).map(|(t, p)| t - p).collect();
        let interval_log = conformal_offsets(&resid, self.coverage);

        // the whole training period, for the refits (gathered once for both members)
        let all = if self.refit {
            gather(x, d, train_rows)
        } else {
            Vec::new()
        };
        let mut out = Vec::new();
        for (k, ((name, member_margin, n_trees, _), model)) in
            members.into_iter().zip(fitted).enumerate()
        {
            let weight = if k == 0 { 1.0 - w } else { w };
            if weight == 0.0 {
                continue;
            }
            let model = if self.refit {
                let am = Matrix::new(&all, n, d)?;
                let ay: Vec<f64> = (0..n)
                    .map(|i| {
                        y_log[train_rows[i]]
                            - member_margin.as_ref().map_or(0.0, |b| b.of(am.row(i)))
                    })
                    .collect();
                let trees = ((n_trees as f64) * (1.0 + self.valid_fraction)).ceil() as usize;
                let params = GbdtParams {
                    n_trees: trees.max(1),
                    early_stopping_rounds: 0,
                    ..self.params.clone()
                };
                let (offset, total) = (done, planned.max(done + params.n_trees));
                let m = params.fit_with_progress(
                    &TrainSet::new(am, &ay, None)?,
                    None,
                    &mut |k, _| progress(offset + k, total),
                )?;
                done += m.n_trees();
                progress(done, planned.max(done));
                m
            } else {
                model
            };
            out.push(RuntimeMember {
                name,
                model: AnyModel::Gbdt(model),
                margin: member_margin,
                weight,
            });
        }
        progress(done, done);
        Ok(RuntimePredictor {
            schema: schema.clone(),
            members: out,
            interval_log,
            coverage: self.coverage,
            calibration_residuals: resid,
        })
    }
}

/// One row of an evaluation table.
#[derive(Debug, Clone, Serialize)]
pub struct EvalRow {
    pub method: String,
    pub mae_log: f64,
    pub within2x: f64,
    /// Share of test jobs inside the 80% interval (methods with intervals only).
    pub coverage80: Option<f64>,
    /// Training time, seconds (features + fit).
    pub train_s: Option<f64>,
    /// Prediction time per job, microseconds.
    pub predict_us: Option<f64>,
}

/// The result of [`evaluate_runtime`].
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeEvaluation {
    pub n_train: usize,
    pub n_test: usize,
    pub rows: Vec<EvalRow>,
    /// Test-set actual and predicted seconds, with the interval (for plots).
    pub test_actual: Vec<f64>,
    pub test_pred: Vec<RuntimePrediction>,
    /// The trained predictor.
    #[serde(skip)]
    pub predictor: Option<RuntimePredictor>,
    /// Per-test-job predictions of the other rows (baselines, online conformal), aligned
    /// with `test_actual`, for plots. Not serialised.
    #[serde(skip)]
    pub test_methods: Vec<MethodPredictions>,
}

/// One method's predictions on the test jobs of a [`RuntimeEvaluation`].
#[derive(Debug, Clone)]
pub struct MethodPredictions {
    /// As in [`EvalRow::method`].
    pub method: String,
    /// Predicted seconds per test job.
    pub seconds: Vec<f64>,
    /// Its (lower, upper) interval per test job, for methods with one.
    pub interval: Option<Vec<(f64, f64)>>,
}

/// Mean of the last two finished jobs of the same user (else group, else cluster), known at
/// each job's submit; `None` without such history.
fn last_two_baseline(jobs: &[JobRecord]) -> Vec<Option<f64>> {
    fn key(j: &JobRecord) -> Option<(u8, &str)> {
        j.user
            .as_deref()
            .map(|u| (0, u))
            .or(j.group.as_deref().map(|g| (1, g)))
            .or(j.cluster.as_deref().map(|c| (2, c)))
    }
    let mut last: HashMap<(u8, &str), VecDeque<f64>> = HashMap::new();
    let mut out = vec![None; jobs.len()];
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Submit { index, .. } => {
                if let Some(k) = key(&jobs[index]) {
                    if let Some(q) = last.get(&k) {
                        if !q.is_empty() {
                            out[index] = Some(q.iter().sum::<f64>() / q.len() as f64);
                        }
                    }
                }
            }
            TraceEvent::Finish { index, .. } => {
                if let (Some(k), Some(d)) = (key(&jobs[index]), jobs[index].duration) {
                    let q = last.entry(k).or_default();
                    if q.len() == 2 {
                        q.pop_front();
                    }
                    q.push_back(d);
                }
            }
        }
    }
    out
}

/// Evaluates the runtime predictor and the baselines on the time-ordered 80/20 split of
/// `jobs` (jobs without a duration only feed the history).
pub fn evaluate_runtime(
    jobs: &[JobRecord],
    trainer: &RuntimeTrainer,
) -> Result<RuntimeEvaluation, PredictorError> {
    evaluate_runtime_with_progress(jobs, trainer, &mut |_, _| {})
}

/// [`evaluate_runtime`], calling `progress(trees_done, max_trees)` as trees are grown.
pub fn evaluate_runtime_with_progress(
    jobs: &[JobRecord],
    trainer: &RuntimeTrainer,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RuntimeEvaluation, PredictorError> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled = |rows: &[usize]| -> Vec<usize> {
        rows.iter()
            .copied()
            .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
            .collect()
    };
    let train_rows = labelled(split.train());
    let test_rows = labelled(split.test());
    if train_rows.len() < 100 || test_rows.is_empty() {
        return Err(PredictorError::not_enough(
            "jobs with a known duration",
            format!(
                "{} training and {} test jobs with durations",
                train_rows.len(),
                test_rows.len()
            ),
        ));
    }
    let dur = |i: usize| jobs[i].duration.unwrap_or(0.0);
    let actual: Vec<f64> = test_rows.iter().map(|&i| dur(i)).collect();

    let mut rows = Vec::new();
    // baseline: global median of the training durations
    let train_d: Vec<f64> = train_rows.iter().map(|&i| clamp_duration(dur(i))).collect();
    let median = quantile(&train_d, 0.5);
    let pred_median = vec![median; test_rows.len()];
    rows.push(EvalRow {
        method: "global median".into(),
        mae_log: mae_log(&pred_median, &actual),
        within2x: within2x(&pred_median, &actual),
        coverage80: None,
        train_s: None,
        predict_us: None,
    });
    // baseline: mean of the last two finished jobs of the same user/group
    let last2 = last_two_baseline(jobs);
    let pred_last2: Vec<f64> = test_rows
        .iter()
        .map(|&i| last2[i].unwrap_or(median))
        .collect();
    let key_name = if jobs.iter().any(|j| j.user.is_some()) {
        "user"
    } else if jobs.iter().any(|j| j.group.is_some()) {
        "VC"
    } else {
        "cluster"
    };
    rows.push(EvalRow {
        method: format!("last-2 mean of same {key_name}"),
        mae_log: mae_log(&pred_last2, &actual),
        within2x: within2x(&pred_last2, &actual),
        coverage80: None,
        train_s: None,
        predict_us: None,
    });

    // the model
    let t0 = Instant::now();
    let train_jobs: Vec<JobRecord> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
    let schema = FeatureSchema::for_jobs(&train_jobs);
    let x = batch_features(jobs, &schema);
    let y_log: Vec<f64> = jobs
        .iter()
        .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
        .collect();
    let predictor = trainer.train_with_progress(&schema, &x, &y_log, &train_rows, progress)?;
    let train_s = t0.elapsed().as_secs_f64();
    let d = schema.len();
    let tx = gather(&x, d, &test_rows);
    let tm = Matrix::new(&tx, test_rows.len(), d)?;
    let t1 = Instant::now();
    let preds = predictor.predict_batch(&tm)?;
    let predict_us = t1.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    let p: Vec<f64> = preds.iter().map(|p| p.seconds).collect();
    let lo: Vec<f64> = preds.iter().map(|p| p.lower).collect();
    let hi: Vec<f64> = preds.iter().map(|p| p.upper).collect();
    rows.push(EvalRow {
        method: "augur, static conformal".into(),
        mae_log: mae_log(&p, &actual),
        within2x: within2x(&p, &actual),
        coverage80: Some(coverage(&lo, &hi, &actual)),
        train_s: Some(train_s),
        predict_us: Some(predict_us),
    });
    // Online conformal: as the service does, intervals come from the residuals of the most
    // recent jobs that had finished by each test job's submit (seeded with the predictor's
    // validation residuals), with adaptive conformal inference on the intervals issued.
    let log_pred: HashMap<usize, f64> = test_rows
        .iter()
        .copied()
        .zip(p.iter().map(|v| v.ln()))
        .collect();
    let mut window = predictor.conformal_window(ONLINE_WINDOW);
    let mut online_lo = vec![0.0; jobs.len()];
    let mut online_hi = vec![0.0; jobs.len()];
    let mut issued: HashMap<usize, (f64, f64)> = HashMap::new();
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Finish { index, .. } => {
                if let Some(lp) = log_pred.get(&index) {
                    window.observe_outcome(y_log[index] - lp, issued.get(&index).copied());
                }
            }
            TraceEvent::Submit { index, .. } => {
                if let Some(lp) = log_pred.get(&index) {
                    let (a, b) = window.offsets().unwrap_or(predictor.interval_log);
                    issued.insert(index, (a, b));
                    online_lo[index] = (lp + a).exp();
                    online_hi[index] = (lp + b).exp();
                }
            }
        }
    }
    let olo: Vec<f64> = test_rows.iter().map(|&i| online_lo[i]).collect();
    let ohi: Vec<f64> = test_rows.iter().map(|&i| online_hi[i]).collect();
    rows.push(EvalRow {
        method: "augur, online conformal".into(),
        mae_log: mae_log(&p, &actual),
        within2x: within2x(&p, &actual),
        coverage80: Some(coverage(&olo, &ohi, &actual)),
        train_s: Some(train_s),
        predict_us: Some(predict_us),
    });
    let test_methods = vec![
        MethodPredictions {
            method: rows[0].method.clone(),
            seconds: pred_median,
            interval: None,
        },
        MethodPredictions {
            method: rows[1].method.clone(),
            seconds: pred_last2,
            interval: None,
        },
        MethodPredictions {
            method: "augur, online conformal".into(),
            seconds: p,
            interval: Some(olo.into_iter().zip(ohi).collect()),
        },
    ];
    Ok(RuntimeEvaluation {
        n_train: train_rows.len(),
        n_test: test_rows.len(),
        rows,
        test_actual: actual,
        test_pred: preds,
        predictor: Some(predictor),
        test_methods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_margin_falls_back_in_rank_order() {
        let b = BaseMargin {
            columns: vec![2, 0],
            default: 7.0,
        };
        assert_eq!(b.of(&[1.0, 5.0, 3.0]), 3.0);
        assert_eq!(b.of(&[1.0, 5.0, f32::NAN]), 1.0);
        assert_eq!(b.of(&[f32::NAN, 5.0, f32::NAN]), 7.0);
    }

    #[test]
    fn blend_weight_follows_the_better_member() {
        let y = [1.0, 2.0, 3.0, 4.0];
        let good = [1.0, 2.0, 3.0, 4.0];
        let bad = [3.0, 0.0, 5.0, 1.0];
        assert_eq!(best_blend(&bad, &good, &y), 1.0);
        assert_eq!(best_blend(&good, &bad, &y), 0.0);
    }
}
