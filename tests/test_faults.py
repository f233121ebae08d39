"""Faults and bad input: what the user sees, and that nothing already written is lost.

Read ``CASES`` as a table, one row per fault or bad input::

    Case(what the user does or what goes wrong,
         what the user sees (a regular expression over stdout + stderr),
         the exit status: 'fail' (non-zero) or 'ok' (0),
         how it is done)

Every case runs against a var dir and a references folder that already hold a
perflog, a report and a references file (``world``); after the case each of
them must be byte for byte as before, no temporary or empty file may be left
beside them, and no Python traceback may reach the user.  ReFrame sessions run
one sample (``HARNESS_REPEAT=1``) of one small check.

Bad input to the kernels themselves (sizes, options, modes, thread levels,
killed ranks) is tested where the kernels are, in ``test_kernels.py``.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import BIN, CONFIG, REPO, fake_prefix, mpi_env, needs

HEADER_RUN = ('job_completion_time|system|partition|environ|name|kernel|mode|ranks|threads|'
              'size|cores|nodes|mpi_library|verified|oversubscribed|finalize_hung|'
              'build_spec|result')
PERF = ('fom_value|fom_unit|fom_ref|fom_lower_thres|fom_upper_thres|t_total_value|'
        't_total_unit|t_total_ref|t_total_lower_thres|t_total_upper_thres')
HEADER = f'{HEADER_RUN}|{PERF}'


def run_line(mode: str = 'mpi', ranks: int = 2, threads: int = 1, t: float = 1.0,
             result: str = 'pass', build: str = 'cmake Release mpich cc=/usr/bin/mpicc.mpich',
             lib: str = 'MPICH Version: 4.0.2', time: str = '2026-11-22T10:00:00+0000',
             name: str = '', verified: str = 'true', values: bool = True) -> str:
    name = name or f'StreamCheck %layout={mode}_{ranks}x{threads} %problem=8 %sample=0'
    run = (f'{time}|local|shm|mpich|{name}|stream|{mode}|{ranks}|{threads}|8|2|1|{lib}|'
           f'{verified}|false|false|{build}|{result}|')
    if not values:
        return run
    return run + f'2.5|GB/s|0|None|None|{t}|s|0|None|None|'


REFERENCES = """StreamCheck:
  $index: [$partition, $environ, ref_variant]
  local:shm:
    mpich:
      layout=mpi_2x1 problem=8:
        fom: [2.5, -0.5, null, GB/s]
"""


@dataclasses.dataclass
class World:
    """A var dir and a references folder with files already written."""

    root: Path
    var: Path
    refs: Path
    env: dict[str, str]
    before: dict[Path, bytes] = dataclasses.field(default_factory=dict)

    def snapshot(self) -> None:
        self.before = {p: p.read_bytes() for p in self.files()}

    def files(self) -> list[Path]:
        return sorted(p for d in (self.var / 'perflogs', self.var / 'reports', self.refs)
                      if d.exists() for p in d.rglob('*') if p.is_file())

    def reframe(self, *args: str, cwd: Path | None = None, checks: str = 'checks/kernels.py',
                **env: str) -> subprocess.CompletedProcess[str]:
        """The documented plain line: reframe -C config/settings.py -c checks ..."""
        return subprocess.run(
            [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), '-c', str(REPO / checks),
             *args], cwd=cwd or REPO, env={**self.env, **env}, capture_output=True,
            text=True, timeout=600)

    def harness(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(REPO / 'harness'), *args], cwd=self.root,
                              env={**self.env, 'HARNESS_NO_APT': '1', **env},
                              capture_output=True, text=True, timeout=600)

    def tool(self, name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / name), *args], cwd=self.root,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=300)

    def python(self, code: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`code` in a fresh interpreter (for faults injected with monkeypatching)."""
        return subprocess.run([sys.executable, '-c', code], cwd=self.root,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=300)


@pytest.fixture
def world(tmp_path: Path) -> World:
    var, refs = tmp_path / 'var', tmp_path / 'refs'
    log = var / 'perflogs' / 'local' / 'shm' / 'StreamCheck.log'
    log.parent.mkdir(parents=True)
    log.write_text('\n'.join([HEADER, run_line(), run_line('masteronly', 1, 2, t=0.9)]) + '\n')
    (var / 'reports').mkdir()
    (var / 'reports' / 'verdict-20261122T100000Z.md').write_text('# an earlier report\n')
    refs.mkdir()
    (refs / 'local.yaml').write_text(REFERENCES)
    # Quietness not recorded (busy=unknown): no fault here is about a busy
    # machine, and on a loaded one the baseline would leave every run out.
    env = mpi_env(HARNESS_VAR_DIR=str(var), RFM_REFERENCE_PREFIX=str(refs),
                  HARNESS_REPEAT='1', HARNESS_SNAPSHOTS='0')
    env.pop('HARNESS_STACKS', None)
    w = World(tmp_path, var, refs, env)
    w.snapshot()
    return w


def out(proc: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    return proc.returncode, proc.stdout + proc.stderr


# ---- the cases ---------------------------------------------------------------------


def bad_references(text: str) -> Callable[[World], tuple[int, str]]:
    def case(w: World) -> tuple[int, str]:
        (w.refs / 'local.yaml').write_text(text)
        w.snapshot()    # this file too must be left as it is
        return out(w.reframe('-n', 'StreamCheck', '--list'))
    return case


def relative_var_dir(w: World) -> tuple[int, str]:
    """A relative HARNESS_VAR_DIR is taken from where the user runs reframe."""
    here = w.root / 'elsewhere'
    here.mkdir()
    proc = w.reframe('-n', 'StreamCheck', '--list', cwd=here, HARNESS_VAR_DIR='relvar',
                     PWD=str(here))
    assert (here / 'relvar' / 'reframe.log').is_file()
    assert not (REPO / 'config' / 'relvar').exists()
    return out(proc)


def broken_check_file(w: World) -> tuple[int, str]:
    broken = w.root / 'broken.py'
    broken.write_text('import reframe\nraise ValueError("broken check file")\n')
    return out(w.reframe('--mode', 'nightly', '-r', checks=str(broken)))


LATE_VARIABLE = '''
import reframe as rfm
import reframe.utility.sanity as sn
from harnesslib.base import PerfSchema
from reframe.core.builtins import run_after, run_before, sanity_function


@rfm.simple_test
class LateVariable(rfm.RunOnlyRegressionTest, PerfSchema):
    valid_systems = ['local:shm']
    valid_prog_environs = ['*']
    executable = 'echo'

    @run_after('setup')
    def declared(self):
        self.perf_variables['early'] = sn.make_performance_function(lambda: 1.0, 'x')

    @sanity_function
    def ok(self):
        return True

    @run_before('performance')
    def late(self):
        self.perf_variables['late'] = sn.make_performance_function(lambda: 2.0, 'x')
'''


def late_variable(w: World) -> tuple[int, str]:
    """A check that adds a performance variable after sanity (a failed run of
    it would log fewer fields than a passed one) fails, naming it."""
    check = w.root / 'late_variable.py'
    check.write_text(LATE_VARIABLE)
    return out(w.reframe('-r', checks=str(check)))


def failed_first_record(w: World) -> tuple[int, str]:
    """Issue 14.1: an 'Open MPI' prefix whose mpicc is MPICH's (so its runs fail
    the stack check) and MPICH's own runs in one session, the failure first."""
    needs('openmpi', 'mpich')
    prefix = fake_prefix(w.root, 'ompi-with-mpich-cc', 'mpicc.mpich', 'mpirun.openmpi',
                         'mpirun')
    var = w.root / 'var2'
    proc = w.reframe('-n', 'StreamCheck', '-p', 'openmpi', '-p', 'mpich',
                     '--system', 'local:shm', '-r', HARNESS_VAR_DIR=str(var),
                     HARNESS_OPENMPI_PREFIX=str(prefix))
    text = (proc.stdout + proc.stderr)[-8000:]
    lines = (var / 'perflogs/local/shm/StreamCheck.log').read_text().splitlines()
    assert len(lines) == 5 and '|openmpi|' in lines[1] and '|fail|' in lines[1], (lines, text)
    assert [('|fail|' in ln) for ln in lines[1:]] == [
        '|openmpi|' in ln for ln in lines[1:]], (lines, text)
    assert len({len(ln.rstrip('|').split('|')) for ln in lines}) == 1, lines
    report = w.tool('hybridverdict', '--perflogs', str(var / 'perflogs'), '--no-write')
    assert 'skipped' not in report.stderr and '4 records' in report.stdout, report.stderr
    base = w.tool('hybridverdict-baseline', '--perflogs', str(var / 'perflogs'),
                  '--prefix', str(w.root / 'newrefs'), '--dry-run')
    assert base.returncode == 0, base.stdout + base.stderr
    assert re.search(r'local:shm\s+mpich\s+layout=mpi_2x1', base.stdout), base.stdout
    assert not re.search(r'local:shm\s+openmpi', base.stdout), base.stdout
    return out(proc)


def injection(w: World) -> tuple[int, str]:
    """A shell command and a space in every path a user sets (the var dir, a
    stack's prefix, the OSU prefix), then a real build and run (spmv and the
    STREAM run before it): nothing runs, the run passes."""
    needs('mpich')
    odd = w.root / 'odd $(touch${IFS}INJECTED) `touch INJECTED`'
    odd.mkdir()
    prefix = fake_prefix(odd, 'mpich $(touch${IFS}INJECTED)', 'mpicc.mpich',
                         'mpiexec.mpich', 'mpiexec')
    proc = w.reframe('-n', 'SpmvCheck%layout=mpi_2x1%problem=16', '-p', 'mpich',
                     '--system', 'local:shm', '-r', '-S', 'SpmvCheck.stream_elements=100000',
                     cwd=odd, HARNESS_VAR_DIR=str(odd / 'var $(touch${IFS}INJECTED)'),
                     HARNESS_MPICH_PREFIX=str(prefix),
                     HARNESS_OSU_PREFIX=str(odd / 'osu-{stack} `touch INJECTED`'))
    found = [p for p in (w.root, REPO, Path.cwd(), Path('/tmp'))
             if (p / 'INJECTED').exists()] + list(w.root.rglob('INJECTED')) + list(
                 (REPO / '.var-links').rglob('INJECTED'))
    assert not found, found
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    assert (odd / 'var $(touch${IFS}INJECTED)' / 'perflogs' / 'local' / 'shm' /
            'SpmvCheck.log').is_file()
    return out(proc)


def osu_injection(w: World) -> tuple[int, str]:
    """The OSU checks and RingOsuAccuracy (their ldd lines, the osu_mbw_mr and
    accuracy scripts) with stub benchmarks under a prefix holding a shell
    command: the scripts run, the command does not, each check fails naming
    why, and its failed record has the fields of a passed one."""
    needs('mpich')
    osu = w.root / 'osu $(touch${IFS}INJECTED)-mpich' / 'bin'
    osu.mkdir(parents=True)
    for name in ('osu_latency', 'osu_bw', 'osu_mbw_mr'):
        (osu / name).write_text('#!/bin/sh\necho "# stub, no table"\n')
        (osu / name).chmod(0o755)
    proc = w.reframe('-n', 'OsuLatencyCheck|OsuMbwMrCheck|RingOsuAccuracy', '-p', 'mpich',
                     '--system', 'local:shm', '-r', '-S', 'RingOsuAccuracy.rounds=1',
                     checks='checks', cwd=w.root,
                     HARNESS_OSU_PREFIX=str(w.root / 'osu $(touch${IFS}INJECTED)-{stack}'))
    assert not list(w.root.rglob('INJECTED')) and not (REPO / 'INJECTED').exists()
    for log in (w.var / 'perflogs' / 'local' / 'shm').glob('Osu*.log'):
        header, *rows = log.read_text().splitlines()
        assert rows and all(len(r.rstrip('|').split('|')) == len(header.split('|'))
                            for r in rows), log
    return out(proc)


def disk_full(w: World, call: str, when: str, main: str) -> tuple[int, str]:
    """hybridverdict's `main` where atomic's os.`call` fails on a full disk
    when `when` (over its src and dst) holds."""
    module = main.split('.')[0]
    code = ('import errno, os, sys\n'
            f'from hybridverdict import atomic, {module}\n'
            f'real = os.{call}\n'
            'def full(src, dst, *a, **k):\n'
            f'    if {when}:\n'
            '        raise OSError(errno.ENOSPC, "No space left on device")\n'
            '    return real(src, dst, *a, **k)\n'
            f'atomic.os.{call} = full\n'
            f'sys.exit({main})\n')
    return out(w.python(code))


def report_write_fails(w: World) -> tuple[int, str]:
    """The disk fills while the report is written: no file of it is left."""
    seen = disk_full(w, 'link', 'dst.endswith(".html")', 'cli.main([])')
    new = [p for p in (w.var / 'reports').iterdir() if p.name != 'verdict-20261122T100000Z.md']
    assert all(p.stat().st_size for p in new) and not any(p.suffix == '.html' for p in new)
    assert not [p for p in new if p.name.startswith('.')], new
    return seen


def baseline_write_fails(w: World) -> tuple[int, str]:
    """The disk fills while --force replaces the references: the old file stays."""
    return disk_full(w, 'replace', 'True',
                     f'baseline.main(["--prefix", {str(w.refs)!r}, "--force"])')


def append_records(w: World, *lines: str) -> None:
    """`lines` added to the StreamCheck perflog, whose new content must then stay."""
    with (w.var / 'perflogs' / 'local' / 'shm' / 'StreamCheck.log').open('a') as fh:
        fh.write(''.join(f'{line}\n' for line in lines))
    w.snapshot()


def baseline_pools_nothing(w: World) -> tuple[int, str]:
    """A Debug build, another MPI library and a failed run beside the Release
    runs: the reference is made from the Release runs alone."""
    append_records(w, run_line(t=9.0, build='cmake Debug mpich cc=/usr/bin/mpicc.mpich',
                               time='2026-11-21T10:00:00+0000'),
                   run_line(t=7.0, lib='MPICH Version: 3.4', time='2026-11-21T11:00:00+0000'),
                   run_line(t=5.0, result='fail', time='2026-11-22T11:00:00+0000'))
    proc = w.tool('hybridverdict-baseline', '--prefix', str(w.root / 'new'))
    written = (w.root / 'new' / 'local.yaml').read_text()
    assert 't_total: [1.0,' in written, written
    return out(proc)


def truncated_line(w: World) -> tuple[int, str]:
    append_records(w, run_line(time='2026-11-22T12:00:00+0000')[:150])
    proc = w.tool('hybridverdict', '--no-write')
    assert '2 records' in proc.stdout, proc.stdout
    return out(proc)


def escapes_in_perflog(w: World) -> tuple[int, str]:
    append_records(w, run_line(lib='MPICH \x1b]0;pwned\x07\x1b[2J',
                               time='2026-11-22T12:00:00+0000'))
    proc = w.tool('hybridverdict', '--no-write')
    assert '\x1b' not in proc.stdout + proc.stderr
    return out(proc)


def unreadable_record(w: World) -> tuple[int, str]:
    """A file whose header came from a failed run and has no other header of
    its check to name the variables of the lines after it."""
    log = w.var / 'perflogs' / 'local' / 'tcp' / 'StreamCheck.log'
    log.parent.mkdir()
    log.write_text('\n'.join([HEADER_RUN + '|', run_line(result='fail', values=False)
                              .replace('|shm|', '|tcp|'), run_line().replace('|shm|', '|tcp|')])
                   + '\n')
    # a header with two variables exists (local/shm), but not with one: cut t_total
    with log.open('a') as fh:
        fh.write(run_line().replace('|shm|', '|tcp|').rsplit('|', 6)[0] + '|\n')
    w.snapshot()
    return out(w.tool('hybridverdict', '--no-write'))


@dataclasses.dataclass(frozen=True)
class Case:
    fault: str
    sees: str
    status: str
    do: Callable[[World], tuple[int, str]]


CASES = [
    # -- a session that would run nothing: the plain reframe line fails in one line
    Case('HARNESS_REPEAT=abc', r'HARNESS_REPEAT must be an integer from 1 to 100, got .abc.',
         'fail', lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_REPEAT='abc'))),
    Case('HARNESS_REPEAT=0', r'HARNESS_REPEAT must be an integer from 1 to 100, got .0.',
         'fail', lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_REPEAT='0'))),
    Case('HARNESS_REPEAT=99999999 (used to hang --list)', r'from 1 to 100, got .99999999.',
         'fail', lambda w: out(w.reframe('--list', HARNESS_REPEAT='99999999'))),
    Case('HARNESS_BUDGET=abc (every kernel check failed at setup)',
         r'^harness config: error: HARNESS_BUDGET must be minutes or a duration', 'fail',
         lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_BUDGET='abc'))),
    Case('HARNESS_SNAPSHOT_S=abc (a traceback in every job, every run busy=unknown)',
         r"^harness config: error: HARNESS_SNAPSHOT_S must be seconds above 0 and at most 60, "
         r"got 'abc'", 'fail',
         lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_SNAPSHOTS='1',
                                 HARNESS_SNAPSHOT_S='abc'))),
    Case('HARNESS_SNAPSHOTS=yes (was taken as on)',
         r"^harness config: error: HARNESS_SNAPSHOTS must be 0 or 1, got 'yes'", 'fail',
         lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_SNAPSHOTS='yes'))),
    Case('HARNESS_QUIET=yes (was taken as off: the notes printed)',
         r"^harness config: error: HARNESS_QUIET must be 0 or 1, got 'yes'", 'fail',
         lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_QUIET='yes'))),
    Case('HARNESS_SPACK=true (was taken as off: CMake built the kernels)',
         r"^harness config: error: HARNESS_SPACK must be 0 or 1, got 'true'", 'fail',
         lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_SPACK='true'))),
    Case('HARNESS_NO_APT=true (was taken as off: apt-get ran as root)',
         r"^harness: error: HARNESS_NO_APT must be 0 or 1, got 'true'", 'fail',
         lambda w: out(w.harness('setup', HARNESS_NO_APT='true'))),
    Case('HARNESS_REPEAT=² (a digit to str.isdigit, was a traceback)',
         r"^harness config: error: HARNESS_REPEAT must be an integer from 1 to 100, got '²'",
         'fail', lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_REPEAT='²'))),
    Case('HARNESS_FIRST_ROUND=abc (the check file was skipped: 12 checks listed, exit 0)',
         r"^harness config: error: HARNESS_FIRST_ROUND must be an integer from 0 to 1000",
         'fail', lambda w: out(w.reframe('--list', HARNESS_FIRST_ROUND='abc'))),
    Case('HARNESS_SOFT_ZONE=2 (failed every run after it ran)',
         r"^harness config: error: HARNESS_SOFT_ZONE must be a number in \(0, 1\], got '2'",
         'fail', lambda w: out(w.reframe('-n', 'StreamCheck', '--list', HARNESS_SOFT_ZONE='2'))),
    Case('HARNESS_MAX_ROUNDS=abc (found only after the whole session)',
         r"^harness config: error: HARNESS_MAX_ROUNDS must be an integer from 1 to 100",
         'fail', lambda w: out(w.reframe('-n', 'StreamCheck', '--list',
                                         HARNESS_MAX_ROUNDS='abc'))),
    Case('HARNESS_STACKS=bogus (was a 30-line traceback)',
         r'^harness config: error: HARNESS_STACKS names unknown stack\(s\) bogus', 'fail',
         lambda w: out(w.reframe('--list', HARNESS_STACKS='bogus'))),
    Case('HARNESS_STACKS=mvapich2 without its prefix (was PASSED Ran 0/0)',
         r"none of these stacks is present \(mvapich2: set HARNESS_MVAPICH2_PREFIX", 'fail',
         lambda w: out(w.reframe('-r', '-n', 'StreamCheck', HARNESS_STACKS='mvapich2'))),
    Case('references file that is not YAML (was PASSED Ran 0/0)',
         r'references file: .*local\.yaml: not valid YAML', 'fail',
         bad_references('StreamCheck: [1, 2\n')),
    Case('references entry fom: ["fast", ...]',
         r'local\.yaml: StreamCheck\.local:shm\.mpich\.layout=mpi_2x1 problem=8\.fom: '
         r'the reference value must be a number', 'fail',
         bad_references(REFERENCES.replace('[2.5,', '["fast",'))),
    Case('references entry fom: 5', r'fom: expected \[reference, lower, upper, unit\], got 5',
         'fail', bad_references(REFERENCES.replace('[2.5, -0.5, null, GB/s]', '5'))),
    Case('references threshold of the wrong sign',
         r'the lower threshold is a fraction of the reference with sign -', 'fail',
         bad_references(REFERENCES.replace('-0.5', '0.5'))),
    Case('HARNESS_VAR_DIR that cannot be created', r"HARNESS_VAR_DIR: cannot create '/proc/",
         'fail', lambda w: out(w.reframe('--list', HARNESS_VAR_DIR='/proc/no/such'))),
    Case('HARNESS_OPENMPI_PREFIX holding MPICH (was raw hydra errors)',
         r"mpiexec is not Open MPI's launcher \(its --version says 'HYDRA", 'fail',
         lambda w: (needs('mpich'), out(w.reframe('--list', HARNESS_OPENMPI_PREFIX=str(
             fake_prefix(w.root, 'fake', 'mpicc.mpich', 'mpiexec.mpich', 'mpiexec')))))[1]),
    Case('relative HARNESS_VAR_DIR (went to config/relvar)', r'Found \d+ check', 'ok',
         relative_var_dir),
    # -- the harness script and the nightly
    Case('./harness run with HARNESS_REPEAT=abc',
         r'harness: error: HARNESS_REPEAT must be an integer from 1 to 100', 'fail',
         lambda w: out(w.harness('run', HARNESS_REPEAT='abc'))),
    Case('./harness nightly with HARNESS_REPEAT=0 (was not checked)',
         r'harness: error: HARNESS_REPEAT must be an integer from 1 to 100', 'fail',
         lambda w: out(w.harness('nightly', HARNESS_REPEAT='0'))),
    Case('a check file that does not load, in the nightly mode (was a warning)',
         r"skipping test file .*broken\.py.*broken check file", 'fail', broken_check_file),
    Case('./harness run selecting no check (was green)',
         r'ReFrame wrote no run report: the session ran nothing', 'fail',
         lambda w: out(w.harness('run', HARNESS_REFRAME_OPTS='-n NoSuchCheck'))),
    Case('./harness run with a report option hybridverdict refuses',
         r'hybridverdict: error: --noise-floor must be in \[0, 1\), got 2\.0', 'fail',
         lambda w: out(w.harness('run', HARNESS_REFRAME_OPTS='-n NoSuchCheck',
                                 HARNESS_REPORT_OPTS='--functional-verdicts --noise-floor 2'))),
    Case('./harness nightly selecting no check (was green)',
         r'ReFrame wrote no run report: the session ran nothing', 'fail',
         lambda w: out(w.harness('nightly', HARNESS_REFRAME_OPTS='-n NoSuchCheck'))),
    # -- records: none lost, none pooled, none echoed raw
    Case('a failed record first in a session (lost the passed ones after it)',
         r'Ran 6/6 test case\(s\) from \d+ check\(s\) \(2 failure', 'fail',
         failed_first_record),
    Case('a check declaring a performance variable after sanity (a developer error)',
         r'performance variable\(s\) late were declared after sanity', 'fail', late_variable),
    Case('a record whose variables cannot be named', r'StreamCheck\.log:4: a record with 1 '
         r'performance variable\(s\) under a header with 0', 'fail', unreadable_record),
    Case('a truncated perflog line (a crash while writing)',
         r'skipped 1 perflog line\(s\): 1 field count differs .* \(first at .*'
         r'StreamCheck\.log:4\)', 'ok', truncated_line),
    Case('terminal escapes in a perflog field', r'MPICH \\x1b\]0;pwned\\x07', 'ok',
         escapes_in_perflog),
    Case('Debug build, other MPI library and failed run beside Release runs',
         r'not pooled: StreamCheck local:shm mpich \[layout=mpi_2x1 problem=8\]: from the runs '
         r'of "cmake Release', 'ok', baseline_pools_nothing),
    Case('hybridverdict --since "" (was a traceback)', r"--since: not an ISO time: ''", 'fail',
         lambda w: out(w.tool('hybridverdict', '--since', '', '--no-write'))),
    Case('hybridverdict-baseline --since ""', r"--since: not an ISO time: ''", 'fail',
         lambda w: out(w.tool('hybridverdict-baseline', '--since', ''))),
    Case('baseline over a references entry of the wrong type (was a traceback)',
         r'cannot read references: .*the reference value must be a number', 'fail',
         lambda w: (bad_references(REFERENCES.replace('[2.5,', '["fast",'))(w),
                    out(w.tool('hybridverdict-baseline', '--prefix', str(w.refs),
                               '--force')))[1]),
    Case('disk full while the baseline replaces the references (left 0-byte files)',
         r'cannot write .*local\.yaml: No space left on device \(nothing was changed\)',
         'fail', baseline_write_fails),
    Case('disk full while the report is written (left a 0-byte report)',
         r'cannot write the report: .*No space left on device', 'fail', report_write_fails),
    # -- shell metacharacters in every path and knob a user sets
    Case('$(command) in HARNESS_OSU_PREFIX, OSU checks run with stub benchmarks',
         r'osu_latency: ldd shows no MPI library', 'fail', osu_injection),
    Case('$(command), backquotes and spaces in HARNESS_VAR_DIR and a stack prefix',
         r'PASSED.*Ran 2/2 test case', 'ok', injection),
]


@pytest.mark.parametrize('case', CASES, ids=[c.fault for c in CASES])
def test_fault(case: Case, world: World):
    rc, text = case.do(world)
    assert re.search(case.sees, text, re.MULTILINE), text[-6000:]
    assert (rc != 0) if case.status == 'fail' else (rc == 0), (rc, text[-6000:])
    assert 'Traceback (most recent call last)' not in text, text[-6000:]
    # nothing already written is lost or changed, nothing half-written is left
    for path, data in world.before.items():
        assert path.read_bytes() == data, f'{path} changed'
    # (the references folder's lock file stays, empty, as a lock file does)
    strays = [p for p in world.files() if p != world.refs / '.lock' and (
        p.name.startswith('.') or '.tmp' in p.name
        or (p.stat().st_size == 0 and p.parent.name != 'stage'))]
    assert not strays, strays


def test_the_table_is_counted_in_the_docs():
    text = (REPO / 'docs/pages/development.md').read_text()
    assert f'{len(CASES)} cases' in text.split('## Faults and bad input', 1)[1][:2000]


def test_no_unquoted_path_goes_into_a_job_script():
    """What the issue found by grep: paths put into job scripts unquoted."""
    bad = []
    for path in [*(REPO / 'checks').glob('*.py'), *(REPO / 'checks/harnesslib').glob('*.py')]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r'exec \d>>"|ldd \{(?!shlex)|\{self\.build\.executable_path\(|'
                         r'\{self\.osu_(lat|bw)\}|= self\.build\.executable_path\(', line):
                bad.append(f'{path.name}:{n}: {line.strip()}')
    assert not bad, bad


def test_atomic_write_leaves_the_old_file_on_error(tmp_path, monkeypatch):
    from hybridverdict import atomic
    path = tmp_path / 'f.yaml'
    path.write_text('old\n')

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(atomic.os, 'replace', full)
    with pytest.raises(OSError):
        atomic.write_replacing(str(path), 'new\n')
    assert path.read_text() == 'old\n' and os.listdir(tmp_path) == ['f.yaml']
    monkeypatch.undo()
    with pytest.raises(FileExistsError):
        atomic.write_new(str(path), 'new\n')
    assert os.listdir(tmp_path) == ['f.yaml']
    atomic.write_replacing(str(path), 'new\n')
    assert hashlib.sha1(path.read_bytes()).hexdigest() == hashlib.sha1(b'new\n').hexdigest()


# ---- ./harness sessions: records lost, signals, another reframe beside it ----------
# (not rows of CASES: each runs a whole ./harness session and looks at more than its
# output: the processes and the lock it leaves, the files it writes)

QUICK = '--nocolor --system local:shm -n StreamCheck%layout=mpi_2x1'
STREAM_VARIABLES = ('fom', 't_total', 't_comp', 't_comm')


def session_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """One Open MPI stack, a few StreamCheck runs: the quickest ./harness run."""
    needs('openmpi')
    return mpi_env(**{'HARNESS_VAR_DIR': str(tmp_path / 'var'), 'HARNESS_STACKS': 'openmpi',
                      'HARNESS_NO_APT': '1', 'HARNESS_REPEAT': '3', 'HARNESS_SNAPSHOTS': '0',
                      'HARNESS_MAX_ROUNDS': '3', 'HARNESS_REFRAME_OPTS': QUICK,
                      'RFM_REFERENCE_PREFIX': str(tmp_path / 'refs'), **extra})


def stream_header() -> str:
    """StreamCheck's perflog header, as ReFrame writes it."""
    from harnesscore.schema import PERFVAR_PARTS, RUN_FIELDS
    return '|'.join([*(f.name for f in RUN_FIELDS),
                     *(f'{v}_{p}' for v in STREAM_VARIABLES for p in PERFVAR_PARTS)])


@pytest.mark.integration
def test_records_reframe_could_not_write_fail_the_session(tmp_path):
    """A full disk lost the perflog records: ReFrame said '--- Logging error ---'
    and PASSED, and the session was green with a report of none of them.  Here
    the perflog is at the size limit (RLIMIT_FSIZE; ReFrame is told EFBIG, as
    ENOSPC on a full disk) with its own header, so nothing else changes."""
    env = session_env(tmp_path, HARNESS_REPEAT='1')
    log = tmp_path / 'var' / 'perflogs' / 'local' / 'shm' / 'StreamCheck.log'
    log.parent.mkdir(parents=True)
    # at the limit: its header, then lines of blanks (which every reader skips);
    # the limit is well above what the session's other files (the kernels'
    # shared-memory segments among them) need
    limit = 64 << 20
    header = stream_header() + '\n'
    chunk, rest = divmod(limit - len(header), 1 << 20)
    with log.open('w') as fh:
        fh.write(header)
        for size in [1 << 20] * chunk + ([rest] if rest else []):
            fh.write(' ' * (size - 1) + '\n')
    proc = subprocess.run(['bash', '-c', f'ulimit -f {limit // 1024}; exec "$0" run',
                           str(REPO / 'harness')], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert 'Logging error' in text, text[-6000:]      # the fault did happen
    assert re.search(r'^harness: error: only 0 of 1 performance records of this session '
                     r'reached the perflogs in .*/var/perflogs \(missing: StreamCheck '
                     r'%layout=mpi_2x1 %problem=\d+ %sample=0 @local:shm\+openmpi\)',
                     text, re.M), text[-6000:]
    assert proc.returncode != 0
    assert log.stat().st_size == limit


def _start(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    """./harness run in a session of its own (its own terminal, as it were), with
    the default signal dispositions a terminal gives it."""
    import signal
    out = tmp_path / 'out'

    def default_signals() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    with out.open('wb') as fh:
        proc = subprocess.Popen([str(REPO / 'harness'), 'run'], cwd=tmp_path, env=env,
                                stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=default_signals)
    return proc, out


def _when_running(proc: subprocess.Popen[bytes], out: Path) -> None:
    """Until ReFrame runs the first StreamCheck case."""
    import time
    for _ in range(1200):
        if b'[ RUN      ] StreamCheck' in out.read_bytes() or proc.poll() is not None:
            return
        time.sleep(0.1)


def _left(sid: int) -> list[str]:
    """The processes left running in the session `sid`, killed (a test must not
    leave them).  A zombie (``<defunct>``) has ended: its parent, or a
    container's first process that reaps none, has not collected it yet (a git
    of the build ended by the same signal, CI of 4a2698c)."""
    import time
    time.sleep(1)
    ps = [line for line in subprocess.run(['ps', '-o', 'pid=,args=', '-s', str(sid)],
                                          capture_output=True, text=True).stdout.splitlines()
          if '<defunct>' not in line]
    if ps:
        subprocess.run(['pkill', '-KILL', '-s', str(sid)], check=False)
    return ps


def _signalled(tmp_path, send) -> tuple[int, str, list[str]]:
    """A ./harness run given a signal by `send(pid)` once ReFrame runs: its exit
    status, its output and the processes it left (killed)."""
    proc, out = _start(tmp_path, session_env(tmp_path))
    try:
        _when_running(proc, out)
        assert proc.poll() is None, out.read_text(errors='replace')[-6000:]
        send(proc.pid)
        rc = proc.wait(timeout=120)
    finally:
        left = _left(proc.pid)
    return rc, out.read_text(errors='replace'), left


def _not_reframes(text: str) -> list[str]:
    """The outermost frames of the Python tracebacks in a run's output that are
    not ReFrame's own. A signal to the process group reaches ReFrame too, and
    ReFrame 4.10.4 under Python 3.11 may crash in its own report of the interrupt
    (`inspect.getinnerframes` meets a frame without a line number: a TypeError,
    ReFrame's traceback). A traceback's first frame names the program that caught
    it: ReFrame's (its `bin/reframe` or its package) is left out, any other (the
    harness's tools, a check's file) is kept."""
    first = re.compile(r'Traceback \(most recent call last\):\n\s*File "([^"]+)"')
    kept = []
    for at in (m.start() for m in re.finditer('Traceback', text)):
        frame = first.match(text, at)
        name = frame.group(1) if frame else text[at:at + 200]
        if not (name.endswith('/bin/reframe') or '/site-packages/reframe/' in name):
            kept.append(name)
    return kept


def test_only_reframes_own_tracebacks_are_left_out():
    """The filter above keeps what a harness tool prints and leaves out ReFrame's."""
    reframes = ('Traceback (most recent call last):\n  File "/v/lib/python3.11/site-packages/'
                'reframe/frontend/cli.py", line 1874, in main\nKeyboardInterrupt\n\n'
                'During handling of the above exception, another exception occurred:\n\n'
                'Traceback (most recent call last):\n  File "/v/bin/reframe", line 8, in '
                '<module>\nTypeError: unsupported operand\n')
    ours = ('Traceback (most recent call last):\n  File "/r/reports/hybridverdict/cli.py", '
            'line 3, in main\nKeyboardInterrupt\n')
    assert _not_reframes(reframes) == []
    assert _not_reframes(reframes + ours) == ['/r/reports/hybridverdict/cli.py']
    assert _not_reframes('Traceback: cut short') == ['Traceback: cut short']


def _lock_is_free(tmp_path) -> None:
    """The var dir's session lock can be taken (no process holds it)."""
    lock = tmp_path / 'var' / '.session.lock'
    free = subprocess.run(['flock', '-n', '-E', '99', str(lock), 'true'], check=False)
    assert free.returncode == 0, lock.read_text()


@pytest.mark.integration
def test_ctrl_c_stops_the_session_after_reframe(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) while ReFrame runs: ReFrame
    stops ('cancelled by user'), and the harness used to go on with more rounds
    (new ReFrame sessions), the plan's costs and a report, exit status 1."""
    import signal
    rc, text, left = _signalled(tmp_path, lambda pid: os.killpg(pid, signal.SIGINT))
    assert rc == 130, (rc, text[-6000:])
    assert 'harness: warning: the session was stopped by SIGINT: no more ReFrame sessions, ' \
           'no report' in text, text[-6000:]
    assert 'more rounds of the undecided pairs, within' not in text, text[-6000:]
    assert text.count('[ReFrame Setup]') == 1, text[-6000:]     # no other session
    assert '[4/4] verdict' not in text, text[-6000:]
    assert not _not_reframes(text), text[-6000:]
    assert not (tmp_path / 'var' / 'plan-costs.json').exists()
    assert not left, left


@pytest.mark.integration
def test_a_killed_harness_stops_reframe_and_frees_the_var_dir(tmp_path):
    """SIGTERM to the harness alone (kill, timeout, cron): it was killed at once,
    ReFrame went on running and held the session lock ('in use by another
    session' naming the dead harness)."""
    import signal
    rc, text, left = _signalled(tmp_path, lambda pid: os.kill(pid, signal.SIGTERM))
    assert rc == 128 + signal.SIGTERM, (rc, text[-6000:])
    assert 'stopped by SIGTERM' in text, text[-6000:]
    assert not _not_reframes(text), text[-6000:]
    assert not left, left
    _lock_is_free(tmp_path)


@pytest.mark.integration
def test_a_sigkill_to_the_harnesss_process_group_stops_reframe_too(tmp_path):
    """SIGKILL to the harness's process group (timeout -s KILL, timeout -k, a CI
    cancelling its job): ReFrame ran in a process group of its own, ran on and
    held the var dir's lock ('in use by another session' naming a dead pid)."""
    import signal
    rc, _text, left = _signalled(tmp_path, lambda pid: os.killpg(pid, signal.SIGKILL))
    assert rc == -signal.SIGKILL
    assert not left, left
    _lock_is_free(tmp_path)


@pytest.mark.integration
def test_a_session_that_ran_nothing_is_not_passed_by_another_reframes_report(tmp_path):
    """A reframe run by hand in the same var dir wrote its run report while the
    harness's session ran nothing: the harness took that report as its own."""
    import hashlib
    env = session_env(tmp_path, HARNESS_REFRAME_OPTS='--nocolor -n NoSuchCheck')
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    (venv / 'bin' / 'python').write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    # ReFrame, and beside it the other reframe's report of a session that ran
    other = ('{"session_info": {"num_cases": 1, "num_skipped": 0}, "runs": []}')
    (venv / 'bin' / 'reframe').write_text(
        '#!/bin/sh\n[ "$1" = --version ] || { mkdir -p "$HARNESS_VAR_DIR/reports"; '
        f"echo '{other}' > \"$HARNESS_VAR_DIR/reports/run-report-7.json\"; }}\n"
        f'exec {BIN / "reframe"} "$@"\n')
    for name in ('python', 'reframe'):
        (venv / 'bin' / name).chmod(0o755)
    for name in ('hybridverdict', 'hybridverdict-baseline'):
        (venv / 'bin' / name).symlink_to(BIN / name)
    (venv / '.harness-installed').write_text(
        hashlib.sha1((REPO / 'pyproject.toml').read_bytes()).hexdigest() + '\n')
    proc = subprocess.run([str(REPO / 'harness'), 'run'], cwd=tmp_path,
                          env={**env, 'HARNESS_VENV': str(venv)}, capture_output=True,
                          text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert (tmp_path / 'var' / 'reports' / 'run-report-7.json').exists()
    assert 'ReFrame wrote no run report: the session ran nothing' in text, text[-6000:]
    assert proc.returncode != 0
