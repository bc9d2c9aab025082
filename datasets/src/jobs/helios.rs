//! SenseTime Helios traces (S-Lab-System-Group/HeliosData): one `cluster_log.csv` per cluster
//! (`data/<Earth|Saturn|Uranus|Venus>/cluster_log.csv`), one Slurm job per row, with the header
//! `job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue`.
//! Times are `YYYY-MM-DD HH:MM:SS` with no time zone; `duration` and `queue` are seconds.
//!
//! | Helios column | canonical column |
//! |---|---|
//! | `job_id` | `job_id` (Slurm id, in submission order per cluster) |
//! | `submit_time` | `submit_time` (read as UTC: the file has no zone) |
//! | `start_time` / `end_time` | `start_time` / `end_time` (null when empty) |
//! | `duration` | `duration` (the trace's `end − start`; derived when empty) |
//! | `queue` | `queue_wait` — `queue` is the queueing *time* (`start − submit`), not a queue name |
//! | `gpu_num` / `cpu_num` / `node_num` | `num_gpus` / `cpus` / `num_nodes` |
//! | `user` / `vc` | `user` / `group` (hashed) |
//! | `jobname` or `job_name` (not in the documented schema; used if a file has it) | `job_name` |
//! | parent folder (`Earth`, `Saturn`, `Uranus`, `Venus`) | `cluster` (null for any other folder) |
//! | `state` | `status`, see below |
//!
//! `state` mapping: `COMPLETED` → completed; `FAILED`, `NODE_FAIL`, `OUT_OF_MEMORY`, `BOOT_FAIL`
//! → failed; `CANCELLED` (also `CANCELLED by <uid>`), `TIMEOUT`, `PREEMPTED`, `DEADLINE` →
//! killed; `RUNNING`, `PENDING`, `SUSPENDED`, `REQUEUED`, `RESIZING`, `REVOKED` or empty →
//! unknown. Note that the Helios paper counts `TIMEOUT` as failed; here it is killed, as the
//! canonical schema files jobs ended by a time limit under killed. Any other state is kept as
//! unknown and counted in a note.
//!
//! Rows with a negative `duration`/`queue`, a start before the submission or an end before the
//! start are dropped with a reason (the file gives no way to tell which time is wrong).

use std::collections::BTreeMap;
use std::path::Path;

use super::fields::{read_csv_rows, CsvColumns, Row};
use super::philly::parse_timestamp;
use crate::error::DatasetError;
use crate::report::{ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Columns every Helios log must have; `user`, `vc`, `cpu_num`, `node_num`, `duration` and
/// `queue` are read when present.
const REQUIRED: [&str; 6] = [
    "job_id",
    "gpu_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
];

/// The clusters HeliosData publishes; a log in a folder of one of these names gets it as `cluster`.
const CLUSTERS: [&str; 4] = ["Earth", "Saturn", "Uranus", "Venus"];

/// Maps a Slurm job state as Helios records it; `None` for a state the reader does not know.
fn map_state(raw: &str) -> Option<JobStatus> {
    let upper = raw.trim().to_ascii_uppercase();
    // sacct writes `CANCELLED by 1234`; only the first word is the state.
    let word = upper.split_whitespace().next().unwrap_or("");
    Some(match word {
        "COMPLETED" => JobStatus::Completed,
        "FAILED" | "NODE_FAIL" | "OUT_OF_MEMORY" | "BOOT_FAIL" => JobStatus::Failed,
        "CANCELLED" | "TIMEOUT" | "PREEMPTED" | "DEADLINE" => JobStatus::Killed,
        "" | "RUNNING" | "PENDING" | "SUSPENDED" | "REQUEUED" | "RESIZING" | "REVOKED" => {
            JobStatus::Unknown
        }
        _ => return None,
    })
}

/// Reads one Helios `cluster_log.csv`.
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let cluster = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy())
        .and_then(|n| {
            CLUSTERS
                .iter()
                .find(|c| c.eq_ignore_ascii_case(&n))
                .map(|c| c.to_string())
        });
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    report.note("helios: times have no zone in the file and are read as UTC (the clusters are SenseTime's; local time is likely UTC+8)");
    report.note("helios: `queue` is the queueing time in seconds, kept as queue_wait (there is no queue name); `duration` is kept as given; vc → group");
    report.note("helios: state COMPLETED → completed; FAILED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL → failed; CANCELLED, TIMEOUT, PREEMPTED, DEADLINE → killed (the Helios paper counts TIMEOUT as failed); RUNNING, PENDING, SUSPENDED, REQUEUED → unknown");
    match &cluster {
        Some(c) => report.note(format!("helios: cluster `{c}` taken from the folder name")),
        None => report.note("helios: the folder is not named after a Helios cluster (Earth, Saturn, Uranus, Venus); cluster left null"),
    }
    let mut unmapped: BTreeMap<String, u64> = BTreeMap::new();
    read_csv_rows(
        path,
        None,
        &REQUIRED,
        opts,
        &mut report,
        |row, cols| {
            let mut r = parse_job(row, cols)?;
            r.cluster = cluster.clone();
            let state = row.raw(cols.at("state"));
            if map_state(state).is_none() {
                *unmapped.entry(state.to_string()).or_insert(0) += 1;
            }
            Ok(r)
        },
        sink,
    )?;
    report.note_unrecognised("helios: jobs with an unrecognised state", &unmapped);
    Ok(report)
}

/// An optional time column: empty/`None` → null, otherwise it must parse.
fn time(row: &Row, idx: usize, field: &str) -> Result<Option<f64>, RowIssue> {
    match row.text(Some(idx)) {
        None => Ok(None),
        Some(raw) => parse_timestamp(&raw)
            .map(Some)
            .ok_or_else(|| row.issue(field, "not a YYYY-MM-DD HH:MM:SS time", &raw)),
    }
}

fn parse_job(row: &Row, cols: &CsvColumns) -> Result<JobRecord, RowIssue> {
    let id = row.raw(cols.at("job_id"));
    if id.is_empty() {
        return Err(row.issue("job_id", "missing", id));
    }
    let submit = time(row, cols.at("submit_time"), "submit_time")?
        .ok_or_else(|| row.issue("submit_time", "missing", ""))?;
    let start = time(row, cols.at("start_time"), "start_time")?;
    let end = time(row, cols.at("end_time"), "end_time")?;
    if let Some(s) = start {
        if s < submit {
            return Err(row.issue(
                "start_time",
                "before submit_time",
                row.raw(cols.at("start_time")),
            ));
        }
    }
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            return Err(row.issue(
                "end_time",
                "before start_time",
                row.raw(cols.at("end_time")),
            ));
        }
    }
    let mut r = JobRecord {
        job_id: id.to_string(),
        submit_time: submit,
        start_time: start,
        queue_wait: row.non_negative(cols.optional("queue"), "queue")?,
        end_time: end,
        duration: row.non_negative(cols.optional("duration"), "duration")?,
        num_gpus: row.non_negative(Some(cols.at("gpu_num")), "gpu_num")?,
        num_nodes: row.non_negative(cols.optional("node_num"), "node_num")?,
        cpus: row.non_negative(cols.optional("cpu_num"), "cpu_num")?,
        user: row.text(cols.optional("user")),
        group: row.text(cols.optional("vc")),
        job_name: row.text(cols.optional("jobname").or(cols.optional("job_name"))),
        status: map_state(row.raw(cols.at("state"))).unwrap_or(JobStatus::Unknown),
        source: "helios".into(),
        ..Default::default()
    };
    r.derive_times();
    Ok(r)
}
