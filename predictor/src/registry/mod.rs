//! Versioned model artifacts on disk: save, list, load (verified), promote, roll back.
//!
//! Layout under the registry root (default `./augur-data/models` in the CLI):
//!
//! ```text
//! <root>/<kind>/v1/meta.json        ArtifactMeta (JSON)
//! <root>/<kind>/v1/model.json.gz    the model as serde JSON, gzip-compressed (or model.json)
//! <root>/<kind>/v2/...
//! <root>/<kind>/promoted.json       {"version": 2, "history": [1]}
//! ```
//!
//! - **Versions** are `v1, v2, ...` per kind (`runtime`, ...), one more than the highest one
//!   present. A version is written into a hidden temporary folder next to the versions (files
//!   flushed to disk) and renamed to `vN` in one step, so a reader never sees half an
//!   artifact; when two writers race for the same `N`, the rename of the second fails
//!   (`vN` exists and is not empty) and it takes the next number.
//! - **Loading verifies** the metadata (kind, version), the artifact format version, the
//!   payload size and SHA-256, the feature schema version (in the metadata and in the
//!   payload itself) against the running build, and that the payload decodes. Any failure is
//!   a [`RegistryError`] naming the file and the reason; nothing here panics on disk content.
//! - **Promotion**: `promoted.json` names the version to serve and the versions promoted
//!   before it; [`ModelRegistry::rollback`] returns to the previous one. Without a promoted
//!   version, [`ModelRegistry::load_serving`] serves the latest.

mod error;
mod files;
mod kind;
mod meta;

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use error::RegistryError;
use files::{
    io_err, parse_version_dir, sha256_hex, sync_dir, unique_suffix, valid_kind, write_atomic,
    write_synced,
};
pub use kind::{Artifact, ModelKind};
pub use meta::{
    ArtifactMeta, NewArtifact, PayloadEncoding, Promotion, Selector, VersionEntry,
    ARTIFACT_FORMAT_VERSION,
};

const META_FILE: &str = "meta.json";
const PROMOTED_FILE: &str = "promoted.json";

/// A folder of versioned model artifacts.
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    root: PathBuf,
}

impl ModelRegistry {
    /// Opens the registry at `dir`, creating the folder if needed.
    pub fn open(dir: impl AsRef<Path>) -> Result<ModelRegistry, RegistryError> {
        let root = dir.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(io_err(&root))?;
        if !root.is_dir() {
            return Err(RegistryError::Io {
                path: root,
                source: std::io::Error::other("not a folder"),
            });
        }
        Ok(ModelRegistry { root })
    }

    /// The registry folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of a kind's versions.
    pub fn kind_dir(&self, kind: &str) -> PathBuf {
        self.root.join(kind)
    }

    /// The folder of one version.
    pub fn version_dir(&self, kind: &str, version: u32) -> PathBuf {
        self.kind_dir(kind).join(format!("v{version}"))
    }

    /// Kinds with at least one version folder, sorted.
    pub fn kinds(&self) -> Result<Vec<String>, RegistryError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.root).map_err(io_err(&self.root))? {
            let entry = entry.map_err(io_err(&self.root))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_kind(&name).is_ok()
                && entry.path().is_dir()
                && !self.version_numbers(&name)?.is_empty()
            {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Version numbers present for `kind`, ascending.
    pub fn version_numbers(&self, kind: &str) -> Result<Vec<u32>, RegistryError> {
        valid_kind(kind)?;
        let dir = self.kind_dir(kind);
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&dir)(e)),
        };
        let mut out = Vec::new();
        for entry in rd {
            let entry = entry.map_err(io_err(&dir))?;
            if let Some(v) = parse_version_dir(&entry.file_name().to_string_lossy()) {
                if entry.path().is_dir() {
                    out.push(v);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Every version of `kind` with its metadata (read and checked against its folder, the
    /// payload not verified), ascending.
    pub fn versions(&self, kind: &str) -> Result<Vec<VersionEntry>, RegistryError> {
        Ok(self
            .version_numbers(kind)?
            .into_iter()
            .map(|v| VersionEntry {
                version: v,
                dir: self.version_dir(kind, v),
                meta: self.read_meta(kind, v),
            })
            .collect())
    }

    /// Saves `model` as the next version of its kind; returns its metadata.
    pub fn save<T: Artifact>(
        &self,
        model: &T,
        info: NewArtifact,
    ) -> Result<ArtifactMeta, RegistryError> {
        self.save_as(T::KIND, model, model.feature_schema_version(), info)
    }

    /// Saves any serialisable model under `kind` (see [`save`](Self::save)).
    pub fn save_as<T: Serialize>(
        &self,
        kind: &str,
        model: &T,
        feature_schema_version: u32,
        info: NewArtifact,
    ) -> Result<ArtifactMeta, RegistryError> {
        valid_kind(kind)?;
        if let Some((name, &value)) = info.metrics.iter().find(|(_, v)| !v.is_finite()) {
            return Err(RegistryError::InvalidMetric {
                name: name.clone(),
                value,
            });
        }
        let json =
            serde_json::to_vec(model).map_err(|e| RegistryError::Serialize(e.to_string()))?;
        let (payload, file, encoding) = if info.compress {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(json.len() / 4),
                flate2::Compression::default(),
            );
            enc.write_all(&json)
                .and_then(|_| enc.finish())
                .map(|gz| (gz, "model.json.gz", PayloadEncoding::JsonGzip))
                .map_err(|e| RegistryError::Serialize(format!("gzip: {e}")))?
        } else {
            (json, "model.json", PayloadEncoding::Json)
        };
        let kind_dir = self.kind_dir(kind);
        fs::create_dir_all(&kind_dir).map_err(io_err(&kind_dir))?;
        let tmp = kind_dir.join(format!(".tmp-{}", unique_suffix()));
        fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        let result = (|| {
            write_synced(&tmp.join(file), &payload)?;
            let mut meta = ArtifactMeta {
                kind: kind.to_string(),
                version: 0,
                format_version: ARTIFACT_FORMAT_VERSION,
                augur_version: env!("CARGO_PKG_VERSION").to_string(),
                dataset: info.dataset,
                feature_schema_version,
                metrics: info.metrics,
                training_rows: info.training_rows,
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                payload_file: file.to_string(),
                payload_encoding: encoding,
                payload_bytes: payload.len() as u64,
                payload_sha256: sha256_hex(&payload),
                notes: info.notes,
                history_from_seq: info.history_from_seq,
            };
            // a racing writer may take our number: retry with the next one
            for _ in 0..1000 {
                meta.version = self.version_numbers(kind)?.last().map_or(1, |v| v + 1);
                let meta_json = serde_json::to_vec_pretty(&meta)
                    .map_err(|e| RegistryError::Serialize(e.to_string()))?;
                write_synced(&tmp.join(META_FILE), &meta_json)?;
                sync_dir(&tmp);
                let target = self.version_dir(kind, meta.version);
                match fs::rename(&tmp, &target) {
                    Ok(()) => {
                        sync_dir(&kind_dir);
                        return Ok(meta);
                    }
                    Err(e)
                        if target.exists()
                            || matches!(
                                e.kind(),
                                std::io::ErrorKind::AlreadyExists
                                    | std::io::ErrorKind::DirectoryNotEmpty
                            ) =>
                    {
                        continue
                    }
                    Err(e) => return Err(io_err(&target)(e)),
                }
            }
            Err(RegistryError::Io {
                path: kind_dir.clone(),
                source: std::io::Error::other("could not claim a version number"),
            })
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        result
    }

    /// Reads and checks the metadata of a version (not the payload).
    fn read_meta(&self, kind: &str, version: u32) -> Result<ArtifactMeta, RegistryError> {
        valid_kind(kind)?;
        let dir = self.version_dir(kind, version);
        if !dir.is_dir() {
            let available = self
                .version_numbers(kind)?
                .iter()
                .map(|v| format!("v{v}"))
                .collect::<Vec<_>>();
            return Err(RegistryError::UnknownVersion {
                kind: kind.to_string(),
                version,
                dir: self.kind_dir(kind),
                available: if available.is_empty() {
                    "none".into()
                } else {
                    available.join(", ")
                },
            });
        }
        let path = dir.join(META_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(RegistryError::MissingMetadata { path })
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        // the format version first: a newer layout may not parse as this one
        #[derive(Deserialize)]
        struct FormatOnly {
            format_version: u32,
        }
        let bad = |reason: String| RegistryError::BadMetadata {
            path: path.clone(),
            reason,
        };
        let fv: FormatOnly = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if fv.format_version != ARTIFACT_FORMAT_VERSION {
            return Err(RegistryError::IncompatibleFormat {
                path,
                found: fv.format_version,
                supported: ARTIFACT_FORMAT_VERSION,
            });
        }
        let meta: ArtifactMeta = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if meta.kind != kind {
            return Err(RegistryError::WrongKind {
                path,
                found: meta.kind,
                expected: kind.to_string(),
            });
        }
        if meta.version != version {
            return Err(bad(format!(
                "says version {}, but lies in folder v{version}",
                meta.version
            )));
        }
        let plain_name = Path::new(&meta.payload_file)
            .file_name()
            .is_some_and(|n| n == meta.payload_file.as_str())
            && meta.payload_file != META_FILE;
        if !plain_name {
            return Err(bad(format!(
                "payload file `{}` is not a file name in the version folder",
                meta.payload_file
            )));
        }
        Ok(meta)
    }

    /// Checks a version's metadata, format version, payload size and SHA-256; returns the
    /// metadata and the payload bytes as stored.
    fn read_verified(
        &self,
        kind: &str,
        version: u32,
    ) -> Result<(ArtifactMeta, Vec<u8>), RegistryError> {
        let meta = self.read_meta(kind, version)?;
        let path = self.version_dir(kind, version).join(&meta.payload_file);
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        if bytes.len() as u64 != meta.payload_bytes {
            return Err(RegistryError::SizeMismatch {
                path,
                expected: meta.payload_bytes,
                actual: bytes.len() as u64,
            });
        }
        let actual = sha256_hex(&bytes);
        if !actual.eq_ignore_ascii_case(&meta.payload_sha256) {
            return Err(RegistryError::HashMismatch {
                path,
                expected: meta.payload_sha256,
                actual,
            });
        }
        Ok((meta, bytes))
    }

    /// Checks a version's integrity (metadata, format version, size, SHA-256) without
    /// decoding the model.
    pub fn verify(&self, kind: &str, version: u32) -> Result<ArtifactMeta, RegistryError> {
        self.read_verified(kind, version).map(|(m, _)| m)
    }

    /// The version a selector names for `kind`.
    pub fn resolve(&self, kind: &str, selector: Selector) -> Result<u32, RegistryError> {
        let latest = || {
            self.version_numbers(kind)?
                .last()
                .copied()
                .ok_or_else(|| RegistryError::Empty {
                    kind: kind.to_string(),
                    dir: self.kind_dir(kind),
                })
        };
        match selector {
            Selector::Version(v) => Ok(v),
            Selector::Latest => latest(),
            Selector::Promoted => {
                self.promotion(kind)?
                    .map(|p| p.version)
                    .ok_or_else(|| RegistryError::NotPromoted {
                        kind: kind.to_string(),
                        dir: self.kind_dir(kind),
                    })
            }
            Selector::Serving => match self.promotion(kind)? {
                Some(p) => Ok(p.version),
                None => latest(),
            },
        }
    }

    /// Loads and verifies a version of `T` (see the module doc for what is checked).
    pub fn load<T: Artifact>(
        &self,
        selector: Selector,
    ) -> Result<(T, ArtifactMeta), RegistryError> {
        let version = self.resolve(T::KIND, selector)?;
        let (meta, bytes) = self.read_verified(T::KIND, version)?;
        let path = self.version_dir(T::KIND, version).join(&meta.payload_file);
        let expected = T::CURRENT_FEATURE_SCHEMA_VERSION;
        if meta.feature_schema_version != expected {
            return Err(RegistryError::IncompatibleSchema {
                path: self.version_dir(T::KIND, version).join(META_FILE),
                found: meta.feature_schema_version,
                expected,
            });
        }
        let bad = |reason: String| RegistryError::BadPayload {
            path: path.clone(),
            reason,
        };
        let model: T = match meta.payload_encoding {
            PayloadEncoding::Json => serde_json::from_slice(&bytes),
            PayloadEncoding::JsonGzip => {
                let mut json = Vec::with_capacity(bytes.len() * 4);
                flate2::read::GzDecoder::new(bytes.as_slice())
                    .read_to_end(&mut json)
                    .map_err(|e| bad(format!("gzip: {e}")))?;
                serde_json::from_slice(&json)
            }
        }
        .map_err(|e| bad(e.to_string()))?;
        if model.feature_schema_version() != expected {
            return Err(RegistryError::IncompatibleSchema {
                path,
                found: model.feature_schema_version(),
                expected,
            });
        }
        Ok((model, meta))
    }

    /// Loads the highest version of `T`.
    pub fn load_latest<T: Artifact>(&self) -> Result<(T, ArtifactMeta), RegistryError> {
        self.load(Selector::Latest)
    }

    /// Loads version `version` of `T`.
    pub fn load_version<T: Artifact>(
        &self,
        version: u32,
    ) -> Result<(T, ArtifactMeta), RegistryError> {
        self.load(Selector::Version(version))
    }

    /// Loads the version to serve: the promoted one, else the latest.
    pub fn load_serving<T: Artifact>(&self) -> Result<(T, ArtifactMeta), RegistryError> {
        self.load(Selector::Serving)
    }

    /// The promoted pointer of `kind`, if a version was promoted.
    pub fn promotion(&self, kind: &str) -> Result<Option<Promotion>, RegistryError> {
        valid_kind(kind)?;
        let path = self.kind_dir(kind).join(PROMOTED_FILE);
        match fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| RegistryError::BadMetadata {
                        path,
                        reason: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    fn write_promotion(&self, kind: &str, p: &Promotion) -> Result<(), RegistryError> {
        let path = self.kind_dir(kind).join(PROMOTED_FILE);
        let json =
            serde_json::to_vec_pretty(p).map_err(|e| RegistryError::Serialize(e.to_string()))?;
        write_atomic(&path, &json)
    }

    /// Makes `version` the one to serve, after checking its integrity (the feature schema
    /// is checked when it is loaded). Returns the pointer as written.
    pub fn promote(&self, kind: &str, version: u32) -> Result<Promotion, RegistryError> {
        self.verify(kind, version)?;
        let p = match self.promotion(kind)? {
            Some(p) if p.version == version => p,
            Some(mut p) => {
                p.history.push(p.version);
                p.version = version;
                p
            }
            None => Promotion {
                version,
                history: Vec::new(),
            },
        };
        self.write_promotion(kind, &p)?;
        Ok(p)
    }

    /// Serves the version promoted before the current one again (after checking its
    /// integrity). Returns the pointer as written.
    pub fn rollback(&self, kind: &str) -> Result<Promotion, RegistryError> {
        let dir = self.kind_dir(kind);
        let Some(mut p) = self.promotion(kind)? else {
            return Err(RegistryError::NotPromoted {
                kind: kind.to_string(),
                dir,
            });
        };
        let Some(&previous) = p.history.last() else {
            return Err(RegistryError::NothingToRollBack {
                kind: kind.to_string(),
                current: p.version,
                dir,
            });
        };
        self.verify(kind, previous)?;
        p.history.pop();
        p.version = previous;
        self.write_promotion(kind, &p)?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse() {
        assert_eq!("latest".parse(), Ok(Selector::Latest));
        assert_eq!("v3".parse(), Ok(Selector::Version(3)));
        assert_eq!("12".parse(), Ok(Selector::Version(12)));
        assert!("v0".parse::<Selector>().is_err());
        assert!("vx".parse::<Selector>().is_err());
        assert_eq!(parse_version_dir("v10"), Some(10));
        assert_eq!(parse_version_dir("v01"), None);
        assert_eq!(parse_version_dir(".tmp-1"), None);
    }
}
