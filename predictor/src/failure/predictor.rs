//! The fitted failure predictor: both models, their calibrators and the choice between them;
//! prediction from a failure-feature row.

use augur_datasets::JobRecord;
use augur_features::{FailureFeatureState, FailureSchema, TrainingRanges};
use augur_models::gbdt::GbdtModel;
use augur_models::Predict;
use serde::{Deserialize, Serialize};

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
    /// The model whose probability [`FailurePrediction::probability`] is.
    pub served: FailureModel,
    /// Failed share of the labelled training jobs.
    pub train_base_rate: f64,
    /// ROC-AUC of each model on the calibration slice (how `served` was chosen).
    pub validation_auc: (f64, f64),
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
        let g = self
            .gbdt_calibration
            .probability(self.gbdt.predict_row(row));
        let s = self
            .svm_calibration
            .probability(self.svm.decision(row, scratch));
        FailurePrediction {
            probability: match self.served {
                FailureModel::Gbdt => g,
                FailureModel::Svm => s,
            },
            gbdt: g,
            svm: s,
        }
    }

    /// The served model's calibrated probability from a failure-feature row: what
    /// [`predict_row`](Self::predict_row) gives as `probability`, without running the model
    /// not served (the online path answers with this one only).
    pub fn served_probability(&self, row: &[f32], scratch: &mut SvmScratch) -> f64 {
        match self.served {
            FailureModel::Gbdt => self
                .gbdt_calibration
                .probability(self.gbdt.predict_row(row)),
            FailureModel::Svm => self
                .svm_calibration
                .probability(self.svm.decision(row, scratch)),
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

    /// Support vectors of the SVM and trees of the GBDT.
    pub fn sizes(&self) -> (usize, usize) {
        (self.svm.n_support(), self.gbdt.n_trees())
    }
}
