"""ReFrame checks: the ring kernel's point-to-point sweeps (``RingPingpongCheck``,
``RingBwCheck``: latency and bandwidth per size on 2 ranks, in every session)
and its accuracy against the OSU Micro-Benchmarks (``RingOsuAccuracy``: ring
and OSU alternating in rounds in one job, the medians of the per-round ratios
decided by the one rule, harnesscore.bands; it needs OSU, see checks/osu.py).
docs/pages/checks.md gives their variables and targets.
"""

from __future__ import annotations

import collections
import math
import shlex
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from harnesscore import plan as planning
from harnesscore.osu_output import given_path, osu_binary, osu_spec
from harnesscore.rounds import (
    ROUND,
    RoundsError,
    bw_sizes,
    ring_osu_bands,
    ring_osu_ratios,
    ring_osu_rounds,
)
from harnesscore.units import MIB, message_sizes, ring_size
from harnesslib.base import (
    RING_ITERS_SCALE,
    AlternatingRounds,
    AtLeast,
    KernelCheck,
    OsuRuns,
    bad_value,
    sanity_errors,
    sweep_variables,
)
from harnesslib.compat import reads_output
from harnesslib.launch import shell_words
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable


def checked_sizes(test: KernelCheck, var: str, sizes: str) -> list[int]:
    """The ring's --sizes `sizes`; a bad value is `test`'s error on `var` (setup stage)."""
    try:
        return message_sizes(sizes)
    except ValueError as err:
        raise bad_value(test, var, err) from None


class RingSweep(KernelCheck):
    """One point-to-point sweep of the ring kernel on 2 ranks."""

    pattern = ''
    #: the variables per size (``sweep_variables``) and the headline's kind
    kinds: tuple[str, ...] = ()
    headline_kind = ''
    #: Message sizes (the kernel's --sizes: MIN:MAX doubles from MIN, or a
    #: comma list; a bad value fails the test at setup, ``sweep``).
    sizes = variable(str, value='1:4M')
    iters_scale = variable(float, value=1.0)
    reps = variable(int, value=3)
    at_least = {'reps': AtLeast.kernel_option('--reps', planning.RING_MAX_REPS),
                'iters_scale': RING_ITERS_SCALE}

    @run_after('init')
    def set_layout(self):
        self.kernel = f'ring-{self.pattern}'
        self.mode, self.threads, self.decomp = 'mpi', 1, 1
        try:
            # The range's MAX (as before), else the list's largest size.
            _lo, sep, hi = self.sizes.partition(':')
            self.size = str(max(message_sizes(self.sizes)) if not sep else ring_size(hi))
        except ValueError:
            self.size = self.sizes     # the setup stage fails the test (``sweep``)
        self.descr = f'ring --pattern {self.pattern} --sizes {self.sizes} on 2 ranks'

    @run_after('setup')
    def place(self):
        self.sweep()
        self.place_ranks()
        self.executable = shlex.quote(self.build.executable_path('ring'))
        self.build_spec = self.build.build_spec
        self.executable_opts = shell_words(['--pattern', self.pattern, '--mode', 'mpi',
                                            '--sizes', self.sizes, '--reps', str(self.reps),
                                            '--iters-scale', str(self.iters_scale)])

    @sanity_function
    def validate(self):
        sn.evaluate(super().validate())
        sizes = collections.Counter(int(r['size']) for r in self.results())
        pattern = {str(r.get('pattern')) for r in self.results()} - {self.pattern}
        sn.evaluate(sn.assert_false(
            pattern, msg=f'ring: a RESULT line of pattern {sorted(pattern)} in a '
                         f'{self.pattern} sweep'))
        # every size of the sweep once (a missing one failed only as a performance
        # value of None)
        missing = sorted(set(message_sizes(self.sizes)) - sizes.keys())
        twice = sorted(s for s, n in sizes.items() if n > 1)
        sn.evaluate(sn.assert_false(
            missing or twice, msg=f'ring: no RESULT for size(s) {missing} of --sizes '
                                  f'{self.sizes}' if missing else
                                  f'ring: more than one RESULT for size(s) {twice}'))
        return True

    def by_size(self, key: str) -> dict[int, float]:
        return {int(r['size']): float(r[key]) for r in self.results()}

    @run_after('setup')
    def add_sweep_variables(self):
        keys = {'lat': 'latency_us', 'bw': 'bandwidth_MBps'}
        self.perf_variables.update(sweep_variables(
            self.sweep(), lambda kind, s: self.by_size(keys[kind])[s], self.kinds,
            self.headline_kind))

    def sweep(self) -> list[int]:
        return checked_sizes(self, 'sizes', self.sizes)


@rfm.simple_test
class RingPingpongCheck(RingSweep):
    """Half round trip of blocking ping-pongs per size (Xu & Hwang)."""

    pattern = 'pingpong'
    kinds, headline_kind = ('lat', 'bw'), 'lat'
    #: OSU's counts (10000 round trips up to 8 KiB, 1000 above) scaled down:
    #: the sweep reports every size, the accuracy check times OSU's full counts.
    iters_scale = 0.05


@rfm.simple_test
class RingBwCheck(RingSweep):
    """Streaming bandwidth with osu_bw's method (windows of 64 Isend + ack)."""

    pattern = 'bw'
    kinds, headline_kind = ('bw',), 'bw'
    iters_scale = 0.25


# ---- accuracy against OSU -------------------------------------------------------

@rfm.simple_test
class RingOsuAccuracy(KernelCheck, AlternatingRounds, OsuRuns):
    """ring against osu_latency / osu_bw, alternating in one job.

    Each round runs ring pingpong at 8 B, osu_latency at 8 B, ring bw and
    osu_bw at 1 MiB .. `bw_max`, on the same 2 ranks, launcher, stack and
    transport.  Each round gives one ratio ring/OSU per variable; the figure
    is their median and the decision the one rule's (harnesscore.bands):
    latency within 10% (or 0.05 us, whichever is larger), bandwidth within 5%.
    """

    #: The accuracy targets are the references, on every system.
    system_references = False

    kernel = 'ring-vs-osu'
    tags = {'osu', 'accuracy', 'benchmark'}
    time_limit = '10m'
    rounds, max_rounds, round_budget_s = 8, 16, 300
    #: Largest bandwidth size compared (bytes; from 1 MiB, doubling).
    bw_max = variable(int, value=4 * MIB)
    #: Relative tolerances of the targets, and the latency floor (us).
    lat_tol = variable(float, value=0.10)
    lat_floor_us = variable(float, value=0.05)
    bw_tol = variable(float, value=0.05)
    # NaN made every band [nan, nan]: each ratio INCONCLUSIVE, never judged (a
    # ring 60x off OSU passed); a negative or NaN floor was passed over (max())
    at_least = {'bw_max': AtLeast(MIB, f'{MIB} (1 MiB) or more: the bandwidths are '
                                       'compared from 1 MiB'),
                'lat_tol': AtLeast(0, 'a fraction in (0, 1]', above=True, high=1),
                'bw_tol': AtLeast(0, 'a fraction in (0, 1]', above=True, high=1),
                'lat_floor_us': AtLeast(0, 'microseconds, 0 or more', high=math.inf,
                                        below=True)}

    @run_after('init')
    def set_layout(self):
        self.mode, self.threads, self.decomp = 'mpi', 1, 1
        self.size = str(self.bw_max)
        self.descr = 'ring pingpong/bw against osu_latency/osu_bw, alternating'

    @run_after('setup')
    def check_bw_max(self):
        # the ring's --sizes 1M:bw_max: a power of two up to 16 MiB (else the job
        # script ended in its first round, after the latency runs, naming nothing)
        checked_sizes(self, 'bw_max', f'{MIB}:{self.bw_max}')

    def bw_sizes(self) -> list[int]:
        return bw_sizes(self.bw_max)

    @run_after('setup')
    def place(self):
        env = self.current_environ
        self.osu_lat, why = osu_binary(env, 'osu_latency')
        self.skip_if(self.osu_lat is None, why)
        self.osu_bw, why = osu_binary(env, 'osu_bw')
        self.skip_if(self.osu_bw is None, why)
        self.place_ranks()
        self.build_spec = f'{self.build.build_spec}; {osu_spec(given_path(self.osu_prefix()))}'
        self.executable = 'bash'
        self.executable_opts = ['accuracy.sh']
        # what OSU links, checked as the OSU checks do (an OSU of another stack
        # measured that stack's library against the ring's)
        self.prerun_cmds = [*self.prerun_cmds, *self.osu_library_probes(
            {'osu_latency.ldd': self.osu_lat, 'osu_bw.ldd': self.osu_bw})]

    @run_before('run')
    def write_script(self):
        # The script launches every run itself, with the partition's launcher.
        launch = self.launch(self.num_tasks)
        self.job.launcher = getlauncher('local')()
        ring = shlex.quote(self.build.executable_path('ring'))
        osu_lat, osu_bw = shlex.quote(self.osu_lat), shlex.quote(self.osu_bw)
        lo, hi = MIB, self.bw_max
        # OSU has no watchdog for a hung MPI_Finalize (MPICH over TCP): a run
        # that `timeout` ends is noted; its table decides whether it counts.
        osu = f'timeout {" ".join(self.timeout_options())} {launch}'
        body = [
            # One timed loop per run (--reps 1), as OSU: the same estimator.
            f'{launch} {ring} --pattern pingpong --sizes 8 --reps 1 --iters 10000 --skip 1000'
            ' > ring_lat_$r.out',
            f'{osu} {osu_lat} -m 8:8 -i 10000 -x 1000 > osu_lat_$r.out'
            + self.note_status('osu_latency round $r'),
            f'{launch} {ring} --pattern bw --sizes {lo}:{hi} --reps 1 --iters 20 --skip 2'
            ' > ring_bw_$r.out',
            f'{osu} {osu_bw} -m {lo}:{hi} -i 20 -x 2 > osu_bw_$r.out'
            + self.note_status('osu_bw round $r'),
        ]
        question = ['ring', '.', ROUND, str(int(hi)), str(float(self.lat_tol)),
                    str(float(self.lat_floor_us)), str(float(self.bw_tol))]
        self.write_stage_script('accuracy.sh', [
            'set -e', *self.round_loop('r', body, question), 'echo "accuracy: $r rounds done"'])

    # -- results -------------------------------------------------------------------

    def rounds_data(self) -> list[dict]:
        """Per round: ring and OSU latency at 8 B, bandwidths per size."""
        if not hasattr(self, '_rounds'):
            with sanity_errors(RoundsError):
                self._rounds = ring_osu_rounds(self.stagedir, self.rounds_done(),
                                               self.bw_sizes())
        return self._rounds

    @sanity_function
    def validate(self):
        sn.evaluate(sn.assert_eq(self.exit_status(), 0,
                                 msg='the accuracy script failed (status {0})'))
        data = self.rounds_data()
        # The record names the OSU version that printed the tables.
        osu = osu_spec(given_path(self.osu_prefix()), str(data[0]['osu_version']))
        self.build_spec = f'{self.build.build_spec}; {osu}'
        self.check_library(str(data[0]['lib']))
        for name in ('osu_latency', 'osu_bw'):
            self.check_osu_library(name, f'{name}.ldd')
        self.verified = 'true'
        # two ranks on one core in any round's ring launch, as KernelCheck's runs
        self.check_oversubscription(*(res for d in data for res in d['ring_results']))
        # OSU runs that did not exit 0: only `timeout` after a full table.
        noted = self.noted_runs('OSU')
        self.finalize_hung = str(bool(noted) or bool(sn.evaluate(sn.findall(
            r'MPI_Finalize did not return', self.stderr)))).lower()
        return True

    # The figures are medians over rounds (each round ran both tools side by
    # side); the ratios are medians of the per-round ratios, judged by the rule.
    def band_samples(self) -> dict[str, list[float]]:
        out = ring_osu_ratios(self.rounds_data(), self.bw_sizes())
        out['bandwidth_ratio_1MiB'] = out[f'bandwidth_ratio_{MIB}']
        return out

    def median_lat(self, tool: str) -> float:
        return statistics.median(d[f'{tool}_lat'] for d in self.rounds_data())

    def median_bw(self, tool: str, size: int) -> float:
        return statistics.median(d[f'{tool}_bw'][size] for d in self.rounds_data())

    @run_after('setup')
    def set_perf_variables(self):
        # Declared before the run (harnesslib.base.PerfSchema), read lazily:
        # each ratio is the median of its per-round ratios.
        names = ['latency_ratio_8B']
        for s in self.bw_sizes():
            names += [f'bandwidth_ratio_{s}'] + (['bandwidth_ratio_1MiB'] if s == MIB else [])
        pv = {name: sn.make_performance_function(
            lambda name=name: statistics.median(self.band_samples()[name]), 'x')
            for name in names}
        for tool in ('ring', 'osu'):
            pv[f'{tool}_latency_8B'] = sn.make_performance_function(
                lambda tool=tool: self.median_lat(tool), 'us')
        pv['rounds'] = sn.make_performance_function(lambda: len(self.rounds_data()), 'rounds')
        for s in self.bw_sizes():
            for tool in ('ring', 'osu'):
                pv[f'{tool}_bw_{s}'] = sn.make_performance_function(
                    lambda tool=tool, s=s: self.median_bw(tool, s), 'MB/s')
        self.perf_variables = pv

    @reads_output('performance')
    def set_tolerances(self):
        bands = ring_osu_bands(self.rounds_data(), self.bw_sizes(), self.lat_tol,
                               self.lat_floor_us, self.bw_tol)
        ref = {name: (*band, 'x') for name, band in bands.items()}
        ref['bandwidth_ratio_1MiB'] = ref[f'bandwidth_ratio_{MIB}']
        # The figures behind the ratios are shown, not judged.
        ref.update({name: (0, None, None, fn.unit) for name, fn in self.perf_variables.items()
                    if name not in ref})
        self.reference = {'*': ref}
