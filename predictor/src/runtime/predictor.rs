//! The fitted runtime model: a weighted ensemble of trees on ln seconds (some correcting a
//! [`BaseMargin`]) with its split-conformal interval, and its batch and row predictions.

use augur_features::{FeatureSchema, TrainingRanges};
use augur_models::{AnyModel, Matrix, Predict};
use serde::{Deserialize, Serialize};

use augur_datasets::JobRecord;

use crate::calibration::{ConformalWindow, ResidualMemory};
use crate::feature_rows::with_row_buffer;
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

/// A per-job choice between the ensemble's point and a [`BaseMargin`] (the best history
/// median available): where a key's run times are bimodal (jobs that stop within minutes and
/// jobs that run for hours), the median-seeking ensemble can land between the modes, within
/// 2x of neither, while the history median sits in one of them. A log-loss model on the gap
/// between the two (ln ensemble − ln base) says where taking the base saves more log error
/// and misses of 2x than it costs; the base is taken where its log-odds are positive. Fitted
/// on the validation slice by [`RuntimeTrainer`](super::RuntimeTrainer).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointChoice {
    pub margin: BaseMargin,
    pub model: AnyModel,
    /// What `model` reads (a model saved before this field read the features and the gap).
    #[serde(default)]
    pub inputs: ChoiceInputs,
}

/// The row a [`PointChoice`]'s model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ChoiceInputs {
    /// The job's features, then the gap ln ensemble − ln base (models saved before
    /// [`ChoiceInputs::Gap`]; on Graham the features let it learn the validation slice's
    /// bursts, which the test period does not repeat).
    #[default]
    FeaturesAndGap,
    /// The gap alone.
    Gap,
}

impl PointChoice {
    /// The chosen point (ln seconds) for `features` given the ensemble's `point`: the base
    /// or the point.
    pub fn choose(&self, features: &[f32], point: f64) -> f64 {
        let base = self.margin.of(features);
        let gap = (point - base) as f32;
        let take_base = match self.inputs {
            ChoiceInputs::Gap => self.model.predict_row(&[gap]) > 0.0,
            ChoiceInputs::FeaturesAndGap => with_row_buffer(features.len() + 1, |row| {
                row[..features.len()].copy_from_slice(features);
                row[features.len()] = gap;
                self.model.predict_row(row) > 0.0
            }),
        };
        if take_base {
            base
        } else {
            point
        }
    }
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
    /// The request fields its training rows carried and their ranges (empty for a model
    /// saved before they were recorded).
    #[serde(default)]
    pub training_ranges: TrainingRanges,
    /// The per-job choice between the ensemble and its base, when the validation slice
    /// showed it lands within 2x more often (absent in a model saved before it existed).
    #[serde(default)]
    pub choice: Option<PointChoice>,
    /// The newest submit time of the jobs it was trained on: the outcomes of jobs submitted
    /// later are out of sample and join the online interval's long memory (absent in a model
    /// saved before it was recorded, whose online floor is the fixed static interval).
    #[serde(default)]
    pub trained_until: Option<f64>,
}

/// How long past its time limit a job may still run before the scheduler has it killed
/// (Slurm: the limit plus `OverTimeLimit` and `KillWait`, and the end being written): 15
/// minutes. On Graham no job ran more than 691 s past its limit.
pub const LIMIT_GRACE_S: f64 = 900.0;

/// The longest run a job with time limit `requested_time` can have: the limit plus
/// [`LIMIT_GRACE_S`]; None when the limit is unknown (or not a positive finite number).
pub fn runtime_ceiling(requested_time: Option<f64>) -> Option<f64> {
    requested_time
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| t + LIMIT_GRACE_S)
}

/// The ln-space offsets of the interval a job was answered: `offsets` around its point
/// `log` (ln seconds) with each end cut at `ceiling`, as [`RuntimePrediction::capped`] cuts
/// the answer. The online calibration judges an outcome against these, the interval the job
/// was given: a job killed at its limit (its run cut short: a lower bound of the run it
/// wanted) counts as covered exactly when its answer held the run it had, and a job that ran
/// past the ceiling (its limit raised after submit) as a miss, whatever the offsets alone say.
pub(super) fn answered_offsets(log: f64, offsets: (f64, f64), ceiling: Option<f64>) -> (f64, f64) {
    match ceiling {
        Some(c) => {
            let top = c.ln() - log;
            (offsets.0.min(top), offsets.1.min(top))
        }
        None => offsets,
    }
}

impl RuntimePrediction {
    /// The answer of point `log` (ln seconds) with the ln-space interval `offsets` at
    /// `coverage`, none of it past `ceiling`: what the service answers and what the
    /// evaluation's online replay scores.
    pub(super) fn answered(
        log: f64,
        offsets: (f64, f64),
        coverage: f64,
        ceiling: Option<f64>,
    ) -> RuntimePrediction {
        RuntimePrediction {
            seconds: log.exp(),
            lower: (log + offsets.0).exp(),
            upper: (log + offsets.1).exp(),
            coverage,
        }
        .capped(ceiling)
    }

    /// The prediction with its point and both ends at most `ceiling` seconds (a job cannot
    /// run past its time limit and the grace: [`runtime_ceiling`]).
    pub fn capped(self, ceiling: Option<f64>) -> RuntimePrediction {
        let Some(c) = ceiling else {
            return self;
        };
        RuntimePrediction {
            seconds: self.seconds.min(c),
            lower: self.lower.min(c),
            upper: self.upper.min(c),
            coverage: self.coverage,
        }
    }
}

impl RuntimePredictor {
    /// The weighted ensemble's point in ln seconds for one feature row, before the
    /// [`PointChoice`]: what other predictors read as a job's expected run time (the queue
    /// features), so that the served point's rule does not move them.
    pub fn ensemble_log(&self, features: &[f32]) -> f64 {
        self.members
            .iter()
            .map(|m| {
                let base = m.margin.as_ref().map_or(0.0, |b| b.of(features));
                m.weight * (base + m.model.predict_row(features))
            })
            .sum()
    }

    /// [`RuntimePredictor::ensemble_log`] for every row of `x`.
    pub fn ensemble_log_batch(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
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

    /// The ensemble's point in seconds for one row ([`RuntimePredictor::ensemble_log`]).
    pub fn ensemble_seconds(&self, features: &[f32]) -> f64 {
        self.ensemble_log(features).exp()
    }

    /// [`RuntimePredictor::ensemble_seconds`] for every row of `x`.
    pub fn ensemble_seconds_batch(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
        Ok(self
            .ensemble_log_batch(x)?
            .into_iter()
            .map(f64::exp)
            .collect())
    }

    /// Point estimate in ln seconds for one feature row laid out by `self.schema`.
    pub fn predict_log(&self, features: &[f32]) -> f64 {
        let point = self.ensemble_log(features);
        match &self.choice {
            Some(c) => c.choose(features, point),
            None => point,
        }
    }

    /// Point estimates in ln seconds for every row of `x`.
    pub fn predict_log_batch(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
        let mut out = self.ensemble_log_batch(x)?;
        if let Some(c) = &self.choice {
            for (i, o) in out.iter_mut().enumerate() {
                *o = c.choose(x.row(i), *o);
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
    /// coverage, seeded with its calibration residuals, floored at its long memory or, for a
    /// model that does not know when its training history ends, at the static interval.
    pub fn conformal_window(&self, capacity: usize) -> ConformalWindow {
        let window = ConformalWindow::seeded(capacity, self.coverage, &self.calibration_residuals)
            .with_floor(self.interval_log);
        match self.residual_memory() {
            Some(memory) => window.with_memory(memory),
            None => window,
        }
    }

    /// The long memory of its online interval before any outcome: the calibration residuals
    /// at the nominal coverage. Not the static interval's drift level: that widening
    /// foresees drift for an interval that never sees an outcome, while the memory takes in
    /// the drift that comes. None when it cannot be fed ([`RuntimePredictor::trained_until`]
    /// unknown).
    pub fn residual_memory(&self) -> Option<ResidualMemory> {
        self.trained_until
            .map(|_| ResidualMemory::new(&self.calibration_residuals, self.coverage))
    }

    /// The same predictor, knowing it was trained on `rows` of `jobs` (their newest submit
    /// time is [`RuntimePredictor::trained_until`]).
    pub fn trained_on(mut self, jobs: &[JobRecord], rows: &[usize]) -> RuntimePredictor {
        self.trained_until = rows
            .iter()
            .filter_map(|&i| jobs.get(i).map(|j| j.submit_time))
            .filter(|t| t.is_finite())
            .reduce(f64::max);
        self
    }

    /// Whether the outcome of a job submitted at `submit_time` is out of sample for it.
    pub fn is_after_training(&self, submit_time: f64) -> bool {
        self.trained_until.is_some_and(|t| submit_time > t)
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
}
