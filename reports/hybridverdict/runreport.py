"""Read ReFrame JSON run reports (``run-report-<id>.json``, ReFrame 4.x format)
into the same records as the perflogs.

A report holds ``runs`` (the first run and its retries), each with
``testcases``: the test's loggable variables (``kernel``, ``mode``, ``ranks``,
...; at the top level, or under ``check_vars`` in other versions), its
``system``, ``partition``, ``environ``, ``result``,
``job_completion_time_unix`` and ``perfvalues``: ``"<system>:<partition>:<var>"``
-> ``[value, ref, lower, upper, unit, result]``.  As ReFrame's own summary does,
a failed test case counts only from the last run (``result`` is ``pass`` or
``fail`` in ReFrame 4.10, ``success``/``failure`` in older reports) (earlier attempts were retried).
Fixtures and test cases without a kernel (builds) are left out; a file that is
not a run report is skipped with a count, never fatal.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable

from .perflog import (
    PROVENANCE_FIELDS,
    ReadStats,
    Record,
    Ref,
    parse_time,
    printable,
    unusable,
)

#: The provenance fields read as text from a test case's variables (the others,
#: ``mpi_library`` and ``build_spec``, are read with the record's own fields).
_PROVENANCE_TEXT = (*(f for f in PROVENANCE_FIELDS if f not in ('mpi_library', 'build_spec')),
                    'session')

_PASSED = ('pass', 'success')


class RunReportError(Exception):
    """A run report path that cannot be read at all."""


def report_files(paths: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
        elif os.path.isdir(path):
            found += [os.path.join(path, f) for f in os.listdir(path)
                      if f.startswith('run-report') and f.endswith('.json')]
        else:
            raise RunReportError(f'no such run report file or directory: {path}')
    return sorted(found)


def _bool(x: object) -> bool:
    return str(x).strip().lower() in ('true', '1', 'yes')


def _int(x: object) -> int:
    try:
        return int(x)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def _float(x: object) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _time(tc: dict) -> dt.datetime:
    unix = tc.get('job_completion_time_unix')
    if isinstance(unix, (int, float)):
        return dt.datetime.fromtimestamp(int(unix), dt.timezone.utc)
    text = tc.get('job_completion_time')
    if not text:
        raise ValueError('no job completion time')
    return parse_time(str(text))


def _record(tc: dict, source: str) -> Record | None:
    """The record of one test case; None for builds and fixtures; ValueError if broken."""
    if tc.get('fixture'):
        return None
    var = {**tc, **(tc.get('check_vars') or {})}
    kernel = var.get('kernel')
    if kernel in (None, '', 'null', 'None', '<undefined>'):
        return None
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    refs: dict[str, Ref] = {}
    for key, entry in (tc.get('perfvalues') or {}).items():
        name = key.rsplit(':', 1)[-1]
        if not isinstance(entry, (list, tuple)) or len(entry) < 5:
            continue
        value = _float(entry[0])
        if value is None:
            continue      # a test that failed before its performance stage
        values[name] = value
        units[name] = str(entry[4] or '')
        ref = _float(entry[1])
        if ref:
            refs[name] = (ref, _float(entry[2]), _float(entry[3]))
    missing = [k for k in ('system', 'partition', 'environ', 'mode', 'ranks', 'threads', 'size')
               if var.get(k) in (None, '', '<undefined>')]
    if missing:
        raise ValueError(f'missing {",".join(missing)}')
    result = str(tc.get('result', ''))
    return Record(
        time=_time(tc), system=str(var['system']), partition=str(var['partition']),
        stack=str(var['environ']), kernel=str(kernel), mode=str(var['mode']),
        ranks=_int(var['ranks']), threads=_int(var['threads']), size=str(var['size']),
        cores=_int(var.get('cores')), nodes=_int(var.get('nodes')) or 1,
        mpi_library=str(var.get('mpi_library') or ''), verified=_bool(var.get('verified')),
        oversubscribed=_bool(var.get('oversubscribed')),
        result={'success': 'pass', 'failure': 'fail'}.get(result, result),
        values=values, units=units, source=source, name=str(var.get('name') or ''),
        build_spec=str(var.get('build_spec') or ''),
        finalize_hung=_bool(var.get('finalize_hung')), refs=refs,
        **{f: str(var.get(f) or '') for f in _PROVENANCE_TEXT})


def read_run_report(path: str, stats: ReadStats) -> list[Record]:
    stats.files += 1
    try:
        with open(path, encoding='utf-8') as fp:
            # untrusted text: control characters (terminal escapes) shown escaped
            data = json.load(fp, object_hook=lambda d: {
                k: printable(v) if isinstance(v, str) else v for k, v in d.items()})
        runs = data['runs']
        if not isinstance(runs, list):
            raise TypeError('runs is not a list')
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        stats.skip(f'run report unreadable ({os.path.basename(path)}: '
                   f'{type(err).__name__})')
        return []
    out: list[Record] = []
    for runidx, run in enumerate(runs):
        last = runidx == len(runs) - 1
        for i, tc in enumerate(run.get('testcases', []) if isinstance(run, dict) else []):
            if not isinstance(tc, dict):
                stats.skip('run report test case is not an object')
                continue
            if tc.get('result') not in _PASSED and not last:
                continue      # retried: only its last attempt counts
            try:
                rec = _record(tc, f'{path}:runs[{runidx}].testcases[{i}]')
            except (ValueError, TypeError, OverflowError) as err:
                stats.skip(f'run report test case unparsable ({err})')
                continue
            if rec is not None and rec.values:
                why = unusable(rec)
                if why:
                    stats.skip(f'unusable record ({why})', where=rec.source)
                    continue
                stats.records += 1
                out.append(rec)
    return out


def read_run_reports(paths: Iterable[str], stats: ReadStats) -> list[Record]:
    out: list[Record] = []
    for path in report_files(paths):
        out += read_run_report(path, stats)
    return out


def _key(r: Record) -> tuple:
    return (r.system, r.partition, r.stack, r.kernel, r.mode, r.ranks, r.threads, r.size,
            int(r.time.timestamp()))


def merge(first: list[Record], second: list[Record]) -> list[Record]:
    """`first` plus the records of `second` that are not in it (same run and second)."""
    seen = {_key(r) for r in first}
    return first + [r for r in second if _key(r) not in seen]
