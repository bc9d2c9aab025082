//! The queue-wait task's evaluation in the shared protocol (time-ordered 80/20 split by
//! submit time) beside the baselines: predict zero, the training median, the median wait of
//! the last 10 jobs that started, and the bare queue simulation; the model with its static,
//! online-adaptive and risk-split bounds, and a hindsight ceiling.

use std::time::Instant;

use augur_datasets::{JobRecord, TimeSplit};
use augur_models::gbdt::{GbdtParams, Objective};
use augur_models::{AnyModel, Matrix, Predict, TrainSet};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::data::{known_wait, QueueWaitData};
use super::predictor::{QueueWaitPrediction, QueueWaitPredictor};
use super::state::{ResourceKind, RECENT_WAIT_FEATURE, SIM_PRED_FEATURE};
use super::trainer::QueueWaitTrainer;
use crate::calibration::{AdaptiveBound, RiskGroup, RiskSplitSummary};
use crate::evaluation::{Evaluation, MethodRow};
use crate::feature_rows::gather;
use crate::metrics::{
    bound_metrics, mae_log10, quantile, wait_errors, within2x, CoverageGroups, GroupCoverage,
};
use crate::runtime::RuntimePredictor;
use crate::PredictorError;

/// The metrics of one method in a [`QueueWaitEvaluation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitMetrics {
    /// Mean absolute error, seconds.
    pub mae_s: f64,
    /// Share of jobs predicted within 60 s / 600 s of the actual wait.
    pub within60: f64,
    pub within600: f64,
    /// Share of test jobs whose wait is at most the 95% bound (methods with a bound).
    pub coverage95: Option<f64>,
    /// Median of the bound over test jobs, seconds.
    pub median_bound_s: Option<f64>,
    pub train_s: Option<f64>,
    pub predict_us: Option<f64>,
    /// Share of jobs predicted within a factor of two of the actual wait, and the mean
    /// |log10 error| (decades), both with waits floored at 1 s ([`mae_log10`]); `None` for
    /// rows without point predictions of their own (peers, the hindsight bound).
    #[serde(default)]
    pub within2x: Option<f64>,
    #[serde(default)]
    pub mae_log10: Option<f64>,
}

/// One row of the queue-wait evaluation table.
pub type WaitEvalRow = MethodRow<WaitMetrics>;

/// The result of [`evaluate_queue_wait`].
#[derive(Debug, Clone, Serialize)]
pub struct QueueWaitEvaluation {
    pub n_train: usize,
    pub n_test: usize,
    pub resource: ResourceKind,
    pub capacity: f64,
    pub rows: Vec<WaitEvalRow>,
    /// Test-set actual waits and the model's predictions (for plots).
    #[serde(skip)]
    pub test_actual: Vec<f64>,
    #[serde(skip)]
    pub test_pred: Vec<QueueWaitPrediction>,
    /// The risk-split bound per group (calibration threshold and offsets), when fitted.
    pub risk_split_static: Option<RiskSplitSummary>,
    /// The same bound run online over the test period from its deployment state.
    pub risk_split_online: Option<RiskSplitSummary>,
    /// Coverage of the served bound per group of test jobs (partition, GPU or CPU, size):
    /// static (the risk split's calibration threshold and offsets, else the single offset)
    /// and online (the risk split run online, else the online adaptive bound).
    pub coverage_by_group: Vec<GroupCoverage>,
}

impl Evaluation for QueueWaitEvaluation {
    type Metrics = WaitMetrics;
    fn rows(&self) -> &[WaitEvalRow] {
        &self.rows
    }
}

/// A trace cut by the shared protocol's time-ordered split, with what the queue-wait task
/// trains and scores on: the [`QueueWaitData`] (everything learned from the training
/// period) and the labelled (known wait) rows of each side.
pub struct QueueWaitSplit {
    pub data: QueueWaitData,
    /// Labelled training rows, in submit order.
    pub train_rows: Vec<usize>,
    /// Labelled test rows, in submit order.
    pub test_rows: Vec<usize>,
}

impl QueueWaitSplit {
    /// Splits `jobs` and builds the data (runtime predictor, capacity, features) from the
    /// training period. Jobs without a known wait feed the queue state but are neither
    /// trained on nor scored. Refuses a split with under 200 labelled training jobs or no
    /// test job.
    pub fn build(
        jobs: &[JobRecord],
        trainer: &QueueWaitTrainer,
    ) -> Result<QueueWaitSplit, PredictorError> {
        Self::build_reusing(jobs, trainer, None)
    }

    /// [`QueueWaitSplit::build`] with the run-time model `trained` by `trainer.runtime` on
    /// the same jobs (see [`QueueWaitData::build_reusing`]).
    pub fn build_reusing(
        jobs: &[JobRecord],
        trainer: &QueueWaitTrainer,
        trained: Option<&RuntimePredictor>,
    ) -> Result<QueueWaitSplit, PredictorError> {
        let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
        let split = TimeSplit::default_for(&submit);
        let labelled = |rows: &[usize]| -> Vec<usize> {
            rows.iter()
                .copied()
                .filter(|&i| known_wait(&jobs[i]).is_some())
                .collect()
        };
        let train_rows = labelled(split.train());
        let test_rows = labelled(split.test());
        if train_rows.len() < 200 || test_rows.is_empty() {
            return Err(PredictorError::not_enough(
                "jobs with a known queue wait",
                format!(
                    "{} training and {} test jobs with a known queue wait",
                    train_rows.len(),
                    test_rows.len()
                ),
            ));
        }
        Ok(QueueWaitSplit {
            data: QueueWaitData::build_reusing(
                jobs,
                split.train(),
                &trainer.runtime,
                trainer.capacity_quantile,
                trained,
            )?,
            train_rows,
            test_rows,
        })
    }
}

/// Evaluates the queue-wait predictor and the baselines on the time-ordered 80/20 split of
/// `jobs` (by submit time). Jobs without a known wait feed the queue state but are neither
/// trained on nor scored.
pub fn evaluate_queue_wait(
    jobs: &[JobRecord],
    trainer: &QueueWaitTrainer,
) -> Result<QueueWaitEvaluation, PredictorError> {
    train_and_evaluate_queue_wait(jobs, trainer).map(|(_, eval)| eval)
}

/// The evaluation of [`evaluate_queue_wait`] and the predictor it trained (for
/// `augur train`, which saves that predictor: one training, not two). Every row, the
/// hindsight bound's too.
pub fn train_and_evaluate_queue_wait(
    jobs: &[JobRecord],
    trainer: &QueueWaitTrainer,
) -> Result<(QueueWaitPredictor, QueueWaitEvaluation), PredictorError> {
    let run = QueueWaitRun {
        hindsight: true,
        ..QueueWaitRun::default()
    };
    train_and_evaluate_queue_wait_with(jobs, trainer, run)
}

/// How [`train_and_evaluate_queue_wait_with`] trains and what it scores.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueWaitRun<'a> {
    /// The run-time model the trainer's `runtime` trained on the same jobs (the runtime
    /// kind's, trained beside this one), used instead of training it again; see
    /// [`QueueWaitData::build_reusing`].
    pub runtime: Option<&'a RuntimePredictor>,
    /// Score the model's own rows only, leaving out the baselines and the hindsight bound:
    /// what a retrain that stores the model's metrics needs.
    pub model_only: bool,
    /// Add the hindsight bound's row (five more fits, on the test period: how sharp a
    /// bound the features allow without drift), unless `model_only`.
    pub hindsight: bool,
}

/// [`train_and_evaluate_queue_wait`] as `run` says.
pub fn train_and_evaluate_queue_wait_with(
    jobs: &[JobRecord],
    trainer: &QueueWaitTrainer,
    run: QueueWaitRun<'_>,
) -> Result<(QueueWaitPredictor, QueueWaitEvaluation), PredictorError> {
    let t0 = Instant::now();
    let split = QueueWaitSplit::build_reusing(jobs, trainer, run.runtime)?;
    let predictor = trainer.train(&split.data, &split.train_rows)?;
    let train_s = t0.elapsed().as_secs_f64();
    let rows = match (run.model_only, run.hindsight) {
        (true, _) => Rows::ModelOnly,
        (false, false) => Rows::WithBaselines,
        (false, true) => Rows::WithHindsight,
    };
    let eval = score(jobs, &split, &predictor, trainer, train_s, rows)?;
    Ok((predictor, eval))
}

fn row(method: &str, pred: &[f64], actual: &[f64]) -> WaitEvalRow {
    let (mae_s, within60, within600) = wait_errors(pred, actual);
    MethodRow::new(
        method,
        WaitMetrics {
            mae_s,
            within60,
            within600,
            coverage95: None,
            median_bound_s: None,
            train_s: None,
            predict_us: None,
            within2x: Some(within2x(pred, actual)),
            mae_log10: Some(mae_log10(pred, actual)),
        },
    )
}

/// A row of the model's point predictions `p` with the bound `(coverage, median bound)`.
fn bound_row(method: &str, p: &[f64], actual: &[f64], bound: (f64, f64)) -> WaitEvalRow {
    let mut r = row(method, p, actual);
    r.metrics.coverage95 = Some(bound.0);
    r.metrics.median_bound_s = Some(bound.1);
    r
}

/// The same row with the training and prediction times.
fn timed(mut r: WaitEvalRow, train_s: f64, predict_us: f64) -> WaitEvalRow {
    r.metrics.train_s = Some(train_s);
    r.metrics.predict_us = Some(predict_us);
    r
}

/// Scores an already-trained `predictor` (trained by `trainer` on `split`) on the test rows
/// beside the baselines and the hindsight bound. `train_s` is reported as the training
/// time (features + fit).
pub fn score_queue_wait(
    jobs: &[JobRecord],
    split: &QueueWaitSplit,
    predictor: &QueueWaitPredictor,
    trainer: &QueueWaitTrainer,
    train_s: f64,
) -> Result<QueueWaitEvaluation, PredictorError> {
    score(
        jobs,
        split,
        predictor,
        trainer,
        train_s,
        Rows::WithHindsight,
    )
}

/// Which rows [`score`] computes besides the model's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rows {
    ModelOnly,
    WithBaselines,
    WithHindsight,
}

/// [`score_queue_wait`] with the rows `rows` says.
fn score(
    jobs: &[JobRecord],
    split: &QueueWaitSplit,
    predictor: &QueueWaitPredictor,
    trainer: &QueueWaitTrainer,
    train_s: f64,
    rows_wanted: Rows,
) -> Result<QueueWaitEvaluation, PredictorError> {
    let model_only = rows_wanted == Rows::ModelOnly;
    let (data, test_rows) = (&split.data, &split.test_rows);
    let wait = |i: usize| known_wait(&jobs[i]).unwrap_or(0.0);
    let actual: Vec<f64> = test_rows.iter().map(|&i| wait(i)).collect();
    let mut rows = if model_only {
        Vec::new()
    } else {
        baseline_rows(jobs, split, &actual)
    };

    let d = data.n_features;
    let tx = gather(&data.x, d, test_rows);
    let tm = Matrix::new(&tx, test_rows.len(), d)?;
    let t1 = Instant::now();
    let preds = predictor.predict_batch(&tm)?;
    let predict_us = t1.elapsed().as_secs_f64() * 1e6 / test_rows.len() as f64;
    let p: Vec<f64> = preds.iter().map(|p| p.seconds).collect();
    // the single conformal offset (the served bound is the risk split when there is one)
    let raw_test = predictor.upper_raw(&tm)?;
    let u: Vec<f64> = raw_test
        .iter()
        .zip(&p)
        .map(|(r, p)| predictor.cap_bound((r + predictor.upper_offset).exp_m1(), *p))
        .collect();
    let method = "augur gbdt + queue state, static conformal";
    let r = bound_row(method, &p, &actual, bound_metrics(&u, &actual));
    rows.push(timed(r, train_s, predict_us));
    let u_online = adaptive_bounds(jobs, split, predictor, trainer, &p)?;
    // the served bounds, static and online, for the per-group coverage
    let mut served = (u.clone(), u_online.clone());
    let method = "augur gbdt + queue state, online adaptive";
    let r = bound_row(method, &p, &actual, bound_metrics(&u_online, &actual));
    rows.push(timed(r, train_s, predict_us));

    // risk-split bound: offline (calibration threshold and offsets, what `predict_row`
    // serves without an online state) and online from its deployment state over the test
    // period, each group's offset following its own outcomes
    let mut risk_split_static = None;
    let mut risk_split_online = None;
    if let (Some(r), Some(scores), Some(mut state)) = (
        &predictor.risk,
        predictor.risk_scores(&tm)?,
        predictor.new_risk_state(),
    ) {
        let u_static: Vec<f64> = preds.iter().map(|p| p.upper).collect();
        served.0.clone_from(&u_static);
        let g_static: Vec<RiskGroup> = preds
            .iter()
            .map(|p| p.risk_group.unwrap_or(RiskGroup::High))
            .collect();
        let m = RiskSplitSummary::measure(r, &u_static, &g_static, &actual);
        let method = "augur gbdt + queue state, risk-split static";
        rows.push(bound_row(
            method,
            &p,
            &actual,
            (m.coverage, m.median_bound_s),
        ));
        risk_split_static = Some(m);
        let test_jobs: Vec<(f64, f64, f64, f64)> = test_rows
            .iter()
            .zip(&raw_test)
            .zip(&scores)
            .map(|((&i, &u), &s)| (jobs[i].submit_time, wait(i), u, s))
            .collect();
        let out = state.replay(&test_jobs);
        let u_on: Vec<f64> = out
            .iter()
            .zip(&p)
            .map(|((b, _), p)| predictor.cap_bound(b.exp_m1(), *p))
            .collect();
        let g_on: Vec<RiskGroup> = out.iter().map(|(_, g)| *g).collect();
        served.1.clone_from(&u_on);
        let m = RiskSplitSummary::measure(r, &u_on, &g_on, &actual);
        let method = "augur gbdt + queue state, risk-split online";
        let r = bound_row(method, &p, &actual, (m.coverage, m.median_bound_s));
        rows.push(timed(r, train_s, predict_us));
        risk_split_online = Some(m);
    }

    if rows_wanted == Rows::WithHindsight {
        let u_hind = hindsight_bounds(&tx, d, &actual, trainer)?;
        let method = "hindsight: 95% quantile trees fit on test period, 5-fold";
        let mut hind = bound_row(method, &p, &actual, bound_metrics(&u_hind, &actual));
        hind.metrics.mae_s = f64::NAN;
        hind.metrics.within60 = f64::NAN;
        hind.metrics.within600 = f64::NAN;
        hind.metrics.within2x = None;
        hind.metrics.mae_log10 = None;
        rows.push(hind);
    }

    let inside = |u: &[f64]| -> Vec<bool> { u.iter().zip(&actual).map(|(u, a)| a <= u).collect() };
    let groups = CoverageGroups::from_jobs(split.train_rows.iter().map(|&i| &jobs[i]));
    let test_jobs: Vec<&JobRecord> = test_rows.iter().map(|&i| &jobs[i]).collect();
    let coverage_by_group = groups.coverage(&test_jobs, &inside(&served.0), &inside(&served.1));
    Ok(QueueWaitEvaluation {
        n_train: split.train_rows.len(),
        n_test: test_rows.len(),
        resource: data.resource,
        capacity: data.capacity,
        rows,
        test_actual: actual,
        test_pred: preds,
        risk_split_static,
        risk_split_online,
        coverage_by_group,
    })
}

/// The baselines' rows: predict zero, the training median, the median wait of the last 10
/// jobs started (else the training median), the queue simulation.
fn baseline_rows(jobs: &[JobRecord], split: &QueueWaitSplit, actual: &[f64]) -> Vec<WaitEvalRow> {
    let data = &split.data;
    let (d, h) = (data.n_features, data.runtime.schema.len());
    let wait = |i: usize| known_wait(&jobs[i]).unwrap_or(0.0);
    let mut rows = Vec::new();
    rows.push(row("predict zero", &vec![0.0; actual.len()], actual));
    let train_w: Vec<f64> = split.train_rows.iter().map(|&i| wait(i)).collect();
    let median = quantile(&train_w, 0.5);
    rows.push(row("global median", &vec![median; actual.len()], actual));
    let feat = |i: usize, f: usize| data.x[i * d + h + f];
    let recent: Vec<f64> = split
        .test_rows
        .iter()
        .map(|&i| {
            let v = f64::from(feat(i, RECENT_WAIT_FEATURE));
            if v.is_finite() {
                v
            } else {
                median
            }
        })
        .collect();
    rows.push(row("median wait of last 10 started", &recent, actual));
    let sim: Vec<f64> = split
        .test_rows
        .iter()
        .map(|&i| f64::from(feat(i, SIM_PRED_FEATURE)).max(0.0))
        .collect();
    rows.push(row(
        "queue simulation (FCFS+backfill, predicted run times)",
        &sim,
        actual,
    ));
    rows
}

/// The online adaptive bound (seconds) of each test job: the offset follows the outcomes
/// known at each submit, starting at the static offset on the calibration slice.
fn adaptive_bounds(
    jobs: &[JobRecord],
    split: &QueueWaitSplit,
    predictor: &QueueWaitPredictor,
    trainer: &QueueWaitTrainer,
    p: &[f64],
) -> Result<Vec<f64>, PredictorError> {
    let (data, train_rows) = (&split.data, &split.train_rows);
    let d = data.n_features;
    let n_cal = ((train_rows.len() as f64) * trainer.calib_fraction) as usize;
    let cal_rows = &train_rows[train_rows.len() - n_cal..];
    let pool_rows: Vec<usize> = cal_rows.iter().chain(&split.test_rows).copied().collect();
    let px = gather(&data.x, d, &pool_rows);
    let pm = Matrix::new(&px, pool_rows.len(), d)?;
    let raw = predictor.upper_raw(&pm)?;
    let pool: Vec<(f64, f64, f64)> = pool_rows
        .iter()
        .zip(&raw)
        .map(|(&i, &r)| (jobs[i].submit_time, known_wait(&jobs[i]).unwrap_or(0.0), r))
        .collect();
    let mut adaptive = AdaptiveBound::new(
        predictor.upper_offset,
        trainer.adaptive_step,
        trainer.coverage,
    )
    .with_ceiling(predictor.wait_ceiling_s);
    let bounds = adaptive.replay(&pool);
    Ok(bounds[cal_rows.len()..]
        .iter()
        .zip(p)
        .map(|(b, p)| predictor.cap_bound(b.exp_m1(), *p))
        .collect())
}

/// Hindsight ceiling (not a forecast): the same bound model fitted on the test period
/// itself, 5-fold (every fifth test job held out in turn), shows how sharp a 95% bound
/// these features allow when there is no drift between training and test periods. Returns
/// each test job's bound (seconds); `tx` holds the test rows' features (`d` columns).
fn hindsight_bounds(
    tx: &[f32],
    d: usize,
    actual: &[f64],
    trainer: &QueueWaitTrainer,
) -> Result<Vec<f64>, PredictorError> {
    let n = actual.len();
    let mut u_hind = vec![0.0; n];
    let folds = 5;
    let hind_params = GbdtParams {
        objective: Objective::Quantile {
            alpha: trainer.coverage,
        },
        n_trees: trainer.upper.n_trees.min(200),
        ..trainer.upper.clone()
    };
    // the folds are fitted side by side: each fit is deterministic, so the bounds are the
    // ones fitted one after another
    let fold_bounds = (0..folds)
        .into_par_iter()
        .map(|f| -> Result<(Vec<usize>, Vec<f64>), PredictorError> {
            let (inn, out): (Vec<usize>, Vec<usize>) = (0..n).partition(|k| k % folds != f);
            let ix = gather(tx, d, &inn);
            let iy: Vec<f64> = inn.iter().map(|&k| actual[k].ln_1p()).collect();
            let train = TrainSet::new(Matrix::new(&ix, inn.len(), d)?, &iy, None)?;
            let m = AnyModel::Gbdt(hind_params.fit_with_validation(&train, None)?);
            let ox = gather(tx, d, &out);
            let mut ou = vec![0.0; out.len()];
            m.predict_into(&Matrix::new(&ox, out.len(), d)?, &mut ou)?;
            Ok((out, ou))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (out, ou) in fold_bounds {
        for (k, v) in out.iter().zip(ou) {
            u_hind[*k] = v.exp_m1().max(0.0);
        }
    }
    Ok(u_hind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialise_with_the_old_keys_in_order() {
        let r = bound_row("queue", &[0.0], &[30.0], (1.0, 60.0));
        let json = serde_json::to_string(&timed(r, 2.0, 5.0)).unwrap();
        assert_eq!(
            json,
            r#"{"method":"queue","mae_s":30.0,"within60":1.0,"within600":1.0,"coverage95":1.0,"median_bound_s":60.0,"train_s":2.0,"predict_us":5.0,"within2x":0.0,"mae_log10":1.4771212547196624}"#
        );
    }
}
