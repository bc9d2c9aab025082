//! The simulator as a [`ClusterBackend`]: futures that are ready at once.

use std::future::Future;

use super::engine::Simulator;
use crate::backend::ClusterBackend;
use crate::cluster::{ClusterState, JobId};
use crate::decision::{Action, Reason};
use crate::error::BackendError;

/// The simulator as a backend: actions apply at the current simulation time; move time with
/// [`Simulator::advance`].
impl ClusterBackend for Simulator {
    fn observe(&mut self) -> impl Future<Output = Result<ClusterState, BackendError>> + Send {
        std::future::ready(Ok(self.snapshot().clone()))
    }

    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::Admit {
            job,
            workers,
            gpu_type: None,
        }))
    }

    fn admit_on(
        &mut self,
        job: JobId,
        workers: u32,
        gpu_type: u16,
        _reason: Reason,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::Admit {
            job,
            workers,
            gpu_type: Some(gpu_type),
        }))
    }

    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::SetWorkers { job, workers }))
    }

    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.apply_action(Action::Suspend { job }))
    }
}
