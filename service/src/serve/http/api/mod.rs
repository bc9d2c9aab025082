//! The HTTP handlers of the API (routed in [`super::routes`]). Each answers a typed struct and
//! carries its `#[utoipa::path]`, from which [`super::openapi`] generates the document.
//!
//! - [`ingest`]: storing events and reading them back;
//! - [`jobs`]: what is known and predicted about one job; [`eta`]: when queued jobs start;
//! - [`predict`] and [`dag`]: the predictions, run off the async workers by [`pool`];
//!   [`advise`]: the advisor's options for a job, in the same pool;
//! - [`models`]: the served models, retraining, promotion and rollback.
//!
//! Here: liveness, readiness and the fallback for unknown paths.

pub mod advise;
pub mod dag;
pub mod eta;
pub mod ingest;
pub mod jobs;
pub mod models;
pub mod pool;
pub mod predict;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use augur_predictor::ModelKind;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::serve::AppState;

/// The process is up.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

/// `GET /healthz`: the process is up and serving HTTP.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    summary = "Liveness: the process serves HTTP",
    responses((status = 200, description = "`{status: ok}`", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The served versions that decide readiness.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyModels {
    pub runtime: Option<u32>,
    pub queue_wait: Option<u32>,
}

/// One readiness check.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyCheck {
    /// `runtime_model`, `store`, or `backend:<name>`.
    pub name: String,
    pub ok: bool,
    /// What was found (why it failed).
    pub detail: String,
}

/// Whether the service can do its work: answer runtime predictions, store what it is sent,
/// and observe its cluster; and which kinds are still training at first start.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub models: ReadyModels,
    /// The kinds the first-start training has still to serve (`runtime`, `queue_wait`,
    /// `failure`, `convergence`, `dag`), in the order they train: until one is served its
    /// predictions answer 503 `model_not_available`. Empty once every kind is trained (and
    /// while the data folder is still loading).
    #[schema(example = json!(["queue_wait", "failure"]))]
    pub training: Vec<&'static str>,
    /// The kinds whose first-start training failed, and why (also logged as errors): they
    /// are not served until a retrain or the next start trains them. They do not make the
    /// service unready: the kinds served keep answering.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub training_failed: BTreeMap<&'static str, String>,
    /// Every check, passed or not.
    pub checks: Vec<ReadyCheck>,
    /// The checks that failed, by name (only when not ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Free space the data folder's file system needs for the store to count as writable.
pub const MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

/// `GET /readyz`: 200 when every check passes (the runtime model is loaded, the data folder
/// takes writes and has free space, each cluster backend is up), else 503 naming the failed
/// checks. Either way `training` lists the kinds the first start is still training (the
/// runtime model is trained first: ready comes before the others are served) and
/// `training_failed` those it failed to train.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "ops",
    summary = "Readiness: 200 when the runtime model is loaded, the store can write and the backend is up; else 503 naming the failed checks",
    responses(
        (status = 200, description = "ready (the runtime model is served); `training` lists the kinds still training at first start, whose predictions answer 503 `model_not_available` until served, and `training_failed` those whose training failed", body = Readiness),
        (status = 503, description = "not ready: `reason` names the failed checks (first-start training, a read-only or full data folder, a backend down)", body = Readiness)
    )
)]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let (runtime, queue_wait, runtime_unloadable) = {
        let o = state.online();
        (
            o.models.version(ModelKind::Runtime),
            o.models.version(ModelKind::QueueWait),
            o.models.unloadable.get(&ModelKind::Runtime).cloned(),
        )
    };
    let model_ok = state.ready.load(Ordering::SeqCst) && runtime.is_some();
    let mut checks = vec![ReadyCheck {
        name: "runtime_model".into(),
        ok: model_ok,
        detail: match (model_ok, runtime_unloadable) {
            (true, _) => "loaded".into(),
            (false, Some(why)) => models::without_data_dir(&why, &state.config.data_dir),
            (false, None) => {
                "the runtime model is not loaded yet (training at first start?)".into()
            }
        },
    }];
    let dir = state.config.data_dir.clone();
    let log = state.store.clone();
    let store = tokio::task::spawn_blocking(move || {
        store_writable(&dir)?;
        Ok(log.check_writable()?)
    })
    .await
    .unwrap_or_else(|e| Err(StoreNotReady::Check(e)));
    checks.push(ReadyCheck {
        name: "store".into(),
        ok: store.is_ok(),
        detail: store
            .err()
            .map_or_else(|| "writable".into(), |e| e.to_string()),
    });
    if let Some(h) = state.ext.backend_health() {
        checks.push(ReadyCheck {
            name: format!("backend:{}", h.backend),
            ok: h.up,
            detail: h.detail,
        });
    }
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name.as_str())
        .collect();
    let ready = failed.is_empty();
    let reason = (!ready).then(|| {
        let details: Vec<String> = checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        details.join("; ")
    });
    let body = Readiness {
        ready,
        models: ReadyModels {
            runtime,
            queue_wait,
        },
        training: state
            .first_start
            .training()
            .into_iter()
            .map(ModelKind::name)
            .collect(),
        training_failed: state
            .first_start
            .failed()
            .into_iter()
            .map(|(k, why)| {
                (
                    k.name(),
                    models::without_data_dir(&why, &state.config.data_dir),
                )
            })
            .collect(),
        checks,
        reason,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// Why `/readyz` calls the store not ready (its `store` check says it to the operator).
#[derive(Debug, thiserror::Error)]
enum StoreNotReady {
    #[error("the data folder {} takes no writes: {source}", .dir.display())]
    FolderNotWritable {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the data folder {} has {free} bytes free, under the floor of {MIN_FREE_BYTES}", .dir.display())]
    LowSpace { dir: std::path::PathBuf, free: u64 },
    #[error(transparent)]
    Log(#[from] crate::serve::state::store::event_log::LogNotWritable),
    #[error("the store check did not finish: {0}")]
    Check(tokio::task::JoinError),
}

/// Whether the data folder takes a write (a probe file created, synced and removed) and its
/// file system has [`MIN_FREE_BYTES`] free; the error says which and why.
fn store_writable(dir: &std::path::Path) -> Result<(), StoreNotReady> {
    use std::io::Write;
    let probe = dir.join(".readyz-probe");
    let written = std::fs::File::create(&probe).and_then(|mut f| {
        f.write_all(b"ok")?;
        f.sync_all()
    });
    let _ = std::fs::remove_file(&probe);
    written.map_err(|source| StoreNotReady::FolderNotWritable {
        dir: dir.to_path_buf(),
        source,
    })?;
    if let Some(free) = free_bytes(dir) {
        if free < MIN_FREE_BYTES {
            return Err(StoreNotReady::LowSpace {
                dir: dir.to_path_buf(),
                free,
            });
        }
    }
    Ok(())
}

/// Bytes available to this user on the file system of `dir` (none when unknown).
// the statvfs field types differ between Unix systems
#[allow(unsafe_code, clippy::useless_conversion)]
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs reads the NUL-terminated path and writes only the struct passed
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some(u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize)))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Fallback: a path the API does not have.
pub async fn no_such_route(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_such_route",
        format!("no route {} (see /openapi.json)", uri.path()),
    )
}

/// Runs `f` on the blocking thread pool (registry reads and writes, model swaps), inside
/// the request's span (what `f` logs names the request).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| ApiError::internal("a blocking task failed", e))?
}
