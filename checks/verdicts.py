"""Verdict checks: hybrid MPI+OpenMP against pure MPI at equal cores, in ReFrame.

For each kernel, size and hybrid layout, ``HybridVerdict`` depends on every
sample of the pure-MPI run (R*T ranks x 1 thread) and of the hybrid run
(R ranks x T threads) on the same partition and stack.  It reports

* ``speedup`` = median T_mpi / median T_hybrid (``t_total``): above 1 the
  hybrid run is faster;
* ``verdict``: 1 (WIN), 0 (TIE) or -1 (LOSS).  It is WIN or LOSS only when
  the speedup is further from 1 than the measured noise (twice the quadrature
  sum of both sides' relative standard errors, never below 5%), TIE
  otherwise; the noise and the samples of each side are printed beside it.

A system's references then assert what must hold there, e.g. in
``config/references/<system>.yaml``::

    HybridVerdict:
      $index: [$partition, $environ, ref_variant]
      local:shm:
        openmpi:
          pair=spmv/64/masteronly_1x2:
            speedup: [1.0, -0.10, null, x]   # must not lose by more than 10%
            verdict: [1, 0, null, win=1]     # hybrid must win here

The samples are the checks' ``sample`` parameter (``HARNESS_REPEAT``), not
``--repeat``, which renumbers the variants these dependencies name.
"""

from __future__ import annotations

import os
import statistics
import sys

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.udeps as udeps
from hybridverdict.verdict import DEFAULT_NOISE_FLOOR, TIME_VARIABLE, judge, pair_noise
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from harnesslib import PerflogFields, SystemReferences  # noqa: E402
from kernels import MdCheck, RingCheck, SpmvCheck, StreamCheck  # noqa: E402

KERNEL_CHECKS = {'spmv': SpmvCheck, 'md': MdCheck, 'ring': RingCheck, 'stream': StreamCheck}
VERDICT_CODE = {'WIN': 1, 'TIE': 0, 'LOSS': -1}


def _pairs() -> list[tuple[str, str, tuple, tuple]]:
    """(kernel, size, pure-MPI layout, hybrid layout) for every hybrid run."""
    out = []
    for kernel, cls in KERNEL_CHECKS.items():
        layouts = cls.param_space['layout']
        for problem in cls.param_space['problem']:
            for hybrid in layouts:
                mode, ranks, threads = hybrid
                if mode in ('mpi', 'serial'):
                    continue
                mpi = ('mpi', ranks * threads, 1)
                if mpi in layouts:
                    out.append((kernel, str(problem), mpi, hybrid))
    return out


def _pair_name(pair: tuple[str, str, tuple, tuple]) -> str:
    kernel, size, _mpi, (mode, ranks, threads) = pair
    return f'{kernel}/{size}/{mode}_{ranks}x{threads}'


@rfm.simple_test
class HybridVerdict(rfm.RunOnlyRegressionTest, SystemReferences, PerflogFields):
    """Hybrid against pure MPI for one kernel, size and layout."""

    pair = parameter(_pairs(), fmt=_pair_name)
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    local = True
    time_limit = '1m'
    executable = 'echo'
    tags = {'verdict'}

    oversubscribed = 'false'
    finalize_hung = 'false'
    noise_floor = variable(float, value=DEFAULT_NOISE_FLOOR)

    @run_after('init')
    def depend_on_runs(self):
        kernel, size, mpi, hybrid = self.pair
        cls = KERNEL_CHECKS[kernel]
        self.kernel, self.size = kernel, size
        self.mode = f'verdict-{hybrid[0]}'
        self.ranks, self.threads = hybrid[1], hybrid[2]
        self.descr = (f'{kernel} size {size}: {hybrid[0]} {hybrid[1]}x{hybrid[2]} '
                      f'against mpi {mpi[1]}x1')
        self._sides: dict[str, list[str]] = {'mpi': [], 'hybrid': []}
        for side, layout in (('mpi', mpi), ('hybrid', hybrid)):
            for num in cls.get_variant_nums(layout=lambda lay, want=layout: lay == want,
                                            problem=lambda p: str(p) == size):
                name = cls.variant_name(num)
                self.depends_on(name, udeps.by_env)
                self._sides[side].append(name)

    def _samples(self, side: str) -> list[float]:
        part = self.current_partition.fullname
        out = []
        for name in self._sides[side]:
            dep = self.getdep(name)
            entry = dep.perfvalues.get(f'{part}:{TIME_VARIABLE}')
            if entry is None:
                raise sn.SanityError(
                    f'{dep.display_name} logged no {TIME_VARIABLE} '
                    f'(was the performance stage skipped?)')
            out.append(float(entry[0]))
            self.cores = dep.cores
            self.nodes = dep.nodes
            self.mpi_library = dep.mpi_library
            self.build_spec = dep.build_spec
        return out

    @run_before('run')
    def judge_samples(self):
        t_mpi, t_hyb = self._samples('mpi'), self._samples('hybrid')
        med_mpi, med_hyb = statistics.median(t_mpi), statistics.median(t_hyb)
        self._speedup = med_mpi / med_hyb
        self._noise = pair_noise(t_mpi, t_hyb, self.noise_floor)
        self._verdict = judge(self._speedup, self._noise)
        self.verified = 'true'
        self.executable_opts = [
            f'VERDICT {_pair_name(self.pair)}: {self._verdict} speedup={self._speedup:.4f} '
            f'noise={self._noise:.4f} samples={len(t_mpi)}/{len(t_hyb)} '
            f'T_mpi={med_mpi:.6g}s T_hybrid={med_hyb:.6g}s'
        ]

    @sanity_function
    def printed(self):
        return sn.assert_found(r'^VERDICT ', self.stdout)

    @performance_function('x')
    def speedup(self):
        return self._speedup

    @performance_function('win=1 tie=0 loss=-1')
    def verdict(self):
        return VERDICT_CODE[self._verdict]
