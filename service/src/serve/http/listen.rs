//! Accepting and serving HTTP connections with limits a plain `axum::serve` lacks: a
//! header-read timeout (which also closes connections idle between requests), a deadline for
//! a request's whole body (a client trickling bytes cannot hold a request open for longer), a
//! cap on open connections (at the cap the longest-idle connection is closed, else the slowest
//! upload that cannot finish its body by the deadline, and the next one is accepted only once
//! it has gone: accepting takes a file descriptor, so a burst of clients never holds more than
//! the cap; when none is idle or slow, new clients wait in the listen backlog until one
//! closes), accept errors such as running out of file descriptors survived, and a graceful
//! shutdown that gives the requests in flight a deadline, not forever.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::{Body as _, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tower::ServiceExt;

use crate::serve::lock;

/// The limits on client connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time to send a request's header, from when the connection waits for one.
    pub header_read_timeout: Duration,
    /// Time to send a request's whole body, from when its header has arrived.
    pub body_deadline: Duration,
    /// The largest request body taken (bytes).
    pub body_limit: u64,
    /// Most open connections.
    pub max_connections: usize,
    /// Time the requests in flight get after shutdown starts.
    pub shutdown_deadline: Duration,
}

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Connections still open at the deadline (closed without finishing).
    pub abandoned: usize,
}

/// One open connection: requests in flight and when it last did something.
#[derive(Debug)]
struct Tracked {
    in_flight: AtomicUsize,
    /// Milliseconds since the server started.
    last_active_ms: AtomicU64,
    /// Closes the connection at once (it is idle and a new one needs its place).
    evict: Notify,
    /// Asked to close and not busy since: not asked again.
    evicting: AtomicBool,
    /// The request body being received, if any.
    upload: Mutex<Option<Upload>>,
}

/// A request body on its way in.
#[derive(Debug, Clone, Copy)]
struct Upload {
    /// Milliseconds since the server started, when the header had arrived.
    started_ms: u64,
    /// Bytes received so far.
    received: u64,
    /// The length its header declares (`Content-Length`), if it does.
    declared: Option<u64>,
}

/// How long an upload runs before it may be judged slow.
const UPLOAD_GRACE_MS: u64 = 1000;

/// How long a connection must have been idle (since it was accepted or its last request
/// ended) before it may be closed to make room at the cap.
const IDLE_GRACE_MS: u64 = 1000;

impl Upload {
    /// Bytes per second so far.
    fn rate(&self, now_ms: u64) -> f64 {
        let secs = now_ms.saturating_sub(self.started_ms).max(1) as f64 / 1e3;
        self.received as f64 / secs
    }

    /// Whether, at its rate so far, the body cannot arrive whole within `deadline` of its
    /// start (a body of unknown length: whether it is slower than its share of the limit,
    /// `body_limit / deadline`). Never within [`UPLOAD_GRACE_MS`] of its start.
    fn is_slow(&self, now_ms: u64, deadline: Duration, body_limit: u64) -> bool {
        let elapsed_ms = now_ms.saturating_sub(self.started_ms);
        if elapsed_ms < UPLOAD_GRACE_MS {
            return false;
        }
        let deadline_s = deadline.as_secs_f64().max(1e-3);
        let size = self.declared.unwrap_or(body_limit);
        let needed = size.saturating_sub(self.received) as f64;
        let left_s = (deadline_s - elapsed_ms as f64 / 1e3).max(0.0);
        match self.declared {
            Some(_) => needed > self.rate(now_ms) * left_s,
            None => self.rate(now_ms) < size as f64 / deadline_s,
        }
    }
}

impl Tracked {
    fn new(now_ms: u64) -> Tracked {
        Tracked {
            in_flight: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(now_ms),
            evict: Notify::new(),
            evicting: AtomicBool::new(false),
            upload: Mutex::new(None),
        }
    }

    fn uploading(&self) -> bool {
        lock(&self.upload).is_some()
    }
}

/// The open connections.
#[derive(Debug, Default)]
struct Connections {
    open: Mutex<HashMap<u64, Arc<Tracked>>>,
    next_id: AtomicU64,
    /// Signalled when a connection has closed.
    closed: Notify,
}

impl Connections {
    /// Makes room for one more connection under `max`: at the cap, asks the longest-idle
    /// connection not asked yet to close (idle for at least [`IDLE_GRACE_MS`]: one accepted
    /// a moment ago whose request has not been read yet is not idle, or a flood of new
    /// connections would close each other, a health probe among them), else the one with the slowest upload that cannot
    /// finish its body in time ([`Upload::is_slow`]). False when at the cap and none is idle
    /// or slow. The room is there once that connection has closed
    /// ([`Connections::closed`]).
    fn make_room(&self, limits: &ConnectionLimits, now_ms: u64) -> bool {
        let open = lock(&self.open);
        if open.len() < limits.max_connections {
            return true;
        }
        let candidates = || open.values().filter(|c| !c.evicting.load(Ordering::SeqCst));
        let idlest = candidates()
            .filter(|c| c.in_flight.load(Ordering::SeqCst) == 0)
            .filter(|c| {
                now_ms.saturating_sub(c.last_active_ms.load(Ordering::SeqCst)) >= IDLE_GRACE_MS
            })
            .min_by_key(|c| c.last_active_ms.load(Ordering::SeqCst));
        let chosen = idlest.or_else(|| {
            candidates()
                .filter_map(|c| {
                    let up = (*lock(&c.upload))?;
                    up.is_slow(now_ms, limits.body_deadline, limits.body_limit)
                        .then(|| (up.rate(now_ms), c))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, c)| c)
        });
        match chosen {
            Some(c) => {
                c.evicting.store(true, Ordering::SeqCst);
                c.evict.notify_one();
                true
            }
            None => false,
        }
    }

    fn add(&self, now_ms: u64) -> (u64, Arc<Tracked>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let tracked = Arc::new(Tracked::new(now_ms));
        lock(&self.open).insert(id, tracked.clone());
        (id, tracked)
    }

    fn remove(&self, id: u64) {
        lock(&self.open).remove(&id);
        self.closed.notify_one();
    }

    fn count(&self) -> usize {
        lock(&self.open).len()
    }
}

/// A request body counted into its connection's [`Upload`] as it arrives, failing once
/// the whole-body deadline has passed.
struct DeadlineBody {
    inner: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    tracked: Arc<Tracked>,
}

/// The error of a body that did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body deadline")]
struct BodyDeadlinePassed;

impl DeadlineBody {
    fn new(
        inner: hyper::body::Incoming,
        deadline: Duration,
        tracked: Arc<Tracked>,
        now_ms: u64,
    ) -> Self {
        let declared = inner.size_hint().exact();
        if !inner.is_end_stream() {
            *lock(&tracked.upload) = Some(Upload {
                started_ms: now_ms,
                received: 0,
                declared,
            });
        }
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(deadline)),
            tracked,
        }
    }

    fn done(&self) {
        *lock(&self.tracked.upload) = None;
    }
}

impl hyper::body::Body for DeadlineBody {
    type Data = hyper::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Some(up) = lock(&this.tracked.upload).as_mut() {
                        up.received += data.len() as u64;
                    }
                }
                if this.inner.is_end_stream() {
                    this.done();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.done();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.done();
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.done();
                    Poll::Ready(Some(Err(BodyDeadlinePassed.into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `max_connections`, lowered to fit the open-file limit (raised to its hard limit first)
/// with room for the store, the registry and the listener.
// rlim_t differs between Unix systems
#[allow(unsafe_code, clippy::unnecessary_cast)]
pub fn fit_to_file_limit(max_connections: usize) -> usize {
    const RESERVED_FILES: u64 = 64;
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: lim.rlim_max,
                    rlim_max: lim.rlim_max,
                };
                // SAFETY: as above
                if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                    lim = raised;
                }
            }
            let room = (lim.rlim_cur as u64).saturating_sub(RESERVED_FILES).max(1);
            return max_connections.min(usize::try_from(room).unwrap_or(usize::MAX));
        }
    }
    max_connections
}

/// Serves `app` on `listener` under `limits` until `shutdown` completes, then lets the
/// connections finish their requests for up to `limits.shutdown_deadline`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> Stopped {
    let started = Instant::now();
    let now_ms = move || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let conns = Arc::new(Connections::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut last_accept_warning: Option<Instant> = None;
    tokio::pin!(shutdown);
    'accepting: loop {
        // at the cap, room is made before accepting (which takes a file descriptor): the
        // idlest connection is asked to close, and the loop waits until one has closed
        while conns.count() >= limits.max_connections {
            conns.make_room(&limits, now_ms());
            tokio::select! {
                () = &mut shutdown => break 'accepting,
                () = conns.closed.notified() => {}
                // a busy connection asked before may have gone idle since
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        // reap finished connection tasks so the set does not grow
        while tasks.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // out of file descriptors or the like: wait a little for some to close
                if last_accept_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(error = %e, open = conns.count(), "accepting a connection failed");
                    last_accept_warning = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let (id, tracked) = conns.add(now_ms());
        let conns = conns.clone();
        let app = app.clone();
        let stop = stop_rx.clone();
        tasks.spawn(async move {
            serve_connection(stream, app, limits, tracked, stop, started).await;
            conns.remove(id);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(limits.shutdown_deadline, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    let abandoned = if drained.is_ok() { 0 } else { tasks.len() };
    tasks.abort_all();
    Stopped { abandoned }
}

/// Serves one connection until it closes, is asked to make room at the cap, or the service
/// stops (then gracefully: the request in flight is finished). `started` is the clock the
/// connections' activity is timed by.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Router,
    limits: ConnectionLimits,
    tracked: Arc<Tracked>,
    mut stop: watch::Receiver<bool>,
    started: Instant,
) {
    let now_ms = move || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let service = {
        let tracked = tracked.clone();
        tower::service_fn(move |req: axum::extract::Request<hyper::body::Incoming>| {
            tracked.in_flight.fetch_add(1, Ordering::SeqCst);
            tracked.last_active_ms.store(now_ms(), Ordering::SeqCst);
            let body = |b| {
                let b = DeadlineBody::new(b, limits.body_deadline, tracked.clone(), now_ms());
                axum::body::Body::new(b)
            };
            let tracked = tracked.clone();
            let answer = app.clone().oneshot(req.map(body));
            async move {
                let resp = answer.await;
                // a body the handler left unread is not an upload any more
                *lock(&tracked.upload) = None;
                tracked.in_flight.fetch_sub(1, Ordering::SeqCst);
                tracked.last_active_ms.store(now_ms(), Ordering::SeqCst);
                resp
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
        .with_upgrades();
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            () = tracked.evict.notified() => {
                // idle, or asked while uploading too slowly to finish in time
                if tracked.in_flight.load(Ordering::SeqCst) == 0 || tracked.uploading() {
                    tracing::debug!(uploading = tracked.uploading(), "connection closed to make room at the cap");
                    break;
                }
                // busy again since it was asked: it may be asked again when idle
                tracked.evicting.store(false, Ordering::SeqCst);
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: usize) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            body_deadline: Duration::from_secs(30),
            body_limit: 4 << 20,
            max_connections,
            shutdown_deadline: Duration::from_secs(10),
        }
    }

    fn notified(t: &Tracked) -> bool {
        let f = t.evict.notified();
        tokio::pin!(f);
        f.as_mut().enable()
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_is_evicted_never_a_busy_one() {
        let conns = Connections::default();
        let (_, busy) = conns.add(0);
        busy.in_flight.store(1, Ordering::SeqCst);
        assert!(conns.make_room(&limits(2), 10));
        let (_, idle_old) = conns.add(5);
        let (_, idle_new) = conns.add(9);
        // the cap is reached, but both were accepted a moment ago (their requests may not
        // have been read yet): neither is idle enough to close
        assert!(!conns.make_room(&limits(3), 10));
        assert!(!notified(&idle_old) && !notified(&idle_new));
        // a second on, the idle connection active longest ago goes
        let now = 9 + IDLE_GRACE_MS;
        assert!(conns.make_room(&limits(3), now));
        assert!(notified(&idle_old));
        assert!(!notified(&idle_new));
        assert!(!notified(&busy));
        // asked again before it has gone: the next idlest is asked, never one twice
        assert!(conns.make_room(&limits(3), now));
        assert!(notified(&idle_new));
        assert!(!conns.make_room(&limits(3), now), "the rest is busy");
        // only busy connections: no room
        let only_busy = Connections::default();
        let (_, b) = only_busy.add(0);
        b.in_flight.store(1, Ordering::SeqCst);
        assert!(!only_busy.make_room(&limits(1), 10));
    }

    #[test]
    fn at_the_cap_with_none_idle_the_slowest_upload_that_cannot_finish_in_time_is_evicted() {
        let conns = Connections::default();
        let upload = |received, declared| {
            let (_, c) = conns.add(0);
            c.in_flight.store(1, Ordering::SeqCst);
            *lock(&c.upload) = Some(Upload {
                started_ms: 0,
                received,
                declared,
            });
            c
        };
        // 10 s into a 30 s deadline: 1 MB of 2 MB is on time, 10 bytes of 4 MB are not,
        // and 1,000 bytes of 4 MB neither (but faster)
        let on_time = upload(1_000_000, Some(2_000_000));
        let trickle = upload(10, Some(4_000_000));
        let slow = upload(1_000, Some(4_000_000));
        let handler = conns.add(0).1;
        handler.in_flight.store(1, Ordering::SeqCst);
        let l = limits(4);
        // within the grace no upload is judged
        assert!(!conns.make_room(&l, 500));
        assert!(conns.make_room(&l, 10_000));
        assert!(notified(&trickle));
        assert!(conns.make_room(&l, 10_000));
        assert!(notified(&slow));
        assert!(
            !conns.make_room(&l, 10_000),
            "the rest is on time or not uploading"
        );
        assert!(!notified(&on_time) && !notified(&handler));
        // a body of unknown length is slow below its share of the limit per second
        let unknown = Upload {
            started_ms: 0,
            received: 100_000,
            declared: None,
        };
        assert!(unknown.is_slow(10_000, l.body_deadline, l.body_limit));
        let fast = Upload {
            received: 2_000_000,
            ..unknown
        };
        assert!(!fast.is_slow(10_000, l.body_deadline, l.body_limit));
    }
}
