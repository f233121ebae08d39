"""Rabenseifner's overlap model against the paper's worked examples."""

from __future__ import annotations

import pytest
from hybridverdict.overlap import (
    ModelError,
    eps,
    eps_max,
    eps_min,
    f_comm_best,
    f_comm_equiv,
    predict,
)


def test_worked_example_m1_n8():
    # m=1, n=8, f_comp,non=0.2: eps_max=1.60, f_comm,best=43%, f_comm,equiv=10%, eps_min=0.90
    assert eps_max(0.2, 8) == pytest.approx(1.60, abs=0.005)
    assert f_comm_best(0.2, 8) == pytest.approx(0.43, abs=0.005)
    assert f_comm_equiv(0.2, 8) == pytest.approx(0.10, abs=1e-12)
    assert eps_min(0.2, 8) == pytest.approx(0.90, abs=0.005)


def test_worked_example_m1_n2():
    assert eps_max(0.0, 2) == pytest.approx(1.5)
    assert f_comm_best(0.0, 2) == pytest.approx(2 / 3)
    assert f_comm_equiv(0.0, 2) == pytest.approx(0.5)
    assert eps_min(0.0, 2) == pytest.approx(0.5)


def test_eps_reaches_its_bounds_where_the_paper_says():
    fn, n = 0.2, 8
    best = f_comm_best(fn, n)
    assert eps(best, fn, 1 - fn - best, n) == pytest.approx(eps_max(fn, n))
    equiv = f_comm_equiv(fn, n)
    assert eps(equiv, fn, 1 - fn - equiv, n) == pytest.approx(1.0)
    # all communication, nothing to overlap: no gain and no loss
    assert eps(1 - fn, fn, 0.0, n) == pytest.approx(1.0)
    # no communication: the master's share of the overlappable work is lost
    assert eps(0.0, fn, 1 - fn, n) == pytest.approx(eps_min(fn, n))


def test_predict_from_times():
    p = predict(t_comm=1.0, t_comp_non=0.0, t_comp_overlap=1.0, n=2)
    assert (p.f_comm, p.f_comp_overlap) == (0.5, 0.5)
    assert p.eps == pytest.approx(1.0)      # the break-even point for n=2


@pytest.mark.parametrize('args', [(0.5, 0.5, 0.5, 2), (0.5, 0.5, 0.0, 1), (0.5, 0.5, 0.0, 2, 2),
                                  (-0.1, 0.6, 0.5, 2)])
def test_bad_input_is_refused(args):
    with pytest.raises(ModelError):
        eps(*args)
