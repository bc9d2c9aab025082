//! The background compaction of the event store: every `compaction_interval_secs`, the
//! events before the first event of the oldest job still held in memory
//! ([`crate::serve::state::online::Online::compactable_upto`]) move to the archive
//! ([`crate::serve::state::store::compaction`]). Off when there is no retention window or the interval
//! is 0.

use std::time::Duration;

use crate::serve::AppState;

/// Starts the compaction task (nothing when it is off); it stops with the service.
pub fn spawn(state: AppState) {
    let every = state.config.compaction_interval_secs;
    if every <= 0.0 || state.config.retention_secs().is_none() {
        tracing::info!(
            "store compaction is off (no retention window, or compaction_interval_secs = 0)"
        );
        return;
    }
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(every)) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let st = state.clone();
            let done = tokio::task::spawn_blocking(move || compact_now(&st)).await;
            if let Ok(Err(e)) = done {
                tracing::error!(error = %e, "store compaction failed; the events stay in the database");
            }
        }
    });
}

/// Compacts the store up to what the online state no longer needs (blocking).
pub fn compact_now(
    state: &AppState,
) -> Result<
    crate::serve::state::store::compaction::CompactionReport,
    crate::serve::state::store::StoreError,
> {
    let upto = state.online().compactable_upto();
    state.store.compact(upto)
}
