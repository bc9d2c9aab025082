//! What `GET /v1/cluster` and the controller's endpoints show, in one shape per backend:
//! the controller's switches and each backend's view of its cluster.

use augur_autoscaler::live::ClusterPoint;
use serde::Serialize;
use utoipa::ToSchema;

use super::health::BackendHealth;

/// The controller's switches.
#[derive(Debug, Serialize, ToSchema)]
pub struct Switches {
    /// `loading`, `starting`, `running`, or `failed: why`.
    pub status: String,
    pub policy: &'static str,
    pub paused: bool,
    pub dry_run: bool,
    /// Whether the backend is up (as `augur_backend_up` and `/readyz` see it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<BackendHealth>,
}

/// The simulated replay under the controller.
#[derive(Debug, Serialize, ToSchema)]
pub struct SimulatorView {
    pub controller: Switches,
    /// `simulator`.
    pub backend: &'static str,
    /// The replayed dataset.
    pub trace: String,
    /// Trace seconds per wall second.
    pub speed: f64,
    /// How many times the replay started over.
    pub lap: u32,
    pub jobs_in_replay: usize,
    pub finished_jobs: usize,
    pub ticks: u64,
    /// The cluster now (`ClusterPoint`: time, GPUs, utilisation, running, queued, rescaled).
    #[schema(value_type = Object)]
    pub now: ClusterPoint,
}

/// The Kubernetes cluster under the controller.
#[derive(Debug, Serialize, ToSchema)]
pub struct KubernetesView {
    pub controller: Switches,
    /// `kubernetes`.
    pub backend: &'static str,
    /// The watched namespace (none: all).
    pub namespace: Option<String>,
    /// This replica holds the lease and may act.
    pub leader: bool,
    pub watches_synced: bool,
    /// Volcano `PodGroup`s are watched.
    pub volcano: bool,
    /// Kueue `Workload`s are watched.
    pub kueue: bool,
    /// Scales applied (dry-run ones not counted).
    pub scales: usize,
    pub ticks: u64,
    /// The cluster now (`ClusterPoint`).
    #[schema(value_type = Object)]
    pub now: ClusterPoint,
}

/// `GET /v1/cluster` under `--backend slurm`.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct SlurmView {
    /// Always `slurm`.
    pub backend: &'static str,
    pub cluster: String,
    /// The last poll worked.
    pub up: bool,
    /// When the last poll that worked ended (Unix seconds).
    pub last_poll: Option<f64>,
    /// Why the last poll failed, while it does.
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    pub pending_jobs: usize,
    pub running_jobs: usize,
    pub nodes: u64,
    pub cpus: f64,
    pub total_gpus: f64,
    pub busy_gpus: f64,
    pub poll_seconds: f64,
}

/// `GET /v1/cluster`: the cluster the controller acts on.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ClusterView {
    /// Not loaded yet (or failed: see the controller's status).
    Loading {
        controller: Switches,
        speed: f64,
    },
    Simulator(Box<SimulatorView>),
    Kubernetes(Box<KubernetesView>),
    /// `--backend slurm` (observe-only: no controller).
    Slurm(Box<SlurmView>),
}
