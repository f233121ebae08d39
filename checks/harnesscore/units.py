"""Sizes as the kernels and OSU take them, and as the reports show them."""

from __future__ import annotations

import re

KIB = 1024
MIB = 1024 * 1024

#: A message size as ``bytes_label`` writes it: '8B', '64KiB', '1MiB' (or with a space).
_LABEL = re.compile(r'^(\d+) ?(B|KiB|MiB)$')


def parse_bytes(text: str) -> int:
    """A size of the ring's --sizes list: N, NK (KiB) or NM (MiB); or a
    ``bytes_label``: '8B', '64KiB', '1 MiB'."""
    text = text.strip()
    labelled = label_bytes(text)
    if labelled is not None:
        return labelled
    mult = {'k': KIB, 'm': MIB}.get(text[-1:].lower(), 1)
    return int(text[:-1] if mult != 1 else text) * mult


def message_sizes(sizes: str) -> list[int]:
    """The message sizes of a ring --sizes list ('8,64K,1M'), in bytes, sorted."""
    return sorted({parse_bytes(x) for x in str(sizes).split(',')})


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
