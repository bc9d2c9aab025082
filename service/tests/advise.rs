//! End-to-end: the advisor of the real binary. `augur serve --backend none --bootstrap openb`
//! (a trace with GPUs and start times, so both the runtime and the queue-wait models are
//! served), fed a small hand-made history over the API (a cluster snapshot, jobs naming GPU
//! types and queues, past runs of the same job at other sizes); then `POST /v1/advise` and
//! `augur advise` on a hand-written `#SBATCH` script and on a flags profile, and the bad
//! inputs named (422 / exit 2).

mod common;

use std::path::Path;
use std::process::Output;

use common::{augur, free_addr, http, json_of, serve_none, Server};
use serde_json::{json, Value};

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn start(dir: &Path) -> Server {
    let addr = free_addr();
    let mut cmd = serve_none(addr, dir);
    cmd.args(["--bootstrap", "openb"])
        .env_remove("AUGUR_SERVE_TOKEN");
    let server = Server::spawn(cmd, addr);
    // the advice reads the run-time and queue-wait models; the jobs it ingests are answered
    // at submit by every history kind
    server.wait_trained(common::HISTORY_KINDS);
    server
}

/// A cluster of 64 GPUs, alice's and bob's jobs on v100 and a100 in the `gpu` and `long`
/// queues, and alice's finished `bert` runs at 2 and 8 GPUs.
fn history(t0: f64) -> Vec<Value> {
    let mut evs = vec![
        json!({"type": "cluster_snapshot", "at": t0, "total_gpus": 64.0,
        "busy_gpus": 40.0, "queued_jobs": 3, "running_jobs": 6}),
    ];
    let jobs = [
        ("h1", "alice", "bert", 2.0, "v100", "gpu", 8000.0),
        ("h2", "alice", "bert", 8.0, "v100", "gpu", 2600.0),
        ("h3", "bob", "resnet", 4.0, "a100", "long", 5000.0),
        ("h4", "alice", "gpt", 1.0, "v100", "long", 3000.0),
    ];
    for (i, (id, user, name, gpus, ty, queue, secs)) in jobs.iter().enumerate() {
        let at = t0 + 60.0 * i as f64;
        evs.push(
            json!({"type": "job_submitted", "job_id": id, "at": at, "profile": {
            "num_gpus": gpus, "gpu_type": ty, "queue": queue, "user": user, "job_name": name,
            "requested_time": 36000.0}}),
        );
        evs.push(json!({"type": "job_started", "job_id": id, "at": at + 30.0}));
        evs.push(
            json!({"type": "job_finished", "job_id": id, "at": at + 30.0 + secs,
            "status": "completed", "duration": secs}),
        );
    }
    // two jobs still queued
    for (i, id) in ["q1", "q2"].iter().enumerate() {
        evs.push(
            json!({"type": "job_submitted", "job_id": id, "at": t0 + 20_000.0 + i as f64,
            "profile": {"num_gpus": 16.0, "gpu_type": "a100", "queue": "gpu", "user": "bob"}}),
        );
    }
    evs
}

fn post(s: &Server, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = http(s.addr, "POST", path, Some(&body.to_string()), None).unwrap();
    (status, json_of(&text))
}

fn run_advise(s: &Server, args: &[&str]) -> Output {
    augur()
        .arg("advise")
        .args(args)
        .args(["--url", &format!("http://{}", s.addr)])
        .output()
        .expect("run augur advise")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn advice_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let token = std::fs::read_to_string(dir.path().join("auth-token")).unwrap();
    let t0 = now() - 30_000.0;
    let (status, body) = http(
        server.addr,
        "POST",
        "/v1/events/batch",
        Some(&json!({"events": history(t0)}).to_string()),
        Some(token.trim()),
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");

    // the advice for a would-be submit, at a fixed moment
    let at = now();
    let profile = json!({"num_gpus": 8.0, "gpu_type": "v100", "queue": "gpu", "user": "alice",
        "job_name": "bert", "requested_time": 36000.0});
    let (status, advice) = post(
        &server,
        "/v1/advise",
        &json!({"job": {"profile": profile, "at": at}, "gpus": {"min": 1, "max": 16}}),
    );
    assert_eq!(status, 200, "{advice}");
    let options = advice["options"].as_array().unwrap();
    assert!(options.len() > 5, "{advice}");
    let request = &options[0];
    assert_eq!(request["is_request"], json!(true));
    assert_eq!(
        request["ratio"]["basis"]["detail"],
        json!("the request as given")
    );
    for o in options {
        assert!(o["ratio"]["basis"]["source"].is_string(), "no basis: {o}");
        assert!(
            !o["ratio"]["basis"]["detail"].as_str().unwrap().is_empty(),
            "{o}"
        );
        for f in [
            "start",
            "start_upper",
            "finish",
            "finish_upper",
            "gpu_hours",
        ] {
            let v = o[f].as_f64().unwrap();
            assert!(v.is_finite() && v >= 0.0, "{f}: {o}");
        }
        let rt = &o["runtime"];
        let (lo, mid, up) = (
            rt["lower"].as_f64().unwrap(),
            rt["seconds"].as_f64().unwrap(),
            rt["upper"].as_f64().unwrap(),
        );
        assert!(0.0 <= lo && lo <= mid && mid <= up && up <= 36000.0, "{o}");
        assert!(o["start"].as_f64().unwrap() >= at);
    }
    let gpus: Vec<f64> = options
        .iter()
        .map(|o| o["gpus"].as_f64().unwrap())
        .collect();
    assert!(gpus.iter().all(|g| (1.0..=16.0).contains(g)), "{gpus:?}");
    let types: Vec<&str> = options
        .iter()
        .filter_map(|o| o["gpu_type"].as_str())
        .collect();
    assert!(
        types.contains(&"a100") && types.contains(&"v100"),
        "{types:?}"
    );
    // alice's queues are offered, bob's only queue too since she used it
    let queues: Vec<&str> = options.iter().filter_map(|o| o["queue"].as_str()).collect();
    assert!(queues.contains(&"long"), "{queues:?}");
    let count = |f: &str| options.iter().filter(|o| o[f] == json!(true)).count();
    assert_eq!(
        (count("earliest_finish"), count("cheapest_near_earliest")),
        (1, 1)
    );
    let other_basis = options
        .iter()
        .skip(1)
        .filter(|o| o["gpus"] != request["gpus"] || o["gpu_type"] != request["gpu_type"])
        .all(|o| o["ratio"]["basis"]["source"] != json!("unchanged"));
    assert!(
        other_basis,
        "a changed size or type must rest on measured scaling: {advice}"
    );

    // one question, one answer: the request row's start is the queue-wait endpoint's
    // answer for the same profile at the same moment, its run time the runtime endpoint's
    let (status, wait) = post(
        &server,
        "/v1/predict/queue-wait",
        &json!({"job": {"profile": profile, "at": at}}),
    );
    assert_eq!(status, 200, "{wait}");
    let w = &wait["prediction"];
    assert_eq!(request["wait"]["seconds"], w["seconds"]);
    assert_eq!(request["wait"]["upper"], w["upper"]);
    assert_eq!(
        request["start"].as_f64(),
        Some(at + w["seconds"].as_f64().unwrap())
    );
    let (_, runtime) = post(
        &server,
        "/v1/predict/runtime",
        &json!({"job": {"profile": profile, "at": at}}),
    );
    assert_eq!(
        request["runtime"]["seconds"],
        runtime["prediction"]["seconds"]
    );
    assert_eq!(request["runtime"]["upper"], runtime["prediction"]["upper"]);
    // and another row's start is the queue-wait answer for its own profile
    let row4 = options
        .iter()
        .find(|o| {
            o["gpus"] == json!(4.0) && o["gpu_type"] == json!("v100") && o["queue"] == json!("gpu")
        })
        .expect("a 4-GPU v100 row");
    let mut p4 = profile.clone();
    p4["num_gpus"] = json!(4.0);
    let (_, wait4) = post(
        &server,
        "/v1/predict/queue-wait",
        &json!({"job": {"profile": p4, "at": at}}),
    );
    assert_eq!(row4["wait"]["seconds"], wait4["prediction"]["seconds"]);

    // bad input names its field
    let field_of = |body: Value| {
        let (status, e) = post(&server, "/v1/advise", &body);
        assert_eq!(status, 422, "{e}");
        e["error"]["field"].as_str().unwrap_or("").to_string()
    };
    let job = json!({"profile": profile});
    assert_eq!(
        field_of(json!({"job": job, "gpus": {"min": 0, "max": 4}})),
        "gpus.min"
    );
    assert_eq!(
        field_of(json!({"job": job, "gpus": {"max": 1_000_000}})),
        "gpus.max"
    );
    assert_eq!(
        field_of(json!({"job": job, "gpus": {"min": 8, "max": 2}})),
        "gpus"
    );
    assert_eq!(
        field_of(json!({"job": job, "gpu_types": ["v100", "h100"]})),
        "gpu_types[1]"
    );
    assert_eq!(
        field_of(json!({"job": job, "queues": ["nope"]})),
        "queues[0]"
    );
    assert_eq!(field_of(json!({"job": job, "colour": "blue"})), "colour");

    // in the OpenAPI document
    let (_, doc) = http(server.addr, "GET", "/openapi.json", None, None).unwrap();
    assert!(json_of(&doc)["paths"]["/v1/advise"]["post"].is_object());

    // `augur advise` on a hand-written batch script
    let script = dir.path().join("bert.sbatch");
    std::fs::write(
        &script,
        "#!/bin/bash\n#SBATCH --job-name=bert\n#SBATCH --gres=gpu:v100:4 --nodes=2\n#SBATCH -p gpu\n#SBATCH --time=10:00:00\n#SBATCH --mem=64G\n\nsrun python train.py\n",
    )
    .unwrap();
    let out = run_advise(&server, &[script.to_str().unwrap(), "--user", "alice"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("8 GPUs v100 @gpu (request)"), "{table}");
    assert!(
        table.contains("the request as given") && table.contains("basis"),
        "{table}"
    );
    let out = run_advise(
        &server,
        &[script.to_str().unwrap(), "--user", "alice", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = json_of(&text(&out.stdout));
    assert_eq!(a["options"][0]["gpus"], json!(8.0));
    assert_eq!(
        a["options"][0]["runtime"]["upper"]
            .as_f64()
            .map(|u| u <= 36000.0),
        Some(true)
    );

    // on a profile given with flags
    let out = run_advise(
        &server,
        &[
            "--gpus",
            "a100:2",
            "--time",
            "1-0",
            "--partition",
            "long",
            "--user",
            "bob",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = json_of(&text(&out.stdout));
    assert_eq!(a["options"][0]["gpu_type"], json!("a100"));
    assert_eq!(a["options"][0]["queue"], json!("long"));

    // bad input exits 2 naming the file, line, flag or field
    let plain = dir.path().join("plain.sh");
    std::fs::write(&plain, "#!/bin/sh\necho hello\n").unwrap();
    let out = run_advise(&server, &[plain.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("{}: no #SBATCH line", plain.display())));
    let broken = dir.path().join("broken.sbatch");
    std::fs::write(
        &broken,
        "#!/bin/sh\n#SBATCH --gpus=4\n#SBATCH --time=soon\n",
    )
    .unwrap();
    let out = run_advise(&server, &[broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("{}:3: --time `soon`", broken.display())),
        "{}",
        text(&out.stderr)
    );
    let out = run_advise(
        &server,
        &["--gpus", "4", "--user", "alice", "--queues", "nope"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("`queues[0]` (--queues)"), "{err}");
    let out = run_advise(&server, &["--gpus", "4", "--max-gpus", "1000000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("`gpus.max` (--max-gpus)"),
        "{}",
        text(&out.stderr)
    );
}

/// Without the scaling data the service still starts, and its advice says loudly that
/// other sizes and types could not be weighed (the request and its other queues still are).
#[test]
fn advice_without_the_scaling_data_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-bundled-data");
    std::fs::create_dir(&empty).unwrap();
    let addr = free_addr();
    let mut cmd = serve_none(addr, dir.path());
    // the job models from a trace file; the bundled folder (scaling data) empty
    cmd.args(["--bootstrap", &format!("{}/swf/mira.swf.gz", common::DATA)])
        .env("AUGUR_DATASETS_DIR", &empty);
    let server = Server::spawn(cmd, addr);
    server.wait_trained(&["runtime", "queue_wait"]);
    let (status, advice) = post(
        &server,
        "/v1/advise",
        &json!({"job": {"profile": {"num_gpus": 4.0, "user": "u", "requested_time": 3600.0}},
                "gpus": {"min": 1, "max": 8}}),
    );
    assert_eq!(status, 200, "{advice}");
    let options = advice["options"].as_array().unwrap();
    assert_eq!(options.len(), 1, "only the request itself: {advice}");
    assert_eq!(options[0]["is_request"], json!(true));
    let unavailable = advice["unavailable"].to_string();
    assert!(unavailable.contains("scaling data is missing"), "{advice}");
}
