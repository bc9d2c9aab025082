//! The backend's clock ([`Clock`]): wall time on a cluster, injectable for replays and tests.

use std::sync::Arc;

/// Seconds since the Unix epoch, as the backend sees them (injectable for replays).
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    })
}
