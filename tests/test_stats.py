"""The one decision rule (harnesscore.stats): exact known cases."""

from __future__ import annotations

import datetime as dt
import math
import statistics
from pathlib import Path

import pytest
from harnesscore import bands, stats

STATISTICS_PAGE = Path(__file__).resolve().parent.parent / 'docs/pages/statistics.md'

#: 95% distribution-free confidence interval for the median: ranks (k, n+1-k) of the
#: order statistics, as tabulated (e.g. Conover, Practical Nonparametric Statistics,
#: the sign-test interval; also Hollander & Wolfe)
TABLE_95 = {6: (1, 6), 7: (1, 7), 8: (1, 8), 9: (2, 8), 10: (2, 9), 11: (2, 10),
            12: (3, 10), 13: (3, 11), 14: (3, 12), 15: (4, 12), 16: (4, 13), 17: (5, 13),
            18: (5, 14), 19: (5, 15), 20: (6, 15)}


@pytest.mark.parametrize('n', sorted(TABLE_95))
def test_order_statistic_ranks_at_95_percent(n):
    assert stats.median_ci_ranks(n) == TABLE_95[n]
    k = TABLE_95[n][0]
    assert stats.coverage(n, k) >= 0.95
    if k + 1 <= (n + 1) // 2:
        assert stats.coverage(n, k + 1) < 0.95     # k is the largest rank that covers


def test_too_few_values_for_an_order_statistic_interval():
    for n in range(1, 6):
        assert stats.median_ci_ranks(n) is None
    # (1, 5) covers 1 - 2 / 2^5 = 93.75% < 95%
    assert stats.coverage(5, 1) == pytest.approx(0.9375)
    assert stats.median_ci_ranks(5, 0.90) == (1, 5)


def test_exact_coverages():
    assert stats.coverage(6, 1) == 1 - 2 / 64
    assert stats.coverage(10, 2) == 1 - 2 * 11 / 1024
    assert stats.binomial_cdf(1, 4) == 5 / 16
    assert stats.median_ci_ranks(10, 0.99) == (1, 10)


def test_median_interval_uses_the_order_statistics():
    xs = [5, 3, 9, 1, 7, 2, 8, 4, 6, 10]          # 1..10 shuffled
    iv = stats.median_interval(xs)
    assert (iv.median, iv.low, iv.high) == (5.5, 2, 9)
    assert iv.method == 'order statistics' and iv.n == 10
    assert iv.confidence == pytest.approx(0.978515625)


def test_small_samples_bootstrap_seeded_and_honest_about_coverage():
    a = stats.median_interval([1.0, 1.2, 0.9])
    b = stats.median_interval([1.0, 1.2, 0.9])
    assert a == b                                  # fixed seed: same interval
    assert a.method == 'bootstrap' and a.low >= 0.9 and a.high <= 1.2
    assert a.confidence == pytest.approx(0.75)     # [min, max] of 3 values covers 75% only
    single = stats.median_interval([2.0])
    assert (single.low, single.high, single.confidence) == (2.0, 2.0, 0.0)


def test_decision_against_a_band():
    inside = stats.Interval(1.0, 0.98, 1.03, 8, 0.99, 'order statistics')
    assert stats.decide(inside, 0.95, 1.05).state == stats.PASS
    above = stats.Interval(1.2, 1.1, 1.3, 8, 0.99, 'x')
    d = stats.decide(above, 0.95, 1.05)
    assert (d.state, d.side) == (stats.FAIL, 'above')
    below = stats.Interval(0.8, 0.7, 0.9, 8, 0.99, 'x')
    assert stats.decide(below, 0.95, 1.05).side == 'below'
    across = stats.Interval(1.04, 1.0, 1.1, 8, 0.99, 'x')
    d = stats.decide(across, 0.95, 1.05)
    assert (d.state, d.side) == (stats.INCONCLUSIVE, 'across')
    assert d.spread == pytest.approx(1.1 / 1.04 - 1)
    # open ends: a floor only (md against LAMMPS at least 0.9)
    assert stats.decide(below, 0.95, None).state == stats.FAIL
    assert stats.decide(below, 0.9, None).state == stats.INCONCLUSIVE   # touches the edge
    assert stats.decide(inside, 0.9, None).state == stats.PASS
    with pytest.raises(stats.StatsError):
        stats.decide(inside, 1.1, 1.0)


def test_a_speedup_is_called_against_the_band_of_a_tie():
    """The verdict of a speedup's interval (the check and the report both use it):
    TIE inside [1 / (1 + floor), 1 + floor], WIN above, LOSS below, else INCONCLUSIVE."""
    def call(low: float, high: float, floor: float = 0.05) -> str:
        return stats.speedup_call(stats.Interval((low + high) / 2, low, high, 8, 0.99, 'x'),
                                  floor)
    assert call(0.97, 1.03) == stats.TIE
    assert call(1.06, 1.2) == stats.WIN
    assert call(0.8, 0.94) == stats.LOSS
    assert call(0.8, 0.96) == stats.INCONCLUSIVE     # 1 / 1.05 = 0.952 lies inside
    assert call(1.06, 1.2, floor=0.1) == stats.INCONCLUSIVE


def test_judge_ratios_for_a_fixed_band_assertion():
    # ring/OSU per-round ratios around 1.11 (issue 19): outside a 5% band
    ratios = [1.09, 1.12, 1.10, 1.13, 1.11, 1.08, 1.12, 1.11]
    assert stats.judge_ratios(ratios, 0.95, 1.05).state == stats.FAIL
    # spread 0.94-1.15 around 1.0: inconclusive, not failed
    ratios = [0.94, 1.15, 1.0, 0.97, 1.08, 1.02, 0.99, 1.05]
    assert stats.judge_ratios(ratios, 0.95, 1.05).state == stats.INCONCLUSIVE
    ratios = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]
    assert stats.judge_ratios(ratios, 0.95, 1.05).state == stats.PASS


T = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)


def at(minutes: float) -> dt.datetime:
    return T + dt.timedelta(minutes=minutes)


def test_interleaved_rounds_are_told_from_back_to_back_samples():
    assert stats.interleaved([at(0), at(2), at(4)], [at(1), at(3), at(5)])
    assert not stats.interleaved([at(0), at(1), at(2)], [at(3), at(4), at(5)])
    assert not stats.interleaved([at(0), at(0)], [at(0), at(0)])     # equal times: unknown
    assert not stats.interleaved([at(0)], [at(1)])                    # one round
    assert not stats.interleaved([at(0), at(2)], [at(1)])             # unequal counts


def test_drift_cancels_in_interleaved_rounds_but_not_back_to_back():
    # the machine slows down by 30% over the session; hybrid is 20% faster throughout
    drift = [1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3]
    mpi = [1.2 * d for d in drift]
    hyb = [1.0 * d for d in drift]
    rounds = stats.compare(mpi, hyb, [at(2 * i) for i in range(7)],
                           [at(2 * i + 1) for i in range(7)])
    assert rounds.basis == stats.PAIRED
    assert rounds.ratio == pytest.approx(1.2)
    assert rounds.noise == pytest.approx(0.0, abs=1e-12)
    # the same values measured back to back: the drift is not seen, the floor is added
    blocks = stats.compare(mpi, hyb, [at(i) for i in range(7)], [at(10 + i) for i in range(7)])
    assert blocks.basis == 'back-to-back samples'
    assert blocks.noise > 0.05
    assert 'widened by 5%' in blocks.interval.method


def test_compare_without_times_and_with_one_sample_each():
    c = stats.compare([2.0], [1.0], floor=0.05)
    assert c.ratio == 2.0
    assert (c.interval.low, c.interval.high) == (pytest.approx(2 / 1.05), pytest.approx(2.1))
    c0 = stats.compare([2.0], [1.0], floor=0.0)
    assert (c0.interval.low, c0.interval.high, c0.noise) == (2.0, 2.0, 0.0)


@pytest.mark.parametrize(('t_mpi', 't_hybrid', 'call'), [
    (2.0, 1.0, stats.WIN), (1.0, 2.0, stats.LOSS), (1.0, 1.0, stats.TIE)])
def test_one_sample_per_side_is_no_call(t_mpi, t_hybrid, call):
    """Review: one run per side made a call: its interval is the one ratio widened
    by the floor, and a 2x speedup was a WIN on no measured spread."""
    one = stats.compare([t_mpi], [t_hybrid])
    assert stats.speedup_call(one.interval) == stats.INCONCLUSIVE
    one_round = stats.paired_interval([t_mpi / t_hybrid])
    assert stats.speedup_call(one_round) == stats.INCONCLUSIVE
    # a second sample per side measures a spread (none here): the call is made
    two = stats.compare([t_mpi] * 2, [t_hybrid] * 2)
    assert stats.speedup_call(two.interval) == call


def test_ratio_interval_of_large_unpaired_lists_uses_order_statistics():
    iv = stats.ratio_interval([float(x) for x in range(1, 21)], [10.0] * 20)
    assert iv.method == 'order statistics of each side'
    assert iv.median == pytest.approx(1.05)
    assert iv.confidence >= 0.95
    assert iv.low < 1.05 < iv.high


def test_ratio_interval_ends_are_each_sides_order_statistics():
    # both sides vary: the low end is the numerator's low order statistic over the
    # denominator's high one, the high end the reverse (each side at sqrt(95%))
    num = [13.0, 11.0, 19.0, 12.0, 15.0, 10.0, 17.0, 14.0, 16.0, 18.0]
    den = [8.0, 5.0, 9.0, 4.0, 7.0, 3.0, 6.0, 2.0, 1.5, 8.5]
    assert stats.median_ci_ranks(10, math.sqrt(stats.CONFIDENCE)) == (2, 9)
    sa, sb = sorted(num), sorted(den)
    iv = stats.ratio_interval(num, den)
    assert iv.method == 'order statistics of each side'
    assert iv.median == pytest.approx(statistics.median(num) / statistics.median(den))
    assert iv.low == pytest.approx(sa[1] / sb[8]) == pytest.approx(11.0 / 8.5)
    assert iv.high == pytest.approx(sa[8] / sb[1]) == pytest.approx(18.0 / 2.0)
    assert iv.low < iv.median < iv.high
    assert iv.confidence == pytest.approx(stats.coverage(10, 2) ** 2)


def test_paired_rounds_are_paired_by_time_not_by_list_order():
    # the machine drifts; hybrid 20% faster throughout; rounds of 1 minute apart
    drift = [1.0, 1.3, 0.9, 1.2, 1.1, 0.8, 1.25]
    mpi = [1.2 * d * (1 + 0.01 * (i % 3)) for i, d in enumerate(drift)]
    hyb = [1.0 * d for d in drift]
    t_mpi, t_hyb = [at(2 * i) for i in range(7)], [at(2 * i + 1) for i in range(7)]
    in_order = stats.compare(mpi, hyb, t_mpi, t_hyb)
    assert in_order.basis == stats.PAIRED
    # the same records listed in another order on each side (as a perflog read
    # from several files gives them): the same rounds, the same result
    order_m, order_h = [3, 6, 0, 5, 1, 4, 2], [5, 2, 6, 0, 4, 1, 3]
    shuffled = stats.compare([mpi[i] for i in order_m], [hyb[i] for i in order_h],
                             [t_mpi[i] for i in order_m], [t_hyb[i] for i in order_h])
    assert shuffled.basis == stats.PAIRED
    assert shuffled.ratio == pytest.approx(in_order.ratio)
    assert (shuffled.interval.low, shuffled.interval.high) == (
        pytest.approx(in_order.interval.low), pytest.approx(in_order.interval.high))
    assert shuffled.gap == in_order.gap == 60.0


def test_the_gap_between_a_rounds_two_runs_is_positive_whichever_runs_first():
    mpi, hyb = [1.2, 1.25, 1.21], [1.0, 1.02, 1.01]
    mpi_first = stats.compare(mpi, hyb, [at(0), at(10), at(20)], [at(2), at(12), at(22)])
    hyb_first = stats.compare(mpi, hyb, [at(2), at(12), at(22)], [at(0), at(10), at(20)])
    assert mpi_first.basis == hyb_first.basis == stats.PAIRED
    assert mpi_first.gap == hyb_first.gap == 120.0


def test_bad_samples_are_refused():
    with pytest.raises(stats.StatsError, match='no samples'):
        stats.median_interval([])
    with pytest.raises(stats.StatsError, match='finite'):
        stats.median_interval([1.0, float('nan')])
    with pytest.raises(stats.StatsError, match='not paired'):
        stats.paired_ratios([1.0, 2.0], [1.0])
    with pytest.raises(stats.StatsError, match='positive'):
        stats.ratio_interval([1.0], [0.0])
    with pytest.raises(stats.StatsError, match='confidence'):
        stats.median_ci_ranks(10, 1.5)


def test_confirmed_needs_the_same_decided_call_in_the_last_sessions():
    assert stats.CONFIRM_SESSIONS == 3
    assert stats.confirmed(['LOSS', 'WIN', 'WIN', 'WIN'])
    assert not stats.confirmed(['WIN', 'WIN'])                    # too few sessions
    assert not stats.confirmed(['WIN', 'TIE', 'WIN'])
    assert not stats.confirmed(['INCONCLUSIVE'] * 3)
    assert stats.confirmed(['TIE', 'TIE'], sessions=2)


def test_a_time_belongs_to_the_last_session_started_before_it():
    times = [at(0), at(5), at(10), at(24 * 60), at(24 * 60 + 3), at(48 * 60)]
    starts = [at(0), at(24 * 60), at(48 * 60)]
    assert [stats.session_of(t, starts) for t in times] == [0, 0, 0, 1, 1, 2]
    assert stats.session_of(at(-5), starts) == 0


def test_paired_interval_is_t_on_the_log_ratios():
    ratios = [1.10, 1.20, 1.15, 1.05, 1.25]
    iv = stats.paired_interval(ratios, confidence=0.95)
    logs = [math.log(r) for r in ratios]
    m, s = statistics.fmean(logs), statistics.stdev(logs)
    half = 2.7764451051977987 * s / math.sqrt(5)          # t(0.975, 4)
    assert iv.median == pytest.approx(math.exp(m))
    assert (iv.low, iv.high) == pytest.approx((math.exp(m - half), math.exp(m + half)))
    assert iv.method == stats.PAIRED_METHOD and iv.n == 5 and iv.confidence == 0.95
    # the decision's default confidence is wider than 95%
    wide = stats.paired_interval(ratios)
    assert wide.confidence == stats.DECISION_CONFIDENCE
    assert wide.low < iv.low and wide.high > iv.high
    # symmetric on the log scale: the reciprocal ratios give the reciprocal interval
    inv = stats.paired_interval([1 / r for r in ratios], confidence=0.95)
    assert (inv.low, inv.high) == pytest.approx((1 / iv.high, 1 / iv.low))


def test_paired_interval_edge_cases():
    one = stats.paired_interval([1.3])
    assert (one.low, one.high, one.confidence, one.method) == (1.3, 1.3, 0.0, 'single value')
    same = stats.paired_interval([0.9, 0.9, 0.9])
    assert same.low == same.high == pytest.approx(0.9)
    # equal values on a band's limit are inside it, as ReFrame's own check has them:
    # exp(mean(log v)) rounded one unit past 11.0, and the band rule judged
    # [11, 11] in [9, 11] a FAIL
    from harnesscore.bands import band_bounds, judge_band
    flat = stats.paired_interval([11.0] * 3)
    assert (flat.low, flat.median, flat.high, flat.n) == (11.0, 11.0, 11.0, 3)
    assert band_bounds(10.0, -0.1, 0.1) == (9.0, 11.0)
    assert judge_band('v', [11.0] * 3, 10.0, -0.1, 0.1, predicted=True).state == 'PASS'
    # a ratio of 0 cannot be logged: the median's interval instead
    assert stats.paired_interval([0.0, 1.0, 2.0]).method == 'bootstrap'
    with pytest.raises(stats.StatsError):
        stats.paired_interval([1.0, float('inf')])


def test_one_session_reference_band_has_the_within_session_degrees_of_freedom():
    # one session: the reference's variance and the night's come from the one
    # within-session estimate, n - 1 degrees of freedom (3 runs: 2, t(0.99) = 6.965)
    three = stats.reference_band([[1.00, 1.03, 0.97]], 3, 0.01)
    five = stats.reference_band([[1.00, 1.03, 0.97, 1.01, 0.99]], 3, 0.01)
    assert three.quantile == pytest.approx(stats.t_quantile(0.99, 2))
    assert three.quantile == pytest.approx(6.9646, abs=1e-4)
    assert five.quantile == pytest.approx(stats.t_quantile(0.99, 4))
    # several sessions: still at most S - 1
    two = stats.reference_band([[1.00, 1.03, 0.97], [1.01, 0.99, 1.02]], 3, 0.01)
    assert two.quantile == pytest.approx(stats.t_quantile(0.99, 1))


def test_more_rounds_after_a_fail_only_below_95_percent_as_the_docs_say():
    text = ' '.join(STATISTICS_PAGE.read_text(encoding='utf-8').split())
    assert ('fails on an interval of less than 95% coverage: a single round (the paired t '
            'interval of 2 rounds or more claims 97.5%, so its FAIL stands at once; where a '
            "ratio is not positive, the median's bootstrap, below 95% with fewer than 6 "
            'rounds)') in text
    assert 'fewer than 6 rounds) and goes on' not in text
    band = {'x': (0.95, 1.05)}
    assert stats.judge_ratios([0.5, 0.52, 0.51], *band['x']).interval.confidence == 0.975
    assert bands.more_rounds({'x': [0.5]}, band) == ['x']               # a single round
    assert bands.more_rounds({'x': [0.5, 0.52]}, band) == []             # paired t: stands
    assert bands.more_rounds({'x': [0.5, 0.52, 0.51]}, band) == []
    assert bands.more_rounds({'x': [0.5, 0.0, 0.51, 0.5, 0.49]}, band) == ['x']
    assert bands.more_rounds({'x': [0.5, 0.0, 0.51, 0.5, 0.49, 0.5]}, band) == []
    assert bands.more_rounds({'x': [0.98, 1.2, 0.9]}, band) == ['x']     # still crossed


def test_a_pass_on_a_single_round_needs_no_more_rounds():
    # one round inside the band passes: only a FAIL below 95% asks for more
    assert bands.more_rounds({'x': [1.0]}, {'x': (0.9, 1.1)}) == []
    assert bands.more_rounds({'x': [1.5]}, {'x': (0.9, 1.1)}) == ['x']
    assert bands.more_rounds({'x': [1.0], 'y': [0.5]},
                             {'x': (0.9, 1.1), 'y': (0.9, 1.1)}) == ['y']


@pytest.mark.parametrize('confidence, shown', [(0.95, '95%'), (0.975, '97.5%'), (0.99, '99%'),
                                               (0.0, '0%'), (0.978515625, '97.9%')])
def test_an_interval_describes_its_level_to_a_tenth(confidence, shown):
    iv = stats.Interval(1.0, 0.9, 1.1, 5, confidence, 'm')
    assert f'median 1, {shown} interval [0.9, 1.1] (n=5, m)' == iv.describe()
    decision = stats.judge_ratios([0.5, 0.52, 0.51], 0.95, 1.05)
    assert '97.5% interval' in decision.interval.describe()
