"""MD phase breakdown: pure MPI against hybrid, phase by phase.

Chorley, Walker & Guest (Tables 2-4) compare the time of each phase of a step
(forces, movout = halo + migration, sum = collectives, movea/moveb =
integration halves, neighbour build) between the MPI and hybrid layouts.  The
md check logs each phase as ``phase_<name>`` (slowest rank, seconds); this
module puts the medians side by side with the hybrid/MPI ratio (above 1: the
phase is slower in hybrid).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from .perflog import Record
from .verdict import size_key

PHASES = ('force', 'movout', 'sum', 'movea', 'moveb', 'neigh')


@dataclasses.dataclass(frozen=True)
class PhaseRow:
    system: str
    partition: str
    stack: str
    size: str
    phase: str
    mpi_layout: str
    hybrid: str            # "<mode> RxT"
    t_mpi: float           # median seconds
    t_hybrid: float
    samples: str           # "n_mpi/n_hybrid"

    @property
    def ratio(self) -> float:
        return self.t_hybrid / self.t_mpi if self.t_mpi > 0 else float('inf')


def phase_rows(records: Iterable[Record]) -> list[PhaseRow]:
    groups: dict[tuple, dict[tuple[str, str], list[Record]]] = defaultdict(
        lambda: defaultdict(list))
    for rec in records:
        if rec.kernel != 'md' or not rec.usable:
            continue
        key = (rec.system, rec.partition, rec.stack, rec.size, rec.total_cores)
        groups[key][(rec.mode, f'{rec.ranks}x{rec.threads}')].append(rec)
    rows: list[PhaseRow] = []
    for (system, partition, stack, size, _cores), sides in sorted(
            groups.items(), key=lambda kv: kv[0][:3] + (size_key(kv[0][3]),)):
        mpi = [(lay, recs) for (mode, lay), recs in sides.items() if mode == 'mpi']
        if not mpi:
            continue
        mpi_layout, mpi_recs = mpi[0]
        for (mode, lay), recs in sorted(sides.items()):
            if mode == 'mpi':
                continue
            for phase in PHASES:
                name = f'phase_{phase}'
                a = [r.values[name] for r in mpi_recs if name in r.values]
                b = [r.values[name] for r in recs if name in r.values]
                if not a or not b:
                    continue
                rows.append(PhaseRow(system, partition, stack, size, phase, mpi_layout,
                                     f'{mode} {lay}', statistics.median(a),
                                     statistics.median(b), f'{len(a)}/{len(b)}'))
    return rows


COLUMNS = ('stack', 'partition', 'size', 'phase', 'mpi', 'hybrid', 'T_mpi [s]',
           'T_hybrid [s]', 'hybrid/mpi', 'samples')


def table_rows(rows: list[PhaseRow]) -> list[list[object]]:
    return [[r.stack, r.partition, r.size, r.phase, r.mpi_layout, r.hybrid,
             f'{r.t_mpi:.4g}', f'{r.t_hybrid:.4g}', f'{r.ratio:.3f}', r.samples]
            for r in rows]
