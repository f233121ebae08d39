"""The verdicts at a glance on big nodes: heatmaps (layouts x sizes) and the sentences
that say where hybrid wins and loses, from synthetic perflogs of 16- and 128-core nodes."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html as htmllib
import re
import struct
import zlib

import pytest
from hybridverdict import glance
from hybridverdict.cli import main
from hybridverdict.perflog import read_perflogs
from hybridverdict.verdict import Verdict, verdicts
from perflog_writer import T0, header, line, write

SIZES = ('16', '32', '64', '128')
BASE = {'16': 0.01, '32': 0.08, '64': 0.6, '128': 5.0}     # T_mpi [s]
MODES = ('masteronly', 'funneled')


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def factor(cores: int, mode: str, ranks: int, size: str) -> float:
    """T_hybrid / T_mpi of the synthetic node: masteronly with 4 threads per rank wins at
    the two large sizes (1.6x), one rank per node with funneled loses worst at the
    smallest size (0.5x), a few layouts tie, the others lose by 20%."""
    threads = cores // ranks
    if mode == 'masteronly' and threads == 4 and size in ('64', '128'):
        return 1 / 1.6 if size == '64' else 1 / 1.3
    if mode == 'funneled' and ranks == 1:
        return 2.0 if size == '16' else 1.5
    if threads == 2:
        return 1.01                                           # a TIE
    return 1.2


def layouts(cores: int) -> list[tuple[str, int, int]]:
    return [(m, r, cores // r) for r in divisors(cores)[:-1] for m in MODES]


def big_node_logs(root, cores: int, stacks=('openmpi',), parts=('shm',)):
    """Three samples of pure MPI and every hybrid layout at each size, per stack and
    partition: one node of `cores` cores."""
    for part in parts:
        for stack in stacks:
            lines = [header(['t_total'])]
            for size in SIZES:
                for i in range(3):
                    when = T0 + dt.timedelta(minutes=i)
                    jitter = 1 + 0.002 * i
                    lines.append(line('spmv', {'t_total': (BASE[size] * jitter, 's')},
                                      mode='mpi', ranks=cores, threads=1, size=size,
                                      stack=stack, part=part, time=when))
                    for mode, r, t in layouts(cores):
                        f = factor(cores, mode, r, size)
                        lines.append(line('spmv', {'t_total': (BASE[size] * f * jitter, 's')},
                                          mode=mode, ranks=r, threads=t, size=size,
                                          stack=stack, part=part, time=when))
            write(root / f'perflogs/{part}/{stack}/SpmvCheck.log', lines)
    return root / 'perflogs'


def png_text(png: bytes) -> dict[str, str]:
    """The tEXt/iTXt chunks of a PNG."""
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    out, at = {}, 8
    while at < len(png):
        (length,), kind = struct.unpack('>I', png[at:at + 4]), png[at + 4:at + 8]
        data = png[at + 8:at + 8 + length]
        if kind == b'tEXt':
            key, _, text = data.partition(b'\0')
            out[key.decode('latin-1')] = text.decode('latin-1')
        elif kind == b'iTXt':
            key, _, rest = data.partition(b'\0')
            compressed, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b'\0')
            _tkey, _, text = rest.partition(b'\0')
            out[key.decode()] = (zlib.decompress(text) if compressed else text).decode()
        at += 12 + length
    return out


def heatmaps_in(page: str) -> dict[str, dict[str, str]]:
    """Title -> PNG text of every heatmap embedded in an HTML page."""
    out = {}
    for caption, data in re.findall(
            r'<img alt="([^"]*speedup T_mpi / T_hybrid per hybrid layout[^"]*)" '
            r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page):
        meta = png_text(base64.b64decode(data))
        assert htmllib.unescape(caption).startswith(meta['Title'])
        out[meta['Title']] = meta
    return out


@pytest.mark.parametrize('cores', [16, 128])
def test_heatmap_shows_every_layout_and_size_and_sentences_name_the_winner(
        tmp_path, capsys, cores):
    logs = big_node_logs(tmp_path, cores)
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(logs), '--out', str(out)]) == 0
    capsys.readouterr()
    (page_path,) = out.glob('*.html')
    (md_path,) = out.glob('verdict-*Z.md')
    page, md = page_path.read_text(), md_path.read_text()

    maps = heatmaps_in(page)
    assert list(maps) == ['spmv openmpi@shm, 1 node']
    expected_rows = [f'{m} {r}x{t}' for m, r, t in sorted(layouts(cores))]
    rows = maps['spmv openmpi@shm, 1 node']['Rows'].split('\n')
    assert sorted(rows) == sorted(expected_rows) and len(rows) == 2 * (len(divisors(cores)) - 1)
    assert maps['spmv openmpi@shm, 1 node']['Columns'].split('\n') == list(SIZES)

    win = f'masteronly {cores // 4}x4'
    n = len(expected_rows) * len(SIZES)
    ties = 2 * len(SIZES)                                 # the two layouts of 2 threads
    for text in (md, htmllib.unescape(page)):
        assert (f'spmv: hybrid wins 2, loses {n - 2 - ties}, ties {ties} and is undecided '
                f'(INCONCLUSIVE) in 0 of {n} comparisons') in text
        assert f'Hybrid wins most with {win} at size 64 (1.60x, hybrid 60% faster).' in text
        assert f'It wins with {win} at sizes 64, 128.' in text
        assert (f'Hybrid loses most with funneled 1x{cores} at size 16 (0.50x, pure MPI '
                '100% faster).') in text
        assert ('By size: some hybrid layout wins at sizes 64, 128; every hybrid layout '
                'loses at') not in text                     # the ties are not losses
        assert 'By size: some hybrid layout wins at sizes 64, 128.' in text
    # the heatmap's caption counts its cells' verdicts
    assert f'2 WIN, {n - 2 - ties} LOSS, {ties} TIE; ' in page


def test_one_heatmap_per_kernel_stack_and_partition(tmp_path):
    logs = big_node_logs(tmp_path, 16, stacks=('openmpi', 'mpich'), parts=('shm', 'tcp'))
    found = verdicts(read_perflogs([str(logs)]))
    grids = glance.grids(found)
    assert [g.title for g in grids] == [
        'spmv mpich@shm, 1 node', 'spmv mpich@tcp, 1 node', 'spmv openmpi@shm, 1 node',
        'spmv openmpi@tcp, 1 node']
    assert all(len(g.cells) == len(g.layouts) * len(g.sizes) == 8 * 4 for g in grids)
    ((kernel, text),) = glance.sentences(found)
    # the extremes say where they are once there are several stacks and partitions
    assert kernel == 'spmv' and ' at size 64 on mpich@shm (1.60x' in text[1]


def test_sentences_say_where_hybrid_never_wins_or_never_loses(tmp_path):
    lines = [header(['t_total'])]
    for size in ('8', '16'):
        for i in range(2):
            lines.append(line('spmv', {'t_total': (1.0, 's')}, size=size, time=T0 +
                              dt.timedelta(seconds=i)))
            lines.append(line('spmv', {'t_total': (1.3 if size == '8' else 1.01, 's')},
                              mode='masteronly', ranks=1, threads=2, size=size,
                              time=T0 + dt.timedelta(seconds=i)))
    write(tmp_path / 'x.log', lines)
    ((_, text),) = glance.sentences(verdicts(read_perflogs([str(tmp_path)])))
    assert text[0].startswith('spmv: hybrid wins 0, loses 1, ties 1 and is undecided '
                              '(INCONCLUSIVE) in 0 of 2')
    assert text[1] == ('Hybrid wins nowhere; its best is masteronly 1x2 at size 16 (0.99x, '
                       'pure MPI 1% faster, TIE).')
    assert text[2].startswith('Hybrid loses most with masteronly 1x2 at size 8 (0.77x')
    assert text[3] == 'By size: every hybrid layout loses at size 8.'


def _verdict(size: str, call: str, speedup: float, ranks: int = 1) -> Verdict:
    return Verdict(system='local', partition='shm', stack='openmpi', kernel='spmv', size=size,
                   cores=16, hybrid_mode='masteronly', hybrid_layout=f'{ranks}x{16 // ranks}',
                   mpi_layout='16x1', t_mpi=1.0, t_hybrid=1 / speedup, n_mpi=3, n_hybrid=3,
                   speedup=speedup, noise=0.2, verdict=call, mpi_library='Open MPI v4.1.6')


def test_sentences_count_ties_and_inconclusive_apart():
    # issue 25: "hybrid wins 0, loses 1 and ties 11 of 12" where the table held 1 TIE
    # and 10 INCONCLUSIVE; an undecided comparison is no tie
    found = [_verdict('32', 'LOSS', 0.7), _verdict('32', 'TIE', 1.01, ranks=2)]
    found += [_verdict(size, 'INCONCLUSIVE', 0.95, ranks=r)
              for size in ('32', '64') for r in (4, 8)]
    found += [_verdict(size, 'INCONCLUSIVE', 1.1, ranks=r)
              for size in ('64', '128', '256') for r in (1, 2)]
    assert len(found) == 12
    ((kernel, text),) = glance.sentences(found)
    assert text[0].startswith('spmv: hybrid wins 0, loses 1, ties 1 and is undecided '
                              '(INCONCLUSIVE) in 10 of 12 comparisons with pure MPI')
    assert 'ties 11' not in ' '.join(text)
    # without a decided loss, undecided comparisons are not said to be no losses
    undecided = [v for v in found if v.verdict != 'LOSS']
    ((_, text),) = glance.sentences(undecided)
    assert text[0].startswith('spmv: hybrid wins 0, loses 0, ties 1 and is undecided '
                              '(INCONCLUSIVE) in 10 of 11')
    assert 'Hybrid loses nowhere decidedly (10 undecided).' in text
    assert 'Hybrid loses nowhere.' not in text


def test_runs_on_different_node_counts_get_their_own_heatmap(tmp_path):
    # verdicts that carry their node count (the multi-node report) are never pooled
    logs = big_node_logs(tmp_path, 16)
    found = verdicts(read_perflogs([str(logs)]))
    spread = [dataclasses.replace(v, nodes=1 + i % 2) for i, v in enumerate(found)]
    grids = glance.grids(spread)
    assert [g.title for g in grids] == ['spmv openmpi@shm, 1 node', 'spmv openmpi@shm, 2 nodes']
    assert sum(len(g.cells) for g in grids) == len(found)
    assert all(glance.nodes(v) == g.nodes for g in grids for v in g.cells.values())
    ((_, text),) = glance.sentences(spread)
    assert '1/2 nodes' in text[0]


def _apart(system: str, build: str, call: str, speedup: float) -> Verdict:
    return dataclasses.replace(_verdict('32', call, speedup), system=system, build=build)


#: one stack and partition: two systems (alpha wins, beta loses), then two builds of alpha
#: (Release wins, Debug loses); each pair a verdict of its own (``Verdict.key``)
TWO_SYSTEMS = [_apart('alpha', 'cmake Release', 'WIN', 2.0),
               _apart('beta', 'cmake Release', 'LOSS', 0.5)]
TWO_BUILDS = [_apart('alpha', 'cmake Release', 'WIN', 2.0),
              _apart('alpha', 'cmake Debug', 'LOSS', 0.5)]


def heatmaps(found: list[Verdict]) -> list[tuple[str, str]]:
    """Each heatmap of the verdicts `found`: its title and its calls."""
    return [(g.title, glance.calls_text(g.cells.values())) for g in glance.grids(found)]


def test_two_systems_or_builds_of_one_stack_keep_their_own_heatmap_and_sentence():
    """Audit: the grids keyed (kernel, stack, partition, nodes) let beta's LOSS overwrite
    alpha's WIN (one heatmap, '0 WIN, 1 LOSS'); the sentences named neither system."""
    assert heatmaps(TWO_SYSTEMS) == [
        ('spmv openmpi@alpha:shm, 1 node', '1 WIN, 0 LOSS, 0 TIE'),
        ('spmv openmpi@beta:shm, 1 node', '0 WIN, 1 LOSS, 0 TIE')]
    ((_, text),) = glance.sentences(TWO_SYSTEMS)
    assert 'openmpi@alpha:shm, openmpi@beta:shm)' in text[0]
    assert ' at size 32 on openmpi@alpha:shm (2.00x' in text[1]
    assert ' at size 32 on openmpi@beta:shm (0.50x' in text[2]
    assert heatmaps(TWO_BUILDS) == [
        ('spmv openmpi (cmake Debug)@shm, 1 node', '0 WIN, 1 LOSS, 0 TIE'),
        ('spmv openmpi (cmake Release)@shm, 1 node', '1 WIN, 0 LOSS, 0 TIE')]
    # one system and one build: as before
    assert [g.title for g in glance.grids(TWO_SYSTEMS[:1])] == ['spmv openmpi@shm, 1 node']


def test_the_verdict_matrix_has_a_column_per_system_and_build():
    """Audit: the matrix keyed its columns (partition, stack): of two systems' or builds'
    verdicts it showed the last one only."""
    from types import SimpleNamespace

    from hybridverdict import html

    def columns(found: list[Verdict]) -> tuple[list[str], list[str]]:
        page = html.verdict_matrix(SimpleNamespace(verdicts=found))
        heads = [htmllib.unescape(h) for h in re.findall(r'<th>(.*?)</th>', page)]
        return heads, re.findall(r'<td class="(WIN|LOSS|TIE)"', page)

    assert columns(TWO_SYSTEMS) == (['openmpi<br>alpha:shm', 'openmpi<br>beta:shm'],
                                    ['WIN', 'LOSS'])
    assert columns(TWO_BUILDS) == (['openmpi (cmake Debug)<br>shm',
                                    'openmpi (cmake Release)<br>shm'], ['LOSS', 'WIN'])
    assert columns(TWO_SYSTEMS[:1]) == (['openmpi<br>shm'], ['WIN'])       # as before
