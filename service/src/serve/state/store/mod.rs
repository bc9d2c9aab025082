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
//! transaction, hands the stored events to [`GroupHooks::apply`] in sequence order (the
//! service applies them to its online state there, so memory follows the log's order),
//! commits (one fsync for the group), tells [`GroupHooks::committed`], and then answers each
//! request. A request's events are stored together or not at all. The service's side of
//! these steps is [`crate::serve::state::ingest`].
//!
//! **Predictions at submit.** What the served predictors answered when a job was submitted
//! is a record, not a value recomputed later: [`GroupHooks::apply`] returns the answers
//! issued for the group's submits ([`PredictionRecord`], keyed by the submit's sequence
//! number) and the writer stores them in the `predictions` table in the group's own
//! transaction, so a submit and its answers are committed together or not at all (a crash
//! never leaves a submit whose answers would be issued again by a later model). `apply`
//! therefore runs after the group's events are written and before their commit. Should
//! that commit then fail (a full disk), the online state is ahead of the log: the writer
//! retries that group, with the same sequence numbers and records, until it commits (its
//! requests wait for it), and meanwhile refuses every new append at once
//! ([`WriteFailure::Stalled`]); so once there is space again ingest resumes by itself, with
//! memory and log agreeing. The writer is [`writer`]; what it calls, [`hooks`].
//!
//! **Integrity** ([`integrity`]): the highest acknowledged sequence number is kept durably
//! beside the database; a log that lost acknowledged events, holds unreadable rows or fails
//! SQLite's check after an unclean stop is refused at open with the reason, and
//! `augur store repair` keeps every intact event and records what was lost. Sequence numbers
//! are never reused.
//!
//! **Compaction** ([`compaction`], [`archive`]): the oldest events move to checksummed
//! archive segments under `<data_dir>/archive/`; reads go through the archive, then the
//! database, so the log reads the same before and after. Ranges recorded as lost are
//! [`losses`]; the errors, [`error`]; the shared PostgreSQL log with the same promises,
//! [`postgres`], and the one handle over both, [`EventLog`].

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Serialize;
use tokio::sync::oneshot;

use super::events::Event;

pub mod archive;
pub mod compaction;
mod error;
pub mod event_log;
pub mod hooks;
pub mod integrity;
pub mod losses;
pub mod postgres;
mod probe;
mod writer;

pub use error::{NotWritable, StoreError, WriteFailure};
pub use event_log::EventLog;
pub use hooks::{ApplyGroup, GroupHooks};
use writer::{WriteRequest, Writer};

use integrity::{HighWater, IntegrityReport, MarkState, RepairReport};

/// Most requests written in one transaction.
pub const GROUP_MAX: usize = 512;

/// The marker of a clean shutdown beside the database: present, the start skips SQLite's
/// structural check.
fn clean_marker(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}.clean", db.display()))
}

/// Creates the store's tables (idempotent).
fn create_schema(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            received_at REAL NOT NULL,
            kind TEXT NOT NULL,
            job_id TEXT,
            body TEXT NOT NULL,
            sum TEXT
        );
        CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
        CREATE TABLE IF NOT EXISTS predictions (
            submit_seq INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL,
            body TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS losses (
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            reason TEXT NOT NULL,
            recorded_at REAL NOT NULL
        );",
    )
}

/// Checks one stored event body.
fn parse_body(body: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Event>(body).map(|_| ())
}

/// Verifies the store at `path` without changing it (SQLite's structural check, every row
/// readable, no acknowledged sequence number missing): `augur store check`. `witnessed` is
/// the highest sequence number another record shows was acknowledged (the snapshot of the
/// online state; 0 for none): numbers up to it missing from the log are missing events.
pub fn check(path: &Path, witnessed: i64) -> Result<IntegrityReport, StoreError> {
    let archived = archive::read_manifest(&archive::dir_of(path))
        .map_or(0, |m| m.segments.last().map_or(0, |s| s.last_seq));
    let mut report = integrity::verify(path, true, &parse_body)?;
    let upto = report
        .high_water
        .unwrap_or(0)
        .max(report.max_seq)
        .max(archived);
    if witnessed > upto {
        report.missing.extend(losses::unrecorded(
            upto + 1,
            witnessed,
            &report.recorded_losses,
        ));
        report.witnessed = Some(witnessed);
    }
    report.missing = archive::outside(&report.missing, archived);
    let db_min = min_seq(path);
    report.archive = Some(archive::verify(
        &archive::dir_of(path),
        db_min,
        &report.recorded_losses,
    ));
    Ok(report)
}

/// The lowest sequence number in the database (0 when it holds none or cannot be read).
fn min_seq(path: &Path) -> i64 {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row("SELECT coalesce(min(seq), 0) FROM events", [], |r| r.get(0)))
        .unwrap_or(0)
}

/// Repairs the store at `path` (which must not be open): `augur store repair`; `witnessed`
/// as in [`check`] (the numbers up to it missing from the log are recorded as lost too).
pub fn repair(path: &Path, witnessed: i64) -> Result<RepairReport, StoreError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // unreadable archive segments first: their ranges are recorded as lost with the rest
    let dir = archive::dir_of(path);
    let archive_lost = archive::repair(&dir, stamp)?;
    let archived = archive::read_manifest(&dir)?
        .segments
        .last()
        .map_or(0, |s| s.last_seq);
    integrity::repair(
        path,
        &parse_body,
        &create_schema,
        integrity::RepairInputs {
            archived_upto: archived,
            witnessed,
            archive_lost,
        },
    )
}

/// Refuses a store that lost acknowledged events or is damaged; returns the sequence number
/// below which none may be handed out again.
fn verify_at_open(path: &Path, archived: i64) -> Result<i64, StoreError> {
    let marker = clean_marker(path);
    let clean = marker.exists();
    if clean {
        std::fs::remove_file(&marker).map_err(|e| StoreError::io(&marker, e))?;
    }
    if !path.exists() {
        return Ok(match integrity::read_mark(path)? {
            // the database is gone but the mark says events were acknowledged
            MarkState::At(v) if v > archived => {
                let report = integrity::verify(path, false, &|_| Ok(()))?;
                return Err(StoreError::Damaged(Box::new(IntegrityReport {
                    missing: archive::outside(&[(1, v)], archived),
                    ..report
                })));
            }
            // never below the archive: its numbers are taken
            MarkState::At(v) => v.max(archived),
            _ => archived,
        });
    }
    // rows are parsed when they are read right after; here only their numbers are checked
    let mut report = integrity::verify(path, !clean, &|_| Ok(()))?;
    report.missing = archive::outside(&report.missing, archived);
    if !report.is_sound() {
        return Err(StoreError::Damaged(Box::new(report)));
    }
    if report.high_water.is_none() && report.events > 0 {
        tracing::warn!(store = %path.display(), events = report.events,
            "the event store has no high-water mark (written by an older version, or the mark was deleted): lost events cannot be detected for this start; the mark is recreated from the log");
    }
    let lost_max = report
        .recorded_losses
        .iter()
        .map(|l| l.last_seq)
        .max()
        .unwrap_or(0);
    Ok(report
        .high_water
        .unwrap_or(0)
        .max(report.max_seq)
        .max(lost_max)
        .max(archived))
}

/// An event as stored: its sequence number (1, 2, ... in commit order) and when it was
/// received (Unix seconds).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoredEvent {
    pub seq: i64,
    pub received_at: f64,
    pub event: Event,
}

/// The answers issued at a job's submit, stored with it: the submit event's sequence
/// number, the job and the answers as JSON (their shape belongs to the online state).
#[derive(Debug, Clone, PartialEq)]
pub struct PredictionRecord {
    pub submit_seq: i64,
    pub job_id: String,
    pub body: String,
}

/// Handle to the store (cheap to clone).
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    tx: mpsc::Sender<WriteRequest>,
    reader: Arc<Mutex<Connection>>,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// The events compacted out of the database (read lock: a read; write lock: a
    /// compaction step moving rows).
    archive: Arc<RwLock<archive::Archive>>,
    /// What the writer says while it retries a failed commit ([`WriteFailure::Stalled`]).
    stall: Arc<Mutex<Option<WriteFailure>>>,
    /// Set when the store closes: a writer retrying a commit gives up.
    closing: Arc<std::sync::atomic::AtomicBool>,
    /// The sequence number below which none is handed out (the mark, the log, the recorded
    /// losses and the archive, at open).
    floor: i64,
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
    /// already in it, in sequence order. `apply` sees each group the writer commits from
    /// now on (before its commit: [`GroupHooks::apply`]).
    pub fn open(path: &Path, apply: ApplyGroup) -> Result<(Store, Vec<StoredEvent>), StoreError> {
        let hooks = hooks::Closures {
            apply,
            use_records: None,
        };
        let store = Store::open_unread(path, Box::new(hooks))?;
        let existing = store.read_after(0, i64::MAX)?;
        Ok((store, existing))
    }

    /// [`Store::open`] without reading the stored events (replay them page by page with
    /// [`Store::read_after`]).
    pub fn open_unread(path: &Path, hooks: Box<dyn GroupHooks>) -> Result<Store, StoreError> {
        let err = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        }
        let archive = archive::Archive::open(&archive::dir_of(path))?;
        let floor = verify_at_open(path, archive.last_seq())?;
        let mut conn = open_conn(path)?;
        create_schema(&conn).map_err(err)?;
        let summed = integrity::add_row_sums(&mut conn).map_err(err)?;
        if summed > 0 {
            tracing::info!(store = %path.display(), rows = summed, "rows written before row checksums were given one");
        }
        raise_sequence(&conn, floor).map_err(err)?;
        let high_water = HighWater::open(path, floor)?;
        let reader = open_conn(path)?;
        let store_path = path.to_path_buf();
        let (tx, rx) = mpsc::channel::<WriteRequest>();
        let wpath = store_path.clone();
        let stall = Arc::new(Mutex::new(None));
        let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = Writer {
            path: wpath,
            rx,
            hooks,
            high_water,
            stall: stall.clone(),
            closing: closing.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("augur-store-writer".into())
            .spawn(move || writer.run(conn))
            .map_err(|e| StoreError::io(&store_path, e))?;
        Ok(Store {
            path: store_path,
            tx,
            reader: Arc::new(Mutex::new(reader)),
            writer: Arc::new(Mutex::new(Some(handle))),
            archive: Arc::new(RwLock::new(archive)),
            stall,
            closing,
            floor,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `events` durably (all or none); returns their sequence numbers once committed.
    /// Refused at once while the writer retries a failed commit.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<i64>, StoreError> {
        let write_error = |failure| StoreError::Write {
            path: self.path.clone(),
            failure,
        };
        if let Some(stalled) = self.stalled() {
            return Err(write_error(stalled));
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(WriteRequest { events, reply })
            .map_err(|_| StoreError::Closed)?;
        match rx.await {
            Ok(Ok(seqs)) => Ok(seqs),
            Ok(Err(failure)) => Err(write_error(failure)),
            Err(_) => Err(StoreError::Closed),
        }
    }

    /// Why the writer takes no events now, while it retries a failed commit.
    pub fn stalled(&self) -> Option<WriteFailure> {
        self.stall.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Up to `limit` events with `seq > after`, in order (a blocking read; call from a
    /// blocking context).
    pub fn read_after(&self, after: i64, limit: i64) -> Result<Vec<StoredEvent>, StoreError> {
        // held across both reads: a compaction step cannot move rows in between
        let archive = self.archive.read().unwrap_or_else(|e| e.into_inner());
        let mut out = archive.read_after(after, usize::try_from(limit).unwrap_or(usize::MAX))?;
        let rest = limit - out.len() as i64;
        if rest > 0 {
            let after = out.last().map_or(after, |e| e.seq).max(archive.last_seq());
            let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
            out.extend(read_after(&conn, &self.path, after, rest)?);
        }
        Ok(out)
    }

    /// Every stored prediction record, by submit sequence number (a blocking read).
    pub fn read_predictions(&self) -> Result<Vec<PredictionRecord>, StoreError> {
        self.read_predictions_between(i64::MIN, i64::MAX)
    }

    /// The prediction records of the submits with `first <= seq <= last` (a blocking read:
    /// a replay reads them page by page with the events).
    pub fn read_predictions_between(
        &self,
        first: i64,
        last: i64,
    ) -> Result<Vec<PredictionRecord>, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let err = |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let mut stmt = conn
            .prepare_cached(
                "SELECT submit_seq, job_id, body FROM predictions WHERE submit_seq BETWEEN ?1 AND ?2 ORDER BY submit_seq",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map(params![first, last], |r| {
                Ok(PredictionRecord {
                    submit_seq: r.get(0)?,
                    job_id: r.get(1)?,
                    body: r.get(2)?,
                })
            })
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    /// The first and last sequence numbers and the count of the events of `job_id` still in
    /// the database (`None` when it holds none; archived events are not counted). Blocking.
    pub fn job_events(&self, job_id: &str) -> Result<Option<(i64, i64, i64)>, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row(
            "SELECT min(seq), max(seq), count(*) FROM events WHERE job_id = ?1",
            params![job_id],
            |r| {
                Ok((
                    r.get::<_, Option<i64>>(0)?,
                    r.get::<_, Option<i64>>(1)?,
                    r.get(2)?,
                ))
            },
        )
        .map(|(a, b, n)| a.zip(b).map(|(a, b)| (a, b, n)))
        .map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// The highest sequence number stored or archived, as far as a quick look tells (for
    /// progress reports only).
    pub fn last_seq_hint(&self) -> i64 {
        let archived = self.archived_upto();
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))
            .unwrap_or(0)
            .max(archived)
    }

    /// The highest sequence number acknowledged, recorded as lost or archived: every
    /// number up to it is taken (it was at open or has been handed out since).
    pub fn numbered_upto(&self) -> i64 {
        self.last_seq_hint().max(self.floor)
    }

    /// Number of events stored.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn count(&self) -> Result<i64, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        conn.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .map_err(|source| StoreError::Sqlite {
                path: self.path.clone(),
                source,
            })
    }

    /// Whether ingest can commit now (blocking): the writer thread runs and the database
    /// takes a write transaction ([`probe`]); the reason otherwise.
    pub fn check_writable(&self) -> Result<(), NotWritable> {
        let stopped = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(JoinHandle::is_finished);
        if stopped {
            return Err(NotWritable::WriterStopped);
        }
        if let Some(stalled) = self.stalled() {
            return Err(NotWritable::Stalled(stalled));
        }
        probe::write_probe(&self.path).map_err(|source| NotWritable::Database {
            path: self.path.clone(),
            source,
        })
    }

    /// Stops the writer after the requests already queued (call when every other handle
    /// is about to be dropped, e.g. at shutdown).
    pub fn close(self) {
        let Store {
            tx,
            writer,
            path,
            closing,
            ..
        } = self;
        closing.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(tx);
        let handle = writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        // other clones may still hold senders; the writer ends when the last one goes
        if let Some(h) = handle {
            if Arc::strong_count(&writer) == 1 && h.join().is_ok() {
                // every commit is in; the next start may skip the structural check
                let marker = clean_marker(&path);
                if let Err(e) = std::fs::write(&marker, b"clean\n") {
                    tracing::warn!(marker = %marker.display(), error = %e, "could not mark the store's clean shutdown");
                }
            }
        }
    }
}

/// Makes `AUTOINCREMENT` continue above `floor` (a truncated or repaired log must not hand
/// out an acknowledged number again).
fn raise_sequence(conn: &Connection, floor: i64) -> Result<(), rusqlite::Error> {
    let current: Option<i64> = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    match current {
        Some(c) if c >= floor => {}
        Some(_) => {
            conn.execute(
                "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'events'",
                params![floor],
            )?;
        }
        None if floor > 0 => {
            conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?1)",
                params![floor],
            )?;
        }
        None => {}
    }
    Ok(())
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
            "SELECT seq, received_at, kind, job_id, body, sum FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )
        .map_err(err)?;
    let rows = stmt
        .query_map(params![after, limit], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, f64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, received_at, kind, job_id, body, sum) = row.map_err(err)?;
        let bad = |reason: String| StoreError::BadRow {
            path: path.to_path_buf(),
            seq,
            reason,
        };
        if let Some(why) = integrity::sum_mismatch(
            seq,
            received_at,
            &kind,
            job_id.as_deref(),
            &body,
            sum.as_deref(),
        ) {
            return Err(bad(why));
        }
        let event = Event::from_stored(&body).map_err(|e| bad(e.to_string()))?;
        out.push(StoredEvent {
            seq,
            received_at,
            event,
        });
    }
    Ok(out)
}

pub(crate) fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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
            Box::new(move |evs| {
                s2.lock().unwrap().extend(evs.iter().map(|e| e.seq));
                Vec::new()
            }),
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
        let (store, existing) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        assert_eq!(existing.len(), 40);
        assert_eq!(existing[3].seq, 4);
        let more = store.append(vec![started("c", 3.0)]).await.unwrap();
        assert_eq!(more, vec![41]);
        assert_eq!(store.read_after(39, 10).unwrap().len(), 2);
    }
}

#[cfg(test)]
mod damage_tests;
