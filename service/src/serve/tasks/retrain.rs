//! Retraining on the ingested history, by hand (`POST /v1/models/retrain`) or on the
//! background schedule (`retrain_every_jobs`).
//!
//! Both go through [`start`]: it snapshots the ingested history, applies the
//! `min_retrain_jobs` gate and runs one retrain at a time (the [`RetrainStatus`] of
//! [`AppState::retrain`] is the lock: a second start while one runs is refused).
//!
//! By hand or on the schedule ([`spawn_schedule`]: after `retrain_every_jobs` newly finished
//! jobs since the last retrain started, or since the service started), every kind with
//! enough labelled jobs is retrained and judged against the served model on the same
//! held-out slice ([`super::model_gate`]): it replaces the served one only when it passes.
//! Each new version is saved to the registry either way; the report lists per kind what was
//! promoted or kept and why. The DAG model needs each stage's measured run time, which the
//! ingested events do not carry: the report says so in its verdicts and the served DAG model
//! stays. The schedule waits while the first-start training runs.
//!
//! A promoted version learns online from the first event of the finished jobs it was
//! trained on (`history_from_seq` in its metadata and in the answer), not from the whole
//! log: its features then see the span of history they were trained on, its calibration
//! starts from its own answers on that span, and the swap replays the model over that span
//! only, so a retrain's time is bounded by `retrain_max_jobs` and the retention window, not
//! by the length of the log. Restarts and replicas replay the same span: the same answers.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use augur_datasets::JobRecord;
use augur_predictor::ModelKind;
use serde::Serialize;

use super::model_gate::{Gate, Verdict};
use super::training;
use crate::model_store::Source;
use crate::serve::kinds;
use crate::serve::kinds::Promotion;
use crate::serve::state::online::ServedModels;
use crate::serve::{lock, AppState, RetrainStatus};

/// Who started a retrain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// `POST /v1/models/retrain`.
    Manual,
    /// The background schedule (`retrain_every_jobs`).
    Schedule,
}

impl Trigger {
    /// Its name in metrics labels (as in JSON).
    pub fn label(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Schedule => "schedule",
        }
    }
}

/// Counters of the retrains of this process.
#[derive(Debug, Default)]
pub struct RetrainStats {
    /// `job_finished` events applied when the last retrain started (or at start-up).
    finished_at_last: AtomicU64,
    /// Retrains started by the schedule.
    pub scheduled_started: AtomicU64,
    /// Retrains started by the schedule that finished without error.
    pub scheduled_succeeded: AtomicU64,
    /// Starts refused because a retrain was running (manual or scheduled).
    pub refused_running: AtomicU64,
    /// Retrains running now (at most one).
    running: AtomicUsize,
    /// The most retrains seen running at once.
    max_running: AtomicUsize,
}

impl RetrainStats {
    /// Counters starting from `finished` jobs already known (the replayed history).
    pub fn new(finished: u64) -> RetrainStats {
        RetrainStats {
            finished_at_last: AtomicU64::new(finished),
            ..RetrainStats::default()
        }
    }

    /// The most retrains that ever ran at once in this process.
    pub fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }
}

/// Why a retrain was not started.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Fewer finished jobs than `min_retrain_jobs` in the ingested history.
    TooFewJobs { finished: usize, min: usize },
    /// A retrain is running.
    Running,
    /// The first start is still training these kinds on the bootstrap history: it saves and
    /// promotes its own versions, so a retrain now would race it.
    FirstStart { training: Vec<ModelKind> },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooFewJobs { finished, min } => write!(
                f,
                "the ingested history has {finished} finished jobs; retraining needs at least {min} (min_retrain_jobs)"
            ),
            Refused::Running => write!(f, "a retrain is already running"),
            Refused::FirstStart { training } => {
                let names: Vec<&str> = training.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "the first start is still training {} on the bootstrap history; retrain once GET /readyz lists no kind under `training`",
                    names.join(", ")
                )
            }
        }
    }
}

/// A retrain that was started.
#[derive(Debug, Clone)]
pub struct Started {
    /// Jobs in the history snapshot it trains on.
    pub jobs: usize,
    /// Of which finished (with a duration).
    pub finished: usize,
    /// Which part of the history it uses.
    pub window: HistoryWindow,
}

/// Which part of the ingested history a retrain uses: a long history is cut to the newest
/// `retrain_max_jobs` jobs (by submit time), so a retrain's time and memory stay bounded.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HistoryWindow {
    /// Jobs trained on.
    pub used_jobs: usize,
    /// Jobs held in memory (the retention window) it was taken from.
    pub held_jobs: usize,
    /// The rule, in words.
    pub rule: String,
    /// Sequence number of the first event of the finished jobs trained on: a model
    /// promoted by this retrain builds its online state from the event log from there on,
    /// the span of history its features were trained on.
    pub history_from_seq: Option<i64>,
}

/// Keeps the newest `max` of `jobs` (sorted by submit time, oldest first).
fn newest<T>(mut jobs: Vec<T>, max: usize, retention_days: f64) -> (Vec<T>, HistoryWindow) {
    let held = jobs.len();
    if held > max {
        jobs.drain(..held - max);
    }
    let retention = if retention_days > 0.0 {
        format!("jobs finished within the last {retention_days} days of job time, and every unfinished job")
    } else {
        "every ingested job (no retention window)".to_string()
    };
    let rule = if held > max {
        format!("the newest {max} jobs by submit time (retrain_max_jobs) of the {held} held: {retention}")
    } else {
        format!("all {held} jobs held: {retention} (retrain_max_jobs {max} not reached)")
    };
    let window = HistoryWindow {
        used_jobs: jobs.len(),
        held_jobs: held,
        rule,
        history_from_seq: None,
    };
    (jobs, window)
}

/// Starts a retrain on the ingested history in the background (blocking thread pool): the
/// new versions are saved, promoted when they pass the gate, and the served models swapped.
pub fn start(state: &AppState, trigger: Trigger) -> Result<Started, Refused> {
    if state.first_start.running() {
        state
            .ext
            .metrics
            .observe_retrain(trigger.label(), "refused_first_start", None);
        return Err(Refused::FirstStart {
            training: state.first_start.training(),
        });
    }
    let (jobs, finished_events, served, not_retrained) = {
        let o = state.online();
        // the verdicts of the kinds the history does not train, on the state now
        let history = kinds::HistoryFacts {
            dag_jobs: o.jobs.values().filter(|j| j.dag.is_some()).count(),
        };
        let not_retrained: Vec<Verdict> = kinds::registered()
            .iter()
            .filter_map(|k| k.not_retrained(&o.models, &history))
            .collect();
        (
            o.history(),
            o.counts.job_finished,
            o.models.clone(),
            not_retrained,
        )
    };
    let (jobs, mut window) = newest(
        jobs,
        state.config.retrain_max_jobs,
        state.config.retention_days,
    );
    let labelled = |j: &JobRecord| j.duration.is_some_and(f64::is_finite);
    let finished = jobs.iter().filter(|(j, _)| labelled(j)).count();
    // the new models' online states start at the first event of the finished jobs they
    // learn from (jobs left unfinished since before then are in the job table only)
    let history_from_seq = jobs
        .iter()
        .filter(|(j, _)| labelled(j))
        .map(|&(_, seq)| seq)
        .min();
    let jobs: Vec<JobRecord> = jobs.into_iter().map(|(j, _)| j).collect();
    window.history_from_seq = history_from_seq;
    if finished < state.config.min_retrain_jobs {
        state
            .ext
            .metrics
            .observe_retrain(trigger.label(), "refused_too_few_jobs", None);
        return Err(Refused::TooFewJobs {
            finished,
            min: state.config.min_retrain_jobs,
        });
    }
    {
        let mut st = lock(&state.retrain);
        if matches!(*st, RetrainStatus::Running { .. }) {
            state
                .retrain_stats
                .refused_running
                .fetch_add(1, Ordering::SeqCst);
            state
                .ext
                .metrics
                .observe_retrain(trigger.label(), "refused_running", None);
            return Err(Refused::Running);
        }
        *st = RetrainStatus::Running {
            started_at: now_rfc3339(),
            source: format!(
                "ingested history ({} jobs, {finished} finished; {})",
                jobs.len(),
                window.rule
            ),
            trigger,
        };
    }
    let stats = &state.retrain_stats;
    stats
        .finished_at_last
        .store(finished_events, Ordering::SeqCst);
    if trigger == Trigger::Schedule {
        stats.scheduled_started.fetch_add(1, Ordering::SeqCst);
    }
    let st = state.clone();
    let n = jobs.len();
    let source = Source {
        name: "ingested",
        history_from_seq,
    };
    tokio::task::spawn_blocking(move || run(&st, trigger, &jobs, source, &served, not_retrained));
    Ok(Started {
        jobs: n,
        finished,
        window,
    })
}

/// Runs a started retrain on `jobs` (blocking): trains, saves, promotes what beats the
/// `served` models, swaps the served models, and records the outcome (with the verdicts of
/// the kinds the history does not train, `not_retrained`: why they are kept).
fn run(
    st: &AppState,
    trigger: Trigger,
    jobs: &[JobRecord],
    source: Source<'_>,
    served: &ServedModels,
    not_retrained: Vec<Verdict>,
) {
    let stats = &st.retrain_stats;
    let now_running = stats.running.fetch_add(1, Ordering::SeqCst) + 1;
    stats.max_running.fetch_max(now_running, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let result = (|| -> anyhow::Result<training::TrainReport> {
        let gate = Gate {
            min_test_jobs: st.config.min_test_jobs,
        };
        let mut report = training::train_and_save_with(
            &st.registry,
            source,
            jobs,
            st.config.trees,
            Promotion::IfNotWorse(gate),
            served,
        )?;
        // nothing promoted: the online state already serves these versions, and a swap
        // would only rebuild it for the same answers (no swap then)
        let t = std::time::Instant::now();
        if st.reload_models()? {
            report
                .seconds
                .insert("rebuild".to_string(), t.elapsed().as_secs_f64());
        }
        let mut o = st.online_mut();
        for kind in report
            .verdicts
            .iter()
            .filter_map(|v| ModelKind::from_name(&v.kind))
        {
            o.not_trained.remove(&kind);
        }
        for v in not_retrained {
            report.kept.push(format!("{}: {}", v.kind, v.reason));
            report.verdicts.push(v);
        }
        Ok(report)
    })();
    let status = match result {
        Ok(report) => {
            log_report(trigger, &report, started.elapsed().as_secs_f64());
            if trigger == Trigger::Schedule {
                stats.scheduled_succeeded.fetch_add(1, Ordering::SeqCst);
            }
            RetrainStatus::Succeeded {
                finished_at: now_rfc3339(),
                report: Box::new(report),
                trigger,
            }
        }
        Err(e) => {
            tracing::error!(?trigger, error = %format!("{e:#}"), "retrain failed");
            RetrainStatus::Failed {
                finished_at: now_rfc3339(),
                error: format!("{e:#}"),
                trigger,
            }
        }
    };
    let outcome = match status {
        RetrainStatus::Failed { .. } => "failed",
        _ => "succeeded",
    };
    st.ext.metrics.observe_retrain(
        trigger.label(),
        outcome,
        Some(started.elapsed().as_secs_f64()),
    );
    stats.running.fetch_sub(1, Ordering::SeqCst);
    *lock(&st.retrain) = status;
}

/// Logs what a retrain trained, skipped and kept back.
fn log_report(trigger: Trigger, report: &training::TrainReport, seconds: f64) {
    let trained: std::collections::BTreeMap<_, _> = report
        .trained
        .iter()
        .map(|(k, m)| (k.name(), m.as_ref().map(|m| m.version)))
        .collect();
    tracing::info!(
        ?trigger,
        jobs = report.jobs,
        seconds,
        ?trained,
        phase_seconds = ?report.seconds,
        "retrained on the ingested history"
    );
    for why in &report.skipped {
        tracing::info!(?trigger, "not trained: {why}");
    }
    for v in &report.verdicts {
        if v.promoted {
            tracing::info!(?trigger, kind = %v.kind, version = ?v.version, "promoted: {}", v.reason);
        } else {
            tracing::info!(?trigger, kind = %v.kind, version = ?v.version, "not promoted: {}", v.reason);
        }
    }
}

/// How often the schedule looks at the count of finished jobs.
const POLL: Duration = Duration::from_millis(200);

/// Starts the background retrain schedule (nothing when `retrain_every_jobs` is 0); it
/// stops when [`AppState::shutdown`] turns true.
pub fn spawn_schedule(state: AppState) {
    let every = state.config.retrain_every_jobs;
    if every == 0 {
        tracing::info!("background retraining is off (retrain_every_jobs = 0)");
        return;
    }
    tracing::info!(
        every_finished_jobs = every,
        "background retraining on the ingested history is on"
    );
    tokio::spawn(async move {
        let mut shutdown = state.shutdown.clone();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
            }
            if state.first_start.running() {
                continue; // the first-start training saves and promotes its own versions
            }
            let finished = state.online().counts.job_finished;
            let last = state.retrain_stats.finished_at_last.load(Ordering::SeqCst);
            let new = finished.saturating_sub(last);
            if new < every as u64 {
                continue;
            }
            match start(&state, Trigger::Schedule) {
                Ok(s) => tracing::info!(
                    new_finished_jobs = new,
                    jobs = s.jobs,
                    finished = s.finished,
                    "background retrain started"
                ),
                // try again when it is done
                Err(Refused::Running | Refused::FirstStart { .. }) => {}
                Err(why @ Refused::TooFewJobs { .. }) => {
                    // wait for another `every` finished jobs before trying again
                    state
                        .retrain_stats
                        .finished_at_last
                        .store(finished, Ordering::SeqCst);
                    tracing::info!(new_finished_jobs = new, "background retrain skipped: {why}");
                }
            }
        }
        tracing::debug!("background retrain schedule stopped");
    });
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339()
}
