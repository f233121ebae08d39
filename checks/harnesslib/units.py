"""Sizes as the kernels and OSU take them."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * 1024


def parse_bytes(text: str) -> int:
    """A size of the ring's --sizes list: N, NK (KiB) or NM (MiB)."""
    text = text.strip()
    mult = {'k': KIB, 'm': MIB}.get(text[-1:].lower(), 1)
    return int(text[:-1] if mult != 1 else text) * mult
