//! Keeps the allocator's memory close to what the service holds. Ingest parses request
//! bodies and builds answers on every runtime, blocking and rayon thread; glibc gives each
//! thread that contends for a lock an arena of its own (up to 8 per core), keeps what was
//! freed in them, and the long-lived state ends up spread thinly over all of them, so the
//! process's resident memory stays near its busiest moment long after (docs/service.md
//! measures it). Two things counter it: the arenas are capped at two per core
//! ([`limit_arenas`], before any thread starts), and a periodic `malloc_trim(0)` returns
//! the arenas' free pages ([`spawn`]). Nothing to do on other allocators.

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

/// Caps glibc's malloc arenas at two per core (at least four), unless `MALLOC_ARENA_MAX`
/// sets them: one per core made ingest wait on the arenas' locks (docs/service.md). Call
/// before the runtime starts its threads: arenas already made stay.
#[allow(unsafe_code)]
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let arenas = libc::c_int::try_from(cores * 2).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a glibc tunable; it takes the allocator's locks itself.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
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
