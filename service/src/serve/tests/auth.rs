//! The token on reads: with `auth_reads` the reads that expose users and job names need it
//! (in any case of the `Bearer` scheme); without, they stay open; health never needs it.

use axum::body::Body;
use axum::http::{Request, StatusCode};

use super::{raw, ServeConfig, TOKEN};
use crate::serve::AppState;

fn service_with(auth_reads: bool) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = ServeConfig {
        data_dir: dir.path().to_path_buf(),
        token: Some(TOKEN.into()),
        auth_reads,
        ..ServeConfig::default()
    };
    let (state, _) = AppState::open(config).unwrap();
    (state, dir)
}

async fn get(state: &AppState, path: &str, authorization: Option<String>) -> StatusCode {
    let mut req = Request::builder().method("GET").uri(path);
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    raw(state, req.body(Body::empty()).unwrap()).await.0
}

#[tokio::test]
async fn auth_reads_guards_the_reads_that_name_users_and_jobs() {
    let (state, _dir) = service_with(true);
    for path in [
        "/v1/events",
        "/v1/jobs/some-job",
        "/v1/predictions/recent",
        "/v1/eta",
        "/v1/autoscaler/decisions",
    ] {
        assert_eq!(
            get(&state, path, None).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        let wrong = Some("Bearer not-the-token-at-all".to_string());
        assert_eq!(
            get(&state, path, wrong).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        let lower = Some(format!("bearer {TOKEN}"));
        assert_ne!(
            get(&state, path, lower).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    assert_eq!(
        get(&state, "/v1/events", Some(format!("Bearer {TOKEN}"))).await,
        StatusCode::OK
    );
    assert_eq!(get(&state, "/healthz", None).await, StatusCode::OK);
    assert_eq!(get(&state, "/v1/models", None).await, StatusCode::OK);

    // off (the default): the same reads need no token
    let (open, _dir) = service_with(false);
    assert_eq!(get(&open, "/v1/events", None).await, StatusCode::OK);
    assert_eq!(
        get(&open, "/v1/predictions/recent", None).await,
        StatusCode::OK
    );
    assert_eq!(
        get(&open, "/v1/jobs/some-job", None).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(get(&open, "/v1/eta", None).await, StatusCode::OK);
}

/// Whether `/openapi.json` of `state` says `GET path` needs the bearer token.
async fn documented_with_token(state: &AppState, path: &str) -> bool {
    let req = Request::builder()
        .method("GET")
        .uri("/openapi.json")
        .body(Body::empty())
        .unwrap();
    let (st, doc) = raw(state, req).await;
    assert_eq!(st, StatusCode::OK);
    let security = &doc["paths"][path]["get"]["security"];
    security
        .as_array()
        .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()))
}

#[tokio::test]
async fn the_openapi_document_marks_the_guarded_reads_only_when_auth_reads_is_on() {
    let (guarded, _dir) = service_with(true);
    let (open, _dir2) = service_with(false);
    for path in ["/v1/events", "/v1/jobs/{id}", "/v1/predictions/recent"] {
        assert!(documented_with_token(&guarded, path).await, "{path}");
        assert!(!documented_with_token(&open, path).await, "{path}");
    }
    // reads that name nobody stay open either way
    assert!(!documented_with_token(&guarded, "/v1/models").await);
    assert!(!documented_with_token(&guarded, "/healthz").await);
}
