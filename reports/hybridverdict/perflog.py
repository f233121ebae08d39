"""Read the perflogs that ReFrame's ``filelog`` handler writes for the harness.

Each file starts with a header line naming the '|'-separated fields (the
``format`` of ``config/settings.py``); a file whose header changed was renamed
by ReFrame to ``<name>.log.h<N>`` and is read too.  Lines that do not fit their
header (truncated, corrupt) are skipped and counted, never fatal.  Files are
only read, never modified.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections.abc import Iterable, Iterator

#: Fields without which a line cannot be paired with another.
REQUIRED = ('job_completion_time', 'system', 'partition', 'environ', 'kernel',
            'mode', 'ranks', 'threads', 'size')


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
    #: The test's display name (class and parameters).
    name: str = ''

    @property
    def total_cores(self) -> int:
        return self.ranks * self.threads

    @property
    def usable(self) -> bool:
        """A run whose figures may enter a verdict."""
        return self.result == 'pass' and self.verified and not self.oversubscribed


@dataclasses.dataclass
class ReadStats:
    files: int = 0
    records: int = 0
    skipped: int = 0
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1


class PerflogError(Exception):
    """A perflog path that cannot be read at all."""


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


def _parse_time(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text.strip())
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _int_or_zero(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _parse_bool(text: str) -> bool:
    return text.strip().lower() in ('true', '1', 'yes')


def _parse_line(fields: list[str], header: list[str], source: str) -> Record:
    row = dict(zip(header, fields))
    missing = [k for k in REQUIRED if not row.get(k) or row[k] in ('None', 'null')]
    if missing:
        raise ValueError(f'missing {",".join(missing)}')
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for key, text in row.items():
        if key.endswith('_value'):
            name = key[:-len('_value')]
            try:
                values[name] = float(text)
            except ValueError:
                continue
            units[name] = row.get(f'{name}_unit', '')
    return Record(
        time=_parse_time(row['job_completion_time']),
        system=row['system'], partition=row['partition'], stack=row['environ'],
        kernel=row['kernel'], mode=row['mode'],
        ranks=int(row['ranks']), threads=int(row['threads']), size=row['size'],
        cores=_int_or_zero(row.get('cores')),
        nodes=_int_or_zero(row.get('nodes')) or 1,
        mpi_library=row.get('mpi_library', ''),
        verified=_parse_bool(row.get('verified', 'false')),
        oversubscribed=_parse_bool(row.get('oversubscribed', 'false')),
        result=row.get('result', ''), values=values, units=units, source=source,
        name=row.get('name', ''),
    )


def read_file(path: str, stats: ReadStats) -> Iterator[Record]:
    stats.files += 1
    with open(path, encoding='utf-8', errors='replace') as fp:
        header: list[str] | None = None
        for lineno, line in enumerate(fp, 1):
            line = line.rstrip('\n')
            if not line.strip():
                continue
            fields = line.split('|')
            if fields[0] == 'job_completion_time':
                header = fields
                continue
            if header is None:
                stats.skip('no header')
                continue
            # The perf-variable block ends with a '|': tolerate one empty field.
            if len(fields) == len(header) + 1 and fields[-1] == '':
                fields = fields[:-1]
            if len(fields) != len(header):
                stats.skip('field count differs from header (truncated or corrupt)')
                continue
            row_kernel = fields[header.index('kernel')] if 'kernel' in header else ''
            if row_kernel in ('null', 'None'):
                continue  # a build or other non-kernel test: nothing to pair
            try:
                rec = _parse_line(fields, header, f'{path}:{lineno}')
            except (ValueError, KeyError) as err:
                stats.skip(f'unparsable ({err})' if 'missing' in str(err)
                           else 'unparsable value')
                continue
            stats.records += 1
            yield rec


def read_perflogs(paths: Iterable[str], since: dt.datetime | None = None,
                  stats: ReadStats | None = None) -> list[Record]:
    """All kernel records under `paths`, optionally only those after `since`."""
    stats = stats if stats is not None else ReadStats()
    out: list[Record] = []
    for path in perflog_files(paths):
        for rec in read_file(path, stats):
            if since is None or rec.time >= since:
                out.append(rec)
    return out


def header_fields() -> tuple[str, ...]:
    """Fields a harness perflog header starts with (for tests and writers)."""
    return ('job_completion_time', 'system', 'partition', 'environ', 'name',
            'kernel', 'mode', 'ranks', 'threads', 'size', 'cores', 'nodes', 'mpi_library',
            'verified', 'oversubscribed', 'finalize_hung', 'build_spec', 'result')


__all__ = ['Record', 'ReadStats', 'PerflogError', 'read_perflogs', 'perflog_files',
           'header_fields']
