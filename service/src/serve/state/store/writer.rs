//! The store's writer thread: group commit. It takes every request waiting (up to
//! [`GROUP_MAX`]), writes them in one transaction, has the hooks apply them before the
//! commit ([`GroupHooks::apply`]), commits, records the high-water mark, tells the hooks
//! ([`GroupHooks::committed`]) and answers each request; a commit that fails after the hooks
//! applied its group is retried until it succeeds (see the module docs of [`super`]).

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};

use rusqlite::{params, Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::error::WriteFailure;
use super::integrity::{self, HighWater};
use super::{now_unix, GroupHooks, PredictionRecord, StoredEvent, GROUP_MAX};
use crate::serve::state::events::Event;

type Reply = oneshot::Sender<Result<Vec<i64>, WriteFailure>>;

pub(super) struct WriteRequest {
    pub(super) events: Vec<Event>,
    pub(super) reply: Reply,
}

/// The next commit group: the first request to arrive and every one waiting behind it, up
/// to [`GROUP_MAX`]; `None` once every sender is gone.
pub(super) fn next_group<T>(rx: &mpsc::Receiver<T>) -> Option<Vec<T>> {
    let mut group = vec![rx.recv().ok()?];
    while group.len() < GROUP_MAX {
        match rx.try_recv() {
            Ok(r) => group.push(r),
            Err(_) => break,
        }
    }
    Some(group)
}

/// The writer thread's side of the store.
pub(super) struct Writer {
    pub(super) path: PathBuf,
    pub(super) rx: mpsc::Receiver<WriteRequest>,
    pub(super) hooks: Box<dyn GroupHooks>,
    pub(super) high_water: HighWater,
    pub(super) stall: Arc<Mutex<Option<WriteFailure>>>,
    pub(super) closing: Arc<std::sync::atomic::AtomicBool>,
}

/// First and longest wait between two attempts at a stalled commit.
const STALL_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const STALL_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

impl Writer {
    pub(super) fn run(mut self, mut conn: Connection) {
        while let Some(group) = next_group(&self.rx) {
            let received_at = now_unix();
            match write_group(&mut conn, &group, received_at, &mut *self.hooks) {
                Ok((stored, seqs)) => self.acknowledge(group, &stored, seqs),
                Err(GroupError::Unapplied(e)) => {
                    tracing::error!(store = %self.path.display(), error = %e, "event store commit failed; events not acknowledged");
                    let failure = WriteFailure::of(Arc::new(e));
                    for req in group {
                        let _ = req.reply.send(Err(failure.clone()));
                    }
                }
                Err(GroupError::Applied(applied)) => {
                    let AppliedGroup {
                        error,
                        stored,
                        records,
                        seqs,
                    } = *applied;
                    let error = Arc::new(error);
                    tracing::error!(store = %self.path.display(), error = %error, "event store commit failed after the service applied the group: new events are refused and the commit is retried until it succeeds");
                    if self.retry(&mut conn, &error, &stored, &records) {
                        tracing::warn!(store = %self.path.display(), "the stalled commit succeeded: ingest resumes");
                        self.acknowledge(group, &stored, seqs);
                    } else {
                        tracing::error!(store = %self.path.display(), "the store closed before the stalled commit succeeded: its events are not acknowledged, and the next start rebuilds the state from the log");
                        for req in group {
                            let _ = req.reply.send(Err(WriteFailure::of(error.clone())));
                        }
                        break;
                    }
                }
            }
        }
        tracing::debug!(store = %self.path.display(), "event store writer stopped");
    }

    /// Records the high-water mark of the committed group (`stored`), tells the hooks, then
    /// answers each request with its sequence numbers.
    fn acknowledge(
        &mut self,
        group: Vec<WriteRequest>,
        stored: &[StoredEvent],
        seqs: Vec<Vec<i64>>,
    ) {
        // the mark goes to disk before any reply: what is acknowledged is below it
        let last = seqs.iter().flatten().copied().max().unwrap_or(0);
        if let Err(e) = self.high_water.record(last) {
            tracing::error!(store = %self.path.display(), error = %e, "could not sync the high-water mark; events are committed, but losing them later would go unnoticed");
        }
        self.hooks.committed(stored);
        for (req, s) in group.into_iter().zip(seqs) {
            let _ = req.reply.send(Ok(s));
        }
    }

    /// Retries writing an applied group (`stored`, `records`) until it commits (true) or
    /// the store closes (false); meanwhile every request waiting is refused at once.
    fn retry(
        &mut self,
        conn: &mut Connection,
        first: &Arc<rusqlite::Error>,
        stored: &[StoredEvent],
        records: &[PredictionRecord],
    ) -> bool {
        let set = |f: Option<WriteFailure>| {
            *self.stall.lock().unwrap_or_else(|e| e.into_inner()) = f;
        };
        set(Some(WriteFailure::stalled(first.clone())));
        let mut wait = STALL_RETRY_FIRST;
        let committed = loop {
            loop {
                match self.rx.try_recv() {
                    Ok(req) => {
                        let current = self.stall.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        let _ = req.reply.send(Err(
                            current.unwrap_or_else(|| WriteFailure::stalled(first.clone()))
                        ));
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.closing
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        break;
                    }
                }
            }
            if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                break false;
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(STALL_RETRY_MAX);
            match rewrite_group(conn, stored, records) {
                Ok(()) => break true,
                Err(e) => set(Some(WriteFailure::stalled(Arc::new(e)))),
            }
        };
        set(None);
        committed
    }
}

/// Why a group was not committed: before the hooks applied it (nothing changed), or after
/// (the service's state holds events the log does not: what it must still commit).
enum GroupError {
    Unapplied(rusqlite::Error),
    Applied(Box<AppliedGroup>),
}

/// A group the service applied whose commit failed: what is still to be committed.
struct AppliedGroup {
    error: rusqlite::Error,
    stored: Vec<StoredEvent>,
    records: Vec<PredictionRecord>,
    seqs: Vec<Vec<i64>>,
}

/// Writes a group's events, has the hooks apply them and writes the prediction records
/// they return, all in one transaction; returns the stored events and each request's
/// sequence numbers once committed.
fn write_group(
    conn: &mut Connection,
    group: &[WriteRequest],
    received_at: f64,
    hooks: &mut dyn GroupHooks,
) -> Result<(Vec<StoredEvent>, Vec<Vec<i64>>), GroupError> {
    // IMMEDIATE: the group reads the next sequence number, then writes; begun deferred, a
    // compaction committing in between made the write fail at once ("database is locked",
    // no busy wait: the read snapshot is stale), and the batch was refused
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(GroupError::Unapplied)?;
    let seqs = insert_events(&tx, group, received_at).map_err(GroupError::Unapplied)?;
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
    let records = hooks.apply(&stored);
    if let Err(error) = insert_predictions(&tx, &records).and_then(|()| tx.commit()) {
        return Err(GroupError::Applied(Box::new(AppliedGroup {
            error,
            stored,
            records,
            seqs,
        })));
    }
    Ok((stored, seqs))
}

/// Writes an applied group again, under the sequence numbers it was given, with its
/// prediction records, in one transaction (after rolling back whatever the failed attempt
/// left open).
fn rewrite_group(
    conn: &mut Connection,
    stored: &[StoredEvent],
    records: &[PredictionRecord],
) -> Result<(), rusqlite::Error> {
    if !conn.is_autocommit() {
        conn.execute_batch("ROLLBACK")?;
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut stmt = tx.prepare_cached(INSERT_ROW)?;
        for e in stored {
            insert_row(&mut stmt, e.seq, e.received_at, &e.event)?;
        }
    }
    insert_predictions(&tx, records)?;
    tx.commit()
}

fn insert_predictions(
    tx: &rusqlite::Transaction<'_>,
    records: &[PredictionRecord],
) -> Result<(), rusqlite::Error> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR IGNORE INTO predictions (submit_seq, job_id, body) VALUES (?1, ?2, ?3)",
    )?;
    for r in records {
        stmt.execute(params![r.submit_seq, r.job_id, r.body])?;
    }
    Ok(())
}

/// The next sequence number `AUTOINCREMENT` would hand out (the writer numbers its rows
/// itself, as each row's checksum covers its number).
fn next_seq(tx: &rusqlite::Transaction<'_>) -> Result<i64, rusqlite::Error> {
    let sequence: i64 = tx.query_row(
        "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)",
        [],
        |r| r.get(0),
    )?;
    let max: i64 = tx.query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))?;
    Ok(sequence.max(max) + 1)
}

/// Inserts one row numbered `seq`, with its checksum.
fn insert_row(
    stmt: &mut rusqlite::CachedStatement<'_>,
    seq: i64,
    received_at: f64,
    ev: &Event,
) -> Result<(), rusqlite::Error> {
    let body = serde_json::to_string(ev)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let sum = integrity::row_sum(seq, received_at, ev.kind(), ev.job_id(), &body);
    stmt.execute(params![seq, received_at, ev.kind(), ev.job_id(), body, sum])?;
    Ok(())
}

const INSERT_ROW: &str =
    "INSERT INTO events (seq, received_at, kind, job_id, body, sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

fn insert_events(
    tx: &rusqlite::Transaction<'_>,
    group: &[WriteRequest],
    received_at: f64,
) -> Result<Vec<Vec<i64>>, rusqlite::Error> {
    let mut all = Vec::with_capacity(group.len());
    let mut next = next_seq(tx)?;
    let mut stmt = tx.prepare_cached(INSERT_ROW)?;
    for req in group {
        let mut seqs = Vec::with_capacity(req.events.len());
        for ev in &req.events {
            insert_row(&mut stmt, next, received_at, ev)?;
            seqs.push(next);
            next += 1;
        }
        all.push(seqs);
    }
    Ok(all)
}
