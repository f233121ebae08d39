"""Shared fixtures: the checkout, the MPI stacks present, and a ReFrame runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / 'config' / 'settings.py'
BIN = Path(sys.executable).parent

# stack -> (compiler wrapper, launcher), as config/settings.py finds them
STACKS = {
    'openmpi': ('mpicc.openmpi', 'mpirun.openmpi'),
    'mpich': ('mpicc.mpich', 'mpiexec.mpich'),
}


def present_stacks() -> list[str]:
    return [s for s, (cc, run) in STACKS.items() if shutil.which(cc) and shutil.which(run)]


@pytest.fixture(scope='session')
def stacks() -> list[str]:
    found = present_stacks()
    if not found:
        pytest.skip('no MPI stack installed (./harness setup installs Open MPI and MPICH)')
    return found


def mpi_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1',
                'HARNESS_QUIET': '1'})
    env.update(extra)
    return env


def run_reframe(var_dir: Path, *args: str, env: dict[str, str] | None = None,
                timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """One real ReFrame session with the harness configuration, in `var_dir`."""
    # One sample per run unless a test asks for more: the sessions stay short.
    environ = mpi_env(HARNESS_VAR_DIR=str(var_dir), **{'HARNESS_REPEAT': '1', **(env or {})})
    environ.pop('HARNESS_QUIET', None)
    cmd = [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), '-c', str(REPO / 'checks'),
           *args]
    return subprocess.run(cmd, cwd=REPO, env=environ, capture_output=True, text=True,
                          timeout=timeout)
