"""The base of every run: ``RunBase`` (references from the system's file, the
perflog fields, the partition's launcher with the run's binding, the node
lock); its children ``KernelCheck`` (one kernel run at one layout) here and
the OSU checks' base in checks/osu.py."""

from __future__ import annotations

import contextlib
import datetime
import functools
import math
import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from typing import ClassVar, NamedTuple

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from harnesscore import plan as planning
from harnesscore.host import host_cores
from harnesscore.kernel_output import MalformedResult, result_lines
from harnesscore.osu_output import (
    env_family,
    libraries_agree,
    mpi_libraries,
    stack_libraries,
    wrapper_link_check,
)
from harnesscore.paths import REFERENCES_DIR
from harnesscore.references import references_file, split_name
from harnesscore.rounds import ROUNDS_FILE, round_loop
from harnesscore.schema import check_fields, field_text
from harnesscore.units import MIB
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import PerformanceError

from .build import (
    COMPILER_FILE,
    KernelBuild,
    compiler_from_probe,
    compiler_probe,
    source_version,
)
from .compat import declare_perf_value, reads_output
from .launch import (
    EXIT_STATUS_TAG,
    LIBRARY_PREFIX,
    USER_FILES_VAR,
    assigned_value,
    binding_env,
    hold_node_lock,
    launch_line,
    launcher_family,
    own_launcher,
    recorded_vars,
    shell_words,
    slurm_cpus_per_task,
    user_config_files,
    user_file_settings,
)
from .noise import BandRule, QuietMachine
from .placement import cores_per_node, pt2pt_placement


class SystemReferences(rfm.RegressionTestPlugin):
    """Performance references from the system's ``$ref`` file
    (``harnesscore.references``), by partition, environment and the test's
    variant.  With ``-S require_reference=true`` (the nightly mode) a test
    without one fails, naming the file and the key."""

    #: The test's parameters without the sample number: its references key.
    ref_variant = variable(str, value='-', loggable=False)
    #: The references file of the current system.
    references_path = variable(str, value='', loggable=False)
    #: False in a test that sets its own references (fixed targets).
    system_references = variable(bool, value=True, loggable=False)

    @run_after('init')
    def load_system_references(self):
        _cls, self.ref_variant = split_name(self.display_name)
        prefix = rt.runtime().get_option('general/0/reference_prefix') or REFERENCES_DIR
        self.references_path = references_file(prefix, self.current_system.name)
        if self.system_references and os.path.isfile(self.references_path):
            self.reference = {'$ref': self.references_path}

    @run_before('setup')
    def refuse_unkeyed_nodes(self) -> None:
        """A node count set with ``-S nodes=N`` is not in the test's name, so
        neither in its references key nor in the baseline's pool of its
        samples: a run on N nodes would be judged against, and pooled with, the
        partition's own node count.  ``-P nodes=N`` names it (``.nodes=N``)."""
        nodes = getattr(self, 'nodes', 0)
        if nodes and '.nodes=' not in self.ref_variant:
            raise bad_value(self, 'nodes', f'give a node count as a parameter, '
                                           f'-P nodes={nodes}, not -S: the run\'s name and '
                                           f'its references key would not say {nodes} node(s)')

    @run_before('performance')
    def demand_reference(self):
        if not self.require_reference or not self.system_references:
            return
        where = (f'{self.current_partition.fullname} {self.current_environ.name} '
                 f'{type(self).__name__} [{self.ref_variant}]')
        if not os.path.isfile(self.references_path):
            raise PerformanceError(
                f'no references file {self.references_path} for system '
                f'{self.current_system.name} (needed for {where}); write one from '
                f'earlier runs with `./harness baseline`')
        try:
            self.reference[self]
        except KeyError:
            raise PerformanceError(
                f'no reference for {where} in {self.references_path}; '
                f'add it with `./harness baseline`') from None


# ---- run checks --------------------------------------------------------------------

class PerfSchema(rfm.RegressionTestPlugin):
    """Every perflog line of a test carries the same performance variables,
    passed or failed: ReFrame writes a perflog's header from its first line,
    and a test that failed sanity evaluated none (the lines after it would have
    more fields than the header).  So a test declares its variables by the
    setup stage, and this plugin logs each as ReFrame's placeholder ``None``
    until the performance stage replaces it."""

    @run_before('sanity', always_last=True)
    def declare_perf_variables(self):
        part = self.current_partition.fullname
        self._declared_perf = tuple(self.perf_variables)
        for name, fn in self.perf_variables.items():
            declare_perf_value(self, f'{part}:{name}', getattr(fn, 'unit', '') or '')

    @run_before('performance', always_last=True)
    def check_declared_perf_variables(self):
        late = [n for n in self.perf_variables if n not in getattr(self, '_declared_perf', ())]
        if late and not self.is_dry_run():
            raise PerformanceError(
                f'{type(self).__name__}: performance variable(s) {", ".join(late)} were '
                f'declared after sanity: a failed run would log fewer fields than a '
                f'passed one (declare them by the setup stage)')


#: Where a script of several OSU runs notes each run that did not exit 0.
STATUS_FILE = 'osu_status.txt'
#: The exit statuses of a run that ``timeout`` ended (TERM, then KILL).
TIMED_OUT = (124, 137)


@contextlib.contextmanager
def sanity_errors(*errors: type[Exception]) -> Iterator[None]:
    """Raises each of `errors` in its body as a sanity error, with its message."""
    try:
        yield
    except errors as err:
        raise sn.SanityError(str(err)) from None


class AtLeast(NamedTuple):
    """The bounds of a ``-S`` variable: the lower bound, what the value must be
    (the error's words), whether the bound itself is refused too (`above`), and
    an upper bound (`high`: the most a kernel's option takes, or a fraction's
    1; `below`: refused itself)."""

    low: float
    must: str
    above: bool = False
    high: float = math.inf
    below: bool = False

    def check(self, test: rfm.RegressionTest, var: str) -> None:
        """A ValueError, naming `test`'s variable `var` and its value, where it
        is out of these bounds (a NaN is in none)."""
        value = getattr(test, var)
        low_ok = value > self.low if self.above else value >= self.low
        high_ok = value < self.high if self.below else value <= self.high
        if not (low_ok and high_ok):
            raise ValueError(f'{type(test).__name__}.{var} must be {self.must}, got {value}')

    @classmethod
    def kernel_option(cls, option: str, high: float, low: float = 1, *, low_is: str = '',
                      above: bool = False) -> AtLeast:
        """The bounds of a value a test passes to a kernel's `option` (``--steps``):
        `low` (what it means: `low_is`; refused itself where `above`) to `high`,
        the most the kernel takes (its limit in ``harnesscore.plan``)."""
        def text(x: float) -> str:  # 1000000000, not 1e+09, as the kernel's help says
            return str(int(x)) if x == int(x) else f'{x:g}'
        low_text = text(low) + (f' ({low_is})' if low_is else '')
        span = f'above {low_text} and at most' if above else f'{low_text} to'
        return cls(low, f"{span} {text(high)} (the kernel's {option})", above=above, high=high)


#: The ring kernel's --iters-scale, as RingCheck and the sweeps take it.
RING_ITERS_SCALE = AtLeast.kernel_option('--iters-scale', planning.RING_MAX_ITERS_SCALE, 0,
                                         above=True)


class LowerBounds(rfm.RegressionTestPlugin):
    """Each class declares the bounds of its own variables in ``at_least``
    (name -> AtLeast); one hook checks those of every class of a test, before
    any other setup hook of the harness's (the last base class's run first)."""

    at_least: ClassVar[Mapping[str, AtLeast]] = {}

    @run_after('setup')
    def check_lower_bounds(self):
        for cls in reversed(type(self).__mro__):
            for var, bound in vars(cls).get('at_least', {}).items():
                bound.check(self, var)


def bad_value(test: rfm.RegressionTest, var: str, why: object) -> ValueError:
    """The error of `test`'s variable `var` (a ``-S``/``-P`` value) that the setup
    stage fails the test with: its class, name and value, and `why`."""
    return ValueError(f'{type(test).__name__}.{var}={getattr(test, var)!r}: {why}')


def record_exit_status(test: rfm.RegressionTest) -> None:
    """Where the scheduler reports no exit status (ReFrame's squeue backend),
    the job script records its launcher's: ``RunBase.exit_status`` reads it."""
    if test.job.scheduler.registered_name == 'squeue':
        test.postrun_cmds = [f'echo "{EXIT_STATUS_TAG} $?" >&2', *test.postrun_cmds]


class StageFiles(rfm.RegressionTestPlugin):
    """The files a check writes into its stage directory and reads back."""

    @staticmethod
    def note_status(run: str) -> str:
        """The end of a script line that notes `run` in ``STATUS_FILE`` if it
        did not exit 0 (`run` is quoted by its writer)."""
        return f' || echo "{run} status $?" >> {STATUS_FILE}'

    def noted_runs(self, what: str) -> list[str]:
        """The runs the script noted (``note_status``); a sanity error naming
        `what` where one of them failed, not only ended by ``timeout``."""
        noted = [ln.strip() for ln in self.stage_text(STATUS_FILE).splitlines() if ln.strip()]
        timed_out = tuple(f'status {code}' for code in TIMED_OUT)
        bad = [ln for ln in noted if not ln.endswith(timed_out)]
        sn.evaluate(sn.assert_false(bad, msg=f'{what} failed: {bad}'))
        return noted

    def write_stage_script(self, name: str, lines: list[str]) -> None:
        """A file `name` of `lines` in the stage directory (a bash script's
        every word already quoted by its writer)."""
        with open(os.path.join(self.stagedir, name), 'w', encoding='utf-8') as fp:
            fp.write('\n'.join(lines) + '\n')

    def stage_text(self, name: str) -> str:
        """The text of `name` in the stage directory, '' where the job wrote none."""
        try:
            with open(os.path.join(self.stagedir, name), encoding='utf-8',
                      errors='replace') as fp:
                return fp.read()
        except FileNotFoundError:
            return ''

    def job_stdout(self) -> str:
        """The text of the job's stdout (``stage_text``), read once: every reader
        of it (a kernel's RESULT lines and its ranks' hosts, the ring's k sweep
        statuses, OSU's error lines, md-vs-LAMMPS's rounds) reads the same text."""
        if not hasattr(self, '_job_stdout'):
            self._job_stdout = self.stage_text(str(self.job.stdout))
        return self._job_stdout


class OsuRuns(LowerBounds):
    """A check that runs OSU benchmarks: the environment's OSU install, and each
    run ended by ``timeout`` (OSU has no watchdog for a hung MPI_Finalize)."""

    #: A run still going after this many seconds is ended; if OSU had printed
    #: its whole table, only MPI_Finalize hung (docs/pages/checks.md): the run
    #: passes with finalize_hung=true, as the kernels do.
    run_timeout = variable(int, value=90)
    # 0 would turn `timeout` off, a negative value make `timeout` itself fail
    at_least = {'run_timeout': AtLeast(1, 'a number of seconds above 0')}

    def timeout_options(self) -> list[str]:
        """``timeout``'s options: TERM after ``run_timeout`` s, KILL 10 s later."""
        return ['-k', '10', str(int(self.run_timeout))]

    def osu_prefix(self) -> str:
        """The environment's OSU install prefix ('' where none is configured)."""
        return str(self.current_environ.extras.get('osu_prefix', ''))

    def osu_library_probes(self, binaries: Mapping[str, str]) -> list[str]:
        """Job-script lines that write what each OSU binary links (its ``ldd``
        into the file it is keyed by) and what the environment's compiler
        wrapper links (``stack.link``), where the job's environment is in force."""
        return [*(f'ldd {shlex.quote(path)} > {shlex.quote(out)} 2>&1'
                  for out, path in binaries.items()),
                f'{wrapper_link_check(self.current_environ)} > stack.link 2>&1']

    def check_osu_library(self, name: str, ldd_file: str) -> set[str]:
        """The MPI libraries OSU benchmark `name` links (``ldd_file``); a sanity
        error where it links none, the stack's wrapper names none, or they are
        not the same library: OSU built for another stack."""
        env = self.current_environ
        stack = env.extras.get('stack', env.name)
        ldd = self.stage_text(ldd_file)
        osu_libs = mpi_libraries(ldd)
        sn.evaluate(sn.assert_true(
            osu_libs, msg=f'{name}: ldd shows no MPI library (libmpi*, '
                          f'libmpich*): {ldd[:300]!r}'))
        stack_libs = stack_libraries(self.stage_text('stack.link'))
        sn.evaluate(sn.assert_true(
            stack_libs, msg=f'the compiler wrapper of stack {stack} names no MPI library: '
                            f'{self.stage_text("stack.link")[:300]!r}'))
        sn.evaluate(sn.assert_true(
            libraries_agree(osu_libs, stack_libs),
            msg=f'{name} links {sorted(osu_libs)}, but stack {stack} links '
                f'{sorted(stack_libs)}: OSU was built for another stack'))
        return osu_libs


class AlternatingRounds(StageFiles, LowerBounds):
    """A job script of rounds that run both sides of every comparison side by
    side (``harnesscore.rounds``): at least `rounds` rounds, then more while a
    band is undecided, up to `max_rounds` and within `round_budget_s` (each
    check sets its own)."""

    rounds = variable(int)
    max_rounds = variable(int)
    round_budget_s = variable(int)
    # the loop runs one round at least: 0 or -3 ran as 1, silently
    at_least = {'rounds': AtLeast(1, '1 or more')}

    @run_after('setup')
    def check_rounds(self):
        # The loop stops at max_rounds first: more rounds asked would be cut.
        name = type(self).__name__
        if self.rounds > self.max_rounds:
            raise ValueError(f'{name}.rounds={self.rounds} is above {name}.max_rounds='
                             f'{self.max_rounds}: raise max_rounds too '
                             f'(-S {name}.max_rounds={self.rounds})')

    def round_loop(self, counter: str, body: list[str], question: list[str]) -> list[str]:
        """The script's loop of rounds (``harnesscore.rounds.round_loop``)."""
        return round_loop(counter, body, self.rounds, self.max_rounds, self.round_budget_s,
                          question)

    def rounds_done(self) -> int:
        """The rounds the script finished."""
        try:
            return int(self.stage_text(ROUNDS_FILE).strip())
        except ValueError:
            raise sn.SanityError(f'{ROUNDS_FILE} is missing or unreadable: the rounds '
                                 f'did not finish') from None


#: The per-size variables of a point-to-point sweep (``hybridverdict.comm``'s
#: convention): kind -> unit, and the headline of each kind: (name, size).
SWEEP_UNITS = {'lat': 'us', 'bw': 'MB/s'}
SWEEP_HEADLINES = {'lat': ('latency_8B', 8), 'bw': ('bandwidth_1MiB', MIB)}


def sweep_variables(sizes: list[int], value, kinds: tuple[str, ...], headline: str = '') -> dict:
    """The performance variables of a sweep: ``<kind>_<bytes>`` per size and
    kind ('lat': us, 'bw': MB/s), then the `headline` kind's headline (if any)
    where the sweep has its size; value(kind, size) reads a figure."""
    out = {}
    for nbytes in sizes:
        for kind in kinds:
            out[f'{kind}_{nbytes}'] = sn.make_performance_function(
                lambda kind=kind, nbytes=nbytes: value(kind, nbytes), SWEEP_UNITS[kind])
    name, size = SWEEP_HEADLINES.get(headline, ('', None))
    if size in sizes:
        out[name] = sn.make_performance_function(lambda: value(headline, size),
                                                 SWEEP_UNITS[headline])
    return out


# ---- provenance --------------------------------------------------------------------

#: What the job writes about where it ran (``Provenance``), in its stage directory.
PROVENANCE_FILE = 'provenance.txt'
#: Program names that launch ranks (how a script's launch lines are found).
LAUNCHER_WORDS = ('mpirun', 'mpiexec', 'srun', 'aprun', 'ibrun', 'jsrun')
#: The most characters ``mpi_env`` keeps.
MPI_ENV_LIMIT = 1000


def finalize_hang_only(status: int, finalize_hung: bool, verified: bool) -> bool:
    """Whether a kernel run's non-zero exit status comes only from the MPI stack's
    teardown: every RESULT verified, then a rank's MPI_Finalize hung and its
    watchdog (``src/common``) ended it.  The run passes, recorded as
    ``finalize_hung=true`` (docs/pages/checks.md)."""
    return status != 0 and finalize_hung and verified


@functools.lru_cache(maxsize=1)
def session_id() -> str:
    """The session every run of this ReFrame process belongs to (perflog field
    ``session``): ``HARNESS_SESSION`` where ``./harness`` set one, else the
    process's start time and pid.  Baselines and change points group runs by it."""
    given = os.environ.get('HARNESS_SESSION', '').strip()
    if given:
        return field_text(given)
    now = datetime.datetime.now(datetime.timezone.utc)
    return f'{now:%Y%m%dT%H%M%SZ}-{os.getpid()}'


def job_probe(path: str) -> str:
    """The job-script line that writes, into `path`, the job's host, its
    kernel release, Slurm's node list and the modules loaded (``key=value``
    lines, read by ``read_job_probe``); it never fails the job."""
    return ("{ printf 'host=%s\\n' \"$(uname -n)\"; "
            "printf 'kernel_release=%s\\n' \"$(uname -r)\"; "
            "printf 'nodelist=%s\\n' \"${SLURM_JOB_NODELIST:-}\"; "
            "printf 'modules=%s\\n' \"${LOADEDMODULES:-}\"; } "
            f"> {shlex.quote(path)} 2>/dev/null || true")


def read_job_probe(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a job probe's file (the first of each key)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            out.setdefault(key.strip(), value.strip())
    return out


def _command_words(words: list[str]) -> list[str]:
    """The `words` of a shell line before its first pipe, redirection or list
    operator (a word of those characters only)."""
    for i, word in enumerate(words):
        if word and set(word) <= set('|&;<>()'):
            return words[:i]
    return words


def first_launch(script: str) -> str:
    """The first launch line of a job script a check wrote (a line that runs a
    launcher, ``LAUNCHER_WORDS``), up to its first pipe, redirection or list
    operator, quoted; '' if it has none."""
    for raw in script.splitlines():
        lex = shlex.shlex(raw, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        try:
            words = list(lex)
        except ValueError:
            continue
        words = _command_words(words)
        if any(os.path.basename(w).startswith(LAUNCHER_WORDS) for w in words):
            return ' '.join(shlex.quote(w) for w in words)
    return ''


def mpi_env_text(effective: Mapping[str, str], protected: Iterable[str] = ()) -> str:
    """The perflog's ``mpi_env``: NAME=VALUE of each recorded variable, sorted,
    each value a shell word, in at most ``MPI_ENV_LIMIT`` characters.  Where
    they do not fit, the longest values are cut first, each to a visible
    ``NAME=<cut:N chars>``, so that every name stays; the `protected` ones (the
    run's pins and binding) never are.  Only where the names alone do not fit
    is the text cut at the limit, the protected variables first."""
    items = {k: str(v).replace('|', '/') for k, v in effective.items()}
    words = {k: shlex.quote(v) if v else '' for k, v in items.items()}
    keep = set(protected)

    def text(values: Mapping[str, str], order: list[str]) -> str:
        return ' '.join(f'{k}={values[k]}' for k in order)

    order = sorted(items)
    out = dict(words)
    for name in sorted((k for k in items if k not in keep), key=lambda k: -len(words[k])):
        if len(field_text(text(out, order), 10 ** 9)) <= MPI_ENV_LIMIT:
            break
        marker = f'<cut:{len(items[name])} chars>'
        if len(marker) < len(words[name]):
            out[name] = marker
    if len(field_text(text(out, order), 10 ** 9)) > MPI_ENV_LIMIT:
        order = [k for k in order if k in keep] + [k for k in order if k not in keep]
    return field_text(text(out, order), MPI_ENV_LIMIT)


class Provenance(StageFiles):
    """What every run was made with and where it ran, into the perflog's
    provenance fields (``harnesscore.schema``; the test derives from
    ``PerflogFields``, which derives from this).  The compiler and Spack hash
    are the build fixture's; a check without one (OSU) probes its
    environment's compiler in the job.  The nodes, kernel release and modules
    come from the job (``PROVENANCE_FILE``, read before sanity)."""

    def own_mpi_vars(self) -> dict[str, str]:
        """The variables the partition, the environment and the run itself set
        (its pins, its binding, the harness's own), as the job script assigns them."""
        configured = {**(getattr(self.current_partition, 'env_vars', None) or {}),
                      **(self.current_environ.env_vars or {})}
        return {**{k: assigned_value(str(v)) for k, v in configured.items()}, **self.env_vars}

    def run_environ(self) -> tuple[dict[str, str], str]:
        """The variables in effect for the run (the session's, the partition's
        and environment's, the run's own) and the home its user files are in."""
        return ({**os.environ, **self.own_mpi_vars()},
                os.environ.get('HOME') or os.path.expanduser('~'))

    def effective_mpi_vars(self) -> dict[str, str]:
        """What the run records (``recorded_vars``) of the variables in effect
        for it, and the user's own configuration files its stack reads."""
        env, home = self.run_environ()
        effective = recorded_vars(env)
        files = user_config_files(env_family(self.current_environ), env, home,
                                  launcher_family(self.current_partition, self.current_environ))
        if files:
            effective[USER_FILES_VAR] = ','.join(files)
        return effective

    def provenance_build(self) -> KernelBuild | None:
        """The build fixture of the run's kernels, if it has one."""
        build = getattr(self, 'build', None)
        return build if isinstance(build, KernelBuild) else None

    def rank_hosts(self) -> list[str]:
        """The hosts the run's ranks ran on, as the program reports them."""
        return []

    @run_before('run', always_last=True)
    def record_provenance(self):
        self.src_version = field_text(source_version())
        self.session = session_id()
        self.reframe_version = field_text(rfm.VERSION)
        self.mpi_env = mpi_env_text(self.effective_mpi_vars(), self.own_mpi_vars())
        build = self.provenance_build()
        probes = [job_probe(os.path.join(self.stagedir, PROVENANCE_FILE))]
        if build is not None:
            self.compiler = field_text(build.compiler)
            self.spack_hash = field_text(build.spack_hash)
        elif self.current_environ.cc:
            probes.append(compiler_probe(self.current_environ.cc,
                                         os.path.join(self.stagedir, COMPILER_FILE)))
        self.prerun_cmds = [*self.prerun_cmds, *probes]

    def launched(self) -> str:
        """The launcher line of the job script, and the first launch line of
        the script of launches it runs where its launcher launches nothing."""
        job = self.job
        line = ' '.join([job.launcher.run_command(job), str(self.executable),
                         *map(str, self.executable_opts)]).strip()
        if job.launcher.command(job) or not self.executable_opts:
            return line
        script = self.stage_text(str(self.executable_opts[0]))
        first = first_launch(script) if script else ''
        return f'{line}: {first}' if first else line

    @reads_output('sanity')
    def read_provenance(self):
        self.launch_command = field_text(self.launched())
        job = read_job_probe(self.stage_text(PROVENANCE_FILE))
        self.kernel_release = field_text(job.get('kernel_release', ''))
        self.loaded_modules = field_text(job.get('modules', ''))
        hosts = self.rank_hosts()
        self.node_names = field_text(','.join(hosts) if hosts else
                                     job.get('nodelist') or job.get('host', ''))
        if self.provenance_build() is None:
            self.compiler = field_text(compiler_from_probe(
                self.stage_text(COMPILER_FILE)))


def _perflog_fields() -> type:
    """A ReFrame plugin with one variable per run field of the schema
    (``schema.check_fields``): the perflog format and the checks' variables
    cannot drift apart."""
    meta = type(rfm.RegressionTestPlugin)
    bases = (PerfSchema, Provenance)
    namespace = meta.__prepare__('PerflogFields', bases)
    namespace['__module__'] = __name__
    namespace['__qualname__'] = 'PerflogFields'
    namespace['__doc__'] = ('The fields every perflog line of the harness carries '
                            '(harnesscore.schema): what ran, where, with what '
                            '(Provenance), and whether its result counts.')
    for field in check_fields():
        namespace[field.name] = variable(field.type, value=field.default)
    return meta('PerflogFields', bases, namespace)


PerflogFields = _perflog_fields()


def _cores_known(cpus_of: list, cores_of: object) -> bool:
    """Whether a RESULT line's ``cores`` (`cores_of`) gives a core for every
    thread of its ``cpus`` (`cpus_of`) that has a CPU: a list per rank, as
    long as the rank's ``cpus``."""
    if not isinstance(cores_of, list) or len(cores_of) != len(cpus_of):
        return False
    for cpus, cores in zip(cpus_of, cores_of):
        if not isinstance(cores, list) or len(cores) != len(cpus):
            return False
        for cpu, core in zip(cpus, cores):
            if cpu is None or cpu < 0:
                continue
            if not (isinstance(core, int) and core >= 0):
                return False
    return True


class SharedCores(rfm.RegressionTestPlugin):
    """Whether a run's threads shared cores, declared by the configuration or
    found in the kernels' RESULT lines, into the perflog's ``oversubscribed``.
    Needs ``current_partition``, ``cores``, ``ranks`` and ``threads``."""

    def declared_oversubscription(self) -> bool:
        """True where the configuration says the runs share cores on purpose (a
        declared topology bigger than this machine, a test cluster on its
        cores): such runs are flagged oversubscribed and kept out of verdicts."""
        part = self.current_partition
        if part.extras.get('shared_cores'):
            return True
        return (bool(part.extras.get('declared_topology')) and
                part.scheduler.registered_name == 'local' and
                self.cores > host_cores())

    def flag_oversubscription(self, clashes: list[str] | None = None) -> bool:
        """Sets the perflog's ``oversubscribed`` and returns it: more threads
        than cores, two threads found on one core (`clashes`), or an
        oversubscription the configuration declares."""
        over = (self.ranks * self.threads > self.cores or bool(clashes) or
                self.declared_oversubscription())
        self.oversubscribed = str(over).lower()
        return over

    def _shared_cores(self, res: dict) -> list[str]:
        """Cores on which two threads of this run ran (empty if none): a
        thread's core is the RESULT line's ``cores`` entry where the kernel
        gives one for every thread that has a CPU, else its ``cpus`` entry."""
        cpus_of = res.get('cpus') or []
        cores_of = res.get('cores')
        known = _cores_known(cpus_of, cores_of)
        seen: dict[tuple[str, int], tuple[str, int]] = {}
        clashes = []
        hosts = res.get('hosts') or []
        for r, cpus in enumerate(cpus_of):
            host = hosts[r] if r < len(hosts) else '?'
            for t, cpu in enumerate(cpus):
                if cpu is None or cpu < 0:
                    continue
                who = f'rank {r} thread {t}'
                core = cores_of[r][t] if known else cpu
                if (host, core) not in seen:
                    seen[(host, core)] = (who, cpu)
                    continue
                other, other_cpu = seen[(host, core)]
                where = (f'core {cpu}' if cpu == other_cpu else
                         f'core {core} (hardware threads cpu {cpu} and cpu {other_cpu})')
                clashes.append(f'{who} and {other} on {host} {where}')
        return clashes

    def check_oversubscription(self, *results: dict) -> None:
        """Flags the run oversubscribed where two threads of any of the RESULT
        lines `results` shared a core, or there are more threads than cores; a
        sanity error unless the configuration declares it."""
        clashes = list(dict.fromkeys(c for res in results for c in self._shared_cores(res)))
        declared = self.declared_oversubscription()
        over = self.flag_oversubscription(clashes)
        # Flagged either way (the reports keep such runs out of verdicts);
        # a failure only where the node was not declared bigger on purpose.
        sn.evaluate(sn.assert_false(
            over and not declared, msg=f'oversubscribed run {self.display_name}: '
                      + ('; '.join(clashes) or 'more threads than cores')))


class RunBase(rfm.RunOnlyRegressionTest, SystemReferences, PerflogFields, QuietMachine,
              BandRule, StageFiles, LowerBounds, SharedCores):
    """The base of every run of the harness: references, perflog fields, the
    partition's own launcher with this run's binding (``binding_env``), the
    node lock, the machine's quietness and fixed bands (``harnesslib.noise``),
    and what every run's sanity reads.  Subclasses set ``threads`` and the
    task counts in their placement."""

    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    time_limit = '5m'

    #: ``threads``: each rank bound to as many cores as it has threads;
    #: ``one-core``: to a single core, as MVAPICH2 does by default, which the
    #: oversubscription check must fail (used by the tests).
    binding = variable(typ.Str[r'threads|one-core'], value='threads')

    def family(self) -> str:
        """Whose binding variables this run needs (``srun`` or the stack's)."""
        return launcher_family(self.current_partition, self.current_environ)

    def cores_per_rank(self, threads: int) -> int:
        return 1 if self.binding == 'one-core' else threads

    def rank_cpus(self, threads: int) -> int:
        """The scheduler's CPUs for a rank of `threads` threads: its cores
        (``cores_per_rank``) as whole cores (``slurm_cpus_per_task``)."""
        return slurm_cpus_per_task(self.current_partition, self.cores_per_rank(threads))

    def placement(self, cores: int, nodes: int) -> tuple[int, int, str]:
        """(ranks per node, nodes used, reason to skip or '') of a run of
        one-thread ranks (``place_ranks``): 2 ranks, one per node on a
        partition of several nodes, else both on one node."""
        return pt2pt_placement(self.current_partition, cores, nodes)

    def place_ranks(self) -> None:
        """The cores, ranks, nodes and task counts of a run of one-thread ranks
        (``placement``), or the run skipped, saying why."""
        part = self.current_partition
        self.cores = cores_per_node(part)
        ranks, nodes, why = self.placement(self.cores, int(part.extras.get('nodes', 1)))
        self.skip_if(bool(why), why)
        # -P nodes=N: this run places its ranks itself; another N is not its run
        # (the variant's name, and its reference key, would say N nodes)
        self.skip_if(bool(self.nodes) and self.nodes != nodes,
                     f'{type(self).__name__} places its {ranks * nodes} rank(s) itself, on '
                     f'{nodes} node(s) of {part.fullname}: nodes={self.nodes} is not its run')
        self.ranks, self.nodes = ranks, nodes
        self.num_tasks_per_node = ranks
        self.num_tasks = ranks * nodes
        self.num_cpus_per_task = slurm_cpus_per_task(part, 1)

    @run_after('setup')
    def stack_starts_its_ranks(self):
        """A stack that cannot start under the partition's srun (environment
        extras ``launch: own``) starts its ranks with its own launcher."""
        own = own_launcher(self.current_partition, self.current_environ)
        if own:
            self.job.launcher = getlauncher(own)()

    @run_before('run')
    def bind_and_lock(self):
        """The run's binding, and the node lock before anything runs."""
        family = self.family()
        self.env_vars.update(binding_env(family, int(self.threads), self.binding,
                                         oversubscribe=self.declared_oversubscription()))
        if family == 'srun' and self.cores_per_rank(int(self.threads)) != self.threads:
            # srun takes a task's cores from --cpus-per-task (ReFrame's srun
            # gives the job's); the last one given counts.
            self.job.launcher.options = [
                *self.job.launcher.options,
                f'--cpus-per-task={self.rank_cpus(int(self.threads))}']
        self.prerun_cmds = hold_node_lock(self.current_partition) + self.prerun_cmds
        record_exit_status(self)

    @run_before('run')
    def check_mpi_env(self):
        """The MPI tuning variables in effect for the run into the perflog's
        ``mpi_env``; a variable the partition pins for this stack (extras
        ``pinned``) that has another value, in the environment or in a user's
        file its launcher reads, fails the run: its records would claim a
        transport they did not use."""
        effective = self.effective_mpi_vars()
        pinned = self.current_environ.extras.get('pinned') or {}
        # a user's file the launcher reads may set them over the environment
        # (HARNESS_MPI_ENV=keep: Hydra's -genv in ~/.mpiexec.hydra.conf)
        files = user_file_settings(self.family(), *self.run_environ())
        got = {**effective, **{var: value for var, (value, _path) in files.items()}}
        wrong = []
        for var, want in sorted(pinned.items()):
            if got.get(var) == want:
                continue
            source = f' ({files[var][1]})' if var in files else ''
            wrong.append(f'{var}={got.get(var, "(unset)")}{source} (the partition pins {want})')
        if wrong:
            claim = self.current_environ.extras.get('transport') or 'its transport'
            raise sn.SanityError(
                f'{self.current_partition.fullname} claims {claim} for '
                f'{self.current_environ.name}, but this run sets {"; ".join(wrong)}')
        self.mpi_env = mpi_env_text(effective, self.own_mpi_vars())

    def launch(self, num_tasks: int, per_node: int = 0) -> str:
        """The partition's launcher as a command line for `num_tasks` ranks,
        for the scripts a check writes itself; `per_node` > 0: that many on
        each node, placed as the environment's family does it (``launch_line``)."""
        threads = int(self.threads)
        return launch_line(self.job.launcher, num_tasks, self.rank_cpus(threads),
                           per_node=per_node, family=env_family(self.current_environ),
                           cores_per_rank=self.cores_per_rank(threads))

    def exit_status(self):
        """The run's exit status: the scheduler's, or the job script's record
        of it where the scheduler reports none (None if neither knows)."""
        if self.job.exitcode is not None:
            return self.job.exitcode
        found = sn.evaluate(sn.extractall(rf'^{EXIT_STATUS_TAG} (\d+)$', self.stderr, 1, int))
        return found[-1] if found else None

    def check_library(self, lib: str) -> None:
        """Records MPI_Get_library_version's `lib` as the run's ``mpi_library``;
        a sanity error where it is not this environment's stack."""
        self.mpi_library = lib
        prefix = LIBRARY_PREFIX.get(env_family(self.current_environ))
        sn.evaluate(sn.assert_true(
            prefix is None or lib.startswith(prefix),
            msg=f'{self.kernel} was run as stack {self.current_environ.name} but reports '
                f'MPI library "{lib}": built or linked against another stack'))


def sanity_results(text: str) -> list[dict]:
    """The RESULT lines of a kernel's output (a malformed one: a sanity error)."""
    with sanity_errors(MalformedResult):
        return result_lines(text)


class KernelCheck(RunBase):
    """One kernel run at one layout; subclasses say how to run their kernel."""

    build = fixture(KernelBuild, scope='environment')

    #: Threads whose subdomain each rank owns (serial mode: > threads).
    decomp = variable(int, value=0)
    #: The RESULT line's count of the timed calls behind its times ('': none).
    calls_key = ''

    @run_after('init')
    def set_layout(self):
        self.mode, self.ranks, self.threads = self.layout
        self.decomp = self.threads
        if self.mode == 'serial':
            self.threads = 1
        self.size = str(self.problem)
        self.descr = (f'{self.kernel} {self.mode} {self.ranks}x{self.threads} '
                      f'size {self.size}')

    def kernel_args(self) -> list[str]:
        raise NotImplementedError

    @run_after('setup')
    def place(self):
        part = self.current_partition
        self.cores = cores_per_node(part)
        self.skip_if(self.ranks * self.decomp != self.cores,
                     f'layout {self.ranks}x{self.decomp} does not fill the '
                     f'{self.cores} cores of {part.fullname}')
        if not self.nodes:
            self.nodes = int(part.extras.get('nodes', 1))
        elif self.nodes > 1 and part.scheduler.registered_name == 'local':
            # -P nodes=N on this machine: N times the ranks on its cores
            raise bad_value(self, 'nodes', f'{part.fullname} runs on this machine alone '
                                           '(the local scheduler): 1 node')
        self.num_tasks_per_node = self.ranks
        self.num_tasks = self.ranks * self.nodes
        # Whole cores: on a node of 2 threads per core, 2 Slurm CPUs per thread.
        self.num_cpus_per_task = slurm_cpus_per_task(part, self.threads)
        # Quoted: ReFrame writes both into the job script as they are.
        self.executable = shlex.quote(self.build.executable_path(self.kernel))
        self.build_spec = self.build.build_spec
        self.executable_opts = shell_words(['--mode', self.mode] + self.kernel_args())
        if self.declared_oversubscription():
            # Threads that spin at barriers would starve the others sharing
            # their core: a declared node's runs would take minutes.
            self.env_vars['OMP_WAIT_POLICY'] = 'PASSIVE'
            self.env_vars['GOMP_SPINCOUNT'] = '0'

    # -- results ----------------------------------------------------------------

    def results(self) -> list[dict]:
        """Every RESULT line of the run, parsed (cached)."""
        if not hasattr(self, '_results'):
            self._results = sanity_results(self.job_stdout())
        return self._results

    def headline(self) -> dict:
        """The RESULT line that gives the figures (the last one)."""
        return self.results()[-1]

    def rank_hosts(self) -> list[str]:
        """The hosts of the last RESULT line that names them, each once, in
        rank order (malformed lines skipped: their errors are sanity's)."""
        for res in reversed(result_lines(self.job_stdout(), skip_malformed=True)):
            hosts = res.get('hosts')
            if isinstance(hosts, list) and hosts:
                return list(dict.fromkeys(str(h) for h in hosts))
        return []

    @sanity_function
    def validate(self):
        results = self.results()
        if results:
            # First the library: a kernel linked to another stack explains
            # whatever else went wrong with it.
            self.check_library(str(self.headline().get('mpi_library', '')))
            # Then the kernel's own verification, whatever its speed.
            self.verified = str(all(r.get('verified') is True for r in results)).lower()
            sn.evaluate(sn.assert_true(
                self.verified == 'true',
                msg=f'{self.kernel} did not verify its result'))
        status = self.exit_status()
        if status is None:
            raise sn.SanityError(
                f'{self.kernel}: the job ended before its launcher returned (scheduler '
                f'state {self.job.state}): killed at its time limit of {self.time_limit} s '
                f'or cancelled')
        self.finalize_hung = str(bool(sn.evaluate(sn.findall(
            r'MPI_Finalize did not return', self.stderr)))).lower()
        if not finalize_hang_only(status, self.finalize_hung == 'true',
                                  bool(results) and self.verified == 'true'):
            sn.evaluate(sn.assert_eq(status, 0,
                                     msg=f'{self.kernel} exited with status {{0}}'))
        sn.evaluate(sn.assert_true(results, msg=f'{self.kernel} printed no RESULT line'))
        self.check_oversubscription(self.headline())
        self.check_results_match_run(results)
        return True

    def check_results_match_run(self, results: list[dict]) -> None:
        """A sanity error unless every RESULT line is this run's, not another's:
        the binary launched, the mode and the layout (a RESULT of another
        kernel or layout passed before)."""
        binary = os.path.basename(shlex.split(self.executable)[0])
        for res in results:
            if (res.get('ranks') != self.num_tasks or
                    res.get('threads') != self.threads):
                raise sn.SanityError(
                    f'{self.kernel} ran {res.get("ranks")}x{res.get("threads")}, '
                    f'expected {self.num_tasks}x{self.threads}')
            if (res.get('kernel'), res.get('mode')) != (binary, self.mode):
                raise sn.SanityError(
                    f'{self.kernel}: a RESULT line of kernel {res.get("kernel")!r} mode '
                    f'{res.get("mode")!r}, where this run launched {binary} in mode '
                    f'{self.mode}')

    @run_after('setup')
    def set_perf_variables(self):
        # Declared before the run (PerfSchema), read from its output lazily.
        self.perf_variables = {'fom': sn.make_performance_function(
            lambda: float(self.headline()['fom']), '')}
        self.add_per_call_variables('t_total', 't_comp', 't_comm')

    def add_per_call_variables(self, *names: str) -> None:
        """The RESULT line's ``<name>_s`` per call (``calls``): the counts
        differ between runs where the kernel's --min-time sets them."""
        for var in names:
            self.perf_variables[var] = sn.make_performance_function(
                lambda key=f'{var}_s': self.per_call(key), 's')

    def calls(self, res: dict) -> int:
        """Timed calls (or steps) behind the RESULT line's times: its
        ``calls_key`` field; 1 where the times are already per run of a fixed count."""
        if not self.calls_key:
            return 1
        return int(res.get(self.calls_key) or 1)

    def per_call(self, key: str) -> float:
        """A time of the headline RESULT per call."""
        res = self.headline()
        return float(res[key]) / self.calls(res)

    @run_before('performance')
    def set_fom_unit(self):
        """The figure of merit's unit is the kernel's own (its RESULT line)."""
        if self.is_dry_run() or 'fom' not in self.perf_variables:
            return   # --dry-run: job scripts only, no output to read
        self.perf_variables['fom'] = sn.make_performance_function(
            lambda: float(self.headline()['fom']), str(self.headline().get('fom_unit', '')))
