"""--min-time: timed counts chosen so a run lasts at least a minimum time.

spmv, md and the ring pattern take --min-time S (default 0: today's counts
exactly).  After the warm-up a timed calibration sets the count to
max(requested, enough for S seconds), the same on every rank; the RESULT line
reports the count in its usual key ("iters", "steps"), the calibration's
pace and per-call times.  ctest covers the raised counts and the bad values
(src/tests/*.cmake); these tests check that the count is the one the
calibration asks for (no timed assertion: the machine is shared) and the bound
on the serial run behind e_mt.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import STACKS, kernel_results, mpi_env
from test_kernels import cmake_build


@pytest.fixture(scope='module')
def build(stacks, tmp_path_factory) -> tuple[str, Path]:
    return stacks[0], cmake_build(stacks[0], tmp_path_factory.mktemp('min_time') / 'b')


def result(build: tuple[str, Path], ranks: int, threads: int, kernel: str, *args: str) -> dict:
    stack, path = build
    proc = subprocess.run([shutil.which(STACKS[stack][1]), '-n', str(ranks), str(path / kernel),
                           *args], env=mpi_env(OMP_NUM_THREADS=str(threads)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return kernel_results(proc.stdout)[-1]


def wanted(requested: int, min_time: float, pace: float) -> int:
    """max(requested, the calls that last min_time at the calibration's pace)."""
    return max(requested, math.ceil(min_time / pace))


def test_spmv_count_follows_the_calibration(build):
    res = result(build, 2, 1, 'spmv', '--n', '4', '--iters', '1', '--min-time', '0.5')
    assert res['verified'] is True and res['iters_requested'] == 1 and res['iters'] > 1
    assert res['calib_calls'] >= 1 and res['calib_t_call_s'] > 0
    # the pace is printed with 9 digits: ceil() may differ by one
    assert abs(res['iters'] - wanted(1, 0.5, res['calib_t_call_s'])) <= 1
    assert res['t_call_s'] == pytest.approx(res['t_total_s'] / res['iters'], rel=1e-6)


def test_md_steps_follow_the_calibration(build):
    res = result(build, 1, 1, 'md', '--cells-per-side', '5', '--steps', '2', '--min-time', '0.3')
    assert res['verified'] is True and res['steps_requested'] == 2 and res['steps'] > 2
    assert res['calib_steps'] == 2  # min(--steps, --rebuild-every)
    assert abs(res['steps'] - wanted(2, 0.3, res['calib_t_step_s'])) <= 1
    assert res['t_step_s'] == pytest.approx(res['t_total_s'] / res['steps'], rel=1e-6)


def test_serial_box_is_bounded_by_a_small_count(build):
    """The serial run behind e_mt does a node's box on one thread: with a
    small --iters and --min-time it runs max(iters, min_time / pace) calls,
    after a calibration of one call when a call is slower than min_time/10."""
    res = result(build, 1, 1, 'spmv', '--mode', 'serial', '--decomp-threads', '8', '--n', '24',
                 '--iters', '2', '--warmup', '0', '--min-time', '0.02')
    assert res['verified'] is True and res['decomp_threads'] == 8
    pace = res['calib_t_call_s']
    if pace >= 0.002:
        assert res['calib_calls'] == 1
    assert abs(res['iters'] - wanted(2, 0.02, pace)) <= 1


def test_min_time_zero_keeps_the_counts(build):
    res = result(build, 1, 1, 'spmv', '--n', '4', '--iters', '7')
    assert (res['iters'], res['calib_calls'], res['min_time_s']) == (7, 0, 0)
    res = result(build, 1, 1, 'md', '--cells-per-side', '5', '--steps', '9')
    assert (res['steps'], res['steps_requested'], res['calib_steps']) == (9, 9, 0)
