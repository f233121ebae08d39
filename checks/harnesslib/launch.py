"""Launching: each stack's own launcher with rank and thread binding, the
OpenMP placement, and the node lock every local build and run holds."""

from __future__ import annotations

import os
import shlex
import types

import reframe.core.runtime as rt
from reframe.core.launchers import JobLauncher

# What `mpi_library` (MPI_Get_library_version, first line) starts with, per stack.
LIBRARY_PREFIX = {'openmpi': 'Open MPI', 'mpich': 'MPICH', 'mvapich2': 'MVAPICH2'}

#: The line a job script writes with its launcher's exit status where the
#: scheduler reports none (ReFrame's squeue backend).
EXIT_STATUS_TAG = 'harness: launcher exit status'


# ---- launcher -----------------------------------------------------------------

class StackLauncher(JobLauncher):
    """The stack's own launcher, with rank and thread binding for its family.

    Every rank gets T distinct cores and OMP_PLACES=cores pins one thread per
    core: a hybrid rank's threads never share a core.  MVAPICH2 binds each rank
    to one core by default, which serialises a hybrid rank's threads; its
    launcher (MPICH's hydra) binds instead, with the library's affinity off.
    """

    def __init__(self, path: str, family: str, ranks_per_node: int, cores_per_rank: int,
                 pmi: str = '', oversubscribe: bool = False):
        super().__init__()
        #: More ranks x threads than cores on purpose (a declared topology):
        #: no binding, and Open MPI told to allow it.
        self.oversubscribe = oversubscribe
        self.path = path
        self.family = family
        self.ranks_per_node = ranks_per_node
        self.cores_per_rank = cores_per_rank
        #: ``srun --mpi=`` of family 'srun' (the PMI the stack was built for).
        self.pmi = pmi

    def command(self, job) -> list[str]:
        n, r, t = str(job.num_tasks), str(self.ranks_per_node), str(self.cores_per_rank)
        if self.family == 'srun':
            # Inside a Slurm allocation: Slurm places and binds the ranks
            # (srun no longer takes -c from sbatch since Slurm 22.05).
            return [self.path, *([f'--mpi={self.pmi}'] if self.pmi else []), '-n', n,
                    '--ntasks-per-node', r, '-c', t, '--cpu-bind=cores']
        if self.oversubscribe:
            if self.family == 'openmpi':
                return [self.path, '-np', n, '--oversubscribe', '--bind-to', 'none']
            if self.family in ('mpich', 'mvapich2'):
                return [self.path, '-n', n, '-bind-to', 'none']
        if self.family == 'openmpi':
            return [self.path, '-np', n, '--map-by', f'ppr:{r}:node:PE={t}',
                    '--bind-to', 'core']
        if self.family in ('mpich', 'mvapich2'):
            # MVAPICH2's launcher is MPICH's hydra.  Its own library binding
            # is switched off (binding_env): built with ch3:sock (TCP only)
            # it cannot see which ranks share a node and binds them all to
            # the same core.
            return [self.path, '-n', n, '-ppn', r, '-bind-to', f'core:{t}']
        return [self.path, '-n', n]


def launch_line(launcher: JobLauncher, num_tasks: int) -> str:
    """The shell command line that launches `num_tasks` ranks with `launcher`
    (every word quoted), for job scripts a check writes itself."""
    job = types.SimpleNamespace(num_tasks=num_tasks)
    return ' '.join(shlex.quote(word) for word in launcher.command(job) + launcher.options)


def shell_words(words: list[str]) -> list[str]:
    """Each word quoted for the job script (ReFrame writes ``executable`` and
    ``executable_opts`` into it as they are)."""
    return [shlex.quote(str(w)) for w in words]


def binding_env(family: str, threads: int, binding: str = 'threads') -> dict[str, str]:
    """OpenMP placement; MVAPICH2's own affinity off (its launcher binds).
    `binding` ('threads' or 'one-core') is the launcher's business."""
    env = {'OMP_NUM_THREADS': str(threads), 'OMP_PLACES': 'cores',
           'OMP_PROC_BIND': 'close'}
    if family == 'mvapich2':
        # hydra binds (StackLauncher); the library's own affinity would bind a
        # hybrid rank's threads to one core, and with ch3:sock every rank of a
        # node to the same core.
        env['MV2_ENABLE_AFFINITY'] = '0'
    return env


def hold_node_lock(partition) -> list[str]:
    """Shell lines that take the node's lock for the rest of the job script.

    On a local partition several jobs can run at once (one per partition, or
    with the async policy); they would share the cores and spoil each other's
    timings.  Every build and run holds this lock, so the local machine runs
    one of them at a time whatever execution policy ReFrame uses.
    """
    if partition.scheduler.registered_name != 'local':
        return []
    lock = os.path.join(rt.runtime().system.prefix, 'node.lock')
    return [f'exec 9>>{shlex.quote(lock)}', 'flock 9']


# ---- samples and references ------------------------------------------------------
