//! The errors of the SQLite store: what failed at open, read or write, and why a write was
//! not committed (the answer to an append).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::integrity::IntegrityReport;

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
    Postgres(#[from] PgStoreError),
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

/// Errors of the PostgreSQL store.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    #[error("event store {url}: {source}")]
    Postgres {
        url: String,
        #[source]
        source: postgres::Error,
    },
    #[error("store `{url}`: not a PostgreSQL connection string: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("event store {url}: row seq {seq} holds an event that cannot be read: {reason}")]
    BadRow {
        url: String,
        seq: i64,
        reason: String,
    },
    #[error("event store {url} belongs to backend `{found_backend}` (cluster `{found_cluster}`), not to backend `{want_backend}` (cluster `{want_cluster}`): two clusters' events, or real and simulated ones, never share a log; use another database")]
    IdentityMismatch {
        url: String,
        found_backend: String,
        found_cluster: String,
        want_backend: String,
        want_cluster: String,
    },
    #[error("event store {url} is damaged and was not opened: sequence numbers up to {handed_out} were acknowledged but {present} events are stored (highest {max_seq}); restore the database from a backup")]
    Damaged {
        url: String,
        handed_out: i64,
        present: i64,
        max_seq: i64,
    },
    #[error("event store {url}: no connection")]
    NoConnection { url: String },
    #[error("event store {url}: cannot start the {thread} thread: {source}")]
    Thread {
        url: String,
        thread: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("event store {url}: the writer has stopped")]
    Closed { url: String },
    #[error("event store {url}: cannot encode an event: {source}")]
    Encode {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// The commit of the group a request was written in failed (each request of it gets
    /// the one error).
    #[error(transparent)]
    Commit(Arc<PgStoreError>),
}
