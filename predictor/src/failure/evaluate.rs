//! The failure evaluation: the shared time-ordered split, the three candidates (SVM, GBDT,
//! calibrated past rate) and two trivial baselines scored on the labelled test jobs.

use std::time::Instant;

use augur_datasets::JobRecord;
use augur_models::Predict;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::past_rate::{key_label, PastRate};
use super::svm::SvmScratch;
use super::{
    CandidateScores, FailureData, FailureModel, FailurePrediction, FailurePredictor,
    FailureTrainer, TrainingInfo, RECALL_AT_FPR,
};
use crate::evaluation::{Evaluation, MethodRow};
use crate::feature_rows::gather;
use crate::metrics::classification::{
    average_precision, brier, expected_calibration_error, recall_at_fpr, roc_auc, roc_auc_interval,
};
use crate::PredictorError;

/// One method's metrics on the test jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureMetrics {
    pub roc_auc: f64,
    /// 95% bootstrap interval of the ROC-AUC.
    pub roc_auc_95: Option<(f64, f64)>,
    /// Average precision (its no-skill value is the test base rate).
    pub pr_auc: f64,
    /// Recall at a 10% false-positive rate.
    pub recall_at_10fpr: f64,
    pub brier: f64,
    /// Expected calibration error (10 bins).
    pub ece: f64,
    pub train_s: Option<f64>,
    /// Microseconds to predict one job from its feature row: timed one job after another
    /// on one thread over the first test jobs (as a request pays it), though the
    /// evaluation scores the test jobs on every core.
    pub predict_us: Option<f64>,
}

/// A row of the failure evaluation.
pub type FailureEvalRow = MethodRow<FailureMetrics>;

/// A method's test probabilities (for curves in reports).
#[derive(Debug, Clone)]
pub struct MethodProbabilities {
    pub method: String,
    pub probs: Vec<f64>,
}

/// The failure evaluation of one trace.
#[derive(Debug, Clone, Serialize)]
pub struct FailureEvaluation {
    /// Labelled training / test jobs.
    pub n_train: usize,
    pub n_test: usize,
    /// Jobs in the trace without a known outcome (censored or no status), not labelled.
    pub n_censored: usize,
    pub base_rate_train: f64,
    pub base_rate_test: f64,
    pub failed_test: usize,
    pub rows: Vec<FailureEvalRow>,
    /// The model the predictor serves, and why.
    pub served: FailureModel,
    /// ROC-AUC of (SVM, GBDT) on the calibration slice.
    pub validation_auc: (f64, f64),
    /// Each candidate's ROC-AUC on the calibration slice (how `served` was chosen).
    pub validation_roc_auc: Option<CandidateScores>,
    /// Each candidate's PR-AUC on the calibration slice.
    pub validation_pr_auc: Option<CandidateScores>,
    /// ROC-AUC of the (SVM, GBDT) raw scores on the test jobs, before calibration (a flat
    /// calibration, fitted when a model ranked the slice backwards, hides their ranking).
    pub raw_test_auc: (f64, f64),
    pub gbdt_calibration: String,
    pub svm_calibration: String,
    /// The past-rate candidate's key and calibration, e.g. `user: isotonic(12 steps)`.
    pub past_rate_calibration: Option<String>,
    pub svm_support_vectors: usize,
    pub gbdt_trees: usize,
    pub training: TrainingInfo,
    /// Outcome of each test job, in submit order.
    #[serde(skip)]
    pub test_labels: Vec<bool>,
    /// Each method's test probabilities, in the order of `rows`.
    #[serde(skip)]
    pub test_probs: Vec<MethodProbabilities>,
}

impl Evaluation for FailureEvaluation {
    type Metrics = FailureMetrics;
    fn rows(&self) -> &[FailureEvalRow] {
        &self.rows
    }
}

/// Method names in evaluation tables.
pub const METHOD_BASE_RATE: &str = "base rate (training period)";
pub const METHOD_SVM: &str = "augur svm (class-weighted, rbf)";
pub const METHOD_GBDT: &str = "augur gbdt (log-loss)";
pub const METHOD_PAST_RATE: &str = "augur past failure rate (calibrated)";

/// The shared protocol on `jobs`: time-ordered 80/20 split of all jobs by submit time; the
/// labelled jobs of the first part train, those of the second are scored.
pub fn evaluate_failure(
    jobs: &[JobRecord],
    trainer: &FailureTrainer,
) -> Result<FailureEvaluation, PredictorError> {
    train_and_evaluate_failure(jobs, trainer).map(|(_, eval)| eval)
}

/// The evaluation of [`evaluate_failure`] and the predictor it trained (for `augur train`,
/// which saves that predictor: one training, not two).
pub fn train_and_evaluate_failure(
    jobs: &[JobRecord],
    trainer: &FailureTrainer,
) -> Result<(FailurePredictor, FailureEvaluation), PredictorError> {
    let data = FailureData::new(jobs)?;
    let predictor = trainer.train(&data)?;
    let eval = score_failure(&data, &predictor);
    Ok((predictor, eval))
}

/// Rows and test probabilities of an evaluation, filled method by method.
#[derive(Default)]
struct Scored {
    rows: Vec<FailureEvalRow>,
    probs: Vec<MethodProbabilities>,
}

impl Scored {
    fn push(
        &mut self,
        method: String,
        p: Vec<f64>,
        test_y: &[bool],
        train_s: Option<f64>,
        predict_us: Option<f64>,
    ) {
        let metrics = FailureMetrics {
            roc_auc: roc_auc(&p, test_y),
            roc_auc_95: roc_auc_interval(&p, test_y, 300),
            pr_auc: average_precision(&p, test_y),
            recall_at_10fpr: recall_at_fpr(&p, test_y, RECALL_AT_FPR),
            brier: brier(&p, test_y),
            ece: expected_calibration_error(&p, test_y),
            train_s,
            predict_us,
        };
        self.rows.push(MethodRow::new(method.clone(), metrics));
        self.probs.push(MethodProbabilities { method, probs: p });
    }
}

/// Scores a predictor trained on `data`'s training jobs on its test jobs, beside the two
/// baselines (so `augur train` evaluates the model it saves without training twice).
pub fn score_failure(data: &FailureData<'_>, predictor: &FailurePredictor) -> FailureEvaluation {
    let (train_rows, test_rows) = (&data.train_rows, &data.test_rows);
    let test_y: Vec<bool> = test_rows.iter().map(|&i| data.label(i)).collect();
    let base_rate_train =
        train_rows.iter().filter(|&&i| data.label(i)).count() as f64 / train_rows.len() as f64;
    let failed_test = test_y.iter().filter(|&&l| l).count();
    let base_rate_test = failed_test as f64 / test_y.len() as f64;
    let mut scored = Scored::default();
    push_baselines(&mut scored, data, &test_y, base_rate_train);
    let raw_test_auc = push_models(&mut scored, data, predictor, &test_y);
    let (svm_sv, trees) = predictor.sizes();
    FailureEvaluation {
        raw_test_auc,
        n_train: train_rows.len(),
        n_test: test_rows.len(),
        n_censored: data.n_censored,
        base_rate_train,
        base_rate_test,
        failed_test,
        rows: scored.rows,
        served: predictor.served,
        validation_auc: predictor.validation_auc,
        validation_roc_auc: predictor.validation_roc_auc,
        validation_pr_auc: predictor.validation_pr_auc,
        past_rate_calibration: predictor
            .past_rate
            .as_ref()
            .map(|p| format!("{}: {}", p.key_label(), p.calibration().describe())),
        gbdt_calibration: predictor.gbdt_calibration.describe(),
        svm_calibration: predictor.svm_calibration.describe(),
        svm_support_vectors: svm_sv,
        gbdt_trees: trees,
        training: predictor.training.clone(),
        test_labels: test_y,
        test_probs: scored.probs,
    }
}

/// The base-rate row and, when the schema has a failure history, the past-failure-rate row.
fn push_baselines(scored: &mut Scored, data: &FailureData<'_>, test_y: &[bool], base_rate: f64) {
    let n_test = data.test_rows.len();
    scored.push(
        METHOD_BASE_RATE.into(),
        vec![base_rate; n_test],
        test_y,
        None,
        None,
    );
    if let Some((key, col)) = PastRate::key_of(&data.schema) {
        let d = data.schema.len();
        let p: Vec<f64> = data
            .test_rows
            .iter()
            .map(|&i| PastRate::raw(&data.x[i * d..(i + 1) * d], col, base_rate))
            .collect();
        scored.push(
            format!("past failure rate of the job's {}", key_label(key)),
            p,
            test_y,
            None,
            None,
        );
    }
}

/// Jobs timed one after another for the per-job prediction cost.
const TIMED_JOBS: usize = 2_000;

/// The SVM and GBDT rows (timed batch prediction); returns the raw scores' test ROC-AUC
/// (SVM, GBDT).
fn push_models(
    scored: &mut Scored,
    data: &FailureData<'_>,
    predictor: &FailurePredictor,
    test_y: &[bool],
) -> (f64, f64) {
    let info = &predictor.training;
    let d = data.schema.len();
    let n_test = data.test_rows.len();
    let tx = gather(&data.x, d, &data.test_rows);
    // every test job's raw scores, on every core (each row's scores are its own)
    let raw: Vec<(f64, f64)> = tx
        .par_chunks_exact(d)
        .map_init(SvmScratch::default, |scratch, r| {
            predictor.raw_scores(r, scratch)
        })
        .collect();
    let preds: Vec<FailurePrediction> = tx
        .par_chunks_exact(d)
        .zip(&raw)
        .map(|(r, &(s, g))| predictor.prediction_from_raw(r, s, g))
        .collect();
    // the per-job cost, timed one job after another on the first jobs (as a request pays
    // it): both models, then the GBDT alone
    let timed = &tx[..d * n_test.min(TIMED_JOBS)];
    let n_timed = (timed.len() / d.max(1)).max(1) as f64;
    let mut scratch = SvmScratch::default();
    let t1 = Instant::now();
    for r in timed.chunks_exact(d) {
        std::hint::black_box(predictor.predict_row(r, &mut scratch));
    }
    let both_us = t1.elapsed().as_secs_f64() * 1e6 / n_timed;
    let t2 = Instant::now();
    for r in timed.chunks_exact(d) {
        std::hint::black_box(predictor.gbdt.predict_row(r));
    }
    let gbdt_us = t2.elapsed().as_secs_f64() * 1e6 / n_timed;
    let svm_us = (both_us - gbdt_us).max(0.0);
    scored.push(
        METHOD_SVM.into(),
        preds.iter().map(|p| p.svm).collect(),
        test_y,
        Some(info.svm_train_s + data.features_s),
        Some(svm_us),
    );
    scored.push(
        METHOD_GBDT.into(),
        preds.iter().map(|p| p.gbdt).collect(),
        test_y,
        Some(info.gbdt_train_s + data.features_s),
        Some(gbdt_us),
    );
    if predictor.past_rate.is_some() {
        let p: Option<Vec<f64>> = preds.iter().map(|p| p.past_rate).collect();
        if let Some(p) = p {
            scored.push(METHOD_PAST_RATE.into(), p, test_y, None, None);
        }
    }
    let (raw_s, raw_g): (Vec<f64>, Vec<f64>) = raw.into_iter().unzip();
    (roc_auc(&raw_s, test_y), roc_auc(&raw_g, test_y))
}
