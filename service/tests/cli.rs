//! End-to-end tests of the `augur` command line: run the real binary as a user would.

mod common;

use common::augur;

fn run_ok(args: &[&str]) -> String {
    let out = augur().args(args).output().expect("run augur");
    assert!(
        out.status.success(),
        "augur {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        vec!["--help"],
        vec!["data", "--help"],
        vec!["data", "inspect", "--help"],
        vec!["serve", "--help"],
    ] {
        let out = run_ok(&args);
        assert!(out.contains("Usage:"), "{args:?}: {out}");
    }
}

#[test]
fn inspect_default_reads_the_bundled_philly_trace() {
    let out = run_ok(&["data", "inspect"]);
    assert!(out.contains("[philly]"), "{out}");
    assert!(out.contains("82,247 read, 82,247 kept, 0 dropped"), "{out}");
    assert!(out.contains("GPUs requested"), "{out}");
}

#[test]
fn inspect_json_is_machine_readable() {
    let out = run_ok(&["data", "inspect", "--dataset", "mira", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["kind"], "jobs");
    assert_eq!(v["format"], "swf-alcf");
    assert_eq!(v["report"]["rows_kept"], 22508);
    assert_eq!(v["summary"]["jobs"], 22508);
    // Mira has waits for every job: the wait quantiles exist
    assert!(v["summary"]["queue_wait"]["p50"].as_f64().is_some());
    assert_eq!(v["summary"]["null_share"]["requested_time"], 0.0);
}

#[test]
fn bad_rows_are_reported_with_line_and_reason_and_strict_stops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mini.csv");
    std::fs::write(
        &path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n\
         2017-10-09 07:01:55,66.0,1,66.0,vc1\n\
         2017-10-09 07:02:55,abc,1,66.0,vc1\n\
         not-a-time,10,1,10,vc2\n\
         2017-10-09 07:03:55,-5,1,66.0,vc1\n\
         2017-10-09 07:04:55,70.0,2,140.0,vc2\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let out = run_ok(&["data", "inspect", p]);
    assert!(out.contains("5 read, 2 kept, 3 dropped"), "{out}");
    assert!(
        out.contains("mini.csv:3: field `duration`: not a number (got \"abc\")"),
        "{out}"
    );
    assert!(out.contains("mini.csv:4: field `timestamp`"), "{out}");
    assert!(
        out.contains("mini.csv:5: field `duration`: negative"),
        "{out}"
    );

    let out = augur()
        .args(["data", "inspect", "--strict", p])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mini.csv:3: field `duration`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn unknown_inputs_get_clear_errors() {
    let out = augur()
        .args(["data", "inspect", "/no/such/file.csv"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));

    let out = augur()
        .args(["data", "inspect", "--dataset", "nope"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("known datasets: philly"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weird.csv");
    std::fs::write(&path, "a,b,c\n1,2,3\n").unwrap();
    let out = augur()
        .args(["data", "inspect", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot tell the format") && err.contains("--format"),
        "{err}"
    );

    // a missing trace names the path and says why, once
    let err = run_err(&["evaluate", "--trace", "/no/such/trace.csv", "--no-report"]);
    assert!(err.contains("cannot read /no/such/trace.csv"), "{err}");
    let os_reason = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    let reason = err
        .split(": ")
        .last()
        .unwrap_or_default()
        .trim()
        .to_string();
    assert!(!reason.is_empty() && !os_reason.is_empty(), "{err}");
    assert_eq!(err.matches(&reason).count(), 1, "{err}");
}

#[test]
fn new_subcommands_have_help() {
    for args in [
        vec!["train", "--help"],
        vec!["models", "--help"],
        vec!["models", "list", "--help"],
        vec!["models", "show", "--help"],
        vec!["models", "promote", "--help"],
        vec!["models", "rollback", "--help"],
        vec!["evaluate", "--help"],
    ] {
        let out = run_ok(&args);
        assert!(out.contains("Usage:"), "{args:?}: {out}");
    }
}

fn run_err(args: &[&str]) -> String {
    let out = augur().args(args).output().expect("run augur");
    assert!(!out.status.success(), "augur {args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn train_saves_versions_that_list_show_promote_and_refuse_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("models");
    let r = reg.to_str().unwrap();
    let out = run_ok(&[
        "train",
        "--dataset",
        "mira",
        "--registry",
        r,
        "--trees",
        "25",
    ]);
    assert!(out.contains("saved runtime v1"), "{out}");
    assert!(out.contains("18,006 jobs"), "{out}");

    let out = run_ok(&["models", "list", "--registry", r]);
    assert!(out.contains("runtime models"), "{out}");
    let v1 = out
        .lines()
        .find(|l| l.trim_start().starts_with("v1"))
        .unwrap();
    assert!(v1.contains("mira") && v1.contains("18,006"), "{out}");

    // the stored metrics are real held-out numbers: the model beats the global median
    let out = run_ok(&["models", "list", "--registry", r, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let metrics = &v[0]["versions"][0]["meta"]["metrics"];
    let mae = metrics["mae_log"].as_f64().unwrap();
    let median = metrics["baseline mae_log: global median"].as_f64().unwrap();
    assert!(mae < median - 0.2, "{metrics}");
    assert_eq!(metrics["test_jobs"], 4502.0);
    assert!(v[0]["versions"][0]["meta"]["feature_schema_version"].as_u64() >= Some(1));

    let out = run_ok(&["models", "show", "v1", "--registry", r]);
    assert!(
        out.contains("runtime v1") && out.contains("verified"),
        "{out}"
    );

    // a second training run is v2 and is served; promotion and rollback move the pointer
    let out = run_ok(&[
        "train",
        "--dataset",
        "mira",
        "--registry",
        r,
        "--trees",
        "5",
    ]);
    assert!(out.contains("saved runtime v2"), "{out}");
    let out = run_ok(&["models", "show", "--registry", r]);
    assert!(out.contains("runtime v2"), "{out}");
    run_ok(&["models", "promote", "v1", "--registry", r]);
    let out = run_ok(&["models", "promote", "v2", "--registry", r]);
    assert!(out.contains("serving v2 (promoted before: v1)"), "{out}");
    let out = run_ok(&["models", "rollback", "--registry", r]);
    assert!(out.contains("serving v1"), "{out}");
    let err = run_err(&["models", "rollback", "--registry", r]);
    assert!(err.contains("nothing to roll back to"), "{err}");
    let out = run_ok(&["models", "list", "--registry", r]);
    assert!(out.contains("promoted v1"), "{out}");

    // a flipped byte in the payload: loading refuses it, naming the file and the reason
    let payload = reg.join("runtime/v1/model.json.gz");
    let mut bytes = std::fs::read(&payload).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&payload, &bytes).unwrap();
    let err = run_err(&["models", "show", "v1", "--registry", r]);
    assert!(
        err.contains("runtime/v1/model.json.gz") && err.contains("SHA-256 mismatch"),
        "{err}"
    );
    let out = run_ok(&["models", "list", "--registry", r, "--verify"]);
    assert!(out.contains("unusable") && out.contains("SHA-256"), "{out}");
    // a truncated one too; an unknown version lists what exists
    let payload = reg.join("runtime/v2/model.json.gz");
    let bytes = std::fs::read(&payload).unwrap();
    std::fs::write(&payload, &bytes[..bytes.len() / 3]).unwrap();
    let err = run_err(&["models", "show", "v2", "--registry", r]);
    assert!(err.contains("truncated"), "{err}");
    let err = run_err(&["models", "show", "v9", "--registry", r]);
    assert!(
        err.contains("no version v9") && err.contains("v1, v2"),
        "{err}"
    );
}

/// Checks a PNG file fully decodes and is a real plot: not blank, not one colour.
fn assert_real_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() > 10_000,
        "{}: {} bytes",
        path.display(),
        bytes.len()
    );
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (900, 640));
    let px = &buf[..info.buffer_size()];
    let non_white = px.chunks(3).filter(|p| p != &[255, 255, 255]).count();
    let share = non_white as f64 / (px.len() / 3) as f64;
    assert!(
        (0.02..0.9).contains(&share),
        "{}: {share} non-white",
        path.display()
    );
    // drawn in colour (the model's series), not only black text
    assert!(
        px.chunks(3).any(|p| p[2] > 150 && p[0] < 100),
        "{}",
        path.display()
    );
}

#[test]
fn evaluate_writes_a_report_folder_with_table_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run_ok(&[
        "evaluate",
        "--dataset",
        "mira",
        "--trees",
        "25",
        "--report",
        rep.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(rep.join("mira/report.md")).unwrap();
    // the same rows as printed, as a Markdown table
    let methods: Vec<&str> = out
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim_start().split("  ").next())
        .collect();
    for method in [
        "global median",
        "last-2 mean of same user",
        "LightGBM, stronger (peer)",
    ] {
        assert!(methods.contains(&method), "{methods:?}");
    }
    assert!(
        methods.iter().any(|m| m.contains("online conformal")),
        "{methods:?}"
    );
    for method in &methods {
        assert!(md.contains(&format!("| {method} |")), "{method}: {md}");
    }
    assert!(md.contains("18006 train / 4502 test jobs"), "{md}");
    for png in ["pred_vs_actual.png", "error_cdf.png", "coverage.png"] {
        assert!(md.contains(&format!("]({png})")), "{md}");
        assert_real_png(&rep.join("mira").join(png));
    }
    // ten decile rows of coverage
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| ")
                && l.split('|')
                    .nth(1)
                    .is_some_and(|c| c.trim().parse::<u32>().is_ok()))
            .count(),
        10,
        "{md}"
    );

    // --no-report writes nothing (the default folder would be ./augur-report)
    let out = augur()
        .current_dir(dir.path())
        .args([
            "evaluate",
            "--dataset",
            "mira",
            "--trees",
            "3",
            "--no-report",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!dir.path().join("augur-report").exists());
}

#[test]
fn simulate_compares_policies_on_a_philly_slice() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().to_str().unwrap();
    let out = run_ok(&[
        "simulate", "--trace", "philly", "--limit", "3000", "--gpus", "32", "--trees", "30",
        "--json", "--report", report,
    ]);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["gpus"], 32);
    assert_eq!(v["jobs"], 600, "the test 20% of the slice is replayed");
    assert_eq!(v["predictions"]["predicted_jobs"], 600);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "fifo",
            "sjf-pred",
            "srtf-oracle",
            "tiresias",
            "optimus",
            "elastic"
        ]
    );
    let jct = |name: &str| {
        rows.iter().find(|r| r["policy"] == name).unwrap()["avg_jct"]
            .as_f64()
            .unwrap()
    };
    for r in rows {
        assert_eq!(r["unfinished"], 0, "{r}");
        assert!(r["avg_jct"].as_f64().unwrap() >= r["avg_wait"].as_f64().unwrap());
        assert!(r["utilisation"].as_f64().unwrap() > 0.0);
    }
    assert!(jct("srtf-oracle") <= jct("fifo"));
    assert_eq!(rows[0]["rescales"], 0, "fifo is static");
    assert_eq!(v["versus_fifo"].as_array().unwrap().len(), 5);
    let folder = dir.path().join("simulate-philly-32gpus");
    for f in ["jct_cdf.png", "queue_length.png", "utilisation.png"] {
        assert_real_png(&folder.join(f));
    }
    let md = std::fs::read_to_string(folder.join("summary.md")).unwrap();
    assert!(
        md.contains("srtf-oracle") && md.contains("jct_cdf.png"),
        "{md}"
    );
    // the elastic decision log: rescales, preemptions, and starts away from the request
    let log = std::fs::read_to_string(folder.join("decisions-elastic.jsonl")).unwrap();
    let mut starts = 0;
    for line in log.lines() {
        let d: serde_json::Value = serde_json::from_str(line).unwrap();
        match d["action"].as_str().unwrap() {
            "admit" => {
                starts += 1;
                let why = d["reason"].as_str().unwrap();
                assert!(
                    ["idle_gpus", "start_shrunk", "queue_wait_high"].contains(&why),
                    "an admission at the request is not logged: {line}"
                );
            }
            a => assert!(["set_workers", "suspend"].contains(&a), "{line}"),
        }
    }
    assert!(starts > 0, "no start above or below the request in\n{log}");

    let err = run_err(&["simulate", "--gpus", "8", "--policies", "fifo,lottery"]);
    assert!(err.contains("unknown policy `lottery`"), "{err}");
}

#[test]
fn evaluate_convergence_json_and_report_on_mlperf() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run_ok(&[
        "evaluate",
        "--task",
        "convergence",
        "--json",
        "--trees",
        "60",
        "--report",
        rep.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["task"], "convergence");
    let c = &v["convergence"];
    assert_eq!(c["n_train_runs"], 971);
    assert_eq!(c["n_test_runs"], 243);
    let err = |group: &str, prefix: f64, method: &str| -> f64 {
        c["scores"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["group"] == group && (s["prefix"].as_f64().unwrap() - prefix).abs() < 1e-9)
            .and_then(|s| {
                s["methods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["method"].as_str().unwrap().starts_with(method))
            })
            .and_then(|m| m["median_rel_error"].as_f64())
            .unwrap_or_else(|| panic!("{group} {prefix} {method}"))
    };
    let augur = err("all", 0.5, "augur");
    assert!(augur < err("all", 0.5, "Optimus fit"), "{augur}");
    assert!(augur < err("all", 0.5, "median time-to-train"), "{augur}");
    // per-benchmark groups are there too
    assert!(err("resnet", 0.25, "augur").is_finite());
    assert_eq!(v["team_peers"]["prior_median_time_to_train"][1], 0.569);
    assert_eq!(v["pollux_final_metric"].as_array().unwrap().len(), 3);
    let md = std::fs::read_to_string(rep.join("mlperf-convergence/report.md")).unwrap();
    assert!(md.contains("971 train / 243 test runs"), "{md}");
    for png in ["curve.png", "errors.png"] {
        assert!(md.contains(&format!("]({png})")), "{md}");
        assert_real_png(&rep.join("mlperf-convergence").join(png));
    }
}

#[test]
fn evaluate_failure_json_and_report_on_mlperf() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run_ok(&[
        "evaluate",
        "--task",
        "failure",
        "--dataset",
        "mlperf",
        "--json",
        "--report",
        rep.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["dataset"], "mlperf");
    assert_eq!(v["task"], "failure");
    let f = &v["failure"];
    // 1,239 runs: the one without a run_stop has no outcome and is never labelled
    assert_eq!(f["n_censored"], 1);
    assert_eq!(
        f["n_train"].as_u64().unwrap() + f["n_test"].as_u64().unwrap(),
        1238
    );
    let base = f["base_rate_train"].as_f64().unwrap();
    assert!(base > 0.01 && base < 0.04, "rare class: {base}");
    let rows = f["rows"].as_array().unwrap();
    let methods: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert!(methods.iter().any(|m| m.contains("svm")), "{methods:?}");
    assert!(methods.iter().any(|m| m.contains("gbdt")), "{methods:?}");
    assert!(
        methods.iter().any(|m| m.contains("base rate")),
        "{methods:?}"
    );
    for r in rows {
        for k in ["roc_auc", "pr_auc", "recall_at_10fpr", "brier"] {
            let x = r[k].as_f64().unwrap_or(f64::NAN);
            assert!((0.0..=1.0).contains(&x), "{} {k} = {x}", r["method"]);
        }
    }
    let folder = rep.join("mlperf/failure");
    let md = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(md.contains("| augur gbdt"), "{md}");
    for png in ["roc.png", "pr.png", "reliability.png"] {
        assert_real_png(&folder.join(png));
    }
    // the bundled Philly CSV has no status: a clear error, not a table of NaN
    let err = run_err(&["evaluate", "--task", "failure", "--dataset", "philly"]);
    assert!(err.contains("no status column"), "{err}");
}

#[test]
fn train_failure_and_queue_wait_save_their_own_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("models");
    let r = reg.to_str().unwrap();
    let out = run_ok(&[
        "train",
        "--task",
        "failure",
        "--dataset",
        "mlperf",
        "--registry",
        r,
    ]);
    assert!(out.contains("saved failure v1"), "{out}");
    let out = run_ok(&[
        "train",
        "--task",
        "queue-wait",
        "--dataset",
        "openb",
        "--trees",
        "20",
        "--registry",
        r,
    ]);
    assert!(out.contains("saved queue-wait v1"), "{out}");
    assert!(reg.join("failure/v1/meta.json").is_file());
    assert!(reg.join("queue_wait/v1/meta.json").is_file());
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reg.join("failure/v1/meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["kind"], "failure");
    assert_eq!(meta["dataset"], "mlperf");
    assert!(meta["metrics"]["gbdt roc_auc"].is_number(), "{meta}");
    // `models list` shows each kind's own metrics, not the runtime columns
    let list = run_ok(&["models", "list", "--registry", r]);
    let failure_line = list
        .lines()
        .find(|l| l.trim_start().starts_with("v1") && l.contains("roc_auc="))
        .unwrap_or_else(|| panic!("no failure metrics listed:\n{list}"));
    assert!(failure_line.contains("base_rate_test="), "{list}");
    assert!(
        list.contains("mae_s="),
        "queue-wait metrics listed:\n{list}"
    );
    assert!(!list.contains("-%"), "{list}");
    // no outcomes in the bundled Philly CSV: a clear refusal
    let err = run_err(&[
        "train",
        "--task",
        "failure",
        "--dataset",
        "philly",
        "--registry",
        r,
    ]);
    assert!(err.contains("no job status"), "{err}");
}

#[test]
fn evaluate_dag_json_and_report_on_wfcommons() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run_ok(&[
        "evaluate",
        "--task",
        "dag",
        "--dataset",
        "dag-wfcommons",
        "--json",
        "--epochs",
        "2",
        "--trees",
        "40",
        "--report",
        rep.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["dataset"], "dag-wfcommons");
    // every bundled workflow instance is held out once
    assert_eq!(v["jobs"], 19);
    assert_eq!(v["groups"], 19);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let model = &rows[v["model_row"].as_u64().unwrap() as usize];
    assert!(model["method"].as_str().unwrap().starts_with("augur GRU"));
    for r in rows {
        let m = r["makespan_mae_log"].as_f64().unwrap();
        assert!(m.is_finite() && m >= 0.0, "{r}");
    }
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 19);
    assert!(results
        .iter()
        .all(|r| r["predicted_makespan_s"].as_array().unwrap().len() == 6));
    let md = std::fs::read_to_string(rep.join("dag-wfcommons/report.md")).unwrap();
    assert!(md.contains("](makespan_pred_vs_actual.png)"), "{md}");
    assert_real_png(&rep.join("dag-wfcommons/makespan_pred_vs_actual.png"));
    // an unknown DAG dataset is named
    let err = run_err(&[
        "evaluate",
        "--task",
        "dag",
        "--dataset",
        "dag-nope",
        "--no-report",
    ]);
    assert!(err.contains("dag-nope"), "{err}");
}

/// `augur store check` finds the events a torn write-ahead log lost, `augur store repair`
/// keeps the intact ones and names the lost range, and the repaired store checks sound.
#[test]
fn store_check_and_repair_report_exactly_what_a_torn_log_lost() {
    use augur::serve::state::events::Event;
    use augur::serve::state::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (store, _) = Store::open(&live.join("events.sqlite"), Box::new(|_| Vec::new())).unwrap();
    rt.block_on(async {
        for g in 0..20 {
            let events = (0..50)
                .map(|i| Event::JobStarted {
                    job_id: format!("j{}", g * 50 + i),
                    at: 1.0,
                })
                .collect();
            store.append(events).await.unwrap();
        }
    });
    // what kill -9 leaves, then the WAL cut in half
    let crash = dir.path().join("crash");
    std::fs::create_dir_all(&crash).unwrap();
    for f in ["events.sqlite", "events.sqlite-wal", "events.sqlite.hwm"] {
        std::fs::copy(live.join(f), crash.join(f)).unwrap();
    }
    let wal = crash.join("events.sqlite-wal");
    let len = std::fs::metadata(&wal).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let data_dir = crash.to_str().unwrap();
    let out = augur()
        .args(["store", "check", "--data-dir", data_dir])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a damaged store checks as damaged");
    assert!(
        text.contains("DAMAGE: acknowledged events seq") && text.contains("..=1000"),
        "{text}"
    );
    let text = run_ok(&["store", "repair", "--data-dir", data_dir]);
    assert!(
        text.contains("LOST: seq") && text.contains("..=1000"),
        "{text}"
    );
    assert!(text.contains("the next event gets seq 1001"), "{text}");
    let text = run_ok(&["store", "check", "--data-dir", data_dir]);
    assert!(
        text.contains("recorded loss") && text.contains("sound"),
        "{text}"
    );
}

#[test]
fn timezone_shifts_sacct_local_times() {
    let fixtures = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../datasets/tests/fixtures/sacct"
    );
    let span = |file: &str, zone: &[&str]| {
        let mut args = vec!["data", "inspect", "--json"];
        args.extend_from_slice(zone);
        let path = format!("{fixtures}/{file}");
        args.push(&path);
        let v: serde_json::Value = serde_json::from_str(&run_ok(&args)).expect("JSON");
        v["summary"]["submit_span"][0]
            .as_f64()
            .expect("a first submit")
    };
    // the same jobs captured with the cluster in UTC and in New York (UTC-5 in November)
    let utc = span("real-finished.txt", &[]);
    assert_eq!(utc, 1_795_417_998.0); // 2026-11-23T07:13:18Z
    assert_eq!(span("real-finished.txt", &["--timezone", "UTC"]), utc);
    let ny = "real-finished-new-york.txt";
    assert_eq!(span(ny, &["--timezone", "America/New_York"]), utc);
    assert_eq!(span(ny, &["--timezone", "-05:00"]), utc);
    assert_eq!(span(ny, &[]), utc - 5.0 * 3600.0);
    // train and evaluate take it too; a bad zone is named
    let err = run_err(&[
        "evaluate",
        "--trace",
        &format!("{fixtures}/{ny}"),
        "--timezone",
        "Mars/Olympus",
    ]);
    assert!(
        err.contains("--timezone") && err.contains("Mars/Olympus"),
        "{err}"
    );
}

#[test]
fn serve_with_the_slurm_backend_needs_a_reachable_slurm() {
    // an empty slurm.conf: scontrol refuses it at once (a missing one it retries for 60 s)
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "").unwrap();
    let out = augur()
        .args(["serve", "--backend", "slurm", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("SLURM_CONF", &conf)
        .output()
        .expect("run augur");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--backend slurm: cannot ask Slurm for the cluster's name"),
        "{err}"
    );
    // nothing was claimed for a cluster it could not name
    assert!(!dir.path().join("data/identity.json").exists());
    let err = run_err(&["serve", "--backend", "slurm", "--slurm-poll-seconds", "0"]);
    assert!(err.contains("slurm_poll_seconds"), "{err}");
}

/// Runs `augur ARGS` as the only child of a `python3` that reports the child's peak resident
/// memory (`getrusage(RUSAGE_CHILDREN).ru_maxrss`): (exited 0, stderr, peak bytes).
fn run_measured(args: &[&str]) -> (bool, String, u64) {
    const MEASURE: &str = "import resource, subprocess, sys\n\
        r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n\
        sys.stderr.buffer.write(r.stderr)\n\
        print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let out = std::process::Command::new("python3")
        .args(["-c", MEASURE, env!("CARGO_BIN_EXE_augur")])
        .args(args)
        .env("AUGUR_DATA_DIR", common::DATA)
        .output()
        .expect("python3 (it measures the peak memory)");
    let report = String::from_utf8_lossy(&out.stdout);
    let mut words = report.split_whitespace();
    let code: i32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .expect("exit code");
    let kib: u64 = words.next().and_then(|w| w.parse().ok()).expect("peak");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (code == 0, stderr, kib * 1024)
}

const MIB: u64 = 1 << 20;

/// A JSON input of hundreds of megabytes on one line (the prefix each JSON format expects,
/// then a 300 MB string), or a gzip of 400 MB of spaces: every JSON reader refuses it at
/// its record bound, naming the file and the byte offset, and `augur data inspect`'s peak
/// memory stays far below the input's size (and within 64 MiB of reading the bundled
/// 12 MB TPC-H file, its peer in the same run). Reading the whole file first took 2 GB.
#[test]
fn huge_json_inputs_are_refused_in_bounded_memory() {
    use std::io::{Seek, SeekFrom, Write};
    let (ok, err, peer) = run_measured(&[
        "data",
        "inspect",
        "--format",
        "tpch-dags",
        &format!("{}/dag-tpch/tpch_dags.json.gz", common::DATA),
    ]);
    assert!(ok, "{err}");
    eprintln!(
        "peak memory reading the bundled TPC-H DAGs: {} MiB",
        peer / MIB
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-line.json");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    f.write_all(&[b' '; 64]).unwrap();
    let chunk = vec![b'a'; MIB as usize];
    for _ in 0..300 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}]}}}").unwrap();
    let mut f = f.into_inner().unwrap();
    let size = 64 + 300 * MIB + 6;
    for (format, prefix) in [
        ("tpch-dags", r#"{"2g": {"q1": {"adj": ""#),
        (
            "wfcommons",
            r#"{"workflow": {"specification": {"tasks": [{"name": ""#,
        ),
        ("gavel", r#"{"V100": {"('A', 1)": {"null": ""#),
        ("node-faults", r#"[{"node_id": ""#),
        ("fault-statistics", r#"{"Hardware": {"GPU": {"Xid": ""#),
    ] {
        // the prefix, padded with spaces before its last `"` to the 64 bytes reserved
        let mut head = prefix[..prefix.len() - 1].to_string();
        head.push_str(&" ".repeat(63 - head.len()));
        head.push('"');
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(head.as_bytes()).unwrap();
        f.flush().unwrap();
        let (ok, err, peak) = run_measured(&[
            "data",
            "inspect",
            "--format",
            format,
            path.to_str().unwrap(),
        ]);
        eprintln!(
            "{format}: a {} MiB line refused at peak {} MiB: {}",
            size / MIB,
            peak / MIB,
            err.trim()
        );
        assert!(!ok, "{format}: {err}");
        assert!(err.contains("one-line.json"), "{format}: {err}");
        assert!(err.contains("longer than 4194304 bytes"), "{format}: {err}");
        assert!(err.contains("starting at byte"), "{format}: {err}");
        assert!(!err.contains("panicked"), "{format}: {err}");
        assert!(peak < size / 3, "{format}: peak {} MiB", peak / MIB);
        assert!(peak < peer + 64 * MIB, "{format}: peak {} MiB", peak / MIB);
    }
    drop(f);
    std::fs::remove_file(&path).unwrap();

    // 400 MB of spaces in a 0.4 MB gzip
    let bomb = dir.path().join("spaces.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&bomb).unwrap(),
        flate2::Compression::fast(),
    );
    let spaces = vec![b' '; MIB as usize];
    for _ in 0..400 {
        gz.write_all(&spaces).unwrap();
    }
    gz.write_all(b"[]").unwrap();
    gz.finish().unwrap();
    for format in ["tpch-dags", "node-faults"] {
        let (ok, err, peak) = run_measured(&[
            "data",
            "inspect",
            "--format",
            format,
            bomb.to_str().unwrap(),
        ]);
        eprintln!(
            "{format}: 400 MiB of gzipped spaces refused at peak {} MiB: {}",
            peak / MIB,
            err.trim()
        );
        assert!(!ok, "{format}: {err}");
        assert!(err.contains("spaces.json.gz"), "{format}: {err}");
        assert!(err.contains("starting at byte 0"), "{format}: {err}");
        assert!(peak < peer + 64 * MIB, "{format}: peak {} MiB", peak / MIB);
    }
}

/// A truncated gzip (a download cut short) fails the read naming the file and why, with a
/// non-zero exit, in every reader: not "1 dropped row" with half a trace used.
#[test]
fn a_truncated_gzip_trace_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (bundled, name) in [
        ("philly/philly.csv.gz", "cut-philly.csv.gz"),
        ("swf/nasa-ipsc-1993.swf.gz", "cut-nasa.swf.gz"),
        ("dag-tpch/tpch_dags.json.gz", "cut-tpch_dags.json.gz"),
    ] {
        let gz = std::fs::read(format!("{}/{bundled}", common::DATA)).unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
        let out = augur()
            .args(["data", "inspect", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(err.contains(name), "{name}: {err}");
        assert!(err.contains("truncated gzip stream"), "{name}: {err}");
    }
}

#[test]
fn data_fit_inputs_writes_the_queue_wait_median_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fit");
    let o = augur()
        .args(["data", "fit-inputs", "--dataset", "openb", "--out"])
        .arg(&out)
        .output()
        .expect("run augur");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("validation rows"), "{err}");
    let inputs = augur_models::gbdt::FitInputs::read(&out).unwrap();
    assert!(inputs.fit_rows() > 500 && inputs.valid_rows() > 50);
    assert!(inputs.columns.iter().any(|c| c.starts_with("queue:")));
    assert_eq!(inputs.params.objective, augur_models::gbdt::Objective::L1);
    let model = inputs.fit(&mut |_, _| {}).unwrap();
    assert!(model.n_trees() > 0);
    // the bound's inputs: the same rows, the 95% quantile
    let bound = dir.path().join("bound");
    run_ok(&[
        "data",
        "fit-inputs",
        "--dataset",
        "openb",
        "--model",
        "bound",
        "--out",
        bound.to_str().unwrap(),
    ]);
    let b = augur_models::gbdt::FitInputs::read(&bound).unwrap();
    assert_eq!(
        b.params.objective,
        augur_models::gbdt::Objective::Quantile { alpha: 0.95 }
    );
    assert_eq!(
        (b.fit_rows(), b.valid_rows()),
        (inputs.fit_rows(), inputs.valid_rows())
    );
    // a trace without queue waits: a clear refusal, nothing written
    let none = dir.path().join("none");
    let err = run_err(&[
        "data",
        "fit-inputs",
        "--dataset",
        "philly",
        "--out",
        none.to_str().unwrap(),
    ]);
    assert!(err.contains("queue wait"), "{err}");
    assert!(!none.exists());
}
