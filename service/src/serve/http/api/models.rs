//! The served models: `GET /v1/models` (saved versions and which are served), retraining on
//! the ingested history (`POST /v1/models/retrain`, its state at `GET`), and promotion and
//! rollback of a kind's served version.

use std::collections::BTreeMap;

use augur_predictor::registry::Promotion;
use augur_predictor::{ArtifactMeta, ModelKind, RegistryError};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::blocking;
use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::kinds;
use crate::serve::tasks::retrain::{self, Trigger};
use crate::serve::tasks::training;
use crate::serve::{lock, AppState, RetrainStatus};

/// The served version of each registered kind (`null` while a kind has no model), by kind.
pub type ServedVersions = BTreeMap<ModelKind, Option<u32>>;

/// A saved version: its registry metadata, or why it cannot be read.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum SavedVersion {
    /// The registry metadata (`ArtifactMeta`: version, dataset, metrics, notes, payload).
    #[schema(value_type = Object)]
    Saved(Box<ArtifactMeta>),
    Unusable {
        version: u32,
        error: String,
    },
}

/// The saved versions of one kind.
#[derive(Debug, Serialize, ToSchema)]
pub struct KindVersions {
    /// The promoted version and the ones promoted before it (none: the latest is served).
    #[schema(value_type = Option<Object>)]
    pub promoted: Option<Promotion>,
    /// Oldest first.
    pub versions: Vec<SavedVersion>,
}

/// Every kind's saved versions and which are served.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelsView {
    /// The served version of each kind (`null` while a kind has no model).
    #[schema(value_type = BTreeMap<String, Option<u32>>)]
    pub serving: ServedVersions,
    /// By kind: `runtime`, `queue_wait`, `failure`, `convergence`, `dag`.
    pub kinds: BTreeMap<String, KindVersions>,
}

/// `GET /v1/models`: every saved version of each kind with its metrics; which is served.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "models",
    summary = "Saved versions of each model kind with their metrics, and the served ones",
    responses((status = 200, description = "`{serving, kinds}`", body = ModelsView))
)]
pub async fn list_models(State(state): State<AppState>) -> Result<Json<ModelsView>, ApiError> {
    let serving: ServedVersions = {
        let o = state.online();
        kinds::registered()
            .iter()
            .map(|k| (k.kind(), o.models.version(k.kind())))
            .collect()
    };
    let registry = state.registry.clone();
    let kinds = blocking(move || {
        let mut kinds = BTreeMap::new();
        for kind in kinds::registered().iter().map(|k| k.kind().name()) {
            let failed =
                |e: RegistryError| ApiError::internal("the model registry cannot be read", e);
            let versions = registry.versions(kind).map_err(failed)?;
            let promoted = registry.promotion(kind).map_err(failed)?;
            let versions = versions
                .into_iter()
                .map(|v| match v.meta {
                    Ok(meta) => SavedVersion::Saved(Box::new(meta)),
                    Err(e) => SavedVersion::Unusable {
                        version: v.version,
                        error: e.to_string(),
                    },
                })
                .collect();
            kinds.insert(kind.to_string(), KindVersions { promoted, versions });
        }
        Ok(kinds)
    })
    .await?;
    Ok(Json(ModelsView { serving, kinds }))
}

/// `GET /v1/models/retrain`: the state of the last retrain.
#[utoipa::path(
    get,
    path = "/v1/models/retrain",
    tag = "models",
    summary = "State of the last retrain",
    responses((status = 200, description = "`{state: idle|running|succeeded|failed, ...}`", body = RetrainStatus))
)]
pub async fn retrain_status(State(state): State<AppState>) -> Json<RetrainStatus> {
    Json(lock(&state.retrain).clone())
}

/// A retrain was started.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrainStarted {
    /// `running`.
    pub state: &'static str,
    /// Jobs in the history snapshot it trains on.
    pub jobs: usize,
    /// Of which finished.
    pub finished_jobs: usize,
    /// Which part of the history it uses (how many of the jobs held, and the rule).
    pub history: retrain::HistoryWindow,
    /// Where to poll its state.
    pub status: &'static str,
}

/// `POST /v1/models/retrain`: retrain the predictors on the ingested history in the
/// background (202); each new version is saved and judged against the served one
/// ([`crate::serve::tasks::model_gate`]); what passes is promoted and swapped in when done.
#[utoipa::path(
    post,
    path = "/v1/models/retrain",
    tag = "models",
    summary = "Retrain the predictors on the ingested history in the background; each new version is saved, and replaces the served one only when it is not worse on the same held-out slice (the report lists per kind what was promoted or kept and why)",
    security(("bearer" = [])),
    responses(
        (status = 202, description = "started; poll GET /v1/models/retrain", body = RetrainStarted),
        (status = 409, description = "already running, the first start still training on the bootstrap history, or too few finished jobs ingested")
    )
)]
pub async fn retrain(
    State(state): State<AppState>,
) -> Result<(StatusCode, Json<RetrainStarted>), ApiError> {
    let started = retrain::start(&state, Trigger::Manual)
        .map_err(|why| ApiError::conflict(why.to_string()))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RetrainStarted {
            state: "running",
            jobs: started.jobs,
            finished_jobs: started.finished,
            history: started.window,
            status: "/v1/models/retrain",
        }),
    ))
}

/// Body of `POST /v1/models/{kind}/promote`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteBody {
    #[schema(minimum = 1)]
    pub version: u32,
}

/// The kind's promoted version after a promotion or rollback.
#[derive(Debug, Serialize, ToSchema)]
pub struct Promoted {
    pub kind: &'static str,
    /// The version served now and the ones promoted before it.
    #[schema(value_type = Object)]
    pub promoted: Promotion,
}

/// The registered kind named `kind` (listed, promoted and rolled back).
fn check_kind(kind: &str) -> Result<ModelKind, ApiError> {
    kinds::by_name(kind).map(|k| k.kind()).ok_or_else(|| {
        let names: Vec<&str> = kinds::registered()
            .iter()
            .map(|k| k.kind().name())
            .collect();
        ApiError::not_found(format!(
            "no model kind `{kind}`; kinds: {}",
            names.join(", ")
        ))
    })
}

/// `POST /v1/models/{kind}/promote`: serve a saved version.
#[utoipa::path(
    post,
    path = "/v1/models/{kind}/promote",
    tag = "models",
    summary = "Serve a saved version of a model kind",
    params(("kind" = String, Path, description = "A model kind (the served kinds are listed in the schema's enum)")),
    request_body = PromoteBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{kind, promoted}`", body = Promoted),
        (status = 422, description = "no such version, or it does not load (the served version is unchanged)")
    )
)]
pub async fn promote(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    ApiJson(body): ApiJson<PromoteBody>,
) -> Result<Json<Promoted>, ApiError> {
    let kind = check_kind(&kind)?;
    let st = state.clone();
    blocking(move || {
        let dir = st.config.data_dir.clone();
        training::check_loads(&st.registry, kind, body.version).map_err(unloadable(
            kind,
            body.version,
            &dir,
        ))?;
        let p = st
            .registry
            .promote(kind.name(), body.version)
            .map_err(registry_error("version", &dir))?;
        st.reload_models()
            .map_err(|e| ApiError::internal("the promoted models could not be loaded", e))?;
        Ok(Json(Promoted {
            kind: kind.name(),
            promoted: p,
        }))
    })
    .await
}

/// `POST /v1/models/{kind}/rollback`: serve the previously promoted version again.
#[utoipa::path(
    post,
    path = "/v1/models/{kind}/rollback",
    tag = "models",
    summary = "Serve the previously promoted version again",
    params(("kind" = String, Path, description = "A model kind (the served kinds are listed in the schema's enum)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{kind, promoted}`", body = Promoted),
        (status = 409, description = "nothing to roll back to"),
        (status = 422, description = "the previous version does not load (the served version is unchanged)")
    )
)]
pub async fn rollback(
    State(state): State<AppState>,
    Path(kind): Path<String>,
) -> Result<Json<Promoted>, ApiError> {
    let kind = check_kind(&kind)?;
    let st = state.clone();
    blocking(move || {
        let dir = st.config.data_dir.clone();
        let previous = st
            .registry
            .promotion(kind.name())
            .map_err(registry_error("kind", &dir))?
            .and_then(|p| p.history.last().copied());
        if let Some(v) = previous {
            training::check_loads(&st.registry, kind, v).map_err(unloadable(kind, v, &dir))?;
        }
        let p = st
            .registry
            .rollback(kind.name())
            .map_err(registry_error("kind", &dir))?;
        st.reload_models().map_err(|e| {
            ApiError::internal("the models could not be loaded after the rollback", e)
        })?;
        Ok(Json(Promoted {
            kind: kind.name(),
            promoted: p,
        }))
    })
    .await
}

/// `text` with the data folder's path (as configured and as resolved) replaced by
/// `<data_dir>`: answers never show where the service keeps its files.
pub fn without_data_dir(text: &str, data_dir: &std::path::Path) -> String {
    let mut out = text.to_string();
    let resolved = std::fs::canonicalize(data_dir).ok();
    for p in resolved.iter().map(|p| p.as_path()).chain([data_dir]) {
        let shown = p.display().to_string();
        if !shown.is_empty() && shown != "." {
            out = out.replace(&shown, "<data_dir>");
        }
    }
    out
}

/// A version that does not load is refused (422) before the pointer is touched.
fn unloadable(
    kind: ModelKind,
    version: u32,
    data_dir: &std::path::Path,
) -> impl Fn(RegistryError) -> ApiError {
    let data_dir = data_dir.to_path_buf();
    move |e| {
        let why = without_data_dir(&e.to_string(), &data_dir);
        match e {
            RegistryError::UnknownVersion { .. } | RegistryError::Empty { .. } => {
                ApiError::invalid("version", why)
            }
            _ => ApiError::invalid(
                "version",
                format!(
                    "{kind} v{version} cannot be loaded ({why}); the served version is unchanged"
                ),
            ),
        }
    }
}

fn registry_error(
    field: &'static str,
    data_dir: &std::path::Path,
) -> impl Fn(RegistryError) -> ApiError {
    let data_dir = data_dir.to_path_buf();
    move |e| {
        let why = without_data_dir(&e.to_string(), &data_dir);
        match e {
            RegistryError::NotPromoted { .. } | RegistryError::NothingToRollBack { .. } => {
                ApiError::conflict(why)
            }
            RegistryError::UnknownVersion { .. } | RegistryError::Empty { .. } => {
                ApiError::invalid(field, why)
            }
            _ => ApiError::internal("the model registry failed", e),
        }
    }
}
