//! The clusters behind the service, one [`ServeBackend`] each: what a backend is (its
//! cluster's identity for the data folder), what it starts (the tasks that feed its
//! cluster's events into the event store and act on the cluster), its health for `/readyz`
//! and `/metrics`, and what it answers about its cluster (`GET /v1/cluster`, the scheduler's
//! own job ids, start estimates and reasons for waiting for `GET /v1/eta` and
//! `GET /v1/jobs/{id}`, the free GPUs by type where it knows them, the history the first
//! models train on).
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

    /// The scheduler's own reason why the pending job with this store id waits (Slurm's
    /// `Reason`: `Priority`, `Resources`, `QOSMaxGPUPerUserLimit`, ...).
    fn scheduler_reason(&self, _store_id: &str) -> Option<String> {
        None
    }

    /// Whether the pending job with this store id asks for whole nodes (Slurm's
    /// `--exclusive`).
    fn whole_nodes(&self, _store_id: &str) -> bool {
        false
    }

    /// Free GPUs by type (lower-case type names) as the backend last saw them, when its
    /// cluster names GPU types; `None` reads the cluster snapshot's GPUs as one pool.
    fn free_gpus_by_type(&self) -> Option<std::collections::BTreeMap<String, f64>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::config::KubeOptions;

    fn config(backend: Backend, kubernetes: KubeOptions) -> ServeConfig {
        ServeConfig {
            backend,
            kubernetes,
            ..ServeConfig::default()
        }
    }

    #[test]
    fn each_backend_is_built_from_the_configuration_with_its_own_options() {
        let dir = tempfile::tempdir().unwrap();
        let controller = Live::new(60.0, dir.path().join("operator.json"));
        let none = build(&config(Backend::None, KubeOptions::default())).unwrap();
        assert_eq!(
            (none.kind(), none.cluster()),
            (Backend::None, String::new())
        );
        assert_eq!(none.health(&controller), None);

        let sim = build(&config(Backend::Sim, KubeOptions::default())).unwrap();
        assert_eq!(
            (sim.kind(), sim.cluster()),
            (Backend::Sim, "sim:philly".into())
        );
        let health = sim.health(&controller).unwrap();
        assert!(health.up, "loading is not an outage: {health:?}");

        // two Kubernetes backends in one process keep their own options
        let kube = |namespace: &str| {
            let opts = KubeOptions {
                kubeconfig: Some("/etc/augur/kubeconfig".into()),
                namespace: Some(namespace.into()),
                dry_run: false,
            };
            build(&config(Backend::Kubernetes, opts)).unwrap()
        };
        let (ml, ops) = (kube("ml"), kube("ops"));
        assert_eq!(ml.kind(), Backend::Kubernetes);
        assert_eq!(
            ml.cluster(),
            "kubeconfig=/etc/augur/kubeconfig namespace=ml"
        );
        assert_eq!(
            ops.cluster(),
            "kubeconfig=/etc/augur/kubeconfig namespace=ops"
        );
        assert!(!ml.health(&controller).unwrap().up, "not running yet");
    }

    #[test]
    fn the_slurm_backend_names_its_cluster_and_its_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let controller = Live::new(60.0, dir.path().join("operator.json"));
        let slurm = slurm::SlurmBackend::new("graham".into(), 15.0);
        assert_eq!(
            (slurm.kind(), slurm.cluster()),
            (Backend::Slurm, "graham".into())
        );
        let id = slurm::tracker::store_id("graham", "123_4", 1_700_000_000.0);
        assert_eq!(slurm.scheduler_id(&id).as_deref(), Some("123_4"));
        assert_eq!(slurm.scheduler_id("other/123@1700000000"), None);
        let health = slurm.health(&controller).unwrap();
        assert_eq!((health.up, health.detail.as_str()), (false, "starting"));
        assert!(matches!(slurm.cluster_view(), Some(ClusterView::Slurm(_))));
    }
}
