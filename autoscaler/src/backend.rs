//! The [`ClusterBackend`] trait: observe a real or simulated cluster and act on it.
//!
//! The trait is shaped for Kubernetes: `observe` is a list of nodes, of elastic training jobs
//! (Kubeflow `PyTorchJob`s with `elasticPolicy.minReplicas/maxReplicas`) and of pending
//! workloads (pending pods / PodGroups / Kueue `Workload`s); `set_workers` is a patch of the
//! `/scale` subresource; `admit` un-suspends a queued workload; `suspend` sets `spec.suspend`
//! (or deletes the pods after a checkpoint). Every call is async (kube-rs is) and can fail with
//! a [`BackendError`] whose [`ErrorKind`](crate::ErrorKind) says whether a retry can help. The
//! simulator implements it with futures that are ready at once.

use std::future::Future;

use crate::error::BackendError;

// The cluster view and the decisions, also at the paths they had when they lived here.
pub use crate::cluster::{ClusterState, GpuType, JobId, NodeInfo, QueuedJob, RunningJob, Slot};
pub use crate::decision::{Action, Decision, DecisionRecord, Reason};

/// A cluster that can be observed and acted on: the simulator, or Kubernetes.
///
/// Every method may fail; [`BackendError::is_retryable`] tells the controller whether trying
/// again can help. Actions are idempotent where the cluster allows (setting the workers a job
/// already has is a no-op).
pub trait ClusterBackend: Send {
    /// The cluster now.
    fn observe(&mut self) -> impl Future<Output = Result<ClusterState, BackendError>> + Send;

    /// Starts (or resumes) a queued job with `workers` workers, all or none (gang).
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Starts (or resumes) a queued job on nodes of GPU type `gpu_type` (an index into the
    /// snapshot's types), chosen for `reason`. A backend that cannot steer a job to a type
    /// refuses (it does not start the job elsewhere).
    fn admit_on(
        &mut self,
        job: JobId,
        workers: u32,
        gpu_type: u16,
        reason: Reason,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let _ = (workers, gpu_type, reason);
        std::future::ready(Err(BackendError::new(
            crate::error::ErrorKind::Invalid,
            Some(job),
            "this backend cannot steer a job to a GPU type",
        )))
    }

    /// Rescales a running elastic job to `workers` in `[min, max]`.
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Checkpoints a running job, frees its GPUs and puts it back in the queue.
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Carries out one decision.
    fn apply(&mut self, d: Decision) -> impl Future<Output = Result<(), BackendError>> + Send {
        async move {
            match d.action {
                Action::Admit {
                    job,
                    workers,
                    gpu_type: None,
                } => self.admit(job, workers).await,
                Action::Admit {
                    job,
                    workers,
                    gpu_type: Some(t),
                } => self.admit_on(job, workers, t, d.reason).await,
                Action::SetWorkers { job, workers } => self.set_workers(job, workers).await,
                Action::Suspend { job } => self.suspend(job).await,
            }
        }
    }
}
