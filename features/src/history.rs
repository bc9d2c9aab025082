//! Per-key history: what is known about the jobs sharing a key at a given instant.

use std::collections::{BTreeMap, VecDeque};

use augur_numeric::median_sorted_f32;
use serde::{Deserialize, Serialize};

use crate::schema::{PER_KEY_FEATURES, RATIO_FEATURES};

/// Finished durations kept per key.
const KEEP: usize = 20;

/// Weight of the newest finished job in the exponentially weighted mean.
const EWM_ALPHA: f32 = 0.2;

/// Job counts above this are written as this: a count that only grows with the age of the
/// trace (cluster-wide) would otherwise act as a clock the model cannot extrapolate.
const COUNT_CAP: u64 = 200;

/// Ages above this (seconds) are written as this, for the same reason.
const AGE_CAP_S: f64 = 2.0 * 86_400.0;

/// Orders finite floats (submit times) as integers, for the unfinished-jobs index.
pub(crate) fn order_key(t: f64) -> i64 {
    let bits = t.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// The history of one key.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct History {
    /// ln(duration) of the last [`KEEP`] finished jobs, oldest first.
    pub recent: VecDeque<f32>,
    pub n_done: u64,
    /// ln(duration / requested time) of the last [`KEEP`] finished jobs that had a request.
    pub recent_ratio: VecDeque<f32>,
    /// Running mean of every finished ln(duration).
    pub sum_log: f64,
    /// Exponentially weighted mean of finished ln(duration) (weight [`EWM_ALPHA`] on the newest).
    pub ewm: Option<f32>,
    pub n_failed: u64,
    pub n_with_status: u64,
    pub last_submit: Option<f64>,
    /// Submits at exactly `last_submit`.
    pub last_submit_n: u32,
    /// The latest submit strictly before `last_submit`: what `last_submit` was before it,
    /// for a read that leaves the latest submit out.
    pub prev_submit: Option<f64>,
    pub last_finish: Option<f64>,
    /// Submit times within the last hour, oldest first.
    pub submits_1h: VecDeque<f64>,
    /// Unfinished jobs by submit time (order key → count).
    pub unfinished: BTreeMap<i64, (f64, u32)>,
    pub n_unfinished: u64,
}

impl History {
    pub fn on_submit(&mut self, t: f64) {
        match self.last_submit {
            Some(l) if t == l => self.last_submit_n += 1,
            Some(l) if t < l => {
                if self.prev_submit.is_none_or(|p| t > p) {
                    self.prev_submit = Some(t);
                }
            }
            last => {
                self.prev_submit = last;
                self.last_submit = Some(t);
                self.last_submit_n = 1;
            }
        }
        self.submits_1h.push_back(t);
        let e = self.unfinished.entry(order_key(t)).or_insert((t, 0));
        e.1 += 1;
        self.n_unfinished += 1;
    }

    pub fn on_finish(
        &mut self,
        submit: f64,
        end: f64,
        log_duration: f32,
        log_ratio: Option<f32>,
        failed: Option<bool>,
    ) {
        if let Some(r) = log_ratio {
            if self.recent_ratio.len() == KEEP {
                self.recent_ratio.pop_front();
            }
            self.recent_ratio.push_back(r);
        }
        if let Some(e) = self.unfinished.get_mut(&order_key(submit)) {
            e.1 -= 1;
            if e.1 == 0 {
                self.unfinished.remove(&order_key(submit));
            }
            self.n_unfinished = self.n_unfinished.saturating_sub(1);
        }
        if self.recent.len() == KEEP {
            self.recent.pop_front();
        }
        self.recent.push_back(log_duration);
        self.n_done += 1;
        self.sum_log += f64::from(log_duration);
        self.ewm = Some(match self.ewm {
            Some(m) => m + EWM_ALPHA * (log_duration - m),
            None => log_duration,
        });
        if let Some(f) = failed {
            self.n_with_status += 1;
            self.n_failed += u64::from(f);
        }
        self.last_finish = Some(self.last_finish.map_or(end, |l| l.max(end)));
    }

    /// Drops the submits more than an hour before `now` from the front of the hour window.
    pub fn prune(&mut self, now: f64) {
        while let Some(&t) = self.submits_1h.front() {
            if now - t > 3600.0 {
                self.submits_1h.pop_front();
            } else {
                break;
            }
        }
    }

    /// Writes the per-key features at instant `now` into `out` (one slot per
    /// [`crate::schema::PER_KEY_FEATURES`]). The history is not changed: the submits that
    /// [`History::prune`] at `now` would drop are skipped (the same numbers as pruning first).
    pub fn write_at(&self, now: f64, out: &mut [f32]) {
        self.write_leaving_out(now, LeaveOut::NONE, out);
    }

    /// [`History::write_at`] as if the submits `leave` names had not been seen.
    pub fn write_leaving_out(&self, now: f64, leave: LeaveOut, out: &mut [f32]) {
        let seen = self.submits_seen(now, leave);
        let nan = f32::NAN;
        let n = self.recent.len();
        let back = |q: &VecDeque<f32>, k: usize| -> f32 {
            let k = k.min(q.len());
            if k == 0 {
                return nan;
            }
            q.iter().rev().take(k).sum::<f32>() / k as f32
        };
        out[0] = (self.n_done.min(COUNT_CAP) as f32).ln_1p();
        out[1] = self.recent.back().copied().unwrap_or(nan);
        out[2] = back(&self.recent, 2);
        out[3] = back(&self.recent, 5);
        if n > 0 {
            let v = sorted(&self.recent);
            let s = &v[..n];
            out[4] = median_sorted_f32(s);
            let mean = s.iter().sum::<f32>() / n as f32;
            out[5] = (s.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n as f32).sqrt();
            out[13] = s[(n - 1) / 4];
            out[14] = s[(3 * (n - 1)).div_ceil(4)];
        } else {
            out[4] = nan;
            out[5] = nan;
            out[13] = nan;
            out[14] = nan;
        }
        out[15] = if self.n_done > 0 {
            (self.sum_log / self.n_done as f64) as f32
        } else {
            nan
        };
        out[16] = self.ewm.unwrap_or(nan);
        out[6] = if self.n_with_status > 0 {
            self.n_failed as f32 / self.n_with_status as f32
        } else {
            nan
        };
        let since =
            |t: Option<f64>| t.map_or(nan, |t| ((now - t).clamp(0.0, AGE_CAP_S) as f32).ln_1p());
        out[7] = since(seen.last_submit);
        out[8] = (seen.submits_1h as f32).ln_1p();
        out[9] = (seen.submits_10m as f32).ln_1p();
        out[10] = (seen.n_unfinished as f32).ln_1p();
        out[11] = since(seen.oldest_unfinished);
        out[12] = since(self.last_finish);
        let per = PER_KEY_FEATURES.len();
        if out.len() >= per + RATIO_FEATURES.len() {
            let q = &self.recent_ratio;
            out[per] = q.back().copied().unwrap_or(nan);
            out[per + 1] = back(q, 2);
            out[per + 2] = if q.is_empty() {
                nan
            } else {
                median_sorted_f32(&sorted(q)[..q.len()])
            };
        }
    }
}

/// Which submits a read leaves out: every submit at or after `cut` (a job submitted at `cut`
/// does not see them), and one unfinished submit at `own` (the job asked about, whose own
/// submit is not its history).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LeaveOut {
    pub cut: f64,
    pub own: Option<f64>,
}

impl LeaveOut {
    /// Leaves nothing out.
    pub const NONE: LeaveOut = LeaveOut {
        cut: f64::INFINITY,
        own: None,
    };
}

/// The submit-derived quantities of a history at an instant, some submits left out.
struct SubmitsSeen {
    last_submit: Option<f64>,
    submits_1h: usize,
    submits_10m: usize,
    n_unfinished: u64,
    oldest_unfinished: Option<f64>,
}

impl History {
    /// The submit-derived quantities at `now` without the submits `leave` names. Nothing
    /// left out gives exactly the history's own values. The latest submit before the
    /// left-out ones is exact when they are the latest one or two distinct submit times, or
    /// when it lies within the hour window; otherwise it reads as none.
    fn submits_seen(&self, now: f64, leave: LeaveOut) -> SubmitsSeen {
        let cut = leave.cut;
        // the own submit counts only when it is not already behind the cut and still held
        let own = leave.own.filter(|&t| t < cut);
        let held = |t: f64| self.submits_1h.front().is_some_and(|&f| f <= t);
        let stale = self
            .submits_1h
            .iter()
            .take_while(|&&t| now - t > 3600.0)
            .count();
        let after_cut = self
            .submits_1h
            .iter()
            .rev()
            .take_while(|&&t| t >= cut)
            .count();
        let own_in = |window: f64| own.is_some_and(|t| held(t) && now - t <= window);
        let in_window = self.submits_1h.len() - stale;
        let submits_1h = in_window
            .saturating_sub(after_cut)
            .saturating_sub(usize::from(own_in(3600.0)));
        let submits_10m = self
            .submits_1h
            .iter()
            .rev()
            .skip(after_cut)
            .take_while(|&&t| now - t <= 600.0)
            .count()
            .saturating_sub(usize::from(own_in(600.0)));
        // unfinished submits at or after the cut, and the own one, are left out
        let behind_cut: u64 = self
            .unfinished
            .range(order_key(cut)..)
            .map(|(_, (_, n))| u64::from(*n))
            .sum();
        let own_unfinished = own.is_some_and(|t| self.unfinished.contains_key(&order_key(t)));
        let n_unfinished = self
            .n_unfinished
            .saturating_sub(behind_cut)
            .saturating_sub(u64::from(own_unfinished));
        let oldest_unfinished = self
            .unfinished
            .range(..order_key(cut))
            .map(|(_, (t, n))| (*t, *n - u32::from(own == Some(*t))))
            .find(|(_, n)| *n > 0)
            .map(|(t, _)| t);
        SubmitsSeen {
            last_submit: self.last_submit_before(cut, own),
            submits_1h,
            submits_10m,
            n_unfinished,
            oldest_unfinished,
        }
    }

    /// The latest submit before `cut`, one submit at `own` left out (see
    /// [`History::submits_seen`]).
    fn last_submit_before(&self, cut: f64, own: Option<f64>) -> Option<f64> {
        let last = self.last_submit?;
        if last < cut && (own != Some(last) || self.last_submit_n > 1) {
            return Some(last);
        }
        if let Some(p) = self.prev_submit.filter(|&p| p < cut && own != Some(p)) {
            return Some(p);
        }
        // the hour window, one occurrence of the own submit skipped
        let mut skipped = false;
        self.submits_1h
            .iter()
            .copied()
            .filter(|&t| {
                if t >= cut {
                    return false;
                }
                if !skipped && own == Some(t) {
                    skipped = true;
                    return false;
                }
                true
            })
            .reduce(f64::max)
    }
}

/// The (at most [`KEEP`]) values of `q` in ascending order at the front of a stack array,
/// so features need no allocation per job.
fn sorted(q: &VecDeque<f32>) -> [f32; KEEP] {
    let mut v = [0.0; KEEP];
    for (slot, x) in v.iter_mut().zip(q) {
        *slot = *x;
    }
    v[..q.len().min(KEEP)].sort_by(f32::total_cmp);
    v
}

/// Median of a sorted, non-empty slice.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_key_orders_floats() {
        let xs = [-5.0, -0.5, 0.0, 1.0, 2.5, 1e9];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]), "{w:?}");
        }
    }

    #[test]
    fn history_features() {
        let mut h = History::default();
        h.on_submit(0.0);
        h.on_submit(10.0);
        h.on_submit(20.0);
        h.on_finish(0.0, 100.0, 100f32.ln(), None, Some(false));
        h.on_finish(10.0, 1010.0, 1000f32.ln(), None, Some(true));
        let mut out = [0f32; PER_KEY_FEATURES.len()];
        h.prune(1200.0);
        h.write_at(1200.0, &mut out);
        assert_eq!(out[0], 2f32.ln_1p());
        assert!((out[1] - 1000f32.ln()).abs() < 1e-6);
        assert!((out[2] - (100f32.ln() + 1000f32.ln()) / 2.0).abs() < 1e-5);
        assert_eq!(out[6], 0.5);
        // the one unfinished job was submitted at 20 s
        assert_eq!(out[10], 1f32.ln_1p());
        assert!((out[11] - 1180f32.ln_1p()).abs() < 1e-4);
        // all three submits are within the hour, none within 10 min
        assert_eq!(out[8], 3f32.ln_1p());
        assert_eq!(out[9], 0.0);
        assert!((out[12] - 190f32.ln_1p()).abs() < 1e-4);
    }
}
