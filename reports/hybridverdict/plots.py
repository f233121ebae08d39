"""The report's figures, drawn with matplotlib's Agg backend into PNG data URIs.

Each function takes the report's analysis objects and returns a ``Figure``
(data URI and a caption naming what and how many samples it shows), or None
when there is nothing to draw.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import math
import multiprocessing
import os
import signal
from collections import defaultdict
from collections.abc import Callable, Iterable, Sized

import matplotlib

matplotlib.use('Agg')
# Every text is plain: a label naming a build or library may hold two '$' (an
# unexpanded $CFLAGS), which mathtext drew as math or could not parse at all.
matplotlib.rcParams['text.parse_math'] = False
import matplotlib.pyplot as plt  # noqa: E402
from harnesscore.units import bytes_label  # noqa: E402
from matplotlib.dates import num2date  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from . import comm, glance, history, verdict  # noqa: E402
from . import section as sec  # noqa: E402
from .apart import Apart, kernel_place  # noqa: E402
from .records import size_key  # noqa: E402
from .report import Report  # noqa: E402

DPI = 80
PHASE_ORDER = ('force', 'movout', 'sum', 'movea', 'moveb', 'neigh')


@dataclasses.dataclass(frozen=True)
class Figure:
    uri: str          # data:image/png;base64,...
    caption: str


def _png(fig, caption: str, metadata: dict[str, str] | None = None) -> Figure:
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=DPI, metadata=metadata)
    plt.close(fig)
    return Figure('data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode(), caption)


def _layout(fig, rows: int = 1) -> None:
    """Fixed margins: matplotlib's tight layout would cost a full extra draw."""
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.12 / rows + 0.03, top=1 - 0.1 / rows,
                        wspace=0.25, hspace=0.45)


_PLAIN = FuncFormatter(lambda v, _pos: f'{v:g}')
_BYTES = FuncFormatter(lambda v, _pos: next(f'{v / d:g}{u}' for d, u in (
    (1 << 30, 'G'), (1 << 20, 'M'), (1 << 10, 'K'), (1, '')) if v >= d or d == 1))
_DAY = FuncFormatter(lambda v, _pos: f'{num2date(v):%m-%d %H:%M}')


def _log(ax, axis: str = 'y', base: float = 10) -> None:
    """A log axis with plain tick labels (no mathtext: it is slow to lay out)."""
    getattr(ax, f'set_{axis}scale')('log', base=base)
    target = ax.yaxis if axis == 'y' else ax.xaxis
    target.set_major_formatter(_PLAIN)
    target.set_minor_formatter(NullFormatter())


def _grid(n: int, cols: int, w: float = 4.2, h: float = 3.0):
    cols = max(1, min(cols, n))
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(w * cols, h * nrows), squeeze=False)
    _layout(fig, nrows)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _panels(items: Iterable, key: Callable, cols: int, w: float = 4.2, h: float = 3.0,
            order: Callable = lambda k: k) -> tuple:
    """A figure of one panel per value of key(item), in `order` of the values:
    the figure and its (axes, (value, items)) pairs; (None, []) without items."""
    groups = glance.grouped(items, key)
    if not groups:
        return None, []
    fig, axes = _grid(len(groups), cols, w, h)
    return fig, list(zip(axes, sorted(groups.items(), key=lambda kv: order(kv[0]))))


def _figure(items: Sized, cols: int, w: float, h: float, bottom: float | None = None) -> tuple:
    """A figure of `cols` panels side by side with the fixed margins (`bottom`: room for
    long tick labels): the figure and its axes; (None, None) without items."""
    if not items:
        return None, None
    fig, axes = plt.subplots(1, cols, figsize=(w, h))
    _layout(fig)
    if bottom is not None:
        fig.subplots_adjust(bottom=bottom)
    return fig, axes


def _finish(ax, title: str, xlabel: str, ylabel: str, loc: str = 'upper left',
            one: bool = False) -> None:
    """A panel's title, axis labels and legend; `one`: the dashed line at 1."""
    if one:
        _one(ax)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=6, loc=loc)


def _one(ax) -> None:
    """The dashed line at 1 (a ratio's break-even)."""
    ax.axhline(1.0, color='k', lw=0.8, ls='--')


def _fitted(ax, xs: list, ys: list, fitted: list | None, label: str, **style) -> None:
    """Measured points, and the fit through them in the same colour (if any)."""
    pts = ax.plot(xs, ys, 'o', label=label, **style)
    if fitted is not None:
        ax.plot(xs, fitted, '-', color=pts[0].get_color())


def _nan(values: Iterable[float | None]) -> list[float]:
    """`values` with NaN for None (not measured: no bar, a gap in a band)."""
    return [math.nan if x is None else x for x in values]


def _nodes(nodes: int) -> str:
    """' 4 nodes' in a label, '' on one node."""
    return f' {nodes} nodes' if nodes > 1 else ''


def _num(size: str) -> float | None:
    try:
        return float(size)
    except ValueError:
        return None


def speedup(rep: Report) -> Figure | None:
    fig, panels = _panels(rep.verdicts, lambda v: v.kernel, 2, 6.0, 4.2)
    if fig is None:
        return None
    samples = 0
    apart = Apart.of(rep.verdicts)       # a line per system, build and library
    for ax, (kernel, vs) in panels:
        lines = glance.grouped(vs, lambda v: f'{v.hybrid_mode} {v.hybrid_layout} vs '
                               f'{v.mpi_layout}{_nodes(v.nodes)} {apart.where(v)}')
        samples += sum(v.n_mpi + v.n_hybrid for v in vs)
        sizes = sorted({v.size for v in vs}, key=size_key)
        numeric = all(_num(s) is not None for s in sizes)
        for label, pts in sorted(lines.items()):
            pts.sort(key=lambda v: size_key(v.size))
            xs = [_num(v.size) if numeric else sizes.index(v.size) for v in pts]
            ys = [v.speedup for v in pts]
            err = [v.speedup * v.noise for v in pts]
            n = sum(v.n_mpi + v.n_hybrid for v in pts)
            ax.errorbar(xs, ys, yerr=err, marker='o', capsize=3, label=f'{label} (n={n})')
        low, high = (min(map(float, sizes)), max(map(float, sizes))) if numeric else (0, 0)
        if low > 0 and high / low > 8:      # a log axis for sizes above 0 only
            _log(ax, 'x', 2)
        if not numeric:
            ax.set_xticks(range(len(sizes)), sizes)
        _finish(ax, kernel, 'problem size', 'speedup T_mpi / T_hybrid', one=True)
    return _png(fig, f'Speedup of hybrid over pure MPI against problem size; error bars: the '
                     f'noise band; above 1 hybrid wins. {samples} runs.')


def scaling(rep: Report) -> Figure | None:
    """Speedup against node count per size (the papers' figures), one panel per kernel;
    only pairs measured on two or more node counts."""
    crossings = verdict.across_nodes(rep.verdicts)
    fig, panels = _panels(crossings, lambda c: c.kernel, 2, 6.0, 4.2)
    if fig is None:
        return None
    apart = Apart.of(crossings)
    for ax, (kernel, cs) in panels:
        for c in cs:
            ax.plot(c.nodes, c.speedups, marker='o',
                    label=f'size {c.size} {c.hybrid} vs {c.mpi_layout} {apart.where(c)}')
        if max(n for c in cs for n in c.nodes) / min(n for c in cs for n in c.nodes) > 8:
            _log(ax, 'x', 2)
        _finish(ax, kernel, 'nodes', 'speedup T_mpi / T_hybrid', 'best', one=True)
    return _png(fig, 'Speedup of hybrid over pure MPI against node count, one line per size '
                     'and pair of layouts per node; above 1 hybrid wins. The crossover table '
                     'names the node count from which it wins or loses.')


#: speedups beyond these bounds get the colour of the bound
HEAT_RANGE = (0.5, 2.0)


def heatmap(grid: glance.Grid) -> Figure:
    """Hybrid layouts x sizes of one grid, coloured by log2(speedup), marked WIN/LOSS/TIE.

    The PNG's "Rows" and "Columns" text chunks hold the tick labels as drawn (one
    per line), so a reader (or a test) can tell which layouts and sizes it shows.
    """
    rows, cols = grid.layouts, grid.sizes
    cells = [[grid.cells.get((lay, size)) for size in cols] for lay in rows]
    values = [[math.nan if v is None else math.log2(v.speedup) for v in row] for row in cells]
    lo, hi = (math.log2(x) for x in HEAT_RANGE)
    width, height = 3.2 + 0.75 * len(cols), 1.2 + 0.32 * len(rows)   # inches
    fig, ax = plt.subplots(figsize=(width, height))
    # fixed margins in inches: the layout labels on the left, the colour bar on the right
    fig.subplots_adjust(left=1.7 / width, right=1 - 0.3 / width, bottom=0.55 / height,
                        top=1 - 0.35 / height)
    cmap = matplotlib.colormaps['RdYlGn'].with_extremes(bad='#f4f4f4')
    img = ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, aspect='auto')
    for i, row in enumerate(cells):
        for j, v in enumerate(row):
            text = '-' if v is None else f'{v.verdict}\n{v.speedup:.2f}'
            ax.text(j, i, text, ha='center', va='center', fontsize=6, linespacing=0.9)
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel('problem size', fontsize=7)
    ax.set_title(grid.title, fontsize=8)
    bar = fig.colorbar(img, ax=ax, fraction=0.8 / width, pad=0.15 / width)
    ticks = [x for x in (0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0)
             if HEAT_RANGE[0] <= x <= HEAT_RANGE[1]]
    bar.set_ticks([math.log2(x) for x in ticks], labels=[f'{x:g}x' for x in ticks])
    bar.ax.tick_params(labelsize=6)
    samples = sum(v.n_mpi + v.n_hybrid for v in grid.cells.values())
    drawn_rows = [t.get_text() for t in ax.get_yticklabels()]
    drawn_cols = [t.get_text() for t in ax.get_xticklabels()]
    return _png(fig, f'{grid.title}: speedup T_mpi / T_hybrid per hybrid layout and size '
                     f'(green: hybrid faster, red: slower; colours saturate at '
                     f'{HEAT_RANGE[0]:g}x and {HEAT_RANGE[1]:g}x); '
                     f'{glance.calls_text(grid.cells.values())}; {samples} runs.',
                {'Title': grid.title, 'Rows': '\n'.join(drawn_rows),
                 'Columns': '\n'.join(drawn_cols)})


def heatmaps(rep: Report) -> list[Figure]:
    """One heatmap per kernel, stack, partition and node count."""
    return [heatmap(g) for g in glance.grids(rep.verdicts)]


def efficiencies(rep: Report) -> Figure | None:
    effs = rep.efficiencies
    fig, ax = _figure(effs, 1, max(6.0, 0.9 * len(effs) + 2), 3.6, bottom=0.25)
    if fig is None:
        return None
    names = ('e_mt', 'e_cache', 'e_ni', 'e_mp')
    apart = Apart.of(effs)
    width = 0.2
    for j, name in enumerate(names):
        ax.bar([i + (j - 1.5) * width for i in range(len(effs))],
               _nan(getattr(e, name) for e in effs), width, label=name)
    _one(ax)
    ax.set_xticks(range(len(effs)),
                  [f'{apart.where(e)}\nsize {e.size} {e.layout}'
                   + _nodes(e.nodes) + f'\nruns {e.samples}'
                   for e in effs], fontsize=7)
    ax.set_ylabel('efficiency')
    ax.legend(fontsize=7, ncol=4, loc='upper right')
    return _png(fig, 'Chow & Hysom efficiency decomposition per stack, partition and size '
                     '(missing bars: n/a, e.g. e_ni on one node); runs = mpi/hybrid/serial '
                     'samples. e_mt, e_cache, e_ni above 1 and e_mp below 1 favour hybrid.')


def phases(rep: Report) -> Figure | None:
    fig, panels = _panels(rep.phases, lambda r: r.size, 3, order=size_key)
    if fig is None:
        return None
    apart = Apart.of(rep.phases)         # the system where the rows span several

    def bar(r) -> str:           # one bar group per hybrid run, node count and reference
        return (f'{r.hybrid} vs {r.mpi_layout}{_nodes(r.nodes)} {r.stack_label}'
                f'@{apart.partition(r)}')

    for ax, (size, rs) in panels:
        bars = sorted(glance.grouped(rs, bar).items())
        width = 0.8 / max(1, len(bars))
        for j, (g, runs) in enumerate(bars):
            ratio = {r.phase: r.ratio for r in runs}
            ax.bar([i + j * width for i in range(len(PHASE_ORDER))],
                   _nan(ratio.get(p) for p in PHASE_ORDER), width,
                   label=f'{g} (n={runs[0].samples})')
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(PHASE_ORDER))], PHASE_ORDER,
                      fontsize=7)
        ratios = [r.ratio for r in rs if r.ratio is not None and 0 < r.ratio < math.inf]
        log = bool(ratios) and max(ratios) / min(ratios) > 20
        if log:
            _log(ax)
        _finish(ax, f'md, cells per side {size}', '',
                'T_hybrid / T_mpi' + (' (log scale)' if log else ''), one=True)
    return _png(fig, 'MD phase breakdown: median hybrid / pure-MPI time per phase (above 1: '
                     'slower in hybrid); n = pure-MPI/hybrid runs.')


def hockney(rep: Report) -> Figure | None:
    curves = [c for c in rep.curves if c.times]
    fig, panels = _panels(curves, lambda c: (c.system, c.partition, c.nodes), 2, 5.5, 4.0)
    if fig is None:
        return None
    apart = Apart.of(curves, kernel_place)
    for ax, ((system, part, nodes), cs) in panels:
        for c in cs:
            sizes, times = c.medians()
            fit = (f': t0={c.fit.t0:.3g} us, r_inf={c.fit.r_inf:.4g} MB/s' if c.fit else
                   ': no fit')
            _fitted(ax, [max(m, 1) for m in sizes], times,
                    None if c.fit is None else [c.fit.time(m) for m in sizes],
                    f'{c.kernel} {apart.stack(c)} (n={c.span.records}){fit}', ms=4)
        _log(ax, 'x', 2)
        ax.xaxis.set_major_locator(LogLocator(base=4, numticks=8))
        ax.xaxis.set_major_formatter(_BYTES)
        _log(ax)
        _finish(ax, f'{system}:{part}' + (f', {nodes} nodes' if nodes > 1 else ''),
                'message size [B]', 'one-way time [us]')
    return _png(fig, 'Hockney fits: measured median one-way times (points) against the fitted '
                     't0 + m / r_inf (lines), per stack, source and partition.')


def saturation(rep: Report) -> Figure | None:
    # the largest message of each (stack, partition, kernel): the saturation regime
    top: dict[tuple, comm.Saturation] = {}
    for s in rep.saturation:
        key = (s.system, s.partition, s.stack, s.kernel, s.nodes, s.build, s.library,
               s.layout)
        if key not in top or s.size > top[key].size:
            top[key] = s
    # a place of several layouts: each line names its layout
    layouts: dict[tuple, set[str]] = defaultdict(set)
    for key in top:
        layouts[key[:-1]].add(key[-1])
    fig, axes = _figure(top, 2, 10, 3.8)
    if fig is None:
        return None
    apart = Apart.of(top.values(), kernel_place)
    ax_abs, ax_rel = axes
    for key, s in top.items():
        pts = s.curve()
        ks = [p[0] for p in pts]
        label = (f'{s.kernel} {apart.where(s)} {bytes_label(s.size, " ")}'
                 + (f' {s.layout}' if len(layouts[key[:-1]]) > 1 else '')
                 + _nodes(s.nodes) + f' (n={s.records})')
        ax_abs.plot(ks, [p[1] for p in pts], 'o-', label=label)
        ax_rel.plot(ks, [100 * p[2] for p in pts], 'o-', label=label)
    for ax, ylabel in ((ax_abs, 'bandwidth per node [MB/s]'), (ax_rel, '% of the maximum')):
        ax.set_ylabel(ylabel)
        ax.set_xlabel('k communicating ranks per node')
        ax.set_xticks(sorted({k for s in top.values() for k in s.bw}))
        ax.legend(fontsize=6, loc='upper left')
    ax_rel.set_ylim(0, 105)
    return _png(fig, 'Ring saturation: aggregated bandwidth per node against k, absolute and '
                     'as % of the maximum (largest message size of each series).')


def stacks(rep: Report) -> Figure | None:
    heads = [h for h in rep.headlines if h.latency is not None or h.bandwidth is not None]
    fig, axes = _figure(heads, 2, 10, 3.8, bottom=0.2)
    if fig is None:
        return None
    ax_lat, ax_bw = axes
    apart = Apart.of(heads, lambda h: (h.system, h.partition, h.stack, h.family))
    # a stack measured on several node counts has a bar per node count: each names its own
    labels = [f'{apart.stack(h)}\n{apart.partition(h)} {h.family}{_nodes(h.nodes)}'
              for h in heads]
    xs = range(len(heads))
    for ax, figure, ylabel in ((ax_lat, 'latency', 'latency at 8 B [us]'),
                               (ax_bw, 'bandwidth', 'bandwidth at 1 MiB [MB/s]')):
        ax.bar(xs, _nan(getattr(h, figure) for h in heads))
        ax.set_ylabel(ylabel)
        ax.set_xticks(list(xs), labels, fontsize=7)
    n = sum(h.span.records for h in heads)
    return _png(fig, f'MPI-stack comparison: latency at 8 B and bandwidth at 1 MiB per stack, '
                     f'partition and source. {n} runs.')


def collectives(rep: Report) -> Figure | None:
    fig, panels = _panels([c for c in rep.collectives if len(c.times) >= 1],
                          lambda c: c.kernel, 2, 5.5, 4.0)
    if fig is None:
        return None
    for ax, (kernel, cs) in panels:
        sizes = sorted({c.size for c in cs})
        shown = {sizes[0], sizes[-1]}          # the table has more sizes
        named = comm.several_placements(cs)
        apart = Apart.of(cs, kernel_place)
        for c in cs:
            if c.size not in shown:
                continue
            ns, ts = c.medians()
            series = f' {c.series}' if c.place() in named else ''
            _fitted(ax, ns, ts, None if c.fit is None else [c.fit.time(n) for n in ns],
                    f'{apart.where(c)} {bytes_label(c.size, " ")}{series} '
                    f'(n={c.samples})')
        _log(ax, 'x', 2)
        _log(ax)
        _finish(ax, kernel, 'ranks n', 'latency [us]')
    return _png(fig, 'Collectives: median latency against the rank count (points) and the fit '
                     'a log2 n + b (lines, where >= 2 rank counts exist), for the smallest '
                     'and the largest message.')


def history_figures(series: list[history.Series], per_figure: int = 16) -> list[Figure]:
    out = []
    for start in range(0, len(series), per_figure):
        chunk = series[start:start + per_figure]
        fig, axes = _grid(len(chunk), 4, 4.0, 2.4)
        fig.subplots_adjust(left=0.06, right=0.98, bottom=0.05, top=0.96, wspace=0.25,
                            hspace=0.55)
        for ax, s in zip(axes, chunk):
            ax.plot(s.times, s.values, '.-', ms=3, lw=0.8)
            if s.has_band:
                ax.fill_between(s.times, _nan(s.low), _nan(s.high), color='tab:green',
                                alpha=0.2, step='post')
            ax.set_title(f'{s.label} (n={s.samples})', fontsize=7)
            ax.set_ylabel(s.unit, fontsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(3))
            ax.xaxis.set_major_formatter(_DAY)
            ax.yaxis.set_major_locator(MaxNLocator(4))
            ax.tick_params(labelsize=6)
        out.append(_png(fig, f'History, series {start + 1}-{start + len(chunk)}: value over '
                             'time (medians of consecutive runs where there are many), '
                             'reference band shaded.'))
    return out


#: figure key -> function of the report drawing it (one figure, several, or None)
DRAWERS: dict[str, Callable[[Report], Figure | list[Figure] | None]] = {
    sec.FIG_SPEEDUP: speedup, sec.FIG_HEATMAPS: heatmaps, sec.FIG_EFFICIENCIES: efficiencies,
    sec.FIG_PHASES: phases, sec.FIG_HOCKNEY: hockney, sec.FIG_SATURATION: saturation,
    sec.FIG_STACKS: stacks, sec.FIG_COLLECTIVES: collectives, sec.FIG_SCALING: scaling}


def all_figures(rep: Report, only: Iterable[str] | None = None) -> dict[str, list[Figure]]:
    """Figure key (as in ``Section.figure``) -> its figures; `only`: just those keys."""
    keys = set(DRAWERS) | {sec.FIG_HISTORY} if only is None else set(only)
    out: dict[str, list[Figure]] = {}
    for key, fn in DRAWERS.items():
        if key in keys:
            drawn = fn(rep)
            figs = drawn if isinstance(drawn, list) else [] if drawn is None else [drawn]
            if figs:
                out[key] = figs
    if sec.FIG_HISTORY in keys and rep.history:
        out[sec.FIG_HISTORY] = history_figures(rep.history)
    return out


#: the figures drawn by a second process where there is one (about half the work)
SECOND_PROCESS = (sec.FIG_HISTORY, sec.FIG_HOCKNEY, sec.FIG_COLLECTIVES)
_SHARED: dict[str, Report] = {}
#: seconds to wait for the second process before drawing its figures here
CHILD_TIMEOUT = 300


def _draw_shared(keys: tuple[str, ...]) -> dict[str, list[Figure]]:
    return all_figures(_SHARED['report'], keys)


class Drawing:
    """All figures of a report, drawn partly in a forked process while the caller
    does other work; ``result()`` collects them (drawing in-process where fork is
    unavailable or fails)."""

    def __init__(self, rep: Report, parallel: bool = True):
        self.rep = rep
        self.pool = None
        self.pending = None
        if parallel and (os.cpu_count() or 1) > 1:
            try:
                ctx = multiprocessing.get_context('fork')
                _SHARED['report'] = rep
                # Ctrl-C reaches the whole process group: the second process
                # ignores it (no traceback of its own), this one ends it (result)
                self.pool = ctx.Pool(1, initializer=signal.signal,
                                     initargs=(signal.SIGINT, signal.SIG_IGN))
                self.pending = self.pool.apply_async(_draw_shared, (SECOND_PROCESS,))
            except (ValueError, OSError):
                self.pool = None
            finally:
                _SHARED.clear()

    def result(self) -> dict[str, list[Figure]]:
        if self.pool is None:
            return all_figures(self.rep)
        try:
            mine = all_figures(self.rep, set(DRAWERS) - set(SECOND_PROCESS))
            try:
                theirs = self.pending.get(timeout=CHILD_TIMEOUT)
            except Exception:          # the second process failed or hung: draw here
                theirs = all_figures(self.rep, SECOND_PROCESS)
            return mine | theirs
        finally:
            self.pool.terminate()
            self.pool.join()
