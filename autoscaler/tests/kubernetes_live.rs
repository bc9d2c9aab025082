//! The Kubernetes backend as `augur serve` runs it, against the wire-level fake API server:
//! leader election on a `Lease`, job lifecycle events and snapshots to the service's hook, and
//! the live loop driving the backend only while it leads.

mod fixtures;

use std::time::Duration;

use augur_autoscaler::kubernetes::{ClusterEvent, Hooks, LeaderElector, LeaseConfig, Outcome};
use augur_autoscaler::{ClusterBackend, ErrorKind};
use augur_kube_fake::*;
use fixtures::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_acts_and_a_lost_lease_stops_acting_within_the_renew_deadline() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let cfg = |id: &str| LeaseConfig::new("augur-system", "augur-controller", id);
    let mut e1 = LeaderElector::new(api.client(), cfg("augur-0"), clock.clock());
    let mut e2 = LeaderElector::new(api.client(), cfg("augur-1"), clock.clock());
    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/augur-system/leases";
    api.clear_requests();
    assert!(e1.step().await.unwrap());
    assert!(!e2.step().await.unwrap());
    let calls: Vec<(String, String)> = api
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(LEASE))
        .map(|r| (r.method, r.path))
        .collect();
    let named = format!("{LEASE}/augur-controller");
    assert_eq!(
        calls,
        vec![
            ("GET".to_string(), named.clone()),
            ("POST".to_string(), LEASE.to_string()),
            ("GET".to_string(), named.clone()),
        ]
    );
    let lease = api.get(LEASES, "augur-system", "augur-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!("augur-0"));
    assert_eq!(lease["spec"]["leaseDurationSeconds"], json!(15));

    // the leader acts; the other replica's backend refuses
    let g1 = e1.gate();
    let g2 = e2.gate();
    assert!(g1.may_act(clock.now()) && !g2.may_act(clock.now()));
    let mut b = backend(
        &api,
        &clock,
        fast_safety(),
        Hooks {
            leader: Some(g2.clone()),
            ..Hooks::default()
        },
    )
    .await;
    let s = b.observe().await.unwrap();
    let a = job_id(&s, &b, "a");
    api.clear_requests();
    let e = b.set_workers(a, 6).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(scale_calls(&api, "a").is_empty());

    // renew: a replace carrying the read resourceVersion
    clock.set(T0 + 1005.0);
    api.clear_requests();
    assert!(e1.step().await.unwrap());
    let put = api
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .expect("renew is a PUT");
    assert_eq!(
        put.body.as_ref().unwrap()["spec"]["holderIdentity"],
        json!("augur-0")
    );
    assert!(put.body.as_ref().unwrap()["metadata"]["resourceVersion"].is_string());

    // the leader's API calls fail from now on (it cannot renew): it stops acting once the
    // renew deadline (10 s) passed, before the lease (15 s) expires for the other replica
    api.inject(Fault::status("GET", "/leases/augur-controller", 500, 1));
    clock.set(T0 + 1009.0);
    assert!(e1.step().await.is_err());
    assert!(g1.may_act(clock.now()));
    clock.set(T0 + 1015.5);
    assert!(
        !g1.may_act(clock.now()),
        "stopped within the renew deadline"
    );
    assert!(!e2.step().await.unwrap(), "the lease has not expired yet");
    clock.set(T0 + 1020.5);
    assert!(e2.step().await.unwrap(), "expired lease taken over");
    let lease = api.get(LEASES, "augur-system", "augur-controller").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], json!("augur-1"));
    assert_eq!(lease["spec"]["leaseTransitions"], json!(1));
    assert!(g2.may_act(clock.now()));
    // the old leader sees the new holder and stays out
    assert!(!e1.step().await.unwrap());
    assert!(!g1.may_act(clock.now()));

    // two candidates racing on an expired lease: the loser's replace gets 409
    api.inject(Fault::status("PUT", "/leases/augur-controller", 409, 1));
    clock.set(T0 + 1040.0);
    assert!(!e1.step().await.unwrap());
    // release clears the holder; the other takes it at once
    assert!(e2.step().await.unwrap());
    e2.release().await.unwrap();
    assert!(!g2.may_act(clock.now()));
    assert!(e1.step().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_lifecycle_events_and_snapshots_reach_the_service_hook() {
    let api = FakeApi::start(&[]).await;
    seed(&api);
    let clock = VClock::new(T0 + 1000.0);
    let (hooks, seen) = recording_hooks();
    let mut b = backend(&api, &clock, fast_safety(), hooks).await;
    // b starts, then finishes; a is deleted
    let mut job = api.get(JOBS, "ml", "b").unwrap();
    set_started(&mut job, T0 + 1100.0, 4);
    api.put(JOBS, job);
    let mut job = api.get(JOBS, "ml", "b").unwrap();
    set_succeeded(&mut job, T0 + 1900.0);
    api.put(JOBS, job);
    clock.set(T0 + 2000.0);
    api.delete(JOBS, "ml", "a");
    caught_up(&b, &api).await;
    b.observe().await.unwrap();
    let events = seen.lock().unwrap().clone();
    let mut lifecycle: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            ClusterEvent::Submitted {
                job, time, gpus, ..
            } => Some(format!("submitted {} {} {gpus:?}", job.name, time - T0)),
            ClusterEvent::Started { job, time } => {
                Some(format!("started {} {}", job.name, time - T0))
            }
            ClusterEvent::Finished { job, time, outcome } => {
                Some(format!("finished {} {} {outcome:?}", job.name, time - T0))
            }
            ClusterEvent::Snapshot(_) | ClusterEvent::Typed { .. } => None,
        })
        .collect();
    lifecycle.sort();
    assert_eq!(
        lifecycle,
        vec![
            "finished a 2000 Deleted",
            "finished b 1900 Succeeded",
            "finished c -10 Succeeded",
            "started a 0",
            "started b 1100",
            "submitted a -100 Some(4)",
            "submitted b -50 Some(4)",
            "submitted c -500 Some(2)",
        ]
    );
    let _ = Outcome::Failed;
    assert!(events
        .iter()
        .any(|e| matches!(e, ClusterEvent::Snapshot(s) if s.time == T0 + 2000.0)));
}

/// The live loop (pause, dry-run, decision log) drives the Kubernetes backend like the
/// simulator: a tick asks the policy only when a watch saw a change or the resync period
/// passed, a closed leader gate means no decision and no request, and an open one grows the
/// elastic job through `/scale` with the decision's reason logged.
#[tokio::test]
async fn the_live_loop_drives_the_backend_only_while_it_leads() {
    use augur_autoscaler::kubernetes::LeaderGate;
    use augur_autoscaler::live::{LiveBackend, LiveConfig, LiveLoop, Outcome as Done};
    use augur_autoscaler::{ElasticController, ElasticParams, ScalingModel};

    let api = FakeApi::start(&[]).await;
    seed(&api);
    let mut a = api.get(JOBS, "ml", "a").expect("a");
    a["metadata"]["annotations"] = json!({ "augur.dev/predicted-runtime-s": "72000" });
    api.put(JOBS, a);
    let clock = VClock::new(T0 + 3600.0);
    let policy = || {
        let params = ElasticParams {
            preempt_factor: None,
            ..ElasticParams::default()
        };
        ElasticController::new(params, ScalingModel::default())
    };

    // a follower (the gate stays closed): observes, never decides, sends nothing but reads
    let follower = Hooks {
        leader: Some(LeaderGate::default()),
        ..Hooks::default()
    };
    let b = backend(&api, &clock, fast_safety(), follower).await;
    let mut l = LiveLoop::new(b, policy(), LiveConfig::default());
    api.clear_requests();
    for _ in 0..3 {
        let r = l.step(Duration::from_secs(1)).await;
        assert!(!r.decided && r.error.is_none(), "{r:?}");
    }
    assert_eq!(l.decisions().count(), 0);
    assert_eq!(l.cluster().healthy_gpus, 16);
    assert_eq!(l.cluster().running, 1);
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    drop(l);

    // the leader (no election): the first tick decides, grows `a`, and logs why
    let b = backend(&api, &clock, fast_safety(), Hooks::default()).await;
    let mut l = LiveLoop::new(b, policy(), LiveConfig::default());
    let r = l.step(Duration::from_secs(1)).await;
    assert!(r.decided && r.decisions > 0 && r.error.is_none(), "{r:?}");
    let all: Vec<serde_json::Value> = l
        .decisions()
        .map(|d| serde_json::to_value(d).expect("json"))
        .collect();
    let grow = all
        .iter()
        .find(|d| d["action"] == "set_workers")
        .unwrap_or_else(|| panic!("no rescale in {all:?}"));
    assert_eq!(grow["reason"], "idle_gpus", "{grow}");
    assert_eq!(grow["outcome"], "applied", "{grow}");
    assert!(l.decisions().all(|d| d.outcome == Done::Applied), "{all:?}");
    let patches: Vec<_> = api
        .requests_to("/pytorchjobs/a/scale")
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    caught_up(l.backend(), &api).await;
    // the patch changed `a`: the next tick looks again; then nothing changes until the resync
    assert!(l.backend_mut().tick(Duration::from_secs(1)));
    assert!(!l.backend_mut().tick(Duration::from_secs(1)));
    assert!(!l.backend_mut().tick(Duration::from_secs(5)));
    assert!(
        l.backend_mut().tick(Duration::from_secs(10)),
        "resync after 15 s"
    );
    assert!(!l.backend_mut().tick(Duration::from_secs(1)));
    api.put(PODS, worker_pod("ml", "a", 4, 1, Some("n0")));
    caught_up(l.backend(), &api).await;
    assert!(
        l.backend_mut().tick(Duration::from_secs(1)),
        "a watch saw a pod"
    );

    // paused: the loop neither decides nor patches
    l.set_paused(true);
    api.clear_requests();
    for _ in 0..3 {
        let r = l.step(Duration::from_secs(20)).await;
        assert!(!r.decided, "{r:?}");
    }
    assert!(api.requests().is_empty(), "{:?}", api.requests());
}
