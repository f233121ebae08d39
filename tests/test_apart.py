"""What tells items apart (hybridverdict.apart): the system, build and library, each
named only where it differs."""

from __future__ import annotations

import dataclasses

from hybridverdict.apart import Apart


@dataclasses.dataclass(frozen=True)
class Item:
    system: str
    partition: str
    stack: str
    build: str
    mpi_library: str


def test_a_build_and_library_alone_in_their_partition_are_not_named() -> None:
    items = [Item('local', 'shm', 'mpich', 'cmake Debug', 'L1'),
             Item('local', 'tcp', 'mpich', 'cmake Release', 'L2')]
    apart = Apart.of(items)
    assert [apart.where(x) for x in items] == ['mpich@shm', 'mpich@tcp']
