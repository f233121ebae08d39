"""Real ReFrame sessions of the OSU checks (checks/osu.py) and of the ring-vs-OSU
accuracy check (checks/ring.py), where OSU is provided.

OSU is in no package registry these machines reach and the harness never
downloads it, so these tests need ``HARNESS_OSU_PREFIX`` (``{stack}`` stands
for the stack's name) naming an OSU install of at least one local stack; they
skip with that reason otherwise (as in CI).  The ring sweeps need no OSU and
run in the normal integration session.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import OSU_MISSING, osu_stacks, run_reframe

pytestmark = pytest.mark.integration

OSU_CHECKS = 'Osu.*Check|RingOsuAccuracy'
MAX_SIZE = 1048576


@pytest.fixture(scope='module')
def osu_session(tmp_path_factory, stacks) -> tuple[Path, list[str], subprocess.CompletedProcess]:
    with_osu = osu_stacks(stacks)
    if not with_osu:
        pytest.skip(OSU_MISSING)
    var = tmp_path_factory.mktemp('var')
    proc = run_reframe(var, '-n', OSU_CHECKS, '-r', '-S', f'max_size={MAX_SIZE}',
                       '-S', 'rounds=2', '-S', 'max_rounds=3', '-S', 'round_budget_s=120',
                       '-S', 'bw_max=2097152',
                       env={'HARNESS_STACKS': ','.join(with_osu)}, timeout=1500)
    return var, with_osu, proc


def perflog(var: Path, part: str, check: str) -> list[dict[str, str]]:
    lines = (var / 'perflogs' / 'local' / part / f'{check}.log').read_text().splitlines()
    header = lines[0].split('|')
    # Every line fits the header: same variables on every line of a file.
    assert all(len(ln.split('|')) == len(header) for ln in lines[1:]), (check, part)
    return [dict(zip(header, ln.split('|'))) for ln in lines[1:]]


def outcome(proc, check: str, stack: str, part: str, system: str = 'local') -> list[str]:
    return [ln for ln in proc.stdout.splitlines()
            if check in ln and f'@{system}:{part}+{stack}' in ln and
            ('  OK ' in ln or ' FAIL ' in ln)]


def test_osu_checks_pass_with_full_tables(osu_session):
    var, with_osu, proc = osu_session
    for stack in with_osu:
        for part in ('shm', 'tcp'):
            for check, count in (('OsuLatencyCheck', 1), ('OsuBwCheck', 1),
                                 ('OsuBibwCheck', 1), ('OsuMbwMrCheck', 1),
                                 ('OsuAllreduceCheck', 1), ('OsuBcastCheck', 1)):
                got = outcome(proc, check, stack, part)
                assert len(got) >= count and all('  OK ' in ln for ln in got), (
                    check, stack, part, proc.stdout[-8000:])


def test_osu_perflogs_follow_the_convention(osu_session):
    var, with_osu, _ = osu_session
    sizes = [2 ** i for i in range(21)]
    for part in ('shm', 'tcp'):
        rows = [r for c in ('OsuLatencyCheck', 'OsuBwCheck', 'OsuBibwCheck')
                for r in perflog(var, part, c)]
        kinds = {r['kernel'] for r in rows}
        assert kinds == {'osu_latency', 'osu_bw', 'osu_bibw'}
        for r in rows:
            assert r['environ'] in with_osu and r['mode'] == 'mpi' and r['threads'] == '1'
            assert r['size'] == str(MAX_SIZE) and r['verified'] == 'true'
            assert r['oversubscribed'] == 'false' and r['result'] == 'pass'
            lib = {'openmpi': 'Open MPI', 'mpich': 'MPICH', 'mvapich2': 'MVAPICH2'}
            assert r['mpi_library'].startswith(lib[r['environ']])
            prefix = 'lat' if r['kernel'] == 'osu_latency' else 'bw'
            for s in sizes:
                assert float(r[f'{prefix}_{s}_value']) > 0, (r['kernel'], s)
            head = 'latency_8B' if prefix == 'lat' else 'bandwidth_1MiB'
            assert float(r[f'{head}_value']) > 0
        for r in perflog(var, part, 'OsuMbwMrCheck'):
            assert r['kernel'] == 'osu_mbw_mr'
            assert all(float(r[f'bw_k1_{s}_value']) > 0 for s in sizes)
        coll = perflog(var, part, 'OsuAllreduceCheck') + perflog(var, part, 'OsuBcastCheck')
        assert {r['kernel'] for r in coll} == {'osu_allreduce', 'osu_bcast'}
        for r in coll:
            assert int(r['ranks']) * int(r['nodes']) >= 2
            assert float(r[f'lat_{MAX_SIZE}_value']) > 0


def test_accuracy_check_logs_ratios_with_their_targets(osu_session):
    """Sanity must pass; the ratio targets are performance references decided
    by the one rule (harnesscore.bands): pass, fail or inconclusive, never a
    failure on a run flagged busy."""
    var, with_osu, proc = osu_session
    for stack in with_osu:
        for part in ('shm', 'tcp'):
            got = outcome(proc, 'RingOsuAccuracy', stack, part)
            assert got, (stack, part)
    assert not [ln for ln in proc.stdout.splitlines()
                if "failed during 'sanity'" in ln and 'RingOsuAccuracy' in ln], proc.stdout[-8000:]
    for part in ('shm', 'tcp'):
        for r in perflog(var, part, 'RingOsuAccuracy'):
            assert r['kernel'] == 'ring-vs-osu' and r['verified'] == 'true'
            for name in ('latency_ratio_8B', 'bandwidth_ratio_1MiB', 'bandwidth_ratio_1048576',
                         'bandwidth_ratio_2097152'):
                assert 0.05 < float(r[f'{name}_value']) < 20, (name, r[f'{name}_value'])
                assert float(r[f'{name}_ref']) == 1.0
            assert 2 <= float(r['rounds_value']) <= 3
            assert r['judgement'] in ('pass', 'fail', 'inconclusive'), r
            for name in ('latency_ratio_8B', 'bandwidth_ratio_1MiB'):
                assert f'{name} {r["judgement"].upper()}' in r['judgement_detail'] or (
                    r['judgement'] != 'pass'), r['judgement_detail']
            assert r['busy'] in ('true', 'false'), r
            if r['busy'] == 'true':
                assert r['judgement'] != 'fail' and r['result'] == 'pass', r
            if r['judgement'] == 'fail':
                assert r['result'] == 'fail'
            if r['judgement'] == 'pass':
                # the band is logged as the reference's thresholds
                assert float(r['bandwidth_ratio_1MiB_lower_thres']) == pytest.approx(-0.05)
                assert float(r['latency_ratio_8B_upper_thres']) >= 0.10


def test_osu_built_for_another_stack_fails(tmp_path, stacks):
    """OSU of Open MPI given to the MPICH environment: the library check fails."""
    have = osu_stacks(stacks)
    if not {'openmpi', 'mpich'} <= set(have):
        pytest.skip('needs the OSU installs of both openmpi and mpich under HARNESS_OSU_PREFIX')
    other = os.environ['HARNESS_OSU_PREFIX'].replace('{stack}', 'openmpi')
    proc = run_reframe(tmp_path, '-n', 'OsuLatencyCheck', '-r', '-S', 'max_size=64',
                       env={'HARNESS_STACKS': 'mpich', 'HARNESS_OSU_PREFIX': other})
    assert proc.returncode != 0, proc.stdout[-5000:]
    assert 'OSU was built for another stack' in proc.stdout, proc.stdout[-5000:]
    assert ' OK ' not in ''.join(ln for ln in proc.stdout.splitlines()
                                 if ln.startswith('[') and 'OsuLatencyCheck' in ln)


def test_a_slow_ring_fails_its_accuracy_check(tmp_path, stacks):
    """A real regression still fails: the ring built to busy-wait half of every
    timed bw window (``KernelBuild.fault_slow=50``: its bandwidth falls to
    about 2/3) against the real osu_bw, on shared memory.  The latency is not
    touched by the fault and may pass; the check fails on its bandwidth
    ratios, decided by the rule (``withhold_when_busy=false``: this shared
    machine may be busy, and a busy run would only withhold the FAIL)."""
    have = osu_stacks(stacks)
    if not have:
        pytest.skip(OSU_MISSING)
    stack = have[0]
    proc = run_reframe(tmp_path, '-n', 'RingOsuAccuracy', '--system', 'local:shm', '-r',
                       '-S', 'KernelBuild.fault_slow=50', '-S', 'rounds=5',
                       '-S', 'max_rounds=5', '-S', f'bw_max={MAX_SIZE}',
                       '-S', 'withhold_when_busy=false',
                       env={'HARNESS_STACKS': stack}, timeout=900)
    assert proc.returncode != 0, proc.stdout[-5000:]
    got = outcome(proc, 'RingOsuAccuracy', stack, 'shm')
    assert got and all(' FAIL ' in ln for ln in got), proc.stdout[-5000:]
    assert "failed during 'performance'" in proc.stdout, proc.stdout[-5000:]
    [row] = perflog(tmp_path, 'shm', 'RingOsuAccuracy')
    assert row['judgement'] == 'fail' and row['result'] == 'fail', row
    assert 'bandwidth_ratio_1MiB FAIL' in row['judgement_detail'], row['judgement_detail']
    assert float(row['bandwidth_ratio_1MiB_value']) < 0.85, row
    assert 'fault_slow=50' in row['build_spec'], row['build_spec']


#: A stand-in for an OSU benchmark, linked to the stack's MPI: FAKE_OSU=v53 makes
#: it answer -m as OSU 5.0-5.3 do (its usage, status 1); FAKE_OSU=noversion
#: prints a title without a version (an OSU built without autotools' version);
#: FAKE_OSU_STDERR=FILE copies FILE to stderr from rank 0 (what a library printed),
#: FAKE_OSU_STDOUT=FILE to stdout after the table.  Named osu_mbw_mr, it prints
#: that benchmark's table (its pairs: half the ranks); FAKE_OSU=fail_k<k> adds OSU's
#: data-validation column (``-c``), ``Fail`` at every size of the run of k pairs.
FAKE_OSU_C = r'''
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    const char *mode = getenv("FAKE_OSU");
    long lo = 1, hi = 1;
    int has_m = 0, rank, ranks, mbw = strstr(argv[0], "osu_mbw_mr") != NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m")) { has_m = 1; sscanf(argv[i + 1], "%ld:%ld", &lo, &hi); }
    if (rank == 0 && mode && !strcmp(mode, "v53") && has_m) {
        printf("Usage: osu_latency [options]\n\noptions:\n"
               "  -i ITER       number of iterations for timing (default 10000)\n");
        MPI_Finalize();
        return 1;
    }
    const char *err = getenv("FAKE_OSU_STDERR");
    FILE *fp = rank == 0 && err ? fopen(err, "r") : NULL;
    for (int ch; fp && (ch = fgetc(fp)) != EOF;) fputc(ch, stderr);
    if (fp) fclose(fp);
    if (rank == 0 && mbw) {
        int fail_k = 0, check = mode && sscanf(mode, "fail_k%d", &fail_k) == 1;
        const char *word = !check ? "" : ranks / 2 == fail_k ? "  Fail" : "  Pass";
        printf("# OSU MPI Multiple Bandwidth / Message Rate Test v5.9\n"
               "# [ pairs: %d ] [ window size: 64 ]\n"
               "# Size                  MB/s        Messages/s%s\n", ranks / 2,
               check ? "  Validation" : "");
        for (long s = lo; s <= hi; s *= 2) printf("%-10ld%18.2f%18.2f%s\n", s, 1.0, 1.0, word);
    } else if (rank == 0) {
        printf("# OSU MPI Latency Test%s\n# Size          Latency (us)\n",
               mode && !strcmp(mode, "noversion") ? "" : " v5.9");
        for (long s = lo; s <= hi; s *= 2) printf("%-10ld%18.2f\n", s, 1.0);
    }
    const char *out = getenv("FAKE_OSU_STDOUT");
    fp = rank == 0 && out ? fopen(out, "r") : NULL;
    for (int ch; fp && (ch = fgetc(fp)) != EOF;) fputc(ch, stdout);
    if (fp) fclose(fp);
    MPI_Finalize();
    return 0;
}
'''


@pytest.fixture(scope='module')
def fake_osu_prefix(tmp_path_factory, stacks) -> tuple[str, Path]:
    from conftest import STACKS, mpi_env
    stack = stacks[0]
    root = tmp_path_factory.mktemp('fake_osu')
    (root / stack / 'bin').mkdir(parents=True)
    (root / 'osu.c').write_text(FAKE_OSU_C)
    for name in ('osu_latency', 'osu_mbw_mr'):
        subprocess.run([STACKS[stack][0], '-o', str(root / stack / 'bin' / name),
                        str(root / 'osu.c')], check=True, env=mpi_env(), timeout=120)
    return stack, root


@pytest.mark.parametrize('mode, outcome_line, says', [
    ('v53', ' FAIL ', 'osu_latency rejected the options -m 1:64 -i 200 -x 20 (it printed its '
                      'usage): this OSU is too old, the checks need OSU 5.4 or later'),
    ('noversion', '  OK ', ''),
])
def test_an_old_or_unversioned_osu(tmp_path, fake_osu_prefix, mode, outcome_line, says):
    """OSU 5.0-5.3 (no -m) fail saying so; a title without a version is read."""
    stack, root = fake_osu_prefix
    proc = run_reframe(tmp_path, '-n', 'OsuLatencyCheck', '--system', 'local:shm', '-r',
                       '-S', 'max_size=64',
                       env={'HARNESS_STACKS': stack, 'FAKE_OSU': mode,
                            'HARNESS_OSU_PREFIX': str(root / '{stack}')}, timeout=300)
    got = outcome(proc, 'OsuLatencyCheck', stack, 'shm')
    assert got and all(outcome_line in ln for ln in got), proc.stdout[-5000:]
    assert says in proc.stdout and 'title line' not in proc.stdout, proc.stdout[-5000:]
    if mode == 'noversion':
        [row] = perflog(tmp_path, 'shm', 'OsuLatencyCheck')
        assert row['build_spec'] == f'osu-micro-benchmarks@? {root / stack}', row


@pytest.mark.parametrize('printed, outcome_line, says', [
    ('openmpi_openib_warning', '  OK ', ''),
    ('mpich_init_error', ' FAIL ', "osu_latency printed an error: ['Abort(538562447): Fatal "
                                   "error in internal_Init_thread: Other MPI error, error "
                                   "stack:'"),
])
def test_an_error_line_fails_and_an_open_mpi_warning_does_not(tmp_path, fake_osu_prefix,
                                                               printed, outcome_line, says):
    """Open MPI 4's openib warning on InfiniBand nodes run through UCX ("WARNING:
    There was an error initializing an OpenFabrics device.") and its note after a
    help message sent by several processes ("... to see all help / error
    messages") failed every OSU check of such a run as an error line.  The
    benchmark prints a recorded stderr (tests/data/osu/stderr/) beside its
    table; with the openib warning, a real Open MPI help message too (a kept
    MCA variable of a bad value) where the stack is Open MPI."""
    stack, root = fake_osu_prefix
    env = {'HARNESS_STACKS': stack, 'HARNESS_OSU_PREFIX': str(root / '{stack}'),
           'FAKE_OSU_STDERR': str(Path(__file__).parent / 'data/osu/stderr' / f'{printed}.txt')}
    if stack == 'openmpi' and outcome_line == '  OK ':
        env |= {'HARNESS_MPI_ENV': 'keep', 'OMPI_MCA_btl_vader_single_copy_mechanism': 'knem'}
    proc = run_reframe(tmp_path, '-n', 'OsuLatencyCheck', '--system', 'local:shm', '-r',
                       '-S', 'max_size=64', env=env, timeout=300)
    got = outcome(proc, 'OsuLatencyCheck', stack, 'shm')
    assert got and all(outcome_line in ln for ln in got), proc.stdout[-5000:]
    assert says in proc.stdout, proc.stdout[-5000:]


#: A line the benchmark prints on stdout after its table (an error of its own).
STDOUT_ERROR = 'osu: error: buffer check failed at size 64'


@pytest.mark.parametrize('check', ['OsuLatencyCheck', 'OsuMbwMrCheck'])
@pytest.mark.parametrize('printed, outcome_line', [('', '  OK '), (STDOUT_ERROR, ' FAIL ')])
def test_an_error_line_on_the_benchmarks_stdout_fails(tmp_path, fake_osu_prefix, check,
                                                       printed, outcome_line):
    """An error line that the benchmark printed on its stdout, beside a whole
    table, fails every OSU check: OsuMbwMrCheck's runs write their stdout into
    mbw_k<k>.out, which its sanity read for the tables only (such a run passed
    where osu_latency's failed)."""
    stack, root = fake_osu_prefix
    env = {'HARNESS_STACKS': stack, 'HARNESS_OSU_PREFIX': str(root / '{stack}')}
    if printed:
        (tmp_path / 'stdout.txt').write_text(printed + '\n')
        env['FAKE_OSU_STDOUT'] = str(tmp_path / 'stdout.txt')
    proc = run_reframe(tmp_path, '-n', check, '--system', 'local:shm', '-r',
                       '-S', 'max_size=64', env=env, timeout=300)
    got = outcome(proc, check, stack, 'shm')
    assert got and all(outcome_line in ln for ln in got), proc.stdout[-5000:]
    if printed:
        assert f'printed an error: [{printed!r}]' in proc.stdout, proc.stdout[-5000:]


@pytest.mark.parametrize('k', [1, 8])
def test_a_failed_data_validation_fails_osu_mbw_mr(tmp_path, fake_osu_prefix, k):
    """OSU's data validation (``-c``: a row that says Fail) failed by osu_mbw_mr's
    run of k pairs fails the check, naming k.  OsuMbwMrCheck.validate called
    OsuBase.validate without evaluating it (a sanity function is deferred): no
    k's validation was read, nor the library, the exit status or the
    oversubscription; evaluated, it read the largest k's table only.  On a
    declared 16-core node, so that this small machine runs every k = 1, 2, 4, 8
    (oversubscribed on purpose)."""
    stack, root = fake_osu_prefix
    proc = run_reframe(tmp_path, '-n', 'OsuMbwMrCheck', '--system', 'declared:cores16', '-r',
                       '-S', 'max_size=4',
                       env={'HARNESS_STACKS': stack, 'FAKE_OSU': f'fail_k{k}',
                            'HARNESS_OSU_PREFIX': str(root / '{stack}')}, timeout=300)
    got = outcome(proc, 'OsuMbwMrCheck', stack, 'cores16', system='declared')
    assert got and all(' FAIL ' in ln for ln in got), proc.stdout[-5000:]
    assert (f'osu_mbw_mr with {k} pair(s): OSU data validation failed at size(s) [1, 2, 4]'
            in proc.stdout), proc.stdout[-5000:]


#: An OSU benchmark that links its stack's MPI library but never starts MPI: the
#: first rank of either launcher prints osu_latency's or osu_bw's table (by the
#: program's name), FAKE_LAT us or FAKE_BW MB/s at every size.
LINKED_OSU_C = r'''
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len, bw = strstr(argv[0], "osu_bw") != NULL;
    long lo = 1, hi = 1;
    MPI_Get_library_version(lib, &len);
    const char *rank = getenv("PMI_RANK") ? getenv("PMI_RANK") : getenv("OMPI_COMM_WORLD_RANK");
    if (rank && strcmp(rank, "0")) return 0;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m")) sscanf(argv[i + 1], "%ld:%ld", &lo, &hi);
    printf("# OSU MPI %s Test v5.9\n# Size      %s\n", bw ? "Bandwidth" : "Latency",
           bw ? "Bandwidth (MB/s)" : "Latency (us)");
    for (long s = lo; s <= hi; s *= 2)
        printf("%-10ld%18.2f\n", s, atof(getenv(bw ? "FAKE_BW" : "FAKE_LAT")));
    return 0;
}
'''


def linked_osu_accuracy(tmp_path: Path, built_with: str,
                        **env: str) -> subprocess.CompletedProcess[str]:
    """One round of RingOsuAccuracy on mpich at local:shm, with LINKED_OSU_C's
    osu_latency and osu_bw built with `built_with`'s wrapper (``env``: more)."""
    from conftest import STACKS, mpi_env
    (tmp_path / 'osu' / 'bin').mkdir(parents=True)
    (tmp_path / 'osu.c').write_text(LINKED_OSU_C)
    for name in ('osu_latency', 'osu_bw'):
        subprocess.run([STACKS[built_with][0], '-o', str(tmp_path / 'osu' / 'bin' / name),
                        str(tmp_path / 'osu.c')], check=True, env=mpi_env(), timeout=120)
    return run_reframe(tmp_path / 'var', '-n', 'RingOsuAccuracy', '--system', 'local:shm',
                       '-r', '-S', 'rounds=1', '-S', 'max_rounds=1', '-S', f'bw_max={MAX_SIZE}',
                       '-S', 'lat_tol=1', '-S', 'bw_tol=1',
                       env={'HARNESS_STACKS': 'mpich', 'HARNESS_OSU_PREFIX': str(tmp_path / 'osu'),
                            'FAKE_LAT': '0.4', 'FAKE_BW': '5800', **env}, timeout=600)


def test_the_accuracy_check_fails_an_osu_of_another_stack(tmp_path, stacks):
    """RingOsuAccuracy never looked at what OSU links: osu_latency and osu_bw built
    with Open MPI, given to the MPICH environment, passed (figures near the
    ring's), measuring Open MPI's library against the ring's MPICH, where
    OsuLatencyCheck fails the same OSU.  Now it fails as the OSU checks do."""
    if not {'openmpi', 'mpich'} <= set(stacks):
        pytest.skip('needs the openmpi and mpich stacks')
    proc = linked_osu_accuracy(tmp_path, 'openmpi')
    got = outcome(proc, 'RingOsuAccuracy', 'mpich', 'shm')
    assert got and all(' FAIL ' in ln for ln in got), proc.stdout[-5000:]
    assert 'osu_latency links [' in proc.stdout, proc.stdout[-5000:]
    assert 'but stack mpich links [' in proc.stdout, proc.stdout[-5000:]
    assert 'OSU was built for another stack' in proc.stdout, proc.stdout[-5000:]


def test_the_accuracy_check_fails_two_ranks_on_one_core(tmp_path, stacks):
    """RingOsuAccuracy only flagged more threads than cores: its two ranks bound
    to one core (Hydra told ``-bind-to user:0,0`` in its configuration file,
    which the launcher reads over HYDRA_BINDING) passed, oversubscribed=false,
    where RingPingpongCheck fails the same placement from the ring's RESULT
    line.  Now it reads the ring's RESULT lines of every round as KernelCheck
    does (``check_oversubscription``)."""
    if 'mpich' not in stacks:
        pytest.skip('needs the mpich stack (Hydra)')
    (tmp_path / 'hydra.conf').write_text('-bind-to user:0,0\n')
    proc = linked_osu_accuracy(tmp_path, 'mpich', HARNESS_MPI_ENV='keep',
                               HYDRA_CONFIG_FILE=str(tmp_path / 'hydra.conf'))
    got = outcome(proc, 'RingOsuAccuracy', 'mpich', 'shm')
    assert got and all(' FAIL ' in ln for ln in got), proc.stdout[-5000:]
    assert ('oversubscribed run RingOsuAccuracy: rank 1 thread 0 and rank 0 thread 0 on '
            in proc.stdout), proc.stdout[-5000:]
    [row] = perflog(tmp_path / 'var', 'shm', 'RingOsuAccuracy')
    assert row['oversubscribed'] == 'true' and row['result'] == 'fail', row
