"""The local system is worked out when config/settings.py loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import CONFIG, mpi_env

LOAD = ('import json, runpy, sys; c = runpy.run_path(sys.argv[1])["site_configuration"]; '
        'print(json.dumps(c))')


def load(tmp_path, **env: str) -> tuple[dict, str]:
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path), **env)
    environ.pop('HARNESS_QUIET')
    for var in ('HARNESS_STACKS', 'HARNESS_MVAPICH2_PREFIX'):
        if var not in env:
            environ.pop(var, None)
    proc = subprocess.run([sys.executable, '-c', LOAD, str(CONFIG)], env=environ,
                          capture_output=True, text=True)
    if proc.returncode:
        return {}, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def envs_of(conf: dict, part: str) -> dict[str, dict]:
    """The environments ReFrame picks on local:<part> (the most specific)."""
    found: dict[str, dict] = {}
    for target in ('local', f'local:{part}'):
        found.update({e['name']: e for e in conf['environments'] if target in e['target_systems']})
    return found


def test_one_environment_per_present_stack_with_its_own_wrappers(tmp_path, stacks):
    conf, _ = load(tmp_path)
    for part in ('shm', 'tcp'):
        envs = envs_of(conf, part)
        assert sorted(envs) == sorted(stacks)
        for name, env in envs.items():
            suffix = {'openmpi': 'openmpi', 'mpich': 'mpich'}[name]
            assert env['cc'].endswith(f'mpicc.{suffix}')
            assert os.path.basename(env['extras']['launcher']).endswith(f'.{suffix}')
    parts = {p['name']: p for p in conf['systems'][0]['partitions']}
    assert set(parts) == {'shm', 'tcp'}
    assert sorted(parts['shm']['environs']) == sorted(stacks)


def test_tcp_partition_forces_loopback_tcp(tmp_path, stacks):
    conf, _ = load(tmp_path)
    tcp, shm = envs_of(conf, 'tcp'), envs_of(conf, 'shm')
    want = {'openmpi': ('OMPI_MCA_btl', 'self,tcp'), 'mpich': ('UCX_TLS', 'tcp,self')}
    for name in stacks:
        var, value = want[name]
        assert dict(map(tuple, tcp[name]['env_vars']))[var] == value
        assert var not in dict(map(tuple, shm[name]['env_vars']))


def test_restricting_stacks(tmp_path, stacks):
    conf, _ = load(tmp_path, HARNESS_STACKS=stacks[0])
    assert set(envs_of(conf, 'shm')) == {stacks[0]}


def test_unknown_stack_is_a_clear_error(tmp_path):
    conf, err = load(tmp_path, HARNESS_STACKS='intelmpi')
    assert not conf
    assert 'HARNESS_STACKS names unknown stack(s) intelmpi' in err


def test_absent_mvapich2_is_left_out_with_one_line(tmp_path, stacks):
    conf, err = load(tmp_path, HARNESS_MVAPICH2_PREFIX=str(tmp_path / 'no-mvapich2'))
    assert 'mvapich2' not in envs_of(conf, 'shm')
    lines = [ln for ln in err.splitlines() if 'mvapich2' in ln]
    assert len(lines) == 1 and 'left out' in lines[0]


def test_a_prefix_gives_a_stack_its_wrappers(tmp_path, stacks):
    if 'mpich' not in stacks:
        pytest.skip('needs MPICH')
    prefix = tmp_path / 'mv2'
    (prefix / 'bin').mkdir(parents=True)
    for exe, target in (('mpicc', 'mpicc.mpich'), ('mpiexec', 'mpiexec.mpich')):
        (prefix / 'bin' / exe).symlink_to(f'/usr/bin/{target}')
    conf, _ = load(tmp_path, HARNESS_MVAPICH2_PREFIX=str(prefix))
    env = envs_of(conf, 'shm')['mvapich2']
    assert env['cc'] == str(prefix / 'bin' / 'mpicc')
    assert env['extras']['launcher'] == str(prefix / 'bin' / 'mpiexec')
    assert env['extras']['family'] == 'mvapich2'
