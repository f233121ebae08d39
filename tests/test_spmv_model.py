"""Efficiency decomposition and overlap model from SpMV records."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hybridverdict.spmv_model import efficiencies, network_interface, overlap_rows, overlaps
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
    assert e.e_ni is None                             # no runs on 2 nodes
    # on one node the model's inputs are the measured ratio's own: not a prediction
    assert e.predicted is None
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


def on(nodes, *runs):
    return [type(r)(**{**r.__dict__, 'nodes': nodes}) for r in runs]


def test_e_ni_comes_from_the_two_node_runs_not_from_every_node_count():
    # Chow & Hysom: e_ni on a small number of nodes (2, Table 8); at 4 nodes the ratio
    # of communication times is 1 / e_mp, which e_ni must not restate
    two = on(2, spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.05))
    four = on(4, spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.1))
    e2, e4 = efficiencies(two + four)
    assert (e2.nodes, e4.nodes) == (2, 4)
    assert e2.e_ni == e4.e_ni == pytest.approx(4.0)    # 0.2 / 0.05, from 2 nodes
    assert e4.e_mp == pytest.approx(0.5)                # 0.1 / 0.2 at 4 nodes
    (e,) = efficiencies(four)
    assert e.e_ni is None                               # no 2-node runs: n/a


def test_network_interface_keeps_only_the_two_node_runs():
    one = on(1, spmv('mpi', 2, 1, 1.0, 0.8, 0.3), spmv('masteronly', 1, 2, 1.0, 0.8, 0.3))
    two = on(2, spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.05))
    four = on(4, spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 0.8, 0.1))
    (row,) = network_interface(one + two + four)
    assert (row.layout, row.mpi_layout) == ('1x2', '2x1')
    assert (row.comm_mpi, row.comm_hybrid) == (0.2, 0.05)
    assert row.e_ni == pytest.approx(4.0)
    assert network_interface(one + four) == []


def test_prediction_takes_e_cache_from_one_node_and_e_mp_from_p_nodes():
    one = on(1, spmv('mpi', 2, 1, 1.0, 0.8, 0.2), spmv('masteronly', 1, 2, 1.0, 1.0, 0.0))
    # at 8 nodes hybrid's computation is measured 10% slower than one node's suggests
    eight = on(8, spmv('mpi', 2, 1, 1.4, 0.8, 0.6), spmv('masteronly', 1, 2, 1.6, 1.1, 0.5))
    rows = {e.nodes: e for e in efficiencies(one + eight)}
    assert rows[1].predicted is None
    e = rows[8]
    assert e.e_cache_1 == pytest.approx(0.8)
    assert e.e_mp == pytest.approx(0.5 / 0.6)
    # (0.8 / 0.8 + (0.5 / 0.6) * 0.6) / (0.8 + 0.6) = 1.5 / 1.4
    assert e.predicted == pytest.approx(1.5 / 1.4)
    assert e.measured == pytest.approx(1.6 / 1.4)      # not the same: a prediction


def test_overlap_rows_name_the_system_and_build_where_several():
    """The overlap table's rows of two systems or two builds looked identical."""
    runs = [spmv('masteronly', 1, 2, total=1.0, comp=0.5, comm=0.5, interior=0.5),
            spmv('funneled', 1, 2, total=0.8, comp=0.5, comm=0.5)]
    assert [r[:2] for r in overlap_rows(overlaps(runs))] == [['mpich', 'shm']]
    runs += [*(replace(r, system='beta') for r in runs),
             *(replace(r, build_spec='cmake Debug mpich') for r in runs)]
    found = overlaps(runs)
    assert [(o.system, o.build) for o in found] == [('beta', ''), ('local', ''),
                                                   ('local', 'cmake Debug mpich')]
    assert [r[:2] for r in overlap_rows(found)] == [
        ['mpich', 'beta:shm'], ['mpich', 'local:shm'],
        ['mpich (cmake Debug mpich)', 'local:shm']]
