//! Trace formats and their detection.

use std::path::Path;

use serde::Serialize;

use crate::error::DatasetError;
use crate::input;

/// Every file format Augur reads. Job traces become a [`crate::JobTable`]; the others become
/// curve, DAG or cluster tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Sia/Philly CSV: `timestamp,duration,num_gpus,gpu_time,cluster`.
    Philly,
    /// Philly `cluster_job_log` JSON (msr-fiddle/philly-traces).
    PhillyJobLog,
    /// Microsoft ITP cluster CSV (ElasticFlow): `job_id,submission_time,duration,num_gpu`.
    Itp,
    /// Alibaba openb 2023 pod list.
    OpenbPods,
    /// Alibaba openb 2023 GPU node list.
    OpenbNodes,
    /// Standard Workload Format, 18 fields (field 6 = average CPU time).
    Swf,
    /// ALCF variant of SWF where field 5 is nodes and field 6 the requested wall time (Mira).
    SwfAlcf,
    /// Helios `cluster_log.csv` (S-Lab HeliosData).
    Helios,
    /// Alibaba PAI 2020 `pai_job_table.csv` (needs `pai_task_table.csv` beside it for requests).
    PaiJobs,
    /// MLPerf Training runs (`runs.csv`): one job per training run.
    MlperfRuns,
    /// Slurm accounting, `sacct --parsable2` (`|`-separated, with a header).
    Sacct,
    /// MLPerf Training eval curves (`eval_curves.csv`).
    MlperfCurves,
    /// Pollux/Sia validation curve: `progress,iteration,metric,grad_sqr,grad_var`.
    PolluxValidation,
    /// Pollux/Sia step time by placement: `placement,local_bsz,step_time,sync_time`.
    PolluxPlacements,
    /// Pollux/Sia step time by scale: `num_nodes,num_replicas,local_bsz,step_time,sync_time`.
    PolluxScalability,
    /// TPC-H on Spark DAGs (Decima), JSON.
    TpchDags,
    /// WfCommons WfFormat workflow instance, JSON.
    WfCommons,
    /// Gavel measured throughputs, JSON.
    GavelThroughputs,
    /// StepFun GPU node fault trace (`fault_trace.json`).
    NodeFaults,
    /// StepFun fault statistics (`fault_statistics.json`): counts by level and class.
    FaultStatistics,
    /// Per-cluster summary statistics CSV (Helios / AcmeTrace).
    ClusterSummary,
}

impl TraceFormat {
    /// All formats, in the order `--help` lists them.
    pub const ALL: [TraceFormat; 21] = [
        TraceFormat::Philly,
        TraceFormat::PhillyJobLog,
        TraceFormat::Itp,
        TraceFormat::OpenbPods,
        TraceFormat::OpenbNodes,
        TraceFormat::Swf,
        TraceFormat::SwfAlcf,
        TraceFormat::Helios,
        TraceFormat::PaiJobs,
        TraceFormat::MlperfRuns,
        TraceFormat::Sacct,
        TraceFormat::MlperfCurves,
        TraceFormat::PolluxValidation,
        TraceFormat::PolluxPlacements,
        TraceFormat::PolluxScalability,
        TraceFormat::TpchDags,
        TraceFormat::WfCommons,
        TraceFormat::GavelThroughputs,
        TraceFormat::NodeFaults,
        TraceFormat::FaultStatistics,
        TraceFormat::ClusterSummary,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Philly => "philly",
            TraceFormat::PhillyJobLog => "philly-joblog",
            TraceFormat::Itp => "itp",
            TraceFormat::OpenbPods => "openb-pods",
            TraceFormat::OpenbNodes => "openb-nodes",
            TraceFormat::Swf => "swf",
            TraceFormat::SwfAlcf => "swf-alcf",
            TraceFormat::Helios => "helios",
            TraceFormat::PaiJobs => "pai",
            TraceFormat::MlperfRuns => "mlperf-runs",
            TraceFormat::Sacct => "sacct",
            TraceFormat::MlperfCurves => "mlperf-curves",
            TraceFormat::PolluxValidation => "pollux-validation",
            TraceFormat::PolluxPlacements => "pollux-placements",
            TraceFormat::PolluxScalability => "pollux-scalability",
            TraceFormat::TpchDags => "tpch-dags",
            TraceFormat::WfCommons => "wfcommons",
            TraceFormat::GavelThroughputs => "gavel",
            TraceFormat::NodeFaults => "node-faults",
            TraceFormat::FaultStatistics => "fault-statistics",
            TraceFormat::ClusterSummary => "cluster-summary",
        }
    }

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Option<TraceFormat> {
        TraceFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Comma-separated list of all names, for error messages.
    pub fn names() -> String {
        TraceFormat::ALL.map(|f| f.name()).join(", ")
    }

    /// True for formats whose rows are jobs (they load into a [`crate::JobTable`]).
    pub fn is_job_trace(self) -> bool {
        matches!(
            self,
            TraceFormat::Philly
                | TraceFormat::PhillyJobLog
                | TraceFormat::Itp
                | TraceFormat::OpenbPods
                | TraceFormat::Swf
                | TraceFormat::SwfAlcf
                | TraceFormat::Helios
                | TraceFormat::PaiJobs
                | TraceFormat::MlperfRuns
                | TraceFormat::Sacct
        )
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Tells a file's format from its name and first bytes.
pub fn detect_format(path: &Path) -> Result<TraceFormat, DatasetError> {
    let unknown = |reason: &str| DatasetError::UnknownFormat {
        path: path.to_path_buf(),
        reason: reason.to_string(),
        known: TraceFormat::names(),
    };
    let name = input::display_name(path).to_ascii_lowercase();
    let head = input::peek(path, 4096)?;
    let text = String::from_utf8_lossy(&head);
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.is_empty() {
        return Err(unknown("the file is empty"));
    }
    if name.contains("pai_job_table") {
        return Ok(TraceFormat::PaiJobs);
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return detect_json(trimmed, &name).ok_or_else(|| {
            unknown(
                "JSON, but not a Philly job log, TPC-H DAG, WfCommons, Gavel or node-fault file",
            )
        });
    }
    let first_line = trimmed.lines().next().unwrap_or("").trim();
    let header = first_line.to_ascii_lowercase();
    if let Some(fmt) = detect_header(&header) {
        return Ok(fmt);
    }
    if first_line.starts_with(';') || name.ends_with(".swf") || name.ends_with(".swf.gz") {
        let lower = text.to_ascii_lowercase();
        if lower.contains("installation: mira") || lower.contains("alcf") {
            return Ok(TraceFormat::SwfAlcf);
        }
        return Ok(TraceFormat::Swf);
    }
    let numeric_fields = first_line
        .split_whitespace()
        .filter(|f| f.parse::<f64>().is_ok())
        .count();
    if numeric_fields == 18 {
        return Ok(TraceFormat::Swf);
    }
    Err(unknown("unrecognised header"))
}

/// The format a lower-cased first line names: a CSV header (by prefix, or by column set for
/// the Sia step-time tables) or a `sacct -P` header.
fn detect_header(header: &str) -> Option<TraceFormat> {
    let csv_formats: [(&str, TraceFormat); 9] = [
        ("timestamp,duration,num_gpus", TraceFormat::Philly),
        ("job_id,submission_time,duration,num_gpu", TraceFormat::Itp),
        ("name,cpu_milli,memory_mib,num_gpu", TraceFormat::OpenbPods),
        ("sn,cpu_milli,memory_mib,gpu", TraceFormat::OpenbNodes),
        ("run_id,submitter,system,benchmark", TraceFormat::MlperfRuns),
        ("run_id,key,value,epoch_num", TraceFormat::MlperfCurves),
        ("progress,iteration,metric", TraceFormat::PolluxValidation),
        (
            "placement,local_bsz,step_time",
            TraceFormat::PolluxPlacements,
        ),
        (
            "num_nodes,num_replicas,local_bsz",
            TraceFormat::PolluxScalability,
        ),
    ];
    for (prefix, fmt) in csv_formats {
        if header.starts_with(prefix) {
            return Some(fmt);
        }
    }
    // Most Sia step-time tables put the columns in another order
    // (`local_bsz,step_time,sync_time,placement`, `local_bsz,placement,...`,
    // `local_bsz,step_time,sync_time,num_nodes,num_replicas`): match them by column set.
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let has = |c: &str| columns.contains(&c);
    if has("local_bsz") && has("step_time") && has("sync_time") {
        if has("placement") {
            return Some(TraceFormat::PolluxPlacements);
        }
        if has("num_nodes") && has("num_replicas") {
            return Some(TraceFormat::PolluxScalability);
        }
    }
    if header.starts_with("id,") && header.contains("job_num") {
        return Some(TraceFormat::ClusterSummary);
    }
    if header.contains("job_id") && header.contains("gpu_num") && header.contains("state") {
        return Some(TraceFormat::Helios);
    }
    if is_sacct_header(header) {
        return Some(TraceFormat::Sacct);
    }
    None
}

/// `sacct -P` output: `|`-separated, naming a job id, the submit time and the state.
fn is_sacct_header(header: &str) -> bool {
    let fields: Vec<&str> = header.split('|').map(str::trim).collect();
    let has = |c: &str| fields.contains(&c);
    (has("jobid") || has("jobidraw")) && has("submit") && has("state")
}

fn detect_json(text: &str, name: &str) -> Option<TraceFormat> {
    if name.contains("fault_statistics") || text.contains("\"LevelTotal\"") {
        return Some(TraceFormat::FaultStatistics);
    }
    if text.contains("\"event_type\"") && text.contains("\"fault_type\"") {
        return Some(TraceFormat::NodeFaults);
    }
    if text.contains("\"workflow\"") || text.contains("\"schemaVersion\"") {
        return Some(TraceFormat::WfCommons);
    }
    if text.contains("\"adj\"") || text.contains("\"task_duration\"") {
        return Some(TraceFormat::TpchDags);
    }
    if text.contains("\"attempts\"") || text.contains("\"submitted_time\"") {
        return Some(TraceFormat::PhillyJobLog);
    }
    let t = text.trim_start_matches('{').trim_start();
    for gpu in ["\"k80\"", "\"p100\"", "\"v100\""] {
        if t.starts_with(gpu) {
            return Some(TraceFormat::GavelThroughputs);
        }
    }
    None
}
