"""The history of each performance variable over sessions, with its reference band.

A series is one variable of one kernel run (``series_key``: system, partition,
stack, kernel, mode, layout, size, node count, build and MPI library) across every
perflog record.  The reference band is what
ReFrame logs beside each value: ref x (1 + lower) .. ref x (1 + upper).

There can be thousands of series; the report draws at most ``limit`` of them
(those with a reference first, then those whose latest value or any value is
outside their band, then the longest), each reduced to at most ``max_points`` points (medians of
consecutive runs), and says how many it left out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from .perflog import Record

DEFAULT_LIMIT = 16
DEFAULT_MAX_POINTS = 200


@dataclasses.dataclass
class Series:
    system: str
    partition: str
    stack: str
    kernel: str
    mode: str
    layout: str
    size: str
    nodes: int
    build: str
    library: str
    variable: str
    unit: str
    samples: int
    times: list[dt.datetime]
    values: list[float]
    low: list[float | None]
    high: list[float | None]
    out_of_band: int              # samples outside their band (all samples, not the drawn)
    failed: int                   # samples of runs that failed (sanity or performance)

    @property
    def label(self) -> str:
        nodes = f' {self.nodes} nodes' if self.nodes > 1 else ''
        return (f'{self.kernel} {self.size} {self.mode} {self.layout}{nodes} {self.stack}@'
                f'{self.partition}: {self.variable}')

    @property
    def has_band(self) -> bool:
        return any(x is not None for x in self.low) or any(x is not None for x in self.high)


def _outside(value: float, low: float | None, high: float | None) -> bool:
    return (low is not None and value < low) or (high is not None and value > high)


def _downsample(points: list[tuple[dt.datetime, float, float | None, float | None]],
                max_points: int) -> list[tuple[dt.datetime, float, float | None, float | None]]:
    if len(points) <= max_points:
        return points
    step = math.ceil(len(points) / max_points)
    out = []
    for i in range(0, len(points), step):
        chunk = points[i:i + step]
        mid = chunk[len(chunk) // 2]
        out.append((mid[0], statistics.median(p[1] for p in chunk), chunk[-1][2], chunk[-1][3]))
    return out


def series_key(rec: Record) -> tuple:
    """(system, partition, stack, kernel, mode, layout, size, nodes, build, library):
    one series per run of one group (``Record.group``) and layout, so a series never
    mixes node counts, builds or MPI libraries."""
    g = rec.group
    return (g.system, g.partition, g.stack, g.kernel, rec.mode, rec.layout, g.size, g.nodes,
            g.build, g.library)


def history(records: Iterable[Record], limit: int = DEFAULT_LIMIT,
            max_points: int = DEFAULT_MAX_POINTS) -> tuple[list[Series], int]:
    """The series to draw, and how many series there are in all."""
    runs: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if rec.verified:
            runs[series_key(rec)].append(rec)
    # candidate series: (key + variable, records, has a reference); the variables of
    # a run are those of its latest record (a check's variables rarely change)
    candidates = []
    for key, recs in runs.items():
        last = max(recs, key=lambda r: r.time)
        for var, value in last.values.items():
            has_ref = var in last.refs
            candidates.append((key + (var,), recs,
                               (has_ref, has_ref and _outside(value, *last.band(var)),
                                len(recs))))
    total = len(candidates)
    if limit <= 0:
        return [], total
    # cheap first ranking: a reference, the latest value outside it, the most runs
    candidates.sort(key=lambda c: c[2], reverse=True)
    ranked = [(key, [r for r in recs if key[-1] in r.values])
              for key, recs, _ in candidates[:limit * 4]]
    series = []
    for key, recs in ranked:
        var = key[-1]
        recs = sorted(recs, key=lambda r: r.time)
        points = []
        outside = failed = 0
        for r in recs:
            low, high = r.band(var)
            value = r.values[var]
            outside += _outside(value, low, high)
            failed += r.result != 'pass'
            points.append((r.time, value, low, high))
        drawn = _downsample(points, max_points)
        series.append(Series(*key, unit=recs[-1].units.get(var, ''), samples=len(recs),
                             times=[p[0] for p in drawn], values=[p[1] for p in drawn],
                             low=[p[2] for p in drawn], high=[p[3] for p in drawn],
                             out_of_band=outside, failed=failed))
    series.sort(key=lambda s: (s.has_band, s.out_of_band > 0, s.samples), reverse=True)
    chosen = series[:limit]
    chosen.sort(key=lambda s: (s.kernel, s.variable, s.system, s.partition, s.stack, s.mode,
                               s.size, s.nodes))
    return chosen, total


COLUMNS = ('series', 'unit', 'samples', 'first', 'last', 'last value', 'band',
           'outside band', 'failed runs')


def rows(series: list[Series]) -> list[list[object]]:
    out: list[list[object]] = []
    for s in series:
        lo, hi = s.low[-1], s.high[-1]
        lo_s = '-inf' if lo is None else f'{lo:.4g}'
        hi_s = 'inf' if hi is None else f'{hi:.4g}'
        band = 'none' if lo is None and hi is None else f'{lo_s} .. {hi_s}'
        out.append([s.label, s.unit, s.samples, f'{s.times[0]:%Y-%m-%d %H:%M}',
                    f'{s.times[-1]:%Y-%m-%d %H:%M}', f'{s.values[-1]:.4g}', band,
                    s.out_of_band, s.failed])
    return out
