//! The runtime predictor on a real trace: beats the baselines on the shared split, and its
//! online-conformal interval covers close to its nominal 80%.

use augur_datasets::bundled::Dataset;
use augur_datasets::ReadOptions;
use augur_predictor::{evaluate_runtime, RuntimeTrainer};

#[test]
fn mira_runtime_beats_baselines_with_calibrated_interval() {
    let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
    let jobs = table.to_records().unwrap();
    let eval = evaluate_runtime(&jobs, &RuntimeTrainer::default()).unwrap();
    assert_eq!(eval.n_train + eval.n_test, jobs.len());
    let row = |prefix: &str| {
        eval.rows
            .iter()
            .find(|r| r.method.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix}: {:?}", eval.rows))
    };
    let median = row("global median");
    let last2 = row("last-2");
    let model = row("augur, online");
    assert!(
        model.metrics.mae_log < last2.metrics.mae_log - 0.1,
        "{model:?} vs {last2:?}"
    );
    assert!(
        model.metrics.mae_log < median.metrics.mae_log - 0.3,
        "{model:?} vs {median:?}"
    );
    // the bar set by the team's LightGBM on this split
    assert!(model.metrics.mae_log < 0.644, "{model:?}");
    assert!(model.metrics.within2x > 0.740, "{model:?}");
    // adaptive online conformal holds the nominal 80%
    let cov = model.metrics.coverage80.unwrap();
    assert!((0.78..=0.82).contains(&cov), "coverage {cov}");
    // the point predictions behind the table are real numbers with ordered intervals
    assert!(eval
        .test_pred
        .iter()
        .all(|p| p.lower <= p.seconds && p.seconds <= p.upper && p.seconds.is_finite()));
}
