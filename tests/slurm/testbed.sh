#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for the harness's tests.
#
#   tests/slurm/testbed.sh start [DIR] write DIR/slurm.conf, start slurmctld and
#                                      slurmd, wait until the node is idle
#   tests/slurm/testbed.sh stop DIR    stop both daemons by their pid files
#   tests/slurm/testbed.sh env DIR     print the line that points clients at it
#
# Everything lives in DIR: slurm.conf, pid files, logs, spool and state.
# Without DIR, start makes a new private folder (mktemp -d) and names it.
# DIR must be your own and writable by nobody else (the daemons run as root
# and stop kills the pids its files name): a folder owned by another user,
# writable by group or others, or a symbolic link is refused.
#
# Security: AuthType=auth/none means anyone who can reach the daemons can run
# jobs as root.  Both daemons listen on 127.0.0.1 only, so that is anyone
# logged in on this machine: use the test cluster on a machine you alone use.
# Clients (sbatch, squeue, sinfo, srun, and ReFrame through them) find the
# cluster through SLURM_CONF=DIR/slurm.conf.  Needs root and Slurm 22.05
# (Debian 12: apt-get install slurm-wlm).  Knobs:
#   SLURM_TESTBED_PORT   slurmctld's port; slurmd takes the next one (16817)
#   SLURM_TESTBED_WAIT   seconds to wait for the node to be idle (60)
#
# The node is the real machine (`slurmd -C`), CR_Core: a job gets whole cores,
# and task/affinity binds every task to its cores (srun --cpu-bind=cores).
set -euo pipefail

# shellcheck source=tests/slurm/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

if [ $# -eq 1 ] && [ "$1" = start ]; then
    set -- start "$(mktemp -d "${TMPDIR:-/tmp}/slurm-testbed.XXXXXX")"
fi
[ $# -eq 2 ] || die "usage: $0 start [DIR] | stop DIR | env DIR"
action=$1
dir=$2

port=${SLURM_TESTBED_PORT:-16817}

write_conf() {
    local host node
    host=$(hostname -s)
    # The node as slurmd sees it (CPUs, sockets, cores, threads, memory).
    node=$(slurmd -C | sed -n 's/^\(NodeName=.*\)$/\1/p' | sed 's/ UpTime=.*//')
    [ -n "$node" ] || die "slurmd -C printed no NodeName line"
    cat > "$dir/slurm.conf" <<CONF
# Single-node test cluster of the harness (tests/slurm/testbed.sh).
ClusterName=harness
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
# Both daemons listen on loopback only (not on every address of the machine).
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmdPidFile=$dir/slurmd.pid
SlurmdLogFile=$dir/slurmd.log
SlurmdSpoolDir=$dir/spool
$(slurm_conf_common "$dir")
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=harness Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

start() {
    dir=$(state_dir "$dir")
    # slurm.conf has no quoting: the folder's path must be plain.
    [[ "$dir" =~ ^[A-Za-z0-9._/+-]+$ ]] ||
        die "$dir: the state folder's path may hold only letters, digits and . _ / + - (it goes into slurm.conf unquoted)"
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1024 ] && [ "$port" -lt 65535 ] ||
        die "SLURM_TESTBED_PORT must be a port number from 1024 to 65534, got '$port'"
    [ "$(id -u)" -eq 0 ] || die "the test cluster runs its daemons as root"
    for exe in slurmctld slurmd sinfo sbatch; do
        command -v "$exe" >/dev/null || die "$exe not found (apt-get install slurm-wlm)"
    done
    for daemon in slurmctld slurmd; do
        if [ -n "$(daemon_pid "$dir/$daemon.pid" "$daemon")" ]; then
            die "$dir/$daemon.pid: a daemon of this test cluster already runs (stop it first)"
        fi
    done
    mkdir -p "$dir/spool" "$dir/state"
    write_conf
    # A start that fails half way stops what it started.
    trap 'rc=$?; if [ "$rc" -ne 0 ]; then stop >/dev/null 2>&1 || true; fi' EXIT
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF" -i || die "slurmctld did not start (see $dir/slurmctld.log)"
    slurmd -f "$SLURM_CONF" -N "$(hostname -s)" ||
        die "slurmd did not start (see $dir/slurmd.log)"
    local wait=${SLURM_TESTBED_WAIT:-60} state='' alive=0
    for _ in $(seq 1 "$((wait * 2))"); do
        # Our own daemons must be up (another cluster on the same port would
        # answer sinfo too), and the node idle.
        alive=0
        for daemon in slurmctld slurmd; do
            [ -n "$(daemon_pid "$dir/$daemon.pid" "$daemon")" ] && alive=$((alive + 1))
        done
        state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n1 || true)
        [ "$alive" -eq 2 ] && [ "$state" = idle ] && break
        sleep 0.5
    done
    if [ "$alive" -ne 2 ] || [ "$state" != idle ]; then
        tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
        die "the test cluster is not up after ${wait}s ($alive of 2 daemons running," \
            "node state '${state:-none}'; is port $port taken? see $dir/*.log)"
    fi
    trap - EXIT
    echo "testbed: slurm up in $dir (SLURM_CONF=$SLURM_CONF)"
}

stop() {
    local rc=0
    [ -d "$dir" ] || die "$dir: no such state folder"
    dir=$(state_dir "$dir")
    # First the jobs (a failed test may leave some), so no job step outlives
    # the daemons.
    if [ -n "$(daemon_pid "$dir/slurmctld.pid" slurmctld)" ]; then
        export SLURM_CONF=$dir/slurm.conf
        scancel --partition=harness 2>/dev/null || true
        for _ in $(seq 1 40); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.25
        done
    fi
    for daemon in slurmd slurmctld; do
        stop_daemon "$dir/$daemon.pid" "$daemon" || rc=1
    done
    echo "testbed: slurm stopped ($dir)"
    return "$rc"
}

case "$action" in
    start) start ;;
    stop) stop ;;
    env) echo "export SLURM_CONF=$(printf %q "$(state_dir "$dir")/slurm.conf")" ;;
    *) die "unknown action '$action' (start, stop, env)" ;;
esac
