"""The stability benchmark's comparison of two sessions (synthetic perflogs, no ReFrame)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pytest
from perflog_writer import T0, header, line, write
from report_tools import tool

stability = tool('stability')
CHANGED, NOT_CONFIRMED, SAME = stability.CHANGED, stability.NOT_CONFIRMED, stability.SAME
compare_calls, main = stability.compare_calls, stability.main

MPI = ('mpi', 2, 1)
MASTERONLY = ('masteronly', 1, 2)
FUNNELED = ('funneled', 1, 2)
ROUNDS = 9


def session(folder: Path, pairs: Sequence[tuple[tuple[str, int, int], float]],
            size: str = '64') -> str:
    """A session's perflog: ROUNDS interleaved rounds of the pure-MPI layout (1.0 s, +-1%)
    and each hybrid layout (1.0 s / speedup, +-1%)."""
    lines = [header(['t_total'])]
    t = T0
    for i in range(ROUNDS):
        wobble = 1.0 + 0.01 * ((i % 3) - 1)
        for (mode, ranks, threads), secs in [(MPI, wobble)] + [
                (layout, wobble / speedup) for layout, speedup in pairs]:
            t += dt.timedelta(seconds=5)
            lines.append(line('spmv', {'t_total': (secs, 's')}, mode=mode, ranks=ranks,
                              threads=threads, size=size, time=t))
    write(folder / 'local' / 'shm' / 'SpmvCheck.log', lines)
    return str(folder)


def run(capsys: pytest.CaptureFixture[str], a: str, b: str) -> tuple[int, str, str]:
    rc = main(['--perflogs', a, b])
    out = capsys.readouterr()
    return rc, out.out, out.err


def masteronly_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     speedups: tuple[float, float]) -> tuple[int, str]:
    """Two sessions whose masteronly 1x2 has these speedups (funneled ties in both):
    the comparison's exit status and output."""
    a, b = (session(tmp_path / name, [(MASTERONLY, s), (FUNNELED, 1.0)])
            for name, s in zip('ab', speedups))
    rc, out, _ = run(capsys, a, b)
    return rc, out


def test_calls_between_sessions():
    assert compare_calls('WIN', 'WIN') == SAME
    assert compare_calls('WIN', 'LOSS') == CHANGED
    assert compare_calls('LOSS', 'TIE') == CHANGED
    assert compare_calls('WIN', 'INCONCLUSIVE') == NOT_CONFIRMED
    assert compare_calls('INCONCLUSIVE', 'LOSS') == NOT_CONFIRMED


def test_agreement_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    rc, out = masteronly_twice(tmp_path, capsys, (1.5, 1.4))
    assert rc == 0
    assert 'spmv 64 shm/mpich masteronly 1x2 vs mpi 2x1' in out
    assert out.count(' WIN ') == 2 and out.count(' TIE ') == 2
    assert ('2 pairs in both sessions; 1 with |speedup - 1| > 10% in either session: '
            '0 changed their call') in out


def test_a_flip_is_reported_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    rc, out = masteronly_twice(tmp_path, capsys, (1.5, 0.6))
    assert rc == 1
    row = next(r for r in out.splitlines() if 'masteronly' in r)
    assert 'WIN' in row and 'LOSS' in row and row.rstrip().endswith(CHANGED)
    assert '1 with |speedup - 1| > 10% in either session: 1 changed their call' in out


def test_a_change_below_the_threshold_does_not_fail(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]):
    # TIE (1.0) then WIN (1.08, outside the 5% floor but within 10% of 1): reported, exit 0
    a = session(tmp_path / 'a', [(MASTERONLY, 1.0)])
    b = session(tmp_path / 'b', [(MASTERONLY, 1.08)])
    rc, out, _ = run(capsys, a, b)
    assert rc == 0
    assert '0 with |speedup - 1| > 10%' in out and '1 changed among all 1 pairs' in out


def test_a_missing_pair_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = session(tmp_path / 'a', [(MASTERONLY, 1.5)])
    b = session(tmp_path / 'b', [(MASTERONLY, 1.5), (FUNNELED, 1.3)])
    rc, out, _ = run(capsys, a, b)
    assert rc == 0
    assert ('1 in one session only: spmv 64 shm/mpich funneled 1x2 vs mpi 2x1 '
            '(only in session 2)') in out


def test_an_empty_session_exits_2_naming_it(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]):
    a = session(tmp_path / 'a', [(MASTERONLY, 1.5)])
    write(tmp_path / 'b' / 'local' / 'shm' / 'SpmvCheck.log', [header(['t_total'])])
    rc, out, err = run(capsys, a, str(tmp_path / 'b'))
    assert rc == 2 and out == ''
    assert f'error: session 2: no kernel records under {tmp_path / "b"}' in err
    rc, _, err = run(capsys, a, str(tmp_path / 'nowhere'))
    assert rc == 2 and 'is not a folder of perflogs' in err


def test_records_without_a_pair_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = session(tmp_path / 'a', [(MASTERONLY, 1.5)])
    write(tmp_path / 'b' / 'local' / 'shm' / 'SpmvCheck.log',
          [header(['t_total']), line('spmv', {'t_total': (1.0, 's')})])
    rc, _, err = run(capsys, a, str(tmp_path / 'b'))
    assert rc == 2 and 'session 2: 1 records' in err and 'no hybrid/pure-MPI pair' in err


def test_perflogs_take_no_selection(tmp_path: Path):
    with pytest.raises(SystemExit):
        main(['--perflogs', str(tmp_path), str(tmp_path), '--', '-n', 'X'])


def test_inconclusive_twice_is_the_same_but_counted_apart(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]):
    # back-to-back samples spread over 6x: INCONCLUSIVE in both sessions at speedup ~1.7
    folders = []
    for name in ('a', 'b'):
        t = T0
        lines = [header(['t_total'])]
        for (mode, ranks, threads), times in ((MPI, (1.0, 3.0, 0.5)),
                                              (MASTERONLY, (0.6, 1.8, 0.3))):
            for secs in times:
                t += dt.timedelta(seconds=5)
                lines.append(line('spmv', {'t_total': (secs, 's')}, mode=mode, ranks=ranks,
                                  threads=threads, time=t))
        write(tmp_path / name / 'local' / 'shm' / 'SpmvCheck.log', lines)
        folders.append(str(tmp_path / name))
    rc, out, _ = run(capsys, *folders)
    assert rc == 0
    assert ('1 with |speedup - 1| > 10% in either session: 0 changed their call, '
            '0 not confirmed (INCONCLUSIVE once), 1 the same (1 of them INCONCLUSIVE '
            'both times)') in out


ROOT = Path(__file__).resolve().parents[1]


def test_a_failed_session_exits_2_naming_it(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]):
    # a reframe that fails at once (the `false` command): no comparison, the cause named
    rc = main(['--out', str(tmp_path / 'out'), '--root', str(ROOT), '--reframe', 'false',
               '--', '-n', 'SpmvCheck'])
    err = capsys.readouterr().err
    assert rc == 2
    assert 'error: session 1: reframe exited with status 1' in err
    assert not (tmp_path / 'out' / 'session-2').exists()


def test_a_used_out_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    write(tmp_path / 'out' / 'session-1' / 'perflogs' / 'x.log', ['kept'])
    rc = main(['--out', str(tmp_path / 'out'), '--root', str(ROOT), '--reframe', 'false'])
    assert rc == 2 and 'is not empty' in capsys.readouterr().err
    assert (tmp_path / 'out' / 'session-1' / 'perflogs' / 'x.log').read_text() == 'kept\n'


@pytest.mark.parametrize('floor', ['-5', 'nan', '1'])
def test_a_floor_outside_0_1_is_an_argument_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  floor: str):
    a, b = (session(tmp_path / name, [(MASTERONLY, 1.5)]) for name in 'ab')
    with pytest.raises(SystemExit) as exit_:
        main(['--perflogs', a, b, '--floor', floor])
    assert exit_.value.code == 2
    assert f'error: --floor must be in [0, 1), got {float(floor)}' in capsys.readouterr().err


def test_pairs_of_two_systems_or_builds_are_labelled_apart():
    """Audit: the pair label named partition and stack only, so two systems' (or two
    builds') pairs of one stack looked the same; named only where they differ."""
    from hybridverdict.verdict import Verdict

    def pair(system: str, build: str) -> Verdict:
        return Verdict(system=system, partition='shm', stack='mpich', kernel='spmv',
                       size='64', cores=2, hybrid_mode='masteronly', hybrid_layout='1x2',
                       mpi_layout='2x1', t_mpi=1.0, t_hybrid=0.5, n_mpi=9, n_hybrid=9,
                       speedup=2.0, noise=0.01, verdict='WIN', mpi_library='L', build=build)

    def labels(found: list[Verdict]) -> list[str]:
        return [p.label for p in stability.pair_up(found, found)]

    tail = 'masteronly 1x2 vs mpi 2x1'
    assert labels([pair('alpha', 'b'), pair('beta', 'b')]) == [
        f'spmv 64 alpha:shm/mpich {tail}', f'spmv 64 beta:shm/mpich {tail}']
    assert labels([pair('alpha', 'Release'), pair('alpha', 'Debug')]) == [
        f'spmv 64 shm/mpich (Release) {tail}', f'spmv 64 shm/mpich (Debug) {tail}']
    assert labels([pair('alpha', 'b')]) == [f'spmv 64 shm/mpich {tail}']     # as before
