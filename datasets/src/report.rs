//! Row-level accounting of what a reader kept and dropped.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::DatasetError;
pub(crate) use crate::row_issue::shown_value;
pub use crate::row_issue::RowIssue;
use crate::schema::TimeOrigin;
use crate::zone::TraceZone;

/// How strict a reader is, and how it reads what the file leaves open.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Stop at the first malformed row with [`DatasetError::StrictRow`].
    pub strict: bool,
    /// How many dropped rows are kept in full detail in [`ReadReport::issues`]; all are counted.
    pub max_detailed_issues: usize,
    /// The zone of zone-less local times, for the readers that take one (sacct); UTC by
    /// default. The other readers read their zone-less times as UTC and say so in a note.
    pub timezone: TraceZone,
    /// Longest line the line-based readers accept, bytes (newline excluded): a longer one
    /// fails the read naming the file, the line and this bound, so memory stays bounded.
    pub max_line_bytes: usize,
    /// Longest record the JSON readers accept, bytes: a span between two consecutive
    /// elements of the containers a reader walks (a DAG, a task, an event, or the whitespace
    /// before it). A longer one fails the read naming the file, the byte offset and this
    /// bound, so memory stays bounded.
    pub max_record_bytes: usize,
    /// Most bytes a JSON document may have once decompressed: more fails the read (a gzip
    /// bomb), naming the file and this bound.
    pub max_json_bytes: u64,
}

/// The default [`ReadOptions::max_line_bytes`]: 1 MiB.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The default [`ReadOptions::max_record_bytes`]: 4 MiB (the largest bundled record, a
/// TPC-H DAG, is 0.26 MB).
pub const MAX_RECORD_BYTES: usize = 4 << 20;

/// The default [`ReadOptions::max_json_bytes`]: 1 GiB (the largest bundled JSON is 12 MB).
pub const MAX_JSON_BYTES: u64 = 1 << 30;

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            strict: false,
            max_detailed_issues: 200,
            timezone: TraceZone::Utc,
            max_line_bytes: MAX_LINE_BYTES,
            max_record_bytes: MAX_RECORD_BYTES,
            max_json_bytes: MAX_JSON_BYTES,
        }
    }
}

/// What a reader did with a file: rows read, kept, dropped, and why.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadReport {
    /// Files read, in order.
    pub files: Vec<String>,
    /// Data rows seen (comments and headers excluded).
    pub rows_read: u64,
    /// Rows turned into records.
    pub rows_kept: u64,
    /// Dropped-row counts keyed by `field: reason`.
    pub dropped_by_reason: BTreeMap<String, u64>,
    /// The first [`ReadOptions::max_detailed_issues`] dropped rows in full.
    pub issues: Vec<RowIssue>,
    /// Notes on how the reader interpreted the file (time origin, variant, censoring...).
    pub notes: Vec<String>,
    /// What the times in the file count from.
    pub time_origin: TimeOrigin,
}

impl ReadReport {
    /// Rows dropped as malformed.
    pub fn rows_dropped(&self) -> u64 {
        self.dropped_by_reason.values().sum()
    }

    /// Records a malformed row; in strict mode returns it as an error instead.
    pub fn drop_row(&mut self, issue: RowIssue, opts: &ReadOptions) -> Result<(), DatasetError> {
        if opts.strict {
            return Err(DatasetError::StrictRow(issue));
        }
        *self
            .dropped_by_reason
            .entry(format!("{}: {}", issue.field, issue.reason))
            .or_insert(0) += 1;
        if self.issues.len() < opts.max_detailed_issues {
            self.issues.push(issue);
        }
        Ok(())
    }

    /// Adds a note once.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// Notes the status values a reader did not recognise (value → rows), which it kept as
    /// unknown: `"{what} kept as unknown: {tally:?}"`. Nothing when the tally is empty.
    pub fn note_unrecognised(&mut self, what: &str, tally: &BTreeMap<String, u64>) {
        if !tally.is_empty() {
            self.note(format!("{what} kept as unknown: {tally:?}"));
        }
    }

    /// Folds another report (from another file of the same dataset) into this one.
    pub fn merge(&mut self, other: ReadReport, opts: &ReadOptions) {
        self.files.extend(other.files);
        self.rows_read += other.rows_read;
        self.rows_kept += other.rows_kept;
        for (k, v) in other.dropped_by_reason {
            *self.dropped_by_reason.entry(k).or_insert(0) += v;
        }
        for issue in other.issues {
            if self.issues.len() < opts.max_detailed_issues {
                self.issues.push(issue);
            }
        }
        for n in other.notes {
            self.note(n);
        }
    }
}

/// What `augur data inspect` shows for a file that holds no jobs (curves, DAGs, cluster
/// descriptions): the read report plus a few named facts (`("runs", "1239")`, ...).
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// The format the file was read as.
    pub format: crate::format::TraceFormat,
    /// Rows read/kept/dropped.
    pub report: ReadReport,
    /// Named facts in display order.
    pub facts: Vec<(String, String)>,
}
