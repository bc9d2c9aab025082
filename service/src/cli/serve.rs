//! `augur serve`: resolves the configuration (defaults, `--config`, `AUGUR_SERVE_*`, flags),
//! checks the Kubernetes flags, and runs [`crate::serve`] on a tokio runtime.

use crate::cli::ServeArgs;
use crate::serve;
use crate::serve::config::Backend;

/// `augur serve`.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let flags = serve::config::PartialConfig {
        addr: args.addr,
        data_dir: args.data_dir.clone(),
        store: args.store.clone(),
        insecure: args.insecure.then_some(true),
        speed: args.speed,
        trees: args.trees,
        bootstrap_dataset: (!args.bootstrap.is_empty()).then(|| args.bootstrap.join(",")),
        bootstrap_format: args.bootstrap_format.clone(),
        bootstrap_limit: args.bootstrap_limit,
        retrain_every_jobs: args.retrain_every_jobs,
        backend: args.backend,
        slurm_poll_seconds: args.slurm_poll_seconds,
        retention_days: args.retention_days,
        ..Default::default()
    };
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let mut config = serve::config::load(args.config.as_deref(), &env, flags)?;
    let kubernetes = serve::config::KubeOptions {
        kubeconfig: args.kubeconfig.clone(),
        namespace: args.namespace.clone(),
        dry_run: args.dry_run,
    };
    if config.backend != Backend::Kubernetes && kubernetes != serve::config::KubeOptions::default()
    {
        anyhow::bail!(
            "--kubeconfig, --namespace and --dry-run need --backend kubernetes (the simulated cluster has POST /v1/autoscaler/dry-run)"
        );
    }
    config.kubernetes = kubernetes;
    serve::heap::limit_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("augur-serve")
        .build()?;
    // the backend is built from the configuration when the data folder is opened
    let result = runtime.block_on(serve::run(config));
    // a first-start training still running in the background is abandoned (registry
    // versions are written to a temporary folder and renamed, so nothing half-written stays);
    // the requests had their deadline already, so this wait is short
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}
