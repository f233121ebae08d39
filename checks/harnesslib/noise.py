"""The ReFrame side of noisy machines: ``QuietMachine`` (every performance run
records how quiet the machine was, see ``harnesscore.quiet``) and ``BandRule``
(every fixed-band reference is decided by the one rule, see
``harnesscore.bands``).

How the states map onto ReFrame (docs/pages/statistics.md, "Noisy machines",
says why): PASS passes, WARN passes with a warning line; FAIL fails the
performance stage with ReFrame's own "failed to meet reference" message,
after a warning that gives the rule's interval; INCONCLUSIVE passes with a
warning, its reference logged without thresholds where the median lies
outside the band (``./harness nightly`` then exits 3); DEFERRED, a sample
(``%sample=N``) that is not the session's last of its variant
(``last_sample``), passes, and the last sample judges the median of all of
them (``-S judge_samples_together=false``: every sample alone).  The perflog
field ``judgement`` says which.
"""

from __future__ import annotations

import os

import reframe as rfm
import reframe.utility.typecheck as typ
from harnesscore.bands import (
    DEFERRED,
    FAIL,
    PASS,
    Judgement,
    deferred,
    judge_band,
    overall,
    soft_zone,
)
from harnesscore.quiet import QUIET_FILE, enabled, epilogue, prologue, read_quiet, summarise
from harnesscore.references import split_name
from harnesscore.stats import Interval
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import PerformanceError

from .compat import reads_output
from .placement import first_round, samples_per_run


class QuietMachine(rfm.RegressionTestPlugin):
    """Snapshots of the machine before and after the run, into the perflog
    fields load_before, load_after, steal_pct, busy_procs, busy, busy_detail
    (the test must also derive from ``PerflogFields``)."""

    #: the snapshot file, in the stage directory
    quiet_file = variable(str, value=QUIET_FILE, loggable=False)

    @run_before('run', always_last=True)
    def wrap_in_quiet_snapshots(self):
        if not enabled():
            return
        path = os.path.join(self.stagedir, self.quiet_file)
        # after the node lock (prerun) and right after the launcher (postrun,
        # keeping its exit status for the lines after it)
        self.prerun_cmds = [*self.prerun_cmds, prologue(path)]
        self.postrun_cmds = [epilogue(path), *self.postrun_cmds]

    @reads_output('sanity')
    def read_quietness(self):
        fields = (read_quiet(os.path.join(self.stagedir, self.quiet_file)) if enabled()
                  else summarise(None))
        for name, value in fields.items():
            setattr(self, name, value)


#: This ReFrame session's values of every sampled variant, in the order its
#: samples ran, each with its run's busy flag: ReFrame runs every test's hooks
#: in its one Python process, so a variant's last sample finds the earlier ones
#: here.  Key: (class, partition, environment, variant, variable).
#: Value: sample -> (value, busy): one value per sample, a retry's
#: (``--max-retries``) in place of its failed attempt's.
_SESSION_VALUES: dict[tuple[str, str, str, str, str], dict[int, tuple[float, bool]]] = {}


def last_sample(cls) -> int:
    """The session's last sample of `cls`'s variants, the one that judges
    them: ``HARNESS_REPEAT`` - 1, or the largest ``sample`` the test's
    parameter space holds where that is smaller (``-P sample=0`` leaves the
    later samples out of the session, so sample 0 judges)."""
    values = cls.param_space['sample'] if 'sample' in cls.param_space else ()
    last = samples_per_run() - 1
    return min(last, max(map(int, values))) if values else last


class BandRule(rfm.RegressionTestPlugin):
    """Every performance variable with a bounded reference is judged by the one
    rule (``harnesscore.bands``) before ReFrame checks it (see the module's
    docstring for the mapping onto ReFrame's pass and fail)."""

    #: A FAIL on a busy run is reported INCONCLUSIVE (harnesscore.bands);
    #: ``-S withhold_when_busy=false`` lets the rule fail it all the same.
    withhold_when_busy = variable(typ.Bool, value=True, loggable=False)
    #: A sampled variant (``%sample=N``) is judged on all its samples of the
    #: session at once, by its last sample; false: every sample alone.
    judge_samples_together = variable(typ.Bool, value=True, loggable=False)

    def band_samples(self) -> dict[str, list[float] | Interval]:
        """The values behind each judged variable (e.g. per-round ratios), or
        its interval from ``harnesscore.stats``; a variable not listed is
        judged from its single value.  The variable's own value must be the
        median of its samples (the interval's median)."""
        return {}

    def band_busy(self) -> bool:
        return self.withhold_when_busy and getattr(self, 'busy', '') == 'true'

    def sample_pool(self) -> tuple[tuple[str, str, str, str], bool] | None:
        """(where this variant's session values are kept, whether this is its
        last sample), or None for a test judged alone (no ``sample``)."""
        sample = getattr(self, 'sample', None)
        if sample is None or not self.judge_samples_together:
            return None
        cls, variant = split_name(self.display_name)
        where = (cls, self.current_partition.fullname, self.current_environ.name, variant)
        # Rounds after the planned ones (HARNESS_FIRST_ROUND > 0: the sequential
        # rounds of the verdicts) only defer: the planned rounds judged the variant.
        return where, first_round() == 0 and int(sample) >= last_sample(type(self))

    def judge_pooled(self, var: str, value: float, ref: tuple, busy: bool,
                     soft: float, pool: tuple[tuple[str, str, str, str], bool]
                     ) -> Judgement | None:
        """A sampled variant's judgement of `var`: this sample's `value` joins
        the session's; the last sample judges all of them, the others defer."""
        where, last = pool
        values = _SESSION_VALUES.setdefault((*where, var), {})
        values[int(self.sample)] = (value, busy)
        if not last:
            return deferred(var, float(ref[0]), ref[1], ref[2])
        pooled = list(values.values())
        return judge_band(var, [v for v, _busy in pooled], float(ref[0]), ref[1], ref[2],
                          any(b for _value, b in pooled), soft, predicted=True)

    @reads_output('performance', always_last=True)
    def apply_band_rule(self):
        part = self.current_partition.fullname
        resolved = self._resolve_reference()
        samples = self.band_samples()
        busy = self.band_busy()
        soft = soft_zone()
        pool = self.sample_pool()
        refs: dict[str, tuple] = {}
        judged: list[tuple[Judgement, float]] = []
        for var, fn in self.perf_variables.items():
            try:
                ref = tuple(resolved[f'{part}:{var}'])
            except (KeyError, TypeError):
                continue            # no reference, or an xfail one: ReFrame's business
            refs[var] = ref
            if len(ref) < 3 or (ref[1] is None and ref[2] is None):
                continue
            try:
                value = float(fn.evaluate())
            except Exception:       # ReFrame reports the variable itself
                continue
            own = samples.get(var)
            if own is None and pool is not None:
                judgement = self.judge_pooled(var, value, ref, busy, soft, pool)
            else:
                judgement = judge_band(var, own or [value], float(ref[0]), ref[1], ref[2],
                                       busy, soft)
            if judgement is not None:
                judged.append((judgement, value))
        judgements = [judgement for judgement, _value in judged]
        self.judgement = overall(judgements)
        self.judgement_detail = '; '.join(
            judgement.describe() for judgement in judgements)[:1000]
        neutral = False
        self._pooled_failures = []
        for judgement, value in judged:
            if judgement.state not in (PASS, DEFERRED):
                self.logger.warning(f'{self.display_name}: {judgement.describe()}')
            if judgement.state != FAIL and not judgement.inside(value):
                # not failed, but outside the band: its reference loses its
                # thresholds, so that ReFrame does not fail it
                ref = refs[judgement.var]
                refs[judgement.var] = (ref[0], None, None, *ref[3:])
                neutral = True
            elif judgement.state == FAIL and judgement.inside(value):
                # the samples' median fails, this last sample's own value not
                self._pooled_failures.append(judgement.describe())
        if neutral:
            self.reference = {'*': refs}

    @run_after('performance')
    def fail_pooled_judgement(self):
        # After ReFrame's own check, so the perflog line keeps every value.
        failures = getattr(self, '_pooled_failures', [])
        if failures:
            raise PerformanceError(f'failed to meet reference (the median of the session\'s '
                                   f'samples): {"; ".join(failures)}')
