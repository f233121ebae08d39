"""The reference cycle on this machine, for real: run, baseline, run again and
pass, then a measurably slower kernel under the same name fails its check.

One stack, the shm partition and STREAM keep it short; the references go to a
temporary prefix (RFM_REFERENCE_PREFIX), never to config/references.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml
from conftest import baseline, run_reframe

pytestmark = pytest.mark.integration

SELECT = ('-n', 'StreamCheck|HybridVerdict%pair=stream', '--system', 'local:shm')


def _explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-8000:]}\n--- stderr ---\n{proc.stderr[-3000:]}'


def test_baseline_then_pass_then_a_slower_kernel_fails(tmp_path, stacks):
    var, refs = tmp_path / 'var', tmp_path / 'refs'
    # Quietness not recorded (busy=unknown): this tests the cycle, and on a loaded
    # machine a busy run would be kept out of the baseline and its FAIL withheld.
    # Three runs: a baseline of one session takes its spread from them (n - 1
    # degrees of freedom), and two leave one (a band of 30 or more t).
    env = {'RFM_REFERENCE_PREFIX': str(refs), 'HARNESS_REPEAT': '3', 'HARNESS_SNAPSHOTS': '0'}
    stack = ('-p', stacks[0])

    # Nightly without references: reported as missing, never passed silently.
    proc = run_reframe(var, *SELECT, *stack, '-r', '-S', 'require_reference=true', env=env)
    assert proc.returncode != 0
    assert f'no references file {refs}/local.yaml' in proc.stdout, _explain(proc)

    proc = run_reframe(var, *SELECT, *stack, '-r', env=env)
    assert proc.returncode == 0, _explain(proc)

    # The band is wide on purpose: this tests the cycle, not the machine's noise.
    base = baseline(var, refs, '--floor', '3')
    assert base.returncode == 0, base.stdout + base.stderr
    assert 'new' in base.stdout and f'written: {refs}/local.yaml' in base.stdout
    doc = yaml.safe_load((refs / 'local.yaml').read_text())
    entry = doc['StreamCheck']['local:shm'][stacks[0]]['layout=mpi_2x1 problem=8000000']
    # At least the floor (a loaded machine's own spread may widen it: the floor's
    # exact value is test_references' business), never so wide that the 40x
    # slower kernel below would pass.
    assert 3 <= entry['t_total'][2] < 39 and entry['fom'][1] == -1, entry
    # Every pair has its verdict reference, a pair never decided an unbounded one
    # (its INCONCLUSIVE code 0 is no TIE): the nightly below requires them.
    pairs = doc['HybridVerdict']['local:shm'][stacks[0]]
    assert pairs and all('verdict' in variables for variables in pairs.values()), pairs

    # Without --force the file stays as it is.
    before = (refs / 'local.yaml').read_text()
    again = baseline(var, refs, '--floor', '3')
    assert again.returncode == 2 and '--force' in again.stderr
    assert (refs / 'local.yaml').read_text() == before

    proc = run_reframe(var, *SELECT, *stack, '-r', '-S', 'require_reference=true', env=env)
    assert proc.returncode == 0, _explain(proc)
    assert '(r:' in proc.stdout

    # Same test names, 40x the work: t_total is far outside its band.
    proc = run_reframe(var, '-n', 'StreamCheck', '--system', 'local:shm', *stack, '-r',
                       '-S', 'StreamCheck.iters=400', '-S', 'require_reference=true', env=env)
    assert proc.returncode != 0, _explain(proc)
    assert 'performance' in proc.stdout and 't_total=' in proc.stdout, _explain(proc)

    # Another test, without a reference in the file: reported as missing.
    proc = run_reframe(var, '-n', 'RingCheck', '--system', 'local:shm', *stack, '-r',
                       '-S', 'require_reference=true', env=env)
    assert proc.returncode != 0
    assert 'no reference for local:shm' in proc.stdout and 'RingCheck' in proc.stdout
