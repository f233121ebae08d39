"""The baseline command's writes (``hybridverdict.baseline``): two at once lose no
reference, and a symlinked references file stays a link."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml
from hybridverdict import baseline
from test_references import stream_perflogs

#: baseline B, which says when it waits for the prefix's lock (never, before the lock)
WAITING_B = '''
import fcntl, sys
from hybridverdict import baseline
real = fcntl.flock
def flock(fd, op):
    print('waiting', flush=True)
    return real(fd, op)
fcntl.flock = flock
sys.exit(baseline.main(sys.argv[1:]))
'''


def perflogs(tmp_path: Path, cls: str) -> str:
    """A perflog folder with one passing run of the test class `cls` of system local."""
    logs = Path(stream_perflogs(tmp_path))
    log = logs / 'StreamCheck.log'
    log.write_text(log.read_text().replace('StreamCheck %', f'{cls} %'))
    return str(logs)


def classes(path: Path) -> list[str]:
    return sorted(yaml.safe_load(path.read_text()))


def test_two_baselines_at_once_keep_each_others_references(tmp_path, monkeypatch):
    # A reads the references, then B runs whole (another var dir, the same
    # checkout), then A writes: B's references were lost.  Now B waits for A's lock.
    refs = tmp_path / 'refs'
    logs_a, logs_b = perflogs(tmp_path / 'a', 'StreamCheck'), perflogs(tmp_path / 'b', 'RingCheck')
    real_write = baseline.write_references
    runs: list[subprocess.Popen] = []

    def write_references(path, entries, force, now):
        b = subprocess.Popen([sys.executable, '-c', WAITING_B, '--perflogs', logs_b,
                              '--prefix', str(refs), '--force'],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        runs.append(b)
        # B waits for the lock, or (without one) runs to its end
        deadline = time.monotonic() + 120
        while b.poll() is None and time.monotonic() < deadline:
            if b.stdout.readline().startswith('waiting'):
                break
        return real_write(path, entries, force, now)

    monkeypatch.setattr(baseline, 'write_references', write_references)
    assert baseline.main(['--perflogs', logs_a, '--prefix', str(refs), '--force']) == 0
    (b,) = runs
    b.communicate(timeout=120)
    assert b.returncode == 0
    assert classes(refs / 'local.yaml') == ['RingCheck', 'StreamCheck']


def test_a_symlinked_references_file_is_replaced_through_its_link(tmp_path):
    shared = tmp_path / 'shared' / 'local.yaml'
    shared.parent.mkdir()
    shared.write_text('')
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'local.yaml').symlink_to(shared)
    logs = perflogs(tmp_path, 'StreamCheck')
    assert baseline.main(['--perflogs', logs, '--prefix', str(refs), '--force']) == 0
    assert (refs / 'local.yaml').is_symlink()
    assert classes(shared) == ['StreamCheck']
    assert [p.name for p in (refs / 'previous').iterdir()][0].startswith('local-')
    assert baseline.main(['--perflogs', perflogs(tmp_path / 'b', 'RingCheck'),
                          '--prefix', str(refs), '--force']) == 0
    assert (refs / 'local.yaml').is_symlink()
    assert classes(shared) == ['RingCheck', 'StreamCheck']
