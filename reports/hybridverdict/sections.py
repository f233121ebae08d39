"""The report's analyses, in report order: each the records in, its ``Section`` out.

``ANALYSES`` is the registry: one line per analysis.  The functions here wrap the
analysis modules (``phases``, ``spmv_model``, ``comm``, ``history``): they call
the analysis, keep the objects the figures are drawn from in ``ctx.shared``
(under the names below, which ``report.build`` hands to the ``Report``) and
return the section with its table, data, figure key and notes.
"""

from __future__ import annotations

import dataclasses

from . import changes, comm, history, phases, spmv_model, verdict
from . import section as s
from .section import Analysis, Context, Section

# names of the shared analysis objects (Context.shared); those the figures are drawn
# from are the fields of ``report.Report`` of the same name (``FIGURE_OBJECTS``)
PHASE_ROWS = 'phases'
EFFICIENCIES = 'efficiencies'
OVERLAPS = 'overlaps'
CURVES = 'curves'
HEADLINES = 'headlines'
SATURATION = 'saturation'
COLLECTIVES = 'collectives'
HISTORY = 'history'           # (series, total)
VERDICTS = 'verdicts'         # set by report.build
RABENSEIFNER = 'rabenseifner'
FIGURE_OBJECTS = (CURVES, HEADLINES, SATURATION, COLLECTIVES, EFFICIENCIES, PHASE_ROWS)
#: the shared objects that are one analysis of the report window: name -> the analysis
FROM_WINDOW = {PHASE_ROWS: phases.phase_rows, EFFICIENCIES: spmv_model.efficiencies,
               OVERLAPS: spmv_model.overlaps, CURVES: comm.p2p_curves,
               HEADLINES: comm.headlines, SATURATION: comm.saturation,
               COLLECTIVES: comm.collectives}


def _data(items: list, *properties: str) -> list[dict]:
    """A section's JSON data: each item's fields, and the `properties` named."""
    return [dataclasses.asdict(x) | {p: getattr(x, p) for p in properties} for x in items]


def _shared(ctx: Context, name: str) -> list:
    """The shared object `name` of ``FROM_WINDOW``, computed once per report."""
    return ctx.get(name, lambda: FROM_WINDOW[name](ctx.window))


def since_last_night(ctx: Context) -> Section | None:
    """The morning page (``changes.since_last_night``), when the report covers the last
    session of its history store (a nightly)."""
    if ctx.stored is None or not ctx.window:
        return None
    hist = changes.History(*ctx.stored, lookup=changes.History.from_store_tables(*ctx.stored))
    morning = changes.since_last_night(hist, knobs=changes.Knobs.from_env())
    if morning.last_night is None or min(r.time for r in ctx.window) < morning.last_night:
        return None
    return Section(changes.TITLE, changes.NOTE, changes.COLUMNS, changes.section_rows(morning),
                   [morning.as_dict()], '', s.SINCE_LAST_NIGHT, 'a history store',
                   standalone=not morning.quiet)


def md_phases(ctx: Context) -> Section:
    md = _shared(ctx, PHASE_ROWS)
    return Section('MD phase breakdown (Chorley, Walker & Guest, Tables 2-4)',
                   'Median time of each phase on the slowest rank; hybrid/mpi above 1: '
                   'slower in hybrid.', phases.COLUMNS, phases.table_rows(md),
                   _data(md, 'ratio'), s.FIG_PHASES, s.MD_PHASES,
                   'md runs in mpi and a hybrid mode with phase_* variables')


def spmv_efficiencies(ctx: Context) -> Section:
    eff = _shared(ctx, EFFICIENCIES)
    return Section('SpMV efficiencies (Chow & Hysom)', spmv_model.DIRECTIONS,
                   spmv_model.EFF_COLUMNS, spmv_model.efficiency_rows(eff), _data(eff),
                   s.FIG_EFFICIENCIES, s.SPMV_EFFICIENCIES,
                   'spmv runs in mpi and masteronly (and serial for e_mt)')


def _verdicts(ctx: Context) -> list[verdict.Verdict]:
    """The report's verdicts (set by ``report.build``; computed here otherwise)."""
    return ctx.get(VERDICTS, lambda: verdict.verdicts(ctx.window, ctx.noise_floor,
                                                      history=ctx.records))


def scaling(ctx: Context) -> Section:
    cross = verdict.across_nodes(_verdicts(ctx))
    note = ('One row per kernel, size and pair of layouts (per node) measured on several '
            'node counts: the speedup and verdict at each, and the node count from which '
            'hybrid wins or loses at every larger one (INCONCLUSIVE calls neither break nor '
            'start it). Never pooled across node counts.')
    return Section('Scaling: hybrid against pure MPI by node count, and the crossover',
                   ' '.join([note, *(c.sentence for c in cross)]),
                   verdict.CROSSOVER_COLUMNS, verdict.crossover_rows(cross),
                   _data(cross, 'sentence'),
                   s.FIG_SCALING, s.SCALING, 'verdicts of one pair on 2 or more node counts')


def unjudged(ctx: Context) -> Section:
    rows = verdict.unjudged(ctx.window)
    return Section('Pairs without a verdict',
                   'Pure-MPI/hybrid pairs that were measured but not judged, per node count: '
                   'a side whose every run was left out (oversubscribed, failed or '
                   'unverified) gives no verdict. Oversubscribed: two threads shared a core, '
                   'e.g. on test nodes that share one machine\'s cores.',
                   verdict.UNJUDGED_COLUMNS, verdict.unjudged_rows(rows),
                   _data(rows, 'sentence'), '',
                   s.UNJUDGED, 'a pure-MPI/hybrid pair measured but not judged (every pair '
                   'measured here was judged)')


def functional_verdicts(ctx: Context) -> Section | None:
    if not ctx.functional:
        return None
    found = verdict.functional(ctx.window, ctx.noise_floor, judged=_verdicts(ctx))
    cross = verdict.across_nodes(found)
    note = ('NOT FINDINGS. The pairs above without a verdict only because their runs were '
            'oversubscribed (ranks and threads shared cores: test nodes on one machine, a '
            'declared topology larger than the machine), judged by the verdicts\' rule '
            'per node count, never pooled: the verdict path exercised on real runs of a '
            'machine too small for them. Their timings measure the sharing, not hybrid '
            'against MPI; they are never confirmed and never among the verdicts.')
    return Section('Functional verdicts of oversubscribed runs (not findings)',
                   ' '.join([note, *(f'Functional: {c.sentence}' for c in cross)]),
                   verdict.FUNCTIONAL_COLUMNS, verdict.functional_rows(found),
                   _data(found), '', s.FUNCTIONAL,
                   'a pair without a verdict only because its runs were oversubscribed',
                   standalone=True)


def network_interface(ctx: Context) -> Section:
    ni = spmv_model.network_interface(ctx.window)
    return Section('SpMV network interface efficiency on 2 nodes (Chow & Hysom, Table 8)',
                   'e_ni = t_comm^mpi(m1) / t_comm^hyb(m2) from the runs on 2 nodes, each mode '
                   'at its own typical message size (that of its layout and problem size); '
                   'above 1 favours hybrid (fewer processes share the network interface). The '
                   'efficiency table shows it on every node count of the same size.',
                   spmv_model.NI_COLUMNS, spmv_model.ni_rows(ni),
                   _data(ni, 'e_ni'), '',
                   s.NETWORK_INTERFACE, 'spmv runs in mpi and masteronly on 2 nodes')


def spmv_overlap(ctx: Context) -> Section:
    ovl = _shared(ctx, OVERLAPS)
    return Section('SpMV overlap model (Rabenseifner): masteronly against funneled',
                   'Fractions of a masteronly call; eps = T_masteronly / T_funneled, one '
                   'communicating thread.', spmv_model.OVL_COLUMNS,
                   spmv_model.overlap_rows(ovl), _data(ovl), '', s.SPMV_OVERLAP,
                   'spmv masteronly runs with t_pack, t_comp_interior, t_comp_boundary')


def hockney(ctx: Context) -> Section:
    curves = _shared(ctx, CURVES)
    return Section('Hockney fits t = t0 + m / r_inf (Xu & Hwang)',
                   'Least squares on the relative residuals of the median one-way time per '
                   'message size (lat_<m>, or m / bw_<m>); m_1/2 = t0 r_inf; rel. error = RMS '
                   'relative residual. OSU and the ring kernel are fitted separately (osu_bibw: '
                   'm / bidirectional bandwidth, so its r_inf counts both directions).',
                   comm.HOCKNEY_COLUMNS, comm.hockney_rows(curves), comm.hockney_data(curves),
                   s.FIG_HOCKNEY, s.HOCKNEY,
                   'point-to-point runs (ring-pingpong, ring-bw, osu_latency, osu_bw, '
                   'osu_bibw) with lat_<bytes> or bw_<bytes>', standalone=True)


def stack_comparison(ctx: Context) -> Section:
    rows, data = comm.stack_rows(_shared(ctx, HEADLINES))
    return Section('MPI-stack comparison',
                   'Latency at 8 B and bandwidth at 1 MiB and at the largest size, each stack '
                   'against the best stack of the same partition and source (x best: 1.00 is '
                   'the lowest latency; of best: 100% is the highest bandwidth).',
                   comm.STACK_COLUMNS, rows, data, s.FIG_STACKS, s.STACK_COMPARISON,
                   'point-to-point runs with latency_8B/lat_8 or bandwidth_1MiB/bw_<bytes>',
                   standalone=True)


def ring_vs_osu(ctx: Context) -> Section:
    rows, data = comm.ring_osu_rows(_shared(ctx, HEADLINES))
    return Section('Ring kernel against OSU',
                   'The ring kernel\'s latency at 8 B and bandwidth at 1 MiB beside the OSU '
                   'benchmarks\' on the same stack, partition and node count, a row per ring '
                   'build and OSU install (each logs the library as it names it: the kernels '
                   'MPI_Get_library_version, OSU its linked library); samples = ring/OSU runs.',
                   comm.RING_OSU_COLUMNS, rows, data, '', s.RING_VS_OSU,
                   'ring-pingpong/ring-bw and osu_latency/osu_bw runs on the same stack and '
                   'partition', standalone=True)


def ring_osu_accuracy(ctx: Context) -> Section:
    rows, data = comm.accuracy_rows(ctx.window)
    return Section('Ring-vs-OSU accuracy check', 'The ratios the ring-vs-osu check logs.',
                   comm.ACCURACY_COLUMNS, rows, data, '', s.RING_OSU_ACCURACY,
                   'ring-vs-osu runs with *_ratio_* variables', standalone=True)


def saturation(ctx: Context) -> Section:
    rows, data = comm.saturation_rows(_shared(ctx, SATURATION))
    return Section('Ring saturation curve (Rabenseifner)', comm.SATURATION_NOTE,
                   comm.SATURATION_COLUMNS, rows, data, s.FIG_SATURATION, s.SATURATION,
                   'ring or osu_mbw_mr runs with bw_k<k>_<bytes>', standalone=True)


def masteronly_across_nodes(ctx: Context) -> Section:
    found = ctx.get(RABENSEIFNER, lambda: comm.rabenseifner(_shared(ctx, SATURATION)))
    rows, data = comm.rabenseifner_rows(found)
    return Section('Masteronly against pure MPI across nodes (Rabenseifner)',
                   comm.RABENSEIFNER_NOTE, comm.RABENSEIFNER_COLUMNS, rows, data, '',
                   s.MASTERONLY_ACROSS_NODES,
                   'ring or osu_mbw_mr runs on 2 or more nodes with bw_k1_<bytes> and a larger k',
                   standalone=True)


def collectives(ctx: Context) -> Section:
    coll = _shared(ctx, COLLECTIVES)
    rows, data = comm.collective_rows(coll)
    return Section('Collectives: t = a log2 n + b (Xu & Hwang)',
                   'Median latency against the rank count n = ranks per node x nodes, per '
                   'message size (the smallest, the largest, 8 B, 1 KiB, 64 KiB and 1 MiB in '
                   'this table; every size in the JSON).', comm.COLLECTIVE_COLUMNS, rows,
                   data, s.FIG_COLLECTIVES, s.COLLECTIVES,
                   'osu_allreduce, osu_bcast, ... runs with lat_<bytes>', standalone=True)


def history_section(ctx: Context) -> Section:
    def compute() -> tuple[list[history.Series], int]:
        if ctx.stored is not None:
            return history.series(*ctx.stored, limit=ctx.history_limit,
                                  max_points=ctx.history_points)
        return history.history(ctx.records, limit=ctx.history_limit,
                               max_points=ctx.history_points)
    series, total = ctx.get(HISTORY, compute)
    rows = history.rows(series)
    if not rows and total:
        # none drawn by choice (--history-limit 0), not for want of verified runs: a row
        # says so, so that the section is not one without data
        rows = [[f'0 of {total} series drawn (--history-limit {ctx.history_limit})',
                 *[''] * (len(history.COLUMNS) - 1)]]
    return Section('History of the performance variables',
                   f'{len(series)} of {total} series (reference band first, then values '
                   'outside it, then the longest; at most the history limit); band = ref x '
                   '(1 + lower) .. ref x (1 + upper) as ReFrame logs it.', history.COLUMNS,
                   rows, [], s.FIG_HISTORY, s.HISTORY, 'verified runs')


#: the registry: every analysis section of the report, in report order
ANALYSES: tuple[Analysis, ...] = (
    since_last_night,
    scaling,
    unjudged,
    functional_verdicts,
    md_phases,
    spmv_efficiencies,
    network_interface,
    spmv_overlap,
    hockney,
    stack_comparison,
    ring_vs_osu,
    ring_osu_accuracy,
    saturation,
    masteronly_across_nodes,
    collectives,
    history_section,
)
