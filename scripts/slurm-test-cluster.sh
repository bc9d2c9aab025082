#!/usr/bin/env bash
# A real single-node Slurm with accounting, for tests and for capturing `sacct` fixtures.
#
#   scripts/slurm-test-cluster.sh start DIR   # munge, MariaDB, slurmdbd, slurmctld, slurmd
#   eval "$(scripts/slurm-test-cluster.sh env DIR)"   # SLURM_CONF for sbatch/squeue/sacct
#   scripts/slurm-test-cluster.sh stop DIR    # stops the daemons by their pid files
#
# Everything lives in DIR (created if missing; use a fresh temporary folder) and runs as root,
# without systemd. Needs Debian's packages:
#   apt-get install -y slurmctld slurmd slurm-client munge slurmdbd mariadb-server
# The node has 2 CPUs, 2000 MiB (500 per CPU unless a job asks) and 2 GPUs of type `tesla` whose device files are links to
# /dev/null (jobs can request and are accounted `gres/gpu`; nothing runs on a GPU). One partition
# `debug` (default, no time limit). Ports: SLURM_TEST_PORT_BASE (default 16817) for slurmctld,
# +1 slurmd, +2 slurmdbd, +3 MariaDB. The Slurm clients look for munge's socket at
# /run/munge/munge.socket.2 whatever the configuration says, so start links it there (and
# refuses to when another munged owns that path); stop removes the link.
set -euo pipefail
# The daemons are in /usr/sbin, which a non-login PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

usage() {
  echo "usage: $0 start|stop|env DIR" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
base=${SLURM_TEST_PORT_BASE:-16817}
ctld_port=$base
slurmd_port=$((base + 1))
dbd_port=$((base + 2))
db_port=$((base + 3))
host=$(hostname -s)
cluster=augurtest
munge_link=/run/munge/munge.socket.2
db_pass=augur-test-only

log() { echo "slurm-test-cluster: $*" >&2; }

# Waits up to $1 seconds for the command in the remaining arguments to succeed.
wait_for() {
  local secs=$1
  shift
  local i
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  return 1
}

# Stops the processes whose pids are in the files given: TERM to all, then KILL to any still
# running after 15 s. Each takes about 2 s to shut down, so they are stopped together.
stop_pids() {
  local file pid i pids=()
  for file in "$@"; do
    [ -s "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$file"
  done
  for ((i = 0; i < 150; i++)); do
    local alive=0
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    [ "$alive" -eq 0 ] && return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      log "pid $pid did not stop on TERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

write_configs() {
  mkdir -p "$dir"/{etc,state,spool,log,run}
  cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=$cluster
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
CredType=cred/munge
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
DefMemPerCPU=500
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStorageTRES=gres/gpu,gres/gpu:tesla
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
MinJobAge=10
NodeName=$host CPUs=2 RealMemory=2000 Gres=gpu:tesla:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # File-less GPUs are dropped by slurmd, and it wants device nodes: links to /dev/null.
  mkdir -p "$dir/dev"
  ln -sfn /dev/null "$dir/dev/nvidia0"
  ln -sfn /dev/null "$dir/dev/nvidia1"
  cat >"$dir/etc/gres.conf" <<EOF
NodeName=$host Name=gpu Type=tesla File=$dir/dev/nvidia[0-1]
EOF
  # slurmdbd takes no -f: it reads slurmdbd.conf beside SLURM_CONF, and insists on mode 0600.
  cat >"$dir/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket.2
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$dir/etc/slurmdbd.conf"
}

start_munge() {
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  if [ ! -s "$dir/munge/munge.key" ]; then
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
  fi
  # A link left by a cluster that was not stopped points at a socket that is gone.
  if [ -L "$munge_link" ] && [ ! -S "$munge_link" ]; then
    rm -f "$munge_link"
  fi
  if [ -e "$munge_link" ] || [ -L "$munge_link" ]; then
    if [ "$(readlink "$munge_link" || true)" != "$dir/munge/munge.socket.2" ]; then
      log "$munge_link exists and is not ours (another munged?); not starting"
      exit 1
    fi
  fi
  munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket.2" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force
  mkdir -p /run/munge
  ln -sfn "$dir/munge/munge.socket.2" "$munge_link"
  wait_for 10 test -S "$dir/munge/munge.socket.2" || { log "munged did not start"; exit 1; }
}

start_mariadb() {
  local data=$dir/mysql/data sock=$dir/mysql/mysqld.sock
  mkdir -p "$dir/mysql"
  if [ ! -d "$data/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$data" --user=root \
      --auth-root-authentication-method=socket --skip-test-db >"$dir/log/mariadb-install.log" 2>&1
  fi
  mariadbd --no-defaults --datadir="$data" --socket="$sock" --port="$db_port" \
    --bind-address=127.0.0.1 --pid-file="$dir/mysql/mariadbd.pid" \
    --log-error="$dir/log/mariadb.log" --user=root --skip-log-bin \
    --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
  wait_for 60 mariadb --no-defaults -S "$sock" -u root -e "select 1" \
    || { log "MariaDB did not start; see $dir/log/mariadb.log"; exit 1; }
  mariadb --no-defaults -S "$sock" -u root <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$db_pass';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
EOF
}

start_slurm() {
  export SLURM_CONF=$dir/etc/slurm.conf
  slurmdbd
  wait_for 60 sacctmgr -n show cluster \
    || { log "slurmdbd did not answer; see $dir/log/slurmdbd.log"; exit 1; }
  # The cluster must exist in the database before slurmctld starts, or it registers nothing
  # and finished jobs keep `Unknown` ends.
  sacctmgr -i add cluster "$cluster" >/dev/null 2>&1 || true
  sacctmgr -i add account augur Description=tests Organization=augur Cluster="$cluster" \
    >/dev/null 2>&1 || true
  sacctmgr -i add user root Account=augur Cluster="$cluster" >/dev/null 2>&1 || true
  slurmctld -f "$SLURM_CONF"
  wait_for 30 scontrol ping || { log "slurmctld did not start; see $dir/log/slurmctld.log"; exit 1; }
  slurmd -f "$SLURM_CONF"
  wait_for 30 bash -c "sinfo -h -n '$host' -o %t | grep -qx idle" \
    || { log "the node did not come up idle; see $dir/log/slurmd.log"; exit 1; }
}

case $cmd in
start)
  write_configs
  start_munge
  start_mariadb
  start_slurm
  log "up: eval \"\$($0 env $dir)\""
  ;;
stop)
  # The Slurm daemons first (slurmdbd still has its database and all have munge), then those.
  stop_pids "$dir/run/slurmd.pid" "$dir/run/slurmctld.pid" "$dir/run/slurmdbd.pid"
  stop_pids "$dir/mysql/mariadbd.pid" "$dir/munge/munged.pid"
  if [ "$(readlink "$munge_link" 2>/dev/null || true)" = "$dir/munge/munge.socket.2" ]; then
    rm -f "$munge_link"
  fi
  ;;
env)
  echo "export SLURM_CONF=$dir/etc/slurm.conf"
  ;;
*)
  usage
  ;;
esac
