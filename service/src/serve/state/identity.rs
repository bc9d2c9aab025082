//! Whose data a data folder holds: the backend and the cluster it was created for
//! (`<data_dir>/identity.json`, written on first start). A folder belongs to one backend and
//! one cluster for its whole life, so simulated events never land in a real cluster's store,
//! nor one cluster's history in another's: a start with another backend or cluster is refused
//! with both named, before anything is written.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name of the identity inside the data folder.
pub const IDENTITY_FILE: &str = "identity.json";

/// What a data folder belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataIdentity {
    /// `none`, `sim`, `kubernetes` or `slurm`.
    pub backend: String,
    /// Which cluster: the simulated trace (`sim:philly`), the API server and namespace
    /// (`https://10.0.0.1:6443 ns=ml`), the Slurm cluster name; empty for `none`.
    pub cluster: String,
    /// When the folder was first used (Unix seconds).
    pub created_at: f64,
}

/// Why a data folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("data folder {dir} belongs to backend `{found_backend}` (cluster `{found_cluster}`), not to backend `{want_backend}` (cluster `{want_cluster}`): real and simulated data, or two clusters' data, never share a folder; use another --data-dir")]
    Mismatch {
        dir: PathBuf,
        found_backend: String,
        found_cluster: String,
        want_backend: String,
        want_cluster: String,
    },
    #[error("data folder {dir} holds events but no {IDENTITY_FILE}: it was written by an older Augur, so which backend its events came from is unknown; if you know, write {dir}/{IDENTITY_FILE} as {{\"backend\": \"sim\", \"cluster\": \"sim:philly\", \"created_at\": 0}} (the backend and cluster of this start are named in the log), else start on a new --data-dir")]
    Unclaimed { dir: PathBuf },
    #[error("{path} is empty (cut short by a crash when the folder was first used?), and the folder holds events, so which backend and cluster they came from is unknown: `augur store repair --data-dir {dir}` restores it from the snapshot of the online state when there is one; else write it as {{\"backend\": \"sim\", \"cluster\": \"sim:philly\", \"created_at\": 0}} with this folder's backend and cluster")]
    Empty { path: PathBuf, dir: PathBuf },
    #[error("{path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl DataIdentity {
    /// An identity for `backend` and `cluster`, created now.
    pub fn new(backend: &str, cluster: &str) -> DataIdentity {
        DataIdentity {
            backend: backend.to_string(),
            cluster: cluster.to_string(),
            created_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    /// Claims `dir` for this identity: writes it when the folder has none (and holds no
    /// event store yet), accepts it when it matches, refuses it otherwise.
    pub fn claim(&self, dir: &Path) -> Result<DataIdentity, IdentityError> {
        let path = dir.join(IDENTITY_FILE);
        let io = |source| IdentityError::Io {
            path: path.clone(),
            source,
        };
        match read(dir)? {
            Some(found) => {
                if found.backend != self.backend || found.cluster != self.cluster {
                    return Err(IdentityError::Mismatch {
                        dir: dir.to_path_buf(),
                        found_backend: found.backend,
                        found_cluster: found.cluster,
                        want_backend: self.backend.clone(),
                        want_cluster: self.cluster.clone(),
                    });
                }
                Ok(found)
            }
            None => {
                if dir.join("events.sqlite").exists() {
                    return Err(IdentityError::Unclaimed {
                        dir: dir.to_path_buf(),
                    });
                }
                std::fs::create_dir_all(dir).map_err(io)?;
                self.write(dir)?;
                Ok(self.clone())
            }
        }
    }

    /// Writes this identity into `dir`, whole or not at all (temp file synced, renamed,
    /// the folder synced): a crash leaves no empty file.
    pub fn write(&self, dir: &Path) -> Result<(), IdentityError> {
        use std::io::Write;
        let path = dir.join(IDENTITY_FILE);
        let io = |source| IdentityError::Io {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| IdentityError::Unreadable {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// The identity of `dir`: none when it has none yet, or an empty one in a folder that holds
/// no events (a first start cut short: claimed afresh); an empty one beside events is
/// [`IdentityError::Empty`].
pub fn read(dir: &Path) -> Result<Option<DataIdentity>, IdentityError> {
    let path = dir.join(IDENTITY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => {
            if dir.join("events.sqlite").exists() {
                Err(IdentityError::Empty {
                    path,
                    dir: dir.to_path_buf(),
                })
            } else {
                Ok(None)
            }
        }
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| IdentityError::Unreadable {
                path: path.clone(),
                reason: format!("{e} (not an identity: see `augur store check`)"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IdentityError::Io { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_belongs_to_one_backend_and_one_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let sim = DataIdentity::new("sim", "sim:philly");
        let first = sim.claim(dir.path()).unwrap();
        // the same again: accepted, the original creation time kept
        let again = DataIdentity::new("sim", "sim:philly")
            .claim(dir.path())
            .unwrap();
        assert_eq!(again.created_at, first.created_at);
        let err = DataIdentity::new("none", "")
            .claim(dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("backend `sim`") && err.contains("not to backend `none`"),
            "{err}"
        );
        let err = DataIdentity::new("sim", "sim:itp")
            .claim(dir.path())
            .unwrap_err();
        assert!(matches!(err, IdentityError::Mismatch { .. }));
    }

    #[test]
    fn an_old_folder_with_events_but_no_identity_is_not_claimed_silently() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("events.sqlite"), b"").unwrap();
        let err = DataIdentity::new("none", "").claim(dir.path()).unwrap_err();
        assert!(matches!(err, IdentityError::Unclaimed { .. }), "{err}");
        assert!(!dir.path().join(IDENTITY_FILE).exists());
    }

    #[test]
    fn an_empty_identity_is_claimed_afresh_without_events_and_named_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IDENTITY_FILE), "").unwrap();
        let sim = DataIdentity::new("sim", "sim:philly");
        assert_eq!(sim.claim(dir.path()).unwrap().backend, "sim");
        assert_eq!(read(dir.path()).unwrap().unwrap().cluster, "sim:philly");
        std::fs::write(dir.path().join(IDENTITY_FILE), "\n").unwrap();
        std::fs::write(dir.path().join("events.sqlite"), "").unwrap();
        let err = sim.claim(dir.path()).unwrap_err();
        assert!(matches!(err, IdentityError::Empty { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("is empty") && text.contains("augur store repair"),
            "{text}"
        );
        assert!(!text.contains("EOF"), "{text}");
    }
}
