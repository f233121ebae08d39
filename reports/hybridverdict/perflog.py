"""Read the perflogs that ReFrame's ``filelog`` handler writes for the harness.

Each file starts with a header line naming the '|'-separated fields (the
``format`` of ``config/settings.py``); a file whose header changed was renamed by
ReFrame to ``<name>.log.h<N>`` and is read too.  A line is its run fields, then one
block of five fields per performance variable.  A line of another width than its
header is read by its own shape where a failed first record explains it
(``_reshaped``); other lines that do not fit (truncated, corrupt) are skipped and
counted, the first named in the warning.  A line ends at '\n' (or '\r\n') only.
A test case ReFrame retried (``--max-retries``) counts by its last try, as in its
run report (``runreport``): a failed line that a later line of the same case and
session replaced is left out (``last_tries``).  Files are only read, never modified.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import operator
import os
import re
from collections.abc import Iterable, Iterator
from typing import IO

from harnesscore.schema import KNOWN, PERFVAR_PARTS, header_fields

from .records import (
    FIELDS,
    IDENTITY,
    NO_KERNEL,
    PROVENANCE_FIELDS,
    UNPARSABLE,
    ReadStats,
    Record,
    Ref,
    from_fields,
    has_control,
    identity,
    input_files,
    number,
    parse_time,
    printable,
    provenance,
    reference,
    same_line,
    size_key,
)

#: fields per performance variable
PARTS = len(PERFVAR_PARTS)
#: the names of perflog files (a header changed: ``<name>.log.h<N>``)
_LOG = re.compile(r'\.log(\.h\d+)?$')


class PerflogError(Exception):
    """A perflog path that cannot be read at all, or a record that cannot be
    read without guessing (the message names the file and line)."""


def perflog_files(paths: Iterable[str], stats: ReadStats | None = None) -> list[str]:
    """The perflog files under the given files or directories, sorted, each once;
    what is not a regular file under them goes to `stats` (``input_files``)."""
    return input_files(paths, lambda name: bool(_LOG.search(name)), True, 'perflog',
                       PerflogError, stats)


def _getter(indices: list[int]):
    """fields -> tuple of the fields at `indices` (at C speed)."""
    if len(indices) == 1:
        i = indices[0]
        return lambda fields: (fields[i],)
    if not indices:
        return lambda fields: ()
    return operator.itemgetter(*indices)


class _Header:
    """A header line compiled once: where each field and variable sits (a field
    the header lacks reads the empty string appended after the line's fields)."""

    def __init__(self, fields: list[str], stats: ReadStats):
        #: the names, without the empty field after a trailing '|'
        self.fields = list(fields[:-1] if fields and fields[-1] == '' else fields)
        self.width = len(fields)
        index = {name: i for i, name in enumerate(fields)}
        self.kernel = index.get('kernel')
        # the run fields' texts in records.FIELDS order; -1 = absent (reads the appended '')
        self.get_run = _getter([index.get(name, -1) for name in FIELDS])
        # variables: name -> indices of value, unit, ref, lower, upper (-1 if absent)
        self.variables: list[tuple[str, int, int, int, int, int]] = []
        claimed: set[int] = set()
        for i, name in enumerate(fields):
            if name.endswith('_value'):
                var = name[:-len('_value')]
                parts = [index.get(f'{var}_{p}', -1) for p in PERFVAR_PARTS[1:]]
                self.variables.append((var, i, *parts))
                claimed.update((i, *parts))
        self.names = tuple(v[0] for v in self.variables)
        #: run fields before the first variable's block (the line's own shape)
        first = min((v[1] for v in self.variables), default=len(self.fields))
        self.run_width = first if len(self.fields) - first == PARTS * len(self.variables) \
            else -1
        self.get_values = _getter([v[1] for v in self.variables])
        self.get_units = _getter([v[2] for v in self.variables])
        self.get_refs = _getter([v[3] for v in self.variables])
        #: unit tuples seen -> one dict shared by the records that have them
        self.unit_dicts: dict[tuple[str, ...], dict[str, str]] = {}
        for i, name in enumerate(fields):
            if i not in claimed and name not in KNOWN and name:
                stats.unknown_fields[name] = stats.unknown_fields.get(name, 0) + 1

    def _refs(self, fields: list[str]) -> dict[str, Ref]:
        refs: dict[str, Ref] = {}
        for var, _iv, _iu, ir, il, ih in self.variables:
            ref = None if fields[ir] in _NO_REF else reference(fields[ir], fields[il], fields[ih])
            if ref:
                refs[var] = ref
        return refs

    def parse(self, fields: list[str], source: str) -> Record:
        fields.append('')
        # fast path: every value a number, the units as in an earlier line (one shared
        # dict), no reference; otherwise variable by variable
        try:
            values = dict(zip(self.names, map(float, self.get_values(fields))))
        except ValueError:
            values = {}
        if len(values) == len(self.names):
            unit_key = self.get_units(fields)
            units = self.unit_dicts.get(unit_key)
            if units is None:
                units = self.unit_dicts[unit_key] = dict(zip(self.names, unit_key))
            refs = {} if _NO_REF.issuperset(self.get_refs(fields)) else self._refs(fields)
        else:
            values, units = {}, {}
            for var, iv, iu, _ir, _il, _ih in self.variables:
                value = number(fields[iv])
                if value is not None:
                    values[var] = value
                    units[var] = fields[iu]
            refs = {k: v for k, v in self._refs(fields).items() if k in values}
        return from_fields(self.get_run(fields), values, units, refs, source)


#: The texts of a reference that is none (the fast path's test).
_NO_REF = frozenset(('0', 'None', 'null', '', '0.0'))


#: check (file name without .log/.h<N>) -> number of variables -> variable
#: block names of the headers that have that many
Shapes = dict[str, dict[int, set[tuple[str, ...]]]]


def _check_of(path: str) -> str:
    return _LOG.sub('', os.path.basename(path))


def _add_shape(shapes: Shapes, path: str, header: _Header) -> None:
    if header.run_width >= 0:
        block = tuple(header.fields[header.run_width:])
        shapes.setdefault(_check_of(path), {}).setdefault(
            len(header.variables), set()).add(block)


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """An OSError in its body names `path` (a failed read, EIO, names no file)."""
    try:
        yield
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror, path) from err
        raise


def header_shapes(files: Iterable[str]) -> Shapes:
    """The variable blocks of the headers of `files`, per check (first lines only)."""
    shapes: Shapes = {}
    for path in files:
        with _naming(path), _open_text(path, None) as fp:
            first = printable(_strip_newline(fp.readline())).split('|')
        if first[0] == 'job_completion_time':
            _add_shape(shapes, path, _Header(first, ReadStats()))
    return shapes


def _reshaped(header: _Header, fields: list[str], path: str, lineno: int,
              shapes: Shapes, cache: dict) -> _Header | None:
    """The header that reads a line of another width than its own, in the two
    shapes a failed first record leaves: a line without variables under a header
    with some, and one with k blocks under a header without variables, named by
    the one header of the same check with k variables.  None: no such shape
    (truncated or corrupt).  PerflogError: blocks no header names unambiguously
    (rather fail, naming the line, than guess or lose a valid record)."""
    if header.run_width < 0:
        return None
    extra = len(fields) - header.run_width
    if extra < 0 or extra % PARTS:
        return None
    k = extra // PARTS
    if k and header.variables:
        # Neither shape a failed first record leaves: a truncated line.
        return None
    if k == 0:
        block: tuple[str, ...] = ()
    else:
        blocks = shapes.get(_check_of(path), {}).get(k, set())
        if len(blocks) != 1:
            raise PerflogError(
                f'{path}:{lineno}: a record with {k} performance variable(s) under a '
                f'header with {len(header.variables)}, and '
                + (f'{len(blocks)} different headers of {_check_of(path)} with {k}'
                   if blocks else f'no header of {_check_of(path)} with {k}')
                + ' to name them: the record cannot be read without guessing; move '
                  'this file aside, or split it at this line and add the header')
        (block,) = blocks
    key = (id(header), block)
    if key not in cache:
        # the file's header counted its unknown fields already
        cache[key] = _Header(header.fields[:header.run_width] + list(block), ReadStats())
    return cache[key]


def _strip_newline(line: str) -> str:
    """`line` without its line end ('\n' or '\r\n')."""
    return line[:-2] if line.endswith('\r\n') else line.rstrip('\n')


class _Bounded(io.RawIOBase):
    """The first `limit` bytes of a binary file (lines appended later are not read)."""

    def __init__(self, raw: IO[bytes], limit: int):
        super().__init__()
        self._raw = raw
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast('B')[:self._left]
        n = self._raw.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open_text(path: str, limit: int | None) -> IO[str]:
    """`path` as text up to byte `limit`, lines ending at '\n' only (a lone '\r' is
    in a field)."""
    if limit is None:
        return open(path, encoding='utf-8', errors='replace', newline='\n')
    raw = io.BufferedReader(_Bounded(open(path, 'rb', buffering=0), limit), 1 << 20)
    return io.TextIOWrapper(raw, encoding='utf-8', errors='replace', newline='\n')


def _lines(path: str, limit: int | None) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line of `path` up to byte `limit`."""
    with _naming(path), _open_text(path, limit) as fp:
        for lineno, line in enumerate(fp, 1):
            line = _strip_newline(line)
            if line.startswith('\0'):
                # NULs at a line's start are what a crash leaves of the lines it lost
                # (the file's size kept, not their data), and ReFrame appends its next
                # record after them: the NULs one corrupt line, the record read
                rest = line.lstrip('\0')
                if rest.strip():
                    yield lineno, [printable(line[:len(line) - len(rest)])]
                    line = rest
            if not line.strip():
                continue
            # Untrusted text: every control character (terminal escapes among
            # them) is shown escaped (``records.printable``; the search is cheap).
            if has_control(line):
                line = printable(line)
            yield lineno, line.split('|')


#: What tells a test case's line from another's in one session: ReFrame logs no
#: retry's run index, and its display name leaves out ``-P`` parameters (nodes).
_CASE = operator.attrgetter('session', 'system', 'partition', 'stack', 'name', 'kernel',
                            'mode', 'ranks', 'threads', 'size', 'cores', 'nodes',
                            'build_spec', 'mpi_env', 'launch_command')


def last_tries(recs: list[Record]) -> list[Record]:
    """`recs` (one perflog's, in the order of its lines) less every failed try
    that a later line of the same test case in the same session replaced: a
    retry (``--max-retries``) logs the case again, and only its last try counts,
    as in ReFrame's summary and its run report (``runreport``).  A record without
    a session (older perflogs) is kept: its case is not told from another night's."""
    if all(rec.result == 'pass' for rec in recs):
        return recs
    last = {_CASE(rec): i for i, rec in enumerate(recs)}
    return [rec for i, rec in enumerate(recs)
            if rec.result == 'pass' or not rec.session or last[_CASE(rec)] == i]


def read_file(path: str, stats: ReadStats, shapes: Shapes | None = None,
              source: str = '', shift: int = 0, limit: int | None = None
              ) -> Iterator[Record]:
    """The records of the perflog `path`, each with its ``source`` '<file>:<line>':
    `source` (default `path`) and the line number plus `shift` (``store``'s chunks
    of a file).  `limit`: read only its first `limit` bytes.  A failed try is left
    out where a retry replaced it among the lines read (``last_tries``; a chunk the
    store read before the retry was logged keeps it)."""
    stats.files += 1
    source = source or path
    shapes = shapes if shapes is not None else {}
    reshaped: dict = {}
    header: _Header | None = None
    parsed: list[Record] = []
    for lineno, fields in _lines(path, limit):
        if fields[0] == 'job_completion_time':
            header = _Header(fields, stats)
            _add_shape(shapes, source, header)
            continue
        if header is None:
            stats.skip('no header', where=f'{source}:{lineno + shift}')
            continue
        # The perf-variable block ends with a '|': tolerate one empty field.
        if fields[-1] == '' and len(fields) != header.width:
            fields.pop()
        line_header = header
        if len(fields) != header.width:
            found = _reshaped(header, fields, source, lineno + shift, shapes, reshaped)
            if found is None:
                stats.skip('field count differs from header (truncated or corrupt)',
                           where=f'{source}:{lineno + shift}')
                continue
            line_header = found
        if line_header.kernel is not None and fields[line_header.kernel] in NO_KERNEL:
            continue  # a build or other non-kernel test: nothing to pair
        where = f'{source}:{lineno + shift}'
        try:
            parsed.append(line_header.parse(fields, where))
        except UNPARSABLE as err:
            stats.unparsable(err, where)
    yield from filter(stats.keep, last_tries(parsed))


def read_perflogs(paths: Iterable[str], since: dt.datetime | None = None,
                  stats: ReadStats | None = None) -> list[Record]:
    """All kernel records under `paths`, optionally only those after `since`, less
    those the same line as one of another file (``records.same_line``, as the
    history store's ingest tells them): a copy of a perflog counts once."""
    stats = stats if stats is not None else ReadStats()
    files = perflog_files(paths, stats)
    shapes = header_shapes(files)
    out: list[Record] = []
    before: dict[tuple, list[Record]] = {}    # identity -> the records of earlier files
    for path in files:
        recs = [rec for rec in read_file(path, stats, shapes)
                if (since is None or rec.time >= since) and not any(
                    same_line(rec, old) for old in before.get(identity(rec), ()))]
        for rec in recs:
            before.setdefault(identity(rec), []).append(rec)
        out += recs
    return out


def run_fields(path: str) -> Iterator[dict[str, str]]:
    """Every line of the perflog `path` under a header, a kernel's record or not,
    as its fields by their header's names (``session_check`` counts them)."""
    header: list[str] | None = None
    for _lineno, fields in _lines(path, None):
        if fields[0] == 'job_completion_time':
            header = fields
        elif header is not None:
            yield dict(zip(header, fields))


# The records' names, read from here by the report and the tests (``records``).
__all__ = ['IDENTITY', 'PROVENANCE_FIELDS', 'PerflogError', 'ReadStats', 'Record', 'Ref',
           'header_fields', 'identity', 'parse_time', 'perflog_files', 'printable',
           'provenance', 'read_file', 'read_perflogs', 'run_fields', 'size_key']
