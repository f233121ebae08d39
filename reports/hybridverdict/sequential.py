"""Sequential rounds: run more rounds of only the pairs still INCONCLUSIVE.

``./harness run`` and ``./harness nightly`` call this after the planned
session::

    python -m hybridverdict.sequential --since ISO-TIME --deadline EPOCH-SECONDS \
        [--max-rounds N] [--step N] -- <reframe command and its options>

It judges the session's records by the report's rule (``verdict.verdicts``) and
runs ``--step`` more rounds of the INCONCLUSIVE pairs below the cap, one ReFrame
session per partition and stack (so a pair's two runs are side by side), until
each is decided, at the cap, or the next batch's estimate (this session's own
seconds per run) does not fit before the deadline (docs/pages/statistics.md).  The
rule's confidence per look is calibrated for these looks
(``python reports/tools/calibrate.py``).  Exit status: 0, or the first non-zero
status of a ReFrame batch; 2 on bad arguments or unreadable records; 128 plus
the signal's number after Ctrl-C (SIGINT), SIGTERM or SIGHUP: the ReFrame batch
running then stops on it (the signal reaches it from the terminal or the
harness, and SIGTERM and SIGHUP are passed on), no other batch starts and the
plan's costs are not updated.  Under ``./harness`` the rounds and their ReFrame
ignore SIGINT (a background command's), and the harness passes Ctrl-C on as
SIGTERM.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from harnesscore import plan, stats
from harnesscore.paths import var_dir
from harnesscore.schema import TIME_VARIABLE
from harnesscore.selection import REPORTS, passed_on
from harnesscore.stopping import Signalled, held_back, need_between, need_fraction, run_main

from . import atomic
from .perflog import PerflogError, Record, read_perflogs
from .records import iso_time
from .verdict import Verdict, judged_as, name_less_sample, round_of, rounds_run, verdicts

#: Seconds per run assumed before any run of the session was timed.
DEFAULT_RUN_S = 5.0


@dataclasses.dataclass
class Batch:
    """The runs of one partition and stack that more rounds may decide."""

    system: str
    partition: str
    stack: str
    names: set[str] = dataclasses.field(default_factory=set)   # display names less %sample
    pairs: int = 0
    rounds: int = 0          # the fewest rounds run of its pairs (``pair_runs``)

    def selection(self) -> str:
        """The ``-n`` pattern of its runs, every sample (ReFrame strips spaces)."""
        alts = '|'.join(re.escape(n.replace(' ', '')) for n in sorted(self.names))
        return f'^({alts})%sample=\\d+$'


def _pair_names(v: Verdict, records: Sequence[Record]) -> set[str]:
    """The display names less %sample of the runs behind a pair's verdict."""
    want = {('mpi', v.mpi_layout), (v.hybrid_mode, v.hybrid_layout)}
    return {name_less_sample(r.name) for r in records
            if (r.system, r.partition, r.stack, r.kernel, r.nodes) ==
            (v.system, v.partition, v.stack, v.kernel, v.nodes)
            and (r.mode, r.layout) in want and r.usable and r.name
            and any(size == v.size for size, _ in judged_as(r, TIME_VARIABLE))}


def pair_runs(v: Verdict, names: set[str], records: Sequence[Record]) -> list[Record]:
    """Every run of a pair's two layouts (display names less %sample), the ones
    left out of its verdict (failed, unverified, ...) too."""
    return [r for r in records if (r.system, r.partition, r.stack) ==
            (v.system, v.partition, v.stack) and r.name and name_less_sample(r.name) in names]


def left_out_note(v: Verdict, runs: Sequence[Record]) -> str:
    """The runs of a pair left out of its verdict, per side ('' if none): why the
    rounds run exceed the rounds paired."""
    notes = []
    for mode, layout in (('mpi', v.mpi_layout), (v.hybrid_mode, v.hybrid_layout)):
        side = [r for r in runs if (r.mode, r.layout) == (mode, layout)]
        out = [r for r in side if not r.usable]
        if out:
            why = ', '.join(sorted({r.left_out for r in out}))
            notes.append(f'{mode} {layout}: {len(out)} of {len(side)} run(s) left out ({why})')
    return '; '.join(notes)


def undecided(records: Sequence[Record], cap: int, floor: float = stats.DEFAULT_FLOOR,
              ) -> tuple[list[Verdict], list[Batch]]:
    """The verdicts still INCONCLUSIVE, and the runs of those below the cap by
    partition and stack.  The cap counts the rounds run for the pair, a round
    one side failed included (``verdict.rounds_run``); a pair at it is stopped
    for the cap (its ``stopped``)."""
    open_ = [v for v in verdicts(records, floor, max_rounds=cap)
             if v.verdict == stats.INCONCLUSIVE]
    batches: dict[tuple[str, str, str], Batch] = {}
    for i, v in enumerate(open_):
        if v.stopped == stats.CAP:
            continue
        names = _pair_names(v, records)
        if not names:
            continue
        ran = max(v.rounds, rounds_run(pair_runs(v, names, records)))
        if ran >= cap:
            open_[i] = dataclasses.replace(v, stopped=stats.CAP)
            continue
        b = batches.setdefault((v.system, v.partition, v.stack),
                               Batch(v.system, v.partition, v.stack))
        b.names |= names
        b.pairs += 1
        b.rounds = ran if b.pairs == 1 else min(b.rounds, ran)
    return open_, list(batches.values())


def capped_notes(open_: Sequence[Verdict], records: Sequence[Record]) -> list[str]:
    """One line per pair stopped at the cap with runs left out of its verdict."""
    lines = []
    for v in open_:
        if v.stopped != stats.CAP:
            continue
        note = left_out_note(v, pair_runs(v, _pair_names(v, records), records))
        if note:
            lines.append(f'{v.kernel} {v.size} on {v.system}:{v.partition} {v.stack}, mpi '
                         f'{v.mpi_layout} against {v.hybrid_mode} {v.hybrid_layout}: '
                         f'{v.rounds} round(s) paired; {note}')
    return lines


def seconds_per_run(records: Sequence[Record], wall: float) -> float:
    """This session's measured seconds per kernel run (its wall time over its runs)."""
    return wall / len(records) if records and wall > 0 else DEFAULT_RUN_S


_NAME = re.compile(r'%layout=([^%\s]+)\s*%problem=([^%\s]+)')


def run_costs(records: Sequence[Record]) -> dict[str, dict[str, float]]:
    """Measured seconds per kernel run, {partition: {plan.cost_key: s}}: each
    run's cost is the time from the record before it (any check's, of the same
    session: ReFrame runs one case at a time) to its own, so it holds what the
    plan's estimate holds (stage, job script, launch, the run); the median per
    stack, then the largest over the stacks."""
    ordered = sorted(records, key=lambda r: r.logged)
    per: dict[tuple[str, str, str], list[float]] = {}
    for prev, rec in zip(ordered, ordered[1:]):
        m = _NAME.search(rec.name)
        gap = (rec.time - prev.time).total_seconds()
        if m and 0 <= gap <= stats.SESSION_GAP.total_seconds():
            part = f'{rec.system}:{rec.partition}'
            key = f'{rec.kernel} {m.group(1)} {m.group(2)}'
            per.setdefault((part, key, rec.stack), []).append(gap)
    out: dict[str, dict[str, float]] = {}
    for (part, key, _stack), gaps in per.items():
        med = statistics.median(gaps)
        if med > 0:
            out.setdefault(part, {})[key] = max(med, out.get(part, {}).get(key, 0.0))
    return out


def update_costs(records: Sequence[Record], path: str) -> int:
    """Merge this session's measured costs into the plan's costs file (a run
    measured again replaces its old figure: the machine may have changed);
    the number of runs written."""
    new = run_costs(records)
    if not new:
        return 0
    try:
        with open(path, encoding='utf-8') as fh:
            table = json.load(fh)
        if not isinstance(table, dict):
            table = {}
    except (OSError, ValueError):
        table = {}
    for part, costs in new.items():
        # a partition's entry that is no table (hand-edited) is replaced, as the
        # reader passes it over (plan.measured_costs)
        old = table.get(part)
        table[part] = {**(old if isinstance(old, dict) else {}),
                       **{k: round(v, 3) for k, v in costs.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic.write_replacing(path, json.dumps(table, indent=1, sort_keys=True) + '\n')
    return sum(len(c) for c in new.values())


def _read(perflogs: str, since) -> list[Record]:
    """The records since `since`; none where no perflog was written yet (a
    session that ran nothing, which the harness reports on its own)."""
    if not os.path.exists(perflogs):
        return []
    return read_perflogs([perflogs], since=since)


def run(args: argparse.Namespace) -> int:
    """The sequential rounds, then this session's measured costs for the plan."""
    rc = more_rounds(args)
    try:
        written = update_costs(_read(args.perflogs, args.since), args.costs)
    except (PerflogError, OSError) as err:
        print(f'sequential: the plan\'s measured costs not updated: {err}', file=sys.stderr)
        return rc or 2
    if written:
        print(f'==> measured seconds per run of {written} run(s) written to {args.costs} '
              f'(the next plan\'s estimates)')
    return rc


def more_rounds(args: argparse.Namespace) -> int:
    since = args.since
    started = since.timestamp()
    rc = 0
    done_batches: set[tuple] = set()
    while True:
        try:
            records = _read(args.perflogs, since)
        except (PerflogError, OSError) as err:
            print(f'sequential: cannot read the records: {err}', file=sys.stderr)
            return 2
        open_, batches = undecided(records, args.max_rounds, args.noise_floor)
        now = time.time()
        per_run = seconds_per_run(records, now - started)
        left = args.deadline - now
        if not batches:
            print(f'==> sequential rounds: no pair left to decide ({len(open_)} '
                  f'INCONCLUSIVE at the cap of {args.max_rounds} rounds); '
                  f'{max(left, 0) / 60:.1f} min of the budget left')
            for note in capped_notes(open_, records):
                print(f'==> sequential rounds: at the cap: {note}')
            return rc
        todo = []
        for b in batches:
            step = min(args.step, args.max_rounds - b.rounds)
            first = max(_round_numbers(records, b)) + 1
            key = (b.system, b.partition, b.stack, first)
            if step < 1 or key in done_batches:
                continue          # a batch that added no record: do not loop on it
            todo.append((b, step, first, key))
        if not todo:
            print('==> sequential rounds: the last batches added no record; stopping',
                  file=sys.stderr)
            return rc or 1
        for b, step, first, key in todo:
            estimate = per_run * len(b.names) * step
            left = args.deadline - time.time()
            head = (f'{b.pairs} undecided pair(s) on {b.system}:{b.partition} {b.stack}, '
                    f'rounds {first}-{first + step - 1}')
            if estimate > left:
                print(f'==> sequential rounds: budget: {head} would take ~{estimate:.0f} s, '
                      f'{max(left, 0):.0f} s left; stopping')
                return rc
            print(f'==> sequential rounds: {head} (~{estimate:.0f} s; '
                  f'{left / 60:.1f} min of the budget left)', flush=True)
            done_batches.add(key)
            brc = _reframe(args.reframe, b, step, first)
            rc = rc or brc


def _round_numbers(records: Sequence[Record], b: Batch) -> list[int]:
    return [-1] + [n for r in records if r.partition == b.partition and r.stack == b.stack
                   and (n := round_of(r)) is not None]


def _reframe(command: Sequence[str], b: Batch, step: int, first: int) -> int:
    argv = [*command, '--system', f'{b.system}:{b.partition}', '-p', f'^{re.escape(b.stack)}$',
            '-n', b.selection(), '-r']
    env = dict(os.environ, HARNESS_FIRST_ROUND=str(first), HARNESS_REPEAT=str(step))
    print(f'+ HARNESS_FIRST_ROUND={first} HARNESS_REPEAT={step} {shlex.join(argv)}',
          flush=True)
    proc = None
    try:
        with held_back():           # a SIGTERM as ReFrame starts is passed on to it
            proc = subprocess.Popen(argv, env=env)
        return proc.wait()
    except (KeyboardInterrupt, Signalled) as err:
        # Ctrl-C reached ReFrame too (its process group); SIGTERM and SIGHUP
        # are passed on.  ReFrame stops on it (its jobs cancelled): wait.
        if proc is None:
            raise
        if isinstance(err, Signalled):
            proc.send_signal(err.signum)
        while proc.poll() is None:
            try:
                proc.wait()
            except (KeyboardInterrupt, Signalled):
                continue
        raise


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog='python -m hybridverdict.sequential',
        description='Run more rounds of the pairs still INCONCLUSIVE since --since, one '
                    'ReFrame session per partition and stack, until each is decided, at the '
                    'cap of rounds, or the budget is spent.')
    ap.add_argument('--since', required=True, metavar='ISO-TIME', type=iso_time,
                    help='start of the session (its records are the ones judged)')
    ap.add_argument('--deadline', required=True, type=float, metavar='EPOCH-S',
                    help='when the session\'s budget ends (seconds since the epoch)')
    ap.add_argument('--perflogs', default=os.path.join(var_dir(), 'perflogs'))
    ap.add_argument('--max-rounds', type=int, default=plan.max_rounds(),
                    help='cap of rounds per pair (HARNESS_MAX_ROUNDS, default '
                         f'{stats.DEFAULT_MAX_ROUNDS})')
    ap.add_argument('--step', type=int, default=stats.SEQUENTIAL_STEP,
                    help=f'rounds per batch (default {stats.SEQUENTIAL_STEP})')
    ap.add_argument('--noise-floor', type=float, default=stats.DEFAULT_FLOOR,
                    help=f'smallest relative noise band, in [0, 1) (default '
                         f'{stats.DEFAULT_FLOOR})')
    ap.add_argument('--costs', default=None,
                    help='the plan\'s measured costs file to update (default: '
                         'HARNESS_PLAN_COSTS, else plan-costs.json beside the perflogs\' '
                         'folder)')
    ap.add_argument('reframe', nargs=argparse.REMAINDER,
                    help='after --: the reframe command and the user\'s options')
    args = ap.parse_args(argv)
    if args.reframe[:1] == ['--']:
        args.reframe = args.reframe[1:]
    if not args.reframe:
        ap.error('give the reframe command after --')
    need_between(ap, '--max-rounds (HARNESS_MAX_ROUNDS)', args.max_rounds, 1, plan.MAX_ROUNDS)
    if args.step < 1:
        ap.error(f'--step must be at least 1, got {args.step}')
    if math.isnan(args.deadline):
        ap.error(f'--deadline must be seconds since the epoch, got {args.deadline}')
    need_fraction(ap, '--noise-floor', args.noise_floor)
    # The batches make their own selection (_reframe): the user's ReFrame
    # selection options are not passed on to them (harnesscore.selection).
    # Nor the user's report files: the batches would write over the session's.
    args.reframe = [args.reframe[0], *passed_on(passed_on(args.reframe[1:]), REPORTS)]
    args.costs = args.costs or (plan.costs_path() if os.environ.get('HARNESS_PLAN_COSTS')
                                else os.path.join(os.path.dirname(os.path.abspath(
                                    args.perflogs)), plan.COSTS_FILE))
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except ValueError as err:
        print(f'sequential: {err}', file=sys.stderr)
        return 2
    # SIGTERM and SIGHUP stop the rounds even where they came in ignored (nohup)
    stopped = ('sequential: stopped by {signal}: no more rounds, the plan\'s measured '
               'costs not updated')
    return run_main(run, args, stopped.format(signal='SIGINT'), stopped, always=True)


if __name__ == '__main__':
    sys.exit(main())

__all__ = ['passed_on', 'undecided', 'capped_notes', 'seconds_per_run', 'main', 'Batch']
