"""ReFrame benchmark: the md kernel against LAMMPS's in.lj, side by side in one job.

``MdLammpsBenchmark`` runs Debian's ``lmp`` (LAMMPS, the MD kernel's yardstick)
and ``md --preset lammps-in.lj`` on the same stack, alternating rounds, and
reports the medians of the per-round ratios of their rates, each decided by
the one rule (harnesscore.bands; see its docstring).
"""

from __future__ import annotations

import shlex
import shutil
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
from harnesscore.rounds import (
    MD_BANDS,
    MD_RATIOS,
    MD_TAGS,
    RoundsError,
    md_rates_by_tag,
    md_ratios,
    md_results,
)
from harnesslib import launch
from harnesslib.base import (
    AlternatingRounds,
    PerflogFields,
    RunBase,
    SharedCores,
    record_exit_status,
    sanity_errors,
)
from harnesslib.build import KernelBuild
from harnesslib.noise import BandRule, QuietMachine
from harnesslib.placement import cores_per_node
from reframe.core.backends import getlauncher
from reframe.core.builtins import fixture, run_after, run_before, sanity_function

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
class MdLammpsBenchmark(rfm.RunOnlyRegressionTest, PerflogFields, QuietMachine, BandRule,
                        AlternatingRounds, SharedCores):
    """md against Debian's LAMMPS (`lmp`) on in.lj, alternating in one job.

    Each round runs md on 1 rank, lmp on 1 rank, md on 2 ranks, lmp on 2
    ranks and md as 1 rank x 2 threads, so every ratio compares runs made
    side by side.  The figures are medians over rounds of the per-round
    ratios of atom-steps per second (LAMMPS: atoms x steps / "Loop time").
    Targets (the references, decided by the one rule from the per-round
    ratios, harnesscore.bands): md >= 1.0x LAMMPS on 1 and on 2 ranks, and the
    hybrid 1x2 within 10% of pure MPI 2x1.  Debian's lmp is built on Open
    MPI, so it runs with the openmpi environment (docs/pages/checks.md).
    """

    descr = 'md vs LAMMPS in.lj, alternating runs in one job'
    valid_systems = ['-transport-tcp']
    valid_prog_environs = ['+stack-openmpi']
    tags = {'benchmark'}
    time_limit = '10m'
    build = fixture(KernelBuild, scope='environment')
    rounds, max_rounds, round_budget_s = 3, 9, 240
    kernel = 'md-vs-lammps'
    mode = 'benchmark'
    size = 'in.lj'
    reference = {
        '*': {
            **{name: (*band, 'x') for name, band in MD_BANDS.items()},
            # Informational rates: machine-specific, bounded by nothing.
            'md_1rank': (0, None, None, 'atom-steps/s'),
            'lammps_1rank': (0, None, None, 'atom-steps/s'),
            'rounds': (0, None, None, 'rounds'),
        }
    }

    @run_after('setup')
    def prepare(self):
        part = self.current_partition
        self.skip_if(shutil.which('lmp') is None,
                     "Debian's lmp not found: apt-get install lammps "
                     "(./harness setup installs it as root)")
        self.cores = cores_per_node(part)
        self.skip_if(self.cores < 2, 'needs 2 cores per node')
        self.ranks, self.threads, self.nodes = 2, 1, 1
        self.build_spec = f'{self.build.build_spec}; lmp {shutil.which("lmp")}'
        # The script launches its own runs; the job holds what the largest
        # needs: 2 ranks of one core each, the cores of the 1 x 2 run too.
        self.num_tasks = self.num_tasks_per_node = 2
        self.num_cpus_per_task = launch.slurm_cpus_per_task(part, 1)
        self.executable = 'bash'
        self.executable_opts = ['bench.sh']
        self.prerun_cmds = launch.hold_node_lock(part)

    @run_before('run')
    def write_script(self):
        # The partition's launcher (the environment's mpirun), each line
        # bound for its own layout.
        launcher = self.job.launcher
        family = launch.launcher_family(self.current_partition, self.current_environ)
        self.job.launcher = getlauncher('local')()

        over = self.declared_oversubscription()

        def run(ranks: int, threads: int) -> str:
            cpus = launch.slurm_cpus_per_task(self.current_partition, threads)
            return launch.launch_line(launcher, ranks, cpus,
                                      launch.binding_env(family, threads, oversubscribe=over))

        md = f'{shlex.quote(self.build.executable_path("md"))} --preset lammps-in.lj'
        lmp = 'lmp -in in.lj -log none'
        body = [
            f'OMP_NUM_THREADS=1 {run(1, 1)} {md} | sed -n "s/^RESULT /MD_1x1 /p"'
            ' | tee -a bench.out',
            f'{run(1, 1)} {lmp} | sed -n "s/^Loop time/LMP_1 Loop time/p" | tee -a bench.out',
            f'OMP_NUM_THREADS=1 {run(2, 1)} {md} | sed -n "s/^RESULT /MD_2x1 /p"'
            ' | tee -a bench.out',
            f'{run(2, 1)} {lmp} | sed -n "s/^Loop time/LMP_2 Loop time/p" | tee -a bench.out',
            f'OMP_NUM_THREADS=2 {run(1, 2)} {md} --mode masteronly'
            ' | sed -n "s/^RESULT /MD_1x2 /p" | tee -a bench.out',
        ]
        self.write_stage_script('in.lj', LAMMPS_IN_LJ.splitlines())
        record_exit_status(self)
        self.write_stage_script('bench.sh', [
            'set -o pipefail', ': > bench.out',
            *self.round_loop('round', body, ['md', 'bench.out'])])

    def rates(self) -> dict[str, list[float]]:
        """Every tag's atom-steps per second, round by round (``md_rates_by_tag``):
        the job's output parsed once, for the sanity, band samples and perf variables."""
        if not hasattr(self, '_rates'):
            with sanity_errors(RoundsError):
                self._rates = md_rates_by_tag(self.job_stdout())
        return self._rates

    @sanity_function
    def all_rounds_ran(self):
        # The scheduler's status, or the job script's record of it (squeue).
        sn.evaluate(sn.assert_eq(RunBase.exit_status(self), 0,
                                 msg='the benchmark script failed (status {0})'))
        rounds = self.rounds_done()
        counts = {tag: len(rates) for tag, rates in self.rates().items()}
        missing = {t: n for t, n in counts.items() if n != rounds}
        sn.evaluate(sn.assert_false(missing, msg=f'rounds missing (of {rounds}): {missing}'))
        self.verified = 'true'
        # md's runs say where their threads ran (lmp's do not): two on one core,
        # or a partition that shares its cores, is flagged, and fails where undeclared
        with sanity_errors(RoundsError):
            results = [res for tag in MD_TAGS for res in md_results(self.job_stdout(), tag)]
        self.check_oversubscription(*results)
        return True

    def band_samples(self) -> dict[str, list[float]]:
        return md_ratios(self.rates())

    @run_after('setup')
    def set_perf_variables(self):
        # The judged figures: medians of the per-round ratios
        # (harnesscore.rounds.MD_RATIOS); the rates and rounds are shown only.
        self.perf_variables = {name: sn.make_performance_function(
            lambda name=name: statistics.median(self.band_samples()[name]), 'x')
            for name in MD_RATIOS}
        for name, tag in (('md_1rank', 'MD_1x1'), ('lammps_1rank', 'LMP_1')):
            self.perf_variables[name] = sn.make_performance_function(
                lambda tag=tag: statistics.median(self.rates()[tag]), 'atom-steps/s')
        self.perf_variables['rounds'] = sn.make_performance_function(self.rounds_done,
                                                                     'rounds')
