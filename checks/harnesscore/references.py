"""Per-system performance references: where they live and how runs are keyed.

The references of a system are one ReFrame ``$ref`` YAML file,
``<reference prefix>/<system>.yaml`` (``config/references`` unless
``RFM_REFERENCE_PREFIX`` says otherwise), each test class's entry indexed by
partition, environment (MPI stack) and *variant* (``INDEX``): the test's
parameters without the sample number, so the samples of one run share one
reference.  The checks and the baseline command both key runs with
:func:`split_name`, so a reference written from a perflog line is found again
by the same test (docs/pages/nightly.md, "References", shows a file).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

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
    (``%build.stack=...``) and the sample number are left out; a variable
    reframe's ``-P`` made a parameter (``%.nodes=2``) is kept as it is written:
    a run on 2 nodes is another run than one on 1, with its own reference and
    its own pool of samples.  A test without parameters has the variant '-'."""
    text = display_name.strip()
    if not text:
        raise ValueError('empty test name')
    cls = text.split()[0]
    params = [f'{m["name"]}={m["value"]}' for m in _PARAM.finditer(text)
              if m['name'] not in SAMPLE_PARAMETERS
              and (m['name'].startswith('.') or '.' not in m['name'])]
    return cls, ' '.join(params) or '-'


def references_file(prefix: str, system: str) -> str:
    """The references file of `system` under `prefix`."""
    if not re.fullmatch(r'[A-Za-z0-9_.-]+', system):
        raise ValueError(f'system name {system!r} cannot name a references file')
    return os.path.join(prefix, f'{system}.yaml')


def lower_is_better(unit: str) -> bool:
    return unit.strip() in LOWER_IS_BETTER_UNITS


class ReferencesError(ValueError):
    """A references file ReFrame could not use (it would skip every test with
    a warning and end with 'Ran 0/0' and exit status 0)."""


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_entry(where: str, value: Any) -> None:
    """One variable's entry: ``[ref, lower, upper]`` or ``[ref, lower, upper,
    unit]`` with a number as ref, numbers or null as thresholds (lower <= 0 <=
    upper, as fractions of the reference), a string or null as unit; or
    ReFrame's ``[$xfail, message, [ref, lower, upper, unit]]``."""
    if isinstance(value, list) and value and value[0] == '$xfail':
        if len(value) != 3 or not isinstance(value[1], str):
            raise ReferencesError(f'{where}: an $xfail entry is [$xfail, message, '
                                  f'[ref, lower, upper, unit]], got {value!r}')
        _check_entry(where, value[2])
        return
    if not isinstance(value, list) or len(value) not in (3, 4):
        raise ReferencesError(f'{where}: expected [reference, lower, upper, unit], '
                              f'got {value!r}')
    ref, lower, upper = value[:3]
    if not _is_number(ref):
        raise ReferencesError(f'{where}: the reference value must be a number, got {ref!r}')
    for name, bound, sign in (('lower', lower, -1), ('upper', upper, 1)):
        if bound is None:
            continue
        if not _is_number(bound):
            raise ReferencesError(f'{where}: the {name} threshold must be a number or '
                                  f'null, got {bound!r}')
        if bound * sign < 0:
            raise ReferencesError(f'{where}: the {name} threshold is a fraction of the '
                                  f'reference with sign {"-" if sign < 0 else "+"} '
                                  f'(or 0), got {bound!r}')
    if len(value) == 4 and value[3] is not None and not isinstance(value[3], str):
        raise ReferencesError(f'{where}: the unit must be a string, got {value[3]!r}')


def validate_references(data: Any, source: str) -> None:
    """Raise ReferencesError naming `source` and the entry's key path if
    `data` (a loaded ``$ref`` file) is not what ReFrame's ``$ref`` reader
    takes: test name -> (``$index`` levels of) keys -> variable -> entry."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise ReferencesError(f'{source}: the top level must be a mapping of test names, '
                              f'got {type(data).__name__}')
    for test, tree in data.items():
        if not isinstance(tree, dict):
            raise ReferencesError(f'{source}: {test}: must be a mapping, got {tree!r}')
        index = tree.get('$index')
        if index is not None and (not isinstance(index, list)
                                  or not all(isinstance(i, str) for i in index)):
            raise ReferencesError(f'{source}: {test}.$index must be a list of names, '
                                  f'got {index!r}')
        depth = len(index) if index else 1

        def walk(node: Any, path: list[str], level: int, depth: int = depth) -> None:
            where = f'{source}: {".".join(path)}'
            if not isinstance(node, dict):
                raise ReferencesError(f'{where}: must be a mapping, got {node!r}')
            for key, sub in node.items():
                if level == depth:
                    _check_entry(f'{where}.{key}', sub)
                else:
                    walk(sub, [*path, str(key)], level + 1)

        walk({k: v for k, v in tree.items() if k != '$index'}, [str(test)], 0)


def validate_references_file(path: str) -> None:
    """Read and check the references file `path` (ReferencesError if bad)."""
    import yaml  # ReFrame brings PyYAML

    try:
        with open(path, encoding='utf-8') as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as err:
        raise ReferencesError(f'{path}: not valid YAML: {" ".join(str(err).split())}') \
            from None
    except (OSError, UnicodeDecodeError) as err:
        raise ReferencesError(f'{path}: cannot be read: {err}') from None
    validate_references(data, path)
