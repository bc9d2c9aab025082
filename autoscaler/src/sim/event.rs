//! The simulator's events ([`Ev`]), ordered by time then by sequence number so the replay is
//! deterministic.

use std::cmp::Ordering;

/// What happens at an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum EvKind {
    /// Job `.0` completes, if its epoch is still `.1`.
    Complete(u32, u32),
    /// Job `.0` resumes progress after its restart pause, if its epoch is still `.1`.
    Resume(u32, u32),
    NodeDown(u32),
    NodeUp(u32),
    /// A policy asked to be asked again.
    Wake,
}

/// An event at time `t`; `seq` breaks ties in insertion order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ev {
    pub t: f64,
    pub seq: u64,
    pub kind: EvKind,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t.total_cmp(&o.t).then(self.seq.cmp(&o.seq))
    }
}
