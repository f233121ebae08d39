"""Pair hybrid runs with pure-MPI runs at equal cores and judge them.

A pair is (system, partition, stack, kernel, size, cores): the pure-MPI runs
(mode ``mpi``) against the runs of one hybrid mode and layout on the same
number of cores.  The speedup is T_mpi / T_hybrid with T the median total time
of each side; above 1 hybrid is faster.

The verdict rests on the samples.  Each side's relative standard error is
stdev / mean / sqrt(n); the pair's noise is twice their quadrature sum (about
a 95% band on the ratio), never below a floor (by default 5%: the run-to-run
jitter of a shared machine, which one sample cannot measure).  More samples
narrow the band.  WIN when the speedup exceeds 1 + noise, LOSS when it is below
1 / (1 + noise), TIE otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from .perflog import Record, size_key  # noqa: F401  (re-exported: html, plots)

DEFAULT_NOISE_FLOOR = 0.05
TIME_VARIABLE = 't_total'


@dataclasses.dataclass(frozen=True)
class Verdict:
    system: str
    partition: str
    stack: str
    kernel: str
    size: str
    cores: int
    hybrid_mode: str
    hybrid_layout: str      # "R x T" of the hybrid runs
    mpi_layout: str
    t_mpi: float            # median seconds
    t_hybrid: float
    n_mpi: int
    n_hybrid: int
    speedup: float          # T_mpi / T_hybrid
    noise: float            # relative, the band around 1 inside which it is a TIE
    verdict: str            # WIN, LOSS or TIE (for hybrid)
    mpi_library: str


def relative_error(samples: list[float]) -> float:
    """Relative standard error of the mean; 0 for a single sample."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    if mean <= 0:
        return 0.0
    return statistics.stdev(samples) / mean / math.sqrt(len(samples))


def pair_noise(a: list[float], b: list[float], floor: float) -> float:
    """The band around 1 inside which a ratio of the two sides is a TIE."""
    return max(floor, 2.0 * math.hypot(relative_error(a), relative_error(b)))


def judge(speedup: float, noise: float) -> str:
    if speedup > 1.0 + noise:
        return 'WIN'
    if speedup < 1.0 / (1.0 + noise):
        return 'LOSS'
    return 'TIE'



def verdicts(records: Iterable[Record], noise_floor: float = DEFAULT_NOISE_FLOOR,
             variable: str = TIME_VARIABLE) -> list[Verdict]:
    """One verdict per hybrid (mode, layout) that has a pure-MPI partner."""
    groups: dict[tuple, dict[tuple[str, str], list[Record]]] = defaultdict(
        lambda: defaultdict(list))
    for rec in records:
        if not rec.usable or variable not in rec.values:
            continue
        groups[(rec.group, rec.total_cores)][(rec.mode, rec.layout)].append(rec)

    out: list[Verdict] = []
    for (g, cores), sides in sorted(groups.items(),
                                    key=lambda kv: (kv[0][0].sort_key(), kv[0][1])):
        mpi_sides = [(lay, recs) for (mode, lay), recs in sides.items() if mode == 'mpi']
        if not mpi_sides:
            continue
        mpi_layout, mpi_recs = mpi_sides[0]
        t_mpi_samples = [r.values[variable] for r in mpi_recs]
        t_mpi = statistics.median(t_mpi_samples)
        for (mode, lay), recs in sorted(sides.items()):
            if mode == 'mpi':
                continue
            t_hyb_samples = [r.values[variable] for r in recs]
            t_hyb = statistics.median(t_hyb_samples)
            if t_hyb <= 0 or t_mpi <= 0:
                continue
            speedup = t_mpi / t_hyb
            noise = pair_noise(t_mpi_samples, t_hyb_samples, noise_floor)
            out.append(Verdict(
                system=g.system, partition=g.partition, stack=g.stack, kernel=g.kernel,
                size=g.size, cores=cores, hybrid_mode=mode, hybrid_layout=lay,
                mpi_layout=mpi_layout, t_mpi=t_mpi, t_hybrid=t_hyb,
                n_mpi=len(t_mpi_samples), n_hybrid=len(t_hyb_samples),
                speedup=speedup, noise=noise, verdict=judge(speedup, noise),
                mpi_library=recs[-1].mpi_library,
            ))
    return out
