//! The canonical job table.
//!
//! Every job-trace reader produces rows of [`JobRecord`]; [`JobTable`] holds them as a polars
//! `DataFrame` with these columns (all times and durations in seconds; null where the trace does
//! not say, never made up):
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `job_id` | str | the trace's job id; traces without one get `<file stem>:<line>` |
//! | `submit_time` | f64 | when the job was submitted (see [`TimeOrigin`]) |
//! | `start_time` | f64? | when it started running |
//! | `queue_wait` | f64? | `start_time − submit_time` (or the trace's own wait field) |
//! | `end_time` | f64? | when it ended |
//! | `duration` | f64? | run time (end − start, or the trace's own runtime field) |
//! | `num_gpus` | f64? | GPUs requested; fractional where GPUs are shared (openb `gpu_milli`) |
//! | `num_nodes` | f64? | nodes requested/allocated (HPC logs, multi-node runs) |
//! | `gpu_type` | str? | GPU model or spec (`V100`, `A100-PCIE-40GB`, ...) |
//! | `cpus` | f64? | CPU cores requested (or processors, for standard SWF) |
//! | `memory_mib` | f64? | memory requested, MiB |
//! | `requested_time` | f64? | requested wall time limit |
//! | `user` | str? | submitting user (hashed in most traces) |
//! | `group` | str? | virtual cluster / group / account |
//! | `job_name` | str? | job or application name |
//! | `cluster` | str? | which cluster of a multi-cluster dataset |
//! | `queue` | str? | queue / QoS class (Slurm: the partition) |
//! | `qos` | str? | Slurm quality of service, where the trace has it apart from the queue |
//! | `priority` | f64? | scheduler priority as the trace reports it (Slurm's `Priority`) |
//! | `status` | str | `completed`, `failed`, `killed` or `unknown` ([`JobStatus`]) |
//! | `source` | str | the reader that produced the row (`philly`, `swf`, ...) |

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::DatasetError;

/// Final state of a job, as far as the trace tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Ran to completion.
    Completed,
    /// Ended with an error.
    Failed,
    /// Cancelled or killed (by the user, an admin or a time limit).
    Killed,
    /// The trace does not say, or the job had not ended when the trace stopped (censored).
    #[default]
    Unknown,
}

impl JobStatus {
    /// The lowercase name used in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Killed => "killed",
            JobStatus::Unknown => "unknown",
        }
    }

    /// Parses the table's lowercase name.
    pub fn parse(s: &str) -> Option<JobStatus> {
        match s {
            "completed" => Some(JobStatus::Completed),
            "failed" => Some(JobStatus::Failed),
            "killed" => Some(JobStatus::Killed),
            "unknown" => Some(JobStatus::Unknown),
            _ => None,
        }
    }
}

/// What `submit_time` is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TimeOrigin {
    /// Seconds since the Unix epoch (UTC).
    Unix,
    /// Seconds since the start of the trace (the trace gives no absolute date).
    #[default]
    Relative,
}

/// One job, as read from a trace. The row form of [`JobTable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JobRecord {
    pub job_id: String,
    pub submit_time: f64,
    pub start_time: Option<f64>,
    pub queue_wait: Option<f64>,
    pub end_time: Option<f64>,
    pub duration: Option<f64>,
    pub num_gpus: Option<f64>,
    pub num_nodes: Option<f64>,
    pub gpu_type: Option<String>,
    pub cpus: Option<f64>,
    pub memory_mib: Option<f64>,
    pub requested_time: Option<f64>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub job_name: Option<String>,
    pub cluster: Option<String>,
    pub queue: Option<String>,
    pub qos: Option<String>,
    pub priority: Option<f64>,
    pub status: JobStatus,
    pub source: String,
}

impl JobRecord {
    /// Fills `queue_wait`, `end_time` and `duration` from the others where they are derivable
    /// and not given. Never overwrites a value the trace gave.
    pub fn derive_times(&mut self) {
        if self.queue_wait.is_none() {
            if let Some(start) = self.start_time {
                self.queue_wait = Some(start - self.submit_time);
            }
        }
        if self.start_time.is_none() {
            if let Some(wait) = self.queue_wait {
                self.start_time = Some(self.submit_time + wait);
            }
        }
        if self.duration.is_none() {
            if let (Some(s), Some(e)) = (self.start_time, self.end_time) {
                self.duration = Some(e - s);
            }
        }
        if self.end_time.is_none() {
            if let (Some(s), Some(d)) = (self.start_time, self.duration) {
                self.end_time = Some(s + d);
            }
        }
    }
}

/// The canonical job table: a polars `DataFrame` with the columns in the [module docs](self).
#[derive(Debug, Clone)]
pub struct JobTable {
    df: DataFrame,
    origin: TimeOrigin,
}

/// Names of the canonical columns, in order.
pub const COLUMNS: [&str; 21] = [
    "job_id",
    "submit_time",
    "start_time",
    "queue_wait",
    "end_time",
    "duration",
    "num_gpus",
    "num_nodes",
    "gpu_type",
    "cpus",
    "memory_mib",
    "requested_time",
    "user",
    "group",
    "job_name",
    "cluster",
    "queue",
    "qos",
    "priority",
    "status",
    "source",
];

/// Collects [`JobRecord`]s column by column and builds a [`JobTable`].
#[derive(Debug, Default)]
pub struct JobTableBuilder {
    job_id: Vec<String>,
    submit_time: Vec<f64>,
    start_time: Vec<Option<f64>>,
    queue_wait: Vec<Option<f64>>,
    end_time: Vec<Option<f64>>,
    duration: Vec<Option<f64>>,
    num_gpus: Vec<Option<f64>>,
    num_nodes: Vec<Option<f64>>,
    gpu_type: Vec<Option<String>>,
    cpus: Vec<Option<f64>>,
    memory_mib: Vec<Option<f64>>,
    requested_time: Vec<Option<f64>>,
    user: Vec<Option<String>>,
    group: Vec<Option<String>>,
    job_name: Vec<Option<String>>,
    cluster: Vec<Option<String>>,
    queue: Vec<Option<String>>,
    qos: Vec<Option<String>>,
    priority: Vec<Option<f64>>,
    status: Vec<&'static str>,
    source: Vec<String>,
}

impl JobTableBuilder {
    /// Appends one job.
    pub fn push(&mut self, r: JobRecord) {
        self.job_id.push(r.job_id);
        self.submit_time.push(r.submit_time);
        self.start_time.push(r.start_time);
        self.queue_wait.push(r.queue_wait);
        self.end_time.push(r.end_time);
        self.duration.push(r.duration);
        self.num_gpus.push(r.num_gpus);
        self.num_nodes.push(r.num_nodes);
        self.gpu_type.push(r.gpu_type);
        self.cpus.push(r.cpus);
        self.memory_mib.push(r.memory_mib);
        self.requested_time.push(r.requested_time);
        self.user.push(r.user);
        self.group.push(r.group);
        self.job_name.push(r.job_name);
        self.cluster.push(r.cluster);
        self.queue.push(r.queue);
        self.qos.push(r.qos);
        self.priority.push(r.priority);
        self.status.push(r.status.as_str());
        self.source.push(r.source);
    }

    /// Number of jobs pushed so far.
    pub fn len(&self) -> usize {
        self.job_id.len()
    }

    /// True when no job was pushed.
    pub fn is_empty(&self) -> bool {
        self.job_id.is_empty()
    }

    /// Builds the table.
    pub fn build(self, origin: TimeOrigin) -> Result<JobTable, DatasetError> {
        let height = self.job_id.len();
        let cols: Vec<Column> = vec![
            Column::new("job_id".into(), self.job_id),
            Column::new("submit_time".into(), self.submit_time),
            Column::new("start_time".into(), self.start_time),
            Column::new("queue_wait".into(), self.queue_wait),
            Column::new("end_time".into(), self.end_time),
            Column::new("duration".into(), self.duration),
            Column::new("num_gpus".into(), self.num_gpus),
            Column::new("num_nodes".into(), self.num_nodes),
            Column::new("gpu_type".into(), self.gpu_type),
            Column::new("cpus".into(), self.cpus),
            Column::new("memory_mib".into(), self.memory_mib),
            Column::new("requested_time".into(), self.requested_time),
            Column::new("user".into(), self.user),
            Column::new("group".into(), self.group),
            Column::new("job_name".into(), self.job_name),
            Column::new("cluster".into(), self.cluster),
            Column::new("queue".into(), self.queue),
            Column::new("qos".into(), self.qos),
            Column::new("priority".into(), self.priority),
            Column::new("status".into(), self.status),
            Column::new("source".into(), self.source),
        ];
        let df = DataFrame::new(height, cols)?;
        Ok(JobTable { df, origin })
    }
}

impl JobTable {
    /// Builds a table from records.
    pub fn from_records(
        records: impl IntoIterator<Item = JobRecord>,
        origin: TimeOrigin,
    ) -> Result<JobTable, DatasetError> {
        let mut b = JobTableBuilder::default();
        for r in records {
            b.push(r);
        }
        b.build(origin)
    }

    /// Wraps a frame that already has the canonical columns (checked).
    pub fn from_frame(df: DataFrame, origin: TimeOrigin) -> Result<JobTable, DatasetError> {
        for c in COLUMNS {
            if df.column(c).is_err() {
                return Err(DatasetError::Polars(PolarsError::ColumnNotFound(
                    format!("canonical column `{c}` missing").into(),
                )));
            }
        }
        Ok(JobTable { df, origin })
    }

    /// The polars frame.
    pub fn frame(&self) -> &DataFrame {
        &self.df
    }

    /// What `submit_time` counts from.
    pub fn time_origin(&self) -> TimeOrigin {
        self.origin
    }

    /// Number of jobs.
    pub fn len(&self) -> usize {
        self.df.height()
    }

    /// True for a table with no jobs.
    pub fn is_empty(&self) -> bool {
        self.df.height() == 0
    }

    /// A float column as plain options (`submit_time`, `duration`, ...).
    pub fn f64_column(&self, name: &str) -> Result<Vec<Option<f64>>, DatasetError> {
        let ca = self.df.column(name)?.f64()?;
        Ok(ca.iter().collect())
    }

    /// A string column as plain options (`user`, `group`, ...).
    pub fn str_column(&self, name: &str) -> Result<Vec<Option<String>>, DatasetError> {
        let ca = self.df.column(name)?.str()?;
        Ok(ca.iter().map(|v| v.map(str::to_owned)).collect())
    }

    /// The table as rows, in table order. Each string is copied once, from the column
    /// into its record.
    pub fn to_records(&self) -> Result<Vec<JobRecord>, DatasetError> {
        let n = self.len();
        let f64s =
            |name: &str| -> Result<_, DatasetError> { Ok(self.df.column(name)?.f64()?.iter()) };
        let strs =
            |name: &str| -> Result<_, DatasetError> { Ok(self.df.column(name)?.str()?.iter()) };
        let (mut id, mut submit, mut start) =
            (strs("job_id")?, f64s("submit_time")?, f64s("start_time")?);
        let (mut wait, mut end, mut dur) =
            (f64s("queue_wait")?, f64s("end_time")?, f64s("duration")?);
        let (mut gpus, mut nodes, mut gpu_type) =
            (f64s("num_gpus")?, f64s("num_nodes")?, strs("gpu_type")?);
        let (mut cpus, mut mem, mut req) =
            (f64s("cpus")?, f64s("memory_mib")?, f64s("requested_time")?);
        let (mut user, mut group, mut name) = (strs("user")?, strs("group")?, strs("job_name")?);
        let (mut cluster, mut queue, mut qos) = (strs("cluster")?, strs("queue")?, strs("qos")?);
        let (mut priority, mut status, mut source) =
            (f64s("priority")?, strs("status")?, strs("source")?);
        // every column has the table's height: each iterator yields one value per row
        let owned = |v: Option<Option<&str>>| v.flatten().map(str::to_owned);
        let num = |v: Option<Option<f64>>| v.flatten();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(JobRecord {
                job_id: owned(id.next()).unwrap_or_default(),
                submit_time: num(submit.next()).unwrap_or(f64::NAN),
                start_time: num(start.next()),
                queue_wait: num(wait.next()),
                end_time: num(end.next()),
                duration: num(dur.next()),
                num_gpus: num(gpus.next()),
                num_nodes: num(nodes.next()),
                gpu_type: owned(gpu_type.next()),
                cpus: num(cpus.next()),
                memory_mib: num(mem.next()),
                requested_time: num(req.next()),
                user: owned(user.next()),
                group: owned(group.next()),
                job_name: owned(name.next()),
                cluster: owned(cluster.next()),
                queue: owned(queue.next()),
                qos: owned(qos.next()),
                priority: num(priority.next()),
                status: status
                    .next()
                    .flatten()
                    .and_then(JobStatus::parse)
                    .unwrap_or_default(),
                source: owned(source.next()).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Appends another table's rows (e.g. several cluster files of one dataset).
    pub fn vstack(&mut self, other: &JobTable) -> Result<(), DatasetError> {
        self.df.vstack_mut(&other.df)?;
        self.df.align_chunks();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_the_frame() {
        let mut a = JobRecord {
            job_id: "a".into(),
            submit_time: 10.0,
            start_time: Some(15.0),
            duration: Some(100.0),
            num_gpus: Some(0.5),
            user: Some("u1".into()),
            status: JobStatus::Failed,
            source: "test".into(),
            ..Default::default()
        };
        a.derive_times();
        assert_eq!(a.queue_wait, Some(5.0));
        assert_eq!(a.end_time, Some(115.0));
        let b = JobRecord {
            job_id: "b".into(),
            submit_time: 20.0,
            source: "test".into(),
            ..Default::default()
        };
        let t = JobTable::from_records(vec![a.clone(), b.clone()], TimeOrigin::Relative).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.frame().width(), COLUMNS.len());
        let back = t.to_records().unwrap();
        assert_eq!(back, vec![a, b]);
    }
}
