#!/usr/bin/env bash
# Every test, on a fresh machine too (Debian with Rust and Python): installs what the tests
# drive outside Cargo when it is missing, then runs `cargo test --workspace` (extra arguments
# go to it). The README's test command; .ci/run runs it after fmt and clippy.
#
#   kubernetes-validate (PyPI)  autoscaler/tests/kubernetes_deploy.rs: the manifests, offline
#   kubectl, promtool (apt)     the same: kustomize overlays, alerting rules
#   chromium (apt)              service/tests/status_page.rs: the status page, headless
#   Slurm + MariaDB (apt)       service/tests/slurm_serve.rs, datasets/tests/slurm_live.rs: a real
#                               single-node cluster (scripts/slurm-test-cluster.sh starts it)
#   PostgreSQL 15 (apt)         service/tests/serve_ha.rs and the PostgreSQL store's tests (throwaway
#                               servers: initdb + pg_ctl in temp folders)
#
# Installing needs root (or sudo). A tool that cannot be installed stops the script naming
# the test that needs it; the tests themselves also fail, never skip, when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 && as_root=(sudo)
fi
apt_updated=
apt_install() { # [OPTION] PACKAGE... (installs them, quietly)
  if [ -z "$apt_updated" ]; then
    "${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    apt_updated=1
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}
need() { # WHAT WHO-NEEDS-IT COMMAND...
  local what=$1 who=$2
  shift 2
  echo "== installing $what (for $who)"
  "$@" || { echo "error: could not install $what; $who needs it" >&2; exit 1; }
}

if ! command -v kubernetes-validate >/dev/null 2>&1 \
  && ! python3 -c 'import kubernetes_validate' >/dev/null 2>&1; then
  need kubernetes-validate autoscaler/tests/kubernetes_deploy.rs \
    python3 -m pip install --quiet --root-user-action=ignore 'kubernetes-validate==1.37.0'
fi
if ! command -v kubectl >/dev/null 2>&1; then
  need kubectl "autoscaler/tests/kubernetes_deploy.rs (kubectl kustomize)" apt_install kubectl
fi
if ! command -v promtool >/dev/null 2>&1; then
  need "promtool (apt: prometheus)" autoscaler/tests/kubernetes_deploy.rs apt_install --no-install-recommends prometheus
fi
if [ ! -x /usr/bin/chromium ] && [ -z "${AUGUR_CHROMIUM:-}" ]; then
  need chromium service/tests/status_page.rs apt_install chromium
fi
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/slurmdbd ] \
  || [ ! -x /usr/bin/sacct ] || [ ! -x /usr/sbin/munged ] || [ ! -x /usr/sbin/mariadbd ]; then
  need "Slurm with accounting" "service/tests/slurm_serve.rs and datasets/tests/slurm_live.rs" \
    apt_install slurmctld slurmd slurm-client munge slurmdbd mariadb-server
fi
if [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  need "PostgreSQL 15" "service/tests/serve_ha.rs" apt_install postgresql
fi

echo "== cargo test --workspace $*"
exec cargo test --workspace "$@"
