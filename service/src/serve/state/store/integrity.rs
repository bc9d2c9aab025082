//! Integrity of the event store: the durable high-water mark, the start-up verification and
//! the explicit repair.
//!
//! SQLite drops committed transactions silently when its write-ahead log is torn or damaged
//! (frames after the first bad checksum are ignored), and a truncated database file restarts
//! `AUTOINCREMENT` at 1. So the store keeps, beside the database, the highest sequence number it
//! ever acknowledged (`<db>.hwm`, synced after every commit group, before any reply). At start
//! the log must hold every sequence number up to that mark except ranges a repair recorded as
//! lost; otherwise the store refuses to open, naming the missing ranges. `augur store repair`
//! keeps every intact event, records exactly what was lost (table `losses`), moves the damaged
//! files aside and makes sure no sequence number is ever handed out twice.
//!
//! Every row carries a checksum ([`row_sum`]: SHA-256 of its sequence number, receive time,
//! kind, job and body, column `sum`), so a flipped bit inside a row that still parses is
//! found by `augur store check` and on every read, as the archive's and the snapshot's
//! checksums find theirs. Rows written before checksums existed get theirs at the first
//! open ([`add_row_sums`]).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde::Serialize;

pub use super::losses::LostRange;
use super::losses::{gaps, recorded_losses};
use super::StoreError;

/// Checks one stored event body: the reason it is not an event (the store's parser, or one
/// that accepts any body when only the numbers are checked).
pub type ParseBody = dyn Fn(&str) -> Result<(), serde_json::Error>;

/// The checksum of one stored row (lowercase hex SHA-256).
pub fn row_sum(seq: i64, received_at: f64, kind: &str, job_id: Option<&str>, body: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(seq.to_le_bytes());
    h.update(received_at.to_bits().to_le_bytes());
    h.update(kind.as_bytes());
    h.update([0u8]);
    h.update(job_id.unwrap_or("").as_bytes());
    h.update([0u8]);
    h.update(body.as_bytes());
    super::archive::sha256_hex_of(&h.finalize())
}

/// Why a row's stored checksum is not its content's (`None`: it matches, or the row has
/// none yet).
pub fn sum_mismatch(
    seq: i64,
    received_at: f64,
    kind: &str,
    job_id: Option<&str>,
    body: &str,
    sum: Option<&str>,
) -> Option<String> {
    let stored = sum?;
    (row_sum(seq, received_at, kind, job_id, body) != stored)
        .then(|| "checksum mismatch: the row was changed on disk after it was written".to_string())
}

/// Whether the `events` table has the `sum` column (a store written before checksums has
/// not, until its first open).
pub fn has_row_sums(conn: &Connection) -> Result<bool, rusqlite::Error> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info('events') WHERE name = 'sum'",
        [],
        |r| r.get(0),
    )?;
    Ok(n > 0)
}

/// Gives every row without a checksum one (adding the column to a store written before
/// checksums): what such a row holds at this open is taken as written. Returns how many.
pub fn add_row_sums(conn: &mut Connection) -> Result<usize, rusqlite::Error> {
    if !has_row_sums(conn)? {
        conn.execute_batch("ALTER TABLE events ADD COLUMN sum TEXT")?;
    }
    // reads the rows, then writes their sums: the write lock up front
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rows: Vec<(i64, f64, String, Option<String>, String)> = {
        let mut stmt = tx
            .prepare("SELECT seq, received_at, kind, job_id, body FROM events WHERE sum IS NULL")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    {
        let mut set = tx.prepare("UPDATE events SET sum = ?1 WHERE seq = ?2")?;
        for (seq, at, kind, job, body) in &rows {
            set.execute(params![row_sum(*seq, *at, kind, job.as_deref(), body), seq])?;
        }
    }
    tx.commit()?;
    Ok(rows.len())
}

/// Width of one copy of the mark in the file: 20 decimal digits.
const MARK_DIGITS: usize = 20;

/// The durable high-water mark: the highest sequence number acknowledged, written twice in a
/// fixed-width record at offset 0 (a torn write makes the copies differ) and synced.
#[derive(Debug)]
pub struct HighWater {
    file: File,
    path: PathBuf,
    value: i64,
}

/// The path of the mark beside the database.
pub fn high_water_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".hwm");
    PathBuf::from(s)
}

/// What the mark file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkState {
    /// No mark file (a new store, or one written before marks existed).
    Missing,
    /// The mark's value.
    At(i64),
    /// The file exists but its two copies disagree or do not parse.
    Damaged,
}

/// Reads the mark beside `db`.
pub fn read_mark(db: &Path) -> Result<MarkState, StoreError> {
    let path = high_water_path(db);
    let mut buf = String::new();
    match File::open(&path) {
        Ok(mut f) => f
            .read_to_string(&mut buf)
            .map_err(|e| StoreError::io(&path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MarkState::Missing),
        Err(e) => return Err(StoreError::io(&path, e)),
    };
    let mut parts = buf.split_whitespace();
    let (a, b) = (parts.next(), parts.next());
    Ok(match (a.map(str::parse::<i64>), b.map(str::parse::<i64>)) {
        (Some(Ok(a)), Some(Ok(b))) if a == b && a >= 0 => MarkState::At(a),
        _ => MarkState::Damaged,
    })
}

impl HighWater {
    /// Opens (creating) the mark beside `db`, starting at `value`.
    pub fn open(db: &Path, value: i64) -> Result<HighWater, StoreError> {
        let path = high_water_path(db);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        let mut hw = HighWater {
            file,
            path,
            value: -1,
        };
        hw.record(value)?;
        Ok(hw)
    }

    /// Raises the mark to `seq` and syncs it (no-op when it is not higher).
    pub fn record(&mut self, seq: i64) -> Result<(), StoreError> {
        if seq <= self.value {
            return Ok(());
        }
        let line = format!("{seq:0w$} {seq:0w$}\n", w = MARK_DIGITS);
        let io = |e| StoreError::io(&self.path, e);
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        self.file.write_all(line.as_bytes()).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.value = seq;
        Ok(())
    }
}

/// What the verification of a store found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntegrityReport {
    /// The database file.
    pub path: PathBuf,
    /// Events readable in the log.
    pub events: i64,
    /// Highest sequence number in the log (0 when empty).
    pub max_seq: i64,
    /// The high-water mark (`None` when the mark file is missing).
    pub high_water: Option<i64>,
    /// The mark file exists but is unreadable.
    pub mark_damaged: bool,
    /// SQLite's own `quick_check` answer when it was run (`ok` when sound).
    pub quick_check: Option<String>,
    /// Sequence numbers missing from the log and not recorded as lost: acknowledged events
    /// that are gone.
    pub missing: Vec<(i64, i64)>,
    /// Rows whose stored event cannot be read (sequence number, reason).
    pub unreadable: Vec<(i64, String)>,
    /// Ranges an earlier repair recorded as lost (accepted).
    pub recorded_losses: Vec<LostRange>,
    /// Set when the database itself could not be opened or read.
    pub open_error: Option<String>,
    /// The archive segments' verification (`augur store check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<super::archive::ArchiveReport>,
    /// The last sequence number of the snapshot of the online state, when it is beyond the
    /// log's mark (the events up to it were acknowledged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witnessed: Option<i64>,
}

impl IntegrityReport {
    /// True when the store holds every acknowledged event (or its loss was recorded by a
    /// repair) and every row reads.
    pub fn is_sound(&self) -> bool {
        self.missing.is_empty()
            && self.unreadable.is_empty()
            && !self.mark_damaged
            && self.open_error.is_none()
            && self.quick_check.as_deref().is_none_or(|q| q == "ok")
            && self.archive.as_ref().is_none_or(|a| a.problems.is_empty())
    }

    /// One line per problem, for the refusal and for `augur store check`.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.open_error {
            out.push(format!("the database cannot be read: {e}"));
        }
        if let Some(q) = self.quick_check.as_deref().filter(|q| *q != "ok") {
            out.push(format!("SQLite quick_check: {q}"));
        }
        if self.mark_damaged {
            out.push(format!(
                "the high-water mark {} is damaged",
                high_water_path(&self.path).display()
            ));
        }
        for (a, b) in &self.missing {
            out.push(format!(
                "acknowledged events seq {a}..={b} ({} events) are missing from the log",
                b - a + 1
            ));
        }
        if let Some(w) = self.witnessed.filter(|_| !self.missing.is_empty()) {
            out.push(format!(
                "the snapshot of the online state was built from events up to seq {w}: the log once held them"
            ));
        }
        for (seq, reason) in self.unreadable.iter().take(20) {
            out.push(format!("event seq {seq} cannot be read: {reason}"));
        }
        if self.unreadable.len() > 20 {
            out.push(format!(
                "… {} more unreadable rows",
                self.unreadable.len() - 20
            ));
        }
        if let Some(a) = &self.archive {
            out.extend(a.problems.iter().cloned());
        }
        out
    }
}

/// Opens `db` read-only for verification.
fn open_read_only(db: &Path) -> Result<Connection, rusqlite::Error> {
    Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Every row's sequence number, and the rows whose event does not parse.
type RowScan = (Vec<i64>, Vec<(i64, String)>);

/// A row's receive time, kind, job, body and checksum.
type RowFields = (f64, String, Option<String>, String, Option<String>);

fn scan_rows(conn: &Connection, parse: &ParseBody) -> Result<RowScan, rusqlite::Error> {
    let sums = if has_row_sums(conn)? { "sum" } else { "NULL" };
    let mut stmt = conn.prepare(&format!(
        "SELECT seq, received_at, kind, job_id, body, {sums} FROM events ORDER BY seq"
    ))?;
    let mut rows = stmt.query([])?;
    let (mut seqs, mut bad) = (Vec::new(), Vec::new());
    while let Some(r) = rows.next()? {
        let seq: i64 = r.get(0)?;
        let read = || -> Result<RowFields, rusqlite::Error> {
            Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        };
        match read() {
            Ok((at, kind, job, body, sum)) => {
                if let Some(why) =
                    sum_mismatch(seq, at, &kind, job.as_deref(), &body, sum.as_deref())
                {
                    bad.push((seq, why));
                } else if let Err(e) = parse(&body) {
                    bad.push((seq, e.to_string()));
                }
            }
            Err(e) => bad.push((seq, e.to_string())),
        }
        seqs.push(seq);
    }
    Ok((seqs, bad))
}

/// Verifies the store at `db` without changing it. `quick_check` runs SQLite's structural
/// check too (linear in the file's size). `parse` checks one stored event body.
pub fn verify(
    db: &Path,
    quick_check: bool,
    parse: &ParseBody,
) -> Result<IntegrityReport, StoreError> {
    let mut report = IntegrityReport {
        path: db.to_path_buf(),
        ..IntegrityReport::default()
    };
    match read_mark(db)? {
        MarkState::Missing => {}
        MarkState::At(v) => report.high_water = Some(v),
        MarkState::Damaged => report.mark_damaged = true,
    }
    let conn = match open_read_only(db) {
        Ok(c) => c,
        Err(e) => {
            report.open_error = Some(e.to_string());
            return Ok(report);
        }
    };
    let result = (|| -> Result<(), rusqlite::Error> {
        if quick_check {
            let q: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
            report.quick_check = Some(q);
        }
        report.recorded_losses = recorded_losses(&conn)?;
        let (seqs, bad) = scan_rows(&conn, parse)?;
        report.events = seqs.len() as i64;
        report.max_seq = seqs.last().copied().unwrap_or(0);
        report.unreadable = bad;
        let upto = report.high_water.unwrap_or(0).max(report.max_seq);
        report.missing = gaps(&seqs, upto, &report.recorded_losses);
        Ok(())
    })();
    if let Err(e) = result {
        report.open_error = Some(e.to_string());
    }
    Ok(report)
}

/// Moves the damaged database `db` (with its WAL files) aside as `<db>.damaged-<stamp>` and
/// the repaired copy `fresh` in its place; returns where the damaged one went.
fn swap_in(db: &Path, fresh: &Path, stamp: u64) -> Result<PathBuf, StoreError> {
    let aside = PathBuf::from(format!("{}.damaged-{stamp}", db.display()));
    let mv = |from: &Path, to: &Path| -> Result<(), StoreError> {
        match std::fs::rename(from, to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(from, e)),
        }
    };
    let suffixed = |p: &Path, s: &str| PathBuf::from(format!("{}{s}", p.display()));
    mv(db, &aside)?;
    mv(&suffixed(db, "-wal"), &suffixed(&aside, "-wal"))?;
    mv(&suffixed(db, "-shm"), &suffixed(&aside, "-shm"))?;
    mv(fresh, db)?;
    Ok(aside)
}

/// What a repair did.
#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    /// Intact events kept (with their original sequence numbers).
    pub kept: i64,
    /// Ranges recorded as lost by this repair.
    pub lost: Vec<LostRange>,
    /// Where the damaged files were moved (kept as evidence; delete them when done).
    pub damaged_copy: Option<PathBuf>,
    /// The next sequence number the store will hand out.
    pub next_seq: i64,
}

/// What a repair goes by besides the database.
#[derive(Debug, Clone, Default)]
pub struct RepairInputs {
    /// The highest sequence number in the archive (after its unreadable segments left it).
    pub archived_upto: i64,
    /// The highest sequence number another record shows was acknowledged (the snapshot's
    /// last event; 0 for none), treated as the mark when higher.
    pub witnessed: i64,
    /// The ranges of the archive segments that could not be read, lost.
    pub archive_lost: Vec<LostRange>,
}

/// Every intact (seq, received_at, kind, job_id, body) row readable from a damaged database,
/// looked up one by one up to `upto` so a corrupt page loses only its own rows.
type Row = (i64, f64, String, Option<String>, String);

fn salvage(db: &Path, upto: i64, parse: &ParseBody) -> (Vec<Row>, i64) {
    let Ok(conn) = open_read_only(db) else {
        return (Vec::new(), 0);
    };
    let max_seq: i64 = conn
        .query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))
        .unwrap_or(0);
    let mut out = Vec::new();
    let sums = if has_row_sums(&conn).unwrap_or(false) {
        "sum"
    } else {
        "NULL"
    };
    let Ok(mut stmt) = conn.prepare(&format!(
        "SELECT seq, received_at, kind, job_id, body, {sums} FROM events WHERE seq = ?1"
    )) else {
        return (out, max_seq);
    };
    for seq in 1..=upto.max(max_seq) {
        let row = stmt
            .query_row(params![seq], |r| {
                Ok((
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .optional();
        if let Ok(Some((row, sum))) = row {
            let row: Row = row;
            let intact = sum_mismatch(
                row.0,
                row.1,
                &row.2,
                row.3.as_deref(),
                &row.4,
                sum.as_deref(),
            )
            .is_none();
            if intact && parse(&row.4).is_ok() {
                out.push(row);
            }
        }
    }
    (out, max_seq)
}

/// The prediction records of `db` whose submit is among `kept` (none when the table cannot
/// be read: a damaged log's records are lost with it).
fn salvage_predictions(db: &Path, kept: &[i64]) -> Vec<(i64, String, String)> {
    let kept: std::collections::HashSet<i64> = kept.iter().copied().collect();
    let Ok(conn) = open_read_only(db) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT submit_seq, job_id, body FROM predictions") else {
        return Vec::new();
    };
    let Ok(rows) = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))) else {
        return Vec::new();
    };
    rows.filter_map(Result::ok)
        .filter(|p: &(i64, String, String)| kept.contains(&p.0))
        .collect()
}

/// Repairs the store at `db`: keeps every intact event, records every missing or unreadable
/// acknowledged sequence number as lost, moves the damaged files aside (`<db>.damaged-<unix
/// time>`, with its `-wal`), and raises the sequence so no number is reused. The store must
/// not be open.
pub fn repair(
    db: &Path,
    parse: &ParseBody,
    create_schema: &dyn Fn(&Connection) -> Result<(), rusqlite::Error>,
    inputs: RepairInputs,
) -> Result<RepairReport, StoreError> {
    let RepairInputs {
        archived_upto,
        witnessed,
        archive_lost,
    } = inputs;
    let before = verify(db, true, parse)?;
    let mark = before.high_water.unwrap_or(0).max(witnessed);
    let (rows, max_seq) = salvage(db, mark.max(before.max_seq), parse);
    let upto = mark.max(max_seq);
    let present: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let known: Vec<LostRange> = before
        .recorded_losses
        .iter()
        .chain(&archive_lost)
        .cloned()
        .collect();
    // the events up to `archived_upto` are in the archive, not lost
    let missing = gaps(&present, upto, &known);
    let lost: Vec<LostRange> = archive_lost
        .into_iter()
        .chain(
            super::archive::outside(&missing, archived_upto)
                .into_iter()
                .map(|(a, b)| LostRange {
                    first_seq: a,
                    last_seq: b,
                    reason: "missing or unreadable at repair".into(),
                }),
        )
        .collect();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let fresh = db.with_extension(format!("repairing-{stamp}"));
    let sql = |e| StoreError::Sqlite {
        path: fresh.clone(),
        source: e,
    };
    {
        let mut conn = Connection::open(&fresh).map_err(sql)?;
        create_schema(&conn).map_err(sql)?;
        let tx = conn.transaction().map_err(sql)?;
        {
            let mut ins = tx
                .prepare("INSERT INTO events (seq, received_at, kind, job_id, body, sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .map_err(sql)?;
            for r in &rows {
                let sum = row_sum(r.0, r.1, &r.2, r.3.as_deref(), &r.4);
                ins.execute(params![r.0, r.1, r.2, r.3, r.4, sum])
                    .map_err(sql)?;
            }
            // the predictions recorded at the kept submits stay with them
            let mut rec = tx
                .prepare("INSERT OR IGNORE INTO predictions (submit_seq, job_id, body) VALUES (?1, ?2, ?3)")
                .map_err(sql)?;
            for p in salvage_predictions(db, &present) {
                rec.execute(params![p.0, p.1, p.2]).map_err(sql)?;
            }
            let mut loss = tx
                .prepare("INSERT INTO losses (first_seq, last_seq, reason, recorded_at) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql)?;
            for l in before.recorded_losses.iter().chain(&lost) {
                loss.execute(params![l.first_seq, l.last_seq, l.reason, stamp as f64])
                    .map_err(sql)?;
            }
            // never hand out a number at or below the mark again
            tx.execute("DELETE FROM sqlite_sequence WHERE name = 'events'", [])
                .map_err(sql)?;
            tx.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?1)",
                params![upto],
            )
            .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        conn.pragma_update(None, "journal_mode", "DELETE")
            .map_err(sql)?;
    }
    let aside = swap_in(db, &fresh, stamp)?;
    let mut hw = HighWater::open(db, 0)?;
    hw.record(upto)?;
    Ok(RepairReport {
        kept: rows.len() as i64,
        lost,
        damaged_copy: Some(aside),
        next_seq: upto + 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_skip_recorded_losses() {
        let losses = vec![LostRange {
            first_seq: 4,
            last_seq: 5,
            reason: String::new(),
        }];
        assert_eq!(gaps(&[1, 2, 3, 6], 6, &losses), vec![]);
        assert_eq!(gaps(&[1, 2, 3, 6], 9, &losses), vec![(7, 9)]);
        assert_eq!(gaps(&[2, 3], 3, &[]), vec![(1, 1)]);
        assert_eq!(gaps(&[], 3, &[]), vec![(1, 3)]);
        assert_eq!(gaps(&[1, 5], 5, &losses), vec![(2, 3)]);
    }

    #[test]
    fn the_mark_survives_reopen_and_a_torn_record_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.sqlite");
        assert_eq!(read_mark(&db).unwrap(), MarkState::Missing);
        let mut hw = HighWater::open(&db, 0).unwrap();
        hw.record(41).unwrap();
        hw.record(7).unwrap(); // never lowered
        assert_eq!(read_mark(&db).unwrap(), MarkState::At(41));
        let path = high_water_path(&db);
        let mut s = std::fs::read_to_string(&path).unwrap();
        s.replace_range(0..1, "9");
        std::fs::write(&path, s).unwrap();
        assert_eq!(read_mark(&db).unwrap(), MarkState::Damaged);
    }
}
