//! `augur serve --backend kubernetes`: the controller acts on a real cluster instead of the
//! simulated replay.
//!
//! - The [`KubeBackend`] watches nodes, pods, Kubeflow `PyTorchJob`s, Trainer v2 `TrainJob`s and
//!   Kueue-managed `batch/v1` Jobs (and Volcano `PodGroup`s / Kueue `Workload`s where installed) in
//!   `--namespace` (all namespaces by default), with the client from `--kubeconfig`, else the
//!   in-cluster configuration.
//! - The same controller loop as the simulator's ([`super::live`], a
//!   [`LiveLoop`] over the backend) runs the elastic
//!   controller (without preemption: the backend only resizes elastic jobs). Every
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
//!   ([`super::writeback`]); nothing in dry-run.
//! - Job submitted / started / finished events from the watches and a cluster snapshot every
//!   [`RECONCILE_EVERY`] are appended to the event store, like the HTTP API's events (job ids
//!   are `namespace/name`, `namespace/trainjob/name`, `namespace/job/name`; the Kueue queue
//!   label is the profile's queue), so predictions learn from the live cluster; the runtime
//!   predicted at a job's submit is what the controller plans with. Only the leader appends
//!   them, and only those the log does not hold yet ([`unlogged`], after applying every event
//!   already committed): replicas sharing one log (`--store postgres://…`) all watch, the
//!   leader writes, a new leader ingests what the old one had not, and nothing twice.
//!
//! `main` selects this backend with [`select`] before the service starts; without it the
//! simulated replay runs ([`super::live`]).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use augur_autoscaler::kubernetes::{
    self, Clock, ClusterEvent, EventSink, Hooks, JobView, KubeBackend, KubeConfig, LeaderElector,
    LeaderGate, LeaseConfig, Outcome, RuntimeHint, Safety,
};
use augur_autoscaler::live::{LiveConfig, LiveLoop};
use augur_autoscaler::{ClusterState, ElasticController, ElasticParams, ScalingModel};
use tokio::sync::mpsc::UnboundedReceiver;

use super::config::Backend;
use super::events::{self, Event, FinishStatus, JobProfile};
use super::live::{publish, Counted, Driven, KubeLoop};
use super::online::Online;
use super::{lock, writeback, AppState};

/// Wall time between two ticks of the loop (each reads the watch caches; no API request).
pub const TICK: Duration = Duration::from_secs(1);
/// Longest time between two decisions without a change (also between two ingested snapshots
/// and two history points).
pub const RECONCILE_EVERY: Duration = Duration::from_secs(15);
/// Name of the leader-election Lease.
pub const LEASE_NAME: &str = "augur-controller";

/// What `--backend kubernetes` was given.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeOptions {
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the jobs; `None`: all namespaces.
    pub namespace: Option<String>,
    pub dry_run: bool,
}

static SELECTED: OnceLock<KubeOptions> = OnceLock::new();

/// Makes the service drive a Kubernetes cluster (call once, before `serve::run`).
pub fn select(opts: KubeOptions) {
    if SELECTED.set(opts).is_err() {
        tracing::warn!("the Kubernetes backend was selected twice; the first options stay");
    }
}

/// Starts the cluster the controller acts on: Kubernetes when [`select`]ed, else the
/// simulated replay.
pub fn spawn_cluster(state: AppState) {
    match (state.config.backend, SELECTED.get()) {
        (Backend::None, _) => {
            state
                .ext
                .live
                .set_status("none: no cluster (--backend none), predictions only");
        }
        (Backend::Kubernetes, None) => {
            tracing::error!("--backend kubernetes without its options; no cluster started");
            state
                .ext
                .live
                .set_status("failed: the Kubernetes options were not given");
        }
        (Backend::Kubernetes, Some(opts)) => {
            let opts = opts.clone();
            state.ext.live.set_status("starting");
            if opts.dry_run {
                state.ext.live.lock_dry_run();
            }
            tokio::spawn(drive_with_retries(state, opts));
        }
        (Backend::Sim, _) => super::live::spawn(state),
        (Backend::Slurm, _) => super::slurm::spawn(state),
    }
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

/// The cluster a Kubernetes data folder belongs to, as far as the options say before the
/// API server answers: the kubeconfig (or the in-cluster service host) and the namespace.
pub fn cluster_name() -> String {
    let Some(opts) = SELECTED.get() else {
        return String::new();
    };
    let api = match &opts.kubeconfig {
        Some(p) => format!("kubeconfig={}", p.display()),
        None => std::env::var("KUBERNETES_SERVICE_HOST")
            .map(|h| format!("in-cluster={h}"))
            .unwrap_or_else(|_| "default-kubeconfig".to_string()),
    };
    format!(
        "{api} namespace={}",
        opts.namespace.as_deref().unwrap_or("*")
    )
}

fn profile(job: &kubernetes::JobKey, gpus: Option<u32>, queue: Option<&str>) -> JobProfile {
    JobProfile {
        num_gpus: gpus.map(f64::from),
        group: Some(job.namespace.clone()),
        job_name: Some(job.name.clone()),
        cluster: Some("kubernetes".into()),
        queue: queue.map(str::to_string),
        ..JobProfile::default()
    }
}

/// The store event of a cluster event.
fn to_event(e: &ClusterEvent) -> Event {
    match e {
        ClusterEvent::Submitted {
            job,
            time,
            gpus,
            queue,
            ..
        } => Event::JobSubmitted {
            job_id: job.to_string(),
            at: *time,
            profile: profile(job, *gpus, queue.as_deref()),
            dag: None,
        },
        ClusterEvent::Started { job, time } => Event::JobStarted {
            job_id: job.to_string(),
            at: *time,
        },
        ClusterEvent::Finished { job, time, outcome } => Event::JobFinished {
            job_id: job.to_string(),
            at: *time,
            status: match outcome {
                Outcome::Succeeded => FinishStatus::Completed,
                Outcome::Failed => FinishStatus::Failed,
                Outcome::Deleted => FinishStatus::Killed,
            },
            duration: None,
        },
        ClusterEvent::Snapshot(s) => snapshot_event(s),
    }
}

fn snapshot_event(s: &ClusterState) -> Event {
    let healthy = s.healthy_gpus();
    Event::ClusterSnapshot(events::ClusterSnapshot {
        at: s.time,
        total_gpus: f64::from(healthy),
        busy_gpus: f64::from(healthy.saturating_sub(s.free_gpus())),
        queued_jobs: Some(s.queued.len() as u64),
        running_jobs: Some(s.running.len() as u64),
        nodes: Some(s.nodes.len() as u64),
    })
}

async fn drive(state: AppState, opts: KubeOptions) -> anyhow::Result<()> {
    // the lease elector of this attempt stops when the attempt ends (dropping the sender)
    let (_attempt, attempt_over) = tokio::sync::oneshot::channel::<()>();
    let (backend, mut rx, leader) = start_backend(&state, &opts, attempt_over).await?;
    let params = ElasticParams {
        preempt_factor: None,
        ..ElasticParams::default()
    };
    let policy = ElasticController::new(params, ScalingModel::default());
    let mut driven = Driven::Kube(Box::new(LiveLoop::new(
        backend,
        policy,
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: RECONCILE_EVERY.as_secs_f64(),
        },
    )));
    let live = state.ext.live.clone();
    live.sync_switches(&mut driven);
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
        let now = Instant::now();
        let wall = now.duration_since(last);
        last = now;
        if !control(&state, wall, &mut counted).await {
            break;
        }
        if last_writeback.is_none_or(|t| now.duration_since(t) >= RECONCILE_EVERY) {
            last_writeback = Some(now);
            if let Some(Driven::Kube(l)) = state.ext.live.running.lock().await.as_mut() {
                let dry_run = l.dry_run();
                writeback::write_predictions(&state, l.backend_mut(), dry_run).await;
            }
        }
        pending.extend(store_events(&mut rx, &mut last_snapshot));
        ingest(&state, &leader, &mut pending).await;
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
    let caught_up = tokio::task::spawn_blocking(move || log.wait_applied(Duration::from_secs(5)))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    match caught_up {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!("the shared event log is not applied yet; the cluster's events wait");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the shared event log; the cluster's events wait");
            return;
        }
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

/// The events of `batch` the log (as applied to `online`) does not hold yet, in order: a
/// submit no run of the job has at that time, a start or finish of a run the log has not
/// started or finished (or of a run submitted earlier in `batch`). Snapshots are kept.
pub fn unlogged(online: &Online, batch: Vec<Event>) -> Vec<Event> {
    let mut new_runs: std::collections::HashSet<String> = std::collections::HashSet::new();
    batch
        .into_iter()
        .filter(|ev| {
            let Some(id) = ev.job_id() else {
                return true;
            };
            let current = online.jobs.get(id);
            let runs = || {
                current
                    .into_iter()
                    .chain(online.earlier_runs.get(id).into_iter().flatten())
            };
            match ev {
                Event::JobSubmitted { at, .. } => {
                    let fresh = !runs().any(|j| j.submitted_at == Some(*at));
                    if fresh {
                        new_runs.insert(id.to_string());
                    }
                    fresh
                }
                Event::JobStarted { .. } => {
                    new_runs.contains(id) || current.is_none_or(|j| j.started_at.is_none())
                }
                Event::JobFinished { .. } => {
                    new_runs.contains(id) || current.is_none_or(|j| j.finished_at.is_none())
                }
                _ => true,
            }
        })
        .collect()
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
            .and_then(|j| j.runtime_at_submit.as_ref())
            .map(|p| p.seconds)
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
    let Some(d) = guard.as_mut() else {
        return false;
    };
    live.sync_switches(d);
    let Driven::Kube(l) = d else {
        return false;
    };
    let l: &mut KubeLoop = l;
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

/// The ingestable events of the cluster events received so far: every job lifecycle event,
/// and the latest snapshot when [`RECONCILE_EVERY`] passed since the last one stored.
fn store_events(rx: &mut UnboundedReceiver<ClusterEvent>, last_snapshot: &mut f64) -> Vec<Event> {
    let mut batch = Vec::new();
    let mut latest: Option<Arc<ClusterState>> = None;
    while let Ok(e) = rx.try_recv() {
        match e {
            ClusterEvent::Snapshot(s) => latest = Some(s),
            other => batch.push(to_event(&other)),
        }
    }
    if let Some(s) = latest {
        if s.time >= *last_snapshot + RECONCILE_EVERY.as_secs_f64() {
            *last_snapshot = s.time;
            batch.push(snapshot_event(&s));
        }
    }
    batch.retain(|ev| match ev.validate("") {
        Ok(()) => true,
        Err(err) => {
            tracing::warn!(error = ?err, "cluster event not ingestable; skipped");
            false
        }
    });
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::online::ServedModels;
    use crate::serve::store::StoredEvent;
    use augur_autoscaler::kubernetes::JobKey;

    #[test]
    fn a_new_leader_ingests_only_the_job_facts_the_log_lacks() {
        let submit = |id: &str, at: f64| Event::JobSubmitted {
            job_id: id.into(),
            at,
            profile: JobProfile::default(),
            dag: None,
        };
        let start = |id: &str, at: f64| Event::JobStarted {
            job_id: id.into(),
            at,
        };
        let finish = |id: &str, at: f64| Event::JobFinished {
            job_id: id.into(),
            at,
            status: FinishStatus::Completed,
            duration: None,
        };
        // the log (applied): ml/a submitted and started, ml/c's whole first run
        let mut online = Online::new(ServedModels::default());
        let logged = [
            submit("ml/a", 100.0),
            start("ml/a", 110.0),
            submit("ml/c", 50.0),
            start("ml/c", 60.0),
            finish("ml/c", 90.0),
        ];
        for (i, event) in logged.into_iter().enumerate() {
            online.apply(&StoredEvent {
                seq: i as i64 + 1,
                received_at: 0.0,
                event,
            });
        }
        // what this replica's watches saw (a deletion's time is each replica's own clock)
        let seen = vec![
            submit("ml/a", 100.0),
            start("ml/a", 110.0),
            finish("ml/a", 500.0),
            submit("ml/c", 50.0),
            start("ml/c", 60.0),
            finish("ml/c", 91.0),
            // ml/c submitted again: a new run, started and finished
            submit("ml/c", 200.0),
            start("ml/c", 210.0),
            finish("ml/c", 300.0),
            submit("ml/d", 400.0),
        ];
        let kept = unlogged(&online, seen);
        assert_eq!(
            kept,
            vec![
                finish("ml/a", 500.0),
                submit("ml/c", 200.0),
                start("ml/c", 210.0),
                finish("ml/c", 300.0),
                submit("ml/d", 400.0),
            ]
        );
    }

    #[test]
    fn cluster_events_become_ingestable_store_events() {
        let job = JobKey::pytorchjob("ml", "bert");
        let evs = [
            ClusterEvent::Submitted {
                job: job.clone(),
                time: 100.0,
                gpus: Some(8),
                elastic: Some((4, 16)),
                queue: Some("team-a".into()),
            },
            ClusterEvent::Started {
                job: job.clone(),
                time: 160.0,
            },
            ClusterEvent::Finished {
                job: job.clone(),
                time: 900.0,
                outcome: Outcome::Deleted,
            },
        ];
        let out: Vec<Event> = evs.iter().map(to_event).collect();
        for e in &out {
            e.validate("").expect("ingestable");
        }
        match &out[0] {
            Event::JobSubmitted {
                job_id, profile, ..
            } => {
                assert_eq!(job_id, "ml/bert");
                assert_eq!(profile.num_gpus, Some(8.0));
                assert_eq!(profile.group.as_deref(), Some("ml"));
                assert_eq!(profile.queue.as_deref(), Some("team-a"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &out[2],
            Event::JobFinished {
                status: FinishStatus::Killed,
                at,
                ..
            } if *at == 900.0
        ));
    }
}
