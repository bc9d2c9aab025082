//! The simulator as a live backend ([`LiveSim`]): a trace replayed at an accelerated wall
//! clock, lap after lap, reporting its jobs' lifecycle and taking runtime predictions made
//! while it replays.

use std::future::Future;
use std::time::Duration;

use super::backend::{JobLifecycleEvent, JobLifecycleKind, LiveBackend};
use crate::backend::ClusterBackend;
use crate::cluster::{ClusterState, JobId};
use crate::decision::{Action, Reason};
use crate::error::{BackendError, SimError};
use crate::policies::fifo::Fifo;
use crate::sim::{SimConfig, SimJob, Simulator};

/// The simulator replaying a trace at an accelerated wall clock.
#[derive(Debug)]
pub struct LiveSim {
    jobs: Vec<SimJob>,
    cfg: SimConfig,
    sim: Simulator,
    /// Trace seconds per wall second.
    speed: f64,
    /// First submit of the trace.
    first_submit: f64,
    lap: u32,
    finished_before: usize,
    fifo: Fifo,
    /// Per job of the current lap: 0 unseen, 1 queued, 2 started, 3 finished.
    state: Vec<u8>,
    /// Jobs seen and not finished.
    active: Vec<u32>,
    seen_mark: Vec<u32>,
    mark: u32,
    events: Vec<JobLifecycleEvent>,
    first_start: Vec<f64>,
    /// Runtime predictions given while replaying ([`LiveSim::set_predicted_runtime`]); they
    /// replace the jobs' own in what the policy sees.
    predicted: Vec<Option<f64>>,
}

impl LiveSim {
    /// A live replay of `jobs` under `cfg` at `speed` trace seconds per wall second. The
    /// simulator's own decision log is turned off (the loop keeps a bounded one).
    pub fn new(jobs: Vec<SimJob>, mut cfg: SimConfig, speed: f64) -> Result<LiveSim, SimError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(SimError::Config(format!(
                "live speed must be a positive number of trace seconds per wall second, not {speed}"
            )));
        }
        cfg.max_logged_decisions = 0;
        let sim = Simulator::new(jobs.clone(), cfg.clone())?;
        let first = jobs.iter().map(|j| j.submit).fold(f64::INFINITY, f64::min);
        let n = sim.len();
        Ok(LiveSim {
            jobs,
            cfg,
            sim,
            speed,
            first_submit: if first.is_finite() { first } else { 0.0 },
            lap: 0,
            finished_before: 0,
            fifo: Fifo::default(),
            state: vec![0; n],
            active: Vec::new(),
            seen_mark: vec![0; n],
            mark: 0,
            events: Vec::new(),
            first_start: vec![f64::NAN; n],
            predicted: vec![None; n],
        })
    }

    /// Trace seconds per wall second.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Changes the speed (ignored unless positive and finite).
    pub fn set_speed(&mut self, speed: f64) {
        if speed.is_finite() && speed > 0.0 {
            self.speed = speed;
        }
    }

    /// The simulator of the current lap.
    pub fn simulator(&self) -> &Simulator {
        &self.sim
    }

    /// Replay laps completed.
    pub fn lap(&self) -> u32 {
        self.lap
    }

    /// Jobs finished over every lap.
    pub fn finished_total(&self) -> usize {
        self.finished_before + self.sim.finished()
    }

    /// The replayed job behind an id in the current lap (its `submit` is the trace's, not
    /// shifted by the lap).
    pub fn job(&self, id: JobId) -> Option<&SimJob> {
        self.sim.job(id)
    }

    /// Gives job `id` (of the current lap) a runtime prediction made while replaying (by the
    /// service's online predictor when the job was submitted); the policy sees it instead of
    /// the job's own. Ignored for an unknown id or a non-finite value.
    pub fn set_predicted_runtime(&mut self, id: JobId, seconds: f64) {
        if seconds.is_finite() && seconds >= 0.0 {
            if let Some(p) = self.predicted.get_mut(id.0 as usize) {
                *p = Some(seconds);
            }
        }
    }

    /// The snapshot with the predictions given while replaying.
    fn patched_snapshot(&mut self) -> ClusterState {
        let mut snap = self.sim.snapshot().clone();
        for r in &mut snap.running {
            if let Some(Some(p)) = self.predicted.get(r.id.0 as usize) {
                r.predicted_runtime = Some(*p);
            }
        }
        for q in &mut snap.queued {
            if let Some(Some(p)) = self.predicted.get(q.id.0 as usize) {
                q.predicted_runtime = Some(*p);
            }
        }
        snap
    }

    /// Starts the next lap: the same jobs, shifted to start a minute after the last lap ended.
    fn next_lap(&mut self) {
        let lap = self.lap + 1;
        let shift = (self.sim.now() + 60.0 - self.first_submit).max(0.0);
        let jobs: Vec<SimJob> = self
            .jobs
            .iter()
            .map(|j| SimJob {
                submit: j.submit + shift,
                ..j.clone()
            })
            .collect();
        let mut cfg = self.cfg.clone();
        for f in &mut cfg.faults {
            f.start += shift;
            f.end += shift;
        }
        // The same jobs and config validated for lap 0; a failure here would be a bug, so
        // keep replaying the current (finished) lap rather than panic.
        if let Ok(sim) = Simulator::new(jobs, cfg) {
            self.finished_before += self.sim.finished();
            self.sim = sim;
            self.lap = lap;
            self.state.iter_mut().for_each(|s| *s = 0);
            self.first_start.iter_mut().for_each(|s| *s = f64::NAN);
            self.predicted.iter_mut().for_each(|s| *s = None);
            self.active.clear();
        }
    }

    /// Compares the snapshot with what was seen before and records lifecycle events.
    fn diff(&mut self) {
        self.mark = self.mark.wrapping_add(1).max(1);
        let mark = self.mark;
        let lap = self.lap;
        let snap = self.sim.snapshot();
        let now = snap.time;
        let mut new_events = Vec::new();
        let mut newly_active = Vec::new();
        for q in &snap.queued {
            let i = q.id.0 as usize;
            if let Some(m) = self.seen_mark.get_mut(i) {
                *m = mark;
            }
            if self.state.get(i) == Some(&0) {
                new_events.push((q.id, JobLifecycleKind::Submitted));
                self.state[i] = 1;
                newly_active.push(i as u32);
            }
        }
        for r in &snap.running {
            let i = r.id.0 as usize;
            if let Some(m) = self.seen_mark.get_mut(i) {
                *m = mark;
            }
            match self.state.get(i) {
                Some(0) => {
                    new_events.push((r.id, JobLifecycleKind::Submitted));
                    new_events.push((r.id, JobLifecycleKind::Started { workers: r.workers }));
                    self.state[i] = 2;
                    self.first_start[i] = r.first_started;
                    newly_active.push(i as u32);
                }
                Some(1) => {
                    new_events.push((r.id, JobLifecycleKind::Started { workers: r.workers }));
                    self.state[i] = 2;
                    self.first_start[i] = r.first_started;
                }
                _ => {}
            }
        }
        let mut still = Vec::with_capacity(self.active.len() + newly_active.len());
        for &i in &self.active {
            let k = i as usize;
            if self.seen_mark.get(k) == Some(&mark) {
                still.push(i);
            } else if let Some(s) = self.state.get_mut(k) {
                *s = 3;
                let started = self.first_start.get(k).copied().unwrap_or(f64::NAN);
                let run_s = if started.is_finite() {
                    (now - started).max(0.0)
                } else {
                    0.0
                };
                new_events.push((JobId(u64::from(i)), JobLifecycleKind::Finished { run_s }));
            }
        }
        still.extend(newly_active);
        self.active = still;
        for (job, kind) in new_events {
            let row = self.sim.job(job).map(|j| j.row);
            // exact times from the simulator (the snapshot is only the tick's end)
            let (started, finished) = self.sim.job_times(job).unwrap_or((None, None));
            let (time, kind) = match kind {
                JobLifecycleKind::Submitted => (self.sim.job(job).map_or(now, |j| j.submit), kind),
                JobLifecycleKind::Started { .. } => (started.unwrap_or(now), kind),
                JobLifecycleKind::Finished { run_s } => {
                    let end = finished.unwrap_or(now);
                    let run_s = started.map_or(run_s, |s| (end - s).max(0.0));
                    (end, JobLifecycleKind::Finished { run_s })
                }
            };
            self.events.push(JobLifecycleEvent {
                time,
                job,
                row,
                lap,
                kind,
            });
        }
    }
}

impl ClusterBackend for LiveSim {
    fn observe(&mut self) -> impl Future<Output = Result<ClusterState, BackendError>> + Send {
        std::future::ready(Ok(self.patched_snapshot()))
    }
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::Admit {
            job,
            workers,
            gpu_type: None,
        }))
    }
    fn admit_on(
        &mut self,
        job: JobId,
        workers: u32,
        gpu_type: u16,
        _reason: Reason,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::Admit {
            job,
            workers,
            gpu_type: Some(gpu_type),
        }))
    }
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::SetWorkers { job, workers }))
    }
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        std::future::ready(self.sim.apply_action(Action::Suspend { job }))
    }
}

impl LiveBackend for LiveSim {
    fn tick(&mut self, wall: Duration) -> bool {
        if self.sim.all_done() && !self.sim.is_empty() {
            self.diff();
            self.next_lap();
        }
        let until = self.sim.now() + wall.as_secs_f64() * self.speed;
        self.sim.advance(until)
    }

    fn unmanaged_step(&mut self) -> usize {
        let before = self.sim.snapshot().queued.len();
        self.sim.decide_once(&mut self.fifo);
        before.saturating_sub(self.sim.snapshot().queued.len())
    }

    fn drain_events(&mut self, out: &mut Vec<JobLifecycleEvent>) {
        self.diff();
        self.events.sort_by(|a, b| a.time.total_cmp(&b.time));
        out.append(&mut self.events);
    }
}
