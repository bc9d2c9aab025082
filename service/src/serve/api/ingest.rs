//! `POST /v1/events`, `POST /v1/events/batch`: events stored durably before the answer;
//! `GET /v1/events`: the stored events in sequence order.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::serve::bounds::EARLIEST_LIVE_TIME;
use crate::serve::error::{ApiError, ApiJson};
use crate::serve::event_time::wall_now;
use crate::serve::events::{Event, EventBatch};
use crate::serve::store::{StoreError, StoredEvent};
use crate::serve::AppState;

/// One stored event.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ingested {
    /// Its sequence number.
    pub seq: Option<i64>,
    pub count: usize,
}

/// A stored batch.
#[derive(Debug, Serialize, ToSchema)]
pub struct IngestedBatch {
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    pub count: usize,
}

/// A page of stored events.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<StoredEvent>,
    /// The `after` of the next page (none when this one is empty).
    pub next_after: Option<i64>,
}

fn store_error(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "storing events failed");
    ApiError::internal(format!(
        "the events were not stored (not acknowledged): {e}"
    ))
}

/// On a live backend, the latest accepted event time (wall clock plus the allowed skew) and
/// how it is explained; none on the simulator (its clock is its own).
fn future_limit(state: &AppState) -> Option<(f64, String)> {
    let cfg = &state.config;
    cfg.backend.is_live().then(|| {
        let skew = cfg.max_future_skew_seconds;
        (
            wall_now() + skew,
            format!("the wall clock plus max_future_skew_seconds = {skew}: events may not come from the future"),
        )
    })
}

/// Refuses a start or finish before its job's submit (in the same request, else the
/// ingested one of the job's unfinished run); `prefix(i)` is event `i`'s field path prefix.
fn check_order(
    state: &AppState,
    events: &[Event],
    prefix: impl Fn(usize) -> String,
) -> Result<(), ApiError> {
    let o = state.online();
    let mut submits: HashMap<&str, f64> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let (job_id, at, what) = match e {
            Event::JobSubmitted { job_id, at, .. } => {
                submits.insert(job_id, *at);
                continue;
            }
            Event::JobStarted { job_id, at } => (job_id, *at, "start"),
            Event::JobFinished { job_id, at, .. } => (job_id, *at, "finish"),
            _ => continue,
        };
        let submit = submits.get(job_id.as_str()).copied().or_else(|| {
            o.jobs
                .get(job_id)
                .filter(|j| j.finished_at.is_none())
                .and_then(|j| j.submitted_at)
        });
        if let Some(s) = submit.filter(|&s| at < s) {
            return Err(ApiError::invalid(
                format!("{}at", prefix(i)),
                format!("the {what} at {at} is before the job's submit at {s}"),
            ));
        }
    }
    Ok(())
}

/// `POST /v1/events`: one event, stored durably before the answer.
#[utoipa::path(
    post,
    path = "/v1/events",
    tag = "ingest",
    summary = "Ingest one event; answered once it is stored durably. Times are epoch seconds or RFC 3339 strings; on a live backend an event more than max_future_skew_seconds after the wall clock is refused",
    request_body = Event,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "stored", body = Ingested),
        (status = 422, description = "a field is invalid (named), or a time is in the future")
    )
)]
pub async fn ingest_one(
    State(state): State<AppState>,
    ApiJson(event): ApiJson<Event>,
) -> Result<Json<Ingested>, ApiError> {
    event.validate("")?;
    if let Some((limit, why)) = future_limit(&state) {
        event.check_within("", EARLIEST_LIVE_TIME, limit, &why)?;
    }
    check_order(&state, std::slice::from_ref(&event), |_| String::new())?;
    let seqs = state.store.append(vec![event]).await.map_err(store_error)?;
    Ok(Json(Ingested {
        seq: seqs.first().copied(),
        count: 1,
    }))
}

/// `POST /v1/events/batch`: up to `max_batch` events, stored together (all or none).
#[utoipa::path(
    post,
    path = "/v1/events/batch",
    tag = "ingest",
    summary = "Ingest a batch of events, stored together (all or none); a refused event (named by its index and field) stores none",
    request_body = EventBatch,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "stored", body = IngestedBatch),
        (status = 422, description = "a field of `events[i]` is invalid, or a time is in the future")
    )
)]
pub async fn ingest_batch(
    State(state): State<AppState>,
    ApiJson(batch): ApiJson<EventBatch>,
) -> Result<Json<IngestedBatch>, ApiError> {
    let n = batch.events.len();
    if n == 0 || n > state.config.max_batch {
        return Err(ApiError::invalid(
            "events",
            format!("must hold 1 to {} events, got {n}", state.config.max_batch),
        ));
    }
    let future = future_limit(&state);
    for (i, e) in batch.events.iter().enumerate() {
        e.validate(&format!("events[{i}]"))?;
        if let Some((limit, why)) = &future {
            e.check_within(&format!("events[{i}]"), EARLIEST_LIVE_TIME, *limit, why)?;
        }
    }
    check_order(&state, &batch.events, |i| format!("events[{i}]."))?;
    let seqs = state
        .store
        .append(batch.events)
        .await
        .map_err(store_error)?;
    Ok(Json(IngestedBatch {
        first_seq: seqs.first().copied(),
        last_seq: seqs.last().copied(),
        count: seqs.len(),
    }))
}

/// Query of `GET /v1/events`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events with a larger sequence number.
    #[serde(default)]
    pub after: i64,
    /// At most this many (1 to 10000, default 1000).
    #[serde(default)]
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<i64>,
}

/// `GET /v1/events?after=SEQ&limit=N`: the stored events in sequence order.
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "ingest",
    summary = "Stored events in sequence order",
    params(EventsQuery),
    responses((status = 200, description = "a page of events", body = EventPage))
)]
pub async fn list_events(
    State(state): State<AppState>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<EventPage>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid("(query)", e.body_text()))?;
    let limit = q.limit.unwrap_or(1000);
    if !(1..=10_000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be from 1 to 10000"));
    }
    let store = state.store.clone();
    let events = tokio::task::spawn_blocking(move || store.read_after(q.after, limit))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let next_after = events.last().map(|e| e.seq);
    Ok(Json(EventPage { events, next_after }))
}
