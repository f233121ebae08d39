"""The report command's outputs: terminal, Markdown, JSON, HTML with figures, tidy CSV/JSON."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import os
import re

import polars as pl
import pytest
from conftest import label_spy
from hybridverdict import glance, history, tidy
from hybridverdict.cli import main
from hybridverdict.perflog import ReadStats, read_perflogs
from hybridverdict.report import build
from hybridverdict.verdict import verdicts
from hybridverdict.write import SUFFIXES, write_all
from perflog_writer import T0, header, hockney_runs, line, ring_values, write, write_runs
from test_runreport import case, report

SIZES = [1, 8, 64, 512, 4096, 65536, 1048576]
PHASES = {f'phase_{p}': (0.1, 's') for p in ('force', 'movout', 'sum', 'movea', 'moveb',
                                               'neigh')}


def dataset(root):
    """Perflogs of every kind the report analyses, two stacks, a few sessions."""
    logs = root / 'perflogs/local'
    for part in ('shm', 'tcp'):
        for stack in ('openmpi', 'mpich'):
            kw = {'stack': stack, 'part': part}
            spmv = []
            for i in range(3):
                when = T0 + dt.timedelta(days=i)
                for mode, r, t, tt in (('mpi', 2, 1, 2.0), ('masteronly', 1, 2, 1.0),
                                       ('serial', 1, 1, 1.9)):
                    spmv.append(line('spmv', {
                        'fom': (2.5 + i, 'GFLOP/s', 2.5, -0.1, 0.1), 't_total': (tt, 's'),
                        't_comp': (0.8 * tt, 's'), 't_comm': (0.2 * tt, 's')},
                        mode=mode, ranks=r, threads=t, size='16', time=when, **kw))
            write(logs / f'{part}/{stack}/SpmvCheck.log',
                  [header(['fom', 't_total', 't_comp', 't_comm'])] + spmv)
            write(logs / f'{part}/{stack}/MdCheck.log', [header(['t_total', *PHASES])] + [
                line('md', {'t_total': (1.0, 's'), **PHASES}, mode=m, ranks=r, threads=t,
                     size='6', **kw) for m, r, t in (('mpi', 2, 1), ('masteronly', 1, 2))])
            write_runs(logs / f'{part}/{stack}/OsuLatency.log', 'osu_latency',
                       hockney_runs(0.5 if part == 'shm' else 10.0, 5000.0, SIZES), **kw)
            write_runs(logs / f'{part}/{stack}/RingPingpong.log', 'ring-pingpong',
                       hockney_runs(0.6 if part == 'shm' else 11.0, 4000.0, SIZES), **kw)
            write_runs(logs / f'{part}/{stack}/RingCheck.log', 'ring',
                       [{'bw_k1_1048576': (4000.0, 'MB/s')}] * 2, **kw)
            write_runs(logs / f'{part}/{stack}/OsuAllreduce.log', 'osu_allreduce',
                       [{'lat_8': (3.0, 'us'), 'lat_1024': (5.0, 'us')}], **kw)
    return root / 'perflogs'


def read_dataset(root):
    """The perflogs of ``dataset`` under `root`, their records and the read's counts."""
    logs = dataset(root)
    stats = ReadStats()
    return logs, read_perflogs([str(logs)], stats=stats), stats


def dataset_report(root, **kw):
    """The report of ``dataset`` under `root` (``build``'s other arguments: `kw`)."""
    logs, recs, stats = read_dataset(root)
    return build(recs, stats, [str(logs)], **kw)


def digest(root) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob('*')) if p.is_file()}


DEFAULT_KINDS = ('md', 'json', 'html', 'parquet')


def written(out, kinds=DEFAULT_KINDS) -> dict[str, str]:
    """The text of each output (the Parquet file: its path), checking nothing else is there."""
    files = sorted(p.name for p in out.iterdir())
    (md,) = [f for f in files if f.endswith('.md')]
    stem = md[:-3]
    assert sorted(files) == sorted(stem + SUFFIXES[k] for k in kinds)
    return {k: str(out / (stem + SUFFIXES[k])) if k == 'parquet'
            else (out / (stem + SUFFIXES[k])).read_text() for k in kinds}


def test_one_command_writes_every_output(tmp_path, capsys):
    logs = dataset(tmp_path)
    before = digest(logs)
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(logs), '--out', str(out), '--tidy', 'parquet', 'csv',
                 'json']) == 0
    term = capsys.readouterr().out
    assert digest(logs) == before                                  # inputs untouched
    files = written(out, DEFAULT_KINDS + ('csv', 'tidy_json'))
    assert term.startswith('System: local; runs 2026-11-22 10:00 .. 2026-11-24 10:00 UTC')
    assert files['md'].startswith('# Hybrid vs pure MPI at equal cores: local')
    assert '<title>Hybrid vs pure MPI: local</title>' in files['html']
    for text in (term, files['md'], files['html']):
        assert 'MPICH Version: 4.0.2' in text and 'Open MPI v4.1.4' in text
        assert 'Hockney' in text and 'MPI-stack comparison' in text
    assert '2026-11-22' in files['md'] and '2026-11-24' in files['md']
    assert 'needs >= 2 rank counts' in files['md']

    page = files['html']
    for title in ('Verdict matrix', 'Speedup against problem size', 'SpMV efficiencies',
                  'MD phase breakdown', 'Hockney fits', 'MPI-stack comparison',
                  'Ring kernel against OSU', 'Ring saturation curve', 'Collectives',
                  'History of the performance variables'):
        assert title in page, title
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 7
    assert all(base64.b64decode(i)[:8] == b'\x89PNG\r\n\x1a\n' for i in images)
    assert 'src="http' not in page and '<link' not in page          # self-contained
    assert 'class="WIN"' in page and 'n=3/3' in page                  # coloured, samples

    verdicts = json.loads(files['json'])
    assert verdicts['meta']['stacks'] == {'mpich': ['MPICH Version: 4.0.2'],
                                          'openmpi': ['Open MPI v4.1.4']}
    assert 'Hockney fits t = t0 + m / r_inf (Xu & Hwang)' in verdicts['sections']
    tidy_json = json.loads(files['tidy_json'])
    assert tidy_json['meta']['systems'] == ['local']
    assert tidy_json['meta']['rows'] == len(tidy_json['data'])
    assert files['csv'].splitlines()[0] == ','.join(tidy_json['columns'])
    assert len(files['csv'].splitlines()) == len(tidy_json['data']) + 1
    parquet = pl.read_parquet(files['parquet'])
    assert parquet.columns == tidy_json['columns'] and parquet.height == len(tidy_json['data'])
    assert tidy.read_meta(files['parquet'])['rows'] == parquet.height
    assert os.path.getsize(files['parquet']) < len(files['csv']) / 3


def test_outputs_never_overwrite_existing_files(tmp_path):
    rep = dataset_report(tmp_path)
    out = tmp_path / 'out'
    out.mkdir()
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.timezone.utc)
    squatter = out / 'verdict-20261122T120000Z.html'       # one file of the first stem
    squatter.write_text('keep me')
    first = write_all(rep, str(out), now=now)
    second = write_all(rep, str(out), now=now)
    assert squatter.read_text() == 'keep me'
    assert first['html'].endswith('verdict-20261122T120000Z-1.html')
    assert second['md'].endswith('verdict-20261122T120000Z-2.md')
    assert len(list(out.iterdir())) == 1 + 2 * len(DEFAULT_KINDS)


def test_unknown_fields_and_truncated_lines_are_counted_and_warned(tmp_path, capsys):
    logs = dataset(tmp_path)
    path = logs / 'local/shm/mpich/SpmvCheck.log'
    lines = path.read_text().splitlines()
    lines[0] += '|new_field'
    lines[1:] = [ln + 'x|' for ln in lines[1:]]
    lines.append(lines[1][:50])                                     # truncated
    lines.append(lines[1] + 'one|too|many|')
    path.write_text('\n'.join(lines) + '\n')
    assert main(['--perflogs', str(logs), '--no-write']) == 0
    err = capsys.readouterr().err
    assert 'skipped 2 perflog line(s)' in err
    assert 'ignored unknown perflog field(s): new_field (1 file(s))' in err


def test_since_limits_the_report_but_not_the_history(tmp_path):
    logs, recs, stats = read_dataset(tmp_path)
    since = T0 + dt.timedelta(days=2)
    rep = build(recs, stats, [str(logs)], since=since)
    assert rep.meta.first >= since and rep.meta.records < len(recs)
    assert all(v.n_mpi == 1 for v in rep.verdicts if v.kernel == 'spmv')
    fom = [s for s in rep.history if s.kernel == 'spmv' and s.variable == 'fom']
    assert fom and all(s.samples == 3 and s.has_band for s in fom)
    assert all(s.out_of_band == 2 for s in fom if s.mode == 'mpi')   # 3.5, 4.5 > 2.75


def test_history_is_limited_and_downsampled(tmp_path):
    runs = [{'fom': (float(i), 'GB/s', 100.0, -0.5, 0.5)} for i in range(500)]
    write_runs(tmp_path / 'x.log', 'stream', runs)
    write_runs(tmp_path / 'y.log', 'spmv', [{'t_total': (1.0, 's')}] * 5)
    series, total = history.history(read_perflogs([str(tmp_path)]), limit=1, max_points=50)
    assert total == 2 and len(series) == 1
    (s,) = series
    assert (s.variable, s.samples, len(s.values)) == ('fom', 500, 50)
    assert s.out_of_band == 500 - 101 and s.low[0] == 50.0 and s.high[0] == 150.0


def test_run_report_alone_is_an_input(tmp_path, capsys):
    reports = tmp_path / 'reports'
    reports.mkdir()
    report(reports / 'run-report-7.json', [case(t=2.0), case('masteronly', 1, 2, t=1.0,
                                                            when=T0.timestamp() + 30)])
    out = tmp_path / 'out'
    assert main(['--run-reports', str(reports), '--out', str(out)]) == 0
    assert 'WIN' in capsys.readouterr().out
    assert f'records (0 lines skipped) in {reports}' in written(out)['md']


def test_communication_data_alone_makes_a_report(tmp_path, capsys):
    write_runs(tmp_path / 'logs/Osu.log', 'osu_latency', hockney_runs(1.0, 3000.0, SIZES))
    assert main(['--perflogs', str(tmp_path / 'logs'), '--out', str(tmp_path / 'o')]) == 0
    captured = capsys.readouterr()
    assert 'no pure-MPI/hybrid pair' in captured.err
    assert 'Hockney fits' in captured.out


@pytest.mark.parametrize('args,message', [
    (['--history-limit', '-1'], '--history-limit must be from 0 to 10000, got -1'),
    (['--history-points', '1'], '--history-points must be from 2 to 1000000, got 1'),
])
def test_bad_options_are_clear_errors(args, message, capsys):
    with pytest.raises(SystemExit):
        main(args)
    assert message in capsys.readouterr().err


def test_sections_without_data_say_what_they_need(tmp_path, capsys):
    write_runs(tmp_path / 'logs/Spmv.log', 'spmv', [{'t_total': (2.0, 's')}])
    write(tmp_path / 'logs/Spmv2.log', [header(['t_total']), line(
        'spmv', {'t_total': (1.0, 's')}, mode='masteronly', ranks=1, threads=2)])
    out = tmp_path / 'o'
    assert main(['--perflogs', str(tmp_path / 'logs'), '--out', str(out)]) == 0
    assert 'No data in these runs for: ' in capsys.readouterr().out
    files = written(out)
    for text in (files['md'], files['html']):
        assert 'No data: needs point-to-point runs' in text
        assert 'Hockney fits' in text and 'Ring saturation curve' in text


def test_history_limit_0_says_none_drawn_not_no_data(tmp_path, capsys):
    """--history-limit 0 draws no series of the verified runs: the History section says
    so, not that it lacks verified runs."""
    out = tmp_path / 'o'
    assert main(['--perflogs', str(dataset(tmp_path)), '--out', str(out),
                 '--history-limit', '0']) == 0
    terminal = capsys.readouterr().out
    assert 'History of the performance variables: 0 of ' in terminal
    assert 'History of the performance variables' not in terminal.split(
        'No data in these runs for: ')[-1]
    md = written(out)['md'].split('## History of the performance variables')[1]
    assert 'No data: needs verified runs' not in md
    assert re.search(r'0 of \d+ series drawn \(--history-limit 0\)', md)


def test_figures_in_one_or_two_processes_are_the_same_set(tmp_path):
    from hybridverdict import plots
    rep = dataset_report(tmp_path)
    two = plots.Drawing(rep).result()
    one = plots.Drawing(rep, parallel=False).result()
    assert set(one) == set(two) == {'speedup', 'heatmaps', 'efficiencies', 'phases', 'hockney',
                                    'saturation', 'stacks', 'collectives', 'history'}
    assert [f.caption for f in one['hockney']] == [f.caption for f in two['hockney']]


def test_history_draws_the_series_that_left_its_band_first(tmp_path):
    steady = [{'fom': (10.0, 'GB/s', 10.0, -0.1, 0.1)} for _ in range(50)]
    dropped = [{'fom': (10.0, 'GB/s', 10.0, -0.1, 0.1)} for _ in range(5)]
    dropped[-1] = {'fom': (5.0, 'GB/s', 10.0, -0.1, 0.1)}
    write_runs(tmp_path / 'a.log', 'stream', steady, stack='openmpi')
    write_runs(tmp_path / 'b.log', 'stream', dropped, stack='mpich')
    (s,), total = history.history(read_perflogs([str(tmp_path)]), limit=1)
    assert total == 2 and (s.stack, s.out_of_band, s.values[-1]) == ('mpich', 1, 5.0)


#: every analysis section of the report, in report order (a section that goes missing
#: from the registry, or loses its data, fails here)
ALL_SECTIONS = ['scaling', 'unjudged', 'md_phases', 'spmv_efficiencies', 'network_interface',
                'spmv_overlap', 'hockney', 'stack_comparison', 'ring_vs_osu',
                'ring_osu_accuracy', 'saturation', 'masteronly_across_nodes', 'collectives',
                'history']
#: sections that need runs on several nodes (the data set here is one node)
MULTI_NODE = {'scaling', 'network_interface', 'masteronly_across_nodes'}
#: sections only on request, after the one named: the functional verdicts
#: (--functional-verdicts) after the pairs without a verdict
ON_REQUEST = {'functional_verdicts': 'unjudged'}
#: sections of a report over the history store only: the morning page of a nightly
#: (tests/test_changes.py)
STORE_ONLY = {'since_last_night'}


def test_every_section_is_in_every_output(tmp_path):
    from hybridverdict import html, render, sections
    rep = dataset_report(tmp_path)
    assert [s.key for s in rep.sections] == ALL_SECTIONS
    assert len(sections.ANALYSES) == len(ALL_SECTIONS) + len(ON_REQUEST) + len(STORE_ONLY)
    asked = dataset_report(tmp_path / 'again', functional=True)
    keys = list(ALL_SECTIONS)
    for key, after in ON_REQUEST.items():
        keys.insert(keys.index(after) + 1, key)
    assert [s.key for s in asked.sections] == keys
    # no pair of this data set is oversubscribed: the section says what it needs
    assert not next(s for s in asked.sections if s.key == 'functional_verdicts').rows
    with_data = {s.key for s in rep.sections if s.rows}
    # every pair of this data set is judged: no pair without a verdict
    assert with_data == set(ALL_SECTIONS) - {'spmv_overlap', 'ring_osu_accuracy',
                                             'unjudged'} - MULTI_NODE
    md, page = render.markdown(rep), html.page(rep, {})
    data = json.loads(render.verdict_json(rep))['sections']
    for s in rep.sections:
        assert f'## {s.title}' in md and f'<h2 id="{s.key}">' in page, s.key
        assert s.needs and (s.title in data) == bool(s.data), s.key
    # the objects the figures are drawn from are handed to the report
    assert rep.curves and rep.headlines and rep.saturation and rep.collectives
    assert rep.efficiencies and rep.phases and rep.history and rep.history_total


def test_the_markdown_has_no_raw_html(tmp_path):
    """Review: the report's own placeholders (lat_<bytes>, bw_k<k>_<bytes>) were read as
    unknown HTML tags and dropped by GitHub's and GitLab's renderers, and a name from
    the data (a stack's, a system's) could bring a <script>; escaped, they show as
    written, and a '<' before a digit or a blank, or in a code span, is left alone."""
    from hybridverdict import render
    md = render.markdown(dataset_report(tmp_path))
    assert 'bw_k1_\\<bytes>' in md and not re.search(r'(?<!\\)<[A-Za-z/!?]', md)
    for text, shown in (('<script>alert(1)</script>', '\\<script>alert(1)\\</script>'),
                        ('p < 0.05, <1%', 'p < 0.05, <1%'), ('a `<b>` c', 'a `<b>` c'),
                        ('\\<x> \\\\<y>', '\\<x> \\\\\\<y>')):
        assert render.no_html(text) == shown, text


def test_the_report_judges_the_ring_per_message_size(tmp_path, capsys):
    """Issue 25: one verdict per message size of the ring's sweep (8 B latency-bound:
    hybrid wins; 1 MiB bandwidth-bound: it loses), named by the message; a perflog
    written before the per-size times (mpich here) keeps its one verdict."""
    sweep = '8,65536,1048576'
    for stack, new in (('openmpi', True), ('mpich', False)):
        lines = []
        for i in range(5):
            when = T0 + dt.timedelta(seconds=10 * i)
            j = 1 + 0.002 * (i % 2)
            for mode, r, t, per in (('mpi', 2, 1, {8: 2e-6 * j, 65536: 1e-4 * j,
                                                   1048576: 1e-3 * j}),
                                    ('masteronly', 1, 2, {8: 1e-6, 65536: 1e-4,
                                                          1048576: 2e-3})):
                run = ring_values(per if new else None, t_total=2.0 if mode == 'mpi' else 1.0)
                lines.append(line('ring', run, mode=mode, ranks=r, threads=t, size=sweep,
                                  stack=stack, time=when + dt.timedelta(seconds=r == 1)))
        write(tmp_path / f'logs/{stack}/RingCheck.log', [header(list(run))] + lines)
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(tmp_path / 'logs'), '--out', str(out)]) == 0
    term = capsys.readouterr().out
    files = written(out)
    found = json.loads(files['json'])['verdicts']
    calls = sorted((v['stack'], v['size'], v['variable'], v['verdict']) for v in found)
    assert calls == [('mpich', sweep, 't_total', 'WIN'),
                     ('openmpi', '1MiB', 't_msg_1048576', 'LOSS'),
                     ('openmpi', '64KiB', 't_msg_65536', 'TIE'),
                     ('openmpi', '8B', 't_msg_8', 'WIN')]
    for text in (term, files['md']):
        rows = [ln.replace('|', ' ').split() for ln in text.splitlines()]
        ring_rows = [r[:3] for r in rows if r and r[0] == 'ring']
        assert ['ring', '8B', 'openmpi'] in ring_rows and ['ring', '1MiB', 'openmpi'] in ring_rows
        assert ['ring', sweep, 'mpich'] in ring_rows
        assert ['ring', sweep, 'openmpi'] not in ring_rows
    # the sentences name the message sizes, the sizes in byte order
    assert ('ring: hybrid wins 2, loses 1, ties 1 and is undecided (INCONCLUSIVE) in 0 of 4'
            in files['md'])
    assert 'Hybrid loses most with masteronly 1x2 at size 1MiB' in files['md']
    grid = next(g for g in glance.grids(verdicts(read_perflogs([str(tmp_path / 'logs')])))
                if g.stack == 'openmpi')
    assert grid.sizes == ['8B', '64KiB', '1MiB']


def _rounds_session(root, rounds: int, failed) -> str:
    """Perflogs of spmv 2x1 against masteronly 1x2 in `rounds` named rounds, too noisy
    to decide; failed(mode, k): that run failed."""
    lines, t = [], T0
    for k in range(rounds):
        for mode, r, th in (('mpi', 2, 1), ('masteronly', 1, 2)):
            t += dt.timedelta(seconds=2)
            value = 1.0 if mode == 'mpi' else (1.0, 0.7, 1.3)[k % 3]
            lines.append(line('spmv', {'t_total': (value, 's')}, mode=mode, ranks=r,
                              threads=th, size='16', time=t,
                              name=f'SpmvCheck %layout={mode}_{r}x{th} %problem=16 %sample={k}',
                              result='fail' if failed(mode, k) else 'pass'))
    write(root / 'SpmvCheck.log', [header(['t_total'])] + lines)
    return str(root)


@pytest.mark.parametrize('cap, rounds, failed', [
    ('5', 5, lambda mode, k: False),                     # HARNESS_MAX_ROUNDS=5
    ('15', 16, lambda mode, k: k >= 3),                  # rounds 3-15 failed on both sides
    ('15', 6, lambda mode, k: mode == 'masteronly' and k >= 3),  # below the cap
])
def test_the_reports_stopped_agrees_with_the_sequential_rounds(tmp_path, monkeypatch,
                                                               cap, rounds, failed):
    """The report's `stopped` column counts the rounds run and caps them as the
    sequential rounds' driver does (HARNESS_MAX_ROUNDS, a failed round included)."""
    from harnesscore import plan
    from hybridverdict import sequential
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', cap)
    logs = _rounds_session(tmp_path / 'logs', rounds, failed)
    stats = ReadStats()
    recs = read_perflogs([logs], stats=stats)
    (v,) = build(recs, stats, [logs]).verdicts
    (driver,), batches = sequential.undecided(recs, plan.max_rounds())
    assert v.verdict == driver.verdict == 'INCONCLUSIVE'
    assert v.stopped == driver.stopped == ('budget' if batches else 'cap')


def _system_pair(system: str, build: str, speedup: float):
    from hybridverdict.verdict import Verdict
    return Verdict(system=system, partition='shm', stack='mpich', kernel='spmv', size='16',
                   cores=2, hybrid_mode='masteronly', hybrid_layout='1x2', mpi_layout='2x1',
                   t_mpi=2.0, t_hybrid=2.0 / speedup, n_mpi=3, n_hybrid=3, speedup=speedup,
                   noise=0.0, verdict='WIN' if speedup > 1 else 'LOSS',
                   mpi_library='MPICH Version: 4.0.2', build=build)


def test_the_verdict_table_and_speedup_lines_name_the_system_and_build(monkeypatch):
    """Audit: the table's rows of two systems (or builds) of one stack and partition
    looked the same, and the speedup figure drew them as one zig-zag line."""
    from types import SimpleNamespace

    from hybridverdict import plots, render
    labels = label_spy(monkeypatch, 'errorbar')
    where = render.COLUMNS.index('stack'), render.COLUMNS.index('partition')
    cases = {
        'systems': ([_system_pair('alpha', 'b', 2.0), _system_pair('beta', 'b', 0.5)],
                    [('mpich', 'alpha:shm'), ('mpich', 'beta:shm')],
                    ['mpich@alpha:shm', 'mpich@beta:shm']),
        'builds': ([_system_pair('alpha', 'Release', 2.0), _system_pair('alpha', 'Debug', 0.5)],
                   [('mpich (Release)', 'shm'), ('mpich (Debug)', 'shm')],
                   ['mpich (Debug)@shm', 'mpich (Release)@shm']),
        'one': ([_system_pair('alpha', 'b', 2.0)], [('mpich', 'shm')], ['mpich@shm'])}
    for name, (found, cells, lines) in cases.items():
        assert [(r[where[0]], r[where[1]]) for r in render.rows(found)] == cells, name
        labels.clear()
        plots.speedup(SimpleNamespace(verdicts=found))
        assert labels == [f'masteronly 1x2 vs 2x1 {w} (n=6)' for w in lines], name


def test_the_verdict_json_holds_no_infinity(tmp_path):
    """Audit: a zero-time MD phase made the JSON's phase ratio `Infinity` (not JSON);
    non-finite floats are written as null, as in the tidy JSON."""
    from hybridverdict import render
    rep = dataset_report(tmp_path)
    md = next(s for s in rep.sections if s.key == 'md_phases')
    md.data.append({'ratio': math.inf, 'nan': math.nan, 'ok': [1.5, (2.0,)]})
    text = render.verdict_json(rep)
    assert 'Infinity' not in text and 'NaN' not in text
    strict = json.loads(text, parse_constant=lambda c: pytest.fail(f'{c} in the JSON'))
    assert strict['sections'][md.title][-1] == {
        'ratio': None, 'nan': None, 'ok': [1.5, [2.0]]}
    assert render.finite({'a': (math.inf, -math.inf, 1.0)}) == {'a': [None, None, 1.0]}


def test_ring_against_osu_has_rows_where_the_two_log_their_library_differently(tmp_path,
                                                                               capsys):
    """The checks' own records: the ring logs MPI_Get_library_version ('MPICH Version:
    4.0.2'), OSU '<prefix> (<lib>)'; paired by equal strings, the section said "No
    data" although both ran."""
    logs = tmp_path / 'logs'
    write_runs(logs / 'RingPingpong.log', 'ring-pingpong', hockney_runs(0.6, 4000.0, SIZES))
    osu = write_runs(logs / 'OsuLatency.log', 'osu_latency', hockney_runs(0.5, 5000.0, SIZES))
    osu.write_text(osu.read_text().replace('|MPICH Version: 4.0.2|', '|MPICH (libmpich.so.12)|'))
    out = tmp_path / 'o'
    assert main(['--perflogs', str(logs), '--out', str(out)]) == 0
    capsys.readouterr()
    files = written(out)
    section = files['md'].split('## Ring kernel against OSU')[1].split('\n## ')[0]
    assert 'No data' not in section
    (row,) = [r for r in section.splitlines() if r.startswith('| shm')]
    assert [c.strip() for c in row.split('|')[1:5]] == ['shm', 'mpich', 'cmake Release mpich',
                                                        'cmake Release mpich']
    (data,) = json.loads(files['json'])['sections']['Ring kernel against OSU']
    assert (data['library'], data['osu_library']) == ('MPICH Version: 4.0.2',
                                                      'MPICH (libmpich.so.12)')


def test_names_with_dollars_a_size_of_0_and_table_breaking_text_make_a_report(tmp_path,
                                                                             capsys):
    """Audit: a build spec of an unexpanded '$MY_C_FLAGS $MY_LD_FLAGS' beside a
    second build (the figures name both) crashed the report in matplotlib's
    mathtext, exit 1 and no file, every night while the runs were in the window;
    a problem size of 0 divided by zero on the speedup's axis."""
    runs = []
    for spec, size in (('cmake Release mpich', '16'), ('cmake $MY_C_FLAGS $MY_LD_FLAGS', '16'),
                       ('cmake Release mpich', '0')):
        for i in range(3):
            when = T0 + dt.timedelta(days=i, minutes=5 if '$' in spec else 0)
            runs += [line('spmv', {'t_total': (t, 's')}, mode=mode, ranks=r, threads=th,
                          size=size, time=when).replace('|cmake Release mpich|', f'|{spec}|')
                     for mode, r, th, t in (('mpi', 2, 1, 2.0), ('masteronly', 1, 2, 1.0))]
    write(tmp_path / 'perflogs/local/SpmvCheck.log', [header(['t_total']), *runs])
    out = tmp_path / 'out'
    assert main(['--perflogs', str(tmp_path / 'perflogs'), '--out', str(out),
                 '--no-history-store']) == 0, capsys.readouterr().err
    html = written(out)['html']
    assert 'cmake $MY_C_FLAGS $MY_LD_FLAGS' in html and 'Speedup of hybrid' in html
    # a run report's library with '|' and a line break: one row, one line
    reports = tmp_path / 'reports'
    reports.mkdir()
    odd = 'MPICH | 4.0\nsecond line'
    report(reports / 'run-report-1.json', [
        case(t=2.0, mpi_library=odd, size='16|a'),
        case('masteronly', 1, 2, t=1.0, when=T0.timestamp() + 30, mpi_library=odd,
             size='16|a')])
    out = tmp_path / 'out2'
    assert main(['--run-reports', str(reports), '--out', str(out), '--no-history-store']) == 0
    md = written(out)['md']
    assert '- mpich: MPICH \\| 4.0 second line' in md
    assert '- mpich: MPICH | 4.0 second line\n' in capsys.readouterr().out  # the terminal's
    lines = md.splitlines()
    head = lines.index(next(x for x in lines if x.startswith('| kernel ')))
    row = lines[head + 2]
    assert '| 16\\|a ' in row and row.count('|') - row.count('\\|') == lines[head].count('|')
