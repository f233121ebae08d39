"""The nightly as a centre uses it, for real on this machine (issue 26, item 5):
eight sessions, `./harness baseline`, a quiet nightly that passes, then a
nightly in which Open MPI's shared memory is taken away (a changed MPI prefix
whose `mpirun` adds `--mca btl self,tcp`).  That nightly fails the check that
depends on the transport (the ring) and not the one that does not (STREAM), and
its morning page names the ring's change points and the changed provenance, and
nothing else.

Open MPI, `local:shm`, the pure-MPI layout of RingCheck and StreamCheck's
layouts (a pair for the report), three samples a session and no sequential
rounds; quietness snapshots off (`busy=unknown`), so that a FAIL on a machine
busy with other work is not withheld: this tests the nightly, not the machine.
About two minutes and a half on 2 cores.

The nightly's own lines around ReFrame (the JUnit report it names, the
HARNESS_CHANGES_FATAL knob) are tested with stubs in a fake virtual environment
(`fake_venv`), in seconds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, mpi_env

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


def _quiet_night_then_one_without_shared_memory(var: Path, wrap: Path) -> None:
    """The scenario of the module's docstring in `var`; AssertionError where it
    does not come out as the nightly must make it."""
    # eight sessions: the bands of fewer than five are wide (their drift is poorly
    # measured), and the night that changed is an unconfirmed change, tested
    # against the sessions before it with one degree of freedom fewer than they
    # are at a p-value 100 times stricter (changes.UNCONFIRMED_STRICTER): after
    # five and a quiet night a step in the ring's figures needed z > 11.2, and
    # a noisy CI machine missed it (CI of 36d4c22); after eight and a quiet one, 7.1
    for _ in range(8):
        proc = harness('run', var)
        assert proc.returncode == 0, explain(proc)
    base = harness('baseline', var)
    assert base.returncode == 0, explain(base)
    assert 'written:' in base.stdout, explain(base)

    quiet = harness('nightly', var)
    if quiet.returncode == 3:
        # INCONCLUSIVE, not a failure: one sample far off (a 7x slower 1 MiB ring
        # run among three on a shared 2-core CI machine) left a band undecided;
        # the nightly says to rerun, and so does the test, once
        print(explain(quiet))
        quiet = harness('nightly', var)
    assert quiet.returncode == 0, explain(quiet)
    assert 'Since the last night: nothing moved' in quiet.stdout, explain(quiet)

    # The same stack from a prefix whose mpirun takes shared memory away.
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


@pytest.mark.integration
def test_a_quiet_night_passes_and_a_night_without_shared_memory_names_what_changed(
        tmp_path, openmpi):
    wrap = tmp_path / 'wrap'
    (wrap / 'bin').mkdir(parents=True)
    (wrap / 'bin' / 'mpicc').symlink_to(shutil.which('mpicc.openmpi'))
    (wrap / 'bin' / 'mpirun').write_text(
        f'#!/bin/sh\nexec {openmpi} --mca btl self,tcp --mca btl_tcp_if_include lo "$@"\n')
    (wrap / 'bin' / 'mpirun').chmod(0o755)
    try:
        _quiet_night_then_one_without_shared_memory(tmp_path / 'var', wrap)
    except AssertionError as first:
        # The machine, not the nightly: on a shared 2-core CI machine the host
        # seemed at times to run both CPUs on one core's hardware threads for a
        # stretch of sessions (the ring's 1 MiB bandwidth 15 GB/s, then 5.4 GB/s;
        # STREAM's two threads at half their bandwidth), a real change of the machine that
        # the page rightly named ("nothing in the provenance changed then") or a
        # STREAM that failed its band (CI of a46b86c, twice).  The whole scenario
        # again, once, in a var dir of its own; the nightly's own faults fail both.
        print(f'first attempt: {str(first)[-3000:]}')
        _quiet_night_then_one_without_shared_memory(tmp_path / 'again', wrap)


# ---- the nightly's lines around ReFrame, with stubs ----------------------------------

STUBS = {
    # ReFrame: a run report (one case ran) and, unless FAKE_NO_JUNIT=1, the JUnit
    # report it is told to write
    'reframe': """#!/bin/bash
[ "$1" = --version ] && { echo 4.10.4; exit 0; }
mkdir -p "$HARNESS_VAR_DIR/reports"
echo "stub reframe $*" >> "$HARNESS_VAR_DIR/stub.log"
for a in "$@"; do
    case $a in --report-junit=*)
        [ "${FAKE_NO_JUNIT:-0}" = 1 ] || echo '<testsuites/>' > "${a#--report-junit=}" ;;
    --report-file=*)
        echo '{"session_info": {"num_cases": 1, "num_skipped": 0}}' > "${a#--report-file=}" ;;
    esac
done
""",
    # the plan, the sequential rounds and the judgements pass; the rest is Python
    'python': """#!/bin/bash
case "$1 $2" in
    "-m harnesslib.plan")
        for a in "$@"; do [ "$a" = --part-budget ] && echo "600 600 1"; done; exit 0 ;;
    "-m hybridverdict.sequential") exit 0 ;;
    */config/nightly.py\\ judgements) echo "stub judgements"; exit 0 ;;
esac
PYTHONPATH=@REPO@/checks:@REPO@/reports exec @PYTHON@ "$@"
""",
    # the report passes; `changes` exits FAKE_CHANGES_RC
    'hybridverdict': """#!/bin/bash
echo "stub hybridverdict $*" >> "$HARNESS_VAR_DIR/stub.log"
[ "$1" = changes ] && exit "${FAKE_CHANGES_RC:-0}"
exit 0
""",
}


@pytest.fixture
def fake_venv(tmp_path) -> Path:
    """A virtual environment of stubs that ./harness takes as installed."""
    if not (shutil.which('cmake') and shutil.which('cc')):
        pytest.skip('./harness needs cmake and cc')
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    for name, text in STUBS.items():
        path = venv / 'bin' / name
        path.write_text(text.replace('@REPO@', str(REPO)).replace('@PYTHON@', sys.executable))
        path.chmod(0o755)
    stamp = hashlib.sha1((REPO / 'pyproject.toml').read_bytes()).hexdigest()
    (venv / '.harness-installed').write_text(stamp + '\n')
    return venv


def stub_nightly(venv: Path, var: Path, cwd: Path = REPO,
                 **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('HARNESS_', 'RFM_'))} | {
        'HARNESS_VAR_DIR': str(var), 'HARNESS_VENV': str(venv), 'HARNESS_NO_APT': '1',
        **extra}
    return subprocess.run([str(REPO / 'harness'), 'nightly'], env=env, capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_the_nightly_names_the_junit_report_it_asked_for_not_an_older_one(
        tmp_path, fake_venv):
    for name, extra in (('wrote', {}), ('none', {'FAKE_NO_JUNIT': '1'})):
        var = tmp_path / name
        old = var / 'reports' / 'junit-20200101T000000Z.xml'      # an older night's
        old.parent.mkdir(parents=True)
        old.write_text('<testsuites/>')
        night = stub_nightly(fake_venv, var, **extra)
        assert night.returncode == 0, explain(night)
        asked = re.search(r'--report-junit=(\S+)', (var / 'stub.log').read_text()).group(1)
        assert asked != str(old) and str(old) not in night.stdout, explain(night)
        if extra:       # ReFrame wrote none tonight: the older one is no report of it
            assert f'JUnit report: none written (ReFrame was to write {asked})\n' \
                in night.stdout, explain(night)
        else:
            assert f'JUnit report: {asked}\n' in night.stdout, explain(night)


def test_the_users_options_reach_reframe_and_the_report_as_written(tmp_path, fake_venv):
    """HARNESS_REFRAME_OPTS and HARNESS_REPORT_OPTS are split at blanks, never matched
    against the checkout's files (-n '.*' was .ci .git ...), and the user's own
    --report-junit, which ReFrame takes over the nightly's, is the one named."""
    var = tmp_path / 'var'
    mine = tmp_path / 'mine.xml'
    night = stub_nightly(fake_venv, var, HARNESS_REFRAME_OPTS=f'-n .* --report-junit={mine}',
                         HARNESS_REPORT_OPTS='--tidy .*')
    assert night.returncode == 0, explain(night)
    log = (var / 'stub.log').read_text()
    assert re.search(rf' -r -n \.\* --report-junit={re.escape(str(mine))}\n', log), log
    assert re.search(r'stub hybridverdict --since \S+ --tidy \.\*\n', log), log
    assert f'JUnit report: {mine}\n' in night.stdout, explain(night)


def test_a_relative_path_in_the_users_options_is_where_the_user_is(tmp_path, fake_venv):
    """ReFrame ran from the checkout, so a relative --report-junit (or -c, --report-file,
    the report's --out) given to ./harness run from elsewhere was written into the
    checkout, unlike the knobs' paths, which are the user's directory's."""
    here = tmp_path / 'here'
    here.mkdir()
    night = stub_nightly(fake_venv, tmp_path / 'var', cwd=here,
                         HARNESS_REFRAME_OPTS='--report-junit=mine.xml')
    assert night.returncode == 0, explain(night)
    assert (here / 'mine.xml').is_file() and not (REPO / 'mine.xml').exists(), explain(night)
    assert 'JUnit report: mine.xml\n' in night.stdout, explain(night)


@pytest.mark.parametrize('value', ['true', 'yes', '2', ' 1'])
def test_a_changes_fatal_other_than_0_or_1_is_refused_before_the_session(
        tmp_path, fake_venv, value):
    var = tmp_path / 'var'
    night = stub_nightly(fake_venv, var, HARNESS_CHANGES_FATAL=value)
    assert night.returncode == 2, explain(night)
    assert night.stderr.strip().splitlines() == [
        f"harness: error: HARNESS_CHANGES_FATAL must be 0 or 1, got '{value}'"], explain(night)
    assert not (var / 'stub.log').exists()          # ReFrame never ran


def test_changes_fatal_1_fails_the_night_on_a_regression_on_the_page(tmp_path, fake_venv):
    var = tmp_path / 'var'
    night = stub_nightly(fake_venv, var, HARNESS_CHANGES_FATAL='1', FAKE_CHANGES_RC='4')
    assert night.returncode == 4, explain(night)
    assert 'changes --last-night --fail-on-change' in (var / 'stub.log').read_text()
    quiet = stub_nightly(fake_venv, var, HARNESS_CHANGES_FATAL='0', FAKE_CHANGES_RC='4')
    assert quiet.returncode == 0, explain(quiet)


@pytest.mark.parametrize('spelling', ['--history-store {}', '--history-store={}'])
def test_changes_fatal_judges_this_session_in_the_store_the_report_wrote(
        tmp_path, fake_venv, spelling):
    # `changes --last-night` read the default store whatever the report stored, and
    # its last night whenever it was: with --no-history-store (or another store) in
    # HARNESS_REPORT_OPTS it judged an older night, green by accident
    var, store = tmp_path / 'var', tmp_path / 'mystore'
    night = stub_nightly(fake_venv, var, HARNESS_CHANGES_FATAL='1',
                         HARNESS_REPORT_OPTS=spelling.format(store))
    log = (var / 'stub.log').read_text()
    assert night.returncode == 0, explain(night)
    since = re.search(r'stub hybridverdict --since (\S+) ', log).group(1)
    assert f'stub hybridverdict changes --last-night --fail-on-change --since {since} ' \
        f'--store {store}\n' in log, log
