//! The durable event store: an embedded SQLite database (`<data_dir>/events.sqlite`) in WAL
//! mode with `synchronous = FULL`.
//!
//! **Durability.** An event is acknowledged only after the transaction holding it has
//! committed, and with `synchronous = FULL` SQLite syncs the write-ahead log to disk at every
//! commit, so an acknowledged event survives a crash of the process (`kill -9`) *and* of the
//! machine (power loss). `synchronous = NORMAL` in WAL mode would also survive `kill -9`
//! (committed pages are in the OS page cache) but may lose the last commits on power loss; we
//! keep FULL and win the throughput back with group commit.
//!
//! **Group commit.** One writer thread owns the write connection. Requests queue on a
//! channel; the writer takes every request waiting (up to [`GROUP_MAX`]), writes them in one
//! transaction, commits (one fsync for the group), hands the stored events to the
//! `on_commit` callback in sequence order (the service applies them to its online state
//! there, so memory follows the log's order), and then answers each request. A request's
//! events are stored together or not at all.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;
use tokio::sync::oneshot;

use super::events::Event;

/// Most requests written in one transaction.
pub const GROUP_MAX: usize = 512;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("event store {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("event store {path}: row seq {seq} holds an event that cannot be read: {reason}")]
    BadRow {
        path: PathBuf,
        seq: i64,
        reason: String,
    },
    #[error("the event store's writer has stopped")]
    Closed,
}

/// An event as stored: its sequence number (1, 2, ... in commit order) and when it was
/// received (Unix seconds).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoredEvent {
    pub seq: i64,
    pub received_at: f64,
    pub event: Event,
}

type Reply = oneshot::Sender<Result<Vec<i64>, String>>;

struct WriteRequest {
    events: Vec<Event>,
    reply: Reply,
}

/// Called by the writer with each committed group, in sequence order.
pub type OnCommit = Box<dyn FnMut(&[StoredEvent]) + Send>;

/// Handle to the store (cheap to clone).
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    tx: mpsc::Sender<WriteRequest>,
    reader: Arc<Mutex<Connection>>,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(err)?;
    Ok(conn)
}

impl Store {
    /// Opens (creating if needed) the store at `path`; returns the store and every event
    /// already in it, in sequence order. `on_commit` sees each group the writer commits
    /// from now on.
    pub fn open(path: &Path, on_commit: OnCommit) -> Result<(Store, Vec<StoredEvent>), StoreError> {
        let err = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Sqlite {
                path: path.to_path_buf(),
                source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
            })?;
        }
        let conn = open_conn(path)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                received_at REAL NOT NULL,
                kind TEXT NOT NULL,
                job_id TEXT,
                body TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS events_job ON events(job_id);",
        )
        .map_err(err)?;
        let reader = open_conn(path)?;
        let store_path = path.to_path_buf();
        let existing = read_after(&reader, &store_path, 0, i64::MAX)?;
        let (tx, rx) = mpsc::channel::<WriteRequest>();
        let wpath = store_path.clone();
        let handle = std::thread::Builder::new()
            .name("augur-store-writer".into())
            .spawn(move || writer_loop(conn, wpath, rx, on_commit))
            .map_err(|e| StoreError::Sqlite {
                path: store_path.clone(),
                source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
            })?;
        Ok((
            Store {
                path: store_path,
                tx,
                reader: Arc::new(Mutex::new(reader)),
                writer: Arc::new(Mutex::new(Some(handle))),
            },
            existing,
        ))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `events` durably (all or none); returns their sequence numbers once committed.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<i64>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(WriteRequest { events, reply })
            .map_err(|_| StoreError::Closed)?;
        match rx.await {
            Ok(Ok(seqs)) => Ok(seqs),
            Ok(Err(reason)) => Err(StoreError::Sqlite {
                path: self.path.clone(),
                source: rusqlite::Error::ToSqlConversionFailure(reason.into()),
            }),
            Err(_) => Err(StoreError::Closed),
        }
    }

    /// Up to `limit` events with `seq > after`, in order (a blocking read; call from a
    /// blocking context).
    pub fn read_after(&self, after: i64, limit: i64) -> Result<Vec<StoredEvent>, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        read_after(&conn, &self.path, after, limit)
    }

    /// Number of events stored.
    pub fn count(&self) -> Result<i64, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .map_err(|source| StoreError::Sqlite {
                path: self.path.clone(),
                source,
            })
    }

    /// Stops the writer after the requests already queued (call when every other handle
    /// is about to be dropped, e.g. at shutdown).
    pub fn close(self) {
        let Store { tx, writer, .. } = self;
        drop(tx);
        let handle = writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        // other clones may still hold senders; the writer ends when the last one goes
        if let Some(h) = handle {
            if Arc::strong_count(&writer) == 1 {
                let _ = h.join();
            }
        }
    }
}

fn read_after(
    conn: &Connection,
    path: &Path,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let err = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, received_at, body FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )
        .map_err(err)?;
    let rows = stmt
        .query_map(params![after, limit], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, f64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, received_at, body) = row.map_err(err)?;
        let event: Event = serde_json::from_str(&body).map_err(|e| StoreError::BadRow {
            path: path.to_path_buf(),
            seq,
            reason: e.to_string(),
        })?;
        out.push(StoredEvent {
            seq,
            received_at,
            event,
        });
    }
    Ok(out)
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn writer_loop(
    mut conn: Connection,
    path: PathBuf,
    rx: mpsc::Receiver<WriteRequest>,
    mut on_commit: OnCommit,
) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < GROUP_MAX {
            match rx.try_recv() {
                Ok(r) => group.push(r),
                Err(_) => break,
            }
        }
        let received_at = now_unix();
        let result = write_group(&mut conn, &group, received_at);
        match result {
            Ok(seqs) => {
                let mut stored = Vec::new();
                for (req, s) in group.iter().zip(&seqs) {
                    for (ev, &seq) in req.events.iter().zip(s) {
                        stored.push(StoredEvent {
                            seq,
                            received_at,
                            event: ev.clone(),
                        });
                    }
                }
                on_commit(&stored);
                for (req, s) in group.into_iter().zip(seqs) {
                    let _ = req.reply.send(Ok(s));
                }
            }
            Err(e) => {
                tracing::error!(store = %path.display(), error = %e, "event store commit failed; events not acknowledged");
                for req in group {
                    let _ = req.reply.send(Err(e.to_string()));
                }
            }
        }
    }
    tracing::debug!(store = %path.display(), "event store writer stopped");
}

fn write_group(
    conn: &mut Connection,
    group: &[WriteRequest],
    received_at: f64,
) -> Result<Vec<Vec<i64>>, rusqlite::Error> {
    let tx = conn.transaction()?;
    let mut all = Vec::with_capacity(group.len());
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO events (received_at, kind, job_id, body) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for req in group {
            let mut seqs = Vec::with_capacity(req.events.len());
            for ev in &req.events {
                let body = serde_json::to_string(ev)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                stmt.execute(params![received_at, ev.kind(), ev.job_id(), body])?;
                seqs.push(tx.last_insert_rowid());
            }
            all.push(seqs);
        }
    }
    tx.commit()?;
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(id: &str, at: f64) -> Event {
        Event::JobStarted {
            job_id: id.into(),
            at,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_are_durable_ordered_and_replayed_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let (store, existing) = Store::open(
            &path,
            Box::new(move |evs| s2.lock().unwrap().extend(evs.iter().map(|e| e.seq))),
        )
        .unwrap();
        assert!(existing.is_empty());
        let mut tasks = Vec::new();
        for i in 0..20 {
            let st = store.clone();
            tasks.push(tokio::spawn(async move {
                st.append(vec![
                    started(&format!("a{i}"), 1.0),
                    started(&format!("b{i}"), 2.0),
                ])
                .await
                .unwrap()
            }));
        }
        let mut acked = Vec::new();
        for t in tasks {
            let seqs = t.await.unwrap();
            assert_eq!(seqs.len(), 2);
            assert_eq!(seqs[1], seqs[0] + 1, "a request's events are contiguous");
            acked.extend(seqs);
        }
        acked.sort();
        assert_eq!(acked, (1..=40).collect::<Vec<i64>>());
        // the callback saw every committed event, in sequence order
        assert_eq!(*seen.lock().unwrap(), (1..=40).collect::<Vec<i64>>());
        assert_eq!(store.count().unwrap(), 40);
        store.close();
        let (store, existing) = Store::open(&path, Box::new(|_| {})).unwrap();
        assert_eq!(existing.len(), 40);
        assert_eq!(existing[3].seq, 4);
        let more = store.append(vec![started("c", 3.0)]).await.unwrap();
        assert_eq!(more, vec![41]);
        assert_eq!(store.read_after(39, 10).unwrap().len(), 2);
    }
}
