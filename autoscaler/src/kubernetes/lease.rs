//! Leader election on a `coordination.k8s.io/v1` `Lease`, as client-go's leaderelection does:
//! the holder renews `spec.renewTime` every `retry_period`; a candidate takes the lease over
//! only when the holder's `renewTime + leaseDurationSeconds` has passed; every write is a
//! replace carrying the read `resourceVersion`, so two candidates racing get a 409 and only
//! one wins.
//!
//! A replica acts only while it is the leader *and* its last successful renew is younger than
//! `renew_deadline` (< lease duration): a leader that cannot renew (API down, lost the race)
//! stops acting within one renew deadline, before anyone else can acquire the lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use super::clock::Clock;
use super::objects::seconds;
use super::safety::{classify, Failure};
use crate::error::{BackendError, ErrorKind};

/// Lease timing and identity.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (pod name).
    pub identity: String,
    /// How long a lease is valid after its last renew.
    pub lease_duration: Duration,
    /// A leader stops acting when it has not renewed for this long (< `lease_duration`).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, name: &str, identity: &str) -> LeaseConfig {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Default)]
struct GateState {
    leader: bool,
    last_renew: f64,
    renew_deadline_s: f64,
}

/// Whether this replica may act now (shared between the elector and the backend).
#[derive(Debug, Clone, Default)]
pub struct LeaderGate(Arc<Mutex<GateState>>);

impl LeaderGate {
    /// True while leader with a renew younger than the renew deadline.
    pub fn may_act(&self, now: f64) -> bool {
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.leader && now - s.last_renew < s.renew_deadline_s
    }

    fn set(&self, leader: bool, now: f64, deadline_s: f64) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.leader = leader;
        s.renew_deadline_s = deadline_s;
        if leader {
            s.last_renew = now;
        }
    }
}

/// Acquires, renews and releases the lease.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    clock: Clock,
    gate: LeaderGate,
}

fn micro(t: f64) -> MicroTime {
    MicroTime(Timestamp::from_microsecond((t * 1e6) as i64).unwrap_or(Timestamp::UNIX_EPOCH))
}

impl LeaderElector {
    /// An elector (not yet leader).
    pub fn new(client: Client, cfg: LeaseConfig, clock: Clock) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            clock,
            gate: LeaderGate::default(),
        }
    }

    /// The gate the backend checks before acting.
    pub fn gate(&self) -> LeaderGate {
        self.gate.clone()
    }

    /// One round: create the lease if missing, renew it if ours, take it over if expired.
    /// Returns whether this replica is the leader now. An API error leaves the gate as it is
    /// (it closes by itself when the renew deadline passes) and is returned.
    pub async fn step(&mut self) -> Result<bool, BackendError> {
        let now = (self.clock)();
        let deadline = self.cfg.renew_deadline.as_secs_f64();
        let err = |f: Failure| -> BackendError {
            let (kind, m) = match f {
                Failure::Conflict(m) => (ErrorKind::Conflict, m),
                Failure::Transient(m, _) => (ErrorKind::Unavailable, m),
                Failure::Permanent(k, m) => (k, m),
            };
            BackendError::new(kind, None, format!("lease {}: {m}", self.cfg.name))
        };
        let current = match self.api.get_opt(&self.cfg.name).await {
            Ok(l) => l,
            Err(e) => return Err(err(classify(&e))),
        };
        let me = self.cfg.identity.clone();
        let lease_s = i32::try_from(self.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(lease_s),
                    acquire_time: Some(micro(now)),
                    renew_time: Some(micro(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.gate.set(true, now, deadline);
                    Ok(true)
                }
                Err(e) => match classify(&e) {
                    // someone else created it first
                    Failure::Conflict(_) => {
                        self.gate.set(false, now, deadline);
                        Ok(false)
                    }
                    f => Err(err(f)),
                },
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let renewed = spec.renew_time.as_ref().map_or(0.0, |t| seconds(&t.0));
        let duration = f64::from(spec.lease_duration_seconds.unwrap_or(lease_s));
        let ours = holder == me;
        if !ours && !holder.is_empty() && now < renewed + duration {
            self.gate.set(false, now, deadline);
            return Ok(false);
        }
        if !ours {
            spec.holder_identity = Some(me);
            spec.acquire_time = Some(micro(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(micro(now));
        spec.lease_duration_seconds = Some(lease_s);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.gate.set(true, now, deadline);
                Ok(true)
            }
            Err(e) => match classify(&e) {
                Failure::Conflict(_) => {
                    // lost the race (or the lease moved): not leader
                    self.gate.set(false, now, deadline);
                    Ok(false)
                }
                f => Err(err(f)),
            },
        }
    }

    /// Gives the lease up (holder cleared) if this replica holds it, and closes the gate.
    pub async fn release(&mut self) -> Result<(), BackendError> {
        let now = (self.clock)();
        self.gate.set(false, now, 0.0);
        let lease = match self.api.get_opt(&self.cfg.name).await {
            Ok(Some(l)) => l,
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(BackendError::new(
                    ErrorKind::Unavailable,
                    None,
                    format!("lease {}: {e}", self.cfg.name),
                ))
            }
        };
        let mut lease = lease;
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(micro(now));
        self.api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| {
                BackendError::new(
                    ErrorKind::Unavailable,
                    None,
                    format!("lease {}: {e}", self.cfg.name),
                )
            })
    }

    /// Steps every `retry_period` until `stop` resolves, then releases the lease.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            if let Err(e) = self.step().await {
                tracing::warn!(error = %e, "leader election round failed");
            }
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
        if let Err(e) = self.release().await {
            tracing::warn!(error = %e, "releasing the lease failed");
        }
    }
}
