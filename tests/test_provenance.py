"""Provenance in every record (issue 26, item 1): what a run was made with and where
it ran, from the perflog or the run report through the history store to
``perflog.provenance``; older perflogs and store parts read as ''; and a real run
records it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import polars as pl
import pytest
import reframe
from conftest import REPO, run_reframe
from harnesscore.schema import KNOWN, REQUIRED, RUN_FIELDS, field_text, fields_after
from harnesslib import base, build
from hybridverdict import store
from hybridverdict.perflog import (
    PROVENANCE_FIELDS,
    ReadStats,
    Record,
    provenance,
    read_perflogs,
)
from hybridverdict.runreport import read_run_report
from perflog_writer import LIBS, T0, header, line, write

#: Every provenance field written by the harness after 'result', with a value.
PROV = {
    'mpi_env': 'OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 UCX_TLS=sm,self',
    'src_version': 'v1.2-3-g31ff6aa-dirty',
    'compiler': 'gcc 13.3.0',
    'reframe_version': '4.10.4',
    'spack_hash': 'abc1234',
    'loaded_modules': 'gcc/13.3.0:openmpi/4.1.6',
    'node_names': 'nid001,nid002',
    'kernel_release': '6.1.0-28-amd64',
    'launch_command': 'mpirun -np 4 /opt/k/spmv --mode mpi --n 16',
}
#: The fields of a harness perflog header as written before provenance
#: (issue 26, item 1), and before mpi_env (issue 27).
OLD_HEADER = ('job_completion_time|system|partition|environ|name|kernel|mode|ranks|threads|'
              'size|cores|nodes|mpi_library|verified|oversubscribed|finalize_hung|build_spec|'
              'result|judgement|judgement_detail|load_before|load_after|steal_pct|busy_procs|'
              'busy|busy_detail|mpi_env')
OLDER_HEADER = OLD_HEADER.rsplit('|', 1)[0]


def spmv(i: int = 0, **prov: str) -> str:
    return line('spmv', {'t_total': (1.0 + i, 's')}, time=T0 + dt.timedelta(minutes=i),
                after_result=prov)


def expected(**prov: str) -> dict[str, str]:
    """provenance() of a `spmv` record with these fields."""
    own = {'mpi_library': LIBS['mpich'], 'build_spec': 'cmake Release mpich'}
    return {f: own.get(f) or prov.get(f, '') for f in PROVENANCE_FIELDS}


# ---- the schema ---------------------------------------------------------------------

def test_every_provenance_field_is_a_run_field_the_checks_set_and_a_record_field():
    checks = {f.name for f in RUN_FIELDS if f.from_check}
    records = {f.name for f in dataclasses.fields(Record)}
    assert set(PROVENANCE_FIELDS) <= checks & records
    assert set(PROV) <= set(PROVENANCE_FIELDS)
    assert len(set(PROVENANCE_FIELDS)) == len(PROVENANCE_FIELDS) == 11
    # never required: perflogs written before the fields existed still pair
    assert not set(PROVENANCE_FIELDS) & set(REQUIRED)
    for name in PROVENANCE_FIELDS:
        assert name in KNOWN
    for name in set(PROVENANCE_FIELDS) - {'mpi_library'}:   # a field of every Record
        assert Record.__dataclass_fields__[name].default == ''
    # the record's fields after mpi_env are the schema's, in its order
    names = [f.name for f in dataclasses.fields(Record)]
    assert tuple(names[names.index('mpi_env') + 1:]) == fields_after('mpi_env')


def test_field_text_keeps_a_perflog_line_one_line_without_separators():
    assert field_text('a|b\nc\r\nd') == 'a/b c d'
    assert field_text('x' * 500) == 'x' * 300
    assert field_text('y' * 50, 10) == 'y' * 10
    assert len(base.mpi_env_text({f'UCX_V{i}': 'v' * 20 for i in range(100)})) == 1000


# ---- perflog, run report, store -----------------------------------------------------

def test_a_new_perflog_round_trips_every_provenance_field(tmp_path):
    log = write(tmp_path / 'logs' / 'SpmvCheck.log',
                [header(['t_total']), spmv(0, **PROV), spmv(1)])
    recs = read_perflogs([str(tmp_path / 'logs')])
    assert len(recs) == 2
    for name, value in PROV.items():
        assert getattr(recs[0], name) == value
    assert provenance(recs[0]) == expected(**PROV)
    assert list(provenance(recs[0])) == list(PROVENANCE_FIELDS)
    assert provenance(recs[1]) == expected()
    # through the history store: ingested, then read back
    st = store.Store(str(tmp_path / 'history'))
    assert st.ingest([str(log)]).records == 2
    back = st.records()
    assert [provenance(r) for r in back] == [provenance(r) for r in recs]
    assert [dataclasses.asdict(r) for r in back] == [dataclasses.asdict(r) for r in recs]
    # and in the store's own table, one column per field
    table = st.scan()[0].select(list(store.PROVENANCE_COLUMNS)).collect()
    assert table.row(0, named=True) == {c: PROV[c] for c in store.PROVENANCE_COLUMNS}


def test_a_run_report_gives_the_provenance_fields(tmp_path):
    case = {'name': 'SpmvCheck', 'system': 'local', 'partition': 'shm', 'environ': 'mpich',
            'kernel': 'spmv', 'mode': 'mpi', 'ranks': 2, 'threads': 1, 'size': '16',
            'result': 'pass', 'job_completion_time_unix': T0.timestamp(),
            'mpi_library': LIBS['mpich'], 'build_spec': 'cmake Release mpich',
            'perfvalues': {'local:shm:t_total': [1.0, 0, None, None, 's', 'pass']}}
    path = tmp_path / 'run-report-1.json'
    path.write_text(json.dumps({'runs': [{'testcases': [
        {**case, 'check_vars': PROV}, dict(case)]}]}))
    recs = read_run_report(str(path), ReadStats())
    assert [provenance(r) for r in recs] == [expected(**PROV), expected()]


@pytest.mark.parametrize('old', [OLD_HEADER, OLDER_HEADER], ids=['no-provenance', 'no-mpi_env'])
def test_an_old_perflog_still_loads_with_empty_provenance(tmp_path, old):
    fields = old.split('|')
    run = {'job_completion_time': f'{T0:%Y-%m-%dT%H:%M:%S%z}', 'system': 'local',
           'partition': 'shm', 'environ': 'mpich', 'name': 'SpmvCheck', 'kernel': 'spmv',
           'mode': 'mpi', 'ranks': '2', 'threads': '1', 'size': '16', 'cores': '2',
           'nodes': '1', 'mpi_library': LIBS['mpich'], 'verified': 'true',
           'oversubscribed': 'false', 'finalize_hung': 'false',
           'build_spec': 'cmake Release mpich', 'result': 'pass',
           'mpi_env': PROV['mpi_env']}
    text = '|'.join(run.get(f, '') for f in fields)
    logs = tmp_path / 'logs'
    write(logs / 'SpmvCheck.log', [old + '|t_total_value|t_total_unit|t_total_ref|'
                                   't_total_lower_thres|t_total_upper_thres',
                                   text + '|1.5|s|0|None|None|'])
    stats = ReadStats()
    (rec,) = read_perflogs([str(logs)], stats=stats)
    assert stats.skipped == 0 and not stats.unknown_fields
    assert rec.values == {'t_total': 1.5}
    want = expected(mpi_env=PROV['mpi_env'] if 'mpi_env' in fields else '')
    assert provenance(rec) == want
    st = store.Store(str(tmp_path / 'history'))
    st.ingest([str(logs)])
    assert [provenance(r) for r in st.records()] == [want]


def test_an_old_store_part_without_the_provenance_columns_still_loads(tmp_path):
    st = store.Store(str(tmp_path / 'history'))
    write(tmp_path / 'old' / 'SpmvCheck.log', [header(['t_total']), spmv(0, **PROV)])
    st.ingest([str(tmp_path / 'old')])
    # part 1 as a store written before provenance (and mpi_env) wrote it
    part = tmp_path / 'history' / 'part-000001-records.parquet'
    old = pl.read_parquet(part).drop(list(store.PROVENANCE_COLUMNS))
    assert 'mpi_env' not in old.columns and 'library' in old.columns
    os.chmod(part, 0o644)
    part.unlink()
    old.write_parquet(part, compression='zstd')
    # a new part beside it, with the columns
    write(tmp_path / 'new' / 'SpmvCheck.log', [header(['t_total']), spmv(5, **PROV)])
    assert st.ingest([str(tmp_path / 'new')]).records == 1
    recs = st.records()
    assert [provenance(r) for r in recs] == [expected(), expected(**PROV)]
    assert [r.values for r in recs] == [{'t_total': 1.0}, {'t_total': 6.0}]
    since = st.records(T0 + dt.timedelta(minutes=1))
    assert [provenance(r) for r in since] == [expected(**PROV)]
    # the lazy scans (the history's) see '' rather than null
    col = st.scan()[0].select('compiler', 'mpi_env').collect()
    assert col.rows() == [('', ''), (PROV['compiler'], PROV['mpi_env'])]


# ---- where the checks' values come from ---------------------------------------------

def commit_all(repo) -> str:
    """`repo` made a git repository of its files, committed: its short HEAD."""
    git = ['git', '-C', str(repo), '-c', 'user.name=t', '-c', 'user.email=t@t']
    subprocess.run([*git, 'init', '-q'], check=True)
    subprocess.run([*git, 'add', '.'], check=True)
    subprocess.run([*git, 'commit', '-qm', 'x'], check=True)
    return subprocess.run([*git, 'rev-parse', '--short', 'HEAD'], check=True,
                          capture_output=True, text=True).stdout.strip()


def c_sources(root: Path) -> Path:
    """`root`/src holding one C file, a.c (a program that returns 0)."""
    src = root / 'src'
    src.mkdir()
    (src / 'a.c').write_text('int main(void) { return 0; }\n')
    return src


def test_source_version_is_git_describe_or_a_digest_of_the_sources(tmp_path):
    src = c_sources(tmp_path)
    plain = build.source_version.__wrapped__(str(tmp_path), str(src))
    assert re.fullmatch(r'sha256:[0-9a-f]{12}', plain)
    (src / 'a.c').write_text('int main(void) { return 1; }\n')
    assert build.source_version.__wrapped__(str(tmp_path), str(src)) != plain
    (tmp_path / 'README.md').write_text('notes\n')
    head = commit_all(tmp_path)
    assert build.source_version.__wrapped__(str(tmp_path), str(src)) == head
    # an edit outside src/ is no change of the kernels
    (tmp_path / 'README.md').write_text('more notes\n')
    assert build.source_version.__wrapped__(str(tmp_path), str(src)) == head


def test_source_version_of_uncommitted_sources_tells_the_edits_apart(tmp_path):
    """Two different uncommitted edits of the kernels are two versions (a digest
    of the sources after ``-dirty-``); an untracked source counts, a file git
    ignores (a build folder in src/) does not."""
    src = c_sources(tmp_path)
    (tmp_path / '.gitignore').write_text('/src/build-*\n')
    head = commit_all(tmp_path)

    def version() -> str:
        return build.source_version.__wrapped__(str(tmp_path), str(src))

    (src / 'a.c').write_text('int main(void) { return 2; }\n')
    two = version()
    assert re.fullmatch(rf'{head}-dirty-[0-9a-f]{{12}}', two), two
    (src / 'a.c').write_text('int main(void) { return 3; }\n')
    three = version()
    assert re.fullmatch(rf'{head}-dirty-[0-9a-f]{{12}}', three) and three != two
    (src / 'build-x').mkdir()
    (src / 'build-x' / 'CMakeCache.txt').write_text('ignored\n')
    assert version() == three
    (src / 'b.c').write_text('int f(void) { return 1; }\n')
    assert version() not in (two, three)
    (src / 'b.c').unlink()
    (src / 'a.c').write_text('int main(void) { return 2; }\n')
    assert version() == two      # the same sources, the same version
    (src / 'a.c').write_text('int main(void) { return 0; }\n')
    assert version() == head


def test_the_compiler_from_cmake_spack_or_the_environment(tmp_path):
    cmake = tmp_path / 'CMakeFiles' / '3.25.1'
    cmake.mkdir(parents=True)
    (cmake / 'CMakeCCompiler.cmake').write_text(
        'set(CMAKE_C_COMPILER "/usr/bin/mpicc.mpich")\nset(CMAKE_C_COMPILER_ID "GNU")\n'
        'set(CMAKE_C_COMPILER_VERSION "12.2.0")\n')
    assert build.cmake_compiler(str(tmp_path)) == 'gcc 12.2.0'
    assert build.cmake_compiler(str(tmp_path / 'none')) == ''
    spec = ('hybrid-kernels@develop%gcc@13.3.0+openmp build_type=Release '
            'arch=linux-ubuntu24.04-x86_64 ^mpich@4.2.1 /q3vx7ab')
    assert build.spack_compiler(spec) == 'gcc 13.3.0'
    assert build.spack_hash(spec) == 'q3vx7ab'
    assert build.spack_hash('cmake Release mpich cc=/usr/bin/mpicc') == ''
    macros = '#define __GNUC__ 13\n#define __GNUC_MINOR__ 3\n#define __GNUC_PATCHLEVEL__ 0\n'
    sep = build.PROBE_SEPARATOR
    assert build.compiler_from_probe(f'{macros}{sep}\ngcc (Ubuntu) 13.3.0\n') == 'gcc 13.3.0'
    clang = ('#define __GNUC__ 4\n#define __clang__ 1\n#define __clang_major__ 17\n'
             '#define __clang_minor__ 0\n#define __clang_patchlevel__ 6\n')
    assert build.compiler_from_probe(clang + sep) == 'clang 17.0.6'
    assert build.compiler_from_probe(f'odd\n{sep}\nAcme C 2.1\n') == 'Acme C 2.1'
    assert build.compiler_from_probe(f'sh: 1: cc: not found\n{sep}\n'
                                     'sh: 1: cc: not found\n') == ''
    # the probe line, run by a shell, quoting the compiler's name
    out = tmp_path / 'probe dir' / 'compiler.txt'
    out.parent.mkdir()
    subprocess.run(build.compiler_probe('no such cc $(touch INJECTED)', str(out)), shell=True,
                   cwd=tmp_path, check=True)
    assert not (tmp_path / 'INJECTED').exists()
    assert build.compiler_from_probe(out.read_text()) == ''


def test_a_cmake_build_records_the_c_flags_of_a_build_type_other_than_release(tmp_path,
                                                                              stacks):
    """CMake's flags of Debug, RelWithDebInfo... are no part of the build type's
    name as Release's are (src/CMakeLists.txt's own): the build_spec says them."""
    cc = shutil.which(f'mpicc.{stacks[0]}')
    if not cc:
        pytest.skip(f'mpicc.{stacks[0]} is not on PATH')
    flags = {}
    for build_type in ('Debug', 'Release'):
        out = tmp_path / build_type
        subprocess.run(['cmake', '-S', str(REPO / 'src'), '-B', str(out),
                        f'-DCMAKE_BUILD_TYPE={build_type}', f'-DCMAKE_C_COMPILER={cc}',
                        f'-DMPI_C_COMPILER={cc}'], check=True, capture_output=True)
        flags[build_type] = build.cmake_c_flags(str(out))
    assert flags == {'Debug': '-g', 'Release': '-O3 -march=native -DNDEBUG'}
    assert build.cmake_c_flags(str(tmp_path / 'none')) is None
    fixture = types.SimpleNamespace(
        current_environ=types.SimpleNamespace(name='mpich', cc=cc, extras={'stack': 'mpich'}),
        build_type='RelWithDebInfo', fault_inject=True, fault_slow=0)
    spec = build.KernelBuild.cmake_build_spec
    assert spec(fixture) == f'cmake RelWithDebInfo mpich cc={cc} fault_inject'
    assert spec(fixture, '-O2 -g -DNDEBUG') == \
        f"cmake RelWithDebInfo mpich cc={cc} cflags='-O2 -g -DNDEBUG' fault_inject"
    assert spec(fixture, '') == f"cmake RelWithDebInfo mpich cc={cc} cflags='' fault_inject"


def test_a_cmake_build_has_its_own_c_flags_not_the_shells_nor_an_old_caches(tmp_path,
                                                                             stacks):
    """CMake takes CFLAGS on a folder's first configure and keeps it in its cache:
    a build configured once under CFLAGS=-pg kept -pg in every later session, under
    a Release build_spec that said nothing of it. The harness's configure gives the
    flags (the environment's cflags, none here)."""
    cc = shutil.which(f'mpicc.{stacks[0]}')
    if not cc:
        pytest.skip(f'mpicc.{stacks[0]} is not on PATH')
    shell = {**os.environ, 'CFLAGS': '-O0 -fno-inline -pg'}
    old, new = tmp_path / 'old', tmp_path / 'new'
    # as the harness configured before: CFLAGS in the shell on the first configure
    first = [a for a in build.cmake_configure(str(old), 'Release', cc)
             if not a.startswith('-DCMAKE_C_FLAGS=')]
    subprocess.run(first, env=shell, check=True, capture_output=True)
    assert build.cmake_c_flags(str(old)).startswith('-O0 -fno-inline -pg')
    for folder, env in ((old, dict(os.environ)), (new, shell)):
        subprocess.run(build.cmake_configure(str(folder), 'Release', cc), env=env, check=True,
                       capture_output=True)
        assert build.cmake_c_flags(str(folder)) == '-O3 -march=native -DNDEBUG', folder
    subprocess.run(build.cmake_configure(str(new), 'Release', cc, '-fno-omit-frame-pointer'),
                   check=True, capture_output=True)
    assert build.cmake_c_flags(str(new)) == '-fno-omit-frame-pointer -O3 -march=native -DNDEBUG'
    # cflags that name the target CPU (a login node building for other compute
    # nodes) are the only -march: the later -march=native won over them
    for target in ('-march=x86-64-v2', '-O2 -mcpu=native'):
        subprocess.run(build.cmake_configure(str(new), 'Release', cc, target),
                       check=True, capture_output=True)
        assert build.cmake_c_flags(str(new)) == f'{target} -O3 -DNDEBUG'


def test_a_users_release_flags_are_kept_and_native_can_be_left_out(tmp_path, stacks):
    """A hand build's -DCMAKE_C_FLAGS_RELEASE was shadowed by the kernels' own
    Release flags (its -O2 built -O3), and a Spack build, whose wrapper gives the
    spec's target (-march=<target>), had -march=native after it: built for the
    CPU of the node that builds. KERNEL_NATIVE=OFF (Spack's package) leaves it out."""
    cc = shutil.which(f'mpicc.{stacks[0]}')
    if not cc:
        pytest.skip(f'mpicc.{stacks[0]} is not on PATH')
    out = str(tmp_path / 'b')
    for given, flags in ((['-DCMAKE_C_FLAGS_RELEASE=-O2 -g'], '-O2 -g -march=native'),
                         (['-DCMAKE_C_FLAGS_RELEASE=-O2 -march=x86-64-v3'],
                          '-O2 -march=x86-64-v3'),
                         (['-DKERNEL_NATIVE=OFF', '-UCMAKE_C_FLAGS_RELEASE'], '-O3 -DNDEBUG'),
                         (['-DKERNEL_NATIVE=ON'], '-O3 -march=native -DNDEBUG')):
        for _ in range(2):          # a configure again keeps them
            subprocess.run([*build.cmake_configure(out, 'Release', cc), *given],
                           check=True, capture_output=True)
            assert build.cmake_c_flags(out) == flags, given


def test_a_build_names_the_variables_its_wrapper_reads_and_builds_apart(monkeypatch):
    """Audit: an exported OMPI_CFLAGS=-pg compiled every kernel with -pg (the opal
    wrapper adds it) under a build_spec that said 'cmake Release openmpi cc=...',
    into the build folder that later sessions without it reused."""
    from types import SimpleNamespace

    from harnesscore.stacks import STACK

    def env(family: str, **env_vars: str) -> SimpleNamespace:
        return SimpleNamespace(extras={'family': family}, env_vars=env_vars)

    for name in ('OMPI_CFLAGS', 'OMPI_CC', 'MPICH_CC', 'OMPI_MCA_btl'):
        monkeypatch.delenv(name, raising=False)
    assert build.wrapper_settings(env('openmpi')) == []
    monkeypatch.setenv('OMPI_CFLAGS', '-O0 -pg')
    monkeypatch.setenv('MPICH_CC', 'clang')
    monkeypatch.setenv('OMPI_MCA_btl', 'self')      # a run's tuning: not the build's
    assert build.wrapper_settings(env('openmpi')) == ["OMPI_CFLAGS='-O0 -pg'"]
    assert build.wrapper_settings(env('openmpi', OMPI_CC='gcc-13')) == [
        'OMPI_CC=gcc-13', "OMPI_CFLAGS='-O0 -pg'"]
    assert build.wrapper_settings(env('mpich')) == ['MPICH_CC=clang']
    assert build.wrapper_settings(env('')) == []
    assert all(s.wrapper_vars for s in STACK.values())
    # what a build records and where it builds
    test = SimpleNamespace(current_environ=SimpleNamespace(
        extras={'family': 'openmpi', 'stack': 'openmpi'}, env_vars={}, name='openmpi',
        cc='/usr/bin/mpicc.openmpi'), build_type='Release', fault_inject=False, fault_slow=0)
    assert build.KernelBuild.cmake_build_spec(test) == (
        "cmake Release openmpi cc=/usr/bin/mpicc.openmpi OMPI_CFLAGS='-O0 -pg'")
    monkeypatch.delenv('OMPI_CFLAGS')
    assert build.KernelBuild.cmake_build_spec(test) == (
        'cmake Release openmpi cc=/usr/bin/mpicc.openmpi')
    # an environment's cflags (a cluster stack's -march=znver3) build apart too
    # (the tree of other flags was configured again and shared); none: as before
    test.current_environ.cflags = []
    tags = {build.build_tag(test.current_environ, 'Release', False, 0)}
    for cflags in (['-march=znver3'], ['-march=znver4']):
        test.current_environ.cflags = cflags
        tags.add(build.build_tag(test.current_environ, 'Release', False, 0))
    assert len(tags) == 3 and all(t.startswith('openmpi-release-') for t in tags), tags
    assert build.build_tag(test.current_environ, 'Debug', True, 5).endswith(
        '-fault-inject-fault-slow5')


def test_the_job_probe_and_the_launch_line_of_a_script(tmp_path):
    out = tmp_path / "stage 'x'" / 'provenance.txt'
    out.parent.mkdir()
    env = {'PATH': os.environ['PATH'], 'LOADEDMODULES': 'gcc/13:openmpi/4',
           'SLURM_JOB_NODELIST': 'nid[001-002]'}
    subprocess.run(['bash', '-c', base.job_probe(str(out))], env=env, check=True)
    got = base.read_job_probe(out.read_text())
    assert got == {'host': os.uname().nodename, 'kernel_release': os.uname().release,
                   'nodelist': 'nid[001-002]', 'modules': 'gcc/13:openmpi/4'}
    script = '\n'.join([
        'set -o pipefail', 'round=0', 'while :; do',
        "  OMP_NUM_THREADS=1 'mpirun' '-np' '1' /k/md --preset x | sed -n 's/a/b/p' "
        '| tee -a bench.out', 'done'])
    assert base.first_launch(script) == 'OMP_NUM_THREADS=1 mpirun -np 1 /k/md --preset x'
    assert base.first_launch('timeout -k 10 90 srun --ntasks=2 osu_bw > o.out || true') == \
        'timeout -k 10 90 srun --ntasks=2 osu_bw'
    assert base.first_launch('echo nothing to launch\n') == ''


# ---- a real run -----------------------------------------------------------------------

@pytest.mark.integration
def test_a_real_run_records_its_provenance(tmp_path, stacks):
    proc = run_reframe(tmp_path, '--system', 'local:shm', '-p', stacks[0], '-r',
                       '-n', 'SpmvCheck%layout=mpi_2x1%problem=16',
                       '-S', 'SpmvCheck.stream_elements=100000',
                       env={'HARNESS_SNAPSHOTS': '0'})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    logs = tmp_path / 'perflogs'
    recs = read_perflogs([str(logs)])
    assert recs
    for rec in recs:
        prov = provenance(rec)
        for name in ('src_version', 'compiler', 'reframe_version', 'node_names',
                     'kernel_release', 'launch_command', 'mpi_env', 'build_spec'):
            assert prov[name], (name, prov)
        assert re.fullmatch(r'(gcc|clang|\S+) \d+(\.\d+)*', prov['compiler']), prov
        assert prov['kernel_release'] == os.uname().release
        assert os.uname().nodename in prov['node_names'].split(',')
        assert '-np 2' in prov['launch_command'] and 'spmv' in prov['launch_command']
        assert prov['spack_hash'] == ''
        assert prov['reframe_version'] == reframe.VERSION
    # one ReFrame process, one session (HARNESS_SESSION unset: time and pid)
    assert len({rec.session for rec in recs}) == 1
    assert re.fullmatch(r'\d{8}T\d{6}Z-\d+', recs[0].session), recs[0].session
    # every line of the raw perflog has as many fields as its header
    for path in logs.rglob('*.log'):
        lines = path.read_text().splitlines()
        assert {len(ln.rstrip('|').split('|')) for ln in lines[1:]} <= {
            len(lines[0].rstrip('|').split('|'))}


@pytest.mark.parametrize('status, hung, verified, passes', [
    (0, False, True, False),      # a clean run: the status is checked (and is 0)
    (255, True, True, True),      # MPICH's finalize hang after verified results
    (255, False, True, False),    # a launcher failure without the watchdog's warning
    (255, True, False, False),    # the watchdog fired, but a result is unverified
    (1, True, True, True),
])
def test_only_a_finalize_hang_after_verified_results_excuses_the_exit_status(
        status, hung, verified, passes):
    assert base.finalize_hang_only(status, hung, verified) is passes
