"""The MPI stack registry (checks/harnesscore/stacks.py), the one place a
stack's facts live: every entry complete and well typed, no other source
naming a stack, and every reader (the local system, the Slurm systems, the
Spack site, the launch and OSU helpers) making one thing per entry."""

from __future__ import annotations

import ast
import collections.abc
import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
import spack_site
from conftest import CONFIG, REPO, mpi_env
from conftest import STACKS as CONFTEST_STACKS
from harnesscore import osu_output, stacks
from harnesscore.stacks import STACK, STACKS, Stack
from harnesslib import launch

sys.path.insert(0, str(REPO / 'config'))
import slurm_systems  # noqa: E402

#: Sources that may name a stack in a string, and why (a file, or one string of a file).
ALLOWED_FILES = {
    'checks/harnesscore/stacks.py': 'the registry itself',
    'config/cluster_template.py': "a centre's example: the stacks it has, their modules and "
                                  'versions (test_the_template_names_the_registrys_stacks)',
}
ALLOWED_STRINGS = {
    ('checks/lammps.py', '+stack-openmpi'): "Debian's lmp is linked with Open MPI: a fact of "
                                            'the LAMMPS package, not of the stack',
}
#: Where the sources are (tests/ is not: tests name the stacks they exercise).
SOURCE_DIRS = ('checks', 'config', 'reports')


# ---- the entries ------------------------------------------------------------------

def conforms(value: object, hint: object) -> bool:
    """Whether `value` is of the type `hint` (the hints a Stack's fields use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(conforms(v, a) for v, a in zip(value, args))
    if origin is collections.abc.Mapping:
        return isinstance(value, collections.abc.Mapping) and all(
            conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items())
    if origin is re.Pattern:
        return isinstance(value, re.Pattern) and isinstance(value.pattern, args[0])
    assert isinstance(hint, type), f'no rule for the type {hint!r}'
    return isinstance(value, hint)


def test_conforms_tells_wrong_types():
    hints = typing.get_type_hints(Stack)
    assert not conforms(None, hints['descr'])
    assert not conforms(['mpirun'], hints['launchers'])
    assert not conforms(('mpirun', 1), hints['launchers'])
    assert not conforms({'A': 1}, hints['shm_env'])
    assert not conforms('slurm', hints['slurm_launch'])
    assert not conforms('^x', hints['version_re'])
    assert conforms(None, hints['suffix']) and conforms('.x', hints['suffix'])


@pytest.mark.parametrize('stack', STACKS, ids=lambda s: s.name)
def test_every_entry_is_complete_and_well_typed(stack):
    hints = typing.get_type_hints(Stack)
    for field in stack.__dataclass_fields__:
        value = getattr(stack, field)
        assert conforms(value, hints[field]), f'{stack.name}.{field} = {value!r}'
        assert value != '', f'{stack.name}.{field} is empty'
    assert re.fullmatch(r'[a-z][a-z0-9]*', stack.name)
    for field in ('launchers', 'launcher_says', 'version_tools'):
        assert getattr(stack, field), f'{stack.name}.{field} is empty'
    assert all(tool and tool[0] for tool in stack.version_tools)
    envs = (stack.binding_env, stack.root_env, stack.shm_env, stack.tcp_env,
            stack.tcp_nodes_env)
    for env in envs:
        assert all(re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', k) for k in env), env
        # Shared by every reader: nobody may change an entry.
        with pytest.raises(TypeError):
            env['HARNESS_TEST'] = '1'  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        stack.name = 'other'  # type: ignore[misc]


def test_names_are_unique_and_the_lookups_agree():
    names = [s.name for s in STACKS]
    assert len(set(names)) == len(names)
    assert list(STACK) == names
    assert all(STACK[s.name] is s for s in STACKS)


@pytest.mark.parametrize('stack', STACKS, ids=lambda s: s.name)
def test_every_entry_says_consistent_things(stack):
    # Found by Debian's suffixed tools exactly where Debian packages it.
    assert (stack.suffix is None) == (not stack.debian_packages)
    if stack.suffix is not None:
        assert stack.suffix.startswith('.')
        assert stack.suffixed_tools == (f'mpicc{stack.suffix}',
                                        f'{stack.launchers[0]}{stack.suffix}')
    else:
        assert stack.suffixed_tools is None
    assert stack.prefix_var == f'HARNESS_{stack.name.upper()}_PREFIX'
    # Every launcher name is one the stack's link folder offers.
    assert set(stack.launchers) <= set(launch.LAUNCHER_NAMES)
    if stack.library_example is not None:
        assert stack.library_example.startswith(stack.library_prefix)
        match = stack.version_re.search(stack.library_example)
        assert match and any(match.groups())
    # The link between nodes is the device it is given, no placeholder left.
    for filled, given, template in ((stack.tcp_nodes('if9'), 'if9', stack.tcp_nodes_env),
                                    (stack.ib('hca9:1'), 'hca9', stack.ib_env),
                                    (stack.ofi('prov9'), 'prov9', stack.ofi_env)):
        if template is None:
            assert filled is None
            continue
        assert filled is not None and set(filled) == set(template)
        assert any(given in v for v in filled.values()), filled
        assert not any('{' in v for v in filled.values()), filled
    assert stack.srun_pmi and stack.slurm_launch in typing.get_args(stacks.SlurmLaunch)
    # Its tuning variables are families (prefixes); clean mode keeps every user
    # file out through the variable that names the file read instead, filled
    # with the system's folder where it needs one.
    assert stack.tuning_prefixes and all(p.endswith('_') for p in stack.tuning_prefixes)
    assert {var for var, _ in stack.user_files} == set(stack.clean_files_env)
    needs_folder = any('{sysconfdir}' in v for v in stack.clean_files_env.values())
    assert needs_folder == bool(stack.sysconfdir_tool)
    # Only a variable naming a file in that folder can wait for the file.
    assert set(stack.clean_files_optional) <= set(stack.clean_files_env)
    assert not stack.clean_files_optional or stack.sysconfdir_tool
    assert not any('{' in v for v in stack.clean_files('/etc/x').values())
    # The test cluster loads the module of the stack's name.
    assert (REPO / 'config' / 'modules' / 'files' / f'{stack.name}.lua').exists()


@pytest.mark.parametrize('stack', STACKS, ids=lambda s: s.name)
def test_clean_files_at_a_folder_wait_only_the_optional_ones_for_their_file(stack, tmp_path):
    # What the local system (launch.clean_files_env) and a cluster's stack
    # (slurm_systems, its declared sysconfdir) both set in clean mode.
    folder = str(tmp_path)
    assert set(stack.clean_files_at(folder)) == \
        set(stack.clean_files_env) - set(stack.clean_files_optional)
    for var in stack.clean_files_optional:
        with open(stack.clean_files(folder)[var], 'w') as fp:
            fp.write('# the site\'s\n')
    assert stack.clean_files_at(folder) == stack.clean_files(folder)


def test_debian_packages_are_the_ones_the_harness_installs():
    script = (REPO / 'harness').read_text()
    line = re.search(r'^APT_PACKAGES=\(([^)]*)\)', script, re.M)
    assert line, 'harness: no APT_PACKAGES=(...) line'
    apt = set(line.group(1).split())
    for stack in STACKS:
        assert set(stack.debian_packages) <= apt, stack.name


def test_the_registrys_table_lists_every_stack():
    lines = (stacks.__doc__ or '').splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r'=+(\s+=+)+', line.strip())]
    assert len(rules) == 3, 'the docstring has one table: rule, header, rule, rows, rule'
    rows = {line.split()[0]: line for line in lines[rules[1] + 1:rules[2]] if line.strip()}
    assert list(rows) == list(STACK)
    for stack in STACKS:
        row = rows[stack.name]
        assert f'``{stack.prefix_var}``' in row
        if stack.suffixed_tools:
            cc, launcher = stack.suffixed_tools
            assert f'``{cc}`` + ``{launcher}``' in row
        else:
            assert 'only where its prefix is given' in row


def test_the_root_variables_only_as_root(monkeypatch):
    monkeypatch.setattr(stacks.os, 'geteuid', lambda: 1000)
    assert all(s.root_env_here() == {} for s in STACKS)
    monkeypatch.setattr(stacks.os, 'geteuid', lambda: 0)
    assert all(s.root_env_here() == dict(s.root_env) for s in STACKS)


def test_default_stacks_take_a_prefixed_stack_only_with_its_prefix():
    debian = [s.name for s in STACKS if s.suffix is not None]
    assert stacks.default_stacks({}) == debian
    everything = {s.prefix_var: '/opt/x' for s in STACKS}
    assert stacks.default_stacks(everything) == list(STACK)
    assert stacks.default_stacks({s.prefix_var: ' ' for s in STACKS}) == debian


def test_an_infiniband_port_pins_each_stack_the_way_it_is_told():
    # UCX takes the port (mlx5_0:1); MVAPICH2's MV2_IBA_HCA the HCA (mlx5_0)
    assert STACK['openmpi'].ib('mlx5_0:1') == {'OMPI_MCA_pml': 'ucx',
                                               'UCX_NET_DEVICES': 'mlx5_0:1'}
    assert STACK['mpich'].ib('mlx5_0:1') == {'UCX_NET_DEVICES': 'mlx5_0:1'}
    assert STACK['mvapich2'].ib('mlx5_0:1') == {'MV2_IBA_HCA': 'mlx5_0'}


def test_the_install_hint_names_the_prefix_only_of_stacks_debian_lacks():
    hint = stacks.install_hint()
    for stack in STACKS:
        assert (stack.prefix_var in hint) == (not stack.debian_packages), stack.name
        assert all(p in hint for p in stack.debian_packages), stack.name

# ---- no other source names a stack ---------------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                found.add(id(body[0].value))
    return found


def _stack_words() -> re.Pattern[str]:
    words = sorted({w for s in STACKS for w in (s.name, s.descr, s.library_prefix)},
                   key=len, reverse=True)
    return re.compile(r'(?<![A-Za-z0-9])(?:' + '|'.join(map(re.escape, words))
                      + r')(?![A-Za-z0-9])', re.I)


def names_a_stack(text: str, pattern: re.Pattern[str]) -> bool:
    """A stack's name in a token-like string ('openmpi', 'mpicc.mpich',
    'HARNESS_MPICH_PREFIX'), or a string that is a stack's prose name or
    library prefix; prose (a string with spaces: messages, help) may name a
    stack as an example."""
    if not re.search(r'\s', text):
        return bool(pattern.search(text))
    known = {w.lower() for s in STACKS for w in (s.descr, s.library_prefix)}
    return text.strip().lower() in known


def stack_literals(path: Path, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding='utf-8'), filename=str(path))
    docs = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docs and names_a_stack(node.value, pattern))


def test_names_a_stack_tells_data_from_prose():
    pattern = _stack_words()
    for stack in STACKS:
        assert names_a_stack(stack.name, pattern)
        assert names_a_stack(stack.name.upper(), pattern)
        assert names_a_stack(stack.descr, pattern)
        assert names_a_stack(f'mpicc.{stack.name}', pattern)
        assert names_a_stack(stack.prefix_var, pattern)
        assert names_a_stack(f'+stack-{stack.name}', pattern)
        assert not names_a_stack(f'lib{stack.name}x', pattern)
        assert not names_a_stack(f'install {stack.name} first', pattern)


def test_no_other_source_names_a_stack():
    pattern = _stack_words()
    found, allowed_seen = [], set()
    files = [p for d in SOURCE_DIRS for p in sorted((REPO / d).rglob('*.py'))
             if '__pycache__' not in p.parts]
    assert any(p.name == 'settings.py' for p in files)
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        literals = stack_literals(path, pattern)
        if rel in ALLOWED_FILES:
            assert literals, f'{rel} names no stack: take it out of ALLOWED_FILES'
            continue
        for line, text in literals:
            if (rel, text) in ALLOWED_STRINGS:
                allowed_seen.add((rel, text))
            else:
                found.append(f'{rel}:{line}: {text!r}')
    assert not found, ('stack literals outside checks/harnesscore/stacks.py (read the '
                       'registry instead):\n' + '\n'.join(found))
    assert allowed_seen == set(ALLOWED_STRINGS), 'stale ALLOWED_STRINGS entries'


# ---- the readers: one environment per entry -------------------------------------------

def fake_prefixes(root: Path) -> dict[str, str]:
    """A prefix per stack whose launcher says what the stack's does: every
    stack present, whatever this machine has."""
    env = {}
    for stack in STACKS:
        bindir = root / stack.name / 'bin'
        bindir.mkdir(parents=True)
        for tool, text in (('mpicc', 'fake'), (stack.launchers[0], stack.launcher_says[0])):
            (bindir / tool).write_text(f'#!/bin/sh\necho {text!r}\n')
            (bindir / tool).chmod(0o755)
        env[stack.prefix_var] = str(root / stack.name)
    return env


LOAD = ('import json, runpy, sys; c = runpy.run_path(sys.argv[1])["site_configuration"]; '
        'print(json.dumps(c))')


def load_settings(tmp_path: Path, **env: str) -> dict:
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path / 'var'), **env)
    environ.pop('HARNESS_STACKS', None)
    proc = subprocess.run([sys.executable, '-c', LOAD, str(CONFIG)], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_settings_make_one_environment_per_entry(tmp_path):
    record = tmp_path / 'cluster'
    record.mkdir()
    (record / 'cluster.env').write_text('NODES=2\nSHARED_CORES=1\nFAST_IFACE=f9\n'
                                        'SLOW_IFACE=s9\n')
    conf = load_settings(tmp_path, **fake_prefixes(tmp_path / 'mpi'),
                         HARNESS_TEST_CLUSTER=str(record))
    by_target: dict[str, list[dict]] = {}
    for env in conf['environments']:
        for target in env['target_systems']:
            by_target.setdefault(target, []).append(env)
    targets = ('local', 'local:tcp', 'local-slurm', 'local-slurm:tcp', 'declared',
               'test-cluster', 'test-cluster:fast', 'test-cluster:slow')
    for target in targets:
        assert [e['name'] for e in by_target[target]] == list(STACK), target
    for env in by_target['local']:
        stack = STACK[env['name']]
        assert env['extras']['pinned'] == dict(stack.shm_env)
        assert env['extras']['family'] == stack.name and env['extras']['descr'] == stack.descr
    for env in by_target['local:tcp']:
        assert env['extras']['pinned'] == dict(STACK[env['name']].tcp_env)
    for env in by_target['local-slurm']:
        stack = STACK[env['name']]
        assert env['extras'].get('launch', 'own') == stack.slurm_launch
        if stack.slurm_launch == 'srun':
            assert env['extras']['pmi'] == stack.srun_pmi
    for env in by_target['test-cluster:slow']:
        stack = STACK[env['name']]
        assert env['extras']['pinned'] == stack.tcp_nodes('s9')
        assert env['modules'] == [stack.name]
    for system in conf['systems']:
        for part in system['partitions']:
            if system['name'] in ('local', 'local-slurm', 'declared', 'test-cluster'):
                assert part['environs'] == list(STACK), (system['name'], part['name'])


def test_an_unknown_stack_lists_the_registry(tmp_path):
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path), HARNESS_STACKS='nompi')
    proc = subprocess.run([sys.executable, '-c', LOAD, str(CONFIG)], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f'known: {", ".join(STACK)}' in proc.stderr


def test_the_test_cluster_takes_every_entry(monkeypatch, tmp_path):
    monkeypatch.delenv('HARNESS_STACKS', raising=False)
    for stack in STACKS:
        monkeypatch.setenv(stack.prefix_var, '/opt/x')
    spec = slurm_systems.test_cluster_spec({'NODES': '2', 'FAST_IFACE': 'f9'})
    assert list(spec['stacks']) == list(STACK)
    assert list(spec['partitions']['fast']['transport_env']) == list(STACK)
    _, envs = slurm_systems.cluster_config(spec, str(tmp_path))
    for target in ('test-cluster', 'test-cluster:fast', 'test-cluster:slow'):
        assert [e['name'] for e in envs if e['target_systems'] == [target]] == list(STACK)
    assert slurm_systems.SRUN_PMI == {s.name: s.srun_pmi for s in STACKS}


def test_the_template_names_the_registrys_stacks():
    spec = importlib.util.spec_from_file_location('cluster_template',
                                                  REPO / 'config' / 'cluster_template.py')
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, stack in module.CLUSTER['stacks'].items():
        entry = STACK[stack.get('family', name)]
        if stack.get('launch', 'srun') == 'srun':
            assert stack.get('pmi', entry.srun_pmi) == entry.srun_pmi, name
        else:
            assert stack['launcher'] in entry.launchers, name
    for part in module.CLUSTER['partitions'].values():
        assert set(part.get('transport_env', {})) <= set(module.CLUSTER['stacks'])


def test_spack_site_writes_one_external_per_entry(tmp_path):
    assert spack_site.STACKS is STACKS and spack_site.STACK is STACK   # the registry itself
    prefixes = fake_prefixes(tmp_path)
    found = [spack_site.parse_stack_arg(f'{s.name}@1.2.3={prefixes[s.prefix_var]}', '/unused')
             for s in STACKS]
    files = spack_site.site_files(found, {}, [])
    packages = files['packages.yaml']['packages']
    assert [p for p in packages if p != 'mpi'] == [s.spack_package for s in STACKS]
    assert files['definitions.yaml']['definitions'] == [
        {'stacks': [f'^{s.spack_package}' for s in STACKS]}]
    with pytest.raises(spack_site.SiteError, match=', '.join(STACK)):
        spack_site.parse_stack_arg('nompi=/x', '/unused')


@pytest.mark.parametrize('stack', [s for s in STACKS if s.library_example],
                         ids=lambda s: s.name)
def test_spack_site_reads_the_version_with_the_stacks_tools(stack, tmp_path):
    tool = stack.version_tools[0][0].replace('{suffix}', '')
    (tmp_path / tool).write_text(f'#!/bin/sh\necho {stack.library_example!r}\n')
    (tmp_path / tool).chmod(0o755)
    version = spack_site.stack_version(stack.name, str(tmp_path))
    assert version and version in (stack.library_example or '')


def test_the_launch_and_osu_helpers_read_the_registry():
    assert launch.LIBRARY_PREFIX == {s.name: s.library_prefix for s in STACKS}
    for stack in STACKS:
        assert launch.HELPER_NAMES.get(stack.name, ()) == stack.launcher_helpers
        for oversubscribe in (False, True):
            env = launch.rank_binding_env(stack.name, 2, oversubscribe)
            assert env and set(stack.binding_env.items()) <= set(env.items())
            kind = 'HYDRA_BINDING' in env, any(k.startswith('OMPI_MCA_') for k in env)
            assert kind == (stack.launcher_kind == 'hydra', stack.launcher_kind == 'orte')
        environ = types.SimpleNamespace(cc='/x/mpicc', extras={'family': stack.name})
        assert osu_output.wrapper_link_check(environ) == f'/x/mpicc {stack.wrapper_link_flag}'
    assert launch.rank_binding_env('nompi') == {}
    # Every stack's tuning variables are ones HARNESS_MPI_ENV handles.
    assert {p for s in STACKS for p in s.tuning_prefixes} <= set(launch.MPI_VAR_PREFIXES)


def test_the_bench_and_the_tests_read_the_registry():
    from report_tools import tool
    bench = tool('bench')
    assert bench.STACKS == {s.name: s.library_example for s in STACKS if s.library_example}
    assert CONFTEST_STACKS == {s.name: s.suffixed_tools for s in STACKS if s.suffixed_tools}


def test_every_stacks_launcher_places_k_ranks_per_node():
    """``launch_line``: how each stack's own launcher puts k ranks on each
    node (``launch.launch_line``'s `per_node`); srun's is --ntasks-per-node; a
    family the registry does not know is an error naming it."""
    assert STACK['mpich'].per_node(4) == ['-ppn', '4'] == STACK['mvapich2'].per_node(4, 2)
    assert STACK['openmpi'].per_node(4) == ['--map-by', 'ppr:4:node']
    assert STACK['openmpi'].per_node(4, 2) == ['--map-by', 'ppr:4:node:PE=2']
    for stack in STACKS:
        filled = stack.per_node(3, 2)
        assert filled and '3' in ' '.join(filled) and not any('{' in w for w in filled)
    from reframe.core.backends import getlauncher
    assert launch.launch_line(getlauncher('mpiexec')(), 8, per_node=4,
                              family='mvapich2') == 'mpiexec -n 8 -ppn 4'
    assert launch.launch_line(getlauncher('mpirun')(), 8, per_node=4,
                              family='openmpi') == 'mpirun -np 8 --map-by ppr:4:node'
    assert launch.launch_line(getlauncher('srun')(), 8, per_node=4) == (
        'srun --cpus-per-task=1 --ntasks=8 --ntasks-per-node=4')
    # Without per_node the line is as before.
    assert launch.launch_line(getlauncher('mpiexec')(), 8, family='mpich') == 'mpiexec -n 8'
    with pytest.raises(ValueError, match=r"launcher mpirun of family 'intelmpi': no way known "
                                         r'to place 4 ranks per node'):
        launch.launch_line(getlauncher('mpirun')(), 8, per_node=4, family='intelmpi')
