//! The workload kinds the backend understands ([`JobKind`]), what each is observed through
//! and whether it can be scaled, with the API fields relied on:
//!
//! | kind | API | GPUs | started / finished | queue | scaled |
//! |---|---|---|---|---|---|
//! | `PyTorchJob` | `kubeflow.org/v1` (training-operator) | `spec.pytorchReplicaSpecs.Worker.replicas` × the worker template's GPU limits | `status.startTime`; `Succeeded` / `Failed` conditions | label `kueue.x-k8s.io/queue-name` | through `/scale` within `spec.elasticPolicy.{minReplicas,maxReplicas}` |
//! | `TrainJob` | `trainer.kubeflow.org/v1alpha1` (Kubeflow Trainer v2) | `spec.trainer.numNodes` × GPUs of `spec.trainer.resourcesPerNode` | `Suspended` condition `False` (resumed) or, never suspended, `creationTimestamp` once `status.jobsStatus` shows a Job active; `Complete` / `Failed` conditions | the same label | never: `spec.trainer` is immutable (CRD rule `self == oldSelf`) and there is no `/scale` subresource; `spec.suspend` belongs to Kueue |
//! | `Job` | `batch/v1`, only those with the Kueue queue label and no controller owner but a CronJob | `spec.parallelism` × the pod template's GPU limits | `status.startTime`; `Complete` / `Failed` conditions | the same label | running elastic Kueue jobs only, by a merge patch of `spec.parallelism` within `[1, spec.completions]` (see [`job_elastic`](super::workloads::job_elastic)) |
//!
//! Ids: a PyTorchJob is `namespace/name` (as before), a TrainJob `namespace/trainjob/name`, a
//! Job `namespace/job/name`, so two kinds' objects of the same name are never one job.

use kube::api::{ApiResource, GroupVersionKind};

/// Label of Kueue's LocalQueue on a job (`kueue.x-k8s.io/queue-name`), for every kind.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// A workload kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    /// Kubeflow training-operator `kubeflow.org/v1` `PyTorchJob`.
    PyTorchJob,
    /// Kubeflow Trainer v2 `trainer.kubeflow.org/v1alpha1` `TrainJob`.
    TrainJob,
    /// A Kueue-managed `batch/v1` `Job`.
    Job,
}

impl JobKind {
    /// Every kind, in the order they are watched.
    pub const ALL: [JobKind; 3] = [JobKind::PyTorchJob, JobKind::TrainJob, JobKind::Job];

    /// The resource (group, version, kind, plural).
    pub fn resource(self) -> ApiResource {
        let (g, v, k) = match self {
            JobKind::PyTorchJob => ("kubeflow.org", "v1", "PyTorchJob"),
            JobKind::TrainJob => ("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
            JobKind::Job => ("batch", "v1", "Job"),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), self.plural())
    }

    /// The plural (also the name of its watch).
    pub fn plural(self) -> &'static str {
        match self {
            JobKind::PyTorchJob => "pytorchjobs",
            JobKind::TrainJob => "trainjobs",
            JobKind::Job => "jobs",
        }
    }

    /// `plural.group`, as `kubectl` and error messages name the resource.
    pub fn qualified(self) -> &'static str {
        match self {
            JobKind::PyTorchJob => "pytorchjobs.kubeflow.org",
            JobKind::TrainJob => "trainjobs.trainer.kubeflow.org",
            JobKind::Job => "jobs.batch",
        }
    }

    /// The kind of an owner reference (`apiVersion`, `kind`), e.g. of a Kueue `Workload`.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<JobKind> {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        JobKind::ALL
            .into_iter()
            .find(|k| k.resource().kind == kind && k.resource().group == group)
    }

    /// The segment between namespace and name in a job id (none for PyTorchJobs).
    pub(super) fn id_segment(self) -> Option<&'static str> {
        match self {
            JobKind::PyTorchJob => None,
            JobKind::TrainJob => Some("trainjob"),
            JobKind::Job => Some("job"),
        }
    }

    /// Whether a queued job of this kind may be sized before it starts (`admit`). Only
    /// PyTorchJobs: Kueue admits TrainJobs and Jobs, and resizing a suspended Job makes Kueue
    /// recreate its Workload (it would lose its place in the queue).
    pub fn resizes_queued(self) -> bool {
        self == JobKind::PyTorchJob
    }

    /// Why a job of this kind without bounds is never scaled.
    pub fn observed_only(self) -> &'static str {
        match self {
            JobKind::PyTorchJob => "has no spec.elasticPolicy",
            JobKind::TrainJob => {
                "is a TrainJob (spec.trainer.numNodes is immutable, no /scale subresource)"
            }
            JobKind::Job => {
                "is not a running elastic Kueue Job (kueue.x-k8s.io/elastic-job with the ElasticJobsViaWorkloadSlices gate, spec.completions, no partial admission)"
            }
        }
    }

    /// The fields its bounds come from.
    pub fn bounds_field(self) -> &'static str {
        match self {
            JobKind::PyTorchJob => "spec.elasticPolicy",
            JobKind::TrainJob => "none",
            JobKind::Job => "[1, spec.completions]",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_map_to_kinds_by_group_and_kind() {
        assert_eq!(
            JobKind::of_owner("trainer.kubeflow.org/v1alpha1", "TrainJob"),
            Some(JobKind::TrainJob)
        );
        assert_eq!(JobKind::of_owner("batch/v1", "Job"), Some(JobKind::Job));
        assert_eq!(
            JobKind::of_owner("kubeflow.org/v1", "PyTorchJob"),
            Some(JobKind::PyTorchJob)
        );
        // same kind name, another group: not ours
        assert_eq!(JobKind::of_owner("example.com/v1", "Job"), None);
        assert_eq!(JobKind::of_owner("v1", "Pod"), None);
    }
}
