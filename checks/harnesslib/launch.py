"""Launching, the ReFrame way: the partition names ReFrame's own launcher
(``mpirun`` here, ``srun`` on a Slurm system) and each environment makes that
name resolve to its own stack (``stack_bindir``), so that every check, the
harness's own and a centre's, launches the same way.  The binding is set in
the variables the stack's launcher reads (``binding_env``); ``hold_node_lock``
runs one build or run at a time on a local machine; ``HARNESS_MPI_ENV`` says
what becomes of a user's MPI and OpenMP tuning variables and files.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import types
from collections.abc import Mapping, MutableMapping

from harnesscore.osu_output import env_family
from harnesscore.stacks import STACK, STACKS, Stack, sysconfdir_in
from reframe.core.launchers import JobLauncher

#: Prefixes of the MPI tuning variables, what a shell's rc file or a module may
#: export that changes what a run measures: each stack's own
#: (``Stack.tuning_prefixes``) and those of the libraries under them (UCX, UCC,
#: HCOLL, SHARP, libfabric, PSM2/3, Intel MPI; hwloc, whose topology every
#: launcher binds ranks by).
MPI_VAR_PREFIXES = (*dict.fromkeys(p for s in STACKS for p in s.tuning_prefixes),
                    'UCX_', 'UCC_', 'HCOLL_', 'SHARP_', 'FI_', 'PSM2_', 'PSM3_', 'I_MPI_',
                    'HWLOC_')
#: Prefixes of the OpenMP runtime's variables: a wait policy or spin count
#: changes a hybrid run's figure of merit as much as a transport does.
OPENMP_VAR_PREFIXES = ('OMP_', 'GOMP_', 'KMP_')
#: Every prefix ``HARNESS_MPI_ENV`` handles (``mpi_vars``).
TUNING_VAR_PREFIXES = MPI_VAR_PREFIXES + OPENMP_VAR_PREFIXES
#: Variables every run records but no mode takes out (a preloaded library
#: reaches the launcher and the ranks).
RECORDED_VARS = ('LD_PRELOAD',)
#: ``HARNESS_MPI_ENV``: what becomes of the MPI tuning variables a session
#: inherits (the partition's own always apply).
MPI_ENV_MODES = ('clean', 'keep')
#: The name under which a run's ``mpi_env`` lists the user's own
#: configuration files its stack read (``user_config_files``).
USER_FILES_VAR = 'user_config_files'


def mpi_vars(env: Mapping[str, str]) -> dict[str, str]:
    """The MPI and OpenMP tuning variables of `env` (``TUNING_VAR_PREFIXES``)."""
    return {k: str(v) for k, v in env.items() if k.startswith(TUNING_VAR_PREFIXES)}


def binding_var_names() -> frozenset[str]:
    """Every variable a run's binding may set (``binding_env``'s keys, for
    every family, bound or declared oversubscribed)."""
    return frozenset(name for family in ['srun', *STACK] for over in (False, True)
                     for binding in ('threads', 'one-core')
                     for name in binding_env(family, 2, binding, oversubscribe=over))


def recorded_vars(env: Mapping[str, str]) -> dict[str, str]:
    """What a run records of `env` (its ``mpi_env``): the tuning variables
    (``mpi_vars``), the binding's (``binding_var_names``, e.g. HYDRA_BINDING,
    SLURM_CPU_BIND) and ``RECORDED_VARS`` (LD_PRELOAD)."""
    names = binding_var_names() | set(RECORDED_VARS)
    return {**mpi_vars(env), **{k: str(v) for k, v in env.items() if k in names}}


def user_config_files(family: str, env: Mapping[str, str], home: str,
                      launcher: str = '') -> list[str]:
    """The user's own configuration files that a run of `family`'s stack with
    `env` reads (``Stack.user_files`` that exist under `home`, each unless
    `env` names other files in its variable: that variable is recorded);
    started by another `launcher` family (srun), not those only the stack's
    own launcher reads (``Stack.launcher_files``)."""
    stack = STACK.get(family)
    if stack is None or not home:
        return []
    foreign = launcher not in ('', family)
    paths = [os.path.join(home, rel) for var, rel in stack.user_files
             if var not in env and not (foreign and var in stack.launcher_files)]
    return [p for p in paths if os.path.isfile(p)]


def user_file_settings(family: str, env: Mapping[str, str],
                       home: str) -> dict[str, tuple[str, str]]:
    """NAME -> (value, file): what the user's own files that `family`'s launcher
    reads with `env` (its variable's file, else the one under `home`) set for
    the ranks over the environment (``Stack.user_file_sets``, read as Hydra
    reads ``-genv``); the last setting of a name counts."""
    stack = STACK.get(family)
    if stack is None or not stack.user_file_sets:
        return {}
    sets = {'-' + opt.lstrip('-') for opt in stack.user_file_sets}
    out: dict[str, tuple[str, str]] = {}
    for var, rel in stack.user_files:
        path = env[var] if var in env else os.path.join(home, rel) if home else ''
        try:
            with open(path, encoding='utf-8', errors='replace') as fp:
                words = shlex.split(fp.read())
        except (OSError, ValueError):
            continue
        # ``NAME=VALUE`` or ``NAME VALUE``, one dash or two, ``--opt=ARG`` as ``--opt ARG``
        args = [part for word in words
                for part in (word.split('=', 1) if word.startswith('-') and '=' in word
                             else [word])]
        i = 0
        while i < len(args):
            opt = '-' + args[i].lstrip('-') if args[i].startswith('-') else ''
            if opt in sets and i + 1 < len(args) and '=' in args[i + 1]:
                name, value = args[i + 1].split('=', 1)
                out[name] = (value, path)
                i += 2
            elif opt in sets and i + 2 < len(args):
                out[args[i + 1]] = (args[i + 2], path)
                i += 3
            else:
                i += 1
    return out


def stack_sysconfdir(stack: Stack, launcher: str) -> str:
    """The system configuration folder of `stack` whose launcher is
    `launcher`, from its ``sysconfdir_tool`` beside it (or on PATH);
    ValueError, naming the launcher, where there is none or it does not say.
    The tool runs once per launcher and PATH in a process (a configuration
    load asks twice for a local Open MPI)."""
    return _sysconfdir(stack.sysconfdir_tool, launcher, os.environ.get('PATH'))


@functools.cache
def _sysconfdir(tool_command: tuple[str, ...], launcher: str, path: str | None) -> str:
    """``stack_sysconfdir``; `path`, the PATH the tool is looked for on, keys
    the cache (errors are not kept)."""
    name, *args = tool_command
    folders = [os.path.dirname(launcher), os.path.dirname(os.path.realpath(launcher))]
    tool = next((p for p in (os.path.join(f, name) for f in folders)
                 if os.access(p, os.X_OK)), None) or shutil.which(name)
    if not tool:
        raise ValueError(f'HARNESS_MPI_ENV=clean: no {name} beside {launcher} or on PATH, '
                         f'so the site\'s configuration files cannot be told from the user\'s')
    try:
        out = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise ValueError(f'HARNESS_MPI_ENV=clean: cannot run {tool}: {err}') from None
    found = sysconfdir_in(out)
    if not found:
        raise ValueError(f'HARNESS_MPI_ENV=clean: {shlex.join([tool, *args])} says '
                         f'{out.strip()[:120]!r}, not a sysconfdir')
    return found


def clean_files_env(family: str, launcher: str = '') -> dict[str, str]:
    """What keeps a user's own configuration files out of `family`'s runs in
    ``clean`` mode (``Stack.clean_files_env``: Hydra reads no file, Open MPI
    only its system's MCA files, its folder found from `launcher`;
    ``Stack.clean_files_at`` says which of them are set)."""
    stack = STACK.get(family)
    if stack is None:
        return {}
    if not stack.sysconfdir_tool:
        return stack.clean_files_at()
    if not launcher:
        return {}
    return stack.clean_files_at(stack_sysconfdir(stack, launcher))


def mpi_env_mode() -> str:
    """``HARNESS_MPI_ENV`` (default ``clean``), checked."""
    mode = os.environ.get('HARNESS_MPI_ENV', '').strip() or 'clean'
    if mode not in MPI_ENV_MODES:
        raise ValueError(f'HARNESS_MPI_ENV must be one of {", ".join(MPI_ENV_MODES)}, '
                         f'got {mode!r}')
    return mode


def clean_mpi_env(environ: MutableMapping[str, str]) -> list[str]:
    """Take the MPI and OpenMP tuning variables out of `environ` (the
    session's own, so that no run inherits them); their names."""
    names = sorted(mpi_vars(environ))
    for name in names:
        del environ[name]
    return names


# What `mpi_library` (MPI_Get_library_version, first line) starts with, per stack.
LIBRARY_PREFIX = {s.name: s.library_prefix for s in STACKS}

#: The line a job script writes with its launcher's exit status where the
#: scheduler reports none (ReFrame's squeue backend).
EXIT_STATUS_TAG = 'harness: launcher exit status'

#: The generic names a stack's link folder offers: its launcher's, and the
#: wrappers found beside its mpicc.
LAUNCHER_NAMES = ('mpirun', 'mpiexec')
WRAPPER_NAMES = ('mpicxx', 'mpic++', 'mpifort', 'mpif90', 'mpif77')
#: Helpers a family's launcher starts by name (from PATH where they are not
#: in its own folder: a link named mpirun is not in the stack's folder).
HELPER_NAMES = {s.name: s.launcher_helpers for s in STACKS if s.launcher_helpers}


# ---- the stack's tools under their generic names ---------------------------------

def stack_bindir(root: str, stack: str, cc: str, launcher: str, family: str = '') -> str:
    """A folder of links named like the generic MPI tools (``mpirun``,
    ``mpicc``...) to `stack`'s own: first on PATH, the plain names are that
    stack's.  Named by its links, so sessions that find a stack at other
    prefixes never rewrite each other's; links are replaced atomically."""
    links = {name: launcher for name in LAUNCHER_NAMES}
    if cc:
        links['mpicc'] = cc
    # its other wrappers (mpicc.openmpi -> mpicxx.openmpi) and its launcher's helpers
    folder, cc_name = os.path.split(cc)
    beside = {name: os.path.join(folder, cc_name.replace('mpicc', name, 1))
              for name in WRAPPER_NAMES if 'mpicc' in cc_name}
    beside.update((name, os.path.join(os.path.dirname(launcher), name))
                  for name in HELPER_NAMES.get(family, ()))
    links.update((name, path) for name, path in beside.items() if os.access(path, os.X_OK))
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
    a Slurm allocation (environment extras ``launch: own``, e.g. MVAPICH2 with
    ch3:sock), or '' where the partition's launcher serves."""
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
    return env_family(environ)


def rank_binding_env(family: str, cores_per_rank: int = 1,
                     oversubscribe: bool = False) -> dict[str, str]:
    """Every rank bound to `cores_per_rank` cores of its own, in the variables
    the family's launcher reads (checked against Open MPI 4.1 mpirun, MPICH
    4.0 hydra, Slurm 22.05 srun).  Open MPI refuses more ranks than cores;
    hydra would wrap them round, which the checks' core test catches.  Only
    where the configuration declares the oversubscription (`oversubscribe`)
    are the ranks left unbound and Open MPI told to allow it."""
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
        # srun's --cpus-per-task comes from the job (ReFrame's srun launcher,
        # whole cores: ``slurm_cpus_per_task``).
        return {'SLURM_CPU_BIND': 'cores'}
    return {}


def slurm_cpus_per_task(partition, cores: int) -> int:
    """The CPUs (``--cpus-per-task``) of a rank bound to `cores` whole cores:
    Slurm counts every hardware thread as a CPU, so `cores` x the partition's
    ``processor.num_cpus_per_core`` (1 where unknown; a site whose slurm.conf
    schedules cores declares 1)."""
    per_core = getattr(partition.processor, 'num_cpus_per_core', None) or 1
    return max(1, int(cores)) * max(1, int(per_core))


def shell_words(words: list[str]) -> list[str]:
    """Each word quoted for the job script (ReFrame writes ``executable`` and
    ``executable_opts`` into it as they are)."""
    return [shlex.quote(str(w)) for w in words]


def assigned_value(text: str) -> str:
    """The value ``export K=<text>`` gives K, its expansions (``$PATH``) left
    as text: a configuration's env_vars reach the job script as written, and a
    cluster's values are quoted for the shell (``slurm_systems.shell_value``)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    return words[0] if len(words) == 1 else text


def binding_env(family: str, threads: int, binding: str = 'threads',
                oversubscribe: bool = False) -> dict[str, str]:
    """A run's binding: `threads` OpenMP threads per rank, one per core, each
    rank bound to a core per thread (``'threads'``) or to a single core
    (``'one-core'``, as MVAPICH2 does by default, which the checks must fail);
    nothing bound where the oversubscription is declared."""
    cores = 1 if binding == 'one-core' else threads
    places = {} if oversubscribe else {'OMP_PLACES': 'cores', 'OMP_PROC_BIND': 'close'}
    return {'OMP_NUM_THREADS': str(threads), **places,
            **rank_binding_env(family, cores, oversubscribe)}


# ---- command lines for the scripts a check writes ----------------------------------

def launch_line(launcher: JobLauncher, num_tasks: int, cpus_per_task: int = 1,
                env: dict[str, str] | None = None, per_node: int = 0, family: str = '',
                cores_per_rank: int = 1) -> str:
    """The shell command line (every word quoted) that launches `num_tasks`
    ranks with `launcher`, as ReFrame would, for job scripts a check writes
    itself; `env`: variables for this launch only.  `per_node` > 0: that many
    ranks on each node, in rank order (srun's option, else the ``Stack.per_node``
    of the environment's `family`; ValueError where it has none)."""
    job = types.SimpleNamespace(num_tasks=num_tasks, num_tasks_per_node=None,
                                num_cpus_per_task=cpus_per_task, name='', time_limit=None)
    command = launcher.command(job)
    if launcher.registered_name == 'srun':
        # ReFrame's srun takes the task count from the job's allocation; a
        # script's launch may use fewer.
        command.append(f'--ntasks={num_tasks}')
    if per_node > 0 and launcher.registered_name == 'srun':
        command.append(f'--ntasks-per-node={per_node}')
    elif per_node > 0:
        stack = STACK.get(family)
        if stack is None:
            raise ValueError(f'launcher {launcher.registered_name} of family {family!r}: no '
                             f'way known to place {per_node} ranks per node (the families '
                             f'of harnesscore.stacks: {", ".join(STACK)})')
        command += stack.per_node(per_node, cores_per_rank)
    words = [*(['env', *(f'{k}={v}' for k, v in env.items())] if env else []),
             *command, *launcher.options]
    if launcher.modifier:
        words = [launcher.modifier, *launcher.modifier_options, *words]
    return ' '.join(shlex.quote(word) for word in words)


# ---- the node lock ----------------------------------------------------------------

#: The lock of the machine (``hold_node_lock``): one per host, not per var dir, so
#: that two sessions (two var dirs, two users) never share the cores either.
NODE_LOCK = '/tmp/hybrid-harness-node.lock'


def hold_node_lock(partition) -> list[str]:
    """Shell lines that take ``NODE_LOCK`` for the rest of the job script: on a
    local partition, jobs of any partition, execution policy or session would
    share the cores and spoil each other's timings.  The file is made if
    missing (readable by all), another user's locked read-only; one that cannot
    be opened fails the job with a line naming it, never a hang."""
    if partition.scheduler.registered_name != 'local':
        return []
    lock = shlex.quote(NODE_LOCK)
    fail = shlex.quote(f'harness: cannot take the node lock {NODE_LOCK}')
    return [f'(umask 022; : >>{lock}) 2>/dev/null',
            f'exec 9<{lock} || {{ echo {fail} >&2; exit 1; }}',
            f'flock 9 || {{ echo {fail} >&2; exit 1; }}']
