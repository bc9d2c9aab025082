//! The model lifecycle: a retrain (manual too) replaces the served model only when it passes
//! the gate on the held-out slice; a version that does not load is never promoted, rolled
//! back to, or served at start.

use augur_datasets::JobRecord;
use augur_predictor::registry::{Artifact, Selector};
use augur_predictor::{NewArtifact, RuntimePredictor};
use axum::http::StatusCode;
use serde_json::json;

use super::*;

fn save_unloadable_runtime(models: &Path) -> u32 {
    save_unloadable(
        models,
        "runtime",
        RuntimePredictor::CURRENT_FEATURE_SCHEMA_VERSION,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_retrain_on_a_poor_history_keeps_the_served_model_and_says_why() {
    // served: runtime v1 trained on 3000 Philly jobs; the ingested history is 230 jobs, so
    // the new version is scored on fewer than min_test_jobs (50) held-out jobs
    let (state, _dir) = service(true);
    let jobs: Vec<JobRecord> = philly()[TRAIN_JOBS..TRAIN_JOBS + 230].to_vec();
    ingest(&state, &trace_events(&jobs)).await;
    let (st, v) = call(&state, "POST", "/v1/models/retrain", None, true).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let v = wait_retrain_done(&state).await;
    assert_eq!(v["state"], "succeeded", "{v}");
    assert_eq!(v["trigger"], "manual", "{v}");
    let verdicts = v["report"]["verdicts"].as_array().unwrap();
    let runtime = verdicts.iter().find(|v| v["kind"] == "runtime").unwrap();
    assert_eq!(runtime["promoted"], false, "{v}");
    assert_eq!(runtime["version"], 2, "{v}");
    let test_jobs = runtime["test_jobs"].as_u64().unwrap();
    assert!(test_jobs < 50, "{v}");
    assert!(
        runtime["reason"].as_str().unwrap().contains(&format!(
            "{test_jobs} held-out test jobs; a promotion needs at least 50"
        )),
        "{v}"
    );
    let kept = v["report"]["kept"].as_array().unwrap();
    assert!(
        kept.iter()
            .any(|k| k.as_str().unwrap().starts_with("runtime v2: ")),
        "{v}"
    );
    // the DAG model cannot learn from these events (no per-stage run times): kept, saying why
    let dag = verdicts.iter().find(|v| v["kind"] == "dag").unwrap();
    assert_eq!(dag["promoted"], false, "{v}");
    assert!(dag["version"].is_null(), "{v}");
    assert_eq!(dag["served_version"], 1, "{v}");
    assert!(
        dag["reason"]
            .as_str()
            .unwrap()
            .contains("no per-stage run times"),
        "{v}"
    );
    assert!(
        kept.iter()
            .any(|k| k.as_str().unwrap().starts_with("dag: ")),
        "{v}"
    );
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(m["serving"]["runtime"], 1, "{m}");
    assert_eq!(m["serving"]["dag"], 1, "{m}");
    let body = json!({ "job": { "profile": profile_json(&jobs[0]) } });
    let (st, p) = call(&state, "POST", "/v1/predict/runtime", Some(body), false).await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p["model_version"], 1, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_and_rollback_refuse_a_version_that_does_not_load() {
    let (state, dir) = service(true);
    let models = dir.path().join("models");
    let bad = save_unloadable_runtime(&models);
    assert_promote_refused(&state, "runtime", bad).await;
    let registry = training::open_registry(dir.path()).unwrap();
    assert_eq!(registry.promotion("runtime").unwrap().unwrap().version, 1);
    assert_eq!(state.online().models.runtime().unwrap().meta.version, 1);

    // a pointer whose previous version does not load: the rollback is refused too
    let good = registry
        .save(
            &*state.online().models.runtime().unwrap().model.clone(),
            NewArtifact::new("copy", 1),
        )
        .unwrap()
        .version;
    std::fs::write(
        models.join("runtime").join("promoted.json"),
        json!({ "version": good, "history": [1, bad] }).to_string(),
    )
    .unwrap();
    let (st, v) = call(&state, "POST", "/v1/models/runtime/rollback", None, true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let p = registry.promotion("runtime").unwrap().unwrap();
    assert_eq!((p.version, p.history), (good, vec![1, bad]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_promoted_version_at_start_serves_the_previous_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    copy_dir(trained_models(), &models);
    let bad = save_unloadable_runtime(&models);
    let registry = augur_predictor::ModelRegistry::open(&models).unwrap();
    registry.promote("runtime", bad).unwrap(); // the hash verifies; the payload does not load
    assert!(registry
        .load::<RuntimePredictor>(Selector::Serving)
        .is_err());
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        ..ServeConfig::default()
    };
    let (state, _info) = AppState::open(config).expect("starts despite the corrupt version");
    assert_eq!(state.online().models.runtime().unwrap().meta.version, 1);
    let text = state.ext.metrics.encode().unwrap();
    let line = r#"augur_model_load_failures_total{kind="runtime"} 1"#;
    assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    let (st, v) = call(&state, "GET", "/readyz", None, false).await;
    assert_eq!(st, StatusCode::OK, "{v}");
}
