//! What the elastic controller predicts about a job ([`Estimates`]): its remaining work, its
//! time at a size on the speedup curve, its ranking key, and whether its cooldown is over.

use super::params::ElasticParams;
use crate::cluster::{QueuedJob, RunningJob};
use crate::policies::marginal::{predicted_remaining, time_at};
use crate::scaling::ScalingModel;

/// The controller's knobs and speedup curve, as one decision uses them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Estimates {
    pub params: ElasticParams,
    pub scaling: ScalingModel,
}

impl Estimates {
    /// Predicted remaining work of a running job (seconds at its requested size).
    pub fn remaining_work_r(&self, r: &RunningJob) -> f64 {
        predicted_remaining(
            r.predicted_runtime,
            r.progress_s,
            self.params.unknown_runtime_s,
        )
    }

    /// Predicted remaining work of a queued job (seconds at its requested size).
    pub fn remaining_work_q(&self, q: &QueuedJob) -> f64 {
        predicted_remaining(
            q.predicted_runtime,
            q.progress_s,
            self.params.unknown_runtime_s,
        )
    }

    /// Ranking key of a queued job: predicted remaining GPU-seconds at its request.
    pub fn key_q(&self, q: &QueuedJob) -> f64 {
        self.remaining_work_q(q) * f64::from(q.requested)
    }

    /// Seconds `w` workers take for `work` seconds of work measured at `requested` workers.
    pub fn time_at(&self, work: f64, requested: u32, w: u32) -> f64 {
        time_at(&self.scaling, work, requested, w)
    }

    /// True when `r`'s rescale cooldown is over at `now`.
    pub fn cooled(&self, r: &RunningJob, now: f64) -> bool {
        r.last_rescale
            .is_none_or(|t| now - t >= self.params.cooldown_s)
    }
}
