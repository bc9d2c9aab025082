//! Property tests (proptest) of the `sacct --parsable2` reader.
//!
//! - **generated files**: the recommended fields in a random column order, jobs of every kind
//!   (plain, with steps, array tasks, pending array ranges, heterogeneous pairs, running and
//!   pending) with time limits in every Slurm form, LF or CRLF line ends and blank lines; some
//!   job rows mutated (a field replaced by garbage, a `|` or invalid UTF-8 put in, the row cut).
//!   Every unmutated job must be kept with its id, submit time, time limit and GPUs; only
//!   mutated rows may be dropped, each once at its own line; strict mode stops at the first.
//! - **arbitrary bytes**: random bytes, after a valid header or not, and valid files with random
//!   byte edits. The reader must not panic, and an `Ok` report must add up (rows read = kept +
//!   dropped, one detailed issue per drop, each at a line of the file); what it keeps must
//!   summarise and load into a table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use augur_datasets::summary::JobSummarizer;
use augur_datasets::{load_jobs, read_jobs, DatasetError, JobRecord, ReadOptions, TraceFormat};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    }
}

const FIELDS: [&str; 20] = [
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Account",
    "Partition",
    "QOS",
    "Priority",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "State",
    "NNodes",
    "NCPUS",
    "ReqTRES",
    "AllocTRES",
    "Cluster",
];

/// Raw randomness for one job.
type Seed = (u32, u32, u32, u32);

/// What the reader must make of one generated job (when none of its rows is mutated).
struct Expect {
    /// Job ids it becomes.
    ids: Vec<String>,
    submit: f64,
    limit: Option<f64>,
    gpus: f64,
}

/// One line of a generated file.
struct Line {
    /// Field values by name (a job step has the same fields as its job).
    fields: BTreeMap<&'static str, String>,
    /// Index of the job it belongs to.
    job: usize,
    is_step: bool,
}

fn local(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .expect("in range")
        .naive_utc()
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string()
}

/// A time limit in one of Slurm's forms, and its seconds.
fn time_limit(b: u32) -> (String, Option<f64>) {
    let (d, h, m, s) = (
        u64::from(b % 3),
        u64::from(b / 3 % 24),
        u64::from(b / 7 % 60),
        0,
    );
    let secs = |d: u64, h: u64, m: u64, s: u64| Some((d * 86_400 + h * 3600 + m * 60 + s) as f64);
    match b % 8 {
        0 => ("UNLIMITED".into(), None),
        1 => ("Partition_Limit".into(), None),
        2 => (format!("{d}-{h:02}:{m:02}:{s:02}"), secs(d, h, m, s)),
        3 => (format!("{h:02}:{m:02}:{s:02}"), secs(0, h, m, s)),
        4 => (format!("{}", m + 1), secs(0, 0, m + 1, 0)),
        5 => (
            format!("{m:02}:{:02}", b % 60),
            secs(0, 0, m, u64::from(b % 60)),
        ),
        6 => (format!("{d}-{h}"), secs(d, h, 0, 0)),
        _ => (format!("{d}-{h:02}:{m:02}"), secs(d, h, m, 0)),
    }
}

/// The lines of job `j` and what it must become.
fn job_lines(j: usize, (a, b, c, d): Seed) -> (Vec<Line>, Expect) {
    let id = (1000 + j).to_string();
    let submit = 1_767_225_600 + i64::from(a % 30_000_000);
    let wait = i64::from(b % 7200);
    let run = i64::from(c % 100_000);
    let gpus = u64::from(d % 5);
    let (limit_text, limit) = time_limit(b);
    let state = [
        "COMPLETED",
        "FAILED",
        "CANCELLED by 1000",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
    ][(c % 6) as usize];
    let tres = if gpus > 0 {
        format!("billing=4,cpu=4,gres/gpu:a100={gpus},gres/gpu={gpus},mem=16G,node=1")
    } else {
        "billing=4,cpu=4,mem=16G,node=1".to_string()
    };
    let base = |jid: String, running: bool, pending: bool| -> BTreeMap<&'static str, String> {
        let (start, end, elapsed, state) = if pending {
            (
                "Unknown".into(),
                "Unknown".into(),
                "00:00:00".into(),
                "PENDING",
            )
        } else if running {
            (
                local(submit + wait),
                "Unknown".into(),
                "01:00:00".into(),
                "RUNNING",
            )
        } else {
            let e = format!(
                "{}-{:02}:{:02}:{:02}",
                run / 86_400,
                run / 3600 % 24,
                run / 60 % 60,
                run % 60
            );
            (local(submit + wait), local(submit + wait + run), e, state)
        };
        let values = [
            jid.clone(),
            jid,
            format!("name{}", a % 17),
            format!("u{}", a % 9),
            format!("acct{}", b % 4),
            ["gpu", "cpu"][(d % 2) as usize].into(),
            "normal".into(),
            (a % 100_000).to_string(),
            local(submit),
            local(submit),
            start,
            end,
            elapsed,
            limit_text.clone(),
            state.into(),
            "1".into(),
            "4".into(),
            tres.clone(),
            if pending { String::new() } else { tres.clone() },
            "c1".into(),
        ];
        FIELDS.into_iter().zip(values).collect()
    };
    let line = |fields, is_step| Line {
        fields,
        job: j,
        is_step,
    };
    let mut expect = Expect {
        ids: vec![id.clone()],
        submit: submit as f64,
        limit,
        gpus: gpus as f64,
    };
    let lines = match d % 6 {
        0 => vec![line(base(id.clone(), false, false), false)],
        1 => {
            let mut step = base(format!("{id}.batch"), false, false);
            step.insert("JobName", "batch".into());
            vec![
                line(base(id.clone(), false, false), false),
                line(step, true),
            ]
        }
        2 => {
            expect.ids = vec![format!("{id}_7")];
            vec![line(base(format!("{id}_7"), false, false), false)]
        }
        3 => {
            expect.ids = vec![format!("{id}_1"), format!("{id}_2"), format!("{id}_5")];
            vec![line(base(format!("{id}_[1-2,5%4]"), false, true), false)]
        }
        4 => {
            // Both components ask for the same: GPUs add up, the time limit stays.
            expect.gpus = 2.0 * gpus as f64;
            vec![
                line(base(format!("{id}+0"), false, false), false),
                line(base(format!("{id}+0.0"), false, false), true),
                line(base(format!("{id}+1"), false, false), false),
            ]
        }
        _ => vec![line(base(id.clone(), b % 2 == 0, b % 2 == 1), false)],
    };
    (lines, expect)
}

/// Garbage that replaces a field; `|` shifts the fields after it.
const GARBAGE: [&str; 14] = [
    "",
    "x",
    "-1",
    "NaN",
    "1e400",
    "2026-13-01T00:00:00",
    "9999-99-99T99:99:99",
    "|",
    "a|b",
    "99:99",
    "gres/gpu=",
    "=",
    "1-",
    "12_[5-1]",
];

#[derive(Debug, Clone)]
struct Case {
    seeds: Vec<Seed>,
    /// A permutation of the columns.
    order: Vec<usize>,
    /// Per job: which mutation its first row gets, if any.
    mutations: Vec<Option<(u8, usize, usize)>>,
    crlf: bool,
    blank_every: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..25).prop_flat_map(|n| {
        (
            prop::collection::vec(any::<Seed>(), n),
            Just((0..FIELDS.len()).collect::<Vec<_>>()).prop_shuffle(),
            prop::collection::vec(
                prop::option::weighted(0.25, (0u8..4, 0..FIELDS.len(), 0..GARBAGE.len())),
                n,
            ),
            any::<bool>(),
            0usize..5,
        )
            .prop_map(|(seeds, order, mutations, crlf, blank_every)| Case {
                seeds,
                order,
                mutations,
                crlf,
                blank_every,
            })
    })
}

struct Built {
    bytes: Vec<u8>,
    expects: Vec<Expect>,
    /// File line of each mutated job row.
    mutated_lines: BTreeSet<u64>,
    mutated_jobs: BTreeSet<usize>,
}

fn build(case: &Case) -> Built {
    let eol: &[u8] = if case.crlf { b"\r\n" } else { b"\n" };
    let mut bytes: Vec<u8> = Vec::new();
    let header: Vec<&str> = case.order.iter().map(|&i| FIELDS[i]).collect();
    bytes.extend(header.join("|").as_bytes());
    bytes.extend(eol);
    let mut line_no = 1u64;
    let (mut expects, mut mutated_lines, mut mutated_jobs) =
        (Vec::new(), BTreeSet::new(), BTreeSet::new());
    for (j, &seed) in case.seeds.iter().enumerate() {
        let (lines, expect) = job_lines(j, seed);
        expects.push(expect);
        for (k, line) in lines.iter().enumerate() {
            if case.blank_every > 0 && line_no.is_multiple_of(case.blank_every as u64) {
                bytes.extend(eol);
                line_no += 1;
            }
            line_no += 1;
            let mut fields: Vec<String> = header.iter().map(|h| line.fields[h].clone()).collect();
            let mutation = case.mutations[j].filter(|_| k == 0 && !line.is_step);
            let mut raw = match mutation {
                None => fields.join("|").into_bytes(),
                Some((kind, field, garbage)) => {
                    mutated_lines.insert(line_no);
                    mutated_jobs.insert(line.job);
                    match kind {
                        0 | 1 => {
                            fields[field] = GARBAGE[garbage].to_string();
                            fields.join("|").into_bytes()
                        }
                        2 => {
                            let mut r = fields.join("|").into_bytes();
                            r.insert(r.len() / 2, 0xff);
                            r
                        }
                        _ => fields[..field.min(fields.len() - 1)].join("|").into_bytes(),
                    }
                }
            };
            raw.extend(eol);
            bytes.extend(raw);
        }
    }
    Built {
        bytes,
        expects,
        mutated_lines,
        mutated_jobs,
    }
}

fn read(
    path: &Path,
    opts: &ReadOptions,
) -> (
    Result<augur_datasets::ReadReport, DatasetError>,
    Vec<JobRecord>,
) {
    let mut records = Vec::new();
    let result = read_jobs(path, Some(TraceFormat::Sacct), opts, &mut |r| {
        records.push(r)
    });
    (result, records)
}

/// The report adds up, every issue is at a line of the file, and what was kept summarises
/// and loads.
fn check_consistent(
    path: &Path,
    bytes: &[u8],
    report: &augur_datasets::ReadReport,
    records: &[JobRecord],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(report.rows_read, report.rows_kept + report.rows_dropped());
    prop_assert_eq!(report.issues.len() as u64, report.rows_dropped().min(200));
    let lines = bytes.split(|&b| b == b'\n').count() as u64;
    for issue in &report.issues {
        prop_assert!(
            issue.line >= 2 && issue.line <= lines,
            "{} of {}",
            issue,
            lines
        );
        prop_assert!(!issue.field.is_empty() && !issue.reason.is_empty());
    }
    let mut summary = JobSummarizer::default();
    for r in records {
        prop_assert!(r.submit_time.is_finite(), "{:?}", r);
        summary.observe(r);
    }
    prop_assert_eq!(summary.finish().jobs, records.len() as u64);
    let (table, _) = load_jobs(path, Some(TraceFormat::Sacct), &ReadOptions::default())
        .map_err(|e| TestCaseError::fail(format!("load_jobs: {e}")))?;
    prop_assert_eq!(table.len(), records.len());
    Ok(())
}

fn check_generated(case: &Case) -> Result<(), TestCaseError> {
    let built = build(case);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sacct.txt");
    std::fs::write(&path, &built.bytes).unwrap();
    let (result, records) = read(&path, &ReadOptions::default());
    let report = result.map_err(|e| TestCaseError::fail(format!("read failed: {e}")))?;
    check_consistent(&path, &built.bytes, &report, &records)?;
    let dropped: BTreeSet<u64> = report.issues.iter().map(|i| i.line).collect();
    prop_assert_eq!(dropped.len(), report.issues.len(), "one issue per row");
    for line in &dropped {
        prop_assert!(
            built.mutated_lines.contains(line),
            "line {} dropped but not mutated: {:?}",
            line,
            report.issues
        );
    }
    for (j, expect) in built.expects.iter().enumerate() {
        if built.mutated_jobs.contains(&j) {
            continue;
        }
        for id in &expect.ids {
            let found = records.iter().any(|r| {
                &r.job_id == id
                    && r.submit_time == expect.submit
                    && r.requested_time == expect.limit
                    && r.num_gpus == Some(expect.gpus)
            });
            prop_assert!(
                found,
                "job {} not kept as generated: {:?}",
                id,
                records
                    .iter()
                    .filter(|r| &r.job_id == id)
                    .collect::<Vec<_>>()
            );
        }
    }
    // Strict mode stops at the first dropped row.
    let strict = ReadOptions {
        strict: true,
        ..Default::default()
    };
    match (read(&path, &strict).0, dropped.first()) {
        (Ok(_), None) => {}
        (Err(DatasetError::StrictRow(issue)), Some(&first)) => prop_assert_eq!(issue.line, first),
        (other, first) => prop_assert!(
            false,
            "strict: {:?}, first dropped line {:?}",
            other.map(|r| r.rows_read),
            first
        ),
    }
    Ok(())
}

fn check_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sacct.txt");
    std::fs::write(&path, bytes).unwrap();
    let (result, records) = read(&path, &ReadOptions::default());
    if let Ok(report) = result {
        check_consistent(&path, bytes, &report, &records)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_files_keep_every_unmutated_job(case in case()) {
        check_generated(&case)?;
    }

    #[test]
    fn arbitrary_bytes_do_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        check_bytes(&bytes)?;
    }

    #[test]
    fn arbitrary_rows_after_a_valid_header_do_not_panic(
        rows in prop::collection::vec("[0-9_+.\\[\\]%,:|A-Za-z=/ -]{0,120}", 0..30),
    ) {
        let mut text = FIELDS.join("|");
        for r in rows {
            text.push('\n');
            text.push_str(&r);
        }
        check_bytes(text.as_bytes())?;
    }

    #[test]
    fn valid_files_with_byte_edits_do_not_panic(
        case in case(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..20),
    ) {
        let mut bytes = build(&case).bytes;
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        check_bytes(&bytes)?;
    }
}
