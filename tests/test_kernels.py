"""The kernels, built with CMake for every MPI stack present, under ctest.

* warnings are errors (-Wall -Wextra -Werror);
* the sanitizer build (address, undefined) passes the same ctest suite;
* a build that corrupts one value (KERNEL_FAULT_INJECT) fails every kernel's
  own verification, whatever its speed; with KERNEL_FAULT_HANG=<kernel> that
  build hangs rank 0 of that kernel instead (the time-limit test's hung rank);
  with KERNEL_FAULT=<name> it injects one named defect instead (a stale halo, a
  list without skin, a wrong reduction, ...), each of which must fail too;
* the ring's verification failure path (which rank received wrong bytes from
  whom, exit 3) runs on every stack found: it reduces with MPI_MIN only, which
  every MPI build supports (MVAPICH2 --disable-fortran refuses MPI_MINLOC).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, STACKS, kernel_results, mpi_env, present_stacks

KERNEL_RUNS = {
    'spmv': ['--n', '8', '--iters', '3'],
    'md': ['--cells-per-side', '5', '--steps', '10'],
    'ring': ['--pattern', 'ring', '--rank-as-node', '--sizes', '8,4096', '--iters-scale', '0.01'],
    'stream': ['--n', '10000', '--iters', '2'],
}


def cmake_build(stack: str, build_dir: Path, *options: str) -> Path:
    cc, launcher = STACKS[stack]
    configure = ['cmake', '-S', str(REPO / 'src'), '-B', str(build_dir),
                 f'-DMPI_C_COMPILER={shutil.which(cc)}', f'-DCMAKE_C_COMPILER={shutil.which(cc)}',
                 f'-DMPIEXEC_EXECUTABLE={shutil.which(launcher)}', *options]
    for cmd in (configure, ['cmake', '--build', str(build_dir), '-j', str(os.cpu_count() or 1)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f'{" ".join(cmd)}\n{proc.stdout}\n{proc.stderr}'
    return build_dir


def ctest(build_dir: Path, **env: str) -> None:
    proc = subprocess.run(['ctest', '--output-on-failure', '--timeout', '120'], cwd=build_dir,
                          env=mpi_env(**env), capture_output=True, text=True, timeout=1200)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    assert '100% tests passed' in proc.stdout


def ctest_cases(build_dir: Path, pattern: str, timeout: int) -> str:
    """ctest's cases matching `pattern`, verbose: they pass; ctest's output."""
    proc = subprocess.run(['ctest', '-V', '-R', pattern, '--timeout', '120'], cwd=build_dir,
                          env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    return proc.stdout


@pytest.fixture(params=present_stacks() or ['none'])
def stack(request: pytest.FixtureRequest) -> str:
    """Every MPI stack present, one test each."""
    if request.param == 'none':
        pytest.skip('no MPI stack installed')
    return request.param


def test_ctest_warnings_as_errors(stack, tmp_path):
    build = cmake_build(stack, tmp_path / 'build', '-DCMAKE_C_FLAGS=-Werror')
    ctest(build)


def test_ctest_under_sanitizers(stack, tmp_path):
    build = cmake_build(stack, tmp_path / 'asan', '-DCMAKE_BUILD_TYPE=Debug',
                        '-DKERNEL_SANITIZE=address,undefined')
    # MPI libraries keep allocations alive at exit: leaks are theirs, not ours.
    ctest(build, ASAN_OPTIONS='detect_leaks=0:abort_on_error=1',
          UBSAN_OPTIONS='halt_on_error=1:print_stacktrace=1')


@pytest.fixture(scope='module')
def fault_build(stacks, tmp_path_factory) -> tuple[str, Path]:
    return stacks[-1], cmake_build(stacks[-1], tmp_path_factory.mktemp('fault'),
                                   '-DKERNEL_FAULT_INJECT=ON')


@pytest.mark.parametrize('kernel', sorted(KERNEL_RUNS))
@pytest.mark.parametrize('layout', ['mpi 2 1', 'masteronly 1 2'])
def test_a_corrupted_value_fails_verification(fault_build, kernel, layout):
    stack, build = fault_build
    mode, ranks, threads = layout.split()
    launcher = shutil.which(STACKS[stack][1])
    proc = subprocess.run([launcher, '-n', ranks, str(build / kernel), '--mode', mode,
                           *KERNEL_RUNS[kernel]], env=mpi_env(OMP_NUM_THREADS=threads),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f'{kernel}: verification FAILED' in proc.stderr
    assert '"verified":false' in proc.stdout


# KERNEL_FAULT=<name> (fault-injection builds): one defect that an earlier,
# weaker verification let pass ("verified":true), reproduced on purpose.
# name -> (kernel, mode, ranks, threads, arguments)
NAMED_FAULTS = {
    # the halo exchanged on the first call only (ghosts stale ever after)
    'spmv_halo_once': ('spmv', 'funneled', '2', '2', ['--n', '6', '--iters', '3']),
    # a face of rows that read the halo counted as interior
    'spmv_face_as_interior': ('spmv', 'funneled', '2', '2', ['--n', '6', '--iters', '3']),
    # Verlet lists without the skin; 21 steps: 1 step after a rebuild
    'md_list_no_skin': ('md', 'mpi', '2', '1', ['--cells-per-side', '6', '--steps', '21']),
    # MPI_MAX instead of MPI_SUM in the global energy sums
    'md_thermo_max': ('md', 'mpi', '2', '1', KERNEL_RUNS['md']),
    # pairs with ghosts left out of the half lists
    'md_drop_ghost_pairs': ('md', 'masteronly', '1', '2', KERNEL_RUNS['md']),
    # pairs with ghosts count their whole virial instead of half
    'md_virial_double': ('md', 'mpi', '2', '1', KERNEL_RUNS['md']),
    # masteronly ring: a message of size bytes where the bandwidth counts k x size
    'ring_msg_bytes': ('ring', 'masteronly', '1', '2', KERNEL_RUNS['ring']),
    # the timed triads cover half the array after the first repetition
    'stream_half_triad': ('stream', 'mpi', '2', '1', KERNEL_RUNS['stream']),
}


@pytest.mark.parametrize('fault', sorted(NAMED_FAULTS))
def test_a_named_fault_fails_verification(fault_build, fault):
    """Each named fault fails its kernel's own verification (exit 3, "verified":false);
    the same run with KERNEL_FAULT=none (no fault, no corrupted value) verifies and
    says no fault was injected."""
    stack, build = fault_build
    kernel, mode, ranks, threads = NAMED_FAULTS[fault][:4]
    cmd = [shutil.which(STACKS[stack][1]), '-n', ranks, str(build / kernel), '--mode', mode,
           *NAMED_FAULTS[fault][4]]
    runs = {}
    for name in (fault, 'none'):
        runs[name] = subprocess.run(cmd, env=mpi_env(OMP_NUM_THREADS=threads, KERNEL_FAULT=name),
                                    capture_output=True, text=True, timeout=120)
    bad, good = runs[fault], runs['none']
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert f'{kernel}: verification FAILED' in bad.stderr
    assert '"verified":false' in bad.stdout
    assert '"fault_injected":1' in bad.stdout     # the named fault said, not 0
    assert good.returncode == 0, good.stdout + good.stderr
    assert '"verified":true' in good.stdout and '"verified":false' not in good.stdout
    assert '"fault_injected":0' in good.stdout


def test_an_unknown_fault_name_is_refused(fault_build):
    # A misspelt KERNEL_FAULT ran with nothing injected and verified: a fault
    # test of it passed without testing anything.
    stack, build = fault_build
    proc = subprocess.run([shutil.which(STACKS[stack][1]), '-n', '1', str(build / 'stream')],
                          env=mpi_env(KERNEL_FAULT='stream_half_triads'),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'KERNEL_FAULT=stream_half_triads is not a named fault' in proc.stderr


def test_named_fault_ctest_cases(fault_build):
    """ctest's named_fault_* cases: each run fails with status 3 and says why."""
    _, build = fault_build
    out = ctest_cases(build, '^named_fault_', timeout=900)
    assert '0 tests failed' in out
    assert out.count('failed as expected (3): ') >= 8


def test_kernel_fault_hang_hangs_rank_0_of_that_kernel_only(fault_build):
    stack, build = fault_build
    launcher = shutil.which(STACKS[stack][1])
    env = mpi_env(OMP_NUM_THREADS='1', KERNEL_FAULT_HANG='stream')
    proc = subprocess.Popen([launcher, '-n', '2', str(build / 'stream'), *KERNEL_RUNS['stream']],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=8)
        pytest.fail(f'stream ended ({proc.returncode}) instead of hanging:\n{out}\n{err}')
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    assert 'stream: KERNEL_FAULT_HANG=stream: rank 0 hangs on purpose' in err
    assert 'RESULT' not in out
    # The hang is then the only fault: another kernel of the same build verifies.
    ring = subprocess.run([launcher, '-n', '2', str(build / 'ring'), *KERNEL_RUNS['ring']],
                          env=env, capture_output=True, text=True, timeout=120)
    assert ring.returncode == 0, ring.stderr
    assert '"verified":true' in ring.stdout and '"verified":false' not in ring.stdout


def test_ring_verification_failure_on_every_stack(stack, tmp_path):
    """ctest's ring_fault_* cases: pingpong, bw (3 ranks), ring mpi and multiple."""
    build = cmake_build(stack, tmp_path / 'fault', '-DKERNEL_FAULT_INJECT=ON')
    out = ctest_cases(build, '^ring_fault_', timeout=600)
    assert '100% tests passed, 0 tests failed out of 4' in out
    # Each case failed with status 3 and named the rank and the sender.
    assert out.count('failed as expected (3): ') == 4
    assert 'first on rank 2 in the message from rank 0' in out


@pytest.mark.parametrize('layout', ['mpi 2 1', 'masteronly 1 2'])
def test_ring_results_give_a_time_per_exchange_for_every_message_size(layout, stacks, tmp_path):
    """What RingCheck.message_time reads for its t_msg_<bytes> (the ring judged per
    message size, issue 25): one RESULT line per size, each with its size, k and a
    time per exchange t_call_s = t_total_s / (reps x iters)."""
    stack = stacks[0]
    build = cmake_build(stack, tmp_path / 'build')
    mode, ranks, threads = layout.split()
    proc = subprocess.run([shutil.which(STACKS[stack][1]), '-n', ranks, str(build / 'ring'),
                           '--mode', mode, *KERNEL_RUNS['ring']],
                          env=mpi_env(OMP_NUM_THREADS=threads), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = kernel_results(proc.stdout)
    assert [r['size'] for r in results] == [8, 4096]
    for r in results:
        assert r['k'] == (int(threads) if mode == 'masteronly' else 1)   # rank-as-node
        assert r['t_call_s'] > 0
        assert r['t_call_s'] == pytest.approx(r['t_total_s'] / (r['reps'] * r['iters']))
