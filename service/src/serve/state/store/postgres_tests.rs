//! The PostgreSQL store against a real PostgreSQL 15 (started per test by the shared
//! harness; skipped loudly outside CI when the server binaries are absent).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

use augur_test_fixtures::postgres::TestPostgres;

fn started(id: &str, at: f64) -> Event {
    Event::JobStarted {
        job_id: id.into(),
        at,
    }
}

type Seen = Arc<Mutex<Vec<i64>>>;

/// Opens the store at `url` for the `none` backend; `seen` gets every applied seq in order.
fn open(url: &str, seen: &Seen) -> (PgStore, Vec<StoredEvent>) {
    let s = seen.clone();
    PgStore::open(
        url,
        "none",
        "",
        Box::new(move |evs| {
            s.lock().unwrap().extend(evs.iter().map(|e| e.seq));
            Vec::new()
        }),
        Box::new(|_| {}),
    )
    .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn appends_are_durable_ordered_and_numbers_never_reused_after_restart() {
    let Some(server) = TestPostgres::start("postgres store") else {
        return;
    };
    let url = server.url("postgres");
    let rt = runtime();
    let seen = Seen::default();
    let (store, existing) = open(&url, &seen);
    assert!(existing.is_empty());
    store.follow().unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let st = store.clone();
            rt.spawn(async move {
                st.append(vec![
                    started(&format!("a{i}"), 1.0),
                    started(&format!("b{i}"), 2.0),
                ])
                .await
                .unwrap()
            })
        })
        .collect();
    let mut acked = Vec::new();
    for t in tasks {
        let seqs = rt.block_on(t).unwrap();
        assert_eq!(seqs.len(), 2);
        assert_eq!(seqs[1], seqs[0] + 1, "a request's events are contiguous");
        acked.extend(seqs);
    }
    acked.sort();
    assert_eq!(acked, (1..=40).collect::<Vec<i64>>());
    // applied once each, in sequence order, by the time they were acknowledged
    assert_eq!(*seen.lock().unwrap(), (1..=40).collect::<Vec<i64>>());
    assert_eq!(store.count().unwrap(), 40);
    store.check_writable().unwrap();
    store.close();

    // a restart reads them back and continues above them
    let seen = Seen::default();
    let (store, existing) = open(&url, &seen);
    assert_eq!(existing.len(), 40);
    assert_eq!(existing[3].seq, 4);
    store.follow().unwrap();
    let more = rt.block_on(store.append(vec![started("c", 3.0)])).unwrap();
    assert_eq!(more, vec![41]);
    assert_eq!(store.read_after(39, 10).unwrap().len(), 2);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![41],
        "only the new event is applied"
    );
    store.close();

    // a database that lost an acknowledged event is refused, not silently renumbered
    let (store, _) = open(&url, &Seen::default());
    store
        .0
        .reader
        .lock()
        .unwrap()
        .with(|c, u| {
            c.execute("DELETE FROM augur_events WHERE seq = 41", &[])
                .map_err(pg(u))
        })
        .unwrap();
    store.close();
    let err = PgStore::open(&url, "none", "", Box::new(|_| Vec::new()), Box::new(|_| {}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("41 were acknowledged but 40 events are stored"),
        "{err}"
    );
}

#[test]
fn two_replicas_append_concurrently_into_one_gap_free_log_each_applies_in_order() {
    let Some(server) = TestPostgres::start("postgres store") else {
        return;
    };
    let url = server.url("postgres");
    let rt = runtime();
    let (seen_a, seen_b) = (Seen::default(), Seen::default());
    let (a, _) = open(&url, &seen_a);
    let (b, _) = open(&url, &seen_b);
    a.follow().unwrap();
    b.follow().unwrap();
    const PER: usize = 150;
    const TOTAL: i64 = 2 * PER as i64 * 2;
    // a reader tailing `seq > last` must never find a number missing below a visible one
    let tail = {
        let reader = a.clone();
        std::thread::spawn(move || {
            let mut last = 0;
            let start = Instant::now();
            while last < TOTAL {
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "tail stuck at {last}"
                );
                for e in reader.read_after(last, 1000).unwrap() {
                    assert_eq!(e.seq, last + 1, "a gap was visible to a reader");
                    last = e.seq;
                }
            }
        })
    };
    // each replica appends its requests one after the other (two events each), both at once
    let writer = |store: &PgStore, name: &'static str| {
        let store = store.clone();
        rt.spawn(async move {
            let mut acked = Vec::new();
            for i in 0..PER {
                let id = format!("{name}{i}");
                acked.extend(
                    store
                        .append(vec![started(&id, 1.0), started(&id, 2.0)])
                        .await
                        .unwrap(),
                );
            }
            acked
        })
    };
    let (ta, tb) = (writer(&a, "a"), writer(&b, "b"));
    let mut acked = rt.block_on(ta).unwrap();
    acked.extend(rt.block_on(tb).unwrap());
    tail.join().unwrap();
    acked.sort();
    assert_eq!(
        acked,
        (1..=TOTAL).collect::<Vec<i64>>(),
        "numbers unique, none lost"
    );
    let log = a.read_after(0, 10_000).unwrap();
    assert_eq!(
        log.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=TOTAL).collect::<Vec<i64>>()
    );
    // commit order: each replica's requests appear in the order it made them
    for name in ["a", "b"] {
        let order: Vec<usize> = log
            .iter()
            .filter_map(|e| e.event.job_id()?.strip_prefix(name)?.parse().ok())
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "{name}'s requests out of order");
    }
    // both replicas applied the whole log, once each, in sequence order
    for seen in [&seen_a, &seen_b] {
        wait_until("every event applied", || {
            seen.lock().unwrap().len() >= TOTAL as usize
        });
        assert_eq!(*seen.lock().unwrap(), (1..=TOTAL).collect::<Vec<i64>>());
    }
    assert!(b.wait_applied(Duration::from_secs(5)).unwrap());
    a.close();
    b.close();
}

#[test]
fn a_database_belongs_to_one_backend_and_cluster_and_keeps_the_appenders_records() {
    let Some(server) = TestPostgres::start("postgres store") else {
        return;
    };
    server.create_db("k8s");
    let url = server.url("k8s");
    let rt = runtime();
    let record = |evs: &[StoredEvent]| -> Vec<PredictionRecord> {
        evs.iter()
            .filter(|e| matches!(e.event, Event::JobSubmitted { .. }))
            .map(|e| PredictionRecord {
                submit_seq: e.seq,
                job_id: e.event.job_id().unwrap_or_default().to_string(),
                body: format!("{{\"by\":\"{}\"}}", std::process::id()),
            })
            .collect()
    };
    let identity = "in-cluster=10.0.0.1 namespace=ml";
    let (a, _) = PgStore::open(
        &url,
        "kubernetes",
        identity,
        Box::new(record),
        Box::new(|_| {}),
    )
    .unwrap();
    a.follow().unwrap();
    // a second replica of the same cluster, which applies the log from its start
    let loaded: Arc<Mutex<Vec<i64>>> = Arc::default();
    let l = loaded.clone();
    let (b, existing) = PgStore::open(
        &url,
        "kubernetes",
        identity,
        Box::new(|_| Vec::new()),
        Box::new(move |r| l.lock().unwrap().extend(r.iter().map(|r| r.submit_seq))),
    )
    .unwrap();
    assert!(existing.is_empty());
    let submit = Event::JobSubmitted {
        job_id: "ml/x".into(),
        at: 5.0,
        profile: Default::default(),
        dag: None,
    };
    let seqs = rt.block_on(a.append(vec![submit])).unwrap();
    // the appender stored what it answered before acknowledging
    let records = a.read_predictions().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].submit_seq, seqs[0]);
    assert_eq!(records[0].job_id, "ml/x");
    // the other replica applies the submit with the appender's answers
    b.follow().unwrap();
    wait_until("the record loaded", || loaded.lock().unwrap().len() == 1);
    assert_eq!(*loaded.lock().unwrap(), seqs);
    a.close();
    b.close();

    // another cluster, or the simulator, on the same database is refused with both named
    for (backend, cluster) in [
        ("kubernetes", "in-cluster=10.9.9.9 namespace=ml"),
        ("sim", "sim:philly"),
    ] {
        let err = PgStore::open(
            &url,
            backend,
            cluster,
            Box::new(|_| Vec::new()),
            Box::new(|_| {}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(
                "belongs to backend `kubernetes` (cluster `in-cluster=10.0.0.1 namespace=ml`)"
            ) && err.contains(&format!("not to backend `{backend}`")),
            "{err}"
        );
    }
}
