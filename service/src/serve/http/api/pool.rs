//! The prediction pool: prediction batches run on the blocking thread pool, at most
//! `prediction_workers` at once, so the async workers that answer health, readiness and
//! ingest never wait on prediction work. A batch that cannot start within
//! [`QUEUE_WAIT`] is refused with 503 and `Retry-After` instead of queueing without bound.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::serve::http::error::ApiError;

/// How long a batch waits for a free worker before it is refused.
pub const QUEUE_WAIT: Duration = Duration::from_secs(2);

/// Bounded off-async execution of prediction batches.
#[derive(Debug)]
pub struct PredictionPool {
    permits: Arc<Semaphore>,
    workers: usize,
}

impl PredictionPool {
    /// A pool running at most `workers` (at least 1) batches at once.
    pub fn new(workers: usize) -> PredictionPool {
        let workers = workers.max(1);
        PredictionPool {
            permits: Arc::new(Semaphore::new(workers)),
            workers,
        }
    }

    /// Batches that may run at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Runs `work` on a blocking thread once a worker is free (503 `overloaded` when none
    /// frees up within [`QUEUE_WAIT`]). The worker stays taken until `work` returns, even
    /// when the client has gone away meanwhile.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = tokio::time::timeout(QUEUE_WAIT, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| ApiError::overloaded(self.workers))?
            .map_err(|e| ApiError::internal("the prediction pool is closed", e))?;
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            span.in_scope(work)
        })
        .await
        .map_err(|e| ApiError::internal("a prediction batch failed", e))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_pool_refuses_with_overloaded_after_the_queue_wait() {
        let pool = Arc::new(PredictionPool::new(1));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let busy = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run(move || {
                    let _ = rx.recv();
                    Ok(1)
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let refused = pool.run(|| Ok(2)).await.unwrap_err();
        assert_eq!(refused.code, "overloaded");
        assert_eq!(refused.status, axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(started.elapsed() >= QUEUE_WAIT);
        tx.send(()).unwrap();
        assert_eq!(busy.await.unwrap().unwrap(), 1);
        assert_eq!(pool.run(|| Ok(3)).await.unwrap(), 3);
    }
}
