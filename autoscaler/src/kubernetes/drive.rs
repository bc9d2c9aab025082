//! How the controller and the live loop drive the Kubernetes backend: as a [`ClusterBackend`]
//! (observe the watch caches, admit and rescale through `/scale` or a Job's `spec.parallelism`,
//! suspend refused) and as a
//! [`LiveBackend`] (wall clock, a tick asks the policy when a watch saw a change or the resync
//! period passed, only the lease holder acts).

use std::time::Duration;

use super::backend::KubeBackend;
use crate::backend::ClusterBackend;
use crate::cluster::{ClusterState, JobId};
use crate::decision::Reason;
use crate::error::{BackendError, ErrorKind};
use crate::live::LiveBackend;

impl ClusterBackend for KubeBackend {
    async fn observe(&mut self) -> Result<ClusterState, BackendError> {
        self.build()
    }

    async fn admit(&mut self, job: JobId, workers: u32) -> Result<(), BackendError> {
        self.scale(job, workers, true).await
    }

    async fn admit_on(
        &mut self,
        job: JobId,
        workers: u32,
        gpu_type: u16,
        reason: Reason,
    ) -> Result<(), BackendError> {
        self.steer(job, gpu_type, reason).await?;
        self.scale(job, workers, true).await
    }

    async fn set_workers(&mut self, job: JobId, workers: u32) -> Result<(), BackendError> {
        self.scale(job, workers, false).await
    }

    async fn suspend(&mut self, job: JobId) -> Result<(), BackendError> {
        Err(BackendError::new(
            ErrorKind::Invalid,
            Some(job),
            "suspend is not supported by the Kubernetes backend (it resizes, never suspends: Kueue owns spec.suspend of the jobs it queues); run the elastic policy without preemption",
        ))
    }
}

impl LiveBackend for KubeBackend {
    /// The cluster's clock moves on its own; true when a watch saw an object change (or an
    /// error) since the last true, or [`KubeConfig::resync`](super::config::KubeConfig::resync) passed.
    fn tick(&mut self, wall: Duration) -> bool {
        self.since_asked += wall;
        let rvs: Vec<u64> = self
            .watches()
            .iter()
            .flat_map(|(_, s)| [s.last_resource_version(), s.errors()])
            .collect();
        if rvs != self.seen_rvs || self.since_asked >= self.cfg.resync {
            self.seen_rvs = rvs;
            self.since_asked = Duration::ZERO;
            true
        } else {
            false
        }
    }

    /// Only the lease holder acts (always, without leader election).
    fn may_act(&self) -> bool {
        self.hooks
            .leader
            .as_ref()
            .is_none_or(|g| g.may_act(self.now()))
    }
}
