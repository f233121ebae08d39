"""The ``hybridverdict`` command: perflogs and run reports in, the report out (its
outputs: ``hybridverdict --help``, docs/pages/report.md), each a new file written
atomically; inputs are only read.  ``hybridverdict changes`` prints the change points
of the history store (``hybridverdict.changes``) and writes them as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from harnesscore import plan
from harnesscore.paths import var_dir
from harnesscore.stopping import fail, need_between, need_fraction, run_main
from polars.exceptions import PolarsError

from . import REPORT_STOPPED, __version__, changes, history
from .atomic import write_replacing
from .perflog import PerflogError, ReadStats, read_perflogs
from .records import iso_time, path_option
from .render import terminal
from .report import build
from .runreport import RunReportError, merge, read_run_reports
from .section import FUNCTIONAL, UNJUDGED
from .store import Store, StoreError
from .verdict import DEFAULT_NOISE_FLOOR
from .write import DEFAULT_TIDY, TIDY_KINDS, write_all

#: Pairs without a verdict listed on stderr when the report has no verdict.
UNJUDGED_SHOWN = 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog='hybridverdict',
        description='Verdicts of hybrid MPI+OpenMP against pure MPI, and the communication '
                    'analysis, from ReFrame perflogs and run reports: a terminal summary, '
                    'Markdown, JSON, a self-contained HTML report with figures, and the tidy '
                    'table as Parquet (CSV and JSON on request).',
        epilog='Outputs, always new files in --out (an existing name gets -1, -2, ...): '
               'verdict-<UTC>.md (Markdown summary), .json (verdicts and analyses), .html '
               '(report with embedded figures), -tidy.parquet (one row per record x '
               'performance variable; -tidy.csv and -tidy.json with --tidy). Inputs are '
               'only read. Exit status: 0 report written, 1 nothing to report (no '
               'verdict, and no analysis that stands alone, such as the functional '
               'verdicts asked for), 2 unreadable input or unwritable output.')
    p.add_argument('--perflogs', nargs='+', metavar='PATH',
                   help='perflog files or directories (default, unless --run-reports is '
                        'given: $HARNESS_VAR_DIR/perflogs, else the checkout\'s var/perflogs)')
    p.add_argument('--run-reports', nargs='+', metavar='PATH',
                   help='ReFrame JSON run reports (run-report-*.json) or directories of them; '
                        'records also found in a perflog are counted once')
    p.add_argument('--since', metavar='ISO-TIME', type=iso_time,
                   help='only runs completed at or after this time, e.g. '
                        '2026-11-22T10:00:00+00:00 (the history plots use every run)')
    p.add_argument('--out', metavar='DIR', type=path_option,
                   help='where to write the report (default: $HARNESS_VAR_DIR/reports)')
    p.add_argument('--noise-floor', type=float, default=DEFAULT_NOISE_FLOOR, metavar='F',
                   help=f'smallest relative noise band (default {DEFAULT_NOISE_FLOOR})')
    p.add_argument('--history-limit', type=int, default=history.DEFAULT_LIMIT, metavar='N',
                   help='most history series drawn (default %(default)s; 0: none)')
    p.add_argument('--history-points', type=int, default=history.DEFAULT_MAX_POINTS,
                   metavar='N', help='most points per history series; more runs are drawn '
                                     'as medians of consecutive runs (default %(default)s)')
    p.add_argument('--tidy', nargs='+', choices=sorted(TIDY_KINDS), default=list(DEFAULT_TIDY),
                   metavar='FORMAT',
                   help='formats of the tidy table: parquet (default), csv, json (CSV and '
                        'JSON are about ten times the size of Parquet)')
    p.add_argument('--history-store', metavar='DIR', type=path_option,
                   help='the history store: perflog lines not stored yet are added to it '
                        '(once), the report window and the history are read from it '
                        '(default, when neither --perflogs nor --run-reports is given and '
                        'HARNESS_VAR_DIR is set, as ./harness calls it: '
                        '$HARNESS_VAR_DIR/history)')
    p.add_argument('--no-history-store', action='store_true',
                   help='read the perflogs and build the history in memory, store nothing')
    p.add_argument('--functional-verdicts', action='store_true',
                   help='also judge the pairs whose runs were oversubscribed (test nodes '
                        'sharing one machine\'s cores, a declared topology larger than the '
                        'machine), in a section of their own: the verdict path exercised, '
                        'not findings; never among the verdicts or confirmed')
    p.add_argument('--no-write', action='store_true',
                   help='print the summary only (nothing is stored: implies '
                        '--no-history-store)')
    p.add_argument('--version', action='version', version=f'%(prog)s {__version__}')
    args = p.parse_args(argv)
    need_fraction(p, '--noise-floor', args.noise_floor)
    need_between(p, '--history-limit', args.history_limit, 0, history.MAX_LIMIT)
    need_between(p, '--history-points', args.history_points, 2, history.MAX_POINTS)
    return args


def store_dir(args: argparse.Namespace) -> str | None:
    """The history store to use, if any (see --history-store)."""
    if args.no_history_store or args.no_write:
        return None
    if args.history_store:
        return args.history_store
    if not args.perflogs and not args.run_reports and os.environ.get('HARNESS_VAR_DIR'):
        return os.path.join(var_dir(), 'history')
    return None


#: ``hybridverdict changes --fail-on-change``: a regression was found
EXIT_REGRESSION = 4


def _written(args: argparse.Namespace, doc: dict,
             regressions: list[changes.ChangePoint]) -> int:
    """``hybridverdict changes``: `doc` written to --json, and the exit status
    (EXIT_REGRESSION with --fail-on-change where one of `regressions` is worse)."""
    if args.json:
        try:
            write_replacing(args.json, json.dumps(doc, indent=1))
        except OSError as err:
            print(f'hybridverdict changes: cannot write {args.json}: {err}', file=sys.stderr)
            return 2
    if args.fail_on_change and any(c.direction == 'worse' for c in regressions):
        return EXIT_REGRESSION
    return 0


#: the options of the knobs of ``changes.Knobs``, in its field order: the option, its
#: field (the option's dest), type, metavar and help
KNOB_OPTIONS = (
    ('--min-segment', 'min_segment', int, 'N',
     'sessions on each side of a change point (default 3)'),
    ('--p-value', 'p_value', float, 'P',
     f'largest p-value of the permutation test, at least {changes.MIN_P_VALUE:g} '
     '(default 0.01)'),
    ('--min-magnitude', 'magnitude', float, 'F',
     'smallest change, a fraction: 0.05 = 5%% (default 0.05)'),
    ('--session-gap', 'session_gap', float, 'MIN',
     'minutes between runs that start a new session, at most '
     f'{changes.MAX_SESSION_GAP:g} (default 60)'))


def changes_main(argv: list[str]) -> int:
    """``hybridverdict changes``: the change points of the history store."""
    p = argparse.ArgumentParser(
        prog='hybridverdict changes',
        description='Change points of every series (test variant, partition, stack, node '
                    'count, performance variable) over the history store, one point per '
                    'session: where its level moved, by how much (95%% interval), worse or '
                    'better, since when, and what changed in the provenance then.',
        epilog=f'Exit status: 0, {EXIT_REGRESSION} with --fail-on-change when a confirmed '
               'regression was found, 2 unreadable or empty store, bad option or knob. Knobs not '
               'given take HARNESS_CHANGE_MIN_SEGMENT, HARNESS_CHANGE_P_VALUE, '
               'HARNESS_CHANGE_MAGNITUDE, HARNESS_CHANGE_SESSION_GAP, else the defaults.')
    p.add_argument('--since', metavar='ISO', type=iso_time,
                   help='sessions that start at or after this time (with --last-night: '
                        'the last session must, else exit status 2; the nightly gives its '
                        'own start, so that it never judges an older night)')
    p.add_argument('--until', metavar='ISO', type=iso_time,
                   help='sessions that start before this time (not with --last-night)')
    p.add_argument('--store', metavar='DIR', type=path_option,
                   help='the history store (default: $HARNESS_VAR_DIR/history, else '
                        'the checkout\'s var/history)')
    p.add_argument('--json', metavar='FILE', type=path_option,
                   help='also write the change points as JSON')
    for option, field, kind, metavar, text in KNOB_OPTIONS:
        p.add_argument(option, dest=field, type=kind, metavar=metavar, help=text)
    p.add_argument('--last-night', action='store_true',
                   help='print the morning page of the last session instead ("Since the '
                        'last night": what moved with it, checks newly failing or passing, '
                        'missing or new)')
    p.add_argument('--fail-on-change', action='store_true',
                   help=f'exit {EXIT_REGRESSION} when a confirmed regression was found (with '
                        '--last-night: any regression on the page, confirmed or not)')
    args = p.parse_args(argv)
    if args.last_night and args.until is not None:
        # the page is of the last session of the store: an --until was left unread, and
        # a later night's page printed (and judged) as if it were of the range given
        p.error(f'--until {args.until.isoformat()}: not with --last-night, whose page is of '
                'the last session in the store (--since names the earliest start it may have)')
    if args.since is not None and args.until is not None and args.since >= args.until:
        p.error(f'--since {args.since.isoformat()} is not before --until '
                f'{args.until.isoformat()}: no session starts in that range')
    given = {field: getattr(args, field) for _, field, *_ in KNOB_OPTIONS}
    for option, field, *_ in KNOB_OPTIONS:
        value = given[field]
        if value is not None and (problem := changes.Knobs.problem(field, value)):
            p.error(f'{option} {value}: {problem}')
    try:
        knobs = changes.Knobs.from_env(**given)
    except changes.KnobError as err:
        p.error(str(err))
    directory = args.store or os.path.join(var_dir(), 'history')
    if not os.path.isdir(directory):
        what = 'does not exist' if not os.path.exists(directory) else 'is not a directory'
        print(f'hybridverdict changes: the history store {directory} {what}'
              + ('' if args.store else ' (the default; --store names another)'),
              file=sys.stderr)
        return 2
    store = Store(directory)
    try:
        if not store.parts():
            # a nightly's "no change" from the wrong folder would be green by accident
            print(f'hybridverdict changes: the history store {directory} holds no part: '
                  'nothing was stored there (the report stores the perflogs it reads, '
                  'hybridverdict --history-store DIR)', file=sys.stderr)
            return 2
        hist = changes.History.from_store(store)
        if args.last_night:
            morning = changes.since_last_night(hist, knobs=knobs)
        else:
            found = changes.find(hist, knobs, since=args.since, until=args.until)
    except (StoreError, OSError) as err:
        print(f'hybridverdict changes: {err}', file=sys.stderr)
        return 2
    except PolarsError as err:  # a part damaged past its schema check
        print(f'hybridverdict changes: history store {directory}: cannot read its parts: '
              f'{err}', file=sys.stderr)
        return 2
    if args.last_night:
        if args.since is not None and (morning.last_night is None
                                       or morning.last_night < args.since):
            # tonight's records were not stored here (the report ran with
            # --no-history-store, or stored elsewhere): an older night's page
            # would be green by accident
            last = morning.last_night.isoformat() if morning.last_night else 'none'
            print(f'hybridverdict changes: the history store {directory} holds no session '
                  f'since {args.since.isoformat()} (its last started {last}): nothing was '
                  'stored there since (the report stores what it reads, unless '
                  '--no-history-store; --history-store DIR stores elsewhere)', file=sys.stderr)
            return 2
        print('\n'.join(morning.lines()))
        return _written(args, morning.as_dict(), morning.changes)
    for c in found:
        print(f'{c.kind}: {c.line()}')
    confirmed = [c for c in found if c.confirmed]
    print(f'{len(confirmed)} change point(s), {len(found) - len(confirmed)} unconfirmed, '
          f'in {directory} ({dataclasses.asdict(knobs)})')
    return _written(args, {'store': directory, 'knobs': dataclasses.asdict(knobs),
                           'since': args.since and args.since.isoformat(),
                           'until': args.until and args.until.isoformat(),
                           'changes': [c.as_dict() for c in found]}, confirmed)


def main(argv: list[str] | None = None) -> int:
    """``hybridverdict``: the report (``report``); Ctrl-C ends it with status 130 and
    one line, no traceback, SIGTERM and SIGHUP with 128 plus the signal's number (a
    report set half written is removed: ``write.write_all``).  The command starts
    in ``__main__``, which loads this module under the same lines."""
    return run_main(report, argv, *REPORT_STOPPED)


def report(argv: list[str] | None) -> int:
    """The report, stopped by nothing (``main``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == 'changes':
        return changes_main(argv[1:])
    args = parse_args(argv)
    try:
        plan.max_rounds()       # the verdicts' cap of rounds (their `stopped` column)
    except ValueError as err:
        return fail('hybridverdict', err)
    perflogs = args.perflogs or ([] if args.run_reports else
                                 [os.path.join(var_dir(), 'perflogs')])
    inputs = perflogs + (args.run_reports or [])
    stats = ReadStats()
    directory = store_dir(args)
    if directory is not None:
        # the report's morning page reads the change-point knobs (HARNESS_CHANGE_*)
        try:
            changes.Knobs.from_env()
        except changes.KnobError as err:
            print(f'hybridverdict: {err}', file=sys.stderr)
            return 2
    stored = None
    stored_records = 0
    try:
        if directory is None:
            records = read_perflogs(perflogs, stats=stats)
        else:
            store = Store(directory)
            done = store.ingest(perflogs, stats)
            records = store.records(args.since)
            stored, stored_records = store.scan(), int(store.state().get('total_records', 0))
            print(f'hybridverdict: history store {directory}: {done.records} new record(s)'
                  + (f' in {os.path.basename(done.part)}' if done.part else '')
                  + f', {stored_records} in all', file=sys.stderr)
        if args.run_reports:
            extra = read_run_reports(args.run_reports, stats)
            if directory is not None and args.since is not None:
                extra = [r for r in extra if r.time >= args.since]
            records = merge(records, extra)
    except (PerflogError, RunReportError, StoreError, OSError) as err:
        print(f'hybridverdict: {err}', file=sys.stderr)
        return 2
    for warning in stats.warnings():
        print(f'hybridverdict: warning: {warning}', file=sys.stderr)
    rep = build(records, stats, inputs, since=args.since, noise_floor=args.noise_floor,
                history_limit=args.history_limit, history_points=args.history_points,
                stored=stored, stored_records=stored_records,
                functional=args.functional_verdicts)
    if not rep.verdicts:
        print(f'hybridverdict: no pure-MPI/hybrid pair among {rep.meta.records} record(s) '
              f'in {", ".join(inputs)}', file=sys.stderr)
        left = rep.section(UNJUDGED)
        for row in (left.data if left else [])[:UNJUDGED_SHOWN]:
            print(f'hybridverdict: {row["sentence"]}', file=sys.stderr)
        if left and len(left.data) > UNJUDGED_SHOWN:
            print(f'hybridverdict: ... and {len(left.data) - UNJUDGED_SHOWN} more pair(s) '
                  f'without a verdict', file=sys.stderr)
        func = rep.section(FUNCTIONAL)
        if func and func.rows:
            print(f'hybridverdict: {len(func.rows)} functional verdict(s) of oversubscribed '
                  f'runs in the report (not findings)', file=sys.stderr)
    if not rep.verdicts and not any(s.standalone and s.rows for s in rep.sections):
        return 1
    print(terminal(rep))
    if args.no_write:
        return 0
    out_dir = args.out or os.path.join(var_dir(), 'reports')
    try:
        paths = write_all(rep, out_dir, tidy_formats=args.tidy)
    except (OSError, PolarsError) as err:       # polars' full disk is a ComputeError
        print(f'hybridverdict: cannot write the report: {err}', file=sys.stderr)
        return 2
    print(f'\nreport written to {paths["md"]} (and '
          f'{", ".join(os.path.basename(p) for k, p in paths.items() if k != "md")})')
    return 0

