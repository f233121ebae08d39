"""Every check has a time limit, so that a hung rank fails that check and the
session carries on.

The integration test makes a kernel hang on purpose: in the fault-injection
build, KERNEL_FAULT_HANG=<kernel> makes rank 0 of that kernel sleep forever
after MPI init (and no kernel corrupts its values, so the other checks pass).
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import BIN, CONFIG, REPO, hung_rank_session, mpi_env


def test_every_check_has_a_time_limit(tmp_path):
    proc = subprocess.run([str(BIN / 'reframe'), '-C', str(CONFIG), '-c', str(REPO / 'checks'),
                           '--describe'], capture_output=True, text=True, timeout=300,
                          env=mpi_env(HARNESS_VAR_DIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    tests = json.loads(proc.stdout)
    names = {t['name'].split()[0].split('_')[0] for t in tests}
    assert {'SpmvCheck', 'MdCheck', 'RingCheck', 'StreamCheck', 'MdLammpsBenchmark'} <= names
    untimed = [t['name'] for t in tests if not t.get('time_limit')]
    assert not untimed, f'checks without a time limit: {untimed}'


def test_the_build_fixture_has_a_time_limit():
    # --describe lists tests, not fixtures: read the build fixture's own.
    from harnesslib.build import KernelBuild
    limit = KernelBuild.build_time_limit
    assert limit.is_defined() and limit.default_value == 600


@pytest.mark.integration
def test_a_hung_rank_fails_its_check_on_the_time_limit_and_the_session_carries_on(
        tmp_path, stacks):
    stack = stacks[-1]
    proc = hung_rank_session(tmp_path, 'local:shm', '10s', stack)
    out = proc.stdout
    assert proc.returncode != 0, out
    # The hung check failed on its time limit...
    assert re.search(r'\[\s+FAIL \].*StreamCheck %layout=mpi_2x1', out), out
    assert re.search(r'Reason: job error: .*job timed out \([\d.]+s > 10\.0s\)', out), out
    # ... its rank 0 was the one that hung ...
    err = next((tmp_path / 'stage' / 'local' / 'shm' / stack).glob('StreamCheck_*/rfm_job.err'))
    assert 'stream: KERNEL_FAULT_HANG=stream: rank 0 hangs on purpose' in err.read_text()
    # ... and the other check of the session ran and passed.
    assert re.search(rf'\[\s+OK \].*RingCheck %layout=mpi_2x1 .*@local:shm\+{stack}', out), out
    assert '1 failure(s)' in out, out
