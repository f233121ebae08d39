"""How the command lines stop on Ctrl-C, SIGTERM and SIGHUP (harnesscore.stopping):
the exit status, the one line, which signals each handles and the handlers
given back.  The commands' own lines: test_write, test_sequential, test_plan."""

from __future__ import annotations

import os
import signal

import pytest
from harnesscore.stopping import Signalled, run_main


@pytest.fixture
def default_signals():
    """SIGTERM and SIGHUP with their default action, as a command starts."""
    before = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


def _killed_by(signum: int):
    def main(_argv) -> int:
        # never the default action here: it would end the test run itself
        assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN)
        os.kill(os.getpid(), signum)
        return 0
    return main


@pytest.mark.parametrize('signame', ['SIGTERM', 'SIGHUP'])
def test_a_stop_signal_is_128_plus_its_number_and_one_line(capsys, default_signals, signame):
    signum = getattr(signal, signame)
    assert run_main(_killed_by(signum), None, 'x: interrupted',
                    'x: stopped by {signal}: nothing done') == 128 + signum
    assert capsys.readouterr().err == f'x: stopped by {signame}: nothing done\n'
    assert signal.getsignal(signum) is signal.SIG_DFL       # given back


def test_ctrl_c_is_130_with_its_line_or_quietly(capsys):
    def interrupted(_argv) -> int:
        raise KeyboardInterrupt
    assert run_main(interrupted, None, 'x: interrupted (Ctrl-C)') == 130
    assert capsys.readouterr().err == 'x: interrupted (Ctrl-C)\n'
    assert run_main(interrupted, None, None) == 130
    assert capsys.readouterr().err == ''


def test_a_ctrl_c_while_stopping_is_ignored(capsys, default_signals):
    # polars raised a KeyboardInterrupt of its own and Python's handler one more
    # while the first line was printed: a traceback after it ("During handling of
    # the above exception"); so did a second Ctrl-C
    def main(_argv) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
        os.kill(os.getpid(), signal.SIGINT)     # the second, held until the stop
        raise KeyboardInterrupt                 # the first
    try:
        assert run_main(main, None, 'x: interrupted (Ctrl-C)') == 130
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        except KeyboardInterrupt:
            pytest.fail('the second Ctrl-C raised after the stop')
    assert capsys.readouterr().err == 'x: interrupted (Ctrl-C)\n'
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # given back


def test_the_signals_not_handled_keep_their_action(default_signals):
    seen = {}

    def main(argv) -> int:
        seen.update({sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)})
        return argv
    # the plan and the session check: SIGTERM and SIGHUP kill them as before
    assert run_main(main, 3, 'x', signals=()) == 3
    assert set(seen.values()) == {signal.SIG_DFL}
    # an ignored SIGHUP (nohup) stays ignored, unless `always` (the sequential rounds)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    run_main(main, 0, 'x')
    assert seen[signal.SIGHUP] is signal.SIG_IGN and seen[signal.SIGTERM] is not signal.SIG_DFL
    assert run_main(_killed_by(signal.SIGHUP), None, 'x', '{signal}', always=True) == 129
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_a_signal_is_no_exception_an_except_exception_swallows(default_signals):
    def main(_argv) -> int:
        try:
            _killed_by(signal.SIGTERM)(None)
        except Exception:
            return 0
        return 1
    assert not issubclass(Signalled, Exception)
    assert run_main(main, None, 'x', '{signal}') == 128 + signal.SIGTERM


def test_a_forked_child_dies_of_sigterm_as_by_default(default_signals):
    # the report's second process (the figures' pool): no Python handler
    def main(_argv) -> int:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else 1)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert run_main(main, None, 'x', '{signal}') == 0
