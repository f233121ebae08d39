"""The records both readers make, one per run of a kernel: from the perflogs
(``perflog``) and from ReFrame's JSON run reports (``runreport``).  What the two
share is written here once: the record and what it is compared within (``Record``,
``Group``), the record built from its fields' texts (``from_fields``), its
provenance, what cannot be used (``unusable``) and the counts of what was read and
skipped, each skip with where its first was (``ReadStats``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from harnesscore.schema import REQUIRED, TIME_VARIABLE
from harnesscore.units import label_bytes

#: Control characters (terminal escapes among them) and the invisible format
#: characters that reorder or hide text (bidirectional overrides and isolates,
#: zero-width characters, line and paragraph separators: a "Trojan source"
#: library name): never passed on from a perflog to a terminal or a report, but
#: shown as ``\x1b``- or ``\u202e``-style escapes.
_CONTROL = re.compile('[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e'
                      '\u2060-\u2069\ufeff]')


#: Whether a text holds a control character (``_CONTROL``): the readers' cheap test.
has_control = _CONTROL.search


def printable(text: str) -> str:
    """`text` with every control character written as a visible escape."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    """A control character as ``\\x1b``, or ``\\u202e`` beyond one byte."""
    code = ord(match.group())
    return f'\\x{code:02x}' if code < 0x100 else f'\\u{code:04x}'


def one_line(text: str) -> str:
    """`text` with its line breaks and tabs as spaces: one line of a list or a table."""
    return text.replace('\r', ' ').replace('\n', ' ').replace('\t', ' ')


#: (reference, lower threshold, upper threshold) of a variable, as ReFrame logs them:
#: the thresholds are fractions of the reference, None when unbounded.
Ref = tuple[float | None, float | None, float | None]


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
class Place:
    """Where the runs behind a row of an analysis ran: the row's first fields."""

    system: str
    partition: str
    stack: str
    size: str


@dataclasses.dataclass(frozen=True)
class KernelSeries:
    """Where the runs behind a series of one kernel ran: the series's first fields."""

    system: str
    partition: str
    stack: str
    kernel: str

    def where(self) -> dict[str, str]:
        """These fields by name: the first keys of the series's JSON data."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(KernelSeries)}


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
    #: the machine was busy during the run (harnesscore.quiet); kept out of references
    busy: bool = False
    #: the band rule's state: 'pass', 'fail', 'inconclusive' or '' (harnesscore.bands)
    judgement: str = ''
    judgement_detail: str = ''
    #: the MPI tuning variables in effect, 'NAME=VALUE ...' ('' in older perflogs)
    mpi_env: str = ''
    #: provenance (harnesscore.schema; '' where unknown and in older perflogs): the
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
    #: perflogs, where sessions are told apart by time: changes.sessions)
    session: str = ''
    # (the schema's run fields after mpi_env, in its order: tests/test_provenance.py)

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


_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(Record))


def _record(*args: object) -> Record:
    """Record(*args) for every field, without the frozen dataclass's per-field
    ``object.__setattr__`` (a fifth of the reading time of a large perflog)."""
    rec = object.__new__(Record)
    rec.__dict__.update(zip(_RECORD_FIELDS, args))
    return rec


#: The run fields of a record, as the schema names them, in the order
#: ``from_fields`` takes their texts (``environ`` is the record's ``stack``,
#: ``job_completion_time`` its ``time``).
FIELDS = ('job_completion_time', 'system', 'partition', 'environ', 'kernel', 'mode', 'ranks',
          'threads', 'size', 'cores', 'nodes', 'mpi_library', 'verified', 'oversubscribed',
          'result', 'name', 'build_spec', 'finalize_hung', 'busy', 'judgement',
          'judgement_detail', *_RECORD_FIELDS[_RECORD_FIELDS.index('mpi_env'):])
_REQUIRED_AT = tuple(FIELDS.index(k) for k in REQUIRED)
#: The texts of a field without a value.
MISSING = frozenset(('', 'None', 'null', '<undefined>'))
#: The kernels of runs that are not a kernel's (builds, other tests): no record.
NO_KERNEL = frozenset(('null', 'None', '<undefined>'))

_TRUE = frozenset(('true', '1', 'yes', 'True'))
_FALSE = frozenset(('false', 'False', '0', 'no', ''))
_NO_NUMBER = frozenset(('None', 'null', '', 'nan'))


def as_bool(text: str) -> bool:
    """'true', '1', 'yes' in any case and spacing (the common ones first)."""
    return text in _TRUE or (text not in _FALSE and text.strip().lower() in _TRUE)


#: The integers a record's counts may be: the frames built from the records
#: hold them as 64-bit integers (``store.RECORDS``, ``tidy``).
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1


def as_int(text: str) -> int:
    """An integer field (ranks, threads); ValueError if it is not one, or one
    beyond a 64-bit integer (the line is skipped as unparsable, not the
    report ended where its frame is built)."""
    n = int(text)
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f'{text} is beyond a 64-bit integer')
    return n


def as_count(text: str) -> int:
    """A count (cores, nodes); 0 where it is none; ValueError beyond a 64-bit
    integer (``as_int``)."""
    return as_int(text) if text.isdigit() else 0


def number(x: object) -> float | None:
    """A performance variable's value; None where it has none (a run that
    failed before measuring it).  NaN and infinities are kept: ``unusable``
    names them."""
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _bound(x: object) -> float | None:
    return None if isinstance(x, str) and x in _NO_NUMBER else number(x)


def reference(ref: object, lower: object, upper: object) -> Ref | None:
    """(ref, lower, upper) of a variable; None where it has no reference (none or 0)."""
    value = _bound(ref)
    return (value, _bound(lower), _bound(upper)) if value else None


def parse_time(text: str) -> dt.datetime:
    """An ISO time; one without a zone is UTC (ValueError if it is none, or one
    that is no time in UTC, as 0001-01-01T00:00:00+01:00)."""
    t = dt.datetime.fromisoformat(text)
    t = t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    try:
        t.astimezone(dt.timezone.utc)   # the frames and the store hold it in UTC
    except OverflowError:
        raise ValueError(f'{text} is no time in UTC') from None
    return t


def iso_time(text: str) -> dt.datetime:
    """`parse_time` as the ``type`` of an option such as ``--since``: a text that
    is not an ISO time (an empty one too) is a usage error naming it."""
    try:
        return parse_time(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not an ISO time: {text!r}') from None


def path_option(text: str) -> str:
    """A path option's value (its ``type``): an empty one (``--out "$UNSET"``) is a
    usage error, not the default (another folder, no history store, the current
    folder) taken silently."""
    if not text:
        raise argparse.ArgumentTypeError('an empty path')
    return text


def from_fields(texts: Sequence[str], values: dict[str, float], units: dict[str, str],
                refs: dict[str, Ref], source: str) -> Record:
    """The record of a run from the texts of its run fields (``FIELDS`` order)
    and its variables.  ValueError naming the required fields (the schema's
    ``REQUIRED``) that are missing, or on a count or time that is not one (a
    count beyond a 64-bit integer too: ``as_int``)."""
    for i in _REQUIRED_AT:
        if texts[i] in MISSING:
            raise ValueError('missing ' + ','.join(
                name for name, at in zip(REQUIRED, _REQUIRED_AT) if texts[at] in MISSING))
    (when, system, partition, stack, kernel, mode, ranks, threads, size, cores, nodes, library,
     verified, oversubscribed, result, name, build_spec, hung, busy, judgement, detail,
     *tail) = texts
    return _record(parse_time(when), system, partition, stack, kernel, mode, as_int(ranks),
                   as_int(threads), size, as_count(cores), as_count(nodes) or 1, library,
                   as_bool(verified), as_bool(oversubscribed), result, values, units, source,
                   name, build_spec, as_bool(hung), refs, as_bool(busy), judgement, detail,
                   *tail)


#: What breaks the building of a record (``ReadStats.unparsable``).
UNPARSABLE = (ValueError, KeyError, TypeError, OverflowError)


#: How far after now a record's completion time may be before it is named in a
#: warning (``ReadStats.future``): a clock set wrong, or a line written by hand,
#: would otherwise pass for the latest session.
FUTURE_SLACK = dt.timedelta(days=1)


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
    #: paths under a folder read that are not regular files (FIFO, socket, device,
    #: broken link): left unread, since opening one may block (``input_files``)
    not_regular: list[str] = dataclasses.field(default_factory=list)
    #: records kept whose completion time is more than ``FUTURE_SLACK`` after
    #: `now`, and where the first was ('file:line'); kept as they are
    future: int = 0
    first_future: str = ''
    now: dt.datetime = dataclasses.field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc))

    def skip(self, reason: str, count: int = 1, where: str = '') -> None:
        self.skipped += count
        self.reasons[reason] = self.reasons.get(reason, 0) + count
        if where:
            self.first_at.setdefault(reason, where)

    def unparsable(self, err: Exception, where: str) -> None:
        """Skips the line or test case at `where` (file:line) whose record
        could not be built (``from_fields``'s error `err`)."""
        self.skip(f'unparsable ({err})' if 'missing' in str(err) else 'unparsable value',
                  where=where)

    def keep(self, rec: Record) -> bool:
        """Counts `rec` read if it can be used (True); else skips it, with why
        (``unusable``) and where (its ``source``).  A record dated in the future
        is kept, and counted for a warning."""
        why = unusable(rec)
        if why:
            self.skip(f'unusable record ({why})', where=rec.source)
            return False
        self.records += 1
        if rec.time > self.now + FUTURE_SLACK:
            self.future += 1
            self.first_future = self.first_future or rec.source
        return True

    def warnings(self) -> list[str]:
        """One line per kind of problem met while reading, for the user."""
        out = []
        if self.skipped:
            reasons = []
            for why, n in sorted(self.reasons.items()):
                first = (f' (first at {printable(self.first_at[why])})'
                         if why in self.first_at else '')
                reasons.append(f'{n} {why}{first}')
            out.append(f'skipped {self.skipped} perflog line(s): {", ".join(reasons)}')
        if self.unknown_fields:
            names = ', '.join(f'{k} ({n} file(s))' for k, n in sorted(self.unknown_fields.items()))
            out.append(f'ignored unknown perflog field(s): {names}')
        if self.not_regular:
            out.append(f'ignored {len(self.not_regular)} path(s) that are not regular files '
                       f'(FIFO, socket, device or broken link): '
                       + ', '.join(printable(p) for p in self.not_regular))
        if self.future:
            out.append(f'{self.future} record(s) dated more than {FUTURE_SLACK.days} day '
                       f'after now ({self.now:%Y-%m-%d %H:%M} UTC; a clock set wrong?), '
                       f'first at {printable(self.first_future)}: they count as the latest session')
        return out


#: What tells a run's record from another's (the history store's columns, the
#: record's attributes): two copies of a perflog give records of one identity,
#: stored once by the store's ingest (``perflog.read_perflogs`` counts them
#: once where their lines are alike too, ``same_line``).  Two copies of a
#: perflog share the test's name; two checks that ran the same kernel and
#: layout in the same second differ by it.
IDENTITY = ('system', 'partition', 'stack', 'kernel', 'mode', 'ranks', 'threads', 'size', 'time',
            'name')


def identity(r: Record) -> tuple:
    """The record's ``IDENTITY`` fields."""
    return tuple(getattr(r, c) for c in IDENTITY)


def same_line(a: Record, b: Record) -> bool:
    """Whether `a` and `b` were read from the same perflog line, in two files
    (a copy): every field alike but the file and line they were read from."""
    return dataclasses.replace(a, source='') == dataclasses.replace(b, source='')


#: What a run was made with, beyond what it measured: the fields a performance
#: engineer diffs between the runs before and after a regression, in the order
#: they are built and run.
PROVENANCE_FIELDS = ('src_version', 'build_spec', 'spack_hash', 'compiler', 'mpi_library',
                     'mpi_env', 'loaded_modules', 'launch_command', 'node_names',
                     'kernel_release', 'reframe_version')


def provenance(rec: Record) -> dict[str, str]:
    """The run's provenance, field -> text ('' where the record has none)."""
    return {f: str(getattr(rec, f, '') or '') for f in PROVENANCE_FIELDS}


#: The largest magnitude of a value, and the inverse of the smallest but 0, that
#: is a measurement: beyond them it is garbage (an uninitialised timer's 6.9e-310),
#: and the ratio of two values (a speedup, an efficiency) could be no finite number.
MAGNITUDE = 1e150


def _measured(value: float) -> bool:
    """Whether `value` is finite and 0 or within 1/``MAGNITUDE`` .. ``MAGNITUDE``."""
    size = abs(value)
    return size == 0 or 1 / MAGNITUDE <= size <= MAGNITUDE


def unusable(rec: Record) -> str:
    """Why a record cannot be used ('' if it can): a value that is not a finite
    number, or one of a magnitude no measurement has (``MAGNITUDE``), or a run
    time (``t_total``) that is zero or negative.  Every reader skips such a
    record with a warning naming where it was, and goes on."""
    values = rec.values
    if not all(map(math.isfinite, values.values())):
        bad = next(k for k, v in values.items() if not math.isfinite(v))
        return f'{bad} is not a finite number'
    if not all(map(_measured, values.values())):
        bad = next(k for k, v in values.items() if not _measured(v))
        return f'{bad} is beyond 1e+/-{math.log10(MAGNITUDE):.0f}: no measurement'
    t = values.get(TIME_VARIABLE)
    if t is not None and t <= 0:
        return f'{TIME_VARIABLE} is not positive'
    return ''


def input_files(paths: Iterable[str], wanted: Callable[[str], bool], recursive: bool,
                what: str, error: type[Exception],
                stats: ReadStats | None = None) -> list[str]:
    """The files given, and those under the directories given whose names
    `wanted` takes (in subdirectories too where `recursive`), sorted, each file
    once (by its device and inode: a hard or symbolic link, or a file given
    twice); `error` for a path that is neither, naming it a `what`.  Under a
    directory only regular files are taken (opening a FIFO blocks): the others
    go to ``stats.not_regular`` for a warning.  Folders linked under one
    (``perflogs/<system>`` on another file system) are read, each once."""
    found: dict[tuple[int, int], str] = {}   # the file (device, inode) -> its path first met
    walked: set[str] = set()         # the real paths of the folders read

    def take(path: str) -> None:
        # by the file, not its name: a hard link (a backup by cp -al) is one file too
        try:
            st = os.stat(path)
        except OSError:
            return                   # removed meanwhile: nothing to read
        found.setdefault((st.st_dev, st.st_ino), path)

    for path in paths:
        if os.path.isfile(path):
            take(path)
        elif os.path.isdir(path):
            for full in _wanted_under(path, wanted, recursive, walked):
                if os.path.isfile(full):
                    take(full)
                elif stats is not None and full not in stats.not_regular:
                    stats.not_regular.append(full)
        elif os.path.exists(path):
            raise error(f'not a regular {what} file or directory: {path}')
        else:
            raise error(f'no such {what} file or directory: {path}')
    return sorted(found.values())


def _wanted_under(folder: str, wanted: Callable[[str], bool], recursive: bool,
                  walked: set[str]) -> Iterator[str]:
    """The paths under `folder` whose names `wanted` takes, sorted by name in each
    folder (in subfolders too where `recursive`); a folder whose real path is in
    `walked` (linked twice) is not read again, and those read are added to it."""
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in walked:
            dirs[:] = []
            continue
        walked.add(real)
        for name in sorted(files):
            if wanted(name):
                yield os.path.join(root, name)
        if not recursive:
            break
