//! The kustomize tree in deploy/ (base, overlays/single, overlays/dry-run, overlays/ha), the container
//! image (Dockerfile) and the alerting rules, checked offline:
//! - every overlay renders with `kubectl kustomize` and validates against the Kubernetes
//!   OpenAPI schemas (v1.33, strict: unknown fields are errors) with `kubernetes-validate`
//!   (PyPI, bundles the schemas);
//! - the rendered manifests are checked against each other and against the code:
//!   least-privilege RBAC, the Deployment's probes, security context, data volume, token
//!   Secret and log filter, the Service/ServiceMonitor wiring, the image's user and paths;
//! - the PrometheusRule's groups pass `promtool check rules` and the unit tests in
//!   deploy/tests/alerts.yaml (`promtool test rules`), and the rules and the Grafana
//!   dashboard query only metrics `augur serve` exposes.
//!
//! The tools are required (`scripts/test.sh` installs them): a missing one fails the test naming it.
//! The ServiceMonitor and PrometheusRule are Prometheus Operator CRDs, not in the Kubernetes
//! schemas: they are checked structurally and with promtool instead.

#[path = "kubernetes_deploy/alert_rules.rs"]
mod alert_rules;
#[path = "kubernetes_deploy/render.rs"]
mod render;
#[path = "kubernetes_deploy/service_metrics.rs"]
mod service_metrics;

use std::collections::BTreeSet;

use serde_json::Value;

use render::{
    args, container, deploy_dir, env_var, find, read, render, repo_dir, scratch, text_of, validate,
    write_core, Doc, KUSTOMIZATIONS,
};
use service_metrics::{documented_metrics, metric_names, metrics_source, sources};

#[test]
fn every_overlay_renders_and_passes_strict_schema_validation() {
    let dir = scratch("validate");
    for k in KUSTOMIZATIONS {
        let docs = render(k);
        let file = dir.join(format!("{}.yaml", k.replace('/', "-")));
        let count = write_core(&docs, &file);
        assert!(count >= 8, "{k}: {count} documents");
        let out = validate(std::slice::from_ref(&file));
        let text = text_of(&out);
        assert!(
            out.status.success(),
            "{k}: kubernetes-validate failed:\n{text}"
        );
        // one "passed" line per document
        assert_eq!(text.matches("passed").count(), count, "{k}: {text}");
        let kinds: BTreeSet<&str> = docs.iter().map(Doc::kind).collect();
        for kind in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment",
            "Service",
            "ServiceMonitor",
            "PrometheusRule",
        ] {
            assert!(kinds.contains(kind), "{k}: no {kind} ({kinds:?})");
        }
        assert_eq!(
            kinds.contains("PersistentVolumeClaim"),
            k != "base" && k != "overlays/ha",
            "{k}: the single-replica overlays add the PVC, the base and HA have none"
        );
    }

    // the validator does reject a typo (so the passes above mean something)
    let docs = render("overlays/single");
    let bad = dir.join("bad.yaml");
    write_core(&docs, &bad);
    let text = read(&bad).replace("readOnlyRootFilesystem", "readOnlyRootFilesytem");
    std::fs::write(&bad, text).unwrap();
    let out = validate(&[bad]);
    assert!(
        !out.status.success(),
        "a misspelt field must fail strict validation"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn rbac_reads_what_is_watched_and_writes_scale_annotations_events_and_the_lease() {
    let docs = render("overlays/single");
    let cr = find(&docs, "ClusterRole", "augur-controller");
    // every (verb, group/resource) the ClusterRole grants, exactly
    let mut granted = BTreeSet::new();
    for rule in cr["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    let key = format!("{}/{}", g.as_str().unwrap(), r.as_str().unwrap());
                    granted.insert(format!("{} {key}", v.as_str().unwrap()));
                }
            }
        }
    }
    let watched = [
        "/nodes",
        "/pods",
        "batch/jobs",
        "kubeflow.org/pytorchjobs",
        "kueue.x-k8s.io/workloads",
        "scheduling.volcano.sh/podgroups",
        "trainer.kubeflow.org/trainjobs",
    ];
    let mut want: BTreeSet<String> = watched
        .iter()
        .flat_map(|r| ["get", "list", "watch"].map(|v| format!("{v} {r}")))
        .collect();
    want.extend(
        [
            "create /events",
            // prediction annotations; a Job's also spec.parallelism of running elastic Kueue jobs
            "patch batch/jobs",
            "patch kubeflow.org/pytorchjobs",
            "patch kueue.x-k8s.io/workloads",
            "patch trainer.kubeflow.org/trainjobs",
            // read before each resize of a PyTorchJob
            "get kubeflow.org/pytorchjobs/scale",
            "patch kubeflow.org/pytorchjobs/scale",
        ]
        .map(String::from),
    );
    assert_eq!(granted, want);
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
    let docs = render("overlays/dry-run");
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
    let args = args(&docs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
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
    for d in &docs {
        let d = &d.value;
        if d["kind"] != "Namespace"
            && d["kind"] != "ClusterRole"
            && d["kind"] != "ClusterRoleBinding"
        {
            assert_eq!(
                d["metadata"]["namespace"], "augur-system",
                "{} {}",
                d["kind"], d["metadata"]["name"]
            );
        }
    }
}

/// A document with the `--dry-run` argument taken out of the Deployment.
fn without_dry_run(d: &Value) -> Value {
    let mut d = d.clone();
    if d["kind"] == "Deployment" {
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array_mut()
            .unwrap();
        args.retain(|a| a != "--dry-run");
    }
    d
}

#[test]
fn the_overlays_set_the_volume_image_replicas_token_log_filter_and_prometheus_label() {
    let base = render("base");
    let single = render("overlays/single");
    let dry = render("overlays/dry-run");

    // dry-run is single plus --dry-run, nothing else; single acts
    assert!(!args(&single).contains(&"--dry-run".to_string()));
    let values = |docs: &[Doc]| docs.iter().map(|d| d.value.clone()).collect::<Vec<_>>();
    assert_eq!(
        values(&single),
        dry.iter()
            .map(|d| without_dry_run(&d.value))
            .collect::<Vec<_>>()
    );

    // single: one replica, replaced (not rolled) on update, the data volume on the PVC
    let dep = find(&single, "Deployment", "augur");
    assert_eq!(dep["spec"]["replicas"], 1);
    assert_eq!(dep["spec"]["strategy"]["type"], "Recreate");
    let volumes = |docs: &[Doc]| {
        find(docs, "Deployment", "augur")["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "data")
            .unwrap()
            .clone()
    };
    assert_eq!(
        volumes(&single),
        serde_json::json!({"name": "data", "persistentVolumeClaim": {"claimName": "augur-data"}})
    );
    assert_eq!(
        volumes(&base),
        serde_json::json!({"name": "data", "emptyDir": {}})
    );

    // the image comes from the overlay's `images:` (the base names the placeholder `augur`)
    assert_eq!(container(&base)["image"], "augur");
    let kustomization: Value = serde_saphyr::from_str(&read(
        &deploy_dir().join("overlays/single/kustomization.yaml"),
    ))
    .unwrap();
    let image = &kustomization["images"][0];
    assert_eq!(image["name"], "augur");
    assert_eq!(
        container(&single)["image"],
        format!(
            "{}:{}",
            image["newName"].as_str().unwrap(),
            image["newTag"].as_str().unwrap()
        )
    );

    for docs in [&base, &single, &dry] {
        // the log filter is the variable the binary reads
        assert!(env_var(docs, "RUST_LOG").is_none());
        assert!(env_var(docs, "AUGUR_LOG").is_some());
        // the API token from a Secret, optional (augur generates one into the volume)
        let token = env_var(docs, "AUGUR_SERVE_TOKEN").expect("AUGUR_SERVE_TOKEN");
        let secret = &token["valueFrom"]["secretKeyRef"];
        assert_eq!(secret["name"], "augur-api-token");
        assert_eq!(secret["key"], "token");
        assert_eq!(secret["optional"], true);
    }
    let service_src = sources(&repo_dir().join("service/src"));
    assert!(
        service_src.contains("try_from_env(\"AUGUR_LOG\")")
            && service_src.contains("\"AUGUR_SERVE_TOKEN\""),
        "augur no longer reads AUGUR_LOG / AUGUR_SERVE_TOKEN"
    );

    // the label Prometheus selects ServiceMonitors and PrometheusRules by
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert_eq!(
            find(&single, kind, "augur")["metadata"]["labels"]["release"],
            "kube-prometheus-stack",
            "{kind}"
        );
        assert!(find(&base, kind, "augur")["metadata"]["labels"]["release"].is_null());
    }
}

/// The value after `prefix` on the Dockerfile line that starts with it.
fn dockerfile_line<'a>(dockerfile: &'a str, prefix: &str) -> &'a str {
    dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in the Dockerfile"))
        .trim()
}

#[test]
fn the_image_runs_as_the_deployment_user_with_the_data_where_both_expect_it() {
    let dockerfile = read(&repo_dir().join("Dockerfile"));
    let docs = render("overlays/single");
    let pod = &find(&docs, "Deployment", "augur")["spec"]["template"]["spec"];
    let (uid, gid) = dockerfile_line(&dockerfile, "USER ")
        .split_once(':')
        .expect("USER uid:gid");
    assert_eq!(pod["securityContext"]["runAsUser"].to_string(), uid);
    assert_eq!(pod["securityContext"]["runAsGroup"].to_string(), gid);
    assert_ne!(uid, "0");

    // the bundled data lands where the binary looks for it
    let datasets = dockerfile_line(&dockerfile, "COPY datasets/data/ ");
    assert_eq!(
        datasets.trim_end_matches('/'),
        augur_datasets::bundled::INSTALL_DIR
    );

    // the image's volume is the Deployment's --data-dir and the CMD's
    let volume = dockerfile_line(&dockerfile, "VOLUME ");
    let volume: Vec<String> = serde_json::from_str(volume).expect("VOLUME [\"...\"]");
    let data_dir = format!("--data-dir={}", volume[0]);
    assert!(args(&docs).contains(&data_dir), "{:?}", args(&docs));
    let cmd: Vec<String> = serde_json::from_str(dockerfile_line(&dockerfile, "CMD ")).unwrap();
    assert_eq!(cmd[0], "serve");
    assert!(cmd.contains(&data_dir), "{cmd:?}");
    assert_eq!(args(&docs)[0], "serve");
    let entrypoint: Vec<String> =
        serde_json::from_str(dockerfile_line(&dockerfile, "ENTRYPOINT ")).unwrap();
    assert_eq!(entrypoint, ["augur"]);
    assert!(dockerfile_line(&dockerfile, "ENV ").starts_with("AUGUR_LOG="));
    assert!(!dockerfile.contains("RUST_LOG"));

    // scripts/image-layout.sh lays out the same paths and user
    let script = read(&repo_dir().join("scripts/image-layout.sh"));
    for (var, value) in [
        ("DATASETS", datasets.trim_end_matches('/')),
        ("DATA", volume[0].as_str()),
        ("UID_GID", uid),
    ] {
        assert!(
            script.lines().any(|l| l == format!("{var}={value}")),
            "scripts/image-layout.sh: {var}={value}"
        );
    }
    let dockerignore = read(&repo_dir().join(".dockerignore"));
    assert!(dockerignore.lines().any(|l| l == "target/"));
    assert!(
        !dockerignore.lines().any(|l| l.starts_with("datasets")),
        "the bundled data must stay in the build context"
    );
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_augur_serve_exposes() {
    let exposed = documented_metrics(&metrics_source());
    assert!(exposed.len() >= 8, "{exposed:?}");
    let dash: Value =
        serde_json::from_str(&read(&deploy_dir().join("grafana/augur-dashboard.json")))
            .expect("dashboard JSON");
    let mut used = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            for name in metric_names(t["expr"].as_str().unwrap()) {
                assert!(
                    exposed.contains(&name),
                    "{name} is not exposed by augur serve ({exposed:?})"
                );
                used.insert(name);
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

#[test]
fn the_ha_overlay_runs_two_replicas_on_the_store_secret_without_a_volume_claim() {
    let ha = render("overlays/ha");
    let single = render("overlays/single");
    let dep = find(&ha, "Deployment", "augur");
    assert_eq!(dep["spec"]["replicas"], 2);
    // rolled one at a time, never below the two serving replicas
    assert_eq!(dep["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    // the store from a Secret, required; never a literal argument (it holds the password)
    let store = env_var(&ha, "AUGUR_SERVE_STORE").expect("AUGUR_SERVE_STORE");
    let secret = &store["valueFrom"]["secretKeyRef"];
    assert_eq!(secret["name"], "augur-store");
    assert_eq!(secret["key"], "url");
    assert_ne!(secret["optional"], true);
    assert!(!args(&ha).iter().any(|a| a.starts_with("--store")));
    assert!(sources(&repo_dir().join("service/src")).contains("\"AUGUR_SERVE_STORE\""));
    // the token is required: a generated one would differ between the replicas
    let token = env_var(&ha, "AUGUR_SERVE_TOKEN").expect("AUGUR_SERVE_TOKEN");
    assert_eq!(
        token["valueFrom"]["secretKeyRef"]["name"],
        "augur-api-token"
    );
    assert_eq!(token["valueFrom"]["secretKeyRef"]["optional"], false);
    // no claim: the data folder (models, switches) is per pod
    assert!(ha.iter().all(|d| d.kind() != "PersistentVolumeClaim"));
    let data = dep["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "data")
        .unwrap()
        .clone();
    assert_eq!(data, serde_json::json!({"name": "data", "emptyDir": {}}));
    // a drain keeps one replica; it selects the Deployment's pods
    let pdb = find(&ha, "PodDisruptionBudget", "augur");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let labels = &dep["spec"]["template"]["metadata"]["labels"];
    for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "PodDisruptionBudget selector {k}");
    }
    // everything else as in the single-replica overlay: RBAC, Service, monitoring
    for (kind, name) in [
        ("ClusterRole", "augur-controller"),
        ("Role", "augur-leader-election"),
        ("Service", "augur"),
        ("ServiceMonitor", "augur"),
        ("PrometheusRule", "augur"),
    ] {
        assert_eq!(find(&ha, kind, name), find(&single, kind, name), "{kind}");
    }
}
