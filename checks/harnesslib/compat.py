"""ReFrame's private attributes the checks rely on, in one place.

* ``registered_variants``: ReFrame has no public API for the order in which a
  module's test variants are registered (the serial policy runs them in that
  order), so it reads the module's registry (``_rfm_test_registry``).
* ``as_run``: ``-P VAR=V1,V2`` makes ReFrame run a class derived from each
  test (``frontend.testgenerators.parameterize_tests``) whose variants are
  numbered anew; a test that names another's variants as dependencies must
  name the derived class's, so this derives it as ReFrame does.
* ``declare_perf_value``: a performance variable's slot before the
  performance stage fills it (``_perfvalues``), so that a failed run logs
  the same fields as a passed one (``harnesslib.base.PerfSchema``).

And ``reads_output``: ReFrame's ``run_before`` for a hook that a dry run skips;
``keep_force_exit``: ReFrame's stop on SIGTERM or SIGHUP is not lost in a log
record (applied when the checks load).

The pin in ``pyproject.toml`` is the version this was written against; another
version is refused here, by name, instead of reordering or logging nothing in
silence.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys

import reframe
from harnesscore import selection
from reframe.core.builtins import parameter, run_before
from reframe.core.exceptions import ForceExitError
from reframe.core.meta import make_test

#: ReFrame versions whose registry layout this module knows.
KNOWN_VERSIONS = ('4.10.',)


class UnsupportedReframe(RuntimeError):
    """A ReFrame whose private registry this module does not know."""


def _guard() -> None:
    if not reframe.VERSION.startswith(KNOWN_VERSIONS):
        raise UnsupportedReframe(
            f'harnesslib.compat knows ReFrame {", ".join(KNOWN_VERSIONS)}x, this is '
            f'{reframe.VERSION}: check its test registry (_rfm_test_registry) and update '
            f'checks/harnesslib/compat.py')


def registered_variants(cls) -> list:
    """The list of (args, kwargs) registration entries of a ``@rfm.simple_test``
    class, in the order ReFrame will instantiate them (kwargs carry
    ``variant_num``), as a mutable list: sorting it reorders the session.  An
    empty list where the class is not registered."""
    _guard()
    registry = getattr(inspect.getmodule(cls), '_rfm_test_registry', None)
    entries = getattr(registry, '_tests', {}).get(cls)
    return entries if isinstance(entries, list) else []


def _session_parameters(words: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The ``-P VAR=V1,V2`` of ReFrame's command line `words` (its
    ``--param-values-delim``), as (VAR, values), in order."""
    delims = selection.values(words, '--param-values-delim', selection.PARAM_VALUES_DELIM)
    delim = delims[-1] if delims else ','
    out = []
    for spec in selection.values(words, '--parameterize'):
        var, sep, values = spec.partition('=')
        if sep:
            out.append((var, tuple(values.split(delim))))
    return tuple(out)


@functools.cache
def _parameterized(cls, params: tuple[tuple[str, tuple[str, ...]], ...]):
    """Kernel check `cls` as this session runs it: ``-P VAR=V1,V2`` makes ReFrame
    run a class derived from it with one more parameter (``.VAR`` for a
    variable; ``frontend.testgenerators.parameterize_tests``), whose variants,
    and the names that dependencies take, are numbered anew; `cls` itself where
    no ``-P`` applies to it."""
    body = {}
    for var, values in params:
        check, _, name = var.rpartition('.')
        if check and check != cls.__name__:
            continue
        if name in cls.var_space:
            body[f'.{name}'] = parameter(list(values), loggable=False)
        elif name in cls.param_space:
            ptype = cls.param_space.params[name].type
            if ptype is not None:
                body[name] = parameter([ptype(v) for v in values], type=ptype)
    if not body:
        return cls
    return make_test(cls.__name__, (cls,), body=body, module=cls.__module__)


def as_run(cls, argv: list[str]):
    """Test class `cls` as the session of ReFrame's command line `argv` runs it
    (``_parameterized``): the class whose variant numbers, and so the names
    that dependencies take, are those of the session's test cases."""
    _guard()
    return _parameterized(cls, _session_parameters(argv))


def declare_perf_value(test, key: str, unit: str) -> None:
    """ReFrame's own slot for performance variable `key` ('partition:name') of
    `test`, as ``pipeline.check_performance`` fills it: [value, ref, lower,
    upper, unit, result], the value None (ReFrame's placeholder for a variable
    without a value, as in ``--dry-run``) until the performance stage."""
    _guard()
    test._perfvalues.setdefault(key, [None, 0, None, None, unit, None])


def reads_output(stage: str, always_last: bool = False):
    """``run_before(stage)`` for a hook that reads the job's output: ReFrame
    calls the sanity and performance hooks in ``--dry-run`` as well, where
    there are job scripts only, no output to read; this skips the hook there."""
    def decorate(hook):
        @functools.wraps(hook)
        def unless_dry_run(self) -> None:
            if not self.is_dry_run():
                hook(self)
        return run_before(stage, always_last=always_last)(unless_dry_run)
    return decorate


def keep_force_exit() -> None:
    """Let ReFrame's ``ForceExitError`` out of a log handler.

    ReFrame stops on SIGTERM and SIGHUP by raising ``ForceExitError`` from
    its signal handler, which also ignores every later one.  Where the signal
    lands while a log record is formatted (``Setting up test paths``), the
    handler's ``emit`` caught it and ``handleError`` printed a traceback:
    the session ran on to its end, deaf to the signals that ``./harness``
    passes on (2 runs in 15 of ``test_faults``' killed harness).  As ReFrame
    itself wraps ``handleError`` (for ``BrokenPipeError``), this wraps it
    once more to raise the error again; any other error is handled as before.
    """
    handle_error = logging.Handler.handleError
    if getattr(handle_error, 'keeps_force_exit', False):
        return

    @functools.wraps(handle_error)
    def handle_error_but_force_exit(handler: logging.Handler, record: logging.LogRecord) -> None:
        err = sys.exc_info()[1]
        if isinstance(err, ForceExitError):
            raise err
        handle_error(handler, record)

    handle_error_but_force_exit.keeps_force_exit = True  # type: ignore[attr-defined]
    logging.Handler.handleError = handle_error_but_force_exit  # type: ignore[method-assign]


keep_force_exit()
