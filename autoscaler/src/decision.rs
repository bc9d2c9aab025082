//! What a policy asks a backend to do ([`Action`]), why ([`Reason`]), the pair ([`Decision`]),
//! and a decision with its outcome ([`DecisionRecord`], the decision log).

use serde::Serialize;

use crate::cluster::JobId;

/// Something a policy asks the backend to do.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Start (or resume) a queued job with this many workers, on nodes of one GPU type (an
    /// index into the snapshot's types) when `gpu_type` is set, else wherever it fits.
    Admit {
        job: JobId,
        workers: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        gpu_type: Option<u16>,
    },
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

    /// Short stable name (metric label, JSON).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Admit { .. } => "admit",
            Action::SetWorkers { .. } => "set_workers",
            Action::Suspend { .. } => "suspend",
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
    /// Started on GPU type `gpu_type` (index into the snapshot's types; the report names it),
    /// where it runs at `speed` × the reference type: `gain` is that speed over the type's
    /// typical speed (its comparative advantage there). `step` is the admission step that
    /// started it.
    TypeGain {
        gpu_type: u16,
        speed: f64,
        gain: f64,
        step: &'static str,
    },
    /// Moved from GPU type `from` to type `to` (indices into the snapshot's types; the report
    /// names them) where it runs `gain` times faster (`speed_from` → `speed_to` × the reference
    /// type), saving `saved_s` of its predicted remaining time after the restart pause. The
    /// job checkpoints and restarts on the new type (its admission there names the type).
    Migrated {
        from: u16,
        to: u16,
        speed_from: f64,
        speed_to: f64,
        gain: f64,
        saved_s: f64,
    },
}

impl Reason {
    /// Short stable name (metric label, JSON).
    pub fn name(&self) -> &'static str {
        match self {
            Reason::Fifo => "fifo",
            Reason::ShortestPredicted { .. } => "shortest_predicted",
            Reason::ShortestRemaining { .. } => "shortest_remaining",
            Reason::LeastAttained { .. } => "least_attained",
            Reason::Preempted { .. } => "preempted",
            Reason::MarginalGain { .. } => "marginal_gain",
            Reason::Starving { .. } => "starving",
            Reason::StartShrunk { .. } => "start_shrunk",
            Reason::IdleGpus { .. } => "idle_gpus",
            Reason::Reclaimed { .. } => "reclaimed",
            Reason::QueueWaitHigh { .. } => "queue_wait_high",
            Reason::TypeGain { .. } => "type_gain",
            Reason::Migrated { .. } => "migrated",
        }
    }
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
