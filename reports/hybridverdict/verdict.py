"""Pair hybrid runs with pure-MPI runs at equal cores and judge them.

A pair lies inside one ``Record.group`` (system, partition, stack, kernel,
size, node count, build and MPI library) at one number of cores per node: the
runs of one hybrid mode and layout against those of a pure-MPI layout (mode
``mpi``), one verdict per pure-MPI layout (``mpi_layout``).  Runs on different
node counts are never pooled; ``crossovers`` lines them up by node count.

The speedup is T_mpi / T_hybrid (``t_total``); above 1 hybrid is faster.  The
call is ``stats.speedup_call`` (WIN, LOSS, TIE or INCONCLUSIVE; see
docs/pages/statistics.md).  With the history, a verdict is ``confirmed`` when
each of the last ``stats.CONFIRM_SESSIONS`` sessions made the same call.

Failed, unverified and oversubscribed runs never enter a verdict
(``Record.left_out``); ``unjudged`` lists the pairs that got none for it.  On a
machine too small for its layouts ``functional`` judges the pairs whose only
fault is oversubscription, by the same rule, marked ``oversubscribed``: the
verdict path exercised end to end, never a finding, never confirmed, and never
among ``verdicts``.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

from harnesscore import plan, stats
from harnesscore.schema import TIME_VARIABLE, message_time_size
from harnesscore.stats import INCONCLUSIVE, LOSS, WIN
from harnesscore.units import bytes_label

from .apart import Apart
from .records import KernelSeries, Record, size_key

DEFAULT_NOISE_FLOOR = stats.DEFAULT_FLOOR


@dataclasses.dataclass(frozen=True)
class Where(KernelSeries):
    """Where a pair of layouts ran: the fields every verdict and view of one names first."""

    size: str


@dataclasses.dataclass(frozen=True)
class Verdict(Where):
    cores: int              # cores used per node (R x T)
    hybrid_mode: str
    hybrid_layout: str      # "R x T" of the hybrid runs
    mpi_layout: str         # the pure-MPI layout it was judged against
    t_mpi: float            # median seconds
    t_hybrid: float
    n_mpi: int
    n_hybrid: int
    speedup: float          # T_mpi / T_hybrid (geometric mean per-round ratio when paired)
    noise: float            # relative half-width of the speedup's interval
    verdict: str            # WIN, LOSS, TIE or INCONCLUSIVE (for hybrid)
    mpi_library: str
    nodes: int = 1
    build: str = ''
    low: float = 0.0        # the speedup's interval
    high: float = 0.0
    basis: str = ''         # 'paired rounds' or 'back-to-back samples'
    method: str = ''        # how the interval was made
    confirmed: bool = False  # the same call in the last CONFIRM_SESSIONS sessions
    sessions: str = ''      # the calls of the last sessions, oldest first
    oversubscribed: bool = False  # functional only: judged from oversubscribed runs
    gap: float | None = None  # paired rounds: median seconds between a round's two runs
    rounds: int = 0         # rounds (paired) or samples (the smaller side) behind it
    stopped: str = ''       # why its rounds stopped: decided, cap or budget (stats.stop_reason)
    variable: str = TIME_VARIABLE  # the time compared: t_total, or the ring's t_msg_<bytes>

    @property
    def key(self) -> tuple:
        """What identifies the pair across sessions."""
        return (self.system, self.partition, self.stack, self.kernel, self.size, self.nodes,
                self.build, self.mpi_library, self.cores, self.hybrid_mode,
                self.hybrid_layout, self.mpi_layout)


Sides = dict[tuple[str, str], list[Record]]


def judged_as(rec: Record, variable: str = TIME_VARIABLE) -> list[tuple[str, str]]:
    """(size, variable) under which a record enters the verdicts: for the time
    variable, a run that logs per-message-size times (the ring's ``t_msg_<bytes>``)
    once per positive one, the size its label ('8B', '1MiB'); else by `variable`
    at its own size, where it has it."""
    if variable == TIME_VARIABLE:
        per_message = [(n, var, value) for var, value in rec.values.items()
                       if (n := message_time_size(var)) is not None]
        if per_message:
            return [(bytes_label(n), var) for n, var, value in sorted(per_message)
                    if value > 0]
    return [(rec.size, variable)] if variable in rec.values else []


def _pairable(records: Iterable[Record], variable: str,
              admit: Callable[[Record], bool],
              unmeasured: bool = False) -> list[tuple[tuple, Sides]]:
    """The records that `admit` lets in, by (group, cores per node, variable
    compared), each split into sides by (mode, layout), in report order; once per
    (size, variable) of ``judged_as``.  With `unmeasured`, a record that measured
    none (a failed run) enters every (size, variable) of its group and cores, or
    its own size where the group has none."""
    groups: dict[tuple, Sides] = defaultdict(lambda: defaultdict(list))
    keys_of: dict[tuple, list[tuple]] = defaultdict(list)
    blank: list[Record] = []
    for rec in records:
        if not admit(rec):
            continue
        judged = judged_as(rec, variable)
        if not judged and unmeasured:
            blank.append(rec)
        for size, var in judged:
            group = rec.group if size == rec.size else rec.group.with_size(size)
            key = (group, rec.total_cores, var)
            if key not in groups:
                keys_of[(rec.group, rec.total_cores)].append(key)
            groups[key][(rec.mode, rec.layout)].append(rec)
    for rec in blank:
        for key in (keys_of.get((rec.group, rec.total_cores))
                    or [(rec.group, rec.total_cores, variable)]):
            groups[key][(rec.mode, rec.layout)].append(rec)
    return sorted(groups.items(), key=lambda kv: (kv[0][0].sort_key(), kv[0][1], kv[0][2]))


_ROUND = re.compile(r'%sample=(\d+)')


def round_of(rec: Record) -> int | None:
    """The round (the kernel check's ``sample``) of a run, from its name."""
    m = _ROUND.search(rec.name.replace(' ', ''))
    return int(m.group(1)) if m else None


def _named_rounds(side: Sequence[Record]) -> list[int] | None:
    """The round of each run of a side, where each names its own; else None
    (older records, several sessions)."""
    rounds = [round_of(r) for r in side]
    if None in rounds or len(set(rounds)) < len(rounds):
        return None
    return rounds   # type: ignore[return-value]


def rounds_run(*sides: Sequence[Record]) -> int:
    """The rounds run for a pair: the round numbers its runs name, on either side
    (0 where none names one); a round one side failed or lacks was still run.
    The one count of the cap: the report's ``stopped`` (``verdicts``) and the
    sequential rounds' driver both count with it (``pair_rounds``)."""
    return len({n for side in sides for r in side if (n := round_of(r)) is not None})


_SAMPLE = re.compile(r'\s*%sample=\d+\s*$')


def name_less_sample(name: str) -> str:
    """A run's display name without its trailing ``%sample=N``: the same test
    variant in every round."""
    return _SAMPLE.sub('', name)


RunsByName = dict[tuple[str, str, str, str], list[Record]]


def _layout_key(r: Record) -> tuple[str, str, str, str]:
    """(system, partition, stack, display name less %sample): one layout's runs
    of every round."""
    return r.system, r.partition, r.stack, name_less_sample(r.name)


def _runs_by_name(records: Iterable[Record]) -> RunsByName:
    """Every named run by ``_layout_key``, those left out of a verdict too."""
    out: RunsByName = defaultdict(list)
    for r in records:
        if r.name:
            out[_layout_key(r)].append(r)
    return out


def pair_rounds(runs: RunsByName, *sides: Sequence[Record]) -> int:
    """``rounds_run`` over every run of a pair's two layouts
    (``sequential.pair_runs``): a round failed on either side was run all the same."""
    names = {_layout_key(r) for side in sides for r in side if r.name}
    return rounds_run(*sides, *(runs.get(key, []) for key in names))


def judge_pair(mpi: Sequence[Record], hybrid: Sequence[Record], floor: float,
               variable: str = TIME_VARIABLE) -> tuple[stats.Comparison, str]:
    """The comparison of T_mpi against T_hybrid and its call.  Where every run names
    its round once per side, round k against round k (never rounds of different
    numbers), of the rounds both sides have where 2 or more are common (a pure-MPI
    layout may have rounds one hybrid layout lacks); else the sides as they are."""
    rounds_m, rounds_h = _named_rounds(mpi), _named_rounds(hybrid)
    by_number = rounds_m is not None and rounds_h is not None
    # paired by time (the i-th run of each), but not where the sides' rounds differ
    # (fewer than 2 in common): the i-th runs would be of different rounds
    by_time = True
    if by_number:
        common = set(rounds_m) & set(rounds_h)
        if len(common) >= 2:
            mpi = [r for r, k in zip(mpi, rounds_m) if k in common]
            hybrid = [r for r, k in zip(hybrid, rounds_h) if k in common]
        else:
            by_time = set(rounds_m) == set(rounds_h)
        # round k against round k, whatever order they were logged in
        mpi, hybrid = (sorted(mpi, key=lambda r: round_of(r) or 0),
                       sorted(hybrid, key=lambda r: round_of(r) or 0))
    times = ([r.logged for r in mpi], [r.logged for r in hybrid]) if by_time else (None, None)
    cmp = stats.compare([r.values[variable] for r in mpi], [r.values[variable] for r in hybrid],
                        *times, floor=floor, in_order=by_number)
    return cmp, stats.speedup_call(cmp.interval, floor)


def layout_pairs(sides: Sides) -> Iterator[tuple[str, list[Record], str, str, list[Record]]]:
    """Every pure-MPI layout of a group against every hybrid (mode, layout) of it, in
    that order: (mpi layout, its runs, hybrid mode, hybrid layout, its runs)."""
    ordered = sorted(sides.items())
    for (mpi_mode, mpi_layout), mpi_recs in ordered:
        if mpi_mode == 'mpi':
            for (mode, layout), recs in ordered:
                if mode != 'mpi':
                    yield mpi_layout, mpi_recs, mode, layout, recs


def verdicts(records: Iterable[Record], noise_floor: float = DEFAULT_NOISE_FLOOR,
             variable: str = TIME_VARIABLE, history: Sequence[Record] | None = None,
             admit: Callable[[Record], bool] = operator.attrgetter('usable'),
             max_rounds: int | None = None) -> list[Verdict]:
    """One verdict per hybrid (mode, layout) and pure-MPI layout of a group, from
    the runs `admit` lets in (the usable ones); with `history` (every record
    read), each marked confirmed or not.  `max_rounds`: the cap of the sequential
    rounds, for why a verdict's rounds stopped (None: ``plan.max_rounds``),
    counted over every run of the pair's layouts (``pair_rounds``)."""
    records = list(records)
    cap = plan.max_rounds() if max_rounds is None else max_rounds
    runs = _runs_by_name(records)
    out: list[Verdict] = []
    for (g, cores, var), sides in _pairable(records, variable, admit):
        for mpi_layout, mpi_recs, mode, lay, recs in layout_pairs(sides):
            t_mpi = statistics.median(r.values[var] for r in mpi_recs)
            t_hyb = statistics.median(r.values[var] for r in recs)
            if t_hyb <= 0 or t_mpi <= 0:
                continue
            cmp, verdict = judge_pair(mpi_recs, recs, noise_floor, var)
            out.append(Verdict(
                system=g.system, partition=g.partition, stack=g.stack, kernel=g.kernel,
                size=g.size, cores=cores, hybrid_mode=mode, hybrid_layout=lay,
                mpi_layout=mpi_layout, t_mpi=t_mpi, t_hybrid=t_hyb,
                n_mpi=len(mpi_recs), n_hybrid=len(recs), speedup=cmp.ratio,
                noise=cmp.noise, verdict=verdict, mpi_library=g.library, nodes=g.nodes,
                build=g.build, low=cmp.interval.low, high=cmp.interval.high,
                basis=cmp.basis, method=cmp.interval.method,
                oversubscribed=any(r.oversubscribed for r in (*mpi_recs, *recs)),
                variable=var, gap=cmp.gap, rounds=cmp.interval.n,
                stopped=stats.stop_reason(
                    verdict, max(cmp.interval.n, pair_rounds(runs, mpi_recs, recs)), cap)))
    if history is not None:
        out = confirm(out, history, noise_floor, variable)
    return out


def session_calls(history: Sequence[Record], noise_floor: float = DEFAULT_NOISE_FLOOR,
                  variable: str = TIME_VARIABLE, last: int = stats.CONFIRM_SESSIONS,
                  ) -> dict[tuple, list[str]]:
    """Verdict key -> its call in each of the last `last` sessions of its system in the
    history (``changes.sessions``; several systems' sessions alternate), oldest first;
    a pair not measured in one of them has fewer calls."""
    from .changes import record_sessions  # polars: only where a history is given
    by_session: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for r, session in zip(history, record_sessions(history)):
        by_session[r.system, session].append(r)
    calls: dict[tuple, list[str]] = defaultdict(list)
    for _system, keys in itertools.groupby(sorted(by_session), key=operator.itemgetter(0)):
        for key in list(keys)[-last:]:
            for v in verdicts(by_session[key], noise_floor, variable):
                calls[v.key].append(v.verdict)
    return calls


def confirm(found: list[Verdict], history: Sequence[Record],
            noise_floor: float = DEFAULT_NOISE_FLOOR, variable: str = TIME_VARIABLE,
            sessions: int = stats.CONFIRM_SESSIONS) -> list[Verdict]:
    """The verdicts, each confirmed when it made the same call in each of the last
    `sessions` sessions of its system in the history."""
    calls = session_calls(history, noise_floor, variable, sessions)
    out = []
    for v in found:
        last = calls.get(v.key, [])
        ok = stats.confirmed(last, sessions) and last[-1] == v.verdict
        out.append(dataclasses.replace(v, confirmed=ok, sessions=' '.join(last)))
    return out


# ---- scaling: one pair across node counts ----------------------------------------

@dataclasses.dataclass(frozen=True)
class Crossover(Where):
    """The verdicts of one hybrid layout against one pure-MPI layout by node count."""

    hybrid: str             # "<mode> RxT" per node
    mpi_layout: str
    nodes: tuple[int, ...]
    speedups: tuple[float, ...]
    calls: tuple[str, ...]
    wins_from: int | None   # the node count from which hybrid wins at every larger one
    loses_from: int | None

    @property
    def named(self) -> tuple[str, str]:
        """Its stack and partition as the table and sentence name them: ('mpich', 'shm')."""
        return self.stack, self.partition

    @property
    def sentence(self) -> str:
        stack, partition = self.named
        what = (f'{self.kernel} size {self.size}, {self.hybrid} against mpi {self.mpi_layout} '
                f'({stack}@{partition})')
        span = (f'{self.nodes[0]}' if len(self.nodes) == 1
                else f'{self.nodes[0]}-{self.nodes[-1]}')

        def listed(pairs) -> str:
            return ', '.join(f'{c} at {n}' for n, c in pairs)

        for word, want, start in (('wins', WIN, self.wins_from),
                                  ('loses', LOSS, self.loses_from)):
            if start is None:
                continue
            i = self.nodes.index(start)
            pairs = list(zip(self.nodes, self.calls))
            unsure = [(n, c) for n, c in pairs[i:] if c != want]
            except_ = f' ({listed(unsure)})' if unsure else ''
            if i == 0 and not unsure:
                return (f'{what}: hybrid {word} at every node count measured ({span} nodes; '
                        f'speedup {min(self.speedups):.2f}-{max(self.speedups):.2f}).')
            if i == 0:
                return f'{what}: hybrid {word} from {start} nodes on{except_}.'
            return (f'{what}: hybrid {word} from {start} nodes on (speedup '
                    f'{self.speedups[i]:.2f} there){except_}; below: {listed(pairs[:i])}.')
        return f'{what}: no crossover in {span} nodes ({listed(zip(self.nodes, self.calls))}).'


@dataclasses.dataclass(frozen=True)
class NamedCrossover(Crossover):
    """A crossover among those of several systems, or of a place of several builds or
    MPI libraries: its stack and partition named as ``Apart`` names them."""

    build: str = ''
    mpi_library: str = ''
    stack_shown: str = ''       # 'mpich (cmake Debug)' where its place has several builds
    partition_shown: str = ''   # 'alpha:shm' where the crossovers span several systems

    @property
    def named(self) -> tuple[str, str]:
        return self.stack_shown, self.partition_shown


def _tail_start(nodes: Sequence[int], calls: Sequence[str], want: str) -> int | None:
    """The smallest node count with the call `want` from which no larger one has
    another decided call (INCONCLUSIVE ones neither break nor start the tail)."""
    start = None
    for n, c in zip(reversed(nodes), reversed(calls)):
        if c == want:
            start = n
        elif c != INCONCLUSIVE:
            break
    return start


def _pairs_by_nodes(found: Iterable[Verdict]) -> list[tuple[Crossover, Verdict]]:
    """Each pair's crossover (``crossovers``), with its first verdict."""
    series: dict[tuple, list[Verdict]] = defaultdict(list)
    for v in found:
        series[v.key[:5] + v.key[6:]].append(v)     # its key less the node count
    out: list[tuple[Crossover, Verdict]] = []
    for key in sorted(series, key=lambda k: k[:4] + (size_key(k[4]),) + k[5:]):
        vs = sorted(series[key], key=lambda v: v.nodes)
        nodes = tuple(v.nodes for v in vs)
        calls = tuple(v.verdict for v in vs)
        v0 = vs[0]
        out.append((Crossover(v0.system, v0.partition, v0.stack, v0.kernel, v0.size,
                              f'{v0.hybrid_mode} {v0.hybrid_layout}', v0.mpi_layout, nodes,
                              tuple(v.speedup for v in vs), calls,
                              _tail_start(nodes, calls, WIN), _tail_start(nodes, calls, LOSS)),
                    v0))
    return out


def crossovers(found: Iterable[Verdict], min_nodes: int = 1) -> list[Crossover]:
    """Per pair (everything but the node count; weak scaling per node) measured on at
    least `min_nodes` node counts, its verdicts in node order.  Where they span several
    systems, or a place holds several builds or MPI libraries (``Apart``), each names
    its own (``NamedCrossover``)."""
    pairs = [(c, v) for c, v in _pairs_by_nodes(found) if len(c.nodes) >= min_nodes]
    apart = Apart.of(v for _, v in pairs)
    return [NamedCrossover(**dataclasses.asdict(c), build=v.build, mpi_library=v.mpi_library,
                           stack_shown=apart.stack(v), partition_shown=apart.partition(v))
            if apart.systems or apart.shown(v) else c for c, v in pairs]


def across_nodes(found: Iterable[Verdict]) -> list[Crossover]:
    """The ``crossovers`` of the pairs measured on 2 or more node counts."""
    return crossovers(found, min_nodes=2)


CROSSOVER_COLUMNS = ('kernel', 'size', 'stack', 'partition', 'hybrid', 'mpi',
                     'speedup by nodes', 'hybrid wins from', 'hybrid loses from')


def crossover_rows(rows: list[Crossover]) -> list[list[object]]:
    return [[c.kernel, c.size, *c.named, c.hybrid, c.mpi_layout,
             ', '.join(f'{n}: {s:.2f} {v}' for n, s, v in zip(c.nodes, c.speedups, c.calls)),
             '-' if c.wins_from is None else c.wins_from,
             '-' if c.loses_from is None else c.loses_from] for c in rows]


# ---- pairs without a verdict ----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Unjudged(Where):
    """A pure-MPI/hybrid pair that was measured but got no verdict, and why:
    one side (or both) has no run that may enter a verdict (``Record.usable``)."""

    nodes: int
    cores: int
    hybrid_mode: str
    hybrid_layout: str
    mpi_layout: str
    why: str                # per side: its runs and why each was left out

    @property
    def sentence(self) -> str:
        return (f'{self.kernel} {self.size} on {self.system}:{self.partition} {self.stack}, '
                f'{self.nodes} node(s): {self.hybrid_mode} {self.hybrid_layout} against mpi '
                f'{self.mpi_layout}: no verdict ({self.why})')


UNJUDGED_COLUMNS = ('system:partition', 'stack', 'kernel', 'size', 'nodes', 'hybrid',
                    'against mpi', 'why no verdict')


def _side(name: str, recs: Sequence[Record]) -> str:
    reasons = Counter(r.left_out or 'usable' for r in recs)
    return f'{name}: ' + ', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))


def unjudged(records: Iterable[Record], variable: str = TIME_VARIABLE) -> list[Unjudged]:
    """The pairs ``verdicts`` would judge from the same records had every run been
    usable, that it does not judge: per node count, with the reason."""
    out = []
    for (g, cores, _var), sides in _pairable(records, variable, lambda rec: True,
                                             unmeasured=True):
        # by hybrid layout, then pure-MPI layout
        for mpi_lay, mpi_recs, mode, lay, recs in sorted(layout_pairs(sides),
                                                         key=lambda p: (p[2], p[3])):
            if any(r.usable for r in recs) and any(r.usable for r in mpi_recs):
                continue
            out.append(Unjudged(
                g.system, g.partition, g.stack, g.kernel, g.size, g.nodes, cores, mode,
                lay, mpi_lay, '; '.join((_side(f'{mode} {lay}', recs),
                                         _side(f'mpi {mpi_lay}', mpi_recs)))))
    return out


def unjudged_rows(rows: Sequence[Unjudged]) -> list[list[object]]:
    return [[f'{u.system}:{u.partition}', u.stack, u.kernel, u.size, u.nodes,
             f'{u.hybrid_mode} {u.hybrid_layout}', u.mpi_layout, u.why] for u in rows]


# ---- functional verdicts ---------------------------------------------------------------

def functional(records: Iterable[Record], noise_floor: float = DEFAULT_NOISE_FLOOR,
               variable: str = TIME_VARIABLE,
               judged: Iterable[Verdict] | None = None) -> list[Verdict]:
    """The verdicts of the pairs that have none (``unjudged``) only because runs
    were oversubscribed, judged by the same rule from their passed, verified runs
    and marked ``oversubscribed`` (see the module's doc); never confirmed.
    `judged`: the verdicts of the same records, where the caller has them."""
    records = list(records)
    if judged is None:
        judged = verdicts(records, noise_floor, variable)
    keys = {v.key for v in judged}
    return [v for v in verdicts(records, noise_floor, variable,
                                admit=lambda rec: set(rec.faults) <= {'oversubscribed'})
            if v.oversubscribed and v.key not in keys]


FUNCTIONAL_COLUMNS = ('system:partition', 'stack', 'kernel', 'size', 'nodes', 'cores',
                      'mpi', 'hybrid', 'speedup', 'interval', 'samples', 'functional call')


def functional_rows(found: Sequence[Verdict]) -> list[list[object]]:
    return [[f'{v.system}:{v.partition}', v.stack, v.kernel, v.size, v.nodes, v.cores,
             v.mpi_layout, f'{v.hybrid_mode} {v.hybrid_layout}', f'{v.speedup:.3f}',
             f'[{v.low:.3f}, {v.high:.3f}]', f'{v.n_mpi}/{v.n_hybrid}', v.verdict]
            for v in found]
