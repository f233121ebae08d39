"""A site's OSU check in a few lines: hpctestlib's ``osu_run`` given an OSU
install per stack (the environment's ``osu_prefix``, from
``HARNESS_OSU_PREFIX``).  hpctestlib is in ReFrame's repository, not in its
wheel: put a checkout on PYTHONPATH.  Needs OSU 6.0 or later (osu_run passes
``-c`` to the point-to-point benchmarks, which 5.9 does not accept).

    PYTHONPATH=/path/to/reframe HARNESS_OSU_PREFIX=/opt/osu/{stack} \\
        reframe -C config/settings.py -c tests/site_checks/site_osu.py -r
"""

import os

import reframe as rfm
from hpctestlib.microbenchmarks.mpi.osu import osu_run
from reframe.core.builtins import run_before


@rfm.simple_test
class site_osu(osu_run):
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    num_tasks = 2
    time_limit = '5m'

    @run_before('run')
    def osu_of_the_stack(self):
        kind = self.benchmark_info[0].split('.')[1]      # pt2pt, collective
        prefix = self.current_environ.extras['osu_prefix']
        self.executable = os.path.join(prefix, 'libexec/osu-micro-benchmarks/mpi', kind,
                                       self.executable)
