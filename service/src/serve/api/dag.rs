//! `POST /v1/predict/dag-makespan`: a DAG's makespan as the critical path over its stages'
//! run times (each stage's `estimate_seconds`, else the runtime model's prediction).

use std::collections::HashMap;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::predict::{
    predict_error, predict_in_pool, resolve, PredictJob, PredictRequest, Predictions,
};
use crate::serve::error::{ApiError, ApiJson};
use crate::serve::events::{Dag, JobProfile};
use crate::serve::online::{Online, RuntimeAnswer};
use crate::serve::AppState;

/// A DAG makespan prediction.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MakespanAnswer {
    pub model_version: Option<u32>,
    /// Critical path length with every stage at its predicted run time, seconds.
    pub seconds: f64,
    /// Critical path with every stage at the lower / upper end of its interval: the
    /// makespan stays in `[lower, upper]` when every stage stays in its interval (no
    /// calibrated joint coverage is claimed).
    pub lower: f64,
    pub upper: f64,
    pub interval: &'static str,
    /// Stage ids on the critical path (predicted run times), in order.
    pub critical_path: Vec<String>,
    /// Per stage: the run time used and where it came from.
    pub stages: Vec<StageAnswer>,
}

/// One stage of a [`MakespanAnswer`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StageAnswer {
    pub id: String,
    pub seconds: f64,
    pub lower: f64,
    pub upper: f64,
    /// `given` (estimate_seconds) or `runtime_model`.
    pub source: &'static str,
}

/// Longest path through `dag` with stage times `t`; returns (length, path indices).
fn critical_path(dag: &Dag, order: &[usize], t: &[f64]) -> (f64, Vec<usize>) {
    let index: HashMap<&str, usize> = dag
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
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

/// `POST /v1/predict/dag-makespan`: critical path over the stages' predicted run times
/// (the runtime model per stage, or the stage's `estimate_seconds`).
#[utoipa::path(
    post,
    path = "/v1/predict/dag-makespan",
    tag = "predict",
    summary = "Predict a DAG's makespan: critical path over the stages' predicted run times, for one job (`job`) or a batch (`jobs`)",
    request_body = PredictRequest,
    responses(
        (status = 200, description = "`{kind, model_version, prediction}` or `{kind, model_version, predictions}`", body = Predictions<MakespanAnswer>),
        (status = 503, description = "a stage needs the runtime model, which is not available yet")
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
    let version = |o: &Online| o.models.runtime.as_ref().map(|s| s.meta.version);
    predict_in_pool(&state, "dag_makespan", req, cost, version, makespan).await
}

/// The makespan of the job at `path`: the critical path over its stages' run times
/// (`version`: the runtime model's, named when a stage used it).
fn makespan(
    o: &Online,
    path: &str,
    j: &PredictJob,
    version: Option<u32>,
) -> Result<MakespanAnswer, ApiError> {
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
    let (stages, used_model) = stage_times(o, &r.id, &r.profile, r.at, dag)?;
    let mid: Vec<f64> = stages.iter().map(|s| s.seconds).collect();
    let lo: Vec<f64> = stages.iter().map(|s| s.lower).collect();
    let hi: Vec<f64> = stages.iter().map(|s| s.upper).collect();
    let (seconds, cp) = critical_path(dag, &order, &mid);
    let (lower, _) = critical_path(dag, &order, &lo);
    let (upper, _) = critical_path(dag, &order, &hi);
    Ok(MakespanAnswer {
        model_version: if used_model { version } else { None },
        seconds,
        lower,
        upper,
        interval: "stagewise",
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
                lower: e,
                upper: e,
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
                    lower: r.lower,
                    upper: r.upper,
                    source: "runtime_model",
                }
            }
        };
        stages.push(a);
    }
    Ok((stages, used_model))
}
