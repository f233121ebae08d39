"""The ReFrame side of noisy machines: ``QuietMachine`` (every performance run
records how quiet the machine was, see ``harnesslib.quiet``) and ``BandRule``
(every fixed-band reference is decided by the one rule, see
``harnesslib.bands``).

How the three states map onto ReFrame (see the README, "Noisy machines"):

* PASS: the test passes; perflog ``judgement=pass``.
* FAIL: the test fails in its performance stage with ReFrame's own "failed to
  meet reference" message (the median lies outside the band whenever the
  interval does), preceded by a warning that gives the rule's interval;
  perflog ``judgement=fail``.
* INCONCLUSIVE: the test passes in ReFrame (its run was valid: sanity passed,
  and the data neither pass nor fail the band), with a warning
  ``INCONCLUSIVE ...`` in ReFrame's output and perflog
  ``judgement=inconclusive``; where the median lies outside the band, this
  run's reference for that variable is logged without thresholds (the band is
  in ``judgement_detail``).  ``./harness nightly`` then exits with status 3
  (config/nightly.py), so a nightly with inconclusive checks never passes
  silently, and a retry (``--max-retries``) never turns noise into a pass.
"""

from __future__ import annotations

import os

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable

from .bands import Judgement, judge_band, overall
from .quiet import QUIET_FILE, enabled, epilogue, prologue, read_quiet, summarise
from .stats import Interval


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

    @run_before('sanity')
    def read_quietness(self):
        if self.is_dry_run():
            return
        fields = (read_quiet(os.path.join(self.stagedir, self.quiet_file)) if enabled()
                  else summarise(None))
        for name, value in fields.items():
            setattr(self, name, value)


class BandRule(rfm.RegressionTestPlugin):
    """Every performance variable with a bounded reference is judged by the one
    rule (``harnesslib.bands``) before ReFrame checks it (see the module's
    docstring for the mapping onto ReFrame's pass and fail)."""

    #: A FAIL on a busy run is reported INCONCLUSIVE (harnesslib.bands);
    #: ``-S withhold_when_busy=false`` lets the rule fail it all the same.
    withhold_when_busy = variable(typ.Bool, value=True, loggable=False)

    def band_samples(self) -> dict[str, list[float] | Interval]:
        """The values behind each judged variable (e.g. per-round ratios), or
        its interval from ``harnesslib.stats``; a variable not listed is
        judged from its single value.  The variable's own value must be the
        median of its samples (the interval's median)."""
        return {}

    def band_busy(self) -> bool:
        return self.withhold_when_busy and getattr(self, 'busy', '') == 'true'

    @run_before('performance', always_last=True)
    def apply_band_rule(self):
        if self.is_dry_run():
            return
        part = self.current_partition.fullname
        resolved = self._resolve_reference()
        samples = self.band_samples()
        busy = self.band_busy()
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
            j = judge_band(var, samples.get(var) or [value], float(ref[0]), ref[1], ref[2],
                           busy)
            if j is not None:
                judged.append((j, value))
        self.judgement = overall([j for j, _ in judged])
        self.judgement_detail = '; '.join(j.describe() for j, _ in judged)[:1000]
        neutral = False
        for j, value in judged:
            if j.state != 'PASS':
                self.logger.warning(f'{self.display_name}: {j.describe()}')
            if j.state != 'FAIL' and not j.inside(value):
                ref = refs[j.var]
                refs[j.var] = (ref[0], None, None, *ref[3:])
                neutral = True
        if neutral:
            self.reference = {'*': refs}
