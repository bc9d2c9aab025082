//! The cluster seen by a policy ([`ClusterSnapshot`]), what a policy asks for ([`Action`],
//! [`Decision`]) and the [`ClusterBackend`] trait that observes and acts on a real or simulated
//! cluster.
//!
//! The trait is shaped for Kubernetes (issue #8): `observe` is a list of nodes, of elastic
//! training jobs (Kubeflow `PyTorchJob`s with `elasticPolicy.minReplicas/maxReplicas`) and of
//! pending workloads (pending pods / PodGroups / Kueue `Workload`s); `set_workers` is a patch of
//! the `/scale` subresource; `admit` un-suspends a queued workload; `suspend` sets
//! `spec.suspend` (or deletes the pods after a checkpoint). Every call is async (kube-rs is) and
//! can fail with a [`BackendError`] whose [`ErrorKind`](crate::ErrorKind) says whether a retry
//! can help. The simulator implements it with futures that are ready at once.

use std::future::Future;

use serde::Serialize;

use crate::error::BackendError;
use crate::placement::PlacementRules;

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

/// One machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeInfo {
    pub name: String,
    /// Index into [`ClusterSnapshot::gpu_types`].
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
    /// Range of [`ClusterSnapshot::slots`] holding its placement.
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
}

impl QueuedJob {
    /// True when its size can change.
    pub fn elastic(&self) -> bool {
        self.min_workers < self.max_workers
    }
}

/// What a policy sees: the whole cluster at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClusterSnapshot {
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
}

impl ClusterSnapshot {
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

    /// Where a running job's workers are.
    pub fn placement_of(&self, job: &RunningJob) -> &[Slot] {
        let (a, b) = (job.slots.0 as usize, job.slots.1 as usize);
        self.slots.get(a..b).unwrap_or(&[])
    }
}

/// Something a policy asks the backend to do.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Start (or resume) a queued job with this many workers.
    Admit { job: JobId, workers: u32 },
    /// Rescale a running job (checkpoint-restart at the new size).
    SetWorkers { job: JobId, workers: u32 },
    /// Stop a running job after a checkpoint and put it back in the queue.
    Suspend { job: JobId },
}

impl Action {
    /// The job the action is about.
    pub fn job(&self) -> JobId {
        match *self {
            Action::Admit { job, .. }
            | Action::SetWorkers { job, .. }
            | Action::Suspend { job } => job,
        }
    }
}

/// Why a policy took a decision (kept in the decision log).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// Next in submit order.
    Fifo,
    /// Shortest predicted GPU-time in the queue.
    ShortestPredicted { predicted_gpu_s: f64 },
    /// Shortest true remaining GPU-time (oracle).
    ShortestRemaining { remaining_gpu_s: f64 },
    /// Highest-priority queue of discretised attained service (Tiresias).
    LeastAttained { queue: u8 },
    /// Preempted for a job with a better priority.
    Preempted { by: JobId },
    /// Marginal gain in completion time per extra worker (Optimus), seconds.
    MarginalGain { gain_s: f64 },
    /// Waited past the starvation limit: served before shorter jobs.
    Starving { waited_s: f64 },
    /// Started below its requested size because the cluster is busy.
    StartShrunk { free_gpus: u32 },
    /// GPUs sat idle: grow the job.
    IdleGpus { idle_gpus: u32 },
    /// Workers lent to the job above its request are taken back for a queued job.
    Reclaimed { by: JobId },
    /// The queue's predicted wait is high: shrink the job towards its minimum.
    QueueWaitHigh { predicted_wait_s: f64 },
}

/// An action and why.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Decision {
    #[serde(flatten)]
    pub action: Action,
    #[serde(flatten)]
    pub reason: Reason,
}

/// A decision and what became of it, with the time it was taken.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionRecord {
    pub time: f64,
    #[serde(flatten)]
    pub decision: Decision,
    /// `None` when applied; the error otherwise.
    pub error: Option<String>,
}

/// A cluster that can be observed and acted on: the simulator, or Kubernetes (issue #8).
///
/// Every method may fail; [`BackendError::is_retryable`] tells the controller whether trying
/// again can help. Actions are idempotent where the cluster allows (setting the workers a job
/// already has is a no-op).
pub trait ClusterBackend: Send {
    /// The cluster now.
    fn observe(&mut self) -> impl Future<Output = Result<ClusterSnapshot, BackendError>> + Send;

    /// Starts (or resumes) a queued job with `workers` workers, all or none (gang).
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Rescales a running elastic job to `workers` in `[min, max]`.
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Checkpoints a running job, frees its GPUs and puts it back in the queue.
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Carries out one action.
    fn apply(&mut self, action: Action) -> impl Future<Output = Result<(), BackendError>> + Send {
        async move {
            match action {
                Action::Admit { job, workers } => self.admit(job, workers).await,
                Action::SetWorkers { job, workers } => self.set_workers(job, workers).await,
                Action::Suspend { job } => self.suspend(job).await,
            }
        }
    }
}
