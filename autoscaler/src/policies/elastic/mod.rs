//! Augur's elastic controller.
//!
//! Jobs are ranked by **predicted remaining GPU-time** (Augur's runtime prediction minus the
//! work done, times the requested GPUs; a job that outran its prediction is assumed half done,
//! so its estimate grows with its age, as least-attained-service would rank it). Each decision,
//! for the queued jobs in that order (jobs that waited `starvation_s` first; they block the
//! rest until they start), the steps of [`admission`]:
//!
//! 1. **Admit** at the requested size when it fits.
//! 2. **Reclaim** workers lent to running jobs above their request (first from the jobs whose
//!    last worker saves least predicted time), just enough to start the job. Lent GPUs are
//!    given back at once: the hysteresis is on the growing side.
//! 3. **Start shrunk**: an elastic job starts below its request, down to its minimum.
//! 4. **Preempt** running jobs whose predicted remaining GPU-time is `preempt_factor` times
//!    the queued job's (worst first, each having run `min_run_s`): they checkpoint and requeue.
//! 5. **Shrink on a high predicted wait**: if the job's predicted wait (until running jobs, by
//!    predicted remaining time, free enough GPUs) exceeds `scale_down_wait_s`, shrink running
//!    elastic jobs towards their minimum (out of cooldown, longest predicted remaining first)
//!    just enough to start it.
//!
//! Nothing is shrunk or preempted unless the queued job then starts. Finally, [`grow`]: when
//! at least `scale_up_idle_share` of the GPUs are idle beyond what the jobs still waiting need
//! (their minimum workers; nothing grows behind a starving job), idle GPUs beyond a
//! `headroom_share` are handed out one at a time by **marginal gain**: each to the running
//! elastic job whose predicted remaining time drops most from one more worker, up to its
//! maximum (the speedup curve is concave, so this maximises the predicted time saved, and a
//! 1-GPU job that runs for days gets its second GPU before a 16-GPU job gets its seventeenth).
//! A job is grown only when that saves at least `min_gain_s` beyond the restart pause and at
//! least `min_gain_share` of its predicted remaining time. Elastic jobs this decision admits at
//! their request take part in the same hand-out and start at the size it gives them (no
//! restart right after the start).
//!
//! **Type-aware** (`type_aware`, on a cluster of several GPU types): every predicted time above
//! is on the type the job runs on (a queued job: its fastest type), i.e. the prediction, made
//! on the reference type, divided by the job's measured speed there. Each admission places the
//! job on one type in its preference order (see `controller::type_prefs`); a job grows on its
//! own type only, from that type's idle GPUs; and after the queue is served, [`migrate`] moves
//! running jobs to a type where they run at least `migrate_min_speedup` times faster when its
//! GPUs are idle, at most `max_migrations` times each.
//!
//! No flapping: a job is grown at most once per `cooldown_s` after any rescale; shrinking
//! below the request also waits for the cooldown; only lent workers come back at once, and a
//! job that gave them back is not grown again before its cooldown ends. Every decision carries
//! its [`Reason`](crate::decision::Reason).

mod admission;
mod controller;
mod estimate;
mod grow;
mod migrate;
mod params;
mod round;

pub use controller::ElasticController;
pub use params::ElasticParams;
