//! The controller over a mocked backend (asserting each request it makes, in the spirit of
//! kube-rs controller tests) and over the simulator.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use augur_autoscaler::backend::{Action, ClusterBackend, ClusterState, JobId, QueuedJob};
use augur_autoscaler::sim::{ClusterSpec, SimConfig, SimJob, Simulator};
use augur_autoscaler::{BackendError, Controller, ErrorKind, Fifo, NodeInfo};

/// Runs a future whose backend never really waits.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A backend with two queued jobs on one 8-GPU node, failing as scripted.
struct Mock {
    /// Errors to return for the next actions, in order (then Ok).
    script: Vec<ErrorKind>,
    calls: Vec<Action>,
}

impl ClusterBackend for Mock {
    fn observe(&mut self) -> impl Future<Output = Result<ClusterState, BackendError>> + Send {
        let queued = |id: u64, t: f64| QueuedJob {
            id: JobId(id),
            submitted: t,
            queued_since: t,
            requested: 4,
            min_workers: 4,
            max_workers: 4,
            attained_gpu_s: 0.0,
            run_s: 0.0,
            progress_s: None,
            predicted_runtime: None,
            oracle_remaining_s: None,
            gpu_type: None,
            type_open: true,
        };
        std::future::ready(Ok(ClusterState {
            time: 100.0,
            gpu_types: vec![],
            nodes: vec![NodeInfo {
                name: "n0".into(),
                gpu_type: 0,
                rack: 0,
                gpus: 8,
                free: 8,
                healthy: true,
            }],
            queued: vec![queued(1, 0.0), queued(2, 1.0)],
            ..Default::default()
        }))
    }
    fn admit(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.calls.push(Action::Admit {
            job,
            workers,
            gpu_type: None,
        });
        let r = if self.script.is_empty() {
            Ok(())
        } else {
            Err(BackendError::new(
                self.script.remove(0),
                Some(job),
                "scripted",
            ))
        };
        std::future::ready(r)
    }
    fn set_workers(
        &mut self,
        job: JobId,
        workers: u32,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.calls.push(Action::SetWorkers { job, workers });
        std::future::ready(Ok(()))
    }
    fn suspend(&mut self, job: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        self.calls.push(Action::Suspend { job });
        std::future::ready(Ok(()))
    }
}

#[test]
fn retryable_errors_are_retried_and_permanent_ones_stop_the_batch() {
    // a conflict then success on job 1, then job 2 admitted
    let mut b = Mock {
        script: vec![ErrorKind::Conflict],
        calls: vec![],
    };
    let mut c = Controller::new(Fifo::default());
    let r = block_on(c.reconcile(&mut b)).unwrap();
    let admit = |j, w| Action::Admit {
        job: JobId(j),
        workers: w,
        gpu_type: None,
    };
    assert_eq!(b.calls, vec![admit(1, 4), admit(1, 4), admit(2, 4)]);
    assert_eq!((r.applied, r.retries, r.failed.is_none()), (2, 1, true));
    assert_eq!(c.log().len(), 2);

    // a permanent error on job 1: not retried, job 2 (planned on job 1's outcome) not tried
    let mut b = Mock {
        script: vec![ErrorKind::NotFound],
        calls: vec![],
    };
    let mut c = Controller::new(Fifo::default());
    let r = block_on(c.reconcile(&mut b)).unwrap();
    assert_eq!(b.calls, vec![admit(1, 4)]);
    assert_eq!((r.applied, r.skipped), (0, 1));
    assert_eq!(r.failed.map(|f| f.1.kind), Some(ErrorKind::NotFound));
    assert!(c.log()[0].error.is_some());

    // retries are bounded
    let mut b = Mock {
        script: vec![ErrorKind::Unavailable; 5],
        calls: vec![],
    };
    let mut c = Controller::new(Fifo::default());
    let r = block_on(c.reconcile(&mut b)).unwrap();
    assert_eq!(b.calls.len(), 3);
    assert_eq!(r.failed.map(|f| f.1.is_retryable()), Some(true));
    assert!(!ErrorKind::Invalid.is_retryable() && ErrorKind::NoCapacity.is_retryable());
}

#[test]
fn the_controller_drives_the_simulator_as_a_backend() {
    let jobs: Vec<SimJob> = (0..6)
        .map(|i| SimJob {
            row: i,
            submit: i as f64 * 50.0,
            duration: 300.0,
            gpus: 2,
            predicted: None,
        })
        .collect();
    let cfg = SimConfig::new(ClusterSpec::homogeneous(4, 4, 1).unwrap());
    let mut sim = Simulator::new(jobs, cfg).unwrap();
    let mut ctl = Controller::new(Fifo::default());
    while let Some(t) = sim.next_event_time() {
        sim.advance(t);
        let r = block_on(ctl.reconcile(&mut sim)).unwrap();
        assert!(r.failed.is_none());
    }
    assert!(sim.all_done());
    // admitting a job that does not exist is a permanent error
    let e = block_on(sim.admit(JobId(99), 1)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    let res = sim.into_result("fifo");
    // two at a time, 300 s each: the last pair ends at 900 s at the earliest
    assert!(res.summary().makespan >= 900.0);
    assert_eq!(ctl.log().len(), 6);
}
