"""The packages' layering: the core is ReFrame-free, the report reads only the
core, and no import cycle exists between modules (imports inside functions
included)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = {
    'harnesscore': REPO / 'checks' / 'harnesscore',
    'harnesslib': REPO / 'checks' / 'harnesslib',
    'hybridverdict': REPO / 'reports' / 'hybridverdict',
}


def _modules() -> dict[str, Path]:
    return {f'{pkg}.{path.stem}': path
            for pkg, folder in PACKAGES.items() for path in sorted(folder.glob('*.py'))
            if path.stem != '__init__'}


def _imports(name: str, path: Path) -> set[str]:
    """The project modules `name` imports, anywhere in the file."""
    pkg = name.split('.')[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = pkg + ('.' + base if base else '')
            found.add(base)
            found.update(f'{base}.{alias.name}' for alias in node.names)
    return {m for m in found if m in _modules()}


def test_the_core_imports_neither_reframe_nor_the_checks_library():
    code = ('import importlib, pkgutil, sys, harnesscore\n'
            'for m in pkgutil.iter_modules(harnesscore.__path__):\n'
            '    importlib.import_module("harnesscore." + m.name)\n'
            'bad = sorted(m for m in sys.modules if m.split(".")[0] in '
            '("reframe", "harnesslib", "hybridverdict"))\n'
            'print(",".join(bad))\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == '', f'harnesscore pulls in {out}'
    for name, path in _modules().items():
        if name.startswith('harnesscore.'):
            text = path.read_text()
            assert 'import reframe' not in text and 'from reframe' not in text, name


def test_the_report_reads_the_core_not_the_checks_library():
    bad = {name: sorted(m for m in _imports(name, path) if m.startswith('harnesslib'))
           for name, path in _modules().items() if name.startswith('hybridverdict.')}
    assert not {k: v for k, v in bad.items() if v}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (module -> modules it imports), [] if none."""
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, trail + [nxt])):
                return cycle
        state[node] = 2
        return []

    for name in sorted(graph):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return []


def test_no_import_cycle():
    graph = {name: _imports(name, path) - {name} for name, path in _modules().items()}
    assert find_cycle(graph) == []


def test_imports_inside_functions_count_and_a_cycle_is_found(tmp_path):
    """placement <-> plan as it was: the import hidden inside a function."""
    plan = tmp_path / 'plan.py'
    plan.write_text('def f():\n    from .placement import cores_per_node\n')
    graph = {'harnesslib.plan': _imports('harnesslib.plan', plan),
             'harnesslib.placement': {'harnesslib.plan'}}
    assert graph['harnesslib.plan'] == {'harnesslib.placement'}
    assert find_cycle(graph) == ['harnesslib.placement', 'harnesslib.plan',
                                 'harnesslib.placement']
