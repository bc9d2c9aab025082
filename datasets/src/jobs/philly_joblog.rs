//! Microsoft Philly `cluster_job_log` (msr-fiddle/philly-traces): one JSON array of jobs,
//!
//! ```json
//! [{"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
//!   "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c",
//!   "attempts": [{"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23",
//!                 "detail": [{"ip": "m47", "gpus": ["gpu0", "gpu1"]}]}]}]
//! ```
//!
//! Times are `YYYY-MM-DD HH:MM:SS` with no zone (read as UTC, like the `philly` CSV reader) or
//! `"None"` when not recorded. Each attempt is one successful scheduling of the job.
//!
//! | job-log key | canonical column |
//! |---|---|
//! | `jobid` | `job_id` |
//! | `submitted_time` | `submit_time` |
//! | first attempt's `start_time` | `start_time`; `queue_wait` = `start − submit` |
//! | last attempt's `end_time` | `end_time`; `duration` = `end − start` (spans retries) |
//! | GPUs listed in the first attempt's `detail` | `num_gpus` (as the trace's own analysis notebook counts them) |
//! | servers listed in the first attempt's `detail` | `num_nodes` |
//! | `user` / `vc` | `user` / `group` (hashed) |
//! | `status` | `status`: `Pass` → completed, `Failed` → failed, `Killed` → killed |
//!
//! As the trace's README documents: a job may have no attempts (start, end, GPUs null), an
//! attempt may miss its start or end time (null), and a job whose *last* attempt has no end
//! time was still running when the log was taken — its status is `unknown` whatever `status`
//! says. A later attempt may run on other GPUs than the first; `num_gpus` is the first
//! attempt's. An empty or unrecognised `status` is kept as `unknown` and counted in a note.
//!
//! The file is streamed: one array element is parsed at a time, so memory does not grow with
//! the file. An element of the wrong shape (a missing `jobid`, an unparsable time, `attempts`
//! not a list, ...) is a row issue whose `line` is the element's 1-based index in the array;
//! elements whose start precedes their submission or whose end precedes their start are
//! dropped too. Broken JSON syntax ends the read at that element (one row issue; the jobs
//! before it are kept), since nothing after it can be located reliably.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{Deserializer as _, Error as _, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::philly::parse_timestamp;
use crate::error::DatasetError;
use crate::input;
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Reads a Philly `cluster_job_log` JSON file (plain or gzip).
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    report.note("philly-joblog: times have no zone in the file and are read as UTC; line numbers of issues are 1-based job indices in the array");
    report.note("philly-joblog: start = first attempt's start, end = last attempt's end (duration spans retries); num_gpus and num_nodes = GPUs and servers of the first attempt");
    report.note("philly-joblog: status Pass → completed, Failed → failed, Killed → killed; a job whose last attempt has no end time was still running when the log was taken: status unknown, end null");

    let mut ctx = Ctx {
        file: input::display_name(path),
        opts,
        report: &mut report,
        sink,
        index: 0,
        fatal: None,
        stopped: false,
        running: 0,
        no_attempts: 0,
        unmapped: BTreeMap::new(),
    };
    let mut de = serde_json::Deserializer::from_reader(input::open(path)?);
    let result = (&mut de).deserialize_seq(JobsVisitor { ctx: &mut ctx });
    if let Some(e) = ctx.fatal.take() {
        return Err(e);
    }
    match result {
        Ok(()) => {
            if let Err(e) = de.end() {
                let issue = ctx.issue(
                    ctx.index + 1,
                    "file",
                    "content after the job array",
                    &e.to_string(),
                );
                ctx.report.rows_read += 1;
                ctx.report.drop_row(issue, opts)?;
            }
        }
        // A read error (a truncated or corrupt gzip) fails the read; broken JSON text keeps
        // the jobs before it, as a row issue.
        Err(e) if e.is_io() => return Err(DatasetError::io(path, e.into())),
        Err(_) if ctx.stopped => {}
        Err(e) => {
            return Err(DatasetError::format(
                path,
                format!("not a Philly cluster_job_log (a JSON array of jobs): {e}"),
            ))
        }
    }
    let Ctx {
        running,
        no_attempts,
        unmapped,
        ..
    } = ctx;
    if running > 0 {
        report.note(format!(
            "philly-joblog: {running} job(s) were still running when the log was taken (status unknown, end null)"
        ));
    }
    if no_attempts > 0 {
        report.note(format!(
            "philly-joblog: {no_attempts} job(s) have no recorded attempt (start, end and GPUs null)"
        ));
    }
    report.note_unrecognised(
        "philly-joblog: jobs with an empty or unrecognised status",
        &unmapped,
    );
    report.files.push(path.display().to_string());
    Ok(report)
}

/// State shared by the streaming visitor and the reader.
struct Ctx<'a> {
    file: String,
    opts: &'a ReadOptions,
    report: &'a mut ReadReport,
    sink: &'a mut dyn FnMut(JobRecord),
    /// 1-based index of the last element seen.
    index: u64,
    /// The strict-mode error that stopped the read.
    fatal: Option<DatasetError>,
    /// The read stopped at broken JSON (already recorded as a row issue).
    stopped: bool,
    running: u64,
    no_attempts: u64,
    unmapped: BTreeMap<String, u64>,
}

impl Ctx<'_> {
    /// Counts a kept job that is still running, has no attempts, or has a status other than
    /// `Pass`, `Failed` or `Killed` (the last only for finished jobs).
    fn tally_kept(&mut self, still_running: bool, no_attempts: bool, raw_status: Option<&str>) {
        if still_running {
            self.running += 1;
        }
        if no_attempts {
            self.no_attempts += 1;
        }
        if !still_running && !matches!(raw_status, Some("Pass" | "Failed" | "Killed")) {
            *self
                .unmapped
                .entry(raw_status.unwrap_or_default().to_string())
                .or_insert(0) += 1;
        }
    }

    fn issue(&self, index: u64, field: &str, reason: &str, value: &str) -> RowIssue {
        RowIssue {
            file: self.file.clone(),
            line: index,
            field: field.to_string(),
            reason: reason.to_string(),
            value: shown_value(value),
        }
    }

    /// Records a dropped element; in strict mode keeps the error and returns false.
    fn drop_row(&mut self, issue: RowIssue) -> bool {
        match self.report.drop_row(issue, self.opts) {
            Ok(()) => true,
            Err(e) => {
                self.fatal = Some(e);
                false
            }
        }
    }
}

/// Visits the top-level array one element at a time.
struct JobsVisitor<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
}

impl<'de> Visitor<'de> for JobsVisitor<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of Philly jobs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        loop {
            let index = ctx.index + 1;
            let element = seq.next_element::<Value>();
            match element {
                Ok(None) => return Ok(()),
                Ok(Some(v)) => {
                    ctx.index = index;
                    ctx.report.rows_read += 1;
                    match parse_job(&v, index, ctx) {
                        Ok(r) => {
                            ctx.report.rows_kept += 1;
                            (ctx.sink)(r);
                        }
                        Err(issue) => {
                            if !ctx.drop_row(issue) {
                                return Err(A::Error::custom(
                                    "stopped at a malformed job (strict mode)",
                                ));
                            }
                        }
                    }
                }
                Err(e) => {
                    ctx.index = index;
                    ctx.report.rows_read += 1;
                    ctx.stopped = true;
                    let issue = ctx.issue(
                        index,
                        "job",
                        "unreadable JSON (stopped reading the file here)",
                        &e.to_string(),
                    );
                    ctx.drop_row(issue);
                    return Err(e);
                }
            }
        }
    }
}

/// Text of an optional string field; `null`, `""` and `"None"` are missing. Numbers are taken
/// as their decimal text (ids).
fn opt_text(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            Ok((!matches!(s, "" | "None" | "null")).then(|| s.to_string()))
        }
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(other.to_string()),
    }
}

fn parse_job(v: &Value, index: u64, ctx: &mut Ctx) -> Result<JobRecord, RowIssue> {
    let issue = |field: &str, reason: &str, value: &str| ctx.issue(index, field, reason, value);
    let Some(obj) = v.as_object() else {
        return Err(issue("job", "not a JSON object", &v.to_string()));
    };
    let text = |key: &str| opt_text(obj, key).map_err(|got| issue(key, "not a string", &got));
    let time =
        |key: &str, field: &str, holder: &Map<String, Value>| -> Result<Option<f64>, RowIssue> {
            match opt_text(holder, key) {
                Ok(None) => Ok(None),
                Ok(Some(raw)) => parse_timestamp(&raw)
                    .map(Some)
                    .ok_or_else(|| issue(field, "not a YYYY-MM-DD HH:MM:SS time", &raw)),
                Err(got) => Err(issue(field, "not a string", &got)),
            }
        };

    let job_id = text("jobid")?.ok_or_else(|| issue("jobid", "missing", ""))?;
    let submit = time("submitted_time", "submitted_time", obj)?
        .ok_or_else(|| issue("submitted_time", "missing", ""))?;
    let user = text("user")?;
    let vc = text("vc")?;
    let raw_status = text("status")?;

    let attempts: &[Value] = match obj.get("attempts") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => return Err(issue("attempts", "not a list", &other.to_string())),
    };
    let mut starts = Vec::with_capacity(attempts.len());
    let mut ends = Vec::with_capacity(attempts.len());
    for (i, a) in attempts.iter().enumerate() {
        let Some(a) = a.as_object() else {
            return Err(issue(
                &format!("attempts[{i}]"),
                "not a JSON object",
                &a.to_string(),
            ));
        };
        starts.push(time("start_time", &format!("attempts[{i}].start_time"), a)?);
        ends.push(time("end_time", &format!("attempts[{i}].end_time"), a)?);
    }
    let (num_gpus, num_nodes) = match attempts.first().and_then(Value::as_object) {
        Some(first) => {
            first_allocation(first).map_err(|(field, got)| issue(&field, "not a list", &got))?
        }
        None => (None, None),
    };
    let start = starts.first().copied().flatten();
    let still_running = !attempts.is_empty() && ends.last().copied().flatten().is_none();
    let end = ends.last().copied().flatten();

    if let Some(s) = start {
        if s < submit {
            let raw = raw_time(attempts.first(), "start_time");
            return Err(issue(
                "attempts[0].start_time",
                "before submitted_time",
                &raw,
            ));
        }
        if end.is_some_and(|e| e < s) {
            let last = attempts.len().saturating_sub(1);
            return Err(issue(
                &format!("attempts[{last}].end_time"),
                "before the first attempt's start_time",
                &raw_time(attempts.last(), "end_time"),
            ));
        }
    }

    let status = match raw_status.as_deref() {
        _ if still_running => JobStatus::Unknown,
        Some("Pass") => JobStatus::Completed,
        Some("Failed") => JobStatus::Failed,
        Some("Killed") => JobStatus::Killed,
        _ => JobStatus::Unknown,
    };
    // Tallies for kept jobs only (every check has passed).
    ctx.tally_kept(still_running, attempts.is_empty(), raw_status.as_deref());
    Ok(JobRecord {
        job_id,
        submit_time: submit,
        start_time: start,
        queue_wait: start.map(|s| s - submit),
        end_time: end,
        duration: start.zip(end).map(|(s, e)| e - s),
        num_gpus,
        num_nodes,
        user,
        group: vc,
        status,
        source: "philly-joblog".into(),
        ..Default::default()
    })
}

/// An attempt's time as written, for an issue's value.
fn raw_time(attempt: Option<&Value>, key: &str) -> String {
    attempt
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// GPUs and servers of an attempt's `detail`: `(None, None)` when it lists no server, and
/// GPUs `None` when a server has no `gpus` list. On a value of the wrong shape, the field
/// path and the value.
fn first_allocation(
    attempt: &Map<String, Value>,
) -> Result<(Option<f64>, Option<f64>), (String, String)> {
    let detail = match attempt.get("detail") {
        None | Some(Value::Null) => return Ok((None, None)),
        Some(Value::Array(d)) => d,
        Some(other) => return Err(("attempts[0].detail".into(), other.to_string())),
    };
    if detail.is_empty() {
        return Ok((None, None));
    }
    let mut gpus = Some(0usize);
    for (j, server) in detail.iter().enumerate() {
        let Some(server) = server.as_object() else {
            return Err((format!("attempts[0].detail[{j}]"), server.to_string()));
        };
        match server.get("gpus") {
            Some(Value::Array(g)) => gpus = gpus.map(|n| n + g.len()),
            None | Some(Value::Null) => gpus = None,
            Some(other) => {
                return Err((format!("attempts[0].detail[{j}].gpus"), other.to_string()))
            }
        }
    }
    Ok((gpus.map(|n| n as f64), Some(detail.len() as f64)))
}
