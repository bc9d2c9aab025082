//! The failure predictor on the bundled real traces: labels and censoring, calibration,
//! skill above the base rate, online == batch features, the online state's answers, and the
//! registry round trip.

use std::sync::Arc;

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, JobStatus, ReadOptions, TimeSplit};
use augur_features::failure::FAILURE_KEY_FEATURES;
use augur_features::{
    batch_features, failure_batch_features, failure_label, FailKey, FailureFeatureState,
    FailureSchema, JobHandle,
};
use augur_predictor::failure::{
    roc_auc, train_and_evaluate_failure, FailureMetrics, SvmScratch, METHOD_GBDT, METHOD_SVM,
};
use augur_predictor::{
    evaluate_failure, FailureEvaluation, FailurePredictor, FailureTrainer, JobEvent, JobQuery,
    ModelRegistry, NewArtifact, OnlinePredictor,
};

fn load(ds: Dataset) -> Vec<JobRecord> {
    let (table, _) = ds.load(&ReadOptions::default()).unwrap();
    table.to_records().unwrap()
}

#[test]
fn openb_censored_pods_are_never_labelled() {
    let jobs = load(Dataset::Openb);
    // the bundled pod list: Running and Pending pods are censored
    let censored = jobs
        .iter()
        .filter(|j| failure_label(j.status).is_none())
        .count();
    let failed = jobs
        .iter()
        .filter(|j| failure_label(j.status) == Some(true))
        .count();
    let ok = jobs
        .iter()
        .filter(|j| failure_label(j.status) == Some(false))
        .count();
    assert_eq!(
        (failed, ok, censored),
        (1870, 192, 5193 + 897),
        "openb pod_phase counts (Failed, Succeeded, Running + Pending)"
    );
    let eval = evaluate_failure(&jobs, &FailureTrainer::default()).unwrap();
    assert_eq!(eval.n_train + eval.n_test, failed + ok);
    assert_eq!(eval.n_censored, censored);
    assert_eq!(eval.test_labels.len(), eval.n_test);
    // the shared split: all jobs by submit time, the labelled ones of each part
    let submit: Vec<f64> = jobs.iter().map(|j| j.submit_time).collect();
    let split = TimeSplit::default_for(&submit);
    let labelled_test: Vec<bool> = split
        .test()
        .iter()
        .filter_map(|&i| failure_label(jobs[i].status))
        .collect();
    assert_eq!(eval.test_labels, labelled_test);
}

#[test]
fn mlperf_labels_follow_run_status() {
    let jobs = load(Dataset::Mlperf);
    let failed = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Failed)
        .count();
    let done = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Completed)
        .count();
    let unknown = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Unknown)
        .count();
    // runs.csv: 18 aborted + 4 abort + 2 fail; 1214 success; 1 run without run_stop
    assert_eq!((failed, done, unknown), (24, 1214, 1));
    assert!(jobs
        .iter()
        .filter(|j| j.status == JobStatus::Failed)
        .all(|j| failure_label(j.status) == Some(true)));
}

/// Online (events one by one) and batch failure features agree on a real trace, and the
/// runtime block of the failure features is exactly the runtime features.
#[test]
fn openb_online_failure_features_equal_batch() {
    let jobs = load(Dataset::Openb);
    let schema = FailureSchema::for_jobs(&jobs);
    assert!(schema.keys.contains(&FailKey::Queue), "{schema:?}");
    let d = schema.len();
    let batch = failure_batch_features(&jobs, &schema);
    let mut online = vec![0f32; jobs.len() * d];
    // the service's order: at each submit, first report every end known by then (oldest
    // first), then ask for the features, then record the submit
    let mut state = FailureFeatureState::new(schema.clone());
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[a]
            .submit_time
            .total_cmp(&jobs[b].submit_time)
            .then(a.cmp(&b))
    });
    let mut running: Vec<(f64, usize, JobHandle)> = Vec::new();
    for &i in &order {
        let now = jobs[i].submit_time;
        running.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        while running.last().is_some_and(|r| r.0 <= now) {
            let (end, j, h) = running.pop().unwrap();
            state
                .observe_finish(h, end, jobs[j].duration, jobs[j].status)
                .unwrap();
        }
        state
            .features_for(&jobs[i], now, &mut online[i * d..(i + 1) * d])
            .unwrap();
        let h = state.observe_submit(&jobs[i]);
        // every job with an end reports its outcome, with or without a run time
        if let Some(end) = augur_features::finish_time(&jobs[i]) {
            running.push((end, i, h));
        }
    }
    let names = schema.names();
    for (k, (a, b)) in batch.iter().zip(&online).enumerate() {
        assert!(
            (a.is_nan() && b.is_nan()) || a == b,
            "row {} {}: batch {a} vs online {b}",
            k / d,
            names[k % d]
        );
    }
    let runtime = batch_features(&jobs, &schema.base);
    let b = schema.base.len();
    for i in 0..jobs.len() {
        for f in 0..b {
            let (x, y) = (batch[i * d + f], runtime[i * b + f]);
            assert!((x.is_nan() && y.is_nan()) || x == y, "row {i} feature {f}");
        }
    }
    // the failure histories are informative: most pods after the first day have a queue rate
    let col = schema
        .index_of(FailKey::Queue, FAILURE_KEY_FEATURES[0])
        .unwrap();
    let with_history = (0..jobs.len())
        .filter(|&i| batch[i * d + col] > 0.0)
        .count();
    assert!(with_history * 2 > jobs.len(), "{with_history}");
}

fn row<'a>(eval: &'a FailureEvaluation, method: &str) -> &'a FailureMetrics {
    &eval
        .rows
        .iter()
        .find(|r| r.method == method)
        .unwrap()
        .metrics
}

/// Trains the predictor on the shared split's training jobs and scores it on the test jobs.
fn train_and_score(jobs: &[JobRecord]) -> (FailurePredictor, FailureEvaluation) {
    train_and_evaluate_failure(jobs, &FailureTrainer::default()).unwrap()
}

fn print_rows(eval: &FailureEvaluation) {
    for row in &eval.rows {
        let r = &row.metrics;
        eprintln!(
            "{:<45} auc {:.3} {:?} pr {:.3} r@10 {:.3} brier {:.4} ece {:.3}",
            row.method, r.roc_auc, r.roc_auc_95, r.pr_auc, r.recall_at_10fpr, r.brier, r.ece
        );
    }
}

#[test]
fn models_beat_the_base_rate_on_openb() {
    let jobs = load(Dataset::Openb);
    let (p, eval) = train_and_score(&jobs);
    // a calibration slice with both classes well represented: no cross-fitting
    assert!(!eval.training.cross_fitted);
    print_rows(&eval);
    eprintln!(
        "base train {:.3} test {:.3} served {:?} val {:?} cal {} / {}",
        eval.base_rate_train,
        eval.base_rate_test,
        eval.served,
        eval.validation_auc,
        eval.gbdt_calibration,
        eval.svm_calibration
    );
    for m in [METHOD_GBDT, METHOD_SVM] {
        let r = row(&eval, m);
        // a real margin: the lower end of the bootstrap interval is above chance
        let (lo, _) = r.roc_auc_95.expect("bootstrap interval");
        assert!(r.roc_auc > 0.6 && lo > 0.5, "{m}: {r:?}");
        // and better than predicting the base rate for everyone
        assert!(
            r.pr_auc > eval.base_rate_test,
            "{m}: PR-AUC {} vs base rate {}",
            r.pr_auc,
            eval.base_rate_test
        );
        assert!(r.brier < row(&eval, augur_predictor::failure::METHOD_BASE_RATE).brier);
    }
    // calibrated probabilities are probabilities and monotone in the score
    for mp in &eval.test_probs {
        assert!(
            mp.probs.iter().all(|p| (0.0..=1.0).contains(p)),
            "{}",
            mp.method
        );
    }
    let (g, s) = p.calibrators();
    for c in [g, s] {
        let mut prev = 0.0;
        for k in -200..=200 {
            let v = c.probability(f64::from(k) / 20.0);
            assert!((0.0..=1.0).contains(&v) && v >= prev, "{c:?}");
            prev = v;
        }
    }
}

#[test]
fn mlperf_rare_failures_evaluate() {
    let jobs = load(Dataset::Mlperf);
    let (p, eval) = train_and_score(&jobs);
    print_rows(&eval);
    eprintln!(
        "base train {:.3} test {:.3} ({} failed) served {:?} val {:?}",
        eval.base_rate_train,
        eval.base_rate_test,
        eval.failed_test,
        eval.served,
        eval.validation_auc
    );
    // about 2% positives in both periods: the rare-class case
    assert!(eval.base_rate_train > 0.01 && eval.base_rate_train < 0.04);
    assert!(eval.failed_test >= 3);
    let r = row(&eval, METHOD_GBDT);
    assert!(r.roc_auc.is_finite() && r.brier.is_finite());
    // the newest 20% of the training period holds a single failed run: too few to fit a
    // calibration slope, so the calibrators also see forward-chained out-of-fold scores
    assert!(eval.training.cross_fitted);
    assert!(
        eval.training.calibration_failed >= 10,
        "{:?}",
        eval.training
    );
    assert!(eval.training.calibration_jobs > eval.n_train / 2);
    let (g, s) = p.calibrators();
    for c in [g, s] {
        if let augur_predictor::Calibrator::Platt { a, .. } = c {
            assert!(*a >= 0.0, "{c:?}");
        }
    }
    for mp in &eval.test_probs {
        assert!(
            mp.probs.iter().all(|p| (0.0..=1.0).contains(p)),
            "{}",
            mp.method
        );
    }
}

#[test]
fn failure_predictor_registry_round_trip() {
    let jobs = load(Dataset::Openb);
    let (p, eval) = train_and_score(&jobs);
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let meta = reg
        .save(&p, NewArtifact::new("openb", eval.n_train))
        .unwrap();
    assert_eq!(meta.kind, "failure");
    let (back, meta2) = reg
        .load::<augur_predictor::FailurePredictor>(augur_predictor::registry::Selector::Latest)
        .unwrap();
    assert_eq!(meta2.version, meta.version);
    // identical predictions on every job's features after the round trip
    let schema = p.schema.clone();
    let x = failure_batch_features(&jobs, &schema);
    let d = schema.len();
    let (mut s1, mut s2) = (SvmScratch::default(), SvmScratch::default());
    let mut scores = Vec::new();
    let mut labels = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let a = p.predict_row(&x[i * d..(i + 1) * d], &mut s1);
        let b = back.predict_row(&x[i * d..(i + 1) * d], &mut s2);
        assert_eq!(a, b, "job {i}");
        if let Some(l) = failure_label(j.status) {
            scores.push(a.probability);
            labels.push(l);
        }
    }
    // in-sample sanity: the served model ranks failures above successes
    assert!(roc_auc(&scores, &labels) > 0.6);
}

/// A Philly `cluster_job_log` (the form with a status; hand-written fixture of the reader's
/// tests): Pass and Killed are not failures, Failed is, and a job whose last attempt has no
/// end was still running when the log was taken — censored, whatever its status says.
#[test]
fn philly_joblog_statuses_map_to_failure_labels() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../datasets/tests/fixtures/philly_cluster_job_log.json");
    let (table, _) = augur_datasets::load_jobs(
        &path,
        Some(augur_datasets::TraceFormat::PhillyJobLog),
        &ReadOptions::default(),
    )
    .unwrap();
    let labels: Vec<(String, Option<bool>)> = table
        .to_records()
        .unwrap()
        .into_iter()
        .map(|j| (j.job_id.clone(), failure_label(j.status)))
        .collect();
    let label_of = |id: &str| {
        labels
            .iter()
            .find(|(j, _)| j == id)
            .map(|(_, l)| *l)
            .unwrap_or_else(|| panic!("{id} not read: {labels:?}"))
    };
    assert_eq!(label_of("application_1500000000000_0001"), Some(false)); // Pass
    assert_eq!(label_of("application_1500000000000_0002"), Some(false)); // Killed
    assert_eq!(label_of("application_1500000000000_0003"), Some(true)); // Failed
    assert_eq!(label_of("application_1500000000000_0008"), Some(false)); // Pass, ended
                                                                         // Pass, but the last attempt has no end: still running, censored
    assert_eq!(label_of("application_1500000000000_0005"), None);
}

/// The online state fed the trace's events in the service's order (at each submit, first
/// every end known by then, oldest first) issues at each submit exactly the prediction of
/// the job's batch features; answers carry the model version and the served calibration.
#[test]
fn online_state_answers_at_submit_as_the_batch_features_predict() {
    let jobs = load(Dataset::Openb);
    let (p, _) = train_and_score(&jobs);
    let x = failure_batch_features(&jobs, &p.schema);
    let d = p.schema.len();
    let p = Arc::new(p);
    let mut online = Arc::clone(&p).online(7);
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[a]
            .submit_time
            .total_cmp(&jobs[b].submit_time)
            .then(a.cmp(&b))
    });
    let mut submits_at = std::collections::HashMap::new();
    for j in &jobs {
        *submits_at.entry(j.submit_time.to_bits()).or_insert(0) += 1;
    }
    let mut compared = 0;
    let mut running: Vec<(f64, usize)> = Vec::new();
    let mut scratch = SvmScratch::default();
    for &i in &order {
        let now = jobs[i].submit_time;
        running.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        while running.last().is_some_and(|r| r.0 <= now) {
            let (end, j) = running.pop().unwrap();
            let finished = JobEvent::Finished {
                job_id: &jobs[j].job_id,
                at: end,
                status: jobs[j].status,
                duration: jobs[j].duration,
            };
            assert!(online.observe(&finished).is_none());
        }
        // a query before the submit sees the same state the submit's answer is made from
        // (a query at an instant leaves out the submits at that instant, which the second
        // of two same-instant submits saw: those are not compared)
        let asked = online.predict(&JobQuery {
            job: &jobs[i],
            at: now,
        });
        let issued = online
            .observe(&JobEvent::Submitted { job: &jobs[i] })
            .unwrap()
            .unwrap();
        if submits_at[&now.to_bits()] == 1 {
            assert_eq!(asked.unwrap(), issued, "job {i}");
            compared += 1;
        }
        let want = p.predict_row(&x[i * d..(i + 1) * d], &mut scratch);
        assert_eq!(issued.probability, want.probability, "job {i}");
        assert_eq!(online.issued(&jobs[i].job_id), Some(issued));
        assert_eq!(issued.model_version, 7);
        assert_eq!(issued.model, p.served.name());
        assert!(["platt", "isotonic"].contains(&issued.calibration));
        if let Some(end) = augur_features::finish_time(&jobs[i]) {
            running.push((end, i));
        }
    }
    assert!(compared > jobs.len() / 2, "{compared} of {}", jobs.len());
    // a second submit of a known job is ignored, not answered again
    let again = JobEvent::Submitted {
        job: &jobs[order[0]],
    };
    assert!(online.observe(&again).is_none());
}

/// A finish without a duration counts the time since the job's start; a second start and
/// a second finish change nothing.
#[test]
fn online_state_takes_run_time_from_start_to_finish() {
    let jobs = load(Dataset::Openb);
    let (p, _) = train_and_score(&jobs);
    let p = Arc::new(p);
    let job = |id: &str, submit: f64| JobRecord {
        job_id: id.to_string(),
        submit_time: submit,
        user: Some("u".into()),
        ..jobs[0].clone()
    };
    let (a, b, c) = (job("a", 1e9), job("b", 1e9 + 10.0), job("c", 1e9 + 500.0));
    // the same story told with the run time given, and with start and finish only
    let feed = |with_duration: bool| {
        let mut online = Arc::clone(&p).online(1);
        online.observe(&JobEvent::Submitted { job: &a });
        online.observe(&JobEvent::Submitted { job: &b });
        online.observe(&JobEvent::Started {
            job_id: "a",
            at: 1e9 + 20.0,
        });
        online.observe(&JobEvent::Started {
            job_id: "a",
            at: 1e9 + 90.0,
        });
        for _ in 0..2 {
            online.observe(&JobEvent::Finished {
                job_id: "a",
                at: 1e9 + 120.0,
                status: JobStatus::Failed,
                duration: with_duration.then_some(100.0),
            });
        }
        online
            .observe(&JobEvent::Submitted { job: &c })
            .unwrap()
            .unwrap()
    };
    assert_eq!(feed(true), feed(false));
    // the failure was learned: a fresh state without it answers differently
    let mut fresh = Arc::clone(&p).online(1);
    fresh.observe(&JobEvent::Submitted { job: &a });
    fresh.observe(&JobEvent::Submitted { job: &b });
    let without = fresh
        .observe(&JobEvent::Submitted { job: &c })
        .unwrap()
        .unwrap();
    assert_ne!(feed(true).probability, without.probability);
}
