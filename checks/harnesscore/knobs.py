"""Reading the harness's knobs (``HARNESS_*`` environment variables)."""

from __future__ import annotations

import os
import re


def split_list(text: str) -> list[str]:
    """A list knob's items: separated by commas, spaces or both
    (``openmpi,mpich``, ``"openmpi mpich"``, ``"openmpi, mpich"``)."""
    return [item for item in re.split(r'[,\s]+', text.strip()) if item]


def env_list(name: str) -> list[str]:
    """The items of the list knob `name` ([] when unset or empty)."""
    return split_list(os.environ.get(name, ''))
