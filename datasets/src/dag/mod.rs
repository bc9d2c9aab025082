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
//! duplicate ids, cycles and unusable runtimes are a
//! [`DatasetError::Format`](crate::DatasetError::Format) naming the task: a workflow with a
//! broken graph cannot be used at all.
//!
//! [`critical_path`] computes the longest path through a DAG given per-stage durations.

mod graph;
mod job;
mod tpch;
mod wfcommons;

pub use graph::{critical_path, topological_order, DagShapeError};
pub use job::{edges_of, DagJob, DagStage, TaskResources, TaskWaves};
pub use tpch::read_tpch_dags;
pub use wfcommons::read_wfcommons;
