//! Snapshots of the online state, so a start loads one and replays only the events after
//! it instead of the whole log.
//!
//! **What.** `<data_dir>/snapshot/online.bin`: the online state's serialised form
//! ([`super::online::saved`]: the predictors' online states, the job table, clock, counts,
//! retention) behind a header that says what it was built from: the sequence number of its
//! last event and a hash of that event as the log stores it (the *anchor*), each served
//! model's registry version, payload hash and feature schema version, the retention window
//! and the data folder's backend and cluster. The models are not in it: they are the
//! registry's. Layout: `AUGURSNP`, format version (u32 LE), header length (u32 LE), the
//! header (JSON), the body (bincode), and SHA-256 of everything before it (32 bytes).
//!
//! **When.** At a clean stop, after each model swap (retrain, promote, roll back: the old
//! snapshot no longer matches the models), and while events arrive every
//! `snapshot_interval_secs` or `snapshot_every_events` ([`spawn`]). The body is encoded under
//! the shared lock (ingest waits for that part only), then written off it: temp file,
//! fsync, rename, fsync of the folder, so a crash leaves the old snapshot or the new one.
//! A snapshot is written only once its last event is committed (its anchor is read back
//! from the log).
//!
//! **At start** ([`load`]) a snapshot is used when its checksum is right, its format is this
//! build's, it was built with the models served now, for this backend, cluster and retention
//! window, and its anchor is the log's event at its last sequence number (a log that is
//! shorter or holds another event there was replaced: refused). A log whose numbers end
//! before the snapshot's last event lost acknowledged events (deleted, or replaced by an
//! empty one): the start is refused ([`check_log_reaches`]), as a new event would take a
//! number the snapshot's events had. Otherwise the whole log is
//! replayed, as without a snapshot, and the log line says why (ERROR for a damaged file,
//! INFO for other models or settings, WARN for another log); `augur_snapshot_loads_total`
//! counts the outcomes. A snapshot is derived state only: the event log stays the source of
//! truth, and every answer a snapshot restores is one the log's replay gives.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::online::{Online, ServedModels};
use super::store::{EventLog, StoreError};
use crate::serve::kinds::SavedError;
use crate::serve::{http::metrics::Metrics, lock, AppState};

/// The snapshot file inside `<data_dir>/snapshot/`.
pub const FILE: &str = "online.bin";
/// Bumped when the layout or the body's encoding changes: another version is not read
/// (the whole log is replayed instead). 3: each kind's online state as its own bytes, by
/// kind name (2 had one field per kind); 5: the runtime window's long memory.
pub const FORMAT_VERSION: u32 = 5;
const MAGIC: &[u8; 8] = b"AUGURSNP";
/// Magic, format version, header length.
const PREFIX: usize = 8 + 4 + 4;
const CHECKSUM: usize = 32;
/// How long a write waits for its last event to be committed before it skips this round.
const COMMIT_WAIT: Duration = Duration::from_secs(5);

/// A served model as the snapshot records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelStamp {
    pub version: u32,
    pub payload_sha256: String,
    pub feature_schema_version: u32,
}

/// What a snapshot was built from (the file's header).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub augur_version: String,
    /// When it was written, RFC 3339.
    pub created_at: String,
    /// The last event it holds.
    pub last_seq: i64,
    /// SHA-256 of that event as the log stores it (see [`anchor_of`]).
    pub anchor: String,
    /// The served models with an online state, by kind.
    pub models: BTreeMap<String, ModelStamp>,
    pub retention_secs: Option<f64>,
    pub backend: String,
    pub cluster: String,
    pub body_bytes: u64,
}

/// Who the data folder belongs to and how long runs are held: a snapshot is only used by a
/// service with the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub backend: String,
    pub cluster: String,
    pub retention_secs: Option<f64>,
}

/// Why a snapshot was not read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Shorter than an empty snapshot (cut short, or empty).
    #[error("truncated: {len} bytes")]
    Truncated { len: usize },
    #[error("not a snapshot (no AUGURSNP magic)")]
    Magic,
    #[error("checksum mismatch: the file changed after it was written")]
    Checksum,
    #[error("the header's length ({header} bytes) runs past the end of the file")]
    HeaderLength { header: usize },
    #[error("the header cannot be read: {0}")]
    Header(#[source] serde_json::Error),
    #[error("the header says {said} body bytes, the file holds {found}")]
    BodyLength { said: u64, found: usize },
    /// Written by another build's format.
    #[error("snapshot format {found}, this build reads {FORMAT_VERSION}")]
    Format { found: u32 },
    #[error(transparent)]
    State(#[from] SavedError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot encode as JSON: {0}")]
    Encode(#[source] serde_json::Error),
}

/// The snapshots of one data folder: where, and what was written last.
#[derive(Debug)]
pub struct Snapshots {
    dir: PathBuf,
    setting: OnceLock<Setting>,
    /// One write at a time; (last_seq, models) of the last one written or loaded.
    written: Mutex<Option<(i64, BTreeMap<String, ModelStamp>)>>,
    /// Its last_seq, readable without waiting for a write in progress.
    written_seq: AtomicI64,
}

impl Snapshots {
    /// The snapshots under `<data_dir>/snapshot/`.
    pub fn new(data_dir: &Path) -> Snapshots {
        Snapshots {
            dir: data_dir.join("snapshot"),
            setting: OnceLock::new(),
            written: Mutex::new(None),
            written_seq: AtomicI64::new(0),
        }
    }

    /// The snapshot file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The last event of the last snapshot written or loaded (0: none).
    pub fn last_seq(&self) -> i64 {
        self.written_seq.load(Ordering::SeqCst)
    }

    fn remember(&self, last_seq: i64, models: BTreeMap<String, ModelStamp>) {
        *lock(&self.written) = Some((last_seq, models));
        self.written_seq.store(last_seq, Ordering::SeqCst);
    }
}

/// The stamps of the served models that have an online state.
pub fn stamps(models: &ServedModels) -> BTreeMap<String, ModelStamp> {
    models
        .iter()
        .filter(|m| m.has_online())
        .map(|m| {
            let meta = m.meta();
            let stamp = ModelStamp {
                version: meta.version,
                payload_sha256: meta.payload_sha256.clone(),
                feature_schema_version: meta.feature_schema_version,
            };
            (m.kind().name().to_string(), stamp)
        })
        .collect()
}

/// SHA-256 of the log's event at `seq` (its seq, receive time and stored body), or `None`
/// when the log has no event there (not committed yet, or not this log).
pub fn anchor_of(store: &EventLog, seq: i64) -> Result<Option<String>, SnapshotError> {
    let Some(e) = store.read_after(seq - 1, 1)?.into_iter().next() else {
        return Ok(None);
    };
    if e.seq != seq {
        return Ok(None);
    }
    let body = serde_json::to_vec(&e.event).map_err(SnapshotError::Encode)?;
    let mut h = Sha256::new();
    h.update(e.seq.to_le_bytes());
    h.update(e.received_at.to_bits().to_le_bytes());
    h.update(&body);
    Ok(Some(hex(&h.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file's bytes for `header` and `body`.
fn encode_file(header: &Header, body: &[u8]) -> Result<Vec<u8>, SnapshotError> {
    let head = serde_json::to_vec(header).map_err(SnapshotError::Encode)?;
    let head_len = u32::try_from(head.len())
        .map_err(|_| SnapshotError::HeaderLength { header: head.len() })?;
    let mut out = Vec::with_capacity(PREFIX + head.len() + body.len() + CHECKSUM);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&head_len.to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(body);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    Ok(out)
}

/// Checks a file's bytes; returns its header and body.
pub fn decode_file(bytes: &[u8]) -> Result<(Header, &[u8]), SnapshotError> {
    if bytes.len() < PREFIX + CHECKSUM {
        return Err(SnapshotError::Truncated { len: bytes.len() });
    }
    if &bytes[..8] != MAGIC {
        return Err(SnapshotError::Magic);
    }
    let (content, sum) = bytes.split_at(bytes.len() - CHECKSUM);
    if Sha256::digest(content).as_slice() != sum {
        return Err(SnapshotError::Checksum);
    }
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let format = word(8);
    if format != FORMAT_VERSION {
        return Err(SnapshotError::Format { found: format });
    }
    let head_len = word(12) as usize;
    let rest = &content[PREFIX..];
    if head_len > rest.len() {
        return Err(SnapshotError::HeaderLength { header: head_len });
    }
    let (head, body) = rest.split_at(head_len);
    let header: Header = serde_json::from_slice(head).map_err(SnapshotError::Header)?;
    if header.body_bytes != body.len() as u64 {
        return Err(SnapshotError::BodyLength {
            said: header.body_bytes,
            found: body.len(),
        });
    }
    Ok((header, body))
}

/// Writes `bytes` as `dir/name`: temp file, fsync, rename, fsync of the folder.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
    let io = |path: &Path, source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// Written: its last event, size, and the seconds spent encoding (under the shared
    /// lock) and writing (off it).
    Written {
        last_seq: i64,
        bytes: u64,
        encode_secs: f64,
        write_secs: f64,
    },
    /// Nothing to write: no event yet, or the last snapshot holds the same events for the
    /// same models.
    Unchanged,
    /// Its last event was not committed within [`COMMIT_WAIT`] (the writer applies a group
    /// before committing it): not written this time.
    NotCommitted { last_seq: i64 },
}

/// Writes a snapshot of `state`'s online state now (blocking: call from a blocking
/// context), unless it would hold what the last one holds.
pub fn write(state: &AppState) -> Result<Written, SnapshotError> {
    let snaps = &state.ext.snapshots;
    let metrics = &state.ext.metrics;
    let result = write_inner(state, snaps);
    match &result {
        Ok(Written::Written {
            last_seq,
            bytes,
            encode_secs,
            write_secs,
        }) => metrics.observe_snapshot_write(
            "written",
            Some((*bytes, *last_seq, *encode_secs, *write_secs)),
        ),
        Ok(_) => metrics.observe_snapshot_write("skipped", None),
        Err(_) => metrics.observe_snapshot_write("failed", None),
    }
    result
}

fn write_inner(state: &AppState, snaps: &Snapshots) -> Result<Written, SnapshotError> {
    let mut written = lock(&snaps.written);
    let t = Instant::now();
    let (body, last_seq, models) = {
        let o = state.online();
        let models = stamps(&o.models);
        if o.last_seq == 0 || written.as_ref() == Some(&(o.last_seq, models.clone())) {
            return Ok(Written::Unchanged);
        }
        (o.encode_state()?, o.last_seq, models)
    };
    let encode_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let deadline = Instant::now() + COMMIT_WAIT;
    let anchor = loop {
        if let Some(a) = anchor_of(&state.store, last_seq)? {
            break a;
        }
        if Instant::now() >= deadline {
            return Ok(Written::NotCommitted { last_seq });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let setting = snaps.setting.get().cloned().unwrap_or_else(|| Setting {
        backend: state.config.backend.name().to_string(),
        cluster: String::new(),
        retention_secs: state.config.retention_secs(),
    });
    let header = Header {
        augur_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: chrono::Utc::now().to_rfc3339(),
        last_seq,
        anchor,
        models: models.clone(),
        retention_secs: setting.retention_secs,
        backend: setting.backend,
        cluster: setting.cluster,
        body_bytes: body.len() as u64,
    };
    let bytes = encode_file(&header, &body)?;
    drop(body);
    write_atomic(&snaps.dir, FILE, &bytes)?;
    *written = Some((last_seq, models));
    snaps.written_seq.store(last_seq, Ordering::SeqCst);
    Ok(Written::Written {
        last_seq,
        bytes: bytes.len() as u64,
        encode_secs,
        write_secs: t.elapsed().as_secs_f64(),
    })
}

/// [`write`], logged (`why`: what asked for it).
pub fn write_logged(state: &AppState, why: &str) {
    match write(state) {
        Ok(Written::Written {
            last_seq,
            bytes,
            encode_secs,
            write_secs,
        }) => tracing::info!(
            why,
            last_seq,
            bytes,
            encode_secs,
            write_secs,
            path = %state.ext.snapshots.path().display(),
            "snapshot of the online state written"
        ),
        Ok(Written::Unchanged) => {}
        Ok(Written::NotCommitted { last_seq }) => tracing::warn!(
            why,
            last_seq,
            "snapshot not written: its last event is not committed yet (the next one will be)"
        ),
        Err(e) => {
            tracing::error!(why, error = %e, "writing the snapshot of the online state failed; a restart replays more of the log")
        }
    }
}

/// The header of the snapshot `file` ([`Snapshots::path`]), when one is there and reads as
/// sound.
pub fn read_header(file: &Path) -> Option<Header> {
    let bytes = std::fs::read(file).ok()?;
    decode_file(&bytes).ok().map(|(h, _)| h)
}

/// The last sequence number of the snapshot `file`, when sound: the log once held every
/// event up to it.
pub fn witnessed_seq(file: &Path) -> Option<i64> {
    read_header(file).map(|h| h.last_seq)
}

/// A log whose numbers end before the snapshot's last event.
#[derive(Debug, thiserror::Error)]
#[error("the event log ends at seq {log_end} but the snapshot of the online state ({}) was built from events up to seq {snapshot_seq}: acknowledged events seq {}..={snapshot_seq} are gone from the log (deleted or replaced) and a new event would take one of their numbers. Not started: restore the log (events.sqlite and events.sqlite.hwm) from a backup, or run `augur store repair --data-dir <data dir>` to record them as lost and start after them", .snapshot.display(), .log_end + 1)]
pub struct LogBehindSnapshot {
    pub snapshot: PathBuf,
    pub snapshot_seq: i64,
    pub log_end: i64,
}

/// Refuses a log that ends before the last event of the snapshot beside it (see the
/// [module docs](self)).
pub fn check_log_reaches(snaps: &Snapshots, store: &EventLog) -> Result<(), LogBehindSnapshot> {
    let Some(seen) = witnessed_seq(&snaps.path()) else {
        return Ok(());
    };
    let log_end = store.numbered_upto();
    if seen > log_end {
        return Err(LogBehindSnapshot {
            snapshot: snaps.path(),
            snapshot_seq: seen,
            log_end,
        });
    }
    Ok(())
}

/// What became of the snapshot at start-up (the `outcome` label of
/// `augur_snapshot_loads_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOutcome {
    /// Loaded: only the events after it are replayed.
    Loaded,
    /// The file is damaged (truncated, flipped bytes, empty, undecodable).
    Damaged,
    /// Sound, but built with other models, settings or format, or from another log.
    Stale,
    /// No snapshot.
    Absent,
}

impl LoadOutcome {
    pub fn label(self) -> &'static str {
        match self {
            LoadOutcome::Loaded => "loaded",
            LoadOutcome::Damaged => "damaged",
            LoadOutcome::Stale => "stale",
            LoadOutcome::Absent => "absent",
        }
    }
}

/// Loads the snapshot into `online` (serving the models loaded now) when it fits (see the
/// [module docs](self)); otherwise leaves `online` as it is (empty: the whole log is
/// replayed) and logs why. Counts the outcome in `metrics`.
pub fn load(
    snaps: &Snapshots,
    setting: Setting,
    store: &EventLog,
    online: &mut Online,
    metrics: &Metrics,
) -> LoadOutcome {
    let _ = snaps.setting.set(setting.clone());
    let path = snaps.path();
    let outcome = load_inner(snaps, &path, &setting, store, online);
    metrics.observe_snapshot_load(outcome.label());
    outcome
}

fn load_inner(
    snaps: &Snapshots,
    path: &Path,
    setting: &Setting,
    store: &EventLog,
    online: &mut Online,
) -> LoadOutcome {
    let shown = path.display();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %shown, "no snapshot of the online state: replaying the whole event log");
            return LoadOutcome::Absent;
        }
        Err(e) => {
            tracing::error!(path = %shown, error = %e, "the snapshot of the online state cannot be read: replaying the whole event log");
            return LoadOutcome::Damaged;
        }
    };
    let (header, body) = match decode_file(&bytes) {
        Ok(x) => x,
        Err(SnapshotError::Format { found }) => {
            tracing::info!(path = %shown, found, reads = FORMAT_VERSION, "the snapshot of the online state is another build's format: replaying the whole event log");
            return LoadOutcome::Stale;
        }
        Err(e) => {
            tracing::error!(path = %shown, error = %e, "the snapshot of the online state is damaged: replaying the whole event log");
            return LoadOutcome::Damaged;
        }
    };
    let now = stamps(&online.models);
    let stale = if header.models != now {
        Some(format!(
            "built with models {}, serving {}",
            describe(&header.models),
            describe(&now)
        ))
    } else if header.backend != setting.backend || header.cluster != setting.cluster {
        Some(format!(
            "built for backend `{}` cluster `{}`, this is `{}` `{}`",
            header.backend, header.cluster, setting.backend, setting.cluster
        ))
    } else if header.retention_secs.map(f64::to_bits) != setting.retention_secs.map(f64::to_bits) {
        Some(format!(
            "built with a retention window of {:?} s, now {:?} s",
            header.retention_secs, setting.retention_secs
        ))
    } else {
        None
    };
    if let Some(why) = stale {
        tracing::info!(path = %shown, reason = %why, "the snapshot of the online state is stale: replaying the whole event log");
        return LoadOutcome::Stale;
    }
    match anchor_of(store, header.last_seq) {
        Ok(Some(a)) if a == header.anchor => {}
        Ok(found) => {
            let why = match found {
                None => format!(
                    "the log has no event {} (it ends at {}): the log was replaced or lost events",
                    header.last_seq,
                    store.last_seq_hint()
                ),
                Some(_) => format!(
                    "the log's event {} is not the one the snapshot was built from: the log was replaced",
                    header.last_seq
                ),
            };
            tracing::warn!(path = %shown, reason = %why, "the snapshot of the online state does not belong to this event log: refused, replaying the whole log");
            return LoadOutcome::Stale;
        }
        Err(e) => {
            tracing::error!(path = %shown, error = %e, "the snapshot's last event cannot be read from the log: replaying the whole log");
            return LoadOutcome::Stale;
        }
    }
    match online.restore_state(body) {
        Ok(()) => {
            snaps.remember(header.last_seq, header.models);
            tracing::info!(path = %shown, last_seq = header.last_seq, jobs = online.jobs.len(), "snapshot of the online state loaded: replaying the events after it");
            LoadOutcome::Loaded
        }
        Err(e) if e.is_damage() => {
            tracing::error!(path = %shown, error = %e, "the snapshot of the online state is damaged: replaying the whole event log");
            LoadOutcome::Damaged
        }
        Err(e) => {
            tracing::info!(path = %shown, reason = %e, "the snapshot of the online state is stale: replaying the whole event log");
            LoadOutcome::Stale
        }
    }
}

fn describe(models: &BTreeMap<String, ModelStamp>) -> String {
    let parts: Vec<String> = models
        .iter()
        .map(|(k, m)| format!("{k} v{}", m.version))
        .collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// Starts the periodic snapshots (nothing when both triggers are 0); they stop with the
/// service. Checked every few seconds: a snapshot is written when `snapshot_every_events`
/// events arrived since the last one, or `snapshot_interval_secs` passed and any did.
pub fn spawn(state: AppState) {
    let every_secs = state.config.snapshot_interval_secs;
    let every_events = state.config.snapshot_every_events;
    if every_secs <= 0.0 && every_events == 0 {
        tracing::info!("periodic snapshots of the online state are off (written at a clean stop and after model swaps)");
        return;
    }
    let tick = Duration::from_secs_f64(if every_secs > 0.0 {
        every_secs.clamp(0.05, 5.0)
    } else {
        5.0
    });
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let mut since = Instant::now();
        loop {
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let last = state.online().last_seq;
            let saved = state.ext.snapshots.last_seq();
            let new = u64::try_from(last - saved).unwrap_or(0);
            let by_events = every_events > 0 && new >= every_events;
            let by_time =
                every_secs > 0.0 && new > 0 && since.elapsed().as_secs_f64() >= every_secs;
            if !(by_events || by_time) {
                continue;
            }
            since = Instant::now();
            let st = state.clone();
            let _ = tokio::task::spawn_blocking(move || write_logged(&st, "periodic")).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            augur_version: "0".into(),
            created_at: "now".into(),
            last_seq: 7,
            anchor: "ab".into(),
            models: BTreeMap::new(),
            retention_secs: Some(60.0),
            backend: "none".into(),
            cluster: String::new(),
            body_bytes: 3,
        }
    }

    #[test]
    fn a_file_reads_back_and_every_damage_is_named() {
        let file = encode_file(&header(), b"xyz").unwrap();
        let (h, body) = decode_file(&file).unwrap();
        assert_eq!((h, body), (header(), &b"xyz"[..]));
        assert!(matches!(
            decode_file(&[]),
            Err(SnapshotError::Truncated { len: 0 })
        ));
        assert!(matches!(
            decode_file(&file[..file.len() - 1]),
            Err(SnapshotError::Checksum)
        ));
        for i in [0, 9, 20, file.len() - 2, file.len() - 40] {
            let mut bad = file.clone();
            bad[i] ^= 0x40;
            assert!(decode_file(&bad).is_err(), "byte {i} flipped");
        }
        let mut other = file.clone();
        other[8] = 99;
        let n = other.len() - CHECKSUM;
        let sum = Sha256::digest(&other[..n]);
        other[n..].copy_from_slice(&sum);
        assert!(matches!(
            decode_file(&other),
            Err(SnapshotError::Format { found: 99 })
        ));
    }
}
