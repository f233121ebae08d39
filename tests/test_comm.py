"""The communication analysis from perflogs in the communication checks' convention."""

from __future__ import annotations

import datetime as dt

import pytest
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
    (s,) = comm.saturation(read_perflogs([str(logs)]))
    assert [(k, bw, frac, n) for k, bw, frac, n in s.curve()] == [
        (1, 5000.0, 1.0, 1), (2, 4000.0, 0.8, 1)]
    assert s.layouts == {1: {'mpi 2x1'}, 2: {'masteronly 1x2'}}
    rows, _ = comm.saturation_rows([s])
    assert [r[4:8] for r in rows] == [[1, 'mpi 2x1', '5000', '100%'],
                                      [2, 'masteronly 1x2', '4000', '80%']]


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
