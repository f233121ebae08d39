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

from . import records
from .records import ReadStats, Record, Ref

#: ReFrame's results (older names: ``success``, ``failure``) as the perflog's.
_RESULT = {'success': 'pass', 'failure': 'fail'}


class RunReportError(Exception):
    """A run report path that cannot be read at all."""


def report_files(paths: Iterable[str], stats: ReadStats | None = None) -> list[str]:
    """The run reports given or in the directories given, sorted, each once."""
    return records.input_files(paths, lambda f: f.startswith('run-report')
                               and f.endswith('.json'), False, 'run report', RunReportError,
                               stats)


def _time(tc: dict) -> str:
    """The job's completion time, as a perflog writes it ('' if none)."""
    unix = tc.get('job_completion_time_unix')
    if isinstance(unix, (int, float)):
        return dt.datetime.fromtimestamp(int(unix), dt.timezone.utc).isoformat()
    return str(tc.get('job_completion_time') or '')


def _variables(tc: dict) -> tuple[dict[str, float], dict[str, str], dict[str, Ref]]:
    """The test case's performance variables: values, units, references."""
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    refs: dict[str, Ref] = {}
    for key, entry in (tc.get('perfvalues') or {}).items():
        name = key.rsplit(':', 1)[-1]
        if not isinstance(entry, (list, tuple)) or len(entry) < 5:
            continue
        value = records.number(entry[0])
        if value is None:
            continue      # a test that failed before its performance stage
        values[name] = value
        units[name] = str(entry[4] or '')
        ref = records.reference(*entry[1:4])
        if ref:
            refs[name] = ref
    return values, units, refs


def _record(tc: dict, source: str) -> Record | None:
    """The record of one test case; None for builds and fixtures; ValueError if broken."""
    var = {**tc, **(tc.get('check_vars') or {})}
    if tc.get('fixture') or var.get('kernel') is None or var['kernel'] in records.NO_KERNEL:
        return None
    result = str(tc.get('result', ''))
    var.update(job_completion_time=_time(tc), result=_RESULT.get(result, result))
    texts = ['' if var.get(f) is None else str(var[f]) for f in records.FIELDS]
    return records.from_fields(texts, *_variables(tc), source)


def _malformed(tc: object) -> str:
    """Why a test case cannot be read ('' if it can): a part of another JSON type."""
    if not isinstance(tc, dict):
        return 'run report test case is not an object'
    for key in ('perfvalues', 'check_vars'):
        if not isinstance(tc.get(key) or {}, dict):
            return f'run report test case {key} is not an object'
    return ''


def _printable(value: object) -> object:
    """`value` (JSON) with control characters in its texts shown escaped."""
    if isinstance(value, str):
        return records.printable(value)
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def read_run_report(path: str, stats: ReadStats) -> list[Record]:
    stats.files += 1
    try:
        with open(path, encoding='utf-8') as fp:
            # untrusted text: control characters (terminal escapes) shown escaped,
            # in keys (variable names) and lists (units) too
            data = json.load(fp, object_hook=lambda d: {
                records.printable(k): _printable(v) for k, v in d.items()})
        runs = data['runs']
        if not isinstance(runs, list):
            raise TypeError('runs is not a list')
    except (ValueError, RecursionError, KeyError, TypeError) as err:
        # ValueError: not JSON, not UTF-8 (both ValueErrors), or an integer of more
        # digits than Python converts; RecursionError: arrays or objects nested
        # deeper than the decoder goes
        stats.skip(f'run report unreadable ({os.path.basename(path)}: '
                   f'{type(err).__name__})')
        return []
    out: list[Record] = []
    for runidx, run in enumerate(runs):
        last = runidx == len(runs) - 1
        cases = (run.get('testcases') or []) if isinstance(run, dict) else None
        if not isinstance(cases, list):
            stats.skip('run report run is not an object' if cases is None
                       else 'run report testcases is not a list', where=f'{path}:runs[{runidx}]')
            continue
        for i, tc in enumerate(cases):
            where = f'{path}:runs[{runidx}].testcases[{i}]'
            why = _malformed(tc)
            if why:
                stats.skip(why, where=where)
                continue
            if tc.get('result') not in ('pass', 'success') and not last:
                continue      # retried: only its last attempt counts
            try:
                rec = _record(tc, where)
            except records.UNPARSABLE as err:
                stats.unparsable(err, where)
                continue
            if rec is not None and rec.values and stats.keep(rec):
                out.append(rec)
    return out


def read_run_reports(paths: Iterable[str], stats: ReadStats) -> list[Record]:
    return [rec for path in report_files(paths, stats) for rec in read_run_report(path, stats)]


def _key(r: Record) -> tuple:
    """What a perflog record and a run-report record of the same run share exactly:
    where it ran, the kernel, its layout, size, node count and build, and the second
    it completed (a perflog's time has whole seconds, a report's is cut to them)."""
    return (r.system, r.partition, r.stack, r.kernel, r.mode, r.ranks, r.threads, r.size,
            r.nodes, r.build_spec, int(r.time.timestamp()))


def merge(first: list[Record], second: list[Record]) -> list[Record]:
    """`first` plus the records of `second` that are not in it (same run: ``_key``);
    a run of another node count or build in the same second is another run."""
    seen = {_key(r) for r in first}
    return first + [r for r in second if _key(r) not in seen]
