//! The controller loop's shared state, whichever backend it drives (the simulator or a
//! Kubernetes cluster): the loop itself behind [`Driven`], the operator's switches (pause,
//! dry-run, kept across restarts), the loop's status line (what the backends' health reads),
//! the simulator's clock for ingest, and the metrics the loop publishes.

mod decision_ids;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use augur_autoscaler::live::{ClusterPoint, LiveBackend, LiveDecision, LiveLoop, Outcome};
use augur_autoscaler::{JobId, Policy};

pub use self::decision_ids::DecisionJobs;
use super::views::{ClusterView, Switches};
use crate::serve::http::metrics::Metrics;
use crate::serve::lock;

/// The simulator's clock, against which ingest checks the times of the events clients send
/// on `--backend sim` (as the live backends check them against the wall clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SimClock {
    /// No simulator drives this state (another backend, or none started in-process).
    Absent,
    /// The replay is loading: its clock is not known yet.
    Loading,
    /// The replay runs: its trace starts at `trace_start`, its clock reads `now`, and it
    /// runs `speed` simulated seconds per wall second.
    Running {
        trace_start: f64,
        now: f64,
        speed: f64,
    },
    /// The replay could not start.
    Failed,
}

/// The loop a backend drives, as the endpoints and the switches see it (the backend that
/// started it reaches its own type through [`Driven::as_any_mut`]).
pub trait Driven: Send {
    /// The loop's history, decisions and switches.
    fn view(&self) -> &dyn View;
    fn view_mut(&mut self) -> &mut dyn View;
    /// Cluster seconds between two history points.
    fn history_every_s(&self) -> f64;
    /// `GET /v1/cluster` with the controller's `switches`.
    fn cluster_view(&self, switches: Switches) -> ClusterView;
    /// The backend's own name of the controller's job `job` while it exists (none by
    /// default).
    fn job_name(&self, _job: JobId) -> Option<String> {
        None
    }
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// What the endpoints read and switch, whichever the backend.
pub trait View {
    fn history_tail(&self, limit: usize) -> Vec<ClusterPoint>;
    fn recent(&self, limit: usize) -> Vec<LiveDecision>;
    fn counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64>;
    fn set_switches(&mut self, paused: bool, dry_run: bool);
}

impl<B: LiveBackend, P: Policy> View for LiveLoop<B, P> {
    fn history_tail(&self, limit: usize) -> Vec<ClusterPoint> {
        let h = self.history();
        let skip = h.len().saturating_sub(limit);
        h.skip(skip).copied().collect()
    }
    fn recent(&self, limit: usize) -> Vec<LiveDecision> {
        self.decisions().rev().take(limit).cloned().collect()
    }
    fn counts(&self) -> &BTreeMap<(&'static str, &'static str, Outcome), u64> {
        self.decision_counts()
    }
    fn set_switches(&mut self, paused: bool, dry_run: bool) {
        if self.paused() != paused {
            self.set_paused(paused);
        }
        if self.dry_run() != dry_run {
            self.set_dry_run(dry_run);
        }
    }
}

/// Shared state of the controller loop and its switches (in [`crate::serve::Extensions`]).
pub struct Live {
    pub running: tokio::sync::Mutex<Option<Box<dyn Driven>>>,
    /// `loading`, `running`, or `failed: why`.
    status: Mutex<String>,
    pub speed: f64,
    pub paused: AtomicBool,
    pub dry_run: AtomicBool,
    /// Set by `--dry-run`: dry-run for the life of the process, the endpoint cannot turn it
    /// off (a hard guarantee that nothing is patched).
    pub dry_run_locked: AtomicBool,
    /// Where the operator's switches are kept across restarts (`<data_dir>/operator.json`).
    switches_file: std::path::PathBuf,
    /// The simulator's clock (on `--backend sim`).
    sim_clock: Mutex<SimClock>,
    /// The API job id of each recent decision.
    pub decision_jobs: Mutex<DecisionJobs>,
}

/// The operator's switches as kept on disk: an acknowledged pause or dry-run survives a
/// restart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredSwitches {
    pub paused: bool,
    pub dry_run: bool,
}

/// Reads the switches kept in `file`: none kept gives the defaults (running, acting); an
/// unreadable file gives the safe side (paused and dry-run), loudly.
fn load_switches(file: &std::path::Path) -> StoredSwitches {
    match std::fs::read_to_string(file) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::error!(file = %file.display(), error = %e,
                "the operator's switches cannot be read: the controller starts paused and in dry-run until an operator resumes it");
            StoredSwitches {
                paused: true,
                dry_run: true,
            }
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => StoredSwitches::default(),
        Err(e) => {
            tracing::error!(file = %file.display(), error = %e,
                "the operator's switches cannot be read: the controller starts paused and in dry-run until an operator resumes it");
            StoredSwitches {
                paused: true,
                dry_run: true,
            }
        }
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("speed", &self.speed)
            .finish_non_exhaustive()
    }
}

impl Live {
    /// Nothing loaded yet; a replay runs at `speed` once the simulator has loaded it. The
    /// operator's switches are read from (and kept in) `switches_file`.
    pub fn new(speed: f64, switches_file: std::path::PathBuf) -> Live {
        let kept = load_switches(&switches_file);
        if kept != StoredSwitches::default() {
            tracing::info!(
                paused = kept.paused,
                dry_run = kept.dry_run,
                "the operator's switches kept from before the restart"
            );
        }
        Live {
            running: tokio::sync::Mutex::new(None),
            status: Mutex::new("loading".to_string()),
            speed,
            paused: AtomicBool::new(kept.paused),
            dry_run: AtomicBool::new(kept.dry_run),
            dry_run_locked: AtomicBool::new(false),
            switches_file,
            sim_clock: Mutex::new(SimClock::Absent),
            decision_jobs: Mutex::new(DecisionJobs::default()),
        }
    }

    /// The simulator's clock now.
    pub fn sim_clock(&self) -> SimClock {
        *lock(&self.sim_clock)
    }

    pub fn set_sim_clock(&self, clock: SimClock) {
        *lock(&self.sim_clock) = clock;
    }

    /// Sets the switches and keeps them on disk (written whole, synced) before returning; on
    /// a write error the switches stay as they were.
    pub fn store_switches(&self, new: StoredSwitches) -> std::io::Result<()> {
        let file = &self.switches_file;
        let tmp = file.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(serde_json::to_string(&new).unwrap_or_default().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, file)?;
            if let Some(dir) = file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write()?;
        self.paused.store(new.paused, Ordering::SeqCst);
        self.dry_run.store(new.dry_run, Ordering::SeqCst);
        Ok(())
    }

    /// The switches now.
    pub fn stored_switches(&self) -> StoredSwitches {
        StoredSwitches {
            paused: self.paused.load(Ordering::SeqCst),
            dry_run: self.dry_run.load(Ordering::SeqCst),
        }
    }

    pub fn set_status(&self, s: impl Into<String>) {
        *lock(&self.status) = s.into();
    }

    /// `--dry-run`: dry-run on, and `POST /v1/autoscaler/dry-run` may no longer turn it off.
    pub fn lock_dry_run(&self) {
        self.dry_run.store(true, Ordering::SeqCst);
        self.dry_run_locked.store(true, Ordering::SeqCst);
    }

    /// Brings the loop's pause and dry-run switches in line with the endpoints'.
    pub fn sync_switches(&self, d: &mut dyn Driven) {
        d.view_mut().set_switches(
            self.paused.load(Ordering::SeqCst),
            self.dry_run.load(Ordering::SeqCst),
        );
    }

    /// The loop's status line (`loading`, `starting`, `running`, `failed: why`, ...).
    pub fn status(&self) -> String {
        lock(&self.status).clone()
    }
}

/// Decisions counted on `/metrics` so far, by (action, reason, outcome).
pub type Counted = BTreeMap<(&'static str, &'static str, Outcome), u64>;

/// Puts the loop's cluster gauges and its new decisions (since `counted`) on `/metrics`.
pub fn publish<B: LiveBackend, P: Policy>(
    metrics: &Metrics,
    live: &LiveLoop<B, P>,
    counted: &mut Counted,
) {
    let p = live.cluster();
    metrics.set_cluster(p.utilisation, p.queued, p.queued_gpus, p.running);
    for (&(action, reason, outcome), &n) in live.decision_counts() {
        let seen = counted.entry((action, reason, outcome)).or_insert(0);
        for _ in *seen..n {
            metrics.observe_action(action, reason, outcome.name());
        }
        *seen = n;
    }
}

#[cfg(test)]
mod switch_tests {
    use super::*;

    #[test]
    fn switches_survive_a_restart_and_an_unreadable_file_starts_safe() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("operator.json");
        let live = Live::new(60.0, file.clone());
        assert_eq!(live.stored_switches(), StoredSwitches::default());
        let on = StoredSwitches {
            paused: true,
            dry_run: true,
        };
        live.store_switches(on).unwrap();
        assert_eq!(Live::new(60.0, file.clone()).stored_switches(), on);
        live.store_switches(StoredSwitches::default()).unwrap();
        assert_eq!(
            Live::new(60.0, file.clone()).stored_switches(),
            StoredSwitches::default()
        );
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(Live::new(60.0, file).stored_switches(), on, "safe side");
        // a switch that cannot be kept is not taken
        let live = Live::new(60.0, dir.path().join("missing-dir/operator.json"));
        assert!(live.store_switches(on).is_err());
        assert_eq!(live.stored_switches(), StoredSwitches::default());
    }
}
