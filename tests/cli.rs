//! End-to-end tests of the `augur` command line: run the real binary as a user would.

use std::process::Command;

fn augur() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_augur"));
    c.env(
        "AUGUR_DATA_DIR",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/data"),
    );
    c
}

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
}
