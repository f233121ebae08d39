"""The nightly acceptance mode of the harness (``reframe --mode nightly``;
docs/pages/nightly.md).

``config/settings.py`` adds :func:`modes` to its ``modes`` and :func:`storage`
to its ``storage`` section.  The nightly runs every check with references
required, a JUnit report per session, ``--warn-as-error`` (a check file that
fails to load fails the night) and ReFrame's results storage (:func:`options`).
ReFrame exits non-zero when any check fails; a fixed-band assertion that the
rule finds INCONCLUSIVE passes in ReFrame, so ``./harness nightly`` then
prints the judgements (:func:`judgement_summary`) and exits with
``EXIT_INCONCLUSIVE`` (3) when some were inconclusive and nothing failed.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time

from harnesscore.paths import reframe_path


def options(var_dir: str) -> list[str]:
    """The nightly's reframe options (the mode's, and what ``./harness
    nightly`` passes itself).  ReFrame expands ``$(...)`` in the paths of
    these options as in its configuration's: `var_dir` reaches it as
    ``reframe_path`` gives it (a link where it needs quoting)."""
    var_dir = reframe_path(var_dir)
    # A new JUnit file per session: named by the time the configuration loads.
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    junit = os.path.join(var_dir, 'reports', f'junit-{stamp}.xml')
    return [
        '-S', 'require_reference=true',
        f'--report-junit={junit}',
        f'--perflogdir={os.path.join(var_dir, "perflogs")}',
        '--failure-stats',
        # A check file that does not load is an error, not a warning
        # and a night that ran nothing.
        '--warn-as-error',
    ]


def modes(var_dir: str) -> list[dict]:
    """``--mode nightly``.  ReFrame 4.10 drops a ``-p`` given on the command
    line beside ``--mode`` (the mode's options are parsed first, and the
    command line's environment selection is lost), so ``./harness nightly``
    passes ``options`` itself instead of the mode: a selection then selects
    what it selects for ``./harness run``."""
    return [{'name': 'nightly', 'options': options(var_dir)}]


def storage(var_dir: str) -> list[dict]:
    """ReFrame's results database, on for every session (a mode can only set
    command-line options, and results storage has none)."""
    return [{'enable': True, 'sqlite_db_file': os.path.join(var_dir, 'results.db')}]


# ---- fixed-band judgements: inconclusive is not a pass --------------------------

#: exit status of a nightly whose checks all passed in ReFrame but some of whose
#: fixed-band assertions were inconclusive (harnesscore.bands): not a pass, not a
#: failure; ReFrame's own failures keep their status (1)
EXIT_INCONCLUSIVE = 3


def judgement_summary(perflogs: str, since: dt.datetime | None = None,
                      ) -> tuple[list[str], int]:
    """The lines that summarise the band judgements of the runs in `perflogs`
    (completed at or after `since`), and the exit status they call for: 0, or
    EXIT_INCONCLUSIVE when a run was inconclusive and none failed.

    A sampled variant is judged once, by its last sample (harnesslib.noise);
    its other samples are 'deferred'.  A variant whose samples were all
    deferred (its last sample failed or was not run) counts as inconclusive;
    a judgement in the soft zone ('warn') is listed and does not change the
    status."""
    from harnesscore.references import split_name
    from hybridverdict.perflog import ReadStats, read_perflogs

    stats = ReadStats()
    records = read_perflogs([perflogs], since, stats)
    states: dict[str, list] = {'pass': [], 'fail': [], 'inconclusive': [], 'warn': []}

    def variant(rec) -> tuple[str, ...]:
        return (*split_name(rec.name), rec.partition, rec.stack) if rec.name else ()

    judged = {variant(rec) for rec in records if rec.judgement and rec.judgement != 'deferred'}
    orphans: dict[tuple[str, ...], object] = {}
    for rec in records:
        if rec.judgement in states:
            states[rec.judgement].append(rec)
        elif rec.judgement == 'deferred' and variant(rec) not in judged:
            orphans[variant(rec)] = rec
    deferred = sum(rec.judgement == 'deferred' for rec in records)
    busy = [rec for rec in records if rec.busy]
    lines = [f'judgements: {len(records)} run(s); fixed bands: {len(states["pass"])} pass, '
             f'{len(states["warn"])} warn, {len(states["fail"])} fail, '
             f'{len(states["inconclusive"])} inconclusive ({deferred} sample(s) judged with '
             f'the last sample of their variant); '
             f'{len(busy)} run(s) on a busy machine (kept out of references)']
    for rec in states['inconclusive']:
        lines.append(f'  INCONCLUSIVE {rec.name} @{rec.partition}+{rec.stack}'
                     f'{" [busy]" if rec.busy else ""}: {rec.judgement_detail}')
    for rec in orphans.values():
        lines.append(f'  INCONCLUSIVE {rec.name} @{rec.partition}+{rec.stack}: deferred to '
                     f'the last sample of its variant, which judged nothing (it failed or '
                     f'did not run)')
    lines += [f'  {state.upper()} {rec.name} @{rec.partition}+{rec.stack}: '
              f'{rec.judgement_detail}' for state in ('warn', 'fail') for rec in states[state]]
    if stats.skipped:
        lines.append(f'  warning: {stats.skipped} perflog line(s) could not be read: '
                     f'{stats.reasons}')
    undecided = len(states['inconclusive']) + len(orphans)
    status = EXIT_INCONCLUSIVE if undecided and not states['fail'] else 0
    if status:
        lines.append(f'nightly INCONCLUSIVE: {undecided} fixed-band '
                     f'assertion(s) could not be decided (noisy or busy machine); rerun them '
                     f'on a quiet machine (exit status {EXIT_INCONCLUSIVE})')
    return lines, status


def main(argv: list[str] | None = None) -> int:
    """``python config/nightly.py judgements --perflogs DIR [--since ISO]`` and
    ``python config/nightly.py options --var-dir DIR``."""
    import argparse

    ap = argparse.ArgumentParser(prog='config/nightly.py')
    sub = ap.add_subparsers(dest='cmd', required=True)
    jp = sub.add_parser('judgements', help='summarise the fixed-band judgements')
    jp.add_argument('--perflogs', required=True)
    jp.add_argument('--since', default=None)
    op = sub.add_parser('options', help='print the nightly\'s reframe options, one a line')
    op.add_argument('--var-dir', required=True)
    args = ap.parse_args(argv)
    if args.cmd == 'options':
        try:
            print('\n'.join(options(args.var_dir)))
        except ValueError as err:
            print(f'config/nightly.py: error: {err}', file=sys.stderr)
            return 2
        return 0
    if not os.path.isdir(args.perflogs):
        print(f'config/nightly.py: no perflog directory {args.perflogs}', file=sys.stderr)
        return 2
    since = None
    if args.since:
        from hybridverdict.records import iso_time
        try:
            since = iso_time(args.since)
        except argparse.ArgumentTypeError as err:
            print(f'config/nightly.py: error: --since: {err}', file=sys.stderr)
            return 2
    lines, status = judgement_summary(args.perflogs, since)
    print('\n'.join(lines))
    return status


if __name__ == '__main__':
    sys.exit(main())
