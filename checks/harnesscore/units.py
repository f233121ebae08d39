"""Sizes as the kernels and OSU take them, and as the reports show them."""

from __future__ import annotations

import re

KIB = 1024
MIB = 1024 * 1024

#: A message size as ``bytes_label`` writes it: '8B', '64KiB', '1MiB' (or with a space).
_LABEL = re.compile(r'^(\d+) ?(B|KiB|MiB)$')


def parse_bytes(text: str) -> int:
    """A size of the ring's --sizes list (`ring_size`: N, NK (KiB) or NM (MiB));
    or a ``bytes_label``: '8B', '64KiB', '1 MiB'.  ValueError for anything else."""
    text = text.strip()
    labelled = label_bytes(text)
    return ring_size(text) if labelled is None else labelled


#: What the ring kernel's --sizes takes (src/ring.c): each size 1 B .. 16 MiB,
#: integer bytes with an optional K or M suffix (KiB, MiB); at most 64 sizes.
RING_MAX_SIZE = 16 * MIB
RING_MAX_SIZES = 64
_RING_SIZE = re.compile(r'([0-9]+)([KkMm]?)')


def ring_size(text: str) -> int:
    """One size of the ring kernel's --sizes, in bytes; ValueError as the kernel says it."""
    m = _RING_SIZE.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size (integer bytes, optional K or M suffix)")
    size = int(m.group(1)) * {'': 1, 'k': KIB, 'm': MIB}[m.group(2).lower()]
    if not 1 <= size <= RING_MAX_SIZE:
        raise ValueError(f"size {text!r} is out of range (1 B .. 16 MiB)")
    return size


def message_sizes(sizes: str) -> list[int]:
    """The message sizes of the ring kernel's --sizes, in bytes, sorted: MIN:MAX
    (MIN, doubling up to MAX) or a comma list ('8,64K,1M'); ValueError saying
    what is wrong, as the kernel would."""
    lo, sep, hi = str(sizes).partition(':')
    if sep:
        first, last = ring_size(lo), ring_size(hi)
        if first > last:
            raise ValueError(f"range {sizes!r} has MIN > MAX")
        if first & (first - 1) or last & (last - 1):
            raise ValueError(f"range {sizes!r} is not of powers of two (MIN, doubling up "
                             f"to MAX; a comma list takes any sizes)")
        out = []
        while first <= last and len(out) < RING_MAX_SIZES:
            out.append(first)
            first *= 2
        return out
    parts = str(sizes).split(',')
    if len(parts) > RING_MAX_SIZES:
        raise ValueError(f'more than {RING_MAX_SIZES} entries (repeated sizes count too)')
    return sorted({ring_size(part) for part in parts})


def bytes_label(n: int, sep: str = '') -> str:
    """A message size as verdicts name it: '8B', '64KiB', '1MiB' (whole KiB and
    MiB only, else bytes; one word, for test names and table columns); `sep`
    ' ' gives '8 B', '1 MiB'."""
    for unit, size in (('MiB', MIB), ('KiB', KIB)):
        if n >= size and n % size == 0:
            return f'{n // size}{sep}{unit}'
    return f'{n}{sep}B'


def label_bytes(text: str) -> int | None:
    """The bytes of a ``bytes_label`` ('8B', '1 MiB'), else None."""
    m = _LABEL.match(text.strip())
    return int(m.group(1)) * {'B': 1, 'KiB': KIB, 'MiB': MIB}[m.group(2)] if m else None
