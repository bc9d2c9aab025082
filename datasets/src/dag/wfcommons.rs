//! WfCommons workflow instances (WfFormat JSON, schema 1.5+ and the older layouts): one
//! [`DagJob`] per file, one stage per task.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{Map, Value};

use super::graph::{topological_order, DagShapeError};
use super::job::{edges_of, DagJob, DagStage, TaskResources};
use crate::error::DatasetError;
use crate::input;
use crate::json_stream;
use crate::report::{shown_value, ReadOptions, ReadReport};

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
    // Structural problems are errors; there is nothing to drop row by row. Streamed down to
    // single tasks (`workflow/specification/tasks/[i]`), each bounded by the options.
    let root = json_stream::read_value(path, opts, &|keys| keys.len() < 4)?;
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
}
