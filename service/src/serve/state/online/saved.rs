//! The online state's serialised form, a snapshot's body ([`crate::serve::state::snapshot`]): what
//! the events taught it — the predictors' online states without their models (each kind's
//! as its own bytes, by kind name: [`crate::serve::kinds::KindOnline::save`]), the job
//! table, the clock, counts and retention — encoded with bincode (compact, fast, and
//! already built for the MLP crate). bincode is not self-describing, so the types whose
//! HTTP shape skips empty fields or reads times leniently (answers at submit, metric points,
//! DAGs, the cluster snapshot) get a plain form here or go as JSON text.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use augur_predictor::{ModelKind, RiskGroup};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

use super::retention::Retention;
use super::{
    AnswersAtSubmit, EventCounts, FailureAnswer, JobInfo, Label, Online, RuntimeAnswer, WaitAnswer,
};
use crate::serve::kinds::answers::label;
use crate::serve::kinds::saved::SavedError;
use crate::serve::kinds::KindOnline;
use crate::serve::state::events::{FinishStatus, JobProfile, MetricPoint};

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// A runtime answer at submit (its HTTP shape leaves `capped_by_requested_time` out when
/// false).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct RuntimeSaved {
    model_version: u32,
    seconds: f64,
    lower: f64,
    upper: f64,
    coverage: f64,
    #[serde(deserialize_with = "label")]
    interval: Label,
    capped: bool,
}

impl From<&RuntimeAnswer> for RuntimeSaved {
    fn from(a: &RuntimeAnswer) -> RuntimeSaved {
        RuntimeSaved {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.lower,
            upper: a.upper,
            coverage: a.coverage,
            interval: a.interval,
            capped: a.capped_by_requested_time,
        }
    }
}

impl From<RuntimeSaved> for RuntimeAnswer {
    fn from(a: RuntimeSaved) -> RuntimeAnswer {
        RuntimeAnswer {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.lower,
            upper: a.upper,
            coverage: a.coverage,
            interval: a.interval,
            capped_by_requested_time: a.capped,
        }
    }
}

/// A queue-wait answer at submit (its HTTP shape leaves `risk_group` out when none).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct WaitSaved {
    model_version: u32,
    seconds: f64,
    lower: f64,
    upper: f64,
    coverage: f64,
    risk_group: Option<RiskGroup>,
}

impl From<&WaitAnswer> for WaitSaved {
    fn from(a: &WaitAnswer) -> WaitSaved {
        WaitSaved {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.lower,
            upper: a.upper,
            coverage: a.coverage,
            risk_group: a.risk_group,
        }
    }
}

impl From<WaitSaved> for WaitAnswer {
    fn from(a: WaitSaved) -> WaitAnswer {
        WaitAnswer {
            model_version: a.model_version,
            seconds: a.seconds,
            lower: a.lower,
            upper: a.upper,
            coverage: a.coverage,
            risk_group: a.risk_group,
        }
    }
}

/// A metric point: step, loss, accuracy, time.
type PointSaved = (u64, Option<f64>, Option<f64>, Option<f64>);

/// One run of a job ([`JobInfo`]), borrowed when saved, owned when read back.
#[derive(Debug, Serialize, Deserialize)]
struct JobSaved<'a> {
    job_id: Cow<'a, str>,
    run: u32,
    profile: Option<Cow<'a, JobProfile>>,
    /// The DAG as JSON text.
    dag: Option<String>,
    submitted_at: Option<f64>,
    started_at: Option<f64>,
    finished_at: Option<f64>,
    status: Option<FinishStatus>,
    duration: Option<f64>,
    runtime_at_submit: Option<RuntimeSaved>,
    queue_wait_at_submit: Option<WaitSaved>,
    failure_at_submit: Option<FailureAnswer>,
    metric_points: Vec<PointSaved>,
    metric_points_total: u64,
    anomalies: Cow<'a, [String]>,
    first_seq: i64,
    gpu_type: Option<Cow<'a, str>>,
    runtime_on_type: Option<RuntimeSaved>,
}

impl<'a> JobSaved<'a> {
    fn of(j: &'a JobInfo) -> Result<JobSaved<'a>, serde_json::Error> {
        Ok(JobSaved {
            job_id: Cow::Borrowed(&j.job_id),
            run: j.run,
            profile: j.profile.as_ref().map(Cow::Borrowed),
            dag: j.dag.as_ref().map(serde_json::to_string).transpose()?,
            submitted_at: j.submitted_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            status: j.status,
            duration: j.duration,
            runtime_at_submit: j.runtime_at_submit.as_ref().map(RuntimeSaved::from),
            queue_wait_at_submit: j.queue_wait_at_submit.as_ref().map(WaitSaved::from),
            failure_at_submit: j.failure_at_submit,
            metric_points: j
                .metric_points
                .iter()
                .map(|p| (p.step, p.loss, p.accuracy, p.at))
                .collect(),
            metric_points_total: j.metric_points_total,
            anomalies: Cow::Borrowed(&j.anomalies),
            first_seq: j.first_seq,
            gpu_type: j.gpu_type.as_deref().map(Cow::Borrowed),
            runtime_on_type: j.runtime_on_type.as_ref().map(RuntimeSaved::from),
        })
    }

    fn into_job(self) -> Result<JobInfo, serde_json::Error> {
        Ok(JobInfo {
            job_id: self.job_id.into_owned(),
            run: self.run,
            profile: self.profile.map(Cow::into_owned),
            dag: self.dag.as_deref().map(serde_json::from_str).transpose()?,
            submitted_at: self.submitted_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            status: self.status,
            duration: self.duration,
            runtime_at_submit: self.runtime_at_submit.map(RuntimeAnswer::from),
            queue_wait_at_submit: self.queue_wait_at_submit.map(WaitAnswer::from),
            failure_at_submit: self.failure_at_submit,
            metric_points: self
                .metric_points
                .into_iter()
                .map(|(step, loss, accuracy, at)| MetricPoint {
                    step,
                    loss,
                    accuracy,
                    at,
                })
                .collect(),
            metric_points_total: self.metric_points_total,
            anomalies: self.anomalies.into_owned(),
            first_seq: self.first_seq,
            gpu_type: self.gpu_type.map(Cow::into_owned),
            runtime_on_type: self.runtime_on_type.map(RuntimeAnswer::from),
        })
    }
}

/// Runs saved as a sequence straight from the tables (no copy of the table).
struct RunsOut<'a, I: Iterator<Item = &'a JobInfo> + Clone> {
    runs: I,
    len: usize,
}

impl<'a, I: Iterator<Item = &'a JobInfo> + Clone> Serialize for RunsOut<'a, I> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        for j in self.runs.clone() {
            seq.serialize_element(&JobSaved::of(j).map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

/// The body as written (borrowing the state). Field order is [`BodyIn`]'s.
#[derive(Serialize)]
#[serde(bound = "")]
struct BodyOut<'a, J, E>
where
    J: Iterator<Item = &'a JobInfo> + Clone,
    E: Iterator<Item = &'a JobInfo> + Clone,
{
    /// Each served kind's online state: (kind name, its bytes).
    predictors: Vec<(&'static str, Vec<u8>)>,
    jobs: RunsOut<'a, J>,
    /// Every earlier run, each id's runs oldest first.
    earlier_runs: RunsOut<'a, E>,
    clock: Option<f64>,
    last_seq: i64,
    /// The latest cluster snapshot as JSON text.
    last_snapshot: Option<String>,
    largest_gpus: Option<f64>,
    counts: &'a EventCounts,
    /// Stored answers at submit not replayed yet: (submit seq, JSON).
    recorded: Vec<(i64, String)>,
    retention: &'a Retention,
}

/// The body as read back.
#[derive(Deserialize)]
struct BodyIn {
    predictors: Vec<(String, Vec<u8>)>,
    jobs: Vec<JobSaved<'static>>,
    earlier_runs: Vec<JobSaved<'static>>,
    clock: Option<f64>,
    last_seq: i64,
    last_snapshot: Option<String>,
    largest_gpus: Option<f64>,
    counts: EventCounts,
    recorded: Vec<(i64, String)>,
    retention: Retention,
}

impl Online {
    /// This state's serialised form (see the [module docs](self)). What it answered at
    /// submits and has not handed out yet ([`Online::take_issued`]) is not in it.
    pub fn encode_state(&self) -> Result<Vec<u8>, SavedError> {
        let recorded = self
            .recorded
            .iter()
            .map(|(seq, a)| Ok((*seq, serde_json::to_string(a)?)))
            .collect::<Result<Vec<_>, serde_json::Error>>()?;
        let body = BodyOut {
            predictors: self
                .states
                .iter()
                .map(|(kind, state)| Ok((kind.name(), state.save()?)))
                .collect::<Result<_, SavedError>>()?,
            jobs: RunsOut {
                runs: self.jobs.values(),
                len: self.jobs.len(),
            },
            earlier_runs: RunsOut {
                runs: self.earlier_runs.values().flatten(),
                len: self.earlier_runs.values().map(Vec::len).sum(),
            },
            clock: self.clock,
            last_seq: self.last_seq,
            last_snapshot: self
                .last_snapshot
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?,
            largest_gpus: self.largest_gpus,
            counts: &self.counts,
            recorded,
            retention: &self.retention,
        };
        Ok(bincode::serde::encode_to_vec(&body, config())?)
    }

    /// Replaces what this state learned from the events with `bytes` (from
    /// [`Online::encode_state`]), the predictors' states restored onto the models this state
    /// serves. Refused, leaving this state unchanged, when the bytes do not decode or were
    /// made for other models or another retention window.
    pub fn restore_state(&mut self, bytes: &[u8]) -> Result<(), SavedError> {
        let (body, used): (BodyIn, usize) = bincode::serde::decode_from_slice(bytes, config())?;
        if used != bytes.len() {
            return Err(SavedError::Trailing {
                extra: bytes.len() - used,
            });
        }
        if body.retention.window().map(f64::to_bits) != self.retention.window().map(f64::to_bits) {
            return Err(SavedError::Retention {
                saved: body.retention.window(),
                now: self.retention.window(),
            });
        }
        let states = self.restore_states(body.predictors)?;
        let mut jobs = HashMap::with_capacity(body.jobs.len());
        for j in body.jobs {
            let j = j.into_job()?;
            jobs.insert(j.job_id.clone(), j);
        }
        let mut earlier_runs: HashMap<String, Vec<JobInfo>> = HashMap::new();
        for j in body.earlier_runs {
            let j = j.into_job()?;
            earlier_runs.entry(j.job_id.clone()).or_default().push(j);
        }
        let mut recorded = HashMap::with_capacity(body.recorded.len());
        for (seq, json) in body.recorded {
            recorded.insert(seq, serde_json::from_str::<AnswersAtSubmit>(&json)?);
        }
        let last_snapshot = body
            .last_snapshot
            .as_deref()
            .map(serde_json::from_str)
            .transpose()?;
        self.states = states;
        self.jobs = jobs;
        self.earlier_runs = earlier_runs;
        self.clock = body.clock;
        self.last_seq = body.last_seq;
        self.last_snapshot = last_snapshot;
        self.largest_gpus = body.largest_gpus;
        self.counts = body.counts;
        self.recorded = recorded;
        self.issued.clear();
        self.retention = body.retention;
        Ok(())
    }
}

impl Online {
    /// The saved states (kind name, bytes) restored onto the models served now: each
    /// served kind with an online state must have one, and no other kind.
    fn restore_states(
        &self,
        saved: Vec<(String, Vec<u8>)>,
    ) -> Result<BTreeMap<ModelKind, Box<dyn KindOnline>>, SavedError> {
        let mut saved: BTreeMap<String, Vec<u8>> = saved.into_iter().collect();
        let mut states = BTreeMap::new();
        for m in self.models.iter().filter(|m| m.has_online()) {
            let Some(bytes) = saved.remove(m.kind().name()) else {
                return Err(SavedError::Presence {
                    kind: m.kind(),
                    saved: "lacks",
                    served: "served",
                });
            };
            states.insert(m.kind(), m.restore(&bytes)?);
        }
        if let Some(name) = saved.into_keys().next() {
            return Err(match ModelKind::from_name(&name) {
                Some(kind) => SavedError::Presence {
                    kind,
                    saved: "has",
                    served: "not served",
                },
                None => SavedError::UnknownKind { name },
            });
        }
        Ok(states)
    }
}

#[cfg(test)]
impl Online {
    /// Each kind with an online state and the size of its saved form.
    pub fn saved_sizes(&self) -> Result<BTreeMap<ModelKind, usize>, SavedError> {
        self.states
            .iter()
            .map(|(kind, state)| Ok((*kind, state.save()?.len())))
            .collect()
    }
}
