"""What tells the rows of a table, the lines of a figure or the places of a sentence
apart: the system, the build and the MPI library, each named only where it differs.

One rule for the whole report (verdicts, heatmaps, MD phases, the communication
tables and figures, the stability tool): name the system where the items span several
systems ('alpha:shm'); name the build and the MPI library where one place (its system,
partition and stack, or the `place` an analysis gives) holds several ('mpich (cmake
Debug)', 'mpich (L1)', 'mpich (cmake Debug, L1)').  Items of one system and one build
per place are labelled as they always were.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Protocol


class Placed(Protocol):
    """A verdict or an analysis's row: where it ran (and its build and library, if any)."""

    @property
    def system(self) -> str: ...

    @property
    def partition(self) -> str: ...

    @property
    def stack(self) -> str: ...


def _build(x: Any) -> str:
    """An item's ``build`` ('' where it has none)."""
    return str(getattr(x, 'build', ''))


def _library(x: Any) -> str:
    """A verdict's ``mpi_library``, an analysis row's ``library``."""
    return str(getattr(x, 'mpi_library', getattr(x, 'library', '')))


def stack_place(x: Placed) -> tuple:
    """One system, partition and stack: the place of a verdict's build and library."""
    return (x.system, x.partition, x.stack)


def kernel_place(x: Any) -> tuple:
    """One kernel on one system, partition and stack: the place of a kernel series's
    build and library (OSU and the ring kernels have builds of their own)."""
    return (x.system, x.partition, x.stack, x.kernel)


@dataclasses.dataclass(frozen=True)
class Apart:
    """What tells items apart (the module's rule), found by ``of`` among the items that
    share a table, a figure or a sentence."""

    systems: bool = False
    builds: frozenset[tuple] = frozenset()      # places of several builds
    libraries: frozenset[tuple] = frozenset()   # places of several MPI libraries
    place: Callable[[Any], tuple] = stack_place
    build: Callable[[Any], str] = _build
    library: Callable[[Any], str] = _library

    @classmethod
    def of(cls, items: Iterable[Placed], place: Callable[[Any], tuple] = stack_place,
           build: Callable[[Any], str] = _build,
           library: Callable[[Any], str] = _library) -> Apart:
        """What tells `items` apart: their systems, and the builds and libraries of
        each `place` (`build`, `library`: an item's, where not its fields)."""
        builds: dict[tuple, set[str]] = defaultdict(set)
        libraries: dict[tuple, set[str]] = defaultdict(set)
        systems: set[str] = set()
        for x in items:
            systems.add(x.system)
            builds[place(x)].add(build(x))
            libraries[place(x)].add(library(x))
        return cls(len(systems) > 1,
                   frozenset(p for p, seen in builds.items() if len(seen) > 1),
                   frozenset(p for p, seen in libraries.items() if len(seen) > 1),
                   place, build, library)

    def shown(self, x: Placed) -> str:
        """'cmake Debug', 'L1', 'cmake Debug, L1' or '' (one build and library there)."""
        where = self.place(x)
        return ', '.join(text for text, several in ((self.build(x), where in self.builds),
                                                    (self.library(x), where in self.libraries))
                         if several)

    def stack(self, x: Placed) -> str:
        """'mpich', or 'mpich (cmake Debug)' where its place has several builds."""
        shown = self.shown(x)
        return f'{x.stack} ({shown})' if shown else x.stack

    def partition(self, x: Placed) -> str:
        """'shm', or 'alpha:shm' where the items span several systems."""
        return f'{x.system}:{x.partition}' if self.systems else x.partition

    def where(self, x: Placed) -> str:
        """'mpich@shm', 'mpich (cmake Debug)@alpha:shm', ..."""
        return f'{self.stack(x)}@{self.partition(x)}'
