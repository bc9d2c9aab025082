//! What the elastic controller predicts about a job ([`Estimates`]): its remaining work, its
//! speed on the GPU type it runs on or would get (type-aware only), its remaining time there at
//! a size on the speedup curve, its ranking key, and whether its cooldown is over.

use super::params::ElasticParams;
use crate::cluster::{ClusterState, QueuedJob, RunningJob};
use crate::policies::marginal::{predicted_remaining, time_at};
use crate::scaling::ScalingModel;

/// The controller's knobs and speedup curve, as one decision uses them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Estimates {
    pub params: ElasticParams,
    pub scaling: ScalingModel,
    /// The cluster has GPU types and the controller is type-aware: predicted times are on
    /// the type a job runs on (or would get), not on the reference type.
    pub typed: bool,
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

    /// Speed of running job `r` where it runs (its slowest GPU type) relative to the
    /// reference type the predictions are measured on; 1 when type-blind.
    pub fn speed_r(&self, snap: &ClusterState, r: &RunningJob) -> f64 {
        if !self.typed {
            return 1.0;
        }
        let slowest = snap
            .placement_of(r)
            .iter()
            .filter_map(|s| snap.nodes.get(s.node as usize))
            .map(|n| snap.job_speed(r.id, n.gpu_type))
            .fold(f64::INFINITY, f64::min);
        positive_or_one(slowest)
    }

    /// Speed of queued job `q` on the fastest of GPU types `types` (the type it would take
    /// with nothing competing; its own when it is bound to one); 1 when type-blind.
    pub fn speed_q(&self, snap: &ClusterState, q: &QueuedJob, types: &[u16]) -> f64 {
        if !self.typed {
            return 1.0;
        }
        if let (false, Some(t)) = (q.type_open, q.gpu_type) {
            return positive_or_one(snap.job_speed(q.id, t));
        }
        let best = types
            .iter()
            .map(|&t| snap.job_speed(q.id, t))
            .fold(0.0, f64::max);
        positive_or_one(best)
    }

    /// Predicted remaining time of running job `r` at its requested size on its GPU type.
    pub fn remaining_r(&self, snap: &ClusterState, r: &RunningJob) -> f64 {
        self.remaining_work_r(r) / self.speed_r(snap, r)
    }

    /// Ranking key of a queued job: predicted remaining GPU-seconds at its request, on the
    /// type it would take (`speed` there, see [`Estimates::speed_q`]).
    pub fn key_q(&self, q: &QueuedJob, speed: f64) -> f64 {
        self.remaining_work_q(q) / speed * f64::from(q.requested)
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

/// `x` when it is a positive finite speed, else 1.
fn positive_or_one(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        1.0
    }
}
