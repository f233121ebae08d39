"""The tidy table and its CSV and JSON files."""

from __future__ import annotations

import csv
import dataclasses
import json
import os

import polars as pl
import pytest
from hybridverdict import tidy
from hybridverdict.perflog import read_perflogs
from perflog_writer import write_runs

EXPECTED = ['system', 'partition', 'stack', 'library', 'kernel', 'mode', 'ranks', 'threads',
            'size', 'nodes', 'time', 'variable', 'value', 'unit', 'ref', 'lower', 'upper',
            'result', 'verified', 'oversubscribed', 'build_spec', 'session']


@pytest.fixture
def records(tmp_path):
    write_runs(tmp_path / 'logs/Spmv.log', 'spmv', [
        {'fom': (2.5, 'GFLOP/s', 2.0, -0.1, None), 't_total': (1.25, 's')},
        {'fom': (2.4, 'GFLOP/s', 2.0, -0.1, None), 't_total': (1.5, 's')}], size='16')
    write_runs(tmp_path / 'logs/Osu.log', 'osu_latency',
               [{'lat_8': (0.5, 'us'), 'lat_1024': (0.9, 'us'), 'latency_8B': (0.5, 'us')}],
               stack='openmpi', part='tcp', oversubscribed=True)
    return read_perflogs([str(tmp_path / 'logs')])


def test_one_row_per_record_and_variable(records):
    df = tidy.table(records)
    assert df.columns == EXPECTED
    assert df.height == 2 * 2 + 3
    fom = df.filter(pl.col('variable') == 'fom').row(0, named=True)
    assert fom | {'time': None} == {
        'system': 'local', 'partition': 'shm', 'stack': 'mpich',
        'library': 'MPICH Version: 4.0.2', 'kernel': 'spmv', 'mode': 'mpi', 'ranks': 2,
        'threads': 1, 'size': '16', 'nodes': 1, 'time': None, 'variable': 'fom',
        'value': 2.5, 'unit': 'GFLOP/s', 'ref': 2.0, 'lower': -0.1, 'upper': None,
        'result': 'pass', 'verified': True, 'oversubscribed': False,
        'build_spec': 'cmake Release mpich', 'session': ''}
    assert fom['time'].startswith('2026-11-22T10:00:00')
    lat = df.filter(pl.col('variable') == 'lat_1024').row(0, named=True)
    assert (lat['stack'], lat['value'], lat['unit'], lat['ref']) == ('openmpi', 0.9, 'us', None)
    # what keeps a run out of a verdict, for a tool that reads the table: it
    # was not in it
    assert lat['oversubscribed'] is True and lat['verified'] is True


def test_empty_table_has_the_columns():
    assert tidy.table([]).columns == EXPECTED


def test_csv_and_json_files(records, tmp_path):
    df = tidy.table(records)
    tidy.write_csv(df, str(tmp_path / 't.csv'))
    tidy.write_json(df, str(tmp_path / 't.json'), {'systems': ['local']})
    with open(tmp_path / 't.csv', newline='') as fp:
        rows = list(csv.DictReader(fp))
    assert list(rows[0]) == EXPECTED and len(rows) == df.height
    fom = next(r for r in rows if r['variable'] == 'fom')
    assert (float(fom['value']), fom['ref'], fom['upper']) == (2.5, '2.0', '')
    j = json.loads((tmp_path / 't.json').read_text())
    assert j['meta'] == {'systems': ['local']} and j['columns'] == EXPECTED
    back = pl.DataFrame(j['data'], schema=df.schema, orient='row')
    assert back.equals(df)


def test_json_escapes_strings_and_nulls_non_finite(tmp_path):
    df = pl.DataFrame({'library': ['say "hi"\\ \x01', 'plain'], 'value': [float('nan'), 1.0]})
    tidy.write_json(df, str(tmp_path / 'e.json'), {})
    j = json.loads((tmp_path / 'e.json').read_text())
    assert j['data'] == [['say "hi"\\ \x01', None], ['plain', 1.0]]


def test_files_are_never_overwritten(records, tmp_path):
    df = tidy.table(records)
    for name in ('a.csv', 'a.json'):
        (tmp_path / name).write_text('old')
    with pytest.raises(FileExistsError):
        tidy.write_csv(df, str(tmp_path / 'a.csv'))
    with pytest.raises(FileExistsError):
        tidy.write_json(df, str(tmp_path / 'a.json'), {})
    assert (tmp_path / 'a.csv').read_text() == 'old' == (tmp_path / 'a.json').read_text()


def test_rows_follow_records_then_variables(records):
    df = tidy.table(records)
    want = [(r.kernel, v, x, r.refs.get(v, (None,))[0]) for r in records
            for v, x in r.values.items()]
    assert list(zip(df['kernel'], df['variable'], df['value'], df['ref'])) == want


def test_parquet_round_trip_with_meta(records, tmp_path):
    df = tidy.table(records)
    path = str(tmp_path / 't.parquet')
    tidy.write_parquet(df, path, {'systems': ['local'], 'rows': df.height})
    assert pl.read_parquet(path).equals(df)
    assert tidy.read_meta(path) == {'systems': ['local'], 'rows': df.height}
    with pytest.raises(FileExistsError):
        tidy.write_parquet(df, path, {})
    assert pl.read_parquet(path).equals(df)


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    from hybridverdict.atomic import write_new

    def half(fp):
        fp.write(b'half a file')
        raise OSError('disk full')
    with pytest.raises(OSError, match='disk full'):
        write_new(str(tmp_path / 'r.md'), half)
    assert list(tmp_path.iterdir()) == []                  # no partial file, no temp file
    write_new(str(tmp_path / 'r.md'), 'whole')
    with pytest.raises(FileExistsError):
        write_new(str(tmp_path / 'r.md'), 'other')
    assert [p.name for p in tmp_path.iterdir()] == ['r.md']
    assert (tmp_path / 'r.md').read_text() == 'whole'


def test_atomic_files_get_the_mode_open_would_give(tmp_path):
    # the temporary file is private (mkstemp); the written file is not
    from hybridverdict.atomic import write_new
    old = os.umask(0o022)
    try:
        path = write_new(str(tmp_path / 'report.md'), 'text\n')
    finally:
        os.umask(old)
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)


def test_a_failed_run_is_a_failed_row(tmp_path):
    write_runs(tmp_path / 'logs/Spmv.log', 'spmv', [{'fom': (2.5, 'GFLOP/s')}], result='fail')
    df = tidy.table(read_perflogs([str(tmp_path / 'logs')]))
    assert df['result'].to_list() == ['fail']


def test_json_of_no_rows_is_json(tmp_path):
    tidy.write_json(tidy.table([]), str(tmp_path / 'e.json'), {'rows': 0})
    j = json.loads((tmp_path / 'e.json').read_text())
    assert (j['meta'], j['columns'], j['data']) == ({'rows': 0}, EXPECTED, [])


def test_json_nulls_non_finite_values_and_escapes_control_characters_of_plain_tables(tmp_path):
    df = pl.DataFrame({'library': ['MPICH\tVersion:\n4.0.2', 'plain', 'plain'],
                       'value': [float('nan'), float('inf'), 1.0]})
    tidy.write_json(df, str(tmp_path / 'e.json'), {})
    j = json.loads((tmp_path / 'e.json').read_text())      # strict: no raw control character
    assert j['data'] == [['MPICH\tVersion:\n4.0.2', None], ['plain', None], ['plain', 1.0]]
    tidy.write_json(df[1:], str(tmp_path / 'f.json'), {})  # nothing to escape
    assert json.loads((tmp_path / 'f.json').read_text())['data'] == [['plain', None],
                                                                    ['plain', 1.0]]


def test_each_row_has_its_own_variables_unit_whatever_the_order_of_the_units(tmp_path):
    write_runs(tmp_path / 'logs/Spmv.log', 'spmv',
               [{'fom': (2.5, 'GFLOP/s'), 't_total': (1.25, 's')}])
    (rec,) = read_perflogs([str(tmp_path / 'logs')])
    # the same units, in another order than the values (no reader makes one today)
    rec = dataclasses.replace(rec, units={'t_total': 's', 'fom': 'GFLOP/s'})
    assert tidy.table([rec])['unit'].to_list() == ['GFLOP/s', 's']
