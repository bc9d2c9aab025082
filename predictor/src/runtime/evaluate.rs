//! The runtime task's evaluation in the shared protocol: the time-ordered 80/20 split,
//! durations clamped to ≥ 1 s, `mae_log`, `within2x` and interval coverage, with the simple
//! baselines on the same split (global median; mean of the last two finished jobs of the
//! same user, else VC/group, else cluster).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use augur_datasets::split::clamp_duration;
use augur_datasets::{JobRecord, TimeSplit};
use augur_features::{batch_features, FeatureSchema, TraceEvent};
use augur_models::Matrix;
use serde::{Deserialize, Serialize};

use super::predictor::{answered_offsets, runtime_ceiling, RuntimePrediction, RuntimePredictor};
use super::trainer::RuntimeTrainer;
use crate::calibration::ONLINE_WINDOW;
use crate::evaluation::{Evaluation, MethodRow};
use crate::feature_rows::gather;
use crate::metrics::{coverage, mae_log, quantile, within2x, CoverageGroups, GroupCoverage};
use crate::PredictorError;

/// The metrics of one method in a [`RuntimeEvaluation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeMetrics {
    pub mae_log: f64,
    pub within2x: f64,
    /// Share of test jobs inside the 80% interval (methods with intervals only).
    pub coverage80: Option<f64>,
    /// Training time, seconds (features + fit).
    pub train_s: Option<f64>,
    /// Prediction time per job, microseconds.
    pub predict_us: Option<f64>,
}

/// One row of the runtime evaluation table.
pub type EvalRow = MethodRow<RuntimeMetrics>;

/// The result of [`evaluate_runtime`].
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeEvaluation {
    pub n_train: usize,
    pub n_test: usize,
    pub rows: Vec<EvalRow>,
    /// Test-set actual and predicted seconds, with the interval (for plots).
    pub test_actual: Vec<f64>,
    pub test_pred: Vec<RuntimePrediction>,
    /// Per-test-job predictions of the other rows (baselines, online conformal), aligned
    /// with `test_actual`, for plots. Not serialised.
    #[serde(skip)]
    pub test_methods: Vec<MethodPredictions>,
    /// Coverage of the static and the online interval per group of test jobs (partition,
    /// GPU or CPU, size).
    pub coverage_by_group: Vec<GroupCoverage>,
}

impl Evaluation for RuntimeEvaluation {
    type Metrics = RuntimeMetrics;
    fn rows(&self) -> &[EvalRow] {
        &self.rows
    }
}

/// One method's predictions on the test jobs of a [`RuntimeEvaluation`].
#[derive(Debug, Clone)]
pub struct MethodPredictions {
    /// As in [`MethodRow::method`].
    pub method: String,
    /// Predicted seconds per test job.
    pub seconds: Vec<f64>,
    /// Its (lower, upper) interval per test job, for methods with one.
    pub interval: Option<Vec<(f64, f64)>>,
}

/// A trace cut by the shared protocol's time-ordered split, with what the runtime task
/// trains and scores on: every job's features (schema from the training period) and
/// ln(duration) target, and the labelled (finite duration) rows of each side.
#[derive(Debug, Clone)]
pub struct RuntimeSplit {
    pub schema: FeatureSchema,
    /// Row-major, `jobs.len() × schema.len()`.
    pub x: Vec<f32>,
    /// ln(clamped duration) per job (ln 1 where unknown; only labelled rows are used).
    pub y_log: Vec<f64>,
    /// Labelled training rows, in submit order.
    pub train_rows: Vec<usize>,
    /// Labelled test rows, in submit order.
    pub test_rows: Vec<usize>,
}

impl RuntimeSplit {
    /// Splits `jobs` and computes their features; jobs without a duration only feed the
    /// history. Refuses a split with under 100 labelled training jobs or no test job.
    pub fn build(jobs: &[JobRecord]) -> Result<RuntimeSplit, PredictorError> {
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
        let train_jobs: Vec<JobRecord> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
        let schema = FeatureSchema::for_jobs(&train_jobs);
        let x = batch_features(jobs, &schema);
        let y_log = jobs
            .iter()
            .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
            .collect();
        Ok(RuntimeSplit {
            schema,
            x,
            y_log,
            train_rows,
            test_rows,
        })
    }
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
    train_and_evaluate_runtime(jobs, trainer, progress).map(|(_, eval)| eval)
}

/// The evaluation of [`evaluate_runtime_with_progress`] and the predictor it trained (for
/// `augur train`, which saves that predictor: one training, not two).
pub fn train_and_evaluate_runtime(
    jobs: &[JobRecord],
    trainer: &RuntimeTrainer,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(RuntimePredictor, RuntimeEvaluation), PredictorError> {
    let t0 = Instant::now();
    let split = RuntimeSplit::build(jobs)?;
    let predictor = trainer
        .train_with_progress(
            &split.schema,
            &split.x,
            &split.y_log,
            &split.train_rows,
            progress,
        )?
        .trained_on(jobs, &split.train_rows);
    let train_s = t0.elapsed().as_secs_f64();
    let eval = score_runtime(jobs, &split, &predictor, train_s)?;
    Ok((predictor, eval))
}

fn row(method: impl Into<String>, pred: &[f64], actual: &[f64]) -> EvalRow {
    MethodRow::new(
        method,
        RuntimeMetrics {
            mae_log: mae_log(pred, actual),
            within2x: within2x(pred, actual),
            coverage80: None,
            train_s: None,
            predict_us: None,
        },
    )
}

/// Scores an already-trained `predictor` on the test rows of `split` beside the baselines:
/// its static interval and the online-conformal one. `train_s` is reported as the
/// training time (features + fit).
pub fn score_runtime(
    jobs: &[JobRecord],
    split: &RuntimeSplit,
    predictor: &RuntimePredictor,
    train_s: f64,
) -> Result<RuntimeEvaluation, PredictorError> {
    let test_rows = &split.test_rows;
    let dur = |i: usize| jobs[i].duration.unwrap_or(0.0);
    let actual: Vec<f64> = test_rows.iter().map(|&i| dur(i)).collect();
    let mut rows = Vec::new();
    // baseline: global median of the training durations
    let train_d: Vec<f64> = split
        .train_rows
        .iter()
        .map(|&i| clamp_duration(dur(i)))
        .collect();
    let median = quantile(&train_d, 0.5);
    let pred_median = vec![median; test_rows.len()];
    rows.push(row("global median", &pred_median, &actual));
    // baseline: mean of the last two finished jobs of the same user/group
    let last2 = last_two_baseline(jobs);
    let pred_last2: Vec<f64> = test_rows
        .iter()
        .map(|&i| last2[i].unwrap_or(median))
        .collect();
    rows.push(row(
        format!("last-2 mean of same {}", last_two_key_name(jobs)),
        &pred_last2,
        &actual,
    ));

    // the model
    let d = split.schema.len();
    let tx = gather(&split.x, d, test_rows);
    let tm = Matrix::new(&tx, test_rows.len(), d)?;
    let t1 = Instant::now();
    // no answer past a job's time limit and grace, as the service answers
    let preds: Vec<RuntimePrediction> = predictor
        .predict_batch(&tm)?
        .into_iter()
        .zip(test_rows)
        .map(|(p, &i)| p.capped(runtime_ceiling(jobs[i].requested_time)))
        .collect();
    let predict_us = t1.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    let p: Vec<f64> = preds.iter().map(|p| p.seconds).collect();
    let lo: Vec<f64> = preds.iter().map(|p| p.lower).collect();
    let hi: Vec<f64> = preds.iter().map(|p| p.upper).collect();
    let timed = |mut r: EvalRow, cov: f64| {
        r.metrics.coverage80 = Some(cov);
        r.metrics.train_s = Some(train_s);
        r.metrics.predict_us = Some(predict_us);
        r
    };
    rows.push(timed(
        row("augur, static conformal", &p, &actual),
        coverage(&lo, &hi, &actual),
    ));
    let (olo, ohi) = online_conformal_intervals(jobs, split, predictor)?;
    rows.push(timed(
        row("augur, online conformal", &p, &actual),
        coverage(&olo, &ohi, &actual),
    ));
    let inside = |lo: &[f64], hi: &[f64]| -> Vec<bool> {
        actual
            .iter()
            .zip(lo.iter().zip(hi))
            .map(|(a, (l, h))| (*l..=*h).contains(&clamp_duration(*a)))
            .collect()
    };
    let groups = CoverageGroups::from_jobs(split.train_rows.iter().map(|&i| &jobs[i]));
    let test_jobs: Vec<&JobRecord> = test_rows.iter().map(|&i| &jobs[i]).collect();
    let coverage_by_group = groups.coverage(&test_jobs, &inside(&lo, &hi), &inside(&olo, &ohi));
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
        n_train: split.train_rows.len(),
        n_test: test_rows.len(),
        rows,
        test_actual: actual,
        test_pred: preds,
        test_methods,
        coverage_by_group,
    })
}

/// The online-conformal intervals (lower, upper per test row) of point predictions `p`:
/// as the service runs them, from the residuals of the most recent jobs that had finished
/// by each test job's submit (seeded with the predictor's validation residuals), with
/// adaptive conformal inference on the intervals issued.
fn online_conformal_intervals(
    jobs: &[JobRecord],
    split: &RuntimeSplit,
    predictor: &RuntimePredictor,
) -> Result<(Vec<f64>, Vec<f64>), PredictorError> {
    let d = split.schema.len();
    let tx = gather(&split.x, d, &split.test_rows);
    let raw = predictor.predict_log_batch(&Matrix::new(&tx, split.test_rows.len(), d)?)?;
    let log_pred: HashMap<usize, f64> = split.test_rows.iter().copied().zip(raw).collect();
    let mut window = predictor.conformal_window(ONLINE_WINDOW);
    let mut online_lo = vec![0.0; jobs.len()];
    let mut online_hi = vec![0.0; jobs.len()];
    let mut issued: HashMap<usize, (f64, f64)> = HashMap::new();
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Finish { index, .. } => {
                if let Some(lp) = log_pred.get(&index) {
                    let resid = split.y_log[index] - lp;
                    window.observe_outcome(resid, issued.get(&index).copied());
                    if predictor.is_after_training(jobs[index].submit_time) {
                        window.remember(resid);
                    }
                }
            }
            TraceEvent::Submit { index, .. } => {
                if let Some(lp) = log_pred.get(&index) {
                    let (a, b) = window.offsets().unwrap_or(predictor.interval_log);
                    let ceiling = runtime_ceiling(jobs[index].requested_time);
                    issued.insert(index, answered_offsets(*lp, (a, b), ceiling));
                    let p = RuntimePrediction::answered(*lp, (a, b), predictor.coverage, ceiling);
                    online_lo[index] = p.lower;
                    online_hi[index] = p.upper;
                }
            }
        }
    }
    let olo = split.test_rows.iter().map(|&i| online_lo[i]).collect();
    let ohi = split.test_rows.iter().map(|&i| online_hi[i]).collect();
    Ok((olo, ohi))
}

/// What the last-2 baseline groups jobs by in `jobs`: user, else VC, else cluster.
fn last_two_key_name(jobs: &[JobRecord]) -> &'static str {
    if jobs.iter().any(|j| j.user.is_some()) {
        "user"
    } else if jobs.iter().any(|j| j.group.is_some()) {
        "VC"
    } else {
        "cluster"
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialise_with_the_old_keys_in_order() {
        let r = row("global median", &[100.0], &[100.0]);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"method":"global median","mae_log":0.0,"within2x":1.0,"coverage80":null,"train_s":null,"predict_us":null}"#
        );
    }

    #[test]
    fn last_two_baseline_sees_only_finished_jobs_of_the_same_user() {
        let job = |user: &str, submit: f64, dur: f64| JobRecord {
            job_id: format!("{user}-{submit}"),
            submit_time: submit,
            duration: Some(dur),
            user: Some(user.into()),
            ..Default::default()
        };
        let jobs = vec![
            job("a", 0.0, 10.0),
            job("a", 5.0, 30.0),
            job("b", 20.0, 1.0),
            job("a", 100.0, 1.0),
        ];
        let b = last_two_baseline(&jobs);
        // job 1 at 5 s: job 0 ends at 10 s, not yet known
        assert_eq!(b[1], None);
        assert_eq!(b[2], None);
        // job 3 at 100 s: both earlier jobs of a have finished (10 s and 35 s)
        assert_eq!(b[3], Some(20.0));
        assert_eq!(last_two_key_name(&jobs), "user");
    }
}
