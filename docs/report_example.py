"""The documentation's example report: hybridverdict's own outputs from the tests' data.

docs/hooks.py runs this during ``mkdocs build``, so the figures and the example report
in the documentation are always what the current ``hybridverdict`` draws.  It writes
the perflogs two report tests write (``tests/test_glance.py``: a synthetic 16-core node
with every hybrid layout; ``tests/test_report_outputs.py``: every kind of record the
report analyses, two stacks, two partitions) and runs ``hybridverdict`` on each:

    python docs/report_example.py OUT_DIR     # OUT_DIR/node16/, OUT_DIR/every/

The data are the tests' synthetic records, not measurements: they show what the
report draws, never a finding.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the datasets: name -> (test module, function writing perflogs under a root)
DATASETS = {'node16': ('test_glance', 'big_node_logs'),
            'every': ('test_report_outputs', 'dataset')}


def generate(out: Path) -> dict[str, Path]:
    """Each dataset's HTML report under `out`/<name>/ (name -> the HTML file)."""
    sys.path.insert(0, str(REPO / 'tests'))
    import importlib

    from hybridverdict.cli import main
    reports = {}
    for name, (module, function) in DATASETS.items():
        root = out / name
        write = getattr(importlib.import_module(module), function)
        logs = write(root, 16) if name == 'node16' else write(root)
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(['--perflogs', str(logs), '--out', str(root / 'reports'),
                           '--no-history-store'])
        (html,) = (root / 'reports').glob('verdict-*.html')
        if status != 0:
            raise SystemExit(f'hybridverdict exited {status} on the {name} data')
        reports[name] = html
    return reports


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, html in generate(Path(sys.argv[1])).items():
        print(name, html)
