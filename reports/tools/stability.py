"""Benchmark: do the verdicts hold from one session to the next?

    python reports/tools/stability.py --out DIR [--reframe PATH] -- SELECTION...
    python reports/tools/stability.py --perflogs A B

The first form runs ``reframe -C config/settings.py -c checks -r SELECTION``
twice, one session after the other, each into its own ``HARNESS_VAR_DIR``
(``DIR/session-1``, ``DIR/session-2``) so their perflogs stay apart; the second
compares two sessions already run (their perflog folders) without running
anything.  Each session's records are judged on their own (``verdicts``: the
one decision rule of ``harnesscore.stats``), the verdicts are paired by their key
(system, partition, stack, kernel, size, nodes, build, library, cores, hybrid
mode and layout, pure-MPI layout) and printed side by side.

A pair whose speedup is more than ``--threshold`` (10%) from 1 in either
session should get the same call twice.  Between the two sessions a pair is

* ``same``           the same call;
* ``not confirmed``  WIN, LOSS or TIE in one session, INCONCLUSIVE in the other
                     (the rule asked for more samples once; no contradiction);
* ``changed``        two different decided calls: WIN <-> LOSS, or WIN/LOSS <-> TIE.

Exit status 0 when no pair beyond the threshold changed, 1 when one did, 2 on
error (a session that failed, or whose perflogs hold no records or no pairs).
A pair found in one session only is named; it counts as neither.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harnesscore.stopping import need_fraction
from hybridverdict.apart import Apart
from hybridverdict.perflog import PerflogError, ReadStats, read_perflogs
from hybridverdict.verdict import DEFAULT_NOISE_FLOOR, Verdict, verdicts
from tabulate import tabulate

INCONCLUSIVE = 'INCONCLUSIVE'
SAME, NOT_CONFIRMED, CHANGED = 'same', 'not confirmed', 'changed'
MISSING_1, MISSING_2 = 'only in session 2', 'only in session 1'


class StabilityError(Exception):
    """Why the comparison cannot be made (exit status 2)."""


@dataclasses.dataclass(frozen=True)
class Pair:
    """One pair's verdicts in the two sessions (None where a session lacks it)."""

    first: Verdict | None
    second: Verdict | None
    apart: Apart = Apart()    # what tells it from the others: system, build, library

    @property
    def label(self) -> str:
        v = self.first or self.second
        assert v is not None
        where = (f'{self.apart.partition(v)}/{self.apart.stack(v)}'
                 + (f' {v.nodes}N' if v.nodes != 1 else ''))
        return (f'{v.kernel} {v.size} {where} {v.hybrid_mode} {v.hybrid_layout} '
                f'vs mpi {v.mpi_layout}')

    @property
    def outcome(self) -> str:
        if self.first is None:
            return MISSING_1
        if self.second is None:
            return MISSING_2
        return compare_calls(self.first.verdict, self.second.verdict)

    def beyond(self, threshold: float) -> bool:
        """The speedup is more than `threshold` from 1 in either session."""
        return any(v is not None and abs(v.speedup - 1.0) > threshold
                   for v in (self.first, self.second))


def compare_calls(one: str, two: str) -> str:
    """same, not confirmed (one of them INCONCLUSIVE) or changed (two decided calls)."""
    if one == two:
        return SAME
    if INCONCLUSIVE in (one, two):
        return NOT_CONFIRMED
    return CHANGED


def session_verdicts(perflogs: str, name: str,
                     floor: float = DEFAULT_NOISE_FLOOR) -> list[Verdict]:
    """The verdicts of one session's perflogs; StabilityError when there are none."""
    if not os.path.isdir(perflogs):
        raise StabilityError(f'{name}: {perflogs} is not a folder of perflogs')
    stats = ReadStats()
    try:
        records = read_perflogs([perflogs], stats=stats)
    except (PerflogError, OSError) as err:
        raise StabilityError(f'{name}: cannot read the perflogs under {perflogs}: {err}') from err
    if not records:
        why = ', '.join(f'{n} {r}' for r, n in stats.reasons.items()) or 'no perflog lines'
        raise StabilityError(f'{name}: no kernel records under {perflogs} '
                             f'({stats.files} files, {stats.skipped} lines skipped: {why})')
    found = verdicts(records, noise_floor=floor)
    if not found:
        raise StabilityError(f'{name}: {len(records)} records under {perflogs} but no '
                             'hybrid/pure-MPI pair to judge (select both an MPI layout and '
                             'a hybrid one)')
    return found


def pair_up(first: Sequence[Verdict], second: Sequence[Verdict]) -> list[Pair]:
    """The verdicts of the two sessions lined up by key, in the first session's order;
    their labels name the system, build and MPI library where those differ."""
    one = {v.key: v for v in first}
    two = {v.key: v for v in second}
    keys = list(one) + [k for k in two if k not in one]
    apart = Apart.of([*first, *second])
    return [Pair(one.get(k), two.get(k), apart) for k in keys]


def _cell(v: Verdict | None) -> tuple[str, str]:
    return ('-', '-') if v is None else (f'{v.speedup:.3f}', v.verdict)


def table(pairs: Sequence[Pair], threshold: float) -> str:
    rows = [[p.label, *_cell(p.first), *_cell(p.second),
             f'>{threshold:.0%}' if p.beyond(threshold) else '', p.outcome] for p in pairs]
    return tabulate(rows, headers=['pair', 'speedup 1', 'call 1', 'speedup 2', 'call 2',
                                   '|s-1|', 'between sessions'])


@dataclasses.dataclass(frozen=True)
class Summary:
    pairs: int          # pairs found in both sessions
    beyond: int         # of those, more than the threshold from 1 in either session
    changed: int        # of `beyond`, changed
    not_confirmed: int  # of `beyond`, not confirmed
    undecided: int      # of `beyond`, INCONCLUSIVE in both sessions (the same, decided nothing)
    changed_all: int    # changed among all pairs in both sessions
    missing: list[str]  # labels of the pairs found in one session only

    def line(self, threshold: float) -> str:
        text = (f'{self.pairs} pairs in both sessions; {self.beyond} with |speedup - 1| > '
                f'{threshold:.0%} in either session: {self.changed} changed their call, '
                f'{self.not_confirmed} not confirmed (INCONCLUSIVE once), '
                f'{self.beyond - self.changed - self.not_confirmed} the same '
                f'({self.undecided} of them INCONCLUSIVE both times); '
                f'{self.changed_all} changed among all {self.pairs} pairs')
        if self.missing:
            text += f'; {len(self.missing)} in one session only: ' + '; '.join(self.missing)
        return text


def summarise(pairs: Sequence[Pair], threshold: float) -> Summary:
    both = [p for p in pairs if p.first is not None and p.second is not None]
    big = [p for p in both if p.beyond(threshold)]
    return Summary(
        pairs=len(both), beyond=len(big),
        changed=sum(p.outcome == CHANGED for p in big),
        not_confirmed=sum(p.outcome == NOT_CONFIRMED for p in big),
        undecided=sum(p.outcome == SAME and p.first is not None
                      and p.first.verdict == INCONCLUSIVE for p in big),
        changed_all=sum(p.outcome == CHANGED for p in both),
        missing=[f'{p.label} ({p.outcome})' for p in pairs
                 if p.first is None or p.second is None])


def compare(first: str, second: str, threshold: float = 0.10,
            floor: float = DEFAULT_NOISE_FLOOR) -> int:
    """Print the two sessions' verdicts side by side; the exit status."""
    one = session_verdicts(first, 'session 1', floor)
    two = session_verdicts(second, 'session 2', floor)
    pairs = pair_up(one, two)
    print(table(pairs, threshold))
    summary = summarise(pairs, threshold)
    print(summary.line(threshold))
    return 1 if summary.changed else 0


def _reframe(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / 'reframe'
    if beside.is_file():
        return str(beside)
    found = shutil.which('reframe')
    if not found:
        raise StabilityError('reframe not found beside this Python nor on PATH (--reframe)')
    return found


def run_session(reframe: str, root: Path, var: Path, selection: Sequence[str],
                name: str) -> str:
    """One ReFrame session of `selection` into `var`; its perflog folder."""
    if var.exists() and any(var.iterdir()):
        raise StabilityError(f'{name}: {var} is not empty; give another --out (nothing '
                             'already written is overwritten)')
    var.mkdir(parents=True, exist_ok=True)
    argv = [reframe, '-C', 'config/settings.py', '-c', 'checks', '-r', *selection]
    env = dict(os.environ, HARNESS_VAR_DIR=str(var))
    print(f'{name}: HARNESS_VAR_DIR={var} {" ".join(argv)}', flush=True)
    with open(var / 'stability-reframe.out', 'w', encoding='utf-8') as out:
        done = subprocess.run(argv, cwd=root, env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise StabilityError(f'{name}: reframe exited with status {done.returncode} (a check '
                             f'failed or nothing ran; see {var / "stability-reframe.out"} and '
                             f'{var / "reframe.log"})')
    return str(var / 'perflogs')


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog='python reports/tools/stability.py', description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--perflogs', nargs=2, metavar=('A', 'B'),
                   help='compare two sessions already run (their perflog folders)')
    p.add_argument('--out', metavar='DIR',
                   help='run the selection twice, into DIR/session-1 and DIR/session-2')
    p.add_argument('--root', default='.', help='the harness checkout (default: .)')
    p.add_argument('--reframe', help='the reframe command (default: beside this Python)')
    p.add_argument('--threshold', type=float, default=0.10,
                   help='|speedup - 1| beyond which a call must hold (default 0.10)')
    p.add_argument('--floor', type=float, default=DEFAULT_NOISE_FLOOR,
                   help=f'the decision rule\'s noise floor (default {DEFAULT_NOISE_FLOOR})')
    p.add_argument('selection', nargs='*',
                   help='after --: the ReFrame selection options (-n, -p, -P, --system...)')
    args = p.parse_args(argv)
    if (args.perflogs is None) == (args.out is None):
        p.error('give either --perflogs A B or --out DIR -- SELECTION')
    if args.perflogs is not None and args.selection:
        p.error('--perflogs runs nothing: no selection options')
    if not 0 <= args.threshold < 1:
        p.error('--threshold must be in [0, 1)')
    need_fraction(p, '--floor', args.floor)
    try:
        if args.perflogs is not None:
            first, second = args.perflogs
        else:
            root = Path(args.root).resolve()
            if not (root / 'config' / 'settings.py').is_file():
                raise StabilityError(f'{root} has no config/settings.py (--root)')
            reframe = _reframe(args.reframe)
            out = Path(args.out).resolve()
            first = run_session(reframe, root, out / 'session-1', args.selection, 'session 1')
            second = run_session(reframe, root, out / 'session-2', args.selection, 'session 2')
        return compare(first, second, args.threshold, args.floor)
    except StabilityError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
