"""The plan of a session: which layouts, sizes and samples run on a node, why
the others do not, and how long it should take (docs/pages/plan.md says how
to read it, with the rules and the cost model in full).

From a node's topology the plan lists every kernel run the checks can
generate (layout x size x sample), leaves out what cannot run there
(``infeasible``: each rule is the kernel's own check, or the node's memory)
and then what does not fit the budget (``HARNESS_BUDGET``, per stack and
partition), and estimates each run with a simple cost model (``estimate``,
constants below).  It is printed before anything runs, and the checks follow
it: a run the plan leaves out is skipped before it starts, with its reason.

Nothing here imports ReFrame (``Topology.from_partition`` reads a partition
object it is given; the command line is ``harnesslib.plan``): the plan is a
pure function of its inputs, so unit tests can plan declared 16-, 64- and
128-core nodes.

Selection, within the budget: first every kernel's pure-MPI layout at every
feasible size (every verdict needs it), then the hybrid layouts by rank
(``hybrid_layouts``).  A hybrid layout at a size goes in with all its samples,
its verdicts (``pair_verdicts``) and (spmv) its serial run, or not at all.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence

from .host import host_cores
from .paths import user_path, var_dir
from .stats import DEFAULT_MAX_ROUNDS
from .units import message_sizes

# ---- the checks' parameter spaces --------------------------------------------------

#: Problem sizes of every kernel check (the checks' ``problem`` parameter).
SIZES: dict[str, tuple] = {
    'spmv': (16, 32, 64, 128),   # N^3 rows per core
    'md': (6, 12, 24),           # fcc cells per side, 4 L^3 atoms
    'ring': ('8,65536,1048576',),
    'stream': (8000000,),        # elements per core
}
#: Sizes on a partition that declares its topology (``uses_tiny_sizes``;
#: where the declared node is bigger than the machine its runs are
#: oversubscribed on purpose: a test of the pipeline, never of speed): md at
#: 7 cells per side is the smallest that runs on 16, 32 and 64 ranks.
TINY_SIZES: dict[str, tuple] = {
    'spmv': (8,),
    'md': (7,),
    'ring': ('8,4096',),
    'stream': (65536,),
}
#: STREAM elements per core of spmv's roofline run on such a system.
TINY_STREAM_ELEMENTS = 65536
#: Hybrid modes of every kernel check (besides ``mpi`` at T = 1).
HYBRID_MODES: dict[str, tuple[str, ...]] = {
    'spmv': ('masteronly', 'funneled'),
    'md': ('masteronly',),
    'ring': ('masteronly',),
    'stream': ('masteronly',),
}
#: Kernels with a serial run per hybrid layout (e_mt).
SERIAL_KERNELS = ('spmv',)
KERNELS = tuple(SIZES)


def kernel_modes(kernel: str) -> tuple[str, ...]:
    """Every mode a kernel check runs: ``mpi``, its hybrid modes and (spmv)
    ``serial``."""
    return ('mpi', *HYBRID_MODES[kernel], *(('serial',) if kernel in SERIAL_KERNELS else ()))


#: Minimum seconds of every timed loop (the kernels' ``--min-time``).
MIN_TIME = 0.2
#: Calls of spmv's timed loop before ``--min-time`` stretches it (serial: fewer).
SPMV_MIN_CALLS = 10
SPMV_SERIAL_MIN_CALLS = 3
#: Steps of md's timed loop before ``--min-time`` stretches it.
MD_MIN_STEPS = 100
#: Default budget per stack and partition, where no session budget is given
#: (a plain ``reframe`` run of the checks).
DEFAULT_BUDGET_S = 15 * 60.0
#: Default budget of a whole ``./harness run`` or ``nightly`` session, split
#: across its partitions and stacks (``HARNESS_BUDGET``).
DEFAULT_SESSION_BUDGET = '30m'
#: ``HARNESS_BUDGET=10m/part``: a budget per partition and stack instead.
PER_PART = '/part'


# ---- kernel facts ---------------------------------------------------------------

MD_DENSITY = 0.8442
MD_CUTOFF = 2.5
MD_SKIN = 0.3
INT_MAX = 2**31 - 1

#: Resident bytes per spmv row (CSR values and indices, x with its ghosts, y,
#: the reference): 358 and 349 measured at N = 64 (mpi, serial decomp 2).
SPMV_BYTES_PER_ROW = 360
#: Bytes one spmv call moves per row (the kernel's traffic model: 12 per
#: nonzero, 20 per row).
SPMV_BYTES_PER_CALL = 12 * 27 + 20
#: Resident bytes of any process besides its arrays (MPI, the binary).
PROCESS_BASE_BYTES = 32 * 2**20
#: Fraction of the node's memory a run may use.
MEM_FRACTION = 0.8
#: Memory of one serial process at most (bounds its time as well).
SERIAL_MEM_CAP = 2 * 2**30
#: STREAM elements per core of the roofline run before every spmv run
#: (``spmv_stream_elements``).
SPMV_STREAM_ELEMENTS = 8388608
STREAM_ITERS = 10
#: The most each kernel's option takes (src/: tests/test_kernel_ring_osu.py
#: reads them there): a larger ``-S`` value is refused at setup.
MAX_MIN_TIME = 3600.0            # every kernel's --min-time (kc_opt_min_time)
SPMV_MAX_ITERS = 1_000_000       # spmv --iters (SPMV_MAX_ITERS)
MD_MAX_STEPS = 1_000_000_000     # md --steps (MD_MAX_STEPS)
RING_MAX_REPS = 1000             # ring --reps
RING_MAX_ITERS_SCALE = 1000.0    # ring --iters-scale
STREAM_MAX_ITERS = 1_000_000     # stream --iters

# ---- cost model ---------------------------------------------------------------------

T_RUN = 1.0            # s: ReFrame's stage, job script, launcher start, per run
T_PER_RANK = 0.01      # s per rank launched
BW_NODE_PER_CORE = 3e9   # B/s per core when every core streams (memory-bound node)
BW_CORE_MAX = 10e9     # B/s one core gets alone
SPMV_OVERHEAD_CALLS = 4  # 3 warm-up calls, the verification
SPMV_SETUP_ROW = 1.5e-6  # s per row on one core: assembly and first touch (1.3 measured)
FIRST_TOUCH = 2.5e-9   # s per byte a core first touches (STREAM's arrays: 2.9 measured)
MD_ATOM_STEP = 0.7e-6  # s per atom and step on one core (0.43-0.63 us measured)
MD_STEP_COMM = 50e-6   # s per step of halo swaps, migration and sums (several ranks)
MD_OVERHEAD_STEPS = 20
RING_RUN = 0.5         # s per ring run (3 sizes, 3 repetitions)
#: The largest k the ring kernel takes with ``--k`` (src/ring.c's RING_MAX_K:
#: k x 16 MiB must fit an int count; tests/test_plan.py reads the define).
RING_MAX_K = 64
T_VERDICT = 0.5        # s per verdict (a local job that prints it)
T_BUILD = 60.0         # s per stack and partition (CMake build of the kernels)


# ---- topology ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Topology:
    """What the plan needs of a node (and of a run's nodes)."""

    cores: int
    sockets: int = 1
    numa: int = 1
    mem_bytes: int = 0          # 0: unknown (no memory rule)
    nodes: int = 1
    name: str = 'node'
    #: Declared bigger than the cores that run it: every run is oversubscribed
    #: and flagged (a test of the pipeline, never of speed).
    oversubscribed: bool = False
    #: CPUs online where the runs really execute (0: as many as ``cores``); a
    #: declared node's runs see this machine's.
    online_cpus: int = 0
    #: The partition declares its topology (``extras['declared_topology']``):
    #: spmv's roofline STREAM run is ``TINY_STREAM_ELEMENTS`` per core.
    declared: bool = False
    #: Stacks (environments) run on the partition: parts of the session's budget.
    stacks: int = dataclasses.field(default=1, compare=False)

    def __post_init__(self) -> None:
        for field in ('cores', 'sockets', 'numa', 'nodes'):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f'{self.name}: {field} must be a positive integer, '
                                 f'got {value!r}')
        if self.mem_bytes < 0:
            raise ValueError(f'{self.name}: memory must not be negative')

    def describe(self) -> str:
        mem = f'{self.mem_bytes / 2**30:.0f} GiB' if self.mem_bytes else 'memory unknown'
        over = ', declared: runs oversubscribed' if self.oversubscribed else ''
        return (f'{self.name}: {self.cores} cores, {self.sockets} socket(s), '
                f'{self.numa} NUMA domain(s), {mem}, {self.nodes} node(s) per run{over}')

    @classmethod
    def from_partition(cls, partition, nodes: int | None = None) -> Topology:
        """The topology of a ReFrame partition: its processor info (detected
        or declared in the configuration), ``extras['mem_per_node']`` or, on a
        local partition, this machine's memory (a remote partition that
        declares none: ``ASSUMED_MEM_PER_CORE`` per core); ``extras['nodes']``."""
        proc = partition.processor
        cores = cores_per_node(partition)
        # A count that does not divide the cores is taken for one.
        sockets = int(proc.num_sockets or 1)
        if cores % sockets:
            sockets = 1
        # An unknown NUMA count is at least one domain per socket.
        numa = int(proc.num_numa_nodes or 0) or sockets
        if cores % numa:
            numa = 1
        extras = partition.extras
        local = partition.scheduler.registered_name == 'local'
        declared = bool(extras.get('declared_topology'))
        if extras.get('mem_per_node'):
            mem = parse_memory(str(extras['mem_per_node']))
        elif local:
            mem = local_memory()
        else:
            # A remote node's memory is not this machine's: assume the usual
            # minimum of an HPC node until the configuration says otherwise.
            mem = cores * ASSUMED_MEM_PER_CORE
        # Declared bigger than this machine's physical cores (not its hardware
        # threads: two ranks on the threads of one core share it).
        over = declared and local and cores > host_cores()
        return cls(cores=cores, sockets=sockets, numa=numa, mem_bytes=mem,
                   nodes=int(nodes or extras.get('nodes', 1)), name=partition.fullname,
                   oversubscribed=over, online_cpus=(os.cpu_count() or 0) if over else 0,
                   declared=declared)


#: Memory per core assumed for a remote (Slurm) partition whose configuration
#: declares no ``extras['mem_per_node']``: 2 GiB, the usual minimum of HPC nodes.
ASSUMED_MEM_PER_CORE = 2 * 2**30


def local_memory() -> int:
    """This machine's physical memory in bytes (0 if unknown)."""
    try:
        return os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    except (ValueError, OSError, AttributeError):
        return 0


_UNITS = {'': 1, 'b': 1, 'k': 2**10, 'kib': 2**10, 'm': 2**20, 'mib': 2**20,
          'g': 2**30, 'gib': 2**30, 't': 2**40, 'tib': 2**40,
          'kb': 10**3, 'mb': 10**6, 'gb': 10**9, 'tb': 10**12}


#: The smallest memory of a node that ``parse_memory`` takes.
MIN_MEMORY = 2**20


def parse_memory(text: str) -> int:
    """``512GiB``, ``256G``, ``64GB``, ``1073741824``: bytes, at least
    ``MIN_MEMORY`` (a node's memory: ``0.5`` or ``0`` was 0 bytes, which the
    plan took for a memory it does not know, and planned every size)."""
    m = re.fullmatch(r'\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*', text)
    if not m or m.group(2).lower() not in _UNITS or not math.isfinite(float(m.group(1))):
        raise ValueError(f'not a memory size: {text!r} (e.g. 512GiB, 64GB, 256G)')
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size < MIN_MEMORY:
        raise ValueError(f'not a memory size of a node: {text!r} is {size} bytes, below 1MiB '
                         '(a number without a unit is bytes; e.g. 512GiB, 64GB, 256G)')
    return size


#: Longest session budget (a week): a longer one is a typo, and overflows the
#: shell's arithmetic of the session's deadline.
MAX_BUDGET_S = 7 * 24 * 3600


def parse_budget(text: str, given: str | None = None) -> float:
    """``HARNESS_BUDGET``: ``15m``, ``900s``, ``1h``, ``1h30m``; a bare number
    is minutes.  Seconds.  An error names `given` (the knob's whole value, where
    `text` is its duration before ``/part``), else `text`."""
    text = text.strip()
    shown = text if given is None else given.strip()
    if re.fullmatch(r'[0-9]+(\.[0-9]+)?', text):
        seconds = float(text) * 60
    else:
        parts = re.findall(r'([0-9]+(?:\.[0-9]+)?)([hms])', text)
        if not parts or ''.join(n + u for n, u in parts) != text:
            raise ValueError(f'HARNESS_BUDGET must be minutes or a duration such as 15m, '
                             f'900s, 1h30m; got {shown!r}')
        seconds = sum(float(n) * {'h': 3600, 'm': 60, 's': 1}[u] for n, u in parts)
    if not 0 < seconds <= MAX_BUDGET_S:
        raise ValueError(f'HARNESS_BUDGET must be positive and at most {MAX_BUDGET_S // 3600}h, '
                         f'got {shown!r}')
    return seconds


def parse_session_budget(text: str) -> tuple[float, bool]:
    """``HARNESS_BUDGET``: (seconds, per part).  ``30m`` is the whole session's,
    ``10m/part`` each partition and stack's."""
    text = text.strip()
    per_part = text.endswith(PER_PART)
    return parse_budget(text[:-len(PER_PART)] if per_part else text, text), per_part


def part_budget(text: str, parts: int) -> float:
    """Seconds for each of `parts` partition-and-stack parts of a session."""
    seconds, per_part = parse_session_budget(text)
    return seconds if per_part else seconds / max(1, parts)


def budget_from_env(parts: int = 1) -> float:
    """The budget of one partition and stack: ``HARNESS_BUDGET`` split across
    `parts`, or as given per part; unset, ``DEFAULT_BUDGET_S``."""
    text = os.environ.get('HARNESS_BUDGET', '').strip()
    return part_budget(text, parts) if text else DEFAULT_BUDGET_S


# ---- layouts -----------------------------------------------------------------------

Layout = tuple[str, int, int]   # (mode, ranks per node, threads per rank)


def divisors(n: int) -> list[int]:
    """1 .. n, the numbers that divide n, in order (found up to sqrt(n): a declared
    partition of many nodes has hundreds of thousands of ranks)."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


def layout_roles(topo: Topology) -> dict[tuple[int, int], str]:
    """The R x T layouts with a name: pure MPI, one rank per socket (Chorley's
    Hybrid 2), one per NUMA domain, one per node (Hybrid 1)."""
    cores = topo.cores
    roles: dict[tuple[int, int], list[str]] = {}
    roles.setdefault((cores, 1), []).append('mpi')
    if cores > 1:
        roles.setdefault((topo.sockets, cores // topo.sockets), []).append('per-socket')
        roles.setdefault((topo.numa, cores // topo.numa), []).append('per-NUMA')
        roles.setdefault((1, cores), []).append('per-node')
    return {lay: '/'.join(names) for lay, names in roles.items()}


def hybrid_layouts(topo: Topology) -> list[tuple[int, int]]:
    """Every R x T (T > 1) filling the node, in the plan's order: per socket,
    per NUMA domain, per node, then the other divisors from the middle out."""
    cores = topo.cores
    named = [lay for lay in layout_roles(topo) if lay[1] > 1]   # mpi is not hybrid
    rest = [(cores // t, t) for t in divisors(cores) if t > 1]
    # the threads' distance from sqrt(cores) on a log scale, more threads first
    rest.sort(key=lambda lay: (abs(math.log(lay[1]) - 0.5 * math.log(cores)), -lay[1]))
    return list(dict.fromkeys(named + rest))


def layout_name(layout: Layout) -> str:
    mode, ranks, threads = layout
    if mode == 'serial':
        return f'serial_{ranks}x1_decomp{threads}'
    return f'{mode}_{ranks}x{threads}'


class LayoutValue(tuple):
    """A (mode, ranks, threads) layout that prints as its name (what a test
    generated by ``-P layout=...`` shows in its display name)."""

    __slots__ = ()

    def __str__(self) -> str:
        return layout_name(self)  # type: ignore[arg-type]


def parse_layout(value: str | Sequence) -> Layout:
    """A layout from its name (``mpi_2x1``, ``masteronly_1x2``,
    ``serial_1x1_decomp2``) or a (mode, ranks, threads) sequence: the type of
    the checks' ``layout`` parameter, so ``-P layout=masteronly_1x2`` works."""
    if not isinstance(value, str):
        mode, ranks, threads = value
        return LayoutValue((str(mode), int(ranks), int(threads)))
    m = re.fullmatch(r'serial_(\d+)x1_decomp(\d+)', value.strip())
    if m:
        return LayoutValue(('serial', int(m.group(1)), int(m.group(2))))
    m = re.fullmatch(r'([a-z]+)_(\d+)x(\d+)', value.strip())
    if not m:
        raise ValueError(f'not a layout name: {value!r} (e.g. mpi_2x1, masteronly_1x2, '
                         f'serial_1x1_decomp2)')
    return LayoutValue((m.group(1), int(m.group(2)), int(m.group(3))))


def parse_integer(name: str, example: str):
    """The type of an integer parameter of the checks (``problem``, ``sample``):
    ``-P name=...`` as an int, or a ValueError naming the parameter (``int``
    itself raised inside ReFrame, which printed its own traceback)."""
    def parse(value) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if not re.fullmatch(r'[+-]?[0-9]+', text):
            raise ValueError(f'{name} must be an integer, got {value!r} (e.g. -P {name}='
                             f'{example})')
        return int(text)
    parse.__name__ = f'parse_{name}'
    return parse


# ---- feasibility -------------------------------------------------------------------

def dims_create(n: int) -> tuple[int, int, int]:
    """A 3-D grid of n ranks as balanced as possible, largest first (what
    ``MPI_Dims_create(n, 3)`` returns in MPICH and Open MPI)."""
    grids = []
    for a in divisors(n):
        for b in divisors(n // a):
            grids.append(tuple(sorted((a, b, n // a // b), reverse=True)))
    # The first of the most balanced (smallest spread, then smallest largest).
    return min(grids, key=lambda dims: (dims[0] - dims[2], dims[0]))  # type: ignore[return-value]


def _dims_greedy(n: int) -> tuple[int, int, int]:
    """Open MPI's MPI_Dims_create: the prime factors, largest first, each to
    the smallest dimension so far."""
    factors, rest, prime = [], n, 2
    while prime * prime <= rest:
        while rest % prime == 0:
            factors.append(prime)
            rest //= prime
        prime += 1
    if rest > 1:   # a prime factor above sqrt(n)
        factors.append(rest)
    dims = [1, 1, 1]
    for f in sorted(factors, reverse=True):
        dims[dims.index(min(dims))] *= f
    return tuple(sorted(dims, reverse=True))  # type: ignore[return-value]


def md_box(cells: int) -> float:
    return cells * (4.0 / MD_DENSITY) ** (1.0 / 3.0)


def _md_side(cells: int, ranks: int) -> float:
    """The width of md's sub-boxes at `cells` per side on `ranks` ranks: under
    both MPI_Dims_create algorithms the stacks use, the larger largest split."""
    return md_box(cells) / _md_grid(ranks)[0]


@functools.lru_cache(maxsize=1024)
def _md_grid(ranks: int) -> tuple[int, int, int]:
    """Of the grids both MPI_Dims_create algorithms give `ranks`, the one
    with the larger largest split (the narrower sub-boxes)."""
    return max(dims_create(ranks), _dims_greedy(ranks), key=lambda dims: dims[0])


def md_infeasible(cells: int, ranks: int) -> str:
    """Why md at `cells` per side cannot run on `ranks` ranks ('' if it can)."""
    box = md_box(cells)
    if MD_CUTOFF > 0.5 * box:
        return (f'md L={cells}: cutoff {MD_CUTOFF} exceeds half the box side '
                f'{0.5 * box:.3g}')
    side = _md_side(cells, ranks)
    if side < MD_CUTOFF + MD_SKIN:
        grid = 'x'.join(map(str, _md_grid(ranks)))
        return (f'md L={cells} on {ranks} ranks ({grid}): sub-boxes {side:.3g} wide < '
                f'cutoff+skin {MD_CUTOFF + MD_SKIN:g}; needs L >= '
                f'{md_min_cells(ranks)}')
    return ''


def md_min_cells(ranks: int) -> int:
    """The smallest L that md can run on `ranks` ranks."""
    cells = 1
    while MD_CUTOFF > 0.5 * md_box(cells) or _md_side(cells, ranks) < MD_CUTOFF + MD_SKIN:
        cells += 1
    return cells


def spmv_rows(n: int, decomp: int) -> int:
    """Rows of one spmv process: n^3 per thread of its decomposition."""
    return n ** 3 * decomp


def process_memory(kernel: str, layout: Layout, size) -> int:
    """Estimated resident bytes of one process of a run."""
    mode, ranks, threads = layout
    if kernel == 'spmv':
        return PROCESS_BASE_BYTES + spmv_rows(int(size), threads) * SPMV_BYTES_PER_ROW
    if kernel == 'stream':
        cores = 1 if mode == 'serial' else threads
        return PROCESS_BASE_BYTES + 24 * int(size) * cores
    if kernel == 'md':
        return PROCESS_BASE_BYTES + 4 * int(size) ** 3 * 400 // max(1, ranks)
    return PROCESS_BASE_BYTES + 64 * 2**20   # ring: buffers of a few MiB


def spmv_stream_elements(topo: Topology, override: int = 0) -> int:
    """STREAM elements per core of the roofline run before spmv, as the check
    runs it and the plan's memory rule and cost model count it: `override`
    (``-S SpmvCheck.stream_elements``) where given."""
    if override:
        return int(override)
    return TINY_STREAM_ELEMENTS if topo.declared else SPMV_STREAM_ELEMENTS


def bad_input(kernel: str, layout: Layout, size) -> str:
    """Why a run the checks cannot run at all was asked for (``-P
    layout=...``, ``-P problem=...``): a mode the kernel lacks, a size below 1
    ('' if neither)."""
    mode = layout[0]
    if mode not in kernel_modes(kernel):
        return (f'mode {mode} is not a mode of {kernel} (its modes: '
                f'{", ".join(kernel_modes(kernel))})')
    if kernel != 'ring' and int(size) < 1:
        return f'{kernel} problem size {size} must be a positive integer'
    return ''


def infeasible(kernel: str, layout: Layout, size, topo: Topology,
               stream_elements: int = 0) -> str:
    """Why `kernel` at `size` cannot run as `layout` on `topo` ('' if it can);
    `stream_elements`: spmv's ``-S stream_elements`` (``spmv_stream_elements``)."""
    mode, ranks, threads = layout
    why = bad_input(kernel, layout, size)
    if why:
        return why
    if ranks * threads != topo.cores:
        return f'{layout_name(layout)} does not fill the {topo.cores} cores of {topo.name}'
    if kernel == 'md':
        why = md_infeasible(int(size), ranks * topo.nodes)
        if why:
            return why
    if kernel == 'spmv':
        if mode in HYBRID_MODES['spmv'] and topo.online_cpus and threads > topo.online_cpus:
            return (f'spmv refuses {threads} threads per rank on {topo.online_cpus} online '
                    f'CPUs (a declared node bigger than the machine)')
        rows = spmv_rows(int(size), threads)
        if 27 * rows > INT_MAX:
            return (f'spmv n={size} decomp {threads}: {rows} rows per process, 27 nonzeros '
                    f'each exceed a 32-bit index')
        mem = process_memory(kernel, layout, size)
        if mode == 'serial' and mem > SERIAL_MEM_CAP:
            return (f'serial run of a {threads}-thread box at n={size}: {_gib(mem)} in one '
                    f'process, over the {_gib(SERIAL_MEM_CAP)} cap of serial runs (e_mt is '
                    f'measured at the smaller sizes)')
    if topo.mem_bytes:
        need = node_memory(kernel, layout, size)
        if kernel == 'spmv':   # the STREAM run before it (one after the other)
            need = max(need, node_memory('stream', layout,
                                         spmv_stream_elements(topo, stream_elements)))
        if need > MEM_FRACTION * topo.mem_bytes:
            return (f'{kernel} {size} as {layout_name(layout)}: {_gib(need)} per node, over '
                    f'{MEM_FRACTION:.0%} of the node\'s {_gib(topo.mem_bytes)}')
    return ''


def node_memory(kernel: str, layout: Layout, size) -> int:
    """Estimated bytes of a run on one node: its processes together."""
    return layout[1] * process_memory(kernel, layout, size)


def _gib(n: float) -> str:
    return f'{n / 2**30:.3g} GiB'


# ---- cost model --------------------------------------------------------------------

def _bandwidth(active_cores: int, topo: Topology) -> float:
    """Bytes/s one core gets while `active_cores` of the node stream."""
    return min(BW_CORE_MAX, BW_NODE_PER_CORE * topo.cores / max(1, active_cores))


def estimate(kernel: str, layout: Layout, size, topo: Topology,
             min_time: float = MIN_TIME) -> float:
    """Estimated seconds of one run (one sample), from launch to its end."""
    mode, ranks, threads = layout
    total_ranks = ranks * topo.nodes
    launch = T_RUN + T_PER_RANK * total_ranks
    workers = 1 if mode == 'serial' else threads   # cores of one process
    bw = _bandwidth(ranks * workers, topo)
    if kernel == 'spmv':
        rows = spmv_rows(int(size), threads)
        t_call = rows * SPMV_BYTES_PER_CALL / (workers * bw)
        floor = SPMV_SERIAL_MIN_CALLS if mode == 'serial' else SPMV_MIN_CALLS
        timed = max(min_time, floor * t_call)
        # The STREAM run before it: spmv_stream_elements on each of its cores.
        stream = launch + 24 * spmv_stream_elements(topo) * (7 / bw + FIRST_TOUCH)
        setup = rows * SPMV_SETUP_ROW / workers
        return launch + timed + SPMV_OVERHEAD_CALLS * t_call + setup + stream
    if kernel == 'md':
        atoms = 4 * int(size) ** 3
        t_step = atoms * MD_ATOM_STEP / (total_ranks * threads)
        if total_ranks > 1:
            t_step += MD_STEP_COMM
        return launch + max(min_time, MD_MIN_STEPS * t_step) + MD_OVERHEAD_STEPS * t_step
    if kernel == 'stream':
        return launch + 24 * int(size) * ((STREAM_ITERS + 2) / bw + FIRST_TOUCH)
    # Across nodes the ring runs once per k of its saturation curve.
    return (launch + RING_RUN) * len(ring_ks(layout, topo.nodes))


def ring_ks(layout: Layout, nodes: int) -> list[int]:
    """The k (communicating CPUs per node) a ring run measures, largest last:
    across nodes every divisor of the layout's largest k (its ranks per node,
    or threads per rank in the hybrid modes) up to ``RING_MAX_K`` (the kernel
    takes no larger ``--k``; the largest k is its default, given no ``--k``),
    Rabenseifner's saturation curve; on one node (every rank its own node)
    only the largest."""
    mode, ranks, threads = layout
    top = ranks if mode in ('mpi', 'serial') else threads
    if nodes < 2:
        return [top]
    return [k for k in divisors(top) if k <= RING_MAX_K or k == top]


# ---- the plan ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Run:
    """One kernel run (all its samples) in the plan, or left out of it."""

    kernel: str
    layout: Layout
    size: object
    role: str
    seconds: float           # estimate of one sample
    mem_per_process: int
    reason: str = ''         # why it is left out ('' if it runs)
    measured: bool = False   # seconds measured on this partition, not the cost model's

    @property
    def name(self) -> str:
        return layout_name(self.layout)


@dataclasses.dataclass
class Plan:
    topo: Topology
    samples: int
    budget_s: float
    min_time: float
    runs: list[Run] = dataclasses.field(default_factory=list)
    left_out: list[Run] = dataclasses.field(default_factory=list)
    verdicts: int = 0
    #: The sizes planned per kernel.
    sizes: dict[str, tuple] = dataclasses.field(default_factory=dict)
    #: In a batch of the sequential rounds (``HARNESS_FIRST_ROUND`` > 0, whose
    #: driver bounds the batch by its own budget): the runs (kernel, layout,
    #: size) the plan runs without a budget; a run left out only for the
    #: budget runs there (``decision``).  None: not a batch.
    unbudgeted: frozenset[tuple[str, tuple, str]] | None = None

    @property
    def run_seconds(self) -> float:
        return sum(r.seconds for r in self.runs) * self.samples

    @property
    def seconds(self) -> float:
        """Estimated seconds of the session, per stack: builds, runs, verdicts."""
        return T_BUILD + self.run_seconds + T_VERDICT * self.verdicts

    def decision(self, kernel: str, layout: Layout, size,
                 other_sizes: Iterable = (), stream_elements: int = 0) -> str:
        """Why a run is left out ('' if it runs).  A size in `other_sizes`
        (the other partitions' sizes of the system) but not in this plan is
        left out; any other size or layout outside the plan's lists (``-P
        problem=...``) is judged on feasibility alone.  `stream_elements`:
        spmv's ``-S stream_elements``, which its memory rule judges anew."""
        layout = parse_layout(layout)
        if stream_elements and kernel == 'spmv':
            why = infeasible(kernel, layout, size, self.topo, stream_elements)
            if why:
                return f'infeasible: {why}'
        if (kernel in self.sizes and str(size) not in map(str, self.sizes[kernel])
                and str(size) in map(str, other_sizes)):
            return (f'left out by the plan: {kernel} size {size} is another node\'s '
                    f'(sizes of {self.topo.name}: '
                    f'{", ".join(map(str, self.sizes[kernel]))})')
        run = self._planned_run(kernel, layout, size)
        if run is None:
            why = infeasible(kernel, layout, size, self.topo, stream_elements)
            return f'infeasible: {why}' if why else ''
        if stream_elements and kernel == 'spmv' and run.reason.startswith('infeasible'):
            return ''   # feasible with the STREAM size the check runs
        if self.unbudgeted is not None and run_key(run) in self.unbudgeted:
            return ''   # left out only for the budget, in a batch
        return run.reason and f'left out by the plan: {run.reason}'

    def _planned_run(self, kernel: str, layout: Layout, size) -> Run | None:
        """The run of `kernel` at `size` as `layout` the plan runs or left out
        (None: it has no such run)."""
        for run in (*self.runs, *self.left_out):
            if run.kernel == kernel and run.layout == layout and str(run.size) == str(size):
                return run
        return None

    def summary(self) -> str:
        total = len(self.runs) + len(self.left_out)
        fits = 'within' if self.seconds <= self.budget_s else 'OVER'
        return (f'plan {self.topo.name}: {len(self.runs)} of {total} runs x {self.samples} '
                f'samples + {self.verdicts} verdicts, estimated {self.seconds / 60:.1f} min per '
                f'stack, {fits} the budget of {self.budget_s / 60:.1f} min; '
                f'{len(self.left_out)} left out')

    def format(self, verbose: bool = True) -> str:
        lines = [self.topo.describe(),
                 f'  {self.samples} sample(s) per run, min-time {self.min_time:g} s, budget '
                 f'{self.budget_s / 60:.1f} min per stack (HARNESS_BUDGET)']
        if verbose:
            lines.append(f'  {"kernel":<7}{"layout":<26}{"size":<17}{"role":<22}'
                         f'{"s/sample":>9} {"mem/proc":>11}')
            lines += [f'  {r.kernel:<7}{r.name:<26}{str(r.size):<17}{r.role:<22}'
                      f"{r.seconds:>9.2f}{'*' if r.measured else ' '}"
                      f' {_gib(r.mem_per_process):>10}' for r in self.runs]
            if self.left_out:
                lines.append('  left out:')
                lines += [f'    {r.kernel} {r.name} {r.size}: {r.reason}' for r in self.left_out]
        known = sum(r.measured for r in self.runs)
        if known:
            lines.append(f'  {known} of {len(self.runs)} runs estimated from this '
                         f'partition\'s measured runs ({costs_path()}), the rest by the '
                         f'cost model')
        lines.append(f'  runs {self.run_seconds:.0f} s + verdicts '
                     f'{T_VERDICT * self.verdicts:.0f} s + build {T_BUILD:.0f} s')
        lines.append('  ' + self.summary())
        return '\n'.join(lines)


def run_key(run: Run) -> tuple[str, tuple, str]:
    """(kernel, layout, size) of a run, as ``Plan.unbudgeted`` holds it."""
    return run.kernel, tuple(run.layout), str(run.size)


def pair_verdicts(kernel: str, size) -> int:
    """Verdicts the checks make per hybrid run of `kernel` at `size` (what
    ``kernels._pairs`` generates): the ring's one per message size of its
    sweep (``units.message_sizes``), the other kernels' one."""
    return len(message_sizes(str(size))) if kernel == 'ring' else 1


def uses_tiny_sizes(topo: Topology) -> bool:
    """Whether the checks run `topo` at ``TINY_SIZES``: a partition that
    declares its topology (``extras['declared_topology']``), whether or not
    this machine has the cores to run it unoversubscribed.  The one rule of
    the plan (``session_plan``) and of the checks' sizes
    (``placement.system_sizes``)."""
    return topo.declared or topo.oversubscribed


def partition_sizes(kernel: str, topo: Topology) -> tuple:
    """The sizes of `kernel` the checks run on `topo`."""
    return tuple(TINY_SIZES[kernel]) if uses_tiny_sizes(topo) else node_sizes(kernel, topo)


def node_sizes(kernel: str, topo: Topology) -> tuple:
    """The sizes of `kernel` on `topo`: ``SIZES``, and for md also the
    smallest box that runs on the node's ranks where the smallest of
    ``SIZES`` does not (sizes follow the layout: L = 14 on 128 ranks, 7 on 16
    to 64), so a big node keeps a communication-heavy md size."""
    base = tuple(SIZES[kernel])
    if kernel == 'md':
        smallest = md_min_cells(topo.cores * topo.nodes)
        if smallest > min(base) and smallest not in base:
            return tuple(sorted((*base, smallest)))
    return base


# ---- measured costs --------------------------------------------------------------

#: The file of measured seconds per run (``HARNESS_PLAN_COSTS``; default
#: ``$HARNESS_VAR_DIR/plan-costs.json``): {partition: {"kernel layout size": s}},
#: written after every ``./harness`` session from its records
#: (``hybridverdict.sequential``).
COSTS_FILE = 'plan-costs.json'


def costs_path() -> str:
    knob = os.environ.get('HARNESS_PLAN_COSTS')
    return user_path(knob) if knob else os.path.join(var_dir(), COSTS_FILE)


def cost_key(kernel: str, layout: Layout, size) -> str:
    return f'{kernel} {layout_name(layout)} {size}'


def measured_costs(partition: str) -> dict[str, float]:
    """This partition's measured seconds per run by ``cost_key`` (none where the
    file is missing; an unreadable file is said on stderr and ignored)."""
    import json
    path = costs_path()
    try:
        with open(path, encoding='utf-8') as fh:
            table = json.load(fh).get(partition, {})
        return {str(k): float(v) for k, v in table.items() if float(v) > 0}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError) as err:
        print(f'plan: ignoring the measured costs in {path}: {err}', file=sys.stderr)
        return {}


def make_plan(topo: Topology, samples: int = 3, budget_s: float = DEFAULT_BUDGET_S,
              min_time: float = MIN_TIME, kernels: Iterable[str] = KERNELS,
              sizes: dict[str, tuple] | None = None,
              measured: dict[str, float] | None = None) -> Plan:
    """The plan of one stack on one partition (see the module's docstring);
    `measured` (``measured_costs``) replaces the cost model's estimate of every
    run it has."""
    measured = measured or {}
    if samples < 1:
        raise ValueError(f'samples must be at least 1, got {samples}')
    sizes = {**{k: node_sizes(k, topo) for k in SIZES}, **(sizes or {})}
    kernels = [k for k in kernels if k in SIZES]
    plan = Plan(topo=topo, samples=samples, budget_s=budget_s, min_time=min_time,
                sizes={k: tuple(sizes[k]) for k in kernels})
    roles = layout_roles(topo)
    left = budget_s - T_BUILD

    def candidate(kernel: str, layout: Layout, size) -> Run:
        role = roles.get(layout[1:], '') if layout[0] != 'serial' else 'e_mt reference'
        why = infeasible(kernel, layout, size, topo)
        seconds = measured.get(cost_key(kernel, layout, size))
        return Run(kernel, layout, size, role,
                   seconds or estimate(kernel, layout, size, topo, min_time),
                   process_memory(kernel, layout, size), why and f'infeasible: {why}',
                   measured=seconds is not None)

    def leave_out(group: list[Run], why: str) -> None:
        """Leave `group` out of the plan: each run for its own reason, else `why`."""
        plan.left_out.extend(dataclasses.replace(r, reason=r.reason or why) for r in group)

    def take(group: list[Run], verdicts: int) -> bool:
        """Add `group` (all of it or none) if every run is feasible and it fits."""
        nonlocal left
        bad = [r for r in group if r.reason]
        if bad:
            # Runs of the group that could run are left out with it.
            leave_out(bad + [r for r in group if not r.reason],
                      f'needs {bad[0].name}: {bad[0].reason}')
            return False
        cost = sum(r.seconds for r in group) * samples + T_VERDICT * verdicts
        if cost > left:
            leave_out(group, f'budget: {cost:.0f} s estimated with its samples and verdicts, '
                             f'{max(left, 0):.0f} s of the budget left')
            return False
        plan.runs.extend(group)
        plan.verdicts += verdicts
        left -= cost
        return True

    # Round 0: the pure-MPI run of every kernel and size (every verdict needs it).
    mpi_ok: dict[tuple[str, str], bool] = {}
    for kernel in kernels:
        for size in sizes[kernel]:
            mpi_ok[(kernel, str(size))] = take(
                [candidate(kernel, ('mpi', topo.cores, 1), size)], 0)
    # Then each hybrid layout in the plan's order, every kernel and size.
    for ranks, threads in hybrid_layouts(topo):
        for kernel in kernels:
            for size in sizes[kernel]:
                group = [candidate(kernel, (mode, ranks, threads), size)
                         for mode in HYBRID_MODES[kernel]]
                serial = ([candidate(kernel, ('serial', ranks, threads), size)]
                          if kernel in SERIAL_KERNELS else [])
                if not mpi_ok[(kernel, str(size))]:
                    leave_out(group + serial,
                              f'no pure-MPI run of {kernel} {size} to compare with')
                elif not take(group, len(group) * pair_verdicts(kernel, size)):
                    leave_out(serial, f'needs {group[0].name}, left out')
                else:
                    # The serial run for e_mt, if the kernel has one: optional
                    # (bounded by SERIAL_MEM_CAP).
                    take(serial, 0)
    # The serial runs of hybrid layouts that do not fill this node (other
    # partitions' layouts) are not this plan's business.
    return plan


def session_plan(topo: Topology, samples: int, budget_s: float, batch: bool = False) -> Plan:
    """The plan the checks follow (``partition_sizes``, no minimum time on an
    oversubscribed node, ``measured_costs`` where this partition has them).
    `batch`: a batch of the sequential rounds (``HARNESS_FIRST_ROUND`` > 0),
    bounded by its driver's own budget: a run left out only for the budget
    runs (``Plan.unbudgeted``), an infeasible one stays out."""
    planned = functools.partial(
        make_plan, topo, samples=samples, min_time=0.0 if topo.oversubscribed else MIN_TIME,
        sizes={k: partition_sizes(k, topo) for k in SIZES}, measured=measured_costs(topo.name))
    plan = planned(budget_s=budget_s)
    if batch:
        plan.unbudgeted = frozenset(map(run_key, planned(budget_s=math.inf).runs))
    return plan


# ---- the node and the samples ---------------------------------------------------

def cores_per_node(partition) -> int:
    """Physical cores of one node of `partition` (detected or configured; a
    local partition without either: the physical cores of this process's
    CPUs, ``host_cores``)."""
    proc = partition.processor
    if proc.num_cores:
        return int(proc.num_cores)
    if proc.num_cpus:
        return int(proc.num_cpus) // int(proc.num_cpus_per_core or 1)
    if partition.scheduler.registered_name == 'local':
        return host_cores()
    raise ValueError(f'partition {partition.fullname}: processor topology unknown; '
                     f'run reframe --detect-host-topology or set "processor"')


#: Round numbers stay below this (the sequential rounds' cap is far lower).
MAX_FIRST_ROUND = 1000
#: Highest HARNESS_MAX_ROUNDS.
MAX_ROUNDS = 100
#: Most samples per run: each is a test case of every layout and size (a
#: larger count only makes ReFrame build an unusable test graph for minutes).
MAX_SAMPLES = 100


def bounded_int(text: str, low: int, high: int) -> int:
    """`text` (spaces around it aside) as an integer from `low` to `high`; else
    ValueError saying so (ASCII digits only: ``int`` takes '+3', '3_0', '٣')."""
    digits = text.strip()
    if not re.fullmatch(r'[0-9]+', digits) or not low <= int(digits) <= high:
        raise ValueError(f'must be an integer from {low} to {high}, got {text!r}')
    return int(digits)


def _int_knob(name: str, default: str, low: int, high: int) -> int:
    try:
        return bounded_int(os.environ.get(name, '').strip() or default, low, high)
    except ValueError as err:
        raise ValueError(f'{name} {err}') from None


def max_rounds() -> int:
    """Most rounds of one pair under the sequential rounds (``HARNESS_MAX_ROUNDS``)."""
    return _int_knob('HARNESS_MAX_ROUNDS', str(DEFAULT_MAX_ROUNDS), 1, MAX_ROUNDS)


def first_round() -> int:
    """The number of a session's first round (``HARNESS_FIRST_ROUND``, default 0)."""
    return _int_knob('HARNESS_FIRST_ROUND', '0', 0, MAX_FIRST_ROUND)


def samples_per_run() -> int:
    """Samples of every kernel run (``HARNESS_REPEAT``, default 3): a parameter
    of the checks, not ReFrame's ``--repeat``, which renumbers the variants the
    verdicts depend on (each on every sample of the runs it judges)."""
    return _int_knob('HARNESS_REPEAT', '3', 1, MAX_SAMPLES)
