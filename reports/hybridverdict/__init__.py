"""hybridverdict: turn the harness's ReFrame perflogs into verdicts.

Where does hybrid MPI+OpenMP win, lose or tie against pure MPI at equal cores,
per kernel, problem size, MPI stack and interconnect (ReFrame partition)?  The
data flows perflog/runreport -> records -> verdict and the analyses (the registry
``sections.ANALYSES``) -> report -> render, html, plots, tidy -> write; ``store``
keeps the history, ``cli`` is the ``hybridverdict`` command (``__main__`` starts it,
and ``hybridverdict-baseline``: docs/pages/report.md).
"""

__version__ = '0.1.0'

#: The lines of the report (``cli.main``) and of the baseline (``baseline.main``)
#: stopped by Ctrl-C, and by SIGTERM or SIGHUP (``harnesscore.stopping.run_main``).
REPORT_STOPPED = ('hybridverdict: interrupted (Ctrl-C): no report written',
                  'hybridverdict: stopped by {signal}: no report written')
BASELINE_STOPPED = ('hybridverdict-baseline: interrupted (Ctrl-C)',
                    'hybridverdict-baseline: stopped by {signal}')
