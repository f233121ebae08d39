"""Read the tables that the OSU Micro-Benchmarks (5.x, 6.x, 7.x) print, and find
OSU and the MPI library it links.

Every OSU MPI benchmark prints a title line (``# OSU MPI Latency Test v5.9``),
optional option lines (``# [ pairs: 1 ] [ window size: 64 ]``, 7.x's
``# Datatype: MPI_CHAR.``), one column header line (``# Size  Latency (us)``)
and one row per message size.  `parse_osu` turns it into an `OsuTable`;
anything that is not a table line is ignored, but a row that starts like one
and does not parse is an error naming the line.  What differs between the
versions (recorded outputs of 5.9, 6.2 and 7.4 are in tests/data/osu/) is on
docs/pages/checks.md, "OSU versions": 7.x's osu_latency starts at 1 byte, so
every version's sweep does; its ``-c`` adds a ``Validation`` column of
``Pass``/``Fail`` words, read into `OsuTable.failed`, never into the numbers.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex

from .paths import REPO_DIR
from .schema import field_text
from .stacks import STACK

#: The title line; its version is optional (an OSU built without autotools'
#: PACKAGE_VERSION prints ``# OSU MPI Latency Test``: OsuTable.version '').
_TITLE = re.compile(r'^#\s*OSU MPI(?:-\S+)? (?P<name>.+?) Test(?: v(?P<version>\S+))?\s*$')
#: The line that starts OSU's help, printed (with status 1) for an option
#: it does not know: OSU 5.0-5.3 have no ``-m``.
_USAGE = re.compile(r'^\s*Usage:', re.M)
#: The oldest OSU whose options the checks use (``-m MIN:MAX``).
OSU_OLDEST = '5.4'
_SIZE_ROW = re.compile(r'^\d+\s')
_NUMBER = r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?'
_ROW = re.compile(rf'^(?P<size>\d+)(?P<values>(?:\s+{_NUMBER})+)'
                  r'(?:\s+(?P<check>Pass|Fail))?\s*$')
#: The header of 7.x's data-validation column (``-c``): Pass or Fail per row.
VALIDATION = 'Validation'


class OsuParseError(ValueError):
    """An OSU output that is not a complete, well-formed table."""


@dataclasses.dataclass(frozen=True)
class OsuTable:
    """One OSU benchmark's table: title, column header and rows by size."""

    title: str
    version: str
    columns: tuple[str, ...]
    rows: dict[int, tuple[float, ...]]
    options: tuple[str, ...] = ()
    #: Sizes whose data validation failed (7.x ``-c``: ``Fail``).
    failed: tuple[int, ...] = ()

    def column(self, index: int = 0) -> dict[int, float]:
        """Value of column `index` (0: the first after Size) per size."""
        return {size: vals[index] for size, vals in self.rows.items()}

    @property
    def sizes(self) -> list[int]:
        return sorted(self.rows)


def _columns(header: str) -> tuple[str, ...]:
    """The column names of a header line, Size first (OSU pads with spaces;
    names themselves contain single spaces, e.g. 'Avg Latency(us)').  OSU 7's
    tail columns of a bandwidth test are padded to one space only
    ('... P50 Tail BW(MB/s) P90 Tail BW(MB/s)'): a 'P<n> Tail' starts a column."""
    body = header.lstrip('#').strip()
    return tuple(c.strip() for c in re.split(r'\s{2,}|\s(?=P\d+ Tail )', body)
                 if c.strip())


def parse_osu(text: str, source: str = 'OSU output') -> OsuTable:
    """The table of one OSU benchmark output (the first one, if several).

    Raises OsuParseError when there is no title, no column header or no row,
    or when a row does not parse.
    """
    title = version = ''
    columns: tuple[str, ...] = ()
    options: list[str] = []
    rows: dict[int, tuple[float, ...]] = {}
    failed: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith('#'):
            if rows:            # a second table starts: keep the first
                break
            m = _TITLE.match(line)
            if m:
                title, version = m.group('name'), m.group('version') or ''
            elif title and line.lstrip('#').strip().lower().startswith('size'):
                columns = _columns(line)
            elif title:
                options.append(line.lstrip('#').strip())
            continue
        if not columns or not _SIZE_ROW.match(line):
            continue
        m = _ROW.match(line)
        if m is None:
            raise OsuParseError(f'{source}: line {lineno}: not a table row: {line[:120]!r}')
        values = tuple(float(v) for v in m.group('values').split())
        numeric = [c for c in columns[1:] if c != VALIDATION]
        if len(values) != len(numeric):
            raise OsuParseError(f'{source}: line {lineno}: {len(values)} value(s), the header '
                                f'has {len(numeric)}: {line[:120]!r}')
        if (m.group('check') is not None) != (VALIDATION in columns):
            raise OsuParseError(f'{source}: line {lineno}: a Pass/Fail word needs a '
                                f'{VALIDATION} column and that column a word: {line[:120]!r}')
        size = int(m.group('size'))
        rows[size] = values
        if m.group('check') == 'Fail':
            failed.append(size)
    if not title:
        raise OsuParseError(f'{source}: no "# OSU MPI ... Test" title line')
    if not columns:
        raise OsuParseError(f'{source}: no column header ("# Size ...")')
    if not rows:
        raise OsuParseError(f'{source}: the table has no rows')
    return OsuTable(title=title, version=version, columns=columns, rows=rows,
                    options=tuple(options), failed=tuple(failed))


#: A line that tells of an error: OSU's, the MPI library's or the launcher's.
#: "abort" after a word boundary or an underscore: Open MPI 4 says "MPI_ABORT
#: was invoked on rank 1 in communicator MPI_COMM_WORLD" ('_' is a word
#: character: no \b before "ABORT"), MPICH "Abort(3) on node 1 ...".
_ERROR = re.compile(r'(?i)(\berror\b|(?:\b|_)abort|segmentation fault|bus error|'
                    r'killed by signal)')
#: An Open MPI help message that is a warning: a line of dashes, ``WARNING: ...``
#: and its text up to the closing line of dashes.  The run goes on, and the text
#: may say "error": Open MPI 4's openib BTL on an InfiniBand node run through UCX
#: ("WARNING: There was an error initializing an OpenFabrics device."), a node
#: that cannot bind memory ("This error message means that hwloc ...").
_OMPI_WARNING = re.compile(r'^-{20,}[ \t]*\n[ \t]*WARNING:.*?^-{20,}[ \t]*$', re.M | re.S)
#: Open MPI's notes after a help message shown once for several processes:
#: "[host:pid] 1 more process has sent help message help-....txt / error in
#: device init", "Set MCA parameter "orte_base_help_aggregate" to 0 to see all
#: help / error messages".  The message itself stands above them.
_OMPI_AGGREGATE = re.compile(r'more process(?:es)? ha(?:s|ve) sent help message|'
                             r'to see all help / error messages')


def error_lines(text: str) -> list[str]:
    """The lines of a run's output that tell of an error, but for Open MPI's
    warnings and its notes on repeated help messages."""
    text = _OMPI_WARNING.sub('', text)
    return [ln.strip() for ln in text.splitlines()
            if _ERROR.search(ln) and not _OMPI_AGGREGATE.search(ln)]


def rejected_options(text: str, name: str, options: list[str]) -> str:
    """Why `name` printed no table where OSU printed its usage instead (an
    option this OSU does not know; 5.0-5.3 have no ``-m``), else ''."""
    if _USAGE.search(text) is None or any(_TITLE.match(ln.strip()) for ln in text.splitlines()):
        return ''
    given = f'the options {" ".join(options)}' if options else 'its options'
    return (f'{name} rejected {given} (it printed its usage): '
            f'this OSU is too old, the checks need OSU {OSU_OLDEST} or later')


def expected_sizes(min_size: int, max_size: int) -> list[int]:
    """The sizes OSU runs for ``-m MIN:MAX``: MIN, then doubling up to MAX
    (0 is followed by 1, as in osu_latency)."""
    if min_size < 0 or max_size < min_size:
        raise ValueError(f'bad OSU size range {min_size}:{max_size}')
    sizes, s = [], min_size
    while s <= max_size:
        sizes.append(s)
        s = s * 2 if s else 1
    return sizes


def osu_spec(prefix: str, version: str = '') -> str:
    """What a record's build_spec says of OSU: its version (from the table's
    title, once a run printed one) and its prefix, as a perflog field (a '|'
    of the prefix made the line one field longer than its header, and the
    report skipped it as corrupt)."""
    return field_text(f'osu-micro-benchmarks@{version or "?"} {prefix}', 10 ** 9).rstrip()


def missing_sizes(table: OsuTable, want: list[int]) -> list[int]:
    """Sizes of `want` that the table lacks (a truncated run)."""
    return [s for s in want if s not in table.rows]


# ---- where OSU is, and which MPI library a binary links -------------------

OSU_HOWTO = ('set HARNESS_OSU_PREFIX to its install prefix ({stack} stands for the stack, '
             'e.g. /opt/osu/{stack}), or the environment extra osu_prefix in the system '
             'configuration, or install osu-micro-benchmarks with Spack')

#: Where an OSU install keeps its MPI benchmarks (`make install` and Spack),
#: and bin/ for installs that put them on PATH.
OSU_DIRS = ('libexec/osu-micro-benchmarks/mpi/pt2pt',
            'libexec/osu-micro-benchmarks/mpi/collective', 'bin')


class OsuPrefixError(ValueError):
    """An OSU prefix is configured but is no folder: the checks that need OSU
    fail naming it (a skip would hide the mistake)."""


def given_path(path: str) -> str:
    """`path` as the user gave it: the folder that a link in the checkout's
    ``.var-links`` stands for (``harnesscore.paths.reframe_path`` gives ReFrame
    such a link for a path with a space or a shell character), else `path`."""
    if os.path.islink(path) and os.path.dirname(path) == os.path.join(REPO_DIR, '.var-links'):
        return os.readlink(path)
    return path


def _prefix_origin(shown: str, stack: str) -> str:
    """Where the OSU prefix `shown` of `stack` was set: HARNESS_OSU_PREFIX where
    it names that folder, else the environment's extra osu_prefix."""
    template = os.environ.get('HARNESS_OSU_PREFIX', '').strip()
    if template:
        tail = os.path.normpath(template.replace('{stack}', stack)).lstrip(os.sep)
        if os.path.normpath(shown).endswith(tail):
            return f'HARNESS_OSU_PREFIX={template}'
    return f'osu_prefix of environment {stack}'


def osu_binary(env, name: str) -> tuple[str | None, str]:
    """(path of OSU benchmark `name` for environment `env`, '') or (None, why not).

    The prefix is the environment's extra ``osu_prefix`` (config/settings.py
    fills it from HARNESS_OSU_PREFIX, a site configuration or Spack sets it).
    None configured: (None, how to provide OSU), a skip; a prefix that is no
    folder: ``OsuPrefixError``, a failure.
    """
    stack = env.extras.get('stack', env.name)
    prefix = str(env.extras.get('osu_prefix', '') or '')
    if not prefix:
        return None, f'OSU Micro-Benchmarks not configured for {stack}: {OSU_HOWTO}'
    shown = given_path(prefix)
    if not os.path.isdir(prefix):
        what = 'is not a directory' if os.path.exists(prefix) else 'does not exist'
        raise OsuPrefixError(f'{_prefix_origin(shown, stack)}: the OSU prefix {shown} of '
                             f'{stack} {what}')
    for sub in OSU_DIRS:
        path = os.path.join(prefix, sub, name)
        if os.access(path, os.X_OK):
            return path, ''
    return None, (f'{name} not found under osu_prefix {shown} ({stack}; looked in '
                  f'{", ".join(OSU_DIRS)}): {OSU_HOWTO}')


def mpi_libraries(ldd_output: str) -> set[str]:
    """Resolved paths of the MPI libraries (libmpi*, libmpich*) in ldd's output."""
    out = set()
    for line in ldd_output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == '=>' and parts[0].startswith(('libmpi.', 'libmpich.')):
            out.add(os.path.realpath(parts[2]) if parts[2].startswith('/')
                    else f'{parts[0]} (not found)')
    return out


def env_family(environ) -> str:
    """The family of a ReFrame environment's stack (its extras' ``family``,
    one of ``harnesscore.stacks``' names for the harness's own stacks; '' where
    it names none).  Every environment of config/settings.py and
    config/slurm_systems.py sets it; ReFrame's ``builtin``, which has none,
    lacks the ``mpi`` feature that every check of the harness asks for.  Here,
    not in ``harnesslib.launch`` (which uses it), because this module is
    ReFrame-free."""
    return str(environ.extras.get('family') or '')


def wrapper_link_check(environ) -> str:
    """The shell command that prints what the environment's compiler wrapper
    links (``-L`` folders and ``-l`` libraries): Open MPI's ``-showme:link``,
    MPICH's and MVAPICH2's ``-show``."""
    stack = STACK.get(env_family(environ))
    flag = stack.wrapper_link_flag if stack is not None else '-show'
    return f'{shlex.quote(environ.cc)} {flag}'


def stack_libraries(link_line: str) -> set[str]:
    """The MPI libraries (libmpi*, libmpich*) a wrapper's link line names, as
    resolved paths where one of its ``-L`` folders holds them (the names,
    e.g. ``libmpich.so``, where none does)."""
    words = link_line.split()
    dirs = [w[2:] for w in words if w.startswith('-L') and len(w) > 2]
    names = [w[2:] for w in words if w.startswith('-lmpi')]
    out = set()
    for name in names:
        found = [os.path.realpath(os.path.join(d, f'lib{name}.so')) for d in dirs
                 if os.path.exists(os.path.join(d, f'lib{name}.so'))]
        out.update(found or [f'lib{name}.so'])
    return out


def libraries_agree(linked: set[str], stack: set[str]) -> bool:
    """Whether a binary's MPI libraries (`mpi_libraries`) include one the
    stack's wrapper links (`stack_libraries`): the same file, or the same
    name where the wrapper's folder was not found."""
    for lib in stack:
        if lib in linked:
            return True
        if not lib.startswith('/') and any(
                os.path.basename(p).startswith(lib) for p in linked):
            return True
    return False
