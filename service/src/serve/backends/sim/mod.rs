//! `--backend sim`: the simulator replaying the bundled trace at an accelerated wall clock
//! (`speed` trace seconds per wall second), Augur's elastic controller acting on it through
//! the `ClusterBackend` trait (the same [`LiveLoop`] the Kubernetes backend runs).
//!
//! What is replayed: the bootstrap dataset (`bootstrap_dataset`, philly by default) after the
//! part the first-start models were trained on (the last 20% by submit time of the first
//! `bootstrap_limit` jobs, and everything after them), on a homogeneous cluster of
//! [`LIVE_GPUS`] GPUs (8 per node). At the end of the trace the replay starts again, shifted in
//! time.
//!
//! Every tick ([`TICK`]): the simulator advances; arrivals, starts and completions, and a
//! cluster snapshot every 5 trace minutes, are ingested into the service's durable event store
//! like any client's (so the online features and the live accuracy learn from them); each new
//! job's runtime prediction made at its submit is handed to the simulator, so the controller
//! plans with Augur's predictions; then the controller decides and acts (or, paused / dry-run,
//! the simulated cluster's own FIFO scheduler runs and the controller's decisions are only
//! logged). Decisions (with reasons) and the cluster history are kept in bounded buffers
//! ([`super::controller`]); the endpoints are [`super::endpoints`].

mod resume;

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use augur_autoscaler::live::{
    block_on, ClusterPoint, JobLifecycleEvent, JobLifecycleKind, LiveConfig, LiveLoop, LiveSim,
};
use augur_autoscaler::sim::{jobs_from_records, ClusterSpec, SimConfig};
use augur_autoscaler::{ElasticController, ElasticParams, JobId};
use augur_datasets::{JobRecord, JobStatus};

use self::resume::Resume;
use super::controller::{publish, Counted, Driven, Live, SimClock, View};
use super::health::BackendHealth;
use super::views::{ClusterView, SimulatorView, Switches};
use super::ServeBackend;
use crate::serve::config::{Backend, ServeConfig};
use crate::serve::state::events::{ClusterSnapshot, Event, FinishStatus, JobProfile};
use crate::serve::{lock, AppState};

/// GPUs of the simulated cluster.
pub const LIVE_GPUS: u32 = 500;
/// GPUs per simulated node.
pub const LIVE_GPUS_PER_NODE: u32 = 8;
/// Wall time between ticks.
pub const TICK: Duration = Duration::from_millis(100);
/// Trace seconds between two ingested cluster snapshots (and history points).
pub const SNAPSHOT_EVERY_S: f64 = 300.0;

type Loop = LiveLoop<LiveSim, ElasticController>;

/// The simulator backend: what it replays, built from the configuration.
#[derive(Debug)]
pub struct SimBackend {
    /// The replayed bundled dataset (`bootstrap_dataset`).
    dataset: String,
    /// The first-start models were trained on this many jobs (`bootstrap_limit`).
    trained_on: Option<usize>,
}

impl SimBackend {
    pub fn new(config: &ServeConfig) -> SimBackend {
        SimBackend {
            dataset: config.bootstrap_dataset.clone(),
            trained_on: config.bootstrap_limit,
        }
    }
}

impl ServeBackend for SimBackend {
    fn kind(&self) -> Backend {
        Backend::Sim
    }

    fn cluster(&self) -> String {
        format!("sim:{}", self.dataset)
    }

    fn start(&self, state: AppState) {
        spawn(state, self.dataset.clone(), self.trained_on);
    }

    /// Up unless the replay failed (loading the trace is not an outage).
    fn health(&self, controller: &Live) -> Option<BackendHealth> {
        Some(BackendHealth::from_status("sim", &controller.status()))
    }
}

/// The replay being driven.
/// The replay being driven.
struct Running {
    live: Loop,
    /// The replayed jobs by [`augur_autoscaler::sim::SimJob::row`].
    records: Arc<Vec<JobRecord>>,
    /// Added to the simulator's lap in the jobs' ids (a replay resumed after a restart).
    lap_offset: u32,
    /// The earliest submit of the replayed trace, before any shift: no replayed or
    /// plausible event of this simulation comes before it.
    trace_start: f64,
    /// The replayed dataset.
    trace: String,
}

impl Running {
    /// The simulator's clock now.
    fn clock(&self) -> SimClock {
        let sim = self.live.backend();
        SimClock::Running {
            trace_start: self.trace_start,
            now: sim.simulator().now(),
            speed: sim.speed(),
        }
    }
}

impl Driven for Running {
    fn view(&self) -> &dyn View {
        &self.live
    }
    fn view_mut(&mut self) -> &mut dyn View {
        &mut self.live
    }
    fn history_every_s(&self) -> f64 {
        SNAPSHOT_EVERY_S
    }
    fn cluster_view(&self, controller: Switches) -> ClusterView {
        let b = self.live.backend();
        ClusterView::Simulator(Box::new(SimulatorView {
            controller,
            backend: "simulator",
            trace: self.trace.clone(),
            speed: b.speed(),
            lap: b.lap(),
            jobs_in_replay: b.simulator().len(),
            finished_jobs: b.finished_total(),
            ticks: self.live.ticks(),
            now: self.live.cluster(),
        }))
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Jobs of the trace to replay: those after the part the first-start models train on.
fn replay_records(jobs: Vec<JobRecord>, trained_on: Option<usize>) -> Vec<JobRecord> {
    let n = trained_on.unwrap_or(jobs.len()).min(jobs.len());
    let from = n * 8 / 10;
    jobs.into_iter()
        .skip(from)
        .filter(|j| j.duration.is_some_and(f64::is_finite))
        .collect()
}

/// Builds the replay (blocking: reads the trace), resuming at `resume`.
fn load(
    dataset: &str,
    trained_on: Option<usize>,
    speed: f64,
    resume: Resume,
) -> anyhow::Result<Running> {
    let all = crate::serve::tasks::training::bundled_jobs(dataset, None)?;
    let mut records = replay_records(all, trained_on);
    let trace_start = records
        .iter()
        .map(|r| r.submit_time)
        .fold(f64::INFINITY, f64::min);
    resume.shift(&mut records);
    let (jobs, skipped) = jobs_from_records(&records, &vec![None; records.len()]);
    if jobs.is_empty() {
        anyhow::bail!("{dataset}: no job to replay ({skipped} without a usable duration)");
    }
    let cluster =
        ClusterSpec::homogeneous(LIVE_GPUS, LIVE_GPUS_PER_NODE, 16).context("the live cluster")?;
    let cfg = SimConfig::new(cluster);
    let params = ElasticParams {
        rescale_pause_s: cfg.rescale_pause_s,
        ..Default::default()
    };
    let policy = ElasticController::new(params, cfg.scaling);
    let sim = LiveSim::new(jobs, cfg, speed).context("the live simulator")?;
    let live = LiveLoop::new(
        sim,
        policy,
        LiveConfig {
            decisions_kept: 1000,
            history_kept: 720,
            history_every_s: SNAPSHOT_EVERY_S,
        },
    );
    Ok(Running {
        live,
        records: Arc::new(records),
        lap_offset: resume.lap,
        trace_start,
        trace: dataset.to_string(),
    })
}

fn finish_status(s: JobStatus) -> FinishStatus {
    match s {
        JobStatus::Completed => FinishStatus::Completed,
        JobStatus::Failed => FinishStatus::Failed,
        JobStatus::Killed => FinishStatus::Killed,
        JobStatus::Unknown => FinishStatus::Unknown,
    }
}

fn profile_of(r: &JobRecord) -> JobProfile {
    JobProfile {
        num_gpus: r.num_gpus,
        num_nodes: r.num_nodes,
        gpu_type: r.gpu_type.clone(),
        cpus: r.cpus,
        memory_mib: r.memory_mib,
        requested_time: r.requested_time,
        user: r.user.clone(),
        group: r.group.clone(),
        job_name: r.job_name.clone(),
        cluster: r.cluster.clone(),
        queue: r.queue.clone(),
    }
}

/// The service's id of a replayed job in replay lap `lap` (the resumed lap count).
fn service_id(lap: u32, r: &JobRecord) -> String {
    format!("sim{lap}-{}", r.job_id)
}

/// The ingestable events of the simulator's job events; `submitted` gets (simulator id,
/// service id) of each new job.
fn to_events(
    events: &[JobLifecycleEvent],
    records: &[JobRecord],
    lap_offset: u32,
    out: &mut Vec<Event>,
    submitted: &mut Vec<(JobId, String)>,
) {
    for e in events {
        let Some(r) = e.row.and_then(|row| records.get(row)) else {
            continue;
        };
        let job_id = service_id(e.lap + lap_offset, r);
        let ev = match e.kind {
            JobLifecycleKind::Submitted => {
                submitted.push((e.job, job_id.clone()));
                Event::JobSubmitted {
                    job_id,
                    at: e.time,
                    profile: profile_of(r),
                    dag: None,
                }
            }
            JobLifecycleKind::Started { .. } => Event::JobStarted { job_id, at: e.time },
            JobLifecycleKind::Finished { run_s } => Event::JobFinished {
                job_id,
                at: e.time,
                status: finish_status(r.status),
                duration: Some(run_s),
            },
        };
        match ev.validate("") {
            Ok(()) => out.push(ev),
            Err(err) => tracing::warn!(error = ?err, "replayed event not ingestable; skipped"),
        }
    }
}

fn snapshot_event(p: &ClusterPoint) -> Event {
    Event::ClusterSnapshot(ClusterSnapshot {
        at: p.time,
        total_gpus: f64::from(p.healthy_gpus),
        busy_gpus: f64::from(p.busy_gpus),
        queued_jobs: Some(u64::from(p.queued)),
        running_jobs: Some(u64::from(p.running)),
        nodes: Some(u64::from(LIVE_GPUS.div_ceil(LIVE_GPUS_PER_NODE))),
    })
}

/// Loads the replay of `dataset` in the background and drives it every [`TICK`] until
/// shutdown.
fn spawn(state: AppState, dataset: String, limit: Option<usize>) {
    let speed = state.ext.live.speed;
    // the store's events were applied at open: the replay continues after them
    let resume = Resume::of(&state.online());
    if resume != Resume::default() {
        tracing::info!(lap = resume.lap, after = ?resume.after, "the replay resumes after the stored events");
    }
    state.ext.live.set_sim_clock(SimClock::Loading);
    tokio::spawn(async move {
        let loaded =
            tokio::task::spawn_blocking(move || load(&dataset, limit, speed, resume)).await;
        let running = match loaded {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "the live simulator could not start");
                state.ext.live.set_status(format!("failed: {e:#}"));
                state.ext.live.set_sim_clock(SimClock::Failed);
                return;
            }
            Err(e) => {
                state.ext.live.set_status(format!("failed: {e}"));
                state.ext.live.set_sim_clock(SimClock::Failed);
                return;
            }
        };
        state.ext.live.set_sim_clock(running.clock());
        let jobs = running.live.backend().simulator().len();
        *state.ext.live.running.lock().await = Some(Box::new(running));
        state.ext.live.set_status("running");
        tracing::info!(jobs, speed, gpus = LIVE_GPUS, "live simulator replaying");
        drive(state).await;
    });
}

/// The replay in the controller's slot (none when the slot holds no replay).
fn running_mut(slot: &mut Option<Box<dyn Driven>>) -> Option<&mut Running> {
    slot.as_mut()?.as_any_mut().downcast_mut::<Running>()
}

async fn drive(state: AppState) {
    let live = state.ext.live.clone();
    let metrics = state.ext.metrics.clone();
    let mut shutdown = state.shutdown.clone();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    let mut pending: Vec<Event> = Vec::new();
    let mut submitted: Vec<(JobId, String)> = Vec::new();
    let mut counted = Counted::new();
    let mut last_snapshot = f64::NEG_INFINITY;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        let now = Instant::now();
        let wall = now.duration_since(last).min(Duration::from_secs(1));
        last = now;
        // 1. time passes; arrivals and completions are ingested. The simulator's work is
        // synchronous (its backend futures are ready at once): it runs in `block_in_place`
        // so requests queued on this worker thread move to another meanwhile.
        let mut busy = Duration::ZERO;
        {
            let mut guard = live.running.lock().await;
            let Some(r) = running_mut(&mut guard) else {
                break;
            };
            let t = Instant::now();
            let evs = tokio::task::block_in_place(|| r.live.advance(wall));
            live.set_sim_clock(r.clock());
            to_events(&evs, &r.records, r.lap_offset, &mut pending, &mut submitted);
            busy += t.elapsed();
        }
        if !pending.is_empty() {
            let batch = std::mem::take(&mut pending);
            if let Err(e) = state.store.append(batch).await {
                tracing::warn!(error = %e, "ingesting the replayed events failed; they are dropped");
            }
        }
        // 2. the predictions made at submit go to the simulator
        let predictions: Vec<(JobId, f64)> = if submitted.is_empty() {
            Vec::new()
        } else {
            let online = state.online();
            submitted
                .drain(..)
                .filter_map(|(id, job)| {
                    online
                        .jobs
                        .get(&job)
                        .and_then(|j| j.runtime_at_submit)
                        .map(|p| (id, p.seconds))
                })
                .collect()
        };
        // 3. the controller decides and acts
        let mut guard = live.running.lock().await;
        let Some(r) = running_mut(&mut guard) else {
            break;
        };
        for (id, secs) in predictions {
            r.live.backend_mut().set_predicted_runtime(id, secs);
        }
        r.live.set_switches(
            live.paused.load(Ordering::SeqCst),
            live.dry_run.load(Ordering::SeqCst),
        );
        let t = Instant::now();
        let report = tokio::task::block_in_place(|| block_on(r.live.control()));
        if let Some(e) = &report.error {
            tracing::warn!(error = %e, "live controller tick failed; retried next tick");
        }
        to_events(
            &report.events,
            &r.records,
            r.lap_offset,
            &mut pending,
            &mut submitted,
        );
        let p = report.cluster;
        let (sim, records) = (r.live.backend(), &r.records);
        lock(&live.decision_jobs).record(&r.live, |id| {
            let job = records.get(sim.job(id)?.row)?;
            Some(service_id(sim.lap() + r.lap_offset, job))
        });
        publish(&metrics, &r.live, &mut counted);
        busy += t.elapsed();
        metrics.observe_tick(busy.as_secs_f64());
        if p.time >= last_snapshot + SNAPSHOT_EVERY_S {
            last_snapshot = p.time;
            pending.push(snapshot_event(&p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, submit: f64, duration: Option<f64>) -> JobRecord {
        JobRecord {
            job_id: id.to_string(),
            submit_time: submit,
            duration,
            num_gpus: Some(4.0),
            user: Some("u1".into()),
            status: JobStatus::Failed,
            source: "test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn replays_what_the_models_did_not_train_on() {
        let jobs: Vec<JobRecord> = (0..100)
            .map(|k| rec(&format!("j{k}"), k as f64, (k != 95).then_some(10.0)))
            .collect();
        let r = replay_records(jobs.clone(), Some(50));
        assert_eq!(r.first().map(|j| j.job_id.as_str()), Some("j40"));
        assert_eq!(r.len(), 59); // rows 40..100 without j95 (no duration)
        let r = replay_records(jobs, None);
        assert_eq!(r.first().map(|j| j.job_id.as_str()), Some("j80"));
    }

    #[test]
    fn simulator_events_become_ingestable_events() {
        let records = vec![rec("a", 0.0, Some(10.0))];
        let mk = |kind| JobLifecycleEvent {
            time: 5.0,
            job: JobId(0),
            row: Some(0),
            lap: 2,
            kind,
        };
        let evs = [
            mk(JobLifecycleKind::Submitted),
            mk(JobLifecycleKind::Started { workers: 4 }),
            mk(JobLifecycleKind::Finished { run_s: 12.5 }),
            JobLifecycleEvent {
                row: Some(7), // no such row: skipped
                ..mk(JobLifecycleKind::Submitted)
            },
        ];
        let (mut out, mut sub) = (Vec::new(), Vec::new());
        to_events(&evs, &records, 0, &mut out, &mut sub);
        assert_eq!(out.len(), 3);
        assert_eq!(sub, vec![(JobId(0), "sim2-a".to_string())]);
        match &out[0] {
            Event::JobSubmitted {
                job_id, profile, ..
            } => {
                assert_eq!(job_id, "sim2-a");
                assert_eq!(profile.num_gpus, Some(4.0));
                assert_eq!(profile.user.as_deref(), Some("u1"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &out[2],
            Event::JobFinished { status: FinishStatus::Failed, duration: Some(d), .. } if *d == 12.5
        ));
    }
}
