"""Change points over the history store, and the morning page (hybridverdict.changes)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import json
import math
import random
from pathlib import Path

import perflog_writer as pw
import pytest
from hybridverdict import changes, cli, report, sections, store
from hybridverdict.perflog import ReadStats, Record
from hybridverdict.section import SINCE_LAST_NIGHT

NIGHT0 = dt.datetime(2026, 10, 1, 2, 30, tzinfo=dt.timezone.utc)
SAMPLES = 3


def history_of(records: list[Record]) -> changes.History:
    """The history of records in memory (record id = position)."""
    tables = store.frames(records)
    return changes.History(*tables.lazy(), lambda rids: {i: records[i] for i in rids})


def night(i: int) -> dt.datetime:
    return NIGHT0 + dt.timedelta(days=i)


def write_check(path: Path, cls: str, variable: str, unit: str, levels: list[float | None],
                rng: random.Random, noise: float = 0.02, offset: int = 0,
                env: list[str] | None = None, results: list[str] | None = None) -> Path:
    """A perflog of one check: SAMPLES runs a night at each level (None: not run that
    night), log-normal noise, the mpi_env of each night from `env`."""
    lines = [pw.header([variable])]
    for i, level in enumerate(levels):
        if level is None:
            continue
        for k in range(SAMPLES):
            value = level * math.exp(rng.gauss(0, noise))
            lines.append(pw.line(
                'ring', {variable: (value, unit)}, stack='openmpi', part='shm',
                name=f'{cls} %layout=mpi_2x1 %sample={k}',
                time=night(i) + dt.timedelta(seconds=offset + 20 * k),
                result=results[i] if results else 'pass',
                after_result={'mpi_env': env[i] if env else 'OMPI_MCA_pml=ob1'}))
    return pw.write(path, lines)


def stored(tmp_path: Path) -> store.Store:
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(tmp_path / 'perflogs')])
    return st


@pytest.fixture
def step_store(tmp_path: Path) -> store.Store:
    """StepCheck's t_total 30% longer from night 25 of 40, three noisy checks beside it."""
    nights, at = 40, 25
    rng = random.Random(11)
    env = ['OMPI_MCA_pml=ob1'] * at + ['OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp'] * (
        nights - at)
    # the step: t_total 30% longer from night `at` on (seconds: worse)
    write_check(tmp_path / 'perflogs' / 'StepCheck.log', 'StepCheck', 't_total', 's',
                [1.0] * at + [1.3] * (nights - at), rng, env=env)
    for j, cls in enumerate(('NoiseA', 'NoiseB', 'NoiseC')):
        write_check(tmp_path / 'perflogs' / f'{cls}.log', cls, 'bw_1048576', 'MB/s',
                    [5000.0 + 100 * j] * nights, rng, noise=0.04, offset=100 + 100 * j,
                    env=env)
    return stored(tmp_path)


def test_a_step_is_found_with_its_size_direction_time_and_what_changed(step_store):
    found = changes.find(changes.History.from_store(step_store))
    assert [c.key.check for c in found] == ['StepCheck']
    (c,) = found
    assert c.confirmed and c.key.variable == 't_total' and c.key.variant == 'layout=mpi_2x1'
    assert c.at == night(25)
    assert c.direction == 'worse' and c.kind == 'regression'
    assert c.low <= 0.30 <= c.high and abs(c.change - 0.30) < 0.03
    assert c.sessions_before == 25 and c.sessions_after == 15
    # the store has no mpi_env column: the provenance is read back from the perflog lines
    assert c.changed == {'OMPI_MCA_btl': ('', 'self,tcp')}
    assert 'OMPI_MCA_btl unset -> self,tcp' in c.line()
    assert c.line().startswith('StepCheck layout=mpi_2x1 t_total, openmpi@shm: +30% from '
                               '2026-10-26 02:30 (95% interval +')


def records(levels: list[float], rng: random.Random, cls: str, noise: float,
            unit: str = 's') -> list[Record]:
    out = []
    for i, level in enumerate(levels):
        for k in range(SAMPLES):
            out.append(Record(
                time=night(i) + dt.timedelta(seconds=20 * k), system='local',
                partition='shm', stack='openmpi', kernel='spmv', mode='mpi', ranks=2,
                threads=1, size='64', cores=2, nodes=1, mpi_library='Open MPI v4.1.4',
                verified=True, oversubscribed=False, result='pass',
                values={'t_total': level * math.exp(rng.gauss(0, noise))},
                units={'t_total': unit}, source='', name=f'{cls} %sample={k}'))
    return out


def test_noise_and_single_outlier_nights_give_no_change_point():
    rng = random.Random(2026)
    recs: list[Record] = []
    for s in range(100):
        levels = [1.0] * 60
        if rng.random() < 0.3:     # an occasional single outlier night
            levels[rng.randrange(60)] = rng.choice([0.6, 1.5])
        recs += records(levels, rng, f'Noise{s:03d}', 0.05)
    found = changes.find(history_of(recs))
    with_change = {c.key.check for c in found if c.confirmed}
    assert len(with_change) <= 5, [c.line() for c in found]
    assert len({c.key.check for c in found}) <= 5


def test_the_knobs_change_the_outcome(monkeypatch):
    rng = random.Random(5)
    hist = history_of(records([1.0] * 30 + [1.03] * 30, rng, 'Small', 0.01))
    assert changes.find(hist) == []                      # 3% < the default 5%
    (c,) = changes.find(hist, changes.Knobs(magnitude=0.02))
    assert c.at == night(30) and c.low <= 0.03 <= c.high
    monkeypatch.setenv('HARNESS_CHANGE_MAGNITUDE', '0.02')
    assert changes.Knobs.from_env().magnitude == 0.02
    assert len(changes.find(hist, changes.Knobs.from_env())) == 1
    assert changes.Knobs.from_env(magnitude=0.05).magnitude == 0.05   # an option wins
    # a longer minimum segment: a step 4 sessions before the end is not one yet
    late = history_of(records([1.0] * 36 + [1.3] * 4, rng, 'Late', 0.01))
    assert [c.confirmed for c in changes.find(late)] == [True]
    (c,) = changes.find(late, changes.Knobs(min_segment=5))
    assert not c.confirmed and c.at == night(36) and c.sessions_after == 4
    monkeypatch.setenv('HARNESS_CHANGE_P_VALUE', 'abc')
    with pytest.raises(changes.KnobError, match='HARNESS_CHANGE_P_VALUE'):
        changes.Knobs.from_env()


def test_cli_prints_and_writes_json_and_fails_on_a_regression(tmp_path, step_store, capsys):
    out = tmp_path / 'changes.json'
    assert cli.main(['changes', '--store', step_store.directory, '--json', str(out)]) == 0
    printed = capsys.readouterr().out
    assert 'regression: StepCheck layout=mpi_2x1 t_total' in printed
    doc = json.loads(out.read_text())
    (c,) = doc['changes']
    assert c['series'] == 'StepCheck layout=mpi_2x1 t_total, openmpi@shm'
    assert c['kind'] == 'regression' and c['direction'] == 'worse' and c['confirmed']
    assert c['at'] == night(25).isoformat()
    assert c['changed'] == {'OMPI_MCA_btl': {'before': '', 'after': 'self,tcp'}}
    assert c['low'] <= 0.3 <= c['high'] and doc['knobs']['magnitude'] == 0.05
    assert cli.main(['changes', '--store', step_store.directory, '--fail-on-change']) == \
        cli.EXIT_REGRESSION
    assert cli.main(['changes', '--store', step_store.directory, '--fail-on-change',
                     '--min-magnitude', '0.5']) == 0
    # a time range without the step
    assert cli.main(['changes', '--store', step_store.directory, '--until',
                     night(20).isoformat(), '--fail-on-change']) == 0
    # The times as used (a time without a zone is UTC), in the JSON too.
    assert cli.main(['changes', '--store', step_store.directory, '--since', '2026-10-01',
                     '--until', night(20).isoformat(), '--json', str(out)]) == 0
    doc = json.loads(out.read_text())
    assert (doc['since'], doc['until']) == ('2026-10-01T00:00:00+00:00', night(20).isoformat())
    assert doc['changes'] == []
    capsys.readouterr()
    for option in ('--since', '--until'):
        with pytest.raises(SystemExit):
            cli.main(['changes', '--store', step_store.directory, option, 'yesterday'])
        assert f"argument {option}: not an ISO time: 'yesterday'" in capsys.readouterr().err


@pytest.fixture
def morning_store(tmp_path: Path) -> store.Store:
    """30 nights, the last with a check of each kind the morning page names."""
    nights = 30
    rng = random.Random(3)
    logs = tmp_path / 'perflogs'
    last = nights - 1
    env = ['OMPI_MCA_pml=ob1'] * last + ['OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp']
    # bandwidth down 41% last night (worse), a time 20% shorter (better)
    write_check(logs / 'Slower.log', 'Slower', 'bw_1048576', 'MB/s',
                [5000.0] * last + [2950.0], rng, env=env)
    write_check(logs / 'Faster.log', 'Faster', 't_total', 's', [2.0] * last + [1.6], rng,
                offset=100)
    write_check(logs / 'Failing.log', 'Failing', 't_total', 's', [1.0] * nights, rng,
                offset=200, results=['pass'] * last + ['fail'])
    write_check(logs / 'Gone.log', 'Gone', 't_total', 's', [1.0] * last + [None], rng,
                offset=300)
    write_check(logs / 'Added.log', 'Added', 't_total', 's', [None] * last + [1.0], rng,
                offset=400)
    write_check(logs / 'AddedFailing.log', 'AddedFailing', 't_total', 's',
                [None] * last + [1.0], rng, offset=500, results=['fail'] * nights)
    return stored(tmp_path)


def test_the_morning_page_says_what_moved(tmp_path, morning_store):
    page = changes.since_last_night(changes.History.from_store(morning_store))
    assert page.last_night == night(29)
    lines = page.lines()
    assert lines[0].startswith('regression: Slower layout=mpi_2x1 bw_1048576, openmpi@shm: '
                               '-4')                 # -41% and the night's noise
    assert ' from 2026-10-30 02:30 (95% interval -4' in lines[0]
    assert 'worse, unconfirmed: 1 session(s) after it, a change needs 3' in lines[0]
    assert lines[0].endswith('changed then: OMPI_MCA_btl unset -> self,tcp')
    assert lines[1].startswith('improvement: Faster layout=mpi_2x1 t_total, openmpi@shm: -2')
    assert ' from 2026-10-30 02:30 ' in lines[1] and 'better, unconfirmed' in lines[1]
    # a new check that fails is newly failing (a line saying "new" alone would hide it)
    assert lines[2:] == [
        'newly failing: AddedFailing layout=mpi_2x1, openmpi@shm (not run the session before)',
        'newly failing: Failing layout=mpi_2x1, openmpi@shm',
        'missing: Gone layout=mpi_2x1, openmpi@shm (ran the session before, not the last)',
        'new: Added layout=mpi_2x1, openmpi@shm (not run the session before)']
    assert page.new == ['Added layout=mpi_2x1, openmpi@shm',
                        'AddedFailing layout=mpi_2x1, openmpi@shm']
    # two nights later the regression is confirmed by the third night after it
    rng = random.Random(4)
    logs = tmp_path / 'perflogs'
    write_check(logs / 'Slower2.log', 'Slower', 'bw_1048576', 'MB/s',
                [None] * 30 + [2950.0] * 2, rng,
                env=['OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp'] * 32)
    morning_store.ingest([str(logs)])
    page = changes.since_last_night(changes.History.from_store(morning_store))
    moved = [line for line in page.lines() if line.startswith(('regression', 'improvement'))]
    (line,) = moved        # Faster did not run again: its change stays unconfirmed
    assert line.startswith('regression: Slower') and ' from 2026-10-30 02:30 ' in line
    assert 'unconfirmed' not in line and line.endswith('OMPI_MCA_btl unset -> self,tcp')


def test_cli_prints_the_morning_page_and_a_knob_makes_its_regression_fatal(tmp_path, capsys,
                                                                           morning_store):
    out = tmp_path / 'page.json'
    assert cli.main(['changes', '--store', morning_store.directory, '--last-night', '--json',
                     str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('regression: Slower') and 'newly failing: Failing' in printed
    assert json.loads(out.read_text())['newly_failing'] == [
        'AddedFailing layout=mpi_2x1, openmpi@shm', 'Failing layout=mpi_2x1, openmpi@shm']
    # the page's regression is unconfirmed (one night): fatal only with the knob
    assert cli.main(['changes', '--store', morning_store.directory, '--last-night',
                     '--fail-on-change']) == cli.EXIT_REGRESSION
    assert cli.main(['changes', '--store', morning_store.directory, '--fail-on-change']) == 0


@pytest.mark.parametrize('value', ['1.0', '2.5'])
def test_a_magnitude_of_1_or_more_is_refused(tmp_path, capsys, morning_store, value):
    # a drop is at most -100%: at a magnitude of 1 or more every drop (a 10x fall of a
    # bandwidth among them) went unfound while rises were still found, silently
    with pytest.raises(SystemExit) as exit_:
        cli.main(['changes', '--store', morning_store.directory, '--min-magnitude', value])
    assert exit_.value.code == 2
    assert f'--min-magnitude {value}: must be in [0, 1)' in capsys.readouterr().err


def test_the_last_night_must_start_since_the_time_given(tmp_path, capsys, morning_store):
    # the nightly gives its session's start: a store that holds no session since
    # (the report stored nothing tonight) is an error, not an older night's page
    last = changes.since_last_night(changes.History.from_store(morning_store)).last_night
    base = ['changes', '--store', morning_store.directory, '--last-night', '--since']
    assert cli.main([*base, last.isoformat()]) == 0
    capsys.readouterr()
    later = last + dt.timedelta(seconds=1)
    assert cli.main([*base, later.isoformat(), '--fail-on-change']) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'hybridverdict changes: the history store {morning_store.directory} '
                          f'holds no session since {later.isoformat()} (its last started '
                          f'{last.isoformat()})'), err


def test_a_quiet_night_is_one_line(tmp_path):
    rng = random.Random(8)
    for cls in ('QuietA', 'QuietB'):
        write_check(tmp_path / 'perflogs' / f'{cls}.log', cls, 't_total', 's', [1.0] * 20,
                    rng, offset=100 * len(cls))
    page = changes.since_last_night(changes.History.from_store(stored(tmp_path)))
    assert page.quiet
    assert page.lines() == ['Since the last night: nothing moved (2 series, 2 checks)']


def test_the_report_of_a_nightly_opens_with_the_morning_page(tmp_path, morning_store):
    window = morning_store.records(night(29))
    rep = report.build(window, ReadStats(), [str(tmp_path / 'perflogs')], since=night(29),
                       stored=morning_store.scan(), stored_records=len(morning_store.records()))
    first = rep.sections[0]
    assert first.key == SINCE_LAST_NIGHT and first.title == 'Since the last night'
    assert first.rows[0][0].startswith('regression: Slower')
    assert sections.ANALYSES[0] is sections.since_last_night
    # every output opens with it, before the verdicts, and shows it once
    from hybridverdict import html, render
    for text, verdicts in ((render.terminal(rep), 'No pure-MPI/hybrid pair'),
                           (render.markdown(rep), 'No pure-MPI/hybrid pair'),
                           (html.page(rep, {}), '<h2 id="verdicts">')):
        assert text.count('regression: Slower') == 1, text
        assert text.index('regression: Slower') < text.index(verdicts)
    # a report over more than the last night (or without a store) has no such section
    rep = report.build(morning_store.records(night(20)), ReadStats(), [], since=night(20),
                       stored=morning_store.scan())
    assert rep.section(SINCE_LAST_NIGHT) is None


def test_a_tiny_p_value_is_refused_not_run_for_minutes(monkeypatch, capsys):
    # ~5 / p permutations per test: 1e-7 took minutes; the minimum is named
    with pytest.raises(changes.KnobError, match=r'p_value must be in \[0.0001, 1\]'):
        changes.Knobs(p_value=1e-7)
    assert changes.Knobs(p_value=changes.MIN_P_VALUE).p_value == 1e-4
    monkeypatch.setenv('HARNESS_CHANGE_P_VALUE', '1e-7')
    with pytest.raises(changes.KnobError, match=r"HARNESS_CHANGE_P_VALUE='1e-7': must be in"):
        changes.Knobs.from_env()
    monkeypatch.delenv('HARNESS_CHANGE_P_VALUE')
    with pytest.raises(SystemExit) as exit_:
        cli.main(['changes', '--store', '.', '--p-value', '1e-7'])
    assert exit_.value.code == 2
    assert 'error: --p-value 1e-07: must be in [0.0001, 1]' in capsys.readouterr().err


@pytest.mark.parametrize('gap', ['inf', '1e300', 'nan', '-1'])
def test_an_infinite_or_huge_session_gap_is_refused(monkeypatch, capsys, gap):
    with pytest.raises(changes.KnobError, match='session_gap must be positive minutes'):
        changes.Knobs(session_gap=float(gap))
    monkeypatch.setenv('HARNESS_CHANGE_SESSION_GAP', gap)
    with pytest.raises(changes.KnobError,
                       match=f"HARNESS_CHANGE_SESSION_GAP='{gap}': must be positive minutes, "
                             'at most 1e\\+06'):
        changes.Knobs.from_env()
    monkeypatch.delenv('HARNESS_CHANGE_SESSION_GAP')
    with pytest.raises(SystemExit) as exit_:
        cli.main(['changes', '--store', '.', '--session-gap', gap])
    assert exit_.value.code == 2
    assert f'error: --session-gap {float(gap)}: must be positive' in capsys.readouterr().err
    assert changes.Knobs(session_gap=changes.MAX_SESSION_GAP).gap.days == 694


def test_a_since_not_before_until_is_a_bad_option(tmp_path, step_store, capsys):
    # an empty range found nothing, said "0 change point(s)" and exited 0
    with pytest.raises(SystemExit) as exit_:
        cli.main(['changes', '--store', step_store.directory, '--since', '2026-10-20',
                  '--until', '2026-10-01', '--fail-on-change'])
    assert exit_.value.code == 2
    assert 'is not before --until 2026-10-01T00:00:00+00:00' in capsys.readouterr().err


@pytest.mark.parametrize('options', [[], ['--last-night', '--fail-on-change']])
def test_a_missing_store_or_a_file_is_an_unreadable_store(tmp_path, capsys, monkeypatch,
                                                         options):
    (tmp_path / 'file').write_text('')
    for path, what in ((tmp_path / 'none', 'does not exist'),
                       (tmp_path / 'file', 'is not a directory')):
        assert cli.main(['changes', '--store', str(path), *options]) == 2
        out = capsys.readouterr()
        assert out.err == f'hybridverdict changes: the history store {path} {what}\n'
        assert out.out == ''
    # the default store ($HARNESS_VAR_DIR/history) too: HARNESS_CHANGES_FATAL relies on it
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path))
    assert cli.main(['changes', *options]) == 2
    assert f'{tmp_path / "history"} does not exist (the default' in capsys.readouterr().err
    assert not (tmp_path / 'history').exists()


def test_a_changed_mpi_variable_whose_value_has_a_space_is_named():
    # mpi_env is 'NAME=VALUE ...' with the values unquoted (mpi_env_text): split only
    # before a NAME=, or 'ssh -x' -> 'ssh -q' was no change
    base = records([1.0], random.Random(0), 'SpmvCheck', 0.0)[0]
    env = 'OMPI_MCA_btl=self,vader OMPI_MCA_plm_rsh_agent=ssh {} UCX_TLS=sm'
    before = dataclasses.replace(base, mpi_env=env.format('-x'))
    after = dataclasses.replace(base, mpi_env=env.format('-q'))
    assert changes.provenance_diff(before, after) == {
        'OMPI_MCA_plm_rsh_agent': ('ssh -x', 'ssh -q')}
    gone = dataclasses.replace(base, mpi_env='OMPI_MCA_btl=self,vader')
    assert changes.provenance_diff(before, gone) == {
        'OMPI_MCA_plm_rsh_agent': ('ssh -x', ''), 'UCX_TLS': ('sm', '')}


def test_a_changed_mpi_variable_whose_value_holds_a_name_is_one_variable():
    """mpi_env_text quotes a value that needs it: 'ssh -o StrictHostKeyChecking=no'
    is one value of one variable, no variable StrictHostKeyChecking."""
    base = records([1.0], random.Random(0), 'SpmvCheck', 0.0)[0]
    env = ("OMPI_MCA_btl=self,vader OMPI_MCA_plm_rsh_agent='ssh -o StrictHostKeyChecking={}' "
           'UCX_TLS=sm')
    before = dataclasses.replace(base, mpi_env=env.format('no'))
    after = dataclasses.replace(base, mpi_env=env.format('yes'))
    assert changes.provenance_diff(before, after) == {'OMPI_MCA_plm_rsh_agent': (
        'ssh -o StrictHostKeyChecking=no', 'ssh -o StrictHostKeyChecking=yes')}
    tls = dataclasses.replace(base, mpi_env=env.format('no').replace('=sm', '=tcp'))
    assert changes.provenance_diff(before, tls) == {'UCX_TLS': ('sm', 'tcp')}
    # an older perflog (unquoted) and a text cut inside a quoted value: split before NAME=
    old = 'OMPI_MCA_btl=self,vader OMPI_MCA_plm_rsh_agent=ssh -x UCX_TLS=sm'
    assert changes._env(old) == {'OMPI_MCA_btl': 'self,vader',
                                 'OMPI_MCA_plm_rsh_agent': 'ssh -x', 'UCX_TLS': 'sm'}
    assert changes._env("A=1 B='ssh -o C") == {'A': '1', 'B': "'ssh -o C"}
    assert changes._env('A=<cut:1400 chars> B=1') == {'A': '<cut:1400 chars>', 'B': '1'}


def test_a_change_confirmed_more_than_min_segment_sessions_after_it_is_on_that_nights_page():
    # a 7% step in noise of 3%: the permutation test confirms it only once 5 sessions
    # lie after it, and the page must say so that night (not only at exactly 3)
    rng = random.Random(20)
    levels = [1.0] * 30 + [1.07] * 8
    recs = [dataclasses.replace(r, values={'t_total': r.values['t_total'] * math.exp(
        rng.gauss(0, 0.03))}) for r in records(levels, rng, 'LateCheck', 0.0)]
    hist = history_of(recs)
    first = next(i for i in range(30, 38) if any(
        c.confirmed for c in changes.find(hist, until=night(i) + dt.timedelta(hours=1))))
    assert first - 30 + 1 > changes.Knobs().min_segment       # confirmed late
    shown = {i: [c for c in changes.since_last_night(hist, night(i)).changes if c.confirmed]
             for i in range(28, 38)}
    assert [i for i, cs in shown.items() if cs] == [first]     # that night, only then
    (c,) = shown[first]
    assert c.at == night(30) and c.direction == 'worse'
    # --last-night --fail-on-change agrees with --fail-on-change that night
    assert cli._written(argparse.Namespace(json=None, fail_on_change=True), {},
                        shown[first]) == cli.EXIT_REGRESSION


def test_a_confirmed_change_whose_boundary_moves_by_two_sessions_is_not_new_again():
    """A ramp (+4% a night for three nights): the change is confirmed at night 12 on
    night 14, then one more session moves its boundary to 14 and back (by two
    sessions): the same regression, on the page (and failing the night under
    HARNESS_CHANGES_FATAL=1) only the night it was first confirmed."""
    rng = random.Random(1)
    levels = [1.0] * 12 + [1.04, 1.08, 1.12] + [1.16] * 6
    recs = [dataclasses.replace(r, values={'t_total': r.values['t_total'] * math.exp(
        rng.gauss(0, 0.03))}) for r in records(levels, rng, 'RampCheck', 0.0)]
    hist = history_of(recs)
    found = {i: [c.position for c in changes.find(hist, until=night(i) + dt.timedelta(hours=1))
                 if c.confirmed] for i in (16, 17)}
    assert found == {16: [12], 17: [14]}                     # the boundary moved by 2
    shown = {i: [(c.position, c.confirmed) for c in changes.since_last_night(
        hist, night(i)).changes] for i in range(10, len(levels))}
    assert {i: cs for i, cs in shown.items() if cs} == {14: [(12, True)]}


def test_a_second_change_after_a_known_one_is_new():
    """Matched by series, direction and overlapping segments, one to one: a later
    step whose segment before lies after the known change's boundary is new."""
    rng = random.Random(1)
    recs = records([1.0] * 10 + [1.3] * 10, rng, 'StepCheck', 0.02)
    (known,) = changes.find(history_of(recs))
    assert known.confirmed and known.position == 10

    def at(position: int, before: int, after: int) -> changes.ChangePoint:
        return dataclasses.replace(known, position=position, sessions_before=before,
                                   sessions_after=after, rids=(position - 1, position))

    then = [at(10, 10, 8)]
    assert changes._newly_confirmed([at(12, 12, 7)], then) == []          # moved by 2
    assert changes._newly_confirmed([at(7, 7, 12)], then) == []           # moved by 3
    second = at(15, 5, 4)
    assert changes._newly_confirmed([at(10, 10, 5), second], then) == [second]
    better = dataclasses.replace(at(12, 12, 7), direction='better')
    assert changes._newly_confirmed([better], then) == [better]


def two_systems(levels_a: list[float], levels_b: list[float], a_last: bool = True,
                ) -> changes.History:
    """Ring (t_total) on two systems every night, each its own session: system a at
    02:30, b two (a_last: two before) hours later."""
    rng = random.Random(9)
    recs: list[Record] = []
    for system, levels, hours in (('sysa', levels_a, 0), ('sysb', levels_b,
                                                           -2 if a_last else 2)):
        recs += [dataclasses.replace(r, system=system, time=r.time + dt.timedelta(hours=hours))
                 for r in records(levels, rng, 'RingCheck', 0.02)]
    return history_of(sorted(recs, key=lambda r: r.time))


def test_each_system_is_compared_with_its_own_session_before():
    # two systems in one store, quiet: nothing missing or new against the other system
    for a_last in (True, False):
        page = changes.since_last_night(two_systems([1.0] * 8, [1.0] * 8, a_last))
        assert page.lines() == ['Since the last night: nothing moved (1 series, 1 checks)']
    # system a's regression on its last night, a ran last: on the page, system named
    page = changes.since_last_night(two_systems([1.0] * 7 + [1.4], [1.0] * 8))
    (line,) = page.lines()
    assert line.startswith('regression: RingCheck t_total, openmpi@sysa:shm: +3')
    assert page.changes[0].as_dict()['series'] == 'RingCheck t_total, openmpi@sysa:shm'
    # a check that newly fails on system b: against b's session before, named so
    hist = two_systems([1.0] * 8, [1.0] * 8, a_last=False)
    recs = [dataclasses.replace(r, result='fail') if r.system == 'sysb'
            and r.time >= night(7) else r for r in
            sorted(hist.lookup(range(48)).values(), key=lambda r: r.time)]
    page = changes.since_last_night(history_of(recs))
    assert page.lines() == ['newly failing: RingCheck, openmpi@sysb:shm']


def _two_nightlies(a_start: int) -> list[Record]:
    """Two systems' nightlies in one store, 8 nights: system a's records every 50
    minutes from `a_start` minutes past its night's start, +50% on the last night;
    system b's every 5 minutes from 1 minute past it, level."""
    rng = random.Random(4)
    recs: list[Record] = []
    for system, levels, start, step in (('sysa', [1.0] * 7 + [1.5], a_start, 50),
                                        ('sysb', [1.0] * 8, 1, 5)):
        recs += [dataclasses.replace(r, system=system, session=f'{system}-{r.time:%d}',
                                     time=r.time + dt.timedelta(minutes=start + step * k))
                 for k, r in zip(itertools.cycle(range(SAMPLES)),
                                 records(levels, rng, 'RingCheck', 0.02))]
    return recs


def test_the_page_is_of_the_session_that_ended_last_not_the_one_that_started_last():
    # system a's nightly runs 02:30-04:10 and regresses tonight; system b's, in the
    # same store, starts a minute after it and ends first: a's nightly ends last and
    # its page (and `changes --last-night --fail-on-change`) is a's, not b's
    recs = _two_nightlies(a_start=0)
    page = changes.since_last_night(history_of(sorted(recs, key=lambda r: r.time)))
    assert page.last_night == night(7)
    (line,) = page.lines()
    assert line.startswith('regression: RingCheck t_total, openmpi@sysa:shm: +4')


def brute_force_p(pool: list[float], min_segment: int) -> float:
    """The auditor's exact p-value: every order of the pool."""
    import itertools

    import numpy as np
    x = np.asarray(pool)
    observed = float(changes._split_stat(x, min_segment)) * (1 - 1e-9)
    orders = np.array(list(itertools.permutations(x)))
    return float((changes._split_stat(orders, min_segment) >= observed).mean())


#: the auditor's short step series (numpy default_rng(5), a step of 1.0 in the logs)
#: whose exact p-values lie either side of 0.01, and those values (its brute force)
STEP_9 = [-0.02405794275760342, -0.03973076986884435, -0.007450848662857456,
          0.012613357141965644, 1.0340813959746893, 1.0032911919796543, 0.983420580383913,
          0.9764565893396716, 1.0224623731220377]
STEP_10 = [-0.03489677920334246, -0.018878642821846633, -0.014640174698305723,
           -0.02139940114896731, 0.01660135411059868, 0.9981074208422414,
           0.9823170622590218, 1.0122891347967136, 1.0248956592118397, 0.9507092988578297]


def test_the_permutation_p_value_of_a_short_series_is_exact():
    import numpy as np
    rs = np.random.default_rng(0)
    for m, ms in ((6, 3), (7, 3), (8, 3), (8, 2), (6, 1), (7, 2)):
        for shift in (0.0, 0.05, 0.2, 1.0):
            x = rs.normal(0, 0.03, m)
            x[m // 2:] += shift
            exact = brute_force_p(list(x), ms)
            for p_value in (0.01, 0.05, 1.0):
                got = changes.permutation_p(x, changes.Knobs(min_segment=ms, p_value=p_value))
                assert got == pytest.approx(exact, abs=1e-12), (m, ms, shift, p_value)
    knobs = changes.Knobs()
    # 9 sessions, 4|5: at best 2/126 > 0.01, no change; 10 sessions, 5|5: 2/252, a change
    assert brute_force_p(STEP_9, 3) == pytest.approx(2 / 126)
    assert changes.permutation_p(np.array(STEP_9), knobs) == pytest.approx(2 / 126)
    assert changes.permutation_p(np.array(STEP_10), knobs) == pytest.approx(2 / 252)
    assert changes.detect(list(np.exp(STEP_9)), knobs) == []
    assert [c for c, _ in changes.detect(list(np.exp(STEP_10)), knobs)] == [5]
    # a clean 30% step at 10 sessions is found (the sampled test missed it)
    found = 0
    for _ in range(20):
        x = rs.normal(0, 0.03, 10)
        x[5:] += 0.3
        found += bool(changes.detect(list(np.exp(x)), knobs))
    assert found == 20


def test_the_sampled_permutation_test_decides_as_the_exact_one_near_the_threshold():
    # longer pools (sampled) near p = 0.01: the draws go on while the binomial interval
    # holds the threshold, so the decision is the exact one's (2^m prefix sets)
    import numpy as np
    rs = np.random.default_rng(3)
    knobs = changes.Knobs()
    checked = 0
    for _ in range(60):
        x = rs.normal(0, 0.03, 15)
        x[8:] += rs.uniform(0.02, 0.06)
        observed = float(changes._split_stat(x, 3)) * (1 - 1e-9)
        exact = changes._exact_p(x, 3, observed)
        if not 0.004 <= exact <= 0.025 or 0.008 < exact < 0.0125:  # too close to call
            continue
        checked += 1
        sampled = changes._sampled_p(x, knobs, observed, seed=0)
        assert (sampled <= 0.01) == (exact <= 0.01), (exact, sampled)
    assert checked >= 5
    assert changes._exact_p(np.array(STEP_9), 3, float(changes._split_stat(
        np.array(STEP_9), 3)) * (1 - 1e-9)) == pytest.approx(2 / 126)


@pytest.mark.parametrize('first, second, kept', [(1.038, 1.042, 20), (1.042, 1.038, 10)])
def test_of_two_sub_magnitude_steps_the_smaller_is_merged_first(first, second, kept):
    """Two steps of about 4% (each below the 5% magnitude): the smaller one is the
    weakest and merged first, which leaves the larger, measured against the median
    of the merged segment: about 6%."""
    rng = random.Random(3)
    found = changes.find(history_of(records(
        [1.0] * 10 + [first] * 10 + [first * second] * 10, rng, 'Stairs', 0.001)))
    assert [(c.position, c.confirmed) for c in found] == [(kept, True)]
    assert found[0].change == pytest.approx(0.06, abs=0.005)


def test_an_unconfirmed_tail_is_judged_against_the_sessions_own_sample_noise():
    """Twenty sessions whose medians agree exactly while their samples spread 10%:
    a last session 8% up is within that noise, not an unconfirmed change."""
    rng = random.Random(1)
    recs = []
    for i, level in enumerate([1.0] * 20 + [1.08]):
        for k, f in enumerate((0.9, 1.0, 1.1)):
            r = records([level], rng, 'Flat', 0.0)[k]
            recs.append(dataclasses.replace(r, time=night(i) + dt.timedelta(seconds=20 * k),
                                            values={'t_total': level * f}))
    assert changes.find(history_of(recs)) == []


def test_a_known_change_is_matched_to_the_nearest_of_the_changes_it_overlaps():
    """The known change at 12 overlaps both a change at 9 and one at 12 of the
    next session: it is the one at 12 (the nearest), so the one at 9 is new."""
    rng = random.Random(1)
    (known,) = changes.find(history_of(
        records([1.0] * 12 + [1.3] * 7, rng, 'S', 0.02)))

    def at(position: int, before: int, after: int) -> changes.ChangePoint:
        return dataclasses.replace(known, position=position, sessions_before=before,
                                   sessions_after=after, rids=(position - 1, position))

    early = at(9, 9, 5)
    assert changes._newly_confirmed([early, at(12, 3, 8)], [at(12, 12, 7)]) == [early]
    assert changes._newly_confirmed([at(12, 3, 8), early], [at(12, 12, 7)]) == [early]


def test_a_step_on_the_last_night_is_dated_by_it_not_by_a_noisy_night_before():
    """20 quiet nights and +30% on the last: the night before it happened to be 5%
    high (session medians ..., 0.988, 1.054, 1.299), and the tail of two nights took
    both, +17% from the night before. The morning page then said nothing moved."""
    hist = history_of(records([1.0] * 20 + [1.3], random.Random(701), 'S07', 0.02))
    (found,) = changes.find(hist)
    assert found.at == night(20) and found.kind == 'regression', found.line()
    (line,) = changes.since_last_night(hist).lines()
    assert line.startswith('regression: S07 t_total, openmpi@shm: +') and \
        ' from 2026-10-21 02:30 ' in line, line


def test_records_without_a_test_name_are_told_apart_by_their_run_fields():
    """A record may have no name (another check's, an older perflog): its series was
    the kernel's alone, pure MPI 2x1 (1 s) and hybrid 1x2 (2 s) in one, and the
    nights the hybrid runs were skipped made a change point (-32%)."""
    rng = random.Random(5)
    recs = []
    for i in range(30):
        for mode, ranks, threads, level in (('mpi', 2, 1, 1.0), ('masteronly', 1, 2, 2.0)):
            if mode == 'masteronly' and i >= 20 and i % 2:
                continue
            recs += [dataclasses.replace(r, mode=mode, ranks=ranks, threads=threads, name='',
                                         time=r.time + dt.timedelta(minutes=ranks))
                     for r in records([level], rng, 'x', 0.02)]
            recs[-3:] = [dataclasses.replace(r, time=r.time + dt.timedelta(days=i))
                         for r in recs[-3:]]
    hist = history_of(sorted(recs, key=lambda r: r.time))
    assert changes.find(hist) == []
    keys = {p.key.variant for p in changes.series_points(hist, changes._runs(
        hist, changes.Knobs())[0])}
    assert keys == {'mode=mpi layout=2x1 size=64', 'mode=masteronly layout=1x2 size=64'}


def test_a_session_starts_at_its_first_record_though_that_one_is_unverified():
    # system a's nightly (02:30-04:10) regresses tonight, its first record (another
    # check, 02:30) failed its sanity check; system b's nightly starts at 02:31 and ends
    # first.  The window of the page's sessions took a's start from its first verified
    # record (02:35), after b's start: a's night was left out, its regression unseen.
    recs = _two_nightlies(a_start=5)
    recs.append(dataclasses.replace(recs[0], time=night(7), system='sysa', session='sysa-08',
                                    verified=False, result='fail', kernel='stream',
                                    name='OtherCheck %layout=mpi_2x1'))
    hist = history_of(sorted(recs, key=lambda r: r.time))
    page = changes.since_last_night(hist)
    assert page.last_night == night(7)
    assert [c.series for c in page.changes] == ['RingCheck t_total, openmpi@sysa:shm']
    assert page.changes[0].at == night(7) and page.changes[0].direction == 'worse'
    # --until: the sessions that start before it, a's at 02:30 among them
    found = changes.find(hist, until=night(7) + dt.timedelta(minutes=2))
    assert [(c.key.system, c.at) for c in found] == [('sysa', night(7))]


def test_until_with_the_last_night_is_refused_not_left_unread(capsys, morning_store):
    # the page is of the store's last session (2026-10-30): an --until of 10-10 printed
    # it, and judged it with --fail-on-change, as if it were of a night before 10-10
    with pytest.raises(SystemExit) as exit_:
        cli.main(['changes', '--store', morning_store.directory, '--last-night',
                  '--fail-on-change', '--until', '2026-10-10T00:00:00'])
    assert exit_.value.code == 2
    assert ('--until 2026-10-10T00:00:00+00:00: not with --last-night'
            in capsys.readouterr().err)


def test_a_huge_min_segment_finds_nothing_at_once(morning_store):
    # the unconfirmed tail tried every k below min_segment, each leaving too few sessions
    # before it: --min-segment 1000000000 looped for hours per series (no error, no end)
    from conftest import ends_within

    with ends_within(20, 'the change points of a --min-segment of 10^9'):
        page = changes.since_last_night(changes.History.from_store(morning_store),
                                        knobs=changes.Knobs(min_segment=10 ** 9))
    assert page.changes == []


def test_the_quiet_line_counts_only_series_with_a_logarithm():
    # a variable whose values are 0 (the verdict code, INCONCLUSIVE) is no series (no
    # logarithm): the page said "2 series" of a night with one
    rng = random.Random(8)
    recs = [dataclasses.replace(r, values={**r.values, 'verdict': 0.0},
                                units={**r.units, 'verdict': ''})
            for r in records([1.0] * 10, rng, 'QuietA', 0.02)]
    page = changes.since_last_night(history_of(recs))
    assert page.lines() == ['Since the last night: nothing moved (1 series, 1 checks)']
