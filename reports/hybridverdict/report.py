"""Everything one report holds, computed once from the records for every output.

``build`` turns records into a ``Report``: what the data is (``Meta``), the
verdicts, the analysis sections of the registry ``sections.ANALYSES``, the history
series and the objects the figures are drawn from.  The renderers (``render``,
``html``, ``tidy``) only format what is here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

import polars as pl
from harnesscore import stats as stats_rule

from . import __version__, changes, comm, history, phases, sections, spmv_model
from .records import ReadStats, Record, one_line
from .section import Context, Section
from .verdict import DEFAULT_NOISE_FLOOR, Verdict, verdicts


@dataclasses.dataclass
class Meta:
    """What a report is made of: named in every output."""

    generated: dt.datetime
    version: str
    inputs: list[str]
    since: dt.datetime | None
    records: int                          # in the report's window
    records_read: int                     # all read (the history uses them all)
    skipped: int
    warnings: list[str]
    systems: list[str]
    stacks: dict[str, list[str]]          # stack -> MPI library versions
    first: dt.datetime | None
    last: dt.datetime | None

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ('generated', 'since', 'first', 'last'):
            d[k] = d[k].isoformat() if d[k] else None
        return d

    @property
    def dates(self) -> str:
        if self.first is None or self.last is None:
            return 'no runs'
        return f'{self.first:%Y-%m-%d %H:%M} .. {self.last:%Y-%m-%d %H:%M} UTC'

    def lines(self) -> list[str]:
        """The description every output starts with."""
        out = [f'System: {", ".join(self.systems) or "none"}; runs {self.dates}; '
               f'{self.records} records'
               + (f' since {self.since.isoformat()}' if self.since else '')
               + f' ({self.records_read} read for the history, {self.skipped} lines skipped).',
               'Stacks and MPI libraries:']
        for stack, libs in self.stacks.items():
            out.append(f'- {stack}: {one_line("; ".join(libs)) or "unknown"}')
        return out


@dataclasses.dataclass
class Report:
    meta: Meta
    verdicts: list[Verdict]
    sections: list[Section]
    history: list[history.Series]
    history_total: int
    curves: list[comm.Curve]
    headlines: list[comm.Headline]
    saturation: list[comm.Saturation]
    collectives: list[comm.Collective]
    efficiencies: list[spmv_model.Efficiency]
    phases: list[phases.PhaseRow]
    records: Sequence[Record]             # the window

    def section(self, key: str) -> Section | None:
        """The analysis section of that key (``section``'s constants), if the
        report has it."""
        return next((sec for sec in self.sections if sec.key == key), None)


def _meta(window: Sequence[Record], read: int, stats: ReadStats, inputs: list[str],
          since: dt.datetime | None) -> Meta:
    libs: dict[str, set[str]] = defaultdict(set)
    for r in window:
        libs[r.stack].update({r.mpi_library} - {''})
    times = [r.time for r in window]
    return Meta(generated=dt.datetime.now(dt.timezone.utc), version=__version__,
                inputs=list(inputs), since=since, records=len(window), records_read=read,
                skipped=stats.skipped, warnings=stats.warnings(),
                systems=sorted({r.system for r in window}),
                stacks={s: sorted(v) for s, v in sorted(libs.items())},
                first=min(times, default=None), last=max(times, default=None))


def recent_sessions(records: pl.LazyFrame, values: pl.LazyFrame,
                    sessions: int = stats_rule.CONFIRM_SESSIONS) -> list[Record]:
    """The records of the last `sessions` sessions of each system in the history
    store (what a verdict's confirmation reads, ``verdict.session_calls``: several
    systems' sessions alternate), without reading the rest of the history."""
    from .store import records_from
    number = changes.session_numbers(records, stats_rule.SESSION_GAP)
    if number.is_empty():
        return []
    latest = pl.col('_session').rank('dense', descending=True).over('system')
    recent = (records.with_columns(_session=pl.lit(number)).filter(latest <= sessions)
              .drop('_session').collect())
    vals = values.join(recent.lazy().select('rid'), on='rid').collect()
    return records_from(recent, vals)


def build(records: Sequence[Record], stats: ReadStats, inputs: list[str],
          since: dt.datetime | None = None, noise_floor: float = DEFAULT_NOISE_FLOOR,
          history_limit: int = history.DEFAULT_LIMIT,
          history_points: int = history.DEFAULT_MAX_POINTS,
          stored: tuple[pl.LazyFrame, pl.LazyFrame] | None = None,
          stored_records: int = 0, functional: bool = False) -> Report:
    """The report of the records since `since`, with the history of all `records`, or
    of the history store's tables `stored` (``Store.scan()``; then `records` need only
    hold the window, and `stored_records` says how many records the store holds);
    `functional` adds the functional verdicts of oversubscribed runs
    (``verdict.functional``) in a section of their own."""
    window = records if since is None else [r for r in records if r.time >= since]
    ctx = Context(window=window, records=records, noise_floor=noise_floor,
                  history_limit=history_limit, history_points=history_points, stored=stored,
                  functional=functional)
    found = verdicts(window, noise_floor=noise_floor,
                     history=records if stored is None else recent_sessions(*stored))
    ctx.shared[sections.VERDICTS] = found
    built = [sec for sec in (analysis(ctx) for analysis in sections.ANALYSES)
             if sec is not None]
    series, total = ctx.shared.get(sections.HISTORY, ([], 0))
    read = stored_records if stored is not None else len(records)
    return Report(meta=_meta(window, read, stats, inputs, since), verdicts=found,
                  sections=built, history=series, history_total=total, records=window,
                  **{name: ctx.shared.get(name, []) for name in sections.FIGURE_OBJECTS})
