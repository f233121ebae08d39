"""hybridverdict: turn the harness's ReFrame perflogs into verdicts.

Where does hybrid MPI+OpenMP win, lose or tie against pure MPI at equal cores,
per kernel, problem size, MPI stack and interconnect (ReFrame partition)?

Modules:
  perflog   read ReFrame filelog perflogs robustly into records
  verdict   pair hybrid runs with pure-MPI runs and judge them against the noise
  cli       the ``hybridverdict`` command
"""

__version__ = '0.1.0'
