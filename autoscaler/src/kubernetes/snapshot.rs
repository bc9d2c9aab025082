//! Building a [`ClusterState`] from what the watches hold (nodes, pods, Kubeflow
//! `PyTorchJob`s, Trainer v2 `TrainJob`s, Kueue-managed `batch/v1` Jobs, Volcano
//! `PodGroup`s, Kueue `Workload`s), with the facts the backend needs to act on each job.
//!
//! - **Nodes**: GPU nodes only (allocatable `nvidia.com/gpu` > 0), sorted by name. A node is
//!   healthy when its `Ready` condition is `True` and it is not cordoned. Its GPU type is the
//!   `nvidia.com/gpu.product` label (speed from [`ObserveConfig::gpu_speeds`], else 1.0); its
//!   rack is the value of [`ObserveConfig::rack_label`]. Free GPUs are allocatable minus the
//!   GPU requests of the non-terminated pods bound to it.
//! - **Jobs**: one entry per unfinished job of every kind, in GPUs (a worker pod with `g` GPUs
//!   counts `g`). A job is *queued* when it is suspended (`spec.suspend`, as Kueue holds a job
//!   until it admits it), its Kueue `Workload` is not `Admitted`, its Volcano `PodGroup` is
//!   `Pending`/`Inqueue`, or none of its worker pods is bound to a node; otherwise it is
//!   *running* with as many workers as it has bound worker pods. Its `[min, max]` comes from
//!   its kind's bounds ([`JobKind::bounds_field`](super::kinds::JobKind::bounds_field)); a job
//!   without bounds, and a queued job of a kind Kueue admits, is observed with `min = max`
//!   (never scaled).
//! - **GPU types**: each job's speed on each type comes from the [`SpeedHint`] (the service's
//!   advisor: the run time it predicts for the job on that type), the types' nominal speeds
//!   from its typical speeds, as the snapshot's [`TypeAffinity`] (one class per distinct set
//!   of speeds). A queued job's type is open to a type-aware policy only when Augur may steer
//!   it (suspended, never started, selecting no type yet), the cluster has at least two
//!   labelled types and its speeds are known; a job selecting a type is bound to it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::DynamicObject;
use serde_json::Value;

use super::kinds::JobKind;
use super::objects::{
    bound_node, label, node_gpus, owner_job, pod_gpus, terminated, workload_admitted, JobFacts,
    JobKey, JobMemory, JobState, JobView, ObserveConfig, RuntimeHint, SpeedHint,
};
use super::steer::selected_type;
use super::workloads::{job_view, workers_of};
use crate::cluster::{
    AffinityClass, ClusterState, GpuType, JobId, NodeInfo, QueuedJob, RunningJob, Slot,
    TypeAffinity,
};

/// The GPU type of a node without the product label.
pub const UNKNOWN_GPU_TYPE: &str = "unknown";

/// What outside Augur's cluster view informs a snapshot: predicted run times and speeds.
#[derive(Default, Clone, Copy)]
pub struct Hints<'a> {
    pub runtime: Option<&'a RuntimeHint>,
    pub speeds: Option<&'a SpeedHint>,
}

/// What the watches hold, borrowed for one snapshot.
#[derive(Debug, Default)]
pub struct Objects<'a> {
    pub nodes: &'a [Arc<Node>],
    pub pods: &'a [Arc<Pod>],
    /// PyTorchJobs.
    pub jobs: &'a [Arc<DynamicObject>],
    /// Trainer v2 TrainJobs (none when not installed).
    pub trainjobs: &'a [Arc<DynamicObject>],
    /// `batch/v1` Jobs (those with Kueue's queue label).
    pub batch_jobs: &'a [Arc<DynamicObject>],
    /// `None` when Volcano is not installed.
    pub podgroups: Option<&'a [Arc<DynamicObject>]>,
    /// `None` when Kueue is not installed.
    pub workloads: Option<&'a [Arc<DynamicObject>]>,
}

/// Bound worker pods of each job: (node index, GPUs) per pod.
type BoundWorkers = HashMap<JobKey, Vec<(u32, u32)>>;

/// Builds the snapshot at `now`, with the facts the backend needs to act on each job (indexed
/// by the job's id).
pub fn build_snapshot(
    objs: &Objects<'_>,
    now: f64,
    cfg: &ObserveConfig,
    memory: &mut JobMemory,
    hints: Hints<'_>,
) -> (ClusterState, HashMap<JobId, JobFacts>) {
    let mut snap = ClusterState {
        time: now,
        rules: cfg.rules,
        ..Default::default()
    };
    let node_index = add_nodes(&mut snap, objs.nodes, cfg);
    let bound = count_pods(&mut snap, objs.pods, cfg, &node_index);
    let held = held_by_queues(objs);
    let by_kind = [
        (JobKind::PyTorchJob, objs.jobs),
        (JobKind::TrainJob, objs.trainjobs),
        (JobKind::Job, objs.batch_jobs),
    ];
    let mut views: Vec<JobView> = by_kind
        .iter()
        .flat_map(|(kind, objs)| objs.iter().map(move |j| (*kind, j)))
        .filter_map(|(kind, j)| {
            let mut v = job_view(kind, j, &cfg.gpu_resource)?;
            v.gpu_type = selected_type(kind, &j.data, &cfg.gpu_product_label);
            Some(v)
        })
        .filter(|v| v.finished.is_none())
        .collect();
    views.sort_by(|a, b| a.created.total_cmp(&b.created).then(a.key.cmp(&b.key)));
    memory.retain(&views.iter().map(|v| &v.key).collect());
    let speeds = type_speeds(&mut snap, &views, hints.speeds);
    let labelled = snap
        .gpu_types
        .iter()
        .filter(|t| t.name != UNKNOWN_GPU_TYPE)
        .count();
    let mut facts = HashMap::new();
    let mut classes = Classes::default();
    for (k, v) in views.iter().enumerate() {
        let queued = v.suspended
            || held.get(&v.key).copied().unwrap_or(false)
            || bound.get(&v.key).is_none_or(Vec::is_empty);
        let own = speeds.get(k).and_then(Option::as_ref);
        let open = labelled >= 2 && own.is_some();
        let (id, f) = add_job(
            &mut snap,
            v,
            (queued, open),
            bound.get(&v.key),
            memory,
            hints,
        );
        if let Some(s) = own {
            classes.add(id, s);
        }
        facts.insert(id, f);
    }
    if !classes.affinity.classes.is_empty() {
        snap.affinity = Some(Arc::new(classes.affinity));
    }
    (snap, facts)
}

/// The jobs' own speeds from the hint (by view index, each one speed per type of the
/// snapshot), the types' typical speeds set as their nominal ones.
fn type_speeds(
    snap: &mut ClusterState,
    views: &[JobView],
    hint: Option<&SpeedHint>,
) -> Vec<Option<Vec<f64>>> {
    let Some(hint) = hint else {
        return Vec::new();
    };
    let names: Vec<String> = snap.gpu_types.iter().map(|t| t.name.clone()).collect();
    let asked: Vec<&JobView> = views.iter().collect();
    let got = hint(&names, &asked);
    let sane = |v: &[f64]| v.len() == names.len() && v.iter().all(|x| x.is_finite() && *x > 0.0);
    if sane(&got.typical) {
        for (t, s) in snap.gpu_types.iter_mut().zip(&got.typical) {
            t.speed = *s;
        }
    }
    got.jobs
        .into_iter()
        .map(|s| s.filter(|s| sane(s)))
        .collect()
}

/// The snapshot's affinity being built: one class per distinct set of speeds.
#[derive(Default)]
struct Classes {
    affinity: TypeAffinity,
}

impl Classes {
    /// `job` runs at `speeds` (one per type).
    fn add(&mut self, job: JobId, speeds: &[f64]) {
        let k = match self
            .affinity
            .classes
            .iter()
            .position(|c| c.speeds == speeds)
        {
            Some(k) => k,
            None => {
                self.affinity.classes.push(AffinityClass {
                    name: format!("speeds-{}", self.affinity.classes.len()),
                    speeds: speeds.to_vec(),
                });
                self.affinity.classes.len() - 1
            }
        };
        let (Ok(k), Ok(at)) = (u16::try_from(k), usize::try_from(job.0)) else {
            return; // past 65,535 classes a job runs at its type's nominal speed
        };
        let jc = &mut self.affinity.job_class;
        if jc.len() <= at {
            jc.resize(at + 1, u16::MAX);
        }
        jc[at] = k;
    }
}

/// Adds the GPU nodes, sorted by name, all their GPUs free; returns each node's index by name.
fn add_nodes<'a>(
    snap: &mut ClusterState,
    nodes: &'a [Arc<Node>],
    cfg: &ObserveConfig,
) -> HashMap<&'a str, u32> {
    let mut nodes: Vec<&Node> = nodes
        .iter()
        .map(Arc::as_ref)
        .filter(|n| node_gpus(n, &cfg.gpu_resource) > 0)
        .collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut node_index: HashMap<&str, u32> = HashMap::new();
    let mut racks: Vec<String> = Vec::new();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let product = label(&n.metadata, &cfg.gpu_product_label).unwrap_or(UNKNOWN_GPU_TYPE);
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
        let gpus = node_gpus(n, &cfg.gpu_resource);
        node_index.insert(name, snap.nodes.len() as u32);
        snap.nodes.push(NodeInfo {
            name: name.to_string(),
            gpu_type: u16::try_from(gpu_type).unwrap_or(u16::MAX),
            rack: rack as u32,
            gpus,
            free: gpus,
            healthy: node_ready(n) && !cordoned(n),
        });
    }
    node_index
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Takes the GPUs of the bound, non-terminated pods off their nodes' free GPUs (an unhealthy
/// node has none free); returns the bound worker pods of each job.
fn count_pods(
    snap: &mut ClusterState,
    pods: &[Arc<Pod>],
    cfg: &ObserveConfig,
    node_index: &HashMap<&str, u32>,
) -> BoundWorkers {
    let mut bound_workers: BoundWorkers = HashMap::new();
    for pod in pods.iter().map(Arc::as_ref) {
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
        for job in workers_of(&pod.metadata) {
            bound_workers.entry(job).or_default().push((node, g));
        }
    }
    for n in &mut snap.nodes {
        if !n.healthy {
            n.free = 0;
        }
    }
    bound_workers
}

/// Jobs the queueing systems hold back: a Kueue `Workload` not admitted, a Volcano `PodGroup`
/// `Pending` or `Inqueue`.
fn held_by_queues(objs: &Objects<'_>) -> HashMap<JobKey, bool> {
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
    held
}

/// Adds job `v` to the snapshot, queued or running on its `bound` worker pods; returns its id
/// and the facts the backend acts on.
fn add_job(
    snap: &mut ClusterState,
    v: &JobView,
    (queued, speeds_known): (bool, bool),
    bound: Option<&Vec<(u32, u32)>>,
    memory: &mut JobMemory,
    hints: Hints<'_>,
) -> (JobId, JobFacts) {
    let id = memory.id(&v.key);
    let g = v.gpus_per_worker;
    let first = *memory
        .first_replicas
        .entry(v.key.clone())
        .or_insert(v.worker_replicas);
    let requested = v.requested_replicas.unwrap_or(first);
    // a queued job of a kind Kueue admits is not sized before it starts
    let bounds = v.elastic.filter(|_| !queued || v.key.kind.resizes_queued());
    let (lo, hi) = bounds.unwrap_or((requested, requested));
    // an explicit annotation wins over the service's prediction
    let predicted = v
        .predicted_runtime
        .or_else(|| hints.runtime.and_then(|h| h(v)));
    let last_rescale = memory.last_rescale.get(&v.key).copied();
    let first_started = v.start_time.unwrap_or(v.created);
    let started = last_rescale.map_or(first_started, |t| t.max(first_started));
    let facts = JobFacts {
        key: v.key.clone(),
        state: if queued {
            JobState::Queued
        } else {
            JobState::Running
        },
        spec_replicas: v.worker_replicas,
        gpus_per_worker: g,
        bounds,
        started,
        last_checkpoint: v.last_checkpoint,
        suspended: v.suspended,
        ever_started: v.start_time.is_some(),
        gpu_type: v.gpu_type.clone(),
    };
    if queued {
        let gpu_type = v.gpu_type.as_ref().and_then(|g| {
            let t = snap.gpu_types.iter().position(|t| &t.name == g)?;
            u16::try_from(t).ok()
        });
        // Augur may steer it: suspended, never started, no type selected
        let steerable = v.suspended && v.start_time.is_none() && v.gpu_type.is_none();
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
            gpu_type,
            type_open: steerable && speeds_known,
        });
        return (id, facts);
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
        attained_gpu_s: (snap.time - first_started).max(0.0) * f64::from(workers),
        progress_s: None,
        predicted_runtime: predicted,
        oracle_remaining_s: None,
        last_rescale,
        slots: (a, b),
    });
    (id, facts)
}

#[cfg(test)]
mod tests {
    use super::super::objects::{JOB_NAME_LABEL, REPLICA_TYPE_LABEL};
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
        let (s, facts) = build_snapshot(
            &objs,
            1.0e9,
            &ObserveConfig::default(),
            &mut mem,
            Hints::default(),
        );
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
        let (s2, _) = build_snapshot(
            &objs,
            1.0e9,
            &ObserveConfig::default(),
            &mut mem,
            Hints::default(),
        );
        assert_eq!(s2.running[0].id, r.id);
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs[1..],
            ..Default::default()
        };
        let (s3, _) = build_snapshot(
            &objs,
            1.0e9,
            &ObserveConfig::default(),
            &mut mem,
            Hints::default(),
        );
        assert_eq!(s3.queued[0].id, q.id);
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs,
            ..Default::default()
        };
        let (s4, _) = build_snapshot(
            &objs,
            1.0e9,
            &ObserveConfig::default(),
            &mut mem,
            Hints::default(),
        );
        assert!(
            s4.running[0].id.0 > q.id.0,
            "a job seen again gets a new id"
        );
    }
}
