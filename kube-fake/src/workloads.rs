//! Builders of the workloads beside PyTorchJobs: Kubeflow Trainer v2 `TrainJob`s
//! (`trainer.kubeflow.org/v1alpha1`) and Kueue-managed `batch/v1` Jobs, with the status their
//! controllers write (the Trainer's `Suspended` / `Complete` / `Failed` conditions and
//! `jobsStatus`; the Job controller's `startTime`, `active` and terminal conditions).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::objects::rfc3339;

/// Kueue's label naming a job's LocalQueue.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

fn meta(ns: &str, name: &str, queue: Option<&str>, created: f64) -> Value {
    let mut m = json!({
        "name": name, "namespace": ns,
        "creationTimestamp": Time(Timestamp::from_second(created as i64).expect("time")),
    });
    if let Some(q) = queue {
        m["labels"] = json!({ QUEUE_LABEL: q });
    }
    m
}

/// A TrainJob of `nodes` trainer nodes with `gpus_per_node` GPUs each
/// (`spec.trainer.numNodes`, `spec.trainer.resourcesPerNode`) on the `torch-distributed`
/// ClusterTrainingRuntime; in Kueue's `queue` (then created suspended, as Kueue's webhook
/// does), else running unsuspended.
pub fn trainjob(
    ns: &str,
    name: &str,
    nodes: u32,
    gpus_per_node: u32,
    queue: Option<&str>,
    created: f64,
) -> Value {
    json!({
        "metadata": meta(ns, name, queue, created),
        "spec": {
            "runtimeRef": { "name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime" },
            "trainer": {
                "image": "example.invalid/train:1",
                "numNodes": nodes,
                "resourcesPerNode": { "limits": { "nvidia.com/gpu": gpus_per_node.to_string() } },
            },
            "suspend": queue.is_some(),
        },
    })
}

/// Marks a TrainJob resumed (admitted by Kueue) at `t` with its trainer Job active.
pub fn set_trainjob_resumed(tj: &mut Value, t: f64) {
    tj["spec"]["suspend"] = json!(false);
    tj["status"] = json!({
        "conditions": [{ "type": "Suspended", "status": "False", "reason": "Resumed",
            "message": "TrainJob is resumed", "lastTransitionTime": rfc3339(t) }],
        "jobsStatus": [{ "name": "node", "ready": 1, "succeeded": 0, "failed": 0,
            "active": 1, "suspended": 0 }],
    });
}

/// Marks a TrainJob `Complete` (or `Failed`) at `t`.
pub fn set_trainjob_finished(tj: &mut Value, t: f64, succeeded: bool) {
    let kind = if succeeded { "Complete" } else { "Failed" };
    let conds = tj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conds: Vec<Value> = conds.into_iter().filter(|c| c["type"] != kind).collect();
    conds.push(
        json!({ "type": kind, "status": "True", "reason": kind, "message": "",
        "lastTransitionTime": rfc3339(t) }),
    );
    tj["status"]["conditions"] = json!(conds);
}

/// A `batch/v1` Job of `parallelism` pods with `gpus` GPUs each and `completions` (when
/// given); in Kueue's `queue` (then created suspended), else unsuspended.
pub fn batch_job(
    ns: &str,
    name: &str,
    parallelism: u32,
    completions: Option<u32>,
    gpus: u32,
    queue: Option<&str>,
    created: f64,
) -> Value {
    let mut j = json!({
        "metadata": meta(ns, name, queue, created),
        "spec": {
            "parallelism": parallelism,
            "suspend": queue.is_some(),
            "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{ "name": "work", "image": "example.invalid/work:1",
                    "resources": { "requests": { "nvidia.com/gpu": gpus.to_string() },
                        "limits": { "nvidia.com/gpu": gpus.to_string() } } }],
            } },
        },
    });
    if let Some(c) = completions {
        j["spec"]["completions"] = json!(c);
        j["spec"]["completionMode"] = json!("Indexed");
    }
    j
}

/// Opts a Job into Kueue's elastic jobs (workload slices): the `kueue.x-k8s.io/elastic-job`
/// annotation, and the scheduling gate of the same name Kueue's webhook adds to its pod
/// template when the `ElasticJobsViaWorkloadSlices` feature gate is on.
pub fn make_elastic(job: &mut Value) {
    job["metadata"]["annotations"] = json!({ "kueue.x-k8s.io/elastic-job": "true" });
    job["spec"]["template"]["spec"]["schedulingGates"] =
        json!([{ "name": "kueue.x-k8s.io/elastic-job" }]);
}

/// Marks a Job unsuspended and started at `t` with `active` pods.
pub fn set_job_started(job: &mut Value, t: f64, active: u32) {
    job["spec"]["suspend"] = json!(false);
    job["status"] = json!({ "startTime": rfc3339(t), "active": active, "ready": active });
}

/// Marks a Job `Complete` (or `Failed`) at `t`.
pub fn set_job_finished(job: &mut Value, t: f64, succeeded: bool) {
    let kind = if succeeded { "Complete" } else { "Failed" };
    job["status"]["active"] = json!(0);
    job["status"]["conditions"] = json!([{ "type": kind, "status": "True",
        "lastProbeTime": rfc3339(t), "lastTransitionTime": rfc3339(t) }]);
    if succeeded {
        job["status"]["completionTime"] = json!(rfc3339(t));
    }
}
