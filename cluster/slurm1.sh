#!/usr/bin/env bash
# cluster/slurm1.sh - a throwaway one-node Slurm cluster on localhost, for jobs/ and tests/slurm.
# Real daemons (munged, slurmctld, slurmd) with a minimal config: sbatch, srun --mpi=pmix, signals,
# --requeue and time limits behave as on a site cluster. Debian 12, no systemd, run as root.
# Details and the reasons behind every setting: docs/cluster.md.
#
# usage: cluster/slurm1.sh up | selftest | status | env | down
#   up        start the cluster (about 2 s) and wait until the node is idle; does nothing if this
#             cluster is already up. Exit 77 when Slurm is not installed (CTest: skipped).
#   selftest  sbatch --wait a 2-task job (srun and mpirun, each 2 ranks); exit status = the job's.
#   status    daemons, node and queue; exit 0 if up, 3 if not.
#   env       print "export SLURM_CONF=..." for eval, so sbatch/squeue/scontrol talk to it.
#   down      cancel this cluster's jobs, stop the daemons it started (by recorded PID) and munged
#             if it started it; then make sure no process of this cluster is left. Idempotent.
# environment:
#   SLURM_TEST_DIR    state, spool, logs, pid files (default /tmp/tessera-slurm)
#   TESS_SLURM_PORT   slurmctld port (default 6817); slurmd uses the next one
#   TESS_SLURM_CGROUP auto (default) | host | private: where slurmd runs, see cgroup_mode below
# Packages: bash cluster/install-deps.sh --slurm
set -euo pipefail
BASE=${SLURM_TEST_DIR:-/tmp/tessera-slurm}
PORT=${TESS_SLURM_PORT:-6817}
export SLURM_CONF=$BASE/etc/slurm.conf # clients read it; sbatch exports it, so jobs inherit it
RUN=$BASE/run
MARK="TESS_SLURM_CLUSTER=$BASE" # in the daemons' environment, hence in every slurmstepd's

log() { echo "slurm1: $*" >&2; }
die() { log "$*"; exit 1; }

installed() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
              command -v sbatch >/dev/null && command -v munged >/dev/null; }

# alive PIDFILE NAME: the recorded process exists and is still that daemon (guards PID reuse).
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2"
}

# The cgroup layout of this host, as slurmd 22.05 sees it at start-up (it loads its cgroup plugin
# even with proctrack/linuxproc and no cgroup task plugin): "v1" = a v1 or hybrid tree (tmpfs on
# /sys/fs/cgroup with a cgroup hierarchy at /sys/fs/cgroup/systemd; works read-write and
# read-only), "v2" = unified cgroup2 only (22.05 would pick cgroup/v2, which wants systemd/dbus),
# "none" = no cgroup filesystem (slurmd fails: "can't stat /sys/fs/cgroup/systemd/").
cgroup_layout() {
  case "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null || echo none)" in
    cgroup2fs) echo v2 ;;
    tmpfs) if [ "$(stat -f -c %T /sys/fs/cgroup/systemd 2>/dev/null)" = cgroupfs ]; then echo v1
           else echo none; fi ;;
    *) echo none ;;
  esac
}

# host: slurmd sees the host's cgroups (right for "v1"). private: slurmd runs in a private mount
# namespace with a tmpfs on /sys/fs/cgroup and a named v1 hierarchy name=systemd, which is all
# 22.05 needs at start-up; needs CAP_SYS_ADMIN and unshare. auto picks host for "v1".
cgroup_mode() {
  case "${TESS_SLURM_CGROUP:-auto}" in
    host|private) echo "$TESS_SLURM_CGROUP" ;;
    auto) if [ "$(cgroup_layout)" = v1 ]; then echo host; else echo private; fi ;;
    *) die "TESS_SLURM_CGROUP='$TESS_SLURM_CGROUP': expected auto, host or private" ;;
  esac
}

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  install -d -o munge -g munge -m 0755 /run/munge # no systemd-tmpfiles: create it, 0755 for clients
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge /etc/munge
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  munge_ok && return 0 # a munged already answers (the site's, or another cluster's): use it
  runuser -u munge -- /usr/sbin/munged # daemonizes; munged refuses to run on files it doesn't own
  for _ in $(seq 50); do munge_ok && break; sleep 0.1; done
  munge_ok || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$RUN/munged.started" # remember that *we* started it
}

write_conf() {
  local ncpu mem_mb
  ncpu=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # GNU nproc obeys both; tests set them
  mem_mb=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 / 2 )) # never more than the node has
  cat >"$SLURM_CONF" <<CONF
# Written by cluster/slurm1.sh; every setting is explained in docs/cluster.md.
ClusterName=tessera
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
TmpFS=$BASE/tmp
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=300
NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$ncpu RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

node_ready() { sinfo -h -N -o '%T' 2>/dev/null | grep -qxE 'idle|mixed|allocated'; }

is_up() { alive "$RUN/slurmctld.bgpid" slurmctld && alive "$RUN/slurmd.bgpid" slurmd; }

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

up() {
  installed || { log "Slurm is not installed (bash cluster/install-deps.sh --slurm)"; exit 77; }
  if is_up && node_ready; then log "already up ($SLURM_CONF)"; return 0; fi
  is_up && die "daemons of $BASE run but the node is not ready; run '$0 down' first"
  for p in "$PORT" $((PORT + 1)); do
    port_busy "$p" && die "port $p is in use (another Slurm?): set TESS_SLURM_PORT or stop it"
  done
  local mode
  mode=$(cgroup_mode)
  # Fresh state every time: only the directories this script owns, never $BASE itself.
  rm -rf "${BASE:?}"/{etc,state,spool,log,run,tmp}
  mkdir -p "$BASE"/{etc,state,spool,log,run,tmp}
  start_munge
  write_conf
  log "cgroup layout $(cgroup_layout), slurmd runs in the $mode mount namespace"
  env "$MARK" slurmctld -D -i -f "$SLURM_CONF" >"$BASE/log/slurmctld.out" 2>&1 &
  echo $! >"$RUN/slurmctld.bgpid" # -D: foreground, so $! is the daemon; -i: ignore stale state
  if [ "$mode" = private ]; then
    command -v unshare >/dev/null || die "private cgroup mode needs unshare (util-linux)"
    # unshare and sh exec into slurmd: $! is slurmd's PID. -N: node name differs from hostname -s.
    # shellcheck disable=SC2016 # $0 is expanded by the inner sh: the config path
    env "$MARK" unshare -m --propagation private sh -c '
      mount -t tmpfs tmpfs /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/systemd &&
      mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd &&
      exec slurmd -D -N localhost -f "$0"' "$SLURM_CONF" >"$BASE/log/slurmd.out" 2>&1 &
  else
    env "$MARK" slurmd -D -N localhost -f "$SLURM_CONF" >"$BASE/log/slurmd.out" 2>&1 &
  fi
  echo $! >"$RUN/slurmd.bgpid"
  for _ in $(seq 120); do
    if node_ready; then sinfo -N >&2; log "up: eval \"\$($0 env)\" to use it"; return 0; fi
    alive "$RUN/slurmctld.bgpid" slurmctld || break
    alive "$RUN/slurmd.bgpid" slurmd || break
    sleep 0.25
  done
  log "the cluster did not come up; logs in $BASE/log:"
  tail -n 20 "$BASE"/log/* >&2 || true
  down
  exit 1
}

selftest() {
  installed || { log "Slurm is not installed"; exit 77; }
  node_ready || die "no cluster answers at $SLURM_CONF: run '$0 up' first"
  cat >"$BASE/selftest.sbatch" <<'JOB'
#!/bin/bash
#SBATCH -J selftest -n 2 -t 00:02:00
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
set -e
echo "srun:"; srun -n 2 hostname
echo "mpirun:"; mpirun -n 2 hostname
JOB
  local out=$BASE/selftest.out rc=0
  rm -f "$out"
  timeout 60 sbatch --wait -o "$out" "$BASE/selftest.sbatch" >&2 || rc=$?
  cat "$out" >&2 || true
  [ "$rc" -ne 124 ] || { squeue >&2; die "selftest job did not finish within 60 s"; }
  [ "$rc" -eq 0 ] || { log "selftest job failed with exit status $rc"; exit "$rc"; }
  [ "$(grep -c . "$out")" -eq 6 ] || die "selftest: expected 2 srun and 2 mpirun lines in $out"
  log "selftest passed"
}

status() {
  local rc=0
  for d in slurmctld slurmd; do
    if alive "$RUN/$d.bgpid" "$d"; then log "$d: pid $(cat "$RUN/$d.bgpid")"
    else log "$d: not running"; rc=3; fi
  done
  if [ -f "$RUN/munged.started" ]; then log "munged: pid $(cat "$RUN/munged.started") (ours)"
  elif munge_ok; then log "munged: running (not ours)"; else log "munged: not running"; fi
  log "cgroup layout $(cgroup_layout); config $SLURM_CONF"
  if [ "$rc" -eq 0 ]; then sinfo -N >&2 || true; squeue >&2 || true; fi
  return "$rc"
}

# stop_daemons NAME...: TERM the recorded daemons together, wait up to 10 s, then KILL.
stop_daemons() {
  local pids=() d pid
  for d in "$@"; do
    if alive "$RUN/$d.bgpid" "$d"; then pids+=("$(cat "$RUN/$d.bgpid")"); fi
    rm -f "$RUN/$d.bgpid"
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "pid $pid ignored SIGTERM: SIGKILL"; kill -9 "$pid" || true; fi
  done
}

# PIDs of every process this cluster started: processes carrying $MARK in their environment (the
# daemons and each slurmstepd they forked), and all their descendants (job scripts, srun, mpirun,
# ranks). Read from /proc; nothing is matched by name.
cluster_pids() {
  local marked=() p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}; p=${p%/environ}
    tr '\0' '\n' 2>/dev/null <"$e" | grep -qxF "$MARK" && marked+=("$p")
  done
  [ "${#marked[@]}" -gt 0 ] || return 0
  ps -e -o pid=,ppid=,stat= | awk -v roots="${marked[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2; if ($3 ~ /^Z/) zombie[$1] = 1 }   # zombies are dead: PID 1 reaps them
    END { for (p in parent) { if (p in zombie) continue; q = p
          while (q > 1) { if (q in keep) { print p; break } q = parent[q] } } }'
}

down() {
  if is_up; then
    # No new job starts; running jobs are killed outright (a SIGTERM would let a job script
    # checkpoint and requeue itself), then everything is cancelled, until the queue is empty.
    scontrol update PartitionName=debug State=DOWN 2>/dev/null || true
    local ids
    for _ in $(seq 60); do
      ids=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
      [ -n "${ids// /}" ] || break
      # shellcheck disable=SC2086
      { scancel --full --signal=KILL $ids; scancel $ids; } 2>/dev/null || true
      sleep 0.5
    done
  fi
  stop_daemons slurmd slurmctld
  if [ -f "$RUN/munged.started" ]; then
    local pid
    pid=$(cat "$RUN/munged.started")
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q munged; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$RUN/munged.started"
  fi
  local left
  left=$(cluster_pids | tr '\n' ' ')
  if [ -n "${left// /}" ]; then
    log "left behind by this cluster, killing: $left"
    # shellcheck disable=SC2086
    kill -9 $left 2>/dev/null || true
  fi
  log "down"
}

case "${1:-}" in
  up) up ;;
  selftest) selftest ;;
  status) status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  down) down ;;
  *) sed -n '7,19p' "$0" >&2; exit 64 ;;
esac
