//! The service's metric families and the [`Metrics`] handle that records into them: every
//! family registered once, under the `augur_` prefix, with its labels, help text and
//! buckets; the rolling accuracy and coverage windows behind the gauges. Recording is
//! through [`Metrics`]' methods, reading through [`Metrics::encode`] (served by
//! [`super::scrape`]). The table lists every family exposed (a test checks it against the
//! registrations):
//!
//! | family | type | labels |
//! |---|---|---|
//! | `augur_http_request_duration_seconds` | histogram | `route`, `method`, `status` |
//! | `augur_prediction_duration_seconds` | histogram | `predictor` |
//! | `augur_predictions_total` | counter | `predictor`, `model_version` |
//! | `augur_prediction_outcomes_total` | counter | `predictor` (finished jobs scored) |
//! | `augur_prediction_mae_seconds` | gauge | `predictor` (rolling, last [`ROLLING`] finished jobs) |
//! | `augur_prediction_interval_coverage` | gauge | `predictor` (rolling share inside the interval) |
//! | `augur_prediction_interval_coverage_by_group` | gauge | `predictor`, `dimension` (`partition`, `resource`, `size`), `group` (rolling, per [`CoverageGroups`](augur_predictor::metrics::CoverageGroups): at most 8 partitions named) |
//! | `augur_controller_actions_total` | counter | `action`, `reason`, `outcome` |
//! | `augur_retrains_total` | counter | `trigger` (`manual`, `schedule`), `outcome` (`succeeded`, `failed`, `refused_running`, `refused_too_few_jobs`, `refused_first_start`) |
//! | `augur_retrain_duration_seconds` | histogram | (a retrain's training, saving and swapping, succeeded or failed) |
//! | `augur_first_start_training` | gauge | `kind` (1 while the first start still trains it: its predictions answer 503 until served; 0 otherwise) |
//! | `augur_model_load_failures_total` | counter | `kind` (saved versions that could not be loaded; the previous good one is served) |
//! | `augur_cluster_utilisation` | gauge | (allocated share of healthy GPUs; NaN while the backend is down) |
//! | `augur_backend_up` | gauge | `backend` (1 up, 0 down; see [`crate::serve::live::health`]) |
//! | `augur_cluster_queue_length` | gauge | (queued jobs) |
//! | `augur_cluster_queued_gpus`, `augur_cluster_running_jobs` | gauge | |
//! | `augur_live_tick_duration_seconds` | histogram | (the live loop's own cost per tick) |
//! | `augur_snapshot_loads_total` | counter | `outcome` (`loaded`, `damaged`, `stale`, `absent`; see [`crate::serve::state::snapshot`]) |
//! | `augur_snapshot_writes_total` | counter | `outcome` (`written`, `skipped`, `failed`) |
//! | `augur_snapshot_bytes`, `augur_snapshot_last_seq` | gauge | (the latest snapshot written) |
//! | `augur_snapshot_write_seconds` | histogram | `phase` (`encode`: under the shared lock; `write`: off it) |
//! | `augur_build_info` | gauge (1) | `version` |
//! | `process_*` | the standard process metrics (`process.rs`) |

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use augur_datasets::JobRecord;
use augur_predictor::metrics::CoverageGroups;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::serve::lock;
/// Finished jobs the rolling accuracy gauges are computed over.
pub const ROLLING: usize = 500;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabels {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PredictorLabels {
    predictor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    predictor: String,
    dimension: String,
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    predictor: String,
    model_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: String,
    reason: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetrainLabels {
    trigger: String,
    outcome: String,
}

type F64Gauge = Gauge<f64, AtomicU64>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 50 µs … ~1.6 s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// Registers `metric` under `name` with its `help` text; returns it (metrics are shared
/// handles: the registry keeps a clone).
fn registered<M>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register(name, help, metric.clone());
    metric
}

/// `augur_build_info{version} 1`.
fn register_build_info(r: &mut Registry) {
    registered(
        r,
        "build_info",
        "The running build: 1, labelled with the version",
        Family::<BuildLabels, Gauge>::default(),
    )
    .get_or_create(&BuildLabels {
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
    .set(1);
}

/// The gauges of the cluster the controller acts on.
struct ClusterGauges {
    utilisation: F64Gauge,
    queue_length: Gauge,
    queued_gpus: Gauge,
    running_jobs: Gauge,
}

impl ClusterGauges {
    fn register(r: &mut Registry) -> ClusterGauges {
        ClusterGauges {
            utilisation: registered(
                r,
                "cluster_utilisation",
                "Allocated share of the healthy GPUs of the cluster the controller acts on",
                F64Gauge::default(),
            ),
            queue_length: registered(
                r,
                "cluster_queue_length",
                "Jobs waiting in the queue",
                Gauge::default(),
            ),
            queued_gpus: registered(
                r,
                "cluster_queued_gpus",
                "GPUs the queued jobs ask for",
                Gauge::default(),
            ),
            running_jobs: registered(
                r,
                "cluster_running_jobs",
                "Jobs holding GPUs",
                Gauge::default(),
            ),
        }
    }
}

/// The families of the online-state snapshots: loads at start-up, writes, and the latest
/// one written.
struct SnapshotFamilies {
    loads: Family<OutcomeLabels, Counter>,
    writes: Family<OutcomeLabels, Counter>,
    bytes: Gauge,
    last_seq: Gauge,
    seconds: HistogramFamily<PhaseLabels>,
}

impl SnapshotFamilies {
    fn register(r: &mut Registry) -> SnapshotFamilies {
        SnapshotFamilies {
            loads: registered(
                r,
                "snapshot_loads",
                "Start-ups by what became of the online-state snapshot: loaded (only the tail of the log replayed), damaged, stale (other models, retention or log), absent",
                Family::<OutcomeLabels, Counter>::default(),
            ),
            writes: registered(
                r,
                "snapshot_writes",
                "Snapshots of the online state by outcome (written, skipped: nothing new or not committed yet, failed)",
                Family::<OutcomeLabels, Counter>::default(),
            ),
            bytes: registered(
                r,
                "snapshot_bytes",
                "Size of the latest snapshot of the online state written",
                Gauge::default(),
            ),
            last_seq: registered(
                r,
                "snapshot_last_seq",
                "Sequence number of the last event the latest snapshot written holds",
                Gauge::default(),
            ),
            seconds: registered(
                r,
                "snapshot_write_seconds",
                "Time to write a snapshot, by phase: encode (under the shared lock: ingest waits) and write (file, fsync, rename)",
                HistogramFamily::<PhaseLabels>::new_with_constructor(latency_histogram),
            ),
        }
    }
}

/// Errors and interval hits of one predictor over its last [`ROLLING`] finished jobs.
#[derive(Debug, Default)]
struct Rolling {
    abs_err: VecDeque<f64>,
    covered: VecDeque<bool>,
}

impl Rolling {
    fn push(&mut self, abs_err: f64, covered: Option<bool>) -> (f64, Option<f64>) {
        if self.abs_err.len() == ROLLING {
            self.abs_err.pop_front();
        }
        self.abs_err.push_back(abs_err);
        if let Some(c) = covered {
            if self.covered.len() == ROLLING {
                self.covered.pop_front();
            }
            self.covered.push_back(c);
        }
        let mae = self.abs_err.iter().sum::<f64>() / self.abs_err.len() as f64;
        let cov = (!self.covered.is_empty()).then(|| {
            self.covered.iter().filter(|&&c| c).count() as f64 / self.covered.len() as f64
        });
        (mae, cov)
    }
}

/// The service's metrics (shared; every method takes `&self`).
pub struct Metrics {
    registry: Registry,
    http: HistogramFamily<HttpLabels>,
    prediction_latency: HistogramFamily<PredictorLabels>,
    predictions: Family<ModelLabels, Counter>,
    outcomes: Family<PredictorLabels, Counter>,
    mae: Family<PredictorLabels, F64Gauge>,
    coverage: Family<PredictorLabels, F64Gauge>,
    actions: Family<ActionLabels, Counter>,
    retrains: Family<RetrainLabels, Counter>,
    retrain_duration: Histogram,
    model_load_failures: Family<KindLabels, Counter>,
    first_start_training: Family<KindLabels, Gauge>,
    cluster: ClusterGauges,
    live_tick: Histogram,
    backend_up: Family<BackendLabels, Gauge>,
    snapshot: SnapshotFamilies,
    rolling: Mutex<HashMap<String, Rolling>>,
    coverage_by_group: Family<GroupLabels, F64Gauge>,
    /// Interval hits per (predictor, dimension, group), and the partitions named in labels.
    rolling_groups: Mutex<(HashMap<GroupLabels, Rolling>, CoverageGroups)>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every family registered, all empty.
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        root.register_collector(Box::new(super::process::ProcessCollector));
        let r = root.sub_registry_with_prefix("augur");
        register_build_info(r);
        Metrics {
            http: registered(
                r,
                "http_request_duration_seconds",
                "HTTP request latency by route, method and status",
                HistogramFamily::<HttpLabels>::new_with_constructor(latency_histogram),
            ),
            prediction_latency: registered(
                r,
                "prediction_duration_seconds",
                "Time to compute the predictions of one request, by predictor",
                HistogramFamily::<PredictorLabels>::new_with_constructor(latency_histogram),
            ),
            predictions: registered(
                r,
                "predictions",
                "Predictions served by predictor and model version",
                Family::<ModelLabels, Counter>::default(),
            ),
            outcomes: registered(
                r,
                "prediction_outcomes",
                "Finished jobs whose prediction at submit was scored, by predictor",
                Family::<PredictorLabels, Counter>::default(),
            ),
            mae: registered(
                r,
                "prediction_mae_seconds",
                "Rolling mean absolute error of the prediction made at submit, over the last 500 finished jobs",
                Family::<PredictorLabels, F64Gauge>::default(),
            ),
            coverage: registered(
                r,
                "prediction_interval_coverage",
                "Rolling share of the last 500 finished jobs whose actual value fell inside the predicted interval",
                Family::<PredictorLabels, F64Gauge>::default(),
            ),
            actions: registered(
                r,
                "controller_actions",
                "Controller decisions by action, reason and outcome (applied, failed, dry_run)",
                Family::<ActionLabels, Counter>::default(),
            ),
            retrains: registered(
                r,
                "retrains",
                "Retrains on the ingested history by trigger (manual, schedule) and outcome (succeeded, failed, refused_running, refused_too_few_jobs, refused_first_start)",
                Family::<RetrainLabels, Counter>::default(),
            ),
            retrain_duration: registered(
                r,
                "retrain_duration_seconds",
                "Time a retrain on the ingested history took (training, saving, swapping), succeeded or failed",
                Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            ),
            model_load_failures: registered(
                r,
                "model_load_failures",
                "Saved model versions that could not be loaded when choosing the served version, by kind (the previous good version is served instead)",
                Family::<KindLabels, Counter>::default(),
            ),
            first_start_training: registered(
                r,
                "first_start_training",
                "Whether the first start is still training this kind (1; its predictions answer 503 until it is served) or not (0)",
                Family::<KindLabels, Gauge>::default(),
            ),
            cluster: ClusterGauges::register(r),
            live_tick: registered(
                r,
                "live_tick_duration_seconds",
                "Time one tick of the live simulator and controller loop takes (ingest excluded)",
                latency_histogram(),
            ),
            backend_up: registered(
                r,
                "backend_up",
                "Whether the cluster backend serves the controller (1) or is down (0)",
                Family::<BackendLabels, Gauge>::default(),
            ),
            snapshot: SnapshotFamilies::register(r),
            rolling: Mutex::new(HashMap::new()),
            coverage_by_group: registered(
                r,
                "prediction_interval_coverage_by_group",
                "Rolling share of the last 500 finished jobs of a group (partition: the first 8 seen, the rest `other`; resource: gpu or cpu; size) whose actual value fell inside the predicted interval",
                Family::<GroupLabels, F64Gauge>::default(),
            ),
            rolling_groups: Mutex::new((HashMap::new(), CoverageGroups::default())),
            registry: root,
        }
    }

    /// A retrain started by `trigger` ended with `outcome` (after `seconds`, when it ran).
    pub fn observe_retrain(&self, trigger: &str, outcome: &str, seconds: Option<f64>) {
        self.retrains
            .get_or_create(&RetrainLabels {
                trigger: trigger.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if let Some(s) = seconds {
            self.retrain_duration.observe(s);
        }
    }

    /// What became of the snapshot at start-up (`loaded`, `damaged`, `stale`, `absent`).
    pub fn observe_snapshot_load(&self, outcome: &str) {
        self.snapshot
            .loads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// A snapshot write ended with `outcome`; when written, its size, last event and the
    /// seconds its two phases took.
    pub fn observe_snapshot_write(&self, outcome: &str, written: Option<(u64, i64, f64, f64)>) {
        self.snapshot
            .writes
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
        if let Some((bytes, last_seq, encode, write)) = written {
            self.snapshot
                .bytes
                .set(i64::try_from(bytes).unwrap_or(i64::MAX));
            self.snapshot.last_seq.set(last_seq);
            for (phase, s) in [("encode", encode), ("write", write)] {
                self.snapshot
                    .seconds
                    .get_or_create(&PhaseLabels {
                        phase: phase.to_string(),
                    })
                    .observe(s);
            }
        }
    }

    /// A saved version of `kind` could not be loaded when choosing the served one.
    pub fn observe_model_load_failure(&self, kind: &str) {
        self.model_load_failures
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Which of the `kinds` the first start still trains (`training`), set at each scrape.
    pub fn set_first_start_training<'a>(
        &self,
        kinds: impl IntoIterator<Item = &'a str>,
        training: &[&str],
    ) {
        for kind in kinds {
            self.first_start_training
                .get_or_create(&KindLabels {
                    kind: kind.to_string(),
                })
                .set(i64::from(training.contains(&kind)));
        }
    }

    /// One HTTP request answered.
    pub fn observe_http(&self, route: &str, method: &str, status: u16, seconds: f64) {
        self.http
            .get_or_create(&HttpLabels {
                route: route.to_string(),
                method: method.to_string(),
                status: status.to_string(),
            })
            .observe(seconds);
    }

    /// `count` predictions of `kind` by model `version` computed in `seconds`.
    pub fn observe_prediction(&self, kind: &str, version: u32, count: usize, seconds: f64) {
        self.prediction_latency
            .get_or_create(&PredictorLabels {
                predictor: kind.to_string(),
            })
            .observe(seconds);
        self.predictions
            .get_or_create(&ModelLabels {
                predictor: kind.to_string(),
                model_version: version.to_string(),
            })
            .inc_by(count as u64);
    }

    /// The latency histogram and prediction counter of `kind` at model `version` (handles
    /// to the registered metrics, for callers that record often and want no label lookup).
    pub fn prediction_handles(&self, kind: &str, version: u32) -> (Histogram, Counter) {
        let h = self
            .prediction_latency
            .get_or_create_owned(&PredictorLabels {
                predictor: kind.to_string(),
            });
        let c = self.predictions.get_or_create_owned(&ModelLabels {
            predictor: kind.to_string(),
            model_version: version.to_string(),
        });
        (h, c)
    }

    /// A finished job scored against the prediction of `kind` made at its submit:
    /// `abs_err` seconds off; `covered` whether the actual value fell in the interval.
    pub fn observe_outcome(&self, kind: &str, abs_err: f64, covered: Option<bool>) {
        if !abs_err.is_finite() {
            return;
        }
        let labels = PredictorLabels {
            predictor: kind.to_string(),
        };
        let (mae, cov) = lock(&self.rolling)
            .entry(kind.to_string())
            .or_default()
            .push(abs_err, covered);
        self.outcomes.get_or_create(&labels).inc();
        self.mae.get_or_create(&labels).set(mae);
        if let Some(c) = cov {
            self.coverage.get_or_create(&labels).set(c);
        }
    }

    /// A finished job of `job`'s groups ([`CoverageGroups::labels`]) was inside the
    /// interval of `kind` issued at its submit (`covered`) or not.
    pub fn observe_group_coverage(&self, kind: &str, job: &JobRecord, covered: bool) {
        let mut guard = lock(&self.rolling_groups);
        let (rolling, groups) = &mut *guard;
        groups.admit(job.queue.as_deref());
        for (dimension, group) in groups.labels(job) {
            let labels = GroupLabels {
                predictor: kind.to_string(),
                dimension: dimension.to_string(),
                group,
            };
            let r = rolling.entry(labels.clone()).or_default();
            let (_, cov) = r.push(0.0, Some(covered));
            if let Some(c) = cov {
                self.coverage_by_group.get_or_create(&labels).set(c);
            }
        }
    }

    /// A controller decision.
    pub fn observe_action(&self, action: &str, reason: &str, outcome: &str) {
        self.actions
            .get_or_create(&ActionLabels {
                action: action.to_string(),
                reason: reason.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// The cluster now.
    pub fn set_cluster(&self, utilisation: f64, queued: u32, queued_gpus: u32, running: u32) {
        self.cluster.utilisation.set(utilisation);
        self.cluster.queue_length.set(i64::from(queued));
        self.cluster.queued_gpus.set(i64::from(queued_gpus));
        self.cluster.running_jobs.set(i64::from(running));
    }

    /// The backend's health: `augur_backend_up`, and no utilisation figure (NaN) while it
    /// is down (the last one seen would be stale, and 0 would be a false reading).
    pub fn set_backend(&self, health: &crate::serve::backends::health::BackendHealth) {
        self.backend_up
            .get_or_create(&BackendLabels {
                backend: health.backend.to_string(),
            })
            .set(i64::from(health.up));
        if !health.up {
            self.cluster.utilisation.set(f64::NAN);
        }
    }

    /// One tick of the live loop took `seconds`.
    pub fn observe_tick(&self, seconds: f64) {
        self.live_tick.observe(seconds);
    }

    /// Everything, in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
#[path = "families_tests.rs"]
mod tests;
