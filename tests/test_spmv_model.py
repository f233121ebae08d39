"""Efficiency decomposition and overlap model from SpMV records."""

from __future__ import annotations

import pytest
from hybridverdict.spmv_model import efficiencies, overlaps
from test_verdict import rec


def spmv(mode, ranks, threads, total, comp, comm, pack=0.0, interior=0.0, boundary=0.0):
    return rec(mode, total, ranks=ranks, threads=threads, kernel='spmv',
               values={'t_total': total, 't_comp': comp, 't_comm': comm, 't_pack': pack,
                       't_comp_interior': interior, 't_comp_boundary': boundary})


def test_efficiencies_follow_chow_and_hysom():
    runs = [spmv('mpi', 2, 1, total=1.0, comp=0.8, comm=0.2),
            spmv('masteronly', 1, 2, total=0.9, comp=0.8 / 1.1, comm=0.1),
            spmv('serial', 1, 1, total=1.5, comp=1.5 * 0.8 / 1.1, comm=0.0)]
    (e,) = efficiencies(runs)
    assert e.e_cache == pytest.approx(1.1)
    assert e.e_mt == pytest.approx(0.75)              # 1.5 t_hyb / (2 t_hyb)
    assert e.e_mp == pytest.approx(0.5)
    assert e.e_ni is None                             # one node
    # (0.8 / 1.1 + 0.5 * 0.2) / (0.8 + 0.2)
    assert e.predicted == pytest.approx(0.8 / 1.1 + 0.1)
    assert e.measured == pytest.approx(0.9)
    assert e.layout == '1x2'


def test_no_serial_run_leaves_e_mt_unknown():
    (e,) = efficiencies([spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.2)])
    assert e.e_mt is None


def test_overlap_prediction_and_measurement():
    master = spmv('masteronly', 1, 2, total=1.0, comp=0.5, comm=0.5, pack=0.0,
                  interior=0.5, boundary=0.0)
    funneled = spmv('funneled', 1, 2, total=0.8, comp=0.5, comm=0.5)
    (o,) = overlaps([master, funneled])
    assert o.prediction.f_comm == pytest.approx(0.5)
    assert o.prediction.eps == pytest.approx(1.0)     # n=2, m=1: break-even at f_comm=0.5
    assert o.prediction.eps_max == pytest.approx(1.5)
    assert o.measured == pytest.approx(1.25)


def test_e_ni_on_several_nodes():
    runs = [spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.1)]
    runs = [type(r)(**{**r.__dict__, 'nodes': 4}) for r in runs]
    (e,) = efficiencies(runs)
    assert e.nodes == 4
    assert e.e_ni == pytest.approx(2.0)
