//! The machines of a simulated cluster ([`ClusterSpec`]): nodes of GPUs in racks, of one or
//! several GPU types with their speeds.

use serde::Serialize;

use crate::cluster::{GpuType, NodeInfo};
use crate::error::SimError;
use crate::placement::NodeMeta;

/// One machine of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSpec {
    pub name: String,
    /// Index into [`ClusterSpec::gpu_types`].
    pub gpu_type: u16,
    pub gpus: u32,
    pub rack: u32,
}

/// The machines of a simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterSpec {
    pub gpu_types: Vec<GpuType>,
    pub nodes: Vec<NodeSpec>,
}

impl ClusterSpec {
    /// `total_gpus` GPUs of one type (speed 1) on nodes of `gpus_per_node` (the last node takes
    /// the remainder), `nodes_per_rack` nodes per rack.
    pub fn homogeneous(
        total_gpus: u32,
        gpus_per_node: u32,
        nodes_per_rack: u32,
    ) -> Result<ClusterSpec, SimError> {
        ClusterSpec::heterogeneous(
            total_gpus,
            gpus_per_node,
            nodes_per_rack,
            &[("gpu".to_string(), 1.0, 1.0)],
        )
    }

    /// `total_gpus` GPUs split over GPU types `(name, speed, share of GPUs)`; each node holds
    /// one type; racks hold `nodes_per_rack` nodes.
    pub fn heterogeneous(
        total_gpus: u32,
        gpus_per_node: u32,
        nodes_per_rack: u32,
        types: &[(String, f64, f64)],
    ) -> Result<ClusterSpec, SimError> {
        if total_gpus == 0 || gpus_per_node == 0 || nodes_per_rack == 0 {
            return Err(SimError::Cluster(
                "GPUs, GPUs per node and nodes per rack must be > 0".into(),
            ));
        }
        if types.is_empty() || types.len() > usize::from(u16::MAX) {
            return Err(SimError::Cluster("need at least one GPU type".into()));
        }
        let share_sum: f64 = types.iter().map(|t| t.2).sum();
        if types
            .iter()
            .any(|t| !(t.1.is_finite() && t.1 > 0.0 && t.2.is_finite() && t.2 >= 0.0))
            || share_sum <= 0.0
        {
            return Err(SimError::Cluster(
                "GPU type speeds must be > 0 and shares ≥ 0 with a positive sum".into(),
            ));
        }
        let mut nodes = Vec::new();
        let mut assigned = 0u32;
        for (ti, (name, _, share)) in types.iter().enumerate() {
            let want = if ti + 1 == types.len() {
                total_gpus - assigned
            } else {
                ((f64::from(total_gpus) * share / share_sum).round() as u32)
                    .min(total_gpus - assigned)
            };
            assigned += want;
            let mut left = want;
            while left > 0 {
                let g = left.min(gpus_per_node);
                let i = nodes.len() as u32;
                nodes.push(NodeSpec {
                    name: format!("{name}-{i:04}"),
                    gpu_type: ti as u16,
                    gpus: g,
                    rack: i / nodes_per_rack,
                });
                left -= g;
            }
        }
        Ok(ClusterSpec {
            gpu_types: types
                .iter()
                .map(|(name, speed, _)| GpuType {
                    name: name.clone(),
                    speed: *speed,
                })
                .collect(),
            nodes,
        })
    }

    /// GPUs in total.
    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// Speed of a node's GPU type (1 for an unknown type).
    fn speed_of(&self, n: &NodeSpec) -> f64 {
        self.gpu_types
            .get(usize::from(n.gpu_type))
            .map_or(1.0, |t| t.speed)
    }

    /// What placement needs to know of each node.
    pub(super) fn node_meta(&self) -> Vec<NodeMeta> {
        self.nodes
            .iter()
            .map(|n| NodeMeta {
                gpus: n.gpus,
                rack: n.rack,
                speed: self.speed_of(n),
            })
            .collect()
    }

    /// The nodes as a snapshot shows them, all healthy and free.
    pub(super) fn node_infos(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                gpu_type: n.gpu_type,
                rack: n.rack,
                gpus: n.gpus,
                free: n.gpus,
                healthy: true,
            })
            .collect()
    }
}
