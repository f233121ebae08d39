"""The communication analysis: Hockney fits, the ring's saturation curve, the
MPI-stack comparison, ring against OSU, and collectives against the rank count.

The communication checks' variables (docs/pages/checks.md): point-to-point
kernels (``P2P_KERNELS``) log ``lat_<bytes>`` (us, one-way) and/or ``bw_<bytes>``
(MB/s, 1 MB = 1e6 B; Hockney's t(m) is then m / bw_<m>) and the headlines
``latency_8B`` and ``bandwidth_1MiB``; saturation kernels ``bw_k<k>_<bytes>`` (MB/s
per node, k communicating ranks per node); collectives ``lat_<bytes>`` at ranks x
nodes = n; the accuracy check its ``*_ratio_*``.  Every figure is the median of the
usable runs, their number beside it.  A curve, fit or saturation series holds the
runs of one ``Record.group`` (one node count, build and MPI library) only, a
saturation series those of one mode and layout too; the collectives' fit is the
exception by design: its abscissa is the rank count n = ranks x nodes, its series
(``Collective``) such that a point never pools placements.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from statistics import median
from typing import NamedTuple

from harnesscore import stats
from harnesscore.units import MIB, bytes_label

from .apart import Apart
from .hockney import FitError, HockneyFit, LogFit, error_text, fit_hockney, fit_log2
from .records import Group, KernelSeries, Record
from .section import Table, cell, empty_table

LAT_KERNELS = ('ring-pingpong', 'osu_latency')
BW_KERNELS = ('ring-bw', 'osu_bw')
P2P_KERNELS = LAT_KERNELS + BW_KERNELS + ('osu_bibw',)
SATURATION_KERNELS = ('ring', 'osu_mbw_mr')
COLLECTIVE_KERNELS = ('osu_allreduce', 'osu_bcast', 'osu_reduce', 'osu_allgather',
                      'osu_alltoall', 'osu_barrier')
ACCURACY_KERNEL = 'ring-vs-osu'

_SIZED = re.compile(r'^(lat|bw)_(\d+)$')
_SAT = re.compile(r'^bw_k(\d+)_(\d+)$')


@functools.lru_cache(maxsize=4096)
def sized(var: str) -> tuple[str, int] | None:
    """('lat' or 'bw', bytes) of a per-size variable such as lat_8, else None."""
    m = _SIZED.match(var)
    return (m.group(1), int(m.group(2))) if m else None


@functools.lru_cache(maxsize=4096)
def saturation_var(var: str) -> tuple[int, int] | None:
    """(k, bytes) of bw_k<k>_<bytes>, else None."""
    m = _SAT.match(var)
    return (int(m.group(1)), int(m.group(2))) if m else None


LATENCY_8B = 'latency_8B'
BANDWIDTH_1MIB = 'bandwidth_1MiB'


def family(kernel: str) -> str:
    """'ring' for the harness's own ring kernel, 'osu' for the OSU benchmarks."""
    return 'ring' if kernel.startswith('ring') else 'osu'


@dataclasses.dataclass
class _Span:
    """How many runs lie behind a figure, and when they ran."""

    records: int = 0
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    library: str = ''

    def add(self, rec: Record) -> None:
        self.records += 1
        if self.first is None or rec.time < self.first:
            self.first = rec.time
        if self.last is None or rec.time > self.last:
            self.last = rec.time
        self.library = rec.mpi_library


def _where(group: Group, *left_out: str) -> dict:
    """The fields of a group that name where an analysis's figure comes from (all
    but its size and those `left_out`)."""
    return {k: v for k, v in group._asdict().items() if k not in ('size', *left_out)}


def _own(apart: Apart, item: object, *keys: str) -> dict[str, str]:
    """The fields `keys` (build, library) of an item whose row names them
    (``Apart.shown``), for JSON data that has no such keys otherwise ({} where the row
    names neither)."""
    return {k: getattr(item, k) for k in keys} if apart.shown(item) else {}


class _Fitted:
    """A series of samples per abscissa (``times``), a model fitted to their
    medians (``fit``), or why it could not be (``error``)."""

    times: dict[int, list[float]]
    fit: HockneyFit | LogFit | None
    error: str

    def medians(self) -> tuple[list[int], list[float]]:
        xs = sorted(self.times)
        return xs, [median(self.times[x]) for x in xs]

    def fit_data(self) -> dict:
        """The fit, or its error, for the JSON."""
        return {'fit': dataclasses.asdict(self.fit) if self.fit else None, 'error': self.error}


def _fit_each(found: dict, fit: Callable, order: Callable = Group.sort_key) -> list:
    """The series of `found` (group -> series) in group order (`order`: the sort key
    of found's keys), each fitted: fit(x, medians), or the fit's error."""
    out = []
    for key in sorted(found, key=order):
        series = found[key]
        try:
            series = dataclasses.replace(series, fit=fit(*series.medians()))
        except FitError as err:
            series = dataclasses.replace(series, error=str(err))
        out.append(series)
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class _OneBuild(KernelSeries):
    """A kernel series from one build of one MPI library, its group's (``_where``);
    keyword-only, so that the fields of each series after them need no defaults."""

    build: str = ''
    library: str = ''


@dataclasses.dataclass(frozen=True)
class Curve(_OneBuild, _Fitted):
    """Point-to-point times of one kernel on one stack, partition and node count."""

    times: dict[int, list[float]]        # bytes -> one-way times (us)
    span: _Span
    fit: HockneyFit | None = None
    error: str = ''
    nodes: int = 1


def _usable(records: Iterable[Record], kernels: tuple[str, ...]) -> Iterable[Record]:
    return (r for r in records if r.kernel in kernels and r.usable)


def p2p_curves(records: Iterable[Record]) -> list[Curve]:
    """One curve per group (the message sweep's size aside), with its Hockney fit."""
    curves: dict[tuple, Curve] = {}
    for rec in _usable(records, P2P_KERNELS):
        found: dict[str, dict[int, float]] = {'lat': {}, 'bw': {}}
        for var, value in rec.values.items():
            if m := sized(var):
                found[m[0]][m[1]] = value
        # one-way time: measured latency if the kernel logs it, else size / bandwidth;
        # 0 is "not measured" (ReFrame cannot log NaN)
        points = ({size: t for size, t in found['lat'].items() if t > 0}
                  or {size: size / b for size, b in found['bw'].items() if b > 0})
        if not points:
            continue
        key = rec.group.with_size('')
        curve = curves.get(key)
        if curve is None:
            curve = curves[key] = Curve(**_where(key), times=defaultdict(list), span=_Span())
        curve.span.add(rec)
        for size, t in points.items():
            curve.times[size].append(t)
    return _fit_each(curves, fit_hockney)


def _dates(span: _Span) -> str:
    if span.first is None or span.last is None:
        return ''
    a, b = f'{span.first:%Y-%m-%d}', f'{span.last:%Y-%m-%d}'
    return a if a == b else f'{a}..{b}'


HOCKNEY_COLUMNS = ('stack', 'partition', 'kernel', 'sizes', 't0 [us]', 'r_inf [MB/s]',
                   'm_1/2 [B]', 'rel. error', 'max error', 'nodes', 'samples', 'dates')


def hockney_rows(curves: list[Curve]) -> list[list[object]]:
    apart = Apart.of(curves, lambda c: (c.system, c.partition, c.stack, c.kernel, c.nodes))
    rows: list[list[object]] = []
    for c in curves:
        f = c.fit
        fit = [f'no fit: {c.error}', '', '', '', ''] if f is None else [
            f'{f.t0:.3g}', f'{f.r_inf:.4g}', f'{f.m_half:.3g}', error_text(f, f.rel_error),
            error_text(f, f.max_error)]
        rows.append([apart.stack(c), apart.partition(c), c.kernel, len(c.times), *fit,
                     c.nodes, c.span.records, _dates(c.span)])
    return rows


def hockney_data(curves: list[Curve]) -> list[dict]:
    out = []
    for c in curves:
        sizes, times = c.medians()
        out.append({**c.where(), 'nodes': c.nodes, 'build': c.build,
                    'library': c.span.library, 'samples': c.span.records,
                    'sizes': sizes, 'times_us': times, **c.fit_data()})
    return out


# ---- headline figures: stack comparison and ring against OSU ----------------------

@dataclasses.dataclass
class Headline:
    """Latency at 8 B and bandwidth at 1 MiB and at the largest size, one stack
    (one build of one library) on one node count."""

    system: str
    partition: str
    family: str
    stack: str
    nodes: int = 1
    build: str = ''
    library: str = ''
    lat8: list[float] = dataclasses.field(default_factory=list)
    bw1m: list[float] = dataclasses.field(default_factory=list)
    bw_sized: dict[int, list[float]] = dataclasses.field(
        default_factory=lambda: defaultdict(list))
    span: _Span = dataclasses.field(default_factory=_Span)

    @property
    def latency(self) -> float | None:
        return median(self.lat8) if self.lat8 else None

    @property
    def bandwidth(self) -> float | None:
        if self.bw1m:
            return median(self.bw1m)
        return median(self.bw_sized[MIB]) if MIB in self.bw_sized else None

    @property
    def largest(self) -> tuple[int, float] | None:
        if not self.bw_sized:
            return None
        size = max(self.bw_sized)
        return size, median(self.bw_sized[size])


def _headline_figures(rec: Record) -> tuple[float, float, list[tuple[int, float]]]:
    """A run's latency at 8 B, its bandwidth at 1 MiB (each measured where above 0)
    and its one-way bandwidths by message size (bytes, MB/s)."""
    values = rec.values
    latency = values.get(LATENCY_8B, 0)
    if not latency > 0 and rec.kernel in LAT_KERNELS:
        latency = values.get('lat_8', 0)
    # osu_bibw: both directions at once, not comparable with one-way bandwidth
    if rec.kernel == 'osu_bibw':
        return latency, 0, []
    by_size: list[tuple[int, float]] = []
    if rec.kernel in BW_KERNELS:
        for var, value in values.items():
            m = sized(var)
            if m and m[0] == 'bw' and value > 0:
                by_size.append((m[1], value))
    return latency, values.get(BANDWIDTH_1MIB, 0), by_size


def headlines(records: Iterable[Record]) -> list[Headline]:
    found: dict[tuple, Headline] = {}
    for rec in _usable(records, P2P_KERNELS):
        g = rec.group
        key = (g.system, g.partition, family(g.kernel), g.stack, g.nodes, g.build, g.library)
        h = found.get(key)
        if h is None:
            h = found[key] = Headline(*key)
        latency, bandwidth, by_size = _headline_figures(rec)
        if latency > 0:
            h.lat8.append(latency)
        if bandwidth > 0:
            h.bw1m.append(bandwidth)
        for size, value in by_size:
            h.bw_sized[size].append(value)
        # the run counts among the samples only where it gives one of the figures
        if latency > 0 or bandwidth > 0 or by_size:
            h.span.add(rec)
    return [found[k] for k in sorted(found)]


STACK_COLUMNS = ('partition', 'source', 'stack', 'latency 8 B [us]', 'x best',
                 'bw 1 MiB [MB/s]', 'of best', 'largest', 'bw largest [MB/s]', 'of best ',
                 'nodes', 'samples')


def stack_rows(heads: list[Headline]) -> Table:
    """The MPI-stack comparison: each stack against the best of its partition; the
    bandwidth at the largest size against the best at that same size (of the stacks
    that measured it: a stack alone at its largest size is its own best, as a stack
    alone in its partition is)."""
    # the best of each figure in its group: the lowest latency, the highest bandwidths
    lowest_lat: dict[tuple, float] = {}
    highest_bw: dict[tuple, float] = {}
    # the highest bandwidth at each size in its group: (group, bytes) -> MB/s
    highest_at: dict[tuple, float] = {}
    for h in heads:
        where = (h.system, h.partition, h.family, h.nodes)
        if h.latency is not None:
            lowest_lat[where] = min(lowest_lat.get(where, h.latency), h.latency)
        if h.bandwidth is not None:
            highest_bw[where] = max(highest_bw.get(where, h.bandwidth), h.bandwidth)
        for size, xs in h.bw_sized.items():
            at = (*where, size)
            highest_at[at] = max(highest_at.get(at, median(xs)), median(xs))
    apart = Apart.of(heads, lambda h: (h.system, h.partition, h.family, h.stack, h.nodes))
    rows, data = empty_table()
    for h in heads:
        where = (h.system, h.partition, h.family, h.nodes)
        lat, bw = h.latency, h.bandwidth
        largest, bw_largest = h.largest or (None, None)
        rel_lat = _ratio(lat, lowest_lat.get(where))
        rel_bw = _ratio(bw, highest_bw.get(where))
        rel_big = _ratio(bw_largest, highest_at.get((*where, largest)))
        rows.append([apart.partition(h), h.family, apart.stack(h), cell(lat),
                     cell(rel_lat, '.2f'), cell(bw, '.4g'), _pct(rel_bw),
                     'n/a' if largest is None else bytes_label(largest, ' '),
                     cell(bw_largest, '.4g'), _pct(rel_big), h.nodes, h.span.records])
        data.append({'system': h.system, 'partition': h.partition, 'nodes': h.nodes,
                     'source': h.family, 'stack': h.stack, 'library': h.span.library,
                     **_own(apart, h, 'build'), 'latency_8B_us': lat, 'latency_vs_best': rel_lat,
                     'bandwidth_1MiB_MBps': bw, 'bandwidth_vs_best': rel_bw,
                     'largest_bytes': largest, 'bandwidth_largest_MBps': bw_largest,
                     'largest_vs_best': rel_big, 'samples': h.span.records})
    return rows, data


def _ratio(x: float | None, of: float | None) -> float | None:
    """x / of; None where either is not measured (a figure measured is above 0)."""
    return x / of if x is not None and of else None


def _pct(x: float | None) -> str:
    return 'n/a' if x is None else f'{100 * x:.0f}%'


RING_OSU_COLUMNS = ('partition', 'stack', 'ring build', 'OSU build', 'ring lat 8 B [us]',
                    'OSU lat 8 B [us]', 'ring/OSU', 'ring bw 1 MiB [MB/s]',
                    'OSU bw 1 MiB [MB/s]', 'ring/OSU ', 'samples')


def _stack_place(h: Headline) -> tuple:
    """Where a ring build and an OSU install are compared: one stack on one system,
    partition and node count."""
    return (h.system, h.partition, h.stack, h.nodes)


def ring_osu_pairs(heads: list[Headline]) -> list[tuple[Headline, Headline]]:
    """Each ring headline beside the OSU headlines of its place (``_stack_place``): those
    of its own MPI library where one has it, else those whose library no ring headline
    of the place has, where the place tells them apart.  The ring logs
    MPI_Get_library_version ('MPICH Version: 4.0.2'), OSU its install's
    '<prefix> (<lib>)' ('MPICH (libmpich.so.12)'): the strings of one stack match only
    where both logged the same one.  Those left unmatched pair only where one ring
    library string is left and the OSU installs left all log one library string: after
    an upgrade (rings on 4.0.2 and 4.2.0, OSU installs of each, all 'MPICH
    (libmpich.so.12)') nothing says which install is which version, and the place has no
    such row rather than cross-version ones."""
    sides: dict[tuple, dict[str, list[Headline]]] = defaultdict(lambda: defaultdict(list))
    for h in heads:
        sides[_stack_place(h)][h.family].append(h)
    pairs: list[tuple[Headline, Headline]] = []
    for _, found in sorted(sides.items()):
        rings, osus = found.get('ring', []), found.get('osu', [])
        ring_libraries = {h.library for h in rings}
        osu_libraries = {h.library for h in osus}
        # the library strings left once the exact matches are taken: they pair where
        # one is left on each side
        ring_left = ring_libraries - osu_libraries
        osu_left = osu_libraries - ring_libraries
        matched = [(ring, osu) for ring in rings for osu in osus
                   if osu.library == ring.library
                   or (ring_left == {ring.library} and osu_left == {osu.library})]
        pairs += sorted(matched, key=lambda p: (p[0].library, p[0].build, p[1].build,
                                                p[1].library))
    return pairs


def ring_osu_rows(heads: list[Headline]) -> Table:
    """The ring kernel's figures beside OSU's, same stack, partition and node count
    (``ring_osu_pairs``): a row for each build of the ring against each OSU install (a
    headline is one build's: a Debug and a Release ring are two rows)."""
    pairs = ring_osu_pairs(heads)
    # of a pair of one library, the library where a stack's headlines hold several (the
    # builds have columns of their own); the system where the rows span several
    libraries = Apart.of(heads, _stack_place, build=lambda h: '')
    systems = Apart.of(ring for ring, _ in pairs)
    # of a pair of two library strings, each side's where its side of the place has
    # several
    side = {fam: Apart.of((h for h in heads if h.family == fam), _stack_place,
                          build=lambda h: '') for fam in ('ring', 'osu')}
    # the node count where a stack of a partition has rows of several (no nodes column)
    node_counts: dict[tuple, set[int]] = defaultdict(set)
    for ring, _ in pairs:
        node_counts[_stack_place(ring)[:-1]].add(ring.nodes)
    rows, data = empty_table()
    for ring, osu in pairs:
        f = _ring_osu_figures(ring, osu)
        one = ring.library == osu.library
        ring_build = _side_build(ring, '' if one else side['ring'].shown(ring))
        osu_build = _side_build(osu, '' if one else side['osu'].shown(osu))
        partition = _with_nodes(systems.partition(ring), ring.nodes,
                                len(node_counts[_stack_place(ring)[:-1]]))
        rows.append([partition, libraries.stack(ring) if one else ring.stack,
                     ring_build, osu_build, cell(ring.latency), cell(osu.latency),
                     cell(f['latency_ratio'], '.2f'), cell(ring.bandwidth, '.4g'),
                     cell(osu.bandwidth, '.4g'), cell(f['bandwidth_ratio'], '.2f'),
                     f'{ring.span.records}/{osu.span.records}'])
        data.append({'system': ring.system, 'partition': ring.partition, 'stack': ring.stack,
                     'nodes': ring.nodes, 'library': ring.library,
                     **({} if one else {'osu_library': osu.library}), 'ring_build': ring.build,
                     'osu_build': osu.build, **f})
    return rows, data


def _with_nodes(text: str, nodes: int, counts: int) -> str:
    """`text`, with its node count where its place was measured on several (`counts`):
    'shm (2 nodes)', for a table without a nodes column."""
    return f'{text} ({nodes} node{"s" if nodes != 1 else ""})' if counts > 1 else text


def _side_build(h: Headline, library: str) -> str:
    """A ring build's or OSU install's cell: its build ('-': none), and `library` beside
    it where shown ('cmake Release mpich (MPICH Version: 4.0.2)')."""
    build = h.build or '-'
    return f'{build} ({library})' if library else build


def _ring_osu_figures(ring: Headline, osu: Headline) -> dict[str, float | None]:
    """The ring's and OSU's figures side by side and their ratios (None: not measured)."""
    return {'ring_latency_8B_us': ring.latency, 'osu_latency_8B_us': osu.latency,
            'latency_ratio': _ratio(ring.latency, osu.latency),
            'ring_bandwidth_1MiB_MBps': ring.bandwidth,
            'osu_bandwidth_1MiB_MBps': osu.bandwidth,
            'bandwidth_ratio': _ratio(ring.bandwidth, osu.bandwidth),
            'samples_ring': ring.span.records, 'samples_osu': osu.span.records}


ACCURACY_COLUMNS = ('partition', 'stack', 'variable', 'ring/OSU (median)', 'min', 'max',
                    'samples', '95% interval of the median')


class _Ratios(NamedTuple):
    """Where the ring-vs-osu check's values of one ratio variable come from."""

    system: str
    partition: str
    stack: str
    variable: str
    nodes: int
    build: str
    library: str


def accuracy_rows(records: Iterable[Record]) -> Table:
    """The ring-vs-osu check's own ratios."""
    found: dict[_Ratios, list[float]] = defaultdict(list)
    for rec in _usable(records, (ACCURACY_KERNEL,)):
        g = rec.group
        for var, value in rec.values.items():
            if 'ratio' in var and value > 0:
                found[_Ratios(g.system, g.partition, g.stack, var, g.nodes, g.build,
                              g.library)].append(value)
    # the build and library where one (system, partition, stack, variable, nodes) has several
    apart = Apart.of(found, lambda k: k[:5])
    # the node count where one variable of a place was measured on several (the table
    # has no column of its own for it)
    node_counts = Counter(k._replace(nodes=0) for k in found)
    rows, data = empty_table()
    for k, xs in sorted(found.items()):
        iv = stats.median_interval(xs)
        variable = _with_nodes(k.variable, k.nodes, node_counts[k._replace(nodes=0)])
        rows.append([apart.partition(k), apart.stack(k), variable, f'{median(xs):.3f}',
                     f'{min(xs):.3f}', f'{max(xs):.3f}', len(xs),
                     f'{iv.low:.3f}-{iv.high:.3f} ({iv.method}, {stats.percent(iv.confidence)})'])
        data.append({'system': k.system, 'partition': k.partition, 'stack': k.stack,
                     'nodes': k.nodes, 'variable': k.variable, 'median': median(xs),
                     'samples': len(xs), 'low': iv.low, 'high': iv.high,
                     'confidence': iv.confidence, 'method': iv.method,
                     **_own(apart, k, 'build', 'library')})
    return rows, data


# ---- the ring's saturation curve ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Saturation(_OneBuild):
    """Bandwidth per node against k communicating ranks per node, one message size.

    One series per mode and layout: a layout's k are not another's (RingCheck: on
    one node k = 1 in pure MPI, k = T in masteronly R x T; across nodes every k
    from 1, where masteronly's k is one CPU per rank sending one k times larger
    message, pure MPI's k ranks per node each sending one; osu_mbw_mr: every k in
    one job); 0 means "not measured" (ReFrame cannot log NaN) and is left out.
    """

    size: int
    bw: dict[int, list[float]]            # k -> MB/s per node
    layouts: dict[int, set[str]]          # k -> "<mode> RxT" of the runs that measured it
    records: int = 0
    nodes: int = 1
    mode: str = ''
    ranks: int = 0                        # per node
    threads: int = 0                      # per rank

    @property
    def layout(self) -> str:
        """"<mode> RxT" of the series's runs."""
        return f'{self.mode} {self.ranks}x{self.threads}'

    def place(self) -> tuple:
        """Where the series ran, its layout aside: its group's fields."""
        return (self.system, self.partition, self.stack, self.kernel, self.size, self.nodes,
                self.build, self.library)

    def curve(self) -> list[tuple[int, float, float, int]]:
        """(k, median bandwidth, fraction of the maximum, samples) by k."""
        med = {k: median(v) for k, v in self.bw.items()}
        top = max(med.values())
        return [(k, med[k], med[k] / top if top > 0 else 0.0, len(self.bw[k]))
                for k in sorted(med)]


def saturation(records: Iterable[Record]) -> list[Saturation]:
    found: dict[tuple, Saturation] = {}
    counted: Counter[tuple] = Counter()     # key -> the records behind it
    for rec in _usable(records, SATURATION_KERNELS):
        seen: set[tuple] = set()
        for var, value in rec.values.items():
            m = saturation_var(var)
            if not m or not value > 0:
                continue
            k, size = m
            group = rec.group.with_size(size)
            key = (group, rec.mode, rec.ranks, rec.threads)
            s = found.get(key)
            if s is None:
                s = found[key] = Saturation(**_where(group), size=size, bw=defaultdict(list),
                                            layouts=defaultdict(set), mode=rec.mode,
                                            ranks=rec.ranks, threads=rec.threads)
            s.bw[k].append(value)
            s.layouts[k].add(s.layout)
            seen.add(key)
        counted.update(seen)
    return [dataclasses.replace(found[k], records=counted[k])
            for k in sorted(found, key=lambda k: (k[0].sort_key(), *k[1:]))]


SATURATION_COLUMNS = ('stack', 'partition', 'kernel', 'message', 'k', 'measured by',
                      'bw/node [MB/s]', '% of max', 'nodes', 'samples')


def saturation_rows(series: list[Saturation]) -> Table:
    # a series's place and layout, its build and library aside
    apart = Apart.of(series, lambda s: (*s.place()[:-2], s.mode, s.ranks, s.threads))
    rows, data = empty_table()
    for s in series:
        for k, bw, frac, n in s.curve():
            by = ', '.join(sorted(s.layouts[k]))
            rows.append([apart.stack(s), apart.partition(s), s.kernel,
                         bytes_label(s.size, ' '), k, by, f'{bw:.4g}', f'{100 * frac:.0f}%',
                         s.nodes, n])
            data.append({**s.where(), **_own(apart, s, 'build', 'library'), 'nodes': s.nodes,
                         'bytes': s.size, 'k': k, 'measured_by': by, 'bandwidth_MBps': bw,
                         'fraction_of_max': frac, 'samples': n})
    return rows, data


SATURATION_NOTE = ('Aggregated bandwidth per node against k communicating ranks (or pairs) '
                   'per node (Rabenseifner); % of the largest bandwidth of the same kernel, '
                   'stack, partition, node count, message size and layout; "measured by" '
                   'names the layout. '
                   'A node with few cores has few k: more cores show whether one '
                   'communicating rank saturates the interconnect.')


# ---- Rabenseifner's masteronly against pure MPI across nodes ------------------------

#: s_MPP / s_hybrid: the pure-MPI model transfers twice the data of the hybrid one in
#: Rabenseifner's domain decomposition (seed 001, Table 1, "assumed")
S_RATIO = 2.0


@dataclasses.dataclass(frozen=True)
class Rabenseifner(_OneBuild):
    """Seed 002's Table-1 row and seed 001's T_hybrid / T_MPP from the pure-MPI C x 1
    saturation series across nodes: pure MPI = its largest k (every CPU of the node),
    masteronly = one communicating CPU per node (k = 1): the masteronly 1 x C run's
    (seed 001: one 1-threaded MPI process per node) where measured, else the pure-MPI
    run's own k = 1 (seed 002: the ring in pure MPI with one CPU of each node
    communicating)."""

    size: int
    nodes: int
    k_max: int
    b_hybrid: float             # MB/s per node at k = 1
    b_mpp: float                # MB/s per node at k = k_max
    fraction: float             # b_hybrid / the largest bandwidth of the curve
    s_ratio: float = S_RATIO

    @property
    def t_ratio(self) -> float:
        """T_hybrid / T_MPP = (b_MPP / b_hybrid) / (s_MPP / s_hybrid)."""
        return self.b_mpp / self.b_hybrid / self.s_ratio


def _k_curve(s: Saturation) -> dict[int, float]:
    return {k: bw for k, bw, _frac, _n in s.curve()}


def rabenseifner(series: list[Saturation], s_ratio: float = S_RATIO) -> list[Rabenseifner]:
    """Rows for the pure-MPI series (threads 1) measured across nodes (nodes > 1) at a k
    above 1 with a k = 1 of their own or of the masteronly 1 x C run of the same place
    (C: the pure-MPI ranks per node); other layouts give no row of their own (masteronly
    at k > 1 is one CPU per node sending a k times larger message, not k CPUs); on one
    node the ring's "nodes" are ranks sharing memory."""
    # (place, C) -> the masteronly 1 x C run's bandwidth at k = 1
    masteronly = {(s.place(), s.threads): _k_curve(s)[1] for s in series
                  if s.mode == 'masteronly' and s.ranks == 1 and 1 in s.bw}
    out = []
    for s in series:
        if s.nodes < 2 or s.mode != 'mpi' or s.threads != 1:
            continue
        curve = _k_curve(s)
        k_max = max(curve)
        b_hybrid = masteronly.get((s.place(), s.ranks), curve.get(1, 0.0))
        if k_max < 2 or b_hybrid <= 0:
            continue
        out.append(Rabenseifner(s.system, s.partition, s.stack, s.kernel, s.size, s.nodes,
                                k_max, b_hybrid, curve[k_max],
                                b_hybrid / max(b_hybrid, *curve.values()), s_ratio,
                                build=s.build, library=s.library))
    return out


RABENSEIFNER_COLUMNS = ('system', 'partition', 'stack', 'kernel', 'message', 'nodes',
                        'masteronly (k=1) [MB/s]', 'pure MPI [MB/s]', 'k', 'masteronly / max',
                        'b_MPP/b_hybrid', 'T_hybrid/T_MPP')


def rabenseifner_rows(rows: list[Rabenseifner]) -> Table:
    """The table (its system column names the system always; the stack names the build
    and library where a place holds several) and the JSON (``build``, ``library`` only
    there)."""
    apart = Apart.of(rows, lambda r: (r.system, r.partition, r.stack, r.kernel, r.size,
                                      r.nodes))
    table = [[r.system, r.partition, apart.stack(r), r.kernel, bytes_label(r.size, ' '),
              r.nodes, f'{r.b_hybrid:.4g}', f'{r.b_mpp:.4g}', r.k_max,
              f'{100 * r.fraction:.0f}%', f'{r.b_mpp / r.b_hybrid:.2f}', f'{r.t_ratio:.2f}']
             for r in rows]
    data = []
    for r in rows:
        figures = {k: v for k, v in dataclasses.asdict(r).items() if k not in ('build', 'library')}
        data.append({**figures, **_own(apart, r, 'build', 'library'), 't_ratio': r.t_ratio})
    return table, data


RABENSEIFNER_NOTE = ('Inter-node bandwidth per node of the ring across nodes (each message '
                     'counted once): masteronly = one communicating CPU per node (k = 1), '
                     'pure MPI = every CPU (the largest k); masteronly / max as in Rabenseifner\'s '
                     'Table 1 (seed 002); T_hybrid/T_MPP = (b_MPP/b_hybrid)/(s_MPP/s_hybrid) with '
                     's_MPP/s_hybrid = 2 as assumed there (seed 001, Table 1): above 1, the '
                     'masteronly communication takes longer. Runs on one node have no '
                     'inter-node bandwidth and are left out.')


# ---- collectives ----------------------------------------------------------------

#: ``Collective.ranks_per_node`` of the one-node series (its ranks per node vary)
ONE_NODE = 0


@dataclasses.dataclass(frozen=True)
class Collective(_OneBuild, _Fitted):
    """A collective's latency against the rank count n = ranks per node x nodes.

    A series is either the one-node sweep (``ranks_per_node`` ``ONE_NODE``: every
    run on one node, its points its rank counts, Xu & Hwang's fit over n) or one
    ranks-per-node count c across nodes (its points n = c x nodes); a point never
    pools placements (n = 2 on one node, shared memory, and on 1 x 2 nodes, the
    network, are two series).  A one-node run of c ranks is also its c-per-node
    series's 1-node point: it is that placement on one node (n = c x 1, one run kind
    per point), and the series's node scaling starts from it.
    """

    size: int
    times: dict[int, list[float]]         # rank count n -> us
    fit: LogFit | None = None
    error: str = ''
    ranks_per_node: int = ONE_NODE

    def place(self) -> tuple:
        """Where the series ran, its placement aside."""
        return (self.system, self.partition, self.stack, self.kernel, self.size, self.build,
                self.library)

    @property
    def series(self) -> str:
        """Which series of its place: 'one node' or '<c> per node'."""
        if self.ranks_per_node == ONE_NODE:
            return 'one node'
        return f'{self.ranks_per_node} per node'

    @property
    def samples(self) -> int:
        return sum(len(v) for v in self.times.values())


#: message sizes shown in the collectives table (those present; all go to the JSON)
SHOWN_SIZES = (8, 1024, 65536, MIB)


def collectives(records: Iterable[Record]) -> list[Collective]:
    """The one-node series and the ranks-per-node series across nodes (``Collective``),
    each fitted; a one-node series of one rank count that is the 1-node point of a
    ranks-per-node series gives no row of its own (nothing to fit, the point shown)."""
    found: dict[tuple[Group, int], Collective] = {}
    for rec in _usable(records, COLLECTIVE_KERNELS):
        n = rec.ranks * rec.nodes
        for var, value in rec.values.items():
            m = sized(var)
            if not m or m[0] != 'lat' or not value > 0:
                continue
            # the group without nodes: node counts are points of a series
            group = rec.group.with_size(m[1])._replace(nodes=0)
            key = (group, ONE_NODE if rec.nodes == 1 else rec.ranks)
            c = found.get(key)
            if c is None:
                c = found[key] = Collective(**_where(group, 'nodes'), size=m[1],
                                            times=defaultdict(list), ranks_per_node=key[1])
            c.times[n].append(value)
    for (group, per_node), c in list(found.items()):
        if per_node != ONE_NODE:
            continue
        joined = {n for n in c.times if (group, n) in found}
        for n in joined:            # n ranks on one node: the n-per-node series's 1 node
            found[(group, n)].times[n].extend(c.times[n])
        if len(c.times) == 1 and joined:
            del found[(group, per_node)]
    return _fit_each(found, _fit_ranks, lambda k: (k[0].sort_key(), k[1]))


def several_placements(series: list[Collective]) -> set[tuple]:
    """The (system, partition, stack, kernel, size, build, library) of `series` with
    more than one series (one node, ranks per node): their series name themselves."""
    per_place: dict[tuple, set[int]] = defaultdict(set)
    for c in series:
        per_place[c.place()].add(c.ranks_per_node)
    return {place for place, kinds in per_place.items() if len(kinds) > 1}


def _fit_ranks(ns: list[int], ts: list[float]) -> LogFit:
    if len(ns) < 2:
        raise FitError(f'needs >= 2 rank counts (only n = {ns[0]})')
    return fit_log2(ns, ts)


COLLECTIVE_COLUMNS = ('stack', 'partition', 'kernel', 'message', 'rank counts', 'a [us]',
                      'b [us]', 'rel. error', 'samples')


def collective_rows(series: list[Collective]) -> Table:
    sizes_by_kernel: dict[tuple, set[int]] = defaultdict(set)
    for c in series:
        sizes_by_kernel[(c.system, c.partition, c.stack, c.kernel)].add(c.size)
    # a place of several series: each names its own ('one node', '<c> per node')
    named = several_placements(series)
    apart = Apart.of(series, lambda c: (*c.place()[:-2], c.ranks_per_node))
    rows, data = empty_table()
    for c in series:
        sizes = sizes_by_kernel[(c.system, c.partition, c.stack, c.kernel)]
        shown = {s for s in SHOWN_SIZES if s in sizes} | {min(sizes), max(sizes)}
        ns, ts = c.medians()
        per_node: dict[str, int] = {}
        if c.place() in named:
            per_node = ({'nodes': 1} if c.ranks_per_node == ONE_NODE
                        else {'ranks_per_node': c.ranks_per_node})
        data.append({**c.where(), **_own(apart, c, 'build', 'library'), 'bytes': c.size,
                     'ranks': ns, 'times_us': ts, **per_node, **c.fit_data(), 'samples': c.samples})
        if c.size not in shown:
            continue
        fit = [c.error, '', ''] if c.fit is None else [
            f'{c.fit.a:.3g}', f'{c.fit.b:.3g}', error_text(c.fit, c.fit.rel_error)]
        counts = ','.join(str(n) for n in ns) + (f' ({c.series})' if per_node else '')
        rows.append([apart.stack(c), apart.partition(c), c.kernel, bytes_label(c.size, ' '),
                     counts, *fit, c.samples])
    return rows, data
