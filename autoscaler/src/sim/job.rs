//! A replayed job's state inside the simulator ([`Job`]): its bounds, work done and last
//! checkpoint, placement, and the counters its outcome reports. Updated lazily: only when the
//! job is touched.

use super::trace::SimJob;
use crate::cluster::{JobId, Slot};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not submitted yet.
    Future,
    Queued,
    Running,
    Done,
}

/// One job of the replay.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub src: SimJob,
    pub requested: u32,
    pub min: u32,
    pub max: u32,
    /// Work to do: seconds at the requested size on reference GPUs.
    pub work: f64,
    /// Work done (as of `t_upd`).
    pub done: f64,
    /// Work done at the last checkpoint.
    pub ckpt: f64,
    /// Work per second now (0 while paused or queued).
    pub rate: f64,
    /// Time the lazily updated fields were last brought up to date.
    pub t_upd: f64,
    /// GPU-seconds held.
    pub attained: f64,
    /// Seconds holding GPUs.
    pub held_s: f64,
    pub workers: u32,
    pub slots: Vec<Slot>,
    pub state: State,
    /// Holding GPUs without progress after a rescale or resume.
    pub restarting: bool,
    /// Start of the current progress segment and the work done at it (periodic checkpoints).
    pub seg_start: f64,
    pub seg_done0: f64,
    /// Bumped whenever its scheduled completion or resume becomes stale.
    pub epoch: u32,
    pub first_start: Option<f64>,
    /// When its current run started.
    pub started: f64,
    pub finish: f64,
    pub queued_since: f64,
    pub queued_total: f64,
    pub last_rescale: Option<f64>,
    pub rescales: u32,
    pub preemptions: u32,
    pub failures: u32,
    pub lost_work: f64,
    /// Position in the simulator's running list (`usize::MAX` when not running).
    pub run_pos: usize,
    /// The GPU type it was admitted to, when its admission named one (it grows there only).
    pub pinned: Option<u16>,
    /// GPU-seconds held on each GPU type.
    pub gpu_s_by_type: Vec<f64>,
    /// The GPU type its user asked for on advice (it is admitted there only).
    pub advised_type: Option<u16>,
    /// The run time the advisor predicted for it in its advised shape.
    pub believed_runtime: Option<f64>,
}

impl Job {
    /// A job not submitted yet with `[min, max]` workers.
    pub fn new(src: SimJob, min: u32, max: u32) -> Job {
        Job {
            requested: src.gpus.max(1),
            min,
            max,
            work: src.duration,
            done: 0.0,
            ckpt: 0.0,
            rate: 0.0,
            t_upd: src.submit,
            attained: 0.0,
            held_s: 0.0,
            workers: 0,
            slots: Vec::new(),
            state: State::Future,
            restarting: false,
            seg_start: 0.0,
            seg_done0: 0.0,
            epoch: 0,
            first_start: None,
            started: 0.0,
            finish: f64::NAN,
            queued_since: src.submit,
            queued_total: 0.0,
            last_rescale: None,
            rescales: 0,
            preemptions: 0,
            failures: 0,
            lost_work: 0.0,
            run_pos: usize::MAX,
            pinned: None,
            gpu_s_by_type: Vec::new(),
            advised_type: None,
            believed_runtime: None,
            src,
        }
    }
}

/// The id of the job at index `i` of the replay.
pub(super) fn job_id(i: u32) -> JobId {
    JobId(u64::from(i))
}
