//! The DAG model served: `/v1/predict/dag-makespan` answers from it when the DAG carries its
//! features (given in the request or in the ingested `job_submitted`), and from the
//! per-stage critical path otherwise, saying why; `dag` is promoted and rolled back like
//! the other kinds, and a version that does not load is refused with the pointer unchanged.

use augur_datasets::dag::DagJob;
use augur_predictor::dag::DagPredictor;
use augur_predictor::registry::{Artifact, Selector};
use augur_predictor::NewArtifact;
use axum::http::StatusCode;
use serde_json::json;

use super::*;

/// A bundled DAG job as the API's `dag` body, with every feature the DAG model reads.
fn dag_body(job: &DagJob) -> Value {
    let stages: Vec<Value> = job
        .stages
        .iter()
        .map(|s| {
            let mut v = json!({
                "id": s.id,
                "depends_on": s.parents.iter().map(|&p| &job.stages[p].id).collect::<Vec<_>>(),
                "tasks": s.num_tasks,
            });
            if let Some(k) = &s.kind {
                v["kind"] = json!(k);
            }
            let res = s.resources.as_ref();
            if let Some(b) = res.and_then(|r| r.input_bytes) {
                v["input_bytes"] = json!(b);
            }
            if let Some(c) = res.and_then(|r| r.cores) {
                v["cores"] = json!(c);
            }
            v
        })
        .collect();
    let mut dag = json!({ "stages": stages });
    if let Some(e) = job.executors {
        dag["executors"] = json!(e);
    }
    if let Some(gb) = job
        .scale
        .as_deref()
        .and_then(|s| s.trim_end_matches('g').parse::<u32>().ok())
    {
        dag["scale_gb"] = json!(gb);
    }
    if job.family == "wfcommons" {
        dag["workflow"] = json!(job.name);
    }
    if let Some(sys) = job.meta.get("runtime_system") {
        dag["workflow_system"] = json!(sys);
    }
    dag
}

/// The served DAG model version `version`, as the registry loads it.
fn dag_model(dir: &Path, version: u32) -> DagPredictor {
    let registry = training::open_registry(dir).unwrap();
    registry
        .load::<DagPredictor>(Selector::Version(version))
        .unwrap()
        .0
}

async fn predict_dag(state: &AppState, job: Value) -> (StatusCode, Value) {
    call(
        state,
        "POST",
        "/v1/predict/dag-makespan",
        Some(json!({ "job": job })),
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dag_with_its_features_is_answered_by_the_dag_model_one_without_falls_back() {
    let (state, dir) = service(true);
    let sample = &dag_sample().jobs;
    let tpch = sample
        .iter()
        .find(|j| j.family == "tpch" && j.stages.len() >= 5)
        .unwrap();
    let model = dag_model(dir.path(), 1);

    // a Spark-style DAG (tasks, executors, scale): the DAG model's own answer, its version
    let (st, v) = predict_dag(&state, json!({ "dag": dag_body(tpch) })).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["model_version"], 1, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["source"], "dag_model", "{v}");
    assert_eq!(p["model_version"], 1, "{v}");
    assert!(p["fallback_reason"].is_null(), "{v}");
    assert_eq!(p["interval"], "none", "{v}");
    assert!(p["lower"].is_null() && p["upper"].is_null(), "{v}");
    let expected = model.predict(tpch).unwrap();
    assert_eq!(p["seconds"].as_f64(), Some(expected.makespan_s), "{v}");
    assert_eq!(
        p["critical_path_seconds"].as_f64(),
        Some(expected.critical_path_s),
        "{v}"
    );
    let stage_secs: Vec<f64> = p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(stage_secs, expected.stage_seconds, "{v}");
    assert!(p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["source"] == "dag_model"));

    // a workflow (every stage's kind) submitted with its DAG, asked by job id
    let wf = sample
        .iter()
        .filter(|j| j.family == "wfcommons")
        .min_by_key(|j| j.stages.len())
        .unwrap();
    let profile = profile_json(&philly()[TRAIN_JOBS]);
    let submit = json!({ "type": "job_submitted", "job_id": "wf-1", "at": 1.0e9,
                         "profile": profile, "dag": dag_body(wf) });
    ingest(&state, &[submit]).await;
    let (st, v) = predict_dag(&state, json!({ "job_id": "wf-1" })).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["prediction"]["source"], "dag_model", "{v}");
    let expected = model.predict(wf).unwrap();
    assert_eq!(
        v["prediction"]["seconds"].as_f64(),
        Some(expected.makespan_s),
        "{v}"
    );

    // without the task counts: the runtime critical path answers, naming the missing field
    let mut bare = dag_body(tpch);
    for s in bare["stages"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("tasks");
    }
    let (st, v) = predict_dag(&state, json!({ "dag": bare, "profile": profile })).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["source"], "runtime_critical_path", "{v}");
    assert_eq!(p["model_version"], 1, "{v}"); // the runtime model's
    assert_eq!(p["interval"], "stagewise", "{v}");
    assert!(p["lower"].as_f64() <= p["seconds"].as_f64(), "{v}");
    let reason = p["fallback_reason"].as_str().unwrap();
    assert!(
        reason.contains("job.dag.stages[0].tasks is missing"),
        "{reason}"
    );
    assert!(p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["source"] == "runtime_model"));

    // tasks but neither executors nor kinds
    let mut no_exec = dag_body(tpch);
    no_exec.as_object_mut().unwrap().remove("executors");
    let (_, v) = predict_dag(&state, json!({ "dag": no_exec, "profile": profile })).await;
    let reason = v["prediction"]["fallback_reason"].as_str().unwrap();
    assert!(
        reason.contains("job.dag.executors and job.dag.stages[0].kind are missing"),
        "{v}"
    );

    // a feature out of range is refused, naming it
    let mut zero = dag_body(tpch);
    zero["stages"][1]["tasks"] = json!(0);
    let (st, v) = predict_dag(&state, json!({ "dag": zero })).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "job.dag.stages[1].tasks", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_dag_model_served_the_critical_path_answers_and_says_so() {
    let (state, _dir) = service(false);
    let mut body = dag_body(&dag_sample().jobs[0]);
    for (i, s) in body["stages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        s["estimate_seconds"] = json!(10.0 * (i + 1) as f64);
    }
    let (st, v) = predict_dag(&state, json!({ "dag": body, "profile": { "num_gpus": 1 } })).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let p = &v["prediction"];
    assert_eq!(p["source"], "runtime_critical_path", "{v}");
    assert!(p["model_version"].is_null(), "{v}"); // every stage's time was given
    assert!(
        p["fallback_reason"]
            .as_str()
            .unwrap()
            .contains("no dag model is served"),
        "{v}"
    );
    assert!(p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["source"] == "given"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_is_listed_promoted_and_rolled_back_and_an_unloadable_version_is_refused() {
    let (state, dir) = service(true);
    let registry = training::open_registry(dir.path()).unwrap();
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(m["serving"]["dag"], 1, "{m}");
    let v1 = &m["kinds"]["dag"]["versions"][0];
    assert_eq!(v1["kind"], "dag", "{m}");
    assert!(
        v1["notes"]["metrics_on"]
            .as_str()
            .unwrap()
            .contains("--task dag"),
        "{m}"
    );

    // a second good version (a copy of the served one): promoted, then served
    let model = state.online().models.dag().unwrap().model.clone();
    let v2 = registry
        .save(&*model, NewArtifact::new("copy", 1))
        .unwrap()
        .version;
    let (st, v) = call(
        &state,
        "POST",
        "/v1/models/dag/promote",
        Some(json!({ "version": v2 })),
        true,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["kind"], "dag", "{v}");
    let tpch = dag_body(&dag_sample().jobs[0]);
    let (_, p) = predict_dag(&state, json!({ "dag": tpch })).await;
    assert_eq!(p["prediction"]["model_version"], v2, "{p}");

    // an unloadable version: 422, the pointer and the served version unchanged
    let models = dir.path().join("models");
    let bad = save_unloadable(&models, "dag", DagPredictor::CURRENT_FEATURE_SCHEMA_VERSION);
    assert_eq!(bad, 3);
    assert_promote_refused(&state, "dag", bad).await;
    let p = registry.promotion("dag").unwrap().unwrap();
    assert_eq!((p.version, p.history.clone()), (v2, vec![1]));
    assert_eq!(state.online().models.dag().unwrap().meta.version, v2);

    // rollback: v1 served again
    let (st, v) = call(&state, "POST", "/v1/models/dag/rollback", None, true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(registry.promotion("dag").unwrap().unwrap().version, 1);
    let (_, m) = call(&state, "GET", "/v1/models", None, false).await;
    assert_eq!(m["serving"]["dag"], 1, "{m}");

    // a rollback to an unloadable previous version: 422, the pointer unchanged
    std::fs::write(
        dir.path().join("models").join("dag").join("promoted.json"),
        json!({ "version": v2, "history": [1, bad] }).to_string(),
    )
    .unwrap();
    let (st, v) = call(&state, "POST", "/v1/models/dag/rollback", None, true).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let p = registry.promotion("dag").unwrap().unwrap();
    assert_eq!((p.version, p.history), (v2, vec![1, bad]));
}
