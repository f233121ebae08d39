"""What an analysis gives the report: one ``Section`` (table, data, figure, notes).

Every analysis of the report is a function ``section(ctx: Context) -> Section``
listed once in ``sections.ANALYSES``; the report calls them in that order and the
renderers (terminal, Markdown, HTML, JSON) only format what the sections hold.
Adding an analysis is one new module with such a function and one line in that
list.  The keys below are the only place a section's or a figure's name is
spelled out; everything else refers to these constants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from .records import Record

# ---- section keys (JSON ids, HTML anchors) -------------------------------------------
MD_PHASES = 'md_phases'
SPMV_EFFICIENCIES = 'spmv_efficiencies'
SPMV_OVERLAP = 'spmv_overlap'
HOCKNEY = 'hockney'
STACK_COMPARISON = 'stack_comparison'
RING_VS_OSU = 'ring_vs_osu'
RING_OSU_ACCURACY = 'ring_osu_accuracy'
SATURATION = 'saturation'
COLLECTIVES = 'collectives'
HISTORY = 'history'
SCALING = 'scaling'
NETWORK_INTERFACE = 'network_interface'
MASTERONLY_ACROSS_NODES = 'masteronly_across_nodes'
UNJUDGED = 'unjudged'
FUNCTIONAL = 'functional_verdicts'
#: The morning page of a nightly (hybridverdict.changes): first in every output,
#: before the verdicts.
SINCE_LAST_NIGHT = 'since_last_night'
LEADING = frozenset({SINCE_LAST_NIGHT})

# ---- figure keys (``plots.DRAWERS``; a section names the one drawn for it) -----------
FIG_SPEEDUP = 'speedup'
FIG_HEATMAPS = 'heatmaps'
FIG_EFFICIENCIES = 'efficiencies'
FIG_PHASES = 'phases'
FIG_HOCKNEY = 'hockney'
FIG_SATURATION = 'saturation'
FIG_STACKS = 'stacks'
FIG_COLLECTIVES = 'collectives'
FIG_HISTORY = 'history'
FIG_SCALING = 'scaling'


#: An analysis's table: its rows of cells, and the same rows as JSON data.
Table = tuple[list[list[object]], list[dict]]


def empty_table() -> Table:
    """The rows and the data of a table yet to be filled."""
    return [], []


def cell(x: float | None, spec: str = '.3g') -> str:
    """A table's number in `spec`, or ``n/a`` where there is none."""
    return 'n/a' if x is None else format(x, spec)


@dataclasses.dataclass
class Section:
    """One analysis table beside the verdicts."""

    title: str
    note: str
    columns: tuple[str, ...]
    rows: list[list[object]]
    data: list[dict]
    figure: str = ''          # key of the figure drawn for it (HTML only)
    key: str = ''             # short name, for the JSON and the HTML anchors
    needs: str = 'no matching runs'   # what data it needs, said where it has none
    standalone: bool = False  # worth a report even without any verdict


@dataclasses.dataclass
class Context:
    """What every analysis is computed from, and the objects they share.

    ``window``: the records of the report (since ``--since``); ``records``: all
    records read (the history uses them, or the history store's tables
    ``stored``).  ``shared`` holds the analysis objects that more than one section
    or figure uses (e.g. the headline figures behind both the stack comparison and
    ring against OSU), computed once by ``get``.
    """

    window: Sequence[Record]
    records: Sequence[Record]
    noise_floor: float
    history_limit: int
    history_points: int
    #: the history store's (records, values) tables, when the history comes from it
    #: rather than from `records`
    stored: tuple[pl.LazyFrame, pl.LazyFrame] | None = None
    #: judge the pairs whose runs were oversubscribed too, as functional verdicts
    #: (``hybridverdict --functional-verdicts``)
    functional: bool = False
    shared: dict[str, Any] = dataclasses.field(default_factory=dict)

    def get(self, name: str, compute: Callable[[], Any]) -> Any:
        """``shared[name]``, computed by `compute` the first time it is asked for."""
        if name not in self.shared:
            self.shared[name] = compute()
        return self.shared[name]


#: an analysis: the records in, its section out (None: an analysis the report
#: was not asked for, e.g. the functional verdicts without --functional-verdicts)
Analysis = Callable[[Context], Section | None]
