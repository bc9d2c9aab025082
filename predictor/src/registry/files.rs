//! Crash-safe file writing for the registry: synced writes, atomic replacement, folder
//! syncs; and the checks of kind names and version folder names.

use std::fs;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::RegistryError;

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RegistryError + '_ {
    move |source| RegistryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `bytes` to a new file and flushes it to disk.
pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let mut f = fs::File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

/// Flushes a folder's entries (new names, renames) to disk; best effort where unsupported.
pub(super) fn sync_dir(path: &Path) {
    if let Ok(d) = fs::File::open(path) {
        let _ = d.sync_all();
    }
}

pub(super) fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, then a rename.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", unique_suffix()));
    write_synced(&tmp, bytes)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(path)(e));
    }
    sync_dir(dir);
    Ok(())
}

pub(super) fn valid_kind(kind: &str) -> Result<(), RegistryError> {
    if !kind.is_empty()
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Ok(())
    } else {
        Err(RegistryError::InvalidKind(kind.to_string()))
    }
}

/// `v12` → 12.
pub(super) fn parse_version_dir(name: &str) -> Option<u32> {
    let digits = name.strip_prefix('v')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}
