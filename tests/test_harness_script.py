"""The ./harness entry point: its commands and its input checks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO


def harness(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / 'harness'), *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


def test_help_lists_the_commands():
    proc = harness('--help')
    assert proc.returncode == 0
    for cmd in ('./harness run', './harness test', './harness setup'):
        assert cmd in proc.stdout


def test_help_prints_every_knob_of_the_one_list(tmp_path):
    from harnesscore.knobs import KNOBS, help_text
    outputs = {arg: harness(arg).stdout for arg in ('--help', '-h', 'help')}
    assert len(set(outputs.values())) == 1, 'help, -h and --help differ'
    text = outputs['--help']
    missing = [k.name for k in KNOBS if k.name not in text]
    assert not missing, f'knobs missing from ./harness --help: {missing}'
    assert help_text() in text
    assert './harness site' in text
    # before the virtual environment exists: the system's Python prints the list
    proc = harness('--help', HARNESS_VENV=str(tmp_path / 'no-venv'))
    assert proc.returncode == 0 and help_text() in proc.stdout, proc.stderr
    # without any Python: the commands, and where the knobs are written down
    proc = harness('--help', HARNESS_VENV=str(tmp_path / 'no-venv'), PYTHON='no-such-python')
    assert proc.returncode == 0 and './harness run' in proc.stdout
    assert 'docs/pages/knobs.md' in proc.stdout and 'HARNESS_SOFT_ZONE' not in proc.stdout


def test_unknown_command_is_an_error():
    proc = harness('bogus')
    assert proc.returncode != 0
    assert "unknown command 'bogus'" in proc.stderr


def test_bad_repeat_is_refused_before_anything_is_installed():
    proc = harness('run', HARNESS_REPEAT='three')
    assert proc.returncode != 0
    assert "HARNESS_REPEAT must be an integer from 1 to 100, got 'three'" in proc.stderr
    assert '[1/4]' not in proc.stdout


def test_relative_paths_are_the_users_not_the_checkouts(tmp_path):
    # ./harness runs its commands from the checkout: a relative venv (or
    # prefix, or cluster file) was looked up there, not where the user is.
    def baseline_help(**env: str) -> None:
        proc = subprocess.run([str(REPO / 'harness'), 'baseline', '--help'], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, 'HARNESS_NO_APT': '1', **env})
        assert proc.returncode == 0 and 'usage: hybridverdict-baseline' in proc.stdout, \
            proc.stderr

    (tmp_path / 'myvenv').symlink_to(REPO / '.venv')
    baseline_help(HARNESS_VENV='myvenv', HARNESS_VAR_DIR='var')
    assert (tmp_path / 'var').is_dir()
    # a literal ~ (a quoted export, cron, systemd) is the home, as the tools read it
    home = tmp_path / 'home'
    home.mkdir()
    (home / 'myvenv').symlink_to(REPO / '.venv')
    baseline_help(HOME=str(home), HARNESS_VENV='~/myvenv', HARNESS_VAR_DIR='~/var')
    assert (home / 'var').is_dir() and not (tmp_path / '~').exists()
    # a blank one is the default, as the tools read it: it was a folder ' ' here
    baseline_help(HARNESS_VENV=' ', HARNESS_VAR_DIR=' ')
    assert sorted(p.name for p in tmp_path.iterdir()) == ['home', 'myvenv', 'var']


def test_spacks_install_tree_is_the_users_path_too(tmp_path):
    # HARNESS_SPACK_INSTALL_TREE was not among the path knobs ./harness resolves:
    # a relative one was taken from the checkout, where the checks run.
    import hashlib
    venv = _venv(tmp_path, reframe='echo 4.10',
                 **{'hybridverdict-baseline': 'echo "tree=$HARNESS_SPACK_INSTALL_TREE"'})
    (venv / '.harness-installed').write_text(
        hashlib.sha1((REPO / 'pyproject.toml').read_bytes()).hexdigest() + '\n')
    proc = subprocess.run([str(REPO / 'harness'), 'baseline'], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, 'HARNESS_VENV': str(venv), 'HARNESS_NO_APT': '1',
                               'HARNESS_VAR_DIR': str(tmp_path / 'var'),
                               'HARNESS_SPACK_INSTALL_TREE': 'spack tree'})
    assert proc.returncode == 0, proc.stderr
    assert f'tree={tmp_path}/spack tree' in proc.stdout.splitlines(), proc.stdout


def test_a_bad_change_point_knob_is_refused_before_the_session(tmp_path):
    # The report reads HARNESS_CHANGE_* at the session's end: a bad one failed
    # the run or nightly only after all of ReFrame's checks had run.
    import hashlib
    venv = _venv(tmp_path, reframe='case " $* " in *" -r "*) echo ran >> "$REFRAME_LOG";; '
                                   '*) echo 4.10;; esac')
    (venv / '.harness-installed').write_text(
        hashlib.sha1((REPO / 'pyproject.toml').read_bytes()).hexdigest() + '\n')
    log = tmp_path / 'reframe.log'
    for command in ('run', 'nightly'):
        proc = harness(command, HARNESS_VENV=str(venv), HARNESS_NO_APT='1',
                       HARNESS_VAR_DIR=str(tmp_path / 'var'), REFRAME_LOG=str(log),
                       HARNESS_CHANGE_P_VALUE='abc')
        assert proc.returncode == 2, proc.stderr
        assert "harness: error: HARNESS_CHANGE_P_VALUE='abc': not a number" in proc.stderr
        assert 'plan:' not in proc.stdout and '[3/4]' not in proc.stdout
    assert not log.exists(), 'reframe ran a session'


def test_readme_quick_start_holds_the_two_commands():
    text = (REPO / 'README.md').read_text()
    block = text.split('## Quick start', 1)[1].split('```sh', 1)[1].split('```', 1)[0]
    cmds = [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith('#')]
    assert cmds == ['./harness run', './harness test']
    assert (REPO / '.ci' / 'run').read_text().count('./harness test') == 1


def test_help_lists_nightly_and_test_installs_slurm_for_the_tests():
    proc = harness('--help')
    assert './harness nightly' in proc.stdout
    assert 'set -euo' not in proc.stdout
    text = (REPO / 'harness').read_text()
    assert 'TEST_APT_PACKAGES=(slurm-wlm lmod)' in text   # the test clusters and their modules
    assert 'apt_install "${TEST_APT_PACKAGES[@]}"' in text.split('cmd_test()', 1)[1]


def test_one_session_per_var_dir_and_a_killed_ones_lock_is_recovered(tmp_path):
    import signal
    import time
    var = tmp_path / 'var'
    var.mkdir()
    lock = var / '.session.lock'
    ready = tmp_path / 'ready'
    # another session holding the var dir, as ./harness does
    holder = subprocess.Popen(
        ['bash', '-c', f'exec 9>>"{lock}"; flock 9; echo "pid $$, ./harness run, started '
                       f'2026-11-25T02:00:00Z on here" > "{lock}"; touch "{ready}"; sleep 120'])
    try:
        for _ in range(100):
            if ready.exists():
                break
            time.sleep(0.1)
        env = {'HARNESS_VAR_DIR': str(var), 'HARNESS_NO_APT': '1'}
        for cmd in ('baseline', 'run', 'nightly'):
            proc = harness(cmd, **env)
            assert proc.returncode != 0, proc.stdout
            assert (f'is in use by another session (pid {holder.pid}, ./harness run, started '
                    '2026-11-25T02:00:00Z') in proc.stderr, proc.stderr
        waited = time.monotonic()
        proc = harness('baseline', HARNESS_LOCK_WAIT='2', **env)
        assert proc.returncode != 0 and time.monotonic() - waited >= 2
        assert 'in use by another session' in proc.stderr
        assert 'HARNESS_LOCK_WAIT must be whole seconds' in harness(
            'baseline', HARNESS_LOCK_WAIT='soon', **env).stderr
    finally:
        holder.send_signal(signal.SIGKILL)     # killed: no clean-up of its lock
        holder.wait()
    proc = harness('baseline', **env)
    assert 'in use by another session' not in proc.stderr
    assert lock.read_text().startswith('pid ') and './harness baseline' in lock.read_text()


def _functions(*names: str) -> str:
    """The text of ./harness's functions `names`."""
    text = (REPO / 'harness').read_text()
    out = []
    for name in names:
        func = text[text.index(f'\n{name}() {{\n'):]
        out.append(func[:func.index('\n}\n') + 3])
    return ''.join(out)


def _venv(tmp_path: Path, **tools: str) -> Path:
    """A virtual environment for ./harness's functions (its VENV): its python is
    this one, and each of `tools` a bash script of that body."""
    import sys
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    for name, body in {'python': f'exec {sys.executable} "$@"', **tools}.items():
        (venv / 'bin' / name).write_text(f'#!/bin/bash\n{body}\n')
        (venv / 'bin' / name).chmod(0o755)
    return venv


def _cmd_run(tmp_path: Path, venv: Path, tail: str, stubbed: list[str], **env: str
             ) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The script `tail` after the harness's session functions, with `venv`, the
    steps around ReFrame stubbed (and the functions named in `stubbed`), and its
    environment (ARGS_LOG: tmp_path/args)."""
    stubs = ''.join(f'{name}() {{ :; }}\n' for name in (
        'say', 'warn', 'check_repeat', 'setup', 'lock_var_dir', 'check_session',
        'more_rounds', *stubbed))
    functions = [f for f in ('session', 'run_args', 'cmd_run', 'print_plan', 'on_signal',
                             'in_group', 'stop_if_signalled', 'session_report',
                             'report_since') if f not in stubbed]
    script = (_functions(*functions) + stubs
              + 'die() { echo "$*" >&2; exit 3; }\nHARNESS_REPEAT=3\n' + tail + '\n')
    environ = {k: v for k, v in os.environ.items() if k != 'HARNESS_BUDGET'}
    environ.update(VENV=str(venv), ROOT=str(REPO), ARGS_LOG=str(tmp_path / 'args'),
                   HARNESS_VAR_DIR=str(tmp_path / 'var'), **env)
    return subprocess.run(['bash', '-c', script], capture_output=True, text=True,
                          timeout=120, env=environ), environ


def test_run_arguments_select_the_stacks_of_the_budget_split(tmp_path):
    # ./harness run -p openmpi: print_plan read only HARNESS_REFRAME_OPTS, so the
    # budget was split across every stack, and run dropped its arguments.
    import sys
    venv = _venv(tmp_path, reframe='for a in "$@"; do printf "[%s]" "$a"; done > "$ARGS_LOG"')
    proc, env = _cmd_run(tmp_path, venv, 'cmd_run -p openmpi\necho "$HARNESS_BUDGET $_parts"',
                         ['report_since'], HARNESS_REFRAME_OPTS='--system declared')
    assert proc.returncode == 0, proc.stderr
    plan = [sys.executable, '-m', 'harnesslib.plan', '--system', 'declared', '--part-budget',
            '--budget', '30m']
    picked = subprocess.run([*plan, '-p', 'openmpi'], capture_output=True, text=True,
                            timeout=120, env=env).stdout.split()
    # one openmpi stack on each of the two declared partitions
    assert picked[2] == '2'
    assert proc.stdout.splitlines()[-1] == f'{picked[0]}s/part 2', proc.stdout
    assert (tmp_path / 'args').read_text().endswith('[-r][--system][declared][-p][openmpi]')


def test_options_knobs_over_several_lines_are_read_whole(tmp_path):
    # HARNESS_REFRAME_OPTS and HARNESS_REPORT_OPTS were read with `read -a`,
    # which stops at the first newline: a knob written over several lines (a
    # YAML block, a multi-line export) silently lost every line after its first.
    venv = _venv(tmp_path, reframe='for a in "$@"; do printf "[%s]" "$a"; done > "$ARGS_LOG"',
                 hybridverdict='for a in "$@"; do printf "[%s]" "$a"; done > "$REPORT_LOG"')
    proc, _env = _cmd_run(tmp_path, venv, 'cmd_run\necho "$_parts"', [],
                          REPORT_LOG=str(tmp_path / 'report'),
                          HARNESS_REFRAME_OPTS='--system declared\n  -p openmpi\n',
                          HARNESS_REPORT_OPTS='--no-write\n--functional-verdicts')
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / 'args').read_text().endswith('[-r][--system][declared][-p][openmpi]')
    # the plan split the budget across the openmpi stack of the two partitions
    assert proc.stdout.splitlines()[-1] == '2', proc.stdout
    assert (tmp_path / 'report').read_text().endswith('[--no-write][--functional-verdicts]')


def test_check_session_counts_every_record_of_the_session_in_the_perflogs(tmp_path):
    # check_session (hybridverdict.session_check): a record of a check without
    # the harness's fields (no kernel, no session) counts as well as a kernel's;
    # a lost one is named, and a run report older than the session is not its own.
    import json
    import time

    from harnesscore.schema import header_fields
    venv = _venv(tmp_path)
    reports, logs = tmp_path / 'var' / 'reports', tmp_path / 'var' / 'perflogs' / 'sys' / 'p'
    reports.mkdir(parents=True)
    logs.mkdir(parents=True)
    (reports / 'run-report-9.json').write_text('{}')       # another reframe's, before
    time.sleep(0.05)
    (tmp_path / 'marker').touch()
    time.sleep(0.05)
    names = ('Spmv %a=1', 'Own %b=2', 'Lost %c=3')
    cases = [{'system': 'sys', 'partition': 'p', 'environ': 'e', 'display_name': name,
              'perfvalues': {'sys:p:t': [1.0, 0, None, None, 's', 'pass']}} for name in names]
    (reports / 'run-report-3.json').write_text(json.dumps(
        {'session_info': {'num_cases': 3, 'num_skipped': 0}, 'runs': [{'testcases': cases}]}))
    fields = header_fields()

    def line(name: str, kernel: str, session: str) -> str:
        row = dict.fromkeys(fields, 'null')
        row.update(job_completion_time='2026-11-26T12:00:01+0000', system='sys', partition='p',
                   environ='e', name=name, kernel=kernel, session=session)
        return '|'.join(row[f] for f in fields) + '|1.0|s|0|None|None|'
    header = '|'.join(fields) + '|t_value|t_unit|t_ref|t_lower_thres|t_upper_thres|'
    (logs / 'Spmv.log').write_text(f'{header}\n{line(names[0], "spmv", "S1")}\n')
    (logs / 'Own.log').write_text(f'{header}\n{line(names[1], "null", "null")}\n')
    script = _functions('check_session') + 'check_session "$@"\n'
    env = {**os.environ, 'VENV': str(venv), 'HARNESS_VAR_DIR': str(tmp_path / 'var'),
           'HARNESS_SESSION': 'S1', 'SESSION_SINCE': '2026-11-26T12:00:00+00:00'}

    def check(report: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(['bash', '-c', script, 'check_session', str(tmp_path / 'marker'),
                               str(reports / report)], capture_output=True, text=True,
                              env=env, timeout=60)
    proc = check('run-report-{sessionid}.json')
    assert proc.returncode == 1
    assert proc.stderr == (f'harness: error: only 2 of 3 performance records of this session '
                           f'reached the perflogs in {tmp_path}/var/perflogs (missing: Lost '
                           f'%c=3 @sys:p+e): ReFrame could not write them (a full disk, or a '
                           f'perflog it may not write: see its "Logging error" above)\n')
    with (logs / 'Own.log').open('a') as fh:
        fh.write(line(names[2], 'null', '') + '\n')
    assert check('run-report-{sessionid}.json').returncode == 0
    (reports / 'run-report-3.json').unlink()
    proc = check('run-report-{sessionid}.json')
    assert proc.returncode == 1
    assert proc.stderr == ('harness: warning: ReFrame wrote no run report: the session ran '
                           'nothing (see above)\n')


def _one_case_report(path: Path, perf: bool = True) -> None:
    """A ReFrame run report of one test case (with a performance value)."""
    import json
    case = {'system': 'sys', 'partition': 'p', 'environ': 'e', 'display_name': 'Spmv %a=1',
            'perfvalues': {'sys:p:t': [1.0, 0, None, None, 's', 'pass']} if perf else {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({'session_info': {'num_cases': 1, 'num_skipped': 0},
                                'runs': [{'testcases': [case]}]}))


def _perflog(path: Path, session: str) -> None:
    """A perflog of the one record of `_one_case_report`, of `session`."""
    from harnesscore.schema import header_fields
    fields = header_fields()
    row = dict.fromkeys(fields, 'null')
    row.update(job_completion_time='2026-11-26T12:00:01+0000', system='sys', partition='p',
               environ='e', name='Spmv %a=1', kernel='spmv', session=session)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('|'.join(fields) + '|t_value|t_unit|t_ref|t_lower_thres|t_upper_thres|\n'
                    + '|'.join(row[f] for f in fields) + '|1.0|s|0|None|None|\n')


def _check_session(tmp_path: Path, report: str, session: str
                   ) -> subprocess.CompletedProcess[str]:
    """./harness's check_session of the session begun at tmp_path/marker."""
    script = _functions('check_session') + 'check_session "$@"\n'
    venv = tmp_path / 'venv' if (tmp_path / 'venv').exists() else _venv(tmp_path)
    env = {**os.environ, 'VENV': str(venv), 'HARNESS_VAR_DIR': str(tmp_path / 'var'),
           'HARNESS_SESSION': session, 'SESSION_SINCE': '2026-11-26T12:00:00+00:00'}
    return subprocess.run(['bash', '-c', script, 'check_session', str(tmp_path / 'marker'),
                           report], capture_output=True, text=True, env=env, timeout=60,
                          cwd=tmp_path)


def test_check_session_reads_harness_session_as_the_checks_write_it(tmp_path):
    # The checks record HARNESS_SESSION stripped, '|' as '/' (base.session_id:
    # field_text); check_session compared the raw value: HARNESS_SESSION='nightly|ci '
    # failed a good session ('only 0 of 1 performance records ...').
    import time
    (tmp_path / 'marker').touch()
    time.sleep(0.05)
    report = tmp_path / 'var' / 'reports' / 'mine.json'
    _one_case_report(report)
    log = tmp_path / 'var' / 'perflogs' / 'sys' / 'p' / 'Spmv.log'
    _perflog(log, 'nightly/ci')
    proc = _check_session(tmp_path, str(report), 'nightly|ci ')
    assert proc.returncode == 0, proc.stderr
    assert _check_session(tmp_path, str(report), 'nightly/ci').returncode == 0
    # another session's record is still not this one's
    _perflog(log, 'other')
    proc = _check_session(tmp_path, str(report), 'nightly|ci ')
    assert proc.returncode == 1 and 'only 0 of 1 performance records' in proc.stderr


def test_check_session_finds_a_report_file_with_variables_as_reframe_writes_it(tmp_path):
    # ReFrame expands $VAR in --report-file and normalises the path; the harness
    # looked for the literal text: 'ReFrame wrote no run report'.
    import time
    (tmp_path / 'marker').touch()
    time.sleep(0.05)
    _one_case_report(tmp_path / 'var' / 'reports' / 'mine-4.json', perf=False)
    _one_case_report(tmp_path / 'var' / 'fixed.json', perf=False)
    for pattern in ('${HARNESS_VAR_DIR}/reports/mine-{sessionid}.json',
                    '$HARNESS_VAR_DIR/reports/../fixed.json', 'var//./fixed.json',
                    '$(echo var)/reports/mine-{sessionid}.json'):
        proc = _check_session(tmp_path, pattern, 'S1')
        assert proc.returncode == 0, (pattern, proc.stderr)
    proc = _check_session(tmp_path, '${HARNESS_VAR_DIR}/reports/none-{sessionid}.json', 'S1')
    assert proc.returncode == 1 and 'ReFrame wrote no run report' in proc.stderr


def test_check_session_does_not_run_a_report_files_command_again(tmp_path, monkeypatch):
    # A $(cmd) in --report-file was run again by check_session, to another output:
    # '--report-file=.../run-$(date +%s).json' of a session that wrote
    # run-<its second>.json failed it, 'ReFrame wrote no run report'.  Each command
    # is any part of one name now, never run; the newest file after the marker.
    import time

    from hybridverdict import session_check
    (tmp_path / 'marker').touch()
    time.sleep(0.05)
    reports = tmp_path / 'var' / 'reports'
    _one_case_report(reports / 'run-1795707622.json', perf=False)
    time.sleep(0.05)
    _one_case_report(reports / 'run-1795707623-x.json', perf=False)
    _one_case_report(tmp_path / 'other' / 'run-5.json', perf=False)
    ran = tmp_path / 'ran'
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path / 'var'))
    newest, other = 'var/reports/run-1795707623-x.json', 'other/run-5.json'
    for pattern, want in (
            (f'$HARNESS_VAR_DIR/reports/run-$(touch {ran}; date +%s).json', newest),
            (f'${{HARNESS_VAR_DIR}}/reports/run-`touch {ran}`{{sessionid}}.json',
             'var/reports/run-1795707622.json'),
            (f'{reports}/run-$(date +%s)-$(echo x).json', newest),
            (f'$(touch {ran}; echo var)/reports/run-$(echo $(date +%s))*.json', None),
            ('$(echo var)/../$(echo other)/run-{sessionid}.json', other),
            ('$(echo var)/reports/../../other/run-$(date).json', other),
            ('$(echo var/reports)/run-1795707622.json', None),     # one name each
            (f'{reports}/run-$(date +%s).txt', None)):
        found = session_check.run_report(str(tmp_path / 'marker'), pattern)
        assert (os.path.relpath(found, tmp_path) if found else None) == want, pattern
        assert not ran.exists(), pattern
    args = [str(tmp_path / 'marker'), '$HARNESS_VAR_DIR/reports/run-$(date +%s).json',
            str(tmp_path / 'var' / 'perflogs'), 'S1', '2026-11-26T12:00:00+00:00']
    assert session_check.main(args) == 0


def test_check_session_a_fixed_report_file_of_an_earlier_session_is_not_its_own(tmp_path):
    # A fixed --report-file left by an earlier session (ReFrame writes none when
    # it ran nothing) passed the session; only '{sessionid}' files were dated.
    import time
    report = tmp_path / 'var' / 'mine.json'
    _one_case_report(report, perf=False)
    time.sleep(0.05)
    (tmp_path / 'marker').touch()
    proc = _check_session(tmp_path, str(report), 'S1')
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ('harness: warning: ReFrame wrote no run report: the session ran '
                           'nothing (see above)\n')
    time.sleep(0.05)
    _one_case_report(report, perf=False)                # this session's
    assert _check_session(tmp_path, str(report), 'S1').returncode == 0


def _signalled(tmp_path: Path, script: str) -> subprocess.Popen[str]:
    """`script` (bash) in a session of its own, as a terminal starts it."""
    import signal

    def default_signals() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return subprocess.Popen(['bash', '-c', script], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=default_signals,
                            env={**os.environ, 'HARNESS_VAR_DIR': str(tmp_path)})


_STEP = ('set -euo pipefail\nSIGNALLED=""\nSTEP_PID=""\nwarn() { echo "warn: $*" >&2; }\n'
         + "trap 'on_signal INT' INT\ntrap 'on_signal TERM' TERM\n")


def test_a_step_runs_in_the_harnesss_process_group(tmp_path):
    # in_group ran ReFrame in a process group of its own (set -m): a SIGKILL to
    # the harness's group (timeout -s KILL, a CI) left ReFrame running, holding
    # the var dir's lock.  Ctrl-C (SIGINT to the group) stops the step through
    # the harness, as SIGTERM (a background step ignores SIGINT): exit 130.
    import signal
    import time
    script = (_functions('on_signal', 'pass_on', 'in_group', 'stop_if_signalled') + _STEP
              + 'in_group bash -c \'trap "echo TERM > got; exit 1" TERM; ps -o pgid= $$ > pgid;'
              ' for _ in $(seq 300); do sleep 0.1; done\' || echo "status $?"\n'
              'stop_if_signalled\necho ended\n')
    for sig, rc in ((signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 130)):
        (tmp_path / 'pgid').unlink(missing_ok=True)
        proc = _signalled(tmp_path, script)
        for _ in range(300):
            if (tmp_path / 'pgid').exists() and (tmp_path / 'pgid').read_text().strip():
                break
            time.sleep(0.05)
        assert int((tmp_path / 'pgid').read_text()) == proc.pid
        os.killpg(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == rc, (sig, out, err)
        for _ in range(50):             # the killed ones reaped
            left = subprocess.run(['ps', '-o', 'pid=,stat=,args=', '-s', str(proc.pid)],
                                  capture_output=True, text=True).stdout.splitlines()
            if not left:
                break
            time.sleep(0.1)
        assert not left, (sig, left)
    assert (tmp_path / 'got').read_text() == 'TERM\n'
    assert out == 'status 1\n' and 'warn: the session was stopped by SIGINT' in err, (out, err)


def test_ctrl_c_during_the_plan_stops_the_session(tmp_path):
    # Ctrl-C while the plan was made: 'cannot make the plan', exit status 1 (the
    # docs: 130, 'stopped by SIGINT').
    venv = _venv(tmp_path, python='kill -INT 0; sleep 5; exit 1')
    script = (_functions('on_signal', 'pass_on', 'in_group', 'stop_if_signalled', 'print_plan')
              + _STEP + f'VENV={venv}\nROOT={REPO}\nsay() {{ :; }}\n'
              'die() { echo "die: $*" >&2; exit 1; }\nprint_plan\necho planned\n')
    proc = _signalled(tmp_path, script)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert 'warn: the session was stopped by SIGINT' in err and 'cannot make' not in err, err


def test_a_python_older_than_3_10_is_named_before_the_venv(tmp_path):
    # pip's own error named no version (ReFrame-HPC 4.10.4 requires 3.10)
    old = tmp_path / 'python3.9'
    old.write_text('#!/bin/bash\n[ "$1" = --version ] && { echo "Python 3.9.18"; exit 0; }\n'
                   '[ "$1" = -c ] && exit 1\nexit 3\n')
    old.chmod(0o755)
    proc = harness('setup', HARNESS_NO_APT='1', HARNESS_VENV=str(tmp_path / 'venv'),
                   PYTHON=str(old))
    assert proc.returncode != 0
    assert (f'harness: error: {old} is not Python 3.10 or later (Python 3.9.18)'
            in proc.stderr), proc.stderr
    assert not (tmp_path / 'venv').exists()
