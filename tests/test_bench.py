"""The benchmark command works (its timing is shown by running it, not asserted here)."""

from __future__ import annotations

import subprocess
import sys

from hybridverdict.perflog import ReadStats, read_perflogs
from report_tools import TOOLS, tool

bench = tool('bench')


def test_the_benchmark_runs_as_a_script_beside_the_package():
    proc = subprocess.run([sys.executable, str(TOOLS / 'bench.py'), '--help'],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('usage: python reports/tools/bench.py')


def test_synthetic_perflog_is_read_back_with_its_truncated_lines(tmp_path):
    lines, sessions = bench.synthesise(str(tmp_path), 400)
    assert sessions == 4 and lines == 4 * bench.SESSION
    stats = ReadStats()
    recs = read_perflogs([str(tmp_path)], stats=stats)
    assert lines >= 400 and stats.records + stats.skipped == lines
    assert stats.skipped == 1 and stats.reasons == {
        'field count differs from header (truncated or corrupt)': 1}
    assert {r.kernel for r in recs} >= {'spmv', 'md', 'osu_latency', 'ring', 'osu_allreduce'}


def test_benchmark_runs_end_to_end(tmp_path, capsys):
    assert bench.main(['--records', '300', '--budget', '600', '--keep', str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'TOTAL' in out and 'of the 600 s budget' in out
    assert len(list((tmp_path / 'reports').iterdir())) == 4
    assert 'ingest tonight (480 records, incremental)' in out


def test_benchmark_without_a_store(tmp_path, capsys):
    assert bench.main(['--records', '300', '--budget', '600', '--in-memory', '--keep',
                       str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'read every perflog' in out and 'one-off ingest' not in out
    assert not (tmp_path / 'history').exists()


def test_an_unwritable_keep_is_one_line(tmp_path, capsys):
    (tmp_path / 'file').write_text('')
    keep = tmp_path / 'file' / 'bench'        # under a file: cannot be made
    assert bench.main(['--records', '10', '--keep', str(keep)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'bench: error: cannot write (--keep {keep}): [Errno 20] Not a '
                          'directory') and err.count('\n') == 1
