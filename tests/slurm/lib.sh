# Shared by tests/slurm/testbed.sh and tests/slurm/cluster.sh (sourced, not run).
#
# The test clusters run their daemons as root and later act on what their
# state folder says (pid files they kill, namespaces they delete), so the
# folder must be the user's own and closed to everyone else.

die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# state_dir DIR: create DIR (mode 0700) if it is missing, otherwise check it;
# print its absolute path.  Refuses a symbolic link, a folder owned by
# someone else, and a folder that its group or others can write to.
state_dir() {
    local dir=$1 owner mode
    [ -n "$dir" ] || die "empty state folder"
    if [ ! -e "$dir" ] && [ ! -L "$dir" ]; then
        # Only the last component is created: the parent must exist.
        mkdir -m 0700 -- "$dir" || die "cannot create the state folder $dir"
    fi
    [ -L "$dir" ] && die "$dir: the state folder is a symbolic link; give the folder itself"
    [ -d "$dir" ] || die "$dir: the state folder is not a directory"
    owner=$(stat -c %u -- "$dir")
    mode=$(stat -c %a -- "$dir")
    [ "$owner" = "$(id -u)" ] ||
        die "$dir: the state folder belongs to uid $owner, not to you (uid $(id -u)); use a folder of your own (default: a new private mktemp -d)"
    # Group or others may write (mode bits 020 or 002): anyone could plant pid files.
    if (( (8#$mode & 8#022) != 0 )); then
        die "$dir: the state folder is writable by others (mode $mode); chmod go-w it or use a new private one (default: mktemp -d)"
    fi
    (cd -- "$dir" && pwd -P)
}

# daemon_pid PIDFILE NAME: the pid in PIDFILE if that process is running and
# is NAME (checked in /proc, so a stale pid reused by another program is
# never signalled); nothing otherwise.
daemon_pid() {
    local pidfile=$1 name=$2 pid comm
    [ -f "$pidfile" ] && [ ! -L "$pidfile" ] || return 0
    pid=$(head -c 32 -- "$pidfile" | tr -d '[:space:]')
    [[ "$pid" =~ ^[1-9][0-9]*$ ]] || return 0
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
    [ "$comm" = "$name" ] && echo "$pid"
    return 0
}

# stop_daemon PIDFILE NAME: TERM, then KILL after 10 s; 1 if it needed KILL.
stop_daemon() {
    local pidfile=$1 name=$2 pid
    pid=$(daemon_pid "$pidfile" "$name")
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do
            [ -d "/proc/$pid" ] || break
            sleep 0.25
        done
        if [ -d "/proc/$pid" ] && ! grep -q '^State:.*zombie' "/proc/$pid/status" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            printf '%s: %s (pid %s) did not stop on TERM: killed\n' "${0##*/}" "$name" "$pid" >&2
            rm -f -- "$pidfile"
            return 1
        fi
    fi
    rm -f -- "$pidfile"
    return 0
}

# slurm_conf_common DIR: the slurm.conf lines both test clusters share (no
# authentication: a cluster for a machine you alone use; daemons as root;
# state, logs and the job log under DIR).
slurm_conf_common() {
    local dir=$1
    cat <<CONF
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
MailProg=/bin/true
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
StateSaveLocation=$dir/state
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
AccountingStorageType=accounting_storage/none
InactiveLimit=0
KillWait=5
MinJobAge=60
CONF
}
