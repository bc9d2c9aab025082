//! What the live loop needs of a cluster ([`LiveBackend`]) and the job lifecycle events a
//! backend reports ([`JobLifecycleEvent`]).

use std::time::Duration;

use serde::Serialize;

use crate::backend::ClusterBackend;
use crate::cluster::JobId;

/// A cluster the live loop can drive: a [`ClusterBackend`] plus how its clock moves and what
/// happens while Augur does not act.
pub trait LiveBackend: ClusterBackend {
    /// Lets `wall` of wall-clock time pass. The simulator advances `speed × wall` of trace
    /// time; a real cluster does nothing (its clock moves on its own). Returns true when
    /// something happened that a policy should look at (a real cluster: always true).
    fn tick(&mut self, wall: Duration) -> bool;

    /// Runs the cluster's own scheduler for one decision while Augur's controller does not act
    /// (paused or dry-run), so the cluster keeps working; returns the actions it took. The
    /// default does nothing: on Kubernetes the default scheduler runs anyway.
    fn unmanaged_step(&mut self) -> usize {
        0
    }

    /// Appends the job lifecycle events since the last call (default: none).
    fn drain_events(&mut self, _out: &mut Vec<JobLifecycleEvent>) {}

    /// False while this backend must not act (Kubernetes: another replica holds the leader
    /// lease): the loop then neither decides nor acts, and keeps observing. Default: true.
    fn may_act(&self) -> bool {
        true
    }
}

/// What happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JobLifecycleKind {
    /// It entered the queue for the first time.
    Submitted,
    /// It got GPUs for the first time.
    Started { workers: u32 },
    /// It finished; `run_s` is the time from its first start to its end (rescale pauses and
    /// preemptions included).
    Finished { run_s: f64 },
}

/// A job's lifecycle event at a cluster time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JobLifecycleEvent {
    /// Cluster time (trace seconds in the simulator).
    pub time: f64,
    pub job: JobId,
    /// Row of the replayed job table (the simulator's
    /// [`SimJob::row`](crate::sim::SimJob::row)).
    pub row: Option<usize>,
    /// Replay lap (0 for the first pass over the trace).
    pub lap: u32,
    #[serde(flatten)]
    pub kind: JobLifecycleKind,
}
