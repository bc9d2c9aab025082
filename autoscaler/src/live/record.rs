//! What the live loop keeps and reports: its knobs ([`LiveConfig`]), its decisions with their
//! outcome ([`LiveDecision`]), the cluster summarised at an instant ([`ClusterPoint`]), and what
//! one tick did ([`StepReport`]).

use serde::Serialize;

use super::backend::JobLifecycleEvent;
use crate::cluster::ClusterState;
use crate::decision::Decision;

/// Knobs of the live loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LiveConfig {
    /// Decisions kept (oldest dropped first).
    pub decisions_kept: usize,
    /// Cluster history points kept.
    pub history_kept: usize,
    /// Least cluster time between two history points (seconds).
    pub history_every_s: f64,
}

impl Default for LiveConfig {
    fn default() -> LiveConfig {
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: 300.0,
        }
    }
}

/// What became of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    Failed,
    /// Decided in dry-run mode: logged, not carried out.
    DryRun,
}

impl Outcome {
    /// Short stable name (metric label).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Failed => "failed",
            Outcome::DryRun => "dry_run",
        }
    }
}

/// A decision of the live loop with its reason and outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveDecision {
    /// Sequence number (1, 2, ...) over the loop's life.
    pub seq: u64,
    /// Cluster time it was taken at.
    pub time: f64,
    #[serde(flatten)]
    pub decision: Decision,
    pub outcome: Outcome,
    pub error: Option<String>,
}

/// The cluster at one instant, summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClusterPoint {
    /// Cluster time (seconds).
    pub time: f64,
    pub healthy_gpus: u32,
    pub busy_gpus: u32,
    /// Allocated share of the healthy GPUs.
    pub utilisation: f64,
    pub running: u32,
    pub queued: u32,
    /// GPUs the queued jobs ask for.
    pub queued_gpus: u32,
    /// Running jobs at a size other than their request.
    pub rescaled: u32,
}

impl ClusterPoint {
    /// Summarises a snapshot.
    pub fn of(snap: &ClusterState) -> ClusterPoint {
        let healthy = snap.healthy_gpus();
        ClusterPoint {
            time: snap.time,
            healthy_gpus: healthy,
            busy_gpus: healthy.saturating_sub(snap.free_gpus()),
            utilisation: snap
                .measured_utilisation
                .unwrap_or_else(|| snap.allocation()),
            running: snap.running.len() as u32,
            queued: snap.queued.len() as u32,
            queued_gpus: snap.queued.iter().map(|q| q.requested).sum(),
            rescaled: snap
                .running
                .iter()
                .filter(|r| r.workers != r.requested)
                .count() as u32,
        }
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// The policy was asked.
    pub decided: bool,
    /// Decisions taken (applied, failed or dry-run).
    pub decisions: usize,
    /// Actions the cluster's own scheduler took (paused / dry-run).
    pub unmanaged: usize,
    /// Job lifecycle events since the last tick.
    pub events: Vec<JobLifecycleEvent>,
    /// The cluster after the tick.
    pub cluster: ClusterPoint,
    /// An error observing the cluster (the tick is retried on the next one).
    pub error: Option<String>,
}
