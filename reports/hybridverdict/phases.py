"""MD phase breakdown: pure MPI against hybrid, phase by phase (Chorley, Walker &
Guest, Tables 2-4).

The md check logs each phase as ``phase_<name>`` (slowest rank, seconds); the
medians stand side by side with the hybrid/MPI ratio (above 1: slower in hybrid),
one row set per ``Record.group`` and cores per node, against every pure-MPI layout.
Where one place (system, partition, stack, size and node count) holds rows of several
builds or MPI libraries, those rows carry theirs (``BuildPhaseRow``) and the table and
figure name it; rows of one build are plain ``PhaseRow``s.  Where the rows span several
systems, the table and figure name each row's system with its partition ('alpha:shm',
``Apart.partition``).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from .apart import Apart
from .records import Group, Place, Record
from .section import cell
from .verdict import layout_pairs

#: the md check's phases, then Chorley's two others (hloop, startup), shown where logged
PHASES = ('force', 'movout', 'sum', 'movea', 'moveb', 'neigh', 'hloop', 'startup')


@dataclasses.dataclass(frozen=True)
class PhaseRow(Place):
    phase: str
    mpi_layout: str
    hybrid: str            # "<mode> RxT"
    t_mpi: float           # median seconds
    t_hybrid: float
    samples: str           # "n_mpi/n_hybrid"
    nodes: int = 1
    cores: int = 0         # cores used per node (R x T)

    @property
    def ratio(self) -> float | None:
        """T_hybrid / T_mpi; None (n/a) where pure MPI took no time: 0/0 is no ratio,
        x/0 no number to show or plot."""
        return self.t_hybrid / self.t_mpi if self.t_mpi > 0 else None

    @property
    def stack_label(self) -> str:
        """The stack, and what tells the row from another build's (none here)."""
        return self.stack


@dataclasses.dataclass(frozen=True)
class BuildPhaseRow(PhaseRow):
    """A row of a place measured with several builds or MPI libraries: its own."""

    build: str = ''
    library: str = ''
    shown: str = ''        # what differs from the place's other rows: build and/or library

    @property
    def stack_label(self) -> str:
        return f'{self.stack} ({self.shown})'


def _place(g: Group) -> tuple:
    """A group's place: its builds and libraries are told apart (``BuildPhaseRow``)."""
    return (g.system, g.partition, g.stack, g.size, g.nodes)


def phase_rows(records: Iterable[Record]) -> list[PhaseRow]:
    groups: dict[tuple, dict[tuple[str, str], list[Record]]] = defaultdict(
        lambda: defaultdict(list))
    for rec in records:
        if rec.kernel != 'md' or not rec.usable:
            continue
        groups[(rec.group, rec.total_cores)][(rec.mode, rec.layout)].append(rec)
    rows: list[tuple[PhaseRow, Group]] = []
    for (g, cores), sides in sorted(groups.items(),
                                    key=lambda kv: (kv[0][0].sort_key(), kv[0][1])):
        # every pure-MPI layout of the group is a reference for every hybrid one
        for mpi_layout, mpi_recs, mode, lay, recs in layout_pairs(sides):
            for phase in PHASES:
                name = f'phase_{phase}'
                a = [r.values[name] for r in mpi_recs if name in r.values]
                b = [r.values[name] for r in recs if name in r.values]
                if not a or not b:
                    continue
                rows.append((PhaseRow(g.system, g.partition, g.stack, g.size, phase,
                                      mpi_layout, f'{mode} {lay}', statistics.median(a),
                                      statistics.median(b), f'{len(a)}/{len(b)}',
                                      nodes=g.nodes, cores=cores), g))
    # the rows of a place with several builds or libraries as BuildPhaseRows naming theirs
    apart = Apart.of((g for _, g in rows), _place)
    return [BuildPhaseRow(**dataclasses.asdict(row), build=g.build, library=g.library,
                          shown=apart.shown(g)) if apart.shown(g) else row for row, g in rows]


COLUMNS = ('stack', 'partition', 'size', 'nodes', 'phase', 'mpi', 'hybrid', 'T_mpi [s]',
           'T_hybrid [s]', 'hybrid/mpi', 'samples')


def table_rows(rows: list[PhaseRow]) -> list[list[object]]:
    apart = Apart.of(rows)       # the system where the rows span several
    return [[r.stack_label, apart.partition(r), r.size, r.nodes, r.phase, r.mpi_layout,
             r.hybrid, f'{r.t_mpi:.4g}', f'{r.t_hybrid:.4g}',
             cell(r.ratio, '.3f'), r.samples]
            for r in rows]
