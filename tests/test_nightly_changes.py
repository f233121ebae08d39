"""The nightly as a centre uses it, for real on this machine (issue 26, item 5):
five sessions, `./harness baseline`, a quiet nightly that passes, then a
nightly in which Open MPI's shared memory is taken away (a changed MPI prefix
whose `mpirun` adds `--mca btl self,tcp`).  That nightly fails the check that
depends on the transport (the ring) and not the one that does not (STREAM), and
its morning page names the ring's change points and the changed provenance, and
nothing else.

Open MPI, `local:shm`, the pure-MPI layout of RingCheck and StreamCheck's
layouts (a pair for the report), three samples a session and no sequential
rounds; quietness snapshots off (`busy=unknown`), so that a FAIL on a machine
busy with other work is not withheld: this tests the nightly, not the machine.
About a minute and a half on 2 cores.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, mpi_env

pytestmark = pytest.mark.integration

SELECT = '--nocolor --system local:shm -n RingCheck%layout=mpi_2x1|StreamCheck'


def harness(cmd: str, var: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = mpi_env(HARNESS_VAR_DIR=str(var), HARNESS_STACKS='openmpi', HARNESS_NO_APT='1',
                  HARNESS_REPEAT='3', HARNESS_MAX_ROUNDS='3', HARNESS_SNAPSHOTS='0',
                  HARNESS_BUDGET='20m',
                  RFM_REFERENCE_PREFIX=str(var / 'references'),
                  HARNESS_VENV=str(Path(sys.executable).parent.parent),
                  HARNESS_REFRAME_OPTS=SELECT, **extra)
    for name in ('HARNESS_OPENMPI_PREFIX', 'HARNESS_SESSION', 'HARNESS_REPORT_OPTS'):
        if name not in extra:
            env.pop(name, None)
    return subprocess.run([str(REPO / 'harness'), cmd], env=env, capture_output=True,
                          text=True, timeout=900, cwd=REPO)


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-8000:]}\n--- stderr ---\n{proc.stderr[-3000:]}'


def page(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of the morning page in the nightly's terminal report."""
    lines = proc.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith('Since the last night'))
    out = []
    for ln in lines[at:]:
        if not ln.strip():
            break
        out.append(ln.strip())
    return out


@pytest.fixture(scope='module')
def openmpi(stacks) -> str:
    if 'openmpi' not in stacks:
        pytest.skip('needs Open MPI (./harness setup installs it)')
    launcher = shutil.which('mpirun.openmpi')
    compiler = shutil.which('mpicc.openmpi')
    if not launcher or not compiler:
        pytest.skip('needs mpirun.openmpi and mpicc.openmpi')
    return launcher


def test_a_quiet_night_passes_and_a_night_without_shared_memory_names_what_changed(
        tmp_path, openmpi):
    var = tmp_path / 'var'
    # five sessions: the bands of fewer are wide (their drift is poorly measured)
    for _ in range(5):
        proc = harness('run', var)
        assert proc.returncode == 0, explain(proc)
    base = harness('baseline', var)
    assert base.returncode == 0, explain(base)
    assert 'written:' in base.stdout, explain(base)

    quiet = harness('nightly', var)
    assert quiet.returncode == 0, explain(quiet)
    assert 'Since the last night: nothing moved' in quiet.stdout, explain(quiet)

    # The same stack from a prefix whose mpirun takes shared memory away.
    wrap = tmp_path / 'wrap'
    (wrap / 'bin').mkdir(parents=True)
    (wrap / 'bin' / 'mpicc').symlink_to(shutil.which('mpicc.openmpi'))
    (wrap / 'bin' / 'mpirun').write_text(
        f'#!/bin/sh\nexec {openmpi} --mca btl self,tcp --mca btl_tcp_if_include lo "$@"\n')
    (wrap / 'bin' / 'mpirun').chmod(0o755)
    night = harness('nightly', var, HARNESS_OPENMPI_PREFIX=str(wrap))
    assert night.returncode == 1, explain(night)
    failed = set(re.findall(r'^  FAIL (\w+) ', night.stdout, re.M))  # the judgements
    assert failed == {'RingCheck'}, explain(night)

    lines = page(night)
    print('\n'.join(lines))          # the morning page (pytest -s shows it)
    moved = [ln for ln in lines if ln.startswith(('regression:', 'improvement:'))]
    assert moved, '\n'.join(lines)
    for ln in moved:
        # only the ring moved, and the page says what changed then: the prefix
        assert ln.startswith('regression: RingCheck'), ln
        assert f'cc={wrap}/bin/mpicc' in ln and 'changed then: build_spec' in ln, ln
    assert not [ln for ln in lines if 'StreamCheck' in ln], '\n'.join(lines)
