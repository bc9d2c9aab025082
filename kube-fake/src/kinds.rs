//! The resources the fake serves ([`Kind`]): nodes, pods, PyTorchJobs, Kubeflow Trainer v2
//! TrainJobs, `batch/v1` Jobs, Volcano PodGroups, Kueue Workloads, Leases and Events.

/// A served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// Plural (the collection's path segment), also the key of the store.
    pub plural: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Kind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

pub const NODES: Kind = Kind {
    plural: "nodes",
    group: "",
    version: "v1",
    kind: "Node",
    namespaced: false,
};
pub const PODS: Kind = Kind {
    plural: "pods",
    group: "",
    version: "v1",
    kind: "Pod",
    namespaced: true,
};
pub const JOBS: Kind = Kind {
    plural: "pytorchjobs",
    group: "kubeflow.org",
    version: "v1",
    kind: "PyTorchJob",
    namespaced: true,
};
pub const TRAINJOBS: Kind = Kind {
    plural: "trainjobs",
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "TrainJob",
    namespaced: true,
};
pub const BATCH_JOBS: Kind = Kind {
    plural: "jobs",
    group: "batch",
    version: "v1",
    kind: "Job",
    namespaced: true,
};
pub const PODGROUPS: Kind = Kind {
    plural: "podgroups",
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    kind: "PodGroup",
    namespaced: true,
};
pub const WORKLOADS: Kind = Kind {
    plural: "workloads",
    group: "kueue.x-k8s.io",
    version: "v1beta1",
    kind: "Workload",
    namespaced: true,
};
pub const LEASES: Kind = Kind {
    plural: "leases",
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    namespaced: true,
};
pub const EVENTS: Kind = Kind {
    plural: "events",
    group: "",
    version: "v1",
    kind: "Event",
    namespaced: true,
};
