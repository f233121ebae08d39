"""Per-system performance references: where they live and how runs are keyed.

The references of a system are one ReFrame ``$ref`` YAML file,
``<reference prefix>/<system>.yaml`` (the prefix is ReFrame's
``general/reference_prefix``, ``config/references`` in the harness's
configuration, overridable with ``RFM_REFERENCE_PREFIX``).  Each test class
has an entry indexed by partition, environment (MPI stack) and *variant*::

    SpmvCheck:
      $index: [$partition, $environ, ref_variant]
      local:shm:
        openmpi:
          layout=masteronly_1x2 problem=64:
            fom: [8123.4, -0.12, null, Mflop/s]

The variant is the test's parameters as ReFrame names them, without the
sample number (the repeated samples of one run share one reference).  The
checks and the baseline command both key runs with :func:`split_name`, so a
reference written from a perflog line is found again by the same test.
"""

from __future__ import annotations

import os
import re

#: Parameters that tell samples of one run apart, not different runs.
SAMPLE_PARAMETERS = ('sample', '.repeat_no')

#: Index of every harness reference entry.
INDEX = ('$partition', '$environ', 'ref_variant')

#: Units for which a larger value is worse (a time); for the others (rates,
#: ratios, bandwidths) a larger value is better.
LOWER_IS_BETTER_UNITS = frozenset({'s', 'ms', 'us', 'ns'})

_PARAM = re.compile(r'%(?P<name>[^=\s]+)=(?P<value>\S+)')


def split_name(display_name: str) -> tuple[str, str]:
    """('SpmvCheck', 'layout=mpi_2x1 problem=64') from a test's display name
    ('SpmvCheck %layout=mpi_2x1 %problem=64 %sample=1').  Fixture parameters
    and the sample number are left out; a test without parameters has the
    variant '-'."""
    text = display_name.strip()
    if not text:
        raise ValueError('empty test name')
    cls = text.split()[0]
    params = [f'{m["name"]}={m["value"]}' for m in _PARAM.finditer(text)
              if m['name'] not in SAMPLE_PARAMETERS and '.' not in m['name']]
    return cls, ' '.join(params) or '-'


def references_file(prefix: str, system: str) -> str:
    """The references file of `system` under `prefix`."""
    if not re.fullmatch(r'[A-Za-z0-9_.-]+', system):
        raise ValueError(f'system name {system!r} cannot name a references file')
    return os.path.join(prefix, f'{system}.yaml')


def lower_is_better(unit: str) -> bool:
    return unit.strip() in LOWER_IS_BETTER_UNITS


__all__ = ['INDEX', 'LOWER_IS_BETTER_UNITS', 'SAMPLE_PARAMETERS', 'lower_is_better',
           'references_file', 'split_name']
