"""The history store: every record ever read, written once, as Parquet parts.

Re-reading every perflog and re-writing the whole history (a year of nightlies at a
big centre: millions of records) into every report does not scale, so the records are
ingested once into a folder of Parquet files (``$HARNESS_VAR_DIR/history``) and read
back with polars' lazy scans, only the columns needed (docs/pages/report.md, "The
history store").  Each ``Store.ingest`` that finds new lines writes one part:
``part-<N>-records.parquet`` (``RECORDS``), ``part-<N>-values.parquet`` (``VALUES``)
and, last, ``part-<N>.json``, which commits it and says where each perflog was read
up to.  Every file is new (``atomic.write_new``): no stored record is ever lost or
rewritten; a part without its JSON (a crash) is ignored, one that cannot be written
(a full disk) removed (``StoreError``).  An ingest holds ``flock`` on
``<store>/.lock`` from reading the latest part to committing its own, so that two at
once store each record once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import io
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence

import polars as pl

from . import tidy
from .atomic import locked, remove_files, write_new
from .perflog import (
    IDENTITY,
    PROVENANCE_FIELDS,
    ReadStats,
    Record,
    Shapes,
    header_shapes,
    identity,
    perflog_files,
    read_file,
)

#: The provenance fields stored as columns of their own (``mpi_library`` and
#: ``build_spec`` are the columns ``library`` and ``build_spec``).  Parts written
#: before a column existed read it as '' (``Store.scan``).
PROVENANCE_COLUMNS = tuple(f for f in PROVENANCE_FIELDS
                           if f not in ('mpi_library', 'build_spec'))
#: Text columns of a record beyond the first ones: provenance and the session.
TEXT_COLUMNS = (*PROVENANCE_COLUMNS, 'session')
#: one row per record
RECORDS: dict[str, pl.DataType] = {
    'rid': pl.Int64(), 'time': pl.Datetime('us', 'UTC'), 'system': pl.String(),
    'partition': pl.String(), 'stack': pl.String(), 'library': pl.String(),
    'kernel': pl.String(), 'mode': pl.String(), 'ranks': pl.Int64(), 'threads': pl.Int64(),
    'size': pl.String(), 'cores': pl.Int64(), 'nodes': pl.Int64(), 'verified': pl.Boolean(),
    'oversubscribed': pl.Boolean(), 'finalize_hung': pl.Boolean(), 'result': pl.String(),
    'name': pl.String(), 'build_spec': pl.String(), 'source': pl.String(),
    **{c: pl.String() for c in TEXT_COLUMNS}}
#: one row per record x performance variable (``vpos``: its position in the record)
VALUES: dict[str, pl.DataType] = {
    'rid': pl.Int64(), 'vpos': pl.Int32(), 'variable': pl.String(), 'value': pl.Float64(),
    'unit': pl.String(), 'ref': pl.Float64(), 'lower': pl.Float64(), 'upper': pl.Float64()}
#: the columns of a record's run fields (``library``: its ``mpi_library``)
_RUN_COLUMNS = [c for c in RECORDS if c != 'rid' and c not in TEXT_COLUMNS]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _micros(t: dt.datetime) -> int:
    return (t - _EPOCH) // dt.timedelta(microseconds=1)


@dataclasses.dataclass
class Frames:
    """Records as two tables: ``records`` (``RECORDS``) and ``values`` (``VALUES``)."""

    records: pl.DataFrame
    values: pl.DataFrame

    def lazy(self) -> tuple[pl.LazyFrame, pl.LazyFrame]:
        return self.records.lazy(), self.values.lazy()


def frames(records: Sequence[Record], first_rid: int = 0) -> Frames:
    """The store tables of `records`, record ids from `first_rid` in their order."""
    runs = pl.DataFrame({
        'rid': range(first_rid, first_rid + len(records)),
        'time': tidy.times(records, _micros),
        **tidy.record_columns(records, list(RECORDS)[2:]),
    }, schema={c: (pl.Int64 if c == 'time' else t) for c, t in RECORDS.items()})
    runs = runs.with_columns(pl.col('time').cast(RECORDS['time']))
    values = tidy.variables(records, first_rid, 'rid', VALUES['rid'])
    return Frames(runs, values.select(list(VALUES)))


def records_from(recs: pl.DataFrame, values: pl.DataFrame) -> list[Record]:
    """The records of store rows, in record id order."""
    per: dict[int, tuple[dict, dict, dict]] = {}
    for rid, _pos, var, value, unit, ref, lower, upper in values.sort(
            ['rid', 'vpos']).select(list(VALUES)).iter_rows():
        vals, units, refs = per.setdefault(rid, ({}, {}, {}))
        vals[var] = value
        units[var] = unit
        if ref:
            refs[var] = (ref, lower, upper)
    out = []
    for row in recs.sort('rid').iter_rows(named=True):
        vals, units, refs = per.get(row['rid'], ({}, {}, {}))
        out.append(Record(**{tidy.ATTRIBUTE.get(c, c): row[c] for c in _RUN_COLUMNS},
                          values=vals, units=units, refs=refs,
                          **{c: row.get(c) or '' for c in TEXT_COLUMNS}))
    return out


# ---- the store -----------------------------------------------------------------------

_PART = re.compile(r'^part-(\d{6,})(-records\.parquet|-values\.parquet|\.json)$')
_KINDS = {'-records.parquet', '-values.parquet', '.json'}
#: the file an ingest locks (``Store.ingest``)
LOCK = '.lock'


class StoreError(Exception):
    """A history store that cannot be read or written."""


@dataclasses.dataclass
class Ingest:
    """What one ``Store.ingest`` did."""

    part: str | None            # the new part's JSON (None: nothing new)
    records: int                # new records stored
    rows: int                   # their values
    reread: list[str]           # perflog files read again from their start (changed)
    bytes_written: int


def _head_digest(path: str) -> str:
    """A digest of the first two lines (the header and the first record, which names its
    check and time: different for two files with the same header)."""
    with open(path, 'rb') as fp:
        first = fp.readline()
        second = fp.readline()
    return hashlib.sha256(first + (second if second.endswith(b'\n') else b'')).hexdigest()


#: The bytes before where a perflog was read up to whose digest a part keeps
#: (``_tail_digest``): a file rewritten in place, longer, with the same first lines
#: (a cut line mended) is read again from its start, not from within a line.
TAIL = 4096


def _tail_digest(path: str, offset: int) -> str:
    """A digest of the (at most ``TAIL``) bytes of `path` before byte `offset`."""
    with open(path, 'rb') as fp:
        fp.seek(max(offset - TAIL, 0))
        return hashlib.sha256(fp.read(min(offset, TAIL))).hexdigest()


class Store:
    """A history store folder (see the module's description)."""

    def __init__(self, directory: str):
        self.directory = directory
        #: the Parquet files found readable, with the columns a scan needs
        self._checked: set[str] = set()

    def _error(self, problem: str) -> StoreError:
        return StoreError(f'history store {self.directory}: {problem}')

    def _numbers(self) -> dict[int, set[str]]:
        found: dict[int, set[str]] = {}
        if os.path.isdir(self.directory):
            for m in filter(None, map(_PART.match, os.listdir(self.directory))):
                found.setdefault(int(m.group(1)), set()).add(m.group(2))
        return found

    # -- reading -------------------------------------------------------------------
    def parts(self) -> list[str]:
        """The base paths (``<dir>/part-<N>``) of the committed parts, in order;
        StoreError where a committed part (its JSON, written last) lacks a Parquet
        file: its records are gone, not to be left out silently."""
        found = []
        for n, kinds in sorted(self._numbers().items()):
            base = os.path.join(self.directory, f'part-{n:06d}')
            if '.json' not in kinds:
                continue            # a crash before its commit: ignored
            missing = sorted(_KINDS - kinds)
            if missing:
                raise self._error(f'part {n} is committed ({base}.json) but '
                                  f'{base}{missing[0]} is missing: its records cannot be read')
            found.append(base)
        return found

    def state(self) -> dict:
        """The latest committed part's description (empty store: no files, rid 0)."""
        parts = self.parts()
        if not parts:
            return {'files': {}, 'next_rid': 0, 'total_records': 0}
        path = parts[-1] + '.json'
        try:
            with open(path, encoding='utf-8') as fp:
                state = json.load(fp)
        except (OSError, ValueError) as err:
            raise self._error(f'cannot read {path}: {err}') from err
        problem = _bad_state(state)
        if problem:
            raise self._error(f'{path} is not a part description: {problem}')
        return state

    def _check(self, parts: list[str]) -> None:
        """StoreError naming the first Parquet file of `parts` that cannot be read
        (not Parquet, truncated) or lacks a column a scan needs."""
        for base in parts:
            for kind, needed in (('records', _NEEDED_RECORDS), ('values', list(VALUES))):
                path = f'{base}-{kind}.parquet'
                if path in self._checked:
                    continue
                try:
                    columns = pl.read_parquet_schema(path)
                except (OSError, pl.exceptions.PolarsError) as err:
                    raise self._error(f'cannot read {path}: {err}') from err
                missing = [c for c in needed if c not in columns]
                if missing:
                    raise self._error(f'{path} lacks the column(s) {", ".join(missing)}')
                self._checked.add(path)

    def _collect(self, frame: pl.LazyFrame) -> pl.DataFrame:
        """`frame` collected; StoreError where a part cannot be read after all."""
        try:
            return frame.collect()
        except (OSError, pl.exceptions.PolarsError) as err:
            raise self._error(f'cannot read its parts: {err}') from err

    def scan(self) -> tuple[pl.LazyFrame, pl.LazyFrame]:
        """Every stored record and value, lazily (records, values)."""
        parts = self.parts()
        if not parts:
            return pl.DataFrame(schema=RECORDS).lazy(), pl.DataFrame(schema=VALUES).lazy()
        self._check(parts)
        # a part written before a provenance column existed lacks it: read as ''
        records = pl.scan_parquet([p + '-records.parquet' for p in parts], schema=RECORDS,
                                  missing_columns='insert')
        return (records.with_columns(pl.col(list(TEXT_COLUMNS)).fill_null('')),
                pl.scan_parquet([p + '-values.parquet' for p in parts], schema=VALUES))

    def records(self, since: dt.datetime | None = None) -> list[Record]:
        """The stored records completed at or after `since` (all if None)."""
        recs, values = self.scan()
        if since is not None:
            recs = recs.filter(pl.col('time') >= since)
        window = self._collect(recs)
        first = window.get_column('rid').min() if window.height else 0
        vals = self._collect(values.filter(pl.col('rid') >= first).join(
            window.lazy().select('rid'), on='rid', how='semi'))
        return records_from(window, vals)

    # -- writing -------------------------------------------------------------------
    def ingest(self, paths: Iterable[str], stats: ReadStats | None = None) -> Ingest:
        """Store the records of the perflogs under `paths` not stored yet.

        Files seen before are parsed only from where the last ingest stopped (the
        end of their last complete line).  Returns what was stored; the counts of
        lines read and skipped go to `stats`.
        """
        stats = stats if stats is not None else ReadStats()
        files = perflog_files(paths, stats)     # before the folder: PerflogError if none
        if not files:
            return Ingest(None, 0, 0, [], 0)
        with self._locked():
            return self._ingest(files, stats)

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """An exclusive lock on the store (``LOCK`` in its folder: ``atomic.locked``):
        another ingest waits for it; a read-only store without one goes on without it
        (a part due fails with its own error)."""
        return locked(self.directory, LOCK,
                      lambda path, err: self._error(f'cannot lock {path}: {err}'))

    def _ingest(self, files: list[str], stats: ReadStats) -> Ingest:
        """``ingest`` of the perflog `files`, the store locked."""
        state = self.state()
        # every file's header: a failed first record is read by the other headers of
        # its check, as ``read_perflogs`` reads it
        shapes = header_shapes(files)
        seen: dict[str, dict] = dict(state.get('files', {}))
        new: list[Record] = []
        reread: list[str] = []
        updated: dict[str, dict] = {}
        # a file ReFrame renamed (<name>.log -> <name>.log.h<N> when its header changed)
        # keeps its inode and first lines: it goes on from where it was read, the
        # furthest of its names (it only grows while its inode and head stay)
        by_identity: dict[tuple, dict] = {}
        for entry in seen.values():
            ident = (entry.get('inode'), entry.get('head'))
            known = by_identity.get(ident)
            if known is None or entry.get('offset', 0) > known.get('offset', 0):
                by_identity[ident] = entry
        # the records of this batch (``identity``): a file read from its start (a copy
        # of another given too) adds only those neither stored nor read before in it
        batch: set[tuple] = set()
        for path in files:
            # one name per file: a perflog folder reached through a link too (a
            # HARNESS_VAR_DIR of /home/... -> /gpfs/...) was read again from
            # where the other name stopped
            key = os.path.realpath(path)
            st = os.stat(path)
            head = _head_digest(path)
            prev = seen.get(key)
            same = by_identity.get((st.st_ino, head))
            if same is not None and (prev is None or prev.get('inode') != st.st_ino
                                     or same.get('offset', 0) > prev.get('offset', 0)):
                prev = same
            start = lines = 0
            if prev is not None:
                if _only_grown(path, st, head, prev):
                    start, lines = prev['offset'], prev['lines']
                else:
                    reread.append(key)
            if start == st.st_size:
                continue
            recs, end, count = _read_from(path, start, lines, stats, shapes)
            if end == start:  # only a line still being written: nothing to store yet
                continue
            if start == 0:
                recs = [r for r in recs if identity(r) not in batch]
                if state.get('total_records'):
                    recs = self._unstored(recs)  # a copied, rewritten or moved perflog
            batch.update(map(identity, recs))
            new += recs
            updated[key] = {'offset': end, 'lines': count, 'inode': st.st_ino, 'head': head,
                            'tail': _tail_digest(path, end)}
        if not updated:
            return Ingest(None, 0, 0, reread, 0)
        os.makedirs(self.directory, exist_ok=True)
        number = max(self._numbers(), default=0) + 1
        base = os.path.join(self.directory, f'part-{number:06d}')
        rid = int(state.get('next_rid', 0))
        tables = frames(new, first_rid=rid)
        description = {
            'part': number, 'created': dt.datetime.now(dt.timezone.utc).isoformat(),
            'records': len(new), 'values': tables.values.height, 'first_rid': rid,
            'next_rid': rid + len(new),
            'total_records': int(state.get('total_records', 0)) + len(new),
            'files': seen | updated}
        self._write_part(number, base, tables, description)
        size = sum(os.path.getsize(base + k) for k in _KINDS)
        return Ingest(base + '.json', len(new), tables.values.height, reread, size)

    def _write_part(self, number: int, base: str, tables: Frames, description: dict) -> None:
        """Part `number`'s files, its JSON `description` last (which commits it); none
        of them where one cannot be written (StoreError)."""
        written: list[str] = []
        try:
            for kind, df in (('records', tables.records), ('values', tables.values)):
                written.append(write_new(
                    f'{base}-{kind}.parquet',
                    lambda fp, df=df: df.write_parquet(fp, compression='zstd')))
            written.append(write_new(base + '.json', json.dumps(description, indent=0)))
        except FileExistsError as err:
            remove_files(written)
            raise self._error(f'part {number} appeared meanwhile (another ingest '
                              'running?)') from err
        except (OSError, pl.exceptions.PolarsError) as err:
            # a full disk: the store stays as it was, without this part's files
            remove_files(written)
            raise self._error(f'cannot write part {number}: '
                              f'{" ".join(str(err).split())}') from err

    def _unstored(self, recs: list[Record]) -> list[Record]:
        """The records of a re-read file that the store does not hold yet."""
        if not recs:
            return recs
        stored = set(self._collect(
            self.scan()[0].filter(pl.col('time') >= min(r.time for r in recs))
            .select(IDENTITY).unique()).iter_rows())
        return [r for r in recs if identity(r) not in stored]


_NEEDED_RECORDS = [c for c in RECORDS if c not in TEXT_COLUMNS]


def _only_grown(path: str, st: os.stat_result, head: str, prev: dict) -> bool:
    """Whether the perflog `path` (``os.stat`` `st`, first lines' digest `head`) is the
    file a part read up to ``prev['offset']``, only grown since: the same inode and
    first lines, and the same bytes before that offset (a part written before the
    tail's digest was kept has none: not checked)."""
    offset = prev.get('offset', 0)
    return (prev.get('inode') == st.st_ino and prev.get('head') == head
            and st.st_size >= offset
            and prev.get('tail', '') in ('', _tail_digest(path, offset)))


def _bad_state(state: object) -> str:
    """What is wrong with a part's JSON description ('' if nothing)."""
    if not isinstance(state, dict):
        return f'a JSON {type(state).__name__}, not an object'
    files = state.get('files', {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        return '"files" is not an object of objects'
    for key in ('next_rid', 'total_records'):
        if not _count(state.get(key, 0)):
            return f'"{key}" is not a whole number: {state.get(key)!r}'
    for path, entry in files.items():
        for key in ('offset', 'lines', 'inode'):
            if not _count(entry.get(key)):
                return f'"files" {path}: "{key}" is not a whole number: {entry.get(key)!r}'
        for key, default in (('head', None), ('tail', '')):
            if not isinstance(entry.get(key, default), str):
                return f'"files" {path}: "{key}" is not a text: {entry.get(key)!r}'
    return ''


def _count(value: object) -> bool:
    """Whether `value` is a whole number of 0 or more (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_chunk(header: bytes, chunk: bytes, stats: ReadStats, source: str,
                 shift: int, shapes: Shapes) -> list[Record]:
    """Records of `chunk` (complete lines of the perflog `source`) read under
    `header`, their sources '<source>:<line + shift>'."""
    fd, tmp = tempfile.mkstemp(prefix='.ingest-', suffix='.log')
    try:
        with os.fdopen(fd, 'wb') as fp:
            fp.write(header)
            fp.write(chunk)
        return list(read_file(tmp, stats, shapes, source=source, shift=shift))
    finally:
        os.unlink(tmp)


def _count_lines(fp: io.BufferedReader, size: int) -> int:
    """The line ends in the first `size` bytes of `fp` (fewer where it was cut
    meanwhile), read block by block."""
    fp.seek(0)
    count = 0
    while block := fp.read(min(1 << 22, size - fp.tell())):
        count += block.count(b'\n')
    return count


#: a perflog ReFrame renamed when its header changed: it writes to it no more
_ROTATED = re.compile(r'\.log\.h\d+$')


def _read_from(path: str, start: int, lines: int, stats: ReadStats, shapes: Shapes
               ) -> tuple[list[Record], int, int]:
    """The records of `path` from byte `start` (after `lines` lines) to its last complete
    line; (records, end offset, lines up to it).  A partial last line (being written)
    is left for the next ingest, but in a perflog ReFrame renamed (``<name>.log.h<N>``,
    to which it writes no more) it is read: a truncated one skipped with a count,
    not left unread, silently, for ever.  The lines appended while it reads are left
    for the next ingest: only the bytes up to the size first measured are read."""
    final = bool(_ROTATED.search(path))
    with open(path, 'rb') as fp:
        size = fp.seek(0, os.SEEK_END)
        if start == 0 and size:
            fp.seek(size - 1)
            complete = fp.read(1) == b'\n'
            if complete or final:
                # the whole file: read in place up to `size` (a final partial line
                # counted as a line)
                count = _count_lines(fp, size) + (not complete)
                return list(read_file(path, stats, shapes, limit=size)), size, count
        fp.seek(0)
        header = fp.readline() if start else b''
        fp.seek(start)
        chunk = fp.read(max(size - start, 0))
    end = len(chunk) if final else chunk.rfind(b'\n') + 1
    if end == 0:
        return [], start, lines
    count = lines + chunk.count(b'\n', 0, end) + (final and not chunk.endswith(b'\n'))
    # appended lines (or a file whose last line is still being written): parsed under
    # the file's header, their line numbers and source those of `path`
    shift = lines - (1 if header else 0)
    return (_parse_chunk(header, chunk[:end], stats, path, shift, shapes), start + end,
            count)
