#!/usr/bin/env bash
# A multi-node Slurm cluster on this machine: every node is a slurmd in its own
# network and UTS namespace (its own hostname and addresses), with two links
# to the other nodes, so that a partition can be an interconnect.
#
#   tests/slurm/cluster.sh start [DIR] [--nodes N] [--rate RATE] [--cpus-per-node C]
#   tests/slurm/cluster.sh stop DIR      stop everything DIR/cluster.rec records
#   tests/slurm/cluster.sh status DIR    namespaces, daemons, links, sinfo
#   tests/slurm/cluster.sh env DIR       print the lines that point clients (and
#                                        ReFrame's test-cluster system) at it
#   tests/slurm/cluster.sh exec DIR CMD...   run CMD in the controller's namespace
#
# The network (nothing of it is visible outside the namespaces made here):
#
#   hc<id>-hub     slurmctld (hostname "hub"), bridges brfast and brslow
#                  (10.250.1.254 and 10.250.2.254)
#   hc<id>-n<i>    slurmd of node<i> (hostname "node<i>"):
#                    fast0  10.250.1.<i>/24  a veth to brfast, unshaped
#                    slow0  10.250.2.<i>/24  a veth to brslow, shaped by tc tbf
#                           to RATE (default 1gbit) on its way out of the node
#
# Every daemon (and so every job) sees DIR/hosts as /etc/hosts (a bind mount
# in a mount namespace of its own), so the nodes resolve each other's names; the names
# resolve to the fast link's addresses, and the MPI stacks are pinned to a link
# by its interface name (fast0 or slow0), see DIR/cluster.env.
#
# Cores: with at least 2 CPUs per node (nproc >= 2 N), or --cpus-per-node C,
# every node has CPUs of its own (C = nproc / N by default): each node is the
# whole machine with the other nodes' CPUs set aside by Slurm's core
# specialisation (CpuSpecList), so no job gets them and task/affinity binds
# every task to the node's own CPUs (slurmd itself then runs on the set-aside
# ones, as Slurm does with specialised cores).  Otherwise every node has all
# the machine's CPUs and the nodes share them (SHARED_CORES=1 in
# DIR/cluster.env: runs there test the path, never the speed).
#
# Clients: the controller listens only inside the hub namespace.  `env`
# prints SLURM_CONF and a PATH with DIR/bin first, where sbatch, srun, squeue,
# ... enter the hub namespace when called from outside the cluster (and run
# directly inside a job on a node).  ReFrame needs nothing else.
#
# Everything started or made is recorded in DIR (cluster.rec: namespaces;
# pid files) before it is made, and `stop` removes exactly
# that: it stops the daemons, ends every process left in the recorded
# namespaces (jobs of a failed test), deletes the namespaces (and with them
# the veths and bridges).  A failed start undoes itself.
#
# Security: as testbed.sh, for a machine you alone use (root, auth/none).
# DIR must be your own and writable by nobody else; default: mktemp -d.
set -euo pipefail

# shellcheck source=tests/slurm/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

FAST_NET=10.250.1
SLOW_NET=10.250.2
HUB_HOST=254
CTLD_PORT=6817
SLURMD_PORT=6818
NS_RE='^hc[0-9a-f]{6}-(hub|n[0-9]{1,3})$'
MODULES_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../config/modules/files" && pwd)

usage() {
    die "usage: $0 start [DIR] [--nodes N] [--rate RATE] [--cpus-per-node C] | stop DIR | status DIR | env DIR | exec DIR CMD..."
}

[ $# -ge 1 ] || usage
action=$1
shift
dir=''
if [ $# -ge 1 ] && [ "${1#--}" = "$1" ]; then
    dir=$1
    shift
fi

# ---- records ----------------------------------------------------------------

# record KIND VALUE: append to DIR/cluster.rec (before the thing is made).
record() { printf '%s %s\n' "$1" "$2" >> "$dir/cluster.rec"; }

# recorded KIND: the values of that kind, checked against what this script
# makes (a namespace name of ours, the /etc/netns folder of one of them).
recorded() {
    local kind value
    [ -f "$dir/cluster.rec" ] || return 0
    while read -r kind value; do
        [ "$kind" = "$1" ] || continue
        case "$kind" in
            netns) [[ "$value" =~ $NS_RE ]] || die "cluster.rec: not a namespace of ours: '$value'" ;;
            *) continue ;;
        esac
        echo "$value"
    done < "$dir/cluster.rec"
}

# setting KEY: a value from DIR/cluster.env (read as data, never run).
setting() {
    [ -f "$dir/cluster.env" ] || die "$dir/cluster.env missing: is this a cluster's folder?"
    sed -n "s/^$1=//p" "$dir/cluster.env" | tail -n1
}

# ---- start ------------------------------------------------------------------

nodes=2
rate=1gbit
cpus_per_node=''

parse_start_options() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes) [ $# -ge 2 ] || usage; nodes=$2; shift 2 ;;
            --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
            --cpus-per-node) [ $# -ge 2 ] || usage; cpus_per_node=$2; shift 2 ;;
            *) die "unknown option '$1'" ;;
        esac
    done
    [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] ||
        die "--nodes must be a number from 1 to 200, got '$nodes'"
    [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$ ]] ||
        die "--rate must be a tc rate such as 100mbit or 1gbit (kbit, mbit, gbit), got '$rate'"
    [ -z "$cpus_per_node" ] || [[ "$cpus_per_node" =~ ^[1-9][0-9]*$ ]] ||
        die "--cpus-per-node must be a positive number, got '$cpus_per_node'"
}

# rate_bits RATE: bits per second.
rate_bits() {
    awk -v r="$1" 'BEGIN {
        n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
        m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : 1e9
        printf "%.0f\n", n * m }'
}

# cpu_order: the machine's CPUs in Slurm's abstract order (socket, core,
# thread), one a line: line k is the machine id of abstract CPU k.
cpu_order() {
    local list part cpu topo
    list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
    IFS=, read -ra parts <<< "$list"
    for part in "${parts[@]}"; do
        for cpu in $(seq "${part%-*}" "${part#*-}"); do
            topo=/sys/devices/system/cpu/cpu$cpu/topology
            printf '%s %s %s\n' "$(cat "$topo/physical_package_id" 2>/dev/null || echo 0)" \
                "$(cat "$topo/core_id" 2>/dev/null || echo "$cpu")" "$cpu"
        done
    done | sort -n -k1,1 -k2,2 -k3,3 | awk '{print $3}'
}

write_conf() {
    local i machine
    machine=$(slurmd -C | sed -n 's/^NodeName=\S* //p' | sed 's/ UpTime=.*//')
    [ -n "$machine" ] || die "slurmd -C printed no NodeName line"
    cat > "$dir/slurm.conf" <<CONF
# Multi-node test cluster of the harness (tests/slurm/cluster.sh), id $id.
ClusterName=hc$id
SlurmctldHost=hub($FAST_NET.$HUB_HOST)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmdLogFile=$dir/slurmd-%n.log
SlurmdSpoolDir=$dir/spool-%n
# Each node's own temporary folder (the nodes share /tmp; srun's PMIx plugin
# makes a folder per step there, named the same on every node).
TmpFS=$dir/tmp-%n
$(slurm_conf_common "$dir")
SlurmdTimeout=60
CONF
    for i in $(seq 1 "$nodes"); do
        # Every node is the whole machine as slurmd sees it; with cores of
        # its own, the others' are set aside (CpuSpecList, abstract ids): no
        # job gets them, and task/affinity binds every task to the node's own.
        echo "NodeName=node$i NodeAddr=$FAST_NET.$i $machine${node_spec[$i]:+ CpuSpecList=${node_spec[$i]}} State=UNKNOWN" >> "$dir/slurm.conf"
    done
    cat >> "$dir/slurm.conf" <<CONF
PartitionName=fast Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=slow Nodes=node[1-$nodes] Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

write_hosts() {
    local i
    {
        echo "# Hosts of test cluster hc$id (tests/slurm/cluster.sh)"
        echo "127.0.0.1 localhost"
        echo "$FAST_NET.$HUB_HOST hub"
        for i in $(seq 1 "$nodes"); do
            echo "$FAST_NET.$i node$i"
            echo "$SLOW_NET.$i node$i-slow"
        done
    }
}

write_clients() {
    local exe real hostns cand
    mkdir -p "$dir/bin"
    hostns=$(readlink /proc/self/ns/net)
    for exe in sbatch srun salloc squeue scancel sinfo scontrol sacct sstat; do
        # Slurm's own program, not the client of another test cluster on PATH.
        real=''
        for cand in $(type -ap "$exe"); do
            if ! grep -q '^# .* of test cluster hc' "$cand" 2>/dev/null; then
                real=$cand
                break
            fi
        done
        [ -n "$real" ] || continue
        cat > "$dir/bin/$exe" <<WRAP
#!/bin/sh
# $exe of test cluster hc$id: from outside the cluster (the namespace that
# started it) through the controller's namespace; inside a node, directly.
if [ "\$(readlink /proc/self/ns/net)" = '$hostns' ]; then
    exec nsenter --net=/run/netns/'$hub' -- '$real' "\$@"
fi
exec '$real' "\$@"
WRAP
        chmod 0755 "$dir/bin/$exe"
    done
}

# in_ns NS HOSTNAME CMD...: run CMD in network namespace NS with its own
# hostname and a private mount namespace where /sys is the namespace's own
# (as `ip netns exec` makes it: UCX and hwloc list /sys/class/net), the
# machine's cgroup mounts are kept under it (slurmd needs them), /etc/hosts
# is the cluster's (DIR/hosts) and /dev/shm is a tmpfs of its own, as a real
# node's is (Open MPI's vader and MPICH's nemesis segments of one node are
# not seen, or cleaned up, by another).
in_ns() {
    local ns=$1 host=$2
    shift 2
    nsenter --net="/run/netns/$ns" -- unshare --mount --propagation private --uts -- \
        sh -c 'set -e
               hostname "$1"
               mount --rbind /sys/fs/cgroup "$2"
               mount -t sysfs sysfs /sys
               mount --move "$2" /sys/fs/cgroup
               mount --bind "$3" /etc/hosts
               mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
               shift 3
               exec "$@"' sh "$host" "$dir/mnt" "$dir/hosts" "$@"
}

# links_up NS HOST FASTDEV SLOWDEV: in namespace NS, address .HOST on the fast
# network on FASTDEV and on the slow one on SLOWDEV, both links up (the hub's
# bridges and a node's veth ends alike).
links_up() {
    local ns=$1 host=$2 fast=$3 slow=$4
    ip -n "$ns" addr add "$FAST_NET.$host/24" dev "$fast"
    ip -n "$ns" addr add "$SLOW_NET.$host/24" dev "$slow"
    ip -n "$ns" link set "$fast" up
    ip -n "$ns" link set "$slow" up
}

start() {
    parse_start_options "$@"
    if [ -z "$dir" ]; then
        dir=$(mktemp -d "${TMPDIR:-/tmp}/slurm-cluster.XXXXXX")
    fi
    dir=$(state_dir "$dir")
    # slurm.conf has no quoting: the folder's path must be plain.
    [[ "$dir" =~ ^[A-Za-z0-9._/+-]+$ ]] ||
        die "$dir: the state folder's path may hold only letters, digits and . _ / + - (it goes into slurm.conf unquoted)"
    [ "$(id -u)" -eq 0 ] || die "the test cluster needs root (network namespaces, daemons as root)"
    for exe in ip tc unshare nsenter mount slurmctld slurmd sinfo sbatch srun; do
        command -v "$exe" >/dev/null ||
            die "$exe not found (apt-get install slurm-wlm iproute2 util-linux)"
    done
    local ns
    for ns in $(recorded netns); do
        if ip netns list | grep -q "^$ns\( \|$\)"; then
            die "$dir/cluster.rec: the test cluster of this folder still runs (namespace $ns; stop it first)"
        fi
    done
    # What an earlier cluster left in this folder (state of another ClusterName).
    rm -rf -- "$dir/cluster.rec" "$dir/cluster.env" "$dir/state" "$dir"/spool-node* \
        "$dir"/tmp-node* "$dir/bin"

    # Cores: own cores per node where there are at least 2 per node.
    local -a cpus
    mapfile -t cpus < <(cpu_order)
    local ncpu=${#cpus[@]} i
    shared=0
    node_cpus=()
    node_spec=()
    if [ -z "$cpus_per_node" ]; then
        if [ "$ncpu" -ge $((2 * nodes)) ]; then
            cpus_per_node=$((ncpu / nodes))
        else
            shared=1
        fi
    elif [ $((cpus_per_node * nodes)) -gt "$ncpu" ]; then
        die "--cpus-per-node $cpus_per_node x $nodes nodes needs $((cpus_per_node * nodes)) CPUs; this machine gives $ncpu"
    fi
    if [ "$shared" -eq 0 ]; then
        local first last
        for i in $(seq 1 "$nodes"); do
            first=$(((i - 1) * cpus_per_node))
            last=$((first + cpus_per_node - 1))
            node_cpus[$i]=$(printf '%s\n' "${cpus[@]:$first:$cpus_per_node}" | paste -sd,)
            node_spec[$i]=$(seq 0 $((ncpu - 1)) | awk -v a="$first" -v b="$last" \
                            '$1 < a || $1 > b' | paste -sd,)
        done
    else
        cpus_per_node=$ncpu
    fi

    id=$(od -An -tx1 -N3 /dev/urandom | tr -d ' \n')
    hub=hc$id-hub
    # A start that fails half way removes what it made.
    trap 'rc=$?; if [ "$rc" -ne 0 ]; then stop >/dev/null 2>&1 || true; fi' EXIT

    local bits burst
    bits=$(rate_bits "$rate")
    # tbf's bucket: 2 ms at the rate, at least 64 KiB (one GSO packet).
    burst=$(( bits / 8 / 500 ))
    [ "$burst" -ge 65536 ] || burst=65536

    record netns "$hub"
    ip netns add "$hub"
    ip -n "$hub" link set lo up
    ip -n "$hub" link add brfast type bridge
    ip -n "$hub" link add brslow type bridge
    links_up "$hub" "$HUB_HOST" brfast brslow
    for i in $(seq 1 "$nodes"); do
        local ns=hc$id-n$i
        record netns "$ns"
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        ip -n "$hub" link add "f$i" type veth peer name fast0 netns "$ns"
        ip -n "$hub" link add "s$i" type veth peer name slow0 netns "$ns"
        ip -n "$hub" link set "f$i" master brfast up
        ip -n "$hub" link set "s$i" master brslow up
        links_up "$ns" "$i" fast0 slow0
        ip netns exec "$ns" tc qdisc add dev slow0 root tbf rate "$rate" burst "$burst" \
            latency 50ms
    done
    write_hosts > "$dir/hosts"
    mkdir -p "$dir/state" "$dir/mnt"
    for i in $(seq 1 "$nodes"); do mkdir -p "$dir/spool-node$i" "$dir/tmp-node$i"; done
    write_conf
    write_clients
    cat > "$dir/cluster.env" <<ENV
# Test cluster hc$id (tests/slurm/cluster.sh); read as data.
SLURM_CONF=$dir/slurm.conf
CLIENT_BIN=$dir/bin
NODES=$nodes
HOSTNAMES=$(seq -f 'node%g' -s, 1 "$nodes")
CPUS_PER_NODE=$cpus_per_node
SHARED_CORES=$shared
FAST_IFACE=fast0
SLOW_IFACE=slow0
FAST_NET=$FAST_NET.0/24
SLOW_NET=$SLOW_NET.0/24
SLOW_RATE=$rate
SLOW_RATE_BITS=$bits
SLOW_BURST_BYTES=$burst
HUB_NAMESPACE=$hub
NODE_NAMESPACES=$(seq -f "hc$id-n%g" -s, 1 "$nodes")
PARTITIONS=fast,slow
ENV
    for i in $(seq 1 "$nodes"); do
        echo "NODE${i}_CPUS=${node_cpus[$i]:-$(printf '%s\n' "${cpus[@]}" | paste -sd,)}" >> "$dir/cluster.env"
    done

    export SLURM_CONF=$dir/slurm.conf
    in_ns "$hub" hub slurmctld -f "$SLURM_CONF" -i ||
        die "slurmctld did not start (see $dir/slurmctld.log)"
    for i in $(seq 1 "$nodes"); do
        in_ns "hc$id-n$i" "node$i" slurmd -f "$SLURM_CONF" ||
            die "slurmd of node$i did not start (see $dir/slurmd-node$i.log)"
    done
    local wait=${SLURM_TESTBED_WAIT:-60} idle=0 alive=0
    for _ in $(seq 1 "$((wait * 2))"); do
        alive=0
        [ -n "$(daemon_pid "$dir/slurmctld.pid" slurmctld)" ] && alive=1
        for i in $(seq 1 "$nodes"); do
            [ -n "$(daemon_pid "$dir/slurmd-node$i.pid" slurmd)" ] && alive=$((alive + 1))
        done
        idle=$("$dir/bin/sinfo" -h -N -p fast -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
        [ "$alive" -eq $((nodes + 1)) ] && [ "$idle" -eq "$nodes" ] && break
        sleep 0.5
    done
    if [ "$alive" -ne $((nodes + 1)) ] || [ "$idle" -ne "$nodes" ]; then
        tail -n 20 "$dir"/*.log >&2 || true
        die "the test cluster is not up after ${wait}s ($alive of $((nodes + 1)) daemons running, $idle of $nodes nodes idle; see $dir/*.log)"
    fi
    trap - EXIT
    if [ "$shared" -eq 1 ]; then
        echo "cluster: $nodes nodes share the machine's $ncpu cores (runs are oversubscribed)"
    else
        for i in $(seq 1 "$nodes"); do echo "cluster: node$i on CPUs ${node_cpus[$i]}"; done
    fi
    echo "cluster: slurm up in $dir: $nodes nodes, links fast0 (unshaped), slow0 ($rate)"
    echo "cluster: clients: eval \"\$($0 env $dir)\""
}

# ---- stop -------------------------------------------------------------------

stop() {
    local rc=0 ns pids f
    [ -d "$dir" ] || die "$dir: no such state folder"
    dir=$(state_dir "$dir")
    # Jobs first, through the controller, so no step outlives the daemons:
    # cancel them and wait until the nodes run nothing but their slurmd.
    if [ -n "$(daemon_pid "$dir/slurmctld.pid" slurmctld)" ] && [ -x "$dir/bin/scancel" ]; then
        SLURM_CONF=$dir/slurm.conf "$dir/bin/scancel" --partition=fast 2>/dev/null || true
        SLURM_CONF=$dir/slurm.conf "$dir/bin/scancel" --partition=slow 2>/dev/null || true
        local busy
        for _ in $(seq 1 60); do
            busy=0
            for ns in $(recorded netns); do
                [ "${ns##*-}" != hub ] || continue
                [ "$(ip netns pids "$ns" 2>/dev/null | wc -l)" -le 1 ] || busy=1
            done
            [ "$busy" -eq 0 ] && break
            sleep 0.25
        done
    fi
    for f in "$dir"/slurmd-*.pid; do
        [ -e "$f" ] || continue
        stop_daemon "$f" slurmd || rc=1
    done
    stop_daemon "$dir/slurmctld.pid" slurmctld || rc=1
    # Whatever still runs in the namespaces made here (job steps of a failed
    # test, a daemon that lost its pid file) ends with them.
    for ns in $(recorded netns); do
        ip netns list | grep -q "^$ns\( \|$\)" || continue
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            for _ in $(seq 1 20); do
                pids=$(ip netns pids "$ns" 2>/dev/null || true)
                [ -z "$pids" ] && break
                sleep 0.25
            done
            if [ -n "$pids" ]; then
                printf 'cluster: killed what still ran in %s: %s\n' "$ns" "$(echo $pids)" >&2
                # shellcheck disable=SC2086
                kill -KILL $pids 2>/dev/null || true
            fi
        fi
        ip netns del "$ns" || rc=1
    done
    for ns in $(recorded netns); do
        if ip netns list | grep -q "^$ns\( \|$\)"; then
            echo "cluster: namespace $ns is still there" >&2
            rc=1
        fi
    done
    [ "$rc" -ne 0 ] || rm -f -- "$dir/cluster.rec"
    echo "cluster: stopped ($dir)"
    return "$rc"
}

# ---- status, env, exec --------------------------------------------------------

status() {
    local ns up=0
    dir=$(state_dir "$dir")
    for ns in $(recorded netns); do
        if ip netns list | grep -q "^$ns\( \|$\)"; then
            echo "namespace $ns: present"
            up=$((up + 1))
        else
            echo "namespace $ns: missing"
        fi
    done
    [ "$up" -gt 0 ] || { echo "no test cluster runs from $dir"; return 1; }
    for f in "$dir/slurmctld.pid" "$dir"/slurmd-*.pid; do
        [ -e "$f" ] || continue
        local name=slurmd
        [ "${f##*/}" = slurmctld.pid ] && name=slurmctld
        echo "${f##*/}: ${name} $(daemon_pid "$f" "$name" | sed 's/^/pid /')"
    done
    for ns in $(setting NODE_NAMESPACES | tr , ' '); do
        echo "$ns slow0: $(ip netns exec "$ns" tc qdisc show dev slow0 | head -n1)"
    done
    SLURM_CONF=$dir/slurm.conf "$dir/bin/sinfo" -N -o '%N %P %T %C'
}

case "$action" in
    start) start "$@" ;;
    stop) [ -n "$dir" ] && [ $# -eq 0 ] || usage; stop ;;
    status) [ -n "$dir" ] && [ $# -eq 0 ] || usage; status ;;
    env)
        [ -n "$dir" ] && [ $# -eq 0 ] || usage
        dir=$(state_dir "$dir")
        printf 'export SLURM_CONF=%q\n' "$(setting SLURM_CONF)"
        printf 'export PATH=%q:"$PATH"\n' "$(setting CLIENT_BIN)"
        # config/settings.py: the test-cluster system reads this cluster.
        printf 'export HARNESS_TEST_CLUSTER=%q\n' "$dir"
        # Lmod for ReFrame (modules_system lmod) and the stacks' modules.
        if [ -x /usr/share/lmod/lmod/libexec/lmod ]; then
            printf 'export LMOD_CMD=%q\n' /usr/share/lmod/lmod/libexec/lmod
        fi
        printf 'export MODULEPATH=%q"${MODULEPATH:+:$MODULEPATH}"\n' "$MODULES_DIR"
        ;;
    exec)
        [ -n "$dir" ] && [ $# -ge 1 ] || usage
        dir=$(state_dir "$dir")
        [ "${1:-}" != -- ] || shift
        exec nsenter --net="/run/netns/$(setting HUB_NAMESPACE)" -- \
            env SLURM_CONF="$(setting SLURM_CONF)" PATH="$(setting CLIENT_BIN):$PATH" "$@"
        ;;
    *) die "unknown action '$action' (start, stop, status, env, exec)" ;;
esac
