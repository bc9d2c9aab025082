//! Load benchmark of `augur serve` over HTTP on loopback: throughput, latency at a fixed
//! rate and memory under a soak.
//!
//! Starts the real (release) binary on a free port with a fresh data folder, waits until the
//! runtime model is trained and served, then with its own small load generator (HTTP/1.1
//! keep-alive over tokio TCP, one connection per in-flight request):
//!
//! 1. **throughput**, closed loop: `--connections` connections send back to back for
//!    `--seconds` against `GET /v1/ping` (a trivial handler on the same server, same
//!    middleware) and against `POST /v1/predict/runtime` (one job), interleaved twice;
//! 2. **latency at a fixed rate**, open loop: `--rate` requests/s of `POST
//!    /v1/predict/runtime` for `--seconds` over a pool of `--pool` keep-alive connections; a
//!    request's latency is measured from the moment the schedule says it should have been
//!    sent (no coordinated omission), so a server that falls behind shows it in the tail;
//! 3. with `--soak SECONDS`: the same open-loop prediction load (at `--soak-rate`) for that
//!    long, sampling the server's RSS (`/proc/PID/status`) every `--sample` seconds.
//!
//! ```text
//! cargo bench -p augur --bench http_load -- [--rate 5000] [--seconds 10] [--connections 32]
//!     [--pool 64] [--soak 600] [--soak-rate 1000] [--sample 30] [--json]
//! ```
//!
//! The load generator runs on the same machine as the server (2 cores shared).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    rate: u64,
    seconds: f64,
    connections: usize,
    soak: Option<f64>,
    soak_rate: u64,
    sample: f64,
    pool: usize,
    json: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        rate: 5000,
        seconds: 10.0,
        connections: 32,
        soak: None,
        soak_rate: 1000,
        sample: 30.0,
        pool: 64,
        json: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        let num = |name: &str| -> f64 {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} needs a number, got `{v}`"))
        };
        match argv[i].as_str() {
            "--rate" => a.rate = num("--rate") as u64,
            "--seconds" => a.seconds = num("--seconds"),
            "--connections" => a.connections = num("--connections") as usize,
            "--soak" => a.soak = Some(num("--soak")),
            "--soak-rate" => a.soak_rate = num("--soak-rate") as u64,
            "--sample" => a.sample = num("--sample"),
            "--pool" => a.pool = num("--pool") as usize,
            "--json" => {
                a.json = true;
                i += 1;
                continue;
            }
            // cargo bench passes --bench
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

/// The service under load; killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    _data: tempdir::Dir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temp folder removed on drop (no extra dependency).
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn blocking_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, out))
}

fn start_server() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let dir = std::env::temp_dir().join(format!("augur-http-load-{port}"));
    let _ = std::fs::remove_dir_all(&dir);
    let child = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args([
            "serve",
            "--insecure",
            "--addr",
            &addr.to_string(),
            "--data-dir",
        ])
        .arg(&dir)
        .env("AUGUR_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start augur serve");
    let server = Server {
        child,
        addr,
        _data: tempdir::Dir(dir),
    };
    let t = Instant::now();
    // first start trains the models on the bundled philly trace
    while blocking_get(addr, "/readyz").is_none_or(|(s, _)| s != 200) {
        assert!(
            t.elapsed() < Duration::from_secs(900),
            "the service did not become ready"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "augur serve ready on {addr} after {:.0} s",
        t.elapsed().as_secs_f64()
    );
    server
}

/// A request, pre-rendered.
#[derive(Clone)]
struct Req(Arc<Vec<u8>>);

impl Req {
    fn get(path: &str) -> Req {
        Req(Arc::new(
            format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").into_bytes(),
        ))
    }
    fn post(path: &str, body: &str) -> Req {
        Req(Arc::new(
            format!(
                "POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        ))
    }
}

/// One keep-alive connection.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    addr: SocketAddr,
}

impl Conn {
    async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(Conn {
            s,
            buf: Vec::with_capacity(4096),
            addr,
        })
    }

    /// Sends a request and reads the whole response; returns the status.
    async fn call(&mut self, req: &Req) -> std::io::Result<u16> {
        self.s.write_all(&req.0).await?;
        self.buf.clear();
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..end]).unwrap_or("");
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while self.buf.len() < end + 4 + len {
                    let mut tmp = [0u8; 4096];
                    let n = self.s.read(&mut tmp).await?;
                    if n == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    self.buf.extend_from_slice(&tmp[..n]);
                }
                return Ok(status);
            }
            let mut tmp = [0u8; 4096];
            let n = self.s.read(&mut tmp).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    async fn reopen(&mut self) -> std::io::Result<()> {
        *self = Conn::open(self.addr).await?;
        Ok(())
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

#[derive(Default)]
struct Tally {
    ok: u64,
    errors: u64,
    /// Latencies, microseconds.
    lat_us: Vec<u64>,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.ok += o.ok;
        self.errors += o.errors;
        self.lat_us.extend(o.lat_us);
    }
    fn sorted(mut self) -> Tally {
        self.lat_us.sort_unstable();
        self
    }
    /// Percentile in ms (call on a [`Tally::sorted`] one).
    fn pct(&self, p: f64) -> f64 {
        if self.lat_us.is_empty() {
            return f64::NAN;
        }
        let k = ((p / 100.0) * (self.lat_us.len() - 1) as f64).round() as usize;
        self.lat_us[k.min(self.lat_us.len() - 1)] as f64 / 1000.0
    }
}

/// Closed loop: `conns` connections back to back for `secs`; returns (req/s, tally).
async fn closed_loop(addr: SocketAddr, req: Req, conns: usize, secs: f64) -> (f64, Tally) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    for _ in 0..conns {
        let (req, stop) = (req.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut t = Tally::default();
            let Ok(mut c) = Conn::open(addr).await else {
                t.errors += 1;
                return t;
            };
            while !stop.load(Ordering::Relaxed) {
                let s = Instant::now();
                match c.call(&req).await {
                    Ok(200) => {
                        t.ok += 1;
                        t.lat_us.push(s.elapsed().as_micros() as u64);
                    }
                    Ok(_) => t.errors += 1,
                    Err(_) => {
                        t.errors += 1;
                        if c.reopen().await.is_err() {
                            break;
                        }
                    }
                }
            }
            t
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Tally::default();
    for t in tasks {
        if let Ok(t) = t.await {
            all.merge(t);
        }
    }
    let el = t0.elapsed().as_secs_f64();
    (all.ok as f64 / el, all)
}

/// Open loop at `rate` req/s for `secs`: request k is due at t0 + k/rate. A scheduler thread
/// (`std::thread::sleep`, ~0.1 ms precision; tokio's timer wheel has 1 ms ticks) queues each
/// request at its due time; a pool of `pool` keep-alive connections sends them; latency counts
/// from the due time, so time spent queued behind a slow server counts too (no coordinated
/// omission). `on_tick` is called about every second with the elapsed seconds.
async fn open_loop(
    addr: SocketAddr,
    req: Req,
    rate: u64,
    secs: f64,
    pool: usize,
    mut on_tick: impl FnMut(f64),
) -> Tally {
    let total = (rate as f64 * secs) as u64;
    let (tx, rx) = async_channel();
    let mut workers = Vec::new();
    for _ in 0..pool {
        let (rx, req) = (rx.clone(), req.clone());
        workers.push(tokio::spawn(async move {
            let mut t = Tally::default();
            let Ok(mut c) = Conn::open(addr).await else {
                t.errors += 1;
                return t;
            };
            while let Some(due) = rx.recv().await {
                match c.call(&req).await {
                    Ok(200) => {
                        t.ok += 1;
                        t.lat_us.push(due.elapsed().as_micros() as u64);
                    }
                    Ok(_) => t.errors += 1,
                    Err(_) => {
                        t.errors += 1;
                        let _ = c.reopen().await;
                    }
                }
            }
            t
        }));
    }
    // let the pool connect
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let scheduler = std::thread::spawn(move || {
        for k in 0..total {
            let due = t0 + Duration::from_secs_f64(k as f64 / rate as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            tx.send(due);
        }
        tx.close();
    });
    let mut next_tick = 1.0;
    while !scheduler.is_finished() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let el = t0.elapsed().as_secs_f64();
        if el >= next_tick {
            next_tick += 1.0;
            on_tick(el);
        }
    }
    let _ = scheduler.join();
    let mut all = Tally::default();
    for w in workers {
        if let Ok(t) = w.await {
            all.merge(t);
        }
    }
    all
}

/// A tiny multi-consumer queue of due times (tokio has mpsc only).
fn async_channel() -> (Sender, Receiver) {
    let inner = Arc::new(Chan {
        q: std::sync::Mutex::new((std::collections::VecDeque::new(), false)),
        notify: tokio::sync::Notify::new(),
    });
    (Sender(inner.clone()), Receiver(inner))
}

struct Chan {
    q: std::sync::Mutex<(std::collections::VecDeque<Instant>, bool)>,
    notify: tokio::sync::Notify,
}
struct Sender(Arc<Chan>);
#[derive(Clone)]
struct Receiver(Arc<Chan>);

impl Sender {
    fn send(&self, due: Instant) {
        if let Ok(mut q) = self.0.q.lock() {
            q.0.push_back(due);
        }
        self.0.notify.notify_one();
    }
    fn close(&self) {
        if let Ok(mut q) = self.0.q.lock() {
            q.1 = true;
        }
        self.0.notify.notify_waiters();
    }
}

impl Receiver {
    async fn recv(&self) -> Option<Instant> {
        loop {
            let notified = self.0.notify.notified();
            {
                let mut q = self.0.q.lock().ok()?;
                if let Some(d) = q.0.pop_front() {
                    return Some(d);
                }
                if q.1 {
                    return None;
                }
            }
            notified.await;
        }
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let args = parse_args();
    let server = start_server();
    let addr = server.addr;
    let pid = server.child.id();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ping = Req::get("/v1/ping");
    let predict = Req::post(
        "/v1/predict/runtime",
        r#"{"job":{"job_id":"bench-1","profile":{"num_gpus":4,"num_nodes":1,"user":"6214e9","group":"vc-a","gpu_type":"1080ti"}}}"#,
    );
    rt.block_on(async {
        // warm-up
        let _ = closed_loop(addr, predict.clone(), 4, 1.0).await;
        let mut ping_rps = Vec::new();
        let mut pred_rps = Vec::new();
        let mut ping_t = Tally::default();
        let mut pred_t = Tally::default();
        for _ in 0..2 {
            let (r, t) = closed_loop(addr, ping.clone(), args.connections, args.seconds).await;
            ping_rps.push(r);
            ping_t.merge(t);
            let (r, t) = closed_loop(addr, predict.clone(), args.connections, args.seconds).await;
            pred_rps.push(r);
            pred_t.merge(t);
        }
        let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (ping_r, pred_r) = (avg(&ping_rps), avg(&pred_rps));
        let fixed = open_loop(addr, predict.clone(), args.rate, args.seconds, args.pool, |_| {})
            .await
            .sorted();
        let sent = (args.rate as f64 * args.seconds) as u64;
        let summary = serde_json::json!({
            "closed_loop": {
                "connections": args.connections,
                "seconds_each": args.seconds,
                "ping_rps": ping_r,
                "predict_rps": pred_r,
                "predict_over_ping": pred_r / ping_r,
                "ping_errors": ping_t.errors,
                "predict_errors": pred_t.errors,
            },
            "fixed_rate": {
                "rate": args.rate,
                "seconds": args.seconds,
                "sent": sent,
                "ok": fixed.ok,
                "errors": fixed.errors,
                "p50_ms": fixed.pct(50.0),
                "p90_ms": fixed.pct(90.0),
                "p99_ms": fixed.pct(99.0),
                "p999_ms": fixed.pct(99.9),
                "max_ms": fixed.pct(100.0),
            },
        });
        if args.json {
            println!("{summary}");
        } else {
            println!(
                "closed loop, {} connections, {:.0} s × 2 each:\n  GET /v1/ping            {:>8.0} req/s  ({} errors)\n  POST /v1/predict/runtime {:>7.0} req/s  ({} errors)  = {:.0}% of ping",
                args.connections, args.seconds, ping_r, ping_t.errors, pred_r, pred_t.errors, 100.0 * pred_r / ping_r
            );
            println!(
                "open loop, POST /v1/predict/runtime at {} req/s for {:.0} s: {} ok, {} errors; latency p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
                args.rate, args.seconds, fixed.ok, fixed.errors,
                fixed.pct(50.0), fixed.pct(90.0), fixed.pct(99.0), fixed.pct(99.9), fixed.pct(100.0)
            );
        }
        if let Some(soak) = args.soak {
            println!("soak: {} req/s of predictions for {:.0} s; server RSS (MiB):", args.soak_rate, soak);
            let start = rss_kib(pid).unwrap_or(0);
            println!("  t=0 s: {:.1}", start as f64 / 1024.0);
            let mut next = args.sample;
            let mut samples = vec![(0.0, start)];
            let t = open_loop(addr, predict.clone(), args.soak_rate, soak, args.pool, |el| {
                if el >= next {
                    next += args.sample;
                    let r = rss_kib(pid).unwrap_or(0);
                    samples.push((el, r));
                    println!("  t={el:.0} s: {:.1}", r as f64 / 1024.0);
                }
            })
            .await
            .sorted();
            let end = rss_kib(pid).unwrap_or(0);
            samples.push((soak, end));
            println!(
                "  end: {:.1} MiB; {} ok, {} errors; p99 {:.3} ms",
                end as f64 / 1024.0,
                t.ok,
                t.errors,
                t.pct(99.0)
            );
            if args.json {
                println!("{}", serde_json::json!({ "soak_rss_kib": samples }));
            }
        }
    });
}
