"""ReFrame benchmark: the md kernel against LAMMPS's in.lj, side by side in one job.

``MdLammpsBenchmark`` runs Debian's ``lmp`` (LAMMPS, the MD kernel's yardstick)
and ``md --preset lammps-in.lj`` on the same stack, alternating rounds, and
reports the ratios of their times (see its docstring).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from harnesslib.build import KernelBuild
from harnesslib.launch import binding_env, hold_node_lock, launch_line, launcher_family
from harnesslib.placement import cores_per_node
from reframe.core.backends import getlauncher
from reframe.core.builtins import (
    fixture,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

# ---- benchmark: md against LAMMPS ----------------------------------------------

#: LAMMPS's standard in.lj benchmark; `md --preset lammps-in.lj` runs the same.
LAMMPS_IN_LJ = '''# 3d Lennard-Jones melt (LAMMPS bench/in.lj)
variable        x index 1
variable        y index 1
variable        z index 1
variable        xx equal 20*$x
variable        yy equal 20*$y
variable        zz equal 20*$z
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 ${xx} 0 ${yy} 0 ${zz}
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 1.44 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    delay 0 every 20 check no
fix             1 all nve
run             100
'''


@rfm.simple_test
class MdLammpsBenchmark(rfm.RunOnlyRegressionTest):
    """md against Debian's LAMMPS (`lmp`) on in.lj, alternating in one job.

    Each round runs md on 1 rank, lmp on 1 rank, md on 2 ranks, lmp on 2
    ranks and md as 1 rank x 2 threads, so every ratio compares runs made
    side by side.  The figures are medians over rounds of the per-round
    ratios of atom-steps per second (LAMMPS: atoms x steps / "Loop time").
    Targets (the references): md >= 1.0x LAMMPS on 1 and on 2 ranks, and the
    hybrid 1x2 within 10% of pure MPI 2x1.

    Rerun it alone with
      reframe -C config/settings.py -c checks -n MdLammpsBenchmark -r
    Debian's lmp is built on Open MPI, so it runs with the openmpi environment.
    """

    descr = 'md vs LAMMPS in.lj, alternating runs in one job'
    valid_systems = ['-transport-tcp']
    valid_prog_environs = ['+stack-openmpi']
    tags = {'benchmark'}
    time_limit = '10m'
    build = fixture(KernelBuild, scope='environment')
    rounds = variable(int, value=3)
    reference = {
        '*': {
            'md_over_lammps_1rank': (1.0, 0.0, None, 'x'),
            'md_over_lammps_2ranks': (1.0, 0.0, None, 'x'),
            'hybrid_over_mpi': (1.0, -0.10, None, 'x'),
            # Informational rates: machine-specific, bounded by nothing.
            'md_1rank': (0, None, None, 'atom-steps/s'),
            'lammps_1rank': (0, None, None, 'atom-steps/s'),
        }
    }

    @run_after('setup')
    def prepare(self):
        part = self.current_partition
        self.skip_if(shutil.which('lmp') is None,
                     "Debian's lmp not found: apt-get install lammps "
                     "(./harness setup installs it as root)")
        self.skip_if(cores_per_node(part) < 2, 'needs 2 cores per node')
        self.num_tasks = 1      # the script launches its own runs
        self.executable = 'bash'
        self.executable_opts = ['bench.sh']
        self.prerun_cmds = hold_node_lock(part)

    @run_before('run')
    def write_script(self):
        # The partition's launcher (the environment's mpirun), each line
        # bound for its own layout.
        launcher = self.job.launcher
        family = launcher_family(self.current_partition, self.current_environ)
        self.job.launcher = getlauncher('local')()

        def launch(ranks: int, threads: int) -> str:
            return launch_line(launcher, ranks, threads, binding_env(family, threads))

        md = f'{self.build.executable_path("md")} --preset lammps-in.lj'
        lmp = 'lmp -in in.lj -log none'
        lines = [
            'set -o pipefail',
            f'for round in $(seq 1 {self.rounds}); do',
            f'  OMP_NUM_THREADS=1 {launch(1, 1)} {md} | sed -n "s/^RESULT /MD_1x1 /p"',
            f'  {launch(1, 1)} {lmp} | sed -n "s/^Loop time/LMP_1 Loop time/p"',
            f'  OMP_NUM_THREADS=1 {launch(2, 1)} {md} | sed -n "s/^RESULT /MD_2x1 /p"',
            f'  {launch(2, 1)} {lmp} | sed -n "s/^Loop time/LMP_2 Loop time/p"',
            f'  OMP_NUM_THREADS=2 {launch(1, 2)} {md} --mode masteronly'
            ' | sed -n "s/^RESULT /MD_1x2 /p"',
            'done',
        ]
        with open(os.path.join(self.stagedir, 'in.lj'), 'w') as fp:
            fp.write(LAMMPS_IN_LJ)
        with open(os.path.join(self.stagedir, 'bench.sh'), 'w') as fp:
            fp.write('\n'.join(lines) + '\n')

    def _md(self, tag: str) -> list[float]:
        rows = sn.evaluate(sn.extractall(rf'^{tag} (\{{.*\}})\s*$', self.stdout, 1))
        results = [json.loads(r) for r in rows]
        if not all(r.get('verified') is True for r in results):
            raise sn.SanityError(f'an md run ({tag}) did not verify its result')
        return [float(r['fom']) for r in results]

    def _lmp(self, tag: str) -> list[float]:
        patt = (rf'^{tag} Loop time of (\S+) on \d+ procs for (\d+) steps '
                rf'with (\d+) atoms')
        return [int(steps) * int(atoms) / float(t) for t, steps, atoms in
                sn.evaluate(sn.extractall(patt, self.stdout, (1, 2, 3)))]

    @sanity_function
    def all_rounds_ran(self):
        counts = {tag: len(self._md(tag)) for tag in ('MD_1x1', 'MD_2x1', 'MD_1x2')}
        counts.update({tag: len(self._lmp(tag)) for tag in ('LMP_1', 'LMP_2')})
        sn.evaluate(sn.assert_eq(self.job.exitcode, 0, msg='the benchmark script failed'))
        missing = {t: n for t, n in counts.items() if n != self.rounds}
        return sn.assert_false(missing, msg=f'rounds missing (of {self.rounds}): {missing}')

    def _median_ratio(self, num: list[float], den: list[float]) -> float:
        return statistics.median(a / b for a, b in zip(num, den))

    @performance_function('x')
    def md_over_lammps_1rank(self):
        return self._median_ratio(self._md('MD_1x1'), self._lmp('LMP_1'))

    @performance_function('x')
    def md_over_lammps_2ranks(self):
        return self._median_ratio(self._md('MD_2x1'), self._lmp('LMP_2'))

    @performance_function('x')
    def hybrid_over_mpi(self):
        return self._median_ratio(self._md('MD_1x2'), self._md('MD_2x1'))

    @performance_function('atom-steps/s')
    def md_1rank(self):
        return statistics.median(self._md('MD_1x1'))

    @performance_function('atom-steps/s')
    def lammps_1rank(self):
        return statistics.median(self._lmp('LMP_1'))
