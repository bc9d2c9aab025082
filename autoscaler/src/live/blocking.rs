//! Driving the loop without an async runtime ([`block_on`]).

use std::future::Future;

/// Runs a future whose backend calls are ready at once (the simulator) to completion on the
/// current thread. For tests, examples and offline use; the service awaits `step` on tokio.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
