//! Every registered kind goes through the whole lifecycle: loaded at start, its online state
//! snapshotted and restored (and rebuilt from the log when the snapshot is another
//! format's), listed by `/v1/models`, swapped by promote and rollback, and announced in
//! `ModelsSwapped`. The checks loop over [`kinds::registered`]: a kind added to the list is
//! covered without touching this file.

use std::collections::BTreeMap;
use std::io::Read;

use augur_predictor::{ModelKind, ModelRegistry, NewArtifact};
use axum::http::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::*;
use crate::serve::kinds;
use crate::serve::state::snapshot::{self, LoadOutcome, Written};
use crate::serve::{OpenInfo, ServeEvent};

#[test]
fn the_registration_list_holds_every_model_kind_once_in_order() {
    let registered: Vec<ModelKind> = kinds::registered().iter().map(|k| k.kind()).collect();
    assert_eq!(registered, ModelKind::ALL.to_vec());
    for kind in ModelKind::ALL {
        assert_eq!(kinds::spec(kind).map(|k| k.kind()), Some(kind));
        assert_eq!(kinds::by_name(kind.name()).map(|k| k.kind()), Some(kind));
    }
}

fn config(dir: &Path) -> ServeConfig {
    ServeConfig {
        data_dir: dir.to_path_buf(),
        token: Some(TOKEN.into()),
        trees: Some(15),
        compaction_interval_secs: 0.0,
        retrain_every_jobs: 0,
        snapshot_interval_secs: 0.0,
        snapshot_every_events: 0,
        ..ServeConfig::default()
    }
}

fn open(dir: &Path) -> (AppState, OpenInfo) {
    tokio::task::block_in_place(|| AppState::open(config(dir))).unwrap()
}

fn stop(state: AppState) {
    tokio::task::block_in_place(|| {
        let store = state.store.clone();
        drop(state);
        store.close();
    });
}

/// Each kind with an online state and the size of its saved form (the same state saves
/// to the same number of bytes, whatever the order of its maps).
fn saved_sizes(state: &AppState) -> BTreeMap<ModelKind, usize> {
    state.online().saved_sizes().unwrap()
}

/// Saves a copy of version 1 of `kind` (its payload as stored) as a new version.
fn copy_version_1(registry: &ModelRegistry, kind: ModelKind) -> u32 {
    let meta = registry.verify(kind.name(), 1).unwrap();
    let path = registry
        .version_dir(kind.name(), 1)
        .join(&meta.payload_file);
    let bytes = std::fs::read(path).unwrap();
    let mut json = Vec::new();
    if meta.payload_file.ends_with(".gz") {
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut json)
            .unwrap();
    } else {
        json = bytes;
    }
    let payload: Value = serde_json::from_slice(&json).unwrap();
    let info = NewArtifact::new("copy", 1);
    registry
        .save_as(kind.name(), &payload, meta.feature_schema_version, info)
        .unwrap()
        .version
}

/// The versions the next `ModelsSwapped` on `rx` announces.
async fn swapped(
    rx: &mut tokio::sync::broadcast::Receiver<ServeEvent>,
) -> BTreeMap<ModelKind, u32> {
    let deadline = std::time::Duration::from_secs(60);
    loop {
        match tokio::time::timeout(deadline, rx.recv()).await {
            Ok(Ok(ServeEvent::ModelsSwapped { versions })) => return versions,
            Ok(Ok(_)) => continue,
            other => panic!("no ModelsSwapped: {other:?}"),
        }
    }
}

/// Rewrites the snapshot file as format `version` (checksum recomputed: a sound file of
/// another build).
fn rewrite_format(path: &Path, version: u32) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    let n = bytes.len() - 32;
    let sum = Sha256::digest(&bytes[..n]);
    bytes[n..].copy_from_slice(&sum);
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_loaded_snapshotted_listed_swapped_and_announced() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(trained_models(), &dir.path().join("models"));
    let (state, info) = open(dir.path());
    assert!(
        info.needs_history.is_empty() && info.needs_bundled.is_empty(),
        "{info:?}"
    );
    for k in kinds::registered() {
        assert_eq!(
            state.online().models.version(k.kind()),
            Some(1),
            "{} loaded at start",
            k.kind()
        );
    }

    // events for every kind's online state: submits, starts, finishes, metric points
    let jobs = &mira()[TRAIN_JOBS..TRAIN_JOBS + 200];
    let mut events = trace_events_with_starts(jobs);
    let running = events
        .iter()
        .rev()
        .find(|e| e["type"] == "job_started")
        .map(|e| e["job_id"].clone())
        .unwrap();
    let at = events.last().unwrap()["at"].as_f64().unwrap();
    events.push(
        json!({ "type": "metric_points", "job_id": running, "points": [
            { "step": 1, "loss": 2.5, "at": at }, { "step": 2, "loss": 1.5, "at": at },
        ]}),
    );
    ingest(&state, &events).await;
    let sizes = saved_sizes(&state);
    let with_state: Vec<ModelKind> = kinds::registered()
        .iter()
        .map(|k| k.kind())
        .filter(|&k| state.online().models.get(k).unwrap().has_online())
        .collect();
    assert_eq!(sizes.keys().copied().collect::<Vec<_>>(), with_state);

    // snapshotted: the header stamps every kind with a state; a restart restores them all
    let written = tokio::task::block_in_place(|| snapshot::write(&state)).unwrap();
    assert!(matches!(written, Written::Written { .. }), "{written:?}");
    let path = state.ext.snapshots.path();
    let header = snapshot::read_header(&path).unwrap();
    for kind in &with_state {
        assert_eq!(header.models[kind.name()].version, 1, "{kind} stamped");
    }
    stop(state);
    let (state, info) = open(dir.path());
    assert_eq!(info.snapshot, LoadOutcome::Loaded);
    assert_eq!(info.events_replayed, 0);
    assert_eq!(saved_sizes(&state), sizes, "every kind's state restored");

    // a snapshot of the previous format is refused cleanly and the log rebuilds the same
    stop(state);
    rewrite_format(&path, snapshot::FORMAT_VERSION - 1);
    let (state, info) = open(dir.path());
    assert_eq!(info.snapshot, LoadOutcome::Stale);
    assert_eq!(info.events_replayed, events.len());
    assert_eq!(
        saved_sizes(&state),
        sizes,
        "every kind's state rebuilt from the log"
    );

    // listed
    let (st, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(st, StatusCode::OK, "{m}");
    for k in kinds::registered() {
        let name = k.kind().name();
        assert_eq!(m["serving"][name], 1, "{name} served: {m}");
        assert_eq!(
            m["kinds"][name]["versions"][0]["version"], 1,
            "{name} listed: {m}"
        );
    }
    // which failure candidate answers is in its notes
    let served = state.online().models.failure().unwrap().model.served.name();
    assert_eq!(
        m["kinds"]["failure"]["versions"][0]["notes"]["served"], served,
        "{m}"
    );

    // promoted and rolled back, each swap announced with every kind's version
    let registry = training::open_registry(dir.path()).unwrap();
    let mut rx = state.events.subscribe();
    for k in kinds::registered() {
        let kind = k.kind();
        let v2 = copy_version_1(&registry, kind);
        let path = format!("/v1/models/{kind}/promote");
        let (st, v) = call(&state, "POST", &path, Some(json!({ "version": v2 })), true).await;
        assert_eq!(st, StatusCode::OK, "{kind}: {v}");
        assert_eq!(
            state.online().models.version(kind),
            Some(v2),
            "{kind} promoted"
        );
        let versions = swapped(&mut rx).await;
        assert_eq!(versions.get(&kind), Some(&v2), "{kind} in ModelsSwapped");
        assert_eq!(versions.len(), kinds::registered().len(), "{versions:?}");

        let path = format!("/v1/models/{kind}/rollback");
        let (st, v) = call(&state, "POST", &path, None, true).await;
        assert_eq!(st, StatusCode::OK, "{kind}: {v}");
        assert_eq!(
            state.online().models.version(kind),
            Some(1),
            "{kind} rolled back"
        );
        assert_eq!(
            swapped(&mut rx).await.get(&kind),
            Some(&1),
            "{kind} in ModelsSwapped"
        );
    }
    stop(state);
}
