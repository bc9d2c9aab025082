//! The watches behind the backend's view (kube-rs reflectors, not polling) and their sync
//! state ([`WatchSync`]): whether the initial list is complete, the newest resource version
//! seen, and the errors (each re-lists with backoff).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

/// Sync state of one watch.
#[derive(Debug, Default)]
pub struct WatchSync {
    synced: AtomicBool,
    last_rv: AtomicU64,
    errors: AtomicU64,
}

impl WatchSync {
    /// True when the initial list is complete and no error happened since.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    /// Highest `resourceVersion` seen in an object event (0 before any).
    pub fn last_resource_version(&self) -> u64 {
        self.last_rv.load(Ordering::Acquire)
    }
    /// Watch errors so far (each re-lists).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Acquire)
    }
}

/// A running watch: its cache and its sync state.
pub(super) struct Watched<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The resource's plural name.
    pub name: &'static str,
    pub store: Store<K>,
    pub sync: Arc<WatchSync>,
}

fn rv_of<K: Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(super) fn spawn_watch<K, F>(
    name: &'static str,
    api: Api<K>,
    dyntype: K::DynamicType,
    timeout_s: u32,
    on_event: F,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let cfg = watcher::Config::default().timeout(timeout_s);
    spawn_watch_with(name, api, dyntype, cfg, on_event, tasks)
}

pub(super) fn spawn_watch_with<K, F>(
    name: &'static str,
    api: Api<K>,
    dyntype: K::DynamicType,
    cfg: watcher::Config,
    mut on_event: F,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let sync = Arc::new(WatchSync::default());
    let s = sync.clone();
    let stream = reflector::reflector(writer, watcher(api, cfg).default_backoff());
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    match &ev {
                        watcher::Event::Init => s.synced.store(false, Ordering::Release),
                        watcher::Event::InitDone => s.synced.store(true, Ordering::Release),
                        watcher::Event::Apply(o)
                        | watcher::Event::Delete(o)
                        | watcher::Event::InitApply(o) => {
                            s.last_rv.fetch_max(rv_of(o), Ordering::AcqRel);
                        }
                    }
                    on_event(&ev);
                }
                Err(e) => {
                    s.synced.store(false, Ordering::Release);
                    s.errors.fetch_add(1, Ordering::AcqRel);
                    tracing::warn!(watch = name, error = %e, "watch failed; re-listing with backoff");
                }
            }
        }
    }));
    Watched { name, store, sync }
}
