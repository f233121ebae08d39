"""Across nodes for real: the multi-node test cluster (tests/slurm/cluster.sh)
and the `test-cluster` system of config/slurm_systems.py.

Every node is a slurmd in its own network and UTS namespace, joined to the
others by two links: fast0 (an unshaped veth) and slow0 (shaped by tc tbf).
The tests check that

* the cluster starts and stops cleanly, leaving no namespace and no daemon
  behind, also with a job still running;
* a 2-node job runs on 2 distinct hostnames;
* each stack, loaded from its Lmod module, is the stack it names;
* each stack's traffic takes its partition's link, measured twice: the
  interfaces' byte counters in the nodes' namespaces, and the ring kernel's
  bandwidth between the nodes (near the shaped rate on slow0, well above it
  on fast0);
* a ReFrame session on the test-cluster system runs its checks on 2 nodes
  for both stacks and both partitions, and a module that fails to load fails
  its environment's checks, naming the module;
* osu_latency and osu_bw run between the 2 nodes on both links, where an OSU
  install per stack is given (``HARNESS_OSU_PREFIX``), and osu_bw's bandwidth
  sits at the slow link's shaped rate and well above it on the fast one;
* spmv, md and ring (pure MPI and masteronly) run at 1 and at 2 nodes in one
  session (``-P nodes=1,2``) for both stacks, the ring on both links: every
  rank ran on as many hosts as its run asked for, the stack is its module's,
  the ring across nodes is Rabenseifner's (k CPUs per node, each sending to
  its counterpart on the next node, bandwidth aggregated per node, every k
  from 1 to the node's CPUs), every
  record is flagged oversubscribed where the nodes share the cores, and the
  report keeps 1 and 2 nodes apart (no verdict from oversubscribed runs; the
  same records unflagged give one verdict per node count, none pooled).

On a 2-core machine the nodes share the cores: the runs test the path, not
the speed.  The bandwidth figures still hold because they are ratios to the
configured rate, taken with the cores free to float (--cpu-bind=none).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    OSU_MISSING,
    REPO,
    kernel_results,
    last_attempts,
    mpi_env,
    osu_stacks,
    run_reframe,
    skip_if,
)

sys.path.insert(0, str(REPO / 'config'))
import slurm_systems  # noqa: E402

pytestmark = pytest.mark.integration

CLUSTER = REPO / 'tests' / 'slurm' / 'cluster.sh'
LMOD_CMD = Path('/usr/share/lmod/lmod/libexec/lmod')
PMI = {'openmpi': 'pmix', 'mpich': 'pmi2'}
LIBRARY = {'openmpi': 'Open MPI', 'mpich': 'MPICH Version'}
#: The slow link's rate in the tests (low enough to be far from what the
#: fast link does even on a loaded 2-core machine).
RATE = '200mbit'
RATE_MBPS = 200 / 8        # MB/s (10^6 bytes) as the ring reports


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-12000:]}\n--- stderr ---\n{proc.stderr[-5000:]}'


def cluster_missing() -> str:
    """Why the multi-node cluster cannot run here ('' if it can)."""
    if os.geteuid() != 0:
        return 'the multi-node test cluster needs root (network namespaces, Slurm daemons)'
    missing = [exe for exe in ('slurmctld', 'slurmd', 'sbatch', 'srun', 'ip', 'tc', 'unshare',
                               'nsenter') if not shutil.which(exe)]
    if missing:
        return (f'{", ".join(missing)} not found: ./harness test installs slurm-wlm '
                f'(iproute2, util-linux come with Debian)')
    if not os.access(LMOD_CMD, os.X_OK):
        return f'Lmod not installed ({LMOD_CMD}): ./harness test installs lmod as root'
    probe = subprocess.run(['unshare', '--net', '--uts', 'true'], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:
        return f'network namespaces are not available here: {probe.stderr.strip()}'
    return ''


def cluster_cmd(*args: str, timeout: int = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLUSTER), *args], capture_output=True, text=True,
                          timeout=timeout)


def record(directory: Path) -> dict[str, str]:
    return slurm_systems.test_cluster_record(str(directory))


def namespaces() -> set[str]:
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def client_env(directory: Path, **extra: str) -> dict[str, str]:
    rec = record(directory)
    env = mpi_env(SLURM_CONF=rec['SLURM_CONF'], HARNESS_TEST_CLUSTER=str(directory),
                  LMOD_CMD=str(LMOD_CMD), MODULEPATH=slurm_systems.MODULES_DIR)
    env['PATH'] = f'{rec["CLIENT_BIN"]}:{env["PATH"]}'
    env.update(extra)
    return env


def assert_gone(directory: Path, rec: dict[str, str]) -> None:
    """Nothing of the cluster is left: namespaces, daemons."""
    ours = {rec['HUB_NAMESPACE'], *rec['NODE_NAMESPACES'].split(',')}
    assert not ours & namespaces(), namespaces()
    for pidfile in directory.glob('*.pid'):
        pid = pidfile.read_text().strip()
        assert not Path(f'/proc/{pid}').exists() or \
            'zombie' in Path(f'/proc/{pid}/status').read_text(), pidfile
    assert not (directory / 'cluster.rec').exists()


@pytest.fixture(scope='module')
def cluster(tmp_path_factory) -> Iterator[Path]:
    """A 2-node cluster for this module; stopped at the end whatever the
    tests did, and checked to have left nothing behind."""
    skip_if(cluster_missing())
    directory = tmp_path_factory.mktemp('cluster')
    # 2 CPUs per node (the layouts the tests name): of their own where the
    # machine has 4, shared on a 2-core machine.
    own = ['--cpus-per-node', '2'] if len(os.sched_getaffinity(0)) >= 4 else []
    start = cluster_cmd('start', str(directory), '--nodes', '2', '--rate', RATE, *own)
    try:
        assert start.returncode == 0, explain(start)
        yield directory
    finally:
        rec = record(directory) if (directory / 'cluster.env').exists() else None
        stop = cluster_cmd('stop', str(directory))
        assert stop.returncode == 0, explain(stop)
        if rec:
            assert_gone(directory, rec)


def sbatch(directory: Path, script: str, tmp_path: Path, *options: str,
           timeout: float = 300) -> str:
    """Run a batch script on the cluster and wait for it; its output.
    (Polled here: `sbatch --wait` polls Slurm at growing intervals of up to
    half a minute, which would triple the tests' time.)"""
    path = tmp_path / 'job.sh'
    out = tmp_path / 'job.out'
    path.write_text('#!/bin/bash\nset -e\n' + script)
    env = client_env(directory)
    proc = subprocess.run(['sbatch', '--parsable', f'--output={out}', '--time=5', *options,
                           str(path)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, explain(proc)
    job = proc.stdout.strip().split(';')[0]
    deadline = time.monotonic() + timeout
    state = ''
    while time.monotonic() < deadline:
        show = subprocess.run(['scontrol', '-o', 'show', 'job', job], capture_output=True,
                              text=True, timeout=60, env=env).stdout
        state = show
        if re.search(r'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)',
                     show):
            break
        time.sleep(0.3)
    text = out.read_text() if out.exists() else ''
    assert 'JobState=COMPLETED' in state and 'ExitCode=0:0' in state, \
        f'job {job}: {state}\n--- job output ---\n{text}'
    return text


def lmod(stack: str) -> str:
    """Job script lines that load a stack's module, as ReFrame's job scripts do."""
    return (f'. {shlex.quote(slurm_systems.LMOD_INIT)}\n'
            f'module use {shlex.quote(slurm_systems.MODULES_DIR)}\n'
            f'module load {stack}\n')


def test_the_cluster_starts_and_stops_with_nothing_left_behind(tmp_path):
    skip_if(cluster_missing())
    directory = tmp_path / 'c'
    start = cluster_cmd('start', str(directory), '--nodes', '2')
    rec = record(directory) if (directory / 'cluster.env').exists() else {}
    try:
        assert start.returncode == 0, explain(start)
        ours = {rec['HUB_NAMESPACE'], *rec['NODE_NAMESPACES'].split(',')}
        assert ours <= namespaces()
        assert (directory.stat().st_mode & 0o777) == 0o700
        status = cluster_cmd('status', str(directory))
        assert status.returncode == 0, explain(status)
        assert re.search(r'slow0: qdisc tbf .* rate 1Gbit', status.stdout), status.stdout
        # Each node has its own hostname and addresses; nothing listens
        # outside the namespaces (the controller is not on this machine's
        # loopback).
        for i, ns in enumerate(rec['NODE_NAMESPACES'].split(','), start=1):
            addrs = subprocess.run(['ip', '-n', ns, '-brief', 'addr'], capture_output=True,
                                   text=True, check=True).stdout
            assert re.search(rf'^fast0@\S+\s+UP\s+10\.250\.1\.{i}/24', addrs, re.M), addrs
            assert re.search(rf'^slow0@\S+\s+UP\s+10\.250\.2\.{i}/24', addrs, re.M), addrs
        listening = subprocess.run(['ss', '-ltnH'], capture_output=True, text=True).stdout
        assert not re.search(r':6817\b', listening), listening
        # A job still running when the cluster stops (as after a failed test).
        job = subprocess.run(['sbatch', '-N2', '-p', 'slow', f'--output={tmp_path}/sleep.out',
                              '--wrap', 'srun sleep 300'], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path, env=client_env(directory))
        assert job.returncode == 0, explain(job)
        for _ in range(40):
            q = subprocess.run(['squeue', '-h', '-o', '%T'], capture_output=True, text=True,
                               env=client_env(directory)).stdout
            if 'RUNNING' in q:
                break
            subprocess.run(['sleep', '0.25'])
        again = cluster_cmd('start', str(directory))
        assert again.returncode != 0
        assert 'the test cluster of this folder still runs' in again.stderr
    finally:
        stop = cluster_cmd('stop', str(directory))
    assert stop.returncode == 0, explain(stop)
    assert_gone(directory, rec)
    assert not list(directory.glob('*.pid'))
    status = cluster_cmd('status', str(directory))
    assert status.returncode != 0 and 'no test cluster runs' in status.stdout


@pytest.mark.parametrize('option, value, message', [
    ('--nodes', '0', '--nodes must be a number from 1 to 200'),
    ('--rate', '1gbps', '--rate must be a tc rate such as 100mbit'),
    ('--rate', '1gbit;reboot', '--rate must be a tc rate'),
    ('--cpus-per-node', '4096', 'needs'),
])
def test_bad_options_are_refused_before_anything_is_made(option, value, message, tmp_path):
    if option == '--cpus-per-node' and cluster_missing():
        pytest.skip(cluster_missing())
    proc = cluster_cmd('start', str(tmp_path / 'c'), option, value)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not (tmp_path / 'c' / 'cluster.rec').exists()


def test_a_two_node_job_runs_on_two_distinct_hostnames(cluster, tmp_path):
    # Each rank leaves a file in its node's /dev/shm, then (after a step
    # boundary) lists what is there: a real node sees only its own.
    out = sbatch(cluster, 'srun --cpu-bind=none sh -c \'touch "/dev/shm/hc-$(hostname)"\'\n'
                 'srun --cpu-bind=none sh -c \'echo "rank $SLURM_PROCID on '
                 '$(hostname) netns $(readlink /proc/self/ns/net) shm '
                 '$(ls /dev/shm | grep "^hc-" | paste -sd,)"; rm -f /dev/shm/hc-*\'\n',
                 tmp_path, '--nodes=2', '--ntasks-per-node=1', '--partition=fast')
    lines = sorted(ln for ln in out.splitlines() if ln.startswith('rank '))
    assert len(lines) == 2, out
    hosts = {ln.split()[3] for ln in lines}
    nets = {ln.split()[5] for ln in lines}
    assert hosts == {'node1', 'node2'}, out
    # Two hosts for real: two network namespaces, neither this machine's.
    assert len(nets) == 2 and os.readlink('/proc/self/ns/net') not in nets, out
    # and two /dev/shm, neither this machine's
    assert {ln.split()[7] for ln in lines if ln.split()[3] == 'node1'} == {'hc-node1'}, out
    assert {ln.split()[7] for ln in lines if ln.split()[3] == 'node2'} == {'hc-node2'}, out
    assert not list(Path('/dev/shm').glob('hc-node*'))


@pytest.fixture(scope='module')
def ring_builds(cluster, tmp_path_factory, stacks) -> dict[str, Path]:
    """The ring kernel per stack, built with the compiler its module puts on PATH."""
    builds = {}
    for stack in stacks:
        if stack not in PMI:
            continue
        build = tmp_path_factory.mktemp(f'ring-{stack}')
        script = (lmod(stack) +
                  'cmake -S "$1" -B "$2" -DCMAKE_C_COMPILER=mpicc -DMPI_C_COMPILER=mpicc '
                  '-DCMAKE_BUILD_TYPE=Release >/dev/null\n'
                  'cmake --build "$2" --target ring -j 2 >/dev/null\n'
                  'command -v mpicc\n')
        proc = subprocess.run(['bash', '-c', script, 'build', str(REPO / 'src'), str(build)],
                              capture_output=True, text=True, timeout=600,
                              env=client_env(cluster))
        assert proc.returncode == 0, explain(proc)
        assert proc.stdout.strip() == f'{REPO}/config/modules/bin/{stack}/mpicc', proc.stdout
        builds[stack] = build / 'ring'
    return builds


def tx_bytes(directory: Path) -> dict[str, int]:
    """Bytes sent on fast0 and slow0, summed over the nodes (read in each
    node's namespace: /proc/net/dev is per network namespace)."""
    total = {'fast0': 0, 'slow0': 0}
    for ns in record(directory)['NODE_NAMESPACES'].split(','):
        dev = subprocess.run(['nsenter', f'--net=/run/netns/{ns}', 'cat', '/proc/net/dev'],
                             capture_output=True, text=True, check=True).stdout
        for line in dev.splitlines():
            name, _, fields = line.partition(':')
            if name.strip() in total:
                total[name.strip()] += int(fields.split()[8])
    return total


@pytest.mark.parametrize('part', ['slow', 'fast'])
def test_each_stacks_traffic_takes_its_partitions_link(cluster, ring_builds, part, tmp_path):
    rec = record(cluster)
    spec = slurm_systems.test_cluster_spec(rec)
    link, other = (rec['SLOW_IFACE'], rec['FAST_IFACE']) if part == 'slow' else \
        (rec['FAST_IFACE'], rec['SLOW_IFACE'])
    assert spec['partitions'][part]['extras']['link'] == link
    rate = int(rec['SLOW_RATE_BITS']) / 8 / 1e6
    assert rate == RATE_MBPS
    for stack, ring in ring_builds.items():
        # The partition's variables for this stack, as the ReFrame system sets them.
        env = spec['partitions'][part]['transport_env'][stack]
        assert link in env.values(), env
        exports = ''.join(f'export {k}={shlex.quote(v)}\n' for k, v in env.items())
        before = tx_bytes(cluster)
        out = sbatch(cluster, lmod(stack) + exports +
                     f'srun --mpi={PMI[stack]} --cpu-bind=none {shlex.quote(str(ring))} '
                     '--pattern bw --sizes 1M --window 8 --reps 2 --iters-scale 0.1\n', tmp_path,
                     '--nodes=2', '--ntasks-per-node=1', f'--partition={part}')
        after = tx_bytes(cluster)
        result = kernel_results(out)[0]
        assert result['verified'] and result['hosts'] == ['node1', 'node2'], result
        assert result['mpi_library'].startswith(LIBRARY[stack]), result['mpi_library']
        sent = {k: after[k] - before[k] for k in after}
        moved = result['size'] * result['window'] * result['iters'] * result['reps']
        # The messages went over this partition's link; the other one carried
        # at most Slurm's own few kilobytes (its control traffic uses fast0).
        assert sent[link] >= moved, (stack, part, sent, moved)
        assert sent[other] < 0.02 * sent[link], (stack, part, sent, moved)
        bw = result['bandwidth_MBps']
        print(f'{stack} {part} ({link}): {bw:.1f} MB/s; configured slow rate '
              f'{rate:.1f} MB/s; bytes sent {sent}')
        if part == 'slow':
            # Near the configured rate: never above it (the shaping holds), and
            # not far below it.
            assert 0.6 * rate <= bw <= 1.05 * rate, (stack, bw, rate)
        else:
            assert bw >= 3 * rate, (stack, bw, rate)


def test_a_module_sets_its_stack_on_the_nodes(cluster, stacks, tmp_path):
    for stack in stacks:
        if stack not in PMI:
            continue
        out = sbatch(cluster, lmod(stack) +
                     'srun --cpu-bind=none sh -c \'echo "$(hostname) $HARNESS_MODULE_STACK '
                     '$(command -v mpicc) $(readlink -f "$(command -v mpicc)")"\'\n',
                     tmp_path, '--nodes=2', '--ntasks-per-node=1', '--partition=fast')
        lines = sorted(ln.split() for ln in out.splitlines() if ln.startswith('node'))
        assert [ln[0] for ln in lines] == ['node1', 'node2'], out
        for _, name, mpicc, real in lines:
            assert name == stack
            assert mpicc == f'{REPO}/config/modules/bin/{stack}/mpicc'
            assert real == str(Path(shutil.which(f'mpicc.{stack}') or '').resolve())
    # Without its prefix, mvapich2 refuses to load and names what is missing.
    proc = subprocess.run(['bash', '-c', lmod('mvapich2')], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in client_env(cluster).items()
                                           if k != 'HARNESS_MVAPICH2_PREFIX'})
    assert proc.returncode != 0
    assert 'mvapich2: set HARNESS_MVAPICH2_PREFIX' in proc.stderr


@pytest.mark.skipif(not Path(slurm_systems.LMOD_INIT).exists(), reason='Lmod is not installed')
def test_the_mvapich2_module_puts_its_lib64_on_the_library_path(tmp_path):
    """An MVAPICH2 installed into <prefix>/lib64 (a distribution's libdir): the
    module put only <prefix>/lib on LD_LIBRARY_PATH."""
    prefix = tmp_path / 'mv2'
    for tool in ('mpicc', 'mpiexec'):
        (prefix / 'bin').mkdir(parents=True, exist_ok=True)
        (prefix / 'bin' / tool).write_text('#!/bin/sh\n')
    env = {'PATH': os.environ['PATH'], 'HOME': str(tmp_path),
           'HARNESS_MVAPICH2_PREFIX': str(prefix)}

    def library_path() -> list[str]:
        proc = subprocess.run(['bash', '-c', lmod('mvapich2') + 'echo "$LD_LIBRARY_PATH"'],
                              capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()[-1].split(':')

    assert library_path()[0] == f'{prefix}/lib'
    (prefix / 'lib64').mkdir()
    assert library_path()[:2] == [f'{prefix}/lib64', f'{prefix}/lib']


@pytest.fixture(scope='module')
def reframe_session(cluster, stacks, tmp_path_factory):
    var = tmp_path_factory.mktemp('var')
    proc = run_reframe(var, '--system', 'test-cluster', '-n', 'StreamCheck%layout=mpi_2x1',
                       '-r', env=client_env(cluster), timeout=900)
    return var, proc


def test_reframe_runs_checks_on_two_nodes_for_each_stack_and_partition(
        cluster, reframe_session, stacks):
    var, proc = reframe_session
    assert proc.returncode == 0, explain(proc)
    for stack in stacks:
        for part in ('fast', 'slow'):
            assert re.search(rf'OK \].*StreamCheck %layout=mpi_2x1 .*@test-cluster:{part}\+'
                             rf'{stack}\b', proc.stdout), (stack, part)
            job = last_attempts(var / 'test-cluster' / 'output' / 'test-cluster' / part / stack,
                                'StreamCheck_*')[0]
            script = (job / 'rfm_job.sh').read_text()
            assert f'#SBATCH --partition={part}' in script
            assert f'module load {stack}' in script
            iface = 'slow0' if part == 'slow' else 'fast0'
            pin = 'OMPI_MCA_btl_tcp_if_include' if stack == 'openmpi' else 'UCX_NET_DEVICES'
            assert f'export {pin}={iface}' in script, script
            result = kernel_results((job / 'rfm_job.out').read_text())[0]
            assert sorted(set(result['hosts'])) == ['node1', 'node2'], result
            assert result['mpi_library'].startswith(LIBRARY[stack]), result
    comp = (cluster / 'jobcomp.txt').read_text().splitlines()
    ours = [ln for ln in comp if 'Name=rfm_StreamCheck_' in ln]
    assert ours and all('NodeList=node[1-2]' in ln and 'JobState=COMPLETED' in ln
                        for ln in ours), ours


def test_a_module_that_fails_to_load_fails_its_checks_naming_it(cluster, tmp_path):
    if os.environ.get('HARNESS_MVAPICH2_PREFIX'):
        pytest.skip('HARNESS_MVAPICH2_PREFIX is set: the mvapich2 module loads')
    # mvapich2 beside a stack this machine has (a list of absent stacks only is
    # refused by the configuration itself), selected alone with -p
    env = client_env(cluster, HARNESS_STACKS='mpich,mvapich2')
    env.pop('HARNESS_MVAPICH2_PREFIX', None)
    proc = run_reframe(tmp_path, '--system', 'test-cluster:fast', '-p', 'mvapich2', '-n',
                       'StreamCheck%layout=mpi_2x1', '-r', env=env, timeout=300)
    assert proc.returncode != 0, explain(proc)
    assert re.search(r'FAIL \].*@test-cluster:fast\+mvapich2', proc.stdout), explain(proc)
    assert 'mvapich2: set HARNESS_MVAPICH2_PREFIX' in proc.stdout, explain(proc)
    assert "lmod python show mvapich2' failed" in proc.stdout or \
        'load mvapich2' in proc.stdout, explain(proc)


# ---- OSU point-to-point between the nodes -----------------------------------------

def test_osu_pt2pt_runs_between_the_nodes_on_each_link(cluster, stacks, tmp_path):
    """osu_latency and osu_bw of every stack with an OSU install, one rank per
    node on each partition: the jobs ran on both nodes, every record is flagged
    oversubscribed where the nodes share the cores, and osu_bw took the
    partition's link (at most the shaped rate on slow0, well above it on fast0)."""
    with_osu = [s for s in osu_stacks(stacks) if s in PMI]
    if not with_osu:
        pytest.skip(OSU_MISSING)
    proc = run_reframe(tmp_path, '--system', 'test-cluster', '-n', 'OsuLatencyCheck',
                       '-n', 'OsuBwCheck', '-r', '-S', 'max_size=1048576',
                       '-S', 'iters=3', '-S', 'warmup=1',
                       env=client_env(cluster, HARNESS_STACKS=','.join(with_osu)), timeout=900)
    assert proc.returncode == 0, explain(proc)
    comp = (cluster / 'jobcomp.txt').read_text().splitlines()
    for check in ('OsuLatencyCheck', 'OsuBwCheck'):
        ours = [ln for ln in comp if re.search(rf'Name=rfm_{check}\b', ln)]
        assert len(ours) == 2 * len(with_osu), ours
        assert all('NodeList=node[1-2]' in ln and 'JobState=COMPLETED' in ln
                   for ln in ours), ours
    rate = RATE_MBPS
    shared = record(cluster)['SHARED_CORES'] == '1'
    for part in ('fast', 'slow'):
        logs = tmp_path / 'perflogs' / 'test-cluster' / part
        for check, head in (('OsuLatencyCheck', 'latency_8B'), ('OsuBwCheck', 'bandwidth_1MiB')):
            lines = (logs / f'{check}.log').read_text().splitlines()
            rows = [dict(zip(lines[0].split('|'), ln.split('|'))) for ln in lines[1:]]
            assert sorted(r['environ'] for r in rows) == sorted(with_osu), rows
            for r in rows:
                assert (r['nodes'], r['ranks'], r['result']) == ('2', '1', 'pass'), r
                # flagged where the nodes share the machine's cores
                assert r['oversubscribed'] == str(shared).lower(), r
                assert r['mpi_library'].startswith(LIBRARY[r['environ']].split()[0]), r
                value = float(r[f'{head}_value'])
                print(f'{check} {r["environ"]} {part}: {head} {value:.2f}')
                if head != 'bandwidth_1MiB':
                    assert value > 0, r
                elif part == 'slow':
                    # Never above the shaped rate: the traffic took slow0.  Not
                    # far below it where the nodes have cores of their own;
                    # where they share the machine's, Slurm binds each node's
                    # rank to the node's first CPU, the same core, and the
                    # two ranks take turns on it.
                    low = 0.3 if shared else 0.6
                    assert low * rate <= value <= 1.05 * rate, (r['environ'], value, rate)
                else:
                    assert value >= 3 * rate, (r['environ'], value, rate)


# ---- the kernels at 1 and 2 nodes, and their report -----------------------------

#: One layout per kernel (2 cores per node on the test cluster): spmv and md
#: on the fast link, the ring on both links and as pure MPI and masteronly
#: (the pair a verdict compares); every run at 1 and at 2 nodes (``-P nodes``:
#: ReFrame parameterizes the checks' ``nodes`` variable).
NODE_RUNS = ('-n', 'SpmvCheck%layout=mpi_2x1%problem=16', '-n', 'MdCheck%layout=mpi_2x1%problem=6',
             '-n', 'RingCheck%layout=mpi_2x1', '-n', 'RingCheck%layout=masteronly_1x2',
             '-P', 'nodes=1,2', '-S', 'RingCheck.iters_scale=0.05',
             '-S', 'SpmvCheck.valid_systems=test-cluster:fast',
             '-S', 'MdCheck.valid_systems=test-cluster:fast')
NODE_PARTS = {'spmv': ('fast',), 'md': ('fast',), 'ring': ('fast', 'slow')}
NODE_LAYOUTS = {'spmv': ('mpi_2x1',), 'md': ('mpi_2x1',), 'ring': ('mpi_2x1', 'masteronly_1x2')}


@pytest.fixture(scope='module')
def node_session(cluster, stacks, tmp_path_factory):
    var = tmp_path_factory.mktemp('var-nodes')
    start = time.monotonic()
    # One retry, as a centre runs its nightly: on a loaded 2-core machine a
    # rank of this oversubscribed cluster may miss Open MPI's TCP connection
    # (connect() timed out between the namespaces; seen under a CPU hog, never
    # without).  A wrong placement, library or result fails both tries.
    proc = run_reframe(var, '--system', 'test-cluster', *NODE_RUNS, '--max-retries', '1',
                       '-r', env=client_env(cluster), timeout=900)
    print(f'kernels at 1 and 2 nodes: session of {time.monotonic() - start:.0f} s')
    return var, proc, [s for s in stacks if s in PMI]


def sbatch_option(script: str, name: str) -> int:
    found = re.search(rf'^#SBATCH --{name}=(\d+)$', script, re.M)
    assert found, (name, script)
    return int(found.group(1))


def test_kernels_run_on_the_nodes_they_were_meant_for(cluster, node_session):
    var, proc, stacks = node_session
    assert proc.returncode == 0, explain(proc)
    shared = record(cluster)['SHARED_CORES'] == '1'
    for kernel, parts in NODE_PARTS.items():
        check = f'{kernel.capitalize()}Check'
        for part in parts:
            for stack in stacks:
                for layout in NODE_LAYOUTS[kernel]:
                    for nodes in (1, 2):
                        assert re.search(rf'OK \].*{check} %layout={layout} .*%\.nodes={nodes} '
                                         rf'.*@test-cluster:{part}\+{stack}\b', proc.stdout), \
                            (kernel, layout, nodes, part, stack)
                seen = set()
                for job in last_attempts(
                        var / 'test-cluster' / 'output' / 'test-cluster' / part / stack,
                        f'{check}_*'):
                    script = (job / 'rfm_job.sh').read_text()
                    assert f'module load {stack}' in script, script
                    nodes = sbatch_option(script, 'ntasks') // sbatch_option(
                        script, 'ntasks-per-node')
                    results = kernel_results((job / 'rfm_job.out').read_text())
                    assert results, job
                    for res in results:
                        # Where every rank ran: as many hosts as nodes asked for.
                        assert len(set(res['hosts'])) == nodes, (job, nodes, res['hosts'])
                        assert set(res['hosts']) <= {'node1', 'node2'}, res['hosts']
                        assert res['mpi_library'].startswith(LIBRARY[stack]), res
                        assert res['verified'] is True, res
                        if kernel == 'ring':
                            ring_across_nodes(res, nodes)
                    if kernel == 'ring':
                        # Rabenseifner's saturation curve: across nodes every
                        # k from 1 to the largest, each size; the job's last
                        # line (the headline) at the largest k.
                        top = results[-1]['ranks_per_node'] if results[-1]['mode'] == 'mpi' \
                            else results[-1]['threads']
                        ks = [d for d in range(1, top + 1) if top % d == 0] if nodes > 1 \
                            else [top]
                        assert results[-1]['k'] == top, results[-1]
                        assert {(r['k'], r['size']) for r in results} == {
                            (k, s) for k in ks for s in (8, 65536, 1048576)}, job
                    seen.add((results[0]['mode'], nodes))
                modes = {layout.split('_')[0] for layout in NODE_LAYOUTS[kernel]}
                assert seen == {(m, n) for m in modes for n in (1, 2)}, (kernel, part, seen)
    # The perflogs: every record that passed names its stack's library, its
    # node count, and is flagged oversubscribed where the nodes share the cores.
    from hybridverdict.perflog import ReadStats, read_perflogs
    stats = ReadStats()
    recs = [r for r in read_perflogs([str(var / 'perflogs')], stats=stats)
            if r.kernel in NODE_PARTS]
    assert not stats.warnings(), stats.warnings()
    expected = {(k, p, s, n) for k, parts in NODE_PARTS.items() for p in parts
                for s in stacks for n in (1, 2)}
    passed = [r for r in recs if r.result == 'pass']
    assert {(r.kernel, r.partition, r.stack, r.nodes) for r in passed} == expected
    # A failed first attempt (the one retry above) counts by its retry, as in
    # the run report (perflog.last_tries): no failed record is left.  As logged,
    # it names no library where it failed before its RESULT line, never another
    # stack's, and its retry passed.
    assert all(r.result == 'pass' for r in recs), [r for r in recs if r.result != 'pass']
    from hybridverdict import perflog
    with pytest.MonkeyPatch.context() as every_try:
        every_try.setattr(perflog, 'last_tries', lambda tries: tries)
        logged = [r for r in read_perflogs([str(var / 'perflogs')], stats=ReadStats())
                  if r.kernel in NODE_PARTS]
    for r in logged:
        if r.result != 'pass':
            assert r.mpi_library == '' or r.mpi_library.startswith(LIBRARY[r.stack]), r
            assert any((p.name, p.partition, p.stack) == (r.name, r.partition, r.stack)
                       and p.logged > r.logged for p in passed), r
    for r in passed:
        assert r.mpi_library.startswith(LIBRARY[r.stack]), (r.stack, r.mpi_library)
        assert r.oversubscribed is shared, r
        if r.kernel == 'ring' and r.nodes == 2:
            # The aggregated bandwidth per node at every k (1 .. all of the
            # node's CPUs) and size, measured between the 2 nodes.
            for k in (d for d in range(1, r.cores + 1) if r.cores % d == 0):
                for size in (8, 65536, 1048576):
                    assert r.values.get(f'bw_k{k}_{size}', 0) > 0, (k, size, sorted(r.values))


def ring_across_nodes(res: dict, nodes: int) -> None:
    """Rabenseifner's ring: across nodes, k CPUs per node each send to their
    counterpart on the next node, the bandwidth aggregated per node; on one
    node every rank stands for a node (--rank-as-node)."""
    ppn = res['ranks_per_node']
    if nodes == 1:
        assert res['rank_as_node'] is True and ppn == 1, res
        return
    assert res['rank_as_node'] is False and res['nodes'] == nodes, res
    assert ppn * nodes == res['ranks'], res
    # Block placement: ranks of a node side by side, node after node.
    assert res['hosts'] == [f'node{1 + r // ppn}' for r in range(res['ranks'])], res
    k = res['k']
    assert 1 <= k <= (ppn if res['mode'] == 'mpi' else res['threads']), res
    per_rank = 1 if res['mode'] == 'mpi' else ppn
    assert res['bytes_per_node_per_iter'] == res['size'] * k * per_rank, res
    assert res['bandwidth_MBps'] > 0, res


def test_the_report_keeps_node_counts_apart(cluster, node_session, capsys, tmp_path):
    import dataclasses

    from hybridverdict.cli import main
    from hybridverdict.perflog import ReadStats, read_perflogs
    from hybridverdict.report import build
    from hybridverdict.section import FUNCTIONAL
    var, proc, stacks = node_session
    assert proc.returncode == 0, explain(proc)
    logs = str(var / 'perflogs')
    shared = record(cluster)['SHARED_CORES'] == '1'
    stats = ReadStats()
    recs = read_perflogs([logs], stats=stats)
    code = main(['--perflogs', logs, '--no-write'])
    out = capsys.readouterr()
    rep = build(recs, stats, [logs])
    if shared:
        # Oversubscribed runs are out of every verdict: none is given, and
        # the report says which records it read.
        assert rep.verdicts == []
        assert code == 1, out
        assert f'no pure-MPI/hybrid pair among {len(recs)} record(s)' in out.err, out
        # It names every pair it measured, per node count, and why none was
        # judged: the report of this session at 1 and at 2 nodes.
        from hybridverdict.verdict import unjudged
        left = unjudged(recs)
        # the ring is judged per message size: one unjudged pair per size
        assert sorted({(u.partition, u.stack, u.kernel, u.nodes) for u in left}) == sorted(
            (p, s, 'ring', n) for p in ('fast', 'slow') for s in stacks for n in (1, 2)), left
        assert {u.size for u in left} >= {'8B', '1MiB'}, left

        def runs(u, layout: str) -> int:
            # the records the report counts (a retried case by its last try)
            return sum((r.partition, r.stack, r.kernel, r.nodes, r.layout)
                       == (u.partition, u.stack, u.kernel, u.nodes, layout) for r in recs)

        for u in left:
            assert u.why == (f'masteronly 1x2: {runs(u, "1x2")} oversubscribed; '
                             f'mpi 2x1: {runs(u, "2x1")} oversubscribed'), u
            assert (f'on test-cluster:{u.partition} {u.stack}, {u.nodes} node(s): masteronly '
                    f'1x2 against mpi 2x1: no verdict') in out.err, out.err
        # Asked for, the written report judges them as functional verdicts,
        # per node count, in a section of their own: never findings.
        written = tmp_path / 'report'
        assert main(['--perflogs', logs, '--functional-verdicts', '--out', str(written)]) == 0
        err = capsys.readouterr().err
        assert f'{len(left)} functional verdict(s) of oversubscribed runs' in err, err
        (doc,) = [json.loads(p.read_text()) for p in written.glob('verdict-*.json')]
        assert doc['verdicts'] == [], doc['verdicts']
        (sec,) = [s for s in build(recs, stats, [logs], functional=True).sections
                  if s.key == FUNCTIONAL]
        found = doc['sections'][sec.title]
        assert all(v['oversubscribed'] and not v['confirmed'] for v in found), found
        (md,) = written.glob('verdict-*.md')
        assert f'## {sec.title}' in md.read_text()
        assert len(sec.rows) == len(found) and all(f'| {row[0]} ' in md.read_text()
                                                   for row in sec.rows), sec.rows
        # The same records as if the cores were their own: what the report
        # would give, one verdict per node count, never pooled.
        rep = build([dataclasses.replace(r, oversubscribed=False) for r in recs],
                    stats, [logs])
        same = ('partition', 'stack', 'nodes', 'speedup', 'low', 'high', 'verdict')
        assert [tuple(getattr(v, k) for k in same) for v in rep.verdicts] == [
            tuple(v[k] for k in same) for v in found]
    else:
        assert code == 0, out
        assert not [s for s in rep.sections if s.key == 'unjudged' and s.rows], rep.sections
        found = [dataclasses.asdict(v) for v in rep.verdicts]
    # the ring is judged per message size: one verdict per size, never two of one
    verdicts = [(v['partition'], v['stack'], v['kernel'], v['nodes'], v['size'])
                for v in found]
    assert len(set(verdicts)) == len(verdicts), verdicts
    assert sorted({v[:4] for v in verdicts}) == sorted({(p, s, 'ring', n) for p in ('fast', 'slow')
                                                        for s in stacks for n in (1, 2)}), verdicts
    assert {v[4] for v in verdicts} >= {'8B', '1MiB'}, verdicts
    for v in found:
        # One run per side (HARNESS_REPEAT=1): a verdict pooling the node
        # counts would stand on two.
        assert (v['n_mpi'], v['n_hybrid']) == (1, 1), v
        assert (v['hybrid_layout'], v['mpi_layout']) == ('1x2', '2x1'), v
    # Rabenseifner's masteronly against pure MPI across the nodes, from the
    # ring's k sweep (k = 1 and k = 2 per node) at 2 nodes only: one row per
    # stack, link and message size.
    (sec,) = [s for s in rep.sections if s.key == 'masteronly_across_nodes']
    rows = {(d['partition'], d['stack'], d['nodes'], d['size']) for d in sec.data}
    assert rows == {(p, s, 2, size) for p in ('fast', 'slow') for s in stacks
                    for size in (8, 65536, 1048576)}, sec.data
    for d in sec.data:
        assert d['k_max'] == 2 and d['b_hybrid'] > 0 and d['b_mpp'] > 0, d
