//! The non-job readers (training curves, DAGs, cluster descriptions) on the real bundled files,
//! with facts checked against the files independently (python3), plus bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use augur_datasets::bundled::{bundled_file, data_dir};
use augur_datasets::cluster::{
    read_cluster_summary, read_fault_statistics, read_fault_trace, read_gavel_throughputs,
    read_openb_nodes, relative_speeds,
};
use augur_datasets::curves::{
    read_mlperf_curves, read_mlperf_runs, read_pollux_dir, read_pollux_placements,
    read_pollux_validation, PolluxFileKind, RunStatus,
};
use augur_datasets::dag::{
    critical_path, read_tpch_dags, read_wfcommons, topological_order, DagJob, DagShapeError,
};
use augur_datasets::{
    detect_format, summarize_file, DatasetError, ReadOptions, ReadReport, TraceFormat,
};

fn data(rel: &str) -> PathBuf {
    bundled_file(rel).expect("bundled data folder")
}

fn opts() -> ReadOptions {
    ReadOptions::default()
}

fn strict() -> ReadOptions {
    ReadOptions {
        strict: true,
        ..Default::default()
    }
}

/// Every row read was kept and nothing was dropped.
fn assert_clean(report: &ReadReport) {
    assert_eq!(
        report.rows_dropped(),
        0,
        "unexpected drops: {:?}",
        report.issues
    );
    assert_eq!(report.rows_read, report.rows_kept, "{report:?}");
}

fn files_in(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n != "SOURCE.txt"
        })
        .collect();
    v.sort();
    v
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

// ---------------------------------------------------------------------------------------------
// MLPerf.

#[test]
fn mlperf_runs_real() {
    let (runs, report) = read_mlperf_runs(&data("mlperf-v1.0/runs.csv.gz"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(runs.len(), 1239);
    let mut by_bench: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &runs {
        *by_bench.entry(r.benchmark.as_str()).or_default() += 1;
    }
    let expected: BTreeMap<&str, usize> = [
        ("bert", 211),
        ("dlrm", 90),
        ("maskrcnn", 61),
        ("minigo", 40),
        ("resnet", 175),
        ("rnnt", 90),
        ("ssd", 110),
        ("unet3d", 462),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_bench, expected);
    let status = |s: Option<RunStatus>| runs.iter().filter(|r| r.status == s).count();
    assert_eq!(status(Some(RunStatus::Success)), 1214);
    assert_eq!(status(Some(RunStatus::Aborted)), 22); // 18 `aborted` + 4 `abort`
    assert_eq!(status(Some(RunStatus::Fail)), 2);
    assert_eq!(status(None), 1);
    // Run 1118 has no run_stop: kept, with stop, duration and status empty.
    let r = runs.iter().find(|r| r.run_id == "1118").unwrap();
    assert_eq!((r.run_stop_ms, r.duration_s, r.status), (None, None, None));
    assert_eq!(r.final_eval_accuracy, Some(0.8925323486328125));
    // The quoted framework with commas stays one field.
    let r0 = &runs[0];
    assert_eq!(r0.run_id, "0");
    assert_eq!(r0.submitter, "Dell");
    assert_eq!(
        r0.framework.as_deref(),
        Some("NGC MXNet 21.05 , NGC PyTorch 21.05 , NGC TensorFlow 21.05-tf1")
    );
    assert_eq!(r0.num_accelerators(), Some(16));
    assert_eq!(r0.global_batch_size, Some(3264));
    assert_eq!(r0.seed.as_deref(), Some("3963"));
    assert_eq!(
        (r0.run_start_ms, r0.run_stop_ms),
        (1621375311658, Some(1621376570898))
    );
    assert_eq!(r0.duration_s, Some(1259.24));
    assert_eq!(r0.final_eval_accuracy, Some(0.75966));
    assert_eq!(
        runs.iter()
            .filter(|r| r.framework.as_deref().unwrap_or("").contains(','))
            .count(),
        131
    );
    // Empty cells are None, not zero.
    assert_eq!(runs.iter().filter(|r| r.seed.is_none()).count(), 150);
    assert_eq!(
        runs.iter()
            .filter(|r| r.global_batch_size.is_none())
            .count(),
        40
    );
    assert_eq!(
        runs.iter()
            .filter(|r| r.final_eval_accuracy.is_none())
            .count(),
        61
    );
    // Google's maskrcnn seeds are float timestamps: kept as text.
    assert_eq!(
        runs.iter()
            .filter(|r| r.seed.as_deref().is_some_and(|s| s.contains('.')))
            .count(),
        10
    );
    // Time-to-train is run_stop - run_start.
    for r in &runs {
        if let (Some(stop), Some(d)) = (r.run_stop_ms, r.duration_s) {
            assert!(
                close((stop - r.run_start_ms) as f64 / 1000.0, d, 0.002),
                "{r:?}"
            );
        }
    }
}

#[test]
fn mlperf_curves_real_and_joined_with_runs() {
    let (curves, report) =
        read_mlperf_curves(&data("mlperf-v1.0/eval_curves.csv.gz"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(report.rows_read, 54_988);
    assert_eq!(curves.iter().map(|c| c.points.len()).sum::<usize>(), 54_988);
    assert_eq!(curves.len(), 1178);
    assert!(curves.iter().all(|c| c.metric == "eval_accuracy"));
    for c in &curves {
        assert!(
            c.points
                .windows(2)
                .all(|w| w[0].wall_time_s <= w[1].wall_time_s),
            "{}",
            c.run_id
        );
        assert!(c
            .points
            .iter()
            .all(|p| p.samples.is_none() && p.epoch.is_some()));
    }
    // 20 evaluations (PCL bert/resnet runs 731-755, epoch 0) were logged before run_start.
    let early: Vec<_> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(move |p| (c, p)))
        .filter(|(_, p)| p.wall_time_s < 0.0)
        .collect();
    assert_eq!(early.len(), 20);
    assert!(early.iter().all(|(_, p)| p.epoch == Some(0.0)));
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("20 point(s) were logged before run_start")));
    let c0 = curves.iter().find(|c| c.run_id == "0").unwrap();
    assert_eq!(c0.points.len(), 9);
    assert_eq!(
        (
            c0.points[0].epoch,
            c0.points[0].wall_time_s,
            c0.points[0].value
        ),
        (Some(3.0), 108.695, 0.344)
    );

    // Join with runs: the runs' n_eval_points match the curves, except every minigo run,
    // which counts 2 more points than eval_curves.csv holds; maskrcnn runs have no curve.
    let (runs, _) = read_mlperf_runs(&data("mlperf-v1.0/runs.csv.gz"), &opts()).unwrap();
    let lens: BTreeMap<&str, usize> = curves
        .iter()
        .map(|c| (c.run_id.as_str(), c.points.len()))
        .collect();
    let mut mismatched = BTreeSet::new();
    for r in &runs {
        let have = lens.get(r.run_id.as_str()).copied().unwrap_or(0);
        if r.n_eval_points != Some(have as u32) {
            assert_eq!(r.benchmark, "minigo", "run {}", r.run_id);
            assert_eq!(r.n_eval_points, Some(have as u32 + 2), "run {}", r.run_id);
            mismatched.insert(r.run_id.as_str());
        }
        if r.benchmark == "maskrcnn" {
            assert_eq!(have, 0);
        }
    }
    assert_eq!(mismatched.len(), 40);
    let ids: BTreeSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert!(curves.iter().all(|c| ids.contains(c.run_id.as_str())));
}

// ---------------------------------------------------------------------------------------------
// Pollux / Sia.

#[test]
fn pollux_dir_real() {
    let (p, report) = read_pollux_dir(&data("pollux-curves"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(report.files.len(), 134);
    assert!(report.notes.iter().any(|n| n.contains("SOURCE.txt")));
    assert_eq!(
        (p.validations.len(), p.placements.len(), p.scalability.len()),
        (46, 44, 44)
    );
    let rows =
        |t: &[augur_datasets::curves::StepTimeTable]| t.iter().map(|t| t.rows.len()).sum::<usize>();
    assert_eq!(
        p.validations.iter().map(|v| v.points.len()).sum::<usize>(),
        2164
    );
    assert_eq!(rows(&p.placements), 21_905);
    assert_eq!(rows(&p.scalability), 8_642);
    let models: BTreeSet<&str> = p.validations.iter().map(|v| v.model.as_str()).collect();
    assert_eq!(
        models.into_iter().collect::<Vec<_>>(),
        [
            "bert",
            "cifar10",
            "deepspeech2",
            "gpt_pmp",
            "imagenet",
            "ncf",
            "yolov3"
        ]
    );
    let gpus: BTreeSet<Option<&str>> = p.placements.iter().map(|t| t.gpu.as_deref()).collect();
    assert_eq!(
        gpus.into_iter().collect::<Vec<_>>(),
        [
            None,
            Some("aws"),
            Some("azure"),
            Some("dgx"),
            Some("dgx-ext"),
            Some("quad"),
            Some("rtx")
        ]
    );
    let cifar = p
        .validations
        .iter()
        .find(|v| v.model == "cifar10" && v.global_batch_size == 128)
        .unwrap();
    assert_eq!(cifar.points.len(), 100);
    assert_eq!(
        (cifar.points[0].iteration, cifar.points[0].metric),
        (390.0, 0.4455)
    );
    assert_eq!(cifar.points[99].metric, 0.9448);
    // gpt_pmp's validation files are byte-for-byte copies of bert's.
    for v in p.validations.iter().filter(|v| v.model == "gpt_pmp") {
        let bert = p
            .validations
            .iter()
            .find(|b| b.model == "bert" && b.global_batch_size == v.global_batch_size)
            .unwrap();
        assert_eq!(v.points, bert.points);
    }
    // Placement strings give nodes and GPUs, matching the scalability table's rows.
    let gpt = p
        .placements
        .iter()
        .find(|t| t.model == "gpt_pmp" && t.gpu.as_deref() == Some("rtx"))
        .unwrap();
    let r = gpt
        .rows
        .iter()
        .find(|r| r.placement.as_deref() == Some("88"))
        .unwrap();
    assert_eq!((r.num_nodes, r.num_replicas, r.local_bsz), (2, 16, 1));
    let gpt_s = p
        .scalability
        .iter()
        .find(|t| t.model == "gpt_pmp" && t.gpu.as_deref() == Some("rtx"))
        .unwrap();
    assert!(gpt_s
        .rows
        .iter()
        .any(|s| (s.num_nodes, s.num_replicas, s.local_bsz) == (2, 16, 1)
            && s.step_time_s == r.step_time_s
            && s.sync_time_s == r.sync_time_s));
    // Column order differs between files; the same reader handles every order.
    let (t, rep) = read_pollux_placements(
        &data("pollux-curves/sia-simulator__traces__cifar10__placements-rtx.csv"),
        &opts(),
    )
    .unwrap();
    assert_clean(&rep);
    assert_eq!(
        (t.model.as_str(), t.gpu.as_deref(), t.kind),
        ("cifar10", Some("rtx"), PolluxFileKind::Placements)
    );
    assert_eq!(t.rows.len(), 446);
    assert_eq!(t.rows[0].placement.as_deref(), Some("1"));
    assert_eq!(
        (t.rows[0].local_bsz, t.rows[0].step_time_s),
        (32, 0.043465644121170044)
    );
}

#[test]
fn pollux_plain_folder_layout() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cifar10");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(
        model.join("validation-128.csv"),
        "progress,iteration,metric,grad_sqr,grad_var\n391.0,390,0.4455,8.9,5.0\n782.0,781,oops,1.8,1.5\n",
    )
    .unwrap();
    std::fs::write(
        model.join("scalability-rtx.csv"),
        "local_bsz,step_time,sync_time,num_nodes,num_replicas\n32,0.08,0.03,3,3\n",
    )
    .unwrap();
    std::fs::write(
        model.join("placements.csv"),
        "placement,local_bsz,step_time,sync_time\n1x,32,0.1,0.0\n12,32,0.1,0.0\n",
    )
    .unwrap();
    let (p, report) = read_pollux_dir(&model, &opts()).unwrap();
    assert_eq!(p.validations[0].model, "cifar10");
    assert_eq!(p.validations[0].global_batch_size, 128);
    assert_eq!(p.validations[0].points.len(), 1);
    assert_eq!(p.scalability[0].gpu.as_deref(), Some("rtx"));
    assert_eq!(p.placements[0].rows.len(), 1);
    assert_eq!(
        (
            p.placements[0].rows[0].num_nodes,
            p.placements[0].rows[0].num_replicas
        ),
        (2, 3)
    );
    assert_eq!(report.rows_dropped(), 2);
    assert_eq!(report.issues[0].field, "placement");
    assert_eq!(
        (report.issues[1].field.as_str(), report.issues[1].line),
        ("metric", 3)
    );
    // Strict mode stops at the first.
    assert!(matches!(
        read_pollux_dir(&model, &strict()),
        Err(DatasetError::StrictRow(_))
    ));
    // A validation file without a batch size in its name is a clear error.
    let bad = model.join("validation.csv");
    std::fs::write(&bad, "progress,iteration,metric\n1,1,1\n").unwrap();
    let e = read_pollux_validation(&bad, &opts()).unwrap_err();
    assert!(e.to_string().contains("batch size"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// DAGs.

#[test]
fn critical_path_of_hand_built_dag() {
    //      a(2) ─┬─> c(4) ─┐
    //            │         ├─> e(1)
    //      b(3) ─┴─> d(1) ─┘
    let parents = vec![vec![], vec![], vec![0, 1], vec![0, 1], vec![2, 3]];
    let durations = [2.0, 3.0, 4.0, 1.0, 1.0];
    assert_eq!(critical_path(&parents, &durations), Ok(8.0)); // b → c → e
    assert_eq!(topological_order(&parents), Ok(vec![0, 1, 2, 3, 4]));
    assert_eq!(critical_path(&[], &[]), Ok(0.0));
    assert_eq!(critical_path(&[vec![]], &[5.0]), Ok(5.0));
    assert_eq!(
        critical_path(&parents, &[1.0]),
        Err(DagShapeError::LengthMismatch {
            stages: 5,
            durations: 1
        })
    );
    assert!(matches!(
        critical_path(&[vec![1], vec![0]], &[1.0, 1.0]),
        Err(DagShapeError::Cycle { .. })
    ));
    assert_eq!(
        critical_path(&[vec![7]], &[1.0]),
        Err(DagShapeError::UnknownParent {
            stage: 0,
            parent: 7
        })
    );
    assert!(matches!(
        critical_path(&[vec![]], &[f64::NAN]),
        Err(DagShapeError::BadDuration { stage: 0, .. })
    ));
}

#[test]
fn tpch_dags_real() {
    let (jobs, report) = read_tpch_dags(&data("dag-tpch/tpch_dags.json.gz"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(jobs.len(), 154);
    assert_eq!(jobs.iter().map(|j| j.stages.len()).sum::<usize>(), 1414);
    assert_eq!(jobs.iter().map(|j| j.edges.len()).sum::<usize>(), 1309);
    assert_eq!(
        jobs.iter()
            .flat_map(|j| j.stages.iter().map(|s| u64::from(s.num_tasks)))
            .sum::<u64>(),
        177_891
    );
    let (lo, hi) = jobs.iter().fold((usize::MAX, 0), |(lo, hi), j| {
        (lo.min(j.stages.len()), hi.max(j.stages.len()))
    });
    assert_eq!((lo, hi), (2, 18));
    let scales: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j.scale.as_deref())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(scales.len(), 7);
    assert_eq!(jobs[0].id, "tpch-2g-q1");
    assert_eq!(jobs[153].id, "tpch-100g-q22");
    for j in &jobs {
        assert_eq!(j.family, "tpch");
        assert!(j.executors.is_none());
        assert!(topological_order(&j.parents()).is_ok());
    }
    // 2g q1: a chain of four Spark stages 0,1,3,4 with 12, 200, 200 and 5 tasks.
    let q1 = &jobs[0];
    assert_eq!(
        q1.stages.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["0", "1", "3", "4"]
    );
    assert_eq!(
        q1.stages.iter().map(|s| s.num_tasks).collect::<Vec<_>>(),
        [12, 200, 200, 5]
    );
    assert_eq!(q1.edges, vec![(0, 1), (1, 2), (2, 3)]);
    assert_eq!(
        q1.executor_counts(),
        vec![2, 5, 10, 20, 40, 50, 60, 80, 100]
    );
    let w = &q1.stages[1].waves[&10];
    assert_eq!((w.first_wave_s.len(), w.rest_wave_s.len()), (10, 190));
    assert_eq!(w.first_wave_s[..3], [0.139, 0.39, 0.167]);
    // At 10 executors: stage estimates max(first) + sum(rest)/10, critical path = 6.2405 s
    // (computed independently from the JSON).
    let e10 = q1.at_executors(10).unwrap();
    assert_eq!(
        (e10.id.as_str(), e10.executors),
        ("tpch-2g-q1-e10", Some(10))
    );
    assert!(close(
        e10.stages[1].duration_s.unwrap(),
        0.39 + 2.88 / 10.0,
        1e-9
    ));
    assert_eq!(e10.stages[1].task_durations_s.len(), 200);
    assert!(close(e10.critical_path_s().unwrap(), 6.2405, 1e-9));
    let q9 = jobs.iter().find(|j| j.id == "tpch-100g-q9").unwrap();
    assert!(close(
        q9.at_executors(100).unwrap().critical_path_s().unwrap(),
        85.75693,
        1e-6
    ));
    // The small q6 runs were measured at other executor counts.
    let q6 = jobs.iter().find(|j| j.id == "tpch-2g-q6").unwrap();
    assert_eq!(q6.executor_counts(), vec![2, 5, 10, 12, 13]);
    assert!(q6.at_executors(100).is_none());
    // Fresh-executor samples are a subset of the first wave.
    for j in &jobs {
        for s in &j.stages {
            for w in s.waves.values() {
                assert!(w.fresh_s.len() <= w.first_wave_s.len());
            }
        }
    }
}

fn wf_files() -> Vec<PathBuf> {
    files_in("dag-wfcommons")
}

#[test]
fn wfcommons_all_nineteen() {
    let files = wf_files();
    assert_eq!(files.len(), 19);
    let mut total_tasks = 0;
    let mut total_edges = 0;
    let mut jobs: BTreeMap<String, DagJob> = BTreeMap::new();
    for f in &files {
        let (job, report) =
            read_wfcommons(f, &opts()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_clean(&report);
        assert_eq!(job.family, "wfcommons");
        assert_eq!(
            job.meta.get("schema_version").map(String::as_str),
            Some("1.5")
        );
        assert!(job
            .stages
            .iter()
            .all(|s| s.duration_s.is_some() && s.num_tasks == 1));
        // The recorded makespan is never shorter than the critical path.
        let cp = job.critical_path_s().unwrap();
        let mk = job.recorded_makespan_s.unwrap();
        assert!(cp <= mk, "{}: critical path {cp} > makespan {mk}", job.id);
        total_tasks += job.stages.len();
        total_edges += job.edges.len();
        jobs.insert(job.id.clone(), job);
    }
    assert_eq!(total_tasks, 1852);
    assert_eq!(total_edges, 3022);
    let m = &jobs["wfcommons-pegasus__montage__montage-chameleon-2mass-005d-001"];
    assert_eq!(
        (m.name.as_str(), m.stages.len(), m.edges.len()),
        ("montage", 58, 114)
    );
    assert_eq!(m.recorded_makespan_s, Some(1060.0));
    assert!(close(m.critical_path_s().unwrap(), 21.385, 1e-9));
    assert_eq!(
        m.meta.get("runtime_system").map(String::as_str),
        Some("Pegasus")
    );
    assert_eq!(m.stages[0].kind.as_deref(), Some("mProject"));
    assert_eq!(m.stages[0].duration_s, Some(16.712));
    let res = m.stages[0].resources.as_ref().unwrap();
    assert_eq!(res.memory_bytes, Some(14_800_000.0));
    assert_eq!(res.machines, ["mem"]);
    assert!(res.input_bytes.unwrap() >= 1_529_220.0);
    let b = &jobs["wfcommons-makeflow__blast__blast-chameleon-small-002"];
    assert_eq!(
        (b.stages.len(), b.edges.len(), b.recorded_makespan_s),
        (43, 120, Some(1001.4))
    );
    assert_eq!(
        b.stages[0].resources.as_ref().unwrap().read_bytes,
        Some(660_000.0)
    );
    // Plain (not gzipped) files read the same way.
    let s = &jobs["wfcommons-pegasus__srasearch__srasearch-chameleon-10a-004"];
    assert_eq!((s.stages.len(), s.recorded_makespan_s), (22, Some(5488.0)));
    let nf = &jobs["wfcommons-nextflow__hic-dirt02-001"];
    assert_eq!(nf.stages[0].kind.as_deref(), Some("SAMPLESHEET_CHECK"));
    assert_eq!(
        nf.meta.get("runtime_system").map(String::as_str),
        Some("Nextflow")
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn wfcommons_legacy_layouts() {
    let dir = tempfile::tempdir().unwrap();
    // Schema 1.3-style: tasks under workflow.tasks, parents by name, runtime, files, KB counts.
    let p = write(
        dir.path(),
        "old.json",
        r#"{"name": "old-wf", "schemaVersion": "1.3", "wms": {"name": "makeflow", "version": "1"},
            "workflow": {"makespan": 30.0, "executedAt": "2020-01-01T00:00:00Z",
              "tasks": [
                {"name": "prep_ID01", "type": "compute", "runtime": 5.0, "parents": [],
                 "files": [{"link": "input", "name": "a", "size": 100}, {"link": "output", "name": "b", "size": 40}],
                 "bytesRead": 2, "memory": 3},
                {"name": "work_ID02", "type": "compute", "runtime": 20.0, "parents": ["prep_ID01"]},
                {"name": "side_ID03", "type": "compute", "runtime": 1.0, "children": ["work_ID02"]}
              ]}}"#,
    );
    let (job, report) = read_wfcommons(&p, &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(job.name, "old-wf");
    assert_eq!(job.stages.len(), 3);
    assert_eq!(job.stages[1].parents, vec![0, 2]); // a child link counts as a parent link
    assert_eq!(job.edges, vec![(0, 1), (2, 1)]);
    assert_eq!(job.critical_path_s(), Some(25.0));
    assert_eq!(job.recorded_makespan_s, Some(30.0));
    assert_eq!(job.stages[0].kind.as_deref(), Some("prep"));
    let r = job.stages[0].resources.as_ref().unwrap();
    assert_eq!((r.read_bytes, r.memory_bytes), (Some(2000.0), Some(3000.0)));
    assert_eq!((r.input_bytes, r.output_bytes), (Some(100.0), Some(40.0)));
    assert_eq!(
        job.meta.get("runtime_system").map(String::as_str),
        Some("makeflow")
    );
    // Schema 1.0-style: workflow.jobs.
    let p = write(
        dir.path(),
        "older.json",
        r#"{"name": "w", "schemaVersion": "1.0", "workflow": {"makespan": 3,
            "jobs": [{"name": "x", "type": "compute", "runtime": 1}, {"name": "y", "runtime": 2, "parents": ["x"]}]}}"#,
    );
    let (job, _) = read_wfcommons(&p, &opts()).unwrap();
    assert_eq!(job.critical_path_s(), Some(3.0));
    assert_eq!(detect_format(&p).unwrap(), TraceFormat::WfCommons);
}

#[test]
fn wfcommons_broken_graphs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let wf = |tasks: &str, exec: &str| {
        format!(
            r#"{{"name": "w", "schemaVersion": "1.5", "workflow": {{"specification": {{"tasks": [{tasks}], "files": []}},
                "execution": {{"makespanInSeconds": 1, "executedAt": "x", "tasks": [{exec}]}}}}}}"#
        )
    };
    let t = |id: &str, parents: &str| {
        format!(
            r#"{{"id": "{id}", "name": "{id}", "parents": [{parents}], "children": [], "inputFiles": [], "outputFiles": []}}"#
        )
    };
    let ex = |id: &str, rt: &str| format!(r#"{{"id": "{id}", "runtimeInSeconds": {rt}}}"#);
    let cases = [
        (
            "cycle",
            wf(
                &[t("a", r#""c""#), t("b", r#""a""#), t("c", r#""b""#)].join(","),
                &ex("a", "1"),
            ),
            "on a dependency cycle",
        ),
        (
            "unknown parent",
            wf(&t("a", r#""ghost""#), &ex("a", "1")),
            "task `a` names an unknown parent `ghost`",
        ),
        (
            "duplicate",
            wf(&[t("a", ""), t("a", "")].join(","), ""),
            "task id `a` appears twice",
        ),
        (
            "negative runtime",
            wf(&t("a", ""), &ex("a", "-3")),
            "task `a`: `runtimeInSeconds`",
        ),
        (
            "no tasks",
            r#"{"workflow": {"specification": {}}}"#.to_string(),
            "specification.tasks",
        ),
        (
            "not wf",
            r#"{"something": 1}"#.to_string(),
            "no `workflow` object",
        ),
        (
            "truncated",
            wf(&t("a", ""), &ex("a", "1"))[..60].to_string(),
            "not valid JSON",
        ),
    ];
    for (name, text, expect) in cases {
        let p = write(
            dir.path(),
            &format!("{}.json", name.replace(' ', "_")),
            &text,
        );
        match read_wfcommons(&p, &opts()) {
            Err(e @ DatasetError::Format { .. }) => {
                assert!(e.to_string().contains(expect), "{name}: {e}")
            }
            other => panic!("{name}: expected a format error, got {other:?}"),
        }
    }
    // A spec task without an execution record keeps the graph, without a duration.
    let p = write(
        dir.path(),
        "noexec.json",
        &wf(&[t("a", ""), t("b", r#""a""#)].join(","), &ex("a", "2")),
    );
    let (job, report) = read_wfcommons(&p, &opts()).unwrap();
    assert_eq!(job.stages[1].duration_s, None);
    assert_eq!(job.critical_path_s(), None);
    assert!(report
        .notes
        .iter()
        .any(|n| n.contains("1 task(s) have no runtime")));
}

#[test]
fn tpch_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let dag = |adj: &str| {
        format!(
            r#"{{"adj": {adj}, "stage_id_to_node_idx": {{"0": 0, "1": 1}},
               "task_duration": {{"0": {{"first_wave": {{"2": [1000, 2000]}}, "rest_wave": {{"2": []}}, "fresh_durations": {{"2": []}}}},
                                  "1": {{"first_wave": {{"2": [500]}}, "rest_wave": {{"2": [500, 500]}}, "fresh_durations": {{"2": []}}}}}}}}"#
        )
    };
    let text = format!(
        r#"{{"2g": {{"q1": {ok}, "q2": {cyc}, "q3": {bad}}}}}"#,
        ok = dag("[[0, 1], [0, 0]]"),
        cyc = dag("[[0, 1], [1, 0]]"),
        bad = dag("[[0, 2], [0]]"),
    );
    let p = write(dir.path(), "tpch.json", &text);
    let (jobs, report) = read_tpch_dags(&p, &opts()).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        jobs[0].at_executors(2).unwrap().critical_path_s(),
        Some(2.0 + 0.5 + 1.0 / 2.0)
    );
    assert_eq!(
        (report.rows_read, report.rows_kept, report.rows_dropped()),
        (3, 1, 2)
    );
    assert_eq!(report.issues[0].field, "2g/q2/adj");
    assert!(
        report.issues[0].reason.contains("cycle"),
        "{}",
        report.issues[0]
    );
    assert_eq!(report.issues[1].field, "2g/q3/adj");
    assert!(matches!(
        read_tpch_dags(&p, &strict()),
        Err(DatasetError::StrictRow(_))
    ));
    // Truncated JSON, and a truncated gzip of the real file: errors, never panics.
    let p = write(dir.path(), "trunc.json", &text[..text.len() / 2]);
    assert!(matches!(
        read_tpch_dags(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
    let gz = std::fs::read(data("dag-tpch/tpch_dags.json.gz")).unwrap();
    let p = dir.path().join("trunc.json.gz");
    std::fs::write(&p, &gz[..gz.len() / 3]).unwrap();
    assert!(read_tpch_dags(&p, &opts()).is_err());
    let p = write(dir.path(), "list.json", "[1, 2]");
    assert!(matches!(
        read_tpch_dags(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Cluster descriptions.

#[test]
fn openb_nodes_real() {
    let (nodes, report) =
        read_openb_nodes(&data("openb/openb_node_list_gpu_node.csv"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(nodes.len(), 1213);
    assert_eq!(nodes.iter().map(|n| u64::from(n.gpus)).sum::<u64>(), 6212);
    assert_eq!(nodes.iter().map(|n| n.cpus).sum::<f64>(), 107_018.0);
    let mut models: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &nodes {
        *models
            .entry(n.gpu_model.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let expected: BTreeMap<&str, usize> = [
        ("A10", 2),
        ("G2", 549),
        ("G3", 39),
        ("P100", 134),
        ("T4", 404),
        ("V100M16", 55),
        ("V100M32", 30),
    ]
    .into_iter()
    .collect();
    assert_eq!(models, expected);
    assert_eq!(nodes[0].name, "openb-node-0000");
    assert_eq!(
        (nodes[0].cpus, nodes[0].memory_mib, nodes[0].gpus),
        (64.0, 262_144.0, 2)
    );
}

#[test]
fn gavel_throughputs_real() {
    for (file, p100, v100, zeros) in [
        (
            "gavel-throughputs/scheduler__physical_cluster_throughputs.json.gz",
            3.3087,
            4.853,
            4,
        ),
        (
            "gavel-throughputs/scheduler__simulation_throughputs.json.gz",
            3.2073,
            4.7913,
            3,
        ),
    ] {
        let (t, report) = read_gavel_throughputs(&data(file), &opts()).unwrap();
        assert_clean(&report);
        assert_eq!(t.isolated.len(), 492);
        assert_eq!(t.colocated.len(), 10_338);
        assert_eq!(report.rows_read, 492 + 10_338);
        assert_eq!(
            t.isolated
                .iter()
                .map(|x| x.colocated_pairs as usize)
                .sum::<usize>(),
            10_338
        );
        let gpus: BTreeSet<&str> = t.isolated.iter().map(|x| x.gpu.as_str()).collect();
        assert_eq!(
            gpus.into_iter().collect::<Vec<_>>(),
            [
                "k80",
                "k80_unconsolidated",
                "p100",
                "p100_unconsolidated",
                "v100",
                "v100_unconsolidated"
            ]
        );
        assert_eq!(
            t.isolated
                .iter()
                .map(|x| x.job_type.as_str())
                .collect::<BTreeSet<_>>()
                .len(),
            26
        );
        let scales: BTreeSet<u32> = t.isolated.iter().map(|x| x.scale_factor).collect();
        assert_eq!(scales.into_iter().collect::<Vec<_>>(), [1, 2, 4, 8]);
        assert_eq!(
            t.isolated.iter().filter(|x| x.steps_per_s == 0.0).count(),
            zeros
        );
        let speeds = relative_speeds(&t.isolated, "k80");
        assert_eq!(speeds["k80"], 1.0);
        assert!(close(speeds["p100"], p100, 1e-4), "{file}: {speeds:?}");
        assert!(close(speeds["v100"], v100, 1e-4), "{file}: {speeds:?}");
    }
    let (t, _) = read_gavel_throughputs(
        &data("gavel-throughputs/scheduler__simulation_throughputs.json.gz"),
        &opts(),
    )
    .unwrap();
    let r50 = t
        .isolated
        .iter()
        .find(|x| {
            x.gpu == "v100" && x.job_type == "ResNet-50 (batch size 64)" && x.scale_factor == 1
        })
        .unwrap();
    assert_eq!(r50.steps_per_s, 4.394774823323071);
}

#[test]
fn fault_trace_real_agrees_with_statistics() {
    let (eps, report) =
        read_fault_trace(&data("node-faults/fault_trace.json.gz"), &opts()).unwrap();
    assert_clean(&report);
    assert_eq!(report.rows_read, 1168);
    assert_eq!(eps.len(), 584);
    assert_eq!(
        eps.iter()
            .map(|e| e.node_id.as_str())
            .collect::<BTreeSet<_>>()
            .len(),
        231
    );
    assert!(eps.iter().all(|e| e.end_s >= e.start_s));
    assert_eq!(eps.iter().filter(|e| e.duration_s() == 0.0).count(), 14);
    assert!(close(eps[0].start_s, 3.8955 * 86_400.0, 1e-6));
    let last_end = eps.iter().map(|e| e.end_s).fold(0.0, f64::max);
    assert!(close(last_end, 348.9798 * 86_400.0, 1e-6));
    let down: f64 = eps.iter().map(|e| e.duration_s()).sum();
    assert!(close(down / 86_400.0, 3232.4438, 1e-3));
    let mut by_level: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_class: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for e in &eps {
        *by_level.entry(e.level.as_str()).or_default() += 1;
        *by_class
            .entry((e.level.as_str(), e.class.as_str()))
            .or_default() += 1;
    }
    assert_eq!(by_level["Hardware Failure"], 298);
    assert_eq!(by_level["Other Failure"], 262);
    assert_eq!(by_level["Software Failure"], 24);
    assert_eq!(by_class[&("Hardware Failure", "GPU")], 158);

    let (stats, report) =
        read_fault_statistics(&data("node-faults/fault_statistics.json"), &opts()).unwrap();
    assert_clean(&report);
    assert!(
        report.notes.is_empty(),
        "totals disagree: {:?}",
        report.notes
    );
    assert_eq!(stats.total(), 584);
    for l in &stats.levels {
        assert_eq!(l.total, by_level[l.level.as_str()], "{}", l.level);
        for c in &l.classes {
            assert_eq!(
                c.total,
                by_class[&(l.level.as_str(), c.class.as_str())],
                "{}/{}",
                l.level,
                c.class
            );
        }
    }
    let gpu = stats
        .levels
        .iter()
        .flat_map(|l| &l.classes)
        .find(|c| c.class == "GPU")
        .unwrap();
    assert_eq!(gpu.descs["GPU DBE(Double Bit ECC) > Threshold"], 60);
}

#[test]
fn fault_trace_unmatched_events_are_row_issues() {
    let dir = tempfile::tempdir().unwrap();
    let ev = |node: &str, t: f64, ty: &str, class: &str| {
        format!(
            r#"{{"node_id": "{node}", "event_time": {t}, "event_type": "{ty}",
                "fault_type": {{"Level": "Hardware Failure", "Class": "{class}", "Desc": "d"}}}}"#
        )
    };
    let text = format!(
        "[{}]",
        [
            ev("n1", 1.0, "fault_start", "GPU"),
            ev("n1", 1.5, "fault_start", "NIC"), // overlapping fault of another class
            ev("n1", 2.0, "fault_end", "GPU"),
            ev("n1", 2.5, "fault_end", "NIC"),
            ev("n2", 3.0, "fault_end", "GPU"), // end without start
            ev("n3", 4.0, "fault_start", "GPU"), // never ends
            r#"{"node_id": "n4", "event_time": "soon", "event_type": "fault_start"}"#.to_string(),
        ]
        .join(",")
    );
    let p = write(dir.path(), "faults.json", &text);
    let (eps, report) = read_fault_trace(&p, &opts()).unwrap();
    assert_eq!(eps.len(), 2);
    assert_eq!(
        (eps[0].class.as_str(), eps[0].start_s, eps[0].end_s),
        ("GPU", 86_400.0, 172_800.0)
    );
    assert_eq!(eps[1].class, "NIC");
    assert_eq!(
        (report.rows_read, report.rows_kept, report.rows_dropped()),
        (7, 4, 3)
    );
    let lines: BTreeSet<u64> = report.issues.iter().map(|i| i.line).collect();
    assert_eq!(lines.into_iter().collect::<Vec<_>>(), [5, 6, 7]);
    assert!(matches!(
        read_fault_trace(&p, &strict()),
        Err(DatasetError::StrictRow(_))
    ));
    let p = write(dir.path(), "trunc.json", &text[..100]);
    assert!(matches!(
        read_fault_trace(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
}

#[test]
fn cluster_summaries_real() {
    let (rows, report) = read_cluster_summary(
        &data(
            "cluster-summaries/analysis__1_compare_with_Philly_trace__helios_cluster_summary.csv",
        ),
        &opts(),
    )
    .unwrap();
    assert_clean(&report);
    assert_eq!(
        rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["Venus", "Earth", "Saturn", "Uranus", "total"]
    );
    assert!(rows.iter().all(|r| r.values.len() == 26));
    assert_eq!(rows[0].values["job_num"], 246_708.0);
    assert_eq!(rows[4].values["gpu_num"], 6220.0);

    let (rows, report) = read_cluster_summary(
        &data("cluster-summaries/data__cluster_summary.csv"),
        &opts(),
    )
    .unwrap();
    assert_clean(&report);
    let lens: Vec<(&str, usize)> = rows
        .iter()
        .map(|r| (r.id.as_str(), r.values.len()))
        .collect();
    assert_eq!(
        lens,
        [
            ("Seren", 27),
            ("Kalos", 27),
            ("Philly", 20),
            ("Helios", 27),
            ("PAI", 11)
        ]
    );
    assert_eq!(rows[2].values["job_num"], 112_956.0);
    assert!(!rows[4].values.contains_key("complete_rate_gpu")); // empty cell left out
}

#[test]
fn csv_readers_reject_wrong_headers() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "runs.csv", "run_id,submitter\n0,x\n");
    let e = read_mlperf_runs(&p, &opts()).unwrap_err();
    assert!(
        matches!(e, DatasetError::Format { .. }) && e.to_string().contains("benchmark"),
        "{e}"
    );
    let header = "run_id,submitter,system,benchmark,result_file,num_nodes,accelerators_per_node,accelerator_model,framework,global_batch_size,seed,run_start_ms,run_stop_ms,duration_s,run_status,n_eval_points,final_eval_accuracy";
    let p = write(
        dir.path(),
        "runs_bad.csv",
        &format!(
            "{header}\n0,S,sys,bert,r.txt,1,8,A100,\"a, b\",64,1,2000,1000,,success,3,0.7\n\
             1,S,sys,bert,r.txt,1,8,A100,x,64,1,1000,2000,1.0,finished,3,0.7\n\
             2,S,sys,bert,r.txt,1.5,8,A100,x,64,1,1000,2000,1.0,success,3,0.7\n\
             3,S,sys,bert,r.txt,1,8,N/A,x,64,1,1000,2000,1.0,abort,3,\n"
        ),
    );
    let (runs, report) = read_mlperf_runs(&p, &opts()).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (
            runs[0].status,
            runs[0].accelerator_model.as_deref(),
            runs[0].final_eval_accuracy
        ),
        (Some(RunStatus::Aborted), None, None)
    );
    let fields: Vec<&str> = report.issues.iter().map(|i| i.field.as_str()).collect();
    assert_eq!(fields, ["run_stop_ms", "run_status", "num_nodes"]);
    let p = write(dir.path(), "eval_curves.csv", "run,key,value\n");
    assert!(matches!(
        read_mlperf_curves(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
    let p = write(dir.path(), "nodes.csv", "name,cpus\nx,1\n");
    assert!(matches!(
        read_openb_nodes(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
    let p = write(dir.path(), "summary.csv", "cluster,job_num\nx,1\n");
    assert!(matches!(
        read_cluster_summary(&p, &opts()),
        Err(DatasetError::Format { .. })
    ));
    let p = dir.path().join("cifar10__placements-rtx.csv");
    std::fs::write(
        &p,
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,1,32,0.1,0.0\n",
    )
    .unwrap();
    let e = read_pollux_placements(&p, &opts()).unwrap_err();
    assert!(e.to_string().contains("placement"), "{e}");
    // Bad values are row issues with file, line and field.
    let p = write(
        dir.path(),
        "curves.csv",
        "run_id,key,value,epoch_num,samples_count,t_since_run_start_s\n1,eval_accuracy,0.5,1,,10\n1,eval_accuracy,high,2,,20\n",
    );
    let (c, report) = read_mlperf_curves(&p, &opts()).unwrap();
    assert_eq!(c[0].points.len(), 1);
    let i = &report.issues[0];
    assert_eq!(
        (i.file.as_str(), i.line, i.field.as_str(), i.value.as_str()),
        ("curves.csv", 3, "value", "high")
    );
    let p = write(
        dir.path(),
        "openb.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn0,1000,10,1.5,T4\nn1,1000,10,-1,T4\n",
    );
    let (n, report) = read_openb_nodes(&p, &opts()).unwrap();
    assert!(n.is_empty());
    assert_eq!(report.rows_dropped(), 2);
}

// ---------------------------------------------------------------------------------------------
// Format detection and summaries.

/// Every bundled non-job file (and MLPerf runs) with the format it must be detected as.
fn bundled_non_job_files() -> Vec<(PathBuf, TraceFormat)> {
    let mut out = vec![
        (data("mlperf-v1.0/runs.csv.gz"), TraceFormat::MlperfRuns),
        (
            data("mlperf-v1.0/eval_curves.csv.gz"),
            TraceFormat::MlperfCurves,
        ),
        (data("dag-tpch/tpch_dags.json.gz"), TraceFormat::TpchDags),
        (
            data("node-faults/fault_trace.json.gz"),
            TraceFormat::NodeFaults,
        ),
        (
            data("node-faults/fault_statistics.json"),
            TraceFormat::FaultStatistics,
        ),
        (
            data("openb/openb_node_list_gpu_node.csv"),
            TraceFormat::OpenbNodes,
        ),
    ];
    for f in files_in("dag-wfcommons") {
        out.push((f, TraceFormat::WfCommons));
    }
    for f in files_in("gavel-throughputs") {
        out.push((f, TraceFormat::GavelThroughputs));
    }
    for f in files_in("cluster-summaries") {
        out.push((f, TraceFormat::ClusterSummary));
    }
    for f in files_in("pollux-curves") {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let fmt = if name.contains("__validation") {
            TraceFormat::PolluxValidation
        } else if name.contains("__placements") {
            TraceFormat::PolluxPlacements
        } else {
            TraceFormat::PolluxScalability
        };
        out.push((f, fmt));
    }
    out
}

#[test]
fn detect_format_on_every_bundled_non_job_file() {
    let files = bundled_non_job_files();
    assert_eq!(files.len(), 6 + 19 + 2 + 2 + 134);
    let mut wrong = Vec::new();
    for (path, expected) in &files {
        match detect_format(path) {
            Ok(f) if f == *expected => {}
            other => wrong.push(format!(
                "{}: expected {expected}, got {other:?}",
                path.display()
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} misdetected:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn summaries_of_every_bundled_non_job_file() {
    assert!(data_dir().is_ok());
    for (path, format) in bundled_non_job_files() {
        let s = summarize_file(&path, format, &opts())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(s.format, format);
        assert_clean(&s.report);
        assert!(s.report.rows_read > 0, "{}", path.display());
        assert!(s.facts.len() >= 3, "{}: {:?}", path.display(), s.facts);
    }
    let fact = |rel: &str, format: TraceFormat, name: &str| -> String {
        let s = summarize_file(&data(rel), format, &opts()).unwrap();
        s.facts
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no fact {name}: {:?}", s.facts))
    };
    assert_eq!(
        fact("mlperf-v1.0/runs.csv.gz", TraceFormat::MlperfRuns, "runs"),
        "1239"
    );
    assert_eq!(
        fact(
            "mlperf-v1.0/eval_curves.csv.gz",
            TraceFormat::MlperfCurves,
            "points"
        ),
        "54988"
    );
    assert_eq!(
        fact("dag-tpch/tpch_dags.json.gz", TraceFormat::TpchDags, "DAGs"),
        "154"
    );
    assert_eq!(
        fact(
            "node-faults/fault_trace.json.gz",
            TraceFormat::NodeFaults,
            "fault episodes"
        ),
        "584"
    );
    assert_eq!(
        fact(
            "node-faults/fault_statistics.json",
            TraceFormat::FaultStatistics,
            "faults"
        ),
        "584"
    );
    assert_eq!(
        fact(
            "openb/openb_node_list_gpu_node.csv",
            TraceFormat::OpenbNodes,
            "GPUs"
        ),
        "6212"
    );
    assert_eq!(
        fact(
            "gavel-throughputs/scheduler__simulation_throughputs.json.gz",
            TraceFormat::GavelThroughputs,
            "co-located pairs"
        ),
        "10338"
    );
    // Job traces other than MLPerf runs are not summarised here.
    assert!(summarize_file(&data("philly/philly.csv.gz"), TraceFormat::Philly, &opts()).is_err());
}
