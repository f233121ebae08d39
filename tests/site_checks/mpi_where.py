"""A site's own MPI check, written as hpctestlib writes its tests: a
compile-only fixture builds a small MPI program with the environment's
compiler, a run-only test starts it on 2 ranks with whatever launcher the
partition names.  Nothing here knows the harness; it must run on any
partition and environment of the harness's configuration:

    reframe -C config/settings.py -c tests/site_checks/mpi_where.py -r
"""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import fixture, run_before, sanity_function


class build_mpi_where(rfm.CompileOnlyRegressionTest):
    '''Fixture: mpi_where.c built with the environment's C compiler.'''

    build_system = 'SingleSource'
    sourcepath = 'mpi_where.c'
    executable = 'mpi_where'

    @run_before('compile')
    def set_flags(self):
        self.build_system.cflags = ['-std=c11', '-O2', '-Wall', '-Wextra']

    @sanity_function
    def validate_build(self):
        return sn.assert_not_found(r'(?i)warning|error', self.stderr)


@rfm.simple_test
class mpi_where_run(rfm.RunOnlyRegressionTest):
    '''Two MPI ranks: each says where it runs and which MPI it links.'''

    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    num_tasks = 2
    num_tasks_per_node = 2
    time_limit = '2m'
    mpi_where = fixture(build_mpi_where, scope='environment')

    @run_before('run')
    def set_executable(self):
        self.executable = os.path.join(self.mpi_where.stagedir, 'mpi_where')

    @sanity_function
    def validate(self):
        ranks = sn.extractall(r'^rank (\d+) of (\d+) ', self.stdout, 2, int)
        return sn.all([
            sn.assert_eq(sn.count(ranks), self.num_tasks),
            sn.all(sn.map(lambda n: sn.assert_eq(n, self.num_tasks), ranks)),
        ])
