//! The fake's state ([`FakeApi`]): objects by kind and `namespace/name` with a resource
//! version, the change log watches replay, the requests received and the faults to inject.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::kinds::Kind;
use crate::requests::{Fault, Request};

/// One change of an object, as watches replay it.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub rv: u64,
    pub plural: &'static str,
    pub namespace: Option<String>,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    pub object: Value,
}

/// The server's state.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The current resource version.
    pub rv: u64,
    /// plural → (namespace, name) → object
    pub objects: BTreeMap<&'static str, BTreeMap<(String, String), Value>>,
    pub changes: Vec<Change>,
    /// Watches from below this version get 410.
    pub compacted: u64,
    pub last_rv: BTreeMap<&'static str, u64>,
    pub requests: Vec<Request>,
    pub faults: Vec<Fault>,
    pub served: Vec<Kind>,
    pub uid: u64,
}

/// The fake server.
#[derive(Clone)]
pub struct FakeApi {
    pub addr: SocketAddr,
    pub(crate) state: Arc<Mutex<State>>,
    /// Sends the resource version after every change (open watches wait on it).
    pub(crate) notify: watch::Sender<u64>,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_every: Duration,
}

impl FakeApi {
    /// A kube client talking to this server.
    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().expect("url");
        let mut cfg = kube::Config::new(url);
        cfg.default_namespace = "default".into();
        // the backend's own backoff (with jitter, bounded) is under test, not kube's
        cfg.default_retry = false;
        kube::Client::try_from(cfg).expect("client")
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake api state")
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// Requests whose path ends with `suffix`, as `METHOD path`.
    pub fn requests_to(&self, suffix: &str) -> Vec<Request> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.path.ends_with(suffix))
            .cloned()
            .collect()
    }

    pub fn clear_requests(&self) {
        self.lock().requests.clear();
    }

    pub fn inject(&self, f: Fault) {
        self.lock().faults.push(f);
    }

    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// The current resource version.
    pub fn rv(&self) -> u64 {
        self.lock().rv
    }

    /// The version of the last change of each kind.
    pub fn last_rvs(&self) -> BTreeMap<&'static str, u64> {
        self.lock().last_rv.clone()
    }

    /// Forgets changes up to now: watches from an older version get 410 Expired.
    pub fn compact(&self) {
        let mut s = self.lock();
        s.compacted = s.rv;
        s.changes.clear();
    }

    /// Creates or replaces an object (stamping resourceVersion, uid, creationTimestamp).
    pub fn put(&self, kind: Kind, mut obj: Value) -> u64 {
        let rv = {
            let mut s = self.lock();
            s.rv += 1;
            s.uid += 1;
            let rv = s.rv;
            let uid = s.uid;
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let name = obj["metadata"]["name"].as_str().expect("name").to_string();
            let existing = s
                .objects
                .get(kind.plural)
                .and_then(|m| m.get(&(ns.clone(), name.clone())))
                .cloned();
            obj["apiVersion"] = json!(kind.api_version());
            obj["kind"] = json!(kind.kind);
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            match &existing {
                Some(old) => {
                    obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
                    if obj["metadata"].get("creationTimestamp").is_none() {
                        obj["metadata"]["creationTimestamp"] =
                            old["metadata"]["creationTimestamp"].clone();
                    }
                }
                None => {
                    obj["metadata"]["uid"] = json!(format!("uid-{uid}"));
                    if obj["metadata"].get("creationTimestamp").is_none() {
                        obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                    }
                }
            }
            s.objects
                .entry(kind.plural)
                .or_default()
                .insert((ns.clone(), name), obj.clone());
            s.changes.push(Change {
                rv,
                plural: kind.plural,
                namespace: kind.namespaced.then_some(ns),
                kind: if existing.is_some() {
                    "MODIFIED"
                } else {
                    "ADDED"
                },
                object: obj,
            });
            s.last_rv.insert(kind.plural, rv);
            rv
        };
        self.notify.send_replace(rv);
        rv
    }

    /// Deletes an object.
    pub fn delete(&self, kind: Kind, ns: &str, name: &str) -> Option<Value> {
        let (rv, obj) = {
            let mut s = self.lock();
            let mut obj = s
                .objects
                .get_mut(kind.plural)
                .and_then(|m| m.remove(&(ns.to_string(), name.to_string())))?;
            s.rv += 1;
            let rv = s.rv;
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            s.changes.push(Change {
                rv,
                plural: kind.plural,
                namespace: kind.namespaced.then(|| ns.to_string()),
                kind: "DELETED",
                object: obj.clone(),
            });
            s.last_rv.insert(kind.plural, rv);
            (rv, obj)
        };
        self.notify.send_replace(rv);
        Some(obj)
    }

    pub fn get(&self, kind: Kind, ns: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(kind.plural)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    pub fn list(&self, kind: Kind) -> Vec<Value> {
        self.lock()
            .objects
            .get(kind.plural)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Records a request and takes the first injected fault matching it (counting it used).
    pub(crate) fn record(&self, request: Request) -> Option<Fault> {
        let mut s = self.lock();
        let hit = s.faults.iter().position(|f| {
            f.times > 0
                && f.method == request.method
                && request.path.ends_with(&f.path_suffix)
                && request.query.contains(&f.query_contains)
        });
        s.requests.push(request);
        hit.map(|i| {
            s.faults[i].times -= 1;
            let f = s.faults[i].clone();
            if s.faults[i].times == 0 {
                s.faults.remove(i);
            }
            f
        })
    }

    /// The served kind with this group, version and plural.
    pub(crate) fn served(&self, group: &str, version: &str, plural: &str) -> Option<Kind> {
        self.lock()
            .served
            .iter()
            .find(|k| k.plural == plural && k.group == group && k.version == version)
            .copied()
    }
}
