"""Chow & Hysom's efficiency decomposition and Rabenseifner's overlap model,
from the SpMV runs of the perflogs (the formulas: docs/pages/science.md).

Efficiencies (seed 000; ser = the hybrid decomposition run with one thread;
every figure from the runs of one ``Record.group``, so of one node count p):
  e_mt    = t_comp^ser / (n_t t_comp^hyb)          multithreading     (> 1 favours hybrid)
  e_cache = t_comp^mpi / t_comp^hyb                relative cache     (> 1 favours hybrid)
  e_ni    = t_comm^mpi(m1) / t_comm^hyb(m2)        network interface  (> 1 favours hybrid)
  e_mp(p) = t_comm^hyb(p) / t_comm^mpi(p)          message passing    (< 1 favours hybrid)

e_ni is the paper's: measured on 2 nodes (its Table 8), each mode at its own
typical message size, so that it separates the sharing of the network interface
from the scaling that e_mp measures; every row of a size and layout shows it.  The
no-overlap prediction of T_hyb / T_mpi at p nodes takes e_cache from the one-node
runs (on one node it would restate the measured ratio: n/a there).  Overlap (seed
001): the fractions of a masteronly call give the predicted eps = T_masteronly /
T_funneled (``overlap``), next to the measured ratio.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections import defaultdict
from collections.abc import Iterable

from . import overlap
from .apart import Apart
from .records import Group, Place, Record
from .section import cell

#: the node count e_ni is measured on (Chow & Hysom, Table 8)
E_NI_NODES = 2
#: the times of a run the efficiencies are made of
TIMES = ('t_comp', 't_comm', 't_total')


@dataclasses.dataclass(frozen=True)
class Efficiency(Place):
    nodes: int
    layout: str             # hybrid R x T
    e_mt: float | None
    e_cache: float
    e_ni: float | None       # from the 2-node runs of this size and layout
    e_mp: float | None
    predicted: float | None  # T_hyb / T_mpi without overlap, from e_cache at one node
    measured: float          # T_hyb / T_mpi
    samples: str = ''        # runs behind it: mpi/hybrid[/serial]
    mpi_layout: str = ''     # the pure-MPI layout it is measured against
    e_cache_1: float | None = None   # the one-node e_cache the prediction used
    build: str = ''
    library: str = ''


@dataclasses.dataclass(frozen=True)
class NetworkInterface(Place):
    """e_ni of one size and layout pair, from its runs on ``E_NI_NODES`` nodes."""

    layout: str             # hybrid R x T
    mpi_layout: str
    comm_mpi: float         # median t_comm^mpi(m1), s
    comm_hybrid: float      # median t_comm^hyb(m2), s
    samples: str
    build: str = ''
    library: str = ''

    @property
    def e_ni(self) -> float:
        return self.comm_mpi / self.comm_hybrid


@dataclasses.dataclass(frozen=True)
class Overlap(Place):
    layout: str
    prediction: overlap.Prediction
    measured: float | None   # T_masteronly / T_funneled
    samples: str = ''        # runs behind it: masteronly/funneled
    nodes: int = 1
    build: str = ''
    library: str = ''


def _median(recs: list[Record] | None, var: str) -> float | None:
    vals = [r.values[var] for r in recs or () if var in r.values]
    return statistics.median(vals) if vals else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


Runs = dict[tuple[str, int, int], list[Record]]


def _groups(records: Iterable[Record]) -> dict[tuple[Group, int], Runs]:
    groups: dict[tuple[Group, int], Runs] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if rec.kernel == 'spmv' and rec.usable:
            groups[(rec.group, rec.cores)][(rec.mode, rec.ranks, rec.threads)].append(rec)
    return groups


def _sorted(groups):
    return sorted(groups.items(), key=lambda kv: (kv[0][0].sort_key(), kv[0][1]))


def _pairs(runs: Runs):
    """(pure-MPI key, its runs, hybrid masteronly key, its runs) at equal cores."""
    for (mode, ranks, threads), hyb in sorted(runs.items()):
        if mode != 'masteronly':
            continue
        for (m_mode, m_ranks, m_threads), mpi in sorted(runs.items()):
            if m_mode == 'mpi' and m_ranks * m_threads == ranks * threads:
                yield (m_ranks, m_threads), mpi, (ranks, threads), hyb


def network_interface(records: Iterable[Record]) -> list[NetworkInterface]:
    """e_ni per (group but nodes, size, layouts) from the runs on 2 nodes."""
    out = []
    for (g, _cores), runs in _sorted(_groups(records)):
        if g.nodes != E_NI_NODES:
            continue
        for (mr, mt), mpi, (hr, ht), hyb in _pairs(runs):
            comm_mpi, comm_hyb = _median(mpi, 't_comm'), _median(hyb, 't_comm')
            if comm_mpi and comm_hyb:
                out.append(NetworkInterface(g.system, g.partition, g.stack, g.size,
                                            f'{hr}x{ht}', f'{mr}x{mt}', comm_mpi, comm_hyb,
                                            f'{len(mpi)}/{len(hyb)}', g.build, g.library))
    return out


def efficiencies(records: Iterable[Record]) -> list[Efficiency]:
    groups = _groups(records)
    # where the inputs measured elsewhere come from: (group but nodes, cores, layouts)
    elsewhere: dict[tuple, dict[int, tuple[float | None, float | None]]] = defaultdict(dict)
    for (g, cores), runs in groups.items():
        for (mr, mt), mpi, (hr, ht), hyb in _pairs(runs):
            # (e_cache, e_ni) at this node count
            elsewhere[(g.across_nodes(), cores, mr, mt, hr, ht)][g.nodes] = tuple(
                _ratio(_median(mpi, v), _median(hyb, v)) for v in ('t_comp', 't_comm'))
    out = []
    for (g, cores), runs in _sorted(groups):
        for (mr, mt), mpi, (ranks, threads), hyb in _pairs(runs):
            comp_mpi, comm_mpi, total_mpi = (_median(mpi, v) for v in TIMES)
            comp_hyb, comm_hyb, total_hyb = (_median(hyb, v) for v in TIMES)
            if not (comp_mpi and comp_hyb and total_mpi and total_hyb):
                continue
            ser = runs.get(('serial', ranks, 1))
            comp_ser = _median(ser, 't_comp')
            e_mt = comp_ser / (threads * comp_hyb) if comp_ser else None
            e_cache = comp_mpi / comp_hyb
            e_mp = comm_hyb / comm_mpi if comm_mpi and comm_hyb is not None else None
            other = elsewhere[(g.across_nodes(), cores, mr, mt, ranks, threads)]
            e_ni = other.get(E_NI_NODES, (None, None))[1]
            e_cache_1 = other.get(1, (None, None))[0]
            predicted = None
            if g.nodes > 1 and e_cache_1 and e_mp is not None and comm_mpi is not None:
                predicted = ((comp_mpi / e_cache_1 + e_mp * comm_mpi) / (comp_mpi + comm_mpi))
            n = f'{len(mpi)}/{len(hyb)}' + (f'/{len(ser)}' if ser else '')
            out.append(Efficiency(g.system, g.partition, g.stack, g.size, g.nodes,
                                  f'{ranks}x{threads}', e_mt, e_cache, e_ni, e_mp, predicted,
                                  total_hyb / total_mpi, n, f'{mr}x{mt}', e_cache_1,
                                  g.build, g.library))
    return out


def overlaps(records: Iterable[Record]) -> list[Overlap]:
    out = []
    for (g, _cores), runs in _sorted(_groups(records)):
        for (mode, ranks, threads), master in sorted(runs.items()):
            if mode != 'masteronly' or threads < 2:
                continue
            parts = [_median(master, v) for v in
                     ('t_comm', 't_pack', 't_comp_boundary', 't_comp_interior')]
            if any(p is None for p in parts):
                continue
            comm, pack, boundary, interior = parts
            try:
                pred = overlap.predict(comm, pack + boundary, interior, n=threads, m=1)
            except overlap.ModelError:
                continue
            funneled = runs.get(('funneled', ranks, threads))
            measured = _ratio(_median(master, 't_total'), _median(funneled, 't_total'))
            out.append(Overlap(g.system, g.partition, g.stack, g.size, f'{ranks}x{threads}',
                               pred, measured,
                               f'{len(master)}/{len(funneled) if funneled else 0}',
                               nodes=g.nodes, build=g.build, library=g.library))
    return out


#: The models' numbers in the tables: three decimals.
_fmt = functools.partial(cell, spec='.3f')


EFF_COLUMNS = ('stack', 'partition', 'size', 'nodes', 'hybrid', 'e_mt', 'e_cache', 'e_ni',
               'e_mp', 'T_hyb/T_mpi predicted', 'measured', 'samples')
NI_COLUMNS = ('stack', 'partition', 'size', 'hybrid', 'mpi', 't_comm mpi [s]',
              't_comm hybrid [s]', 'e_ni', 'samples')
OVL_COLUMNS = ('stack', 'partition', 'size', 'nodes', 'layout', 'f_comm', 'f_comp,non',
               'f_comp,overlap', 'eps predicted', 'eps measured', 'eps_max', 'f_comm,best',
               'f_comm,equiv', 'eps_min', 'samples')


# Each table's rows name what tells them apart (``Apart``): the system where they span
# several ('alpha:shm'), the build and MPI library where one place (the row's other
# columns) holds several ('mpich (cmake Debug)').

def _efficiency_place(e: Efficiency | Overlap) -> tuple:
    return (e.system, e.partition, e.stack, e.size, e.nodes, e.layout)


def _ni_place(n: NetworkInterface) -> tuple:
    return (n.system, n.partition, n.stack, n.size, n.layout, n.mpi_layout)


def efficiency_rows(rows: list[Efficiency]) -> list[list[object]]:
    apart = Apart.of(rows, _efficiency_place)
    return [[apart.stack(e), apart.partition(e), e.size, e.nodes, e.layout, _fmt(e.e_mt),
             _fmt(e.e_cache), _fmt(e.e_ni), _fmt(e.e_mp), _fmt(e.predicted),
             _fmt(e.measured), e.samples]
            for e in rows]


def overlap_rows(rows: list[Overlap]) -> list[list[object]]:
    apart = Apart.of(rows, _efficiency_place)
    out = []
    for o in rows:
        p = o.prediction
        out.append([apart.stack(o), apart.partition(o), o.size, o.nodes, o.layout,
                    _fmt(p.f_comm), _fmt(p.f_comp_non), _fmt(p.f_comp_overlap), _fmt(p.eps),
                    _fmt(o.measured), _fmt(p.eps_max), _fmt(p.f_comm_best),
                    _fmt(p.f_comm_equiv), _fmt(p.eps_min), o.samples])
    return out


def ni_rows(rows: list[NetworkInterface]) -> list[list[object]]:
    apart = Apart.of(rows, _ni_place)
    return [[apart.stack(n), apart.partition(n), n.size, n.layout, n.mpi_layout,
             f'{n.comm_mpi:.4g}', f'{n.comm_hybrid:.4g}', _fmt(n.e_ni), n.samples]
            for n in rows]


DIRECTIONS = ('e_mt, e_cache and e_ni above 1 favour hybrid; e_mp below 1 favours hybrid. '
              'Each row is one node count. e_ni comes from the runs on 2 nodes of the same '
              'size and layouts (Chow & Hysom, Table 8), n/a without them. The predicted '
              'T_hyb/T_mpi (no overlap) takes e_cache from the one-node runs and e_mp, '
              't_comp^mpi and t_comm^mpi at the row\'s node count; n/a on one node, where '
              'it would restate the measured ratio. On one node e_mp compares intra-node '
              'exchanges only.')
