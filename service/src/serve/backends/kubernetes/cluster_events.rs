//! The Kubernetes cluster's events as store events: the watches' job lifecycle and snapshots
//! become ingestable [`Event`]s ([`store_events`]), and a new leader keeps only those the
//! shared log lacks ([`unlogged`]).

use std::sync::Arc;

use augur_autoscaler::kubernetes::{self, ClusterEvent, Outcome};
use augur_autoscaler::ClusterState;
use tokio::sync::mpsc::UnboundedReceiver;

use super::RECONCILE_EVERY;
use crate::serve::state::events::{self, Event, FinishStatus, JobProfile};
use crate::serve::state::online::Online;

fn profile(
    job: &kubernetes::JobKey,
    gpus: Option<u32>,
    queue: Option<&str>,
    gpu_type: Option<&str>,
) -> JobProfile {
    JobProfile {
        num_gpus: gpus.map(f64::from),
        gpu_type: gpu_type.map(str::to_string),
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
            gpu_type,
            ..
        } => Event::JobSubmitted {
            job_id: job.to_string(),
            at: *time,
            profile: profile(job, *gpus, queue.as_deref(), gpu_type.as_deref()),
            dag: None,
        },
        ClusterEvent::Typed {
            job,
            time,
            gpu_type,
        } => Event::JobTyped {
            job_id: job.to_string(),
            at: *time,
            gpu_type: gpu_type.clone(),
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

pub fn snapshot_event(s: &ClusterState) -> Event {
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

/// The events of `batch` the log (as applied to `online`) does not hold yet, in order: a
/// submit no run of the job has at that time, a start or finish of a run the log has not
/// started or finished, a GPU type the unfinished run was not told yet (or any of these of a
/// run submitted earlier in `batch`). Snapshots are kept. A submit, start or finish
/// that repeats one kept earlier in `batch` (same job, same time: a watch that listed the
/// job again before it was ingested) is kept once.
pub fn unlogged(online: &Online, batch: Vec<Event>) -> Vec<Event> {
    let mut new_runs: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut kept_facts: std::collections::HashSet<(u8, String, u64)> =
        std::collections::HashSet::new();
    batch
        .into_iter()
        .filter(|ev| {
            let Some(id) = ev.job_id() else {
                return true;
            };
            let fact = match ev {
                Event::JobSubmitted { at, .. } => Some((0u8, at)),
                Event::JobStarted { at, .. } => Some((1, at)),
                Event::JobFinished { at, .. } => Some((2, at)),
                _ => None,
            };
            if let Some((kind, at)) = fact {
                if kept_facts.contains(&(kind, id.to_string(), at.to_bits())) {
                    return false;
                }
            }
            let keep = news(online, &mut new_runs, ev, id);
            if let (true, Some((kind, at))) = (keep, fact) {
                kept_facts.insert((kind, id.to_string(), at.to_bits()));
            }
            keep
        })
        .collect()
}

/// Whether `ev` (of job `id`) is news to the log as applied to `online`, given the runs
/// submitted earlier in the batch (`new_runs`, which a fresh submit joins).
fn news(
    online: &Online,
    new_runs: &mut std::collections::HashSet<String>,
    ev: &Event,
    id: &str,
) -> bool {
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
        Event::JobTyped { gpu_type, .. } => {
            new_runs.contains(id)
                || current.is_none_or(|j| {
                    let told = j
                        .gpu_type
                        .as_ref()
                        .or(j.profile.as_ref().and_then(|p| p.gpu_type.as_ref()));
                    j.finished_at.is_none() && told != Some(gpu_type)
                })
        }
        _ => true,
    }
}

/// The ingestable events of the cluster events received so far: every job lifecycle event,
/// and the latest snapshot when [`RECONCILE_EVERY`] passed since the last one stored.
pub fn store_events(
    rx: &mut UnboundedReceiver<ClusterEvent>,
    last_snapshot: &mut f64,
) -> Vec<Event> {
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
    use crate::serve::state::online::ServedModels;
    use crate::serve::state::store::StoredEvent;
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
        let typed = |id: &str, at: f64, t: &str| Event::JobTyped {
            job_id: id.into(),
            at,
            gpu_type: t.into(),
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
            // ml/d steered twice: the second type is news only after the first
            typed("ml/d", 410.0, "v100"),
            typed("ml/d", 420.0, "a100"),
            // ml/e listed twice by the watch before it was ingested: each fact once
            submit("ml/e", 600.0),
            submit("ml/e", 600.0),
            start("ml/e", 610.0),
            start("ml/e", 610.0),
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
                typed("ml/d", 410.0, "v100"),
                typed("ml/d", 420.0, "a100"),
                submit("ml/e", 600.0),
                start("ml/e", 610.0),
            ]
        );
        // once the log holds ml/d's submit and its latest type, neither is news
        for (i, event) in [submit("ml/d", 400.0), typed("ml/d", 420.0, "a100")]
            .into_iter()
            .enumerate()
        {
            online.apply(&StoredEvent {
                seq: 100 + i as i64,
                received_at: 0.0,
                event,
            });
        }
        let again = unlogged(
            &online,
            vec![typed("ml/d", 420.0, "a100"), typed("ml/d", 430.0, "v100")],
        );
        assert_eq!(again, vec![typed("ml/d", 430.0, "v100")]);
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
                gpu_type: Some("NVIDIA-A100-SXM4-80GB".into()),
            },
            ClusterEvent::Started {
                job: job.clone(),
                time: 160.0,
            },
            ClusterEvent::Typed {
                job: job.clone(),
                time: 150.0,
                gpu_type: "Tesla-V100-SXM2-32GB".into(),
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
                assert_eq!(profile.gpu_type.as_deref(), Some("NVIDIA-A100-SXM4-80GB"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            out[2],
            Event::JobTyped {
                job_id: "ml/bert".into(),
                at: 150.0,
                gpu_type: "Tesla-V100-SXM2-32GB".into(),
            }
        );
        assert!(matches!(
            &out[3],
            Event::JobFinished {
                status: FinishStatus::Killed,
                at,
                ..
            } if *at == 900.0
        ));
    }
}
