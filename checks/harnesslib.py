"""Shared pieces of the harness's ReFrame checks (no test is defined here).

* topology and layouts: ``cores_per_node``, ``system_layouts``, ``runs_for``,
  ``serial_runs`` (every R x T with R*T = cores per node);
* ``StackLauncher`` and ``binding_env``: each stack's own launcher with rank
  and thread binding;
* ``KernelBuild``: the environment-scoped build fixture of the kernels;
* ``hold_node_lock``: one job at a time on a local machine;
* ``KernelCheck``: the base of every kernel run (sanity, perf variables).

The check files import it after putting this directory on ``sys.path``
(ReFrame loads check files under mangled module names, so a sibling module
is imported by its plain name)::

    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import harnesslib

Append, never insert at the front: ReFrame loads files inside a context that
appends their directory and later pops ``sys.path`` *by position*, so an entry
inserted at the front would make it drop another one (such as the editable
install of ``hybridverdict``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
import yaml  # ReFrame brings PyYAML
from hybridverdict.references import references_file, split_name
from reframe.core.builtins import (
    fixture,
    parameter,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.exceptions import PerformanceError, ReframeFatalError
from reframe.core.launchers import JobLauncher

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_DIR = os.path.join(REPO_DIR, 'src')
#: Where the systems' references files live unless ReFrame's reference prefix
#: (``RFM_REFERENCE_PREFIX``; ReFrame 4.10.4's configuration schema does not
#: accept ``general/reference_prefix`` yet) says otherwise.
REFERENCES_DIR = os.path.join(REPO_DIR, 'config', 'references')
KERNELS = ('spmv', 'md', 'ring', 'stream')

# What `mpi_library` (MPI_Get_library_version, first line) starts with, per stack.
LIBRARY_PREFIX = {'openmpi': 'Open MPI', 'mpich': 'MPICH', 'mvapich2': 'MVAPICH2'}

#: The line a job script writes with its launcher's exit status where the
#: scheduler reports none (ReFrame's squeue backend).
EXIT_STATUS_TAG = 'harness: launcher exit status'


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


# ---- launcher -----------------------------------------------------------------

class StackLauncher(JobLauncher):
    """The stack's own launcher, with rank and thread binding for its family.

    Every rank gets T distinct cores and OMP_PLACES=cores pins one thread per
    core: a hybrid rank's threads never share a core.  MVAPICH2 binds each rank
    to one core by default, which serialises a hybrid rank's threads; its
    launcher (MPICH's hydra) binds instead, with the library's affinity off.
    """

    def __init__(self, path: str, family: str, ranks_per_node: int, cores_per_rank: int,
                 pmi: str = ''):
        super().__init__()
        self.path = path
        self.family = family
        self.ranks_per_node = ranks_per_node
        self.cores_per_rank = cores_per_rank
        #: ``srun --mpi=`` of family 'srun' (the PMI the stack was built for).
        self.pmi = pmi

    def command(self, job) -> list[str]:
        n, r, t = str(job.num_tasks), str(self.ranks_per_node), str(self.cores_per_rank)
        if self.family == 'srun':
            # Inside a Slurm allocation: Slurm places and binds the ranks
            # (srun no longer takes -c from sbatch since Slurm 22.05).
            return [self.path, *([f'--mpi={self.pmi}'] if self.pmi else []), '-n', n,
                    '--ntasks-per-node', r, '-c', t, '--cpu-bind=cores']
        if self.family == 'openmpi':
            return [self.path, '-np', n, '--map-by', f'ppr:{r}:node:PE={t}',
                    '--bind-to', 'core']
        if self.family in ('mpich', 'mvapich2'):
            # MVAPICH2's launcher is MPICH's hydra.  Its own library binding
            # is switched off (binding_env): built with ch3:sock (TCP only)
            # it cannot see which ranks share a node and binds them all to
            # the same core.
            return [self.path, '-n', n, '-ppn', r, '-bind-to', f'core:{t}']
        return [self.path, '-n', n]


def binding_env(family: str, threads: int, binding: str = 'threads') -> dict[str, str]:
    """OpenMP placement; MVAPICH2's own affinity off (its launcher binds).
    `binding` ('threads' or 'one-core') is the launcher's business."""
    env = {'OMP_NUM_THREADS': str(threads), 'OMP_PLACES': 'cores',
           'OMP_PROC_BIND': 'close'}
    if family == 'mvapich2':
        # hydra binds (StackLauncher); the library's own affinity would bind a
        # hybrid rank's threads to one core, and with ch3:sock every rank of a
        # node to the same core.
        env['MV2_ENABLE_AFFINITY'] = '0'
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
    #: A build that hangs fails; the session carries on.
    build_time_limit = '10m'
    fault_inject = variable(typ.Bool, value=False)
    build_type = variable(str, value='Release')
    build_dir = variable(str, value='')
    #: What was built and how, for the perflog: the concretised Spack spec
    #: where Spack built it, otherwise the CMake build and its wrapper.
    build_spec = variable(str, value='')

    #: Spack path (see ``spack_spec``): the install prefix of the kernels and
    #: the environment directory that installed them.
    spack_prefix = variable(str, value='')
    spack_env = variable(str, value='')

    @run_before('compile')
    def configure(self):
        env = self.current_environ
        stack = env.extras.get('stack', env.name)
        spec = spack_spec(env, self.current_partition, self.build_type, self.fault_inject)
        if spec:
            self.configure_spack(spec)
            return
        wrapper = hashlib.sha1(env.cc.encode()).hexdigest()[:8]
        tag = f'{stack}-{self.build_type.lower()}-{wrapper}'
        if self.fault_inject:
            tag += '-fault-inject'
        self.build_dir = os.path.join(self.current_system.prefix, 'build', tag)
        self.build_spec = f'cmake {self.build_type} {stack} cc={env.cc}'
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
        # The partitions of a stack share the build tree: one build at a time
        # (on a Slurm system the builds run side by side on the login node).
        self.prebuild_cmds = hold_node_lock(self.current_partition) + [
            f'mkdir -p {shlex.quote(os.path.dirname(self.build_dir))}',
            f'exec 8>>{shlex.quote(self.build_dir + ".lock")}', 'flock 8']

    def configure_spack(self, spec: str):
        """Install the kernels with Spack: a one-spec environment derived from
        the checkout's spack.yaml, installed into the persistent install tree
        (``<prefix>/spack/opt`` or ``HARNESS_SPACK_INSTALL_TREE``), where a later
        session finds it installed and rebuilds nothing."""
        system = os.environ.get('HARNESS_SPACK_SYSTEM') or self.current_system.name
        tree = os.path.abspath(os.environ.get('HARNESS_SPACK_INSTALL_TREE') or os.path.join(
            self.current_system.prefix, 'spack', 'opt'))
        tag = hashlib.sha1(f'{system} {spec}'.encode()).hexdigest()[:8]
        stack = self.current_environ.extras.get('stack', self.current_environ.name)
        self.spack_env = os.path.join(self.current_system.prefix, 'spack', 'envs',
                                      f'{stack}-{tag}')
        write_spack_env(self.spack_env, spec, tree)
        self.build_spec = f'spack {spec}'
        self.build_system.commands = spack_build_commands(self.spack_env, system)
        self.prebuild_cmds = hold_node_lock(self.current_partition)

    @sanity_function
    def built(self):
        if self.spack_env:
            self.read_spack_result()
        return sn.all(sn.path_exists(self.executable_path(k)) for k in KERNELS)

    def read_spack_result(self):
        """The install prefix and concretised spec the build wrote, or the
        failure with Spack's own error text."""
        out = os.path.join(self.stagedir, SPACK_RESULT)
        failed = sn.evaluate(sn.extractall(r'^harness: spack step failed: (.*)$',
                                           self.stderr, 1))
        if failed or not os.path.exists(out):
            stderr = sn.evaluate(sn.extractall(r'^(.*\S.*)$', self.stderr, 1))
            errors = [i for i, line in enumerate(stderr) if line.startswith('==> Error')]
            shown = stderr[errors[0]:] if errors else stderr[-12:]
            raise sn.SanityError(
                f'Spack build of the kernels failed ({self.build_spec}): '
                + ' / '.join(line.strip() for line in shown[:40]))
        with open(out, encoding='utf-8') as fh:
            lines = [line.strip() for line in fh if line.strip()]
        self.spack_prefix = lines[0]
        # The perflog separates fields with '|': never let one into a field.
        self.build_spec = 'spack ' + lines[1].replace('|', '/')

    def executable_path(self, kernel: str) -> str:
        if self.spack_env:
            return os.path.join(self.spack_prefix, 'bin', kernel)
        return os.path.join(self.build_dir, kernel)


# ---- Spack ------------------------------------------------------------------------

SPACK_PACKAGE = 'hybrid-kernels'
#: Written by the Spack build into its stage directory: prefix, then spec.
SPACK_RESULT = 'spack-result.txt'
#: How the perflog shows a concretised spec (no '|' in it).
SPACK_FORMAT = ('{name}@{version}{%compiler.name}{@compiler.version}{variants}'
                '{arch=architecture} ^{^mpi.name}@{^mpi.version} /{hash:7}')


def spack_spec(env, partition, build_type: str, fault_inject: bool) -> str:
    """The Spack spec of the kernels for this environment, or '' for CMake.

    Spack builds when the environment names a spec (extras ``spack_spec``,
    e.g. from ``HARNESS_MPICH_SPACK_SPEC``), when the environment or the
    partition says ``spack: true`` in its extras, or when the user opts in
    with ``HARNESS_SPACK=1`` and ``spack`` is on PATH.  Without either the
    kernels are built with CMake and the environment's wrapper.
    """
    if env.extras.get('spack_spec'):
        return str(env.extras['spack_spec'])
    wanted = bool(env.extras.get('spack') or partition.extras.get('spack'))
    if not wanted and not (os.environ.get('HARNESS_SPACK') == '1' and shutil.which('spack')):
        return ''
    stack = env.extras.get('spack_stack') or env.extras.get('stack', env.name)
    return (f'{SPACK_PACKAGE}@develop build_type={build_type} +openmp '
            f'{"+" if fault_inject else "~"}fault_inject ^{stack}')


def write_spack_env(envdir: str, spec: str, install_tree: str) -> None:
    """A one-spec copy of the checkout's spack.yaml (same includes, repos,
    develop source and concretizer), rewritten only when it changes so its
    lock file, and what Spack installed from it, stay valid."""
    with open(os.path.join(REPO_DIR, 'spack.yaml'), encoding='utf-8') as fh:
        manifest = yaml.safe_load(fh)
    conf = manifest['spack']

    def absolute(path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(REPO_DIR, path)

    conf['include'] = [absolute(p) for p in conf.get('include', [])]
    conf['repos'] = [absolute(p) for p in conf.get('repos', [])]
    for dev in conf.get('develop', {}).values():
        dev['path'] = absolute(dev['path'])
    conf.pop('definitions', None)
    conf['specs'] = [spec]
    conf.setdefault('config', {})['install_tree'] = {'root': install_tree}
    conf['config']['develop_stage_link'] = os.path.join(envdir, '.spack-env',
                                                        'build-{arch}-{hash:7}')
    text = ('# Written by the harness (checks/harnesslib.py) from spack.yaml; '
            'do not edit.\n' + yaml.safe_dump(manifest, sort_keys=False))
    path = os.path.join(envdir, 'spack.yaml')
    os.makedirs(envdir, exist_ok=True)
    try:
        with open(path, encoding='utf-8') as fh:
            if fh.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path + '.tmp', 'w', encoding='utf-8') as fh:
        fh.write(text)
    os.replace(path + '.tmp', path)


def spack_build_commands(envdir: str, system: str) -> list[str]:
    """Concretise, install, then record the prefix and the concretised spec.

    A failing step ends the script with status 0 after a marker line: the
    fixture's sanity then fails with Spack's own error text, which a build
    job's exit status would hide behind 'build job failed'.
    """
    env = shlex.quote(envdir)
    fmt = shlex.quote(SPACK_FORMAT)
    return [
        f'export HARNESS_SPACK_SYSTEM={shlex.quote(system)}',
        'step() { echo "+ $*" >&2; "$@" || { echo "harness: spack step failed: $* '
        '(exit status $?)" >&2; exit 0; }; }',
        f'step spack -e {env} concretize',
        f'step spack -e {env} install --fail-fast',
        f'step spack -e {env} location -i {SPACK_PACKAGE} > {SPACK_RESULT}.tmp',
        f'step spack -e {env} find --format {fmt} {SPACK_PACKAGE} >> {SPACK_RESULT}.tmp',
        f'mv {SPACK_RESULT}.tmp {SPACK_RESULT}',
    ]


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


# ---- samples and references ------------------------------------------------------

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
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f'HARNESS_REPEAT must be a positive integer, got {text!r}')
    return int(text)


class SystemReferences(rfm.RegressionTestPlugin):
    """Performance references from the system's ``$ref`` file.

    The file is ``<reference prefix>/<system>.yaml`` (see
    ``hybridverdict.references``), indexed by partition, environment and the
    test's variant (its parameters without the sample number).  Without the
    file a test has no references; with ``-S require_reference=true`` (the
    nightly mode) a test without one fails, naming the file and the key.
    """

    #: The test's parameters without the sample number: its references key.
    ref_variant = variable(str, value='-', loggable=False)
    #: The references file of the current system.
    references_path = variable(str, value='', loggable=False)
    #: False in a test that sets its own references (fixed targets).
    system_references = variable(bool, value=True, loggable=False)

    @run_after('init')
    def load_system_references(self):
        _cls, self.ref_variant = split_name(self.display_name)
        prefix = rt.runtime().get_option('general/0/reference_prefix') or REFERENCES_DIR
        self.references_path = references_file(prefix, self.current_system.name)
        if self.system_references and os.path.isfile(self.references_path):
            self.reference = {'$ref': self.references_path}

    @run_before('performance')
    def demand_reference(self):
        if not self.require_reference or not self.system_references:
            return
        where = (f'{self.current_partition.fullname} {self.current_environ.name} '
                 f'{type(self).__name__} [{self.ref_variant}]')
        if not os.path.isfile(self.references_path):
            raise PerformanceError(
                f'no references file {self.references_path} for system '
                f'{self.current_system.name} (needed for {where}); write one from '
                f'earlier runs with `./harness baseline`')
        try:
            self.reference[self]
        except KeyError:
            raise PerformanceError(
                f'no reference for {where} in {self.references_path}; '
                f'add it with `./harness baseline`') from None


# ---- run checks --------------------------------------------------------------------

class PerflogFields(rfm.RegressionTestPlugin):
    """The fields every perflog line of the harness carries (the ``format`` of
    config/settings.py): what ran, where, and whether its result counts."""

    kernel = variable(str, value='')
    mode = variable(str, value='')
    #: Ranks per node and threads per rank.
    ranks = variable(int, value=0)
    threads = variable(int, value=0)
    size = variable(str, value='')
    #: Cores per node, and nodes.
    cores = variable(int, value=0)
    nodes = variable(int, value=0)
    mpi_library = variable(str, value='')
    verified = variable(str, value='')
    oversubscribed = variable(str, value='')
    #: 'true' when a rank's MPI_Finalize hung and the kernel's watchdog ended
    #: it after printing verified results (MPICH 4.0.x ch4:ucx over TCP).
    finalize_hung = variable(str, value='')
    #: The build this run used (``KernelBuild.build_spec``).
    build_spec = variable(str, value='')


class KernelCheck(rfm.RunOnlyRegressionTest, SystemReferences, PerflogFields):
    """One kernel run at one layout; subclasses say how to run their kernel."""

    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    time_limit = '5m'
    build = fixture(KernelBuild, scope='environment')

    #: Threads whose subdomain each rank owns (serial mode: > threads).
    decomp = variable(int, value=0)

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
        self.build_spec = self.build.build_spec
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
        cores = 1 if self.binding == 'one-core' else self.threads
        if env.extras.get('launch') == 'srun':
            # A Slurm system: srun with the PMI this stack needs.
            return StackLauncher(env.extras['launcher'], 'srun', self.ranks, cores,
                                 pmi=env.extras.get('pmi', ''))
        return StackLauncher(env.extras['launcher'], env.extras.get('family', ''),
                             self.ranks, cores)

    @run_before('run')
    def set_launcher(self):
        self.job.launcher = self.stack_launcher()
        if self.job.scheduler.registered_name == 'squeue':
            # squeue reports no exit status (no accounting database): the
            # job script records the launcher's, right after it.
            self.postrun_cmds = [f'echo "{EXIT_STATUS_TAG} $?" >&2', *self.postrun_cmds]

    def exit_status(self):
        """The run's exit status: the scheduler's, or the job script's record
        of it where the scheduler reports none (None if neither knows)."""
        if self.job.exitcode is not None:
            return self.job.exitcode
        found = sn.evaluate(sn.extractall(rf'^{EXIT_STATUS_TAG} (\d+)$', self.stderr, 1, int))
        return found[-1] if found else None

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
        status = self.exit_status()
        if status is None:
            raise sn.SanityError(
                f'{self.kernel}: the job ended before its launcher returned (scheduler '
                f'state {self.job.state}): killed at its time limit of {self.time_limit} s '
                f'or cancelled')
        sn.evaluate(sn.assert_eq(status, 0,
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
        if self.is_dry_run():   # --dry-run: job scripts only, no output to read
            return
        res = self.headline()
        unit = res.get('fom_unit', '')
        self.perf_variables = {
            'fom': sn.make_performance_function(lambda: float(self.headline()['fom']), unit),
        }
        for var in ('t_total', 't_comp', 't_comm'):
            self.perf_variables[var] = sn.make_performance_function(
                lambda key=f'{var}_s': float(self.headline()[key]), 's')


# ---- OSU Micro-Benchmarks -------------------------------------------------------

#: How to provide OSU, for the one-line skip reason.
OSU_HOWTO = ('set HARNESS_OSU_PREFIX to its install prefix ({stack} stands for the stack, '
             'e.g. /opt/osu/{stack}), or the environment extra osu_prefix in the system '
             'configuration, or install osu-micro-benchmarks with Spack')

#: Where an OSU install keeps its MPI benchmarks (`make install` and Spack),
#: and bin/ for installs that put them on PATH.
OSU_DIRS = ('libexec/osu-micro-benchmarks/mpi/pt2pt',
            'libexec/osu-micro-benchmarks/mpi/collective', 'bin')


def osu_binary(env, name: str) -> tuple[str | None, str]:
    """(path of OSU benchmark `name` for environment `env`, '') or (None, why not).

    The prefix is the environment's extra ``osu_prefix`` (config/settings.py
    fills it from HARNESS_OSU_PREFIX, a site configuration or Spack sets it).
    """
    stack = env.extras.get('stack', env.name)
    prefix = str(env.extras.get('osu_prefix', '') or '')
    if not prefix:
        return None, f'OSU Micro-Benchmarks not configured for {stack}: {OSU_HOWTO}'
    for sub in OSU_DIRS:
        path = os.path.join(prefix, sub, name)
        if os.access(path, os.X_OK):
            return path, ''
    return None, (f'{name} not found under osu_prefix {prefix} ({stack}; looked in '
                  f'{", ".join(OSU_DIRS)}): {OSU_HOWTO}')


def mpi_libraries(ldd_output: str) -> set[str]:
    """Resolved paths of the MPI libraries (libmpi*, libmpich*) in ldd's output."""
    out = set()
    for line in ldd_output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == '=>' and parts[0].startswith(('libmpi.', 'libmpich.')):
            out.add(os.path.realpath(parts[2]) if parts[2].startswith('/')
                    else f'{parts[0]} (not found)')
    return out
