"""The ``hybridverdict`` command: perflogs in, verdict table and report out.

    hybridverdict [--perflogs DIR|FILE ...] [--since ISO-TIME] [--out DIR]
                  [--noise-floor F] [--no-write]

It prints the verdict table, writes ``verdict-<UTC time>.md`` and ``.json`` in
the output directory (a new file every time: nothing is overwritten) and
prints their path.  Inputs are only read.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys

from tabulate import tabulate

from . import __version__, phases, spmv_model
from .perflog import PerflogError, ReadStats, read_perflogs
from .verdict import DEFAULT_NOISE_FLOOR, Verdict, verdicts

COLUMNS = ('kernel', 'size', 'stack', 'partition', 'cores', 'mpi', 'hybrid',
           'T_mpi [s]', 'T_hybrid [s]', 'speedup', 'noise', 'samples', 'verdict')


def default_var_dir() -> str:
    return os.environ.get('HARNESS_VAR_DIR', os.path.join(os.getcwd(), 'var'))


def rows(found: list[Verdict]) -> list[list[object]]:
    return [[v.kernel, v.size, v.stack, v.partition, v.cores, v.mpi_layout,
             f'{v.hybrid_mode} {v.hybrid_layout}', f'{v.t_mpi:.4g}', f'{v.t_hybrid:.4g}',
             f'{v.speedup:.3f}', f'±{100 * v.noise:.1f}%', f'{v.n_mpi}/{v.n_hybrid}',
             v.verdict] for v in found]


@dataclasses.dataclass
class Section:
    """One analysis table beside the verdicts."""

    title: str
    note: str
    columns: tuple[str, ...]
    rows: list[list[object]]
    data: list[dict]


def sections(records: list) -> list[Section]:
    md = phases.phase_rows(records)
    eff = spmv_model.efficiencies(records)
    ovl = spmv_model.overlaps(records)
    out = [
        Section('MD phase breakdown (Chorley, Walker & Guest, Tables 2-4)',
                'Median time of each phase on the slowest rank; hybrid/mpi above 1: '
                'slower in hybrid.', phases.COLUMNS, phases.table_rows(md),
                [dataclasses.asdict(r) | {'ratio': r.ratio} for r in md]),
        Section('SpMV efficiencies (Chow & Hysom)', spmv_model.DIRECTIONS,
                spmv_model.EFF_COLUMNS, spmv_model.efficiency_rows(eff),
                [dataclasses.asdict(e) for e in eff]),
        Section('SpMV overlap model (Rabenseifner): masteronly against funneled',
                'Fractions of a masteronly call; eps = T_masteronly / T_funneled, one '
                'communicating thread.', spmv_model.OVL_COLUMNS,
                spmv_model.overlap_rows(ovl), [dataclasses.asdict(o) for o in ovl]),
    ]
    return [sec for sec in out if sec.rows]


def markdown(found: list[Verdict], extra: list[Section], stats: ReadStats,
             inputs: list[str], since: dt.datetime | None) -> str:
    systems = sorted({v.system for v in found})
    libs = sorted({f'{v.stack}: {v.mpi_library}' for v in found})
    lines = [
        f'# Hybrid vs pure MPI at equal cores: {", ".join(systems) or "no system"}',
        '',
        f'Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC} by '
        f'hybridverdict {__version__} from {stats.records} perflog records '
        f'({stats.skipped} lines skipped) in {", ".join(inputs)}'
        + (f', runs since {since.isoformat()}' if since else '') + '.',
        '',
        'Speedup = T_mpi / T_hybrid (median total times); WIN or LOSS only '
        'outside the noise band (twice the relative standard error of the ratio, '
        'at least the floor), TIE inside it; samples = pure-MPI/hybrid runs.',
        '',
        'MPI libraries:',
        *[f'- {lib}' for lib in libs],
        '',
        tabulate(rows(found), headers=COLUMNS, tablefmt='github', disable_numparse=True),
        '',
    ]
    for sec in extra:
        lines += [f'## {sec.title}', '', sec.note, '',
                  tabulate(sec.rows, headers=sec.columns, tablefmt='github',
                           disable_numparse=True), '']
    return '\n'.join(lines)


def unique_path(directory: str, stem: str, suffix: str) -> str:
    path = os.path.join(directory, f'{stem}{suffix}')
    n = 1
    while os.path.exists(path):
        path = os.path.join(directory, f'{stem}-{n}{suffix}')
        n += 1
    return path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog='hybridverdict',
        description='Verdicts of hybrid MPI+OpenMP against pure MPI from ReFrame perflogs.')
    p.add_argument('--perflogs', nargs='+', metavar='PATH',
                   help='perflog files or directories (default: $HARNESS_VAR_DIR/perflogs, '
                        'else ./var/perflogs)')
    p.add_argument('--since', metavar='ISO-TIME',
                   help='only runs completed at or after this time, e.g. 2026-11-22T10:00:00+00:00')
    p.add_argument('--out', metavar='DIR',
                   help='where to write the report (default: $HARNESS_VAR_DIR/reports)')
    p.add_argument('--noise-floor', type=float, default=DEFAULT_NOISE_FLOOR, metavar='F',
                   help=f'smallest relative noise band (default {DEFAULT_NOISE_FLOOR})')
    p.add_argument('--no-write', action='store_true', help='print the table only')
    p.add_argument('--version', action='version', version=f'%(prog)s {__version__}')
    args = p.parse_args(argv)
    if not 0 <= args.noise_floor < 1:
        p.error(f'--noise-floor must be in [0, 1), got {args.noise_floor}')
    if args.since:
        try:
            since = dt.datetime.fromisoformat(args.since)
        except ValueError:
            p.error(f'--since: not an ISO time: {args.since!r}')
        args.since = since if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    inputs = args.perflogs or [os.path.join(default_var_dir(), 'perflogs')]
    stats = ReadStats()
    try:
        records = read_perflogs(inputs, since=args.since, stats=stats)
    except (PerflogError, OSError) as err:
        print(f'hybridverdict: {err}', file=sys.stderr)
        return 2
    if stats.skipped:
        reasons = ', '.join(f'{n} {why}' for why, n in sorted(stats.reasons.items()))
        print(f'hybridverdict: warning: skipped {stats.skipped} perflog line(s): {reasons}',
              file=sys.stderr)
    found = verdicts(records, noise_floor=args.noise_floor)
    if not found:
        print(f'hybridverdict: no pure-MPI/hybrid pair among {len(records)} record(s) '
              f'in {", ".join(inputs)}', file=sys.stderr)
        return 1
    print(tabulate(rows(found), headers=COLUMNS, tablefmt='simple', disable_numparse=True))
    extra = sections(records)
    for sec in extra:
        print(f'\n{sec.title}\n{sec.note}')
        print(tabulate(sec.rows, headers=sec.columns, tablefmt='simple', disable_numparse=True))
    if args.no_write:
        return 0
    out_dir = args.out or os.path.join(default_var_dir(), 'reports')
    os.makedirs(out_dir, exist_ok=True)
    stem = f'verdict-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}'
    md_path = unique_path(out_dir, stem, '.md')
    with open(md_path, 'x', encoding='utf-8') as fp:
        fp.write(markdown(found, extra, stats, inputs, args.since))
    json_path = md_path[:-len('.md')] + '.json'
    with open(json_path, 'x', encoding='utf-8') as fp:
        json.dump({'version': __version__, 'records': stats.records,
                   'skipped': stats.skipped,
                   'verdicts': [dataclasses.asdict(v) for v in found],
                   'sections': {sec.title: sec.data for sec in extra}}, fp, indent=1)
    print(f'\nreport written to {md_path} (and {os.path.basename(json_path)})')
    return 0
