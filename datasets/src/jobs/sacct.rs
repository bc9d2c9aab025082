//! Slurm accounting as `sacct --parsable2` prints it: `|`-separated, one header line naming
//! the fields, one row per job and per job step. Columns are found by header name (any order;
//! unknown ones are ignored). The recommended command ([`RECOMMENDED_FIELDS`]):
//!
//! ```text
//! sacct -P -a -S <start> -E <end> --format=JobID,JobIDRaw,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,Timelimit,State,NNodes,NCPUS,ReqTRES,AllocTRES,Cluster
//! ```
//!
//! Only `JobID` (or `JobIDRaw`), `Submit` and `State` are required. `--parsable` (`-p`, a `|`
//! after the last field too) reads the same.
//!
//! | sacct field | canonical column |
//! |---|---|
//! | `JobID` (else `JobIDRaw`) | `job_id`, see below for steps, arrays and heterogeneous jobs |
//! | `Submit` / `Start` / `End` | `submit_time` / `start_time` / `end_time` (`Unknown`, `None` → null) |
//! | `Start − Submit` | `queue_wait` |
//! | `Elapsed` | `duration` of jobs that started and ended (else null; derived `End − Start` without it) |
//! | `Timelimit` | `requested_time`; `UNLIMITED` and `Partition_Limit` → null |
//! | `AllocTRES`, else `ReqTRES` | `num_gpus` (`gres/gpu=N`, else the typed counts summed), `gpu_type` (`gres/gpu:TYPE=N`) |
//! | `ReqTRES` `mem=`, else `AllocTRES` | `memory_mib` |
//! | `NCPUS` / `NNodes` (else the TRES `cpu=` / `node=`) | `cpus` / `num_nodes` |
//! | `User` / `Account` / `JobName` / `Cluster` | `user` / `group` / `job_name` / `cluster` |
//! | `Partition` | `queue` (Slurm's partitions are its job queues) |
//! | `QOS` | `qos` |
//! | `Priority` | `priority` (the last priority the controller computed; 0 for held jobs) |
//! | `Eligible` | not stored; counted in a note when later than `Submit` (dependency, `--begin`, hold) |
//! | `State` | `status`: `COMPLETED` → completed; `FAILED`, `NODE_FAIL`, `OUT_OF_MEMORY`, `BOOT_FAIL`, `SPECIAL_EXIT` → failed; `CANCELLED` (`CANCELLED by <uid>`), `TIMEOUT`, `PREEMPTED`, `DEADLINE` → killed; `PENDING`, `RUNNING` and the other not-ended states → unknown |
//!
//! `TIMEOUT` counts as killed, not failed: the schema files jobs stopped by a time limit under
//! killed, and the job did not fail by itself — its run time is cut at the limit (censored),
//! which is what a runtime predictor must know. The Helios reader maps it the same way.
//!
//! Job ids:
//! - **steps** (`123.batch`, `123.extern`, `123.0`) are parts of their job's row and skipped
//!   (not counted as rows read); a note counts them.
//! - **array tasks** (`123_4`) are jobs of their own, id `123_4`. A row for array tasks not
//!   started yet (`123_[5-8%2]`) becomes one pending job per task (`123_5` ... `123_8`, the
//!   `%` throttle dropped), at most 100,000 per row (a longer range is a row error).
//! - **heterogeneous jobs** (`123+0`, `123+1`: one row per component, consecutive in sacct's
//!   output) become one job `123`: earliest submit and start, latest end (null while a
//!   component has none), GPUs, CPUs, nodes and memory summed, the longest time limit, GPU
//!   types joined with `,`, the first component's user, account, name, partition, QOS and
//!   priority, and the status of the least finished component (unknown before failed before
//!   killed before completed).
//!
//! Times are local without a zone (`2026-11-23T07:01:02`, sacct's default `SLURM_TIME_FORMAT`;
//! a space for the `T` is read too): they are read in [`ReadOptions::timezone`], UTC unless
//! set. A local time the zone skips (daylight saving) is a row error.
//!
//! The report counts job rows: `rows_kept` is the job rows read into jobs, so it differs from
//! the number of jobs where heterogeneous rows were merged or array ranges expanded (the notes
//! say by how much).
//!
//! A job that never got an allocation (empty `AllocTRES`) whose `Start` equals its `End` was
//! cancelled while pending (older Slurm prints the cancel time as its start): its start is null.
//! A `|` inside a job name (sacct does not escape it) is put back when the row has more fields
//! than the header and a `JobName` column. Rows with a start before the submission or an end
//! before the start are dropped with a reason, as are unparsable values (file, line, field).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use chrono::{NaiveDate, NaiveDateTime};

use super::slurm::{self, SlurmJobId, TimeLimit, Tres};
use super::Row;
use crate::error::DatasetError;
use crate::input;
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};
use crate::zone::TraceZone;

/// The `--format` field list the reader is made for.
pub const RECOMMENDED_FIELDS: &str = "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,Timelimit,State,NNodes,NCPUS,ReqTRES,AllocTRES,Cluster";

/// Where each field the reader uses is in a row.
struct Columns {
    width: usize,
    /// The header ended with a `|` (`sacct -p`): rows do too.
    trailing_bar: bool,
    job_id: usize,
    job_id_name: &'static str,
    job_name: Option<usize>,
    user: Option<usize>,
    account: Option<usize>,
    partition: Option<usize>,
    qos: Option<usize>,
    priority: Option<usize>,
    submit: usize,
    eligible: Option<usize>,
    start: Option<usize>,
    end: Option<usize>,
    elapsed: Option<usize>,
    timelimit: Option<usize>,
    state: usize,
    nnodes: Option<usize>,
    ncpus: Option<usize>,
    req_tres: Option<usize>,
    alloc_tres: Option<usize>,
    cluster: Option<usize>,
}

impl Columns {
    fn from_header(path: &Path, line: &str) -> Result<Columns, DatasetError> {
        let mut names: Vec<String> = line.split('|').map(|h| h.trim().to_string()).collect();
        let trailing_bar = names.len() > 1 && names.last().is_some_and(|n| n.is_empty());
        if trailing_bar {
            names.pop();
        }
        let find = |name: &str| names.iter().position(|h| h.eq_ignore_ascii_case(name));
        let (job_id, job_id_name) = match (find("JobID"), find("JobIDRaw")) {
            (Some(i), _) => (Some(i), "JobID"),
            (None, Some(i)) => (Some(i), "JobIDRaw"),
            (None, None) => (None, "JobID"),
        };
        let (submit, state) = (find("Submit"), find("State"));
        let (Some(job_id), Some(submit), Some(state)) = (job_id, submit, state) else {
            let missing: Vec<&str> = [("JobID", job_id), ("Submit", submit), ("State", state)]
                .into_iter()
                .filter(|(_, i)| i.is_none())
                .map(|(n, _)| n)
                .collect();
            return Err(DatasetError::format(
                path,
                format!("sacct header lacks {missing:?} (has {names:?}); capture with sacct -P --format={RECOMMENDED_FIELDS}"),
            ));
        };
        Ok(Columns {
            width: names.len(),
            trailing_bar,
            job_id,
            job_id_name,
            job_name: find("JobName"),
            user: find("User"),
            account: find("Account"),
            partition: find("Partition"),
            qos: find("QOS"),
            priority: find("Priority"),
            submit,
            eligible: find("Eligible"),
            start: find("Start"),
            end: find("End"),
            elapsed: find("Elapsed"),
            timelimit: find("Timelimit"),
            state,
            nnodes: find("NNodes"),
            ncpus: find("NCPUS"),
            req_tres: find("ReqTRES"),
            alloc_tres: find("AllocTRES"),
            cluster: find("Cluster"),
        })
    }

    /// Splits a row into the header's fields, rejoining a job name that held a `|` (then the
    /// flag is true). The error is the row's field count when it cannot match the header.
    fn split<'a>(&self, line: &'a str) -> Result<(Vec<std::borrow::Cow<'a, str>>, bool), usize> {
        let mut fields: Vec<&str> = line.split('|').collect();
        if self.trailing_bar && fields.len() == self.width + 1 && fields.last() == Some(&"") {
            fields.pop();
        }
        let extra = fields.len().saturating_sub(self.width);
        let mut out: Vec<std::borrow::Cow<str>> = Vec::with_capacity(self.width);
        match (fields.len().cmp(&self.width), self.job_name) {
            (std::cmp::Ordering::Equal, _) => out.extend(fields.into_iter().map(Into::into)),
            (std::cmp::Ordering::Greater, Some(name)) => {
                out.extend(fields[..name].iter().map(|&f| f.into()));
                out.push(fields[name..=name + extra].join("|").into());
                out.extend(fields[name + extra + 1..].iter().map(|&f| f.into()));
            }
            _ => return Err(fields.len()),
        }
        Ok((out, extra > 0))
    }
}

/// Counts behind the reader's notes.
#[derive(Default)]
struct Tally {
    steps: u64,
    het_rows: u64,
    het_jobs: u64,
    array_rows: u64,
    array_jobs: u64,
    partition_limit: u64,
    unlimited: u64,
    eligible_later: u64,
    bar_in_name: u64,
    never_started: u64,
    unmapped_states: BTreeMap<String, u64>,
}

/// A parsed job row, before its id decides what becomes of it.
struct JobRow {
    id: SlurmJobId,
    record: JobRecord,
}

/// Reads one `sacct --parsable2` file.
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let file = input::display_name(path);
    let mut reader = input::open_lines(path, opts.max_line_bytes)?;
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    let zone = opts.timezone;
    intro_notes(&mut report, zone);
    let mut tally = Tally::default();
    let mut het = HetGroup::default();
    let mut cols: Option<Columns> = None;
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
        let Ok(text) = std::str::from_utf8(&buf) else {
            if cols.is_none() {
                return Err(DatasetError::format(
                    path,
                    "the sacct header is not valid UTF-8",
                ));
            }
            report.rows_read += 1;
            let raw = String::from_utf8_lossy(&buf);
            report.drop_row(line_issue(&file, line_no, "not valid UTF-8", &raw), opts)?;
            continue;
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let Some(c) = &cols else {
            cols = Some(Columns::from_header(
                path,
                text.trim_start_matches('\u{feff}'),
            )?);
            continue;
        };
        let row = match parse_line(c, text, &file, line_no, zone, &mut tally) {
            Ok(None) => continue,
            Ok(Some(row)) => row,
            Err(issue) => {
                report.rows_read += 1;
                report.drop_row(issue, opts)?;
                continue;
            }
        };
        report.rows_read += 1;
        report.rows_kept += 1;
        dispatch(row, &mut het, &mut tally, sink);
    }
    het.flush(&mut tally, sink);
    if cols.is_none() {
        return Err(DatasetError::format(
            path,
            "no sacct header line (was it captured with --noheader?)",
        ));
    }
    add_notes(&mut report, &tally);
    report.files.push(path.display().to_string());
    Ok(report)
}

fn line_issue(file: &str, line: u64, reason: &str, value: &str) -> RowIssue {
    RowIssue {
        file: file.to_string(),
        line,
        field: "row".into(),
        reason: reason.into(),
        value: shown_value(value),
    }
}

/// One data line: `Ok(None)` for a job step (skipped), the parsed job row, or why it is dropped.
fn parse_line(
    cols: &Columns,
    text: &str,
    file: &str,
    line: u64,
    zone: TraceZone,
    tally: &mut Tally,
) -> Result<Option<JobRow>, RowIssue> {
    // A step is skipped whatever else is wrong with its row.
    let id_raw = text.split('|').nth(cols.job_id).unwrap_or("").trim();
    if matches!(slurm::parse_job_id(id_raw), Ok(SlurmJobId::Step)) {
        tally.steps += 1;
        return Ok(None);
    }
    let (owned, rejoined) = cols.split(text).map_err(|n| {
        let counts = format!("{n} fields, the header has {}", cols.width);
        line_issue(
            file,
            line,
            "not as many |-separated fields as the header",
            &counts,
        )
    })?;
    let fields: Vec<&str> = owned.iter().map(|f| f.as_ref()).collect();
    let row = Row {
        file,
        line,
        fields: &fields,
    };
    let id = slurm::parse_job_id(row.raw(cols.job_id))
        .map_err(|reason| row.issue(cols.job_id_name, reason, row.raw(cols.job_id)))?;
    let record = parse_job(&row, cols, zone, tally)?;
    tally.bar_in_name += u64::from(rejoined);
    Ok(Some(JobRow { id, record }))
}

/// A time field: `Unknown`, `None` or empty → null.
fn time(
    row: &Row,
    idx: Option<usize>,
    field: &str,
    zone: TraceZone,
) -> Result<Option<f64>, RowIssue> {
    let Some(idx) = idx else { return Ok(None) };
    let raw = row.raw(idx);
    if raw.is_empty() || raw.eq_ignore_ascii_case("Unknown") || raw.eq_ignore_ascii_case("None") {
        return Ok(None);
    }
    let local = plain_local_time(raw)
        .or_else(|| chrono_local_time(raw))
        .ok_or_else(|| row.issue(field, "not a YYYY-MM-DDTHH:MM:SS time", raw))?;
    zone.to_unix(&local).map(Some).ok_or_else(|| {
        row.issue(
            field,
            "a local time the time zone skips (daylight saving)",
            raw,
        )
    })
}

/// A time in one of the shapes sacct prints, read by chrono.
fn chrono_local_time(raw: &str) -> Option<NaiveDateTime> {
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
}

/// The time sacct prints, `YYYY-MM-DDTHH:MM:SS` (or with a space for the `T`), read digit
/// by digit: what chrono's parse with that format gives, without reading the format for
/// each of a trace's half a million times. Anything else (a leap second included) is
/// `None` and left to chrono's parse.
fn plain_local_time(raw: &str) -> Option<NaiveDateTime> {
    let b = raw.as_bytes();
    let shape = b.len() == 19
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && b[16] == b':';
    if !shape {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let year = i32::try_from(number(0, 4)?).ok()?;
    NaiveDate::from_ymd_opt(year, number(5, 7)?, number(8, 10)?)?.and_hms_opt(
        number(11, 13)?,
        number(14, 16)?,
        number(17, 19)?,
    )
}

/// A TRES list field: null when the column is absent or the field empty.
fn tres(row: &Row, idx: Option<usize>, field: &str) -> Result<Option<Tres>, RowIssue> {
    let Some(raw) = idx.map(|i| row.raw(i)).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    slurm::parse_tres(raw)
        .map(Some)
        .map_err(|reason| row.issue(field, reason, raw))
}

/// `Elapsed`/`Timelimit`-style field → seconds; absent or empty → `None`.
fn duration(row: &Row, idx: Option<usize>, field: &str) -> Result<Option<f64>, RowIssue> {
    let Some(raw) = idx.map(|i| row.raw(i)).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    slurm::parse_duration(raw)
        .map(Some)
        .ok_or_else(|| row.issue(field, "not a Slurm duration ([D-]HH:MM:SS)", raw))
}

/// `Timelimit` → seconds; `UNLIMITED`, `Partition_Limit`, an absent column or an empty field
/// → null (the first two counted for a note).
fn time_limit(row: &Row, idx: Option<usize>, tally: &mut Tally) -> Result<Option<f64>, RowIssue> {
    let Some(raw) = idx.map(|i| row.raw(i)).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    match slurm::parse_time_limit(raw) {
        Some(TimeLimit::Seconds(s)) => Ok(Some(s)),
        Some(TimeLimit::Unlimited) => {
            tally.unlimited += 1;
            Ok(None)
        }
        Some(TimeLimit::PartitionLimit) => {
            tally.partition_limit += 1;
            Ok(None)
        }
        None => Err(row.issue("Timelimit", "not a Slurm time limit", raw)),
    }
}

/// GPUs, GPU type and memory from the TRES lists: GPUs from what the job got (`AllocTRES`),
/// else what it asked for; memory from the request, else the allocation.
struct TresResources {
    num_gpus: Option<f64>,
    gpu_type: Option<String>,
    memory_mib: Option<f64>,
}

impl TresResources {
    fn of(alloc: Option<&Tres>, req: Option<&Tres>) -> TresResources {
        let num_gpus = alloc.or(req).map(|t| t.gpus);
        let gpu_types = [alloc, req]
            .into_iter()
            .flatten()
            .map(|t| &t.gpu_types)
            .find(|t| !t.is_empty());
        TresResources {
            num_gpus,
            gpu_type: gpu_types
                .filter(|_| num_gpus.unwrap_or(0.0) > 0.0)
                .map(|t| t.join(",")),
            memory_mib: req
                .and_then(|t| t.mem_mib)
                .or(alloc.and_then(|t| t.mem_mib)),
        }
    }
}

fn parse_job(
    row: &Row,
    cols: &Columns,
    zone: TraceZone,
    tally: &mut Tally,
) -> Result<JobRecord, RowIssue> {
    let submit = time(row, Some(cols.submit), "Submit", zone)?
        .ok_or_else(|| row.issue("Submit", "missing", row.raw(cols.submit)))?;
    let eligible = time(row, cols.eligible, "Eligible", zone)?;
    let mut start = time(row, cols.start, "Start", zone)?;
    let end = time(row, cols.end, "End", zone)?;
    let alloc = tres(row, cols.alloc_tres, "AllocTRES")?;
    let req = tres(row, cols.req_tres, "ReqTRES")?;
    if cols.alloc_tres.is_some() && alloc.is_none() && start.is_some() && start == end {
        start = None;
        tally.never_started += 1;
    }
    if start.is_some_and(|s| s < submit) {
        return Err(row.issue("Start", "before Submit", row.raw(cols.start.unwrap_or(0))));
    }
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            return Err(row.issue("End", "before Start", row.raw(cols.end.unwrap_or(0))));
        }
    }
    let elapsed = duration(row, cols.elapsed, "Elapsed")?;
    let requested_time = time_limit(row, cols.timelimit, tally)?;
    let state = row.raw(cols.state);
    let status = slurm::map_state(state).unwrap_or_else(|| {
        *tally.unmapped_states.entry(state.to_string()).or_insert(0) += 1;
        JobStatus::Unknown
    });
    if eligible.is_some_and(|e| e > submit) {
        tally.eligible_later += 1;
    }
    let res = TresResources::of(alloc.as_ref(), req.as_ref());
    let from_tres =
        |f: fn(&Tres) -> Option<f64>| alloc.as_ref().and_then(f).or(req.as_ref().and_then(f));
    let mut r = JobRecord {
        submit_time: submit,
        start_time: start,
        end_time: end,
        // Elapsed only means a run time once the job has started and ended.
        duration: if start.is_some() && end.is_some() {
            elapsed
        } else {
            None
        },
        num_gpus: res.num_gpus,
        gpu_type: res.gpu_type,
        num_nodes: row
            .non_negative(cols.nnodes, "NNodes")?
            .or_else(|| from_tres(|t| t.nodes)),
        cpus: row
            .non_negative(cols.ncpus, "NCPUS")?
            .or_else(|| from_tres(|t| t.cpus)),
        memory_mib: res.memory_mib,
        requested_time,
        user: row.text(cols.user),
        group: row.text(cols.account),
        job_name: row.text(cols.job_name),
        cluster: row.text(cols.cluster),
        queue: row.text(cols.partition),
        qos: row.text(cols.qos),
        priority: row.non_negative(cols.priority, "Priority")?,
        status,
        source: "sacct".into(),
        ..Default::default()
    };
    r.derive_times();
    Ok(r)
}

/// Sends a job row on: a job as it is, a pending array range as one job per task, a
/// heterogeneous component into its group.
fn dispatch(row: JobRow, het: &mut HetGroup, tally: &mut Tally, emit: &mut dyn FnMut(JobRecord)) {
    match row.id {
        SlurmJobId::HetComponent { job, .. } => {
            if het.job.as_deref() != Some(job.as_str()) {
                het.flush(tally, emit);
                het.job = Some(job);
            }
            tally.het_rows += 1;
            het.parts.push(row.record);
        }
        SlurmJobId::Job(id) => {
            het.flush(tally, emit);
            emit(JobRecord {
                job_id: id,
                ..row.record
            });
        }
        SlurmJobId::PendingArray { array, tasks } => {
            het.flush(tally, emit);
            tally.array_rows += 1;
            tally.array_jobs += tasks.len() as u64;
            for task in tasks {
                emit(JobRecord {
                    job_id: format!("{array}_{task}"),
                    ..row.record.clone()
                });
            }
        }
        // Steps never get here (skipped in `parse_line`).
        SlurmJobId::Step => {}
    }
}

/// The components of the heterogeneous job being read.
#[derive(Default)]
struct HetGroup {
    job: Option<String>,
    parts: Vec<JobRecord>,
}

impl HetGroup {
    /// Emits the group read so far as one job.
    fn flush(&mut self, tally: &mut Tally, emit: &mut dyn FnMut(JobRecord)) {
        let Some(job) = self.job.take() else { return };
        let parts = std::mem::take(&mut self.parts);
        if let Some(merged) = merge_het(job, parts) {
            tally.het_jobs += 1;
            emit(merged);
        }
    }
}

/// Sum of the components' values; null when none has one.
fn sum(parts: &[JobRecord], f: fn(&JobRecord) -> Option<f64>) -> Option<f64> {
    parts.iter().filter_map(f).reduce(|a, b| a + b)
}

/// One job from its heterogeneous components (see the module docs).
fn merge_het(job: String, parts: Vec<JobRecord>) -> Option<JobRecord> {
    let first = parts.first()?.clone();
    let all_ended = parts.iter().all(|p| p.end_time.is_some());
    let mut gpu_types: Vec<&str> = Vec::new();
    for t in parts
        .iter()
        .filter_map(|p| p.gpu_type.as_deref())
        .flat_map(|t| t.split(','))
    {
        if !gpu_types.contains(&t) {
            gpu_types.push(t);
        }
    }
    let rank = |s: JobStatus| match s {
        JobStatus::Unknown => 3,
        JobStatus::Failed => 2,
        JobStatus::Killed => 1,
        JobStatus::Completed => 0,
    };
    let min = |f: fn(&JobRecord) -> Option<f64>| parts.iter().filter_map(f).reduce(f64::min);
    let max = |f: fn(&JobRecord) -> Option<f64>| parts.iter().filter_map(f).reduce(f64::max);
    let mut r = JobRecord {
        job_id: job,
        submit_time: parts
            .iter()
            .map(|p| p.submit_time)
            .fold(f64::INFINITY, f64::min),
        start_time: min(|p| p.start_time),
        end_time: if all_ended { max(|p| p.end_time) } else { None },
        num_gpus: sum(&parts, |p| p.num_gpus),
        gpu_type: (!gpu_types.is_empty()).then(|| gpu_types.join(",")),
        num_nodes: sum(&parts, |p| p.num_nodes),
        cpus: sum(&parts, |p| p.cpus),
        memory_mib: sum(&parts, |p| p.memory_mib),
        requested_time: max(|p| p.requested_time),
        status: parts
            .iter()
            .map(|p| p.status)
            .max_by_key(|&s| rank(s))
            .unwrap_or_default(),
        ..first
    };
    r.queue_wait = None;
    r.duration = None;
    r.derive_times();
    Some(r)
}

/// How the reader reads every file.
fn intro_notes(report: &mut ReadReport, zone: TraceZone) {
    report.note(format!(
        "sacct: times have no zone in the file and are read in {zone} (the --timezone option; UTC unless given)"
    ));
    report.note("sacct: Partition → queue, QOS → qos, Account → group; GPUs from AllocTRES, else ReqTRES; memory from ReqTRES; UNLIMITED and Partition_Limit time limits → null requested_time");
    report.note("sacct: state COMPLETED → completed; FAILED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, SPECIAL_EXIT → failed; CANCELLED, TIMEOUT, PREEMPTED, DEADLINE → killed; PENDING, RUNNING and other not-ended states → unknown");
}

/// What the reader did with this file.
fn add_notes(report: &mut ReadReport, t: &Tally) {
    if t.steps > 0 {
        report.note(format!("sacct: skipped {} job-step rows (.batch, .extern, .N): each is part of its job's row, not counted as rows read", t.steps));
    }
    if t.het_rows > 0 {
        report.note(format!("sacct: merged {} heterogeneous-job component rows (J+K) into {} jobs J (resources summed, earliest start, latest end)", t.het_rows, t.het_jobs));
    }
    if t.array_rows > 0 {
        report.note(format!(
            "sacct: expanded {} pending array-range rows (J_[a-b]) into {} pending jobs J_i",
            t.array_rows, t.array_jobs
        ));
    }
    if t.partition_limit > 0 {
        report.note(format!("sacct: {} jobs have Timelimit Partition_Limit (the partition's limit, not in the file): requested_time null", t.partition_limit));
    }
    if t.unlimited > 0 {
        report.note(format!(
            "sacct: {} jobs have Timelimit UNLIMITED: requested_time null",
            t.unlimited
        ));
    }
    if t.eligible_later > 0 {
        report.note(format!("sacct: {} jobs became eligible after their submission (dependency, --begin or hold); their queue_wait still counts from Submit", t.eligible_later));
    }
    if t.never_started > 0 {
        report.note(format!("sacct: {} jobs with no allocation and Start = End were cancelled while pending: start_time null", t.never_started));
    }
    if t.bar_in_name > 0 {
        report.note(format!(
            "sacct: {} rows had a `|` inside JobName (sacct does not escape it); rejoined",
            t.bar_in_name
        ));
    }
    report.note_unrecognised("sacct: jobs with an unrecognised State", &t.unmapped_states);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the digit-by-digit reading answers, chrono's parse answers the same; it
    /// answers every well-formed sacct time, and leaves the rest to chrono.
    #[test]
    fn the_plain_time_reading_is_chronos() {
        let fixed = [
            "2026-11-23T07:01:02",
            "2026-11-23 07:01:02",
            "1999-12-31T23:59:59",
            "2024-02-29T00:00:00",
            "2026-02-29T00:00:00",
            "2026-13-01T00:00:00",
            "2026-11-23T24:00:00",
            "2026-11-23T23:60:00",
            "2026-11-23T23:59:60",
            "2026-11-23t07:01:02",
            "2026-11-23T07:01:0",
            "2026-11-23T07:01:02Z",
            "+026-11-23T07:01:02",
            "2026-+1-23T07:01:02",
            "2026-11-23T07:01:-2",
            "0000-01-01T00:00:00",
            "9999-12-31T23:59:59",
            "Unknown",
            "",
        ];
        for raw in fixed {
            let plain = plain_local_time(raw);
            if plain.is_some() {
                assert_eq!(plain, chrono_local_time(raw), "{raw}");
            }
        }
        assert!(plain_local_time("2026-11-23T07:01:02").is_some());
        assert!(plain_local_time("2024-02-29 00:00:00").is_some());
        assert!(plain_local_time("2026-02-29T00:00:00").is_none());
        // every one-byte change of a well-formed time
        let base = b"2026-11-23T07:01:02";
        for at in 0..base.len() {
            for c in [
                b'0', b'1', b'2', b'3', b'5', b'9', b'-', b':', b'T', b' ', b'+', b'x',
            ] {
                let mut m = *base;
                m[at] = c;
                let raw = std::str::from_utf8(&m).unwrap();
                if let Some(t) = plain_local_time(raw) {
                    assert_eq!(Some(t), chrono_local_time(raw), "{raw}");
                }
            }
        }
    }
}
