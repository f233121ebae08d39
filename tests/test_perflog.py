"""Reading perflogs: real header layout, corrupt lines, header changes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import perflog_writer
import pytest
from harnesscore.schema import empty_after_result
from hybridverdict.perflog import PerflogError, ReadStats, header_fields, read_perflogs
from hybridverdict.store import Store

PERF = ('fom_value|fom_unit|fom_ref|fom_lower_thres|fom_upper_thres|'
        't_total_value|t_total_unit|t_total_ref|t_total_lower_thres|t_total_upper_thres')
HEADER = '|'.join(header_fields()) + '|' + PERF


def line(kernel='spmv', mode='mpi', ranks=2, threads=1, size='16', t=1.0, env='mpich',
         part='shm', time='2026-11-22T10:00:00+0000', result='pass', verified='true',
         over='false', ref='0', lower='None', upper='None') -> str:
    return (f'{time}|local|{part}|{env}|SpmvCheck %layout={mode}|{kernel}|{mode}|{ranks}|'
            f'{threads}|{size}|2|1|MPICH Version: 4.0.2|{verified}|{over}|false|'
            f'cmake Release {env}|{result}|{empty_after_result()}'
            f'2.5|GFLOP/s|0|None|None|{t}|s|{ref}|{lower}|{upper}|')


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('\n'.join(lines) + '\n')
    return path


def test_reads_every_field(tmp_path):
    write(tmp_path / 'local/shm/SpmvCheck.log', HEADER, line(t=1.25))
    (rec,) = read_perflogs([str(tmp_path)])
    assert (rec.system, rec.partition, rec.stack, rec.kernel) == ('local', 'shm', 'mpich', 'spmv')
    assert (rec.mode, rec.ranks, rec.threads, rec.size) == ('mpi', 2, 1, '16')
    assert rec.values == {'fom': 2.5, 't_total': 1.25}
    assert rec.units['fom'] == 'GFLOP/s'
    assert rec.time == dt.datetime(2026, 11, 22, 10, tzinfo=dt.timezone.utc)
    assert rec.usable


def test_truncated_and_corrupt_lines_are_skipped_and_counted(tmp_path):
    good = line()
    write(tmp_path / 'a.log', HEADER, good, good[:40], 'garbage without pipes',
          line(ranks='two'), line(time='not a time'))
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path)], stats=stats)
    assert len(recs) == 1
    assert stats.skipped == 4
    assert stats.records == 1


def test_build_lines_are_not_kernel_runs(tmp_path):
    build = '2026-11-22T10:00:00+00:00|local|shm|mpich|KernelBuild|' + '|'.join(
        ['null'] * 11) + '|cmake Release mpich|pass|' + empty_after_result()
    write(tmp_path / 'KernelBuild.log', '|'.join(header_fields()) + '|', build)
    stats = ReadStats()
    assert read_perflogs([str(tmp_path)], stats=stats) == []
    assert stats.skipped == 0


def test_renamed_header_files_are_read(tmp_path):
    write(tmp_path / 'x.log.h0', HEADER, line(t=1.0))
    write(tmp_path / 'x.log', HEADER, line(t=2.0))
    assert sorted(r.values['t_total'] for r in read_perflogs([str(tmp_path)])) == [1.0, 2.0]


def test_extra_unknown_fields_are_fine(tmp_path):
    write(tmp_path / 'x.log', HEADER + '|extra_field', line()[:-1] + '|whatever|')
    stats = ReadStats()
    assert len(read_perflogs([str(tmp_path)], stats=stats)) == 1
    assert stats.unknown_fields == {'extra_field': 1}
    assert any('extra_field' in w for w in stats.warnings())


def test_an_unknown_field_counts_once_per_file_whatever_its_lines_shape(tmp_path):
    """A file whose first record failed (a header without variables) reads its later
    lines by another header's shape: its unknown field is still one file's."""
    n = len(header_fields())

    def passed(time: str) -> str:
        fields = line(time=time).split('|')
        return '|'.join(fields[:n] + ['x'] + fields[n:])

    write(tmp_path / 'a' / 'SpmvCheck.log', HEADER.replace('|' + PERF, '|site_extra|' + PERF),
          passed('2026-11-22T10:00:00+0000'))
    failed = '|'.join(line(result='fail').split('|')[:n] + ['x']) + '|'
    # another run than a's (a line alike in two files is a copy's, read once)
    write(tmp_path / 'b' / 'SpmvCheck.log', '|'.join(header_fields()) + '|site_extra|',
          failed, passed('2026-11-22T11:00:00+0000'))
    stats = ReadStats()
    assert len(read_perflogs([str(tmp_path)], stats=stats)) == 3
    assert stats.unknown_fields == {'site_extra': 2}
    assert 'ignored unknown perflog field(s): site_extra (2 file(s))' in stats.warnings()


def test_since_filters_older_runs(tmp_path):
    write(tmp_path / 'x.log', HEADER, line(time='2026-11-21T10:00:00+0000'), line())
    since = dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)
    assert len(read_perflogs([str(tmp_path)], since=since)) == 1


def test_failed_or_oversubscribed_runs_are_not_usable(tmp_path):
    write(tmp_path / 'x.log', HEADER, line(result='fail'), line(verified='false'),
          line(over='true'))
    assert [r.usable for r in read_perflogs([str(tmp_path)])] == [False, False, False]


def test_inputs_are_never_modified(tmp_path):
    path = write(tmp_path / 'x.log', HEADER, line(), 'truncated|line')
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    read_perflogs([str(tmp_path)])
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(PerflogError, match='no such perflog'):
        read_perflogs([str(tmp_path / 'nope')])


# ---- every record of a check has the same fields; the reader never loses one ----

RUN_HEADER = '|'.join(header_fields()) + '|'


def failed_line(**kw: str) -> str:
    """A run that failed sanity, as ReFrame logged it before the checks declared
    their variables up front: the run fields and no variable."""
    run = line(result='fail', verified='', **kw)
    return '|'.join(run.split('|')[:len(header_fields())]) + '|'


def placeholder_line(**kw: str) -> str:
    """A run that failed sanity, as logged now: every declared variable, no value."""
    run = line(result='fail', verified='', **kw).split('|')[:len(header_fields())]
    return '|'.join(run) + '|None||0|None|None|None|s|0|None|None|'


def test_failed_run_logs_the_same_fields_as_a_passed_one(tmp_path):
    write(tmp_path / 'local/shm/SpmvCheck.log', HEADER, placeholder_line(), line(t=1.5))
    stats = ReadStats()
    failed, passed = read_perflogs([str(tmp_path)], stats=stats)
    assert (failed.result, failed.values, passed.values['t_total']) == ('fail', {}, 1.5)
    assert stats.skipped == 0


def test_failed_first_record_keeps_every_later_record(tmp_path):
    """Issue 14.1 / 15.2: the header written from a failed first run has no
    variable; the passing lines after it are read by their own shape, the
    names taken from the check's other header (here the tcp partition's)."""
    write(tmp_path / 'local/shm/SpmvCheck.log', RUN_HEADER, failed_line(), line(t=1.0),
          failed_line(), line(t=2.0))
    write(tmp_path / 'local/tcp/SpmvCheck.log', HEADER, line(part='tcp', t=3.0))
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path)], stats=stats)
    assert sorted((r.partition, r.result, r.values.get('t_total')) for r in recs) == [
        ('shm', 'fail', None), ('shm', 'fail', None), ('shm', 'pass', 1.0),
        ('shm', 'pass', 2.0), ('tcp', 'pass', 3.0)]
    assert stats.skipped == 0 and stats.records == 5


def test_failed_line_under_a_header_with_variables_is_read(tmp_path):
    write(tmp_path / 'SpmvCheck.log', HEADER, line(t=1.0), failed_line())
    recs = read_perflogs([str(tmp_path)])
    assert [(r.result, r.values) for r in recs][1] == ('fail', {})


def test_unnamable_variables_fail_loudly_naming_file_and_line(tmp_path):
    path = write(tmp_path / 'local/shm/SpmvCheck.log', RUN_HEADER, failed_line(), line())
    with pytest.raises(PerflogError, match=rf'{path}:3: a record with 2 performance'):
        read_perflogs([str(tmp_path)])


def test_skipped_lines_are_named(tmp_path):
    path = write(tmp_path / 'a.log', HEADER, line(), line()[:40])
    stats = ReadStats()
    read_perflogs([str(tmp_path)], stats=stats)
    assert f'first at {path}:3' in stats.warnings()[0]


def three_pairs() -> list[str]:
    """The perflog lines of three spmv pairs (pure MPI 2x1 of 1 s, masteronly 1x2
    of 0.5 s), a run every 2 s from ``perflog_writer.T0``."""
    import perflog_writer as pw
    return [pw.line('spmv', {'t_total': (t, 's')}, mode=mode, ranks=ranks, threads=threads,
                    size='16', time=pw.T0 + dt.timedelta(seconds=2 * i))
            for i, (mode, ranks, threads, t) in enumerate(
                [('mpi', 2, 1, 1.0), ('masteronly', 1, 2, 0.5)] * 3)]


@pytest.mark.parametrize('bad', ['nan', 'inf', '-inf', '0', '-1.5'])
def test_an_unusable_time_is_skipped_with_its_place_and_the_rest_judged(tmp_path, bad):
    import perflog_writer as pw
    from hybridverdict.cli import main as cli_main
    from hybridverdict.perflog import ReadStats, read_perflogs
    runs = three_pairs()
    runs.insert(3, pw.line('spmv', {'t_total': (bad, 's')}, mode='masteronly', ranks=1,
                           threads=2, size='16', time=pw.T0 + dt.timedelta(seconds=5)))
    log = pw.write(tmp_path / 'logs' / 'SpmvCheck.log', [pw.header(['t_total'])] + runs)
    stats = ReadStats()
    recs = read_perflogs([str(log)], stats=stats)
    assert len(recs) == 6 and stats.skipped == 1
    (warning,) = stats.warnings()
    assert 'unusable record (t_total is not' in warning and f'{log}:5' in warning
    # the report is written for every other pair, not a traceback
    assert cli_main(['--perflogs', str(log), '--out', str(tmp_path / 'out')]) == 0


@pytest.mark.parametrize('bad', ['6.9e-310', '1e-200', '1e200'])
def test_a_time_of_no_measured_magnitude_is_skipped_not_a_traceback(tmp_path, capsys, bad):
    # an uninitialised timer's 6.9e-310 s made the speedup 1.5 / 6.9e-310 = inf:
    # 'StatsError: ratios must be finite, got inf', a traceback and exit 1
    import perflog_writer as pw
    from hybridverdict.cli import main as cli_main
    runs = []
    for i in range(3):
        for mode, ranks, threads, t in (('mpi', 2, 1, '1.5'),
                                        ('masteronly', 1, 2, bad if i == 0 else '1.0')):
            runs.append(pw.line('spmv', {'t_total': (t, 's')}, mode=mode, ranks=ranks,
                                threads=threads, size='16',
                                time=pw.T0 + dt.timedelta(seconds=2 * i)))
    log = pw.write(tmp_path / 'logs' / 'SpmvCheck.log', [pw.header(['t_total'])] + runs)
    stats = ReadStats()
    assert len(read_perflogs([str(log)], stats=stats)) == 5
    assert stats.reasons == {'unusable record (t_total is beyond 1e+/-150: no measurement)': 1}
    assert cli_main(['--perflogs', str(log), '--out', str(tmp_path / 'out'),
                     '--no-history-store']) == 0
    assert f'(first at {log}:3)' in capsys.readouterr().err


@pytest.mark.parametrize('when', ['0001-01-01T00:00:00+01:00', '9999-12-31T23:59:59-01:00'])
def test_a_time_that_is_no_time_in_utc_skips_its_line_not_the_report(tmp_path, capsys, when):
    # year 0 in UTC was polars' PanicException ('year 0 is out of range') where the
    # history read the frames back, a traceback and exit 1
    import perflog_writer as pw
    from hybridverdict.cli import main as cli_main
    runs = three_pairs()
    bad = runs[1]
    runs.insert(3, when + bad[bad.index('|'):])
    log = pw.write(tmp_path / 'logs' / 'SpmvCheck.log', [pw.header(['t_total'])] + runs)
    for store in (['--no-history-store'], ['--history-store', str(tmp_path / 'history')]):
        assert cli_main(['--perflogs', str(log), '--no-write', *store]) == 0
        assert (f'hybridverdict: warning: skipped 1 perflog line(s): 1 unparsable value '
                f'(first at {log}:5)') in capsys.readouterr().err.splitlines()
    with pytest.raises(SystemExit) as exit_:
        cli_main(['--perflogs', str(log), '--no-write', '--since', when])
    assert exit_.value.code == 2 and 'not an ISO time' in capsys.readouterr().err


@pytest.mark.parametrize('field, bad', [('ranks', 10**20), ('ranks', -10**20),
                                        ('threads', 2**63), ('cores', 10**20),
                                        ('nodes', 10**20)])
def test_a_count_beyond_a_64_bit_integer_skips_its_line_not_the_report(tmp_path, capsys,
                                                                       field, bad):
    # ranks=10**20 on one line was polars' 'unexpected value while building
    # Series of type Int64' where the frames were built, a traceback, exit 1
    import perflog_writer as pw
    from hybridverdict.cli import main as cli_main
    runs = three_pairs()
    counts: dict = {'ranks': 1, 'threads': 2, 'cores': 2, 'nodes': 1, field: bad}
    runs.insert(3, pw.line('spmv', {'t_total': (0.5, 's')}, mode='masteronly', size='16',
                           time=pw.T0 + dt.timedelta(seconds=5), **counts))
    log = pw.write(tmp_path / 'logs' / 'SpmvCheck.log', [pw.header(['t_total'])] + runs)
    # the report, without a history store and with one (each builds the frames)
    for store in (['--no-history-store'], ['--history-store', str(tmp_path / 'history')]):
        assert cli_main(['--perflogs', str(log), '--out', str(tmp_path / 'out'),
                         *store]) == 0
        err = capsys.readouterr().err
        assert (f'hybridverdict: warning: skipped 1 perflog line(s): 1 unparsable value '
                f'(first at {log}:5)') in err.splitlines()
    stats = ReadStats()
    assert len(read_perflogs([str(log)], stats=stats)) == 6
    assert stats.reasons == {'unparsable value': 1}


# ---- inputs read once, only regular files, every control character escaped ----

def test_a_file_given_twice_is_read_once(tmp_path):
    path = write(tmp_path / 'logs/SpmvCheck.log', HEADER, line(), line(mode='masteronly'))
    (tmp_path / 'link').symlink_to(tmp_path / 'logs')
    logs = str(tmp_path / 'logs')
    for paths in ([logs, logs], [logs, str(path)], [str(path), str(tmp_path / 'link')]):
        stats = ReadStats()
        assert len(read_perflogs(paths, stats=stats)) == 2, paths
        assert stats.files == 1


def test_a_perflog_hard_linked_under_the_folder_given_is_read_once(tmp_path):
    """A hard link (a backup by cp -al under the perflogs): its records were read
    under both names and counted twice (the verdicts' and the baseline's samples)."""
    import os
    path = write(tmp_path / 'logs/SpmvCheck.log', HEADER, line(), line(mode='masteronly'))
    (tmp_path / 'logs/backup').mkdir()
    os.link(path, tmp_path / 'logs/backup/SpmvCheck.log')
    stats = ReadStats()
    assert len(read_perflogs([str(tmp_path / 'logs')], stats=stats)) == 2
    assert stats.files == 1


def test_perflogs_in_a_folder_linked_under_the_folder_given_are_read_once(tmp_path):
    """perflogs/<system> a link to another file system: its perflogs were left
    out, silently (0 records, no warning); a link to a folder above is read once."""
    write(tmp_path / 'scratch/local/shm/SpmvCheck.log', HEADER, line(),
          line(mode='masteronly'))
    (tmp_path / 'perflogs').mkdir()
    (tmp_path / 'perflogs/local').symlink_to(tmp_path / 'scratch/local')
    (tmp_path / 'scratch/local/shm/up').symlink_to(tmp_path / 'perflogs')
    stats = ReadStats()
    assert len(read_perflogs([str(tmp_path / 'perflogs')], stats=stats)) == 2
    assert stats.files == 1 and not stats.warnings()


def test_a_record_appended_after_the_nuls_of_a_crash_is_read(tmp_path):
    """After a crash a perflog's last lines may read as NULs (its size kept, not
    their data); the next session appends its record after them, on their line:
    it was lost with them ('unparsable value')."""
    from hybridverdict import store
    path = tmp_path / 'logs/SpmvCheck.log'
    path.parent.mkdir()
    path.write_bytes(f'{HEADER}\n{line()}\n'.encode() + b'\0' * 300
                     + f'{line(mode="masteronly")}\n'.encode())

    def stored(stats: ReadStats) -> list:
        st = store.Store(str(tmp_path / 'history'))
        st.ingest([str(path)], stats)
        return st.records()

    for read in (lambda stats: read_perflogs([str(path)], stats=stats), stored):
        stats = ReadStats()
        assert [r.mode for r in read(stats)] == ['mpi', 'masteronly']
        assert stats.reasons == {'field count differs from header (truncated or corrupt)': 1}
        assert stats.first_at[next(iter(stats.reasons))] == f'{path}:3'


@pytest.mark.parametrize('char', ['\x0e', '\x00', '\x1b', '\x7f', '\x85',
                                  # text reordered or hidden: "Trojan source" names
                                  '\u202e', '\u2066', '\u200b', '\u2028', '\ufeff'])
def test_every_control_character_is_shown_escaped(tmp_path, char):
    write(tmp_path / 'x.log', HEADER, line(env=f'mp{char}ich'))
    (rec,) = read_perflogs([str(tmp_path)])
    shown = f'\\x{ord(char):02x}' if ord(char) < 0x100 else f'\\u{ord(char):04x}'
    assert rec.stack == f'mp{shown}ich'
    assert rec.build_spec == f'cmake Release mp{shown}ich'


def test_a_fifo_among_the_perflogs_is_skipped_with_a_warning(tmp_path):
    import os

    from conftest import ends_within

    write(tmp_path / 'logs/SpmvCheck.log', HEADER, line())
    fifo = tmp_path / 'logs/Pipe.log'
    os.mkfifo(fifo)
    with ends_within(10, 'reading the perflogs (a FIFO among them)'):
        stats = ReadStats()
        assert len(read_perflogs([str(tmp_path / 'logs')], stats=stats)) == 1
    assert stats.not_regular == [str(fifo)]
    assert any('not regular files' in w and str(fifo) in w for w in stats.warnings())
    with pytest.raises(PerflogError, match='not a regular perflog'):
        read_perflogs([str(fifo)])


def test_a_record_dated_in_the_future_is_kept_with_a_warning(tmp_path):
    path = write(tmp_path / 'x.log', HEADER, line(), line(time='2099-01-01T00:00:00+0000'),
                 line(time='2099-01-02T00:00:00+0000'))
    stats = ReadStats()
    assert len(read_perflogs([str(tmp_path)], stats=stats)) == 3
    (warning,) = stats.warnings()
    assert '2 record(s) dated more than 1 day after now' in warning
    assert f'first at {path}:3' in warning


def test_a_lone_carriage_return_in_a_field_does_not_split_the_record(tmp_path):
    # Linux allows '\r' in a process name, which went into busy_detail: the record
    # was split in two, both skipped as truncated
    write(tmp_path / 'x.log', HEADER, line(env='mp\rich'), line(t=2.0))
    stats = ReadStats()
    first, second = read_perflogs([str(tmp_path)], stats=stats)
    assert first.stack == 'mp\\x0dich' and second.source.endswith('x.log:3')
    assert stats.skipped == 0
    # a file written with '\r\n' line ends is read as before
    (tmp_path / 'x.log').write_bytes((HEADER + '\r\n' + line() + '\r\n').encode())
    (rec,) = read_perflogs([str(tmp_path)])
    assert rec.values == {'fom': 2.5, 't_total': 1.0}


# ---- mutation audit: truncated lines, unnamable blocks, --since's bound ----

def test_a_line_missing_its_last_variable_block_is_skipped_as_truncated(tmp_path):
    """A two-variable header and a line cut after its first block: one block
    of five is not the shape a failed first record leaves (that is under a
    header without variables), so the line is skipped, never named by a guess."""
    good = line()
    cut = '|'.join(good.split('|')[:-6]) + '|'
    path = write(tmp_path / 'SpmvCheck.log', HEADER, good, cut, line(t=2.0))
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path)], stats=stats)
    assert [r.values for r in recs] == [{'fom': 2.5, 't_total': 1.0},
                                        {'fom': 2.5, 't_total': 2.0}]
    assert stats.skipped == 1 and f'first at {path}:3' in stats.warnings()[0]


def test_a_line_of_part_of_a_block_under_a_header_without_variables_is_skipped(tmp_path):
    """Under a header from a failed first record, a line of 7 fields past the
    run fields (a passed run's line cut inside its second block) has no shape:
    skipped and counted, not read as one variable (no header has one)."""
    cut = '|'.join(line().split('|')[:len(header_fields()) + 7]) + '|'
    path = write(tmp_path / 'local/shm/SpmvCheck.log', RUN_HEADER, failed_line(), cut,
                 failed_line())
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path)], stats=stats)
    assert [r.result for r in recs] == ['fail', 'fail']
    assert stats.skipped == 1 and f'first at {path}:3' in stats.warnings()[0]


def test_blocks_that_two_headers_of_the_check_name_differently_fail_in_one_line(
        tmp_path, capsys):
    """A line with 2 blocks under a header without variables, and two headers
    of the same check with 2 variables of other names: which names its blocks
    have cannot be told; the report stops naming file and line (PerflogError,
    exit 2), never a traceback."""
    from hybridverdict.cli import main as cli_main
    path = write(tmp_path / 'logs/local/shm/SpmvCheck.log', RUN_HEADER, failed_line(), line())
    write(tmp_path / 'logs/local/tcp/SpmvCheck.log', HEADER, line(part='tcp'))
    write(tmp_path / 'logs/local/ib/SpmvCheck.log', HEADER.replace('fom_', 'gflops_'),
          line(part='ib'))
    with pytest.raises(PerflogError, match=rf'{path}:3: a record with 2 performance '
                                           r'variable\(s\) under a header with 0, and 2 '
                                           r'different headers of SpmvCheck with 2'):
        read_perflogs([str(tmp_path / 'logs')])
    assert cli_main(['--perflogs', str(tmp_path / 'logs'), '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'hybridverdict: {path}:3: a record with 2 performance')
    assert err.count('\n') == 1 and 'Traceback' not in err


def test_since_keeps_a_run_completed_exactly_at_it(tmp_path):
    # --since: 'only runs completed at or after this time'
    write(tmp_path / 'x.log', HEADER, line(time='2026-11-22T09:59:59+0000'),
          line(time='2026-11-22T10:00:00+0000'), line(time='2026-11-22T10:00:01+0000'))
    since = dt.datetime(2026, 11, 22, 10, tzinfo=dt.timezone.utc)
    assert [r.time.second for r in read_perflogs([str(tmp_path)], since=since)] == [0, 1]


def test_a_copy_of_a_perflog_under_the_folder_given_is_counted_once(tmp_path):
    """A copy (cp, not a link: another inode) of a perflog beside it: the
    in-memory reader (--no-history-store, --perflogs) gave every run twice
    (a verdict's n_mpi and n_hybrid doubled), where the history store's ingest
    stores it once, by the record's identity (``records.IDENTITY``).  Two
    records of one identity in one file (two runs in the same second) stay."""
    import shutil

    from hybridverdict import store
    path = write(tmp_path / 'logs/SpmvCheck.log', HEADER, line(), line(mode='masteronly'),
                 line(mode='masteronly'))
    (tmp_path / 'logs/copy').mkdir()
    shutil.copy(path, tmp_path / 'logs/copy/SpmvCheck.log')
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path / 'logs')], stats=stats)
    assert stats.files == 2
    assert [r.mode for r in recs] == ['mpi', 'masteronly', 'masteronly']
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(tmp_path / 'logs')]).records == 3
    assert sorted(map(store.identity, st.records())) == sorted(map(store.identity, recs))


# ---- a test case ReFrame retried (--max-retries) counts by its last try ----

def tries(*runs: tuple[str, str, int]) -> list[str]:
    """Perflog lines of one case's runs, 10 s apart, each (result, session, nodes);
    run i logs t_total i + 1 (a failed run's value too: one judged out of its band)."""
    return [perflog_writer.line('spmv', {'t_total': (i + 1.0, 's')}, result=result,
                                nodes=nodes, time=perflog_writer.T0 + dt.timedelta(seconds=10 * i),
                                after_result={'session': session})
            for i, (result, session, nodes) in enumerate(runs)]


def read_through_store(path: Path) -> list:
    """The records of the perflog `path` as the report reads them by default:
    ingested into a history store, read back from it."""
    history = Store(str(path.parent / 'history'))
    history.ingest([str(path)])
    return sorted(history.records(), key=lambda r: r.time)


@pytest.mark.parametrize('runs, kept', [
    # retried once, passed: the failed try was replaced
    ([('fail', 's1', 1), ('pass', 's1', 1)], [('pass', 2.0)]),
    # retried twice
    ([('fail', 's1', 1), ('fail', 's1', 1), ('pass', 's1', 1)], [('pass', 3.0)]),
    # every try failed: the last counts, once
    ([('fail', 's1', 1), ('fail', 's1', 1)], [('fail', 2.0)]),
    # the same case in another session is another run
    ([('fail', 's1', 1), ('pass', 's2', 1)], [('fail', 1.0), ('pass', 2.0)]),
    # without a session (older perflogs) a retry is not told from a later night's run
    ([('fail', '', 1), ('pass', '', 1)], [('fail', 1.0), ('pass', 2.0)]),
    # another node count (-P nodes=1,2: the same display name) is another case
    ([('fail', 's1', 2), ('pass', 's1', 1)], [('fail', 1.0), ('pass', 2.0)]),
    # a pass is never retried; a failure after it was not replaced
    ([('pass', 's1', 1), ('fail', 's1', 1)], [('pass', 1.0), ('fail', 2.0)]),
])
@pytest.mark.parametrize('read', [lambda path: read_perflogs([str(path)]), read_through_store],
                         ids=['perflogs', 'store'])
def test_a_failed_try_that_a_retry_replaced_is_left_out(tmp_path, runs, kept, read):
    path = write(tmp_path / 'logs/SpmvCheck.log', perflog_writer.header(['t_total']),
                 *tries(*runs))
    assert [(r.result, r.values['t_total']) for r in read(path)] == kept
