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
from harnesslib.launch import assigned_value  # noqa: E402

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


def test_local_slurm_runs_the_local_stacks_through_srun_but_an_own_launcher_stack_itself():
    local = [{'name': stack, 'target_systems': ['local', 'local:tcp', 'other'],
              'env_vars': [['UCX_TLS', 'tcp']], 'extras': {'stack': stack, 'launch': 'x'}}
             for stack in ('openmpi', 'mvapich2')]
    system, envs = slurm_systems.local_slurm('/tmp/unused', local, ['openmpi', 'mvapich2'])
    assert [p['environs'] for p in system['partitions']] == [['openmpi', 'mvapich2']] * 2
    by_stack = {e['name']: e for e in envs}
    assert by_stack['openmpi']['target_systems'] == ['local-slurm', 'local-slurm:tcp']
    assert by_stack['openmpi']['extras']['launch'] == 'srun'
    assert by_stack['openmpi']['env_vars'] == [['UCX_TLS', 'tcp'], ['SLURM_MPI_TYPE', 'pmix'],
                                               ['SLURM_CPU_BIND', 'cores']]
    assert by_stack['mvapich2']['extras']['launch'] == 'x'
    assert by_stack['mvapich2']['env_vars'] == [['UCX_TLS', 'tcp']]


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


def test_nodes_of_two_threads_per_core_get_whole_cores(tmp_path):
    # Slurm counts each hardware thread as a CPU: a rank of T threads asks
    # for 2T CPUs (T whole cores) on nodes of 2 threads per core, whatever
    # the layout; the layouts and the threads stay the cores'.
    site = tmp_path / 'site_smt.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    "NODE.update(num_cpus=256, num_cpus_per_core=2, num_sockets=2, "
                    "num_cpus_per_socket=128)\n")
    env = {**template_env(), 'HARNESS_CLUSTERS': str(site)}
    proc = reframe(tmp_path, '-c', str(REPO / 'checks'), '--system', 'example-hpc',
                   '-n', 'StreamCheck', '--list', **env)
    assert proc.returncode == 0, proc.stderr
    assert set(re.findall(r'StreamCheck %layout=(\w+)', proc.stdout)) == {
        'mpi_128x1', 'masteronly_64x2', 'masteronly_32x4', 'masteronly_16x8',
        'masteronly_8x16', 'masteronly_4x32', 'masteronly_2x64', 'masteronly_1x128'}
    proc = reframe(tmp_path, '-c', str(REPO / 'checks'), '--system', 'example-hpc:ib',
                   '-n', 'StreamCheck%layout=masteronly_16x8', '-n',
                   'StreamCheck%layout=mpi_128x1', '--dry-run', **env)
    assert proc.returncode == 0, proc.stdout[-5000:]
    stage = tmp_path / 'example-hpc' / 'stage' / 'example-hpc' / 'ib'
    for stack in ('openmpi', 'mpich', 'mvapich2'):
        scripts = [f.read_text() for f in (stage / stack).glob('StreamCheck_*/rfm_job.sh')]
        by_tasks: dict[int, int] = {}
        for script in scripts:
            found = re.search(r'#SBATCH --ntasks-per-node=(\d+)\n', script)
            assert found, script
            tasks = int(found[1])
            by_tasks[tasks] = by_tasks.get(tasks, 0) + 1
            cpus, threads = {16: (16, 8), 128: (2, 1)}[tasks]   # 16x8, 128x1
            assert f'#SBATCH --cpus-per-task={cpus}\n' in script, script
            assert f'export OMP_NUM_THREADS={threads}\n' in script, script
            if stack == 'mvapich2':
                # its own mpiexec binds each rank to its cores (not CPUs)
                binding = 'core' if threads == 1 else f'core:{threads}'
                assert f'export HYDRA_BINDING={binding}\n' in script, script
            else:
                assert f'\nsrun --cpus-per-task={cpus} ' in script, script
                assert 'export SLURM_CPU_BIND=cores\n' in script, script
        assert set(by_tasks) == {16, 128} and len(set(by_tasks.values())) == 1, by_tasks
    # A rank bound to one core (binding one-core): srun's last --cpus-per-task
    # is that core's 2 CPUs.
    one = tmp_path / 'one-core'
    proc = reframe(one, '-c', str(REPO / 'checks'), '--system', 'example-hpc:ib',
                   '-n', 'StreamCheck%layout=masteronly_16x8', '-p', 'openmpi',
                   '-S', 'binding=one-core', '--dry-run', **env)
    assert proc.returncode == 0, proc.stdout[-5000:]
    stage = one / 'example-hpc' / 'stage' / 'example-hpc' / 'ib' / 'openmpi'
    for job in stage.glob('StreamCheck_*/rfm_job.sh'):
        assert '\nsrun --cpus-per-task=16 --cpus-per-task=2 ' in job.read_text()


@pytest.mark.parametrize('per_core, cores, want', [(2, 8, 16), (2, 1, 2), (1, 8, 8),
                                                    (None, 8, 8), (4, 0, 4)])
def test_slurm_cpus_per_task_asks_for_whole_cores(per_core, cores, want):
    from types import SimpleNamespace

    from harnesslib.launch import slurm_cpus_per_task
    part = SimpleNamespace(processor=SimpleNamespace(num_cpus_per_core=per_core))
    assert slurm_cpus_per_task(part, cores) == want


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
    error = cluster_error(change)
    assert message in error and error.startswith('site_x.py')


def cluster_error(change) -> str:
    """The ValueError of the template cluster that `change` made wrong."""
    cluster = template_cluster()
    change(cluster)
    with pytest.raises(ValueError) as err:
        slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    return str(err.value)


# ---- mistakes in a cluster file: one ValueError naming file and key -------------

@pytest.fixture
def no_cluster_env(monkeypatch):
    for var in ('HARNESS_CLUSTERS', 'HARNESS_TEST_CLUSTER', 'HARNESS_MODULES_SYSTEM'):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


@pytest.fixture
def notes_env(no_cluster_env):
    """no_cluster_env with HARNESS_QUIET unset: the configuration prints its notes."""
    no_cluster_env.delenv('HARNESS_QUIET', raising=False)
    return no_cluster_env


def systems_error(tmp_path: Path) -> str:
    """The one-line message of what settings.py calls (slurm_systems.slurm_systems)."""
    with pytest.raises(ValueError) as err:
        slurm_systems.slurm_systems(str(tmp_path / 'var'), [], [])
    message = str(err.value)
    assert '\n' not in message
    return message


@pytest.mark.parametrize('text, message', [
    ('CLUSTER = {\n', 'SyntaxError: '),
    ('import harness_no_such_module\n',
     "ModuleNotFoundError: No module named 'harness_no_such_module' (line 1)"),
    ('X = 1\nraise RuntimeError("no\\ncluster here")\n',
     'RuntimeError: no cluster here (line 2)'),
    ('CLUSTER = {}[0]\n', 'KeyError: 0 (line 1)'),
    ('X = 1\n', 'defines no CLUSTER dictionary'),
    (f'exec(open({str(TEMPLATE)!r}).read())\n'
     f"CLUSTER['partitions'] = list(CLUSTER['partitions'].values())\n",
     'partitions must be a dictionary, got [{'),
], ids=['syntax-error', 'import-error', 'raises', 'key-error', 'no-CLUSTER', 'partitions-list'])
def test_a_broken_cluster_file_is_a_value_error_naming_it(tmp_path, no_cluster_env, text,
                                                          message):
    site = tmp_path / 'site_broken.py'
    site.write_text(text)
    no_cluster_env.setenv('HARNESS_CLUSTERS', str(site))
    got = systems_error(tmp_path)
    assert got.startswith(f'{site}: ') and message in got, got


def test_a_missing_cluster_file_is_a_value_error(tmp_path, no_cluster_env):
    no_cluster_env.setenv('HARNESS_CLUSTERS', str(tmp_path / 'nope.py'))
    assert systems_error(tmp_path) == \
        f'HARNESS_CLUSTERS names missing file(s): {tmp_path / "nope.py"}'


@pytest.mark.parametrize('change, message', [
    (lambda c: c.update(hostnames='login1'),
     "site_x.py: hostnames must be a list of strings, got 'login1'"),
    (lambda c: c.update(access='--account=p'),
     "site_x.py: access must be a list of strings, got '--account=p'"),
    (lambda c: c.update(prepare_cmds='module purge'),
     "site_x.py: prepare_cmds must be a list of strings, got 'module purge'"),
    (lambda c: c['partitions']['ib'].update(access='--partition=x'),
     "site_x.py: partition ib: access must be a list of strings, got '--partition=x'"),
    (lambda c: c['partitions']['eth'].update(access=['--exclusive', 2]),
     "site_x.py: partition eth: access must be a list of strings, got ['--exclusive', 2]"),
    (lambda c: c['stacks']['mpich'].update(modules='mpich/4.1'),
     "site_x.py: stack mpich: modules must be a list of strings, got 'mpich/4.1'"),
    (lambda c: c['stacks']['mpich'].update(cflags='-march=znver3'),
     "site_x.py: stack mpich: cflags must be a list of strings, got '-march=znver3'"),
    (lambda c: c['stacks']['mpich'].update(cflags=['-march=znver3'], spack_spec='x ^mpich'),
     'site_x.py: stack mpich: cflags are for the CMake builds; with spack_spec give the '
     'flags or target in the spec (cflags=..., target=zen3)'),
    (lambda c: c['partitions']['ib'].update(nodes='two'),
     "site_x.py: partition ib: nodes must be an integer, got 'two'"),
    (lambda c: c['partitions']['ib'].update(nodes=True),
     'site_x.py: partition ib: nodes must be an integer, got True'),
    (lambda c: c['partitions']['eth'].update(max_jobs=2.5),
     'site_x.py: partition eth: max_jobs must be an integer, got 2.5'),
    (lambda c: c.update(max_jobs='many'),
     "site_x.py: max_jobs must be an integer, got 'many'"),
    (lambda c: c.update(partitions=[c['partitions']['ib']]),
     'site_x.py: partitions must be a dictionary, got [{'),
    (lambda c: c.update(stacks=['openmpi']),
     "site_x.py: stacks must be a dictionary, got ['openmpi']"),
    (lambda c: c['partitions'].update(ib=['--partition=ib']),
     "site_x.py: partition ib: must be a dictionary, got list ['--partition=ib']"),
    (lambda c: c['stacks'].update(mpich='mpich/4.1'),
     "site_x.py: stack mpich: must be a dictionary, got str 'mpich/4.1'"),
    (lambda c: c['partitions']['ib'].update(transport_env=['openmpi']),
     "site_x.py: partition ib: transport_env must be a dictionary, got ['openmpi']"),
    (lambda c: c['partitions']['ib']['transport_env'].update(mpich='UCX_TLS=tcp'),
     "site_x.py: partition ib: transport_env['mpich'] must be a dictionary, got 'UCX_TLS=tcp'"),
    (lambda c: c['partitions']['ib'].update(extras=['x']),
     "site_x.py: partition ib: extras must be a dictionary, got ['x']"),
    (lambda c: c['partitions']['ib'].update(processor=128),
     'site_x.py: partition ib: processor must be a dictionary, got 128'),
    (lambda c: c['stacks']['mpich'].update(env='A=1'),
     "site_x.py: stack mpich: env must be a dictionary, got 'A=1'"),
    # a name reaches ReFrame's `export K=V` line as it is: a shell variable's name only
    (lambda c: c['stacks']['mpich'].update(env={'A;touch /tmp/x;B': '1'}),
     "site_x.py: stack mpich: env: 'A;touch /tmp/x;B' is not a variable name"),
    (lambda c: c['partitions']['ib']['transport_env'].update(mpich={'UCX NET_DEVICES': 'x'}),
     "site_x.py: partition ib: transport_env['mpich']: 'UCX NET_DEVICES' is not a variable "
     "name"),
])
def test_wrong_types_in_a_cluster_are_named(change, message, no_cluster_env):
    error = cluster_error(change)
    assert message in error and '\n' not in error


def test_lists_and_integers_of_the_right_type_are_kept(no_cluster_env):
    cluster = template_cluster()
    cluster['hostnames'] = ('login1',)
    cluster['prepare_cmds'] = ['module purge']
    cluster['partitions']['ib']['nodes'] = '3'   # a number as text, as before
    system, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert system['hostnames'] == ['login1']
    ib = next(p for p in system['partitions'] if p['name'] == 'ib')
    assert ib['extras']['nodes'] == 3 and ib['prepare_cmds'] == ['module purge']
    assert ib['access'] == ['--account=FILL_IN_PROJECT', '--partition=compute',
                            '--constraint=ib', '--exclusive']
    assert next(e for e in envs if e['name'] == 'mpich')['modules'] == ['FILL_IN/mpich/4.1.2']


def test_a_stacks_cflags_reach_its_environments(no_cluster_env):
    """A login node that builds for compute nodes of another CPU: the stack's
    cflags (-march=znver3) are its environments' (the CMake builds add them, and
    src/CMakeLists.txt then leaves -march=native out); none: none."""
    cluster = template_cluster()
    cluster['stacks']['mpich']['cflags'] = ['-march=znver3', '-mtune=znver3']
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert {tuple(e['cflags']) for e in envs if e['name'] == 'mpich'} == {
        ('-march=znver3', '-mtune=znver3')}
    assert {tuple(e['cflags']) for e in envs if e['name'] == 'openmpi'} == {()}


# ---- HARNESS_MODULES_SYSTEM ----------------------------------------------------------

@pytest.mark.parametrize('value, want', [('', 'lmod'), ('   ', 'lmod'), (' nomod', 'nomod'),
                                         ('spack\n', 'spack')])
def test_modules_system_knob_is_stripped_and_empty_is_unset(no_cluster_env, value, want):
    no_cluster_env.setenv('HARNESS_MODULES_SYSTEM', value)
    system, _ = slurm_systems.cluster_config(template_cluster(), '/tmp/unused')
    assert system['modules_system'] == want


def test_modules_systems_are_reframes():
    import reframe
    schema = json.loads((Path(reframe.__file__).parent / 'schemas' / 'config.json').read_text())
    want = schema['properties']['systems']['items']['properties']['modules_system']['enum']
    assert slurm_systems.modules_systems() == tuple(want)
    assert {'lmod', 'nomod'} <= set(want)


@pytest.mark.parametrize('value', ['tmod3', 'Lmod', 'no mod'])
def test_an_unknown_modules_system_is_named(tmp_path, no_cluster_env, value):
    no_cluster_env.setenv('HARNESS_MODULES_SYSTEM', value)
    got = systems_error(tmp_path)
    assert got.startswith(f'HARNESS_MODULES_SYSTEM={value!r}: not a modules system ReFrame '
                          f'knows; known: ')
    assert 'lmod' in got and 'nomod' in got


def test_a_modules_system_with_spaces_works_in_reframe(tmp_path):
    proc = reframe(tmp_path, '--system', 'example-hpc', '--show-config',
                   'systems/0/modules_system',
                   **{**template_env(), 'HARNESS_MODULES_SYSTEM': ' nomod '})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 'nomod'


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
    # clean mode (the default): its modules are this machine's stacks, whose
    # system folder the local system found; Hydra's user file is kept out
    files = dict(by_name['openmpi']['env_vars'])['OMPI_MCA_mca_base_param_files']
    assert files.startswith('/') and files.endswith('/openmpi-mca-params.conf'), files
    assert ['HYDRA_CONFIG_FILE', '/dev/null'] in by_name['mpich']['env_vars']


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


@pytest.mark.parametrize('values, message', [
    ({'NODES': 'abc'}, "NODES must be a whole number, got 'abc'"),
    ({'NODES': ''}, 'NODES missing or empty'),
    ({'NODES': '0'}, 'NODES must be at least 1, got 0'),
    ({'CPUS_PER_NODE': 'four'}, "CPUS_PER_NODE must be a whole number, got 'four'"),
    ({'SLOW_RATE_BITS': '1e9'}, "SLOW_RATE_BITS must be a whole number, got '1e9'"),
])
def test_a_bad_test_cluster_record_names_file_and_key(tmp_path, no_cluster_env, values,
                                                      message):
    write_cluster_record(tmp_path, **values)
    no_cluster_env.setenv('HARNESS_TEST_CLUSTER', str(tmp_path))
    got = systems_error(tmp_path)
    assert got == f'HARNESS_TEST_CLUSTER={tmp_path}: {tmp_path / "cluster.env"}: {message}'


def test_a_test_cluster_record_without_cpus_per_node_is_named(tmp_path, no_cluster_env):
    (tmp_path / 'cluster.env').write_text('NODES=2\nSHARED_CORES=0\n')
    no_cluster_env.setenv('HARNESS_TEST_CLUSTER', str(tmp_path))
    assert systems_error(tmp_path) == \
        f'HARNESS_TEST_CLUSTER={tmp_path}: {tmp_path / "cluster.env"}: ' \
        f'CPUS_PER_NODE missing or empty'


# ---- HARNESS_MPI_ENV=clean on a centre's cluster: the user's own MPI files ------

OMPI_FILES = {'OMPI_MCA_mca_base_param_files': 'openmpi-mca-params.conf',
              'PRTE_MCA_mca_base_param_files': 'prte-mca-params.conf',
              'PMIX_MCA_mca_base_param_files': 'pmix-mca-params.conf'}


def cluster_envs(cluster: dict, **kwargs) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(stack, target system) -> each variable's values, in order."""
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py',
                                           **kwargs)
    out: dict[tuple[str, str], dict[str, list[str]]] = {}
    for env in envs:
        values = out.setdefault((env['name'], env['target_systems'][0]), {})
        for key, value in env['env_vars']:
            values.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize('bundled', [(), ('prte-mca-params.conf', 'pmix-mca-params.conf')],
                         ids=['openmpi-4', 'bundled-prrte-pmix'])
def test_clean_mode_keeps_the_users_files_out_of_a_clusters_runs(tmp_path, no_cluster_env,
                                                                bundled):
    etc = tmp_path / 'etc'
    etc.mkdir()
    for name in bundled:
        (etc / name).write_text('# the site\'s\n')
    cluster = template_cluster()
    cluster['stacks']['openmpi']['sysconfdir'] = str(etc)
    envs = cluster_envs(cluster)      # clean: the default
    want = {var: [str(etc / name)] for var, name in OMPI_FILES.items()
            if var == 'OMPI_MCA_mca_base_param_files' or name in bundled}
    for target in ('example-hpc', 'example-hpc:ib', 'example-hpc:eth'):
        got = {k: v for k, v in envs[('openmpi', target)].items() if k in OMPI_FILES}
        assert got == want, target
        # Hydra (MPICH's, MVAPICH2's own mpiexec: launch 'own') reads no user file
        for stack in ('mpich', 'mvapich2'):
            assert envs[(stack, target)]['HYDRA_CONFIG_FILE'] == ['/dev/null'], (stack, target)
    # the partition's pinned transport is still there
    assert envs[('openmpi', 'example-hpc:ib')]['OMPI_MCA_pml'] == ['ucx']


def test_srun_stacks_get_their_pmi_and_core_binding_and_own_launchers_neither(no_cluster_env):
    cluster = template_cluster()
    del cluster['stacks']['mpich']['pmi']     # the registry's default
    envs = cluster_envs(cluster, mpi_env='keep')
    pmi = {'openmpi': 'pmix', 'mpich': slurm_systems.SRUN_PMI['mpich']}
    for target in ('example-hpc', 'example-hpc:ib', 'example-hpc:eth'):
        for stack, want in pmi.items():
            assert envs[(stack, target)]['SLURM_MPI_TYPE'] == [want], (stack, target)
            assert envs[(stack, target)]['SLURM_CPU_BIND'] == ['cores'], (stack, target)
        assert not {'SLURM_MPI_TYPE', 'SLURM_CPU_BIND'} & set(envs[('mvapich2', target)])


def test_a_stack_of_another_name_gets_its_familys_pmi(no_cluster_env):
    # a stack 'ompi5' of family openmpi without 'pmi' got no SLURM_MPI_TYPE (the
    # default was looked up by the stack's name): srun started every rank as a
    # singleton of its own under Slurm's MpiDefault
    cluster = template_cluster()
    ompi5 = {**cluster['stacks'].pop('openmpi'), 'family': 'openmpi'}
    del ompi5['pmi']
    cluster['stacks']['ompi5'] = ompi5
    for part in cluster['partitions'].values():
        part['transport_env']['ompi5'] = part['transport_env'].pop('openmpi')
    envs = cluster_envs(cluster, mpi_env='keep')
    for target in ('example-hpc', 'example-hpc:ib', 'example-hpc:eth'):
        assert envs[('ompi5', target)]['SLURM_MPI_TYPE'] == [
            slurm_systems.SRUN_PMI['openmpi']], target


@pytest.mark.parametrize('given, want', [('$S45_SCRATCH/harness', '/scratch/me/harness'),
                                         ('${S45_SCRATCH}/h', '/scratch/me/h'),
                                         ('~/harness', '/home/me/harness'),
                                         ('/abs/harness', '/abs/harness')])
def test_a_clusters_prefix_is_expanded_for_the_builds_as_for_the_stage(given, want,
                                                                       no_cluster_env,
                                                                       monkeypatch):
    # ReFrame expanded '$SCRATCH/harness' for the stage and output folders only:
    # KernelBuild's build tree (the system's prefix) went to a literal folder
    # '$SCRATCH' inside its stage, where the runs did not find the kernels
    monkeypatch.setenv('S45_SCRATCH', '/scratch/me')
    monkeypatch.setenv('HOME', '/home/me')
    cluster = template_cluster()
    cluster['prefix'] = given
    system, _ = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert (system['prefix'], system['stagedir'], system['outputdir']) == (
        want, f'{want}/stage', f'{want}/output')


def test_a_partitions_time_limit_wins_over_the_clusters(no_cluster_env):
    cluster = template_cluster()
    cluster['time_limit'] = '1h'
    cluster['partitions']['ib']['time_limit'] = '5m'
    system, _ = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert {p['name']: p['time_limit'] for p in system['partitions']} == {'ib': '5m',
                                                                          'eth': '1h'}


def test_a_partitions_own_extras_cannot_change_its_node_count_or_transport(no_cluster_env):
    cluster = template_cluster()
    cluster['partitions']['ib']['nodes'] = 4
    cluster['partitions']['ib']['extras'] = {'nodes': 1, 'transport': 'eth', 'site': 'x'}
    system, _ = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    assert system['partitions'][0]['extras'] == {'nodes': 4, 'transport': 'ib', 'site': 'x'}


def test_keep_mode_adds_no_file_variables_to_a_cluster(no_cluster_env):
    cluster = template_cluster()
    envs = cluster_envs(cluster, mpi_env='keep')
    names = {'HYDRA_CONFIG_FILE', *OMPI_FILES}
    assert all(not names & set(values) for values in envs.values()), envs


def test_a_stacks_env_and_a_partitions_pin_win_over_the_clean_files(no_cluster_env):
    cluster = template_cluster()
    cluster['stacks']['openmpi']['env'] = {'OMPI_MCA_mca_base_param_files': '/site/ompi.conf'}
    cluster['partitions']['ib']['transport_env']['mpich']['HYDRA_CONFIG_FILE'] = '/site/h.conf'
    envs = cluster_envs(cluster)
    for target in ('example-hpc', 'example-hpc:ib', 'example-hpc:eth'):
        assert envs[('openmpi', target)]['OMPI_MCA_mca_base_param_files'] == \
            ['/site/ompi.conf']
    assert envs[('mpich', 'example-hpc:ib')]['HYDRA_CONFIG_FILE'] == ['/site/h.conf']
    assert envs[('mpich', 'example-hpc:eth')]['HYDRA_CONFIG_FILE'] == ['/dev/null']
    assert envs[('mpich', 'example-hpc')]['HYDRA_CONFIG_FILE'] == ['/dev/null']


def test_an_open_mpi_without_sysconfdir_is_noted_once_and_reads_the_users_files(
        tmp_path, notes_env, capsys):
    site = tmp_path / 'site_nosys.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    "CLUSTER['stacks']['openmpi'].pop('sysconfdir', None)\n")
    notes_env.setenv('HARNESS_CLUSTERS', str(site))
    _, envs = slurm_systems.slurm_systems(str(tmp_path / 'var'), [], [])
    notes = [ln for ln in capsys.readouterr().err.splitlines() if 'sysconfdir' in ln]
    assert notes == [
        f"[harness config] system example-hpc ({site}): stack openmpi (Open MPI) names no "
        f"sysconfdir, so its runs in HARNESS_MPI_ENV=clean still read the user's own "
        f"~/.openmpi/mca-params.conf, ~/.prte/mca-params.conf, ~/.pmix/mca-params.conf "
        f"(recorded in user_config_files); add 'sysconfdir': ... to it (`ompi_info --path "
        f"sysconfdir` with its modules loaded), or `./harness site` writes it"]
    ompi = [e for e in envs if e['name'] == 'openmpi' and
            e['target_systems'][0].startswith('example-hpc')]
    assert ompi and not any(k in OMPI_FILES for e in ompi for k, _ in e['env_vars'])
    # keep mode: nothing to say
    slurm_systems.slurm_systems(str(tmp_path / 'var'), [], [], mpi_env='keep')
    assert 'sysconfdir' not in capsys.readouterr().err


@pytest.mark.parametrize('change, message', [
    (lambda c: c['stacks']['openmpi'].update(sysconfdir=5),
     'site_x.py: stack openmpi: sysconfdir must be an absolute path (a string), got 5'),
    (lambda c: c['stacks']['openmpi'].update(sysconfdir='etc/openmpi'),
     "site_x.py: stack openmpi: sysconfdir must be an absolute path (a string), "
     "got 'etc/openmpi'"),
    (lambda c: c['stacks']['openmpi'].update(sysconfdir=['/etc/openmpi']),
     "site_x.py: stack openmpi: sysconfdir must be an absolute path (a string), "
     "got ['/etc/openmpi']"),
    (lambda c: c['stacks']['mpich'].update(sysconfdir='/etc/mpich'),
     "site_x.py: stack mpich: sysconfdir is only for a stack of family openmpi (what its "
     "sysconfdir_tool prints); family 'mpich' has none"),
])
def test_a_bad_sysconfdir_is_named(change, message, no_cluster_env):
    assert cluster_error(change) == message


@pytest.mark.parametrize('change, family', [
    (lambda c: c['stacks']['openmpi'].update(family='intelmpi'), 'intelmpi'),
    (lambda c: (c['stacks']['openmpi'].pop('sysconfdir'),
                c['stacks']['openmpi'].update(family='OpenMPI')), 'OpenMPI'),
    (lambda c: c['stacks'].update(ompi5=c['stacks'].pop('mvapich2')), 'ompi5'),
])
def test_a_family_not_in_the_registry_is_named(change, family, no_cluster_env):
    # accepted, an unknown family checked no library and kept the user's MPI files
    stack = 'ompi5' if family == 'ompi5' else 'openmpi'
    assert cluster_error(change) == (
        f"site_x.py: stack {stack}: family '{family}' is not one of openmpi, mpich, "
        f"mvapich2 (a stack of another name says its family)")


def clean_stream_dry_run(tmp_path: Path, site: Path, partition: str) -> Path:
    """A clean-mode dry run of StreamCheck's mpi_128x1 on the template's
    `partition`, with the cluster file `site`: the partition's stage folder."""
    var = tmp_path / 'var'
    proc = reframe(var, '-c', str(REPO / 'checks'), '--system', f'example-hpc:{partition}',
                   '-n', 'StreamCheck%layout=mpi_128x1', '--dry-run',
                   **{**template_env(), 'HARNESS_CLUSTERS': str(site),
                      'HARNESS_MPI_ENV': 'clean'})
    assert proc.returncode == 0, proc.stdout[-5000:]
    return var / 'example-hpc' / 'stage' / 'example-hpc' / partition


def test_a_dry_run_exports_the_clean_files_of_a_clusters_stacks(tmp_path):
    etc = tmp_path / 'ompi-etc'
    etc.mkdir()
    (etc / 'pmix-mca-params.conf').write_text('# bundled PMIx\n')
    site = tmp_path / 'site_clean.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    f"CLUSTER['stacks']['openmpi']['sysconfdir'] = {str(etc)!r}\n")
    stage = clean_stream_dry_run(tmp_path, site, 'ib')
    ompi = next((stage / 'openmpi').glob('StreamCheck_*/rfm_job.sh')).read_text()
    assert f'export OMPI_MCA_mca_base_param_files={etc}/openmpi-mca-params.conf\n' in ompi
    assert f'export PMIX_MCA_mca_base_param_files={etc}/pmix-mca-params.conf\n' in ompi
    assert 'PRTE_MCA_mca_base_param_files' not in ompi
    mv2 = next((stage / 'mvapich2').glob('StreamCheck_*/rfm_job.sh')).read_text()
    assert 'export HYDRA_CONFIG_FILE=/dev/null\n' in mv2
    # keep mode: the environments hold none of them
    proc = reframe(tmp_path / 'var', '--system', 'example-hpc:ib', '--show-config', 'environments',
                   **{**template_env(), 'HARNESS_CLUSTERS': str(site), 'HARNESS_MPI_ENV': 'keep'})
    assert proc.returncode == 0, proc.stderr
    names = {k for e in json.loads(proc.stdout) for k, _ in e.get('env_vars', [])}
    assert not names & {'HYDRA_CONFIG_FILE', *OMPI_FILES}


# ---- what the job script makes of a stack's values -------------------------------

def bash_exports(env_vars: list[list[str]], names: tuple[str, ...]) -> dict[str, str]:
    """What bash makes of ReFrame's ``export K=V`` lines of `env_vars`
    (ReFrame writes them verbatim): the values of `names`, with PATH
    /usr/bin:/bin and HOME '/home/u b' before them."""
    lines = [f'export {k}={v}' for k, v in env_vars]
    shown = [f'printf "%s\\0" "${name}"' for name in names]
    proc = subprocess.run(['/bin/bash', '-c', '\n'.join([*lines, *shown])],
                          env={'PATH': '/usr/bin:/bin', 'HOME': '/home/u b'},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return dict(zip(names, proc.stdout.split('\0')[:-1]))


SPACED_MPI = '/opt/my mpi/mvapich2 2.3.7'
SPACED_OMPI = '/opt/my mpi/openmpi 4.1.6/etc'


def test_a_stacks_values_reach_the_job_script_as_written(no_cluster_env):
    cluster = template_cluster()
    cluster['stacks']['mvapich2']['env'] = {
        'PATH': f'{SPACED_MPI}/bin:$PATH', 'MV2_ENABLE_AFFINITY': '1',
        'SITE_TEXT': 'it\'s "quoted" \\ and $ alone',
        'SITE_BRACES': '${HOME}/a b', 'SITE_CMD': '$(echo a b)/c d',
        'SITE_PLACES': '{0,1,2,3},{4,5,6,7}'}       # bash's brace expansion made it 3,7
    cluster['stacks']['openmpi']['sysconfdir'] = SPACED_OMPI
    cluster['stacks']['openmpi']['env'] = {'LD_LIBRARY_PATH': '/opt/x/lib:$LD_LIBRARY_PATH'}
    cluster['partitions']['ib']['transport_env']['openmpi']['OMPI_MCA_pml_ucx_tls'] = 'rc ud'
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py',
                                           mpi_env='clean')
    for env in envs:
        system = env['target_systems'][0]
        if env['name'] == 'mvapich2':
            got = bash_exports(env['env_vars'], ('PATH', 'SITE_TEXT', 'SITE_BRACES',
                                                 'SITE_CMD', 'MV2_ENABLE_AFFINITY',
                                                 'SITE_PLACES'))
            assert got == {'PATH': f'{SPACED_MPI}/bin:/usr/bin:/bin',
                           'SITE_TEXT': 'it\'s "quoted" \\ and $ alone',
                           'SITE_BRACES': '/home/u b/a b', 'SITE_CMD': 'a b/c d',
                           'MV2_ENABLE_AFFINITY': '1',
                           'SITE_PLACES': '{0,1,2,3},{4,5,6,7}'}, system
        if env['name'] == 'openmpi':
            got = bash_exports(env['env_vars'], ('OMPI_MCA_mca_base_param_files',))
            assert got == {'OMPI_MCA_mca_base_param_files':
                           f'{SPACED_OMPI}/openmpi-mca-params.conf'}, system
            # what needed no quoting is written as it was
            assert ['LD_LIBRARY_PATH', '/opt/x/lib:$LD_LIBRARY_PATH'] in env['env_vars']
        # the pins as given, and as the job script assigns them (RunBase compares
        # the two, and records the value without the quotes)
        values = dict(env['env_vars'])
        assert all(assigned_value(values[k]) == v
                   for k, v in env['extras']['pinned'].items()), system
    ib = next(e for e in envs if e['name'] == 'openmpi'
              and e['target_systems'] == ['example-hpc:ib'])
    assert bash_exports(ib['env_vars'], ('OMPI_MCA_pml_ucx_tls', 'UCX_NET_DEVICES')) == {
        'OMPI_MCA_pml_ucx_tls': 'rc ud', 'UCX_NET_DEVICES': 'mlx5_0:1'}
    assert ['UCX_NET_DEVICES', 'mlx5_0:1'] in ib['env_vars']
    assert ib['extras']['pinned']['OMPI_MCA_pml_ucx_tls'] == 'rc ud'
    assert assigned_value(dict(ib['env_vars'])['OMPI_MCA_pml_ucx_tls']) == 'rc ud'


@pytest.mark.parametrize('value, want', [
    ('"/opt/my mpi/bin":$PATH', '/opt/my mpi/bin:/usr/bin:/bin'),
    ("'/opt/a b'", '/opt/a b'),
    ('/opt/my\\ mpi', '/opt/my mpi'),
])
def test_a_value_the_user_quoted_already_is_written_as_it_is(no_cluster_env, value, want):
    """Quoting that worked when values reached the job script unquoted still
    does: the harness does not quote it a second time."""
    cluster = template_cluster()
    cluster['stacks']['mvapich2']['env'] = {'PATH' if '$PATH' in value else 'SITE': value}
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    env = next(e for e in envs if e['name'] == 'mvapich2')
    name = 'PATH' if '$PATH' in value else 'SITE'
    assert [name, value] in env['env_vars']
    assert bash_exports(env['env_vars'], (name,)) == {name: want}


def test_a_dry_run_exports_spaced_paths_that_bash_reads_back(tmp_path):
    site = tmp_path / 'site_space.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    f"CLUSTER['stacks']['mvapich2']['env'] = {{'PATH': "
                    f"{SPACED_MPI + '/bin:$PATH'!r}}}\n"
                    f"CLUSTER['stacks']['openmpi']['sysconfdir'] = {SPACED_OMPI!r}\n")
    stage = clean_stream_dry_run(tmp_path, site, 'eth')
    for stack, name, want in (
            ('mvapich2', 'PATH', f'{SPACED_MPI}/bin:/usr/bin:/bin'),
            ('openmpi', 'OMPI_MCA_mca_base_param_files',
             f'{SPACED_OMPI}/openmpi-mca-params.conf')):
        script = next((stage / stack).glob('StreamCheck_*/rfm_job.sh')).read_text()
        line = next(ln for ln in script.splitlines() if ln.startswith(f'export {name}='))
        assert bash_exports([line.removeprefix('export ').split('=', 1)], (name,)) == \
            {name: want}, line


# ---- notes where a record would claim a link it does not use --------------------

def config_notes(cluster: dict, capsys) -> list[str]:
    slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    return capsys.readouterr().err.splitlines()


def test_the_template_pins_every_stack_and_says_nothing(notes_env, capsys):
    cluster = template_cluster()
    for part in cluster['partitions'].values():
        assert set(part['transport_env']) == set(cluster['stacks'])
    assert config_notes(cluster, capsys) == []


def test_a_stack_left_unpinned_among_pinned_ones_is_noted_once(notes_env, capsys):
    cluster = template_cluster()
    cluster['partitions']['eth']['transport_env'].pop('mvapich2')
    cluster['partitions']['eth']['transport_env']['mpich'] = {}
    assert config_notes(cluster, capsys) == [
        "[harness config] system example-hpc (site_x.py): partition eth pins the link of "
        "openmpi (transport_env) but not of mpich, mvapich2: those runs use whatever link "
        "their stack picks, yet their records name this partition's; add transport_env "
        "entries for mpich, mvapich2 (config/cluster_template.py)"]
    # a note, not a refusal; and none under HARNESS_QUIET=1
    notes_env.setenv('HARNESS_QUIET', '1')
    assert config_notes(cluster, capsys) == []


def test_one_node_pinned_to_a_link_between_nodes_is_noted(notes_env, capsys):
    cluster = template_cluster()
    cluster['partitions']['ib']['nodes'] = 1
    assert config_notes(cluster, capsys) == [
        "[harness config] system example-hpc (site_x.py): partition ib has 'nodes': 1 but "
        "pins a link between nodes for openmpi, mpich, mvapich2 (transport_env): on one "
        "node their point-to-point runs go through shared memory, yet their records name "
        "this link; give it 'nodes': 2 or more"]
    # one node pinned to shared memory (the stacks' own pins there) is what it says
    cluster['partitions']['ib']['transport_env'] = {
        'openmpi': {'OMPI_MCA_pml': 'ob1', 'OMPI_MCA_btl': 'self,vader'},
        'mpich': {'UCX_TLS': 'sm,self'}}
    assert config_notes(cluster, capsys) == []


# ---- a stack's Spack spec ----------------------------------------------------------

def test_a_stack_may_name_the_spack_spec_of_its_kernels(no_cluster_env):
    cluster = template_cluster()
    spec = 'hybrid-kernels@develop build_type=Release +openmp ^mvapich2@2.3.7'
    cluster['stacks']['mvapich2']['spack_spec'] = spec
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_x.py')
    mv2 = [e for e in envs if e['name'] == 'mvapich2']
    assert len(mv2) == 3 and all(e['extras']['spack_spec'] == spec for e in mv2)
    assert not any('spack_spec' in e['extras'] for e in envs if e['name'] != 'mvapich2')


@pytest.mark.parametrize('value', [5, '', '  ', ['hybrid-kernels ^mpich']])
def test_a_bad_spack_spec_is_named(value, no_cluster_env):
    assert cluster_error(lambda c: c['stacks']['mpich'].update(spack_spec=value)) == (
        f'site_x.py: stack mpich: spack_spec must be a Spack spec (a string that is not '
        f'empty), got {value!r}')


def test_a_one_node_test_cluster_notes_no_link_for_the_user_to_fix(tmp_path, notes_env,
                                                                    capsys):
    """The test cluster's spec is the harness's own (tests/slurm/cluster.sh start
    --nodes 1 is allowed): no advice to change it on every configuration load."""
    (tmp_path / 'cluster.env').write_text('NODES=1\n')
    notes_env.setenv('HARNESS_TEST_CLUSTER', str(tmp_path))
    slurm_systems.test_cluster('/tmp/unused', mpi_env='keep')
    assert "has 'nodes': 1" not in capsys.readouterr().err


def test_a_quoted_pin_is_the_value_its_run_checks_and_records(tmp_path):
    """A pin with a space reaches the job script quoted; the run compares and
    records the value the script assigns ('rc ud'), not the quoted text."""
    site = tmp_path / 'site_pin.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    "CLUSTER['partitions']['ib']['transport_env']['openmpi']"
                    "['OMPI_MCA_pml_ucx_tls'] = 'rc ud'\n")
    stage = clean_stream_dry_run(tmp_path, site, 'ib')
    script = next((stage / 'openmpi').glob('StreamCheck_*/rfm_job.sh')).read_text()
    assert 'export OMPI_MCA_pml_ucx_tls="rc ud"\n' in script


def test_the_test_cluster_and_the_local_partitions_share_one_processor(tmp_path, monkeypatch,
                                                                       no_cluster_env):
    # One function reads /sys for both (harnesscore.host.host_processor): on
    # 2 cores of 2 threads each, 2 cores of 2 CPUs each, 1 socket.
    from harnesscore import host
    from test_plan import fake_host
    root = fake_host(tmp_path, {0: (0, 0, 0), 1: (0, 1, 0), 2: (0, 0, 0), 3: (0, 1, 0)})
    monkeypatch.setattr(host, 'SYS_ROOT', root, raising=False)
    monkeypatch.setattr(os, 'sched_getaffinity', lambda _pid: {0, 1, 2, 3})
    spec = slurm_systems.test_cluster_spec({'SHARED_CORES': '1'})
    proc = spec['partitions']['fast']['processor']
    assert (proc['num_cpus'], proc['num_cpus_per_core'], proc['num_sockets']) == (4, 2, 1)
    assert proc == host.host_processor()


def test_the_local_partitions_declare_this_machines_processor(tmp_path):
    # ReFrame never detected it (their launcher is mpirun, not 'local'): the
    # layouts counted hardware threads as cores, 1 socket and 1 NUMA domain.
    proc = reframe(tmp_path, '--show-config', 'systems/0/partitions')
    assert proc.returncode == 0, proc.stderr
    parts = json.loads(proc.stdout)
    assert [p['name'] for p in parts if 'processor' not in p] == []
    from harnesscore.host import host_processor
    for part in parts:
        assert part['processor'] == host_processor(), part['name']


def _on_one_cpu(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason='needs two CPUs')
def test_a_local_session_under_a_narrower_affinity_stops_saying_why(tmp_path):
    # taskset -c 1 reframe ... -r passed with the kernel bound to CPU 0: hwloc
    # (both launchers) binds within the cgroup's CPUs, not the affinity mask.
    cpu = max(os.sched_getaffinity(0))
    args = [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG)]
    env = mpi_env(HARNESS_VAR_DIR=str(tmp_path))
    for system in ([], ['--system', 'local:shm'], ['--system=declared']):
        proc = subprocess.run([*args, *system, '--show-config', 'systems/0/name'],
                              capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
                              preexec_fn=_on_one_cpu(cpu))
        assert proc.returncode == 2, (system, proc.stdout, proc.stderr)
        from harnesscore.host import cpu_list_text, launcher_cpus
        lines = [ln for ln in proc.stderr.splitlines() if 'error' in ln]
        assert lines == [f'harness config: error: this process may only run on CPUs {cpu} '
                         f'(its affinity mask: taskset, numactl), but the MPI launchers '
                         f'bind ranks to any of CPUs {cpu_list_text(launcher_cpus())} '
                         f'(online, within its cgroup\'s cpuset): the runs would leave the '
                         f'CPUs the harness plans and watches; run without taskset/numactl, '
                         f'or inside a cgroup or Slurm allocation of the CPUs to use'], \
            proc.stderr
        assert 'Traceback' not in proc.stderr
    # A Slurm system's runs start in its allocation: nothing to stop.
    proc = subprocess.run([*args, '--system', 'local-slurm', '--show-config', 'systems/0/name'],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
                          preexec_fn=_on_one_cpu(cpu))
    assert proc.returncode == 0 and json.loads(proc.stdout) == 'local-slurm', proc.stderr
