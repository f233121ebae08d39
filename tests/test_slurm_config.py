"""Slurm systems in config/: the `local-slurm` test cluster and a centre's
cluster from config/cluster_template.py, checked the way the template says
(--show-config, --list, --dry-run), and the template's error messages."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, CONFIG, REPO, mpi_env

sys.path.insert(0, str(REPO / 'config'))
import slurm_systems  # noqa: E402

TEMPLATE = REPO / 'config' / 'cluster_template.py'


def reframe(var: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=mpi_env(HARNESS_VAR_DIR=str(var), **env))


def template_env() -> dict[str, str]:
    # The template names Lmod; this machine has no modules system.
    return {'HARNESS_CLUSTERS': str(TEMPLATE), 'HARNESS_MODULES_SYSTEM': 'nomod'}


def test_local_slurm_is_only_chosen_by_name(tmp_path):
    proc = reframe(tmp_path, '--show-config', 'systems/0/name')
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 'local'
    proc = reframe(tmp_path, '--system', 'local-slurm', '--show-config', 'systems/0/partitions')
    assert proc.returncode == 0, proc.stderr
    parts = json.loads(proc.stdout)
    assert [p['name'] for p in parts] == ['shm', 'tcp']
    for p in parts:
        assert p['scheduler'] == 'squeue' and p['access'] == ['--partition=harness']
        assert p['processor']['num_cpus'] >= 1


def test_local_slurm_environments_launch_with_each_stacks_pmi(tmp_path, stacks):
    proc = reframe(tmp_path, '--system', 'local-slurm:tcp', '--show-config', 'environments')
    assert proc.returncode == 0, proc.stderr
    envs = {e['name']: e for e in json.loads(proc.stdout)}
    assert set(stacks) <= set(envs)
    pmi = {'openmpi': 'pmix', 'mpich': 'pmi2'}
    for stack in stacks:
        extras = envs[stack]['extras']
        assert extras['launch'] == 'srun' and extras['pmi'] == pmi[stack]
        assert extras['launcher'].endswith('srun')
    # tcp keeps the local system's transport variables
    if 'mpich' in envs:
        assert ['UCX_TLS', 'tcp,self'] in envs['mpich']['env_vars']


def test_template_shows_one_partition_per_interconnect(tmp_path):
    proc = reframe(tmp_path, '--system', 'example-hpc', '--show-config', 'systems/0',
                   **template_env())
    assert proc.returncode == 0, proc.stderr
    system = json.loads(proc.stdout)
    parts = {p['name']: p for p in system['partitions']}
    assert set(parts) == {'ib', 'eth'}
    assert parts['ib']['access'] == ['--account=FILL_IN_PROJECT', '--partition=compute',
                                     '--constraint=ib', '--exclusive']
    assert parts['ib']['extras']['nodes'] == 2
    assert parts['ib']['max_jobs'] == 16


def test_template_lists_every_layout_of_its_nodes(tmp_path):
    proc = reframe(tmp_path, '-c', str(REPO / 'checks'), '--system', 'example-hpc',
                   '-n', 'StreamCheck', '--list', **template_env())
    assert proc.returncode == 0, proc.stderr
    layouts = set(re.findall(r'StreamCheck %layout=(\w+)', proc.stdout))
    assert layouts == {'mpi_128x1', 'masteronly_64x2', 'masteronly_32x4', 'masteronly_16x8',
                       'masteronly_8x16', 'masteronly_4x32', 'masteronly_2x64',
                       'masteronly_1x128'}


def test_template_dry_run_writes_hybrid_job_scripts_across_nodes(tmp_path):
    proc = reframe(tmp_path, '-c', str(REPO / 'checks'), '--system', 'example-hpc',
                   '-n', 'StreamCheck%layout=masteronly_16x8', '--dry-run', **template_env())
    assert proc.returncode == 0, proc.stdout[-5000:]
    stage = tmp_path / 'example-hpc' / 'stage' / 'example-hpc'
    # ReFrame's own launchers: srun with the stack's PMI and the binding in
    # srun's input variables; MVAPICH2 (launch 'own') its own mpiexec, bound
    # by hydra's variable.
    srun = '\nsrun --cpus-per-task=8 '
    want = {
        'openmpi': ('export SLURM_MPI_TYPE=pmix\n', 'export SLURM_CPU_BIND=cores\n', srun),
        'mpich': ('export SLURM_MPI_TYPE=pmi2\n', 'export SLURM_CPU_BIND=cores\n', srun),
        'mvapich2': ('export HYDRA_BINDING=core:8\n', 'export MV2_ENABLE_AFFINITY=0\n',
                     '\nmpiexec -n 32 '),
    }
    for part in ('ib', 'eth'):
        for stack, line in want.items():
            script = next((stage / part / stack).glob('StreamCheck_*/rfm_job.sh')).read_text()
            assert '#SBATCH --ntasks=32\n#SBATCH --ntasks-per-node=16\n' in script
            assert '#SBATCH --cpus-per-task=8' in script
            assert f'#SBATCH --constraint={part}' in script
            assert all(part_of in script for part_of in line), script
            assert 'export OMP_NUM_THREADS=8' in script
    ib = next((stage / 'ib' / 'openmpi').glob('StreamCheck_*/rfm_job.sh')).read_text()
    assert 'export OMPI_MCA_pml=ucx' in ib


def test_a_missing_site_file_is_named(tmp_path):
    proc = reframe(tmp_path, '--show-config', 'systems',
                   HARNESS_CLUSTERS=str(tmp_path / 'nope.py'))
    assert proc.returncode != 0
    assert f'HARNESS_CLUSTERS names missing file(s): {tmp_path / "nope.py"}' in proc.stderr


def template_cluster() -> dict:
    ns: dict = {}
    exec(TEMPLATE.read_text(), ns)
    return ns['CLUSTER']


@pytest.mark.parametrize('change, message', [
    (lambda c: c.update(partitons={}), 'unknown key(s) partitons'),
    (lambda c: c['partitions']['ib'].update(node=2), 'partition ib: unknown key(s) node'),
    (lambda c: c['partitions']['ib'].update(nodes=0), 'nodes must be at least 1, got 0'),
    (lambda c: c['partitions']['eth'].pop('access'), 'partition eth: missing access'),
    (lambda c: c['stacks']['mpich'].pop('cc'), 'stack mpich: missing cc'),
    (lambda c: c['stacks']['mpich'].update(launch='mpirun'),
     "launch must be 'srun' or 'own', got 'mpirun'"),
    (lambda c: c['stacks']['mvapich2'].pop('launcher'), "launch 'own' needs 'launcher'"),
    (lambda c: c['partitions']['ib']['transport_env'].update(intelmpi={}),
     'transport_env names unknown stack(s) intelmpi'),
])
def test_template_mistakes_are_named(change, message):
    cluster = template_cluster()
    change(cluster)
    with pytest.raises(ValueError) as err:
        slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert message in str(err.value)
    assert str(err.value).startswith('site_x.py')


# ---- the multi-node test cluster's system (tests/slurm/cluster.sh) -------------

def write_cluster_record(directory: Path, **values: str) -> None:
    record = {'NODES': '2', 'CPUS_PER_NODE': '4', 'SHARED_CORES': '0', 'FAST_IFACE': 'fast0',
              'SLOW_IFACE': 'slow0', 'SLOW_RATE': '1gbit', 'SLOW_RATE_BITS': '1000000000',
              **values}
    (directory / 'cluster.env').write_text(
        '# test\n' + ''.join(f'{k}={v}\n' for k, v in record.items()))


def test_the_test_cluster_is_a_centres_cluster_with_a_partition_per_link(tmp_path):
    write_cluster_record(tmp_path, NODES='3')
    proc = reframe(tmp_path, '--system', 'test-cluster', '--show-config', 'systems/0',
                   HARNESS_TEST_CLUSTER=str(tmp_path), HARNESS_MODULES_SYSTEM='nomod')
    assert proc.returncode == 0, proc.stderr
    system = json.loads(proc.stdout)
    assert system['hostnames'] == []
    parts = {p['name']: p for p in system['partitions']}
    assert set(parts) == {'fast', 'slow'}
    for name, part in parts.items():
        assert part['access'] == [f'--partition={name}']
        assert part['scheduler'] == 'squeue' and part['launcher'] == 'srun'
        assert part['extras']['nodes'] == 3 and part['extras']['shared_cores'] is False
        assert part['extras']['link'] == f'{name}0'
        assert part['processor']['num_cpus'] == 4
        assert part['prepare_cmds'][0] == '. /usr/share/lmod/lmod/init/bash'
    assert parts['slow']['extras']['rate_bits'] == 1_000_000_000


def test_the_test_cluster_loads_each_stack_as_a_module_pinned_to_the_link(tmp_path):
    write_cluster_record(tmp_path)
    proc = reframe(tmp_path, '--system', 'test-cluster:slow', '--show-config', 'environments',
                   HARNESS_TEST_CLUSTER=str(tmp_path), HARNESS_MODULES_SYSTEM='nomod',
                   HARNESS_STACKS='openmpi,mpich')
    assert proc.returncode == 0, proc.stderr
    by_name = {e['name']: e for e in json.loads(proc.stdout)}
    assert set(by_name) - {'builtin'} == {'openmpi', 'mpich'}
    assert by_name['openmpi']['modules'] == ['openmpi'] and by_name['openmpi']['cc'] == 'mpicc'
    assert by_name['mpich']['modules'] == ['mpich']
    assert ['OMPI_MCA_btl_tcp_if_include', 'slow0'] in by_name['openmpi']['env_vars']
    assert ['OMPI_MCA_oob_tcp_if_include', 'slow0'] in by_name['openmpi']['env_vars']
    assert ['UCX_NET_DEVICES', 'slow0'] in by_name['mpich']['env_vars']
    assert ['UCX_TLS', 'tcp,self'] in by_name['mpich']['env_vars']
    assert by_name['openmpi']['extras']['pmi'] == 'pmix'
    assert by_name['mpich']['extras']['pmi'] == 'pmi2'


def test_the_test_cluster_takes_mvapich2_only_with_its_prefix(tmp_path):
    spec = slurm_systems.test_cluster_spec()
    assert set(spec['stacks']) == {'openmpi', 'mpich'} or os.environ.get(
        'HARNESS_MVAPICH2_PREFIX') or os.environ.get('HARNESS_STACKS')
    env = {k: v for k, v in os.environ.items() if k != 'HARNESS_STACKS'}
    env['HARNESS_MVAPICH2_PREFIX'] = str(tmp_path)
    code = ('import slurm_systems, json; s = slurm_systems.test_cluster_spec(); '
            'print(json.dumps([sorted(s["stacks"]), s["partitions"]["fast"]["transport_env"]'
            '["mvapich2"]]))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         cwd=REPO / 'config', env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [['mpich', 'mvapich2', 'openmpi'], {'HYDRA_IFACE': 'fast0'}]


def test_a_test_cluster_folder_without_its_record_is_named(tmp_path):
    proc = reframe(tmp_path, '--system', 'test-cluster', '--show-config', 'systems/0/name',
                   HARNESS_TEST_CLUSTER=str(tmp_path / 'gone'), HARNESS_MODULES_SYSTEM='nomod')
    assert proc.returncode != 0
    assert f'HARNESS_TEST_CLUSTER={tmp_path / "gone"}: cannot read' in proc.stderr
