//! Talking to the API server: the client `augur serve` uses, the custom resources the backend
//! reads (PyTorchJob, Volcano PodGroup, Kueue Workload; the job kinds' in
//! [`JobKind::resource`](super::kinds::JobKind::resource)), and probing whether they are
//! served.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Client;

use crate::error::{BackendError, ErrorKind};

/// A client for `augur serve`: the kubeconfig at `kubeconfig` (its current context), else the
/// in-cluster configuration when run as a pod, else `$KUBECONFIG` / `~/.kube/config`. kube's
/// own retry layer is turned off: the backend's bounded backoff with jitter ([`Safety`](super::safety::Safety)) is the
/// one retry policy.
pub async fn client(kubeconfig: Option<&std::path::Path>) -> Result<Client, BackendError> {
    let invalid = |m: String| BackendError::new(ErrorKind::Invalid, None, m);
    let mut config = match kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .map_err(|e| invalid(format!("kubeconfig {}: {e}", p.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| invalid(format!("kubeconfig {}: {e}", p.display())))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            invalid(format!(
                "no in-cluster configuration and no kubeconfig (pass --kubeconfig): {e}"
            ))
        })?,
    };
    config.default_retry = false;
    Client::try_from(config).map_err(|e| invalid(format!("kubernetes client: {e}")))
}

/// `kubeflow.org/v1` `PyTorchJob`.
pub fn pytorchjob_resource() -> ApiResource {
    super::kinds::JobKind::PyTorchJob.resource()
}

/// `scheduling.volcano.sh/v1beta1` `PodGroup`.
pub fn podgroup_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

/// `kueue.x-k8s.io/v1beta1` `Workload`.
pub fn workload_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "Workload"),
        "workloads",
    )
}

pub(super) fn dyn_api(client: &Client, ns: Option<&str>, ar: &ApiResource) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// True when the resource is served (a 404 on list means its CRD is not installed). An
/// optional resource the RBAC does not let us read (403) is skipped with a warning.
pub(super) async fn installed(
    api: &Api<DynamicObject>,
    what: &str,
    optional: bool,
) -> Result<bool, BackendError> {
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 403 && optional => {
            tracing::warn!(
                resource = what,
                "installed but not readable (RBAC); not watched"
            );
            Ok(false)
        }
        Err(e) => Err(BackendError::new(
            ErrorKind::Unavailable,
            None,
            format!("probing {what}: {e}"),
        )),
    }
}
