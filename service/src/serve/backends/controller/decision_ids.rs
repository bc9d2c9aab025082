//! The API id of the job each controller decision is about, recorded when the decision is
//! taken (the controller knows jobs by its own numbers, which a later replay lap reuses and
//! a deleted Kubernetes job no longer resolves): the id `GET /v1/jobs/{id}` takes.

use std::collections::VecDeque;

use augur_autoscaler::live::{LiveBackend, LiveLoop};
use augur_autoscaler::{JobId, Policy};

/// Ids kept: as many as the loop keeps decisions.
const KEEP: usize = 1000;

/// See the [module docs](self): (decision seq, API job id), oldest first.
#[derive(Debug, Default)]
pub struct DecisionJobs {
    ids: VecDeque<(u64, String)>,
    /// The newest decision seq looked at.
    last: u64,
}

impl DecisionJobs {
    /// Records the API id (`id_of` the controller's job number) of each decision `live`
    /// took since the last call.
    pub fn record<B: LiveBackend, P: Policy>(
        &mut self,
        live: &LiveLoop<B, P>,
        id_of: impl Fn(JobId) -> Option<String>,
    ) {
        let fresh = live
            .decisions()
            .rev()
            .take_while(|d| d.seq > self.last)
            .count();
        let skip = live.decisions().len() - fresh;
        for d in live.decisions().skip(skip) {
            self.last = d.seq;
            if let Some(id) = id_of(d.decision.action.job()) {
                self.ids.push_back((d.seq, id));
            }
        }
        while self.ids.len() > KEEP {
            self.ids.pop_front();
        }
    }

    /// The API id of decision `seq`'s job, when recorded.
    pub fn get(&self, seq: u64) -> Option<&str> {
        self.ids
            .binary_search_by_key(&seq, |(s, _)| *s)
            .ok()
            .map(|i| self.ids[i].1.as_str())
    }
}
