//! A wire-level fake Kubernetes API server on loopback (axum), for the Kubernetes backend's
//! tests. It speaks the JSON of the real API: lists (`metadata.resourceVersion`), watches as
//! newline-delimited `WatchEvent`s resumed from a `resourceVersion`, with `BOOKMARK`s when asked
//! and `410 Expired` for a compacted version; GET/PATCH of a `PyTorchJob`'s `/scale`
//! (merge patch, `resourceVersion` precondition → 409); `Lease` get/create/replace. Objects
//! are built from k8s-openapi types where they exist. Faults (status codes, delays) can be
//! injected per request, and every request is recorded so tests can assert what the backend
//! sent.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};
use tokio::sync::watch;

/// A served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// Plural (the collection's path segment), also the key of the store.
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Kind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

pub const NODES: Kind = Kind {
    plural: "nodes",
    group: "",
    version: "v1",
    kind: "Node",
    namespaced: false,
};
pub const PODS: Kind = Kind {
    plural: "pods",
    group: "",
    version: "v1",
    kind: "Pod",
    namespaced: true,
};
pub const JOBS: Kind = Kind {
    plural: "pytorchjobs",
    group: "kubeflow.org",
    version: "v1",
    kind: "PyTorchJob",
    namespaced: true,
};
pub const PODGROUPS: Kind = Kind {
    plural: "podgroups",
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    kind: "PodGroup",
    namespaced: true,
};
pub const WORKLOADS: Kind = Kind {
    plural: "workloads",
    group: "kueue.x-k8s.io",
    version: "v1beta1",
    kind: "Workload",
    namespaced: true,
};
pub const LEASES: Kind = Kind {
    plural: "leases",
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    namespaced: true,
};

/// A request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub body: Option<Value>,
}

/// A fault answered instead of the real response to matching requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub method: &'static str,
    /// Matches when the path ends with this.
    pub path_suffix: String,
    /// Error status to answer (`None`: answer normally after the delay).
    pub status: Option<u16>,
    /// Wait this long first.
    pub delay: Duration,
    /// `Retry-After` seconds in the error's details.
    pub retry_after_s: u32,
    /// Requests it still applies to.
    pub times: u32,
    /// Matches only requests whose query contains this.
    pub query_contains: String,
}

impl Fault {
    pub fn status(method: &'static str, path_suffix: &str, status: u16, times: u32) -> Fault {
        Fault {
            method,
            path_suffix: path_suffix.into(),
            status: Some(status),
            delay: Duration::ZERO,
            retry_after_s: 0,
            times,
            query_contains: String::new(),
        }
    }
    /// The next `times` watches of the collection at `path` end at once with a `410 Expired`
    /// ERROR event (their resourceVersion was compacted away).
    pub fn expire_watch(path: &str, times: u32) -> Fault {
        Fault {
            query_contains: "watch=true".into(),
            ..Fault::status("GET", path, 410, times)
        }
    }
    pub fn slow(method: &'static str, path_suffix: &str, delay: Duration, times: u32) -> Fault {
        Fault {
            method,
            path_suffix: path_suffix.into(),
            status: None,
            delay,
            retry_after_s: 0,
            times,
            query_contains: String::new(),
        }
    }
}

#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    plural: &'static str,
    namespace: Option<String>,
    kind: &'static str,
    object: Value,
}

/// The server's state.
#[derive(Debug, Default)]
pub struct State {
    rv: u64,
    /// plural → (namespace, name) → object
    objects: BTreeMap<&'static str, BTreeMap<(String, String), Value>>,
    changes: Vec<Change>,
    /// Watches from below this version get 410.
    compacted: u64,
    last_rv: BTreeMap<&'static str, u64>,
    requests: Vec<Request>,
    faults: Vec<Fault>,
    served: Vec<Kind>,
    uid: u64,
}

/// The fake server.
#[derive(Clone)]
pub struct FakeApi {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    notify: watch::Sender<u64>,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_every: Duration,
}

fn status_body(code: u16, reason: &str, message: &str, retry_after_s: u32) -> Value {
    let mut v = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if retry_after_s > 0 {
        v["details"] = json!({ "retryAfterSeconds": retry_after_s });
    }
    v
}

fn error(code: u16, reason: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [("content-type", "application/json")],
        status_body(code, reason, message, 0).to_string(),
    )
        .into_response()
}

fn ok_json(v: &Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// RFC 3339 of Unix seconds.
pub fn rfc3339(t: f64) -> String {
    Timestamp::from_microsecond((t * 1e6) as i64)
        .expect("time in range")
        .to_string()
}

impl FakeApi {
    /// Starts serving `served` (PyTorchJobs, nodes, pods and leases always; add PODGROUPS /
    /// WORKLOADS to pretend Volcano / Kueue are installed).
    pub async fn start(extra: &[Kind]) -> FakeApi {
        let mut served = vec![NODES, PODS, JOBS, LEASES];
        served.extend_from_slice(extra);
        let state = Arc::new(Mutex::new(State {
            served,
            ..Default::default()
        }));
        let (notify, _) = watch::channel(0u64);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let api = FakeApi {
            addr,
            state,
            notify,
            bookmark_every: Duration::from_millis(100),
        };
        let a = api.clone();
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let a = a.clone();
                async move { a.handle(method, uri, headers, body).await }
            },
        );
        tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        api
    }

    /// A kube client talking to this server.
    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().expect("url");
        let mut cfg = kube::Config::new(url);
        cfg.default_namespace = "default".into();
        // the backend's own backoff (with jitter, bounded) is under test, not kube's
        cfg.default_retry = false;
        kube::Client::try_from(cfg).expect("client")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
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

    async fn handle(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let path = uri.path().to_string();
        let query: BTreeMap<String, String> = uri
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), v.to_string())
            })
            .collect();
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body_json: Option<Value> = if body.is_empty() {
            None
        } else {
            serde_json::from_slice(&body).ok()
        };
        let fault = {
            let mut s = self.lock();
            s.requests.push(Request {
                method: method.to_string(),
                path: path.clone(),
                query: uri.query().unwrap_or("").to_string(),
                content_type: content_type.clone(),
                body: body_json.clone(),
            });
            let hit = s.faults.iter().position(|f| {
                f.times > 0
                    && f.method == method.as_str()
                    && path.ends_with(&f.path_suffix)
                    && uri.query().unwrap_or("").contains(&f.query_contains)
            });
            hit.map(|i| {
                s.faults[i].times -= 1;
                let f = s.faults[i].clone();
                if s.faults[i].times == 0 {
                    s.faults.remove(i);
                }
                f
            })
        };
        if let Some(f) = fault {
            tokio::time::sleep(f.delay).await;
            if f.status == Some(410) && query.contains_key("watch") {
                let ev = json!({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version", 0)});
                return Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from(format!("{ev}\n")))
                    .expect("expired watch");
            }
            if let Some(code) = f.status {
                let status =
                    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let reason = match code {
                    409 => "Conflict",
                    429 => "TooManyRequests",
                    _ => "InternalError",
                };
                return (
                    status,
                    [("content-type", "application/json")],
                    status_body(code, reason, "injected fault", f.retry_after_s).to_string(),
                )
                    .into_response();
            }
        }
        // route: /api/v1/... or /apis/G/V/...
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => {
                return error(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            }
        };
        let (ns, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let Some((plural, name, sub)) = (match rest {
            [p] => Some((*p, None, None)),
            [p, n] => Some((*p, Some(n.to_string()), None)),
            [p, n, s] => Some((*p, Some(n.to_string()), Some(*s))),
            _ => None,
        }) else {
            return error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        };
        let kind = {
            let s = self.lock();
            s.served
                .iter()
                .find(|k| k.plural == plural && k.group == group && k.version == version)
                .copied()
        };
        let Some(kind) = kind else {
            return error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        };
        match (method.as_str(), name, sub) {
            ("GET", None, _) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
                self.watch(kind, ns, &query)
            }
            ("GET", None, _) => self.list_response(kind, ns.as_deref()),
            ("GET", Some(n), None) => match self.get(kind, ns.as_deref().unwrap_or(""), &n) {
                Some(o) => ok_json(&o),
                None => error(
                    404,
                    "NotFound",
                    &format!("{} \"{n}\" not found", kind.plural),
                ),
            },
            ("GET", Some(n), Some("scale")) if kind == JOBS => {
                match self.get(kind, ns.as_deref().unwrap_or(""), &n) {
                    Some(o) => ok_json(&scale_of(&o)),
                    None => error(404, "NotFound", &format!("pytorchjobs \"{n}\" not found")),
                }
            }
            ("PATCH", Some(n), Some("scale")) if kind == JOBS => {
                if content_type.as_deref() != Some("application/merge-patch+json") {
                    return error(415, "UnsupportedMediaType", "expected a merge patch");
                }
                self.patch_scale(ns.as_deref().unwrap_or(""), &n, body_json)
            }
            ("POST", None, None) => {
                let Some(mut o) = body_json else {
                    return error(400, "BadRequest", "no body");
                };
                let n = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                let ns = ns.unwrap_or_default();
                if self.get(kind, &ns, &n).is_some() {
                    return error(
                        409,
                        "AlreadyExists",
                        &format!("{} \"{n}\" already exists", kind.plural),
                    );
                }
                o["metadata"]["namespace"] = json!(ns);
                self.put(kind, o);
                ok_json(&self.get(kind, &ns, &n).unwrap_or(Value::Null))
            }
            ("PUT", Some(n), None) => {
                let Some(mut o) = body_json else {
                    return error(400, "BadRequest", "no body");
                };
                let ns = ns.unwrap_or_default();
                let Some(cur) = self.get(kind, &ns, &n) else {
                    return error(
                        404,
                        "NotFound",
                        &format!("{} \"{n}\" not found", kind.plural),
                    );
                };
                if o["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"] {
                    return error(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                    );
                }
                o["metadata"]["namespace"] = json!(ns);
                self.put(kind, o);
                ok_json(&self.get(kind, &ns, &n).unwrap_or(Value::Null))
            }
            _ => error(405, "MethodNotAllowed", "not supported by the fake"),
        }
    }

    fn list_response(&self, kind: Kind, ns: Option<&str>) -> Response {
        let s = self.lock();
        let items: Vec<Value> = s
            .objects
            .get(kind.plural)
            .map(|m| {
                m.iter()
                    .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons))
                    .map(|(_, o)| o.clone())
                    .collect()
            })
            .unwrap_or_default();
        ok_json(&json!({
            "apiVersion": kind.api_version(),
            "kind": format!("{}List", kind.kind),
            "metadata": { "resourceVersion": s.rv.to_string() },
            "items": items,
        }))
    }

    fn patch_scale(&self, ns: &str, name: &str, body: Option<Value>) -> Response {
        let Some(mut job) = self.get(JOBS, ns, name) else {
            return error(
                404,
                "NotFound",
                &format!("pytorchjobs \"{name}\" not found"),
            );
        };
        let Some(body) = body else {
            return error(400, "BadRequest", "no body");
        };
        if let Some(rv) = body.pointer("/metadata/resourceVersion") {
            if !rv.is_null() && *rv != job["metadata"]["resourceVersion"] {
                return error(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on pytorchjobs.kubeflow.org: the object has been modified; please apply your changes to the latest version and try again",
                );
            }
        }
        let Some(replicas) = body.pointer("/spec/replicas").and_then(Value::as_u64) else {
            return error(422, "Invalid", "spec.replicas: Required value");
        };
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(replicas);
        self.put(JOBS, job);
        ok_json(&scale_of(&self.get(JOBS, ns, name).unwrap_or(Value::Null)))
    }

    fn watch(&self, kind: Kind, ns: Option<String>, query: &BTreeMap<String, String>) -> Response {
        let from: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|v| v == "true");
        let timeout = Duration::from_secs(
            query
                .get("timeoutSeconds")
                .and_then(|v| v.parse().ok())
                .unwrap_or(290),
        );
        let expired = from < self.lock().compacted;
        let api = self.clone();
        let rx = self.notify.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        struct W {
            api: FakeApi,
            rx: watch::Receiver<u64>,
            sent: u64,
            expired: bool,
            done: bool,
        }
        let st = W {
            api,
            rx,
            sent: from,
            expired,
            done: false,
        };
        let stream = futures::stream::unfold(st, move |mut st| {
            let ns = ns.clone();
            async move {
                if st.done {
                    return None;
                }
                if st.expired {
                    st.done = true;
                    let ev = json!({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version", 0)});
                    return Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(format!("{ev}\n"))),
                        st,
                    ));
                }
                loop {
                    let (batch, rv) = {
                        let s = st.api.lock();
                        let batch: Vec<Value> = s
                            .changes
                            .iter()
                            .filter(|c| c.rv > st.sent && c.plural == kind.plural)
                            .filter(|c| ns.is_none() || c.namespace == ns)
                            .map(|c| json!({"type": c.kind, "object": c.object}))
                            .collect();
                        (batch, s.rv)
                    };
                    if !batch.is_empty() {
                        st.sent = rv;
                        let mut out = String::new();
                        for ev in batch {
                            out.push_str(&ev.to_string());
                            out.push('\n');
                        }
                        return Some((Ok(Bytes::from(out)), st));
                    }
                    st.sent = st.sent.max(rv);
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    let wait = st.api.bookmark_every.min(deadline - now);
                    match tokio::time::timeout(wait, st.rx.changed()).await {
                        Ok(Ok(())) => continue,
                        Ok(Err(_)) => return None,
                        Err(_) if bookmarks => {
                            let ev = json!({"type": "BOOKMARK", "object": {
                                "kind": kind.kind, "apiVersion": kind.api_version(),
                                "metadata": {"resourceVersion": st.sent.to_string()}}});
                            return Some((Ok(Bytes::from(format!("{ev}\n"))), st));
                        }
                        Err(_) => continue,
                    }
                }
            }
        });
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from_stream(stream))
            .expect("watch response")
    }
}

/// The `autoscaling/v1` `Scale` of a PyTorchJob (specpath
/// `.spec.pytorchReplicaSpecs.Worker.replicas`, statuspath
/// `.status.replicaStatuses.Worker.active`).
pub fn scale_of(job: &Value) -> Value {
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": job["metadata"]["name"],
            "namespace": job["metadata"]["namespace"],
            "uid": job["metadata"]["uid"],
            "resourceVersion": job["metadata"]["resourceVersion"],
            "creationTimestamp": job["metadata"]["creationTimestamp"],
        },
        "spec": { "replicas": job.pointer("/spec/pytorchReplicaSpecs/Worker/replicas").cloned().unwrap_or(json!(1)) },
        "status": {
            "replicas": job.pointer("/status/replicaStatuses/Worker/active").cloned().unwrap_or(json!(0)),
            "selector": format!("training.kubeflow.org/job-name={}", job["metadata"]["name"].as_str().unwrap_or("")),
        },
    })
}

// ---- object builders (k8s-openapi types where they exist) ----

fn gpus(n: u32) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity(n.to_string()))])
}

/// A GPU node.
pub fn node(name: &str, gpu_count: u32, product: &str, zone: &str, ready: bool) -> Value {
    let n = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                ("nvidia.com/gpu.product".to_string(), product.to_string()),
                ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(gpus(gpu_count)),
            capacity: Some(gpus(gpu_count)),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    serde_json::to_value(n).expect("node json")
}

/// A worker pod of a PyTorchJob, bound to `node` (Running) or pending.
pub fn worker_pod(ns: &str, job: &str, index: u32, gpu_count: u32, node: Option<&str>) -> Value {
    let p = Pod {
        metadata: ObjectMeta {
            name: Some(format!("{job}-worker-{index}")),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([
                (
                    "training.kubeflow.org/job-name".to_string(),
                    job.to_string(),
                ),
                (
                    "training.kubeflow.org/replica-type".to_string(),
                    "worker".to_string(),
                ),
                (
                    "training.kubeflow.org/replica-index".to_string(),
                    index.to_string(),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            containers: vec![Container {
                name: "pytorch".into(),
                image: Some("example.invalid/train:1".into()),
                resources: Some(ResourceRequirements {
                    limits: Some(gpus(gpu_count)),
                    requests: Some(gpus(gpu_count)),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
            ..Default::default()
        }),
    };
    serde_json::to_value(p).expect("pod json")
}

/// A `kubeflow.org/v1` PyTorchJob with `replicas` workers of `gpu_count` GPUs each.
pub fn pytorchjob(
    ns: &str,
    name: &str,
    replicas: u32,
    gpu_count: u32,
    elastic: Option<(u32, u32)>,
    created: f64,
) -> Value {
    let mut j = json!({
        "metadata": {
            "name": name, "namespace": ns,
            "creationTimestamp": Time(Timestamp::from_second(created as i64).expect("time")),
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": replicas,
                    "restartPolicy": "OnFailure",
                    "template": { "spec": { "containers": [{
                        "name": "pytorch",
                        "image": "example.invalid/train:1",
                        "resources": { "limits": { "nvidia.com/gpu": gpu_count.to_string() } },
                    }]}},
                },
            },
        },
        "status": { "conditions": [{ "type": "Created", "status": "True" }] },
    });
    if let Some((lo, hi)) = elastic {
        j["spec"]["elasticPolicy"] =
            json!({ "minReplicas": lo, "maxReplicas": hi, "rdzvBackend": "c10d" });
    }
    j
}

/// Marks a job object started at `t` with `active` running workers.
pub fn set_started(job: &mut Value, t: f64, active: u32) {
    job["status"]["startTime"] = json!(rfc3339(t));
    job["status"]["replicaStatuses"] = json!({ "Worker": { "active": active } });
    job["status"]["conditions"] = json!([
        { "type": "Created", "status": "True" },
        { "type": "Running", "status": "True", "lastTransitionTime": rfc3339(t) },
    ]);
}

/// Marks a job object succeeded at `t`.
pub fn set_succeeded(job: &mut Value, t: f64) {
    job["status"]["completionTime"] = json!(rfc3339(t));
    job["status"]["replicaStatuses"] = json!({ "Worker": { "active": 0, "succeeded": 1 } });
    job["status"]["conditions"] = json!([
        { "type": "Created", "status": "True" },
        { "type": "Running", "status": "False" },
        { "type": "Succeeded", "status": "True", "lastTransitionTime": rfc3339(t) },
    ]);
}

/// A Volcano PodGroup owned by a PyTorchJob.
pub fn podgroup(ns: &str, job: &str, min_member: u32, phase: &str) -> Value {
    json!({
        "metadata": { "name": job, "namespace": ns, "ownerReferences": [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job,
            "uid": format!("{job}-uid"), "controller": true }] },
        "spec": { "minMember": min_member },
        "status": { "phase": phase },
    })
}

/// A Kueue Workload owned by a PyTorchJob.
pub fn workload(ns: &str, job: &str, admitted: bool) -> Value {
    let mut conds = vec![
        json!({ "type": "QuotaReserved", "status": if admitted { "True" } else { "False" },
        "reason": if admitted { "QuotaReserved" } else { "Pending" }, "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z" }),
    ];
    if admitted {
        conds.push(
            json!({ "type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z" }),
        );
    }
    json!({
        "metadata": { "name": format!("pytorchjob-{job}"), "namespace": ns, "ownerReferences": [{
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job,
            "uid": format!("{job}-uid"), "controller": true }] },
        "spec": { "queueName": "default", "podSets": [] },
        "status": { "conditions": conds },
    })
}

// ---- test plumbing ----

/// A settable clock (Unix seconds) for the backend.
#[derive(Clone, Default)]
pub struct VClock(Arc<std::sync::atomic::AtomicU64>);

impl VClock {
    pub fn new(t: f64) -> VClock {
        let c = VClock::default();
        c.set(t);
        c
    }
    pub fn set(&self, t: f64) {
        self.0
            .store(t.to_bits(), std::sync::atomic::Ordering::SeqCst);
    }
    pub fn now(&self) -> f64 {
        f64::from_bits(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
    pub fn clock(&self) -> augur_autoscaler::kubernetes::Clock {
        let c = self.clone();
        Arc::new(move || c.now())
    }
}

/// Waits until every watch of the backend is in sync and has seen the last change of its kind.
pub async fn caught_up(b: &augur_autoscaler::kubernetes::KubeBackend, api: &FakeApi) {
    let start = tokio::time::Instant::now();
    loop {
        let want = api.last_rvs();
        let ok = b.watch_sync().iter().all(|(name, s)| {
            s.synced() && s.last_resource_version() >= want.get(name).copied().unwrap_or(0)
        });
        if ok {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "backend did not catch up with the fake API: {:?} vs {want:?}",
            b.watch_sync()
                .iter()
                .map(|(n, s)| (*n, s.synced(), s.last_resource_version()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
