//! Serving the API ([`FakeApi::start`]): each request is recorded, answered with an injected
//! fault when one matches, else routed (`/api/v1/...`, `/apis/G/V/...`, optionally namespaced)
//! to list or watch (with a `labelSelector`), get, create (with `generateName`), replace,
//! merge-patch an object (a `metadata.resourceVersion` in the patch is a precondition → 409),
//! or a PyTorchJob's `/scale` get and merge patch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::kinds::{Kind, JOBS, LEASES, NODES, PODS};
use crate::requests::{Fault, Request};
use crate::responses::{error, expired_watch, ok_json, scale_of, status_body};
use crate::selector::Selector;
use crate::store::{FakeApi, State};

/// A routed request: the kind, namespace, object name and subresource its path names.
struct Route {
    kind: Kind,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// What a request carries besides its route.
struct Call {
    method: Method,
    query: BTreeMap<String, String>,
    content_type: Option<String>,
    body: Option<Value>,
}

fn not_found() -> Response {
    error(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// The `labelSelector` of a list or watch (matching everything when absent).
pub(crate) fn selector(query: &BTreeMap<String, String>) -> Selector {
    query
        .get("labelSelector")
        .map_or_else(Selector::default, |s| Selector::parse(s))
}

/// The query string as key → value.
fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The response an injected fault answers with (`None`: answer normally after its delay).
fn fault_response(f: &Fault, watch: bool) -> Option<Response> {
    if f.status == Some(410) && watch {
        return Some(expired_watch());
    }
    let code = f.status?;
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match code {
        409 => "Conflict",
        429 => "TooManyRequests",
        _ => "InternalError",
    };
    Some(
        (
            status,
            [("content-type", "application/json")],
            status_body(code, reason, "injected fault", f.retry_after_s).to_string(),
        )
            .into_response(),
    )
}

impl FakeApi {
    /// Starts serving `served` (PyTorchJobs, nodes, pods and leases always; add PODGROUPS /
    /// WORKLOADS to pretend Volcano / Kueue are installed, TRAINJOBS for the Kubeflow Trainer,
    /// BATCH_JOBS for `batch/v1` Jobs).
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

    async fn handle(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let path = uri.path().to_string();
        let raw_query = uri.query().unwrap_or("").to_string();
        let call = Call {
            query: parse_query(&raw_query),
            content_type: headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: if body.is_empty() {
                None
            } else {
                serde_json::from_slice(&body).ok()
            },
            method,
        };
        let fault = self.record(Request {
            method: call.method.to_string(),
            path: path.clone(),
            query: raw_query,
            content_type: call.content_type.clone(),
            body: call.body.clone(),
        });
        if let Some(f) = fault {
            tokio::time::sleep(f.delay).await;
            if let Some(r) = fault_response(&f, call.query.contains_key("watch")) {
                return r;
            }
        }
        match self.route(&path) {
            Some(route) => self.dispatch(route, call),
            None => not_found(),
        }
    }

    /// The served kind, namespace, name and subresource of a path.
    fn route(&self, path: &str) -> Option<Route> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return None,
        };
        let (ns, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let (plural, name, sub) = match rest {
            [p] => (*p, None, None),
            [p, n] => (*p, Some(n.to_string()), None),
            [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
            _ => return None,
        };
        let kind = self.served(group, version, plural)?;
        Some(Route {
            kind,
            ns,
            name,
            sub,
        })
    }

    fn dispatch(&self, route: Route, call: Call) -> Response {
        let Route {
            kind,
            ns,
            name,
            sub,
        } = route;
        let in_ns = ns.as_deref().unwrap_or("");
        match (call.method.as_str(), name, sub.as_deref()) {
            ("GET", None, _)
                if call
                    .query
                    .get("watch")
                    .is_some_and(|w| w == "true" || w == "1") =>
            {
                self.watch(kind, ns, &call.query)
            }
            ("GET", None, _) => self.list_response(kind, ns.as_deref(), &selector(&call.query)),
            ("GET", Some(n), None) => match self.get(kind, in_ns, &n) {
                Some(o) => ok_json(&o),
                None => error(
                    404,
                    "NotFound",
                    &format!("{} \"{n}\" not found", kind.plural),
                ),
            },
            ("GET", Some(n), Some("scale")) if kind == JOBS => match self.get(kind, in_ns, &n) {
                Some(o) => ok_json(&scale_of(&o)),
                None => error(404, "NotFound", &format!("pytorchjobs \"{n}\" not found")),
            },
            ("PATCH", Some(n), Some("scale")) if kind == JOBS => {
                if call.content_type.as_deref() != Some("application/merge-patch+json") {
                    return error(415, "UnsupportedMediaType", "expected a merge patch");
                }
                self.patch_scale(in_ns, &n, call.body)
            }
            ("PATCH", Some(n), None) => {
                if call.content_type.as_deref() != Some("application/merge-patch+json") {
                    return error(415, "UnsupportedMediaType", "expected a merge patch");
                }
                self.merge_patch(kind, in_ns, &n, call.body)
            }
            ("POST", None, None) => self.create(kind, ns.unwrap_or_default(), call.body),
            ("PUT", Some(n), None) => self.replace(kind, ns.unwrap_or_default(), &n, call.body),
            _ => error(405, "MethodNotAllowed", "not supported by the fake"),
        }
    }

    /// POST: creates an object that does not exist yet.
    fn create(&self, kind: Kind, ns: String, body: Option<Value>) -> Response {
        let Some(mut o) = body else {
            return error(400, "BadRequest", "no body");
        };
        let mut n = o["metadata"]["name"].as_str().unwrap_or("").to_string();
        if n.is_empty() {
            if let Some(prefix) = o["metadata"]["generateName"].as_str() {
                n = format!("{prefix}{:05}", self.rv() + 1);
                o["metadata"]["name"] = json!(n);
            }
        }
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

    /// PUT: replaces an object, if the body carries its current resource version.
    fn replace(&self, kind: Kind, ns: String, n: &str, body: Option<Value>) -> Response {
        let Some(mut o) = body else {
            return error(400, "BadRequest", "no body");
        };
        let Some(cur) = self.get(kind, &ns, n) else {
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
        ok_json(&self.get(kind, &ns, n).unwrap_or(Value::Null))
    }

    fn list_response(&self, kind: Kind, ns: Option<&str>, selector: &Selector) -> Response {
        let s = self.lock();
        let items: Vec<Value> = s
            .objects
            .get(kind.plural)
            .map(|m| {
                m.iter()
                    .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons))
                    .filter(|(_, o)| selector.matches(o))
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

    /// PATCH with a JSON merge patch (RFC 7386) of the object itself.
    fn merge_patch(&self, kind: Kind, ns: &str, name: &str, body: Option<Value>) -> Response {
        let Some(mut obj) = self.get(kind, ns, name) else {
            return error(
                404,
                "NotFound",
                &format!("{} \"{name}\" not found", kind.plural),
            );
        };
        let Some(body) = body else {
            return error(400, "BadRequest", "no body");
        };
        if let Some(conflict) = stale(kind, &body, &obj) {
            return conflict;
        }
        merge(&mut obj, &body);
        self.put(kind, obj);
        ok_json(&self.get(kind, ns, name).unwrap_or(Value::Null))
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
        if let Some(conflict) = stale(JOBS, &body, &job) {
            return conflict;
        }
        let Some(replicas) = body.pointer("/spec/replicas").and_then(Value::as_u64) else {
            return error(422, "Invalid", "spec.replicas: Required value");
        };
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(replicas);
        self.put(JOBS, job);
        ok_json(&scale_of(&self.get(JOBS, ns, name).unwrap_or(Value::Null)))
    }
}

/// The 409 of a patch whose `metadata.resourceVersion` (a precondition, as on a real API
/// server) is not the object's.
fn stale(kind: Kind, patch: &Value, current: &Value) -> Option<Response> {
    let rv = patch.pointer("/metadata/resourceVersion")?;
    (!rv.is_null() && *rv != current["metadata"]["resourceVersion"]).then(|| {
        error(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {}.{}: the object has been modified; please apply your changes to the latest version and try again",
                kind.plural, kind.group
            ),
        )
    })
}

/// Applies a JSON merge patch (RFC 7386): objects merge key by key, `null` removes a key,
/// anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patches_follow_rfc_7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "keep": [1, 2]});
        merge(
            &mut t,
            &json!({"a": "z", "c": {"f": null, "h": 1}, "new": {"x": 1}}),
        );
        assert_eq!(
            t,
            json!({"a": "z", "c": {"d": "e", "h": 1}, "keep": [1, 2], "new": {"x": 1}})
        );
        merge(&mut t, &json!({"keep": [3]}));
        assert_eq!(t["keep"], json!([3]));
    }
}
