"""The commands: ``hybridverdict`` (and ``python -m hybridverdict``), the report
(``cli``), and ``hybridverdict-baseline`` (``baseline``).  Each loads its modules
under ``harnesscore.stopping.run_main``: Ctrl-C, SIGTERM or SIGHUP while polars
and matplotlib load (about a second) is one line too, never a traceback.
"""

from __future__ import annotations

import sys

from harnesscore.stopping import run_main


def _report(argv: list[str] | None) -> int:
    from .cli import report
    return report(argv)


def _baseline(argv: list[str] | None) -> int:
    from .baseline import baseline
    return baseline(argv)


def main(argv: list[str] | None = None) -> int:
    """``hybridverdict``: the report; Ctrl-C ends it with status 130 and one line,
    SIGTERM and SIGHUP with 128 plus the signal's number (a report set half
    written is removed: ``write.write_all``)."""
    return run_main(_report, argv, 'hybridverdict: interrupted (Ctrl-C): no report written',
                    'hybridverdict: stopped by {signal}: no report written')


def baseline_main(argv: list[str] | None = None) -> int:
    """``hybridverdict-baseline``: so too (each references file is written whole or
    not at all: ``atomic``)."""
    return run_main(_baseline, argv, 'hybridverdict-baseline: interrupted (Ctrl-C)',
                    'hybridverdict-baseline: stopped by {signal}')


if __name__ == '__main__':
    sys.exit(main())
