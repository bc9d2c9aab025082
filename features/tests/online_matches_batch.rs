//! The online path (events fed one by one, as the service does) and the batch path (a
//! replay over a table, as training does) must give identical features on a real trace.

use augur_datasets::bundled::Dataset;
use augur_datasets::{JobRecord, ReadOptions};
use augur_features::{
    batch_features, FailureFeatureState, FailureSchema, FeatureSchema, FeatureState, JobHandle,
    TraceEvent,
};

fn online_features(jobs: &[JobRecord], schema: &FeatureSchema) -> Vec<f32> {
    let d = schema.len();
    let mut out = vec![0f32; jobs.len() * d];
    let mut state = FeatureState::new(schema.clone());
    let mut handles: Vec<Option<JobHandle>> = vec![None; jobs.len()];
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Submit { index, at } => {
                state
                    .features_for(&jobs[index], at, &mut out[index * d..(index + 1) * d])
                    .unwrap();
                handles[index] = Some(state.observe_submit(&jobs[index]));
            }
            TraceEvent::Finish { index, at } => {
                let j = &jobs[index];
                let h = handles[index].expect("finish after submit");
                state
                    .observe_finish(h, at, j.duration.unwrap(), j.status)
                    .unwrap();
            }
        }
    }
    out
}

/// The first `n` jobs of the bundled Philly trace.
fn philly_jobs(n: usize) -> Vec<JobRecord> {
    let (table, _) = Dataset::Philly.load(&ReadOptions::default()).unwrap();
    table.to_records().unwrap().into_iter().take(n).collect()
}

fn assert_same(a: &[f32], b: &[f32], d: usize, names: &[String]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let same = (x.is_nan() && y.is_nan()) || x == y;
        assert!(
            same,
            "row {} feature {}: batch {x} vs online {y}",
            i / d,
            names[i % d]
        );
    }
}

#[test]
fn philly_online_replay_equals_batch() {
    let jobs = philly_jobs(30_000);
    let schema = FeatureSchema::for_jobs(&jobs);
    assert!(schema.keys.len() >= 3, "{schema:?}");
    let batch = batch_features(&jobs, &schema);
    let online = online_features(&jobs, &schema);
    assert_same(&batch, &online, schema.len(), &schema.names());
    // and the features are not trivially empty: most jobs have VC history
    let d = schema.len();
    let names = schema.names();
    let vc_last1 = names
        .iter()
        .position(|n| n == "group:last1")
        .expect("philly has VC history");
    let with_history = (0..jobs.len())
        .filter(|i| !batch[i * d + vc_last1].is_nan())
        .count();
    assert!(with_history > jobs.len() / 2, "{with_history}");
}

#[test]
fn mira_online_replay_equals_batch() {
    let (table, _) = Dataset::Mira.load(&ReadOptions::default()).unwrap();
    let jobs = table.to_records().unwrap();
    let schema = FeatureSchema::for_jobs(&jobs);
    let names = schema.names();
    assert!(
        names.iter().any(|n| n.starts_with("user_req:")),
        "{names:?}"
    );
    let batch = batch_features(&jobs, &schema);
    let online = online_features(&jobs, &schema);
    assert_same(&batch, &online, schema.len(), &names);
}

/// The reads a feature state offers around a submit (the runtime's and the failure one's).
trait SubmitReads {
    fn len(&self) -> usize;
    fn at_submit(&mut self, job: &JobRecord, at: f64, out: &mut [f32]);
    fn submit(&mut self, job: &JobRecord) -> JobHandle;
    fn before(&self, job: &JobRecord, at: f64, own: Option<JobHandle>, out: &mut [f32]);
    fn plain(&self, job: &JobRecord, at: f64, out: &mut [f32]);
    fn finish(&mut self, h: JobHandle, job: &JobRecord, at: f64);
}

/// Implements [`SubmitReads`] for a state whose methods share the names; `$finish` applies
/// a job's end (the two states take its duration differently).
macro_rules! submit_reads {
    ($state:ty, $finish:expr) => {
        impl SubmitReads for $state {
            fn len(&self) -> usize {
                self.schema().len()
            }
            fn at_submit(&mut self, job: &JobRecord, at: f64, out: &mut [f32]) {
                self.features_for(job, at, out).unwrap();
            }
            fn submit(&mut self, job: &JobRecord) -> JobHandle {
                self.observe_submit(job)
            }
            fn before(&self, job: &JobRecord, at: f64, own: Option<JobHandle>, out: &mut [f32]) {
                self.features_before(job, at, own, out).unwrap();
            }
            fn plain(&self, job: &JobRecord, at: f64, out: &mut [f32]) {
                self.features_at(job, at, out).unwrap();
            }
            fn finish(&mut self, h: JobHandle, job: &JobRecord, at: f64) {
                let finish: fn(&mut $state, JobHandle, &JobRecord, f64) = $finish;
                finish(self, h, job, at);
            }
        }
    };
}

submit_reads!(FeatureState, |s, h, job, at| s
    .observe_finish(h, at, job.duration.unwrap(), job.status)
    .unwrap());
submit_reads!(FailureFeatureState, |s, h, job, at| s
    .observe_finish(h, at, job.duration, job.status)
    .unwrap());

/// Replays `jobs` through `state`: right after each submit, the read that leaves the job's
/// own submit out gives the features it was answered with at its submit, whether asked by
/// its handle or for a job submitted at that instant (which does not see the submits at
/// that instant); the plain read (which keeps its own submit) differs for every job.
fn assert_read_before_equals_at_submit(jobs: &[JobRecord], mut state: impl SubmitReads) {
    let d = state.len();
    let mut submits_at = std::collections::HashMap::new();
    for j in jobs {
        *submits_at.entry(j.submit_time.to_bits()).or_insert(0) += 1;
    }
    let mut handles: Vec<Option<JobHandle>> = vec![None; jobs.len()];
    let (mut want, mut got, mut plain) = (vec![0f32; d], vec![0f32; d], vec![0f32; d]);
    let (mut compared, mut plain_differs) = (0, 0);
    let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    for ev in TraceEvent::of_trace(jobs) {
        match ev {
            TraceEvent::Submit { index, at } => {
                let job = &jobs[index];
                state.at_submit(job, at, &mut want);
                let h = state.submit(job);
                handles[index] = Some(h);
                // jobs sharing their submit instant see each other at submit: not compared
                if submits_at[&at.to_bits()] > 1 {
                    continue;
                }
                state.before(job, at, Some(h), &mut got);
                assert!(same(&want, &got), "job {index} by its handle");
                state.before(job, at, None, &mut got);
                assert!(same(&want, &got), "job {index} as a profile at {at}");
                state.plain(job, at, &mut plain);
                plain_differs += usize::from(!same(&want, &plain));
                compared += 1;
            }
            TraceEvent::Finish { index, at } => {
                let h = handles[index].expect("finish after submit");
                state.finish(h, &jobs[index], at);
            }
        }
    }
    assert!(compared > jobs.len() / 2, "{compared} of {}", jobs.len());
    // the read that keeps the job's own submit differs for every job (its own submit is
    // at least in the cluster-wide history)
    assert_eq!(plain_differs, compared);
}

#[test]
fn the_read_before_a_submit_gives_the_features_at_submit() {
    let jobs = philly_jobs(20_000);
    let schema = FeatureSchema::for_jobs(&jobs);
    assert_read_before_equals_at_submit(&jobs, FeatureState::new(schema));
}

/// The same for the failure features (their hour counts of submits leave out the job's own
/// and those at its instant), on the bundled openb pods (they carry outcomes).
#[test]
fn the_failure_read_before_a_submit_gives_the_features_at_submit() {
    let (table, _) = Dataset::Openb.load(&ReadOptions::default()).unwrap();
    let jobs: Vec<JobRecord> = table.to_records().unwrap();
    assert_read_before_equals_at_submit(
        &jobs,
        FailureFeatureState::new(FailureSchema::for_jobs(&jobs)),
    );
}
