//! Mixed GPU types: a job's progress on each type follows its model's measured throughput
//! ratio, a job over mixed types runs at its slowest, admissions that name a type run and grow
//! there only, and the type-aware policies steer jobs by their gain.

use augur_autoscaler::backend::{Action, ClusterState, Decision, Reason};
use augur_autoscaler::cluster::{AffinityClass, TypeAffinity};
use augur_autoscaler::placement::{Capacity, Locality, NodeMeta, Strategy};
use augur_autoscaler::sim::{affinity_from_gavel, ClusterSpec, SimConfig, SimJob, Simulator};
use augur_autoscaler::{by_name, JobId, Policy, Slot};
use augur_datasets::bundled::bundled_file;
use augur_datasets::cluster::{read_gavel_throughputs, GavelThroughput};
use augur_datasets::{JobRecord, ReadOptions};

fn job(row: usize, submit: f64, duration: f64, gpus: u32) -> SimJob {
    SimJob {
        row,
        submit,
        duration,
        gpus,
        predicted: Some(duration),
    }
}

/// 16 GPUs: one 8-GPU node of each of `k80` (reference) and `v100`, both in one rack.
fn mixed(classes: Vec<AffinityClass>, job_class: Vec<u16>) -> SimConfig {
    two_types(16, 1.0, classes, job_class)
}

/// `gpus` GPUs in 8-GPU nodes of `k80` (nominal speed 1, weighted `k80_weight` against the
/// `v100`'s 1 in the split; 0: none) and `v100` (nominal 4), no elastic jobs, each job of
/// `job_class` running at its class's speeds.
fn two_types(
    gpus: u32,
    k80_weight: f64,
    classes: Vec<AffinityClass>,
    job_class: Vec<u16>,
) -> SimConfig {
    let types = [
        ("k80".to_string(), 1.0, k80_weight),
        ("v100".to_string(), 4.0, 1.0),
    ];
    let mut c = SimConfig::new(ClusterSpec::heterogeneous(gpus, 8, 4, &types).unwrap());
    c.elastic.share = 0.0;
    c.affinity = Some(TypeAffinity { classes, job_class });
    c
}

/// Admits every queued job at its request on the type a closure gives.
struct OnType(fn(JobId) -> Option<u16>);

impl Policy for OnType {
    fn name(&self) -> &str {
        "on-type"
    }
    fn decide(&mut self, snap: &ClusterState, out: &mut Vec<Decision>) -> Option<f64> {
        for q in &snap.queued {
            out.push(Decision {
                action: Action::Admit {
                    job: q.id,
                    workers: q.requested,
                    gpu_type: (self.0)(q.id),
                },
                reason: Reason::Fifo,
            });
        }
        None
    }
}

/// Two model classes: `steep` gains 8× on the v100 (type 1), `flat` 1.2×.
fn steep_and_flat() -> Vec<AffinityClass> {
    vec![
        AffinityClass {
            name: "steep".into(),
            speeds: vec![1.0, 8.0],
        },
        AffinityClass {
            name: "flat".into(),
            speeds: vec![1.0, 1.2],
        },
    ]
}

/// One 8-GPU node of k80 and one of v100; every job gains 8× on the v100 (its typical 4×).
/// Job 0 holds the v100 until 1000 s; job 1 (t = 10) and job 2 (t = 2000) start on the k80.
fn steep_scenario() -> (Vec<SimJob>, SimConfig) {
    let jobs = vec![
        job(0, 0.0, 8000.0, 8),
        job(1, 10.0, 80_000.0, 8),
        job(2, 2000.0, 16_000.0, 8),
    ];
    (jobs, mixed(steep_and_flat()[..1].to_vec(), vec![0, 0, 0]))
}

/// The Gavel model classes measured on k80, p100 and v100, with their speeds.
fn gavel_classes() -> Vec<AffinityClass> {
    let path = bundled_file("gavel-throughputs/scheduler__simulation_throughputs.json.gz").unwrap();
    let (g, _) = read_gavel_throughputs(&path, &ReadOptions::default()).unwrap();
    let types = ["k80".to_string(), "v100".to_string()];
    let (a, _) = affinity_from_gavel(&g.isolated, &types, &[JobRecord::default()], 0).unwrap();
    a.classes
}

#[test]
fn progress_on_each_type_follows_the_models_measured_throughput_ratio() {
    let classes = gavel_classes();
    // the models whose V100 speedup is smallest and largest
    let by_gain = |c: &&AffinityClass| c.speeds[1];
    let slow = classes
        .iter()
        .min_by(|a, b| by_gain(a).total_cmp(&by_gain(b)))
        .unwrap();
    let fast = classes
        .iter()
        .max_by(|a, b| by_gain(a).total_cmp(&by_gain(b)))
        .unwrap();
    assert!(
        fast.speeds[1] / slow.speeds[1] > 4.0,
        "Gavel's speedups differ per model"
    );
    let picked = vec![slow.clone(), fast.clone()];
    // jobs 0, 1 (model `slow`) and 2, 3 (model `fast`): each pair once on each type
    let jobs: Vec<SimJob> = (0..4).map(|r| job(r, 0.0, 36_000.0, 4)).collect();
    let cfg = mixed(picked.clone(), vec![0, 0, 1, 1]);
    let res = Simulator::new(jobs, cfg)
        .unwrap()
        .run(&mut OnType(|id| Some((id.0 % 2) as u16)));
    let run_s = |row: usize| res.jobs.iter().find(|j| j.row == row).unwrap().run_s;
    for (k, class) in picked.iter().enumerate() {
        let (on_k80, on_v100) = (run_s(2 * k), run_s(2 * k + 1));
        // work 36 000 s at the reference type: k80 takes exactly that, v100 that ÷ its speed
        assert!((on_k80 - 36_000.0).abs() < 1e-6, "{}: {on_k80}", class.name);
        let ratio = on_k80 / on_v100;
        assert!(
            (ratio - class.speeds[1]).abs() < 1e-9 * class.speeds[1],
            "{}: k80/v100 time {ratio} vs measured throughput ratio {}",
            class.name,
            class.speeds[1]
        );
        // GPU-seconds land on the type it ran on
        let held = &res
            .jobs
            .iter()
            .find(|j| j.row == 2 * k + 1)
            .unwrap()
            .gpu_s_by_type;
        assert!(held[0] == 0.0 && (held[1] - 4.0 * on_v100).abs() < 1e-6);
    }
}

#[test]
fn a_job_over_mixed_types_runs_at_its_slowest_and_a_named_type_keeps_it_there() {
    let classes = vec![AffinityClass {
        name: "m".into(),
        speeds: vec![1.0, 3.0],
    }];
    // 12 GPUs type-blind: 8 on one node, 4 on the other (mixed) → the k80 speed
    let res = Simulator::new(
        vec![job(0, 0.0, 3000.0, 12)],
        mixed(classes.clone(), vec![0]),
    )
    .unwrap()
    .run(&mut OnType(|_| None));
    assert!((res.jobs[0].run_s - 3000.0).abs() < 1e-6);
    // 12 GPUs on the v100 node only: does not fit (8 GPUs), refused, never placed elsewhere
    let mut sim = Simulator::new(vec![job(0, 0.0, 3000.0, 12)], mixed(classes, vec![0])).unwrap();
    sim.advance(0.0);
    let err = sim
        .apply_action(Action::Admit {
            job: JobId(0),
            workers: 12,
            gpu_type: Some(1),
        })
        .unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    assert!(sim
        .apply_action(Action::Admit {
            job: JobId(0),
            workers: 12,
            gpu_type: Some(7),
        })
        .is_err());
}

#[test]
fn the_type_aware_policy_gives_the_fast_type_to_the_job_that_gains_most() {
    // model 0 gains 1.2× on v100, model 1 gains 8×; one 8-GPU node of each type, two 8-GPU
    // jobs submitted together: the flat one first (7200 s), the steep one (3600 s)
    let classes = vec![
        AffinityClass {
            name: "flat".into(),
            speeds: vec![1.0, 1.2],
        },
        AffinityClass {
            name: "steep".into(),
            speeds: vec![1.0, 8.0],
        },
    ];
    let jobs = vec![job(0, 0.0, 7200.0, 8), job(1, 0.0, 3600.0, 8)];
    let run = |name: &str| {
        let mut p = by_name(name, Default::default()).unwrap();
        Simulator::new(jobs.clone(), mixed(classes.clone(), vec![0, 1]))
            .unwrap()
            .run(p.as_mut())
    };
    let jct = |r: &augur_autoscaler::SimResult| r.jobs.iter().filter_map(|j| j.jct()).sum::<f64>();
    let res = run("elastic-typed");
    let admit = res
        .decisions
        .iter()
        .find(|d| d.decision.action.job() == JobId(1))
        .unwrap();
    match (admit.decision.action, admit.decision.reason) {
        (
            Action::Admit {
                gpu_type: Some(1), ..
            },
            Reason::TypeGain {
                gpu_type: 1, gain, ..
            },
        ) => assert!(
            (gain - 2.0).abs() < 1e-9,
            "8× over the type's typical 4×: {gain}"
        ),
        other => panic!("{other:?}"),
    }
    // steep on the v100 (450 s), flat on the k80 (7200 s)
    assert!((jct(&res) - 7650.0).abs() < 1.0, "{}", jct(&res));
    // type-blind PACK puts the first-ranked (steep) job on the first node, a k80: 3600 + 6000
    assert!((jct(&run("elastic")) - 9600.0).abs() < 1.0);
    // Gavel-style, in submit order: flat takes the v100 (6000 s), steep the k80 (3600 s)
    assert!((jct(&run("gavel")) - 9600.0).abs() < 1.0);
}

#[test]
fn a_gang_bigger_than_every_type_still_runs_under_the_type_aware_policies() {
    // 12 GPUs on 8 per type: only over mixed types, at the slower one's speed
    let classes = vec![AffinityClass {
        name: "m".into(),
        speeds: vec![1.0, 3.0],
    }];
    for name in ["elastic-typed", "gavel"] {
        let mut p = by_name(name, Default::default()).unwrap();
        let res = Simulator::new(
            vec![job(0, 0.0, 3000.0, 12)],
            mixed(classes.clone(), vec![0]),
        )
        .unwrap()
        .run(p.as_mut());
        assert_eq!(res.jobs[0].jct(), Some(3000.0), "{name}");
    }
}

#[test]
fn placement_within_a_mask_uses_only_those_nodes_and_restores_the_rest() {
    let mut c = Capacity::new(
        (0..4)
            .map(|i| NodeMeta {
                gpus: 4,
                rack: i / 2,
                speed: 1.0,
            })
            .collect(),
    );
    let allowed = [false, true, false, true];
    let mut out = Vec::new();
    assert!(c.place_within(6, Locality::Any, Strategy::Pack, &allowed, &mut out));
    assert!(out.iter().all(|s| s.node == 1 || s.node == 3));
    assert_eq!(c.total_free(), 10);
    assert_eq!((c.free(0), c.free(2)), (4, 4));
    // 2 left on the allowed nodes: 3 more do not fit there, though 10 are free
    out.clear();
    assert!(!c.place_within(3, Locality::Any, Strategy::Pack, &allowed, &mut out));
    assert!(!c.grow_within(
        &[Slot { node: 1, gpus: 4 }],
        3,
        Strategy::Pack,
        &allowed,
        &mut out
    ));
    assert_eq!(c.total_free(), 10);
    assert!(c.grow_within(
        &[Slot { node: 1, gpus: 4 }],
        2,
        Strategy::Pack,
        &allowed,
        &mut out
    ));
    assert_eq!(out, vec![Slot { node: 3, gpus: 2 }]);
    assert_eq!(c.total_free(), 8);
}

fn thr(gpu: &str, job: &str, x: f64) -> GavelThroughput {
    GavelThroughput {
        gpu: gpu.into(),
        job_type: job.into(),
        scale_factor: 1,
        steps_per_s: x,
        colocated_pairs: 0,
    }
}

#[test]
fn classes_are_the_job_types_measured_on_every_type_and_names_map_to_families() {
    let gavel = vec![
        thr("k80", "ResNet-50 (batch size 64)", 1.0),
        thr("v100", "ResNet-50 (batch size 64)", 7.0),
        thr("k80", "A3C", 2.0),
        thr("v100", "A3C", 4.0),
        // not run on k80: no class
        thr("k80", "Big", 0.0),
        thr("v100", "Big", 3.0),
    ];
    let types = ["k80".to_string(), "v100".to_string()];
    let rec = |name: Option<&str>| JobRecord {
        job_name: name.map(str::to_string),
        ..JobRecord::default()
    };
    let records: Vec<JobRecord> = (0..200)
        .map(|i| rec((i % 2 == 0).then_some("imagenet-resnet50-run")))
        .collect();
    let (a, report) = affinity_from_gavel(&gavel, &types, &records, 7).unwrap();
    assert_eq!(a.classes.len(), 2);
    let a3c = a.classes.iter().position(|c| c.name == "A3C").unwrap();
    let rn = a
        .classes
        .iter()
        .position(|c| c.name.starts_with("ResNet"))
        .unwrap();
    assert_eq!(a.classes[a3c].speeds, vec![1.0, 2.0]);
    assert_eq!(a.classes[rn].speeds, vec![1.0, 7.0]);
    // every named job is a ResNet; the others draw both classes
    assert!(a.job_class.iter().step_by(2).all(|&k| usize::from(k) == rn));
    let drawn_a3c = a
        .job_class
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|&&k| usize::from(k) == a3c);
    assert!((25..75).contains(&drawn_a3c.count()));
    assert_eq!(report.classes[rn].by_name, 100);
    assert_eq!(report.classes.iter().map(|c| c.drawn).sum::<usize>(), 100);
    // the same seed draws the same classes
    let (b, _) = affinity_from_gavel(&gavel, &types, &records, 7).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_job_moves_to_the_type_where_it_gains_most_once_it_frees_up_and_never_back() {
    let (jobs, cfg) = steep_scenario();
    let mut p = by_name("elastic-typed", Default::default()).unwrap();
    let res = Simulator::new(jobs, cfg).unwrap().run(p.as_mut());
    let moves: Vec<(JobId, Reason)> = res
        .decisions
        .iter()
        .filter(|d| matches!(d.decision.action, Action::Suspend { .. }))
        .map(|d| (d.decision.action.job(), d.decision.reason))
        .collect();
    // each of jobs 1 and 2 moves once, k80 → v100, when the v100 frees up; nothing moves back
    assert_eq!(moves.len(), 2, "{moves:?}");
    for (k, (id, reason)) in moves.iter().enumerate() {
        assert_eq!(*id, JobId(k as u64 + 1));
        match *reason {
            Reason::Migrated {
                from: 0,
                to: 1,
                gain,
                saved_s,
                ..
            } => assert!((gain - 8.0).abs() < 1e-9 && saved_s > 600.0, "{reason:?}"),
            other => panic!("{other:?}"),
        }
    }
    // the move's admission names the new type and its gain
    let readmit = res
        .decisions
        .iter()
        .filter(|d| d.decision.action.job() == JobId(1))
        .nth(2)
        .unwrap();
    assert!(matches!(
        (readmit.decision.action, readmit.decision.reason),
        (
            Action::Admit {
                gpu_type: Some(1),
                ..
            },
            Reason::TypeGain {
                gpu_type: 1,
                step: "migrated",
                ..
            }
        )
    ));
    let finish = |row: usize| {
        res.jobs
            .iter()
            .find(|j| j.row == row)
            .unwrap()
            .finish
            .unwrap()
    };
    // job 1: 990 s done on the k80, moves at 1000 s, 30 s restart, the rest at 8×
    let f1 = 1000.0 + 30.0 + (80_000.0 - 990.0) / 8.0;
    assert!((finish(1) - f1).abs() < 1e-6, "{} vs {f1}", finish(1));
    // job 2: on the k80 from 2000 s until job 1 ends, then moves
    let f2 = f1 + 30.0 + (16_000.0 - (f1 - 2000.0)) / 8.0;
    assert!((finish(2) - f2).abs() < 1e-6, "{} vs {f2}", finish(2));
}

#[test]
fn a_job_gaining_little_on_the_faster_type_is_not_moved() {
    // the flat model gains 1.2× on the v100: below the move threshold, it stays on the k80
    let classes = steep_and_flat();
    let jobs = vec![job(0, 0.0, 8000.0, 8), job(1, 10.0, 80_000.0, 8)];
    let mut p = by_name("elastic-typed", Default::default()).unwrap();
    let res = Simulator::new(jobs, mixed(classes, vec![0, 1]))
        .unwrap()
        .run(p.as_mut());
    assert!(res
        .decisions
        .iter()
        .all(|d| !matches!(d.decision.action, Action::Suspend { .. })));
    assert_eq!(res.jobs[1].jct(), Some(80_000.0));
}

#[test]
fn the_queue_is_ranked_by_the_predicted_time_on_the_type_the_job_gets() {
    // only v100s (8 GPUs): one 8-GPU job at a time. `steep` needs 16 000 s on the reference
    // type but 2000 s here; `flat` needs 4000 s there and 3333 s here: on its type, steep is
    // the shorter, so it goes first (type-blind, the reference times put flat first)
    let classes = steep_and_flat();
    let cfg = || two_types(8, 0.0, classes.clone(), vec![0, 1]);
    let jobs = vec![job(0, 0.0, 16_000.0, 8), job(1, 0.0, 4000.0, 8)];
    let run = |name: &str| {
        let mut p = by_name(name, Default::default()).unwrap();
        Simulator::new(jobs.clone(), cfg()).unwrap().run(p.as_mut())
    };
    let start = |r: &augur_autoscaler::SimResult, row: usize| {
        r.jobs.iter().find(|j| j.row == row).unwrap().first_start
    };
    let typed = run("elastic-typed");
    assert_eq!(start(&typed, 0), Some(0.0));
    assert!((start(&typed, 1).unwrap() - 2000.0).abs() < 1e-6);
    let blind = run("elastic");
    assert_eq!(start(&blind, 1), Some(0.0));
    assert!((start(&blind, 0).unwrap() - 4000.0 / 1.2).abs() < 1e-6);
}

#[test]
fn the_live_knobs_choose_types_but_never_move_or_suspend_a_job() {
    use augur_autoscaler::{ElasticController, ElasticParams, ScalingModel};
    // the scenario where the simulator's type-aware knobs move jobs 1 and 2 to the v100
    let (jobs, cfg) = steep_scenario();
    let live = ElasticParams::live();
    assert!(live.type_aware && live.max_migrations == 0 && live.preempt_factor.is_none());
    assert!(!live.may_suspend() && ElasticParams::default().may_suspend());
    let mut p = ElasticController::new(live, ScalingModel::default());
    let res = Simulator::new(jobs, cfg).unwrap().run(&mut p);
    assert!(
        res.decisions
            .iter()
            .all(|d| !matches!(d.decision.action, Action::Suspend { .. })
                && !matches!(d.decision.reason, Reason::Migrated { .. })),
        "{:?}",
        res.decisions
    );
    // every admission still names the type it chose: job 0 the free v100, job 1 the k80 (the
    // v100 busy), job 2 the v100 freed by job 0, while job 1 stays where it started
    let admitted: Vec<(JobId, Option<u16>)> = res
        .decisions
        .iter()
        .filter_map(|d| match d.decision.action {
            Action::Admit { job, gpu_type, .. } => Some((job, gpu_type)),
            _ => None,
        })
        .collect();
    assert_eq!(
        admitted,
        vec![
            (JobId(0), Some(1)),
            (JobId(1), Some(0)),
            (JobId(2), Some(1))
        ]
    );
}
