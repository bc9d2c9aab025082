use std::path::PathBuf;

use crate::row_issue::RowIssue;

/// Everything that can go wrong while reading a trace.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file as a whole is not in the expected shape (missing column, not JSON, ...).
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    /// A malformed row, reported as an error because [`crate::ReadOptions::strict`] is set.
    #[error("{0} (strict mode stops at the first malformed row)")]
    StrictRow(RowIssue),
    /// The format could not be detected from the file name or contents.
    #[error("cannot tell the format of {path}: {reason}; pass --format (one of: {known})")]
    UnknownFormat {
        path: PathBuf,
        reason: String,
        known: String,
    },
    /// A dataset name that Augur does not bundle.
    #[error("unknown dataset `{name}`; known datasets: {known}")]
    UnknownDataset { name: String, known: String },
    /// None of the places the bundled data folder is looked for holds it.
    #[error("bundled data folder not found; tried {tried}; set AUGUR_DATASETS_DIR to the folder holding the bundled traces (datasets/data in the repository)")]
    BundledDataNotFound {
        /// Every folder tried, in order, each with where it came from.
        tried: String,
    },
    /// Building the polars frame failed.
    #[error("building the job table: {0}")]
    Polars(#[from] polars::prelude::PolarsError),
}

impl DatasetError {
    pub(crate) fn format(path: &std::path::Path, reason: impl Into<String>) -> Self {
        DatasetError::Format {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        DatasetError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
