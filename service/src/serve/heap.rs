//! Gives the allocator's free memory back to the system. Ingest parses request bodies and
//! builds answers on every runtime thread; glibc keeps what they freed in per-thread arenas,
//! so the process's resident memory stays at its busiest moment long after the state it
//! holds has shrunk (docs/service.md measures it). A periodic `malloc_trim(0)` returns the
//! arenas' free pages. Nothing to do on other allocators.

use std::time::Duration;

use super::AppState;

/// How often the free memory is returned.
const EVERY: Duration = Duration::from_secs(30);

/// Starts the task; it stops with the service.
pub fn spawn(state: AppState) {
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(EVERY) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    });
}

/// Returns the allocator's free pages to the system (glibc; a no-op elsewhere).
#[allow(unsafe_code)]
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas; it takes their locks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}
