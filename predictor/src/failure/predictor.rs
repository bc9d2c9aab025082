//! The fitted failure predictor: both models, the past-rate candidate, their calibrators
//! and the choice between them; prediction from a failure-feature row.

use augur_datasets::JobRecord;
use augur_features::{FailureFeatureState, FailureSchema, TrainingRanges};
use augur_models::gbdt::GbdtModel;
use augur_models::Predict;
use serde::{Deserialize, Serialize};

use super::past_rate::PastRate;
use super::svm::{KernelSvm, SvmScratch};
use super::{FailureModel, TrainingInfo};
use crate::calibration::platt::Calibrator;
use crate::PredictorError;

/// The failure probability of one job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FailurePrediction {
    /// Calibrated probability from the served model.
    pub probability: f64,
    /// Calibrated probability from the GBDT.
    pub gbdt: f64,
    /// Calibrated probability from the SVM.
    pub svm: f64,
    /// Calibrated past failure rate (none when the trace keeps no failure history).
    pub past_rate: Option<f64>,
}

/// One metric of each candidate on the out-of-sample calibration scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CandidateScores {
    pub svm: f64,
    pub gbdt: f64,
    pub past_rate: Option<f64>,
}

impl CandidateScores {
    /// The candidate with the highest score: the SVM only when it beats the GBDT, the past
    /// rate only when it beats both (ties and NaN keep the trained model).
    pub fn best(&self) -> FailureModel {
        // a NaN score (a class missing) never wins
        let above = |a: f64, b: f64| a > b || (b.is_nan() && !a.is_nan());
        let (mut served, mut best) = (FailureModel::Gbdt, self.gbdt);
        if above(self.svm, best) {
            (served, best) = (FailureModel::Svm, self.svm);
        }
        if self.past_rate.is_some_and(|p| above(p, best)) {
            served = FailureModel::PastRate;
        }
        served
    }

    /// The candidate's score.
    pub fn of(&self, model: FailureModel) -> f64 {
        match model {
            FailureModel::Svm => self.svm,
            FailureModel::Gbdt => self.gbdt,
            FailureModel::PastRate => self.past_rate.unwrap_or(f64::NAN),
        }
    }
}

/// The served candidate from each one's ROC-AUC (`roc`) and PR-AUC (`pr`) on the
/// calibration scores, `n_failed` of `n` of them failed.
///
/// The ROC-AUC leader ([`CandidateScores::best`]) is served unless another candidate is
/// within the leader's standard error (Hanley and McNeil's, from the class counts) and
/// has the higher PR-AUC: with few failed jobs on the slice a ROC-AUC gap of a few
/// hundredths is noise, and PR-AUC (the target metric) then decides. So the past rate is
/// served whenever it beats both models in both metrics, or in ROC-AUC by more than the
/// noise; a model it beats in both is never served.
pub fn choose_served(
    roc: &CandidateScores,
    pr: &CandidateScores,
    n_failed: usize,
    n: usize,
) -> FailureModel {
    let leader = roc.best();
    let top = roc.of(leader);
    let noise = auc_standard_error(top, n_failed, n.saturating_sub(n_failed));
    let mut served = leader;
    for c in [
        FailureModel::Gbdt,
        FailureModel::Svm,
        FailureModel::PastRate,
    ] {
        let (r, p) = (roc.of(c), pr.of(c));
        if top - r <= noise && p > pr.of(served) {
            served = c;
        }
    }
    served
}

/// Hanley and McNeil's (1982) standard error of a ROC-AUC `a` measured on `n_pos` positive
/// and `n_neg` negative examples (NaN when a class is empty or `a` is NaN).
pub fn auc_standard_error(a: f64, n_pos: usize, n_neg: usize) -> f64 {
    if n_pos == 0 || n_neg == 0 {
        return f64::NAN;
    }
    let (n1, n0) = (n_pos as f64, n_neg as f64);
    let q1 = a / (2.0 - a);
    let q2 = 2.0 * a * a / (1.0 + a);
    let var = (a * (1.0 - a) + (n1 - 1.0) * (q1 - a * a) + (n0 - 1.0) * (q2 - a * a)) / (n1 * n0);
    var.max(0.0).sqrt()
}

/// The trained failure predictor: features, both models, their calibrators.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailurePredictor {
    /// The feature layout (runtime features, then failure histories).
    pub schema: FailureSchema,
    pub(super) gbdt: GbdtModel,
    pub(super) gbdt_calibration: Calibrator,
    pub(super) svm: KernelSvm,
    pub(super) svm_calibration: Calibrator,
    /// The past failure rate of the job's user (or group, queue, cluster), calibrated (none
    /// when the trace keeps no failure history, or for a model saved before it was a
    /// candidate).
    #[serde(default)]
    pub past_rate: Option<PastRate>,
    /// The model whose probability [`FailurePrediction::probability`] is.
    pub served: FailureModel,
    /// Failed share of the labelled training jobs.
    pub train_base_rate: f64,
    /// ROC-AUC of (SVM, GBDT) on the calibration scores.
    pub validation_auc: (f64, f64),
    /// Each candidate's ROC-AUC on the calibration scores (how `served` was chosen; none
    /// for a model saved before the past rate was a candidate).
    #[serde(default)]
    pub validation_roc_auc: Option<CandidateScores>,
    /// Each candidate's PR-AUC on the calibration scores (reported, not used to choose).
    #[serde(default)]
    pub validation_pr_auc: Option<CandidateScores>,
    /// What its training measured.
    #[serde(default)]
    pub training: TrainingInfo,
    /// The request fields its labelled training rows carried and their ranges (empty for a
    /// model saved before they were recorded).
    #[serde(default)]
    pub training_ranges: TrainingRanges,
}

impl FailurePredictor {
    /// Prediction from a failure-feature row ([`FailureSchema::len`] values).
    pub fn predict_row(&self, row: &[f32], scratch: &mut SvmScratch) -> FailurePrediction {
        let (s, g) = self.raw_scores(row, scratch);
        self.prediction_from_raw(row, s, g)
    }

    /// [`predict_row`](Self::predict_row) from the row's raw scores (SVM decision, GBDT
    /// score), as [`raw_scores`](Self::raw_scores) gives them.
    pub fn prediction_from_raw(&self, row: &[f32], svm: f64, gbdt: f64) -> FailurePrediction {
        let g = self.gbdt_calibration.probability(gbdt);
        let s = self.svm_calibration.probability(svm);
        let p = self.past_rate.as_ref().map(|r| r.probability(row));
        FailurePrediction {
            probability: match (self.served, p) {
                (FailureModel::Svm, _) => s,
                (FailureModel::PastRate, Some(p)) => p,
                (FailureModel::Gbdt | FailureModel::PastRate, _) => g,
            },
            gbdt: g,
            svm: s,
            past_rate: p,
        }
    }

    /// The served model's calibrated probability from a failure-feature row: what
    /// [`predict_row`](Self::predict_row) gives as `probability`, without running the model
    /// not served (the online path answers with this one only).
    pub fn served_probability(&self, row: &[f32], scratch: &mut SvmScratch) -> f64 {
        match (self.served, &self.past_rate) {
            (FailureModel::Svm, _) => self
                .svm_calibration
                .probability(self.svm.decision(row, scratch)),
            (FailureModel::PastRate, Some(p)) => p.probability(row),
            (FailureModel::Gbdt | FailureModel::PastRate, _) => self
                .gbdt_calibration
                .probability(self.gbdt.predict_row(row)),
        }
    }

    /// Prediction for `job`, about to be submitted at `now`, from the online state
    /// (`buf`: a reusable feature buffer).
    pub fn predict(
        &self,
        state: &mut FailureFeatureState,
        job: &JobRecord,
        now: f64,
        buf: &mut Vec<f32>,
        scratch: &mut SvmScratch,
    ) -> Result<FailurePrediction, PredictorError> {
        buf.resize(self.schema.len(), 0.0);
        state.features_for(job, now, buf)?;
        Ok(self.predict_row(buf, scratch))
    }

    /// The two models' raw scores before calibration: (SVM decision value, GBDT log-odds).
    pub fn raw_scores(&self, row: &[f32], scratch: &mut SvmScratch) -> (f64, f64) {
        (self.svm.decision(row, scratch), self.gbdt.predict_row(row))
    }

    /// A fresh online feature state for this predictor's schema.
    pub fn new_state(&self) -> FailureFeatureState {
        FailureFeatureState::new(self.schema.clone())
    }

    /// The calibrators (GBDT, SVM).
    pub fn calibrators(&self) -> (&Calibrator, &Calibrator) {
        (&self.gbdt_calibration, &self.svm_calibration)
    }

    /// The served model's calibrator.
    pub fn served_calibrator(&self) -> &Calibrator {
        match (self.served, &self.past_rate) {
            (FailureModel::Svm, _) => &self.svm_calibration,
            (FailureModel::PastRate, Some(p)) => p.calibration(),
            (FailureModel::Gbdt | FailureModel::PastRate, _) => &self.gbdt_calibration,
        }
    }

    /// Support vectors of the SVM and trees of the GBDT.
    pub fn sizes(&self) -> (usize, usize) {
        (self.svm.n_support(), self.gbdt.n_trees())
    }
}
