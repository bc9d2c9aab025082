//! Dev-only: the real services the workspace's tests start, one fixture each, shared by every
//! crate whose tests need one (a dev-dependency, never in a shipped build):
//!
//! - [`slurm`]: a single-node Slurm with accounting (`scripts/slurm-test-cluster.sh`), for
//!   the service's end-to-end Slurm test and the datasets crate's live `sacct` test;
//! - [`postgres`]: a throwaway PostgreSQL 15, for the PostgreSQL store's unit tests and the
//!   end-to-end high-availability test.
//!
//! The one fake service, the Kubernetes API, is its own crate (`augur-kube-fake`).

pub mod postgres;
pub mod slurm;
