"""The nightly acceptance mode of the harness (``reframe --mode nightly``).

``config/settings.py`` adds :func:`modes` to its ``modes`` and
:func:`storage` to its ``storage`` section.  ``reframe -C config/settings.py
--mode nightly -r`` (or ``./harness nightly``) runs every check with:

* ``-S require_reference=true``: a performance variable without a reference
  for the current system, partition and environment fails its check;
* a JUnit report, ``$HARNESS_VAR_DIR/reports/junit-<UTC time>.xml`` (a new
  file per session, never over an old one);
* the perflogs in ``$HARNESS_VAR_DIR/perflogs`` (persistent, appended to,
  as in every session);
* ``--warn-as-error``: a check file that fails to load (which ReFrame only
  warns about, then runs what is left, possibly nothing) fails the night;
* ReFrame's results storage (``$HARNESS_VAR_DIR/results.db``; on for every
  session, see :func:`storage`), so ``reframe --list-stored-sessions`` and
  ``--performance-compare`` see every night.

ReFrame exits non-zero when any check fails, performance failures included.
"""

from __future__ import annotations

import os
import time


def junit_file(var_dir: str) -> str:
    """A new JUnit file per session: named by the time the configuration loads."""
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    return os.path.join(var_dir, 'reports', f'junit-{stamp}.xml')


def modes(var_dir: str) -> list[dict]:
    return [
        {
            'name': 'nightly',
            'options': [
                '-S', 'require_reference=true',
                f'--report-junit={junit_file(var_dir)}',
                f'--perflogdir={os.path.join(var_dir, "perflogs")}',
                '--failure-stats',
                # A check file that does not load is an error, not a warning
                # and a night that ran nothing.
                '--warn-as-error',
            ],
        },
    ]


def storage(var_dir: str) -> list[dict]:
    """ReFrame's results database, on for every session (a mode can only set
    command-line options, and results storage has none)."""
    return [
        {
            'enable': True,
            'sqlite_db_file': os.path.join(var_dir, 'results.db'),
        },
    ]
