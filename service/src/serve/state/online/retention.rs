//! The retention window of the job table: a run that finished more than the window (in job
//! time: the events' clock, so a replay evicts exactly what the live service evicted)
//! before the latest event leaves [`super::Online::jobs`] / `earlier_runs` and the
//! predictors' per-job state. What it taught the aggregated state (feature histories,
//! calibration windows, risk-split offsets) stays; its events stay in the store.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::{run_id, JobInfo, Online};

/// Finished runs held in memory, by finish time, and what was evicted (serialisable: a
/// snapshot of the online state keeps it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Retention {
    /// Seconds of job time a finished run is held; `None` keeps every run.
    window: Option<f64>,
    /// (finish time in milliseconds, job id, run) of the finished runs held, oldest first.
    finished: BinaryHeap<Reverse<(i64, String, u32)>>,
    /// Runs evicted so far.
    pub evicted: u64,
    /// The latest finish time of an evicted run: jobs that finished before it may be gone.
    pub horizon: Option<f64>,
}

/// Milliseconds, for ordering finish times in the heap.
fn millis(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

impl Retention {
    /// Holds finished runs for `window` seconds of job time (`None`: forever).
    pub fn new(window: Option<f64>) -> Retention {
        Retention {
            window: window.filter(|w| w.is_finite() && *w >= 0.0),
            ..Retention::default()
        }
    }

    /// The window in seconds, when one is set.
    pub fn window(&self) -> Option<f64> {
        self.window
    }

    /// Notes that run `run` of `job_id` finished at `at`.
    pub fn finished(&mut self, job_id: &str, run: u32, at: f64) {
        if self.window.is_some() {
            self.finished
                .push(Reverse((millis(at), job_id.to_string(), run)));
        }
    }

    /// Takes the runs that finished before `clock − window` (oldest first).
    pub fn expired(&mut self, clock: f64) -> Vec<(String, u32)> {
        let Some(window) = self.window else {
            return Vec::new();
        };
        let cutoff = millis(clock - window);
        let mut out = Vec::new();
        while self
            .finished
            .peek()
            .is_some_and(|Reverse((t, ..))| *t < cutoff)
        {
            let Some(Reverse((t, id, run))) = self.finished.pop() else {
                break;
            };
            let at = t as f64 / 1000.0;
            self.horizon = Some(self.horizon.map_or(at, |h| h.max(at)));
            out.push((id, run));
        }
        out
    }

    /// Finished runs held (and waiting to be evicted).
    pub fn held(&self) -> usize {
        self.finished.len()
    }
}

impl Online {
    /// The highest sequence number the store may move to the archive: every event before
    /// the first event of the oldest run still held (finished within the retention window,
    /// or unfinished and submitted within it). 0 without a retention window.
    pub fn compactable_upto(&self) -> i64 {
        let (Some(window), Some(clock)) = (self.retention.window(), self.clock) else {
            return 0;
        };
        let cutoff = clock - window;
        let holds =
            |j: &JobInfo| j.finished_at.is_some() || j.submitted_at.is_some_and(|s| s >= cutoff);
        self.jobs
            .values()
            .chain(self.earlier_runs.values().flatten())
            .filter(|j| holds(j))
            .map(|j| j.first_seq - 1)
            .min()
            .unwrap_or(self.last_seq)
            .min(self.last_seq)
    }

    /// Drops the finished runs past the retention window from the job table and from the
    /// predictors' per-job state.
    pub(super) fn evict_expired(&mut self) {
        let Some(clock) = self.clock else {
            return;
        };
        for (id, run) in self.retention.expired(clock) {
            let latest = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.run == run && j.finished_at.is_some());
            let removed = if latest {
                self.jobs.remove(&id).is_some()
            } else if let Some(runs) = self.earlier_runs.get_mut(&id) {
                let before = runs.len();
                runs.retain(|j| j.run != run);
                let removed = runs.len() < before;
                if runs.is_empty() {
                    self.earlier_runs.remove(&id);
                }
                removed
            } else {
                false
            };
            if !removed {
                continue;
            }
            self.retention.evicted += 1;
            let pid = run_id(&id, run);
            for state in self.states.values_mut() {
                state.forget(&pid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_leave_after_the_window_in_finish_order() {
        let mut r = Retention::new(Some(100.0));
        r.finished("b", 1, 50.0);
        r.finished("a", 1, 10.0);
        r.finished("c", 2, 200.0);
        assert!(
            r.expired(100.0).is_empty(),
            "nothing is older than 100 s yet"
        );
        assert_eq!(
            r.expired(160.0),
            vec![("a".to_string(), 1), ("b".to_string(), 1)]
        );
        assert_eq!(r.horizon, Some(50.0));
        assert_eq!(r.held(), 1);
        assert!(r.expired(299.0).is_empty());
        assert_eq!(r.expired(301.0), vec![("c".to_string(), 2)]);
    }

    #[test]
    fn no_window_keeps_everything() {
        let mut r = Retention::new(None);
        r.finished("a", 1, 0.0);
        assert!(r.expired(1e12).is_empty());
        assert_eq!(r.held(), 0);
    }
}
