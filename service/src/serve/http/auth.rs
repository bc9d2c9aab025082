//! Bearer-token authentication of the mutating endpoints (ingest, retrain, promote, roll
//! back, and whatever else is mounted behind [`require_token`]).
//!
//! The token comes from the configuration (`token` in the file, or `AUGUR_SERVE_TOKEN`); when
//! none is set it is read from `<data_dir>/auth-token`, or generated there on first start (32
//! random bytes, hex) with owner-only permissions (0600). Only `--insecure` turns
//! authentication off. Tokens are compared in constant time.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::Response;

use super::error::ApiError;
use crate::serve::AppState;

/// File name of the generated token under the data folder.
pub const TOKEN_FILE: &str = "auth-token";

/// How requests to mutating endpoints are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `--insecure`: every request is let through.
    Disabled,
    /// Requests must carry `Authorization: Bearer <token>`.
    Bearer { token: String },
}

/// Where the token came from (for the start-up message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Config,
    File(PathBuf),
    Generated(PathBuf),
    Insecure,
}

impl Auth {
    /// The authentication of a service with this configuration, reading or generating the
    /// token file under `data_dir` when no token is configured.
    pub fn resolve(
        token: Option<&str>,
        insecure: bool,
        data_dir: &Path,
    ) -> anyhow::Result<(Auth, TokenSource)> {
        if insecure {
            return Ok((Auth::Disabled, TokenSource::Insecure));
        }
        if let Some(t) = token {
            return Ok((
                Auth::Bearer {
                    token: t.to_string(),
                },
                TokenSource::Config,
            ));
        }
        let path = data_dir.join(TOKEN_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let token = text.trim().to_string();
                if token.len() < 16 {
                    anyhow::bail!(
                        "the token file {} holds fewer than 16 characters; delete it to generate a new one",
                        path.display()
                    );
                }
                Ok((Auth::Bearer { token }, TokenSource::File(path)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let token = generate_token();
                write_owner_only(&path, token.as_bytes())
                    .with_context(|| format!("cannot write the token file {}", path.display()))?;
                Ok((Auth::Bearer { token }, TokenSource::Generated(path)))
            }
            Err(e) => {
                Err(e).with_context(|| format!("cannot read the token file {}", path.display()))
            }
        }
    }

    /// Whether an `Authorization` header value is accepted.
    pub fn accepts(&self, header: Option<&str>) -> bool {
        match self {
            Auth::Disabled => true,
            // the scheme is case-insensitive (RFC 9110, 11.1)
            Auth::Bearer { token } => header
                .and_then(|h| h.trim_start().split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .is_some_and(|(_, given)| {
                    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
                }),
        }
    }
}

/// The permission bits of the token file at `path` that let its group or others read it
/// (none when it is owner-only, or on a system without Unix permissions).
pub fn readable_by_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o044 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// `uri` for the request log: the values of query parameters that may hold a credential
/// (`token`, `access_token`, `key`) replaced by `REDACTED`.
pub fn redacted_uri(uri: &axum::http::Uri) -> String {
    let Some(query) = uri.query() else {
        return uri.path().to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _))
                if ["token", "access_token", "key"]
                    .iter()
                    .any(|s| k.eq_ignore_ascii_case(s)) =>
            {
                format!("{k}=REDACTED")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{}?{}", uri.path(), query.join("&"))
}

/// 32 random bytes from the OS-seeded CSPRNG, as 64 hex characters.
fn generate_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates `path` (and its folder) readable and writable by the owner only, and syncs it.
fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.write_all(b"\n")?;
    f.sync_all()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Middleware: 401 unless the request carries the bearer token (or auth is disabled).
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if state.auth.accepts(header) {
        Ok(next.run(req).await)
    } else {
        Err(ApiError::unauthorized())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_token_is_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (auth, src) = Auth::resolve(None, false, dir.path()).unwrap();
        let path = dir.path().join(TOKEN_FILE);
        assert_eq!(src, TokenSource::Generated(path.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
        }
        let Auth::Bearer { token } = &auth else {
            panic!("auth is on")
        };
        assert_eq!(token.len(), 64);
        assert_eq!(readable_by_others(&path), None);
        let (again, src) = Auth::resolve(None, false, dir.path()).unwrap();
        assert_eq!(src, TokenSource::File(path));
        let Auth::Bearer { token: t2 } = again else {
            panic!("auth is on")
        };
        assert_eq!(&t2, token);
    }

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        let auth = Auth::Bearer {
            token: "0123456789abcdef".into(),
        };
        assert!(auth.accepts(Some("Bearer 0123456789abcdef")));
        assert!(!auth.accepts(None));
        assert!(!auth.accepts(Some("Bearer 0123456789abcdeF")));
        assert!(!auth.accepts(Some("Bearer 0123456789abcde")));
        assert!(!auth.accepts(Some("Basic 0123456789abcdef")));
        // the scheme in any case
        assert!(auth.accepts(Some("bearer 0123456789abcdef")));
        assert!(auth.accepts(Some("BEARER 0123456789abcdef")));
        assert!(!auth.accepts(Some("bearer 0123456789abcdeF")));
        assert!(!auth.accepts(Some("bearer0123456789abcdef")));
        assert!(Auth::Disabled.accepts(None));
        // a configured token wins over the file, and --insecure over both
        let dir = tempfile::tempdir().unwrap();
        let (a, s) = Auth::resolve(Some("configured-token-123"), false, dir.path()).unwrap();
        assert_eq!(s, TokenSource::Config);
        assert!(a.accepts(Some("Bearer configured-token-123")));
        assert!(!dir.path().join(TOKEN_FILE).exists());
        let (a, s) = Auth::resolve(Some("configured-token-123"), true, dir.path()).unwrap();
        assert_eq!(s, TokenSource::Insecure);
        assert!(a.accepts(None));
    }

    #[cfg(unix)]
    #[test]
    fn a_group_or_world_readable_token_file_is_noticed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKEN_FILE);
        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(readable_by_others(&path), Some(0o644));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(readable_by_others(&path), Some(0o640));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(readable_by_others(&path), None);
    }

    #[test]
    fn credentials_in_the_query_are_redacted_for_the_log() {
        let uri: axum::http::Uri = "/v1/events?token=s3cret&limit=5&Access_Token=x"
            .parse()
            .unwrap();
        let logged = redacted_uri(&uri);
        assert_eq!(
            logged,
            "/v1/events?token=REDACTED&limit=5&Access_Token=REDACTED"
        );
        assert!(!logged.contains("s3cret"));
        assert_eq!(redacted_uri(&"/healthz".parse().unwrap()), "/healthz");
    }
}
