"""Write perflogs in the harness's format, with any performance variables (tests only)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from harnesscore.schema import fields_after, header_fields

PARTS = ('value', 'unit', 'ref', 'lower_thres', 'upper_thres')
LIBS = {'openmpi': 'Open MPI v4.1.4', 'mpich': 'MPICH Version: 4.0.2'}
T0 = dt.datetime(2026, 11, 22, 10, tzinfo=dt.timezone.utc)


def header(variables: Sequence[str]) -> str:
    return '|'.join(header_fields()) + '|' + '|'.join(
        f'{v}_{p}' for v in variables for p in PARTS)


def line(kernel: str, values: dict[str, tuple], *, mode: str = 'mpi', ranks: int = 2,
         threads: int = 1, size: str = '1', stack: str = 'mpich', part: str = 'shm',
         nodes: int = 1, time: dt.datetime = T0, result: str = 'pass', system: str = 'local',
         cores: int = 2, oversubscribed: bool = False, name: str = '',
         after_result: dict[str, str] | None = None) -> str:
    """One perflog line; values: variable -> (value, unit[, ref, lower, upper]);
    after_result: the run fields after 'result' by name (judgement, mpi_env, the
    provenance fields, ...), '' where not given."""
    tail = dict.fromkeys(fields_after('result'), '')
    unknown = set(after_result or {}) - set(tail)
    if unknown:
        raise ValueError(f'not a run field after result: {sorted(unknown)}')
    tail.update(after_result or {})
    blocks = ''
    for value, unit, *ref in values.values():
        ref_, lo, hi = (list(ref) + [0, None, None][len(ref):])[:3]
        blocks += f'{value}|{unit}|{ref_}|{lo}|{hi}|'
    return (f'{time:%Y-%m-%dT%H:%M:%S%z}|{system}|{part}|{stack}|{name or kernel + " check"}|'
            f'{kernel}|{mode}|'
            f'{ranks}|{threads}|{size}|{cores}|{nodes}|{LIBS.get(stack, stack)}|true|'
            f'{str(oversubscribed).lower()}|false|'
            f'cmake Release {stack}|{result}|' + ''.join(f'{v}|' for v in tail.values())
            + blocks)


def write(path: Path, lines: Sequence[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('\n'.join(lines) + '\n')
    return path


def write_runs(path: Path, kernel: str, runs: Sequence[dict], **kw) -> Path:
    """A perflog of one check: each run a dict variable -> (value, unit, ...)."""
    names = list(runs[0])
    return write(path, [header(names)] + [
        line(kernel, run, time=T0 + dt.timedelta(seconds=10 * i), **kw)
        for i, run in enumerate(runs)])


def hockney_runs(t0: float, r_inf: float, sizes: Sequence[int], n: int = 3,
                 noise: float = 0.0) -> list[dict]:
    """OSU-style latency runs of the model t0 + m / r_inf (us), alternating +-noise."""
    runs = []
    for i in range(n):
        sign = 1 if i % 2 else -1
        run = {f'lat_{m}': ((t0 + m / r_inf) * (1 + sign * noise * ((j % 3) - 1)), 'us')
               for j, m in enumerate(sizes)}
        run['latency_8B'] = (t0 + 8 / r_inf, 'us')
        runs.append(run)
    return runs


def ring_values(per_message: dict[int, float] | None, t_total: float = 1.0) -> dict:
    """The variables of one RingCheck run of the sweep `per_message` (bytes ->
    seconds per exchange): t_total and bw_k1_<bytes>, and t_msg_<bytes> unless
    `per_message` is None (a perflog written before the ring logged them)."""
    sizes = per_message or {8: 1e-6, 65536: 1e-4, 1048576: 1e-3}
    run = {'t_total': (t_total, 's')}
    run.update({f'bw_k1_{n}': (n / t / 1e6, 'MB/s') for n, t in sizes.items()})
    if per_message is not None:
        run.update({f't_msg_{n}': (t, 's') for n, t in per_message.items()})
    return run
