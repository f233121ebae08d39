"""The communication analysis from perflogs in the communication checks' convention."""

from __future__ import annotations

import dataclasses
import datetime as dt
import types

import pytest
from conftest import label_spy
from hybridverdict import comm
from hybridverdict.perflog import Record, read_perflogs
from perflog_writer import header, hockney_runs, line, write, write_runs

SIZES = [1, 8, 64, 512, 4096, 32768, 262144, 1048576]


def test_hockney_fit_per_stack_and_partition_from_latency_and_bandwidth(tmp_path):
    write_runs(tmp_path / 'shm/OsuLatency.log', 'osu_latency',
               hockney_runs(0.5, 8000.0, SIZES, noise=0.02), stack='openmpi', part='shm')
    write_runs(tmp_path / 'tcp/OsuLatency.log', 'osu_latency',
               hockney_runs(15.0, 1200.0, SIZES), stack='openmpi', part='tcp')
    # bandwidth only: t = m / bw
    bw_runs = [{f'bw_{m}': (m / (3.0 + m / 2500.0), 'MB/s') for m in SIZES}] * 2
    write_runs(tmp_path / 'shm/RingBw.log', 'ring-bw', bw_runs, stack='mpich', part='shm')
    curves = {(c.partition, c.stack, c.kernel): c
              for c in comm.p2p_curves(read_perflogs([str(tmp_path)]))}
    shm = curves[('shm', 'openmpi', 'osu_latency')]
    assert shm.fit.t0 == pytest.approx(0.5, rel=0.1)
    assert shm.fit.r_inf == pytest.approx(8000.0, rel=0.05)
    assert shm.span.records == 3
    tcp = curves[('tcp', 'openmpi', 'osu_latency')]
    assert (tcp.fit.t0, tcp.fit.r_inf) == (pytest.approx(15.0), pytest.approx(1200.0))
    assert tcp.fit.m_half == pytest.approx(15.0 * 1200.0)
    ring = curves[('shm', 'mpich', 'ring-bw')]
    assert (ring.fit.t0, ring.fit.r_inf) == (pytest.approx(3.0), pytest.approx(2500.0))
    rows = comm.hockney_rows(list(curves.values()))
    assert len(rows) == 3 and all(r[-2] in (2, 3) for r in rows)


def test_one_message_size_is_reported_not_fitted(tmp_path):
    write_runs(tmp_path / 'x.log', 'osu_latency', [{'lat_8': (1.0, 'us')}] * 2)
    (curve,) = comm.p2p_curves(read_perflogs([str(tmp_path)]))
    assert curve.fit is None and 'needs >= 2 distinct message sizes' in curve.error
    assert 'no fit: needs >= 2' in comm.hockney_rows([curve])[0][4]


def test_a_fit_of_two_points_prints_no_error(tmp_path):
    # a 2-parameter fit through two points is exact: its "0.0%" read as a perfect model
    write_runs(tmp_path / 'two/Lat.log', 'osu_latency',
               hockney_runs(1.0, 1000.0, [8, 4096]), part='two')
    write_runs(tmp_path / 'three/Lat.log', 'osu_latency',
               hockney_runs(1.0, 1000.0, [8, 512, 4096], noise=0.05), part='three')
    rows = {r[1]: r for r in comm.hockney_rows(comm.p2p_curves(
        read_perflogs([str(tmp_path)])))}
    assert rows['two'][7:9] == ['n/a (2 points)', 'n/a (2 points)']
    assert all(x.endswith('%') and x != '0.0%' for x in rows['three'][7:9]), rows['three']
    lines = [line('osu_allreduce', {'lat_8': (1.0 + 2.0 * (n.bit_length() - 1), 'us')},
                  ranks=2, nodes=n // 2) for n in (2, 4)]
    write(tmp_path / 'c/Allreduce.log', [header(['lat_8']), *lines])
    (c,) = comm.collectives(read_perflogs([str(tmp_path / 'c')]))
    assert comm.collective_rows([c])[0][0][-2] == 'n/a (2 points)'


def test_stack_comparison_relative_to_the_best_of_the_partition(tmp_path):
    for stack, lat, bw in (('openmpi', 0.5, 9000.0), ('mpich', 1.0, 6000.0)):
        write_runs(tmp_path / f'{stack}/OsuLatency.log', 'osu_latency',
                   [{'lat_8': (lat, 'us'), 'latency_8B': (lat, 'us')}], stack=stack)
        write_runs(tmp_path / f'{stack}/OsuBw.log', 'osu_bw',
                   [{'bw_1048576': (bw, 'MB/s'), 'bw_4194304': (bw * 1.1, 'MB/s'),
                     'bandwidth_1MiB': (bw, 'MB/s')}], stack=stack)
    rows, data = comm.stack_rows(comm.headlines(read_perflogs([str(tmp_path)])))
    by_stack = {d['stack']: d for d in data}
    assert by_stack['openmpi']['latency_vs_best'] == 1.0
    assert by_stack['mpich']['latency_vs_best'] == pytest.approx(2.0)
    assert by_stack['mpich']['bandwidth_vs_best'] == pytest.approx(6000 / 9000)
    assert by_stack['mpich']['largest_bytes'] == 4194304
    assert by_stack['mpich']['largest_vs_best'] == pytest.approx(6000 / 9000)
    assert {r[2] for r in rows} == {'openmpi', 'mpich'}


def test_ring_beside_osu_with_ratio(tmp_path):
    write_runs(tmp_path / 'a.log', 'osu_latency', [{'latency_8B': (0.5, 'us')}])
    write_runs(tmp_path / 'b.log', 'ring-pingpong', [{'latency_8B': (0.6, 'us')}])
    write_runs(tmp_path / 'c.log', 'osu_bw', [{'bandwidth_1MiB': (8000.0, 'MB/s')}])
    write_runs(tmp_path / 'd.log', 'ring-bw', [{'bandwidth_1MiB': (6000.0, 'MB/s')}])
    write_runs(tmp_path / 'e.log', 'ring-vs-osu', [{'latency_ratio_8B': (1.2, ''),
                                                    'bandwidth_ratio_1MiB': (0.75, '')}])
    recs = read_perflogs([str(tmp_path)])
    rows, data = comm.ring_osu_rows(comm.headlines(recs))
    assert data[0]['latency_ratio'] == pytest.approx(1.2)
    assert data[0]['bandwidth_ratio'] == pytest.approx(0.75)
    acc_rows, acc = comm.accuracy_rows(recs)
    assert {d['variable']: d['median'] for d in acc} == {'latency_ratio_8B': 1.2,
                                                         'bandwidth_ratio_1MiB': 0.75}


def test_saturation_curve_with_one_k_is_100_percent(tmp_path):
    write_runs(tmp_path / 'Ring.log', 'ring', [{'bw_k1_8': (10.0, 'MB/s'),
                                                'bw_k1_1048576': (5000.0, 'MB/s')}] * 3)
    series = comm.saturation(read_perflogs([str(tmp_path)]))
    assert [(s.size, s.curve()) for s in series] == [
        (8, [(1, 10.0, 1.0, 3)]), (1048576, [(1, 5000.0, 1.0, 3)])]


def test_saturation_curve_against_k(tmp_path):
    write_runs(tmp_path / 'Mbw.log', 'osu_mbw_mr', [
        {'bw_k1_1048576': (4000.0, 'MB/s'), 'bw_k2_1048576': (7000.0, 'MB/s'),
         'bw_k4_1048576': (8000.0, 'MB/s')}])
    (s,) = comm.saturation(read_perflogs([str(tmp_path)]))
    assert [(k, frac) for k, _, frac, _ in s.curve()] == [(1, 0.5), (2, 0.875), (4, 1.0)]


def test_collectives_fit_needs_two_rank_counts(tmp_path):
    lines = []
    for ranks, nodes in ((2, 1), (2, 2), (2, 4)):        # n = 2, 4, 8
        n = ranks * nodes
        lines.append(line('osu_allreduce', {'lat_8': (1.0 + 2.0 * (n.bit_length() - 1), 'us')},
                          ranks=ranks, nodes=nodes))
    write(tmp_path / 'a/Allreduce.log', [header(['lat_8']), *lines])
    write_runs(tmp_path / 'b/Bcast.log', 'osu_bcast', [{'lat_8': (3.0, 'us')}])
    found = {c.kernel: c for c in comm.collectives(read_perflogs([str(tmp_path)]))}
    fit = found['osu_allreduce'].fit
    assert (fit.a, fit.b) == (pytest.approx(2.0), pytest.approx(1.0))
    assert found['osu_bcast'].fit is None
    assert found['osu_bcast'].error == 'needs >= 2 rank counts (only n = 2)'
    rows, _ = comm.collective_rows(list(found.values()))
    assert any('needs >= 2 rank counts' in str(r) for r in rows)


def test_failed_runs_do_not_enter(tmp_path):
    write_runs(tmp_path / 'x.log', 'osu_latency', hockney_runs(1.0, 1000.0, SIZES),
               result='fail')
    assert comm.p2p_curves(read_perflogs([str(tmp_path)])) == []


def test_ring_layouts_each_measure_their_k_and_zero_is_not_measured(tmp_path):
    # RingCheck's convention: every layout logs every k of the partition, 0 where it has none
    logs = tmp_path / 'Ring.log'
    write(logs, [header(['bw_k1_1048576', 'bw_k2_1048576']),
                 line('ring', {'bw_k1_1048576': (5000.0, 'MB/s'),
                               'bw_k2_1048576': (0, 'MB/s')}, mode='mpi', ranks=2, threads=1),
                 line('ring', {'bw_k1_1048576': (0, 'MB/s'), 'bw_k2_1048576': (4000.0, 'MB/s')},
                      mode='masteronly', ranks=1, threads=2)])
    # a series per layout: masteronly's k = 2 (one CPU sending a twice larger message)
    # is no point of the pure-MPI curve
    master, mpi = comm.saturation(read_perflogs([str(logs)]))
    assert [(k, bw, frac, n) for k, bw, frac, n in mpi.curve()] == [(1, 5000.0, 1.0, 1)]
    assert [(k, bw, frac, n) for k, bw, frac, n in master.curve()] == [(2, 4000.0, 1.0, 1)]
    assert (mpi.layouts, master.layouts) == ({1: {'mpi 2x1'}}, {2: {'masteronly 1x2'}})
    rows, _ = comm.saturation_rows([mpi, master])
    assert [r[4:8] for r in rows] == [[1, 'mpi 2x1', '5000', '100%'],
                                      [2, 'masteronly 1x2', '4000', '100%']]


def test_zero_latencies_are_not_measured(tmp_path):
    runs = hockney_runs(2.0, 1000.0, SIZES)
    for run in runs:
        run['lat_1'] = (0, 'us')
    write_runs(tmp_path / 'x.log', 'osu_latency', runs)
    (curve,) = comm.p2p_curves(read_perflogs([str(tmp_path)]))
    assert 1 not in curve.times and curve.fit.t0 == pytest.approx(2.0)


def test_ring_beside_osu_keeps_a_row_per_ring_build():
    """A Debug and a Release ring build on one stack: two rows, each naming its build
    (keyed without the build, the later headline overwrote the earlier)."""
    def rec(kernel: str, build: str, latency: float) -> Record:
        return Record(time=dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc), system='s',
                      partition='p', stack='x', kernel=kernel, mode='mpi', ranks=2, threads=1,
                      size='8', cores=2, nodes=1, mpi_library='L', verified=True,
                      oversubscribed=False, result='pass', values={'latency_8B': latency},
                      units={}, source='f:1', build_spec=build)

    heads = comm.headlines([rec('ring-pingpong', 'cmake Debug x', 9.0),
                            rec('ring-pingpong', 'cmake Release x', 1.0),
                            rec('osu_latency', 'osu /opt', 1.0)])
    rows, data = comm.ring_osu_rows(heads)
    build = comm.RING_OSU_COLUMNS.index('ring build')
    ratio = comm.RING_OSU_COLUMNS.index('ring/OSU')
    assert [(r[build], r[comm.RING_OSU_COLUMNS.index('OSU build')], r[ratio]) for r in rows] == [
        ('cmake Debug x', 'osu /opt', '9.00'), ('cmake Release x', 'osu /opt', '1.00')]
    assert all(len(r) == len(comm.RING_OSU_COLUMNS) for r in rows)
    assert [(d['ring_build'], d['osu_build'], d['library'], d['latency_ratio']) for d in data] \
        == [('cmake Debug x', 'osu /opt', 'L', 9.0), ('cmake Release x', 'osu /opt', 'L', 1.0)]


def record(kernel: str, mode: str, ranks: int, threads: int, values: dict[str, float],
           nodes: int = 1, cores: int = 2) -> Record:
    return Record(time=dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc), system='s',
                  partition='p', stack='x', kernel=kernel, mode=mode, ranks=ranks,
                  threads=threads, size='16', cores=cores, nodes=nodes, mpi_library='L',
                  verified=True, oversubscribed=False, result='pass', values=values,
                  units={}, source='f:1', build_spec='cmake Release x')


def ring_bw(bw_by_k: dict[int, float], size: int = 1048576) -> dict[str, float]:
    return {f'bw_k{k}_{size}': bw for k, bw in bw_by_k.items()}


def test_saturation_and_rabenseifner_keep_masteronly_apart_from_pure_mpi():
    """Across nodes both layouts sweep k = 1..4: masteronly's k is one CPU per node
    sending a k times larger message, not k CPUs; pooled, k = 4 was the median of
    3000 and 1200 and the Rabenseifner row compared masteronly with that."""
    recs = [record('ring', 'mpi', 4, 1, ring_bw({1: 1000, 2: 1800, 4: 3000}), 2, 4),
            record('ring', 'masteronly', 1, 4, ring_bw({1: 1000, 2: 1100, 4: 1200}), 2, 4)]
    series = comm.saturation(recs)
    assert [(s.layout, [(k, bw) for k, bw, _f, _n in s.curve()]) for s in series] == [
        ('masteronly 1x4', [(1, 1000), (2, 1100), (4, 1200)]),
        ('mpi 4x1', [(1, 1000), (2, 1800), (4, 3000)])]
    rows, _ = comm.saturation_rows(series)
    assert [(r[4], r[5], r[6], r[7]) for r in rows] == [
        (1, 'masteronly 1x4', '1000', '83%'), (2, 'masteronly 1x4', '1100', '92%'),
        (4, 'masteronly 1x4', '1200', '100%'), (1, 'mpi 4x1', '1000', '33%'),
        (2, 'mpi 4x1', '1800', '60%'), (4, 'mpi 4x1', '3000', '100%')]
    table, data = comm.rabenseifner_rows(comm.rabenseifner(series))
    assert table == [['s', 'p', 'x', 'ring', '1 MiB', 2, '1000', '3000', 4, '33%', '3.00',
                      '1.50']]
    assert data[0]['t_ratio'] == pytest.approx(1.5)


def test_rabenseifner_b_hybrid_from_the_masteronly_1xC_run_at_k1():
    """Seed 001: b_hybrid is one 1-threaded MPI process per node (masteronly 1 x C at
    k = 1) where measured, else the pure-MPI run's k = 1 (seed 002's ring); b_MPP the
    pure-MPI C x 1 run's largest k; a layout without its counterpart gives no row."""
    mpi = record('ring', 'mpi', 4, 1, ring_bw({1: 1000, 2: 1800, 4: 3000}), 2, 4)
    master = record('ring', 'masteronly', 1, 4, ring_bw({1: 750, 4: 900}), 2, 4)
    (row,) = comm.rabenseifner(comm.saturation([mpi, master]))
    assert (row.b_hybrid, row.b_mpp, row.k_max, row.fraction) == (750, 3000, 4, 0.25)
    # k_sweep=false: the pure-MPI run has its largest k only, masteronly gives k = 1
    only_top = record('ring', 'mpi', 4, 1, ring_bw({4: 3000}), 2, 4)
    (row,) = comm.rabenseifner(comm.saturation([only_top, master]))
    assert (row.b_hybrid, row.b_mpp) == (750, 3000)
    # masteronly of another C (1 x 2) is no counterpart of 4 x 1
    other = record('ring', 'masteronly', 1, 2, ring_bw({1: 500}), 2, 4)
    assert comm.rabenseifner(comm.saturation([only_top, other])) == []
    # masteronly alone: its k = 4 is no pure-MPI bandwidth
    assert comm.rabenseifner(comm.saturation([master])) == []
    # a hybrid layout of several ranks (2 x 2) is neither side
    assert comm.rabenseifner(comm.saturation([
        record('ring', 'masteronly', 2, 2, ring_bw({1: 900, 2: 1500}), 2, 4)])) == []


@pytest.fixture
def plot_labels(monkeypatch) -> list[str]:
    """The labels of every line the figures draw from now on."""
    return label_spy(monkeypatch, 'plot')


def test_saturation_figure_names_the_layout_where_a_place_has_several(plot_labels):
    from hybridverdict import plots
    labels = plot_labels
    mpi = record('ring', 'mpi', 4, 1, ring_bw({1: 1000, 4: 3000}), 2, 4)
    master = record('ring', 'masteronly', 1, 4, ring_bw({1: 1000, 4: 1200}), 2, 4)
    plots.saturation(types.SimpleNamespace(saturation=comm.saturation([mpi, master])))
    assert sorted(set(labels)) == ['ring x@p 1 MiB masteronly 1x4 2 nodes (n=1)',
                                   'ring x@p 1 MiB mpi 4x1 2 nodes (n=1)']
    labels.clear()
    plots.saturation(types.SimpleNamespace(saturation=comm.saturation([mpi])))
    assert set(labels) == {'ring x@p 1 MiB 2 nodes (n=1)'}      # one layout: as before


def test_collectives_one_series_per_ranks_per_node():
    """n = 2 on one node (shared memory) and on 1 x 2 nodes (the network) are two
    series, not one median; a kernel of several ranks-per-node counts names them."""
    recs = [record('osu_allreduce', 'mpi', 2, 1, {'lat_8': 1.0}, nodes=1),
            record('osu_allreduce', 'mpi', 1, 1, {'lat_8': 10.0}, nodes=2),
            record('osu_allreduce', 'mpi', 1, 1, {'lat_8': 10.0}, nodes=2),
            record('osu_allreduce', 'mpi', 2, 1, {'lat_8': 20.0}, nodes=2)]
    series = comm.collectives(recs)
    assert [(c.ranks_per_node, dict(c.times)) for c in series] == [
        (1, {2: [10.0, 10.0]}), (2, {2: [1.0], 4: [20.0]})]
    assert series[0].error == 'needs >= 2 rank counts (only n = 2)'
    rows, data = comm.collective_rows(series)
    counts = comm.COLLECTIVE_COLUMNS.index('rank counts')
    assert [r[counts] for r in rows] == ['2 (1 per node)', '2,4 (2 per node)']
    assert [d['ranks_per_node'] for d in data] == [1, 2]
    # one ranks-per-node count: the table and JSON as before
    rows, data = comm.collective_rows(comm.collectives(recs[1:3]))
    assert [r[counts] for r in rows] == ['2'] and 'ranks_per_node' not in data[0]


def test_hockney_fit_with_a_negative_start_up_latency_is_no_fit():
    recs = [record('osu_latency', 'mpi', 2, 1,
                   {'lat_1024': 0.3, 'lat_65536': 30.0, 'lat_1048576': 600.0})]
    (curve,) = comm.p2p_curves(recs)
    assert curve.fit is None
    assert comm.hockney_rows([curve])[0][4] == (
        'no fit: the fitted start-up latency t0 = -0.217 us is not positive: the times do '
        'not follow t0 + m / r_inf')


def one_node_sweep(a: float = 3.0, b: float = 2.0, ranks=(2, 4, 8, 16)) -> list[Record]:
    """A collective on one 16-core node at each rank count: t = a log2 n + b."""
    return [record('osu_allreduce', 'mpi', n, 1, {'lat_8': a * (n.bit_length() - 1) + b},
                   cores=16) for n in ranks]


def test_collectives_one_node_sweep_over_rank_counts_is_one_series():
    """On one node the rank counts 2, 4, 8, 16 are the points of one fit (Xu & Hwang),
    not a series of one point each."""
    (c,) = comm.collectives(one_node_sweep())
    assert (c.ranks_per_node, c.series, sorted(c.times)) == (comm.ONE_NODE, 'one node',
                                                             [2, 4, 8, 16])
    assert (c.fit.a, c.fit.b, c.error) == (pytest.approx(3.0), pytest.approx(2.0), '')
    rows, data = comm.collective_rows([c])
    assert [r[4:7] for r in rows] == [['2,4,8,16', '3', '2']]
    assert 'nodes' not in data[0] and 'ranks_per_node' not in data[0]


def test_collectives_one_node_sweep_beside_runs_across_nodes():
    """The one-node sweep is one series; 4 ranks per node on 2 and 4 nodes another,
    whose 1-node point is the one-node run of 4 ranks; n = 8 on one node and on
    4 x 2 nodes are never one median; each row and figure line names its series."""
    across = [record('osu_allreduce', 'mpi', 4, 1, {'lat_8': t}, nodes=nodes, cores=16)
              for nodes, t in ((2, 40.0), (4, 50.0))]
    series = comm.collectives(one_node_sweep(ranks=(2, 4, 8)) + across)
    assert [(c.series, dict(c.times)) for c in series] == [
        ('one node', {2: [5.0], 4: [8.0], 8: [11.0]}),
        ('4 per node', {4: [8.0], 8: [40.0], 16: [50.0]})]
    rows, data = comm.collective_rows(series)
    assert [r[4] for r in rows] == ['2,4,8 (one node)', '4,8,16 (4 per node)']
    assert [(d.get('nodes'), d.get('ranks_per_node')) for d in data] == [(1, None), (None, 4)]


def test_collectives_figure_names_the_series_where_a_place_has_several(plot_labels):
    from hybridverdict import plots
    labels = plot_labels
    across = record('osu_allreduce', 'mpi', 1, 1, {'lat_8': 30.0}, nodes=2, cores=16)
    series = comm.collectives(one_node_sweep() + [across])
    plots.collectives(types.SimpleNamespace(collectives=series))
    assert {label for label in labels if label} == {'x@p 8 B one node (n=4)',
                                                    'x@p 8 B 1 per node (n=1)'}
    labels.clear()
    plots.collectives(types.SimpleNamespace(collectives=comm.collectives(one_node_sweep())))
    assert {label for label in labels if label} == {'x@p 8 B (n=4)'}     # as before


def p2p(kernel: str, values: dict[str, float], stack: str = 'x', system: str = 's',
        build: str = 'cmake Release x', library: str = 'L') -> Record:
    return Record(time=dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc), system=system,
                  partition='shm', stack=stack, kernel=kernel, mode='mpi', ranks=2,
                  threads=1, size='8', cores=2, nodes=1, mpi_library=library,
                  verified=True, oversubscribed=False, result='pass', values=values,
                  units={}, source='f:1', build_spec=build)


def test_largest_size_bandwidth_is_compared_at_the_same_size():
    """openmpi measured 1 and 4 MiB (1000, 4000 MB/s), mpich 1 MiB only (1000 MB/s):
    mpich's largest (1 MiB) is as good as the best at 1 MiB, not 25% of openmpi's
    4 MiB; openmpi, alone at 4 MiB, is its own best."""
    heads = comm.headlines([
        p2p('osu_bw', {'bw_1048576': 1000.0, 'bw_4194304': 4000.0}, 'openmpi'),
        p2p('osu_bw', {'bw_1048576': 1000.0}, 'mpich')])
    rows, data = comm.stack_rows(heads)
    assert [(d['stack'], d['largest_bytes'], d['largest_vs_best']) for d in data] == [
        ('mpich', 1048576, 1.0), ('openmpi', 4194304, 1.0)]
    big = comm.STACK_COLUMNS.index('of best ')
    assert [(r[2], r[big]) for r in rows] == [('mpich', '100%'), ('openmpi', '100%')]
    # at one largest size, as before: against the best of it
    heads = comm.headlines([p2p('osu_bw', {'bw_4194304': 4000.0}, 'openmpi'),
                            p2p('osu_bw', {'bw_4194304': 1000.0}, 'mpich')])
    assert [d['largest_vs_best'] for d in comm.stack_rows(heads)[1]] == [0.25, 1.0]


def test_comm_tables_name_the_system_and_build_only_where_several():
    """Two systems (or two builds of one stack) gave identical-looking rows in pairs:
    the partition names the system where the rows span several ('alpha:shm', as the
    verdict table), the stack the build or library where its place holds several."""
    lat = {'lat_8': 1.0, 'lat_1024': 2.0, 'latency_8B': 1.0}
    recs = [p2p(k, lat, system=sys_) for sys_ in ('alpha', 'beta')
            for k in ('osu_latency', 'ring-pingpong')]
    part = comm.STACK_COLUMNS.index('partition')
    rows, data = comm.stack_rows(comm.headlines(recs))
    assert [(r[part], r[2]) for r in rows] == [('alpha:shm', 'x'), ('alpha:shm', 'x'),
                                               ('beta:shm', 'x'), ('beta:shm', 'x')]
    assert [d['system'] for d in data] == ['alpha', 'alpha', 'beta', 'beta']
    hockney = comm.hockney_rows(comm.p2p_curves(recs))
    assert [r[1] for r in hockney] == ['alpha:shm', 'alpha:shm', 'beta:shm', 'beta:shm']
    rows, _ = comm.ring_osu_rows(comm.headlines(recs))
    assert [r[0] for r in rows] == ['alpha:shm', 'beta:shm']
    assert all(len(r) == len(comm.RING_OSU_COLUMNS) for r in rows)
    # one system, two builds of the OSU benchmarks: the stack names the build
    recs = [p2p('osu_latency', lat, build=b) for b in ('osu Debug', 'osu Release')]
    rows, data = comm.stack_rows(comm.headlines(recs))
    assert [(r[part], r[2]) for r in rows] == [('shm', 'x (osu Debug)'),
                                               ('shm', 'x (osu Release)')]
    assert [d['build'] for d in data] == ['osu Debug', 'osu Release']
    assert [r[0] for r in comm.hockney_rows(comm.p2p_curves(recs))] == [
        'x (osu Debug)', 'x (osu Release)']
    # one system and one build: the rows as they always were, no build in the JSON
    rows, data = comm.stack_rows(comm.headlines(recs[:1]))
    assert (rows[0][part], rows[0][2]) == ('shm', 'x') and 'build' not in data[0]


def test_accuracy_rows_name_the_node_count_where_a_variable_has_several():
    acc = record('ring-vs-osu', 'mpi', 2, 1, {'lat_ratio_8': 1.1})
    two = dataclasses.replace(acc, nodes=2, values={'lat_ratio_8': 1.6})
    rows, data = comm.accuracy_rows([acc, two])
    var = comm.ACCURACY_COLUMNS.index('variable')
    assert [(r[var], d['nodes']) for r, d in zip(rows, data)] == [
        ('lat_ratio_8 (1 node)', 1), ('lat_ratio_8 (2 nodes)', 2)]
    (row,), _ = comm.accuracy_rows([two])
    assert row[var] == 'lat_ratio_8'


def test_ring_osu_rows_name_the_node_count_where_a_stack_has_several():
    ring = record('ring-pingpong', 'mpi', 1, 1, {'latency_8B': 0.6})
    osu = record('osu_latency', 'mpi', 1, 1, {'latency_8B': 0.5})
    two = [dataclasses.replace(r, nodes=2, values={'latency_8B': 2 * r.values['latency_8B']})
           for r in (ring, osu)]
    rows, data = comm.ring_osu_rows(comm.headlines([ring, osu, *two]))
    part = comm.RING_OSU_COLUMNS.index('partition')
    assert [(r[part], d['nodes']) for r, d in zip(rows, data)] == [('p (1 node)', 1),
                                                                   ('p (2 nodes)', 2)]
    (row,), _ = comm.ring_osu_rows(comm.headlines(two))
    assert row[part] == 'p'


def test_saturation_collective_and_accuracy_rows_name_the_system_where_several():
    def on(rec: Record, system: str) -> Record:
        return dataclasses.replace(rec, system=system)

    ring = record('ring', 'mpi', 2, 1, ring_bw({1: 1000}))
    rows, _ = comm.saturation_rows(comm.saturation([on(ring, 'alpha'), on(ring, 'beta')]))
    part = comm.SATURATION_COLUMNS.index('partition')
    assert [r[part] for r in rows] == ['alpha:p', 'beta:p']
    coll = record('osu_allreduce', 'mpi', 2, 1, {'lat_8': 3.0})
    rows, _ = comm.collective_rows(comm.collectives([on(coll, 'alpha'), on(coll, 'beta')]))
    assert [r[comm.COLLECTIVE_COLUMNS.index('partition')] for r in rows] == ['alpha:p',
                                                                             'beta:p']
    acc = record('ring-vs-osu', 'mpi', 2, 1, {'lat_ratio_8': 1.1})
    rows, _ = comm.accuracy_rows([on(acc, 'alpha'), on(acc, 'beta')])
    assert [r[0] for r in rows] == ['alpha:p', 'beta:p']
    # two builds of one system: the stack names the build, the JSON too
    rows, data = comm.saturation_rows(comm.saturation(
        [ring, dataclasses.replace(ring, build_spec='cmake Debug x')]))
    assert [r[0] for r in rows] == ['x (cmake Debug x)', 'x (cmake Release x)']
    assert [d['build'] for d in data] == ['cmake Debug x', 'cmake Release x']
    rows, _ = comm.saturation_rows(comm.saturation([ring]))
    assert (rows[0][0], rows[0][part]) == ('x', 'p')


def test_stack_comparison_names_the_node_count():
    """One stack on 1 and on 2 nodes gave two rows alike but for their figures
    ('| shm | osu | mpich | 0.501 |' and '| shm | osu | mpich | 5.01 |')."""
    heads = comm.headlines([dataclasses.replace(p2p('osu_latency', {'latency_8B': lat}),
                                                nodes=nodes)
                            for nodes, lat in ((1, 0.5), (2, 5.0))])
    rows, data = comm.stack_rows(heads)
    nodes = comm.STACK_COLUMNS.index('nodes')
    assert [(r[2], r[3], r[nodes]) for r in rows] == [('x', '0.5', 1), ('x', '5', 2)]
    assert [d['nodes'] for d in data] == [1, 2]
    assert comm.STACK_COLUMNS[-2:] == ('nodes', 'samples')
    assert all(len(r) == len(comm.STACK_COLUMNS) for r in rows)


def test_rabenseifner_rows_name_the_build_where_several():
    """Two builds of one stack across nodes gave two identical-looking rows."""
    recs = [record('ring', 'mpi', 4, 1, ring_bw({1: 1000, 4: 3000}), 2, 4)]
    recs.append(dataclasses.replace(recs[0], build_spec='cmake Debug x',
                                    values=ring_bw({1: 500, 4: 3000})))
    table, data = comm.rabenseifner_rows(comm.rabenseifner(comm.saturation(recs)))
    assert [r[:3] + r[6:7] for r in table] == [['s', 'p', 'x (cmake Debug x)', '500'],
                                               ['s', 'p', 'x (cmake Release x)', '1000']]
    assert [d['build'] for d in data] == ['cmake Debug x', 'cmake Release x']
    # one build: the row and its JSON as they always were
    table, data = comm.rabenseifner_rows(comm.rabenseifner(comm.saturation(recs[:1])))
    assert table[0][:3] == ['s', 'p', 'x'] and 'build' not in data[0]
    assert list(data[0]) == ['system', 'partition', 'stack', 'kernel', 'size', 'nodes',
                             'k_max', 'b_hybrid', 'b_mpp', 'fraction', 's_ratio', 't_ratio']


def test_ring_beside_osu_pairs_a_stack_whose_two_sides_log_their_library_differently():
    """The ring logs MPI_Get_library_version, OSU '<prefix> (<lib>)': paired only by
    equal library strings, the table had no row although both ran."""
    lat = {'latency_8B': 1.0}
    ring = p2p('ring-pingpong', {'latency_8B': 1.5}, library='MPICH Version: 4.0.2')
    osu = p2p('osu_latency', lat, build='osu /opt', library='MPICH (libmpich.so.12)')
    rows, data = comm.ring_osu_rows(comm.headlines([ring, osu]))
    assert [r[:4] + r[6:7] for r in rows] == [['shm', 'x', 'cmake Release x', 'osu /opt',
                                               '1.50']]
    assert [(d['library'], d['osu_library'], d['latency_ratio']) for d in data] == [
        ('MPICH Version: 4.0.2', 'MPICH (libmpich.so.12)', 1.5)]
    # two ring libraries against one OSU install: the install is of one of them, which
    # nothing says, and the stack has no row (test_ring_beside_osu_pairs_no_other_mpi_
    # version); this asserted two rows, one of them across versions
    ring2 = dataclasses.replace(ring, mpi_library='MPICH Version: 4.1')
    assert comm.ring_osu_rows(comm.headlines([ring, ring2, osu])) == ([], [])
    # a ring library that OSU logged too pairs with that install only, and the one left
    # with the install left; each side names its library where its side of the stack
    # has several
    same = dataclasses.replace(osu, mpi_library='MPICH Version: 4.0.2', build_spec='osu /b')
    rows, _ = comm.ring_osu_rows(comm.headlines([ring, ring2, osu, same]))
    assert [r[1:4] for r in rows] == [
        ['x (MPICH Version: 4.0.2)', 'cmake Release x', 'osu /b'],
        ['x', 'cmake Release x (MPICH Version: 4.1)', 'osu /opt (MPICH (libmpich.so.12))']]


def test_ring_beside_osu_pairs_no_other_mpi_version():
    """After an MPICH upgrade the ring was built against 4.0.2 and 4.2.0 and OSU
    installed against each, all OSU installs logging 'MPICH (libmpich.so.12)': every
    ring build paired with every install, 4.0.2 against 4.2.0 shown as ring/OSU
    overhead (ratios 0.33 and 3.00).  Nothing tells the installs apart: no row."""
    def ring(version: str, lat: float) -> Record:
        return p2p('ring-pingpong', {'latency_8B': lat}, stack='mpich',
                   build='cmake Release mpich', library=f'MPICH Version: {version}')

    def osu(version: str, lat: float, library: str = 'MPICH (libmpich.so.12)') -> Record:
        return p2p('osu_latency', {'latency_8B': lat}, stack='mpich',
                   build=f'osu /opt/osu-mpich-{version}', library=library)

    upgrade = [ring('4.0.2', 1.0), ring('4.2.0', 3.0), osu('4.0.2', 1.0), osu('4.2.0', 3.0)]
    assert comm.ring_osu_rows(comm.headlines(upgrade)) == ([], [])
    # one OSU install of the two ring versions: not told which either
    assert comm.ring_osu_rows(comm.headlines(upgrade[:3])) == ([], [])
    # the installs logging libraries of their own: none left to guess
    told = [ring('4.0.2', 1.0), ring('4.2.0', 3.0), osu('4.0.2', 1.0, 'MPICH Version: 4.0.2'),
            osu('4.2.0', 3.0, 'MPICH Version: 4.2.0')]
    _, data = comm.ring_osu_rows(comm.headlines(told))
    assert [(d['library'], d['osu_build'], d['latency_ratio']) for d in data] == [
        ('MPICH Version: 4.0.2', 'osu /opt/osu-mpich-4.0.2', 1.0),
        ('MPICH Version: 4.2.0', 'osu /opt/osu-mpich-4.2.0', 1.0)]
    # one ring version, its Debug and Release builds, against the installs of one
    # library string: each build against each install, as before
    debug = dataclasses.replace(upgrade[0], build_spec='cmake Debug mpich')
    rows, _ = comm.ring_osu_rows(comm.headlines([upgrade[0], debug] + upgrade[2:]))
    assert [r[2:4] for r in rows] == [['cmake Debug mpich', 'osu /opt/osu-mpich-4.0.2'],
                                      ['cmake Debug mpich', 'osu /opt/osu-mpich-4.2.0'],
                                      ['cmake Release mpich', 'osu /opt/osu-mpich-4.0.2'],
                                      ['cmake Release mpich', 'osu /opt/osu-mpich-4.2.0']]
    # the installs logging two library strings against one ring version: no row
    other = osu('4.2.0', 3.0, 'MPICH (libmpich.so.14)')
    assert comm.ring_osu_rows(comm.headlines(upgrade[:1] + [upgrade[2], other])) == ([], [])


def test_headline_bandwidth_ignores_the_bidirectional_osu_bibw():
    """osu_bibw measures both directions at once (about twice osu_bw): it
    enters neither the 1 MiB nor the largest-size headline bandwidth."""
    heads = comm.headlines([
        p2p('osu_bw', {'bandwidth_1MiB': 8000.0, 'bw_4194304': 9000.0}),
        p2p('osu_bibw', {'bandwidth_1MiB': 15000.0, 'bw_4194304': 17000.0}),
        p2p('osu_bibw', {'bandwidth_1MiB': 16000.0, 'bw_8388608': 18000.0})])
    assert len(heads) == 1
    assert heads[0].bandwidth == 8000.0
    assert heads[0].largest == (4194304, 9000.0)
    assert comm.headlines([p2p('osu_bibw', {'bandwidth_1MiB': 15000.0})])[0].bandwidth is None


def test_stack_comparison_figure_names_the_node_count(monkeypatch):
    """One stack on 1 and on 2 nodes drew two bars labelled alike ('x\\nshm osu'), 0.5
    and 5 us: which was which, the figure did not say (the table has a nodes column)."""
    from hybridverdict import plots
    drawn: list[list[str]] = []

    def png(fig, caption, metadata=None):
        drawn.append([t.get_text() for t in fig.axes[0].get_xticklabels()])
        return caption

    monkeypatch.setattr(plots, '_png', png)
    heads = comm.headlines([dataclasses.replace(p2p('osu_latency', {'latency_8B': lat}),
                                                nodes=nodes)
                            for nodes, lat in ((1, 0.5), (2, 5.0))])
    plots.stacks(types.SimpleNamespace(headlines=heads))
    assert drawn == [['x\nshm osu', 'x\nshm osu 2 nodes']]


def test_headline_samples_count_only_the_runs_behind_its_figures():
    """3 osu_latency runs gave the latency; 3 osu_bibw runs, which give no figure of
    the row (bidirectional), were counted too: samples 6 beside a median of 3 runs."""
    heads = comm.headlines([p2p('osu_latency', {'latency_8B': 1.0})] * 3
                           + [p2p('osu_bibw', {'bandwidth_1MiB': 9000.0})] * 3)
    rows, data = comm.stack_rows(heads)
    assert [(r[3], r[-1]) for r in rows] == [('1', 3)]
    assert data[0]['samples'] == 3
    ring = comm.headlines([p2p('ring-pingpong', {'latency_8B': 2.0})]
                          + [p2p('osu_latency', {'latency_8B': 1.0})]
                          + [p2p('osu_bibw', {'bandwidth_1MiB': 9000.0})] * 2)
    rows, data = comm.ring_osu_rows(ring)
    assert [r[-1] for r in rows] == ['1/1']
