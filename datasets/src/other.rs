//! Summaries of files that hold no jobs (training curves, DAGs, cluster descriptions), for
//! `augur data inspect`: each file is read with its reader ([`crate::curves`], [`crate::dag`],
//! [`crate::cluster`]) and described by its read report and a handful of named facts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cluster;
use crate::curves;
use crate::dag;
use crate::error::DatasetError;
use crate::format::TraceFormat;
use crate::report::{FileSummary, ReadOptions, ReadReport};

/// Reads a curve, DAG or cluster file (or an MLPerf `runs.csv`) with its reader and
/// summarises it. Errors for job-trace formats other than [`TraceFormat::MlperfRuns`].
pub fn summarize_file(
    path: &Path,
    format: TraceFormat,
    opts: &ReadOptions,
) -> Result<FileSummary, DatasetError> {
    let mut facts = Facts::default();
    let report = match format {
        TraceFormat::MlperfRuns => mlperf_runs(path, opts, &mut facts)?,
        TraceFormat::MlperfCurves => mlperf_curves(path, opts, &mut facts)?,
        TraceFormat::PolluxValidation => pollux_validation(path, opts, &mut facts)?,
        TraceFormat::PolluxPlacements | TraceFormat::PolluxScalability => {
            pollux_table(path, format, opts, &mut facts)?
        }
        TraceFormat::TpchDags => tpch_dags(path, opts, &mut facts)?,
        TraceFormat::WfCommons => wfcommons(path, opts, &mut facts)?,
        TraceFormat::GavelThroughputs => gavel_throughputs(path, opts, &mut facts)?,
        TraceFormat::NodeFaults => node_faults(path, opts, &mut facts)?,
        TraceFormat::FaultStatistics => fault_statistics(path, opts, &mut facts)?,
        TraceFormat::ClusterSummary => cluster_summary(path, opts, &mut facts)?,
        TraceFormat::OpenbNodes => openb_nodes(path, opts, &mut facts)?,
        other => {
            return Err(DatasetError::format(
                path,
                format!("`{other}` is a job trace: read it as jobs, not as a summary"),
            ))
        }
    };
    Ok(FileSummary {
        format,
        report,
        facts: facts.0,
    })
}

/// MLPerf runs: benchmarks, submitters, systems, status, dates, time to train.
fn mlperf_runs(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (runs, report) = curves::read_mlperf_runs(path, opts)?;
    facts.add("runs", runs.len());
    facts.add(
        "benchmarks",
        counts(runs.iter().map(|r| r.benchmark.clone())),
    );
    facts.add(
        "submitters",
        distinct(runs.iter().map(|r| r.submitter.clone())),
    );
    facts.add("systems", distinct(runs.iter().map(|r| r.system.clone())));
    facts.add(
        "status",
        counts(runs.iter().map(|r| {
            r.status
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|| "none".into())
        })),
    );
    let starts = runs.iter().map(|r| r.run_start_ms as f64 / 1000.0);
    if let Some((lo, hi)) = min_max(starts) {
        facts.add("run starts", format!("{} .. {}", date(lo), date(hi)));
    }
    if let Some((lo, hi)) = min_max(runs.iter().filter_map(|r| r.duration_s)) {
        facts.add("time to train", format!("{} .. {}", secs(lo), secs(hi)));
    }
    if let Some((lo, hi)) = min_max(
        runs.iter()
            .filter_map(|r| r.num_accelerators().map(|a| a as f64)),
    ) {
        facts.add("accelerators per run", format!("{lo} .. {hi}"));
    }
    Ok(report)
}

/// MLPerf eval curves: runs, metrics, points and their wall times.
fn mlperf_curves(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (cs, report) = curves::read_mlperf_curves(path, opts)?;
    facts.add("curves", cs.len());
    facts.add("runs", distinct(cs.iter().map(|c| c.run_id.clone())));
    facts.add("metrics", counts(cs.iter().map(|c| c.metric.clone())));
    let points: usize = cs.iter().map(|c| c.points.len()).sum();
    facts.add("points", points);
    if let Some((lo, hi)) = min_max(cs.iter().map(|c| c.points.len() as f64)) {
        facts.add("points per curve", format!("{lo} .. {hi}"));
    }
    let walls = cs
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.wall_time_s));
    if let Some((lo, hi)) = min_max(walls) {
        facts.add(
            "wall time since run start",
            format!("{} .. {}", secs(lo), secs(hi)),
        );
    }
    Ok(report)
}

/// A Pollux validation curve: model, batch size, first and last metric.
fn pollux_validation(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (v, report) = curves::read_pollux_validation(path, opts)?;
    facts.add("model", &v.model);
    facts.add("global batch size", v.global_batch_size);
    facts.add("points", v.points.len());
    if let (Some(first), Some(last)) = (v.points.first(), v.points.last()) {
        facts.add(
            "metric first → last",
            format!("{:.4} → {:.4}", first.metric, last.metric),
        );
        facts.add(
            "iterations",
            format!("{} .. {}", first.iteration, last.iteration),
        );
    }
    Ok(report)
}

/// A Pollux placement or scalability table: model, GPU, and the ranges of its columns.
fn pollux_table(
    path: &Path,
    format: TraceFormat,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (t, report) = if format == TraceFormat::PolluxPlacements {
        curves::read_pollux_placements(path, opts)?
    } else {
        curves::read_pollux_scalability(path, opts)?
    };
    facts.add("model", &t.model);
    facts.add(
        "gpu",
        t.gpu.as_deref().unwrap_or("(original Pollux profile)"),
    );
    facts.add("rows", t.rows.len());
    if let Some((lo, hi)) = min_max(t.rows.iter().map(|r| f64::from(r.num_replicas))) {
        facts.add("GPUs", format!("{lo} .. {hi}"));
    }
    if let Some((lo, hi)) = min_max(t.rows.iter().map(|r| f64::from(r.num_nodes))) {
        facts.add("nodes", format!("{lo} .. {hi}"));
    }
    if let Some((lo, hi)) = min_max(t.rows.iter().map(|r| f64::from(r.local_bsz))) {
        facts.add("local batch size", format!("{lo} .. {hi}"));
    }
    if let Some((lo, hi)) = min_max(t.rows.iter().map(|r| r.step_time_s)) {
        facts.add("step time", format!("{lo:.4} .. {hi:.4} s"));
    }
    Ok(report)
}

/// TPC-H DAGs: scales, queries, stages, edges, tasks, executor counts, critical paths.
fn tpch_dags(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (jobs, report) = dag::read_tpch_dags(path, opts)?;
    facts.add("DAGs", jobs.len());
    facts.add(
        "scales",
        list(ordered(jobs.iter().filter_map(|j| j.scale.clone()))),
    );
    facts.add("queries", distinct(jobs.iter().map(|j| j.name.clone())));
    let stages: usize = jobs.iter().map(|j| j.stages.len()).sum();
    facts.add("stages", stages);
    if let Some((lo, hi)) = min_max(jobs.iter().map(|j| j.stages.len() as f64)) {
        facts.add("stages per DAG", format!("{lo} .. {hi}"));
    }
    facts.add("edges", jobs.iter().map(|j| j.edges.len()).sum::<usize>());
    let tasks: u64 = jobs
        .iter()
        .flat_map(|j| j.stages.iter().map(|s| u64::from(s.num_tasks)))
        .sum();
    facts.add("tasks", tasks);
    let execs: BTreeSet<u32> = jobs.iter().flat_map(|j| j.executor_counts()).collect();
    facts.add("executor counts", list(execs.iter().map(u32::to_string)));
    let cp10 = jobs
        .iter()
        .filter_map(|j| j.at_executors(10).and_then(|k| k.critical_path_s()));
    if let Some((lo, hi)) = min_max(cp10) {
        facts.add(
            "critical path at 10 executors (estimate)",
            format!("{} .. {}", secs(lo), secs(hi)),
        );
    }
    Ok(report)
}

/// A WfCommons workflow: its system, tasks, edges, kinds, makespan and critical path.
fn wfcommons(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (job, report) = dag::read_wfcommons(path, opts)?;
    facts.add("workflow", &job.name);
    for key in ["runtime_system", "schema_version", "executed_at"] {
        if let Some(v) = job.meta.get(key) {
            facts.add(&key.replace('_', " "), v);
        }
    }
    facts.add("tasks", job.stages.len());
    facts.add("edges", job.edges.len());
    facts.add(
        "task kinds",
        distinct(job.stages.iter().filter_map(|s| s.kind.clone())),
    );
    if let Some(m) = job.recorded_makespan_s {
        facts.add("recorded makespan", secs(m));
    }
    if let Some(cp) = job.critical_path_s() {
        facts.add("critical path", secs(cp));
    }
    if let Some(total) = job.total_duration_s() {
        facts.add("sum of task runtimes", secs(total));
    }
    Ok(report)
}

/// Gavel throughputs: GPU and job types, pairs, and median speeds against a reference GPU.
fn gavel_throughputs(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (t, report) = cluster::read_gavel_throughputs(path, opts)?;
    facts.add(
        "GPU types",
        list(ordered(t.isolated.iter().map(|x| x.gpu.clone()))),
    );
    facts.add(
        "job types",
        distinct(t.isolated.iter().map(|x| x.job_type.clone())),
    );
    facts.add("isolated throughputs", t.isolated.len());
    facts.add("co-located pairs", t.colocated.len());
    let reference = if t.isolated.iter().any(|x| x.gpu == "k80") {
        Some("k80".to_string())
    } else {
        t.isolated.first().map(|x| x.gpu.clone())
    };
    if let Some(reference) = reference {
        let speeds = cluster::relative_speeds(&t.isolated, &reference);
        facts.add(
            &format!("median speed vs {reference}"),
            list(speeds.iter().map(|(g, s)| format!("{g} {s:.2}×"))),
        );
    }
    Ok(report)
}

/// A node-fault trace: episodes, nodes, levels, top classes, span and durations.
fn node_faults(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (eps, report) = cluster::read_fault_trace(path, opts)?;
    facts.add("fault episodes", eps.len());
    facts.add("nodes", distinct(eps.iter().map(|e| e.node_id.clone())));
    facts.add("levels", counts(eps.iter().map(|e| e.level.clone())));
    facts.add("top classes", top(eps.iter().map(|e| e.class.clone()), 5));
    if let Some((lo, hi)) = min_max(eps.iter().flat_map(|e| [e.start_s, e.end_s])) {
        facts.add(
            "span",
            format!("day {:.1} .. day {:.1}", lo / 86_400.0, hi / 86_400.0),
        );
    }
    let mut durs: Vec<f64> = eps.iter().map(|e| e.duration_s()).collect();
    durs.sort_by(f64::total_cmp);
    if let Some(m) = durs.get(durs.len() / 2) {
        facts.add("median episode", secs(*m));
    }
    let down: f64 = durs.iter().sum();
    facts.add(
        "total fault time",
        format!("{:.1} node-days", down / 86_400.0),
    );
    Ok(report)
}

/// Fault statistics: totals by level, classes and descriptions.
fn fault_statistics(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (s, report) = cluster::read_fault_statistics(path, opts)?;
    facts.add("faults", s.total());
    facts.add(
        "levels",
        list(s.levels.iter().map(|l| format!("{} {}", l.level, l.total))),
    );
    facts.add(
        "classes",
        s.levels.iter().map(|l| l.classes.len()).sum::<usize>(),
    );
    facts.add(
        "descriptions",
        s.levels
            .iter()
            .flat_map(|l| l.classes.iter().map(|c| c.descs.len()))
            .sum::<usize>(),
    );
    Ok(report)
}

/// A cluster summary: clusters, columns and job counts.
fn cluster_summary(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (rows, report) = cluster::read_cluster_summary(path, opts)?;
    facts.add("clusters", list(rows.iter().map(|r| r.id.clone())));
    facts.add(
        "columns",
        distinct(rows.iter().flat_map(|r| r.values.keys().cloned())),
    );
    if rows.iter().any(|r| r.values.contains_key("job_num")) {
        facts.add(
            "jobs",
            list(rows.iter().filter_map(|r| {
                r.values
                    .get("job_num")
                    .map(|n| format!("{} {}", r.id, *n as u64))
            })),
        );
    }
    Ok(report)
}

/// An openb node list: nodes, GPUs by model, CPU cores and memory.
fn openb_nodes(
    path: &Path,
    opts: &ReadOptions,
    facts: &mut Facts,
) -> Result<ReadReport, DatasetError> {
    let (nodes, report) = cluster::read_openb_nodes(path, opts)?;
    facts.add("nodes", nodes.len());
    facts.add("GPUs", nodes.iter().map(|n| u64::from(n.gpus)).sum::<u64>());
    facts.add(
        "GPU models (nodes)",
        counts(
            nodes
                .iter()
                .map(|n| n.gpu_model.clone().unwrap_or_else(|| "none".into())),
        ),
    );
    facts.add(
        "CPU cores",
        format!("{:.0}", nodes.iter().map(|n| n.cpus).sum::<f64>()),
    );
    facts.add(
        "memory",
        format!(
            "{:.1} TiB",
            nodes.iter().map(|n| n.memory_mib).sum::<f64>() / 1_048_576.0
        ),
    );
    Ok(report)
}

#[derive(Default)]
struct Facts(Vec<(String, String)>);

impl Facts {
    fn add(&mut self, name: &str, value: impl ToString) {
        self.0.push((name.to_string(), value.to_string()));
    }
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

fn distinct(values: impl Iterator<Item = String>) -> usize {
    values.collect::<BTreeSet<_>>().len()
}

/// Distinct values in order of first appearance.
fn ordered(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    values.filter(|v| seen.insert(v.clone())).collect()
}

fn list(values: impl IntoIterator<Item = String>) -> String {
    values.into_iter().collect::<Vec<_>>().join(", ")
}

/// `name count` pairs, most frequent first.
fn counts(values: impl Iterator<Item = String>) -> String {
    top(values, usize::MAX)
}

fn top(values: impl Iterator<Item = String>, n: usize) -> String {
    let mut c: BTreeMap<String, usize> = BTreeMap::new();
    for v in values {
        *c.entry(v).or_insert(0) += 1;
    }
    let mut v: Vec<(String, usize)> = c.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list(v.into_iter().take(n).map(|(k, n)| format!("{k} {n}")))
}

/// Seconds, human-readable.
fn secs(s: f64) -> String {
    let a = s.abs();
    if a >= 86_400.0 {
        format!("{:.1} d", s / 86_400.0)
    } else if a >= 3_600.0 {
        format!("{:.1} h", s / 3_600.0)
    } else if a >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// Unix seconds → `YYYY-MM-DD`.
fn date(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp_millis((unix_s * 1000.0) as i64)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| format!("{unix_s}"))
}
