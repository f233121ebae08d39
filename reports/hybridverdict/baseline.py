"""The ``hybridverdict-baseline`` command: a system's references from its runs.

    hybridverdict-baseline [--perflogs DIR|FILE ...] [--since ISO] [--until ISO]
                           [--system NAME ...] [--prefix DIR] [--floor F]
                           [--false-alarm A] [--night-samples N] [--dry-run] [--force]

It writes, per system, the ReFrame ``$ref`` file ``<prefix>/<system>.yaml``
(docs/pages/nightly.md#references): each reference the median of the runs of one
test variant on one partition and stack, each tolerance one-sided and sized for a
false-alarm rate (``harnesscore.stats.reference_band``), never narrower than
``--floor``.  Only runs that passed, and not on a busy machine, count, and a
``HybridVerdict``'s ``verdict`` code only where its call was decided (an
INCONCLUSIVE call logs 0, as a TIE does; a pair never decided gets an unbounded
reference); where a variant ran with several
builds, MPI libraries or node counts, its reference comes from those of its
latest run, and the others are named.  It prints the difference from the
existing file and replaces it only with ``--force``, keeping the previous version
under ``<prefix>/previous/``; both are written whole or not at all
(``hybridverdict.atomic``).  The new references are merged into the file as read
again under an exclusive lock on ``<prefix>/.lock``: two baselines at once each
merge into what the other wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import os
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable

import yaml
from harnesscore import references
from harnesscore import stats as stats_rule
from harnesscore.paths import references_dir, var_dir
from harnesscore.plan import MAX_SAMPLES, bounded_int, samples_per_run
from harnesscore.stopping import fail, run_main
from tabulate import tabulate

from . import BASELINE_STOPPED, atomic
from .changes import record_sessions
from .perflog import PerflogError, ReadStats, Record, read_perflogs
from .records import iso_time, path_option, printable

DEFAULT_FLOOR = 0.05
#: the file a baseline locks in its prefix (``atomic.locked``)
LOCK = '.lock'
#: Sessions below which the drift between sessions is poorly measured.
FEW_SESSIONS = 5
#: ``HybridVerdict``'s code of its call (1 WIN, 0 TIE, -1 LOSS; 0 INCONCLUSIVE too)
VERDICT = 'verdict'

#: (partition, environ, variant, variable) within one test class
Key = tuple[str, str, str, str]
#: [reference, lower threshold, upper threshold, unit]
RefTuple = list


class ReferencesError(Exception):
    """A references file that cannot be read or written as asked."""


@dataclasses.dataclass
class Samples:
    unit: str
    values: list[float] = dataclasses.field(default_factory=list)
    #: the session (index) of each value
    sessions: list[int] = dataclasses.field(default_factory=list)

    def by_session(self) -> list[list[float]]:
        groups: dict[int, list[float]] = defaultdict(list)
        for value, session in zip(self.values, self.sessions or [0] * len(self.values)):
            groups[session].append(value)
        return [groups[k] for k in sorted(groups)]


#: What a run was made with, beyond its test variant: runs that differ in it
#: are not comparable (a Debug build, another install of the stack, more nodes).
Made = tuple[str, str, int]


def made_with(rec: Record) -> Made:
    return (rec.build_spec, rec.mpi_library, rec.nodes)


def collect(records: Iterable[Record],
            left_out: list[str] | None = None) -> dict[str, dict[str, dict[Key, Samples]]]:
    """system -> test class -> key -> samples, from runs that passed.  Per test
    variant only the runs made as its latest run was (``made_with``) count, and
    per variable only the values in its latest run's unit, and a ``verdict``
    code only where its call was decided (``undecided``); `left_out` receives
    one line per variant, and per variable, whose others were left out."""
    usable = [r for r in records if r.name and r.usable and not r.busy]
    latest: dict[tuple[str, str, str, str, str], Made] = {}
    units: dict[tuple[str, Key], str] = {}     # per class: two checks share variants
    for rec in sorted(usable, key=lambda r: r.time):       # the latest run last
        cls, variant = references.split_name(rec.name)
        latest[(rec.system, cls, rec.partition, rec.stack, variant)] = made_with(rec)
        for var in rec.values:
            units[(cls, (f'{rec.system}:{rec.partition}', rec.stack, variant, var))] = \
                rec.units.get(var, '')
    other_units: dict[tuple[str, Key], set[str]] = defaultdict(set)
    out: dict[str, dict[str, dict[Key, Samples]]] = defaultdict(lambda: defaultdict(dict))
    others: dict[tuple[str, str, str, str, str], set[Made]] = defaultdict(set)
    undecided_calls: Counter[tuple[str, str, Key]] = Counter()
    # the sessions' rule is the change points' and the verdicts' (``changes.sessions``)
    for rec, session in zip(usable, record_sessions(usable)):
        cls, variant = references.split_name(rec.name)
        where = (rec.system, cls, rec.partition, rec.stack, variant)
        if made_with(rec) != latest[where]:
            others[where].add(made_with(rec))
            continue
        for var, value in rec.values.items():
            key = (f'{rec.system}:{rec.partition}', rec.stack, variant, var)
            unit = units[(cls, key)]
            if rec.units.get(var, '') != unit:
                # another scale (MB/s against GB/s): not one band
                other_units[(cls, key)].add(rec.units.get(var, ''))
                continue
            entry = out[rec.system][cls].setdefault(key, Samples(unit))
            if var == VERDICT and undecided(rec):
                # no value, but the variable keeps its reference (``reference_tuple``)
                undecided_calls[(rec.system, cls, key)] += 1
                continue
            entry.values.append(value)
            entry.sessions.append(session)
    if left_out is not None:
        for (system, cls, (part, stack, variant, var)), n in sorted(undecided_calls.items()):
            decided = out[system][cls][(part, stack, variant, var)].values
            left_out.append(
                f'{cls} {part} {stack} [{variant}] {var}: '
                + ('from the decided calls; left out' if decided else
                   'never decided: an unbounded reference (any code passes) from')
                + f' {n} INCONCLUSIVE one(s) (code 0, no TIE)')
        for (cls, (part, stack, variant, var)), seen in sorted(other_units.items()):
            left_out.append(
                f'{cls} {part} {stack} [{variant}] {var}: from the values in '
                f'{units[(cls, (part, stack, variant, var))] or "no unit"} (its latest '
                f'run\'s); left out those in {", ".join(repr(u) for u in sorted(seen))}')
        for where, made in sorted(others.items()):
            system, cls, partition, stack, variant = where
            build, lib, nodes = latest[where]
            left_out.append(
                f'{cls} {system}:{partition} {stack} [{variant}]: from the runs of '
                f'"{build}", "{lib}", {nodes} node(s) (its latest); left out the runs of '
                + '; '.join(f'"{b}", "{m}", {n} node(s)' for b, m, n in sorted(made)))
    return out


def undecided(rec: Record) -> bool:
    """Whether `rec` is a ``HybridVerdict`` run whose call was INCONCLUSIVE: its
    ``judgement_detail`` opens with ``UNDECIDED_VERDICT`` (``checks/kernels.py``)."""
    return rec.judgement_detail.startswith(stats_rule.UNDECIDED_VERDICT)


def reference_tuple(samples: Samples, floor: float,
                    false_alarm: float = stats_rule.DEFAULT_FALSE_ALARM, night_samples: int = 3,
                    variables: int = 1) -> RefTuple:
    """[median, lower, upper, unit] with a one-sided tolerance sized for the
    false-alarm rate (``stats.reference_band``), at least `floor`; without values
    (a ``verdict`` never decided: ``collect``) an unbounded [0, None, None, unit],
    as the checks' informational references: ReFrame finds a reference (as
    ``require_reference`` wants) that no value fails."""
    if not samples.values:
        return [0.0, None, None, samples.unit]
    med = statistics.median(samples.values)
    lower_is_better = references.lower_is_better(samples.unit)
    if med == 0 or min(samples.values) <= 0:
        # no log scale: an absolute band of the floor around a zero median (ReFrame
        # reads the thresholds of a zero reference as absolute), else the largest
        # deviation
        dev = max(abs(v - med) for v in samples.values)
        tol = max(floor, dev if med == 0 else dev / abs(med))
    else:
        size = stats_rule.reference_band(samples.by_session(), night_samples, false_alarm,
                                         variables)
        grow = math.expm1(size.log_tolerance)
        fall = -math.expm1(-size.log_tolerance)
        tol = max(floor, grow if lower_is_better else fall)
    tol = round(tol, 4)
    # One-sided: a bound above where lower is better, else below.  ReFrame's
    # thresholds are fractions of |reference|; a positive reference cannot fall
    # by more than 100%, a negative one rise by it.
    if lower_is_better:
        low, high = None, (min(tol, 1.0) if med < 0 else tol)
    else:
        low, high = (-min(tol, 1.0) if med > 0 else -tol), None
    return [float(f'{med:.6g}'), low, high, samples.unit]


def build_entries(classes: dict[str, dict[Key, Samples]], floor: float,
                  false_alarm: float = stats_rule.DEFAULT_FALSE_ALARM,
                  night_samples: int = 3) -> dict[str, dict[Key, RefTuple]]:
    """The references of every variant; the false-alarm rate of a variant is
    split over its variables (one check fails when any of them does)."""
    out: dict[str, dict[Key, RefTuple]] = {}
    for cls, keys in classes.items():
        # an unbounded reference (``reference_tuple`` of no values) never fails
        per_variant = Counter(key[:3] for key, s in keys.items() if s.values)
        out[cls] = {key: reference_tuple(s, floor, false_alarm, night_samples,
                                         per_variant[key[:3]])
                    for key, s in keys.items()}
    return out


def flatten(doc: dict, path: str) -> dict[str, dict[Key, RefTuple]]:
    """The entries of a references file written with the harness's index."""
    out: dict[str, dict[Key, RefTuple]] = {}
    if not isinstance(doc, dict):
        raise ReferencesError(f'{path}: not a mapping of test names')
    for cls, body in doc.items():
        if not isinstance(body, dict):
            raise ReferencesError(f'{path}: entry {cls!r} is not a mapping')
        index = tuple(body.get('$index', ()))
        if index != references.INDEX:
            raise ReferencesError(
                f'{path}: entry {cls!r} has $index {list(index)}, expected '
                f'{list(references.INDEX)} (edit it by hand or move the file away)')
        entries: dict[Key, RefTuple] = {}
        for part, envs in body.items():
            if part == '$index':
                continue
            for env, variants in (envs or {}).items():
                for variant, refs in (variants or {}).items():
                    for var, ref in (refs or {}).items():
                        if not isinstance(ref, list) or len(ref) not in (3, 4):
                            raise ReferencesError(
                                f'{path}: {cls} {part} {env} [{variant}] {var}: expected '
                                f'[reference, lower, upper, unit], got {ref!r}')
                        entries[(str(part), str(env), str(variant), str(var))] = ref
        out[str(cls)] = entries
    return out


def read_references(path: str) -> dict[str, dict[Key, RefTuple]]:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding='utf-8') as fp:
            doc = yaml.safe_load(fp)
        # Every entry of the right type (ReFrame's $ref reader would skip every test).
        references.validate_references(doc, path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as err:
        raise ReferencesError(f'cannot read references: {" ".join(str(err).split())}') \
            from None
    return flatten(doc or {}, path)


def _xfail(ref: RefTuple | None) -> bool:
    """Whether `ref` is ReFrame's expected failure, ``[$xfail, message, [ref, lower,
    upper, unit]]`` (a user's mark: references.validate_references takes it)."""
    return isinstance(ref, (list, tuple)) and len(ref) == 3 and ref[0] == '$xfail'


def _figures(ref: RefTuple | None) -> RefTuple | None:
    """[ref, lower, upper, unit] of an entry, an expected failure's too."""
    return ref[2] if _xfail(ref) else ref


def merge(old: dict[str, dict[Key, RefTuple]],
          new: dict[str, dict[Key, RefTuple]]) -> dict[str, dict[Key, RefTuple]]:
    """`old` with `new`'s entries; a user's expected failure stays one, its message
    kept and its figures the new ones."""
    out = {cls: dict(keys) for cls, keys in old.items()}
    for cls, keys in new.items():
        mine = out.setdefault(cls, {})
        for key, ref in keys.items():
            was = mine.get(key)
            mine[key] = [was[0], was[1], ref] if _xfail(was) else ref
    return out


def to_document(entries: dict[str, dict[Key, RefTuple]]) -> dict:
    doc: dict = {}
    for cls in sorted(entries):
        body: dict = {'$index': list(references.INDEX)}
        for (part, env, variant, var), ref in sorted(entries[cls].items()):
            body.setdefault(part, {}).setdefault(env, {}).setdefault(variant, {})[var] = ref
        doc[cls] = body
    return doc


def _fmt_tol(ref: RefTuple | None) -> str:
    if ref is None:
        return ''
    return '/'.join(f'{100 * x:+.0f}%' for x in ref[1:3] if x is not None) or 'any'


def diff_rows(old: dict[str, dict[Key, RefTuple]],
              new: dict[str, dict[Key, RefTuple]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for cls in sorted(set(old) | set(new)):
        keys = set(old.get(cls, {})) | set(new.get(cls, {}))
        for key in sorted(keys):
            entry = old.get(cls, {}).get(key)
            was, now = _figures(entry), _figures(new.get(cls, {}).get(key))
            if now is None:
                status, change = 'kept', ''
            elif was is None:
                status, change = 'new', ''
            else:
                status = 'same' if was[:3] == now[:3] else 'changed'
                change = (f'{100 * (now[0] / was[0] - 1):+.1f}%'
                          if was[0] not in (0, None) and now[0] is not None else '')
            if _xfail(entry):
                status += ' (xfail kept)'
            rows.append([cls, *key,
                         '' if was is None else f'{was[0]:.6g}', _fmt_tol(was),
                         '' if now is None else f'{now[0]:.6g}', _fmt_tol(now),
                         change, status])
    return rows


DIFF_COLUMNS = ('test', 'partition', 'stack', 'variant', 'variable', 'old', 'old tol',
                'new', 'new tol', 'change', 'status')


#: The first of the 3 comment lines the written file opens with (``write_references``).
HEADER_FIRST = '# Performance references of this system, written by hybridverdict-baseline'


def own_comments(path: str) -> int:
    """How many comment lines of the file at `path` a user wrote (not our header):
    the file is written anew from its entries, without them."""
    try:
        with open(path, encoding='utf-8') as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return 0
    ours = 3 if lines and lines[0] == HEADER_FIRST else 0
    return sum(_has_comment(line) for line in lines[ours:])


def _has_comment(line: str) -> bool:
    """Whether a YAML line holds a comment: a # at its start or after a blank,
    outside quotes."""
    quote = ''
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = ''
        elif c in '\'"':
            quote = c
        elif c == '#' and (i == 0 or line[i - 1].isspace()):
            return True
    return False


def write_references(path: str, entries: dict[str, dict[Key, RefTuple]], force: bool,
                     now: dt.datetime) -> str | None:
    """Write the file; return where the previous version was kept (if any).  A
    symlinked file is replaced where its link points (the link stays)."""
    kept = None
    if os.path.exists(path):
        previous = os.path.join(os.path.dirname(path), 'previous')
        if not force:
            raise ReferencesError(f'{path} exists: rerun with --force to replace it (the '
                                  f'previous version is then kept under {previous})')
        os.makedirs(previous, exist_ok=True)
        stem = f'{os.path.splitext(os.path.basename(path))[0]}-{now:%Y%m%dT%H%M%S}Z'
        kept = atomic.unique_stem(previous, stem, ('.yaml',)) + '.yaml'
        with open(path, 'rb') as old:
            atomic.write_new(kept, old.read())
    target = os.path.realpath(path)
    os.makedirs(os.path.dirname(target) or '.', exist_ok=True)
    header = (f'{HEADER_FIRST}\n'
              f'# on {now:%Y-%m-%dT%H:%M:%SZ}: the median of the runs, tolerance from their\n'
              f'# spread.  A ReFrame $ref file: [reference, lower, upper, unit].\n')
    text = header + yaml.safe_dump(to_document(entries), sort_keys=False,
                                   default_flow_style=None, width=100)
    try:
        atomic.write_replacing(target, text)
    except BaseException:
        if kept is not None:   # the file is unchanged: no copy of it to keep
            os.unlink(kept)
        raise
    return kept


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number: {text!r}') from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f'must be positive: {text!r}')
    return value


def _rate(text: str) -> float:
    value = _positive(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f'must be below 1: {text!r}')
    return value


def _env_rate() -> float:
    text = os.environ.get('HARNESS_FALSE_ALARM', '').strip()
    if not text:
        return stats_rule.DEFAULT_FALSE_ALARM
    try:
        return _rate(text)
    except argparse.ArgumentTypeError as err:
        raise SystemExit(f'hybridverdict-baseline: error: HARNESS_FALSE_ALARM {err}') from None


def _count(text: str) -> int:
    try:
        return bounded_int(text, 1, MAX_SAMPLES)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


#: exit status when stdout was closed early (``--dry-run | head``): a shell's for SIGPIPE
EXIT_STDOUT_CLOSED = 128 + 13


def _stdout_closed() -> int:
    """Quietly stop after a BrokenPipeError on stdout (what is still buffered goes
    to /dev/null, not into an error at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):     # stdout without a file descriptor (a test's capture)
        pass
    return EXIT_STDOUT_CLOSED


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog='hybridverdict-baseline',
        description='Write per-system ReFrame reference files from the runs in perflogs.')
    ap.add_argument('--perflogs', nargs='+', default=[os.path.join(var_dir(), 'perflogs')],
                    help='perflog files or directories (default: $HARNESS_VAR_DIR/perflogs)')
    ap.add_argument('--since', type=iso_time, help='only runs completed at or after this')
    ap.add_argument('--until', type=iso_time, help='only runs completed before this')
    ap.add_argument('--system', action='append', default=[],
                    help='only this system (repeatable; default: every system in the logs)')
    ap.add_argument('--prefix', default=references_dir(), type=path_option,
                    help='directory of the <system>.yaml files (default: '
                         '$RFM_REFERENCE_PREFIX, else the checkout\'s config/references)')
    ap.add_argument('--floor', type=_positive, default=DEFAULT_FLOOR,
                    help=f'smallest tolerance, a fraction (default {DEFAULT_FLOOR})')
    ap.add_argument('--false-alarm', type=_rate, default=_env_rate(),
                    help='the rate at which a check may fail on a night where nothing '
                         'changed; the bands are sized for it (default $HARNESS_FALSE_ALARM '
                         f'or {stats_rule.DEFAULT_FALSE_ALARM})')
    ap.add_argument('--night-samples', type=_count, default=None,
                    help='runs per variant in a nightly, whose median is judged (default '
                         '$HARNESS_REPEAT or 3)')
    ap.add_argument('--dry-run', action='store_true', help='show the difference, write nothing')
    ap.add_argument('--force', action='store_true',
                    help='replace an existing file (its previous version is kept)')
    return ap


def _print_samples(system: str, path: str, classes: dict[str, dict[Key, Samples]],
                   false_alarm: float, night: int) -> None:
    """The line that opens a system's part of the output, and a note where few
    sessions lie behind its variables."""
    samples = [s for keys in classes.values() for s in keys.values()]
    print(f'== {system}: {path} ({sum(len(s.values) for s in samples)} samples; bands '
          f'for a false-alarm rate of {false_alarm:g} per check, medians of '
          f'{night} run(s) a night)')
    few = sum(len(set(s.sessions)) < FEW_SESSIONS for s in samples if s.values)
    if few:
        print(f'   note: {few} of {len(samples)} variable(s) come from fewer '
              f'than {FEW_SESSIONS} sessions: the drift between sessions is poorly '
              f'measured (bands wide, or without it from one session); run more '
              f'sessions on other days before the baseline')


def _write_merged(path: str, prefix: str, new: dict[str, dict[Key, RefTuple]], force: bool,
                  now: dt.datetime) -> None:
    """Merge `new` into the file as it is now, read and replaced under the prefix's
    lock (``atomic.locked``): another baseline (another var dir) may have written
    it meanwhile; where none can be had (a read-only folder), the write fails with
    its own error."""
    with atomic.locked(prefix, LOCK, lambda lock, err: ReferencesError(
            f'cannot lock {lock}: {err.strerror or err}')):
        comments = own_comments(path)
        kept = write_references(path, merge(read_references(path), new), force, now)
    print(f'   written: {path}' + (f' (previous version kept: {kept})' if kept else ''))
    if comments and kept:
        print(f'   note: {comments} comment line(s) of the file are not in the new '
              f'one (it is written from its entries): they are in {kept}')


def main(argv: list[str] | None = None) -> int:
    """``hybridverdict-baseline``: Ctrl-C, SIGTERM and SIGHUP end ``baseline`` with
    one line and 128 plus the signal's number (each file is written whole or not)."""
    return run_main(baseline, argv, *BASELINE_STOPPED)


def baseline(argv: list[str] | None) -> int:
    """The baseline, stopped by nothing (``main``)."""
    args = parser().parse_args(argv)
    night = args.night_samples
    if night is None:
        try:
            night = samples_per_run()
        except ValueError as err:
            return fail('hybridverdict-baseline', err)
    stats = ReadStats()
    try:
        records = read_perflogs(args.perflogs, since=args.since, stats=stats)
    except PerflogError as err:
        return fail('hybridverdict-baseline', err)
    except OSError as err:            # a perflog that cannot be read (permission, I/O)
        return fail('hybridverdict-baseline', f'cannot read '
                    f'{printable(str(err.filename or ", ".join(args.perflogs)))}: '
                    f'{err.strerror or err}')
    if args.until:
        records = [r for r in records if r.time < args.until]
    for warning in stats.warnings():
        print(f'hybridverdict-baseline: warning: {warning}', file=sys.stderr)
    busy = sum(r.busy for r in records)
    if busy:
        print(f'hybridverdict-baseline: left out {busy} run(s) made on a busy machine '
              f'(perflog field busy, see harnesscore.quiet)', file=sys.stderr)
    left_out: list[str] = []
    by_system = collect(records, left_out)
    for line in left_out:
        print(f'hybridverdict-baseline: note: not pooled: {line}', file=sys.stderr)
    systems = args.system or sorted(by_system)
    missing = [s for s in systems if s not in by_system]
    if missing or not systems:
        return fail('hybridverdict-baseline', f'no verified runs that passed, of system(s) '
                    f'{", ".join(missing) or "(any)"} in {", ".join(args.perflogs)}')
    now = dt.datetime.now(dt.timezone.utc)
    status = 0
    for system in systems:
        try:
            path = references.references_file(args.prefix, system)
            old = read_references(path)
            new = build_entries(by_system[system], args.floor, args.false_alarm, night)
            _print_samples(system, path, by_system[system], args.false_alarm, night)
            rows = diff_rows(old, new)
            print(tabulate(rows, headers=DIFF_COLUMNS))
            statuses = Counter(row[-1] for row in rows)
            print('   ' + ', '.join(f'{n} {status}' for status, n in sorted(statuses.items())))
            if args.dry_run:
                print('   dry run: nothing written')
                continue
            _write_merged(path, args.prefix, new, args.force, now)
        except BrokenPipeError:
            return _stdout_closed()
        except (ReferencesError, ValueError) as err:
            status = fail('hybridverdict-baseline', err)
        except OSError as err:
            status = fail('hybridverdict-baseline', f'cannot write {path}: '
                          f'{err.strerror or err} (nothing was changed)')
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    return status


if __name__ == '__main__':
    sys.exit(main())
