//! The join of a scoped thread that the trainers running fits side by side share: the
//! thread's result, or its panic carried on in the caller.

/// The result of a scoped thread, its panic carried on.
pub(crate) fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
