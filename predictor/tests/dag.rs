//! DAG job model: topological order and critical path on hand-built DAGs, cycles as clear
//! errors, the GRU learning a sequence dependency a per-stage model cannot, seeded
//! determinism, a registry round trip and the online state.

use std::collections::BTreeMap;
use std::sync::Arc;

use augur_datasets::dag::{critical_path, DagJob, DagStage};
use augur_datasets::JobRecord;
use augur_models::gbdt::{GbdtParams, Objective};
use augur_models::gru::{GruParams, Sequence};
use augur_models::{Fit, Matrix, Predict, TrainSet};
use augur_predictor::dag::{
    critical_path_ordered, evaluate_dag, group_folds, DagEncoder, DagPredictor, DagTrainer,
    STAGE_FEATURES,
};
use augur_predictor::registry::{ModelRegistry, NewArtifact};
use augur_predictor::{JobEvent, JobQuery, OnlinePredictor, PredictorError};

/// A hand-built job: stage `i` has `parents[i]`, kind `kinds[i]`, `durations[i]` seconds.
fn job(id: &str, parents: &[&[usize]], kinds: &[&str], durations: &[f64]) -> DagJob {
    let stages: Vec<DagStage> = parents
        .iter()
        .enumerate()
        .map(|(i, ps)| DagStage {
            id: format!("s{i}"),
            name: format!("{}_{i}", kinds[i]),
            kind: Some(kinds[i].to_string()),
            num_tasks: 1 + i as u32,
            parents: ps.to_vec(),
            duration_s: Some(durations[i]),
            task_durations_s: Vec::new(),
            waves: BTreeMap::new(),
            resources: None,
        })
        .collect();
    let edges = stages
        .iter()
        .enumerate()
        .flat_map(|(c, s)| s.parents.iter().map(move |&p| (p, c)))
        .collect();
    DagJob {
        id: id.to_string(),
        family: "wfcommons".into(),
        name: "handmade".into(),
        scale: None,
        executors: None,
        stages,
        edges,
        recorded_makespan_s: None,
        source_file: "test".into(),
        meta: BTreeMap::new(),
    }
}

#[test]
fn topological_order_and_critical_path_on_hand_built_dags() {
    // stages listed children-first: 3 ← {1, 2} ← 0 (a diamond), 4 independent
    //   0 (2 s) → 1 (5 s) → 3 (3 s)
    //   0       → 2 (1 s) → 3
    //   4 (7 s)
    let parents: &[&[usize]] = &[&[1, 2], &[4], &[4], &[], &[]];
    // (indices renamed so that file order is not a topological order)
    let j = job(
        "diamond",
        parents,
        &["join", "left", "right", "alone", "root"],
        &[3.0, 5.0, 1.0, 7.0, 2.0],
    );
    let enc = DagEncoder::fit(&[], 16).encode(&j).unwrap();
    // every stage comes after its parents
    let pos: Vec<usize> = (0..5)
        .map(|i| enc.order.iter().position(|&o| o == i).unwrap())
        .collect();
    for (i, ps) in parents.iter().enumerate() {
        for &p in ps.iter() {
            assert!(pos[p] < pos[i], "stage {i} placed before its parent {p}");
        }
    }
    // ties by file index: the two sources 3 and 4 first, in index order
    assert_eq!(enc.order, vec![3, 4, 1, 2, 0]);
    // depth / height / fan-in / fan-out of the join stage (position 4)
    let col = |name: &str| STAGE_FEATURES.iter().position(|&f| f == name).unwrap();
    let join = enc.row(4);
    assert_eq!(join[col("depth")], 2.0);
    assert_eq!(join[col("height")], 0.0);
    assert_eq!(join[col("fan_in")], 2.0);
    assert_eq!(join[col("fan_out")], 0.0);
    let root = enc.row(1);
    assert_eq!(root[col("fan_out")], 2.0);
    assert_eq!(root[col("height")], 2.0);

    // critical path: root 2 + left 5 + join 3 = 10 beats alone 7
    assert_eq!(j.critical_path_s(), Some(10.0));
    let secs: Vec<f64> = enc
        .order
        .iter()
        .map(|&i| j.stages[i].duration_s.unwrap())
        .collect();
    assert_eq!(critical_path_ordered(&enc.parents, &secs), 10.0);
    // making the independent stage longer moves the critical path onto it
    let mut longer = j.clone();
    longer.stages[3].duration_s = Some(11.0);
    assert_eq!(longer.critical_path_s(), Some(11.0));
    // a chain sums, an empty DAG is 0
    assert_eq!(
        critical_path(&[vec![], vec![0], vec![1]], &[1.0, 2.0, 3.0]),
        Ok(6.0)
    );
    assert_eq!(critical_path(&[], &[]), Ok(0.0));
}

#[test]
fn a_cycle_is_a_clear_error_not_a_panic() {
    // 0 → 1 → 2 → 1
    let j = job(
        "loopy",
        &[&[], &[0, 2], &[1]],
        &["a", "b", "c"],
        &[1.0, 1.0, 1.0],
    );
    let err = DagEncoder::fit(&[], 16).encode(&j).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PredictorError::DagShape { .. }), "{err:?}");
    assert!(msg.contains("loopy") && msg.contains("cycle"), "{msg}");
    // an unknown parent too
    let j = job("dangling", &[&[], &[7]], &["a", "b"], &[1.0, 1.0]);
    let msg = DagEncoder::fit(&[], 16).encode(&j).unwrap_err().to_string();
    assert!(
        msg.contains("dangling") && msg.contains("parent 7"),
        "{msg}"
    );
}

/// Tiny deterministic generator for the synthetic sequences.
struct Lcg(u64);
impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SYNTHETIC data (generated here, not a trace): each step has one feature `x_t ~ U(0, 1)`
/// and target `y_t = 3·x_{t−1}` (0 for the first step) — it depends only on the previous
/// step, which a per-step model cannot see.
fn synthetic_lag_sequences(n: usize, len: usize, seed: u64) -> (Vec<Sequence>, Vec<Vec<f64>>) {
    let mut rng = Lcg(seed);
    let mut seqs = Vec::new();
    let mut ys = Vec::new();
    for _ in 0..n {
        let x: Vec<f32> = (0..len).map(|_| rng.unit() as f32).collect();
        let y: Vec<f64> = (0..len)
            .map(|t| {
                if t == 0 {
                    0.0
                } else {
                    3.0 * f64::from(x[t - 1])
                }
            })
            .collect();
        seqs.push(Sequence {
            x,
            tokens: vec![Vec::new(); len],
        });
        ys.push(y);
    }
    (seqs, ys)
}

fn small_gru(seed: u64) -> GruParams {
    GruParams {
        hidden: 16,
        head: 16,
        n_buckets: 4,
        epochs: 40,
        batch_size: 16,
        learning_rate: 1e-2,
        seed,
        ..GruParams::default()
    }
}

#[test]
fn gru_learns_a_sequence_dependency_a_per_stage_model_cannot() {
    let (train, ytrain) = synthetic_lag_sequences(240, 8, 1);
    let (test, ytest) = synthetic_lag_sequences(60, 8, 2);
    let model = small_gru(7).fit(&train, &ytrain).unwrap();
    let gru_mae = model.loss(&test, &ytest).unwrap();

    // per-step GBDT on the step's own feature
    let xs: Vec<f32> = train.iter().flat_map(|s| s.x.iter().copied()).collect();
    let yflat: Vec<f64> = ytrain.iter().flatten().copied().collect();
    let gbdt = GbdtParams {
        objective: Objective::L1,
        n_trees: 200,
        ..GbdtParams::default()
    }
    .fit(&TrainSet::new(Matrix::new(&xs, yflat.len(), 1).unwrap(), &yflat, None).unwrap())
    .unwrap();
    let (mut err, mut n) = (0.0, 0);
    for (s, y) in test.iter().zip(&ytest) {
        for (x, yv) in s.x.iter().zip(y) {
            err += (gbdt.predict_row(&[*x]) - yv).abs();
            n += 1;
        }
    }
    let gbdt_mae = err / n as f64;
    // the per-step model cannot do better than the spread of 3·U(0,1) (≈ 0.75 mean
    // absolute deviation); the GRU reads the previous step
    assert!(gbdt_mae > 0.6, "per-step GBDT MAE {gbdt_mae:.3}");
    assert!(
        gru_mae < 0.4 * gbdt_mae,
        "GRU MAE {gru_mae:.3} vs per-step GBDT {gbdt_mae:.3}"
    );
}

#[test]
fn gru_training_is_deterministic_with_a_seed() {
    let (train, ytrain) = synthetic_lag_sequences(64, 6, 3);
    let params = GruParams {
        epochs: 5,
        ..small_gru(11)
    };
    let a = params.fit(&train, &ytrain).unwrap();
    let b = params.fit(&train, &ytrain).unwrap();
    let pa = a.predict(&train[0]).unwrap();
    let pb = b.predict(&train[0]).unwrap();
    assert_eq!(pa, pb, "same seed, same data: identical predictions");
    assert_eq!(a, b, "identical weights");
    let c = GruParams {
        seed: 12,
        ..params.clone()
    }
    .fit(&train, &ytrain)
    .unwrap();
    assert_ne!(
        c.predict(&train[0]).unwrap(),
        pa,
        "another seed, another model"
    );
}

#[test]
fn group_folds_are_seeded_and_keep_groups_whole() {
    let groups: Vec<String> = (0..22).map(|q| format!("q{}", q + 1)).collect();
    let a = group_folds(&groups, 5, 2026);
    let b = group_folds(&groups, 5, 2026);
    assert_eq!(a, b);
    assert_ne!(a, group_folds(&groups, 5, 1));
    let mut sizes = [0usize; 5];
    for f in a.values() {
        sizes[*f] += 1;
    }
    assert_eq!(sizes, [5, 5, 4, 4, 4]);
}

/// SYNTHETIC jobs (generated here): chains and fan-outs whose stage kinds set their run
/// time; enough to train and evaluate the whole pipeline quickly.
fn synthetic_jobs(n: usize) -> Vec<DagJob> {
    let mut rng = Lcg(5);
    (0..n)
        .map(|k| {
            let width = 2 + k % 3;
            let mut parents: Vec<Vec<usize>> = vec![vec![]];
            let mut kinds = vec!["split"];
            for _ in 0..width {
                parents.push(vec![0]);
                kinds.push("work");
            }
            parents.push((1..=width).collect());
            kinds.push("merge");
            let durations: Vec<f64> = kinds
                .iter()
                .map(|kd| {
                    let base = match *kd {
                        "split" => 5.0,
                        "work" => 60.0,
                        _ => 20.0,
                    };
                    base * (0.8 + 0.4 * rng.unit())
                })
                .collect();
            let ps: Vec<&[usize]> = parents.iter().map(Vec::as_slice).collect();
            let mut j = job(&format!("job{k}"), &ps, &kinds, &durations);
            j.recorded_makespan_s = Some(1.3 * j.critical_path_s().unwrap());
            j
        })
        .collect()
}

#[test]
fn predictor_trains_evaluates_and_round_trips_through_the_registry() {
    let jobs = synthetic_jobs(24);
    let trainer = DagTrainer {
        gru: small_gru(3),
        ..DagTrainer::default()
    }
    .with_epochs(15);
    let groups: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    let model: DagPredictor = trainer.fit("synthetic", &jobs, &groups).unwrap();
    let p = model.predict(&jobs[0]).unwrap();
    assert_eq!(p.stage_seconds.len(), jobs[0].stages.len());
    assert!(p.makespan_s.is_finite() && p.makespan_s > 0.0);
    // the work stages are predicted slower than the split stage
    assert!(
        p.stage_seconds[1] > 2.0 * p.stage_seconds[0],
        "{:?}",
        p.stage_seconds
    );

    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::open(dir.path()).unwrap();
    let meta = reg
        .save(&model, NewArtifact::new("synthetic", jobs.len()))
        .unwrap();
    assert_eq!(meta.kind, "dag");
    let (loaded, _): (DagPredictor, _) = reg.load_latest().unwrap();
    assert_eq!(loaded.predict(&jobs[0]).unwrap(), p);

    // served online: the same prediction with the model version; events teach it nothing,
    // and a job query (a profile, no stages) is refused with a clear error
    let mut online = Arc::new(loaded).online(4);
    let answer = online.predict_dag(&jobs[0]).unwrap();
    assert_eq!(answer.model_version, 4);
    assert_eq!(
        (
            answer.makespan_s,
            answer.critical_path_s,
            &answer.stage_seconds
        ),
        (p.makespan_s, p.critical_path_s, &p.stage_seconds)
    );
    let record = JobRecord {
        job_id: "job0".into(),
        ..JobRecord::default()
    };
    assert!(online
        .observe(&JobEvent::Submitted { job: &record })
        .is_none());
    let err = online
        .predict(&JobQuery {
            job: &record,
            at: 0.0,
        })
        .unwrap_err();
    assert!(matches!(err, PredictorError::NoDagStages { .. }), "{err}");

    // grouped evaluation: every job predicted once, by models that never saw it
    let eval = evaluate_dag("synthetic", &jobs, &groups, &trainer, &mut |_, _| {}).unwrap();
    assert_eq!(eval.jobs, jobs.len());
    assert_eq!(eval.rows.len(), 6);
    let model_row = &eval.rows[eval.model_row];
    assert!(model_row.metrics.makespan_mae_log < 0.3, "{model_row:?}");
    // a cyclic job in the evaluation set is an error naming it
    let mut bad = jobs.clone();
    bad[3].stages[0].parents = vec![bad[3].stages.len() - 1];
    let err = evaluate_dag("synthetic", &bad, &groups, &trainer, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("job3"), "{err}");
}
