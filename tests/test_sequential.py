"""The sequential rounds' driver: which pairs get more rounds, of which runs,
with which ReFrame options (hybridverdict.sequential)."""

from __future__ import annotations

import datetime as dt
import re
import subprocess

import perflog_writer as pw
import pytest
from harnesscore import stats
from hybridverdict import sequential
from hybridverdict.perflog import read_perflogs


def _session(tmp_path, hybrid_times, rounds=None, first=0):
    """spmv 2x1 against masteronly 1x2, side by side, order alternating."""
    mpi_times = [1.0] * len(hybrid_times)
    lines, t = [], pw.T0
    for i, (tm, th) in enumerate(zip(mpi_times, hybrid_times)):
        r = first + i
        runs = [('mpi', 2, 1, tm), ('masteronly', 1, 2, th)]
        for mode, ranks, threads, value in (runs if r % 2 == 0 else runs[::-1]):
            t += dt.timedelta(seconds=2)
            name = f'SpmvCheck %layout={mode}_{ranks}x{threads} %problem=16 %sample={r}'
            lines.append(pw.line('spmv', {'t_total': (value, 's')}, mode=mode, ranks=ranks,
                                 threads=threads, size='16', time=t, name=name))
    pw.write(tmp_path / 'SpmvCheck.log', [pw.header(['t_total'])] + lines)
    return read_perflogs([str(tmp_path)])


def test_an_undecided_pair_gets_a_batch_of_its_two_runs(tmp_path):
    recs = _session(tmp_path, [1.0, 0.7, 1.3])          # 3 rounds, wide: INCONCLUSIVE
    open_, batches = sequential.undecided(recs, cap=15)
    assert [v.verdict for v in open_] == [stats.INCONCLUSIVE]
    assert open_[0].basis == stats.PAIRED and open_[0].stopped == stats.BUDGET
    (b,) = batches
    assert (b.partition, b.stack, b.pairs, b.rounds) == ('shm', 'mpich', 1, 3)
    assert b.names == {'SpmvCheck %layout=mpi_2x1 %problem=16',
                       'SpmvCheck %layout=masteronly_1x2 %problem=16'}
    pattern = re.compile(b.selection())
    # ReFrame matches -n against the display name without spaces
    assert pattern.search('SpmvCheck%layout=mpi_2x1%problem=16%sample=7')
    assert not pattern.search('SpmvCheck%layout=mpi_2x1%problem=160%sample=7')
    assert not pattern.search('SpmvCheck%layout=funneled_1x2%problem=16%sample=7')


def test_decided_and_capped_pairs_get_no_more_rounds(tmp_path):
    win = _session(tmp_path, [0.50, 0.51, 0.49])        # hybrid twice as fast: WIN
    open_, batches = sequential.undecided(win, cap=15)
    assert open_ == [] and batches == []
    capped = _session(tmp_path, [1.0, 0.7, 1.3, 0.8])
    open_, batches = sequential.undecided(capped, cap=4)
    assert [v.stopped for v in open_] == [stats.CAP] and batches == []


def test_rounds_are_paired_by_number_when_one_side_has_more(tmp_path):
    recs = _session(tmp_path, [0.5, 0.5, 0.5, 0.5])
    # the pure-MPI layout ran two more rounds for another hybrid layout
    extra = [r for r in recs if r.mode == 'mpi'][:2]
    import dataclasses
    more = [dataclasses.replace(r, name=r.name.replace('%sample=0', '%sample=9').replace(
        '%sample=1', '%sample=8'), time=r.time + dt.timedelta(minutes=5)) for r in extra]
    from hybridverdict.verdict import verdicts
    (v,) = verdicts(recs + more)
    assert (v.n_mpi, v.n_hybrid, v.rounds) == (6, 4, 4)
    assert v.basis == stats.PAIRED and v.verdict == stats.WIN


#: A ReFrame option a user passes on to every batch (the checks refuse -S nodes=N).
SET = ['-S', 'HybridVerdict.noise_floor=0.1']


def test_the_users_selection_is_not_passed_to_the_batches():
    opts = ['-C', 'config/settings.py', '-n', 'SpmvCheck', '--system=local:shm', '-p',
            'mpich', *SET, '--failed', '--mode', 'nightly', '-v']
    assert sequential.passed_on(opts) == ['-C', 'config/settings.py', *SET, '-v']


def test_the_users_report_files_are_not_passed_to_the_batches():
    # HARNESS_REFRAME_OPTS='--report-junit=ci.xml': every batch wrote its JUnit
    # over the session's, which the nightly then named; the CI read the last
    # batch's few verdict checks, the session's failures gone.
    argv = ['--since', '2026-11-25T00:00:00', '--deadline', '0', '--', 'reframe', '-C',
            'config/settings.py', '--report-junit=ci.xml', '--report-file', 'run.json',
            '--report-junit', 'b.xml', '--report-file=r.json', '-v']
    assert sequential.parse_args(argv).reframe == ['reframe', '-C', 'config/settings.py', '-v']


@pytest.mark.parametrize('restore', [['--restore-session'], ['--restore-session', 'old.json'],
                                     ['--restore-session=old.json']])
def test_a_restored_session_is_not_passed_to_the_batches(restore: list[str]) -> None:
    # its value is optional: an option after it is not its value, and is passed on
    assert sequential.passed_on([*restore, '-v']) == ['-v']


@pytest.mark.parametrize('spelling', [['-popenmpi'], ['-p=openmpi'], ['-p', 'openmpi'],
                                      ['--prgenv', 'openmpi'], ['--prgenv=openmpi']])
def test_a_batch_gets_only_its_own_selection_in_every_spelling(monkeypatch, spelling):
    # HARNESS_REFRAME_OPTS='-popenmpi' (glued, which ./harness's plan read) was
    # passed on to a batch beside its own -p ^stack$; so were -nX, -E and the
    # long forms of -E and -P.
    argv = ['--since', '2026-11-25T00:00:00', '--deadline', '0', '--', 'reframe', '-C',
            'config/settings.py', *spelling, '-nSpmv', '--system=local:shm', *SET,
            '-Ex', '--filter-expr', 'y', '--parameterize=a:1', '-v']
    args = sequential.parse_args(argv)
    assert args.reframe == ['reframe', '-C', 'config/settings.py', *SET, '-v']
    ran = []

    class Ran:
        """ReFrame, done at once."""

        def __init__(self, argv: list[str], **_kw: object) -> None:
            ran.append(argv)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(sequential.subprocess, 'Popen', Ran)
    batch = sequential.Batch('local', 'shm', 'mpich', {'SpmvCheck %layout=mpi_2x1'})
    assert sequential._reframe(args.reframe, batch, 1, 3) == 0
    (cmd,) = ran
    assert [w for w in cmd if w.startswith(('-p', '--prgenv'))] == ['-p']
    assert cmd[cmd.index('-p') + 1] == '^mpich$' and 'openmpi' not in ' '.join(cmd)
    assert cmd.count('--system') == 1 and cmd.count('-n') == 1


def test_bad_arguments_are_refused(monkeypatch, capsys):
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', 'many')
    assert sequential.main(['--since', '2026-11-25T00:00:00', '--deadline', '0', '--',
                            'reframe']) == 2
    assert 'HARNESS_MAX_ROUNDS must be an integer from 1 to 100' in capsys.readouterr().err


def test_measured_costs_feed_the_next_plan(tmp_path, monkeypatch):
    from harnesscore import plan as P
    recs = _session(tmp_path, [1.0, 0.7, 1.3])    # runs 2 s apart
    costs = tmp_path / 'plan-costs.json'
    assert sequential.update_costs(recs, str(costs)) == 2
    monkeypatch.setenv('HARNESS_PLAN_COSTS', str(costs))
    table = P.measured_costs('local:shm')
    assert table == {'spmv mpi_2x1 16': 2.0, 'spmv masteronly_1x2 16': 2.0}
    topo = P.Topology(cores=2, name='local:shm')
    plan = P.session_plan(topo, samples=3, budget_s=P.DEFAULT_BUDGET_S)
    run = next(r for r in plan.runs if r.kernel == 'spmv' and r.size == 16
               and r.layout == ('mpi', 2, 1))
    assert run.measured and run.seconds == 2.0
    other = next(r for r in plan.runs if r.kernel == 'spmv' and r.size == 64)
    assert not other.measured and other.seconds == P.estimate('spmv', other.layout, 64, topo)
    assert 'estimated from this partition\'s measured runs' in plan.format()
    # another partition has none; a broken file is ignored, saying so
    assert P.measured_costs('local:tcp') == {}
    costs.write_text('{not json')
    assert P.measured_costs('local:shm') == {}


@pytest.mark.parametrize('options, message', [
    (['--since', 'garbage'], "argument --since: not an ISO time: 'garbage'"),
    (['--since', ''], "argument --since: not an ISO time: ''"),
    (['--noise-floor', '-5'], '--noise-floor must be in [0, 1), got -5.0'),
    (['--noise-floor', 'nan'], '--noise-floor must be in [0, 1), got nan'),
    (['--noise-floor', '1'], '--noise-floor must be in [0, 1), got 1.0'),
    # NaN is before and after every time: no batch would ever be over the budget
    (['--deadline', 'nan'], '--deadline must be seconds since the epoch, got nan'),
])
def test_a_bad_since_or_noise_floor_is_an_argument_error(tmp_path, capsys, options, message):
    argv = ['--since', '2026-11-25T00:00:00', '--deadline', '0', '--perflogs',
            str(tmp_path / 'none'), '--costs', str(tmp_path / 'costs.json'), *options,
            '--', 'false']
    with pytest.raises(SystemExit) as exit_:
        sequential.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith(f'error: {message}\n')


def _lines(rounds, failed, first=0, start=pw.T0, size='16', stack='mpich'):
    """Perflog lines of spmv 2x1 against masteronly 1x2 (noisy, so INCONCLUSIVE),
    `rounds` rounds from `first`; failed(mode, round) says which runs failed."""
    lines, t = [], start
    for r in range(first, first + rounds):
        for mode, ranks, threads in (('mpi', 2, 1), ('masteronly', 1, 2)):
            t += dt.timedelta(seconds=2)
            value = 1.0 if mode == 'mpi' else (1.0, 0.7, 1.3)[r % 3]
            name = f'SpmvCheck %layout={mode}_{ranks}x{threads} %problem={size} %sample={r}'
            lines.append(pw.line('spmv', {'t_total': (value, 's')}, mode=mode, ranks=ranks,
                                 threads=threads, size=size, time=t, name=name, stack=stack,
                                 result='fail' if failed(mode, r) else 'pass'))
    return lines, t


def _failing(tmp_path, rounds, failed):
    lines, _ = _lines(rounds, failed)
    pw.write(tmp_path / 'SpmvCheck.log', [pw.header(['t_total'])] + lines)
    return read_perflogs([str(tmp_path)])


def test_the_cap_counts_the_rounds_run_a_side_failed_included(tmp_path):
    # the hybrid side passed rounds 0-2 and failed 3-19: 3 rounds paired, 20 run
    recs = _failing(tmp_path, 20, lambda mode, r: mode == 'masteronly' and r >= 3)
    open_, batches = sequential.undecided(recs, cap=15)
    assert [(v.verdict, v.rounds, v.stopped) for v in open_] == [
        (stats.INCONCLUSIVE, 3, stats.CAP)]
    assert batches == []
    assert sequential.capped_notes(open_, recs) == [
        'spmv 16 on local:shm mpich, mpi 2x1 against masteronly 1x2: 3 round(s) paired; '
        'masteronly 1x2: 17 of 20 run(s) left out (failed)']
    # both sides failed rounds 3-15: the verdict sees 3 rounds, 16 were run
    recs = _failing(tmp_path, 16, lambda mode, r: r >= 3)
    open_, batches = sequential.undecided(recs, cap=15)
    assert [(v.rounds, v.stopped) for v in open_] == [(3, stats.CAP)] and batches == []
    # below the cap: the batch counts the rounds run (6), not the 3 paired
    recs = _failing(tmp_path, 6, lambda mode, r: mode == 'masteronly' and r >= 3)
    open_, (b,) = sequential.undecided(recs, cap=15)
    assert [v.stopped for v in open_] == [stats.BUDGET] and b.rounds == 6


def _three_rounds(tmp_path, reframe: str) -> tuple:
    """A session of three rounds of the pair, none failed, its last run about now:
    its perflog, its last run's time and the rounds' options (the costs in
    costs.json, up to 15 rounds, `reframe` the ReFrame command)."""
    log = tmp_path / 'perflogs' / 'SpmvCheck.log'
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    lines, end = _lines(3, lambda mode, r: False, start=now - dt.timedelta(minutes=2))
    pw.write(log, [pw.header(['t_total'])] + lines)
    options = ['--since', (now - dt.timedelta(minutes=3)).isoformat(), '--deadline',
               str(now.timestamp() + 3600), '--perflogs', str(log.parent), '--costs',
               str(tmp_path / 'costs.json'), '--max-rounds', '15', '--', reframe]
    return log, end, options


def test_rounds_a_side_fails_stop_the_batches_at_the_cap(tmp_path, monkeypatch, capsys):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    calls = []

    def batch(command, b, step, first):
        """A batch whose hybrid runs all fail."""
        calls.append((first, step))
        assert len(calls) < 20, 'the batches never stop'
        more, _ = _lines(step, lambda mode, r: mode == 'masteronly', first=first,
                         start=end + dt.timedelta(seconds=10 * len(calls)))
        with open(log, 'a') as fh:
            fh.write('\n'.join(more) + '\n')
        return 0

    monkeypatch.setattr(sequential, '_reframe', batch)
    assert sequential.main(argv) == 0
    assert calls == [(3, 2), (5, 2), (7, 2), (9, 2), (11, 2), (13, 2)]
    out = capsys.readouterr().out
    assert 'no pair left to decide (1 INCONCLUSIVE at the cap of 15 rounds)' in out
    assert 'at the cap: spmv 16 on local:shm mpich' in out
    assert 'masteronly 1x2: 12 of 15 run(s) left out (failed)' in out


@pytest.mark.parametrize('signal_name, whom', [('INT', '0'), ('TERM', '$PPID')])
def test_a_signal_stops_the_rounds_after_the_batch_running(tmp_path, signal_name, whom):
    """Ctrl-C during a batch (SIGINT to the process group: the rounds and their
    ReFrame), or SIGTERM to the rounds alone: the batch stops on it as ReFrame
    does ('cancelled by user'), no other batch starts, the costs are not
    updated, no traceback (it was a KeyboardInterrupt traceback, or a killed
    ReFrame and a dead driver), exit status 128+signal."""
    import os
    import signal
    import sys
    calls = tmp_path / 'calls'
    # ReFrame: stops on the signal after a moment, as it does (its jobs cancelled)
    reframe = tmp_path / 'reframe'
    _, _, options = _three_rounds(tmp_path, str(reframe))
    reframe.write_text(f'''#!/bin/bash
echo "$*" >> {calls}
trap 'sleep 0.5; echo "run session stopped: cancelled by user"; echo done >> {calls}; exit 1' \\
    INT TERM
kill -{signal_name} {whom}
for _ in $(seq 100); do sleep 0.1; done
''')
    reframe.chmod(0o755)
    costs = tmp_path / 'costs.json'
    argv = [sys.executable, '-m', 'hybridverdict.sequential', *options]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          start_new_session=True, env={**os.environ, 'PYTHONUNBUFFERED': '1'})
    signum = getattr(signal, f'SIG{signal_name}')
    assert proc.returncode == 128 + signum, proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stderr, proc.stderr
    assert f'sequential: stopped by SIG{signal_name}: no more rounds' in proc.stderr
    assert calls.read_text().count('\n') == 2 and calls.read_text().endswith('done\n')
    assert not costs.exists()


def test_a_sigterm_as_reframe_starts_is_passed_on_to_it(tmp_path, monkeypatch):
    # A SIGTERM before Popen returned (ReFrame exec'd, the rounds not yet past
    # Popen: a loaded machine) raised there: no handle to pass it on with, the
    # rounds exited and ReFrame ran on (the signal test above failed so, 2 in 3
    # under load)
    import os
    import signal
    reframe = tmp_path / 'reframe'
    reframe.write_text('#!/bin/bash\nfor _ in $(seq 300); do sleep 0.1; done\n')
    reframe.chmod(0o755)
    _, _, options = _three_rounds(tmp_path, str(reframe))
    real, started = subprocess.Popen, []

    def starting(*args, **kwargs):
        started.append(real(*args, **kwargs))
        os.kill(os.getpid(), signal.SIGTERM)        # before Popen returns
        return started[-1]

    monkeypatch.setattr(sequential.subprocess, 'Popen', starting)
    try:
        assert sequential.main(options) == 128 + signal.SIGTERM
        (proc,) = started
        assert proc.poll() == -signal.SIGTERM, 'ReFrame left running'
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_a_pair_whose_rounds_run_reached_the_cap_gets_no_batch(tmp_path):
    # 15 rounds run, the hybrid side failing from round 3: at a cap of 15
    recs = _failing(tmp_path, 15, lambda mode, r: mode == 'masteronly' and r >= 3)
    open_, batches = sequential.undecided(recs, cap=15)
    assert [v.stopped for v in open_] == [stats.CAP] and batches == []


def test_a_batch_of_two_pairs_counts_the_rounds_of_each_pair_alone(tmp_path):
    def session(other_rounds: int) -> list:
        lines, end = _lines(3, lambda mode, r: False)
        more, _ = _lines(other_rounds, lambda mode, r: False, start=end, size='64')
        pw.write(tmp_path / 'SpmvCheck.log', [pw.header(['t_total'])] + lines + more)
        return read_perflogs([str(tmp_path)])
    # the other pair at the cap: this one's batch still has its 3 rounds
    _, (b,) = sequential.undecided(session(15), cap=15)
    assert (b.pairs, b.rounds) == (1, 3)
    assert all('%problem=16' in n for n in b.names)
    # both below it: the batch's rounds are its pairs' fewest
    _, (b,) = sequential.undecided(session(10), cap=15)
    assert (b.pairs, b.rounds) == (2, 3)


def _batches(monkeypatch, log, end, returns=(0,), failed=lambda mode, r: False) -> list:
    """Fake ReFrame batches (their (first, step)): each adds its rounds to `log`
    (none where `failed` is None) and returns the next of `returns`."""
    calls: list[tuple[int, int]] = []

    def batch(command, b, step, first):
        calls.append((first, step))
        assert len(calls) < 20, 'the batches never stop'
        if failed is not None:
            more, _ = _lines(step, failed, first=first,
                             start=end + dt.timedelta(seconds=10 * len(calls)))
            with open(log, 'a') as fh:
                fh.write('\n'.join(more) + '\n')
        return returns[min(len(calls), len(returns)) - 1]

    monkeypatch.setattr(sequential, '_reframe', batch)
    return calls


def test_the_last_batch_stops_at_the_cap_not_past_it(tmp_path, monkeypatch):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    argv[argv.index('--max-rounds') + 1] = '4'
    calls = _batches(monkeypatch, log, end, failed=lambda mode, r: mode == 'masteronly')
    assert sequential.main(argv) == 0
    assert calls == [(3, 1)]


def test_a_batch_that_adds_no_record_is_not_run_again(tmp_path, monkeypatch, capsys):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    calls = _batches(monkeypatch, log, end, failed=None)
    assert sequential.main(argv) == 1
    assert calls == [(3, 2)]
    assert 'the last batches added no record; stopping' in capsys.readouterr().err


def test_a_failed_batch_is_the_exit_status_after_later_batches_pass(tmp_path, monkeypatch):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    calls = _batches(monkeypatch, log, end, returns=(1, 0),
                     failed=lambda mode, r: mode == 'masteronly')
    assert sequential.main(argv) == 1
    assert len(calls) > 1


def test_a_batch_that_does_not_fit_the_budget_is_not_started(tmp_path, monkeypatch, capsys):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    argv[argv.index('--deadline') + 1] = str(end.timestamp() + 60)
    calls = _batches(monkeypatch, log, end)
    looks = []
    real = sequential.seconds_per_run

    def per_run(records, wall):
        looks.append(wall)
        assert len(looks) < 5, 'the rounds never stop'
        return real(records, wall)

    monkeypatch.setattr(sequential, 'seconds_per_run', per_run)
    assert sequential.main(argv) == 0
    assert calls == []
    assert 'would take ~' in capsys.readouterr().out


def test_the_batch_numbers_its_rounds_after_its_own_stacks_rounds(tmp_path, monkeypatch):
    log, end, argv = _three_rounds(tmp_path, 'reframe')
    # another stack of the partition ran rounds 0-8 (decided or not, another batch)
    other, _ = _lines(9, lambda mode, r: False, start=end, stack='openmpi')
    with open(log, 'a') as fh:
        fh.write('\n'.join(other) + '\n')
    calls: list[tuple[str, int]] = []

    def batch(command, b, step, first):
        calls.append((b.stack, first))
        return 0

    monkeypatch.setattr(sequential, '_reframe', batch)
    sequential.main(argv)
    assert ('mpich', 3) in calls and ('mpich', 9) not in calls


def test_seconds_per_run_is_the_sessions_own(tmp_path):
    recs = _session(tmp_path, [1.0, 0.7, 1.3])
    assert sequential.seconds_per_run(recs, 60.0) == 10.0
    assert sequential.seconds_per_run([], 60.0) == sequential.DEFAULT_RUN_S


def test_a_gap_between_sessions_is_not_a_runs_cost(tmp_path):
    lines, end = _lines(1, lambda mode, r: False)
    later, _ = _lines(1, lambda mode, r: False, first=1, start=end + dt.timedelta(hours=6))
    pw.write(tmp_path / 'SpmvCheck.log', [pw.header(['t_total'])] + lines + later)
    costs = sequential.run_costs(read_perflogs([str(tmp_path)]))
    assert costs == {'local:shm': {'spmv masteronly_1x2 16': 2.0}}


def test_measured_costs_keep_the_other_runs_of_the_partition(tmp_path):
    costs = tmp_path / 'plan-costs.json'
    costs.write_text('{"local:shm": {"spmv funneled_1x2 16": 9.0}}')
    assert sequential.update_costs(_session(tmp_path, [1.0, 0.7, 1.3]), str(costs)) == 2
    import json
    assert json.loads(costs.read_text())['local:shm'] == {
        'spmv funneled_1x2 16': 9.0, 'spmv mpi_2x1 16': 2.0, 'spmv masteronly_1x2 16': 2.0}


def test_a_partitions_entry_that_is_no_table_is_replaced(tmp_path):
    """A hand-edited costs file whose partition entry is a number (the reader passes
    it over) is no traceback after the session: the entry is written anew."""
    import json
    costs = tmp_path / 'plan-costs.json'
    costs.write_text('{"local:shm": 12.5, "other:tcp": {"ring mpi_2x1 8": 3.0}}')
    assert sequential.update_costs(_session(tmp_path, [1.0, 0.7, 1.3]), str(costs)) == 2
    assert json.loads(costs.read_text()) == {
        'local:shm': {'spmv mpi_2x1 16': 2.0, 'spmv masteronly_1x2 16': 2.0},
        'other:tcp': {'ring mpi_2x1 8': 3.0}}
