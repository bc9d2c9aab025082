//! The errors of the SQLite store: what failed at open, read or write, and why a write was
//! not committed (the answer to an append).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::integrity::IntegrityReport;
use super::postgres;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("event store {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("event store {path}: row seq {seq} holds an event that cannot be read: {reason} (see `augur store check`; `augur store repair` keeps every intact event)")]
    BadRow {
        path: PathBuf,
        seq: i64,
        reason: String,
    },
    #[error("event store {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The log lost acknowledged events or is damaged: refused until repaired.
    #[error("event store {} is damaged and was not opened:\n  {}\nrun `augur store check` for the full report and `augur store repair` to keep every intact event and record what was lost", .0.path.display(), .0.problems().join("\n  "))]
    Damaged(Box<IntegrityReport>),
    #[error("the event store's writer has stopped")]
    Closed,
    /// Archive segments are missing or damaged: refused until repaired.
    #[error("event store archive {} is damaged and the store was not opened:\n  {}\nrun `augur store check` for the full report and `augur store repair` to record these ranges as lost and go on", .dir.display(), .problems.join("\n  "))]
    ArchiveDamaged { dir: PathBuf, problems: Vec<String> },
    /// A write that was not committed (not acknowledged), and why.
    #[error("event store {}: {failure}", .path.display())]
    Write {
        path: PathBuf,
        failure: WriteFailure,
    },
    #[error(transparent)]
    Postgres(#[from] postgres::PgStoreError),
}

/// Why the SQLite log takes no writes now (readiness: `/readyz` shows it to the operator).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum NotWritable {
    #[error("the store's writer has stopped: nothing can be ingested")]
    WriterStopped,
    /// The writer retries a failed commit.
    #[error(transparent)]
    Stalled(WriteFailure),
    #[error("the database {} takes no writes: {source}", .path.display())]
    Database {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

/// Why a write was not committed: the writer's answer to each request of a group (shared:
/// one failure answers them all).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteFailure {
    /// The disk (or the database's size limit) is full.
    #[error("the disk is full ({0}): the events were not stored")]
    Full(Arc<rusqlite::Error>),
    /// The writer retries a commit the service had already applied; no new event is taken
    /// until it succeeds.
    #[error("a commit failed ({cause}) and is being retried: no event is taken until it succeeds")]
    Stalled {
        cause: Arc<rusqlite::Error>,
        full: bool,
    },
    /// Any other failure of the write.
    #[error("{0}")]
    Failed(Arc<rusqlite::Error>),
}

impl WriteFailure {
    /// The failure of a write that failed with `e`.
    pub(super) fn of(e: Arc<rusqlite::Error>) -> WriteFailure {
        if is_disk_full(&e) {
            WriteFailure::Full(e)
        } else {
            WriteFailure::Failed(e)
        }
    }

    /// The writer retries a commit that failed (last) with `e`.
    pub(super) fn stalled(e: Arc<rusqlite::Error>) -> WriteFailure {
        WriteFailure::Stalled {
            full: is_disk_full(&e),
            cause: e,
        }
    }

    /// Whether it is a full disk, stalled or not.
    pub fn is_disk_full(&self) -> bool {
        matches!(
            self,
            WriteFailure::Full(_) | WriteFailure::Stalled { full: true, .. }
        )
    }
}

/// Whether `e` is SQLite's "database or disk is full".
pub(super) fn is_disk_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

impl StoreError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
