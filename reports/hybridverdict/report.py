"""Everything one report holds, computed once from the records for every output.

``build`` turns records into a ``Report``: what the data is (systems, stacks
with their library versions, dates, samples), the verdicts, the analysis
sections (each a table plus the data behind it, optionally with a figure), the
history series and the objects the figures are drawn from.  The renderers
(``render`` for terminal and Markdown, ``html`` for the HTML page, ``tidy`` for
CSV/JSON) only format what is here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Sequence

from . import __version__, comm, history, phases, spmv_model
from .perflog import ReadStats, Record
from .verdict import DEFAULT_NOISE_FLOOR, Verdict, verdicts


@dataclasses.dataclass
class Section:
    """One analysis table beside the verdicts."""

    title: str
    note: str
    columns: tuple[str, ...]
    rows: list[list[object]]
    data: list[dict]
    figure: str = ''          # key of the figure drawn for it (HTML only)
    key: str = ''             # short name, for the JSON

    @property
    def missing(self) -> str:
        """What data the section needs, said where it has none."""
        return NEEDS.get(self.key, 'no matching runs')


#: what each analysis needs (perflog kernels and variables), for empty sections
NEEDS = {
    'md_phases': 'md runs in mpi and a hybrid mode with phase_* variables',
    'spmv_efficiencies': 'spmv runs in mpi and masteronly (and serial for e_mt)',
    'spmv_overlap': 'spmv masteronly runs with t_pack, t_comp_interior, t_comp_boundary',
    'hockney': 'point-to-point runs (ring-pingpong, ring-bw, osu_latency, osu_bw, osu_bibw) '
               'with lat_<bytes> or bw_<bytes>',
    'stack_comparison': 'point-to-point runs with latency_8B/lat_8 or bandwidth_1MiB/bw_<bytes>',
    'ring_vs_osu': 'ring-pingpong/ring-bw and osu_latency/osu_bw runs on the same stack and '
                   'partition',
    'ring_osu_accuracy': 'ring-vs-osu runs with *_ratio_* variables',
    'saturation': 'ring or osu_mbw_mr runs with bw_k<k>_<bytes>',
    'collectives': 'osu_allreduce, osu_bcast, ... runs with lat_<bytes>',
    'history': 'verified runs',
}


@dataclasses.dataclass
class Meta:
    """What a report is made of: named in every output."""

    generated: dt.datetime
    version: str
    inputs: list[str]
    since: dt.datetime | None
    records: int                          # in the report's window
    records_read: int                     # all read (the history uses them all)
    skipped: int
    warnings: list[str]
    systems: list[str]
    stacks: dict[str, list[str]]          # stack -> MPI library versions
    first: dt.datetime | None
    last: dt.datetime | None

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ('generated', 'since', 'first', 'last'):
            d[k] = d[k].isoformat() if d[k] else None
        return d

    @property
    def dates(self) -> str:
        if self.first is None or self.last is None:
            return 'no runs'
        return f'{self.first:%Y-%m-%d %H:%M} .. {self.last:%Y-%m-%d %H:%M} UTC'

    def lines(self) -> list[str]:
        """The description every output starts with."""
        out = [f'System: {", ".join(self.systems) or "none"}; runs {self.dates}; '
               f'{self.records} records'
               + (f' since {self.since.isoformat()}' if self.since else '')
               + f' ({self.records_read} read for the history, {self.skipped} lines skipped).',
               'Stacks and MPI libraries:']
        for stack, libs in self.stacks.items():
            out.append(f'- {stack}: {"; ".join(libs) or "unknown"}')
        return out


@dataclasses.dataclass
class Report:
    meta: Meta
    verdicts: list[Verdict]
    sections: list[Section]
    history: list[history.Series]
    history_total: int
    curves: list[comm.Curve]
    headlines: list[comm.Headline]
    saturation: list[comm.Saturation]
    collectives: list[comm.Collective]
    efficiencies: list[spmv_model.Efficiency]
    phases: list[phases.PhaseRow]
    records: Sequence[Record]             # the window


def _meta(window: Sequence[Record], read: int, stats: ReadStats, inputs: list[str],
          since: dt.datetime | None) -> Meta:
    libs: dict[str, set[str]] = defaultdict(set)
    systems: set[str] = set()
    first = last = None
    for r in window:
        systems.add(r.system)
        stack_libs = libs[r.stack]
        if r.mpi_library:
            stack_libs.add(r.mpi_library)
        first = r.time if first is None or r.time < first else first
        last = r.time if last is None or r.time > last else last
    return Meta(generated=dt.datetime.now(dt.timezone.utc), version=__version__,
                inputs=list(inputs), since=since, records=len(window), records_read=read,
                skipped=stats.skipped, warnings=stats.warnings(), systems=sorted(systems),
                stacks={s: sorted(v) for s, v in sorted(libs.items())}, first=first, last=last)


def build(records: Sequence[Record], stats: ReadStats, inputs: list[str],
          since: dt.datetime | None = None, noise_floor: float = DEFAULT_NOISE_FLOOR,
          history_limit: int = history.DEFAULT_LIMIT,
          history_points: int = history.DEFAULT_MAX_POINTS) -> Report:
    """The report of the records since `since`, with the history of all `records`."""
    window = records if since is None else [r for r in records if r.time >= since]
    found = verdicts(window, noise_floor=noise_floor)
    md = phases.phase_rows(window)
    eff = spmv_model.efficiencies(window)
    ovl = spmv_model.overlaps(window)
    curves = comm.p2p_curves(window)
    heads = comm.headlines(window)
    sat = comm.saturation(window)
    coll = comm.collectives(window)
    series, total = history.history(records, limit=history_limit, max_points=history_points)

    stack_rows, stack_data = comm.stack_rows(heads)
    ring_osu_rows, ring_osu_data = comm.ring_osu_rows(heads)
    acc_rows, acc_data = comm.accuracy_rows(window)
    sat_rows, sat_data = comm.saturation_rows(sat)
    coll_rows, coll_data = comm.collective_rows(coll)
    sections = [
        Section('MD phase breakdown (Chorley, Walker & Guest, Tables 2-4)',
                'Median time of each phase on the slowest rank; hybrid/mpi above 1: '
                'slower in hybrid.', phases.COLUMNS, phases.table_rows(md),
                [dataclasses.asdict(r) | {'ratio': r.ratio} for r in md], 'phases', 'md_phases'),
        Section('SpMV efficiencies (Chow & Hysom)', spmv_model.DIRECTIONS,
                spmv_model.EFF_COLUMNS, spmv_model.efficiency_rows(eff),
                [dataclasses.asdict(e) for e in eff], 'efficiencies', 'spmv_efficiencies'),
        Section('SpMV overlap model (Rabenseifner): masteronly against funneled',
                'Fractions of a masteronly call; eps = T_masteronly / T_funneled, one '
                'communicating thread.', spmv_model.OVL_COLUMNS,
                spmv_model.overlap_rows(ovl), [dataclasses.asdict(o) for o in ovl], '',
                'spmv_overlap'),
        Section('Hockney fits t = t0 + m / r_inf (Xu & Hwang)',
                'Least squares on the relative residuals of the median one-way time per '
                'message size (lat_<m>, or m / bw_<m>); m_1/2 = t0 r_inf; rel. error = RMS '
                'relative residual. OSU and the ring kernel are fitted separately (osu_bibw: '
                'm / bidirectional bandwidth, so its r_inf counts both directions).',
                comm.HOCKNEY_COLUMNS, comm.hockney_rows(curves), comm.hockney_data(curves),
                'hockney', 'hockney'),
        Section('MPI-stack comparison',
                'Latency at 8 B and bandwidth at 1 MiB and at the largest size, each stack '
                'against the best stack of the same partition and source (x best: 1.00 is '
                'the lowest latency; of best: 100% is the highest bandwidth).',
                comm.STACK_COLUMNS, stack_rows, stack_data, 'stacks', 'stack_comparison'),
        Section('Ring kernel against OSU',
                'The ring kernel\'s latency at 8 B and bandwidth at 1 MiB beside the OSU '
                'benchmarks\' on the same stack and partition; samples = ring/OSU runs.',
                comm.RING_OSU_COLUMNS, ring_osu_rows, ring_osu_data, '', 'ring_vs_osu'),
        Section('Ring-vs-OSU accuracy check', 'The ratios the ring-vs-osu check logs.',
                comm.ACCURACY_COLUMNS, acc_rows, acc_data, '', 'ring_osu_accuracy'),
        Section('Ring saturation curve (Rabenseifner)', comm.SATURATION_NOTE,
                comm.SATURATION_COLUMNS, sat_rows, sat_data, 'saturation', 'saturation'),
        Section('Collectives: t = a log2 n + b (Xu & Hwang)',
                'Median latency against the rank count n = ranks per node x nodes, per '
                'message size (the smallest, the largest, 8 B, 1 KiB, 64 KiB and 1 MiB in '
                'this table; every size in the JSON).', comm.COLLECTIVE_COLUMNS, coll_rows,
                coll_data, 'collectives', 'collectives'),
        Section('History of the performance variables',
                f'{len(series)} of {total} series (reference band first, then values outside '
                'it, then the longest; at most the history limit); band = ref x (1 + lower) '
                '.. ref x (1 + upper) as ReFrame logs it.', history.COLUMNS,
                history.rows(series), [], 'history', 'history'),
    ]
    return Report(meta=_meta(window, len(records), stats, inputs, since), verdicts=found,
                  sections=sections, history=series,
                  history_total=total, curves=curves, headlines=heads, saturation=sat,
                  collectives=coll, efficiencies=eff, phases=md, records=window)
