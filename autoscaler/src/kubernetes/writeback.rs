//! What Augur writes onto the objects users already look at (`kubectl get`, `kubectl
//! describe`): the annotations of each job (`PyTorchJob`, `TrainJob`, Kueue-managed `Job`) and
//! of the Kueue `Workload` that queues it
//! ([`JobPredictions`]), and the rate limits of writing them ([`WriteBackLimiter`]). The
//! requests themselves (and the `Event` of each scaling decision) are in `annotate`.
//!
//! - Only annotations are written, with JSON merge patches of `metadata.annotations` (never
//!   the spec), under [`WRITEBACK_PREFIX`] — a prefix distinct from the annotations the
//!   backend reads (`augur.dev/...`), so what Augur writes never feeds back into what it reads.
//! - Only the lease holder writes, never in dry-run.
//! - Rate-limited ([`WriteBackConfig`]): an object is patched only when what it would show
//!   changed, at most once per `min_interval_s`, and at most `max_patches_per_minute` patches
//!   go out per minute over all objects (the rest wait for the next round).
//!
//! Annotations (times RFC 3339, UTC, whole seconds):
//!
//! | key | value |
//! |---|---|
//! | `predicted.augur.dev/runtime-s` | predicted run time, seconds |
//! | `predicted.augur.dev/runtime-interval-s` | `lower-upper` seconds, its coverage in `runtime-coverage` |
//! | `predicted.augur.dev/start`, `start-bound` | queued jobs: median predicted start, and the time it starts before with `start-coverage` |
//! | `predicted.augur.dev/eta` | predicted end |
//! | `predicted.augur.dev/failure-probability` | calibrated probability of ending failed |
//! | `predicted.augur.dev/model-versions` | e.g. `runtime=3,queue_wait=2` |
//! | `predicted.augur.dev/advice` | queued jobs whose best option differs meaningfully from the request: one line, e.g. `4 GPUs: starts ~3 h sooner, finishes ~1 h sooner` |
//! | `predicted.augur.dev/advice-gpus`, `advice-gpu-type`, `advice-queue` | that option's GPU count, GPU type and queue, each only where it differs from the request |
//!
//! A key Augur wrote that a later round no longer has (a started job's `start`, advice that
//! stopped differing) is removed with a merge patch `null`: the object's cached annotations
//! under the prefix are compared with the new set. The advice ([`JobAdvice`]) is sampled and
//! held ([`AdviceMemo`]): a queued job's is recomputed at most once per
//! [`WriteBackConfig::advice_every_s`], for at most [`WriteBackConfig::advice_per_round`] jobs a
//! round, so an advice that flaps round to round cannot cause a patch storm; it is dropped at
//! once when the job is admitted or starts. An unknown answer ([`AdviceAnswer::Unknown`])
//! keeps the advice held and is asked again after [`ADVICE_RETRY_S`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use k8s_openapi::jiff::Timestamp;

use super::objects::JobKey;

/// Prefix of every annotation Augur writes.
pub const WRITEBACK_PREFIX: &str = "predicted.augur.dev/";

/// An interval with its nominal coverage (0.8 = 80%).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub lower: f64,
    pub upper: f64,
    pub coverage: f64,
}

/// Where a job is, as the write-back sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    Queued,
    Running,
}

/// What Augur predicts for one job, to be written onto its objects.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobPredictions {
    /// Run time, seconds, with its interval.
    pub runtime: Option<(f64, Span)>,
    /// Queued jobs: the median predicted start (Unix seconds) and the bound it starts before
    /// (`Span::upper`) with its coverage.
    pub start: Option<(f64, Span)>,
    /// Predicted end, Unix seconds.
    pub eta: Option<f64>,
    pub failure_probability: Option<f64>,
    /// `(predictor, model version)` of every answer above.
    pub model_versions: Vec<(&'static str, u32)>,
    /// Queued jobs: the option advised instead of the request, when it differs meaningfully.
    pub advice: Option<JobAdvice>,
}

/// The advisor's option for a queued job whose best option differs meaningfully from what it
/// asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobAdvice {
    /// One line for people, e.g. "4 GPUs: starts ~3 h sooner, finishes ~1 h sooner" (rounded by
    /// the advisor, so small changes in the predictions do not change it).
    pub headline: String,
    /// The option's GPU count, where it differs from the request.
    pub gpus: Option<u32>,
    /// The option's GPU type, where it differs from the request.
    pub gpu_type: Option<String>,
    /// The option's queue (Kueue `LocalQueue`), where it differs from the request.
    pub queue: Option<String>,
}

fn rfc3339(t: f64) -> String {
    Timestamp::from_second(t.round() as i64)
        .map(|ts| ts.to_string())
        .unwrap_or_else(|_| format!("{t:.0}"))
}

impl JobPredictions {
    /// The annotations of the job object (rounded so that noise does not cause patches).
    pub fn job_annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            a.insert(format!("{WRITEBACK_PREFIX}{k}"), v);
        };
        if let Some((s, span)) = self.runtime {
            put("runtime-s", format!("{s:.0}"));
            put(
                "runtime-interval-s",
                format!("{:.0}-{:.0}", span.lower, span.upper),
            );
            put("runtime-coverage", format!("{:.2}", span.coverage));
        }
        self.put_start(&mut put);
        if let Some(p) = self.failure_probability {
            put("failure-probability", format!("{p:.3}"));
        }
        self.put_versions(&mut put);
        if let Some(adv) = &self.advice {
            put("advice", adv.headline.clone());
            if let Some(g) = adv.gpus {
                put("advice-gpus", g.to_string());
            }
            if let Some(t) = &adv.gpu_type {
                put("advice-gpu-type", t.clone());
            }
            if let Some(q) = &adv.queue {
                put("advice-queue", q.clone());
            }
        }
        a
    }

    /// The annotations of the Kueue `Workload` queueing the job: when it starts and ends.
    pub fn workload_annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            a.insert(format!("{WRITEBACK_PREFIX}{k}"), v);
        };
        self.put_start(&mut put);
        self.put_versions(&mut put);
        a
    }

    fn put_start(&self, put: &mut impl FnMut(&str, String)) {
        if let Some((median, span)) = self.start {
            put("start", rfc3339(median));
            put("start-bound", rfc3339(span.upper));
            put("start-coverage", format!("{:.2}", span.coverage));
        }
        if let Some(t) = self.eta {
            put("eta", rfc3339(t));
        }
    }

    fn put_versions(&self, put: &mut impl FnMut(&str, String)) {
        if !self.model_versions.is_empty() {
            let v: Vec<String> = self
                .model_versions
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            put("model-versions", v.join(","));
        }
    }
}

/// How often the write-back may patch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteBackConfig {
    /// An object is patched at most once per this many seconds.
    pub min_interval_s: f64,
    /// Patches per minute over all objects.
    pub max_patches_per_minute: usize,
    /// A queued job's advice is recomputed at most once per this many seconds (and held in
    /// between), so it changes at most that often.
    pub advice_every_s: f64,
    /// The advisor runs for at most this many jobs a round (those advised longest ago first).
    pub advice_per_round: usize,
}

impl Default for WriteBackConfig {
    fn default() -> Self {
        WriteBackConfig {
            min_interval_s: 60.0,
            max_patches_per_minute: 60,
            advice_every_s: 600.0,
            advice_per_round: 4,
        }
    }
}

/// An object the write-back patches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteTarget {
    /// A job of its key's kind.
    Job(JobKey),
    /// A Kueue `Workload`: its namespace and name.
    Workload(String, String),
}

/// Why a target was or was not patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Write,
    /// It already shows these annotations.
    Unchanged,
    /// Patched less than `min_interval_s` ago.
    TooSoon,
    /// The per-minute budget is spent.
    OverBudget,
}

/// The write-back's memory: what each object was last given, and when patches went out.
#[derive(Debug, Default)]
pub struct WriteBackLimiter {
    cfg: WriteBackConfig,
    last: HashMap<WriteTarget, (f64, BTreeMap<String, String>)>,
    sent: VecDeque<f64>,
}

impl WriteBackLimiter {
    pub fn new(cfg: WriteBackConfig) -> WriteBackLimiter {
        WriteBackLimiter {
            cfg,
            ..WriteBackLimiter::default()
        }
    }

    /// Whether `target` may be given `annotations` at `now`.
    pub fn admit(
        &mut self,
        now: f64,
        target: &WriteTarget,
        annotations: &BTreeMap<String, String>,
    ) -> Admission {
        if let Some((at, shown)) = self.last.get(target) {
            if shown == annotations {
                return Admission::Unchanged;
            }
            if now - at < self.cfg.min_interval_s {
                return Admission::TooSoon;
            }
        }
        while self.sent.front().is_some_and(|&t| now - t >= 60.0) {
            self.sent.pop_front();
        }
        if self.sent.len() >= self.cfg.max_patches_per_minute {
            return Admission::OverBudget;
        }
        Admission::Write
    }

    /// `target` was patched with `annotations` at `now`.
    pub fn written(
        &mut self,
        now: f64,
        target: WriteTarget,
        annotations: BTreeMap<String, String>,
    ) {
        self.sent.push_back(now);
        self.last.insert(target, (now, annotations));
    }

    /// Whether `target` could be patched at `now` were its annotations to change (its
    /// interval passed and the minute's budget not spent).
    pub fn may_patch(&self, now: f64, target: &WriteTarget) -> bool {
        let in_minute = self.sent.iter().filter(|&&t| now - t < 60.0).count();
        in_minute < self.cfg.max_patches_per_minute
            && self
                .last
                .get(target)
                .is_none_or(|(at, _)| now - at >= self.cfg.min_interval_s)
    }

    /// Forgets objects that no longer exist.
    pub fn retain(&mut self, keep: impl Fn(&WriteTarget) -> bool) {
        self.last.retain(|t, _| keep(t));
    }
}

/// What the advisor answered for a queued job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdviceAnswer {
    /// An option differs meaningfully from the request.
    Differs(JobAdvice),
    /// No option differs meaningfully from the request.
    Same,
    /// No answer now (the job not known yet, a model not served): the advice held so far
    /// stays, and the job is asked again after [`ADVICE_RETRY_S`].
    Unknown,
}

/// How soon a job the advisor could not answer for is asked again, seconds (at most
/// `advice_every_s`).
pub const ADVICE_RETRY_S: f64 = 60.0;

/// The advice held for each queued job and when it is due again (sample and hold): a job's
/// advice is recomputed at most once per `advice_every_s` (an unknown answer: after
/// [`ADVICE_RETRY_S`]), for at most `advice_per_round` jobs a round.
#[derive(Debug, Default)]
pub struct AdviceMemo {
    every_s: f64,
    per_round: usize,
    /// By job: when it is due again, and the advice held.
    last: HashMap<JobKey, (f64, Option<JobAdvice>)>,
}

impl AdviceMemo {
    pub fn new(cfg: &WriteBackConfig) -> AdviceMemo {
        AdviceMemo {
            every_s: cfg.advice_every_s,
            per_round: cfg.advice_per_round,
            last: HashMap::new(),
        }
    }

    /// The jobs of `queued` whose advice is due at `now`, the longest due first (never
    /// advised before all), at most `advice_per_round`.
    pub fn due<'a>(&self, now: f64, queued: impl IntoIterator<Item = &'a JobKey>) -> Vec<JobKey> {
        let mut due: Vec<(f64, &JobKey)> = queued
            .into_iter()
            .filter_map(|k| match self.last.get(k) {
                None => Some((f64::NEG_INFINITY, k)),
                Some((next, _)) if now >= *next => Some((*next, k)),
                Some(_) => None,
            })
            .collect();
        due.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        due.into_iter()
            .take(self.per_round)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// The advisor's `answer` for `key` at `now`.
    pub fn set(&mut self, now: f64, key: JobKey, answer: AdviceAnswer) {
        let held = |m: &Self| m.last.get(&key).and_then(|(_, a)| a.clone());
        let (next, advice) = match answer {
            AdviceAnswer::Differs(a) => (now + self.every_s, Some(a)),
            AdviceAnswer::Same => (now + self.every_s, None),
            AdviceAnswer::Unknown => (now + ADVICE_RETRY_S.min(self.every_s), held(self)),
        };
        self.last.insert(key, (next, advice));
    }

    /// The advice held for `key`.
    pub fn get(&self, key: &JobKey) -> Option<&JobAdvice> {
        self.last.get(key).and_then(|(_, a)| a.as_ref())
    }

    /// Forgets jobs no longer queued (a job queued again is advised afresh).
    pub fn retain(&mut self, keep: impl Fn(&JobKey) -> bool) {
        self.last.retain(|k, _| keep(k));
    }
}

/// What one write-back round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBackReport {
    pub patched: usize,
    pub unchanged: usize,
    pub deferred: usize,
    pub failed: usize,
    /// Why nothing was written (not the leader, dry-run), when so.
    pub skipped: Option<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> JobKey {
        JobKey::pytorchjob("ml", n)
    }

    fn ann(v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(format!("{WRITEBACK_PREFIX}runtime-s"), v.to_string())])
    }

    #[test]
    fn annotations_are_rounded_and_named_under_the_prefix() {
        let p = JobPredictions {
            runtime: Some((
                3600.4,
                Span {
                    lower: 2400.2,
                    upper: 5400.9,
                    coverage: 0.8,
                },
            )),
            start: Some((
                1_700_000_000.4,
                Span {
                    lower: 1_700_000_000.0,
                    upper: 1_700_003_600.0,
                    coverage: 0.95,
                },
            )),
            eta: Some(1_700_003_600.0),
            failure_probability: Some(0.03125),
            model_versions: vec![("runtime", 3), ("queue_wait", 2)],
            advice: None,
        };
        let a = p.job_annotations();
        let get = |k: &str| a[&format!("{WRITEBACK_PREFIX}{k}")].as_str();
        assert_eq!(get("runtime-s"), "3600");
        assert_eq!(get("runtime-interval-s"), "2400-5401");
        assert_eq!(get("runtime-coverage"), "0.80");
        assert_eq!(get("start"), "2023-11-14T22:13:20Z");
        assert_eq!(get("start-bound"), "2023-11-14T23:13:20Z");
        assert_eq!(get("start-coverage"), "0.95");
        assert_eq!(get("eta"), "2023-11-14T23:13:20Z");
        assert_eq!(get("failure-probability"), "0.031");
        assert_eq!(get("model-versions"), "runtime=3,queue_wait=2");
        assert!(a.keys().all(|k| k.starts_with(WRITEBACK_PREFIX)));
        let w = p.workload_annotations();
        assert!(w.contains_key(&format!("{WRITEBACK_PREFIX}start-bound")));
        assert!(!w.contains_key(&format!("{WRITEBACK_PREFIX}runtime-s")));
        assert!(JobPredictions::default().job_annotations().is_empty());
    }

    #[test]
    fn the_limiter_skips_unchanged_waits_out_the_interval_and_holds_the_budget() {
        let mut l = WriteBackLimiter::new(WriteBackConfig {
            min_interval_s: 60.0,
            max_patches_per_minute: 2,
            ..WriteBackConfig::default()
        });
        let a = WriteTarget::Job(key("a"));
        assert_eq!(l.admit(0.0, &a, &ann("1")), Admission::Write);
        l.written(0.0, a.clone(), ann("1"));
        assert_eq!(l.admit(1.0, &a, &ann("1")), Admission::Unchanged);
        assert_eq!(l.admit(30.0, &a, &ann("2")), Admission::TooSoon);
        let b = WriteTarget::Job(key("b"));
        l.written(10.0, b, ann("1"));
        let c = WriteTarget::Workload("ml".into(), "c".into());
        assert_eq!(l.admit(20.0, &c, &ann("1")), Admission::OverBudget);
        // the first patch leaves the minute's window at t = 60
        assert_eq!(l.admit(60.0, &c, &ann("1")), Admission::Write);
        assert_eq!(l.admit(61.0, &a, &ann("2")), Admission::Write);
        l.retain(|t| *t != a);
        assert_eq!(l.admit(62.0, &a, &ann("1")), Admission::Write);
    }

    fn advice(h: &str) -> Option<JobAdvice> {
        Some(JobAdvice {
            headline: h.into(),
            gpus: Some(4),
            ..JobAdvice::default()
        })
    }

    fn differs(h: &str) -> AdviceAnswer {
        AdviceAnswer::Differs(advice(h).unwrap())
    }

    #[test]
    fn advice_keys_are_written_only_where_the_option_differs() {
        let p = JobPredictions {
            advice: Some(JobAdvice {
                headline: "a100: finishes ~2 h sooner".into(),
                gpus: None,
                gpu_type: Some("a100".into()),
                queue: Some("long".into()),
            }),
            ..JobPredictions::default()
        };
        let a = p.job_annotations();
        let keys: Vec<&str> = a.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "predicted.augur.dev/advice",
                "predicted.augur.dev/advice-gpu-type",
                "predicted.augur.dev/advice-queue",
            ]
        );
        assert_eq!(
            a["predicted.augur.dev/advice"],
            "a100: finishes ~2 h sooner"
        );
        // the Workload shows when the job starts, not the advice
        assert!(p.workload_annotations().is_empty());
    }

    #[test]
    fn advice_is_held_between_recomputations_oldest_first_and_bounded_per_round() {
        let mut m = AdviceMemo::new(&WriteBackConfig {
            advice_every_s: 300.0,
            advice_per_round: 2,
            ..WriteBackConfig::default()
        });
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let queued = [c.clone(), a.clone(), b.clone()];
        // never advised: by key, two a round
        assert_eq!(m.due(0.0, &queued), [a.clone(), b.clone()]);
        m.set(0.0, a.clone(), differs("x"));
        m.set(0.0, b.clone(), AdviceAnswer::Same);
        assert_eq!(m.due(10.0, &queued), std::slice::from_ref(&c));
        m.set(10.0, c.clone(), differs("y"));
        // held until 300 s have passed, then the longest ago first
        assert!(m.due(299.0, &queued).is_empty());
        assert_eq!(m.due(305.0, &queued), [a.clone(), b.clone()]);
        assert_eq!(m.due(310.0, &queued), [a.clone(), b.clone()]);
        assert_eq!(m.get(&a), advice("x").as_ref());
        assert_eq!(m.get(&b), None);
        // no answer: the held advice stays and the job is asked again a minute later
        m.set(310.0, a.clone(), AdviceAnswer::Unknown);
        assert_eq!(m.get(&a), advice("x").as_ref());
        let only_a = std::slice::from_ref(&a);
        assert!(m.due(369.0, only_a).is_empty());
        assert_eq!(m.due(370.0, only_a), only_a);
        m.retain(|k| *k != a);
        assert_eq!(m.get(&a), None);
        assert_eq!(
            m.due(11.0, &queued),
            std::slice::from_ref(&a),
            "forgotten: advised afresh"
        );
    }

    #[test]
    fn may_patch_follows_the_interval_and_the_budget() {
        let mut l = WriteBackLimiter::new(WriteBackConfig {
            min_interval_s: 60.0,
            max_patches_per_minute: 2,
            ..WriteBackConfig::default()
        });
        let (a, b) = (WriteTarget::Job(key("a")), WriteTarget::Job(key("b")));
        assert!(l.may_patch(0.0, &a));
        l.written(0.0, a.clone(), ann("1"));
        assert!(!l.may_patch(59.0, &a));
        assert!(l.may_patch(59.0, &b));
        l.written(30.0, b.clone(), ann("1"));
        let c = WriteTarget::Job(key("c"));
        assert!(!l.may_patch(59.0, &c), "two patches in the minute");
        assert!(l.may_patch(60.0, &c));
        assert!(l.may_patch(60.0, &a));
    }
}
