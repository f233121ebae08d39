"""ReFrame's stop on a signal is not lost in a log record (harnesslib.compat)."""

from __future__ import annotations

import io
import logging

import pytest
from harnesslib import compat
from reframe.core.exceptions import ForceExitError


class Raising(logging.Formatter):
    """A formatter that a signal interrupts (it raises what the handler raised)."""

    def __init__(self, err: BaseException) -> None:
        super().__init__()
        self.err = err

    def format(self, record: logging.LogRecord) -> str:
        raise self.err


def _logger(err: BaseException) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Raising(err))
    logger = logging.Logger('compat-test')
    logger.addHandler(handler)
    return logger, stream


def test_reframes_force_exit_leaves_a_log_handler_and_other_errors_do_not(capsys):
    # ReFrame's SIGTERM handler raising inside StreamHandler.emit: logging
    # printed '--- Logging error ---' and the session ran on to its end.
    compat.keep_force_exit()
    compat.keep_force_exit()        # once only, however often the checks load
    logger, _ = _logger(ForceExitError('received signal 15'))
    with pytest.raises(ForceExitError, match='received signal 15'):
        logger.warning('Setting up test paths')
    logger, _ = _logger(ValueError('a bad record'))
    logger.warning('still logged')  # handled as logging and ReFrame handle it
    assert '--- Logging error ---' in capsys.readouterr().err
    assert logging.Handler.handleError.keeps_force_exit
    assert not getattr(logging.Handler.handleError.__wrapped__, 'keeps_force_exit', False)


def test_the_values_of_a_P_option_are_split_as_reframe_splits_them():
    """-P VAR=V1,V2 in any spelling, split by --param-values-delim (ReFrame's
    one delimiter for every -P, ',' unless given), in either spelling."""
    from harnesslib.compat import _session_parameters
    assert _session_parameters(['-Pnodes=1,2', '-p', 'x']) == (('nodes', ('1', '2')),)
    assert _session_parameters(['-P', 'nodes=1,2', '--param-values-delim', ';',
                                '--parameterize=x=a;b']) == (
        ('nodes', ('1,2',)), ('x', ('a', 'b')))
    assert _session_parameters(['-P', 'a=1:2', '--param-values-delim=:']) == (('a', ('1', '2')),)
