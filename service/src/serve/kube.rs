//! `augur serve --backend kubernetes`: the controller acts on a real cluster instead of the
//! simulated replay.
//!
//! - The [`KubeBackend`](augur_autoscaler::kubernetes::KubeBackend) watches nodes, pods and
//!   Kubeflow `PyTorchJob`s (and Volcano `PodGroup`s / Kueue `Workload`s where installed) in
//!   `--namespace` (all namespaces by default), with the client from `--kubeconfig`, else the
//!   in-cluster configuration.
//! - Every [`RECONCILE_EVERY`], the elastic controller (without preemption: the backend only
//!   patches `pytorchjobs/scale`) observes, decides and acts, but only while this replica holds
//!   the `augur-controller` Lease in `$POD_NAMESPACE` (default `augur-system`; identity
//!   `$POD_NAME`). `--dry-run` decides and logs without patching.
//! - Job submitted / started / finished events from the watches and a cluster snapshot per
//!   reconcile are appended to the event store, like the HTTP API's events (job ids are
//!   `namespace/name`), so predictions learn from the live cluster; the runtime predicted at
//!   a job's submit is what the controller plans with. Actions and the cluster state go to
//!   `/metrics`.
//!
//! `main` selects this backend with [`select`] before the service starts; without it the
//! simulated replay runs ([`super::live`]).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use augur_autoscaler::kubernetes::{
    self, ClusterEvent, EventSink, Hooks, KubeBackend, KubeConfig, LeaderElector, LeaseConfig,
    Outcome, PyTorchJobView, RuntimeHint, Safety,
};
use augur_autoscaler::{
    ClusterSnapshot, Controller, ElasticController, ElasticParams, ScalingModel,
};

use super::events::{self, Event, FinishStatus, JobProfile};
use super::AppState;

/// Time between two reconciles.
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
    match SELECTED.get() {
        Some(opts) => {
            let opts = opts.clone();
            tokio::spawn(async move {
                if let Err(e) = drive(state, opts).await {
                    tracing::error!(error = %format!("{e:#}"), "the Kubernetes backend stopped");
                }
            });
        }
        None => super::live::spawn(state),
    }
}

fn profile(job: &kubernetes::JobKey, gpus: u32) -> JobProfile {
    JobProfile {
        num_gpus: Some(f64::from(gpus)),
        group: Some(job.namespace.clone()),
        job_name: Some(job.name.clone()),
        cluster: Some("kubernetes".into()),
        ..JobProfile::default()
    }
}

/// The store event of a cluster event.
fn to_event(e: &ClusterEvent) -> Event {
    match e {
        ClusterEvent::Submitted {
            job, time, gpus, ..
        } => Event::JobSubmitted {
            job_id: job.to_string(),
            at: *time,
            profile: profile(job, *gpus),
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

fn snapshot_event(s: &ClusterSnapshot) -> Event {
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
    let client = kubernetes::client(opts.kubeconfig.as_deref()).await?;
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
        let _ = stop.wait_for(|s| *s).await;
    }));

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ClusterEvent>();
    let sink: EventSink = Arc::new(move |e| {
        let _ = tx.send(e);
    });
    let hint_state = state.clone();
    let hint: RuntimeHint = Arc::new(move |v: &PyTorchJobView| {
        hint_state
            .online()
            .jobs
            .get(&v.key.to_string())
            .and_then(|j| j.runtime_at_submit.as_ref())
            .map(|p| p.seconds)
    });
    let cfg = KubeConfig {
        namespace: opts.namespace.clone(),
        safety: Safety {
            dry_run: opts.dry_run,
            ..Safety::default()
        },
        ..KubeConfig::default()
    };
    let hooks = Hooks {
        clock: clock.clone(),
        events: Some(sink),
        runtime_hint: Some(hint),
        leader: Some(gate.clone()),
    };
    let mut backend = KubeBackend::start(client, cfg, hooks)
        .await
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
    let params = ElasticParams {
        preempt_factor: None,
        ..ElasticParams::default()
    };
    let mut ctl = Controller::new(ElasticController::new(params, ScalingModel::default()));
    let metrics = state.ext.metrics.clone();
    let mut shutdown = state.shutdown.clone();
    let mut interval = tokio::time::interval(RECONCILE_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        if gate.may_act(clock()) {
            match ctl.reconcile(&mut backend).await {
                Ok(r) => {
                    if let Some((d, e)) = &r.failed {
                        tracing::info!(decision = ?d, error = %e, "decision not carried out; the next reconcile observes again");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "observing the cluster failed"),
            }
            for rec in ctl.take_log() {
                let v = serde_json::to_value(rec.decision).unwrap_or_default();
                let outcome = match (&rec.error, opts.dry_run) {
                    (Some(_), _) => "failed",
                    (None, true) => "dry_run",
                    (None, false) => "applied",
                };
                metrics.observe_action(
                    v["action"].as_str().unwrap_or("?"),
                    v["reason"].as_str().unwrap_or("?"),
                    outcome,
                );
            }
        } else if let Err(e) = augur_autoscaler::ClusterBackend::observe(&mut backend).await {
            // followers keep the cluster state and the event store current
            tracing::debug!(error = %e, "observing the cluster failed");
        }
        let mut batch = Vec::new();
        let mut latest: Option<Arc<ClusterSnapshot>> = None;
        while let Ok(e) = rx.try_recv() {
            match e {
                ClusterEvent::Snapshot(s) => latest = Some(s),
                other => batch.push(to_event(&other)),
            }
        }
        if let Some(s) = latest {
            let queued_gpus = s.queued.iter().map(|q| q.requested).sum();
            metrics.set_cluster(
                s.allocation(),
                s.queued.len() as u32,
                queued_gpus,
                s.running.len() as u32,
            );
            batch.push(snapshot_event(&s));
        }
        batch.retain(|ev| match ev.validate("") {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(error = ?err, "cluster event not ingestable; skipped");
                false
            }
        });
        if !batch.is_empty() {
            if let Err(e) = state.store.append(batch).await {
                tracing::warn!(error = %e, "ingesting the cluster's events failed; they are dropped");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_autoscaler::kubernetes::JobKey;

    #[test]
    fn cluster_events_become_ingestable_store_events() {
        let job = JobKey {
            namespace: "ml".into(),
            name: "bert".into(),
        };
        let evs = [
            ClusterEvent::Submitted {
                job: job.clone(),
                time: 100.0,
                gpus: 8,
                elastic: Some((4, 16)),
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
