//! Alibaba PAI GPU cluster trace 2020 (alibaba/clusterdata `cluster-trace-gpu-v2020`):
//! `pai_job_table.csv`, joined on `job_name` with the `pai_task_table.csv` found beside it.
//!
//! Both files are header-less in the release (their headers ship as separate `.header` files);
//! a file whose first line is the header is read too. Columns:
//! - job table: `job_name,inst_id,user,status,start_time,end_time`
//! - task table: `job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type`
//!
//! Times are seconds shifted by an undisclosed constant (read as Unix time in UTC+8 they keep
//! the real time of day and day of week, with fake dates), so the origin is
//! [`TimeOrigin::Relative`]. As the trace's README documents, the *job* `start_time` is the
//! submission time and the earliest *task* `start_time` is when the job launched.
//!
//! | PAI column | canonical column |
//! |---|---|
//! | job `inst_id` | `job_id` (the README says to treat it as the job id; `job_name` if empty) |
//! | job `job_name` | `job_name` (hashed) |
//! | job `start_time` | `submit_time` |
//! | earliest task `start_time` | `start_time`; `queue_wait` = `start − submit` |
//! | job `end_time` | `end_time`; `duration` = `end − start` |
//! | Σ tasks `inst_num × plan_gpu / 100` | `num_gpus` (`plan_gpu` is in percent of one GPU) |
//! | Σ tasks `inst_num × plan_cpu / 100` | `cpus` (`plan_cpu` is in percent of one core) |
//! | Σ tasks `inst_num × plan_mem × 1024` | `memory_mib` (`plan_mem` is in GB, read as GiB) |
//! | `gpu_type` of the task asking for the most GPUs | `gpu_type` (null if no task asks for GPUs) |
//! | job `user` | `user` |
//! | job `status` | `status`: `Terminated` → completed, `Failed` → failed, `Running`/`Waiting` → unknown |
//!
//! A task time of exactly 0 means "not recorded" (the trace's own analysis code reads it so), as
//! does a job `end_time` of 0. A task whose `plan_*` value is empty contributes nothing to that
//! sum; a job none of whose tasks gives the value has it null (counted in a note). When a task
//! row is malformed, its job's task-derived fields (start, requests, GPU type) are left null
//! rather than summed from the remaining tasks. Without a task table, start, duration,
//! queue_wait and every request are null.
//!
//! Jobs whose earliest task started before the job was submitted, or that ended before they
//! were submitted or started, are dropped with a reason. The report counts the rows of both
//! files (`files` lists both), so `rows_read` is job rows plus task rows.
//!
//! Memory: the task table is aggregated per job before the job table is read, so memory grows
//! with the number of jobs (a few hundred bytes each; ~1M jobs in the full trace), not with
//! the number of rows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::fields::{read_csv_rows, CsvColumns, Row};
use crate::error::DatasetError;
use crate::input;
use crate::report::{ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Column names of `pai_job_table.csv` (from `pai_job_table.header`).
pub const JOB_COLUMNS: [&str; 6] = [
    "job_name",
    "inst_id",
    "user",
    "status",
    "start_time",
    "end_time",
];

/// Column names of `pai_task_table.csv` (from `pai_task_table.header`).
pub const TASK_COLUMNS: [&str; 10] = [
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
];

/// Where the task table of a job table is looked for: the job table's name with
/// `pai_job_table` replaced by `pai_task_table`, else `pai_task_table.csv` or
/// `pai_task_table.csv.gz` in the same folder.
pub fn task_table_beside(job_table: &Path) -> Option<PathBuf> {
    let dir = job_table.parent().unwrap_or(Path::new(""));
    let name = input::display_name(job_table);
    let mut candidates = Vec::new();
    if name.contains("pai_job_table") {
        candidates.push(dir.join(name.replace("pai_job_table", "pai_task_table")));
    }
    candidates.push(dir.join("pai_task_table.csv"));
    candidates.push(dir.join("pai_task_table.csv.gz"));
    candidates.into_iter().find(|p| p.is_file())
}

/// Reads `pai_job_table.csv`, with requests and start times from the task table beside it.
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Relative,
        ..Default::default()
    };
    report.note("pai: times are seconds shifted by a constant (relative); submit = the job table's start_time, which PAI documents as the submission time");
    report
        .note("pai: status Terminated → completed, Failed → failed, Running and Waiting → unknown");

    let mut tasks = match task_table_beside(path) {
        Some(task_path) => {
            let mut task_report = ReadReport::default();
            let tasks = read_tasks(&task_path, opts, &mut task_report)?;
            report.note(format!(
                "pai: joined with {}: start = earliest task start (queue_wait = start − submit), end = the job's end_time; num_gpus = Σ inst_num × plan_gpu / 100, cpus = Σ inst_num × plan_cpu / 100, memory_mib = Σ inst_num × plan_mem (GB) × 1024, gpu_type = the task asking for the most GPUs",
                input::display_name(&task_path)
            ));
            report.note(format!(
                "pai: row counts cover both files: {} task-table rows ({} kept)",
                task_report.rows_read, task_report.rows_kept
            ));
            report.merge(task_report, opts);
            Some(tasks)
        }
        None => {
            report.note("pai: no pai_task_table.csv beside the job table: start_time, queue_wait, duration, num_gpus, cpus, memory_mib and gpu_type are null");
            None
        }
    };

    let mut tally = JoinTally::default();
    let headers = header_unless_present(path, "job_name", &JOB_COLUMNS)?;
    read_csv_rows(
        path,
        headers,
        &JOB_COLUMNS,
        opts,
        &mut report,
        |row, cols| parse_job(row, cols, tasks.as_mut(), &mut tally),
        sink,
    )?;
    // `read_csv_rows` pushed the job table last; list it first, as the file asked for.
    if let Some(job_file) = report.files.pop() {
        report.files.insert(0, job_file);
    }
    tally.notes(tasks.as_ref(), &mut report);
    Ok(report)
}

/// `Some(column names)` when the file's first line is not a header starting with `first`.
fn header_unless_present(
    path: &Path,
    first: &str,
    columns: &'static [&'static str],
) -> Result<Option<&'static [&'static str]>, DatasetError> {
    let head = input::peek(path, 1024)?;
    let text = String::from_utf8_lossy(&head);
    let line = text.trim_start_matches('\u{feff}').trim_start();
    let has_header = line
        .split([',', '\n', '\r'])
        .next()
        .is_some_and(|f| f.trim().trim_matches('"').eq_ignore_ascii_case(first));
    Ok((!has_header).then_some(columns))
}

/// What the task table says about one job.
#[derive(Debug, Default)]
struct TaskAgg {
    gpus: Sum,
    cpus: Sum,
    mem_gb: Sum,
    /// GPUs of the task asking for the most, and its GPU type.
    top_gpu: Option<(f64, Option<Rc<str>>)>,
    first_start: Option<f64>,
    /// A task row of this job was malformed: its task-derived fields are unknown.
    tainted: bool,
    /// The job table has this job.
    used: bool,
}

/// A sum over tasks of which some may not give the value.
#[derive(Debug, Default, Clone, Copy)]
struct Sum {
    total: f64,
    known: u32,
    missing: u32,
}

impl Sum {
    fn add(&mut self, v: Option<f64>) {
        match v {
            Some(v) => {
                self.total += v;
                self.known += 1;
            }
            None => self.missing += 1,
        }
    }

    fn value(self) -> Option<f64> {
        (self.known > 0).then_some(self.total)
    }

    fn partial(self) -> bool {
        self.known > 0 && self.missing > 0
    }
}

/// A PAI time: empty or exactly 0 means not recorded.
fn pai_time(row: &Row, idx: usize, field: &str) -> Result<Option<f64>, RowIssue> {
    Ok(row.non_negative(Some(idx), field)?.filter(|&t| t != 0.0))
}

fn read_tasks(
    path: &Path,
    opts: &ReadOptions,
    report: &mut ReadReport,
) -> Result<HashMap<Box<str>, TaskAgg>, DatasetError> {
    let headers = header_unless_present(path, "job_name", &TASK_COLUMNS)?;
    let mut aggs: HashMap<Box<str>, TaskAgg> = HashMap::new();
    let mut tainted: HashSet<Box<str>> = HashSet::new();
    let mut gpu_types: HashMap<String, Rc<str>> = HashMap::new();
    read_csv_rows(
        path,
        headers,
        &TASK_COLUMNS,
        opts,
        report,
        |row, cols| {
            let job = row.raw(cols.at("job_name"));
            if job.is_empty() {
                return Err(row.issue("job_name", "missing", job));
            }
            match parse_task(row, cols) {
                Ok(task) => Ok((Box::<str>::from(job), task)),
                Err(issue) => {
                    tainted.insert(job.into());
                    Err(issue)
                }
            }
        },
        |(job, task)| {
            let agg = aggs.entry(job).or_default();
            let scale = |v: Option<f64>| task.inst_num.zip(v).map(|(n, v)| n * v);
            let gpus = scale(task.plan_gpu).map(|g| g / 100.0);
            agg.gpus.add(gpus);
            agg.cpus.add(scale(task.plan_cpu).map(|c| c / 100.0));
            agg.mem_gb.add(scale(task.plan_mem));
            if let Some(g) = gpus.filter(|&g| g > 0.0) {
                if agg.top_gpu.as_ref().is_none_or(|(top, _)| g > *top) {
                    let ty = task.gpu_type.map(|t| {
                        gpu_types
                            .entry(t)
                            .or_insert_with_key(|t| Rc::from(t.as_str()))
                            .clone()
                    });
                    agg.top_gpu = Some((g, ty));
                }
            }
            if let Some(s) = task.start {
                agg.first_start = Some(agg.first_start.map_or(s, |f: f64| f.min(s)));
            }
        },
    )?;
    for job in tainted {
        aggs.entry(job).or_default().tainted = true;
    }
    Ok(aggs)
}

/// The parts of a task row the join uses.
struct Task {
    inst_num: Option<f64>,
    start: Option<f64>,
    plan_cpu: Option<f64>,
    plan_mem: Option<f64>,
    plan_gpu: Option<f64>,
    gpu_type: Option<String>,
}

fn parse_task(row: &Row, cols: &CsvColumns) -> Result<Task, RowIssue> {
    let start = pai_time(row, cols.at("start_time"), "start_time")?;
    let end = pai_time(row, cols.at("end_time"), "end_time")?;
    if let (Some(s), Some(e)) = (start, end) {
        if e < s {
            return Err(row.issue(
                "end_time",
                "before start_time",
                row.raw(cols.at("end_time")),
            ));
        }
    }
    Ok(Task {
        inst_num: row.non_negative(Some(cols.at("inst_num")), "inst_num")?,
        start,
        plan_cpu: row.non_negative(Some(cols.at("plan_cpu")), "plan_cpu")?,
        plan_mem: row.non_negative(Some(cols.at("plan_mem")), "plan_mem")?,
        plan_gpu: row.non_negative(Some(cols.at("plan_gpu")), "plan_gpu")?,
        gpu_type: row.text(Some(cols.at("gpu_type"))),
    })
}

/// Counts for the notes at the end of a read.
#[derive(Default)]
struct JoinTally {
    without_tasks: u64,
    tainted: u64,
    partial: u64,
    inst_id_missing: u64,
    unmapped_status: BTreeMap<String, u64>,
}

impl JoinTally {
    fn notes(self, tasks: Option<&HashMap<Box<str>, TaskAgg>>, report: &mut ReadReport) {
        if let Some(tasks) = tasks {
            let orphans = tasks.values().filter(|a| !a.used).count();
            if orphans > 0 {
                report.note(format!(
                    "pai: {orphans} job name(s) in the task table are not in the job table (their tasks are unused)"
                ));
            }
            if self.without_tasks > 0 {
                report.note(format!(
                    "pai: {} job(s) have no task rows: start and requests null",
                    self.without_tasks
                ));
            }
        }
        if self.tainted > 0 {
            report.note(format!(
                "pai: {} job(s) had a malformed task row: their start, requests and gpu_type are null",
                self.tainted
            ));
        }
        if self.partial > 0 {
            report.note(format!(
                "pai: {} job(s) have tasks with an empty plan_gpu/plan_cpu/plan_mem; those sums cover only the tasks that give a value",
                self.partial
            ));
        }
        if self.inst_id_missing > 0 {
            report.note(format!(
                "pai: {} job(s) have no inst_id; job_id is their job_name",
                self.inst_id_missing
            ));
        }
        report.note_unrecognised(
            "pai: jobs with an empty or unrecognised status",
            &self.unmapped_status,
        );
    }
}

fn parse_job(
    row: &Row,
    cols: &CsvColumns,
    tasks: Option<&mut HashMap<Box<str>, TaskAgg>>,
    tally: &mut JoinTally,
) -> Result<JobRecord, RowIssue> {
    let name = row.raw(cols.at("job_name"));
    if name.is_empty() {
        return Err(row.issue("job_name", "missing", name));
    }
    let submit = row
        .non_negative(Some(cols.at("start_time")), "start_time")?
        .ok_or_else(|| row.issue("start_time", "missing", ""))?;
    let end = pai_time(row, cols.at("end_time"), "end_time")?;
    if let Some(e) = end {
        if e < submit {
            return Err(row.issue(
                "end_time",
                "before start_time (the submission)",
                row.raw(cols.at("end_time")),
            ));
        }
    }
    let raw_status = row.raw(cols.at("status"));
    let status = match raw_status {
        "Terminated" => JobStatus::Completed,
        "Failed" => JobStatus::Failed,
        // Running, Waiting (not ended when the trace was cut), or unrecognised (tallied below).
        _ => JobStatus::Unknown,
    };

    let mut r = JobRecord {
        job_id: String::new(),
        submit_time: submit,
        end_time: end,
        user: row.text(Some(cols.at("user"))),
        job_name: Some(name.to_string()),
        status,
        source: "pai".into(),
        ..Default::default()
    };
    let have_tasks = tasks.is_some();
    let agg: Option<&TaskAgg> = tasks.and_then(|t| t.get_mut(name)).map(|a| {
        a.used = true;
        &*a
    });
    match agg {
        Some(agg) if agg.tainted => {}
        Some(agg) => apply_tasks(&mut r, agg, row, cols)?,
        None => {}
    }
    r.derive_times();

    // Tallies only for rows that are kept (every check above has passed).
    if let Some(agg) = agg {
        if agg.tainted {
            tally.tainted += 1;
        } else if agg.gpus.partial() || agg.cpus.partial() || agg.mem_gb.partial() {
            tally.partial += 1;
        }
    } else if have_tasks {
        tally.without_tasks += 1;
    }
    if !matches!(raw_status, "Terminated" | "Failed" | "Running" | "Waiting") {
        *tally
            .unmapped_status
            .entry(raw_status.to_string())
            .or_insert(0) += 1;
    }
    r.job_id = match row.text(Some(cols.at("inst_id"))) {
        Some(id) => id,
        None => {
            tally.inst_id_missing += 1;
            name.to_string()
        }
    };
    Ok(r)
}

/// Fills a job from its tasks' totals: the earliest task start (refused before the
/// submission or after the end), GPUs, CPUs, memory and the GPU type of most tasks.
fn apply_tasks(
    r: &mut JobRecord,
    agg: &TaskAgg,
    row: &Row,
    cols: &CsvColumns,
) -> Result<(), RowIssue> {
    if let Some(s) = agg.first_start {
        if s < r.submit_time {
            return Err(row.issue(
                "start_time",
                "earliest task start_time is before the job's submission",
                row.raw(cols.at("start_time")),
            ));
        }
        if r.end_time.is_some_and(|e| e < s) {
            return Err(row.issue(
                "end_time",
                "before the earliest task start_time",
                row.raw(cols.at("end_time")),
            ));
        }
    }
    r.start_time = agg.first_start;
    r.num_gpus = agg.gpus.value();
    r.cpus = agg.cpus.value();
    r.memory_mib = agg.mem_gb.value().map(|gb| gb * 1024.0);
    r.gpu_type = agg
        .top_gpu
        .as_ref()
        .and_then(|(_, ty)| ty.as_deref().map(str::to_string));
    Ok(())
}
