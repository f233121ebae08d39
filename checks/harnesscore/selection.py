"""ReFrame's selection options in a list of command-line words.

``./harness`` passes its plan the words of ``HARNESS_REFRAME_OPTS`` and its
own arguments, and the plan reads their ``-p``/``--prgenv`` and ``--system``
(``python -m harnesslib.plan -- WORDS``); the sequential rounds
(``hybridverdict.sequential``) pass the same words on to their batches less
these options, since each batch makes its own selection.  Both read them here,
in every spelling ReFrame's argparse accepts: ``-p X``, ``-pX``, ``-p=X``,
``--prgenv X`` and ``--prgenv=X`` (long options abbreviated, ``--prg X``, and
short flags bundled with them, ``-vpX``, are not recognised).  ReFrame-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

#: ReFrame's options that select tests, partitions or environments and take a
#: value (long name: short name or ``None``), as ``reframe --help`` lists them.
VALUED: dict[str, str | None] = {
    '--name': '-n', '--exclude': '-x', '--tag': '-t', '--exclude-tag': '-T',
    '--prgenv': '-p', '--filter-expr': '-E', '--parameterize': '-P', '--system': None,
    '--maintainer': None, '--mode': None, '--repeat': None}
#: Those that take no value.
FLAGS = frozenset({'--cpu-only', '--gpu-only', '--failed'})
#: Those whose value is optional (``nargs='?'``): the next word is theirs
#: unless it is an option.
OPTIONAL = frozenset({'--restore-session'})
#: The names of them all, short and long.
SELECTION_OPTIONS = frozenset({*VALUED, *(s for s in VALUED.values() if s), *FLAGS,
                               *OPTIONAL})
_LONG_OF = {short: long for long, short in VALUED.items() if short}


@dataclasses.dataclass(frozen=True)
class Selection:
    """One selection option found: its long name, its value (``None`` for a
    flag, an optional value not given, or a value missing at the end) and the
    words it took."""

    name: str
    value: str | None
    words: tuple[str, ...]


def _name_value(word: str) -> tuple[str, str | None]:
    """A word's option name (a selection option's long name for its short one)
    and the value glued to it (``None`` if none): ``--prgenv=X`` and ``-pX``
    and ``-p=X`` are ``('--prgenv', 'X')``, as ReFrame's argparse reads them."""
    if word.startswith('--'):
        name, eq, value = word.partition('=')
        return name, value if eq else None
    long = _LONG_OF.get(word[:2])
    if long is None:
        return word, None
    glued = word[2:]
    return long, (glued[1:] if glued.startswith('=') else glued) or None


def _option(words: Sequence[str], i: int) -> Selection | None:
    """The selection option that starts at ``words[i]``, if one does."""
    word = words[i]
    name, glued = _name_value(word)
    if name in FLAGS and word == name:
        return Selection(name, None, (word,))
    if name not in VALUED and name not in OPTIONAL:
        return None
    if glued is not None or word not in (name, VALUED.get(name)):
        return Selection(name, glued, (word,))
    nxt = words[i + 1] if i + 1 < len(words) else None
    if nxt is None or (name in OPTIONAL and nxt.startswith('-')):
        return Selection(name, None, (word,))
    return Selection(name, nxt, (word, nxt))


def split(words: Iterable[str]) -> tuple[list[Selection], list[str]]:
    """ReFrame's selection options in `words`, and the other words, in order."""
    words = list(words)
    found: list[Selection] = []
    rest: list[str] = []
    i = 0
    while i < len(words):
        opt = _option(words, i)
        if opt is None:
            rest.append(words[i])
            i += 1
        else:
            found.append(opt)
            i += len(opt.words)
    return found, rest


def values(words: Iterable[str], name: str) -> list[str]:
    """The values given to the selection option `name` (its long name, e.g.
    ``--prgenv``), in order."""
    return [o.value for o in split(words)[0] if o.name == name and o.value is not None]


def passed_on(words: Iterable[str]) -> list[str]:
    """`words` less ReFrame's selection options and their values."""
    return split(words)[1]


__all__ = ['SELECTION_OPTIONS', 'Selection', 'split', 'values', 'passed_on']
