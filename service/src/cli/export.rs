//! `augur data export`: the canonical job table of a trace (as `evaluate` and `train` read
//! it) written as CSV in submit order, each job marked with its side of the time-ordered
//! 80/20 split, so tools outside Augur (the LightGBM peer in `scripts/`) score on exactly
//! the same jobs, times and split without parsing the trace themselves.

use std::io::Write;

use anyhow::Context;
use augur_datasets::{JobRecord, TimeSplit};

use crate::cli::trace::load_one_trace;
use crate::cli::ExportArgs;

/// The CSV's columns: the position in submit order, the split side, then the canonical job
/// table's columns ([`augur_datasets::schema::COLUMNS`]).
pub fn columns() -> Vec<&'static str> {
    ["order", "split"]
        .into_iter()
        .chain(augur_datasets::schema::COLUMNS)
        .collect()
}

/// `augur data export`.
pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let jobs = load_one_trace(&args.trace)?;
    let out: Box<dyn Write> = if args.csv.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(&args.csv)
                .with_context(|| format!("creating {}", args.csv.display()))?,
        )
    };
    let n = write_csv(&jobs, std::io::BufWriter::new(out))
        .with_context(|| format!("writing {}", args.csv.display()))?;
    eprintln!("exported {n} jobs to {}", args.csv.display());
    Ok(())
}

/// Writes `jobs` in submit order (the order of [`TimeSplit`], ties in input order) with
/// their split side; returns how many were written.
pub fn write_csv<W: Write>(jobs: &[JobRecord], out: W) -> anyhow::Result<usize> {
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let n_train = split.train().len();
    let mut w = csv::Writer::from_writer(out);
    w.write_record(columns())?;
    let num = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    for (pos, &i) in split.order().iter().enumerate() {
        let j = &jobs[i];
        w.write_record([
            pos.to_string(),
            (if pos < n_train { "train" } else { "test" }).to_string(),
            j.job_id.clone(),
            j.submit_time.to_string(),
            num(j.start_time),
            num(j.queue_wait),
            num(j.end_time),
            num(j.duration),
            num(j.num_gpus),
            num(j.num_nodes),
            text(&j.gpu_type),
            num(j.cpus),
            num(j.memory_mib),
            num(j.requested_time),
            text(&j.user),
            text(&j.group),
            text(&j.job_name),
            text(&j.cluster),
            text(&j.queue),
            text(&j.qos),
            num(j.priority),
            j.status.as_str().to_string(),
            j.source.clone(),
        ])?;
    }
    w.flush()?;
    Ok(jobs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_written_in_submit_order_with_their_split_side() {
        let job = |id: &str, submit: f64| JobRecord {
            job_id: id.into(),
            submit_time: submit,
            duration: Some(submit * 2.0),
            user: Some("u, \"q\"".into()),
            source: "t".into(),
            ..Default::default()
        };
        let jobs: Vec<JobRecord> = (0..10)
            .map(|k| job(&format!("j{k}"), f64::from(9 - k)))
            .collect();
        let mut buf = Vec::new();
        assert_eq!(write_csv(&jobs, &mut buf).unwrap(), 10);
        let mut r = csv::Reader::from_reader(buf.as_slice());
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), columns());
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 10);
        // the latest submit (j0 at 9 s) comes last; 8 train, 2 test
        assert_eq!(&rows[0][2], "j9");
        assert_eq!(&rows[9][2], "j0");
        assert_eq!(&rows[9][7], "18");
        assert_eq!(rows.iter().filter(|r| &r[1] == "train").count(), 8);
        assert_eq!((&rows[7][1], &rows[8][1]), ("train", "test"));
        // quoting survives a comma and quotes; an absent field is empty
        assert_eq!(&rows[0][14], "u, \"q\"");
        assert_eq!(&rows[0][4], "");
    }
}
