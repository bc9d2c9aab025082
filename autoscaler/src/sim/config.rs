//! What a replay runs under besides its jobs and policy ([`SimConfig`]): the cluster, its
//! placement rules, which jobs are elastic ([`ElasticSpec`]), the speedup curve, checkpoint and
//! restart costs, placement penalties, node failures and the seed.

use augur_numeric::SplitMix64;
use serde::Serialize;

use super::faults::NodeFault;
use super::spec::ClusterSpec;
use crate::cluster::TypeAffinity;
use crate::error::SimError;
use crate::placement::PlacementRules;
use crate::scaling::ScalingModel;

/// Which jobs are elastic and their bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ElasticSpec {
    /// Share of jobs (drawn with the seed) that are elastic.
    pub share: f64,
    /// `min = max(1, ceil(requested × min_fraction))`.
    pub min_fraction: f64,
    /// `max = min(max_workers, ceil(requested × max_factor))`.
    pub max_factor: f64,
    pub max_workers: u32,
}

impl ElasticSpec {
    /// Draws whether a job of `requested` workers is elastic (one draw of `rng` per job) and
    /// returns its `[min, max]` workers on a cluster of `total` GPUs (`[requested, requested]`
    /// when rigid).
    pub(super) fn draw_bounds(
        &self,
        rng: &mut SplitMix64,
        requested: u32,
        total: u32,
    ) -> (u32, u32) {
        let r = requested;
        let elastic = rng.unit() < self.share;
        if !elastic {
            return (r, r);
        }
        let min = ((f64::from(r) * self.min_fraction).ceil() as u32).clamp(1, r);
        let max = ((f64::from(r) * self.max_factor).ceil() as u32)
            .min(self.max_workers.max(r))
            .min(total)
            .max(r);
        (min, max)
    }
}

impl Default for ElasticSpec {
    fn default() -> Self {
        ElasticSpec {
            share: 0.5,
            min_fraction: 0.5,
            max_factor: 4.0,
            max_workers: 64,
        }
    }
}

/// Everything the simulator needs besides the jobs and the policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    pub cluster: ClusterSpec,
    pub rules: PlacementRules,
    pub elastic: ElasticSpec,
    pub scaling: ScalingModel,
    /// Checkpoint-restart pause of a rescale or resume, seconds.
    pub rescale_pause_s: f64,
    /// Periodic checkpoint interval of a running job, seconds of run.
    pub checkpoint_interval_s: f64,
    /// Speed factor of a job on more nodes than it needs.
    pub spread_penalty: f64,
    /// Speed factor of a job spanning racks.
    pub cross_rack_penalty: f64,
    pub faults: Vec<NodeFault>,
    /// Per-job GPU-type affinity, its `job_class` indexed by [`SimJob::row`](super::SimJob)
    /// (`u16::MAX` or past the end: no class, the type's nominal speed; `None`: every job
    /// runs at its type's nominal speed).
    pub affinity: Option<TypeAffinity>,
    pub seed: u64,
    /// Timeline samples to keep (queue length, utilisation) over the replay.
    pub timeline_points: usize,
    /// Decisions to keep in the log (the rest are only counted).
    pub max_logged_decisions: usize,
}

impl SimConfig {
    /// Defaults around a cluster: PACK with Philly-like locality relaxing, half the jobs
    /// elastic, the Pollux-fitted Amdahl curve, 30 s rescale pause, 30 min checkpoints.
    pub fn new(cluster: ClusterSpec) -> SimConfig {
        SimConfig {
            cluster,
            rules: PlacementRules::default(),
            elastic: ElasticSpec::default(),
            scaling: ScalingModel::default(),
            rescale_pause_s: 30.0,
            checkpoint_interval_s: 1800.0,
            spread_penalty: 0.95,
            cross_rack_penalty: 0.9,
            faults: Vec::new(),
            affinity: None,
            seed: 0,
            timeline_points: 2000,
            max_logged_decisions: 200_000,
        }
    }

    pub(super) fn validate(&self) -> Result<(), SimError> {
        let e = &self.elastic;
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        let elastic_ok = (0.0..=1.0).contains(&e.share)
            && (0.0..=1.0).contains(&e.min_fraction)
            && e.max_factor.is_finite()
            && e.max_factor >= 1.0;
        if !elastic_ok {
            return Err(SimError::Config(
                "elastic share and min fraction must be in [0, 1], max factor ≥ 1".into(),
            ));
        }
        let times_ok = ok(self.rescale_pause_s)
            && self.checkpoint_interval_s.is_finite()
            && self.checkpoint_interval_s > 0.0
            && self.spread_penalty > 0.0
            && self.spread_penalty <= 1.0
            && self.cross_rack_penalty > 0.0
            && self.cross_rack_penalty <= 1.0;
        if !times_ok {
            return Err(SimError::Config(
                "pause ≥ 0, checkpoint interval > 0, penalties in (0, 1]".into(),
            ));
        }
        if let Some(a) = &self.affinity {
            let types = self.cluster.gpu_types.len();
            let bad = a.classes.iter().find(|c| {
                c.speeds.len() != types || c.speeds.iter().any(|s| !(s.is_finite() && *s > 0.0))
            });
            if let Some(c) = bad {
                return Err(SimError::Config(format!(
                    "affinity class `{}`: need one speed > 0 per GPU type ({types})",
                    c.name
                )));
            }
            if a.job_class
                .iter()
                .any(|&k| k != u16::MAX && usize::from(k) >= a.classes.len())
            {
                return Err(SimError::Config(
                    "affinity: a job's class is not in the class list".into(),
                ));
            }
        }
        if self.cluster.nodes.is_empty() || self.cluster.total_gpus() == 0 {
            return Err(SimError::Cluster("the cluster has no GPUs".into()));
        }
        Ok(())
    }
}
