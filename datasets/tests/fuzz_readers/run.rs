//! Running a reader on a generated file, checking its report, and the mutated-file property.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use augur_datasets::summary::JobSummarizer;
use augur_datasets::{load_jobs, read_jobs, DatasetError, JobRecord, ReadOptions, ReadReport};
use proptest::prelude::*;

use crate::mutate::{build, encode, FileCase};
use crate::rows::{pai_task_row, valid_row, Reader, Seed};

/// A case folder holding the fuzzed file (and, for PAI, the other table).
pub(crate) struct Files {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

pub(crate) fn write_files(reader: Reader, bytes: &[u8], seeds: &[Seed]) -> Files {
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
pub(crate) struct Outcome {
    pub(crate) result: Result<ReadReport, DatasetError>,
    pub(crate) records: Vec<JobRecord>,
}

pub(crate) fn read(path: &Path, reader: Reader, opts: &ReadOptions) -> Outcome {
    let mut records = Vec::new();
    let result = read_jobs(path, Some(reader.format()), opts, &mut |r| records.push(r));
    Outcome { result, records }
}

pub(crate) fn opts(strict: bool, max_detailed_issues: usize) -> ReadOptions {
    ReadOptions {
        strict,
        max_detailed_issues,
        ..Default::default()
    }
}

/// Every row read is kept or dropped; each drop is detailed (up to the cap) in a file the
/// read covers; kept rows are what the sink got and summarise and load without error.
pub(crate) fn check_report(
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
pub(crate) fn check_mutated(reader: Reader, case: &FileCase) -> Result<(), TestCaseError> {
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
