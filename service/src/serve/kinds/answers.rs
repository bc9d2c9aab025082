//! The answers the service returns, in their HTTP shape: each predictor's answer flattened
//! (intervals as `lower` / `upper`, calibrations named), readable back from a stored
//! prediction record.

use augur_predictor::convergence::{ConvergenceOnlineAnswer, ConvergencePrediction};
use augur_predictor::failure::FailureOnlineAnswer;
use augur_predictor::queue_wait::QueueWaitOnlineAnswer;
use augur_predictor::runtime::{IntervalSource, RuntimeOnlineAnswer};
use augur_predictor::RiskGroup;
use serde::{Deserialize, Deserializer, Serialize};

/// The labels answers carry (interval and calibration kinds, model names), so a stored
/// answer reads back into the same `&'static str`.
const LABELS: &[&str] = &[
    "online_conformal",
    "static_conformal",
    "gbdt",
    "svm",
    "past_rate",
    "platt",
    "isotonic",
];

/// A fixed label of an answer (one of [`LABELS`]). A named type so that serde reads it
/// with [`label`] instead of borrowing it from the input.
pub type Label = &'static str;

/// Reads a label of [`LABELS`] (an unknown one reads as `unknown`).
pub(crate) fn label<'de, D: Deserializer<'de>>(d: D) -> Result<Label, D::Error> {
    let s = String::deserialize(d)?;
    Ok(LABELS
        .iter()
        .find(|l| **l == s)
        .copied()
        .unwrap_or("unknown"))
}

/// A runtime prediction as served: the runtime predictor's answer in the HTTP shape (its
/// interval flattened, the calibration named).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuntimeAnswer {
    pub model_version: u32,
    pub seconds: f64,
    pub lower: f64,
    pub upper: f64,
    /// Nominal coverage of `[lower, upper]`.
    pub coverage: f64,
    /// `online_conformal` (recalibrated on finished jobs) or `static_conformal`.
    #[serde(deserialize_with = "label")]
    pub interval: Label,
    /// The job's `requested_time` cut the point or the interval: the scheduler ends the job
    /// there, so it cannot run longer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped_by_requested_time: bool,
}

impl RuntimeAnswer {
    /// This answer with its point and interval no longer than `limit`, the job's requested
    /// time (a wall-time limit the scheduler enforces); unchanged without one.
    pub fn within_limit(mut self, limit: Option<f64>) -> RuntimeAnswer {
        let Some(limit) = limit.filter(|l| l.is_finite() && *l > 0.0) else {
            return self;
        };
        if self.upper > limit || self.seconds > limit {
            self.upper = self.upper.min(limit);
            self.seconds = self.seconds.min(limit);
            self.lower = self.lower.min(limit);
            self.capped_by_requested_time = true;
        }
        self
    }
}

impl From<RuntimeOnlineAnswer> for RuntimeAnswer {
    fn from(a: RuntimeOnlineAnswer) -> RuntimeAnswer {
        RuntimeAnswer {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.interval.lower,
            upper: a.interval.upper,
            coverage: a.interval.coverage,
            interval: match a.calibration {
                IntervalSource::OnlineConformal => "online_conformal",
                IntervalSource::StaticConformal => "static_conformal",
            },
            capped_by_requested_time: false,
        }
    }
}

/// A queue-wait prediction as served: the queue-wait predictor's answer in the HTTP shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WaitAnswer {
    pub model_version: u32,
    pub seconds: f64,
    /// The wait stays under `upper` with probability `coverage`.
    pub lower: f64,
    pub upper: f64,
    pub coverage: f64,
    /// The job's risk group when the model's bound is risk-split (`coverage` is then that
    /// group's level; the two groups together hold the model's overall level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub risk_group: Option<RiskGroup>,
}

impl From<QueueWaitOnlineAnswer> for WaitAnswer {
    fn from(a: QueueWaitOnlineAnswer) -> WaitAnswer {
        WaitAnswer {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.interval.lower,
            upper: a.interval.upper,
            coverage: a.interval.coverage,
            risk_group: a.risk_group,
        }
    }
}

/// A failure prediction as served (a calibrated probability; no interval).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FailureAnswer {
    pub model_version: u32,
    /// Calibrated probability that the job ends failed (from the served model).
    pub probability: f64,
    /// Which model is served: `gbdt`, `svm` or `past_rate`.
    #[serde(deserialize_with = "label")]
    pub model: Label,
    /// The served model's calibration: `platt` or `isotonic`.
    #[serde(deserialize_with = "label")]
    pub calibration: Label,
}

impl From<FailureOnlineAnswer> for FailureAnswer {
    fn from(a: FailureOnlineAnswer) -> FailureAnswer {
        FailureAnswer {
            model_version: a.model_version,
            probability: a.probability,
            model: a.model,
            calibration: a.calibration,
        }
    }
}

/// A convergence prediction as served: the remaining seconds' interval is
/// `[remaining_lower_s, remaining_upper_s]` with nominal coverage `coverage`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ConvergenceAnswer {
    pub model_version: u32,
    /// Which metric the curve was read from (`accuracy` or `loss`).
    pub metric: &'static str,
    /// Points used.
    pub points: usize,
    /// Nominal coverage of the remaining-time interval.
    pub coverage: f64,
    /// What produced the interval: `binned_conformal` (the models' band on a known
    /// benchmark) or `curve_spread` (the curve families' plateaus on an unknown one).
    pub calibration: &'static str,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub prediction: ConvergencePrediction,
}

impl From<ConvergenceOnlineAnswer> for ConvergenceAnswer {
    fn from(a: ConvergenceOnlineAnswer) -> ConvergenceAnswer {
        ConvergenceAnswer {
            model_version: a.model_version,
            metric: a.metric,
            points: a.points,
            coverage: a.interval.coverage,
            calibration: a.calibration,
            prediction: a.prediction,
        }
    }
}
