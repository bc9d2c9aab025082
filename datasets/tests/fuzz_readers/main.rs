//! Property tests (proptest) of the job-trace readers: SWF (standard and ALCF), Philly, ITP,
//! openb pods, Helios, PAI (job table and task table) and MLPerf runs.
//!
//! Two kinds of input:
//! - **mutated files**: valid rows like the bundled traces, some of them mutated (a field
//!   deleted or duplicated, a value replaced by garbage, a huge, negative, NaN or empty number,
//!   a 1k–200k character value, an invalid UTF-8 byte, the file cut inside its last row), with
//!   CRLF or LF line ends, blank lines and (SWF) comments between rows. The reader must keep
//!   every unmutated row with its values, read every row, and report each dropped row once,
//!   at its own line; strict mode must stop at the first dropped row having kept exactly the
//!   rows before it.
//! - **arbitrary bytes**: random bytes, valid files with random byte edits, and gzip streams
//!   (valid, truncated or corrupted). The reader must not panic or hang, and an `Ok` report must
//!   add up (rows read = kept + dropped, one detailed issue per drop up to the cap, each naming
//!   the file and a line that exists).
//!
//! Kept rows also go through `JobSummarizer` (what `augur data inspect` does) and `load_jobs`
//! (the `JobTable`), which must not fail on anything a reader keeps.
//!
//! Garbage in the mutated files has no `"`, `;` or line breaks: a field opening with `"` makes
//! the following lines one quoted CSV field (RFC 4180), and a line opening with `;` is an SWF
//! comment, so those would change which lines are rows. The arbitrary-bytes properties cover them.

mod bytes;
mod mutate;
mod rows;
mod run;

use augur_datasets::{read_jobs, JobRecord, ReadOptions, ReadReport, TraceFormat};
use proptest::prelude::*;
use proptest::test_runner::Config;

use bytes::{bytes_input, check_bytes};
use mutate::{build, file_case, FileCase};
use rows::{datetime, Reader};
use run::{check_mutated, read, write_files};

/// 256 cases per property.
fn config() -> Config {
    Config {
        cases: 256,
        // Failures are turned into named regression tests below, not persisted files.
        failure_persistence: None,
        ..Config::default()
    }
}

// ------------------------------------------------------------------ the properties

const READERS: [Reader; 9] = [
    Reader::Swf,
    Reader::SwfAlcf,
    Reader::Philly,
    Reader::Itp,
    Reader::Openb,
    Reader::Helios,
    Reader::PaiJobs,
    Reader::PaiTasks,
    Reader::Mlperf,
];

macro_rules! reader_properties {
    ($($mutated:ident, $bytes:ident => $reader:expr;)*) => {
        proptest! {
            #![proptest_config(config())]
            $(
                #[test]
                fn $mutated(case in file_case()) {
                    check_mutated($reader, &case)?;
                }

                #[test]
                fn $bytes(input in bytes_input(), max_detailed in 0usize..6) {
                    check_bytes($reader, &input, max_detailed)?;
                }
            )*
        }
    };
}

reader_properties! {
    swf_mutated_rows, swf_arbitrary_bytes => Reader::Swf;
    swf_alcf_mutated_rows, swf_alcf_arbitrary_bytes => Reader::SwfAlcf;
    philly_mutated_rows, philly_arbitrary_bytes => Reader::Philly;
    itp_mutated_rows, itp_arbitrary_bytes => Reader::Itp;
    openb_mutated_rows, openb_arbitrary_bytes => Reader::Openb;
    helios_mutated_rows, helios_arbitrary_bytes => Reader::Helios;
    pai_job_table_mutated_rows, pai_job_table_arbitrary_bytes => Reader::PaiJobs;
    pai_task_table_mutated_rows, pai_task_table_arbitrary_bytes => Reader::PaiTasks;
    mlperf_mutated_rows, mlperf_arbitrary_bytes => Reader::Mlperf;
}

// ------------------------------------------------------------------ the generator itself

/// The generated files are what the properties claim: every reader keeps every row of an
/// unmutated file (so the "unmutated rows are kept" checks are not vacuous).
#[test]
fn unmutated_files_are_read_whole() {
    let case = FileCase {
        seeds: (0..25u32)
            .map(|i| (i * 7919, i * 104_729, i * 1_299_709, i))
            .collect(),
        mutations: Vec::new(),
        crlf: true,
        trailing_newline: true,
        noise: vec![(12, true), (22, false)],
        truncate: None,
        unix_start: true,
        latin1_comment: false,
    };
    for reader in READERS {
        let built = build(reader, &case);
        let files = write_files(reader, &built.bytes, &case.seeds);
        let out = read(&files.path, reader, &ReadOptions::default());
        let report = out.result.unwrap_or_else(|e| panic!("{reader:?}: {e}"));
        assert_eq!(report.rows_dropped(), 0, "{reader:?}: {:?}", report.issues);
        assert_eq!(out.records.len(), 25, "{reader:?}");
        check_mutated(reader, &case).unwrap_or_else(|e| panic!("{reader:?}: {e}"));
    }
    assert_eq!(datetime(1_506_816_000), "2017-10-01 00:00:00");
    assert_eq!(datetime(951_782_400), "2000-02-29 00:00:00");
}

// ------------------------------------------------------------------ regressions

/// Writes `text` as `name` in a fresh folder and reads it.
fn read_text(name: &str, bytes: &[u8], format: TraceFormat) -> (Vec<JobRecord>, ReadReport) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut rows = Vec::new();
    let report = read_jobs(&path, Some(format), &ReadOptions::default(), &mut |r| {
        rows.push(r)
    })
    .unwrap();
    (rows, report)
}

/// Found by `swf_mutated_rows`: a Latin-1 byte in a header comment ended the read at that
/// line, so no job of the file was kept; an invalid byte in one row lost every later row.
#[test]
fn swf_invalid_utf8_costs_one_row_not_the_file() {
    let row = |id: u32| format!("{id} 10 1 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1");
    let mut bytes = b"; Installation: Universit\xe9 de Montr\xe9al\n".to_vec();
    bytes.extend_from_slice(format!("{}\n", row(1)).as_bytes());
    bytes.extend_from_slice(b"2 10 1 100 4 -1 -1 4 200 -1 1 \xff 1 1 1 -1 -1 -1\n");
    bytes.extend_from_slice(format!("{}\n", row(3)).as_bytes());
    let (rows, report) = read_text("latin1.swf", &bytes, TraceFormat::Swf);
    let ids: Vec<&str> = rows.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids, ["1", "3"]);
    assert_eq!((report.rows_read, report.rows_kept), (3, 2));
    assert_eq!(report.issues.len(), 1);
    assert_eq!(report.issues[0].line, 3);
    assert_eq!(report.issues[0].field, "row");
    assert_eq!(report.issues[0].reason, "not valid UTF-8");
}

/// Found by `philly_mutated_rows` and `helios_mutated_rows`: the csv crate numbers rows wrongly
/// after CRLF line ends and blank lines (known rust-csv bugs), so issues named the
/// wrong line and Philly ids (`philly-<line>`) were off. Rows are now numbered from the bytes.
#[test]
fn csv_rows_are_numbered_by_their_real_line() {
    let text = b"timestamp,duration,num_gpus,gpu_time,cluster\r\n\
                2017-10-01 00:00:00,60,1,60,vc1\r\n\
                \r\n\
                2017-10-01 00:00:01,oops,1,60,vc1\r\n\
                \n\
                2017-10-01 00:00:02,60,1,60,\"vc\r\nwith a break\"\r\n\
                2017-10-01 00:00:03,60,1,60,vc3\rnot-a-time,1,1,1,vc4\r\n\
                2017-10-01 00:00:04,60,\xff,60,vc5\n";
    let (rows, report) = read_text("philly.csv", text, TraceFormat::Philly);
    let ids: Vec<&str> = rows.iter().map(|r| r.job_id.as_str()).collect();
    assert_eq!(ids, ["philly-2", "philly-6", "philly-8"]);
    assert_eq!(rows[1].group.as_deref(), Some("vc\r\nwith a break"));
    let issues: Vec<(u64, &str)> = report
        .issues
        .iter()
        .map(|i| (i.line, i.field.as_str()))
        .collect();
    assert_eq!(issues, [(4, "duration"), (9, "timestamp"), (10, "row")]);
    assert_eq!(report.issues[2].reason, "not valid UTF-8");
    assert_eq!((report.rows_read, report.rows_kept), (6, 3));
}
