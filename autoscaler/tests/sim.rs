//! Behaviour of the simulator and the policies: work conservation, gang scheduling, bounds,
//! cooldown, determinism, FIFO order, node failures, and the oracle beating FIFO on real jobs.

use std::collections::HashMap;
use std::sync::OnceLock;

use augur_autoscaler::backend::{Action, ClusterState, Decision, Reason};
use augur_autoscaler::scaling::ScalingModel;
use augur_autoscaler::sim::{
    jobs_from_records, ClusterSpec, NodeFault, SimConfig, SimJob, Simulator,
};
use augur_autoscaler::{by_name, ElasticController, ElasticParams, Fifo, Policy, SrtfOracle};
use augur_datasets::bundled::Dataset;
use augur_datasets::ReadOptions;

fn job(row: usize, submit: f64, duration: f64, gpus: u32) -> SimJob {
    SimJob {
        row,
        submit,
        duration,
        gpus,
        predicted: Some(duration),
    }
}

fn cfg(gpus: u32, per_node: u32) -> SimConfig {
    let mut c = SimConfig::new(ClusterSpec::homogeneous(gpus, per_node, 4).unwrap());
    c.elastic.share = 0.0;
    c
}

/// The first `n` Philly jobs, with predictions = true duration × a deterministic factor in
/// [1/3, 3] (so prediction-driven policies are not oracles).
fn philly(n: usize) -> Vec<SimJob> {
    static ALL: OnceLock<Vec<SimJob>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let (table, _) = Dataset::Philly.load(&ReadOptions::default()).unwrap();
        let mut records = table.to_records().unwrap();
        records.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
        records.truncate(4000);
        let pred: Vec<Option<f64>> = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.duration
                    .map(|d| d.max(1.0) * 3f64.powf(((i * 7919) % 201) as f64 / 100.0 - 1.0))
            })
            .collect();
        jobs_from_records(&records, &pred).0
    });
    all.iter().take(n).cloned().collect()
}

/// Admits everything at its request in submit order, and rescales job 0 to `to` workers at
/// time `at`.
struct Scripted {
    at: f64,
    to: u32,
    done: bool,
}

impl Policy for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        for q in &snap.queued {
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                    gpu_type: None,
                },
                reason: Reason::Fifo,
            });
        }
        if !self.done && snap.time >= self.at {
            if let Some(r) = snap.running.first() {
                self.done = true;
                out.push(Decision {
                    action: Action::SetWorkers {
                        job: r.id,
                        workers: self.to,
                    },
                    reason: Reason::IdleGpus { idle_gpus: 0 },
                });
            }
        }
        (!self.done).then_some(self.at)
    }
}

#[test]
fn work_is_conserved_when_a_job_is_rescaled() {
    let scaling = ScalingModel::Amdahl { serial: 0.1 };
    for (to, pause) in [(4u32, 30.0), (1, 30.0), (8, 0.0)] {
        let mut c = cfg(8, 8);
        c.elastic.share = 1.0;
        c.elastic.min_fraction = 0.5;
        c.elastic.max_factor = 4.0;
        c.scaling = scaling;
        c.rescale_pause_s = pause;
        let d = 10_000.0;
        let sim = Simulator::new(vec![job(0, 0.0, d, 2)], c).unwrap();
        let res = sim.run(&mut Scripted {
            at: 1000.0,
            to,
            done: false,
        });
        assert_eq!(res.rescales, 1, "to {to}");
        let finish = res.jobs[0].finish.unwrap();
        // 1000 s of work at 2 workers, the pause, then the rest at the new speed
        let expect = 1000.0 + pause + (d - 1000.0) * scaling.speedup(2) / scaling.speedup(to);
        assert!(
            (finish - expect).abs() < 1e-6,
            "to {to}: {finish} vs {expect}"
        );
    }
}

/// Wraps a policy and checks cluster invariants on every snapshot it sees.
struct Checked<P> {
    inner: P,
    snapshots: usize,
    max_workers_seen: HashMap<u64, u32>,
}

impl<P: Policy> Policy for Checked<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        self.snapshots += 1;
        let healthy = snap.healthy_gpus();
        let held: u32 = snap.running.iter().map(|r| r.workers).sum();
        assert_eq!(
            held + snap.free_gpus(),
            healthy,
            "GPUs held + free = healthy"
        );
        let mut per_node = vec![0u32; snap.nodes.len()];
        for r in &snap.running {
            let slots = snap.placement_of(r);
            assert_eq!(
                slots.iter().map(|s| s.gpus).sum::<u32>(),
                r.workers,
                "gang placed whole"
            );
            assert!(
                r.workers >= r.min_workers && r.workers <= r.max_workers,
                "within [min, max]"
            );
            for s in slots {
                per_node[s.node as usize] += s.gpus;
            }
            let m = self.max_workers_seen.entry(r.id.0).or_default();
            *m = (*m).max(r.workers);
        }
        for (n, used) in snap.nodes.iter().zip(&per_node) {
            assert!(used + n.free <= n.gpus, "node {} over-allocated", n.name);
            if !n.healthy {
                assert_eq!(*used, 0, "jobs on a failed node");
            }
        }
        self.inner.decide(snap, out)
    }
}

#[test]
fn gang_scheduling_never_over_allocates_and_respects_bounds() {
    let jobs = philly(2500);
    for name in ["fifo", "tiresias", "optimus", "elastic"] {
        let mut c = SimConfig::new(ClusterSpec::homogeneous(96, 8, 4).unwrap());
        c.seed = 3;
        // a few node failures too
        c.faults = vec![
            NodeFault {
                node: 1,
                start: jobs[100].submit,
                end: jobs[100].submit + 7200.0,
            },
            NodeFault {
                node: 5,
                start: jobs[900].submit,
                end: jobs[900].submit + 3600.0,
            },
        ];
        let scaling = c.scaling;
        let mut p = Checked {
            inner: by_name(name, scaling).unwrap(),
            snapshots: 0,
            max_workers_seen: HashMap::new(),
        };
        let res = Simulator::new(jobs.clone(), c).unwrap().run(&mut p);
        assert!(p.snapshots > 100);
        assert_eq!(res.summary().unfinished, 0, "{name}");
        assert_eq!(res.node_failures, 2);
        if name == "elastic" || name == "optimus" {
            assert!(res.rescales > 0, "{name} never rescaled");
            // some job ran above its request
            let grew = res.jobs.iter().enumerate().any(|(i, j)| {
                p.max_workers_seen
                    .get(&(i as u64))
                    .is_some_and(|&m| m > j.gpus)
            });
            assert!(grew, "{name}: no job grew");
        } else {
            assert_eq!(res.rescales, 0);
        }
    }
}

#[test]
fn cooldown_prevents_flapping() {
    let jobs = philly(3000);
    let mut c = SimConfig::new(ClusterSpec::homogeneous(128, 8, 4).unwrap());
    c.seed = 1;
    let params = ElasticParams::default();
    let mut p = ElasticController::new(params, c.scaling);
    let res = Simulator::new(jobs, c).unwrap().run(&mut p);
    assert!(res.rescales > 20, "only {} rescales", res.rescales);
    let mut last: HashMap<u64, f64> = HashMap::new();
    let mut checked = 0;
    for d in res.decisions.iter().filter(|d| d.error.is_none()) {
        if let Action::SetWorkers { job, .. } = d.decision.action {
            let needs_cooldown = matches!(
                d.decision.reason,
                Reason::IdleGpus { .. } | Reason::QueueWaitHigh { .. }
            );
            if let (true, Some(prev)) = (needs_cooldown, last.get(&job.0)) {
                checked += 1;
                assert!(
                    d.time - prev >= params.cooldown_s,
                    "job {} rescaled at {} and again at {}",
                    job.0,
                    prev,
                    d.time
                );
            }
            last.insert(job.0, d.time);
        }
    }
    assert!(checked > 0, "no job was rescaled twice");
}

#[test]
fn a_replay_is_deterministic_for_a_seed() {
    let jobs = philly(1500);
    let run = |seed: u64| {
        let mut c = SimConfig::new(ClusterSpec::homogeneous(64, 8, 4).unwrap());
        c.seed = seed;
        let mut p = ElasticController::new(ElasticParams::default(), c.scaling);
        Simulator::new(jobs.clone(), c).unwrap().run(&mut p)
    };
    let (a, b, other) = (run(7), run(7), run(8));
    assert_eq!(a.jobs, b.jobs);
    assert_eq!(a.decisions, b.decisions);
    assert_eq!(a.timeline, b.timeline);
    let elastic =
        |r: &augur_autoscaler::SimResult| r.jobs.iter().map(|j| j.elastic).collect::<Vec<_>>();
    assert_ne!(
        elastic(&a),
        elastic(&other),
        "another seed picks other elastic jobs"
    );
    let share = elastic(&a).iter().filter(|e| **e).count() as f64 / a.jobs.len() as f64;
    assert!((share - 0.5).abs() < 0.05, "elastic share {share}");
}

#[test]
fn fifo_starts_equal_sized_jobs_in_submit_order() {
    // 30 one-GPU jobs on 4 GPUs: each waits for the one before it
    let jobs: Vec<SimJob> = (0..30)
        .map(|i| {
            job(
                i,
                i as f64 * 10.0,
                500.0 + ((i * 37) % 11) as f64 * 100.0,
                1,
            )
        })
        .collect();
    let res = Simulator::new(jobs, cfg(4, 4))
        .unwrap()
        .run(&mut Fifo::strict());
    let mut by_submit = res.jobs.clone();
    by_submit.sort_by(|a, b| a.submit.total_cmp(&b.submit));
    for w in by_submit.windows(2) {
        assert!(w[0].first_start.unwrap() <= w[1].first_start.unwrap());
    }
    // and the cluster was never idle while jobs waited: total work / 4 GPUs bounds the makespan
    let work: f64 = res.jobs.iter().map(|j| j.duration).sum();
    assert!(res.summary().makespan <= work / 4.0 + 1100.0);
}

#[test]
fn a_big_fifo_job_is_not_overtaken_forever() {
    // a 4-GPU job behind a stream of 1-GPU jobs on 4 GPUs: skipped at first, then it blocks
    let mut jobs = vec![job(0, 0.0, 1000.0, 1), job(1, 1.0, 1000.0, 4)];
    jobs.extend((2..200).map(|i| job(i, i as f64 * 200.0, 1000.0, 1)));
    let mut fifo = Fifo::default();
    fifo.block_after_s = 3600.0;
    let res = Simulator::new(jobs, cfg(4, 4)).unwrap().run(&mut fifo);
    let big = res.jobs.iter().find(|j| j.gpus == 4).unwrap();
    let wait = big.first_start.unwrap() - big.submit;
    assert!(
        (999.0..3600.0 + 1000.0 + 1.0).contains(&wait),
        "waited {wait}"
    );
}

#[test]
fn a_node_failure_loses_the_work_since_the_last_checkpoint() {
    let mut c = cfg(8, 8);
    c.checkpoint_interval_s = 1800.0;
    c.rescale_pause_s = 30.0;
    c.faults = vec![NodeFault {
        node: 0,
        start: 4000.0,
        end: 5000.0,
    }];
    let res = Simulator::new(vec![job(0, 0.0, 10_000.0, 8)], c)
        .unwrap()
        .run(&mut Fifo::default());
    let j = &res.jobs[0];
    assert_eq!(j.failures, 1);
    // checkpoint at 3600 s; 400 s lost; back at 5000 s, 30 s restore, 6400 s left
    assert!((j.lost_work_s - 400.0).abs() < 1e-6, "{}", j.lost_work_s);
    assert!(
        (j.finish.unwrap() - 11_430.0).abs() < 1e-6,
        "{:?}",
        j.finish
    );
}

#[test]
fn srtf_oracle_beats_fifo_on_real_jobs() {
    let jobs = philly(3000);
    let c = || SimConfig::new(ClusterSpec::homogeneous(64, 8, 4).unwrap());
    let fifo = Simulator::new(jobs.clone(), c())
        .unwrap()
        .run(&mut Fifo::default())
        .summary();
    let srtf = Simulator::new(jobs, c())
        .unwrap()
        .run(&mut SrtfOracle::default())
        .summary();
    assert!(
        fifo.avg_wait > 600.0,
        "the slice must load the cluster: {}",
        fifo.avg_wait
    );
    assert!(
        srtf.avg_jct < fifo.avg_jct,
        "{} vs {}",
        srtf.avg_jct,
        fifo.avg_jct
    );
}

#[test]
fn an_idle_cluster_grows_an_elastic_job_and_it_finishes_sooner() {
    let mut c = cfg(16, 8);
    c.elastic.share = 1.0;
    let scaling = c.scaling;
    let jobs = vec![job(0, 0.0, 36_000.0, 2)];
    let fifo = Simulator::new(jobs.clone(), c.clone())
        .unwrap()
        .run(&mut Fifo::default());
    let mut p = ElasticController::new(ElasticParams::default(), scaling);
    let el = Simulator::new(jobs, c).unwrap().run(&mut p);
    // it starts at its maximum (4 × 2 = 8 workers) right away: no restart after the start
    assert_eq!(el.rescales, 0);
    let first = &el.decisions[0].decision;
    assert_eq!(
        first.action,
        Action::Admit {
            job: first.action.job(),
            workers: 8,
            gpu_type: None,
        }
    );
    let (f, e) = (fifo.jobs[0].finish.unwrap(), el.jobs[0].finish.unwrap());
    let expect = 36_000.0 * scaling.speedup(2) / scaling.speedup(8);
    assert!(
        (e - expect).abs() < 1e-6 && e < f,
        "{e} vs {expect}, fifo {f}"
    );
}

/// Elastic jobs on 24 GPUs: a 1-GPU job of `first_s` seconds and a 16-GPU job of 110k s are
/// submitted at once (a 4-GPU job arrives at t = 100); the first decision starts the two,
/// growing them into the idle GPUs from the start.
fn grown_pair(
    params: ElasticParams,
    first_s: f64,
) -> (Simulator, ElasticController, Vec<Decision>) {
    let mut c = cfg(24, 8);
    c.elastic.share = 1.0;
    let scaling = c.scaling;
    let jobs = vec![
        job(0, 0.0, first_s, 1),
        job(1, 0.1, 110_000.0, 16),
        job(2, 100.0, 3_600.0, 4),
    ];
    let mut sim = Simulator::new(jobs, c).unwrap();
    let mut p = ElasticController::new(params, scaling);
    sim.advance(0.2);
    let snap = sim.snapshot().clone();
    assert_eq!(
        snap.queued.len(),
        2,
        "both jobs wait for the first decision"
    );
    let mut out = Vec::new();
    p.decide(&snap, &mut out);
    (sim, p, out)
}

/// The sizes the jobs start at.
fn grows(out: &[Decision]) -> Vec<(u64, u32)> {
    let mut v: Vec<(u64, u32)> = out
        .iter()
        .filter_map(|d| match d.action {
            Action::Admit { job, workers, .. } => Some((job.0, workers)),
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn idle_gpus_go_where_one_more_worker_saves_most() {
    // 7 idle GPUs, 2 kept as headroom (5% of 24): 5 to hand out. One more worker saves the
    // 1-GPU job far more (speedup 1 → 1.78) than the 16-GPU one (5.57 → 5.78), so the 1-GPU
    // job goes to its maximum (4) and the 16-GPU job gets the other two.
    let no_share = ElasticParams {
        min_gain_share: 0.0,
        ..ElasticParams::default()
    };
    let (_, _, out) = grown_pair(no_share, 100_000.0);
    assert_eq!(grows(&out), vec![(0, 4), (1, 18)], "{out:?}");
    assert!(
        !out.iter()
            .any(|d| matches!(d.action, Action::SetWorkers { .. })),
        "no restart: they start at those sizes"
    );
    assert!(
        out.iter()
            .all(|d| matches!(d.reason, Reason::IdleGpus { idle_gpus: 7 })),
        "a start above the request says why: {out:?}"
    );
    // the longest-first rule gives all five to the job with the longest remaining time
    // (the 16-GPU one, 110k s vs 100k s), for a 4% speedup instead of 2.9×
    let longest_first = ElasticParams {
        grow_by_marginal_gain: false,
        ..no_share
    };
    let (_, _, out) = grown_pair(longest_first, 100_000.0);
    assert_eq!(grows(&out), vec![(0, 1), (1, 21)], "{out:?}");
    // by default a rescale must save 10% of the remaining time: the 16-GPU job's two extra
    // workers (3.6% faster) are not worth its restart, the 1-GPU job still grows
    let (_, _, out) = grown_pair(ElasticParams::default(), 100_000.0);
    assert_eq!(grows(&out), vec![(0, 4), (1, 16)], "{out:?}");
}

#[test]
fn lent_workers_come_back_from_the_job_that_loses_least() {
    // after the grow the 1-GPU job (400k s) holds 4 workers, the 16-GPU one 18; the 4-GPU job
    // arrives at t = 100 (after the 30 s restarts): 2 GPUs are free, it needs 2 more
    let reclaimed = |params: ElasticParams| {
        let (mut sim, mut p, out) = grown_pair(params, 400_000.0);
        assert_eq!(grows(&out), vec![(0, 4), (1, 18)], "{out:?}");
        for d in &out {
            sim.apply_action(d.action).unwrap();
        }
        sim.advance(100.0);
        let snap = sim.snapshot().clone();
        assert_eq!(snap.queued.len(), 1);
        let mut out = Vec::new();
        p.decide(&snap, &mut out);
        assert!(
            out.iter().any(|d| d.action
                == Action::Admit {
                    job: augur_autoscaler::backend::JobId(2),
                    workers: 4,
                    gpu_type: None,
                }),
            "{out:?}"
        );
        let mut v: Vec<(u64, u32)> = out
            .iter()
            .filter(|d| matches!(d.reason, Reason::Reclaimed { .. }))
            .filter_map(|d| match d.action {
                Action::SetWorkers { job, workers } => Some((job.0, workers)),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    };
    let no_share = ElasticParams {
        min_gain_share: 0.0,
        ..ElasticParams::default()
    };
    // the 16-GPU job's 18th worker saves least (1.7% of its time), so it gives them back
    assert_eq!(reclaimed(no_share), vec![(1, 16)]);
    // longest remaining time first would halve the 1-GPU job's speed instead
    let longest_first = ElasticParams {
        reclaim_least_loss: false,
        ..no_share
    };
    assert_eq!(reclaimed(longest_first), vec![(0, 2)]);
}
