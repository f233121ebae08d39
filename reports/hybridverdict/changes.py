"""Change points over the history store, and the morning page "Since the last night".

docs/pages/nightly.md (#changes) describes both.  A **series** is one performance
variable of one test variant on one system, partition, stack and node count, one point
per session (the median of its samples there: one noisy night is one point, never
many).  ``detect`` finds change points on the log of the session medians (a level shift
is a ratio) E-Divisive's way, each with ``min_segment`` sessions on both sides: an
outlier night cannot make a segment of its own, and inside one it barely moves the
medians.  Fewer sessions at the end of a series may be an *unconfirmed* change
(``_tail``: a stricter test, as every series is tested every night).  The knobs are
read in one place, ``Knobs.from_env`` (``HARNESS_CHANGE_*``; the options of
``hybridverdict changes`` win over them).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import polars as pl
from harnesscore import stats as stats_rule
from harnesscore.references import lower_is_better, split_name

from .records import Record, provenance

TITLE = 'Since the last night'


class KnobError(ValueError):
    """A change-point knob that is not a valid value."""


#: smallest ``p_value``: the sampled permutation test runs at least 5 / p_value
#: permutations, up to 20 times as many near it (``_sampled_p``: at this one some
#: seconds at most for a 200-session series), so a smaller one would take minutes
MIN_P_VALUE = 1e-4
#: largest ``session_gap`` in minutes (about two years: one session)
MAX_SESSION_GAP = 1e6


@dataclasses.dataclass(frozen=True)
class Knobs:
    """What makes a change point (see the module's description)."""

    min_segment: int = 3            # sessions on each side of a change point
    p_value: float = 0.01           # most p-value of the t test across it
    magnitude: float = 0.05         # least |after / before - 1|
    session_gap: float = 60.0       # minutes between completions that start a new session

    #: field -> environment variable
    ENV = {'min_segment': 'HARNESS_CHANGE_MIN_SEGMENT', 'p_value': 'HARNESS_CHANGE_P_VALUE',
           'magnitude': 'HARNESS_CHANGE_MAGNITUDE', 'session_gap': 'HARNESS_CHANGE_SESSION_GAP'}

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            problem = self.problem(f.name, value)
            if problem:
                raise KnobError(f'{f.name} {problem}, got {value}')

    @staticmethod
    def problem(name: str, value: object) -> str:
        """What is wrong with `value` for the knob `name` ('' if nothing)."""
        if name == 'min_segment':
            return '' if value >= 1 else 'must be at least 1'  # type: ignore[operator]
        x = float(value)  # type: ignore[arg-type]
        if name == 'p_value' and not MIN_P_VALUE <= x <= 1:
            return f'must be in [{MIN_P_VALUE:g}, 1]'
        if name == 'magnitude' and not 0 <= x < 1:
            return 'must be in [0, 1) (a drop is at most 100%: 1 or more finds no drop)'
        if name == 'session_gap' and not 0 < x <= MAX_SESSION_GAP:
            return f'must be positive minutes, at most {MAX_SESSION_GAP:g}'
        return ''

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: object) -> Knobs:
        """The knobs from ``HARNESS_CHANGE_*`` (KnobError naming the variable on a bad
        value), with the non-None `given` ones (command-line options) over them."""
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            text = env.get(cls.ENV[f.name], '').strip()
            if text:
                values[f.name] = cls._from_text(f.name, text)
            if given.get(f.name) is not None:
                values[f.name] = given[f.name]
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def _from_text(cls, name: str, text: str) -> int | float:
        """The knob `name` from the text of its environment variable (KnobError naming
        the variable where it is not a valid value)."""
        variable = cls.ENV[name]
        try:
            value = int(text) if name == 'min_segment' else float(text)
        except ValueError:
            raise KnobError(f'{variable}={text!r}: not a number') from None
        problem = cls.problem(name, value)
        if problem:
            raise KnobError(f'{variable}={text!r}: {problem}')
        return value

    @property
    def gap(self) -> dt.timedelta:
        return dt.timedelta(minutes=self.session_gap)


@dataclasses.dataclass(frozen=True)
class SeriesKey:
    system: str
    check: str
    variant: str
    partition: str
    stack: str
    nodes: int
    variable: str


def _label(key: Mapping, variable: str = '', system: bool = False) -> str:
    """'<check>[ <variant>][ <variable>][ <n> nodes], <stack>@[<system>:]<partition>'
    of a series (or, without the variable, of a test variant); the system where
    `system` (a store that holds more than one)."""
    variant = '' if key['variant'] == '-' else f' {key["variant"]}'
    nodes = f' {key["nodes"]} nodes' if key['nodes'] > 1 else ''
    what = f' {variable}' if variable else ''
    where = f'{key["system"]}:{key["partition"]}' if system else key['partition']
    return f'{key["check"]}{variant}{what}{nodes}, {key["stack"]}@{where}'


KEY_COLUMNS = [f.name for f in dataclasses.fields(SeriesKey)]
#: a test variant's fields: a series's, its variable aside
VARIANT_COLUMNS = KEY_COLUMNS[:-1]


@dataclasses.dataclass
class ChangePoint:
    key: SeriesKey
    unit: str
    at: dt.datetime                  # start of the first session after the change
    before: float                    # median of the session medians before
    after: float                     # ... and after
    change: float                    # after / before - 1
    low: float                       # 95% interval of the change
    high: float
    direction: str                   # 'worse' or 'better'
    p_value: float
    sessions_before: int
    sessions_after: int
    confirmed: bool
    #: provenance field (or MPI variable) -> (before, after), what differs
    changed: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    last_before: str = ''            # the records' perflog lines (file:line)
    first_after: str = ''
    #: record ids of the last record before and the first after (for provenance)
    rids: tuple[int, int] = (-1, -1)
    #: start of the last session of the segment after it
    ends: dt.datetime | None = None
    #: sessions after it that confirm a change (``Knobs.min_segment``)
    needed: int = 0
    #: the series's label names its system (the store holds more than one)
    with_system: bool = False
    #: index of the series's first session after it (among the series's sessions)
    position: int = -1

    @property
    def series(self) -> str:
        return _label(vars(self.key), self.key.variable, self.with_system)

    @property
    def kind(self) -> str:
        return 'regression' if self.direction == 'worse' else 'improvement'

    def line(self) -> str:
        """E.g. ``RingCheck bw_1048576, openmpi@shm: -41% from 2026-11-24 02:31 (95%
        interval -45% to -37%); changed then: OMPI_MCA_btl unset -> self,tcp``."""
        text = (f'{self.series}: {_pct(self.change)} from {self.at:%Y-%m-%d %H:%M} '
                f'(95% interval {_pct(self.low)} to {_pct(self.high)}; {self.direction}')
        if not self.confirmed:
            text += (f', unconfirmed: {self.sessions_after} session(s) after it, '
                     f'a change needs {self.needed}')
        text += ')'
        if not self.changed:
            return text + '; nothing in the provenance changed then'
        changed = '; '.join(f'{k} {a or "unset"} -> {b or "unset"}'
                            for k, (a, b) in self.changed.items())
        return f'{text}; changed then: {changed}'

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for internal in ('rids', 'ends', 'needed', 'with_system', 'position'):
            d.pop(internal)
        return d | {'key': dataclasses.asdict(self.key), 'series': self.series,
                    'at': self.at.isoformat(), 'kind': self.kind,
                    'changed': {k: {'before': a, 'after': b} for k, (a, b) in self.changed.items()},
                    'line': self.line()}


def _pct(x: float) -> str:
    return f'{100 * x:+.0f}%' if abs(x) >= 0.095 else f'{100 * x:+.1f}%'


# ---- the history: tables, and the full records behind them ---------------------------

RecordLookup = Callable[[Sequence[int]], dict[int, Record]]


@dataclasses.dataclass
class History:
    """The history's tables (``store.RECORDS`` and ``store.VALUES``, lazily) and how to
    get the full records of some record ids (for their provenance)."""

    records: pl.LazyFrame
    values: pl.LazyFrame
    lookup: RecordLookup

    @classmethod
    def from_store(cls, store: object) -> History:
        """The history of a ``store.Store`` (it holds every provenance field; parts
        written before the fields existed give '')."""
        recs, values = store.scan()  # type: ignore[attr-defined]
        return cls(recs, values, cls.from_store_tables(recs, values))

    @staticmethod
    def from_store_tables(recs: pl.LazyFrame, values: pl.LazyFrame) -> RecordLookup:
        """The record lookup of the store's tables (``Store.scan()``)."""
        from .store import records_from

        def lookup(rids: Sequence[int]) -> dict[int, Record]:
            wanted = pl.Series('rid', list(rids), dtype=pl.Int64).implode()
            rows = recs.filter(pl.col('rid').is_in(wanted)).collect().sort('rid')
            vals = values.filter(pl.col('rid').is_in(wanted)).collect()
            return dict(zip(rows.get_column('rid').to_list(), records_from(rows, vals)))
        return lookup


def provenance_diff(before: Record, after: Record) -> dict[str, tuple[str, str]]:
    """What differs in the provenance of two records: field -> (before, after), and
    for ``mpi_env`` ('NAME=VALUE ...') each MPI variable that differs."""
    out: dict[str, tuple[str, str]] = {}
    for (field, old), new in zip(provenance(before).items(), provenance(after).values()):
        if old == new:
            continue
        if field != 'mpi_env':
            out[field] = (old, new)
            continue
        old_env, new_env = _env(old), _env(new)
        for name in sorted(old_env.keys() | new_env.keys()):
            was, now = old_env.get(name, ''), new_env.get(name, '')
            if was != now:
                out[name] = (was, now)
    return out


#: One ``mpi_env`` item as ``mpi_env_text`` writes it: NAME=, then a cut value's marker
#: or a shell word (unquoted safe characters and ``shlex.quote``'s quoted pieces).
_ENV_ITEM = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)='
                       r"""(<cut:[0-9]+ chars>|(?:[^\s'"\\]|'[^']*'|"'")*)"""
                       r'(?:\s+|$)')
#: Where an older ``mpi_env`` ('NAME=VALUE NAME=VALUE', values unquoted) is cut: only
#: before a NAME=, so a value with a space (``OMPI_MCA_plm_rsh_agent=ssh -x``) stays whole.
_ENV_SPLIT = re.compile(r'\s+(?=[A-Za-z_][A-Za-z0-9_]*=)')


def _quoted_env(text: str) -> dict[str, str] | None:
    """``mpi_env`` as ``mpi_env_text`` writes it, its values shell words; None
    where the text is not that (an older perflog's unquoted values, a text cut
    inside a quoted value)."""
    out: dict[str, str] = {}
    at = 0
    while at < len(text):
        m = _ENV_ITEM.match(text, at)
        if m is None or m.end() == at:
            return None
        name, value = m.groups()
        out[name] = value if value.startswith('<cut:') else ''.join(shlex.split(value))
        at = m.end()
    return out


def _env(text: str) -> dict[str, str]:
    """The variables of an ``mpi_env`` text, name -> value: parsed as shell words
    where the text is well formed (``mpi_env_text``: ``A='ssh -o B=no'`` is one
    variable), else split before each NAME= (older perflogs, values unquoted)."""
    text = text.strip()
    quoted = _quoted_env(text)
    if quoted is not None:
        return quoted
    return {name: value for name, _, value in
            (item.partition('=') for item in _ENV_SPLIT.split(text) if item)}


# ---- sessions and series -------------------------------------------------------------

def session_name(schema: Mapping[str, object]) -> pl.Expr:
    """A record's session name: its ``session`` field, '' where it has none (older
    perflogs, or a store written before the field)."""
    return (pl.col('session') if 'session' in schema else pl.lit('')).fill_null('')


def sessions(records: pl.LazyFrame, gap: dt.timedelta) -> pl.DataFrame:
    """(time, session name) -> session number (0, 1, ... in time order) and its
    start.  A record's session is its ``session`` field (``./harness`` names one per
    run or nightly); records without one (older perflogs) are told apart by a gap
    of more than `gap` between completion times.  The one rule of sessions: the
    change points, the reference bands (``baseline.collect``), the verdicts'
    confirmation (``verdict.session_calls``) and the history store's recent
    sessions (``report.recent_sessions``) all use it."""
    name = session_name(records.collect_schema())
    runs = records.select('time', name.alias('name')).unique().collect()
    by_gap = (runs.filter(pl.col('name') == '').select('time').unique().sort('time')
              .with_columns(gap=(pl.col('time').diff() > gap).fill_null(False)
                            .cast(pl.Int32).cum_sum()))
    keyed = runs.join(by_gap, on='time', how='left').with_columns(
        key=pl.when(pl.col('name') != '').then(pl.lit('n:') + pl.col('name'))
        .otherwise(pl.lit('g:') + pl.col('gap').cast(pl.String)))
    starts = (keyed.group_by('key').agg(start=pl.col('time').min()).sort('start', 'key')
              .with_columns(session=pl.int_range(pl.len(), dtype=pl.Int32)))
    return keyed.join(starts, on='key').select('time', 'name', 'session', 'start')


def session_numbers(records: pl.LazyFrame, gap: dt.timedelta) -> pl.Series:
    """The session number (``sessions``) of each record, in the records' order."""
    name = session_name(records.collect_schema())
    keyed = records.select('time', name.alias('name')).with_row_index('_row')
    return (keyed.join(sessions(records, gap).lazy(), on=['time', 'name'])
            .sort('_row').collect().get_column('session'))


def record_sessions(records: Sequence[Record],
                    gap: dt.timedelta = stats_rule.SESSION_GAP) -> list[int]:
    """``session_numbers`` of records already read (the verdicts' confirmation, the
    reference bands)."""
    runs = pl.LazyFrame({'time': [r.time for r in records],
                         'session': [r.session for r in records]},
                        schema={'time': pl.Datetime('us', 'UTC'), 'session': pl.String})
    return session_numbers(runs, gap).to_list()


def _checks(names: pl.Series, kernels: pl.Series) -> pl.DataFrame:
    """name -> (check, variant) by ``split_name`` (a record without a name: its kernel)."""
    split = []
    for name, kernel in zip(names.to_list(), kernels.to_list()):
        try:
            split.append(split_name(name or ''))
        except ValueError:
            split.append((kernel or '?', '-'))
    return pl.DataFrame({'name': names, 'kernel': kernels, 'check': [c for c, _ in split],
                         'variant': [v for _, v in split]})


def _runs(history: History, knobs: Knobs) -> tuple[pl.DataFrame, list[dt.datetime]]:
    """The records (rid, time, session, the key's fields, result[, judgement]) and the
    sessions' starts (by session number)."""
    schema = history.records.collect_schema()
    extra = [c for c in ('judgement',) if c in schema]
    recs = history.records.select('rid', 'time', 'system', 'partition', 'stack', 'nodes',
                                  'name', 'kernel', 'mode', 'ranks', 'threads', 'size',
                                  'verified', 'result', *extra,
                                  session_name(schema).alias('session_name')).collect()
    sess = sessions(recs.lazy().select('time', pl.col('session_name').alias('session')),
                    knobs.gap)
    names = recs.select('name', 'kernel').unique()
    recs = (recs.join(sess.select('time', pl.col('name').alias('session_name'), 'session'),
                      on=['time', 'session_name'])
            .join(_checks(names.get_column('name'), names.get_column('kernel')),
                  on=['name', 'kernel']))
    # A record without a test name (another check's, an older perflog): its run
    # fields tell its runs apart, as the history's series do (pure MPI 2x1 and
    # hybrid 1x2 runs were one series, and a change in their mix a change point).
    nameless = pl.col('name').is_null() | (pl.col('name') == '')
    run_fields = pl.format('mode={} layout={}x{} size={}', 'mode', 'ranks', 'threads', 'size')
    recs = recs.with_columns(variant=pl.when(nameless).then(run_fields)
                             .otherwise(pl.col('variant')))
    starts = sess.group_by('session').agg(start=pl.col('start').first()).sort('session')
    return recs, starts.get_column('start').to_list()


@dataclasses.dataclass
class SeriesPoints:
    key: SeriesKey
    unit: str
    sessions: list[int]
    medians: list[float]
    first_rids: list[int]           # the session's first record of the series
    last_rids: list[int]
    #: the SD of the log values within each session, over the root of their
    #: number (0 where one value): how far a session's median moves by noise alone
    noise: list[float] = dataclasses.field(default_factory=list)


def series_points(history: History, runs: pl.DataFrame,
                  since: dt.datetime | None = None, until: dt.datetime | None = None,
                  session_starts: Sequence[dt.datetime] = (),
                  ) -> list[SeriesPoints]:
    """Every series's session medians (sessions that start in [since, until)): a
    session starts at its first record (`session_starts`, by session number, as
    ``_runs`` gives them), verified or not, of any test variant: not at the first
    verified record of `runs`, which may come after another session's start."""
    recs = runs.filter(pl.col('verified'))
    if since is not None or until is not None:
        wanted = [n for n, start in enumerate(session_starts)
                  if (since is None or start >= since) and (until is None or start < until)]
        recs = recs.filter(pl.col('session').is_in(wanted))
    per = (history.values.select('rid', 'variable', 'value', 'unit')
           .join(recs.lazy().select('rid', 'time', 'session', *VARIANT_COLUMNS), on='rid')
           .filter(pl.col('value').is_finite() & (pl.col('value') > 0))
           .sort('time', 'rid')
           .group_by([*KEY_COLUMNS, 'session'])
           .agg(median=pl.col('value').median(), unit=pl.col('unit').last(),
                first=pl.col('rid').first(), last=pl.col('rid').last(),
                noise=(pl.col('value').log().std() / pl.len().sqrt()).fill_null(0.0))
           .sort('session')
           .group_by(KEY_COLUMNS)
           .agg('session', 'median', 'first', 'last', 'noise', unit=pl.col('unit').last())
           .sort(KEY_COLUMNS)
           .collect())
    return [SeriesPoints(SeriesKey(*(row[k] for k in KEY_COLUMNS)), row['unit'] or '',
                         row['session'], row['median'], row['first'], row['last'],
                         row['noise'])
            for row in per.iter_rows(named=True)]


# ---- detection -----------------------------------------------------------------------

def _shift_stat(left: np.ndarray, k: np.ndarray, total: np.ndarray | float, m: int) -> np.ndarray:
    """The mean-shift statistic k (m - k) / m (mean before - mean after)^2 of splitting
    m points (sum `total`) after the first k (sum `left`)."""
    return k * (m - k) / m * (left / k - (total - left) / (m - k)) ** 2


def _split_stat(x: np.ndarray, min_segment: int) -> np.ndarray:
    """The largest ``_shift_stat`` over the splits of each row of `x` (rows: orderings
    of one pool of m points) that leave at least `min_segment` points on each side."""
    m = x.shape[-1]
    k = np.arange(min_segment, m - min_segment + 1)
    sums = np.cumsum(x, axis=-1)
    return _shift_stat(sums[..., k - 1], k, sums[..., -1:], m).max(axis=-1)


#: series of at most this many sessions get the exact permutation p-value (``_exact_p``:
#: 2^m prefix sets instead of m! orders, under a millisecond at 12)
EXACT_MAX = 12
#: the sampled test's batches stop once the p-value's binomial interval at this
#: confidence lies on one side of ``p_value``, or at ``MAX_DRAW_FACTOR`` x 5 / p_value
#: draws (at most ``MAX_DRAWS``), whichever comes first
DRAW_CONFIDENCE = 0.99
MAX_DRAW_FACTOR = 20
MAX_DRAWS = 200_000


def _exact_p(pool: np.ndarray, min_segment: int, observed: float) -> float:
    """The exact share of the m! orders of `pool` whose strongest split is at least
    `observed`.  The statistic at split k depends only on the set of the first k
    points, so the orders that stay below it everywhere are counted over the 2^m
    prefix sets: q(A), the share of the orders of A (as a prefix) that never pass
    it, is the mean of q(A - {a}) over a in A, or 0 where A itself passes it."""
    m = len(pool)
    sums, sizes = np.zeros(1), np.zeros(1, dtype=np.int64)
    for x in pool:                                     # bit j: point j in the set
        sums, sizes = np.concatenate([sums, sums + x]), np.concatenate([sizes, sizes + 1])
    total = float(pool.sum())
    with np.errstate(divide='ignore', invalid='ignore'):
        stat = _shift_stat(sums, sizes, total, m)
    passes = (sizes >= min_segment) & (sizes <= m - min_segment) & (stat >= observed)
    q = np.zeros(1 << m)
    q[0] = 1.0
    bits = np.left_shift(1, np.arange(m))
    order = np.argsort(sizes, kind='stable')
    bounds = np.searchsorted(sizes[order], np.arange(m + 2))
    for k in range(1, m + 1):
        level = order[bounds[k]:bounds[k + 1]]
        has = (level[:, None] & bits) != 0
        q[level] = np.where(has, q[level[:, None] ^ bits], 0.0).sum(axis=1) / k
        q[level[passes[level]]] = 0.0
    return float(1.0 - q[-1])


def _sampled_p(pool: np.ndarray, knobs: Knobs, observed: float, seed: int) -> float:
    """The permutation p-value from random orders (seeded), in batches: at least
    max(199, 5 / p_value) of them unless the p-value is sure to exceed ``p_value``
    sooner, and more while its binomial interval holds ``p_value`` (bounded)."""
    from scipy.stats import beta
    m = len(pool)
    least = max(199, math.ceil(5 / knobs.p_value))
    most = max(least, min(MAX_DRAW_FACTOR * least, MAX_DRAWS))
    tail = (1 - DRAW_CONFIDENCE) / 2
    rng = np.random.default_rng(seed)
    at_least = done = 0
    while done < most:
        batch = min(40 if not done else max(100, done // 2), most - done)
        shuffled = rng.permuted(np.broadcast_to(pool, (batch, m)), axis=1)
        at_least += int((_split_stat(shuffled, knobs.min_segment) >= observed).sum())
        done += batch
        low = float(beta.ppf(tail, at_least, done - at_least + 1)) if at_least else 0.0
        high = (float(beta.ppf(1 - tail, at_least + 1, done - at_least))
                if at_least < done else 1.0)
        if low > knobs.p_value or (done >= least and high <= knobs.p_value):
            break
    return min(1.0, (at_least + 1) / (done + 1))


def permutation_p(pool: np.ndarray, knobs: Knobs, seed: int = 0) -> float:
    """The p-value of a change in `pool` (a segment's log session medians): how often a
    random order of its points has a split as strong as the strongest split of the given
    order (E-Divisive's permutation test, with the mean-shift statistic: the choice of
    the split is part of the test).  Exact for at most ``EXACT_MAX`` points (every
    order counted), else sampled and seeded (``_sampled_p``): the same history gives
    the same answer."""
    m = len(pool)
    if m < 2 * knobs.min_segment or np.ptp(pool) == 0:
        return 1.0
    observed = float(_split_stat(pool, knobs.min_segment)) * (1 - 1e-9)
    if m <= EXACT_MAX:
        return _exact_p(np.asarray(pool, dtype=float), knobs.min_segment, observed)
    return _sampled_p(pool, knobs, observed, seed)


def _ratio(a: np.ndarray, b: np.ndarray) -> float:
    """median(after) / median(before) from log values."""
    return math.exp(float(np.median(b)) - float(np.median(a)))


def _best_split(x: np.ndarray, min_segment: int) -> int:
    """Where the one best mean shift of `x` splits it (ruptures' KernelCPD, linear
    kernel: the exact least-squares split, in C)."""
    import ruptures
    algo = ruptures.KernelCPD(kernel='linear', min_size=min_segment, jump=1)
    return int(algo.fit(x.reshape(-1, 1)).predict(n_bkps=1)[0])


def detect(medians: Sequence[float], knobs: Knobs) -> list[tuple[int, float]]:
    """Change points of one series of session medians: (index of the first session
    after it, p-value).  E-Divisive's hierarchy: the best split of the whole series is
    kept where the permutation test finds it significant, then each side is split the
    same way; then every split is tested again against its neighbouring segments (the
    ratio of their medians at least ``magnitude`` from 1, the permutation test of the
    two pooled at most ``p_value``), the weakest failing one dropped and its segments
    merged, until every one passes."""
    logs = np.log(np.asarray(medians, dtype=float))
    ms = knobs.min_segment
    cuts: list[int] = []
    todo = [(0, len(logs))]
    while todo:
        lo, hi = todo.pop()
        if hi - lo < 2 * ms or permutation_p(logs[lo:hi], knobs) > knobs.p_value:
            continue
        cut = lo + _best_split(logs[lo:hi], ms)
        cuts.append(cut)
        todo += [(lo, cut), (cut, hi)]
    cuts.sort()
    while cuts:
        bounds = [0, *cuts, len(logs)]
        tested = []
        # index in `cuts` of each one that fails -> how weak it is: a step below the
        # magnitude (the smaller the weaker) is weaker than any p-value too large
        weakness: dict[int, float] = {}
        for i, cut in enumerate(cuts):
            lo, hi = bounds[i], bounds[i + 2]
            size = abs(_ratio(logs[lo:cut], logs[cut:hi]) - 1)
            if size < knobs.magnitude:
                p = 1.0
                weakness[i] = 2 - size
            else:
                p = permutation_p(logs[lo:hi], knobs)
                if p > knobs.p_value:
                    weakness[i] = p
            tested.append(p)
        if not weakness:
            return _placed(logs, list(zip(cuts, tested)), ms)
        # the weakest (the first of equals)
        del cuts[max(weakness, key=weakness.__getitem__)]
    return []


def _placed(logs: np.ndarray, cuts: list[tuple[int, float]], min_segment: int,
            ) -> list[tuple[int, float]]:
    """The cuts moved onto the first session at the new level: a segment of at least
    `min_segment` sessions can put the boundary up to ``min_segment - 1`` sessions off
    a step near an end.  A cut that then leaves a shorter segment is dropped (at the end
    of the series, ``_tail`` reports it unconfirmed)."""
    out: list[tuple[int, float]] = []
    bounds = [0, *(c for c, _ in cuts), len(logs)]
    for i, (cut, p) in enumerate(cuts, 1):
        lo, hi = bounds[i - 1], bounds[i + 1]
        before, after = float(np.median(logs[lo:cut])), float(np.median(logs[cut:hi]))
        mid, up = (before + after) / 2, after > before
        for _ in range(min_segment - 1):
            if cut + 1 < hi and (logs[cut] > mid) != up:
                cut += 1
            elif cut - 1 > lo and (logs[cut - 1] > mid) == up:
                cut -= 1
        if cut - lo >= min_segment and hi - cut >= min_segment:
            out.append((cut, p))
    return out


def _tail(logs: np.ndarray, start: int, knobs: Knobs,
          noise: Sequence[float] = ()) -> tuple[int, float] | None:
    """An unconfirmed change in the last k < ``min_segment`` sessions (the largest such
    k): each of them beyond the magnitude on the same side of the median of the segment
    [start, n - k), and past the midpoint between it and their median (as ``_placed``
    puts a boundary: a session a little high from noise before a step on the last one
    is no part of it), their mean outside its t prediction interval (p-value at most
    ``p_value / UNCONFIRMED_STRICTER``)."""
    from scipy.stats import t as student_t
    n = len(logs)
    # the tails that leave at least max(min_segment, 2) sessions before them (not every
    # k below min_segment: a --min-segment of 10^8 looped for minutes per series)
    most = min(knobs.min_segment - 1, n - start - max(knobs.min_segment, 2))
    for k in range(most, 0, -1):
        ref, tail = logs[start:n - k], logs[n - k:]
        level = float(np.median(ref))
        sizes = np.exp(tail - level) - 1
        if not (np.all(sizes >= knobs.magnitude) or np.all(sizes <= -knobs.magnitude)):
            continue
        new = float(np.median(tail))
        if np.any((tail > (level + new) / 2) != (new > level)):
            continue
        sd = float(np.std(ref, ddof=1))
        # A few sessions that happen to agree closely are no evidence of a small
        # spread: never below the spread of a session's median from its own
        # samples (the noise of the sessions compared).
        if len(noise) == n:
            sd = max(sd, float(np.sqrt(np.mean(np.square(noise[start:])))))
        if sd == 0:
            return n - k, 0.0
        z = abs(float(np.mean(tail)) - float(np.mean(ref))) / (
            sd * math.sqrt(1 / k + 1 / len(ref)))
        p = float(2 * student_t.sf(z, len(ref) - 1))
        if p <= knobs.p_value / UNCONFIRMED_STRICTER:
            return n - k, p
    return None


#: sessions on each side of a change point that its interval is computed from
NEAREST = 20
#: an unconfirmed change needs a p-value this many times smaller than ``p_value``: it is
#: tested in every series every night, and the page should not cry wolf
UNCONFIRMED_STRICTER = 100


def _change_point(pts: SeriesPoints, cut: int, lo: int, hi: int, p: float,
                  starts: Sequence[dt.datetime], confirmed: bool, knobs: Knobs) -> ChangePoint:
    before, after = pts.medians[lo:cut], pts.medians[cut:hi]
    # the interval from the sessions nearest the change (its bootstrap, where a side has
    # few sessions, resamples every value given)
    cmp = stats_rule.compare(after[:NEAREST], before[-NEAREST:], floor=0.0,
                             confidence=stats_rule.CONFIDENCE)
    iv = cmp.interval
    worse = (cmp.ratio > 1) == lower_is_better(pts.unit)
    return ChangePoint(
        key=pts.key, unit=pts.unit, at=starts[pts.sessions[cut]],
        before=float(np.median(before)), after=float(np.median(after)),
        change=cmp.ratio - 1, low=iv.low - 1, high=iv.high - 1,
        direction='worse' if worse else 'better', p_value=p,
        sessions_before=len(before), sessions_after=len(after), confirmed=confirmed,
        rids=(pts.last_rids[cut - 1], pts.first_rids[cut]),
        ends=starts[pts.sessions[hi - 1]], needed=knobs.min_segment, position=cut)


def find(history: History, knobs: Knobs | None = None, since: dt.datetime | None = None,
         until: dt.datetime | None = None,
         runs: tuple[pl.DataFrame, list[dt.datetime]] | None = None,
         with_system: bool | None = None) -> list[ChangePoint]:
    """Every change point of every series over the sessions that start in [since,
    until), the unconfirmed ones at the end of a series included, in time order.
    Their labels name the system where the records (`runs`) hold more than one
    (`with_system`: None)."""
    knobs = knobs or Knobs()
    recs, starts = runs if runs is not None else _runs(history, knobs)
    if with_system is None:
        with_system = recs.get_column('system').n_unique() > 1
    found: list[ChangePoint] = []
    for pts in series_points(history, recs, since, until, starts):
        cuts = detect(pts.medians, knobs)
        bounds = [0, *(c for c, _ in cuts), len(pts.medians)]
        for i, (cut, p) in enumerate(cuts, 1):
            found.append(_change_point(pts, cut, bounds[i - 1], bounds[i + 1], p, starts,
                                       confirmed=True, knobs=knobs))
        logs = np.log(np.asarray(pts.medians, dtype=float))
        tail = _tail(logs, bounds[-2], knobs, pts.noise)
        if tail is not None:
            cut, p = tail
            found.append(_change_point(pts, cut, bounds[-2], len(pts.medians), p, starts,
                                       confirmed=False, knobs=knobs))
    for c in found:
        c.with_system = with_system
    found.sort(key=lambda c: (c.at, c.series))
    if found:
        full = history.lookup(sorted({r for c in found for r in c.rids}))
        for c in found:
            before, after = full.get(c.rids[0]), full.get(c.rids[1])
            if before is not None and after is not None:
                c.changed = provenance_diff(before, after)
                c.last_before, c.first_after = before.source, after.source
    return found


# ---- the morning page ----------------------------------------------------------------

#: How the morning page marks a test variant its system's session before did not run.
NEW = ' (not run the session before)'


@dataclasses.dataclass
class Morning:
    """What moved in the last session against the one before."""

    last_night: dt.datetime | None
    series: int                       # series with a point in the last session
    checks: int                       # test variants run in the last session
    changes: list[ChangePoint]
    failing: list[str]                # test variants that newly fail (new ones too)
    passing: list[str]                # ... that newly pass
    missing: list[str]                # run in the session before, not in the last
    new: list[str]                    # run in the last, not in the one before

    @property
    def quiet(self) -> bool:
        return not (self.changes or self.failing or self.passing or self.missing or self.new)

    def lines(self) -> list[str]:
        if self.last_night is None:
            return [f'{TITLE}: no session in the history.']
        if self.quiet:
            return [f'{TITLE}: nothing moved ({self.series} series, {self.checks} checks)']
        out = []
        for kind in ('regression', 'improvement'):
            out += [f'{kind}: {c.line()}' for c in self.changes if c.kind == kind]
        new = set(self.new)
        out += [f'newly failing: {c}{NEW if c in new else ""}' for c in self.failing]
        out += [f'newly passing: {c}' for c in self.passing]
        out += [f'missing: {c} (ran the session before, not the last)' for c in self.missing]
        out += [f'new: {c}{NEW}' for c in self.new if c not in self.failing]
        return out

    def as_dict(self) -> dict:
        return {'last_night': self.last_night.isoformat() if self.last_night else None,
                'series': self.series, 'checks': self.checks,
                'changes': [c.as_dict() for c in self.changes], 'newly_failing': self.failing,
                'newly_passing': self.passing, 'missing': self.missing, 'new': self.new,
                'lines': self.lines()}


def _states(recs: pl.DataFrame, with_system: bool = False) -> dict[str, str]:
    """test variant label -> 'fail' where any of its records failed (ReFrame's result,
    or the band rule's judgement where the records carry it), else 'pass'."""
    failed = pl.col('result') != 'pass'
    if 'judgement' in recs.columns:
        failed = failed | (pl.col('judgement') == 'fail')
    per = (recs.with_columns(failed=failed)
           .group_by(VARIANT_COLUMNS)
           .agg(pl.col('failed').any()))
    return {_label(row, system=with_system): 'fail' if row['failed'] else 'pass'
            for row in per.iter_rows(named=True)}


def _same_change(now: ChangePoint, then: ChangePoint) -> bool:
    """Whether `then` (found one session earlier) is `now`'s change: the same series
    and direction, the same records around the boundary or, where a new session
    moved the boundary (by any number of sessions), overlapping segments before it
    and overlapping segments after it."""
    if (now.key, now.direction) != (then.key, then.direction):
        return False
    if now.rids == then.rids:
        return True

    def segments(c: ChangePoint) -> tuple[tuple[int, int], tuple[int, int]]:
        return ((c.position - c.sessions_before, c.position),
                (c.position, c.position + c.sessions_after))

    return all(a0 < b1 and b0 < a1
               for (a0, a1), (b0, b1) in zip(segments(now), segments(then)))


def _newly_confirmed(now: Sequence[ChangePoint], then: Sequence[ChangePoint],
                     ) -> list[ChangePoint]:
    """The confirmed change points of `now` that `then` (the same series one session
    shorter) did not confirm: each confirmed one of `then` is the change of at most
    one of `now` (``_same_change``, the nearest boundary first), and those of `now`
    that none is are new."""
    known = [c for c in then if c.confirmed]
    found = [c for c in now if c.confirmed]
    # (distance of the boundaries, index in found, index in known) of each possible match
    pairs = []
    for i, c in enumerate(found):
        for j, k in enumerate(known):
            if _same_change(c, k):
                pairs.append((abs(c.position - k.position), i, j))
    matched_found: set[int] = set()
    matched_known: set[int] = set()
    for _, i, j in sorted(pairs):
        if i not in matched_found and j not in matched_known:
            matched_found.add(i)
            matched_known.add(j)
    return [c for i, c in enumerate(found) if i not in matched_found]


def _last_session(recs: pl.DataFrame, starts: Sequence[dt.datetime],
                  last_night: dt.datetime | None) -> int:
    """The number of the session that starts at `last_night`; None: of the session
    that ended last (another system's nightly that started after it and ended before
    it is not this night's: its own page came with it)."""
    if last_night is not None:
        return max(0, stats_rule.session_of(last_night, starts))
    ends = recs.group_by('session').agg(end=pl.col('time').max())
    return int(ends.sort('end', 'session').get_column('session')[-1])


def _series_count(values: pl.LazyFrame, night: pl.DataFrame) -> int:
    """How many series have a point among the records `night`, as ``series_points``
    makes them (verified records; a value of 0 or below is in none)."""
    if not night.height:
        return 0
    points = (values.filter(pl.col('value').is_finite() & (pl.col('value') > 0))
              .select('rid', 'variable')
              .join(night.lazy().filter(pl.col('verified')).select('rid', *VARIANT_COLUMNS),
                    on='rid'))
    return points.select(*KEY_COLUMNS).unique().select(pl.len()).collect().item()


def since_last_night(history: History, last_night: dt.datetime | None = None,
                     knobs: Knobs | None = None) -> Morning:
    """The morning page of the session that starts at `last_night` (default: the
    session of the history that ended last): for each system that ran in it, against
    that system's session before (a store can hold the sessions of several systems,
    each its own nightly)."""
    knobs = knobs or Knobs()
    recs, starts = _runs(history, knobs)
    if not starts:
        return Morning(None, 0, 0, [], [], [], [], [])
    last = _last_session(recs, starts, last_night)
    with_system = recs.get_column('system').n_unique() > 1
    night = recs.filter(pl.col('session') == last)
    systems = night.get_column('system').unique()
    # each system's session before the last one (a system without one is absent)
    previous = (recs.filter(pl.col('system').is_in(systems.implode())
                            & (pl.col('session') < last))
                .group_by('system').agg(previous=pl.col('session').max()))
    before = recs.join(previous, on='system').filter(pl.col('session') == pl.col('previous'))
    now, then = _states(night, with_system), _states(before, with_system)
    # variants new against their system's session before (a system's first session
    # has none)
    known = _states(night.join(previous, on='system', how='semi'), with_system)
    # the series of the last night's test variants, over the sessions up to the last
    # one, and up to the one before (its systems' sessions before the last)
    variants = night.select(VARIANT_COLUMNS).unique()
    runs = (recs.join(variants, on=VARIANT_COLUMNS, how='semi'), starts)
    after = starts[last + 1] if last + 1 < len(starts) else None
    found = find(history, knobs, until=after, runs=runs, with_system=with_system)
    earlier = find(history, knobs, until=starts[last], runs=runs, with_system=with_system)
    # unconfirmed from the last session on, or confirmed first with it
    moved = sorted([c for c in found if not c.confirmed and c.at == starts[last]]
                   + _newly_confirmed(found, earlier), key=lambda c: (c.at, c.series))
    new = set(known) - set(then)
    return Morning(
        last_night=starts[last], series=_series_count(history.values, night),
        checks=len(now), changes=moved,
        # a new variant that fails is newly failing too: a line that says only "new"
        # would hide it (a system's first session has no new variants, so none)
        failing=sorted(c for c, s in now.items() if s == 'fail'
                       and (then.get(c) == 'pass' or c in new)),
        passing=sorted(c for c, s in now.items() if s == 'pass' and then.get(c) == 'fail'),
        missing=sorted(set(then) - set(now)), new=sorted(new))


COLUMNS = ('what moved',)
NOTE = ('The last session against the history (hybridverdict.changes): change points '
        'whose first session is the last one (unconfirmed until the minimum segment of '
        'sessions lies after them) or that the last session confirmed first, with the '
        'size after/before and its 95% interval and what differed in the provenance; '
        'checks that newly fail (new ones among them) or pass, and test variants missing '
        'or new, against the session before of the same system (the systems that ran in '
        'the last session).')


def section_rows(morning: Morning) -> list[list[object]]:
    return [[line] for line in morning.lines()]
