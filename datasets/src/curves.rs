//! Training-curve readers: MLPerf Training v1.0 runs and eval curves, and the Pollux/Sia
//! profiles (validation curves and step-time tables).
//!
//! - [`read_mlperf_runs`]: `runs.csv`, one [`MlperfRun`] per training run (submitter, system,
//!   benchmark, scale, batch size, start/stop, status, final accuracy).
//! - [`read_mlperf_curves`]: `eval_curves.csv` (`run_id,key,value,epoch_num,samples_count,
//!   t_since_run_start_s`), grouped into one [`Curve`] per run and key, points sorted by wall
//!   time. A few runs log an evaluation before `run_start`; those points keep their negative
//!   wall time.
//! - [`read_pollux_validation`]: `validation-<global bsz>.csv`
//!   (`progress,iteration,metric,grad_sqr,grad_var`) → [`PolluxValidation`].
//! - [`read_pollux_placements`] / [`read_pollux_scalability`]: `placements[-<gpu>].csv`
//!   (`placement,local_bsz,step_time,sync_time`) and `scalability[-<gpu>].csv`
//!   (`num_nodes,num_replicas,local_bsz,step_time,sync_time`) → [`StepTimeTable`]. Columns
//!   are found by name (the files come with them in several orders).
//! - [`read_pollux_dir`]: every profile of a folder.
//!
//! Model, GPU kind and batch size come from the file name ([`parse_pollux_file_name`]):
//! `sia-simulator__traces__cifar10__placements-rtx.csv` (model between the last two `__`) or
//! `cifar10/placements-rtx.csv` (model = parent folder). A file without a GPU suffix is the
//! original Pollux profile (`gpu: None`).

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::DatasetError;
use crate::input;
use crate::jobs::{read_csv_rows, Row};
use crate::report::{ReadOptions, ReadReport, RowIssue};
use crate::schema::TimeOrigin;

// ---------------------------------------------------------------------------------------------
// Shared field helpers (also used by the cluster and DAG readers).

/// Optional non-negative integer (counts, sizes): missing markers become `None`; fractions,
/// negatives and non-numbers are issues.
pub(crate) fn count_field(
    row: &Row,
    idx: Option<usize>,
    field: &str,
) -> Result<Option<u64>, RowIssue> {
    let Some(v) = row.num(idx, field)? else {
        return Ok(None);
    };
    let raw = row.raw(idx.unwrap_or(usize::MAX));
    if v < 0.0 {
        return Err(row.issue(field, "negative", raw));
    }
    if v.fract() != 0.0 || v > u64::MAX as f64 {
        return Err(row.issue(field, "not a whole number", raw));
    }
    Ok(Some(v as u64))
}

/// Required non-negative integer.
pub(crate) fn req_count(row: &Row, idx: usize, field: &str) -> Result<u64, RowIssue> {
    count_field(row, Some(idx), field)?.ok_or_else(|| row.issue(field, "missing", row.raw(idx)))
}

/// Required non-empty text.
pub(crate) fn req_text(row: &Row, idx: usize, field: &str) -> Result<String, RowIssue> {
    row.text(Some(idx))
        .ok_or_else(|| row.issue(field, "missing", row.raw(idx)))
}

/// `u64` → `u32`, as an issue when it does not fit.
fn fit_u32(row: &Row, v: u64, field: &str) -> Result<u32, RowIssue> {
    u32::try_from(v).map_err(|_| row.issue(field, "too large", &v.to_string()))
}

// ---------------------------------------------------------------------------------------------
// MLPerf runs.

/// How an MLPerf run ended (`run_stop` status in the MLLOG).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Reached the quality target.
    Success,
    /// Stopped before the target (`aborted`; also the `abort` spelling some submitters use).
    Aborted,
    /// Failed (`fail`).
    Fail,
}

impl RunStatus {
    /// Parses the `run_status` column (case-insensitive).
    pub fn parse(raw: &str) -> Option<RunStatus> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "success" => Some(RunStatus::Success),
            "aborted" | "abort" => Some(RunStatus::Aborted),
            "fail" | "failed" | "failure" => Some(RunStatus::Fail),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Aborted => "aborted",
            RunStatus::Fail => "fail",
        }
    }
}

/// One MLPerf Training run (`runs.csv` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlperfRun {
    /// The file's run id (joins `eval_curves.csv`).
    pub run_id: String,
    /// Submitting organisation.
    pub submitter: String,
    /// System name as submitted.
    pub system: String,
    /// Benchmark (`resnet`, `bert`, `unet3d`, ...).
    pub benchmark: String,
    /// The result file the run came from (`result_3.txt`).
    pub result_file: Option<String>,
    /// Nodes used.
    pub num_nodes: Option<u32>,
    /// Accelerators per node.
    pub accelerators_per_node: Option<u32>,
    /// Accelerator model (`NVIDIA A100-SXM4-80GB (400W)`, `TPU`, ...).
    pub accelerator_model: Option<String>,
    /// Framework(s) as submitted (may contain commas).
    pub framework: Option<String>,
    /// Global batch size.
    pub global_batch_size: Option<u64>,
    /// Seed as logged (usually an integer; some submitters log a float timestamp).
    pub seed: Option<String>,
    /// `run_start`, milliseconds since the Unix epoch.
    pub run_start_ms: i64,
    /// `run_stop`, milliseconds since the Unix epoch (`None` when the log has no stop).
    pub run_stop_ms: Option<i64>,
    /// `run_stop − run_start` in seconds: MLPerf time-to-train.
    pub duration_s: Option<f64>,
    /// How the run ended (`None` when the log has no `run_stop`).
    pub status: Option<RunStatus>,
    /// Eval points the extraction counted for the run.
    pub n_eval_points: Option<u32>,
    /// Last eval accuracy logged (`None` for runs without a scalar accuracy, e.g. maskrcnn).
    pub final_eval_accuracy: Option<f64>,
}

impl MlperfRun {
    /// Accelerators in total (`num_nodes × accelerators_per_node`).
    pub fn num_accelerators(&self) -> Option<u64> {
        Some(u64::from(self.num_nodes?) * u64::from(self.accelerators_per_node?))
    }
}

const RUN_COLUMNS: [&str; 16] = [
    "run_id",
    "submitter",
    "system",
    "benchmark",
    "num_nodes",
    "accelerators_per_node",
    "accelerator_model",
    "framework",
    "global_batch_size",
    "seed",
    "run_start_ms",
    "run_stop_ms",
    "duration_s",
    "run_status",
    "n_eval_points",
    "final_eval_accuracy",
];

/// Whole milliseconds since the epoch.
fn millis(row: &Row, idx: usize, field: &str) -> Result<Option<i64>, RowIssue> {
    let Some(v) = row.num(Some(idx), field)? else {
        return Ok(None);
    };
    if v.fract() != 0.0 || v.abs() > 9.0e15 {
        return Err(row.issue(field, "not whole milliseconds", row.raw(idx)));
    }
    Ok(Some(v as i64))
}

/// Reads MLPerf `runs.csv` into [`MlperfRun`]s (file order).
pub fn read_mlperf_runs(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<MlperfRun>, ReadReport), DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    report.note("mlperf runs: run_start/run_stop are Unix milliseconds; duration_s = run_stop − run_start (time-to-train); `abort` read as `aborted`");
    let mut runs = Vec::new();
    read_csv_rows(
        path,
        None,
        &RUN_COLUMNS,
        opts,
        &mut report,
        |row, cols| {
            let status_raw = row.raw(cols.at("run_status"));
            let status = match row.text(Some(cols.at("run_status"))) {
                None => None,
                Some(s) => Some(RunStatus::parse(&s).ok_or_else(|| {
                    row.issue("run_status", "not success/aborted/fail", status_raw)
                })?),
            };
            let duration_s = row.non_negative(Some(cols.at("duration_s")), "duration_s")?;
            let run_start_ms = millis(row, cols.at("run_start_ms"), "run_start_ms")?
                .ok_or_else(|| row.issue("run_start_ms", "missing", ""))?;
            let run_stop_ms = millis(row, cols.at("run_stop_ms"), "run_stop_ms")?;
            if run_stop_ms.is_some_and(|stop| stop < run_start_ms) {
                return Err(row.issue(
                    "run_stop_ms",
                    "before run_start_ms",
                    row.raw(cols.at("run_stop_ms")),
                ));
            }
            let u32_field = |name: &str| -> Result<Option<u32>, RowIssue> {
                count_field(row, Some(cols.at(name)), name)?
                    .map(|v| fit_u32(row, v, name))
                    .transpose()
            };
            Ok(MlperfRun {
                run_id: req_text(row, cols.at("run_id"), "run_id")?,
                submitter: req_text(row, cols.at("submitter"), "submitter")?,
                system: req_text(row, cols.at("system"), "system")?,
                benchmark: req_text(row, cols.at("benchmark"), "benchmark")?,
                result_file: row.text(cols.optional("result_file")),
                num_nodes: u32_field("num_nodes")?,
                accelerators_per_node: u32_field("accelerators_per_node")?,
                accelerator_model: row.text(Some(cols.at("accelerator_model"))),
                framework: row.text(Some(cols.at("framework"))),
                global_batch_size: count_field(
                    row,
                    Some(cols.at("global_batch_size")),
                    "global_batch_size",
                )?,
                seed: row.text(Some(cols.at("seed"))),
                run_start_ms,
                run_stop_ms,
                duration_s,
                status,
                n_eval_points: u32_field("n_eval_points")?,
                final_eval_accuracy: row
                    .num(Some(cols.at("final_eval_accuracy")), "final_eval_accuracy")?,
            })
        },
        |r| runs.push(r),
    )?;
    let unfinished = runs.iter().filter(|r| r.run_stop_ms.is_none()).count();
    if unfinished > 0 {
        report.note(format!(
            "mlperf runs: {unfinished} run(s) have no run_stop (no duration or status); kept with those fields empty"
        ));
    }
    Ok((runs, report))
}

// ---------------------------------------------------------------------------------------------
// MLPerf eval curves.

/// One evaluation of a training run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Epoch at the evaluation (fractional for some benchmarks).
    pub epoch: Option<f64>,
    /// Samples seen at the evaluation.
    pub samples: Option<f64>,
    /// Seconds since `run_start` (negative for evaluations logged before it).
    pub wall_time_s: f64,
    /// The metric's value.
    pub value: f64,
}

/// The evaluations of one run for one metric, sorted by wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Run id (joins [`MlperfRun::run_id`]).
    pub run_id: String,
    /// Metric key (`eval_accuracy`).
    pub metric: String,
    /// Points, sorted by wall time (ties keep file order).
    pub points: Vec<CurvePoint>,
}

/// Reads MLPerf `eval_curves.csv` into one [`Curve`] per (run, key), in order of first
/// appearance.
pub fn read_mlperf_curves(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(Vec<Curve>, ReadReport), DatasetError> {
    let mut report = ReadReport::default();
    report.note("mlperf curves: t_since_run_start_s is seconds since the run's run_start; points sorted by it per run");
    let mut curves: Vec<Curve> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    read_csv_rows(
        path,
        None,
        &["run_id", "key", "value", "t_since_run_start_s"],
        opts,
        &mut report,
        |row, cols| {
            let run_id = req_text(row, cols.at("run_id"), "run_id")?;
            let key = req_text(row, cols.at("key"), "key")?;
            let point = CurvePoint {
                epoch: row.num(cols.optional("epoch_num"), "epoch_num")?,
                samples: row.non_negative(cols.optional("samples_count"), "samples_count")?,
                wall_time_s: row.req_num(cols.at("t_since_run_start_s"), "t_since_run_start_s")?,
                value: row.req_num(cols.at("value"), "value")?,
            };
            Ok((run_id, key, point))
        },
        |(run_id, key, point)| {
            let k = (run_id, key);
            let i = match index.get(&k) {
                Some(&i) => i,
                None => {
                    let i = curves.len();
                    curves.push(Curve {
                        run_id: k.0.clone(),
                        metric: k.1.clone(),
                        points: Vec::new(),
                    });
                    index.insert(k, i);
                    i
                }
            };
            if let Some(c) = curves.get_mut(i) {
                c.points.push(point);
            }
        },
    )?;
    let mut early = 0usize;
    for c in &mut curves {
        c.points
            .sort_by(|a, b| a.wall_time_s.total_cmp(&b.wall_time_s));
        early += c.points.iter().filter(|p| p.wall_time_s < 0.0).count();
    }
    if early > 0 {
        report.note(format!(
            "mlperf curves: {early} point(s) were logged before run_start (negative wall time); kept"
        ));
    }
    Ok((curves, report))
}

// ---------------------------------------------------------------------------------------------
// Pollux / Sia profiles.

/// Which Pollux/Sia profile a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolluxFileKind {
    /// `validation-<global bsz>.csv`.
    Validation,
    /// `placements[-<gpu>].csv`.
    Placements,
    /// `scalability[-<gpu>].csv`.
    Scalability,
}

/// What a Pollux/Sia profile's file name says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolluxFileName {
    /// Model (`cifar10`, `bert`, `gpt_pmp`, ...).
    pub model: String,
    /// Which profile.
    pub kind: PolluxFileKind,
    /// GPU / cluster kind suffix (`rtx`, `dgx-ext`, ...); `None` for the original profile.
    pub gpu: Option<String>,
    /// Global batch size of a validation run.
    pub global_batch_size: Option<u32>,
}

/// Parses a Pollux/Sia profile file name; `None` when it is not one.
///
/// `sia-simulator__traces__cifar10__placements-rtx.csv` → model `cifar10`, placements, `rtx`;
/// `bert/validation-12.csv` → model `bert` (the parent folder), validation, batch size 12.
pub fn parse_pollux_file_name(path: &Path) -> Option<PolluxFileName> {
    let stem = input::stem(path);
    let (model, last) = match stem.rsplit_once("__") {
        Some((prefix, last)) => (
            prefix.rsplit("__").next().unwrap_or(prefix).to_string(),
            last.to_string(),
        ),
        None => (
            path.parent()
                .and_then(|p| p.file_name())
                .map(|s| s.to_string_lossy().into_owned())?,
            stem.clone(),
        ),
    };
    if model.is_empty() {
        return None;
    }
    let split = |prefix: &str| -> Option<Option<String>> {
        let rest = last.strip_prefix(prefix)?;
        if rest.is_empty() {
            Some(None)
        } else {
            rest.strip_prefix('-')
                .filter(|s| !s.is_empty())
                .map(|s| Some(s.to_string()))
        }
    };
    if let Some(suffix) = split("validation") {
        return Some(PolluxFileName {
            model,
            kind: PolluxFileKind::Validation,
            gpu: None,
            global_batch_size: suffix.and_then(|s| s.parse().ok()),
        });
    }
    for (prefix, kind) in [
        ("placements", PolluxFileKind::Placements),
        ("scalability", PolluxFileKind::Scalability),
    ] {
        if let Some(gpu) = split(prefix) {
            return Some(PolluxFileName {
                model,
                kind,
                gpu,
                global_batch_size: None,
            });
        }
    }
    None
}

fn pollux_name(path: &Path, kind: PolluxFileKind) -> Result<PolluxFileName, DatasetError> {
    match parse_pollux_file_name(path) {
        Some(n) if n.kind == kind => Ok(n),
        _ => {
            let pattern = match kind {
                PolluxFileKind::Validation => "validation-<global batch size>",
                PolluxFileKind::Placements => "placements[-<gpu>]",
                PolluxFileKind::Scalability => "scalability[-<gpu>]",
            };
            Err(DatasetError::format(
                path,
                format!(
                    "cannot take the model from the file name; expected `<model>__{pattern}.csv` or `<model>/{pattern}.csv`"
                ),
            ))
        }
    }
}

/// One epoch's validation of a Pollux/Sia profiling run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PolluxValidationPoint {
    /// Training progress (samples scaled to the reference batch size, as Pollux logs it).
    pub progress: f64,
    /// Iteration count.
    pub iteration: f64,
    /// Validation metric (accuracy for cifar10/imagenet; the task's metric otherwise).
    pub metric: f64,
    /// Gradient square norm (gradient-noise statistic).
    pub grad_sqr: Option<f64>,
    /// Gradient variance (gradient-noise statistic).
    pub grad_var: Option<f64>,
}

/// A Pollux/Sia validation curve: one model trained at one global batch size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolluxValidation {
    /// Model.
    pub model: String,
    /// Global batch size (from the file name).
    pub global_batch_size: u32,
    /// Points in file order.
    pub points: Vec<PolluxValidationPoint>,
}

/// Reads a `validation-<bsz>.csv` profile.
pub fn read_pollux_validation(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(PolluxValidation, ReadReport), DatasetError> {
    let name = pollux_name(path, PolluxFileKind::Validation)?;
    let Some(bsz) = name.global_batch_size else {
        return Err(DatasetError::format(
            path,
            "the file name carries no global batch size (expected `validation-<bsz>.csv`)",
        ));
    };
    let mut report = ReadReport::default();
    let mut points = Vec::new();
    read_csv_rows(
        path,
        None,
        &["progress", "iteration", "metric"],
        opts,
        &mut report,
        |row, cols| {
            Ok(PolluxValidationPoint {
                progress: row.req_num(cols.at("progress"), "progress")?,
                iteration: row.req_num(cols.at("iteration"), "iteration")?,
                metric: row.req_num(cols.at("metric"), "metric")?,
                grad_sqr: row.num(cols.optional("grad_sqr"), "grad_sqr")?,
                grad_var: row.num(cols.optional("grad_var"), "grad_var")?,
            })
        },
        |p| points.push(p),
    )?;
    Ok((
        PolluxValidation {
            model: name.model,
            global_batch_size: bsz,
            points,
        },
        report,
    ))
}

/// One measured configuration of a step-time table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    /// Placement string of a placements table: one digit per node, the GPUs used on it
    /// (`"1122"` = 4 nodes, 6 GPUs).
    pub placement: Option<String>,
    /// Nodes used (from the placement, or the `num_nodes` column).
    pub num_nodes: u32,
    /// GPUs (replicas) used (from the placement, or the `num_replicas` column).
    pub num_replicas: u32,
    /// Per-GPU batch size.
    pub local_bsz: u32,
    /// Seconds per iteration.
    pub step_time_s: f64,
    /// Seconds of gradient synchronisation per iteration.
    pub sync_time_s: f64,
}

/// A Pollux/Sia step-time table of one model on one GPU kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTimeTable {
    /// Model.
    pub model: String,
    /// GPU / cluster kind from the file name suffix; `None` for the original Pollux profile.
    pub gpu: Option<String>,
    /// Placements or scalability.
    pub kind: PolluxFileKind,
    /// Rows in file order.
    pub rows: Vec<StepTime>,
}

/// Reads a `placements[-<gpu>].csv` profile.
pub fn read_pollux_placements(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(StepTimeTable, ReadReport), DatasetError> {
    read_step_times(path, PolluxFileKind::Placements, opts)
}

/// Reads a `scalability[-<gpu>].csv` profile.
pub fn read_pollux_scalability(
    path: &Path,
    opts: &ReadOptions,
) -> Result<(StepTimeTable, ReadReport), DatasetError> {
    read_step_times(path, PolluxFileKind::Scalability, opts)
}

fn read_step_times(
    path: &Path,
    kind: PolluxFileKind,
    opts: &ReadOptions,
) -> Result<(StepTimeTable, ReadReport), DatasetError> {
    let name = pollux_name(path, kind)?;
    let mut report = ReadReport::default();
    let mut rows = Vec::new();
    let required: &[&str] = match kind {
        PolluxFileKind::Placements => &["placement", "local_bsz", "step_time", "sync_time"],
        _ => &[
            "num_nodes",
            "num_replicas",
            "local_bsz",
            "step_time",
            "sync_time",
        ],
    };
    read_csv_rows(
        path,
        None,
        required,
        opts,
        &mut report,
        |row, cols| {
            let (placement, num_nodes, num_replicas) = match kind {
                PolluxFileKind::Placements => {
                    let raw = row.raw(cols.at("placement"));
                    let digits: Option<Vec<u32>> = raw.chars().map(|c| c.to_digit(10)).collect();
                    match digits {
                        Some(d) if !d.is_empty() && d.iter().all(|&g| g > 0) => {
                            let nodes = fit_u32(row, d.len() as u64, "placement")?;
                            (Some(raw.to_string()), nodes, d.iter().sum())
                        }
                        _ => {
                            return Err(row.issue(
                                "placement",
                                "not a string of per-node GPU counts (digits 1-9)",
                                raw,
                            ))
                        }
                    }
                }
                _ => {
                    let nodes = req_count(row, cols.at("num_nodes"), "num_nodes")?;
                    let replicas = req_count(row, cols.at("num_replicas"), "num_replicas")?;
                    (
                        None,
                        fit_u32(row, nodes, "num_nodes")?,
                        fit_u32(row, replicas, "num_replicas")?,
                    )
                }
            };
            let local_bsz = req_count(row, cols.at("local_bsz"), "local_bsz")?;
            let step = row
                .non_negative(Some(cols.at("step_time")), "step_time")?
                .ok_or_else(|| row.issue("step_time", "missing", ""))?;
            let sync = row
                .non_negative(Some(cols.at("sync_time")), "sync_time")?
                .ok_or_else(|| row.issue("sync_time", "missing", ""))?;
            Ok(StepTime {
                placement,
                num_nodes,
                num_replicas,
                local_bsz: fit_u32(row, local_bsz, "local_bsz")?,
                step_time_s: step,
                sync_time_s: sync,
            })
        },
        |r| rows.push(r),
    )?;
    Ok((
        StepTimeTable {
            model: name.model,
            gpu: name.gpu,
            kind,
            rows,
        },
        report,
    ))
}

/// Every Pollux/Sia profile of a folder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolluxProfiles {
    /// Validation curves, by model then batch size.
    pub validations: Vec<PolluxValidation>,
    /// Placements tables, by model then GPU kind (original profile first).
    pub placements: Vec<StepTimeTable>,
    /// Scalability tables, by model then GPU kind (original profile first).
    pub scalability: Vec<StepTimeTable>,
}

/// Reads every `validation-*`, `placements*` and `scalability*` CSV of `dir` (not recursive);
/// other files (`SOURCE.txt`, ...) are skipped with a note.
pub fn read_pollux_dir(
    dir: &Path,
    opts: &ReadOptions,
) -> Result<(PolluxProfiles, ReadReport), DatasetError> {
    let entries = std::fs::read_dir(dir).map_err(|e| DatasetError::io(dir, e))?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| DatasetError::io(dir, e))?;
        let path = entry.path();
        if path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut profiles = PolluxProfiles::default();
    let mut total = ReadReport::default();
    let mut skipped = Vec::new();
    for path in &paths {
        let name = input::display_name(path);
        let is_csv = name.ends_with(".csv") || name.ends_with(".csv.gz");
        let parsed = if is_csv {
            parse_pollux_file_name(path)
        } else {
            None
        };
        let Some(parsed) = parsed else {
            skipped.push(name);
            continue;
        };
        match parsed.kind {
            PolluxFileKind::Validation => {
                let (v, r) = read_pollux_validation(path, opts)?;
                profiles.validations.push(v);
                total.merge(r, opts);
            }
            PolluxFileKind::Placements => {
                let (t, r) = read_pollux_placements(path, opts)?;
                profiles.placements.push(t);
                total.merge(r, opts);
            }
            PolluxFileKind::Scalability => {
                let (t, r) = read_pollux_scalability(path, opts)?;
                profiles.scalability.push(t);
                total.merge(r, opts);
            }
        }
    }
    profiles
        .validations
        .sort_by(|a, b| (&a.model, a.global_batch_size).cmp(&(&b.model, b.global_batch_size)));
    for tables in [&mut profiles.placements, &mut profiles.scalability] {
        tables.sort_by(|a, b| (&a.model, &a.gpu).cmp(&(&b.model, &b.gpu)));
    }
    if !skipped.is_empty() {
        total.note(format!(
            "pollux: skipped {} file(s) that are not profiles: {}",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    Ok((profiles, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pollux_names() {
        let n = parse_pollux_file_name(Path::new(
            "x/sia-simulator__traces__cifar10__placements-dgx-ext.csv",
        ))
        .unwrap();
        assert_eq!(n.model, "cifar10");
        assert_eq!(n.kind, PolluxFileKind::Placements);
        assert_eq!(n.gpu.as_deref(), Some("dgx-ext"));
        let n = parse_pollux_file_name(Path::new("traces/gpt_pmp/validation-384.csv.gz")).unwrap();
        assert_eq!(n.model, "gpt_pmp");
        assert_eq!(n.global_batch_size, Some(384));
        let n = parse_pollux_file_name(Path::new("bert/scalability.csv")).unwrap();
        assert_eq!((n.kind, n.gpu), (PolluxFileKind::Scalability, None));
        assert_eq!(parse_pollux_file_name(Path::new("d/SOURCE.txt")), None);
        assert_eq!(parse_pollux_file_name(Path::new("d/placementsx.csv")), None);
    }

    #[test]
    fn run_status_spellings() {
        assert_eq!(RunStatus::parse("abort"), Some(RunStatus::Aborted));
        assert_eq!(RunStatus::parse("Success"), Some(RunStatus::Success));
        assert_eq!(RunStatus::parse("maybe"), None);
    }
}
