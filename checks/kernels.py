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

import hashlib
import json
import os
import shlex
import shutil
import statistics
import types

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
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
from reframe.core.exceptions import ReframeFatalError
from reframe.core.launchers import JobLauncher

SRC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'src')
KERNELS = ('spmv', 'md', 'ring', 'stream')

# What `mpi_library` (MPI_Get_library_version, first line) starts with, per stack.
LIBRARY_PREFIX = {'openmpi': 'Open MPI', 'mpich': 'MPICH', 'mvapich2': 'MVAPICH2'}


# ---- topology and layouts ------------------------------------------------------

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


def _divisor_layouts(cores: int) -> list[tuple[int, int]]:
    return [(cores // t, t) for t in range(1, cores + 1) if cores % t == 0]


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


def _layout_name(layout: tuple[str, int, int]) -> str:
    mode, ranks, threads = layout
    if mode == 'serial':
        return f'serial_{ranks}x1_decomp{threads}'
    return f'{mode}_{ranks}x{threads}'


# ---- launcher -----------------------------------------------------------------

class StackLauncher(JobLauncher):
    """The stack's own launcher, with rank and thread binding for its family.

    Every rank gets T distinct cores and OMP_PLACES=cores pins one thread per
    core: a hybrid rank's threads never share a core.  MVAPICH2 binds each rank
    to one core by default, which serialises a hybrid rank's threads; its
    hybrid binding policy is set through the environment instead.
    """

    def __init__(self, path: str, family: str, ranks_per_node: int, cores_per_rank: int):
        super().__init__()
        self.path = path
        self.family = family
        self.ranks_per_node = ranks_per_node
        self.cores_per_rank = cores_per_rank

    def command(self, job) -> list[str]:
        n, r, t = str(job.num_tasks), str(self.ranks_per_node), str(self.cores_per_rank)
        if self.family == 'openmpi':
            return [self.path, '-np', n, '--map-by', f'ppr:{r}:node:PE={t}',
                    '--bind-to', 'core']
        if self.family == 'mpich':
            return [self.path, '-n', n, '-ppn', r, '-bind-to', f'core:{t}']
        return [self.path, '-n', n]


def binding_env(family: str, threads: int, binding: str = 'threads') -> dict[str, str]:
    """OpenMP placement, and MVAPICH2's hybrid binding unless told otherwise."""
    env = {'OMP_NUM_THREADS': str(threads), 'OMP_PLACES': 'cores',
           'OMP_PROC_BIND': 'close'}
    if family == 'mvapich2' and binding == 'threads':
        env.update({'MV2_ENABLE_AFFINITY': '1', 'MV2_CPU_BINDING_POLICY': 'hybrid',
                    'MV2_THREADS_PER_PROCESS': str(threads)})
    return env


# ---- build fixture --------------------------------------------------------------

class KernelBuild(rfm.CompileOnlyRegressionTest):
    """CMake build of every kernel with the environment's own MPI wrapper.

    The build tree lives under the system prefix (``var/build/<stack>-...``)
    rather than in the stage directory, so the shm and tcp partitions of one
    stack share it and a later session only rebuilds what changed.
    """

    descr = 'Build the kernels for one MPI stack'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    build_system = 'CustomBuild'
    sourcesdir = None
    fault_inject = variable(typ.Bool, value=False)
    build_type = variable(str, value='Release')
    build_dir = variable(str, value='')

    @run_before('compile')
    def configure(self):
        env = self.current_environ
        stack = env.extras.get('stack', env.name)
        wrapper = hashlib.sha1(env.cc.encode()).hexdigest()[:8]
        tag = f'{stack}-{self.build_type.lower()}-{wrapper}'
        if self.fault_inject:
            tag += '-fault-inject'
        self.build_dir = os.path.join(self.current_system.prefix, 'build', tag)
        launcher = env.extras.get('launcher', '')
        configure = [
            'cmake', '-S', SRC_DIR, '-B', self.build_dir,
            f'-DCMAKE_BUILD_TYPE={self.build_type}',
            f'-DCMAKE_C_COMPILER={env.cc}', f'-DMPI_C_COMPILER={env.cc}',
            f'-DKERNEL_FAULT_INJECT={"ON" if self.fault_inject else "OFF"}',
        ] + ([f'-DMPIEXEC_EXECUTABLE={launcher}'] if launcher else [])
        jobs = max(1, len(os.sched_getaffinity(0)))
        self.build_system.commands = [
            ' '.join(shlex.quote(a) for a in configure),
            f'cmake --build {shlex.quote(self.build_dir)} -j {jobs}',
        ]
        self.prebuild_cmds = hold_node_lock(self.current_partition)

    @sanity_function
    def built(self):
        return sn.all(sn.path_exists(self.executable_path(k)) for k in KERNELS)

    def executable_path(self, kernel: str) -> str:
        return os.path.join(self.build_dir, kernel)


def hold_node_lock(partition) -> list[str]:
    """Shell lines that take the node's lock for the rest of the job script.

    On a local partition several jobs can run at once (one per partition, or
    with the async policy); they would share the cores and spoil each other's
    timings.  Every build and run holds this lock, so the local machine runs
    one of them at a time whatever execution policy ReFrame uses.
    """
    if partition.scheduler.registered_name != 'local':
        return []
    lock = os.path.join(rt.runtime().system.prefix, 'node.lock')
    return [f'exec 9>>"{lock}"', 'flock 9']


# ---- run checks --------------------------------------------------------------------

class KernelCheck(rfm.RunOnlyRegressionTest):
    """One kernel run at one layout; subclasses say how to run their kernel."""

    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    time_limit = '5m'
    build = fixture(KernelBuild, scope='environment')


    # Loggable fields: every perflog line carries them.
    kernel = variable(str)
    mode = variable(str, value='')
    ranks = variable(int, value=0)
    threads = variable(int, value=0)
    size = variable(str, value='')
    cores = variable(int, value=0)
    nodes = variable(int, value=0)
    #: Threads whose subdomain each rank owns (serial mode: > threads).
    decomp = variable(int, value=0)
    mpi_library = variable(str, value='')
    verified = variable(str, value='')
    oversubscribed = variable(str, value='')
    #: 'true' when a rank's MPI_Finalize hung and the kernel's watchdog ended
    #: it after printing verified results (MPICH 4.0.x ch4:ucx over TCP).
    finalize_hung = variable(str, value='')

    #: ``threads``: each rank is bound to as many cores as it has threads (the
    #: default).  ``one-core``: each rank is bound to a single core, as
    #: MVAPICH2 does by default; its threads then share that core and the
    #: oversubscription check must fail the run (used by the tests).
    binding = variable(typ.Str[r'threads|one-core'], value='threads')

    @run_after('init')
    def set_layout(self):
        self.mode, self.ranks, self.threads = self.layout
        self.decomp = self.threads
        if self.mode == 'serial':
            self.threads = 1
        self.size = str(self.problem)
        self.descr = (f'{self.kernel} {self.mode} {self.ranks}x{self.threads} '
                      f'size {self.size}')

    def kernel_args(self) -> list[str]:
        raise NotImplementedError

    @run_after('setup')
    def place(self):
        part = self.current_partition
        self.cores = cores_per_node(part)
        self.skip_if(self.ranks * self.decomp != self.cores,
                     f'layout {self.ranks}x{self.decomp} does not fill the '
                     f'{self.cores} cores of {part.fullname}')
        if not self.nodes:
            self.nodes = int(part.extras.get('nodes', 1))
        self.num_tasks_per_node = self.ranks
        self.num_tasks = self.ranks * self.nodes
        self.num_cpus_per_task = self.threads
        env = self.current_environ
        self.executable = self.build.executable_path(self.kernel)
        self.executable_opts = ['--mode', self.mode] + self.kernel_args()
        self.env_vars.update(binding_env(env.extras.get('family', ''), self.threads,
                                         self.binding))
        self.prerun_cmds = hold_node_lock(part)

    def stack_launcher(self) -> JobLauncher:
        """The environment's own launcher with this run's binding (or the
        partition's launcher where the environment names none)."""
        env = self.current_environ
        if not env.extras.get('launcher'):
            return self.job.launcher
        # Each rank gets a core per thread, unless the test narrows it.
        return StackLauncher(env.extras['launcher'], env.extras.get('family', ''),
                             self.ranks, 1 if self.binding == 'one-core' else self.threads)

    @run_before('run')
    def set_launcher(self):
        self.job.launcher = self.stack_launcher()

    # -- results ----------------------------------------------------------------

    def results(self) -> list[dict]:
        """Every RESULT line of the run, parsed (cached)."""
        if not hasattr(self, '_results'):
            lines = sn.evaluate(sn.extractall(r'^RESULT (\{.*\})\s*$', self.stdout, 1))
            self._results = []
            for line in lines:
                try:
                    self._results.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise sn.SanityError(
                        f'malformed RESULT line ({err}): {line[:200]}') from None
        return self._results

    def headline(self) -> dict:
        """The RESULT line that gives the figures (the last one)."""
        return self.results()[-1]

    def _library_matches(self, lib: str) -> bool:
        stack = self.current_environ.extras.get('family', self.current_environ.name)
        prefix = LIBRARY_PREFIX.get(stack)
        return prefix is None or lib.startswith(prefix)

    def _shared_cores(self, res: dict) -> list[str]:
        """Cores on which two threads of this run ran (empty if none)."""
        seen: dict[tuple[str, int], str] = {}
        clashes = []
        hosts = res.get('hosts') or []
        for r, cpus in enumerate(res.get('cpus') or []):
            host = hosts[r] if r < len(hosts) else '?'
            for t, cpu in enumerate(cpus):
                if cpu is None or cpu < 0:
                    continue
                who = f'rank {r} thread {t}'
                if (host, cpu) in seen:
                    clashes.append(f'{who} and {seen[(host, cpu)]} on {host} core {cpu}')
                else:
                    seen[(host, cpu)] = who
        return clashes

    @sanity_function
    def validate(self):
        results = self.results()
        stack = self.current_environ.name
        if results:
            # First the library: a kernel linked to another stack explains
            # whatever else went wrong with it.
            self.mpi_library = str(self.headline().get('mpi_library', ''))
            sn.evaluate(sn.assert_true(
                self._library_matches(self.mpi_library),
                msg=f'{self.kernel} was run as stack {stack} but reports MPI library '
                    f'"{self.mpi_library}": built or linked against another stack'))
            # Then the kernel's own verification, whatever its speed.
            self.verified = str(all(r.get('verified') is True for r in results)).lower()
            sn.evaluate(sn.assert_true(
                self.verified == 'true',
                msg=f'{self.kernel} did not verify its result'))
        sn.evaluate(sn.assert_eq(self.job.exitcode, 0,
                                 msg=f'{self.kernel} exited with status {{0}}'))
        sn.evaluate(sn.assert_true(results, msg=f'{self.kernel} printed no RESULT line'))
        res = self.headline()
        self.finalize_hung = str(bool(sn.evaluate(sn.findall(
            r'MPI_Finalize did not return', self.stderr)))).lower()
        clashes = self._shared_cores(res)
        over = self.ranks * self.threads > self.cores or bool(clashes)
        self.oversubscribed = str(over).lower()
        sn.evaluate(sn.assert_false(
            over, msg=f'oversubscribed run {self.display_name}: '
                      + ('; '.join(clashes) or 'more threads than cores')))
        if (res.get('ranks') != self.num_tasks or
                res.get('threads') != self.threads):
            raise sn.SanityError(
                f'{self.kernel} ran {res.get("ranks")}x{res.get("threads")}, '
                f'expected {self.num_tasks}x{self.threads}')
        return True

    @run_before('performance')
    def set_perf_variables(self):
        res = self.headline()
        unit = res.get('fom_unit', '')
        self.perf_variables = {
            'fom': sn.make_performance_function(lambda: float(self.headline()['fom']), unit),
        }
        for var in ('t_total', 't_comp', 't_comm'):
            self.perf_variables[var] = sn.make_performance_function(
                lambda key=f'{var}_s': float(self.headline()[key]), 's')


@rfm.simple_test
class SpmvCheck(KernelCheck):
    """Chow & Hysom's 27-point SpMV, weak scaling: N^3 rows per core."""

    kernel = 'spmv'
    layout = parameter(runs_for(('masteronly', 'funneled')) + serial_runs(),
                       fmt=_layout_name)
    #: N^3 rows per core: from cache-resident (16: 1.3 MB of matrix per core)
    #: to memory-bound (128: 680 MB per core, far beyond any cache).
    problem = parameter([16, 32, 64, 128])
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
    layout = parameter(runs_for(('masteronly',)), fmt=_layout_name)
    problem = parameter([6, 12, 24])
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
    layout = parameter(runs_for(('masteronly',)), fmt=_layout_name)
    problem = parameter(['8,65536,1048576'])
    iters_scale = variable(float, value=2.0)

    def kernel_args(self) -> list[str]:
        return ['--pattern', 'ring', '--rank-as-node', '--sizes', self.problem,
                '--iters-scale', str(self.iters_scale)]


@rfm.simple_test
class StreamCheck(KernelCheck):
    """STREAM triad: the node's memory bandwidth, the roofline's roof."""

    kernel = 'stream'
    layout = parameter(runs_for(('masteronly',)), fmt=_layout_name)
    problem = parameter([8000000])
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
