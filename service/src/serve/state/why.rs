//! Why a queued job waits: Augur's reading of the online state for one job — the jobs and
//! GPUs ahead of it, the shape it waits for, the running jobs whose predicted ends free
//! enough GPUs for it and when — with the scheduler's own reason beside it (Slurm's
//! `Reason`). `GET /v1/jobs/{id}` and `GET /v1/eta?why=true` both read it from here.
//!
//! The queue is read with conservative backfill by
//! [`augur_autoscaler::drain::estimate_start`]:
//! - running jobs (started, not finished) free their GPUs at their start plus the runtime
//!   predicted at their submit (else their requested time limit; with neither they free
//!   nothing Augur can time);
//! - the jobs queued before it (submit order; in its queue or partition where both name
//!   one) reserve their GPUs first, each at its earliest fit for the runtime predicted at its
//!   submit; the job starts at its earliest fit after them, which may be before some of
//!   them when it ends before their reservations;
//! - the GPUs free now are the latest cluster snapshot's total minus busy. The snapshot
//!   gives no per-type counts, so GPU types are one pool unless the backend knows the free
//!   GPUs by type and every job in the reading names its type.
//!
//! This queue-drain start is not the queue-wait model's: the model's median start (the ETA
//! of `GET /v1/eta` and `GET /v1/jobs/{id}`) learns from past waits (backfill, priorities,
//! limits), the drain reads only the queue as it stands. Both are given, each named.

use std::collections::BTreeMap;

use augur_autoscaler::drain::{estimate_start, read_end, QueueState, QueuedShape, RunningShape};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::online::{JobInfo, Online, WaitAnswer};
use crate::serve::backends::ServeBackend;

/// Ids of the jobs ahead listed by name (the count covers them all).
const AHEAD_LISTED: usize = 5;
/// Releases named in the one-sentence reading (the list holds them all).
const RELEASES_NAMED: usize = 3;

/// Augur's reading of why a queued job waits, with the scheduler's reason beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhyWaiting {
    /// Augur's reading in one sentence, e.g. "waits for 8 GPUs: 3 jobs (20 GPUs) ahead, 2
    /// free now; frees at ~14:05 UTC (in 25m) when jobs 41, 42 end".
    pub reading: String,
    /// What it asks for.
    pub shape: WaitShape,
    /// The jobs queued before it (in its queue where known) and the GPUs they ask for.
    pub ahead: Ahead,
    /// GPUs of its pool free now (latest cluster snapshot); `None` before the first.
    pub free_gpus: Option<f64>,
    /// The most GPUs any cluster snapshot reported.
    pub cluster_gpus: Option<f64>,
    /// The predicted ends that free the GPUs it starts on, in time order (empty when it
    /// fits now or never does).
    pub releases: Vec<WhyRelease>,
    /// Its start as each reading gives it.
    pub start: WhyStart,
    /// The scheduler's own reason for the wait (`--backend slurm`: Slurm's `Reason`, e.g.
    /// `Priority`, `Resources`, `QOSMaxGPUPerUserLimit`).
    pub scheduler_reason: Option<String>,
    /// What the reading rests on or leaves out.
    pub notes: Vec<String>,
}

/// The resources a queued job waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WaitShape {
    pub gpus: f64,
    pub gpu_type: Option<String>,
    pub nodes: Option<f64>,
    pub cpus: Option<f64>,
    /// It asks for whole nodes (Slurm's `--exclusive`).
    pub whole_nodes: bool,
    /// In words: "8 GPUs", "16 GPUs (v100) as a gang over 2 nodes", "no GPUs (2 CPUs)",
    /// "8 GPUs on a whole node".
    pub description: String,
}

/// The jobs ahead of a queued job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Ahead {
    pub jobs: usize,
    pub gpus: f64,
    /// The queue (partition) they share with it, when it names one.
    pub queue: Option<String>,
    /// The first of them (the scheduler's ids where it has its own), next first.
    pub first: Vec<String>,
}

/// A predicted end that frees GPUs for the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhyRelease {
    pub job_id: String,
    /// The scheduler's own id (`--backend slurm`).
    pub scheduler_id: Option<String>,
    pub job_name: Option<String>,
    /// Its predicted end.
    pub at: f64,
    pub gpus: f64,
    /// Running now (else a job ahead that starts and ends first).
    pub running: bool,
}

/// A queued job's start, as each reading gives it (Unix seconds on the events' clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhyStart {
    /// The queue-drain reading: when the running jobs' predicted ends and the jobs ahead
    /// leave enough GPUs for it (conservative backfill: it may pass a job ahead only without
    /// delaying its reserved start); `None` when they never do as the cluster stands, or
    /// without cluster metrics.
    pub queue_drain: Option<f64>,
    /// The queue-wait model's median start (submit + the wait predicted at submit, not
    /// before now): the ETA's `start`.
    pub queue_wait_model: Option<f64>,
    /// The queue-wait model's bound (the ETA's `start_upper`).
    pub queue_wait_model_upper: Option<f64>,
    /// The scheduler's own expected start (Slurm's `squeue --start`).
    pub scheduler: Option<f64>,
}

/// The queue-wait model's start of a job submitted at `submit` whose wait predicted at
/// submit is `wait`, read at `now` (a start already past reads as now): the ETA's start.
pub fn model_start(submit: f64, wait: Option<&WaitAnswer>, now: f64) -> Option<f64> {
    wait.map(|w| (submit + w.seconds).max(now))
}

/// The 95% bound of [`model_start`].
pub fn model_start_upper(submit: f64, wait: Option<&WaitAnswer>, now: f64) -> Option<f64> {
    wait.map(|w| (submit + w.upper).max(now))
}

/// A job of the queue as the reading needs it (copied out of the online state, so the
/// reading runs off its lock).
#[derive(Debug, Clone)]
struct Entry {
    id: String,
    name: Option<String>,
    submit: f64,
    /// Sequence number of its run's first event: the order of equal submit times.
    seq: i64,
    gpus: f64,
    gpu_type: Option<String>,
    nodes: Option<f64>,
    cpus: Option<f64>,
    queue: Option<String>,
    /// Predicted run time: predicted at submit, else its time limit.
    runtime: Option<f64>,
    runtime_is_limit: bool,
    wait: Option<WaitAnswer>,
    started: Option<f64>,
}

impl Entry {
    fn of(j: &JobInfo) -> Option<Entry> {
        let submit = j.submitted_at?;
        let p = j.profile.clone().unwrap_or_default();
        let predicted = j.runtime_at_submit.map(|r| r.seconds);
        let limit = p.requested_time.filter(|t| t.is_finite() && *t > 0.0);
        Some(Entry {
            id: j.job_id.clone(),
            name: p.job_name,
            submit,
            seq: j.first_seq,
            gpus: p.num_gpus.filter(|g| g.is_finite()).unwrap_or(0.0).max(0.0),
            gpu_type: p.gpu_type.map(|t| t.to_lowercase()),
            nodes: p.num_nodes,
            cpus: p.cpus,
            queue: p.queue,
            runtime: predicted.or(limit),
            runtime_is_limit: predicted.is_none() && limit.is_some(),
            wait: j.queue_wait_at_submit,
            started: j.started_at,
        })
    }
}

/// The queue as the online state holds it at one moment: running and queued jobs, and the
/// latest cluster snapshot's GPUs. Taken under the online state's lock (one pass over the
/// jobs), read after it is released.
#[derive(Debug, Clone)]
pub struct QueueSnapshot {
    now: f64,
    running: Vec<Entry>,
    /// In submit order.
    queued: Vec<Entry>,
    /// Free GPUs now (total − busy of the latest cluster snapshot).
    free: Option<f64>,
    /// Free GPUs by type, when the backend knows them (lower-case type names).
    free_by_type: Option<BTreeMap<String, f64>>,
    /// The most GPUs any cluster snapshot reported.
    largest: Option<f64>,
}

impl QueueSnapshot {
    /// The queue of `online` at `now`.
    pub fn of(online: &Online, now: f64) -> QueueSnapshot {
        let mut running = Vec::new();
        let mut queued = Vec::new();
        for j in online.jobs.values().filter(|j| j.finished_at.is_none()) {
            let Some(e) = Entry::of(j) else { continue };
            if e.started.is_some() {
                running.push(e);
            } else {
                queued.push(e);
            }
        }
        queued.sort_by(|a, b| {
            a.submit
                .total_cmp(&b.submit)
                .then(a.seq.cmp(&b.seq))
                .then_with(|| a.id.cmp(&b.id))
        });
        running.sort_by(|a, b| a.id.cmp(&b.id));
        QueueSnapshot {
            now,
            running,
            queued,
            free: online
                .last_snapshot
                .as_ref()
                .map(|s| (s.total_gpus - s.busy_gpus).max(0.0)),
            free_by_type: None,
            largest: online.largest_gpus,
        }
    }

    /// This snapshot with the free GPUs by type the backend reports (lower-case names).
    pub fn with_free_by_type(mut self, free: Option<BTreeMap<String, f64>>) -> QueueSnapshot {
        self.free_by_type = free.map(|m| {
            let mut out = BTreeMap::new();
            for (k, v) in m {
                *out.entry(k.to_lowercase()).or_insert(0.0) += v.max(0.0);
            }
            out
        });
        self
    }

    /// Whether `job_id` is queued here.
    pub fn is_queued(&self, job_id: &str) -> bool {
        self.queued.iter().any(|e| e.id == job_id)
    }

    /// Why the queued job `job_id` waits (`None` when it is not queued), its scheduler ids
    /// and reason from `backend`.
    pub fn why(&self, job_id: &str, backend: &dyn ServeBackend) -> Option<WhyWaiting> {
        let pos = self.queued.iter().position(|e| e.id == job_id)?;
        let me = &self.queued[pos];
        let mut notes = Vec::new();
        let ahead: Vec<&Entry> = self.queued[..pos]
            .iter()
            .filter(|e| match (&me.queue, &e.queue) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            })
            .collect();
        let shown = |e: &Entry| backend.scheduler_id(&e.id).unwrap_or_else(|| e.id.clone());
        let ahead_view = Ahead {
            jobs: ahead.len(),
            gpus: ahead.iter().map(|e| e.gpus).sum(),
            queue: me.queue.clone(),
            first: ahead.iter().take(AHEAD_LISTED).map(|e| shown(e)).collect(),
        };
        if me.queue.is_some() {
            notes.push(format!(
                "jobs ahead: those queued before it in {} (or naming no queue); jobs of other queues are not counted",
                me.queue.as_deref().unwrap_or_default()
            ));
        }

        // typed pools only when the backend knows free GPUs by type and every job in the
        // reading names its type; else one pool
        let gpu_users = || {
            self.running
                .iter()
                .chain(ahead.iter().copied())
                .chain(std::iter::once(me))
                .filter(|e| e.gpus > 0.0)
        };
        let typed = self.free_by_type.is_some() && gpu_users().all(|e| e.gpu_type.is_some());
        let ty = |e: &Entry| if typed { e.gpu_type.clone() } else { None };
        if !typed && gpu_users().any(|e| e.gpu_type.is_some()) {
            notes.push(
                "GPU types read as one pool: the cluster metrics give no free GPUs by type for every job here"
                    .into(),
            );
        }
        let free = if typed {
            self.free_by_type.clone()
        } else {
            self.free.map(|f| BTreeMap::from([(String::new(), f)]))
        };
        let no_end: Vec<&Entry> = self
            .running
            .iter()
            .filter(|e| e.gpus > 0.0 && e.runtime.is_none())
            .collect();
        if !no_end.is_empty() {
            notes.push(format!(
                "{} running job(s) with GPUs have no predicted run time or time limit: their GPUs free at no time Augur can read",
                no_end.len()
            ));
        }
        let limits = self
            .running
            .iter()
            .chain(ahead.iter().copied())
            .filter(|e| e.gpus > 0.0 && e.runtime_is_limit)
            .count();
        if limits > 0 {
            notes.push(format!(
                "{limits} job(s) have no runtime predicted at submit: their time limit stands in"
            ));
        }
        let overdue = self
            .running
            .iter()
            .filter(|e| {
                e.gpus > 0.0
                    && e.started
                        .zip(e.runtime)
                        .is_some_and(|(s, r)| s + r < self.now)
            })
            .count();
        if overdue > 0 {
            notes.push(format!(
                "{overdue} running job(s) are past their predicted end: each is read to run as long again as it has run"
            ));
        }
        let state = QueueState {
            now: self.now,
            free: free.clone().unwrap_or_default(),
            running: self
                .running
                .iter()
                .filter_map(|e| {
                    Some(RunningShape {
                        id: e.id.clone(),
                        gpus: e.gpus,
                        gpu_type: ty(e),
                        predicted_end: read_end(e.started?, e.started? + e.runtime?, self.now),
                    })
                })
                .collect(),
            queued: ahead
                .iter()
                .map(|e| QueuedShape {
                    id: e.id.clone(),
                    gpus: e.gpus,
                    gpu_type: ty(e),
                    runtime: e.runtime.unwrap_or(0.0),
                })
                .collect(),
        };
        let shape = QueuedShape {
            id: me.id.clone(),
            gpus: me.gpus,
            gpu_type: ty(me),
            runtime: me.runtime.unwrap_or(0.0),
        };
        let estimate = estimate_start(&state, &shape, None);
        let too_big = self.largest.is_some_and(|l| me.gpus > l);
        let drain = if free.is_none() || too_big || me.gpus == 0.0 {
            None
        } else {
            estimate.start
        };
        let running_ids: std::collections::HashSet<&str> =
            self.running.iter().map(|e| e.id.as_str()).collect();
        let entry_of = |id: &str| {
            self.running
                .iter()
                .chain(ahead.iter().copied())
                .find(|e| e.id == id)
        };
        // the ends that free its GPUs: those its own start takes, and, when it waits, every
        // running job of its pool that ends by then (a job ahead may have taken the first)
        let mut freed: Vec<(String, f64, f64)> = estimate
            .releases
            .iter()
            .map(|r| (r.id.clone(), r.at, r.gpus))
            .collect();
        if let Some(t) = drain.filter(|t| *t > self.now || !freed.is_empty()) {
            for r in &state.running {
                let at = r.predicted_end.max(self.now);
                if r.gpu_type == shape.gpu_type && at <= t && !freed.iter().any(|f| f.0 == r.id) {
                    freed.push((r.id.clone(), at, r.gpus));
                }
            }
        }
        freed.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        let releases: Vec<WhyRelease> = if drain.is_some() {
            freed
                .into_iter()
                .map(|(id, at, gpus)| WhyRelease {
                    scheduler_id: backend.scheduler_id(&id),
                    job_name: entry_of(&id).and_then(|e| e.name.clone()),
                    running: running_ids.contains(id.as_str()),
                    job_id: id,
                    at,
                    gpus,
                })
                .collect()
        } else {
            Vec::new()
        };
        let start = WhyStart {
            queue_drain: drain,
            queue_wait_model: model_start(me.submit, me.wait.as_ref(), self.now),
            queue_wait_model_upper: model_start_upper(me.submit, me.wait.as_ref(), self.now),
            scheduler: backend.scheduler_start(&me.id),
        };
        let whole_nodes = backend.whole_nodes(&me.id);
        if whole_nodes {
            notes.push(
                "it asks for whole nodes: the reading counts free GPUs, not idle nodes, so it may start later"
                    .into(),
            );
        }
        let shape = WaitShape {
            gpus: me.gpus,
            gpu_type: me.gpu_type.clone(),
            nodes: me.nodes,
            cpus: me.cpus,
            whole_nodes,
            description: describe(me, whole_nodes),
        };
        let free_gpus = free.as_ref().map(|_| estimate.free_now);
        let why = Reading {
            now: self.now,
            shape: &shape,
            ahead: &ahead_view,
            free: free_gpus,
            largest: self.largest,
            releases: &releases,
            start: &start,
            no_end: no_end.len(),
        };
        Some(WhyWaiting {
            reading: why.sentence(),
            shape,
            ahead: ahead_view,
            free_gpus,
            cluster_gpus: self.largest,
            releases,
            start,
            scheduler_reason: backend.scheduler_reason(&me.id),
            notes,
        })
    }
}

/// The shape in words.
fn describe(e: &Entry, whole_nodes: bool) -> String {
    let mut s = if e.gpus == 0.0 {
        "no GPUs".to_string()
    } else {
        gpus_text(e.gpus)
    };
    if let (true, Some(t)) = (e.gpus > 0.0, &e.gpu_type) {
        s.push_str(&format!(" ({t})"));
    }
    match e.nodes {
        Some(n) if n > 1.0 && e.gpus > 0.0 => s.push_str(&format!(" as a gang over {n} nodes")),
        Some(n) if n > 1.0 => s.push_str(&format!(" over {n} nodes")),
        _ => {}
    }
    if let (true, Some(c)) = (e.gpus == 0.0, e.cpus) {
        s.push_str(&format!(" ({c} CPUs)"));
    }
    if whole_nodes {
        let whole = match e.nodes {
            Some(n) if n > 1.0 => " on whole nodes",
            _ => " on a whole node",
        };
        s.push_str(whole);
    }
    s
}

fn gpus_text(g: f64) -> String {
    if g == 1.0 {
        "1 GPU".into()
    } else {
        format!("{g} GPUs")
    }
}

/// What the one-sentence reading is made of.
struct Reading<'a> {
    now: f64,
    shape: &'a WaitShape,
    ahead: &'a Ahead,
    free: Option<f64>,
    largest: Option<f64>,
    releases: &'a [WhyRelease],
    start: &'a WhyStart,
    no_end: usize,
}

impl Reading<'_> {
    fn sentence(&self) -> String {
        let model = self
            .start
            .queue_wait_model
            .map(|t| {
                format!(
                    "; the queue-wait model's median start is ~{}",
                    clock(t, self.now)
                )
            })
            .unwrap_or_default();
        let want = &self.shape.description;
        if self.shape.gpus == 0.0 {
            return format!(
                "asks for {want}: Augur reads the GPU queue only, so CPUs, memory or a limit hold it{model}"
            );
        }
        if let Some(l) = self.largest.filter(|l| self.shape.gpus > *l) {
            return format!(
                "asks for {want}, more than the cluster's {l}: it cannot start as the cluster stands"
            );
        }
        let ahead = match self.ahead.jobs {
            0 => "no job ahead".to_string(),
            1 => format!("1 job ({}) ahead", gpus_text(self.ahead.gpus)),
            n => format!("{n} jobs ({}) ahead", gpus_text(self.ahead.gpus)),
        };
        let Some(free) = self.free else {
            return format!(
                "waits for {want}: {ahead}; no cluster metrics ingested yet, so the free GPUs and their releases are unknown{model}"
            );
        };
        let head = format!("waits for {want}: {ahead}, {free} free now");
        match self.start.queue_drain {
            Some(_) if self.releases.is_empty() => format!(
                "{head}: it fits now, so something other than GPUs holds it (the scheduler's next pass, CPUs, memory or a limit){model}"
            ),
            Some(t) => {
                let names: Vec<String> = self
                    .releases
                    .iter()
                    .take(RELEASES_NAMED)
                    .map(|r| r.scheduler_id.clone().unwrap_or_else(|| r.job_id.clone()))
                    .collect();
                let more = self.releases.len().saturating_sub(RELEASES_NAMED);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                let one = self.releases.len() == 1;
                let jobs = if one { "job" } else { "jobs" };
                let names = names.join(", ");
                if t <= self.now {
                    let past = if one {
                        "is past its predicted end"
                    } else {
                        "are past their predicted ends"
                    };
                    format!("{head}; frees any moment: {jobs} {names}{more} {past}{model}")
                } else {
                    let end = if one { "ends" } else { "end" };
                    format!(
                        "{head}; frees at ~{} when {jobs} {names}{more} {end}{model}",
                        clock(t, self.now)
                    )
                }
            }
            None if self.no_end > 0 => format!(
                "{head}; the running jobs' predicted ends do not free enough ({} running without a predicted end){model}",
                self.no_end
            ),
            None => format!("{head}; the running jobs' predicted ends do not free enough{model}"),
        }
    }
}

/// `14:05 UTC (in 25m)`, the date too when not on `now`'s day.
pub fn clock(t: f64, now: f64) -> String {
    let Some(at) = chrono::DateTime::from_timestamp(t as i64, 0) else {
        return format!("{t}");
    };
    let same_day = chrono::DateTime::from_timestamp(now as i64, 0)
        .is_some_and(|n| n.date_naive() == at.date_naive());
    let when = if same_day {
        at.format("%H:%M UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M UTC").to_string()
    };
    format!("{when} (in {})", span(t - now))
}

/// `45s`, `25m`, `1h05m`, `2d03h`.
pub fn span(seconds: f64) -> String {
    let d = seconds.max(0.0) as u64;
    if d < 60 {
        format!("{d}s")
    } else if d < 3600 {
        format!("{}m", d / 60)
    } else if d < 86_400 {
        format!("{}h{:02}m", d / 3600, d % 3600 / 60)
    } else {
        format!("{}d{:02}h", d / 86_400, d % 86_400 / 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::backends::none::NoneBackend;
    use crate::serve::backends::slurm::SlurmBackend;
    use crate::serve::state::events::{ClusterSnapshot, Event, JobProfile};
    use crate::serve::state::online::{RuntimeAnswer, ServedModels};
    use crate::serve::state::store::StoredEvent;

    /// A hand-built online state: events applied in order, then the answers at submit
    /// set by hand (no model is served here).
    struct Built {
        online: Online,
        seq: i64,
    }

    impl Built {
        fn new() -> Built {
            Built {
                online: Online::new(ServedModels::default()),
                seq: 0,
            }
        }

        fn apply(&mut self, event: Event) -> &mut Built {
            self.seq += 1;
            self.online.apply(&StoredEvent {
                seq: self.seq,
                received_at: 0.0,
                event,
            });
            self
        }

        fn snapshot(&mut self, at: f64, total: f64, busy: f64) -> &mut Built {
            self.apply(Event::ClusterSnapshot(ClusterSnapshot {
                at,
                total_gpus: total,
                busy_gpus: busy,
                queued_jobs: None,
                running_jobs: None,
                nodes: None,
            }))
        }

        /// A job of `gpus` (of `ty`, in `queue`) submitted at `at`, predicted to run
        /// `runtime` seconds.
        fn submit(
            &mut self,
            id: &str,
            at: f64,
            gpus: f64,
            ty: Option<&str>,
            queue: Option<&str>,
            runtime: f64,
        ) -> &mut Built {
            self.apply(Event::JobSubmitted {
                job_id: id.into(),
                at,
                profile: JobProfile {
                    num_gpus: Some(gpus),
                    gpu_type: ty.map(str::to_string),
                    queue: queue.map(str::to_string),
                    job_name: Some(format!("name-{id}")),
                    ..JobProfile::default()
                },
                dag: None,
            });
            let job = self.online.jobs.get_mut(id).unwrap();
            job.runtime_at_submit = Some(RuntimeAnswer {
                model_version: 1,
                seconds: runtime,
                lower: runtime / 2.0,
                upper: runtime * 2.0,
                coverage: 0.8,
                interval: "online_conformal",
                capped_by_requested_time: false,
            });
            self
        }

        fn start(&mut self, id: &str, at: f64) -> &mut Built {
            self.apply(Event::JobStarted {
                job_id: id.into(),
                at,
            })
        }

        fn why(&self, id: &str, now: f64) -> Option<WhyWaiting> {
            QueueSnapshot::of(&self.online, now).why(id, &NoneBackend)
        }
    }

    /// 16 GPUs, 14 busy at 1000: `r1` (8 GPUs) ends at 1500, `r2` (6) at 2950.
    fn busy_cluster() -> Built {
        let mut b = Built::new();
        b.submit("r1", 800.0, 8.0, None, None, 600.0)
            .start("r1", 900.0)
            .submit("r2", 900.0, 6.0, None, None, 2000.0)
            .start("r2", 950.0)
            .snapshot(1000.0, 16.0, 14.0);
        b
    }

    #[test]
    fn a_job_waits_behind_the_jobs_ahead_until_the_releases_free_enough() {
        let mut b = busy_cluster();
        // `a` (2 GPUs) takes the 2 free ones now and ends at 1100; `me` needs 8
        b.submit("a", 960.0, 2.0, None, None, 100.0)
            .submit("me", 970.0, 8.0, None, None, 50.0);
        b.online.jobs.get_mut("me").unwrap().queue_wait_at_submit = Some(WaitAnswer {
            model_version: 3,
            seconds: 3000.0,
            lower: 0.0,
            upper: 5000.0,
            coverage: 0.95,
            risk_group: None,
        });
        let why = b.why("me", 1000.0).unwrap();
        assert_eq!(
            (why.ahead.jobs, why.ahead.gpus, why.ahead.first.clone()),
            (1, 2.0, vec!["a".to_string()])
        );
        assert_eq!((why.free_gpus, why.cluster_gpus), (Some(2.0), Some(16.0)));
        assert_eq!(why.start.queue_drain, Some(1500.0));
        let released: Vec<(&str, f64, bool)> = why
            .releases
            .iter()
            .map(|r| (r.job_id.as_str(), r.at, r.running))
            .collect();
        assert_eq!(released, [("a", 1100.0, false), ("r1", 1500.0, true)]);
        assert_eq!(why.releases[1].job_name.as_deref(), Some("name-r1"));
        // both starts named: the model's is the ETA's (submit + its wait)
        assert_eq!(why.start.queue_wait_model, Some(3970.0));
        assert_eq!(why.start.queue_wait_model_upper, Some(5970.0));
        assert_eq!(why.shape.description, "8 GPUs");
        assert!(
            why.reading.starts_with("waits for 8 GPUs: 1 job (2 GPUs) ahead, 2 free now; frees at ~00:25 UTC (in 8m) when jobs a, r1 end"),
            "{}",
            why.reading
        );
        assert!(
            why.reading
                .ends_with("the queue-wait model's median start is ~01:06 UTC (in 49m)"),
            "{}",
            why.reading
        );
        assert_eq!(why.scheduler_reason, None);
        // a running job is not queued: no reading
        assert_eq!(b.why("r1", 1000.0), None);
        assert_eq!(b.why("nobody", 1000.0), None);
    }

    #[test]
    fn a_release_the_job_ahead_waits_for_is_named_for_the_job_behind_it_too() {
        // `hold` holds all 8 until 1500; `ahead` (2) and `me` (4) both start on its end
        let mut b = Built::new();
        b.submit("hold", 800.0, 8.0, None, None, 600.0)
            .start("hold", 900.0)
            .snapshot(1000.0, 8.0, 8.0)
            .submit("ahead", 950.0, 2.0, None, None, 100.0)
            .submit("me", 960.0, 4.0, None, None, 100.0);
        let why = b.why("me", 1000.0).unwrap();
        assert_eq!(why.start.queue_drain, Some(1500.0));
        let released: Vec<(&str, f64)> = why
            .releases
            .iter()
            .map(|r| (r.job_id.as_str(), r.at))
            .collect();
        assert_eq!(released, [("hold", 1500.0)]);
        assert!(
            why.reading.contains("when job hold ends"),
            "{}",
            why.reading
        );
    }

    #[test]
    fn only_jobs_of_its_queue_are_ahead_and_a_job_that_fits_says_so() {
        let mut b = busy_cluster();
        b.submit("long", 950.0, 2.0, None, Some("long"), 100.0)
            .submit("me", 970.0, 2.0, None, Some("short"), 50.0);
        let why = b.why("me", 1000.0).unwrap();
        assert_eq!(
            (why.ahead.jobs, why.ahead.queue.as_deref()),
            (0, Some("short"))
        );
        assert_eq!(why.start.queue_drain, Some(1000.0));
        assert!(why.releases.is_empty());
        assert!(
            why.reading
                .contains("no job ahead, 2 free now: it fits now"),
            "{}",
            why.reading
        );
        assert!(
            why.notes.iter().any(|n| n.contains("other queues")),
            "{:?}",
            why.notes
        );
    }

    #[test]
    fn a_job_larger_than_the_cluster_never_starts_and_says_so() {
        let mut b = busy_cluster();
        b.submit("huge", 970.0, 64.0, None, None, 50.0)
            .submit("me", 980.0, 2.0, None, None, 50.0);
        let why = b.why("huge", 1000.0).unwrap();
        assert_eq!(why.start.queue_drain, None);
        assert!(why.releases.is_empty());
        assert_eq!(
            why.reading,
            "asks for 64 GPUs, more than the cluster's 16: it cannot start as the cluster stands"
        );
        // it does not hold the job behind it
        let me = b.why("me", 1000.0).unwrap();
        assert_eq!((me.ahead.jobs, me.start.queue_drain), (1, Some(1000.0)));
    }

    #[test]
    fn typed_pools_when_the_backend_knows_free_gpus_by_type_else_one_pool() {
        let mut b = Built::new();
        b.submit("k", 800.0, 4.0, Some("K80"), None, 1200.0)
            .start("k", 800.0)
            .snapshot(1000.0, 8.0, 4.0)
            .submit("on-v100", 900.0, 4.0, Some("v100"), None, 10.0)
            .submit("on-k80", 950.0, 4.0, Some("k80"), None, 10.0);
        let typed = |id: &str| {
            QueueSnapshot::of(&b.online, 1000.0)
                .with_free_by_type(Some(BTreeMap::from([
                    ("V100".to_string(), 4.0),
                    ("k80".to_string(), 0.0),
                ])))
                .why(id, &NoneBackend)
                .unwrap()
        };
        // the k80 job waits for `k` although 4 V100s are free (the V100 job ahead takes them)
        let k80 = typed("on-k80");
        assert_eq!(k80.start.queue_drain, Some(2000.0));
        assert_eq!(k80.free_gpus, Some(0.0));
        assert_eq!(k80.releases.len(), 1);
        assert_eq!(k80.releases[0].job_id, "k");
        assert_eq!(k80.shape.description, "4 GPUs (k80)");
        assert_eq!(typed("on-v100").start.queue_drain, Some(1000.0));
        // without free GPUs by type: one pool of 4 free, which the job ahead takes
        let pooled = b.why("on-k80", 1000.0).unwrap();
        assert_eq!(pooled.start.queue_drain, Some(1010.0));
        assert!(
            pooled.notes.iter().any(|n| n.contains("one pool")),
            "{:?}",
            pooled.notes
        );
    }

    #[test]
    fn no_metrics_no_gpus_and_gangs_are_read_plainly() {
        let mut b = Built::new();
        b.submit("me", 970.0, 8.0, None, None, 50.0);
        let why = b.why("me", 1000.0).unwrap();
        assert_eq!((why.free_gpus, why.start.queue_drain), (None, None));
        assert!(
            why.reading.contains("no cluster metrics ingested yet"),
            "{}",
            why.reading
        );
        b.snapshot(1000.0, 16.0, 0.0);
        b.apply(Event::JobSubmitted {
            job_id: "cpu".into(),
            at: 990.0,
            profile: JobProfile {
                num_gpus: Some(0.0),
                cpus: Some(2.0),
                ..JobProfile::default()
            },
            dag: None,
        });
        let cpu = b.why("cpu", 1000.0).unwrap();
        assert_eq!(cpu.shape.description, "no GPUs (2 CPUs)");
        assert_eq!(cpu.start.queue_drain, None);
        assert!(
            cpu.reading.contains("Augur reads the GPU queue only"),
            "{}",
            cpu.reading
        );
        b.apply(Event::JobSubmitted {
            job_id: "gang".into(),
            at: 995.0,
            profile: JobProfile {
                num_gpus: Some(16.0),
                num_nodes: Some(2.0),
                gpu_type: Some("A100".into()),
                ..JobProfile::default()
            },
            dag: None,
        });
        let gang = b.why("gang", 1000.0).unwrap();
        assert_eq!(
            gang.shape.description,
            "16 GPUs (a100) as a gang over 2 nodes"
        );
        assert!(!gang.shape.whole_nodes);
        let entry = Entry::of(&b.online.jobs["gang"]).unwrap();
        assert_eq!(
            describe(&entry, true),
            "16 GPUs (a100) as a gang over 2 nodes on whole nodes"
        );
    }

    #[test]
    fn an_overdue_release_is_read_to_run_as_long_again_and_slurm_ids_name_the_jobs() {
        let cluster = "c";
        let id = |n: &str| crate::serve::backends::slurm::tracker::store_id(cluster, n, 100.0);
        let mut b = Built::new();
        b.submit(&id("7"), 100.0, 2.0, None, None, 300.0)
            .start(&id("7"), 100.0)
            .snapshot(1000.0, 2.0, 2.0)
            .submit(&id("8"), 100.0, 2.0, None, None, 60.0);
        let slurm = SlurmBackend::new(cluster.into(), 15.0);
        let why = QueueSnapshot::of(&b.online, 1000.0)
            .why(&id("8"), &slurm)
            .unwrap();
        assert_eq!(why.releases[0].scheduler_id.as_deref(), Some("7"));
        // started at 100, predicted to end at 400, still running at 1000: read to run as
        // long again as it has run (900 s), not to end any moment
        assert_eq!(why.start.queue_drain, Some(1900.0));
        assert!(
            why.reading
                .starts_with("waits for 2 GPUs: no job ahead, 0 free now; frees at ~"),
            "{}",
            why.reading
        );
        assert!(why.reading.contains("when job 7 ends"), "{}", why.reading);
        assert!(
            why.notes
                .iter()
                .any(|n| n.starts_with("1 running job(s) are past their predicted end")),
            "{:?}",
            why.notes
        );
    }
}
