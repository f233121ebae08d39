"""hybridverdict.session_check, in process: a session that ran nothing, or whose
performance records did not all reach the perflogs, fails (./harness's
check_session runs it: tests/test_harness_script.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harnesscore.schema import header_fields
from hybridverdict import session_check

SINCE = '2026-11-26T12:00:00+00:00'


def _marker(tmp_path: Path) -> str:
    """The session's marker, an hour ago: every file written now is since it."""
    marker = tmp_path / 'marker'
    marker.touch()
    old = marker.stat().st_mtime - 3600
    os.utime(marker, (old, old))
    return str(marker)


def _report(path: Path, names: list[str], num_cases: int | None = None,
            num_skipped: int = 0) -> str:
    """A run report of test cases `names`, each with a performance value."""
    cases = [{'system': 'sys', 'partition': 'p', 'environ': 'e', 'display_name': name,
              'perfvalues': {'sys:p:t': [1.0, 0, None, None, 's', 'pass']}} for name in names]
    info = {'num_cases': len(names) if num_cases is None else num_cases,
            'num_skipped': num_skipped}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({'session_info': info, 'runs': [{'testcases': cases}]}))
    return str(path)


def _perflog(path: Path, rows: list[tuple[str, str, str]]) -> str:
    """A perflog of records (test case name, session, completion time)."""
    fields = header_fields()
    lines = ['|'.join(fields) + '|t_value|t_unit|t_ref|t_lower_thres|t_upper_thres|']
    for name, session, done in rows:
        row = dict.fromkeys(fields, 'null')
        row.update(job_completion_time=done, system='sys', partition='p', environ='e',
                   name=name, kernel='spmv', session=session)
        lines.append('|'.join(row[f] for f in fields) + '|1.0|s|0|None|None|')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('\n'.join(lines) + '\n')
    return str(path.parent.parent.parent)


LOG = Path('perflogs', 'sys', 'p', 'Spmv.log')


def _session(tmp_path: Path, names: list[str],
             rows: list[tuple[str, str, str]]) -> tuple[str, str, str]:
    """A session's marker, its run report of `names` and its perflogs of `rows`
    (in LOG): session_check.check's first three arguments."""
    return (_marker(tmp_path), _report(tmp_path / 'report.json', names),
            _perflog(tmp_path / LOG, rows))


def test_a_session_that_ran_no_test_case_fails(tmp_path: Path) -> None:
    marker = _marker(tmp_path)
    for selected, skipped in ((0, 0), (2, 2)):
        report = _report(tmp_path / 'report.json', [], selected, skipped)
        why = session_check.check(marker, report, str(tmp_path / 'perflogs'), 'S1', SINCE)
        assert why.startswith('harness: error: the session ran no test case '
                              f'({selected} selected, {skipped} skipped)'), why


def test_the_highest_numbered_report_is_the_sessions_not_the_newest(tmp_path: Path) -> None:
    marker = _marker(tmp_path)
    _report(tmp_path / 'run-report-12.json', [])
    _report(tmp_path / 'run-report-3.json', [])
    found = session_check.run_report(marker, str(tmp_path / 'run-report-{sessionid}.json'))
    assert found == str(tmp_path / 'run-report-12.json')


def test_a_record_without_a_session_before_the_session_began_is_not_its_own(
        tmp_path: Path) -> None:
    why = session_check.check(*_session(tmp_path, ['Spmv'],
                                        [('Spmv', 'null', '2026-11-26T11:59:59+0000')]),
                              'S1', SINCE)
    assert 'only 0 of 1 performance records' in why, why


def test_without_harness_session_each_record_since_the_start_counts(tmp_path: Path) -> None:
    # HARNESS_SESSION blank: each ReFrame records a session of its own
    rows = [('Spmv', '2026-11-26T12:00:00 pid 42', '2026-11-26T12:00:01+0000')]
    assert session_check.check(*_session(tmp_path, ['Spmv'], rows), ' ', SINCE) == ''


def test_two_records_of_one_case_do_not_stand_for_a_lost_one(tmp_path: Path) -> None:
    why = session_check.check(*_session(tmp_path, ['Spmv', 'Lost'],
                                        [('Spmv', 'S1', '2026-11-26T12:00:01+0000')] * 2),
                              'S1', SINCE)
    assert 'only 1 of 2 performance records' in why and 'missing: Lost @sys:p+e' in why, why


def test_a_perflog_untouched_since_the_marker_holds_no_record_of_the_session(
        tmp_path: Path) -> None:
    # an earlier session of the same HARNESS_SESSION left it
    marker, report, logs = _session(tmp_path, ['Spmv'],
                                    [('Spmv', 'S1', '2026-11-26T12:00:01+0000')])
    old = os.path.getmtime(marker) - 60
    os.utime(tmp_path / LOG, (old, old))
    why = session_check.check(marker, report, logs, 'S1', SINCE)
    assert 'only 0 of 1 performance records' in why, why


def test_a_repeated_test_is_found_by_its_name_not_its_display_name(tmp_path: Path) -> None:
    """ReFrame's --repeat 2 (4.10): the run report's display names hold
    ' %.repeat_no=N', its names and the perflog's do not (``name`` omits it)."""
    marker = _marker(tmp_path)
    done = '2026-11-26T13:00:00+00:00'
    perflogs = _perflog(tmp_path / LOG, [('Spmv %mode=mpi', 'S1', done)] * 2)
    cases = [{'system': 'sys', 'partition': 'p', 'environ': 'e', 'name': 'Spmv %mode=mpi',
              'display_name': f'Spmv %mode=mpi %.repeat_no={i}',
              'perfvalues': {'sys:p:t': [1.0, 0, None, None, 's', 'pass']}} for i in range(2)]
    report = tmp_path / 'report.json'
    report.write_text(json.dumps({'session_info': {'num_cases': 2, 'num_skipped': 0},
                                  'runs': [{'testcases': cases}]}))
    assert session_check.check(marker, str(report), perflogs, 'S1', SINCE) == ''
    # one of the two repeats' records lost is still found missing
    _perflog(tmp_path / LOG, [('Spmv %mode=mpi', 'S1', done)])
    why = session_check.check(marker, str(report), perflogs, 'S1', SINCE)
    assert why.startswith('harness: error: only 1 of 2 performance records'), why


def test_a_perflog_that_cannot_be_read_fails_naming_it_not_reframe(tmp_path, monkeypatch):
    """A perflog the check cannot read (its mode 000 for a user other than root,
    EIO): its records were skipped unseen and the session failed blaming
    ReFrame ("ReFrame could not write them").  It still fails, naming the
    perflog and why.  (Root reads a file of mode 000: run_fields fails as open()
    does for another user.)"""
    args = _session(tmp_path, ['SpmvCheck'], [('SpmvCheck', 's1', '2026-11-26T12:30:00+0000')])
    assert session_check.check(*args, 's1', SINCE) == ''

    def denied(path):
        raise PermissionError(13, 'Permission denied', path)

    monkeypatch.setattr(session_check, 'run_fields', denied)
    why = session_check.check(*args, 's1', SINCE)
    assert why.startswith('harness: error: only 0 of 1 performance records'), why
    assert f'cannot read the perflog(s) {tmp_path / LOG} (Permission denied)' in why, why
    assert 'ReFrame' not in why, why
