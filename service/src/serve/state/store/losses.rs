//! The ranges of sequence numbers a repair recorded as lost (table `losses`), and the
//! arithmetic of ranges around them: both the database's verification ([`super::integrity`])
//! and the archive's ([`super::archive`]) skip what is recorded here.

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

/// A range of sequence numbers a repair found missing and recorded as lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostRange {
    pub first_seq: i64,
    pub last_seq: i64,
    pub reason: String,
}

/// Ranges of sequence numbers in `1..=upto` absent from `present` (sorted ascending) and not
/// covered by `losses`.
pub(super) fn gaps(present: &[i64], upto: i64, losses: &[LostRange]) -> Vec<(i64, i64)> {
    let covered = |s: i64| losses.iter().any(|l| l.first_seq <= s && s <= l.last_seq);
    let mut out: Vec<(i64, i64)> = Vec::new();
    let mut push = |a: i64, b: i64| {
        // split [a, b] around the recorded losses
        let mut s = a;
        while s <= b {
            if covered(s) {
                s += 1;
                continue;
            }
            let start = s;
            while s <= b && !covered(s) {
                s += 1;
            }
            out.push((start, s - 1));
        }
    };
    let mut next = 1;
    for &seq in present {
        if seq > next {
            push(next, seq - 1);
        }
        next = next.max(seq + 1);
    }
    if upto >= next {
        push(next, upto);
    }
    out
}

/// The ranges of `from..=to` not covered by `losses`.
pub fn unrecorded(from: i64, to: i64, losses: &[LostRange]) -> Vec<(i64, i64)> {
    gaps(&[], to, losses)
        .into_iter()
        .filter(|&(_, b)| b >= from)
        .map(|(a, b)| (a.max(from), b))
        .collect()
}

/// Reads the recorded losses (none when the table does not exist yet).
pub(super) fn recorded_losses(conn: &Connection) -> Result<Vec<LostRange>, rusqlite::Error> {
    let exists: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'losses'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt =
        conn.prepare("SELECT first_seq, last_seq, reason FROM losses ORDER BY first_seq")?;
    let rows = stmt.query_map([], |r| {
        Ok(LostRange {
            first_seq: r.get(0)?,
            last_seq: r.get(1)?,
            reason: r.get(2)?,
        })
    })?;
    rows.collect()
}
