//! Summaries of files that hold no jobs, for `augur data inspect`.

use std::path::Path;

use crate::error::DatasetError;
use crate::format::TraceFormat;
use crate::report::{FileSummary, ReadOptions};

/// Reads a curve, DAG or cluster file with its reader and summarises it.
pub fn summarize_file(
    path: &Path,
    format: TraceFormat,
    _opts: &ReadOptions,
) -> Result<FileSummary, DatasetError> {
    Err(DatasetError::format(
        path,
        format!("no summary for `{format}` files yet"),
    ))
}
