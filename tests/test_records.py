"""The record both readers make (hybridverdict.records): its fields from their texts,
what leaves it out of a verdict, the read counts, and the input files taken."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hybridverdict import records
from hybridverdict.records import ReadStats, Record

T0 = dt.datetime(2026, 11, 22, 10, tzinfo=dt.timezone.utc)


def built(**texts: str) -> Record:
    """The record of a usable spmv run, with the run fields' texts in `texts` instead."""
    fields = dict.fromkeys(records.FIELDS, '')
    fields.update(job_completion_time=T0.isoformat(), system='local', partition='shm',
                  environ='mpich', kernel='spmv', mode='mpi', ranks='2', threads='1',
                  size='16', cores='2', nodes='1', verified='true', oversubscribed='false',
                  result='pass')
    fields.update(texts)
    return records.from_fields([fields[f] for f in records.FIELDS], {'t_total': 1.0},
                               {'t_total': 's'}, {}, 'x.log:2')


@pytest.mark.parametrize('result', ['abort', 'xfail', 'fail_deps'])
def test_a_run_whose_result_is_not_pass_is_left_out_as_failed(result: str) -> None:
    # ReFrame's results besides pass and fail (aborted, expected failures) never judge
    assert built(result=result).left_out == 'failed'


def test_the_first_fault_of_a_run_is_the_one_named() -> None:
    rec = built(oversubscribed='true', result='fail', verified='false')
    assert rec.faults == ('oversubscribed', 'failed', 'unverified')
    assert rec.left_out == 'oversubscribed'


def test_a_flag_is_read_in_any_case_and_spacing() -> None:
    assert built(verified=' TRUE ').usable
    assert built(oversubscribed='Yes').left_out == 'oversubscribed'


@pytest.mark.parametrize('nodes', ['', 'null'])
def test_a_run_without_a_node_count_is_grouped_as_one_node(nodes: str) -> None:
    # an older perflog's runs are compared with the one-node runs logged since
    assert built(nodes=nodes).group == built().group


def test_a_boolean_is_not_a_performance_value() -> None:
    assert records.number(True) is None and records.number('2.5') == 2.5


@pytest.mark.parametrize('text', ['None', 'null', '<undefined>'])
def test_a_required_field_without_a_value_makes_no_record(text: str) -> None:
    with pytest.raises(ValueError, match='missing size'):
        built(size=text)


def test_only_a_record_more_than_a_day_ahead_is_counted_for_the_warning() -> None:
    stats = ReadStats(now=T0 - dt.timedelta(hours=23))
    assert stats.keep(built()) and (stats.future, stats.warnings()) == (0, [])
    stats.now = T0 - dt.timedelta(hours=25)
    assert stats.keep(built()) and stats.future == 1


def _tree(tmp_path: Path) -> Path:
    """A folder with a perflog, a file of another kind and a perflog in a subfolder."""
    for name in ('a.log', 'notes.txt', 'sub/b.log'):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text('x\n')
    return tmp_path


def _taken(folder: Path, recursive: bool) -> list[str]:
    return [str(Path(p).relative_to(folder)) for p in records.input_files(
        [str(folder)], lambda name: name.endswith('.log'), recursive, 'perflog', ValueError)]


def test_only_the_wanted_files_under_a_folder_are_taken(tmp_path: Path) -> None:
    assert _taken(_tree(tmp_path), recursive=True) == ['a.log', 'sub/b.log']


def test_subfolders_are_read_only_where_recursive(tmp_path: Path) -> None:
    assert _taken(_tree(tmp_path), recursive=False) == ['a.log']
