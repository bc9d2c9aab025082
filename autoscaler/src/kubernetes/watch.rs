//! The watches behind the backend's view (kube-rs watchers feeding a reflector cache, not
//! polling) and their sync state ([`WatchSync`]): whether the initial list is complete, the
//! newest resource version seen, and the errors.
//!
//! Every error re-lists, after a backoff: kube-rs' watcher resumes a failed watch from its
//! last resource version without a new list, so it yields nothing when the API server comes
//! back. A view marked out of sync by the error would stay so for good (and the backend
//! would never act again) on a quiet cluster. A fresh watcher lists, and its `InitDone`
//! marks the view in sync again.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
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
    /// Watch errors so far (each re-lists after [`relist_backoff`]).
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
    let mut writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let sync = Arc::new(WatchSync::default());
    let s = sync.clone();
    tasks.push(tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            // a fresh watcher lists first (Init … InitDone), then watches
            let mut stream = std::pin::pin!(watcher(api.clone(), cfg.clone()));
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => {
                        writer.apply_watcher_event(&ev);
                        match &ev {
                            watcher::Event::Init => s.synced.store(false, Ordering::Release),
                            watcher::Event::InitDone => {
                                s.synced.store(true, Ordering::Release);
                                failures = 0;
                            }
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
                        let wait = relist_backoff(failures);
                        failures = failures.saturating_add(1);
                        tracing::warn!(watch = name, error = %e, retry_in_ms = wait.as_millis() as u64, "watch failed; re-listing after a backoff");
                        tokio::time::sleep(wait).await;
                        break;
                    }
                }
            }
        }
    }));
    Watched { name, store, sync }
}

/// Longest wait before a failed watch lists again.
pub const MAX_RELIST_BACKOFF: Duration = Duration::from_secs(30);

/// The wait before the re-list that follows `failures` failed attempts in a row: 0.5 s
/// doubling up to [`MAX_RELIST_BACKOFF`] (back to 0.5 s once a list completes).
pub fn relist_backoff(failures: u32) -> Duration {
    let ms = 500u64.saturating_mul(1u64 << failures.min(16));
    Duration::from_millis(ms).min(MAX_RELIST_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relists_back_off_doubling_up_to_the_cap() {
        let waits: Vec<u64> = (0..8)
            .map(|f| relist_backoff(f).as_millis() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(relist_backoff(u32::MAX), MAX_RELIST_BACKOFF);
    }
}
