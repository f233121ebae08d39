"""Benchmark: tonight's full report over a long history, against the time budget.

    python reports/tools/bench.py [--records 100000] [--budget 10] [--window-sessions 4]
                                  [--in-memory] [--keep DIR]

Writes perflogs of ``--records`` kernel records in the harness's format into a
temporary directory (spmv, md, ring and stream as the kernel checks log them,
and the communication checks' OSU and ring sweeps and collectives; two stacks,
two partitions, sessions 6 hours apart, references on some variables, a few
truncated lines) and stores them in a history store once (the one-off ingest,
timed apart).  Then "tonight" appends ``--window-sessions`` more sessions to the
perflogs and the nightly is timed, step by step: the incremental ingest of
tonight's lines, the report window read back from the store, the analyses and
the history (polars' lazy scans of the store), and every output (terminal
summary, Markdown, JSON, HTML with figures and heatmaps, tidy Parquet).  It
prints each step's time, the bytes written (store part and report), the peak
memory, the total and its ratio to the budget.  Exit status 1 if over budget, 2 if
the files cannot be written (an unwritable ``--keep``).
``--in-memory`` times the report without a store instead (every perflog read).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import io
import math
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time

from harnesscore.schema import PERFVAR_PARTS, empty_after_result
from harnesscore.stacks import STACKS as REGISTRY
from harnesscore.stopping import fail
from hybridverdict.perflog import ReadStats, header_fields, read_perflogs

#: stack -> its MPI library's first line, for the stacks seen on this machine
STACKS = {s.name: s.library_example for s in REGISTRY if s.library_example}
PARTITIONS = {'shm': (0.4, 9000.0), 'tcp': (12.0, 2500.0)}   # t0 [us], r_inf [MB/s]
SWEEP = [2 ** i for i in range(0, 23)]                         # 1 B .. 4 MiB
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
#: records of one synthetic session (2 partitions x 2 stacks x 30 checks)
SESSION = 120


def _block(var: str, value: float, unit: str, ref: float = 0.0,
           lower: float | None = None, upper: float | None = None) -> str:
    return f'{value:.6g}|{unit}|{ref:g}|{lower}|{upper}|'


def _checks(rng: random.Random) -> list[tuple[str, str, str, int, int, str, list]]:
    """(check, kernel, mode, ranks, threads, size, [(var, value, unit, ref...)]) of a session."""
    out = []
    for size, scale in (('16', 0.004), ('32', 0.03), ('64', 0.25), ('128', 1.9)):
        for mode, r, t in (('mpi', 2, 1), ('masteronly', 1, 2), ('funneled', 1, 2),
                           ('serial', 1, 1)):
            tt = scale * rng.uniform(0.9, 1.2) * (1.1 if mode == 'masteronly' else 1.0)
            out.append(('SpmvCheck', 'spmv', mode, r, t, size, [
                ('fom', 9.0 * scale / tt, 'GFLOP/s', 9.0 * scale / tt, -0.2, None),
                ('t_total', tt, 's'), ('t_comp', 0.9 * tt, 's'), ('t_comm', 0.1 * tt, 's'),
                ('t_pack', 0.01 * tt, 's'), ('t_comp_interior', 0.85 * tt, 's'),
                ('t_comp_boundary', 0.05 * tt, 's'), ('stream_bw', rng.uniform(9, 13), 'GB/s'),
                ('roofline_fraction', rng.uniform(0.6, 0.9), 'fraction')]))
    for size, scale in (('6', 0.05), ('12', 0.4), ('24', 3.0)):
        for mode, r, t in (('mpi', 2, 1), ('masteronly', 1, 2)):
            tt = scale * rng.uniform(0.9, 1.2)
            phases = [(f'phase_{p}', tt * f, 's') for p, f in
                      (('force', 0.6), ('movout', 0.1), ('sum', 0.02), ('movea', 0.05),
                       ('moveb', 0.05), ('neigh', 0.15))]
            out.append(('MdCheck', 'md', mode, r, t, size, [
                ('fom', 1e6 / tt, 'atom-steps/s'), ('t_total', tt, 's', tt, -0.5, 0.5),
                ('t_comp', 0.8 * tt, 's'), ('t_comm', 0.2 * tt, 's'), *phases]))
    out.append(('StreamCheck', 'stream', 'mpi', 2, 1, '8000000',
                [('fom', rng.uniform(9, 13), 'GB/s', 11.0, -0.3, None)]))
    return out


def _comm_checks(rng: random.Random, t0: float, r_inf: float) -> list:
    def lat(m: int) -> float:
        return (t0 + m / r_inf) * rng.uniform(0.95, 1.1)
    out = []
    for check, kernel in (('OsuLatency', 'osu_latency'), ('RingPingpong', 'ring-pingpong')):
        out.append((check, kernel, 'mpi', 2, 1, '1-4194304',
                    [(f'lat_{m}', lat(m), 'us') for m in SWEEP]
                    + [('latency_8B', lat(8), 'us', t0 * 1.2, None, 0.5)]))
    for check, kernel in (('OsuBw', 'osu_bw'), ('RingBw', 'ring-bw')):
        out.append((check, kernel, 'mpi', 2, 1, '1-4194304',
                    [(f'bw_{m}', m / lat(m), 'MB/s') for m in SWEEP]
                    + [('bandwidth_1MiB', (1 << 20) / lat(1 << 20), 'MB/s')]))
    out.append(('RingCheck', 'ring', 'mpi', 2, 1, '8,65536,1048576',
                [(f'bw_k1_{m}', m / lat(m), 'MB/s') for m in (8, 65536, 1048576)]
                + [('fom', (1 << 20) / lat(1 << 20), 'MB/s')]))
    for ranks in (1, 2):
        out.append(('OsuAllreduce', 'osu_allreduce', 'mpi', ranks, 1, '4-1048576',
                    [(f'lat_{m}', (1 + math.log2(ranks)) * lat(m), 'us')
                     for m in SWEEP[2:21]]))
    return out


def synthesise(directory: str, records: int, seed: int = 1, first_session: int = 0,
               rng: random.Random | None = None) -> tuple[int, int]:
    """Append sessions of records (at least `records`) to the perflogs under `directory`,
    sessions 6 hours apart from `first_session` on; (lines written, next session)."""
    rng = rng or random.Random(seed)
    files: dict[str, io.TextIOBase] = {}
    written = 0
    session = first_session
    try:
        while written < records:
            t = START + dt.timedelta(hours=6 * session)
            for part, (t0, r_inf) in PARTITIONS.items():
                for stack, lib in STACKS.items():
                    for check, kernel, mode, r, th, size, vars_ in (
                            _checks(rng) + _comm_checks(rng, t0, r_inf)):
                        path = os.path.join(directory, 'local', part, f'{check}.log')
                        fp = files.get(path)
                        if fp is None:
                            os.makedirs(os.path.dirname(path), exist_ok=True)
                            new = not os.path.exists(path)
                            fp = files[path] = open(path, 'a', encoding='utf-8')
                            if new:
                                fp.write('|'.join(header_fields()) + '|' + '|'.join(
                                    f'{v[0]}_{p}' for v in vars_ for p in PERFVAR_PARTS) + '\n')
                        t += dt.timedelta(seconds=3)
                        line = (f'{t:%Y-%m-%dT%H:%M:%S%z}|local|{part}|{stack}|{check} '
                                f'%layout={mode}_{r}x{th}|{kernel}|{mode}|{r}|{th}|{size}|2|1|'
                                f'{lib}|true|false|false|cmake Release {stack}|pass|'
                                + empty_after_result() + ''.join(_block(*v) for v in vars_))
                        if (first_session * SESSION + written) % 20011 == 7:
                            line = line[:len(line) // 2]     # a truncated line now and then
                        fp.write(line + '\n')
                        written += 1
            session += 1
    finally:
        for fp in files.values():
            fp.close()
    return written, session


def _ingest(hist: str, logs: str) -> tuple[int, int, int]:
    from hybridverdict.store import Store
    done = Store(hist).ingest([logs])
    return done.records, done.rows, done.bytes_written


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _bytes(directory: str) -> dict[str, int]:
    return {os.path.join(d, f): os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(directory) for f in fs}


def _mb(n: float) -> str:
    return f'{n / 1e6:.2f} MB'


def run(records: int, budget: float, keep: str | None, window_sessions: int,
        in_memory: bool) -> int:
    from hybridverdict import render
    from hybridverdict.report import build
    from hybridverdict.store import Store
    from hybridverdict.write import Clock, write_all

    tmp = keep or tempfile.mkdtemp(prefix='hybridverdict-bench-')
    logs, out = os.path.join(tmp, 'perflogs'), os.path.join(tmp, 'reports')
    hist = os.path.join(tmp, 'history')
    tonight = window_sessions * SESSION
    rng = random.Random(1)
    t = time.perf_counter()
    lines, session = synthesise(logs, max(records - tonight, 1), rng=rng)
    size = sum(_bytes(logs).values())
    print(f'synthesised {lines} perflog lines ({_mb(size)}, {session} sessions) in '
          f'{time.perf_counter() - t:.2f} s under {logs}')
    if not in_memory:
        # the history so far, stored once (a store grows by one part per nightly; this
        # is the one-off ingest of a history that predates the store)
        # (in a spawned child process: the peak memory printed at the end is then the
        # nightly's; spawned, not forked, as polars' threads do not survive a fork)
        t = time.perf_counter()
        ctx = multiprocessing.get_context('spawn')
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            first = pool.submit(_ingest, hist, logs).result()
        print(f'one-off ingest of the history: {first[0]} records, {first[1]} values into '
              f'{_mb(first[2])} of Parquet in {time.perf_counter() - t:.2f} s')
    since = START + dt.timedelta(hours=6 * session)
    more, _ = synthesise(logs, tonight, rng=rng, first_session=session)
    print(f'tonight: {more} more perflog lines ({window_sessions} sessions from '
          f'{since:%Y-%m-%d %H:%M}); the report covers them, the history all '
          f'{lines + more} lines')
    before = _bytes(tmp)

    steps: dict[str, float] = {}
    wall0, cpu0 = time.perf_counter(), _cpu()
    clock = Clock(steps)
    stats = ReadStats()
    if in_memory:
        recs = read_perflogs([logs], stats=stats)
        clock.lap('read every perflog')
        rep = build(recs, stats, [logs], since=since)
        read = len(recs)
    else:
        store = Store(hist)
        done = store.ingest([logs], stats)
        clock.lap(f'ingest tonight ({done.records} records, incremental)')
        window = store.records(since)
        read = int(store.state()['total_records'])
        clock.lap(f'read the window from the store ({len(window)} records)')
        rep = build(window, stats, [logs], since=since, stored=store.scan(),
                    stored_records=read)
    clock.lap('analyses (verdicts, models, fits, history)')
    with contextlib.redirect_stdout(io.StringIO()):
        print(render.terminal(rep))
    clock.lap('terminal summary')
    write_all(rep, out, timings=steps)
    wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
    for name, secs in steps.items():
        print(f'  {secs:7.2f} s  {name}')
    print(f'records: {read} in the history, {rep.meta.records} in the report window '
          f'({stats.records} parsed now, {stats.skipped} lines skipped); '
          f'{len(rep.verdicts)} verdicts; {len(rep.curves)} Hockney fits; '
          f'{rep.history_total} history series ({len(rep.history)} drawn)')
    after = _bytes(tmp)
    new = {p: n for p, n in after.items() if before.get(p) != n and not p.startswith(logs)}
    print('written: ' + ', '.join(f'{os.path.relpath(p, tmp)} {_mb(n)}'
                                  for p, n in sorted(new.items())))
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f'TOTAL {wall:.2f} s wall ({cpu:.2f} s CPU with the figure process; load average '
          f'{load:.1f} on {os.cpu_count()} cores; peak memory {peak:.0f} MiB) for a history '
          f'of {read} records, the full report with HTML: {_mb(sum(new.values()))} written, '
          f'{wall / budget:.2f} of the {budget:g} s budget')
    if not keep:
        import shutil
        shutil.rmtree(tmp)
    return 0 if wall <= budget else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog='python reports/tools/bench.py', description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--records', type=int, default=100_000,
                   help='perflog records of the history to synthesise (default 100000)')
    p.add_argument('--budget', type=float, default=10.0, help='seconds allowed (default 10)')
    p.add_argument('--window-sessions', type=int, default=4, metavar='N',
                   help=f'sessions of tonight (the report window), {SESSION} records each '
                        '(default 4: a day of 6-hourly sessions)')
    p.add_argument('--in-memory', action='store_true',
                   help='no history store: read every perflog and build the history in '
                        'memory, as the report does without a store')
    p.add_argument('--keep', metavar='DIR', help='synthesise into DIR and keep it')
    args = p.parse_args(argv)
    if args.records < 1:
        p.error('--records must be at least 1')
    if args.window_sessions < 1:
        p.error('--window-sessions must be at least 1')
    try:
        return run(args.records, args.budget, args.keep, args.window_sessions,
                   args.in_memory)
    except OSError as err:
        where = f' (--keep {args.keep})' if args.keep else ''
        return fail('bench', f'cannot write{where}: {err}')


if __name__ == '__main__':
    sys.exit(main())
