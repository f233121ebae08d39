"""The least-squares fits of the communication models."""

from __future__ import annotations

import math

import pytest
from hybridverdict.hockney import FitError, fit_hockney, fit_log2

SIZES = [2 ** i for i in range(0, 23)]


def test_recovers_t0_and_r_inf_exactly():
    t0, r_inf = 1.7, 4500.0                    # us, MB/s
    fit = fit_hockney(SIZES, [t0 + m / r_inf for m in SIZES])
    assert fit.t0 == pytest.approx(t0, rel=1e-9)
    assert fit.r_inf == pytest.approx(r_inf, rel=1e-9)
    assert fit.m_half == pytest.approx(t0 * r_inf, rel=1e-9)
    assert fit.rel_error < 1e-9 and fit.points == len(SIZES)


def test_recovers_parameters_from_noisy_times():
    t0, r_inf = 12.0, 1100.0
    # +-3% deterministic jitter: the fit stays within a few percent, the error says ~3%
    times = [(t0 + m / r_inf) * (1 + 0.03 * math.sin(7 * i)) for i, m in enumerate(SIZES)]
    fit = fit_hockney(SIZES, times)
    assert fit.t0 == pytest.approx(t0, rel=0.05)
    assert fit.r_inf == pytest.approx(r_inf, rel=0.05)
    assert 0.005 < fit.rel_error < 0.04
    assert fit.max_error >= fit.rel_error


def test_small_messages_do_not_lose_the_latency():
    # plain least squares on t would be ruled by the 4 MiB point; relative residuals are not
    t0, r_inf = 0.3, 20000.0
    fit = fit_hockney(SIZES, [t0 + m / r_inf for m in SIZES])
    assert fit.time(1) == pytest.approx(t0 + 1 / r_inf, rel=1e-6)


@pytest.mark.parametrize('sizes,times,message', [
    ([8], [1.0], 'needs >= 2 distinct message sizes, got 1'),
    ([8, 8, 8], [1.0, 1.1, 0.9], 'needs >= 2 distinct message sizes'),
    ([8, 1024], [1.0, 1.0], 'no finite asymptotic bandwidth'),
    ([8, 1024], [2.0, 1.0], 'no finite asymptotic bandwidth'),
    ([8, 1024], [1.0, -2.0], 'times must be positive'),
    ([8, 1024], [1.0, float('nan')], 'times must be positive'),
    ([8, 1024, 2048], [1.0, 2.0], '3 sizes but 2 times'),
    # the line's intercept below 0: no start-up latency (it fitted t0 = -0.217 us)
    ([1024, 65536, 1048576], [0.3, 30.0, 600.0], r't0 = -0.217 us is not positive'),
    ([1024, 2048], [1.0, 2.0], r't0 = 0 us is not positive'),
])
def test_degenerate_input_gives_a_clear_message(sizes, times, message):
    with pytest.raises(FitError, match=message):
        fit_hockney(sizes, times)


def test_log2_fit_of_collectives():
    a, b = 3.5, 2.0
    ns = [2, 4, 8, 16, 32]
    fit = fit_log2(ns, [a * math.log2(n) + b for n in ns])
    assert (fit.a, fit.b) == (pytest.approx(a), pytest.approx(b))
    assert fit.time(64) == pytest.approx(a * 6 + b)


def test_log2_fit_needs_two_rank_counts():
    with pytest.raises(FitError, match='needs >= 2 rank counts'):
        fit_log2([2, 2], [1.0, 1.1])
