//! The advice replay ([`AdviceSpec`]): a share of users take the advisor's earliest-finish
//! option when they submit, so a replay with advice can be compared with the same replay
//! without ([`AdviceReport::compare`]).
//!
//! At a taking user's job's submit the simulator lists the shapes the trace allows it (its GPUs
//! halved and doubled within `[1, healthy GPUs]`, or within `[min, max]` for an elastic job; with
//! several GPU types also each type), predicts each option's start with
//! [`estimate_start`](crate::drain::estimate_start) from the state at that moment (free GPUs by
//! type, running jobs' *predicted* ends, the queue ahead with predicted run times; true
//! remaining times only when the spec says [`PredictedEnds::Oracle`]) and its run time as the
//! job's predicted run time × the [`RatioModel`]'s ratio, and submits the job in the shape of
//! the earliest predicted finish. The job's true run time in its new shape follows the
//! simulator's own ground truth (its [`ScalingModel`](crate::ScalingModel) and per-job type
//! affinity): the ratio is a prediction, the simulator's is the truth; both are logged.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use augur_numeric::{median, SplitMix64};
use serde::Serialize;

use super::engine::Simulator;
use super::job::State;
use crate::drain::{estimate_start, QueueState, QueuedShape, RunningShape};
use crate::metrics::SimResult;
use crate::scaling::reshape::{Reshaper, Shape};
use crate::scaling::ScalingModel;

/// A shape as the ratio model reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeRef<'a> {
    pub gpus: u32,
    /// GPU type (lower-case name); `None`: any type.
    pub gpu_type: Option<&'a str>,
}

/// The advisor's prediction of run time under another shape.
pub trait RatioModel: Send + Sync + fmt::Debug {
    /// Predicted run time under `to` / run time under `from` (finite, > 0).
    fn ratio(&self, job_name: Option<&str>, from: ShapeRef<'_>, to: ShapeRef<'_>) -> f64;
    /// What the ratios rest on, for the report.
    fn describe(&self) -> String;
}

/// Ratios from a [`ScalingModel`] (sizes only; a type change is taken as no change). When it
/// is the simulator's own model, the size part of the advice is an oracle.
#[derive(Debug, Clone, Copy)]
pub struct ScalingRatio(pub ScalingModel);

impl RatioModel for ScalingRatio {
    fn ratio(&self, _: Option<&str>, from: ShapeRef<'_>, to: ShapeRef<'_>) -> f64 {
        let r = self.0.speedup(from.gpus) / self.0.speedup(to.gpus);
        if r.is_finite() && r > 0.0 {
            r
        } else {
            1.0
        }
    }

    fn describe(&self) -> String {
        format!("scaling model {:?} (sizes only)", self.0)
    }
}

/// The measured scaling model (own history is not passed: the replay keeps no past runs).
impl RatioModel for Reshaper {
    fn ratio(&self, job_name: Option<&str>, from: ShapeRef<'_>, to: ShapeRef<'_>) -> f64 {
        let shape = |s: ShapeRef<'_>| Shape {
            gpus: f64::from(s.gpus),
            gpu_type: s.gpu_type.map(str::to_string),
        };
        Reshaper::ratio(self, job_name, &shape(from), &shape(to), &[]).ratio
    }

    fn describe(&self) -> String {
        "the advisor's measured scaling model (Reshaper: MLPerf v1.0 by benchmark name, Gavel by \
         model family, else Pollux-fitted Amdahl for size and Gavel's median for type)"
            .into()
    }
}

/// What the advisor reads as a running job's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictedEnds {
    /// First start + the job's predicted run time in its shape; once that end has passed, now +
    /// the time it has run (it is read to run as long again, not to end any moment).
    Predicted,
    /// The simulator's true remaining time (an oracle run).
    Oracle,
}

/// Who takes advice and how the advisor reads the cluster.
#[derive(Debug, Clone)]
pub struct AdviceSpec {
    /// By trace row: does the job's user take advice ([`select_takers`]).
    pub takers: Vec<bool>,
    /// By trace row: the job's name (for the ratio model's own-history and benchmark lookups).
    pub job_names: Vec<Option<String>>,
    pub ends: PredictedEnds,
    /// Also offer the cluster's other GPU types (when it has more than one).
    pub types: bool,
    /// Run time assumed for a job without a prediction (as the policies assume).
    pub unknown_runtime_s: f64,
    /// An option may cost at most this many times the request's predicted GPU-hours (`None`:
    /// any cost). At 1, advice never takes GPU-hours from the others: without a budget every
    /// taker who finds GPUs free doubles its request and the others wait (see
    /// `docs/advice-simulation.md`).
    pub gpu_hours_budget: Option<f64>,
}

/// Which users take advice: a seeded hash of each user name, with the counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TakerSelection {
    /// What identifies a user (`user`, or a stand-in the caller names when the trace has none).
    pub key: String,
    pub share: f64,
    pub seed: u64,
    pub method: String,
    pub users: usize,
    pub taking_users: usize,
    pub jobs: usize,
    pub taking_jobs: usize,
}

/// FNV-1a of the name, mixed with the seed through SplitMix64: a number in [0, 1).
fn user_draw(user: &str, seed: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in user.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    SplitMix64(h ^ seed).unit()
}

/// By row: whether the job's user takes advice (`share` of users, chosen by a seeded hash of
/// the user name, so a user's jobs all take it or none does). Jobs without a user never do.
/// `key` names what `users` holds (for the report).
pub fn select_takers(
    users: &[Option<&str>],
    key: &str,
    share: f64,
    seed: u64,
) -> (Vec<bool>, TakerSelection) {
    let mut by_user: BTreeMap<&str, bool> = BTreeMap::new();
    let takers: Vec<bool> = users
        .iter()
        .map(|u| match u.filter(|u| !u.is_empty()) {
            Some(u) => *by_user
                .entry(u)
                .or_insert_with(|| user_draw(u, seed) < share),
            None => false,
        })
        .collect();
    let sel = TakerSelection {
        key: key.to_string(),
        share,
        seed,
        method: "a user takes advice when SplitMix64(FNV-1a(name) xor seed).unit() < share; \
                 jobs without one never do"
            .into(),
        users: by_user.len(),
        taking_users: by_user.values().filter(|t| **t).count(),
        jobs: users.len(),
        taking_jobs: takers.iter().filter(|t| **t).count(),
    };
    (takers, sel)
}

/// The advice one taker's job got at its submit, and what then happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdviceRecord {
    pub row: usize,
    pub at: f64,
    pub from_gpus: u32,
    pub to_gpus: u32,
    pub to_type: Option<String>,
    /// Options weighed (that could ever start).
    pub options: usize,
    pub predicted_start: f64,
    pub predicted_runtime: f64,
    pub predicted_finish: f64,
    /// The advisor's run-time ratio (new shape / requested) and the simulator's true one.
    pub predicted_ratio: f64,
    pub true_ratio: f64,
    pub actual_start: Option<f64>,
    pub actual_finish: Option<f64>,
}

impl AdviceRecord {
    pub fn changed(&self) -> bool {
        self.from_gpus != self.to_gpus || self.to_type.is_some()
    }
}

/// The advisor inside a simulator.
#[derive(Debug)]
pub(super) struct Advisor {
    pub spec: AdviceSpec,
    pub model: Arc<dyn RatioModel>,
    pub log: Vec<AdviceRecord>,
}

/// One option weighed.
struct Candidate {
    gpus: u32,
    gpu_type: Option<u16>,
    ratio: f64,
    runtime: f64,
    start: f64,
}

impl Simulator {
    /// Replays with advice: the users of `spec.takers` take the earliest-finish option at
    /// submit, run times under other shapes predicted by `model`.
    pub fn with_advice(mut self, spec: AdviceSpec, model: Arc<dyn RatioModel>) -> Simulator {
        let total = self.cfg.cluster.total_gpus();
        if (self.speedup.len() as u32) <= total {
            self.speedup = (0..=total).map(|n| self.cfg.scaling.speedup(n)).collect();
        }
        self.advisor = Some(Box::new(Advisor {
            spec,
            model,
            log: Vec::new(),
        }));
        self
    }

    /// The advice given so far, with each job's actual start and finish as of now.
    pub fn advice_log(&self) -> Vec<AdviceRecord> {
        let Some(a) = &self.advisor else {
            return Vec::new();
        };
        let at: BTreeMap<usize, (Option<f64>, Option<f64>)> = self
            .jobs
            .iter()
            .map(|j| {
                let fin = (j.state == State::Done).then_some(j.finish);
                (j.src.row, (j.first_start, fin))
            })
            .collect();
        a.log
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(&(s, f)) = at.get(&r.row) {
                    r.actual_start = s;
                    r.actual_finish = f;
                }
                r
            })
            .collect()
    }

    /// The run time the advisor believes job `i` has in its current shape.
    fn believed_runtime(&self, i: u32) -> f64 {
        let unknown = self
            .advisor
            .as_ref()
            .map_or(3600.0, |a| a.spec.unknown_runtime_s);
        self.jobs.get(i as usize).map_or(unknown, |j| {
            j.believed_runtime
                .or(j.src.predicted)
                .unwrap_or(unknown)
                .max(1.0)
        })
    }

    /// The cluster as the advisor reads it now: free GPUs, running ends and the queue, by GPU
    /// type (`typed`) or all in one pool.
    fn queue_state(&self, typed: bool) -> QueueState {
        let oracle = self
            .advisor
            .as_ref()
            .is_some_and(|a| a.spec.ends == PredictedEnds::Oracle);
        let type_name = |t: u16| -> Option<String> {
            typed.then(|| {
                self.cfg
                    .cluster
                    .gpu_types
                    .get(usize::from(t))
                    .map_or_else(String::new, |g| g.name.to_lowercase())
            })
        };
        let mut free: BTreeMap<String, f64> = BTreeMap::new();
        for (k, &t) in self.node_type.iter().enumerate() {
            let k = k as u32;
            if self.cap.healthy(k) {
                *free.entry(type_name(t).unwrap_or_default()).or_default() +=
                    f64::from(self.cap.free(k));
            }
        }
        let mut running = Vec::with_capacity(self.running.len());
        for &i in &self.running {
            let Some(j) = self.jobs.get(i as usize) else {
                continue;
            };
            let end = if oracle {
                let rate = self.rate_of(i, j).max(1e-9);
                let done = j.done + j.rate * (self.now - j.t_upd).max(0.0);
                self.now + (j.work - done).max(0.0) / rate
            } else {
                let start = j.first_start.unwrap_or(j.started);
                crate::drain::read_end(start, start + self.believed_runtime(i), self.now)
            };
            let mut by_type: BTreeMap<Option<String>, u32> = BTreeMap::new();
            for s in &j.slots {
                let t = self.node_type.get(s.node as usize).copied().unwrap_or(0);
                *by_type.entry(type_name(t)).or_default() += s.gpus;
            }
            for (gpu_type, gpus) in by_type {
                running.push(RunningShape {
                    id: i.to_string(),
                    gpus: f64::from(gpus),
                    gpu_type,
                    predicted_end: end,
                });
            }
        }
        let queued = self
            .queue
            .iter()
            .filter_map(|&i| {
                let j = self.jobs.get(i as usize)?;
                (j.state == State::Queued).then(|| QueuedShape {
                    id: i.to_string(),
                    gpus: f64::from(j.requested),
                    gpu_type: j.advised_type.and_then(type_name),
                    runtime: self.believed_runtime(i),
                })
            })
            .collect();
        QueueState {
            now: self.now,
            free,
            running,
            queued,
        }
    }

    /// The sizes job `i` may ask for: its request halved and doubled, within its elastic
    /// bounds or `[1, healthy GPUs]`.
    fn candidate_sizes(&self, i: u32) -> Vec<u32> {
        let Some(j) = self.jobs.get(i as usize) else {
            return Vec::new();
        };
        let g = j.requested;
        let (lo, hi) = if j.min < j.max {
            (j.min, j.max)
        } else {
            (1, self.healthy_total().max(1))
        };
        let mut sizes = vec![g];
        for s in [g / 2, g.saturating_mul(2)] {
            let s = s.clamp(lo, hi);
            if !sizes.contains(&s) {
                sizes.push(s);
            }
        }
        sizes
    }

    /// At job `i`'s submit: when its user takes advice, resubmits it in the shape of the
    /// earliest predicted finish.
    pub(super) fn advise_at_submit(&mut self, i: u32) {
        let Some(adv) = &self.advisor else {
            return;
        };
        let Some(j) = self.jobs.get(i as usize) else {
            return;
        };
        if !adv.spec.takers.get(j.src.row).copied().unwrap_or(false) {
            return;
        }
        let row = j.src.row;
        let name = adv.spec.job_names.get(row).cloned().flatten();
        let model = adv.model.clone();
        let typed = adv.spec.types && self.cfg.cluster.gpu_types.len() > 1;
        let base_runtime = j
            .src
            .predicted
            .unwrap_or(adv.spec.unknown_runtime_s)
            .max(1.0);
        let g0 = j.requested;
        let type_names: Vec<String> = self
            .cfg
            .cluster
            .gpu_types
            .iter()
            .map(|t| t.name.to_lowercase())
            .collect();
        // trace durations are measured on the first type
        let reference = typed
            .then(|| type_names.first().map(String::as_str))
            .flatten();
        let from = ShapeRef {
            gpus: g0,
            gpu_type: reference,
        };
        let any_state = self.queue_state(false);
        let typed_state = typed.then(|| self.queue_state(true));
        let mut options: Vec<Candidate> = Vec::new();
        for gpus in self.candidate_sizes(i) {
            let mut types: Vec<Option<u16>> = vec![None];
            if typed {
                types.extend((0..type_names.len() as u16).map(Some));
            }
            for gpu_type in types {
                let to_name = gpu_type.and_then(|t| type_names.get(usize::from(t)));
                let to = ShapeRef {
                    gpus,
                    gpu_type: to_name.map(String::as_str),
                };
                let ratio = if gpus == g0 && gpu_type.is_none() {
                    1.0
                } else {
                    // "any type" reads as the request's own (reference) type
                    let to = if to.gpu_type.is_none() {
                        ShapeRef {
                            gpus,
                            gpu_type: from.gpu_type,
                        }
                    } else {
                        to
                    };
                    let r = model.ratio(name.as_deref(), from, to);
                    if r.is_finite() && r > 0.0 {
                        r
                    } else {
                        1.0
                    }
                };
                let runtime = base_runtime * ratio;
                let over_budget = adv.spec.gpu_hours_budget.is_some_and(|b| {
                    f64::from(gpus) * runtime > b * f64::from(g0) * base_runtime * (1.0 + 1e-9)
                });
                if over_budget && !(gpus == g0 && gpu_type.is_none()) {
                    continue;
                }
                let state = match (&typed_state, gpu_type) {
                    (Some(s), Some(_)) => s,
                    _ => &any_state,
                };
                let shape = QueuedShape {
                    id: i.to_string(),
                    gpus: f64::from(gpus),
                    gpu_type: to_name.cloned(),
                    runtime,
                };
                if let Some(start) = estimate_start(state, &shape, None).start {
                    options.push(Candidate {
                        gpus,
                        gpu_type,
                        ratio,
                        runtime,
                        start,
                    });
                }
            }
        }
        // the request itself comes first and wins ties
        let Some(best) = options
            .iter()
            .fold(None::<&Candidate>, |best, c| match best {
                Some(b) if b.start + b.runtime <= c.start + c.runtime => Some(b),
                _ => Some(c),
            })
        else {
            return;
        };
        let true_ratio = self.true_ratio(i, g0, best.gpus, best.gpu_type);
        let record = AdviceRecord {
            row,
            at: self.now,
            from_gpus: g0,
            to_gpus: best.gpus,
            to_type: best
                .gpu_type
                .and_then(|t| type_names.get(usize::from(t)).cloned()),
            options: options.len(),
            predicted_start: best.start,
            predicted_runtime: best.runtime,
            predicted_finish: best.start + best.runtime,
            predicted_ratio: best.ratio,
            true_ratio,
            actual_start: None,
            actual_finish: None,
        };
        let (gpus, gpu_type, runtime) = (best.gpus, best.gpu_type, best.runtime);
        let su = |n: u32| self.cfg.scaling.speedup(n);
        let work_factor = su(g0) / su(gpus);
        if let Some(j) = self.jobs.get_mut(i as usize) {
            if gpus != g0 {
                if j.min == j.max {
                    j.min = gpus;
                    j.max = gpus;
                }
                j.requested = gpus;
                // work is seconds at the requested size on reference GPUs
                j.work *= work_factor;
            }
            j.advised_type = gpu_type;
            j.believed_runtime = Some(runtime);
        }
        if let Some(a) = self.advisor.as_mut() {
            a.log.push(record);
        }
    }

    /// The simulator's true run-time ratio of job `i` from `g0` GPUs (reference type) to
    /// `gpus` of `gpu_type` (size only when no type is named: its speed then depends on where
    /// it lands).
    fn true_ratio(&self, i: u32, g0: u32, gpus: u32, gpu_type: Option<u16>) -> f64 {
        let su = |n: u32| self.cfg.scaling.speedup(n);
        let size = su(g0) / su(gpus);
        let Some(t) = gpu_type else {
            return size;
        };
        let t = usize::from(t);
        let class = self
            .affinity
            .as_ref()
            .and_then(|a| a.class_of(super::job::job_id(i)));
        let speed = |k: usize| {
            class
                .and_then(|c| c.speeds.get(k).copied())
                .or_else(|| self.cfg.cluster.gpu_types.get(k).map(|g| g.speed))
                .unwrap_or(1.0)
        };
        size * speed(0) / speed(t).max(1e-9)
    }
}

/// Mean of a slice (`NaN` when empty).
fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Mean JCT with and without advice over the same jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JctPair {
    /// Jobs finished in both replays.
    pub jobs: usize,
    pub without: f64,
    pub with: f64,
    /// 1 − with / without (positive: advice helped).
    pub cut: f64,
}

impl JctPair {
    fn of(pairs: &[(f64, f64)]) -> JctPair {
        let without = mean(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
        let with = mean(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        JctPair {
            jobs: pairs.len(),
            without,
            with,
            cut: if without > 0.0 {
                1.0 - with / without
            } else {
                f64::NAN
            },
        }
    }
}

/// How many jobs went from one shape to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeChange {
    pub from_gpus: u32,
    pub to_gpus: u32,
    pub to_type: Option<String>,
    pub jobs: usize,
}

/// Errors of the advisor's predictions, seconds (predicted − actual) or log ratio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdviceErrors {
    pub jobs: usize,
    /// Predicted − actual start: median, mean and median absolute.
    pub start_median_s: f64,
    pub start_mean_s: f64,
    pub start_median_abs_s: f64,
    /// Predicted − actual finish.
    pub finish_median_s: f64,
    pub finish_mean_s: f64,
    pub finish_median_abs_s: f64,
    /// Over jobs that changed shape: |ln(predicted ratio / true ratio)|, median and mean, and
    /// the mean ratios.
    pub changed_jobs: usize,
    pub ratio_median_abs_log: f64,
    pub ratio_mean_abs_log: f64,
    pub predicted_ratio_mean: f64,
    pub true_ratio_mean: f64,
}

/// The advice replay against the same replay without advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdviceReport {
    pub policy: String,
    pub selection: TakerSelection,
    pub ends: PredictedEnds,
    pub ratio_model: String,
    pub takers: JctPair,
    pub others: JctPair,
    pub cluster: JctPair,
    pub advised_jobs: usize,
    pub changed_jobs: usize,
    pub changes: Vec<ShapeChange>,
    pub errors: AdviceErrors,
    /// GPU-seconds held, with / without advice.
    pub gpu_s_ratio: f64,
    /// The options' GPU-hours budget (times the request's), when there was one.
    pub gpu_hours_budget: Option<f64>,
}

impl AdviceReport {
    /// Compares the replay `with` advice (and its `log`) against `without`, job by job.
    pub fn compare(
        without: &SimResult,
        with: &SimResult,
        log: &[AdviceRecord],
        takers: &[bool],
        selection: TakerSelection,
        ends: PredictedEnds,
        ratio_model: String,
    ) -> AdviceReport {
        let with_by_row: BTreeMap<usize, f64> = with
            .jobs
            .iter()
            .filter_map(|j| Some((j.row, j.jct()?)))
            .collect();
        let (mut t, mut o, mut all) = (Vec::new(), Vec::new(), Vec::new());
        for j in &without.jobs {
            let (Some(a), Some(&b)) = (j.jct(), with_by_row.get(&j.row)) else {
                continue;
            };
            all.push((a, b));
            if takers.get(j.row).copied().unwrap_or(false) {
                t.push((a, b));
            } else {
                o.push((a, b));
            }
        }
        let mut changes: BTreeMap<(u32, u32, Option<String>), usize> = BTreeMap::new();
        for r in log.iter().filter(|r| r.changed()) {
            *changes
                .entry((r.from_gpus, r.to_gpus, r.to_type.clone()))
                .or_default() += 1;
        }
        let mut changes: Vec<ShapeChange> = changes
            .into_iter()
            .map(|((from_gpus, to_gpus, to_type), jobs)| ShapeChange {
                from_gpus,
                to_gpus,
                to_type,
                jobs,
            })
            .collect();
        changes.sort_by_key(|c| std::cmp::Reverse(c.jobs));
        let gpu_s = |r: &SimResult| r.jobs.iter().map(|j| j.gpu_s).sum::<f64>();
        AdviceReport {
            policy: with.policy.clone(),
            selection,
            ends,
            ratio_model,
            takers: JctPair::of(&t),
            others: JctPair::of(&o),
            cluster: JctPair::of(&all),
            advised_jobs: log.len(),
            changed_jobs: log.iter().filter(|r| r.changed()).count(),
            changes,
            errors: errors(log),
            gpu_s_ratio: gpu_s(with) / gpu_s(without).max(1e-9),
            gpu_hours_budget: None,
        }
    }
}

fn errors(log: &[AdviceRecord]) -> AdviceErrors {
    let mut start = Vec::new();
    let mut finish = Vec::new();
    for r in log {
        if let (Some(s), Some(f)) = (r.actual_start, r.actual_finish) {
            start.push(r.predicted_start - s);
            finish.push(r.predicted_finish - f);
        }
    }
    let abs = |xs: &[f64]| xs.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let changed: Vec<&AdviceRecord> = log.iter().filter(|r| r.changed()).collect();
    let ratio_err: Vec<f64> = changed
        .iter()
        .map(|r| (r.predicted_ratio / r.true_ratio).ln().abs())
        .collect();
    let med = |xs: &[f64]| median(&mut xs.to_vec()).unwrap_or(f64::NAN);
    AdviceErrors {
        jobs: start.len(),
        start_median_s: med(&start),
        start_mean_s: mean(&start),
        start_median_abs_s: med(&abs(&start)),
        finish_median_s: med(&finish),
        finish_mean_s: mean(&finish),
        finish_median_abs_s: med(&abs(&finish)),
        changed_jobs: changed.len(),
        ratio_median_abs_log: med(&ratio_err),
        ratio_mean_abs_log: mean(&ratio_err),
        predicted_ratio_mean: mean(
            &changed
                .iter()
                .map(|r| r.predicted_ratio)
                .collect::<Vec<_>>(),
        ),
        true_ratio_mean: mean(&changed.iter().map(|r| r.true_ratio).collect::<Vec<_>>()),
    }
}
