//! The Kubernetes backend: the [`ClusterBackend`](crate::ClusterBackend) the controller drives
//! on a real cluster, on kube-rs.
//!
//! - **Observe** from watches (kube-rs runtime reflectors, not polling): nodes, pods, and the
//!   jobs of each kind served ([`kinds`]): Kubeflow `PyTorchJob`s (`kubeflow.org/v1`),
//!   Kubeflow Trainer v2 `TrainJob`s (`trainer.kubeflow.org/v1alpha1`) and Kueue-managed
//!   `batch/v1` Jobs (label `kueue.x-k8s.io/queue-name`, selected server-side); and, where
//!   installed, Volcano `PodGroup`s (`scheduling.volcano.sh/v1beta1`) and Kueue `Workload`s
//!   (`kueue.x-k8s.io/v1beta1`). [`snapshot`] turns them into a
//!   [`ClusterState`](crate::ClusterState) in GPUs; [`workloads`] cites the TrainJob and
//!   Job fields read.
//! - **Act** where the job's API allows it, never outside its bounds:
//!   - `PyTorchJob` with `spec.elasticPolicy` {`minReplicas`, `maxReplicas`}: the `/scale`
//!     subresource (specpath `.spec.pytorchReplicaSpecs.Worker.replicas`); `set_workers`
//!     rescales a running job, `admit` sizes a queued one so its gang fits (the cluster's
//!     scheduler then starts it; admitting at the size it already has is a no-op);
//!   - running Kueue elastic `batch/v1` Job (annotation `kueue.x-k8s.io/elastic-job: "true"`,
//!     the `ElasticJobsViaWorkloadSlices` gate seen as its pod template's scheduling gate,
//!     `spec.completions`, no partial admission): a merge patch of `spec.parallelism` within
//!     `[1, spec.completions]` (Kueue's workload slices then shrink its Workload in place or
//!     admit the extra pods); a queued Job is Kueue's to admit, never sized;
//!   - `TrainJob`: observed only (`spec.trainer.numNodes` is immutable, no `/scale`).
//!
//!   Every other job is observed, never scaled. An admission that names a GPU type first
//!   steers the suspended, never-started job there ([`steer`]: a `nodeSelector` on the GPU
//!   product label in its pod templates, a TrainJob's in a `podTemplateOverrides` entry of its
//!   trainer nodes, and the type and reason as annotations); the job watches read the type
//!   back ([`ClusterEvent::Typed`]); a job that selects the type already is not written to.
//!   With a [`SpeedHint`] the snapshot carries each job's speed per type and which queued jobs
//!   a type-aware policy may steer ([`snapshot`]). `suspend` is refused (Kueue owns
//!   `spec.suspend`), so run the elastic policy with
//!   [`ElasticParams::live`](crate::ElasticParams::live) here (no preemption, no migration).
//! - **Safety** ([`Safety`]): dry-run; a per-job hourly action budget; a running job is scaled
//!   down only when its last checkpoint is known (annotation [`CHECKPOINT_ANNOTATION`]) or its
//!   run is older than a grace period; every patch carries the `resourceVersion` it read (409 →
//!   re-read and retry), 429/5xx/timeouts back off with full jitter; actions are refused when
//!   the snapshot they were planned on is too old or the job's replicas changed since, or when
//!   a watch is not in sync; only the lease holder acts ([`lease`]).
//! - **Write-back** ([`writeback`]): the leader writes predictions onto the jobs of every kind
//!   and their Kueue `Workload`s as annotations (merge patches of `metadata.annotations` only,
//!   rate-limited, none in dry-run) and posts a Kubernetes Event for each scaling decision.
//! - **Events** ([`events`]): job submitted / started / finished (with GPUs and Kueue queue)
//!   and every snapshot go to a callback the service hooks into its ingest path.
//! - **Live loop**: it is a [`LiveBackend`](crate::live::LiveBackend), so
//!   [`crate::live::LiveLoop`] drives it like the simulator (decision log with reasons and
//!   outcomes, pause, dry-run, history). Its clock is wall time; a tick asks the policy when a
//!   watch saw a change or [`KubeConfig::resync`] passed; it may act only while it holds the
//!   lease. Lifecycle events go to the [`Hooks::events`] sink (they carry the job's id, GPUs and
//!   outcome), not
//!   [`LiveBackend::drain_events`](crate::live::LiveBackend::drain_events).

mod annotate;
mod api;
mod backend;
mod clock;
mod config;
mod drive;
pub mod events;
pub mod kinds;
pub mod lease;
pub mod objects;
pub mod safety;
mod scale;
pub mod snapshot;
pub mod steer;
mod watch;
pub mod workloads;
pub mod writeback;

pub use api::{client, podgroup_resource, pytorchjob_resource, workload_resource};
pub use backend::{KubeBackend, ScaleRecord, SteerRecord};
pub use clock::{system_clock, Clock};
pub use config::{Hooks, KubeConfig};
pub use events::{ClusterEvent, EventSink, Lifecycle, Outcome};
pub use kinds::{JobKind, QUEUE_LABEL};
pub use lease::{LeaderElector, LeaderGate, LeaseConfig};
pub use objects::{
    JobFacts, JobKey, JobState, JobView, ObserveConfig, RuntimeHint, SpeedHint, TypeSpeeds,
    CHECKPOINT_ANNOTATION, PREDICTED_ANNOTATION, REQUESTED_ANNOTATION,
};
pub use safety::Safety;
pub use steer::{GPU_TYPE_ANNOTATION, GPU_TYPE_REASON_ANNOTATION};
pub use watch::WatchSync;
pub use writeback::{
    AdviceAnswer, JobAdvice, JobPhase, JobPredictions, Span, WriteBackConfig, WriteBackReport,
    WRITEBACK_PREFIX,
};
