//! The job-trace readers for openb, MLPerf runs, the Philly job log, Helios and PAI: each on
//! its fixture or bundled file, with exact values, malformed-row reports, strict mode and
//! format detection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use augur_datasets::bundled::bundled_file;
use augur_datasets::{
    detect_format, load_jobs, read_jobs, DatasetError, JobRecord, JobStatus, ReadOptions,
    ReadReport, TimeOrigin, TraceFormat,
};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read_all(path: &Path, format: TraceFormat) -> (Vec<JobRecord>, ReadReport) {
    let mut rows = Vec::new();
    let report = read_jobs(path, Some(format), &ReadOptions::default(), &mut |r| {
        rows.push(r)
    })
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if format != TraceFormat::PaiJobs {
        // PAI's report also counts the task-table rows it joined.
        assert_eq!(report.rows_kept as usize, rows.len());
    }
    assert_eq!(
        report.rows_read,
        report.rows_kept + report.rows_dropped(),
        "every row read is kept or dropped"
    );
    (rows, report)
}

fn strict_error(path: &Path, format: TraceFormat) -> augur_datasets::RowIssue {
    let opts = ReadOptions {
        strict: true,
        ..Default::default()
    };
    let mut kept = 0usize;
    match read_jobs(path, Some(format), &opts, &mut |_| kept += 1) {
        Err(DatasetError::StrictRow(issue)) => issue,
        other => panic!("expected a strict-mode row error, got {other:?}"),
    }
}

fn job<'a>(rows: &'a [JobRecord], id: &str) -> &'a JobRecord {
    rows.iter()
        .find(|r| r.job_id == id)
        .unwrap_or_else(|| panic!("job {id} not kept"))
}

fn status_counts(rows: &[JobRecord]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r.status.as_str()).or_insert(0) += 1;
    }
    m
}

/// `(file, line, field, reason)` of every detailed issue.
fn issues(report: &ReadReport) -> Vec<(String, u64, String, String)> {
    report
        .issues
        .iter()
        .map(|i| (i.file.clone(), i.line, i.field.clone(), i.reason.clone()))
        .collect()
}

fn owned(v: &[(&str, u64, &str, &str)]) -> Vec<(String, u64, String, String)> {
    v.iter()
        .map(|(f, l, fi, r)| (f.to_string(), *l, fi.to_string(), r.to_string()))
        .collect()
}

fn has_note(report: &ReadReport, needle: &str) -> bool {
    report.notes.iter().any(|n| n.contains(needle))
}

// ---------------------------------------------------------------- openb (real, bundled)

#[test]
fn openb_bundled_pod_list_reads_every_pod() {
    let path = bundled_file("openb/openb_pod_list_default.csv.gz").unwrap();
    let (rows, report) = read_all(&path, TraceFormat::OpenbPods);
    // Counted independently with python3's csv module.
    assert_eq!(report.rows_read, 8152);
    assert_eq!(report.rows_kept, 8152);
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.dropped_by_reason);
    assert_eq!(report.time_origin, TimeOrigin::Relative);
    let counts = status_counts(&rows);
    assert_eq!(counts.get("completed"), Some(&192)); // Succeeded
    assert_eq!(counts.get("failed"), Some(&1870)); // Failed
    assert_eq!(counts.get("unknown"), Some(&(5193 + 897))); // Running + Pending
    assert_eq!(counts.get("killed"), None);
    // The 897 Pending pods were never scheduled: no start, no wait, no duration.
    assert_eq!(rows.iter().filter(|r| r.start_time.is_none()).count(), 897);
    assert!(rows
        .iter()
        .filter(|r| r.start_time.is_none())
        .all(|r| r.duration.is_none() && r.queue_wait.is_none() && r.end_time.is_some()));
    // GPU-sharing pods have fractional GPUs; the total matches Σ num_gpu × gpu_milli / 1000.
    let total: f64 = rows.iter().filter_map(|r| r.num_gpus).sum();
    assert!((total - 6086.8).abs() < 1e-6, "{total}");
    assert_eq!(
        rows.iter()
            .filter(|r| r.num_gpus.is_some_and(|g| g > 0.0 && g < 1.0))
            .count(),
        3078
    );
    // gpu_spec is empty throughout the default list.
    assert!(rows.iter().all(|r| r.gpu_type.is_none()));
    assert!(rows.iter().all(|r| r.source == "openb"));

    let p = job(&rows, "openb-pod-0001");
    assert_eq!(p.submit_time, 427061.0);
    assert_eq!(p.start_time, Some(427061.0));
    assert_eq!(p.queue_wait, Some(0.0));
    assert_eq!(p.end_time, Some(12902960.0));
    assert_eq!(p.duration, Some(12902960.0 - 427061.0));
    assert_eq!(p.num_gpus, Some(0.46));
    assert_eq!(p.cpus, Some(6.0));
    assert_eq!(p.memory_mib, Some(12288.0));
    assert_eq!(p.queue.as_deref(), Some("LS"));
    assert_eq!(p.status, JobStatus::Unknown);

    let f = job(&rows, "openb-pod-8150");
    assert_eq!(f.status, JobStatus::Failed);
    assert_eq!(f.duration, Some(21.0));
    assert_eq!(f.cpus, Some(3.152));
    assert_eq!(f.queue.as_deref(), Some("BE"));

    let pending = job(&rows, "openb-pod-0061");
    assert_eq!(pending.start_time, None);
    assert_eq!(pending.end_time, Some(10001403.0));

    // 34 Running pods end at the file's last deletion time: flagged as probably cut by the trace end.
    assert!(
        has_note(
            &report,
            "34 Running pod(s) have the file's last deletion_time (12902960)"
        ),
        "{:?}",
        report.notes
    );
}

#[test]
fn openb_malformed_and_out_of_order_rows_are_dropped_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openb_pod_list_mini.csv");
    std::fs::write(
        &path,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p-ok,4000,8192,1,500,V100M16|V100M32,LS,Succeeded,100,400,150\n\
         p-sched-early,4000,8192,1,500,,LS,Running,100,400,50\n\
         p-del-early,4000,8192,1,500,,BE,Failed,100,120,150\n\
         p-bad-cpu,four,8192,1,500,,BE,Failed,100,400,150\n\
         p-milli,4000,8192,1,1500,,BE,Failed,100,400,150\n\
         p-pending,2000,1024,2,1000,nan,BE,Pending,100,300,\n\
         p-odd-phase,2000,1024,0,0,,BE,Evicted,100,300,100\n",
    )
    .unwrap();
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::OpenbPods);
    let (rows, report) = read_all(&path, TraceFormat::OpenbPods);
    assert_eq!((report.rows_read, report.rows_kept), (7, 3));
    assert_eq!(
        issues(&report),
        owned(&[
            (
                "openb_pod_list_mini.csv",
                3,
                "scheduled_time",
                "before creation_time"
            ),
            (
                "openb_pod_list_mini.csv",
                4,
                "deletion_time",
                "before scheduled_time"
            ),
            ("openb_pod_list_mini.csv", 5, "cpu_milli", "not a number"),
            (
                "openb_pod_list_mini.csv",
                6,
                "gpu_milli",
                "above 1000 (more than one whole GPU per GPU)"
            ),
        ])
    );
    let ok = job(&rows, "p-ok");
    assert_eq!(ok.gpu_type.as_deref(), Some("V100M16|V100M32"));
    assert_eq!(ok.num_gpus, Some(0.5));
    assert_eq!((ok.queue_wait, ok.duration), (Some(50.0), Some(250.0)));
    assert_eq!(ok.status, JobStatus::Completed);
    let pending = job(&rows, "p-pending");
    assert_eq!(pending.num_gpus, Some(2.0));
    assert_eq!(pending.gpu_type, None, "`nan` is no constraint");
    assert_eq!(pending.start_time, None);
    assert_eq!(job(&rows, "p-odd-phase").status, JobStatus::Unknown);
    assert!(has_note(&report, "\"Evicted\": 1"), "{:?}", report.notes);

    let issue = strict_error(&path, TraceFormat::OpenbPods);
    assert_eq!((issue.line, issue.field.as_str()), (3, "scheduled_time"));
}

// ---------------------------------------------------------------- MLPerf runs (real, bundled)

#[test]
fn mlperf_bundled_runs_read_as_jobs() {
    let path = bundled_file("mlperf-v1.0/runs.csv.gz").unwrap();
    let (rows, report) = read_all(&path, TraceFormat::MlperfRuns);
    // Counted independently with python3's csv module (the framework column has quoted commas).
    assert_eq!(report.rows_read, 1239);
    assert_eq!(report.rows_kept, 1239);
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.dropped_by_reason);
    assert_eq!(report.time_origin, TimeOrigin::Unix);
    let counts = status_counts(&rows);
    assert_eq!(counts.get("completed"), Some(&1214)); // success
    assert_eq!(counts.get("failed"), Some(&24)); // aborted 18 + abort 4 + fail 2
    assert_eq!(counts.get("unknown"), Some(&1)); // run 1118: no run_stop in its log
    assert!(rows.iter().all(|r| r.queue_wait.is_none()));
    assert!(rows.iter().all(|r| Some(r.submit_time) == r.start_time));
    let total: f64 = rows.iter().filter_map(|r| r.num_gpus).sum();
    assert_eq!(total, 209038.0);

    let r0 = job(&rows, "0");
    assert_eq!(r0.submit_time, 1621375311.658);
    assert_eq!(r0.end_time, Some(1621376570.898));
    assert_eq!(r0.duration, Some(1259.24));
    assert_eq!(r0.num_nodes, Some(2.0));
    assert_eq!(r0.num_gpus, Some(16.0));
    assert_eq!(r0.gpu_type.as_deref(), Some("NVIDIA A100-PCIE-40GB (250W)"));
    assert_eq!(r0.user.as_deref(), Some("Dell"));
    assert_eq!(r0.group.as_deref(), Some("2xDSS8440x8A100-PCIE-40GB"));
    assert_eq!(r0.job_name.as_deref(), Some("resnet"));
    assert_eq!(r0.status, JobStatus::Completed);

    let unfinished = job(&rows, "1118");
    assert_eq!((unfinished.end_time, unfinished.duration), (None, None));
    assert_eq!(unfinished.status, JobStatus::Unknown);
    assert_eq!(unfinished.start_time, Some(1621353293.14));

    let cpu_run = job(&rows, "437"); // Intel CPU-only run, accelerator_model N/A
    assert_eq!(cpu_run.num_gpus, Some(0.0));
    assert_eq!(cpu_run.gpu_type, None);
    assert_eq!(cpu_run.status, JobStatus::Failed);
    assert_eq!(job(&rows, "167").status, JobStatus::Failed); // "abort"
}

#[test]
fn mlperf_malformed_runs_are_dropped_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.csv");
    let header = "run_id,submitter,system,benchmark,result_file,num_nodes,accelerators_per_node,accelerator_model,framework,global_batch_size,seed,run_start_ms,run_stop_ms,duration_s,run_status,n_eval_points,final_eval_accuracy";
    std::fs::write(
        &path,
        format!(
            "{header}\n\
             7,Acme,box8,bert,result_0.txt,1,8,GPU-X,\"fw 1 , fw 2\",64,1,1000000,1500000,500,success,3,0.7\n\
             8,Acme,box8,bert,result_1.txt,1,8,GPU-X,\"fw\",64,1,2000000,1000000,-1000,success,3,0.7\n\
             9,Acme,box8,bert,result_2.txt,one,8,GPU-X,\"fw\",64,1,2000000,2100000,100,aborted,3,\n\
             10,Acme,box8,bert,result_3.txt,1,8,GPU-X,\"fw\",64,1,,2100000,100,success,3,\n\
             11,Acme,box8,bert,result_4.txt,2,4,GPU-X,\"fw\",64,1,3000000,3250000,,timeout,3,\n"
        ),
    )
    .unwrap();
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::MlperfRuns);
    let (rows, report) = read_all(&path, TraceFormat::MlperfRuns);
    assert_eq!((report.rows_read, report.rows_kept), (5, 2));
    assert_eq!(
        issues(&report),
        owned(&[
            ("runs.csv", 3, "run_stop_ms", "before run_start_ms"),
            ("runs.csv", 4, "num_nodes", "not a number"),
            ("runs.csv", 5, "run_start_ms", "missing"),
        ])
    );
    let r = job(&rows, "7");
    assert_eq!(
        (r.submit_time, r.end_time, r.duration),
        (1000.0, Some(1500.0), Some(500.0))
    );
    let r = job(&rows, "11");
    assert_eq!(
        r.duration,
        Some(250.0),
        "derived from stop − start when duration_s is empty"
    );
    assert_eq!(r.num_gpus, Some(8.0));
    assert_eq!(r.status, JobStatus::Unknown);
    assert!(has_note(&report, "\"timeout\": 1"), "{:?}", report.notes);

    let issue = strict_error(&path, TraceFormat::MlperfRuns);
    assert_eq!((issue.line, issue.field.as_str()), (3, "run_stop_ms"));
}

// ---------------------------------------------------------------- Philly cluster_job_log

#[test]
fn philly_job_log_fixture() {
    let path = fixture("philly_cluster_job_log.json");
    let (rows, report) = read_all(&path, TraceFormat::PhillyJobLog);
    assert_eq!((report.rows_read, report.rows_kept), (9, 5));
    assert_eq!(report.time_origin, TimeOrigin::Unix);
    let f = "philly_cluster_job_log.json";
    assert_eq!(
        issues(&report),
        owned(&[
            (f, 4, "submitted_time", "not a YYYY-MM-DD HH:MM:SS time"),
            (f, 6, "attempts", "not a list"),
            (f, 7, "jobid", "missing"),
            (f, 9, "attempts[0].start_time", "before submitted_time"),
        ])
    );
    assert_eq!(report.issues[0].value, "2017-13-45 99:00:00");

    // Two attempts: start of the first, end of the last, GPUs of the first (8, not 4).
    let a = job(&rows, "application_1500000000000_0001");
    assert_eq!(a.submit_time, 1506852000.0);
    assert_eq!(a.start_time, Some(1506852030.0));
    assert_eq!(a.queue_wait, Some(30.0));
    assert_eq!(a.end_time, Some(1506859200.0));
    assert_eq!(a.duration, Some(1506859200.0 - 1506852030.0));
    assert_eq!((a.num_gpus, a.num_nodes), (Some(8.0), Some(1.0)));
    assert_eq!(a.user.as_deref(), Some("u0001a"));
    assert_eq!(a.group.as_deref(), Some("a1b2c3"));
    assert_eq!(a.status, JobStatus::Completed);

    let b = job(&rows, "application_1500000000000_0002");
    assert_eq!(b.submit_time, 1506855600.0);
    assert_eq!((b.start_time, b.end_time, b.num_gpus), (None, None, None));
    assert_eq!(b.status, JobStatus::Killed);

    let c = job(&rows, "application_1500000000000_0003");
    assert_eq!((c.num_gpus, c.num_nodes), (Some(8.0), Some(2.0)));
    assert_eq!((c.queue_wait, c.duration), (Some(60.0), Some(1800.0)));
    assert_eq!(c.status, JobStatus::Failed);

    // Last attempt without end: still running at the snapshot, whatever `status` says.
    let d = job(&rows, "application_1500000000000_0005");
    assert_eq!(d.start_time, Some(1513810800.0));
    assert_eq!(d.queue_wait, Some(60.0));
    assert_eq!((d.end_time, d.duration), (None, None));
    assert_eq!(d.status, JobStatus::Unknown);
    assert_eq!(d.num_gpus, Some(1.0));

    // First attempt without start: no start, wait or duration, but the end is known.
    let e = job(&rows, "application_1500000000000_0008");
    assert_eq!((e.start_time, e.queue_wait, e.duration), (None, None, None));
    assert_eq!(e.end_time, Some(1507111200.0));
    assert_eq!(e.num_gpus, Some(2.0));

    assert!(
        has_note(&report, "1 job(s) were still running"),
        "{:?}",
        report.notes
    );
    assert!(
        has_note(&report, "1 job(s) have no recorded attempt"),
        "{:?}",
        report.notes
    );

    let issue = strict_error(&path, TraceFormat::PhillyJobLog);
    assert_eq!(issue.line, 4);
    assert_eq!(issue.field, "submitted_time");
}

#[test]
fn philly_job_log_broken_json_keeps_the_jobs_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster_job_log");
    std::fs::write(
        &path,
        r#"[{"status": "Pass", "vc": "v", "jobid": "j1", "attempts": [], "submitted_time": "2017-10-01 10:00:00", "user": "u"},
            {"status": "Pass", "vc": "v", "jobid": "j2", "attempts": [], "submitted_time": "2017-10-01 10:00:01", "user": "u"},
            {"status": "Pass", "vc": "v", "jobid": "j3", "attempts": [{"start_time": "2017-10"#,
    )
    .unwrap();
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::PhillyJobLog);
    let (rows, report) = read_all(&path, TraceFormat::PhillyJobLog);
    assert_eq!(rows.len(), 2);
    assert_eq!(report.rows_read, 3);
    assert_eq!(report.issues.len(), 1);
    assert_eq!(report.issues[0].line, 3);
    assert_eq!(report.issues[0].field, "job");
    assert_eq!(
        report.issues[0].reason,
        "unreadable JSON (stopped reading the file here)"
    );

    // Content after the array is one more issue; the jobs in the array are kept.
    std::fs::write(
        &path,
        r#"[{"status": "Pass", "jobid": "j1", "attempts": [], "submitted_time": "2017-10-01 10:00:00"}] trailing"#,
    )
    .unwrap();
    let (rows, report) = read_all(&path, TraceFormat::PhillyJobLog);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        issues(&report),
        owned(&[("cluster_job_log", 2, "file", "content after the job array")])
    );

    // A JSON document that is not an array is not a job log at all.
    std::fs::write(
        &path,
        r#"{"jobid": "j1", "submitted_time": "2017-10-01 10:00:00"}"#,
    )
    .unwrap();
    let err = read_jobs(
        &path,
        Some(TraceFormat::PhillyJobLog),
        &ReadOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, DatasetError::Format { .. }), "{err}");
}

// ---------------------------------------------------------------- Helios cluster_log.csv

#[test]
fn helios_fixture() {
    let path = fixture("helios/Venus/cluster_log.csv");
    let (rows, report) = read_all(&path, TraceFormat::Helios);
    assert_eq!((report.rows_read, report.rows_kept), (11, 8));
    assert_eq!(report.time_origin, TimeOrigin::Unix);
    assert_eq!(
        issues(&report),
        owned(&[
            ("cluster_log.csv", 7, "gpu_num", "not a number"),
            (
                "cluster_log.csv",
                8,
                "submit_time",
                "not a YYYY-MM-DD HH:MM:SS time"
            ),
            ("cluster_log.csv", 10, "end_time", "before start_time"),
        ])
    );

    let a = job(&rows, "2001");
    assert_eq!(a.submit_time, 1593590400.0);
    assert_eq!(a.start_time, Some(1593590700.0));
    assert_eq!(a.end_time, Some(1593597900.0));
    assert_eq!((a.duration, a.queue_wait), (Some(7200.0), Some(300.0)));
    assert_eq!(
        (a.num_gpus, a.cpus, a.num_nodes),
        (Some(8.0), Some(32.0), Some(1.0))
    );
    assert_eq!(a.user.as_deref(), Some("uAb12"));
    assert_eq!(a.group.as_deref(), Some("vcX01"));
    assert_eq!(a.cluster.as_deref(), Some("Venus"));
    assert_eq!(
        a.queue, None,
        "Helios `queue` is a wait time, not a queue name"
    );
    assert_eq!(a.status, JobStatus::Completed);

    let status = |id: &str| job(&rows, id).status;
    assert_eq!(status("2002"), JobStatus::Failed);
    assert_eq!(status("2003"), JobStatus::Killed); // "CANCELLED by 1001"
    assert_eq!(status("2004"), JobStatus::Killed); // TIMEOUT
    assert_eq!(status("2005"), JobStatus::Failed); // NODE_FAIL
    assert_eq!(status("2010"), JobStatus::Unknown); // RUNNING
    assert_eq!(status("2011"), JobStatus::Unknown); // unrecognised
    assert!(has_note(&report, "\"REVIVED\": 1"), "{:?}", report.notes);

    // Cancelled in the queue: no start, so no wait or duration; the end is kept.
    let q = job(&rows, "2008");
    assert_eq!((q.start_time, q.queue_wait, q.duration), (None, None, None));
    assert_eq!(q.end_time, Some(1593595800.0));
    assert_eq!(q.status, JobStatus::Killed);

    let r = job(&rows, "2010");
    assert_eq!(r.start_time, Some(1593595860.0));
    assert_eq!((r.end_time, r.duration), (None, None));

    let issue = strict_error(&path, TraceFormat::Helios);
    assert_eq!((issue.line, issue.field.as_str()), (7, "gpu_num"));

    // Outside a folder named after a Helios cluster, the cluster is unknown.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("cluster_log.csv");
    std::fs::copy(&path, &copy).unwrap();
    let (rows, _) = read_all(&copy, TraceFormat::Helios);
    assert!(rows.iter().all(|r| r.cluster.is_none()));
}

// ---------------------------------------------------------------- PAI job + task tables

#[test]
fn pai_fixture_joins_the_task_table() {
    let path = fixture("pai/pai_job_table.csv");
    let (rows, report) = read_all(&path, TraceFormat::PaiJobs);
    // 8 job rows (6 kept) + 10 task rows (8 kept).
    assert_eq!((report.rows_read, report.rows_kept), (18, 14));
    assert_eq!(rows.len(), 6);
    assert_eq!(report.time_origin, TimeOrigin::Relative);
    assert!(
        report.files[0].ends_with("pai_job_table.csv"),
        "{:?}",
        report.files
    );
    assert!(
        report.files[1].ends_with("pai_task_table.csv"),
        "{:?}",
        report.files
    );
    assert_eq!(
        issues(&report),
        owned(&[
            ("pai_task_table.csv", 6, "plan_cpu", "not a number"),
            ("pai_task_table.csv", 10, "job_name", "missing"),
            ("pai_job_table.csv", 5, "start_time", "not a number"),
            (
                "pai_job_table.csv",
                6,
                "end_time",
                "before start_time (the submission)"
            ),
        ])
    );

    let a = job(&rows, "inst0001");
    assert_eq!(a.job_name.as_deref(), Some("j1a2b3c4"));
    assert_eq!(a.submit_time, 1000.0);
    assert_eq!(a.start_time, Some(1050.0)); // earliest task start
    assert_eq!(a.queue_wait, Some(50.0));
    assert_eq!(a.end_time, Some(5000.0));
    assert_eq!(a.duration, Some(3950.0));
    assert_eq!(a.num_gpus, Some(1.0)); // 2 × 50% + 1 × 0%
    assert_eq!(a.cpus, Some(16.0)); // (2 × 600 + 400) / 100
    assert_eq!(a.memory_mib, Some((2.0 * 29.296875 + 10.0) * 1024.0));
    assert_eq!(a.gpu_type.as_deref(), Some("T4"));
    assert_eq!(a.user.as_deref(), Some("usrA"));
    assert_eq!(a.status, JobStatus::Completed);

    let b = job(&rows, "inst0002");
    assert_eq!(b.status, JobStatus::Failed);
    assert_eq!(
        (b.num_gpus, b.gpu_type.as_deref()),
        (Some(1.0), Some("V100"))
    );

    // Running: a task start of 0 is "not recorded"; GPU type of the biggest GPU task.
    let c = job(&rows, "inst0003");
    assert_eq!(c.status, JobStatus::Unknown);
    assert_eq!(c.start_time, Some(3100.0));
    assert_eq!((c.end_time, c.duration), (None, None));
    assert_eq!(c.num_gpus, Some(4.25));
    assert_eq!(c.cpus, Some(18.0));
    assert_eq!(c.memory_mib, Some(36.0 * 1024.0));
    assert_eq!(c.gpu_type.as_deref(), Some("V100M32"));

    // Waiting, no task rows: no start or requests.
    let d = job(&rows, "inst0004");
    assert_eq!(d.status, JobStatus::Unknown);
    assert_eq!((d.start_time, d.num_gpus, d.cpus), (None, None, None));

    // No inst_id: the job name is the id. Its task row was malformed: task-derived fields null.
    let e = job(&rows, "j7a8b9c0");
    assert_eq!(
        (e.start_time, e.num_gpus, e.gpu_type.as_deref()),
        (None, None, None)
    );
    assert_eq!(e.end_time, Some(4200.0));

    // A task without plan_gpu contributes nothing; no task asks for GPUs → no GPU type.
    let f = job(&rows, "inst0008");
    assert_eq!(
        (f.num_gpus, f.cpus, f.memory_mib),
        (Some(0.0), Some(3.0), Some(6144.0))
    );
    assert_eq!(f.gpu_type, None);
    assert_eq!(f.start_time, Some(5050.0));

    for needle in [
        "1 job name(s) in the task table are not in the job table",
        "1 job(s) have no task rows",
        "1 job(s) had a malformed task row",
        "1 job(s) have tasks with an empty plan_gpu",
        "1 job(s) have no inst_id",
    ] {
        assert!(has_note(&report, needle), "{needle}: {:?}", report.notes);
    }

    // Strict mode stops at the first malformed row, which is in the task table (read first).
    let issue = strict_error(&path, TraceFormat::PaiJobs);
    assert_eq!(issue.file, "pai_task_table.csv");
    assert_eq!((issue.line, issue.field.as_str()), (6, "plan_cpu"));
}

#[test]
fn pai_with_header_and_without_task_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pai_job_table.csv");
    std::fs::write(
        &path,
        "job_name,inst_id,user,status,start_time,end_time\n\
         ja,ia,ua,Terminated,10,70\n\
         jb,ib,ub,Failed,20,oops\n",
    )
    .unwrap();
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::PaiJobs);
    let (rows, report) = read_all(&path, TraceFormat::PaiJobs);
    assert_eq!((report.rows_read, report.rows_kept), (2, 1));
    assert_eq!(
        issues(&report),
        owned(&[("pai_job_table.csv", 3, "end_time", "not a number")])
    );
    let a = job(&rows, "ia");
    assert_eq!((a.submit_time, a.end_time), (10.0, Some(70.0)));
    assert_eq!((a.start_time, a.duration, a.num_gpus), (None, None, None));
    assert!(
        has_note(&report, "no pai_task_table.csv"),
        "{:?}",
        report.notes
    );

    // A task table with a header row is read too.
    std::fs::write(
        dir.path().join("pai_task_table.csv"),
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n\
         ja,worker,8,Terminated,15,70,100,2,100,V100\n",
    )
    .unwrap();
    let (rows, _) = read_all(&path, TraceFormat::PaiJobs);
    let a = job(&rows, "ia");
    assert_eq!(
        (a.start_time, a.queue_wait, a.duration),
        (Some(15.0), Some(5.0), Some(55.0))
    );
    assert_eq!(
        (a.num_gpus, a.cpus, a.memory_mib),
        (Some(8.0), Some(8.0), Some(16.0 * 1024.0))
    );
}

// ---------------------------------------------------------------- detection and tables

#[test]
fn formats_are_detected_for_fixtures_and_bundled_files() {
    let cases = [
        (
            fixture("philly_cluster_job_log.json"),
            TraceFormat::PhillyJobLog,
        ),
        (fixture("helios/Venus/cluster_log.csv"), TraceFormat::Helios),
        (fixture("pai/pai_job_table.csv"), TraceFormat::PaiJobs),
        (
            bundled_file("openb/openb_pod_list_default.csv.gz").unwrap(),
            TraceFormat::OpenbPods,
        ),
        (
            bundled_file("mlperf-v1.0/runs.csv.gz").unwrap(),
            TraceFormat::MlperfRuns,
        ),
    ];
    for (path, want) in cases {
        assert_eq!(detect_format(&path).unwrap(), want, "{}", path.display());
    }
}

#[test]
fn readers_build_job_tables_with_their_time_origin() {
    for (path, origin) in [
        (fixture("philly_cluster_job_log.json"), TimeOrigin::Unix),
        (fixture("helios/Venus/cluster_log.csv"), TimeOrigin::Unix),
        (fixture("pai/pai_job_table.csv"), TimeOrigin::Relative),
    ] {
        let (table, report) = load_jobs(&path, None, &ReadOptions::default()).unwrap();
        assert_eq!(table.time_origin(), origin, "{}", path.display());
        assert!(!table.is_empty());
        assert!(!report.notes.is_empty());
        let back = table.to_records().unwrap();
        assert_eq!(back.len(), table.len());
    }
}
