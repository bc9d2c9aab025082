//! Shared row parsing for the delimited readers: column lookup by header name and typed
//! field access that turns every bad value into a [`RowIssue`].

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

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

/// Where a file's line breaks are, as far as the CSV parser has read it. The parser's own line
/// numbers are wrong after CRLF line ends and blank lines (known rust-csv bugs), so
/// rows are numbered from the bytes: `\n`, `\r\n` and a lone `\r` each end one line.
#[derive(Default)]
struct LineBreaks {
    /// Offsets of line breaks read but not yet passed by [`LineBreaks::line_at`]: at most the
    /// parser's read-ahead buffer's worth.
    pending: VecDeque<u64>,
    /// Line breaks before the offset last asked about.
    passed: u64,
}

impl LineBreaks {
    /// 1-based line of the byte at `offset`; offsets must not decrease between calls.
    fn line_at(&mut self, offset: u64) -> u64 {
        while self.pending.front().is_some_and(|&b| b < offset) {
            self.pending.pop_front();
            self.passed += 1;
        }
        self.passed + 1
    }
}

/// Passes bytes through, noting where the line breaks are in a shared [`LineBreaks`].
struct CountLines<R> {
    inner: R,
    offset: u64,
    /// A `\r` whose next byte is not read yet (a lone `\r` breaks a line, `\r\n` once).
    pending_cr: Option<u64>,
    breaks: Rc<RefCell<LineBreaks>>,
}

impl<R: Read> Read for CountLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut breaks = self.breaks.borrow_mut();
        if n == 0 {
            breaks.pending.extend(self.pending_cr.take());
        }
        for (i, &b) in buf[..n].iter().enumerate() {
            if b != b'\n' && b != b'\r' && self.pending_cr.is_none() {
                continue;
            }
            let at = self.offset + i as u64;
            if b == b'\n' {
                self.pending_cr = None;
                breaks.pending.push_back(at);
            } else if let Some(cr) = self.pending_cr.take() {
                // The `\r` before was a lone one.
                breaks.pending.push_back(cr);
            }
            if b == b'\r' {
                self.pending_cr = Some(at);
            }
        }
        self.offset += n as u64;
        Ok(n)
    }
}

/// Line breaks inside a row's fields (a quoted field may span lines).
fn breaks_in(rec: &csv::ByteRecord) -> u64 {
    let all = rec.as_slice();
    if !all.contains(&b'\n') && !all.contains(&b'\r') {
        return 0;
    }
    let mut n = 0;
    for field in rec {
        for (i, &b) in field.iter().enumerate() {
            n += u64::from(b == b'\n' || (b == b'\r' && field.get(i + 1) != Some(&b'\n')));
        }
    }
    n
}

/// The line-too-long error a CSV read failed with, if that is why.
fn too_long(e: &csv::Error) -> Option<&crate::input::LineTooLong> {
    match e.kind() {
        csv::ErrorKind::Io(io) => crate::input::LineTooLong::of(io),
        _ => None,
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
    let breaks = Rc::new(RefCell::new(LineBreaks::default()));
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(headers.is_none())
        .from_reader(CountLines {
            inner: crate::input::open_lines(path, opts.max_line_bytes)?,
            offset: 0,
            pending_cr: None,
            breaks: Rc::clone(&breaks),
        });
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
    let mut rec = csv::ByteRecord::new();
    let mut last_line = if headers.is_none() { 1 } else { 0 };
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) if too_long(&e).is_some() => {
                let reason = too_long(&e).map(|t| t.to_string()).unwrap_or_default();
                return Err(DatasetError::format(path, reason));
            }
            // A read error (a truncated or corrupt gzip, a failing disk) is the file's, not a
            // row's: the rows before it are not the whole trace, so the read fails.
            Err(e) if matches!(e.kind(), csv::ErrorKind::Io(_)) => {
                return Err(match e.into_kind() {
                    csv::ErrorKind::Io(io) => DatasetError::io(path, io),
                    other => DatasetError::format(path, format!("{other:?}")),
                });
            }
            Err(e) => {
                report.rows_read += 1;
                last_line += 1;
                let issue = RowIssue {
                    file: file.clone(),
                    line: last_line,
                    field: "row".into(),
                    reason: "unreadable CSV row".into(),
                    value: shown_value(&e.to_string()),
                };
                report.drop_row(issue, opts)?;
                continue;
            }
        }
        // The parser stops just past the first byte of the row's terminator: the row's last
        // line is the one before it, less the line breaks inside quoted fields.
        let end = rdr.position().byte().saturating_sub(1);
        let line = breaks
            .borrow_mut()
            .line_at(end)
            .saturating_sub(breaks_in(&rec))
            .max(1);
        last_line = line;
        if rec.iter().all(|f| f.trim_ascii().is_empty()) {
            continue;
        }
        report.rows_read += 1;
        let fields: Vec<&str> = match rec.iter().map(std::str::from_utf8).collect() {
            Ok(fields) => fields,
            Err(_) => {
                let raw = String::from_utf8_lossy(rec.as_slice()).into_owned();
                let issue = RowIssue {
                    file: file.clone(),
                    line,
                    field: "row".into(),
                    reason: "not valid UTF-8".into(),
                    value: shown_value(&raw),
                };
                report.drop_row(issue, opts)?;
                continue;
            }
        };
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
