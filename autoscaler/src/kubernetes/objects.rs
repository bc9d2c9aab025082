//! Reading Kubernetes objects into a [`ClusterSnapshot`]: pure functions over what the watches
//! hold (nodes, pods, Kubeflow `PyTorchJob`s, Volcano `PodGroup`s, Kueue `Workload`s), so the
//! mapping is tested without a server.
//!
//! - **Nodes**: GPU nodes only (allocatable `nvidia.com/gpu` > 0), sorted by name. A node is
//!   healthy when its `Ready` condition is `True` and it is not cordoned. Its GPU type is the
//!   `nvidia.com/gpu.product` label (speed from [`ObserveConfig::gpu_speeds`], else 1.0); its
//!   rack is the value of [`ObserveConfig::rack_label`]. Free GPUs are allocatable minus the
//!   GPU requests of the non-terminated pods bound to it.
//! - **Jobs**: one entry per unfinished `PyTorchJob`, in GPUs (a worker pod with `g` GPUs counts
//!   `g`). A job is *queued* when its Kueue `Workload` is not `Admitted`, its Volcano `PodGroup`
//!   is `Pending`/`Inqueue`, or none of its worker pods is bound to a node; otherwise it is
//!   *running* with as many workers as it has bound worker pods. Its `[min, max]` comes from
//!   `spec.elasticPolicy`; a job without both bounds is observed with `min = max` (never
//!   scaled).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::cluster::{ClusterSnapshot, GpuType, JobId, NodeInfo, QueuedJob, RunningJob, Slot};
use crate::placement::PlacementRules;

/// Annotation holding the time of a job's last checkpoint (RFC 3339), written by the training
/// job. A scale-down waits for it (or for the grace period).
pub const CHECKPOINT_ANNOTATION: &str = "augur.dev/last-checkpoint";
/// Annotation holding the worker count the user asked for (else the first one Augur saw).
pub const REQUESTED_ANNOTATION: &str = "augur.dev/requested-workers";
/// Annotation holding a predicted run time in seconds (e.g. written by `augur serve`).
pub const PREDICTED_ANNOTATION: &str = "augur.dev/predicted-runtime-s";
/// Pod label naming the PyTorchJob (Kubeflow training-operator).
pub const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// Pod label naming the replica type (`worker`, `master`).
pub const REPLICA_TYPE_LABEL: &str = "training.kubeflow.org/replica-type";

/// What the snapshot builder reads from objects.
#[derive(Debug, Clone, PartialEq)]
pub struct ObserveConfig {
    /// Extended resource counted as GPUs.
    pub gpu_resource: String,
    /// Node label naming the GPU model.
    pub gpu_product_label: String,
    /// Node label naming the locality domain.
    pub rack_label: String,
    /// Relative speed per GPU product (1.0 when absent).
    pub gpu_speeds: BTreeMap<String, f64>,
    /// Placement rules reported to policies (Volcano/kube-scheduler decide for real).
    pub rules: PlacementRules,
}

impl Default for ObserveConfig {
    fn default() -> Self {
        ObserveConfig {
            gpu_resource: "nvidia.com/gpu".into(),
            gpu_product_label: "nvidia.com/gpu.product".into(),
            rack_label: "topology.kubernetes.io/zone".into(),
            gpu_speeds: BTreeMap::new(),
            rules: PlacementRules::default(),
        }
    }
}

/// `namespace/name` of a job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether a job waits or runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
}

/// What the backend needs to act on a job it put in a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFacts {
    pub key: JobKey,
    pub state: JobState,
    /// `spec.pytorchReplicaSpecs.Worker.replicas` as observed.
    pub spec_replicas: u32,
    /// GPUs per worker pod (≥ 1).
    pub gpus_per_worker: u32,
    /// `spec.elasticPolicy` bounds in replicas; `None` for a job that is never scaled.
    pub bounds: Option<(u32, u32)>,
    /// When its current run started (running jobs).
    pub started: f64,
    /// Time of its last checkpoint, when the annotation is present and valid.
    pub last_checkpoint: Option<f64>,
}

/// Interned job ids and what is remembered about jobs across snapshots.
#[derive(Debug, Default)]
pub struct JobMemory {
    ids: HashMap<JobKey, JobId>,
    next_id: u64,
    /// First observed worker replicas (the request when no annotation says it).
    first_replicas: HashMap<JobKey, u32>,
    /// Time of the last rescale Augur made.
    pub last_rescale: HashMap<JobKey, f64>,
}

impl JobMemory {
    /// The id of a job (interned on first sight).
    pub fn id(&mut self, key: &JobKey) -> JobId {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = JobId(self.next_id);
        self.next_id += 1;
        self.ids.insert(key.clone(), id);
        id
    }

    /// The job behind an id, while it is remembered (not yet gone).
    pub fn key_of(&self, id: JobId) -> Option<&JobKey> {
        self.ids.iter().find(|(_, &v)| v == id).map(|(k, _)| k)
    }

    /// Forgets jobs that are gone (finished or deleted); their ids are never reused.
    fn retain(&mut self, live: &std::collections::HashSet<&JobKey>) {
        self.ids.retain(|k, _| live.contains(k));
        self.first_replicas.retain(|k, _| live.contains(k));
        self.last_rescale.retain(|k, _| live.contains(k));
    }
}

/// Seconds since the Unix epoch of a Kubernetes timestamp.
pub fn seconds(t: &Timestamp) -> f64 {
    t.as_microsecond() as f64 / 1e6
}

/// Parses an RFC 3339 time.
pub fn parse_time(s: &str) -> Option<f64> {
    s.parse::<Timestamp>().ok().map(|t| seconds(&t))
}

/// A whole-number quantity (`"8"`); `None` for fractional or malformed ones.
pub fn whole(q: &Quantity) -> Option<u32> {
    q.0.trim().parse::<u32>().ok()
}

/// GPUs a pod requests (sum over its containers, requests else limits).
pub fn pod_gpus(pod: &Pod, resource: &str) -> u32 {
    let Some(spec) = &pod.spec else { return 0 };
    spec.containers
        .iter()
        .map(|c| {
            let r = c.resources.as_ref();
            r.and_then(|r| r.requests.as_ref())
                .and_then(|m| m.get(resource))
                .or_else(|| {
                    r.and_then(|r| r.limits.as_ref())
                        .and_then(|m| m.get(resource))
                })
                .and_then(whole)
                .unwrap_or(0)
        })
        .sum()
}

/// True when the pod is finished (its resources are released).
pub fn terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) || pod.metadata.deletion_timestamp.is_some()
}

/// The node a pod is bound to.
pub fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn u32_at(v: &Value, path: &[&str]) -> Option<u32> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// The facts of a `PyTorchJob` read from its spec and status.
#[derive(Debug, Clone, PartialEq)]
pub struct PyTorchJobView {
    pub key: JobKey,
    pub created: f64,
    /// `status.startTime`.
    pub start_time: Option<f64>,
    /// `Succeeded` or `Failed` when a terminal condition is `True`.
    pub finished: Option<(&'static str, f64)>,
    pub worker_replicas: u32,
    pub gpus_per_worker: u32,
    /// `spec.elasticPolicy.{minReplicas,maxReplicas}` when both are set and ordered.
    pub elastic: Option<(u32, u32)>,
    pub requested_replicas: Option<u32>,
    pub predicted_runtime: Option<f64>,
    pub last_checkpoint: Option<f64>,
}

/// Reads a `kubeflow.org/v1` `PyTorchJob`; `None` when it has no name or namespace.
pub fn pytorchjob_view(obj: &DynamicObject, gpu_resource: &str) -> Option<PyTorchJobView> {
    let key = JobKey {
        namespace: obj.metadata.namespace.clone()?,
        name: obj.metadata.name.clone()?,
    };
    let data = &obj.data;
    let worker = data
        .get("spec")
        .and_then(|s| s.get("pytorchReplicaSpecs"))
        .and_then(|r| r.get("Worker"));
    let worker_replicas = worker.and_then(|w| u32_at(w, &["replicas"])).unwrap_or(1);
    let gpus_per_worker = worker
        .and_then(|w| w.pointer("/template/spec/containers"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let pick = |k: &str| {
                        c.pointer(&format!("/resources/{k}"))
                            .and_then(|m| m.get(gpu_resource))
                            .and_then(|q| match q {
                                Value::String(s) => s.trim().parse::<u32>().ok(),
                                Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
                                _ => None,
                            })
                    };
                    pick("limits").or_else(|| pick("requests")).unwrap_or(0)
                })
                .sum::<u32>()
        })
        .unwrap_or(0)
        .max(1);
    let elastic = data
        .get("spec")
        .and_then(|s| s.get("elasticPolicy"))
        .and_then(|e| Some((u32_at(e, &["minReplicas"])?, u32_at(e, &["maxReplicas"])?)))
        .filter(|&(lo, hi)| lo >= 1 && lo <= hi);
    let status = data.get("status");
    let start_time = status
        .and_then(|s| s.get("startTime"))
        .and_then(Value::as_str)
        .and_then(parse_time);
    let finished = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter().find_map(|c| {
                let kind = match c.get("type").and_then(Value::as_str)? {
                    "Succeeded" => "Succeeded",
                    "Failed" => "Failed",
                    _ => return None,
                };
                if c.get("status").and_then(Value::as_str) != Some("True") {
                    return None;
                }
                let t = c
                    .get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .and_then(parse_time)
                    .unwrap_or(0.0);
                Some((kind, t))
            })
        });
    let meta = &obj.metadata;
    Some(PyTorchJobView {
        key,
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0.0, |t| seconds(&t.0)),
        start_time,
        finished,
        worker_replicas,
        gpus_per_worker,
        elastic,
        requested_replicas: annotation(meta, REQUESTED_ANNOTATION)
            .and_then(|s| s.trim().parse().ok()),
        predicted_runtime: annotation(meta, PREDICTED_ANNOTATION)
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x > 0.0),
        last_checkpoint: annotation(meta, CHECKPOINT_ANNOTATION).and_then(parse_time),
    })
}

/// True when the Kueue `Workload` has an `Admitted` condition `True`.
pub fn workload_admitted(wl: &DynamicObject) -> bool {
    condition_true(&wl.data, "Admitted")
}

/// True when the object's `status.conditions` has `type` with status `True`.
pub fn condition_true(data: &Value, kind: &str) -> bool {
    data.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The PyTorchJob a Kueue `Workload` or Volcano `PodGroup` belongs to (its controller owner
/// reference of kind `PyTorchJob`).
pub fn owner_job(obj: &DynamicObject) -> Option<JobKey> {
    let ns = obj.metadata.namespace.clone()?;
    obj.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "PyTorchJob")
        .map(|o| JobKey {
            namespace: ns,
            name: o.name.clone(),
        })
}

/// What the watches hold, borrowed for one snapshot.
#[derive(Debug, Default)]
pub struct Objects<'a> {
    pub nodes: &'a [Arc<Node>],
    pub pods: &'a [Arc<Pod>],
    pub jobs: &'a [Arc<DynamicObject>],
    /// `None` when Volcano is not installed.
    pub podgroups: Option<&'a [Arc<DynamicObject>]>,
    /// `None` when Kueue is not installed.
    pub workloads: Option<&'a [Arc<DynamicObject>]>,
}

/// Predicted run time of a job from outside (Augur's predictor), used when the job has no
/// [`PREDICTED_ANNOTATION`].
pub type RuntimeHint = Arc<dyn Fn(&PyTorchJobView) -> Option<f64> + Send + Sync>;

/// Builds the snapshot at `now`, with the facts the backend needs to act on each job (indexed
/// by the job's id).
pub fn build_snapshot(
    objs: &Objects<'_>,
    now: f64,
    cfg: &ObserveConfig,
    memory: &mut JobMemory,
    hint: Option<&RuntimeHint>,
) -> (ClusterSnapshot, HashMap<JobId, JobFacts>) {
    let mut snap = ClusterSnapshot {
        time: now,
        rules: cfg.rules,
        ..Default::default()
    };
    // nodes
    let mut nodes: Vec<&Node> = objs
        .nodes
        .iter()
        .map(Arc::as_ref)
        .filter(|n| node_gpus(n, &cfg.gpu_resource) > 0)
        .collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut node_index: HashMap<&str, u32> = HashMap::new();
    let mut racks: Vec<String> = Vec::new();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let product = label(&n.metadata, &cfg.gpu_product_label).unwrap_or("unknown");
        let gpu_type = match snap.gpu_types.iter().position(|t| t.name == product) {
            Some(i) => i,
            None => {
                snap.gpu_types.push(GpuType {
                    name: product.to_string(),
                    speed: cfg.gpu_speeds.get(product).copied().unwrap_or(1.0),
                });
                snap.gpu_types.len() - 1
            }
        };
        let rack_name = label(&n.metadata, &cfg.rack_label).unwrap_or("");
        let rack = match racks.iter().position(|r| r == rack_name) {
            Some(i) => i,
            None => {
                racks.push(rack_name.to_string());
                racks.len() - 1
            }
        };
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let cordoned = n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let gpus = node_gpus(n, &cfg.gpu_resource);
        node_index.insert(name, snap.nodes.len() as u32);
        snap.nodes.push(NodeInfo {
            name: name.to_string(),
            gpu_type: u16::try_from(gpu_type).unwrap_or(u16::MAX),
            rack: rack as u32,
            gpus,
            free: gpus,
            healthy: ready && !cordoned,
        });
    }
    // GPU use of bound pods; bound worker pods per job
    let mut bound_workers: HashMap<JobKey, Vec<(u32, u32)>> = HashMap::new();
    for pod in objs.pods.iter().map(Arc::as_ref) {
        if terminated(pod) {
            continue;
        }
        let Some(node) = bound_node(pod).and_then(|n| node_index.get(n)).copied() else {
            continue;
        };
        let g = pod_gpus(pod, &cfg.gpu_resource);
        if let Some(n) = snap.nodes.get_mut(node as usize) {
            n.free = n.free.saturating_sub(g);
        }
        let is_worker = label(&pod.metadata, REPLICA_TYPE_LABEL)
            .is_some_and(|t| t.eq_ignore_ascii_case("worker"));
        if let (true, Some(job), Some(ns)) = (
            is_worker,
            label(&pod.metadata, JOB_NAME_LABEL),
            pod.metadata.namespace.as_deref(),
        ) {
            bound_workers
                .entry(JobKey {
                    namespace: ns.to_string(),
                    name: job.to_string(),
                })
                .or_default()
                .push((node, g));
        }
    }
    for n in &mut snap.nodes {
        if !n.healthy {
            n.free = 0;
        }
    }
    // what the queueing systems hold back
    let mut held: HashMap<JobKey, bool> = HashMap::new();
    for wl in objs.workloads.unwrap_or(&[]) {
        if let Some(k) = owner_job(wl) {
            *held.entry(k).or_default() |= !workload_admitted(wl);
        }
    }
    for pg in objs.podgroups.unwrap_or(&[]) {
        let phase = pg.data.pointer("/status/phase").and_then(Value::as_str);
        if let Some(k) = owner_job(pg) {
            *held.entry(k).or_default() |= matches!(phase, Some("Pending" | "Inqueue"));
        }
    }
    // jobs
    let mut views: Vec<PyTorchJobView> = objs
        .jobs
        .iter()
        .filter_map(|j| pytorchjob_view(j, &cfg.gpu_resource))
        .filter(|v| v.finished.is_none())
        .collect();
    views.sort_by(|a, b| a.created.total_cmp(&b.created).then(a.key.cmp(&b.key)));
    memory.retain(&views.iter().map(|v| &v.key).collect());
    let mut facts = HashMap::new();
    for v in &views {
        let id = memory.id(&v.key);
        let g = v.gpus_per_worker;
        let first = *memory
            .first_replicas
            .entry(v.key.clone())
            .or_insert(v.worker_replicas);
        let requested = v.requested_replicas.unwrap_or(first);
        let (lo, hi) = v.elastic.unwrap_or((requested, requested));
        // an explicit annotation wins over the service's prediction
        let predicted = v.predicted_runtime.or_else(|| hint.and_then(|h| h(v)));
        let bound = bound_workers.get(&v.key);
        let queued = held.get(&v.key).copied().unwrap_or(false) || bound.is_none_or(Vec::is_empty);
        let last_rescale = memory.last_rescale.get(&v.key).copied();
        let first_started = v.start_time.unwrap_or(v.created);
        let started = last_rescale.map_or(first_started, |t| t.max(first_started));
        facts.insert(
            id,
            JobFacts {
                key: v.key.clone(),
                state: if queued {
                    JobState::Queued
                } else {
                    JobState::Running
                },
                spec_replicas: v.worker_replicas,
                gpus_per_worker: g,
                bounds: v.elastic,
                started,
                last_checkpoint: v.last_checkpoint,
            },
        );
        if queued {
            snap.queued.push(QueuedJob {
                id,
                submitted: v.created,
                queued_since: v.created,
                requested: requested * g,
                min_workers: lo * g,
                max_workers: hi * g,
                attained_gpu_s: 0.0,
                run_s: 0.0,
                progress_s: None,
                predicted_runtime: predicted,
                oracle_remaining_s: None,
            });
            continue;
        }
        let placed = bound.map_or(&[][..], Vec::as_slice);
        let mut per_node: BTreeMap<u32, u32> = BTreeMap::new();
        for &(node, gpus) in placed {
            *per_node.entry(node).or_default() += gpus;
        }
        let a = snap.slots.len() as u32;
        snap.slots
            .extend(per_node.iter().map(|(&node, &gpus)| Slot { node, gpus }));
        let b = snap.slots.len() as u32;
        let workers = placed.len() as u32 * g;
        snap.running.push(RunningJob {
            id,
            submitted: v.created,
            first_started,
            started,
            workers,
            requested: requested * g,
            min_workers: lo * g,
            max_workers: hi * g,
            restarting: false,
            // approximate: the current size since the first start
            attained_gpu_s: (now - first_started).max(0.0) * f64::from(workers),
            progress_s: None,
            predicted_runtime: predicted,
            oracle_remaining_s: None,
            last_rescale,
            slots: (a, b),
        });
    }
    (snap, facts)
}

/// Allocatable GPUs of a node.
pub fn node_gpus(n: &Node, resource: &str) -> u32 {
    n.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(resource))
        .and_then(whole)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).expect("object"))
    }

    fn node(name: &str, gpus: u32, ready: &str, cordoned: bool) -> Arc<Node> {
        obj(json!({
            "metadata": { "name": name, "labels": { "nvidia.com/gpu.product": "H100" } },
            "spec": { "unschedulable": cordoned },
            "status": {
                "allocatable": { "nvidia.com/gpu": gpus.to_string() },
                "conditions": [{ "type": "Ready", "status": ready }],
            },
        }))
    }

    fn worker(job: &str, i: u32, gpus: u32, node: Option<&str>, phase: &str) -> Arc<Pod> {
        obj(json!({
            "metadata": { "name": format!("{job}-worker-{i}"), "namespace": "ml", "labels": {
                JOB_NAME_LABEL: job, REPLICA_TYPE_LABEL: "Worker" } },
            "spec": { "nodeName": node, "containers": [{ "name": "c",
                "resources": { "limits": { "nvidia.com/gpu": gpus.to_string() } } }] },
            "status": { "phase": phase },
        }))
    }

    fn job(
        name: &str,
        replicas: u32,
        gpus: u32,
        elastic: Value,
        created: &str,
    ) -> Arc<DynamicObject> {
        obj(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": { "name": name, "namespace": "ml", "creationTimestamp": created },
            "spec": { "elasticPolicy": elastic, "pytorchReplicaSpecs": { "Worker": {
                "replicas": replicas,
                "template": { "spec": { "containers": [{ "name": "c",
                    "resources": { "limits": { "nvidia.com/gpu": gpus } } }] } } } } },
        }))
    }

    #[test]
    fn multi_gpu_workers_count_in_gpus_and_half_specified_bounds_are_not_elastic() {
        let nodes = [
            node("a", 8, "True", false),
            node("b", 8, "True", false),
            node("c", 8, "True", true),
            node("d", 8, "Unknown", false),
        ];
        let pods = [
            worker("big", 0, 8, Some("a"), "Running"),
            worker("big", 1, 8, Some("b"), "Running"),
            worker("big", 2, 8, None, "Pending"),
            // finished pods hold nothing
            worker("old", 0, 8, Some("b"), "Succeeded"),
            worker("half", 0, 1, None, "Pending"),
        ];
        let jobs = [
            job(
                "big",
                3,
                8,
                json!({ "minReplicas": 1, "maxReplicas": 4 }),
                "2026-01-01T00:00:00Z",
            ),
            job(
                "half",
                1,
                1,
                json!({ "maxReplicas": 4 }),
                "2026-01-01T00:01:00Z",
            ),
        ];
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs,
            ..Default::default()
        };
        let mut mem = JobMemory::default();
        let (s, facts) = build_snapshot(&objs, 1.0e9, &ObserveConfig::default(), &mut mem, None);
        let free: Vec<(u32, bool)> = s.nodes.iter().map(|n| (n.free, n.healthy)).collect();
        assert_eq!(free, vec![(0, true), (0, true), (0, false), (0, false)]);
        let r = &s.running[0];
        // 2 of 3 workers bound (the third is stuck pending): it holds 16 GPUs
        assert_eq!(
            (r.workers, r.requested, r.min_workers, r.max_workers),
            (16, 24, 8, 32)
        );
        assert_eq!(s.placement_of(r).len(), 2);
        let f = &facts[&r.id];
        assert_eq!(
            (f.spec_replicas, f.gpus_per_worker, f.bounds),
            (3, 8, Some((1, 4)))
        );
        let q = &s.queued[0];
        assert!(!q.elastic(), "only maxReplicas: observed, never scaled");
        assert_eq!(facts[&q.id].bounds, None);
        // ids are stable across snapshots and not reused after a job is gone
        let (s2, _) = build_snapshot(&objs, 1.0e9, &ObserveConfig::default(), &mut mem, None);
        assert_eq!(s2.running[0].id, r.id);
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs[1..],
            ..Default::default()
        };
        let (s3, _) = build_snapshot(&objs, 1.0e9, &ObserveConfig::default(), &mut mem, None);
        assert_eq!(s3.queued[0].id, q.id);
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs,
            ..Default::default()
        };
        let (s4, _) = build_snapshot(&objs, 1.0e9, &ObserveConfig::default(), &mut mem, None);
        assert!(
            s4.running[0].id.0 > q.id.0,
            "a job seen again gets a new id"
        );
    }
}
