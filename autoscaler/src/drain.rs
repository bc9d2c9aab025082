//! When a queued job can start, read from the queue as it stands ([`estimate_start`]): the
//! running jobs free their GPUs at their predicted ends, the jobs ahead of it (in the
//! scheduler's order) reserve theirs first, and it starts at the earliest time its GPUs of its
//! type stay free for its whole predicted run time.
//!
//! This is a conservative-backfill reading (as Slurm's backfill scheduler plans): a job may
//! start before jobs ahead of it when it fits in GPUs they cannot use yet, but never delays
//! their reserved starts. It names what holds a job (jobs and GPUs ahead, the releases that
//! make room and when) rather than replace the scheduler. The advisor, the "why am I waiting"
//! answer and the simulator's advice replay all read starts from here, so they agree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The GPU pool a request draws from: its type, or any GPU when it names none.
fn pool_of(gpu_type: Option<&str>) -> String {
    gpu_type.map_or_else(String::new, str::to_lowercase)
}

/// A running job's end as the reading takes it: its predicted end while that is ahead; once
/// passed, now + the time it has run (read to run as long again as it has, the usual guess when
/// only a job's age is known), not "any moment": an overdue job still holds its GPUs.
pub fn read_end(started: f64, predicted_end: f64, now: f64) -> f64 {
    if predicted_end >= now {
        predicted_end
    } else {
        now + (now - started).max(0.0)
    }
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

/// One pool's free GPUs over time, a step function: `steps[i] = (from, free)` holds from
/// `from` until the next step's `from` (the last one forever); `events` are the ends that
/// raise it, for naming the releases that make room.
struct Pool {
    /// GPUs free now, before any overdue end.
    free_now: f64,
    steps: Vec<(f64, f64)>,
    events: Vec<Release>,
}

impl Pool {
    fn new(now: f64, free: f64, mut events: Vec<Release>) -> Self {
        events.sort_by(|a, b| a.at.total_cmp(&b.at));
        let mut steps = vec![(now, free)];
        for e in &events {
            let last = steps.len() - 1;
            let (from, f) = steps[last];
            if e.at <= from {
                steps[last].1 = f + e.gpus;
            } else {
                steps.push((e.at, f + e.gpus));
            }
        }
        Pool {
            free_now: free,
            steps,
            events,
        }
    }

    /// The index of the step holding at `t`, splitting a step there so one starts at `t`.
    fn split_at(&mut self, t: f64) -> usize {
        let i = self.steps.partition_point(|s| s.0 <= t);
        // `t` is never before the first step (every start is at or after `now`).
        let i = i.max(1) - 1;
        if self.steps[i].0 < t {
            let free = self.steps[i].1;
            self.steps.insert(i + 1, (t, free));
            i + 1
        } else {
            i
        }
    }

    /// Earliest time when `need` GPUs stay free for `runtime` seconds (a reservation that
    /// delays no job placed before); `None` when the pool never holds that many.
    fn earliest(&self, need: f64, runtime: f64) -> Option<f64> {
        let n = self.steps.len();
        let mut i = 0;
        while i < n {
            if self.steps[i].1 + 1e-9 < need {
                i += 1;
                continue;
            }
            let t = self.steps[i].0;
            // Every step the run overlaps must hold `need`; on a shortfall, restart after it.
            let mut j = i + 1;
            while j < n && self.steps[j].0 < t + runtime {
                if self.steps[j].1 + 1e-9 < need {
                    break;
                }
                j += 1;
            }
            if j < n && self.steps[j].0 < t + runtime {
                i = j + 1;
                continue;
            }
            return Some(t);
        }
        None
    }

    /// Take `need` GPUs over `[start, start + runtime)`; they come back as a release at the end.
    fn reserve(&mut self, id: &str, need: f64, start: f64, runtime: f64) {
        let end = start + runtime;
        let i = self.split_at(start);
        let j = if runtime > 0.0 { self.split_at(end) } else { i };
        for step in &mut self.steps[i..j] {
            step.1 -= need;
        }
        if runtime > 0.0 {
            self.events.push(Release {
                id: id.to_owned(),
                at: end,
                gpus: need,
            });
        }
    }

    /// The ends that make room for `need` GPUs at `start`, in time order: those after the
    /// last time the pool was at its lowest before `start` (counting the GPUs free now,
    /// before any overdue end) up to `start`; none when the GPUs free now suffice.
    fn releases_for(&self, need: f64, start: f64) -> Vec<Release> {
        // (from, free) of the lowest point; ties go to the later one
        let mut low = (f64::NEG_INFINITY, self.free_now);
        for &(from, free) in self.steps.iter().take_while(|s| s.0 < start) {
            if free <= low.1 {
                low = (from, free);
            }
        }
        if low.1 + 1e-9 >= need {
            return Vec::new();
        }
        let mut used: Vec<Release> = self
            .events
            .iter()
            .filter(|e| e.at > low.0 && e.at <= start)
            .cloned()
            .collect();
        used.sort_by(|a, b| a.at.total_cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        used
    }
}

/// The start of a job shaped like `job` if it joined the queue of `state` behind the jobs
/// listed before `position` (`None`: at the back). Its own id is skipped in the queue.
///
/// Conservative backfill: each job ahead, in order, is placed at the earliest time its GPUs
/// stay free for its whole predicted run time, given the running jobs' predicted ends and the
/// places of the jobs before it; then the job itself the same way. A job may so start before
/// jobs ahead of it, but never delays one of them.
pub fn estimate_start(
    state: &QueueState,
    job: &QueuedShape,
    position: Option<usize>,
) -> StartEstimate {
    let mut free: BTreeMap<String, f64> = BTreeMap::new();
    let mut ends: BTreeMap<String, Vec<Release>> = BTreeMap::new();
    for (ty, f) in &state.free {
        *free.entry(ty.to_lowercase()).or_default() += f.max(0.0);
    }
    for r in &state.running {
        ends.entry(pool_of(r.gpu_type.as_deref()))
            .or_default()
            .push(Release {
                id: r.id.clone(),
                at: r.predicted_end.max(state.now),
                gpus: r.gpus.max(0.0),
            });
    }
    let ahead: Vec<&QueuedShape> = state
        .queued
        .iter()
        .filter(|q| q.id != job.id)
        .take(position.unwrap_or(usize::MAX))
        .collect();
    let pool_name = pool_of(job.gpu_type.as_deref());
    let free_now = free.get(&pool_name).copied().unwrap_or(0.0);
    let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
    let mut pool = |name: String| -> Pool {
        let f = free.get(&name).copied().unwrap_or(0.0);
        Pool::new(state.now, f, ends.remove(&name).unwrap_or_default())
    };
    for q in &ahead {
        let name = pool_of(q.gpu_type.as_deref());
        let p = pools.entry(name.clone()).or_insert_with(|| pool(name));
        let (need, runtime) = (q.gpus.max(0.0), q.runtime.max(0.0));
        // A job ahead that can never start does not hold the ones behind it.
        if let Some(start) = p.earliest(need, runtime) {
            p.reserve(&q.id, need, start, runtime);
        }
    }
    let p = pools
        .entry(pool_name.clone())
        .or_insert_with(|| pool(pool_name));
    let need = job.gpus.max(0.0);
    let start = p.earliest(need, job.runtime.max(0.0));
    StartEstimate {
        start,
        jobs_ahead: ahead.len(),
        gpus_ahead: ahead.iter().map(|q| q.gpus.max(0.0)).sum(),
        free_now,
        releases: start.map_or_else(Vec::new, |t| p.releases_for(need, t)),
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
    fn an_overdue_job_is_read_to_run_as_long_again_as_it_has_run() {
        assert_eq!(read_end(100.0, 400.0, 300.0), 400.0);
        assert_eq!(read_end(100.0, 400.0, 1000.0), 1900.0);
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

    #[test]
    fn a_short_job_backfills_the_hole_before_the_heads_reservation_and_a_long_one_does_not() {
        // 2 free, 4 more at 1000; the head needs all 6 and is reserved [1000, 1500).
        let s = state(
            2.0,
            vec![running("a", 4.0, 1000.0)],
            vec![queued("head", 6.0, 500.0)],
        );
        // 2 GPUs for 900 s end by 1000: they start now without delaying the head.
        let short = estimate_start(&s, &queued("short", 2.0, 900.0), None);
        assert_eq!(short.start, Some(100.0));
        assert!(short.releases.is_empty());
        assert_eq!(short.jobs_ahead, 1);
        assert_eq!(short.gpus_ahead, 6.0);
        // 2 GPUs for 2000 s would overlap the head's run: after the head ends at 1500.
        let long = estimate_start(&s, &queued("long", 2.0, 2000.0), None);
        assert_eq!(long.start, Some(1500.0));
        assert_eq!(
            long.releases,
            vec![Release {
                id: "head".into(),
                at: 1500.0,
                gpus: 6.0
            }]
        );
        // A hole too narrow in GPUs: 3 GPUs never fit beside the head before it ends.
        let wide = estimate_start(&s, &queued("wide", 3.0, 10.0), None);
        assert_eq!(wide.start, Some(1500.0));
    }

    #[test]
    fn a_later_hole_is_found_when_the_earliest_one_is_too_short() {
        // 4 free until the head's reservation [200, 400) takes all 8; all 8 free from 400 on.
        let s = state(
            4.0,
            vec![running("a", 4.0, 200.0)],
            vec![queued("head", 8.0, 200.0)],
        );
        // 50 s fits before 200; 150 s does not and waits for the head to end at 400.
        assert_eq!(
            estimate_start(&s, &queued("j", 4.0, 50.0), None).start,
            Some(100.0)
        );
        assert_eq!(
            estimate_start(&s, &queued("j", 4.0, 150.0), None).start,
            Some(400.0)
        );
    }
}
