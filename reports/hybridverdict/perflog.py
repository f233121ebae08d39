"""Read the perflogs that ReFrame's ``filelog`` handler writes for the harness.

Each file starts with a header line naming the '|'-separated fields (the
``format`` of ``config/settings.py``); a file whose header changed was renamed
by ReFrame to ``<name>.log.h<N>`` and is read too.

A line is its run fields, then one block of five fields per performance
variable.  A line whose variables differ in number from its header's (a file
whose first line was a failed run, written before the checks declared their
variables up front) is read by its own shape: a failed run without variables
under a header with some, or a passed run under a header without any, with
the names of the other header of the same check that has as many; where
that is ambiguous the read fails, naming the file and line, rather than lose a
valid record.  Lines of no such shape (truncated, corrupt) are skipped and
counted, with the first of them named in the warning.  Files are only read,
never modified.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Optional

from harnesslib.schema import KNOWN, PERFVAR_PARTS, REQUIRED, TIME_VARIABLE, header_fields
from harnesslib.units import label_bytes

#: fields per performance variable
PARTS = len(PERFVAR_PARTS)

#: Control characters (terminal escapes among them): never passed on from a
#: perflog to a terminal or a report, but shown as ``\x1b``-style escapes.
_CONTROL = re.compile(r'[\x00-\x08\x0b-\x1f\x7f-\x9f]')


def printable(text: str) -> str:
    """`text` with every control character written as a visible escape."""
    return _CONTROL.sub(lambda m: f'\\x{ord(m.group()):02x}', text)

#: (reference, lower threshold, upper threshold) of a variable, as ReFrame logs them:
#: the thresholds are fractions of the reference, None when unbounded.
Ref = tuple[Optional[float], Optional[float], Optional[float]]


def size_key(size: str) -> tuple:
    """Numeric sizes sort as numbers ("6" before "12"), message sizes by their
    bytes ("8B" before "64KiB" before "1MiB"), others as text."""
    try:
        return (0, float(size), size)
    except ValueError:
        n = label_bytes(size)
        return (1, 0.0, size) if n is None else (0, float(n), size)


class Group(NamedTuple):
    """The runs that may be compared with each other: one kernel at one size, on one
    system, partition, stack and node count, from one build of one MPI library.

    Every analysis groups records by it (``Record.group``) and compares layouts
    and modes only inside a group, so runs on different node counts, Debug
    against Release builds, or two installs of a stack are never pooled.
    """

    system: str
    partition: str
    stack: str
    kernel: str
    size: str
    nodes: int
    build: str          # build_spec: build system, type, stack, compiler (or OSU prefix)
    library: str        # the MPI library's version string

    def sort_key(self) -> tuple:
        return (self.system, self.partition, self.stack, self.kernel, size_key(self.size),
                self.nodes, self.build, self.library)

    def across_nodes(self) -> tuple:
        """The group's fields but the node count: one scaling series per value."""
        return (self.system, self.partition, self.stack, self.kernel, self.size,
                self.build, self.library)

    def with_size(self, size: object) -> Group:
        """The same group for another size (e.g. a message size, or '' for a sweep)."""
        return self._replace(size=str(size))


@dataclasses.dataclass(frozen=True)
class Record:
    """One performance record: one run of one kernel at one layout."""

    time: dt.datetime
    system: str
    partition: str
    stack: str
    kernel: str
    mode: str
    ranks: int
    threads: int
    size: str
    cores: int
    nodes: int
    mpi_library: str
    verified: bool
    oversubscribed: bool
    result: str
    values: dict[str, float]
    units: dict[str, str]
    source: str
    name: str = ''
    build_spec: str = ''
    finalize_hung: bool = False
    #: variable -> (ref, lower, upper); only variables that have a reference logged
    refs: dict[str, Ref] = dataclasses.field(default_factory=dict)
    #: the machine was busy during the run (harnesslib.quiet); kept out of references
    busy: bool = False
    #: the band rule's state: 'pass', 'fail', 'inconclusive' or '' (harnesslib.bands)
    judgement: str = ''
    judgement_detail: str = ''
    #: the MPI tuning variables in effect, 'NAME=VALUE ...' ('' in older perflogs)
    mpi_env: str = ''
    #: provenance (harnesslib.schema; '' where unknown and in older perflogs): the
    #: kernel sources' version, the compiler, ReFrame, the Spack hash, the modules
    #: loaded, the nodes, their kernel release and the launcher line
    src_version: str = ''
    compiler: str = ''
    reframe_version: str = ''
    spack_hash: str = ''
    loaded_modules: str = ''
    node_names: str = ''
    kernel_release: str = ''
    launch_command: str = ''
    #: the session the run belongs to (harnesslib.base.session_id; '' in older
    #: perflogs, where sessions are told apart by time: stats.session_starts)
    session: str = ''

    @property
    def total_cores(self) -> int:
        return self.ranks * self.threads

    @property
    def group(self) -> Group:
        """What a run is compared within (see ``Group``)."""
        return Group(self.system, self.partition, self.stack, self.kernel, self.size,
                     self.nodes, self.build_spec, self.mpi_library)

    @property
    def logged(self) -> tuple[dt.datetime, str, int]:
        """When the run was logged, finer than its time: the perflog's times
        have whole seconds, and runs of a second or less end within one; the
        file and line order them (ReFrame logs a test when it completes)."""
        path, _, line = self.source.rpartition(':')
        return (self.time, path, int(line) if line.isdigit() else 0)

    @property
    def layout(self) -> str:
        """"R x T" per node: ranks per node x threads per rank."""
        return f'{self.ranks}x{self.threads}'

    @property
    def faults(self) -> tuple[str, ...]:
        """Every reason the run's figures may not enter a verdict, the first the
        one named: oversubscribed, failed, unverified (none if they may)."""
        return tuple(why for why, bad in (('oversubscribed', self.oversubscribed),
                                          ('failed', self.result != 'pass'),
                                          ('unverified', not self.verified)) if bad)

    @property
    def left_out(self) -> str:
        """Why the run's figures may not enter a verdict ('' if they may)."""
        return next(iter(self.faults), '')

    @property
    def usable(self) -> bool:
        """A run whose figures may enter a verdict."""
        return not self.left_out

    def band(self, var: str) -> tuple[float | None, float | None]:
        """The absolute (low, high) bounds of `var` from its reference, None where open."""
        ref, lower, upper = self.refs.get(var, (None, None, None))
        if not ref:
            return None, None
        return (None if lower is None else ref * (1 + lower),
                None if upper is None else ref * (1 + upper))


_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(Record))
#: The text fields of a record after ``mpi_env``, read as they are (in Record order).
_TEXT_TAIL = _RECORD_FIELDS[_RECORD_FIELDS.index('mpi_env') + 1:]


def _record(*args: object) -> Record:
    """Record(*args) for every field, without the frozen dataclass's per-field
    ``object.__setattr__`` (a fifth of the reading time of a large perflog)."""
    rec = object.__new__(Record)
    rec.__dict__.update(zip(_RECORD_FIELDS, args))
    return rec


@dataclasses.dataclass
class ReadStats:
    files: int = 0
    records: int = 0
    skipped: int = 0
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    #: header fields the reader does not know -> number of files that had them
    unknown_fields: dict[str, int] = dataclasses.field(default_factory=dict)

    #: where the first skipped line was, per reason ('file:line')
    first_at: dict[str, str] = dataclasses.field(default_factory=dict)

    def skip(self, reason: str, count: int = 1, where: str = '') -> None:
        self.skipped += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count
        if where:
            self.first_at.setdefault(reason, where)

    def warnings(self) -> list[str]:
        """One line per kind of problem met while reading, for the user."""
        out = []
        if self.skipped:
            reasons = ', '.join(
                f'{n} {why}' + (f' (first at {self.first_at[why]})' if why in self.first_at
                                else '')
                for why, n in sorted(self.reasons.items()))
            out.append(f'skipped {self.skipped} perflog line(s): {reasons}')
        if self.unknown_fields:
            names = ', '.join(f'{k} ({n} file(s))' for k, n in sorted(self.unknown_fields.items()))
            out.append(f'ignored unknown perflog field(s): {names}')
        return out


class PerflogError(Exception):
    """A perflog path that cannot be read at all, or a record that cannot be
    read without guessing (the message names the file and line)."""


def perflog_files(paths: Iterable[str]) -> list[str]:
    """The perflog files under the given files or directories, sorted."""
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
        elif os.path.isdir(path):
            for root, _dirs, files in os.walk(path):
                found += [os.path.join(root, f) for f in files
                          if re.search(r'\.log(\.h\d+)?$', f)]
        else:
            raise PerflogError(f'no such perflog file or directory: {path}')
    return sorted(found)


def parse_time(text: str) -> dt.datetime:
    """An ISO time; one without a zone is UTC (ValueError if it is none)."""
    t = dt.datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _int_or_zero(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _float_or_none(text: str) -> float | None:
    if text in ('None', 'null', '', 'nan'):
        return None
    try:
        return float(text)
    except ValueError:
        return None


_TRUE = frozenset(('true', '1', 'yes', 'True'))


def _parse_bool(text: str) -> bool:
    return text in _TRUE or (text not in _FALSE and text.strip().lower() in _TRUE)


_FALSE = frozenset(('false', 'False', '0', 'no', ''))


def _getter(indices: list[int]):
    """fields -> tuple of the fields at `indices` (at C speed)."""
    if len(indices) == 1:
        i = indices[0]
        return lambda fields: (fields[i],)
    if not indices:
        return lambda fields: ()
    return operator.itemgetter(*indices)


class _Header:
    """A header line compiled once: where each field and variable sits.

    Parsing runs once per perflog line, so it indexes the split line directly; a
    field the header lacks reads the empty string appended after the line's fields.
    """

    def __init__(self, fields: list[str], stats: ReadStats):
        #: the names, without the empty field after a trailing '|'
        self.fields = list(fields[:-1] if fields and fields[-1] == '' else fields)
        self.width = len(fields)
        index = {name: i for i, name in enumerate(fields)}
        self.required = [(k, index.get(k, -1)) for k in REQUIRED]
        self.kernel = index.get('kernel')
        # run fields in Record order; -1 = absent (reads the appended '')
        self.at = {name: index.get(name, -1) for name in KNOWN}
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
        self.get_tail = _getter([self.at[name] for name in _TEXT_TAIL])
        #: unit tuples seen -> one dict shared by the records that have them
        self.unit_dicts: dict[tuple[str, ...], dict[str, str]] = {}
        for i, name in enumerate(fields):
            if i not in claimed and name not in KNOWN and name:
                stats.unknown_fields[name] = stats.unknown_fields.get(name, 0) + 1

    def _refs(self, fields: list[str]) -> dict[str, Ref]:
        refs: dict[str, Ref] = {}
        for var, _iv, _iu, ir, il, ih in self.variables:
            ref = _float_or_none(fields[ir]) if fields[ir] not in _NO_REF else None
            if ref:
                refs[var] = (ref, _float_or_none(fields[il]), _float_or_none(fields[ih]))
        return refs

    def _slow_variables(self, fields: list[str]) -> tuple[dict, dict, dict]:
        values: dict[str, float] = {}
        units: dict[str, str] = {}
        for var, iv, iu, _ir, _il, _ih in self.variables:
            try:
                values[var] = float(fields[iv])
            except ValueError:
                continue
            units[var] = fields[iu]
        refs = {k: v for k, v in self._refs(fields).items() if k in values}
        return values, units, refs

    def parse(self, fields: list[str], source: str) -> Record:
        fields.append('')
        for k, i in self.required:
            text = fields[i]
            if not text or text == 'None' or text == 'null':
                missing = [k for k, i in self.required
                           if fields[i] in ('', 'None', 'null')]
                raise ValueError(f'missing {",".join(missing)}')
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
            refs: dict[str, Ref] = {}
            if not _NO_REF.issuperset(self.get_refs(fields)):
                refs = self._refs(fields)
        else:
            values, units, refs = self._slow_variables(fields)
        at = self.at
        return _record(
            parse_time(fields[at['job_completion_time']]), fields[at['system']],
            fields[at['partition']], fields[at['environ']], fields[at['kernel']],
            fields[at['mode']], int(fields[at['ranks']]), int(fields[at['threads']]),
            fields[at['size']], _int_or_zero(fields[at['cores']]),
            _int_or_zero(fields[at['nodes']]) or 1, fields[at['mpi_library']],
            _parse_bool(fields[at['verified']]), _parse_bool(fields[at['oversubscribed']]),
            fields[at['result']], values, units, source, fields[at['name']],
            fields[at['build_spec']], _parse_bool(fields[at['finalize_hung']]), refs,
            _parse_bool(fields[at['busy']]), fields[at['judgement']],
            fields[at['judgement_detail']], fields[at['mpi_env']], *self.get_tail(fields))


_NO_REF = frozenset(('0', 'None', 'null', '', '0.0'))

#: What a run was made with, beyond what it measured: the fields a performance
#: engineer diffs between the runs before and after a regression.
#: In the order they are built and run: the sources, how they were built and
#: with what, the MPI and how it was tuned, the job's environment and launcher,
#: where it ran, and the ReFrame that ran it.
PROVENANCE_FIELDS = ('src_version', 'build_spec', 'spack_hash', 'compiler', 'mpi_library',
                     'mpi_env', 'loaded_modules', 'launch_command', 'node_names',
                     'kernel_release', 'reframe_version')


def provenance(rec: Record) -> dict[str, str]:
    """The run's provenance, field -> text ('' where the record has none)."""
    return {f: str(getattr(rec, f, '') or '') for f in PROVENANCE_FIELDS}


def unusable(rec: Record) -> str:
    """Why a record cannot be used ('' if it can): a value that is not a finite
    number, or a run time (``t_total``) that is zero or negative.  Every reader
    skips such a record with a warning naming where it was, and goes on."""
    values = rec.values
    if not all(map(math.isfinite, values.values())):
        bad = next(k for k, v in values.items() if not math.isfinite(v))
        return f'{bad} is not a finite number'
    t = values.get(TIME_VARIABLE)
    if t is not None and t <= 0:
        return f'{TIME_VARIABLE} is not positive'
    return ''


#: check (file name without .log/.h<N>) -> number of variables -> variable
#: block names of the headers that have that many
Shapes = dict[str, dict[int, set[tuple[str, ...]]]]


def _check_of(path: str) -> str:
    return re.sub(r'\.log(\.h\d+)?$', '', os.path.basename(path))


def _add_shape(shapes: Shapes, path: str, header: _Header) -> None:
    if header.run_width >= 0:
        block = tuple(header.fields[header.run_width:])
        shapes.setdefault(_check_of(path), {}).setdefault(
            len(header.variables), set()).add(block)


def header_shapes(files: Iterable[str]) -> Shapes:
    """The variable blocks of the headers of `files`, per check (first lines only)."""
    shapes: Shapes = {}
    for path in files:
        with open(path, encoding='utf-8', errors='replace') as fp:
            first = fp.readline().rstrip('\n').split('|')
        if first[0] == 'job_completion_time':
            _add_shape(shapes, path, _Header(first, ReadStats()))
    return shapes


def _reshaped(header: _Header, fields: list[str], path: str, lineno: int,
              shapes: Shapes, cache: dict, stats: ReadStats) -> _Header | None:
    """The header that reads a line of another width than its own header, by
    the line's shape, in the two cases a failed first record leaves: a line
    without variables under a header with some (a failed run), and a line with
    k blocks of five under a header without variables (a passed run), whose
    names come from the one header of the same check with k variables.
    None: no such shape (truncated or corrupt).  PerflogError: k blocks whose
    names no header of the same check tells unambiguously."""
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
        cache[key] = _Header(header.fields[:header.run_width] + list(block), stats)
    return cache[key]


def read_file(path: str, stats: ReadStats, shapes: Shapes | None = None) -> Iterator[Record]:
    stats.files += 1
    shapes = shapes if shapes is not None else {}
    reshaped: dict = {}
    with open(path, encoding='utf-8', errors='replace') as fp:
        header: _Header | None = None
        for lineno, line in enumerate(fp, 1):
            line = line.rstrip('\n')
            if not line.strip():
                continue
            # Untrusted text: what starts a terminal escape sequence (ESC, the
            # 8-bit CSI/OSC/DCS) or moves the cursor is shown escaped, with
            # every other control character of the line (cheap test first).
            if ('\x1b' in line or '\x9b' in line or '\x9d' in line or '\x90' in line
                    or '\x07' in line or '\r' in line or '\x08' in line):
                line = printable(line)
            fields = line.split('|')
            if fields[0] == 'job_completion_time':
                header = _Header(fields, stats)
                _add_shape(shapes, path, header)
                continue
            if header is None:
                stats.skip('no header', where=f'{path}:{lineno}')
                continue
            # The perf-variable block ends with a '|': tolerate one empty field.
            if fields[-1] == '' and len(fields) != header.width:
                fields.pop()
            line_header = header
            if len(fields) != header.width:
                found = _reshaped(header, fields, path, lineno, shapes, reshaped, stats)
                if found is None:
                    stats.skip('field count differs from header (truncated or corrupt)',
                               where=f'{path}:{lineno}')
                    continue
                line_header = found
            if (line_header.kernel is not None
                    and fields[line_header.kernel] in ('null', 'None')):
                continue  # a build or other non-kernel test: nothing to pair
            try:
                rec = line_header.parse(fields, f'{path}:{lineno}')
            except (ValueError, KeyError) as err:
                stats.skip(f'unparsable ({err})' if 'missing' in str(err)
                           else 'unparsable value', where=f'{path}:{lineno}')
                continue
            why = unusable(rec)
            if why:
                stats.skip(f'unusable record ({why})', where=f'{path}:{lineno}')
                continue
            stats.records += 1
            yield rec


def read_perflogs(paths: Iterable[str], since: dt.datetime | None = None,
                  stats: ReadStats | None = None) -> list[Record]:
    """All kernel records under `paths`, optionally only those after `since`."""
    stats = stats if stats is not None else ReadStats()
    out: list[Record] = []
    files = perflog_files(paths)
    shapes = header_shapes(files)
    for path in files:
        for rec in read_file(path, stats, shapes):
            if since is None or rec.time >= since:
                out.append(rec)
    return out


__all__ = ['Record', 'Group', 'size_key', 'Ref', 'ReadStats', 'PerflogError', 'read_perflogs',
           'unusable',
           'perflog_files',
    'PROVENANCE_FIELDS',
    'provenance',
           'header_fields', 'parse_time']
