//! The DAG evaluation: grouped k-fold cross-validation of the GRU model and the baselines
//! (per-stage medians, per-stage GBDT), each with and without the makespan correction.

use std::time::Instant;

use augur_datasets::dag::DagJob;
use augur_models::Predict;
use serde::{Deserialize, Serialize};

use super::baseline::StageMedians;
use super::encoder::DagEncoder;
use super::folds::group_folds;
use super::makespan::{actual_makespan_s, correction_row, stage_targets, MakespanCorrection};
use super::trainer::{fit_correction, prepare};
use super::{DagPredictor, DagTrainer};
use crate::evaluation::{Evaluation, MethodRow};
use crate::metrics::{mae_log, within2x};
use crate::PredictorError;

/// One method's metrics in the evaluation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagMetrics {
    pub makespan_mae_log: f64,
    pub makespan_within2x: f64,
    /// `None` for rows that share another row's stage predictions.
    pub stage_mae_log: Option<f64>,
    pub stage_within2x: Option<f64>,
    /// Mean training seconds per fold.
    pub train_s: Option<f64>,
    /// Prediction time per job (encoding + model + critical path), µs.
    pub predict_us: Option<f64>,
}

/// One method's row of the evaluation table.
pub type DagEvalRow = MethodRow<DagMetrics>;

/// Makespans of one test job.
#[derive(Debug, Clone, Serialize)]
pub struct DagJobResult {
    pub job: String,
    pub group: String,
    pub fold: usize,
    pub stages: usize,
    pub actual_makespan_s: f64,
    /// Predicted makespan per method, in the order of [`DagEvaluation::rows`].
    pub predicted_makespan_s: Vec<f64>,
}

/// Result of [`evaluate_dag`].
#[derive(Debug, Clone, Serialize)]
pub struct DagEvaluation {
    pub dataset: String,
    /// How jobs were split (for the report).
    pub split: String,
    pub folds: usize,
    pub jobs: usize,
    pub groups: usize,
    pub stages: usize,
    pub rows: Vec<DagEvalRow>,
    /// Per test job, with the fold it was tested in.
    pub results: Vec<DagJobResult>,
    /// Index in `rows` of Augur's model (GRU + correction).
    pub model_row: usize,
    /// GRU epochs trained per fold.
    pub gru_epochs: usize,
}

impl Evaluation for DagEvaluation {
    type Metrics = DagMetrics;
    fn rows(&self) -> &[DagEvalRow] {
        &self.rows
    }
}

const METHODS: [&str; 6] = [
    "critical path of per-stage-type medians",
    "per-stage GBDT, critical path",
    "per-stage medians + makespan correction",
    "per-stage GBDT + makespan correction",
    "augur GRU, critical path only",
    "augur GRU + makespan correction",
];

/// Grouped k-fold evaluation of the GRU model and the baselines on `jobs`; `groups[i]` is
/// the group of `jobs[i]` (held out together). `progress(fold, folds)` after each fold.
pub fn evaluate_dag(
    dataset: &str,
    jobs: &[DagJob],
    groups: &[String],
    trainer: &DagTrainer,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<DagEvaluation, PredictorError> {
    if jobs.len() != groups.len() {
        return Err(PredictorError::not_enough(
            "DAG jobs",
            format!("{} jobs but {} group labels", jobs.len(), groups.len()),
        ));
    }
    let fold_of = group_folds(groups, trainer.folds, trainer.split_seed);
    let folds = trainer.folds.min(fold_of.len());
    if folds < 2 {
        return Err(PredictorError::not_enough(
            "DAG jobs",
            format!(
                "{dataset}: {} group(s); grouped cross-validation needs at least 2",
                fold_of.len()
            ),
        ));
    }
    let mut acc = Tally::new(jobs.len());
    for fold in 0..folds {
        let (train_idx, test_idx): (Vec<usize>, Vec<usize>) =
            (0..jobs.len()).partition(|&i| fold_of.get(&groups[i]).copied() != Some(fold));
        if test_idx.is_empty() || train_idx.is_empty() {
            continue;
        }
        let train: Vec<DagJob> = train_idx.iter().map(|&i| jobs[i].clone()).collect();
        let train_groups: Vec<String> = train_idx.iter().map(|&i| groups[i].clone()).collect();
        let models = FoldModels::fit(dataset, trainer, &train, &train_groups, &mut acc)?;
        for &i in &test_idx {
            let result = models.predict(&jobs[i], &mut acc)?;
            acc.results.push(DagJobResult {
                group: groups[i].clone(),
                fold,
                ..result
            });
        }
        progress(fold + 1, folds);
    }
    let rows = acc.rows(folds);
    let mut distinct: Vec<&String> = groups.iter().collect();
    distinct.sort();
    distinct.dedup();
    Ok(DagEvaluation {
        dataset: dataset.to_string(),
        split: format!(
            "grouped {folds}-fold cross-validation: {} groups dealt to folds after a shuffle with seed {}; every job predicted by models trained on the other folds",
            distinct.len(),
            trainer.split_seed
        ),
        folds,
        jobs: acc.results.len(),
        groups: distinct.len(),
        stages: acc.stage_actual.len(),
        rows,
        results: acc.results,
        model_row: 5,
        gru_epochs: acc.gru_epochs,
    })
}

/// What the folds have produced so far.
struct Tally {
    results: Vec<DagJobResult>,
    /// Stage predictions and actuals (seconds) per stage-level method: medians, GBDT, GRU.
    stage_pred: [Vec<f64>; 3],
    stage_actual: Vec<f64>,
    /// Seconds of training and prediction per method, summed over folds.
    train_s: [f64; 6],
    predict_s: [f64; 6],
    /// GRU epochs of the last fold.
    gru_epochs: usize,
}

impl Tally {
    fn new(jobs: usize) -> Tally {
        Tally {
            results: Vec::with_capacity(jobs),
            stage_pred: [Vec::new(), Vec::new(), Vec::new()],
            stage_actual: Vec::new(),
            train_s: [0.0; 6],
            predict_s: [0.0; 6],
            gru_epochs: 0,
        }
    }

    /// Adds `seconds` to the training time of methods `a` and `b`.
    fn train(&mut self, (a, b): (usize, usize), seconds: f64) {
        self.train_s[a] += seconds;
        self.train_s[b] += seconds;
    }

    /// Adds `seconds` to the prediction time of methods `a` and `b`.
    fn predicted(&mut self, (a, b): (usize, usize), seconds: f64) {
        self.predict_s[a] += seconds;
        self.predict_s[b] += seconds;
    }

    /// One row per method (training time per fold, prediction time per job).
    fn rows(&self, folds: usize) -> Vec<DagEvalRow> {
        let actual: Vec<f64> = self.results.iter().map(|r| r.actual_makespan_s).collect();
        let n_jobs = self.results.len().max(1) as f64;
        (0..METHODS.len())
            .map(|k| {
                let pred: Vec<f64> = self
                    .results
                    .iter()
                    .map(|r| r.predicted_makespan_s[k])
                    .collect();
                let stage = match k {
                    0 => Some(0),
                    1 => Some(1),
                    4 => Some(2),
                    _ => None,
                };
                let (sp, sa) = (&self.stage_pred, &self.stage_actual);
                let metrics = DagMetrics {
                    makespan_mae_log: mae_log(&pred, &actual),
                    makespan_within2x: within2x(&pred, &actual),
                    stage_mae_log: stage.map(|s| mae_log(&sp[s], sa)),
                    stage_within2x: stage.map(|s| within2x(&sp[s], sa)),
                    train_s: Some(self.train_s[k] / folds as f64),
                    predict_us: Some(1e6 * self.predict_s[k] / n_jobs),
                };
                MethodRow::new(METHODS[k], metrics)
            })
            .collect()
    }
}

/// The models of one fold: the per-stage medians, the GBDT base and the GRU predictor, the
/// baselines' makespan corrections.
struct FoldModels {
    encoder: DagEncoder,
    medians: StageMedians,
    med_corr: MakespanCorrection,
    gb_corr: MakespanCorrection,
    predictor: DagPredictor,
}

impl FoldModels {
    /// Fits every method on the fold's training jobs, timing each into `acc`.
    fn fit(
        dataset: &str,
        trainer: &DagTrainer,
        train: &[DagJob],
        train_groups: &[String],
        acc: &mut Tally,
    ) -> Result<FoldModels, PredictorError> {
        // shared encoding of the training jobs
        let t0 = Instant::now();
        let encoder = DagEncoder::fit(train, trainer.gru.n_buckets);
        let prep = prepare(&encoder, train)?;
        let encode_s = t0.elapsed().as_secs_f64();
        // medians
        let t = Instant::now();
        let medians = StageMedians::fit(train, &prep);
        let med_train: Vec<Vec<f64>> = train
            .iter()
            .zip(&prep.enc)
            .map(|(j, e)| medians.predict(j, e))
            .collect();
        let med_corr = fit_correction(train, &prep, &med_train)?;
        acc.train((0, 2), t.elapsed().as_secs_f64() + encode_s);
        // GRU on the OOF GBDT base; the GBDT baseline is the same full-data GBDT, its
        // correction fitted on the same out-of-fold predictions
        let (predictor, extras) =
            trainer.fit_prepared(dataset, train, train_groups, encoder.clone(), &prep)?;
        let t = Instant::now();
        let gb_corr = fit_correction(train, &prep, &extras.oof_base)?;
        acc.train((1, 3), extras.gbdt_s + t.elapsed().as_secs_f64() + encode_s);
        acc.gru_epochs = predictor.stage_model.epochs();
        acc.train((4, 5), extras.gbdt_s + extras.gru_s + encode_s);
        Ok(FoldModels {
            encoder,
            medians,
            med_corr,
            gb_corr,
            predictor,
        })
    }

    /// Every method's makespan of a test job (its group and fold left for the caller);
    /// adds its stage predictions and actuals and the prediction times to `acc`.
    fn predict(&self, job: &DagJob, acc: &mut Tally) -> Result<DagJobResult, PredictorError> {
        let actual =
            actual_makespan_s(job).ok_or_else(|| PredictorError::MissingStageDuration {
                job: job.id.clone(),
                stage: "(makespan)".into(),
            })?;
        let mut made = vec![0.0f64; METHODS.len()];
        // medians
        let t = Instant::now();
        let enc = self.encoder.encode(job)?;
        let truth = stage_targets(job, &enc)?;
        let med = self.medians.predict(job, &enc);
        let med_secs: Vec<f64> = med.iter().map(|v| v.exp()).collect();
        let med_row = correction_row(job, &enc, &med_secs);
        made[0] = f64::from(med_row[0]).exp();
        made[2] = self.med_corr.apply(&med_row);
        acc.predicted((0, 2), t.elapsed().as_secs_f64());
        // gbdt
        let t = Instant::now();
        let enc_g = self.encoder.encode(job)?;
        let gbdt = &self.predictor.base;
        let gb: Vec<f64> = (0..enc_g.len())
            .map(|t| gbdt.predict_row(enc_g.row(t)))
            .collect();
        let gb_secs: Vec<f64> = gb.iter().map(|v| v.exp()).collect();
        let gb_row = correction_row(job, &enc_g, &gb_secs);
        made[1] = f64::from(gb_row[0]).exp();
        made[3] = self.gb_corr.apply(&gb_row);
        acc.predicted((1, 3), t.elapsed().as_secs_f64());
        // gru
        let t = Instant::now();
        let p = self.predictor.predict(job)?;
        acc.predicted((4, 5), t.elapsed().as_secs_f64());
        made[4] = p.critical_path_s;
        made[5] = p.makespan_s;
        let gru_ln: Vec<f64> = enc.order.iter().map(|&i| p.stage_seconds[i].ln()).collect();
        for (k, preds) in [&med, &gb, &gru_ln].into_iter().enumerate() {
            acc.stage_pred[k].extend(preds.iter().map(|v| v.exp()));
        }
        acc.stage_actual.extend_from_slice(&truth);
        Ok(DagJobResult {
            job: job.id.clone(),
            group: String::new(),
            fold: 0,
            stages: job.stages.len(),
            actual_makespan_s: actual,
            predicted_makespan_s: made,
        })
    }
}
