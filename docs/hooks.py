"""MkDocs hooks (docs/mkdocs.yml): the pages that are generated, never copied by hand.

* the knobs page: ``<!-- knobs-table -->`` in knobs.md becomes the tables of the one
  list of knobs, ``checks/harnesscore/knobs.py`` (the list ``./harness --help`` prints);
* the report's figures and example reports: docs/report_example.py runs ``hybridverdict``
  on the tests' data, and its HTML reports and some of their PNG figures become files of
  the site (``img/*.png``, ``examples/*.html``).
"""

from __future__ import annotations

import base64
import html
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO / 'checks'))

from harnesscore import knobs  # noqa: E402

KNOBS_MARKER = '<!-- knobs-table -->'

#: figures of the example reports: site path -> (dataset, how the figure's alt text starts)
FIGURES = {
    'img/report-heatmap.png': ('node16', 'spmv openmpi@shm, 1 node: speedup T_mpi / T_hybrid'),
    'img/report-speedup.png': ('node16', 'Speedup of hybrid over pure MPI against problem size'),
    'img/science-efficiencies.png': ('every', 'Chow & Hysom efficiency decomposition'),
    'img/science-hockney.png': ('every', 'Hockney fits'),
    'img/science-md-phases.png': ('every', 'MD phase breakdown'),
    'img/science-saturation.png': ('every', 'Ring saturation'),
}
IMG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def example_files() -> dict[str, bytes]:
    """Site path -> content of the example reports and their figures."""
    with tempfile.TemporaryDirectory(prefix='harness-docs-') as tmp:
        proc = subprocess.run([sys.executable, str(DOCS / 'report_example.py'), tmp],
                              capture_output=True, text=True, timeout=600, cwd=REPO)
        if proc.returncode != 0:
            raise PluginError(f'docs/report_example.py failed:\n{proc.stdout}{proc.stderr}')
        reports = dict(line.split(' ', 1) for line in proc.stdout.splitlines())
        pages = {name: Path(path).read_text(encoding='utf-8') for name, path in reports.items()}
    out = {f'examples/report-{name}.html': page.encode() for name, page in pages.items()}
    for path, (name, start) in FIGURES.items():
        found = [data for alt, data in IMG.findall(pages[name])
                 if html.unescape(alt).startswith(start)]
        if not found:
            raise PluginError(f'no figure "{start}..." in the {name} example report')
        out[path] = base64.b64decode(found[0])
    return out


def on_files(files: Files, config) -> Files:
    for path, content in example_files().items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri == 'knobs.md':
        if KNOBS_MARKER not in markdown:
            raise PluginError(f'knobs.md lost its {KNOBS_MARKER} marker')
        markdown = markdown.replace(KNOBS_MARKER, knobs.markdown_table())
    return markdown
