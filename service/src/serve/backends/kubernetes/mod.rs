//! `augur serve --backend kubernetes`: the controller acts on a real cluster instead of the
//! simulated replay.
//!
//! - The [`KubeBackend`] watches nodes, pods, Kubeflow `PyTorchJob`s, Trainer v2 `TrainJob`s and
//!   Kueue-managed `batch/v1` Jobs (and Volcano `PodGroup`s / Kueue `Workload`s where installed) in
//!   `--namespace` (all namespaces by default), with the client from `--kubeconfig`, else the
//!   in-cluster configuration.
//! - The same controller loop as the simulator's ([`super::sim`], a
//!   [`LiveLoop`] over the backend) runs the elastic
//!   controller with [`ElasticParams::live`]: type-aware admissions, no preemption and no
//!   migration (the backend resizes elastic jobs and steers queued ones, never suspends).
//!   Each job's speed on each GPU type is the advisor's answer for it
//!   ([`TypeHistory::speeds`]: its predicted run time over the run time predicted on that
//!   type), so the type a queued job is steered to and the run time predicted for it there
//!   come from one source. Every
//!   [`TICK`] it looks at the watches; the policy is asked when one saw a change, at least every
//!   [`RECONCILE_EVERY`]. It decides and acts only while this replica holds the
//!   `augur-controller` Lease in `$POD_NAMESPACE` (default `augur-system`; identity
//!   `$POD_NAME`); the backend's safety rules (stale snapshot, action budget, bounds,
//!   checkpoints) refuse what they must, and a refusal is a `failed` decision with its error.
//! - `/v1/cluster`, `/v1/cluster/history`, `/v1/autoscaler/decisions` (with reasons and
//!   outcomes), `POST /v1/autoscaler/pause|resume|dry-run` and the `/metrics` controller and
//!   cluster gauges describe and steer this cluster. `--dry-run` starts the loop in dry-run
//!   (decide and log, never patch) until `POST /v1/autoscaler/dry-run {"enabled": false}`.
//! - The leader writes each job's predictions onto its job object and Kueue `Workload` as
//!   annotations every [`RECONCILE_EVERY`], and an Event for each scaling decision carried out
//!   ([`crate::serve::tasks::writeback`]); nothing in dry-run.
//! - Job submitted / started / finished events from the watches and a cluster snapshot every
//!   [`RECONCILE_EVERY`] are appended to the event store, like the HTTP API's events (job ids
//!   are `namespace/name`, `namespace/trainjob/name`, `namespace/job/name`; the Kueue queue
//!   label is the profile's queue, the GPU type its pod templates select the profile's type),
//!   so predictions learn from the live cluster; a type selected after the submit (Augur's
//!   steer, Kueue's flavor at admission) is a `job_typed` event; the job's predicted run time
//!   (for that type) is what the controller plans with. Only the leader appends
//!   them, and only those the log does not hold yet ([`unlogged`], after applying every event
//!   already committed): replicas sharing one log (`--store postgres://…`) all watch, the
//!   leader writes, a new leader ingests what the old one had not, and nothing twice.
//!
//! The options ([`KubeOptions`]: `--kubeconfig`, `--namespace`, `--dry-run`) are part of the
//! configuration and owned by the [`KubernetesBackend`] built from it.

mod cluster_events;

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use augur_autoscaler::kubernetes::{
    self, Clock, ClusterEvent, EventSink, Hooks, JobView, KubeBackend, KubeConfig, LeaderElector,
    LeaderGate, LeaseConfig, RuntimeHint, Safety, SpeedHint, TypeSpeeds,
};
use augur_autoscaler::live::{LiveBackend, LiveConfig, LiveLoop};
use augur_autoscaler::{ElasticController, ElasticParams, JobId, ScalingModel};
use tokio::sync::mpsc::UnboundedReceiver;

use self::cluster_events::store_events;
pub use self::cluster_events::unlogged;
use super::controller::{publish, Counted, Driven, Live, View};
use super::health::BackendHealth;
use super::views::{ClusterView, KubernetesView, Switches};
use super::ServeBackend;
use crate::serve::advice::{Scaling, TypeHistory};
use crate::serve::config::{Backend, KubeOptions};
use crate::serve::state::events::Event;
use crate::serve::{lock, tasks::writeback, AppState};

/// Wall time between two ticks of the loop (each reads the watch caches; no API request).
pub const TICK: Duration = Duration::from_secs(1);
/// Longest time between two decisions without a change (also between two ingested snapshots
/// and two history points).
pub const RECONCILE_EVERY: Duration = Duration::from_secs(15);
/// Name of the leader-election Lease.
pub const LEASE_NAME: &str = "augur-controller";

/// The controller loop on a Kubernetes cluster.
type KubeLoop = LiveLoop<KubeBackend, ElasticController>;

/// The Kubernetes backend: its options, from the configuration.
#[derive(Debug)]
pub struct KubernetesBackend {
    opts: KubeOptions,
}

impl KubernetesBackend {
    pub fn new(opts: KubeOptions) -> KubernetesBackend {
        KubernetesBackend { opts }
    }
}

impl ServeBackend for KubernetesBackend {
    fn kind(&self) -> Backend {
        Backend::Kubernetes
    }

    /// The cluster as far as the options say before the API server answers: the kubeconfig
    /// (or the in-cluster service host) and the namespace.
    fn cluster(&self) -> String {
        let api = match &self.opts.kubeconfig {
            Some(p) => format!("kubeconfig={}", p.display()),
            None => std::env::var("KUBERNETES_SERVICE_HOST")
                .map(|h| format!("in-cluster={h}"))
                .unwrap_or_else(|_| "default-kubeconfig".to_string()),
        };
        format!(
            "{api} namespace={}",
            self.opts.namespace.as_deref().unwrap_or("*")
        )
    }

    /// The watches, the lease, the controller loop and the write-back, retried until
    /// shutdown.
    fn start(&self, state: AppState) {
        state.ext.live.set_status("starting");
        if self.opts.dry_run {
            state.ext.live.lock_dry_run();
        }
        tokio::spawn(drive_with_retries(state, self.opts.clone()));
    }

    /// Up only while the loop's last tick worked.
    fn health(&self, controller: &Live) -> Option<BackendHealth> {
        Some(BackendHealth::from_status(
            "kubernetes",
            &controller.status(),
        ))
    }
}

impl Driven for KubeLoop {
    fn view(&self) -> &dyn View {
        self
    }
    fn view_mut(&mut self) -> &mut dyn View {
        self
    }
    fn history_every_s(&self) -> f64 {
        self.backend().config().resync.as_secs_f64()
    }
    fn cluster_view(&self, controller: Switches) -> ClusterView {
        let b = self.backend();
        let (volcano, kueue) = b.queueing_systems();
        ClusterView::Kubernetes(Box::new(KubernetesView {
            controller,
            backend: "kubernetes",
            namespace: b.config().namespace.clone(),
            leader: b.may_act(),
            watches_synced: b.synced(),
            volcano,
            kueue,
            scales: b.scales().iter().filter(|s| !s.dry_run).count(),
            ticks: self.ticks(),
            now: self.cluster(),
        }))
    }
    fn job_name(&self, job: JobId) -> Option<String> {
        self.backend().job_key(job).map(|key| key.to_string())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The Kubernetes loop in the controller's slot (none when the slot holds another).
fn kube_loop(slot: &mut Option<Box<dyn Driven>>) -> Option<&mut KubeLoop> {
    slot.as_mut()?.as_any_mut().downcast_mut::<KubeLoop>()
}

/// Longest wait for the API server's answers while the backend starts (discovery, the
/// optional CRDs); the watches' syncing is waited for separately.
pub const START_ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest wait between two attempts to start the backend.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Runs the backend until shutdown; when it fails (the API server unreachable, the watches
/// refused) it is started again after an exponential backoff (1 s doubling to
/// [`MAX_BACKOFF`]; back to 1 s after a run longer than that), never given up.
async fn drive_with_retries(state: AppState, opts: KubeOptions) {
    let live = state.ext.live.clone();
    let mut shutdown = state.shutdown.clone();
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = Instant::now();
        let Err(e) = drive(state.clone(), opts.clone()).await else {
            return; // shut down
        };
        // a backend that ran a while before failing starts over from the shortest wait
        if started.elapsed() > MAX_BACKOFF {
            backoff = Duration::from_secs(1);
        }
        tracing::error!(error = %format!("{e:#}"), retry_in_s = backoff.as_secs(), "the Kubernetes backend failed; retrying");
        live.set_status(format!("retrying in {} s: {e:#}", backoff.as_secs()));
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        live.set_status("starting");
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn drive(state: AppState, opts: KubeOptions) -> anyhow::Result<()> {
    // the lease elector of this attempt stops when the attempt ends (dropping the sender)
    let (_attempt, attempt_over) = tokio::sync::oneshot::channel::<()>();
    let (backend, mut rx, leader) = start_backend(&state, &opts, attempt_over).await?;
    // the backend never suspends: no preemption, no migration; type-aware admissions
    let params = ElasticParams::live();
    anyhow::ensure!(
        !params.may_suspend(),
        "the live controller's knobs would suspend jobs"
    );
    let policy = ElasticController::new(params, ScalingModel::default());
    let mut driven: Box<dyn Driven> = Box::new(LiveLoop::new(
        backend,
        policy,
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: RECONCILE_EVERY.as_secs_f64(),
        },
    ));
    let live = state.ext.live.clone();
    live.sync_switches(driven.as_mut());
    *live.running.lock().await = Some(driven);
    live.set_status("running");

    let mut counted = Counted::new();
    let mut shutdown = state.shutdown.clone();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    let mut last_snapshot = f64::NEG_INFINITY;
    let mut last_writeback: Option<Instant> = None;
    let mut pending: Vec<Event> = Vec::new();
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        // the cluster's events the watches delivered are ingested before the controller
        // decides on them, so a decision never names a job the API does not hold yet
        pending.extend(store_events(&mut rx, &mut last_snapshot));
        ingest(&state, &leader, &mut pending).await;
        let now = Instant::now();
        let wall = now.duration_since(last);
        last = now;
        if !control(&state, wall, &mut counted).await {
            break;
        }
        if last_writeback.is_none_or(|t| now.duration_since(t) >= RECONCILE_EVERY) {
            last_writeback = Some(now);
            if let Some(l) = kube_loop(&mut *state.ext.live.running.lock().await) {
                let dry_run = l.dry_run();
                writeback::write_predictions(&state, l.backend_mut(), dry_run).await;
            }
        }
    }
    Ok(())
}

/// Appends the cluster's events the shared log lacks when this replica leads; else keeps the
/// lifecycle events the log does not hold yet (the leader's appends, applied here, remove
/// them), to be ingested should this replica become the leader.
async fn ingest(state: &AppState, leader: &(LeaderGate, Clock), pending: &mut Vec<Event>) {
    if pending.is_empty() {
        return;
    }
    if !leader.0.may_act((leader.1)()) {
        pending.retain(|e| !matches!(e, Event::ClusterSnapshot(_)));
        *pending = unlogged(&state.online(), std::mem::take(pending));
        return;
    }
    // every event another replica committed is applied here first, so the filter sees it
    let log = state.store.clone();
    let caught_up =
        tokio::task::spawn_blocking(move || log.wait_applied(Duration::from_secs(5))).await;
    let unreadable = match caught_up {
        Ok(Ok(true)) => None,
        Ok(Ok(false)) => {
            tracing::warn!("the shared event log is not applied yet; the cluster's events wait");
            return;
        }
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    if let Some(e) = unreadable {
        tracing::warn!(error = %e, "cannot read the shared event log; the cluster's events wait");
        return;
    }
    let batch = unlogged(&state.online(), std::mem::take(pending));
    if batch.is_empty() {
        return;
    }
    if let Err(e) = state.store.append(batch.clone()).await {
        // not acknowledged: tried again next tick (a commit that did happen is filtered then)
        tracing::warn!(error = %e, "ingesting the cluster's events failed; retried");
        pending.extend(
            batch
                .into_iter()
                .filter(|e| !matches!(e, Event::ClusterSnapshot(_))),
        );
    }
}

/// The backend, the receiver of the cluster's job lifecycle and snapshots, and whether this
/// replica leads (the gate and its clock).
type Started = (
    KubeBackend,
    UnboundedReceiver<ClusterEvent>,
    (LeaderGate, Clock),
);

/// Takes the lease in the background and starts the backend's watches (waiting up to a
/// minute for them to sync).
async fn start_backend(
    state: &AppState,
    opts: &KubeOptions,
    attempt_over: tokio::sync::oneshot::Receiver<()>,
) -> anyhow::Result<Started> {
    let client = kubernetes::client(opts.kubeconfig.as_deref()).await?;
    tracing::info!("starting the Kubernetes backend: asking the API server what it serves");
    let identity =
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("augur-{}", std::process::id()));
    let lease_ns = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| "augur-system".into());
    let clock = kubernetes::system_clock();
    let elector = LeaderElector::new(
        client.clone(),
        LeaseConfig::new(&lease_ns, LEASE_NAME, &identity),
        clock.clone(),
    );
    let gate = elector.gate();
    let mut stop = state.shutdown.clone();
    tokio::spawn(elector.run(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = attempt_over => {}
        }
    }));

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<ClusterEvent>();
    let sink: EventSink = Arc::new(move |e| {
        let _ = tx.send(e);
    });
    let hint_state = state.clone();
    let hint: RuntimeHint = Arc::new(move |v: &JobView| {
        hint_state
            .online()
            .jobs
            .get(&v.key.to_string())
            .and_then(|j| j.runtime())
            .map(|p| p.seconds)
    });
    let speeds_state = state.clone();
    let speeds: SpeedHint = Arc::new(move |types: &[String], views: &[&JobView]| {
        let online = speeds_state.online();
        let scaling = Scaling::bundled();
        let reshaper = scaling.reshaper();
        let history = TypeHistory::of(&online);
        let at = online.now();
        TypeSpeeds {
            typical: history.typical_speeds(reshaper, types).unwrap_or_default(),
            jobs: views
                .iter()
                .map(|v| history.speeds(&online, reshaper, &v.key.to_string(), types, at))
                .collect(),
        }
    });
    // the loop's dry-run switch (set from --dry-run) is the one dry-run: the backend acts
    // whenever the loop does
    let cfg = KubeConfig {
        namespace: opts.namespace.clone(),
        safety: Safety::default(),
        resync: RECONCILE_EVERY,
        ..KubeConfig::default()
    };
    let hooks = Hooks {
        clock: clock.clone(),
        events: Some(sink),
        runtime_hint: Some(hint),
        type_speeds: Some(speeds),
        leader: Some(gate.clone()),
    };
    // an address that accepts connections but never answers would hold the start for the
    // client's read timeout (minutes), saying nothing
    let backend = tokio::time::timeout(START_ANSWER_TIMEOUT, KubeBackend::start(client, cfg, hooks))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "the API server did not answer within {} s (it takes connections but sends nothing: a wrong address or port, or an API server that hangs)",
                START_ANSWER_TIMEOUT.as_secs()
            )
        })?
        .context("starting the Kubernetes backend")?;
    tracing::info!(
        namespace = opts.namespace.as_deref().unwrap_or("(all)"),
        dry_run = opts.dry_run,
        identity,
        lease_namespace = lease_ns,
        "Kubernetes backend started"
    );
    if let Err(e) = backend.wait_synced(Duration::from_secs(60)).await {
        tracing::warn!(error = %e, "watches not in sync yet; the controller waits for them");
    }
    Ok((backend, rx, (gate, clock)))
}

/// One tick of the loop: the backend observes `wall` time passing, the controller decides
/// and acts, the metrics follow. False when the loop is gone.
async fn control(state: &AppState, wall: Duration, counted: &mut Counted) -> bool {
    let started = Instant::now();
    let live = &state.ext.live;
    let metrics = &state.ext.metrics;
    let mut guard = live.running.lock().await;
    if let Some(d) = guard.as_mut() {
        live.sync_switches(d.as_mut());
    }
    let Some(l) = kube_loop(&mut guard) else {
        return false;
    };
    // lifecycle events come through the sink (with the jobs' names), see `store_events`
    l.advance(wall);
    let report = l.control().await;
    let carried_out: Vec<_> = l
        .decisions()
        .rev()
        .take(report.decisions)
        .cloned()
        .collect();
    writeback::post_decision_events(l.backend(), &carried_out).await;
    // a failing tick marks the backend down (readiness, `augur_backend_up`) until one works
    match &report.error {
        Some(e) => {
            tracing::warn!(error = %e, "kubernetes controller tick failed; retried next tick");
            live.set_status(format!("failing: {e}"));
        }
        None => live.set_status("running"),
    }
    for d in l.decisions().rev().take(report.decisions) {
        if let Some(e) = &d.error {
            tracing::info!(decision = ?d.decision, error = %e, "decision not carried out; the next decision observes again");
        }
    }
    let backend = l.backend();
    lock(&live.decision_jobs).record(l, |id| Some(backend.job_key(id)?.to_string()));
    publish(metrics, l, counted);
    metrics.observe_tick(started.elapsed().as_secs_f64());
    true
}
