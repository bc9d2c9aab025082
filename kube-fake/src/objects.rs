//! Builders of the objects tests put into the fake (k8s-openapi types where they exist): GPU
//! nodes, worker pods, PyTorchJobs and their status, Volcano PodGroups, Kueue Workloads. The
//! Trainer v2 TrainJobs and Kueue-managed `batch/v1` Jobs are in `workloads`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

/// RFC 3339 of Unix seconds.
pub fn rfc3339(t: f64) -> String {
    Timestamp::from_microsecond((t * 1e6) as i64)
        .expect("time in range")
        .to_string()
}

fn gpus(n: u32) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity(n.to_string()))])
}

/// A GPU node.
pub fn node(name: &str, gpu_count: u32, product: &str, zone: &str, ready: bool) -> Value {
    let n = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                ("nvidia.com/gpu.product".to_string(), product.to_string()),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(gpus(gpu_count)),
            capacity: Some(gpus(gpu_count)),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    serde_json::to_value(n).expect("node json")
}

/// A worker pod of a PyTorchJob, bound to `node` (Running) or pending.
pub fn worker_pod(ns: &str, job: &str, index: u32, gpu_count: u32, node: Option<&str>) -> Value {
    let labels = [
        ("training.kubeflow.org/job-name", job.to_string()),
        ("training.kubeflow.org/replica-type", "worker".to_string()),
        ("training.kubeflow.org/replica-index", index.to_string()),
    ];
    pod(
        ns,
        &format!("{job}-worker-{index}"),
        &labels,
        gpu_count,
        node,
    )
}

/// A trainer node pod of a TrainJob (labelled by the JobSet the Trainer names after it, in
/// its `node` replicated Job), bound to `node` (Running) or pending.
pub fn trainjob_pod(ns: &str, job: &str, index: u32, gpu_count: u32, node: Option<&str>) -> Value {
    let labels = [
        ("jobset.sigs.k8s.io/jobset-name", job.to_string()),
        ("jobset.sigs.k8s.io/replicatedjob-name", "node".to_string()),
        ("batch.kubernetes.io/job-name", format!("{job}-node-0")),
        (
            "batch.kubernetes.io/job-completion-index",
            index.to_string(),
        ),
    ];
    pod(
        ns,
        &format!("{job}-node-0-{index}"),
        &labels,
        gpu_count,
        node,
    )
}

/// A pod of a `batch/v1` Job, bound to `node` (Running) or pending.
pub fn job_pod(ns: &str, job: &str, index: u32, gpu_count: u32, node: Option<&str>) -> Value {
    let labels = [
        ("batch.kubernetes.io/job-name", job.to_string()),
        ("job-name", job.to_string()),
    ];
    pod(ns, &format!("{job}-{index}"), &labels, gpu_count, node)
}

fn pod(
    ns: &str,
    name: &str,
    labels: &[(&str, String)],
    gpu_count: u32,
    node: Option<&str>,
) -> Value {
    let p = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            containers: vec![Container {
                name: "pytorch".into(),
                image: Some("example.invalid/train:1".into()),
                resources: Some(ResourceRequirements {
                    limits: Some(gpus(gpu_count)),
                    requests: Some(gpus(gpu_count)),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            ..Default::default()
        }),
    };
    serde_json::to_value(p).expect("pod json")
}

/// A `kubeflow.org/v1` PyTorchJob with `replicas` workers of `gpu_count` GPUs each.
pub fn pytorchjob(
    ns: &str,
    name: &str,
    replicas: u32,
    gpu_count: u32,
    elastic: Option<(u32, u32)>,
    created: f64,
) -> Value {
    let mut j = json!({
        "metadata": {
            "name": name, "namespace": ns,
            "creationTimestamp": Time(Timestamp::from_second(created as i64).expect("time")),
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": replicas,
                    "restartPolicy": "OnFailure",
                    "template": { "spec": { "containers": [{
                        "name": "pytorch",
                        "image": "example.invalid/train:1",
                        "resources": { "limits": { "nvidia.com/gpu": gpu_count.to_string() } },
                    }]}},
                },
            },
        },
        "status": { "conditions": [{ "type": "Created", "status": "True" }] },
    });
    if let Some((lo, hi)) = elastic {
        j["spec"]["elasticPolicy"] =
            json!({ "minReplicas": lo, "maxReplicas": hi, "rdzvBackend": "c10d" });
    }
    j
}

/// Marks a job object started at `t` with `active` running workers.
pub fn set_started(job: &mut Value, t: f64, active: u32) {
    job["status"]["startTime"] = json!(rfc3339(t));
    job["status"]["replicaStatuses"] = json!({ "Worker": { "active": active } });
    job["status"]["conditions"] = json!([
        { "type": "Created", "status": "True" },
        { "type": "Running", "status": "True", "lastTransitionTime": rfc3339(t) },
    ]);
}

/// Marks a job object succeeded at `t`.
pub fn set_succeeded(job: &mut Value, t: f64) {
    job["status"]["completionTime"] = json!(rfc3339(t));
    job["status"]["replicaStatuses"] = json!({ "Worker": { "active": 0, "succeeded": 1 } });
    job["status"]["conditions"] = json!([
        { "type": "Created", "status": "True" },
        { "type": "Running", "status": "False" },
        { "type": "Succeeded", "status": "True", "lastTransitionTime": rfc3339(t) },
    ]);
}

/// A Volcano PodGroup owned by a PyTorchJob.
pub fn podgroup(ns: &str, job: &str, min_member: u32, phase: &str) -> Value {
    json!({
        "metadata": { "name": job, "namespace": ns, "ownerReferences": [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job,
            "uid": format!("{job}-uid"), "controller": true }] },
        "spec": { "minMember": min_member },
        "status": { "phase": phase },
    })
}

/// A Kueue Workload owned by a PyTorchJob.
pub fn workload(ns: &str, job: &str, admitted: bool) -> Value {
    workload_of("kubeflow.org/v1", "PyTorchJob", ns, job, admitted)
}

/// A Kueue Workload owned by a job of `kind` (`apiVersion` `api_version`), named as Kueue
/// names them (`<kind>-<job>`, lower case; the real name also has a hash suffix).
pub fn workload_of(api_version: &str, kind: &str, ns: &str, job: &str, admitted: bool) -> Value {
    let mut conds = vec![
        json!({ "type": "QuotaReserved", "status": if admitted { "True" } else { "False" },
        "reason": if admitted { "QuotaReserved" } else { "Pending" }, "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z" }),
    ];
    if admitted {
        conds.push(
            json!({ "type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z" }),
        );
    }
    json!({
        "metadata": { "name": format!("{}-{job}", kind.to_lowercase()), "namespace": ns, "ownerReferences": [{
            "apiVersion": api_version, "kind": kind, "name": job,
            "uid": format!("{job}-uid"), "controller": true }] },
        "spec": { "queueName": "default", "podSets": [] },
        "status": { "conditions": conds },
    })
}
