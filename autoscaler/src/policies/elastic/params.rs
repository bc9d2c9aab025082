//! The elastic controller's knobs ([`ElasticParams`]) and their defaults.

/// Knobs of the elastic controller.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ElasticParams {
    /// A queued job that waited this long goes first and blocks (seconds).
    pub starvation_s: f64,
    /// Run time assumed for a job without a prediction (seconds).
    pub unknown_runtime_s: f64,
    /// Least time between a rescale of a job and growing or shrinking it below its request
    /// again (seconds).
    pub cooldown_s: f64,
    /// Shrink running jobs below their request for a queued one only when its predicted wait
    /// exceeds this (seconds).
    pub scale_down_wait_s: f64,
    /// Grow jobs only when at least this share of healthy GPUs is idle (and nobody waits).
    pub scale_up_idle_share: f64,
    /// Share of healthy GPUs kept free when growing (room for arrivals).
    pub headroom_share: f64,
    /// Grow a job only if it saves at least this many seconds of its predicted remaining time
    /// (beyond the restart pause).
    pub min_gain_s: f64,
    /// ...and at least this share of its predicted remaining time: a rescale that speeds a
    /// job up by less than the slowdown a worse placement can cost (more nodes, another rack)
    /// is not worth its restart.
    pub min_gain_share: f64,
    /// Restart pause of a rescale the policy plans with (seconds).
    pub rescale_pause_s: f64,
    /// Start elastic jobs below their request when the request does not fit.
    pub start_shrunk: bool,
    /// Preempt a running job when its predicted remaining GPU-time is this many times the
    /// queued job's; `None` never preempts.
    pub preempt_factor: Option<f64>,
    /// A running job is not preempted before it ran this long in its current run (seconds).
    pub min_run_s: f64,
    /// Queued jobs that may reclaim, preempt or shrink per decision.
    pub max_pressure_jobs: usize,
    /// Grow running jobs into idle GPUs beyond what the waiting jobs need even while some
    /// wait (for placement or behind a starving job, never past a starving one); `false`
    /// grows only when nobody waits.
    pub grow_past_queue: bool,
    /// Hand idle GPUs out one at a time by marginal gain (the job whose predicted remaining
    /// time drops most from one more worker); `false` grows the longest jobs first, each to
    /// its maximum.
    pub grow_by_marginal_gain: bool,
    /// Reclaim lent workers first from the jobs whose last worker saves least.
    pub reclaim_least_loss: bool,
    /// Choose each admitted job's GPU type by its measured speed there (see
    /// [`crate::policies::elastic`]); `false` places jobs wherever they fit, type-blind.
    pub type_aware: bool,
    /// Type-aware only: a running job moves (checkpoint, restart on the other type, paying
    /// the restart pause) to a GPU type where it runs at least this many times faster, when
    /// its GPUs there are idle and the move saves `min_gain_s` and `min_gain_share` of its
    /// predicted remaining time, as a rescale must.
    pub migrate_min_speedup: f64,
    /// ...at most this many times per job (0: never). Each move is to a type at least
    /// `migrate_min_speedup` times faster, so a job never moves back.
    pub max_migrations: u32,
}

impl ElasticParams {
    /// The knobs on a live cluster whose backend resizes and steers queued jobs to a GPU
    /// type but never suspends a running job (Kubernetes): no preemption and no migration
    /// (both need a suspend), type-aware admissions; everything else as [`Default`].
    pub fn live() -> ElasticParams {
        ElasticParams {
            preempt_factor: None,
            type_aware: true,
            max_migrations: 0,
            ..ElasticParams::default()
        }
    }

    /// True when a decision under these knobs may suspend a running job (preempt or move it).
    pub fn may_suspend(&self) -> bool {
        self.preempt_factor.is_some() || (self.type_aware && self.max_migrations > 0)
    }
}

impl Default for ElasticParams {
    fn default() -> Self {
        ElasticParams {
            starvation_s: 12.0 * 3600.0,
            unknown_runtime_s: 3600.0,
            cooldown_s: 1800.0,
            scale_down_wait_s: 1800.0,
            scale_up_idle_share: 0.02,
            headroom_share: 0.05,
            min_gain_s: 600.0,
            min_gain_share: 0.1,
            rescale_pause_s: 30.0,
            start_shrunk: true,
            preempt_factor: Some(2.0),
            min_run_s: 300.0,
            max_pressure_jobs: 16,
            grow_past_queue: true,
            grow_by_marginal_gain: true,
            reclaim_least_loss: true,
            type_aware: false,
            migrate_min_speedup: 1.5,
            max_migrations: 2,
        }
    }
}
