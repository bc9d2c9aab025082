//! The Kubernetes backend: the [`ClusterBackend`] the controller drives on a real cluster
//! (issue #8), on kube-rs.
//!
//! - **Observe** from watches (kube-rs runtime reflectors, not polling): nodes, pods, Kubeflow
//!   `PyTorchJob`s (`kubeflow.org/v1`), and, where installed, Volcano `PodGroup`s
//!   (`scheduling.volcano.sh/v1beta1`) and Kueue `Workload`s (`kueue.x-k8s.io/v1beta1`).
//!   [`objects`] turns them into a [`ClusterSnapshot`] in GPUs.
//! - **Act** through the `/scale` subresource of a `PyTorchJob` (specpath
//!   `.spec.pytorchReplicaSpecs.Worker.replicas`): `set_workers` rescales a running elastic job,
//!   `admit` sizes a queued elastic job so its gang fits (the cluster's scheduler then starts
//!   it; admitting at the size it already has is a no-op). Replicas never leave
//!   `[minReplicas, maxReplicas]`; jobs without `spec.elasticPolicy` are observed, never
//!   scaled. `suspend` is refused (the RBAC grants `patch` on `pytorchjobs/scale` only), so run
//!   the elastic policy with `preempt_factor: None` here.
//! - **Safety** ([`Safety`]): dry-run; a per-job hourly action budget; a running job is scaled
//!   down only when its last checkpoint is known (annotation [`CHECKPOINT_ANNOTATION`]) or its
//!   run is older than a grace period; every patch carries the `resourceVersion` it read (409 →
//!   re-read and retry), 429/5xx/timeouts back off with full jitter; actions are refused when
//!   the snapshot they were planned on is too old or the job's replicas changed since, or when
//!   a watch is not in sync; only the lease holder acts ([`lease`]).
//! - **Events** ([`events`]): job submitted / started / finished and every snapshot go to a
//!   callback the service hooks into its ingest path.
//! - **Live loop**: it is a [`LiveBackend`], so [`crate::live::LiveLoop`] drives it like the
//!   simulator (decision log with reasons and outcomes, pause, dry-run, history). Its clock is
//!   wall time; a tick asks the policy when a watch saw a change or [`KubeConfig::resync`]
//!   passed; it may act only while it holds the lease. Lifecycle events go to the
//!   [`Hooks::events`] sink (they carry the job's `namespace/name`, GPUs and outcome), not
//!   [`LiveBackend::drain_events`].

pub mod events;
pub mod lease;
pub mod objects;
pub mod safety;

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::backend::ClusterBackend;
use crate::cluster::{ClusterSnapshot, JobId};
use crate::error::{BackendError, ErrorKind};
use crate::live::LiveBackend;

pub use events::{ClusterEvent, EventSink, Lifecycle, Outcome};
pub use lease::{LeaderElector, LeaderGate, LeaseConfig};
pub use objects::{
    JobFacts, JobKey, JobState, ObserveConfig, PyTorchJobView, RuntimeHint, CHECKPOINT_ANNOTATION,
    PREDICTED_ANNOTATION, REQUESTED_ANNOTATION,
};
pub use safety::Safety;

use objects::{build_snapshot, pytorchjob_view, JobMemory, Objects};
use safety::{into_error, with_timeout, ActionBudget, Failure};

/// Seconds since the Unix epoch, as the backend sees them (injectable for replays).
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    })
}

/// A client for `augur serve`: the kubeconfig at `kubeconfig` (its current context), else the
/// in-cluster configuration when run as a pod, else `$KUBECONFIG` / `~/.kube/config`. kube's
/// own retry layer is turned off: the backend's bounded backoff with jitter ([`Safety`]) is the
/// one retry policy.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<Client, BackendError> {
    let invalid = |m: String| BackendError::new(ErrorKind::Invalid, None, m);
    let mut config = match kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .map_err(|e| invalid(format!("kubeconfig {}: {e}", p.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| invalid(format!("kubeconfig {}: {e}", p.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            invalid(format!(
                "no in-cluster configuration and no kubeconfig (pass --kubeconfig): {e}"
            ))
        })?,
    };
    config.default_retry = false;
    Client::try_from(config).map_err(|e| invalid(format!("kubernetes client: {e}")))
}

/// `kubeflow.org/v1` `PyTorchJob`.
pub fn pytorchjob_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    )
}

/// `scheduling.volcano.sh/v1beta1` `PodGroup`.
pub fn podgroup_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

/// `kueue.x-k8s.io/v1beta1` `Workload`.
pub fn workload_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "Workload"),
        "workloads",
    )
}

/// What the backend watches and how it acts.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeConfig {
    /// Namespace of the jobs (and their PodGroups / Workloads); `None` watches all namespaces.
    /// Pods are watched in every namespace: GPUs held elsewhere are not free.
    pub namespace: Option<String>,
    pub observe: ObserveConfig,
    pub safety: Safety,
    /// Server-side timeout of each watch request (seconds); the watcher re-watches after it.
    pub watch_timeout_s: u32,
    /// Under the live loop: ask the policy at least this often even when no watch saw a change
    /// (waits grow, runs age).
    pub resync: Duration,
}

impl Default for KubeConfig {
    fn default() -> Self {
        KubeConfig {
            namespace: None,
            observe: ObserveConfig::default(),
            safety: Safety::default(),
            watch_timeout_s: 290,
            resync: Duration::from_secs(15),
        }
    }
}

/// Hooks into the rest of Augur.
#[derive(Clone)]
pub struct Hooks {
    pub clock: Clock,
    /// Job lifecycle events and snapshots.
    pub events: Option<EventSink>,
    /// Predicted run times for jobs without the [`PREDICTED_ANNOTATION`].
    pub runtime_hint: Option<RuntimeHint>,
    /// Act only while this gate is open (leader election); `None` acts always.
    pub leader: Option<LeaderGate>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            clock: system_clock(),
            events: None,
            runtime_hint: None,
            leader: None,
        }
    }
}

/// Sync state of one watch.
#[derive(Debug, Default)]
pub struct WatchSync {
    synced: AtomicBool,
    last_rv: AtomicU64,
    errors: AtomicU64,
}

impl WatchSync {
    /// True when the initial list is complete and no error happened since.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    /// Highest `resourceVersion` seen in an object event (0 before any).
    pub fn last_resource_version(&self) -> u64 {
        self.last_rv.load(Ordering::Acquire)
    }
    /// Watch errors so far (each re-lists).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Acquire)
    }
}

struct Watched<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    name: &'static str,
    store: Store<K>,
    sync: Arc<WatchSync>,
}

fn rv_of<K: Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn spawn_watch<K, F>(
    name: &'static str,
    api: Api<K>,
    dyntype: K::DynamicType,
    timeout_s: u32,
    on_event: F,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let cfg = watcher::Config::default().timeout(timeout_s);
    spawn_watch_with(name, api, dyntype, cfg, on_event, tasks)
}

fn spawn_watch_with<K, F>(
    name: &'static str,
    api: Api<K>,
    dyntype: K::DynamicType,
    cfg: watcher::Config,
    mut on_event: F,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let sync = Arc::new(WatchSync::default());
    let s = sync.clone();
    let stream = reflector::reflector(writer, watcher(api, cfg).default_backoff());
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    match &ev {
                        watcher::Event::Init => s.synced.store(false, Ordering::Release),
                        watcher::Event::InitDone => s.synced.store(true, Ordering::Release),
                        watcher::Event::Apply(o)
                        | watcher::Event::Delete(o)
                        | watcher::Event::InitApply(o) => {
                            s.last_rv.fetch_max(rv_of(o), Ordering::AcqRel);
                        }
                    }
                    on_event(&ev);
                }
                Err(e) => {
                    s.synced.store(false, Ordering::Release);
                    s.errors.fetch_add(1, Ordering::AcqRel);
                    tracing::warn!(watch = name, error = %e, "watch failed; re-listing with backoff");
                }
            }
        }
    }));
    Watched { name, store, sync }
}

/// A scale the backend would have made in dry-run mode (or made).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleRecord {
    pub time: f64,
    pub job: JobKey,
    pub from: u32,
    pub to: u32,
    pub dry_run: bool,
}

/// The Kubernetes [`ClusterBackend`].
pub struct KubeBackend {
    cfg: KubeConfig,
    hooks: Hooks,
    jobs_ar: ApiResource,
    client: Client,
    nodes: Watched<Node>,
    pods: Watched<Pod>,
    jobs: Watched<DynamicObject>,
    podgroups: Option<Watched<DynamicObject>>,
    workloads: Option<Watched<DynamicObject>>,
    memory: JobMemory,
    facts: HashMap<JobId, JobFacts>,
    snapshot_time: Option<f64>,
    budget: ActionBudget,
    scales: Vec<ScaleRecord>,
    tasks: Vec<JoinHandle<()>>,
    /// Live loop: the watches' resource versions at the last tick that asked the policy, and
    /// the wall time since.
    seen_rvs: Vec<u64>,
    since_asked: Duration,
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
            .field("volcano", &self.podgroups.is_some())
            .field("kueue", &self.workloads.is_some())
            .finish_non_exhaustive()
    }
}

fn dyn_api(client: &Client, ns: Option<&str>, ar: &ApiResource) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// True when the resource is served (a 404 on list means its CRD is not installed). An
/// optional resource the RBAC does not let us read (403) is skipped with a warning.
async fn installed(
    api: &Api<DynamicObject>,
    what: &str,
    optional: bool,
) -> Result<bool, BackendError> {
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 403 && optional => {
            tracing::warn!(
                resource = what,
                "installed but not readable (RBAC); not watched"
            );
            Ok(false)
        }
        Err(e) => Err(BackendError::new(
            ErrorKind::Unavailable,
            None,
            format!("probing {what}: {e}"),
        )),
    }
}

impl KubeBackend {
    /// Probes which CRDs are installed (PyTorchJob is required; Volcano and Kueue are
    /// optional) and starts the watches. Must run inside a tokio runtime.
    pub async fn start(
        client: Client,
        cfg: KubeConfig,
        hooks: Hooks,
    ) -> Result<KubeBackend, BackendError> {
        let ns = cfg.namespace.as_deref();
        let jobs_ar = pytorchjob_resource();
        let jobs_api = dyn_api(&client, ns, &jobs_ar);
        if !installed(&jobs_api, "pytorchjobs.kubeflow.org", false).await? {
            return Err(BackendError::new(
                ErrorKind::Invalid,
                None,
                "the PyTorchJob CRD (kubeflow.org/v1 pytorchjobs) is not installed",
            ));
        }
        let pg_ar = podgroup_resource();
        let pg_api = dyn_api(&client, ns, &pg_ar);
        let volcano = installed(&pg_api, "podgroups.scheduling.volcano.sh", true).await?;
        let wl_ar = workload_resource();
        let wl_api = dyn_api(&client, ns, &wl_ar);
        let kueue = installed(&wl_api, "workloads.kueue.x-k8s.io", true).await?;
        tracing::info!(volcano, kueue, namespace = ?ns, "kubernetes backend watching");

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
        let mut lifecycle = Lifecycle::default();
        let sink = hooks.events.clone();
        let clock = hooks.clock.clone();
        let gpu_resource = cfg.observe.gpu_resource.clone();
        let mut out = Vec::new();
        let jobs = spawn_watch(
            "pytorchjobs",
            jobs_api,
            jobs_ar.clone(),
            t,
            move |ev| {
                let Some(sink) = &sink else { return };
                match ev {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                        if let Some(v) = pytorchjob_view(o, &gpu_resource) {
                            lifecycle.applied(&v, &mut out);
                        }
                    }
                    watcher::Event::Delete(o) => {
                        if let Some(v) = pytorchjob_view(o, &gpu_resource) {
                            lifecycle.deleted(&v.key, clock(), &mut out);
                        }
                    }
                    _ => {}
                }
                for e in out.drain(..) {
                    sink(e);
                }
            },
            &mut tasks,
        );
        let podgroups =
            volcano.then(|| spawn_watch("podgroups", pg_api, pg_ar, t, |_| {}, &mut tasks));
        let workloads =
            kueue.then(|| spawn_watch("workloads", wl_api, wl_ar, t, |_| {}, &mut tasks));
        Ok(KubeBackend {
            cfg,
            hooks,
            jobs_ar,
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
            tasks,
            seen_rvs: Vec::new(),
            since_asked: Duration::ZERO,
        })
    }

    fn watches(&self) -> Vec<(&'static str, &Arc<WatchSync>)> {
        let mut v = vec![
            (self.nodes.name, &self.nodes.sync),
            (self.pods.name, &self.pods.sync),
            (self.jobs.name, &self.jobs.sync),
        ];
        if let Some(w) = &self.podgroups {
            v.push((w.name, &w.sync));
        }
        if let Some(w) = &self.workloads {
            v.push((w.name, &w.sync));
        }
        v
    }

    /// Sync state of each watch, by resource name (`nodes`, `pods`, `pytorchjobs`,
    /// `podgroups`, `workloads`).
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

    /// Whether Volcano `PodGroup`s / Kueue `Workload`s are watched.
    pub fn queueing_systems(&self) -> (bool, bool) {
        (self.podgroups.is_some(), self.workloads.is_some())
    }

    /// Scales made (or, in dry-run, planned), oldest first.
    pub fn scales(&self) -> &[ScaleRecord] {
        &self.scales
    }

    /// The `namespace/name` behind a job id, while the job exists.
    pub fn job_key(&self, job: JobId) -> Option<&JobKey> {
        self.memory.key_of(job)
    }

    /// What the backend knows about a job of the last snapshot.
    pub fn facts(&self, job: JobId) -> Option<&JobFacts> {
        self.facts.get(&job)
    }

    fn now(&self) -> f64 {
        (self.hooks.clock)()
    }

    fn build(&mut self) -> Result<ClusterSnapshot, BackendError> {
        if let Some((name, _)) = self.watches().into_iter().find(|(_, s)| !s.synced()) {
            return Err(BackendError::new(
                ErrorKind::Unavailable,
                None,
                format!("the {name} watch is not in sync (listing or recovering from an error); not acting on a partial view"),
            ));
        }
        let nodes = self.nodes.store.state();
        let pods = self.pods.store.state();
        let jobs = self.jobs.store.state();
        let pgs = self.podgroups.as_ref().map(|w| w.store.state());
        let wls = self.workloads.as_ref().map(|w| w.store.state());
        let objs = Objects {
            nodes: &nodes,
            pods: &pods,
            jobs: &jobs,
            podgroups: pgs.as_deref(),
            workloads: wls.as_deref(),
        };
        let now = self.now();
        let (snap, facts) = build_snapshot(
            &objs,
            now,
            &self.cfg.observe,
            &mut self.memory,
            self.hooks.runtime_hint.as_ref(),
        );
        self.facts = facts;
        self.snapshot_time = Some(now);
        if let Some(sink) = &self.hooks.events {
            sink(ClusterEvent::Snapshot(Arc::new(snap.clone())));
        }
        Ok(snap)
    }

    /// Sizes `job` to `workers` GPUs: `admit` for a queued job, else a rescale.
    async fn scale(&mut self, job: JobId, workers: u32, admit: bool) -> Result<(), BackendError> {
        let now = self.now();
        let err = |k: ErrorKind, m: String| Err(BackendError::new(k, Some(job), m));
        if let Some(g) = &self.hooks.leader {
            if !g.may_act(now) {
                return err(
                    ErrorKind::Unavailable,
                    "not the leader (lease not held or not renewed)".into(),
                );
            }
        }
        let Some(f) = self.facts.get(&job).cloned() else {
            return err(ErrorKind::NotFound, "not in the last snapshot".into());
        };
        let age = now - self.snapshot_time.unwrap_or(f64::NEG_INFINITY);
        if age > self.cfg.safety.max_snapshot_age_s {
            return err(
                ErrorKind::Conflict,
                format!(
                    "stale snapshot ({age:.1} s old > {} s); observe again",
                    self.cfg.safety.max_snapshot_age_s
                ),
            );
        }
        match (admit, f.state) {
            (true, JobState::Running) => {
                return err(
                    ErrorKind::Invalid,
                    format!("{} is running, not queued", f.key),
                )
            }
            (false, JobState::Queued) => {
                return err(
                    ErrorKind::Invalid,
                    format!("{} is queued, not running", f.key),
                )
            }
            _ => {}
        }
        let target = workers / f.gpus_per_worker;
        if target == f.spec_replicas {
            // nothing to patch: the cluster's scheduler admits / the job already has this size
            return Ok(());
        }
        let Some((lo, hi)) = f.bounds else {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} has no spec.elasticPolicy; observed, never scaled",
                    f.key
                ),
            );
        };
        if target < lo || target > hi {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} replicas {target} outside elasticPolicy [{lo}, {hi}]",
                    f.key
                ),
            );
        }
        let s = &self.cfg.safety;
        if !admit && target < f.spec_replicas {
            let run_s = now - f.started;
            if f.last_checkpoint.is_none() && run_s < s.scale_down_grace_s {
                return err(
                    ErrorKind::Invalid,
                    format!(
                        "scale-down of {} held: no {CHECKPOINT_ANNOTATION} annotation and its run ({run_s:.0} s) is younger than the {} s grace period",
                        f.key, s.scale_down_grace_s
                    ),
                );
            }
        }
        let used = self.budget.used(job, now);
        if used >= s.max_actions_per_job_per_hour {
            return err(
                ErrorKind::Invalid,
                format!(
                    "{} rate-limited: {used} actions in the last hour (max {})",
                    f.key, s.max_actions_per_job_per_hour
                ),
            );
        }
        if s.dry_run {
            tracing::info!(job = %f.key, from = f.spec_replicas, to = target, admit, "dry run: would scale");
            self.budget.record(job, now);
            self.scales.push(ScaleRecord {
                time: now,
                job: f.key,
                from: f.spec_replicas,
                to: target,
                dry_run: true,
            });
            return Ok(());
        }
        self.patch_scale(job, &f, target).await?;
        tracing::info!(job = %f.key, from = f.spec_replicas, to = target, admit, "scaled");
        self.budget.record(job, now);
        self.memory.last_rescale.insert(f.key.clone(), now);
        self.scales.push(ScaleRecord {
            time: now,
            job: f.key,
            from: f.spec_replicas,
            to: target,
            dry_run: false,
        });
        Ok(())
    }

    /// GET `/scale`, check it still shows what the snapshot saw, PATCH it with the read
    /// `resourceVersion`; 409 re-reads, 429/5xx/timeouts back off with jitter.
    async fn patch_scale(&self, job: JobId, f: &JobFacts, target: u32) -> Result<(), BackendError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &f.key.namespace, &self.jobs_ar);
        let s = &self.cfg.safety;
        let attempts = s.attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            if let Some(g) = &self.hooks.leader {
                if !g.may_act(self.now()) {
                    return Err(BackendError::new(
                        ErrorKind::Unavailable,
                        Some(job),
                        "lost the lease while acting",
                    ));
                }
            }
            let failure = match with_timeout(s, api.get_scale(&f.key.name)).await {
                Err(e) => e,
                Ok(scale) => {
                    let current = scale
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.replicas)
                        .and_then(|r| u32::try_from(r).ok())
                        .unwrap_or(0);
                    if current == target {
                        // done (by an earlier attempt whose answer was lost, or by someone else)
                        return Ok(());
                    }
                    if current != f.spec_replicas {
                        return Err(BackendError::new(
                            ErrorKind::Conflict,
                            Some(job),
                            format!(
                                "{} has {current} worker replicas, the snapshot saw {}: not acting on a stale view",
                                f.key, f.spec_replicas
                            ),
                        ));
                    }
                    let patch = serde_json::json!({
                        "metadata": { "resourceVersion": scale.metadata.resource_version },
                        "spec": { "replicas": target },
                    });
                    match with_timeout(
                        s,
                        api.patch_scale(
                            &f.key.name,
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        ),
                    )
                    .await
                    {
                        Ok(_) => return Ok(()),
                        Err(e) => e,
                    }
                }
            };
            match failure {
                Failure::Permanent(..) => return Err(into_error(failure, Some(job))),
                _ if attempt >= attempts => return Err(into_error(failure, Some(job))),
                Failure::Conflict(ref m) => {
                    tracing::debug!(job = %f.key, attempt, "conflict, re-reading: {m}");
                }
                Failure::Transient(ref m, retry_after) => {
                    let wait = s.backoff(attempt, retry_after);
                    tracing::debug!(job = %f.key, attempt, ?wait, "backing off: {m}");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

impl ClusterBackend for KubeBackend {
    async fn observe(&mut self) -> Result<ClusterSnapshot, BackendError> {
        self.build()
    }

    async fn admit(&mut self, job: JobId, workers: u32) -> Result<(), BackendError> {
        self.scale(job, workers, true).await
    }

    async fn set_workers(&mut self, job: JobId, workers: u32) -> Result<(), BackendError> {
        self.scale(job, workers, false).await
    }

    async fn suspend(&mut self, job: JobId) -> Result<(), BackendError> {
        Err(BackendError::new(
            ErrorKind::Invalid,
            Some(job),
            "suspend is not supported by the Kubernetes backend (its RBAC grants patch on pytorchjobs/scale only); run the elastic policy without preemption",
        ))
    }
}

impl LiveBackend for KubeBackend {
    /// The cluster's clock moves on its own; true when a watch saw an object change (or an
    /// error) since the last true, or [`KubeConfig::resync`] passed.
    fn tick(&mut self, wall: Duration) -> bool {
        self.since_asked += wall;
        let rvs: Vec<u64> = self
            .watches()
            .iter()
            .flat_map(|(_, s)| [s.last_resource_version(), s.errors()])
            .collect();
        if rvs != self.seen_rvs || self.since_asked >= self.cfg.resync {
            self.seen_rvs = rvs;
            self.since_asked = Duration::ZERO;
            true
        } else {
            false
        }
    }

    /// Only the lease holder acts (always, without leader election).
    fn may_act(&self) -> bool {
        self.hooks
            .leader
            .as_ref()
            .is_none_or(|g| g.may_act(self.now()))
    }
}
