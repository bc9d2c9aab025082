//! Job-trace readers: each parses one file format into [`JobRecord`]s, streaming.

use std::path::Path;

use crate::error::DatasetError;
use crate::format::{detect_format, TraceFormat};
use crate::report::{ReadOptions, ReadReport};
use crate::schema::{JobRecord, JobTable, JobTableBuilder};

mod fields;
pub mod helios;
pub mod itp;
pub mod mlperf;
pub mod openb;
pub mod pai;
pub mod philly;
pub mod philly_joblog;
pub mod sacct;
mod slurm;
pub mod swf;

pub(crate) use fields::{read_csv_rows, Row};

/// Reads a job trace row by row, handing each kept job to `sink`. Memory use does not grow
/// with the file (beyond the first [`ReadOptions::max_detailed_issues`] issue details).
///
/// `format` of `None` detects it ([`detect_format`]). Errors on files that are not job traces.
pub fn read_jobs(
    path: &Path,
    format: Option<TraceFormat>,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let format = match format {
        Some(f) => f,
        None => detect_format(path)?,
    };
    let mut report = match format {
        TraceFormat::Philly => philly::read(path, opts, sink)?,
        TraceFormat::PhillyJobLog => philly_joblog::read(path, opts, sink)?,
        TraceFormat::Itp => itp::read(path, opts, sink)?,
        TraceFormat::OpenbPods => openb::read_pods(path, opts, sink)?,
        TraceFormat::Swf => swf::read(path, swf::SwfVariant::Standard, opts, sink)?,
        TraceFormat::SwfAlcf => swf::read(path, swf::SwfVariant::Alcf, opts, sink)?,
        TraceFormat::Helios => helios::read(path, opts, sink)?,
        TraceFormat::PaiJobs => pai::read(path, opts, sink)?,
        TraceFormat::MlperfRuns => mlperf::read_runs_as_jobs(path, opts, sink)?,
        TraceFormat::Sacct => sacct::read(path, opts, sink)?,
        other => {
            return Err(DatasetError::format(
                path,
                format!("`{other}` files hold no jobs; `augur data inspect` reads them"),
            ))
        }
    };
    if report.files.is_empty() {
        report.files.push(path.display().to_string());
    }
    Ok(report)
}

/// Reads a job trace into a [`JobTable`] (rows in file order).
pub fn load_jobs(
    path: &Path,
    format: Option<TraceFormat>,
    opts: &ReadOptions,
) -> Result<(JobTable, ReadReport), DatasetError> {
    let mut builder = JobTableBuilder::default();
    let report = read_jobs(path, format, opts, &mut |r| builder.push(r))?;
    let table = builder.build(report.time_origin)?;
    Ok((table, report))
}

/// Reads several files of one dataset into one [`JobTable`] (e.g. the seven ITP clusters).
pub fn load_jobs_many(
    paths: &[&Path],
    format: Option<TraceFormat>,
    opts: &ReadOptions,
) -> Result<(JobTable, ReadReport), DatasetError> {
    let mut builder = JobTableBuilder::default();
    let mut total = ReadReport::default();
    for (i, path) in paths.iter().enumerate() {
        let report = read_jobs(path, format, opts, &mut |r| builder.push(r))?;
        if i == 0 {
            total.time_origin = report.time_origin;
        }
        total.merge(report, opts);
    }
    let table = builder.build(total.time_origin)?;
    Ok((table, total))
}
