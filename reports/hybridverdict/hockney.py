"""Least-squares fits of the communication models of Xu & Hwang (seed 003).

Hockney's point-to-point model t(m) = t0 + m / r_inf (m in bytes, t in us, so
r_inf in B/us = MB/s; m_1/2 = t0 r_inf), and t(n) = a log2(n) + b for collectives
over n ranks.  Both minimise the squared *relative* residuals (t_fit - t) / t:
plain least squares on t would be ruled by the largest messages and leave t0 to
chance.  The fit's relative error is their RMS (Xu & Hwang saw theirs within 20%),
its largest one is given too (docs/pages/science.md); a fit of two points passes
through both, so its error says nothing of the model (``error_text``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence


class FitError(ValueError):
    """Data a model cannot be fitted to; the message says why."""


@dataclasses.dataclass(frozen=True)
class HockneyFit:
    t0: float             # us
    r_inf: float          # MB/s = B/us
    m_half: float         # B
    rel_error: float      # RMS of the relative residuals
    max_error: float      # largest relative residual
    points: int           # message sizes fitted

    def time(self, m: float) -> float:
        """The model's time in us for an m-byte message."""
        return self.t0 + m / self.r_inf


@dataclasses.dataclass(frozen=True)
class LogFit:
    a: float              # us per doubling of the rank count
    b: float              # us
    rel_error: float
    max_error: float
    points: int           # rank counts fitted

    def time(self, n: float) -> float:
        return self.a * math.log2(n) + self.b


#: The parameters of each model: a fit of no more points is exact by construction.
PARAMETERS = 2


def error_text(fit: HockneyFit | LogFit, error: float) -> str:
    """A fit's relative error as the tables print it: 'n/a (2 points)' where the fit
    has no more points than parameters (its 0.0% would read as a perfect model)."""
    if fit.points <= PARAMETERS:
        return f'n/a ({fit.points} points)'
    return f'{100 * error:.1f}%'


def _weighted_line(xs: Sequence[float], ts: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) minimising sum(((c + s x) - t) / t)^2."""
    # normal equations with weights w = 1 / t^2
    sw = swx = swxx = swt = swxt = 0.0
    for x, t in zip(xs, ts):
        w = 1.0 / (t * t)
        sw += w
        swx += w * x
        swxx += w * x * x
        swt += w * t
        swxt += w * x * t
    det = sw * swxx - swx * swx
    if det <= 0 or not math.isfinite(det):
        raise FitError('the points are degenerate (all at one abscissa)')
    slope = (sw * swxt - swx * swt) / det
    intercept = (swt - slope * swx) / sw
    return intercept, slope


def _errors(fitted: Sequence[float], ts: Sequence[float]) -> tuple[float, float]:
    rel = [(f - t) / t for f, t in zip(fitted, ts)]
    return math.sqrt(sum(r * r for r in rel) / len(rel)), max(abs(r) for r in rel)


def _check_points(xs: Sequence[float], ts: Sequence[float], what: str, need: str,
                  least: float, below: str) -> None:
    if len(xs) != len(ts):
        raise FitError(f'{len(xs)} {what} but {len(ts)} times')
    if len(set(xs)) < 2:
        raise FitError(f'needs >= 2 {need}, got {len(set(xs))}')
    bad = [t for t in ts if not (t > 0 and math.isfinite(t))]
    if bad:
        raise FitError(f'times must be positive and finite, got {bad[0]!r}')
    if any(x < least for x in xs):
        raise FitError(below)


def fit_hockney(sizes: Sequence[float], times: Sequence[float]) -> HockneyFit:
    """Fit t = t0 + m / r_inf to message sizes (B) and times (us); FitError where the
    fitted t0 or r_inf is not positive (no start-up latency, no finite bandwidth)."""
    _check_points(sizes, times, 'sizes', 'distinct message sizes', 0,
                  'message sizes must not be negative')
    t0, slope = _weighted_line(sizes, times)
    if slope <= 0:
        raise FitError('the times do not grow with the message size: '
                       'no finite asymptotic bandwidth r_inf')
    if t0 <= 0:
        raise FitError(f'the fitted start-up latency t0 = {t0:.3g} us is not positive: '
                       'the times do not follow t0 + m / r_inf')
    r_inf = 1.0 / slope
    rms, worst = _errors([t0 + m * slope for m in sizes], times)
    return HockneyFit(t0=t0, r_inf=r_inf, m_half=t0 * r_inf, rel_error=rms, max_error=worst,
                      points=len(set(sizes)))


def fit_log2(ranks: Sequence[int], times: Sequence[float]) -> LogFit:
    """Fit t = a log2(n) + b to rank counts n and times (us)."""
    _check_points(ranks, times, 'rank counts', 'rank counts', 1,
                  'rank counts must be at least 1')
    xs = [math.log2(n) for n in ranks]
    b, a = _weighted_line(xs, times)
    rms, worst = _errors([a * x + b for x in xs], times)
    return LogFit(a=a, b=b, rel_error=rms, max_error=worst, points=len(set(ranks)))
