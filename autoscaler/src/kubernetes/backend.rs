//! The Kubernetes backend's state ([`KubeBackend`]): starting the watches (each job kind —
//! PyTorchJob, TrainJob, Kueue-labelled `batch/v1` Job — and Volcano and Kueue where served
//! and readable), their sync state, and building a snapshot from the watch caches. Acting is
//! in `scale`; the backend traits in `drive`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kube::Client;
use tokio::task::JoinHandle;

use super::api::{dyn_api, installed, podgroup_resource, workload_resource};
use super::config::{Hooks, KubeConfig};
use super::events::{ClusterEvent, Lifecycle};
use super::kinds::{JobKind, QUEUE_LABEL};
use super::objects::{JobFacts, JobKey, JobMemory};
use super::safety::ActionBudget;
use super::snapshot::{build_snapshot, Hints, Objects};
use super::steer::selected_type;
use super::watch::{spawn_watch, spawn_watch_with, WatchSync, Watched};
use super::workloads::job_view;
use super::writeback::{AdviceMemo, WriteBackLimiter};
use crate::cluster::{ClusterState, JobId};
use crate::error::{BackendError, ErrorKind};

/// A scale the backend would have made in dry-run mode (or made).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleRecord {
    pub time: f64,
    pub job: JobKey,
    pub from: u32,
    pub to: u32,
    pub dry_run: bool,
}

/// A steer the backend made, or would have made in dry-run mode.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerRecord {
    pub time: f64,
    pub job: JobKey,
    /// The node label value (GPU product) selected.
    pub gpu_type: String,
    pub reason: String,
    pub dry_run: bool,
}

/// The Kubernetes [`ClusterBackend`](crate::ClusterBackend).
pub struct KubeBackend {
    pub(super) cfg: KubeConfig,
    pub(super) hooks: Hooks,
    pub(super) client: Client,
    nodes: Watched<Node>,
    pods: Watched<Pod>,
    /// The watched job kinds (those served and readable).
    jobs: Vec<(JobKind, Watched<DynamicObject>)>,
    podgroups: Option<Watched<DynamicObject>>,
    workloads: Option<Watched<DynamicObject>>,
    pub(super) memory: JobMemory,
    pub(super) facts: HashMap<JobId, JobFacts>,
    pub(super) snapshot_time: Option<f64>,
    pub(super) budget: ActionBudget,
    pub(super) scales: Vec<ScaleRecord>,
    pub(super) steers: Vec<SteerRecord>,
    /// The GPU types of the last snapshot (node label values), by index.
    pub(super) gpu_types: Vec<String>,
    /// Each queued job's speed on each type of the last snapshot (the reasons of steers).
    pub(super) queued_speeds: HashMap<JobId, Vec<f64>>,
    /// What the write-back last gave each object, and its patch budget.
    pub(super) writeback: WriteBackLimiter,
    /// The advice held for each queued job, and when it was computed.
    pub(super) advice: AdviceMemo,
    tasks: Vec<JoinHandle<()>>,
    /// Live loop: the watches' resource versions at the last tick that asked the policy, and
    /// the wall time since.
    pub(super) seen_rvs: Vec<u64>,
    pub(super) since_asked: Duration,
}

impl Drop for KubeBackend {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("cfg", &self.cfg)
            .field("kinds", &self.job_kinds())
            .field("volcano", &self.podgroups.is_some())
            .field("kueue", &self.workloads.is_some())
            .finish_non_exhaustive()
    }
}

/// Watches the jobs of `kind` (Jobs: only those with Kueue's queue label, selected
/// server-side); with an event sink, turns their changes into lifecycle events.
fn watch_jobs(
    kind: JobKind,
    api: Api<DynamicObject>,
    cfg: &KubeConfig,
    hooks: &Hooks,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Watched<DynamicObject> {
    let mut lifecycle = Lifecycle::default();
    let sink = hooks.events.clone();
    let clock = hooks.clock.clone();
    let gpu_resource = cfg.observe.gpu_resource.clone();
    let product_label = cfg.observe.gpu_product_label.clone();
    let mut out = Vec::new();
    let on_event = move |ev: &watcher::Event<DynamicObject>| {
        let Some(sink) = &sink else { return };
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                if let Some(mut v) = job_view(kind, o, &gpu_resource) {
                    v.gpu_type = selected_type(kind, &o.data, &product_label);
                    lifecycle.applied(&v, clock(), &mut out);
                }
            }
            watcher::Event::Delete(o) => {
                if let Some(v) = job_view(kind, o, &gpu_resource) {
                    lifecycle.deleted(&v.key, clock(), &mut out);
                }
            }
            _ => {}
        }
        for e in out.drain(..) {
            sink(e);
        }
    };
    let mut wc = watcher::Config::default().timeout(cfg.watch_timeout_s);
    if kind == JobKind::Job {
        wc = wc.labels(QUEUE_LABEL);
    }
    spawn_watch_with(kind.plural(), api, kind.resource(), wc, on_event, tasks)
}

/// The job kinds served and readable (a 404 or 403 on list skips a kind); an error when none is.
async fn job_kinds(
    client: &Client,
    ns: Option<&str>,
) -> Result<Vec<(JobKind, Api<DynamicObject>)>, BackendError> {
    let mut kinds = Vec::new();
    for kind in JobKind::ALL {
        let api = dyn_api(client, ns, &kind.resource());
        if installed(&api, kind.qualified(), true).await? {
            kinds.push((kind, api));
        }
    }
    if kinds.is_empty() {
        return Err(BackendError::new(
            ErrorKind::Invalid,
            None,
            "no job kind is served and readable (pytorchjobs.kubeflow.org, trainjobs.trainer.kubeflow.org, jobs.batch)",
        ));
    }
    Ok(kinds)
}

impl KubeBackend {
    /// Probes which CRDs are installed (at least one job kind; Volcano and Kueue are
    /// optional) and starts the watches. Must run inside a tokio runtime.
    pub async fn start(
        client: Client,
        cfg: KubeConfig,
        hooks: Hooks,
    ) -> Result<KubeBackend, BackendError> {
        let ns = cfg.namespace.as_deref();
        let kinds = job_kinds(&client, ns).await?;
        let pg_ar = podgroup_resource();
        let pg_api = dyn_api(&client, ns, &pg_ar);
        let volcano = installed(&pg_api, "podgroups.scheduling.volcano.sh", true).await?;
        let wl_ar = workload_resource();
        let wl_api = dyn_api(&client, ns, &wl_ar);
        let kueue = installed(&wl_api, "workloads.kueue.x-k8s.io", true).await?;
        let watched: Vec<&str> = kinds.iter().map(|(k, _)| k.plural()).collect();
        tracing::info!(?watched, volcano, kueue, namespace = ?ns, "kubernetes backend watching");

        let mut tasks = Vec::new();
        let t = cfg.watch_timeout_s;
        let nodes = spawn_watch(
            "nodes",
            Api::<Node>::all(client.clone()),
            (),
            t,
            |_| {},
            &mut tasks,
        );
        // pods of every namespace: GPUs other namespaces hold are not free for our jobs
        // (terminated pods are filtered server-side; they hold nothing)
        let pods_cfg = watcher::Config::default()
            .timeout(t)
            .fields("status.phase!=Succeeded,status.phase!=Failed");
        let pods = spawn_watch_with(
            "pods",
            Api::<Pod>::all(client.clone()),
            (),
            pods_cfg,
            |_| {},
            &mut tasks,
        );
        let jobs = kinds
            .into_iter()
            .map(|(kind, api)| (kind, watch_jobs(kind, api, &cfg, &hooks, &mut tasks)))
            .collect();
        let podgroups =
            volcano.then(|| spawn_watch("podgroups", pg_api, pg_ar, t, |_| {}, &mut tasks));
        let workloads =
            kueue.then(|| spawn_watch("workloads", wl_api, wl_ar, t, |_| {}, &mut tasks));
        let writeback = WriteBackLimiter::new(cfg.writeback);
        let advice = AdviceMemo::new(&cfg.writeback);
        Ok(KubeBackend {
            cfg,
            hooks,
            client,
            nodes,
            pods,
            jobs,
            podgroups,
            workloads,
            memory: JobMemory::default(),
            facts: HashMap::new(),
            snapshot_time: None,
            budget: ActionBudget::default(),
            scales: Vec::new(),
            steers: Vec::new(),
            gpu_types: Vec::new(),
            queued_speeds: HashMap::new(),
            writeback,
            advice,
            tasks,
            seen_rvs: Vec::new(),
            since_asked: Duration::ZERO,
        })
    }

    pub(super) fn watches(&self) -> Vec<(&'static str, &Arc<WatchSync>)> {
        let mut v = vec![
            (self.nodes.name, &self.nodes.sync),
            (self.pods.name, &self.pods.sync),
        ];
        v.extend(self.jobs.iter().map(|(_, w)| (w.name, &w.sync)));
        if let Some(w) = &self.podgroups {
            v.push((w.name, &w.sync));
        }
        if let Some(w) = &self.workloads {
            v.push((w.name, &w.sync));
        }
        v
    }

    /// Sync state of each watch, by resource name (`nodes`, `pods`, `pytorchjobs`,
    /// `trainjobs`, `jobs`, `podgroups`, `workloads`).
    pub fn watch_sync(&self) -> Vec<(&'static str, Arc<WatchSync>)> {
        self.watches()
            .into_iter()
            .map(|(n, s)| (n, s.clone()))
            .collect()
    }

    /// True when every watch has listed and is streaming without error.
    pub fn synced(&self) -> bool {
        self.watches().iter().all(|(_, s)| s.synced())
    }

    /// Waits until every watch is in sync, up to `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), BackendError> {
        let start = tokio::time::Instant::now();
        while !self.synced() {
            if start.elapsed() > timeout {
                let lagging: Vec<&str> = self
                    .watches()
                    .iter()
                    .filter(|(_, s)| !s.synced())
                    .map(|(n, _)| *n)
                    .collect();
                return Err(BackendError::new(
                    ErrorKind::Unavailable,
                    None,
                    format!("watches not in sync after {timeout:?}: {lagging:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// What it watches and how it acts.
    pub fn config(&self) -> &KubeConfig {
        &self.cfg
    }

    /// The job kinds watched.
    pub fn job_kinds(&self) -> Vec<JobKind> {
        self.jobs.iter().map(|(k, _)| *k).collect()
    }

    /// Whether Volcano `PodGroup`s / Kueue `Workload`s are watched.
    pub fn queueing_systems(&self) -> (bool, bool) {
        (self.podgroups.is_some(), self.workloads.is_some())
    }

    /// Scales made (or, in dry-run, planned), oldest first.
    pub fn scales(&self) -> &[ScaleRecord] {
        &self.scales
    }

    /// The GPU-type steers made (or, in dry-run, that would have been made).
    pub fn steers(&self) -> &[SteerRecord] {
        &self.steers
    }

    /// The `namespace/name` behind a job id, while the job exists.
    pub fn job_key(&self, job: JobId) -> Option<&JobKey> {
        self.memory.key_of(job)
    }

    /// What the backend knows about a job of the last snapshot.
    pub fn facts(&self, job: JobId) -> Option<&JobFacts> {
        self.facts.get(&job)
    }

    /// The jobs of `kind` in the watch cache (none when the kind is not watched).
    pub(super) fn job_objects(&self, kind: JobKind) -> Vec<Arc<DynamicObject>> {
        self.jobs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, w)| w.store.state())
            .unwrap_or_default()
    }

    /// The Kueue `Workload`s in the watch cache (none when Kueue is not watched).
    pub(super) fn workload_objects(&self) -> Vec<Arc<DynamicObject>> {
        self.workloads
            .as_ref()
            .map(|w| w.store.state())
            .unwrap_or_default()
    }

    /// The backend's clock now.
    pub(super) fn now(&self) -> f64 {
        (self.hooks.clock)()
    }

    /// A snapshot of the watch caches (refused while a watch is not in sync); keeps the jobs'
    /// facts for acting on it and sends it to the event sink.
    pub(super) fn build(&mut self) -> Result<ClusterState, BackendError> {
        if let Some((name, _)) = self.watches().into_iter().find(|(_, s)| !s.synced()) {
            return Err(BackendError::new(
                ErrorKind::Unavailable,
                None,
                format!("the {name} watch is not in sync (listing or recovering from an error); not acting on a partial view"),
            ));
        }
        let nodes = self.nodes.store.state();
        let pods = self.pods.store.state();
        let jobs = self.job_objects(JobKind::PyTorchJob);
        let trainjobs = self.job_objects(JobKind::TrainJob);
        let batch_jobs = self.job_objects(JobKind::Job);
        let pgs = self.podgroups.as_ref().map(|w| w.store.state());
        let wls = self.workloads.as_ref().map(|w| w.store.state());
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs,
            trainjobs: &trainjobs,
            batch_jobs: &batch_jobs,
            podgroups: pgs.as_deref(),
            workloads: wls.as_deref(),
        };
        let now = self.now();
        let (snap, facts) = build_snapshot(
            &objs,
            now,
            &self.cfg.observe,
            &mut self.memory,
            Hints {
                runtime: self.hooks.runtime_hint.as_ref(),
                speeds: self.hooks.type_speeds.as_ref(),
            },
        );
        self.facts = facts;
        self.gpu_types = snap.gpu_types.iter().map(|t| t.name.clone()).collect();
        self.queued_speeds = snap
            .queued
            .iter()
            .map(|q| {
                let speeds = (0..snap.gpu_types.len())
                    .filter_map(|t| u16::try_from(t).ok())
                    .map(|t| snap.job_speed(q.id, t))
                    .collect();
                (q.id, speeds)
            })
            .collect();
        self.snapshot_time = Some(now);
        if let Some(sink) = &self.hooks.events {
            sink(ClusterEvent::Snapshot(Arc::new(snap.clone())));
        }
        Ok(snap)
    }
}
