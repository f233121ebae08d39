"""Reading the harness's knobs (``HARNESS_*`` environment variables)."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from harnesscore.stacks import STACKS


def split_list(text: str) -> list[str]:
    """A list knob's items: separated by commas, spaces or both
    (``openmpi,mpich``, ``"openmpi mpich"``, ``"openmpi, mpich"``)."""
    return [item for item in re.split(r'[,\s]+', text.strip()) if item]


def split_paths(text: str) -> list[str]:
    """A list knob of paths (``HARNESS_CLUSTERS``): split at its commas where it
    has one, so that a path may hold a blank (``"my sites/a.py,"``), else at blanks."""
    if ',' in text:
        return [item.strip() for item in text.split(',') if item.strip()]
    return split_list(text)


def env_flag(name: str, default: bool = False) -> bool:
    """The 0/1 knob `name` (unset or empty: `default`); any other value ('yes',
    'true') is a ValueError naming it, never taken as on or off."""
    text = os.environ.get(name, '').strip()
    if text not in ('', '0', '1'):
        raise ValueError(f'{name} must be 0 or 1, got {text!r}')
    return default if not text else text == '1'


def env_list(name: str) -> list[str]:
    """The items of the list knob `name` ([] when unset or empty)."""
    return split_list(os.environ.get(name, ''))


# --------------------------------------------------------------------------
# The one list of the harness's knobs: `./harness --help` prints it, docs/hooks.py
# makes the knobs page of it, and tests/test_knobs.py fails when the code reads a
# ``HARNESS_*`` variable that is not here, or this lists one nobody reads.

#: The groups, in the order the help and the docs show them, with their titles.
GROUPS: dict[str, str] = {
    'install': 'install: where the harness installs and what it may install',
    'run': 'run: what a session runs and where its files go',
    'plan': 'plan: what fits the time budget, and the rounds of the verdicts',
    'statistics': 'statistics: how a band or a pair is judged',
    'nightly': 'nightly: the acceptance run and its references',
    'changes': 'changes: what makes a change point (hybridverdict changes, the morning page)',
    'site': 'site: clusters, modules, Spack and OSU',
    'test-only': 'test-only: set by the test beds or read by the tests',
}

#: The stacks a ``<STACK>`` in a knob's name stands for (``HARNESS_MPICH_PREFIX``).
STACK_NAMES: tuple[str, ...] = tuple(stack.name.upper() for stack in STACKS)


@dataclass(frozen=True)
class Knob:
    """One environment variable the harness reads.  `name` is the variable, or a
    pattern where ``<STACK>`` stands for each of :data:`STACK_NAMES`."""

    name: str
    default: str          # as text: what holds when the variable is unset
    meaning: str          # one line
    commands: tuple[str, ...]   # what reads it: ./harness commands, reframe, tools
    group: str
    see: str = ''         # the documentation page that says more (docs/pages/<see>)

    @property
    def is_pattern(self) -> bool:
        return '<STACK>' in self.name

    def matches(self, name: str) -> bool:
        return name in self.names()

    def names(self) -> list[str]:
        """Every variable this knob stands for."""
        if not self.is_pattern:
            return [self.name]
        return [self.name.replace('<STACK>', stack) for stack in STACK_NAMES]


_RUN_NIGHTLY = ('run', 'nightly')
_HARNESS = ('run', 'test', 'setup', 'nightly', 'baseline')
_SESSION = ('run', 'nightly', 'reframe')


def _group(group: str, commands: tuple[str, ...] = (), see: str = '') -> Callable[..., Knob]:
    """What makes the knobs of `group` from (name, default, meaning), with the
    group's `commands` and `see` page unless they name their own."""
    def make(name: str, default: str, meaning: str, commands: tuple[str, ...] = commands,
             see: str = see) -> Knob:
        return Knob(name, default, meaning, commands, group, see=see)
    return make


_install = _group('install', _HARNESS, see='getting-started.md')
_run = _group('run', _SESSION, see='configuration.md')
_plan = _group('plan', (*_SESSION, 'python -m harnesslib.plan'), see='plan.md')
_statistics = _group('statistics', see='statistics.md')
_nightly = _group('nightly', see='nightly.md')
# the change-point knobs: read by hybridverdict changes, the report and run/nightly
_changes = _group('changes', ('hybridverdict changes', 'hybridverdict', *_RUN_NIGHTLY),
                  see='nightly.md')
_site = _group('site', _SESSION, see='cluster.md')
_spack = _group('site', _SESSION, see='spack.md')    # the site's Spack knobs
_test_only = _group('test-only', see='cluster.md')
_kernel = _group('test-only', ('the kernels',), see='checks.md')    # the kernels' own

KNOBS: tuple[Knob, ...] = (
    _install('HARNESS_VENV', '<checkout>/.venv', 'the Python virtual environment ./harness '
             'installs into and runs from'),
    _install('HARNESS_NO_APT', 'unset', '1: never call apt-get, even as root (say what is '
             'missing and carry on)'),

    _run('HARNESS_VAR_DIR', '<checkout>/var', 'perflogs, builds, stage, outputs, reports, '
         'history; a relative one is taken from where the command runs',
         ('run', 'nightly', 'baseline', 'reframe', 'hybridverdict')),
    _run('HARNESS_STACKS', 'all stacks found', 'restrict the MPI stacks, e.g. '
         '"openmpi,mpich" (commas, spaces or both; an unknown name is an error)'),
    _run('HARNESS_<STACK>_PREFIX', 'the stack\'s suffixed tools on PATH, if any',
         'install prefix of that stack (<prefix>/bin/mpicc, mpiexec); a stack without '
         'Debian packages is there only with it', (*_SESSION, 'harness-spack-site')),
    _run('HARNESS_REPEAT', '3', 'samples of every kernel run (the checks\' sample parameter), '
         '1 to 100', (*_SESSION, 'hybridverdict-baseline'), see='getting-started.md'),
    _run('HARNESS_REFRAME_OPTS', 'none', 'extra reframe options for run and nightly '
         '(e.g. "-n SpmvCheck", "-T benchmark", "--system local-slurm"), split at blanks '
         'and passed as written: no quotes, no file patterns ("-p .*" reaches reframe)',
         _RUN_NIGHTLY, see='getting-started.md'),
    _run('HARNESS_REPORT_OPTS', 'none', 'extra hybridverdict options for the report of run '
         'and nightly (e.g. "--functional-verdicts"), split at blanks as '
         'HARNESS_REFRAME_OPTS', _RUN_NIGHTLY, see='report.md'),
    _run('HARNESS_MPI_ENV', 'clean', 'clean: the shell\'s MPI and OpenMP tuning variables '
         '(OMPI_MCA_*, UCX_*, MPICH_*, OMP_*, ...) and the user\'s own MPI configuration files '
         'do not reach the runs; keep: they do (recorded either way)'),
    _run('HARNESS_LOCK_WAIT', '0', 'seconds run, nightly and baseline wait for another '
         'session of the same var dir (0: refuse at once, naming it)',
         ('run', 'nightly', 'baseline')),
    _run('HARNESS_SESSION', 'start time and pid', 'the session name every run records '
         '(perflog field session); baselines and change points group runs by it',
         see='checks.md'),
    _run('HARNESS_QUIET', 'unset', '1: no "left out" lines from the configuration'),
    _run('HARNESS_SNAPSHOTS', '1', '1: machine-quietness snapshots around the runs; 0: none '
         '(every run busy=unknown)', see='statistics.md'),
    _run('HARNESS_SNAPSHOT_S', '0.2', 'sample interval of a quietness snapshot, seconds '
         '(above 0, at most 60)', see='statistics.md'),

    _plan('HARNESS_BUDGET', '30m (plain reframe: 15m per part)', 'time the whole session '
          'may take (900s, 1h30m, minutes), split across its partitions and stacks (those '
          '-p/--system select; a -n selection is not counted); "10m/part" gives each its own'),
    _plan('HARNESS_PLAN_COSTS', '$HARNESS_VAR_DIR/plan-costs.json', 'the measured seconds '
          'per run the plan estimates from (written after every run and nightly)'),
    _plan('HARNESS_MAX_ROUNDS', '15', 'most rounds of one pair under the sequential rounds '
          '(1 to 100; the report\'s stopped column counts the same cap)',
          (*_RUN_NIGHTLY, 'python -m hybridverdict.sequential', 'hybridverdict'),
          see='statistics.md'),
    _plan('HARNESS_FIRST_ROUND', '0', 'number of a session\'s first round (the sequential '
          'rounds set it; 0 to 1000)', ('reframe', 'python -m hybridverdict.sequential'),
          see='statistics.md'),

    _statistics('HARNESS_SOFT_ZONE', '0.7', 'where a reference band\'s warning zone starts, '
                'a fraction of its tolerance in (0, 1]; 1: no soft zone', _SESSION),
    _statistics('HARNESS_FALSE_ALARM', '0.01', 'the rate at which a check may fail on a '
                'quiet night; baseline sizes the bands for it, in (0, 1)',
                ('baseline', 'hybridverdict-baseline'), see='nightly.md'),

    _nightly('HARNESS_CHANGES_FATAL', 'unset', '1: a regression on the morning page ("Since '
             'the last night") fails the night (exit status 4); only 0 or 1', ('nightly',)),
    _nightly('RFM_REFERENCE_PREFIX', '<checkout>/config/references', 'directory of the per-system '
             'references files <system>.yaml (ReFrame\'s own variable)',
             ('baseline', 'reframe', 'hybridverdict-baseline')),

    _changes('HARNESS_CHANGE_MIN_SEGMENT', '3', 'sessions on each side of a change point'),
    _changes('HARNESS_CHANGE_P_VALUE', '0.01', 'largest p-value of the permutation test of a '
             'change point'),
    _changes('HARNESS_CHANGE_MAGNITUDE', '0.05', 'smallest change, a fraction below 1 (0.05: 5%)'),
    _changes('HARNESS_CHANGE_SESSION_GAP', '60', 'minutes between runs that start a new '
             'session (runs without a session field)'),

    _site('HARNESS_CLUSTERS', '<checkout>/config/site_*.py', 'the cluster files (a comma '
          'list: with a comma, blanks belong to the paths; each defines CLUSTER as in '
          'config/cluster_template.py)'),
    _site('HARNESS_MODULES_SYSTEM', 'the cluster file\'s', 'override a cluster file\'s '
          'modules system (e.g. nomod, to check it where its modules are not)'),
    _site('HARNESS_OSU_PREFIX', 'unset: the OSU checks skip', 'OSU Micro-Benchmarks install '
          'prefix; {stack} is replaced by the stack\'s name', see='checks.md'),
    _spack('HARNESS_SPACK', 'unset', '1: build the kernels with Spack when spack is on PATH'),
    _spack('HARNESS_<STACK>_SPACK_SPEC', 'none', 'the Spack spec of that stack\'s kernels '
           '(Spack is then demanded)'),
    _spack('HARNESS_SPACK_SYSTEM', 'ReFrame\'s system name', 'which '
           'config/spack/systems/<name> spack.yaml includes', (*_SESSION, 'spack')),
    _spack('HARNESS_SPACK_INSTALL_TREE', '<system prefix>/spack/opt', 'Spack install tree '
           'of the kernels the checks build (the system prefix: $HARNESS_VAR_DIR for local, '
           '$HARNESS_VAR_DIR/<system> for a cluster or declared)'),
    _site('HARNESS_MODULE_STACK', 'set by the module', 'the stack a loaded module of '
          'config/modules/ provides (the modules set it; the multi-node tests read it)',
          ('module load',)),

    _test_only('HARNESS_TEST_CLUSTER', 'unset', 'folder of the multi-node test cluster '
               '(eval "$(tests/slurm/cluster.sh env DIR)" sets it); system test-cluster '
               'reads it', ('reframe', 'test')),
    _test_only('HARNESS_HPCTESTLIB', 'unset: those tests skip', 'a ReFrame checkout holding '
               'hpctestlib/, for the test of hpctestlib\'s OSU checks', ('test',),
               see='development.md'),
    _test_only('SLURM_TESTBED_PORT', '16817', 'slurmctld\'s port of the Slurm test beds '
               '(slurmd takes the next)', ('tests/slurm/testbed.sh',)),
    _test_only('SLURM_TESTBED_WAIT', '60', 'seconds the Slurm test beds wait for their '
               'nodes', ('tests/slurm/testbed.sh', 'tests/slurm/cluster.sh')),
    _kernel('KERNEL_FINALIZE_TIMEOUT', '20', 'seconds before a kernel rank stuck in '
            'MPI_Finalize is ended with a warning (0: wait forever)'),
    _kernel('KERNEL_FAULT', 'unset', '<name>: in a fault-injection build, the one named '
            'defect injected instead of the corrupted value (the names: kernels.md; none: '
            'nothing injected; another name is refused)',
            see='kernels.md'),
    _kernel('KERNEL_FAULT_HANG', 'unset', '<kernel>: in a fault-injection build, rank 0 of '
            'that kernel hangs after MPI init'),
)


def knob(name: str) -> Knob | None:
    """The knob `name` is (or is an instance of, for a pattern), else None."""
    return next((k for k in KNOBS if k.matches(name)), None)


def grouped() -> list[tuple[str, list[Knob]]]:
    """The knobs per group, in the order of :data:`GROUPS`."""
    return [(group, [k for k in KNOBS if k.group == group]) for group in GROUPS]


def help_text(width: int = 79) -> str:
    """The knobs as ``./harness --help`` prints them: per group, each knob with its
    default and what reads it, then its meaning."""
    lines = ['Every knob, by group (<STACK>: ' + ', '.join(STACK_NAMES) + '):']
    for group, knobs in grouped():
        lines += ['', f'  {GROUPS[group]}']
        for k in knobs:
            lines += _wrap(f'{k.name} (default: {k.default}; read by {", ".join(k.commands)})',
                           width, 4, 10)
            lines += _wrap(k.meaning, width, 8, 8)
    return '\n'.join(lines) + '\n'


def _wrap(text: str, width: int, first: int, rest: int) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=' ' * first, subsequent_indent=' ' * rest,
                         break_long_words=False, break_on_hyphens=False)


def _cell(text: str) -> str:
    """`text` as a Markdown table cell: read literally (no emphasis, no HTML)."""
    return text.translate(str.maketrans({'|': '\\|', '*': '\\*', '<': '&lt;', '>': '&gt;'}))


def _value(text: str) -> str:
    """A default as a Markdown cell: a literal value as code, words as words."""
    words = text in ('unset', 'none') or ' ' in text
    return _cell(text) if words else f'`{text}`'


def markdown_table() -> str:
    """The knobs as Markdown: one table per group (docs/pages/knobs.md; `see` links to
    the page beside it)."""
    out: list[str] = []
    for group, knobs in grouped():
        out += [f'## {GROUPS[group].split(":", 1)[0]}', '',
                GROUPS[group].split(': ', 1)[1].capitalize() + '.', '',
                '| variable | default | meaning | read by | more |',
                '| --- | --- | --- | --- | --- |']
        for k in knobs:
            more = f'[{k.see[:-3]}]({k.see})' if k.see else ''
            out.append(f'| `{k.name}` | {_value(k.default)} | {_cell(k.meaning)} | '
                       + ', '.join(f'`{c}`' for c in k.commands) + f' | {more} |')
        out.append('')
    return '\n'.join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog='python -m harnesscore.knobs',
                                 description='The harness\'s knobs (environment variables).')
    what = ap.add_mutually_exclusive_group()
    what.add_argument('--help-text', action='store_true',
                      help='the knobs as ./harness --help prints them (the default)')
    what.add_argument('--markdown', action='store_true',
                      help='the knobs as Markdown tables, one per group')
    args = ap.parse_args(argv)
    sys.stdout.write(markdown_table() if args.markdown else help_text())
    return 0


if __name__ == '__main__':
    sys.exit(main())
