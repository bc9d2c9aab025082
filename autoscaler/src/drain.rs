//! When a queued job can start, read from the queue as it stands ([`estimate_start`]): the
//! running jobs free their GPUs at their predicted ends, the jobs ahead of it (in the
//! scheduler's order) take theirs first, and it starts once its GPUs of its type are free.
//!
//! This is a first-come-first-served reading without backfill: it names what holds a job
//! (jobs and GPUs ahead, the releases that make room and when) rather than replace the
//! scheduler. The advisor, the "why am I waiting" answer and the simulator's advice replay
//! all read starts from here, so they agree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The GPU pool a request draws from: its type, or any GPU when it names none.
fn pool_of(gpu_type: Option<&str>) -> String {
    gpu_type.map_or_else(String::new, str::to_lowercase)
}

/// A running job as the estimate reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningShape {
    pub id: String,
    pub gpus: f64,
    pub gpu_type: Option<String>,
    /// Predicted end, seconds on the caller's clock (a time in the past means "any moment").
    pub predicted_end: f64,
}

/// A queued job (or a candidate request) as the estimate reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedShape {
    pub id: String,
    pub gpus: f64,
    pub gpu_type: Option<String>,
    /// Predicted run time once started, seconds.
    pub runtime: f64,
}

/// The cluster as it stands now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// Now, seconds on the caller's clock.
    pub now: f64,
    /// Free GPUs now by type (lower-case type name; `""` for GPUs of no known type).
    pub free: BTreeMap<String, f64>,
    pub running: Vec<RunningShape>,
    /// Queued jobs in the scheduler's order (first is next).
    pub queued: Vec<QueuedShape>,
}

/// A release of GPUs that makes room for the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    /// The running (or ahead-of-it, once started) job that ends.
    pub id: String,
    pub at: f64,
    pub gpus: f64,
}

/// When a job can start and what holds it until then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartEstimate {
    /// Earliest start (`now` when it fits now); `None` when the cluster as seen never frees
    /// enough GPUs of its type (it asks for more than the pool holds).
    pub start: Option<f64>,
    /// Jobs ahead of it in the queue, and the GPUs they ask for.
    pub jobs_ahead: usize,
    pub gpus_ahead: f64,
    /// GPUs of its pool free now.
    pub free_now: f64,
    /// The ends, in time order, that free the GPUs it starts on (empty when it fits now).
    pub releases: Vec<Release>,
}

/// One pool's GPUs over time: free now and the future releases.
#[derive(Default)]
struct Pool {
    free: f64,
    /// (time, gpus, id), unsorted; sorted on demand.
    releases: Vec<(f64, f64, String)>,
}

impl Pool {
    /// Earliest time at or after `from` when `need` GPUs are free (taking them), with the
    /// releases used to get there; `None` when the pool never holds that many.
    fn take(&mut self, need: f64, from: f64) -> Option<(f64, Vec<Release>)> {
        self.releases.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut used = Vec::new();
        let mut t = from;
        while self.free + 1e-9 < need {
            if self.releases.is_empty() {
                return None;
            }
            let (at, gpus, id) = self.releases.remove(0);
            self.free += gpus;
            t = t.max(at);
            used.push(Release { id, at, gpus });
        }
        self.free -= need;
        Some((t, used))
    }
}

/// The start of a job shaped like `job` if it joined the queue of `state` behind the jobs
/// listed before `position` (`None`: at the back). Its own id is skipped in the queue.
pub fn estimate_start(
    state: &QueueState,
    job: &QueuedShape,
    position: Option<usize>,
) -> StartEstimate {
    let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
    for (ty, free) in &state.free {
        pools.entry(ty.to_lowercase()).or_default().free += free.max(0.0);
    }
    for r in &state.running {
        pools
            .entry(pool_of(r.gpu_type.as_deref()))
            .or_default()
            .releases
            .push((
                r.predicted_end.max(state.now),
                r.gpus.max(0.0),
                r.id.clone(),
            ));
    }
    let ahead: Vec<&QueuedShape> = state
        .queued
        .iter()
        .filter(|q| q.id != job.id)
        .take(position.unwrap_or(usize::MAX))
        .collect();
    let pool_name = pool_of(job.gpu_type.as_deref());
    let free_now = pools.get(&pool_name).map_or(0.0, |p| p.free);
    // Jobs ahead start in order (no job starts before the one ahead of it).
    let mut not_before = state.now;
    for q in &ahead {
        let pool = pools.entry(pool_of(q.gpu_type.as_deref())).or_default();
        match pool.take(q.gpus.max(0.0), not_before) {
            Some((start, _)) => {
                not_before = start;
                pool.releases
                    .push((start + q.runtime.max(0.0), q.gpus.max(0.0), q.id.clone()));
            }
            // A job ahead that can never start does not hold the ones behind it.
            None => continue,
        }
    }
    let pool = pools.entry(pool_name).or_default();
    let taken = pool.take(job.gpus.max(0.0), not_before);
    StartEstimate {
        start: taken.as_ref().map(|(t, _)| *t),
        jobs_ahead: ahead.len(),
        gpus_ahead: ahead.iter().map(|q| q.gpus.max(0.0)).sum(),
        free_now,
        releases: taken.map(|(_, r)| r).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(id: &str, gpus: f64, end: f64) -> RunningShape {
        RunningShape {
            id: id.into(),
            gpus,
            gpu_type: None,
            predicted_end: end,
        }
    }

    fn queued(id: &str, gpus: f64, runtime: f64) -> QueuedShape {
        QueuedShape {
            id: id.into(),
            gpus,
            gpu_type: None,
            runtime,
        }
    }

    fn state(free: f64, running: Vec<RunningShape>, queued: Vec<QueuedShape>) -> QueueState {
        QueueState {
            now: 100.0,
            free: BTreeMap::from([(String::new(), free)]),
            running,
            queued,
        }
    }

    #[test]
    fn a_job_that_fits_starts_now() {
        let s = state(4.0, vec![running("r", 4.0, 500.0)], vec![]);
        let e = estimate_start(&s, &queued("j", 2.0, 50.0), None);
        assert_eq!(e.start, Some(100.0));
        assert!(e.releases.is_empty());
        assert_eq!(e.free_now, 4.0);
    }

    #[test]
    fn a_job_waits_for_the_releases_that_free_enough_and_behind_the_jobs_ahead() {
        // 2 free; ends at 300 (2 GPUs) and 600 (4 GPUs). Ahead: a 4-GPU job of 1000 s.
        let s = state(
            2.0,
            vec![running("a", 2.0, 300.0), running("b", 4.0, 600.0)],
            vec![queued("first", 4.0, 1000.0)],
        );
        let e = estimate_start(&s, &queued("me", 4.0, 10.0), None);
        // "first" starts at 300 on 2 free + a's 2; "me" needs 4: b's 4 at 600.
        assert_eq!(e.start, Some(600.0));
        assert_eq!(e.jobs_ahead, 1);
        assert_eq!(e.gpus_ahead, 4.0);
        assert_eq!(
            e.releases,
            vec![Release {
                id: "b".into(),
                at: 600.0,
                gpus: 4.0
            }]
        );
        // At the head of the queue it starts at 300 instead.
        let e = estimate_start(&s, &queued("me", 4.0, 10.0), Some(0));
        assert_eq!(e.start, Some(300.0));
        assert_eq!(e.jobs_ahead, 0);
    }

    #[test]
    fn more_gpus_than_the_pool_holds_never_start_and_do_not_block_others() {
        let s = state(2.0, vec![], vec![queued("huge", 64.0, 10.0)]);
        assert_eq!(
            estimate_start(&s, &queued("me", 100.0, 1.0), None).start,
            None
        );
        assert_eq!(
            estimate_start(&s, &queued("me", 1.0, 1.0), None).start,
            Some(100.0)
        );
    }

    #[test]
    fn types_draw_from_their_own_pool() {
        let mut s = state(0.0, vec![], vec![]);
        s.free.insert("v100".into(), 8.0);
        s.running.push(RunningShape {
            id: "k".into(),
            gpus: 4.0,
            gpu_type: Some("K80".into()),
            predicted_end: 900.0,
        });
        let mut me = queued("me", 4.0, 1.0);
        me.gpu_type = Some("V100".into());
        assert_eq!(estimate_start(&s, &me, None).start, Some(100.0));
        me.gpu_type = Some("k80".into());
        assert_eq!(estimate_start(&s, &me, None).start, Some(900.0));
    }
}
