//! `POST /v1/events`, `POST /v1/events/batch`: events stored durably before the answer;
//! `GET /v1/events`: the stored events in sequence order.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::serve::backends::controller::SimClock;
use crate::serve::http::error::{ApiError, ApiJson};
use crate::serve::state::bounds::EARLIEST_LIVE_TIME;
use crate::serve::state::event_time::{wall_now, TimeWindow};
use crate::serve::state::events::{Event, EventBatch};
use crate::serve::state::store::{StoreError, StoredEvent, WriteFailure};
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

/// The answer to events the store did not take: 507 on a full disk, 503 while the writer
/// retries a failed commit or has stopped (both retryable), else 500; none carries the
/// store's path or internal text.
fn store_error(e: StoreError) -> ApiError {
    use axum::http::StatusCode;
    let answer = match &e {
        StoreError::Write { failure, .. } if failure.is_disk_full() => ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "insufficient_storage",
            "the disk is full: the events were not stored (not acknowledged); retry once there is space",
        ),
        StoreError::Write {
            failure: WriteFailure::Stalled { .. },
            ..
        } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the event store is retrying a failed commit: the events were not stored (not acknowledged); retry later",
        ),
        StoreError::Closed => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the event store has stopped: the events were not stored (not acknowledged)",
        ),
        _ => {
            return ApiError::internal(
                "the events were not stored (not acknowledged): the store failed",
                e,
            )
        }
    };
    tracing::error!(error = %e, "storing events failed");
    answer
}

/// The window the events' times must fall in: on a live backend from 2000-01-01 to the wall
/// clock plus the allowed skew; on the simulator from its trace's start to its clock plus the
/// same skew in simulated seconds (skew × speed). None when no simulator drives this state
/// (in-process tests); 503 while the simulator loads or after it failed, its clock unknown.
fn time_window(state: &AppState) -> Result<Option<TimeWindow>, ApiError> {
    let skew = state.config.max_future_skew_seconds;
    if state.config.backend.is_live() {
        return Ok(Some(TimeWindow {
            earliest: EARLIEST_LIVE_TIME,
            earliest_why: "2000-01-01: give epoch seconds or an RFC 3339 time".to_string(),
            latest: wall_now() + skew,
            latest_why: format!("the wall clock plus max_future_skew_seconds = {skew}: events may not come from the future"),
        }));
    }
    match state.ext.live.sim_clock() {
        SimClock::Absent => Ok(None),
        SimClock::Running {
            trace_start,
            now,
            speed,
        } => Ok(Some(TimeWindow {
            earliest: trace_start,
            earliest_why: "the start of the simulator's trace: events may not come from before the simulation".to_string(),
            latest: now + skew * speed,
            latest_why: format!("the simulator's clock plus max_future_skew_seconds = {skew} at its speed of {speed} simulated seconds per second: events may not come from the simulation's future"),
        })),
        SimClock::Loading => Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the simulator is loading its trace: events are taken once its clock runs",
        )),
        SimClock::Failed => Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the simulator could not start (see /v1/cluster): without its clock events cannot be placed in time",
        )),
    }
}

/// How much a finish's `duration` may exceed the time from its submit to it (traces give
/// whole seconds).
const DURATION_SLACK_S: f64 = 1.0;

/// Refuses a start or finish before its job's submit, and a finish whose `duration` is longer
/// than the time since that submit (in the same request, else the
/// ingested one of the job's unfinished run); `prefix(i)` is event `i`'s field path prefix.
fn check_order(
    state: &AppState,
    events: &[Event],
    prefix: impl Fn(usize) -> String,
) -> Result<(), ApiError> {
    let o = state.online();
    let mut submits: HashMap<&str, f64> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let (job_id, at, what, duration) = match e {
            Event::JobSubmitted { job_id, at, .. } => {
                submits.insert(job_id, *at);
                continue;
            }
            Event::JobStarted { job_id, at } => (job_id, *at, "start", None),
            Event::JobTyped { job_id, at, .. } => (job_id, *at, "GPU type", None),
            Event::JobFinished {
                job_id,
                at,
                duration,
                ..
            } => (job_id, *at, "finish", *duration),
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
        // a run cannot last longer than the job has existed (1 s allowed for traces'
        // whole-second times)
        if let (Some(s), Some(d)) = (submit, duration) {
            if d > at - s + DURATION_SLACK_S {
                return Err(ApiError::invalid(
                    format!("{}duration", prefix(i)),
                    format!(
                        "{d} s is longer than the {:.0} s from the job's submit at {s} to this finish at {at}",
                        at - s
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `POST /v1/events`: one event, stored durably before the answer.
#[utoipa::path(
    post,
    path = "/v1/events",
    tag = "ingest",
    summary = "Ingest one event; answered once it is stored durably. Times are epoch seconds or RFC 3339 strings; an event more than max_future_skew_seconds after the wall clock (on the simulator: after its clock, the skew in simulated seconds) or before 2000 (the simulator's trace) is refused",
    request_body = Event,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "stored", body = Ingested),
        (status = 422, description = "a field is invalid (named), or a time is outside the backend's window"),
        (status = 503, description = "on the simulator: its clock is not running (loading or failed)")
    )
)]
pub async fn ingest_one(
    State(state): State<AppState>,
    ApiJson(event): ApiJson<Event>,
) -> Result<Json<Ingested>, ApiError> {
    event.validate("")?;
    if let Some(window) = time_window(&state)? {
        event.check_within("", &window)?;
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
        (status = 422, description = "a field of `events[i]` is invalid, or a time is outside the backend's window"),
        (status = 503, description = "on the simulator: its clock is not running (loading or failed)")
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
    let window = time_window(&state)?;
    for (i, e) in batch.events.iter().enumerate() {
        e.validate(&format!("events[{i}]"))?;
        if let Some(window) = &window {
            e.check_within(&format!("events[{i}]"), window)?;
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
        .map_err(|e| ApiError::internal("reading the events failed", e))?
        .map_err(|e| ApiError::internal("reading the events failed", e))?;
    let next_after = events.last().map(|e| e.seq);
    Ok(Json(EventPage { events, next_after }))
}
