"""How quiet the machine was during a performance run.

Every performance run wraps its job in ``python -m harnesscore.quiet before
quiet.json`` (after the node lock) and ``... after quiet.json``: each writes a
``snapshot`` (load average, ``/proc/stat``'s CPU times for the steal, the other
processes busy on the job's cores), and the check reads the file (``read_quiet``)
into its perflog fields (``harnesscore.schema``).

``busy`` is ``'true'`` when another process counted on the job's cores in
either snapshot or the steal time reached ``STEAL_BUSY_PCT``, ``'unknown'``
without both snapshots, else ``'false'``.  The load average is recorded but not
judged: its 1-minute mean lags and still counts the ranks of the run before.  A
busy run is kept out of references and cannot fail a fixed band
(docs/pages/statistics.md, "How quiet was the machine").
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from typing import NamedTuple

from .knobs import env_flag
from .schema import field_text

#: share of a core (over the sample interval) from which another process counts
BUSY_SHARE = 0.5
#: steal time (% of the CPU time between the snapshots) from which a run is busy
STEAL_BUSY_PCT = 5.0
#: default sample interval (s); HARNESS_SNAPSHOT_S overrides it, up to MAX_SAMPLE_S
SAMPLE_S = 0.2
MAX_SAMPLE_S = 60.0
#: the snapshot file in the stage directory
QUIET_FILE = 'quiet.json'

_CLK_TCK = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100


def read_loadavg() -> float | None:
    try:
        with open('/proc/loadavg') as fp:
            return float(fp.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_cpu_times() -> list[int] | None:
    """The aggregate ``cpu`` line of /proc/stat (user nice system idle iowait
    irq softirq steal ...), in clock ticks; None where unreadable."""
    try:
        with open('/proc/stat') as fp:
            for line in fp:
                if line.startswith('cpu '):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        return None
    return None


def steal_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """Steal time between two ``cpu`` lines, in % of all CPU time between them;
    None where the kernel reports no steal column or nothing elapsed."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    # guest and guest_nice (9th, 10th) are already counted in user and nice
    total = sum(after[:8]) - sum(before[:8])
    if total <= 0:
        return None
    return 100.0 * (after[7] - before[7]) / total


class _Stat(NamedTuple):
    """The fields a snapshot reads of a /proc/<pid>/stat or task/<tid>/stat line."""
    comm: str
    state: str
    ppid: int
    ticks: int          # utime + stime: of all its threads, or of the one in task/<tid>
    child_ticks: int    # cutime + cstime: of the children it has reaped
    threads: int        # num_threads
    start: int          # starttime: tells a pid reused between the two reads
    cpu: int            # processor: the last CPU of the (main) thread


def _read_stat(path: str) -> _Stat | None:
    try:
        with open(path) as fp:
            text = fp.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'
    lpar, rpar = text.find('('), text.rfind(')')
    if lpar < 0 or rpar < 0:
        return None
    rest = text[rpar + 2:].split()
    try:
        # rest[0] is field 3 (state): field N is rest[N - 3]
        return _Stat(text[lpar + 1:rpar], rest[0], int(rest[1]), int(rest[11]) + int(rest[12]),
                     int(rest[13]) + int(rest[14]), int(rest[17]), int(rest[19]), int(rest[36]))
    except (IndexError, ValueError):
        return None


def _proc_stat(pid: int) -> _Stat | None:
    return _read_stat(f'/proc/{pid}/stat')


#: (state, utime+stime ticks, last cpu) of one thread
_Thread = tuple[str, int, int]


def _threads(pid: int, st: _Stat) -> dict[int, _Thread]:
    """The threads of a process by thread id, each from its task/<tid>/stat (a
    single-threaded one's too: /proc/<pid>/stat counts ended threads as well)."""
    try:
        tids = ([pid] if st.threads <= 1 else
                [int(d) for d in os.listdir(f'/proc/{pid}/task') if d.isdigit()])
    except OSError:
        tids = [pid]
    return {tid: (t.state, t.ticks, t.cpu) for tid in tids
            if (t := _read_stat(f'/proc/{pid}/task/{tid}/stat')) is not None}


def _affinity(pid: int) -> set[int] | None:
    try:
        return set(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return None


def ancestors(pid: int) -> set[int]:
    """pid and every ancestor of it."""
    out = set()
    while pid > 0 and pid not in out:
        out.add(pid)
        st = _proc_stat(pid)
        if st is None:
            break
        pid = st.ppid
    return out


def _runnable(state0: str | None, state: str, ticks0: int, ticks1: int) -> bool:
    """Runnable (R) at both reads, or at one (state0 None: unseen) and CPU time grown."""
    return (state0 == state == 'R') or ('R' in (state0, state) and ticks1 > ticks0)


def _read_all(exclude: set[int]) -> dict[int, tuple[_Stat, dict[int, _Thread]]]:
    pids = [int(d) for d in os.listdir('/proc') if d.isdigit()]
    return {pid: (st, _threads(pid, st)) for pid in pids if pid not in exclude
            and (st := _proc_stat(pid)) is not None}


def _reaped_before(first: dict[int, tuple[_Stat, dict[int, _Thread]]],
                   same: set[int]) -> dict[int, int]:
    """The ticks (own and reaped children's) of the processes of the first read
    that did not last to the second, summed on the nearest ancestor that lasted
    (whose cutime, cstime they go into when it reaps them)."""
    out: dict[int, int] = {}
    for pid, (st, _threads) in first.items():
        if pid in same:
            continue
        parent, seen = st.ppid, {pid}
        while parent in first and parent not in same and parent not in seen:
            seen.add(parent)
            parent = first[parent][0].ppid
        if parent in same:
            out[parent] = out.get(parent, 0) + st.ticks + st.child_ticks
    return out


def _placed(seen: list[int], cores: set[int], pid: int) -> float:
    """The part (0 to 1) of a time no read can place on a core (threads that
    ended, reaped children) that goes to `cores`: that of the CPUs `seen` in
    `cores`; where none was seen, 1 when the affinity of `pid` (which they
    inherit) is within `cores`, else 0."""
    if seen:
        return sum(cpu in cores for cpu in seen) / len(seen)
    allowed = _affinity(pid)
    return 1.0 if allowed and allowed <= cores else 0.0


def _descendant_cpus(pid: int, kids: list[dict[int, list[int]]],
                     reads: list[dict[int, tuple[_Stat, dict[int, _Thread]]]]) -> list[int]:
    """The last CPUs of the descendants of `pid` at each read (`kids`: its children)."""
    cpus = []
    for children, read in zip(kids, reads):
        todo, seen = list(children.get(pid, [])), {pid}
        while todo:
            child = todo.pop()
            if child not in seen:
                seen.add(child)
                cpus.append(read[child][0].cpu)
                todo.extend(children.get(child, []))
    return cpus


def busy_processes(cores: set[int], interval: float, exclude: set[int]) -> list[dict]:
    """Other processes that kept a core of `cores` busy over `interval` seconds.

    A process counts, in this order, when (1) it is on `cores` (its last CPU)
    and was runnable (``_runnable``) or used at least BUSY_SHARE of a core on
    `cores`; or (2) its threads on `cores` were: one runnable, or together at
    least BUSY_SHARE (an OpenMP job, a JVM whose main thread sleeps elsewhere);
    or (3) it is on `cores` and its time there plus the part (``_placed``) of
    what its children used in the interval and it reaped (less
    ``_reaped_before``) reached BUSY_SHARE (a build, a script loop).  A process
    started during the interval counts from zero.  A multi-threaded process's
    time on `cores` is that of its threads there and the part (``_placed``) of
    that of its threads that ended, by their CPU at the first read.
    """
    first = _read_all(exclude)
    start = time.monotonic()
    time.sleep(interval)
    elapsed = time.monotonic() - start
    second = _read_all(exclude)

    def share(ticks: float) -> float:
        return ticks / _CLK_TCK / elapsed if elapsed > 0 else 0.0

    # (3) counts the children's time of the interval only: what a process that
    # ended in it had used by the first read is not (the job's own ranks, seen
    # still ending and then reaped by slurmstepd or init during the 'after')
    same = {pid for pid, (st, _t) in second.items()
            if pid in first and first[pid][0].start == st.start}
    before = _reaped_before(first, same)
    kids: list[dict[int, list[int]]] = [{}, {}]
    for children, read in zip(kids, (first, second)):
        for pid, (st, _t) in read.items():
            children.setdefault(st.ppid, []).append(pid)
    out = []
    # those of the first read first, in its order, then those started since
    order = [pid for pid in first if pid in second] + [pid for pid in second if pid not in first]
    for pid in order:
        st, threads = second[pid]
        st0, threads0 = first.get(pid, (None, {}))
        if st0 is not None and st0.start != st.start:      # the pid was reused
            st0, threads0 = None, {}
        state0 = st0.state if st0 else None
        ticks = st.ticks - (st0.ticks if st0 else 0)    # all its threads, ended ones too
        own = share(ticks)
        placed: float = ticks       # its ticks on `cores`
        if st.threads > 1 or (st0 is not None and st0.threads > 1):
            # never the process's total on its main thread's CPU: each thread
            # where it ran, those that ended where the first read saw them
            used = {tid: t_ticks - threads0.get(tid, (None, 0, -1))[1]
                    for tid, (_state, t_ticks, _cpu) in threads.items()}
            placed = sum(n for tid, n in used.items() if threads[tid][2] in cores)
            ended = ticks - sum(used.values())
            if ended > 0:
                placed += ended * _placed(
                    [t[2] for tid, t in threads0.items() if tid not in threads], cores, pid)
        entry = {'pid': pid, 'comm': st.comm, 'cpu': st.cpu, 'state': st.state,
                 'share': round(own, 2)}
        if st.cpu in cores and (share(placed) >= BUSY_SHARE or _runnable(
                state0, st.state, st0.ticks if st0 else 0, st.ticks)):
            out.append(entry)
            continue
        on_cores = []               # (share, state, cpu, runnable) of its threads on cores
        for tid, (state, t_ticks, cpu) in threads.items():
            if cpu in cores:
                t_state0, t_ticks0, _cpu0 = threads0.get(tid, (None, 0, -1))
                on_cores.append((share(t_ticks - t_ticks0), state, cpu,
                                 _runnable(t_state0, state, t_ticks0, t_ticks)))
        if on_cores and (any(t[3] for t in on_cores)
                         or sum(t[0] for t in on_cores) >= BUSY_SHARE):
            _share, state, cpu, _run = max(on_cores, key=lambda t: (t[3], t[0]))
            out.append({**entry, 'cpu': cpu, 'state': state})
            continue
        if st.cpu not in cores:
            continue
        reaped = st.child_ticks - (st0.child_ticks if st0 else 0) - before.get(pid, 0)
        total = share(placed)
        if reaped > 0:
            # where its children ran: where the reads saw its descendants
            total += share(reaped * _placed(_descendant_cpus(pid, kids, [first, second]),
                                            cores, pid))
        if total >= BUSY_SHARE:
            out.append({**entry, 'share': round(total, 2)})
    return out


def snapshot(interval: float | None = None) -> dict:
    """One snapshot of the machine from this process's point of view."""
    if interval is None:
        interval = sample_interval()
    cores = _affinity(0) or set(range(os.cpu_count() or 1))
    return {
        'time': time.time(),
        'load': read_loadavg(),
        'cpu': read_cpu_times(),
        'cores': sorted(cores),
        'busy': busy_processes(cores, interval, ancestors(os.getpid())),
    }


def record(stage: str, path: str) -> None:
    """Add the `stage` ('before' or 'after') snapshot to the file at `path`."""
    if stage not in ('before', 'after'):
        raise ValueError(f"stage must be 'before' or 'after', got {stage!r}")
    data: dict = {}
    if stage == 'after' and os.path.exists(path):
        with open(path) as fp:
            data = json.load(fp)
    data[stage] = snapshot()
    tmp = f'{path}.tmp'
    with open(tmp, 'w') as fp:
        json.dump(data, fp)
    os.replace(tmp, path)


def summarise(data: dict | None) -> dict[str, object]:
    """The perflog fields of a quiet file's content (None: no file)."""
    if not data or 'before' not in data or 'after' not in data:
        got = 'no snapshot' if not data else f"only the {', '.join(sorted(data))} snapshot"
        return {'load_before': -1.0, 'load_after': -1.0, 'steal_pct': '',
                'busy_procs': -1, 'busy': 'unknown', 'busy_detail': f'not recorded ({got})'}
    before, after = data['before'], data['after']
    steal = steal_percent(before.get('cpu'), after.get('cpu'))
    procs: dict[int, dict] = {}
    for snap in (before, after):
        for proc in snap.get('busy') or []:
            procs.setdefault(int(proc['pid']), proc)
    # the busiest first: the detail is cut at 300 characters
    reasons = [f"pid {p['pid']} {p['comm']} on cpu {p['cpu']} ({100 * p['share']:.0f}%)"
               for p in sorted(procs.values(), key=lambda p: -p['share'])]
    if steal is not None and steal >= STEAL_BUSY_PCT:
        reasons.append(f'steal {steal:.1f}%')
    load_b, load_a = before.get('load'), after.get('load')
    return {
        'load_before': -1.0 if load_b is None else float(load_b),
        'load_after': -1.0 if load_a is None else float(load_a),
        'steal_pct': '' if steal is None else f'{steal:.2f}',
        'busy_procs': len(procs),
        'busy': 'true' if reasons else 'false',
        # the detail goes into a '|'-separated perflog line: a process name may hold '|',
        # '\n' or '\r' (Linux allows them), which would split the line
        'busy_detail': field_text('; '.join(reasons)),
    }


def read_quiet(path: str) -> dict[str, object]:
    """The perflog fields from a quiet file (see ``summarise``)."""
    try:
        with open(path) as fp:
            data = json.load(fp)
    except FileNotFoundError:
        data = None
    except (OSError, ValueError) as err:
        return {**summarise(None),
                'busy_detail': field_text(f'unreadable {os.path.basename(path)}: {err}')}
    return summarise(data)


def prologue(path: str) -> str:
    """The job-script line that records the 'before' snapshot."""
    return f'{shlex.quote(sys.executable)} -m harnesscore.quiet before {shlex.quote(path)} || true'


def epilogue(path: str) -> str:
    """The job-script line that records the 'after' snapshot; it keeps the
    exit status of the command before it."""
    return (f'_harness_rc=$?; {shlex.quote(sys.executable)} -m harnesscore.quiet after '
            f'{shlex.quote(path)} || true; (exit $_harness_rc)')


def enabled() -> bool:
    """HARNESS_SNAPSHOTS=0 turns the snapshots off (every run is then 'unknown')."""
    return env_flag('HARNESS_SNAPSHOTS', default=True)


def sample_interval() -> float:
    """HARNESS_SNAPSHOT_S, seconds in (0, MAX_SAMPLE_S] (default SAMPLE_S)."""
    text = os.environ.get('HARNESS_SNAPSHOT_S', '').strip() or str(SAMPLE_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = float('nan')
    if not 0 < seconds <= MAX_SAMPLE_S:     # NaN and inf fail too
        raise ValueError(f'HARNESS_SNAPSHOT_S must be seconds above 0 and at most '
                         f'{MAX_SAMPLE_S:g}, got {text!r}')
    return seconds


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ('before', 'after', 'show'):
        print('usage: python -m harnesscore.quiet before|after|show FILE', file=sys.stderr)
        return 2
    if args[0] == 'show':
        print(json.dumps(read_quiet(args[1]), indent=1))
    else:
        record(args[0], args[1])
    return 0


if __name__ == '__main__':
    sys.exit(main())
