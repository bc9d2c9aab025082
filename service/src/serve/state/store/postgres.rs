//! The event store on PostgreSQL (`--store postgres://…`): one log shared by every replica of
//! the service, with the promises of the embedded SQLite store.
//!
//! **Acknowledged = committed.** A writer thread group-commits the queued requests in one
//! transaction and answers them only after `COMMIT` returned (PostgreSQL's own
//! `synchronous_commit` decides what a commit survives; its default survives a crash).
//!
//! **Sequence numbers** are handed out inside the append transaction from the one row of
//! `augur_sequence` (`UPDATE … SET last = last + n RETURNING last`). The row lock it takes is
//! held until the transaction ends, so appends from every replica assign *and commit* one after
//! the other: numbers are monotonic, never reused (the counter only grows, also across
//! restarts and rollbacks of nothing), and a reader tailing `seq > last` never sees a higher
//! number committed before a lower one. A rolled-back append returns its numbers with it, so
//! the committed log has no gaps.
//!
//! **Every replica applies the whole log in order.** One applier per process (under a lock)
//! hands the committed events after the last one applied to the hooks ([`GroupHooks`]: the
//! service's ingest pipeline), reading them back
//! from the log: the writer thread after each of its commits (before acknowledging, as on
//! SQLite), and a tail thread woken by `LISTEN augur_events` (every append sends a `NOTIFY` at
//! commit) or every [`TAIL_POLL`] as a fallback, for the events other replicas append. An event
//! is applied once, whichever thread reads it first.
//!
//! **Predictions at submit** are stored in `augur_predictions` by the replica that appended the
//! submit, after its commit and before it is acknowledged (the SQLite writer's semantics: a
//! crash between the two loses only those records). Before applying a tail, a replica loads the
//! records stored for it, so every replica keeps the answers the appending one issued.
//!
//! **Identity.** The database records the backend and cluster it belongs to (`augur_identity`);
//! a start with another one is refused, as a data folder's `identity.json` is.
//!
//! The client is the `postgres` crate: the synchronous face of `tokio-postgres` (the
//! rust-postgres project), chosen because the store's work runs on its own threads (the
//! writer, the tail) and in blocking sections, like the SQLite store's; it has no macros and
//! no offline query cache, and no TLS here (`sslmode=disable`: reach the server on a trusted
//! network or through a sidecar).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};
use tokio::sync::oneshot;

pub use super::error::PgStoreError;
use super::hooks::{Closures, GroupHooks, UseRecords};
use super::writer::next_group;
use super::{now_unix, ApplyGroup, PredictionRecord, StoredEvent};
use crate::serve::state::events::Event;

/// Longest wait of the tail thread between two reads when no notification arrives.
pub const TAIL_POLL: Duration = Duration::from_secs(1);
/// Events read back per query.
const PAGE: i64 = 10_000;
/// The channel of the append notifications.
const CHANNEL: &str = "augur_events";
/// Key of the advisory lock that serialises schema creation between replicas starting at once.
const SCHEMA_LOCK: i64 = 0x0061_7567_7572;

/// A connection string without its password, for messages and logs.
fn redact(cfg: &postgres::Config) -> String {
    let host = cfg
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(s) => s.clone(),
            #[cfg(unix)]
            postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        cfg.get_user().unwrap_or(""),
        cfg.get_dbname().unwrap_or("")
    )
}

/// A connection that is opened again after it broke.
struct Conn {
    cfg: postgres::Config,
    url: String,
    client: Option<Client>,
}

impl Conn {
    fn new(cfg: &postgres::Config, url: &str) -> Conn {
        Conn {
            cfg: cfg.clone(),
            url: url.to_string(),
            client: None,
        }
    }

    fn err(&self, source: postgres::Error) -> PgStoreError {
        PgStoreError::Postgres {
            url: self.url.clone(),
            source,
        }
    }

    /// Runs `f` on the connection (opening it when needed); a connection that broke is
    /// dropped so the next call opens a new one.
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Client, &str) -> Result<T, PgStoreError>,
    ) -> Result<T, PgStoreError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = Some(self.cfg.connect(NoTls).map_err(|e| self.err(e))?);
        }
        let Some(client) = self.client.as_mut() else {
            return Err(PgStoreError::NoConnection {
                url: self.url.clone(),
            });
        };
        let out = f(client, &self.url);
        if client.is_closed() {
            self.client = None;
        }
        out
    }
}

fn pg(url: &str) -> impl Fn(postgres::Error) -> PgStoreError + '_ {
    move |source| PgStoreError::Postgres {
        url: url.to_string(),
        source,
    }
}

/// Creates the tables (idempotent; replicas starting together take turns) and claims the
/// database for `backend` and `cluster`.
fn create_schema(
    client: &mut Client,
    url: &str,
    backend: &str,
    cluster: &str,
) -> Result<(), PgStoreError> {
    let e = pg(url);
    let mut tx = client.transaction().map_err(&e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(&e)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS augur_events (
            seq BIGINT PRIMARY KEY,
            received_at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            job_id TEXT,
            body TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS augur_events_job ON augur_events(job_id);
        CREATE TABLE IF NOT EXISTS augur_predictions (
            submit_seq BIGINT PRIMARY KEY,
            job_id TEXT NOT NULL,
            body TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS augur_sequence (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last BIGINT NOT NULL
        );
        INSERT INTO augur_sequence (id, last) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
        CREATE TABLE IF NOT EXISTS augur_identity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            backend TEXT NOT NULL,
            cluster TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE IF NOT EXISTS augur_readiness (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            at DOUBLE PRECISION NOT NULL
        );",
    )
    .map_err(&e)?;
    tx.execute(
        "INSERT INTO augur_identity (id, backend, cluster, created_at) VALUES (1, $1, $2, $3)
         ON CONFLICT (id) DO NOTHING",
        &[&backend, &cluster, &now_unix()],
    )
    .map_err(&e)?;
    let row = tx
        .query_one(
            "SELECT backend, cluster FROM augur_identity WHERE id = 1",
            &[],
        )
        .map_err(&e)?;
    let (found_backend, found_cluster): (String, String) = (row.get(0), row.get(1));
    if found_backend != backend || found_cluster != cluster {
        return Err(PgStoreError::IdentityMismatch {
            url: url.to_string(),
            found_backend,
            found_cluster,
            want_backend: backend.to_string(),
            want_cluster: cluster.to_string(),
        });
    }
    tx.commit().map_err(&e)
}

/// Refuses a log that lost acknowledged events or holds numbers above the counter; returns
/// the highest sequence number of a sound one.
fn verify(client: &mut Client, url: &str) -> Result<i64, PgStoreError> {
    let e = pg(url);
    let handed_out: i64 = client
        .query_one("SELECT last FROM augur_sequence WHERE id = 1", &[])
        .map_err(&e)?
        .get(0);
    let row = client
        .query_one(
            "SELECT count(*), coalesce(max(seq), 0) FROM augur_events",
            &[],
        )
        .map_err(&e)?;
    let (present, max_seq): (i64, i64) = (row.get(0), row.get(1));
    if present != handed_out || max_seq != handed_out {
        return Err(PgStoreError::Damaged {
            url: url.to_string(),
            handed_out,
            present,
            max_seq,
        });
    }
    Ok(max_seq)
}

fn read_after(
    client: &mut Client,
    url: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, PgStoreError> {
    let rows = client
        .query(
            "SELECT seq, received_at, body FROM augur_events WHERE seq > $1 ORDER BY seq LIMIT $2",
            &[&after, &limit],
        )
        .map_err(pg(url))?;
    rows.iter()
        .map(|r| {
            let seq: i64 = r.get(0);
            let body: &str = r.get(2);
            let event = Event::from_stored(body).map_err(|e| PgStoreError::BadRow {
                url: url.to_string(),
                seq,
                reason: e.to_string(),
            })?;
            Ok(StoredEvent {
                seq,
                received_at: r.get(1),
                event,
            })
        })
        .collect()
}

fn read_records(
    client: &mut Client,
    url: &str,
    after: i64,
    upto: i64,
) -> Result<Vec<PredictionRecord>, PgStoreError> {
    let rows = client
        .query(
            "SELECT submit_seq, job_id, body FROM augur_predictions
             WHERE submit_seq > $1 AND submit_seq <= $2 ORDER BY submit_seq",
            &[&after, &upto],
        )
        .map_err(pg(url))?;
    Ok(rows
        .iter()
        .map(|r| PredictionRecord {
            submit_seq: r.get(0),
            job_id: r.get(1),
            body: r.get(2),
        })
        .collect())
}

fn write_records(
    client: &mut Client,
    url: &str,
    records: &[PredictionRecord],
) -> Result<(), PgStoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i64> = records.iter().map(|r| r.submit_seq).collect();
    let jobs: Vec<&str> = records.iter().map(|r| r.job_id.as_str()).collect();
    let bodies: Vec<&str> = records.iter().map(|r| r.body.as_str()).collect();
    client
        .execute(
            "INSERT INTO augur_predictions (submit_seq, job_id, body)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
             ON CONFLICT (submit_seq) DO NOTHING",
            &[&seqs, &jobs, &bodies],
        )
        .map_err(pg(url))?;
    Ok(())
}

/// What this process has applied from the log, and who it hands events to.
struct Applier {
    applied: i64,
    hooks: Box<dyn GroupHooks>,
    /// Sequence ranges this process appended whose prediction records it still owes.
    own: Vec<(i64, i64)>,
}

impl Applier {
    /// Applies every committed event after the last one applied, in order, and stores the
    /// answers issued at the submits this process appended.
    fn catch_up(&mut self, client: &mut Client, url: &str) -> Result<(), PgStoreError> {
        loop {
            let page = read_after(client, url, self.applied, PAGE)?;
            let Some(last) = page.last().map(|e| e.seq) else {
                return Ok(());
            };
            let stored = read_records(client, url, self.applied, last)?;
            if !stored.is_empty() {
                self.hooks.use_records(&stored);
            }
            let issued = self.hooks.apply(&page);
            self.applied = last;
            let own = &self.own;
            let mine: Vec<PredictionRecord> = issued
                .into_iter()
                .filter(|r| own.iter().any(|&(a, b)| (a..=b).contains(&r.submit_seq)))
                .collect();
            if let Err(e) = write_records(client, url, &mine) {
                tracing::error!(error = %e, records = mine.len(), "storing the predictions issued at submit failed; they are issued again on the next replay");
            }
            self.own.retain(|&(_, b)| b > last);
            self.hooks.committed(&page);
            if (page.len() as i64) < PAGE {
                return Ok(());
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Each request of a group gets the group's sequence numbers, or the one error that failed
/// its commit.
type Reply = oneshot::Sender<Result<Vec<i64>, Arc<PgStoreError>>>;

struct WriteRequest {
    events: Vec<Event>,
    reply: Reply,
}

struct Inner {
    url: String,
    cfg: postgres::Config,
    tx: Mutex<Option<mpsc::Sender<WriteRequest>>>,
    reader: Mutex<Conn>,
    applier: Arc<Mutex<Applier>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    tail: Mutex<Option<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
}

/// Handle to the PostgreSQL store (cheap to clone).
#[derive(Clone)]
pub struct PgStore(Arc<Inner>);

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.0.url).finish()
    }
}

impl PgStore {
    /// [`PgStore::open_unread`], returning every event already in the log too (the caller
    /// applies them before [`PgStore::follow`]).
    pub fn open(
        url: &str,
        backend: &str,
        cluster: &str,
        apply: ApplyGroup,
        use_records: UseRecords,
    ) -> Result<(PgStore, Vec<StoredEvent>), PgStoreError> {
        let hooks = Closures {
            apply,
            use_records: Some(use_records),
        };
        let store = PgStore::open_unread(url, backend, cluster, Box::new(hooks))?;
        let mut existing: Vec<StoredEvent> = Vec::new();
        loop {
            let after = existing.last().map_or(0, |e| e.seq);
            let page = store.read_after(after, PAGE)?;
            let done = (page.len() as i64) < PAGE;
            existing.extend(page);
            if done {
                break;
            }
        }
        // what another replica appended since the open is in `existing` too
        let mut applier = lock(&store.0.applier);
        applier.applied = applier.applied.max(existing.last().map_or(0, |e| e.seq));
        drop(applier);
        Ok((store, existing))
    }

    /// Connects to the database at `url` (creating the tables if needed) and claims it for
    /// `backend` and `cluster`, without reading the log: the caller replays it page by page
    /// ([`PgStore::read_after`]) up to at least its highest sequence number at this open.
    /// The writer applies its own commits through `hooks` from now on; the events other
    /// replicas append are applied once [`PgStore::follow`] is called.
    pub fn open_unread(
        url: &str,
        backend: &str,
        cluster: &str,
        hooks: Box<dyn GroupHooks>,
    ) -> Result<PgStore, PgStoreError> {
        let mut cfg: postgres::Config =
            url.parse()
                .map_err(|e: postgres::Error| PgStoreError::BadUrl {
                    url: url.split('@').next_back().unwrap_or("").to_string(),
                    reason: e.to_string(),
                })?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(10));
        }
        if cfg.get_application_name().is_none() {
            cfg.application_name("augur");
        }
        let redacted = redact(&cfg);
        let mut writer = Conn::new(&cfg, &redacted);
        let reader = Conn::new(&cfg, &redacted);
        writer.with(|c, u| create_schema(c, u, backend, cluster))?;
        let highest = writer.with(verify)?;
        let applier = Arc::new(Mutex::new(Applier {
            applied: highest,
            hooks,
            own: Vec::new(),
        }));
        let (tx, rx) = mpsc::channel::<WriteRequest>();
        let wa = applier.clone();
        let handle = std::thread::Builder::new()
            .name("augur-store-writer".into())
            .spawn(move || writer_loop(writer, rx, &wa))
            .map_err(|source| PgStoreError::Thread {
                url: redacted.clone(),
                thread: "writer",
                source,
            })?;
        let store = PgStore(Arc::new(Inner {
            url: redacted,
            cfg,
            tx: Mutex::new(Some(tx)),
            reader: Mutex::new(reader),
            applier,
            writer: Mutex::new(Some(handle)),
            tail: Mutex::new(None),
            stop: Arc::new(AtomicBool::new(false)),
        }));
        Ok(store)
    }

    /// The database, without its password.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// Starts applying the events other replicas append (idempotent).
    pub fn follow(&self) -> Result<(), PgStoreError> {
        let mut tail = lock(&self.0.tail);
        if tail.is_some() {
            return Ok(());
        }
        let conn = Conn::new(&self.0.cfg, &self.0.url);
        let applier = self.0.applier.clone();
        let stop = self.0.stop.clone();
        let handle = std::thread::Builder::new()
            .name("augur-store-tail".into())
            .spawn(move || tail_loop(conn, &applier, &stop))
            .map_err(|source| PgStoreError::Thread {
                url: self.0.url.clone(),
                thread: "tail",
                source,
            })?;
        *tail = Some(handle);
        Ok(())
    }

    /// Stores `events` durably (all or none); returns their sequence numbers once committed.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<i64>, PgStoreError> {
        let closed = || PgStoreError::Closed {
            url: self.0.url.clone(),
        };
        let sender = lock(&self.0.tx).clone().ok_or_else(closed)?;
        let (reply, rx) = oneshot::channel();
        sender
            .send(WriteRequest { events, reply })
            .map_err(|_| closed())?;
        match rx.await {
            Ok(Ok(seqs)) => Ok(seqs),
            Ok(Err(failed)) => Err(PgStoreError::Commit(failed)),
            Err(_) => Err(closed()),
        }
    }

    /// Up to `limit` events with `seq > after`, in order (blocking).
    pub fn read_after(&self, after: i64, limit: i64) -> Result<Vec<StoredEvent>, PgStoreError> {
        lock(&self.0.reader).with(|c, u| read_after(c, u, after, limit))
    }

    /// Every stored prediction record, by submit sequence number (blocking).
    pub fn read_predictions(&self) -> Result<Vec<PredictionRecord>, PgStoreError> {
        lock(&self.0.reader).with(|c, u| read_records(c, u, 0, i64::MAX))
    }

    /// The prediction records of the submits with `first <= seq <= last` (blocking).
    pub fn read_predictions_between(
        &self,
        first: i64,
        last: i64,
    ) -> Result<Vec<PredictionRecord>, PgStoreError> {
        lock(&self.0.reader).with(|c, u| read_records(c, u, first - 1, last))
    }

    /// The first and last sequence numbers and the count of `job_id`'s events, if any
    /// (blocking).
    pub fn job_events(&self, job_id: &str) -> Result<Option<(i64, i64, i64)>, PgStoreError> {
        lock(&self.0.reader).with(|c, u| {
            let row = c
                .query_one(
                    "SELECT min(seq), max(seq), count(*) FROM augur_events WHERE job_id = $1",
                    &[&job_id],
                )
                .map_err(pg(u))?;
            let (first, last): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
            Ok(first.zip(last).map(|(f, l)| (f, l, row.get::<_, i64>(2))))
        })
    }

    /// Number of events stored (blocking).
    pub fn count(&self) -> Result<i64, PgStoreError> {
        lock(&self.0.reader).with(|c, u| {
            Ok(c.query_one("SELECT count(*) FROM augur_events", &[])
                .map_err(pg(u))?
                .get(0))
        })
    }

    /// The highest sequence number committed (blocking).
    pub fn last_committed(&self) -> Result<i64, PgStoreError> {
        lock(&self.0.reader).with(|c, u| {
            Ok(
                c.query_one("SELECT last FROM augur_sequence WHERE id = 1", &[])
                    .map_err(pg(u))?
                    .get(0),
            )
        })
    }

    /// The highest sequence number this process applied.
    pub fn applied(&self) -> i64 {
        lock(&self.0.applier).applied
    }

    /// Waits (blocking, up to `limit`) until every event committed when called is applied
    /// here; false when the time ran out.
    pub fn wait_applied(&self, limit: Duration) -> Result<bool, PgStoreError> {
        let target = self.last_committed()?;
        let start = Instant::now();
        while self.applied() < target {
            if start.elapsed() >= limit {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(true)
    }

    /// A trivial write transaction (readiness): the database takes writes.
    pub fn check_writable(&self) -> Result<(), PgStoreError> {
        lock(&self.0.reader).with(|c, u| {
            c.execute(
                "INSERT INTO augur_readiness (id, at) VALUES (1, $1)
                 ON CONFLICT (id) DO UPDATE SET at = EXCLUDED.at",
                &[&now_unix()],
            )
            .map_err(pg(u))?;
            Ok(())
        })
    }

    /// Stops the tail and, after the requests already queued, the writer.
    pub fn close(self) {
        self.0.stop.store(true, Ordering::SeqCst);
        drop(lock(&self.0.tx).take());
        let writer = lock(&self.0.writer).take();
        let tail = lock(&self.0.tail).take();
        for h in [writer, tail].into_iter().flatten() {
            let _ = h.join();
        }
    }
}

fn writer_loop(mut conn: Conn, rx: mpsc::Receiver<WriteRequest>, applier: &Mutex<Applier>) {
    while let Some(group) = next_group(&rx) {
        match conn.with(|c, u| write_group(c, u, &group, applier)) {
            Ok(seqs) => {
                // applied (with the events of other replicas committed before) before the
                // acknowledgement, as on SQLite; when that read fails the tail applies them
                let applied = conn.with(|c, u| lock(applier).catch_up(c, u));
                if let Err(e) = applied {
                    tracing::warn!(error = %e, "committed events not applied yet; the tail reader applies them");
                }
                for (req, s) in group.into_iter().zip(seqs) {
                    let _ = req.reply.send(Ok(s));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "event store commit failed; events not acknowledged");
                let e = Arc::new(e);
                for req in group {
                    let _ = req.reply.send(Err(e.clone()));
                }
            }
        }
    }
    tracing::debug!("event store writer stopped");
}

/// One transaction for the group: takes the sequence row (serialising with every other
/// replica's appends until commit), inserts the events, notifies the tails at commit.
fn write_group(
    client: &mut Client,
    url: &str,
    group: &[WriteRequest],
    applier: &Mutex<Applier>,
) -> Result<Vec<Vec<i64>>, PgStoreError> {
    let n: i64 = group.iter().map(|r| r.events.len() as i64).sum();
    if n == 0 {
        return Ok(group.iter().map(|_| Vec::new()).collect());
    }
    let e = pg(url);
    let mut kinds = Vec::with_capacity(n as usize);
    let mut jobs = Vec::with_capacity(n as usize);
    let mut bodies = Vec::with_capacity(n as usize);
    for ev in group.iter().flat_map(|r| &r.events) {
        kinds.push(ev.kind());
        jobs.push(ev.job_id());
        bodies.push(
            serde_json::to_string(ev).map_err(|source| PgStoreError::Encode {
                url: url.to_string(),
                source,
            })?,
        );
    }
    let mut tx = client.transaction().map_err(&e)?;
    let last: i64 = tx
        .query_one(
            "UPDATE augur_sequence SET last = last + $1 WHERE id = 1 RETURNING last",
            &[&n],
        )
        .map_err(&e)?
        .get(0);
    let first = last - n + 1;
    let seqs: Vec<i64> = (first..=last).collect();
    tx.execute(
        "INSERT INTO augur_events (seq, received_at, kind, job_id, body)
         SELECT s, $2::float8, k, j, b FROM unnest($1::bigint[], $3::text[], $4::text[], $5::text[])
             AS t(s, k, j, b)",
        &[&seqs, &now_unix(), &kinds, &jobs, &bodies],
    )
    .map_err(&e)?;
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &last.to_string()])
        .map_err(&e)?;
    // the records of these submits are this process's to store, whichever thread applies them
    lock(applier).own.push((first, last));
    if let Err(err) = tx.commit() {
        lock(applier).own.retain(|&r| r != (first, last));
        return Err(e(err));
    }
    let mut out = Vec::with_capacity(group.len());
    let mut next = first;
    for r in group {
        let k = r.events.len() as i64;
        out.push((next..next + k).collect());
        next += k;
    }
    Ok(out)
}

/// Applies what other replicas append: at each notification, else every [`TAIL_POLL`];
/// reconnects (after a pause) when the connection breaks.
fn tail_loop(mut conn: Conn, applier: &Mutex<Applier>, stop: &AtomicBool) {
    let mut listening = false;
    while !stop.load(Ordering::SeqCst) {
        let round = conn.with(|c, u| {
            if !listening {
                c.batch_execute(&format!("LISTEN {CHANNEL}"))
                    .map_err(pg(u))?;
                listening = true;
            }
            lock(applier).catch_up(c, u)?;
            let mut notes = c.notifications();
            // one notification (or the timeout) wakes the next catch-up, which reads them all
            notes.timeout_iter(TAIL_POLL).next().map_err(pg(u))?;
            while notes.iter().next().map_err(pg(u))?.is_some() {}
            Ok(())
        });
        if let Err(e) = round {
            listening = false;
            tracing::warn!(error = %e, "reading the shared event log failed; retrying");
            std::thread::sleep(TAIL_POLL);
        }
    }
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
