"""Writing a report's files (``hybridverdict.write``): a write that fails leaves no
partial report set, only the files that were there before."""

from __future__ import annotations

import os

import polars as pl
import pytest
from hybridverdict import plots, tidy
from hybridverdict import write as write_mod
from hybridverdict.cli import main
from test_cli import pair, pair_report

FULL = 'No space left on device'


@pytest.fixture
def one_process(monkeypatch):
    """The figures drawn in this process (no fork on a shared machine)."""
    real = plots.Drawing
    monkeypatch.setattr(write_mod.plots, 'Drawing',
                        lambda rep, parallel=True: real(rep, parallel=False))


def full_disk_at(monkeypatch, failing: str) -> None:
    """The write of the report's `failing` file (a suffix) fails as a full disk
    does: the HTML's with an OSError, polars' tidy Parquet with a ComputeError."""
    real_write_new, real_parquet = write_mod.write_new, tidy.write_parquet

    def write_new(path, data):
        if path.endswith(failing):
            raise OSError(28, FULL)
        return real_write_new(path, data)

    def write_parquet(df, path, meta):
        if path.endswith(failing):
            raise pl.exceptions.ComputeError(f'parquet: underlying IO error: {FULL}')
        return real_parquet(df, path, meta)

    monkeypatch.setattr(write_mod, 'write_new', write_new)
    monkeypatch.setattr(tidy, 'write_parquet', write_parquet)


@pytest.mark.parametrize('failing', ['.html', '-tidy.parquet'])
def test_a_failed_write_leaves_no_partial_report_set(tmp_path, monkeypatch, one_process,
                                                     failing):
    rep = pair_report(tmp_path)
    out = tmp_path / 'reports'
    out.mkdir()
    # an earlier report stays as it was
    earlier = write_mod.write_all(rep, str(out))
    before = {p: open(p, 'rb').read() for p in earlier.values()}
    full_disk_at(monkeypatch, failing)
    for _ in range(2):      # each retry too
        with pytest.raises((OSError, pl.exceptions.PolarsError), match=FULL):
            write_mod.write_all(rep, str(out))
        assert {str(p): p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize('failing', ['.html', '-tidy.parquet'])
def test_a_failed_write_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, one_process,
                                               failing):
    logs = pair(tmp_path)
    full_disk_at(monkeypatch, failing)
    out = tmp_path / 'reports'
    assert main(['--perflogs', str(logs.parent), '--out', str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [line for line in err if not line.startswith('hybridverdict: warning')]
    assert len(err) == 1 and err[0].startswith('hybridverdict: cannot write the report: ')
    assert FULL in err[0]
    assert os.listdir(out) == []


def stopped_at_html(tmp_path, monkeypatch, stop) -> list[str]:
    """The report's options (a pair's perflogs, --out tmp_path/reports), its
    HTML's write calling `stop` first."""
    logs = pair(tmp_path)
    real = write_mod.write_new

    def write_new(path, data):
        if path.endswith('.html'):
            stop()
        return real(path, data)

    monkeypatch.setattr(write_mod, 'write_new', write_new)
    return ['--perflogs', str(logs.parent), '--out', str(tmp_path / 'reports')]


def test_ctrl_c_while_the_report_is_written_is_130_one_line_and_no_partial_set(
        tmp_path, capsys, monkeypatch, one_process):
    # Ctrl-C in ./harness's [4/4] step: a KeyboardInterrupt traceback before.
    def interrupted():
        raise KeyboardInterrupt

    argv = stopped_at_html(tmp_path, monkeypatch, interrupted)
    out = tmp_path / 'reports'
    assert main(argv) == 130
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith('hybridverdict: warning')]
    assert err == ['hybridverdict: interrupted (Ctrl-C): no report written']
    assert os.listdir(out) == []


@pytest.mark.parametrize('signame', ['SIGTERM', 'SIGHUP'])
def test_sigterm_while_the_report_is_written_is_143_one_line_and_no_partial_set(
        tmp_path, capsys, monkeypatch, one_process, signame):
    # `timeout -s TERM` (or a closed terminal) while the report was written: the
    # process died of the signal, leaving .md, .json and -tidy.parquet without .html.
    import signal
    signum = getattr(signal, signame)

    def signalled():
        # never the default action here: it would end the test run itself
        assert signal.getsignal(signum) is not signal.SIG_DFL, f'no {signame} handler'
        os.kill(os.getpid(), signum)

    argv = stopped_at_html(tmp_path, monkeypatch, signalled)
    out = tmp_path / 'reports'
    before = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        assert main(argv) == 128 + signum
        # the handlers given back
        assert all(signal.getsignal(sig) is signal.SIG_DFL for sig in before)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith('hybridverdict: warning')]
    assert err == [f'hybridverdict: stopped by {signame}: no report written']
    assert os.listdir(out) == []


def test_a_failed_write_removes_the_csv_and_json_tidy_files_too(tmp_path, monkeypatch,
                                                                one_process):
    rep = pair_report(tmp_path)
    out = tmp_path / 'reports'
    full_disk_at(monkeypatch, '.html')
    with pytest.raises(OSError, match=FULL):
        write_mod.write_all(rep, str(out), tidy_formats=('parquet', 'csv', 'json'))
    assert list(out.iterdir()) == []


def test_an_unknown_tidy_format_is_refused_before_anything_is_written(tmp_path):
    rep = pair_report(tmp_path)
    with pytest.raises(ValueError, match='unknown tidy format'):
        write_mod.write_all(rep, str(tmp_path / 'reports'), tidy_formats=('xlsx',))
    assert not (tmp_path / 'reports').exists()


def test_a_name_another_report_takes_meanwhile_is_passed_over(tmp_path, monkeypatch,
                                                              one_process):
    """Two reports into one folder in one second: the other took the name between
    this one's look and its write. It was exit 2 and a lost report; the .md claims
    the name and this one takes the next. A link to nothing is a taken name too."""
    rep = pair_report(tmp_path)
    out = tmp_path / 'reports'
    out.mkdir()
    real = write_mod.unique_stem
    taken: list[str] = []

    def racing(directory, stem, suffixes):
        base = real(directory, stem, suffixes)
        if not taken:                         # the other report writes its .md now
            taken.append(base)
            with open(base + '.md', 'w') as fh:
                fh.write('the other report')
        return base

    monkeypatch.setattr(write_mod, 'unique_stem', racing)
    paths = write_mod.write_all(rep, str(out))
    assert paths['md'] == taken[0] + '-1.md'
    assert open(taken[0] + '.md').read() == 'the other report'
    (out / 'verdict-x-2.md').symlink_to(out / 'nothing')
    monkeypatch.setattr(write_mod, 'unique_stem', real)
    assert real(str(out), 'verdict-x', write_mod.SUFFIXES.values()).endswith('verdict-x')
    assert real(str(out), 'verdict-x-2', write_mod.SUFFIXES.values()).endswith('-2-1')
