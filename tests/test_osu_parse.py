"""The OSU table parser on real outputs of OSU 5.9 (tests/data/osu/, recorded
on a 2-core machine with Open MPI 4.1.4, MPICH 4.0.2 and MVAPICH2 2.3.7), 6.2
(tests/data/osu/v6.2/, Open MPI 4.1.6) and 7.4 (tests/data/osu/v7.4/, Open MPI
4.1.6 and MPICH 4.0.2; v7.4-options/: with -f and -c), each run with the
options the checks give, and the pieces of harnesscore.osu_output that find OSU
and its MPI library."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
from conftest import REPO
from harnesscore.osu_output import (
    OsuParseError,
    error_lines,
    expected_sizes,
    missing_sizes,
    osu_spec,
    parse_osu,
)
from reframe.utility import import_module_from_file

DATA = REPO / 'tests' / 'data' / 'osu'
FILES = sorted(DATA.glob('*.txt'))

#: benchmark -> (title, value columns after Size, smallest size)
BENCH = {
    'osu_latency': ('Latency', ('Latency (us)',), 0),
    'osu_bw': ('Bandwidth', ('Bandwidth (MB/s)',), 1),
    'osu_bibw': ('Bi-Directional Bandwidth', ('Bandwidth (MB/s)',), 1),
    'osu_mbw_mr': ('Multiple Bandwidth / Message Rate', ('MB/s', 'Messages/s'), 1),
    'osu_allreduce': ('Allreduce Latency', ('Avg Latency(us)',), 4),
    'osu_bcast': ('Broadcast Latency', ('Avg Latency(us)',), 1),
}


def bench_of(path: Path) -> str:
    return re.search(r'(osu_\w+?)\.txt$', path.name).group(1)


def test_recorded_outputs_cover_every_benchmark_and_two_stacks():
    assert {bench_of(p) for p in FILES} == set(BENCH)
    for bench in BENCH:
        stacks = {p.name.split('_')[0] for p in FILES if bench_of(p) == bench}
        assert len(stacks) >= 2, (bench, stacks)


@pytest.mark.parametrize('path', FILES, ids=[p.name for p in FILES])
def test_every_recorded_output_parses_completely(path):
    table = parse_osu(path.read_text(), path.name)
    title, columns, lo = BENCH[bench_of(path)]
    assert table.title == title
    assert table.version == '5.9'
    assert table.columns == ('Size', *columns)
    # Every size from the smallest to the largest, doubling, nothing missing.
    assert table.sizes == expected_sizes(lo, max(table.sizes))
    assert not missing_sizes(table, expected_sizes(lo, max(table.sizes)))
    for size, values in table.rows.items():
        assert len(values) == len(columns)
        assert all(v > 0 for v in values), (size, values)


# ---- 6.x and 7.x --------------------------------------------------------------------

VERSIONED = sorted((DATA / 'v6.2').glob('*.txt')) + sorted((DATA / 'v7.4').glob('*.txt'))
#: What 7.x prints differently: osu_latency's column name, and no 0-byte row.
COLUMNS_7 = {'osu_latency': ('Avg Latency(us)',)}


def test_recorded_outputs_of_6_and_7_cover_every_benchmark():
    for version in ('v6.2', 'v7.4'):
        got = {bench_of(p) for p in VERSIONED if p.parent.name == version}
        assert got == set(BENCH), version


@pytest.mark.parametrize('path', VERSIONED, ids=[f'{p.parent.name}/{p.name}' for p in VERSIONED])
def test_recorded_outputs_of_6_and_7_parse_completely(path):
    version = path.parent.name[1:]
    bench = bench_of(path)
    table = parse_osu(path.read_text(), path.name)
    title, columns, lo = BENCH[bench]
    if version.startswith('7'):
        columns = COLUMNS_7.get(bench, columns)
        assert min(table.sizes) == max(lo, 1), '7.x prints no 0-byte row'
        assert 'Datatype: MPI_CHAR.' in table.options
    assert (table.title, table.version) == (title, version)
    assert table.columns == ('Size', *columns)
    assert table.sizes == expected_sizes(min(table.sizes), max(table.sizes))
    assert not table.failed
    assert all(v > 0 for values in table.rows.values() for v in values)


def test_the_checks_sweeps_are_printed_whole_by_every_version():
    """The sizes each OSU check asks for are rows of every version's table:
    with a 0-byte latency (5.x's sweep) OSU 7.x's runs would all miss one."""
    osu = import_module_from_file(str(REPO / 'checks' / 'osu.py'))
    for path in FILES + VERSIONED:
        bench = bench_of(path)
        table = parse_osu(path.read_text(), path.name)
        want = expected_sizes(osu.MIN_SIZE[bench], max(table.sizes))
        assert not missing_sizes(table, want), (path, want)


def test_7x_full_output_gives_its_extra_columns():
    table = parse_osu((DATA / 'v7.4-options' / 'openmpi_shm_osu_allreduce_f.txt').read_text())
    assert table.columns == ('Size', 'Avg Latency(us)', 'Min Latency(us)', 'Max Latency(us)',
                             'Iterations')
    assert table.rows[8] == (0.68, 0.39, 0.97, 50.0)
    assert table.column(0)[16384] == 179.09       # the average is column 0 in every version


def test_7x_tail_columns_of_a_bandwidth_test_are_apart():
    # OSU 7 pads its 'P50 Tail BW(MB/s)' headers to one space (osu_util_mpi.c's
    # FIELD_WIDTH less their length): every row had 4 values under 1 column
    table = parse_osu('# OSU MPI Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n'
                      '# Size      Bandwidth (MB/s) P50 Tail BW(MB/s) P90 Tail BW(MB/s) '
                      'P99 Tail BW(MB/s)\n'
                      '1                      16.37              16.54              16.89'
                      '              16.92\n')
    assert table.columns == ('Size', 'Bandwidth (MB/s)', 'P50 Tail BW(MB/s)',
                             'P90 Tail BW(MB/s)', 'P99 Tail BW(MB/s)')
    assert table.rows[1] == (16.37, 16.54, 16.89, 16.92)


def test_7x_validation_column_is_read_as_words_and_a_fail_is_named():
    text = (DATA / 'v7.4-options' / 'openmpi_shm_osu_latency_c.txt').read_text()
    table = parse_osu(text)
    assert table.columns[-1] == 'Validation'
    assert table.rows[8] == (0.42,) and table.failed == ()
    failing = text.replace('0.45              Pass', '0.45              Fail', 1)
    assert parse_osu(failing).failed == (128,)
    with pytest.raises(OsuParseError, match='needs a Validation column'):
        parse_osu(text.replace('        Validation', ''), 'x')


def test_the_record_names_the_osu_version():
    table = parse_osu((DATA / 'v7.4' / 'openmpi_shm_osu_bw.txt').read_text())
    assert osu_spec('/opt/osu/openmpi', table.version) == \
        'osu-micro-benchmarks@7.4 /opt/osu/openmpi'
    assert osu_spec('/opt/osu') == 'osu-micro-benchmarks@? /opt/osu'


def test_the_osu_spec_of_a_prefix_with_a_bar_fits_the_perflog():
    """HARNESS_OSU_PREFIX='/tmp/o|su/{stack}': the build_spec held the perflog's
    separator, so the OSU check's line had one field more than its header and the
    report skipped it as corrupt.  The prefix is written as every field is
    (schema.field_text: '|' becomes '/', on one line); spaces stay."""
    assert osu_spec('/tmp/o|su/mpich', '5.9') == 'osu-micro-benchmarks@5.9 /tmp/o/su/mpich'
    assert osu_spec('/tmp/my osu\nx') == 'osu-micro-benchmarks@? /tmp/my osu x'


def test_a_title_without_a_version_is_read_as_no_version():
    # OSU built without autotools' PACKAGE_VERSION prints no "vX.Y".
    text = (DATA / 'openmpi_shm_osu_latency.txt').read_text()
    plain = re.sub(r'(# OSU MPI Latency Test) v\S+', r'\1', text)
    assert plain != text
    table = parse_osu(plain)
    assert (table.title, table.version) == ('Latency', '')
    assert table.rows == parse_osu(text).rows
    assert osu_spec('/opt/osu', table.version) == 'osu-micro-benchmarks@? /opt/osu'


#: What OSU 5.0-5.3 print for -m (they have no such option), with status 1.
OSU_53_USAGE = """Usage: osu_latency [options]

options:
  -x ITER       number of warmup iterations to skip before timing(default 1000)
  -i ITER       number of iterations for timing (default 10000)
  -h            print this help message
"""


def test_an_osu_that_rejects_the_options_is_named_too_old():
    from harnesscore.osu_output import rejected_options
    why = rejected_options(OSU_53_USAGE, 'osu_latency', ['-m', '1:64', '-i', '200'])
    assert why == ('osu_latency rejected the options -m 1:64 -i 200 (it printed its usage): '
                   'this OSU is too old, the checks need OSU 5.4 or later')
    # A table is no rejection, whatever else the output holds.
    text = (DATA / 'openmpi_shm_osu_latency.txt').read_text()
    assert rejected_options(text, 'osu_latency', ['-m', '1:64']) == ''
    assert rejected_options(text + OSU_53_USAGE, 'osu_latency', ['-m', '1:64']) == ''


def test_values_are_the_printed_numbers():
    table = parse_osu((DATA / 'openmpi_shm_osu_latency.txt').read_text())
    assert table.column(0)[0] == 0.23 and table.column(0)[8] == 0.26
    mbw = parse_osu((DATA / 'mpich_shm_osu_mbw_mr.txt').read_text())
    assert mbw.options == ('[ pairs: 1 ] [ window size: 64 ]',)
    assert mbw.rows[1] == (8.07, 8074589.03)
    assert mbw.column(1)[4194304] == 1060.72


def test_a_truncated_run_misses_its_last_sizes():
    text = (DATA / 'mpich_shm_osu_bw.txt').read_text().splitlines()
    table = parse_osu('\n'.join(text[:-3]))
    assert missing_sizes(table, expected_sizes(1, 4194304)) == [1048576, 2097152, 4194304]


def test_launcher_noise_around_the_table_is_ignored():
    text = (DATA / 'openmpi_shm_osu_bw.txt').read_text()
    noisy = ('[vm:123] mca_base_component_repository_open: unable to open mca_foo\n' + text
             + 'WARNING: 12 messages\n# OSU MPI Latency Test v5.9\n'
             + '# Size   Latency (us)\n0   1.0\n')
    assert parse_osu(noisy).rows == parse_osu(text).rows


@pytest.mark.parametrize('text, message', [
    ('', 'no "# OSU MPI ... Test" title'),
    ('# OSU MPI Bandwidth Test v5.9\n1   2.0\n', 'no column header'),
    ('# OSU MPI Bandwidth Test v5.9\n# Size      Bandwidth (MB/s)\n', 'no rows'),
    ('# OSU MPI Bandwidth Test v5.9\n# Size      Bandwidth (MB/s)\n1   2.0\n2   nan?\n',
     'line 4: not a table row'),
    ('# OSU MPI Bandwidth Test v5.9\n# Size      Bandwidth (MB/s)\n1   2.0   3.0\n',
     'line 3: 2 value(s), the header has 1'),
])
def test_malformed_outputs_are_errors_naming_the_problem(text, message):
    with pytest.raises(OsuParseError, match=re.escape(message)):
        parse_osu(text, 'x')


def test_expected_sizes_follow_osu():
    assert expected_sizes(0, 8) == [0, 1, 2, 4, 8]
    assert expected_sizes(4, 4) == [4]
    assert expected_sizes(1048576, 4194304) == [1048576, 2097152, 4194304]
    with pytest.raises(ValueError):
        expected_sizes(8, 4)


# ---- harnesslib: where OSU is, and which MPI library it links ---------------------

def harnesslib():
    from harnesscore import osu_output
    return osu_output


def env(prefix: str, stack: str = 'mpich'):
    return types.SimpleNamespace(name=stack, extras={'stack': stack, 'osu_prefix': prefix})


def program(path: Path) -> Path:
    """An executable file at `path` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\n')
    path.chmod(0o755)
    return path


PT2PT = Path('libexec', 'osu-micro-benchmarks', 'mpi', 'pt2pt')


def test_osu_binary_is_found_under_libexec_or_bin(tmp_path):
    lib = harnesslib()
    bw = program(tmp_path / PT2PT / 'osu_bw')
    assert lib.osu_binary(env(str(tmp_path)), 'osu_bw') == (str(bw), '')
    program(tmp_path / 'bin' / 'osu_bcast')
    assert lib.osu_binary(env(str(tmp_path)), 'osu_bcast')[0] == str(tmp_path / 'bin/osu_bcast')


def test_missing_osu_gives_one_line_saying_how_to_provide_it(tmp_path):
    lib = harnesslib()
    path, why = lib.osu_binary(env(''), 'osu_latency')
    assert path is None and '\n' not in why
    assert 'HARNESS_OSU_PREFIX' in why and 'osu_prefix' in why and 'Spack' in why
    path, why = lib.osu_binary(env(str(tmp_path)), 'osu_latency')
    assert path is None and str(tmp_path) in why and 'osu_latency' in why


def test_mpi_libraries_from_ldd_output():
    lib = harnesslib()
    ldd = ('\tlinux-vdso.so.1 (0x00007ffd)\n'
           '\tlibmpi.so.40 => /usr/lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f)\n'
           '\tlibmpich.so.12 => /usr/lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f)\n'
           '\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f)\n'
           '\tlibmpi_cxx.so.40 => /usr/lib/x86_64-linux-gnu/libmpi_cxx.so.40 (0x00007f)\n'
           '\tlibmpi.so.12 => not found\n')
    got = lib.mpi_libraries(ldd)
    assert any(p.startswith('/usr/lib/x86_64-linux-gnu/libmpi.so.40') for p in got)
    assert any('libmpich.so.12' in p for p in got)
    assert 'libmpi.so.12 (not found)' in got     # an unresolved libmpi shows as such
    assert not any('libm.so' in p or 'libmpi_cxx' in p for p in got)


def test_the_stacks_library_from_its_wrapper_against_ldd(tmp_path):
    """OSU's library is checked against what the environment's compiler
    wrapper links: the -lmpi* library in one of its -L folders."""
    lib = harnesslib()
    (tmp_path / 'ompi').mkdir()
    real = tmp_path / 'ompi' / 'libmpi.so.40.30.4'
    real.write_text('')
    (tmp_path / 'ompi' / 'libmpi.so').symlink_to(real.name)
    stack = lib.stack_libraries(f'-L{tmp_path}/ompi -lmpi')
    assert stack == {str(real)}
    assert lib.libraries_agree({str(real)}, stack)
    assert not lib.libraries_agree({'/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.0'}, stack)
    # MPICH's -show; its -L folder without libmpich.so: the name decides.
    mpich = lib.stack_libraries(f'gcc -I/x -L{tmp_path}/none -lmpich')
    assert mpich == {'libmpich.so'}
    assert lib.libraries_agree({'/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.0'}, mpich)
    assert not lib.libraries_agree({str(real)}, mpich)
    assert lib.stack_libraries('gcc -lm') == set()
    envs = {fam: types.SimpleNamespace(cc='/opt/my mpi/bin/mpicc', extras={'family': fam})
            for fam in ('openmpi', 'mpich')}
    assert lib.wrapper_link_check(envs['openmpi']) == "'/opt/my mpi/bin/mpicc' -showme:link"
    assert lib.wrapper_link_check(envs['mpich']) == "'/opt/my mpi/bin/mpicc' -show"


def test_settings_fill_the_stack_into_the_osu_prefix(monkeypatch):
    monkeypatch.setenv('HARNESS_OSU_PREFIX', '/opt/osu/{stack}')
    monkeypatch.setenv('HARNESS_QUIET', '1')
    settings = import_module_from_file(str(REPO / 'config' / 'settings.py'))
    assert settings._osu_prefix('mpich') == '/opt/osu/mpich'
    monkeypatch.delenv('HARNESS_OSU_PREFIX')
    assert settings._osu_prefix('mpich') == ''


def test_an_osu_prefix_that_is_no_folder_is_an_error_naming_it(tmp_path, monkeypatch):
    """A set prefix that is not there fails the checks (a skip would hide the
    mistake), naming HARNESS_OSU_PREFIX where it gave the folder, and the
    folder as the user gave it, not the link ReFrame was given for it."""
    lib = harnesslib()
    from harnesscore.paths import reframe_path
    monkeypatch.setenv('HARNESS_OSU_PREFIX', str(tmp_path / 'my osu' / '{stack}'))
    want = tmp_path / 'my osu' / 'mpich'
    link = reframe_path(str(want))
    assert '.var-links' in link and lib.given_path(link) == str(want)
    with pytest.raises(lib.OsuPrefixError, match=re.escape(
            f'HARNESS_OSU_PREFIX={tmp_path}/my osu/{{stack}}: the OSU prefix {want} of '
            f'mpich does not exist')):
        lib.osu_binary(env(link), 'osu_latency')
    monkeypatch.delenv('HARNESS_OSU_PREFIX')
    (tmp_path / 'file').write_text('')
    with pytest.raises(lib.OsuPrefixError, match=re.escape(
            f'osu_prefix of environment mpich: the OSU prefix {tmp_path}/file of mpich is '
            f'not a directory')):
        lib.osu_binary(env(str(tmp_path / 'file')), 'osu_latency')


def test_a_benchmark_file_that_is_not_executable_is_passed_over(tmp_path):
    lib = harnesslib()
    (tmp_path / PT2PT).mkdir(parents=True)
    (tmp_path / PT2PT / 'osu_latency').write_text('not a program\n')
    latency = program(tmp_path / 'bin' / 'osu_latency')
    assert lib.osu_binary(env(str(tmp_path)), 'osu_latency') == (str(latency), '')


def test_a_missing_osu_prefix_of_the_environment_is_not_blamed_on_the_knob(tmp_path,
                                                                           monkeypatch):
    # HARNESS_OSU_PREFIX names another folder: the prefix is the environment's own
    lib = harnesslib()
    monkeypatch.setenv('HARNESS_OSU_PREFIX', str(tmp_path / 'osu' / '{stack}'))
    with pytest.raises(lib.OsuPrefixError, match=re.escape(
            f'osu_prefix of environment mpich: the OSU prefix {tmp_path}/site/osu of mpich '
            'does not exist')):
        lib.osu_binary(env(str(tmp_path / 'site' / 'osu')), 'osu_latency')


#: What MPI libraries print on stderr, recorded here (Open MPI 4.1.4, MPICH 4.0.2):
#: a help message on a run that went on (an MCA variable of a bad value: exit 0),
#: Open MPI's and MPICH's errors in MPI_Init (exit 1 and 143) and MPI_Abort
#: (exit 3).  The two warnings are Open MPI 4.1.4's help texts
#: (help-mpi-btl-openib.txt, "error in device init"; help-orte-rmaps-base.txt,
#: "rmaps:membind-not-supported") in the frame
#: Open MPI prints them in: this machine has no InfiniBand device to provoke
#: the first, and binds memory.
STDERR = DATA / 'stderr'


@pytest.mark.parametrize('name', ['openmpi_bad_mca_value', 'openmpi_openib_warning',
                                  'openmpi_membind_warning'])
def test_open_mpi_warnings_and_help_notes_are_not_errors(name):
    """Open MPI 4's openib warning on InfiniBand nodes run through UCX says
    "error", as do its notes after a help message several processes sent:
    every OSU check of such a run failed, "printed an error"."""
    text = (STDERR / f'{name}.txt').read_text()
    assert 'error' in text.lower()
    assert error_lines(text) == []


@pytest.mark.parametrize('name, first', [
    ('openmpi_init_error', '[vm:02800] *** An error occurred in MPI_Init_thread'),
    ('mpich_init_error', 'Abort(538562447): Fatal error in internal_Init_thread: Other MPI '
                         'error, error stack:'),
    # MPI_Abort(MPI_COMM_WORLD, 3) on rank 1 of 2 (tests/data/osu/stderr, recorded
    # under mpirun.openmpi --oversubscribe -np 2 and mpirun.mpich -np 2, exit 3):
    # Open MPI's "MPI_ABORT" has no word boundary before "ABORT"
    ('openmpi_mpi_abort', 'MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD'),
    ('mpich_mpi_abort', 'Abort(3) on node 1 (rank 1 in comm 0): application called '
                        'MPI_Abort(MPI_COMM_WORLD, 3) - process 1'),
])
def test_errors_are_named_by_their_lines_after_a_warning_too(name, first):
    text = (STDERR / f'{name}.txt').read_text()
    errors = error_lines(text)
    assert errors[0] == first
    if name == 'openmpi_init_error':
        assert '[vm:02800] *** Unknown error' in errors
        assert not any('help message' in e or 'orte_base_help_aggregate' in e for e in errors)
    warned = (STDERR / 'openmpi_openib_warning.txt').read_text() + text
    assert error_lines(warned) == errors
