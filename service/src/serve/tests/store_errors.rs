//! A store that fails answers 500 without its internal text: the store's path, the data
//! folder's file names and SQLite's message go to the log, never into the answer.

use super::*;

/// Asserts that the 500 answer `v` names no path, file of the data folder `dir`, or SQL.
fn assert_no_internal_text(dir: &Path, v: &Value) {
    assert_eq!(v["error"]["code"], "internal", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(crate::serve::http::error::INTERNAL_MESSAGE),
        "{v}"
    );
    let text = v.to_string().to_lowercase();
    let resolved = std::fs::canonicalize(dir).unwrap();
    for p in [dir, resolved.as_path()] {
        assert!(!text.contains(&p.to_string_lossy().to_lowercase()), "{v}");
    }
    let files = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_lowercase());
    for word in files.chain(["sqlite", "sql", "table", "/"].map(String::from)) {
        assert!(!text.contains(&word), "`{word}` in {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_answers_500_without_internal_text() {
    let (state, dir) = service(false);
    let started = |id: &str| json!({ "type": "job_started", "job_id": id, "at": 1.0e9 });
    ingest(&state, &[started("a")]).await;
    let (st, v) = call(&state, "GET", "/v1/events", None, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["events"].as_array().unwrap().len(), 1, "{v}");

    // the store's table goes away under the running service: every read and write fails
    let db = rusqlite::Connection::open(dir.path().join("events.sqlite")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    db.execute_batch("ALTER TABLE events RENAME TO moved_away")
        .unwrap();
    drop(db);

    let (st, v) = call(&state, "GET", "/v1/events", None, true).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_no_internal_text(dir.path(), &v);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("reading the events failed"), "{v}");

    let (st, v) = call(&state, "POST", "/v1/events", Some(started("b")), true).await;
    assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_no_internal_text(dir.path(), &v);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("not acknowledged"), "{v}");
}
