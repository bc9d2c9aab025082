//! An early-stopped fit's tree count, shared as it grows with a fit that depends on it (a
//! refit on more rows whose tree count is a function of it), so the two can run side by side.
//!
//! The leader's best tree count so far only grows, and the count it settles on is at least
//! that best, so a follower whose count is a non-decreasing function of the leader's may grow
//! every tree below that function of the best so far without waiting; past it, it waits for
//! a better best or the settled count. Each tree of a fit depends only on the trees before
//! it, so the follower's model is the one a fit with its final count would grow alone.

use std::sync::{Condvar, Mutex, PoisonError};

/// The tree count a leading fit settles on, published tree by tree (see the module doc):
/// [`GbdtParams::fit_binned_leading`](super::GbdtParams::fit_binned_leading) writes it,
/// [`GbdtParams::fit_binned_following`](super::GbdtParams::fit_binned_following) reads it.
#[derive(Debug, Default)]
pub struct TreeCountLead {
    state: Mutex<LeadState>,
    changed: Condvar,
}

#[derive(Debug, Default, Clone, Copy)]
struct LeadState {
    /// The leader's best tree count so far (a lower bound of its settled count).
    best: usize,
    /// The count the leader's model kept, once it has finished (or failed).
    settled: Option<usize>,
}

impl TreeCountLead {
    pub fn new() -> TreeCountLead {
        TreeCountLead::default()
    }

    /// A guard that settles the lead on the best so far when dropped, unless the leader
    /// settled it before: a leader holds one over all it does before and around its fit, so
    /// that a follower never waits for a leader that returned early or panicked.
    #[must_use = "the lead is settled when the guard is dropped"]
    pub fn settle_on_drop(&self) -> SettleOnDrop<'_> {
        SettleOnDrop { lead: self }
    }

    /// The count the leader settled on, once it has.
    pub fn settled(&self) -> Option<usize> {
        self.lock().settled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LeadState> {
        // the state is two counters written whole: a panicking holder leaves it consistent
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The leader's best tree count so far.
    pub(super) fn publish_best(&self, best: usize) {
        let mut s = self.lock();
        if best > s.best {
            s.best = best;
            drop(s);
            self.changed.notify_all();
        }
    }

    /// The leader's final count (the first call wins: a failed leader settles on its best).
    pub(super) fn settle(&self, n: usize) {
        let mut s = self.lock();
        if s.settled.is_none() {
            s.settled = Some(n);
            drop(s);
            self.changed.notify_all();
        }
    }

    /// Whether a follower whose tree count is `trees_for(leader's count)` grows its tree `k`
    /// (0-based): true as soon as the leader's best so far implies it, false once the
    /// leader has settled on a count that does not; waits in between.
    pub(super) fn wait_to_grow(&self, k: usize, trees_for: &dyn Fn(usize) -> usize) -> bool {
        let mut s = self.lock();
        loop {
            if let Some(n) = s.settled {
                return k < trees_for(n);
            }
            if k < trees_for(s.best) {
                return true;
            }
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Settles a [`TreeCountLead`] when dropped ([`TreeCountLead::settle_on_drop`]): an error or
/// a panic settles it on the best so far, so a follower never waits for a leader that is gone.
pub struct SettleOnDrop<'a> {
    lead: &'a TreeCountLead,
}

impl Drop for SettleOnDrop<'_> {
    fn drop(&mut self) {
        let best = self.lead.lock().best;
        self.lead.settle(best);
    }
}
