//! The convergence evaluation on MLPerf runs: predictions at prefixes of held-out runs
//! against the truncated prior, the curve ensemble, Optimus and the median time-to-train.

use std::collections::HashMap;

use augur_datasets::TimeSplit;
use augur_numeric::{median, quantile};
use serde::{Deserialize, Serialize};

use super::ensemble::{optimus_remaining_s, Crossing};
use super::{
    ConvergencePrediction, ConvergencePredictor, ConvergenceRun, ConvergenceTrainer, Direction,
};
use crate::evaluation::MethodRow;
use crate::PredictorError;

/// The prefixes evaluated: shares of a test run's points.
pub const PREFIXES: [f64; 3] = [0.25, 0.5, 0.75];

/// Points given for a prefix share: `⌈share · n⌉`, at least 1.
pub fn prefix_len(n: usize, share: f64) -> usize {
    ((share * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// One method's result on one group at one prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceMetrics {
    /// Median |pred − actual| / actual of remaining wall time (no finite answer: 1.0).
    pub median_rel_error: f64,
    /// Quartiles of the relative error (for error bars).
    pub q25_rel_error: f64,
    pub q75_rel_error: f64,
    /// Share of runs with a finite answer.
    pub answered: f64,
    /// Share of runs whose actual remaining time is inside the 80% interval (methods with one).
    pub coverage: Option<f64>,
}

/// A method's row of the convergence evaluation (one group, one prefix).
pub type MethodScore = MethodRow<ConvergenceMetrics>;

/// Scores of every method on one group (all runs, or one benchmark) at one prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefixScores {
    /// `all` or a benchmark.
    pub group: String,
    pub prefix: f64,
    pub runs: usize,
    pub methods: Vec<MethodScore>,
}

/// One test run's predictions at one prefix (for plots).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestCase {
    pub run_id: String,
    pub benchmark: String,
    pub prefix: f64,
    pub points_given: usize,
    pub actual_remaining_s: f64,
    pub prediction: ConvergencePrediction,
}

/// Method names, in table order.
pub const METHOD_AUGUR: &str = "augur (curve evidence + EB prior, GBDT)";
pub const METHOD_TRUNCATED_PRIOR: &str = "EB prior truncated at elapsed (ablation)";
pub const METHOD_ENSEMBLE: &str = "curve ensemble over wall time (ablation)";
pub const METHOD_OPTIMUS: &str = "Optimus fit over wall time (peer)";
pub const METHOD_PRIOR: &str = "median time-to-train, same benchmark+size (peer)";

/// The result of [`evaluate_convergence`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvergenceEvaluation {
    pub n_train_runs: usize,
    pub n_test_runs: usize,
    /// Overall first, then per benchmark, each at every prefix.
    pub scores: Vec<PrefixScores>,
    /// Learned targets per benchmark: (benchmark, direction, target).
    pub targets: Vec<(String, Direction, f64)>,
    /// Seconds to train the predictor.
    pub train_s: f64,
    /// Mean microseconds per prediction on the test prefixes.
    pub predict_us: f64,
    /// Every test prediction (not serialised: large).
    #[serde(skip)]
    pub cases: Vec<TestCase>,
    /// The test runs (not serialised).
    #[serde(skip)]
    pub test_runs: Vec<ConvergenceRun>,
}

impl ConvergenceEvaluation {
    /// The metrics of `method` on `group` at `prefix`.
    pub fn score(&self, group: &str, prefix: f64, method: &str) -> Option<&ConvergenceMetrics> {
        self.scores
            .iter()
            .find(|s| s.group == group && (s.prefix - prefix).abs() < 1e-9)?
            .methods
            .iter()
            .find(|m| m.method == method)
            .map(|m| &m.metrics)
    }
}

/// Per-run outcome of one method at one prefix: relative error (1.0 without an answer) and
/// whether the interval covered.
#[derive(Clone, Copy)]
struct Outcome {
    err: f64,
    answered: bool,
    covered: Option<bool>,
}

fn rel_error(pred: Option<f64>, actual: f64) -> Outcome {
    match pred.filter(|p| p.is_finite()) {
        Some(p) => Outcome {
            err: (p - actual).abs() / actual,
            answered: true,
            covered: None,
        },
        None => Outcome {
            err: 1.0,
            answered: false,
            covered: None,
        },
    }
}

/// MLPerf runs split for the evaluation: the shared time-ordered split by run start (the
/// first 80% train, the rest test, whole runs).
#[derive(Debug, Clone)]
pub struct ConvergenceData {
    pub train: Vec<ConvergenceRun>,
    pub test: Vec<ConvergenceRun>,
}

impl ConvergenceData {
    /// Splits `runs` by run start; an error when no run is left to test.
    pub fn split(runs: &[ConvergenceRun]) -> Result<ConvergenceData, PredictorError> {
        let starts: Vec<f64> = runs.iter().map(|r| r.start_ms as f64).collect();
        let split = TimeSplit::default_for(&starts);
        let train: Vec<ConvergenceRun> = split.train().iter().map(|&i| runs[i].clone()).collect();
        let test: Vec<ConvergenceRun> = split.test().iter().map(|&i| runs[i].clone()).collect();
        if test.is_empty() {
            return Err(PredictorError::not_enough(
                "training curves",
                "no test runs after the split",
            ));
        }
        Ok(ConvergenceData { train, test })
    }
}

/// The evaluation on MLPerf runs: split by run start ([`ConvergenceData::split`]), train on
/// the first part, predict the remaining wall time to target from the first 25/50/75% of
/// each test run's points.
pub fn evaluate_convergence(
    runs: &[ConvergenceRun],
    trainer: &ConvergenceTrainer,
) -> Result<ConvergenceEvaluation, PredictorError> {
    train_and_evaluate_convergence(runs, trainer).map(|(_, eval)| eval)
}

/// The evaluation of [`evaluate_convergence`] and the predictor it trained (for `augur
/// train`, which saves that predictor: one training, not two).
pub fn train_and_evaluate_convergence(
    runs: &[ConvergenceRun],
    trainer: &ConvergenceTrainer,
) -> Result<(ConvergencePredictor, ConvergenceEvaluation), PredictorError> {
    let data = ConvergenceData::split(runs)?;
    let t0 = std::time::Instant::now();
    let predictor = trainer.train(&data.train)?;
    let train_s = t0.elapsed().as_secs_f64();
    let eval = score_convergence(&data, &predictor, train_s);
    Ok((predictor, eval))
}

/// The methods, in table order.
const METHODS: [&str; 5] = [
    METHOD_AUGUR,
    METHOD_TRUNCATED_PRIOR,
    METHOD_ENSEMBLE,
    METHOD_OPTIMUS,
    METHOD_PRIOR,
];

/// Every method's outcome per test run: `[prefix][method]` = (benchmark, outcome) per run.
type Outcomes = Vec<Vec<Vec<(String, Outcome)>>>;

/// Scores a predictor trained on `data.train` (in `train_s` seconds) on the test runs with
/// points, beside the ablations and peers (so `augur train` evaluates the model it saves
/// without training twice).
pub fn score_convergence(
    data: &ConvergenceData,
    predictor: &ConvergencePredictor,
    train_s: f64,
) -> ConvergenceEvaluation {
    let train = &data.train;
    let peer_median = peer_medians(train);
    let mut outcomes: Outcomes = vec![vec![Vec::new(); METHODS.len()]; PREFIXES.len()];
    let mut cases = Vec::new();
    let mut predict_s = 0.0;
    let mut n_pred = 0usize;
    let test: Vec<ConvergenceRun> = data
        .test
        .iter()
        .filter(|r| !r.points.is_empty())
        .cloned()
        .collect();
    for r in &test {
        for (pi, &share) in PREFIXES.iter().enumerate() {
            let k = prefix_len(r.points.len(), share);
            let t = std::time::Instant::now();
            let pred = predictor.predict(&r.context, &r.points[..k]);
            predict_s += t.elapsed().as_secs_f64();
            n_pred += 1;
            let row = method_outcomes(predictor, &peer_median, r, k, &pred);
            for (mi, o) in row.into_iter().enumerate() {
                outcomes[pi][mi].push((r.context.benchmark.clone(), o));
            }
            if let Ok(p) = pred {
                cases.push(TestCase {
                    run_id: r.run_id.clone(),
                    benchmark: r.context.benchmark.clone(),
                    prefix: share,
                    points_given: k,
                    actual_remaining_s: actual_remaining(r, k),
                    prediction: p,
                });
            }
        }
    }
    let scores = prefix_scores(&outcomes, &test);
    let targets = predictor
        .benchmarks()
        .map(|(b, p)| (b.to_string(), p.direction, p.target))
        .collect();
    ConvergenceEvaluation {
        n_train_runs: train.len(),
        n_test_runs: test.len(),
        scores,
        targets,
        train_s,
        predict_us: 1e6 * predict_s / n_pred.max(1) as f64,
        cases,
        test_runs: test,
    }
}

/// The peer prior: median time-to-train per (benchmark, accelerators) of the training runs.
fn peer_medians(train: &[ConvergenceRun]) -> HashMap<(String, u64), f64> {
    let mut groups: HashMap<(String, u64), Vec<f64>> = HashMap::new();
    for r in train {
        if let Some(a) = r.context.accelerators {
            groups
                .entry((r.context.benchmark.clone(), a))
                .or_default()
                .push(r.time_to_train_s);
        }
    }
    groups
        .into_iter()
        .filter_map(|(k, mut v)| median(&mut v).map(|m| (k, m)))
        .collect()
}

/// The actual remaining seconds of run `r` after its first `k` points (at least 1).
fn actual_remaining(r: &ConvergenceRun, k: usize) -> f64 {
    (r.time_to_train_s - r.points[k - 1].wall_time_s).max(1.0)
}

/// Each method's outcome (in [`METHODS`] order) on run `r` given its first `k` points,
/// `pred` being Augur's prediction.
fn method_outcomes(
    predictor: &ConvergencePredictor,
    peer_median: &HashMap<(String, u64), f64>,
    r: &ConvergenceRun,
    k: usize,
    pred: &Result<ConvergencePrediction, PredictorError>,
) -> [Outcome; 5] {
    let pts = &r.points[..k];
    let elapsed = pts[k - 1].wall_time_s;
    let actual = actual_remaining(r, k);
    let bench = &r.context.benchmark;
    let (augur, trunc, ens) = match pred {
        Ok(p) => {
            let mut o = rel_error(Some(p.remaining_s), actual);
            o.covered = Some(p.remaining_lower_s <= actual && actual <= p.remaining_upper_s);
            let ens = match (&p.curve, p.target) {
                (Some(c), Some(target)) => match c.crossing(target) {
                    Crossing::Already => Some(0.0),
                    Crossing::At(x) => Some(x - c.last_progress),
                    Crossing::Never => None,
                },
                _ => None,
            };
            (
                o,
                rel_error(p.prior_remaining_s, actual),
                rel_error(ens, actual),
            )
        }
        Err(_) => {
            let mut o = rel_error(None, actual);
            o.covered = Some(false);
            (o, rel_error(None, actual), rel_error(None, actual))
        }
    };
    let target = predictor.priors.profiles.get(bench);
    let optimus = target.and_then(|p| optimus_remaining_s(pts, p.direction, p.target));
    let peer = r
        .context
        .accelerators
        .and_then(|a| peer_median.get(&(bench.clone(), a)))
        .map(|m| m - elapsed);
    [
        augur,
        trunc,
        ens,
        rel_error(optimus, actual),
        rel_error(peer, actual),
    ]
}

/// Scores overall and per benchmark, each at every prefix.
fn prefix_scores(outcomes: &Outcomes, test: &[ConvergenceRun]) -> Vec<PrefixScores> {
    let mut benches: Vec<String> = test.iter().map(|r| r.context.benchmark.clone()).collect();
    benches.sort();
    benches.dedup();
    let mut scores = Vec::new();
    for group in std::iter::once("all".to_string()).chain(benches) {
        for (pi, &share) in PREFIXES.iter().enumerate() {
            let mut runs_in = 0;
            let ms = METHODS
                .iter()
                .enumerate()
                .map(|(mi, &name)| {
                    let os: Vec<Outcome> = outcomes[pi][mi]
                        .iter()
                        .filter(|(b, _)| group == "all" || *b == group)
                        .map(|(_, o)| *o)
                        .collect();
                    runs_in = os.len();
                    method_score(name, &os)
                })
                .collect();
            scores.push(PrefixScores {
                group: group.clone(),
                prefix: share,
                runs: runs_in,
                methods: ms,
            });
        }
    }
    scores
}

fn method_score(name: &str, os: &[Outcome]) -> MethodScore {
    let n = os.len().max(1) as f64;
    let cov: Vec<bool> = os.iter().filter_map(|o| o.covered).collect();
    let errs: Vec<f64> = os.iter().map(|o| o.err).collect();
    let metrics = ConvergenceMetrics {
        median_rel_error: median(&mut errs.clone()).unwrap_or(f64::NAN),
        q25_rel_error: quantile(&errs, 0.25),
        q75_rel_error: quantile(&errs, 0.75),
        answered: os.iter().filter(|o| o.answered).count() as f64 / n,
        coverage: (!cov.is_empty())
            .then(|| cov.iter().filter(|&&c| c).count() as f64 / cov.len() as f64),
    };
    MethodRow::new(name, metrics)
}
