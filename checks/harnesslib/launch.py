"""Launching, the ReFrame way: the partition names ReFrame's own launcher
(``mpirun`` here, ``srun`` on a Slurm system) and each environment makes that
name resolve to its own stack (``stack_bindir``: links to the stack's own
tools, first on ``PATH``; Debian's plain ``mpirun`` is whichever stack
``update-alternatives`` chose), so that every check, the harness's own and a
centre's, launches the same way.  The binding is set in the variables the
stack's launcher reads (``binding_env``); ``hold_node_lock`` runs one build or
run at a time on a local machine; ``HARNESS_MPI_ENV`` says what becomes of the
MPI tuning variables a user's shell exports (``clean_mpi_env``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import types
from collections.abc import Mapping, MutableMapping

import reframe.core.runtime as rt
from harnesscore.stacks import STACK, STACKS
from reframe.core.launchers import JobLauncher

#: Prefixes of the MPI tuning variables: what a shell's rc file or a module
#: may export that changes what a run measures (transport, protocol,
#: collectives): Open MPI's and PRRTE's/PMIx's MCA, UCX, MPICH's CVARs,
#: MVAPICH2's, libfabric's and Intel MPI's.
MPI_VAR_PREFIXES = ('OMPI_MCA_', 'PRTE_MCA_', 'PMIX_MCA_', 'UCX_', 'MPIR_CVAR_', 'MV2_', 'FI_',
                    'I_MPI_')
#: ``HARNESS_MPI_ENV``: what becomes of the MPI tuning variables a session
#: inherits (the partition's own always apply).
MPI_ENV_MODES = ('clean', 'keep')


def mpi_vars(env: Mapping[str, str]) -> dict[str, str]:
    """The MPI tuning variables of `env` (``MPI_VAR_PREFIXES``)."""
    return {k: str(v) for k, v in env.items() if k.startswith(MPI_VAR_PREFIXES)}


def mpi_env_mode() -> str:
    """``HARNESS_MPI_ENV`` (default ``clean``), checked."""
    mode = os.environ.get('HARNESS_MPI_ENV', '').strip() or 'clean'
    if mode not in MPI_ENV_MODES:
        raise ValueError(f'HARNESS_MPI_ENV must be one of {", ".join(MPI_ENV_MODES)}, '
                         f'got {mode!r}')
    return mode


def clean_mpi_env(environ: MutableMapping[str, str]) -> list[str]:
    """Take the MPI tuning variables out of `environ` (the session's own, so
    that no run inherits them); their names."""
    names = sorted(mpi_vars(environ))
    for name in names:
        del environ[name]
    return names


# What `mpi_library` (MPI_Get_library_version, first line) starts with, per stack.
LIBRARY_PREFIX = {s.name: s.library_prefix for s in STACKS}

#: The line a job script writes with its launcher's exit status where the
#: scheduler reports none (ReFrame's squeue backend).
EXIT_STATUS_TAG = 'harness: launcher exit status'

#: The generic names a stack's link folder offers, besides its launcher.
LAUNCHER_NAMES = ('mpirun', 'mpiexec')
WRAPPER_NAMES = ('mpicc', 'mpicxx', 'mpic++', 'mpifort', 'mpif90', 'mpif77')
#: Helpers a family's launcher starts by name (from PATH where they are not
#: in its own folder: a link named mpirun is not in the stack's folder).
HELPER_NAMES = {s.name: s.launcher_helpers for s in STACKS if s.launcher_helpers}


# ---- the stack's tools under their generic names ---------------------------------

def _sibling(path: str, old: str, new: str) -> str | None:
    """`path` with `old` replaced by `new` in its file name, if that exists
    (mpicc.openmpi -> mpicxx.openmpi, <prefix>/bin/mpicc -> <prefix>/bin/mpicxx)."""
    folder, name = os.path.split(path)
    if old not in name:
        return None
    candidate = os.path.join(folder, name.replace(old, new, 1))
    return candidate if os.access(candidate, os.X_OK) else None


def stack_links(cc: str, launcher: str, family: str = '') -> dict[str, str]:
    """Generic name -> the stack's own tool, for its link folder."""
    links = {name: launcher for name in LAUNCHER_NAMES}
    for name in WRAPPER_NAMES:
        target = cc if name == 'mpicc' else _sibling(cc, 'mpicc', name)
        if target:
            links[name] = target
    for name in HELPER_NAMES.get(family, ()):
        helper = os.path.join(os.path.dirname(launcher), name)
        if os.access(helper, os.X_OK):
            links[name] = helper
    return links


def stack_bindir(root: str, stack: str, cc: str, launcher: str, family: str = '') -> str:
    """A folder of links named like the generic MPI tools (``mpirun``,
    ``mpiexec``, ``mpicc``...) to `stack`'s own `cc` and `launcher` (and their
    siblings): put first on PATH, the plain names are that stack's.

    The folder is named by its links, so sessions that find a stack at
    different prefixes never rewrite each other's; links are replaced
    atomically.
    """
    links = stack_links(cc, launcher, family)
    digest = hashlib.sha256(repr(sorted(links.items())).encode()).hexdigest()[:10]
    bindir = os.path.join(root, f'{stack}-{digest}', 'bin')
    os.makedirs(bindir, exist_ok=True)
    for name, target in links.items():
        path = os.path.join(bindir, name)
        if os.path.islink(path) and os.readlink(path) == target:
            continue
        tmp = f'{path}.{os.getpid()}.tmp'
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.replace(tmp, path)
    return bindir


# ---- binding ---------------------------------------------------------------------

def own_launcher(partition, environ) -> str:
    """The registered launcher of a stack that starts its ranks itself inside
    a Slurm allocation (environment extras ``launch: own``, e.g. MVAPICH2
    built with ch3:sock: ``mpiexec``, its own by PATH or module), or '' where
    the partition's launcher serves."""
    if environ.extras.get('launch') != 'own':
        return ''
    name = os.path.basename(str(environ.extras.get('launcher') or 'mpiexec'))
    return 'mpirun' if name.startswith('mpirun') else 'mpiexec'


def launcher_family(partition, environ) -> str:
    """Whose binding variables a run needs: ``srun`` where the run launches
    with Slurm's srun, else the stack's family (its own launcher)."""
    if partition.launcher_type.registered_name == 'srun' and not own_launcher(partition,
                                                                             environ):
        return 'srun'
    return str(environ.extras.get('family', ''))


def rank_binding_env(family: str, cores_per_rank: int = 1,
                     oversubscribe: bool = False) -> dict[str, str]:
    """Every rank bound to `cores_per_rank` cores of its own, in the variables
    the family's launcher reads (each checked against the installed stacks:
    Open MPI 4.1 mpirun, MPICH 4.0 hydra; Slurm 22.05 srun).

    Open MPI refuses more ranks than cores (no ``--oversubscribe``); hydra
    would wrap them round, which the checks' core test catches.  Only where
    the configuration declares the oversubscription on purpose
    (`oversubscribe`: a declared topology, a test cluster on shared cores)
    are the ranks left unbound and Open MPI told to allow it; srun places
    them as Slurm sees fit.
    """
    t = max(1, int(cores_per_rank))
    stack = STACK.get(family)
    if stack is not None and stack.launcher_kind == 'orte':
        if oversubscribe:
            return {'OMPI_MCA_rmaps_base_oversubscribe': '1',
                    'OMPI_MCA_rmaps_base_mapping_policy': 'slot',
                    'OMPI_MCA_hwloc_base_binding_policy': 'none', **stack.binding_env}
        return {'OMPI_MCA_rmaps_base_mapping_policy': 'core' if t == 1 else f'slot:PE={t}',
                'OMPI_MCA_hwloc_base_binding_policy': 'core', **stack.binding_env}
    if stack is not None and stack.launcher_kind == 'hydra':
        # The stack's own variables go with the launcher's (MVAPICH2's
        # library binding off: harnesscore.stacks says why).
        binding = 'none' if oversubscribe else 'core' if t == 1 else f'core:{t}'
        return {'HYDRA_BINDING': binding, **stack.binding_env}
    if family == 'srun':
        # srun's --cpus-per-task comes from the job (ReFrame's srun launcher).
        return {'SLURM_CPU_BIND': 'cores'}
    return {}


def shell_words(words: list[str]) -> list[str]:
    """Each word quoted for the job script (ReFrame writes ``executable`` and
    ``executable_opts`` into it as they are)."""
    return [shlex.quote(str(w)) for w in words]


def binding_env(family: str, threads: int, binding: str = 'threads',
                oversubscribe: bool = False) -> dict[str, str]:
    """A run's binding: OpenMP's placement of `threads` threads per rank, one
    per core, and each rank bound to a core per thread (``binding='threads'``)
    or to a single core (``'one-core'``, as MVAPICH2 does by default: its
    threads then share that core and the checks must fail the run); nothing
    bound where the oversubscription is declared (see ``rank_binding_env``)."""
    cores = 1 if binding == 'one-core' else threads
    if oversubscribe:
        return {'OMP_NUM_THREADS': str(threads),
                **rank_binding_env(family, cores, oversubscribe=True)}
    return {'OMP_NUM_THREADS': str(threads), 'OMP_PLACES': 'cores',
            'OMP_PROC_BIND': 'close', **rank_binding_env(family, cores)}


# ---- command lines for the scripts a check writes ----------------------------------

def launch_line(launcher: JobLauncher, num_tasks: int, cpus_per_task: int = 1,
                env: dict[str, str] | None = None) -> str:
    """The shell command line that launches `num_tasks` ranks with `launcher`
    (the partition's, as ReFrame would emit it; every word quoted), for job
    scripts a check writes itself.  `env`: variables for this launch only
    (a layout other than the job's), set with ``env``."""
    job = types.SimpleNamespace(num_tasks=num_tasks, num_tasks_per_node=None,
                                num_cpus_per_task=cpus_per_task, name='', time_limit=None)
    command = launcher.command(job)
    if launcher.registered_name == 'srun':
        # ReFrame's srun takes the task count from the job's allocation; a
        # script's launch may use fewer.
        command.append(f'--ntasks={num_tasks}')
    words = [*(['env', *(f'{k}={v}' for k, v in env.items())] if env else []),
             *command, *launcher.options]
    if launcher.modifier:
        words = [launcher.modifier, *launcher.modifier_options, *words]
    return ' '.join(shlex.quote(word) for word in words)


# ---- the node lock ----------------------------------------------------------------

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
    return [f'exec 9>>{shlex.quote(lock)}', 'flock 9']
