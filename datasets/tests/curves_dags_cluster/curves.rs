//! Training-curve readers on the bundled files: MLPerf runs and eval curves, Pollux / Sia
//! profiles.

use std::collections::{BTreeMap, BTreeSet};

use augur_datasets::curves::{
    read_mlperf_curves, read_mlperf_runs, read_pollux_dir, read_pollux_placements,
    read_pollux_validation, PolluxFileKind, RunStatus,
};
use augur_datasets::DatasetError;

use crate::{assert_clean, close, data, opts, strict};

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
