//! # augur-kube-fake
//!
//! **One job:** a wire-level fake Kubernetes API server on loopback (axum), for the tests of
//! the Kubernetes backend and of `augur serve --backend kubernetes`. It speaks the JSON of the
//! real API: lists (`metadata.resourceVersion`), watches as newline-delimited `WatchEvent`s
//! resumed from a `resourceVersion`, with `BOOKMARK`s when asked and `410 Expired` for a
//! compacted version, filtered by `labelSelector`; GET/PATCH of a `PyTorchJob`'s `/scale`
//! (merge patch, `resourceVersion` precondition → 409); JSON merge patches of any object
//! (annotations, a `batch/v1` Job's `spec.parallelism`; the same precondition); `Lease`
//! get/create/replace; Events created with `generateName`. Besides PyTorchJobs it serves, when
//! asked, Kubeflow Trainer v2 `TrainJob`s and `batch/v1` Jobs. Objects are built from k8s-openapi types
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
mod selector;
mod store;
mod watch;
mod workloads;

pub use clock::VClock;
pub use kinds::{
    Kind, BATCH_JOBS, EVENTS, JOBS, LEASES, NODES, PODGROUPS, PODS, TRAINJOBS, WORKLOADS,
};
pub use objects::{
    job_pod, node, podgroup, pytorchjob, rfc3339, set_started, set_succeeded, trainjob_pod,
    worker_pod, workload, workload_of,
};
pub use requests::{Fault, Request};
pub use responses::scale_of;
pub use store::FakeApi;
pub use workloads::{
    batch_job, make_elastic, set_job_finished, set_job_started, set_trainjob_finished,
    set_trainjob_resumed, trainjob, QUEUE_LABEL,
};
