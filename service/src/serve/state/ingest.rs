//! The ingest pipeline: what becomes of events from the request to the reply, in order.
//! Events posted to `/v1/events` go through every step; the events a cluster backend
//! observes (simulator, Kubernetes, Slurm) are appended by it and enter at step 2.
//!
//! 1. **Validate** ([`crate::serve::http::api::ingest`]): each event's fields (`Event::validate`), its
//!    time against the backend's window (`Event::check_within`) and its order against its
//!    job's submit. A refused event names its field, and nothing of the request is stored.
//! 2. **Store** ([`super::store::EventLog::append`]): the store's writer takes the request
//!    into its next group and writes the group's events in one transaction, numbered in
//!    order ([`super::store`]).
//! 3. **Apply to the served models' online state** ([`Pipeline`]'s
//!    [`GroupHooks::apply`]): features, queue state and the job table take the group in
//!    sequence order, and the answers the predictors issue at each submit come back as
//!    records. On SQLite this runs inside the group's transaction, *before the commit*,
//!    because the records are written in that same transaction: a submit and the answers
//!    issued for it are committed together or not at all, so a crash never leaves a stored
//!    submit whose answers a later model would issue again. Should the commit then fail, the
//!    online state is ahead of the log: the writer retries the same group under the same
//!    sequence numbers until it commits and refuses new events meanwhile (503
//!    `store_unavailable`, 507 on a full disk), so memory and log agree again before
//!    anything more is taken. On PostgreSQL every replica applies the committed log as it
//!    reads it back, so there this step follows the commit (the appending replica stores
//!    the records before its reply).
//! 4. **Commit**: one fsync for the group (`synchronous = FULL`), then the durable
//!    high-water mark (what is acknowledged is below it).
//! 5. **Broadcast** ([`GroupHooks::committed`]): [`ServeEvent::Ingested`] and one
//!    [`ServeEvent::JobFinished`] per finished job, to the metrics and the status page, once
//!    the group is committed.
//! 6. **Reply** ([`crate::serve::http::api::ingest`]): each request gets its sequence numbers. An
//!    acknowledged event is committed and applied; an event not acknowledged was not stored.

use std::sync::{Arc, RwLock};

use tokio::sync::broadcast;

use super::online::{Online, Outcome};
use super::store::{GroupHooks, PredictionRecord, StoredEvent};
use crate::serve::{write, ServeEvent};

/// Steps 3 and 5 for the store's writer: the online state it applies to and the listeners
/// it tells.
pub struct Pipeline {
    online: Arc<RwLock<Online>>,
    events: broadcast::Sender<ServeEvent>,
    /// The outcomes of the group applied last, broadcast once it is committed.
    finished: Vec<Outcome>,
}

impl Pipeline {
    pub fn new(online: Arc<RwLock<Online>>, events: broadcast::Sender<ServeEvent>) -> Pipeline {
        Pipeline {
            online,
            events,
            finished: Vec::new(),
        }
    }
}

impl GroupHooks for Pipeline {
    fn apply(&mut self, group: &[StoredEvent]) -> Vec<PredictionRecord> {
        let mut o = write(&self.online);
        for e in group {
            if let Some(out) = o.apply(e) {
                self.finished.push(out);
            }
        }
        o.take_issued()
    }

    fn committed(&mut self, group: &[StoredEvent]) {
        let finished = std::mem::take(&mut self.finished);
        if self.events.receiver_count() == 0 {
            return;
        }
        if let Some(first) = group.first() {
            let _ = self.events.send(ServeEvent::Ingested {
                first_seq: first.seq,
                kinds: group.iter().map(|e| e.event.kind()).collect(),
            });
        }
        for out in finished {
            let _ = self.events.send(ServeEvent::JobFinished(Arc::new(out)));
        }
    }

    fn use_records(&mut self, records: &[PredictionRecord]) {
        write(&self.online).use_records(records);
    }
}
