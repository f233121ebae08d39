"""ReFrame checks: build the kernels once per MPI stack and run each of them
as pure MPI and as hybrid MPI+OpenMP at equal cores.

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
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import types

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import (
    fixture,
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from harnesslib import (  # noqa: E402
    KernelBuild,
    KernelCheck,
    StackLauncher,
    binding_env,
    cores_per_node,
    hold_node_lock,
    layout_name,
    runs_for,
    sample_parameter,
    serial_runs,
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
        # Not self.job: before the run stage neither its launcher nor its
        # task count is set yet.
        launch = self.stack_launcher().run_command(
            types.SimpleNamespace(num_tasks=self.num_tasks))
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
        ks = sorted({t for t in range(1, cores + 1) if cores % t == 0})
        sizes = sorted({_ring_bytes(x) for x in self.problem.split(',')})

        def value(k: int, size: int) -> float:
            return next((float(r['bandwidth_MBps']) for r in self.results()
                         if int(r['k']) == k and int(r['size']) == size), 0.0)

        for k in ks:
            for size in sizes:
                self.perf_variables[f'bw_k{k}_{size}'] = sn.make_performance_function(
                    lambda k=k, size=size: value(k, size), 'MB/s')


def _ring_bytes(text: str) -> int:
    """A size of ring's --sizes list: N, NK (KiB) or NM (MiB)."""
    text = text.strip()
    mult = {'k': 1024, 'm': 1024 * 1024}.get(text[-1:].lower(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


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


# ---- benchmark: md against LAMMPS ----------------------------------------------

#: LAMMPS's standard in.lj benchmark; `md --preset lammps-in.lj` runs the same.
LAMMPS_IN_LJ = '''# 3d Lennard-Jones melt (LAMMPS bench/in.lj)
variable        x index 1
variable        y index 1
variable        z index 1
variable        xx equal 20*$x
variable        yy equal 20*$y
variable        zz equal 20*$z
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 ${xx} 0 ${yy} 0 ${zz}
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 1.44 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    delay 0 every 20 check no
fix             1 all nve
run             100
'''


@rfm.simple_test
class MdLammpsBenchmark(rfm.RunOnlyRegressionTest):
    """md against Debian's LAMMPS (`lmp`) on in.lj, alternating in one job.

    Each round runs md on 1 rank, lmp on 1 rank, md on 2 ranks, lmp on 2
    ranks and md as 1 rank x 2 threads, so every ratio compares runs made
    side by side.  The figures are medians over rounds of the per-round
    ratios of atom-steps per second (LAMMPS: atoms x steps / "Loop time").
    Targets (the references): md >= 1.0x LAMMPS on 1 and on 2 ranks, and the
    hybrid 1x2 within 10% of pure MPI 2x1.

    Rerun it alone with
      reframe -C config/settings.py -c checks -n MdLammpsBenchmark -r
    Debian's lmp is built on Open MPI, so it runs with the openmpi environment.
    """

    descr = 'md vs LAMMPS in.lj, alternating runs in one job'
    valid_systems = ['-transport-tcp']
    valid_prog_environs = ['+stack-openmpi']
    tags = {'benchmark'}
    time_limit = '10m'
    build = fixture(KernelBuild, scope='environment')
    rounds = variable(int, value=3)
    reference = {
        '*': {
            'md_over_lammps_1rank': (1.0, 0.0, None, 'x'),
            'md_over_lammps_2ranks': (1.0, 0.0, None, 'x'),
            'hybrid_over_mpi': (1.0, -0.10, None, 'x'),
            # Informational rates: machine-specific, bounded by nothing.
            'md_1rank': (0, None, None, 'atom-steps/s'),
            'lammps_1rank': (0, None, None, 'atom-steps/s'),
        }
    }

    @run_after('setup')
    def prepare(self):
        part = self.current_partition
        self.skip_if(shutil.which('lmp') is None,
                     "Debian's lmp not found: apt-get install lammps "
                     "(./harness setup installs it as root)")
        self.skip_if(cores_per_node(part) < 2, 'needs 2 cores per node')
        self.num_tasks = 1      # the script launches its own runs
        self.executable = 'bash'
        self.executable_opts = ['bench.sh']
        self.env_vars.update(binding_env('openmpi', 2))
        self.prerun_cmds = hold_node_lock(part)

    @run_before('run')
    def write_script(self):
        self.job.launcher = getlauncher('local')()
        env = self.current_environ
        launcher = env.extras['launcher']

        def launch(ranks: int, threads: int) -> str:
            job = types.SimpleNamespace(num_tasks=ranks)
            return ' '.join(StackLauncher(launcher, 'openmpi', ranks, threads).command(job))

        md = f'{self.build.executable_path("md")} --preset lammps-in.lj'
        lmp = 'lmp -in in.lj -log none'
        lines = [
            'set -o pipefail',
            f'for round in $(seq 1 {self.rounds}); do',
            f'  OMP_NUM_THREADS=1 {launch(1, 1)} {md} | sed -n "s/^RESULT /MD_1x1 /p"',
            f'  {launch(1, 1)} {lmp} | sed -n "s/^Loop time/LMP_1 Loop time/p"',
            f'  OMP_NUM_THREADS=1 {launch(2, 1)} {md} | sed -n "s/^RESULT /MD_2x1 /p"',
            f'  {launch(2, 1)} {lmp} | sed -n "s/^Loop time/LMP_2 Loop time/p"',
            f'  OMP_NUM_THREADS=2 {launch(1, 2)} {md} --mode masteronly'
            ' | sed -n "s/^RESULT /MD_1x2 /p"',
            'done',
        ]
        with open(os.path.join(self.stagedir, 'in.lj'), 'w') as fp:
            fp.write(LAMMPS_IN_LJ)
        with open(os.path.join(self.stagedir, 'bench.sh'), 'w') as fp:
            fp.write('\n'.join(lines) + '\n')

    def _md(self, tag: str) -> list[float]:
        rows = sn.evaluate(sn.extractall(rf'^{tag} (\{{.*\}})\s*$', self.stdout, 1))
        results = [json.loads(r) for r in rows]
        if not all(r.get('verified') is True for r in results):
            raise sn.SanityError(f'an md run ({tag}) did not verify its result')
        return [float(r['fom']) for r in results]

    def _lmp(self, tag: str) -> list[float]:
        patt = (rf'^{tag} Loop time of (\S+) on \d+ procs for (\d+) steps '
                rf'with (\d+) atoms')
        return [int(steps) * int(atoms) / float(t) for t, steps, atoms in
                sn.evaluate(sn.extractall(patt, self.stdout, (1, 2, 3)))]

    @sanity_function
    def all_rounds_ran(self):
        counts = {tag: len(self._md(tag)) for tag in ('MD_1x1', 'MD_2x1', 'MD_1x2')}
        counts.update({tag: len(self._lmp(tag)) for tag in ('LMP_1', 'LMP_2')})
        sn.evaluate(sn.assert_eq(self.job.exitcode, 0, msg='the benchmark script failed'))
        missing = {t: n for t, n in counts.items() if n != self.rounds}
        return sn.assert_false(missing, msg=f'rounds missing (of {self.rounds}): {missing}')

    def _median_ratio(self, num: list[float], den: list[float]) -> float:
        return statistics.median(a / b for a, b in zip(num, den))

    @performance_function('x')
    def md_over_lammps_1rank(self):
        return self._median_ratio(self._md('MD_1x1'), self._lmp('LMP_1'))

    @performance_function('x')
    def md_over_lammps_2ranks(self):
        return self._median_ratio(self._md('MD_2x1'), self._lmp('LMP_2'))

    @performance_function('x')
    def hybrid_over_mpi(self):
        return self._median_ratio(self._md('MD_1x2'), self._md('MD_2x1'))

    @performance_function('atom-steps/s')
    def md_1rank(self):
        return statistics.median(self._md('MD_1x1'))

    @performance_function('atom-steps/s')
    def lammps_1rank(self):
        return statistics.median(self._lmp('LMP_1'))
