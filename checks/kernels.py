"""ReFrame checks: build the kernels once per MPI stack, run each of them as
pure MPI and as hybrid MPI+OpenMP at equal cores, and judge hybrid against
pure MPI.  docs/pages/checks.md describes them, docs/pages/nightly.md
("Verdict checks") the verdicts and their references.

* ``SpmvCheck``, ``MdCheck``, ``RingCheck`` and ``StreamCheck`` run one kernel
  per layout ``R x T`` (R ranks per node times T threads per rank, R*T = the
  partition's cores per node; T = 1 is ``mpi``), from the processor topology
  of every partition, so the same checks run on a 2-core laptop and on a
  128-core node.  The session's plan (``harnesscore.plan``, printed when the
  checks load) skips, before it starts, every run that cannot run on its
  layout or does not fit ``HARNESS_BUDGET``, saying why.
* ``HybridVerdict``, per kernel, size and hybrid layout (the ring: per message
  size of its sweep), depends on every sample of the pure-MPI run and of the
  hybrid run on the same partition and stack, and reports ``speedup`` =
  T_mpi / T_hybrid and ``verdict`` (1 WIN, 0 TIE or INCONCLUSIVE, -1 LOSS) by
  the one rule of ``harnesscore.stats``, as the report judges.

The samples are the checks' ``sample`` parameter (``HARNESS_REPEAT``), not
``--repeat``, which renumbers the variants these dependencies name.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import statistics
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
import reframe.utility.udeps as udeps
from harnesscore import plan as planning
from harnesscore.schema import TIME_VARIABLE, message_time_variable
from harnesscore.stats import (
    DEFAULT_FLOOR,
    INCONCLUSIVE,
    UNDECIDED_VERDICT,
    compare,
    speedup_call,
)
from harnesscore.units import bytes_label, message_sizes, parse_bytes
from harnesslib.base import (
    RING_ITERS_SCALE,
    AtLeast,
    KernelCheck,
    LowerBounds,
    PerflogFields,
    SystemReferences,
    finalize_hang_only,
    sanity_results,
)
from harnesslib.compat import as_run, reads_output
from harnesslib.noise import BandRule
from harnesslib.placement import (
    cores_per_node,
    divisors,
    interleave_samples,
    kernel_parameters,
    partition_plan,
    print_plans,
    round_order,
    system_sizes,
)
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)


def supports_option(executable: str, option: str) -> bool:
    """Whether the kernel binary knows `option` (it names its options in its
    usage text): ``--min-time`` exists only in kernels built from a recent
    ``src/``.  Unreadable (a dry run, no build yet): False."""
    try:
        with open(executable, 'rb') as fh:
            return option.encode() in fh.read()
    except OSError:
        return False


class PlannedRun(LowerBounds):
    """A kernel check that follows the session's plan (``harnesscore.plan``):
    a run the plan leaves out on this partition (a size that cannot run on the
    layout, or that does not fit ``HARNESS_BUDGET``) is skipped before it
    starts, with the plan's reason; where the check passes ``min_time_args``
    its timed loop lasts at least ``min_time``, and its figures are per call
    (or step), not per run."""

    #: Seconds every timed loop lasts at least (0: the fixed counts only).
    #: Passed as ``--min-time`` by SpmvCheck (unless its ``iters`` is given)
    #: and MdCheck where the kernel has the option; RingCheck and StreamCheck
    #: run fixed counts.  The plan sets 0 on a declared (oversubscribed)
    #: partition.
    min_time = variable(float, value=planning.MIN_TIME)
    # a negative or NaN time ran without --min-time, silently
    at_least = {'min_time': AtLeast(0, f'a number of seconds from 0 to '
                                       f"{planning.MAX_MIN_TIME:g} (the kernels' --min-time)",
                                    high=planning.MAX_MIN_TIME)}

    @run_after('setup')
    def follow_plan(self):
        plan = partition_plan(self.current_partition, self.nodes or None)
        why = plan.decision(self.kernel, self.layout, self.problem,
                            other_sizes=system_sizes(self.kernel),
                            stream_elements=getattr(self, 'stream_elements', 0))
        self.skip_if(bool(why), why)
        if plan.topo.oversubscribed:
            self.min_time = 0.0

    def min_time_args(self) -> list[str]:
        """``--min-time S`` where it is wanted and the kernel has it."""
        if self.min_time > 0 and supports_option(self.executable, '--min-time'):
            return ['--min-time', f'{self.min_time:g}']
        return []


print_plans()


@interleave_samples
@rfm.simple_test
class SpmvCheck(KernelCheck, PlannedRun):
    """Chow & Hysom's 27-point SpMV, weak scaling: N^3 rows per core."""

    kernel = 'spmv'
    calls_key = 'iters'
    #: problem, N^3 rows per core: from cache-resident (16: 1.3 MB of matrix
    #: per core) to memory-bound (128: 680 MB per core, far beyond any cache).
    layout, problem, sample = kernel_parameters('spmv', serial=True)
    #: SpMV calls, exactly (no --min-time); 0: the plan's floor (10, serial 3)
    #: stretched by --min-time, or without --min-time 100 up to N = 64, fewer
    #: above.
    iters = variable(int, value=0)
    #: STREAM elements per core for the roofline measured in the same job
    #: (0: 8388608, or 65536 on a declared partition; the plan's memory rule
    #: counts the same, ``plan.spmv_stream_elements``).
    stream_elements = variable(int, value=0)
    at_least = {'stream_elements': AtLeast(0, '0 (the default count) or more'),
                'iters': AtLeast.kernel_option('--iters', planning.SPMV_MAX_ITERS, 0,
                                               low_is="the plan's count")}

    def kernel_args(self) -> list[str]:
        # A given count is exact: --min-time would only make it a floor.
        timed = [] if self.iters else self.min_time_args()
        if self.iters:
            iters = self.iters
        elif timed:
            iters = (planning.SPMV_SERIAL_MIN_CALLS if self.mode == 'serial'
                     else planning.SPMV_MIN_CALLS)
        else:
            iters = max(10, min(100, 100 * 64 ** 3 // self.problem ** 3))
        args = ['--n', str(self.problem), '--iters', str(iters), *timed]
        if self.mode == 'serial':
            args += ['--decomp-threads', str(self.decomp)]
        return args

    @run_before('run')
    def measure_roof(self):
        """STREAM triad with the same launcher and layout, just before SpMV.

        Roofline: SpMV moves at least `bytes_per_iter_model` = 12 bytes per
        nonzero (value + column index) + 20 bytes per row (y, x, row pointer)
        each call, so its bound is the STREAM bandwidth; the fraction reached
        is `traffic_gbs` / stream GB/s.
        """
        stream_mode = 'mpi' if self.threads == 1 else 'masteronly'
        # The partition's launcher with the job's binding, as the kernel's run.
        launch = self.launch(self.num_tasks)
        topo = partition_plan(self.current_partition, self.nodes or None).topo
        elements = planning.spmv_stream_elements(topo, self.stream_elements)
        self.prerun_cmds = self.prerun_cmds + [
            f'{launch} {shlex.quote(self.build.executable_path("stream"))} '
            f'--mode {stream_mode} --n {int(elements)} --iters 5 > stream.out 2> stream.err; '
            'echo "stream exit status $?" >> stream.out'
        ]

    @sanity_function
    def validate(self):
        sn.evaluate(super().validate())
        # the STREAM run before spmv: its own error here, not a performance
        # variable's None ('not a number') after it
        self.stream_result()
        return True

    def stream_result(self) -> dict:
        """The RESULT line of the STREAM run before spmv, checked (cached, as
        ``results``): its sanity and two performance variables read it."""
        if not hasattr(self, '_stream_result'):
            self._stream_result = self._checked_stream_result()
        return self._stream_result

    def _checked_stream_result(self) -> dict:
        text, err = self.stage_text('stream.out'), self.stage_text('stream.err')
        results = sanity_results(text)
        # its exit status too (a run that printed its line and then failed passed)
        found = re.findall(r'^stream exit status (\d+)$', text, re.M)
        status = int(found[-1]) if found else None
        if status != 0 and not finalize_hang_only(
                status or 1, 'MPI_Finalize did not return' in err,
                bool(results) and all(r.get('verified') is True for r in results)):
            # the kernel's own message (it starts with its name), else the last line
            # that is not a launcher's banner rule
            lines = [ln.strip() for ln in err.splitlines() if ln.strip().strip('-')]
            last = next((ln for ln in reversed(lines) if ln.startswith('stream: ')),
                        lines[-1] if lines else '')
            raise sn.SanityError(
                'the STREAM run before spmv '
                + ('did not finish' if status is None else f'exited with status {status}')
                + (f': {last}' if last else ' (stream.err is empty)'))
        if not results:
            raise sn.SanityError('the STREAM run before spmv printed no RESULT line')
        res = results[-1]
        if res.get('verified') is not True:
            raise sn.SanityError('the STREAM run before spmv did not verify its result')
        if (res.get('ranks'), res.get('threads')) != (self.num_tasks, self.threads):
            raise sn.SanityError(
                f'the STREAM run before spmv ran {res.get("ranks")}x{res.get("threads")}, '
                f'not the layout of spmv, {self.num_tasks}x{self.threads}')
        if res.get('kernel') != 'stream':
            raise sn.SanityError(f'the STREAM run before spmv printed a RESULT line of '
                                 f'kernel {res.get("kernel")!r}')
        return res

    @run_after('setup')
    def add_spmv_variables(self):
        # The parts of a call, for the efficiency and overlap models.
        self.add_per_call_variables('t_pack', 't_comp_interior', 't_comp_boundary')
        self.perf_variables['stream_bw'] = sn.make_performance_function(
            lambda: float(self.stream_result()['fom']), 'GB/s')
        self.perf_variables['roofline_fraction'] = sn.make_performance_function(
            lambda: float(self.headline()['traffic_gbs']) / float(self.stream_result()['fom']),
            'fraction')


MD_PHASES = ('force', 'movout', 'sum', 'movea', 'moveb', 'neigh')


@interleave_samples
@rfm.simple_test
class MdCheck(KernelCheck, PlannedRun):
    """Chorley's Lennard-Jones MD: 4 L^3 atoms in all (strong scaling).

    Sizes run from small (communication-heavy: few atoms per rank, many of
    them in the halo) to large.  Besides the common variables, each of
    Chorley's phases is a performance variable: its time on the slowest rank.
    """

    kernel = 'md'
    calls_key = 'steps'
    layout, problem, sample = kernel_parameters('md')
    #: Timed steps at least (--min-time stretches them).
    steps = variable(int, value=planning.MD_MIN_STEPS)
    at_least = {'steps': AtLeast.kernel_option('--steps', planning.MD_MAX_STEPS)}

    def kernel_args(self) -> list[str]:
        return ['--cells-per-side', str(self.problem), '--steps', str(self.steps),
                *self.min_time_args()]

    @run_after('setup')
    def add_phases(self):
        # Per step: the slowest rank's time in each phase over the steps run.
        for phase in MD_PHASES:
            self.perf_variables[f'phase_{phase}'] = sn.make_performance_function(
                lambda phase=phase: float(self.headline()[f't_{phase}']['max'])
                / self.calls(self.headline()), 's')


SWEEP_STATUS_TAG = 'ring: k sweep launch exit status'


def check_sweep_statuses(ks: list[int], stdout: str, finalize_hung: bool,
                         verified: bool) -> None:
    """A sanity error unless every launch of the k sweep (`ks`, run before the
    job's last launch) recorded exit status 0 in the job's `stdout`: the job's
    own status is only its last launch's.  A status from a hung MPI_Finalize
    after verified results passes, as the last launch's does."""
    statuses = {int(k): int(st) for k, st in
                re.findall(rf'^{SWEEP_STATUS_TAG} (\d+) (\d+)$', stdout, re.M)}
    for k in ks:
        status = statuses.get(k)
        if status is None:
            raise sn.SanityError(f'ring: the k sweep launch at k={k} did not finish')
        if status != 0 and not finalize_hang_only(status, finalize_hung, verified):
            raise sn.SanityError(
                f'ring: the k sweep launch at k={k} exited with status {status}')


@interleave_samples
@rfm.simple_test
class RingCheck(KernelCheck, PlannedRun):
    """Rabenseifner's ring: on one node each rank is its own node
    (``--rank-as-node``); across nodes, k communicating CPUs per node, each
    sending to its counterpart on the next node, aggregated bandwidth per
    node."""

    kernel = 'ring'
    layout, problem, sample = kernel_parameters('ring')
    iters_scale = variable(float, value=2.0)
    at_least = {'iters_scale': RING_ITERS_SCALE}

    #: Across nodes, measure every k of the saturation curve (one launch
    #: per k before the run at the largest k); false: the largest k only.
    k_sweep = variable(typ.Bool, value=True)

    def kernel_args(self) -> list[str]:
        across = ['--rank-as-node'] if int(self.nodes) < 2 else []
        return ['--pattern', 'ring', *across, '--sizes', self.problem,
                '--iters-scale', str(self.iters_scale)]

    def message_sizes(self) -> list[int]:
        """The message sizes of the run (the kernel's --sizes), in bytes."""
        return message_sizes(self.problem)

    def message_time(self, size: int) -> float:
        """Seconds per exchange of `size`-byte messages at the run's headline k
        (its last launch): the RESULT line's ``t_call_s``, its timed time over
        reps x iters (``t_total_s`` / (reps x iters) from a kernel without it);
        0 where the run printed no such line."""
        k = int(self.headline()['k'])
        lines = [r for r in self.results() if int(r['k']) == k and int(r['size']) == size]
        if not lines:
            return 0.0
        res = lines[-1]
        if res.get('t_call_s') is not None:
            return float(res['t_call_s'])
        return float(res['t_total_s']) / (int(res['reps']) * int(res['iters']))

    def swept_ks(self) -> list[int]:
        """The k measured by launches of their own (all but the largest)."""
        if not self.k_sweep:
            return []
        return planning.ring_ks(self.layout, int(self.nodes))[:-1]

    @run_before('run')
    def sweep_k(self):
        # Rabenseifner's saturation curve across nodes: k = 1 .. the largest,
        # each its own launch on the same ranks (the job's last launch, at
        # the largest k, gives the headline figures).
        line = f'{self.launch(self.num_tasks)} {self.executable} ' + ' '.join(
            self.executable_opts)
        # A job script goes on after a failed command and reports only its
        # last launch's status: each sweep launch records its own.
        self.prerun_cmds += [f'{line} --k {k}; echo "{SWEEP_STATUS_TAG} {k} $?"'
                             for k in self.swept_ks()]

    @sanity_function
    def validate(self):
        sn.evaluate(super().validate())
        got = {(int(r['k']), int(r['size'])) for r in self.results()}
        # the sweep's launches and the last one (the headline's k): a size left
        # out was logged as a time of 0 before
        ks = [*self.swept_ks(), int(self.headline()['k'])]
        # (KernelCheck.validate above read finalize_hung from the job's stderr)
        check_sweep_statuses(self.swept_ks(), self.job_stdout(), self.finalize_hung == 'true',
                             self.verified == 'true')
        missing = sorted({(k, s) for k in ks for s in self.message_sizes()} - got)
        sn.evaluate(sn.assert_false(
            missing, msg=f'ring: no RESULT for k, size {missing} (the launches of the '
                         f'k sweep across {self.nodes} nodes and the last one; see the '
                         'job\'s output)'))
        return True

    @run_after('setup')
    def add_saturation_variables(self):
        # Aggregated bandwidth per node of every RESULT line, bw_k<k>_<bytes>
        # (k communicating CPUs per node): the saturation curve's data.  Every
        # layout of the partition logs every k of its layouts, so all lines of
        # the perflog file fit one header; 0 where the layout has no such k
        # (ReFrame fails a performance value of nan).
        sizes = self.message_sizes()

        def value(k: int, size: int) -> float:
            return next((float(r['bandwidth_MBps']) for r in self.results()
                         if int(r['k']) == k and int(r['size']) == size), 0.0)

        for k in divisors(cores_per_node(self.current_partition)):
            for size in sizes:
                self.perf_variables[f'bw_k{k}_{size}'] = sn.make_performance_function(
                    lambda k=k, size=size: value(k, size), 'MB/s')

    @run_after('setup')
    def add_message_time_variables(self):
        # Per message size, t_msg_<bytes> (schema.message_time_variable): the
        # time of one exchange at the headline k.  The verdicts judge the ring
        # per message size by these (t_total is the largest size's alone): a
        # latency-bound 8 B and a bandwidth-bound 1 MiB get a call each.
        for size in self.message_sizes():
            self.perf_variables[message_time_variable(size)] = sn.make_performance_function(
                lambda size=size: self.message_time(size), 's')


@interleave_samples
@rfm.simple_test
class StreamCheck(KernelCheck, PlannedRun):
    """STREAM triad: the node's memory bandwidth, the roofline's roof."""

    kernel = 'stream'
    layout, problem, sample = kernel_parameters('stream')
    iters = variable(int, value=planning.STREAM_ITERS)
    at_least = {'iters': AtLeast.kernel_option('--iters', planning.STREAM_MAX_ITERS)}

    def kernel_args(self) -> list[str]:
        return ['--n', str(self.problem), '--iters', str(self.iters)]


# ---- verdicts: hybrid against pure MPI ------------------------------------------

KERNEL_CHECKS = {'spmv': SpmvCheck, 'md': MdCheck, 'ring': RingCheck, 'stream': StreamCheck}
#: An INCONCLUSIVE verdict logs 0, as a TIE does (the VERDICT line says which);
#: it is never judged against the ``verdict`` reference
#: (``HybridVerdict.leave_an_undecided_call_unjudged``).
VERDICT_CODE = {'WIN': 1, 'TIE': 0, 'LOSS': -1, 'INCONCLUSIVE': 0}


class Pair(tuple):
    """A verdict's (kernel, size, pure-MPI layout, hybrid layout): it unpacks as
    those four.  ``message``: the ring's message size in bytes the verdict
    judges (by ``t_msg_<bytes>``), 0 for a verdict by ``t_total``."""

    message: int

    def __new__(cls, kernel: str, size: str, mpi: tuple, hybrid: tuple, message: int = 0):
        self = super().__new__(cls, (kernel, str(size), tuple(mpi), tuple(hybrid)))
        self.message = int(message)
        return self

    def __getnewargs__(self):           # copy, deepcopy and pickle keep `message`
        return (*self, self.message)

    def __eq__(self, other) -> bool:
        return (tuple.__eq__(self, other) is True
                and self.message == getattr(other, 'message', 0))

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((tuple(self), self.message))

    def __repr__(self) -> str:         # as a tuple (ReFrame names -P values by it)
        return repr((*self, self.message) if self.message else tuple(self))


def _pairs() -> list[Pair]:
    """(kernel, size, pure-MPI layout, hybrid layout) for every hybrid run; the
    ring's once per message size of its sweep (``Pair.message``)."""
    out = []
    for kernel, cls in KERNEL_CHECKS.items():
        layouts = cls.param_space['layout']
        for problem in cls.param_space['problem']:
            messages = message_sizes(problem) if kernel == 'ring' else [0]
            for hybrid in layouts:
                mode, ranks, threads = hybrid
                if mode in ('mpi', 'serial'):
                    continue
                mpi = ('mpi', ranks * threads, 1)
                if mpi in layouts:
                    out += [Pair(kernel, str(problem), mpi, hybrid, m) for m in messages]
    return out


def in_round_order(cls, nums: list[int]) -> list[int]:
    """Variants `nums` of kernel check `cls` in the order
    ``placement.interleave_samples`` registers them: round by round (the
    ``sample`` parameter), within a round by ``placement.round_order`` of the
    check's layouts."""
    layouts = list(dict.fromkeys(tuple(lay) for lay in cls.param_space['layout']))
    orders: dict[int, list] = {}

    def key(num: int) -> tuple:
        params = cls.get_variant_info(num, recurse=True)['params']
        rnd = int(params.get('sample', 0))
        order = orders.setdefault(rnd, round_order(layouts, rnd))
        layout = tuple(params['layout'])
        return (rnd, order.index(layout) if layout in order else len(order), num)

    return sorted(nums, key=key)


def _pair_name(pair: tuple) -> str:
    """``spmv/64/masteronly_1x2``; the ring per message size
    ``ring/8,65536,1048576/masteronly_1x2/64KiB``."""
    kernel, size, _mpi, hybrid = pair[:4]
    message = getattr(pair, 'message', 0)
    return (f'{kernel}/{size}/{planning.layout_name(hybrid)}'
            + (f'/{bytes_label(message)}' if message else ''))


def _parse_pair(value) -> Pair:
    """A pair from its name (``md/24/masteronly_1x2``,
    ``ring/8,65536/masteronly_1x2/8B``; ``-P pair=...``) or a (kernel, size, mpi
    layout, hybrid layout[, message bytes]) tuple."""
    if isinstance(value, Pair):
        return value
    if not isinstance(value, str):
        return Pair(*value)
    parts = value.strip().split('/')
    ring = parts[0] == 'ring'
    if len(parts) not in ((3, 4) if ring else (3,)) or parts[0] not in KERNEL_CHECKS:
        raise ValueError(f'not a verdict pair: {value!r} (e.g. md/24/masteronly_1x2; '
                         f'select one with -n \'HybridVerdict%pair=md/24/masteronly_1x2\' '
                         f'or -n \'HybridVerdict%pair=ring/8,65536,1048576/masteronly_1x2/8B\', '
                         f'as -P splits its values at commas)')
    kernel, size, name = parts[:3]
    hybrid = planning.parse_layout(name)
    message = 0
    if len(parts) == 4:
        try:
            message = parse_bytes(parts[3])
        except ValueError:
            raise ValueError(f'not a message size: {parts[3]!r} in {value!r} (e.g. 8B, '
                             f'64KiB, 1MiB)') from None
        if message not in message_sizes(size):
            raise ValueError(f'{value!r}: {parts[3]} is not a message size of {size}')
    return Pair(kernel, size, ('mpi', hybrid[1] * hybrid[2], 1), hybrid, message)


@rfm.simple_test
class HybridVerdict(rfm.RunOnlyRegressionTest, SystemReferences, PerflogFields, BandRule,
                    LowerBounds):
    """Hybrid against pure MPI for one kernel, size and layout."""

    pair = parameter(_pairs(), fmt=_pair_name, type=_parse_pair)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    local = True
    time_limit = '1m'
    executable = 'echo'
    tags = {'verdict'}

    oversubscribed = 'false'
    finalize_hung = 'false'
    #: The TIE band's half-width around a speedup of 1 (``stats.band``), a
    #: fraction in [0, 1) as the report's --noise-floor.
    noise_floor = variable(float, value=DEFAULT_FLOOR)
    # NaN made every call INCONCLUSIVE (never judged: the check passed a clear
    # LOSS), a floor of 1 or more a TIE of a 2x loss
    at_least = {'noise_floor': AtLeast(0, "a fraction in [0, 1), as the report's "
                                          '--noise-floor', high=1, below=True)}
    #: The time compared: t_total, or for the ring per message size its
    #: t_msg_<bytes> (set from the pair by ``judge_per_message``).
    time_variable = variable(str, value=TIME_VARIABLE)

    @run_after('init')
    def depend_on_runs(self):
        kernel, size, mpi, hybrid = self.pair
        cls = KERNEL_CHECKS[kernel]
        self.kernel, self.size = kernel, size
        self.mode = f'verdict-{hybrid[0]}'
        self.ranks, self.threads = hybrid[1], hybrid[2]
        self.descr = (f'{kernel} size {size}: {hybrid[0]} {hybrid[1]}x{hybrid[2]} '
                      f'against mpi {mpi[1]}x1')
        # -P VAR=V1,V2 runs a class derived from cls, its variants numbered
        # anew: the names of the old numbering were other runs (a masteronly
        # verdict judged two pure-MPI runs); a -P variable this verdict has too
        # (nodes) picks the runs of its own value.
        cls = as_run(cls, sys.argv[1:])
        own = {name: str(getattr(self, name)) for name in cls.param_space.params
               if name.startswith('.') and name in type(self).param_space.params}
        own = {name: (lambda v, mine=mine: str(v) == mine) for name, mine in own.items()}
        nums = {side: cls.get_variant_nums(layout=lambda lay, want=layout: lay == want,
                                           problem=lambda p: str(p) == size, **own)
                for side, layout in (('mpi', mpi), ('hybrid', hybrid))}
        self._sides: dict[str, list[str]] = {
            side: [cls.variant_name(num) for num in side_nums]
            for side, side_nums in nums.items()}
        # Selected themselves, the runs take their registration's order
        # (placement.interleave_samples); selected only as this verdict's
        # dependencies, ReFrame takes them in the order they are declared
        # here, which is the same: round by round, the two sides as
        # placement.round_order puts them.  The verdict runs once every round
        # of both sides is done.
        for num in in_round_order(cls, nums['mpi'] + nums['hybrid']):
            self.depends_on(cls.variant_name(num), udeps.by_env)

    def _samples(self, side: str) -> list[float]:
        """The side's times in the order of its rounds (``%sample``)."""
        part = self.current_partition.fullname
        out = []
        times = self._times.setdefault(side, [])
        rounds = self._rounds.setdefault(side, [])
        for dep in sorted((self.getdep(name) for name in self._sides[side]),
                          key=lambda d: int(d.sample)):
            rounds.append(int(dep.sample))
            times.append(dep.job.completion_time)
            self._note_quietness(dep)
            entry = dep.perfvalues.get(f'{part}:{self.time_variable}')
            if entry is None or entry[0] is None:   # None: declared, no value
                raise sn.SanityError(
                    f'{dep.display_name} logged no {self.time_variable} '
                    f'(was the performance stage skipped?)')
            out.append(float(entry[0]))
            self.cores = dep.cores
            self.nodes = dep.nodes
            self.mpi_library = dep.mpi_library
            self.build_spec = dep.build_spec
        return out

    @run_after('init')
    def judge_per_message(self):
        """The ring per message size: the pair's t_msg_<bytes> is compared, and
        the verdict's size is the message's ('8B', '1MiB'), as in the report."""
        message = getattr(self.pair, 'message', 0)
        if message:
            self.time_variable = message_time_variable(message)
            self.size = bytes_label(message)
            self.descr += f', {self.size} messages ({self.time_variable})'

    def _note_quietness(self, dep) -> None:
        """The verdict's quietness: busy if any of its runs was (harnesscore.quiet)."""
        if self.busy != 'true' and dep.busy in ('true', 'unknown'):
            self.busy = dep.busy
        self.busy_procs = max(self.busy_procs, dep.busy_procs)
        self.load_before = max(self.load_before, dep.load_before)
        self.load_after = max(self.load_after, dep.load_after)
        if dep.busy == 'true' and dep.busy_detail:
            self.busy_detail = f'{dep.display_name}: {dep.busy_detail}'[:300]

    @reads_output('run')          # a dry run has no runs to judge
    def judge_samples(self):
        over = [self.getdep(name).display_name for side in self._sides.values()
                for name in side if self.getdep(name).oversubscribed == 'true']
        # Oversubscribed runs (a declared topology) say nothing of speed.
        self.skip_if(bool(over), f'no verdict from oversubscribed runs: {", ".join(over)}')
        self._times: dict[str, list] = {}
        self._rounds: dict[str, list[int]] = {}
        self.busy = 'false'
        t_mpi, t_hyb = self._samples('mpi'), self._samples('hybrid')
        for side, values in (('mpi', t_mpi), ('hybrid', t_hyb)):
            if not values:
                layout = self.pair[2] if side == 'mpi' else self.pair[3]
                raise sn.SanityError(
                    f'no runs of {self.kernel} size {self.pair[1]} layout '
                    f'{planning.layout_name(layout)} in this session (the {side} side of '
                    f'{_pair_name(self.pair)})')
        med_mpi, med_hyb = statistics.median(t_mpi), statistics.median(t_hyb)
        # T_mpi / T_hybrid with its interval (harnesscore.stats): the paired
        # interval of the per-round ratios where the rounds ran side by side,
        # else the ratio of the medians;
        # a speedup reference (e.g. "within 10% of MPI") is decided from it.
        times = (None if None in self._times['mpi'] + self._times['hybrid']
                 else (self._times['mpi'], self._times['hybrid']))
        # round k against round k where both sides ran the same rounds (as the
        # report pairs them), never the i-th of each side by time
        by_number = (self._rounds['mpi'] == self._rounds['hybrid']
                     and len(set(self._rounds['mpi'])) == len(self._rounds['mpi']))
        self._cmp = compare(t_mpi, t_hyb, *(times or (None, None)),
                            floor=self.noise_floor, in_order=by_number)
        self._speedup = self._cmp.ratio
        self._noise = self._cmp.noise
        # The one rule (harnesscore.stats), as the report judges: TIE when the
        # interval lies inside 1 +- floor, WIN/LOSS outside, else INCONCLUSIVE.
        self._verdict = speedup_call(self._cmp.interval, self.noise_floor)
        self.verified = 'true'
        self.executable_opts = [shlex.quote(
            f'VERDICT {_pair_name(self.pair)}: {self._verdict} speedup={self._speedup:.4f} '
            f'noise={self._noise:.4f} samples={len(t_mpi)}/{len(t_hyb)} '
            f'interval={self._cmp.interval.low:.4f}..{self._cmp.interval.high:.4f} '
            f'basis={self._cmp.basis.replace(" ", "-")} busy={self.busy} '
            f'T_mpi={med_mpi:.6g}s T_hybrid={med_hyb:.6g}s')
        ]

    @run_before('performance')
    def leave_an_undecided_call_unjudged(self):
        """An INCONCLUSIVE call logs code 0, as a TIE does, and a ``verdict``
        reference of WIN nights would fail it: noise is never a regression
        (docs/pages/statistics.md).  Its ``verdict`` reference is kept for this
        run without thresholds, so nothing judges it (ReFrame, ``BandRule``;
        ``-S require_reference=true`` still finds it) and the perflog line still
        logs code 0 and the reference.  A decided call is judged as before."""
        if getattr(self, '_verdict', None) != INCONCLUSIVE:
            return
        refs = self._references()
        ref = refs.get('verdict')
        if not isinstance(ref, tuple) or len(ref) < 3 or ref[1:3] == (None, None):
            return                                # none, unbounded, or an xfail one
        refs['verdict'] = (ref[0], None, None, *ref[3:])
        self.reference = {'*': refs}
        self.logger.info(f'verdict INCONCLUSIVE (code 0) not judged against its reference '
                         f'{ref[0]:g} (thresholds {ref[1]}, {ref[2]})')

    @run_after('performance')
    def log_an_undecided_call(self):
        """An INCONCLUSIVE call's perflog line says so: its ``judgement_detail``
        opens with ``UNDECIDED_VERDICT`` (its code 0 is no TIE, and
        ``hybridverdict-baseline`` pools no such night into a ``verdict``
        reference), before the band rule's detail, if any."""
        if getattr(self, '_verdict', None) != INCONCLUSIVE:
            return
        interval = self._cmp.interval
        call = (f'{UNDECIDED_VERDICT}: code 0, no TIE (speedup interval '
                f'{interval.low:.4f}..{interval.high:.4f}, noise floor {self.noise_floor:g})')
        self.judgement_detail = '; '.join(filter(None, (call, self.judgement_detail)))[:1000]

    def _references(self) -> dict[str, tuple]:
        """This run's references by variable, as ReFrame looks them up: the $ref
        file's entry of this test by its $index, else the scoped dictionary's
        of this partition ({} where there are none)."""
        if getattr(self.reference, 'index', None):
            try:
                return dict(self.reference[self])
            except KeyError:
                return {}
        part = self.current_partition.fullname
        out = {}
        for var in self.perf_variables:
            with contextlib.suppress(KeyError):
                out[var] = self.reference[f'{part}:{var}']
        return out

    def band_samples(self):
        return {'speedup': self._cmp.interval}

    @sanity_function
    def printed(self):
        return sn.assert_found(r'^VERDICT ', self.stdout)

    @performance_function('x')
    def speedup(self):
        return self._speedup

    @performance_function('win=1 tie=0 loss=-1')
    def verdict(self):
        return VERDICT_CODE[self._verdict]
