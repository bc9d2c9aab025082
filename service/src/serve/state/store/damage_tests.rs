//! Every kind of damage a crash or a disk can do to the log: refused at open with the
//! missing range named, repaired keeping every intact event (and the predictions recorded
//! at its submits), sequence never reused.

use super::*;
use std::fs::OpenOptions;

fn started(i: usize) -> Event {
    Event::JobStarted {
        job_id: format!("j{i}"),
        at: i as f64,
    }
}

/// 2,000 acknowledged events in groups of 50, then a crash image (files copied while the
/// store is open: what `kill -9` leaves) in a new folder; returns that folder's database.
async fn crashed_store(dir: &Path) -> PathBuf {
    let live = dir.join("live/events.sqlite");
    let (store, _) = Store::open(&live, Box::new(|_| Vec::new())).unwrap();
    for g in 0..40 {
        let seqs = store
            .append((0..50).map(|i| started(g * 50 + i)).collect())
            .await
            .unwrap();
        assert_eq!(seqs.len(), 50);
    }
    let crash = dir.join("crash");
    std::fs::create_dir_all(&crash).unwrap();
    for suffix in ["", "-wal", ".hwm"] {
        let from = PathBuf::from(format!("{}{suffix}", live.display()));
        if from.exists() {
            std::fs::copy(&from, crash.join(format!("events.sqlite{suffix}"))).unwrap();
        }
    }
    crash.join("events.sqlite")
}

fn wal(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

fn refused(db: &Path) -> IntegrityReport {
    match Store::open(db, Box::new(|_| Vec::new())) {
        Err(StoreError::Damaged(r)) => *r,
        Err(e) => panic!("refused with another error: {e}"),
        Ok(_) => panic!("a damaged store was opened"),
    }
}

/// Repairs `db`, reopens it and appends one event: returns (repair, kept events, new seq).
async fn repair_and_append(db: &Path) -> (RepairReport, usize, i64) {
    let report = repair(db, 0).unwrap();
    assert!(
        check(db, 0).unwrap().is_sound(),
        "repaired store checks sound"
    );
    let (store, existing) = Store::open(db, Box::new(|_| Vec::new())).unwrap();
    let seq = store.append(vec![started(99_999)]).await.unwrap()[0];
    store.close();
    (report, existing.len(), seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_keeps_the_predictions_of_the_events_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    let (store, _) = Store::open(&db, Box::new(record_each)).unwrap();
    store.append((0..5).map(started).collect()).await.unwrap();
    let before = store.read_predictions().unwrap();
    assert_eq!(before.len(), 5);
    store.close();
    let (_, kept, _) = repair_and_append(&db).await;
    assert_eq!(kept, 5);
    let (store, _) = Store::open(&db, Box::new(|_| Vec::new())).unwrap();
    assert_eq!(store.read_predictions().unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_image_reopens_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    let (store, existing) = Store::open(&db, Box::new(|_| Vec::new())).unwrap();
    assert_eq!(existing.len(), 2000);
    assert_eq!(store.append(vec![started(1)]).await.unwrap(), vec![2001]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_cut_in_half_is_refused_then_repaired_without_reusing_seq() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    let len = std::fs::metadata(wal(&db)).unwrap().len();
    let f = OpenOptions::new().write(true).open(wal(&db)).unwrap();
    f.set_len(len / 2).unwrap();
    let report = refused(&db);
    let (first, last) = report.missing[0];
    assert_eq!(last, 2000, "{report:?}");
    assert!(first > 1 && first < 2000, "{report:?}");
    assert_eq!(report.events, first - 1);
    let (rep, kept, seq) = repair_and_append(&db).await;
    assert_eq!(kept as i64, first - 1);
    assert_eq!(rep.lost.len(), 1);
    assert_eq!((rep.lost[0].first_seq, rep.lost[0].last_seq), (first, 2000));
    assert_eq!(seq, 2001, "no sequence number reused");
    assert!(rep.damaged_copy.unwrap().exists(), "evidence kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bytes_in_the_wal_are_refused_then_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    let mut bytes = std::fs::read(wal(&db)).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 20] {
        *b ^= 0xa5;
    }
    std::fs::write(wal(&db), bytes).unwrap();
    let report = refused(&db);
    assert_eq!(report.missing.last().unwrap().1, 2000);
    let lost: i64 = report.missing.iter().map(|(a, b)| b - a + 1).sum();
    let (rep, kept, seq) = repair_and_append(&db).await;
    assert_eq!(
        kept as i64 + lost,
        2000,
        "every event is kept or reported lost"
    );
    let reported: i64 = rep.lost.iter().map(|l| l.last_seq - l.first_seq + 1).sum();
    assert_eq!(reported, lost);
    assert_eq!(seq, 2001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_wal_or_database_never_restarts_the_sequence() {
    for victim in ["-wal", ""] {
        let dir = tempfile::tempdir().unwrap();
        let db = crashed_store(dir.path()).await;
        let target = PathBuf::from(format!("{}{victim}", db.display()));
        OpenOptions::new()
            .write(true)
            .open(&target)
            .unwrap()
            .set_len(0)
            .unwrap();
        let report = refused(&db);
        assert!(!report.is_sound(), "{victim}: {report:?}");
        let (rep, kept, seq) = repair_and_append(&db).await;
        let reported: i64 = rep.lost.iter().map(|l| l.last_seq - l.first_seq + 1).sum();
        assert_eq!(kept as i64 + reported, 2000, "{victim}");
        assert_eq!(
            seq, 2001,
            "{victim}: the next event must not get seq 1 again"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_database_with_its_mark_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    std::fs::remove_file(&db).unwrap();
    std::fs::remove_file(wal(&db)).unwrap();
    let report = refused(&db);
    assert_eq!(report.missing, vec![(1, 2000)]);
    let (rep, kept, seq) = repair_and_append(&db).await;
    assert_eq!((kept, rep.lost.len(), seq), (0, 1, 2001));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_row_is_refused_and_repair_drops_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute("UPDATE events SET body = 'not json' WHERE seq = 777", [])
            .unwrap();
    }
    // its checksum no longer matches: refused at open, naming the row
    match Store::open(&db, Box::new(|_| Vec::new())) {
        Err(StoreError::Damaged(r)) => assert_eq!(r.unreadable[0].0, 777),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened"),
    }
    let report = check(&db, 0).unwrap();
    assert_eq!(report.unreadable.len(), 1);
    let (rep, kept, seq) = repair_and_append(&db).await;
    assert_eq!(kept, 1999);
    assert_eq!((rep.lost[0].first_seq, rep.lost[0].last_seq), (777, 777));
    assert_eq!(seq, 2001);
    // the recorded loss is accepted from now on, and reported by check
    assert_eq!(check(&db, 0).unwrap().recorded_losses.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_is_marked_and_the_next_start_consumes_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    let (store, _) = Store::open(&db, Box::new(|_| Vec::new())).unwrap();
    store.append(vec![started(1)]).await.unwrap();
    store.close();
    assert!(clean_marker(&db).exists());
    let (store, existing) = Store::open(&db, Box::new(|_| Vec::new())).unwrap();
    assert!(
        !clean_marker(&db).exists(),
        "an unclean stop must not look clean"
    );
    assert_eq!(existing.len(), 1);
    store.close();
}

/// Records one prediction per event (a body naming its sequence number).
fn record_each(evs: &[StoredEvent]) -> Vec<PredictionRecord> {
    evs.iter()
        .map(|e| PredictionRecord {
            submit_seq: e.seq,
            job_id: format!("j{}", e.seq),
            body: format!("{{\"n\":{}}}", e.seq),
        })
        .collect()
}

/// Polls `f` every 20 ms for up to 30 s until it holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A group whose commit fails after the service applied it (a trigger stands in for a full
/// disk refusing its prediction records) is neither half-stored nor dropped: the writer
/// retries it under the same numbers until it commits (its request waits), refuses new
/// events at once meanwhile, and ingest resumes by itself once the disk takes writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_commit_fails_after_it_was_applied_is_retried_until_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    let (store, _) = Store::open(&db, Box::new(record_each)).unwrap();
    assert_eq!(store.append(vec![started(0)]).await.unwrap(), vec![1]);
    let other = Connection::open(&db).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON predictions \
             BEGIN SELECT RAISE(ABORT, 'no space left'); END;",
        )
        .unwrap();
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.append(vec![started(1), started(2)]).await })
    };
    until("the writer to stall", || store.stalled().is_some()).await;
    assert!(
        !waiting.is_finished(),
        "the failed group is not answered yet"
    );
    // neither its events nor any record were committed: no submit without its answers
    assert_eq!(store.count().unwrap(), 1);
    assert_eq!(store.read_predictions().unwrap().len(), 1);
    // new events are refused at once, and readiness says why
    match store.append(vec![started(3)]).await {
        Err(StoreError::Write {
            failure: WriteFailure::Stalled { full: false, .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let why = store.check_writable().unwrap_err();
    assert!(why.to_string().contains("retried"), "{why}");
    // the disk takes writes again: the group commits under the numbers it was given
    other.execute_batch("DROP TRIGGER refuse;").unwrap();
    assert_eq!(waiting.await.unwrap().unwrap(), vec![2, 3]);
    assert_eq!(store.stalled(), None);
    assert_eq!(store.check_writable(), Ok(()));
    assert_eq!(store.count().unwrap(), 3);
    assert_eq!(store.read_predictions().unwrap().len(), 3);
    assert_eq!(store.append(vec![started(4)]).await.unwrap(), vec![4]);
    drop(store);
    let (store, existing) = Store::open(&db, Box::new(record_each)).unwrap();
    assert_eq!(existing.len(), 4);
    store.close();
}

/// A row changed on disk that still reads as an event (another job id, as one flipped bit
/// could make it): its checksum finds it, in the check and on read; a repair drops only it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_changed_on_disk_fails_its_checksum_in_the_check_and_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = crashed_store(dir.path()).await;
    {
        let conn = Connection::open(&db).unwrap();
        let n = conn
            .execute(
                "UPDATE events SET body = replace(body, '\"j776\"', '\"j778\"') WHERE seq = 777",
                [],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let report = check(&db, 0).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.unreadable.len(), 1, "{:?}", report.problems());
    assert!(
        report.unreadable[0].1.contains("checksum"),
        "{:?}",
        report.unreadable
    );
    match Store::open(&db, Box::new(|_| Vec::new())) {
        Err(StoreError::Damaged(r)) => {
            assert_eq!(r.unreadable[0].0, 777);
            assert!(r.unreadable[0].1.contains("checksum"), "{:?}", r.unreadable);
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a changed row"),
    }
    let (rep, kept, _) = repair_and_append(&db).await;
    assert_eq!(kept, 1999);
    assert_eq!((rep.lost[0].first_seq, rep.lost[0].last_seq), (777, 777));
}

/// A store written before rows carried checksums: the check passes it as it is, the first
/// open gives every row its checksum, and from then on a changed row is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_before_checksums_get_them_at_the_first_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                received_at REAL NOT NULL,
                kind TEXT NOT NULL,
                job_id TEXT,
                body TEXT NOT NULL
            );",
        )
        .unwrap();
        for i in 0..3 {
            let ev = started(i);
            conn.execute(
                "INSERT INTO events (received_at, kind, job_id, body) VALUES (?1, ?2, ?3, ?4)",
                params![
                    1.0,
                    ev.kind(),
                    ev.job_id(),
                    serde_json::to_string(&ev).unwrap()
                ],
            )
            .unwrap();
        }
    }
    assert!(check(&db, 0).unwrap().is_sound());
    let (store, existing) = Store::open(&db, Box::new(|_| Vec::new())).unwrap();
    assert_eq!(existing.len(), 3);
    assert_eq!(store.append(vec![started(3)]).await.unwrap(), vec![4]);
    store.close();
    let conn = Connection::open(&db).unwrap();
    let unsummed: i64 = conn
        .query_row("SELECT count(*) FROM events WHERE sum IS NULL", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(unsummed, 0);
    conn.execute(
        "UPDATE events SET body = replace(body, '\"j1\"', '\"j2\"') WHERE seq = 2",
        [],
    )
    .unwrap();
    drop(conn);
    let report = check(&db, 0).unwrap();
    assert_eq!(report.unreadable.len(), 1, "{:?}", report.problems());
}
