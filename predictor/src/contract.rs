//! The online contract every served predictor follows: the job events its online state is
//! fed ([`JobEvent`]), what a prediction is asked about ([`JobQuery`]), the trait of the
//! online state ([`OnlinePredictor`]) and the answer parts the predictors share
//! ([`Interval`]).
//!
//! The service stores events and hands each to every served predictor's online state in
//! the store's sequence order; what a state answers is final (point, interval or bound with
//! its nominal coverage, the calibration that produced it, the model version), so the
//! service returns it as it is. The answer issued at a job's submit is returned by
//! [`OnlinePredictor::observe`] and stored by the service; it is never recomputed later.

use augur_datasets::{JobRecord, JobStatus};
use serde::{Deserialize, Serialize};

use crate::PredictorError;

/// The training metrics a running job reported at one step (a point of its loss / accuracy
/// curve), as the predictors receive them. Its wire form is the service's ingested
/// `MetricPoint`; the convergence model turns these into
/// [`CurvePoint`](crate::convergence::CurvePoint)s of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepMetrics {
    /// Training step.
    pub step: u64,
    #[serde(default)]
    pub loss: Option<f64>,
    #[serde(default)]
    pub accuracy: Option<f64>,
    /// When it was measured, seconds (the job events' clock).
    #[serde(default)]
    pub at: Option<f64>,
}

/// One job event as the service's store applies them, in sequence order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JobEvent<'a> {
    /// A job was submitted: `job.job_id` names it, `job.submit_time` is when.
    Submitted { job: &'a JobRecord },
    /// A submitted job started running at `at`.
    Started { job_id: &'a str, at: f64 },
    /// A job finished at `at` with `status`, after running `duration` seconds (when known).
    Finished {
        job_id: &'a str,
        at: f64,
        status: JobStatus,
        duration: Option<f64>,
    },
    /// Training-curve points of a running job.
    MetricPoints {
        job_id: &'a str,
        points: &'a [StepMetrics],
    },
    /// The events' clock reached `at` with an event about no job (a cluster snapshot):
    /// states that act on time passing (deadlines running out) observe it.
    Clock { at: f64 },
}

impl JobEvent<'_> {
    /// When it happened on the events' clock: metric points at their latest time (None
    /// when no point has one).
    pub fn at(&self) -> Option<f64> {
        match *self {
            JobEvent::Submitted { job } => Some(job.submit_time),
            JobEvent::Started { at, .. }
            | JobEvent::Finished { at, .. }
            | JobEvent::Clock { at } => Some(at),
            JobEvent::MetricPoints { points, .. } => {
                points.iter().filter_map(|p| p.at).reduce(f64::max)
            }
        }
    }

    /// The job it is about (None for [`JobEvent::Clock`]).
    pub fn job_id(&self) -> Option<&str> {
        match *self {
            JobEvent::Submitted { job } => Some(&job.job_id),
            JobEvent::Started { job_id, .. }
            | JobEvent::Finished { job_id, .. }
            | JobEvent::MetricPoints { job_id, .. } => Some(job_id),
            JobEvent::Clock { .. } => None,
        }
    }
}

/// What a prediction is asked about: a job profile (as a [`JobRecord`]) at time `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobQuery<'a> {
    pub job: &'a JobRecord,
    pub at: f64,
}

/// The online half of a served predictor: its state, fed by job events, and the answers
/// computed from it.
pub trait OnlinePredictor: Send + Sync {
    /// The final answer: point value, interval or bound with its coverage, the calibration
    /// that produced it and the model version.
    type Answer: Clone + Serialize;

    /// Applies one event. For [`JobEvent::Submitted`] it returns the answer issued for that
    /// job at its submit (computed from the state *before* the job joined it): the record
    /// the service stores. The state keeps what it issued, to score its own calibration
    /// when the job starts or finishes. Other events return None.
    fn observe(&mut self, event: &JobEvent<'_>) -> Option<Result<Self::Answer, PredictorError>>;

    /// The answer for `query` against the current state: for a job submitted at
    /// `query.at`, so a state that holds the job itself (by its id) leaves the job's own
    /// submit out, and asked at the submit time with nothing applied since it gives the
    /// answer [`OnlinePredictor::observe`] issued then. Takes `&self`: the service answers
    /// predictions concurrently under a read lock.
    fn predict(&self, query: &JobQuery<'_>) -> Result<Self::Answer, PredictorError>;

    /// Drops what the state keeps for one finished job (the service's retention window):
    /// what the job taught the aggregated state (histories, calibration windows) stays.
    /// Returns whether the job was known and finished; an unfinished job is kept.
    fn forget(&mut self, job_id: &str) -> bool;
}

/// An interval `[lower, upper]` with its nominal coverage (0.8 = 80%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lower: f64,
    pub upper: f64,
    pub coverage: f64,
}

impl Interval {
    /// Whether `value` lies inside (bounds included).
    pub fn contains(&self, value: f64) -> bool {
        self.lower <= value && value <= self.upper
    }
}
