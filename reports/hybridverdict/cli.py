"""The ``hybridverdict`` command: perflogs and run reports in, the report out.

    hybridverdict [--perflogs PATH ...] [--run-reports PATH ...] [--since ISO-TIME]
                  [--out DIR] [--noise-floor F] [--history-limit N]
                  [--history-points N] [--no-write]

It prints the terminal summary and writes, as new files in the output
directory (nothing is ever overwritten): ``verdict-<UTC>.md`` (Markdown
summary), ``.json`` (verdicts and analyses), ``.html`` (self-contained report
with figures), ``-tidy.csv`` and ``-tidy.json`` (one row per record x
performance variable).  Inputs are only read.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__, history
from .perflog import PerflogError, ReadStats, parse_time, read_perflogs
from .render import COLUMNS, rows, terminal  # noqa: F401  (COLUMNS, rows: for callers)
from .report import (
    Section,  # noqa: F401  (kept for callers)
    build,
)
from .runreport import RunReportError, merge, read_run_reports
from .verdict import DEFAULT_NOISE_FLOOR
from .write import unique_path, write_all  # noqa: F401  (unique_path: for callers)


def default_var_dir() -> str:
    return os.environ.get('HARNESS_VAR_DIR', os.path.join(os.getcwd(), 'var'))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog='hybridverdict',
        description='Verdicts of hybrid MPI+OpenMP against pure MPI, and the communication '
                    'analysis, from ReFrame perflogs and run reports: a terminal summary, '
                    'Markdown, JSON, a self-contained HTML report with figures, and the tidy '
                    'table as CSV and JSON.',
        epilog='Outputs, always new files in --out (an existing name gets -1, -2, ...): '
               'verdict-<UTC>.md (Markdown summary), .json (verdicts and analyses), .html '
               '(report with embedded figures), -tidy.csv and -tidy.json (one row per record '
               'x performance variable). Inputs are only read. Exit status: 0 report '
               'written, 1 nothing to report, 2 unreadable input or unwritable output.')
    p.add_argument('--perflogs', nargs='+', metavar='PATH',
                   help='perflog files or directories (default, unless --run-reports is '
                        'given: $HARNESS_VAR_DIR/perflogs, else ./var/perflogs)')
    p.add_argument('--run-reports', nargs='+', metavar='PATH',
                   help='ReFrame JSON run reports (run-report-*.json) or directories of them; '
                        'records also found in a perflog are counted once')
    p.add_argument('--since', metavar='ISO-TIME',
                   help='only runs completed at or after this time, e.g. '
                        '2026-11-22T10:00:00+00:00 (the history plots use every run)')
    p.add_argument('--out', metavar='DIR',
                   help='where to write the report (default: $HARNESS_VAR_DIR/reports)')
    p.add_argument('--noise-floor', type=float, default=DEFAULT_NOISE_FLOOR, metavar='F',
                   help=f'smallest relative noise band (default {DEFAULT_NOISE_FLOOR})')
    p.add_argument('--history-limit', type=int, default=history.DEFAULT_LIMIT, metavar='N',
                   help='most history series drawn (default %(default)s; 0: none)')
    p.add_argument('--history-points', type=int, default=history.DEFAULT_MAX_POINTS,
                   metavar='N', help='most points per history series; more runs are drawn '
                                     'as medians of consecutive runs (default %(default)s)')
    p.add_argument('--no-write', action='store_true', help='print the summary only')
    p.add_argument('--version', action='version', version=f'%(prog)s {__version__}')
    args = p.parse_args(argv)
    if not 0 <= args.noise_floor < 1:
        p.error(f'--noise-floor must be in [0, 1), got {args.noise_floor}')
    if args.history_limit < 0:
        p.error(f'--history-limit must be >= 0, got {args.history_limit}')
    if args.history_points < 2:
        p.error(f'--history-points must be >= 2, got {args.history_points}')
    if args.since is not None:   # an empty --since is an error too, not 'all'
        try:
            args.since = parse_time(args.since)
        except ValueError:
            p.error(f'--since: not an ISO time: {args.since!r}')
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    perflogs = args.perflogs or ([] if args.run_reports else
                                 [os.path.join(default_var_dir(), 'perflogs')])
    inputs = perflogs + (args.run_reports or [])
    stats = ReadStats()
    try:
        records = read_perflogs(perflogs, stats=stats)
        if args.run_reports:
            records = merge(records, read_run_reports(args.run_reports, stats))
    except (PerflogError, RunReportError, OSError) as err:
        print(f'hybridverdict: {err}', file=sys.stderr)
        return 2
    for warning in stats.warnings():
        print(f'hybridverdict: warning: {warning}', file=sys.stderr)
    rep = build(records, stats, inputs, since=args.since, noise_floor=args.noise_floor,
                history_limit=args.history_limit, history_points=args.history_points)
    if not rep.verdicts:
        print(f'hybridverdict: no pure-MPI/hybrid pair among {rep.meta.records} record(s) '
              f'in {", ".join(inputs)}', file=sys.stderr)
    if not rep.verdicts and not any(s.key in COMM_KEYS and s.rows for s in rep.sections):
        return 1
    print(terminal(rep))
    if args.no_write:
        return 0
    out_dir = args.out or os.path.join(default_var_dir(), 'reports')
    try:
        paths = write_all(rep, out_dir)
    except OSError as err:
        print(f'hybridverdict: cannot write the report: {err}', file=sys.stderr)
        return 2
    print(f'\nreport written to {paths["md"]} (and '
          f'{", ".join(os.path.basename(p) for k, p in paths.items() if k != "md")})')
    return 0


#: sections that are worth a report even without any verdict
COMM_KEYS = frozenset(('hockney', 'stack_comparison', 'ring_vs_osu', 'ring_osu_accuracy',
                       'saturation', 'collectives'))
