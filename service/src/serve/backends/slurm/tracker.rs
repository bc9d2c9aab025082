//! What the Slurm backend has told the store about each job run, and the store events a new
//! observation (a `squeue` poll, `sacct` records) adds: submit, start and finish once each,
//! in that order, at Slurm's wall times.
//!
//! A run is keyed by Slurm's job id and its submit time: an id Slurm reuses (after a restart
//! of the controller, or a requeue that resubmits) is a new run. Its id in the store is
//! `<cluster>/<slurm id>@<submit unix seconds>` ([`store_id`]).

use std::collections::{HashMap, HashSet};

use augur_datasets::{JobRecord, JobStatus};

use super::commands::QueuedJob;
use crate::serve::state::events::{Event, FinishStatus, JobProfile};

/// Polls a job may be missing from `squeue` without a finish in `sacct` before it is
/// recorded as finished with an unknown status (accounting off or far behind).
pub const MISSING_POLLS: u32 = 40;
/// How long a finished run is remembered (so `sacct` windows that still list it add
/// nothing), seconds after its finish.
const FORGET_AFTER_S: f64 = 6.0 * 3600.0;

/// The store id of the run of Slurm job `id` submitted at `submit` on `cluster`.
pub fn store_id(cluster: &str, id: &str, submit: f64) -> String {
    format!("{cluster}/{id}@{}", submit.round() as i64)
}

/// The Slurm job id in a store id made by [`store_id`] for `cluster`.
pub fn slurm_id<'a>(cluster: &str, store_id: &'a str) -> Option<&'a str> {
    let rest = store_id.strip_prefix(cluster)?.strip_prefix('/')?;
    rest.rsplit_once('@').map(|(id, _)| id)
}

#[derive(Debug, Clone, Default)]
struct Run {
    started: bool,
    finished_at: Option<f64>,
    /// Consecutive polls in which an unfinished run was not in `squeue`.
    missing: u32,
    last_seen: f64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Tracker {
    cluster: String,
    runs: HashMap<String, Run>,
    /// Slurm's expected start of each pending run (store id → Unix seconds).
    estimates: HashMap<String, f64>,
    /// Slurm's reason each pending run waits (store id → `Priority`, `Resources`, ...).
    reasons: HashMap<String, String>,
    /// Pending runs that ask for whole nodes (`--exclusive`).
    whole_nodes: HashSet<String>,
}

impl Tracker {
    pub fn new(cluster: &str) -> Tracker {
        Tracker {
            cluster: cluster.to_string(),
            ..Tracker::default()
        }
    }

    /// Remembers a run the store already holds (after a restart).
    pub fn restore(&mut self, store_id: &str, started: bool, finished_at: Option<f64>) {
        self.runs.insert(
            store_id.to_string(),
            Run {
                started,
                finished_at,
                missing: 0,
                last_seen: finished_at.unwrap_or(0.0),
            },
        );
    }

    /// Runs known and not finished.
    pub fn open_runs(&self) -> usize {
        self.runs
            .values()
            .filter(|r| r.finished_at.is_none())
            .count()
    }

    /// Slurm's expected start of each pending run, by store id.
    pub fn estimates(&self) -> &HashMap<String, f64> {
        &self.estimates
    }

    /// Slurm's reason each pending run waits, by store id.
    pub fn reasons(&self) -> &HashMap<String, String> {
        &self.reasons
    }

    /// The pending runs that ask for whole nodes, by store id.
    pub fn whole_nodes(&self) -> &HashSet<String> {
        &self.whole_nodes
    }

    /// The events one `squeue` poll adds: submits of new runs, starts of runs now running.
    /// Unfinished runs not listed count a missed poll; after [`MISSING_POLLS`] they are
    /// recorded finished (unknown status) at the last time they were seen.
    pub fn observe_queue(&mut self, jobs: &[QueuedJob], now: f64) -> Vec<Event> {
        let mut out = Vec::new();
        let mut listed = std::collections::HashSet::new();
        self.estimates.clear();
        self.reasons.clear();
        self.whole_nodes.clear();
        for j in jobs {
            let id = store_id(&self.cluster, &j.id, j.submit);
            listed.insert(id.clone());
            let run = self.runs.entry(id.clone()).or_insert_with(|| {
                out.push(Event::JobSubmitted {
                    job_id: id.clone(),
                    at: j.submit,
                    profile: queued_profile(j, &self.cluster),
                    dag: None,
                });
                Run::default()
            });
            run.missing = 0;
            run.last_seen = now;
            if run.finished_at.is_some() {
                continue;
            }
            if j.running && !run.started {
                run.started = true;
                out.push(Event::JobStarted {
                    job_id: id.clone(),
                    at: j.start.unwrap_or(now),
                });
            }
            if !j.running && j.whole_nodes {
                self.whole_nodes.insert(id.clone());
            }
            if !j.running && !j.reason.is_empty() && j.reason != "None" {
                self.reasons.insert(id.clone(), j.reason.clone());
            }
            if let (false, Some(start)) = (j.running, j.start) {
                self.estimates.insert(id, start);
            }
        }
        for (id, run) in &mut self.runs {
            if run.finished_at.is_some() || listed.contains(id) {
                continue;
            }
            run.missing += 1;
            if run.missing >= MISSING_POLLS {
                run.finished_at = Some(run.last_seen);
                out.push(Event::JobFinished {
                    job_id: id.clone(),
                    at: run.last_seen.max(0.0),
                    status: FinishStatus::Unknown,
                    duration: None,
                });
            }
        }
        out
    }

    /// The events `sacct` records add: every ended run's finish (with its submit and start
    /// first when the store has not had them: a job that ran between two polls, or the
    /// history read at first start). Records of jobs not ended add nothing (`squeue` says
    /// more about them). Forgets runs finished long before `now`.
    pub fn observe_accounting(&mut self, records: &[JobRecord], now: f64) -> Vec<Event> {
        let mut out = Vec::new();
        for r in records {
            let (Some(end), Some(status)) = (r.end_time, finish_status(r.status)) else {
                continue;
            };
            let id = store_id(&self.cluster, &r.job_id, r.submit_time);
            let run = self.runs.entry(id.clone()).or_insert_with(|| {
                out.push(Event::JobSubmitted {
                    job_id: id.clone(),
                    at: r.submit_time,
                    profile: record_profile(r, &self.cluster),
                    dag: None,
                });
                Run::default()
            });
            if run.finished_at.is_some() {
                continue;
            }
            if let (false, Some(start)) = (run.started, r.start_time) {
                run.started = true;
                out.push(Event::JobStarted {
                    job_id: id.clone(),
                    at: start,
                });
            }
            run.finished_at = Some(end);
            out.push(Event::JobFinished {
                job_id: id,
                at: end,
                status,
                duration: r.duration.filter(|d| d.is_finite() && *d >= 0.0),
            });
        }
        self.runs
            .retain(|_, run| run.finished_at.is_none_or(|f| f + FORGET_AFTER_S >= now));
        out
    }
}

/// The store's status of an ended Slurm state; `None` while the job has not ended.
fn finish_status(s: JobStatus) -> Option<FinishStatus> {
    match s {
        JobStatus::Completed => Some(FinishStatus::Completed),
        JobStatus::Failed => Some(FinishStatus::Failed),
        JobStatus::Killed => Some(FinishStatus::Killed),
        JobStatus::Unknown => None,
    }
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn queued_profile(j: &QueuedJob, cluster: &str) -> JobProfile {
    JobProfile {
        num_gpus: Some(j.gpus),
        num_nodes: j.nodes,
        gpu_type: j.gpu_type.clone(),
        cpus: j.cpus,
        requested_time: j.time_limit,
        user: non_empty(&j.user),
        group: non_empty(&j.account),
        job_name: non_empty(&j.name),
        cluster: non_empty(cluster),
        queue: non_empty(&j.partition),
        ..JobProfile::default()
    }
}

fn record_profile(r: &JobRecord, cluster: &str) -> JobProfile {
    JobProfile {
        num_gpus: Some(r.num_gpus.unwrap_or(0.0)),
        num_nodes: r.num_nodes,
        gpu_type: r.gpu_type.clone(),
        cpus: r.cpus,
        memory_mib: r.memory_mib,
        requested_time: r.requested_time,
        user: r.user.clone(),
        group: r.group.clone(),
        job_name: r.job_name.clone(),
        cluster: non_empty(cluster),
        queue: r.queue.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(id: &str, submit: f64, start: Option<f64>, running: bool) -> QueuedJob {
        QueuedJob {
            id: id.into(),
            submit,
            start,
            running,
            user: "alice".into(),
            account: "ml".into(),
            partition: "debug".into(),
            nodes: Some(1.0),
            cpus: Some(1.0),
            time_limit: Some(600.0),
            gpus: 1.0,
            gpu_type: None,
            reason: if running { "None" } else { "Priority" }.into(),
            whole_nodes: !running,
            name: "train".into(),
        }
    }

    fn ended(id: &str, submit: f64, start: Option<f64>, end: f64, status: JobStatus) -> JobRecord {
        JobRecord {
            job_id: id.into(),
            submit_time: submit,
            start_time: start,
            end_time: Some(end),
            duration: start.map(|s| end - s),
            status,
            ..JobRecord::default()
        }
    }

    fn kinds(evs: &[Event]) -> Vec<(&'static str, String)> {
        evs.iter()
            .map(|e| {
                let id = match e {
                    Event::JobSubmitted { job_id, .. }
                    | Event::JobStarted { job_id, .. }
                    | Event::JobFinished { job_id, .. } => job_id.clone(),
                    _ => String::new(),
                };
                (e.kind(), id)
            })
            .collect()
    }

    #[test]
    fn each_run_is_submitted_started_and_finished_once_in_order() {
        let mut t = Tracker::new("c");
        let evs = t.observe_queue(&[queued("1", 100.0, Some(150.0), false)], 110.0);
        assert_eq!(kinds(&evs), [("job_submitted", "c/1@100".into())]);
        assert_eq!(t.estimates().get("c/1@100"), Some(&150.0));
        assert_eq!(
            t.reasons().get("c/1@100").map(String::as_str),
            Some("Priority")
        );
        assert!(t.whole_nodes().contains("c/1@100"));
        // same poll again: nothing new
        assert!(t
            .observe_queue(&[queued("1", 100.0, Some(150.0), false)], 120.0)
            .is_empty());
        let evs = t.observe_queue(&[queued("1", 100.0, Some(140.0), true)], 145.0);
        assert_eq!(kinds(&evs), [("job_started", "c/1@100".into())]);
        assert!(t.estimates().is_empty());
        assert!(t.reasons().is_empty(), "a running job waits for nothing");
        assert!(t.whole_nodes().is_empty());
        let done = ended("1", 100.0, Some(140.0), 200.0, JobStatus::Failed);
        let evs = t.observe_accounting(std::slice::from_ref(&done), 205.0);
        assert_eq!(kinds(&evs), [("job_finished", "c/1@100".into())]);
        assert!(matches!(
            evs[0],
            Event::JobFinished { at, status: FinishStatus::Failed, duration: Some(d), .. } if at == 200.0 && d == 60.0
        ));
        // the next sacct window still lists it: nothing new
        assert!(t.observe_accounting(&[done], 210.0).is_empty());
        // a reused id with a new submit time is a new run
        let evs = t.observe_queue(&[queued("1", 300.0, None, false)], 301.0);
        assert_eq!(kinds(&evs), [("job_submitted", "c/1@300".into())]);
        assert_eq!(slurm_id("c", "c/1@300"), Some("1"));
        assert_eq!(slurm_id("d", "c/1@300"), None);
    }

    #[test]
    fn jobs_seen_only_by_accounting_and_vanished_jobs_are_completed() {
        let mut t = Tracker::new("c");
        // ran between two polls: submit, start and finish from sacct
        let quick = ended("5", 10.0, Some(12.0), 20.0, JobStatus::Completed);
        // cancelled while pending: submit and finish, no start
        let cancelled = ended("6", 10.0, None, 15.0, JobStatus::Killed);
        let running = JobRecord {
            end_time: None,
            status: JobStatus::Unknown,
            ..ended("7", 10.0, Some(11.0), 0.0, JobStatus::Unknown)
        };
        let evs = t.observe_accounting(&[quick, cancelled, running], 30.0);
        let k: Vec<&str> = evs.iter().map(Event::kind).collect();
        assert_eq!(
            k,
            [
                "job_submitted",
                "job_started",
                "job_finished",
                "job_submitted",
                "job_finished"
            ]
        );
        // a job that leaves squeue without any accounting record
        t.observe_queue(&[queued("8", 40.0, None, true)], 41.0);
        let mut finished = Vec::new();
        for i in 0..MISSING_POLLS {
            finished.extend(t.observe_queue(&[], 42.0 + f64::from(i)));
        }
        assert_eq!(kinds(&finished), [("job_finished", "c/8@40".into())]);
        assert!(matches!(
            finished[0],
            Event::JobFinished { at, status: FinishStatus::Unknown, .. } if at == 41.0
        ));
        assert_eq!(t.open_runs(), 0);
    }
}
