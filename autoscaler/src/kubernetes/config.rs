//! What the backend watches and how it acts ([`KubeConfig`]), and its hooks into the rest of
//! Augur ([`Hooks`]: clock, event sink, runtime hints, leader gate).

use std::time::Duration;

use super::clock::{system_clock, Clock};
use super::events::EventSink;
use super::lease::LeaderGate;
use super::objects::{ObserveConfig, RuntimeHint, SpeedHint};
use super::safety::Safety;
use super::writeback::WriteBackConfig;

/// What the backend watches and how it acts.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeConfig {
    /// Namespace of the jobs (and their PodGroups / Workloads); `None` watches all namespaces.
    /// Pods are watched in every namespace: GPUs held elsewhere are not free.
    pub namespace: Option<String>,
    pub observe: ObserveConfig,
    pub safety: Safety,
    /// Server-side timeout of each watch request (seconds); the watcher re-watches after it.
    pub watch_timeout_s: u32,
    /// Under the live loop: ask the policy at least this often even when no watch saw a change
    /// (waits grow, runs age).
    pub resync: Duration,
    /// Rate limits of writing predictions onto the objects.
    pub writeback: WriteBackConfig,
}

impl Default for KubeConfig {
    fn default() -> Self {
        KubeConfig {
            namespace: None,
            observe: ObserveConfig::default(),
            safety: Safety::default(),
            watch_timeout_s: 290,
            resync: Duration::from_secs(15),
            writeback: WriteBackConfig::default(),
        }
    }
}

/// Hooks into the rest of Augur.
#[derive(Clone)]
pub struct Hooks {
    pub clock: Clock,
    /// Job lifecycle events and snapshots.
    pub events: Option<EventSink>,
    /// Predicted run times for jobs without the
    /// [`PREDICTED_ANNOTATION`](super::objects::PREDICTED_ANNOTATION).
    pub runtime_hint: Option<RuntimeHint>,
    /// Speeds of the jobs on the GPU types; without it every job runs at its type's nominal
    /// speed and no queued job's type is open to a type-aware policy.
    pub type_speeds: Option<SpeedHint>,
    /// Act only while this gate is open (leader election); `None` acts always.
    pub leader: Option<LeaderGate>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            clock: system_clock(),
            events: None,
            runtime_hint: None,
            type_speeds: None,
            leader: None,
        }
    }
}
