//! Alibaba GPU cluster trace v2023 ("openb", alibaba/clusterdata `cluster-trace-gpu-v2023`):
//! the pod list `openb_pod_list_*.csv`, one Kubernetes pod per row, with the header
//! `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`.
//! Times are whole seconds relative to the start of the trace.
//!
//! | openb column | canonical column |
//! |---|---|
//! | `name` | `job_id` |
//! | `creation_time` | `submit_time` |
//! | `scheduled_time` | `start_time` (empty for pods that were never scheduled: null) |
//! | `deletion_time` | `end_time` (null if empty: the pod was not deleted within the trace) |
//! | — | `duration` = `deletion_time − scheduled_time`, `queue_wait` = `scheduled_time − creation_time` |
//! | `num_gpu × gpu_milli / 1000` | `num_gpus` — fractional for GPU-sharing pods (`num_gpu` = 1, `gpu_milli` < 1000) |
//! | `cpu_milli / 1000` | `cpus` |
//! | `memory_mib` | `memory_mib` |
//! | `gpu_spec` | `gpu_type` — a *constraint* (`V100M16\|V100M32` = either), null when empty or `nan` |
//! | `qos` | `queue` (`LS`, `BE`, `Burstable`, `Guaranteed`) |
//! | `pod_phase` | `status`: `Succeeded` → completed, `Failed` → failed, `Running`/`Pending`/`Unknown` → unknown |
//!
//! `pod_phase` is the last phase recorded for the pod. In the published pod lists every pod has
//! a deletion time, so a `Running` pod was deleted while running (a normal stop of a
//! long-running service, a kill, or the end of the trace: the trace cannot tell) and a
//! `Pending` pod was deleted before it was scheduled. Both are kept with status `unknown`; so is
//! an empty or unrecognised phase (counted in a note). `Running` pods whose deletion time is the
//! file's last timestamp are counted in a note: they were most likely cut by the trace end.
//!
//! Rows whose times are out of order (scheduled before created, deleted before scheduled or
//! created) are dropped with a reason: the file gives no way to tell which time is wrong. The
//! bundled default pod list has no such rows.

use std::collections::BTreeMap;
use std::path::Path;

use super::fields::{read_csv_rows, Row};
use crate::error::DatasetError;
use crate::report::{ReadOptions, ReadReport, RowIssue};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Columns the pod list must have.
const REQUIRED: [&str; 11] = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
];

/// Reads an openb pod list (`openb_pod_list_default.csv` or one of its sampled variants).
pub fn read_pods(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Relative,
        ..Default::default()
    };
    report.note("openb: times are seconds relative to the trace start; submit = creation_time, start = scheduled_time, end = deletion_time");
    report.note("openb: num_gpus = num_gpu × gpu_milli / 1000, fractional for GPU-sharing pods (a pod with gpu_milli 460 asks for 0.46 of one GPU); cpus = cpu_milli / 1000; queue = qos");
    report.note("openb: gpu_spec is a GPU-type constraint (`A|B` = either), kept as gpu_type; null when empty");
    report.note("openb: pod_phase Succeeded → completed, Failed → failed; Running and Pending → unknown (the phase last seen before deletion: a Running pod's deletion may be a normal stop, a kill or the trace end; a Pending pod was deleted unscheduled, so it has no start and no duration)");
    report.note("openb: rows with times out of order (scheduled before created, deleted before scheduled or created) are dropped");

    let mut last_deletion = LastDeletion::default();
    let mut unmapped: BTreeMap<String, u64> = BTreeMap::new();
    read_csv_rows(
        path,
        None,
        &REQUIRED,
        opts,
        &mut report,
        |row, cols| {
            let (r, phase) = parse_pod(row, |c| cols.at(c))?;
            if !matches!(
                phase,
                "Succeeded" | "Failed" | "Running" | "Pending" | "Unknown"
            ) {
                *unmapped.entry(phase.to_string()).or_insert(0) += 1;
            }
            last_deletion.see(&r, phase == "Running");
            Ok(r)
        },
        |r: JobRecord| sink(r),
    )?;
    if let Some(note) = last_deletion.note() {
        report.note(note);
    }
    report.note_unrecognised(
        "openb: pods with an empty or unrecognised pod_phase",
        &unmapped,
    );
    Ok(report)
}

/// Tracks the latest deletion time and how many `Running` pods carry it: those were most
/// likely still running when the trace was cut, and their end time is the cut.
#[derive(Default)]
struct LastDeletion {
    time: Option<f64>,
    running_at_time: u64,
}

impl LastDeletion {
    fn see(&mut self, r: &JobRecord, running: bool) {
        let Some(end) = r.end_time else { return };
        match self.time {
            Some(t) if end < t => {}
            Some(t) if end == t => self.running_at_time += u64::from(running),
            _ => {
                self.time = Some(end);
                self.running_at_time = u64::from(running);
            }
        }
    }

    fn note(&self) -> Option<String> {
        let t = self.time?;
        (self.running_at_time > 0).then(|| {
            format!(
                "openb: {} Running pod(s) have the file's last deletion_time ({t}); they were probably still running when the trace ended, so their duration is a lower bound",
                self.running_at_time
            )
        })
    }
}

/// Parses one pod; also returns its raw `pod_phase`.
fn parse_pod<'a>(
    row: &Row<'a>,
    at: impl Fn(&str) -> usize,
) -> Result<(JobRecord, &'a str), RowIssue> {
    let name = row.raw(at("name"));
    if name.is_empty() {
        return Err(row.issue("name", "missing", name));
    }
    let required_non_negative = |field: &str| -> Result<f64, RowIssue> {
        row.non_negative(Some(at(field)), field)?
            .ok_or_else(|| row.issue(field, "missing", ""))
    };
    let cpu_milli = required_non_negative("cpu_milli")?;
    let memory_mib = required_non_negative("memory_mib")?;
    let num_gpu = required_non_negative("num_gpu")?;
    let gpu_milli = required_non_negative("gpu_milli")?;
    if gpu_milli > 1000.0 {
        return Err(row.issue(
            "gpu_milli",
            "above 1000 (more than one whole GPU per GPU)",
            row.raw(at("gpu_milli")),
        ));
    }
    let created = required_non_negative("creation_time")?;
    let deleted = row.non_negative(Some(at("deletion_time")), "deletion_time")?;
    let scheduled = row.non_negative(Some(at("scheduled_time")), "scheduled_time")?;

    let phase = row.raw(at("pod_phase"));
    let status = match phase {
        "Succeeded" => JobStatus::Completed,
        "Failed" => JobStatus::Failed,
        _ => JobStatus::Unknown,
    };

    if let Some(s) = scheduled {
        if s < created {
            return Err(row.issue(
                "scheduled_time",
                "before creation_time",
                row.raw(at("scheduled_time")),
            ));
        }
    }
    if let Some(d) = deleted {
        let (after, name) = match scheduled {
            Some(s) => (s, "before scheduled_time"),
            None => (created, "before creation_time"),
        };
        if d < after {
            return Err(row.issue("deletion_time", name, row.raw(at("deletion_time"))));
        }
    }

    let record = JobRecord {
        job_id: name.to_string(),
        submit_time: created,
        start_time: scheduled,
        queue_wait: scheduled.map(|s| s - created),
        end_time: deleted,
        duration: scheduled.zip(deleted).map(|(s, d)| d - s),
        num_gpus: Some(num_gpu * gpu_milli / 1000.0),
        cpus: Some(cpu_milli / 1000.0),
        memory_mib: Some(memory_mib),
        gpu_type: row.text(Some(at("gpu_spec"))),
        queue: row.text(Some(at("qos"))),
        status,
        source: "openb".into(),
        ..Default::default()
    };
    Ok((record, phase))
}
