"""Fixed-band performance assertions, decided by the one rule.

A fixed band is a ReFrame reference ``(ref, lower, upper, unit)``: the ring
within 5% of osu_bw, md at least LAMMPS's speed, hybrid within 10% of pure
MPI, or a reference ``./harness baseline`` wrote.  ``judge_band`` decides it
by ``harnesscore.stats`` (PASS, FAIL or INCONCLUSIVE from the interval of the
values' median) and adds WARN (a PASS in the soft zone, ``HARNESS_SOFT_ZONE``),
DEFERRED (a sample that its variant's last sample judges) and the busy rule: a
FAIL on a run ``harnesscore.quiet`` flagged busy is INCONCLUSIVE, since other
processes bias a ratio (threads that synchronise lose more to preemption than
independent ranks) and no interval of its samples covers a bias.
docs/pages/statistics.md, "Noisy machines", gives the rules in full.

Pure Python (the job scripts call ``more_rounds`` through ``python -m
harnesscore.rounds``); ``harnesslib.noise`` is the ReFrame side.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Sequence

from .stats import CONFIDENCE, FAIL, INCONCLUSIVE, PASS, Decision, Interval, decide, judge_ratios

#: A PASS inside the soft zone: a warning before the hard limit.
WARN = 'WARN'
#: A sample whose values the session's last sample of its variant judges.
DEFERRED = 'DEFERRED'
#: The states of a run, as the perflog field ``judgement`` writes them.
STATE_FIELD = {PASS: 'pass', FAIL: 'fail', INCONCLUSIVE: 'inconclusive', WARN: 'warn',
               DEFERRED: 'deferred'}
#: Where the soft zone starts, as a fraction of a band's tolerance.
DEFAULT_SOFT_ZONE = 0.7


def soft_zone() -> float:
    """``HARNESS_SOFT_ZONE``: the fraction of a band's tolerance where its
    warning zone starts (0 < f <= 1; 1: no soft zone)."""
    text = os.environ.get('HARNESS_SOFT_ZONE', '').strip()
    if not text:
        return DEFAULT_SOFT_ZONE
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise ValueError(f'HARNESS_SOFT_ZONE must be a number in (0, 1], got {text!r}')
    return value


def band_bounds(ref: float, lower: float | None, upper: float | None,
                zone: float = 1.0) -> tuple[float | None, float | None]:
    """Absolute (low, high) of a ReFrame reference (ReFrame's own arithmetic:
    thresholds are fractions of |ref|, absolute for ref 0); None where open.
    `zone` < 1 gives the soft limits: that fraction of each threshold."""
    def bound(thres: float | None) -> float | None:
        if thres is None:
            return None
        thres *= zone
        if ref == 0:
            return thres
        return ref * (1 + (-thres if ref < 0 else thres))
    return bound(lower), bound(upper)


@dataclasses.dataclass(frozen=True)
class Judgement:
    """One variable judged against its band."""

    var: str
    decision: Decision
    state: str              # the decision's state, INCONCLUSIVE for a busy FAIL, WARN
    busy: bool
    #: the soft limits (absolute; None where open or without a soft zone)
    soft: tuple[float | None, float | None] = (None, None)

    @property
    def withheld(self) -> bool:
        return self.decision.state == FAIL and self.state == INCONCLUSIVE

    def inside(self, value: float) -> bool:
        """Whether `value` lies in the band (what ReFrame's own check asks)."""
        low, high = self.decision.low, self.decision.high
        return (low is None or value >= low) and (high is None or value <= high)

    def describe(self) -> str:
        if self.state == DEFERRED:
            return f'{self.var} {DEFERRED}: judged with the last sample of its variant'
        iv = self.decision.interval
        lo = '-inf' if self.decision.low is None else f'{self.decision.low:.4g}'
        hi = 'inf' if self.decision.high is None else f'{self.decision.high:.4g}'
        text = (f'{self.var} {self.state}: median {iv.median:.4g} interval '
                f'[{iv.low:.4g}, {iv.high:.4g}] n={iv.n} ({iv.method}) band [{lo}, {hi}] '
                f'spread +-{100 * self.decision.spread:.1f}%')
        if self.state == WARN:
            # the soft limit the interval lies beyond: the upper one where it is
            # above it, else the lower one (``decide``'s order of the sides)
            soft_low, soft_high = self.soft
            edge = soft_high if soft_high is not None and iv.low > soft_high else soft_low
            text += f' (in the soft zone: beyond {edge:.4g})'
        if self.withheld:
            text += ' (FAIL withheld: the machine was busy)'
        return text.replace('|', '/')


def judge_band(var: str, values: Sequence[float] | Interval, ref: float,
               lower: float | None, upper: float | None,
               busy: bool = False, soft: float = 1.0,
               predicted: bool = False) -> Judgement | None:
    """The rule for one variable against its reference: from its values (their
    median's interval) or from an interval made elsewhere by ``stats`` (e.g.
    ``stats.compare`` of two sample lists); None when the band is open on both
    sides (nothing to judge).  With `soft` < 1, a PASS whose interval lies
    entirely beyond the soft limits (`band_bounds` with that zone) is WARN.

    `predicted`: the band is a prediction band for the median of the values
    (``hybridverdict-baseline`` sizes it so that a night where nothing changed
    puts its median inside with the stated probability): the median inside it
    passes (the values' sample median: one slow run of three does not move
    it); the median outside fails only when the whole interval is outside,
    and is INCONCLUSIVE otherwise.  A fixed target (ring within 5% of OSU) is a
    band for the true value: only an interval inside it passes."""
    low, high = band_bounds(ref, lower, upper)
    if low is None and high is None:
        return None
    interval = values if isinstance(values, Interval) else None
    decision = (decide(interval, low, high) if interval is not None
                else judge_ratios(list(values), low, high))
    if predicted:
        # the sample median, not the interval's centre (a geometric mean for paired t)
        median = (decision.interval.median if interval is not None
                  else statistics.median(values))
        if (low is None or median >= low) and (high is None or median <= high):
            decision = dataclasses.replace(decision, state=PASS, side='inside')
        elif decision.state == PASS:
            decision = dataclasses.replace(decision, state=INCONCLUSIVE, side='across')
    state = INCONCLUSIVE if (decision.state == FAIL and busy) else decision.state
    limits: tuple[float | None, float | None] = (None, None)
    if soft < 1:
        limits = band_bounds(ref, lower, upper, soft)
        if state == PASS and decide(decision.interval, *limits).state == FAIL:
            state = WARN
    return Judgement(var, decision, state, busy, limits)


def deferred(var: str, ref: float, lower: float | None, upper: float | None) -> Judgement:
    """A sample's judgement left to the session's last sample of its variant
    (the band is kept: ReFrame must not fail this sample's own value)."""
    iv = Interval(math.nan, math.nan, math.nan, 0, 0.0, 'deferred to the last sample')
    low, high = band_bounds(ref, lower, upper)
    return Judgement(var, Decision(INCONCLUSIVE, 'across', iv, low, high), DEFERRED, False)


def overall(judgements: Sequence[Judgement]) -> str:
    """The run's state: fail if any variable fails, else inconclusive, else
    warn, else deferred, else pass; '' when nothing was judged."""
    states = {j.state for j in judgements}
    for state in (FAIL, INCONCLUSIVE, WARN, DEFERRED, PASS):
        if state in states:
            return STATE_FIELD[state]
    return ''


def more_rounds(samples: dict[str, Sequence[float]],
                bands: dict[str, tuple[float | None, float | None]]) -> list[str]:
    """The variables more rounds may settle: those whose interval still crosses
    an edge of their band, and those that fail on an interval of less than 95%
    coverage, so that a failure stands on a full interval wherever the time
    budget allows.  The paired t interval of 2 rounds or more claims 97.5%
    (``judge_ratios``): its FAIL stands at once.  Below 95% are a single round
    (the value itself, no coverage) and, where a ratio is not positive, the
    median's bootstrap of fewer than 6 rounds (3 rounds: 75% at most)."""
    out = []
    for var, values in samples.items():
        low, high = bands.get(var, (None, None))
        if (low is None and high is None) or not values or not all(map(math.isfinite, values)):
            continue
        decision = judge_ratios(list(values), low, high)
        if decision.state == INCONCLUSIVE or (
                decision.state == FAIL and decision.interval.confidence < CONFIDENCE - 1e-9):
            out.append(var)
    return out
