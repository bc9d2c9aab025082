//! The manifests in deploy/: validated offline against the Kubernetes OpenAPI schemas (v1.33,
//! strict: unknown fields are errors) with the `kubernetes-validate` tool (PyPI, bundles the
//! schemas; `.ci/run` installs it), and checked against each other and against the code:
//! least-privilege RBAC, the Deployment's probes, security context and data volume, the
//! Service/ServiceMonitor wiring, and a Grafana dashboard that queries only metrics `augur
//! serve` exposes.
//!
//! The ServiceMonitor is a Prometheus Operator CRD, not in the Kubernetes schemas: it is
//! checked structurally here instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .expect("deploy/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

/// Every document of every manifest.
fn documents() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    for p in manifests() {
        let text = std::fs::read_to_string(&p).expect("read manifest");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: not YAML: {e}", p.display()));
        out.extend(docs.into_iter().map(|d| (p.clone(), d)));
    }
    out
}

fn find<'a>(docs: &'a [(PathBuf, Value)], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/"))
}

fn validate(files: &[PathBuf]) -> std::process::Output {
    let run = |cmd: &str, pre: &[&str]| {
        Command::new(cmd)
            .args(pre)
            .args(["--strict", "--kubernetes-version", "1.33.0"])
            .args(files)
            .output()
    };
    // the console script, else the module (a pip install whose scripts are not on PATH)
    run("kubernetes-validate", &[])
        .or_else(|_| run("python3", &["-m", "kubernetes_validate"]))
        .ok()
        .filter(|o| !String::from_utf8_lossy(&o.stderr).contains("No module named"))
        .unwrap_or_else(|| {
            panic!(
                "kubernetes-validate is needed to validate deploy/ offline; install it with `pip install kubernetes-validate` (.ci/run does)"
            )
        })
}

#[test]
fn every_kubernetes_manifest_passes_strict_schema_validation() {
    let core: Vec<PathBuf> = manifests()
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("servicemonitor"))
        .collect();
    assert!(core.len() >= 6, "{core:?}");
    let out = validate(&core);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubernetes-validate failed:\n{text}");
    // one "passed" line per document
    let docs = documents()
        .iter()
        .filter(|(p, _)| !p.to_string_lossy().contains("servicemonitor"))
        .count();
    assert_eq!(text.matches("passed").count(), docs, "{text}");

    // the validator does reject a typo (so the pass above means something)
    let dir = std::env::temp_dir().join(format!("augur-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    let text = std::fs::read_to_string(deploy_dir().join("04-deployment.yaml"))
        .unwrap()
        .replace("readOnlyRootFilesystem", "readOnlyRootFilesytem");
    std::fs::write(&bad, text).unwrap();
    let out = validate(&[bad]);
    assert!(
        !out.status.success(),
        "a misspelt field must fail strict validation"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn rbac_reads_what_is_watched_and_writes_only_scale_and_the_lease() {
    let docs = documents();
    let cr = find(&docs, "ClusterRole", "augur-controller");
    let mut writes = BTreeSet::new();
    let mut reads = BTreeSet::new();
    for rule in cr["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    let v = v.as_str().unwrap();
                    let key = format!("{}/{}", g.as_str().unwrap(), r.as_str().unwrap());
                    if ["get", "list", "watch"].contains(&v) {
                        reads.insert(key);
                    } else {
                        writes.insert(format!("{v} {key}"));
                    }
                }
            }
        }
    }
    assert_eq!(
        writes.into_iter().collect::<Vec<_>>(),
        vec!["patch kubeflow.org/pytorchjobs/scale"]
    );
    for r in [
        "/nodes",
        "/pods",
        "kubeflow.org/pytorchjobs",
        "scheduling.volcano.sh/podgroups",
        "kueue.x-k8s.io/workloads",
    ] {
        assert!(reads.contains(r), "{r} not readable");
    }
    assert!(!cr.to_string().contains('*'), "no wildcards");
    let role = find(&docs, "Role", "augur-leader-election");
    let verbs: BTreeSet<String> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            assert_eq!(r["resources"], serde_json::json!(["leases"]));
            r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(verbs, ["create", "get", "update"].map(String::from).into());
    // the bindings name the service account the Deployment runs as
    let dep = find(&docs, "Deployment", "augur");
    let sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    for (kind, name) in [
        ("ClusterRoleBinding", "augur-controller"),
        ("RoleBinding", "augur-leader-election"),
    ] {
        let b = find(&docs, kind, name);
        assert_eq!(b["subjects"][0]["name"], sa);
        assert_eq!(b["subjects"][0]["namespace"], dep["metadata"]["namespace"]);
    }
    find(&docs, "ServiceAccount", sa);
}

#[test]
fn the_deployment_is_probed_non_root_read_only_and_starts_in_dry_run() {
    let docs = documents();
    let dep = find(&docs, "Deployment", "augur");
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert!(
        c["resources"]["requests"]["cpu"].is_string()
            && c["resources"]["limits"]["memory"].is_string()
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.contains(&"--backend=kubernetes") && args.contains(&"--dry-run"),
        "{args:?}"
    );
    // the data dir is a mounted volume (the root filesystem is read-only)
    let data_dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--data-dir="))
        .expect("--data-dir");
    let mounts = c["volumeMounts"].as_array().unwrap();
    let m = mounts
        .iter()
        .find(|m| m["mountPath"] == data_dir)
        .expect("data dir mounted");
    let vol = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == m["name"])
        .expect("volume");
    let claim = vol["persistentVolumeClaim"]["claimName"]
        .as_str()
        .expect("a PVC");
    find(&docs, "PersistentVolumeClaim", claim);
    // the lease identity comes from the pod name
    assert!(c["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "POD_NAME"));
    // the Service selects the pods and the ServiceMonitor the Service, on a real port name
    let svc = find(&docs, "Service", "augur");
    let labels = &dep["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "Service selector {k}");
    }
    let port = c["ports"][0]["name"].as_str().unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port);
    let sm = find(&docs, "ServiceMonitor", "augur");
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "ServiceMonitor selector {k}"
        );
    }
    assert_eq!(
        sm["spec"]["endpoints"][0]["port"],
        svc["spec"]["ports"][0]["name"]
    );
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    for (p, d) in &docs {
        if d["kind"] != "Namespace"
            && d["kind"] != "ClusterRole"
            && d["kind"] != "ClusterRoleBinding"
        {
            assert_eq!(
                d["metadata"]["namespace"],
                "augur-system",
                "{}",
                p.display()
            );
        }
    }
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_augur_serve_exposes() {
    let metrics_rs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../service/src/serve/metrics.rs");
    let src = std::fs::read_to_string(&metrics_rs).expect("service/src/serve/metrics.rs");
    // metric names in the module's doc table
    let exposed: BTreeSet<String> = src
        .lines()
        .filter(|l| l.starts_with("//! |"))
        .flat_map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|n| n.starts_with("augur_"))
        .collect();
    assert!(exposed.len() >= 8, "{exposed:?}");
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(deploy_dir().join("grafana/augur-dashboard.json")).unwrap(),
    )
    .expect("dashboard JSON");
    let mut used = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("augur_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name)
                    .to_string();
                assert!(
                    exposed.contains(&base),
                    "{name} is not exposed by augur serve ({exposed:?})"
                );
                used.insert(base);
            }
        }
    }
    assert!(
        used.contains("augur_controller_actions_total")
            && used.contains("augur_cluster_utilisation")
    );
    let uids: BTreeSet<i64> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        uids.len(),
        dash["panels"].as_array().unwrap().len(),
        "panel ids unique"
    );
}
