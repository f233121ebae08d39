"""Pairing and judging: WIN/LOSS/TIE against the measured noise."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from pathlib import Path

import pytest
from harnesscore import stats
from hybridverdict import render
from hybridverdict.perflog import Record
from hybridverdict.verdict import verdicts

T0 = dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc)


def rec(mode: str, t: float, ranks: int = 2, threads: int = 1, **kw) -> Record:
    fields = dict(time=T0, system='local', partition='shm', stack='mpich', kernel='spmv',
                  mode=mode, ranks=ranks, threads=threads, size='16', cores=2, nodes=1,
                  mpi_library='MPICH Version: 4.0.2', verified=True, oversubscribed=False,
                  result='pass', values={'t_total': t}, units={'t_total': 's'}, source='x')
    fields.update(kw)
    return Record(**fields)


def hyb(t: float, **kw) -> Record:
    return rec('masteronly', t, ranks=1, threads=2, **kw)


def twice(*runs: Record) -> list[Record]:
    """Two samples of each run: one sample per side measures no spread, and its
    call is INCONCLUSIVE (stats.speedup_call)."""
    return [r for r in runs for _ in range(2)]


def test_speedup_is_tmpi_over_thybrid_with_medians():
    (v,) = verdicts([rec('mpi', 2.0), rec('mpi', 2.0), rec('mpi', 2.0),
                     hyb(1.0), hyb(1.0), hyb(1.0)])
    assert v.speedup == pytest.approx(2.0)
    assert (v.n_mpi, v.n_hybrid) == (3, 3)
    assert v.verdict == 'WIN'
    assert (v.mpi_layout, v.hybrid_layout, v.hybrid_mode) == ('2x1', '1x2', 'masteronly')


def test_noisy_samples_make_a_difference_inconclusive():
    # 10% faster on median, but each side spreads by +-20%: the interval of the speedup
    # crosses the band's edge (stats.decide), so neither TIE nor WIN can be said
    found = verdicts([rec('mpi', 0.8), rec('mpi', 1.1), rec('mpi', 1.2),
                      hyb(0.8), hyb(1.0), hyb(1.2)])
    assert found[0].verdict == 'INCONCLUSIVE'
    assert found[0].noise > 0.3


def test_loss_when_hybrid_is_clearly_slower():
    assert verdicts(twice(rec('mpi', 1.0), hyb(1.5)))[0].verdict == 'LOSS'


def test_one_sample_per_side_is_no_call():
    """Review: one run per side made a call: a 1.5x slower hybrid run was a LOSS,
    on no measured spread (the 5% floor alone)."""
    (v,) = verdicts([rec('mpi', 1.0), hyb(1.5)])
    assert (v.verdict, v.n_mpi, v.n_hybrid) == ('INCONCLUSIVE', 1, 1)
    assert v.speedup == pytest.approx(1 / 1.5)


def test_pairs_only_within_stack_partition_size_and_cores():
    found = verdicts([rec('mpi', 1.0), hyb(1.0, stack='openmpi'), hyb(1.0, partition='tcp'),
                      hyb(1.0, size='32'), rec('masteronly', 1.0, ranks=1, threads=4)])
    assert found == []


def test_unusable_runs_never_enter_a_verdict():
    assert verdicts([rec('mpi', 1.0), hyb(0.1, verified=False)]) == []
    assert verdicts([rec('mpi', 1.0), hyb(0.1, oversubscribed=True)]) == []
    assert verdicts([rec('mpi', 1.0, result='fail'), hyb(0.1)]) == []


def test_sizes_sort_as_numbers():
    found = verdicts([rec('mpi', 1.0, size='12'), hyb(1.0, size='12'),
                      rec('mpi', 1.0, size='6'), hyb(1.0, size='6')])
    assert [v.size for v in found] == ['6', '12']


def test_md_phase_table_pairs_phases_of_mpi_and_hybrid():
    from hybridverdict.phases import phase_rows

    def md(mode, ranks, threads, force, movout):
        return rec(mode, 1.0, ranks=ranks, threads=threads, kernel='md',
                   values={'t_total': 1.0, 'phase_force': force, 'phase_movout': movout})

    rows = phase_rows([md('mpi', 2, 1, 1.0, 0.2), md('mpi', 2, 1, 1.2, 0.2),
                       md('masteronly', 1, 2, 1.1, 0.5)])
    by_phase = {r.phase: r for r in rows}
    assert set(by_phase) == {'force', 'movout'}
    assert by_phase['force'].t_mpi == pytest.approx(1.1)
    assert by_phase['movout'].ratio == pytest.approx(2.5)
    assert by_phase['force'].samples == '2/1'


# ---- per node count, every reference, the one rule, history ------------------------

def test_node_counts_are_never_pooled():
    # hybrid wins by 2x on 1 node and loses by 2x on 4 nodes: pooled, they would cancel
    found = verdicts(twice(rec('mpi', 2.0, nodes=1), hyb(1.0, nodes=1),
                           rec('mpi', 1.0, nodes=4), hyb(2.0, nodes=4)))
    assert [(v.nodes, v.verdict, v.speedup) for v in found] == [(1, 'WIN', 2.0),
                                                                (4, 'LOSS', 0.5)]
    assert verdicts([rec('mpi', 1.0, nodes=1), hyb(1.0, nodes=2)]) == []


def test_builds_and_libraries_are_never_pooled():
    assert verdicts([rec('mpi', 1.0, build_spec='cmake Debug mpich'),
                     hyb(1.0, build_spec='cmake Release mpich')]) == []
    assert verdicts([rec('mpi', 1.0, mpi_library='MPICH 4.1'), hyb(1.0)]) == []


def test_every_pure_mpi_layout_is_a_reference_and_named():
    found = verdicts([rec('mpi', 2.0, ranks=2, threads=1), rec('mpi', 4.0, ranks=1, threads=2),
                      hyb(1.0)])
    assert sorted((v.mpi_layout, v.speedup) for v in found) == [('1x2', 4.0), ('2x1', 2.0)]


def at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_interleaved_rounds_decide_where_back_to_back_samples_cannot():
    # hybrid 3% faster in every round while the machine drifts by 20%
    drift = [1.0, 1.04, 1.08, 1.12, 1.16, 1.2]
    rounds = ([rec('mpi', 1.03 * d, time=at(2 * i)) for i, d in enumerate(drift)]
              + [hyb(d, time=at(2 * i + 1)) for i, d in enumerate(drift)])
    (v,) = verdicts(rounds)
    assert v.basis == 'paired rounds'
    assert v.speedup == pytest.approx(1.03) and v.verdict == 'TIE'
    # the same samples, all MPI runs first: the drift is not seen, no call can be made
    blocks = ([rec('mpi', 1.03 * d, time=at(i)) for i, d in enumerate(drift)]
              + [hyb(d, time=at(10 + i)) for i, d in enumerate(drift)])
    (b,) = verdicts(blocks)
    assert b.basis == 'back-to-back samples' and b.verdict == 'INCONCLUSIVE'


def test_confirmed_when_the_last_three_sessions_agree():
    day = dt.timedelta(days=1)
    nights = [twice(rec('mpi', 1.0, time=T0 + night * day), hyb(t_hyb, time=T0 + night * day))
              for night, t_hyb in enumerate((1.0, 0.5, 0.5, 0.5))]   # TIE, then WIN 3 times
    history, last = [r for n in nights for r in n], nights[-1]
    (v,) = verdicts(last, history=history)
    assert v.verdict == 'WIN' and v.confirmed and v.sessions == 'WIN WIN WIN'
    (v2,) = verdicts(last, history=nights[1] + nights[2] + last)   # TIE dropped: 3 nights
    assert v2.confirmed
    (v3,) = verdicts(last, history=nights[0] + nights[2] + last)   # TIE, WIN, WIN
    assert not v3.confirmed and v3.sessions == 'TIE WIN WIN'


def test_each_system_confirms_by_its_own_last_three_sessions():
    """Two systems' nightlies in one history (one store or var dir): their sessions
    alternate, and each pair is confirmed by its own system's last three sessions."""
    history = []
    for night in range(3):
        for system, hours in (('alpha', 0), ('beta', 2)):
            when = T0 + dt.timedelta(days=night, hours=hours)
            history += twice(rec('mpi', 1.0, time=when, system=system, session=f'{system}-{night}'),
                             hyb(0.5, time=when, system=system, session=f'{system}-{night}'))
    found = verdicts(history[-8:], history=history)
    assert [(v.system, v.confirmed, v.sessions) for v in found] == [
        ('alpha', True, 'WIN WIN WIN'), ('beta', True, 'WIN WIN WIN')]
    # a session of alpha's that did not run the pair still counts against it
    other = T0 + dt.timedelta(days=3)
    extra = [dataclasses.replace(rec('mpi', 1.0, time=other, system='alpha',
                                     session='alpha-3'), kernel='md')]
    (a, b) = verdicts(history[-8:], history=history + extra)
    assert (a.system, a.confirmed, a.sessions) == ('alpha', False, 'WIN WIN')
    assert (b.system, b.confirmed) == ('beta', True)


def test_crossover_per_size_with_its_sentence():
    from hybridverdict.verdict import crossovers
    runs = []
    for nodes, t_hyb in ((1, 0.5), (2, 1.0), (4, 1.5), (8, 1.6)):
        runs += twice(rec('mpi', 1.0, nodes=nodes), hyb(t_hyb, nodes=nodes))
    (c,) = crossovers(verdicts(runs))
    assert c.nodes == (1, 2, 4, 8) and c.calls == ('WIN', 'TIE', 'LOSS', 'LOSS')
    assert (c.wins_from, c.loses_from) == (None, 4)
    assert 'hybrid loses from 4 nodes on' in c.sentence
    assert 'WIN at 1, TIE at 2' in c.sentence
    (w,) = crossovers(verdicts(twice(*[rec('mpi', 1.0, nodes=n) for n in (1, 2)],
                                     *[hyb(0.5, nodes=n) for n in (1, 2)])))
    assert 'hybrid wins at every node count measured (1-2 nodes' in w.sentence


# ---- the ring, judged per message size (issue 25) ------------------------------------

SWEEP = '8,65536,1048576'


def ring(mode: str, per_message: dict[int, float] | None, t_total: float = 1.0,
         **kw) -> Record:
    """A ring run of the sweep: t_total (its largest size's time) and, unless
    `per_message` is None (a perflog written before they existed), t_msg_<bytes>."""
    values = {'t_total': t_total, 'bw_k1_8': 5.0, 'bw_k2_8': 0.0}
    values.update({f't_msg_{n}': t for n, t in (per_message or {}).items()})
    layout = {'ranks': 2, 'threads': 1} if mode == 'mpi' else {'ranks': 1, 'threads': 2}
    return rec(mode, 0.0, kernel='ring', size=SWEEP, **layout,
               **{'values': values, 'units': dict.fromkeys(values, 's'), **kw})


def test_the_ring_is_judged_per_message_size():
    # latency-bound 8 B: hybrid (one message k times larger) wins; bandwidth-bound
    # sizes: it loses at 1 MiB and ties at 64 KiB.  The merged t_total says nothing of it.
    runs = []
    for i, j in enumerate((1.0, 1.004, 0.997, 1.002, 0.999)):   # rounds, mpi then hybrid
        t = T0 + dt.timedelta(seconds=10 * i)
        runs += [ring('mpi', {8: 2e-6 * j, 65536: 1e-4 * j, 1048576: 1e-3 * j}, time=t),
                 ring('masteronly', {8: 1e-6, 65536: 1.01e-4, 1048576: 2e-3},
                      time=t + dt.timedelta(seconds=1))]
    found = verdicts(runs)
    assert [(v.size, v.verdict) for v in found] == [('8B', 'WIN'), ('64KiB', 'TIE'),
                                                    ('1MiB', 'LOSS')]
    assert [v.variable for v in found] == ['t_msg_8', 't_msg_65536', 't_msg_1048576']
    assert found[0].speedup == pytest.approx(2.0, rel=0.01)
    assert found[0].t_mpi == pytest.approx(2e-6, rel=0.01)
    assert all(v.kernel == 'ring' and (v.n_mpi, v.n_hybrid) == (5, 5) for v in found)
    assert SWEEP not in {v.size for v in found}          # no merged verdict beside them


def test_old_ring_perflogs_keep_their_one_verdict_by_t_total():
    old = twice(ring('mpi', None, t_total=1.0), ring('masteronly', None, t_total=2.0))
    (v,) = verdicts(old)
    assert (v.size, v.variable, v.verdict) == (SWEEP, 't_total', 'LOSS')
    # spmv and the other kernels are judged by t_total at their own size, as before
    (s,) = verdicts(twice(rec('mpi', 1.0), hyb(0.5)))
    assert (s.size, s.variable, s.verdict) == ('16', 't_total', 'WIN')


def test_a_ring_size_without_a_time_gets_no_verdict_and_unjudged_pairs_are_per_size():
    from hybridverdict.verdict import unjudged
    runs = [ring('mpi', {8: 2e-6, 1048576: 0.0}), ring('masteronly', {8: 1e-6, 1048576: 1e-3})]
    assert [v.size for v in verdicts(runs)] == ['8B']     # 0: the size was not measured
    # a variable named like one but not of a size in bytes is no message size
    odd = [ring('mpi', {8: 2e-6}), ring('masteronly', {8: 1e-6})]
    for r in odd:
        r.values['t_msg_max'] = r.values['t_msg_8']
    assert [v.size for v in verdicts(odd)] == ['8B']
    over = [ring('mpi', {8: 2e-6, 1048576: 1e-3}),
            ring('masteronly', {8: 1e-6, 1048576: 1e-3}, oversubscribed=True)]
    assert verdicts(over) == []
    assert [u.size for u in unjudged(over)] == ['8B', '1MiB']


def test_a_side_whose_failed_runs_measured_nothing_is_an_unjudged_pair():
    """A failed run logs its times as None (harnesslib.base.PerfSchema): its pair is
    listed without a verdict, at every size the other side measured."""
    from hybridverdict.verdict import unjudged
    (u,) = unjudged([rec('mpi', 1.0), hyb(1.0, result='fail', values={})])
    assert (u.size, u.why) == ('16', 'masteronly 1x2: 1 failed; mpi 2x1: 1 usable')
    runs = [ring('mpi', {8: 2e-6, 1048576: 1e-3}),
            ring('masteronly', None, result='fail', values={})]
    assert [(u.size, u.why) for u in unjudged(runs)] == [
        ('8B', 'masteronly 1x2: 1 failed; mpi 2x1: 1 usable'),
        ('1MiB', 'masteronly 1x2: 1 failed; mpi 2x1: 1 usable')]
    (both,) = unjudged([rec('mpi', 1.0, result='fail', values={}),
                        hyb(1.0, result='fail', values={})])
    assert both.why == 'masteronly 1x2: 1 failed; mpi 2x1: 1 failed'


def test_message_sizes_sort_by_their_bytes():
    from hybridverdict.perflog import size_key
    assert sorted(['1MiB', '64KiB', '8B', '4KiB'], key=size_key) == ['8B', '4KiB', '64KiB',
                                                                    '1MiB']
    assert sorted(['12', '6'], key=size_key) == ['6', '12']


def test_sessions_are_the_named_ones_else_split_at_gaps():
    # one rule (changes.sessions) for the verdicts, the bands and the change points
    from hybridverdict.changes import record_sessions
    minute = dt.timedelta(minutes=1)
    unnamed = [rec('mpi', 1.0, time=T0 + m * minute) for m in (0, 5, 10, 1440, 1443, 2880)]
    assert record_sessions(unnamed) == [0, 0, 0, 1, 1, 2]
    # named: two sessions 10 minutes apart are two; one named session over a
    # 2-hour gap (sequential batches) is one
    named = [rec('mpi', 1.0, time=T0 + m * minute, session=s)
             for m, s in ((0, 'a'), (10, 'b'), (20, 'c'), (140, 'c'))]
    assert record_sessions(named) == [0, 1, 2, 2]


def test_three_named_sessions_in_one_hour_confirm_a_call():
    history = []
    for i, (name, t_hyb) in enumerate((('n1', 1.0), ('n2', 0.5), ('n3', 0.5), ('n4', 0.5))):
        when = T0 + dt.timedelta(minutes=10 * i)
        history += twice(rec('mpi', 1.0, time=when, session=name),
                         hyb(t_hyb, time=when, session=name))
    (v,) = verdicts(history[-4:], history=history)
    assert v.confirmed and v.sessions == 'WIN WIN WIN'
    # the same runs without names are one session (all within the gap): one call
    plain = [dataclasses.replace(r, session='') for r in history]
    (p,) = verdicts(plain[-4:], history=plain)
    assert not p.confirmed and len(p.sessions.split()) == 1


# -- what the report's note and docs say of the interval and the band ---------------

def test_the_verdict_note_and_docs_name_the_level_and_band_the_code_uses():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.01, 0.99, 1.03]
    back_to_back = stats.compare(a, [x * 0.8 for x in a], floor=0.0)
    built = stats.ratio_interval(a, [x * 0.8 for x in a], stats.DECISION_CONFIDENCE)
    assert back_to_back.basis == stats.BACK_TO_BACK and back_to_back.interval == built
    level = stats.percent(stats.DECISION_CONFIDENCE)
    assert level == '97.5%'
    assert f'the ratio of the medians with its {level} interval' in render.VERDICT_NOTE
    assert f'with its {level} paired Student t interval' in render.VERDICT_NOTE
    # every level as stats.percent writes it (the report's other sections do)
    side = stats.percent(math.sqrt(stats.DECISION_CONFIDENCE))
    assert side == '98.7%'
    assert f"each side's median at {side}: order statistics" in render.VERDICT_NOTE
    assert not re.search(r'[0-9]\.[0-9]{2}%', render.VERDICT_NOTE)
    assert '95%' not in render.VERDICT_NOTE
    assert stats.band(0.05) == pytest.approx((1 / 1.05, 1.05))
    assert 'the band [1 / (1 + floor), 1 + floor]' in render.VERDICT_NOTE
    page = Path(__file__).resolve().parent.parent / 'docs/pages/report.md'
    text = ' '.join(page.read_text(encoding='utf-8').split())
    assert ('TIE where the interval lies inside [1 / (1 + floor), 1 + floor] ([0.952, 1.05] '
            'at the default floor of 5%)') in text
    assert "the ratio of the medians with its 97.5% interval (each side's median at " \
        'sqrt(97.5%))' in text
    assert '1 +- floor' not in text


# -- the cap of rounds counts the rounds run (sequential rounds) -----------------

def test_a_pair_stops_at_the_cap_of_rounds_run_when_one_side_failed_its_later_rounds():
    """The hybrid side passed rounds 0-2 and failed 3-19: 3 rounds paired, 20 run."""
    def named(r: Record, k: int) -> Record:
        layout = f'{r.mode}_{r.ranks}x{r.threads}'
        return dataclasses.replace(r, name=f'SpmvCheck %layout={layout} %problem=16 '
                                           f'%sample={k}', time=T0 + dt.timedelta(seconds=k))
    runs = [named(rec('mpi', 1.0), k) for k in range(20)]
    runs += [named(hyb((1.0, 0.7, 1.3)[k % 3], result='pass' if k < 3 else 'fail'), k)
             for k in range(20)]
    (v,) = verdicts(runs, max_rounds=15)
    assert (v.verdict, v.rounds, v.stopped) == ('INCONCLUSIVE', 3, 'cap')
    (v,) = verdicts(runs, max_rounds=25)
    assert v.stopped == 'budget'


def _named(r: Record, k: int) -> Record:
    layout = f'{r.mode}_{r.ranks}x{r.threads}'
    return dataclasses.replace(r, name=f'SpmvCheck %layout={layout} %problem=16 %sample={k}',
                               time=T0 + dt.timedelta(seconds=k), source=f'x:{k}')


def _noisy_rounds(rounds: int, failed=lambda k: False) -> list[Record]:
    """spmv 2x1 against masteronly 1x2 in `rounds` named rounds, too noisy to
    decide; failed(k): round k failed on both sides."""
    def result(k: int) -> str:
        return 'fail' if failed(k) else 'pass'
    return ([_named(rec('mpi', 1.0, result=result(k)), k) for k in range(rounds)]
            + [_named(hyb((1.0, 0.7, 1.3)[k % 3], result=result(k)), k)
               for k in range(rounds)])


def test_rounds_failed_on_both_sides_count_toward_the_cap():
    """Rounds 3-15 failed on both sides: 3 paired, 16 run (as the sequential
    rounds' driver counts them): stopped at the cap, not by the budget."""
    (v,) = verdicts(_noisy_rounds(16, failed=lambda k: k >= 3), max_rounds=15)
    assert (v.verdict, v.rounds, v.stopped) == ('INCONCLUSIVE', 3, 'cap')
    (v,) = verdicts(_noisy_rounds(16, failed=lambda k: k >= 3), max_rounds=17)
    assert v.stopped == 'budget'


def test_the_cap_is_harness_max_rounds_by_default(monkeypatch):
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', '5')
    (v,) = verdicts(_noisy_rounds(5))
    assert (v.verdict, v.rounds, v.stopped) == ('INCONCLUSIVE', 5, 'cap')
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', '6')
    assert verdicts(_noisy_rounds(5))[0].stopped == 'budget'
    monkeypatch.delenv('HARNESS_MAX_ROUNDS')
    assert verdicts(_noisy_rounds(15))[0].stopped == 'cap'
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', 'many')
    with pytest.raises(ValueError, match="HARNESS_MAX_ROUNDS must be an integer from 1 to "
                                         "100, got 'many'"):
        verdicts(_noisy_rounds(5))


def _mispaired(named: bool = True) -> list[Record]:
    """3 planned rounds in alternating order, the machine 3x slower from round 1
    (hybrid 2x faster in every round); pure MPI failed round 1 and hybrid round
    2: passed runs left mpi {0, 2}, hybrid {0, 1}.  named=False: the same runs
    without round numbers (older records)."""
    def at(k: int, mode: str, t: float, result: str) -> Record:
        r = (rec('mpi', t, result=result) if mode == 'mpi'
             else hyb(t, result=result))
        r = _named(r, k)
        second = 2 * k + (mode == 'mpi') if k % 2 == 0 else 2 * k + (mode != 'mpi')
        return dataclasses.replace(r, time=T0 + dt.timedelta(seconds=second),
                                   name=r.name if named else '')
    runs = []
    for k, scale in enumerate((1.0, 3.0, 3.0)):
        runs.append(at(k, 'mpi', scale, 'fail' if k == 1 else 'pass'))
        runs.append(at(k, 'hybrid', scale / 2, 'fail' if k == 2 else 'pass'))
    return runs


def test_rounds_of_different_numbers_are_never_paired():
    """Rounds {0, 2} of pure MPI against {0, 1} of hybrid share one round: the
    samples are judged unpaired, not round 2's MPI run against round 1's hybrid."""
    (v,) = verdicts(_mispaired())
    assert (v.basis, v.verdict, v.gap) == ('back-to-back samples', 'INCONCLUSIVE', None)
    assert (round(v.speedup, 3), round(v.low, 2), round(v.high, 2)) == (2.0, 0.63, 6.3)


def test_runs_without_round_numbers_are_paired_by_time_as_before():
    (v,) = verdicts(_mispaired(named=False))
    assert (v.basis, v.verdict, v.rounds) == ('paired rounds', 'WIN', 2)


def test_the_rounds_both_sides_have_are_paired_by_number():
    """Rounds {0, 1, 3} against {0, 1, 2}: rounds 0 and 1 paired."""
    runs = [_named(rec('mpi', 1.0 + k), k) for k in (0, 1, 3)]
    runs += [_named(hyb((1.0 + k) / 2), k) for k in (0, 1, 2)]
    (v,) = verdicts(runs)
    assert (v.basis, v.rounds, v.verdict) == ('paired rounds', 2, 'WIN')
    assert v.speedup == pytest.approx(2.0)


# -- HybridVerdict: an INCONCLUSIVE call against a `verdict` reference -----------

class _RefEntry:
    """ReFrame's ``reference[test]`` of a $ref file: the test's entry by its $index."""

    index = ('$partition', '$environ', 'ref_variant')

    def __init__(self, test: object, entry: dict[str, tuple]) -> None:
        self.test, self.entry = test, entry

    def __getitem__(self, key: object) -> dict[str, tuple]:
        if key is self.test:
            return self.entry
        raise KeyError(key)


def test_an_inconclusive_hybrid_verdict_is_never_judged_against_its_verdict_reference():
    """A baseline of WIN nights writes verdict [1.0, -0.05, None]: an INCONCLUSIVE
    night logs code 0, as a TIE does, and failed that band; a decided TIE or
    LOSS still does."""
    import logging
    from types import SimpleNamespace

    import reframe.utility.sanity as sn
    from conftest import REPO
    from harnesscore.bands import FAIL, PASS, judge_band
    from reframe.utility import ScopedDict, import_module_from_file
    kernels = import_module_from_file(str(REPO / 'checks' / 'kernels.py'))
    unit = 'win=1 tie=0 loss=-1'
    entry = {'verdict': (1.0, -0.05, None, unit), 'speedup': (1.2, -0.1, None, 'x')}

    def references(call: str | None, scoped: bool = False) -> dict[str, tuple]:
        """The check's references for this run after its hooks (from a $ref file,
        else scoped: a test's own), as ReFrame resolves them."""
        cls = kernels.HybridVerdict
        check = SimpleNamespace(display_name='HybridVerdict %pair=spmv/16/masteronly_1x2',
                                logger=logging.getLogger('test'),
                                current_partition=SimpleNamespace(fullname='local:shm'),
                                perf_variables=dict.fromkeys(entry))
        check._references = lambda: cls._references(check)
        if call is not None:            # None: a dry run, never judged
            check._verdict = call
        check.reference = (ScopedDict({'local:shm': dict(entry)}) if scoped
                           else _RefEntry(check, dict(entry)))
        cls.leave_an_undecided_call_unjudged(check)
        refs = check.reference
        if isinstance(refs, _RefEntry):
            return refs[check]
        scoped_refs = refs if isinstance(refs, ScopedDict) else ScopedDict(refs)
        return {var: scoped_refs[f'local:shm:{var}'] for var in entry}

    def judged(call: str) -> str | None:
        """The band rule's state of the call's code (None: not judged)."""
        low, high = references(call)['verdict'][1:3]
        if low is None and high is None:
            return None
        return judge_band('verdict', [kernels.VERDICT_CODE[call]], 1.0, low, high).state

    refs = references('INCONCLUSIVE')
    assert refs == {'verdict': (1.0, None, None, unit), 'speedup': entry['speedup']}
    assert judged('INCONCLUSIVE') is None
    assert sn.evaluate(sn.assert_reference(kernels.VERDICT_CODE['INCONCLUSIVE'], *refs[
        'verdict'][:3]))                # ReFrame's own check passes it
    assert (judged('WIN'), judged('TIE'), judged('LOSS')) == (PASS, FAIL, FAIL)
    assert references('TIE') == references(None) == entry
    assert references('INCONCLUSIVE', scoped=True) == refs
    assert references('LOSS', scoped=True) == entry


@pytest.mark.parametrize('floor', [float('nan'), 1.0, 10.0, -0.5])
def test_a_hybrid_verdict_noise_floor_out_of_range_is_refused(floor):
    """-S HybridVerdict.noise_floor=nan made every call INCONCLUSIVE, never judged
    against its reference: a clear LOSS (speedup 0.59, interval 0.59..0.59)
    passed; a floor of 1 or more called a 2x loss a TIE.  Now refused at setup,
    naming it, as the report's --noise-floor outside [0, 1)."""
    from conftest import REPO
    from harnesscore.stats import compare, speedup_call
    from reframe.utility import import_module_from_file
    kernels = import_module_from_file(str(REPO / 'checks' / 'kernels.py'))
    bound = kernels.HybridVerdict.at_least['noise_floor']
    check = type('HybridVerdict', (), {'noise_floor': floor})()
    with pytest.raises(ValueError, match=r'HybridVerdict\.noise_floor must be a fraction '
                                         r'in \[0, 1\)'):
        bound.check(check, 'noise_floor')
    for good in (0.0, 0.05, 0.99):
        bound.check(type('HybridVerdict', (), {'noise_floor': good})(), 'noise_floor')
    assert speedup_call(compare([1.0, 1.01, 0.99], [2.0, 2.02, 1.98]).interval) == 'LOSS'


# ---- scaling of two systems or builds of one stack: each named (Apart) ----------------

def _across(system: str = 'local', build: str = 'cmake Release mpich',
            library: str = 'MPICH Version: 4.0.2', t_hyb: float = 0.5) -> list[Record]:
    kw = dict(system=system, build_spec=build, mpi_library=library)
    return [r for n in (1, 2) for r in twice(rec('mpi', 1.0, nodes=n, **kw),
                                             hyb(t_hyb, nodes=n, **kw))]


def _scaling_labels(monkeypatch, found) -> list[str]:
    """The line labels plots.scaling draws for the verdicts `found`."""
    from types import SimpleNamespace

    import matplotlib.axes
    from hybridverdict import plots
    seen: list[str] = []
    draw = matplotlib.axes.Axes.plot

    def spy(self, *args, **kw):
        seen.append(kw.get('label'))
        return draw(self, *args, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, 'plot', spy)
    plots.scaling(SimpleNamespace(verdicts=found))
    return [label for label in seen if label]


def test_crossovers_of_two_systems_or_builds_name_theirs(monkeypatch):
    """Audit: a Crossover had no build or library: the scaling figure drew two builds'
    lines with one label ('... mpich@shm'), and its table and sentences named neither
    the build nor, of two systems, the system."""
    from hybridverdict.verdict import CROSSOVER_COLUMNS, Crossover, across_nodes, crossover_rows
    where = slice(CROSSOVER_COLUMNS.index('stack'), CROSSOVER_COLUMNS.index('partition') + 1)
    builds = verdicts(_across() + _across(build='cmake Debug mpich', t_hyb=2.0))
    cross = across_nodes(builds)
    assert [(c.build, c.calls) for c in cross] == [('cmake Debug mpich', ('LOSS', 'LOSS')),
                                                   ('cmake Release mpich', ('WIN', 'WIN'))]
    assert [r[where] for r in crossover_rows(cross)] == [['mpich (cmake Debug mpich)', 'shm'],
                                                         ['mpich (cmake Release mpich)', 'shm']]
    assert '(mpich (cmake Debug mpich)@shm): hybrid loses' in cross[0].sentence
    assert _scaling_labels(monkeypatch, builds) == [
        'size 16 masteronly 1x2 vs 2x1 mpich (cmake Debug mpich)@shm',
        'size 16 masteronly 1x2 vs 2x1 mpich (cmake Release mpich)@shm']
    libs = across_nodes(verdicts(_across() + _across(library='MPICH 4.1', t_hyb=2.0)))
    assert [r[where][0] for r in crossover_rows(libs)] == [
        'mpich (MPICH 4.1)', 'mpich (MPICH Version: 4.0.2)']
    systems = across_nodes(verdicts(_across('alpha') + _across('beta', t_hyb=2.0)))
    assert [r[where] for r in crossover_rows(systems)] == [['mpich', 'alpha:shm'],
                                                           ['mpich', 'beta:shm']]
    assert '(mpich@beta:shm): hybrid loses' in systems[1].sentence
    # one system and one build: as before (a plain Crossover, its JSON fields unchanged)
    (one,) = across_nodes(verdicts(_across()))
    assert type(one) is Crossover
    assert crossover_rows([one])[0][where] == ['mpich', 'shm']
    assert '(mpich@shm): hybrid wins' in one.sentence


# ---- mutation audit: confirmation, the ring's unmeasured sizes, functional verdicts ----

def test_a_call_each_session_made_alone_confirms_only_the_report_s_own_call():
    """Three sessions each a clear WIN alone (1.08, 2.0, 1.08): pooled, the
    report's call is INCONCLUSIVE, which no session made: not confirmed."""
    history = []
    for day, speedup in enumerate((1.08, 2.0, 1.08)):
        for i, jitter in enumerate((1.0, 1.004, 0.997)):
            when = T0 + dt.timedelta(days=day, minutes=2 * i)
            history += [rec('mpi', speedup * jitter, time=when, session=f's{day}'),
                        hyb(1.0, time=when + dt.timedelta(minutes=1), session=f's{day}')]
    (v,) = verdicts(history, history=history)
    assert (v.verdict, v.sessions) == ('INCONCLUSIVE', 'WIN WIN WIN')
    assert not v.confirmed
    (alone,) = verdicts(history[-6:], history=history)     # the last session: WIN
    assert alone.verdict == 'WIN' and alone.confirmed


def test_a_ring_size_one_run_did_not_time_is_judged_on_the_other_runs():
    """A hybrid run's t_msg_8 of 0 (below the timer's resolution): that run is
    left out of the 8 B verdict, never a failed report, and counts at 1 KiB."""
    runs = []
    for i in range(3):
        t = T0 + dt.timedelta(seconds=10 * i)
        runs += [ring('mpi', {8: 1.0, 1024: 2.0}, time=t),
                 ring('masteronly', {8: 0.0 if i == 0 else 1.0, 1024: 2.0},
                      time=t + dt.timedelta(seconds=1))]
    found = verdicts(runs)
    assert [(v.size, v.n_mpi, v.n_hybrid) for v in found] == [('8B', 3, 2), ('1KiB', 3, 3)]
    assert found[0].t_hybrid == pytest.approx(1.0) and found[0].verdict == 'TIE'


def test_functional_verdicts_take_the_clean_runs_beside_the_oversubscribed_ones():
    """Only the hybrid side ran oversubscribed: the pair gets a functional
    verdict from both sides, the clean pure-MPI runs included."""
    from hybridverdict.verdict import functional
    runs = ([rec('mpi', 2.0, time=at(i)) for i in range(3)]
            + [hyb(1.0, oversubscribed=True, time=at(i)) for i in range(3)])
    assert verdicts(runs) == []
    (v,) = functional(runs)
    assert (v.verdict, v.n_mpi, v.n_hybrid, v.oversubscribed) == ('WIN', 3, 3, True)


def test_a_pair_with_a_verdict_gets_no_functional_verdict_too():
    """One pure-MPI run of four was oversubscribed: verdicts() judges the pair
    on the other three; functional() must not judge it again with that run."""
    from hybridverdict.verdict import functional
    runs = ([rec('mpi', 2.0, oversubscribed=i == 3, time=at(i)) for i in range(4)]
            + [hyb(1.0, time=at(i)) for i in range(3)])
    (v,) = verdicts(runs)
    assert (v.verdict, v.n_mpi) == ('WIN', 3)
    assert functional(runs) == []
    assert functional(runs, judged=[]) != []     # judged by the same rule otherwise


def test_rounds_logged_out_of_order_are_never_paired_across_numbers():
    """Hybrid's round 1 logged before its round 0 (runs completing out of order):
    the i-th runs by time are rounds of different numbers, 0 against 1 and 1
    against 0.  Paired by number the rounds overlap in time (not side by side):
    the samples are judged unpaired, never MPI's round 0 against hybrid's round 1
    (that pairing gave three ratios of exactly 2, a WIN on paired rounds)."""
    def at(r: Record, k: int, second: int) -> Record:
        return dataclasses.replace(_named(r, k), time=T0 + dt.timedelta(seconds=second),
                                   source=f'x:{second}')
    runs = [at(rec('mpi', 2.0), 0, 0), at(hyb(1.0), 1, 1), at(rec('mpi', 4.0), 1, 2),
            at(hyb(2.0), 0, 3), at(rec('mpi', 2.0), 2, 4), at(hyb(1.0), 2, 5)]
    (v,) = verdicts(runs)
    assert (v.basis, v.verdict) == ('back-to-back samples', 'INCONCLUSIVE')
    # the same rounds logged in round order are paired by number
    runs = [at(rec('mpi', 2.0), 0, 0), at(hyb(2.0), 0, 1), at(rec('mpi', 4.0), 1, 2),
            at(hyb(1.0), 1, 3), at(rec('mpi', 2.0), 2, 4), at(hyb(1.0), 2, 5)]
    (v,) = verdicts(runs)
    assert (v.basis, v.rounds) == ('paired rounds', 3)
    assert v.speedup == pytest.approx((1.0 * 4.0 * 2.0) ** (1 / 3))
