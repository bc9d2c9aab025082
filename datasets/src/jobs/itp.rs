//! Microsoft ITP cluster traces (ElasticFlow): `job_id,submission_time,duration,num_gpu`,
//! one file per cluster. Submission times are seconds relative to the trace start; the
//! cluster name comes from the file name (`cluster01.csv` → `cluster01`). Only jobs of at
//! least 600 s are in these files (a property of the published trace).

use std::path::Path;

use super::fields::read_csv_rows;
use crate::error::DatasetError;
use crate::input;
use crate::report::{ReadOptions, ReadReport};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Reads one ITP cluster CSV.
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let cluster = input::stem(path);
    let mut report = ReadReport {
        time_origin: TimeOrigin::Relative,
        ..Default::default()
    };
    report.note(
        "itp: submission_time is relative to the trace start; cluster taken from the file name",
    );
    read_csv_rows(
        path,
        None,
        &["job_id", "submission_time", "duration", "num_gpu"],
        opts,
        &mut report,
        |row, cols| {
            let c_id = cols.at("job_id");
            let id = row.raw(c_id);
            if id.is_empty() {
                return Err(row.issue("job_id", "missing", id));
            }
            let submit = row.req_num(cols.at("submission_time"), "submission_time")?;
            let duration = row
                .non_negative(Some(cols.at("duration")), "duration")?
                .ok_or_else(|| row.issue("duration", "missing", ""))?;
            Ok(JobRecord {
                job_id: id.to_string(),
                submit_time: submit,
                duration: Some(duration),
                num_gpus: row.non_negative(Some(cols.at("num_gpu")), "num_gpu")?,
                cluster: Some(cluster.clone()),
                status: JobStatus::Unknown,
                source: "itp".into(),
                ..Default::default()
            })
        },
        sink,
    )?;
    Ok(report)
}
