//! What the watches tell the service: job submitted / started / finished events (derived from
//! each job watch event: PyTorchJobs, TrainJobs, Kueue-managed Jobs) and the snapshots the backend builds, through one callback
//! the service hooks into its ingest path.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::objects::{JobKey, JobView};
use crate::cluster::ClusterState;

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    /// Deleted before a terminal condition was seen.
    Deleted,
}

/// One thing that happened on the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterEvent {
    /// A job was created (time: `creationTimestamp`).
    Submitted {
        job: JobKey,
        time: f64,
        /// Requested GPUs (worker replicas × GPUs per worker); `None` when the job's spec
        /// leaves them to something Augur does not read (a TrainJob's runtime).
        gpus: Option<u32>,
        /// Elastic bounds in GPUs, when elastic.
        elastic: Option<(u32, u32)>,
        /// Kueue LocalQueue (label `kueue.x-k8s.io/queue-name`).
        queue: Option<String>,
        /// The GPU type its pod templates select, when they name one.
        gpu_type: Option<String>,
    },
    /// The GPU type a job's pod templates select changed before it finished (Augur steered
    /// it, or Kueue's admission, or its owner named one); time: when the watch saw it.
    Typed {
        job: JobKey,
        time: f64,
        gpu_type: String,
    },
    /// A job started (time: `status.startTime`; a TrainJob's resume, see
    /// [`JobKind`](super::kinds::JobKind)).
    Started { job: JobKey, time: f64 },
    /// A job finished (time: the terminal condition's transition, or when its deletion was seen).
    Finished {
        job: JobKey,
        time: f64,
        outcome: Outcome,
    },
    /// A snapshot the backend observed.
    Snapshot(Arc<ClusterState>),
}

/// Where events go.
pub type EventSink = Arc<dyn Fn(ClusterEvent) + Send + Sync>;

#[derive(Debug, Clone, Default, PartialEq)]
struct Seen {
    started: bool,
    finished: bool,
    /// The GPU type last told.
    gpu_type: Option<String>,
}

/// Turns the stream of job states into lifecycle events, each emitted once per job.
#[derive(Debug, Default)]
pub struct Lifecycle {
    seen: HashMap<JobKey, Seen>,
}

impl Lifecycle {
    /// A job object was listed or changed, seen at `now`.
    pub fn applied(&mut self, v: &JobView, now: f64, out: &mut Vec<ClusterEvent>) {
        let fresh = !self.seen.contains_key(&v.key);
        let s = self.seen.entry(v.key.clone()).or_default();
        if fresh {
            let g = v.gpus_per_worker;
            s.gpu_type = v.gpu_type.clone();
            out.push(ClusterEvent::Submitted {
                job: v.key.clone(),
                time: v.created,
                gpus: v.declared_gpus,
                elastic: v.elastic.map(|(a, b)| (a * g, b * g)),
                queue: v.queue.clone(),
                gpu_type: v.gpu_type.clone(),
            });
        }
        // a type named after the submit (a selector removed is not a type: kept as told)
        if let Some(t) = v
            .gpu_type
            .as_ref()
            .filter(|t| s.gpu_type.as_ref() != Some(*t))
        {
            if !s.finished && v.finished.is_none() {
                s.gpu_type = Some(t.clone());
                out.push(ClusterEvent::Typed {
                    job: v.key.clone(),
                    time: now.max(v.created),
                    gpu_type: t.clone(),
                });
            }
        }
        if let (false, Some(t)) = (s.started, v.start_time) {
            s.started = true;
            out.push(ClusterEvent::Started {
                job: v.key.clone(),
                time: t,
            });
        }
        if let (false, Some((kind, t))) = (s.finished, v.finished) {
            s.finished = true;
            out.push(ClusterEvent::Finished {
                job: v.key.clone(),
                time: t,
                outcome: if kind == "Succeeded" {
                    Outcome::Succeeded
                } else {
                    Outcome::Failed
                },
            });
        }
    }

    /// A job object was deleted at `now`.
    pub fn deleted(&mut self, key: &JobKey, now: f64, out: &mut Vec<ClusterEvent>) {
        if let Some(s) = self.seen.remove(key) {
            if !s.finished {
                out.push(ClusterEvent::Finished {
                    job: key.clone(),
                    time: now,
                    outcome: Outcome::Deleted,
                });
            }
        }
    }
}
