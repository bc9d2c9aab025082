//! The convergence predictor's online state ([`ConvergenceOnline`]): each job's training
//! curve as its metric points arrive (the last [`KEEP_POINTS`]), its start or submit time
//! and its profile, and the convergence estimate of a running job from them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use augur_datasets::JobRecord;
use serde::{Deserialize, Serialize};

use super::{
    ConvergenceBasis, ConvergencePrediction, ConvergencePredictor, CurvePoint, JobContext,
    CONVERGENCE_COVERAGE,
};
use crate::contract::{self, Interval, JobEvent, JobQuery, OnlinePredictor};
use crate::PredictorError;

/// Metric points kept per job (the latest).
pub const KEEP_POINTS: usize = 1000;

/// A convergence estimate as served.
#[derive(Debug, Clone, Serialize)]
pub struct ConvergenceOnlineAnswer {
    pub model_version: u32,
    /// Which metric the curve was read from (`accuracy` or `loss`).
    pub metric: &'static str,
    /// Points used.
    pub points: usize,
    /// The remaining seconds' interval and its nominal coverage.
    pub interval: Interval,
    /// What produced the interval: `binned_conformal` (the models' band on a known
    /// benchmark) or `curve_spread` (the curve families' plateaus on an unknown one).
    pub calibration: &'static str,
    #[serde(flatten)]
    pub prediction: ConvergencePrediction,
}

/// What the state knows of one job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct JobCurve {
    submitted_at: Option<f64>,
    started_at: Option<f64>,
    /// From the job's profile at submit.
    context: Option<JobContext>,
    points: VecDeque<contract::StepMetrics>,
}

/// The online state of a served [`ConvergencePredictor`]. A job's curve is read from its
/// accuracy points when it reported any, else its loss points, with wall time counted from
/// its start (else its submit); its profile gives the benchmark (`job_name`), the
/// accelerators (`num_gpus`) and their model (`gpu_type`). A second submit or start of a
/// job is ignored.
#[derive(Debug)]
pub struct ConvergenceOnline {
    model: Arc<ConvergencePredictor>,
    model_version: u32,
    state: ConvergenceOnlineState,
}

/// What a [`ConvergenceOnline`] learned from the events, without its model: the part a
/// service's snapshot keeps (restored with [`ConvergencePredictor::online_from`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConvergenceOnlineState {
    jobs: HashMap<String, JobCurve>,
}

impl ConvergencePredictor {
    /// A fresh online state serving this predictor as registry version `model_version`.
    pub fn online(self: Arc<Self>, model_version: u32) -> ConvergenceOnline {
        self.online_from(model_version, ConvergenceOnlineState::default())
    }

    /// The online state `state` (saved from a state serving this predictor) serving it as
    /// `model_version` (the curves do not depend on the model).
    pub fn online_from(
        self: Arc<Self>,
        model_version: u32,
        state: ConvergenceOnlineState,
    ) -> ConvergenceOnline {
        ConvergenceOnline {
            model: self,
            model_version,
            state,
        }
    }
}

/// The convergence context of a job profile.
fn context_of(job: &JobRecord) -> JobContext {
    JobContext {
        benchmark: job.job_name.clone().unwrap_or_default(),
        accelerators: job.num_gpus.map(|g| g.round().max(0.0) as u64),
        global_batch_size: None,
        accelerator_model: job.gpu_type.clone(),
    }
}

impl ConvergenceOnline {
    /// What it learned from the events (to save; see [`ConvergencePredictor::online_from`]).
    pub fn state(&self) -> &ConvergenceOnlineState {
        &self.state
    }

    /// The predictor served.
    pub fn model(&self) -> &Arc<ConvergencePredictor> {
        &self.model
    }

    /// The convergence estimate of job `job_id` from what it reported so far.
    pub fn predict_job(&self, job_id: &str) -> Result<ConvergenceOnlineAnswer, PredictorError> {
        let job = self
            .state
            .jobs
            .get(job_id)
            .ok_or_else(|| PredictorError::UnknownJob {
                job_id: job_id.to_string(),
            })?;
        let start =
            job.started_at
                .or(job.submitted_at)
                .ok_or_else(|| PredictorError::NoStartTime {
                    job_id: job_id.to_string(),
                })?;
        let use_accuracy = job.points.iter().any(|p| p.accuracy.is_some());
        let metric = if use_accuracy { "accuracy" } else { "loss" };
        let points: Vec<CurvePoint> = job
            .points
            .iter()
            .filter_map(|p| {
                let value = if use_accuracy { p.accuracy } else { p.loss }?;
                Some(CurvePoint {
                    wall_time_s: p.at? - start,
                    epoch: Some(p.step as f64),
                    samples: None,
                    value,
                })
            })
            .collect();
        if points.is_empty() {
            return Err(PredictorError::NoTimedPoints {
                job_id: job_id.to_string(),
                metric,
            });
        }
        let context = job.context.clone().unwrap_or_default();
        let prediction = self.model.predict(&context, &points)?;
        Ok(ConvergenceOnlineAnswer {
            model_version: self.model_version,
            metric,
            points: points.len(),
            interval: Interval {
                lower: prediction.remaining_lower_s,
                upper: prediction.remaining_upper_s,
                coverage: CONVERGENCE_COVERAGE,
            },
            calibration: match prediction.basis {
                ConvergenceBasis::Target => "binned_conformal",
                ConvergenceBasis::Plateau => "curve_spread",
            },
            prediction,
        })
    }
}

impl OnlinePredictor for ConvergenceOnline {
    type Answer = ConvergenceOnlineAnswer;

    /// Records submits, starts and metric points. Nothing is answered at a job's submit (it
    /// has no curve yet): every event returns None.
    fn observe(
        &mut self,
        event: &JobEvent<'_>,
    ) -> Option<Result<ConvergenceOnlineAnswer, PredictorError>> {
        match *event {
            JobEvent::Submitted { job } => {
                let state = self.state.jobs.entry(job.job_id.clone()).or_default();
                if state.submitted_at.is_none() {
                    state.submitted_at = Some(job.submit_time);
                    state.context = Some(context_of(job));
                }
            }
            JobEvent::Started { job_id, at } => {
                let state = self.state.jobs.entry(job_id.to_string()).or_default();
                state.started_at.get_or_insert(at);
            }
            JobEvent::MetricPoints { job_id, points } => {
                let state = self.state.jobs.entry(job_id.to_string()).or_default();
                state.points.extend(points.iter().copied());
                let excess = state.points.len().saturating_sub(KEEP_POINTS);
                state.points.drain(..excess);
            }
            JobEvent::Finished { .. } | JobEvent::Clock { .. } => {}
        }
        None
    }

    /// The estimate for the job `query.job.job_id` names, from its recorded curve and the
    /// profile it was submitted with (the query's profile and time are not used).
    fn predict(&self, query: &JobQuery<'_>) -> Result<ConvergenceOnlineAnswer, PredictorError> {
        self.predict_job(&query.job.job_id)
    }

    /// The service forgets only finished jobs; this state does not track finishes.
    fn forget(&mut self, job_id: &str) -> bool {
        self.state.jobs.remove(job_id).is_some()
    }
}
