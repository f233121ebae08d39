"""The commands: ``hybridverdict`` (and ``python -m hybridverdict``), the report
(``cli``), and ``hybridverdict-baseline`` (``baseline``).  Each loads its module
under ``harnesscore.stopping.run_main``: Ctrl-C, SIGTERM or SIGHUP while polars
and matplotlib load (about a second) is one line too, never a traceback.
"""

from __future__ import annotations

import sys

from harnesscore.stopping import run_main

from . import BASELINE_STOPPED, REPORT_STOPPED


def _report(argv: list[str] | None) -> int:
    from .cli import report
    return report(argv)


def _baseline(argv: list[str] | None) -> int:
    from .baseline import baseline
    return baseline(argv)


def main(argv: list[str] | None = None) -> int:
    """``hybridverdict``: ``cli.main``, its modules loaded under its stop lines."""
    return run_main(_report, argv, *REPORT_STOPPED)


def baseline_main(argv: list[str] | None = None) -> int:
    """``hybridverdict-baseline``: ``baseline.main``, so too."""
    return run_main(_baseline, argv, *BASELINE_STOPPED)


if __name__ == '__main__':
    sys.exit(main())
