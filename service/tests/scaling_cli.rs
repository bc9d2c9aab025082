//! End-to-end test of `augur evaluate --task scaling`: the real binary's held-out scaling
//! table on the bundled MLPerf v1.0 runs.

mod common;

use common::augur;

#[test]
fn evaluate_scaling_json_beats_the_naive_assumptions() {
    let out = augur()
        .args(["evaluate", "--task", "scaling", "--json"])
        .output()
        .expect("run augur");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["task"], "scaling");
    let s = &v["scaling"];
    assert_eq!(s["size_beats_naive"], true);
    let rows = s["rows"].as_array().expect("rows");
    let find = |subset: &str, method: &str| -> &serde_json::Value {
        rows.iter()
            .find(|r| r["subset"] == subset && r["method"] == method)
            .unwrap_or_else(|| panic!("no row {subset} / {method}"))
    };
    let model = find("size: all pairs", "model");
    let linear = find("size: all pairs", "linear speedup");
    let m = model["stats"]["median_abs_log"].as_f64().unwrap();
    let l = linear["stats"]["median_abs_log"].as_f64().unwrap();
    assert!(m < l, "model {m} vs linear {l}");
    assert!(model["stats"]["pairs"].as_u64().unwrap() >= 30);
    let cov = model["coverage_80"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&cov), "{cov}");
    // Every held-out pair carries the model's answer and what it rests on.
    let pairs = s["pairs"].as_array().unwrap();
    assert!(pairs
        .iter()
        .all(|p| p["source"].is_string() && p["ratio"].as_f64().unwrap() > 0.0));

    // The text table names the verdict; a trace is refused with a clear message.
    let text = augur()
        .args(["evaluate", "--task", "scaling"])
        .output()
        .expect("run augur");
    assert!(String::from_utf8_lossy(&text.stdout).contains("beats linear and no speedup"));
    let bad = augur()
        .args(["evaluate", "--task", "scaling", "--trace", "x.csv"])
        .output()
        .expect("run augur");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--trace is not supported"));
}
