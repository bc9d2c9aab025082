//! The advisor: for a job's profile, the alternatives the cluster offers ([`choices`]: GPU
//! counts, GPU types, queues) each with its predicted start, run time, finish and GPU-hours,
//! the earliest finish and the cheapest option near it marked.
//!
//! - The start of an option is the queue-wait model's answer for the changed profile at the
//!   same moment ([`Online::predict_wait`]): the answer `POST /v1/predict/queue-wait` gives
//!   for that profile.
//! - Its run time is the runtime model's answer for the job *as requested* times the
//!   measured scaling ratio between the two shapes ([`Reshaper::ratio`]): the runtime model,
//!   trained on history, cannot say what the same job does on 4× the GPUs (bigger jobs are
//!   different jobs). The 80% intervals of the two are combined in log space (their
//!   half-widths add in quadrature, as for independent errors), then cut at the time limit.
//! - Each row names what its run time rests on (the ratio's basis; "the request as given"
//!   for the request) and how sure it is (the interval widths).
//!
//! A changed GPU count keeps the request's resources per GPU (nodes, CPUs and memory scale
//! with it). Without the scaling data ([`Scaling::Missing`]) only the request's own size and
//! type are weighed (other queues still are), and the answer says so in `unavailable`.
//!
//! The same combination answers for a job whose GPU type was named after its submit
//! ([`runtime_on_type`]): the run time it will have on the type it will get.

pub mod choices;

use std::sync::{Arc, OnceLock};

use augur_autoscaler::scaling::reshape::{Basis, BasisSource, Reshaper, RuntimeRatio, Shape};
use augur_predictor::ModelKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use self::choices::Choice;
use crate::serve::state::events::{FinishStatus, JobProfile};
use crate::serve::state::online::{Online, PredictError, RuntimeAnswer, WaitAnswer};

/// Tolerance of "near the earliest finish": an option finishing within this share of the
/// earliest finish's time from now is near it.
pub const TOLERANCE: f64 = 0.10;

/// The range of GPU counts to weigh (both ends included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuRange {
    /// At least 1 (default 1).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    pub min: Option<u32>,
    /// At most the plausible maximum (100,000); counts above the cluster's largest are left
    /// out (default: the cluster's largest).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    pub max: Option<u32>,
}

/// What to weigh besides the request (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdviceRequest {
    /// GPU counts (default: a quarter to four times the request, within the cluster).
    #[serde(default)]
    pub gpus: Option<GpuRange>,
    /// GPU types (default: every type the cluster's jobs named); each must be one of those.
    #[serde(default)]
    pub gpu_types: Option<Vec<String>>,
    /// Queues / partitions (default: the ones the user's jobs used); each must be one the
    /// cluster's jobs used.
    #[serde(default)]
    pub queues: Option<Vec<String>>,
}

/// The measured scaling the advisor reads, built once at start ([`Scaling::bundled`]).
#[derive(Debug, Clone)]
pub enum Scaling {
    Loaded(Arc<Reshaper>),
    /// Its data could not be read: advice weighs only the request's own size and type.
    Missing {
        why: String,
    },
}

impl Scaling {
    /// The scaling model from the bundled data, read once per process; its absence is
    /// logged loudly, not fatal.
    pub fn bundled() -> Scaling {
        static BUNDLED: OnceLock<Scaling> = OnceLock::new();
        BUNDLED
            .get_or_init(|| match Reshaper::bundled() {
                Ok(r) => Scaling::Loaded(Arc::new(r)),
                Err(e) => {
                    let why = format!("the scaling data could not be read: {e}");
                    tracing::error!(error = %why, "advice will weigh only the requested GPU count and type");
                    Scaling::Missing { why }
                }
            })
            .clone()
    }

    pub fn reshaper(&self) -> Option<&Reshaper> {
        match self {
            Scaling::Loaded(r) => Some(r),
            Scaling::Missing { .. } => None,
        }
    }
}

/// A run-time interval (80%) of one option, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunTime {
    pub seconds: f64,
    pub lower: f64,
    pub upper: f64,
    /// Nominal coverage of `[lower, upper]`.
    pub coverage: f64,
    /// The time limit cut it (the scheduler ends the job there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped_by_requested_time: bool,
}

/// One alternative with its predictions.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AdviceOption {
    /// The request as given (the first row).
    pub is_request: bool,
    pub gpus: Option<f64>,
    pub gpu_type: Option<String>,
    pub queue: Option<String>,
    /// The queue-wait model's answer for this option (the same as `POST
    /// /v1/predict/queue-wait` for its profile at `at`).
    pub wait: WaitAnswer,
    /// Predicted start: `at` + the median wait.
    pub start: f64,
    /// `at` + the wait's upper bound (`wait.coverage`, 95%).
    pub start_upper: f64,
    pub runtime: RunTime,
    /// `start` + the run time.
    pub finish: f64,
    /// `start_upper` + the run time's upper end.
    pub finish_upper: f64,
    /// GPUs × run time, hours (none without a GPU count).
    pub gpu_hours: Option<f64>,
    /// The run-time ratio to the request and what it rests on (`basis.source`,
    /// `basis.detail`) with its own 80% interval (`low`, `high`).
    #[schema(value_type = Object)]
    pub ratio: RuntimeRatio,
    /// `upper / lower` of the run time: how sure it is (1 = certain; none when the lower
    /// end is 0).
    pub runtime_spread: Option<f64>,
    /// The earliest predicted finish.
    pub earliest_finish: bool,
    /// The fewest GPU-hours among the options finishing within the tolerance of the
    /// earliest finish.
    pub cheapest_near_earliest: bool,
}

/// The advice for one job (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Advice {
    /// The moment the options are predicted for (a would-be submit at `at`).
    pub now: f64,
    pub job_id: Option<String>,
    /// The request first, then every other option by predicted finish.
    pub options: Vec<AdviceOption>,
    /// The share of the earliest finish's time from now within which an option counts as
    /// near it.
    pub tolerance: f64,
    pub runtime_model_version: Option<u32>,
    pub queue_wait_model_version: Option<u32>,
    /// What could not be weighed and why (loud, never silent).
    pub unavailable: Vec<String>,
    /// Options left out and other remarks.
    pub notes: Vec<String>,
}

/// Why no advice could be given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdviceError {
    /// A request field is invalid (a 422 naming it).
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// A model could not answer for the request itself.
    #[error("the prediction for the request failed: {0:?}")]
    Predict(PredictError),
}

impl AdviceError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> AdviceError {
        AdviceError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The field at fault (`""` when none).
    pub fn field(&self) -> &str {
        match self {
            AdviceError::Invalid { field, .. } => field,
            AdviceError::Predict(PredictError::CannotFit { field, .. }) => field,
            AdviceError::Predict(_) => "",
        }
    }
}

/// The advice for a job with `profile` (an ingested one's `job_id`, or none for a
/// would-be submit) at the online state's now.
pub fn advise(
    online: &Online,
    reshaper: &Reshaper,
    job_id: Option<&str>,
    profile: &JobProfile,
    req: &AdviceRequest,
) -> Result<Advice, AdviceError> {
    advise_at(online, Some(reshaper), job_id, profile, req, online.now())
}

/// [`advise`] at the moment `at`, with the scaling model when there is one.
pub fn advise_at(
    online: &Online,
    reshaper: Option<&Reshaper>,
    job_id: Option<&str>,
    profile: &JobProfile,
    req: &AdviceRequest,
    at: f64,
) -> Result<Advice, AdviceError> {
    let mut unavailable = Vec::new();
    let mut choices = choices::choices(online, profile, req)?;
    if reshaper.is_none() {
        unavailable.push(
            "other GPU counts and types: the scaling data is missing (see the service's log), so only the request's own size and type are weighed".to_string(),
        );
        choices.list.retain(|c| {
            c.gpus == profile.num_gpus && choices::same(&c.gpu_type, &profile.gpu_type)
        });
    }
    let id = job_id.unwrap_or("(request)");
    let base = online
        .predict_runtime(id, profile, at)
        .map_err(AdviceError::Predict)?;
    let own = online
        .predict_wait(id, profile, at)
        .map_err(AdviceError::Predict)?;
    let past = choices::past_runs(online, job_id, profile);
    let from = shape_of(profile.num_gpus, profile.gpu_type.clone());
    let mut notes = choices.notes;
    let mut options = Vec::with_capacity(choices.list.len());
    for (i, c) in choices.list.iter().enumerate() {
        let changed = changed_profile(profile, c);
        let wait = if i == 0 {
            own
        } else {
            match online.predict_wait(id, &changed, at) {
                Ok(w) => w,
                Err(e) => {
                    notes.push(format!("{} left out: {e:?}", describe(c)));
                    continue;
                }
            }
        };
        let ratio = if i == 0 {
            as_given()
        } else {
            match reshaper {
                Some(r) => r.ratio(
                    profile.job_name.as_deref(),
                    &from,
                    &shape_of(c.gpus, c.gpu_type.clone()),
                    &past,
                ),
                None => as_given(),
            }
        };
        match option(i == 0, c, at, wait, &base, ratio, profile.requested_time) {
            Some(o) => options.push(o),
            None => notes.push(format!(
                "{} left out: a prediction was not a finite, non-negative number",
                describe(c)
            )),
        }
    }
    if options.first().is_none_or(|o| !o.is_request) {
        return Err(AdviceError::Predict(PredictError::Internal(
            "the request's own prediction was not finite".into(),
        )));
    }
    mark(&mut options, at);
    options[1..].sort_by(|a, b| {
        let hours = |o: &AdviceOption| o.gpu_hours.unwrap_or(f64::INFINITY);
        a.finish
            .total_cmp(&b.finish)
            .then(hours(a).total_cmp(&hours(b)))
    });
    Ok(Advice {
        now: at,
        job_id: job_id.map(str::to_string),
        options,
        tolerance: TOLERANCE,
        runtime_model_version: online.models.version(ModelKind::Runtime),
        queue_wait_model_version: online.models.version(ModelKind::QueueWait),
        unavailable,
        notes,
    })
}

/// The run time of the ingested job `job_id` on GPU type `to`, asked at `at` (when the type
/// was named):
/// - the profile already named that type at submit: its answer at submit;
/// - the runtime model has data for the type (a finished job the service holds was submitted
///   with it, so the type's history features are there): the model's answer for the job's
///   profile with that type at `at`;
/// - else its answer at submit times the measured ratio from the type that answer was for to
///   `to` ([`Reshaper::ratio`], the job's own past runs included), the intervals combined
///   as for an advice option. The answer at submit is for the profile's type, or, when it
///   named none, for the type most of the held jobs named (the history the model learnt
///   from); when none did, nothing says which type it was for and it stands unchanged.
///
/// `None` when the job is unknown or no answer can be given (no runtime model served).
pub fn runtime_on_type(
    online: &Online,
    reshaper: Option<&Reshaper>,
    job_id: &str,
    to: &str,
    at: f64,
) -> Option<RuntimeAnswer> {
    TypeHistory::of(online).runtime_on_type(online, reshaper, job_id, to, at)
}

/// What the held jobs say about GPU types, read once for many questions: the types finished
/// jobs were submitted with (the runtime model has data for them) and the type most held jobs
/// named (the one an answer at submit without a type is for).
#[derive(Debug, Clone, Default)]
pub struct TypeHistory {
    known: std::collections::BTreeSet<String>,
    usual: Option<String>,
}

impl TypeHistory {
    /// Reads the held jobs once.
    pub fn of(online: &Online) -> TypeHistory {
        let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        let mut known = std::collections::BTreeSet::new();
        for j in online
            .jobs
            .values()
            .chain(online.earlier_runs.values().flatten())
        {
            let Some(t) = j.profile.as_ref().and_then(|p| p.gpu_type.as_deref()) else {
                continue;
            };
            *counts.entry(t).or_default() += 1;
            if j.status == Some(FinishStatus::Completed) && j.duration.is_some() {
                known.insert(t.to_string());
            }
        }
        // the most named type (ties: the first by name)
        let most = counts.values().copied().max();
        let usual = counts
            .into_iter()
            .find(|(_, n)| Some(*n) == most)
            .map(|(t, _)| t.to_string());
        TypeHistory { known, usual }
    }

    /// [`runtime_on_type`] with the held jobs read already.
    pub fn runtime_on_type(
        &self,
        online: &Online,
        reshaper: Option<&Reshaper>,
        job_id: &str,
        to: &str,
        at: f64,
    ) -> Option<RuntimeAnswer> {
        let job = online.jobs.get(job_id)?;
        let profile = job.profile.clone().unwrap_or_default();
        let to = Some(to.to_string());
        if choices::same(&profile.gpu_type, &to) {
            return job.runtime_at_submit;
        }
        let mut typed = profile.clone();
        typed.gpu_type = to.clone();
        if to.as_ref().is_some_and(|t| self.known.contains(t)) {
            return online.predict_runtime(job_id, &typed, at).ok();
        }
        let base = job.runtime_at_submit?;
        let from = profile.gpu_type.clone().or_else(|| self.usual.clone());
        let (Some(reshaper), Some(_)) = (reshaper, &from) else {
            return Some(base);
        };
        let ratio = reshaper.ratio(
            profile.job_name.as_deref(),
            &shape_of(profile.num_gpus, from),
            &shape_of(profile.num_gpus, to),
            &choices::past_runs(online, Some(job_id), &profile),
        );
        let rt = scaled(&base, &ratio, profile.requested_time)?;
        Some(RuntimeAnswer {
            model_version: base.model_version,
            seconds: rt.seconds,
            lower: rt.lower,
            upper: rt.upper,
            coverage: rt.coverage,
            interval: base.interval,
            capped_by_requested_time: rt.capped_by_requested_time,
        })
    }

    /// How fast job `job_id` runs on each of `types` relative to its predicted run time
    /// ([`JobInfo::runtime`](crate::serve::state::online::JobInfo::runtime)): that run time over
    /// its [`runtime_on_type`] answer for the type, so a controller that divides the run time
    /// by the speed plans with the very number every endpoint will give once the job is on
    /// that type. `None` when a run time is missing or not a positive number, or when every
    /// type gives the same run time (nothing makes one type better for it).
    pub fn speeds(
        &self,
        online: &Online,
        reshaper: Option<&Reshaper>,
        job_id: &str,
        types: &[String],
        at: f64,
    ) -> Option<Vec<f64>> {
        let base = online.jobs.get(job_id)?.runtime()?.seconds;
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(base) {
            return None;
        }
        let mut speeds = Vec::with_capacity(types.len());
        for t in types {
            let on = self
                .runtime_on_type(online, reshaper, job_id, t, at)?
                .seconds;
            if !ok(on) {
                return None;
            }
            speeds.push(base / on);
        }
        let first = speeds.first().copied()?;
        speeds.iter().any(|s| *s != first).then_some(speeds)
    }

    /// The typical speed of each of `types`: that of a job of no known model whose run time
    /// is predicted for the usual type ([`Reshaper::ratio`] without a name, as
    /// [`runtime_on_type`] uses it for such a job). `None` when no held job named a type
    /// (nothing says which type the run times are for) or without the scaling data.
    pub fn typical_speeds(
        &self,
        reshaper: Option<&Reshaper>,
        types: &[String],
    ) -> Option<Vec<f64>> {
        let (reshaper, from) = (reshaper?, self.usual.clone()?);
        let speeds: Vec<f64> = types
            .iter()
            .map(|t| {
                let r = reshaper.ratio(
                    None,
                    &shape_of(Some(1.0), Some(from.clone())),
                    &shape_of(Some(1.0), Some(t.clone())),
                    &[],
                );
                1.0 / r.ratio
            })
            .collect();
        speeds
            .iter()
            .all(|s| s.is_finite() && *s > 0.0)
            .then_some(speeds)
    }
}

/// The request's own ratio: 1, resting on the request as given.
fn as_given() -> RuntimeRatio {
    RuntimeRatio {
        ratio: 1.0,
        low: 1.0,
        high: 1.0,
        basis: Basis {
            source: BasisSource::Unchanged,
            detail: "the request as given".into(),
        },
    }
}

fn shape_of(gpus: Option<f64>, gpu_type: Option<String>) -> Shape {
    Shape {
        gpus: gpus.unwrap_or(0.0),
        gpu_type,
    }
}

/// `profile` changed to choice `c`, its resources per GPU kept.
fn changed_profile(profile: &JobProfile, c: &Choice) -> JobProfile {
    let mut p = profile.clone();
    if let (Some(from), Some(to)) = (profile.num_gpus, c.gpus) {
        if from > 0.0 && to != from {
            let k = to / from;
            p.num_nodes = profile.num_nodes.map(|n| (n * k).ceil().max(1.0));
            p.cpus = profile.cpus.map(|n| (n * k).max(1.0));
            p.memory_mib = profile.memory_mib.map(|m| m * k);
        }
    }
    p.num_gpus = c.gpus;
    p.gpu_type = c.gpu_type.clone();
    p.queue = c.queue.clone();
    p
}

/// `4 GPUs, v100, queue long` for a choice.
fn describe(c: &Choice) -> String {
    let mut parts = Vec::new();
    if let Some(g) = c.gpus {
        parts.push(format!("{g} GPU{}", if g == 1.0 { "" } else { "s" }));
    }
    if let Some(t) = &c.gpu_type {
        parts.push(t.clone());
    }
    if let Some(q) = &c.queue {
        parts.push(format!("queue {q}"));
    }
    if parts.is_empty() {
        "the request".into()
    } else {
        parts.join(", ")
    }
}

/// One option's row, or none when a number is not physically sane (not finite, negative).
fn option(
    is_request: bool,
    c: &Choice,
    at: f64,
    wait: WaitAnswer,
    base: &RuntimeAnswer,
    ratio: RuntimeRatio,
    limit: Option<f64>,
) -> Option<AdviceOption> {
    let runtime = scaled(base, &ratio, limit)?;
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    if !(ok(wait.seconds) && ok(wait.upper)) {
        return None;
    }
    let start = at + wait.seconds;
    let start_upper = at + wait.upper.max(wait.seconds);
    let gpu_hours = c.gpus.map(|g| g * runtime.seconds / 3600.0);
    if gpu_hours.is_some_and(|h| !ok(h)) {
        return None;
    }
    Some(AdviceOption {
        is_request,
        gpus: c.gpus,
        gpu_type: c.gpu_type.clone(),
        queue: c.queue.clone(),
        wait,
        start,
        start_upper,
        runtime,
        finish: start + runtime.seconds,
        finish_upper: start_upper + runtime.upper,
        gpu_hours,
        runtime_spread: (runtime.lower > 0.0).then(|| runtime.upper / runtime.lower),
        ratio,
        earliest_finish: false,
        cheapest_near_earliest: false,
    })
}

/// The request's run time scaled by `ratio`, the two 80% intervals combined in log space,
/// cut at the time limit.
fn scaled(base: &RuntimeAnswer, ratio: &RuntimeRatio, limit: Option<f64>) -> Option<RunTime> {
    let pos = |v: f64| v.is_finite() && v > 0.0;
    if !(pos(base.seconds) && pos(ratio.ratio)) {
        return None;
    }
    let seconds = base.seconds * ratio.ratio;
    // half-widths in log space of each interval, below and above its point
    let half = |point: f64, end: f64| {
        if pos(end) {
            (end / point).ln().abs()
        } else {
            0.0
        }
    };
    let down = half(base.seconds, base.lower).hypot(half(ratio.ratio, ratio.low));
    let up = half(base.seconds, base.upper).hypot(half(ratio.ratio, ratio.high));
    let (mut lower, mut upper) = (seconds * (-down).exp(), seconds * up.exp());
    if ratio.ratio == 1.0 && ratio.low == 1.0 && ratio.high == 1.0 {
        // unchanged: exactly the runtime model's answer
        lower = base.lower;
        upper = base.upper;
    }
    let mut rt = RunTime {
        seconds,
        lower: lower.min(seconds).max(0.0),
        upper: upper.max(seconds),
        coverage: base.coverage,
        capped_by_requested_time: base.capped_by_requested_time,
    };
    if let Some(l) = limit.filter(|l| pos(*l)) {
        if rt.upper > l || rt.seconds > l {
            rt.seconds = rt.seconds.min(l);
            rt.upper = rt.upper.min(l);
            rt.lower = rt.lower.min(l);
            rt.capped_by_requested_time = true;
        }
    }
    [rt.seconds, rt.lower, rt.upper]
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0)
        .then_some(rt)
}

/// Marks the earliest finish and the cheapest option (fewest GPU-hours) finishing within
/// [`TOLERANCE`] of it (measured from `at`).
fn mark(options: &mut [AdviceOption], at: f64) {
    let Some(earliest) = options
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| a.finish.total_cmp(&b.finish))
        .map(|(i, _)| i)
    else {
        return;
    };
    options[earliest].earliest_finish = true;
    let limit = at + (options[earliest].finish - at).max(0.0) * (1.0 + TOLERANCE);
    let cheapest = options
        .iter()
        .enumerate()
        .filter(|(_, o)| o.finish <= limit)
        .filter_map(|(i, o)| Some((i, o.gpu_hours?, o.finish)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.2.total_cmp(&b.2)))
        .map_or(earliest, |(i, _, _)| i);
    options[cheapest].cheapest_near_earliest = true;
}

/// Below this, a gain is not worth an annotation: 10 minutes, or a tenth of the request's
/// time to finish.
const MEANINGFUL_S: f64 = 600.0;

impl Advice {
    /// One line for an annotation when the earliest-finishing option differs meaningfully
    /// from the request (finishes at least 10 minutes and 10% of its time to finish
    /// sooner), e.g. "4 GPUs: starts ~3 h sooner, finishes ~1 h sooner"; None otherwise.
    pub fn headline(&self) -> Option<String> {
        let request = self.options.iter().find(|o| o.is_request)?;
        let best = self.options.iter().find(|o| o.earliest_finish)?;
        if best.is_request {
            return None;
        }
        let gain = request.finish - best.finish;
        if gain < MEANINGFUL_S.max(TOLERANCE * (request.finish - self.now)) {
            return None;
        }
        let mut what = Vec::new();
        if best.gpus != request.gpus {
            what.push(describe(&Choice {
                gpus: best.gpus,
                gpu_type: None,
                queue: None,
            }));
        }
        if !choices::same(&best.gpu_type, &request.gpu_type) {
            what.extend(best.gpu_type.clone());
        }
        if !choices::same(&best.queue, &request.queue) {
            what.extend(best.queue.as_ref().map(|q| format!("queue {q}")));
        }
        let start = request.start - best.start;
        let start = if start.abs() < 60.0 {
            "starts as soon".to_string()
        } else if start > 0.0 {
            format!("starts ~{} sooner", span(start))
        } else {
            format!("starts ~{} later", span(-start))
        };
        Some(format!(
            "{}: {start}, finishes ~{} sooner",
            what.join(", "),
            span(gain)
        ))
    }
}

/// `45 min`, `3 h`, `2 d` (rounded).
pub fn span(s: f64) -> String {
    if s < 5400.0 {
        format!("{} min", (s / 60.0).round().max(1.0))
    } else if s < 2.0 * 86_400.0 {
        format!("{} h", (s / 3600.0).round())
    } else {
        format!("{} d", (s / 86_400.0).round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(gpus: f64, start: f64, runtime: f64) -> AdviceOption {
        let wait = WaitAnswer {
            model_version: 1,
            seconds: start,
            lower: 0.0,
            upper: start * 2.0,
            coverage: 0.95,
            risk_group: None,
        };
        let base = RuntimeAnswer {
            model_version: 1,
            seconds: runtime,
            lower: runtime / 2.0,
            upper: runtime * 2.0,
            coverage: 0.8,
            interval: "online_conformal",
            capped_by_requested_time: false,
        };
        let c = Choice {
            gpus: Some(gpus),
            gpu_type: None,
            queue: None,
        };
        option(gpus == 8.0, &c, 0.0, wait, &base, as_given(), None).unwrap()
    }

    #[test]
    fn earliest_and_cheapest_near_it_are_marked() {
        // request: 8 GPUs, starts at 10 h, runs 2 h → finishes at 12 h
        let mut rows = vec![
            row(8.0, 36_000.0, 7200.0),
            // 4 GPUs: starts at 1 h, runs 4 h → 5 h, 16 GPU-h
            row(4.0, 3600.0, 14_400.0),
            // 2 GPUs: starts at 0.5 h, runs 4.4 h → 4.9 h (earliest), 8.8 GPU-h
            row(2.0, 1800.0, 15_840.0),
            // 1 GPU: starts now, runs 5.2 h → 5.2 h (within 10% of 4.9 h), 5.2 GPU-h
            row(1.0, 0.0, 18_720.0),
            // 16 GPUs: 6 h, far
            row(16.0, 20_000.0, 1600.0),
        ];
        mark(&mut rows, 0.0);
        let marked: Vec<(f64, bool, bool)> = rows
            .iter()
            .map(|r| (r.gpus.unwrap(), r.earliest_finish, r.cheapest_near_earliest))
            .collect();
        assert_eq!(
            marked,
            vec![
                (8.0, false, false),
                (4.0, false, false),
                (2.0, true, false),
                (1.0, false, true),
                (16.0, false, false)
            ]
        );
        let advice = Advice {
            now: 0.0,
            job_id: None,
            options: rows,
            tolerance: TOLERANCE,
            runtime_model_version: None,
            queue_wait_model_version: None,
            unavailable: vec![],
            notes: vec![],
        };
        assert_eq!(
            advice.headline().as_deref(),
            Some("2 GPUs: starts ~10 h sooner, finishes ~7 h sooner")
        );
    }

    #[test]
    fn a_request_that_finishes_first_has_no_headline_and_numbers_stay_sane() {
        let mut rows = vec![row(8.0, 0.0, 3600.0), row(4.0, 0.0, 7200.0)];
        mark(&mut rows, 0.0);
        assert!(rows[0].earliest_finish && rows[0].cheapest_near_earliest);
        let advice = Advice {
            now: 0.0,
            job_id: None,
            options: rows,
            tolerance: TOLERANCE,
            runtime_model_version: None,
            queue_wait_model_version: None,
            unavailable: vec![],
            notes: vec![],
        };
        assert_eq!(advice.headline(), None);
        // a scaled run time never passes the limit, and its interval holds its point
        let base = RuntimeAnswer {
            model_version: 1,
            seconds: 3000.0,
            lower: 1000.0,
            upper: 9000.0,
            coverage: 0.8,
            interval: "online_conformal",
            capped_by_requested_time: false,
        };
        let ratio = RuntimeRatio {
            ratio: 2.0,
            low: 1.5,
            high: 3.0,
            basis: Basis {
                source: BasisSource::PolluxAmdahl,
                detail: "test".into(),
            },
        };
        let rt = scaled(&base, &ratio, Some(7200.0)).unwrap();
        assert_eq!((rt.seconds, rt.upper), (6000.0, 7200.0));
        assert!(rt.capped_by_requested_time && rt.lower < 6000.0 && rt.lower > 0.0);
        let wide = scaled(&base, &ratio, None).unwrap();
        // wider than either interval alone (the runtime's ×3 up and down, the ratio's ×1.5
        // up and ×1.33 down), in log terms
        assert!(wide.upper / wide.seconds > 3.0 && wide.seconds / wide.lower > 3.0);
        let bad = RuntimeRatio {
            ratio: f64::NAN,
            ..ratio
        };
        assert!(scaled(&base, &bad, None).is_none());
    }
}
