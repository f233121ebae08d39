"""The report's tools (``reports/tools``: scripts beside the ``hybridverdict``
package, run as ``python reports/tools/<name>.py``), imported by their tests."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parent.parent / 'reports' / 'tools'


def tool(name: str) -> ModuleType:
    """The module of ``reports/tools/<name>.py`` (importable by its name, as in a
    process the tool spawns)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module(name)
