"""A centre's own ReFrame checks run on the harness's configuration.

``tests/site_checks/mpi_where.py`` is written as hpctestlib writes its tests
(a compile-only fixture, a run-only test with ``num_tasks = 2``, no harness
imports).  Run on every local partition and stack, each of its runs must have
been launched by that stack's own launcher (the library its ranks report),
with 2 ranks on cores of their own.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BIN, CONFIG, REPO, fake_prefix, last_attempts, mpi_env, needs, perflog, skip_if
from harnesslib.launch import LIBRARY_PREFIX
from test_multinode import (
    client_env,
    cluster,  # noqa: F401  (the 2-node test cluster fixture)
)

pytestmark = pytest.mark.integration

SITE_CHECK = REPO / 'tests' / 'site_checks' / 'mpi_where.py'
LOAD = ('import json, runpy, sys; c = runpy.run_path(sys.argv[1])["site_configuration"]; '
        'print(json.dumps(c))')


def run_site_check(var: Path, *args: str, env: dict[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    environ = mpi_env(**{**(env or {}), 'HARNESS_VAR_DIR': str(var)})
    # One retry, as a centre runs a third party's check: it has no watchdog for
    # MPICH 4.0's rare hang in MPI_Finalize over TCP (every rank's line printed,
    # then the job runs into its time limit; seen once here in many sessions).
    # A wrong stack or placement fails both tries.
    cmd = [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), '-c', str(SITE_CHECK),
           '--max-retries', '1', '-r', *args]
    return subprocess.run(cmd, cwd=REPO, env=environ, capture_output=True, text=True,
                          timeout=900)


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-8000:]}\n--- stderr ---\n{proc.stderr[-3000:]}'


def placement_problems(out: str, stack: str, ranks: int = 2) -> list[str]:
    """What is wrong with mpi_where's output for a run of `ranks` ranks on
    `stack` (empty: the right stack, every rank on cores of its own)."""
    rows = [ln.split(' library ', 1) for ln in out.splitlines() if ln.startswith('rank ')]
    problems = []
    if len(rows) != ranks:
        problems.append(f'{len(rows)} rank line(s), expected {ranks}')
    seen: dict[tuple[str, int], int] = {}
    for where, lib in rows:
        words = where.split()
        rank, size, host, cpu = int(words[1]), int(words[3]), words[5], int(words[7])
        allowed = [int(c) for c in words[9].split(',')] if words[9] != '?' else []
        if size != ranks:
            problems.append(f'rank {rank} is one of {size}, not of {ranks}')
        if not lib.startswith(LIBRARY_PREFIX[stack]):
            problems.append(f'rank {rank} runs on "{lib}", not {stack}')
        if not allowed or cpu not in allowed:
            problems.append(f'rank {rank} on cpu {cpu} outside its cores {allowed}')
        for core in allowed:
            if (host, core) in seen:
                problems.append(f'ranks {seen[(host, core)]} and {rank} share core {core}')
            seen[(host, core)] = rank
        if len(allowed) != 1:
            problems.append(f'rank {rank} is not bound to one core: {allowed}')
    return problems


def mpi_where_runs(output: Path, parts: tuple[str, ...], stacks: list[str]
                   ) -> Iterator[tuple[str, str, Path]]:
    """(partition, stack, output folder) of mpi_where's run on each partition and
    stack under `output`: the last attempt (run_site_check retries a failed run once)."""
    for part, stack in itertools.product(parts, stacks):
        (out,) = last_attempts(output / part / stack, 'mpi_where_run*')
        yield part, stack, out


def local_configuration(tmp_path: Path) -> dict:
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, '-c', LOAD, str(CONFIG)], env=environ,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_partitions_name_reframes_launchers_and_each_environment_its_stack(tmp_path, stacks):
    from reframe.core.backends import getlauncher

    conf = local_configuration(tmp_path)
    local = next(s for s in conf['systems'] if s['name'] == 'local')
    for part in local['partitions']:
        assert part['launcher'] in ('mpirun', 'mpiexec', 'srun'), part
        getlauncher(part['launcher'])   # registered with ReFrame
    for env in conf['environments']:
        if not set(env['target_systems']) & {'local', 'local:tcp'}:
            continue
        env_vars = dict(map(tuple, env['env_vars']))
        first = env_vars['PATH'].split(':')[0]
        assert env_vars['PATH'].endswith(':$PATH')
        # The plain names are this stack's own tools, whatever Debian's are.
        for name in ('mpirun', 'mpiexec'):
            assert os.path.realpath(os.path.join(first, name)) == \
                os.path.realpath(env['extras']['launcher']), (env['name'], name)
        assert os.path.realpath(os.path.join(first, 'mpicc')) == os.path.realpath(env['cc'])


def test_a_third_party_check_runs_on_every_partition_and_stack(tmp_path, stacks):
    proc = run_site_check(tmp_path)
    assert proc.returncode == 0, explain(proc)
    for part, stack, out in mpi_where_runs(tmp_path / 'output' / 'local', ('shm', 'tcp'),
                                           stacks):
        assert (out / 'rfm_job.sh').is_file(), f'no {out}/rfm_job.sh\n' + explain(proc)
        script = (out / 'rfm_job.sh').read_text()
        # ReFrame's own launcher, made the stack's by its environment.
        assert '\nmpirun -np 2 ' in script, script
        problems = placement_problems((out / 'rfm_job.out').read_text(), stack)
        assert not problems, (part, stack, problems)


def test_a_stack_whose_launcher_is_another_stacks_is_caught(tmp_path):
    """A stack whose prefix holds MPICH's wrapper and Open MPI's mpirun: the
    configuration refuses it before any check, a third party's too, runs
    (started, MPICH's program would be two lone ranks under Open MPI's mpirun)."""
    needs('openmpi', 'mpich')
    prefix = fake_prefix(tmp_path, 'wrong-mpich', 'mpicc.mpich', 'mpirun.openmpi', 'mpiexec')
    proc = run_site_check(tmp_path / 'var', '--system', 'local:shm',
                          env={'HARNESS_STACKS': 'mpich', 'HARNESS_MPICH_PREFIX': str(prefix)})
    assert proc.returncode != 0, explain(proc)
    said = proc.stdout + proc.stderr
    assert "is not MPICH's launcher" in said and 'the prefix holds another MPI stack' in said, \
        explain(proc)
    assert not (tmp_path / 'var' / 'stage' / 'local').exists(), 'a check ran'


def test_a_third_party_check_runs_through_slurm_with_each_stack(slurm_cluster, stacks,
                                                                 tmp_path):
    """The same check on the Slurm test system: ReFrame's srun, the stack's
    PMI from its environment, 2 ranks on a core each."""
    proc = run_site_check(tmp_path, '--system', 'local-slurm',
                          env={'SLURM_CONF': slurm_cluster['SLURM_CONF']})
    assert proc.returncode == 0, explain(proc)
    pmi = {'openmpi': 'pmix', 'mpich': 'pmi2'}
    for part, stack, out in mpi_where_runs(tmp_path / 'output' / 'local-slurm',
                                           ('shm', 'tcp'), stacks):
        script = (out / 'rfm_job.sh').read_text()
        assert '\nsrun ' in script and f'export SLURM_MPI_TYPE={pmi[stack]}\n' in script
        assert 'export SLURM_CPU_BIND=cores\n' in script
        problems = placement_problems((out / 'rfm_job.out').read_text(), stack)
        assert not problems, (part, stack, problems)


def hpctestlib_missing(stacks: list[str]) -> str:
    """Why hpctestlib's osu_run cannot run here ('' if it can)."""
    root = os.environ.get('HARNESS_HPCTESTLIB', '').strip()
    if not root or not os.path.isfile(
            os.path.join(root, 'hpctestlib', 'microbenchmarks', 'mpi', 'osu.py')):
        return ('set HARNESS_HPCTESTLIB to a checkout of ReFrame holding hpctestlib/ '
                '(not in the ReFrame wheel)')
    template = os.environ.get('HARNESS_OSU_PREFIX', '').strip()
    missing = [s for s in stacks if not template or not os.path.isfile(os.path.join(
        template.replace('{stack}', s), 'libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw'))]
    if missing:
        return (f'no OSU (6.0 or later) under HARNESS_OSU_PREFIX for {", ".join(missing)}')
    return ''


def test_hpctestlib_osu_run_passes_on_every_partition_and_stack(tmp_path, stacks):
    skip_if(hpctestlib_missing(stacks))
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path),
                      PYTHONPATH=os.environ['HARNESS_HPCTESTLIB'])
    proc = subprocess.run(
        [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), '-c',
         str(REPO / 'tests' / 'site_checks' / 'site_osu.py'), '-r',
         '-S', 'num_iters=20', '-S', 'num_warmup_iters=2'],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, explain(proc)
    benchmarks = ('osu_alltoall', 'osu_allreduce', 'osu_bw', 'osu_latency')
    for part in ('shm', 'tcp'):
        records = perflog(tmp_path / 'perflogs' / 'local' / part / 'site_osu.log')
        for stack in stacks:
            script = next(p for p in (tmp_path / 'output' / 'local' / part / stack).glob(
                'site_osu_*/rfm_job.sh') if 'osu_bw' in p.read_text()).read_text()
            assert '\nmpirun -np 2 ' in script, script
            # Every benchmark's perflog line names the stack that ran it.
            for bench in benchmarks:
                assert any(r['environ'] == stack and bench in r['name'] and
                           r['result'] == 'pass' for r in records), (part, stack, bench)


def test_a_third_party_check_runs_across_the_test_clusters_nodes(cluster, stacks,  # noqa: F811
                                                                  tmp_path):
    """The same check on the multi-node test cluster (stacks as Lmod modules,
    ReFrame's srun), one rank per node: each rank on its own node, with its
    stack from the module."""
    proc = run_site_check(tmp_path, '--system', 'test-cluster',
                          '-S', 'mpi_where_run.num_tasks_per_node=1',
                          env=client_env(cluster))
    assert proc.returncode == 0, explain(proc)
    for part, stack, out in mpi_where_runs(
            tmp_path / 'test-cluster' / 'output' / 'test-cluster', ('fast', 'slow'), stacks):
        script = (out / 'rfm_job.sh').read_text()
        assert f'module load {stack}' in script and '\nsrun ' in script, script
        text = (out / 'rfm_job.out').read_text()
        assert not placement_problems(text, stack), (part, stack, text)
        hosts = {ln.split()[5] for ln in text.splitlines() if ln.startswith('rank ')}
        assert len(hosts) == 2, (part, stack, text)
