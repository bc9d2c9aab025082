//! Loss-curve convergence: when will a running training job reach its target (or stop
//! improving), and at what metric?
//!
//! Input: the metric points a job reported so far ([`CurvePoint`]: wall time since its start,
//! optional epoch/step, value). Output ([`ConvergencePrediction`]): the remaining and total
//! wall time to convergence, the epoch and the final metric, each with an 80% interval.
//!
//! Three layers, each usable on its own:
//!
//! 1. **Parametric curve fits** ([`fit_family`], [`CurveEnsemble`]): Optimus'
//!    `y = 1/(a·k + b) + c` (the baseline), a power law `c + s·(k + d)^−α`, an exponential
//!    `c + s·e^−λk` and a log-power (Domhan et al.) `c + s / (1 + (k/τ)^α)`, each mirrored
//!    (`c − …`) for metrics that rise. Fits are weighted towards recent points; nonlinear
//!    parameters by a log-grid plus golden-section refinement, the linear ones (`c`, `s ≥ 0`)
//!    in closed form (variable projection). The ensemble weights each family by its error on
//!    the last fifth of the points when fitted to the rest. A fit "converges" where it
//!    crosses the target or, without a target, where it moves less than a threshold over a
//!    window ([`CurveEnsemble::plateau`]).
//! 2. **An empirical-Bayes prior over time-to-train** ([`TimePrior`]): per benchmark,
//!    `ln T = a + β·ln(accelerators)`, with the residual means of (benchmark, system size)
//!    and (benchmark, system size, accelerator model) groups shrunk towards it by their size
//!    (method-of-moments between-group variance). The elapsed time truncates it: the job has
//!    not converged yet, so `T > elapsed` ([`TimePrior::truncated_median`]).
//! 3. **A small model conditioned on the prefix** ([`ConvergencePredictor`]): gradient-boosted
//!    trees (median and 10%/90% quantiles, conformalised on the last 15% of training runs)
//!    predict `ln(remaining / elapsed)` from the prior, the truncated prior, the curve fits'
//!    extrapolations, the progress towards the learned target, the epochs-to-target prior
//!    times the observed seconds per epoch, system size, batch and accelerator. It is trained
//!    on prefixes of every training curve with cross-fitted priors (a run never informs its
//!    own prior), so the curve evidence updates the prior the way it does at prediction time.
//!
//! [`evaluate_convergence`] evaluates on MLPerf v1.0: successful runs split by run start
//! (first 80% train, last 20% test, whole runs), the first 25/50/75% of a test run's points
//! given, remaining wall time to target predicted; median relative error (a run without a
//! finite answer counts 1.0) and 80% interval coverage, overall and per benchmark, beside
//! the Optimus fit over wall time and the median time-to-train prior. [`ConvergenceOnline`]
//! serves the predictor from a running job's events.

mod artifact;
mod curve;
mod data;
mod ensemble;
mod evaluate;
mod features;
mod final_metric;
mod online;
mod predictor;
mod prior;
mod profile;
mod trainer;

pub use curve::{fit_family, CurveFamily, CurveFit, FamilyParams};
pub use data::{
    load_bundled_mlperf, mlperf_convergence_runs, validate_points, ConvergenceRun, CurvePoint,
    Direction, JobContext,
};
pub use ensemble::{
    optimus_remaining_s, Crossing, CurveEnsemble, PLATEAU_THRESHOLD, PLATEAU_WINDOW,
};
pub use evaluate::{
    evaluate_convergence, prefix_len, score_convergence, train_and_evaluate_convergence,
    ConvergenceData, ConvergenceEvaluation, ConvergenceMetrics, MethodScore, PrefixScores,
    TestCase, METHOD_AUGUR, METHOD_ENSEMBLE, METHOD_OPTIMUS, METHOD_PRIOR, METHOD_TRUNCATED_PRIOR,
    PREFIXES,
};
pub use features::FEATURE_NAMES;
pub use final_metric::{
    evaluate_final_metric, load_bundled_pollux_curves, FinalMetricScores, ProgressCurve,
};
pub use online::{ConvergenceOnline, ConvergenceOnlineAnswer, ConvergenceOnlineState, KEEP_POINTS};
pub use predictor::{
    ConvergenceBasis, ConvergencePrediction, ConvergencePredictor, CONVERGENCE_COVERAGE,
    CONVERGENCE_FEATURE_VERSION,
};
pub use prior::{accelerator_class, TimePrior};
pub use profile::{BenchmarkProfile, ProgressAxis};
pub use trainer::ConvergenceTrainer;
