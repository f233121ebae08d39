"""Slurm systems of the harness (docs/pages/cluster.md says what each is and how it runs).

``config/settings.py`` imports this module (ReFrame loads configuration files
under mangled names, so the directory is put on ``sys.path`` first) and adds
what it returns to its ``systems`` and ``environments``: ``local-slurm`` (the
test bed of ``tests/slurm/testbed.sh``), ``test-cluster`` (the multi-node test
cluster of ``tests/slurm/cluster.sh``, written as a centre would write its
cluster) and every centre's ``config/site_*.py`` (or ``HARNESS_CLUSTERS``), each a
``CLUSTER`` in the form of ``config/cluster_template.py``.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from harnesscore.host import host_processor  # the local partitions' too (settings.py)
from harnesscore.knobs import env_list, split_paths
from harnesscore.paths import user_path
from harnesscore.stacks import STACK, STACKS, Stack, default_stacks

#: What ``srun --mpi=`` each stack needs where the centre says nothing.
SRUN_PMI = {s.name: s.srun_pmi for s in STACKS}

_HERE = os.path.dirname(os.path.abspath(__file__))


def system_dirs(prefix: str, stagedir: str = '') -> dict[str, str]:
    """A system's folders: `prefix`, its stage (``prefix/stage`` unless given), its output."""
    return {'prefix': prefix, 'stagedir': stagedir or os.path.join(prefix, 'stage'),
            'outputdir': os.path.join(prefix, 'output')}


def srun_env(launch: str, pmi: str) -> dict[str, str]:
    """The environment that makes any check's plain ``srun`` start a stack's ranks:
    its PMI (srun's ``--mpi``) and each task bound to cores of its own (``--cpu-bind``;
    how many: the job's ``--cpus-per-task``)."""
    if launch != 'srun':
        return {}
    env = {'SLURM_MPI_TYPE': pmi} if pmi else {}
    env['SLURM_CPU_BIND'] = 'cores'
    return env


def launch_keys(stack: Stack, launch: str) -> dict[str, str]:
    """A stack's keys that say how its ranks start (`launch`: 'srun' or 'own')."""
    if launch == 'srun':
        return {'launch': 'srun', 'pmi': stack.srun_pmi}
    return {'launch': 'own', 'launcher': stack.launchers[0]}


def local_slurm(var_dir: str, local_envs: list[dict],
                stack_names: list[str]) -> tuple[dict, list[dict]]:
    """The `local-slurm` system and its environments."""
    srun = shutil.which('srun') or 'srun'
    system = {
        'name': 'local-slurm',
        'descr': 'This machine as a one-node Slurm cluster (tests/slurm/testbed.sh)',
        # Only by --system local-slurm: `local` matches every hostname first.
        'hostnames': [],
        **system_dirs(var_dir),
        'partitions': [
            {
                'name': part,
                'descr': f'{descr} (through sbatch)',
                # squeue, not sacct: the test cluster keeps no accounting
                # database.  The checks take the exit status from the job.
                'scheduler': 'squeue',
                'launcher': 'srun',
                'access': ['--partition=harness'],  # tests/slurm/testbed.sh's partition
                'environs': stack_names or ['builtin'],
                'max_jobs': 4,      # Slurm queues them; CR_Core never shares a core
                'time_limit': '10m',
                'processor': host_processor(),
                'features': ['slurm', f'transport-{part}'],
                'extras': {'transport': part, 'nodes': 1},
            }
            for part, descr in (
                ('shm', 'shared memory between the ranks of one node'),
                ('tcp', 'TCP over the loopback interface, forced for every stack'),
            )
        ],
    }
    # The stacks through srun with their PMI; the others (an MVAPICH2 built
    # here: hydra, ch3:sock) keep their own launcher, which starts their
    # ranks inside the allocation (harnesscore.stacks: slurm_launch).
    launch = {s.name: {'launch': 'srun', 'launcher': srun, 'pmi': s.srun_pmi}
              for s in STACKS if s.slurm_launch == 'srun'}
    # Copies of the `local` system's environments, retargeted.
    targets = {'local': 'local-slurm', 'local:tcp': 'local-slurm:tcp'}
    envs = []
    for env in local_envs:
        new = [targets[t] for t in env['target_systems'] if t in targets]
        if not new:
            continue
        extras = {**env['extras'], **launch.get(env['extras']['stack'], {})}
        srun_vars = srun_env(extras.get('launch', ''), extras.get('pmi', ''))
        env_vars = [*env['env_vars'], *([k, v] for k, v in srun_vars.items())]
        envs.append({**env, 'target_systems': new, 'env_vars': env_vars, 'extras': extras})
    return system, envs


# ---- clusters of a centre --------------------------------------------------------

_CLUSTER_KEYS = {'name', 'descr', 'hostnames', 'modules_system', 'scheduler', 'access',
                 'max_jobs', 'time_limit', 'prefix', 'partitions', 'stacks', 'prepare_cmds'}
_PARTITION_KEYS = {'descr', 'access', 'nodes', 'max_jobs', 'time_limit', 'processor',
                   'transport_env', 'extras'}
_STACK_KEYS = {'descr', 'family', 'modules', 'cc', 'cflags', 'launch', 'pmi', 'launcher',
               'env', 'osu_prefix', 'sysconfdir', 'spack_spec'}

#: OSU's install prefix of a stack where its spec names none (settings.py
#: passes its HARNESS_OSU_PREFIX reader): '' leaves the OSU checks skipped.
OsuPrefix = Callable[[str], str]


def _no_osu(stack: str) -> str:
    return ''


#: Where the configuration's notes go (``note``; sitegen and the tests pass their own).
Note = Callable[[str], None]


def note(msg: str) -> None:
    """A note of the configuration on stderr, unless HARNESS_QUIET=1."""
    # (HARNESS_QUIET other than 0 or 1: config/settings.py stops the session)
    if os.environ.get('HARNESS_QUIET', '').strip() != '1':
        print(f'[harness config] {msg}', file=sys.stderr)


def _show(value: object) -> str:
    """`value` for an error message: its repr, on one line, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


#: What a value's literal text may hold unquoted in ReFrame's ``export K=V``
#: line (``$`` expansions are found apart, ``_EXPANSION``): bash does not split
#: nor glob an assignment to export, but it does expand braces
#: (``export K={0,1},{2,3}`` exports ``K=1,3``), so no ``{}``.
_SHELL_SAFE = re.compile(r'[\w@%+=:,./~^\[\]*?!#-]*', re.ASCII)
#: A shell expansion in a value: ``$NAME``, ``$1``, ``${...}``, ``$(...)``
#: (one level of parentheses inside) or ```...```.
_EXPANSION = re.compile(r'\$(?:[A-Za-z_]\w*|[0-9@*#?$!-]|\{[^}]*\}|\((?:[^()]|\([^()]*\))*\))'
                        r'|`[^`]*`', re.ASCII)


def shell_value(value: str) -> str:
    """`value` for ReFrame's verbatim ``export K=V`` line: its literal text quoted
    for the shell, its expansions (``$VAR``, ``$(cmd)``...) left to expand.  A value
    that needs no quoting is returned as it is, and so is one the user quoted
    already (one shell word: ``"/opt/my mpi/bin":$PATH``)."""
    if any(c in value for c in ('"', "'", '\\')) and _one_shell_word(value):
        return value
    parts: list[tuple[bool, str]] = []    # (an expansion?, its text)
    pos = 0
    for match in _EXPANSION.finditer(value):
        parts += [(False, value[pos:match.start()]), (True, match.group())]
        pos = match.end()
    parts.append((False, value[pos:]))
    if all(expands or _SHELL_SAFE.fullmatch(text) for expands, text in parts):
        return value
    # Inside double quotes only ", \, ` and $ are special; the literal $ (one
    # that starts no expansion) is escaped as well.
    return '"' + ''.join(text if expands else re.sub(r'(["\\`$])', r'\\\1', text)
                         for expands, text in parts) + '"'


def _one_shell_word(text: str) -> bool:
    """Whether the shell reads `text` as one word (its quotes matched)."""
    try:
        return len(shlex.split(text)) == 1
    except ValueError:
        return False


def _require(where: str, spec: object, allowed: set[str], needed: tuple[str, ...]) -> None:
    if not isinstance(spec, dict):
        raise ValueError(f'{where}: must be a dictionary, got {type(spec).__name__} '
                         f'{_show(spec)}')
    unknown = sorted(set(spec) - allowed, key=str)
    if unknown:
        raise ValueError(f'{where}: unknown key(s) {", ".join(map(str, unknown))}; '
                         f'allowed: {", ".join(sorted(allowed))}')
    missing = [k for k in needed if not spec.get(k)]
    if missing:
        raise ValueError(f'{where}: missing {", ".join(missing)}')


def _strings(where: str, key: str, value: object) -> list[str]:
    """`value` of the list-valued `key`: a list (or tuple) of strings, never
    one string (which would become a list of its letters)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'{where}: {key} must be a list of strings, got {_show(value)}')
    return list(value)


def _integer(where: str, key: str, value: object) -> int:
    """`value` of the integer `key` (an int, or a string of one)."""
    if not isinstance(value, bool) and isinstance(value, (int, str)):
        try:
            return int(value)
        except ValueError:
            pass
    raise ValueError(f'{where}: {key} must be an integer, got {_show(value)}')


def _mapping(where: str, key: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f'{where}: {key} must be a dictionary, got {_show(value)}')
    return value


#: A variable's name as ReFrame's ``export K=V`` line needs it (written there as it is).
_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*', re.ASCII)


def _env_vars(where: str, key: str, value: object) -> dict:
    """The variables `key` (``env``, ``transport_env[...]``): a dictionary whose
    names are shell variable names (``export UCX NET_DEVICES=...`` would export
    other variables, ``export A;cmd;B=...`` run a command)."""
    variables = _mapping(where, key, value)
    bad = [k for k in variables if not (isinstance(k, str) and _ENV_NAME.fullmatch(k))]
    if bad:
        raise ValueError(f'{where}: {key}: {", ".join(map(_show, bad))} is not a variable '
                         f'name (letters, digits and _, not starting with a digit)')
    return variables


#: ReFrame 4.10.4's modules systems, where its schema cannot be read.
_MODULES_SYSTEMS = ('tmod4', 'envmod', 'lmod', 'nomod', 'spack')


def modules_systems() -> tuple[str, ...]:
    """The modules systems ReFrame accepts (the enum of its configuration schema)."""
    try:
        import reframe
        path = os.path.join(reframe.INSTALL_PREFIX, 'reframe', 'schemas', 'config.json')
        with open(path) as fp:
            schema = json.load(fp)
        known = schema['properties']['systems']['items']['properties']['modules_system']['enum']
        return tuple(str(k) for k in known)
    except (ImportError, AttributeError, OSError, ValueError, KeyError, TypeError):
        return _MODULES_SYSTEMS


def _sysconfdir(where: str, sspec: dict, family: str) -> str:
    """A stack's ``sysconfdir`` ('' where it names none): an absolute path, and
    only for a family whose registry entry has a ``sysconfdir_tool``."""
    if 'sysconfdir' not in sspec:
        return ''
    registry = STACK.get(family)
    if registry is None or not registry.sysconfdir_tool:
        having = ', '.join(s.name for s in STACKS if s.sysconfdir_tool)
        raise ValueError(f'{where}: sysconfdir is only for a stack of family {having} '
                         f'(what its sysconfdir_tool prints); family {family!r} has none')
    value = sspec['sysconfdir']
    if not isinstance(value, str) or not os.path.isabs(value):
        raise ValueError(f'{where}: sysconfdir must be an absolute path (a string), '
                         f'got {_show(value)}')
    return value


def clean_files_env(where: str, stack: str, family: str, sysconfdir: str, mpi_env: str,
                    note: Note = note) -> dict[str, str]:
    """In ``HARNESS_MPI_ENV=clean`` mode, what keeps the user's own MPI files out of
    `stack`'s runs (``Stack.clean_files_at``; Open MPI's from its `sysconfdir`: one
    without it keeps reading them, and `note` says so)."""
    registry = STACK.get(family)
    if mpi_env != 'clean' or registry is None:
        return {}
    if registry.sysconfdir_tool and not sysconfdir:
        files = ', '.join(f'~/{rel}' for _, rel in registry.user_files)
        tool = ' '.join(registry.sysconfdir_tool)
        note(f'{where}: stack {stack} ({registry.descr}) names no sysconfdir, so its runs '
             f'in HARNESS_MPI_ENV=clean still read the user\'s own {files} (recorded in '
             f'user_config_files); add \'sysconfdir\': ... to it (`{tool}` with its modules '
             f'loaded), or `./harness site` writes it')
        return {}
    return registry.clean_files_at(sysconfdir)


def _spack_spec(where: str, sspec: dict) -> None:
    """A stack's ``spack_spec``, where given: a string that is not empty."""
    if 'spack_spec' in sspec and not (isinstance(sspec['spack_spec'], str)
                                      and sspec['spack_spec'].strip()):
        raise ValueError(f'{where}: spack_spec must be a Spack spec (a string that is not '
                         f'empty), got {_show(sspec["spack_spec"])}')
    if sspec.get('spack_spec') and sspec.get('cflags'):
        # Spack builds with its spec's flags and target, never the CMake cflags
        raise ValueError(f'{where}: cflags are for the CMake builds; with spack_spec give '
                         f"the flags or target in the spec (cflags=..., target=zen3)")


def _note_unused_links(where: str, stacks: dict[str, dict], transport_env: dict[str, dict],
                       nodes: int, note: Note) -> None:
    """Notes where a partition's records would claim a link its runs do not use: a
    stack left unpinned among pinned ones (across nodes), and on one node per run
    the pins of a link between nodes (its runs go through shared memory)."""
    pinned = [s for s in stacks if transport_env.get(s)]
    loose = [s for s in stacks if s not in pinned]
    if pinned and loose and nodes > 1:
        note(f'{where} pins the link of {", ".join(pinned)} (transport_env) but not of '
             f'{", ".join(loose)}: those runs use whatever link their stack picks, yet '
             f'their records name this partition\'s; add transport_env entries for '
             f'{", ".join(loose)} (config/cluster_template.py)')
    if nodes != 1:
        return
    # A pin is between nodes unless it is the stack's own on one node (shm_env).
    between = []
    for s in pinned:
        registry = STACK.get(stacks[s].get('family', s))
        pins = {k: str(v) for k, v in transport_env[s].items()}
        if registry is None or not pins.items() <= registry.shm_env.items():
            between.append(s)
    if between:
        note(f"{where} has 'nodes': 1 but pins a link between nodes for "
             f'{", ".join(between)} (transport_env): on one node their point-to-point '
             f'runs go through shared memory, yet their records name this link; give it '
             f"'nodes': 2 or more")


def _stack_family(where: str, stack: str, sspec: dict) -> str:
    """A stack's family (the registry's stack it is), its spec checked."""
    _require(where, sspec, _STACK_KEYS, ('cc',))
    _strings(where, 'modules', sspec.get('modules', []))
    _strings(where, 'cflags', sspec.get('cflags', []))
    _env_vars(where, 'env', sspec.get('env', {}))
    _spack_spec(where, sspec)
    family = sspec.get('family', stack)
    if family not in STACK:
        # an unknown family checks no library and keeps the user's MPI files
        raise ValueError(f'{where}: family {_show(family)} is not one of '
                         f'{", ".join(STACK)} (a stack of another name says its '
                         f'family)')
    return family


def _transport_env(where: str, pspec: dict, stacks: dict[str, dict]) -> dict:
    """A partition's ``transport_env``: the variables it pins, per stack of the cluster."""
    transport_env = _mapping(where, 'transport_env', pspec.get('transport_env', {}))
    unknown = sorted(set(transport_env) - set(stacks), key=str)
    if unknown:
        raise ValueError(f'{where}: transport_env names unknown stack(s) '
                         f'{", ".join(map(str, unknown))}')
    for stack, pinned_env in transport_env.items():
        _env_vars(where, f'transport_env[{stack!r}]', pinned_env)
    return transport_env


def _launch_and_pmi(where: str, family: str, sspec: dict) -> tuple[str, str]:
    """How a stack of `family` starts its ranks ('srun' or 'own'), and srun's
    ``--mpi`` for them."""
    launch = sspec.get('launch', 'srun')
    if launch not in ('srun', 'own'):
        raise ValueError(f"{where}: launch must be 'srun' or 'own', got {launch!r}")
    if launch == 'own' and not sspec.get('launcher'):
        raise ValueError(f"{where}: launch 'own' needs 'launcher' (e.g. mpirun)")
    # the registry's PMI of the stack's family (a stack 'ompi5' of
    # family openmpi is Open MPI's pmix), where the stack names none
    return launch, sspec.get('pmi', SRUN_PMI.get(family, ''))


def modules_system_override(environ: Mapping[str, str] = os.environ) -> str:
    """HARNESS_MODULES_SYSTEM of `environ`, stripped ('' when unset or empty: each
    cluster's own)."""
    given = environ.get('HARNESS_MODULES_SYSTEM', '')
    value = given.strip()
    known = modules_systems()
    if value and value not in known:
        raise ValueError(f'HARNESS_MODULES_SYSTEM={given!r}: not a modules system ReFrame '
                         f'knows; known: {", ".join(known)}')
    return value


def cluster_config(cluster: dict[str, Any], var_dir: str, origin: str = 'CLUSTER',
                   osu_prefix: OsuPrefix = _no_osu, mpi_env: str = 'clean',
                   note: Note = note,
                   link_notes: bool = True) -> tuple[dict, list[dict]]:
    """A ReFrame system and its environments from a `CLUSTER` dictionary (see
    config/cluster_template.py); `mpi_env`: ``HARNESS_MPI_ENV``'s mode; `link_notes`:
    whether to note links a partition's records would wrongly name."""
    _require(origin, cluster, _CLUSTER_KEYS, ('name', 'hostnames', 'partitions', 'stacks'))
    name = cluster['name']
    # The prefix as ReFrame reads it for the stage and output folders ($VAR,
    # ~ too), once here: the builds go under the system's prefix as written.
    prefix = (os.path.expanduser(os.path.expandvars(cluster['prefix'])) if cluster.get('prefix')
              else os.path.join(var_dir, name))
    hostnames = _strings(origin, 'hostnames', cluster['hostnames'])
    access = _strings(origin, 'access', cluster.get('access', []))
    prepare_cmds = _strings(origin, 'prepare_cmds', cluster.get('prepare_cmds', []))
    max_jobs = _integer(origin, 'max_jobs', cluster.get('max_jobs', 8))
    modules_system = modules_system_override() or cluster.get('modules_system', 'nomod')
    stacks: dict[str, dict] = _mapping(origin, 'stacks', cluster['stacks'])
    # What keeps the user's own MPI configuration files out of each stack's runs.
    files_env: dict[str, dict[str, str]] = {}
    families: dict[str, str] = {}
    for stack, sspec in stacks.items():
        swhere = f'{origin}: stack {stack}'
        family = _stack_family(swhere, stack, sspec)
        families[stack] = family
        files_env[stack] = clean_files_env(f'system {name} ({origin})', stack, family,
                                           _sysconfdir(swhere, sspec, family), mpi_env, note)
    partitions, envs = [], []
    system_envs: dict[str, dict] = {}
    for part, pspec in _mapping(origin, 'partitions', cluster['partitions']).items():
        where = f'{origin}: partition {part}'
        _require(where, pspec, _PARTITION_KEYS, ('access',))
        nodes = _integer(where, 'nodes', pspec.get('nodes', 1))
        if nodes < 1:
            raise ValueError(f'{where}: nodes must be at least 1, got {nodes}')
        entry: dict[str, Any] = {
            'name': part,
            'descr': pspec.get('descr', part),
            'scheduler': cluster.get('scheduler', 'slurm'),
            'launcher': 'srun',
            'access': [*access, *_strings(where, 'access', pspec['access'])],
            'environs': list(stacks),
            'max_jobs': _integer(where, 'max_jobs', pspec.get('max_jobs', max_jobs)),
            'time_limit': pspec.get('time_limit', cluster.get('time_limit', '30m')),
            'features': ['slurm', f'transport-{part}'],
            'extras': {**_mapping(where, 'extras', pspec.get('extras', {})),
                       'transport': part, 'nodes': nodes},
        }
        if prepare_cmds:
            entry['prepare_cmds'] = list(prepare_cmds)
        if pspec.get('processor'):
            entry['processor'] = _mapping(where, 'processor', pspec['processor'])
        partitions.append(entry)
        transport_env = _transport_env(where, pspec, stacks)
        if link_notes:
            _note_unused_links(f'system {name} ({origin}): partition {part}', stacks,
                               transport_env, nodes, note)
        for stack, sspec in stacks.items():
            launch, pmi = _launch_and_pmi(f'{origin}: stack {stack}', families[stack], sspec)
            # The stack's own variables and the partition's pins (below) win.
            base_env = {**files_env[stack], **srun_env(launch, pmi), **sspec.get('env', {})}
            # What this partition pins for the stack (RunBase checks it, against
            # the value as the job script's export line has it).
            pinned = {k: str(v) for k, v in transport_env.get(stack, {}).items()}
            env = {
                'name': stack,
                'target_systems': [f'{name}:{part}'],
                'modules': list(sspec.get('modules', [])),
                'cc': sspec['cc'],
                # the kernels' CMake builds add them (-march=znver3: the compute
                # nodes' CPU where the login node that builds has another)
                'cflags': list(sspec.get('cflags', [])),
                'env_vars': [[k, shell_value(str(v))]
                             for k, v in {**base_env, **pinned}.items()],
                'features': ['mpi', 'openmp', f'stack-{stack}'],
                'extras': {
                    'stack': stack,
                    'family': families[stack],
                    'descr': sspec.get('descr', stack),
                    'launch': launch,
                    'launcher': sspec.get('launcher', 'srun'),
                    'pmi': pmi,
                    'prefix': '',
                    'transport': part,
                    'pinned': pinned,
                    # OSU built for this stack on the cluster (checks/osu.py).
                    'osu_prefix': sspec.get('osu_prefix') or osu_prefix(stack),
                    # The kernels' Spack spec (harnesslib.build.spack_spec).
                    **({'spack_spec': sspec['spack_spec']} if sspec.get('spack_spec') else {}),
                },
            }
            envs.append(env)
            # Each stack once for the whole system as well (ReFrame wants every
            # environment defined at system level); the partitions' more
            # specific definitions add their interconnect's variables.
            system_envs.setdefault(stack, {
                **env, 'target_systems': [name],
                'env_vars': [[k, shell_value(str(v))] for k, v in base_env.items()],
                'extras': {**env['extras'], 'transport': '', 'pinned': {}}})
    envs = [*system_envs.values(), *envs]
    system = {
        'name': name,
        'descr': cluster.get('descr', name),
        'hostnames': hostnames,
        'modules_system': modules_system,
        **system_dirs(prefix),
        'partitions': partitions,
    }
    return system, envs


def _site_files() -> list[str]:
    listed = split_paths(os.environ.get('HARNESS_CLUSTERS', ''))
    if listed:
        # Relative to where reframe was started (ReFrame may load this file
        # from another working directory).
        base = os.environ.get('PWD') or os.getcwd()
        files = [user_path(f, base) for f in listed]
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise ValueError(f'HARNESS_CLUSTERS names missing file(s): {", ".join(missing)}')
        return files
    return sorted(glob.glob(os.path.join(_HERE, 'site_*.py')))


def _load_error(path: str, err: Exception) -> str:
    """One line for a cluster file that failed to load: its type, its message
    and, for an error raised while it ran, its line in the file."""
    message = ' '.join(str(err).split())
    where = ''
    if not isinstance(err, SyntaxError):
        lines = [f.lineno for f in traceback.extract_tb(err.__traceback__)
                 if os.path.abspath(f.filename) == os.path.abspath(path)]
        where = f' (line {lines[-1]})' if lines else ''
    return f'{path}: {type(err).__name__}: {message or "(no message)"}{where}'


def site_clusters(var_dir: str, osu_prefix: OsuPrefix = _no_osu, mpi_env: str = 'clean',
                  note: Note = note) -> tuple[list[dict], list[dict]]:
    """The systems and environments of every site file."""
    systems, envs = [], []
    for path in _site_files():
        mod_name = 'harness_site_' + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f'{path}: cannot be loaded as Python')
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # anything the file does wrong: name the file
            raise ValueError(_load_error(path, err)) from err
        cluster = getattr(module, 'CLUSTER', None)
        if not isinstance(cluster, dict):
            raise ValueError(f'{path}: defines no CLUSTER dictionary '
                             f'(see config/cluster_template.py)')
        system, cluster_envs = cluster_config(cluster, var_dir, origin=path,
                                              osu_prefix=osu_prefix, mpi_env=mpi_env,
                                              note=note)
        systems.append(system)
        envs += cluster_envs
    return systems, envs


# ---- the multi-node test cluster (tests/slurm/cluster.sh) ---------------------

#: Lmod's shell set-up on Debian (apt-get install lmod): job scripts run it
#: before `module load` (a batch shell has no `module` function of its own).
LMOD_INIT = '/usr/share/lmod/lmod/init/bash'
MODULES_DIR = os.path.join(_HERE, 'modules', 'files')


def test_cluster_record(directory: str) -> dict[str, str]:
    """``DIR/cluster.env`` of a test cluster (KEY=value lines, read as data)."""
    path = os.path.join(directory, 'cluster.env')
    try:
        with open(path) as fp:
            lines = fp.read().splitlines()
    except OSError as err:
        raise ValueError(f'HARNESS_TEST_CLUSTER={directory}: cannot read {path} ({err}); '
                         f'start the cluster with tests/slurm/cluster.sh start') from None
    return dict(line.split('=', 1) for line in lines
                if line and not line.startswith('#') and '=' in line)


def _record_count(origin: str, record: dict[str, str], key: str, default: str = '',
                  least: int = 0) -> int:
    """The whole number `key` (at least `least`) of a test cluster's record (`default`: absent)."""
    text = record.get(key, default)
    if not text:
        raise ValueError(f'{origin}: {key} missing or empty')
    if not text.strip().isdecimal():
        raise ValueError(f'{origin}: {key} must be a whole number, got {text!r}')
    value = int(text)
    if value < least:
        raise ValueError(f'{origin}: {key} must be at least {least}, got {value}')
    return value


def test_cluster_spec(record: dict[str, str] | None = None,
                      origin: str = 'cluster.env',
                      sysconfdirs: dict[str, str] | None = None) -> dict[str, Any]:
    """The test cluster as a centre's `CLUSTER` (without a record, 2 nodes with
    this machine's cores); `sysconfdirs`: each stack's system configuration folder."""
    record = record or {}
    nodes = _record_count(origin, record, 'NODES', '2', least=1)
    shared = record.get('SHARED_CORES', '1') == '1'
    if shared:
        processor = host_processor()
    else:
        cpus = _record_count(origin, record, 'CPUS_PER_NODE', least=1)
        processor = {'num_cpus': cpus, 'num_cpus_per_core': 1, 'num_sockets': 1,
                     'num_cpus_per_socket': cpus}
    # A stack without Debian's packages only where its prefix is given.
    wanted = env_list('HARNESS_STACKS') or default_stacks(os.environ)
    chosen = [s for s in STACKS if s.name in wanted]
    # (interface, what it is, its rate in bit/s for the records: 0 where unshaped)
    links = {'fast': (record.get('FAST_IFACE', 'fast0'), 'unshaped veth', 0),
             'slow': (record.get('SLOW_IFACE', 'slow0'),
                      f'veth shaped to {record.get("SLOW_RATE", "1gbit")} by tc tbf',
                      _record_count(origin, record, 'SLOW_RATE_BITS', '1000000000'))}
    partitions = {}
    for part, (iface, what, rate_bits) in links.items():
        partitions[part] = {
            'descr': f'{nodes} nodes joined by {iface} ({what})',
            'access': [f'--partition={part}'],
            'nodes': nodes,
            'processor': processor,
            'max_jobs': 4,
            'time_limit': '10m',
            'extras': {'link': iface, 'shared_cores': shared, 'rate_bits': rate_bits},
            # Each stack pinned to this partition's link.
            'transport_env': {s.name: s.tcp_nodes(iface) for s in chosen},
        }
    # Each stack is the module of its name (config/modules/), started the way
    # the harness's Slurm systems start it (harnesscore.stacks).
    stacks: dict[str, dict] = {}
    for s in chosen:
        spec: dict[str, Any] = {'descr': f'{s.descr} (module {s.name})', 'modules': [s.name],
                                'cc': 'mpicc', **launch_keys(s, s.slurm_launch)}
        if s.root_env:
            spec['env'] = s.root_env_here()
        sysconfdir = (sysconfdirs or {}).get(s.name)
        if sysconfdir:
            spec['sysconfdir'] = sysconfdir
        stacks[s.name] = spec
    return {
        'name': 'test-cluster',
        'descr': f'{nodes}-node test cluster on this machine (tests/slurm/cluster.sh)',
        # Only by --system test-cluster (emptied below: cluster_config wants one).
        'hostnames': ['test-cluster'],
        'modules_system': 'lmod',
        # No accounting database: squeue, and the job records its exit status.
        'scheduler': 'squeue',
        'prepare_cmds': [f'. {LMOD_INIT}', f'module use {shlex.quote(MODULES_DIR)}'],
        'partitions': partitions,
        'stacks': stacks,
    }


def _local_sysconfdirs(local_envs: list[dict]) -> dict[str, str]:
    """The system configuration folder of each stack of this machine (the test
    cluster's modules are its stacks), from its launcher ('' where unknown)."""
    from harnesslib.launch import stack_sysconfdir
    found = {}
    for env in local_envs:
        stack = STACK.get(str(env.get('extras', {}).get('stack', '')))
        launcher = str(env.get('extras', {}).get('launcher', ''))
        if stack is not None and stack.sysconfdir_tool and launcher and stack.name not in found:
            try:
                found[stack.name] = stack_sysconfdir(stack, launcher)
            except ValueError:
                found[stack.name] = ''
    return found


def test_cluster(var_dir: str, osu_prefix: OsuPrefix = _no_osu, mpi_env: str = 'clean',
                 note: Note = note,
                 local_envs: list[dict] | None = None) -> tuple[dict, list[dict]]:
    """The `test-cluster` system and its environments (its stacks' system
    folders, in clean mode, those of this machine's `local_envs`)."""
    directory = os.environ.get('HARNESS_TEST_CLUSTER', '').strip()
    record = test_cluster_record(directory) if directory else None
    origin = f'HARNESS_TEST_CLUSTER={directory}: {os.path.join(directory, "cluster.env")}'
    # Only a started test cluster asks its stacks (nor notes what it lacks).
    sysconfdirs = (_local_sysconfdirs(local_envs or [])
                   if directory and mpi_env == 'clean' else {})
    system, envs = cluster_config(test_cluster_spec(record, origin, sysconfdirs), var_dir,
                                  origin='test-cluster', osu_prefix=osu_prefix,
                                  mpi_env=mpi_env, note=note if directory else (lambda msg: None),
                                  link_notes=False)   # its spec is the harness's own
    system['hostnames'] = []
    return system, envs


def slurm_systems(var_dir: str, local_envs: list[dict], stack_names: list[str],
                  osu_prefix: OsuPrefix = _no_osu, mpi_env: str = 'clean',
                  note: Note = note) -> tuple[list[dict], list[dict]]:
    """Every Slurm system (local test clusters first) and their environments;
    `osu_prefix` gives a stack's OSU install where a cluster's stack names none."""
    system, envs = local_slurm(var_dir, local_envs, stack_names)
    cluster, cluster_envs = test_cluster(var_dir, osu_prefix, mpi_env, note, local_envs)
    sites, site_envs = site_clusters(var_dir, osu_prefix, mpi_env, note)
    return [system, cluster, *sites], [*envs, *cluster_envs, *site_envs]
