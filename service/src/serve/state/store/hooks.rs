//! What the store's writer does with each group of events besides storing it: hands it to
//! the service's ingest pipeline ([`crate::serve::state::ingest`]), which applies it to the online
//! state and tells the listeners once it is committed.

use super::{PredictionRecord, StoredEvent};

/// Called for each group of events, in sequence order, by the store's writer (and, on
/// PostgreSQL, by its tail reader for what other replicas append).
pub trait GroupHooks: Send {
    /// Applies `group` to the service's state; returns the answers issued at its submits.
    /// SQLite: inside the group's transaction, after its events are written and before the
    /// commit, so the records returned are committed with the group. PostgreSQL: after the
    /// commit, as the group is read back from the shared log (the records are stored
    /// before the acknowledgement).
    fn apply(&mut self, group: &[StoredEvent]) -> Vec<PredictionRecord>;

    /// `group`, applied, is committed; called before any request of it is answered.
    fn committed(&mut self, group: &[StoredEvent]);

    /// PostgreSQL: the records stored by the replica that appended the events about to be
    /// applied (every replica keeps the answers the appending one issued).
    fn use_records(&mut self, records: &[PredictionRecord]);
}

/// Applies a group, returning the records issued (see [`GroupHooks::apply`]).
pub type ApplyGroup = Box<dyn FnMut(&[StoredEvent]) -> Vec<PredictionRecord> + Send>;

/// Takes the prediction records stored for events about to be applied
/// ([`GroupHooks::use_records`]).
pub type UseRecords = Box<dyn FnMut(&[PredictionRecord]) + Send>;

/// Hooks made of closures (the store's own tests and tools): nothing happens at the commit.
pub struct Closures {
    pub apply: ApplyGroup,
    pub use_records: Option<UseRecords>,
}

impl GroupHooks for Closures {
    fn apply(&mut self, group: &[StoredEvent]) -> Vec<PredictionRecord> {
        (self.apply)(group)
    }

    fn committed(&mut self, _group: &[StoredEvent]) {}

    fn use_records(&mut self, records: &[PredictionRecord]) {
        if let Some(f) = self.use_records.as_mut() {
            f(records);
        }
    }
}
