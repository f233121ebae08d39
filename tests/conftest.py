"""Shared fixtures: the checkout, the MPI stacks present, and a ReFrame runner."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harnesscore.stacks import STACKS as REGISTRY

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / 'config' / 'settings.py'
BIN = Path(sys.executable).parent

# stack -> (compiler wrapper, launcher), as config/settings.py finds them
# without a prefix (harnesscore.stacks: Debian's suffixed tools)
STACKS = {s.name: s.suffixed_tools for s in REGISTRY if s.suffixed_tools is not None}


@contextlib.contextmanager
def ends_within(seconds: int, what: str) -> Iterator[None]:
    """A TimeoutError naming `what` where the block runs `seconds` or more: a
    guard against a hang (hours, or for ever), never a measure of speed."""
    def hung(*_args: object) -> None:
        raise TimeoutError(f'{what}: still running after {seconds} s')

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def present_stacks() -> list[str]:
    return [s for s, (cc, run) in STACKS.items() if shutil.which(cc) and shutil.which(run)]


@pytest.fixture(scope='session')
def stacks() -> list[str]:
    found = present_stacks()
    if not found:
        pytest.skip('no MPI stack installed (./harness setup installs Open MPI and MPICH)')
    return found


def skip_if(reason: str) -> None:
    """Skip the test where `reason` says why it cannot run here ('' where it can)."""
    if reason:
        pytest.skip(reason)


def needs(*names: str) -> None:
    """Skip the test unless every stack named is present."""
    missing = [s for s in names if s not in present_stacks()]
    if missing:
        pytest.skip(f'needs the stack(s) {", ".join(missing)}')


def fake_prefix(root: Path, name: str, cc: str, launcher: str, exe: str) -> Path:
    """A prefix whose bin/ holds the given wrapper and launcher."""
    prefix = root / name
    (prefix / 'bin').mkdir(parents=True)
    (prefix / 'bin' / 'mpicc').symlink_to(f'/usr/bin/{cc}')
    (prefix / 'bin' / exe).symlink_to(f'/usr/bin/{launcher}')
    if 'mpich' in launcher:
        (prefix / 'bin' / 'hydra_pmi_proxy').symlink_to('/usr/bin/hydra_pmi_proxy')
    return prefix


def osu_stacks(stacks: list[str]) -> list[str]:
    """The stacks with an OSU install under HARNESS_OSU_PREFIX ({stack} = the
    stack's name): OSU is in no registry these machines reach, and the harness
    never downloads it."""
    template = os.environ.get('HARNESS_OSU_PREFIX', '')
    return [s for s in stacks if template and os.path.isdir(
        os.path.join(template.replace('{stack}', s), 'libexec', 'osu-micro-benchmarks'))]


OSU_MISSING = ('OSU Micro-Benchmarks not provided: set HARNESS_OSU_PREFIX to an OSU install '
               'prefix per stack, e.g. /opt/osu/{stack} (the harness never downloads OSU)')


def mpi_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # Whatever a stack needs to run as root (the tests may run as root).
    env.update({k: v for s in REGISTRY for k, v in s.root_env.items()})
    env.update({'HARNESS_QUIET': '1'})
    env.update(extra)
    return env


def run_reframe(var_dir: Path, *args: str, env: dict[str, str] | None = None,
                timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """One real ReFrame session with the harness configuration, in `var_dir`."""
    # One sample per run unless a test asks for more: the sessions stay short.
    # The session's own var dir wins over one in `env` (./harness exports one).
    environ = mpi_env(**{'HARNESS_REPEAT': '1', **(env or {}), 'HARNESS_VAR_DIR': str(var_dir)})
    environ.pop('HARNESS_QUIET', None)
    cmd = [str(BIN / 'reframe'), '--nocolor', '-C', str(CONFIG), '-c', str(REPO / 'checks'),
           *args]
    return subprocess.run(cmd, cwd=REPO, env=environ, capture_output=True, text=True,
                          timeout=timeout)


def hung_rank_session(var_dir: Path, system: str, time_limit: str, stack: str,
                      env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """StreamCheck, whose rank 0 hangs (KERNEL_FAULT_HANG in the fault-injection
    build), with `time_limit`, and RingCheck after it: one session on `stack`."""
    return run_reframe(
        var_dir, '--system', system, '-r',
        '-n', 'StreamCheck%layout=mpi_2x1', '-n', 'RingCheck%layout=mpi_2x1',
        '-S', 'KernelBuild.fault_inject=1', '-S', f'StreamCheck.time_limit={time_limit}',
        env={**(env or {}), 'KERNEL_FAULT_HANG': 'stream', 'HARNESS_STACKS': stack},
        timeout=600)


def not_passed(stdout: str, system: str, checks: Iterable[str], stacks: Iterable[str],
               parts: Iterable[str], layouts: Iterable[str]) -> list[str]:
    """The cases '<check> %layout=<layout> @<system>:<part>+<stack>' that no OK
    line of a session's output names (empty: every one passed)."""
    return [f'{c} %layout={lay} @{system}:{p}+{s}'
            for c, s, p, lay in itertools.product(checks, stacks, parts, layouts)
            if not re.search(rf'OK \].* {c} %layout={lay} .*@{re.escape(system)}:{p}\+{s}\b',
                             stdout)]


def last_attempts(folder: Path, pattern: str = '*') -> list[Path]:
    """The output folders of the test cases in `folder` matching `pattern`, each
    its last attempt: with ``--max-retries`` ReFrame runs a retry in
    ``<case>_retry<N>`` and leaves the failed attempt's folder (made at setup,
    empty) beside it."""
    last: dict[str, tuple[int, Path]] = {}
    for path in folder.glob(pattern):
        found = re.fullmatch(r'(.*)_retry(\d+)', path.name)
        case, attempt = (found.group(1), int(found.group(2))) if found else (path.name, 0)
        if attempt >= last.get(case, (-1, path))[0]:
            last[case] = (attempt, path)
    return sorted(path for _, path in last.values())


def kernel_results(output: str) -> list[dict[str, Any]]:
    """The RESULT lines of a kernel's output, as JSON objects."""
    return [json.loads(ln[len('RESULT '):]) for ln in output.splitlines()
            if ln.startswith('RESULT ')]


def perflog(path: Path) -> list[dict[str, str]]:
    """The records of a perflog, by the names of its header line."""
    header, *rows = path.read_text().splitlines()
    return [dict(zip(header.split('|'), row.split('|'))) for row in rows]


def one_reference(refs: Path, check: str, stack: str, variant: str,
                  entry: dict[str, list[Any]]) -> Path:
    """A references file of the system local (under the prefix `refs`) with one
    entry: `check`'s `variant` on local:shm with `stack`, {variable: [ref, lower,
    upper, unit]}."""
    import yaml
    refs.mkdir(parents=True, exist_ok=True)
    path = refs / 'local.yaml'
    path.write_text(yaml.safe_dump({check: {
        '$index': ['$partition', '$environ', 'ref_variant'],
        'local:shm': {stack: {variant: entry}}}}))
    return path


def label_spy(monkeypatch: pytest.MonkeyPatch, method: str) -> list[str]:
    """The labels of every line that matplotlib's ``Axes.<method>`` (plot,
    errorbar) draws from now on; it still draws them."""
    import matplotlib.axes
    labels: list[str] = []
    draw = getattr(matplotlib.axes.Axes, method)

    def spy(self, *args, **kw):
        labels.append(kw.get('label', ''))
        return draw(self, *args, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, method, spy)
    return labels


def baseline(var: Path, refs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """hybridverdict-baseline over the perflogs of `var`, into the prefix `refs`."""
    return subprocess.run(
        [str(BIN / 'hybridverdict-baseline'), '--perflogs', str(var / 'perflogs'),
         '--prefix', str(refs), *args], capture_output=True, text=True)


# ---- the local Slurm test cluster (tests/slurm/testbed.sh) ----------------------

TESTBED = REPO / 'tests' / 'slurm' / 'testbed.sh'


def _free_port_pair() -> int:
    """A port P with P and P+1 free (slurmctld and slurmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        if port >= 65534:
            continue
        try:
            with socket.socket() as s2:
                s2.bind(('127.0.0.1', port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError('no two consecutive free ports found')


def slurm_missing() -> str:
    """Why the test cluster cannot run here ('' if it can)."""
    missing = [exe for exe in ('slurmctld', 'slurmd', 'sbatch', 'squeue', 'srun')
               if not shutil.which(exe)]
    if missing:
        return (f'Slurm not installed ({", ".join(missing)} missing): '
                f'./harness test installs slurm-wlm as root')
    if os.geteuid() != 0:
        return 'the local Slurm test cluster runs its daemons as root'
    return ''


@pytest.fixture(scope='session')
def slurm_cluster(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A one-node Slurm cluster for the session; always stopped at the end,
    whatever the tests did.  Yields the environment its clients need."""
    skip_if(slurm_missing())
    directory = tmp_path_factory.mktemp('slurm')
    port = str(_free_port_pair())
    env = dict(os.environ, SLURM_TESTBED_PORT=port)
    start = subprocess.run([str(TESTBED), 'start', str(directory)], env=env,
                           capture_output=True, text=True, timeout=120)
    try:
        assert start.returncode == 0, f'{start.stdout}\n{start.stderr}'
        yield {'SLURM_CONF': str(directory / 'slurm.conf'), 'dir': str(directory),
               'port': port}
    finally:
        stop = subprocess.run([str(TESTBED), 'stop', str(directory)],
                              capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, f'{stop.stdout}\n{stop.stderr}'
