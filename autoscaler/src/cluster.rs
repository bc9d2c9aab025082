//! The cluster as a policy sees it: a [`ClusterState`] of nodes and GPUs by type, running
//! jobs with their current/min/max workers and placement, and queued jobs with their requests.
//! Every backend (the simulator, Kubernetes) builds one on `observe`.

use std::sync::Arc;

use serde::Serialize;

use crate::placement::rules::PlacementRules;

/// A job's id within one backend (the simulator uses the row of the replayed trace; a
/// Kubernetes backend interns `namespace/name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct JobId(pub u64);

/// A GPU model of the cluster and its speed relative to the reference the job durations were
/// measured on (1.0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuType {
    pub name: String,
    pub speed: f64,
}

/// A model class and how fast it runs on each GPU type, relative to the reference type the
/// job durations were measured on (index = the type's index in
/// [`ClusterState::gpu_types`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AffinityClass {
    pub name: String,
    pub speeds: Vec<f64>,
}

/// Per-job GPU-type affinity: each job's model class, and each class's speed per type. Jobs
/// without a class run at their type's [`GpuType::speed`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TypeAffinity {
    pub classes: Vec<AffinityClass>,
    /// Class of each job, by [`JobId`] (ids beyond the end have none).
    pub job_class: Vec<u16>,
}

impl TypeAffinity {
    /// The class of `job`, if it has one.
    pub fn class_of(&self, job: JobId) -> Option<&AffinityClass> {
        let k = self.job_class.get(usize::try_from(job.0).ok()?)?;
        self.classes.get(usize::from(*k))
    }
}

/// One machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeInfo {
    pub name: String,
    /// Index into [`ClusterState::gpu_types`].
    pub gpu_type: u16,
    /// Rack (locality domain).
    pub rack: u32,
    /// GPUs installed.
    pub gpus: u32,
    /// GPUs not allocated to any job (0 while the node is down).
    pub free: u32,
    /// False while the node is failed / cordoned.
    pub healthy: bool,
}

/// GPUs of one node given to one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slot {
    pub node: u32,
    pub gpus: u32,
}

/// A job holding GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunningJob {
    pub id: JobId,
    /// Submit time.
    pub submitted: f64,
    /// When it first started.
    pub first_started: f64,
    /// When its current run (since the last admit) started.
    pub started: f64,
    /// Workers (one GPU each) it holds now.
    pub workers: u32,
    /// Workers it asked for (its static size).
    pub requested: u32,
    pub min_workers: u32,
    pub max_workers: u32,
    /// True while it restarts from a checkpoint after a rescale or resume (holds GPUs, makes
    /// no progress).
    pub restarting: bool,
    /// GPU-seconds it has held so far (Tiresias' attained service).
    pub attained_gpu_s: f64,
    /// Work done, in seconds of running at its requested size on reference GPUs, when the
    /// backend knows it (the simulator does; a real cluster estimates it from training metrics).
    pub progress_s: Option<f64>,
    /// Predicted total run time at its requested size (from Augur's runtime predictor).
    pub predicted_runtime: Option<f64>,
    /// True remaining run time at its requested size. Only the simulator knows it; used by the
    /// oracle baseline, never by Augur's policy.
    pub oracle_remaining_s: Option<f64>,
    /// When it was last rescaled.
    pub last_rescale: Option<f64>,
    /// Range of [`ClusterState::slots`] holding its placement.
    pub slots: (u32, u32),
}

impl RunningJob {
    /// True when its size can change.
    pub fn elastic(&self) -> bool {
        self.min_workers < self.max_workers
    }
}

/// A job waiting for GPUs (never started, or suspended / failed and waiting to resume).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedJob {
    pub id: JobId,
    pub submitted: f64,
    /// When it (re-)entered the queue.
    pub queued_since: f64,
    pub requested: u32,
    pub min_workers: u32,
    pub max_workers: u32,
    /// GPU-seconds it held before (0 unless preempted or failed).
    pub attained_gpu_s: f64,
    /// Seconds it held GPUs before.
    pub run_s: f64,
    /// Work done so far (see [`RunningJob::progress_s`]).
    pub progress_s: Option<f64>,
    pub predicted_runtime: Option<f64>,
    /// Oracle only (see [`RunningJob::oracle_remaining_s`]).
    pub oracle_remaining_s: Option<f64>,
    /// The GPU type it is bound to already (its pods select it), when the backend knows.
    pub gpu_type: Option<u16>,
    /// A type-aware policy may choose its GPU type. `false` when the backend cannot steer it
    /// (its pods are the scheduler's, or it selects a type already: it goes there, or, with no
    /// type, wherever it fits) or nothing measured says which type suits it.
    pub type_open: bool,
}

impl QueuedJob {
    /// True when its size can change.
    pub fn elastic(&self) -> bool {
        self.min_workers < self.max_workers
    }
}

/// What a policy sees: the whole cluster at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClusterState {
    /// Seconds (trace time in the simulator, Unix time on a real cluster).
    pub time: f64,
    pub gpu_types: Vec<GpuType>,
    pub nodes: Vec<NodeInfo>,
    pub running: Vec<RunningJob>,
    /// In queue order (the order jobs entered the queue).
    pub queued: Vec<QueuedJob>,
    /// Placements of the running jobs (see [`RunningJob::slots`]).
    pub slots: Vec<Slot>,
    /// How the backend places gangs, so a policy can check what fits before asking.
    pub rules: PlacementRules,
    /// GPU utilisation measured by the backend (DCGM), when it has one.
    pub measured_utilisation: Option<f64>,
    /// How fast each job runs on each GPU type, when the backend knows it.
    #[serde(skip)]
    pub affinity: Option<Arc<TypeAffinity>>,
}

impl ClusterState {
    /// GPUs of healthy nodes.
    pub fn healthy_gpus(&self) -> u32 {
        self.nodes
            .iter()
            .filter(|n| n.healthy)
            .map(|n| n.gpus)
            .sum()
    }

    /// GPUs not allocated.
    pub fn free_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.free).sum()
    }

    /// Allocated share of the healthy GPUs (0 when none is healthy).
    pub fn allocation(&self) -> f64 {
        let h = self.healthy_gpus();
        if h == 0 {
            return 0.0;
        }
        f64::from(h.saturating_sub(self.free_gpus())) / f64::from(h)
    }

    /// Speed of `job` on GPU type `gpu_type` relative to the reference type: its class's
    /// measured speed, else the type's nominal speed, else 1.
    pub fn job_speed(&self, job: JobId, gpu_type: u16) -> f64 {
        let t = usize::from(gpu_type);
        self.affinity
            .as_ref()
            .and_then(|a| a.class_of(job))
            .and_then(|c| c.speeds.get(t).copied())
            .or_else(|| self.gpu_types.get(t).map(|g| g.speed))
            .unwrap_or(1.0)
    }

    /// The GPU type of every node of a placement, when they are all one type.
    pub fn type_of(&self, slots: &[Slot]) -> Option<u16> {
        let mut types = slots
            .iter()
            .map(|s| self.nodes.get(s.node as usize).map(|n| n.gpu_type));
        let first = types.next()??;
        types.all(|t| t == Some(first)).then_some(first)
    }

    /// Where a running job's workers are.
    pub fn placement_of(&self, job: &RunningJob) -> &[Slot] {
        let (a, b) = (job.slots.0 as usize, job.slots.1 as usize);
        self.slots.get(a..b).unwrap_or(&[])
    }
}
