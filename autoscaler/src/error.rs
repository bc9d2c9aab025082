//! Errors of the autoscaler: what a backend action can fail with, and what building a
//! simulation can fail with.

use crate::cluster::JobId;

/// Whether retrying the same action may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The backend could not be reached or timed out (API server down, network). Retry.
    Unavailable,
    /// The object changed under us (Kubernetes 409 conflict, stale resource version). Retry
    /// after observing again.
    Conflict,
    /// Not enough free GPUs for the request right now (gang cannot be placed). Retry later.
    NoCapacity,
    /// The job does not exist (finished, deleted). Do not retry.
    NotFound,
    /// The request is invalid for this job: workers outside `[min, max]`, job not in the state
    /// the action needs (admit a running job, ...), more GPUs than the cluster has. Do not retry.
    Invalid,
}

impl ErrorKind {
    /// True when the same action may succeed if tried again.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::Conflict | ErrorKind::NoCapacity
        )
    }
}

/// A backend action or observation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind:?}{}: {message}", job.map(|j| format!(" (job {})", j.0)).unwrap_or_default())]
pub struct BackendError {
    /// What kind of failure (decides retrying).
    pub kind: ErrorKind,
    /// The job the action was about, if any.
    pub job: Option<JobId>,
    /// What happened, for people.
    pub message: String,
}

impl BackendError {
    /// A new error.
    pub fn new(kind: ErrorKind, job: Option<JobId>, message: impl Into<String>) -> BackendError {
        BackendError {
            kind,
            job,
            message: message.into(),
        }
    }

    /// True when the same action may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

/// Building or configuring a simulation failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The cluster description is unusable.
    #[error("invalid cluster: {0}")]
    Cluster(String),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The job table has nothing to replay.
    #[error("no replayable jobs: {0}")]
    NoJobs(String),
    /// Reading a bundled data file failed.
    #[error(transparent)]
    Dataset(#[from] augur_datasets::DatasetError),
}
