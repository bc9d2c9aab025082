//! The DAG job and its stages, as every DAG reader produces them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::graph::critical_path;

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

/// Edges `(parent, child)` of stages (by their `parents`), sorted: a [`DagJob::edges`].
pub fn edges_of(stages: &[DagStage]) -> Vec<(usize, usize)> {
    let mut edges: Vec<(usize, usize)> = stages
        .iter()
        .enumerate()
        .flat_map(|(c, s)| s.parents.iter().map(move |&p| (p, c)))
        .collect();
    edges.sort_unstable();
    edges
}
