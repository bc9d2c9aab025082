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
    let report = repair(db).unwrap();
    assert!(check(db).unwrap().is_sound(), "repaired store checks sound");
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
    match Store::open(&db, Box::new(|_| Vec::new())) {
        Err(StoreError::BadRow { seq, .. }) => assert_eq!(seq, 777),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened"),
    }
    let report = check(&db).unwrap();
    assert_eq!(report.unreadable.len(), 1);
    let (rep, kept, seq) = repair_and_append(&db).await;
    assert_eq!(kept, 1999);
    assert_eq!((rep.lost[0].first_seq, rep.lost[0].last_seq), (777, 777));
    assert_eq!(seq, 2001);
    // the recorded loss is accepted from now on, and reported by check
    assert_eq!(check(&db).unwrap().recorded_losses.len(), 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_and_its_prediction_records_commit_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("events.sqlite");
    let (store, _) = Store::open(&db, Box::new(record_each)).unwrap();
    assert_eq!(store.append(vec![started(0)]).await.unwrap(), vec![1]);
    // the disk refuses the next prediction records (a trigger stands in for a full disk)
    let other = Connection::open(&db).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON predictions \
             BEGIN SELECT RAISE(ABORT, 'no space left'); END;",
        )
        .unwrap();
    let refused = store.append(vec![started(1), started(2)]).await;
    assert!(
        refused.is_err(),
        "a group whose records failed is not acknowledged"
    );
    // neither its events nor any record were committed: no submit without its answers
    assert_eq!(store.count().unwrap(), 1);
    assert_eq!(store.read_predictions().unwrap().len(), 1);
    // the service had applied the group: the writer stops rather than reuse its numbers
    assert!(matches!(
        store.append(vec![started(3)]).await,
        Err(StoreError::Closed)
    ));
    other.execute_batch("DROP TRIGGER refuse;").unwrap();
    drop(store);
    let (store, existing) = Store::open(&db, Box::new(record_each)).unwrap();
    assert_eq!(existing.len(), 1);
    let seq = store.append(vec![started(4)]).await.unwrap()[0];
    assert!(seq >= 2);
    assert_eq!(store.read_predictions().unwrap().len(), 2);
}
