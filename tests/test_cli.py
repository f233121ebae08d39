"""The hybridverdict command: table, report files, never overwriting."""

from __future__ import annotations

from hybridverdict.cli import main
from test_perflog import HEADER, line, write


def test_prints_table_and_writes_new_reports(tmp_path, capsys):
    logs = write(tmp_path / 'perflogs/local/shm/SpmvCheck.log', HEADER,
                 line(t=2.0), line(mode='masteronly', ranks=1, threads=2, t=1.0))
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(logs.parent), '--out', str(out)]) == 0
    first = capsys.readouterr().out
    assert 'WIN' in first and 'spmv' in first and '2.000' in first
    assert main(['--perflogs', str(logs.parent), '--out', str(out)]) == 0
    reports = sorted(p.name for p in out.iterdir())
    assert len([p for p in reports if p.endswith('.md')]) == 2, reports
    text = (out / next(p for p in reports if p.endswith('.md'))).read_text()
    assert 'MPICH Version: 4.0.2' in text and '| spmv' in text


def test_no_pairs_is_an_error(tmp_path, capsys):
    logs = write(tmp_path / 'x.log', HEADER, line())
    assert main(['--perflogs', str(logs), '--no-write']) == 1
    assert 'no pure-MPI/hybrid pair' in capsys.readouterr().err


def test_missing_input_is_an_error(tmp_path, capsys):
    assert main(['--perflogs', str(tmp_path / 'none')]) == 2
    assert 'no such perflog' in capsys.readouterr().err


def test_corrupt_lines_are_reported_not_fatal(tmp_path, capsys):
    logs = write(tmp_path / 'x.log', HEADER, line(t=2.0), 'broken|line',
                 line(mode='masteronly', ranks=1, threads=2, t=1.0))
    assert main(['--perflogs', str(logs), '--no-write']) == 0
    assert 'skipped 1 perflog line' in capsys.readouterr().err
