//! Cluster-description readers: what the machines are, how fast each GPU type runs each job
//! type, when nodes fail, and published per-cluster summary statistics.
//!
//! - [`read_openb_nodes`]: Alibaba openb `openb_node_list_gpu_node.csv`
//!   (`sn,cpu_milli,memory_mib,gpu,model`) → [`ClusterNode`].
//! - [`read_gavel_throughputs`]: Gavel's throughput JSON (GPU → `"(job type, scale factor)"` →
//!   `{"null": isolated steps/s, "(other job, scale)": [this job, other job] co-located}`) →
//!   [`GavelThroughputs`]; [`relative_speeds`] turns the isolated throughputs into a speed
//!   factor per GPU type. A throughput of 0 means the job was not run / does not fit on that GPU.
//! - [`read_fault_trace`]: StepFun `fault_trace.json` (fault_start / fault_end events, times in
//!   days) → [`FaultEpisode`]s in seconds. Events are paired per (node, level, class, desc) in
//!   time order; an unmatched start or end is a row issue.
//! - [`read_fault_statistics`]: `fault_statistics.json` → [`FaultStatistics`] (counts by level,
//!   class and description).
//! - [`read_cluster_summary`]: Helios/AcmeTrace per-cluster summary CSVs →
//!   [`ClusterSummaryRow`] (id + named numeric columns; empty cells are left out).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::curves::{req_count, req_text};
use crate::error::DatasetError;
use crate::input;
use crate::jobs::read_csv_rows;
use crate::json_stream::{self, JsonKey};
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};

fn json_issue(file: &str, line: usize, field: &str, reason: &str, value: &str) -> RowIssue {
    RowIssue {
        file: file.to_string(),
        line: line as u64,
        field: field.to_string(),
        reason: reason.to_string(),
        value: shown_value(value),
    }
}

/// Row accounting for a JSON file whose rows are its leaf values, numbered 1, 2, ... in file
/// order.
struct JsonRows<'a> {
    file: String,
    opts: &'a ReadOptions,
    report: ReadReport,
    /// The current row's line (its 1-based position).
    line: usize,
}

impl<'a> JsonRows<'a> {
    fn new(path: &Path, opts: &'a ReadOptions) -> Self {
        JsonRows {
            file: input::display_name(path),
            opts,
            report: ReadReport::default(),
            line: 0,
        }
    }

    /// Moves on to the next row and counts it as read.
    fn next(&mut self) {
        self.line += 1;
        self.report.rows_read += 1;
    }

    /// Drops the current row as malformed (an error in strict mode).
    fn drop_row(&mut self, field: &str, reason: &str, value: &str) -> Result<(), DatasetError> {
        let issue = json_issue(&self.file, self.line, field, reason, value);
        self.report.drop_row(issue, self.opts)
    }
}

// ---------------------------------------------------------------------------------------------
// openb nodes.

/// A machine of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterNode {
    /// Node name (serial number).
    pub name: String,
    /// CPU cores (`cpu_milli / 1000`).
    pub cpus: f64,
    /// Memory, MiB.
    pub memory_mib: f64,
    /// GPUs on the node.
    pub gpus: u32,
    /// GPU model (`V100M16`, `T4`, `G2`, ...); `None` for CPU-only nodes.
    pub gpu_model: Option<String>,
}

/// Reads the openb node list (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn read_openb_nodes(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<ClusterNode>, ReadReport), DatasetError> {
    let mut report = ReadReport::default();
    report.note("openb nodes: cpus = cpu_milli / 1000");
    let mut nodes = Vec::new();
    read_csv_rows(
        path,
        None,
        &["sn", "cpu_milli", "memory_mib", "gpu", "model"],
        opts,
        &mut report,
        |row, cols| {
            let gpus = req_count(row, cols.at("gpu"), "gpu")?;
            let cpu_milli = row
                .non_negative(Some(cols.at("cpu_milli")), "cpu_milli")?
                .ok_or_else(|| row.issue("cpu_milli", "missing", ""))?;
            let memory_mib = row
                .non_negative(Some(cols.at("memory_mib")), "memory_mib")?
                .ok_or_else(|| row.issue("memory_mib", "missing", ""))?;
            Ok(ClusterNode {
                name: req_text(row, cols.at("sn"), "sn")?,
                cpus: cpu_milli / 1000.0,
                memory_mib,
                gpus: u32::try_from(gpus)
                    .map_err(|_| row.issue("gpu", "too large", &gpus.to_string()))?,
                gpu_model: row.text(Some(cols.at("model"))),
            })
        },
        |n| nodes.push(n),
    )?;
    Ok((nodes, report))
}

// ---------------------------------------------------------------------------------------------
// Gavel throughputs.

/// Isolated throughput of a job type on a GPU type (Gavel's `"null"` entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GavelThroughput {
    /// GPU type (`k80`, `p100`, `v100`, `v100_unconsolidated`, ...).
    pub gpu: String,
    /// Job type (`ResNet-50 (batch size 64)`).
    pub job_type: String,
    /// GPUs the job uses.
    pub scale_factor: u32,
    /// Training steps per second alone on the GPU(s); 0 when it was not run / does not fit.
    pub steps_per_s: f64,
    /// How many co-located measurements the file has for this job on this GPU.
    pub colocated_pairs: u32,
}

/// Throughputs of two jobs sharing a GPU type (a Gavel co-located pair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GavelColocated {
    /// GPU type.
    pub gpu: String,
    /// The job.
    pub job_type: String,
    /// Its scale factor.
    pub scale_factor: u32,
    /// The job it shares with.
    pub other_job_type: String,
    /// The other job's scale factor.
    pub other_scale_factor: u32,
    /// The job's steps per second while sharing.
    pub steps_per_s: f64,
    /// The other job's steps per second while sharing.
    pub other_steps_per_s: f64,
}

/// A Gavel throughput file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GavelThroughputs {
    /// Isolated throughputs, by GPU then job type then scale factor.
    pub isolated: Vec<GavelThroughput>,
    /// Co-located pairs, in the same order.
    pub colocated: Vec<GavelColocated>,
}

/// Parses Gavel's `"('ResNet-50 (batch size 64)', 1)"` key into job type and scale factor.
pub fn parse_gavel_job_key(key: &str) -> Option<(String, u32)> {
    let inner = key.trim().strip_prefix('(')?.strip_suffix(')')?;
    let (name, scale) = inner.rsplit_once(',')?;
    let name = name.trim();
    let name = name
        .strip_prefix('\'')
        .and_then(|n| n.strip_suffix('\''))
        .or_else(|| name.strip_prefix('"').and_then(|n| n.strip_suffix('"')))
        .unwrap_or(name);
    let scale = scale.trim().parse().ok()?;
    (!name.is_empty()).then(|| (name.to_string(), scale))
}

/// Reads a Gavel throughput JSON. Rows are the numbers in the file: every isolated entry and
/// every co-located pair (line = its 1-based position, GPU by GPU).
pub fn read_gavel_throughputs(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(GavelThroughputs, ReadReport), DatasetError> {
    // Streamed one job entry at a time; kept by name (GPU, then job), as a JSON object holds
    // them, so rows are numbered in that order.
    let mut gpus: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    json_stream::walk(path, opts, &|keys| keys.len() < 2, &mut |keys, v| {
        let names: Vec<&str> = keys.iter().filter_map(JsonKey::member).collect();
        match (keys.len(), names.as_slice()) {
            (0, _) if v.is_object() => Ok(()),
            (1, [gpu]) if v.is_object() => {
                gpus.insert(gpu.to_string(), BTreeMap::new());
                Ok(())
            }
            (1, [gpu]) => Err(DatasetError::format(
                path,
                format!("GPU `{gpu}` is not an object of job types"),
            )),
            (2, [gpu, key]) => {
                if let Some(jobs) = gpus.get_mut(*gpu) {
                    jobs.insert(key.to_string(), v);
                }
                Ok(())
            }
            _ => Err(DatasetError::format(
                path,
                "expected a JSON object of GPU type → \"(job type, scale factor)\" → throughputs",
            )),
        }
    })?;
    let mut rows = JsonRows::new(path, opts);
    rows.report.note("gavel: steps/s; `null` = the job alone, other keys = co-located with that job ([this, other]); 0 = not run / does not fit");
    let mut out = GavelThroughputs::default();
    for (gpu, jobs) in &gpus {
        for (key, entry) in jobs {
            read_gavel_entry(gpu, key, entry, &mut rows, &mut out)?;
        }
    }
    sort_gavel(&mut out);
    let mut report = rows.report;
    let zeros = out.isolated.iter().filter(|t| t.steps_per_s == 0.0).count();
    if zeros > 0 {
        report.note(format!(
            "gavel: {zeros} isolated throughput(s) are 0 (job not run / does not fit on that GPU); relative_speeds skips them"
        ));
    }
    report.files.push(path.display().to_string());
    Ok((out, report))
}

/// One job's entry on one GPU: its isolated throughput (key `null`), kept once the entry is
/// read with its count of co-located pairs, and every co-located pair.
fn read_gavel_entry(
    gpu: &str,
    key: &str,
    entry: &Value,
    rows: &mut JsonRows,
    out: &mut GavelThroughputs,
) -> Result<(), DatasetError> {
    let Some(entry) = entry.as_object() else {
        rows.next();
        return rows.drop_row(
            &format!("{gpu}/{key}"),
            "not an object of throughputs",
            &entry.to_string(),
        );
    };
    let job = parse_gavel_job_key(key);
    let mut pairs = 0u32;
    let mut isolated = None;
    for (other, v) in entry {
        rows.next();
        let field = format!("{gpu}/{key}/{other}");
        let Some((job_type, scale)) = job.clone() else {
            rows.drop_row(&field, "job key is not \"(job type, scale factor)\"", key)?;
            continue;
        };
        if other == "null" {
            match non_negative(v.as_f64()) {
                Some(x) => {
                    isolated = Some((job_type, scale, x));
                    rows.report.rows_kept += 1;
                }
                None => rows.drop_row(&field, "not a non-negative number", &v.to_string())?,
            }
            continue;
        }
        let Some((other_type, other_scale)) = parse_gavel_job_key(other) else {
            rows.drop_row(&field, "job key is not \"(job type, scale factor)\"", other)?;
            continue;
        };
        let pair = v.as_array().filter(|a| a.len() == 2).and_then(|a| {
            Some((
                non_negative(a.first()?.as_f64())?,
                non_negative(a.get(1)?.as_f64())?,
            ))
        });
        match pair {
            Some((mine, theirs)) => {
                pairs += 1;
                rows.report.rows_kept += 1;
                out.colocated.push(GavelColocated {
                    gpu: gpu.to_string(),
                    job_type,
                    scale_factor: scale,
                    other_job_type: other_type,
                    other_scale_factor: other_scale,
                    steps_per_s: mine,
                    other_steps_per_s: theirs,
                });
            }
            None => rows.drop_row(&field, "not a pair of non-negative numbers", &v.to_string())?,
        }
    }
    if let Some((job_type, scale_factor, steps_per_s)) = isolated {
        out.isolated.push(GavelThroughput {
            gpu: gpu.to_string(),
            job_type,
            scale_factor,
            steps_per_s,
            colocated_pairs: pairs,
        });
    }
    Ok(())
}

/// A finite non-negative number, else `None`.
fn non_negative(x: Option<f64>) -> Option<f64> {
    x.filter(|x| x.is_finite() && *x >= 0.0)
}

/// Orders a Gavel file's entries by GPU, job type and scale factor (then the other job's).
fn sort_gavel(out: &mut GavelThroughputs) {
    let order = |g: &str, j: &str, s: u32| (g.to_string(), j.to_string(), s);
    out.isolated.sort_by(|a, b| {
        order(&a.gpu, &a.job_type, a.scale_factor).cmp(&order(&b.gpu, &b.job_type, b.scale_factor))
    });
    out.colocated.sort_by(|a, b| {
        (
            &a.gpu,
            &a.job_type,
            a.scale_factor,
            &a.other_job_type,
            a.other_scale_factor,
        )
            .cmp(&(
                &b.gpu,
                &b.job_type,
                b.scale_factor,
                &b.other_job_type,
                b.other_scale_factor,
            ))
    });
}

/// Speed of each GPU type relative to `reference` (e.g. `k80`): the median, over the
/// (job type, scale factor) pairs measured with a non-zero throughput on both, of
/// `throughput(gpu) / throughput(reference)`. GPU types sharing no such pair are left out;
/// the reference itself maps to 1.
pub fn relative_speeds(isolated: &[GavelThroughput], reference: &str) -> BTreeMap<String, f64> {
    let base: HashMap<(&str, u32), f64> = isolated
        .iter()
        .filter(|t| t.gpu == reference && t.steps_per_s > 0.0)
        .map(|t| ((t.job_type.as_str(), t.scale_factor), t.steps_per_s))
        .collect();
    let mut ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for t in isolated.iter().filter(|t| t.steps_per_s > 0.0) {
        if let Some(b) = base.get(&(t.job_type.as_str(), t.scale_factor)) {
            ratios
                .entry(t.gpu.clone())
                .or_default()
                .push(t.steps_per_s / b);
        }
    }
    ratios
        .into_iter()
        .filter_map(|(gpu, mut r)| {
            r.sort_by(f64::total_cmp);
            let n = r.len();
            let median = match n {
                0 => return None,
                _ if n % 2 == 1 => *r.get(n / 2)?,
                _ => (r.get(n / 2 - 1)? + r.get(n / 2)?) / 2.0,
            };
            Some((gpu, median))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Node faults.

/// Seconds per day (fault-trace times are in days).
const DAY_S: f64 = 86_400.0;

/// One fault of one node, from its `fault_start` to its `fault_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultEpisode {
    /// Node (hashed id).
    pub node_id: String,
    /// Start, seconds since the trace origin.
    pub start_s: f64,
    /// End, seconds since the trace origin.
    pub end_s: f64,
    /// Level (`Hardware Failure`, `Software Failure`, `Other Failure`).
    pub level: String,
    /// Class (`GPU`, `NIC`, ...).
    pub class: String,
    /// Description (`GPU xid Error`, ...).
    pub desc: String,
}

impl FaultEpisode {
    /// How long the node was faulty, seconds.
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

struct FaultEvent {
    line: usize,
    node: String,
    time_days: f64,
    start: bool,
    level: String,
    class: String,
    desc: String,
}

/// Reads `fault_trace.json` and pairs its events into [`FaultEpisode`]s (sorted by start, then
/// node). Rows are events; an event that is malformed or has no partner is dropped as a row
/// issue (line = its 1-based position in the file).
pub fn read_fault_trace(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<FaultEpisode>, ReadReport), DatasetError> {
    let file = input::display_name(path);
    let mut report = ReadReport::default();
    report.note("node faults: event_time in days since the trace origin, converted to seconds; start/end paired per (node, level, class, desc) in time order");
    let mut parsed = Vec::new();
    json_stream::walk(
        path,
        opts,
        &|keys| keys.is_empty(),
        &mut |keys, e| match keys {
            [] if e.is_array() => Ok(()),
            [JsonKey::Index(i)] => {
                report.rows_read += 1;
                match parse_fault_event(&file, i + 1, &e) {
                    Ok(ev) => parsed.push(ev),
                    Err(issue) => report.drop_row(issue, opts)?,
                }
                Ok(())
            }
            _ => Err(DatasetError::format(
                path,
                "expected a JSON list of events {node_id, event_time, event_type, fault_type}",
            )),
        },
    )?;
    parsed.sort_by(|a, b| {
        a.time_days
            .total_cmp(&b.time_days)
            .then(a.line.cmp(&b.line))
    });
    let mut open: HashMap<(String, String, String, String), VecDeque<FaultEvent>> = HashMap::new();
    let mut episodes = Vec::new();
    for ev in parsed {
        let key = (
            ev.node.clone(),
            ev.level.clone(),
            ev.class.clone(),
            ev.desc.clone(),
        );
        if ev.start {
            open.entry(key).or_default().push_back(ev);
            continue;
        }
        match open.get_mut(&key).and_then(VecDeque::pop_front) {
            Some(start) => {
                report.rows_kept += 2;
                episodes.push(FaultEpisode {
                    node_id: ev.node,
                    start_s: start.time_days * DAY_S,
                    end_s: ev.time_days * DAY_S,
                    level: ev.level,
                    class: ev.class,
                    desc: ev.desc,
                });
            }
            None => report.drop_row(
                json_issue(
                    &file,
                    ev.line,
                    "event_type",
                    "fault_end without an open fault_start for this node and fault",
                    &ev.node,
                ),
                opts,
            )?,
        }
    }
    let mut unmatched: Vec<FaultEvent> = open.into_values().flatten().collect();
    unmatched.sort_by_key(|e| e.line);
    for ev in unmatched {
        report.drop_row(
            json_issue(
                &file,
                ev.line,
                "event_type",
                "fault_start never ended",
                &ev.node,
            ),
            opts,
        )?;
    }
    episodes.sort_by(|a, b| {
        a.start_s
            .total_cmp(&b.start_s)
            .then_with(|| a.node_id.cmp(&b.node_id))
    });
    report.files.push(path.display().to_string());
    Ok((episodes, report))
}

fn parse_fault_event(file: &str, line: usize, e: &Value) -> Result<FaultEvent, RowIssue> {
    let issue = |field: &str, reason: &str, v: Option<&Value>| {
        json_issue(
            file,
            line,
            field,
            reason,
            &v.map(Value::to_string).unwrap_or_default(),
        )
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let node = text(e.get("node_id"))
        .ok_or_else(|| issue("node_id", "missing or not text", e.get("node_id")))?;
    let t = e.get("event_time");
    let time_days = t
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
        .ok_or_else(|| issue("event_time", "missing or not a number", t))?;
    let ty = e.get("event_type");
    let start = match ty.and_then(Value::as_str) {
        Some("fault_start") => true,
        Some("fault_end") => false,
        _ => return Err(issue("event_type", "not fault_start / fault_end", ty)),
    };
    let ft = e.get("fault_type");
    let part = |k: &str| -> Result<String, RowIssue> {
        text(ft.and_then(|f| f.get(k)))
            .ok_or_else(|| issue(&format!("fault_type.{k}"), "missing or not text", ft))
    };
    Ok(FaultEvent {
        line,
        node,
        time_days,
        start,
        level: part("Level")?,
        class: part("Class")?,
        desc: part("Desc")?,
    })
}

/// Fault counts of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultClassStats {
    /// Class (`GPU`, `NIC`, ...).
    pub class: String,
    /// `ClassTotal` as recorded.
    pub total: u64,
    /// Count per description.
    pub descs: BTreeMap<String, u64>,
}

/// Fault counts of one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultLevelStats {
    /// Level (`Hardware Failure`, ...).
    pub level: String,
    /// `LevelTotal` as recorded.
    pub total: u64,
    /// Classes, by name.
    pub classes: Vec<FaultClassStats>,
}

/// `fault_statistics.json`: counts by level → class → description.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultStatistics {
    /// Levels, by name.
    pub levels: Vec<FaultLevelStats>,
}

impl FaultStatistics {
    /// Sum of the level totals.
    pub fn total(&self) -> u64 {
        self.levels.iter().map(|l| l.total).sum()
    }
}

/// Reads `fault_statistics.json`. Rows are the per-description counts; totals that disagree
/// with the sum of their parts are noted (the recorded totals are kept).
pub fn read_fault_statistics(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(FaultStatistics, ReadReport), DatasetError> {
    let root = json_stream::read_value(path, opts, &|keys| keys.len() < 2)?;
    let Some(levels) = root.as_object() else {
        return Err(DatasetError::format(
            path,
            "expected a JSON object of level → class → counts",
        ));
    };
    let mut rows = JsonRows::new(path, opts);
    let mut stats = FaultStatistics::default();
    for (level, classes) in levels {
        let Some(classes) = classes.as_object() else {
            return Err(DatasetError::format(
                path,
                format!("level `{level}` is not an object"),
            ));
        };
        let mut lvl = FaultLevelStats {
            level: level.clone(),
            total: 0,
            classes: Vec::new(),
        };
        let mut level_total = None;
        for (class, descs) in classes {
            if class == "LevelTotal" {
                level_total = descs.as_u64();
                if level_total.is_none() {
                    return Err(DatasetError::format(
                        path,
                        format!("`{level}.LevelTotal` is not a count"),
                    ));
                }
                continue;
            }
            let cls = read_fault_class(path, level, class, descs, &mut rows)?;
            lvl.classes.push(cls);
        }
        let sum: u64 = lvl.classes.iter().map(|c| c.total).sum();
        lvl.total = level_total.unwrap_or(sum);
        if lvl.total != sum {
            rows.report.note(format!(
                "fault statistics: {level} LevelTotal {} ≠ sum of classes {sum}",
                lvl.total
            ));
        }
        stats.levels.push(lvl);
    }
    let mut report = rows.report;
    report.files.push(path.display().to_string());
    Ok((stats, report))
}

/// One class of a level: its per-description counts (one row each) and its `ClassTotal`.
fn read_fault_class(
    path: &Path,
    level: &str,
    class: &str,
    descs: &Value,
    rows: &mut JsonRows,
) -> Result<FaultClassStats, DatasetError> {
    let Some(descs) = descs.as_object() else {
        return Err(DatasetError::format(
            path,
            format!("class `{level}.{class}` is not an object"),
        ));
    };
    let mut cls = FaultClassStats {
        class: class.to_string(),
        total: 0,
        descs: BTreeMap::new(),
    };
    let mut class_total = None;
    for (desc, v) in descs {
        if desc == "ClassTotal" {
            class_total = v.as_u64();
            if class_total.is_none() {
                return Err(DatasetError::format(
                    path,
                    format!("`{level}.{class}.ClassTotal` is not a count"),
                ));
            }
            continue;
        }
        rows.next();
        match v.as_u64() {
            Some(c) => {
                rows.report.rows_kept += 1;
                cls.descs.insert(desc.clone(), c);
            }
            None => rows.drop_row(
                &format!("{level}/{class}/{desc}"),
                "not a count",
                &v.to_string(),
            )?,
        }
    }
    let sum: u64 = cls.descs.values().sum();
    cls.total = class_total.unwrap_or(sum);
    if cls.total != sum {
        rows.report.note(format!(
            "fault statistics: {level}/{class} ClassTotal {} ≠ sum of descriptions {sum}",
            cls.total
        ));
    }
    Ok(cls)
}

// ---------------------------------------------------------------------------------------------
// Cluster summaries.

/// One row of a per-cluster summary table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSummaryRow {
    /// Cluster id (`Venus`, `Philly`, `total`, ...).
    pub id: String,
    /// Numeric columns by name; empty cells are left out.
    pub values: BTreeMap<String, f64>,
}

/// Reads a cluster summary CSV (`id,<numeric columns>...`). A row with a non-numeric value is
/// dropped as a row issue.
pub fn read_cluster_summary(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<ClusterSummaryRow>, ReadReport), DatasetError> {
    let mut report = ReadReport::default();
    let headers: Vec<String> = {
        let mut rdr = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(input::open_lines(path, opts.max_line_bytes)?);
        rdr.headers()
            .map_err(|e| DatasetError::format(path, format!("cannot read the header: {e}")))?
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
            .collect()
    };
    let mut rows = Vec::new();
    read_csv_rows(
        path,
        None,
        &["id"],
        opts,
        &mut report,
        |row, cols| {
            let id_col = cols.at("id");
            if row.fields.len() > headers.len() {
                return Err(row.issue(
                    "row",
                    "more fields than the header",
                    &row.fields.len().to_string(),
                ));
            }
            let mut values = BTreeMap::new();
            for (i, name) in headers.iter().enumerate() {
                if i == id_col || name.is_empty() {
                    continue;
                }
                if let Some(v) = row.num(Some(i), name)? {
                    values.insert(name.clone(), v);
                }
            }
            Ok(ClusterSummaryRow {
                id: req_text(row, id_col, "id")?,
                values,
            })
        },
        |r| rows.push(r),
    )?;
    Ok((rows, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gavel_keys() {
        assert_eq!(
            parse_gavel_job_key("('ResNet-18 (batch size 16)', 1)"),
            Some(("ResNet-18 (batch size 16)".to_string(), 1))
        );
        assert_eq!(
            parse_gavel_job_key("('A3C', 8)"),
            Some(("A3C".to_string(), 8))
        );
        assert_eq!(parse_gavel_job_key("null"), None);
        assert_eq!(parse_gavel_job_key("('x', y)"), None);
    }

    #[test]
    fn medians() {
        let t = |gpu: &str, job: &str, s: f64| GavelThroughput {
            gpu: gpu.into(),
            job_type: job.into(),
            scale_factor: 1,
            steps_per_s: s,
            colocated_pairs: 0,
        };
        let all = vec![
            t("k80", "a", 1.0),
            t("k80", "b", 2.0),
            t("k80", "c", 0.0),
            t("v100", "a", 4.0),
            t("v100", "b", 4.0),
            t("v100", "c", 9.0),
        ];
        let r = relative_speeds(&all, "k80");
        assert_eq!(r.get("k80"), Some(&1.0));
        assert_eq!(r.get("v100"), Some(&3.0)); // median of 4 and 2; c skipped (k80 = 0)
    }
}
