"""ReFrame checks: the OSU Micro-Benchmarks (5.x, 6.x, 7.x) for every MPI stack and
interconnect, the yardstick the stacks are held to (docs/pages/checks.md, "OSU
Micro-Benchmarks": the checks, their variables and their sanity).

OSU comes from the environment's extra ``osu_prefix`` (config/settings.py
fills it from ``HARNESS_OSU_PREFIX``; a site configuration or the Spack setup
sets it); without it every check skips saying how to provide OSU, and nothing
is downloaded.  One class per benchmark, so that every line of a perflog file
carries the same variables (ReFrame checks a file's header only when it
opens it).  ``OsuBase`` is a sibling of the kernels' ``KernelCheck`` on
``RunBase``; it builds nothing.
"""

from __future__ import annotations

import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from harnesscore.osu_output import (
    OsuParseError,
    OsuTable,
    env_family,
    error_lines,
    expected_sizes,
    given_path,
    missing_sizes,
    osu_binary,
    osu_spec,
    parse_osu,
    rejected_options,
)
from harnesscore.units import MIB
from harnesslib.base import (
    TIMED_OUT,
    AtLeast,
    OsuRuns,
    RunBase,
    sanity_errors,
    sweep_variables,
)
from harnesslib.launch import LIBRARY_PREFIX, shell_words
from harnesslib.placement import divisors, system_layouts
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

#: Smallest size of each benchmark's sweep (allreduce works on 4-byte floats;
#: OSU 7.x prints no 0-byte latency, so no version is asked for one).
MIN_SIZE = {'osu_latency': 1, 'osu_bw': 1, 'osu_bibw': 1, 'osu_mbw_mr': 1,
            'osu_allreduce': 4, 'osu_bcast': 1}
#: OSU's -i and -x per benchmark unless set with -S iters=/warmup=: latency
#: moves few bytes per iteration, bandwidth 64-message windows.
DEFAULT_ITERS = {'osu_latency': (200, 20), 'osu_bw': (10, 2), 'osu_bibw': (10, 2),
                 'osu_mbw_mr': (10, 2), 'osu_allreduce': (50, 5), 'osu_bcast': (50, 5)}


def _ranks_per_node() -> list[int]:
    """Ranks per node that divide some partition's core count (1, 2, ...)."""
    return sorted({ranks for ranks, _ in system_layouts()})


class OsuBase(RunBase, OsuRuns):
    """One OSU benchmark run; subclasses place the ranks and name the variables."""

    tags = {'osu'}
    #: Largest message size of the sweep (bytes); OSU's -m MIN:MAX.
    max_size = variable(int, value=4 * MIB)
    #: OSU's -i (timed iterations; small and large sizes alike) and -x
    #: (warm-up); 0: the benchmark's default in DEFAULT_ITERS.
    iters = variable(int, value=0)
    warmup = variable(int, value=0)
    at_least = {var: AtLeast(0, "1 or more (0: the benchmark's default)")
                for var in ('iters', 'warmup')}

    #: Set by subclasses: the benchmark and its ranks.
    benchmark_name = ''

    # -- placement ---------------------------------------------------------------

    @run_after('init')
    def set_layout(self):
        self.kernel = self.benchmark_name
        self.mode = 'mpi'
        self.threads = 1
        self.size = str(self.max_size)
        self.descr = f'{self.benchmark_name} (OSU Micro-Benchmarks)'

    @run_after('setup')
    def check_iterations(self):
        lo = MIN_SIZE[self.benchmark_name]
        AtLeast(lo, f"{lo} or more (the smallest size of {self.benchmark_name}'s sweep)"
                ).check(self, 'max_size')

    def osu_options(self) -> list[str]:
        lo = MIN_SIZE[self.benchmark_name]
        iters, warmup = DEFAULT_ITERS[self.benchmark_name]
        return ['-m', f'{lo}:{self.max_size}', '-i', str(self.iters or iters),
                '-x', str(self.warmup or warmup)]

    def sweep(self) -> list[int]:
        return expected_sizes(MIN_SIZE[self.benchmark_name], self.max_size)

    @run_after('setup')
    def place(self):
        env = self.current_environ
        path, why = osu_binary(env, self.benchmark_name)
        self.skip_if(path is None, why)
        self.place_ranks()
        self.executable = shlex.quote(path)
        self.executable_opts = shell_words(self.osu_options())
        self.build_spec = osu_spec(given_path(self.osu_prefix()))
        self.prerun_cmds = self.osu_library_probes({'osu.ldd': path})

    @run_before('run')
    def end_hung_runs(self):
        # `timeout` ends a run stuck in MPI_Finalize (see run_timeout).
        self.job.launcher.modifier = 'timeout'
        self.job.launcher.modifier_options = self.timeout_options()

    # -- results -------------------------------------------------------------------

    def check_options_accepted(self, text: str, what: str) -> None:
        """A sanity error where the run printed OSU's usage instead of a table:
        this OSU does not know the options (5.0-5.3 have no ``-m``)."""
        why = rejected_options(text, what, self.osu_options())
        if why:
            raise sn.SanityError(why)

    def table(self) -> OsuTable:
        if not hasattr(self, '_table'):
            with open(os.path.join(self.stagedir, str(sn.evaluate(self.stdout)))) as fp:
                text = fp.read()
            self.check_options_accepted(
                text + self.stage_text(str(sn.evaluate(self.stderr))), self.benchmark_name)
            with sanity_errors(OsuParseError):
                self._table = parse_osu(text, f'{self.benchmark_name} output')
        return self._table

    def printed_tables(self) -> dict[str, OsuTable]:
        """Every table the run printed, by the name its sanity messages give it."""
        return {self.benchmark_name: self.table()}

    @sanity_function
    def validate(self):
        stack = self.current_environ.extras.get('stack', self.current_environ.name)
        family = env_family(self.current_environ)
        # The library first: a benchmark linked to another stack explains the rest.
        osu_libs = self.check_osu_library(self.benchmark_name, 'osu.ldd')
        self.mpi_library = f'{LIBRARY_PREFIX.get(family, stack)} ({sorted(osu_libs)[0]})'
        table = self.table()
        # The record names the OSU version that printed the table.
        self.build_spec = osu_spec(given_path(self.osu_prefix()), table.version)
        for name, printed in self.printed_tables().items():
            sn.evaluate(sn.assert_false(
                printed.failed, msg=f'{name}: OSU data validation failed at '
                                    f'size(s) {list(printed.failed)}'))
        missing = missing_sizes(table, self.sweep())
        sn.evaluate(sn.assert_false(
            missing, msg=f'{self.benchmark_name} printed no row for size(s) {missing} '
                         f'(the run stopped early)'))
        self.verified = 'true'
        errors = error_lines(self.job_stdout())
        errors += error_lines(self.stage_text(str(sn.evaluate(self.stderr))))
        sn.evaluate(sn.assert_false(
            errors, msg=f'{self.benchmark_name} printed an error: {errors[:3]}'))
        code = self.exit_status()
        # Whole table printed, then ended by `timeout`: MPI_Finalize hung.
        self.finalize_hung = str(code in TIMED_OUT).lower()
        sn.evaluate(sn.assert_true(
            code == 0 or code in TIMED_OUT,
            msg=f'{self.benchmark_name} exited with status {code}'))
        self.flag_oversubscription()
        return True

    def value(self, size: int) -> float:
        return self.table().rows[size][0]

    @run_after('setup')
    def set_perf_variables(self):
        self.perf_variables = {}


# One check class per benchmark: ReFrame writes one perflog file per class and
# checks its header only when it opens the file, so every line of a file must
# carry the same performance variables.

class OsuPt2ptBase(OsuBase):
    """2 ranks (``RunBase.placement``); lat_<bytes> (us) for latency, bw_<bytes>
    (MB/s) for bandwidth."""

    @run_after('setup')
    def set_perf_variables(self):
        kind = 'lat' if self.benchmark_name == 'osu_latency' else 'bw'
        self.perf_variables = sweep_variables(self.sweep(), lambda _kind, s: self.value(s),
                                              (kind,), kind)


@rfm.simple_test
class OsuLatencyCheck(OsuPt2ptBase):
    """osu_latency: one-way latency (half the round trip) per size."""

    benchmark_name = 'osu_latency'


@rfm.simple_test
class OsuBwCheck(OsuPt2ptBase):
    """osu_bw: streaming bandwidth, windows of 64 messages and an ack."""

    benchmark_name = 'osu_bw'


@rfm.simple_test
class OsuBibwCheck(OsuPt2ptBase):
    """osu_bibw: both ranks stream windows at once; total bandwidth."""

    benchmark_name = 'osu_bibw'


class OsuCollectiveBase(OsuBase):
    """A collective at every rank count that fits: ranks per node x nodes,
    at least 2 (``lat_<bytes>``: OSU's average latency, us)."""

    ranks_per_node = parameter(_ranks_per_node(), type=int)

    def placement(self, cores: int, nodes: int) -> tuple[int, int, str]:
        if self.ranks_per_node > cores:
            return 0, 0, (f'{self.ranks_per_node} ranks per node exceed the {cores} cores '
                          f'of {self.current_partition.fullname}')
        if self.ranks_per_node * nodes < 2:
            return 0, 0, 'a collective needs at least 2 ranks'
        return self.ranks_per_node, nodes, ''

    @run_after('setup')
    def set_perf_variables(self):
        self.perf_variables = sweep_variables(self.sweep(), lambda _kind, s: self.value(s),
                                              ('lat',))


@rfm.simple_test
class OsuAllreduceCheck(OsuCollectiveBase):
    benchmark_name = 'osu_allreduce'


@rfm.simple_test
class OsuBcastCheck(OsuCollectiveBase):
    benchmark_name = 'osu_bcast'


@rfm.simple_test
class OsuMbwMrCheck(OsuBase):
    """osu_mbw_mr with k = 1, 2, ... pairs per node, every k that fits, in one
    job: the saturation curve of the node, ``bw_k<k>_<bytes>`` (MB/s, the
    aggregate of the k pairs).  With several nodes the k senders sit on the
    first node and their k receivers on the second (each launch places k
    ranks per node: ``launch_line``'s `per_node`); on one node the 2k ranks
    share it.  `ranks` is the largest ranks-per-node count of the sweep.
    One job for all k keeps the perflog's variables the same on every line
    of a partition."""

    benchmark_name = 'osu_mbw_mr'

    def pairs(self, cores: int, nodes: int) -> list[int]:
        most = cores if nodes >= 2 else cores // 2
        return [k for k in divisors(cores) if k <= most]

    def placement(self, cores: int, nodes: int) -> tuple[int, int, str]:
        self.ks = self.pairs(cores, nodes)
        if not self.ks:
            return 0, 0, (f'a pair needs 2 cores on one node, '
                          f'{self.current_partition.fullname} has {cores}')
        if nodes >= 2:
            return self.ks[-1], 2, ''
        return 2 * self.ks[-1], 1, ''

    @run_before('run')
    def end_hung_runs(self):
        # The script launches one run per k with the partition's launcher
        # (the environment's, one core per rank), each ended by `timeout`.
        # Across nodes each run places k ranks on each node, explicitly: a
        # stack's own launcher (Hydra, Open MPI's mpirun) would fill the
        # first node's slots first and put most pairs on one node.  The
        # ranks go in order, so osu_mbw_mr's pairs (rank i and i + k) span
        # the two nodes.
        lines = ['set -o pipefail']
        for k in self.ks:
            per_node = k if self.nodes >= 2 else 2 * k
            cmd = self.launch(per_node * self.nodes, per_node=k if self.nodes >= 2 else 0)
            lines.append(f'timeout {" ".join(self.timeout_options())} {cmd} {self.executable} '
                         f'{" ".join(self.executable_opts)} > mbw_k{k}.out'
                         + self.note_status(f'k={k}'))
        self.write_stage_script('mbw_mr.sh', lines)
        self.executable = 'bash'
        self.executable_opts = ['mbw_mr.sh']
        self.job.launcher = getlauncher('local')()

    def table_of(self, k: int) -> OsuTable:
        with sanity_errors(OsuParseError):
            return parse_osu(self.stage_text(f'mbw_k{k}.out'), f'osu_mbw_mr with {k} pair(s)')

    def table(self) -> OsuTable:
        return self.table_of(self.ks[-1])

    def printed_tables(self) -> dict[str, OsuTable]:
        # every k's data validation, not only the largest k's (``table``)
        return {f'osu_mbw_mr with {k} pair(s)': self.table_of(k) for k in self.ks}

    @sanity_function
    def validate(self):
        # each run's stdout is its file (the job's stdout, which
        # OsuBase.validate scans, has none of it; its stderr has theirs)
        texts = {k: self.stage_text(f'mbw_k{k}.out') for k in self.ks}
        for k in self.ks:
            self.check_options_accepted(texts[k], f'osu_mbw_mr with {k} pair(s)')
        noted = self.noted_runs('osu_mbw_mr')
        for k in self.ks:
            pairs = [o for o in self.table_of(k).options if 'pairs:' in o]
            sn.evaluate(sn.assert_true(
                pairs and f'pairs: {k} ]' in pairs[0],
                msg=f'osu_mbw_mr run for {k} pair(s) reports {pairs}'))
            missing = missing_sizes(self.table_of(k), self.sweep())
            sn.evaluate(sn.assert_false(
                missing, msg=f'osu_mbw_mr with {k} pair(s) printed no row for '
                             f'size(s) {missing}'))
            errors = error_lines(texts[k])
            sn.evaluate(sn.assert_false(
                errors, msg=f'osu_mbw_mr with {k} pair(s) printed an error: {errors[:3]}'))
        sn.evaluate(OsuBase.validate(self))
        self.finalize_hung = str(bool(noted)).lower()
        return True

    @run_after('setup')
    def set_perf_variables(self):
        self.perf_variables = {
            f'bw_k{k}_{s}': sn.make_performance_function(
                lambda k=k, s=s: self.table_of(k).rows[s][0], 'MB/s')
            for k in self.ks for s in self.sweep()}
