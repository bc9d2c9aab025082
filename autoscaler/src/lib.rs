//! # augur-autoscaler
//!
//! **One job:** decide and carry out elastic scaling of GPU training jobs, and prove on real
//! traces that the decisions beat static allocation and the best-known schedulers.
//!
//! - [`ClusterBackend`]: observe a [`ClusterState`] (nodes and GPUs by type, running jobs
//!   with current/min/max workers, queued jobs with their requests, utilisation) and act
//!   (admit, set a job's workers, suspend), each act able to fail with a retryable or a
//!   permanent [`BackendError`]. Async, shaped for the Kubernetes backend.
//! - [`Policy`] ([`policies`]): one trait for every scheduler: [`Fifo`], [`SjfPredicted`],
//!   [`SrtfOracle`], [`Tiresias`], [`Optimus`] and Augur's [`ElasticController`]. A policy
//!   reads a snapshot and returns [`Decision`]s (an [`Action`] and its [`Reason`]); it checks
//!   what fits with the backend's own gang [`placement`].
//! - [`Controller`]: the reconcile loop over any backend: observe, decide, act, retry what is
//!   retryable, log every decision.
//! - [`kubernetes::KubeBackend`]: the same trait on a real cluster (Kubeflow `PyTorchJob`
//!   elastic workers scaled through `/scale`, queue state from watches, leader election).
//! - [`sim::Simulator`]: the discrete-event simulator backend replaying a job table (gang
//!   scheduling, PACK/SPREAD, locality relaxing with wait, elastic jobs on a fitted
//!   [`ScalingModel`], checkpoint-restart pauses, node failures), deterministic with a seed.
//!
//! Predicted runtimes come in with the jobs ([`sim::SimJob::predicted`], or the snapshot's
//! `predicted_runtime` on a live cluster): this crate does not care how they are made.
//!
//! ```
//! use augur_autoscaler::sim::{ClusterSpec, SimConfig, SimJob, Simulator};
//! use augur_autoscaler::Fifo;
//! let jobs = vec![
//!     SimJob { row: 0, submit: 0.0, duration: 100.0, gpus: 2, predicted: None },
//!     SimJob { row: 1, submit: 10.0, duration: 50.0, gpus: 2, predicted: None },
//! ];
//! let cfg = SimConfig::new(ClusterSpec::homogeneous(2, 2, 1)?);
//! let result = Simulator::new(jobs, cfg)?.run(&mut Fifo::default());
//! let s = result.summary();
//! assert_eq!(s.makespan, 150.0); // the second job waits for the first
//! # Ok::<(), augur_autoscaler::SimError>(())
//! ```

pub mod backend;
pub mod cluster;
mod controller;
pub mod decision;
pub mod drain;
mod error;
pub mod kubernetes;
pub mod live;
pub mod metrics;
pub mod placement;
pub mod policies;
pub mod scaling;
pub mod sim;

pub use backend::ClusterBackend;
pub use cluster::{
    AffinityClass, ClusterState, GpuType, JobId, NodeInfo, QueuedJob, RunningJob, Slot,
    TypeAffinity,
};
pub use controller::{Controller, ReconcileReport};
pub use decision::{Action, Decision, DecisionRecord, Reason};
pub use error::{BackendError, ErrorKind, SimError};
pub use metrics::{SimResult, Summary};
pub use policies::{by_name, POLICY_NAMES};
// two policies' modules, also at the paths they had before `policies/`
pub use policies::{elastic, optimus};
pub use policies::{
    ElasticController, ElasticParams, Fifo, GavelMaxThroughput, Optimus, Policy, SjfPredicted,
    SrtfOracle, Tiresias,
};
pub use scaling::ScalingModel;
