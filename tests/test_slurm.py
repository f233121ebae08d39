"""The harness on a real Slurm cluster: this machine as a one-node cluster
(tests/slurm/testbed.sh), with the `local-slurm` system of config/.

One kernel check per MPI stack goes through sbatch and srun (with the PMI each
stack needs), on both partitions and at both layouts of a 2-core node (2 ranks
x 1 thread and 1 x 2: CR_Core gives each job whole cores).  The cluster is
started once per session and stopped by its pid files at the end, even when a
test fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TESTBED, hung_rank_session, not_passed, perflog, run_reframe

pytestmark = pytest.mark.integration


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-15000:]}\n--- stderr ---\n{proc.stderr[-5000:]}'


@pytest.fixture(scope='module')
def stream_session(slurm_cluster, stacks, tmp_path_factory):
    var = tmp_path_factory.mktemp('var')
    proc = run_reframe(var, '--system', 'local-slurm', '-n', 'StreamCheck', '-r',
                       env={'SLURM_CONF': slurm_cluster['SLURM_CONF']}, timeout=600)
    return var, proc


def test_a_kernel_check_per_stack_passes_through_sbatch(stream_session, stacks):
    _, proc = stream_session
    assert proc.returncode == 0, explain(proc)
    assert not not_passed(proc.stdout, 'local-slurm', ['StreamCheck'], stacks, ('shm', 'tcp'),
                          ('mpi_2x1', 'masteronly_1x2'))


def test_the_jobs_really_went_through_slurm(stream_session, slurm_cluster, stacks):
    var, _ = stream_session
    pmi = {'openmpi': 'pmix', 'mpich': 'pmi2'}
    scripts = sorted((var / 'output' / 'local-slurm').glob('*/*/StreamCheck_*/rfm_job.sh'))
    assert len(scripts) == 4 * len(stacks), scripts
    for script in scripts:
        text = script.read_text()
        stack = script.parent.parent.name
        assert '#SBATCH --partition=harness' in text
        assert re.search(r'^#SBATCH --cpus-per-task=[12]$', text, re.M), text
        # ReFrame's own srun launcher; the PMI and the binding are srun's
        # input variables, set by the environment and the run.
        assert re.search(r'^srun --cpus-per-task=[12] ', text, re.M), text
        assert f'\nexport SLURM_MPI_TYPE={pmi[stack]}\n' in text, text
        assert '\nexport SLURM_CPU_BIND=cores\n' in text, text
        # The job wrote its launcher's exit status (squeue reports none).
        assert 'harness: launcher exit status 0' in (script.parent / 'rfm_job.err').read_text()
    # Slurm's own record of the jobs: every one of them completed with status 0.
    comp = Path(slurm_cluster['dir'], 'jobcomp.txt').read_text().splitlines()
    ours = [ln for ln in comp if 'Name=rfm_StreamCheck_' in ln]
    assert len(ours) == 4 * len(stacks), comp
    assert all('JobState=COMPLETED' in ln and 'ExitCode=0:0' in ln for ln in ours), ours


def test_perflogs_of_the_slurm_system_carry_the_layout(stream_session, stacks):
    var, _ = stream_session
    for part in ('shm', 'tcp'):
        got = {(r['environ'], r['ranks'], r['threads'], r['oversubscribed'])
               for r in perflog(var / 'perflogs' / 'local-slurm' / part / 'StreamCheck.log')}
        assert got == {(s, rk, th, 'false') for s in stacks
                       for rk, th in (('2', '1'), ('1', '2'))}


def test_a_hybrid_rank_given_one_core_by_srun_fails_as_oversubscribed(
        slurm_cluster, stacks, tmp_path):
    # srun -c 1 for a 2-thread rank: Slurm binds both threads to one core.
    proc = run_reframe(tmp_path, '--system', 'local-slurm:shm', '-n',
                       'StreamCheck%layout=masteronly_1x2', '-S', 'binding=one-core', '-r',
                       env={'SLURM_CONF': slurm_cluster['SLURM_CONF'],
                            'HARNESS_STACKS': stacks[0]}, timeout=600)
    assert proc.returncode != 0, explain(proc)
    assert 'oversubscribed run' in proc.stdout, explain(proc)
    assert 'rank 0 thread 1 and rank 0 thread 0 on' in proc.stdout, explain(proc)


def test_the_testbed_refuses_a_second_start_and_names_the_pid_file(slurm_cluster):
    proc = subprocess.run([str(TESTBED), 'start', slurm_cluster['dir']],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, SLURM_TESTBED_PORT='16817'))
    assert proc.returncode != 0
    assert 'slurmctld.pid: a daemon of this test cluster already runs' in proc.stderr


def test_the_testbed_rejects_a_bad_port(tmp_path):
    proc = subprocess.run([str(TESTBED), 'start', str(tmp_path)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, SLURM_TESTBED_PORT='80x'))
    assert proc.returncode != 0
    assert "SLURM_TESTBED_PORT must be a port number" in proc.stderr
    assert not (tmp_path / 'slurm.conf').exists()


def test_a_start_on_a_taken_port_fails_and_leaves_nothing_running(slurm_cluster, tmp_path):
    proc = subprocess.run([str(TESTBED), 'start', str(tmp_path)], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, SLURM_TESTBED_PORT=slurm_cluster['port'],
                                   SLURM_TESTBED_WAIT='5'))
    assert proc.returncode != 0
    assert f'is port {slurm_cluster["port"]} taken?' in proc.stderr
    for daemon in ('slurmctld', 'slurmd'):
        pidfile = tmp_path / f'{daemon}.pid'
        if pidfile.exists():
            pid = int(pidfile.read_text())
            assert not Path(f'/proc/{pid}').exists() or \
                'zombie' in Path(f'/proc/{pid}/status').read_text()


def test_slurm_ends_a_hung_rank_at_the_time_limit_and_the_session_carries_on(
        slurm_cluster, stacks, tmp_path):
    # KERNEL_FAULT_HANG: rank 0 of stream hangs (fault-injection build only).
    stack = stacks[-1]
    proc = hung_rank_session(tmp_path, 'local-slurm:shm', '20s', stack,
                             {'SLURM_CONF': slurm_cluster['SLURM_CONF']})
    out = proc.stdout
    assert proc.returncode != 0, explain(proc)
    assert re.search(r'\[\s+FAIL \].*StreamCheck %layout=mpi_2x1', out), explain(proc)
    assert 'the job ended before its launcher returned' in out, explain(proc)
    assert 'killed at its time limit of 20.0 s' in out, explain(proc)
    assert re.search(rf'\[\s+OK \].*RingCheck %layout=mpi_2x1 .*\+{stack}', out), explain(proc)
    script = next((tmp_path / 'stage' / 'local-slurm' / 'shm' / stack).glob(
        'StreamCheck_*/rfm_job.sh')).read_text()
    assert '#SBATCH --time=0:0:20' in script
    comp = Path(slurm_cluster['dir'], 'jobcomp.txt').read_text().splitlines()
    name = re.search(r'--job-name="(\S+)"', script)
    assert name and any(f'Name={name.group(1)} ' in ln and 'JobState=TIMEOUT' in ln
                        for ln in comp), comp


# ---- MdLammpsBenchmark (checks/lammps.py) under Slurm ------------------------------

def lammps_job_script(var: Path) -> str:
    scripts = list((var / 'stage' / 'local-slurm').glob('*/*/MdLammpsBenchmark/rfm_job.sh'))
    assert len(scripts) == 1, scripts
    return scripts[0].read_text()


def test_the_lammps_job_holds_its_largest_run_and_records_its_status(tmp_path, stacks):
    # A dry run (no Slurm needed): the job asks for the 2 ranks of the
    # script's largest runs (the 1 x 2 run takes the same 2 cores), and
    # records the script's status (squeue reports none).
    if 'openmpi' not in stacks:
        pytest.skip('MdLammpsBenchmark runs with the openmpi stack')
    proc = run_reframe(tmp_path, '--system', 'local-slurm:shm', '-n', 'MdLammpsBenchmark',
                       '--dry-run', env={'HARNESS_STACKS': 'openmpi'}, timeout=300)
    if 'lmp not found' in proc.stdout:
        pytest.skip("Debian's lmp not installed")
    assert proc.returncode == 0, explain(proc)
    text = lammps_job_script(tmp_path)
    assert re.search(r'^#SBATCH --ntasks=2$', text, re.M), text
    assert re.search(r'^#SBATCH --cpus-per-task=[12]$', text, re.M), text
    lines = text.splitlines()
    status = lines.index('echo "harness: launcher exit status $?" >&2')
    assert lines.index('bash bench.sh') < status, text
    bench = (tmp_path / 'stage' / 'local-slurm' / 'shm' / 'openmpi' / 'MdLammpsBenchmark' /
             'bench.sh').read_text()
    cpus = int(re.search(r'^#SBATCH --cpus-per-task=(\d+)$', text, re.M).group(1))
    # Every run of the script fits the job: ranks x CPUs per rank <= 2 x cpus.
    for ntasks, per_task in (('1', 1), ('2', 1), ('1', 2)):
        assert f'srun --cpus-per-task={cpus * per_task} --ntasks={ntasks} ' in bench, bench


def test_md_against_lammps_runs_every_layout_through_sbatch(slurm_cluster, stacks, tmp_path):
    if 'openmpi' not in stacks:
        pytest.skip('MdLammpsBenchmark runs with the openmpi stack')
    if shutil.which('lmp') is None:
        pytest.skip("Debian's lmp not installed")
    proc = run_reframe(tmp_path, '--system', 'local-slurm:shm', '-n', 'MdLammpsBenchmark',
                       '-r', '-S', 'rounds=1', '-S', 'max_rounds=1',
                       env={'SLURM_CONF': slurm_cluster['SLURM_CONF'],
                            'HARNESS_STACKS': 'openmpi'}, timeout=600)
    out = proc.stdout
    assert 'More processors requested than permitted' not in out, explain(proc)
    assert 'the benchmark script failed' not in out, explain(proc)
    # The job's folder: output/ where the check passed, stage/ where a band failed.
    job = next(p for top in ('stage', 'output') for p in
               (tmp_path / top / 'local-slurm' / 'shm' / 'openmpi').glob('MdLammpsBenchmark')
               if (p / 'rfm_job.err').exists())
    assert 'harness: launcher exit status 0' in (job / 'rfm_job.err').read_text()
    # Every run of the round printed its line (the script tees them to stdout).
    tags = {ln.split()[0] for ln in (job / 'rfm_job.out').read_text().splitlines() if ln}
    assert {'MD_1x1', 'LMP_1', 'MD_2x1', 'LMP_2', 'MD_1x2'} <= tags, explain(proc)
    assert re.search(r'\[\s+(OK|FAIL) \].*MdLammpsBenchmark', out), explain(proc)
    assert 'sanity' not in ''.join(ln for ln in out.splitlines() if 'Failing phase' in ln), \
        explain(proc)
