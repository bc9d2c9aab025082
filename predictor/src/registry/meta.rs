//! The metadata of stored artifacts: what `meta.json` and `promoted.json` hold, what a
//! caller tells the registry about a new artifact, and which version to load.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::RegistryError;

/// Version of the on-disk artifact layout and metadata; bumped on incompatible changes.
pub const ARTIFACT_FORMAT_VERSION: u32 = 1;

/// How the payload file is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadEncoding {
    /// serde JSON.
    Json,
    /// serde JSON, gzip-compressed.
    JsonGzip,
}

/// The metadata stored beside every payload (`meta.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Model kind, e.g. `runtime`.
    pub kind: String,
    /// The `N` of `vN`.
    pub version: u32,
    /// [`ARTIFACT_FORMAT_VERSION`] at save.
    pub format_version: u32,
    /// Version of the Augur crates that saved it.
    pub augur_version: String,
    /// Name of the dataset (or trace file) it was trained on.
    pub dataset: String,
    /// Feature schema version of the model.
    pub feature_schema_version: u32,
    /// Evaluation metrics (e.g. `mae_log`, `within2x`, `coverage80`).
    pub metrics: BTreeMap<String, f64>,
    /// Number of jobs the model was trained on.
    pub training_rows: usize,
    /// When it was saved, RFC 3339 (UTC).
    pub created_at: String,
    /// Payload file name inside the version folder.
    pub payload_file: String,
    pub payload_encoding: PayloadEncoding,
    /// Payload size in bytes (as stored).
    pub payload_bytes: u64,
    /// SHA-256 of the payload file as stored, lowercase hex.
    pub payload_sha256: String,
    /// Free-form notes (e.g. what part of the trace it was trained on).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
    /// For a model trained on a service's ingested history: the sequence number of that
    /// history's first event. The service builds the model's online state from that event
    /// on, so its features see the span of history it was trained on. `None`: trained on a
    /// trace file (its online state sees the whole event log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_from_seq: Option<i64>,
}

/// What the caller tells [`ModelRegistry::save`] about a new artifact.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub dataset: String,
    pub metrics: BTreeMap<String, f64>,
    pub training_rows: usize,
    pub notes: BTreeMap<String, String>,
    /// See [`ArtifactMeta::history_from_seq`].
    pub history_from_seq: Option<i64>,
    /// Gzip the payload (default `true`).
    pub compress: bool,
}

impl NewArtifact {
    /// An artifact description with no metrics or notes, compressed.
    pub fn new(dataset: impl Into<String>, training_rows: usize) -> NewArtifact {
        NewArtifact {
            dataset: dataset.into(),
            metrics: BTreeMap::new(),
            training_rows,
            notes: BTreeMap::new(),
            history_from_seq: None,
            compress: true,
        }
    }
}

/// Which version to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// The highest version.
    Latest,
    /// The promoted version (an error when none is).
    Promoted,
    /// The promoted version, else the latest.
    Serving,
    /// A given version.
    Version(u32),
}

impl FromStr for Selector {
    type Err = String;
    /// `latest`, `promoted`, `serving`, `v3` or `3`.
    fn from_str(s: &str) -> Result<Selector, String> {
        match s {
            "latest" => Ok(Selector::Latest),
            "promoted" => Ok(Selector::Promoted),
            "serving" => Ok(Selector::Serving),
            _ => s
                .strip_prefix('v')
                .unwrap_or(s)
                .parse::<u32>()
                .ok()
                .filter(|&v| v > 0)
                .map(Selector::Version)
                .ok_or_else(|| {
                    format!("`{s}` is not a version: use v1, v2, ..., latest, promoted or serving")
                }),
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Latest => f.write_str("latest"),
            Selector::Promoted => f.write_str("promoted"),
            Selector::Serving => f.write_str("serving"),
            Selector::Version(v) => write!(f, "v{v}"),
        }
    }
}

/// One version folder as listed; `meta` holds why its metadata is unusable, if it is.
#[derive(Debug)]
pub struct VersionEntry {
    pub version: u32,
    pub dir: PathBuf,
    pub meta: Result<ArtifactMeta, RegistryError>,
}

/// The promoted pointer of a kind (`promoted.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    /// The version to serve.
    pub version: u32,
    /// Versions promoted before, oldest first (the target of a rollback is the last).
    #[serde(default)]
    pub history: Vec<u32>,
}
