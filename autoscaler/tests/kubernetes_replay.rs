//! Replay of a slice of the real Philly trace through the fake Kubernetes API: jobs arrive,
//! run and finish as the trace says, on a 32-GPU cluster, with a test-side "cluster" playing
//! the Kubeflow training-operator (worker pods follow `Worker.replicas`), a gang scheduler
//! (a job starts when all its pending workers fit; a running job's extra workers are placed
//! as they fit) and the trainers (work conserved across rescales on the fitted speedup curve,
//! a 30 s checkpoint-restart pause per rescale, a checkpoint annotation at each restart).
//!
//! The real [`Controller`] with Augur's elastic policy drives the [`KubeBackend`] against it,
//! and the same replay runs without Augur (the scheduler alone, static sizes). Asserted: every
//! `/scale` patch is inside the job's `elasticPolicy` bounds, no job flaps (no grow within the
//! cooldown after a shrink, never more actions than the hourly budget), every job finishes,
//! and the queue is admitted faster (lower mean queue wait) with Augur than without.
//!
//! The elastic bounds are synthetic (labelled): the trace has fixed sizes, so each job of `g`
//! GPUs is given `[max(1, g/2), 2g]` one-GPU workers, as the simulator's elastic share does.

mod fixtures;

use std::collections::BTreeMap;
use std::time::Duration;

use augur_autoscaler::kubernetes::{
    Hooks, KubeBackend, KubeConfig, Safety, CHECKPOINT_ANNOTATION, PREDICTED_ANNOTATION,
};
use augur_autoscaler::scaling::ScalingModel;
use augur_autoscaler::sim::jobs_from_records;
use augur_autoscaler::{Controller, ElasticController, ElasticParams};
use augur_datasets::bundled::Dataset;
use augur_datasets::ReadOptions;
use augur_kube_fake::*;
use fixtures::caught_up;
use serde_json::json;

const NS: &str = "ml";
const NODES_N: u32 = 4;
const GPUS_PER_NODE: u32 = 8;
const PAUSE_S: f64 = 30.0;

#[derive(Debug, Clone)]
struct WJob {
    name: String,
    submit: f64,
    requested: u32,
    bounds: (u32, u32),
    predicted: f64,
    /// Seconds of work left at the requested size.
    remaining: f64,
    last: f64,
    pause_until: f64,
    /// Pod index → node (None: pending).
    pods: BTreeMap<u32, Option<usize>>,
    created: bool,
    started: Option<f64>,
    finished: Option<f64>,
}

impl WJob {
    fn bound(&self) -> u32 {
        self.pods.values().filter(|n| n.is_some()).count() as u32
    }
    fn rate(&self, m: &ScalingModel) -> f64 {
        let w = self.bound();
        if w == 0 {
            0.0
        } else {
            m.speedup(w) / m.speedup(self.requested)
        }
    }
}

/// The cluster side of the replay: operator, scheduler, trainers.
struct World {
    api: FakeApi,
    jobs: Vec<WJob>,
    free: Vec<u32>,
    model: ScalingModel,
}

impl World {
    fn new(api: FakeApi, jobs: Vec<WJob>) -> World {
        for n in 0..NODES_N {
            let zone = if n < NODES_N / 2 { "a" } else { "b" };
            api.put(
                NODES,
                node(
                    &format!("n{n}"),
                    GPUS_PER_NODE,
                    "Tesla-P100-PCIE-16GB",
                    zone,
                    true,
                ),
            );
        }
        World {
            api,
            jobs,
            free: vec![GPUS_PER_NODE; NODES_N as usize],
            model: ScalingModel::default(),
        }
    }

    fn next_event(&self) -> Option<f64> {
        let arrival = self.jobs.iter().filter(|j| !j.created).map(|j| j.submit);
        let finish = self
            .jobs
            .iter()
            .filter(|j| j.finished.is_none())
            .filter_map(|j| {
                let r = j.rate(&self.model);
                (r > 0.0).then(|| j.last.max(j.pause_until) + j.remaining / r)
            });
        arrival.chain(finish).reduce(f64::min)
    }

    fn progress(&mut self, t: f64) {
        for j in self
            .jobs
            .iter_mut()
            .filter(|j| j.started.is_some() && j.finished.is_none())
        {
            let r = j.rate(&self.model);
            let from = j.last.max(j.pause_until);
            if t > from {
                j.remaining -= (t - from) * r;
            }
            j.last = t;
        }
    }

    fn job_obj(&self, k: usize) -> serde_json::Value {
        self.api
            .get(JOBS, NS, &self.jobs[k].name)
            .expect("job object")
    }

    /// Moves the cluster to time `t`: progress, completions, arrivals, then operator and
    /// scheduler.
    fn advance(&mut self, t: f64) {
        self.progress(t);
        for k in 0..self.jobs.len() {
            let j = &self.jobs[k];
            if j.started.is_some()
                && j.finished.is_none()
                && j.remaining <= 1e-6 * j.predicted.max(1.0)
            {
                let mut o = self.job_obj(k);
                set_succeeded(&mut o, t);
                self.api.put(JOBS, o);
                let pods: Vec<(u32, Option<usize>)> =
                    self.jobs[k].pods.iter().map(|(&i, &n)| (i, n)).collect();
                for (i, n) in pods {
                    if let Some(n) = n {
                        self.free[n] += 1;
                    }
                    self.api
                        .delete(PODS, NS, &format!("{}-worker-{i}", self.jobs[k].name));
                }
                self.jobs[k].pods.clear();
                self.jobs[k].finished = Some(t);
            }
        }
        for k in 0..self.jobs.len() {
            let j = &self.jobs[k];
            if !j.created && j.submit <= t {
                let mut o = pytorchjob(NS, &j.name, j.requested, 1, Some(j.bounds), j.submit);
                o["metadata"]["annotations"] =
                    json!({ PREDICTED_ANNOTATION: format!("{:.0}", j.predicted) });
                self.api.put(JOBS, o);
                self.jobs[k].created = true;
            }
        }
        self.reconcile(t);
    }

    /// Operator (pods follow `Worker.replicas`) and gang scheduler.
    fn reconcile(&mut self, t: f64) {
        for k in 0..self.jobs.len() {
            if !self.jobs[k].created || self.jobs[k].finished.is_some() {
                continue;
            }
            let spec = self.job_obj(k)["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
                .as_u64()
                .expect("replicas") as u32;
            let before = self.jobs[k].bound();
            let name = self.jobs[k].name.clone();
            // delete workers above the spec (highest index first)
            let extra: Vec<u32> = self.jobs[k]
                .pods
                .keys()
                .copied()
                .filter(|&i| i >= spec)
                .collect();
            for i in extra {
                if let Some(Some(n)) = self.jobs[k].pods.remove(&i) {
                    self.free[n] += 1;
                }
                self.api.delete(PODS, NS, &format!("{name}-worker-{i}"));
            }
            for i in 0..spec {
                if let std::collections::btree_map::Entry::Vacant(e) = self.jobs[k].pods.entry(i) {
                    e.insert(None);
                    self.api.put(PODS, worker_pod(NS, &name, i, 1, None));
                }
            }
            if self.jobs[k].bound() != before {
                self.rescaled(k, t);
            }
        }
        // gang scheduler in submit order; pack onto the fullest node that has room
        for k in 0..self.jobs.len() {
            if !self.jobs[k].created || self.jobs[k].finished.is_some() {
                continue;
            }
            let pending: Vec<u32> = self.jobs[k]
                .pods
                .iter()
                .filter(|(_, n)| n.is_none())
                .map(|(&i, _)| i)
                .collect();
            if pending.is_empty() {
                continue;
            }
            let total_free: u32 = self.free.iter().sum();
            let started = self.jobs[k].started.is_some();
            if !started && total_free < pending.len() as u32 {
                continue;
            }
            let mut placed = 0;
            for i in pending {
                let Some(n) = (0..self.free.len())
                    .filter(|&n| self.free[n] > 0)
                    .min_by_key(|&n| (self.free[n], n))
                else {
                    break;
                };
                self.free[n] -= 1;
                self.jobs[k].pods.insert(i, Some(n));
                let name = self.jobs[k].name.clone();
                self.api
                    .put(PODS, worker_pod(NS, &name, i, 1, Some(&format!("n{n}"))));
                placed += 1;
            }
            if placed == 0 {
                continue;
            }
            if started {
                self.rescaled(k, t);
            } else {
                let j = &mut self.jobs[k];
                j.started = Some(t);
                j.last = t;
                let mut o = self.job_obj(k);
                set_started(&mut o, t, self.jobs[k].bound());
                o["metadata"]["annotations"][CHECKPOINT_ANNOTATION] = json!(rfc3339(t));
                self.api.put(JOBS, o);
            }
        }
    }

    /// A running job's worker count changed: checkpoint-restart.
    fn rescaled(&mut self, k: usize, t: f64) {
        if self.jobs[k].started.is_none() {
            return;
        }
        self.jobs[k].pause_until = t + PAUSE_S;
        let mut o = self.job_obj(k);
        o["metadata"]["annotations"][CHECKPOINT_ANNOTATION] = json!(rfc3339(t));
        o["status"]["replicaStatuses"]["Worker"]["active"] = json!(self.jobs[k].bound());
        self.api.put(JOBS, o);
    }

    fn all_done(&self) -> bool {
        self.jobs.iter().all(|j| j.finished.is_some())
    }
}

/// A contiguous slice of Philly (by submit time), jobs that fit the cluster, with
/// predictions = true duration × a deterministic factor in [1/3, 3].
fn philly_slice(skip: usize, n: usize) -> Vec<WJob> {
    let (table, _) = Dataset::Philly.load(&ReadOptions::default()).unwrap();
    let mut records = table.to_records().unwrap();
    records.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    let records = &records[skip..skip + n];
    let (jobs, _) = jobs_from_records(records, &[]);
    let t0 = jobs.first().map_or(0.0, |j| j.submit);
    jobs.into_iter()
        .enumerate()
        .filter(|(_, j)| j.gpus <= NODES_N * GPUS_PER_NODE / 2)
        .map(|(i, j)| {
            let factor = 3f64.powf(((i * 7919) % 201) as f64 / 100.0 - 1.0);
            WJob {
                name: format!("philly-{}", skip + j.row),
                // on the clock of 2026 so timestamps are ordinary
                submit: 1_767_225_600.0 + (j.submit - t0),
                requested: j.gpus,
                bounds: ((j.gpus / 2).max(1), 2 * j.gpus),
                predicted: j.duration * factor,
                remaining: j.duration,
                last: 0.0,
                pause_until: 0.0,
                pods: BTreeMap::new(),
                created: false,
                started: None,
                finished: None,
            }
        })
        .collect()
}

struct Outcome {
    mean_wait: f64,
    waits: Vec<f64>,
    patches: Vec<(String, u32, f64)>,
    refused: usize,
}

async fn replay(jobs: Vec<WJob>, with_augur: bool) -> Outcome {
    let api = FakeApi::start(&[]).await;
    let mut world = World::new(api.clone(), jobs);
    let clock = VClock::new(world.next_event().expect("jobs"));
    let params = ElasticParams {
        // the Kubernetes backend cannot suspend: no preemption
        preempt_factor: None,
        ..ElasticParams::default()
    };
    let mut ctl = Controller::new(ElasticController::new(params, ScalingModel::default()));
    let mut backend = if with_augur {
        let cfg = KubeConfig {
            namespace: Some(NS.into()),
            safety: Safety {
                backoff_base: Duration::from_millis(5),
                ..Safety::default()
            },
            ..KubeConfig::default()
        };
        let hooks = Hooks {
            clock: clock.clock(),
            ..Hooks::default()
        };
        let b = KubeBackend::start(api.client(), cfg, hooks).await.unwrap();
        b.wait_synced(Duration::from_secs(10)).await.unwrap();
        Some(b)
    } else {
        None
    };
    let mut refused = 0;
    let mut wake: Option<f64> = None;
    let mut steps = 0;
    while !world.all_done() {
        let next = [world.next_event(), wake]
            .into_iter()
            .flatten()
            .filter(|&t| t >= clock.now())
            .reduce(f64::min);
        let Some(t) = next else { break };
        clock.set(t);
        world.advance(t);
        if let Some(b) = backend.as_mut() {
            caught_up(b, &api).await;
            let r = ctl.reconcile(b).await.expect("observe");
            if r.failed.is_some() {
                refused += 1;
            }
            wake = r.wake_at.filter(|&w| w > t);
            world.reconcile(t);
        }
        steps += 1;
        assert!(steps < 20_000, "replay does not end");
    }
    if !world.all_done() {
        let stuck: Vec<_> = world
            .jobs
            .iter()
            .filter(|j| j.finished.is_none())
            .map(|j| {
                (
                    j.name.clone(),
                    j.requested,
                    j.created,
                    j.started,
                    j.remaining,
                    j.pods.clone(),
                )
            })
            .collect();
        panic!(
            "jobs left at {}: {stuck:?}; free {:?}",
            clock.now(),
            world.free
        );
    }
    // bounds of every patch the backend sent
    let bounds: BTreeMap<String, (u32, u32)> = world
        .jobs
        .iter()
        .map(|j| (j.name.clone(), j.bounds))
        .collect();
    let mut sent = 0;
    for r in api.requests().iter().filter(|r| r.method == "PATCH") {
        let name = r.path.rsplit('/').nth(1).unwrap().to_string();
        let replicas = r.body.as_ref().unwrap()["spec"]["replicas"]
            .as_u64()
            .unwrap() as u32;
        let (lo, hi) = bounds[&name];
        assert!(
            (lo..=hi).contains(&replicas),
            "{name}: patched to {replicas} outside [{lo}, {hi}]"
        );
        sent += 1;
    }
    let patches: Vec<(String, u32, f64)> = backend
        .as_ref()
        .map(|b| {
            b.scales()
                .iter()
                .map(|s| (s.job.name.clone(), s.to, s.time))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        sent,
        patches.len(),
        "one PATCH per scale (no faults injected)"
    );
    let waits: Vec<f64> = world
        .jobs
        .iter()
        .map(|j| j.started.unwrap() - j.submit)
        .collect();
    Outcome {
        mean_wait: waits.iter().sum::<f64>() / waits.len() as f64,
        waits,
        patches,
        refused,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_scales_philly_jobs_within_bounds_admits_the_queue_faster_and_never_flaps() {
    let jobs = philly_slice(2000, 120);
    assert!(jobs.len() >= 100);
    let base = replay(jobs.clone(), false).await;
    let augur = replay(jobs.clone(), true).await;
    eprintln!(
        "philly slice: {} jobs, mean queue wait {:.0} s without Augur, {:.0} s with ({} patches, {} refused batches)",
        jobs.len(),
        base.mean_wait,
        augur.mean_wait,
        augur.patches.len(),
        augur.refused
    );
    assert!(
        base.mean_wait > 60.0,
        "the slice must queue: {}",
        base.mean_wait
    );
    assert!(base.patches.is_empty());
    assert!(!augur.patches.is_empty(), "Augur acted");
    assert!(
        augur.mean_wait < base.mean_wait,
        "queue admitted faster: {} vs {}",
        augur.mean_wait,
        base.mean_wait
    );
    // no flapping: per job, no grow within the cooldown after a shrink, and never more than
    // the hourly budget in any hour
    let cooldown = ElasticParams::default().cooldown_s;
    let budget = Safety::default().max_actions_per_job_per_hour;
    let mut by_job: BTreeMap<&str, Vec<(u32, f64)>> = BTreeMap::new();
    for (name, replicas, t) in &augur.patches {
        by_job.entry(name).or_default().push((*replicas, *t));
    }
    for (name, seq) in &by_job {
        let j = jobs.iter().find(|j| j.name == *name).unwrap();
        let mut size = j.requested;
        let mut last_shrink: Option<f64> = None;
        for (k, &(to, t)) in seq.iter().enumerate() {
            if to > size {
                if let Some(s) = last_shrink {
                    assert!(
                        t - s >= cooldown,
                        "{name} grown {:.0} s after a shrink",
                        t - s
                    );
                }
            } else {
                last_shrink = Some(t);
            }
            size = to;
            let in_hour = seq[..=k].iter().filter(|&&(_, u)| t - u < 3600.0).count();
            assert!(
                in_hour <= budget,
                "{name}: {in_hour} actions within an hour"
            );
        }
    }
    assert_eq!(augur.waits.len(), base.waits.len());
}
