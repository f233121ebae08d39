"""Rabenseifner's overlap model (seed 001): what funneled overlap can gain.

A hybrid step on a node with n threads, m of which communicate, split into
fractions of the masteronly time: f_comm, f_comp_non (work that cannot overlap
it) and f_comp_overlap (work that can), adding up to 1.  ``eps`` is
T_masteronly / T_overlap = 1 / (f_comp_non + max(f_comm / m, f_comp_overlap n /
(n - m))); the bounds and break-even points are those of docs/pages/science.md.
"""

from __future__ import annotations

import dataclasses


class ModelError(ValueError):
    """Fractions or thread counts the model cannot take."""


def _check(n: int, m: int, **fractions: float) -> None:
    if not (isinstance(n, int) and isinstance(m, int)) or n < 2 or not 1 <= m < n:
        raise ModelError(f'need 1 <= m < n threads, got n={n}, m={m}')
    for name, value in fractions.items():
        if not 0.0 <= value <= 1.0:
            raise ModelError(f'{name} must be a fraction in [0, 1], got {value}')


def eps(f_comm: float, f_comp_non: float, f_comp_overlap: float, n: int, m: int = 1) -> float:
    """Predicted speedup T_masteronly / T_overlap."""
    _check(n, m, f_comm=f_comm, f_comp_non=f_comp_non, f_comp_overlap=f_comp_overlap)
    total = f_comm + f_comp_non + f_comp_overlap
    if abs(total - 1.0) > 1e-6:
        raise ModelError(f'the fractions must add up to 1, got {total:.6f}')
    return 1.0 / (f_comp_non + max(f_comm / m, f_comp_overlap * n / (n - m)))


def eps_max(f_comp_non: float, n: int, m: int = 1) -> float:
    _check(n, m, f_comp_non=f_comp_non)
    k = m * (1.0 - 1.0 / n)
    return (1.0 + k) / (1.0 + f_comp_non * k)


def f_comm_best(f_comp_non: float, n: int, m: int = 1) -> float:
    _check(n, m, f_comp_non=f_comp_non)
    return (1.0 - f_comp_non) / (1.0 + 1.0 / m - 1.0 / n)


def f_comm_equiv(f_comp_non: float, n: int, m: int = 1) -> float:
    _check(n, m, f_comp_non=f_comp_non)
    return (m / n) * (1.0 - f_comp_non)


def eps_min(f_comp_non: float, n: int, m: int = 1) -> float:
    _check(n, m, f_comp_non=f_comp_non)
    return (1.0 - m / n) / (1.0 - f_comp_non * m / n)


@dataclasses.dataclass(frozen=True)
class Prediction:
    f_comm: float
    f_comp_non: float
    f_comp_overlap: float
    n: int
    m: int
    eps: float
    eps_max: float
    f_comm_best: float
    f_comm_equiv: float
    eps_min: float


def predict(t_comm: float, t_comp_non: float, t_comp_overlap: float, n: int,
            m: int = 1) -> Prediction:
    """The model's figures from the measured parts of a masteronly run."""
    total = t_comm + t_comp_non + t_comp_overlap
    if total <= 0:
        raise ModelError('the masteronly times add up to nothing')
    fc, fn, fo = t_comm / total, t_comp_non / total, t_comp_overlap / total
    return Prediction(fc, fn, fo, n, m, eps(fc, fn, fo, n, m), eps_max(fn, n, m),
                      f_comm_best(fn, n, m), f_comm_equiv(fn, n, m), eps_min(fn, n, m))
