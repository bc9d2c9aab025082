//! The live loop over the simulator: speed, lifecycle events, determinism, pause, dry-run,
//! laps, predictions given while replaying, and a backend that may not act.

use std::future::Future;
use std::time::Duration;

use super::backend::{JobLifecycleEvent, JobLifecycleKind, LiveBackend};
use super::blocking::block_on;
use super::driver::LiveLoop;
use super::record::{LiveConfig, Outcome};
use super::replay::LiveSim;
use crate::backend::ClusterBackend;
use crate::cluster::{ClusterState, JobId};
use crate::error::BackendError;
use crate::policies::elastic::{ElasticController, ElasticParams};
use crate::policies::fifo::Fifo;
use crate::scaling::ScalingModel;
use crate::sim::{ClusterSpec, SimConfig, SimJob};

/// A labelled synthetic workload (not a trace): bursts of 4- and 8-GPU jobs, deterministic.
fn synthetic_jobs(n: usize) -> Vec<SimJob> {
    (0..n)
        .map(|k| SimJob {
            row: k,
            submit: (k as f64) * 120.0 + if k % 7 == 0 { 0.0 } else { 30.0 },
            duration: 600.0 + ((k * 37) % 11) as f64 * 400.0,
            gpus: if k % 3 == 0 { 8 } else { 4 },
            predicted: Some(600.0 + ((k * 37) % 11) as f64 * 350.0),
        })
        .collect()
}

fn live(speed: f64) -> LiveLoop<LiveSim, ElasticController> {
    let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
    cfg.seed = 7;
    cfg.elastic.share = 0.5;
    let sim = LiveSim::new(synthetic_jobs(200), cfg, speed).expect("sim");
    let policy = ElasticController::new(ElasticParams::default(), ScalingModel::default());
    LiveLoop::new(
        sim,
        policy,
        LiveConfig {
            decisions_kept: 50,
            history_kept: 20,
            history_every_s: 60.0,
        },
    )
}

fn run(l: &mut LiveLoop<LiveSim, ElasticController>, ticks: usize) -> Vec<JobLifecycleEvent> {
    let mut events = Vec::new();
    for _ in 0..ticks {
        let r = block_on(l.step(Duration::from_millis(100)));
        assert!(r.error.is_none(), "{:?}", r.error);
        events.extend(r.events);
    }
    events
}

#[test]
fn progresses_at_the_given_speed() {
    let mut l = live(600.0);
    let t0 = l.backend().simulator().now();
    run(&mut l, 50);
    // 50 ticks of 0.1 s at 600× = 3000 trace seconds.
    let dt = l.backend().simulator().now() - t0;
    assert!((dt - 3000.0).abs() < 1e-6, "advanced {dt}");
    assert!(l.backend().finished_total() > 0);
    assert!(l.decisions().count() > 0);
    assert!(l.decisions().all(|d| d.outcome != Outcome::DryRun));
    // bounded histories
    assert!(l.decisions().count() <= 50 && l.history().count() <= 20);
    let h: Vec<f64> = l.history().map(|p| p.time).collect();
    assert!(h.windows(2).all(|w| w[1] >= w[0] + 60.0));
}

#[test]
fn events_follow_each_job_lifecycle() {
    let mut l = live(2000.0);
    let events = run(&mut l, 200);
    let mut state = std::collections::HashMap::new();
    let mut times = std::collections::HashMap::new();
    for e in &events {
        let t: &mut Vec<f64> = times.entry(e.job).or_default();
        t.push(e.time);
        if let JobLifecycleKind::Finished { run_s } = e.kind {
            // exact simulator times: run time = finish − first start
            assert!((e.time - t[1] - run_s).abs() < 1e-6, "{e:?} {t:?}");
        }
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
        let s = state.entry(e.job).or_insert(0u8);
        let next = match e.kind {
            JobLifecycleKind::Submitted => 1,
            JobLifecycleKind::Started { workers } => {
                assert!(workers > 0);
                2
            }
            JobLifecycleKind::Finished { run_s } => {
                assert!(run_s > 0.0);
                3
            }
        };
        assert_eq!(next, *s + 1, "job {:?} went {} -> {next}", e.job, *s);
        *s = next;
    }
    let finished = state.values().filter(|&&s| s == 3).count();
    assert_eq!(finished, l.backend().finished_total());
    assert!(finished > 10);
}

#[test]
fn deterministic() {
    let (mut a, mut b) = (live(900.0), live(900.0));
    let ea = run(&mut a, 80);
    let eb = run(&mut b, 80);
    assert_eq!(ea, eb);
    let da: Vec<_> = a.decisions().cloned().collect();
    let db: Vec<_> = b.decisions().cloned().collect();
    assert_eq!(da, db);
}

#[test]
fn paused_takes_no_decision_but_the_cluster_keeps_working() {
    let mut l = live(600.0);
    run(&mut l, 10);
    let seq = l.decisions().last().map(|d| d.seq);
    let done = l.backend().finished_total();
    l.set_paused(true);
    run(&mut l, 60);
    assert_eq!(l.decisions().last().map(|d| d.seq), seq);
    assert!(
        l.backend().finished_total() > done,
        "FIFO kept the cluster working"
    );
    l.set_paused(false);
    run(&mut l, 20);
    assert!(l.decisions().last().map(|d| d.seq) > seq);
}

#[test]
fn dry_run_decides_and_does_not_act() {
    // Acting: the elastic controller rescales some job at some point.
    let mut acting = live(600.0);
    let mut rescaled = false;
    for _ in 0..150 {
        block_on(acting.step(Duration::from_millis(100)));
        rescaled |= acting.cluster().rescaled > 0;
    }
    assert!(
        rescaled,
        "the acting controller never rescaled: test setup too easy"
    );
    // Dry-run on the same replay: decisions logged, never applied, nobody rescaled.
    let mut dry = live(600.0);
    dry.set_dry_run(true);
    for _ in 0..150 {
        block_on(dry.step(Duration::from_millis(100)));
        assert_eq!(dry.cluster().rescaled, 0);
    }
    assert!(dry.decisions().count() > 0);
    assert!(dry.decisions().all(|d| d.outcome == Outcome::DryRun));
}

#[test]
fn replays_again_after_the_trace_ends() {
    let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
    cfg.seed = 1;
    let sim = LiveSim::new(synthetic_jobs(20), cfg, 5000.0).expect("sim");
    let mut l = LiveLoop::new(sim, Fifo::default(), LiveConfig::default());
    let mut last_t = f64::NEG_INFINITY;
    for _ in 0..200 {
        block_on(l.step(Duration::from_millis(100)));
        let t = l.cluster().time;
        assert!(t >= last_t, "time went back {last_t} -> {t}");
        last_t = t;
    }
    assert!(l.backend().lap() >= 1);
    assert!(l.backend().finished_total() > 20);
}

#[test]
fn predictions_given_while_replaying_reach_the_policy() {
    let mut l = live(600.0);
    let events = l.advance(Duration::from_secs(1));
    let submitted: Vec<JobId> = events
        .iter()
        .filter(|e| e.kind == JobLifecycleKind::Submitted)
        .map(|e| e.job)
        .collect();
    assert!(!submitted.is_empty());
    for (k, id) in submitted.iter().enumerate() {
        l.backend_mut()
            .set_predicted_runtime(*id, 1000.0 + k as f64);
    }
    l.backend_mut()
        .set_predicted_runtime(submitted[0], f64::NAN); // ignored
    let snap = block_on(l.backend_mut().observe()).expect("observe");
    for (k, id) in submitted.iter().enumerate() {
        let p = snap
            .queued
            .iter()
            .find(|q| q.id == *id)
            .map(|q| q.predicted_runtime)
            .or_else(|| {
                snap.running
                    .iter()
                    .find(|r| r.id == *id)
                    .map(|r| r.predicted_runtime)
            });
        assert_eq!(p, Some(Some(1000.0 + k as f64)));
    }
}

/// The simulator behind a closed leader gate.
struct Follower(LiveSim, bool);

impl ClusterBackend for Follower {
    fn observe(&mut self) -> impl Future<Output = Result<ClusterState, BackendError>> + Send {
        self.0.observe()
    }
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.0.admit(job, workers)
    }
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.0.set_workers(job, workers)
    }
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.0.suspend(job)
    }
}

impl LiveBackend for Follower {
    fn tick(&mut self, wall: Duration) -> bool {
        self.0.tick(wall)
    }
    fn may_act(&self) -> bool {
        self.1
    }
}

#[test]
fn a_backend_that_may_not_act_gets_no_decision_until_it_may() {
    let mut cfg = SimConfig::new(ClusterSpec::homogeneous(32, 8, 2).expect("cluster"));
    cfg.seed = 3;
    let sim = LiveSim::new(synthetic_jobs(50), cfg, 600.0).expect("sim");
    let mut l = LiveLoop::new(Follower(sim, false), Fifo::default(), LiveConfig::default());
    for _ in 0..30 {
        let r = block_on(l.step(Duration::from_millis(100)));
        assert!(!r.decided && r.error.is_none(), "{r:?}");
    }
    assert_eq!(l.decisions().count(), 0);
    assert!(
        l.cluster().queued > 0,
        "jobs arrived and wait: {:?}",
        l.cluster()
    );
    // the gate opens: the change seen while closed is decided at the next tick
    l.backend_mut().1 = true;
    let r = block_on(l.control());
    assert!(r.decided && r.decisions > 0, "{r:?}");
    assert!(l.decisions().all(|d| d.outcome == Outcome::Applied));
}

#[test]
fn rejects_a_bad_speed() {
    let cfg = SimConfig::new(ClusterSpec::homogeneous(8, 8, 1).expect("cluster"));
    for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(LiveSim::new(synthetic_jobs(3), cfg.clone(), s).is_err());
    }
}
