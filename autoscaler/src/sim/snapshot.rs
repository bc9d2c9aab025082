//! The simulator's state as a [`ClusterState`] (the buffers are reused between decisions).

use super::engine::Simulator;
use super::job::{job_id, State};
use crate::cluster::{ClusterState, QueuedJob, RunningJob};

impl Simulator {
    /// Fills the reused snapshot buffers with the state now.
    pub(super) fn fill_snapshot(&mut self) {
        self.queue.retain(|&i| {
            self.jobs
                .get(i as usize)
                .is_some_and(|j| j.state == State::Queued)
        });
        for k in 0..self.running.len() {
            if let Some(&i) = self.running.get(k) {
                self.sync(i);
            }
        }
        let snap = &mut self.snap;
        snap.time = self.now;
        for (k, n) in snap.nodes.iter_mut().enumerate() {
            n.free = self.cap.free(k as u32);
            n.healthy = self.cap.healthy(k as u32);
        }
        snap.running.clear();
        snap.slots.clear();
        for &i in &self.running {
            let Some(j) = self.jobs.get(i as usize) else {
                continue;
            };
            let a = snap.slots.len() as u32;
            snap.slots.extend_from_slice(&j.slots);
            snap.running.push(RunningJob {
                id: job_id(i),
                submitted: j.src.submit,
                first_started: j.first_start.unwrap_or(j.started),
                started: j.started,
                workers: j.workers,
                requested: j.requested,
                min_workers: j.min,
                max_workers: j.max,
                restarting: j.restarting,
                attained_gpu_s: j.attained,
                progress_s: Some(j.done),
                predicted_runtime: j.src.predicted,
                oracle_remaining_s: Some((j.work - j.done).max(0.0)),
                last_rescale: j.last_rescale,
                slots: (a, snap.slots.len() as u32),
            });
        }
        snap.queued.clear();
        for &i in &self.queue {
            let Some(j) = self.jobs.get(i as usize) else {
                continue;
            };
            snap.queued.push(QueuedJob {
                id: job_id(i),
                submitted: j.src.submit,
                queued_since: j.queued_since,
                requested: j.requested,
                min_workers: j.min,
                max_workers: j.max,
                attained_gpu_s: j.attained,
                run_s: j.held_s,
                progress_s: Some(j.done),
                predicted_runtime: j.src.predicted,
                oracle_remaining_s: Some((j.work - j.done).max(0.0)),
                gpu_type: None,
                type_open: true,
            });
        }
    }

    /// The cluster now (snapshot buffers are refreshed).
    pub fn snapshot(&mut self) -> &ClusterState {
        self.fill_snapshot();
        &self.snap
    }
}
