"""Synthetic multi-node perflogs: no analysis pools runs of different node counts.

Each test writes the same runs at two or more node counts with figures that differ
by node count; pooled, the medians would mix them and the assertions fail.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from types import SimpleNamespace

import pytest
from hybridverdict import comm, history, phases, report, spmv_model, verdict
from hybridverdict.perflog import ReadStats, read_perflogs
from hybridverdict.records import Record
from perflog_writer import T0, header, hockney_runs, line, write

NODES = (1, 2, 4)
SIZES = [8, 1024, 65536, 1048576]


def spmv_logs(tmp_path, speedup_by_nodes: dict[int, float]):
    names = ['t_total', 't_comp', 't_comm']
    body = []
    for i, (nodes, speedup) in enumerate(sorted(speedup_by_nodes.items())):
        for sample in range(3):
            when = T0 + dt.timedelta(minutes=10 * i + sample)
            comm_mpi = 0.1 * nodes
            body.append(line('spmv', {'t_total': (1.0 + comm_mpi, 's'), 't_comp': (1.0, 's'),
                                      't_comm': (comm_mpi, 's')}, mode='mpi', ranks=4,
                             threads=1, size='64', nodes=nodes, cores=4, time=when))
            t_hyb = (1.0 + comm_mpi) / speedup
            body.append(line('spmv', {'t_total': (t_hyb, 's'), 't_comp': (0.5, 's'),
                                      't_comm': (t_hyb - 0.5, 's')}, mode='masteronly',
                             ranks=1, threads=4, size='64', nodes=nodes, cores=4, time=when))
    write(tmp_path / 'Spmv.log', [header(names), *body])
    return read_perflogs([str(tmp_path)])


def test_verdicts_and_efficiencies_one_per_node_count(tmp_path):
    recs = spmv_logs(tmp_path, {1: 2.0, 2: 1.0, 4: 0.5})
    found = verdict.verdicts(recs)
    assert [(v.nodes, v.verdict) for v in found] == [(1, 'WIN'), (2, 'TIE'), (4, 'LOSS')]
    assert [v.speedup for v in found] == [pytest.approx(2.0), pytest.approx(1.0),
                                          pytest.approx(0.5)]
    effs = spmv_model.efficiencies(recs)
    assert [e.nodes for e in effs] == list(NODES)
    t_mpi = {n: 1.0 + 0.1 * n for n in NODES}
    comm_hyb = {n: t_mpi[n] / s - 0.5 for n, s in ((1, 2.0), (2, 1.0), (4, 0.5))}
    for e in effs:
        assert e.measured == pytest.approx((comm_hyb[e.nodes] + 0.5) / t_mpi[e.nodes])
        assert e.e_cache == pytest.approx(2.0)
        # e_mp per node count, e_ni from the 2-node runs on every row
        assert e.e_mp == pytest.approx(comm_hyb[e.nodes] / (0.1 * e.nodes))
        assert e.e_ni == pytest.approx(0.2 / comm_hyb[2])
    (c,) = verdict.crossovers(found)
    assert c.loses_from == 4 and c.nodes == NODES


def test_hockney_fit_per_node_count(tmp_path):
    for nodes, t0, r_inf in ((1, 0.5, 8000.0), (2, 5.0, 1000.0)):
        runs = hockney_runs(t0, r_inf, SIZES)
        names = list(runs[0])
        write(tmp_path / f'n{nodes}/OsuLatency.log', [header(names)] + [
            line('osu_latency', run, nodes=nodes, ranks=1, time=T0 + dt.timedelta(seconds=i))
            for i, run in enumerate(runs)])
    curves = {c.nodes: c for c in comm.p2p_curves(read_perflogs([str(tmp_path)]))}
    assert set(curves) == {1, 2}
    assert curves[1].fit.t0 == pytest.approx(0.5) and curves[2].fit.t0 == pytest.approx(5.0)
    assert curves[2].fit.r_inf == pytest.approx(1000.0)
    rows = comm.hockney_rows(list(curves.values()))
    assert [r[comm.HOCKNEY_COLUMNS.index('nodes')] for r in rows] == [1, 2]


def test_saturation_curve_per_node_count(tmp_path):
    names = ['bw_k1_1048576', 'bw_k2_1048576']
    body = [line('ring', {'bw_k1_1048576': (1000.0 * n, 'MB/s'),
                          'bw_k2_1048576': (1500.0 * n, 'MB/s')}, nodes=n) for n in NODES]
    write(tmp_path / 'Ring.log', [header(names), *body])
    series = comm.saturation(read_perflogs([str(tmp_path)]))
    assert [(s.nodes, s.curve()[0][1]) for s in series] == [(1, 1000.0), (2, 2000.0),
                                                            (4, 4000.0)]
    rows = comm.rabenseifner(series)
    assert [r.nodes for r in rows] == [2, 4]             # across nodes only
    assert all(r.t_ratio == pytest.approx(1.5 / 2) for r in rows)


def test_md_phase_table_per_node_count(tmp_path):
    names = ['t_total', 'phase_movout']
    body = []
    for n in NODES:
        body.append(line('md', {'t_total': (1.0, 's'), 'phase_movout': (0.1 * n, 's')},
                         mode='mpi', ranks=2, threads=1, nodes=n))
        body.append(line('md', {'t_total': (1.0, 's'), 'phase_movout': (0.3 * n, 's')},
                         mode='masteronly', ranks=1, threads=2, nodes=n))
    write(tmp_path / 'Md.log', [header(names), *body])
    rows = phases.phase_rows(read_perflogs([str(tmp_path)]))
    assert [(r.nodes, r.t_mpi, round(r.ratio, 6)) for r in rows] == [
        (1, pytest.approx(0.1), 3.0), (2, pytest.approx(0.2), 3.0), (4, pytest.approx(0.4), 3.0)]
    assert all(r[phases.COLUMNS.index('nodes')] in NODES for r in phases.table_rows(rows))


def md_run(mode: str, ranks: int, threads: int, force: float, build: str,
           library: str = 'L') -> Record:
    return Record(time=T0, system='s', partition='p', stack='mpich', kernel='md', mode=mode,
                  ranks=ranks, threads=threads, size='6', cores=2, nodes=1,
                  mpi_library=library, verified=True, oversubscribed=False, result='pass',
                  values={'t_total': 2.0, 'phase_force': force, 'phase_movout': 0.5},
                  units={}, source='f:1', build_spec=build)


def bar_labels(monkeypatch, rows: list) -> list[tuple[str, list[float]]]:
    """The bars plots.phases draws for `rows`: (label, heights) each."""
    import matplotlib.axes
    from hybridverdict import plots
    seen = []
    draw = matplotlib.axes.Axes.bar

    def spy(self, x, height, *args, **kw):
        seen.append((kw.get('label'), list(height)[:2]))
        return draw(self, x, height, *args, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, 'bar', spy)
    plots.phases(SimpleNamespace(phases=rows))
    return seen


def test_md_phase_table_and_figure_name_the_build_of_two_builds(monkeypatch):
    """A Debug and a Release md at one place: rows and bars name their build (the
    figure drew one bar group for both, the table two identical-looking row sets)."""
    recs = [md_run(m, r, t, f, build) for build, hybrid in (('cmake Debug', 3.0),
                                                           ('cmake Release', 1.5))
            for m, r, t, f in (('mpi', 2, 1, 1.0), ('masteronly', 1, 2, hybrid))]
    rows = phases.phase_rows(recs)
    table = phases.table_rows(rows)
    assert [(r[0], r[4], r[9]) for r in table] == [
        ('mpich (cmake Debug)', 'force', '3.000'), ('mpich (cmake Debug)', 'movout', '1.000'),
        ('mpich (cmake Release)', 'force', '1.500'),
        ('mpich (cmake Release)', 'movout', '1.000')]
    assert {(r.build, r.library) for r in rows} == {('cmake Debug', 'L'),
                                                    ('cmake Release', 'L')}
    assert bar_labels(monkeypatch, rows) == [
        ('masteronly 1x2 vs 2x1 mpich (cmake Debug)@p (n=1/1)', [3.0, 1.0]),
        ('masteronly 1x2 vs 2x1 mpich (cmake Release)@p (n=1/1)', [1.5, 1.0])]
    # two MPI libraries of one build: the library tells them apart
    two_libs = phases.phase_rows([md_run(m, r, t, 1.0, 'b', lib) for lib in ('L1', 'L2')
                                  for m, r, t in (('mpi', 2, 1), ('masteronly', 1, 2))])
    assert {r[0] for r in phases.table_rows(two_libs)} == {'mpich (L1)', 'mpich (L2)'}


def test_md_phase_rows_of_one_build_are_as_before(monkeypatch):
    rows = phases.phase_rows([md_run('mpi', 2, 1, 1.0, 'b'), md_run('masteronly', 1, 2, 2.0, 'b')])
    assert all(type(r) is phases.PhaseRow for r in rows)
    assert [r[0] for r in phases.table_rows(rows)] == ['mpich', 'mpich']
    assert [label for label, _ in bar_labels(monkeypatch, rows)] == [
        'masteronly 1x2 vs 2x1 mpich@p (n=1/1)']


def test_history_series_per_node_count(tmp_path):
    body = [line('stream', {'bw': (100.0 * n, 'MB/s')}, nodes=n,
                 time=T0 + dt.timedelta(hours=i)) for i, n in enumerate(NODES * 2)]
    write(tmp_path / 'Stream.log', [header(['bw']), *body])
    series, total = history.history(read_perflogs([str(tmp_path)]))
    assert total == 3
    assert sorted((s.nodes, s.samples, s.values[-1]) for s in series) == [
        (1, 2, 100.0), (2, 2, 200.0), (4, 2, 400.0)]
    assert any('4 nodes' in s.label for s in series)


def test_pairs_without_a_verdict_are_named_per_node_count(tmp_path, capsys):
    """Runs left out of verdicts (oversubscribed on 2 nodes, a failed hybrid
    side on 4) give no verdict there, and the report names each such pair at
    its node count with the reason; the 1-node pair is judged as before."""
    from hybridverdict.cli import main
    body = []
    for i, nodes in enumerate((1, 2, 4)):
        for sample in range(3):
            when = T0 + dt.timedelta(minutes=10 * i + sample)
            over = nodes == 2
            body.append(line('spmv', {'t_total': (1.0, 's')}, mode='mpi', ranks=4, threads=1,
                             size='64', nodes=nodes, cores=4, time=when, oversubscribed=over))
            body.append(line('spmv', {'t_total': (0.5, 's')}, mode='masteronly', ranks=1,
                             threads=4, size='64', nodes=nodes, cores=4, time=when,
                             oversubscribed=over, result='fail' if nodes == 4 else 'pass'))
    write(tmp_path / 'Spmv.log', [header(['t_total']), *body])
    recs = read_perflogs([str(tmp_path)])
    assert [(v.nodes, v.verdict) for v in verdict.verdicts(recs)] == [(1, 'WIN')]
    left = verdict.unjudged(recs)
    assert [(u.nodes, u.hybrid_layout, u.mpi_layout) for u in left] == [
        (2, '1x4', '4x1'), (4, '1x4', '4x1')]
    assert left[0].why == 'masteronly 1x4: 3 oversubscribed; mpi 4x1: 3 oversubscribed'
    assert left[1].why == 'masteronly 1x4: 3 failed; mpi 4x1: 3 usable'
    rep = report.build(recs, ReadStats(), [str(tmp_path)])
    (sec,) = [s for s in rep.sections if s.key == 'unjudged']
    assert [row[4] for row in sec.rows] == [2, 4]
    # Without any verdict the command says which pairs it left out, and why.
    only_two = tmp_path / 'two'
    write(only_two / 'Spmv.log', [header(['t_total']), *(
        ln for ln in body if '|2|MPICH' in ln)])
    assert main(['--perflogs', str(only_two), '--no-write']) == 1
    err = capsys.readouterr().err
    assert 'no pure-MPI/hybrid pair' in err
    assert ('spmv 64 on local:shm mpich, 2 node(s): masteronly 1x4 against mpi 4x1: no '
            'verdict (masteronly 1x4: 3 oversubscribed; mpi 4x1: 3 oversubscribed)') in err


def test_functional_verdicts_of_oversubscribed_runs_per_node_count(tmp_path, capsys):
    """On a machine too small for its layouts every run is oversubscribed: asked
    for, the report judges those pairs by the verdicts' rule in a section of
    their own, one row per node count (never pooled), never among the verdicts;
    failed runs stay out, and a pair with a real verdict is not repeated."""
    from hybridverdict.cli import main
    body = []
    # speedup 2.0 on 1 node (usable: a real verdict), 1.0 on 2 nodes and 0.5 on
    # 4 (oversubscribed), and on 8 nodes the hybrid side failed.
    for i, (nodes, t_hyb) in enumerate(((1, 0.5), (2, 1.0), (4, 2.0), (8, 0.5))):
        for sample in range(5):
            when = T0 + dt.timedelta(minutes=10 * i + sample)
            over = nodes > 1
            body.append(line('spmv', {'t_total': (1.0, 's')}, mode='mpi', ranks=4, threads=1,
                             size='64', nodes=nodes, cores=4, time=when, oversubscribed=over))
            body.append(line('spmv', {'t_total': (t_hyb, 's')}, mode='masteronly', ranks=1,
                             threads=4, size='64', nodes=nodes, cores=4, time=when,
                             oversubscribed=over, result='fail' if nodes == 8 else 'pass'))
    write(tmp_path / 'logs' / 'Spmv.log', [header(['t_total']), *body])
    recs = read_perflogs([str(tmp_path / 'logs')])
    assert [(v.nodes, v.verdict, v.oversubscribed) for v in verdict.verdicts(recs)] == [
        (1, 'WIN', False)]
    found = verdict.functional(recs)
    assert [(v.nodes, v.verdict, v.n_mpi, v.n_hybrid) for v in found] == [
        (2, 'TIE', 5, 5), (4, 'LOSS', 5, 5)]
    assert all(v.oversubscribed and not v.confirmed for v in found)
    assert found[0].speedup == pytest.approx(1.0) and found[1].speedup == pytest.approx(0.5)
    # Not asked for: no such section.
    rep = report.build(recs, ReadStats(), [str(tmp_path)])
    assert not [s for s in rep.sections if s.key == 'functional_verdicts']
    rep = report.build(recs, ReadStats(), [str(tmp_path)], functional=True)
    assert [(v.nodes, v.oversubscribed) for v in rep.verdicts] == [(1, False)]
    (sec,) = [s for s in rep.sections if s.key == 'functional_verdicts']
    assert [(row[4], row[-1]) for row in sec.rows] == [(2, 'TIE'), (4, 'LOSS')]
    assert 'NOT FINDINGS' in sec.note
    # The crossover by node count, said as for verdicts.
    assert ('Functional: spmv size 64, masteronly 1x4 against mpi 4x1 (mpich@shm): hybrid '
            'loses from 4 nodes on (speedup 0.50 there); below: TIE at 2.') in sec.note
    # Only oversubscribed runs: no verdict, exit 1, unless asked for; then the
    # report is written with them, and says on stderr that they are no findings.
    over = tmp_path / 'over'
    write(over / 'Spmv.log', [header(['t_total']), *(ln for ln in body if '|2|MPICH' in ln)])
    assert main(['--perflogs', str(over), '--no-write']) == 1
    capsys.readouterr()
    out = tmp_path / 'out'
    assert main(['--perflogs', str(over), '--functional-verdicts', '--out', str(out)]) == 0
    err = capsys.readouterr().err
    assert 'no pure-MPI/hybrid pair' in err
    assert '1 functional verdict(s) of oversubscribed runs in the report (not findings)' in err
    (md,) = out.glob('verdict-*.md')
    text = md.read_text()
    assert '## Functional verdicts of oversubscribed runs (not findings)' in text
    assert 'No pure-MPI/hybrid pair in these runs.' in text


def test_a_zero_time_md_phase_has_no_ratio(monkeypatch):
    """Audit: a phase of 0 s in pure MPI showed as `inf` (0/0 and x/0 alike) and made the
    verdict JSON hold `Infinity`; its ratio is n/a (None, null), drawn as no bar."""
    from hybridverdict import sections
    recs = [md_run('mpi', 2, 1, 0.0, 'b'), md_run('masteronly', 1, 2, 0.0, 'b')]
    recs[0] = dataclasses.replace(recs[0], values={**recs[0].values, 'phase_movout': 0.0})
    rows = phases.phase_rows(recs)                 # force 0/0, movout 0.5/0
    assert [(r.phase, r.ratio) for r in rows] == [('force', None), ('movout', None)]
    ratio = phases.COLUMNS.index('hybrid/mpi')
    assert [r[ratio] for r in phases.table_rows(rows)] == ['n/a', 'n/a']
    assert [d['ratio'] for d in sections._data(rows, 'ratio')] == [None, None]
    ((_, heights),) = bar_labels(monkeypatch, rows)
    assert all(math.isnan(h) for h in heights)
    # a phase of pure MPI with time keeps its ratio, 0 s in hybrid too
    recs[1] = dataclasses.replace(recs[0], mode='masteronly', ranks=1, threads=2,
                                  values={**recs[0].values, 'phase_force': 0.0})
    recs[0] = md_run('mpi', 2, 1, 2.0, 'b')
    assert [r.ratio for r in phases.phase_rows(recs)] == [0.0, 0.0]


def test_md_phase_table_and_figure_name_the_system_of_two_systems(monkeypatch):
    """Audit: of records of two systems the phase table and figure showed `p` where the
    verdict table shows `alpha:p`: two systems' rows and bars looked alike."""
    recs = [dataclasses.replace(md_run(m, r, t, f, 'b'), system=system)
            for system, hybrid in (('alpha', 3.0), ('beta', 1.5))
            for m, r, t, f in (('mpi', 2, 1, 1.0), ('masteronly', 1, 2, hybrid))]
    rows = phases.phase_rows(recs)
    where = slice(phases.COLUMNS.index('stack'), phases.COLUMNS.index('partition') + 1)
    assert [(*r[where], r[4], r[9]) for r in phases.table_rows(rows)] == [
        ('mpich', 'alpha:p', 'force', '3.000'), ('mpich', 'alpha:p', 'movout', '1.000'),
        ('mpich', 'beta:p', 'force', '1.500'), ('mpich', 'beta:p', 'movout', '1.000')]
    assert bar_labels(monkeypatch, rows) == [
        ('masteronly 1x2 vs 2x1 mpich@alpha:p (n=1/1)', [3.0, 1.0]),
        ('masteronly 1x2 vs 2x1 mpich@beta:p (n=1/1)', [1.5, 1.0])]
    # and a second build of one of them: both named
    recs += [md_run(m, r, t, 2.0, 'other') for m, r, t in (('mpi', 2, 1), ('masteronly', 1, 2))]
    recs = [dataclasses.replace(r, system='alpha') if r.build_spec == 'other' else r
            for r in recs]
    assert {tuple(r[where]) for r in phases.table_rows(phases.phase_rows(recs))} == {
        ('mpich (b)', 'alpha:p'), ('mpich (other)', 'alpha:p'), ('mpich', 'beta:p')}


def test_history_labels_name_the_system_build_and_library_of_series_alike(tmp_path):
    """Audit: two builds or two systems of one series key read alike in the history's
    table and figure titles ('stream 1 mpi 2x1 mpich@shm: bw' twice)."""
    def logs(name: str, lines: list[str]) -> list[str]:
        write(tmp_path / name / 'Stream.log', [header(['bw']), *lines])
        series, _ = history.history(read_perflogs([str(tmp_path / name)]))
        labels = [row[0] for row in history.rows(series)]
        assert labels == [s.label for s in series] and len(set(labels)) == len(labels)
        return sorted(labels)

    runs = [line('stream', {'bw': (100.0, 'MB/s')}, system=system,
                 time=T0 + dt.timedelta(hours=i)) for i, system in enumerate(('a', 'b'))]
    assert logs('one', runs[:1]) == ['stream 1 mpi 2x1 mpich@shm: bw']     # as before
    assert logs('systems', runs) == ['stream 1 mpi 2x1 mpich@a:shm: bw',
                                     'stream 1 mpi 2x1 mpich@b:shm: bw']
    debug = runs[0].replace('cmake Release', 'cmake Debug')
    assert logs('builds', [runs[0], debug]) == [
        'stream 1 mpi 2x1 mpich (cmake Debug mpich)@shm: bw',
        'stream 1 mpi 2x1 mpich (cmake Release mpich)@shm: bw']
    lib2 = runs[0].replace('MPICH Version: 4.0.2', 'MPICH Version: 4.1.0')
    assert logs('libraries', [runs[0], lib2]) == [
        'stream 1 mpi 2x1 mpich (MPICH Version: 4.0.2)@shm: bw',
        'stream 1 mpi 2x1 mpich (MPICH Version: 4.1.0)@shm: bw']
    # another kernel of one build keeps its label beside a kernel of two
    osu = line('osu_bw', {'bw': (100.0, 'MB/s')}, system='a').replace('cmake Release', 'spack')
    assert 'osu_bw 1 mpi 2x1 mpich@shm: bw' in logs('kernels', [runs[0], debug, osu])


def test_spmv_efficiency_and_ni_rows_name_the_system_and_build_where_several(tmp_path):
    """Copies of one system's SpMV runs on system beta and from a Debug build: the rows of
    the efficiency and network-interface tables looked identical ('mpich', 'shm' three
    times); they name the system where several, the build where one place holds several."""
    recs = spmv_logs(tmp_path, {1: 2.0, 2: 1.5})
    recs = [*recs, *(dataclasses.replace(r, system='beta') for r in recs),
            *(dataclasses.replace(r, build_spec='cmake Debug mpich') for r in recs)]
    rows = spmv_model.efficiency_rows(spmv_model.efficiencies(recs))
    assert [r[:4] for r in rows] == [
        ['mpich', 'beta:shm', '64', 1], ['mpich', 'beta:shm', '64', 2],
        ['mpich (cmake Debug mpich)', 'local:shm', '64', 1],
        ['mpich (cmake Release mpich)', 'local:shm', '64', 1],
        ['mpich (cmake Debug mpich)', 'local:shm', '64', 2],
        ['mpich (cmake Release mpich)', 'local:shm', '64', 2]]
    ni = spmv_model.network_interface(recs)
    assert [r[:2] for r in spmv_model.ni_rows(ni)] == [
        ['mpich', 'beta:shm'], ['mpich (cmake Debug mpich)', 'local:shm'],
        ['mpich (cmake Release mpich)', 'local:shm']]
    assert [(n.system, n.build) for n in ni] == [('beta', 'cmake Release mpich'),
                                                 ('local', 'cmake Debug mpich'),
                                                 ('local', 'cmake Release mpich')]
    # one system and one build: the rows as they always were
    one = [r for r in recs if r.system == 'local' and r.build_spec == 'cmake Release mpich']
    assert {tuple(r[:2]) for r in spmv_model.efficiency_rows(spmv_model.efficiencies(one))} \
        == {('mpich', 'shm')}
    assert [r[:2] for r in spmv_model.ni_rows(spmv_model.network_interface(one))] == [
        ['mpich', 'shm']]
