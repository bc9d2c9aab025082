//! Linear / quantile models and the MLP on labelled synthetic data with known structure.

use augur_models::gbdt::{Objective, Validation};
use augur_models::linear::{LinearModel, LinearParams};
use augur_models::mlp::{MlpModel, MlpParams};
use augur_models::preprocess::PreprocessParams;
use augur_models::{AnyModel, Fit, Matrix, ModelError, Predict, TrainSet};
use augur_numeric::SplitMix64;

/// The seeded test generator: `unit` draws in [0, 1) and a Box–Muller `normal` on them.
struct Rng(SplitMix64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0.unit()
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

fn mean_abs(model: &impl Predict, x: &Matrix, y: &[f64]) -> f64 {
    let mut p = vec![0.0; y.len()];
    model.predict_into(x, &mut p).unwrap();
    p.iter().zip(y).map(|(p, y)| (p - y).abs()).sum::<f64>() / y.len() as f64
}

/// y = 1 + 2·x0 − 3·x1 + 0.5·x2 + noise, x3 pure noise.
fn linear_data(n: usize, noise: f64, seed: u64) -> (Vec<f32>, Vec<f64>) {
    let mut rng = Rng(SplitMix64(seed));
    let mut x = Vec::with_capacity(n * 4);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let v: Vec<f64> = (0..4).map(|_| rng.normal()).collect();
        x.extend(v.iter().map(|&a| a as f32));
        y.push(1.0 + 2.0 * v[0] - 3.0 * v[1] + 0.5 * v[2] + noise * rng.normal());
    }
    (x, y)
}

#[test]
fn l2_fit_recovers_coefficients() {
    let n = 5000;
    let (x, y) = linear_data(n, 0.1, 1);
    let m = Matrix::new(&x, n, 4).unwrap();
    let model = LinearParams {
        l2: 1e-4,
        ..Default::default()
    }
    .fit(&TrainSet::new(m, &y, None).unwrap())
    .unwrap();
    let slopes: Vec<f64> = (0..4).map(|j| model.slope(j).unwrap()).collect();
    for (got, want) in slopes.iter().zip([2.0, -3.0, 0.5, 0.0]) {
        assert!((got - want).abs() < 0.02, "slopes {slopes:?}");
    }
    // the intercept in raw units: prediction at x = 0
    assert!((model.predict_row(&[0.0; 4]) - 1.0).abs() < 0.02);
    assert!(model.converged() && model.iterations() == 0);
}

#[test]
fn l1_and_quantile_fits_resist_outliers_and_cover_alpha() {
    let n = 4000;
    let (x, mut y) = linear_data(n, 0.5, 2);
    let clean = y.clone();
    // 10% gross outliers, all upwards
    for v in y.iter_mut().step_by(10) {
        *v += 50.0;
    }
    let m = Matrix::new(&x, n, 4).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let l2 = LinearParams::default().fit(&train).unwrap();
    let l1 = LinearParams {
        objective: Objective::L1,
        ..Default::default()
    }
    .fit(&train)
    .unwrap();
    // ADMM stops on a certified duality gap: the objective is within 0.1% of the optimum
    assert!(l1.converged(), "ADMM stopped after {}", l1.iterations());
    assert!(
        l1.duality_gap().is_some_and(|g| g <= 1e-3),
        "{:?}",
        l1.duality_gap()
    );
    assert_eq!(l2.duality_gap(), None);
    // L2 is dragged up by the outliers (by ≈ 5 = 10% × 50); L1 is not
    let bias = |model: &LinearModel| {
        let mut p = vec![0.0; n];
        model.predict_into(&m, &mut p).unwrap();
        p.iter().zip(&clean).map(|(p, c)| p - c).sum::<f64>() / n as f64
    };
    assert!(bias(&l2) > 4.0, "L2 bias {}", bias(&l2));
    assert!(bias(&l1).abs() < 0.15, "L1 bias {}", bias(&l1));
    for (j, want) in [2.0, -3.0, 0.5].into_iter().enumerate() {
        let got = l1.slope(j).unwrap();
        assert!((got - want).abs() < 0.1, "L1 slope {j}: {got}");
    }
    // quantile fits cover their share of the (contaminated) training points
    for alpha in [0.1, 0.5, 0.8] {
        let q = LinearParams {
            objective: Objective::Quantile { alpha },
            ..Default::default()
        }
        .fit(&train)
        .unwrap();
        let mut p = vec![0.0; n];
        q.predict_into(&m, &mut p).unwrap();
        let below = p.iter().zip(&y).filter(|(p, y)| y <= p).count() as f64 / n as f64;
        assert!((below - alpha).abs() < 0.02, "alpha {alpha}: {below}");
    }
}

#[test]
fn missing_values_get_median_and_indicator() {
    // y = x0 when present; when x0 is missing the job is slow (y = 5): only the indicator
    // can tell. A heavy-tailed x1 adds y += ln(1 + x1).
    let n = 3000;
    let mut rng = Rng(SplitMix64(3));
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let x0 = rng.normal();
        let x1 = (rng.normal() * 3.0).exp(); // log-normal, heavy tail
        let missing = i % 4 == 0;
        x.extend([if missing { f32::NAN } else { x0 as f32 }, x1 as f32]);
        y.push(if missing { 5.0 } else { x0 } + x1.ln_1p());
    }
    let m = Matrix::new(&x, n, 2).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let weak_ridge = LinearParams {
        l2: 1e-4,
        ..Default::default()
    };
    let model = weak_ridge.fit(&train).unwrap();
    let pre = model.preprocessor();
    assert_eq!((pre.n_out(), pre.n_indicators(), pre.n_logged()), (3, 1, 1));
    assert!(
        mean_abs(&model, &m, &y) < 0.05,
        "{}",
        mean_abs(&model, &m, &y)
    );
    // a missing x0 predicts ≈ 5 + ln(1 + x1); NaN, ±∞ and a short row all count as missing
    for row in [[f32::NAN, 0.0], [f32::INFINITY, 0.0]] {
        assert!((model.predict_row(&row) - 5.0).abs() < 0.1);
    }
    assert!(
        (model.predict_row(&[f32::NAN]) - model.predict_row(&[f32::NAN, f32::NAN])).abs() < 1e-12
    );
    // without the indicator and the log transform the same model is much worse
    let plain = LinearParams {
        preprocess: PreprocessParams {
            missing_indicators: false,
            log_heavy_tails: false,
            ..Default::default()
        },
        ..weak_ridge
    }
    .fit(&train)
    .unwrap();
    assert!(mean_abs(&plain, &m, &y) > 10.0 * mean_abs(&model, &m, &y));
}

/// y = sin(2·x0) + x1² (+ small noise), x2 noise; x ~ U(−2, 2).
fn nonlinear_data(n: usize, seed: u64) -> (Vec<f32>, Vec<f64>) {
    let mut rng = Rng(SplitMix64(seed));
    let (mut x, mut y) = (Vec::with_capacity(3 * n), Vec::with_capacity(n));
    for _ in 0..n {
        let v: Vec<f64> = (0..3).map(|_| 4.0 * rng.unit() - 2.0).collect();
        x.extend(v.iter().map(|&a| a as f32));
        y.push((2.0 * v[0]).sin() + v[1] * v[1] + 0.05 * rng.normal());
    }
    (x, y)
}

fn small_mlp() -> MlpParams {
    MlpParams {
        hidden: vec![32, 32],
        epochs: 40,
        batch_size: 64,
        learning_rate: 5e-3,
        early_stopping_epochs: 6,
        ..Default::default()
    }
}

#[test]
fn mlp_learns_a_nonlinear_function_the_linear_model_cannot() {
    let (n, nv) = (3000, 1000);
    let (x, y) = nonlinear_data(n, 4);
    let (vx, vy) = nonlinear_data(nv, 5);
    let m = Matrix::new(&x, n, 3).unwrap();
    let vm = Matrix::new(&vx, nv, 3).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let mlp = small_mlp()
        .fit_with_validation(&train, Some(Validation { x: vm, y: &vy }))
        .unwrap();
    let lin = LinearParams {
        objective: Objective::L1,
        ..Default::default()
    }
    .fit(&train)
    .unwrap();
    let (e_mlp, e_lin) = (mean_abs(&mlp, &vm, &vy), mean_abs(&lin, &vm, &vy));
    assert!(e_lin > 0.7, "linear MAE {e_lin}");
    assert!(e_mlp < 0.2, "MLP MAE {e_mlp} (linear {e_lin})");
    assert!(e_mlp < 0.25 * e_lin);
    // early stopping bookkeeping: one validation loss per epoch run, the kept one is the best
    let vl = mlp.valid_loss();
    assert!(!vl.is_empty() && vl.len() <= 40);
    let best = vl.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(vl[mlp.epochs() - 1], best);
    assert!((best - e_mlp).abs() < 1e-4, "{best} vs {e_mlp}");
}

#[test]
fn mlp_is_deterministic_and_predict_row_matches_predict_into() {
    let n = 800;
    let (x, y) = nonlinear_data(n, 6);
    let m = Matrix::new(&x, n, 3).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let params = MlpParams {
        epochs: 3,
        ..small_mlp()
    };
    let a = params.fit(&train).unwrap();
    let b = params.fit(&train).unwrap();
    assert_eq!(a, b, "same seed, same model");
    let c = MlpParams { seed: 8, ..params }.fit(&train).unwrap();
    assert_ne!(a.layers(), c.layers());
    let mut batch = vec![0.0; n];
    a.predict_into(&m, &mut batch).unwrap();
    for (i, p) in batch.iter().enumerate() {
        assert_eq!(*p, a.predict_row(m.row(i)));
    }
}

#[test]
fn serde_round_trip_through_any_model_predicts_identically() {
    let n = 600;
    let (mut x, y) = nonlinear_data(n, 7);
    for v in x.iter_mut().step_by(7) {
        *v = f32::NAN;
    }
    let m = Matrix::new(&x, n, 3).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let models = [
        AnyModel::Linear(
            LinearParams {
                objective: Objective::Quantile { alpha: 0.7 },
                ..Default::default()
            }
            .fit(&train)
            .unwrap(),
        ),
        AnyModel::Mlp(
            MlpParams {
                epochs: 2,
                ..small_mlp()
            }
            .fit(&train)
            .unwrap(),
        ),
    ];
    for model in models {
        let json = serde_json::to_string(&model).unwrap();
        let family = if matches!(model, AnyModel::Linear(_)) {
            "linear"
        } else {
            "mlp"
        };
        assert!(
            json.starts_with(&format!("{{\"family\":\"{family}\"")),
            "{}",
            &json[..40]
        );
        let back: AnyModel = serde_json::from_str(&json).unwrap();
        let (mut p, mut q) = (vec![0.0; n], vec![0.0; n]);
        model.predict_into(&m, &mut p).unwrap();
        back.predict_into(&m, &mut q).unwrap();
        assert_eq!(p, q);
        for (i, pi) in p.iter().enumerate() {
            assert_eq!(back.predict_row(m.row(i)), *pi);
        }
    }
}

#[test]
fn corrupt_mlp_json_is_an_error_not_a_panic() {
    let n = 300;
    let (x, y) = nonlinear_data(n, 8);
    let m = Matrix::new(&x, n, 3).unwrap();
    let model = MlpParams {
        epochs: 1,
        ..small_mlp()
    }
    .fit(&TrainSet::new(m, &y, None).unwrap())
    .unwrap();
    let mut v: serde_json::Value = serde_json::to_value(&model).unwrap();
    v["layers"][0]["b"].as_array_mut().unwrap().pop();
    assert!(serde_json::from_value::<MlpModel>(v).is_err());
}

#[test]
fn wrong_shapes_and_bad_params_are_model_errors() {
    let n = 200;
    let (x, y) = linear_data(n, 0.1, 9);
    let m = Matrix::new(&x, n, 4).unwrap();
    let train = TrainSet::new(m, &y, None).unwrap();
    let lin = LinearParams::default().fit(&train).unwrap();
    let mlp = MlpParams {
        epochs: 1,
        ..small_mlp()
    }
    .fit(&train)
    .unwrap();
    let narrow = Matrix::new(&x[..3 * 10], 10, 3).unwrap();
    let mut out = vec![0.0; 10];
    for model in [AnyModel::Linear(lin.clone()), AnyModel::Mlp(mlp.clone())] {
        assert!(matches!(
            model.predict_into(&narrow, &mut out),
            Err(ModelError::FeatureCount { want: 4, got: 3 })
        ));
        // an output buffer of the wrong length is an error too
        assert!(model.predict_into(&m, &mut out).is_err());
    }
    // validation data of the wrong width
    let bad_valid = Validation {
        x: narrow,
        y: &y[..10],
    };
    assert!(matches!(
        small_mlp().fit_with_validation(&train, Some(bad_valid)),
        Err(ModelError::FeatureCount { .. })
    ));
    for objective in [Objective::LogLoss, Objective::Quantile { alpha: 1.5 }] {
        let p = LinearParams {
            objective,
            ..Default::default()
        };
        assert!(matches!(p.fit(&train), Err(ModelError::InvalidData(_))));
        let p = MlpParams {
            objective,
            ..small_mlp()
        };
        assert!(matches!(p.fit(&train), Err(ModelError::InvalidData(_))));
    }
    let p = LinearParams {
        l2: -1.0,
        ..Default::default()
    };
    assert!(p.fit(&train).is_err());
    let p = MlpParams {
        hidden: vec![0],
        ..small_mlp()
    };
    assert!(p.fit(&train).is_err());
}

#[test]
fn sample_weights_shift_the_fit() {
    // two groups with different levels; weighting one group 9:1 moves the L2 mean there
    let n = 1000;
    let x = vec![0.0f32; n];
    let y: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { 0.0 } else { 10.0 })
        .collect();
    let w: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 9.0 } else { 1.0 }).collect();
    let m = Matrix::new(&x, n, 1).unwrap();
    let train = TrainSet::new(m, &y, Some(&w)).unwrap();
    let l2 = LinearParams::default().fit(&train).unwrap();
    assert!((l2.predict_row(&[0.0]) - 1.0).abs() < 1e-6);
    let l1 = LinearParams {
        objective: Objective::L1,
        ..Default::default()
    }
    .fit(&train)
    .unwrap();
    assert!(
        l1.predict_row(&[0.0]).abs() < 1e-3,
        "{}",
        l1.predict_row(&[0.0])
    );
}
