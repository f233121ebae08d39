"""The ring's pingpong and bw measure as osu_latency and osu_bw 5.9 do, and a
slowed-down ring (fault injection) reports less bandwidth than a normal one.

* ctest's ring_osu_counts_* cases assert OSU's message counts and skipped
  warm-up iterations (tests/test_kernels.py runs every ctest);
* a build with -DKERNEL_FAULT_SLOW=50 stretches every timed bw window by half
  of its own time: its bandwidth, measured in the same run alternating with a
  normal build, is about 2/3 of the normal one (a ratio, not an absolute time),
  while its data still verifies: a performance regression that an accuracy
  check must catch, not a wrong result.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from conftest import STACKS, kernel_results, mpi_env, perflog
from test_kernels import cmake_build

SLOW_PCT = 50


def bw_results(stack: str, ring: Path, *args: str) -> list[dict]:
    launcher = shutil.which(STACKS[stack][1])
    proc = subprocess.run([launcher, '-n', '2', str(ring), '--pattern', 'bw', *args],
                          env=mpi_env(OMP_NUM_THREADS='1'), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return kernel_results(proc.stdout)


@pytest.fixture(scope='module')
def builds(stacks, tmp_path_factory) -> tuple[str, Path, Path]:
    stack = stacks[0]
    root = tmp_path_factory.mktemp('ring_osu')
    normal = cmake_build(stack, root / 'normal')
    slow = cmake_build(stack, root / 'slow', f'-DKERNEL_FAULT_SLOW={SLOW_PCT}')
    return stack, normal / 'ring', slow / 'ring'


def test_slowed_ring_reports_lower_bandwidth_in_the_same_run(builds):
    stack, normal, slow = builds
    args = ('--sizes', '8K,64K', '--iters', '20', '--skip', '2', '--reps', '5')
    ratios: dict[int, list[float]] = {}
    for _ in range(3):  # alternating, so both see the same machine
        fast_res = {r['size']: r for r in bw_results(stack, normal, *args)}
        slow_res = {r['size']: r for r in bw_results(stack, slow, *args)}
        for size, res in slow_res.items():
            assert res['verified'] is True and res['fault_slow_pct'] == SLOW_PCT
            assert 'fault_slow_pct' not in fast_res[size]
            ratios.setdefault(size, []).append(
                res['bandwidth_MBps'] / fast_res[size]['bandwidth_MBps'])
    for size, values in ratios.items():
        # expected 100/(100+50) = 0.67; a clean run of the same build gives ~1
        assert statistics.median(values) < 0.85, (size, values)


def test_bw_json_says_how_it_was_timed(builds):
    stack, normal, _ = builds
    (res,) = bw_results(stack, normal, '--sizes', '16K', '--reps', '1')
    assert (res['iters'], res['warmup'], res['skip'], res['window']) == (20, 2, 2, 64)
    assert res['timer'] == 'sender, per iteration (OSU 5.9)'
    # bandwidth = size * window * iters / (the sender's summed window times)
    assert res['bandwidth_MBps'] == pytest.approx(
        16384 * 64 * 20 / res['t_total_s'] / 1e6, rel=1e-6)


@pytest.mark.integration
def test_a_session_builds_the_slowed_ring_on_request(tmp_path, stacks):
    """``-S KernelBuild.fault_slow=P`` reaches the build (its own build folder,
    the perflog's build field) and the ring it runs (every bw RESULT line says
    so); a percent out of range is refused before anything is built."""
    from conftest import run_reframe
    stack = stacks[0]
    opts = ('-n', 'RingBwCheck', '--system', 'local:shm', '-S', 'sizes=64K:128K')
    proc = run_reframe(tmp_path, *opts, '-S', f'KernelBuild.fault_slow={SLOW_PCT}', '-r',
                       env={'HARNESS_STACKS': stack})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert list((tmp_path / 'build').glob(f'{stack}-release-*-fault-slow{SLOW_PCT}')), \
        sorted(p.name for p in (tmp_path / 'build').iterdir())
    row = perflog(tmp_path / 'perflogs' / 'local' / 'shm' / 'RingBwCheck.log')[-1]
    assert row['build_spec'].endswith(f'fault_slow={SLOW_PCT}'), row['build_spec']
    outs = list((tmp_path / 'output').rglob('rfm_job.out'))
    results = [r for out in outs for r in kernel_results(out.read_text())]
    assert results and all(r['fault_slow_pct'] == SLOW_PCT and r['verified'] for r in results)
    bad = run_reframe(tmp_path / 'bad', *opts, '-S', 'KernelBuild.fault_slow=-5', '-r',
                      env={'HARNESS_STACKS': stack})
    assert bad.returncode != 0
    assert 'KernelBuild.fault_slow must be a percent from 0 (off) to 1000, got -5' in bad.stdout, \
        bad.stdout[-5000:]
