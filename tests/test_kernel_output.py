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
        rounds.md_ratios(out.read_text())
    assert rounds.main(['md', str(out)]) == 2
    assert 'malformed MD_1x1 line' in capsys.readouterr().err


def test_the_ranks_hosts_come_from_the_last_line_that_names_them_past_a_malformed_one():
    def check(text: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(job=types.SimpleNamespace(stdout='rfm_job.out'),
                                     stage_text={'rfm_job.out': text}.get)

    text = ('RESULT {"hosts": ["n1", "n2", "n1"]}\n'
            'RESULT {"hosts": []}\n'
            'RESULT {"hosts": ["n3",}\n')
    assert base.KernelCheck.rank_hosts(check(text)) == ['n1', 'n2']
    assert base.KernelCheck.rank_hosts(check('no result\n')) == []
