"""How a command line stops on Ctrl-C, SIGTERM or SIGHUP: one line, no traceback,
exit status 128 plus the signal's number (130 for Ctrl-C): ``run_main``.  The
commands of the report (``hybridverdict``, its sequential rounds, the session
check) and the plan (``harnesslib.plan``) stop so; ./harness then says that the
session was stopped.

On bad input a command line stops with one line too, and exit status 2
(``BAD_INPUT``): ``fail`` says ``<prog>: error: <err>``; an option out of range
is argparse's error, with the usage, in one wording (``need_fraction``,
``need_between``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

#: The signals that stop a command as Ctrl-C does (where it handles them).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Signalled(BaseException):
    """SIGTERM or SIGHUP stopped the command (a BaseException, as KeyboardInterrupt:
    no ``except Exception`` swallows it; ``hybridverdict.write.write_all`` removes
    its files)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The process whose SIGTERM and SIGHUP raise ``Signalled`` (0: none).
_owner = 0
#: The stop signals held back (``held_back``; None: none is).
_held: list[int] | None = None


def _stop(signum: int, _frame: object) -> None:
    if os.getpid() != _owner:       # a forked process before ``_default_in_child``
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _held is not None:
        _held.append(signum)
        return
    raise Signalled(signum)


@contextlib.contextmanager
def held_back() -> Iterator[None]:
    """SIGTERM and SIGHUP (where they raise ``Signalled``) held back in the block
    and raised after it: a child started in it (``subprocess.Popen``, which a
    signal would leave without a handle to pass the signal on to) is known to
    its caller when the signal comes."""
    global _held
    _held = []
    try:
        yield
    finally:
        held, _held = _held, None
    if held:
        raise Signalled(held[0])


def _default_in_child() -> None:
    """A process forked from the command (the report's second one drawing its
    figures, the one its pool starts in place of a dead one) dies of SIGTERM and
    SIGHUP as before: a Python handler would wait for the bytecode of a child
    blocked on a lock of another thread, and the pool's terminate() for that
    child."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_in_child)


def _raising(signals: Iterable[int] = STOP_SIGNALS, always: bool = False) -> dict[int, Any]:
    """`signals` raise ``Signalled`` in this process (where their action is the
    default, or `always`: where they are ignored or handled too; in the main
    thread only: Python's handlers live there); the handlers they had."""
    global _owner
    if threading.current_thread() is not threading.main_thread():
        return {}
    _owner = os.getpid()
    return {sig: signal.signal(sig, _stop) for sig in signals
            if always or signal.getsignal(sig) is signal.SIG_DFL}


def _ignore_from_now(signals: Iterable[int], before: dict[int, Any]) -> None:
    """Ctrl-C and `signals` ignored from here on, the handlers they had added to
    `before`: a stop is one line, whatever comes after it (a second Ctrl-C;
    polars raises a KeyboardInterrupt of its own before Python's handler raises
    one more).  ``signal.signal`` runs the handlers pending first: its caller
    tries again where one raises."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, *signals):
        if sig not in before:
            before[sig] = signal.signal(sig, signal.SIG_IGN)


def run_main(main: Callable[[Any], int], argv: Any, interrupted: str | None,
             stopped: str = '', signals: Iterable[int] = STOP_SIGNALS,
             always: bool = False) -> int:
    """``main(argv)``, its exit status; Ctrl-C (KeyboardInterrupt) ends it with 130
    and the line `interrupted` on stderr (none where None), one of `signals`
    (``_raising``, `always` as there; () for none: their default action) with 128
    plus its number and the line `stopped`, its '{signal}' the signal's name
    (SIGTERM).  The signals' handlers are given back."""
    signals = tuple(signals)
    handlers = _raising(signals, always)
    try:
        return main(argv)
    except (KeyboardInterrupt, Signalled) as err:
        ignored: dict[int, Any] = {}
        while True:
            try:
                _ignore_from_now(signals, ignored)
                break
            except (KeyboardInterrupt, Signalled):
                continue                # one more, pending: it ran, and is done
        handlers = ignored | handlers
        if isinstance(err, Signalled):
            print(stopped.format(signal=str(err)), file=sys.stderr)
            return 128 + err.signum
        if interrupted is not None:
            print(interrupted, file=sys.stderr)
        return 130
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


#: The exit status of a command line given bad input (an option or knob out of
#: range, an unreadable or unwritable file), as of argparse's own errors.
BAD_INPUT = 2


def fail(prog: str, err: object) -> int:
    """``<prog>: error: <err>`` on stderr, as argparse words an error (without
    the usage); ``BAD_INPUT``, the exit status for the command to return."""
    print(f'{prog}: error: {err}', file=sys.stderr)
    return BAD_INPUT


def need_fraction(parser: argparse.ArgumentParser, option: str, value: float) -> None:
    """`parser`'s error (exit status 2) unless `option`'s `value` is in [0, 1)
    (NaN is not)."""
    if not 0 <= value < 1:
        parser.error(f'{option} must be in [0, 1), got {value}')


def need_between(parser: argparse.ArgumentParser, option: str, value: int, low: int,
                 high: int) -> None:
    """`parser`'s error (exit status 2) unless `option`'s `value` is from `low` to
    `high`."""
    if not low <= value <= high:
        parser.error(f'{option} must be from {low} to {high}, got {value}')
