//! Compaction: moves the oldest events out of the SQLite database into the archive
//! ([`super::archive`]), losing none.
//!
//! [`Store::compact`] archives the events with `seq <= upto` (the caller picks `upto`: the
//! service passes the first event of the oldest job it still holds in memory, minus one),
//! in segments of at most [`SEGMENT_EVENTS`]: each segment is written and synced, the
//! manifest naming it replaced atomically, and only then are its rows deleted from the
//! database, under the archive's write lock so a reader never sees an event in neither
//! place. The prediction records stay in the database. Sequence numbers are untouched: the
//! high-water mark and `AUTOINCREMENT` keep counting above everything ever stored.

use rusqlite::params;
use serde::Serialize;

use super::archive::{self, Line};
use super::{integrity, open_conn, Store, StoreError};

/// Most events in one archive segment.
pub const SEGMENT_EVENTS: i64 = 50_000;

/// Fewest events worth a compaction (a smaller tail waits for the next one).
pub const MIN_EVENTS: i64 = 1_000;

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CompactionReport {
    /// Events moved to the archive.
    pub archived: i64,
    /// Segments written.
    pub segments: usize,
    /// The highest sequence number in the archive afterwards.
    pub archived_upto: i64,
    /// Rows already archived by an interrupted compaction, dropped from the database.
    pub leftovers_dropped: usize,
}

impl Store {
    /// Moves the events with `seq <= upto` to the archive (nothing when fewer than
    /// [`MIN_EVENTS`] would move). Blocking; one compaction at a time (the service runs it
    /// from one background task).
    pub fn compact(&self, upto: i64) -> Result<CompactionReport, StoreError> {
        let conn = open_conn(&self.path)?;
        let sql = |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let mut report = CompactionReport::default();
        let mut from = self.archived_upto();
        let dir = self
            .archive
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .dir()
            .to_path_buf();
        // rows an interrupted compaction archived but did not delete
        report.leftovers_dropped = conn
            .execute("DELETE FROM events WHERE seq <= ?1", params![from])
            .map_err(sql)?;
        let db_max: i64 = conn
            .query_row("SELECT coalesce(max(seq), 0) FROM events", [], |r| r.get(0))
            .map_err(sql)?;
        let upto = upto.min(db_max);
        let waiting: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE seq > ?1 AND seq <= ?2",
                params![from, upto],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if waiting < MIN_EVENTS {
            report.archived_upto = from;
            return Ok(report);
        }
        let mut stmt = conn
            .prepare(
                "SELECT seq, received_at, body, kind, job_id, sum FROM events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3",
            )
            .map_err(sql)?;
        while from < upto {
            let lines = self.next_lines(&mut stmt, from, upto)?;
            let Some(last) = lines.last().map(|l| l.seq) else {
                break;
            };
            // a segment covers the whole range up to its last event (numbers lost before
            // are recorded in `losses`); readers wait only while its rows change place
            let Some(mut seg) = archive::write_segment(&dir, &lines)? else {
                break;
            };
            seg.first_seq = from + 1;
            let mut archive = self.archive.write().unwrap_or_else(|e| e.into_inner());
            archive.push(seg)?;
            conn.execute(
                "DELETE FROM events WHERE seq > ?1 AND seq <= ?2",
                params![from, last],
            )
            .map_err(sql)?;
            drop(archive);
            report.archived += lines.len() as i64;
            report.segments += 1;
            from = last;
        }
        report.archived_upto = from;
        tracing::info!(
            archived = report.archived,
            segments = report.segments,
            archived_upto = from,
            "store compacted: events moved to the archive"
        );
        Ok(report)
    }

    /// The rows after `from` up to `upto`, at most a segment's worth, each checked against
    /// its checksum: a row changed on disk is not archived as if sound.
    fn next_lines(
        &self,
        stmt: &mut rusqlite::Statement<'_>,
        from: i64,
        upto: i64,
    ) -> Result<Vec<Line>, StoreError> {
        let sql = |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let rows = stmt
            .query_map(params![from, upto, SEGMENT_EVENTS], |r| {
                Ok((
                    Line {
                        seq: r.get(0)?,
                        received_at: r.get(1)?,
                        body: r.get(2)?,
                    },
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .map_err(sql)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql)?;
        let mut lines = Vec::with_capacity(rows.len());
        for (line, kind, job_id, sum) in rows {
            if let Some(reason) = integrity::sum_mismatch(
                line.seq,
                line.received_at,
                &kind,
                job_id.as_deref(),
                &line.body,
                sum.as_deref(),
            ) {
                return Err(StoreError::BadRow {
                    path: self.path.clone(),
                    seq: line.seq,
                    reason,
                });
            }
            lines.push(line);
        }
        Ok(lines)
    }

    /// The highest sequence number in the archive (0 when nothing is archived).
    pub fn archived_upto(&self) -> i64 {
        self.archive
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .last_seq()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::serve::state::events::Event;

    fn started(i: i64) -> Event {
        Event::JobStarted {
            job_id: format!("j{i}"),
            at: 1_700_000_000.0 + i as f64,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compaction_keeps_every_event_readable_in_order_and_the_check_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let (store, _) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        for chunk in 0..5 {
            let events = (0..1000).map(|i| started(chunk * 1000 + i)).collect();
            store.append(events).await.unwrap();
        }
        let r = store.compact(3_500).unwrap();
        assert_eq!(r.archived, 3_500);
        assert_eq!(r.archived_upto, 3_500);
        assert_eq!(
            store.count().unwrap(),
            1_500,
            "the rest stays in the database"
        );
        // every event, in order, across the archive and the database
        let mut seqs = Vec::new();
        let mut after = 0;
        loop {
            let page = store.read_after(after, 777).unwrap();
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in &page {
                assert_eq!(e.event, started(e.seq - 1));
            }
            seqs.extend(page.iter().map(|e| e.seq));
        }
        assert_eq!(seqs, (1..=5_000).collect::<Vec<i64>>());
        // too little left to be worth it
        assert_eq!(store.compact(4_000).unwrap().archived, 0);
        let more = store.append(vec![started(5_000)]).await.unwrap();
        assert_eq!(more, vec![5_001], "sequence numbers continue");
        store.close();
        let report = crate::serve::state::store::check(&path, 0).unwrap();
        assert!(report.is_sound(), "{:?}", report.problems());
        // a reopened store replays everything, archive first
        let (store, existing) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        assert_eq!(existing.len(), 5_001);
        assert_eq!(store.append(vec![started(1)]).await.unwrap(), vec![5_002]);
        store.close();
        // the database deleted (its mark kept): refused, naming only what the archive lacks
        let aside = dir.path().join("aside");
        std::fs::create_dir_all(&aside).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let from = PathBuf::from(format!("{}{suffix}", path.display()));
            if from.exists() {
                std::fs::rename(&from, aside.join(format!("events.sqlite{suffix}"))).unwrap();
            }
        }
        match Store::open(&path, Box::new(|_| Vec::new())) {
            Err(StoreError::Damaged(r)) => assert_eq!(r.missing, vec![(3_501, 5_002)]),
            other => panic!("opened a store that lost events: {:?}", other.map(|_| ())),
        }
        for suffix in ["", "-wal", "-shm"] {
            let from = aside.join(format!("events.sqlite{suffix}"));
            if from.exists() {
                std::fs::rename(&from, format!("{}{suffix}", path.display())).unwrap();
            }
        }
        // a damaged segment fails the check
        let seg = archive::read_manifest(&archive::dir_of(&path))
            .unwrap()
            .segments[0]
            .clone();
        let seg_path = archive::dir_of(&path).join(&seg.file);
        let mut bytes = std::fs::read(&seg_path).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&seg_path, bytes).unwrap();
        let report = crate::serve::state::store::check(&path, 0).unwrap();
        assert!(!report.is_sound());
        assert!(
            report.problems().iter().any(|p| p.contains("checksum")),
            "{:?}",
            report.problems()
        );
    }

    /// A deleted archive segment: the store refuses to open naming its range; a repair
    /// records the range as lost, after which the check passes, the store opens with every
    /// other event, the loss recorded, and numbers continue after everything ever stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_archive_segment_is_named_at_open_and_recorded_as_lost_by_a_repair() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.sqlite");
        let (store, _) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        for chunk in 0..4 {
            let events = (0..1000).map(|i| started(chunk * 1000 + i)).collect();
            store.append(events).await.unwrap();
        }
        for upto in [1_000, 2_000, 3_000] {
            assert_eq!(store.compact(upto).unwrap().archived_upto, upto);
        }
        store.close();
        let adir = archive::dir_of(&path);
        let segments = archive::read_manifest(&adir).unwrap().segments;
        assert_eq!(segments.len(), 3);
        std::fs::remove_file(adir.join(&segments[1].file)).unwrap();
        match Store::open(&path, Box::new(|_| Vec::new())) {
            Err(e @ StoreError::ArchiveDamaged { .. }) => {
                let text = e.to_string();
                assert!(text.contains("seq 1001..=2000"), "{text}");
                assert!(text.contains("augur store repair"), "{text}");
            }
            other => panic!("opened without a segment: {:?}", other.map(|_| ())),
        }
        let report = crate::serve::state::store::check(&path, 0).unwrap();
        assert!(!report.is_sound());
        assert!(
            report
                .problems()
                .iter()
                .any(|p| p.contains("seq 1001..=2000")),
            "{:?}",
            report.problems()
        );
        let repaired = crate::serve::state::store::repair(&path, 0).unwrap();
        assert_eq!(
            repaired
                .lost
                .iter()
                .map(|l| (l.first_seq, l.last_seq))
                .collect::<Vec<_>>(),
            vec![(1_001, 2_000)]
        );
        let report = crate::serve::state::store::check(&path, 0).unwrap();
        assert!(report.is_sound(), "{:?}", report.problems());
        assert_eq!(report.recorded_losses.len(), 1);
        let (store, existing) = Store::open(&path, Box::new(|_| Vec::new())).unwrap();
        let seqs: Vec<i64> = existing.iter().map(|e| e.seq).collect();
        let want: Vec<i64> = (1..=1_000).chain(2_001..=4_000).collect();
        assert_eq!(seqs, want);
        assert_eq!(store.append(vec![started(0)]).await.unwrap(), vec![4_001]);
        store.close();
    }
}
