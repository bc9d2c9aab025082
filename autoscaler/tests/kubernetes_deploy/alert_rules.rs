//! The PrometheusRule of deploy/: its groups pass `promtool check rules` and the unit tests
//! in deploy/tests/alerts.yaml (`promtool test rules`), every alert has a test in which it
//! fires, and the rules query only metrics `augur serve` exposes.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::render::{deploy_dir, find, read, render, repo_dir, scratch, text_of};
use crate::service_metrics::{
    documented_metrics, metric_names, metrics_source, registered_metrics, sources,
};

/// The rule groups of the rendered PrometheusRule, as a Prometheus rule file (JSON is YAML).
fn rule_groups() -> Value {
    let docs = render("overlays/single");
    let rule = find(&docs, "PrometheusRule", "augur");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    serde_json::json!({ "groups": rule["spec"]["groups"] })
}

/// Every rule of every group: (alert or record name, expression).
fn rules(groups: &Value) -> Vec<(String, String)> {
    groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap();
            (name.to_string(), r["expr"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let dir = scratch("rules");
    let groups = rule_groups();
    std::fs::write(dir.join("rules.yaml"), groups.to_string()).unwrap();
    let tests = read(&deploy_dir().join("tests/alerts.yaml"));
    std::fs::write(dir.join("alerts.yaml"), &tests).unwrap();
    let promtool = |args: &[&str]| {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap_or_else(|e| {
                panic!("`promtool` is needed ({e}); install it: apt-get install prometheus (scripts/test.sh does)")
            });
        (out.status.success(), text_of(&out))
    };
    let (ok, text) = promtool(&["check", "rules", "rules.yaml"]);
    assert!(ok, "promtool check rules:\n{text}");
    let count = rules(&groups).len();
    assert!(text.contains(&format!("{count} rules found")), "{text}");
    let (ok, text) = promtool(&["test", "rules", "alerts.yaml"]);
    assert!(ok, "promtool test rules:\n{text}");
    assert!(text.contains("SUCCESS"), "{text}");

    // every alert has a unit test that expects it to fire
    let tests: Value = serde_saphyr::from_str(&tests).unwrap();
    let mut firing = BTreeSet::new();
    for t in tests["tests"].as_array().unwrap() {
        for a in t["alert_rule_test"].as_array().unwrap() {
            if a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()) {
                firing.insert(a["alertname"].as_str().unwrap().to_string());
            }
        }
    }
    let alerts: BTreeSet<String> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    assert!(alerts.len() >= 4, "{alerts:?}");
    assert_eq!(firing, alerts, "alerts without a firing unit test");

    // promtool does reject a broken expression (so the pass above means something)
    let broken = groups.to_string().replace(
        "augur_cluster_queue_length[1h]",
        "augur_cluster_queue_length[1h",
    );
    std::fs::write(dir.join("rules.yaml"), broken).unwrap();
    let (ok, _) = promtool(&["check", "rules", "rules.yaml"]);
    assert!(!ok, "a broken expression must fail promtool check rules");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_alert_rules_query_only_metrics_augur_serve_exposes() {
    let src = metrics_source();
    let mut exposed = documented_metrics(&src);
    exposed.extend(registered_metrics(&src));
    for name in [
        "augur_prediction_interval_coverage",
        "augur_controller_actions_total",
        "augur_retrains_total",
    ] {
        assert!(exposed.contains(name), "{name} not found in {exposed:?}");
    }
    let groups = rule_groups();
    let mut used = BTreeMap::new();
    for (rule, expr) in rules(&groups) {
        for name in metric_names(&expr) {
            assert!(
                exposed.contains(&name),
                "{rule}: {name} is not exposed by augur serve ({exposed:?})"
            );
            used.insert(name, rule.clone());
        }
    }
    assert!(used.len() >= 5, "{used:?}");
    // the label values the rules select on are the ones the service records
    let service = sources(&repo_dir().join("service/src"));
    for value in [
        "\"runtime\"",
        "\"queue_wait\"",
        "\"/readyz\"",
        "\"failed\"",
        "\"succeeded\"",
    ] {
        assert!(service.contains(value), "no {value} in the service");
    }
}
