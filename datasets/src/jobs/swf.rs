//! Standard Workload Format (Parallel Workloads Archive), plain or gzip.
//!
//! 18 whitespace-separated fields per job, `-1` for unknown, `;` header comments:
//! 1 job id, 2 submit, 3 wait, 4 run time, 5 allocated processors, 6 average CPU time,
//! 7 used memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status
//! (1 completed, 0 failed, 5 cancelled), 12 user, 13 group, 14 executable, 15 queue,
//! 16 partition, 17 preceding job, 18 think time.
//!
//! Two variants ([`SwfVariant`]):
//! - **standard**: submit times count from the header's `UnixStartTime` when present (then
//!   they are made absolute), field 5 is processors (kept as `cpus`), field 9 the requested time.
//! - **ALCF** (the Mira log): field 5 is *nodes* and field 6 the *requested wall time*; submit
//!   times are already Unix seconds.

use std::io::BufRead;
use std::path::Path;

use super::fields::Row;
use crate::error::DatasetError;
use crate::input;
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Which meaning fields 5 and 6 carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwfVariant {
    /// The Parallel Workloads Archive standard.
    Standard,
    /// ALCF logs (Mira): field 5 = nodes, field 6 = requested wall time.
    Alcf,
}

/// Reads an SWF file.
pub fn read(
    path: &Path,
    variant: SwfVariant,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let file = input::display_name(path);
    let mut reader = input::open_lines(path, opts.max_line_bytes)?;
    let mut report = ReadReport {
        time_origin: match variant {
            SwfVariant::Alcf => TimeOrigin::Unix,
            SwfVariant::Standard => TimeOrigin::Relative,
        },
        ..Default::default()
    };
    match variant {
        SwfVariant::Alcf => report.note(
            "swf (ALCF variant): field 5 = nodes, field 6 = requested wall time, submit in Unix seconds",
        ),
        SwfVariant::Standard => report.note(
            "swf (standard): field 5 = processors (cpus), field 9 = requested time; -1 read as unknown",
        ),
    }
    let mut unix_start: Option<f64> = None;
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        line_no += 1;
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            // A read error (a truncated or corrupt gzip, an over-long line) fails the read: the
            // lines before it are not the whole trace.
            Err(e) => return Err(DatasetError::io(path, e)),
        }
        // Invalid UTF-8 costs only its own line: a comment in another encoding (Latin-1
        // headers exist) is still a comment, a data row with it is dropped.
        let line = String::from_utf8_lossy(&buf);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if !trimmed.starts_with(';') && matches!(line, std::borrow::Cow::Owned(_)) {
            report.rows_read += 1;
            let issue = RowIssue {
                file: file.clone(),
                line: line_no,
                field: "row".into(),
                reason: "not valid UTF-8".into(),
                value: shown_value(trimmed),
            };
            report.drop_row(issue, opts)?;
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix(';') {
            if let Some(v) = comment.trim().strip_prefix("UnixStartTime:") {
                if variant == SwfVariant::Standard {
                    if let Ok(t) = v.trim().parse::<f64>() {
                        unix_start = Some(t);
                        report.time_origin = TimeOrigin::Unix;
                        report.note("swf: submit times offset by the header's UnixStartTime");
                    }
                }
            }
            continue;
        }
        report.rows_read += 1;
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        let row = Row {
            file: &file,
            line: line_no,
            fields: &fields,
        };
        match parse_row(&row, variant, unix_start) {
            Ok(r) => {
                report.rows_kept += 1;
                sink(r);
            }
            Err(issue) => report.drop_row(issue, opts)?,
        }
    }
    report.files.push(path.display().to_string());
    Ok(report)
}

/// An SWF numeric field: `-1` (or any negative) means unknown.
fn known(row: &Row, idx: usize, field: &str) -> Result<Option<f64>, RowIssue> {
    let v = row.req_num(idx, field)?;
    Ok((v >= 0.0).then_some(v))
}

fn parse_row(
    row: &Row,
    variant: SwfVariant,
    unix_start: Option<f64>,
) -> Result<JobRecord, RowIssue> {
    if row.fields.len() != 18 {
        return Err(row.issue(
            "row",
            "expected 18 whitespace-separated fields",
            &format!("{} fields", row.fields.len()),
        ));
    }
    let job_id = row.raw(0);
    let submit = known(row, 1, "submit_time (field 2)")?
        .ok_or_else(|| row.issue("submit_time (field 2)", "missing", row.raw(1)))?;
    let submit = submit + unix_start.unwrap_or(0.0);
    let wait = known(row, 2, "wait_time (field 3)")?;
    let run = known(row, 3, "run_time (field 4)")?;
    let f5 = known(row, 4, "allocated (field 5)")?;
    let f6 = known(row, 5, "field 6")?;
    let req_procs = known(row, 7, "requested_processors (field 8)")?;
    let req_time = known(row, 8, "requested_time (field 9)")?;
    let req_mem = known(row, 9, "requested_memory (field 10)")?;
    let status = match row.req_num(10, "status (field 11)")? as i64 {
        1 => JobStatus::Completed,
        0 => JobStatus::Failed,
        5 => JobStatus::Killed,
        _ => JobStatus::Unknown,
    };
    let id_field = |idx: usize, prefix: &str| -> Result<Option<String>, RowIssue> {
        Ok(known(row, idx, prefix)?.map(|v| format!("{prefix}{}", v as i64)))
    };
    let (cpus, nodes, requested_time) = match variant {
        SwfVariant::Standard => (f5.or(req_procs), None, req_time),
        SwfVariant::Alcf => (None, f5.or(req_procs), f6.or(req_time)),
    };
    let mut r = JobRecord {
        job_id: job_id.to_string(),
        submit_time: submit,
        queue_wait: wait,
        duration: run,
        num_nodes: nodes,
        cpus,
        // SWF memory is KB per processor; keep the request in MiB as given per processor.
        memory_mib: req_mem.map(|kb| kb / 1024.0),
        requested_time,
        user: id_field(11, "u")?,
        group: id_field(12, "g")?,
        job_name: id_field(13, "app")?,
        queue: id_field(14, "q")?,
        cluster: id_field(15, "partition")?,
        status,
        source: match variant {
            SwfVariant::Standard => "swf".into(),
            SwfVariant::Alcf => "swf-alcf".into(),
        },
        ..Default::default()
    };
    r.derive_times();
    Ok(r)
}
