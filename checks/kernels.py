"""ReFrame checks: build the kernels once per MPI stack, run each of them as
pure MPI and as hybrid MPI+OpenMP at equal cores, and judge hybrid against
pure MPI (``HybridVerdict``).

* ``KernelBuild`` is an environment-scoped fixture: the CMake build of ``src/``
  with the stack's own wrapper, once per (partition, stack) in a session.
* ``SpmvCheck``, ``MdCheck``, ``RingCheck`` and ``StreamCheck`` run one kernel
  per layout ``R x T`` (R ranks per node times T threads per rank, R*T = the
  partition's cores per node).  T = 1 is ``mpi``; T > 1 runs the hybrid modes.
  The layouts come from the detected processor topology of every partition of
  the system, so the same checks run unchanged on a 2-core laptop and on a
  128-core node.

Sanity is the kernel's own verification, plus proof that the MPI library the
kernel reports is the stack its environment claims, plus a check that no two
threads shared a core (oversubscription).  Every perflog line carries kernel,
mode, ranks, threads, size, stack (environ) and partition so runs can be paired.

Variables worth setting with ``-S``:
  ``KernelBuild.fault_inject=1``   build kernels that corrupt one value
                                    (every check must then fail)
  ``KernelBuild.build_type=Debug``  CMake build type
  ``nodes=N``                       nodes per run (default: partition extras)

Verdict checks (``HybridVerdict``): hybrid MPI+OpenMP against pure MPI at
equal cores, in ReFrame.

For each kernel, size and hybrid layout, ``HybridVerdict`` depends on every
sample of the pure-MPI run (R*T ranks x 1 thread) and of the hybrid run
(R ranks x T threads) on the same partition and stack.  It reports

* ``speedup`` = median T_mpi / median T_hybrid (``t_total``): above 1 the
  hybrid run is faster;
* ``verdict``: 1 (WIN), 0 (TIE) or -1 (LOSS).  It is WIN or LOSS only when
  the speedup is further from 1 than the measured noise (twice the quadrature
  sum of both sides' relative standard errors, never below 5%), TIE
  otherwise; the noise and the samples of each side are printed beside it.

A system's references then assert what must hold there, e.g. in
``config/references/<system>.yaml``::

    HybridVerdict:
      $index: [$partition, $environ, ref_variant]
      local:shm:
        openmpi:
          pair=spmv/64/masteronly_1x2:
            speedup: [1.0, -0.10, null, x]   # must not lose by more than 10%
            verdict: [1, 0, null, win=1]     # hybrid must win here

The samples are the checks' ``sample`` parameter (``HARNESS_REPEAT``), not
``--repeat``, which renumbers the variants these dependencies name.
"""

from __future__ import annotations

import json
import os
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.udeps as udeps
from harnesslib.base import KernelCheck, PerflogFields, SystemReferences
from harnesslib.placement import (
    cores_per_node,
    divisors,
    layout_name,
    runs_for,
    sample_parameter,
    serial_runs,
)
from harnesslib.units import parse_bytes
from hybridverdict.verdict import DEFAULT_NOISE_FLOOR, TIME_VARIABLE, judge, pair_noise
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)


@rfm.simple_test
class SpmvCheck(KernelCheck):
    """Chow & Hysom's 27-point SpMV, weak scaling: N^3 rows per core."""

    kernel = 'spmv'
    layout = parameter(runs_for(('masteronly', 'funneled')) + serial_runs(),
                       fmt=layout_name)
    #: N^3 rows per core: from cache-resident (16: 1.3 MB of matrix per core)
    #: to memory-bound (128: 680 MB per core, far beyond any cache).
    problem = parameter([16, 32, 64, 128])
    sample = sample_parameter()
    #: SpMV calls; 0: 100 up to N = 64, fewer above (about 0.5 s per run).
    iters = variable(int, value=0)
    #: STREAM elements per core for the roofline measured in the same job.
    stream_elements = variable(int, value=8388608)

    def kernel_args(self) -> list[str]:
        iters = self.iters or max(10, min(100, 100 * 64 ** 3 // self.problem ** 3))
        args = ['--n', str(self.problem), '--iters', str(iters)]
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
        self.prerun_cmds = self.prerun_cmds + [
            f'{launch} {self.build.executable_path("stream")} --mode {stream_mode} '
            f'--n {self.stream_elements} --iters 5 > stream.out'
        ]

    def stream_result(self) -> dict:
        lines = sn.evaluate(sn.extractall(r'^RESULT (\{.*\})\s*$',
                                          os.path.join(self.stagedir, 'stream.out'), 1))
        if not lines:
            raise sn.SanityError('the STREAM run before spmv printed no RESULT line')
        res = json.loads(lines[-1])
        if res.get('verified') is not True:
            raise sn.SanityError('the STREAM run before spmv did not verify its result')
        if (res.get('ranks'), res.get('threads')) != (self.num_tasks, self.threads):
            raise sn.SanityError(
                f'the STREAM run before spmv ran {res.get("ranks")}x{res.get("threads")}, '
                f'not the layout of spmv, {self.num_tasks}x{self.threads}')
        return res

    @run_before('performance')
    def add_spmv_variables(self):
        # The parts of a call, for the efficiency and overlap models.
        for var in ('t_pack', 't_comp_interior', 't_comp_boundary'):
            self.perf_variables[var] = sn.make_performance_function(
                lambda key=f'{var}_s': float(self.headline()[key]), 's')
        self.perf_variables['stream_bw'] = sn.make_performance_function(
            lambda: float(self.stream_result()['fom']), 'GB/s')
        self.perf_variables['roofline_fraction'] = sn.make_performance_function(
            lambda: float(self.headline()['traffic_gbs']) / float(self.stream_result()['fom']),
            'fraction')


MD_PHASES = ('force', 'movout', 'sum', 'movea', 'moveb', 'neigh')


@rfm.simple_test
class MdCheck(KernelCheck):
    """Chorley's Lennard-Jones MD: 4 L^3 atoms in all (strong scaling).

    Sizes run from small (communication-heavy: few atoms per rank, many of
    them in the halo) to large.  Besides the common variables, each of
    Chorley's phases is a performance variable: its time on the slowest rank.
    """

    kernel = 'md'
    layout = parameter(runs_for(('masteronly',)), fmt=layout_name)
    problem = parameter([6, 12, 24])
    sample = sample_parameter()
    steps = variable(int, value=100)

    def kernel_args(self) -> list[str]:
        return ['--cells-per-side', str(self.problem), '--steps', str(self.steps)]

    @run_before('performance')
    def add_phases(self):
        for phase in MD_PHASES:
            self.perf_variables[f'phase_{phase}'] = sn.make_performance_function(
                lambda phase=phase: float(self.headline()[f't_{phase}']['max']), 's')


@rfm.simple_test
class RingCheck(KernelCheck):
    """Rabenseifner's ring, each rank its own node: equal bytes per node."""

    kernel = 'ring'
    layout = parameter(runs_for(('masteronly',)), fmt=layout_name)
    problem = parameter(['8,65536,1048576'])
    sample = sample_parameter()
    iters_scale = variable(float, value=2.0)

    def kernel_args(self) -> list[str]:
        return ['--pattern', 'ring', '--rank-as-node', '--sizes', self.problem,
                '--iters-scale', str(self.iters_scale)]

    @run_before('performance')
    def add_saturation_variables(self):
        # Aggregated bandwidth per node of every RESULT line, bw_k<k>_<bytes>
        # (k communicating CPUs per node): the saturation curve's data.  Every
        # layout of the partition logs every k of its layouts, so all lines of
        # the perflog file fit one header; 0 where the layout has no such k
        # (ReFrame fails a performance value of nan).
        cores = cores_per_node(self.current_partition)
        ks = divisors(cores)
        sizes = sorted({parse_bytes(x) for x in self.problem.split(',')})

        def value(k: int, size: int) -> float:
            return next((float(r['bandwidth_MBps']) for r in self.results()
                         if int(r['k']) == k and int(r['size']) == size), 0.0)

        for k in ks:
            for size in sizes:
                self.perf_variables[f'bw_k{k}_{size}'] = sn.make_performance_function(
                    lambda k=k, size=size: value(k, size), 'MB/s')


@rfm.simple_test
class StreamCheck(KernelCheck):
    """STREAM triad: the node's memory bandwidth, the roofline's roof."""

    kernel = 'stream'
    layout = parameter(runs_for(('masteronly',)), fmt=layout_name)
    problem = parameter([8000000])
    sample = sample_parameter()
    iters = variable(int, value=10)

    def kernel_args(self) -> list[str]:
        return ['--n', str(self.problem), '--iters', str(self.iters)]


# ---- verdicts: hybrid against pure MPI ------------------------------------------

KERNEL_CHECKS = {'spmv': SpmvCheck, 'md': MdCheck, 'ring': RingCheck, 'stream': StreamCheck}
VERDICT_CODE = {'WIN': 1, 'TIE': 0, 'LOSS': -1}


def _pairs() -> list[tuple[str, str, tuple, tuple]]:
    """(kernel, size, pure-MPI layout, hybrid layout) for every hybrid run."""
    out = []
    for kernel, cls in KERNEL_CHECKS.items():
        layouts = cls.param_space['layout']
        for problem in cls.param_space['problem']:
            for hybrid in layouts:
                mode, ranks, threads = hybrid
                if mode in ('mpi', 'serial'):
                    continue
                mpi = ('mpi', ranks * threads, 1)
                if mpi in layouts:
                    out.append((kernel, str(problem), mpi, hybrid))
    return out


def _pair_name(pair: tuple[str, str, tuple, tuple]) -> str:
    kernel, size, _mpi, (mode, ranks, threads) = pair
    return f'{kernel}/{size}/{mode}_{ranks}x{threads}'


@rfm.simple_test
class HybridVerdict(rfm.RunOnlyRegressionTest, SystemReferences, PerflogFields):
    """Hybrid against pure MPI for one kernel, size and layout."""

    pair = parameter(_pairs(), fmt=_pair_name)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    local = True
    time_limit = '1m'
    executable = 'echo'
    tags = {'verdict'}

    oversubscribed = 'false'
    finalize_hung = 'false'
    noise_floor = variable(float, value=DEFAULT_NOISE_FLOOR)

    @run_after('init')
    def depend_on_runs(self):
        kernel, size, mpi, hybrid = self.pair
        cls = KERNEL_CHECKS[kernel]
        self.kernel, self.size = kernel, size
        self.mode = f'verdict-{hybrid[0]}'
        self.ranks, self.threads = hybrid[1], hybrid[2]
        self.descr = (f'{kernel} size {size}: {hybrid[0]} {hybrid[1]}x{hybrid[2]} '
                      f'against mpi {mpi[1]}x1')
        self._sides: dict[str, list[str]] = {'mpi': [], 'hybrid': []}
        for side, layout in (('mpi', mpi), ('hybrid', hybrid)):
            for num in cls.get_variant_nums(layout=lambda lay, want=layout: lay == want,
                                            problem=lambda p: str(p) == size):
                name = cls.variant_name(num)
                self.depends_on(name, udeps.by_env)
                self._sides[side].append(name)

    def _samples(self, side: str) -> list[float]:
        part = self.current_partition.fullname
        out = []
        for name in self._sides[side]:
            dep = self.getdep(name)
            entry = dep.perfvalues.get(f'{part}:{TIME_VARIABLE}')
            if entry is None:
                raise sn.SanityError(
                    f'{dep.display_name} logged no {TIME_VARIABLE} '
                    f'(was the performance stage skipped?)')
            out.append(float(entry[0]))
            self.cores = dep.cores
            self.nodes = dep.nodes
            self.mpi_library = dep.mpi_library
            self.build_spec = dep.build_spec
        return out

    @run_before('run')
    def judge_samples(self):
        t_mpi, t_hyb = self._samples('mpi'), self._samples('hybrid')
        med_mpi, med_hyb = statistics.median(t_mpi), statistics.median(t_hyb)
        self._speedup = med_mpi / med_hyb
        self._noise = pair_noise(t_mpi, t_hyb, self.noise_floor)
        self._verdict = judge(self._speedup, self._noise)
        self.verified = 'true'
        self.executable_opts = [
            f'VERDICT {_pair_name(self.pair)}: {self._verdict} speedup={self._speedup:.4f} '
            f'noise={self._noise:.4f} samples={len(t_mpi)}/{len(t_hyb)} '
            f'T_mpi={med_mpi:.6g}s T_hybrid={med_hyb:.6g}s'
        ]

    @sanity_function
    def printed(self):
        return sn.assert_found(r'^VERDICT ', self.stdout)

    @performance_function('x')
    def speedup(self):
        return self._speedup

    @performance_function('win=1 tie=0 loss=-1')
    def verdict(self):
        return VERDICT_CODE[self._verdict]
