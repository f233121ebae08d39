"""The hybridverdict command: table, report files, never overwriting."""

from __future__ import annotations

import pytest
from hybridverdict import plots
from hybridverdict import write as write_mod
from hybridverdict.cli import main
from hybridverdict.perflog import ReadStats, read_perflogs
from hybridverdict.report import build
from test_perflog import HEADER, line, write


def test_prints_table_and_writes_new_reports(tmp_path, capsys):
    logs = write(tmp_path / 'perflogs/local/shm/SpmvCheck.log', HEADER,
                 line(t=2.0), line(mode='masteronly', ranks=1, threads=2, t=1.0))
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(logs.parent), '--out', str(out)]) == 0
    first = capsys.readouterr().out
    assert 'WIN' in first and 'spmv' in first and '2.000' in first
    assert main(['--perflogs', str(logs.parent), '--out', str(out)]) == 0
    reports = sorted(p.name for p in out.iterdir())
    assert len([p for p in reports if p.endswith('.md')]) == 2, reports
    text = (out / next(p for p in reports if p.endswith('.md'))).read_text()
    assert 'MPICH Version: 4.0.2' in text and '| spmv' in text


def test_no_pairs_is_an_error(tmp_path, capsys):
    logs = write(tmp_path / 'x.log', HEADER, line())
    assert main(['--perflogs', str(logs), '--no-write']) == 1
    assert 'no pure-MPI/hybrid pair' in capsys.readouterr().err


def test_missing_input_is_an_error(tmp_path, capsys):
    assert main(['--perflogs', str(tmp_path / 'none')]) == 2
    assert 'no such perflog' in capsys.readouterr().err


@pytest.mark.parametrize('store', [False, True])
def test_a_perflog_whose_read_fails_is_named(tmp_path, capsys, store):
    # an I/O error (EIO, no file name) inside a --perflogs folder: /proc/self/mem,
    # whose first page is not mapped, said only "[Errno 5] Input/output error"
    logs = write(tmp_path / 'perflogs/local/shm/SpmvCheck.log', HEADER, line())
    (logs.parent / 'MdCheck.log').symlink_to('/proc/self/mem')
    where = (['--history-store', str(tmp_path / 'store')] if store
             else ['--no-history-store'])
    assert main(['--perflogs', str(tmp_path / 'perflogs'), '--no-write', *where]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"Input/output error: '{logs.parent / 'MdCheck.log'}'\n"), err


def test_corrupt_lines_are_reported_not_fatal(tmp_path, capsys):
    logs = write(tmp_path / 'x.log', HEADER, line(t=2.0), 'broken|line',
                 line(mode='masteronly', ranks=1, threads=2, t=1.0))
    assert main(['--perflogs', str(logs), '--no-write']) == 0
    assert 'skipped 1 perflog line' in capsys.readouterr().err


def pair(tmp_path):
    """A perflog of one pure-MPI/hybrid pair."""
    return write(tmp_path / 'perflogs/local/shm/SpmvCheck.log', HEADER, line(t=2.0),
                 line(mode='masteronly', ranks=1, threads=2, t=1.0))


def pair_report(tmp_path):
    """The report of `pair`'s perflog, built in this process."""
    logs = pair(tmp_path)
    stats = ReadStats()
    return build(read_perflogs([str(logs)], stats=stats), stats, [str(logs)])


@pytest.mark.parametrize('value', ['abc', '-1', 'inf'])
def test_a_bad_change_knob_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch, value):
    # the report's morning page reads HARNESS_CHANGE_* where it has a history store
    logs = pair(tmp_path)
    monkeypatch.setenv('HARNESS_CHANGE_SESSION_GAP', value)
    assert main(['--perflogs', str(logs.parent), '--history-store', str(tmp_path / 'h'),
                 '--out', str(tmp_path / 'reports')]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hybridverdict: HARNESS_CHANGE_SESSION_GAP='{value}': ")
    assert err.count('\n') == 1
    assert not (tmp_path / 'h').exists() and not (tmp_path / 'reports').exists()
    # without a store the knobs are not read: the report is made as before
    assert main(['--perflogs', str(logs.parent), '--no-write']) == 0


@pytest.mark.parametrize('option', ['--history-limit', '--history-points'])
def test_a_huge_history_option_is_refused_by_the_parser(tmp_path, capsys, option):
    logs = pair(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(['--perflogs', str(logs.parent), '--no-write', option, '9223372036854775807'])
    assert exit_.value.code == 2
    assert f'error: {option} must be from ' in capsys.readouterr().err


@pytest.mark.parametrize('args', [['--out', ''], ['--history-store', ''],
                                  ['changes', '--store', ''], ['changes', '--json', '']])
def test_an_empty_path_is_refused_not_taken_for_the_default(tmp_path, capsys, monkeypatch,
                                                            args):
    # --history-store "$UNSET" stored nothing, --out "$UNSET" wrote into
    # $HARNESS_VAR_DIR/reports, changes --json "" wrote nothing: each silently, exit 0
    monkeypatch.setenv('HARNESS_VAR_DIR', str(tmp_path / 'var'))
    logs = pair(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(args if args[0] == 'changes' else ['--perflogs', str(logs.parent), *args])
    assert exit_.value.code == 2
    assert f'error: argument {args[-2]}: an empty path' in capsys.readouterr().err
    assert not (tmp_path / 'var').exists()


class SpyPool:
    """The process pool of a ``plots.Drawing`` (never started): whether it was ended."""

    def __init__(self) -> None:
        self.ended = False

    def terminate(self) -> None:
        self.ended = True

    def join(self) -> None:
        pass


def test_an_unwritable_out_starts_no_drawing_process_and_ends_one_it_started(
        tmp_path, monkeypatch):
    rep = pair_report(tmp_path)
    drawings: list[plots.Drawing] = []
    real = plots.Drawing

    def drawing(rep, parallel=True):
        d = real(rep, parallel=False)
        d.pool = SpyPool()
        drawings.append(d)
        return d

    monkeypatch.setattr(write_mod.plots, 'Drawing', drawing)
    # --out under a file: os.makedirs fails before a second process is forked
    (tmp_path / 'file').write_text('')
    with pytest.raises(OSError):
        write_mod.write_all(rep, str(tmp_path / 'file' / 'reports'))
    assert drawings == []

    # a write that fails after it started: its process is ended all the same
    def refused(path, text):
        raise PermissionError(13, 'Permission denied', path)

    monkeypatch.setattr(write_mod, 'write_new', refused)
    with pytest.raises(PermissionError):
        write_mod.write_all(rep, str(tmp_path / 'reports'))
    (d,) = drawings
    assert d.pool.ended


def test_the_commands_load_their_libraries_where_ctrl_c_is_one_line():
    # Ctrl-C in the first second of `hybridverdict` (polars, matplotlib loading
    # before main ran) was a KeyboardInterrupt traceback
    import re
    import subprocess
    import sys
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / 'pyproject.toml').read_text()
    scripts = dict(re.findall(r'^([\w-]+) = "([\w.:]+)"$', text, re.M))
    for name in ('hybridverdict', 'hybridverdict-baseline'):
        module, func = scripts[name].split(':')
        code = (f'import sys, {module}; assert callable({module}.{func}); '
                'print(sorted(m for m in ("polars", "matplotlib", "numpy", "yaml") '
                'if m in sys.modules))')
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                             check=True).stdout
        assert out.strip() == '[]', (name, scripts[name], out)


def test_the_second_process_leaves_ctrl_c_to_the_report(monkeypatch):
    # Ctrl-C reaches the process group: the figures' second process printed
    # "Process ForkPoolWorker-1:" and its traceback beside the report's one line
    import signal
    monkeypatch.setattr(plots, 'SECOND_PROCESS', ('sigint',))
    monkeypatch.setattr(plots, 'all_figures', lambda rep, keys=None: (
        {k: str(signal.getsignal(signal.SIGINT)) for k in keys} if keys == ('sigint',)
        else {}))
    monkeypatch.setattr(plots.os, 'cpu_count', lambda: 2)
    drawing = plots.Drawing(None)           # type: ignore[arg-type]
    assert drawing.pool is not None
    assert drawing.result() == {'sigint': str(signal.SIG_IGN)}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_bad_max_rounds_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    # The verdicts' stopped column reads HARNESS_MAX_ROUNDS: a bad value was a
    # traceback of the report.
    from hybridverdict.cli import main
    monkeypatch.setenv('HARNESS_MAX_ROUNDS', 'many')
    assert main(['--perflogs', str(tmp_path), '--no-history-store',
                 '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert err.startswith('hybridverdict: error: HARNESS_MAX_ROUNDS must be') and \
        'Traceback' not in err, err
