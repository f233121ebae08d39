"""Topology and layouts: cores per node, the R x T layouts that fill a node,
the sizes of the kernel checks, point-to-point placement, the rounds of
every run (each pair's two runs side by side), and the session's plan
(``harnesscore.plan``) as the checks see it."""

from __future__ import annotations

import contextlib
import functools

import reframe.core.runtime as rt
from harnesscore import plan as _plan
from harnesscore.host import host_cores
from harnesscore.plan import (  # noqa: F401  (the checks' API)
    MAX_FIRST_ROUND,
    MAX_SAMPLES,
    cores_per_node,
    divisors,
    first_round,
    layout_name,
    parse_layout,
    samples_per_run,
)
from reframe.core.builtins import parameter
from reframe.core.exceptions import ReframeFatalError

from .compat import registered_variants


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


def _partitions() -> list:
    try:
        return list(rt.runtime().system.partitions)
    except ReframeFatalError:   # no runtime: imported outside reframe (pytest)
        return []


def declared_system() -> bool:
    """True where every partition of the current system declares its topology
    (``extras['declared_topology']``): its runs are at tiny sizes (the
    pipeline's test; oversubscribed on purpose where the machine has fewer
    cores than declared)."""
    parts = _partitions()
    return bool(parts) and all(p.extras.get('declared_topology') for p in parts)


def system_sizes(kernel: str) -> list:
    """The ``problem`` values of a kernel check: the sizes the plan gives each
    partition (``plan.partition_sizes``); on a system that is not wholly
    declared ``plan.SIZES`` too."""
    sizes = set() if declared_system() else set(_plan.SIZES[kernel])
    for part in _partitions():
        with contextlib.suppress(ValueError):   # a partition of unknown topology
            sizes.update(_plan.partition_sizes(kernel, _plan.Topology.from_partition(part)))
    if not sizes:   # a declared system whose topology cannot be read
        sizes.update(_plan.TINY_SIZES[kernel])
    return sorted(sizes, key=lambda s: (str(type(s)), s))


def kernel_parameters(kernel: str, serial: bool = False) -> tuple:
    """The ``layout``, ``problem`` and ``sample`` parameters of a kernel check,
    in the order its display name shows them: every layout of the system's
    partitions (`serial`: and the serial runs behind e_mt), typed so that
    ``-P layout=masteronly_1x2`` works; the kernel's sizes, typed
    (``-P problem=24``); its samples (``sample_parameter``)."""
    runs = runs_for(_plan.HYBRID_MODES[kernel]) + (serial_runs() if serial else [])
    sizes = system_sizes(kernel)
    if isinstance(sizes[0], int):
        # -P problem=abc: the plan's message, not int's traceback inside ReFrame
        size_type = _plan.parse_integer('problem', str(sizes[0]))
    else:
        size_type = type(sizes[0])
    return (parameter(runs, fmt=layout_name, type=parse_layout),
            parameter(sizes, type=size_type), sample_parameter())


def system_layouts() -> list[tuple[int, int]]:
    """Every R x T with R*T = cores per node, over all partitions of the system."""
    core_counts = set()
    for part in _partitions():
        with contextlib.suppress(ValueError):   # a partition of unknown topology
            core_counts.add(cores_per_node(part))
    if not core_counts:   # no runtime, or no partition with a topology: this machine's cores
        core_counts.add(host_cores())
    layouts = set()
    for cores in core_counts:
        layouts.update(_divisor_layouts(cores))
    # by threads per rank, then ranks
    return sorted(layouts, key=lambda lay: (lay[1], lay[0]))


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


def sample_parameter():
    """The ``sample`` parameter of a kernel check: its rounds, ``HARNESS_REPEAT``
    of them numbered from ``HARNESS_FIRST_ROUND`` (0; the sequential rounds of
    ``hybridverdict.sequential`` go on from where the planned ones ended, so
    every round of a session has a name of its own).

    Declare it last, so that the display name reads
    ``SpmvCheck %layout=mpi_2x1 %problem=64 %sample=0`` and
    ``-n 'SpmvCheck%layout=mpi_2x1'`` still selects a layout.
    """
    first = first_round()
    return parameter(range(first, first + samples_per_run()),
                     type=_plan.parse_integer('sample', str(first)))


def round_order(layouts: list, rnd: int) -> list:
    """The order of one round of one size: each pure-MPI layout among the
    hybrid layouts of its core count, so that every hybrid run sits next to
    it (half of them before, half after; two hybrid modes of one layout are
    both its neighbours), and the order reversed on every other round, so
    that a hybrid run comes before its pure-MPI run in one round and after it
    in the next (a drift of the machine cancels over the rounds).  Layouts
    without a pure-MPI partner (serial runs, a core count without pure MPI)
    come after the blocks."""
    blocks, rest = [], []
    by_cores: dict[int, list] = {}
    for lay in layouts:
        by_cores.setdefault(lay[1] * lay[2], []).append(lay)
    for cores, group in by_cores.items():
        mpi = ('mpi', cores, 1)
        if mpi not in group:
            rest += group
            continue
        hybrids = [lay for lay in group if lay[0] not in ('mpi', 'serial')]
        rest += [lay for lay in group if lay[0] == 'serial']
        half = (len(hybrids) + 1) // 2
        block = hybrids[:half] + [mpi] + hybrids[half:]
        blocks.append(block[::-1] if rnd % 2 else block)
    return [lay for block in blocks for lay in block] + rest


def _layout_of(params: dict) -> tuple | None:
    """A variant's (mode, ranks, threads), or None where it has none."""
    lay = params.get('layout')
    return tuple(lay) if isinstance(lay, tuple) and len(lay) == 3 else None


def interleave_samples(cls):
    """Class decorator, above ``@rfm.simple_test``: run the check's variants
    round by round, and within a round size by size, each size's layouts in
    ``round_order``: the two runs of a verdict side by side, their order
    alternating from round to round, so that each round's ratio T_mpi /
    T_hybrid shares that moment's state of the machine (issue 25).

    ReFrame runs a module's tests in the order they were registered (its
    serial policy keeps the order, after the dependencies of each test; the
    kernel checks depend only on their build), and registers a class's
    variants in the order of its parameter space, the last parameter fastest.
    The sample parameter stays last in the display name
    (``-n 'SpmvCheck%layout=mpi_2x1'`` still selects), and this reorders the
    registration (``compat.registered_variants``).  ``--exec-order``
    overrides it (docs/pages/plan.md, "Pairs side by side").
    """
    entries = registered_variants(cls)
    if not entries:
        return cls
    nums = [entry[1].get('variant_num', 0) for entry in entries]
    params = {num: cls.get_variant_info(num, recurse=True)['params'] for num in nums}
    # the variants' layouts, each once, in the order of registration
    layouts = [lay for lay in dict.fromkeys(map(_layout_of, params.values())) if lay is not None]
    positions = {}   # {round: {layout: its place in the round}}
    for rnd in {variant.get('sample', 0) for variant in params.values()}:
        positions[rnd] = {lay: i for i, lay in enumerate(round_order(layouts, rnd))}

    def key(entry: tuple) -> tuple:
        num = entry[1].get('variant_num', 0)
        variant = params[num]
        rnd = variant.get('sample', 0)
        place = positions[rnd].get(_layout_of(variant), -1)
        return (rnd, str(variant.get('problem', '')), place, num)

    entries.sort(key=key)
    return cls


# ---- the plan -------------------------------------------------------------------

_cached_plan = functools.cache(_plan.session_plan)


def partition_plan(partition, nodes: int | None = None) -> _plan.Plan:
    """The session's plan for `partition` (``HARNESS_REPEAT`` samples,
    ``HARNESS_BUDGET`` split across the system's partitions and stacks, or
    per part as ``./harness`` exports it), as ``python -m harnesslib.plan``
    prints it; in a batch of the sequential rounds (``HARNESS_FIRST_ROUND``
    > 0) as ``plan.session_plan`` says."""
    topo = _plan.Topology.from_partition(partition, nodes)
    # The stacks selected (-p); a partition with none runs nothing (where no
    # partition has one, each counts once, as python -m harnesslib.plan does).
    stacks = [len(p.environs) for p in _partitions()]
    parts = sum(stacks) or len(stacks) or 1
    return _cached_plan(topo, samples_per_run(), _plan.budget_from_env(parts),
                        first_round() > 0)


def print_plans() -> None:
    """One summary line per partition, where the checks are loaded (so it
    shows in ``reframe --list`` and ``--dry-run``); the full plan:
    ``python -m harnesslib.plan``."""
    from reframe.core.logging import getlogger
    for part in _partitions():
        try:
            getlogger().info(partition_plan(part).summary())
        except ValueError as err:
            getlogger().warning(f'plan {part.fullname}: {err}')


