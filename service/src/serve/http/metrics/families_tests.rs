//! The metric families' tests: recording and encoding every family, the rolling windows,
//! the bounded group labels, and the module table against the registrations.

use super::*;

/// Parses the text format: (name with labels, value) per sample line; checks every
/// line is a comment, a sample, or the final `# EOF`.
fn parse(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "OpenMetrics ends with # EOF");
    for line in lines {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ")
                    || line.starts_with("# TYPE ")
                    || line.starts_with("# UNIT ")
                    || line == "# EOF",
                "bad comment line {line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').expect("sample has a value");
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        samples.push((name.to_string(), v));
    }
    samples
}

fn value(samples: &[(String, f64)], name: &str) -> Option<f64> {
    samples.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

#[test]
fn group_coverage_is_labelled_with_a_bounded_set_of_groups() {
    let m = Metrics::new();
    let job = |q: usize, gpus: f64| JobRecord {
        queue: Some(format!("p{q}")),
        num_gpus: Some(gpus),
        cpus: Some(4.0),
        ..Default::default()
    };
    // 12 partitions: the first 8 seen are named, the rest are `other`
    for q in 0..12 {
        m.observe_group_coverage("queue_wait", &job(q, 0.0), q % 2 == 0);
    }
    m.observe_group_coverage("runtime", &job(0, 2.0), false);
    let samples = parse(&m.encode().expect("encode"));
    let cov = |labels: &str| {
        value(
            &samples,
            &format!("augur_prediction_interval_coverage_by_group{{{labels}}}"),
        )
    };
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="partition",group="p0""#),
        Some(1.0)
    );
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="partition",group="p7""#),
        Some(0.0)
    );
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="partition",group="p8""#),
        None
    );
    // p8..p11: two hits, two misses
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="partition",group="other""#),
        Some(0.5)
    );
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="resource",group="cpu""#),
        Some(0.5)
    );
    assert_eq!(
        cov(r#"predictor="queue_wait",dimension="size",group="cpu 2-8""#),
        Some(0.5)
    );
    assert_eq!(
        cov(r#"predictor="runtime",dimension="size",group="gpu 2-8""#),
        Some(0.0)
    );
    let series = samples
        .iter()
        .filter(|(k, _)| k.starts_with("augur_prediction_interval_coverage_by_group"))
        .count();
    // queue wait: 8 named + other, cpu, cpu 2-8; runtime: p0, gpu, gpu 2-8
    assert_eq!(series, 11 + 3);
}

#[test]
fn records_and_encodes_every_family() {
    let m = Metrics::new();
    m.observe_http("/v1/predict/runtime", "POST", 200, 0.0004);
    m.observe_http("/v1/predict/runtime", "POST", 200, 0.0009);
    m.observe_prediction("runtime", 3, 5, 0.0002);
    let (h, c) = m.prediction_handles("runtime", 3);
    h.observe(0.0004);
    c.inc_by(2);
    m.observe_outcome("runtime", 100.0, Some(true));
    m.observe_outcome("runtime", 300.0, Some(false));
    m.observe_action("set_workers", "idle_gpus", "applied");
    m.set_cluster(0.75, 12, 40, 30);
    m.observe_tick(0.002);
    let samples = parse(&m.encode().expect("encode"));
    assert_eq!(
        value(&samples, "augur_live_tick_duration_seconds_count"),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_http_request_duration_seconds_count{route="/v1/predict/runtime",method="POST",status="200"}"#
        ),
        Some(2.0)
    );
    let sum = value(
        &samples,
        r#"augur_http_request_duration_seconds_sum{route="/v1/predict/runtime",method="POST",status="200"}"#,
    )
    .expect("sum");
    assert!((sum - 0.0013).abs() < 1e-9);
    assert_eq!(
        value(
            &samples,
            r#"augur_predictions_total{predictor="runtime",model_version="3"}"#
        ),
        Some(7.0)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_prediction_mae_seconds{predictor="runtime"}"#
        ),
        Some(200.0)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_prediction_interval_coverage{predictor="runtime"}"#
        ),
        Some(0.5)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_controller_actions_total{action="set_workers",reason="idle_gpus",outcome="applied"}"#
        ),
        Some(1.0)
    );
    assert_eq!(value(&samples, "augur_cluster_utilisation"), Some(0.75));
    assert_eq!(value(&samples, "augur_cluster_queue_length"), Some(12.0));
}

#[test]
fn rolling_accuracy_forgets_old_jobs() {
    let m = Metrics::new();
    for _ in 0..ROLLING {
        m.observe_outcome("runtime", 1000.0, Some(false));
    }
    for _ in 0..ROLLING {
        m.observe_outcome("runtime", 10.0, Some(true));
    }
    m.observe_outcome("runtime", f64::NAN, Some(true)); // ignored
    let samples = parse(&m.encode().expect("encode"));
    assert_eq!(
        value(
            &samples,
            r#"augur_prediction_mae_seconds{predictor="runtime"}"#
        ),
        Some(10.0)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_prediction_interval_coverage{predictor="runtime"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            r#"augur_prediction_outcomes_total{predictor="runtime"}"#
        ),
        Some(2.0 * ROLLING as f64)
    );
}

#[test]
fn the_module_table_lists_every_registered_family() {
    let table: Vec<&str> = include_str!("families.rs")
        .lines()
        .filter(|l| l.starts_with("//! | `"))
        .collect();
    // one sample in every family (an empty family is not encoded)
    let m = Metrics::new();
    m.observe_http("/v1/models", "GET", 200, 0.001);
    m.observe_prediction("runtime", 1, 1, 0.001);
    m.observe_outcome("runtime", 10.0, Some(true));
    m.observe_group_coverage("runtime", &JobRecord::default(), true);
    m.observe_action("set_workers", "idle_gpus", "applied");
    m.observe_retrain("manual", "succeeded", Some(3.0));
    m.observe_model_load_failure("runtime");
    m.set_first_start_training(["runtime"], &[]);
    m.set_cluster(0.5, 1, 2, 3);
    m.set_backend(&crate::serve::backends::health::BackendHealth {
        backend: "sim",
        up: true,
        detail: "running".into(),
    });
    m.observe_tick(0.001);
    m.observe_snapshot_load("loaded");
    m.observe_snapshot_write("written", Some((100, 7, 0.01, 0.02)));
    let text = m.encode().expect("encode");
    let mut families = 0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
        if name.starts_with("process_") {
            assert!(table.iter().any(|l| l.contains("`process_*`")));
            continue;
        }
        families += 1;
        // a counter's samples (the name users query) carry `_total`
        let sample = if kind == "counter" {
            format!("`{name}_total`")
        } else {
            format!("`{name}`")
        };
        assert!(
            table.iter().any(|l| l.contains(&sample)),
            "{sample} ({kind}) is registered but not in the table of serve/metrics/families.rs"
        );
    }
    // every family registered above was recorded into and checked
    let code = include_str!("families.rs")
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default();
    assert_eq!(families, code.matches("registered(").count(), "{text}");
}
