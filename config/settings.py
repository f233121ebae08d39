"""ReFrame configuration of the hybrid MPI+OpenMP harness (docs/pages/configuration.md).

The ``local`` system (this machine) is worked out when the file loads: one
programming environment per MPI stack really present, found through its *own*
compiler wrapper and launcher (``harnesscore.stacks``), never through the
unsuffixed ``mpicc``/``mpirun`` that Debian's ``update-alternatives`` points at
whichever stack won; one partition per interconnect, ``shm`` and ``tcp``, each
pinning its transport per stack.  Every environment makes ReFrame's ``mpirun``
launcher its stack's (a folder of links first on ``PATH``, the binding in the
variables its launcher reads: ``harnesslib.launch``).  The local processor
topology is read from /sys (``harnesscore.host.host_processor``), not by
ReFrame's detection; a session whose affinity mask is narrower (taskset) stops
here, saying so.  Everything goes under ``$HARNESS_VAR_DIR`` (default
``<checkout>/var``).

Run it as ``reframe -C config/settings.py -c checks -r``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from harnesscore import paths, quiet
from harnesscore.bands import soft_zone
from harnesscore.host import host_processor, narrowed_affinity
from harnesscore.knobs import env_flag, env_list
from harnesscore.plan import budget_from_env, first_round, max_rounds, samples_per_run
from harnesscore.references import ReferencesError, references_file, validate_references_file
from harnesscore.schema import perflog_format, perfvar_format
from harnesscore.selection import values as option_values
from harnesscore.stacks import STACK, Stack, install_hint
from harnesslib.launch import (
    clean_files_env,
    clean_mpi_env,
    mpi_env_mode,
    rank_binding_env,
    stack_bindir,
)

_HERE = os.path.dirname(os.path.abspath(__file__))
_T = TypeVar('_T')


class HarnessConfigError(SystemExit):
    """A knob or file the configuration cannot use: one line on stderr and a non-zero
    exit of ReFrame (an error in a check file is only a warning and 'Ran 0/0')."""


def _config_error(msg: str) -> NoReturn:
    print(f'harness config: error: {msg}', file=sys.stderr)
    raise HarnessConfigError(2)


def _caller_cwd() -> str:
    """The directory the user ran ReFrame from: ReFrame imports this file from
    inside its folder, so a relative path is taken from the shell's ``$PWD``."""
    cwd = os.getcwd()
    pwd = os.environ.get('PWD', '')
    if (os.path.realpath(cwd) == os.path.realpath(_HERE) and os.path.isabs(pwd)
            and os.path.isdir(pwd)):
        return pwd
    return cwd


def _checked(fn: Callable[..., _T], *args: object) -> _T:
    """``fn(*args)``, a ValueError of it a configuration error."""
    try:
        return fn(*args)
    except ValueError as err:
        _config_error(str(err))


def _user_path(path: str) -> str:
    """A path the user gave, as ReFrame can take it (``paths.reframe_path``)."""
    return _checked(paths.reframe_path, paths.user_path(path, _caller_cwd()))


# no perflog handler or job script can take a newline
_text = os.environ.get('HARNESS_VAR_DIR', '')
if '\n' in _text or '\0' in _text:
    _config_error(f'HARNESS_VAR_DIR={_text!r}: a path with a newline or NUL')
#: The var dir itself (as the user and hybridverdict name it; a relative one from
#: where the user ran ReFrame) ...
REAL_VAR_DIR = paths.var_dir(_caller_cwd())
try:
    os.makedirs(REAL_VAR_DIR, exist_ok=True)
except OSError as _err:
    _config_error(f'HARNESS_VAR_DIR: cannot create {REAL_VAR_DIR!r}: {_err.strerror}')
#: ... and as ReFrame is given it (every path of this configuration).
VAR_DIR = _checked(paths.reframe_path, REAL_VAR_DIR)
#: The stage: ReFrame runs job scripts by their physical path, so a var dir it
#: cannot take gets a stage folder beside the link (outputs still go to the var dir).
STAGE_DIR = os.path.join(VAR_DIR, 'stage') if VAR_DIR == REAL_VAR_DIR else VAR_DIR + '.stage'

try:
    # checked here: an error in a check file is only a warning and an empty session
    samples_per_run()
    #: The shell's MPI and OpenMP tuning variables (OMPI_MCA_*, UCX_*, OMP_*, ...)
    #: and the user's own MPI configuration files: ``clean`` (default) keeps both
    #: out of the runs (``clean_files_env``), so each partition measures what it claims;
    #: ``keep`` passes them on.  Every run records those in effect (``mpi_env``).
    MPI_ENV_MODE = mpi_env_mode()
    # The knobs read later by the checks, job scripts and sequential rounds, checked
    # here too (later, a bad one fails every run or is found after the session).
    budget_from_env()
    first_round()
    max_rounds()
    soft_zone()
    if quiet.enabled():
        quiet.sample_interval()
    env_flag('HARNESS_QUIET')
    env_flag('HARNESS_SPACK')
except ValueError as _err:
    _config_error(str(_err))


# config/'s own modules (nightly, slurm_systems): ReFrame loads this file under a
# mangled name.
sys.path.append(_HERE)
from slurm_systems import note as _note  # noqa: E402

if MPI_ENV_MODE == 'clean':
    _removed = clean_mpi_env(os.environ)
    if _removed:
        _note(f'HARNESS_MPI_ENV=clean: the runs do not inherit {", ".join(_removed)} from '
              f'this shell (HARNESS_MPI_ENV=keep passes them on; each partition sets its '
              f'own transport)')


def _runs_on_this_machine() -> bool:
    """Whether this session's system, named by ``--system`` or ``RFM_SYSTEM`` (none:
    ``local``), starts its runs on this machine: ``local`` or ``declared``."""
    named = option_values(sys.argv[1:], '--system') or [os.environ.get('RFM_SYSTEM', '')]
    system = named[-1].strip().split(':')[0]
    return system in ('', 'local', 'declared')


# A session that runs here with an affinity mask narrower than the CPUs the
# launchers bind ranks to stops: its runs would leave the CPUs it plans and watches.
if (_why := narrowed_affinity()) and _runs_on_this_machine():
    _config_error(_why)
_LOCAL_PROCESSOR = host_processor()

_PARTITIONS = {
    'shm': 'shared memory between the ranks of one node (each stack\'s default)',
    'tcp': 'TCP over the loopback interface, forced for every stack',
}


def _local_partition(name: str, descr: str, features: list[str], extras: dict,
                     **processor: dict) -> dict:
    """A partition of this machine: never two runs side by side (no oversubscription)."""
    return {'name': name, 'descr': descr, 'scheduler': 'local', 'launcher': 'mpirun',
            'environs': _STACK_NAMES or ['builtin'], 'max_jobs': 1, 'time_limit': '10m',
            **processor, 'features': features, 'extras': extras}


def _check_launcher_family(name: str, spec: Stack, prefix: str, launcher: str) -> None:
    """A prefix given for one stack must hold that stack's launcher: another's would
    fail every run with its own errors, not the harness's stack-mismatch message."""
    try:
        proc = subprocess.run([launcher, '--version'], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
        text = proc.stdout + proc.stderr
    except (OSError, subprocess.SubprocessError) as err:
        _config_error(f'{spec.prefix_var}={prefix!r}: cannot run {launcher} --version: {err}')
    if not spec.launcher_is_mine(text):
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), '(nothing)')
        _config_error(
            f'{spec.prefix_var}={prefix!r}: {launcher} is not {spec.descr}\'s launcher '
            f'(its --version says {first[:120]!r}): the prefix holds another MPI stack; '
            f'stack {name} needs its own')


_ABSENT: dict[str, str] = {}


def _left_out(name: str, why: str) -> None:
    _ABSENT[name] = why
    _note(f'{name}: left out: {why}')


def _find_stack(name: str, spec: Stack) -> dict | None:
    """The wrapper and launcher of one stack, or None if it is absent."""
    prefix = os.environ.get(spec.prefix_var, '').strip()
    if prefix:
        # Resolved once; a prefix with characters a shell or CMake would read
        # (spaces, $, quotes) is given to them through a link (_user_path).
        given, prefix = prefix, _user_path(prefix)
        cc = os.path.join(prefix, 'bin', 'mpicc')
        launchers = [os.path.join(prefix, 'bin', exe) for exe in spec.launchers]
        launcher = next((exe for exe in launchers if os.access(exe, os.X_OK)), None)
        if not os.access(cc, os.X_OK) or launcher is None:
            _left_out(name, f'{spec.prefix_var}={given} has no '
                            f'bin/mpicc and bin/{"|".join(spec.launchers)}')
            return None
        _check_launcher_family(name, spec, given, launcher)
        return {'cc': cc, 'launcher': launcher, 'prefix': prefix}

    if spec.suffixed_tools is None:
        _left_out(name, f'set {spec.prefix_var} to its install prefix')
        return None

    cc_name, launcher_name = spec.suffixed_tools
    cc, launcher = shutil.which(cc_name), shutil.which(launcher_name)
    if not cc or not launcher:
        _left_out(name, f'{cc_name} / {launcher_name} not found on PATH')
        return None
    return {'cc': cc, 'launcher': launcher, 'prefix': ''}


def _osu_prefix(stack: str) -> str:
    """HARNESS_OSU_PREFIX with ``{stack}`` replaced by `stack` ('' when unset)."""
    template = os.environ.get('HARNESS_OSU_PREFIX', '').strip()
    return _user_path(template.replace('{stack}', stack)) if template else ''


def _selected_stacks() -> list[str]:
    names = env_list('HARNESS_STACKS')
    if not names:
        return list(STACK)
    unknown = [s for s in names if s not in STACK]
    if unknown:
        _config_error(f'HARNESS_STACKS names unknown stack(s) '
                      f'{", ".join(unknown)}; known: {", ".join(STACK)}')
    return list(dict.fromkeys(names))     # a stack named twice runs once


def _environments() -> tuple[list[dict], list[str]]:
    envs, names = [], []
    for name in _selected_stacks():
        spec = STACK[name]      # its name is the `family` the checks bind by
        found = _find_stack(name, spec)
        if found is None:
            continue
        names.append(name)
        # A folder of links to the stack's own tools, first on PATH, makes ReFrame's
        # `mpirun` this stack's; it binds each rank to a core (a hybrid check widens it).
        bindir = stack_bindir(os.path.join(VAR_DIR, 'stacks'), name, found['cc'],
                              found['launcher'], spec.name)
        # in clean mode, the user's own configuration files kept out of the runs
        files_env = (_checked(clean_files_env, spec.name, found['launcher'])
                     if MPI_ENV_MODE == 'clean' else {})
        launch_env = {'PATH': f'{bindir}:$PATH', **rank_binding_env(spec.name), **files_env}
        # What the stack needs to run as root (CI machines are root).
        stack_env = spec.root_env_here()
        # The stack's defaults for the whole system (shm), and one for tcp that
        # ReFrame picks there.
        for target, transport, pinned in (('local', 'shm', spec.shm_env),
                                          ('local:tcp', 'tcp', spec.tcp_env)):
            env_vars = {**launch_env, **stack_env, **pinned}
            envs.append({
                'name': name,
                'target_systems': [target],
                'cc': found['cc'],
                'env_vars': [[k, v] for k, v in env_vars.items()],
                'features': ['mpi', 'openmp', f'stack-{name}'],
                'extras': {
                    'stack': name,
                    'family': spec.name,
                    'descr': spec.descr,
                    'launcher': found['launcher'],
                    'bindir': bindir,
                    'prefix': found['prefix'],
                    'transport': transport,
                    'pinned': dict(pinned),     # other values fail a run (RunBase)
                    'spack_spec': os.environ.get(spec.spack_spec_var, ''),  # spack.md
                    'osu_prefix': _osu_prefix(name),    # read by checks/osu.py
                },
            })
    asked = os.environ.get('HARNESS_STACKS', '').strip()
    if not names and asked:
        # a session without the stacks asked for would run nothing and pass
        absent = '; '.join(f'{n}: {why}' for n, why in _ABSENT.items())
        _config_error(f'HARNESS_STACKS={asked!r}: none of these stacks is present ({absent})')
    if not names:
        _note(f'no MPI stack found: {install_hint()}')
    return envs, names


_ENVS, _STACK_NAMES = _environments()

# Slurm systems (local-slurm, the test cluster; config/site_*.py, a centre's
# clusters) live in their own module.
from nightly import modes as nightly_modes  # noqa: E402
from nightly import storage as results_storage  # noqa: E402
from slurm_systems import slurm_systems, system_dirs  # noqa: E402

# a cluster's own stacks keep the user's files out in clean mode as well; a cluster
# file or HARNESS_TEST_CLUSTER it cannot use is a configuration error
_SLURM_SYSTEMS, _SLURM_ENVS = _checked(slurm_systems, VAR_DIR, _ENVS, _STACK_NAMES,
                                       _osu_prefix, MPI_ENV_MODE)


# ---- declared topologies: big nodes on a small machine ------------------------------
# System `declared` (only with --system declared): partitions that DECLARE a node
# of 16 and of 32 cores and run on this machine's, oversubscribed on purpose, at
# tiny sizes (harnesscore.plan.TINY_SIZES) without binding; every run is flagged
# oversubscribed and kept out of the verdicts.  A test of the pipeline, not of speed.


def _declared_processor(cores: int, sockets: int = 2, numa: int = 4) -> dict:
    """ReFrame processor info of a node of `cores` cores (one CPU each)."""
    def masks(parts: int) -> list[str]:
        per = cores // parts
        return [hex(((1 << per) - 1) << (i * per)) for i in range(parts)]
    return {
        'arch': 'declared', 'num_cpus': cores, 'num_cpus_per_core': 1,
        'num_sockets': sockets, 'num_cpus_per_socket': cores // sockets,
        'topology': {'numa_nodes': masks(numa), 'sockets': masks(sockets),
                     'cores': [hex(1 << i) for i in range(cores)]},
    }


_DECLARED_SYSTEM = {
    'name': 'declared',
    'descr': 'Declared 16- and 32-core nodes on this machine (oversubscribed on purpose)',
    'hostnames': ['^$'],
    **system_dirs(os.path.join(VAR_DIR, 'declared')),
    'partitions': [
        _local_partition(f'cores{cores}', f'a declared {cores}-core node, 2 sockets, 4 NUMA '
                         f'domains', ['local', 'transport-shm', 'declared'],
                         {'transport': 'shm', 'nodes': 1, 'declared_topology': True},
                         processor=_declared_processor(cores))
        for cores in (16, 32)
    ],
}
_DECLARED_ENVS = [{**env, 'target_systems': ['declared']}
                  for env in _ENVS if env['target_systems'] == ['local']]


def _check_references(systems: list[str]) -> None:
    """Each system's references file, if any, must be one ReFrame can read: else it
    would skip every test with a warning and end 'PASSED Ran 0/0', exit status 0."""
    prefix = paths.user_path(paths.references_dir(), _caller_cwd())
    for system in systems:
        path = references_file(prefix, system)
        if os.path.isfile(path):
            try:
                validate_references_file(path)
            except ReferencesError as err:
                _config_error(f'references file: {err} (fix it, or rewrite it with '
                              f'`./harness baseline --force`)')


_check_references(['local', 'declared', *(s['name'] for s in _SLURM_SYSTEMS)])

site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'This machine: its MPI stacks over shared memory and loopback TCP',
            'hostnames': ['.*'],
            **system_dirs(VAR_DIR, STAGE_DIR),
            'partitions': [
                _local_partition(part, descr, ['local', f'transport-{part}'],
                                 {'transport': part, 'nodes': 1},
                                 processor=_LOCAL_PROCESSOR)
                for part, descr in _PARTITIONS.items()
            ],
        },
        *_SLURM_SYSTEMS,
        _DECLARED_SYSTEM,
    ],
    'environments': [
        *_ENVS,
        *_SLURM_ENVS,
        *_DECLARED_ENVS,
    ],
    # --mode nightly: the acceptance run (config/nightly.py).
    'modes': nightly_modes(VAR_DIR),
    'storage': results_storage(VAR_DIR),
    'general': [
        {
            'report_file': os.path.join(VAR_DIR, 'reports', 'run-report-{sessionid}.json'),
            'timestamp_dirs': '%Y%m%dT%H%M%S',
            'topology_prefix': os.path.join(VAR_DIR, 'topology'),
            'check_search_path': [os.path.join(os.path.dirname(_HERE), 'checks')],
        },
    ],
    'logging': [
        {
            'level': 'debug',
            'handlers': [
                {'type': 'stream', 'name': 'stdout', 'level': 'info',
                 'format': '%(message)s'},
                {'type': 'file', 'name': os.path.join(VAR_DIR, 'reframe.log'),
                 'level': 'debug',
                 'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                 'append': True},
            ],
            'handlers_perflog': [
                {
                    'type': 'filelog',
                    'prefix': '%(check_system)s/%(check_partition)s',
                    'basedir': os.path.join(VAR_DIR, 'perflogs'),
                    'level': 'info',
                    # Every field needed to pair runs, then the variables
                    # (harnesscore.schema: the one declaration of the schema).
                    'format': perflog_format(),
                    'format_perfvars': perfvar_format(),
                    'datefmt': '%Y-%m-%dT%H:%M:%S%z',
                    'append': True,
                },
            ],
        },
    ],
}
