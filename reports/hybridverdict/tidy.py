"""The tidy table: one row per record x performance variable, for other tools.

Columns (``COLUMNS``, docs/pages/report.md): where and how the run ran, when, the
variable with its value, unit and reference as ReFrame logs them, the result, and
what tells a run's figures fit for comparison or not (verified, oversubscribed),
its build and its session.
Written as Parquet (zstd; the report's description in the file's metadata under
``hybridverdict``), and on request as CSV and JSON, each a new file written
atomically (``atomic.write_new``).
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO

import polars as pl

from .atomic import write_new
from .records import Record

#: the columns and their types
_SCHEMA = {'system': pl.String, 'partition': pl.String, 'stack': pl.String,
           'library': pl.String, 'kernel': pl.String, 'mode': pl.String, 'ranks': pl.Int64,
           'threads': pl.Int64, 'size': pl.String, 'nodes': pl.Int64, 'time': pl.String,
           'variable': pl.String, 'value': pl.Float64, 'unit': pl.String, 'ref': pl.Float64,
           'lower': pl.Float64, 'upper': pl.Float64, 'result': pl.String,
           'verified': pl.Boolean, 'oversubscribed': pl.Boolean, 'build_spec': pl.String,
           'session': pl.String}
COLUMNS = tuple(_SCHEMA)
#: the run's columns that are its record's fields (``time``: as text)
_RUN_FIELDS = COLUMNS[:10] + COLUMNS[COLUMNS.index('result'):]


#: the record attribute of a column named otherwise
ATTRIBUTE = {'library': 'mpi_library'}


def record_columns(records: Sequence[Record], columns: Iterable[str]) -> dict[str, list]:
    """Column -> its value in each record, for a data frame (``library``: the
    MPI library; every other column a record attribute of its name)."""
    return {c: list(map(operator.attrgetter(ATTRIBUTE.get(c, c)), records)) for c in columns}


def times(records: Sequence[Record], form: Callable) -> list:
    """form(time) of each record (each time formed once)."""
    formed = {t: form(t) for t in dict.fromkeys(r.time for r in records)}
    return [formed[r.time] for r in records]


def variables(records: Sequence[Record], first: int = 0, key: str = 'i',
              key_type: pl.DataType | type[pl.DataType] = pl.UInt32) -> pl.DataFrame:
    """One row per record x performance variable, in record then variable
    order: the record (`key`: its position, from `first`), the variable's
    position in it (``vpos``), the variable, value, unit and reference
    (``ref``, ``lower``, ``upper``; null where it has none)."""
    # a record's units have the keys of its values, in the same order (both readers
    # build them so); if not, look each unit up (key views compare as sets: lists)
    if all(list(r.units) == list(r.values) for r in records):
        units = [u for r in records for u in r.units.values()]
    else:
        units = [r.units.get(v, '') for r in records for v in r.values]
    frame = pl.DataFrame({
        key: [first + i for i, r in enumerate(records) for _ in r.values],
        'vpos': [j for r in records for j in range(len(r.values))],
        'variable': [v for r in records for v in r.values],
        'value': [x for r in records for x in r.values.values()],
        'unit': units,
    }, schema={key: key_type, 'vpos': pl.Int32} | {
        c: _SCHEMA[c] for c in ('variable', 'value', 'unit')})
    # references: few per record, joined onto their rows
    refs = [(first + i, v, *t) for i, r in enumerate(records) if r.refs
            for v, t in r.refs.items()]
    ref_frame = pl.DataFrame(refs, schema={key: key_type} | {
        c: _SCHEMA[c] for c in ('variable', 'ref', 'lower', 'upper')}, orient='row')
    return frame.join(ref_frame, on=[key, 'variable'], how='left', maintain_order='left')


def table(records: Sequence[Record]) -> pl.DataFrame:
    """The tidy table of `records` (run order, then variable order)."""
    runs = pl.DataFrame({
        **record_columns(records, _RUN_FIELDS),
        'time': times(records, lambda t: t.isoformat()),
    }, schema={c: _SCHEMA[c] for c in (*_RUN_FIELDS, 'time')})
    values = variables(records)
    runs = runs[values.get_column('i')] if values.height else runs.clear()
    return runs.hstack(values.drop('i', 'vpos')).select(COLUMNS)


#: the Parquet metadata key holding the report's description (JSON)
PARQUET_META_KEY = 'hybridverdict'


def write_parquet(df: pl.DataFrame, path: str, meta: dict) -> None:
    """A new Parquet file (fails if `path` exists); `meta` as JSON in its metadata."""
    text = json.dumps(meta, default=str)
    write_new(path, lambda fp: df.write_parquet(fp, compression='zstd',
                                                metadata={PARQUET_META_KEY: text}))


def read_meta(path: str) -> dict:
    """The report description stored in a tidy Parquet file."""
    return json.loads(pl.read_parquet_metadata(path)[PARQUET_META_KEY])


def write_csv(df: pl.DataFrame, path: str) -> None:
    """A new CSV file (fails if `path` exists)."""
    write_new(path, lambda fp: df.write_csv(fp))


#: characters a JSON string must escape (UTF-8 text needs none)
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'


def _json_cells(df: pl.DataFrame, escape: bool = False) -> pl.DataFrame:
    """`df`'s cells as the text of JSON values: strings quoted (where `escape`,
    as ``json.dumps`` writes them; else as they are, for strings that need no
    escaping: ``_plain``), booleans ``true``/``false`` (polars' CSV writer
    quotes them as it quotes strings), NaN and infinities (which JSON lacks)
    null; a null stays null."""
    def cell(c: str, t: pl.DataType) -> pl.Expr:
        col = pl.col(c)
        if t == pl.String and escape:
            uniques = df.get_column(c).drop_nulls().unique().to_list()
            return col.replace_strict({u: json.dumps(u) for u in uniques}, default=None,
                                      return_dtype=pl.String)
        if t == pl.String:
            return pl.concat_str([pl.lit('"'), col, pl.lit('"')])
        if t.is_float():
            return pl.when(col.is_finite()).then(col)
        return col.cast(pl.String) if t == pl.Boolean else col
    return df.select(cell(c, t).alias(c) for c, t in df.schema.items())


_SEP = '],\n  ['


def _plain(df: pl.DataFrame) -> bool:
    """No string in `df` needs escaping in JSON."""
    return all(not df.get_column(c).str.contains(_NEEDS_ESCAPE).any()
               for c, t in df.schema.items() if t == pl.String)


def _json_rows(df: pl.DataFrame) -> str:
    """The rows as JSON arrays separated by _SEP, without the outer brackets (slow path)."""
    cells = [pl.col(c).cast(pl.String).fill_null('null') for c in df.columns]
    return (_json_cells(df, escape=True).select(pl.concat_str(cells, separator=','))
            .to_series().str.join(_SEP).item())


def write_json(df: pl.DataFrame, path: str, meta: dict) -> None:
    """A new JSON file ``{"meta": {...}, "columns": [...], "data": [[row], ...]}``.

    Rows are arrays in the order of ``columns`` (pandas:
    ``DataFrame(j["data"], columns=j["columns"])``; polars:
    ``pl.DataFrame(j["data"], schema=j["columns"], orient="row")``); non-finite
    values are null.
    """
    head = ('{"meta": ' + json.dumps(meta, default=str) + ',\n "columns": '
            + json.dumps(list(df.columns)) + ',\n "data": [\n  ')

    def fill(fp: BinaryIO) -> None:
        fp.write(head.encode())
        if df.height and _plain(df):
            # nothing to escape: polars' CSV writer, of cells that are JSON values,
            # writes JSON arrays straight into the file; the separator after the
            # last row is cut
            fp.write(b'[')
            _json_cells(df).write_csv(fp, include_header=False, quote_style='never',
                                      null_value='null', line_terminator=_SEP)
            fp.seek(-len(_SEP), os.SEEK_END)
            fp.truncate()
            fp.write(b']')
        elif df.height:
            fp.write(('[' + _json_rows(df) + ']').encode())
        fp.write(b'\n]}\n')
    write_new(path, fill)
