"""Topology and layouts: cores per node, the R x T layouts that fill a node,
point-to-point placement, and the samples of every run."""

from __future__ import annotations

import os

import reframe.core.runtime as rt
from reframe.core.builtins import parameter
from reframe.core.exceptions import ReframeFatalError


def cores_per_node(partition) -> int:
    """Physical cores of one node of `partition` (detected or configured)."""
    proc = partition.processor
    if proc.num_cores:
        return int(proc.num_cores)
    if proc.num_cpus:
        return int(proc.num_cpus) // int(proc.num_cpus_per_core or 1)
    if partition.scheduler.registered_name == 'local':
        return len(os.sched_getaffinity(0))
    raise ValueError(f'partition {partition.fullname}: processor topology unknown; '
                     f'run reframe --detect-host-topology or set "processor"')


def divisors(n: int) -> list[int]:
    """1 .. n, the numbers that divide n."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _divisor_layouts(cores: int) -> list[tuple[int, int]]:
    return [(cores // t, t) for t in divisors(cores)]


def pt2pt_placement(partition, cores: int, nodes: int) -> tuple[int, int, str]:
    """(ranks per node, nodes, reason to skip or '') of a 2-rank
    point-to-point run: one rank per node on a partition of several nodes,
    else both on one node (which needs 2 cores)."""
    if nodes >= 2:
        return 1, 2, ''
    if cores < 2:
        return 0, 0, f'needs 2 cores per node, {partition.fullname} has {cores}'
    return 2, 1, ''


def system_layouts() -> list[tuple[int, int]]:
    """Every R x T with R*T = cores per node, over all partitions of the system."""
    try:
        partitions = rt.runtime().system.partitions
    except ReframeFatalError:   # no runtime: imported outside reframe (pytest)
        partitions = []
    cores = set()
    for part in partitions:
        try:
            cores.add(cores_per_node(part))
        except ValueError:
            continue
    if not cores:
        cores.add(len(os.sched_getaffinity(0)))
    return sorted({lay for c in cores for lay in _divisor_layouts(c)},
                  key=lambda rt_: (rt_[1], rt_[0]))


def runs_for(hybrid_modes: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(mode, ranks per node, threads per rank) for every layout."""
    out = []
    for ranks, threads in system_layouts():
        modes = ('mpi',) if threads == 1 else hybrid_modes
        out += [(mode, ranks, threads) for mode in modes]
    return out


def serial_runs() -> list[tuple[str, int, int]]:
    """('serial', R, T) for every hybrid layout R x T (T > 1): R single-thread
    ranks, each with the subdomain of a T-thread rank (Chow & Hysom's
    SPMV-Serial, the reference of the multithreading efficiency e_mt)."""
    return [('serial', ranks, threads) for ranks, threads in system_layouts() if threads > 1]


def layout_name(layout: tuple[str, int, int]) -> str:
    mode, ranks, threads = layout
    if mode == 'serial':
        return f'serial_{ranks}x1_decomp{threads}'
    return f'{mode}_{ranks}x{threads}'


def sample_parameter():
    """The ``sample`` parameter of a kernel check: HARNESS_REPEAT samples.

    Declare it last, so that the display name reads
    ``SpmvCheck %layout=mpi_2x1 %problem=64 %sample=0`` and
    ``-n 'SpmvCheck%layout=mpi_2x1'`` still selects a layout.
    """
    return parameter(range(samples_per_run()))


def samples_per_run() -> int:
    """Samples of every kernel run (``HARNESS_REPEAT``, default 3).

    The samples are a parameter of the checks rather than ReFrame's
    ``--repeat``: the verdict checks depend on every sample of the runs they
    judge, and ``--repeat`` renumbers the variants those dependencies name.
    """
    text = os.environ.get('HARNESS_REPEAT', '3').strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_SAMPLES:
        raise ValueError(f'HARNESS_REPEAT must be an integer from 1 to {MAX_SAMPLES}, '
                         f'got {text!r}')
    return int(text)


#: Most samples per run: each is a test case of every layout and size (a
#: larger count only makes ReFrame build an unusable test graph for minutes).
MAX_SAMPLES = 100
