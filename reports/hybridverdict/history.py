"""The history of each performance variable over sessions, with its reference band.

A series is one variable of one kernel run (``SERIES_KEY``: the fields of
``Record.group`` and the layout) across every record, so a series never mixes node
counts, builds or libraries; its band is what ReFrame logs beside each value, ref x
(1 + lower) .. ref x (1 + upper).  Of the thousands of series the report draws at
most ``limit``, each reduced to at most ``max_points`` points (``series`` says which).
A series's label names its system where the drawn series span several ('alpha:shm'),
and its build and MPI library where its kernel's series of one system, partition and
stack hold several ('mpich (cmake Debug)'; ``apart.Apart``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

import polars as pl

from .apart import Apart, kernel_place
from .records import KernelSeries, Record

DEFAULT_LIMIT = 16
DEFAULT_MAX_POINTS = 200
#: the most ``limit`` and ``max_points`` the command takes (``hybridverdict
#: --history-limit`` / ``--history-points``): a figure each, and points per figure
MAX_LIMIT = 10_000
MAX_POINTS = 1_000_000


@dataclasses.dataclass(frozen=True)
class Series(KernelSeries):
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
    where: str = ''               # 'mpich@shm' as the drawn series name it (``Apart.where``)
    #: the first and last samples' times and the last value, of every sample (the drawn
    #: points are medians of consecutive runs where they are fewer); None: the drawn ones
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    last_value: float | None = None

    @property
    def label(self) -> str:
        nodes = f' {self.nodes} nodes' if self.nodes > 1 else ''
        where = self.where or f'{self.stack}@{self.partition}'
        return (f'{self.kernel} {self.size} {self.mode} {self.layout}{nodes} {where}: '
                f'{self.variable}')

    @property
    def has_band(self) -> bool:
        return any(x is not None for x in self.low) or any(x is not None for x in self.high)


#: what makes a series (with the variable): ``layout`` is ``<ranks>x<threads>``
#: (the fields of ``Record.group`` with the mode and layout, as the store names them)
SERIES_KEY = ('system', 'partition', 'stack', 'kernel', 'mode', 'layout', 'size', 'nodes',
              'build_spec', 'library')
#: the store columns the history reads (``store.RECORDS`` and ``store.VALUES``)
RECORD_COLUMNS = ('rid', 'time', 'system', 'partition', 'stack', 'kernel', 'mode', 'ranks',
                  'threads', 'size', 'nodes', 'build_spec', 'library', 'verified', 'result')
VALUE_COLUMNS = ('rid', 'vpos', 'variable', 'value', 'unit', 'ref', 'lower', 'upper')


def _band(side: str) -> pl.Expr:
    """The absolute bound of a row's band (null where open, or without a reference)."""
    ref, frac = pl.col('ref'), pl.col(side)
    return pl.when(ref.is_not_null() & (ref != 0) & frac.is_not_null()).then(ref * (1 + frac))


def _outside(value: pl.Expr, low: pl.Expr, high: pl.Expr) -> pl.Expr:
    return ((low.is_not_null() & (value < low)) | (high.is_not_null() & (value > high))
            ).fill_null(False)


def series(records: pl.LazyFrame, values: pl.LazyFrame, limit: int = DEFAULT_LIMIT,
           max_points: int = DEFAULT_MAX_POINTS) -> tuple[list[Series], int]:
    """The series to draw from the store's tables (``store.RECORDS``, ``store.VALUES``;
    only ``RECORD_COLUMNS`` and ``VALUE_COLUMNS`` are read), and how many there are.

    Each series is one variable of one run key (``SERIES_KEY``) over the verified
    records.  The candidates are the variables of each key's latest record; they are
    ranked by: a reference, the latest value outside it, the most records (ties: the
    key seen first, then the variable's position in the record).  The best
    ``4 limit`` are read in full, each reduced to at most `max_points` points
    (medians of consecutive runs), and the ``limit`` with a band, then values outside
    it, then the most samples are drawn, in label order.
    """
    # SERIES_KEY with the layout as its numbers, ranks and threads (cheaper than text)
    group = [k for k in SERIES_KEY if k != 'layout'] + ['ranks', 'threads']
    recs = (records.select(RECORD_COLUMNS).filter(pl.col('verified'))
            .select(*group, 'rid', 'time', 'result').collect())
    runs = recs.group_by(group).agg(
        n=pl.len(), first=pl.col('rid').min(),
        last=pl.col('rid').filter(pl.col('time') == pl.col('time').max()).min())
    vals = values.select(VALUE_COLUMNS)
    # the variables of each key's latest record (read only for those records' ids)
    candidates = (vals.filter(pl.col('rid').is_in(runs.get_column('last').implode()))
                  .join(runs.lazy().select(*group, 'n', 'first', rid='last'), on='rid')
                  .select(*group, 'variable', 'vpos', 'n', 'first',
                          has_ref=(pl.col('ref').is_not_null() & (pl.col('ref') != 0))
                          .fill_null(False),
                          outside=_outside(pl.col('value'), _band('lower'), _band('upper')))
                  .collect())
    total = candidates.height
    if limit <= 0 or not total:
        return [], total
    top = (candidates.sort(['has_ref', 'outside', 'n', 'first', 'vpos'],
                           descending=[True, True, True, False, False])
           .head(4 * limit).with_row_index('rank')
           .with_columns(layout=pl.format('{}x{}', 'ranks', 'threads')))
    # the chosen variables' values (a cheap filter on the scan), joined to their records
    # and kept for the chosen keys
    points = (vals.filter(pl.col('variable').is_in(top.get_column('variable').unique()
                                                   .implode()))
              .join(recs.lazy(), on='rid')
              .join(top.lazy().select(*group, 'variable', 'rank'), on=[*group, 'variable'])
              .sort(['rank', 'time', 'rid'])
              .with_columns(low=_band('lower'), high=_band('upper'))
              .with_columns(
                  i=pl.int_range(pl.len()).over('rank'),
                  step=(pl.len().over('rank') / max_points).ceil().cast(pl.Int64),
                  out=_outside(pl.col('value'), pl.col('low'), pl.col('high')),
                  failed=pl.col('result') != 'pass')
              .collect())
    summary = points.group_by('rank', maintain_order=True).agg(
        samples=pl.len(), out_of_band=pl.col('out').sum(),
        failed=pl.col('failed').sum(), unit=pl.col('unit').last(),
        first=pl.col('time').first(), last=pl.col('time').last(),
        last_value=pl.col('value').last())
    drawn = (points.with_columns(chunk=pl.col('i') // pl.col('step'))
             .group_by(['rank', 'chunk'], maintain_order=True).agg(
                 time=pl.col('time').get(pl.len() // 2), value=pl.col('value').median(),
                 low=pl.col('low').last(), high=pl.col('high').last())
             .group_by('rank', maintain_order=True).agg('time', 'value', 'low', 'high'))
    summary_by_rank = {r['rank']: r for r in summary.iter_rows(named=True)}
    drawn_by_rank = {r['rank']: r for r in drawn.iter_rows(named=True)}
    found = []
    for cand in top.iter_rows(named=True):
        summary_row, drawn_row = summary_by_rank[cand['rank']], drawn_by_rank[cand['rank']]
        found.append(Series(*(cand[k] for k in SERIES_KEY), variable=cand['variable'],
                            unit=summary_row['unit'] or '', samples=summary_row['samples'],
                            times=drawn_row['time'], values=drawn_row['value'],
                            low=drawn_row['low'], high=drawn_row['high'],
                            out_of_band=summary_row['out_of_band'], failed=summary_row['failed'],
                            first=summary_row['first'], last=summary_row['last'],
                            last_value=summary_row['last_value']))
    found.sort(key=lambda s: (s.has_band, s.out_of_band > 0, s.samples), reverse=True)
    chosen = found[:limit]
    chosen.sort(key=lambda s: (s.kernel, s.variable, s.system, s.partition, s.stack, s.mode,
                               s.size, s.nodes))
    # what tells the drawn series apart: their systems, builds and libraries (``label``)
    apart = Apart.of(chosen, kernel_place)
    return [dataclasses.replace(s, where=apart.where(s)) for s in chosen], total


def history(records: Sequence[Record], limit: int = DEFAULT_LIMIT,
            max_points: int = DEFAULT_MAX_POINTS) -> tuple[list[Series], int]:
    """The series to draw from `records`, and how many series there are in all."""
    from .store import frames
    return series(*frames(records).lazy(), limit, max_points)


COLUMNS = ('series', 'unit', 'samples', 'first', 'last', 'last value', 'band',
           'outside band', 'failed runs')


def rows(series: list[Series]) -> list[list[object]]:
    out: list[list[object]] = []
    for s in series:
        lo, hi = s.low[-1], s.high[-1]
        lo_s = '-inf' if lo is None else f'{lo:.4g}'
        hi_s = 'inf' if hi is None else f'{hi:.4g}'
        band = 'none' if lo is None and hi is None else f'{lo_s} .. {hi_s}'
        first = s.times[0] if s.first is None else s.first
        last = s.times[-1] if s.last is None else s.last
        value = s.values[-1] if s.last_value is None else s.last_value
        out.append([s.label, s.unit, s.samples, f'{first:%Y-%m-%d %H:%M}',
                    f'{last:%Y-%m-%d %H:%M}', f'{value:.4g}', band,
                    s.out_of_band, s.failed])
    return out
