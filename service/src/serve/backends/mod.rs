//! The clusters behind the service, one [`ServeBackend`] each: what a backend is (its
//! cluster's identity for the data folder), what it starts (the tasks that feed its
//! cluster's events into the event store and act on the cluster), its health for `/readyz`
//! and `/metrics`, and what it answers about its cluster (`GET /v1/cluster`, the scheduler's
//! own job ids and start estimates for `GET /v1/eta`, the history the first models train
//! on).
//!
//! - [`none`]: no cluster (predictions only);
//! - [`sim`]: the simulator replaying a bundled trace under the elastic controller;
//! - [`kubernetes`]: a Kubernetes cluster under the elastic controller (watches, lease,
//!   scaling, write-back of predictions);
//! - [`slurm`]: a Slurm cluster, observed by polling its client commands (no actions).
//!
//! The backends that run the controller loop share its state and switches
//! ([`controller`]); the HTTP endpoints of the cluster and the controller are in
//! [`endpoints`], what they show in [`views`], and the one health shape in [`health`].
//!
//! The backend is built once from the configuration ([`build`]) and held by the service
//! ([`crate::serve::Extensions::backend`]); its options live in the backend object, none in
//! process-wide state.
//!
//! Adding a backend (for example `volcano`):
//! 1. a variant in [`crate::serve::config::Backend`] (its name in `name` and `FromStr`), and
//!    its options as configuration fields when it has any;
//! 2. a module here (`backends/volcano.rs` or `backends/volcano/`) with a type implementing
//!    [`ServeBackend`]: `kind`, `cluster`, `start` (spawn its tasks: append its cluster's
//!    events to `state.store`, act), `health`, and the optional answers it has;
//! 3. one line in [`build`] constructing it;
//! 4. a controller backend also implements [`controller::Driven`] for its loop and adds its
//!    view to [`views::ClusterView`]; an observe-only one returns its view from
//!    [`ServeBackend::cluster_view`].

pub mod controller;
pub mod endpoints;
pub mod health;
pub mod kubernetes;
pub mod none;
pub mod sim;
pub mod slurm;
pub mod views;

use std::sync::Arc;

use augur_datasets::JobRecord;

use self::controller::Live;
use self::health::BackendHealth;
use self::views::ClusterView;
use super::config::{Backend, ServeConfig};
use super::AppState;

/// One cluster backend of the service (see the [module docs](self)).
pub trait ServeBackend: Send + Sync + std::fmt::Debug {
    /// Which backend this is (its name in flags, files and the data folder's identity).
    fn kind(&self) -> Backend;

    /// The cluster a data folder of this backend belongs to (with [`Self::kind`], its
    /// identity: the real and the simulated never share a folder).
    fn cluster(&self) -> String;

    /// Starts the backend's background tasks (they stop when `state.shutdown` turns true):
    /// feeding its cluster's events into the event store and acting on the cluster.
    fn start(&self, state: AppState);

    /// Whether the backend is up (`/readyz`, `augur_backend_up`); `None` without a cluster.
    /// `controller` is the controller loop's state, whose status line the controller
    /// backends report.
    fn health(&self, controller: &Live) -> Option<BackendHealth>;

    /// `GET /v1/cluster` of a backend without a controller loop (`None`: the loop's view).
    fn cluster_view(&self) -> Option<ClusterView> {
        None
    }

    /// The scheduler's own id of the job with this store id (`GET /v1/eta`), when the
    /// backend's scheduler names jobs its own way.
    fn scheduler_id(&self, _store_id: &str) -> Option<String> {
        None
    }

    /// The scheduler's own estimate of when the pending job with this store id starts.
    fn scheduler_start(&self, _store_id: &str) -> Option<f64> {
        None
    }

    /// The cluster's own history to train the first models on (its source name and the
    /// jobs), when it has enough of one; `None` sends the first start to the bundled trace.
    /// Blocking.
    fn training_history(&self, _state: &AppState) -> Option<(String, Vec<JobRecord>)> {
        None
    }
}

/// Why a backend could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("--backend slurm: cannot ask Slurm for the cluster's name")]
    SlurmCluster(#[source] slurm::commands::CommandError),
}

/// The backend the configuration names, with its options: the one registration of the
/// backends. Slurm is asked for its cluster's name here (blocking).
pub fn build(config: &ServeConfig) -> Result<Arc<dyn ServeBackend>, BackendError> {
    Ok(match config.backend {
        Backend::None => Arc::new(none::NoneBackend),
        Backend::Sim => Arc::new(sim::SimBackend::new(config)),
        Backend::Kubernetes => Arc::new(kubernetes::KubernetesBackend::new(
            config.kubernetes.clone(),
        )),
        Backend::Slurm => {
            Arc::new(slurm::SlurmBackend::connect(config).map_err(BackendError::SlurmCluster)?)
        }
    })
}
