//! Reading Kubernetes objects: the facts of a job ([`JobView`]; a `PyTorchJob` here, the
//! other kinds in `workloads`), of pods and nodes, of Volcano `PodGroup`s and Kueue
//! `Workload`s, the annotations Augur reads and writes, and what is remembered about jobs
//! across snapshots ([`JobMemory`]). Pure functions over what the watches hold, so the mapping
//! is tested without a server.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::Value;

use super::kinds::{JobKind, QUEUE_LABEL};
use crate::cluster::JobId;
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

/// A job: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    pub kind: JobKind,
    pub namespace: String,
    pub name: String,
}

impl JobKey {
    /// A job of `kind`.
    pub fn new(kind: JobKind, namespace: &str, name: &str) -> JobKey {
        JobKey {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// A `PyTorchJob`.
    pub fn pytorchjob(namespace: &str, name: &str) -> JobKey {
        JobKey::new(JobKind::PyTorchJob, namespace, name)
    }
}

/// The job's id: `namespace/name` for a PyTorchJob, `namespace/trainjob/name` and
/// `namespace/job/name` for the other kinds.
impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind.id_segment() {
            None => write!(f, "{}/{}", self.namespace, self.name),
            Some(k) => write!(f, "{}/{k}/{}", self.namespace, self.name),
        }
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
    /// Its size as observed: PyTorchJob `spec.pytorchReplicaSpecs.Worker.replicas`, TrainJob
    /// `spec.trainer.numNodes`, Job `spec.parallelism`.
    pub spec_replicas: u32,
    /// GPUs per worker pod (≥ 1).
    pub gpus_per_worker: u32,
    /// Bounds in replicas ([`JobKind::bounds_field`]); `None` for a job that is never scaled.
    pub bounds: Option<(u32, u32)>,
    /// When its current run started (running jobs).
    pub started: f64,
    /// Time of its last checkpoint, when the annotation is present and valid.
    pub last_checkpoint: Option<f64>,
    /// Suspended (`spec.suspend`, PyTorchJob `spec.runPolicy.suspend`).
    pub suspended: bool,
    /// It has started at least once (a start time is recorded).
    pub ever_started: bool,
    /// The GPU type its pod templates select (the product label's value), if any.
    pub gpu_type: Option<String>,
}

/// Interned job ids and what is remembered about jobs across snapshots.
#[derive(Debug, Default)]
pub struct JobMemory {
    ids: HashMap<JobKey, JobId>,
    next_id: u64,
    /// First observed worker replicas (the request when no annotation says it).
    pub(super) first_replicas: HashMap<JobKey, u32>,
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
    pub(super) fn retain(&mut self, live: &std::collections::HashSet<&JobKey>) {
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

/// A label of an object.
pub(super) fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

pub(super) fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

pub(super) fn u32_at(v: &Value, path: &[&str]) -> Option<u32> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// The facts of a job read from its spec and status.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    pub key: JobKey,
    pub created: f64,
    /// When it started running (see [`JobKind`] for each kind's field).
    pub start_time: Option<f64>,
    /// `Succeeded` or `Failed` when a terminal condition is `True`, with its transition time.
    pub finished: Option<(&'static str, f64)>,
    /// Its size in worker pods (PyTorchJob workers, TrainJob nodes, Job parallelism).
    pub worker_replicas: u32,
    /// GPUs per worker pod (≥ 1).
    pub gpus_per_worker: u32,
    /// GPUs the spec asks for in all (`None` when it leaves them to something not read, e.g. a
    /// TrainJob's runtime).
    pub declared_gpus: Option<u32>,
    /// Scaling bounds in worker pods, when it may be scaled.
    pub elastic: Option<(u32, u32)>,
    pub requested_replicas: Option<u32>,
    pub predicted_runtime: Option<f64>,
    pub last_checkpoint: Option<f64>,
    /// Kueue LocalQueue (label [`QUEUE_LABEL`]).
    pub queue: Option<String>,
    /// `spec.suspend` (PyTorchJob `spec.runPolicy.suspend`): held, e.g. by Kueue until admitted.
    pub suspended: bool,
    /// The GPU type its pod templates select (the GPU product node label; see
    /// [`selected_type`](super::steer::selected_type)); filled in by the job watches.
    pub gpu_type: Option<String>,
}

/// GPUs of a list of containers (`limits`, else `requests`; whole numbers only).
pub(super) fn containers_gpus(containers: Option<&Value>, gpu_resource: &str) -> u32 {
    containers
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| resources_gpus(c.get("resources"), gpu_resource))
                .sum()
        })
        .unwrap_or(0)
}

/// GPUs of a `ResourceRequirements` (`limits`, else `requests`); 0 when it names none.
pub(super) fn resources_gpus(resources: Option<&Value>, gpu_resource: &str) -> u32 {
    let pick = |k: &str| {
        resources
            .and_then(|r| r.get(k))
            .and_then(|m| m.get(gpu_resource))
            .and_then(|q| match q {
                Value::String(s) => s.trim().parse::<u32>().ok(),
                Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
                _ => None,
            })
    };
    pick("limits").or_else(|| pick("requests")).unwrap_or(0)
}

/// The first of `conditions` whose `type` is a success or failure kind and whose status is
/// `True`, as `Succeeded` / `Failed` with its transition time.
pub(super) fn terminal(data: &Value, success: &str, failure: &str) -> Option<(&'static str, f64)> {
    data.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|c| {
            let ty = c.get("type").and_then(Value::as_str)?;
            let kind = if ty == success {
                "Succeeded"
            } else if ty == failure {
                "Failed"
            } else {
                return None;
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
}

/// The view of a job with what every kind shares (metadata, annotations, queue label); the
/// kind's reader fills in its size, times and bounds.
pub(super) fn base_view(obj: &DynamicObject, kind: JobKind) -> Option<JobView> {
    let meta = &obj.metadata;
    Some(JobView {
        key: JobKey {
            kind,
            namespace: meta.namespace.clone()?,
            name: meta.name.clone()?,
        },
        created: meta
            .creation_timestamp
            .as_ref()
            .map_or(0.0, |t| seconds(&t.0)),
        start_time: None,
        finished: None,
        worker_replicas: 1,
        gpus_per_worker: 1,
        declared_gpus: None,
        elastic: None,
        requested_replicas: annotation(meta, REQUESTED_ANNOTATION)
            .and_then(|s| s.trim().parse().ok()),
        predicted_runtime: annotation(meta, PREDICTED_ANNOTATION)
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|x| x.is_finite() && *x > 0.0),
        last_checkpoint: annotation(meta, CHECKPOINT_ANNOTATION).and_then(parse_time),
        queue: label(meta, QUEUE_LABEL).map(str::to_string),
        suspended: false,
        gpu_type: None,
    })
}

/// Reads a `kubeflow.org/v1` `PyTorchJob`; `None` when it has no name or namespace.
pub fn pytorchjob_view(obj: &DynamicObject, gpu_resource: &str) -> Option<JobView> {
    let mut v = base_view(obj, JobKind::PyTorchJob)?;
    let data = &obj.data;
    let worker = data.pointer("/spec/pytorchReplicaSpecs/Worker");
    v.worker_replicas = worker.and_then(|w| u32_at(w, &["replicas"])).unwrap_or(1);
    let per_worker = containers_gpus(
        worker.and_then(|w| w.pointer("/template/spec/containers")),
        gpu_resource,
    );
    v.gpus_per_worker = per_worker.max(1);
    v.declared_gpus = Some(v.requested_replicas.unwrap_or(v.worker_replicas) * v.gpus_per_worker);
    v.elastic = data
        .pointer("/spec/elasticPolicy")
        .and_then(|e| Some((u32_at(e, &["minReplicas"])?, u32_at(e, &["maxReplicas"])?)))
        .filter(|&(lo, hi)| lo >= 1 && lo <= hi);
    v.start_time = data
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .and_then(parse_time);
    v.finished = terminal(data, "Succeeded", "Failed");
    v.suspended = data
        .pointer("/spec/runPolicy/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some(v)
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

/// The job a Kueue `Workload` or Volcano `PodGroup` belongs to: its owner reference of a
/// kind the backend reads ([`JobKind::of_owner`]).
pub fn owner_job(obj: &DynamicObject) -> Option<JobKey> {
    let ns = obj.metadata.namespace.as_deref()?;
    obj.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find_map(|o| {
            Some(JobKey::new(
                JobKind::of_owner(&o.api_version, &o.kind)?,
                ns,
                &o.name,
            ))
        })
}

/// Predicted run time of a job from outside (Augur's predictor), used when the job has no
/// [`PREDICTED_ANNOTATION`].
pub type RuntimeHint = Arc<dyn Fn(&JobView) -> Option<f64> + Send + Sync>;

/// How fast jobs run on the GPU types of a snapshot, from outside (Augur's advisor, the one
/// source of the run time a job gets on a type): a job predicted to run `T` runs `T / speed`
/// on a type where its speed is `speed`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeSpeeds {
    /// Each type's typical speed (that of a job whose model is not known), by the type's
    /// index; empty when nothing says (every type then counts as 1).
    pub typical: Vec<f64>,
    /// Each job's own speed on each type, by the job's index in the views asked about; `None`
    /// when not known (yet), or when no type suits it better than another.
    pub jobs: Vec<Option<Vec<f64>>>,
}

/// Asked once per snapshot: the speeds on the types named (node label values, by index) of
/// the jobs given.
pub type SpeedHint = Arc<dyn Fn(&[String], &[&JobView]) -> TypeSpeeds + Send + Sync>;

/// Allocatable GPUs of a node.
pub fn node_gpus(n: &Node, resource: &str) -> u32 {
    n.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(resource))
        .and_then(whole)
        .unwrap_or(0)
}
