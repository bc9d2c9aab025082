//! The `sacct --parsable2` reader on real captures from a single-node Slurm
//! (`fixtures/sacct/real-*.txt`, see the README there) and on hand-written edge cases: job
//! counts, skipped steps, array and heterogeneous jobs, states, time limits, waits, TRES,
//! time zones, malformed rows and format detection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use augur_datasets::{
    detect_format, load_jobs, read_jobs, DatasetError, JobRecord, JobStatus, ReadOptions,
    ReadReport, TimeOrigin, TraceFormat, TraceZone,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sacct")
        .join(name)
}

fn read_with(path: &Path, opts: &ReadOptions) -> (Vec<JobRecord>, ReadReport) {
    let mut rows = Vec::new();
    let report = read_jobs(path, Some(TraceFormat::Sacct), opts, &mut |r| rows.push(r))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        report.rows_read,
        report.rows_kept + report.rows_dropped(),
        "every row read is kept or dropped"
    );
    assert_eq!(report.time_origin, TimeOrigin::Unix);
    (rows, report)
}

fn read(name: &str) -> (Vec<JobRecord>, ReadReport) {
    read_with(&fixture(name), &ReadOptions::default())
}

fn job<'a>(rows: &'a [JobRecord], id: &str) -> &'a JobRecord {
    rows.iter()
        .find(|r| r.job_id == id)
        .unwrap_or_else(|| panic!("job {id} not kept"))
}

fn ids(rows: &[JobRecord]) -> Vec<&str> {
    rows.iter().map(|r| r.job_id.as_str()).collect()
}

fn status_counts(rows: &[JobRecord]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r.status.as_str()).or_insert(0) += 1;
    }
    m
}

fn has_note(report: &ReadReport, needle: &str) -> bool {
    report.notes.iter().any(|n| n.contains(needle))
}

/// 2026-11-23T07:13:18 UTC, when the real capture's jobs were submitted.
const REAL_SUBMIT: f64 = 1_795_417_998.0;

// ------------------------------------------------------------------- real captures

#[test]
fn real_finished_capture_reads_every_job() {
    let (rows, report) = read("real-finished.txt");
    // 16 job rows (het job 12 has two), 13 `.batch` steps skipped, no row dropped.
    assert_eq!(report.rows_read, 16);
    assert_eq!(report.rows_kept, 16);
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.issues);
    assert!(
        has_note(&report, "skipped 13 job-step rows"),
        "{:?}",
        report.notes
    );
    assert!(has_note(
        &report,
        "merged 2 heterogeneous-job component rows (J+K) into 1 jobs"
    ));
    assert_eq!(
        ids(&rows),
        ["1", "2", "3", "4", "5", "6", "7", "8", "10", "11", "12", "9_1", "9_2", "9_3", "9_4"]
    );
    let counts = status_counts(&rows);
    assert_eq!(counts.get("completed"), Some(&10));
    assert_eq!(counts.get("failed"), Some(&1)); // fail-exit3
    assert_eq!(counts.get("killed"), Some(&4)); // cancelled pending/running, timeout, het
    assert_eq!(counts.get("unknown"), None);
    assert!(rows
        .iter()
        .all(|r| r.source == "sacct" && r.submit_time == REAL_SUBMIT));
    assert!(rows
        .iter()
        .all(|r| r.cluster.as_deref() == Some("augurtest")));

    // Time limits: 5 min, 2 min, 1 day, Partition_Limit, UNLIMITED, 10 min, 3 min, 1 min, ...
    let limit = |id| job(&rows, id).requested_time;
    assert_eq!(limit("1"), Some(300.0));
    assert_eq!(limit("3"), Some(86_400.0));
    assert_eq!(limit("4"), None); // Partition_Limit
    assert_eq!(limit("5"), None); // UNLIMITED
    assert_eq!(limit("8"), Some(60.0)); // -t 0:30 rounds up to a minute
    assert_eq!(limit("12"), Some(180.0)); // the longer of the components' 3 and 2 minutes
    assert_eq!(limit("9_2"), Some(120.0));
    assert!(has_note(&report, "1 jobs have Timelimit Partition_Limit"));
    assert!(has_note(&report, "1 jobs have Timelimit UNLIMITED"));

    // Waits behind the job that held both CPUs for 20 s, and run times.
    let wait = |id| job(&rows, id).queue_wait;
    let run = |id| job(&rows, id).duration;
    assert_eq!((wait("1"), run("1")), (Some(3.0), Some(20.0)));
    assert_eq!((wait("2"), run("2")), (Some(23.0), Some(5.0)));
    assert_eq!((wait("6"), run("6")), (Some(36.0), Some(1.0)));
    assert_eq!((wait("9_4"), run("9_4")), (Some(48.0), Some(3.0)));
    // The time limit is enforced on a 30 s tick: the 1-minute job ran 69 s.
    let timeout = job(&rows, "10");
    assert_eq!(timeout.status, JobStatus::Killed);
    assert_eq!(
        (timeout.queue_wait, timeout.duration),
        (Some(51.0), Some(69.0))
    );
    // Job 6 waited on a dependency (afterany on 5): eligible 36 s after submission; the array
    // tasks became eligible one by one (%2 throttle).
    assert!(has_note(
        &report,
        "5 jobs became eligible after their submission"
    ));

    let failed = job(&rows, "5");
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.duration, Some(0.0));

    // Cancelled while pending: sacct prints Start `None`.
    let cancelled = job(&rows, "4");
    assert_eq!(cancelled.status, JobStatus::Killed);
    assert_eq!((cancelled.start_time, cancelled.queue_wait), (None, None));
    assert_eq!(cancelled.end_time, Some(REAL_SUBMIT + 5.0));
    assert_eq!(cancelled.duration, None);
    let running_cancel = job(&rows, "11");
    assert_eq!(running_cancel.status, JobStatus::Killed);
    assert_eq!(running_cancel.duration, Some(3.0));

    // GPUs: `--gres=gpu:tesla:2` and `--gpus=1` (typed only in AllocTRES); none elsewhere.
    let typed = job(&rows, "7");
    assert_eq!(
        (typed.num_gpus, typed.gpu_type.as_deref()),
        (Some(2.0), Some("tesla"))
    );
    let any = job(&rows, "8");
    assert_eq!(
        (any.num_gpus, any.gpu_type.as_deref()),
        (Some(1.0), Some("tesla"))
    );
    assert!(rows
        .iter()
        .filter(|r| r.job_id != "7" && r.job_id != "8")
        .all(|r| r.num_gpus == Some(0.0) && r.gpu_type.is_none()));

    let first = job(&rows, "1");
    assert_eq!(first.job_name.as_deref(), Some("hold-cpus"));
    assert_eq!(first.user.as_deref(), Some("root"));
    assert_eq!(first.group.as_deref(), Some("root"));
    assert_eq!(first.queue.as_deref(), Some("debug"));
    assert_eq!(first.qos.as_deref(), Some("normal"));
    assert_eq!(first.priority, Some(4_294_901_759.0));
    assert_eq!((first.cpus, first.num_nodes), (Some(2.0), Some(1.0)));
    assert_eq!(first.memory_mib, Some(1000.0));

    // The heterogeneous job never started (its two components cannot share the one node).
    let het = job(&rows, "12");
    assert_eq!(het.status, JobStatus::Killed);
    assert_eq!((het.start_time, het.duration), (None, None));
    assert_eq!(
        (het.cpus, het.num_nodes, het.memory_mib),
        (Some(2.0), Some(2.0), Some(1000.0))
    );
}

#[test]
fn real_mid_run_capture_keeps_running_and_pending_jobs_unfinished() {
    let (rows, report) = read("real-running.txt");
    assert_eq!(report.rows_read, 12);
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.issues);
    assert!(has_note(&report, "skipped 1 job-step rows"));
    // `9_[1-4%2]` becomes four pending tasks; het job 12 one job.
    assert!(has_note(
        &report,
        "expanded 1 pending array-range rows (J_[a-b]) into 4 pending jobs"
    ));
    assert_eq!(
        ids(&rows),
        ["1", "2", "3", "4", "5", "7", "8", "10", "11", "12", "9_1", "9_2", "9_3", "9_4"]
    );
    let counts = status_counts(&rows);
    assert_eq!(counts.get("unknown"), Some(&13));
    assert_eq!(counts.get("killed"), Some(&1));
    assert!(has_note(&report, "2 jobs have Timelimit Partition_Limit"));

    let running = job(&rows, "1");
    assert_eq!(running.start_time, Some(REAL_SUBMIT + 3.0));
    assert_eq!(running.queue_wait, Some(3.0));
    // Elapsed so far is not a run time: the job has not ended.
    assert_eq!((running.end_time, running.duration), (None, None));
    for id in ["2", "9_3", "12"] {
        let p = job(&rows, id);
        assert_eq!(
            (p.start_time, p.queue_wait, p.duration),
            (None, None, None),
            "{id}"
        );
        assert_eq!(p.status, JobStatus::Unknown);
    }
    // Pending jobs get their GPUs from ReqTRES.
    let typed = job(&rows, "7");
    assert_eq!(
        (typed.num_gpus, typed.gpu_type.as_deref()),
        (Some(2.0), Some("tesla"))
    );
    let any = job(&rows, "8");
    assert_eq!((any.num_gpus, any.gpu_type.as_deref()), (Some(1.0), None));
    assert_eq!(job(&rows, "9_4").requested_time, Some(120.0));
}

#[test]
fn the_timezone_option_reads_a_capture_printed_in_another_zone() {
    let (utc, _) = read("real-finished.txt");
    let opts = ReadOptions {
        timezone: "America/New_York".parse().unwrap(),
        ..Default::default()
    };
    let (ny, report) = read_with(&fixture("real-finished-new-york.txt"), &opts);
    assert!(has_note(&report, "read in America/New_York"));
    assert_eq!(ny, utc);
    // Read as UTC, the New York file is five hours early.
    let (as_utc, _) = read("real-finished-new-york.txt");
    assert_eq!(as_utc[0].submit_time, REAL_SUBMIT - 5.0 * 3600.0);
    let fixed = ReadOptions {
        timezone: "-05:00".parse().unwrap(),
        ..Default::default()
    };
    let (ny_fixed, _) = read_with(&fixture("real-finished-new-york.txt"), &fixed);
    assert_eq!(ny_fixed, utc);
}

#[test]
fn sacct_files_are_detected_from_the_header() {
    for name in [
        "real-finished.txt",
        "real-running.txt",
        "handwritten-edge-cases.txt",
        "handwritten-malformed.txt",
    ] {
        let path = fixture(name);
        assert_eq!(detect_format(&path).unwrap(), TraceFormat::Sacct, "{name}");
    }
    assert_eq!(TraceFormat::parse("sacct"), Some(TraceFormat::Sacct));
    assert!(TraceFormat::Sacct.is_job_trace());
    let (table, report) = load_jobs(&fixture("real-finished.txt"), None, &ReadOptions::default())
        .expect("loads with detection");
    assert_eq!(table.len(), 15);
    assert_eq!(report.rows_kept, 16);
    assert_eq!(
        table.str_column("qos").unwrap()[0].as_deref(),
        Some("normal")
    );
    assert_eq!(
        table.f64_column("priority").unwrap()[0],
        Some(4_294_901_759.0)
    );
}

// ------------------------------------------------------------ hand-written edge cases

#[test]
fn edge_cases_states_limits_tres_and_ids() {
    let (rows, report) = read("handwritten-edge-cases.txt");
    assert_eq!(report.rows_read, 20);
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.issues);
    assert!(has_note(&report, "skipped 6 job-step rows"));
    assert_eq!(rows.len(), 22);
    let counts = status_counts(&rows);
    assert_eq!(counts.get("completed"), Some(&4));
    assert_eq!(counts.get("failed"), Some(&5)); // NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, FAILED, SPECIAL_EXIT
    assert_eq!(counts.get("killed"), Some(&5)); // TIMEOUT, CANCELLED by 1000, PREEMPTED, DEADLINE, CANCELLED
    assert_eq!(counts.get("unknown"), Some(&8)); // RUNNING, PENDING ×5, REVIVED, REQUEUED
    assert!(has_note(
        &report,
        "unrecognised State kept as unknown: {\"REVIVED\": 1}"
    ));
    let status = |id| job(&rows, id).status;
    assert_eq!(status("101"), JobStatus::Killed); // TIMEOUT
    assert_eq!(status("103"), JobStatus::Failed); // NODE_FAIL
    assert_eq!(status("104"), JobStatus::Failed); // OUT_OF_MEMORY
    assert_eq!(status("105"), JobStatus::Killed); // PREEMPTED
    assert_eq!(status("106"), JobStatus::Failed); // BOOT_FAIL
    assert_eq!(status("107"), JobStatus::Killed); // DEADLINE
    assert_eq!(status("108"), JobStatus::Unknown); // RUNNING
    assert_eq!(status("117"), JobStatus::Unknown); // REQUEUED

    // Every Timelimit form.
    let limit = |id| job(&rows, id).requested_time;
    assert_eq!(limit("100"), Some(86_400.0)); // 1-00:00:00
    assert_eq!(limit("101"), Some(1_800.0)); // 30 (minutes)
    assert_eq!(limit("102"), None); // Partition_Limit
    assert_eq!(limit("103"), Some(2.0 * 86_400.0 + 12.0 * 3600.0)); // 2-12
    assert_eq!(limit("104"), Some(2.0 * 86_400.0 + 12.5 * 3600.0)); // 2-12:30
    assert_eq!(limit("105"), Some(330.0)); // 05:30
    assert_eq!(limit("106"), None); // UNLIMITED
    assert_eq!(limit("107"), Some(360_000.0)); // 100:00:00

    let a = job(&rows, "100");
    let t0 = 1_767_607_200.0; // 2026-01-05T10:00:00Z
    assert_eq!(
        (a.submit_time, a.start_time, a.end_time),
        (t0, Some(t0 + 300.0), Some(t0 + 7500.0))
    );
    assert_eq!((a.queue_wait, a.duration), (Some(300.0), Some(7200.0)));
    assert_eq!(
        (a.num_gpus, a.gpu_type.as_deref()),
        (Some(8.0), Some("a100"))
    );
    assert_eq!(
        (a.cpus, a.num_nodes, a.memory_mib),
        (Some(64.0), Some(2.0), Some(524_288.0))
    );
    assert_eq!(a.user.as_deref(), Some("alice"));
    assert_eq!(a.group.as_deref(), Some("ml"));
    assert_eq!(a.queue.as_deref(), Some("gpu"));
    assert_eq!(a.qos.as_deref(), Some("high"));
    assert_eq!(a.priority, Some(12_345.0));
    assert_eq!(a.job_name.as_deref(), Some("train-a100"));
    assert_eq!(a.cluster, None);

    // GPU type from AllocTRES when ReqTRES is untyped; typed counts summed without gres/gpu.
    let b = job(&rows, "101");
    assert_eq!(
        (b.num_gpus, b.gpu_type.as_deref()),
        (Some(2.0), Some("v100"))
    );
    let h = job(&rows, "103");
    assert_eq!(
        (h.num_gpus, h.gpu_type.as_deref()),
        (Some(32.0), Some("h100"))
    );
    assert_eq!(h.memory_mib, Some(1024.0 * 1024.0));
    let cpu_only = job(&rows, "104");
    assert_eq!(
        (cpu_only.num_gpus, cpu_only.gpu_type.as_deref()),
        (Some(0.0), None)
    );
    let pending = job(&rows, "109");
    assert_eq!(
        (pending.num_gpus, pending.gpu_type.as_deref()),
        (Some(2.0), Some("a100"))
    );
    assert_eq!((pending.start_time, pending.end_time), (None, None));

    // Cancelled before starting: Start `None`, or (older Slurm) Start = End with no allocation.
    for id in ["102", "116"] {
        let c = job(&rows, id);
        assert_eq!(
            (c.start_time, c.queue_wait, c.duration),
            (None, None, None),
            "{id}"
        );
        assert!(c.end_time.is_some());
    }
    assert!(has_note(
        &report,
        "1 jobs with no allocation and Start = End"
    ));
    // BOOT_FAIL with an allocation keeps its Start = End.
    assert_eq!(job(&rows, "106").duration, Some(0.0));

    let running = job(&rows, "108");
    assert_eq!((running.end_time, running.duration), (None, None));
    assert_eq!(running.queue_wait, Some(5.0));

    assert_eq!(job(&rows, "115").job_name.as_deref(), Some("a|b pipe"));
    assert!(has_note(&report, "1 rows had a `|` inside JobName"));
    assert!(has_note(
        &report,
        "1 jobs became eligible after their submission"
    ));
}

#[test]
fn edge_cases_heterogeneous_and_array_jobs() {
    let (rows, report) = read("handwritten-edge-cases.txt");
    assert!(has_note(
        &report,
        "merged 2 heterogeneous-job component rows (J+K) into 1 jobs"
    ));
    assert!(has_note(
        &report,
        "expanded 1 pending array-range rows (J_[a-b]) into 4 pending jobs"
    ));
    assert!(!rows
        .iter()
        .any(|r| r.job_id.contains('+') || r.job_id.contains('[')));
    let het = job(&rows, "110");
    let t = 1_767_607_200.0 + 4.0 * 3600.0; // 14:00
    assert_eq!(het.submit_time, t);
    assert_eq!(
        (het.start_time, het.end_time),
        (Some(t + 600.0), Some(t + 2460.0))
    );
    assert_eq!((het.queue_wait, het.duration), (Some(600.0), Some(1860.0)));
    assert_eq!(
        (het.num_gpus, het.gpu_type.as_deref()),
        (Some(4.0), Some("a100"))
    );
    assert_eq!((het.cpus, het.num_nodes), (Some(40.0), Some(5.0)));
    assert_eq!(het.memory_mib, Some(192.0 * 1024.0));
    assert_eq!(het.requested_time, Some(7200.0));
    assert_eq!(het.queue.as_deref(), Some("gpu")); // the first component's partition
    assert_eq!(het.status, JobStatus::Completed);

    let done = job(&rows, "111_1");
    assert_eq!(
        (done.num_gpus, done.gpu_type.as_deref()),
        (Some(1.0), Some("a100"))
    );
    assert_eq!(done.status, JobStatus::Completed);
    for task in ["111_3", "111_4", "111_5", "111_9"] {
        let p = job(&rows, task);
        assert_eq!(p.status, JobStatus::Unknown, "{task}");
        assert_eq!((p.num_gpus, p.requested_time), (Some(1.0), Some(1800.0)));
        assert_eq!(p.start_time, None);
    }
    assert!(rows
        .iter()
        .all(|r| r.job_id != "111_2" && r.job_id != "111_6"));
}

#[test]
fn malformed_rows_are_reported_at_their_line() {
    let (rows, report) = read("handwritten-malformed.txt");
    assert_eq!(ids(&rows), ["200", "210"]);
    assert_eq!(report.rows_read, 11); // the blank line and the step are not rows
    assert_eq!(report.rows_dropped(), 9);
    let got: Vec<(u64, &str, &str)> = report
        .issues
        .iter()
        .map(|i| (i.line, i.field.as_str(), i.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (3, "Submit", "not a YYYY-MM-DDTHH:MM:SS time"),
            (4, "Timelimit", "not a Slurm time limit"),
            (5, "ReqTRES", "a TRES count is not a non-negative number"),
            (6, "End", "before Start"),
            (7, "JobID", "not a Slurm job id"),
            (8, "row", "not as many |-separated fields as the header"),
            (9, "Submit", "missing"),
            (11, "NCPUS", "negative"),
            (13, "Elapsed", "not a Slurm duration ([D-]HH:MM:SS)"),
        ]
    );
    assert!(report
        .issues
        .iter()
        .all(|i| i.file == "handwritten-malformed.txt"));
    assert_eq!(report.issues[0].value, "yesterday");
    assert_eq!(report.issues[5].value, "4 fields, the header has 11");

    let strict = ReadOptions {
        strict: true,
        ..Default::default()
    };
    let mut kept = 0;
    let path = fixture("handwritten-malformed.txt");
    match read_jobs(&path, Some(TraceFormat::Sacct), &strict, &mut |_| kept += 1) {
        Err(DatasetError::StrictRow(issue)) => {
            assert_eq!((issue.line, issue.field.as_str()), (3, "Submit"));
        }
        other => panic!("expected a strict-mode row error, got {other:?}"),
    }
    assert_eq!(kept, 1);
}

// ---------------------------------------------------------------- inline variants

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn parsable_with_a_trailing_bar_crlf_and_a_bom_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write(
        &dir,
        "p2.txt",
        "JobIDRaw|State|Submit|Start|End\n7|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:10|2026-01-01T00:01:10\n",
    );
    let bar = write(
        &dir,
        "p.txt",
        "\u{feff}JobIDRaw|State|Submit|Start|End|\r\n7|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:10|2026-01-01T00:01:10|\r\n\r\n",
    );
    let (a, _) = read_with(&plain, &ReadOptions::default());
    let (b, report) = read_with(&bar, &ReadOptions::default());
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.issues);
    assert_eq!(a, b);
    assert_eq!(a[0].job_id, "7");
    assert_eq!(a[0].duration, Some(60.0));
    // Columns without a value in this file stay null.
    assert_eq!(
        (a[0].num_gpus, a[0].requested_time, a[0].user.as_deref()),
        (None, None, None)
    );
    assert_eq!(detect_format(&bar).unwrap(), TraceFormat::Sacct);
}

#[test]
fn a_local_time_the_zone_skips_is_a_row_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "berlin.txt",
        "JobID|State|Submit\n1|PENDING|2026-03-29T02:30:00\n2|PENDING|2026-03-29T03:30:00\n",
    );
    let opts = ReadOptions {
        timezone: TraceZone::Named("Europe/Berlin".parse().unwrap()),
        ..Default::default()
    };
    let (rows, report) = read_with(&path, &opts);
    assert_eq!(ids(&rows), ["2"]);
    assert_eq!(rows[0].submit_time, 1_774_747_800.0); // 01:30 UTC (CEST, UTC+2)
    assert_eq!(report.issues[0].line, 2);
    assert_eq!(report.issues[0].field, "Submit");
    assert_eq!(
        report.issues[0].reason,
        "a local time the time zone skips (daylight saving)"
    );
}

#[test]
fn a_file_without_the_needed_columns_or_header_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    let no_state = write(&dir, "a.txt", "JobID|Submit\n1|2026-01-01T00:00:00\n");
    let err = read_jobs(
        &no_state,
        Some(TraceFormat::Sacct),
        &ReadOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, DatasetError::Format { .. }), "{err}");
    assert!(err.to_string().contains("State"), "{err}");
    let empty = write(&dir, "b.txt", "\n\n");
    let err = read_jobs(
        &empty,
        Some(TraceFormat::Sacct),
        &ReadOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("no sacct header"), "{err}");
}

// ---------------------------------------------------------------- Graham (real, bundled)

#[test]
fn bundled_graham_reads_every_job_in_torontos_local_time() {
    use augur_datasets::bundled::Dataset;
    let ds = Dataset::parse("graham").unwrap();
    assert_eq!(ds, Dataset::Graham);
    // the caller's zone is overridden by the trace's own: Graham's sacct printed Toronto time
    let (table, report) = ds.load(&ReadOptions::default()).unwrap();
    assert_eq!(report.rows_dropped(), 0, "{:?}", report.dropped_by_reason);
    let rows = table.to_records().unwrap();
    // SOURCE.txt: 133,025 jobs, 12,591 of them asking for GPUs
    assert_eq!(rows.len(), 133_025);
    assert_eq!(
        rows.iter()
            .filter(|r| r.num_gpus.is_some_and(|g| g > 0.0))
            .count(),
        12_591
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rows {
        *counts.entry(r.status.as_str()).or_default() += 1;
    }
    // COMPLETED; FAILED + OUT_OF_MEMORY + NODE_FAIL; TIMEOUT + CANCELLED (SOURCE.txt's counts)
    assert_eq!(counts.get("completed"), Some(&110_171));
    assert_eq!(counts.get("failed"), Some(&(9_490 + 1_530 + 502)));
    assert_eq!(counts.get("killed"), Some(&(9_613 + 1_719)));
    assert_eq!(counts.get("unknown"), None);
    // job 57979502 was submitted 2021-05-01T00:02:52 local, EDT (UTC-4)
    let first = rows.iter().find(|r| r.job_id == "57979502").unwrap();
    assert_eq!(first.submit_time, 1_619_841_772.0);
    assert_eq!(first.queue.as_deref(), Some("p27"));
    assert_eq!(first.cpus, Some(32.0));
    assert_eq!(first.requested_time, Some((6.0 * 24.0 + 4.0) * 3600.0));
    assert!(rows.iter().all(|r| r.priority.is_some()));
}
