//! The fitted queue-wait model: a median model of the wait, a 0.95-quantile bound model
//! with its conformal correction (a single offset, or the risk-split bound), the optional
//! short-wait override and the runtime predictor behind the queue's run times; row and batch
//! predictions.

use augur_datasets::JobRecord;
use augur_features::{FeatureError, FeatureState, JobHandle};
use augur_models::{AnyModel, Matrix, Predict};
use augur_numeric::sigmoid;
use serde::{Deserialize, Serialize};

use super::state::{QueueError, QueueJob, QueueState, ResourceKind, QUEUE_FEATURES};
use crate::calibration::{RiskGroup, RiskScore, RiskSplitBound, RiskSplitState};
use crate::runtime::RuntimePredictor;
use crate::PredictorError;

/// A queue-wait prediction, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueWaitPrediction {
    /// Point estimate (conditional median).
    pub seconds: f64,
    /// Upper bound the wait stays under with probability `coverage` (the job's risk
    /// group's level when the bound is risk-split).
    pub upper: f64,
    pub coverage: f64,
    /// The job's risk group when the bound is risk-split ([`RiskSplitBound`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_group: Option<RiskGroup>,
}

/// A trained queue-wait predictor. Its feature rows are the runtime predictor's history
/// features followed by the [`QUEUE_FEATURES`] ([`QueueWaitPredictor::features_for`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueWaitPredictor {
    /// Predicts run times of queued and running jobs (trained on the training period).
    pub runtime: RuntimePredictor,
    pub resource: ResourceKind,
    /// Inferred capacity, in `resource` units.
    pub capacity: f64,
    /// Median model of the wait, on `point_target`'s scale.
    pub point: AnyModel,
    pub point_target: WaitTarget,
    /// 0.95-quantile model of ln(1 + wait).
    pub upper: AnyModel,
    /// Conformal correction added to `upper` (ln(1 + s) space).
    pub upper_offset: f64,
    pub coverage: f64,
    /// Optional short-wait override: a log-odds model of "the wait is within 600 s of
    /// `short.seconds`"; when its probability reaches `short.threshold`, the point estimate
    /// is the job's own wait inside that window ([`ShortWait::inside`]). `short.seconds` is
    /// the centre of the ±600 s window holding the most training waits (600 s when most
    /// jobs start at once: the window then catches every wait up to 1,200 s).
    pub short: Option<ShortWait>,
    /// The risk-split bound that replaces `upper_offset` when present (artifacts saved
    /// before it have none and keep the single conformal offset).
    #[serde(default)]
    pub risk: Option<RiskSplitBound>,
    /// The highest wait it answers, point or bound ([`wait_ceiling`] of the training
    /// waits); None in artifacts saved before it (no ceiling).
    #[serde(default)]
    pub wait_ceiling_s: Option<f64>,
}

/// The quantile of the training waits the wait ceiling starts from.
pub const WAIT_CEILING_QUANTILE: f64 = 0.999;

/// How far above that quantile the ceiling sits.
pub const WAIT_CEILING_MARGIN: f64 = 2.0;

/// The ceiling on every wait answer: [`WAIT_CEILING_MARGIN`] times the
/// [`WAIT_CEILING_QUANTILE`] quantile of the waits seen in training (at least one hour). A
/// bound far above anything in the history is a defect, not an answer: an online offset
/// that ran away, a model extrapolating. None without finite waits.
pub fn wait_ceiling(waits: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = waits.iter().copied().filter(|w| w.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let q = crate::metrics::quantile(&finite, WAIT_CEILING_QUANTILE);
    Some((WAIT_CEILING_MARGIN * q).max(3600.0))
}

/// The short-wait override of a [`QueueWaitPredictor`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShortWait {
    pub model: AnyModel,
    /// The centre of the short window (typical short wait of the fit period).
    pub seconds: f64,
    /// Probability threshold, chosen on the validation slice.
    pub threshold: f64,
    /// The job's own wait inside the window. Artifacts saved before it have none: their
    /// jobs classified short get `seconds` (or the median model's estimate, when lower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inside: Option<ShortWaitInside>,
    /// Blend the job's own short wait with the median model's estimate in log space,
    /// weighted by the classifier's probability ([`ShortWait::blended`]). Artifacts saved
    /// before it have none: their jobs classified short get the short wait alone.
    #[serde(default)]
    pub blend: bool,
}

/// Models of the waits inside the short window, fitted on the fit period's jobs whose wait
/// fell in it: their conditional median and an upper quantile, in seconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShortWaitInside {
    pub median: AnyModel,
    pub upper: AnyModel,
    /// The quantile `upper` estimates.
    pub upper_quantile: f64,
}

/// What the override needs of one job: the classifier's log-odds and, with
/// [`ShortWaitInside`], its median and upper-quantile outputs (seconds).
#[derive(Debug, Clone, Copy)]
pub(super) struct ShortOutputs {
    pub log_odds: f64,
    pub median: f64,
    pub upper: f64,
}

impl ShortWait {
    /// The point estimate of a job whose median model says `point_s`.
    pub(super) fn apply(&self, point_s: f64, o: ShortOutputs) -> f64 {
        if sigmoid(o.log_odds) < self.threshold {
            return point_s;
        }
        match self.inside {
            Some(_) if self.blend => {
                self.blended(self.inside(o.median, o.upper), point_s, sigmoid(o.log_odds))
            }
            Some(_) => self.inside(o.median, o.upper),
            None => self.seconds.min(point_s),
        }
    }

    /// The estimate of a job classified short with probability `p`: the geometric mean (of
    /// 1 + seconds) of its own short wait and the median model's estimate, weighted `p` and
    /// `1 − p`, at most the window's centre. A job that is surely short gets its short wait; an
    /// uncertain one keeps part of the median model's (log-space) estimate, so one that
    /// then waits hours is not several decades off. A NaN falls back to the short wait.
    pub(super) fn blended(&self, short_s: f64, point_s: f64, p: f64) -> f64 {
        let v = (p * short_s.max(0.0).ln_1p() + (1.0 - p) * point_s.max(0.0).ln_1p()).exp_m1();
        if v.is_nan() {
            short_s
        } else {
            v.min(self.seconds.max(short_s))
        }
    }

    /// The wait of a job classified short: the conditional median of the window's waits,
    /// raised until the ±600 s window around the estimate reaches the job's upper quantile
    /// (so a job whose short waits spread wide keeps most of them within 600 s), and kept
    /// inside the window, at most its centre (which holds the whole window). Not finite
    /// model outputs fall back to the centre.
    pub(super) fn inside(&self, median: f64, upper: f64) -> f64 {
        let lo = (self.seconds - SHORT).max(0.0);
        let v = median.max(upper - SHORT);
        if v.is_finite() {
            v.clamp(lo, self.seconds.max(lo))
        } else {
            self.seconds
        }
    }

    /// The outputs of the override's models on one row.
    pub(super) fn outputs_row(&self, row: &[f32]) -> ShortOutputs {
        let (median, upper) = match &self.inside {
            Some(m) => (m.median.predict_row(row), m.upper.predict_row(row)),
            None => (f64::NAN, f64::NAN),
        };
        ShortOutputs {
            log_odds: self.model.predict_row(row),
            median,
            upper,
        }
    }

    /// The outputs of the override's models on every row of `x`.
    pub(super) fn outputs(&self, x: &Matrix) -> Result<Vec<ShortOutputs>, PredictorError> {
        let n = x.rows();
        let mut c = vec![0.0; n];
        self.model.predict_into(x, &mut c)?;
        let mut m = vec![f64::NAN; n];
        let mut u = vec![f64::NAN; n];
        if let Some(inside) = &self.inside {
            inside.median.predict_into(x, &mut m)?;
            inside.upper.predict_into(x, &mut u)?;
        }
        Ok(c.into_iter()
            .zip(m)
            .zip(u)
            .map(|((log_odds, median), upper)| ShortOutputs {
                log_odds,
                median,
                upper,
            })
            .collect())
    }
}

/// Half-width of the "within 600 s" window the short-wait override aims at.
pub(super) const SHORT: f64 = 600.0;

impl QueueWaitPredictor {
    /// Number of features in a row.
    pub fn n_features(&self) -> usize {
        self.runtime.schema.len() + QUEUE_FEATURES.len()
    }

    /// Feature names in order.
    pub fn feature_names(&self) -> Vec<String> {
        super::data::feature_names(&self.runtime.schema)
    }

    /// An empty queue state sized for this predictor.
    pub fn new_state(&self) -> QueueState {
        QueueState::new(self.capacity)
    }

    /// The online path: writes the feature row of `job`, submitted at `now`, from the history
    /// state and the queue state (only the history's hour windows are trimmed; submit the
    /// returned [`QueueJob`] to both afterwards), and returns the job's queue view with its
    /// predicted run time.
    pub fn features_for(
        &self,
        history: &mut FeatureState,
        queue: &QueueState,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<QueueJob, PredictorError> {
        self.row_with(
            |hist| history.features_for(job, now, hist),
            queue,
            job,
            now,
            out,
        )
    }

    /// [`QueueWaitPredictor::features_for`] without changing the history (for predictions
    /// answered under a shared borrow); the same row.
    pub fn features_at(
        &self,
        history: &FeatureState,
        queue: &QueueState,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<QueueJob, PredictorError> {
        self.row_with(
            |hist| history.features_at(job, now, hist),
            queue,
            job,
            now,
            out,
        )
    }

    /// The feature row of `job` submitted at `now` as the history stood before that
    /// submit (see [`FeatureState::features_before`]: `own` is the job's own submit in
    /// it), behind `queue` (which should not hold the job itself).
    pub fn features_before(
        &self,
        history: &FeatureState,
        queue: &QueueState,
        job: &JobRecord,
        now: f64,
        own: Option<JobHandle>,
        out: &mut [f32],
    ) -> Result<QueueJob, PredictorError> {
        self.row_with(
            |hist| history.features_before(job, now, own, hist),
            queue,
            job,
            now,
            out,
        )
    }

    /// The feature row of `job` with the history part written by `history`.
    fn row_with(
        &self,
        history: impl FnOnce(&mut [f32]) -> Result<(), FeatureError>,
        queue: &QueueState,
        job: &JobRecord,
        now: f64,
        out: &mut [f32],
    ) -> Result<QueueJob, PredictorError> {
        let h = self.runtime.schema.len();
        if out.len() != self.n_features() {
            return Err(QueueError::BufferSize {
                got: out.len(),
                want: self.n_features(),
            }
            .into());
        }
        let (hist, rest) = out.split_at_mut(h);
        history(hist)?;
        let rt = self.runtime.ensemble_seconds(hist);
        let qj = QueueJob::from_record(job, self.resource, rt);
        queue.features(&qj, now, rest)?;
        Ok(qj)
    }

    /// Prediction from a feature row (the risk-split bound with its calibration threshold
    /// and offsets when there is one, else the single conformal offset).
    pub fn predict_row(&self, row: &[f32]) -> QueueWaitPrediction {
        let p = self.point_row(row);
        let raw = self.upper.predict_row(row);
        match &self.risk {
            Some(r) => {
                let g = r.group(self.risk_score_row(r, row, raw));
                let (off, level) = r.of(g);
                with_group(self.to_prediction(p, raw + off, level), g)
            }
            None => self.to_prediction(p, raw + self.upper_offset, self.coverage),
        }
    }

    /// The online path's prediction: the risk group by `state`'s current threshold and the
    /// bound by that group's adaptive offset. Returns the risk score too (pass it to
    /// [`RiskSplitState::record_submit`] when the job is really submitted) and the bound
    /// model's raw output (ln(1 + s), what the job's outcome is later judged by). Without a
    /// risk-split bound it is [`predict_row`](Self::predict_row) and the score is NaN.
    pub fn predict_row_online(
        &self,
        row: &[f32],
        state: &RiskSplitState,
    ) -> (QueueWaitPrediction, f64, f64) {
        let Some(r) = &self.risk else {
            return (self.predict_row(row), f64::NAN, f64::NAN);
        };
        let p = self.point_row(row);
        let raw = self.upper.predict_row(row);
        let score = self.risk_score_row(r, row, raw);
        let g = state.group(score);
        let b = state.bound(g);
        (
            with_group(self.to_prediction(p, raw + b.offset, b.coverage), g),
            score,
            raw,
        )
    }

    /// The online state of the risk-split bound at deployment (None without one).
    pub fn new_risk_state(&self) -> Option<RiskSplitState> {
        self.risk
            .as_ref()
            .map(|r| r.new_state_capped(self.wait_ceiling_s))
    }

    fn point_row(&self, row: &[f32]) -> f64 {
        let mut p = self.point_target.to_seconds(self.point.predict_row(row));
        if let Some(s) = &self.short {
            p = s.apply(p, s.outputs_row(row));
        }
        p
    }

    fn risk_score_row(&self, r: &RiskSplitBound, row: &[f32], raw: f64) -> f64 {
        match &r.score {
            RiskScore::UpperModel => raw,
            RiskScore::Classifier { model, .. } => model.predict_row(row),
        }
    }

    /// The risk score of each row of `x` (None without a risk-split bound).
    pub fn risk_scores(&self, x: &Matrix) -> Result<Option<Vec<f64>>, PredictorError> {
        let Some(r) = &self.risk else {
            return Ok(None);
        };
        let mut s = vec![0.0; x.rows()];
        match &r.score {
            RiskScore::UpperModel => self.upper.predict_into(x, &mut s)?,
            RiskScore::Classifier { model, .. } => model.predict_into(x, &mut s)?,
        }
        Ok(Some(s))
    }

    /// Predictions for every row of `x`.
    pub fn predict_batch(&self, x: &Matrix) -> Result<Vec<QueueWaitPrediction>, PredictorError> {
        let mut p = vec![0.0; x.rows()];
        let mut u = vec![0.0; x.rows()];
        self.point.predict_into(x, &mut p)?;
        self.upper.predict_into(x, &mut u)?;
        let short = match &self.short {
            Some(s) => Some((s, s.outputs(x)?)),
            None => None,
        };
        let scores = self.risk_scores(x)?;
        Ok(p.into_iter()
            .zip(u)
            .enumerate()
            .map(|(i, (p, u))| {
                let mut p = self.point_target.to_seconds(p);
                if let Some((s, o)) = &short {
                    p = s.apply(p, o[i]);
                }
                match (&self.risk, &scores) {
                    (Some(r), Some(sc)) => {
                        let g = r.group(sc[i]);
                        let (off, level) = r.of(g);
                        with_group(self.to_prediction(p, u + off, level), g)
                    }
                    _ => self.to_prediction(p, u + self.upper_offset, self.coverage),
                }
            })
            .collect())
    }

    /// The bound's raw model output (ln(1 + s), before the conformal offset) for each row.
    pub fn upper_raw(&self, x: &Matrix) -> Result<Vec<f64>, PredictorError> {
        let mut u = vec![0.0; x.rows()];
        self.upper.predict_into(x, &mut u)?;
        Ok(u)
    }
}

/// The scale a wait model is fitted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitTarget {
    /// ln(1 + seconds).
    Log1p,
    /// Seconds.
    Seconds,
}

impl WaitTarget {
    pub(super) fn of_log1p(self, y_log: f64) -> f64 {
        match self {
            WaitTarget::Log1p => y_log,
            WaitTarget::Seconds => y_log.exp_m1(),
        }
    }
    pub(super) fn to_seconds(self, v: f64) -> f64 {
        match self {
            WaitTarget::Log1p => v.exp_m1(),
            WaitTarget::Seconds => v,
        }
    }
}

impl QueueWaitPredictor {
    /// A prediction of point `seconds` and bound `u_log` (ln(1 + s)): the point at least 0,
    /// the bound at least the point, both at most the wait ceiling.
    fn to_prediction(&self, seconds: f64, u_log: f64, coverage: f64) -> QueueWaitPrediction {
        let ceiling = self.wait_ceiling_s.unwrap_or(f64::INFINITY);
        let seconds = if seconds.is_finite() {
            seconds.clamp(0.0, ceiling)
        } else {
            0.0
        };
        QueueWaitPrediction {
            seconds,
            upper: self.cap_bound(u_log.exp_m1(), seconds),
            coverage,
            risk_group: None,
        }
    }

    /// A bound of `upper` seconds for a job whose point estimate is `point`: at least the
    /// point, at most the wait ceiling (a NaN bound is the ceiling).
    pub fn cap_bound(&self, upper: f64, point: f64) -> f64 {
        let ceiling = self.wait_ceiling_s.unwrap_or(f64::INFINITY);
        let u = if upper.is_nan() { ceiling } else { upper };
        u.max(point).min(ceiling)
    }
}

fn with_group(mut p: QueueWaitPrediction, g: RiskGroup) -> QueueWaitPrediction {
    p.risk_group = Some(g);
    p
}
