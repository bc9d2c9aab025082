//! The registry's errors: each names the file (or folder) and the reason.

use std::path::PathBuf;

/// Errors of the model registry. Each names the file (or folder) and the reason.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: metadata file is missing (incomplete or damaged artifact)", path.display())]
    MissingMetadata { path: PathBuf },
    #[error("{}: unusable metadata: {reason}", path.display())]
    BadMetadata { path: PathBuf, reason: String },
    #[error(
        "{}: payload is {actual} bytes but the metadata says {expected} (truncated or replaced)",
        path.display()
    )]
    SizeMismatch {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error(
        "{}: SHA-256 mismatch, the payload is corrupt or was modified (expected {expected}, got {actual})",
        path.display()
    )]
    HashMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error(
        "{}: artifact format version {found} is not supported (this build reads version {supported})",
        path.display()
    )]
    IncompatibleFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error(
        "{}: model uses feature schema version {found}, this build computes version {expected}; retrain it",
        path.display()
    )]
    IncompatibleSchema {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error("{}: holds a `{found}` model, expected `{expected}`", path.display())]
    WrongKind {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("{}: payload does not decode: {reason}", path.display())]
    BadPayload { path: PathBuf, reason: String },
    #[error("{}: no version v{version} of `{kind}` models (available: {available})", dir.display())]
    UnknownVersion {
        kind: String,
        version: u32,
        dir: PathBuf,
        available: String,
    },
    #[error("{}: no `{kind}` models saved yet", dir.display())]
    Empty { kind: String, dir: PathBuf },
    #[error("{}: no `{kind}` version is promoted", dir.display())]
    NotPromoted { kind: String, dir: PathBuf },
    #[error("{}: no `{kind}` version was promoted before v{current}; nothing to roll back to", dir.display())]
    NothingToRollBack {
        kind: String,
        current: u32,
        dir: PathBuf,
    },
    #[error("invalid model kind `{0}`: use letters, digits, `-` and `_`")]
    InvalidKind(String),
    #[error("metric `{name}` is {value}; metrics must be finite")]
    InvalidMetric { name: String, value: f64 },
    #[error("cannot serialise the model: {0}")]
    Serialize(String),
}
