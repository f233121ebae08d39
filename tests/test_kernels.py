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

import json
import os
import shlex
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


def cmake_configure(stack: str, build_dir: Path, *options: str,
                    src: Path = REPO / 'src') -> list[str]:
    """The configure command of the kernels in `src` for `stack`'s wrapper and launcher."""
    cc, launcher = STACKS[stack]
    return ['cmake', '-S', str(src), '-B', str(build_dir),
            f'-DMPI_C_COMPILER={shutil.which(cc)}', f'-DCMAKE_C_COMPILER={shutil.which(cc)}',
            f'-DMPIEXEC_EXECUTABLE={shutil.which(launcher)}', *options]


def cmake_build(stack: str, build_dir: Path, *options: str) -> Path:
    configure = cmake_configure(stack, build_dir, *options)
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


def run_kernel(stack: str, build: Path, kernel: str, ranks: str, *args: str,
               **env: str) -> subprocess.CompletedProcess[str]:
    """`kernel` of `build` on `ranks` ranks under the stack's launcher, with mpi_env(**env)."""
    return subprocess.run([shutil.which(STACKS[stack][1]), '-n', ranks, str(build / kernel), *args],
                          env=mpi_env(**env), capture_output=True, text=True, timeout=120)


def run_layout(stack: str, build: Path, kernel: str,
               layout: str) -> subprocess.CompletedProcess[str]:
    """`kernel` with its KERNEL_RUNS arguments in `layout`: 'MODE RANKS THREADS'."""
    mode, ranks, threads = layout.split()
    return run_kernel(stack, build, kernel, ranks, '--mode', mode, *KERNEL_RUNS[kernel],
                      OMP_NUM_THREADS=threads)


@pytest.fixture(params=present_stacks() or ['none'])
def stack(request: pytest.FixtureRequest) -> str:
    """Every MPI stack present, one test each."""
    if request.param == 'none':
        pytest.skip('no MPI stack installed')
    return request.param


def test_ctest_warnings_as_errors(stack, tmp_path):
    build = cmake_build(stack, tmp_path / 'build', '-DCMAKE_C_FLAGS=-Werror')
    ctest(build)


def test_a_pure_mpi_build_compiles_with_warnings_as_errors(stacks, tmp_path):
    # KERNEL_OPENMP=OFF (Spack's ~openmp): spmv's funneled call left a variable
    # that only its omp pragma reads unused, and -Werror failed the build
    cmake_build(stacks[0], tmp_path / 'pure-mpi', '-DKERNEL_OPENMP=OFF',
                '-DCMAKE_C_FLAGS=-Werror')


def test_ctest_under_sanitizers(stack, tmp_path):
    # float-cast-overflow is not part of gcc's "undefined": a double beyond an
    # int converted to int (md's bins of a dilute box or of a diverged run) is
    # undefined behaviour that only it reports
    build = cmake_build(stack, tmp_path / 'asan', '-DCMAKE_BUILD_TYPE=Debug',
                        '-DKERNEL_SANITIZE=address,undefined,float-cast-overflow')
    # MPI libraries keep allocations alive at exit: leaks are theirs, not ours.
    ctest(build, ASAN_OPTIONS='detect_leaks=0:abort_on_error=1',
          UBSAN_OPTIONS='halt_on_error=1:print_stacktrace=1')


@pytest.mark.parametrize('script, passes', [
    ('echo boom >&2 && exit 3', True),
    # the expected message, then no exit: a hang killed at the timeout ("Process
    # terminated due to timeout") or a death by a signal passed as "failed as
    # expected"; the signal stands for the timeout's 100 s here
    ('echo boom >&2 && kill -SEGV $$', False),
    ('echo boom >&2 && kill -KILL $$', False),
])
def test_an_expected_failure_is_an_exit_status(script, passes, tmp_path):
    proc = subprocess.run(['cmake', '-DREGEX=boom', '-DSTATUS=', '-P',
                           str(REPO / 'src' / 'tests' / 'expect_failure.cmake'),
                           'sh', '-c', script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode == 0) == passes, proc.stdout + proc.stderr
    if not passes:
        assert 'expected an exit status, but the command did not exit' in proc.stderr


def _configure(src: Path, stack: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmake_configure(stack, src / 'build', *options, src=src),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('call, says', [
    # a ';' in a message split the regex: ring's fault cases checked half of it
    ('kernel_test(x NP 1 THREADS 1 EXPECT_STATUS 3 EXPECT_FAIL "a;b" COMMAND ring)',
     'x: unknown arguments: b'),
    ('kernel_test(x NP 1 THREADS 1 EXPECT_STATUS 2 COMMAND ring)',
     'kernel_test(x): EXPECT_STATUS goes with EXPECT_FAIL'),
    ('kernel_test(x THREADS 1 COMMAND ring)', 'x: NP is required'),
    ('uneven_threads_test(x COMMAND ring)', 'x: EXPECT_FAIL is required'),
])
def test_a_kernel_tests_words_it_does_not_take_stop_the_configure(stacks, tmp_path, call,
                                                                  says):
    """A ctest case's call with a word its function does not take, or without
    one it needs, was built into a test that checked less than it said."""
    src = Path(shutil.copytree(REPO / 'src', tmp_path / 'src'))
    with open(src / 'tests' / 'ring.cmake', 'a', encoding='utf-8') as fh:
        fh.write(call + '\n')
    proc = _configure(src, stacks[0])
    assert proc.returncode != 0 and says in ' '.join(proc.stderr.split()), proc.stderr


def test_the_launchers_postflags_follow_the_kernel_in_every_context(stacks, tmp_path):
    """FindMPI's MPIEXEC_POSTFLAGS (after the program, before its arguments) were
    left out of every launched ctest case."""
    src = Path(shutil.copytree(REPO / 'src', tmp_path / 'src'))
    proc = _configure(src, stacks[0], '-DMPIEXEC_POSTFLAGS=--post-a --post-b')
    assert proc.returncode == 0, proc.stderr
    shown = subprocess.run(['ctest', '--show-only=json-v1'], cwd=src / 'build',
                           capture_output=True, text=True, check=True).stdout
    tests = {t['name']: t.get('command', []) for t in json.loads(shown)['tests']}
    post = ['--post-a', '--post-b']
    kernels = ('/spmv', '/md', '/ring', '/stream')

    def launches(cmd: list[str]) -> list[list[str]]:
        """Each launch of a kernel in `cmd`: its file and the words after it
        (a script's -DEXE=<file;words> too)."""
        words = [a.removeprefix('-DEXE=').split(';') if a.startswith('-DEXE=') else cmd[i:]
                 for i, a in enumerate(cmd)]
        return [w for w in words if w[0].endswith(kernels)]
    for name, contexts in (('ring_bad_skip', 1), ('md_uneven_threads', 2),
                           ('md_layouts_agree', 1), ('md_dilute_memory', 1)):
        assert len(launches(tests[name])) == contexts, tests[name]
    for name, cmd in tests.items():
        assert all(w[1:3] == post for w in launches(cmd)), (name, cmd)


@pytest.fixture(scope='module')
def fault_build(stacks, tmp_path_factory) -> tuple[str, Path]:
    return stacks[-1], cmake_build(stacks[-1], tmp_path_factory.mktemp('fault'),
                                   '-DKERNEL_FAULT_INJECT=ON')


@pytest.mark.parametrize('kernel', sorted(KERNEL_RUNS))
@pytest.mark.parametrize('layout', ['mpi 2 1', 'masteronly 1 2'])
def test_a_corrupted_value_fails_verification(fault_build, kernel, layout):
    stack, build = fault_build
    proc = run_layout(stack, build, kernel, layout)
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
    # bw's verified window: its last message in the slot of its round's first (2 MiB:
    # rounds of 32 slots; slots shared as j mod 32 and one pattern let it pass)
    'ring_bw_slot': ('ring', 'mpi', '2', '1', ['--pattern', 'bw', '--sizes', '2M', '--iters', '1',
                                               '--skip', '0', '--reps', '1']),
    # the timed triads cover half the array after the first repetition
    'stream_half_triad': ('stream', 'mpi', '2', '1', KERNEL_RUNS['stream']),
}


@pytest.mark.parametrize('fault', sorted(NAMED_FAULTS))
def test_a_named_fault_fails_verification(fault_build, fault):
    """Each named fault fails its kernel's own verification (exit 3, "verified":false);
    the same run with KERNEL_FAULT=none (no fault, no corrupted value) verifies and
    says no fault was injected."""
    stack, build = fault_build
    kernel, mode, ranks, threads, args = NAMED_FAULTS[fault]
    runs = {name: run_kernel(stack, build, kernel, ranks, '--mode', mode, *args,
                             OMP_NUM_THREADS=threads, KERNEL_FAULT=name)
            for name in (fault, 'none')}
    bad, good = runs[fault], runs['none']
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert f'{kernel}: verification FAILED' in bad.stderr
    assert '"verified":false' in bad.stdout
    assert '"fault_injected":1' in bad.stdout     # the named fault said, not 0
    assert good.returncode == 0, good.stdout + good.stderr
    assert '"verified":true' in good.stdout and '"verified":false' not in good.stdout
    assert '"fault_injected":0' in good.stdout


def _md_run(fault_build, *args: str) -> subprocess.CompletedProcess[str]:
    """md of the fault build with no fault injected (KERNEL_FAULT=none), 1 rank."""
    stack, build = fault_build
    return run_kernel(stack, build, 'md', '1', *args, OMP_NUM_THREADS='1', KERNEL_FAULT='none')


@pytest.mark.parametrize('temp, scale', [('4.22', 'e_kin_0'), ('1.44', 'e_total_0')])
def test_md_energy_drift_is_relative_to_a_scale_that_cannot_vanish(fault_build, temp, scale):
    """At --temp 4.22 E_0 is -0.015 per atom: |E_end - E_0| / |E_0| made an absolute
    drift of 1e-4 per atom a relative 6.9e-3 and FAILED a correct run. The scale is
    max(|E_0|, E_kin_0): E_kin_0 there, |E_0| (as before) at the default 1.44."""
    proc = _md_run(fault_build, '--cells-per-side', '5', '--steps', '250', '--dt', '0.001',
                   '--temp', temp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = kernel_results(proc.stdout)[0]
    assert r['verified'] is True
    assert r['drift'] < 1e-4
    assert r['drift'] == pytest.approx(abs(r['e_total_end'] - r['e_total_0']) / abs(r[scale]),
                                       rel=1e-2)


def test_md_long_run_drift_bound_grows_with_the_steps(fault_build):
    """A fixed rebuild interval leaks energy steadily through its dangerous builds
    (counted, not failed): --temp 1.7 drifts ~1.9e-3 in 20000 steps, which the fixed
    --drift-tol 1e-3 failed. Beyond 5000 steps the bound is --drift-tol x steps/5000."""
    proc = _md_run(fault_build, '--cells-per-side', '4', '--temp', '1.7', '--steps', '20000')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = kernel_results(proc.stdout)[0]
    assert r['verified'] is True and r['drift_tol'] == 0.001
    assert 0.001 < r['drift'] < 0.004
    assert '(limit 0.001 x 20000/5000 steps = 0.004)' in proc.stdout


def test_an_unknown_fault_name_is_refused(fault_build):
    # A misspelt KERNEL_FAULT ran with nothing injected and verified: a fault
    # test of it passed without testing anything.
    stack, build = fault_build
    proc = run_kernel(stack, build, 'stream', '1', KERNEL_FAULT='stream_half_triads')
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
    hang = {'OMP_NUM_THREADS': '1', 'KERNEL_FAULT_HANG': 'stream'}
    proc = subprocess.Popen([launcher, '-n', '2', str(build / 'stream'), *KERNEL_RUNS['stream']],
                            env=mpi_env(**hang), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=8)
        pytest.fail(f'stream ended ({proc.returncode}) instead of hanging:\n{out}\n{err}')
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    assert 'stream: KERNEL_FAULT_HANG=stream: rank 0 hangs on purpose' in err
    assert 'RESULT' not in out
    # The hang is then the only fault: another kernel of the same build verifies.
    ring = run_kernel(stack, build, 'ring', '2', *KERNEL_RUNS['ring'], **hang)
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
    proc = run_layout(stack, build, 'ring', layout)
    assert proc.returncode == 0, proc.stderr
    mode, _, threads = layout.split()
    results = kernel_results(proc.stdout)
    assert [r['size'] for r in results] == [8, 4096]
    for r in results:
        assert r['k'] == (int(threads) if mode == 'masteronly' else 1)   # rank-as-node
        assert r['t_call_s'] > 0
        assert r['t_call_s'] == pytest.approx(r['t_total_s'] / (r['reps'] * r['iters']))


# -- the core of each thread (RESULT "cores") and the clash check on it -----------

def sys_core(cpu: int) -> int:
    """The core of logical CPU `cpu` as /sys gives it: the lowest CPU of the same
    physical_package_id, die_id (0 where absent) and core_id."""
    def place(c: int) -> tuple[str, ...]:
        topo = Path(f'/sys/devices/system/cpu/cpu{c}/topology')
        die = topo / 'die_id'
        return (topo.joinpath('physical_package_id').read_text().strip(),
                die.read_text().strip() if die.exists() else '0',
                topo.joinpath('core_id').read_text().strip())
    return min(c for c in range(os.cpu_count() or 1)
               if Path(f'/sys/devices/system/cpu/cpu{c}/topology').is_dir()
               and place(c) == place(cpu))


@pytest.fixture(scope='module')
def plain_build(stacks, tmp_path_factory) -> tuple[str, Path]:
    return stacks[-1], cmake_build(stacks[-1], tmp_path_factory.mktemp('plain'))


@pytest.mark.parametrize('layout', ['mpi 2 1', 'masteronly 1 2'])
def test_result_gives_the_core_of_each_threads_cpu(plain_build, layout):
    """"cores" has the shape of "cpus" and gives, for each thread, the core of its
    CPU as /sys says (on a machine without hardware threads: the CPU itself)."""
    stack, build = plain_build
    proc = run_layout(stack, build, 'stream', layout)
    assert proc.returncode == 0, proc.stderr
    _, ranks, threads = layout.split()
    res = kernel_results(proc.stdout)[-1]
    assert [len(c) for c in res['cores']] == [len(c) for c in res['cpus']] \
        == [int(threads)] * int(ranks)
    assert res['cores'] == [[sys_core(cpu) for cpu in cpus] for cpus in res['cpus']], res


def test_two_hardware_threads_of_one_core_are_found_sharing_it(plain_build, tmp_path):
    """The clash check on a fake node of 1 core with 2 hardware threads (cpu1's
    core_id made cpu0's in a private mount namespace): two threads on cpu0 and
    cpu1 are on one core, and the run is oversubscribed.  Before, the check
    compared logical CPUs and passed it."""
    from harnesslib.base import KernelCheck
    stack, build = plain_build
    if os.geteuid() != 0 or not shutil.which('unshare') or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip('needs root, unshare and cpus 0 and 1')
    mounts = []
    for name in ('physical_package_id', 'die_id', 'core_id'):
        real = Path(f'/sys/devices/system/cpu/cpu0/topology/{name}')
        if real.exists():
            (tmp_path / name).write_text(real.read_text())
            mounts.append(f'mount --bind {shlex.quote(str(tmp_path / name))} '
                          f'/sys/devices/system/cpu/cpu1/topology/{name} || exit 99; ')
    script = ''.join(mounts) + 'exec "$@"'
    cmd = ['unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'sh',
           shutil.which(STACKS[stack][1]), '-n', '1', str(build / 'stream'),
           '--mode', 'masteronly', *KERNEL_RUNS['stream']]
    proc = subprocess.run(cmd, env=mpi_env(OMP_NUM_THREADS='2', OMP_PLACES='{0},{1}',
                                           OMP_PROC_BIND='close'),
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 99:
        pytest.skip(f'cannot fake a core_id here: {proc.stderr.strip()}')
    assert proc.returncode == 0, proc.stderr
    res = kernel_results(proc.stdout)[-1]
    assert res['cpus'] == [[0, 1]] and res['cores'] == [[0, 0]], res
    assert KernelCheck._shared_cores(None, res) == [
        f'rank 0 thread 1 and rank 0 thread 0 on {res["hosts"][0]} core 0 '
        '(hardware threads cpu 1 and cpu 0)']


def test_shared_cores_compares_cores_where_the_kernel_gives_them():
    from harnesslib.base import KernelCheck
    shared = KernelCheck._shared_cores
    # The auditor's fake node: 2 ranks on the 2 hardware threads of one core.
    smt = {'hosts': ['vm', 'vm'], 'cpus': [[0], [1]], 'cores': [[0], [0]]}
    assert shared(None, smt) == [
        'rank 1 thread 0 and rank 0 thread 0 on vm core 0 (hardware threads cpu 1 and cpu 0)']
    assert shared(None, {**smt, 'hosts': ['a', 'b']}) == []          # one core on each host
    # Without SMT the cores are the CPUs: the clashes (and their words) as before.
    one = {'hosts': ['vm'], 'cpus': [[1, 1]], 'cores': [[1, 1]]}
    assert shared(None, one) == ['rank 0 thread 1 and rank 0 thread 0 on vm core 1']
    assert shared(None, {'hosts': ['vm'], 'cpus': [[0, 1]], 'cores': [[0, 1]]}) == []
    # No cores (an older kernel), or a thread's core unknown: the CPUs, as before.
    assert shared(None, {'hosts': ['vm'], 'cpus': [[0, 1]]}) == []
    assert shared(None, {'hosts': ['vm'], 'cpus': [[0, 1]], 'cores': [[0, -1]]}) == []
    assert shared(None, {'hosts': ['vm'], 'cpus': [[1, 1]], 'cores': [[0, -1]]}) == [
        'rank 0 thread 1 and rank 0 thread 0 on vm core 1']
