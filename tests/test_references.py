"""References per system: keys, tolerances, and the baseline command's rules."""

from __future__ import annotations

import datetime as dt
import io
import sys

import pytest
import yaml
from harnesscore.references import lower_is_better, references_file, split_name
from hybridverdict import baseline


@pytest.mark.parametrize('name, split', [
    ('SpmvCheck %sample=2 %layout=mpi_2x1 %problem=64', 'layout=mpi_2x1 problem=64'),
    ('HybridVerdict %pair=spmv/64/masteronly_1x2', 'pair=spmv/64/masteronly_1x2'),
    ('MdLammpsBenchmark', '-'),
    ('X %.repeat_no=1 %p=3', 'p=3'),
    # a variable -P made a parameter is another run (1 and 2 nodes: two references,
    # two pools of samples); a fixture's parameter is not the test's
    ('MdCheck %layout=mpi_2x1 %problem=24 %sample=0 %.nodes=2',
     'layout=mpi_2x1 problem=24 .nodes=2'),
    ('SpmvCheck %layout=mpi_2x1 %build.stack=mpich', 'layout=mpi_2x1'),
])
def test_split_name_drops_the_sample_and_keeps_the_parameters(name, split):
    assert split_name(name) == (name.split()[0], split)


def test_split_name_of_no_name_is_an_error():
    with pytest.raises(ValueError):
        split_name('  ')


@pytest.mark.parametrize('unit', ['s', 'ms', 'us', 'ns', ' us '])
def test_every_time_unit_is_lower_is_better(unit):
    assert lower_is_better(unit)


@pytest.mark.parametrize('unit', ['MB/s', 'GFLOP/s', 'ratio', ''])
def test_rates_and_ratios_are_higher_is_better(unit):
    assert not lower_is_better(unit)


def test_references_file_refuses_a_system_name_that_is_a_path(tmp_path):
    assert references_file(str(tmp_path), 'local') == str(tmp_path / 'local.yaml')
    with pytest.raises(ValueError, match='cannot name a references file'):
        references_file(str(tmp_path), '../etc')


def test_tolerance_is_one_sided_sized_for_the_false_alarm_rate_with_a_floor():
    # rate: may not fall; 3 sessions of 3 runs, spread ~5% -> a band well above it
    sessions = [[95.0, 100.0, 105.0], [97.0, 102.0, 99.0], [101.0, 96.0, 104.0]]
    samples = baseline.Samples('GB/s', [v for s in sessions for v in s],
                               [i for i, s in enumerate(sessions) for _ in s])
    ref = baseline.reference_tuple(samples, 0.05, 0.01, 3)
    assert ref[0] == 100.0 and ref[2] is None and ref[3] == 'GB/s'
    assert -0.5 < ref[1] < -0.05
    # a stricter false-alarm rate, or the rate split over more variables, widens it
    assert baseline.reference_tuple(samples, 0.05, 0.001, 3)[1] < ref[1]
    assert baseline.reference_tuple(samples, 0.05, 0.01, 3, variables=20)[1] < ref[1]
    # more runs a night narrow it
    assert baseline.reference_tuple(samples, 0.05, 0.01, 9)[1] > ref[1]
    # time: may not grow; no spread -> the floor
    ref = baseline.reference_tuple(baseline.Samples('s', [2.0, 2.0]), 0.1)
    assert ref == [2.0, None, 0.1, 's']
    # a rate cannot fall by more than 100%
    ref = baseline.reference_tuple(baseline.Samples('x', [1.0]), 3.0)
    assert ref == [1.0, -1.0, None, 'x']
    # a zero median: absolute band
    ref = baseline.reference_tuple(baseline.Samples('s', [0.0, 0.0]), 0.1)
    assert ref == [0.0, None, 0.1, 's']


def _entries(value: float) -> dict:
    return {'StreamCheck': {('local:shm', 'mpich', 'layout=mpi_2x1 problem=8', 'fom'):
                            [value, -0.1, None, 'GB/s']}}


def test_written_file_is_a_reframe_ref_file_and_is_never_replaced_silently(tmp_path):
    path = str(tmp_path / 'local.yaml')
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert baseline.write_references(path, _entries(10.0), force=False, now=now) is None
    doc = yaml.safe_load(open(path))
    assert doc['StreamCheck']['$index'] == ['$partition', '$environ', 'ref_variant']
    assert doc['StreamCheck']['local:shm']['mpich']['layout=mpi_2x1 problem=8']['fom'] == [
        10.0, -0.1, None, 'GB/s']
    before = open(path).read()
    with pytest.raises(baseline.ReferencesError, match='--force'):
        baseline.write_references(path, _entries(20.0), force=False, now=now)
    assert open(path).read() == before
    kept = baseline.write_references(path, _entries(20.0), force=True, now=now)
    assert kept and open(kept).read() == before
    assert baseline.read_references(path)['StreamCheck'][
        ('local:shm', 'mpich', 'layout=mpi_2x1 problem=8', 'fom')][0] == 20.0
    # a second forced write in the same second keeps both previous versions
    kept2 = baseline.write_references(path, _entries(30.0), force=True, now=now)
    assert kept2 != kept and len(list((tmp_path / 'previous').iterdir())) == 2


def test_diff_shows_new_changed_and_kept_entries():
    old = {'A': {('p', 'e', 'v', 'x'): [10.0, -0.1, None, 'u'],
                 ('p', 'e', 'v', 'y'): [1.0, None, 0.1, 's']}}
    new = {'A': {('p', 'e', 'v', 'x'): [11.0, -0.1, None, 'u'],
                 ('p', 'e', 'w', 'x'): [5.0, -0.2, None, 'u']}}
    rows = {(r[3], r[4]): (r[-2], r[-1]) for r in baseline.diff_rows(old, new)}
    assert rows[('v', 'x')] == ('+10.0%', 'changed')
    assert rows[('v', 'y')][1] == 'kept'
    assert rows[('w', 'x')][1] == 'new'
    merged = baseline.merge(old, new)
    assert set(merged['A']) == {('p', 'e', 'v', 'x'), ('p', 'e', 'v', 'y'), ('p', 'e', 'w', 'x')}


@pytest.mark.parametrize('text, message', [
    ('StreamCheck: [1, 2', 'cannot read references'),
    ('StreamCheck:\n  local:shm: {}\n', 'expected [\'$partition\''),
    ('StreamCheck:\n  $index: [$partition, $environ, ref_variant]\n  p:\n    e:\n      v:\n'
     '        fom: 3\n', 'expected [reference, lower, upper, unit]'),
])
def test_a_malformed_references_file_is_named_and_left_alone(tmp_path, capsys, text, message):
    bad = tmp_path / 'refs' / 'local.yaml'
    bad.parent.mkdir()
    bad.write_text(text)
    rc = baseline.main(['--perflogs', stream_perflogs(tmp_path), '--prefix',
                        str(tmp_path / 'refs'), '--force'])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and message in err
    assert bad.read_text() == text
    assert not (tmp_path / 'refs' / 'previous').exists()


def test_no_runs_of_the_system_is_an_error(tmp_path, capsys):
    (tmp_path / 'p').mkdir()
    assert baseline.main(['--perflogs', str(tmp_path / 'p'), '--prefix', str(tmp_path)]) == 2
    assert 'no verified runs' in capsys.readouterr().err


def stream_perflogs(tmp_path) -> str:
    """A perflog folder with one passing StreamCheck run of system local."""
    logs = tmp_path / 'perflogs'
    logs.mkdir(parents=True)
    header = ('job_completion_time|system|partition|environ|name|kernel|mode|ranks|threads|'
              'size|cores|nodes|mpi_library|verified|oversubscribed|finalize_hung|build_spec|'
              'result|fom_value|fom_unit|fom_ref|fom_lower_thres|fom_upper_thres')
    row = ('2026-01-01T00:00:00+0000|local|shm|mpich|StreamCheck %sample=0 %layout=mpi_2x1 '
           '%problem=8|stream|mpi|2|1|8|2|1|MPICH|true|false|false|cmake|pass|10.0|GB/s|0|'
           'None|None')
    (logs / 'StreamCheck.log').write_text(f'{header}\n{row}\n')
    return str(logs)


@pytest.mark.parametrize('repeat', ['abc', '0', '101', '²', '+3', '٣'])
def test_a_bad_harness_repeat_is_one_line(tmp_path, capsys, monkeypatch, repeat):
    monkeypatch.setenv('HARNESS_REPEAT', repeat)
    assert baseline.main(['--perflogs', stream_perflogs(tmp_path), '--prefix',
                          str(tmp_path / 'refs'), '--dry-run']) == 2
    out = capsys.readouterr()
    # the words of the checks' own reading (plan.samples_per_run) and of ./harness
    assert out.err == ('hybridverdict-baseline: error: HARNESS_REPEAT must be an integer '
                       f'from 1 to 100, got {repeat!r}\n')
    assert out.out == ''
    monkeypatch.setenv('HARNESS_REPEAT', ' 5 ')
    assert baseline.main(['--perflogs', stream_perflogs(tmp_path / 'b'), '--prefix',
                          str(tmp_path / 'refs'), '--dry-run']) == 0
    assert 'medians of 5 run(s) a night' in capsys.readouterr().out


class ClosedPipe(io.TextIOBase):
    """stdout read by ``head -1``, which has exited."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, 'Broken pipe')


def test_stdout_closed_early_is_quiet_not_a_write_error(tmp_path, capsys, monkeypatch):
    logs = stream_perflogs(tmp_path)
    monkeypatch.setattr(sys, 'stdout', ClosedPipe())
    for options in (['--dry-run'], ['--force']):
        assert baseline.main(['--perflogs', logs, '--prefix', str(tmp_path / 'refs'),
                              *options]) == 128 + 13     # as a shell's for SIGPIPE
        assert capsys.readouterr().err == ''
        assert not (tmp_path / 'refs').exists()


def stream_against(tmp_path, stack: str, key: str, *options: str) -> tuple[int, str]:
    """(exit status, output) of a nightly-mode --dry-run of StreamCheck mpi_2x1 on
    local:shm with `stack` and the ReFrame `options`, against a references file
    whose one entry is for the variant `key` (its fom only, no t_total)."""
    from conftest import one_reference, run_reframe
    refs = tmp_path / 'refs'
    one_reference(refs, 'StreamCheck', stack, key, {'fom': [10.0, None, None, 'GB/s']})
    proc = run_reframe(tmp_path / 'run', '--system', 'local:shm', '-n',
                       'StreamCheck%layout=mpi_2x1', *options, '-P', 'sample=0', '-S',
                       'require_reference=true', '--dry-run',
                       env={'HARNESS_STACKS': stack, 'RFM_REFERENCE_PREFIX': str(refs)})
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.integration
def test_a_run_on_a_node_count_of_p_has_its_own_reference(tmp_path, stacks):
    """-P nodes=N runs other jobs than the partition's own: their references (and
    their pools of samples) are apart. The key dropped '%.nodes', so a run on 2 nodes
    was judged against the reference of a run on 1."""
    stack = stacks[0]
    key = 'layout=mpi_2x1 problem=8000000 .nodes=1'
    texts = {name: stream_against(tmp_path / name, stack, key, *extra)[1]
             for name, extra in (('nodes', ['-P', 'nodes=1']), ('plain', []))}
    # found: only the variable the entry lacks is missing
    assert "no reference value found for performance variable 't_total'" in texts['nodes']
    assert 'no reference for' not in texts['nodes'], texts['nodes']
    assert (f'no reference for local:shm {stack} StreamCheck [layout=mpi_2x1 problem=8000000]'
            in texts['plain']), texts['plain']


@pytest.mark.integration
def test_a_node_count_set_with_s_is_refused_not_judged_unkeyed(tmp_path, stacks):
    """-S nodes=N left the node count out of the test's name, so the run was
    judged against the reference of the partition's own node count (the key
    without '.nodes': found, only t_total missing) and baseline pooled it with
    those runs; it is refused, pointing to -P."""
    status, text = stream_against(tmp_path, stacks[0], 'layout=mpi_2x1 problem=8000000',
                                  '-S', 'nodes=1')
    assert status != 0, text
    assert ('StreamCheck.nodes=1: give a node count as a parameter, -P nodes=1, not -S'
            in text), text
    assert 'no reference value found' not in text, text
