//! Long-history benchmark of `augur serve`: a year of a synthetic cluster (1M jobs, 3M
//! events) through the real HTTP ingest path of the real (release) binary.
//!
//! The jobs come from a labelled synthetic generator (this file, [`job`]): 500 users in 20
//! groups, 1–64 GPUs, submits spread evenly over 365 days of 2025, a queue wait exponential
//! in the GPUs asked, a log-normal run time whose median depends on the user and the GPUs, 8%
//! failed. Each job is three events (submit, start, finish), sent in time order per job over
//! `--conns` keep-alive connections (a job always on the same connection) as `POST
//! /v1/events/batch` of `--batch` events. The service runs `--backend none --insecure` with
//! its defaults (retention 30 days) except the background retrain (off, so ingest is measured
//! alone) and the compaction interval (`--compact-every`, default 15 s, so compaction runs
//! during ingest).
//!
//! Reported: resident memory (after ingest, peak), ingest rate, `POST /v1/predict/runtime`
//! latency before and after the history, retrain time and the server's peak memory during it,
//! restart time to `/healthz` and `/readyz` after a clean stop (the stop writes a snapshot of
//! the online state, the start loads it and replays the tail; the server's snapshot log
//! lines show its size and the time to write it), and `augur store check`.
//!
//! ```text
//! cargo bench -p augur --bench history -- [--jobs 1000000] [--conns 4] [--batch 2000]
//!     [--compact-every 15] [--trees N] [--keep]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    jobs: u64,
    conns: u64,
    batch: usize,
    compact_every: f64,
    trees: Option<u64>,
    /// Keep the data folder at the end (to look at it, or time a model swap on it).
    keep: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        jobs: 1_000_000,
        conns: 4,
        batch: 2000,
        compact_every: 15.0,
        trees: None,
        keep: false,
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
            "--jobs" => a.jobs = num("--jobs") as u64,
            "--conns" => a.conns = num("--conns") as u64,
            "--batch" => a.batch = num("--batch") as usize,
            "--compact-every" => a.compact_every = num("--compact-every"),
            "--trees" => a.trees = Some(num("--trees") as u64),
            "--keep" => {
                a.keep = true;
                i += 1;
                continue;
            }
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

/// splitmix64: a deterministic stream per job.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in (0, 1) from draw `k` of job `i`.
fn unit(i: u64, k: u64) -> f64 {
    ((mix(i.wrapping_mul(16).wrapping_add(k)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// 2025-01-01T00:00:00Z.
const T0: f64 = 1_735_689_600.0;
const YEAR: f64 = 365.0 * 86_400.0;

/// One synthetic job: (submit, start, finish) times, its submit body and finish status.
struct Job {
    id: String,
    submit: f64,
    start: f64,
    finish: f64,
    user: u64,
    gpus: u64,
    failed: bool,
}

/// Job `i` of `n` (the labelled generator described in the module docs).
fn job(i: u64, n: u64) -> Job {
    let user = (unit(i, 0) * unit(i, 0) * 500.0) as u64; // a few heavy users
    let gpus = 1u64 << ((unit(i, 1) * 7.0) as u32).min(6);
    let submit = T0 + YEAR * (i as f64 + unit(i, 2)) / n as f64;
    let wait = -(unit(i, 3).ln()) * 30.0 * gpus as f64;
    // median run time: 10 min × a per-user factor (0.5–8) × (1 + GPUs / 8)
    let user_factor = 0.5 * 16f64.powf(unit(user, 9));
    let median = 600.0 * user_factor * (1.0 + gpus as f64 / 8.0);
    // log-normal, sigma 1 (Box-Muller)
    let z = (-2.0 * unit(i, 4).ln()).sqrt() * (std::f64::consts::TAU * unit(i, 5)).cos();
    let run = (median * z.exp()).clamp(10.0, 14.0 * 86_400.0);
    Job {
        id: format!("syn-{i}"),
        submit,
        start: submit + wait,
        finish: submit + wait + run,
        user,
        gpus,
        failed: unit(i, 6) < 0.08,
    }
}

fn submit_body(j: &Job) -> String {
    format!(
        r#"{{"type":"job_submitted","job_id":"{}","at":{:.3},"profile":{{"num_gpus":{},"num_nodes":{},"user":"u{}","group":"g{}","gpu_type":"a100"}}}}"#,
        j.id,
        j.submit,
        j.gpus,
        j.gpus.div_ceil(8),
        j.user,
        j.user % 20
    )
}

/// The events of connection `c`'s jobs (`i % conns == c`), in time order, as JSON.
fn events_of(c: u64, conns: u64, n: u64) -> impl Iterator<Item = String> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut pending: BinaryHeap<Reverse<(u64, u64, u8)>> = BinaryHeap::new();
    let mut next = c;
    let mut out: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    std::iter::from_fn(move || loop {
        if let Some(e) = out.pop_front() {
            return Some(e);
        }
        let next_submit = (next < n).then(|| job(next, n).submit);
        let due = pending.peek().map(|Reverse((t, ..))| *t as f64 / 1000.0);
        match (next_submit, due) {
            (Some(s), d) if d.is_none_or(|d| s <= d) => {
                let j = job(next, n);
                out.push_back(submit_body(&j));
                pending.push(Reverse(((j.start * 1000.0) as u64, next, 1)));
                pending.push(Reverse(((j.finish * 1000.0) as u64, next, 2)));
                next += conns;
            }
            (_, Some(_)) => {
                let Reverse((_, i, kind)) = pending.pop()?;
                let j = job(i, n);
                out.push_back(if kind == 1 {
                    format!(
                        r#"{{"type":"job_started","job_id":"{}","at":{:.3}}}"#,
                        j.id, j.start
                    )
                } else {
                    format!(
                        r#"{{"type":"job_finished","job_id":"{}","at":{:.3},"status":"{}"}}"#,
                        j.id,
                        j.finish,
                        if j.failed { "failed" } else { "completed" }
                    )
                });
            }
            _ => return None,
        }
    })
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(600)))?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    fn call(&mut self, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        write!(
            self.w,
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut line = String::new();
        self.r.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut len = 0usize;
        loop {
            line.clear();
            self.r.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut buf = vec![0; len];
        self.r.read_exact(&mut buf)?;
        Ok((status, String::from_utf8_lossy(&buf).into_owned()))
    }
}

fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    Conn::open(addr).ok()?.call("GET", path, "").ok()
}

/// The server's resident and peak memory in MiB (`/proc/PID/status`).
fn rss_mib(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

fn start(dir: &std::path::Path, addr: SocketAddr, args: &Args) -> Server {
    let child = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["serve", "--insecure", "--backend", "none", "--addr"])
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(dir)
        .args(
            args.trees
                .map(|t| vec!["--trees".to_string(), t.to_string()])
                .unwrap_or_default(),
        )
        .env(
            "AUGUR_LOG",
            "warn,augur::serve::snapshot=info,augur::serve::retrain=info",
        )
        .env("AUGUR_SERVE_RETRAIN_EVERY_JOBS", "0")
        .env(
            "AUGUR_SERVE_COMPACTION_INTERVAL",
            args.compact_every.to_string(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start augur serve");
    Server { child, addr }
}

/// Seconds until `path` answers `status` (polled every 10 ms).
fn wait_for(addr: SocketAddr, path: &str, status: u16, limit: f64) -> f64 {
    let t = Instant::now();
    while get(addr, path).is_none_or(|(s, _)| s != status) {
        assert!(
            t.elapsed().as_secs_f64() < limit,
            "{path} never answered {status}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t.elapsed().as_secs_f64()
}

/// p50 and p99 of 2,000 sequential runtime predictions, in ms.
fn predict_latency(addr: SocketAddr) -> (f64, f64) {
    let mut c = Conn::open(addr).expect("connect");
    let mut ms = Vec::new();
    for i in 0..2000 {
        let body = format!(
            r#"{{"job":{{"job_id":"probe-{i}","profile":{{"num_gpus":8,"num_nodes":1,"user":"u7","group":"g7","gpu_type":"a100"}}}}}}"#
        );
        let t = Instant::now();
        let (st, _) = c
            .call("POST", "/v1/predict/runtime", &body)
            .expect("predict");
        assert_eq!(st, 200, "prediction failed");
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[ms.len() * 99 / 100])
}

/// Ingests every job; returns (events, seconds, peak RSS MiB seen).
fn ingest(addr: SocketAddr, pid: u32, args: &Args) -> (u64, f64, f64) {
    let sent = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let sampler = {
        let (sent, done) = (sent.clone(), done.clone());
        std::thread::spawn(move || {
            let mut peak = 0f64;
            let mut last = Instant::now();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(250));
                peak = peak.max(rss_mib(pid).0);
                if last.elapsed() > Duration::from_secs(10) {
                    last = Instant::now();
                    eprintln!(
                        "  {:>9} events in {:.0} s, RSS {:.0} MiB",
                        sent.load(Ordering::SeqCst),
                        t.elapsed().as_secs_f64(),
                        rss_mib(pid).0
                    );
                }
            }
            peak
        })
    };
    let workers: Vec<_> = (0..args.conns)
        .map(|c| {
            let (sent, conns, n, batch) = (sent.clone(), args.conns, args.jobs, args.batch);
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr).expect("connect");
                let mut events = events_of(c, conns, n).peekable();
                while events.peek().is_some() {
                    let chunk: Vec<String> = events.by_ref().take(batch).collect();
                    let body = format!(r#"{{"events":[{}]}}"#, chunk.join(","));
                    let (st, reply) = conn
                        .call("POST", "/v1/events/batch", &body)
                        .expect("ingest");
                    assert_eq!(st, 200, "ingest refused: {reply}");
                    sent.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("ingest worker");
    }
    let secs = t.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let peak = sampler.join().unwrap_or(0.0);
    (sent.load(Ordering::SeqCst), secs, peak)
}

/// Runs a retrain; returns (seconds, peak RSS MiB during it, the final status JSON).
fn retrain(addr: SocketAddr, pid: u32) -> (f64, f64, String) {
    let t = Instant::now();
    let (st, started) = Conn::open(addr)
        .and_then(|mut c| c.call("POST", "/v1/models/retrain", ""))
        .expect("retrain");
    assert_eq!(st, 202, "retrain refused: {started}");
    eprintln!("  retrain started: {started}");
    let mut peak = 0f64;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        peak = peak.max(rss_mib(pid).0);
        let (_, body) = get(addr, "/v1/models/retrain").unwrap_or_default();
        if body.contains(r#""state":"succeeded""#) || body.contains(r#""state":"failed""#) {
            return (t.elapsed().as_secs_f64(), peak, body);
        }
    }
}

fn stop(mut server: Server) {
    let pid = server.child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = server.child.wait();
}

fn main() {
    let args = parse_args();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let dir = std::env::temp_dir().join(format!("augur-history-bench-{port}"));
    let _ = std::fs::remove_dir_all(&dir);
    let server = start(&dir, addr, &args);
    let pid = server.child.id();
    let trained = wait_for(server.addr, "/readyz", 200, 1800.0);
    eprintln!("ready after {trained:.0} s (first-start training)");
    let (p50_before, p99_before) = predict_latency(addr);
    let (rss_empty, _) = rss_mib(pid);
    let (events, secs, peak_ingest) = ingest(addr, pid, &args);
    // one compaction interval more, so the tail of the ingest is compacted too, and one
    // period of the service's return of free memory to the system (30 s)
    std::thread::sleep(Duration::from_secs_f64(args.compact_every.max(30.0) + 5.0));
    let (rss_after, hwm_after) = rss_mib(pid);
    // and one period later: how far the memory settles
    std::thread::sleep(Duration::from_secs(30));
    let (rss_settled, _) = rss_mib(pid);
    let (p50_after, p99_after) = predict_latency(addr);
    let evicted = get(addr, "/v1/jobs/syn-0").unwrap_or_default();
    let first = get(addr, "/v1/events?after=0&limit=1").unwrap_or_default();
    let (retrain_s, retrain_peak, retrain_status) = retrain(addr, pid);
    stop(server);
    let check = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["store", "check", "--data-dir"])
        .arg(&dir)
        .output()
        .expect("augur store check");
    let t = Instant::now();
    let server = start(&dir, addr, &args);
    let healthz = wait_for(addr, "/healthz", 200, 60.0);
    let (_, loading) = get(addr, "/readyz").unwrap_or_default();
    let readyz = t.elapsed().as_secs_f64() + wait_for(addr, "/readyz", 200, 3600.0);
    let (rss_restart, _) = rss_mib(server.child.id());
    let (_, metrics) = get(addr, "/metrics").unwrap_or_default();
    let snapshot_metrics: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("augur_snapshot_loads_total") && !l.ends_with(" 0"))
        .collect();
    stop(server);
    let du = |p: &str| {
        Command::new("du")
            .args(["-sm"])
            .arg(dir.join(p))
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .next()
                    .unwrap_or("?")
                    .to_string()
            })
            .unwrap_or_default()
    };
    println!(
        "history benchmark: {} jobs, {events} events, {} connections × batches of {}",
        args.jobs, args.conns, args.batch
    );
    println!(
        "ingest: {secs:.1} s = {:.0} events/s (POST /v1/events/batch, fsync per commit group)",
        events as f64 / secs
    );
    println!("RSS: {rss_empty:.0} MiB before ingest, {peak_ingest:.0} MiB peak during, {rss_after:.0} MiB after, {rss_settled:.0} MiB 30 s later (VmHWM {hwm_after:.0} MiB)");
    println!("predict runtime p50/p99: before {p50_before:.3}/{p99_before:.3} ms, after {p50_after:.3}/{p99_after:.3} ms");
    println!("retrain: {retrain_s:.1} s, server peak RSS during it {retrain_peak:.0} MiB");
    println!(
        "  status: {}",
        retrain_status.chars().take(600).collect::<String>()
    );
    println!("restart (clean stop, then start): /healthz after {healthz:.3} s, /readyz after {readyz:.1} s, RSS then {rss_restart:.0} MiB");
    println!(
        "  /readyz while loading: {}",
        loading.chars().take(300).collect::<String>()
    );
    println!("  snapshot at restart: {}", snapshot_metrics.join(", "));
    let snapshot_bytes = std::fs::metadata(dir.join("snapshot").join("online.bin"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "disk: events.sqlite* {} MiB, archive {} MiB, snapshot {:.1} MiB",
        du("events.sqlite"),
        du("archive"),
        snapshot_bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "GET /v1/jobs/syn-0 (finished in January): {}",
        evicted.1.chars().take(400).collect::<String>()
    );
    println!(
        "GET /v1/events?after=0&limit=1: {}",
        first.1.chars().take(200).collect::<String>()
    );
    println!(
        "augur store check: {}",
        String::from_utf8_lossy(&check.stdout).trim()
    );
    if args.keep {
        println!("data folder kept: {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
