//! `--backend none`: no cluster; a prediction service fed only by its API. Nothing is
//! started, nothing is acted on, and `/readyz` has no backend check.

use super::controller::Live;
use super::health::BackendHealth;
use super::ServeBackend;
use crate::serve::config::Backend;
use crate::serve::AppState;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub struct NoneBackend;

impl ServeBackend for NoneBackend {
    fn kind(&self) -> Backend {
        Backend::None
    }

    fn cluster(&self) -> String {
        String::new()
    }

    fn start(&self, state: AppState) {
        state
            .ext
            .live
            .set_status("none: no cluster (--backend none), predictions only");
    }

    fn health(&self, _controller: &Live) -> Option<BackendHealth> {
        None
    }
}
