//! DAG readers on the bundled files (TPC-H, WfCommons), the graph algorithms, and bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use augur_datasets::dag::{
    critical_path, read_tpch_dags, read_wfcommons, topological_order, DagJob, DagShapeError,
};
use augur_datasets::{detect_format, DatasetError, TraceFormat};

use crate::{assert_clean, close, data, files_in, opts, strict, write};

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
