"""The baseline command's writes (``hybridverdict.baseline``): two at once lose no
reference, and a symlinked references file stays a link."""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from harnesscore import stats
from hybridverdict import atomic, baseline
from hybridverdict.perflog import read_perflogs
from perflog_writer import T0, header, line, write
from test_references import stream_perflogs

#: baseline B, which says when it waits for the prefix's lock (never, before the lock)
WAITING_B = '''
import fcntl, sys
from hybridverdict import baseline
real = fcntl.flock
def flock(fd, op):
    print('waiting', flush=True)
    return real(fd, op)
fcntl.flock = flock
sys.exit(baseline.main(sys.argv[1:]))
'''


def perflogs(tmp_path: Path, cls: str) -> str:
    """A perflog folder with one passing run of the test class `cls` of system local."""
    logs = Path(stream_perflogs(tmp_path))
    log = logs / 'StreamCheck.log'
    log.write_text(log.read_text().replace('StreamCheck %', f'{cls} %'))
    return str(logs)


def classes(path: Path) -> list[str]:
    return sorted(yaml.safe_load(path.read_text()))


def test_two_baselines_at_once_keep_each_others_references(tmp_path, monkeypatch):
    # A reads the references, then B runs whole (another var dir, the same
    # checkout), then A writes: B's references were lost.  Now B waits for A's lock.
    refs = tmp_path / 'refs'
    logs_a, logs_b = perflogs(tmp_path / 'a', 'StreamCheck'), perflogs(tmp_path / 'b', 'RingCheck')
    real_write = baseline.write_references
    runs: list[subprocess.Popen] = []

    def write_references(path, entries, force, now):
        b = subprocess.Popen([sys.executable, '-c', WAITING_B, '--perflogs', logs_b,
                              '--prefix', str(refs), '--force'],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        runs.append(b)
        # B waits for the lock, or (without one) runs to its end
        deadline = time.monotonic() + 120
        while b.poll() is None and time.monotonic() < deadline:
            if b.stdout.readline().startswith('waiting'):
                break
        return real_write(path, entries, force, now)

    monkeypatch.setattr(baseline, 'write_references', write_references)
    assert baseline.main(['--perflogs', logs_a, '--prefix', str(refs), '--force']) == 0
    (b,) = runs
    b.communicate(timeout=120)
    assert b.returncode == 0
    assert classes(refs / 'local.yaml') == ['RingCheck', 'StreamCheck']


def test_a_reference_prefix_with_a_tilde_is_the_homes_as_the_checks_read_it(tmp_path):
    # RFM_REFERENCE_PREFIX=~/refs: the checks (config/settings.py) read $HOME/refs,
    # the baseline wrote ./~/refs/<system>.yaml, where nothing reads it.
    home, cwd = tmp_path / 'home', tmp_path / 'cwd'
    home.mkdir()
    cwd.mkdir()
    logs = perflogs(tmp_path / 'a', 'StreamCheck')
    proc = subprocess.run([sys.executable, '-m', 'hybridverdict.baseline', '--perflogs', logs],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, 'HOME': str(home), 'RFM_REFERENCE_PREFIX': '~/refs'})
    assert proc.returncode == 0, proc.stderr
    assert classes(home / 'refs' / 'local.yaml') == ['StreamCheck']
    assert not (cwd / '~').exists()


def test_a_symlinked_references_file_is_replaced_through_its_link(tmp_path):
    shared = tmp_path / 'shared' / 'local.yaml'
    shared.parent.mkdir()
    shared.write_text('')
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'local.yaml').symlink_to(shared)
    logs = perflogs(tmp_path, 'StreamCheck')
    assert baseline.main(['--perflogs', logs, '--prefix', str(refs), '--force']) == 0
    assert (refs / 'local.yaml').is_symlink()
    assert classes(shared) == ['StreamCheck']
    assert [p.name for p in (refs / 'previous').iterdir()][0].startswith('local-')
    assert baseline.main(['--perflogs', perflogs(tmp_path / 'b', 'RingCheck'),
                          '--prefix', str(refs), '--force']) == 0
    assert (refs / 'local.yaml').is_symlink()
    assert classes(shared) == ['RingCheck', 'StreamCheck']


NAME = 'StreamCheck %layout=mpi_2x1'
KEY = ('local:shm', 'mpich', 'layout=mpi_2x1', 'fom')


def test_a_variant_run_on_other_nodes_takes_its_reference_from_its_latest_runs(tmp_path):
    # the latest run first in the file: the latest is the latest by time
    log = write(tmp_path / 'StreamCheck.log', [header(['fom'])] + [
        line('stream', {'fom': (value, 'GB/s')}, name=NAME, nodes=nodes,
             time=T0 + dt.timedelta(minutes=minutes))
        for value, nodes, minutes in [(10.0, 1, 10), (5.0, 2, 0)]])
    left_out: list[str] = []
    samples = baseline.collect(read_perflogs([str(log)]), left_out)['local']['StreamCheck']
    assert {key: s.values for key, s in samples.items()} == {KEY: [10.0]}
    assert len(left_out) == 1 and '2 node(s)' in left_out[0], left_out


def test_a_variable_logged_in_another_unit_takes_the_latest_runs_unit(tmp_path):
    # 10 GB/s, then 10000 and 10100 MB/s: one band of them was 10000 "GB/s" -100%
    log = write(tmp_path / 'StreamCheck.log', [header(['fom'])] + [
        line('stream', {'fom': (value, unit)}, name=NAME,
             time=T0 + dt.timedelta(minutes=minutes))
        for value, unit, minutes in [(10.0, 'GB/s', 0), (10000.0, 'MB/s', 10),
                                     (10100.0, 'MB/s', 20)]])
    left_out: list[str] = []
    samples = baseline.collect(read_perflogs([str(log)]), left_out)['local']['StreamCheck']
    assert {key: (s.unit, s.values) for key, s in samples.items()} == {
        KEY: ('MB/s', [10000.0, 10100.0])}
    assert left_out == ["StreamCheck local:shm mpich [layout=mpi_2x1] fom: from the values "
                        "in MB/s (its latest run's); left out those in 'GB/s'"]


def test_two_checks_of_one_variant_keep_each_their_own_unit(tmp_path):
    # SpmvCheck and MdCheck at the same layout and problem size (-P problem=8):
    # their fom in GFLOP/s and atom-steps/s was one unit per variant, the other
    # check's values left out as 'another unit'
    runs = [('SpmvCheck', 'spmv', 2.0, 'GFLOP/s', 0), ('MdCheck', 'md', 3e6, 'atom-steps/s', 10)]
    logs = [write(tmp_path / f'{cls}.log', [header(['fom'])] + [
        line(kernel, {'fom': (value, unit)}, name=f'{cls} %layout=mpi_2x1 %problem=8',
             time=T0 + dt.timedelta(minutes=minutes))])
        for cls, kernel, value, unit, minutes in runs]
    left_out: list[str] = []
    got = baseline.collect(read_perflogs([str(p) for p in logs]), left_out)['local']
    key = ('local:shm', 'mpich', 'layout=mpi_2x1 problem=8', 'fom')
    assert {cls: (got[cls][key].unit, got[cls][key].values) for cls in got} == {
        'SpmvCheck': ('GFLOP/s', [2.0]), 'MdCheck': ('atom-steps/s', [3e6])}, left_out
    assert left_out == []


def test_a_users_expected_failure_stays_one(tmp_path, capsys):
    # [$xfail, message, [...]] (references.validate_references takes it) was a
    # TypeError in the diff where the runs covered it (a confusing error where not),
    # and the merge would have dropped the mark
    refs = tmp_path / 'refs'
    refs.mkdir()
    mine = ['$xfail', 'known slow on this box, ticket 42', [10.0, -0.05, None, 'GB/s']]
    other = ['$xfail', 'another variant', [3.0, -0.1, None, 'GB/s']]
    (refs / 'local.yaml').write_text(yaml.safe_dump({'StreamCheck': {
        '$index': ['$partition', '$environ', 'ref_variant'],
        'local:shm': {'mpich': {'layout=mpi_2x1 problem=8': {'fom': mine},
                                'layout=mpi_1x2 problem=8': {'fom': other}}}}}))
    assert baseline.main(['--perflogs', stream_perflogs(tmp_path), '--prefix', str(refs),
                          '--force']) == 0
    assert ' (xfail kept)' in capsys.readouterr().out
    doc = yaml.safe_load((refs / 'local.yaml').read_text())['StreamCheck']['local:shm']['mpich']
    covered = doc['layout=mpi_2x1 problem=8']['fom']
    assert covered[:2] == mine[:2] and covered[2][0] == 10.0 and covered[2][3] == 'GB/s'
    assert doc['layout=mpi_1x2 problem=8']['fom'] == other


def test_the_references_keep_a_variables_name_as_logged(tmp_path):
    log = write(tmp_path / 'Osu.log', [header(['latency_8B']), line(
        'osu_latency', {'latency_8B': (0.5, 'us')}, name='OsuCheck %pair=x')])
    samples = baseline.collect(read_perflogs([str(log)]))['local']['OsuCheck']
    assert [key[3] for key in samples] == ['latency_8B']


def test_a_rate_may_fall_and_a_time_grow_by_the_band_sized_in_log_scale():
    sessions = [[95.0, 100.0, 105.0], [97.0, 102.0, 99.0], [101.0, 96.0, 104.0]]
    band = stats.reference_band(sessions, 3, 0.01, 1).log_tolerance
    for unit, lower_is_better in (('GB/s', False), ('s', True)):
        samples = baseline.Samples(unit, [v for s in sessions for v in s],
                                   [i for i, s in enumerate(sessions) for _ in s])
        ref = baseline.reference_tuple(samples, 0.01, 0.01, 3)
        limit = 1 + (ref[2] if lower_is_better else ref[1])
        assert math.isclose(limit, math.exp(band if lower_is_better else -band),
                            abs_tol=1e-4), (unit, ref, band)


def test_a_write_that_fails_keeps_no_copy_of_the_unchanged_file(tmp_path, monkeypatch):
    path = tmp_path / 'local.yaml'
    path.write_text('')
    entries = {'StreamCheck': {KEY: [10.0, -0.1, None, 'GB/s']}}

    def fail(target: str, text: str) -> None:
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(atomic, 'write_replacing', fail)
    with pytest.raises(OSError):
        baseline.write_references(str(path), entries, force=True, now=T0)
    assert path.read_text() == '' and list((tmp_path / 'previous').iterdir()) == []


def test_the_baseline_leaves_out_a_run_completed_at_until(tmp_path, capsys):
    logs = stream_perflogs(tmp_path)     # one run, completed at 2026-01-01T00:00:00Z
    assert baseline.main(['--perflogs', logs, '--prefix', str(tmp_path / 'refs'), '--dry-run',
                          '--until', '2026-01-01T00:00:00Z']) == 2
    assert 'no verified runs that passed' in capsys.readouterr().err


def test_an_empty_prefix_is_refused_not_the_current_folder(tmp_path, capsys, monkeypatch):
    # --prefix "$UNSET" wrote ./<system>.yaml wherever the command ran, exit 0
    logs = stream_perflogs(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        baseline.main(['--perflogs', logs, '--prefix', ''])
    assert exit_.value.code == 2
    assert 'error: argument --prefix: an empty path' in capsys.readouterr().err
    assert not (tmp_path / 'local.yaml').exists()


def test_a_new_tolerance_alone_shows_as_changed():
    old = {'StreamCheck': {KEY: [10.0, -0.1, None, 'GB/s']}}
    new = {'StreamCheck': {KEY: [10.0, -0.2, None, 'GB/s']}}
    assert [row[-1] for row in baseline.diff_rows(old, new)] == ['changed']


def test_a_system_without_runs_is_an_error_before_any_file_is_written(tmp_path, capsys):
    refs = tmp_path / 'refs'
    assert baseline.main(['--perflogs', stream_perflogs(tmp_path), '--prefix', str(refs),
                          '--system', 'local', '--system', 'other']) == 2
    assert 'of system(s) other in' in capsys.readouterr().err
    assert not (refs / 'local.yaml').exists()


def test_the_night_samples_option_is_bounded_as_harness_repeat(tmp_path, monkeypatch, capsys):
    # --night-samples through the bounds of HARNESS_REPEAT (plan.bounded_int;
    # the knob itself: test_references.test_a_bad_harness_repeat_is_one_line).
    logs = stream_perflogs(tmp_path)
    args = ['--perflogs', logs, '--prefix', str(tmp_path / 'refs'), '--dry-run']
    for value in ('three', '0', '101', '+3', '٣'):
        with pytest.raises(SystemExit) as exit_:
            baseline.main([*args, '--night-samples', value])
        assert exit_.value.code == 2
        assert (f"argument --night-samples: must be an integer from 1 to 100, got {value!r}"
                in capsys.readouterr().err)
    monkeypatch.setenv('HARNESS_REPEAT', ' 3 ')
    assert baseline.main(args) == 0
    assert baseline.main([*args, '--night-samples', ' 100']) == 0


def test_a_users_comments_are_named_when_the_file_is_written_anew(tmp_path, capsys):
    # the file is written from its entries: its comments were lost without a word
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'local.yaml').write_text(
        '# hand-tuned after the BIOS update: do not loosen\n'
        'StreamCheck:\n  $index: [$partition, $environ, ref_variant]\n  local:shm:\n'
        '    mpich:\n      layout=mpi_1x2 problem=8:\n'
        "        fom: [3.0, -0.1, null, 'GB/s']   # known jitter\n"
        "        t: ['$xfail', 'ticket #42', [1.0, null, 0.1, s]]\n")
    logs = stream_perflogs(tmp_path)
    assert baseline.main(['--perflogs', logs, '--prefix', str(refs), '--force']) == 0
    out = capsys.readouterr().out
    kept = next(refs.glob('previous/local-*.yaml'))
    assert f'note: 2 comment line(s) of the file are not in the new one (it is written from ' \
           f'its entries): they are in {kept}' in out
    assert 'do not loosen' in kept.read_text()
    # written by the command itself: its own header is no comment of the user's
    assert baseline.main(['--perflogs', logs, '--prefix', str(refs), '--force']) == 0
    assert 'comment line(s)' not in capsys.readouterr().out


#: ``hybridverdict-baseline`` as its entry point runs it, in a process of its own
BASELINE = 'import sys; from hybridverdict.__main__ import baseline_main; sys.exit(baseline_main())'


def test_a_perflog_it_may_not_read_is_one_line_naming_it_not_a_traceback(tmp_path):
    # a perflog without read permission was a PermissionError traceback, exit 1
    # (``hybridverdict`` said it in one line, exit 2)
    logs = Path(stream_perflogs(tmp_path))
    log = logs / 'StreamCheck.log'
    log.chmod(0)
    # root reads it all the same: run it without the capabilities that override a
    # file's permissions (it stays root, so its Python is still its own)
    drop = ['setpriv', '--bounding-set=-dac_override,-dac_read_search'] \
        if os.geteuid() == 0 else []
    if drop and (shutil.which('setpriv') is None
                 or subprocess.run([*drop, 'cat', str(log)], capture_output=True).returncode == 0):
        pytest.skip('root, and cannot drop the capabilities that let it read the file')
    run = subprocess.run([*drop, sys.executable, '-c', BASELINE, '--perflogs', str(logs),
                          '--prefix', str(tmp_path / 'refs')],
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (
        2, '', f'hybridverdict-baseline: error: cannot read {log}: Permission denied\n')
    assert not (tmp_path / 'refs').exists()


def test_a_perflog_whose_read_fails_is_one_line_naming_it(tmp_path, capsys):
    # an I/O error (EIO, without a file name): /proc/self/mem, whose first page
    # is not mapped, was an OSError traceback, exit 1
    assert baseline.main(['--perflogs', '/proc/self/mem', '--prefix',
                          str(tmp_path / 'refs')]) == 2
    assert capsys.readouterr().err == (
        'hybridverdict-baseline: error: cannot read /proc/self/mem: Input/output error\n')


# ---- HybridVerdict's verdict code: an INCONCLUSIVE call logs 0, as a TIE does -----

VERDICT_UNIT = 'win=1 tie=0 loss=-1'
PAIR = ('local:shm', 'mpich', 'pair=spmv/64/masteronly_1x2')
#: the judgement_detail of an INCONCLUSIVE call's perflog line (checks/kernels.py)
UNDECIDED = ('verdict INCONCLUSIVE: code 0, no TIE (speedup interval 0.9300..1.1200, '
             'noise floor 0.05)')
#: a night's call -> (verdict code, speedup, judgement_detail)
NIGHT = {'WIN': (1, 1.3, ''), 'TIE': (0, 1.01, ''), 'INCONCLUSIVE': (0, 1.02, UNDECIDED)}


def verdict_nights(tmp_path: Path, calls: list[str | tuple[int, float, str]]) -> str:
    """A perflog of HybridVerdict, one run a night per call (a name of ``NIGHT``,
    or its code, speedup and judgement_detail)."""
    nights = [NIGHT[c] if isinstance(c, str) else c for c in calls]
    return str(write(tmp_path / 'logs' / 'HybridVerdict.log', [header(['speedup', 'verdict'])] + [
        line('spmv', {'speedup': (speedup, 'x'), 'verdict': (code, VERDICT_UNIT)},
             mode='verdict-masteronly', ranks=1, threads=2, size='64',
             name=f'HybridVerdict %pair={PAIR[2][5:]}', time=T0 + dt.timedelta(days=night),
             after_result={'judgement_detail': detail})
        for night, (code, speedup, detail) in enumerate(nights)]))


@pytest.mark.parametrize('wins, undecided', [(4, 3), (3, 4), (1, 6)])
def test_inconclusive_nights_never_enter_a_verdict_reference(tmp_path, capsys, wins, undecided):
    # A pair that WINs on its decided nights, INCONCLUSIVE on the others: its code 0
    # was pooled as a TIE's, [1, -1.0] (a decided TIE passed) or [0, -1.0] (a LOSS
    # passed).  Its decided nights alone make [1, -0.05]; its speedups all count.
    refs = tmp_path / 'refs'
    logs = verdict_nights(tmp_path, ['WIN'] * wins + ['INCONCLUSIVE'] * undecided)
    assert baseline.main(['--perflogs', logs, '--prefix', str(refs)]) == 0
    entry = yaml.safe_load((refs / 'local.yaml').read_text())['HybridVerdict']
    variables = entry[PAIR[0]][PAIR[1]][PAIR[2]]
    assert variables['verdict'] == [1.0, -0.05, None, VERDICT_UNIT]
    assert variables['speedup'][0] == (1.3 if wins > undecided else 1.02)
    assert (f'note: not pooled: HybridVerdict local:shm mpich [{PAIR[2]}] verdict: from the '
            f'decided calls; left out {undecided} INCONCLUSIVE one(s) (code 0, no TIE)'
            in capsys.readouterr().err)


def test_a_tie_is_pooled_and_a_variant_never_decided_gets_an_unbounded_reference(
        tmp_path, capsys):
    decided = baseline.collect(read_perflogs([verdict_nights(tmp_path / 'a', [
        'WIN', 'TIE', 'INCONCLUSIVE'])]))['local']['HybridVerdict']
    assert decided[(*PAIR, 'verdict')].values == [1.0, 0.0]
    # Never decided: a reference all the same (a nightly with require_reference
    # finds one), that no code fails; it takes no share of the variant's
    # false-alarm rate, so the speedup's band is that of a variant of one variable.
    refs = tmp_path / 'refs'
    never = verdict_nights(tmp_path / 'b', ['INCONCLUSIVE'] * 2)
    assert baseline.main(['--perflogs', never, '--prefix', str(refs)]) == 0
    variables = yaml.safe_load((refs / 'local.yaml').read_text())[
        'HybridVerdict'][PAIR[0]][PAIR[1]][PAIR[2]]
    assert variables['verdict'] == [0.0, None, None, VERDICT_UNIT]
    assert (f'note: not pooled: HybridVerdict local:shm mpich [{PAIR[2]}] verdict: never '
            f'decided: an unbounded reference (any code passes) from 2 INCONCLUSIVE one(s) '
            f'(code 0, no TIE)' in capsys.readouterr().err)


def test_an_unbounded_reference_takes_no_share_of_the_false_alarm_rate():
    speedup = baseline.Samples('x', [1.0, 1.1, 0.95, 1.2, 0.9, 1.05], [0, 1, 2, 3, 4, 5])
    key = (*PAIR, 'speedup')
    entries = baseline.build_entries({'HybridVerdict': {
        key: speedup, (*PAIR, 'verdict'): baseline.Samples(VERDICT_UNIT)}}, 0.01)
    assert entries['HybridVerdict'][(*PAIR, 'verdict')] == [0.0, None, None, VERDICT_UNIT]
    assert entries['HybridVerdict'][key] == baseline.reference_tuple(speedup, 0.01, variables=1)
    assert entries['HybridVerdict'][key] != baseline.reference_tuple(speedup, 0.01, variables=2)


@pytest.mark.parametrize('call', ['INCONCLUSIVE', 'TIE', 'WIN', None])
def test_the_check_logs_an_undecided_call_as_the_baseline_reads_it(tmp_path, call):
    """HybridVerdict's own hook writes the judgement_detail the baseline leaves
    out, before the band rule's detail; a decided call's detail stays the band
    rule's (None: a dry run, no call)."""
    from types import SimpleNamespace

    from conftest import REPO
    from reframe.utility import import_module_from_file
    kernels = import_module_from_file(str(REPO / 'checks' / 'kernels.py'))
    band_rule = 'speedup PASS: median 1.02 interval [0.93, 1.12]'
    check = SimpleNamespace(noise_floor=0.05, judgement_detail=band_rule, _cmp=SimpleNamespace(
        interval=stats.Interval(1.02, 0.93, 1.12, 3, 0.95, 'paired')))
    if call is not None:
        check._verdict = call
    kernels.HybridVerdict.log_an_undecided_call(check)
    if call != 'INCONCLUSIVE':
        assert check.judgement_detail == band_rule
        return
    assert check.judgement_detail == f'{UNDECIDED}; {band_rule}'
    (rec,) = read_perflogs([verdict_nights(tmp_path, [(0, 1.02, check.judgement_detail)])])
    assert baseline.undecided(rec)
