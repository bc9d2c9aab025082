//! The runtime predictor and its evaluation.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{batch_features, FeatureSchema, TraceEvent};
use augur_models::gbdt::{GbdtParams, Objective, Validation};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use serde::{Deserialize, Serialize};

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

/// A trained runtime predictor: feature schema, model (on ln seconds) and interval offsets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimePredictor {
    pub schema: FeatureSchema,
    pub model: AnyModel,
    /// Residual quantiles (ln space) added to the point estimate for the interval.
    pub interval_log: (f64, f64),
    pub coverage: f64,
}

impl RuntimePredictor {
    /// Prediction from a feature row laid out by `self.schema`.
    pub fn predict_row(&self, features: &[f32]) -> RuntimePrediction {
        let log = self.model.predict_row(features);
        RuntimePrediction {
            seconds: log.exp(),
            lower: (log + self.interval_log.0).exp(),
            upper: (log + self.interval_log.1).exp(),
            coverage: self.coverage,
        }
    }

    /// Predictions for every row of `x`.
    pub fn predict_batch(&self, x: &Matrix) -> Result<Vec<RuntimePrediction>, PredictorError> {
        let mut log = vec![0.0; x.rows()];
        self.model.predict_into(x, &mut log)?;
        Ok(log
            .into_iter()
            .map(|l| RuntimePrediction {
                seconds: l.exp(),
                lower: (l + self.interval_log.0).exp(),
                upper: (l + self.interval_log.1).exp(),
                coverage: self.coverage,
            })
            .collect())
    }
}

/// How to train a [`RuntimePredictor`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuntimeTrainer {
    pub params: GbdtParams,
    /// Share of the training period (after the fit part) used for early stopping.
    pub valid_fraction: f64,
    /// Share at the end of the training period used to calibrate the interval.
    pub calib_fraction: f64,
    /// Interval coverage to calibrate for.
    pub coverage: f64,
}

impl Default for RuntimeTrainer {
    fn default() -> Self {
        RuntimeTrainer {
            params: GbdtParams {
                objective: Objective::L1,
                n_trees: 1500,
                learning_rate: 0.05,
                num_leaves: 63,
                min_data_in_leaf: 40,
                lambda_l2: 1.0,
                subsample: 0.8,
                colsample: 0.8,
                early_stopping_rounds: 100,
                ..Default::default()
            },
            valid_fraction: 0.1,
            calib_fraction: 0.1,
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

impl RuntimeTrainer {
    /// Trains on `train_rows` (in submit order) of a feature matrix `x` (row-major, `d`
    /// columns) with targets `y_log` (ln seconds, indexed like the rows of `x`).
    pub fn train(
        &self,
        schema: &FeatureSchema,
        x: &[f32],
        y_log: &[f64],
        train_rows: &[usize],
    ) -> Result<RuntimePredictor, PredictorError> {
        let d = schema.len();
        let n = train_rows.len();
        if n < 100 {
            return Err(PredictorError::NotEnoughData(format!(
                "{n} training jobs; at least 100 are needed"
            )));
        }
        let n_cal = ((n as f64) * self.calib_fraction) as usize;
        let n_val = ((n as f64) * self.valid_fraction) as usize;
        let n_fit = n - n_cal - n_val;
        let (fit_rows, rest) = train_rows.split_at(n_fit);
        let (val_rows, cal_rows) = rest.split_at(n_val);
        let fx = gather(x, d, fit_rows);
        let fy: Vec<f64> = fit_rows.iter().map(|&r| y_log[r]).collect();
        let vx = gather(x, d, val_rows);
        let vy: Vec<f64> = val_rows.iter().map(|&r| y_log[r]).collect();
        let train = TrainSet::new(Matrix::new(&fx, fit_rows.len(), d)?, &fy, None)?;
        let valid = (!val_rows.is_empty()).then(|| Validation {
            x: Matrix::new(&vx, val_rows.len(), d).unwrap_or(train.x),
            y: &vy,
        });
        let model = self.params.fit_with_validation(&train, valid)?;
        let cx = gather(x, d, cal_rows);
        let cm = Matrix::new(&cx, cal_rows.len(), d)?;
        let mut cp = vec![0.0; cal_rows.len()];
        model.predict_into(&cm, &mut cp)?;
        let resid: Vec<f64> = cal_rows
            .iter()
            .zip(&cp)
            .map(|(&r, p)| y_log[r] - p)
            .collect();
        let alpha = 1.0 - self.coverage;
        // split-conformal with the finite-sample correction
        let m = resid.len().max(1) as f64;
        let adj = |q: f64| ((q * (m + 1.0)).ceil() / m).clamp(0.0, 1.0);
        let lo = quantile(&resid, 1.0 - adj(1.0 - alpha / 2.0));
        let hi = quantile(&resid, adj(1.0 - alpha / 2.0));
        Ok(RuntimePredictor {
            schema: schema.clone(),
            model: AnyModel::Gbdt(model),
            interval_log: (lo, hi),
            coverage: self.coverage,
        })
    }
}

/// Online split-conformal calibration: the residuals (ln actual − ln predicted) of the most
/// recent finished jobs. Fed as jobs finish, so intervals follow drift in the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConformalWindow {
    capacity: usize,
    residuals: VecDeque<f64>,
    coverage: f64,
    #[serde(skip)]
    cached: Option<(f64, f64)>,
}

impl ConformalWindow {
    /// A window of the last `capacity` residuals for intervals of `coverage`.
    pub fn new(capacity: usize, coverage: f64) -> ConformalWindow {
        ConformalWindow {
            capacity: capacity.max(10),
            residuals: VecDeque::new(),
            coverage,
            cached: None,
        }
    }

    /// Adds the residual of a job that finished.
    pub fn observe(&mut self, residual_log: f64) {
        if !residual_log.is_finite() {
            return;
        }
        if self.residuals.len() == self.capacity {
            self.residuals.pop_front();
        }
        self.residuals.push_back(residual_log);
        self.cached = None;
    }

    /// Number of residuals held.
    pub fn len(&self) -> usize {
        self.residuals.len()
    }

    /// True when no residual was observed.
    pub fn is_empty(&self) -> bool {
        self.residuals.is_empty()
    }

    /// The (lower, upper) offsets in ln space, with the finite-sample correction.
    pub fn offsets(&mut self) -> Option<(f64, f64)> {
        if self.residuals.is_empty() {
            return None;
        }
        if let Some(c) = self.cached {
            return Some(c);
        }
        let v: Vec<f64> = self.residuals.iter().copied().collect();
        let m = v.len() as f64;
        let alpha = 1.0 - self.coverage;
        let adj = ((1.0 - alpha / 2.0) * (m + 1.0)).ceil() / m;
        let c = (quantile(&v, 1.0 - adj.min(1.0)), quantile(&v, adj.min(1.0)));
        self.cached = Some(c);
        Some(c)
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
        return Err(PredictorError::NotEnoughData(format!(
            "{} training and {} test jobs with durations",
            train_rows.len(),
            test_rows.len()
        )));
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
    let predictor = trainer.train(&schema, &x, &y_log, &train_rows)?;
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
        method: "augur gbdt, static conformal".into(),
        mae_log: mae_log(&p, &actual),
        within2x: within2x(&p, &actual),
        coverage80: Some(coverage(&lo, &hi, &actual)),
        train_s: Some(train_s),
        predict_us: Some(predict_us),
    });
    // Online conformal: as the service does, intervals come from the residuals of the most
    // recent jobs that had finished by each test job's submit (calibration-slice jobs first).
    let (_, cal_rows) = {
        let n = train_rows.len();
        let n_cal = ((n as f64) * trainer.calib_fraction) as usize;
        train_rows.split_at(n - n_cal)
    };
    let mut all_log_pred: HashMap<usize, f64> = HashMap::new();
    {
        let cx = gather(&x, d, cal_rows);
        let cm = Matrix::new(&cx, cal_rows.len(), d)?;
        let mut cp = vec![0.0; cal_rows.len()];
        predictor.model.predict_into(&cm, &mut cp)?;
        all_log_pred.extend(cal_rows.iter().copied().zip(cp));
        all_log_pred.extend(test_rows.iter().copied().zip(p.iter().map(|v| v.ln())));
    }
    let mut window = ConformalWindow::new(cal_rows.len().max(500), trainer.coverage);
    let mut online_lo = vec![0.0; jobs.len()];
    let mut online_hi = vec![0.0; jobs.len()];
    let is_test: std::collections::HashSet<usize> = test_rows.iter().copied().collect();
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Finish { index, .. } => {
                if let Some(lp) = all_log_pred.get(&index) {
                    window.observe(y_log[index] - lp);
                }
            }
            TraceEvent::Submit { index, .. } => {
                if is_test.contains(&index) {
                    let lp = all_log_pred.get(&index).copied().unwrap_or(0.0);
                    let (a, b) = window.offsets().unwrap_or(predictor.interval_log);
                    online_lo[index] = (lp + a).exp();
                    online_hi[index] = (lp + b).exp();
                }
            }
        }
    }
    let olo: Vec<f64> = test_rows.iter().map(|&i| online_lo[i]).collect();
    let ohi: Vec<f64> = test_rows.iter().map(|&i| online_hi[i]).collect();
    rows.push(EvalRow {
        method: "augur gbdt, online conformal".into(),
        mae_log: mae_log(&p, &actual),
        within2x: within2x(&p, &actual),
        coverage80: Some(coverage(&olo, &ohi, &actual)),
        train_s: Some(train_s),
        predict_us: Some(predict_us),
    });
    Ok(RuntimeEvaluation {
        n_train: train_rows.len(),
        n_test: test_rows.len(),
        rows,
        test_actual: actual,
        test_pred: preds,
        predictor: Some(predictor),
    })
}
