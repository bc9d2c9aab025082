//! Node failures of a replay ([`NodeFault`]), mapped from real fault episodes.

use serde::Serialize;

/// A node out of service from `start` to `end` (simulation time, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NodeFault {
    pub node: u32,
    pub start: f64,
    pub end: f64,
}

/// Number of servers the StepFun fault trace sampled (its node ids map onto this many slots).
pub const FAULT_TRACE_SERVERS: u64 = 400;

/// Maps real fault episodes onto `n_nodes` simulated nodes, keeping each node's fault rate:
/// every fault-trace node id hashes to one of `max(400, n_nodes)` server slots and only slots
/// `< n_nodes` are kept; episode times are shifted by `t0` (the replay's first submit).
pub fn faults_from_episodes(
    episodes: &[augur_datasets::cluster::FaultEpisode],
    n_nodes: u32,
    t0: f64,
) -> Vec<NodeFault> {
    let slots = FAULT_TRACE_SERVERS.max(u64::from(n_nodes));
    let mut out: Vec<NodeFault> = episodes
        .iter()
        .filter(|e| e.end_s > e.start_s)
        .filter_map(|e| {
            // FNV-1a: stable across runs and platforms
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in e.node_id.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            let slot = h % slots;
            (slot < u64::from(n_nodes)).then_some(NodeFault {
                node: slot as u32,
                start: t0 + e.start_s,
                end: t0 + e.end_s,
            })
        })
        .collect();
    out.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.node.cmp(&b.node)));
    out
}
