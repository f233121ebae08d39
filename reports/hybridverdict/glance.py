"""The verdicts at a glance: heatmap grids and the sentences that say where hybrid wins.

``grids`` arranges the verdicts of each (kernel, stack, partition, node count), and
system, build and MPI library, as hybrid layouts (rows) x problem sizes (columns), for
the heatmaps ``plots`` draws (``apart.Apart`` names the system, build and library where they
differ);
``sentences`` says per kernel how often hybrid wins, loses, ties and is undecided
(INCONCLUSIVE, never counted among the ties: a TIE is a decided call, equal within
the floor), where it wins and loses most, by how much and at which sizes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable

from .apart import Apart
from .records import size_key
from .verdict import Verdict

#: layouts named per kernel in a sentence before "and N more"
MAX_NAMED = 3


def nodes(v: Verdict) -> int:
    """The node count of a verdict."""
    return int(v.nodes or 1)


def grouped(items: Iterable, key: Callable) -> dict:
    """key(item) -> the items of that key, in their order (the keys in first-met order)."""
    groups: dict = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return groups


def _ranks(layout: str) -> tuple[int, int]:
    r, _, t = layout.partition('x')
    try:
        return int(r), int(t)
    except ValueError:
        return 0, 0


@dataclasses.dataclass
class Grid:
    """The verdicts of one kernel, stack, partition and node count."""

    kernel: str
    stack: str
    partition: str
    nodes: int
    layouts: list[str]                   # row labels: "<mode> <R>x<T>" [vs mpi <R>x<T>]
    sizes: list[str]                     # column labels, in size order
    cells: dict[tuple[str, str], Verdict]  # (layout, size) -> verdict
    system: str = ''
    where: str = ''                      # 'stack@partition' and what else tells it apart

    @property
    def title(self) -> str:
        return (f'{self.kernel} {self.where or f"{self.stack}@{self.partition}"}, '
                f'{self.nodes} node{"s" if self.nodes != 1 else ""}')


def calls_text(found: Iterable[Verdict]) -> str:
    """'4 WIN, 0 LOSS, 4 TIE', and ', 2 INCONCLUSIVE' where there are any."""
    n = Counter(v.verdict for v in found)
    return (f'{n["WIN"]} WIN, {n["LOSS"]} LOSS, {n["TIE"]} TIE'
            + (f', {n["INCONCLUSIVE"]} INCONCLUSIVE' if n['INCONCLUSIVE'] else ''))


def label(v: Verdict, with_mpi: bool = False) -> str:
    """The row of a verdict: its hybrid mode and layout (and its pure-MPI layout)."""
    return f'{v.hybrid_mode} {v.hybrid_layout}' + (f' vs mpi {v.mpi_layout}' if with_mpi else '')


def _row_key(text: str) -> tuple:
    mode, _, rest = text.partition(' ')
    hyb, _, mpi = rest.partition(' vs mpi ')
    return (mode, _ranks(hyb), _ranks(mpi))


def grids(found: Iterable[Verdict]) -> list[Grid]:
    """One grid per (kernel, stack, partition, nodes), in that order, and per system,
    build and MPI library (named in the title where they differ: ``Apart``)."""
    found = list(found)
    apart = Apart.of(found)
    groups = grouped(found, lambda v: (v.kernel, v.stack, v.partition, nodes(v), v.system,
                                       v.build, v.mpi_library))
    out = []
    for (kernel, stack, part, n, system, *_), vs in sorted(groups.items()):
        with_mpi = len({v.mpi_layout for v in vs}) > 1
        cells = {(label(v, with_mpi), v.size): v for v in vs}
        out.append(Grid(kernel, stack, part, n,
                        layouts=sorted({k[0] for k in cells}, key=_row_key),
                        sizes=sorted({v.size for v in vs}, key=size_key), cells=cells,
                        system=system, where=apart.where(vs[0])))
    return out


def ratio_text(speedup: float) -> str:
    """'1.42x, hybrid 42% faster' or '0.61x, pure MPI 64% faster'."""
    if speedup >= 1:
        return f'{speedup:.2f}x, hybrid {100 * (speedup - 1):.0f}% faster'
    return f'{speedup:.2f}x, pure MPI {100 * (1 / speedup - 1):.0f}% faster'


def _where(v: Verdict, contexts: int, apart: Apart) -> str:
    n = nodes(v)
    return (f' on {apart.where(v)}' + (f', {n} nodes' if n != 1 else '')
            if contexts > 1 else '')


def _at_sizes(sizes: Collection[str]) -> str:
    """'size 64' or 'sizes 64, 128' (`sizes` each once)."""
    return f'size{"s" if len(sizes) > 1 else ""} ' + ', '.join(sorted(sizes, key=size_key))


def _by_layout(vs: list[Verdict], word: str, every: set[str]) -> str:
    """'masteronly 4x4 at sizes 64, 128; funneled 2x8 at every size (and 2 more layouts)'.

    `every`: all sizes of the kernel.
    """
    ranked = sorted(grouped(vs, label).items(), key=lambda kv: (-len(kv[1]), _row_key(kv[0])))
    parts = []
    for name, hits in ranked[:MAX_NAMED]:
        sizes = {h.size for h in hits}
        at = 'every size' if sizes == every and len(every) > 1 else _at_sizes(sizes)
        parts.append(f'{name} at {at}')
    more = len(ranked) - MAX_NAMED
    return (f'It {word} with ' + '; '.join(parts)
            + (f' (and {more} more layout{"s" if more > 1 else ""})' if more > 0 else '') + '.')


def kernel_sentences(kernel: str, vs: list[Verdict], apart: Apart | None = None) -> list[str]:
    """A few sentences on where hybrid wins and loses for one kernel (`apart`: what
    tells its places apart, of all the report's verdicts; by default of `vs`)."""
    apart = Apart.of(vs) if apart is None else apart
    contexts = len({(v.stack, v.partition, nodes(v), v.system, v.build, v.mpi_library)
                    for v in vs})
    wins = [v for v in vs if v.verdict == 'WIN']
    losses = [v for v in vs if v.verdict == 'LOSS']
    ties = sum(v.verdict == 'TIE' for v in vs)
    undecided = sum(v.verdict == 'INCONCLUSIVE' for v in vs)
    every = {v.size for v in vs}
    where = sorted({apart.where(v) for v in vs})
    node_counts = sorted({nodes(v) for v in vs})
    span = (f'{len(every)} size(s), {len({label(v) for v in vs})} hybrid '
            f'layout(s), {", ".join(where)}'
            + (f', {"/".join(map(str, node_counts))} nodes' if node_counts != [1] else ''))
    # each call counted apart, an INCONCLUSIVE comparison never among the ties
    out = [f'{kernel}: hybrid wins {len(wins)}, loses {len(losses)}, ties {ties} and is '
           f'undecided (INCONCLUSIVE) in {undecided} of {len(vs)} comparisons with pure MPI '
           f'at equal cores ({span}).']

    def most(word: str, v: Verdict, calls: list[Verdict]) -> str:
        return (f'Hybrid {word} most with {label(v)} at size {v.size}'
                f'{_where(v, contexts, apart)} ({ratio_text(v.speedup)}). '
                + _by_layout(calls, word, every))
    if wins:
        out.append(most('wins', max(wins, key=lambda v: v.speedup), wins))
    else:
        best = max(vs, key=lambda v: v.speedup)
        out.append(f'Hybrid wins nowhere; its best is {label(best)} at size {best.size}'
                   f'{_where(best, contexts, apart)} ({ratio_text(best.speedup)}, '
                   f'{best.verdict}).')
    if losses:
        out.append(most('loses', min(losses, key=lambda v: v.speedup), losses))
    elif undecided:
        out.append(f'Hybrid loses nowhere decidedly ({undecided} undecided).')
    else:
        out.append('Hybrid loses nowhere.')
    by_size = grouped(vs, lambda v: v.size)
    some_win = [s for s, xs in by_size.items() if any(v.verdict == 'WIN' for v in xs)]
    all_lose = [s for s, xs in by_size.items() if all(v.verdict == 'LOSS' for v in xs)]
    if len(by_size) > 1 and (some_win or all_lose):
        parts = []
        if some_win:
            parts.append(f'some hybrid layout wins at {_at_sizes(some_win)}')
        if all_lose:
            parts.append(f'every hybrid layout loses at {_at_sizes(all_lose)}')
        out.append(f'By size: {"; ".join(parts)}.')
    return out


def sentences(found: Iterable[Verdict]) -> list[tuple[str, list[str]]]:
    """(kernel, its sentences) for every kernel with verdicts, in kernel order."""
    found = list(found)
    apart = Apart.of(found)
    by_kernel = grouped(found, lambda v: v.kernel)
    return [(k, kernel_sentences(k, vs, apart)) for k, vs in sorted(by_kernel.items())]
