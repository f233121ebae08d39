"""The local system is worked out when config/settings.py loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIG, fake_prefix, last_attempts, mpi_env

LOAD = ('import json, runpy, sys; c = runpy.run_path(sys.argv[1])["site_configuration"]; '
        'print(json.dumps(c))')


def load(tmp_path, **env: str) -> tuple[dict, str]:
    environ = mpi_env(HARNESS_VAR_DIR=str(tmp_path), **env)
    environ.pop('HARNESS_QUIET')
    for var in ('HARNESS_STACKS', 'HARNESS_MVAPICH2_PREFIX'):
        if var not in env:
            environ.pop(var, None)
    proc = subprocess.run([sys.executable, '-c', LOAD, str(CONFIG)], env=environ,
                          capture_output=True, text=True)
    if proc.returncode:
        return {}, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def envs_of(conf: dict, part: str) -> dict[str, dict]:
    """The environments ReFrame picks on local:<part> (the most specific)."""
    found: dict[str, dict] = {}
    for target in ('local', f'local:{part}'):
        found.update({e['name']: e for e in conf['environments'] if target in e['target_systems']})
    return found


def test_one_environment_per_present_stack_with_its_own_wrappers(tmp_path, stacks):
    conf, _ = load(tmp_path)
    for part in ('shm', 'tcp'):
        envs = envs_of(conf, part)
        assert sorted(envs) == sorted(stacks)
        for name, env in envs.items():
            suffix = {'openmpi': 'openmpi', 'mpich': 'mpich'}[name]
            assert env['cc'].endswith(f'mpicc.{suffix}')
            assert os.path.basename(env['extras']['launcher']).endswith(f'.{suffix}')
    parts = {p['name']: p for p in conf['systems'][0]['partitions']}
    assert set(parts) == {'shm', 'tcp'}
    assert sorted(parts['shm']['environs']) == sorted(stacks)


def test_each_partition_pins_the_transport_it_claims(tmp_path, stacks):
    conf, _ = load(tmp_path)
    tcp, shm = envs_of(conf, 'tcp'), envs_of(conf, 'shm')
    want = {'openmpi': ('OMPI_MCA_btl', 'self,tcp', 'self,vader'),
            'mpich': ('UCX_TLS', 'tcp,self', 'sm,self')}
    for name in stacks:
        var, on_tcp, on_shm = want[name]
        assert dict(map(tuple, tcp[name]['env_vars']))[var] == on_tcp
        assert dict(map(tuple, shm[name]['env_vars']))[var] == on_shm
        # the runs check what the partition pins (RunBase.check_mpi_env)
        assert tcp[name]['extras']['pinned'][var] == on_tcp
        assert shm[name]['extras']['pinned'][var] == on_shm
    if 'openmpi' in stacks:
        assert shm['openmpi']['extras']['pinned']['OMPI_MCA_pml'] == 'ob1'


def test_the_shells_mpi_variables_are_taken_out_unless_kept(tmp_path):
    shell = {'OMPI_MCA_btl': 'tcp,self', 'UCX_TLS': 'tcp', 'MPIR_CVAR_ASYNC_PROGRESS': '1'}
    code = ('import os, runpy, sys; runpy.run_path(sys.argv[1]); '
            'print(sorted(k for k in shell if k in os.environ))').replace(
                'shell', repr(sorted(shell)))
    for mode, kept in (('', []), ('clean', []), ('keep', sorted(shell))):
        env = mpi_env(HARNESS_VAR_DIR=str(tmp_path), HARNESS_MPI_ENV=mode, **shell)
        env.pop('HARNESS_QUIET')
        proc = subprocess.run([sys.executable, '-c', code, str(CONFIG)], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == repr(kept)
        named = 'the runs do not inherit MPIR_CVAR_ASYNC_PROGRESS, OMPI_MCA_btl, UCX_TLS'
        assert (named in proc.stderr) == (mode != 'keep'), proc.stderr
    conf, err = load(tmp_path, HARNESS_MPI_ENV='bogus')
    assert not conf and "HARNESS_MPI_ENV must be one of clean, keep, got 'bogus'" in err


def test_restricting_stacks(tmp_path, stacks):
    conf, _ = load(tmp_path, HARNESS_STACKS=stacks[0])
    assert set(envs_of(conf, 'shm')) == {stacks[0]}


def test_stack_lists_take_commas_and_spaces(tmp_path, stacks):
    # as people type lists: "openmpi mpich", "openmpi, mpich" (was refused as
    # one unknown stack "openmpi mpich")
    for sep in (' ', ', ', ',', '  '):
        conf, err = load(tmp_path, HARNESS_STACKS=sep.join(stacks))
        assert set(envs_of(conf, 'shm')) == set(stacks), err
    # a stack named twice runs once (each partition listed it twice, and the
    # plan split the budget across both)
    conf, err = load(tmp_path, HARNESS_STACKS=f'{stacks[0]},{stacks[0]}')
    local = next(s for s in conf['systems'] if s['name'] == 'local')
    assert all(p['environs'] == [stacks[0]] for p in local['partitions']), err
    from harnesscore.knobs import split_list
    assert split_list(' a,b  c,, d ') == ['a', 'b', 'c', 'd'] and split_list('') == []


def test_unknown_stack_is_a_clear_error(tmp_path):
    conf, err = load(tmp_path, HARNESS_STACKS='intelmpi')
    assert not conf
    assert 'HARNESS_STACKS names unknown stack(s) intelmpi' in err


def test_absent_mvapich2_is_left_out_with_one_line(tmp_path, stacks):
    conf, err = load(tmp_path, HARNESS_MVAPICH2_PREFIX=str(tmp_path / 'no-mvapich2'))
    assert 'mvapich2' not in envs_of(conf, 'shm')
    lines = [ln for ln in err.splitlines() if 'mvapich2' in ln]
    assert len(lines) == 1 and 'left out' in lines[0]


def mpich_prefix(tmp_path: Path, stacks: list[str]) -> Path:
    """A prefix of links to MPICH's wrapper and launcher (an install of its own)."""
    if 'mpich' not in stacks:
        pytest.skip('needs MPICH')
    return fake_prefix(tmp_path, 'mv2', 'mpicc.mpich', 'mpiexec.mpich', 'mpiexec')


def test_a_prefix_gives_a_stack_its_wrappers(tmp_path, stacks):
    prefix = mpich_prefix(tmp_path, stacks)
    conf, _ = load(tmp_path, HARNESS_MVAPICH2_PREFIX=str(prefix))
    env = envs_of(conf, 'shm')['mvapich2']
    assert env['cc'] == str(prefix / 'bin' / 'mpicc')
    assert env['extras']['launcher'] == str(prefix / 'bin' / 'mpiexec')
    assert env['extras']['family'] == 'mvapich2'


def test_every_path_knob_takes_a_tilde_as_the_home(tmp_path, stacks, monkeypatch):
    """'~' in a knob's path (a quoted export, cron, systemd) is the home for plain
    reframe and the tools, as for ./harness and HARNESS_VAR_DIR: it was a folder
    named '~' under the current one."""
    prefix = mpich_prefix(tmp_path, stacks)
    conf, err = load(tmp_path, HOME=str(tmp_path), HARNESS_MVAPICH2_PREFIX='~/mv2')
    assert envs_of(conf, 'shm')['mvapich2']['cc'] == str(prefix / 'bin' / 'mpicc'), err
    conf, err = load(tmp_path, HOME=str(tmp_path), HARNESS_CLUSTERS='~/site_x.py')
    assert f'HARNESS_CLUSTERS names missing file(s): {tmp_path / "site_x.py"}' in err
    # with a comma, blanks belong to the paths (they were split at them too)
    conf, err = load(tmp_path, HOME=str(tmp_path), HARNESS_CLUSTERS='~/my sites/x.py,')
    assert f'HARNESS_CLUSTERS names missing file(s): {tmp_path / "my sites/x.py"}\n' in err
    from harnesscore import plan
    from hybridverdict import sequential
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('HARNESS_PLAN_COSTS', '~/costs.json')
    assert plan.costs_path() == str(tmp_path / 'costs.json')
    args = sequential.parse_args(['--since', '2026-11-26T00:00:00+00:00', '--deadline', '0',
                                 '--', 'reframe'])
    assert args.costs == str(tmp_path / 'costs.json')


def test_the_last_attempt_of_each_case_is_read_after_a_retry(tmp_path):
    """With --max-retries a failed case leaves its empty folder and reruns in
    <case>_retry<N>: the tests read each case's last attempt only."""
    for name in ('Spmv_a', 'Spmv_a_retry1', 'Spmv_a_retry2', 'Spmv_b', 'Md_c_retry1', 'Md_c'):
        (tmp_path / name).mkdir()
    assert [p.name for p in last_attempts(tmp_path, 'Spmv_*')] == ['Spmv_a_retry2', 'Spmv_b']
    assert [p.name for p in last_attempts(tmp_path)] == ['Md_c_retry1', 'Spmv_a_retry2',
                                                         'Spmv_b']


def test_every_tool_reads_the_var_dir_the_runs_write(tmp_path, monkeypatch):
    # ReFrame's configuration puts the runs in the checkout's var/ wherever
    # reframe runs; the baseline, the sequential rounds and the plan's costs
    # looked in ./var of wherever they ran, and missed them.
    from harnesscore import plan
    from harnesscore.paths import REFERENCES_DIR, var_dir
    from hybridverdict import baseline, sequential
    env = mpi_env()
    for var in ('HARNESS_VAR_DIR', 'HARNESS_QUIET', 'HARNESS_PLAN_COSTS', 'RFM_REFERENCE_PREFIX'):
        env.pop(var, None)
        monkeypatch.delenv(var, raising=False)
    code = 'import runpy, sys; print(runpy.run_path(sys.argv[1])["REAL_VAR_DIR"])'
    proc = subprocess.run([sys.executable, '-c', code, str(CONFIG)], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    written = proc.stdout.strip().splitlines()[-1]
    assert written == str(CONFIG.parent.parent / 'var')
    monkeypatch.chdir(tmp_path)
    args = baseline.parser().parse_args([])
    assert (args.perflogs, args.prefix) == ([os.path.join(written, 'perflogs')], REFERENCES_DIR)
    args = sequential.parse_args(['--since', '2026-11-26T00:00:00+00:00', '--deadline', '0',
                                 '--', 'reframe'])
    assert args.perflogs == os.path.join(written, 'perflogs')
    assert plan.costs_path() == os.path.join(written, 'plan-costs.json')
    # a var dir under ~ is the same one for the configuration and the tools
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('HARNESS_VAR_DIR', '~/night')
    env.update(HOME=str(tmp_path), HARNESS_VAR_DIR='~/night')
    proc = subprocess.run([sys.executable, '-c', code, str(CONFIG)], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.stdout.strip().splitlines()[-1] == str(tmp_path / 'night') == var_dir()


def test_the_configuration_and_the_tools_read_one_var_dir_whatever_its_spelling(
        tmp_path, monkeypatch):
    # One reading of HARNESS_VAR_DIR (harnesscore.paths.var_dir): the tools
    # stripped the value and the configuration did not; the report's default
    # store took the text as it stood (a relative path, '~').
    from harnesscore.paths import var_dir
    from hybridverdict.cli import parse_args, store_dir
    values = ['rel/var', '~/night', ' spaced ', f'{tmp_path}//x/../abs', '  ']
    code = ('import os, runpy, sys\n'
            'for v in sys.argv[2:]:\n'
            '    os.environ["HARNESS_VAR_DIR"] = v\n'
            '    print(runpy.run_path(sys.argv[1])["REAL_VAR_DIR"])\n')
    env = {**mpi_env(), 'HOME': str(tmp_path), 'HARNESS_QUIET': '1'}
    proc = subprocess.run([sys.executable, '-c', code, str(CONFIG), *values], env=env,
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('HOME', str(tmp_path))
    tools = []
    for value in values:
        monkeypatch.setenv('HARNESS_VAR_DIR', value)
        tools.append(var_dir())
        assert store_dir(parse_args([])) == os.path.join(tools[-1], 'history')
    assert proc.stdout.splitlines()[-len(values):] == tools == [
        str(tmp_path / 'rel/var'), str(tmp_path / 'night'), str(tmp_path / ' spaced '),
        str(tmp_path / 'abs'), str(CONFIG.parent.parent / 'var')]


def test_the_perflog_handler_writes_the_schemas_fields_then_each_variables_parts(tmp_path):
    # in the order the harness's own writers (tests/perflog_writer.py, reports/tools/
    # bench.py) and readers take: every run field, the session last, then per variable
    # value, unit, ref, lower and upper threshold
    from harnesscore.schema import PERFVAR_PARTS, header_fields
    conf, err = load(tmp_path)
    assert conf, err
    handler, = (h for h in conf['logging'][0]['handlers_perflog'] if h['type'] == 'filelog')
    fields = header_fields()
    assert fields[-1] == 'session'
    line = handler['format'] % {**{f'check_{f}': f for f in fields}, 'check_perfvalues': 'V'}
    assert line == '|'.join(fields) + '|V'
    block = handler['format_perfvars'] % {f'check_perf_{p}': p for p in PERFVAR_PARTS}
    assert block == 'value|unit|ref|lower_thres|upper_thres|'
