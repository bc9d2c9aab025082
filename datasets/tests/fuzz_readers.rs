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

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use augur_datasets::summary::JobSummarizer;
use augur_datasets::{
    load_jobs, read_jobs, DatasetError, JobRecord, ReadOptions, ReadReport, TraceFormat,
};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// 256 cases per property: the whole file runs in a few seconds in the dev profile.
fn config() -> Config {
    Config {
        cases: 256,
        // Failures are turned into named regression tests below, not persisted files.
        failure_persistence: None,
        ..Config::default()
    }
}

// ------------------------------------------------------------------ valid rows per reader

/// Raw randomness for one row; each reader maps it to plausible values.
type Seed = (u32, u32, u32, u32);

/// One valid row and what the reader must make of it.
struct ValidRow {
    /// Fields, already encoded (a quoted CSV field keeps its quotes).
    fields: Vec<String>,
    /// The job id the reader gives it; `None` when it comes from the line (Philly).
    id: Option<String>,
    submit: f64,
    duration: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Reader {
    Swf,
    SwfAlcf,
    Philly,
    Itp,
    Openb,
    Helios,
    PaiJobs,
    PaiTasks,
    Mlperf,
}

impl Reader {
    fn format(self) -> TraceFormat {
        match self {
            Reader::Swf => TraceFormat::Swf,
            Reader::SwfAlcf => TraceFormat::SwfAlcf,
            Reader::Philly => TraceFormat::Philly,
            Reader::Itp => TraceFormat::Itp,
            Reader::Openb => TraceFormat::OpenbPods,
            Reader::Helios => TraceFormat::Helios,
            Reader::PaiJobs | Reader::PaiTasks => TraceFormat::PaiJobs,
            Reader::Mlperf => TraceFormat::MlperfRuns,
        }
    }

    /// The fuzzed file, relative to the case's folder.
    fn file(self) -> &'static str {
        match self {
            Reader::Swf => "trace.swf",
            Reader::SwfAlcf => "mira.swf",
            Reader::Philly => "philly.csv",
            Reader::Itp => "cluster03.csv",
            Reader::Openb => "openb_pod_list_default.csv",
            Reader::Helios => "Venus/cluster_log.csv",
            Reader::PaiJobs => "pai_job_table.csv",
            Reader::PaiTasks => "pai_task_table.csv",
            Reader::Mlperf => "runs.csv",
        }
    }

    fn is_swf(self) -> bool {
        matches!(self, Reader::Swf | Reader::SwfAlcf)
    }

    fn header(self) -> Option<&'static str> {
        match self {
            Reader::Swf | Reader::SwfAlcf | Reader::PaiJobs | Reader::PaiTasks => None,
            Reader::Philly => Some("timestamp,duration,num_gpus,gpu_time,cluster"),
            Reader::Itp => Some("job_id,submission_time,duration,num_gpu"),
            Reader::Openb => Some("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"),
            Reader::Helios => Some("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"),
            Reader::Mlperf => Some("run_id,submitter,system,benchmark,result_file,num_nodes,accelerators_per_node,accelerator_model,framework,global_batch_size,seed,run_start_ms,run_stop_ms,duration_s,run_status,n_eval_points,final_eval_accuracy"),
        }
    }

    /// The job id a row at `line` gets when the file has none.
    fn id_from_line(self, line: u64) -> String {
        format!("philly-{line}")
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of Unix seconds, without a date library (civil-from-days).
fn datetime(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The SWF header's `UnixStartTime`, when the generated file has one.
const UNIX_START: f64 = 1_500_000_000.0;

fn valid_row(reader: Reader, i: usize, (a, b, c, d): Seed, unix_start: bool) -> ValidRow {
    let submit = u64::from(a % 10_000_000);
    let wait = u64::from(b % 7200);
    let run = 1 + u64::from(c % 500_000);
    let gpus = 1u64 << (d % 6);
    let s = |v: u64| v.to_string();
    match reader {
        Reader::Swf | Reader::SwfAlcf => {
            let procs = 1u64 << (d % 10);
            let status = ["1", "0", "5", "1", "-1"][(d % 5) as usize];
            let req = run + u64::from(b % 3600);
            let (f6, f9) = if reader == Reader::SwfAlcf {
                (s(req), "-1".into())
            } else {
                ("-1".into(), s(req))
            };
            let fields = vec![
                s(i as u64 + 1),
                s(submit),
                s(wait),
                s(run),
                s(procs),
                f6,
                "-1".into(),
                s(procs),
                f9,
                "-1".into(),
                status.into(),
                s(u64::from(a % 97)),
                s(u64::from(b % 13)),
                s(u64::from(c % 41)),
                s(u64::from(d % 3)),
                "-1".into(),
                "-1".into(),
                "-1".into(),
            ];
            let offset = if unix_start && reader == Reader::Swf {
                UNIX_START
            } else {
                0.0
            };
            ValidRow {
                fields,
                id: Some(s(i as u64 + 1)),
                submit: submit as f64 + offset,
                duration: Some(run as f64),
            }
        }
        Reader::Philly => {
            let t = 1_506_816_000 + submit as i64;
            ValidRow {
                fields: vec![
                    datetime(t),
                    format!("{run}.0"),
                    s(gpus),
                    format!("{}.0", run * gpus),
                    format!("{:06x}", a % 0xff_ffff),
                ],
                id: None,
                submit: t as f64,
                duration: Some(run as f64),
            }
        }
        Reader::Itp => ValidRow {
            fields: vec![format!("itp-{i}-{a:08x}"), s(submit), s(run), s(gpus)],
            id: Some(format!("itp-{i}-{a:08x}")),
            submit: submit as f64,
            duration: Some(run as f64),
        },
        Reader::Openb => {
            let pending = d % 7 == 0;
            let (gpu_milli, phase) = match d % 4 {
                0 => (1000, "Succeeded"),
                1 => (460, "Running"),
                2 => (1000, "Failed"),
                _ => (250, "Running"),
            };
            let phase = if pending { "Pending" } else { phase };
            let scheduled = submit + wait;
            let deleted = scheduled + run;
            ValidRow {
                fields: vec![
                    format!("pod-{i}"),
                    s(1000 * u64::from(1 + b % 32)),
                    s(1024 * u64::from(1 + c % 64)),
                    s(u64::from(d % 3)),
                    s(gpu_milli),
                    ["", "V100M16|V100M32", "nan"][(a % 3) as usize].into(),
                    ["LS", "BE", "Burstable"][(c % 3) as usize].into(),
                    phase.into(),
                    s(submit),
                    s(deleted),
                    if pending { String::new() } else { s(scheduled) },
                ],
                id: Some(format!("pod-{i}")),
                submit: submit as f64,
                duration: (!pending).then_some(run as f64),
            }
        }
        Reader::Helios => {
            let t = 1_593_561_600 + submit as i64;
            let start = t + wait as i64;
            let end = start + run as i64;
            let state = [
                "COMPLETED",
                "FAILED",
                "CANCELLED by 1001",
                "TIMEOUT",
                "RUNNING",
            ][(d % 5) as usize];
            ValidRow {
                fields: vec![
                    s(10_000 + i as u64),
                    format!("u{}", a % 50),
                    format!("vc{}", b % 9),
                    s(gpus),
                    s(4 * gpus),
                    s(1 + gpus / 8),
                    state.into(),
                    datetime(t),
                    datetime(start),
                    datetime(end),
                    s(run),
                    s(wait),
                ],
                id: Some(s(10_000 + i as u64)),
                submit: t as f64,
                duration: Some(run as f64),
            }
        }
        Reader::PaiJobs | Reader::PaiTasks => {
            // The job row; `pai_task_row` gives its one task.
            let end = submit + wait + run;
            ValidRow {
                fields: vec![
                    format!("j{i}"),
                    format!("inst{i}"),
                    format!("usr{}", a % 20),
                    "Terminated".into(),
                    s(submit + 1),
                    s(end + 1),
                ],
                id: Some(format!("inst{i}")),
                submit: (submit + 1) as f64,
                duration: Some(run as f64),
            }
        }
        Reader::Mlperf => {
            let start_ms = 1_621_000_000_000 + u64::from(a) * 7;
            let dur_s = run % 20_000 + 1;
            let stop_ms = start_ms + dur_s * 1000;
            ValidRow {
                fields: vec![
                    s(i as u64),
                    ["Dell", "NVIDIA", "Google"][(b % 3) as usize].into(),
                    format!("sys{}", c % 11),
                    ["bert", "resnet", "unet3d"][(d % 3) as usize].into(),
                    format!("result_{i}.txt"),
                    s(1 + u64::from(b % 8)),
                    s(gpus),
                    "GPU-X".into(),
                    "\"fw 1 , fw 2\"".into(),
                    s(64 * gpus),
                    s(u64::from(c)),
                    s(start_ms),
                    s(stop_ms),
                    s(dur_s),
                    ["success", "aborted", "success"][(d % 3) as usize].into(),
                    "3".into(),
                    "0.75".into(),
                ],
                id: Some(s(i as u64)),
                submit: start_ms as f64 / 1000.0,
                duration: Some(dur_s as f64),
            }
        }
    }
}

/// The task-table row of PAI job `i` (one task per job, starting `wait` after the submission).
fn pai_task_row(i: usize, (a, b, c, d): Seed) -> Vec<String> {
    let submit = u64::from(a % 10_000_000) + 1;
    let start = submit + u64::from(b % 7200);
    let end = start + 1 + u64::from(c % 500_000);
    vec![
        format!("j{i}"),
        "worker".into(),
        (1 + d % 4).to_string(),
        "Terminated".into(),
        start.to_string(),
        end.to_string(),
        (100 * (1 + d % 8)).to_string(),
        "29.296875".into(),
        ["0", "50", "100"][(d % 3) as usize].into(),
        ["T4", "V100", ""][(a % 3) as usize].into(),
    ]
}

// ------------------------------------------------------------------ mutations

/// Position `at` within `len` items (`len` > 0).
fn pick(at: usize, len: usize) -> usize {
    at % len
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Replace(usize, String),
    /// Inserts a byte that is never valid UTF-8 on its own.
    InvalidUtf8(usize, u8),
}

fn garbage() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", " ", "NaN", "nan", "inf", "-inf", "1e400", "-1e400", "1e308", "-1", "-0.5",
            "99999999999999999999999999", "None", "null", "N/A", "0x1F", "1,5", "12abc",
            "2017-13-45 99:00:00", "--1", "+", ".", "é", "€",
        ])
        .prop_map(String::from),
        2 => any::<f64>().prop_map(|v| v.to_string()),
        2 => any::<i64>().prop_map(|v| v.to_string()),
        3 => "[a-zA-Z0-9 .:+_/é€-]{0,16}",
        1 => (1000usize..200_000).prop_map(|n| "9".repeat(n)),
        1 => (1000usize..200_000).prop_map(|n| "x".repeat(n)),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Duplicate),
        3 => (any::<usize>(), garbage()).prop_map(|(i, g)| Mutation::Replace(i, g)),
        1 => (any::<usize>(), prop::sample::select(vec![0x80u8, 0xc3, 0xe9, 0xfe, 0xff]))
            .prop_map(|(i, b)| Mutation::InvalidUtf8(i, b)),
    ]
}

/// One mutated file.
#[derive(Debug, Clone)]
struct FileCase {
    seeds: Vec<Seed>,
    /// (row, mutation): several may hit one row.
    mutations: Vec<(usize, Mutation)>,
    crlf: bool,
    trailing_newline: bool,
    /// Blank lines (and, for SWF, comment lines) inserted before these rows.
    noise: Vec<(usize, bool)>,
    /// Cut the file inside its last row, keeping this share of the row's bytes.
    truncate: Option<usize>,
    /// SWF: the header has `UnixStartTime` / a Latin-1 comment line.
    unix_start: bool,
    latin1_comment: bool,
}

fn file_case() -> impl Strategy<Value = FileCase> {
    (
        prop::collection::vec(any::<Seed>(), 1..40),
        prop::collection::vec((any::<usize>(), mutation()), 0..6),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec((any::<usize>(), any::<bool>()), 0..4),
        prop::option::weighted(0.2, any::<usize>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(seeds, mutations, crlf, trailing_newline, noise, truncate, unix_start, latin1)| {
                FileCase {
                    seeds,
                    mutations,
                    crlf,
                    trailing_newline,
                    noise,
                    truncate,
                    unix_start,
                    latin1_comment: latin1,
                }
            },
        )
}

/// A data row as written: its line number and whether it is still the valid row.
struct WrittenRow {
    line: u64,
    mutated: bool,
    /// False when mutations left nothing but separators and spaces: not a row to the reader.
    present: bool,
    expect: ValidRow,
}

/// The bytes of a file and the rows in it.
struct Built {
    bytes: Vec<u8>,
    rows: Vec<WrittenRow>,
}

fn encode(reader: Reader, fields: &[String]) -> Vec<u8> {
    if reader.is_swf() {
        fields.join("  ").into_bytes()
    } else {
        fields.join(",").into_bytes()
    }
}

fn apply(reader: Reader, fields: &mut Vec<String>, bytes: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Delete(_) | Mutation::Duplicate(_) | Mutation::Replace(..)
            if fields.is_empty() => {}
        Mutation::Delete(i) => {
            fields.remove(pick(*i, fields.len()));
        }
        Mutation::Duplicate(i) => {
            let k = pick(*i, fields.len());
            fields.insert(k, fields[k].clone());
        }
        Mutation::Replace(i, g) => {
            let k = pick(*i, fields.len());
            // Never touch the quoted framework field's quotes: replace it whole.
            fields[k] = g.clone();
        }
        Mutation::InvalidUtf8(..) => {}
    }
    *bytes = encode(reader, fields);
    if let Mutation::InvalidUtf8(i, b) = m {
        let at = pick(*i, bytes.len() + 1);
        bytes.insert(at, *b);
    }
}

fn build(reader: Reader, case: &FileCase) -> Built {
    let eol: &[u8] = if case.crlf { b"\r\n" } else { b"\n" };
    let mut lines: Vec<Vec<u8>> = Vec::new();
    if reader.is_swf() {
        lines.push(b"; Version: 2.2".to_vec());
        if case.latin1_comment {
            // ISO-8859-1 text in a header comment, as in some archive logs.
            lines.push(b"; Installation: Universit\xe9 de Montr\xe9al".to_vec());
        }
        if case.unix_start {
            lines.push(format!("; UnixStartTime: {UNIX_START}").into_bytes());
        }
        lines.push(b";".to_vec());
    } else if let Some(h) = reader.header() {
        lines.push(h.as_bytes().to_vec());
    }
    let n = case.seeds.len();
    let mut mutated = vec![false; n];
    let mut data: Vec<(Vec<String>, Vec<u8>)> = Vec::with_capacity(n);
    for (i, seed) in case.seeds.iter().enumerate() {
        let row = valid_row(reader, i, *seed, case.unix_start);
        let fields = if reader == Reader::PaiTasks {
            pai_task_row(i, *seed)
        } else {
            row.fields.clone()
        };
        let bytes = encode(reader, &fields);
        data.push((fields, bytes));
    }
    for (at, m) in &case.mutations {
        let k = pick(*at, n);
        let (fields, bytes) = &mut data[k];
        apply(reader, fields, bytes, m);
        mutated[k] = true;
    }
    if let Some(share) = case.truncate {
        let last = n - 1;
        let len = data[last].1.len();
        let keep = pick(share, len.max(1)) + 1;
        data[last].1.truncate(keep);
        mutated[last] = true;
    }
    let mut rows = Vec::with_capacity(n);
    for (i, ((_, bytes), seed)) in data.into_iter().zip(&case.seeds).enumerate() {
        for (at, comment) in &case.noise {
            if pick(*at, n) == i {
                let noise = if *comment && reader.is_swf() {
                    b"; a comment between rows".to_vec()
                } else if *comment {
                    b"   ".to_vec()
                } else {
                    Vec::new()
                };
                lines.push(noise);
            }
        }
        let sep: &[u8] = if reader.is_swf() { b" \t" } else { b" \t," };
        let present = !bytes.iter().all(|b| sep.contains(b));
        lines.push(bytes);
        rows.push(WrittenRow {
            line: lines.len() as u64,
            mutated: mutated[i],
            present,
            expect: valid_row(reader, i, *seed, case.unix_start),
        });
    }
    let mut bytes = lines.join(eol);
    if case.trailing_newline && case.truncate.is_none() {
        bytes.extend_from_slice(eol);
    }
    Built { bytes, rows }
}

// ------------------------------------------------------------------ running a reader

/// A case folder holding the fuzzed file (and, for PAI, the other table).
struct Files {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn write_files(reader: Reader, bytes: &[u8], seeds: &[Seed]) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join(reader.file());
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::write(&target, bytes).unwrap();
    // PAI: the other table is valid and beside it; the reader is always given the job table.
    let path = match reader {
        Reader::PaiJobs => {
            let tasks: Vec<Vec<u8>> = (0..seeds.len())
                .map(|i| encode(reader, &pai_task_row(i, seeds[i])))
                .collect();
            std::fs::write(dir.path().join("pai_task_table.csv"), tasks.join(&b'\n')).unwrap();
            target
        }
        Reader::PaiTasks => {
            let jobs: Vec<Vec<u8>> = (0..seeds.len())
                .map(|i| encode(reader, &valid_row(reader, i, seeds[i], false).fields))
                .collect();
            let job_path = dir.path().join("pai_job_table.csv");
            std::fs::write(&job_path, jobs.join(&b'\n')).unwrap();
            job_path
        }
        _ => target,
    };
    Files { _dir: dir, path }
}

/// What one read produced.
struct Outcome {
    result: Result<ReadReport, DatasetError>,
    records: Vec<JobRecord>,
}

fn read(path: &Path, reader: Reader, opts: &ReadOptions) -> Outcome {
    let mut records = Vec::new();
    let result = read_jobs(path, Some(reader.format()), opts, &mut |r| records.push(r));
    Outcome { result, records }
}

fn opts(strict: bool, max_detailed_issues: usize) -> ReadOptions {
    ReadOptions {
        strict,
        max_detailed_issues,
        ..Default::default()
    }
}

/// Every row read is kept or dropped; each drop is detailed (up to the cap) in a file the
/// read covers; kept rows are what the sink got and summarise and load without error.
fn check_report(
    reader: Reader,
    path: &Path,
    report: &ReadReport,
    records: &[JobRecord],
    max_detailed: usize,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(report.rows_read, report.rows_kept + report.rows_dropped());
    prop_assert_eq!(
        report.issues.len() as u64,
        report.rows_dropped().min(max_detailed as u64)
    );
    if !matches!(reader, Reader::PaiJobs | Reader::PaiTasks) {
        // PAI's counts also cover the task table.
        prop_assert_eq!(report.rows_kept, records.len() as u64);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for issue in &report.issues {
            prop_assert_eq!(&issue.file, &name, "{}", issue);
        }
    } else {
        prop_assert!(report.rows_kept >= records.len() as u64);
        for issue in &report.issues {
            prop_assert!(
                issue.file == "pai_job_table.csv" || issue.file == "pai_task_table.csv",
                "{}",
                issue
            );
        }
    }
    for issue in &report.issues {
        prop_assert!(issue.line >= 1, "{}", issue);
        prop_assert!(
            !issue.field.is_empty() && !issue.reason.is_empty(),
            "{issue}"
        );
    }
    for r in records {
        prop_assert!(r.submit_time.is_finite(), "{:?}", r);
    }
    let mut summary = JobSummarizer::default();
    for r in records {
        summary.observe(r);
    }
    prop_assert_eq!(summary.finish().jobs, records.len() as u64);
    Ok(())
}

/// The mutated-file property for one reader.
fn check_mutated(reader: Reader, case: &FileCase) -> Result<(), TestCaseError> {
    let built = build(reader, case);
    let files = write_files(reader, &built.bytes, &case.seeds);
    let out = read(&files.path, reader, &opts(false, usize::MAX));
    let report = match out.result {
        Ok(r) => r,
        Err(e) => return Err(TestCaseError::fail(format!("read failed: {e}"))),
    };
    check_report(reader, &files.path, &report, &out.records, usize::MAX)?;

    // The fuzzed file's rows, all read, each dropped one at most once and only if mutated.
    let fuzzed = Path::new(reader.file())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let fuzzed_issues: Vec<u64> = report
        .issues
        .iter()
        .filter(|i| i.file == fuzzed)
        .map(|i| i.line)
        .collect();
    let dropped: BTreeSet<u64> = fuzzed_issues.iter().copied().collect();
    prop_assert_eq!(dropped.len(), fuzzed_issues.len(), "one issue per row");
    let mutated_lines: BTreeSet<u64> = built
        .rows
        .iter()
        .filter(|r| r.mutated)
        .map(|r| r.line)
        .collect();
    for line in &dropped {
        prop_assert!(
            mutated_lines.contains(line),
            "line {} dropped but not mutated: {:?}",
            line,
            report.issues
        );
    }
    let n = built.rows.iter().filter(|r| r.present).count() as u64;
    let all = built.rows.len() as u64;
    let (rows_here, kept_here) = match reader {
        // + one valid task row per job / one valid job row per task
        Reader::PaiJobs => (report.rows_read - all, report.rows_kept - all),
        Reader::PaiTasks => (
            report.rows_read - all,
            report.rows_kept - out.records.len() as u64,
        ),
        _ => (report.rows_read, report.rows_kept),
    };
    prop_assert_eq!(rows_here, n, "every row of the fuzzed file is read");
    prop_assert_eq!(kept_here, n - dropped.len() as u64);

    // Every unmutated row is kept with its id, submit time and duration.
    let other_issues: Vec<_> = report.issues.iter().filter(|i| i.file != fuzzed).collect();
    if reader == Reader::PaiTasks {
        // A mutated task can move its job's start before the submission or after its end:
        // then the (valid) job row is dropped, but only then.
        for issue in &other_issues {
            // Job i is on line i + 1 of the (header-less, valid) job table.
            let task = built.rows.get(issue.line as usize - 1);
            prop_assert!(
                task.is_some_and(|t| t.mutated) && issue.reason.contains("task start_time"),
                "job row dropped without a mutated task: {}",
                issue
            );
        }
        prop_assert_eq!(
            out.records.len() + other_issues.len(),
            built.rows.len(),
            "the job table is valid"
        );
    } else {
        prop_assert!(other_issues.is_empty(), "{:?}", other_issues);
    }
    for row in built.rows.iter().filter(|r| !r.mutated) {
        let id = row
            .expect
            .id
            .clone()
            .unwrap_or_else(|| reader.id_from_line(row.line));
        let found = out.records.iter().any(|r| {
            r.job_id == id
                && r.submit_time == row.expect.submit
                && r.duration == row.expect.duration
        });
        prop_assert!(
            found,
            "unmutated row at line {} (id {}) not kept as written; issues {:?}",
            row.line,
            id,
            report.issues
        );
    }

    // Strict mode: the first dropped row is the error, after exactly the rows before it.
    let strict = read(&files.path, reader, &opts(true, 200));
    match (report.issues.first(), strict.result) {
        (None, Ok(r)) => {
            prop_assert_eq!(r.rows_kept, report.rows_kept);
            prop_assert_eq!(strict.records.len(), out.records.len());
        }
        (Some(first), Err(DatasetError::StrictRow(issue))) => {
            prop_assert_eq!(&issue, first);
            let before = match reader {
                // The task table is read before any job.
                Reader::PaiTasks if issue.file == fuzzed => 0,
                Reader::PaiTasks => issue.line as usize - 1,
                _ => built
                    .rows
                    .iter()
                    .filter(|r| r.present && r.line < issue.line)
                    .count(),
            };
            prop_assert_eq!(strict.records.len(), before);
        }
        (first, other) => {
            return Err(TestCaseError::fail(format!(
                "strict mode: expected {first:?}, got {other:?}"
            )))
        }
    }

    // The kept rows load into a table.
    let (table, _) = load_jobs(&files.path, Some(reader.format()), &ReadOptions::default())
        .map_err(|e| TestCaseError::fail(format!("load_jobs: {e}")))?;
    prop_assert_eq!(table.len(), out.records.len());
    Ok(())
}

// ------------------------------------------------------------------ arbitrary bytes

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

/// How the arbitrary input is made.
#[derive(Debug, Clone)]
enum Bytes {
    Random(Vec<u8>),
    /// A valid file with byte-level edits.
    Edited(FileCase, Vec<Edit>),
    /// A gzip stream of a (possibly edited) valid file, cut or corrupted.
    Gzip(FileCase, Vec<Edit>, Option<usize>),
}

fn bytes_input() -> impl Strategy<Value = Bytes> {
    let edit = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (
            any::<usize>(),
            prop_oneof![
                Just(b'"'),
                Just(b','),
                Just(b'\n'),
                Just(b'\r'),
                Just(b';'),
                any::<u8>()
            ]
        )
            .prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
    ];
    let edits = prop::collection::vec(edit, 0..12);
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048).prop_map(Bytes::Random),
        3 => (file_case(), edits.clone()).prop_map(|(c, e)| Bytes::Edited(c, e)),
        2 => (file_case(), edits, prop::option::of(any::<usize>()))
            .prop_map(|(c, e, cut)| Bytes::Gzip(c, e, cut)),
    ]
}

fn edited(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        match e {
            Edit::Flip(i, b) if !bytes.is_empty() => {
                let k = pick(*i, bytes.len());
                bytes[k] ^= b | 1;
            }
            Edit::Insert(i, b) => bytes.insert(pick(*i, bytes.len() + 1), *b),
            Edit::Remove(i) if !bytes.is_empty() => {
                bytes.remove(pick(*i, bytes.len()));
            }
            _ => {}
        }
    }
    bytes
}

fn make_bytes(reader: Reader, input: &Bytes) -> (Vec<u8>, Vec<Seed>) {
    match input {
        Bytes::Random(b) => (b.clone(), vec![(1, 2, 3, 4)]),
        Bytes::Edited(case, edits) => {
            (edited(build(reader, case).bytes, edits), case.seeds.clone())
        }
        Bytes::Gzip(case, edits, cut) => {
            let plain = edited(build(reader, case).bytes, edits);
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&plain).unwrap();
            let mut gz = gz.finish().unwrap();
            match cut {
                // Cut anywhere after the magic bytes (a truncated download).
                Some(at) => gz.truncate(2 + pick(*at, gz.len() - 1)),
                // Or corrupt the deflate stream after the 10-byte header.
                None if gz.len() > 12 => {
                    let k = 10 + gz.len() / 2 % (gz.len() - 10);
                    gz[k] ^= 0x5a;
                }
                None => {}
            }
            (gz, case.seeds.clone())
        }
    }
}

/// Lines in the (decompressed, where it decompresses) input: the bound for issue lines.
fn line_bound(bytes: &[u8]) -> u64 {
    let mut plain = Vec::new();
    let text: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        // Decompress what can be; a corrupt stream ends where it breaks.
        let mut d = flate2::read::MultiGzDecoder::new(bytes);
        let mut buf = [0u8; 4096];
        while let Ok(k) = d.read(&mut buf) {
            if k == 0 {
                break;
            }
            plain.extend_from_slice(&buf[..k]);
        }
        &plain
    } else {
        bytes
    };
    // `\r` alone also ends a CSV record.
    1 + text.iter().filter(|&&b| b == b'\n' || b == b'\r').count() as u64
}

fn check_bytes(reader: Reader, input: &Bytes, max_detailed: usize) -> Result<(), TestCaseError> {
    let (bytes, seeds) = make_bytes(reader, input);
    let files = write_files(reader, &bytes, &seeds);
    let out = read(&files.path, reader, &opts(false, max_detailed));
    let strict = read(&files.path, reader, &opts(true, max_detailed));
    match out.result {
        Ok(report) => {
            check_report(reader, &files.path, &report, &out.records, max_detailed)?;
            let fuzzed = Path::new(reader.file())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let bound = line_bound(&bytes);
            for issue in report.issues.iter().filter(|i| i.file == fuzzed) {
                prop_assert!(issue.line <= bound, "{} (file has {} lines)", issue, bound);
            }
            match (report.rows_dropped(), strict.result) {
                (0, Ok(r)) => prop_assert_eq!(r.rows_kept, report.rows_kept),
                (_, Err(DatasetError::StrictRow(issue))) if report.rows_dropped() > 0 => {
                    if let Some(first) = report.issues.first() {
                        prop_assert_eq!(&issue, first);
                    }
                }
                (dropped, other) => {
                    return Err(TestCaseError::fail(format!(
                        "strict mode after {dropped} drops: {other:?}"
                    )))
                }
            }
            let (table, _) = load_jobs(&files.path, Some(reader.format()), &opts(false, 0))
                .map_err(|e| TestCaseError::fail(format!("load_jobs: {e}")))?;
            prop_assert_eq!(table.len(), out.records.len());
        }
        Err(DatasetError::Format { .. }) => {
            // A file the reader cannot take as a whole (header): strict mode fails too.
            prop_assert!(strict.result.is_err());
        }
        Err(DatasetError::Io { .. }) if bytes.starts_with(&[0x1f, 0x8b]) => {
            // A gzip stream broken before the part a reader peeks at (PAI's header check).
            prop_assert!(strict.result.is_err());
        }
        Err(e) => return Err(TestCaseError::fail(format!("unexpected error: {e}"))),
    }
    Ok(())
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
/// after CRLF line ends and blank lines (rust-csv issues #395 and #208), so issues named the
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
