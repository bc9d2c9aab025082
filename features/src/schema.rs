//! Which features exist, in which order, and what they are called.

use augur_datasets::JobRecord;
use serde::{Deserialize, Serialize};

/// Bumped whenever the meaning or order of features changes; stored with every model.
pub const FEATURE_SCHEMA_VERSION: u32 = 2;

/// What a history is keyed by. Each key kind contributes [`PER_KEY_FEATURES`] features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// Every job (cluster-wide history).
    All,
    User,
    Group,
    JobName,
    /// Group × GPUs requested.
    GroupGpus,
    /// User × GPUs requested.
    UserGpus,
    /// User × nodes requested.
    UserNodes,
    /// User × requested wall time.
    UserRequested,
    /// User × job name.
    UserName,
    /// Cluster × GPUs requested.
    ClusterGpus,
    /// GPUs requested alone.
    Gpus,
    /// Nodes requested alone.
    Nodes,
    /// Requested wall time alone.
    Requested,
    /// GPU type.
    GpuType,
    /// Cluster alone.
    Cluster,
}

impl KeyKind {
    /// Snake-case name used in feature names.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::All => "all",
            KeyKind::User => "user",
            KeyKind::Group => "group",
            KeyKind::JobName => "name",
            KeyKind::GroupGpus => "group_gpus",
            KeyKind::UserGpus => "user_gpus",
            KeyKind::UserNodes => "user_nodes",
            KeyKind::UserRequested => "user_req",
            KeyKind::UserName => "user_name",
            KeyKind::ClusterGpus => "cluster_gpus",
            KeyKind::Gpus => "gpus",
            KeyKind::Nodes => "nodes",
            KeyKind::Requested => "req",
            KeyKind::GpuType => "gpu_type",
            KeyKind::Cluster => "cluster",
        }
    }

    /// The key of `job` under this kind, or `None` when the job lacks the fields.
    pub fn key_of(self, job: &JobRecord) -> Option<u64> {
        let mut h = KeyHasher::new(self as u64);
        let num = |v: Option<f64>| v.map(|x| x.to_bits());
        match self {
            KeyKind::All => {}
            KeyKind::User => h.str(job.user.as_deref()?),
            KeyKind::Group => h.str(job.group.as_deref()?),
            KeyKind::JobName => h.str(job.job_name.as_deref()?),
            KeyKind::GroupGpus => {
                h.str(job.group.as_deref()?);
                h.u64(num(job.num_gpus)?);
            }
            KeyKind::UserGpus => {
                h.str(job.user.as_deref()?);
                h.u64(num(job.num_gpus)?);
            }
            KeyKind::UserNodes => {
                h.str(job.user.as_deref()?);
                h.u64(num(job.num_nodes)?);
            }
            KeyKind::UserRequested => {
                h.str(job.user.as_deref()?);
                h.u64(num(job.requested_time)?);
            }
            KeyKind::UserName => {
                h.str(job.user.as_deref()?);
                h.str(job.job_name.as_deref()?);
            }
            KeyKind::ClusterGpus => {
                h.str(job.cluster.as_deref()?);
                h.u64(num(job.num_gpus)?);
            }
            KeyKind::Gpus => h.u64(num(job.num_gpus)?),
            KeyKind::Nodes => h.u64(num(job.num_nodes)?),
            KeyKind::Requested => h.u64(num(job.requested_time)?),
            KeyKind::GpuType => h.str(job.gpu_type.as_deref()?),
            KeyKind::Cluster => h.str(job.cluster.as_deref()?),
        }
        Some(h.finish())
    }

    /// The fields a key kind needs, as a check on a sample of jobs.
    fn available(self, job: &JobRecord) -> bool {
        self == KeyKind::All || self.key_of(job).is_some()
    }
}

/// FNV-1a, stable across runs and platforms (keys are persisted with online state).
struct KeyHasher(u64);

impl KeyHasher {
    fn new(seed: u64) -> Self {
        let mut h = KeyHasher(0xcbf2_9ce4_8422_2325);
        h.u64(seed);
        h
    }
    fn byte(&mut self, b: u8) {
        self.0 ^= u64::from(b);
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }
    fn u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.byte(b);
        }
    }
    fn str(&mut self, s: &str) {
        for b in s.bytes() {
            self.byte(b);
        }
        self.byte(0xff);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Static (request-only) features, in order.
pub const STATIC_FEATURES: [&str; 8] = [
    "log_gpus",
    "log_nodes",
    "log_cpus",
    "log_mem_mib",
    "log_requested_time",
    "hour_of_day",
    "day_of_week",
    "gpus_fractional",
];

/// History features per key kind, in order (each prefixed with the key kind's name).
pub const PER_KEY_FEATURES: [&str; 17] = [
    "n_done",
    "last1",
    "mean2",
    "mean5",
    "median20",
    "std20",
    "fail_share",
    "since_last_submit",
    "submits_1h",
    "submits_10m",
    "unfinished",
    "oldest_unfinished_age",
    "since_last_finish",
    "q25_20",
    "q75_20",
    "mean_all",
    "ewm",
];

/// Extra history features per key kind when the trace has requested wall times: the same
/// key's finished jobs' ln(duration / requested time). Users who ask for 6 h and stop at
/// 2 h tend to keep doing so.
pub const RATIO_FEATURES: [&str; 3] = ["ratio_last1", "ratio_mean2", "ratio_median20"];

/// The feature layout for one model: static features then, per key kind, the history ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureSchema {
    /// [`FEATURE_SCHEMA_VERSION`] at creation.
    pub version: u32,
    /// History key kinds, in feature order.
    pub keys: Vec<KeyKind>,
    /// Whether each key kind also has the [`RATIO_FEATURES`].
    #[serde(default)]
    pub ratio: bool,
}

impl FeatureSchema {
    /// All key kinds that at least 1% of `jobs` have the fields for.
    pub fn for_jobs(jobs: &[JobRecord]) -> FeatureSchema {
        const CANDIDATES: [KeyKind; 15] = [
            KeyKind::All,
            KeyKind::User,
            KeyKind::Group,
            KeyKind::JobName,
            KeyKind::GroupGpus,
            KeyKind::UserGpus,
            KeyKind::UserNodes,
            KeyKind::UserRequested,
            KeyKind::UserName,
            KeyKind::ClusterGpus,
            KeyKind::Gpus,
            KeyKind::Nodes,
            KeyKind::Requested,
            KeyKind::GpuType,
            KeyKind::Cluster,
        ];
        let step = (jobs.len() / 5000).max(1);
        let sample: Vec<&JobRecord> = jobs.iter().step_by(step).collect();
        let keys = CANDIDATES
            .into_iter()
            .filter(|k| {
                let n = sample.iter().filter(|j| k.available(j)).count();
                n * 100 >= sample.len().max(1)
            })
            .collect();
        let with_req = sample.iter().filter(|j| j.requested_time.is_some()).count();
        FeatureSchema {
            version: FEATURE_SCHEMA_VERSION,
            keys,
            ratio: with_req * 100 >= sample.len().max(1),
        }
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        STATIC_FEATURES.len() + self.keys.len() * self.per_key_len()
    }

    /// Number of features each key kind contributes.
    pub fn per_key_len(&self) -> usize {
        PER_KEY_FEATURES.len() + if self.ratio { RATIO_FEATURES.len() } else { 0 }
    }

    /// Always false: there are static features.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Feature names in order.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = STATIC_FEATURES.iter().map(|s| s.to_string()).collect();
        for k in &self.keys {
            for f in PER_KEY_FEATURES {
                out.push(format!("{}:{f}", k.name()));
            }
            if self.ratio {
                for f in RATIO_FEATURES {
                    out.push(format!("{}:{f}", k.name()));
                }
            }
        }
        out
    }
}
