"""The one list of knobs (harnesscore.knobs.KNOBS) against the code that reads them.

The sources are grepped for ``HARNESS_[A-Z0-9_]+``: a knob the code names but the
list lacks fails, and so does a listed knob that no source names.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from harnesscore import knobs

#: Where the harness's code is: the entry point, the checks and their libraries,
#: the report, the configuration (with its modules), the test beds, CI, the tests'
#: shared fixtures; src/ for the kernels' own variables.  Every HARNESS_* name
#: these hold must be a knob.
SOURCES = ('harness', 'checks', 'reports', 'config', 'tests/slurm', '.ci', 'src',
           'tests/conftest.py', 'tests/site_checks')
#: Where a listed knob may be read: the code, or a test (the test-only knobs, such as
#: HARNESS_HPCTESTLIB).  Tests also name made-up variables, so they are not SOURCES.
READERS = (*SOURCES, 'tests')
#: Not sources of knobs: the list itself, this test, generated and recorded files.
SKIP = {REPO / 'checks/harnesscore/knobs.py', Path(__file__).resolve()}
SKIP_DIRS = {'__pycache__', 'data', '.pytest_cache'}
TOKEN = re.compile(r'\bHARNESS_[A-Z0-9_]+')


def source_files(root: Path = REPO, sources: tuple[str, ...] = SOURCES) -> list[Path]:
    files: list[Path] = []
    for name in dict.fromkeys(sources):
        top = root / name
        if top.is_file():
            files.append(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(
                '.egg-info')]
            files += [Path(dirpath, f) for f in filenames if not f.endswith(('.pyc', '.png'))]
    return sorted({f for f in files if f.resolve() not in SKIP})


def read(path: Path) -> str:
    try:
        return path.read_text(encoding='utf-8')
    except (UnicodeDecodeError, OSError):
        return ''


def used_tokens(files: list[Path]) -> dict[str, Path]:
    """Every HARNESS_* token in `files`, with the first file that names it."""
    found: dict[str, Path] = {}
    for path in files:
        for token in TOKEN.findall(read(path)):
            found.setdefault(token, path)
    return found


def unlisted(tokens: dict[str, Path]) -> list[str]:
    """The tokens no knob stands for.  A token ending in ``_`` (``HARNESS_CHANGE_*``
    in a comment, ``f'HARNESS_{stack}_PREFIX'``) is a prefix: some knob must start
    with it."""
    names = [n for k in knobs.KNOBS for n in k.names()]
    bad = []
    for token, path in sorted(tokens.items()):
        if token.endswith('_'):
            ok = any(n.startswith(token) for n in names)
        else:
            ok = knobs.knob(token) is not None
        if not ok:
            bad.append(f'{token} ({path.relative_to(REPO) if path.is_relative_to(REPO) else path})')
    return bad


def test_every_knob_the_code_reads_is_listed():
    bad = unlisted(used_tokens(source_files()))
    assert not bad, ('read by the code but not in checks/harnesscore/knobs.py KNOBS '
                     f'(add each with its default, meaning, commands and group): {bad}')


def test_every_listed_knob_is_read_somewhere():
    texts = '\n'.join(read(f) for f in source_files(sources=READERS))
    tokens = set(TOKEN.findall(texts))
    unused = []
    for k in knobs.KNOBS:
        if k.is_pattern:
            # a pattern is read by name (HARNESS_MPICH_PREFIX) or built from its
            # parts (f'HARNESS_{name.upper()}_SPACK_SPEC')
            suffix = k.name.split('<STACK>', 1)[1]
            if not any(k.matches(t) for t in tokens) and \
                    not re.search(r'HARNESS_\{[^}]*\}' + re.escape(suffix), texts):
                unused.append(k.name)
        elif not re.search(rf'\b{re.escape(k.name)}\b', texts):
            unused.append(k.name)
    assert not unused, f'listed in KNOBS but read by no source: {unused}'


def test_every_variable_the_kernels_read_is_listed():
    """The kernels' own variables (``getenv("KERNEL_...")`` in src/) are knobs too."""
    getenv = re.compile(r'getenv\("(KERNEL_[A-Z0-9_]+)"\)')
    read_by_kernels = {name for f in source_files(sources=('src',))
                       for name in getenv.findall(read(f))}
    assert {'KERNEL_FAULT', 'KERNEL_FAULT_HANG'} <= read_by_kernels
    assert sorted(n for n in read_by_kernels if knobs.knob(n) is None) == []


def test_the_check_finds_a_knob_missing_from_the_list(tmp_path):
    """The scan itself: a source naming an unknown knob is caught (the name is
    built here so that this file names none)."""
    name = 'HARNESS_' + 'NOT_A_REAL_KNOB'
    fake = tmp_path / 'settings.py'
    fake.write_text(f"os.environ.get('{name}')\nos.environ.get('HARNESS_REPEAT')\n"
                    f"os.environ['HARNESS_ZZZ_' + x]\n")
    bad = unlisted(used_tokens([fake]))
    assert [b.split()[0] for b in bad] == [name, 'HARNESS_ZZZ_']


def test_the_table_is_well_formed():
    names = [k.name for k in knobs.KNOBS]
    assert len(names) == len(set(names)), 'a knob listed twice'
    for k in knobs.KNOBS:
        assert k.group in knobs.GROUPS, (k.name, k.group)
        assert k.default.strip() and k.meaning.strip() and k.commands, k.name
        assert '\n' not in k.meaning and len(k.meaning) <= 200, k.name
        assert re.fullmatch(r'[A-Z][A-Z0-9_]*(<STACK>[A-Z0-9_]*)?', k.name), k.name
        assert not k.see or (REPO / 'docs/pages' / k.see).is_file(), (k.name, k.see)
    assert {k.group for k in knobs.KNOBS} == set(knobs.GROUPS), 'an empty group'
    # the one RFM_* variable the harness documents
    assert knobs.knob('RFM_REFERENCE_PREFIX') is not None


@pytest.mark.parametrize('name, knob', [
    ('HARNESS_MPICH_PREFIX', 'HARNESS_<STACK>_PREFIX'),
    ('HARNESS_MVAPICH2_SPACK_SPEC', 'HARNESS_<STACK>_SPACK_SPEC'),
    ('HARNESS_OSU_PREFIX', 'HARNESS_OSU_PREFIX'),     # not a stack: a knob of its own
    ('HARNESS_REPEAT', 'HARNESS_REPEAT'),
    ('HARNESS_INTEL_PREFIX', None),                    # no such stack
    ('HARNESS_REPEATS', None),
])
def test_a_name_is_the_knob_it_stands_for(name, knob):
    found = knobs.knob(name)
    assert (found.name if found else None) == knob


def test_the_listed_defaults_are_the_ones_the_code_takes(monkeypatch):
    """What ./harness --help and docs/pages/knobs.md say holds when a knob is unset."""
    from harnesscore import bands, plan, quiet
    from harnesslib import launch
    from hybridverdict import baseline
    from hybridverdict.changes import Knobs
    for k in knobs.KNOBS:
        monkeypatch.delenv(k.name, raising=False)
    changes = Knobs.from_env({})
    taken = {'HARNESS_REPEAT': plan.samples_per_run(), 'HARNESS_MAX_ROUNDS': plan.max_rounds(),
             'HARNESS_FIRST_ROUND': plan.first_round(), 'HARNESS_SOFT_ZONE': bands.soft_zone(),
             'HARNESS_SNAPSHOT_S': quiet.sample_interval(),
             'HARNESS_FALSE_ALARM': baseline._env_rate(),
             **{name: getattr(changes, field) for field, name in Knobs.ENV.items()}}
    for name, value in taken.items():
        assert float(knobs.knob(name).default) == value, name
    assert knobs.knob('HARNESS_MPI_ENV').default == launch.mpi_env_mode()
    # a default path is the checkout's, which a relative value is not (it is taken
    # from where the command runs): './.venv' read as the user's own folder
    from harnesscore.paths import REFERENCES_DIR, REPO_DIR
    assert 'VENV=${HARNESS_VENV:-$ROOT/.venv}' in (Path(REPO_DIR) / 'harness').read_text()
    assert knobs.knob('HARNESS_VENV').default == '<checkout>/.venv'
    assert knobs.knob('RFM_REFERENCE_PREFIX').default == '<checkout>/' + os.path.relpath(
        REFERENCES_DIR, REPO_DIR)
    assert knobs.knob('HARNESS_CLUSTERS').default == '<checkout>/config/site_*.py'


def test_help_text_and_markdown_name_every_knob():
    text, table = knobs.help_text(), knobs.markdown_table()
    for k in knobs.KNOBS:
        assert k.name in text and f'`{k.name}`' in table, k.name
    for title in knobs.GROUPS.values():
        assert title in text
    assert max(len(line) for line in text.splitlines()) <= 80
    # Markdown: every row has the five columns (a '|' in a cell is escaped)
    rows = [ln for ln in table.splitlines() if ln.startswith('| `')]
    assert len(rows) == len(knobs.KNOBS)
    assert all(len(re.split(r"(?<!\\)\|", row)) == 7 for row in rows), rows


def test_the_list_needs_no_venv():
    """./harness --help prints it before anything is installed: the module runs on
    the system's Python with only checks/ on its path."""
    python = '/usr/bin/python3' if Path('/usr/bin/python3').exists() else sys.executable
    proc = subprocess.run([python, '-S', '-m', 'harnesscore.knobs', '--help-text'],
                          capture_output=True, text=True, timeout=60, cwd='/',
                          env={'PATH': os.environ.get('PATH', ''),
                               'PYTHONPATH': str(REPO / 'checks')})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == knobs.help_text()


def test_a_path_list_with_a_comma_keeps_the_blanks_of_its_paths():
    from harnesscore.knobs import split_list, split_paths
    assert split_paths('a.py b.py') == split_list('a.py b.py') == ['a.py', 'b.py']
    assert split_paths(' my sites/a.py , b.py,') == ['my sites/a.py', 'b.py']
    assert split_paths('my sites/a.py,') == ['my sites/a.py']
    assert split_paths('') == split_paths(' , ') == []
