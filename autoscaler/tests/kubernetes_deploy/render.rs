//! Rendering deploy/ with `kubectl kustomize` into documents, finding resources in them, and
//! validating them with `kubernetes-validate`; the paths and tools the tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Every kustomization that must render.
pub const KUSTOMIZATIONS: [&str; 4] =
    ["base", "overlays/single", "overlays/dry-run", "overlays/ha"];

pub fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn deploy_dir() -> PathBuf {
    repo_dir().join("deploy")
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh scratch folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("augur-deploy-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a tool the tests need; a tool that is not installed fails the test naming it.
pub fn run_tool(cmd: &str, args: &[&str], install: &str) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`{cmd}` is needed ({e}); install it: {install}"))
}

pub fn text_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// One rendered document: its YAML as kustomize printed it, and its value.
pub struct Doc {
    pub yaml: String,
    pub value: Value,
}

impl Doc {
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }
    /// A Prometheus Operator resource (not in the Kubernetes schemas).
    pub fn is_prometheus_operator(&self) -> bool {
        self.value["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("monitoring.coreos.com/"))
    }
}

/// `kubectl kustomize deploy/<kustomization>`, split into documents.
pub fn render(kustomization: &str) -> Vec<Doc> {
    let dir = deploy_dir().join(kustomization);
    let out = run_tool(
        "kubectl",
        &["kustomize", dir.to_str().unwrap()],
        "kubectl (its built-in kustomize renders deploy/; Debian/Ubuntu: the kubectl package)",
    );
    assert!(
        out.status.success(),
        "kubectl kustomize {kustomization} failed:\n{}",
        text_of(&out)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in text.lines().chain(std::iter::once("---")) {
        if line == "---" {
            if !current.trim().is_empty() {
                let value: Value = serde_saphyr::from_str(&current)
                    .unwrap_or_else(|e| panic!("{kustomization}: not YAML: {e}\n{current}"));
                docs.push(Doc {
                    yaml: std::mem::take(&mut current),
                    value,
                });
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    docs
}

pub fn find<'a>(docs: &'a [Doc], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .map(|d| &d.value)
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered manifests"))
}

pub fn container(docs: &[Doc]) -> &Value {
    &find(docs, "Deployment", "augur")["spec"]["template"]["spec"]["containers"][0]
}

pub fn args(docs: &[Doc]) -> Vec<String> {
    container(docs)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

pub fn env_var<'a>(docs: &'a [Doc], name: &str) -> Option<&'a Value> {
    container(docs)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
}

pub fn validate(files: &[PathBuf]) -> Output {
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
                "kubernetes-validate is needed to validate deploy/ offline; install it with `pip install kubernetes-validate` (scripts/test.sh does)"
            )
        })
}

/// Writes the documents the Kubernetes schemas cover into one multi-document file.
pub fn write_core(docs: &[Doc], path: &Path) -> usize {
    let core: Vec<&str> = docs
        .iter()
        .filter(|d| !d.is_prometheus_operator())
        .map(|d| d.yaml.as_str())
        .collect();
    std::fs::write(path, core.join("---\n")).unwrap();
    core.len()
}
