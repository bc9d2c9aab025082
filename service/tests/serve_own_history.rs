//! End-to-end: `augur serve --backend none --bootstrap <the bundled Mira SWF file>` — a
//! prediction service trained on one's own history file, fed only by its API.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions};
use augur_predictor::registry::Artifact;
use augur_predictor::{ModelRegistry, NewArtifact, RuntimePredictor};
use common::{augur, free_addr, get_json, http, json_of, wait_until, Server, DATA};
use serde_json::{json, Value};

/// Jobs of the Mira log the service is bootstrapped from.
const BOOTSTRAP_JOBS: usize = 4000;

fn start(data_dir: &Path) -> Server {
    let addr = free_addr();
    let mira = format!("{DATA}/swf/mira.swf.gz");
    let child = augur()
        .args(["serve", "--backend", "none", "--addr", &addr.to_string()])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--bootstrap", &mira, "--trees", "200"])
        .args(["--bootstrap-limit", &BOOTSTRAP_JOBS.to_string()])
        .env_remove("AUGUR_SERVE_TOKEN")
        .env("AUGUR_LOG", "warn")
        .current_dir(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start augur serve");
    let server = Server {
        child,
        addr,
        data: None,
    };
    // the test asks every history kind (the runtime model alone makes it ready)
    common::trained(addr, common::HISTORY_KINDS);
    server
}

fn mira_jobs() -> Vec<JobRecord> {
    let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
    let mut jobs = table.to_records().unwrap();
    jobs.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    jobs
}

fn profile(j: &JobRecord) -> Value {
    json!({
        "num_gpus": j.num_gpus, "num_nodes": j.num_nodes, "cpus": j.cpus,
        "requested_time": j.requested_time, "user": j.user, "group": j.group, "queue": j.queue,
    })
}

/// The submit, start and finish events of `jobs` in time order.
fn history_events(jobs: &[JobRecord]) -> Vec<Value> {
    let mut evs: Vec<(f64, u8, Value)> = Vec::new();
    for j in jobs {
        evs.push((
            j.submit_time,
            0,
            json!({ "type": "job_submitted", "job_id": j.job_id, "at": j.submit_time,
                    "profile": profile(j) }),
        ));
        if let Some(s) = j.start_time {
            evs.push((
                s,
                1,
                json!({ "type": "job_started", "job_id": j.job_id, "at": s }),
            ));
        }
        if let Some(d) = j.duration {
            let end = j.start_time.unwrap_or(j.submit_time) + d;
            evs.push((
                end,
                2,
                json!({ "type": "job_finished", "job_id": j.job_id, "at": end,
                        "status": j.status.as_str(), "duration": d }),
            ));
        }
    }
    evs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    evs.into_iter().map(|e| e.2).collect()
}

fn post(addr: SocketAddr, path: &str, body: &Value, token: &str) -> (u16, Value) {
    let (st, text) = http(addr, "POST", path, Some(&body.to_string()), Some(token)).unwrap();
    let v = if text.is_empty() {
        Value::Null
    } else {
        json_of(&text)
    };
    (st, v)
}

fn runtime_now(addr: SocketAddr, job: Value, token: &str) -> Value {
    let (st, v) = post(addr, "/v1/predict/runtime", &json!({ "job": job }), token);
    assert_eq!(st, 200, "{v}");
    v["prediction"].clone()
}

#[test]
fn serve_trains_on_its_own_history_file_and_keeps_its_models_honest() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let token = std::fs::read_to_string(dir.path().join("auth-token")).unwrap();
    let token = token.trim();

    // nothing simulated: the store is empty until the API writes to it
    let events = get_json(addr, "/v1/events");
    assert_eq!(events["events"].as_array().unwrap().len(), 0, "{events}");

    // every kind the Mira log can train is served: run time, and queue wait (it has start
    // times); failure is not (the log records no job status), and its 503 says so
    let models = get_json(addr, "/v1/models");
    let runtime_v = models["serving"]["runtime"]
        .as_u64()
        .expect("a runtime model");
    assert!(models["serving"]["queue_wait"].is_u64(), "{models}");
    assert!(models["serving"]["failure"].is_null(), "{models}");
    let jobs = mira_jobs();
    let probe = json!({ "profile": profile(&jobs[BOOTSTRAP_JOBS]) });
    let (st, v) = post(
        addr,
        "/v1/predict/queue-wait",
        &json!({ "job": probe }),
        token,
    );
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(addr, "/v1/predict/failure", &json!({ "job": probe }), token);
    assert_eq!(st, 503, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "not trained: only 0 of {BOOTSTRAP_JOBS} jobs have job statuses"
        )),
        "{msg}"
    );

    // jobs of 4,096 and 128 nodes get different answers
    let mut big = profile(&jobs[BOOTSTRAP_JOBS]);
    let mut small = big.clone();
    big["num_nodes"] = json!(4096);
    small["num_nodes"] = json!(128);
    let b = runtime_now(addr, json!({ "profile": big }), token);
    let s = runtime_now(addr, json!({ "profile": small }), token);
    assert_ne!(b["seconds"], s["seconds"], "4096 nodes {b}, 128 nodes {s}");
    // and so do their queue-wait estimates and bounds
    let wait = |p: &Value| {
        let (st, v) = post(
            addr,
            "/v1/predict/queue-wait",
            &json!({ "job": { "profile": p } }),
            token,
        );
        assert_eq!(st, 200, "{v}");
        v["prediction"].clone()
    };
    let (bw, sw) = (wait(&big), wait(&small));
    assert_ne!(
        bw["seconds"], sw["seconds"],
        "4096 nodes {bw}, 128 nodes {sw}"
    );
    assert_ne!(bw["upper"], sw["upper"], "4096 nodes {bw}, 128 nodes {sw}");

    // a poor history (230 jobs, so under 50 held-out test jobs): the retrain keeps the
    // served model and says why
    let history = &jobs[BOOTSTRAP_JOBS..BOOTSTRAP_JOBS + 230];
    for chunk in history_events(history).chunks(500) {
        let (st, v) = post(addr, "/v1/events/batch", &json!({ "events": chunk }), token);
        assert_eq!(st, 200, "{v}");
    }
    let (st, v) = post(addr, "/v1/models/retrain", &json!(null), token);
    assert_eq!(st, 202, "{v}");
    let mut status = Value::Null;
    wait_until(Duration::from_secs(300), "the retrain", || {
        status = get_json(addr, "/v1/models/retrain");
        status["state"] != "running"
    });
    assert_eq!(status["state"], "succeeded", "{status}");
    let verdicts = status["report"]["verdicts"].as_array().unwrap();
    let rt = verdicts
        .iter()
        .find(|v| v["kind"] == "runtime")
        .expect("runtime trained");
    assert_eq!(rt["promoted"], false, "{status}");
    assert!(
        rt["reason"].as_str().unwrap().contains("min_test_jobs"),
        "{status}"
    );
    assert_eq!(
        get_json(addr, "/v1/models")["serving"]["runtime"],
        runtime_v
    );

    // a version that does not load is refused, the pointer unchanged
    let registry = ModelRegistry::open(dir.path().join("models")).unwrap();
    let before = registry.promotion("runtime").unwrap();
    let bad = registry
        .save_as(
            "runtime",
            &json!({ "not": "a model" }),
            RuntimePredictor::CURRENT_FEATURE_SCHEMA_VERSION,
            NewArtifact::new("garbage", 1),
        )
        .unwrap()
        .version;
    let (st, v) = post(
        addr,
        "/v1/models/runtime/promote",
        &json!({ "version": bad }),
        token,
    );
    assert_eq!(st, 422, "{v}");
    assert_eq!(registry.promotion("runtime").unwrap(), before);
    assert_eq!(
        get_json(addr, "/v1/models")["serving"]["runtime"],
        runtime_v
    );

    // an event from the future is refused, naming the event and field
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let future = json!({ "events": [
        { "type": "job_submitted", "job_id": "ok", "at": now - 60.0, "profile": probe["profile"] },
        { "type": "job_submitted", "job_id": "late", "at": now + 86_400.0, "profile": probe["profile"] },
    ]});
    let (st, v) = post(addr, "/v1/events/batch", &future, token);
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["field"], "events[1].at", "{v}");

    // a job id submitted again after it finished is a new run
    let run = |at: f64| json!({ "type": "job_submitted", "job_id": "pytorchjob-x", "at": at, "profile": probe["profile"] });
    let fin = json!({ "type": "job_finished", "job_id": "pytorchjob-x", "at": now - 100.0,
                      "status": "completed", "duration": 500.0 });
    let (st, v) = post(
        addr,
        "/v1/events/batch",
        &json!({ "events": [run(now - 600.0), fin, run(now - 50.0)] }),
        token,
    );
    assert_eq!(st, 200, "{v}");
    let view = get_json(addr, "/v1/jobs/pytorchjob-x");
    assert_eq!(view["job"]["run"], 2, "{view}");
    assert_eq!(view["earlier_runs"][0]["run"], 1, "{view}");

    // the five ways of asking that job's runtime agree. At its submit time (`at`): the
    // answer stored then, by job id and by profile are the same number
    let view = get_json(addr, "/v1/jobs/pytorchjob-x");
    let submitted = now - 50.0;
    let at_submit = view["job"]["runtime_at_submit"].clone();
    let by_id_at = runtime_now(
        addr,
        json!({ "job_id": "pytorchjob-x", "at": submitted }),
        token,
    );
    let by_profile_at = runtime_now(
        addr,
        json!({ "profile": probe["profile"], "at": submitted }),
        token,
    );
    for (name, v) in [
        ("by job_id at its submit", &by_id_at),
        ("by profile at its submit", &by_profile_at),
    ] {
        assert_eq!(
            v["seconds"], at_submit["seconds"],
            "{name}: {v} vs {at_submit}"
        );
        assert_eq!(v["upper"], at_submit["upper"], "{name}: {v} vs {at_submit}");
    }
    // "now" is the wall clock's moment, later than its submit: runtime_now and by job id
    // (no `at`) agree, to within the features' drift between two requests a moment apart
    // (on the events' clock, asked at the submit moment, all five are one number: the
    // service's own tests check it)
    let now_answer = view["runtime_now"].clone();
    let by_id = runtime_now(addr, json!({ "job_id": "pytorchjob-x" }), token);
    assert_eq!(by_id["model_version"], now_answer["model_version"]);
    let (a, b) = (
        by_id["seconds"].as_f64().unwrap(),
        now_answer["seconds"].as_f64().unwrap(),
    );
    assert!(
        (a - b).abs() <= 1e-6 * b.max(1.0),
        "by job_id: {by_id} vs runtime_now {now_answer}"
    );
    drop(server);

    // after a restart, the kind the history could not train still says why
    let server = start(dir.path());
    let (st, v) = post(
        server.addr,
        "/v1/predict/failure",
        &json!({ "job": probe }),
        token,
    );
    assert_eq!(st, 503, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("jobs have job statuses"), "{msg}");
}
