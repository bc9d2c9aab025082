//! `augur serve --backend slurm` on a real Slurm: starts the single-node test cluster
//! (`scripts/slurm-test-cluster.sh`, Debian's `slurmctld slurmd slurm-client munge slurmdbd
//! mariadb-server`, which `scripts/test.sh` installs; runs as root), runs the real binary polling it
//! every second, submits `sbatch --wrap` jobs (two pending behind one that holds both CPUs
//! and both GPUs, one cancelled while pending, one failing with `exit 1`) and checks that
//! every job's submit, start and finish reach the store with the right status, that
//! predictions are answered for them, that `augur eta --why` names what holds the pending
//! GPU job (Slurm's reason, and Augur's reading: the running job as the release), that
//! `augur eta --json` lists the pending ones with Augur's and Slurm's estimates, and
//! that a restart on the same data folder adds no event for jobs already recorded; then that
//! a first start on a fresh data folder, with enough finished jobs in the accounting, trains
//! its first models on that history and records it. Without the Slurm tools it fails with
//! the install command. About two minutes.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use augur_test_fixtures::slurm::Cluster;
use common::{augur, free_addr, get_json, http, json_of, wait_until, Server};
use serde_json::Value;

/// The store's job events by Slurm job id: (store id, kinds in order, the finish status).
fn slurm_jobs(addr: std::net::SocketAddr) -> HashMap<String, (String, Vec<String>, Value)> {
    let events = get_json(addr, "/v1/events?after=0&limit=10000");
    let mut out: HashMap<String, (String, Vec<String>, Value)> = HashMap::new();
    for e in events["events"].as_array().expect("events") {
        let e = if e.get("event").is_some() {
            &e["event"]
        } else {
            e
        };
        let Some(id) = e["job_id"].as_str() else {
            continue;
        };
        let slurm = id
            .strip_prefix("augurtest/")
            .and_then(|r| r.split_once('@'))
            .map(|(s, _)| s.to_string())
            .unwrap_or_else(|| panic!("job id `{id}` is not augurtest/<id>@<submit>"));
        let entry = out
            .entry(slurm)
            .or_insert_with(|| (id.to_string(), Vec::new(), Value::Null));
        entry
            .1
            .push(e["type"].as_str().unwrap_or_default().to_string());
        if e["type"] == "job_finished" {
            entry.2 = e["status"].clone();
        }
    }
    out
}

/// `augur serve --backend slurm` on `addr` over `data`, polling every second.
fn start_server(cluster: &Cluster, addr: std::net::SocketAddr, data: &Path) -> Server {
    start_server_with(cluster, addr, data, &[])
}

/// [`start_server`] with extra environment variables.
fn start_server_with(
    cluster: &Cluster,
    addr: std::net::SocketAddr,
    data: &Path,
    env: &[(&str, &str)],
) -> Server {
    Server {
        child: augur()
            .args(["serve", "--backend", "slurm", "--insecure"])
            .envs(env.iter().copied())
            .args(["--addr", &addr.to_string(), "--data-dir"])
            .arg(data)
            .args(["--slurm-poll-seconds", "1", "--trees", "10"])
            // Mira has queue waits (the queue-wait model behind the predicted starts)
            .args(["--bootstrap", "mira", "--bootstrap-limit", "3000"])
            .env("SLURM_CONF", cluster.conf())
            .env("AUGUR_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start augur serve"),
        addr,
        data: None,
    }
}

fn eta_json(addr: std::net::SocketAddr) -> Value {
    let out = augur()
        .args(["eta", "--json", "--url", &format!("http://{addr}")])
        .output()
        .expect("run augur eta");
    assert!(
        out.status.success(),
        "augur eta: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&String::from_utf8_lossy(&out.stdout))
}

/// `augur eta --why` (the real binary) while `gpu` (1 GPU) waits behind `hold` (both GPUs):
/// under the job's line, Augur's reading names `hold` as the release that frees its GPU,
/// and Slurm's reason (`Resources` or `Priority`) stands beside it; the JSON agrees. `both`
/// (no GPU, `--exclusive`) reads as a whole node that the GPU reading cannot time.
fn why_names_the_release_and_slurms_reason(
    addr: std::net::SocketAddr,
    hold: &str,
    gpu: &str,
    both: &str,
) {
    let url = format!("http://{addr}");
    let mut text = String::new();
    let mut block = Vec::new();
    wait_until(
        Duration::from_secs(40),
        "augur eta --why with Slurm's reason",
        || {
            let out = augur()
                .args(["eta", "--why", "--url", &url, gpu])
                .output()
                .expect("run augur eta --why");
            text = String::from_utf8_lossy(&out.stdout).into_owned();
            // the job's line and the lines under it
            block = text
                .lines()
                .skip_while(|l| !l.starts_with(gpu))
                .take(3)
                .map(str::to_string)
                .collect();
            // once `hold` runs (a first poll may see it pending, ahead of the job)
            block.len() == 3
                && block[1].starts_with(
                    "    why: waits for 1 GPU (tesla): no job ahead, 0 free now; frees",
                )
                && block[1].contains(&format!("job {hold}"))
                && ["Resources", "Priority"]
                    .iter()
                    .any(|r| block[2] == format!("    Slurm's reason: {r}"))
        },
    );
    eprintln!("augur eta --why:\n{text}");
    let out = augur()
        .args(["eta", "--why", "--json", "--url", &url, gpu])
        .output()
        .unwrap();
    let eta = json_of(&String::from_utf8_lossy(&out.stdout));
    let why = &eta["jobs"][0]["why"];
    assert_eq!(why["releases"][0]["scheduler_id"], hold, "{eta}");
    assert_eq!(why["releases"][0]["running"], true, "{eta}");
    assert_eq!(why["shape"]["gpu_type"], "tesla", "{eta}");
    assert!(why["start"]["queue_drain"].is_number(), "{eta}");
    assert!(why["scheduler_reason"].is_string(), "{eta}");
    let out = augur()
        .args(["eta", "--why", "--json", "--url", &url, both])
        .output()
        .unwrap();
    let eta = json_of(&String::from_utf8_lossy(&out.stdout));
    let why = &eta["jobs"][0]["why"];
    assert_eq!(why["shape"]["whole_nodes"], true, "{eta}");
    assert_eq!(
        why["shape"]["description"], "no GPUs (2 CPUs) on a whole node",
        "{eta}"
    );
    assert!(why["start"]["queue_drain"].is_null(), "{eta}");
    assert!(
        why["reading"]
            .as_str()
            .is_some_and(|r| r.contains("Augur reads the GPU queue only")),
        "{eta}"
    );
}

#[test]
fn serve_with_the_slurm_backend_records_jobs_and_answers_eta() {
    let began = Instant::now();
    let cluster = Cluster::start();
    let addr = free_addr();
    let data = tempfile::tempdir().unwrap();
    let server = start_server(&cluster, addr, &data.path().join("augur"));
    // predictions are made at submit: submit once the models are served (the queue-wait
    // one behind the predicted starts included)
    common::trained(addr, common::HISTORY_KINDS);
    // readiness includes the Slurm backend's own poll state
    let ready = get_json(addr, "/readyz");
    let slurm_check = ready["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "backend:slurm"))
        .cloned()
        .unwrap_or_else(|| panic!("no backend:slurm check in {ready}"));
    assert_eq!(slurm_check["ok"], true, "{ready}");
    let identity: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("augur/identity.json")).unwrap())
            .unwrap();
    assert_eq!(identity["backend"], "slurm");
    assert_eq!(identity["cluster"], "augurtest");

    // `hold` takes both CPUs and both GPUs; the others wait behind it
    let hold = cluster.sbatch(&[
        "-J",
        "hold",
        "-n",
        "2",
        "-t",
        "2",
        "--gres=gpu:tesla:2",
        "--wrap",
        // long enough for the why and the estimates (a backfill pass) while the others wait
        "sleep 60",
    ]);
    let gpu = cluster.sbatch(&[
        "-J",
        "wait-gpu",
        "-n",
        "1",
        "-t",
        "1",
        "--gres=gpu:tesla:1",
        "--wrap",
        "sleep 2",
    ]);
    let both = cluster.sbatch(&[
        "-J",
        "wait-both",
        "-n",
        "2",
        "-t",
        "1",
        "--exclusive",
        "--wrap",
        "sleep 2",
    ]);
    let fail = cluster.sbatch(&["-J", "fails", "-n", "1", "-t", "1", "--wrap", "exit 1"]);
    let cancel = cluster.sbatch(&[
        "-J",
        "cancelled",
        "-n",
        "2",
        "-t",
        "1",
        "--wrap",
        "sleep 30",
    ]);

    why_names_the_release_and_slurms_reason(addr, &hold, &gpu, &both);

    // the pending jobs reach the store, with Augur's and (after a backfill pass) Slurm's estimates
    let mut eta = Value::Null;
    wait_until(
        Duration::from_secs(60),
        "eta with Slurm's estimates",
        || {
            eta = eta_json(addr);
            let jobs = eta["jobs"].as_array().cloned().unwrap_or_default();
            let with_both = |id: &str| {
                jobs.iter().any(|j| {
                    j["slurm_job_id"] == id
                        && j["start"].is_number()
                        && j["scheduler_start"].is_number()
                })
            };
            with_both(&gpu) && with_both(&both)
        },
    );
    assert_eq!(eta["backend"], "slurm");
    for j in eta["jobs"].as_array().unwrap() {
        assert_ne!(
            j["slurm_job_id"],
            hold.as_str(),
            "a running job is not queued: {eta}"
        );
        if j["start"].is_number() && j["end"].is_number() {
            assert!(j["end"].as_f64() >= j["start"].as_f64(), "{j}");
            assert!(j["start_upper"].as_f64() >= j["start"].as_f64(), "{j}");
        }
    }
    // one job, and one user's jobs, by filter
    let one = augur()
        .args(["eta", "--json", "--url", &format!("http://{addr}"), &gpu])
        .output()
        .unwrap();
    let one = json_of(&String::from_utf8_lossy(&one.stdout));
    assert_eq!(one["jobs"].as_array().map(Vec::len), Some(1), "{one}");
    let text = augur()
        .args(["eta", "--url", &format!("http://{addr}"), "--user", "root"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Slurm's estimate") && text.contains(&both),
        "{text}"
    );

    cluster.run("scancel", &[&cancel]);

    // every job's story reaches the store, with the right status
    let want: [(&str, &[&str], &str); 5] = [
        (
            &hold,
            &["job_submitted", "job_started", "job_finished"],
            "completed",
        ),
        (
            &gpu,
            &["job_submitted", "job_started", "job_finished"],
            "completed",
        ),
        (
            &both,
            &["job_submitted", "job_started", "job_finished"],
            "completed",
        ),
        (
            &fail,
            &["job_submitted", "job_started", "job_finished"],
            "failed",
        ),
        (&cancel, &["job_submitted", "job_finished"], "killed"),
    ];
    let mut jobs = HashMap::new();
    wait_until(
        Duration::from_secs(120),
        "every job finished in the store",
        || {
            jobs = slurm_jobs(addr);
            want.iter().all(|(id, _, _)| {
                jobs.get(*id)
                    .is_some_and(|(_, kinds, _)| kinds.iter().any(|k| k == "job_finished"))
            })
        },
    );
    for (id, kinds, status) in want {
        let (store_id, got, got_status) = &jobs[id];
        assert_eq!(got, kinds, "job {id} ({store_id})");
        assert_eq!(got_status, status, "job {id} ({store_id})");
    }

    // predictions for an ingested Slurm job, and what the service knows about it
    let (store_id, _, _) = &jobs[&gpu];
    let body = format!(r#"{{"job":{{"job_id":"{store_id}"}}}}"#);
    let (status, answer) = http(addr, "POST", "/v1/predict/runtime", Some(&body), None).unwrap();
    assert_eq!(status, 200, "{answer}");
    assert!(json_of(&answer)["prediction"]["seconds"].as_f64() > Some(0.0));
    let path = format!(
        "/v1/jobs/{}",
        store_id.replace('/', "%2F").replace('@', "%40")
    );
    let job = get_json(addr, &path);
    assert_eq!(job["job"]["profile"]["num_gpus"], 1.0, "{job}");
    assert_eq!(job["job"]["profile"]["job_name"], "wait-gpu", "{job}");
    assert!(job["job"]["queue_wait_at_submit"].is_object(), "{job}");

    // a restart picks up where it was: the jobs sacct still lists add nothing
    drop(server);
    let server = start_server(&cluster, addr, &data.path().join("augur"));
    // two polls after the restart: the jobs sacct lists have been seen again
    let last_poll = || {
        http(addr, "GET", "/v1/cluster", None, None)
            .ok()
            .filter(|(s, _)| *s == 200)
            .and_then(|(_, b)| json_of(&b)["last_poll"].as_f64())
    };
    let mut first = None;
    wait_until(Duration::from_secs(60), "a poll after the restart", || {
        first = last_poll();
        first.is_some()
    });
    wait_until(
        Duration::from_secs(60),
        "a second poll after the restart",
        || last_poll() > first,
    );
    let again = slurm_jobs(addr);
    for (id, kinds, _) in want {
        assert_eq!(again[id].1, kinds, "job {id} after the restart");
    }

    // the backend is up, with the cluster's capacity
    let c = get_json(addr, "/v1/cluster");
    assert_eq!(c["backend"], "slurm", "{c}");
    assert_eq!(c["up"], true, "{c}");
    assert_eq!(c["total_gpus"], 2.0, "{c}");
    drop(server);

    first_start_trains_on_the_accounting_history(&cluster);
    assert!(
        began.elapsed() < Duration::from_secs(400),
        "took {:?}",
        began.elapsed()
    );
}

/// Array tasks the accounting-history phase adds to the five jobs above.
const HISTORY_TASKS: usize = 130;

/// A first start on a cluster whose accounting holds enough finished jobs trains its first
/// models on that history (not the bundled trace) and records the history in its store.
/// The threshold (`min_retrain_jobs`, 200 by default) is lowered to what a test cluster
/// finishes in a minute: 130 array tasks plus the five jobs above (the runtime trainer wants
/// 100 training jobs, the first 80% of the history).
fn first_start_trains_on_the_accounting_history(cluster: &Cluster) {
    let array = cluster.sbatch(&[
        "-J",
        "history",
        "-n",
        "1",
        "-t",
        "1",
        &format!("--array=0-{}", HISTORY_TASKS - 1),
        "--wrap",
        "true",
    ]);
    // every task ended in the accounting (sacct -X: one line per task, none pending/running)
    let submitted = Instant::now();
    wait_until(Duration::from_secs(240), "the array's tasks done", || {
        let out = cluster.run(
            "sacct",
            &["-X", "-n", "-P", "-j", &array, "--format=JobID,State"],
        );
        let states: Vec<&str> = out.lines().filter_map(|l| l.split('|').nth(1)).collect();
        states.len() == HISTORY_TASKS && states.iter().all(|s| *s == "COMPLETED")
    });
    eprintln!(
        "{HISTORY_TASKS} array tasks done in the accounting after {:?}",
        submitted.elapsed()
    );
    let addr = free_addr();
    let data = tempfile::tempdir().unwrap();
    let threshold = HISTORY_TASKS.to_string();
    let _server = start_server_with(
        cluster,
        addr,
        &data.path().join("augur"),
        &[("AUGUR_SERVE_MIN_RETRAIN_JOBS", threshold.as_str())],
    );
    common::trained(addr, common::HISTORY_KINDS);
    let models = get_json(addr, "/v1/models");
    let runtime = models["kinds"]["runtime"]["versions"]
        .as_array()
        .and_then(|v| v.first())
        .cloned()
        .unwrap_or_else(|| panic!("no runtime version in {models}"));
    assert_eq!(runtime["dataset"], "slurm:augurtest", "{runtime}");
    let trained_on = runtime["training_rows"].as_u64().unwrap_or(0) as usize;
    assert!(trained_on >= HISTORY_TASKS * 8 / 10, "{runtime}");
    // the history is in the store: each array task's submit, start and finish
    let jobs = slurm_jobs(addr);
    let tasks: Vec<_> = jobs
        .iter()
        .filter(|(id, _)| id.starts_with(&format!("{array}_")))
        .collect();
    assert_eq!(tasks.len(), HISTORY_TASKS, "{jobs:?}");
    for (id, (_, kinds, status)) in tasks {
        assert_eq!(
            kinds,
            &["job_submitted", "job_started", "job_finished"],
            "{id}"
        );
        assert_eq!(status, "completed", "{id}");
    }
}
