"""--min-time: timed counts chosen so a run lasts at least a minimum time.

spmv, md and the ring pattern take --min-time S (default 0: today's counts
exactly).  After the warm-up a timed calibration sets the count to
max(requested, enough for S seconds), the same on every rank; the RESULT line
reports the count in its usual key ("iters", "steps") and per-call times.
ctest covers the raised counts and the bad values (src/tests/*.cmake); these
tests check the durations and the bound on the serial run behind e_mt.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import STACKS, mpi_env, present_stacks
from test_kernels import cmake_build


@pytest.fixture(scope='module')
def build(tmp_path_factory) -> tuple[str, Path]:
    stacks = present_stacks()
    if not stacks:
        pytest.skip('no MPI stack installed')
    return stacks[0], cmake_build(stacks[0], tmp_path_factory.mktemp('min_time') / 'b')


def result(build: tuple[str, Path], ranks: int, threads: int, kernel: str, *args: str) -> dict:
    stack, path = build
    proc = subprocess.run([shutil.which(STACKS[stack][1]), '-n', str(ranks), str(path / kernel),
                           *args], env=mpi_env(OMP_NUM_THREADS=str(threads)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    return json.loads(lines[-1][len('RESULT '):])


def test_spmv_lasts_about_min_time(build):
    res = result(build, 2, 1, 'spmv', '--n', '4', '--iters', '1', '--min-time', '0.5')
    assert res['verified'] is True and res['iters_requested'] == 1 and res['iters'] > 1
    assert res['calib_calls'] >= 1
    # judged from a calibration on a shared machine: within a factor of 2
    assert res['t_total_s'] >= 0.25
    assert res['t_call_s'] == pytest.approx(res['t_total_s'] / res['iters'], rel=1e-6)


def test_md_steps_follow_min_time(build):
    res = result(build, 1, 1, 'md', '--cells-per-side', '5', '--steps', '2', '--min-time', '0.3')
    assert res['verified'] is True and res['steps_requested'] == 2 and res['steps'] > 2
    assert res['t_total_s'] >= 0.15
    assert res['t_step_s'] == pytest.approx(res['t_total_s'] / res['steps'], rel=1e-6)


def test_serial_box_is_bounded_by_a_small_count(build):
    """The serial run behind e_mt does a node's box on one thread: with a
    small --iters and --min-time its timed loop lasts about max(iters calls,
    min_time), after a calibration of one call when a call is slow."""
    res = result(build, 1, 1, 'spmv', '--mode', 'serial', '--decomp-threads', '8', '--n', '24',
                 '--iters', '2', '--warmup', '0', '--min-time', '0.02')
    assert res['verified'] is True and res['decomp_threads'] == 8
    per_call = res['t_call_s']
    assert res['iters'] >= 2
    if per_call >= 0.002:  # a call longer than min_time/10 ends the calibration at once
        assert res['calib_calls'] == 1
    assert res['t_total_s'] <= 3 * max(0.02, 2 * per_call)


def test_min_time_zero_keeps_the_counts(build):
    res = result(build, 1, 1, 'spmv', '--n', '4', '--iters', '7')
    assert (res['iters'], res['calib_calls'], res['min_time_s']) == (7, 0, 0)
    res = result(build, 1, 1, 'md', '--cells-per-side', '5', '--steps', '9')
    assert (res['steps'], res['steps_requested']) == (9, 9)
