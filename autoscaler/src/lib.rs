//! # augur-autoscaler
//!
//! **One job:** decide and carry out elastic scaling. The `ClusterBackend` trait (observe a
//! snapshot; act: scale a job within its min/max, admit, suspend), the elastic policy and the
//! baseline policies, the discrete-event simulator backend and the Kubernetes backend.
//!
//! Not written yet: this crate is reserved for issues #6 and #8.
