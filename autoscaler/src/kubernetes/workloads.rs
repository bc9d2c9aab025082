//! Reading the workloads beside PyTorchJobs into a [`JobView`]: Kubeflow Trainer v2
//! `TrainJob`s and Kueue-managed `batch/v1` Jobs, which of them may be scaled
//! ([`job_elastic`]), and which pods are a job's workers ([`workers_of`]).
//!
//! API relied on (no other field):
//! - `trainer.kubeflow.org/v1alpha1` `TrainJob` (kubeflow/trainer
//!   `pkg/apis/trainer/v1alpha1/trainjob_types.go`): `spec.trainer.numNodes`,
//!   `spec.trainer.resourcesPerNode`, `spec.suspend`, `status.conditions` (`Suspended`,
//!   `Complete`, `Failed`), `status.jobsStatus[].{active,ready,succeeded}`. The Trainer runs
//!   it as a JobSet of the same name, whose pods carry `jobset.sigs.k8s.io/jobset-name`; the
//!   trainer nodes are its `node` replicated Job (`jobset.sigs.k8s.io/replicatedjob-name`).
//!   `spec.trainer` is immutable (CRD rule `self == oldSelf`) and the CRD has no `/scale`
//!   subresource, so a TrainJob is observed, never scaled; its `spec.suspend` is Kueue's.
//! - `batch/v1` `Job` with Kueue's label `kueue.x-k8s.io/queue-name` (Kueue's Job
//!   integration: created suspended, unsuspended on admission): `spec.parallelism`,
//!   `spec.completions`, `spec.suspend`, `spec.template`, `status.startTime`,
//!   `status.conditions` (`Complete`, `Failed`); pods labelled `batch.kubernetes.io/job-name`.
//!   Scaling follows Kueue's elastic jobs (KEP-77 "Dynamically Sized Jobs", workload slices,
//!   alpha since Kueue v0.13): a running Job annotated `kueue.x-k8s.io/elastic-job: "true"`
//!   changes size by a change of `spec.parallelism`; a scale-down lowers its Workload in
//!   place, a scale-up creates a Workload slice that Kueue admits before the new pods leave
//!   their scheduling gate.

use kube::api::DynamicObject;
use serde_json::Value;

use super::kinds::JobKind;
use super::objects::{
    annotation, base_view, containers_gpus, label, parse_time, pytorchjob_view, resources_gpus,
    terminal, u32_at, JobKey, JobView, JOB_NAME_LABEL, REPLICA_TYPE_LABEL,
};

/// Kueue's per-job opt-in to elastic jobs (workload slices).
pub const ELASTIC_JOB_ANNOTATION: &str = "kueue.x-k8s.io/elastic-job";
/// The scheduling gate Kueue's Job webhook adds to an elastic Job's pod template only when its
/// `ElasticJobsViaWorkloadSlices` feature gate is on: the proof the cluster's Kueue resizes
/// the Job's Workload instead of suspending and requeueing it.
pub const ELASTIC_JOB_GATE: &str = "kueue.x-k8s.io/elastic-job";
/// Kueue's partial admission; such a Job's `spec.parallelism` may not change while it runs.
pub const MIN_PARALLELISM_ANNOTATION: &str = "kueue.x-k8s.io/job-min-parallelism";
/// Pod label naming a JobSet (a TrainJob's pods: the Trainer names the JobSet after it).
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Pod label naming the JobSet's replicated Job (`node`: a TrainJob's trainer nodes).
pub const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Pod label naming a `batch/v1` Job.
pub const BATCH_JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// Reads a job of `kind`; `None` when it is not one the backend follows (no name, or a Job
/// Kueue does not manage).
pub fn job_view(kind: JobKind, obj: &DynamicObject, gpu_resource: &str) -> Option<JobView> {
    match kind {
        JobKind::PyTorchJob => pytorchjob_view(obj, gpu_resource),
        JobKind::TrainJob => trainjob_view(obj, gpu_resource),
        JobKind::Job => batch_job_view(obj, gpu_resource),
    }
}

fn suspended(data: &Value) -> bool {
    data.pointer("/spec/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Reads a `trainer.kubeflow.org/v1alpha1` `TrainJob`.
pub fn trainjob_view(obj: &DynamicObject, gpu_resource: &str) -> Option<JobView> {
    let mut v = base_view(obj, JobKind::TrainJob)?;
    let data = &obj.data;
    let trainer = data.pointer("/spec/trainer");
    let nodes = trainer.and_then(|t| u32_at(t, &["numNodes"]));
    let per_node = resources_gpus(
        trainer.and_then(|t| t.get("resourcesPerNode")),
        gpu_resource,
    );
    v.worker_replicas = nodes.unwrap_or(1).max(1);
    v.gpus_per_worker = per_node.max(1);
    // numNodes or the GPUs left to the runtime: not known from the TrainJob
    v.declared_gpus = nodes.filter(|_| per_node > 0).map(|n| n * per_node);
    v.suspended = suspended(data);
    let conditions = data.pointer("/status/conditions").and_then(Value::as_array);
    let suspended_cond = conditions.and_then(|cs| {
        cs.iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Suspended"))
    });
    let active = data
        .pointer("/status/jobsStatus")
        .and_then(Value::as_array)
        .is_some_and(|js| {
            js.iter().any(|j| {
                ["active", "ready", "succeeded"]
                    .into_iter()
                    .any(|k| u32_at(j, &[k]).unwrap_or(0) > 0)
            })
        });
    v.start_time = match suspended_cond {
        // resumed (admitted by Kueue): the Trainer's own start for activeDeadlineSeconds
        Some(c) if c.get("status").and_then(Value::as_str) == Some("False") => c
            .get("lastTransitionTime")
            .and_then(Value::as_str)
            .and_then(parse_time),
        Some(_) => None,
        // never suspended: the Trainer counts from creation, once a Job of it is active
        None => (!v.suspended && active).then_some(v.created),
    };
    v.finished = terminal(data, "Complete", "Failed");
    Some(v)
}

/// Reads a `batch/v1` Job that Kueue manages (the queue label; not a part of another
/// workload: a controller owner other than a CronJob, e.g. the JobSet of a TrainJob).
pub fn batch_job_view(obj: &DynamicObject, gpu_resource: &str) -> Option<JobView> {
    let mut v = base_view(obj, JobKind::Job)?;
    v.queue.as_ref()?;
    let owned = obj
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind != "CronJob");
    if owned {
        return None;
    }
    let data = &obj.data;
    v.worker_replicas = data
        .pointer("/spec/parallelism")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1);
    let per_pod = containers_gpus(data.pointer("/spec/template/spec/containers"), gpu_resource);
    v.gpus_per_worker = per_pod.max(1);
    v.declared_gpus = Some(v.requested_replicas.unwrap_or(v.worker_replicas) * per_pod);
    v.suspended = suspended(data);
    v.elastic = job_elastic(obj);
    v.start_time = data
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .and_then(parse_time);
    v.finished = terminal(data, "Complete", "Failed");
    Some(v)
}

/// The bounds `[1, spec.completions]` of a Job that may be resized while it runs: annotated
/// [`ELASTIC_JOB_ANNOTATION`] `"true"`, its pod template carrying [`ELASTIC_JOB_GATE`] (so the
/// cluster's Kueue has `ElasticJobsViaWorkloadSlices` on; without it, a changed parallelism
/// would suspend and requeue the Job), without partial admission
/// ([`MIN_PARALLELISM_ANNOTATION`]), and with `spec.completions` (more pods than completions
/// never run at once; without it the Job is a work queue with no upper bound Augur could
/// honour). `None` otherwise: observed, never scaled.
pub fn job_elastic(obj: &DynamicObject) -> Option<(u32, u32)> {
    let meta = &obj.metadata;
    if annotation(meta, ELASTIC_JOB_ANNOTATION) != Some("true")
        || annotation(meta, MIN_PARALLELISM_ANNOTATION).is_some()
    {
        return None;
    }
    let gated = obj
        .data
        .pointer("/spec/template/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gs| {
            gs.iter()
                .any(|g| g.get("name").and_then(Value::as_str) == Some(ELASTIC_JOB_GATE))
        });
    let completions = u32_at(&obj.data, &["spec", "completions"]).filter(|&c| c >= 1)?;
    gated.then_some((1, completions))
}

/// The jobs a pod is a worker of: a PyTorchJob's worker replica, a TrainJob's trainer node
/// (the `node` Job of its JobSet), a `batch/v1` Job's pod.
pub fn workers_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<JobKey> {
    let Some(ns) = meta.namespace.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let worker = label(meta, REPLICA_TYPE_LABEL).is_some_and(|t| t.eq_ignore_ascii_case("worker"));
    if let (true, Some(job)) = (worker, label(meta, JOB_NAME_LABEL)) {
        out.push(JobKey::new(JobKind::PyTorchJob, ns, job));
    }
    if let (Some(js), Some("node")) = (
        label(meta, JOBSET_NAME_LABEL),
        label(meta, REPLICATED_JOB_LABEL),
    ) {
        out.push(JobKey::new(JobKind::TrainJob, ns, js));
    }
    if let Some(job) = label(meta, BATCH_JOB_NAME_LABEL) {
        out.push(JobKey::new(JobKind::Job, ns, job));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).expect("object")
    }

    fn job(annotations: Value, gates: Value, completions: Option<u32>) -> DynamicObject {
        obj(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "j", "namespace": "ml", "annotations": annotations,
                "labels": { "kueue.x-k8s.io/queue-name": "q" },
                "creationTimestamp": "2026-01-01T00:00:00Z" },
            "spec": { "parallelism": 3, "completions": completions, "suspend": false,
                "template": { "spec": { "schedulingGates": gates, "containers": [
                    { "name": "a", "resources": { "limits": { "nvidia.com/gpu": "2" } } },
                    { "name": "b", "resources": { "requests": { "nvidia.com/gpu": 1 } } }] } } },
            "status": { "startTime": "2026-01-01T00:05:00Z",
                "conditions": [{ "type": "Failed", "status": "True",
                    "lastTransitionTime": "2026-01-01T01:00:00Z" }] },
        }))
    }

    #[test]
    fn an_elastic_kueue_job_needs_the_annotation_the_gate_completions_and_no_partial_admission() {
        let ann = json!({ ELASTIC_JOB_ANNOTATION: "true" });
        let gate = json!([{ "name": ELASTIC_JOB_GATE }]);
        assert_eq!(
            job_elastic(&job(ann.clone(), gate.clone(), Some(8))),
            Some((1, 8))
        );
        // the feature gate off: Kueue's webhook added no scheduling gate
        assert_eq!(job_elastic(&job(ann.clone(), json!([]), Some(8))), None);
        assert_eq!(job_elastic(&job(json!({}), gate.clone(), Some(8))), None);
        assert_eq!(job_elastic(&job(ann.clone(), gate.clone(), None)), None);
        let partial = json!({ ELASTIC_JOB_ANNOTATION: "true", MIN_PARALLELISM_ANNOTATION: "1" });
        assert_eq!(job_elastic(&job(partial, gate, Some(8))), None);

        let v = batch_job_view(&job(ann, json!([]), Some(8)), "nvidia.com/gpu").expect("view");
        assert_eq!(v.key.to_string(), "ml/job/j");
        assert_eq!(
            (v.worker_replicas, v.gpus_per_worker, v.declared_gpus),
            (3, 3, Some(9))
        );
        assert_eq!(v.queue.as_deref(), Some("q"));
        assert_eq!(v.start_time, Some(1_767_225_900.0));
        assert_eq!(v.finished, Some(("Failed", 1_767_229_200.0)));
    }

    #[test]
    fn jobs_without_the_queue_label_or_owned_by_another_workload_are_not_followed() {
        let mut j = job(json!({}), json!([]), Some(1));
        j.metadata.labels = None;
        assert!(batch_job_view(&j, "nvidia.com/gpu").is_none());
        let mut owned = job(json!({}), json!([]), Some(1));
        owned.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama",
            "uid": "u", "controller": true }))
        .expect("owner")]);
        assert!(batch_job_view(&owned, "nvidia.com/gpu").is_none());
    }

    #[test]
    fn a_trainjob_starts_when_resumed_or_when_its_jobs_run_and_is_never_elastic() {
        let tj = |suspend: bool, status: Value, trainer: Value| {
            obj(json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": { "name": "llama", "namespace": "ml",
                    "creationTimestamp": "2026-01-01T00:00:00Z" },
                "spec": { "runtimeRef": { "name": "torch-distributed" }, "suspend": suspend,
                    "trainer": trainer },
                "status": status,
            }))
        };
        let trainer = json!({ "numNodes": 4,
            "resourcesPerNode": { "limits": { "nvidia.com/gpu": "8" } } });
        let queued = trainjob_view(
            &tj(
                true,
                json!({ "conditions": [{ "type": "Suspended", "status": "True",
                "reason": "Suspended", "lastTransitionTime": "2026-01-01T00:00:01Z" }] }),
                trainer.clone(),
            ),
            "nvidia.com/gpu",
        )
        .expect("view");
        assert_eq!(queued.key.to_string(), "ml/trainjob/llama");
        assert_eq!((queued.worker_replicas, queued.gpus_per_worker), (4, 8));
        assert_eq!((queued.declared_gpus, queued.elastic), (Some(32), None));
        assert!(queued.suspended && queued.start_time.is_none());
        let resumed = trainjob_view(
            &tj(
                false,
                json!({ "conditions": [
                { "type": "Suspended", "status": "False", "reason": "Resumed",
                  "lastTransitionTime": "2026-01-01T00:10:00Z" },
                { "type": "Complete", "status": "True",
                  "lastTransitionTime": "2026-01-01T02:00:00Z" }] }),
                trainer,
            ),
            "nvidia.com/gpu",
        )
        .expect("view");
        assert_eq!(resumed.start_time, Some(1_767_226_200.0));
        assert_eq!(resumed.finished, Some(("Succeeded", 1_767_232_800.0)));
        // never suspended, its JobSet running; GPUs left to the runtime are not known
        let plain = trainjob_view(
            &tj(
                false,
                json!({ "jobsStatus": [{ "name": "node", "active": 2 }] }),
                json!({ "numNodes": 2 }),
            ),
            "nvidia.com/gpu",
        )
        .expect("view");
        assert_eq!(
            (plain.start_time, plain.declared_gpus),
            (Some(1_767_225_600.0), None)
        );
    }
}
