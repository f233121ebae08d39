"""The perflog schema of the harness, declared once.

A harness perflog line is the run fields below, in this order, then one block
of ``PERFVAR_PARTS`` per performance variable.  ``config/settings.py`` builds
the ``filelog`` handler's format from it, ``harnesslib.base.PerflogFields``
declares the checks' variables from it, and ``hybridverdict.perflog`` reads
the files by it.  Nothing here imports ReFrame.

The performance variables of a check are declared by the check itself, by
the end of its setup stage (they depend on its parameters and the partition),
and ``harnesslib.base.PerfSchema`` logs them for a run that fails before
measuring them: every line of a check's perflog has the same fields.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RunField:
    """One run field of a perflog line."""

    name: str
    doc: str
    #: Python type of the check variable (None: ReFrame fills the field itself).
    type: type | None = None

    @property
    def from_check(self) -> bool:
        """A variable the harness's checks set (not one ReFrame provides)."""
        return self.type is not None

    @property
    def default(self) -> object:
        return self.type() if self.type is not None else None


#: The run fields of every harness perflog line, in order.
RUN_FIELDS: tuple[RunField, ...] = (
    RunField('job_completion_time', 'when the job ended (ReFrame)'),
    RunField('system', 'ReFrame system'),
    RunField('partition', 'ReFrame partition: the interconnect or transport'),
    RunField('environ', 'ReFrame environment: the MPI stack'),
    RunField('name', "the test's display name, with its parameters"),
    RunField('kernel', 'kernel or benchmark', str),
    RunField('mode', 'mpi, masteronly, funneled, multiple, serial, ...', str),
    RunField('ranks', 'ranks per node', int),
    RunField('threads', 'threads per rank', int),
    RunField('size', 'problem size, as the kernel takes it', str),
    RunField('cores', 'cores per node', int),
    RunField('nodes', 'nodes', int),
    RunField('mpi_library', 'MPI_Get_library_version, first line', str),
    RunField('verified', "'true' when the kernel verified its result", str),
    RunField('oversubscribed', "'true' when two threads shared a core", str),
    RunField('finalize_hung', "'true' when MPI_Finalize hung after verified results", str),
    RunField('build_spec', 'the build this run used (KernelBuild.build_spec)', str),
    RunField('result', 'pass or fail (ReFrame)'),
    # -- fixed-band assertions (harnesscore.bands) and machine quietness (harnesscore.quiet)
    RunField('judgement', "the band rule's state of the run: 'pass', 'fail', 'inconclusive' "
             "or '' (no band judged)", str),
    RunField('judgement_detail', 'per judged variable: state, median, interval, band, spread',
             str),
    RunField('load_before', '1-minute load average before the run (-1: not recorded)', float),
    RunField('load_after', '1-minute load average after the run (-1: not recorded)', float),
    RunField('steal_pct', "CPU steal time during the run, % ('' where the kernel gives none)",
             str),
    RunField('busy_procs', 'other processes busy on the cores the run used (-1: not recorded)',
             int),
    RunField('busy', "'true', 'false' or 'unknown': the machine was busy (harnesscore.quiet)",
             str),
    RunField('busy_detail', 'what made it busy: processes (pid, name, cpu, share), steal', str),
    # -- what the run's MPI was told (harnesslib.launch.mpi_vars)
    RunField('mpi_env', 'the MPI and OpenMP tuning variables in effect for the run (the '
             'partition\'s transport, any kept from the shell: HARNESS_MPI_ENV=keep), the '
             'binding\'s, LD_PRELOAD and the user\'s MPI files read (user_config_files): '
             'NAME=VALUE separated by spaces, sorted, a value shell-quoted where it needs it; '
             'at most 1000 characters, the longest values cut first to NAME=<cut:N chars>',
             str),
    # -- provenance: what a performance engineer diffs after a regression
    #    (harnesslib.base.Provenance; '' where unknown, and in older perflogs)
    RunField('src_version', "the kernel sources: `git describe --always` of the checkout, "
             "with '-dirty-' and 12 hex digits of src/ where src/ differs from HEAD; else "
             "'sha256:' and 12 hex digits of the files under src/", str),
    RunField('compiler', "the compiler and its version, e.g. 'gcc 12.2.0' (the kernels' "
             "build; checks without one: the environment's compiler)", str),
    RunField('reframe_version', 'the ReFrame that ran the check (reframe.VERSION)', str),
    RunField('spack_hash', "the Spack hash (7 characters) of the kernels where Spack built "
             "them, else ''", str),
    RunField('loaded_modules', "the modules loaded in the job (LOADEDMODULES), '' where none", str),
    RunField('node_names', 'the nodes the run ran on: the ranks\' hosts, else Slurm\'s node '
             'list (SLURM_JOB_NODELIST), else the job\'s host', str),
    RunField('kernel_release', 'the Linux kernel release of the job\'s node (uname -r)', str),
    RunField('launch_command', 'the launcher line of the job script (launcher, its options, '
             'the program); a job that runs a script of launches: the script and its first '
             'launch', str),
    # -- which session the run belongs to (harnesslib.base.session_id)
    RunField('session', "the session: HARNESS_SESSION (./harness sets one per run or nightly, "
             "shared by its sequential batches), else the ReFrame process's start time and "
             "pid", str),
)

#: The most characters a free-text run field keeps (``field_text``).
FIELD_LIMIT = 300

#: The five fields ReFrame writes per performance variable, in order.
PERFVAR_PARTS = ('value', 'unit', 'ref', 'lower_thres', 'upper_thres')

#: The performance variable that verdicts compare (T_mpi against T_hybrid).
TIME_VARIABLE = 't_total'

#: The ring's time per exchange at one message size (s), at the run's headline k:
#: ``t_msg_<bytes>`` (``RingCheck``), one variable per size of its sweep.  A run
#: that logs them is judged per message size by them instead of by
#: ``TIME_VARIABLE`` (whose value is the run's largest size alone); a run
#: without them (perflogs written before they existed) by ``TIME_VARIABLE``.
MESSAGE_TIME_PREFIX = 't_msg_'


def message_time_variable(size: int) -> str:
    """The ring's per-message-size time variable: ``t_msg_<bytes>``."""
    return f'{MESSAGE_TIME_PREFIX}{int(size)}'


def message_time_size(name: str) -> int | None:
    """The message size in bytes of a ``t_msg_<bytes>`` variable, else None."""
    digits = name.removeprefix(MESSAGE_TIME_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


#: Fields without which a line cannot be paired with another.
REQUIRED = ('job_completion_time', 'system', 'partition', 'environ', 'kernel',
            'mode', 'ranks', 'threads', 'size')


def field_text(text: object, limit: int = FIELD_LIMIT) -> str:
    """`text` as a perflog field: on one line, without the perflog's separator
    ('|' becomes '/'), at most `limit` characters."""
    return ' '.join(str(text).replace('|', '/').splitlines())[:limit]


def fields_after(name: str) -> tuple[str, ...]:
    """Run fields after `name` (e.g. the ones appended after 'result')."""
    names = header_fields()
    return names[names.index(name) + 1:]


def empty_after_result() -> str:
    """The empty values of the run fields after 'result', '|'-terminated (for
    writers of test and benchmark perflogs)."""
    return '|' * len(fields_after('result'))


def header_fields() -> tuple[str, ...]:
    """Names of the run fields, in the order a perflog header starts with."""
    return tuple(f.name for f in RUN_FIELDS)


#: Run fields of a harness perflog line; any other field that is not part of a
#: performance variable's block is unknown: ignored and counted.
KNOWN = frozenset(header_fields())


def check_fields() -> tuple[RunField, ...]:
    """The run fields the checks set as variables."""
    return tuple(f for f in RUN_FIELDS if f.from_check)


def perflog_format() -> str:
    """The ``format`` of the ``filelog`` perflog handler."""
    return ''.join(f'%(check_{f.name})s|' for f in RUN_FIELDS) + '%(check_perfvalues)s'


def perfvar_format() -> str:
    """The ``format_perfvars`` of the ``filelog`` perflog handler."""
    return ''.join(f'%(check_perf_{part})s|' for part in PERFVAR_PARTS)
