//! Shared row parsing for the delimited readers: column lookup by header name and typed
//! field access that turns every bad value into a [`RowIssue`].

use std::collections::HashMap;
use std::path::Path;

use crate::error::DatasetError;
use crate::report::{shown_value, RowIssue};

/// Header name → column index, checked for the columns a reader needs.
pub(crate) struct CsvColumns {
    index: HashMap<String, usize>,
}

impl CsvColumns {
    /// Indexes `headers`; a missing required column is a [`DatasetError::Format`] naming it.
    pub(crate) fn new<'a>(
        path: &Path,
        headers: impl IntoIterator<Item = &'a str>,
        required: &[&str],
    ) -> Result<CsvColumns, DatasetError> {
        let index: HashMap<String, usize> = headers
            .into_iter()
            .enumerate()
            .map(|(i, h)| (h.trim().trim_start_matches('\u{feff}').to_string(), i))
            .collect();
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|c| !index.contains_key(*c))
            .collect();
        if !missing.is_empty() {
            let mut found: Vec<&String> = index.keys().collect();
            found.sort();
            return Err(DatasetError::format(
                path,
                format!("missing column(s) {missing:?}; the header has {found:?}"),
            ));
        }
        Ok(CsvColumns { index })
    }

    /// Index of a required column (checked in [`CsvColumns::new`]).
    pub(crate) fn at(&self, name: &str) -> usize {
        self.index.get(name).copied().unwrap_or(usize::MAX)
    }

    /// Index of an optional column.
    pub(crate) fn optional(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// One data row being parsed: its place in the file and its raw fields.
pub(crate) struct Row<'a> {
    pub file: &'a str,
    pub line: u64,
    pub fields: &'a [&'a str],
}

/// Values that mean "missing" in the traces we read.
fn is_missing(raw: &str) -> bool {
    matches!(
        raw,
        "" | "None" | "none" | "null" | "NULL" | "NA" | "N/A" | "nan" | "NaN"
    )
}

impl<'a> Row<'a> {
    /// A row issue at this row.
    pub fn issue(&self, field: &str, reason: &str, value: &str) -> RowIssue {
        RowIssue {
            file: self.file.to_string(),
            line: self.line,
            field: field.to_string(),
            reason: reason.to_string(),
            value: shown_value(value),
        }
    }

    /// Raw field text, trimmed; `""` past the end of the row.
    pub fn raw(&self, idx: usize) -> &'a str {
        self.fields.get(idx).map(|s| s.trim()).unwrap_or("")
    }

    /// Optional text: missing markers become `None`.
    pub fn text(&self, idx: Option<usize>) -> Option<String> {
        let raw = self.raw(idx?);
        (!is_missing(raw)).then(|| raw.to_string())
    }

    /// Optional finite number; missing markers become `None`, anything else unparsable is an
    /// issue.
    pub fn num(&self, idx: Option<usize>, field: &str) -> Result<Option<f64>, RowIssue> {
        let Some(idx) = idx else { return Ok(None) };
        let raw = self.raw(idx);
        if is_missing(raw) {
            return Ok(None);
        }
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Some(v)),
            Ok(_) => Err(self.issue(field, "not a finite number", raw)),
            Err(_) => Err(self.issue(field, "not a number", raw)),
        }
    }

    /// Required finite number.
    pub fn req_num(&self, idx: usize, field: &str) -> Result<f64, RowIssue> {
        match self.num(Some(idx), field)? {
            Some(v) => Ok(v),
            None => Err(self.issue(field, "missing", self.raw(idx))),
        }
    }

    /// Optional number that must not be negative.
    pub fn non_negative(&self, idx: Option<usize>, field: &str) -> Result<Option<f64>, RowIssue> {
        match self.num(idx, field)? {
            Some(v) if v < 0.0 => Err(self.issue(field, "negative", self.raw(idx.unwrap_or(0)))),
            other => Ok(other),
        }
    }
}

/// Drives a CSV file row by row: checks the header for `required` columns, hands each row to
/// `parse`, passes what it returns to `keep`, and records every failure in `report` (or stops
/// on the first in strict mode). `headers` supplies column names for header-less files.
pub(crate) fn read_csv_rows<T>(
    path: &Path,
    headers: Option<&[&str]>,
    required: &[&str],
    opts: &crate::report::ReadOptions,
    report: &mut crate::report::ReadReport,
    mut parse: impl FnMut(&Row, &CsvColumns) -> Result<T, RowIssue>,
    mut keep: impl FnMut(T),
) -> Result<(), DatasetError> {
    let file = crate::input::display_name(path);
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(headers.is_none())
        .from_reader(crate::input::open(path)?);
    let cols = match headers {
        Some(h) => CsvColumns::new(path, h.iter().copied(), required)?,
        None => {
            let h = rdr
                .headers()
                .map_err(|e| DatasetError::format(path, format!("cannot read the header: {e}")))?
                .clone();
            CsvColumns::new(path, h.iter(), required)?
        }
    };
    let mut rec = csv::StringRecord::new();
    let mut last_line = if headers.is_none() { 1 } else { 0 };
    loop {
        let outcome = rdr.read_record(&mut rec);
        let line = rec.position().map(|p| p.line()).unwrap_or(last_line + 1);
        match outcome {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                report.rows_read += 1;
                let line = e.position().map(|p| p.line()).unwrap_or(last_line + 1);
                last_line = line;
                let issue = RowIssue {
                    file: file.clone(),
                    line,
                    field: "row".into(),
                    reason: "unreadable CSV row".into(),
                    value: shown_value(&e.to_string()),
                };
                report.drop_row(issue, opts)?;
                continue;
            }
        }
        last_line = line;
        report.rows_read += 1;
        let fields: Vec<&str> = rec.iter().collect();
        if fields.iter().all(|f| f.trim().is_empty()) {
            report.rows_read -= 1;
            continue;
        }
        let row = Row {
            file: &file,
            line,
            fields: &fields,
        };
        match parse(&row, &cols) {
            Ok(v) => {
                report.rows_kept += 1;
                keep(v);
            }
            Err(issue) => report.drop_row(issue, opts)?,
        }
    }
    report.files.push(path.display().to_string());
    Ok(())
}
