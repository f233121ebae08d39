"""A declared big node on this small machine: the system ``declared``
(config/settings.py) declares 16- and 32-core nodes, 2 sockets and 4 NUMA
domains each; its runs are oversubscribed on purpose, at tiny sizes, through
the whole pipeline: flagged, kept out of verdicts, never a failed session."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import BIN, REPO, mpi_env, run_reframe

pytestmark = pytest.mark.integration


def plan_output(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'harnesslib.plan', *args], cwd=REPO,
                          env=mpi_env(**env), capture_output=True, text=True, timeout=120)


def test_declared_partitions_have_the_declared_topology():
    proc = plan_output('--system', 'declared', '-q')
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for cores in (16, 32):
        assert (f'declared:cores{cores}: {cores} cores, 2 socket(s), 4 NUMA domain(s)'
                in out), out
    assert out.count('declared: runs oversubscribed') == 2
    assert 'plan declared:cores16:' in out and 'within the budget' in out
    # RFM_SYSTEM names the system as it does for reframe (the plan was this host's)
    by_env = plan_output('-q', RFM_SYSTEM='declared')
    assert by_env.returncode == 0 and by_env.stdout == out, by_env.stdout + by_env.stderr


def test_an_unknown_system_or_configuration_is_a_clear_error(tmp_path):
    proc = plan_output('--system', 'nosuch')
    assert proc.returncode == 2, proc.stderr
    assert "plan: error: configuration" in proc.stderr and "'nosuch'" in proc.stderr
    assert 'Traceback' not in proc.stderr
    missing = tmp_path / 'missing.py'
    proc = plan_output('--config', str(missing))
    assert proc.returncode == 2 and f'configuration {missing}' in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr


def test_listing_prints_the_plan_before_anything_runs(tmp_path):
    proc = run_reframe(tmp_path, '--system', 'declared:cores16', '-n', 'MdCheck', '--list',
                       env={'HARNESS_STACKS': 'openmpi'})
    assert proc.returncode == 0, proc.stderr
    assert 'plan declared:cores16: ' in proc.stdout
    # Typed parameters: ReFrame's own -P picks a size.
    proc = run_reframe(tmp_path, '-P', 'problem=24', '-n', 'MdCheck', '--list')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'MdCheck %layout=mpi_2x1 %problem=24 %sample=0' in proc.stdout


@pytest.mark.parametrize('param, said', [
    ('problem=abc', "problem must be an integer, got 'abc' (e.g. -P problem="),
    ('sample=x', "sample must be an integer, got 'x' (e.g. -P sample=0)"),
])
def test_a_size_or_sample_that_is_no_integer_is_named_without_a_traceback(tmp_path, param,
                                                                          said):
    # int() raised inside ReFrame's -P, which printed its own traceback and
    # "invalid literal for int() with base 10: 'abc'", naming no parameter.
    proc = run_reframe(tmp_path, '--system', 'declared:cores16', '-n', 'MdCheck', '-P', param,
                       '--list', env={'HARNESS_STACKS': 'openmpi'})
    assert proc.returncode != 0
    assert said in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stdout + proc.stderr


@pytest.fixture(scope='module')
def declared_session(tmp_path_factory, stacks):
    if 'openmpi' not in stacks:
        pytest.skip('the declared node test runs Open MPI (--oversubscribe)')
    var = tmp_path_factory.mktemp('var')
    proc = run_reframe(var, '--system', 'declared:cores16', '-r',
                       '-n', r'(MdCheck|SpmvCheck)%|HybridVerdict%pair=(md|spmv)/',
                       env={'HARNESS_STACKS': 'openmpi', 'HARNESS_REPEAT': '2'})
    return var, proc


def _records(path) -> list[dict[str, str]]:
    lines = path.read_text().splitlines()
    header = lines[0].split('|')
    return [dict(zip(header, ln.split('|'))) for ln in lines[1:]]


def test_declared_node_runs_oversubscribed_flagged_and_passes(declared_session):
    var, proc = declared_session
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    base = var / 'perflogs' / 'declared' / 'cores16'
    md, spmv = _records(base / 'MdCheck.log'), _records(base / 'SpmvCheck.log')
    # Every layout of a 16-core node ran, at the tiny sizes, twice.
    assert {(r['mode'], r['ranks'], r['threads']) for r in md} == {
        ('mpi', '16', '1'), ('masteronly', '8', '2'), ('masteronly', '4', '4'),
        ('masteronly', '2', '8'), ('masteronly', '1', '16')}
    assert {r['size'] for r in md} == {'7'} and {r['size'] for r in spmv} == {'8'}
    assert len(md) == 10
    # spmv refuses more threads per rank than online CPUs (2 here): the plan
    # leaves out T > 2 before running, and keeps what runs.
    assert {r['name'].split(' %sample')[0] for r in spmv} == {
        f'SpmvCheck %layout={lay} %problem=8' for lay in (
            'mpi_16x1', 'masteronly_8x2', 'funneled_8x2', 'serial_8x1_decomp2')}
    assert len(spmv) == 2 * 4
    assert 'spmv refuses 4 threads per rank on 2 online CPUs' in proc.stdout
    for rec in md + spmv:
        assert rec['oversubscribed'] == 'true', rec['name']
        assert rec['result'] == 'pass' and rec['verified'] == 'true', rec['name']
        assert rec['cores'] == '16'
    # No verdict from oversubscribed runs: each is skipped, saying why.
    verdicts = [ln for ln in proc.stdout.splitlines()
                if 'HybridVerdict %pair' in ln and ('SKIP' in ln or '  OK ' in ln)]
    assert verdicts and all('SKIP' in ln for ln in verdicts), verdicts
    # Those of runs the plan left out (spmv T > 2) by their skipped runs.
    assert all('oversubscribed' in ln or 'skipped dependencies' in ln for ln in verdicts)
    assert any('no verdict from oversubscribed runs' in ln for ln in verdicts)
    assert not (base / 'HybridVerdict.log').exists()


def test_samples_are_interleaved_through_the_session(declared_session):
    var, _ = declared_session
    md = _records(var / 'perflogs' / 'declared' / 'cores16' / 'MdCheck.log')
    order = [r['name'].rsplit('%sample=', 1)[1] for r in md]
    # Every layout's sample 0, then every layout's sample 1: never back to back.
    assert order == ['0'] * 5 + ['1'] * 5, order


def test_report_keeps_oversubscribed_runs_out_of_verdicts(declared_session, tmp_path):
    var, _ = declared_session
    proc = subprocess.run([str(BIN / 'hybridverdict'), '--perflogs', str(var / 'perflogs'),
                           '--no-write'], cwd=REPO,
                          env=mpi_env(), capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert 'WIN' not in text and 'LOSS' not in text, text[-3000:]
    assert proc.returncode == 1, text[-3000:]
    # Asked for, the 16-core layouts' pairs are judged as functional verdicts
    # (the path a 128-core node takes), in their own section, never findings.
    out = tmp_path / 'report'
    proc = subprocess.run([str(BIN / 'hybridverdict'), '--perflogs', str(var / 'perflogs'),
                           '--functional-verdicts', '--out', str(out)], cwd=REPO,
                          env=mpi_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (doc,) = [json.loads(p.read_text()) for p in out.glob('verdict-*.json')]
    assert doc['verdicts'] == []
    (found,) = [v for title, v in doc['sections'].items() if title.startswith('Functional')]
    assert found and all(v['oversubscribed'] and v['system'] == 'declared'
                         and v['cores'] == 16 for v in found), found
    assert {v['kernel'] for v in found} >= {'md', 'spmv'}, found


def test_harness_run_prints_the_plan_and_refuses_a_bad_budget(tmp_path):
    env = mpi_env(HARNESS_NO_APT='1', HARNESS_VAR_DIR=str(tmp_path), HARNESS_BUDGET='soon',
                  HARNESS_VENV=str(BIN.parent))
    proc = subprocess.run([str(REPO / 'harness'), 'run'], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "HARNESS_BUDGET must be minutes or a duration such as 15m" in proc.stderr
    assert 'cannot make the plan' in proc.stderr
    # Nothing ran: the plan comes before ReFrame.
    assert '[3/4]' not in proc.stdout and not (tmp_path / 'perflogs').exists()


def test_md_size_that_cannot_run_on_a_layout_is_skipped_before_running(tmp_path, stacks):
    # The reproduction on 2 cores: md at 3 cells per side runs as 1x2
    # (one rank) but not as 2x1 (sub-boxes 2.52 < cutoff+skin 2.8): the 2x1
    # run is skipped with the reason before it starts, and the session passes.
    stack = stacks[0]
    proc = run_reframe(tmp_path, '--system', 'local:shm', '-P', 'problem=3', '-n', 'MdCheck',
                       '-r', env={'HARNESS_STACKS': stack})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    skip = [ln for ln in lines if 'MdCheck %layout=mpi_2x1 %problem=3' in ln and 'SKIP' in ln]
    assert skip and 'sub-boxes 2.52 wide < cutoff+skin 2.8' in skip[0], lines[-30:]
    assert any('MdCheck %layout=masteronly_1x2 %problem=3' in ln and '  OK ' in ln
               for ln in lines)
    records = _records(tmp_path / 'perflogs' / 'local' / 'shm' / 'MdCheck.log')
    assert [r['mode'] for r in records] == ['masteronly']   # no failed record


# ---- bad input to the kernel checks: said before anything runs ----------------------

def _kernels():
    from reframe.utility import import_module_from_file
    return import_module_from_file(str(REPO / 'checks' / 'kernels.py'))


@pytest.mark.parametrize('check, param, reason', [
    # A division by zero in setup, and a size the kernel was given.
    ('SpmvCheck', 'problem=0', 'spmv problem size 0 must be a positive integer'),
    ('StreamCheck', 'problem=-1', 'stream problem size -1 must be a positive integer'),
    # Modes the kernel lacks ran and failed with "exited with status 2".
    ('StreamCheck', 'layout=serial_1x1_decomp2',
     'mode serial is not a mode of stream (its modes: mpi, masteronly)'),
    ('MdCheck', 'layout=funneled_1x2',
     'mode funneled is not a mode of md (its modes: mpi, masteronly)'),
])
def test_bad_typed_parameters_are_skipped_with_the_reason(tmp_path, check, param, reason):
    proc = run_reframe(tmp_path, '-n', check, '-P', param, '-P', 'sample=0', '--dry-run',
                       '--system', 'local:shm', env={'HARNESS_STACKS': 'mpich'})
    out = proc.stdout + proc.stderr
    assert 'Traceback' not in out, out[-4000:]
    assert proc.returncode == 0 and f'[infeasible: {reason}]' in out, out[-4000:]


def test_spmv_iters_is_an_exact_count():
    # -S SpmvCheck.iters=5 was a floor: --min-time stretched it to 5124 calls.
    from types import SimpleNamespace
    spmv = _kernels().SpmvCheck
    check = SimpleNamespace(iters=5, mode='mpi', problem=8, decomp=1,
                            min_time_args=lambda: ['--min-time', '0.2'])
    assert spmv.kernel_args(check) == ['--n', '8', '--iters', '5']
    check.iters = 0     # the plan's floor, stretched by --min-time
    assert spmv.kernel_args(check) == ['--n', '8', '--iters', '10', '--min-time', '0.2']
    # The docs said every kernel check passes --min-time: the ring never did.
    docs = ' '.join((REPO / 'docs' / 'pages' / 'plan.md').read_text().split())
    assert ('`RingCheck` and `StreamCheck` run fixed counts (`iters_scale`, `iters`) and '
            'ignore `min_time`') in docs
    assert '`-S SpmvCheck.iters=N` is an exact count (no `--min-time`)' in docs


def test_a_verdict_pair_is_selected_by_name_as_the_docs_say(tmp_path):
    # -P pair=... resolved no dependency (Ran 0/0, PASSED); -n '...%pair=...'
    # selects the verdict with the runs it judges.
    docs = (REPO / 'docs' / 'pages' / 'plan.md').read_text()
    assert "-n 'HybridVerdict%pair=md/24/masteronly_1x2'" in docs
    proc = run_reframe(tmp_path, '-n', 'HybridVerdict%pair=md/24/masteronly_1x2', '--list',
                       '--system', 'local:shm', env={'HARNESS_STACKS': 'mpich'})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '- HybridVerdict %pair=md/24/masteronly_1x2 ' in proc.stdout, proc.stdout
    assert '^MdCheck %layout=mpi_2x1 %problem=24 %sample=0' in proc.stdout, proc.stdout
    # The message for a bad pair gives the form that works (-P splits at commas).
    with pytest.raises(ValueError, match=r"-n 'HybridVerdict%pair=ring/8,65536,1048576/"):
        _kernels()._parse_pair('ring/8')


@pytest.mark.parametrize('values', ['nodes=1,2', 'min_time=0,0.05'])
def test_a_verdict_of_a_parameterized_session_depends_on_its_pair(tmp_path, values):
    # -P VAR=V1,V2 numbers the kernel checks' variants anew: the verdict's
    # names of the old numbering were other runs, e.g. a masteronly verdict
    # on two pure-MPI runs (T_hybrid from mpi_2x1), or at nodes=1 on the runs at 2.
    import re
    proc = run_reframe(tmp_path, '-n', 'HybridVerdict%pair=stream/8000000/masteronly_1x2',
                       '-n', 'StreamCheck', '-P', values, '--list', '--system', 'local:shm',
                       env={'HARNESS_STACKS': 'mpich'}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdicts = re.findall(r'^- HybridVerdict .*?(?:%\.nodes=(\d))? /\w+\n((?:    .*\n)*)',
                          proc.stdout, re.M)
    assert verdicts, proc.stdout
    for nodes, deps in verdicts:
        runs = re.findall(r'^    \^StreamCheck %layout=(\S+) .*?(?:%\.nodes=(\d))? /', deps, re.M)
        assert {lay for lay, _ in runs} == {'mpi_2x1', 'masteronly_1x2'}, proc.stdout
        assert all(n == nodes for _, n in runs), proc.stdout


def test_a_verdict_pair_without_runs_says_so(tmp_path):
    # statistics error: no median for empty data.
    proc = run_reframe(tmp_path, '-n', 'HybridVerdict', '-P', 'pair=spmv/999/masteronly_1x2',
                       '-r', '--system', 'local:shm', env={'HARNESS_STACKS': 'mpich'})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and 'no median' not in out, out[-4000:]
    assert ('no runs of spmv size 999 layout mpi_2x1 in this session (the mpi side of '
            'spmv/999/masteronly_1x2)') in out, out[-4000:]


def test_md_against_lammps_on_a_declared_node_is_flagged_and_left_unbound(tmp_path, stacks):
    """The benchmark's own launches were bound as on a real node and its record
    said oversubscribed=false on a declared node (and on test nodes that share
    cores); md's runs say where their threads ran, as every kernel check reads."""
    import shutil
    if 'openmpi' not in stacks or not shutil.which('lmp'):
        pytest.skip("Debian's lmp runs on Open MPI")
    proc = run_reframe(tmp_path, '--system', 'declared:cores16', '-r', '-n',
                       'MdLammpsBenchmark', '-S', 'rounds=1', '-S', 'max_rounds=1',
                       '--keep-stage-files',
                       env={'HARNESS_STACKS': 'openmpi'}, timeout=600)
    assert 'sanity' not in ''.join(ln for ln in proc.stdout.splitlines()
                                   if 'Failing phase' in ln), proc.stdout[-6000:]
    (row,) = _records(tmp_path / 'perflogs' / 'declared' / 'cores16' / 'MdLammpsBenchmark.log')
    assert row['oversubscribed'] == 'true' and row['verified'] == 'true', row
    bench = next(tmp_path.glob('**/MdLammpsBenchmark/bench.sh')).read_text()
    assert 'OMPI_MCA_hwloc_base_binding_policy=none' in bench, bench
    assert 'OMP_PLACES' not in bench, bench
