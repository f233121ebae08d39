"""The history store: perflog records ingested once, incrementally, and read back lazily
into the same report as from the perflogs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hybridverdict import history, render, store
from hybridverdict.cli import main
from hybridverdict.perflog import ReadStats, read_perflogs
from hybridverdict.records import Record
from hybridverdict.report import build, recent_sessions
from perflog_writer import T0, header, line, write, write_runs
from test_perflog import HEADER as RUN_AND_PERF_HEADER
from test_perflog import RUN_HEADER, failed_line
from test_perflog import line as perflog_line
from test_perflog import write as write_lines
from test_report_outputs import dataset, read_dataset

FIXED = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def spmv_lines(n: int, start: int = 0) -> list[str]:
    return [line('spmv', {'t_total': (1.0 + i, 's'), 'fom': (2.0, 'GFLOP/s', 2.0, -0.1, None)},
                 mode='mpi' if i % 2 else 'masteronly', ranks=2 if i % 2 else 1,
                 threads=1 if i % 2 else 2, time=T0 + dt.timedelta(minutes=i))
            for i in range(start, start + n)]


def spmv_log(path: Path, n: int) -> Path:
    """A perflog at `path` of `n` spmv runs (spmv_lines) under their header."""
    return write(path, [header(['t_total', 'fom'])] + spmv_lines(n))


def ingested(tmp_path: Path, n: int) -> tuple[Path, store.Store]:
    """A perflog of `n` spmv runs (spmv_log at logs/SpmvCheck.log) and the store
    at history that has ingested it."""
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', n)
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(path)])
    return path, st


def same_records(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert dataclasses.asdict(x) == dataclasses.asdict(y)


def test_records_round_trip_through_the_store(tmp_path):
    logs = dataset(tmp_path)
    recs = read_perflogs([str(logs)])
    st = store.Store(str(tmp_path / 'history'))
    done = st.ingest([str(logs)])
    assert done.records == len(recs) and done.part.endswith('part-000001.json')
    same_records(st.records(), recs)
    since = T0 + dt.timedelta(days=2)
    same_records(st.records(since), [r for r in recs if r.time >= since])


def test_report_from_the_store_is_the_report_from_the_perflogs(tmp_path):
    logs, recs, stats = read_dataset(tmp_path)
    since = T0 + dt.timedelta(days=1)
    plain = build(recs, stats, ['x'], since=since)
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(logs)])
    stored = build(st.records(since), stats, ['x'], since=since, stored=st.scan(),
                   stored_records=len(recs))
    for rep in (plain, stored):
        rep.meta.generated = FIXED
    assert render.markdown(stored) == render.markdown(plain)
    assert render.verdict_json(stored) == render.verdict_json(plain)
    assert render.terminal(stored) == render.terminal(plain)
    assert [s.label for s in stored.history] == [s.label for s in plain.history]
    assert stored.history_total == plain.history_total > 0


def test_only_appended_lines_are_parsed(tmp_path):
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 4)
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(path.parent)]).records == 4
    # nothing new: nothing parsed, no new part
    stats = ReadStats()
    assert st.ingest([str(path.parent)], stats).part is None and stats.records == 0
    # two new lines and a third still being written (no newline yet)
    partial = spmv_lines(1, start=6)[0]
    with open(path, 'a') as fp:
        fp.write('\n'.join(spmv_lines(2, start=4)) + '\n' + partial[:20])
    stats = ReadStats()
    done = st.ingest([str(path.parent)], stats)
    assert (done.records, stats.records, stats.skipped) == (2, 2, 0)
    assert done.part.endswith('part-000002.json')
    new = st.records(T0 + dt.timedelta(minutes=4))
    assert [r.source for r in new] == [f'{path}:6', f'{path}:7']
    assert [r.values['t_total'] for r in new] == [5.0, 6.0]
    # while it is being written, nothing is new: no part (an empty one each time before)
    assert st.ingest([str(path.parent)]).part is None
    # the line completed: read from its start
    with open(path, 'a') as fp:
        fp.write(partial[20:] + '\n')
    assert st.ingest([str(path.parent)]).records == 1
    same_records(st.records(), read_perflogs([str(path)]))
    assert st.state()['total_records'] == 7


def test_a_renamed_or_rewritten_perflog_is_not_parsed_again_nor_adds_a_duplicate(tmp_path):
    logs = tmp_path / 'logs'
    path = spmv_log(logs / 'SpmvCheck.log', 3)
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(logs)])
    # ReFrame renames a perflog whose header changed and starts a new one: the
    # renamed file is known by its inode, not parsed again
    os.rename(path, logs / 'SpmvCheck.log.h0')
    stats = ReadStats()
    done = st.ingest([str(logs)], stats)
    assert (done.part, stats.records, done.reread) == (None, 0, [])
    write(logs / 'SpmvCheck.log', [header(['t_total'])] + [
        line('spmv', {'t_total': (9.0, 's')}, time=T0 + dt.timedelta(hours=1))])
    done = st.ingest([str(logs)])
    assert done.records == 1
    # a file rewritten with its old records and a new one: only the new one is added
    os.unlink(logs / 'SpmvCheck.log.h0')
    spmv_log(logs / 'Copy.log', 4)
    done = st.ingest([str(logs)])
    assert done.records == 1
    assert len(st.records()) == 5


def test_parts_are_never_overwritten_and_uncommitted_ones_are_ignored(tmp_path):
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 2)
    hist = tmp_path / 'history'
    hist.mkdir()
    orphan = hist / 'part-000001-records.parquet'        # a crash before its JSON
    orphan.write_bytes(b'not parquet')
    st = store.Store(str(hist))
    assert st.parts() == [] and st.records() == []
    done = st.ingest([str(path)])
    assert done.part.endswith('part-000002.json') and orphan.read_bytes() == b'not parquet'
    assert len(st.records()) == 2
    before = {p.name: p.read_bytes() for p in hist.iterdir()}
    with open(path, 'a') as fp:
        fp.write(spmv_lines(1, start=2)[0] + '\n')
    st.ingest([str(path)])
    assert all((hist / name).read_bytes() == data for name, data in before.items())
    # no temp files left (the ingests' lock stays)
    assert not [p for p in hist.iterdir() if p.name.startswith('.') and p.name != store.LOCK]


def test_cli_stores_once_and_reports_the_whole_history(tmp_path, capsys, monkeypatch):
    logs = dataset(tmp_path)
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path / 'var'))
    hist = str(tmp_path / 'var/history')
    out = tmp_path / 'out'
    args = ['--perflogs', str(logs), '--history-store', hist, '--out', str(out)]
    assert main(args) == 0
    first = capsys.readouterr()
    n = len(read_perflogs([str(logs)]))
    assert f'{n} new record(s) in part-000001.json, {n} in all' in first.err
    assert main(args + ['--since', (T0 + dt.timedelta(days=2)).isoformat()]) == 0
    second = capsys.readouterr()
    assert f'0 new record(s), {n} in all' in second.err
    assert f'({n} read for the history, 0 lines skipped)' in second.out
    assert len(store.Store(hist).parts()) == 1


@pytest.mark.parametrize('perflogs', [False, True])
def test_the_default_store_is_the_harness_var_dir(tmp_path, monkeypatch, perflogs):
    from hybridverdict.cli import parse_args, store_dir
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path))
    args = parse_args(['--perflogs', 'x'] if perflogs else [])
    assert store_dir(args) == (None if perflogs else str(tmp_path / 'history'))
    assert store_dir(parse_args(['--no-write'])) is None
    assert store_dir(parse_args(['--run-reports', 'r'])) is None
    monkeypatch.delenv('HARNESS_VAR_DIR')
    assert store_dir(parse_args([])) is None


@pytest.mark.parametrize('systems, first_kept', [(('local',) * 4, 4), (('a', 'b') * 3, 0)])
def test_the_store_gives_each_systems_last_sessions_as_the_perflogs_do(
        tmp_path, systems, first_kept):
    # named sessions 10 minutes apart (within an hour), on one system or two in turn:
    # the last three of each system, in the perflog's order, and the same confirmed
    # verdicts from the store as from the perflogs (two samples a side: one measures
    # no spread, and makes no call)
    lines = []
    for i, system in enumerate(systems):
        when = T0 + dt.timedelta(minutes=10 * i)
        for mode, t, ranks, threads in (('mpi', 1.0, 2, 1), ('masteronly', 0.5, 1, 2)):
            lines += [line('spmv', {'t_total': (t, 's')}, mode=mode, ranks=ranks,
                           threads=threads, time=when, system=system,
                           after_result={'session': f'n{i + 1}'})] * 2
    logs = write(tmp_path / 'logs/SpmvCheck.log', [header(['t_total'])] + lines)
    recs = read_perflogs([str(logs)])
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(logs)])
    recent = recent_sessions(*st.scan())
    assert ([(r.session, r.mode) for r in recent]
            == [(r.session, r.mode) for r in recs[first_kept:]])
    since = T0 + dt.timedelta(minutes=10 * (len(systems) - 2))
    plain = build(recs, ReadStats(), ['x'], since=since)
    stored = build(st.records(since), ReadStats(), ['x'], since=since, stored=st.scan(),
                   stored_records=len(recs))
    for rep in (plain, stored):
        assert [v.system for v in rep.verdicts] == sorted(set(systems))
        assert all(v.confirmed and v.sessions == 'WIN WIN WIN' for v in rep.verdicts)


def test_two_copies_of_a_perflog_in_one_ingest_store_its_records_once(tmp_path):
    logs = tmp_path / 'logs'
    spmv_log(logs / 'a.log', 3)
    spmv_log(logs / 'b.log', 3)
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(logs), str(logs / 'a.log')]).records == 3
    assert len(st.records()) == 3
    # one more line in the copy alone: only it is added
    with open(logs / 'b.log', 'a') as fp:
        fp.write(spmv_lines(1, start=3)[0] + '\n')
    assert st.ingest([str(logs)]).records == 1 and len(st.records()) == 4


def test_two_checks_of_one_second_are_two_records_in_every_ingest(tmp_path):
    # two checks that ran the same kernel and layout in the same second differ by
    # their name only: a file read after the other, from its start, lost its record
    logs = tmp_path / 'logs'
    values = {'t_total': (1.0, 's')}
    st = store.Store(str(tmp_path / 'history'))
    write(logs / 'QuietA.log', [header(['t_total']), line('spmv', values, name='QuietA')])
    assert st.ingest([str(logs)]).records == 1
    write(logs / 'QuietB.log', [header(['t_total']), line('spmv', values, name='QuietB')])
    assert st.ingest([str(logs)]).records == 1
    assert sorted(r.name for r in st.records()) == ['QuietA', 'QuietB']


def corrupt_store(tmp_path, what: str) -> str:
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 2)
    hist = tmp_path / 'history'
    store.Store(str(hist)).ingest([str(path)])
    bad = hist / ('part-000001-values.parquet' if what == 'parquet' else 'part-000001.json')
    bad.write_text('junk\n' if what == 'parquet' else what)
    return str(bad)


ENTRY = {'offset': 10, 'lines': 1, 'inode': 1, 'head': 'h'}


@pytest.mark.parametrize('what', [
    'parquet', '[]', '{"files": 5}', '{"next_rid": "x"}',
    # a file's entry (a TypeError, a KeyError or "[Errno 22] Invalid argument" before)
    *(json.dumps({'files': {'/v/SpmvCheck.log': {**ENTRY, **bad}}})
      for bad in ({'offset': '10'}, {'offset': -5}, {'inode': [1]}, {'head': None})),
    json.dumps({'files': {'/v/SpmvCheck.log': {k: v for k, v in ENTRY.items()
                                               if k != 'lines'}}})])
def test_a_corrupt_part_is_a_store_error_naming_the_file(tmp_path, capsys, what):
    bad = corrupt_store(tmp_path, what)
    st = store.Store(str(tmp_path / 'history'))
    with pytest.raises(store.StoreError, match=bad):
        st.records() if what == 'parquet' else st.state()
    hist = str(tmp_path / 'history')
    assert main(['--perflogs', str(tmp_path / 'logs'), '--history-store', hist,
                 '--out', str(tmp_path / 'out')]) == 2
    if what == 'parquet':
        assert main(['changes', '--store', hist]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == (2 if what == 'parquet' else 1) and all(bad in e for e in err)


def test_the_store_folder_is_made_only_when_there_is_something_to_store(tmp_path,
                                                                         monkeypatch):
    from hybridverdict.perflog import PerflogError
    hist = tmp_path / 'var/history'
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path / 'var'))
    assert main([]) == 2                            # no $HARNESS_VAR_DIR/perflogs
    assert not hist.exists()
    with pytest.raises(PerflogError, match='no such perflog'):
        store.Store(str(hist)).ingest([str(tmp_path / 'nope')])
    (tmp_path / 'empty').mkdir()
    assert store.Store(str(hist)).ingest([str(tmp_path / 'empty')]).part is None
    assert not hist.exists()
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 2)
    assert store.Store(str(hist)).ingest([str(path)]).records == 2 and hist.is_dir()


def test_appended_lines_are_named_in_warnings_by_their_perflog(tmp_path):
    path, st = ingested(tmp_path, 2)
    with open(path, 'a') as fp:
        fp.write(line('spmv', {'t_total': (1.0, 's'), 'fom': (2.0, 'GFLOP/s')},
                      time=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)) + '\n')
    stats = ReadStats()
    assert st.ingest([str(path)], stats).records == 1
    assert '1 record(s) dated more than 1 day after now' in stats.warnings()[0]
    assert f'first at {path}:4' in stats.warnings()[0]


# ---- ingests at once, files growing while read (the audit's store findings) ----------

#: An ingest in its own process (argv: store, perflogs, marker folder, role).  The
#: 'first' one, after reading the store's state, waits until the 'second' one has
#: finished (it ran while the first was between reading and committing) or, if it
#: waits on the lock, a few seconds.
INGEST = """
import os, sys, time
from hybridverdict import store
hist, logs, marks, role = sys.argv[1:5]
def mark(name):
    open(os.path.join(marks, name), 'w').close()
def marked(name):
    return os.path.exists(os.path.join(marks, name))
if role == 'first':
    state = store.Store.state
    def slow_state(self):
        out = state(self)
        mark('first-read')
        while not marked('second-started'):
            time.sleep(0.01)
        end = time.monotonic() + 4
        while not marked('second-done') and time.monotonic() < end:
            time.sleep(0.01)
        return out
    store.Store.state = slow_state
else:
    while not marked('first-read'):
        time.sleep(0.01)
    mark('second-started')
done = store.Store(hist).ingest([logs])
mark(role + '-done')
print(done.records)
"""


def test_two_ingests_at_once_store_each_record_once(tmp_path):
    logs = tmp_path / 'logs'
    spmv_log(logs / 'SpmvCheck.log', 50)
    hist, marks = tmp_path / 'history', tmp_path / 'marks'
    marks.mkdir()
    procs = [subprocess.Popen([sys.executable, '-c', INGEST, str(hist), str(logs),
                               str(marks), role], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for role in ('first', 'second')]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    # the second waited for the first, then found nothing new
    assert [int(out) for out, _ in outs] == [50, 0]
    recs = store.Store(str(hist)).records()
    assert len(recs) == len({store.identity(r) for r in recs}) == 50


def test_lines_appended_during_the_first_ingest_are_stored_once(tmp_path, monkeypatch):
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 3)
    read_file = store.read_file
    appended: list[str] = []

    def appending(*args, **kwargs):
        # a check logs two records between the store's measuring the file and reading it
        if not appended:
            appended[:] = spmv_lines(2, start=3)
            with open(path, 'a') as fp:
                fp.write('\n'.join(appended) + '\n')
        return read_file(*args, **kwargs)

    monkeypatch.setattr(store, 'read_file', appending)
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(path)]).records == 3
    monkeypatch.setattr(store, 'read_file', read_file)
    assert st.ingest([str(path)]).records == 2
    recs = st.records()
    assert [r.source for r in recs] == [f'{path}:{n}' for n in range(2, 7)]
    assert len({store.identity(r) for r in recs}) == 5


def test_a_failed_first_record_is_stored_as_the_perflogs_read_it(tmp_path):
    # the header of a failed first run has no variable: the later lines are read by
    # the other header of the check (test_perflog), in the store too
    logs = tmp_path / 'logs'
    shm = write_lines(logs / 'local/shm/SpmvCheck.log', RUN_HEADER, failed_line(),
                      perflog_line(t=1.0), failed_line(), perflog_line(t=2.0))
    write_lines(logs / 'local/tcp/SpmvCheck.log', RUN_AND_PERF_HEADER,
                perflog_line(part='tcp', t=3.0))
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(logs)]).records == 5
    # and the lines appended later, parsed apart under the file's header
    with open(shm, 'a') as fp:
        fp.write(perflog_line(t=4.0, time='2026-11-22T11:00:00+0000') + '\n')
    assert st.ingest([str(logs)]).records == 1
    same_records(sorted(st.records(), key=lambda r: r.source),
                 sorted(read_perflogs([str(logs)]), key=lambda r: r.source))


def test_a_lone_carriage_return_in_an_appended_line_does_not_split_it(tmp_path):
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 1)
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(path)]).records == 1
    odd, after = spmv_lines(2, start=1)
    with open(path, 'a') as fp:
        fp.write(odd.replace('spmv', 'sp\rmv', 1) + '\n' + after + '\n')
    stats = ReadStats()
    assert (st.ingest([str(path)], stats).records, stats.skipped) == (2, 0)
    assert [r.source for r in st.records()] == [f'{path}:{n}' for n in (2, 3, 4)]
    same_records(st.records(), read_perflogs([str(path)]))


@pytest.mark.parametrize('lock_file', ['read-only', 'absent'])
def test_a_store_that_cannot_be_written_still_reports_when_nothing_is_new(
        tmp_path, capsys, monkeypatch, lock_file):
    # a read-only store, or a shared one whose lock another user made 0644: the lock is
    # taken read-only, or (none there, none can be made) not at all; nothing new is
    # written, so the report goes on.  We run as root: the denial is os.open's.
    logs = dataset(tmp_path)
    hist = tmp_path / 'history'
    n = store.Store(str(hist)).ingest([str(logs)]).records
    lock = hist / store.LOCK
    if lock_file == 'absent':
        lock.unlink()
    real_open = os.open
    opened: list[int] = []

    def denied_open(path, flags, *args, **kwargs):
        if os.fspath(path) == str(lock):
            if flags & (os.O_CREAT | os.O_RDWR | os.O_WRONLY):
                raise PermissionError(13, 'Permission denied', str(path))
            fd = real_open(path, flags, *args, **kwargs)
            opened.append(flags)
            return fd
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, 'open', denied_open)
    done = store.Store(str(hist)).ingest([str(logs)])
    assert (done.part, done.records) == (None, 0)
    args = ['--perflogs', str(logs), '--history-store', str(hist), '--out',
            str(tmp_path / 'out')]
    assert main(args) == 0
    assert f'0 new record(s), {n} in all' in capsys.readouterr().err
    assert opened == ([os.O_RDONLY] * 2 if lock_file == 'read-only' else [])
    assert lock.exists() == (lock_file == 'read-only')


def test_a_read_only_lock_that_nfs_refuses_still_reports(tmp_path, monkeypatch):
    # NFS emulates flock with a byte-range lock, which refuses LOCK_EX on a
    # descriptor opened read-only (EBADF): such a store cannot be written either.
    logs = dataset(tmp_path)
    hist = tmp_path / 'history'
    store.Store(str(hist)).ingest([str(logs)])
    lock = str(hist / store.LOCK)
    real_open, real_flock = os.open, fcntl.flock

    def read_only_open(path, flags, *args, **kwargs):
        if os.fspath(path) == lock and flags & (os.O_CREAT | os.O_RDWR):
            raise PermissionError(13, 'Permission denied', lock)
        return real_open(path, flags, *args, **kwargs)

    def nfs_flock(fd, op):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(9, 'Bad file descriptor')
        return real_flock(fd, op)

    monkeypatch.setattr(os, 'open', read_only_open)
    monkeypatch.setattr(fcntl, 'flock', nfs_flock)
    done = store.Store(str(hist)).ingest([str(logs)])
    assert (done.part, done.records) == (None, 0)


@pytest.mark.parametrize('failing', ['values', 'json'])
def test_a_full_disk_during_ingest_is_one_line_and_leaves_the_store_as_it_was(
        tmp_path, capsys, monkeypatch, failing):
    # polars reports a full disk as a ComputeError, the JSON's write as an OSError:
    # either is one line and exit 2, and the part's files written so far are removed
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 2)
    hist = tmp_path / 'history'
    store.Store(str(hist)).ingest([str(path)])
    before = sorted(os.listdir(hist))
    write(path, [header(['t_total', 'fom'])] + spmv_lines(4))     # two new runs
    real_write_new = store.write_new

    def full_disk(target, data):
        if target.endswith(f'-{failing}.parquet'):
            raise store.pl.exceptions.ComputeError(
                'parquet: File out of specification: underlying IO error: No space left '
                'on device (os error 28)')
        if target.endswith('.json') and failing == 'json':
            raise OSError(28, 'No space left on device')
        return real_write_new(target, data)

    monkeypatch.setattr(store, 'write_new', full_disk)
    with pytest.raises(store.StoreError, match='cannot write part 2: .*No space left'):
        store.Store(str(hist)).ingest([str(path)])
    assert sorted(os.listdir(hist)) == before
    assert main(['--perflogs', str(path), '--history-store', str(hist),
                 '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and 'history store' in err[0] and 'No space left' in err[0]
    assert sorted(os.listdir(hist)) == before
    monkeypatch.setattr(store, 'write_new', real_write_new)
    assert store.Store(str(hist)).ingest([str(path)]).records == 2


# ---- the history drawn from the store's tables (hybridverdict.history) ---------------

def _stream(tmp_path: Path, runs: list[dict], **kw: str) -> list[Record]:
    """The records of a perflog of stream runs (``write_runs``), 10 s apart."""
    name = '-'.join(f'{k}{v}' for k, v in kw.items()) or 'stream'
    write_runs(tmp_path / f'{name}.log', 'stream', runs, **kw)
    return read_perflogs([str(tmp_path / f'{name}.log')])


def test_history_draws_only_verified_runs(tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (10.0, 'GB/s')}] * 3)
    recs[1] = dataclasses.replace(recs[1], verified=False, values={'fom': 99.0})
    (s,), _ = history.history(recs)
    assert (s.samples, s.values) == (2, [10.0, 10.0])


def test_history_offers_a_variable_first_logged_by_the_latest_run(tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (10.0, 'GB/s'), 'bw': (5.0, 'MB/s')}] * 2)
    recs[0] = dataclasses.replace(recs[0], values={'fom': 10.0}, units={'fom': 'GB/s'})
    series, total = history.history(recs)
    assert total == 2 and sorted(s.variable for s in series) == ['bw', 'fom']


def test_history_draws_the_series_of_most_runs_among_many(tmp_path: Path) -> None:
    recs = [r for size in range(4) for r in _stream(tmp_path, [{'fom': (1.0, 'GB/s')}],
                                                    size=str(size))]
    recs += _stream(tmp_path, [{'fom': (1.0, 'GB/s')}] * 3, size='9')
    (s,), total = history.history(recs, limit=1)
    assert (total, s.size, s.samples) == (5, '9', 3)


def test_history_draws_a_series_back_in_its_band_before_a_steadier_one(tmp_path: Path) -> None:
    band = (10.0, -0.1, 0.1)
    recs = _stream(tmp_path, [{'fom': (10.0, 'GB/s', *band)}] * 5, stack='openmpi')
    recs += _stream(tmp_path, [{'fom': (v, 'GB/s', *band)} for v in (10.0, 5.0, 10.0)])
    (s,), _ = history.history(recs, limit=1)
    assert (s.stack, s.out_of_band, s.values[-1]) == ('mpich', 1, 10.0)


def test_history_draws_a_long_series_as_medians_of_consecutive_runs(tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (v, 'GB/s')} for v in (1.0, 3.0, 5.0, 7.0, 9.0, 30.0)])
    (s,), _ = history.history(recs, max_points=4)
    assert (s.samples, s.values) == (6, [2.0, 6.0, 19.5])


def test_history_table_of_a_series_drawn_as_medians_names_its_first_and_last_run(
        tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (v, 'GB/s')} for v in (1.0, 3.0, 5.0, 7.0, 9.0, 30.0)])
    recs = [dataclasses.replace(r, time=T0 + dt.timedelta(hours=i)) for i, r in enumerate(recs)]
    (row,) = history.rows(history.history(recs, max_points=4)[0])
    assert [row[history.COLUMNS.index(c)] for c in ('samples', 'first', 'last', 'last value')
            ] == [6, f'{T0:%Y-%m-%d} 10:00', f'{T0:%Y-%m-%d} 15:00', '30']


def test_history_counts_a_run_of_any_result_but_pass_as_failed(tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (10.0, 'GB/s')}] * 3)
    recs[1] = dataclasses.replace(recs[1], result='abort')
    (s,), _ = history.history(recs)
    assert s.failed == 1


def test_history_table_shows_the_latest_band(tmp_path: Path) -> None:
    recs = _stream(tmp_path, [{'fom': (v, 'GB/s', v, -0.1, 0.1)} for v in (10.0, 20.0)])
    (row,) = history.rows(history.history(recs)[0])
    assert row[history.COLUMNS.index('band')] == '18 .. 22'


def test_a_perflog_left_out_of_an_ingest_is_still_read_from_where_it_stopped(tmp_path):
    logs = tmp_path / 'logs'
    one, two = spmv_log(logs / 'One.log', 3), spmv_log(logs / 'Two.log', 3)
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(logs)])
    with open(one, 'a') as fp:
        fp.write(spmv_lines(1, start=3)[0] + '\n')
    st.ingest([str(one)])                       # Two.log not given this time
    with open(two, 'a') as fp:
        fp.write(spmv_lines(1, start=3)[0] + '\n')
    stats = ReadStats()
    done = st.ingest([str(logs)], stats)
    assert (done.records, stats.records, done.reread) == (1, 1, [])


def test_a_perflog_rewritten_shorter_in_place_is_read_again(tmp_path):
    path, st = ingested(tmp_path, 4)
    inode = path.stat().st_ino
    # the same file (its inode, header and first record), cut, then one new record
    new = line('spmv', {'t_total': (9.0, 's'), 'fom': (2.0, 'GFLOP/s')},
               time=T0 + dt.timedelta(hours=1))
    with open(path, 'w') as fp:
        fp.write('\n'.join([header(['t_total', 'fom']), spmv_lines(1)[0], new]) + '\n')
    assert path.stat().st_ino == inode
    done = st.ingest([str(path)])
    assert done.records == 1 and done.reread == [str(path)]
    assert [r.values['t_total'] for r in st.records(T0 + dt.timedelta(hours=1))] == [9.0]


def test_a_perflog_mended_in_place_longer_is_read_again(tmp_path):
    """A cut line (a full disk) mended in the same file (its inode and first lines):
    read on from the old offset, within a line, the mended record was never stored
    and a line the file does not have was named as skipped."""
    path = tmp_path / 'logs/SpmvCheck.log'
    lines = [header(['t_total', 'fom'])] + spmv_lines(4)
    write(path, lines[:2] + [lines[2][:-20]] + lines[3:])
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(path)]).records == 3
    inode = path.stat().st_ino
    with open(path, 'w') as fp:
        fp.write('\n'.join(lines) + '\n')
    assert path.stat().st_ino == inode
    stats = ReadStats()
    done = st.ingest([str(path)], stats)
    assert done.records == 1 and done.reread == [str(path)] and not stats.skipped
    assert sorted(r.values['t_total'] for r in st.records()) == [1.0, 2.0, 3.0, 4.0]
    # lines appended afterwards are read on from where it stopped
    with open(path, 'a') as fp:
        fp.write(spmv_lines(1, start=4)[0] + '\n')
    done = st.ingest([str(path)])
    assert done.records == 1 and done.reread == []


@pytest.mark.parametrize('cut', [0, 30])
def test_the_last_line_of_a_renamed_perflog_is_read_though_it_has_no_line_end(tmp_path,
                                                                                cut):
    """ReFrame writes no more to a perflog it renamed (<name>.log.h<N>): its last line
    without a line end (a crash's) waited for one for ever, silently: a whole record
    never stored, a truncated one never counted, where the perflogs' reader reads it."""
    lines = [header(['t_total', 'fom'])] + spmv_lines(4)
    path = tmp_path / 'logs/SpmvCheck.log.h0'
    path.parent.mkdir()
    path.write_text('\n'.join(lines[:-1] + [lines[-1][:len(lines[-1]) - cut]]))
    st = store.Store(str(tmp_path / 'history'))
    stats, memory = ReadStats(), ReadStats()
    assert st.ingest([str(path)], stats).records == (3 if cut else 4)
    assert stats.skipped == (1 if cut else 0)
    assert len(st.records()) == len(read_perflogs([str(path)], stats=memory))
    assert stats.reasons == memory.reasons
    assert st.ingest([str(path)]).part is None      # read once


def test_a_perflog_folder_reached_through_a_link_is_stored_once(tmp_path):
    """A perflog folder read under its own name and through a link (a
    HARNESS_VAR_DIR of /home/... that is /gpfs/...): the lines read through one
    name were read again from where the other stopped, each stored twice."""
    real = spmv_log(tmp_path / 'real/SpmvCheck.log', 4)
    (tmp_path / 'alias').symlink_to(tmp_path / 'real')

    def same_but_names(a, b) -> None:  # each record once, named by the path it was read by
        same_records([dataclasses.replace(r, source=r.source.replace('/alias/', '/real/'))
                      for r in a], b)

    alias = tmp_path / 'alias/SpmvCheck.log'
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(real)]).records == 4
    with open(real, 'a') as fp:
        fp.write('\n'.join(spmv_lines(2, start=4)) + '\n')
    assert st.ingest([str(alias)]).records == 2
    assert st.ingest([str(real)]).part is None
    assert st.ingest([str(alias), str(real)]).part is None
    same_but_names(st.records(), read_perflogs([str(real)]))
    # a store of before, with the same file under two names: read on from the
    # further of the two, whichever name is given
    part = tmp_path / 'history/part-000002.json'
    state = json.loads(part.read_text())
    entry = state['files'].pop(str(real))
    state['files'][str(alias)] = entry
    state['files'][str(real)] = {**entry, 'offset': entry['offset'] // 2, 'lines': 3}
    part.write_text(json.dumps(state))
    with open(real, 'a') as fp:
        fp.write(spmv_lines(1, start=6)[0] + '\n')
    assert st.ingest([str(real)]).records == 1
    same_but_names(st.records(), read_perflogs([str(real)]))


def test_changes_of_a_folder_that_holds_no_history_fail(tmp_path, capsys):
    """``changes --fail-on-change`` on a folder with no part (the var folder given
    for its history folder) said "0 change point(s)" and passed the night."""
    (tmp_path / 'var/perflogs').mkdir(parents=True)
    for extra in ([], ['--last-night']):
        assert main(['changes', '--store', str(tmp_path / 'var'), '--fail-on-change',
                     *extra]) == 2
        err = capsys.readouterr().err
        assert f'the history store {tmp_path / "var"} holds no part' in err, err


def test_changes_of_a_part_damaged_past_its_schema_fail_naming_the_store(tmp_path, capsys):
    """A part whose column holds another type than its schema (the schema check
    reads only the names): a polars traceback, exit 1."""
    import polars as pl
    _, st = ingested(tmp_path, 4)
    path = tmp_path / 'history/part-000001-records.parquet'
    pl.read_parquet(path).with_columns(pl.col('ranks').cast(pl.String)).write_parquet(path)
    assert main(['changes', '--store', st.directory]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'hybridverdict changes: history store {st.directory}: cannot '
                          'read its parts: '), err
    assert len(err.splitlines()) == 1


def test_a_committed_part_that_lost_a_parquet_file_is_an_error_not_left_out(tmp_path, capsys):
    # part 2 of 3 committed (its JSON) without its values: its records were left out of
    # every report and change point, silently (the store said 4 records, read 3), and
    # the next ingest, reading on from part 3's offsets, never stored them again
    path = spmv_log(tmp_path / 'logs/SpmvCheck.log', 2)
    hist = tmp_path / 'history'
    st = store.Store(str(hist))
    st.ingest([str(path)])
    for i in range(2):
        with open(path, 'a') as fp:
            fp.write(spmv_lines(1, start=2 + i)[0] + '\n')
        st.ingest([str(path)])
    lost = hist / 'part-000002-values.parquet'
    lost.unlink()
    with pytest.raises(store.StoreError, match=f'{lost} is missing'):
        st.records()
    assert main(['changes', '--store', str(hist)]) == 2
    assert main(['--perflogs', str(tmp_path / 'logs'), '--history-store', str(hist),
                 '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(str(lost) in e for e in err), err
