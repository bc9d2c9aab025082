//! Histogram gradient-boosted decision trees (LightGBM-style).
//!
//! - Features are bucketed into at most 255 quantile bins per feature; bin 0 holds missing
//!   values (NaN), which therefore always go to the left child.
//! - Trees grow leaf-wise (best gain first) up to `num_leaves`, with histogram subtraction
//!   (the larger child's histogram is the parent's minus the smaller child's).
//! - Objectives: squared error, absolute error and quantile (structure from gradient signs,
//!   then each leaf refit to the residuals' median / quantile, as LightGBM does), and binary
//!   log-loss (Newton leaves).
//! - Row and feature subsampling per tree; early stopping on a validation set; a fit whose
//!   tree count depends on an early-stopped one (a refit on more rows) can grow beside it
//!   ([`TreeCountLead`]).
//! - A fit's inputs can be saved and fitted again elsewhere ([`FitInputs`]).

mod binning;
mod fit;
mod fit_inputs;
mod grow;
mod lead;
mod model;
mod objective;
mod params;

pub use fit::{BinnedFeatures, Validation};
pub use fit_inputs::{FitInputs, FitInputsError, FIT_HEADER};
pub use lead::{SettleOnDrop, TreeCountLead};
pub use model::GbdtModel;
pub use objective::Objective;
pub use params::GbdtParams;

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;
    use crate::{Fit, Matrix, Predict, TrainSet};

    fn data(n: usize) -> (Vec<f32>, Vec<f64>) {
        // y = 3·[x0 > 0.5] + x1 (+ noise-free), x2 is noise, some x0 missing
        let mut rng = SplitMix64(1);
        let mut x = Vec::with_capacity(n * 3);
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let x0 = rng.unit() as f32;
            let x1 = rng.unit() as f32;
            let x2 = rng.unit() as f32;
            let missing = i % 10 == 0;
            x.extend([if missing { f32::NAN } else { x0 }, x1, x2]);
            let step = if missing {
                -2.0
            } else if x0 > 0.5 {
                3.0
            } else {
                0.0
            };
            y.push(step + f64::from(x1));
        }
        (x, y)
    }

    #[test]
    fn learns_a_step_and_a_slope_with_missing_values() {
        let (x, y) = data(4000);
        let m = Matrix::new(&x, 4000, 3).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        for objective in [Objective::L2, Objective::L1] {
            let params = GbdtParams {
                objective,
                n_trees: 300,
                learning_rate: 0.1,
                ..Default::default()
            };
            let model = params.fit(&train).unwrap();
            let mae: f64 = (0..4000)
                .map(|i| (model.predict_row(m.row(i)) - y[i]).abs())
                .sum::<f64>()
                / 4000.0;
            assert!(mae < 0.08, "{objective:?}: mae {mae}");
            if objective == Objective::L2 {
                // the noise feature gets (almost) no gain (L1's sign gradients are noise
                // once the fit converges, so its gains say little)
                let g = model.feature_gain();
                assert!(g[2] < 0.02 * (g[0] + g[1]), "{objective:?} {g:?}");
            }
            assert!(model.predict_row(&[f32::NAN, 0.5, 0.5]) < -1.0);
        }
    }

    #[test]
    fn progress_is_reported_once_per_tree_and_matches_fit() {
        let (x, y) = data(1000);
        let m = Matrix::new(&x, 1000, 3).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let params = GbdtParams {
            n_trees: 25,
            ..Default::default()
        };
        let mut calls = Vec::new();
        let with = params
            .fit_with_progress(&train, None, &mut |done, total| calls.push((done, total)))
            .unwrap();
        let expected: Vec<(usize, usize)> = (1..=25).map(|i| (i, 25)).collect();
        assert_eq!(calls, expected);
        // the callback changes nothing about the model
        assert_eq!(with, params.fit(&train).unwrap());
    }

    #[test]
    fn quantile_objective_covers_its_share() {
        let mut rng = SplitMix64(3);
        let n = 5000;
        let x: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
        let y: Vec<f64> = x.iter().map(|&v| f64::from(v) + rng.unit() * 2.0).collect();
        let m = Matrix::new(&x, n, 1).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let model = GbdtParams {
            objective: Objective::Quantile { alpha: 0.9 },
            n_trees: 200,
            ..Default::default()
        }
        .fit(&train)
        .unwrap();
        let below = (0..n)
            .filter(|&i| y[i] <= model.predict_row(m.row(i)))
            .count() as f64
            / n as f64;
        assert!((below - 0.9).abs() < 0.03, "{below}");
    }

    #[test]
    fn logloss_separates_classes_and_early_stopping_cuts_trees() {
        let mut rng = SplitMix64(5);
        let n = 3000;
        let x: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
        let y: Vec<f64> = x.iter().map(|&v| f64::from(u8::from(v > 0.7))).collect();
        let m = Matrix::new(&x, n, 1).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let model = GbdtParams {
            objective: Objective::LogLoss,
            n_trees: 1000,
            early_stopping_rounds: 20,
            ..Default::default()
        }
        .fit_with_validation(&train, Some(Validation { x: m, y: &y }))
        .unwrap();
        assert!(model.predict_row(&[0.9]) > 2.0);
        assert!(model.predict_row(&[0.1]) < -2.0);
        assert!(model.n_trees() < 1000);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let x = [1.0f32, 2.0];
        assert!(Matrix::new(&x, 3, 1).is_err());
        let m = Matrix::new(&x, 2, 1).unwrap();
        assert!(TrainSet::new(m, &[1.0, f64::NAN], None).is_err());
        assert!(TrainSet::new(m, &[1.0], None).is_err());
        let t = TrainSet::new(m, &[0.0, 2.0], None).unwrap();
        let p = GbdtParams {
            objective: Objective::LogLoss,
            ..Default::default()
        };
        assert!(p.fit(&t).is_err());
        let model = GbdtParams::default().fit(&t).unwrap();
        let wide = [1.0f32, 2.0, 3.0, 4.0];
        let mw = Matrix::new(&wide, 2, 2).unwrap();
        let mut out = [0.0; 2];
        assert!(model.predict_into(&mw, &mut out).is_err());
        // a short row is missing values, not a panic: it predicts as the all-NaN row does
        let (x, y) = data(500);
        let t = TrainSet::new(Matrix::new(&x, 500, 3).unwrap(), &y, None).unwrap();
        let model = GbdtParams {
            n_trees: 20,
            ..Default::default()
        }
        .fit(&t)
        .unwrap();
        let nan = model.predict_row(&[f32::NAN; 3]);
        assert_eq!(model.predict_row(&[]), nan);
        assert!(nan.is_finite());
    }

    #[test]
    fn flat_layout_predicts_the_trees_bit_for_bit() {
        let (x, y) = data(2000);
        let m = Matrix::new(&x, 2000, 3).unwrap();
        let model = GbdtParams {
            n_trees: 50,
            num_leaves: 15,
            ..Default::default()
        }
        .fit(&TrainSet::new(m, &y, None).unwrap())
        .unwrap();
        let walk = |row: &[f32]| {
            model.base_score + model.trees.iter().map(|t| t.predict(row)).sum::<f64>()
        };
        let mut out = vec![0.0; 2000];
        model.predict_into(&m, &mut out).unwrap();
        for (i, batch) in out.iter().enumerate() {
            let want = walk(m.row(i)).to_bits();
            assert_eq!(model.predict_row(m.row(i)).to_bits(), want, "row {i}");
            assert_eq!(batch.to_bits(), want, "row {i} (batch)");
        }
        for row in [&[][..], &[f32::NAN; 3], &[0.7], &[f32::INFINITY, -1.0, 2.0]] {
            assert_eq!(model.predict_row(row).to_bits(), walk(row).to_bits());
        }
    }

    #[test]
    fn serialises_round_trip() {
        let (x, y) = data(500);
        let m = Matrix::new(&x, 500, 3).unwrap();
        let model = GbdtParams {
            n_trees: 20,
            ..Default::default()
        }
        .fit(&TrainSet::new(m, &y, None).unwrap())
        .unwrap();
        let s = serde_json::to_string(&model).unwrap();
        let back: GbdtModel = serde_json::from_str(&s).unwrap();
        assert_eq!(back, model);
    }

    /// Copies of a column and constant columns change nothing: a model fitted with them
    /// appended has the trees of the model fitted without them, to the bit.
    #[test]
    fn copied_and_constant_columns_grow_the_same_trees() {
        let n = 3000;
        let (x, y) = data(n);
        let mut wide = Vec::with_capacity(n * 6);
        for row in x.chunks_exact(3) {
            // a copy of x1, a constant, a copy of x0 (missing values included)
            wide.extend([row[0], row[1], row[2], row[1], 4.0, row[0]]);
        }
        for objective in [
            Objective::L1,
            Objective::L2,
            Objective::Quantile { alpha: 0.9 },
        ] {
            let params = GbdtParams {
                objective,
                n_trees: 30,
                colsample: 1.0,
                subsample: 1.0,
                ..Default::default()
            };
            let narrow = params
                .fit(&TrainSet::new(Matrix::new(&x, n, 3).unwrap(), &y, None).unwrap())
                .unwrap();
            let wider = params
                .fit(&TrainSet::new(Matrix::new(&wide, n, 6).unwrap(), &y, None).unwrap())
                .unwrap();
            assert_eq!(narrow.trees, wider.trees, "{objective:?}");
            assert_eq!(narrow.gain[..], wider.gain[..3]);
            assert!(wider.gain[3..].iter().all(|&g| g == 0.0));
        }
    }

    /// A leader early-stopped on a validation slice and a follower refitted on every row
    /// with `trees_for(leader's count)` trees, side by side.
    fn lead_and_follow(
        objective: Objective,
        trees_for: &(dyn Fn(usize) -> usize + Sync),
    ) -> (GbdtModel, GbdtModel, GbdtModel) {
        let n = 3000;
        let (x, y) = data(n);
        let (fit_n, all) = (2400, Matrix::new(&x, n, 3).unwrap());
        let fit = Matrix::new(&x[..fit_n * 3], fit_n, 3).unwrap();
        let valid = Matrix::new(&x[fit_n * 3..], n - fit_n, 3).unwrap();
        let leader = GbdtParams {
            objective,
            n_trees: 400,
            learning_rate: 0.3,
            early_stopping_rounds: 15,
            ..Default::default()
        };
        let follower = GbdtParams {
            n_trees: trees_for(leader.n_trees),
            ..leader.clone()
        };
        let (fit_bins, all_bins) = (leader.bin(fit), follower.bin(all));
        let fit_set = TrainSet::new(fit, &y[..fit_n], None).unwrap();
        let all_set = TrainSet::new(all, &y, None).unwrap();
        let lead = TreeCountLead::new();
        let (led, followed) = std::thread::scope(|scope| {
            let f = scope.spawn(|| {
                follower.fit_binned_following(&all_set, &all_bins, &mut |_, _| {}, &lead, trees_for)
            });
            let valid = Validation {
                x: valid,
                y: &y[fit_n..],
            };
            let led =
                leader.fit_binned_leading(&fit_set, &fit_bins, Some(valid), &mut |_, _| {}, &lead);
            (led.unwrap(), f.join().unwrap().unwrap())
        });
        assert_eq!(lead.settled(), Some(led.n_trees()));
        let alone = GbdtParams {
            n_trees: trees_for(led.n_trees()),
            ..follower.clone()
        }
        .fit_binned(&all_set, &all_bins, None)
        .unwrap();
        (led, followed, alone)
    }

    #[test]
    fn a_following_fit_grows_the_model_its_count_would_grow_alone() {
        for objective in [Objective::L1, Objective::L2] {
            for trees_for in [
                &|b: usize| (b as f64 * 1.15).ceil() as usize,
                &|b: usize| b / 2 + 1,
            ] as [&(dyn Fn(usize) -> usize + Sync); 2]
            {
                let (led, followed, alone) = lead_and_follow(objective, trees_for);
                assert!(led.n_trees() < 400, "the leader stopped early");
                assert_eq!(followed.n_trees(), trees_for(led.n_trees()));
                assert_eq!(followed.trees, alone.trees, "{objective:?}");
                assert_eq!(followed.gain, alone.gain);
            }
        }
    }

    #[test]
    fn a_follower_of_a_failed_leader_stops_instead_of_waiting() {
        let n = 500;
        let (x, y) = data(n);
        let m = Matrix::new(&x, n, 3).unwrap();
        let other = Matrix::new(&x[..300], 100, 3).unwrap();
        let train = TrainSet::new(m, &y, None).unwrap();
        let params = GbdtParams {
            n_trees: 50,
            ..Default::default()
        };
        let (bins, wrong_bins) = (params.bin(m), params.bin(other));
        let lead = TreeCountLead::new();
        let followed = std::thread::scope(|scope| {
            let f = scope.spawn(|| {
                params.fit_binned_following(&train, &bins, &mut |_, _| {}, &lead, &|b| b + 3)
            });
            // bins of another matrix: the leader fails before its first tree
            let led = params.fit_binned_leading(&train, &wrong_bins, None, &mut |_, _| {}, &lead);
            assert!(led.is_err());
            f.join().unwrap().unwrap()
        });
        assert_eq!(lead.settled(), Some(0));
        assert_eq!(followed.n_trees(), 3);
    }
}
