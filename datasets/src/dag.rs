//! DAG-structured job readers: TPC-H queries on Spark (Decima's measured DAGs) and WfCommons
//! workflow instances (WfFormat JSON), both into [`DagJob`].
//!
//! **TPC-H** ([`read_tpch_dags`], `tpch_dags.json`: scale → `qN` → `{adj,
//! stage_id_to_node_idx, task_duration}`): one [`DagJob`] per (scale, query), id
//! `tpch-<scale>-q<N>`, `executors: None`. `adj[i][j] = 1` means stage `i` is a parent of stage
//! `j` (Decima's convention). Each stage's task durations were measured separately for every
//! executor count the query was run with (2, 5, 10, 20, 40, 50, 60, 80, 100 for most queries;
//! the small q6 runs stop at 12–59), split into first-wave, rest-wave and fresh-executor
//! samples, in milliseconds. They are kept losslessly in [`DagStage::waves`] (converted to
//! seconds), keyed by executor count, so one DAG is not repeated nine times.
//! [`DagJob::at_executors`] gives the per-executor-count view: `executors: Some(n)`, each
//! stage's `task_durations_s` (first + rest wave) and an estimated `duration_s`. The stage
//! `id` is the Spark stage id (from `stage_id_to_node_idx`), `num_tasks` the largest task count
//! measured (it differs between executor counts in a handful of stages).
//!
//! **WfCommons** ([`read_wfcommons`]): one [`DagJob`] per file, stages = tasks, `duration_s` =
//! the task's measured runtime, [`DagJob::recorded_makespan_s`] = the workflow's makespan.
//! Schema 1.5+ (`workflow.specification` + `workflow.execution`) and the older layouts (tasks
//! under `workflow.tasks` or `workflow.jobs` with `runtime`, `files`, parents by name; byte
//! counts in KB except for Pegasus, memory in KB) are both read. Unknown parent/child ids,
//! duplicate ids, cycles and unusable runtimes are a [`DatasetError::Format`] naming the task:
//! a workflow with a broken graph cannot be used at all.
//!
//! [`critical_path`] computes the longest path through a DAG given per-stage durations.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::DatasetError;
use crate::input;
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};

/// A job made of stages with dependencies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagJob {
    /// Unique id: `tpch-100g-q1` (`-e20` appended by [`DagJob::at_executors`]),
    /// `wfcommons-<file stem>`.
    pub id: String,
    /// Where it comes from: `tpch` or `wfcommons`.
    pub family: String,
    /// Query (`q1`) or workflow name as recorded in the file.
    pub name: String,
    /// TPC-H scale factor (`100g`).
    pub scale: Option<String>,
    /// Executor count the stage durations are for (`None`: all counts, see [`DagStage::waves`]).
    pub executors: Option<u32>,
    /// Stages (tasks) in file order; edges refer to them by index.
    pub stages: Vec<DagStage>,
    /// `(parent, child)` stage indices.
    pub edges: Vec<(usize, usize)>,
    /// Makespan recorded by the workflow system (WfCommons), seconds.
    pub recorded_makespan_s: Option<f64>,
    /// The file it was read from.
    pub source_file: String,
    /// Extra facts from the file (`schema_version`, `runtime_system`, `executed_at`, ...).
    pub meta: BTreeMap<String, String>,
}

/// A stage of a [`DagJob`]: a Spark stage (TPC-H) or a workflow task (WfCommons).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DagStage {
    /// Id in the file: Spark stage id, or WfCommons task id.
    pub id: String,
    /// Name: `stage <id>` for TPC-H, the task name for WfCommons.
    pub name: String,
    /// Kind of work: the WfCommons task category (or its name without the `_ID…` suffix and
    /// the Nextflow module path); `None` for TPC-H (the data names no operators).
    pub kind: Option<String>,
    /// Tasks in the stage (1 for a workflow task).
    pub num_tasks: u32,
    /// Indices of the parent stages.
    pub parents: Vec<usize>,
    /// Duration in seconds: the task runtime (WfCommons) or an estimate at
    /// [`DagJob::executors`] (TPC-H, see [`DagJob::at_executors`]); `None` when unknown.
    pub duration_s: Option<f64>,
    /// Every task duration at [`DagJob::executors`], seconds (TPC-H with executors set).
    pub task_durations_s: Vec<f64>,
    /// TPC-H: measured task durations per executor count.
    pub waves: BTreeMap<u32, TaskWaves>,
    /// WfCommons: measured resource use.
    pub resources: Option<TaskResources>,
}

/// Task durations of one Spark stage run with a given number of executors, seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskWaves {
    /// Tasks of the first wave (one per executor; includes executor warm-up).
    pub first_wave_s: Vec<f64>,
    /// Tasks of the later waves.
    pub rest_wave_s: Vec<f64>,
    /// First-wave tasks that ran on a freshly started executor (a subset of the first wave).
    pub fresh_s: Vec<f64>,
}

impl TaskWaves {
    /// Tasks measured (first + rest wave).
    pub fn num_tasks(&self) -> usize {
        self.first_wave_s.len() + self.rest_wave_s.len()
    }

    /// Estimated stage duration with `executors` executors: the slowest first-wave task plus
    /// the rest-wave work spread over the executors. An estimate, not a measurement.
    pub fn estimated_duration_s(&self, executors: u32) -> f64 {
        let first = self.first_wave_s.iter().copied().fold(0.0, f64::max);
        let rest: f64 = self.rest_wave_s.iter().sum();
        first + rest / f64::from(executors.max(1))
    }
}

/// Resource use of a workflow task, as measured (WfCommons).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskResources {
    /// Cores allocated.
    pub cores: Option<f64>,
    /// Average CPU utilisation, percent (can exceed 100 on several cores).
    pub avg_cpu_percent: Option<f64>,
    /// Bytes read.
    pub read_bytes: Option<f64>,
    /// Bytes written.
    pub written_bytes: Option<f64>,
    /// Peak memory, bytes.
    pub memory_bytes: Option<f64>,
    /// Total size of the input files, bytes (where the file sizes are listed).
    pub input_bytes: Option<f64>,
    /// Total size of the output files, bytes (where the file sizes are listed).
    pub output_bytes: Option<f64>,
    /// Machines the task ran on.
    pub machines: Vec<String>,
}

impl DagJob {
    /// Parent lists, one per stage (the input [`critical_path`] takes).
    pub fn parents(&self) -> Vec<Vec<usize>> {
        self.stages.iter().map(|s| s.parents.clone()).collect()
    }

    /// Executor counts at which every stage has measurements (TPC-H; empty otherwise).
    pub fn executor_counts(&self) -> Vec<u32> {
        let mut stages = self.stages.iter();
        let Some(first) = stages.next() else {
            return Vec::new();
        };
        let mut common: BTreeSet<u32> = first.waves.keys().copied().collect();
        for s in stages {
            common.retain(|e| s.waves.contains_key(e));
        }
        common.into_iter().collect()
    }

    /// The DAG with durations for `executors` executors: each stage gets its measured task
    /// durations at that count (`task_durations_s`, `num_tasks`) and
    /// [`TaskWaves::estimated_duration_s`] as `duration_s`. `None` when some stage was not
    /// measured at that count.
    pub fn at_executors(&self, executors: u32) -> Option<DagJob> {
        let mut job = self.clone();
        for s in &mut job.stages {
            let w = s.waves.get(&executors)?;
            s.task_durations_s = w
                .first_wave_s
                .iter()
                .chain(&w.rest_wave_s)
                .copied()
                .collect();
            s.num_tasks = u32::try_from(w.num_tasks()).unwrap_or(u32::MAX);
            s.duration_s = Some(w.estimated_duration_s(executors));
        }
        job.executors = Some(executors);
        job.id = format!("{}-e{executors}", self.id);
        Some(job)
    }

    /// Longest path through the DAG using each stage's `duration_s`; `None` when a stage has
    /// no duration.
    pub fn critical_path_s(&self) -> Option<f64> {
        let durations: Option<Vec<f64>> = self.stages.iter().map(|s| s.duration_s).collect();
        critical_path(&self.parents(), &durations?).ok()
    }

    /// Sum of stage durations (`duration_s`) — the work on one worker; `None` when a stage has
    /// no duration.
    pub fn total_duration_s(&self) -> Option<f64> {
        self.stages.iter().map(|s| s.duration_s).sum()
    }
}

/// Why a parents/durations description is not a usable DAG.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DagShapeError {
    /// `durations` and `parents` differ in length.
    #[error("{stages} stages but {durations} durations")]
    LengthMismatch {
        /// Stages (length of `parents`).
        stages: usize,
        /// Durations given.
        durations: usize,
    },
    /// A parent index is out of range.
    #[error("stage {stage} has parent {parent}, which does not exist")]
    UnknownParent {
        /// The stage.
        stage: usize,
        /// The bad parent index.
        parent: usize,
    },
    /// The graph has a cycle through this stage.
    #[error("stage {stage} is on a dependency cycle")]
    Cycle {
        /// A stage on the cycle.
        stage: usize,
    },
    /// A duration is negative or not finite.
    #[error("stage {stage} has an unusable duration {value}")]
    BadDuration {
        /// The stage.
        stage: usize,
        /// The duration.
        value: f64,
    },
}

/// Stage indices in an order where every stage comes after its parents (ties by index).
pub fn topological_order(parents: &[Vec<usize>]) -> Result<Vec<usize>, DagShapeError> {
    let n = parents.len();
    let mut indegree = vec![0usize; n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (stage, ps) in parents.iter().enumerate() {
        for &p in ps {
            if p >= n {
                return Err(DagShapeError::UnknownParent { stage, parent: p });
            }
            if let (Some(c), Some(d)) = (children.get_mut(p), indegree.get_mut(stage)) {
                c.push(stage);
                *d += 1;
            }
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, &d)| d == 0)
        .map(|(i, _)| std::cmp::Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &c in children.get(i).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(d) = indegree.get_mut(c) {
                *d -= 1;
                if *d == 0 {
                    ready.push(std::cmp::Reverse(c));
                }
            }
        }
    }
    if order.len() < n {
        // Walk up from any unplaced stage through unplaced parents until a stage repeats: that
        // stage is on a cycle.
        let placed: BTreeSet<usize> = order.iter().copied().collect();
        let mut at = (0..n).find(|i| !placed.contains(i)).unwrap_or(0);
        let mut seen = BTreeSet::new();
        while seen.insert(at) {
            match parents
                .get(at)
                .and_then(|ps| ps.iter().copied().find(|p| !placed.contains(p)))
            {
                Some(p) => at = p,
                None => break,
            }
        }
        return Err(DagShapeError::Cycle { stage: at });
    }
    Ok(order)
}

/// Length of the longest (critical) path through a DAG: the makespan with unlimited
/// resources. `parents[i]` lists the stages `i` waits for, `durations[i]` is its duration.
/// 0 for an empty DAG.
pub fn critical_path(parents: &[Vec<usize>], durations: &[f64]) -> Result<f64, DagShapeError> {
    if parents.len() != durations.len() {
        return Err(DagShapeError::LengthMismatch {
            stages: parents.len(),
            durations: durations.len(),
        });
    }
    if let Some((stage, &value)) = durations
        .iter()
        .enumerate()
        .find(|(_, d)| !d.is_finite() || **d < 0.0)
    {
        return Err(DagShapeError::BadDuration { stage, value });
    }
    let order = topological_order(parents)?;
    let mut finish = vec![0.0f64; parents.len()];
    let mut longest = 0.0f64;
    for i in order {
        let start = parents
            .get(i)
            .map(|ps| {
                ps.iter()
                    .filter_map(|&p| finish.get(p).copied())
                    .fold(0.0, f64::max)
            })
            .unwrap_or(0.0);
        let end = start + durations.get(i).copied().unwrap_or(0.0);
        if let Some(f) = finish.get_mut(i) {
            *f = end;
        }
        longest = longest.max(end);
    }
    Ok(longest)
}

/// Edges `(parent, child)` of a parents description, sorted.
fn edges_of(stages: &[DagStage]) -> Vec<(usize, usize)> {
    let mut edges: Vec<(usize, usize)> = stages
        .iter()
        .enumerate()
        .flat_map(|(c, s)| s.parents.iter().map(move |&p| (p, c)))
        .collect();
    edges.sort_unstable();
    edges
}

fn parse_json(path: &Path) -> Result<Value, DatasetError> {
    let text = input::read_to_string(path)?;
    serde_json::from_str(&text)
        .map_err(|e| DatasetError::format(path, format!("not valid JSON: {e}")))
}

/// `"100g"` → 100 for sorting.
fn leading_number(s: &str) -> u64 {
    let digits: String = s
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------
// TPC-H.

/// Reads the TPC-H DAGs (`tpch_dags.json`): one [`DagJob`] per (scale, query), sorted by
/// scale then query number. A malformed query is dropped as a row issue (line = its 1-based
/// position in that order).
pub fn read_tpch_dags(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<DagJob>, ReadReport), DatasetError> {
    let root = parse_json(path)?;
    let Some(scales) = root.as_object() else {
        return Err(DatasetError::format(
            path,
            "expected a JSON object of scale → query → DAG (`{\"2g\": {\"q1\": {\"adj\": ...}}}`)",
        ));
    };
    let file = input::display_name(path);
    let mut report = ReadReport::default();
    report.note("tpch: one DAG per (scale, query); task durations (ms in the file) kept per executor count in seconds; adj[i][j]=1 means stage i is a parent of stage j");
    let mut entries: Vec<(&String, &String, &Value)> = Vec::new();
    for (scale, queries) in scales {
        let Some(queries) = queries.as_object() else {
            return Err(DatasetError::format(
                path,
                format!("scale `{scale}` is not an object of queries"),
            ));
        };
        for (q, dag) in queries {
            entries.push((scale, q, dag));
        }
    }
    entries.sort_by_key(|(s, q, _)| {
        (
            leading_number(s),
            leading_number(q),
            s.to_string(),
            q.to_string(),
        )
    });
    let mut jobs = Vec::with_capacity(entries.len());
    for (i, (scale, query, dag)) in entries.into_iter().enumerate() {
        report.rows_read += 1;
        let at = |field: &str, reason: &str, value: &str| RowIssue {
            file: file.clone(),
            line: i as u64 + 1,
            field: format!("{scale}/{query}/{field}"),
            reason: reason.to_string(),
            value: shown_value(value),
        };
        match tpch_job(scale, query, dag, &file, &at) {
            Ok(job) => {
                report.rows_kept += 1;
                jobs.push(job);
            }
            Err(issue) => report.drop_row(issue, opts)?,
        }
    }
    report.files.push(path.display().to_string());
    Ok((jobs, report))
}

fn tpch_job(
    scale: &str,
    query: &str,
    dag: &Value,
    file: &str,
    at: &dyn Fn(&str, &str, &str) -> RowIssue,
) -> Result<DagJob, RowIssue> {
    let dag = dag
        .as_object()
        .ok_or_else(|| at("", "not an object", &dag.to_string()))?;
    let adj = dag
        .get("adj")
        .and_then(Value::as_array)
        .ok_or_else(|| at("adj", "missing or not an array", ""))?;
    let n = adj.len();
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, row) in adj.iter().enumerate() {
        let row = row
            .as_array()
            .filter(|r| r.len() == n)
            .ok_or_else(|| at("adj", "not a square matrix", &row.to_string()))?;
        for (j, v) in row.iter().enumerate() {
            match v.as_f64() {
                Some(0.0) => {}
                Some(1.0) => {
                    if let Some(p) = parents.get_mut(j) {
                        p.push(i);
                    }
                }
                _ => return Err(at("adj", "entries must be 0 or 1", &v.to_string())),
            }
        }
    }
    if let Err(e) = topological_order(&parents) {
        return Err(at("adj", &format!("not a DAG: {e}"), ""));
    }
    // Spark stage ids by node index.
    let mut ids: Vec<Option<String>> = vec![None; n];
    match dag.get("stage_id_to_node_idx") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (stage_id, idx) in m {
                let slot = idx
                    .as_u64()
                    .and_then(|k| usize::try_from(k).ok())
                    .and_then(|k| ids.get_mut(k))
                    .ok_or_else(|| {
                        at(
                            "stage_id_to_node_idx",
                            "node index out of range",
                            &idx.to_string(),
                        )
                    })?;
                if slot.is_some() {
                    return Err(at(
                        "stage_id_to_node_idx",
                        "two stage ids map to one node",
                        stage_id,
                    ));
                }
                *slot = Some(stage_id.clone());
            }
        }
        Some(other) => {
            return Err(at(
                "stage_id_to_node_idx",
                "not an object",
                &other.to_string(),
            ))
        }
    }
    let durations = dag
        .get("task_duration")
        .and_then(Value::as_object)
        .ok_or_else(|| at("task_duration", "missing or not an object", ""))?;
    let mut stages = Vec::with_capacity(n);
    for (node, ps) in parents.into_iter().enumerate() {
        let key = node.to_string();
        let d = durations
            .get(&key)
            .and_then(Value::as_object)
            .ok_or_else(|| at(&format!("task_duration/{key}"), "missing stage", ""))?;
        let mut waves: BTreeMap<u32, TaskWaves> = BTreeMap::new();
        for (wave, field) in [("first_wave", 0), ("rest_wave", 1), ("fresh_durations", 2)] {
            let Some(by_exec) = d.get(wave) else {
                if wave == "fresh_durations" {
                    continue;
                }
                return Err(at(&format!("task_duration/{key}/{wave}"), "missing", ""));
            };
            let by_exec = by_exec
                .as_object()
                .ok_or_else(|| at(&format!("task_duration/{key}/{wave}"), "not an object", ""))?;
            for (execs, samples) in by_exec {
                let where_ = format!("task_duration/{key}/{wave}/{execs}");
                let e: u32 = execs.parse().ok().filter(|&e| e > 0).ok_or_else(|| {
                    at(&where_, "executor count is not a positive integer", execs)
                })?;
                let samples = samples.as_array().ok_or_else(|| {
                    at(&where_, "not an array of durations", &samples.to_string())
                })?;
                let mut secs = Vec::with_capacity(samples.len());
                for s in samples {
                    match s.as_f64() {
                        Some(ms) if ms.is_finite() && ms >= 0.0 => secs.push(ms / 1000.0),
                        _ => {
                            return Err(at(
                                &where_,
                                "duration is not a non-negative number",
                                &s.to_string(),
                            ))
                        }
                    }
                }
                let w = waves.entry(e).or_default();
                match field {
                    0 => w.first_wave_s = secs,
                    1 => w.rest_wave_s = secs,
                    _ => w.fresh_s = secs,
                }
            }
        }
        let num_tasks = waves.values().map(TaskWaves::num_tasks).max().unwrap_or(0);
        let id = ids
            .get(node)
            .cloned()
            .flatten()
            .unwrap_or_else(|| key.clone());
        stages.push(DagStage {
            name: format!("stage {id}"),
            id,
            kind: None,
            num_tasks: u32::try_from(num_tasks).unwrap_or(u32::MAX),
            parents: ps,
            duration_s: None,
            task_durations_s: Vec::new(),
            waves,
            resources: None,
        });
    }
    let edges = edges_of(&stages);
    Ok(DagJob {
        id: format!("tpch-{scale}-{query}"),
        family: "tpch".into(),
        name: query.to_string(),
        scale: Some(scale.to_string()),
        executors: None,
        stages,
        edges,
        recorded_makespan_s: None,
        source_file: file.to_string(),
        meta: BTreeMap::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// WfCommons.

/// A task as read, before the graph is built.
struct RawTask {
    id: String,
    name: String,
    category: Option<String>,
    parents: Vec<String>,
    children: Vec<String>,
    runtime_s: Option<f64>,
    resources: TaskResources,
}

/// Reads one WfCommons workflow instance (any schema version) into a [`DagJob`].
pub fn read_wfcommons(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(DagJob, ReadReport), DatasetError> {
    let _ = opts; // structural problems are errors; there is nothing to drop row by row
    let root = parse_json(path)?;
    let Some(root) = root.as_object() else {
        return Err(DatasetError::format(
            path,
            "expected a WfFormat JSON object",
        ));
    };
    let Some(workflow) = root.get("workflow").and_then(Value::as_object) else {
        return Err(DatasetError::format(
            path,
            "no `workflow` object (not a WfCommons instance)",
        ));
    };
    let mut report = ReadReport::default();
    let mut meta = BTreeMap::new();
    let schema = root.get("schemaVersion").map(|v| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    });
    if let Some(s) = &schema {
        meta.insert("schema_version".to_string(), s.clone());
    }
    let runtime_system = root
        .get("runtimeSystem")
        .or_else(|| root.get("wms"))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(s) = &runtime_system {
        meta.insert("runtime_system".to_string(), s.clone());
    }
    let (tasks, makespan, layout) = if let Some(spec) = workflow.get("specification") {
        let execution = workflow.get("execution").and_then(Value::as_object);
        let (tasks, makespan) = wf_tasks_v15(path, spec, execution, &mut report)?;
        if let Some(ex) = execution {
            copy_meta(ex, &mut meta);
        }
        (tasks, makespan, "specification/execution")
    } else {
        let pegasus = runtime_system
            .as_deref()
            .is_some_and(|s| s.to_ascii_lowercase().contains("pegasus"));
        let (tasks, makespan) = wf_tasks_legacy(path, workflow, pegasus)?;
        copy_meta(workflow, &mut meta);
        (tasks, makespan, "legacy tasks/jobs")
    };
    report.note(format!(
        "wfcommons: {layout} layout; stages = tasks, duration = measured task runtime; recorded makespan kept"
    ));
    report.rows_read = tasks.len() as u64;
    let job = build_wf_job(path, root, tasks, makespan, meta)?;
    report.rows_kept = job.stages.len() as u64;
    let missing = job.stages.iter().filter(|s| s.duration_s.is_none()).count();
    if missing > 0 {
        report.note(format!(
            "wfcommons: {missing} task(s) have no runtime recorded"
        ));
    }
    report.files.push(path.display().to_string());
    Ok((job, report))
}

fn copy_meta(obj: &Map<String, Value>, meta: &mut BTreeMap<String, String>) {
    if let Some(t) = obj.get("executedAt").and_then(Value::as_str) {
        meta.insert("executed_at".into(), t.to_string());
    }
    if let Some(m) = obj.get("machines").and_then(Value::as_array) {
        meta.insert("machines".into(), m.len().to_string());
    }
}

/// A number field: absent/null → `None`; present but not a finite non-negative number → error
/// naming the task.
fn wf_num(
    path: &Path,
    task: &str,
    obj: &Map<String, Value>,
    key: &str,
) -> Result<Option<f64>, DatasetError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(DatasetError::format(
                path,
                format!(
                    "task `{task}`: `{key}` is not a non-negative number (got {})",
                    shown_value(&v.to_string())
                ),
            )),
        },
    }
}

fn str_list(
    path: &Path,
    task: &str,
    obj: &Map<String, Value>,
    key: &str,
) -> Result<Vec<String>, DatasetError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    DatasetError::format(
                        path,
                        format!("task `{task}`: `{key}` holds a non-string {v}"),
                    )
                })
            })
            .collect(),
        Some(other) => Err(DatasetError::format(
            path,
            format!(
                "task `{task}`: `{key}` is not a list (got {})",
                shown_value(&other.to_string())
            ),
        )),
    }
}

fn task_id_name(
    path: &Path,
    i: usize,
    t: &Map<String, Value>,
) -> Result<(String, String), DatasetError> {
    let text = |k: &str| {
        t.get(k).and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    };
    match (text("id"), text("name")) {
        (Some(id), Some(name)) => Ok((id, name)),
        (Some(id), None) => Ok((id.clone(), id)),
        (None, Some(name)) => Ok((name.clone(), name)),
        (None, None) => Err(DatasetError::format(
            path,
            format!("task #{} has neither `id` nor `name`", i + 1),
        )),
    }
}

type WfTasks = (Vec<RawTask>, Option<f64>);

fn wf_tasks_v15(
    path: &Path,
    spec: &Value,
    execution: Option<&Map<String, Value>>,
    report: &mut ReadReport,
) -> Result<WfTasks, DatasetError> {
    let spec_tasks = spec.get("tasks").and_then(Value::as_array).ok_or_else(|| {
        DatasetError::format(
            path,
            "`workflow.specification.tasks` is missing or not a list",
        )
    })?;
    let file_sizes: HashMap<&str, f64> = spec
        .get("files")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter_map(|f| Some((f.get("id")?.as_str()?, f.get("sizeInBytes")?.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    let mut exec: HashMap<String, &Map<String, Value>> = HashMap::new();
    if let Some(ex_tasks) = execution
        .and_then(|e| e.get("tasks"))
        .and_then(Value::as_array)
    {
        for (i, t) in ex_tasks.iter().enumerate() {
            let Some(obj) = t.as_object() else {
                return Err(DatasetError::format(
                    path,
                    format!("execution task #{} is not an object", i + 1),
                ));
            };
            let (id, _) = task_id_name(path, i, obj)?;
            exec.insert(id, obj);
        }
    }
    let makespan = match execution {
        Some(ex) => wf_num(path, "(workflow)", ex, "makespanInSeconds")?,
        None => None,
    };
    let mut tasks = Vec::with_capacity(spec_tasks.len());
    let mut matched = 0usize;
    for (i, t) in spec_tasks.iter().enumerate() {
        let Some(obj) = t.as_object() else {
            return Err(DatasetError::format(
                path,
                format!("specification task #{} is not an object", i + 1),
            ));
        };
        let (id, name) = task_id_name(path, i, obj)?;
        let sum_files = |key: &str| -> Result<Option<f64>, DatasetError> {
            let ids = str_list(path, &id, obj, key)?;
            let sizes: Vec<f64> = ids
                .iter()
                .filter_map(|f| file_sizes.get(f.as_str()).copied())
                .collect();
            Ok((!sizes.is_empty()).then(|| sizes.iter().sum()))
        };
        let mut resources = TaskResources {
            input_bytes: sum_files("inputFiles")?,
            output_bytes: sum_files("outputFiles")?,
            ..Default::default()
        };
        let mut runtime_s = None;
        if let Some(ex) = exec.get(&id) {
            matched += 1;
            runtime_s = wf_num(path, &id, ex, "runtimeInSeconds")?;
            resources.cores = wf_num(path, &id, ex, "coreCount")?;
            resources.avg_cpu_percent = wf_num(path, &id, ex, "avgCPU")?;
            resources.read_bytes = wf_num(path, &id, ex, "readBytes")?;
            resources.written_bytes = wf_num(path, &id, ex, "writtenBytes")?;
            resources.memory_bytes = wf_num(path, &id, ex, "memoryInBytes")?;
            resources.machines = str_list(path, &id, ex, "machines")?;
        }
        tasks.push(RawTask {
            parents: str_list(path, &id, obj, "parents")?,
            children: str_list(path, &id, obj, "children")?,
            category: obj
                .get("category")
                .and_then(Value::as_str)
                .map(str::to_string),
            id,
            name,
            runtime_s,
            resources,
        });
    }
    if matched < exec.len() {
        report.note(format!(
            "wfcommons: {} execution record(s) name no specified task and were ignored",
            exec.len() - matched
        ));
    }
    Ok((tasks, makespan))
}

fn wf_tasks_legacy(
    path: &Path,
    workflow: &Map<String, Value>,
    pegasus: bool,
) -> Result<WfTasks, DatasetError> {
    let list = workflow
        .get("tasks")
        .or_else(|| workflow.get("jobs"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            DatasetError::format(
                path,
                "no task list: expected `workflow.specification.tasks` (schema 1.5+) or `workflow.tasks` / `workflow.jobs` (older schemas)",
            )
        })?;
    let makespan = match wf_num(path, "(workflow)", workflow, "makespanInSeconds")? {
        Some(m) => Some(m),
        None => wf_num(path, "(workflow)", workflow, "makespan")?,
    };
    // Before schema 1.4 byte counts are in KB except for Pegasus; memory is in KB.
    let kb = if pegasus { 1.0 } else { 1000.0 };
    let mut tasks = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let Some(obj) = t.as_object() else {
            return Err(DatasetError::format(
                path,
                format!("task #{} is not an object", i + 1),
            ));
        };
        let (id, name) = task_id_name(path, i, obj)?;
        let num = |k: &str| wf_num(path, &id, obj, k);
        let runtime_s = match num("runtimeInSeconds")? {
            Some(r) => Some(r),
            None => num("runtime")?,
        };
        let mut input_bytes = None;
        let mut output_bytes = None;
        if let Some(files) = obj.get("files").and_then(Value::as_array) {
            for f in files {
                let size = f
                    .get("sizeInBytes")
                    .or_else(|| f.get("size"))
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0);
                let Some(size) = size else { continue };
                let link = f.get("link").and_then(Value::as_str).unwrap_or("");
                let slot = if link.eq_ignore_ascii_case("input") {
                    &mut input_bytes
                } else {
                    &mut output_bytes
                };
                *slot = Some(slot.unwrap_or(0.0) + size);
            }
        }
        let resources = TaskResources {
            cores: match num("coreCount")? {
                Some(c) => Some(c),
                None => num("cores")?,
            },
            avg_cpu_percent: num("avgCPU")?,
            read_bytes: match num("readBytes")? {
                Some(b) => Some(b),
                None => num("bytesRead")?.map(|b| b * kb),
            },
            written_bytes: match num("writtenBytes")? {
                Some(b) => Some(b),
                None => num("bytesWritten")?.map(|b| b * kb),
            },
            memory_bytes: match num("memoryInBytes")? {
                Some(b) => Some(b),
                None => num("memory")?.map(|m| m * 1000.0),
            },
            input_bytes,
            output_bytes,
            machines: obj
                .get("machine")
                .and_then(Value::as_str)
                .map(|m| vec![m.to_string()])
                .unwrap_or_default(),
        };
        tasks.push(RawTask {
            parents: str_list(path, &id, obj, "parents")?,
            children: str_list(path, &id, obj, "children")?,
            category: obj
                .get("category")
                .and_then(Value::as_str)
                .map(str::to_string),
            id,
            name,
            runtime_s,
            resources,
        });
    }
    Ok((tasks, makespan))
}

/// The kind of a workflow task from its name: `mProject_ID0000001` → `mProject`,
/// `NFCORE_HIC.HIC.INPUT_CHECK.SAMPLESHEET_CHECK` → `SAMPLESHEET_CHECK`.
fn task_kind(name: &str) -> String {
    let base = match name.rfind("_ID") {
        Some(i)
            if name.len() > i + 3
                && name
                    .get(i + 3..)
                    .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit())) =>
        {
            name.get(..i).unwrap_or(name)
        }
        _ => name,
    };
    base.rsplit('.').next().unwrap_or(base).to_string()
}

fn build_wf_job(
    path: &Path,
    root: &Map<String, Value>,
    tasks: Vec<RawTask>,
    makespan: Option<f64>,
    meta: BTreeMap<String, String>,
) -> Result<DagJob, DatasetError> {
    // Resolve references by id first, then by name (older schemas refer to tasks by name).
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        if by_id.insert(t.id.as_str(), i).is_some() {
            return Err(DatasetError::format(
                path,
                format!("task id `{}` appears twice", t.id),
            ));
        }
    }
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        by_name.entry(t.name.as_str()).or_insert(i);
    }
    let resolve = |task: &str, kind: &str, r: &str| -> Result<usize, DatasetError> {
        by_id
            .get(r)
            .or_else(|| by_name.get(r))
            .copied()
            .ok_or_else(|| {
                DatasetError::format(path, format!("task `{task}` names an unknown {kind} `{r}`"))
            })
    };
    let mut parents: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); tasks.len()];
    for (i, t) in tasks.iter().enumerate() {
        for p in &t.parents {
            let p = resolve(&t.id, "parent", p)?;
            if let Some(s) = parents.get_mut(i) {
                s.insert(p);
            }
        }
        // Dependencies may be declared on one end only.
        for c in &t.children {
            let c = resolve(&t.id, "child", c)?;
            if let Some(s) = parents.get_mut(c) {
                s.insert(i);
            }
        }
    }
    let parents: Vec<Vec<usize>> = parents
        .into_iter()
        .map(|s| s.into_iter().collect())
        .collect();
    if let Err(e) = topological_order(&parents) {
        let reason = match e {
            DagShapeError::Cycle { stage } => format!(
                "task `{}` is on a dependency cycle",
                tasks.get(stage).map(|t| t.id.as_str()).unwrap_or("?")
            ),
            DagShapeError::UnknownParent { stage, parent } => format!(
                "task `{}` has an out-of-range parent {parent}",
                tasks.get(stage).map(|t| t.id.as_str()).unwrap_or("?")
            ),
            other => other.to_string(),
        };
        return Err(DatasetError::format(path, reason));
    }
    let stages: Vec<DagStage> = tasks
        .into_iter()
        .zip(parents)
        .map(|(t, ps)| DagStage {
            kind: Some(t.category.unwrap_or_else(|| task_kind(&t.name))),
            id: t.id,
            name: t.name,
            num_tasks: 1,
            parents: ps,
            duration_s: t.runtime_s,
            task_durations_s: Vec::new(),
            waves: BTreeMap::new(),
            resources: Some(t.resources),
        })
        .collect();
    let edges = edges_of(&stages);
    let stem = input::stem(path);
    Ok(DagJob {
        id: format!("wfcommons-{stem}"),
        family: "wfcommons".into(),
        name: root
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(stem),
        scale: None,
        executors: None,
        stages,
        edges,
        recorded_makespan_s: makespan,
        source_file: input::display_name(path),
        meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_names() {
        assert_eq!(task_kind("mProject_ID0000001"), "mProject");
        assert_eq!(
            task_kind("NFCORE_HIC.HIC.INPUT_CHECK.SAMPLESHEET_CHECK"),
            "SAMPLESHEET_CHECK"
        );
        assert_eq!(task_kind("split_fasta_ID"), "split_fasta_ID");
        assert_eq!(task_kind(""), "");
    }

    #[test]
    fn cycles_are_named() {
        // 0 → 1 → 2 → 1 (cycle 1↔2), 3 independent
        let parents = vec![vec![], vec![0, 2], vec![1], vec![]];
        match topological_order(&parents) {
            Err(DagShapeError::Cycle { stage }) => assert!(stage == 1 || stage == 2),
            other => panic!("expected a cycle, got {other:?}"),
        }
        assert_eq!(
            topological_order(&[vec![5]]),
            Err(DagShapeError::UnknownParent {
                stage: 0,
                parent: 5
            })
        );
        assert_eq!(
            topological_order(&[vec![0]]),
            Err(DagShapeError::Cycle { stage: 0 })
        );
    }
}
