//! TPC-H queries on Spark (Decima's DAGs, `tpch_dags.json`): one [`DagJob`] per (scale, query).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::graph::topological_order;
use super::job::{edges_of, DagJob, DagStage, TaskWaves};
use crate::error::DatasetError;
use crate::input;
use crate::json_stream::{self, JsonKey};
use crate::report::{shown_value, ReadOptions, ReadReport, RowIssue};

/// Reads the TPC-H DAGs (`tpch_dags.json`): one [`DagJob`] per (scale, query), sorted by
/// scale then query number. A malformed query is dropped as a row issue (line = its 1-based
/// position in that order).
pub fn read_tpch_dags(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<DagJob>, ReadReport), DatasetError> {
    let file = input::display_name(path);
    let mut report = ReadReport::default();
    report.note("tpch: one DAG per (scale, query); task durations (ms in the file) kept per executor count in seconds; adj[i][j]=1 means stage i is a parent of stage j");
    // Each query's DAG is read and turned into a job as it streams by; a later DAG for the
    // same (scale, query) replaces an earlier one. Issues get their line once sorted.
    let mut read: BTreeMap<(String, String), Result<DagJob, RowIssue>> = BTreeMap::new();
    json_stream::walk(path, opts, &|keys| keys.len() < 2, &mut |keys, v| {
        let names: Vec<&str> = keys.iter().filter_map(JsonKey::member).collect();
        match (keys.len(), names.as_slice()) {
            (0, _) if v.is_object() => Ok(()),
            (0, _) => Err(DatasetError::format(
                path,
                "expected a JSON object of scale → query → DAG (`{\"2g\": {\"q1\": {\"adj\": ...}}}`)",
            )),
            (1, [_]) if v.is_object() => Ok(()),
            (1, [scale]) => Err(DatasetError::format(
                path,
                format!("scale `{scale}` is not an object of queries"),
            )),
            (_, [scale, query]) => {
                let at = |field: &str, reason: &str, value: &str| RowIssue {
                    file: file.clone(),
                    line: 0,
                    field: format!("{scale}/{query}/{field}"),
                    reason: reason.to_string(),
                    value: shown_value(value),
                };
                let job = tpch_job(scale, query, &v, &file, &at);
                read.insert((scale.to_string(), query.to_string()), job);
                Ok(())
            }
            _ => Err(DatasetError::format(
                path,
                "expected a JSON object of scale → query → DAG, not arrays",
            )),
        }
    })?;
    let mut entries: Vec<((String, String), Result<DagJob, RowIssue>)> = read.into_iter().collect();
    entries.sort_by_key(|((s, q), _)| (leading_number(s), leading_number(q), s.clone(), q.clone()));
    let mut jobs = Vec::with_capacity(entries.len());
    for (i, (_, job)) in entries.into_iter().enumerate() {
        report.rows_read += 1;
        match job {
            Ok(job) => {
                report.rows_kept += 1;
                jobs.push(job);
            }
            Err(mut issue) => {
                issue.line = i as u64 + 1;
                report.drop_row(issue, opts)?
            }
        }
    }
    report.files.push(path.display().to_string());
    Ok((jobs, report))
}

/// Where a problem in the current query is: `at(field, reason, value)` names the row issue.
type At<'a> = &'a dyn Fn(&str, &str, &str) -> RowIssue;

/// One query's DAG: the stage graph from `adj`, Spark stage ids from
/// `stage_id_to_node_idx`, and each stage's task durations per executor count.
fn tpch_job(scale: &str, query: &str, dag: &Value, file: &str, at: At) -> Result<DagJob, RowIssue> {
    let dag = dag
        .as_object()
        .ok_or_else(|| at("", "not an object", &dag.to_string()))?;
    let parents = parents_from_adjacency(dag, at)?;
    let n = parents.len();
    let ids = stage_ids(dag, n, at)?;
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
        let waves = stage_waves(d, &key, at)?;
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

/// Parent lists from the square 0/1 matrix `adj` (`adj[i][j] = 1`: `i` is a parent of `j`),
/// refused unless the graph is a DAG.
fn parents_from_adjacency(dag: &Map<String, Value>, at: At) -> Result<Vec<Vec<usize>>, RowIssue> {
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
    Ok(parents)
}

/// Spark stage ids by node index (`None` where `stage_id_to_node_idx` names none).
fn stage_ids(dag: &Map<String, Value>, n: usize, at: At) -> Result<Vec<Option<String>>, RowIssue> {
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
    Ok(ids)
}

/// One stage's task durations (ms in the file, seconds here) by executor count, from its
/// `first_wave`, `rest_wave` and optional `fresh_durations` objects.
fn stage_waves(
    d: &Map<String, Value>,
    key: &str,
    at: At,
) -> Result<BTreeMap<u32, TaskWaves>, RowIssue> {
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
            let e: u32 =
                execs.parse().ok().filter(|&e| e > 0).ok_or_else(|| {
                    at(&where_, "executor count is not a positive integer", execs)
                })?;
            let samples = samples
                .as_array()
                .ok_or_else(|| at(&where_, "not an array of durations", &samples.to_string()))?;
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
    Ok(waves)
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
