"""The kernels' RESULT lines, read by one reader (harnesscore.kernel_output)
for the checks, the STREAM run before spmv and the benchmark rounds; each
reader turns a malformed line into its own error."""

from __future__ import annotations

import types

import pytest
import reframe.utility.sanity as sn
from harnesscore import rounds
from harnesscore.kernel_output import MalformedResult, result_lines, results_with_lines
from harnesslib import base

OUTPUT = ('# spmv 2x1\n'
          'RESULT {"size": 8, "verified": true}\r\n'
          'RESULT not json at all\n'
          ' RESULT {"size": 1}\n'
          'RESULTS {"size": 2}\n'
          'RESULT {"size": 16, "hosts": ["a", "b"]}   \n'
          'MD_1x1 {"fom": 3.0}\n')


def test_the_objects_of_the_tagged_lines_in_order_and_nothing_else():
    assert result_lines(OUTPUT) == [{'size': 8, 'verified': True},
                                    {'size': 16, 'hosts': ['a', 'b']}]
    assert result_lines(OUTPUT, 'MD_1x1') == [{'fom': 3.0}]
    assert result_lines(OUTPUT, 'MD_2x1') == []
    # The tag is text, not a pattern.
    assert result_lines('MD_1x1 {"fom": 1}\n', 'MD.1x1') == []
    assert [line for line, _ in results_with_lines(OUTPUT, 'MD_1x1')] == ['MD_1x1 {"fom": 3.0}']


def test_a_malformed_line_names_its_tag_and_text_or_is_passed_over():
    text = 'RESULT {"size": 8}\nRESULT {"size": 8,, "x": 1}\nRESULT {"size": 9}\n'
    with pytest.raises(MalformedResult, match=r'malformed RESULT line \(.*\): \{"size": 8,, '):
        result_lines(text)
    assert result_lines(text, skip_malformed=True) == [{'size': 8}, {'size': 9}]
    # a line cut short (no closing brace) was no line at all
    cut = 'RESULT {"size": 8}\nRESULT {"size": 16, "verified": tr\n'
    with pytest.raises(MalformedResult, match=r'malformed RESULT line \(.*\): \{"size": 16, '):
        result_lines(cut)
    assert result_lines(cut, skip_malformed=True) == [{'size': 8}]


def test_each_reader_makes_a_malformed_line_its_own_error(tmp_path, capsys):
    bad = 'RESULT {"verified": true, "size": }\n'
    with pytest.raises(sn.SanityError, match='malformed RESULT line'):
        base.sanity_results(bad)
    with pytest.raises(rounds.RoundsError, match='ring_lat_1.out: malformed RESULT line'):
        rounds.ring_results(bad, 'ring_lat_1.out')
    # A malformed md line of the rounds was a bare JSONDecodeError, which the
    # job's loop read as exit 1 ("every band decided").
    out = tmp_path / 'bench.out'
    out.write_text('MD_1x1 {"verified": true, "fom": }\n')
    with pytest.raises(rounds.RoundsError, match=r'an md run \(MD_1x1\): malformed MD_1x1'):
        rounds.md_rates_by_tag(out.read_text())
    assert rounds.main(['md', str(out)]) == 2
    assert 'malformed MD_1x1 line' in capsys.readouterr().err


def test_the_ranks_hosts_come_from_the_last_line_that_names_them_past_a_malformed_one():
    def check(text: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(job_stdout=lambda: text)

    text = ('RESULT {"hosts": ["n1", "n2", "n1"]}\n'
            'RESULT {"hosts": []}\n'
            'RESULT {"hosts": ["n3",}\n')
    assert base.KernelCheck.rank_hosts(check(text)) == ['n1', 'n2']
    assert base.KernelCheck.rank_hosts(check('no result\n')) == []


# ---- a check reads only its own run's lines (real sessions) ----------------------

#: sed scripts over a kernel's stdout: a RESULT line of another run put in
WRONG_LINES = {
    'another kernel': ('s/"kernel":"stream"/"kernel":"md"/',
                       "stream: a RESULT line of kernel 'md' mode 'mpi', where this run "
                       'launched stream in mode mpi'),
    'another layout first': ('/^RESULT /{h;s/"ranks":2/"ranks":1/;p;g}',
                             'stream ran 1x1, expected 2x1'),
    'a line cut short first': ('/^RESULT /{h;s/}$//;p;g}', 'malformed RESULT line'),
}


@pytest.mark.integration
def test_a_check_fails_on_a_result_line_of_another_run(tmp_path, stacks):
    """A RESULT line of another kernel, mode or layout, or one cut short, beside
    the run's own: the check passed, reading the last line only (a cut line was
    no line at all).  The kernel's binary in the build folder is replaced by a
    wrapper that edits the real kernel's output; a ring sweep missing a size
    fails naming it (before: 'not a number: None' at the performance stage),
    and spmv's STREAM run that printed its line and then failed passed."""
    import shlex
    import stat

    from conftest import run_reframe
    stack = stacks[0]
    var = tmp_path / 'var'
    select = ('--system', 'local:shm', '-p', stack, '-r')
    stream = ('-n', 'StreamCheck%layout=mpi_2x1')
    proc = run_reframe(var, *stream, *select)
    assert proc.returncode == 0, proc.stdout[-3000:]
    [build] = {p.parent for p in (var / 'build').glob('*/stream')}

    def wrap(kernel: str, script: str, then: str = '') -> None:
        real = build / f'{kernel}.real'
        if not real.exists():
            (build / kernel).rename(real)
        wrapper = build / kernel
        wrapper.write_text(f'#!/bin/sh\n{shlex.quote(str(real))} "$@" | '
                           f'sed -e {shlex.quote(script)}\n{then}')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)

    for what, (script, says) in WRONG_LINES.items():
        wrap('stream', script)
        proc = run_reframe(var, *stream, *select)
        assert proc.returncode != 0 and says in proc.stdout, (what, proc.stdout[-3000:])
    # the STREAM run before spmv: it printed its line, then failed (exit 3)
    wrap('stream', 'p;d', "echo 'stream: failed after its line' >&2; exit 3\n")
    proc = run_reframe(var, '-n', 'SpmvCheck%layout=mpi_2x1%problem=16', *select)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert ('the STREAM run before spmv exited with status 3: stream: failed after its '
            'line') in proc.stdout, proc.stdout[-3000:]
    wrap('ring', '/"size":64,/d')
    proc = run_reframe(var, '-n', 'RingPingpongCheck', '-S', 'sizes=8,64', *select)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert 'ring: no RESULT for size(s) [64] of --sizes 8,64' in proc.stdout, proc.stdout[-3000:]
