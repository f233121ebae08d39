"""The self-contained HTML report: tables, the verdict matrix and embedded figures.

One file, no external resources: figures are PNG data URIs, styles inline.
"""

from __future__ import annotations

import html
from collections import defaultdict

from . import glance, plots, render
from .apart import Apart
from .records import size_key
from .report import Report
from .section import FIG_HEATMAPS, FIG_SPEEDUP, LEADING

STYLE = '''
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: right; }
th { background: #eee; }
td.l, th.l { text-align: left; }
td.WIN { background: #b7e1b0; } td.LOSS { background: #f2b8b5; } td.TIE { background: #eee; }
td.INCONCLUSIVE { background: #f7e7a6; }
td.none { background: #fff; color: #999; }
figure { margin: 0.5em 0 1.5em; } figcaption { font-size: 0.85em; color: #444; }
img { max-width: 100%; }
.warn { color: #a40; } p.none { color: #777; }
'''


def _e(x: object) -> str:
    return html.escape(str(x))


def table(columns: tuple[str, ...] | list[str], rows: list[list[object]]) -> str:
    head = ''.join(f'<th>{_e(c)}</th>' for c in columns)
    body = ''.join('<tr>' + ''.join(f'<td>{_e(v)}</td>' for v in row) + '</tr>'
                   for row in rows)
    return f'<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def verdict_matrix(rep: Report) -> str:
    """kernel x size x hybrid layout (rows) against stack x partition (columns), a
    column per system, build and MPI library too (named where they differ)."""
    apart = Apart.of(rep.verdicts)
    names: dict[tuple, tuple[str, str]] = {}
    cells: dict[tuple, dict[tuple, object]] = defaultdict(dict)
    for v in rep.verdicts:
        col = (v.partition, v.stack, v.system, v.build, v.mpi_library)
        names[col] = (apart.stack(v), apart.partition(v))
        nodes = f' ({v.nodes} nodes)' if v.nodes > 1 else ''
        cells[(v.kernel, v.size, f'{v.hybrid_mode} {v.hybrid_layout}', v.mpi_layout + nodes)][
            col] = v
    cols = sorted(names)
    head = ('<tr><th class="l">kernel</th><th class="l">size</th><th class="l">hybrid vs mpi'
            '</th>' + ''.join(f'<th>{_e(names[c][0])}<br>{_e(names[c][1])}</th>'
                              for c in cols) + '</tr>')
    body = []
    for key in sorted(cells, key=lambda k: (k[0], size_key(k[1]), k[2])):
        kernel, size, hyb, mpi = key
        tds = []
        for col in cols:
            v = cells[key].get(col)
            if v is None:
                tds.append('<td class="none">-</td>')
            else:
                tds.append(f'<td class="{v.verdict}" title="T_mpi {v.t_mpi:.4g} s, T_hybrid '
                           f'{v.t_hybrid:.4g} s, noise ±{100 * v.noise:.1f}%">{v.verdict}<br>'
                           f'{v.speedup:.2f}x<br><small>n={v.n_mpi}/{v.n_hybrid}</small></td>')
        body.append(f'<tr><td class="l">{_e(kernel)}</td><td class="l">{_e(size)}</td>'
                    f'<td class="l">{_e(hyb)} vs {_e(mpi)}</td>{"".join(tds)}</tr>')
    return f'<table><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


#: a verdict matrix of more rows than this starts folded (the heatmaps say it at a glance)
MATRIX_OPEN_ROWS = 40


def at_a_glance(rep: Report, figures: dict[str, list[plots.Figure]]) -> str:
    """Per kernel: the sentences on where hybrid wins and loses, then its heatmaps."""
    heat = figures.get(FIG_HEATMAPS, [])
    parts = ['<h2 id="glance">Where hybrid wins and loses</h2>']
    for kernel, lines in glance.sentences(rep.verdicts):
        mine = [f for f in heat if f.caption.startswith(f'{kernel} ')]
        parts += [f'<h3>{_e(kernel)}</h3>', f'<p class="glance">{_e(" ".join(lines))}</p>',
                  _figures(mine)]
    return ''.join(parts)


def _figures(figs: list[plots.Figure]) -> str:
    return ''.join(f'<figure><img alt="{_e(f.caption)}" src="{f.uri}"><figcaption>'
                   f'{_e(f.caption)}</figcaption></figure>' for f in figs)


def page(rep: Report, figures: dict[str, list[plots.Figure]] | None = None) -> str:
    figures = plots.all_figures(rep) if figures is None else figures
    m = rep.meta
    title = f'Hybrid vs pure MPI: {", ".join(m.systems) or "no system"}'
    parts = [
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f'<style>{STYLE}</style></head><body>',
        f'<h1>{_e(title)}</h1>',
        f'<p>Generated {m.generated:%Y-%m-%d %H:%M UTC} by hybridverdict {_e(m.version)} from '
        f'{m.records} records ({m.skipped} lines skipped) in '
        f'{_e(", ".join(m.inputs))}'
        + (f', runs since {_e(m.since.isoformat())}' if m.since else '')
        + f'. Runs: {_e(m.dates)}; history from {m.records_read} records.</p>',
        *[f'<p class="warn">warning: {_e(w)}</p>' for w in m.warnings],
        '<h2>Stacks and MPI libraries</h2>',
        table(('stack', 'MPI library'), [[s, '; '.join(libs) or 'unknown']
                                         for s, libs in m.stacks.items()]),
    ]
    for sec in render.leading(rep):
        parts += [f'<h2 id="{_e(sec.key)}">{_e(sec.title)}</h2>', f'<p>{_e(sec.note)}</p>',
                  '<ul>', *(f'<li>{_e(str(row[0]))}</li>' for row in sec.rows), '</ul>']
    parts.append('<h2 id="verdicts">Verdicts</h2>')
    if rep.verdicts:
        rows = len({(v.kernel, v.size, v.hybrid_mode, v.hybrid_layout, v.mpi_layout)
                    for v in rep.verdicts})
        fold = '<details open>' if rows <= MATRIX_OPEN_ROWS else '<details>'
        parts += [f'<p>{_e(render.counts(rep.verdicts))}. {_e(render.VERDICT_NOTE)}</p>',
                  at_a_glance(rep, figures),
                  f'<h2 id="matrix">Verdict matrix</h2>{fold}<summary>{rows} rows: kernel, size '
                  'and layouts against stack and partition</summary>', verdict_matrix(rep),
                  '</details>', '<h2 id="speedup">Speedup against problem size</h2>',
                  _figures(figures.get(FIG_SPEEDUP, [])),
                  '<details><summary>verdict table</summary>',
                  table(render.COLUMNS, render.rows(rep.verdicts)), '</details>']
    else:
        parts.append('<p>No pure-MPI/hybrid pair in these runs.</p>')
    for sec in rep.sections:
        if sec.key in LEADING:
            continue
        body = ([f'<p>{_e(sec.note)}</p>',
                 _figures(figures.get(sec.figure, [])) if sec.figure else '',
                 table(sec.columns, sec.rows)] if sec.rows
                else [f'<p class="none">No data: needs {_e(sec.needs)}.</p>'])
        parts += [f'<h2 id="{_e(sec.key)}">{_e(sec.title)}</h2>', *body]
    parts.append('</body></html>')
    return '\n'.join(parts)
