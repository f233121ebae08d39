"""Chow & Hysom's efficiency decomposition and Rabenseifner's overlap model,
from the SpMV runs of the perflogs.

Efficiencies (seed 000; ser = the hybrid decomposition run with one thread):
  e_mt    = t_comp^ser / (n_t t_comp^hyb)    multithreading    (> 1 favours hybrid)
  e_cache = t_comp^mpi / t_comp^hyb          relative cache    (> 1 favours hybrid)
  e_ni    = t_comm^mpi / t_comm^hyb          network interface (> 1 favours hybrid)
  e_mp    = t_comm^hyb / t_comm^mpi          message passing   (< 1 favours hybrid)
With no overlap the model predicts
  T_hyb / T_mpi = (t_comp^mpi / e_cache + e_mp t_comm^mpi) / (t_comp^mpi + t_comm^mpi),
shown next to the measured ratio of total times.  e_ni compares the
exchanges of each layout's typical messages through the network: it is given
for runs on several nodes only.  On one node e_mp compares the intra-node
exchanges only (the `nodes` column says which).

Overlap (seed 001): the fractions of a masteronly call (f_comm; f_comp_non =
pack + boundary rows; f_comp_overlap = interior rows) give the predicted
eps = T_masteronly / T_funneled with one communicating thread, next to the
measured ratio.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from . import overlap
from .perflog import Record


@dataclasses.dataclass(frozen=True)
class Efficiency:
    system: str
    partition: str
    stack: str
    size: str
    nodes: int
    layout: str             # hybrid R x T
    e_mt: float | None
    e_cache: float
    e_ni: float | None       # several nodes only
    e_mp: float | None
    predicted: float | None  # T_hyb / T_mpi without overlap
    measured: float          # T_hyb / T_mpi
    samples: str = ''        # runs behind it: mpi/hybrid[/serial]


@dataclasses.dataclass(frozen=True)
class Overlap:
    system: str
    partition: str
    stack: str
    size: str
    layout: str
    prediction: overlap.Prediction
    measured: float | None   # T_masteronly / T_funneled
    samples: str = ''        # runs behind it: masteronly/funneled


def _median(recs: list[Record], var: str) -> float | None:
    vals = [r.values[var] for r in recs if var in r.values]
    return statistics.median(vals) if vals else None


def _groups(records: Iterable[Record]) -> dict[tuple, dict[tuple[str, int, int], list[Record]]]:
    groups: dict[tuple, dict[tuple[str, int, int], list[Record]]] = defaultdict(
        lambda: defaultdict(list))
    for rec in records:
        if rec.kernel == 'spmv' and rec.usable:
            groups[(rec.group, rec.cores)][(rec.mode, rec.ranks, rec.threads)].append(rec)
    return groups


def _sorted(groups):
    return sorted(groups.items(), key=lambda kv: (kv[0][0].sort_key(), kv[0][1]))


def efficiencies(records: Iterable[Record]) -> list[Efficiency]:
    out = []
    for (g, cores), runs in _sorted(_groups(records)):
        system, partition, stack, size, nodes = g.system, g.partition, g.stack, g.size, g.nodes
        mpi = runs.get(('mpi', cores, 1))
        if not mpi or not cores:
            continue
        comp_mpi, comm_mpi = _median(mpi, 't_comp'), _median(mpi, 't_comm')
        total_mpi = _median(mpi, 't_total')
        for (mode, ranks, threads), hyb in sorted(runs.items()):
            if mode != 'masteronly':
                continue
            comp_hyb, comm_hyb = _median(hyb, 't_comp'), _median(hyb, 't_comm')
            total_hyb = _median(hyb, 't_total')
            if not (comp_mpi and comp_hyb and total_mpi and total_hyb):
                continue
            ser = runs.get(('serial', ranks, 1))
            comp_ser = _median(ser, 't_comp') if ser else None
            e_mt = comp_ser / (threads * comp_hyb) if comp_ser else None
            e_cache = comp_mpi / comp_hyb
            e_mp = comm_hyb / comm_mpi if comm_mpi and comm_hyb is not None else None
            e_ni = comm_mpi / comm_hyb if nodes > 1 and comm_mpi and comm_hyb else None
            predicted = None
            if e_mp is not None and comm_mpi is not None:
                predicted = ((comp_mpi / e_cache + e_mp * comm_mpi) / (comp_mpi + comm_mpi))
            n = f'{len(mpi)}/{len(hyb)}' + (f'/{len(ser)}' if ser else '')
            out.append(Efficiency(system, partition, stack, size, nodes,
                                  f'{ranks}x{threads}', e_mt, e_cache, e_ni, e_mp, predicted,
                                  total_hyb / total_mpi, n))
    return out


def overlaps(records: Iterable[Record]) -> list[Overlap]:
    out = []
    for (g, _cores), runs in _sorted(_groups(records)):
        system, partition, stack, size = g.system, g.partition, g.stack, g.size
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
            t_master, t_fun = _median(master, 't_total'), (
                _median(funneled, 't_total') if funneled else None)
            measured = t_master / t_fun if t_master and t_fun else None
            out.append(Overlap(system, partition, stack, size, f'{ranks}x{threads}', pred,
                               measured, f'{len(master)}/{len(funneled) if funneled else 0}'))
    return out


def _fmt(x: float | None) -> str:
    return 'n/a' if x is None else f'{x:.3f}'


EFF_COLUMNS = ('stack', 'partition', 'size', 'nodes', 'hybrid', 'e_mt', 'e_cache', 'e_ni',
               'e_mp',
               'T_hyb/T_mpi predicted', 'measured', 'samples')
OVL_COLUMNS = ('stack', 'partition', 'size', 'layout', 'f_comm', 'f_comp,non',
               'f_comp,overlap', 'eps predicted', 'eps measured', 'eps_max', 'f_comm,best',
               'f_comm,equiv', 'eps_min', 'samples')


def efficiency_rows(rows: list[Efficiency]) -> list[list[object]]:
    return [[e.stack, e.partition, e.size, e.nodes, e.layout, _fmt(e.e_mt), _fmt(e.e_cache),
             _fmt(e.e_ni), _fmt(e.e_mp), _fmt(e.predicted), _fmt(e.measured), e.samples]
            for e in rows]


def overlap_rows(rows: list[Overlap]) -> list[list[object]]:
    out = []
    for o in rows:
        p = o.prediction
        out.append([o.stack, o.partition, o.size, o.layout, _fmt(p.f_comm),
                    _fmt(p.f_comp_non), _fmt(p.f_comp_overlap), _fmt(p.eps),
                    _fmt(o.measured), _fmt(p.eps_max), _fmt(p.f_comm_best),
                    _fmt(p.f_comm_equiv), _fmt(p.eps_min), o.samples])
    return out


DIRECTIONS = ('e_mt, e_cache and e_ni above 1 favour hybrid; e_mp below 1 favours hybrid. '
              'On one node e_mp compares intra-node exchanges only, and e_ni (n/a) needs '
              'several nodes.')
