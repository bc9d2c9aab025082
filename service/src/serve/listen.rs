//! Accepting and serving HTTP connections with limits a plain `axum::serve` lacks: a
//! header-read timeout (which also closes connections idle between requests), a cap on
//! open connections (at the cap the longest-idle connection is closed, and the next one is
//! accepted only once it has gone: accepting takes a file descriptor, so a burst of clients
//! never holds more than the cap; when none is idle, new clients wait in the listen backlog
//! until one closes), accept errors such as running out of file descriptors survived, and a
//! graceful shutdown that gives the requests in flight a deadline, not forever.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tower::ServiceExt;

use super::lock;

/// The limits on client connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time to send a request's header, from when the connection waits for one.
    pub header_read_timeout: Duration,
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
    /// connection not asked yet to close. False when at the cap and none is idle. The room
    /// is there once that connection has closed ([`Connections::closed`]).
    fn make_room(&self, max: usize) -> bool {
        let open = lock(&self.open);
        if open.len() < max {
            return true;
        }
        let idlest = open
            .values()
            .filter(|c| {
                c.in_flight.load(Ordering::SeqCst) == 0 && !c.evicting.load(Ordering::SeqCst)
            })
            .min_by_key(|c| c.last_active_ms.load(Ordering::SeqCst));
        match idlest {
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
        let tracked = Arc::new(Tracked {
            in_flight: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(now_ms),
            evict: Notify::new(),
            evicting: AtomicBool::new(false),
        });
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
            conns.make_room(limits.max_connections);
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
        let mut stop = stop_rx.clone();
        tasks.spawn(async move {
            let service = {
                let tracked = tracked.clone();
                tower::service_fn(move |req: axum::extract::Request<hyper::body::Incoming>| {
                    tracked.in_flight.fetch_add(1, Ordering::SeqCst);
                    tracked.last_active_ms.store(now_ms(), Ordering::SeqCst);
                    let tracked = tracked.clone();
                    let answer = app.clone().oneshot(req.map(axum::body::Body::new));
                    async move {
                        let resp = answer.await;
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
                        if tracked.in_flight.load(Ordering::SeqCst) == 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_connection_is_evicted_never_a_busy_one() {
        let conns = Connections::default();
        let (_, busy) = conns.add(0);
        busy.in_flight.store(1, Ordering::SeqCst);
        assert!(conns.make_room(2));
        let (_, idle_old) = conns.add(5);
        let (_, idle_new) = conns.add(9);
        // the cap is reached: the idle connection active longest ago goes
        assert!(conns.make_room(3));
        let notified = |t: &Tracked| {
            let f = t.evict.notified();
            tokio::pin!(f);
            f.as_mut().enable()
        };
        assert!(notified(&idle_old));
        assert!(!notified(&idle_new));
        assert!(!notified(&busy));
        // asked again before it has gone: the next idlest is asked, never one twice
        assert!(conns.make_room(3));
        assert!(notified(&idle_new));
        assert!(!conns.make_room(3), "the rest is busy");
        // only busy connections: no room
        let only_busy = Connections::default();
        let (_, b) = only_busy.add(0);
        b.in_flight.store(1, Ordering::SeqCst);
        assert!(!only_busy.make_room(1));
    }
}
