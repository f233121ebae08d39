"""ReFrame configuration of the hybrid MPI+OpenMP harness.

The ``local`` system (this machine) is worked out when the file loads:

* one programming environment per MPI stack that is really present.  A stack is
  found through its *own* compiler wrapper and launcher, never through the
  unsuffixed ``mpicc``/``mpirun`` that Debian's ``update-alternatives`` points
  at whichever stack won:

  ========  ==========================================  =====================
  stack     found at                                     override
  ========  ==========================================  =====================
  openmpi   ``mpicc.openmpi`` + ``mpirun.openmpi``       ``HARNESS_OPENMPI_PREFIX``
  mpich     ``mpicc.mpich`` + ``mpiexec.mpich``          ``HARNESS_MPICH_PREFIX``
  mvapich2  only where its prefix is given               ``HARNESS_MVAPICH2_PREFIX``
  ========  ==========================================  =====================

  A prefix means ``<prefix>/bin/mpicc`` and ``<prefix>/bin/mpiexec`` (or
  ``mpirun``).  A stack that is absent is left out with one line saying so;
  ``HARNESS_STACKS=openmpi,mpich`` restricts the set.

* one partition per interconnect: ``shm`` (each stack's default between ranks
  on one node) and ``tcp`` (loopback TCP forced for each stack).  The
  transport settings belong to the stack, so each environment is defined for
  the system (its defaults, used by shm) and again for ``local:tcp``.

* launching, the ReFrame way: every partition names ReFrame's ``mpirun``
  launcher and every environment makes it its stack's: a folder of links
  (``mpirun``, ``mpiexec``, ``mpicc``... to the stack's own tools) first on
  ``PATH``, and each rank bound to a core of its own in the variables the
  stack's launcher reads (``harnesslib.launch``).  Any ReFrame check, not only
  the harness's, launches its stack this way.

* the processor topology is detected by ReFrame (``processor`` is left out).

* perflogs go to a persistent directory, ``$HARNESS_VAR_DIR/perflogs``
  (default ``<checkout>/var``), together with ReFrame's stage, output and JSON
  run reports.

Run it as ``reframe -C config/settings.py -c checks -r``.
"""

from __future__ import annotations

import os
import shutil
import sys

from harnesslib.launch import rank_binding_env, stack_bindir
from harnesslib.schema import perflog_format, perfvar_format

_HERE = os.path.dirname(os.path.abspath(__file__))
VAR_DIR = os.path.abspath(
    os.environ.get('HARNESS_VAR_DIR', os.path.join(os.path.dirname(_HERE), 'var'))
)

os.makedirs(VAR_DIR, exist_ok=True)

# Per stack: how to find it, its launcher, and what forces loopback TCP.
# `family` tells the checks how to bind ranks and threads with that launcher.
_STACKS = {
    'openmpi': {
        'descr': 'Open MPI',
        'family': 'openmpi',
        'prefix_var': 'HARNESS_OPENMPI_PREFIX',
        'suffixed': ('mpicc.openmpi', 'mpirun.openmpi'),
        'launchers': ('mpirun', 'mpiexec'),
        'env': {
            # Open MPI refuses to run as root unless told (CI machines are root).
            **({'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}
               if hasattr(os, 'geteuid') and os.geteuid() == 0 else {}),
        },
        'tcp_env': {
            'OMPI_MCA_pml': 'ob1',
            'OMPI_MCA_btl': 'self,tcp',
            # Open MPI excludes the loopback interface by default.
            'OMPI_MCA_btl_tcp_if_include': 'lo',
        },
    },
    'mpich': {
        'descr': 'MPICH',
        'family': 'mpich',
        'prefix_var': 'HARNESS_MPICH_PREFIX',
        'suffixed': ('mpicc.mpich', 'mpiexec.mpich'),
        'launchers': ('mpiexec', 'mpirun'),
        'env': {},
        'tcp_env': {'UCX_TLS': 'tcp,self', 'UCX_NET_DEVICES': 'lo'},
    },
    'mvapich2': {
        'descr': 'MVAPICH2',
        'family': 'mvapich2',
        'prefix_var': 'HARNESS_MVAPICH2_PREFIX',
        'suffixed': None,
        'launchers': ('mpiexec', 'mpirun'),
        'env': {},
        # Built with the TCP-only ch3:sock device here; on a cluster the site
        # configuration picks the device.  Nothing to force.
        'tcp_env': {},
    },
}

_PARTITIONS = {
    'shm': 'shared memory between the ranks of one node (each stack\'s default)',
    'tcp': 'TCP over the loopback interface, forced for every stack',
}


def _note(msg: str) -> None:
    # One line per stack left out; only where the user asked to hear it.
    if os.environ.get('HARNESS_QUIET') != '1':
        print(f'[harness config] {msg}', file=sys.stderr)


def _find_stack(name: str, spec: dict) -> dict | None:
    """The wrapper and launcher of one stack, or None if it is absent."""
    prefix = os.environ.get(spec['prefix_var'], '').strip()
    if prefix:
        cc = os.path.join(prefix, 'bin', 'mpicc')
        launcher = next(
            (os.path.join(prefix, 'bin', exe) for exe in spec['launchers']
             if os.access(os.path.join(prefix, 'bin', exe), os.X_OK)),
            None,
        )
        if not os.access(cc, os.X_OK) or launcher is None:
            _note(f'{name}: left out: {spec["prefix_var"]}={prefix} has no '
                  f'bin/mpicc and bin/{"|".join(spec["launchers"])}')
            return None
        return {'cc': cc, 'launcher': launcher, 'prefix': prefix}

    if spec['suffixed'] is None:
        _note(f'{name}: left out: set {spec["prefix_var"]} to its install prefix')
        return None

    cc_name, launcher_name = spec['suffixed']
    cc, launcher = shutil.which(cc_name), shutil.which(launcher_name)
    if not cc or not launcher:
        _note(f'{name}: left out: {cc_name} / {launcher_name} not found on PATH')
        return None
    return {'cc': cc, 'launcher': launcher, 'prefix': ''}


def _osu_prefix(stack: str) -> str:
    """OSU Micro-Benchmarks of `stack`: HARNESS_OSU_PREFIX with ``{stack}``
    replaced by the stack's name ('' when unset: the OSU checks skip)."""
    template = os.environ.get('HARNESS_OSU_PREFIX', '').strip()
    return template.replace('{stack}', stack) if template else ''


def _selected_stacks() -> list[str]:
    wanted = os.environ.get('HARNESS_STACKS', '').strip()
    if not wanted:
        return list(_STACKS)
    names = [s.strip() for s in wanted.split(',') if s.strip()]
    unknown = [s for s in names if s not in _STACKS]
    if unknown:
        raise ValueError(
            f'HARNESS_STACKS names unknown stack(s) {", ".join(unknown)}; '
            f'known: {", ".join(_STACKS)}'
        )
    return names


def _environments() -> tuple[list[dict], list[str]]:
    envs, names = [], []
    for name in _selected_stacks():
        spec = _STACKS[name]
        found = _find_stack(name, spec)
        if found is None:
            continue
        names.append(name)
        # The partitions launch with ReFrame's `mpirun`: this folder of links
        # (mpirun, mpiexec, mpicc... to the stack's own tools), first on PATH,
        # makes the name this stack's; its launcher binds every rank to a
        # core of its own (a hybrid check widens it to its threads).
        bindir = stack_bindir(os.path.join(VAR_DIR, 'stacks'), name, found['cc'],
                              found['launcher'], spec['family'])
        launch_env = {'PATH': f'{bindir}:$PATH', **rank_binding_env(spec['family'])}
        # The stack's defaults for the whole system (shm uses them), and a
        # more specific definition for the tcp partition, which ReFrame picks
        # there.
        for target, transport in (('local', 'shm'), ('local:tcp', 'tcp')):
            env_vars = {**launch_env, **spec['env']}
            if transport == 'tcp':
                env_vars.update(spec['tcp_env'])
            envs.append({
                'name': name,
                'target_systems': [target],
                'cc': found['cc'],
                'env_vars': [[k, v] for k, v in env_vars.items()],
                'features': ['mpi', 'openmp', f'stack-{name}'],
                'extras': {
                    'stack': name,
                    'family': spec['family'],
                    'descr': spec['descr'],
                    'launcher': found['launcher'],
                    'bindir': bindir,
                    'prefix': found['prefix'],
                    'transport': transport,
                    # The Spack spec of the kernels for this stack (README: Spack).
                    'spack_spec': os.environ.get(f'HARNESS_{name.upper()}_SPACK_SPEC', ''),
                    # checks/osu.py: where this stack's OSU benchmarks are
                    'osu_prefix': _osu_prefix(name),
                },
            })
    if not names:
        _note('no MPI stack found: install Debian\'s openmpi-bin/libopenmpi-dev or '
              'mpich/libmpich-dev, or set HARNESS_MVAPICH2_PREFIX')
    return envs, names


_ENVS, _STACK_NAMES = _environments()

# Slurm systems (local-slurm, the test cluster; config/site_*.py, a centre's
# clusters) live in their own module: ReFrame loads this file under a mangled
# name, so the directory goes on sys.path first.
sys.path.append(_HERE)
from nightly import modes as nightly_modes  # noqa: E402
from nightly import storage as results_storage  # noqa: E402
from slurm_systems import slurm_systems  # noqa: E402

_SLURM_SYSTEMS, _SLURM_ENVS = slurm_systems(VAR_DIR, _ENVS, _STACK_NAMES)

site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'This machine: its MPI stacks over shared memory and loopback TCP',
            'hostnames': ['.*'],
            'prefix': VAR_DIR,
            'stagedir': os.path.join(VAR_DIR, 'stage'),
            'outputdir': os.path.join(VAR_DIR, 'output'),
            'partitions': [
                {
                    'name': part,
                    'descr': descr,
                    'scheduler': 'local',
                    # ReFrame's own mpirun launcher: each environment makes
                    # `mpirun` its stack's (PATH) and sets its binding.
                    'launcher': 'mpirun',
                    'environs': _STACK_NAMES or ['builtin'],
                    'max_jobs': 1,  # never two runs side by side: no oversubscription
                    'time_limit': '10m',
                    'features': ['local', f'transport-{part}'],
                    'extras': {'transport': part, 'nodes': 1},
                }
                for part, descr in _PARTITIONS.items()
            ],
        },
        *_SLURM_SYSTEMS,
    ],
    'environments': [
        *_ENVS,
        *_SLURM_ENVS,
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
                    # (harnesslib.schema: the one declaration of the schema).
                    'format': perflog_format(),
                    'format_perfvars': perfvar_format(),
                    'datefmt': '%Y-%m-%dT%H:%M:%S%z',
                    'append': True,
                },
            ],
        },
    ],
}
