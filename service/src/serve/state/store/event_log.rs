//! The event log the service runs on: the embedded SQLite store of the data folder (one
//! replica) or a PostgreSQL database shared by replicas (`--store postgres://…`). Both keep the
//! same promises (acknowledged = committed, sequence numbers monotonic and never reused,
//! committed events applied in order); this type only dispatches.

use std::path::Path;
use std::time::Duration;

use super::compaction::CompactionReport;
use super::postgres::{PgStore, PgStoreError};
use super::{GroupHooks, NotWritable, PredictionRecord, Store, StoreError, StoredEvent};
use crate::serve::state::events::Event;

/// Handle to the service's event log (cheap to clone).
#[derive(Debug, Clone)]
pub enum EventLog {
    Sqlite(Store),
    Postgres(PgStore),
}

/// Why the log takes no writes now (readiness: `/readyz` shows it to the operator).
#[derive(Debug, thiserror::Error)]
pub enum LogNotWritable {
    #[error(transparent)]
    Sqlite(#[from] NotWritable),
    #[error("the database takes no writes: {0}")]
    Postgres(PgStoreError),
}

/// Whom a PostgreSQL log belongs to (checked at open).
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub backend: &'a str,
    pub cluster: &'a str,
}

impl EventLog {
    /// Opens the log without reading it: `url` `None` is the SQLite store at `sqlite_path`,
    /// else a `postgres://` connection string. Replay the stored events page by page with
    /// [`EventLog::read_after`] (the SQLite store reads its archive, then its database),
    /// then call [`EventLog::follow`]. `hooks` sees each group committed from now on (the
    /// service's ingest pipeline, [`crate::serve::state::ingest`]).
    pub fn open_unread(
        url: Option<&str>,
        sqlite_path: &Path,
        owner: Owner<'_>,
        hooks: Box<dyn GroupHooks>,
    ) -> Result<EventLog, StoreError> {
        match url {
            None => Ok(EventLog::Sqlite(Store::open_unread(sqlite_path, hooks)?)),
            Some(url) => Ok(EventLog::Postgres(PgStore::open_unread(
                url,
                owner.backend,
                owner.cluster,
                hooks,
            )?)),
        }
    }

    /// The highest sequence number stored, as far as a cheap read tells (progress only).
    pub fn last_seq_hint(&self) -> i64 {
        match self {
            EventLog::Sqlite(s) => s.last_seq_hint(),
            EventLog::Postgres(s) => s.last_committed().unwrap_or(0),
        }
    }

    /// The highest sequence number taken: acknowledged, recorded as lost or archived
    /// (blocking).
    pub fn numbered_upto(&self) -> i64 {
        match self {
            EventLog::Sqlite(s) => s.numbered_upto(),
            EventLog::Postgres(s) => s.last_committed().unwrap_or(0),
        }
    }

    /// The prediction records of the submits with `first <= seq <= last` (blocking).
    pub fn read_predictions_between(
        &self,
        first: i64,
        last: i64,
    ) -> Result<Vec<PredictionRecord>, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.read_predictions_between(first, last),
            EventLog::Postgres(s) => Ok(s.read_predictions_between(first, last)?),
        }
    }

    /// The first and last sequence numbers and the count of a job's events still in the
    /// database, if any (blocking).
    pub fn job_events(&self, job_id: &str) -> Result<Option<(i64, i64, i64)>, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.job_events(job_id),
            EventLog::Postgres(s) => Ok(s.job_events(job_id)?),
        }
    }

    /// Moves the events with `seq <= upto` to the archive (blocking). The SQLite store only:
    /// a PostgreSQL log shared by replicas keeps every event in the database (its size is
    /// the database's to manage), so there it moves nothing.
    pub fn compact(&self, upto: i64) -> Result<CompactionReport, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.compact(upto),
            EventLog::Postgres(_) => Ok(CompactionReport::default()),
        }
    }

    /// Starts applying what other replicas append (PostgreSQL; nothing to do on SQLite).
    pub fn follow(&self) -> Result<(), StoreError> {
        match self {
            EventLog::Sqlite(_) => Ok(()),
            EventLog::Postgres(s) => Ok(s.follow()?),
        }
    }

    /// Stores `events` durably (all or none); returns their sequence numbers once committed.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<i64>, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.append(events).await,
            EventLog::Postgres(s) => Ok(s.append(events).await?),
        }
    }

    /// Up to `limit` events with `seq > after`, in order (blocking).
    pub fn read_after(&self, after: i64, limit: i64) -> Result<Vec<StoredEvent>, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.read_after(after, limit),
            EventLog::Postgres(s) => Ok(s.read_after(after, limit)?),
        }
    }

    /// Every stored prediction record (blocking).
    pub fn read_predictions(&self) -> Result<Vec<PredictionRecord>, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.read_predictions(),
            EventLog::Postgres(s) => Ok(s.read_predictions()?),
        }
    }

    /// Number of events stored (blocking).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn count(&self) -> Result<i64, StoreError> {
        match self {
            EventLog::Sqlite(s) => s.count(),
            EventLog::Postgres(s) => Ok(s.count()?),
        }
    }

    /// Waits (blocking, up to `limit`) until every event committed by any replica is applied
    /// here; always true on SQLite, where the one writer applies before acknowledging.
    pub fn wait_applied(&self, limit: Duration) -> Result<bool, StoreError> {
        match self {
            EventLog::Sqlite(_) => Ok(true),
            EventLog::Postgres(s) => Ok(s.wait_applied(limit)?),
        }
    }

    /// Readiness of the log itself (blocking): it must take a write transaction now (and the
    /// SQLite store's writer thread must be running).
    pub fn check_writable(&self) -> Result<(), LogNotWritable> {
        match self {
            EventLog::Sqlite(s) => Ok(s.check_writable()?),
            EventLog::Postgres(s) => s.check_writable().map_err(LogNotWritable::Postgres),
        }
    }

    /// Stops the writer after the requests already queued (at shutdown).
    pub fn close(self) {
        match self {
            EventLog::Sqlite(s) => s.close(),
            EventLog::Postgres(s) => s.close(),
        }
    }
}

impl std::fmt::Display for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventLog::Sqlite(s) => write!(f, "{}", s.path().display()),
            EventLog::Postgres(s) => f.write_str(s.url()),
        }
    }
}
