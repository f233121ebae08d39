"""Noisy machines: quietness snapshots (harnesscore.quiet), the one rule on
fixed bands (harnesscore.bands), the rounds of RingOsuAccuracy and
MdLammpsBenchmark (harnesscore.rounds) and the nightly's judgements
(config/nightly.py).  No ReFrame session here (see test_noise_sessions.py).

OSU is not installed on the machine these tests were written on: the ring
against OSU is tested on recorded outputs (tests/data/ring_osu/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import reframe.utility.sanity as sn
from harnesscore import bands, quiet, rounds, stats
from harnesscore.schema import fields_after, header_fields
from perflog_writer import LIBS, T0

DATA = Path(__file__).parent / 'data'
REPO = Path(__file__).resolve().parent.parent


# ---- busy processes ------------------------------------------------------------

@pytest.fixture
def two_busy_processes() -> Iterator[list[int]]:
    """Two `python -c 'while True: pass'`, killed after the test."""
    procs = [subprocess.Popen([sys.executable, '-c', 'while True: pass'])
             for _ in range(2)]
    try:
        time.sleep(0.3)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


@pytest.fixture
def two_cores() -> tuple[int, int]:
    """Two cores of this process's: the job's and another one (skipped with fewer)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip('needs two cores')
    return cores[0], cores[1]


@contextmanager
def _running(cmd: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """`cmd` started in a session of its own, killed with its whole session after the block."""
    proc = subprocess.Popen(cmd, start_new_session=True, text=True, **popen)
    try:
        yield proc
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)


@contextmanager
def _worker_thread(main_core: int, worker_core: int) -> Iterator[subprocess.Popen[str]]:
    """A Python process whose main thread sleeps on `main_core` while a worker thread spins
    on `worker_core`: it prints "ready" once the worker has spun 0.6 s of CPU; a line on its
    stdin ends the worker (the process sleeps on, 30 s)."""
    code = ('import os, sys, threading, time\n'
            f'os.sched_setaffinity(0, {{{main_core}}})\n'
            'stop = threading.Event()\n'
            'def spin():\n'
            f'    os.sched_setaffinity(0, {{{worker_core}}})\n'
            '    told = False\n'
            '    while not stop.is_set():\n'
            '        if not told and time.thread_time() >= 0.6:\n'
            '            print("ready", flush=True); told = True\n'
            't = threading.Thread(target=spin); t.start()\n'
            'sys.stdin.readline(); stop.set(); t.join(); time.sleep(30)\n')
    with _running([sys.executable, '-c', code], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE) as proc:
        yield proc


def test_two_busy_processes_make_the_run_busy(two_busy_processes, tmp_path):
    path = str(tmp_path / 'quiet.json')
    quiet.record('before', path)
    quiet.record('after', path)
    data = json.loads(Path(path).read_text())
    pids = {p['pid'] for stage in ('before', 'after') for p in data[stage]['busy']}
    assert set(two_busy_processes) <= pids, data
    fields = quiet.read_quiet(path)
    assert fields['busy'] == 'true'
    assert int(fields['busy_procs']) >= 2
    assert str(fields['busy_detail']).startswith('pid ')
    assert float(fields['load_before']) >= 0 and float(fields['load_after']) >= 0
    assert '|' not in str(fields['busy_detail'])


def test_a_snapshot_never_counts_itself_its_ancestors_or_other_cores(two_busy_processes):
    mine = quiet.ancestors(os.getpid())
    assert os.getpid() in mine and os.getppid() in mine
    found = quiet.busy_processes(set(range(os.cpu_count() or 1)), 0.3, mine)
    assert not mine & {p['pid'] for p in found}
    # no core of the job: nothing on its cores
    assert quiet.busy_processes(set(), 0.3, mine) == []


def test_a_loop_of_short_lived_processes_makes_the_run_busy():
    # a build or a script loop: each process ends within the interval, the
    # parent shell sleeps; its reaped children's time and the newest child count
    with _running(['timeout', '20', 'sh', '-c',
                   'while :; do timeout 0.1 sh -c "while :; do :; done"; done']) as loop:
        time.sleep(0.3)
        mine = quiet.ancestors(os.getpid())
        cores = set(range(os.cpu_count() or 1))
        saw = 0
        for _ in range(3):
            found = quiet.busy_processes(cores, 0.3, mine)
            # the loop's shell or a process started since
            saw += any(p['pid'] >= loop.pid and p['comm'] in ('sh', 'timeout') for p in found)
        assert saw >= 2


def test_a_busy_thread_on_the_jobs_core_makes_the_run_busy(two_cores):
    # an OpenMP job, a JVM: the main thread sleeps on another core than the job's
    job_core, other = two_cores
    with _worker_thread(main_core=other, worker_core=job_core) as proc:
        time.sleep(0.5)
        found = quiet.busy_processes({job_core}, 0.3, quiet.ancestors(os.getpid()))
        assert [(p['cpu'], p['state']) for p in found if p['pid'] == proc.pid] == [(job_core, 'R')]


def _stat(ppid: int, ticks: int = 0, child_ticks: int = 0, cpu: int = 0, threads: int = 1,
          state: str = 'S') -> quiet._Stat:
    return quiet._Stat('sh', state, ppid, ticks, child_ticks, threads, 7, cpu)


#: a read of /proc: pid -> its /proc/<pid>/stat (single-threaded) or (that, its threads)
_Read = dict[int, quiet._Stat | tuple[quiet._Stat, dict[int, tuple[str, int, int]]]]


def _busy_on_cpu0(monkeypatch, first: _Read, second: _Read) -> list[dict]:
    """quiet.busy_processes on cpu 0 of /proc faked as two reads 0.2 s apart (20 ticks =
    one core)."""
    def with_threads(pid: int, proc: quiet._Stat | tuple) -> tuple[quiet._Stat, dict]:
        if isinstance(proc, quiet._Stat):
            return proc, {pid: (proc.state, proc.ticks, proc.cpu)}
        return proc

    reads = iter([{pid: with_threads(pid, proc) for pid, proc in read.items()}
                  for read in (first, second)])
    clock = iter([0.0, 0.2])
    monkeypatch.setattr(quiet, '_read_all', lambda exclude: next(reads))
    monkeypatch.setattr(quiet, 'time', type('T', (), {
        'sleep': staticmethod(lambda s: None), 'monotonic': staticmethod(lambda: next(clock))}))
    monkeypatch.setattr(quiet, '_CLK_TCK', 100)
    return quiet.busy_processes({0}, 0.2, set())


def test_children_count_with_their_time_in_the_interval_only(monkeypatch):
    # shell 10 reaped the job's rank 11 (95 ticks by the first read) during the
    # interval, shell 20 reaped 15 ticks of children started since; 12 and 21
    # sleep throughout
    first = {10: _stat(1), 11: _stat(10, 95), 12: _stat(10), 20: _stat(1), 21: _stat(20)}
    second = {**first, 10: _stat(1, 0, 100), 20: _stat(1, 0, 15)}
    del second[11]
    assert _busy_on_cpu0(monkeypatch, first, second) == [
        {'pid': 20, 'comm': 'sh', 'cpu': 0, 'state': 'S', 'share': 0.75}]


def test_reaped_time_counts_only_where_the_children_ran_on_the_cores(monkeypatch):
    # shells on cpu 0 that each reaped 15 ticks (0.75 of a core) in the
    # interval: 30's children run on cpu 1 (31 seen there); nothing of 40's and
    # 50's was seen, 40 may run on cpus 0-1, 50 on cpu 0 only; 60's children
    # were seen on cpu 0 (61, a grandchild 62) and cpu 1 (63): half of it counts
    first = {30: _stat(1), 31: _stat(30, cpu=1), 40: _stat(1), 50: _stat(1), 60: _stat(1),
             61: _stat(60), 62: _stat(61), 63: _stat(60, cpu=1), 64: _stat(60, cpu=1)}
    second = {**first, 30: _stat(1, 0, 15), 40: _stat(1, 0, 15), 50: _stat(1, 0, 15),
              60: _stat(1, 0, 30)}
    affinity = {40: {0, 1}, 50: {0}}
    monkeypatch.setattr(quiet, '_affinity', affinity.get, raising=False)
    assert _busy_on_cpu0(monkeypatch, first, second) == [
        {'pid': 50, 'comm': 'sh', 'cpu': 0, 'state': 'S', 'share': 0.75},
        {'pid': 60, 'comm': 'sh', 'cpu': 0, 'state': 'S', 'share': 0.75}]


def test_threads_count_where_they_ran_not_on_the_main_threads_core(monkeypatch):
    # main threads sleeping on cpu 0 (5 ticks each): 70's worker 71 spun on
    # cpu 1 and ended in the interval (10 more ticks: half a core), 80's worker
    # 81 spins on cpu 1 throughout; 90's worker 91 spun on cpu 0 and ended
    def threads(*tids: tuple[int, str, int, int]) -> dict[int, tuple[str, int, int]]:
        return {tid: (state, ticks, cpu) for tid, state, ticks, cpu in tids}

    first = {70: (_stat(1, 85, threads=2), threads((70, 'S', 5, 0), (71, 'R', 80, 1))),
             80: (_stat(1, 85, threads=2), threads((80, 'S', 5, 0), (81, 'R', 80, 1))),
             90: (_stat(1, 85, threads=2), threads((90, 'S', 5, 0), (91, 'R', 80, 0)))}
    second = {70: (_stat(1, 95), threads((70, 'S', 5, 0))),
              80: (_stat(1, 105, threads=2), threads((80, 'S', 5, 0), (81, 'R', 100, 1))),
              90: (_stat(1, 95), threads((90, 'S', 5, 0)))}
    assert _busy_on_cpu0(monkeypatch, first, second) == [
        {'pid': 90, 'comm': 'sh', 'cpu': 0, 'state': 'S', 'share': 0.5}]


def test_a_thread_ending_on_another_core_does_not_make_the_main_threads_core_busy(two_cores):
    # the main thread sleeps on the job's core, a worker that has spun 0.6 s of
    # CPU on another core ends 0.3 s into the interval: the first read sees two
    # threads, the second one, whose /proc/<pid>/stat counts the ended worker
    job_core, other = two_cores
    with _worker_thread(main_core=job_core, worker_core=other) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline() == 'ready\n'
        stdin = proc.stdin

        def stop() -> None:
            stdin.write('stop\n')
            stdin.flush()
        timer = threading.Timer(0.3, stop)
        timer.start()
        found = quiet.busy_processes({job_core}, 1.0, quiet.ancestors(os.getpid()))
        timer.join()
        assert len(os.listdir(f'/proc/{proc.pid}/task')) == 1      # the worker ended
        assert [p for p in found if p['pid'] == proc.pid] == []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or shutil.which('taskset') is None,
                    reason='needs two cores and taskset')
def test_a_loop_whose_children_run_on_another_core_does_not_make_its_core_busy(two_cores):
    # a shell loop on the job's core whose short children all run on another
    # core (taskset): their reaped time was not used on the job's core
    job_core, other = two_cores
    with _running(['taskset', '-c', str(job_core), 'timeout', '20', 'sh', '-c',
                   f'while :; do taskset -c {other} timeout 0.05 '
                   'sh -c "while :; do :; done"; done']) as loop:
        time.sleep(0.5)
        # the loop's shell: timeout's child
        shell = [pid for pid in map(int, filter(str.isdigit, os.listdir('/proc')))
                 if (st := quiet._proc_stat(pid)) is not None and st.ppid == loop.pid]
        assert len(shell) == 1
        mine = quiet.ancestors(os.getpid())
        # a child caught between its fork and its taskset is on the job's core
        # for a moment: once in four is let pass
        flagged = sum(any(p['pid'] == shell[0] for p in
                          quiet.busy_processes({job_core}, 0.3, mine)) for _ in range(4))
        assert flagged <= 1


def test_missing_snapshots_are_unknown_not_quiet(tmp_path):
    fields = quiet.read_quiet(str(tmp_path / 'absent.json'))
    assert fields['busy'] == 'unknown' and fields['busy_procs'] == -1
    (tmp_path / 'half.json').write_text(json.dumps({'before': quiet.snapshot(0.05)}))
    fields = quiet.read_quiet(str(tmp_path / 'half.json'))
    assert fields['busy'] == 'unknown' and 'only the before snapshot' in fields['busy_detail']
    (tmp_path / 'bad.json').write_text('{not json')
    assert 'unreadable' in str(quiet.read_quiet(str(tmp_path / 'bad.json'))['busy_detail'])


def test_steal_time_from_proc_stat_deltas():
    before = [100, 0, 50, 800, 0, 0, 0, 10, 0, 0]
    after = [150, 0, 70, 900, 0, 0, 0, 40, 0, 0]
    # steal 30 of 200 ticks
    assert quiet.steal_percent(before, after) == pytest.approx(15.0)
    assert quiet.steal_percent(before[:7], after[:7]) is None     # no steal column
    assert quiet.steal_percent(before, before) is None             # nothing elapsed
    assert len(quiet.read_cpu_times() or []) >= 8
    snap = {'load': 0.5, 'cpu': before, 'busy': []}
    fields = quiet.summarise({'before': snap, 'after': {**snap, 'cpu': after}})
    assert fields['busy'] == 'true' and fields['steal_pct'] == '15.00'
    assert 'steal 15.0%' in str(fields['busy_detail'])
    fields = quiet.summarise({'before': snap, 'after': {**snap, 'cpu': [
        x + (100 if i == 3 else 0) for i, x in enumerate(before)]}})
    assert fields['busy'] == 'false' and fields['busy_procs'] == 0


def test_prologue_and_epilogue_quote_paths_and_keep_the_exit_status(tmp_path):
    path = tmp_path / 'a dir; rm -rf x' / 'quiet.json'
    path.parent.mkdir()
    script = '\n'.join([quiet.prologue(str(path)), '(exit 7)', quiet.epilogue(str(path)),
                        'echo "status $?"'])
    env = {**os.environ, 'HARNESS_SNAPSHOT_S': '0.05'}
    out = subprocess.run(['bash', '-c', script], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert 'status 7' in out.stdout, out.stderr
    assert set(json.loads(path.read_text())) == {'before', 'after'}


# ---- the rule on fixed bands ----------------------------------------------------

@pytest.mark.parametrize('ref,lower,upper', [
    (1.0, -0.05, 0.05), (2.5, None, 0.1), (2.5, -0.2, None), (-4.0, -0.1, 0.3),
    (0.0, -0.5, 0.5), (1.0, 0.0, None)])
def test_band_bounds_are_reframes(ref, lower, upper):
    want = [None if math.isinf(x) else x for x in sn.reference_bounds(ref, lower, upper)]
    assert list(bands.band_bounds(ref, lower, upper)) == pytest.approx(want)


def test_the_rule_passes_fails_or_is_inconclusive():
    quiet_rounds = [0.99, 1.01, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99]
    j = bands.judge_band('bw', quiet_rounds, 1.0, -0.05, 0.05)
    assert j is not None and j.state == stats.PASS
    assert bands.judge_band('bw', [x * 0.8 for x in quiet_rounds], 1.0, -0.05, 0.05
                            ).state == stats.FAIL
    noisy = [0.94, 1.15, 1.02, 1.11, 0.97, 1.08, 1.12, 1.0]
    j = bands.judge_band('bw', noisy, 1.0, -0.05, 0.05)
    assert j.state == stats.INCONCLUSIVE and 'INCONCLUSIVE' in j.describe()
    assert bands.judge_band('bw', noisy, 1.0, None, None) is None      # nothing to judge
    assert bands.overall([j]) == 'inconclusive' and bands.overall([]) == ''


def test_a_reference_20_percent_above_the_measured_value_fails():
    measured = [812.0]                           # one run: its interval is the value
    j = bands.judge_band('fom', measured, 1.2 * 812.0, -0.10, None)
    assert j.state == stats.FAIL and j.decision.side == 'below'
    # a time 20% above its reference (lower is better)
    j = bands.judge_band('t_total', [1.2], 1.0, None, 0.10)
    assert j.state == stats.FAIL and j.decision.side == 'above'


def test_a_busy_run_cannot_fail_but_is_not_a_pass():
    j = bands.judge_band('hybrid_over_mpi', [0.72, 0.74, 0.73], 1.0, -0.10, None, busy=True)
    assert j.state == stats.INCONCLUSIVE and j.withheld
    assert 'FAIL withheld: the machine was busy' in j.describe()
    # busy but inside the band: a pass is a pass
    assert bands.judge_band('x', [1.0, 1.01, 0.99], 1.0, -0.1, 0.1, busy=True
                            ).state == stats.PASS


def test_an_interval_from_two_sample_lists_is_judged_by_the_same_rule():
    cmp = stats.compare([1.0, 1.01, 0.99, 1.02, 1.0, 0.98], [1.0, 1.0, 1.01, 0.99, 1.0, 1.0])
    j = bands.judge_band('speedup', cmp.interval, 1.0, -0.10, None)
    assert j.state == stats.PASS
    slow = stats.compare([1.0] * 6, [1.6, 1.62, 1.58, 1.61, 1.59, 1.6])
    assert bands.judge_band('speedup', slow.interval, 1.0, -0.10, None).state == stats.FAIL


# ---- RingOsuAccuracy's rounds, from recorded outputs ------------------------------

SIZES = [1 << 20, 2 << 20, 4 << 20]


def write_rounds(dirpath: Path, lat_ratios: list[float], bw_ratios: list[float]) -> None:
    """Rounds of ring and OSU outputs: real files, the ring's figures set to the
    given ratios of OSU's."""
    osu_lat = (DATA / 'osu' / 'openmpi_shm_osu_latency.txt').read_text()
    osu_bw = (DATA / 'osu' / 'openmpi_shm_osu_bw.txt').read_text()
    lat8 = rounds.osu_table(osu_lat, 'lat').column(0)[8]
    bw = rounds.osu_table(osu_bw, 'bw').column(0)
    lat_res = json.loads((DATA / 'ring_osu' / 'ring_lat.out').read_text()
                         .split('RESULT ', 1)[1].splitlines()[0])
    bw_res = [json.loads(ln[len('RESULT '):]) for ln in
              (DATA / 'ring_osu' / 'ring_bw.out').read_text().splitlines()
              if ln.startswith('RESULT ')]
    for r, (lr, br) in enumerate(zip(lat_ratios, bw_ratios), 1):
        (dirpath / f'osu_lat_{r}.out').write_text(osu_lat)
        (dirpath / f'osu_bw_{r}.out').write_text(osu_bw)
        (dirpath / f'ring_lat_{r}.out').write_text(
            'RESULT ' + json.dumps({**lat_res, 'latency_us': lr * lat8}) + '\n')
        (dirpath / f'ring_bw_{r}.out').write_text(''.join(
            'RESULT ' + json.dumps({**res, 'bandwidth_MBps': br * bw[res['size']]}) + '\n'
            for res in bw_res))


def ring_states(dirpath: Path, n: int) -> dict[str, str]:
    data = rounds.ring_osu_rounds(str(dirpath), n, SIZES)
    ratios = rounds.ring_osu_ratios(data, SIZES)
    out = {}
    for var, (ref, lo, hi) in rounds.ring_osu_bands(data, SIZES, 0.10, 0.05, 0.05).items():
        j = bands.judge_band(var, ratios[var], ref, lo, hi)
        assert j is not None
        out[var] = j.state
    return out


def _run_loop(tmp_path: Path, question: list[str], **counts: int) -> tuple[int, list[str]]:
    """Runs round_loop's script with a body that notes each round: (rounds done, rounds)."""
    lines = rounds.round_loop('n', ['echo "$n" >> ran.txt'], question=question, **counts)
    (tmp_path / 'loop.sh').write_text('\n'.join(lines) + '\n')
    proc = subprocess.run(['bash', 'loop.sh'], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return (int((tmp_path / rounds.ROUNDS_FILE).read_text()),
            (tmp_path / 'ran.txt').read_text().split())


def test_the_loop_of_rounds_runs_its_least_and_stops_when_the_question_says_so(tmp_path):
    # the question fails (no such output): no more rounds after the least
    done, ran = _run_loop(tmp_path, ['md', 'missing.out'], rounds=2, max_rounds=5,
                          budget_s=600)
    assert (done, ran) == (2, ['1', '2'])


def test_the_loop_of_rounds_stops_at_its_most_and_names_the_round(tmp_path):
    done, ran = _run_loop(tmp_path, ['md', 'missing.out'], rounds=5, max_rounds=3,
                          budget_s=600)
    assert (done, ran) == (3, ['1', '2', '3'])
    text = '\n'.join(rounds.round_loop('r', [], 1, 2, 3, ['ring', '.', rounds.ROUND, "a b"]))
    assert ' -m harnesscore.rounds ring . "$r" \'a b\' || break' in text


def test_ring_rounds_quiet_pass(tmp_path):
    ratios = [0.99, 1.01, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99]
    write_rounds(tmp_path, ratios, ratios)
    assert set(ring_states(tmp_path, 8).values()) == {stats.PASS}
    assert rounds.main(['ring', str(tmp_path), '8', str(4 << 20), '0.1', '0.05', '0.05']) == 1


def test_ring_rounds_fault_injected_fails(tmp_path):
    """A ring that sleeps in each window: its bandwidth falls ~20% below OSU's."""
    quiet_lat = [0.99, 1.01, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99]
    slow = [0.80, 0.82, 0.79, 0.81, 0.83, 0.80, 0.78, 0.81]
    write_rounds(tmp_path, quiet_lat, slow)
    states = ring_states(tmp_path, 8)
    assert states['latency_ratio_8B'] == stats.PASS
    assert {states[f'bandwidth_ratio_{s}'] for s in SIZES} == {stats.FAIL}
    # 8 rounds: order statistics at >= 95%: the failure stands, no more rounds
    assert rounds.main(['ring', str(tmp_path), '8', str(4 << 20), '0.1', '0.05', '0.05']) == 1


def test_ring_rounds_noisy_are_inconclusive_and_ask_for_more(tmp_path):
    noisy = [0.94, 1.15, 1.02, 1.11, 0.97, 1.08, 1.12, 1.0]
    write_rounds(tmp_path, noisy, noisy)
    states = ring_states(tmp_path, 8)
    # latency: 10% or 0.05 us, here 0.05 us of OSU's 0.26 us (19%): inside
    assert states.pop('latency_ratio_8B') == stats.PASS
    assert set(states.values()) == {stats.INCONCLUSIVE}
    assert rounds.main(['ring', str(tmp_path), '8', str(4 << 20), '0.1', '0.05', '0.05']) == 0


def test_ring_rounds_name_what_is_missing(tmp_path):
    write_rounds(tmp_path, [1.0], [1.0])
    (tmp_path / 'osu_bw_1.out').unlink()
    with pytest.raises(rounds.RoundsError, match='osu_bw_1.out is missing'):
        rounds.ring_osu_rounds(str(tmp_path), 1, SIZES)
    write_rounds(tmp_path, [1.0], [1.0])
    text = (tmp_path / 'ring_bw_1.out').read_text().replace('"verified": true',
                                                             '"verified": false')
    (tmp_path / 'ring_bw_1.out').write_text(text)
    with pytest.raises(rounds.RoundsError, match='did not verify'):
        rounds.ring_osu_rounds(str(tmp_path), 1, SIZES)
    assert rounds.main(['ring', str(tmp_path), '1', str(4 << 20), '0.1', '0.05', '0.05']) == 2


# ---- MdLammpsBenchmark's rounds ----------------------------------------------------

def md_output(rates: dict[str, list[float]]) -> str:
    """The benchmark script's tagged lines: md RESULT lines, LAMMPS loop times."""
    lines = []
    for r in range(len(rates['MD_1x1'])):
        for tag in rounds.MD_TAGS + rounds.LMP_TAGS:
            rate = rates[tag][r]
            if tag.startswith('LMP'):
                lines.append(f'{tag} Loop time of {32000 * 100 / rate:.6f} on '
                             f'{tag[-1]} procs for 100 steps with 32000 atoms')
            else:
                lines.append(f'{tag} ' + json.dumps({'kernel': 'md', 'fom': rate,
                                                     'verified': True}))
    return '\n'.join(lines) + '\n'


def test_md_rounds_busy_hybrid_is_withheld_quiet_passes(tmp_path):
    quiet_rates = {'MD_1x1': [2.1e6, 2.0e6, 2.05e6], 'LMP_1': [1.9e6, 1.85e6, 1.9e6],
                   'MD_2x1': [4.0e6, 4.1e6, 4.0e6], 'LMP_2': [3.6e6, 3.7e6, 3.6e6],
                   'MD_1x2': [3.95e6, 4.05e6, 4.0e6]}
    out = tmp_path / 'bench.out'
    out.write_text(md_output(quiet_rates))
    ratios = rounds.md_ratios(rounds.md_rates_by_tag(out.read_text()))
    states = {v: bands.judge_band(v, ratios[v], *rounds.MD_BANDS[v]).state for v in ratios}
    assert set(states.values()) == {stats.PASS}, states
    assert rounds.main(['md', str(out)]) == 1
    # loaded: the hybrid loses 27% (the 0.730), every round
    loaded = {**quiet_rates, 'MD_1x2': [2.9e6, 3.0e6, 2.95e6]}
    out.write_text(md_output(loaded))
    ratios = rounds.md_ratios(rounds.md_rates_by_tag(out.read_text()))
    assert bands.judge_band('hybrid_over_mpi', ratios['hybrid_over_mpi'],
                            *rounds.MD_BANDS['hybrid_over_mpi']).state == stats.FAIL
    # a FAIL on 3 rounds stands on a full interval (paired t on the log ratios,
    # 97.5%): no more rounds asked for (the median's bootstrap, 75% at most, did)
    assert bands.judge_band('hybrid_over_mpi', ratios['hybrid_over_mpi'],
                            *rounds.MD_BANDS['hybrid_over_mpi']).decision.interval.confidence \
        == stats.DECISION_CONFIDENCE
    assert rounds.main(['md', str(out)]) == 1
    j = bands.judge_band('hybrid_over_mpi', ratios['hybrid_over_mpi'],
                         *rounds.MD_BANDS['hybrid_over_mpi'], busy=True)
    assert j.state == stats.INCONCLUSIVE and j.withheld


def test_md_unverified_run_is_an_error(tmp_path):
    text = md_output({t: [1.0] for t in rounds.MD_TAGS + rounds.LMP_TAGS})
    with pytest.raises(rounds.RoundsError, match='did not verify'):
        rounds.md_rates_by_tag(text.replace('"verified": true', '"verified": false'))


# ---- the nightly's judgements ------------------------------------------------------

def _nightly():
    spec = importlib.util.spec_from_file_location('nightly', REPO / 'config' / 'nightly.py')
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def perflog_line(judgement: str, busy: str, detail: str, name: str) -> str:
    run = (f'{T0:%Y-%m-%dT%H:%M:%S%z}|local|shm|openmpi|{name}|md-vs-lammps|benchmark|2|1|'
           f'in.lj|2|1|{LIBS["openmpi"]}|true|false|false|cmake|pass')
    tail = {'judgement': judgement, 'judgement_detail': detail, 'load_before': '0.1',
            'load_after': '2.0', 'steal_pct': '0.00', 'busy_procs': '2' if busy == 'true'
            else '0', 'busy': busy, 'busy_detail': '', 'mpi_env': '',
            **dict.fromkeys(fields_after('mpi_env'), '')}
    assert tuple(tail) == fields_after('result')
    return run + '|' + '|'.join(tail.values()) + '|0.73|x|1.0|-0.1|None|'


def write_perflog(log: Path, *lines: str) -> None:
    """`lines` (perflog_line's) under their header, in `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    header = '|'.join(header_fields()) + '|' + '|'.join(
        f'hybrid_over_mpi_{p}' for p in ('value', 'unit', 'ref', 'lower_thres', 'upper_thres'))
    log.write_text('\n'.join([header, *lines]) + '\n')


def test_nightly_with_inconclusive_checks_says_so_and_exits_3(tmp_path, capsys):
    nightly = _nightly()
    log = tmp_path / 'local' / 'shm' / 'MdLammpsBenchmark.log'
    detail = 'hybrid_over_mpi INCONCLUSIVE: median 0.73 (FAIL withheld: the machine was busy)'
    write_perflog(log, perflog_line('inconclusive', 'true', detail, 'A'),
                  perflog_line('pass', 'false', '', 'B'))
    assert nightly.main(['judgements', '--perflogs', str(tmp_path)]) == nightly.EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert '1 pass, 0 warn, 0 fail, 1 inconclusive (0 sample(s) judged with the last' in out
    assert '1 run(s) on a busy machine' in out
    assert f'INCONCLUSIVE A @shm+openmpi [busy]: {detail}' in out
    assert 'nightly INCONCLUSIVE' in out
    # a failure keeps ReFrame's status: the summary asks for none of its own
    write_perflog(log, perflog_line('inconclusive', 'true', detail, 'A'),
                  perflog_line('fail', 'false', 'x FAIL', 'C'))
    assert nightly.main(['judgements', '--perflogs', str(tmp_path)]) == 0
    assert 'FAIL C @shm+openmpi: x FAIL' in capsys.readouterr().out
    assert nightly.main(['judgements', '--perflogs', str(tmp_path / 'none')]) == 2


def test_the_baseline_leaves_busy_runs_out(tmp_path):
    from hybridverdict.baseline import collect
    from hybridverdict.perflog import read_perflogs

    busy = perflog_line('', 'true', '', 'StreamCheck %layout=mpi_2x1').replace('|0.73|', '|0.5|')
    quiet_ = perflog_line('', 'false', '', 'StreamCheck %layout=mpi_2x1')
    write_perflog(tmp_path / 'local' / 'shm' / 'StreamCheck.log', busy, quiet_)
    records = read_perflogs([str(tmp_path)])
    assert [r.busy for r in records] == [True, False]
    (samples,) = collect(records)['local']['StreamCheck'].values()
    assert samples.values == [0.73]


def test_the_largest_sample_of_the_session_judges_its_variant(monkeypatch):
    """-P sample=0 with HARNESS_REPEAT=3: sample 0 deferred to samples never
    run, so a failing reference was never judged (PASSED at 1e6 GB/s)."""
    from types import SimpleNamespace

    from harnesslib.noise import BandRule
    monkeypatch.setenv('HARNESS_REPEAT', '3')
    monkeypatch.delenv('HARNESS_FIRST_ROUND', raising=False)

    def pool(samples: tuple[int, ...], sample: int) -> bool:
        # A test class as -P sample=... makes it: its parameter space holds
        # the session's samples only.
        cls = type('StreamCheck', (), {'param_space': {'sample': samples}})
        test = cls()
        vars(test).update(sample=sample, judge_samples_together=True,
                          display_name=f'StreamCheck %layout=mpi_2x1 %sample={sample}',
                          current_partition=SimpleNamespace(fullname='local:shm'),
                          current_environ=SimpleNamespace(name='mpich'))
        where, last = BandRule.sample_pool(test)
        assert where == ('StreamCheck', 'local:shm', 'mpich', 'layout=mpi_2x1')
        return last

    assert pool((0,), 0)                         # -P sample=0: judges
    assert [pool((0, 1), s) for s in (0, 1)] == [False, True]
    assert [pool((0, 1, 2), s) for s in (0, 1, 2)] == [False, False, True]
    assert pool((5,), 5)                         # beyond HARNESS_REPEAT: the last
    monkeypatch.setenv('HARNESS_FIRST_ROUND', '3')   # sequential rounds only defer
    assert not pool((3, 4), 4)


@pytest.mark.parametrize('field, size, what', [
    ('osu_lat', None, 'latency at 8 B'), ('osu_bw', 8, 'bandwidth at 8 B')])
def test_an_osu_figure_of_zero_is_a_rounds_error_naming_its_round(field, size, what):
    # A ZeroDivisionError left the rounds script with status 1, which the job's
    # loop reads as "every band decided": the rounds stopped without a word.
    good = {'ring_lat': 1.0, 'osu_lat': 1.0, 'ring_bw': {8: 5.0}, 'osu_bw': {8: 5.0}}
    bad = {**good, field: 0.0} if size is None else {**good, field: {size: 0.0}}
    with pytest.raises(rounds.RoundsError, match=f'round 2: OSU {what} is 0, no ratio'):
        rounds.ring_osu_ratios([good, bad], [8])


def test_a_process_name_with_a_line_break_stays_on_the_perflog_line(tmp_path):
    # Linux allows '\n' and '\r' in a process name (prctl PR_SET_NAME): in
    # busy_detail they split the perflog line of the very run flagged busy
    from hybridverdict.perflog import ReadStats, read_perflogs
    snap = {'load': 0.1, 'cpu': None,
            'busy': [{'pid': 7, 'comm': 'a\nb\rc|d', 'cpu': 0, 'share': 1.0}]}
    detail = quiet.summarise({'before': snap, 'after': snap})['busy_detail']
    assert detail == 'pid 7 a b c/d on cpu 0 (100%)'
    log = tmp_path / 'perflogs/MdCheck.log'
    good = perflog_line('pass', 'true', '', 'MdCheck')
    assert good.count('|2|true||') == 1
    write_perflog(log, good.replace('|2|true||', f'|2|true|{detail}|'))
    stats = ReadStats()
    (rec,) = read_perflogs([str(log)], stats=stats)
    assert (rec.busy, rec.values, stats.skipped) == (True, {'hybrid_over_mpi': 0.73}, 0)


def test_an_osu_too_old_for_the_rounds_options_is_named():
    # OSU 5.0-5.3 print their usage for -m: RingOsuAccuracy's rounds said only
    # "no title line".
    usage = 'Usage: osu_latency [options]\n  -i ITER  number of iterations\n'
    with pytest.raises(rounds.RoundsError,
                       match=r'osu_lat_1\.out rejected its options \(it printed its usage\): '
                             r'this OSU is too old, the checks need OSU 5\.4 or later'):
        rounds.osu_table(usage, 'osu_lat_1.out')


@pytest.mark.parametrize('state0, state, ticks0, ticks1, runnable', [
    ('R', 'R', 5, 5, True),        # runnable throughout, no tick: it waited for the core
    ('S', 'R', 5, 5, False), ('R', 'S', 5, 5, False), (None, 'R', 0, 0, False),
    ('S', 'R', 5, 6, True), ('R', 'S', 5, 6, True), (None, 'R', 0, 1, True),
    ('S', 'S', 5, 50, False)])
def test_runnable_at_both_reads_counts_without_cpu_ticks(state0, state, ticks0, ticks1,
                                                         runnable):
    assert quiet._runnable(state0, state, ticks0, ticks1) is runnable


def test_a_process_runnable_throughout_without_ticks_makes_the_run_busy(monkeypatch):
    # 40 stays runnable on cpu 0 but got no tick in the interval (the job held
    # the core): it competes for the core all the same; 50 sleeps throughout
    first = {40: _stat(1, 7, state='R'), 50: _stat(1, 7)}
    assert _busy_on_cpu0(monkeypatch, first, dict(first)) == [
        {'pid': 40, 'comm': 'sh', 'cpu': 0, 'state': 'R', 'share': 0.0}]


def test_a_round_missing_a_bandwidth_size_is_a_rounds_error_naming_it(tmp_path):
    write_rounds(tmp_path, [1.0], [1.0])
    ring_bw = tmp_path / 'ring_bw_1.out'
    ring_bw.write_text(''.join(ln + '\n' for ln in ring_bw.read_text().splitlines()
                               if json.loads(ln[len('RESULT '):])['size'] != 4 << 20))
    with pytest.raises(rounds.RoundsError, match=r'sizes missing \(\[4194304\]\)'):
        rounds.ring_osu_rounds(str(tmp_path), 1, SIZES)
    assert rounds.main(['ring', str(tmp_path), '1', str(4 << 20), '0.1', '0.05', '0.05']) == 2


def test_a_ring_result_that_does_not_say_it_verified_is_refused():
    with pytest.raises(rounds.RoundsError, match='did not verify'):
        rounds.ring_results('RESULT {"size": 8, "latency_us": 1.0}\n', 'ring_lat_1.out')


def test_the_latency_floor_is_a_fraction_of_the_median_osu_latency():
    # one slow OSU round does not narrow the band of every round
    data = [{'osu_lat': v} for v in (1.0, 1.0, 4.0)]
    assert rounds.ring_osu_bands(data, [], 0.05, 0.5, 0.1)['latency_ratio_8B'] == \
        (1.0, -0.5, 0.5)


def test_bandwidths_are_judged_up_to_and_at_the_largest_size():
    assert rounds.bw_sizes(4 << 20) == [1 << 20, 2 << 20, 4 << 20]
    assert rounds.bw_sizes((1 << 20) - 1) == []


def test_the_loop_of_rounds_starts_no_round_that_would_end_past_its_budget(tmp_path):
    # every round "takes" 10 s (the body sets bash's clock) and leaves the bands
    # undecided: after 2 rounds (20 s) a third would end at 30 s, past 25 s
    undecided = {'MD_1x1': [2.2e6, 1.8e6], 'LMP_1': [2e6, 2e6], 'MD_2x1': [2.2e6, 1.8e6],
                 'LMP_2': [2e6, 2e6], 'MD_1x2': [2e6, 2e6]}
    (tmp_path / 'bench.out').write_text(md_output(undecided))
    lines = rounds.round_loop('n', ['SECONDS=$(( start + n * 10 ))'], rounds=1, max_rounds=5,
                              budget_s=25, question=['md', 'bench.out'])
    (tmp_path / 'loop.sh').write_text('\n'.join(lines) + '\n')
    subprocess.run(['bash', 'loop.sh'], cwd=tmp_path, check=True)
    assert (tmp_path / rounds.ROUNDS_FILE).read_text().strip() == '2'


def test_an_unreadable_question_is_an_error_not_a_decision(tmp_path):
    # exit 2 (an error), not a traceback's 1 ("every band decided")
    assert rounds.main(['ring', str(tmp_path), 'two', str(4 << 20), '0.1', '0.05', '0.05']) == 2
