"""The documentation (docs/): the site builds strictly, and its commands run.

Every fenced ``console`` block of docs/pages/*.md and README.md holds commands, each
on a line starting with ``$ `` (a line ending with ``\\`` goes on on the next; other
lines are output, shown only).  Each command is run here from the checkout's root and
must exit 0, unless the line before the block says ``<!-- not-run: REASON -->`` (an
install, a session of minutes), with a reason (docs/pages/development.md, "This
documentation").
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from harnesscore.knobs import KNOBS

DOCS = REPO / 'docs'
PAGES = DOCS / 'pages'
SOURCES = sorted(PAGES.glob('*.md')) + [REPO / 'README.md']
FENCE = re.compile(r'^(\s*)(`{3,})console\s*$')
NOT_RUN = re.compile(r'^\s*<!--\s*not-run:(.*?)-->\s*$')
HAS_MKDOCS = all(importlib.util.find_spec(m) for m in ('mkdocs', 'material'))


@dataclasses.dataclass(frozen=True)
class Block:
    path: str
    line: int                  # of the opening fence, from 1
    commands: tuple[str, ...]
    not_run: str | None        # the reason, where the block is marked not-run

    @property
    def where(self) -> str:
        return f'{self.path}:{self.line}'


def console_blocks(text: str, path: str = '<text>') -> list[Block]:
    """The console blocks of a Markdown text, with their commands."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks = m.groups()
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), '')
        mark = NOT_RUN.match(before)
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != ticks:
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f'{path}:{start + 1}: console block without its closing fence')
        commands: list[str] = []
        joining = False
        for ln in body:
            if joining:
                commands[-1] += '\n' + ln
            elif ln.startswith('$ '):
                commands.append(ln[2:])
            joining = bool(commands) and commands[-1].endswith('\\') and (
                joining or ln.startswith('$ '))
        blocks.append(Block(path, start + 1, tuple(commands),
                            mark.group(1).strip() if mark else None))
        i += 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for src in SOURCES
            for b in console_blocks(src.read_text(encoding='utf-8'),
                                    str(src.relative_to(REPO)))]


def runnable() -> list[tuple[str, str]]:
    return [(f'{b.where}#{n}', cmd) for b in all_blocks() if b.not_run is None
            for n, cmd in enumerate(b.commands, 1)]


def test_the_parser_finds_commands_continuations_and_marks():
    text = '\n'.join([
        'Some text.', '', '```console', '$ ./harness --help', 'output line',
        '$ HARNESS_X=1 \\', '    reframe --list', '```', '',
        '<!-- not-run: takes an hour -->', '```console', '$ ./harness run', '```',
        '* a list item:', '', '    ```console', '    $ echo in a list', '    ```',
        '```sh', '$ not a console block', '```'])
    blocks = console_blocks(text)
    assert [b.commands for b in blocks] == [
        ('./harness --help', 'HARNESS_X=1 \\\n    reframe --list'), ('./harness run',),
        ('echo in a list',)]
    assert [b.not_run for b in blocks] == [None, 'takes an hour', None]
    with pytest.raises(ValueError, match='without its closing fence'):
        console_blocks('```console\n$ true\n')


def test_every_console_block_has_commands_and_a_not_run_says_why():
    blocks = all_blocks()
    assert len(runnable()) >= 10, 'the runnable commands of the docs went missing'
    for b in blocks:
        assert b.commands, f'{b.where}: a console block without a "$ " command'
        assert b.not_run is None or b.not_run, f'{b.where}: not-run without a reason'
    # the expensive ones are documented and marked, not dropped
    marked = [c for b in blocks if b.not_run for c in b.commands]
    assert './harness run' in marked and './harness test' in marked


@pytest.mark.parametrize('where, command', runnable(), ids=[w for w, _ in runnable()])
def test_a_documented_command_exits_0(where, command, tmp_path):
    """Run as the reader would, from the checkout's root; `.venv/bin/` is the
    environment running these tests, and the var dir a fresh one."""
    venv_bin = str(Path(sys.executable).parent)
    command = re.sub(r'(?<![\w/.])\.venv/bin/', shlex.quote(venv_bin) + '/', command)
    env = {**os.environ, 'HARNESS_VAR_DIR': str(tmp_path / 'var'), 'HARNESS_QUIET': '1'}
    proc = subprocess.run(['bash', '-c', command], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, (f'{where}: `{command}` exited {proc.returncode}\n'
                                  f'{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}')


@pytest.mark.skipif(not HAS_MKDOCS, reason='MkDocs and mkdocs-material are not installed '
                    '(pip install -e ".[test]" installs them): the site is not built')
def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / 'site'
    proc = subprocess.run(
        [sys.executable, '-m', 'mkdocs', 'build', '--strict', '-f', str(DOCS / 'mkdocs.yml'),
         '-d', str(site)], capture_output=True, text=True, timeout=600,
        env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert 'WARNING' not in proc.stderr, proc.stderr
    # every page in the navigation
    for page in PAGES.glob('*.md'):
        name = 'index.html' if page.stem == 'index' else f'{page.stem}/index.html'
        assert (site / name).is_file(), name
    # the knobs' tables, generated from the one list
    knobs_page = (site / 'knobs/index.html').read_text(encoding='utf-8')
    for k in KNOBS:
        assert k.name.replace('<', '&lt;').replace('>', '&gt;') in knobs_page, k.name
    assert 'knobs-table' not in knobs_page
    # the report's figures and example reports, drawn by hybridverdict
    for png in ('report-heatmap', 'report-speedup', 'science-hockney'):
        assert (site / f'img/{png}.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n', png
    for name in ('node16', 'every'):
        page = (site / f'examples/report-{name}.html').read_text(encoding='utf-8')
        assert 'data:image/png;base64,' in page and '<h2 id="verdicts">' in page


def test_the_knob_tables_are_generated_never_copied():
    """No page or README holds a hand-made row of the knobs' table."""
    for src in SOURCES:
        rows = [ln for ln in src.read_text(encoding='utf-8').splitlines()
                if re.match(r'\|\s*`(HARNESS_|RFM_REFERENCE_PREFIX)', ln)]
        assert not rows, f'{src.name}: a knob table copied by hand: {rows[:3]}'
    assert '<!-- knobs-table -->' in (PAGES / 'knobs.md').read_text(encoding='utf-8')


def test_every_knob_is_explained_on_the_page_it_links_to():
    for k in KNOBS:
        if k.see:
            text = (PAGES / k.see).read_text(encoding='utf-8')
            assert any(name in text for name in (k.name, *k.names())), (k.name, k.see)


def test_the_readme_is_a_front_door_into_the_pages():
    text = (REPO / 'README.md').read_text(encoding='utf-8')
    assert len(text.splitlines()) <= 220
    links = re.findall(r'\]\((docs/pages/[^)#]+\.md)(?:#[^)]*)?\)', text)
    assert len(set(links)) >= 8, links
    missing = [link for link in links if not (REPO / link).is_file()]
    assert not missing, missing
    # the pages the navigation names exist, and every page is in it
    nav = re.findall(r':\s*(\S+\.md)\s*$', (DOCS / 'mkdocs.yml').read_text(), re.M)
    assert sorted(nav) == sorted(p.name for p in PAGES.glob('*.md'))


def test_the_data_flow_and_the_change_table_name_real_folders_and_files():
    """The house the README draws is the house in the tree: every path named in
    "How data flows" and "Where a change goes" exists (var/ is made by runs)."""
    text = (REPO / 'README.md').read_text(encoding='utf-8')
    start = text.index('## How data flows')
    end = text.index('## Documentation', start)
    named = set(re.findall(r'(?<![\w/.-])((?:src|checks|config|reports|docs|tests)/'
                           r'[\w./-]*[\w/])', text[start:end]))
    assert len(named) >= 15, named
    missing = sorted(p for p in named if '<' not in p and not (REPO / p).exists())
    assert not missing, f'README names what is not in the tree: {missing}'


def test_every_module_and_folder_has_its_place_in_the_drawing():
    """The other way round: every module of the checks' two libraries, every check
    file, configuration file and folder, kernel folder and report tool (as git
    tracks them) is named in "How data flows" or "Where a change goes": a new one
    gets its place in the house the README draws."""
    text = (REPO / 'README.md').read_text(encoding='utf-8')
    start = text.index('## How data flows')
    words = set(re.findall(r'[\w-]+', text[start:text.index('## Documentation', start)]))
    tracked = [Path(p) for p in subprocess.run(
        ['git', 'ls-files'], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()]
    expected = set()
    for path in tracked:
        folder, top = path.parent.as_posix(), path.parts[0]
        if path.suffix == '.py' and path.stem != '__init__' and folder in (
                'checks', 'checks/harnesslib', 'checks/harnesscore', 'config', 'reports/tools'):
            expected.add(path.stem)
        elif top in ('config', 'src') and len(path.parts) > 2 and path.parts[1] != 'tests':
            expected.add(path.parts[1])       # a folder of the configuration or the kernels
    assert len(expected) >= 30, expected
    missing = sorted(expected - words)
    assert not missing, f'README does not place these in "How data flows": {missing}'


def test_every_cmake_option_of_the_kernels_is_on_their_page():
    """The kernels' CMake options (option(), cache strings) are each named on the
    kernels' page."""
    cmake = (REPO / 'src' / 'CMakeLists.txt').read_text(encoding='utf-8')
    options = set(re.findall(r'^option\((KERNEL_\w+)', cmake, re.M)) | \
        set(re.findall(r'^set\((KERNEL_\w+) "[^"]*" CACHE STRING', cmake, re.M))
    assert {'KERNEL_OPENMP', 'KERNEL_NATIVE', 'KERNEL_SANITIZE'} <= options, options
    page = (PAGES / 'kernels.md').read_text(encoding='utf-8')
    assert not sorted(o for o in options if f'`{o}`' not in page)
