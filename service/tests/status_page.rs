//! End-to-end tests of the live parts of `augur serve`: the real binary on a free port, the
//! simulator replaying philly at an accelerated clock, the controller loop and its switches,
//! `/metrics`, and the status page rendered by headless Chromium.
//!
//! Chromium: `/usr/bin/chromium` (Debian: `apt-get install -y chromium`; `scripts/test.sh` installs it)
//! or the path in `AUGUR_CHROMIUM`.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{augur, free_addr, get_json, http, wait_until, Server};
use serde_json::Value;

/// `augur serve` with fast settings: small bootstrap, few trees, 3000× clock.
fn start(insecure: bool) -> Server {
    start_in(tempfile::tempdir().expect("temp dir"), insecure)
}

fn start_in(data: tempfile::TempDir, insecure: bool) -> Server {
    let addr = free_addr();
    let mut cmd = augur();
    cmd.args(["serve", "--addr", &addr.to_string(), "--data-dir"])
        .arg(data.path())
        .args([
            "--speed",
            "3000",
            "--trees",
            "30",
            "--bootstrap-limit",
            "3000",
        ])
        .env_remove("AUGUR_SERVE_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if insecure {
        cmd.arg("--insecure");
    }
    let child = cmd.spawn().expect("start augur serve");
    let server = Server {
        child,
        addr,
        data: Some(data),
    };
    common::wait_started(addr);
    server
}

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn last_seq(addr: SocketAddr) -> u64 {
    get_json(addr, "/v1/autoscaler/decisions?limit=1")["decisions"][0]["seq"]
        .as_u64()
        .unwrap_or(0)
}

/// The ids of the stored `job_submitted` events, in order.
fn submitted_ids(addr: SocketAddr) -> Vec<String> {
    let mut after = 0;
    let mut ids = Vec::new();
    loop {
        let v = get_json(addr, &format!("/v1/events?after={after}&limit=10000"));
        let evs = v["events"].as_array().expect("events");
        if evs.is_empty() {
            return ids;
        }
        ids.extend(
            evs.iter()
                .filter(|e| e["event"]["type"] == "job_submitted")
                .filter_map(|e| e["event"]["job_id"].as_str().map(str::to_string)),
        );
        after = v["next_after"].as_i64().expect("next_after");
    }
}

/// `id` percent-encoded as one path segment.
fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn chromium() -> PathBuf {
    let p = std::env::var_os("AUGUR_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        p.exists(),
        "headless Chromium not found at {} (apt-get install -y chromium, or set AUGUR_CHROMIUM)",
        p.display()
    );
    p
}

/// Runs headless Chromium on `url` with `extra` arguments; returns stdout.
fn run_chromium(url: &str, profile: &Path, extra: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
            "--window-size=1400,1100",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The value of attribute `name` in the `<body ...>` tag of a dumped DOM.
fn body_attr(dom: &str, name: &str) -> Option<String> {
    let start = dom.find("<body")?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let key = format!("{name}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')?;
    Some(tag[at..at + end].to_string())
}

#[test]
fn status_page_draws_the_live_data_in_headless_chromium() {
    let server = start(true);
    let addr = server.addr;
    // the replay, the controller and the predictor produce the page's data
    wait_until(Duration::from_secs(180), "live data for the page", || {
        count(&get_json(addr, "/v1/cluster/history"), "count") >= 2
            && count(&get_json(addr, "/v1/autoscaler/decisions"), "count") > 0
            && get_json(addr, "/v1/predictions/recent")["jobs"]
                .as_array()
                .is_some_and(|j| j.iter().any(|j| j["predicted_runtime"].is_f64()))
    });
    // each decision names its job by the id the API takes
    let d = get_json(addr, "/v1/autoscaler/decisions");
    let first = &d["decisions"][0];
    let id = first["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"));
    assert!(id.starts_with("sim0-"), "{first}");
    let (s, body) = http(
        addr,
        "GET",
        &format!("/v1/jobs/{}", segment(id)),
        None,
        None,
    )
    .expect("GET the decided job");
    assert_eq!(s, 200, "{id}: {body}");
    let page = http(addr, "GET", "/", None, None).expect("GET /");
    assert_eq!(page.0, 200);
    assert!(page.1.contains("/status/uPlot.iife.min.js"));
    let profile = tempfile::tempdir().expect("profile dir");
    let url = format!("http://{addr}/");
    let dom = run_chromium(&url, profile.path(), &["--dump-dom"]);
    assert_eq!(
        body_attr(&dom, "data-errors"),
        None,
        "the page reported JavaScript errors"
    );
    let ready = body_attr(&dom, "data-ready").expect("the page marked itself ready (data-ready)");
    // "cluster=N;predictions=M;decisions=K", each drawn from real data
    let parts: Vec<(String, u64)> = ready
        .split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
        .collect();
    let get = |k: &str| parts.iter().find(|(n, _)| n == k).map_or(0, |p| p.1);
    assert!(get("cluster") >= 2, "{ready}");
    assert!(get("predictions") >= 1, "{ready}");
    assert!(get("decisions") >= 1, "{ready}");
    // uPlot drew its canvases and the decisions table has rows
    assert!(dom.matches("<canvas").count() >= 2, "no chart canvas");
    assert!(dom.contains("<td>admit</td>") || dom.contains("<td>set_workers</td>"));

    // a screenshot that is not blank
    let shot = std::env::temp_dir().join(format!("augur-status-{}.png", addr.port()));
    let arg = format!("--screenshot={}", shot.display());
    run_chromium(&url, profile.path(), &[&arg]);
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot written"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG frame");
    assert_eq!((info.width, info.height), (1400, 1100));
    let px = &buf[..info.buffer_size()];
    let distinct: std::collections::HashSet<&[u8]> = px.chunks(3).step_by(97).collect();
    assert!(distinct.len() > 20, "the screenshot looks blank");
    if let Ok(dir) = std::env::var("AUGUR_STATUS_SCREENSHOT") {
        let _ = std::fs::copy(&shot, dir);
    }
    let _ = std::fs::remove_file(&shot);
}

#[test]
fn live_controller_obeys_pause_and_dry_run_and_metrics_show_it() {
    let server = start(true);
    let addr = server.addr;
    wait_until(Duration::from_secs(120), "the controller to decide", || {
        last_seq(addr) > 0
    });
    // the simulated clock moves at about 3000×: between two reads at least 2 s apart it
    // moves by more than 1000 s, and by no more than 3000× the wall time measured around
    // them (plus a tick), however slow the machine is
    let began = Instant::now();
    let t0 = get_json(addr, "/v1/cluster")["now"]["time"]
        .as_f64()
        .expect("time");
    std::thread::sleep(Duration::from_secs(2));
    let t1 = get_json(addr, "/v1/cluster")["now"]["time"]
        .as_f64()
        .expect("time");
    let wall = began.elapsed().as_secs_f64();
    assert!(
        t1 - t0 > 1000.0 && t1 - t0 < 3000.0 * (wall + 1.0),
        "{wall:.1} s at 3000× moved the trace clock by {}",
        t1 - t0
    );

    // pause: no new decision while the cluster keeps running (its own FIFO)
    let (s, body) = http(addr, "POST", "/v1/autoscaler/pause", None, None).expect("pause");
    assert_eq!(s, 200, "{body}");
    let paused: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(paused["controller"]["paused"], true);
    let seq = last_seq(addr);
    let done = count(&get_json(addr, "/v1/cluster"), "finished_jobs");
    wait_until(
        Duration::from_secs(120),
        "a job to finish while paused",
        || count(&get_json(addr, "/v1/cluster"), "finished_jobs") > done,
    );
    assert_eq!(last_seq(addr), seq, "the paused controller decided");

    // dry-run (resumed): decisions logged as dry_run, nothing applied
    let (s, body) = http(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        Some(r#"{"enabled": true}"#),
        None,
    )
    .expect("dry-run");
    assert_eq!(s, 200, "{body}");
    http(addr, "POST", "/v1/autoscaler/resume", None, None).expect("resume");
    wait_until(Duration::from_secs(60), "dry-run decisions", || {
        last_seq(addr) > seq
    });
    let d = get_json(addr, "/v1/autoscaler/decisions?limit=1000");
    let new: Vec<&Value> = d["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter(|x| x["seq"].as_u64().unwrap_or(0) > seq)
        .collect();
    assert!(!new.is_empty());
    assert!(new.iter().all(|x| x["outcome"] == "dry_run"), "{new:?}");
    assert!(new.iter().all(|x| x["reason"].is_string()));

    // back to acting: applied decisions again
    http(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        Some(r#"{"enabled": false}"#),
        None,
    )
    .expect("dry-run off");
    let seq2 = last_seq(addr);
    wait_until(Duration::from_secs(60), "applied decisions", || {
        get_json(addr, "/v1/autoscaler/decisions?limit=1000")["decisions"]
            .as_array()
            .is_some_and(|a| {
                a.iter()
                    .any(|x| x["seq"].as_u64().unwrap_or(0) > seq2 && x["outcome"] == "applied")
            })
    });

    // bad bodies name the field
    let (s, body) = http(
        addr,
        "POST",
        "/v1/autoscaler/dry-run",
        Some(r#"{"enabled": "yes"}"#),
        None,
    )
    .expect("bad dry-run");
    assert!(s == 400 || s == 422, "{s} {body}");
    assert!(body.contains("enabled"), "{body}");
    let (s, body) = http(addr, "GET", "/v1/autoscaler/decisions?limit=0", None, None).expect("bad");
    assert!(s == 400 || s == 422, "{s} {body}");
    assert!(body.contains("limit"), "{body}");

    // a prediction, then /metrics holds every family with real values
    let mut predicted = false;
    wait_until(Duration::from_secs(120), "the runtime model", || {
        let r = http(
            addr,
            "POST",
            "/v1/predict/runtime",
            Some(r#"{"job":{"job_id":"m1","profile":{"num_gpus":2,"user":"u1"}}}"#),
            None,
        );
        predicted = r.is_ok_and(|(s, _)| s == 200);
        predicted
    });
    // predictions reach the metrics through the service's event broadcast (asynchronously)
    let mut text = String::new();
    wait_until(
        Duration::from_secs(10),
        "the prediction in /metrics",
        || {
            let (s, t) = http(addr, "GET", "/metrics", None, None).expect("metrics");
            assert_eq!(s, 200);
            text = t;
            text.contains("augur_predictions_total{predictor=\"runtime\"")
        },
    );
    assert!(text.ends_with("# EOF\n"), "not OpenMetrics text");
    let sample = |prefix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    assert!(
        sample(
            r#"augur_http_request_duration_seconds_count{route="/v1/cluster",method="GET",status="200"}"#
        ) >= 2.0
    );
    assert!(sample("augur_prediction_duration_seconds_count{predictor=\"runtime\"}") >= 1.0);
    assert!(sample("augur_predictions_total{predictor=\"runtime\"") >= 1.0);
    assert!(sample("augur_controller_actions_total{") >= 1.0);
    assert!(sample("augur_controller_actions_total{action=\"admit\",reason=\"fifo\"").abs() < 1e-9);
    assert!(text.contains("outcome=\"dry_run\""));
    assert!(text.contains("augur_cluster_utilisation "));
    assert!(text.contains("augur_cluster_queue_length "));
    // finished replayed jobs are scored against their prediction at submit
    wait_until(Duration::from_secs(120), "live accuracy", || {
        http(addr, "GET", "/metrics", None, None).is_ok_and(|(_, t)| {
            t.contains("augur_prediction_mae_seconds{predictor=\"runtime\"}")
                && t.contains("augur_prediction_interval_coverage{predictor=\"runtime\"}")
        })
    });
}

#[test]
fn switches_need_the_token_unless_insecure() {
    let server = start(false);
    let addr = server.addr;
    for path in [
        "/v1/autoscaler/pause",
        "/v1/autoscaler/resume",
        "/v1/autoscaler/dry-run",
    ] {
        let (s, _) = http(addr, "POST", path, Some(r#"{"enabled": true}"#), None).expect("post");
        assert_eq!(s, 401, "{path} without a token");
    }
    let (s, _) = http(addr, "GET", "/v1/autoscaler/decisions", None, None).expect("get");
    assert_eq!(s, 200, "reading needs no token");
}

/// Pause and dry-run are acknowledged facts: after `kill -9` and a restart on the same data
/// folder the controller is still paused and in dry-run, and decides nothing. The replay
/// resumes under new ids: no job id is submitted twice.
#[test]
fn operator_switches_survive_a_kill_and_restart() {
    let mut server = start(true);
    let addr = server.addr;
    wait_until(Duration::from_secs(180), "replayed submits", || {
        !submitted_ids(addr).is_empty()
    });
    for path in ["/v1/autoscaler/pause", "/v1/autoscaler/dry-run"] {
        let body = path.ends_with("dry-run").then_some(r#"{"enabled": true}"#);
        let (s, text) = http(addr, "POST", path, body, None).expect("switch");
        assert_eq!(s, 200, "{text}");
    }
    let data = server.data.take().expect("data folder");
    drop(server); // SIGKILL
    let server = start_in(data, true);
    let addr = server.addr;
    wait_until(Duration::from_secs(120), "the cluster to run", || {
        get_json(addr, "/v1/cluster")["controller"]["status"] == "running"
    });
    let c = get_json(addr, "/v1/cluster");
    assert_eq!(c["controller"]["paused"], true, "{c}");
    assert_eq!(c["controller"]["dry_run"], true, "{c}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        last_seq(addr),
        0,
        "a paused controller decided after the restart"
    );
    wait_until(
        Duration::from_secs(120),
        "submits after the restart",
        || submitted_ids(addr).iter().any(|id| id.starts_with("sim1-")),
    );
    let ids = submitted_ids(addr);
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "a replayed id was submitted twice");
}
