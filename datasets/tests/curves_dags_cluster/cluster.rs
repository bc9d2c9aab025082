//! Cluster-description readers on the bundled files (openb nodes, Gavel throughputs, node
//! faults and their statistics, cluster summaries), and CSV headers they refuse.

use std::collections::{BTreeMap, BTreeSet};

use augur_datasets::cluster::{
    read_cluster_summary, read_fault_statistics, read_fault_trace, read_gavel_throughputs,
    read_openb_nodes, relative_speeds,
};
use augur_datasets::curves::{
    read_mlperf_curves, read_mlperf_runs, read_pollux_placements, RunStatus,
};
use augur_datasets::DatasetError;

use crate::{assert_clean, close, data, opts, strict, write};

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
