//! The health of a cluster backend in one shape every backend reports ([`BackendHealth`]):
//! `/readyz` fails while a backend is down, `/metrics` has `augur_backend_up{backend}`, and
//! `GET /v1/cluster` shows it.

use serde::Serialize;
use utoipa::ToSchema;

/// Whether a backend is serving the controller, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct BackendHealth {
    /// `sim`, `kubernetes`, ...
    pub backend: &'static str,
    pub up: bool,
    /// The backend's state (`running`, `retrying in 4 s: …`, `failed: …`).
    pub detail: String,
}

impl BackendHealth {
    /// The health a backend's status line says: the simulator is up unless it failed
    /// (loading the trace is not an outage); any other backend only while `running`.
    pub fn from_status(backend: &'static str, status: &str) -> BackendHealth {
        let up = match backend {
            "sim" => !status.starts_with("failed"),
            _ => status == "running",
        };
        BackendHealth {
            backend,
            up,
            detail: status.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_is_up_only_in_a_serving_state() {
        assert!(BackendHealth::from_status("kubernetes", "running").up);
        assert!(!BackendHealth::from_status("kubernetes", "starting").up);
        assert!(!BackendHealth::from_status("kubernetes", "retrying in 4 s: refused").up);
        assert!(BackendHealth::from_status("sim", "loading").up);
        assert!(!BackendHealth::from_status("sim", "failed: no trace").up);
    }
}
