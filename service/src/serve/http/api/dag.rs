//! `POST /v1/predict/dag-makespan`: a DAG's makespan, from the DAG model when it can
//! answer, else as the critical path over the stages' run times.
//!
//! The DAG model (registry kind `dag`: a GRU over the stages in topological order, trained
//! on the bundled TPC-H and WfCommons DAGs) answers (`source: dag_model`) when a DAG model
//! is served and the DAG carries its features: every stage's `tasks`, and the job's
//! `executors` (Spark-style stages, as TPC-H) or every stage's `kind` (workflow tasks, as
//! WfCommons); `scale_gb`, `workflow`, `workflow_system`, `input_bytes` and `cores` are read
//! when given. It gives no interval. Otherwise the critical path over each stage's
//! `estimate_seconds`, else the runtime model's prediction for the stage's profile, answers
//! (`source: runtime_critical_path`) and `fallback_reason` names the missing feature or why
//! no DAG model is served.

use std::collections::BTreeMap;
use std::sync::Arc;

use augur_datasets::dag::{edges_of, DagJob, DagStage as ModelStage, TaskResources};
use augur_predictor::ModelKind;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::predict::{
    predict_error, predict_in_pool, resolve, PredictJob, PredictRequest, Predictions,
};
use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::state::events::{Dag, JobProfile};
use crate::serve::state::online::{Online, RuntimeAnswer};
use crate::serve::AppState;

/// `source` of an answer from the DAG model.
pub const DAG_MODEL: &str = "dag_model";
/// `source` of an answer from the critical path over per-stage run times.
pub const RUNTIME_CRITICAL_PATH: &str = "runtime_critical_path";

/// A DAG makespan prediction.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MakespanAnswer {
    /// What answered: `dag_model` (the DAG model) or `runtime_critical_path` (the
    /// critical path over the stages' given or runtime-model run times).
    pub source: &'static str,
    /// Why the DAG model did not answer (the first missing feature, or why no DAG model is
    /// served); none when it did.
    pub fallback_reason: Option<String>,
    /// The version of the model that answered: the DAG model's, or the runtime model's when
    /// a stage used it (none when every stage's run time was given).
    pub model_version: Option<u32>,
    /// Predicted makespan, seconds: the DAG model's (its critical path with its learned
    /// correction), or the critical path over the stages' run times.
    pub seconds: f64,
    /// Critical path length of the stage times (before the DAG model's correction), seconds.
    pub critical_path_seconds: f64,
    /// `runtime_critical_path`: the critical path with every stage at the lower / upper
    /// end of its interval (the makespan stays in `[lower, upper]` when every stage stays
    /// in its interval; no calibrated joint coverage is claimed). None from the DAG model.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// `stagewise`, or `none` (the DAG model gives no interval).
    pub interval: &'static str,
    /// Stage ids on the critical path of the predicted stage times, in order.
    pub critical_path: Vec<String>,
    /// Per stage: the run time used and where it came from.
    pub stages: Vec<StageAnswer>,
}

/// One stage of a [`MakespanAnswer`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StageAnswer {
    pub id: String,
    pub seconds: f64,
    /// The stage's interval (runtime model), or its given time; none from the DAG model.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// `dag_model`, `given` (estimate_seconds) or `runtime_model`.
    pub source: &'static str,
}

/// Longest path through `dag` with stage times `t`; returns (length, path indices).
fn critical_path(dag: &Dag, order: &[usize], t: &[f64]) -> (f64, Vec<usize>) {
    let index = dag.stage_index();
    let n = dag.stages.len();
    let mut finish = vec![0.0; n];
    let mut prev: Vec<Option<usize>> = vec![None; n];
    for &i in order {
        let mut start = 0.0;
        let mut p = None;
        for d in &dag.stages[i].depends_on {
            if let Some(&j) = index.get(d.as_str()) {
                if p.is_none() || finish[j] > start {
                    start = finish[j];
                    p = Some(j);
                }
            }
        }
        finish[i] = start + t[i];
        prev[i] = p;
    }
    let Some(last) = (0..n).max_by(|&a, &b| finish[a].total_cmp(&finish[b])) else {
        return (0.0, Vec::new());
    };
    let mut path = vec![last];
    let mut cur = last;
    while let Some(p) = prev[cur] {
        path.push(p);
        cur = p;
    }
    path.reverse();
    (finish[last], path)
}

/// `POST /v1/predict/dag-makespan`: the DAG model's makespan when it can answer, else the
/// critical path over the stages' predicted run times (see the module docs).
#[utoipa::path(
    post,
    path = "/v1/predict/dag-makespan",
    tag = "predict",
    summary = "Predict a DAG's makespan for one job (`job`) or a batch (`jobs`): from the DAG model (`source: dag_model`) when one is served and every stage gives `tasks` and the job `executors` or every stage a `kind`; else the critical path over the stages' `estimate_seconds` or runtime-model predictions (`source: runtime_critical_path`, `fallback_reason` says why)",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`; the top-level `model_version` is the served DAG model's (else the runtime model's), each prediction names its own `source` and `model_version`", body = Predictions<MakespanAnswer>),
        (status = 503, description = "the critical path needs the runtime model for a stage, and it is not available yet")
    )
)]
pub async fn predict_dag(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<PredictRequest>,
) -> Result<Json<Predictions<MakespanAnswer>>, ApiError> {
    let cost = |jobs: &[(String, PredictJob)]| {
        jobs.iter()
            .map(|(_, j)| 1 + j.dag.as_ref().map_or(0, |d| d.stages.len()))
            .sum()
    };
    let version = |o: &Online| {
        let dag = o.models.version(ModelKind::Dag);
        dag.or_else(|| o.models.version(ModelKind::Runtime))
    };
    predict_in_pool(&state, "dag_makespan", req, cost, version, makespan).await
}

/// The makespan of the job at `path`: from the DAG model when it can answer, else the
/// critical path over its stages' run times (`version`: unused, each answer names its own).
fn makespan(
    o: &Online,
    path: &str,
    j: &PredictJob,
    _version: Option<u32>,
) -> Result<MakespanAnswer, ApiError> {
    // the DAG model reads no profile: a DAG it can answer is a complete request
    let with_profile;
    let model_answers = |d: &Dag| o.models.dag().is_some() && model_job("", d, "").is_ok();
    let j =
        if j.profile.is_none() && j.job_id.is_none() && j.dag.as_ref().is_some_and(model_answers) {
            with_profile = PredictJob {
                profile: Some(JobProfile::default()),
                ..j.clone()
            };
            &with_profile
        } else {
            j
        };
    let r = resolve(o, path, j)?;
    let Some(dag) = &r.dag else {
        return Err(ApiError::invalid(
            format!("{path}.dag"),
            "give the DAG's stages (or the job_id of an ingested job submitted with one)",
        ));
    };
    let order = dag.topological_order().ok_or_else(|| {
        ApiError::invalid(
            format!("{path}.dag.stages"),
            "the dependencies form a cycle",
        )
    })?;
    let reason = match model_input(o, &r.id, dag, &format!("{path}.dag")) {
        Ok((model, version, job)) => return from_dag_model(model, version, &job, dag, &order),
        Err(reason) => reason,
    };
    let (stages, used_model) = stage_times(o, &r.id, &r.profile, r.at, dag)?;
    let mid: Vec<f64> = stages.iter().map(|s| s.seconds).collect();
    let lo: Vec<f64> = stages
        .iter()
        .map(|s| s.lower.unwrap_or(s.seconds))
        .collect();
    let hi: Vec<f64> = stages
        .iter()
        .map(|s| s.upper.unwrap_or(s.seconds))
        .collect();
    let (seconds, cp) = critical_path(dag, &order, &mid);
    let (lower, _) = critical_path(dag, &order, &lo);
    let (upper, _) = critical_path(dag, &order, &hi);
    let runtime_version = o.models.version(ModelKind::Runtime);
    Ok(MakespanAnswer {
        source: RUNTIME_CRITICAL_PATH,
        fallback_reason: Some(reason),
        model_version: if used_model { runtime_version } else { None },
        seconds,
        critical_path_seconds: seconds,
        lower: Some(lower),
        upper: Some(upper),
        interval: "stagewise",
        critical_path: cp.into_iter().map(|i| dag.stages[i].id.clone()).collect(),
        stages,
    })
}

/// The served DAG model, its version and `dag` as it reads it; or why it cannot answer
/// (the first feature missing at path `at`, or why no DAG model is served).
fn model_input<'a>(
    o: &'a Online,
    id: &str,
    dag: &Dag,
    at: &str,
) -> Result<(&'a Arc<augur_predictor::dag::DagPredictor>, u32, DagJob), String> {
    let job = model_job(id, dag, at)?;
    match o.models.dag() {
        Some(s) => Ok((&s.model, s.meta.version, job)),
        None => Err(match o.not_trained.get(&ModelKind::Dag) {
            Some(why) => format!("the dag model is not trained: {why}"),
            None => "no dag model is served yet (first-start training still running, or it failed: see the logs and GET /v1/models)".to_string(),
        }),
    }
}

/// `dag` as the DAG model reads it (a [`DagJob`] like those it was trained on), or the
/// first of its features missing (at path `at`).
fn model_job(id: &str, dag: &Dag, at: &str) -> Result<DagJob, String> {
    if let Some(i) = dag.stages.iter().position(|s| s.tasks.is_none()) {
        return Err(format!(
            "{at}.stages[{i}].tasks is missing (the dag model needs every stage's task count)"
        ));
    }
    if dag.executors.is_none() {
        if let Some(i) = dag.stages.iter().position(|s| s.kind.is_none()) {
            return Err(format!(
                "{at}.executors and {at}.stages[{i}].kind are missing (the dag model needs the job's executors, for Spark-style stages, or every stage's kind, for workflow tasks)"
            ));
        }
    }
    let index = dag.stage_index();
    let stages: Vec<ModelStage> = dag
        .stages
        .iter()
        .map(|s| ModelStage {
            id: s.id.clone(),
            name: s.id.clone(),
            kind: s.kind.clone(),
            num_tasks: s.tasks.unwrap_or(1),
            parents: s
                .depends_on
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect(),
            duration_s: None,
            task_durations_s: Vec::new(),
            waves: BTreeMap::new(),
            resources: (s.input_bytes.is_some() || s.cores.is_some()).then(|| TaskResources {
                cores: s.cores,
                input_bytes: s.input_bytes,
                ..TaskResources::default()
            }),
        })
        .collect();
    let edges = edges_of(&stages);
    let mut meta = BTreeMap::new();
    if let Some(sys) = &dag.workflow_system {
        meta.insert("runtime_system".to_string(), sys.clone());
    }
    Ok(DagJob {
        id: id.to_string(),
        // a named workflow is encoded as the WfCommons instances it learned from are (the
        // words of its name are tokens)
        family: if dag.workflow.is_some() {
            "wfcommons".to_string()
        } else {
            "request".to_string()
        },
        name: dag.workflow.clone().unwrap_or_default(),
        scale: dag.scale_gb.map(|g| format!("{g}g")),
        executors: dag.executors,
        stages,
        edges,
        recorded_makespan_s: None,
        source_file: String::new(),
        meta,
    })
}

/// The DAG model's answer for `job` (the request's `dag` at topological `order`).
fn from_dag_model(
    model: &Arc<augur_predictor::dag::DagPredictor>,
    version: u32,
    job: &DagJob,
    dag: &Dag,
    order: &[usize],
) -> Result<MakespanAnswer, ApiError> {
    let a = Arc::clone(model)
        .online(version)
        .predict_dag(job)
        .map_err(|e| ApiError::internal("the DAG model could not answer", e))?;
    let (_, cp) = critical_path(dag, order, &a.stage_seconds);
    let stages = dag
        .stages
        .iter()
        .zip(&a.stage_seconds)
        .map(|(s, &seconds)| StageAnswer {
            id: s.id.clone(),
            seconds,
            lower: None,
            upper: None,
            source: DAG_MODEL,
        })
        .collect();
    Ok(MakespanAnswer {
        source: DAG_MODEL,
        fallback_reason: None,
        model_version: Some(a.model_version),
        seconds: a.makespan_s,
        critical_path_seconds: a.critical_path_s,
        lower: None,
        upper: None,
        interval: "none",
        critical_path: cp.into_iter().map(|i| dag.stages[i].id.clone()).collect(),
        stages,
    })
}

/// Each stage's run time: its `estimate_seconds`, else the runtime model's prediction for
/// its profile (the job's `profile` when it has none) as `{id}/{stage}`; and whether the
/// model was used.
fn stage_times(
    o: &Online,
    id: &str,
    profile: &JobProfile,
    at: f64,
    dag: &Dag,
) -> Result<(Vec<StageAnswer>, bool), ApiError> {
    let mut stages = Vec::with_capacity(dag.stages.len());
    let mut used_model = false;
    for s in &dag.stages {
        let a = match s.estimate_seconds {
            Some(e) => StageAnswer {
                id: s.id.clone(),
                seconds: e,
                lower: Some(e),
                upper: Some(e),
                source: "given",
            },
            None => {
                let p = s.profile.as_ref().unwrap_or(profile);
                let r: RuntimeAnswer = o
                    .predict_runtime(&format!("{id}/{}", s.id), p, at)
                    .map_err(predict_error)?;
                used_model = true;
                StageAnswer {
                    id: s.id.clone(),
                    seconds: r.seconds,
                    lower: Some(r.lower),
                    upper: Some(r.upper),
                    source: "runtime_model",
                }
            }
        };
        stages.push(a);
    }
    Ok((stages, used_model))
}
