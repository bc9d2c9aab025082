//! MLPerf Training runs as jobs: the `runs.csv` extracted from the MLPerf Training v1.0
//! results (mlcommons/training_results_v1.0; see the bundled `SOURCE.txt`), one training run per
//! row, with the header
//! `run_id,submitter,system,benchmark,result_file,num_nodes,accelerators_per_node,accelerator_model,framework,global_batch_size,seed,run_start_ms,run_stop_ms,duration_s,run_status,n_eval_points,final_eval_accuracy`
//! (`framework` is quoted and holds commas).
//!
//! | runs.csv column | canonical column |
//! |---|---|
//! | `run_id` | `job_id` |
//! | `run_start_ms / 1000` | `submit_time` and `start_time` (Unix seconds) |
//! | `run_stop_ms / 1000` | `end_time` (null when the log has no `run_stop`) |
//! | `duration_s` | `duration` (the time to train; `end − start` when the column is empty) |
//! | `num_nodes` | `num_nodes` |
//! | `num_nodes × accelerators_per_node` | `num_gpus` — accelerators, not only GPUs (TPU, IPU, Gaudi, Ascend; 0 for CPU-only runs) |
//! | `accelerator_model` | `gpu_type`, verbatim (null for `N/A`) |
//! | `submitter` | `user` |
//! | `system` | `group` |
//! | `benchmark` | `job_name` |
//! | `run_status` | `status`: `success` → completed; `aborted`, `abort`, `fail` → failed; empty → unknown |
//!
//! MLPerf logs no submission, so `submit_time` is the run start and `queue_wait` is null (not
//! zero: nobody measured a wait). An `aborted` run stopped before reaching the benchmark's
//! target quality. A run whose log has no `run_stop` line has no end time, duration or status
//! (one such run in v1.0) and is kept with those null/unknown. Rows whose stop precedes their
//! start or whose duration is negative are dropped with a reason.

use std::collections::BTreeMap;
use std::path::Path;

use super::fields::{read_csv_rows, Row};
use crate::error::DatasetError;
use crate::report::{ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Columns the reader needs.
const REQUIRED: [&str; 11] = [
    "run_id",
    "submitter",
    "system",
    "benchmark",
    "num_nodes",
    "accelerators_per_node",
    "accelerator_model",
    "run_start_ms",
    "run_stop_ms",
    "duration_s",
    "run_status",
];

/// Reads an MLPerf `runs.csv` as one job per training run.
pub fn read_runs_as_jobs(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    report.note("mlperf-runs: one job per training run; submit = start = run_start (Unix seconds): MLPerf logs no submission, so queue_wait is null");
    report.note("mlperf-runs: num_gpus = num_nodes × accelerators_per_node and counts accelerators of any kind (GPU, TPU, IPU, ...; 0 for CPU-only runs); gpu_type = accelerator_model verbatim (spellings differ between submitters)");
    report.note("mlperf-runs: user = submitter, group = system, job_name = benchmark; run_status success → completed, aborted/abort/fail → failed (target quality not reached), empty → unknown (no run_stop in the log)");
    let mut unmapped: BTreeMap<String, u64> = BTreeMap::new();
    read_csv_rows(
        path,
        None,
        &REQUIRED,
        opts,
        &mut report,
        |row, cols| {
            let (r, status) = parse_run(row, |c| cols.at(c))?;
            if let Some(s) = status {
                *unmapped.entry(s.to_string()).or_insert(0) += 1;
            }
            Ok(r)
        },
        sink,
    )?;
    report.note_unrecognised(
        "mlperf-runs: runs with an unrecognised run_status",
        &unmapped,
    );
    Ok(report)
}

/// Parses one run; also returns its `run_status` when it is not one the reader maps.
fn parse_run<'a>(
    row: &Row<'a>,
    at: impl Fn(&str) -> usize,
) -> Result<(JobRecord, Option<&'a str>), RowIssue> {
    let run_id = row.raw(at("run_id"));
    if run_id.is_empty() {
        return Err(row.issue("run_id", "missing", run_id));
    }
    let start_ms = row.req_num(at("run_start_ms"), "run_start_ms")?;
    let stop_ms = row.num(Some(at("run_stop_ms")), "run_stop_ms")?;
    let start = start_ms / 1000.0;
    let end = stop_ms.map(|ms| ms / 1000.0);
    if let Some(e) = end {
        if e < start {
            return Err(row.issue(
                "run_stop_ms",
                "before run_start_ms",
                row.raw(at("run_stop_ms")),
            ));
        }
    }
    let duration = row
        .non_negative(Some(at("duration_s")), "duration_s")?
        .or_else(|| end.map(|e| e - start));
    let nodes = row.non_negative(Some(at("num_nodes")), "num_nodes")?;
    let per_node = row.non_negative(Some(at("accelerators_per_node")), "accelerators_per_node")?;
    let raw_status = row.raw(at("run_status"));
    let (status, unmapped) = match raw_status.to_ascii_lowercase().as_str() {
        "success" => (JobStatus::Completed, None),
        "aborted" | "abort" | "fail" | "failed" => (JobStatus::Failed, None),
        "" => (JobStatus::Unknown, None),
        _ => (JobStatus::Unknown, Some(raw_status)),
    };
    let record = JobRecord {
        job_id: run_id.to_string(),
        submit_time: start,
        start_time: Some(start),
        queue_wait: None,
        end_time: end,
        duration,
        num_gpus: nodes.zip(per_node).map(|(n, a)| n * a),
        num_nodes: nodes,
        gpu_type: row.text(Some(at("accelerator_model"))),
        user: row.text(Some(at("submitter"))),
        group: row.text(Some(at("system"))),
        job_name: row.text(Some(at("benchmark"))),
        status,
        source: "mlperf".into(),
        ..Default::default()
    };
    Ok((record, unmapped))
}
