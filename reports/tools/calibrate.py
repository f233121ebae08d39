"""How often the verdict rule decides, and how often it is wrong: a simulation.

``python reports/tools/calibrate.py`` runs the rule of ``harnesscore.stats`` on
simulated pairs of known speedup and prints per noise level and speedup the share
decided, the share of wrong calls (a call the true speedup contradicts; an
INCONCLUSIVE one is never wrong) and the mean rounds, then issue 25's targets
(docs/pages/statistics.md).  A benchmark, not a test: tests/test_stats_coverage.py
checks the bounds on a smaller run.  One simulated pair: ``noise`` is the SD of a
round's log ratio of two runs side by side (issue 25 measured 0.05-0.10), each
run's own noise / sqrt(2), from Student's t with 3 degrees of freedom (heavy
tails); the machine drifts, a random walk from run to run (steps of noise / 2)
and a 50% slow-down over the session, shared by a round's runs but for the step
between them; the pair's order alternates by round; the rule judges at each look
(``stats.looks``) until decided or at the cap.  A TIE's band is ``stats.band``,
[1 / (1 + f), 1 + f] with f the noise floor (``stats.DEFAULT_FLOOR``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
from collections.abc import Sequence
from typing import NamedTuple

from harnesscore import stats

#: True speedups T_mpi / T_hybrid simulated by default (0.70 to 1.50).
SPEEDUPS = (0.70, 0.80, 0.85, 0.90, 0.95, 1.00, 1.04, 1.06, 1.10, 1.15, 1.25, 1.50)
#: Noise levels (standard deviation of a round's log ratio).
NOISES = (0.02, 0.05, 0.10)
#: Slow-down of the machine over a whole session.
TREND = 1.5
#: Student's t degrees of freedom of a run's noise (heavy tails).
TAIL_DF = 3


def truth(speedup: float, floor: float = stats.DEFAULT_FLOOR) -> str:
    """The call a true speedup deserves."""
    low, high = stats.band(floor)
    return stats.WIN if speedup > high else stats.LOSS if speedup < low else stats.TIE


def round_log_ratios(speedup: float, noise: float, rounds: int,
                     rng: random.Random) -> list[float]:
    """log(T_mpi / T_hybrid) of `rounds` simulated rounds (see the module docstring)."""
    per_run = noise / math.sqrt(2.0)
    scale = per_run / math.sqrt(TAIL_DF / (TAIL_DF - 2.0))   # t(3) has variance 3

    def run_noise() -> float:
        z = rng.gauss(0.0, 1.0)
        chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(TAIL_DF))
        return scale * z / math.sqrt(chi2 / TAIL_DF)

    trend = math.log(TREND) / (2 * rounds)
    machine, out = 0.0, []
    for r in range(rounds):
        first = machine + rng.gauss(0.0, noise / 2.0) + trend
        second = first + rng.gauss(0.0, noise / 2.0) + trend
        machine = second
        t_mpi_first = r % 2 == 0
        drift_mpi, drift_hyb = (first, second) if t_mpi_first else (second, first)
        out.append(math.log(speedup) + (drift_mpi + run_noise()) - (drift_hyb + run_noise()))
    return out


class Outcome(NamedTuple):
    """How one pair's rounds ended."""

    call: str
    rounds: int
    reason: str


def sequential(log_ratios: Sequence[float], planned: int, cap: int,
               floor: float = stats.DEFAULT_FLOOR,
               confidence: float = stats.DECISION_CONFIDENCE) -> Outcome:
    """The sequential rule on one pair's rounds (as many as the cap)."""
    verdict, n = stats.INCONCLUSIVE, planned
    for n in stats.looks(planned, cap):
        iv = stats.paired_interval([math.exp(x) for x in log_ratios[:n]], confidence)
        verdict = stats.speedup_call(iv, floor)
        if verdict != stats.INCONCLUSIVE:
            break
    return Outcome(verdict, n, stats.stop_reason(verdict, n, cap))


@dataclasses.dataclass(frozen=True)
class Row:
    noise: float
    speedup: float
    decided: float          # share of pairs with a call
    wrong: float            # share of pairs with a wrong call
    rounds: float           # mean rounds used


def simulate(speedups: Sequence[float] = SPEEDUPS, noises: Sequence[float] = NOISES,
             pairs: int = 400, planned: int = 3, cap: int = stats.DEFAULT_MAX_ROUNDS,
             seed: int = 1, floor: float = stats.DEFAULT_FLOOR) -> list[Row]:
    rng = random.Random(seed)
    rows = []
    for noise in noises:
        for s in speedups:
            outs = [sequential(round_log_ratios(s, noise, cap, rng), planned, cap, floor)
                    for _ in range(pairs)]
            right = truth(s, floor)
            rows.append(Row(noise, s,
                            sum(o.call != stats.INCONCLUSIVE for o in outs) / pairs,
                            sum(o.call not in (stats.INCONCLUSIVE, right) for o in outs) / pairs,
                            sum(o.rounds for o in outs) / pairs))
    return rows


@dataclasses.dataclass(frozen=True)
class Target:
    what: str
    value: float
    goal: float
    at_least: bool

    @property
    def met(self) -> bool:
        return self.value >= self.goal if self.at_least else self.value <= self.goal


def targets(rows: Sequence[Row]) -> list[Target]:
    """Issue 25's targets, where the rows cover them."""
    out = []
    for noise in sorted({r.noise for r in rows}):
        at = [r for r in rows if r.noise == noise]
        out.append(Target(f'wrong calls at noise {noise:.0%}',
                          sum(r.wrong for r in at) / len(at), 0.05, False))
        out.append(Target(f'wrong calls at noise {noise:.0%}, worst true speedup',
                          max(r.wrong for r in at), 0.05, False))
        far = [r for r in at if abs(r.speedup - 1.0) >= 0.15 - 1e-9]
        goal = {0.05: 0.95, 0.10: 0.90}.get(round(noise, 4))
        if far and goal:
            out.append(Target(f'decided with |speedup - 1| >= 0.15 at noise {noise:.0%}',
                              sum(r.decided for r in far) / len(far), goal, True))
        tie = [r for r in at if r.speedup == 1.0]
        if tie and round(noise, 4) == 0.02:
            out.append(Target('a true 1.00 called TIE at noise 2%',
                              tie[0].decided - tie[0].wrong, 0.90, True))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog='python reports/tools/calibrate.py',
        description='Simulate the verdict rule (paired t on log ratios, sequential rounds) '
                    'on pairs of known speedup: decided and wrong-call rates per noise '
                    'level. Exit status 1 when a target of issue 25 is missed.')
    ap.add_argument('--pairs', type=int, default=400, help='pairs per cell (default 400)')
    ap.add_argument('--planned', type=int, default=3,
                    help='planned rounds before the first look (default 3, HARNESS_REPEAT)')
    ap.add_argument('--max-rounds', type=int, default=stats.DEFAULT_MAX_ROUNDS,
                    help=f'cap of rounds (default {stats.DEFAULT_MAX_ROUNDS}, '
                         f'HARNESS_MAX_ROUNDS)')
    ap.add_argument('--seed', type=int, default=1)
    args = ap.parse_args(argv)
    if args.pairs < 1 or not 1 <= args.planned <= args.max_rounds:
        ap.error('need --pairs >= 1 and 1 <= --planned <= --max-rounds')
    rows = simulate(pairs=args.pairs, planned=args.planned, cap=args.max_rounds,
                    seed=args.seed)
    print(f'paired t on log ratios, {stats.DECISION_CONFIDENCE:.1%} per look, looks at '
          f'{stats.looks(args.planned, args.max_rounds)} rounds, TIE band '
          f'[{stats.band()[0]:.3f}, {stats.band()[1]:.3f}], {args.pairs} pairs per cell')
    print(f'{"noise":>6} {"speedup":>8} {"truth":>6} {"decided":>8} {"wrong":>7} '
          f'{"rounds":>7}')
    for r in rows:
        print(f'{r.noise:>6.0%} {r.speedup:>8.2f} {truth(r.speedup):>6} {r.decided:>8.1%} '
              f'{r.wrong:>7.1%} {r.rounds:>7.1f}')
    missed = 0
    for t in targets(rows):
        sign = '>=' if t.at_least else '<='
        print(f'{"met   " if t.met else "MISSED"} {t.what}: {t.value:.1%} (target {sign} '
              f'{t.goal:.0%})')
        missed += not t.met
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
