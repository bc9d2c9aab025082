//! Philly jobs as the Sia simulator ships them: `timestamp,duration,num_gpus,gpu_time,cluster`.
//!
//! `timestamp` is the submit time (`YYYY-MM-DD HH:MM:SS`, read as UTC), `duration` the run
//! time in seconds, `cluster` the virtual cluster (VC) hash, kept as `group`. The file has no
//! job id (ids are `philly-<line>`), no start time, no user and no final status.

use std::path::Path;

use chrono::NaiveDateTime;

use super::fields::read_csv_rows;
use crate::error::DatasetError;
use crate::report::{ReadOptions, ReadReport};
use crate::schema::{JobRecord, JobStatus, TimeOrigin};

/// Parses `YYYY-MM-DD HH:MM:SS` (or with a `T`, or fractional seconds) as UTC seconds since
/// the epoch.
pub(crate) fn parse_timestamp(raw: &str) -> Option<f64> {
    let raw = raw.trim();
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
        .map(|t| t.and_utc().timestamp_millis() as f64 / 1000.0)
}

/// Reads a Philly CSV.
pub fn read(
    path: &Path,
    opts: &ReadOptions,
    sink: &mut dyn FnMut(JobRecord),
) -> Result<ReadReport, DatasetError> {
    let mut report = ReadReport {
        time_origin: TimeOrigin::Unix,
        ..Default::default()
    };
    report.note("philly: timestamp read as submit time in UTC; `cluster` is the VC, kept as `group`; no start time, user or status in this form");
    read_csv_rows(
        path,
        None,
        &["timestamp", "duration", "num_gpus"],
        opts,
        &mut report,
        |row, cols| {
            let c_ts = cols.at("timestamp");
            let raw_ts = row.raw(c_ts);
            let submit = parse_timestamp(raw_ts)
                .ok_or_else(|| row.issue("timestamp", "not a YYYY-MM-DD HH:MM:SS time", raw_ts))?;
            let c_dur = cols.at("duration");
            let duration = row.req_num(c_dur, "duration")?;
            if duration < 0.0 {
                return Err(row.issue("duration", "negative", row.raw(c_dur)));
            }
            Ok(JobRecord {
                job_id: format!("philly-{}", row.line),
                submit_time: submit,
                duration: Some(duration),
                num_gpus: row.non_negative(Some(cols.at("num_gpus")), "num_gpus")?,
                group: row.text(cols.optional("cluster")),
                status: JobStatus::Unknown,
                source: "philly".into(),
                ..Default::default()
            })
        },
        sink,
    )?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_seconds() {
        assert_eq!(parse_timestamp("1970-01-01 00:01:00"), Some(60.0));
        assert_eq!(
            parse_timestamp("2017-10-09 07:01:55"),
            Some(1_507_532_515.0)
        );
        assert_eq!(
            parse_timestamp("2017-10-09T07:01:55.5"),
            Some(1_507_532_515.5)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
