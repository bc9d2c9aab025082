//! API errors and the JSON body extractor whose rejections name the offending field.
//!
//! Every error answer is `{"error": {"code": "...", "field": "...", "message": "..."}}`
//! (`field` only when one field is to blame, as a path like `events[2].profile.num_gpus`):
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `malformed_json` | the body is not JSON (syntax error, truncated) |
//! | 401 | `unauthorized` | a mutating endpoint without the bearer token |
//! | 404 | `not_found` / `no_such_route` | unknown job, model version, or path |
//! | 409 | `conflict` | e.g. a retrain while one is running |
//! | 413 | `body_too_large` | body over `body_limit_bytes` |
//! | 415 | `unsupported_media_type` | a body whose content type is not JSON |
//! | 422 | `invalid_field` | JSON of the wrong shape or an invalid value, naming the field |
//! | 503 | `model_not_available` / `not_ready` | the model is not trained/loaded (yet) |
//! | 503 | `overloaded` | every prediction worker is busy (with `Retry-After`) |
//! | 503 | `store_unavailable` | the store retries a failed commit or has stopped (events not acknowledged) |
//! | 507 | `insufficient_storage` | the disk is full (events not acknowledged) |
//! | 500 | `internal` | the service failed inside (e.g. the store: the event was not acknowledged); the message names what failed, never the internal text, which goes to the log |

use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::ToSchema;

/// What every 500 answer says after naming what failed: the details are in the log only.
pub const INTERNAL_MESSAGE: &str = "internal error; see the service's log";

/// An error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub field: Option<String>,
    pub message: String,
}

/// Every error answer: `{"error": {"code", "field", "message"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code (see the module docs).
    pub code: &'static str,
    /// The field at fault, as a path like `events[2].profile.num_gpus`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            field: None,
            message: message.into(),
        }
    }

    /// 422: `field` is invalid because `message`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_field",
            field: Some(field.into()),
            message: message.into(),
        }
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this endpoint needs `Authorization: Bearer <token>` (see the token file printed at start-up, or AUGUR_SERVE_TOKEN)",
        )
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 503: the model of `kind` cannot answer.
    pub fn model_not_available(kind: &str, why: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "model_not_available",
            format!("model not available: {kind}: {why}"),
        )
    }

    /// 503: every one of the `workers` prediction workers stayed busy (`Retry-After: 1`).
    pub fn overloaded(workers: usize) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            format!("all {workers} prediction workers are busy: retry later (prediction_workers)"),
        )
    }

    /// 500: `what` failed because of `error`, a failure inside the service (the store, a
    /// worker thread, a model). The log keeps `error` in full (alternate form: an `anyhow`
    /// error with its causes), inside the request's span, which names its method and path;
    /// the answer says only `what` failed and never carries the internal text (paths, SQL,
    /// file names).
    pub fn internal(what: &'static str, error: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %format_args!("{error:#}"), "{what}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{what}: {INTERNAL_MESSAGE}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                field: self.field,
                message: self.message,
            },
        };
        let overloaded = self.code == "overloaded";
        let mut resp = (status, axum::Json(body)).into_response();
        if overloaded {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

/// A JSON body; a rejection names the field at fault (see the module docs).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ok = ct.to_str().is_ok_and(|s| {
                let s = s.to_ascii_lowercase();
                s.starts_with("application/json") || s.contains("+json")
            });
            if !ok {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    "the body must be JSON (Content-Type: application/json)",
                ));
            }
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rej| {
                let status = rej.status();
                if status == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(status, "body_too_large", rej.body_text())
                } else {
                    ApiError::new(StatusCode::BAD_REQUEST, "bad_body", rej.body_text())
                }
            })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Deserialises `bytes`, naming the field at fault on error.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        json_error(&path, &inner)
    })?;
    de.end().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("trailing characters after the JSON value: {e}"),
        )
    })?;
    Ok(value)
}

fn json_error(path: &str, e: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let msg = e.to_string();
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the body is not valid JSON: {msg}"),
        ),
        Category::Data => {
            let (field, message) = field_and_message(path, &strip_position(&msg));
            ApiError::invalid(field, message)
        }
    }
}

/// Marks an error raised inside a nested deserialisation that knows its own field path
/// (see `events::Event`'s `TryFrom<Value>`): "field `PATH`: MESSAGE".
pub const FIELD_MARK: &str = "field `";

/// The error of such a nested deserialisation: serde carries it on as its text
/// ([`FIELD_MARK`]), which [`field_and_message`] reads back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct FieldError {
    /// The path of the field at fault, from the nested value (empty: the value itself).
    pub field: String,
    pub message: String,
}

/// The field at fault and the message, from serde_path_to_error's `path` and serde's
/// message. serde names missing fields in backticks while the path stops at their parent;
/// for unknown fields the path already ends with the key.
pub fn field_and_message(path: &str, msg: &str) -> (String, String) {
    let base = if path == "." { "" } else { path };
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else if b.is_empty() {
            a.to_string()
        } else {
            format!("{a}.{b}")
        }
    };
    if let Some(rest) = msg.strip_prefix(FIELD_MARK) {
        if let Some((inner, message)) = rest.split_once("`: ") {
            return (join(base, inner), message.to_string());
        }
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or("");
        return (join(base, name), msg.to_string());
    }
    let field = if base.is_empty() { "(body)" } else { base };
    (field.to_string(), msg.to_string())
}

/// serde_json appends " at line L column C"; the field path says more.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Item>,
    }
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Item {
        id: String,
        n: f64,
    }

    #[test]
    fn a_field_error_reads_back_as_its_field() {
        let e = FieldError {
            field: "profile.num_gpus".into(),
            message: "must be at least 0".into(),
        };
        assert!(e.to_string().starts_with(FIELD_MARK), "{e}");
        let (field, message) = field_and_message("events[2]", &e.to_string());
        assert_eq!(field, "events[2].profile.num_gpus");
        assert_eq!(message, "must be at least 0");
    }

    #[test]
    fn errors_name_the_field() {
        let e =
            parse_json::<Outer>(br#"{"items":[{"id":"a","n":1},{"id":"b","n":"x"}]}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.field.as_deref(), Some("items[1].n"));
        let e = parse_json::<Outer>(br#"{"items":[{"id":"a"}]}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("items[0].n"), "{e:?}");
        let e = parse_json::<Outer>(br#"{"items":[],"extra":1}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("extra"), "{e:?}");
        let e = parse_json::<Outer>(br#"{"items":["#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.code, "malformed_json");
    }
}
