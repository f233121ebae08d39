"""What a run claims is what it measured: the user's MPI tuning variables do not
reach the runs unless kept, each partition pins its transport, a run whose
transport is not its partition's fails, and every record says which MPI
variables were in effect (real ReFrame sessions of STREAM, one sample)."""

from __future__ import annotations

import pytest
from conftest import run_reframe
from hybridverdict.perflog import read_perflogs

pytestmark = pytest.mark.integration

#: What a user's rc file may export: every Open MPI run over TCP, MPICH's too.
SHELL = {'OMPI_MCA_btl': 'tcp,self', 'OMPI_MCA_pml': 'ob1', 'UCX_TLS': 'tcp',
         'OMPI_MCA_btl_tcp_if_include': 'lo', 'UCX_NET_DEVICES': 'lo'}
PINNED = {'openmpi': {'OMPI_MCA_btl': 'self,vader', 'OMPI_MCA_pml': 'ob1'},
          'mpich': {'UCX_TLS': 'sm,self'}}


def _mpi_env(rec) -> dict[str, str]:
    return dict(item.split('=', 1) for item in rec.mpi_env.split())


@pytest.fixture(scope='module')
def var(tmp_path_factory):
    return tmp_path_factory.mktemp('mpienv')


def _session(var, *args, **env):
    proc = run_reframe(var, '--system', 'local:shm', '-n', 'StreamCheck%layout=mpi_', '-r',
                       *args, env={**SHELL, 'HARNESS_SNAPSHOTS': '0', **env})
    return proc


def test_the_shells_transport_does_not_reach_the_shm_runs(var, stacks):
    proc = _session(var)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 'the runs do not inherit' in proc.stderr
    recs = read_perflogs([str(var / 'perflogs')])
    assert {r.stack for r in recs} == set(stacks)
    for rec in recs:
        env = _mpi_env(rec)
        assert PINNED[rec.stack].items() <= env.items(), (rec.stack, env)
        assert 'OMPI_MCA_btl_tcp_if_include' not in env and 'UCX_NET_DEVICES' not in env


def test_kept_variables_are_recorded(var, stacks):
    proc = _session(var, '-p', stacks[0], HARNESS_MPI_ENV='keep',
                    OMPI_MCA_coll_tuned_use_dynamic_rules='1', MPIR_CVAR_ASYNC_PROGRESS='0')
    assert proc.returncode == 0, proc.stdout[-3000:]
    recs = [r for r in read_perflogs([str(var / 'perflogs')])
            if 'MPIR_CVAR_ASYNC_PROGRESS' in r.mpi_env]
    assert recs
    for rec in recs:
        env = _mpi_env(rec)
        # kept and recorded, the partition's pins still winning over the shell's
        assert env['OMPI_MCA_coll_tuned_use_dynamic_rules'] == '1'
        assert env['MPIR_CVAR_ASYNC_PROGRESS'] == '0'
        assert PINNED[rec.stack].items() <= env.items()


def test_a_run_whose_transport_is_not_its_partitions_fails_naming_it(var, stacks):
    if 'openmpi' not in stacks:
        pytest.skip('needs Open MPI')
    proc = _session(var, '-p', 'openmpi', '-S', 'env_vars=OMPI_MCA_btl:tcp')
    assert proc.returncode != 0
    assert ('local:shm claims shm for openmpi, but this run sets OMPI_MCA_btl=tcp (the '
            'partition pins self,vader)') in proc.stdout
