//! Watches: newline-delimited `WatchEvent`s streamed from a `resourceVersion`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::kinds::Kind;
use crate::responses::{error, status_body};
use crate::selector::Selector;
use crate::store::FakeApi;

/// An open watch.
struct Watch {
    api: FakeApi,
    rx: watch::Receiver<u64>,
    kind: Kind,
    ns: Option<String>,
    /// The resource version sent up to.
    sent: u64,
    /// Started below the compacted version: one `410 Expired` event, then the end.
    expired: bool,
    done: bool,
    bookmarks: bool,
    deadline: Instant,
    /// Only objects whose labels match are sent.
    selector: Selector,
}

impl Watch {
    /// The next chunk of events and the watch, or `None` when it ends (timeout, server gone).
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Watch)> {
        if self.done {
            return None;
        }
        if self.expired {
            self.done = true;
            let ev = json!({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version", 0)});
            return Some((Ok(Bytes::from(format!("{ev}\n"))), self));
        }
        loop {
            let (batch, rv) = self.changes_since();
            if !batch.is_empty() {
                self.sent = rv;
                let mut out = String::new();
                for ev in batch {
                    out.push_str(&ev.to_string());
                    out.push('\n');
                }
                return Some((Ok(Bytes::from(out)), self));
            }
            self.sent = self.sent.max(rv);
            let now = Instant::now();
            if now >= self.deadline {
                return None;
            }
            let wait = self.api.bookmark_every.min(self.deadline - now);
            match tokio::time::timeout(wait, self.rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return None,
                Err(_) if self.bookmarks => {
                    let kind = self.kind;
                    let ev = json!({"type": "BOOKMARK", "object": {
                        "kind": kind.kind, "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": self.sent.to_string()}}});
                    return Some((Ok(Bytes::from(format!("{ev}\n"))), self));
                }
                Err(_) => continue,
            }
        }
    }

    /// The watched changes after `sent` as watch events, and the current resource version.
    fn changes_since(&self) -> (Vec<Value>, u64) {
        let s = self.api.lock();
        let batch: Vec<Value> = s
            .changes
            .iter()
            .filter(|c| c.rv > self.sent && c.plural == self.kind.plural)
            .filter(|c| self.ns.is_none() || c.namespace == self.ns)
            .filter(|c| self.selector.matches(&c.object))
            .map(|c| json!({"type": c.kind, "object": c.object}))
            .collect();
        (batch, s.rv)
    }
}

impl FakeApi {
    /// A watch of `kind` (in `ns`) from the `resourceVersion` asked for: the changes since, as
    /// newline-delimited events, then each change as it happens, with `BOOKMARK`s when allowed,
    /// until the watch times out; `410 Expired` for a compacted version.
    pub(crate) fn watch(
        &self,
        kind: Kind,
        ns: Option<String>,
        query: &BTreeMap<String, String>,
    ) -> Response {
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
        let watch = Watch {
            api: self.clone(),
            rx: self.notify.subscribe(),
            kind,
            ns,
            sent: from,
            expired: from < self.lock().compacted,
            done: false,
            bookmarks,
            deadline: Instant::now() + timeout,
            selector: crate::routes::selector(query),
        };
        let stream = futures::stream::unfold(watch, Watch::next);
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| error(500, "InternalError", "watch response"))
    }
}
