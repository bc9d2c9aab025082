//! Carrying out a policy's actions in the simulator ([`Simulator::apply_action`]): admit a
//! queued gang where the placement rules allow, rescale a running job (checkpoint, new
//! placement, restart pause), or suspend it back to the queue. Each checks the job's state
//! and bounds first and fails with a typed [`BackendError`].

use super::engine::Simulator;
use super::job::{job_id, State};
use crate::decision::Action;
use crate::error::{BackendError, ErrorKind};
use crate::placement::{shrink_plan, subtract};

fn err(kind: ErrorKind, i: u32, msg: &str) -> BackendError {
    BackendError::new(kind, Some(job_id(i)), msg)
}

impl Simulator {
    /// Carries out one action now.
    pub fn apply_action(&mut self, action: Action) -> Result<(), BackendError> {
        let i = u32::try_from(action.job().0).unwrap_or(u32::MAX);
        let Some(j) = self.jobs.get(i as usize) else {
            return Err(err(ErrorKind::NotFound, i, "no such job"));
        };
        let (state, min, max, advised_type) = (j.state, j.min, j.max, j.advised_type);
        match action {
            Action::Admit {
                workers: w,
                gpu_type,
                ..
            } => {
                if state != State::Queued {
                    return Err(err(ErrorKind::Invalid, i, "admit: job is not queued"));
                }
                if w < min || w > max {
                    return Err(err(
                        ErrorKind::Invalid,
                        i,
                        "admit: workers outside [min, max]",
                    ));
                }
                if gpu_type.is_some_and(|t| usize::from(t) >= self.type_masks.len()) {
                    return Err(err(ErrorKind::Invalid, i, "admit: no such GPU type"));
                }
                // a type the user asked for (on advice) binds whatever the policy picks
                self.admit(i, w, advised_type.or(gpu_type))
            }
            Action::SetWorkers { workers: w, .. } => {
                if state != State::Running {
                    return Err(err(ErrorKind::Invalid, i, "rescale: job is not running"));
                }
                if w < min || w > max {
                    return Err(err(
                        ErrorKind::Invalid,
                        i,
                        "rescale: workers outside [min, max]",
                    ));
                }
                self.rescale(i, w)
            }
            Action::Suspend { .. } => {
                if state != State::Running {
                    return Err(err(ErrorKind::Invalid, i, "suspend: job is not running"));
                }
                self.suspend_job(i);
                Ok(())
            }
        }
    }

    /// Starts queued job `i` on `w` workers placed under the locality its wait allows (on
    /// nodes of `gpu_type` only, when given: it then grows there only); a resumed job pauses to
    /// restore its checkpoint first.
    fn admit(&mut self, i: u32, w: u32, gpu_type: Option<u16>) -> Result<(), BackendError> {
        let waited = self
            .jobs
            .get(i as usize)
            .map_or(0.0, |j| self.now - j.queued_since);
        let level = self.cfg.rules.level_for(waited);
        let mut slots = std::mem::take(&mut self.tmp);
        slots.clear();
        let strategy = self.cfg.rules.strategy;
        let mask = gpu_type.and_then(|t| self.type_masks.get(usize::from(t)));
        let placed = match mask {
            Some(m) => self.cap.place_within(w, level, strategy, m, &mut slots),
            None => self.cap.place(w, level, strategy, &mut slots),
        };
        if !placed {
            self.tmp = slots;
            return Err(err(ErrorKind::NoCapacity, i, "admit: gang does not fit"));
        }
        self.sync(i);
        let now = self.now;
        let resumed = if let Some(j) = self.jobs.get_mut(i as usize) {
            j.slots.clear();
            j.slots.extend_from_slice(&slots);
            j.workers = w;
            j.state = State::Running;
            j.started = now;
            j.pinned = gpu_type;
            let resumed = j.first_start.is_some();
            if !resumed {
                j.first_start = Some(now);
            }
            j.run_pos = self.running.len();
            resumed
        } else {
            false
        };
        self.tmp = slots;
        self.running.push(i);
        if resumed {
            self.pause(i);
        } else {
            self.start_progress(i);
        }
        Ok(())
    }

    /// Rescales running job `i` to `w` workers: grows on its own nodes first (then its rack,
    /// then anywhere) or gives back its smallest slots, then pauses to restart.
    fn rescale(&mut self, i: u32, w: u32) -> Result<(), BackendError> {
        let workers = self.jobs.get(i as usize).map_or(w, |j| j.workers);
        if w == workers {
            return Ok(());
        }
        let (cur, pinned) = self
            .jobs
            .get(i as usize)
            .map(|j| (j.slots.clone(), j.pinned))
            .unwrap_or_default();
        let mut delta = std::mem::take(&mut self.tmp);
        delta.clear();
        if w > workers {
            let strategy = self.cfg.rules.strategy;
            let mask = pinned.and_then(|t| self.type_masks.get(usize::from(t)));
            let grown = match mask {
                Some(m) => self
                    .cap
                    .grow_within(&cur, w - workers, strategy, m, &mut delta),
                None => self.cap.grow(&cur, w - workers, strategy, &mut delta),
            };
            if !grown {
                self.tmp = delta;
                return Err(err(ErrorKind::NoCapacity, i, "rescale: no room to grow"));
            }
        } else {
            shrink_plan(&cur, workers - w, &mut delta);
            self.cap.release(&delta);
        }
        self.sync(i);
        let now = self.now;
        if let Some(j) = self.jobs.get_mut(i as usize) {
            if w > workers {
                for d in &delta {
                    if let Some(s) = j.slots.iter_mut().find(|s| s.node == d.node) {
                        s.gpus += d.gpus;
                    } else {
                        j.slots.push(*d);
                    }
                }
            } else {
                subtract(&mut j.slots, &delta);
            }
            j.workers = w;
            j.rescales += 1;
            j.last_rescale = Some(now);
        }
        self.tmp = delta;
        self.rescales += 1;
        self.pause(i);
        Ok(())
    }

    /// Suspends running job `i`: it checkpoints (unless still restoring its last checkpoint),
    /// frees its GPUs and goes back to the queue.
    fn suspend_job(&mut self, i: u32) {
        self.sync(i);
        let slots = if let Some(j) = self.jobs.get_mut(i as usize) {
            // a suspend checkpoints, unless the job is still restoring its last one
            if !j.restarting {
                j.ckpt = j.done;
            } else {
                j.done = j.ckpt;
            }
            j.preemptions += 1;
            std::mem::take(&mut j.slots)
        } else {
            Vec::new()
        };
        self.cap.release(&slots);
        self.remove_running(i);
        self.enqueue(i);
        self.suspensions += 1;
    }
}
