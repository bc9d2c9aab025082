//! Readiness of the SQLite event log: whether the database takes a real write transaction
//! now, through its own short-lived connection (not just whether its folder takes a file),
//! and whether the store's writer thread is still running. A database another process
//! holds locked, a file that turned read-only or a dead writer all fail ingest, so they fail
//! readiness too, naming why.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How long the probe waits for the write lock before calling the log not writable: well
/// under a readiness probe's timeout, and a group commit takes milliseconds.
pub const PROBE_LOCK_WAIT: Duration = Duration::from_secs(2);

/// Writes and commits one row of `readyz_probe` in the database at `path`.
pub fn write_probe(path: &Path) -> Result<(), rusqlite::Error> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(PROBE_LOCK_WAIT)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         CREATE TABLE IF NOT EXISTS readyz_probe (id INTEGER PRIMARY KEY, at REAL NOT NULL);
         INSERT OR REPLACE INTO readyz_probe (id, at) VALUES (1, unixepoch('subsec'));
         COMMIT;",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::state::store::Store;

    #[test]
    fn a_database_locked_by_another_writer_is_not_writable_and_is_again_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let (store, _) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        assert_eq!(store.check_writable(), Ok(()));
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE;").unwrap();
        let err = store.check_writable().unwrap_err();
        assert!(err.to_string().contains("locked"), "{err}");
        other.execute_batch("COMMIT;").unwrap();
        assert_eq!(store.check_writable(), Ok(()));
        store.close();
    }
}
