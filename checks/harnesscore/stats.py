"""One rule for every performance decision made from repeated measurements.

No ReFrame import: the checks import it at run time as the report does.  Its
one third-party import is SciPy, for Student's t quantiles (imported where a
paired interval is first made).

The rule
--------
1. From the samples, an interval:

   * **Paired rounds** (the two sides measured side by side, round by round:
     ``paired_interval``).  The per-round ratios r_i = a_i / b_i are judged on
     the log scale with Student's t interval: mean(log r) +- t(n-1) s / sqrt(n),
     exponentiated; the estimate is the geometric mean of the ratios.  Why t
     on the logs and not the median's order statistics: the per-round log
     ratio is the difference of two runs taken side by side, so a drift of the
     machine that both share cancels, and the difference of two runs' noise is
     *symmetric* whatever the shape of that noise (one-sided disturbed runs
     included).  For a symmetric distribution the mean is the centre and the
     t interval keeps its coverage with heavy tails (it is conservative
     there); its half-width shrinks as 1/sqrt(n), whereas the median's
     order-statistic interval is [X(2), X(8)] at n = 9 and does not exist
     below n = 6.  Wilcoxon's signed-rank interval (Hodges-Lehmann) would be
     as valid and more efficient with very heavy tails, but it cannot reach
     95% below 6 rounds, and the planned session has 3.
     ``tests/test_stats_coverage.py`` checks the coverage by simulation (3, 5,
     9 and 15 rounds, drift, heavy-tailed noise).  A ratio that is not
     positive (a rate of 0) falls back to the median's interval below.
   * **A list of values** (``median_interval``): the distribution-free
     order-statistic interval [X(k), X(n+1-k)] for n >= 6 at 95%, a seeded
     percentile bootstrap of the median for 2..5 values, the point itself for
     one value.
   * **Two unpaired lists** (``ratio_interval``): the ratio of the medians,
     from each side's order statistics or a seeded bootstrap.

2. A decision against a band [low, high] (either end may be open): ``PASS``
   inside, ``FAIL`` entirely outside (above or below), ``INCONCLUSIVE``
   across an edge; the spread (the interval's relative half-width) with it.

3. Confidence.  Decisions use ``DECISION_CONFIDENCE`` (97.5%), not 95%: the
   sequential rounds (``looks``) judge a pair several times, and each look is
   a chance of a wrong call (one look errs with at most 1.25%: the interval
   must miss the truth on one side).  The simulation of
   ``reports/tools/calibrate.py`` keeps the wrong calls at or below 5% over
   all looks up to 15 rounds; at 95% per look they reach 7-8% at the band's
   edges.

4. Drift.  Samples of the two sides taken back to back cannot see the drift
   of the machine between them (issue 15: verdicts flipped between identical
   sessions).  ``compare`` pairs the rounds when the completion times show
   them (``interleaved``), else takes the two lists unpaired, widened on each
   side by the floor (``DEFAULT_FLOOR``, 5%: the drift a shared machine shows
   between sessions); ``Comparison.basis`` says which.

5. History.  A call is ``confirmed`` when the last ``CONFIRM_SESSIONS`` (3)
   sessions all made it (an INCONCLUSIVE one confirms nothing).  A record's
   session is the one ``./harness`` named (perflog field ``session``); records
   without a name are told apart by a gap of more than ``SESSION_GAP`` (1 hour)
   between completion times (``hybridverdict.changes.sessions``).

For a hybrid-against-MPI verdict the band is [1 / (1 + floor), 1 + floor]
around a speedup of 1: inside it the two are equal (TIE), above it hybrid wins,
below it hybrid loses, across an edge the samples cannot tell.  One value per
side (one sample of each layout, or one round) measures no spread: no call,
INCONCLUSIVE (``speedup_call``); the floor's widening covers the drift between
sessions, not a run's own noise (5-10% per round, issue 25).  For a
fixed-band assertion (ring against OSU within 5%, md against LAMMPS above 0.9)
the band is the assertion's.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import functools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

#: confidence of a plain interval (a median's, a reference band's)
CONFIDENCE = 0.95
#: confidence of every decision from paired rounds, per look (see the docstring)
DECISION_CONFIDENCE = 0.975
#: most rounds of a pair under the sequential rule (``HARNESS_MAX_ROUNDS``)
DEFAULT_MAX_ROUNDS = 15
#: rounds added to the still-undecided pairs at each further look
SEQUENTIAL_STEP = 2
#: relative drift between sessions assumed where it is not measured (5%)
DEFAULT_FLOOR = 0.05
#: bootstrap resamples and the fixed seed (the same samples give the same interval)
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261123
#: sessions in a row that must agree for a call to be confirmed
CONFIRM_SESSIONS = 3
#: a gap longer than this between completion times starts a new session
SESSION_GAP = dt.timedelta(hours=1)

PASS = 'PASS'
FAIL = 'FAIL'
INCONCLUSIVE = 'INCONCLUSIVE'

#: When a sample was taken: anything ordered in time (a datetime, seconds, or a
#: perflog record's (time, file, line), finer than the file's whole seconds).
Moment = Any


class StatsError(ValueError):
    """Samples a rule cannot take (none, not positive, not finite)."""


def _check(xs: Sequence[float], what: str = 'samples') -> list[float]:
    values = [float(x) for x in xs]
    if not values:
        raise StatsError(f'no {what}')
    bad = [x for x in values if not math.isfinite(x)]
    if bad:
        raise StatsError(f'{what} must be finite, got {bad[0]!r}')
    return values


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise StatsError(f'confidence must lie in (0, 1), got {confidence!r}')


#: up to this n the binomial sums are exact (integers); above, floats via lgamma
EXACT_BINOMIAL_N = 64


def _binomial_pmfs(n: int) -> list[float]:
    """P(Bin(n, 1/2) = i) for i = 0..n//2 + 1 (exact rationals as floats for small n)."""
    top = min(n, n // 2 + 1)
    if n <= EXACT_BINOMIAL_N:
        return [math.comb(n, i) / 2 ** n for i in range(top + 1)]
    base = math.lgamma(n + 1) - n * math.log(2.0)
    return [math.exp(base - math.lgamma(i + 1) - math.lgamma(n - i + 1)) for i in range(top + 1)]


def binomial_cdf(k: int, n: int) -> float:
    """P(Bin(n, 1/2) <= k)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= EXACT_BINOMIAL_N:
        return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    if k > n // 2:
        return 1.0 - binomial_cdf(n - k - 1, n)      # symmetry
    return min(1.0, sum(_binomial_pmfs(n)[:k + 1]))


def coverage(n: int, k: int) -> float:
    """P(X(k) <= median <= X(n+1-k)) for n values of a continuous distribution."""
    if not 1 <= k <= (n + 1) // 2:
        raise StatsError(f'rank {k} out of 1..{(n + 1) // 2} for n={n}')
    return 1.0 - 2.0 * binomial_cdf(k - 1, n)


def median_ci_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """1-based ranks (k, n+1-k) of the order statistics that bound the median with
    at least `confidence`, k as large as possible; None when even (1, n) falls short
    (at 95%: n < 6, since (1, 5) covers 1 - 2/32 = 93.75%)."""
    _check_confidence(confidence)
    best, cdf = None, 0.0               # cdf: P(B <= k - 1), grown term by term
    for k, pmf in enumerate(_binomial_pmfs(max(n, 0))[:(n + 1) // 2], start=1):
        cdf += pmf
        if 1.0 - 2.0 * cdf >= confidence - 1e-12:
            best = k
        else:
            break
    return None if best is None else (best, n + 1 - best)


@dataclasses.dataclass(frozen=True)
class Interval:
    """An interval for a median, and how it was made."""

    median: float
    low: float
    high: float
    n: int                      # values behind it (rounds, or the smaller side)
    confidence: float           # coverage: exact (order statistics), at most (bootstrap of
                                # fewer values than order statistics need), nominal, or 0
    method: str                 # 'order statistics', 'bootstrap', 'single value', ...

    @property
    def single(self) -> bool:
        """Made from one value (per side): no spread measured, no coverage (0)."""
        return self.confidence == 0.0

    @property
    def spread(self) -> float:
        """Relative half-width: the larger distance of an end from the median."""
        if self.median == 0:
            return math.inf if self.high > self.low else 0.0
        return max(self.high / self.median - 1.0, 1.0 - self.low / self.median)

    def widened(self, rel: float, why: str) -> Interval:
        """The interval stretched by a factor (1 + rel) on each side (rel >= 0)."""
        if rel < 0:
            raise StatsError(f'cannot widen by {rel!r}')
        return dataclasses.replace(self, low=self.low / (1.0 + rel),
                                   high=self.high * (1.0 + rel),
                                   method=f'{self.method}, widened by {100 * rel:.3g}% ({why})')

    def describe(self) -> str:
        return (f'median {self.median:.4g}, {percent(self.confidence)} interval '
                f'[{self.low:.4g}, {self.high:.4g}] (n={self.n}, {self.method})')


def percent(confidence: float) -> str:
    """A confidence as a percentage, to a tenth where it has one: 95%, 97.5%, 99%."""
    return f'{round(100 * confidence, 1):g}%'


def _percentiles(values: list[float], confidence: float) -> tuple[float, float]:
    values = sorted(values)
    alpha = (1.0 - confidence) / 2.0
    last = len(values) - 1
    lo = values[max(0, math.floor(alpha * last))]
    hi = values[min(last, math.ceil((1.0 - alpha) * last))]
    return lo, hi


def bootstrap_interval(xs: Sequence[float], confidence: float = CONFIDENCE,
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                       statistic: Callable[[list[float]], float] = statistics.median,
                       ) -> Interval:
    """Percentile bootstrap interval of `statistic` (the median), seeded."""
    values = _check(xs)
    _check_confidence(confidence)
    rng = random.Random(seed)
    n = len(values)
    stats = [statistic([values[rng.randrange(n)] for _ in range(n)])
             for _ in range(resamples)]
    lo, hi = _percentiles(stats, confidence)
    mid = statistic(values)
    if n == 1:
        return Interval(mid, mid, mid, 1, 0.0, 'single value')
    # the interval lies within [min, max], which covers the median with 1 - 2^(1-n) only:
    # the coverage claimed is never more than that (75% for 3 values)
    return Interval(mid, min(lo, mid), max(hi, mid), n, min(confidence, coverage(n, 1)),
                    'bootstrap')


def median_interval(xs: Sequence[float], confidence: float = CONFIDENCE,
                    seed: int = BOOTSTRAP_SEED) -> Interval:
    """The interval for the median of `xs`: order statistics where n allows, else
    the seeded bootstrap (2..5 values at 95%), else the single value."""
    values = sorted(_check(xs))
    _check_confidence(confidence)
    n = len(values)
    if n == 1:
        return Interval(values[0], values[0], values[0], 1, 0.0, 'single value')
    ranks = median_ci_ranks(n, confidence)
    if ranks is None:
        return bootstrap_interval(values, confidence, seed=seed)
    k, u = ranks
    return Interval(statistics.median(values), values[k - 1], values[u - 1], n,
                    coverage(n, k), 'order statistics')


def paired_ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """num[i] / den[i] for each round i (equal lengths, positive denominators)."""
    a, b = _check(num, 'numerator samples'), _check(den, 'denominator samples')
    if len(a) != len(b):
        raise StatsError(f'{len(a)} numerator but {len(b)} denominator samples: not paired')
    if any(x <= 0 for x in b):
        raise StatsError('denominator samples must be positive')
    return [x / y for x, y in zip(a, b)]


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (SciPy)."""
    from scipy.stats import t as student_t  # noqa: PLC0415  (only where a pair is judged)
    return float(student_t.ppf(p, df))


#: A reference band's false-alarm rate per check: at most 1 check in 100 fails
#: on a night where nothing changed (``hybridverdict-baseline --false-alarm``).
DEFAULT_FALSE_ALARM = 0.01
#: Variance of a sample median over that of the mean (normal samples): pi / 2.
MEDIAN_VARIANCE_FACTOR = math.pi / 2


@dataclasses.dataclass(frozen=True)
class BandSize:
    """How wide a reference band must be for a stated false-alarm rate."""

    log_tolerance: float    # the band's half-width in log units (0: no spread seen)
    quantile: float         # the t quantile used (Welch-Satterthwaite degrees of freedom)


def reference_band(sessions: Sequence[Sequence[float]], night_samples: int,
                   false_alarm: float = DEFAULT_FALSE_ALARM, variables: int = 1) -> BandSize:
    """The half-width (log units) of a one-sided reference band made from the
    runs of several sessions (one list of values per session), such that the
    median of `night_samples` runs of a night where nothing changed falls
    beyond it with probability at most `false_alarm` / `variables` (Bonferroni
    over the judged variables of one check, so that the check as a whole
    fails with at most `false_alarm`).

    The log value of a run is modelled as the session's level plus the run's
    own noise: the within-session SD comes from the runs around their session's
    mean (pooled), the between-session SD from the spread of the session
    medians less what the within part explains.  A night's median then varies
    with ``between^2 + (pi/2) within^2 / n`` and the reference (the median of
    all runs) with about ``(pi/2) var(session medians) / S``; the band is
    Student's t quantile (degrees of freedom of that sum by Welch-Satterthwaite,
    at most S - 1: few sessions give a wide band, as they must) times the root
    of their sum.  With one session the drift between sessions is not measured
    (``between`` 0): ``hybridverdict-baseline`` says so; the reference's and the
    night's variances then both come from the runs around the session's mean,
    and the degrees of freedom are theirs (n - 1 for n runs).  The nightly judges the
    interval of the median (FAIL only when it lies entirely outside), so the
    realised rate is below the stated one.
    """
    if not 0 < false_alarm < 1:
        raise StatsError(f'false-alarm rate must be in (0, 1), got {false_alarm!r}')
    if night_samples < 1 or variables < 1:
        raise StatsError('night_samples and variables must be at least 1')
    logs = [[math.log(v) for v in _check(s)] for s in sessions if len(s)]
    if not logs:
        raise StatsError('no sessions')
    dof = sum(len(s) - 1 for s in logs)
    within2 = (sum((y - statistics.fmean(s)) ** 2 for s in logs for y in s) / dof
               if dof else 0.0)
    levels = [statistics.median(s) for s in logs]
    spread2 = statistics.variance(levels) if len(levels) > 1 else 0.0
    per_run = MEDIAN_VARIANCE_FACTOR * within2
    between2 = max(0.0, spread2 - per_run * statistics.fmean(1 / len(s) for s in logs))
    total = sum(len(s) for s in logs)
    ref_var = (MEDIAN_VARIANCE_FACTOR * spread2 / len(logs) if len(logs) > 1
               else per_run / total)
    night_var = between2 + per_run / night_samples
    var = night_var + ref_var
    # Welch-Satterthwaite: the degrees of freedom of that sum, from those of the
    # estimates its terms come from: the spread of the session levels (S - 1)
    # and the runs around their session's mean (`dof`).  The reference's term
    # comes from the former with several sessions, from the latter with one
    # (then every term is the one within-session estimate: exactly its `dof`;
    # left out, the sum claimed up to 4 times as many, 8 for 3 runs instead of 2,
    # and let 4 times the stated rate through).
    levels_part = between2 + (ref_var if len(logs) > 1 else 0.0)
    runs_part = per_run / night_samples + (0.0 if len(logs) > 1 else ref_var)
    parts = [(levels_part, len(logs) - 1), (runs_part, dof)]
    denom = sum(v * v / d for v, d in parts if d > 0 and v > 0)
    df = max(1, int(var * var / denom + 1e-9)) if denom > 0 else 0
    if len(logs) > 1:
        # The sessions' levels are known from S of them whatever the estimate
        # of the drift between them says (a small estimate from few sessions is
        # luck): at most S - 1 degrees of freedom (simulated: Welch-Satterthwaite
        # alone lets 3 to 8 times the stated rate through at S = 3 to 5).
        df = min(df, len(logs) - 1)
    p = 1 - false_alarm / variables
    q = t_quantile(p, df) if df else statistics.NormalDist().inv_cdf(p)
    return BandSize(q * math.sqrt(var), q)


#: How ``paired_interval`` names its method (the report prints it).
PAIRED_METHOD = 'paired t on log ratios'


def paired_interval(ratios: Sequence[float], confidence: float = DECISION_CONFIDENCE,
                    ) -> Interval:
    """Student's t interval of the per-round ratios on the log scale (see the
    module docstring): the geometric mean and exp(mean(log r) +- t s/sqrt(n)).
    A ratio that is not positive cannot be logged: the median's interval."""
    values = _check(ratios, 'ratios')
    _check_confidence(confidence)
    if any(r <= 0 for r in values):
        return median_interval(values, confidence)
    n = len(values)
    logs = [math.log(r) for r in values]
    centre = statistics.fmean(logs)
    if n == 1:
        return Interval(values[0], values[0], values[0], 1, 0.0, 'single value')
    if min(values) == max(values):
        # no spread: the value itself (exp(mean(log r)) may round one unit off it,
        # and a value on a band's limit would fall outside)
        return Interval(values[0], values[0], values[0], n, confidence, PAIRED_METHOD)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return Interval(math.exp(centre), math.exp(centre - half), math.exp(centre + half), n,
                    confidence, PAIRED_METHOD)


def ratio_interval(num: Sequence[float], den: Sequence[float],
                   confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> Interval:
    """Interval of median(num) / median(den) from two unpaired sample lists.

    Where both sides have enough values, each side's order-statistic interval at
    confidence sqrt(c) (independent sides: joint coverage >= c), the ratio's ends
    from their ends (distribution-free, conservative); otherwise each side
    resampled on its own (seeded bootstrap); a point when both have one value."""
    a, b = _check(num, 'numerator samples'), _check(den, 'denominator samples')
    _check_confidence(confidence)
    if any(x <= 0 for x in b):
        raise StatsError('denominator samples must be positive')
    mid = statistics.median(a) / statistics.median(b)
    n = min(len(a), len(b))
    if len(a) == 1 and len(b) == 1:
        return Interval(mid, mid, mid, 1, 0.0, 'single value per side')
    each = math.sqrt(confidence)
    ranks_a, ranks_b = median_ci_ranks(len(a), each), median_ci_ranks(len(b), each)
    if ranks_a is not None and ranks_b is not None and min(a) > 0:
        sa, sb = sorted(a), sorted(b)
        cov = coverage(len(a), ranks_a[0]) * coverage(len(b), ranks_b[0])
        return Interval(mid, sa[ranks_a[0] - 1] / sb[ranks_b[1] - 1],
                        sa[ranks_a[1] - 1] / sb[ranks_b[0] - 1], n, cov,
                        'order statistics of each side')
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        ra = statistics.median([a[rng.randrange(len(a))] for _ in a])
        rb = statistics.median([b[rng.randrange(len(b))] for _ in b])
        ratios.append(ra / rb)
    lo, hi = _percentiles(ratios, confidence)
    return Interval(mid, min(lo, mid), max(hi, mid), n, confidence,
                    'bootstrap of the ratio of medians')


@dataclasses.dataclass(frozen=True)
class Decision:
    """An interval judged against a band."""

    state: str                  # PASS, FAIL or INCONCLUSIVE
    side: str                   # 'inside', 'above', 'below' or 'across'
    interval: Interval
    low: float | None           # the band; None = open
    high: float | None

    @property
    def spread(self) -> float:
        return self.interval.spread


def decide(interval: Interval, low: float | None, high: float | None) -> Decision:
    """PASS inside [low, high], FAIL entirely outside it, INCONCLUSIVE across an edge."""
    if low is not None and high is not None and low > high:
        raise StatsError(f'empty band [{low}, {high}]')
    if high is not None and interval.low > high:
        return Decision(FAIL, 'above', interval, low, high)
    if low is not None and interval.high < low:
        return Decision(FAIL, 'below', interval, low, high)
    inside = ((low is None or interval.low >= low) and (high is None or interval.high <= high))
    return Decision(PASS if inside else INCONCLUSIVE, 'inside' if inside else 'across',
                    interval, low, high)


def judge_ratios(ratios: Sequence[float], low: float | None, high: float | None,
                 confidence: float = DECISION_CONFIDENCE) -> Decision:
    """The rule for a fixed-band assertion from per-round ratios (e.g. ring/OSU):
    the paired interval (one value: the value itself)."""
    return decide(paired_interval(ratios, confidence), low, high)


def interleaved(times_a: Sequence[Moment],
                times_b: Sequence[Moment]) -> bool:
    """Whether two sides' samples were taken in alternating rounds: as many of each,
    at least two rounds, and every round (the i-th of each side, by time) over before
    the next begins.  Samples with equal times prove nothing: not interleaved."""
    if len(times_a) != len(times_b) or len(times_a) < 2:
        return False
    return side_by_side(sorted(times_a), sorted(times_b))  # type: ignore[type-var]


def side_by_side(times_a: Sequence[Moment], times_b: Sequence[Moment]) -> bool:
    """Whether the rounds (times_a[i], times_b[i]), as given (e.g. by round
    number), ran one after the other: at least two, and each round, in the
    order of time, over before the next begins."""
    if len(times_a) != len(times_b) or len(times_a) < 2:
        return False
    rounds = sorted(zip(times_a, times_b), key=min)
    return all(max(r) < min(s) for r, s in zip(rounds, rounds[1:]))


def _seconds(moment: Moment) -> float | None:
    """A moment in seconds (a datetime, a number, or a perflog record's
    (time, file, line)); None where it is none of these."""
    if isinstance(moment, tuple) and moment:
        moment = moment[0]
    if isinstance(moment, dt.datetime):
        return moment.timestamp()
    if isinstance(moment, (int, float)):
        return float(moment)
    return None


@dataclasses.dataclass(frozen=True)
class Comparison:
    """num against den (e.g. T_mpi against T_hybrid): the interval of their ratio."""

    ratio: float                # the geometric mean per-round ratio, or the ratio of medians
    interval: Interval
    noise: float                # relative half-width of the interval: the drift included
    basis: str                  # 'paired rounds' or 'back-to-back samples'
    gap: float | None = None    # paired rounds: median seconds between a round's two runs


PAIRED = 'paired rounds'
BACK_TO_BACK = 'back-to-back samples'


def compare(num: Sequence[float], den: Sequence[float],
            times_num: Sequence[Moment] | None = None,
            times_den: Sequence[Moment] | None = None,
            floor: float = DEFAULT_FLOOR,
            confidence: float = DECISION_CONFIDENCE, in_order: bool = False) -> Comparison:
    """The interval of num/den with a noise estimate that covers drift: the
    paired interval of the per-round ratios when the times show paired rounds
    (``interleaved``), else the two lists unpaired (``ratio_interval``)
    widened by `floor` on each side, since back-to-back samples cannot see the
    drift between the sides.  `in_order`: num[i] and den[i] are one round's
    (the rounds named by number): paired as given where those rounds ran side
    by side (``side_by_side``), never the i-th of each side by time."""
    if floor < 0:
        raise StatsError(f'the floor must not be negative, got {floor!r}')
    if (times_num is not None and times_den is not None
            and len(times_num) == len(num) and len(times_den) == len(den)
            and (side_by_side(times_num, times_den) if in_order
                 else interleaved(times_num, times_den))):
        if in_order:
            order_a = order_b = list(range(len(num)))
        else:
            order_a = sorted(range(len(num)), key=lambda i: times_num[i])  # type: ignore[index]
            order_b = sorted(range(len(den)), key=lambda i: times_den[i])  # type: ignore[index]
        ratios = paired_ratios([num[i] for i in order_a], [den[i] for i in order_b])
        iv = paired_interval(ratios, confidence)
        gaps = [_seconds(times_num[i]) for i in order_a], [_seconds(times_den[i])
                                                           for i in order_b]
        gap = (None if None in gaps[0] + gaps[1] else statistics.median(
            abs(a - b) for a, b in zip(*gaps)))   # type: ignore[operator]
        return Comparison(iv.median, iv, iv.spread, PAIRED, gap)
    iv = ratio_interval(num, den, confidence)
    if floor > 0:
        iv = iv.widened(floor, 'drift between back-to-back samples not measured')
    return Comparison(iv.median, iv, iv.spread, BACK_TO_BACK)


def session_of(time: dt.datetime, starts: Sequence[dt.datetime]) -> int:
    """Index of the session a time belongs to, given the sessions' first times in
    order (``hybridverdict.changes.sessions`` tells sessions apart)."""
    return max(0, bisect.bisect_right(list(starts), time) - 1)


def confirmed(calls: Sequence[str], sessions: int = CONFIRM_SESSIONS) -> bool:
    """Whether the last `sessions` calls (oldest first) are one and the same decided
    call: at least `sessions` of them, none INCONCLUSIVE."""
    if sessions < 1:
        raise StatsError(f'sessions must be at least 1, got {sessions!r}')
    last = list(calls)[-sessions:]
    return (len(last) == sessions and last[0] != INCONCLUSIVE
            and all(c == last[0] for c in last))


# ---- the verdict of hybrid against pure MPI -----------------------------------------

#: What a speedup's decision against the band around 1 calls (``call``).
WIN, LOSS, TIE = 'WIN', 'LOSS', 'TIE'
#: How a ``HybridVerdict`` perflog line's ``judgement_detail`` opens when its call
#: was INCONCLUSIVE: its ``verdict`` code 0 is then no TIE, and
#: ``hybridverdict-baseline`` pools none of them into a ``verdict`` reference.
UNDECIDED_VERDICT = f'verdict {INCONCLUSIVE}'


def call(decision: Decision) -> str:
    """The verdict of a speedup's decision against the band around 1."""
    if decision.state == PASS:
        return TIE
    if decision.state == FAIL:
        return WIN if decision.side == 'above' else LOSS
    return INCONCLUSIVE


def band(floor: float = DEFAULT_FLOOR) -> tuple[float, float]:
    """The band of a TIE around a speedup of 1: [1 / (1 + floor), 1 + floor]."""
    return 1.0 / (1.0 + floor), 1.0 + floor


def speedup_call(interval: Interval, floor: float = DEFAULT_FLOOR) -> str:
    """The verdict of a speedup's interval: the one rule (``decide``) against the
    band of a TIE around 1 (``band``), as a call (``call``).  An interval of one
    value per side (one sample of each layout, or one round: ``single``) has
    measured no spread, and the floor's widening covers the drift between
    sessions, not a run's own noise: INCONCLUSIVE, whatever the value."""
    if interval.single:
        return INCONCLUSIVE
    return call(decide(interval, *band(floor)))


# ---- sequential rounds --------------------------------------------------------------

#: Why a verdict stopped taking rounds.
DECIDED, CAP, BUDGET = 'decided', 'cap', 'budget'


def looks(planned: int, cap: int = DEFAULT_MAX_ROUNDS, step: int = SEQUENTIAL_STEP,
          ) -> list[int]:
    """The round counts at which a pair is judged: after the planned rounds, then
    every `step` rounds up to `cap` (the calibration of DECISION_CONFIDENCE
    assumes no more looks than these)."""
    if planned < 1 or step < 1:
        raise StatsError(f'planned rounds and step must be at least 1, got {planned}, {step}')
    out = [planned]
    while out[-1] < cap:
        out.append(min(cap, out[-1] + step))
    return out


def stop_reason(verdict: str, rounds: int, cap: int = DEFAULT_MAX_ROUNDS) -> str:
    """Why a pair's rounds stopped: decided, the cap of rounds, or the budget
    (or the session) ended before either."""
    if verdict != INCONCLUSIVE:
        return DECIDED
    return CAP if rounds >= cap else BUDGET
