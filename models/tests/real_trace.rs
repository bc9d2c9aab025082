//! Sanity check of the linear and MLP families on a real trace (ALCF Mira, bundled): on the
//! shared time-ordered split they clearly beat the global-median baseline and the
//! last-2-jobs-of-the-user baseline (0.939 mae_log on this split).

use augur_datasets::bundled::Dataset;
use augur_datasets::split::clamp_duration;
use augur_datasets::{ReadOptions, TimeSplit};
use augur_features::{batch_features, FeatureSchema};
use augur_models::gbdt::{Objective, Validation};
use augur_models::linear::LinearParams;
use augur_models::mlp::MlpParams;
use augur_models::{Fit, Matrix, Predict, TrainSet};

fn gather(x: &[f32], d: usize, rows: &[usize]) -> Vec<f32> {
    rows.iter()
        .flat_map(|&r| x[r * d..(r + 1) * d].iter().copied())
        .collect()
}

#[test]
fn linear_and_mlp_beat_the_baselines_on_mira() {
    let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
    let jobs = table.to_records().unwrap();
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled = |rows: &[usize]| -> Vec<usize> {
        rows.iter()
            .copied()
            .filter(|&i| jobs[i].duration.is_some_and(f64::is_finite))
            .collect()
    };
    let (train_rows, test_rows) = (labelled(split.train()), labelled(split.test()));
    let train_jobs: Vec<_> = train_rows.iter().map(|&i| jobs[i].clone()).collect();
    let schema = FeatureSchema::for_jobs(&train_jobs);
    let d = schema.len();
    let x = batch_features(&jobs, &schema);
    let y: Vec<f64> = jobs
        .iter()
        .map(|j| clamp_duration(j.duration.unwrap_or(1.0)).ln())
        .collect();
    // the last 10% of the training period validates the MLP
    let n_fit = train_rows.len() * 9 / 10;
    let (fit_rows, val_rows) = train_rows.split_at(n_fit);
    let (fx, vx, tx) = (
        gather(&x, d, fit_rows),
        gather(&x, d, val_rows),
        gather(&x, d, &test_rows),
    );
    let fy: Vec<f64> = fit_rows.iter().map(|&r| y[r]).collect();
    let vy: Vec<f64> = val_rows.iter().map(|&r| y[r]).collect();
    let ty: Vec<f64> = test_rows.iter().map(|&r| y[r]).collect();
    let train = TrainSet::new(Matrix::new(&fx, fit_rows.len(), d).unwrap(), &fy, None).unwrap();
    let vm = Matrix::new(&vx, val_rows.len(), d).unwrap();
    let tm = Matrix::new(&tx, test_rows.len(), d).unwrap();
    let mae_log = |model: &dyn Predict| {
        let mut p = vec![0.0; ty.len()];
        model.predict_into(&tm, &mut p).unwrap();
        p.iter().zip(&ty).map(|(p, y)| (p - y).abs()).sum::<f64>() / ty.len() as f64
    };
    let mut sorted = fy.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let baseline = ty.iter().map(|y| (y - median).abs()).sum::<f64>() / ty.len() as f64;

    let linear = LinearParams {
        objective: Objective::L1,
        ..Default::default()
    }
    .fit(&train)
    .unwrap();
    let mlp = MlpParams {
        epochs: 8,
        ..Default::default()
    }
    .fit_with_validation(&train, Some(Validation { x: vm, y: &vy }))
    .unwrap();
    let (e_lin, e_mlp) = (mae_log(&linear), mae_log(&mlp));
    eprintln!("mira mae_log: global median {baseline:.3}, linear L1 {e_lin:.3}, MLP {e_mlp:.3}");
    assert!(baseline > 1.1, "global median {baseline}");
    assert!(e_lin < 0.66, "linear L1 {e_lin}");
    assert!(e_mlp < 0.8, "MLP {e_mlp}");
}
