"""Whether a ReFrame session of ``./harness`` ran and kept its records: the
check after its ReFrame run (``./harness``'s check_session)::

    python -m hybridverdict.session_check MARKER REPORT PERFLOGS SESSION SINCE

The session that started after the file MARKER was made wrote its run report
REPORT (the file it was told to write, its variables expanded and the path
normalised as ReFrame does; a report of another reframe in the same var dir is
not this session's, nor one written before MARKER; a '{sessionid}' in a
--report-file the user gave stands for any number, a ``$(cmd)`` or backquoted
command for any part of one name, not run again: the newest such file), ran at
least one test case (a session that ran nothing must not pass), and every test case of it with
performance values has its record in the perflogs under PERFLOGS (a full disk
loses them with no more than a logging error from ReFrame).  A record is this
session's where its session is SESSION (HARNESS_SESSION, as the checks write
it: ``session_field``), or, where it has none (an older perflog, a check
without the harness's fields), where it completed since SINCE (the session's
start, ISO time).  The perflogs are read by ``perflog.run_fields``: every line
of a test, a kernel's or not, usable or not, since the question is whether a
record was written, not whether a report may use it.  Exit status 0, else 1
with one line that says why; 130, quietly, on Ctrl-C.
"""

from __future__ import annotations

import collections
import datetime as dt
import glob
import json
import os
import re
import sys

from harnesscore.schema import field_text
from harnesscore.stopping import run_main

from .perflog import PerflogError, parse_time, perflog_files, printable, run_fields

#: The perflog fields that name a test case as its run report does: system,
#: partition, environment and display name.
KEY = ('system', 'partition', 'environ', 'name')


#: A ``$(cmd)`` (one level of nested parentheses) or backquoted command of a
#: --report-file: never run again here, each one stands for any file name part.
COMMAND = re.compile(r'`[^`]*`|\$\((?:[^()]|\([^()]*\))*\)')

#: What a command of the pattern is while the path is normalised (no path holds it).
_OUTPUT = '\0'


def report_path(pattern: str) -> str:
    """The --report-file `pattern` as ReFrame 4.10 opens it (cli.py:
    ``os.path.normpath(osext.expandvars(...))``), each command left as ``_OUTPUT``:
    not run, since it would run again, to another output, and may do anything."""
    texts = COMMAND.split(pattern)
    return os.path.normpath(_OUTPUT.join(os.path.expandvars(t) for t in texts))


def _written(path: str, since: float) -> list[tuple[float, int, str]]:
    """The files written after `since` whose path `path` (``report_path``)
    matches, each as (when it was written, its first '{sessionid}' number or -1,
    its path): each command's output any text within one name (no '/'), each
    '{sessionid}' a number."""
    parts = re.split('(' + re.escape(_OUTPUT) + '|' + re.escape('{sessionid}') + ')', path)
    wild = ''.join('*' if p in (_OUTPUT, '{sessionid}') else glob.escape(p) for p in parts)
    exact = re.compile(''.join('[^/]*' if p == _OUTPUT else r'(\d+)' if p == '{sessionid}'
                               else re.escape(p) for p in parts))
    found = []
    for name in glob.glob(wild):
        try:
            if (m := exact.fullmatch(name)) and os.path.isfile(name) \
                    and (when := os.path.getmtime(name)) > since:
                found.append((when, int(m.group(1)) if m.groups() else -1, name))
        except OSError:
            continue
    return found


def run_report(marker: str, pattern: str) -> str:
    """The run report the session wrote ('' if none): `pattern` (``report_path``),
    or where it holds '{sessionid}', the highest numbered of its files (ReFrame's
    next number, in the folder named), or where it holds a command, the newest of
    its files; written after `marker` (a file of that name left by an earlier
    session is not this session's)."""
    pattern = report_path(pattern)
    since = os.path.getmtime(marker)
    if _OUTPUT in pattern or '{sessionid}' not in pattern:
        ranked = [(when, name) for when, _, name in _written(pattern, since)]
    else:
        folder = os.path.dirname(pattern) or '.'
        ranked = [(number, name) for _, number, name in
                  _written(os.path.join(folder, os.path.basename(pattern)), since)]
    return max(ranked, default=(0, ''))[1]


def session_field(session: str) -> str:
    """HARNESS_SESSION as the perflogs hold it and ``run_fields`` reads it: as
    the checks write it (``harnesslib.base.session_id``: stripped, then
    ``field_text``: '|' as '/', one line, cut to its limit), its control
    characters escaped (``printable``).  '' where it is blank: each ReFrame
    then records a session of its own."""
    return printable(field_text(session.strip()))


def _start(text: str) -> dt.datetime | None:
    """The time `text` (``parse_time``), None if it is none ('null', '')."""
    try:
        return parse_time(text)
    except ValueError:
        return None


def reached(perflogs: str, marker: str, session: str, since: str
            ) -> tuple[collections.Counter, list[str]]:
    """The session's records in the perflogs under `perflogs` written since
    `marker`, counted by test case (``KEY``): those of `session`, and those
    without a session that completed since `since` (all that completed since
    `since` where `session` is blank: ``session_field``); and the perflogs
    that could not be read, each with why (their records are not counted)."""
    own = session_field(session)
    begun = _start(since)
    got: collections.Counter = collections.Counter()
    unreadable: list[str] = []
    try:
        files = perflog_files([perflogs])
    except PerflogError:
        return got, unreadable                       # no perflogs folder
    try:
        made = os.path.getmtime(marker)
    except OSError:
        return got, unreadable                       # no marker: no file is since it
    for path in files:
        try:
            if os.path.getmtime(path) < made:
                continue
            rows = list(run_fields(path))
        except FileNotFoundError:
            continue                                 # removed meanwhile
        except OSError as err:
            unreadable.append(f'{printable(path)} ({printable(err.strerror or str(err))})')
            continue
        for row in rows:
            if not all(k in row for k in KEY):
                continue
            mine = row.get('session', '')
            if mine in ('', 'null', 'None') or not own:
                done = _start(row['job_completion_time'])
                if not (done and begun and done >= begun):
                    continue
            elif mine != own:
                continue
            got[tuple(row[k] for k in KEY)] += 1
    return got, unreadable


def _case(tc: dict) -> tuple:
    """A test case of the run report by ``KEY``, its texts as the perflog's
    reader shows them (``printable``: untrusted text).  The perflog's ``name`` is
    the test's ``name``: its ``display_name`` without the parameters that
    ReFrame's --repeat and --distribute add (``%.repeat_no=1``), which the
    run report holds as ``name`` (a report without one: its ``display_name``)."""
    name = tc.get('name') or tc['display_name']
    return tuple(printable(v) if isinstance(v, str) else v
                 for v in (tc['system'], tc['partition'], tc['environ'], name))


def check(marker: str, pattern: str, perflogs: str, session: str, since: str) -> str:
    """Why the session fails the check ('' if it passes)."""
    report = run_report(marker, pattern)
    if not report:
        return ('harness: warning: ReFrame wrote no run report: the session ran nothing '
                '(see above)')
    try:
        with open(report, encoding='utf-8') as fh:
            data = json.load(fh)
        info = data['session_info']
        ran = int(info['num_cases']) - int(info.get('num_skipped') or 0)
        cases = [tc for run in data.get('runs') or [] for tc in run.get('testcases') or []]
        want: collections.Counter = collections.Counter(
            _case(tc) for tc in cases if tc.get('perfvalues'))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return f'harness: error: cannot read the run report {report!r}: {err}'
    if ran < 1:
        return (f'harness: error: the session ran no test case ({info["num_cases"]} '
                f'selected, {info.get("num_skipped") or 0} skipped): check '
                f'HARNESS_STACKS and HARNESS_REFRAME_OPTS')
    if not want:
        return ''
    got, unreadable = reached(perflogs, marker, session, since)
    found = sum(min(n, got[key]) for key, n in want.items())
    if found == sum(want.values()):
        return ''
    lost = sorted(key for key, n in want.items() if got[key] < n)
    names = '; '.join(f'{k[3]} @{k[0]}:{k[1]}+{k[2]}' for k in lost[:3])
    more = f' and {len(lost) - 3} more' if len(lost) > 3 else ''
    head = (f'harness: error: only {found} of {sum(want.values())} performance records '
            f'of this session reached the perflogs in {perflogs} (missing: {names}{more})')
    if unreadable:
        # the records may be there: it is the perflog that cannot be read, not ReFrame
        return (f'{head}: cannot read the perflog(s) {"; ".join(unreadable[:3])}'
                + (f' and {len(unreadable) - 3} more' if len(unreadable) > 3 else ''))
    return (f'{head}: ReFrame could not write them (a full disk, or a perflog it may not '
            f'write: see its "Logging error" above)')


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 5:
        sys.exit('usage: python -m hybridverdict.session_check MARKER REPORT PERFLOGS '
                 'SESSION SINCE')
    # Ctrl-C: 130, quietly (./harness says that it stopped)
    return run_main(_checked, args, None, signals=())


def _checked(args: list[str]) -> int:
    why = check(*args)
    if why:
        sys.exit(why)
    return 0


if __name__ == '__main__':
    sys.exit(main())
