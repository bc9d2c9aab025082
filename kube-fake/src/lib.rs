//! # augur-kube-fake
//!
//! **One job:** a wire-level fake Kubernetes API server on loopback (axum), for the tests of
//! the Kubernetes backend and of `augur serve --backend kubernetes`. It speaks the JSON of the
//! real API: lists (`metadata.resourceVersion`), watches as newline-delimited `WatchEvent`s
//! resumed from a `resourceVersion`, with `BOOKMARK`s when asked and `410 Expired` for a
//! compacted version; GET/PATCH of a `PyTorchJob`'s `/scale` (merge patch, `resourceVersion`
//! precondition → 409); JSON merge patches of any object (annotations); `Lease`
//! get/create/replace; Events created with `generateName`. Objects are built from k8s-openapi types
//! where they exist. Faults (status codes, delays) can be injected per request, and every
//! request is recorded so tests can assert what the backend sent.
//!
//! Test support only (`publish = false`, a dev-dependency): it panics when it cannot bind a
//! loopback port or is given objects without a name.

mod clock;
mod kinds;
mod objects;
mod requests;
mod responses;
mod routes;
mod store;
mod watch;

pub use clock::VClock;
pub use kinds::{Kind, EVENTS, JOBS, LEASES, NODES, PODGROUPS, PODS, WORKLOADS};
pub use objects::{
    node, podgroup, pytorchjob, rfc3339, set_started, set_succeeded, worker_pod, workload,
};
pub use requests::{Fault, Request};
pub use responses::scale_of;
pub use store::FakeApi;
