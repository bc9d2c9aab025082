//! Convergence predictor: each curve family recovers known parameters from a labelled
//! synthetic curve; rising and falling metrics; bad input; the online state fed job events;
//! the registry round trip; and the
//! evaluation on the real bundled MLPerf v1.0 curves, where Augur must beat both
//! peers (asserted on the numbers this evaluation computes).

use std::sync::{Arc, OnceLock};

use augur_datasets::JobRecord;

use augur_predictor::convergence::*;
use augur_predictor::registry::Selector;
use augur_predictor::{
    JobEvent, JobQuery, ModelRegistry, NewArtifact, OnlinePredictor, PredictorError,
};

/// One shared predictor trained on the real data's training runs, and its evaluation.
fn trained() -> &'static (ConvergencePredictor, ConvergenceEvaluation) {
    static CELL: OnceLock<(ConvergencePredictor, ConvergenceEvaluation)> = OnceLock::new();
    CELL.get_or_init(|| {
        let runs = load_bundled_mlperf().expect("bundled MLPerf v1.0 data");
        train_and_evaluate_convergence(&runs, &ConvergenceTrainer::default()).expect("evaluation")
    })
}

fn evaluation() -> &'static ConvergenceEvaluation {
    &trained().1
}

fn predictor() -> &'static ConvergencePredictor {
    &trained().0
}

/// SYNTHETIC, labelled: a noise-free curve `y(k)` at k = 1..=n.
fn synthetic(n: usize, y: impl Fn(f64) -> f64) -> (Vec<f64>, Vec<f64>) {
    let k: Vec<f64> = (1..=n).map(|i| i as f64).collect();
    let v = k.iter().map(|&k| y(k)).collect();
    (k, v)
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs().max(1e-9)
}

#[test]
fn optimus_recovers_its_parameters() {
    let (a, b, c) = (0.05, 0.5, 0.2);
    let (k, v) = synthetic(40, |k| 1.0 / (a * k + b) + c);
    let fit = fit_family(CurveFamily::Optimus, &k, &v, Direction::Falling).unwrap();
    let FamilyParams::Optimus {
        a: fa,
        b: fb,
        c: fc,
    } = fit.params()
    else {
        panic!("wrong family params {:?}", fit.params());
    };
    assert!(
        close(fa, a, 0.02) && close(fb, b, 0.02) && close(fc, c, 0.02),
        "{fa} {fb} {fc}"
    );
    // extrapolation to twice the observed progress
    assert!(close(fit.value_at(80.0), 1.0 / (a * 80.0 + b) + c, 0.005));
}

#[test]
fn power_law_recovers_its_parameters_on_a_rising_metric() {
    let (c, s, d, alpha) = (0.9, 0.8, 2.0, 0.7);
    let (k, v) = synthetic(40, |k| c - s * (k + d).powf(-alpha));
    let fit = fit_family(CurveFamily::PowerLaw, &k, &v, Direction::Rising).unwrap();
    let FamilyParams::PowerLaw {
        c: fc,
        s: fs,
        d: fd,
        alpha: fa,
    } = fit.params()
    else {
        panic!("wrong family params");
    };
    assert!(close(fc, c, 0.02), "c {fc}");
    assert!(close(fa, alpha, 0.05), "alpha {fa}");
    assert!(close(fs, s, 0.05), "s {fs}");
    assert!(close(fd, d, 0.15), "d {fd}");
    assert!(close(
        fit.value_at(100.0),
        c - s * (100.0 + d).powf(-alpha),
        0.002
    ));
}

#[test]
fn exponential_recovers_its_parameters() {
    let (c, s, lambda) = (1.5, 3.0, 0.08);
    let (k, v) = synthetic(40, |k| c + s * (-lambda * k).exp());
    let fit = fit_family(CurveFamily::Exponential, &k, &v, Direction::Falling).unwrap();
    let FamilyParams::Exponential {
        c: fc,
        s: fs,
        lambda: fl,
    } = fit.params()
    else {
        panic!("wrong family params");
    };
    assert!(
        close(fc, c, 0.01) && close(fs, s, 0.01) && close(fl, lambda, 0.01),
        "{fc} {fs} {fl}"
    );
}

#[test]
fn log_power_recovers_its_parameters() {
    let (c, s, tau, alpha) = (0.76, 0.7, 12.0, 2.0);
    let (k, v) = synthetic(40, |k| c - s / (1.0 + (k / tau).powf(alpha)));
    let fit = fit_family(CurveFamily::LogPower, &k, &v, Direction::Rising).unwrap();
    let FamilyParams::LogPower {
        c: fc,
        s: fs,
        tau: ft,
        alpha: fa,
    } = fit.params()
    else {
        panic!("wrong family params");
    };
    assert!(close(fc, c, 0.02) && close(fs, s, 0.05), "{fc} {fs}");
    assert!(close(ft, tau, 0.05) && close(fa, alpha, 0.05), "{ft} {fa}");
}

#[test]
fn rising_and_falling_metrics_mirror() {
    // SYNTHETIC: a loss falling to 0.1 and the "accuracy" 1 − loss rising to 0.9
    let loss = |k: f64| 1.0 / (0.1 * k + 1.0) + 0.1;
    let (k, falling) = synthetic(30, loss);
    let rising: Vec<f64> = falling.iter().map(|v| 1.0 - v).collect();
    assert_eq!(Direction::infer(&falling), Direction::Falling);
    assert_eq!(Direction::infer(&rising), Direction::Rising);
    let down = CurveEnsemble::fit(&k, &falling, Direction::Falling).unwrap();
    let up = CurveEnsemble::fit(&k, &rising, Direction::Rising).unwrap();
    // the loss reaches 0.15 exactly where the accuracy reaches 0.85: k = 190
    let (Crossing::At(kd), Crossing::At(ku)) = (down.crossing(0.15), up.crossing(0.85)) else {
        panic!(
            "both should cross: {:?} {:?}",
            down.crossing(0.15),
            up.crossing(0.85)
        );
    };
    assert!(
        close(kd, 190.0, 0.05) && close(ku, 190.0, 0.05),
        "{kd} {ku}"
    );
    // a target past the asymptote is never reached; one already passed is reported so
    assert_eq!(down.crossing(0.05), Crossing::Never);
    assert_eq!(up.crossing(0.5), Crossing::Already);
    // Optimus keeps c ≥ 0 on a falling metric even when the data would pull it below
    let (k2, v2) = synthetic(20, |k| 2.0 / k - 0.05);
    let fit = fit_family(CurveFamily::Optimus, &k2, &v2, Direction::Falling).unwrap();
    assert!(fit.c >= 0.0);
}

#[test]
fn bad_input_gets_clear_errors() {
    let p = |t: f64, v: f64| CurvePoint {
        wall_time_s: t,
        epoch: None,
        samples: None,
        value: v,
    };
    let ctx = JobContext {
        benchmark: "resnet".into(),
        accelerators: Some(8),
        global_batch_size: Some(3264),
        accelerator_model: Some("NVIDIA A100-SXM4-80GB (400W)".into()),
    };
    let pred = predictor();
    let err = pred.predict(&ctx, &[]).unwrap_err();
    assert!(matches!(err, PredictorError::NoMetricPoints), "{err}");
    let err = pred
        .predict(&ctx, &[p(10.0, 0.3), p(20.0, f64::NAN)])
        .unwrap_err();
    assert!(
        err.to_string().contains("point 1: value is not finite"),
        "{err}"
    );
    let err = pred
        .predict(&ctx, &[p(10.0, 0.3), p(f64::INFINITY, 0.4)])
        .unwrap_err();
    assert!(err.to_string().contains("wall_time_s"), "{err}");
    let err = pred
        .predict(&ctx, &[p(10.0, 0.3), p(30.0, 0.4), p(20.0, 0.5)])
        .unwrap_err();
    assert!(
        matches!(err, PredictorError::PointsOutOfOrder { index: 2, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("before the previous point"),
        "{err}"
    );
    // a single point cannot be fitted ...
    let err = fit_family(CurveFamily::Optimus, &[1.0], &[0.3], Direction::Rising).unwrap_err();
    assert!(
        matches!(
            err,
            PredictorError::TooFewCurvePoints {
                need: 3,
                got: 1,
                ..
            }
        ),
        "{err}"
    );
    // ... but on a known benchmark the prior truncated at the elapsed time still answers
    let one = pred.predict(&ctx, &[p(600.0, 0.3)]).unwrap();
    assert!(one.curve.is_none());
    assert!(one.remaining_s > 0.0 && one.remaining_s.is_finite());
    assert!(one.remaining_lower_s <= one.remaining_s && one.remaining_s <= one.remaining_upper_s);
    // an unknown benchmark with one point has nothing to go on
    let unknown = JobContext {
        benchmark: "no-such-model".into(),
        ..ctx.clone()
    };
    let err = pred.predict(&unknown, &[p(600.0, 0.3)]).unwrap_err();
    assert!(err.to_string().contains("no-such-model"), "{err}");
}

#[test]
fn unknown_benchmark_converges_where_the_curve_stops_improving() {
    // SYNTHETIC loss curve of a model the predictor never saw: 1/(0.001 t + 1) + 0.2, still
    // falling fast after 30 minutes
    let pts: Vec<CurvePoint> = (1..=30)
        .map(|i| {
            let t = 60.0 * i as f64;
            CurvePoint {
                wall_time_s: t,
                epoch: Some(i as f64),
                samples: None,
                value: 1.0 / (0.001 * t + 1.0) + 0.2,
            }
        })
        .collect();
    let ctx = JobContext {
        benchmark: "my-new-model".into(),
        ..JobContext::default()
    };
    let p = predictor().predict(&ctx, &pts).unwrap();
    assert_eq!(p.basis, ConvergenceBasis::Plateau);
    assert!(p.target.is_none());
    assert!(p.remaining_s > 0.0 && p.total_s > 1800.0, "{p:?}");
    // the final metric is on the fitted curve, between the asymptote and the last value
    assert!(
        p.final_metric.0 > 0.2 && p.final_metric.0 < pts[29].value,
        "{p:?}"
    );
    // epochs keep their observed rate of one per minute
    let (epoch, _, _) = p.epoch.unwrap();
    assert!(close(epoch, p.total_s / 60.0, 0.01), "{epoch}");
}

#[test]
fn real_mlperf_evaluation_beats_both_peers() {
    let eval = evaluation();
    eprintln!(
        "train {} test {} train {:.1} s predict {:.0} µs",
        eval.n_train_runs, eval.n_test_runs, eval.train_s, eval.predict_us
    );
    for &prefix in &PREFIXES {
        let get = |m: &str| eval.score("all", prefix, m).unwrap().median_rel_error;
        let (augur, optimus, prior) = (get(METHOD_AUGUR), get(METHOD_OPTIMUS), get(METHOD_PRIOR));
        eprintln!("{prefix}: augur {augur:.3} optimus {optimus:.3} prior {prior:.3}");
        assert!(augur < optimus && augur < prior, "prefix {prefix}");
        let cov = eval
            .score("all", prefix, METHOD_AUGUR)
            .unwrap()
            .coverage
            .unwrap();
        assert!(cov > 0.5, "80% interval covers only {cov} at {prefix}");
    }
    // the required relative error at the 50% prefix
    let augur50 = eval
        .score("all", 0.5, METHOD_AUGUR)
        .unwrap()
        .median_rel_error;
    assert!(augur50 < 0.30, "{augur50}");
    // the prior peer reproduces its reference values to ±0.005, which checks the split:
    // successful runs by run start, 971 train / 243 test
    assert_eq!((eval.n_train_runs, eval.n_test_runs), (971, 243));
    for (prefix, reference) in PREFIXES.iter().zip([0.378, 0.569, 1.000]) {
        let got = eval
            .score("all", *prefix, METHOD_PRIOR)
            .unwrap()
            .median_rel_error;
        assert!(
            (got - reference).abs() <= 0.005,
            "prior peer {got} vs reference {reference}"
        );
    }
    // learned targets are MLPerf v1.0's quality targets (within the logs' rounding)
    let target = |b: &str| eval.targets.iter().find(|t| t.0 == b).map(|t| (t.1, t.2));
    let (d, t) = target("resnet").unwrap();
    assert_eq!(d, Direction::Rising);
    assert!((t - 0.759).abs() < 0.001, "{t}");
    let (d, t) = target("rnnt").unwrap();
    assert_eq!(d, Direction::Falling);
    assert!((t - 0.058).abs() < 0.001, "{t}");
}

#[test]
fn registry_round_trip_predicts_identically() {
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let pred = predictor();
    let meta = reg
        .save(pred, NewArtifact::new("mlperf", pred.n_train_runs))
        .unwrap();
    assert_eq!(meta.kind, "convergence");
    let (back, _): (ConvergencePredictor, _) = reg.load(Selector::Latest).unwrap();
    let eval = evaluation();
    for run in eval.test_runs.iter().take(20) {
        let k = prefix_len(run.points.len(), 0.5);
        let a = pred.predict(&run.context, &run.points[..k]).unwrap();
        let b = back.predict(&run.context, &run.points[..k]).unwrap();
        assert_eq!(a.remaining_s, b.remaining_s);
        assert_eq!(a.remaining_upper_s, b.remaining_upper_s);
    }
}

#[test]
fn pollux_final_metric_extrapolation_runs_on_the_real_curves() {
    let curves = load_bundled_pollux_curves().expect("bundled Pollux curves");
    assert!(curves.len() >= 30, "{}", curves.len());
    let rows = evaluate_final_metric(&curves);
    for r in &rows {
        eprintln!("{:.2} ({} curves)", r.prefix, r.curves);
        for (m, e) in &r.methods {
            eprintln!("   {m:<32} {e:.3}");
        }
        assert_eq!(r.curves, curves.len());
        assert!(r.methods.iter().all(|(_, e)| e.is_finite() && *e >= 0.0));
    }
    // with half the curve seen, the ensemble extrapolates the final metric better than
    // assuming the curve stops where it is
    let half = &rows[1];
    let get = |name: &str| {
        half.methods
            .iter()
            .find(|m| m.0.starts_with(name))
            .unwrap()
            .1
    };
    assert!(
        get("weighted ensemble") < get("last observed value"),
        "{half:?}"
    );
}

/// A running job's events as the service ingests them: a submit with its profile, a start,
/// and its accuracy points in two batches (times on the events' clock).
fn feed_run(online: &mut ConvergenceOnline, job: &JobRecord, start: f64, run: &ConvergenceRun) {
    let points: Vec<augur_predictor::contract::StepMetrics> = run
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| augur_predictor::contract::StepMetrics {
            step: i as u64,
            loss: None,
            accuracy: Some(p.value),
            at: Some(start + p.wall_time_s),
        })
        .collect();
    let (a, b) = points.split_at(points.len() / 2);
    let events = [
        JobEvent::Submitted { job },
        JobEvent::Started {
            job_id: &job.job_id,
            at: start,
        },
        JobEvent::MetricPoints {
            job_id: &job.job_id,
            points: a,
        },
        JobEvent::MetricPoints {
            job_id: &job.job_id,
            points: b,
        },
    ];
    for e in &events {
        assert!(online.observe(e).is_none(), "{e:?}");
    }
}

#[test]
fn online_state_estimates_a_running_job_from_its_events() {
    let (pred, eval) = trained();
    let run = eval
        .test_runs
        .iter()
        .find(|r| r.context.benchmark == "resnet" && r.points.len() >= 8)
        .expect("a resnet test run");
    let start = 1.7e9;
    let job = JobRecord {
        job_id: "train-1".into(),
        submit_time: start - 30.0,
        job_name: Some(run.context.benchmark.clone()),
        num_gpus: run.context.accelerators.map(|a| a as f64),
        gpu_type: run.context.accelerator_model.clone(),
        ..JobRecord::default()
    };
    let mut online = Arc::new(pred.clone()).online(3);
    feed_run(&mut online, &job, start, run);
    let query = JobQuery {
        job: &job,
        at: start,
    };
    let answer = online.predict(&query).unwrap();
    // the same estimate as the predictor's on the curve as the events told it
    let points: Vec<CurvePoint> = run
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| CurvePoint {
            wall_time_s: (start + p.wall_time_s) - start,
            epoch: Some(i as f64),
            samples: None,
            value: p.value,
        })
        .collect();
    let ctx = JobContext {
        global_batch_size: None,
        ..run.context.clone()
    };
    assert_eq!(answer.prediction, pred.predict(&ctx, &points).unwrap());
    assert_eq!((answer.model_version, answer.metric), (3, "accuracy"));
    assert_eq!(answer.points, run.points.len());
    assert_eq!(answer.calibration, "binned_conformal");
    let p = &answer.prediction;
    assert_eq!(
        (answer.interval.lower, answer.interval.upper),
        (p.remaining_lower_s, p.remaining_upper_s)
    );
    assert_eq!(answer.interval.coverage, 0.8);
    // what the service used to answer, plus the interval and its calibration
    let json = serde_json::to_value(&answer).unwrap();
    for key in [
        "model_version",
        "metric",
        "points",
        "remaining_s",
        "basis",
        "interval",
    ] {
        assert!(json.get(key).is_some(), "{key}: {json}");
    }
}

#[test]
fn online_state_refuses_jobs_it_cannot_read() {
    let pred = Arc::new(predictor().clone());
    let mut online = pred.online(1);
    let job = |id: &str| JobRecord {
        job_id: id.into(),
        job_name: Some("resnet".into()),
        ..JobRecord::default()
    };
    let ask = |online: &ConvergenceOnline, id: &str| {
        online
            .predict(&JobQuery {
                job: &job(id),
                at: 0.0,
            })
            .unwrap_err()
    };
    assert!(matches!(
        ask(&online, "nobody"),
        PredictorError::UnknownJob { .. }
    ));
    let point = |step: u64, at: Option<f64>| augur_predictor::contract::StepMetrics {
        step,
        loss: Some(1.0 / (step as f64 + 1.0)),
        accuracy: None,
        at,
    };
    // points but neither a submit nor a start: no clock to read them against
    online.observe(&JobEvent::MetricPoints {
        job_id: "orphan",
        points: &[point(1, Some(10.0))],
    });
    assert!(matches!(
        ask(&online, "orphan"),
        PredictorError::NoStartTime { .. }
    ));
    // submitted, but no point has a time
    let untimed = job("untimed");
    online.observe(&JobEvent::Submitted { job: &untimed });
    online.observe(&JobEvent::MetricPoints {
        job_id: "untimed",
        points: &[point(1, None), point(2, None)],
    });
    let err = ask(&online, "untimed");
    assert!(
        matches!(err, PredictorError::NoTimedPoints { metric: "loss", .. }),
        "{err}"
    );
    // a long curve keeps only its latest points
    let long = job("long");
    online.observe(&JobEvent::Submitted { job: &long });
    let pts: Vec<_> = (0..1500).map(|k| point(k, Some(k as f64))).collect();
    for chunk in pts.chunks(700) {
        online.observe(&JobEvent::MetricPoints {
            job_id: "long",
            points: chunk,
        });
    }
    let answer = online
        .predict(&JobQuery {
            job: &long,
            at: 0.0,
        })
        .unwrap();
    assert_eq!(answer.points, KEEP_POINTS);
    assert_eq!(answer.metric, "loss");
}
