"""Real ReFrame sessions on this machine with the local MPI stacks.

Each test runs its own session in a temporary HARNESS_VAR_DIR, so the user's
perflogs are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, REPO, fake_prefix, mpi_env, needs, not_passed, perflog, run_reframe

pytestmark = pytest.mark.integration

KERNEL_CHECKS = ('SpmvCheck', 'MdCheck', 'RingCheck', 'StreamCheck')
PAIRING_FIELDS = ('job_completion_time', 'system', 'partition', 'environ', 'kernel', 'mode',
                  'ranks', 'threads', 'size', 'mpi_library')


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-15000:]}\n--- stderr ---\n{proc.stderr[-5000:]}'


@pytest.fixture(scope='module')
def session(tmp_path_factory, stacks) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The whole suite: every kernel, stack, partition and layout."""
    var = tmp_path_factory.mktemp('var')
    # The LAMMPS benchmark has its own test: its speed targets are no unit test.
    return var, run_reframe(var, '-r', '-T', 'benchmark')


def test_every_check_passes_for_every_stack_and_partition(session, stacks):
    _, proc = session
    assert proc.returncode == 0, explain(proc)
    assert not not_passed(proc.stdout, 'local', KERNEL_CHECKS, stacks, ('shm', 'tcp'),
                          ('mpi_2x1', 'masteronly_1x2'))


def test_verdict_checks_judge_every_kernel_on_every_stack_and_partition(session, stacks):
    var, proc = session
    for stack in stacks:
        for part in ('shm', 'tcp'):
            for kernel in ('spmv', 'md', 'ring', 'stream'):
                ok = [ln for ln in proc.stdout.splitlines()
                      if f'HybridVerdict %pair={kernel}/' in ln and '  OK ' in ln
                      and f'@local:{part}+{stack}' in ln]
                assert ok, (kernel, part, stack)
    for rec in perflog(var / 'perflogs' / 'local' / 'shm' / 'HybridVerdict.log'):
        assert rec['mode'].startswith('verdict-') and float(rec['speedup_value']) > 0
        assert rec['verdict_value'] in ('-1', '0', '1')


def test_perflogs_carry_every_pairing_field(session, stacks):
    var, _ = session
    for part in ('shm', 'tcp'):
        for check in KERNEL_CHECKS:
            path = var / 'perflogs' / 'local' / part / f'{check}.log'
            lines = path.read_text().splitlines()
            header = lines[0].split('|')
            for field in PAIRING_FIELDS:
                assert field in header, (path, field)
            rows = [dict(zip(header, ln.split('|'))) for ln in lines[1:]]
            assert {r['environ'] for r in rows} == set(stacks)
            assert {(r['mode'], r['ranks'], r['threads']) for r in rows} >= {
                ('mpi', '2', '1'), ('masteronly', '1', '2')}
            for r in rows:
                assert r['verified'] == 'true' and r['oversubscribed'] == 'false'
                assert float(r['t_total_value']) > 0
                lib = {'openmpi': 'Open MPI', 'mpich': 'MPICH'}[r['environ']]
                assert r['mpi_library'].startswith(lib)


def test_verdict_table_pairs_every_kernel_stack_and_partition(session, stacks, tmp_path):
    var, _ = session
    proc = subprocess.run([str(BIN / 'hybridverdict'), '--perflogs', str(var / 'perflogs'),
                           '--out', str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, explain(proc)
    rows = [ln.split() for ln in proc.stdout.splitlines()
            if ln.split() and ln.split()[-1] in ('WIN', 'LOSS', 'TIE', 'INCONCLUSIVE')]
    got = {(r[0], r[2], r[3]) for r in rows}
    want = {(k, s, p) for k in ('spmv', 'md', 'ring', 'stream') for s in stacks
            for p in ('shm', 'tcp')}
    assert got == want
    assert 'report written to' in proc.stdout
    assert len(list(tmp_path.glob('verdict-*.md'))) == 1


def test_run_report_gives_the_same_verdicts_as_the_perflogs(session, tmp_path):
    var, _ = session
    found = {}
    for name, args in (('perflogs', ['--perflogs', str(var / 'perflogs')]),
                       ('report', ['--run-reports', str(var / 'reports')])):
        proc = subprocess.run([str(BIN / 'hybridverdict'), *args, '--out', str(tmp_path / name)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, explain(proc)
        found[name] = sorted(ln for ln in proc.stdout.splitlines()
                             if ln.split() and ln.split()[-1] in ('WIN', 'LOSS', 'TIE',
                                                                  'INCONCLUSIVE'))
        assert len(list((tmp_path / name).glob('verdict-*.html'))) == 1
    assert found['perflogs'] and found['perflogs'] == found['report']


def test_verdict_listing_has_one_ring_verdict_per_message_size(tmp_path):
    proc = run_reframe(tmp_path, '-n', 'HybridVerdict', '--list', '--system', 'local:shm')
    assert proc.returncode == 0, explain(proc)
    ring = sorted(ln.split()[2] for ln in proc.stdout.splitlines()
                  if ln.startswith('- HybridVerdict %pair=ring/'))
    assert ring == sorted(f'%pair=ring/8,65536,1048576/masteronly_1x2/{size}'
                          for size in ('8B', '64KiB', '1MiB'))
    assert '- HybridVerdict %pair=spmv/' in proc.stdout     # the other kernels as before
    assert not re.search(r'%pair=(spmv|md|stream)/\S+/\S+/', proc.stdout)


def test_the_ring_is_judged_per_message_size_in_reframe_and_the_report(tmp_path, stacks):
    """Issue 25: RingCheck logs t_msg_<bytes> per message size of its sweep, and
    HybridVerdict and the report judge the ring once per message size."""
    var = tmp_path / 'var'
    proc = run_reframe(var, '-r', '--system', 'local:shm', '-p', stacks[0],
                       '-n', 'RingCheck%layout=(mpi_2x1|masteronly_1x2)',
                       '-n', 'HybridVerdict%pair=ring/', env={'HARNESS_REPEAT': '2'})
    assert proc.returncode == 0, explain(proc)
    sizes = ('8B', '64KiB', '1MiB')
    for size in sizes:
        assert any(f'HybridVerdict %pair=ring/8,65536,1048576/masteronly_1x2/{size} ' in ln
                   and '  OK ' in ln for ln in proc.stdout.splitlines()), (size, explain(proc))
    logs = var / 'perflogs' / 'local' / 'shm'
    for rec in perflog(logs / 'RingCheck.log'):
        for n in (8, 65536, 1048576):
            assert float(rec[f't_msg_{n}_value']) > 0 and rec[f't_msg_{n}_unit'] == 's'
    assert sorted(r['size'] for r in perflog(logs / 'HybridVerdict.log')) == sorted(sizes)
    report = subprocess.run([str(BIN / 'hybridverdict'), '--perflogs', str(var / 'perflogs'),
                             '--out', str(tmp_path / 'out')], capture_output=True, text=True)
    assert report.returncode == 0, explain(report)
    ring = [ln.split()[1] for ln in report.stdout.splitlines() if ln.startswith('ring ')]
    assert ring == list(sizes), report.stdout


def test_a_wrong_result_fails_every_check_whatever_its_speed(tmp_path, stacks):
    proc = run_reframe(tmp_path, '-r', '--system', 'local:shm', '-p', stacks[0],
                       '-S', 'KernelBuild.fault_inject=1')
    assert proc.returncode != 0
    for check in KERNEL_CHECKS:
        failed = [ln for ln in proc.stdout.splitlines()
                  if ln.startswith('[     FAIL ]') and check in ln]
        passed = [ln for ln in proc.stdout.splitlines()
                  if ln.startswith('[       OK ]') and check in ln]
        assert len(failed) >= 2 and not passed, (check, explain(proc))
    assert proc.stdout.count('did not verify its result') >= 8, explain(proc)


def test_a_kernel_linked_to_another_stack_fails(tmp_path):
    """Debian's trap: an MPICH prefix whose mpicc is Open MPI's wrapper."""
    needs('openmpi', 'mpich')
    prefix = fake_prefix(tmp_path, 'fake-mpich', 'mpicc.openmpi', 'mpiexec.mpich', 'mpiexec')
    proc = run_reframe(tmp_path / 'var', '-r', '--system', 'local:shm', '-p', 'mpich',
                       '-n', 'StreamCheck%layout=masteronly_1x2',
                       env={'HARNESS_MPICH_PREFIX': str(prefix)})
    assert proc.returncode != 0, explain(proc)
    assert 'was run as stack mpich but reports MPI library "Open MPI' in proc.stdout, explain(proc)


def test_threads_sharing_a_core_fail_the_run_and_name_it(tmp_path, stacks):
    proc = run_reframe(tmp_path, '-r', '--system', 'local:shm', '-p', stacks[0],
                       '-n', 'StreamCheck%layout=masteronly_1x2', '-S', 'binding=one-core')
    assert proc.returncode != 0, explain(proc)
    assert 'oversubscribed run StreamCheck %layout=masteronly_1x2' in proc.stdout, explain(proc)
    assert 'thread 1 and rank 0 thread 0' in proc.stdout, explain(proc)


def test_list_works_with_only_one_stack_installed(tmp_path, stacks):
    """A PATH on which only one stack's wrappers and launchers exist."""
    keep = 'mpich' if 'mpich' in stacks else stacks[0]
    gone = 'openmpi' if keep == 'mpich' else 'mpich'
    hide = {'openmpi': ('openmpi', 'orterun', 'opal_wrapper', 'ompi'),
            'mpich': ('mpich', 'hydra')}[gone]
    only = tmp_path / 'bin'
    only.mkdir()
    for d in os.environ['PATH'].split(os.pathsep):
        if not os.path.isdir(d) or Path(d) == BIN:
            continue
        for name in os.listdir(d):
            if any(h in name for h in hide) or (only / name).exists():
                continue
            (only / name).symlink_to(Path(d) / name)
    env = mpi_env(PATH=f'{BIN}{os.pathsep}{only}', HARNESS_VAR_DIR=str(tmp_path / 'var'))
    env.pop('HARNESS_QUIET')
    proc = subprocess.run([sys.executable, str(BIN / 'reframe'), '-C',
                           str(REPO / 'config' / 'settings.py'), '-c', str(REPO / 'checks'),
                           '--list'], env=env, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, explain(proc)
    for check in KERNEL_CHECKS:
        for layout in ('mpi_', 'masteronly_'):
            # Listed at the top or as a dependency of a verdict check.
            assert re.search(rf'[-^] ?{check} %layout={layout}', proc.stdout), explain(proc)
    assert f'+{keep}' in proc.stdout
    assert f'+{gone}' not in proc.stdout
    assert f'{gone}: left out' in proc.stderr


def test_md_lammps_benchmark_runs_side_by_side(tmp_path, stacks):
    """The benchmark runs and logs its ratios; whether they meet the targets is
    a matter for the benchmark's references, not for a test on a shared box."""
    if 'openmpi' not in stacks:
        pytest.skip("Debian's lmp runs on Open MPI")
    if not shutil.which('lmp'):
        pytest.skip("Debian's lmp is not installed (apt-get install lammps)")
    proc = run_reframe(tmp_path, '-r', '-n', 'MdLammpsBenchmark', '--system', 'local:shm',
                       '-S', 'MdLammpsBenchmark.rounds=2', '-S', 'MdLammpsBenchmark.max_rounds=2')
    # Sanity must pass; a missed speed target shows as a performance failure.
    reasons = [ln for ln in proc.stdout.splitlines() if '* Reason:' in ln]
    assert all('performance error' in r for r in reasons), explain(proc)
    log = (tmp_path / 'perflogs/local/shm/MdLammpsBenchmark.log').read_text().splitlines()
    header, row = log[0].split('|'), dict(zip(log[0].split('|'), log[-1].split('|')))
    for var in ('md_over_lammps_1rank', 'md_over_lammps_2ranks', 'hybrid_over_mpi'):
        assert f'{var}_value' in header
        assert float(row[f'{var}_value']) > 0
    # decided by the one rule (harnesscore.bands); a busy run never fails
    assert row['kernel'] == 'md-vs-lammps' and row['verified'] == 'true', row
    assert row['oversubscribed'] == 'false', row      # md's threads each on a core
    assert row['judgement'] in ('pass', 'fail', 'inconclusive'), row
    assert row['busy'] in ('true', 'false') and float(row['rounds_value']) == 2, row
    if row['busy'] == 'true':
        assert row['judgement'] != 'fail' and row['result'] == 'pass', row
