"""ReFrame's selection options in a list of command-line words.

``./harness`` passes its plan the words of ``HARNESS_REFRAME_OPTS`` and its
own arguments, and the plan reads their ``-p``/``--prgenv`` and ``--system``
(``python -m harnesslib.plan -- WORDS``); the sequential rounds
(``hybridverdict.sequential``) pass the same words on to their batches less
these options, since each batch makes its own selection, and less the report
files (``REPORTS``), since each batch writes its own.  Both read them here,
in every spelling ReFrame's argparse accepts: ``-p X``, ``-pX``, ``-p=X``,
``--prgenv X`` and ``--prgenv=X`` (long options abbreviated, ``--prg X``, and
short flags bundled with them, ``-vpX``, are not recognised).  ReFrame-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence


@dataclasses.dataclass(frozen=True)
class Options:
    """A kind of ReFrame option: those that take a value (long name: short
    name or ``None``), those that take none, and those whose value is optional
    (``nargs='?'``: the next word is theirs unless it is an option)."""

    valued: Mapping[str, str | None]
    flags: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()

    def long_of(self, short: str) -> str | None:
        return next((long for long, s in self.valued.items() if s == short), None)


#: ReFrame's options that select tests, partitions or environments, as
#: ``reframe --help`` lists them.
SELECTION = Options(
    valued={'--name': '-n', '--exclude': '-x', '--tag': '-t', '--exclude-tag': '-T',
            '--prgenv': '-p', '--filter-expr': '-E', '--parameterize': '-P',
            '--system': None, '--maintainer': None, '--mode': None, '--repeat': None},
    flags=frozenset({'--cpu-only', '--gpu-only', '--failed'}),
    optional=frozenset({'--restore-session'}))
#: ReFrame's options that name a report file: the sequential rounds' batches
#: write the configuration's own run report, never over the session's (the
#: run report ./harness reads, the JUnit file the nightly names).
REPORTS = Options(valued={'--report-file': None, '--report-junit': None})
#: ReFrame's option that splits the values of a ``-P VAR=V1,V2`` (default ',').
PARAM_VALUES_DELIM = Options(valued={'--param-values-delim': None})


@dataclasses.dataclass(frozen=True)
class Selection:
    """One selection option found: its long name, its value (``None`` for a
    flag, an optional value not given, or a value missing at the end) and the
    words it took."""

    name: str
    value: str | None
    words: tuple[str, ...]


def _name_value(word: str, options: Options) -> tuple[str, str | None]:
    """A word's option name (an option's long name for its short one) and the
    value glued to it (``None`` if none): ``--prgenv=X`` and ``-pX`` and
    ``-p=X`` are ``('--prgenv', 'X')``, as ReFrame's argparse reads them."""
    if word.startswith('--'):
        name, eq, value = word.partition('=')
        return name, value if eq else None
    long = options.long_of(word[:2])
    if long is None:
        return word, None
    glued = word[2:]
    return long, (glued[1:] if glued.startswith('=') else glued) or None


def _option(words: Sequence[str], i: int, options: Options) -> Selection | None:
    """The option of `options` that starts at ``words[i]``, if one does."""
    word = words[i]
    name, glued = _name_value(word, options)
    if name in options.flags and word == name:
        return Selection(name, None, (word,))
    if name not in options.valued and name not in options.optional:
        return None
    if glued is not None or word not in (name, options.valued.get(name)):
        return Selection(name, glued, (word,))
    nxt = words[i + 1] if i + 1 < len(words) else None
    if nxt is None or (name in options.optional and nxt.startswith('-')):
        return Selection(name, None, (word,))
    return Selection(name, nxt, (word, nxt))


def split(words: Iterable[str], options: Options = SELECTION
          ) -> tuple[list[Selection], list[str]]:
    """The options of `options` in `words` (ReFrame's selection options by
    default), and the other words, in order."""
    words = list(words)
    found: list[Selection] = []
    rest: list[str] = []
    i = 0
    while i < len(words):
        opt = _option(words, i, options)
        if opt is None:
            rest.append(words[i])
            i += 1
        else:
            found.append(opt)
            i += len(opt.words)
    return found, rest


def values(words: Iterable[str], name: str, options: Options = SELECTION) -> list[str]:
    """The values given to the option `name` of `options` (its long name, e.g.
    ``--prgenv``; ReFrame's selection options by default), in order."""
    return [o.value for o in split(words, options)[0]
            if o.name == name and o.value is not None]


def passed_on(words: Iterable[str], options: Options = SELECTION) -> list[str]:
    """`words` less the options of `options` (ReFrame's selection options by
    default) and their values."""
    return split(words, options)[1]


__all__ = ['PARAM_VALUES_DELIM', 'REPORTS', 'SELECTION', 'Options', 'Selection', 'split',
           'values', 'passed_on']
