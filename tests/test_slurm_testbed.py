"""The Slurm test beds refuse state folders that others could tamper with
(their daemons run as root and later kill the pids their files name)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

SCRIPTS = [REPO / 'tests' / 'slurm' / 'testbed.sh', REPO / 'tests' / 'slurm' / 'cluster.sh']


def refused(script: Path, folder: Path, action: str = 'start') -> str:
    """What `script action folder` said on stderr, having failed."""
    proc = subprocess.run([str(script), action, str(folder)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, SLURM_TESTBED_PORT='16817'))
    assert proc.returncode != 0
    return proc.stderr


@pytest.fixture(params=[s for s in SCRIPTS if s.exists()], ids=lambda s: s.name)
def script(request: pytest.FixtureRequest) -> Path:
    """Each test bed, one test each."""
    return request.param


def state_folder(tmp_path: Path, mode: int) -> Path:
    folder = tmp_path / 'state'
    folder.mkdir()
    folder.chmod(mode)
    return folder


def test_a_folder_writable_by_others_is_refused(script, tmp_path):
    folder = state_folder(tmp_path, 0o777)
    # A planted pid file must never be acted upon.
    (folder / 'slurmctld.pid').write_text(f'{os.getpid()}\n')
    for action in ('start', 'stop'):
        said = refused(script, folder, action)
        assert f'{folder}: the state folder is writable by others (mode 777)' in said
    assert not (folder / 'slurm.conf').exists()
    assert (folder / 'slurmctld.pid').exists()


def test_a_group_writable_folder_is_refused(script, tmp_path):
    folder = state_folder(tmp_path, 0o770)
    assert 'the state folder is writable by others (mode 770)' in refused(script, folder)


def test_a_symbolic_link_is_refused(script, tmp_path):
    real = tmp_path / 'real'
    real.mkdir(mode=0o700)
    link = tmp_path / 'link'
    link.symlink_to(real)
    assert f'{link}: the state folder is a symbolic link' in refused(script, link)
    assert list(real.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason='only root can give a folder to another user')
def test_a_folder_of_another_user_is_refused(script, tmp_path):
    folder = state_folder(tmp_path, 0o700)
    os.chown(folder, 65534, 65534)      # nobody
    assert f'{folder}: the state folder belongs to uid 65534, not to you' in refused(script, folder)
    assert not (folder / 'slurm.conf').exists()


def test_a_missing_folder_is_created_private(script, tmp_path):
    # The start goes on (and may fail later where Slurm or root is missing);
    # the folder it made is the user's alone.
    folder = tmp_path / 'new'
    assert 'no such state folder' in refused(script, folder, 'stop')
    assert not folder.exists()
    lib = REPO / 'tests' / 'slurm' / 'lib.sh'
    out = subprocess.run(['bash', '-c', '. "$1"; umask 000; state_dir "$2"', 'x', str(lib),
                          str(folder)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(folder.resolve())
    assert (folder.stat().st_mode & 0o777) == 0o700


def test_a_folder_whose_path_slurm_conf_cannot_hold_is_refused(script, tmp_path):
    folder = tmp_path / 'my state'
    assert "the state folder's path may hold only letters" in refused(script, folder)
    assert not (folder / 'slurm.conf').exists()
