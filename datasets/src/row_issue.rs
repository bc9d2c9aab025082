//! One malformed row of a trace: the file, line and field at fault and why it was dropped.
//! A leaf module, so both the read report and the strict-mode error can carry it.

use std::fmt;

use serde::Serialize;

/// One malformed row: where it is and why it was dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowIssue {
    /// File the row came from.
    pub file: String,
    /// 1-based line number in that file (for JSON inputs: 1-based record index).
    pub line: u64,
    /// The field at fault.
    pub field: String,
    /// Why the row was dropped, without the value (used to group counts).
    pub reason: String,
    /// The offending value as read (truncated to 60 characters).
    pub value: String,
}

impl fmt::Display for RowIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: field `{}`: {}",
            self.file, self.line, self.field, self.reason
        )?;
        if !self.value.is_empty() {
            write!(f, " (got {:?})", self.value)?;
        }
        Ok(())
    }
}

/// Truncates a raw value for display in a [`RowIssue`].
pub(crate) fn shown_value(raw: &str) -> String {
    let mut s: String = raw.chars().take(60).collect();
    if raw.chars().count() > 60 {
        s.push('…');
    }
    s
}
