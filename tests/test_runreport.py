"""ReFrame JSON run reports as input, alone and beside the perflogs."""

from __future__ import annotations

import json

import pytest
from hybridverdict.perflog import ReadStats, read_perflogs
from hybridverdict.runreport import RunReportError, merge, read_run_reports
from perflog_writer import T0, header, line, write

UNIX = T0.timestamp()


def case(mode='mpi', ranks=2, threads=1, t=1.0, result='pass', when=UNIX, **extra) -> dict:
    """A test case as ReFrame 4.10 writes it (the fields the reader uses, and some others)."""
    tc = {
        'build_jobid': None, 'environ': 'mpich', 'fail_phase': None, 'fail_reason': None,
        'filename': 'checks/kernels.py', 'fixture': False,
        'job_completion_time': '2026-11-22T10:00:00+00:00',
        'job_completion_time_unix': when + 0.75, 'partition': 'shm', 'result': result,
        'run_index': 0, 'scheduler': 'local', 'system': 'local',
        'build_spec': 'cmake Release mpich cc=/usr/bin/mpicc.mpich', 'cores': 2,
        'display_name': f'SpmvCheck %layout={mode}_{ranks}x{threads} %problem=16',
        'finalize_hung': 'false', 'kernel': 'spmv', 'mode': mode,
        'mpi_library': 'MPICH Version: 4.0.2', 'name': f'SpmvCheck %layout={mode}',
        'nodes': 1, 'oversubscribed': 'false', 'ranks': ranks, 'size': '16',
        'threads': threads, 'unique_name': 'SpmvCheck_00', 'verified': 'true',
        'perfvalues': {'local:shm:fom': [2.5, 2.0, -0.1, None, 'GFLOP/s', 'pass'],
                       'local:shm:t_total': [t, 0, None, None, 's', 'pass']},
    }
    tc.update(extra)
    return tc


def report(path, *runs) -> str:
    path.write_text(json.dumps({'session_info': {'version': '4.10.4'},
                                'runs': [{'run_index': i, 'testcases': list(tcs)}
                                         for i, tcs in enumerate(runs)],
                                'restored_cases': []}))
    return str(path)


def test_reads_test_cases_like_perflog_records(tmp_path):
    build = case(kernel=None, fixture=True, perfvalues={})
    report(tmp_path / 'run-report-0.json', [build, case(t=2.0),
                                             case('masteronly', 1, 2, t=1.0, when=UNIX + 20)])
    stats = ReadStats()
    recs = read_run_reports([str(tmp_path)], stats)
    assert [(r.mode, r.values['t_total']) for r in recs] == [('mpi', 2.0), ('masteronly', 1.0)]
    r = recs[0]
    assert (r.system, r.partition, r.stack, r.kernel, r.size, r.ranks) == (
        'local', 'shm', 'mpich', 'spmv', '16', 2)
    assert r.usable and r.time == T0
    assert r.refs == {'fom': (2.0, -0.1, None)} and r.units['fom'] == 'GFLOP/s'
    assert r.build_spec.startswith('cmake Release mpich')
    assert stats.records == 2 and stats.skipped == 0


def test_retried_failures_count_from_the_last_run_only(tmp_path):
    report(tmp_path / 'r.json', [case(t=1.0), case('masteronly', 1, 2, result='fail')],
           [case('masteronly', 1, 2, t=0.5, when=UNIX + 60)])
    recs = read_run_reports([str(tmp_path / 'r.json')], ReadStats())
    assert sorted((r.mode, r.result, r.values['t_total']) for r in recs) == [
        ('masteronly', 'pass', 0.5), ('mpi', 'pass', 1.0)]


def test_older_result_names_and_missing_values(tmp_path):
    tc = case(result='success')
    failed = case(result='failure', perfvalues={'local:shm:t_total': [None, 0, None, None,
                                                                      's', 'fail']})
    report(tmp_path / 'r.json', [tc, failed])
    recs = read_run_reports([str(tmp_path / 'r.json')], ReadStats())
    assert [r.result for r in recs] == ['pass']


def test_broken_report_and_test_case_are_skipped_and_counted(tmp_path):
    (tmp_path / 'run-report-1.json').write_text('{"runs": [')      # truncated
    report(tmp_path / 'run-report-2.json', [case(mode=None), case()])
    stats = ReadStats()
    recs = read_run_reports([str(tmp_path)], stats)
    assert len(recs) == 1 and stats.skipped == 2
    assert any('run report unreadable' in w for w in stats.warnings())
    assert any('missing mode' in why for why in stats.reasons)
    # the warning names the test case, as a perflog's names its file and line
    assert stats.first_at['unparsable (missing mode)'] == (
        f'{tmp_path / "run-report-2.json"}:runs[0].testcases[0]')


@pytest.mark.parametrize('text, error', [
    (b'{"runs": [', 'JSONDecodeError'),                              # truncated
    (b'{"runs": ["\xff"]}', 'UnicodeDecodeError'),
    (b'{"session_info": {}}', 'KeyError'),
    (b'{"runs": 5}', 'TypeError'),
    (b'[1, 2]', 'TypeError'),
    # nested deeper than the decoder goes, and an integer of more digits than
    # Python converts (4300): a RecursionError and a ValueError traceback, exit 1
    (b'{"runs": ' + b'[' * 100_000 + b']' * 100_000 + b'}', 'RecursionError'),
    (b'{"runs": [{"testcases": [{"kernel": "spmv", "job_completion_time_unix": '
     + b'9' * 5000 + b'}]}]}', 'ValueError'),
])
def test_a_file_that_is_no_run_report_is_skipped_and_counted(tmp_path, text, error):
    (tmp_path / 'run-report-1.json').write_bytes(text)
    report(tmp_path / 'run-report-2.json', [case()])
    stats = ReadStats()
    assert len(read_run_reports([str(tmp_path)], stats)) == 1
    assert stats.reasons == {f'run report unreadable (run-report-1.json: {error})': 1}


def test_a_count_that_is_not_one_skips_the_test_case_as_in_a_perflog(tmp_path):
    # a count beyond a 64-bit integer too (the frames' type)
    report(tmp_path / 'r.json', [case(ranks='two'), case(t=0.0), case(), case(ranks=10**20)])
    stats = ReadStats()
    recs = read_run_reports([str(tmp_path / 'r.json')], stats)
    assert len(recs) == 1 and stats.reasons == {
        'unparsable value': 2, 'unusable record (t_total is not positive)': 1}


def test_a_test_case_gives_the_record_its_perflog_line_gives(tmp_path):
    """One record builder for both sources: every field of the record, the
    machine's quietness, the band rule's judgement and the provenance included."""
    run = {'busy': 'true', 'judgement': 'fail', 'judgement_detail': 't_total: fail',
           'mpi_env': 'OMPI_MCA_btl=self,vader', 'src_version': 'abc123',
           'compiler': 'gcc 12.2.0', 'node_names': 'n1,n2', 'session': 's-1'}
    write(tmp_path / 'Spmv.log', [header(['fom', 't_total']), line(
        'spmv', {'fom': (2.5, 'GFLOP/s', 2.0, -0.1, None), 't_total': (2.0, 's')},
        size='16', name='SpmvCheck %layout=mpi', after_result=run)])
    report(tmp_path / 'run-report-0.json', [case(t=2.0, build_spec='cmake Release mpich', **run)])
    (from_log,) = read_perflogs([str(tmp_path / 'Spmv.log')])
    (from_report,) = read_run_reports([str(tmp_path)], ReadStats())
    assert from_report.busy and from_report.judgement == 'fail'
    fields = [f for f in vars(from_log) if f != 'source']
    assert {f: getattr(from_report, f) for f in fields} == {
        f: getattr(from_log, f) for f in fields}


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(RunReportError, match='no such run report'):
        read_run_reports([str(tmp_path / 'nope.json')], ReadStats())


def test_a_run_in_both_perflog_and_report_counts_once(tmp_path):
    write(tmp_path / 'Spmv.log', [header(['fom', 't_total']),
                                  line('spmv', {'fom': (2.5, 'GFLOP/s'), 't_total': (2.0, 's')},
                                       size='16')])
    # the perflog's build (perflog_writer's); a run logs the same build_spec in both
    report(tmp_path / 'run-report-0.json', [case(t=2.0, build_spec='cmake Release mpich'),
                                            case('masteronly', 1, 2, when=UNIX + 20)])
    both = merge(read_perflogs([str(tmp_path / 'Spmv.log')]),
                 read_run_reports([str(tmp_path)], ReadStats()))
    assert sorted(r.mode for r in both) == ['masteronly', 'mpi']


@pytest.mark.parametrize('runs, reason', [
    ([{'testcases': 5}], 'run report testcases is not a list'),
    (['not a run'], 'run report run is not an object'),
    ([{'testcases': [{'kernel': 'spmv', 'perfvalues': [1, 2]}]}],
     'run report test case perfvalues is not an object'),
    ([{'testcases': [{'kernel': 'spmv', 'check_vars': 5}]}],
     'run report test case check_vars is not an object'),
])
def test_malformed_runs_and_test_cases_are_skipped_and_counted(tmp_path, runs, reason):
    path = tmp_path / 'run-report-1.json'
    path.write_text(json.dumps({'runs': runs}))
    report(tmp_path / 'run-report-2.json', [case()])
    stats = ReadStats()
    assert len(read_run_reports([str(tmp_path)], stats)) == 1
    assert stats.reasons == {reason: 1} and stats.first_at[reason].startswith(f'{path}:runs[0]')


def test_control_characters_in_variable_names_and_units_are_escaped(tmp_path):
    report(tmp_path / 'r.json', [case(perfvalues={
        'local:shm:t\x0etotal': [1.0, 0, None, None, 's\x1b', 'pass']})])
    (rec,) = read_run_reports([str(tmp_path / 'r.json')], ReadStats())
    assert rec.values == {'t\\x0etotal': 1.0} and rec.units == {'t\\x0etotal': 's\\x1b'}


def test_a_report_given_twice_is_read_once(tmp_path):
    path = report(tmp_path / 'run-report-1.json', [case()])
    stats = ReadStats()
    assert len(read_run_reports([str(tmp_path), path], stats)) == 1 and stats.files == 1


def test_runs_of_another_node_count_build_or_size_in_the_same_second_are_kept(tmp_path):
    """Audit: merge's key lacked the node count and the build: a run-report run
    on 2 nodes (or of a Debug build) that completed in the same second as a
    perflog's run on 1 node was dropped as its duplicate."""
    write(tmp_path / 'Spmv.log', [header(['fom', 't_total']),
                                  line('spmv', {'fom': (2.5, 'GFLOP/s'), 't_total': (2.0, 's')},
                                       size='16')])
    release = 'cmake Release mpich'
    report(tmp_path / 'run-report-0.json', [
        case(t=2.0, build_spec=release),                      # the perflog's run
        case(t=3.0, build_spec=release, nodes=2),
        case(t=4.0, build_spec='cmake Debug mpich'),
        case(t=5.0, build_spec=release, size='32')])
    from_log = read_perflogs([str(tmp_path / 'Spmv.log')])
    from_report = read_run_reports([str(tmp_path)], ReadStats())
    assert {r.time for r in from_log + from_report} == {T0}
    both = merge(from_log, from_report)
    assert sorted((r.nodes, r.build_spec, r.size, r.values['t_total']) for r in both) == [
        (1, 'cmake Debug mpich', '16', 4.0), (1, release, '16', 2.0),
        (1, release, '32', 5.0), (2, release, '16', 3.0)]
    assert both[0] is from_log[0]                          # the perflog's record kept


def test_a_run_report_run_completed_exactly_at_since_joins_the_stored_window(tmp_path):
    """--since: 'only runs completed at or after this time', for a run report's
    runs beside a history store too (they join the window, not the store)."""
    import datetime as dt

    from hybridverdict.cli import main as cli_main
    write(tmp_path / 'logs/Spmv.log', [header(['t_total']), line(
        'spmv', {'t_total': (2.0, 's')}, size='16', time=T0 - dt.timedelta(hours=1))])
    (tmp_path / 'rr').mkdir()
    report(tmp_path / 'rr/run-report-0.json', [
        case(t=2.0, when=UNIX - 1), case(t=2.0, when=UNIX),
        case('masteronly', 1, 2, t=1.0, when=UNIX + 20)])
    out = tmp_path / 'out'
    assert cli_main(['--perflogs', str(tmp_path / 'logs'), '--run-reports', str(tmp_path / 'rr'),
                     '--history-store', str(tmp_path / 'store'), '--since', T0.isoformat(),
                     '--out', str(out)]) == 0
    (path,) = out.glob('verdict-*.json')
    found = json.loads(path.read_text())
    assert found['meta']['records'] == 2
    assert [(v['n_mpi'], v['n_hybrid'], v['verdict']) for v in found['verdicts']] == [
        (1, 1, 'INCONCLUSIVE')]                            # one sample a side: no call


def test_a_retried_case_counts_by_its_last_try_in_its_perflog_as_in_its_report(tmp_path):
    """--max-retries 1: the perflog logs the failed try (out of its band) and its
    retry, the report holds the retry in its runs[1]; both readers keep the
    retry alone (the perflog's reader kept the failed try as a run)."""
    import dataclasses
    import datetime as dt

    run = {'session': 's-1'}
    write(tmp_path / 'Spmv.log', [header(['fom', 't_total'])] + [
        line('spmv', {'fom': (2.5, 'GFLOP/s', 2.0, -0.1, None), 't_total': (t, 's')},
             size='16', name='SpmvCheck %layout=mpi', result=result, after_result=run,
             time=T0 + dt.timedelta(seconds=seconds))
        for result, t, seconds in (('fail', 3.0, 0), ('pass', 2.0, 60))])
    release = 'cmake Release mpich'
    report(tmp_path / 'run-report-0.json', [case(t=3.0, result='fail', build_spec=release, **run)],
           [case(t=2.0, when=UNIX + 60, build_spec=release, **run)])
    from_log = read_perflogs([str(tmp_path / 'Spmv.log')])
    from_report = read_run_reports([str(tmp_path)], ReadStats())
    assert [dataclasses.replace(r, source='') for r in from_log] == [
        dataclasses.replace(r, source='') for r in from_report]
    assert [(r.result, r.values['t_total']) for r in from_log] == [('pass', 2.0)]
