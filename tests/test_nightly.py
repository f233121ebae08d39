"""The nightly acceptance mode: `reframe --mode nightly` and `./harness nightly`.

Real sessions on this machine (one stack, one partition, STREAM only), each in
its own HARNESS_VAR_DIR: the mode's JUnit report, results database and
perflogs are written, `-S require_reference=true` reaches the checks, and
the exit status is non-zero exactly when a check failed, and 3 when no check
failed but a fixed-band assertion was inconclusive.  Without ReFrame: the
decisions of the judgement summary (config/nightly.py) on written perflogs.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from conftest import BIN, CONFIG, REPO, baseline, mpi_env, perflog, run_reframe
from perflog_writer import T0, header, line, write
from reframe.utility import import_module_from_file


def nightly(var: Path, stack: str, opts: str,
            refs: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = mpi_env(HARNESS_VAR_DIR=str(var), HARNESS_STACKS=stack, HARNESS_NO_APT='1',
                  HARNESS_REPEAT='1', RFM_REFERENCE_PREFIX=str(refs or var / 'references'),
                  # no sequential rounds: one ReFrame session per nightly (on a
                  # loaded machine an undecided pair would add sessions)
                  HARNESS_MAX_ROUNDS='1',
                  HARNESS_VENV=str(Path(sys.executable).parent.parent),
                  HARNESS_REFRAME_OPTS=f'--nocolor --system local:shm {opts}')
    return subprocess.run([str(REPO / 'harness'), 'nightly'], env=env, capture_output=True,
                          text=True, timeout=900, cwd=REPO)


def junit_counts(path: Path) -> tuple[int, int, list[str]]:
    suite = ET.parse(path).getroot().find('testsuite')
    assert suite is not None, path
    names = [tc.get('name', '') for tc in suite.iter('testcase')]
    return int(suite.get('failures', 0)) + int(suite.get('errors', 0)), len(names), names


def session_report(var: Path) -> dict:
    reports = sorted((var / 'reports').glob('run-report-*.json'),
                     key=lambda p: p.stat().st_mtime)
    return json.loads(reports[-1].read_text())


@pytest.fixture(scope='module')
def sessions(tmp_path_factory, stacks):
    """A nightly session of STREAM, then one whose kernels corrupt a value."""
    var = tmp_path_factory.mktemp('nightly')
    # The references the nightly run requires: a first session, then its
    # baseline (a wide band: this tests the mode, not the machine's noise).
    # (quietness not recorded: on a shared machine a busy run would be kept
    # out of the baseline)
    first = run_reframe(var, '-n', 'StreamCheck', '--system', 'local:shm', '-p', stacks[0],
                        '-r', env={'HARNESS_SNAPSHOTS': '0'})
    assert first.returncode == 0, first.stdout[-5000:]
    base = baseline(var, var / 'references', '--floor', '3')
    assert base.returncode == 0, base.stdout + base.stderr
    good = nightly(var, stacks[0], '-n StreamCheck')
    good_junit = sorted((var / 'reports').glob('junit-*.xml'))
    bad = nightly(var, stacks[0], '-n StreamCheck%layout=mpi_2x1 -S KernelBuild.fault_inject=1')
    return var, good, good_junit, bad


@pytest.mark.integration
def test_nightly_writes_a_junit_report_whose_failures_match_the_exit_status(sessions):
    var, good, good_junit, _ = sessions
    assert len(good_junit) == 1, good.stdout
    failures, cases, names = junit_counts(good_junit[0])
    assert any('StreamCheck %layout=mpi_2x1' in n for n in names), names
    assert any('StreamCheck %layout=masteronly_1x2' in n for n in names), names
    assert good.returncode == 0 and failures == 0, good.stdout[-5000:]
    assert session_report(var)['session_info']['num_failures'] >= failures
    assert f'JUnit report: {good_junit[0]}' in good.stdout


@pytest.mark.integration
def test_nightly_fails_on_a_failing_check_and_keeps_the_older_report(sessions):
    var, _, good_junit, bad = sessions
    assert bad.returncode != 0, bad.stdout[-5000:]
    assert 'nightly acceptance FAILED' in bad.stderr
    junits = sorted((var / 'reports').glob('junit-*.xml'))
    assert len(junits) == 2 and good_junit[0] in junits
    new = next(j for j in junits if j != good_junit[0])
    failures, _, _ = junit_counts(new)
    assert failures >= 1
    assert 'did not verify its result' in new.read_text()


@pytest.mark.integration
def test_nightly_requires_references(sessions):
    var, good, _, _ = sessions
    reports = sorted((var / 'reports').glob('run-report-*.json'),
                     key=lambda p: p.stat().st_mtime)
    good_report = json.loads(reports[1].read_text())   # after the baseline's session
    cases = [tc for run in good_report['runs'] for tc in run['testcases']
             if tc['name'].startswith('StreamCheck')]
    assert cases
    # Every check ran with references required, and found them.
    assert all(tc['result'] == 'pass' for tc in cases)
    assert good.stdout.count('(r:') >= 2 * len(cases), good.stdout[-3000:]


@pytest.mark.integration
def test_nightly_stores_every_session_and_appends_the_perflogs(sessions):
    var, _, _, _ = sessions
    assert (var / 'results.db').is_file()
    proc = subprocess.run([str(BIN / 'reframe'), '-C', str(CONFIG), '--list-stored-sessions'],
                          capture_output=True, text=True, timeout=120,
                          env=mpi_env(HARNESS_VAR_DIR=str(var)))
    assert proc.returncode == 0, proc.stderr
    uuids = {json.loads(p.read_text())['session_info']['uuid']
             for p in (var / 'reports').glob('run-report-*.json')}
    assert len(uuids) == 3    # the baseline's session, the good and the bad night
    for uuid in uuids:
        assert uuid in proc.stdout
    # Every session's runs are kept: the two layouts of the session the
    # references came from and of the good night, then the failed run (its
    # line has the same fields, its variables without values: one file).
    rows = [ln for path in (var / 'perflogs' / 'local' / 'shm').glob('StreamCheck.log*')
            for ln in path.read_text().splitlines()[1:]]
    assert len(rows) == 5, rows


@pytest.mark.integration
def test_nightly_mode_options(tmp_path):
    proc = subprocess.run([str(BIN / 'reframe'), '-C', str(CONFIG), '--mode', 'nightly',
                           '--show-config', 'modes'], capture_output=True, text=True,
                          timeout=120, env=mpi_env(HARNESS_VAR_DIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    mode = next(m for m in json.loads(proc.stdout) if m['name'] == 'nightly')
    opts = ' '.join(mode['options'])
    assert '-S require_reference=true' in opts
    assert f'--report-junit={tmp_path}/reports/junit-' in opts
    assert f'--perflogdir={tmp_path}/perflogs' in opts


@pytest.mark.integration
def test_nightly_with_inconclusive_checks_says_so_and_exits_3(sessions, stacks):
    """Two busy processes and a STREAM reference twice the fastest rate logged
    so far: the rule's FAIL is withheld on the busy machine, ReFrame passes,
    and the nightly does not: it prints the judgement and exits 3."""
    var, good, _, _ = sessions
    # a failed run logs its variables as ReFrame's empty placeholder, 'None'
    rates = [float(r['fom_value']) for path in (var / 'perflogs').rglob('StreamCheck.log*')
             for r in perflog(path) if r.get('fom_value') not in (None, '', 'None')]
    doc = yaml.safe_load((var / 'references' / 'local.yaml').read_text())
    for variants in doc['StreamCheck']['local:shm'].values():
        for refs in variants.values():
            refs['fom'] = [2 * max(rates), -0.05, None, refs['fom'][3]]
    (var / 'regressed').mkdir()
    (var / 'regressed' / 'local.yaml').write_text(yaml.safe_dump(doc))
    procs = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]
    try:
        time.sleep(0.3)
        proc = nightly(var, stacks[0], '-n StreamCheck', var / 'regressed')
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    assert proc.returncode == 3, proc.stdout[-5000:] + proc.stderr[-2000:]
    assert 'nightly acceptance INCONCLUSIVE (exit status 3)' in proc.stderr
    assert 'INCONCLUSIVE StreamCheck %layout=mpi_2x1' in proc.stdout
    assert 'FAIL withheld: the machine was busy' in proc.stdout
    junit = sorted((var / 'reports').glob('junit-*.xml'))[-1]
    assert junit_counts(junit)[0] == 0


@pytest.mark.integration
def test_a_selection_selects_the_same_cases_in_nightly_as_in_run(tmp_path, stacks):
    # ReFrame drops a -p given beside --mode: the nightly of one stack ran
    # every stack's checks (and failed on the other's references).
    if len(stacks) < 2:
        pytest.skip('needs two stacks to tell a -p selection from none')
    cases = {}
    for cmd in ('run', 'nightly'):
        var = tmp_path / cmd
        env = mpi_env(HARNESS_VAR_DIR=str(var), HARNESS_NO_APT='1', HARNESS_REPEAT='1',
                      HARNESS_VENV=str(Path(sys.executable).parent.parent),
                      RFM_REFERENCE_PREFIX=str(var / 'references'),
                      HARNESS_REFRAME_OPTS=f'--nocolor --system local:shm -p {stacks[0]} '
                                           f'-n StreamCheck%layout=mpi_')
        env.pop('HARNESS_STACKS', None)
        proc = subprocess.run([str(REPO / 'harness'), cmd], env=env, capture_output=True,
                              text=True, timeout=900, cwd=REPO)
        report = session_report(var)
        cases[cmd] = sorted((tc['name'], tc['system'], tc['environ'])
                            for run in report['runs'] for tc in run['testcases'])
        assert cases[cmd], proc.stdout[-3000:]
        assert {env_ for _n, _s, env_ in cases[cmd]} == {stacks[0]}, proc.stdout[-3000:]
    assert cases['run'] == cases['nightly']


@pytest.mark.integration
def test_the_nightly_options_give_reframe_no_command_to_run(tmp_path):
    # ReFrame expands $(...) in --report-junit and --perflogdir as in its
    # configuration's paths: the var dir reaches it as a link, as there.
    var = tmp_path / f'night $(touch {tmp_path}/INJECTED)'
    opts = subprocess.run([sys.executable, str(REPO / 'config' / 'nightly.py'), 'options',
                           '--var-dir', str(var)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert not any('$' in o for o in opts), opts
    junit = next(o for o in opts if o.startswith('--report-junit='))
    assert Path(junit.split('=', 1)[1]).parent.parent.resolve() == var.resolve()
    proc = subprocess.run([str(BIN / 'reframe'), '-C', str(CONFIG), *opts, '-c',
                           str(REPO / 'checks' / 'kernels.py'), '-n', 'NoSuchCheck', '-l'],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=mpi_env(HARNESS_VAR_DIR=str(var)))
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / 'INJECTED').exists()


@pytest.mark.integration
def test_the_judgements_refuse_a_since_that_is_not_a_time(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / 'config' / 'nightly.py'), 'judgements',
                           '--perflogs', str(tmp_path), '--since', 'garbage'],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == "config/nightly.py: error: --since: not an ISO time: 'garbage'\n"


# ---- the nightly's decisions, without ReFrame ---------------------------------------------

def _nightly() -> types.ModuleType:
    return import_module_from_file(str(REPO / 'config' / 'nightly.py'))


#: one run: (name, stack, judgement, time)
Run = tuple[str, str, str, dt.datetime]


def _summary(tmp_path: Path, runs: list[Run], since: dt.datetime | None = None,
             ) -> tuple[str, int]:
    """The judgement summary of a perflog of StreamCheck's `runs`."""
    write(tmp_path / 'local' / 'shm' / 'StreamCheck.log', [header(['fom'])] + [
        line('stream', {'fom': (10.0, 'GB/s', 12.0, -0.2, None)}, name=name, stack=stack,
             time=time, after_result={'judgement': judged, 'judgement_detail': 'fom: x'})
        for name, stack, judged, time in runs])
    lines, status = _nightly().judgement_summary(str(tmp_path), since)
    return '\n'.join(lines), status


MPI = 'StreamCheck %layout=mpi_2x1'


def test_a_variant_its_last_sample_passed_is_not_inconclusive(tmp_path):
    text, status = _summary(tmp_path, [(f'{MPI} %sample={i}', 'mpich', judged, T0)
                                       for i, judged in enumerate(['deferred', 'deferred',
                                                                   'pass'])])
    assert status == 0 and 'INCONCLUSIVE' not in text, text


def test_one_inconclusive_judgement_makes_the_night_inconclusive(tmp_path):
    text, status = _summary(tmp_path, [(MPI, 'mpich', 'inconclusive', T0)])
    assert status == _nightly().EXIT_INCONCLUSIVE, text
    assert f'INCONCLUSIVE {MPI} @shm+mpich' in text


def test_another_stacks_judgement_does_not_decide_a_variants_deferred_samples(tmp_path):
    runs = [(f'{MPI} %sample={i}', 'mpich', 'deferred', T0) for i in range(2)]
    text, status = _summary(tmp_path, runs + [(f'{MPI} %sample=2', 'openmpi', 'pass', T0)])
    assert status == _nightly().EXIT_INCONCLUSIVE, text
    # one variant undecided, however many of its samples were deferred
    assert 'nightly INCONCLUSIVE: 1 fixed-band assertion(s)' in text


def test_a_failed_judgement_is_listed_and_leaves_the_failure_to_reframe(tmp_path):
    # a FAIL fails the check in ReFrame (exit status 1): the summary adds no 3
    text, status = _summary(tmp_path, [(MPI, 'mpich', 'fail', T0),
                                       (MPI, 'openmpi', 'inconclusive', T0)])
    assert status == 0, text
    assert f'FAIL {MPI} @shm+mpich: fom: x' in text


def test_the_summary_leaves_out_the_runs_before_since(tmp_path):
    yesterday = T0 - dt.timedelta(days=1)
    text, status = _summary(tmp_path, [(MPI, 'mpich', 'inconclusive', yesterday),
                                       (MPI, 'mpich', 'pass', T0)], since=T0)
    assert status == 0 and '1 run(s)' in text, text


def test_the_nightly_requires_references_and_fails_on_a_check_file_that_does_not_load(
        tmp_path):
    opts = _nightly().options(str(tmp_path))
    assert ['-S', 'require_reference=true'] == opts[opts.index('-S'):opts.index('-S') + 2]
    assert '--warn-as-error' in opts
