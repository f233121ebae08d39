"""The ring's pingpong and bw measure as osu_latency and osu_bw 5.9 do, and a
slowed-down ring (fault injection) reports less bandwidth than a normal one.

* ctest's ring_osu_counts_* cases assert OSU's message counts and skipped
  warm-up iterations (tests/test_kernels.py runs every ctest);
* a build with -DKERNEL_FAULT_SLOW=50 stretches every timed bw window by half
  of its own time: its bandwidth, measured in the same run alternating with a
  normal build, is about 2/3 of the normal one (a ratio, not an absolute time),
  while its data still verifies: a performance regression that an accuracy
  check must catch, not a wrong result.
"""

from __future__ import annotations

import re
import shlex
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import STACKS, kernel_results, mpi_env, perflog
from test_kernels import cmake_build

SLOW_PCT = 50
DATA = Path(__file__).parent / 'data'


def bw_results(stack: str, ring: Path, *args: str) -> list[dict]:
    launcher = shutil.which(STACKS[stack][1])
    proc = subprocess.run([launcher, '-n', '2', str(ring), '--pattern', 'bw', *args],
                          env=mpi_env(OMP_NUM_THREADS='1'), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return kernel_results(proc.stdout)


@pytest.fixture(scope='module')
def builds(stacks, tmp_path_factory) -> tuple[str, Path, Path]:
    stack = stacks[0]
    root = tmp_path_factory.mktemp('ring_osu')
    normal = cmake_build(stack, root / 'normal')
    slow = cmake_build(stack, root / 'slow', f'-DKERNEL_FAULT_SLOW={SLOW_PCT}')
    return stack, normal / 'ring', slow / 'ring'


def test_slowed_ring_reports_lower_bandwidth_in_the_same_run(builds):
    stack, normal, slow = builds
    # 64 KiB and 1 MiB: a window of 8 KiB messages takes ~50 us, where a 2-core
    # machine's noise outweighs the effect (single ratios 0.55-1.04 were seen there,
    # and a CI run's median of 0.89); at these sizes they stayed within 0.56-0.70
    args = ('--sizes', '64K,1M', '--iters', '20', '--skip', '2', '--reps', '5')
    ratios: dict[int, list[float]] = {}
    for _ in range(3):  # alternating, so both see the same machine
        fast_res = {r['size']: r for r in bw_results(stack, normal, *args)}
        slow_res = {r['size']: r for r in bw_results(stack, slow, *args)}
        for size, res in slow_res.items():
            assert res['verified'] is True and res['fault_slow_pct'] == SLOW_PCT
            assert 'fault_slow_pct' not in fast_res[size]
            ratios.setdefault(size, []).append(
                res['bandwidth_MBps'] / fast_res[size]['bandwidth_MBps'])
    for size, values in ratios.items():
        # expected 100/(100+50) = 0.67; a clean run of the same build gives ~1
        assert statistics.median(values) < 0.85, (size, values)


def test_bw_json_says_how_it_was_timed(builds):
    stack, normal, _ = builds
    (res,) = bw_results(stack, normal, '--sizes', '16K', '--reps', '1')
    assert (res['iters'], res['warmup'], res['skip'], res['window']) == (20, 2, 2, 64)
    assert res['timer'] == 'sender, per iteration (OSU 5.9)'
    # bandwidth = size * window * iters / (the sender's summed window times)
    assert res['bandwidth_MBps'] == pytest.approx(
        16384 * 64 * 20 / res['t_total_s'] / 1e6, rel=1e-6)


@pytest.mark.integration
def test_a_session_builds_the_slowed_ring_on_request(tmp_path, stacks):
    """``-S KernelBuild.fault_slow=P`` reaches the build (its own build folder,
    the perflog's build field) and the ring it runs (every bw RESULT line says
    so); a percent out of range is refused before anything is built."""
    from conftest import run_reframe
    stack = stacks[0]
    opts = ('-n', 'RingBwCheck', '--system', 'local:shm', '-S', 'sizes=64K:128K')
    proc = run_reframe(tmp_path, *opts, '-S', f'KernelBuild.fault_slow={SLOW_PCT}', '-r',
                       env={'HARNESS_STACKS': stack})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert list((tmp_path / 'build').glob(f'{stack}-release-*-fault-slow{SLOW_PCT}')), \
        sorted(p.name for p in (tmp_path / 'build').iterdir())
    row = perflog(tmp_path / 'perflogs' / 'local' / 'shm' / 'RingBwCheck.log')[-1]
    assert row['build_spec'].endswith(f'fault_slow={SLOW_PCT}'), row['build_spec']
    outs = list((tmp_path / 'output').rglob('rfm_job.out'))
    results = [r for out in outs for r in kernel_results(out.read_text())]
    assert results and all(r['fault_slow_pct'] == SLOW_PCT and r['verified'] for r in results)
    bad = run_reframe(tmp_path / 'bad', *opts, '-S', 'KernelBuild.fault_slow=-5', '-r',
                      env={'HARNESS_STACKS': stack})
    assert bad.returncode != 0
    assert 'KernelBuild.fault_slow must be a percent from 0 (off) to 1000, got -5' in bad.stdout, \
        bad.stdout[-5000:]


# ---- bad -S/-P values and OSU prefixes of the ring and OSU checks ------------------
# (--list/--dry-run sessions: no build, no run; each bad value fails the
# session naming the variable and its value, never skips the check silently)

#: (what the user gives, the checks, -S/-P options, what the user sees, 'ok' or 'fail'),
#: from tests/data/ring_osu_bad_values.yaml
BAD_VALUES = [(c['what'], c['checks'], c['opts'], c['sees'], c['status'])
              for c in yaml.safe_load((DATA / 'ring_osu_bad_values.yaml').read_text())]


def fake_osu(root: Path) -> Path:
    """An OSU prefix whose bin/ holds do-nothing benchmarks (enough for --dry-run)."""
    (root / 'bin').mkdir(parents=True)
    for name in ('osu_latency', 'osu_bw', 'osu_bibw', 'osu_mbw_mr', 'osu_allreduce',
                 'osu_bcast'):
        (root / 'bin' / name).write_text('#!/bin/sh\n')
        (root / 'bin' / name).chmod(0o755)
    return root


def dry_session(var: Path, stack: str, checks: str, *opts: str,
                osu: str) -> tuple[int, str]:
    from conftest import run_reframe
    last = [] if '--list' in opts else ['--dry-run']
    proc = run_reframe(var, '-n', checks, '--system', 'local:shm', *opts, *last,
                       env={'HARNESS_STACKS': stack, 'HARNESS_OSU_PREFIX': osu,
                            'HARNESS_QUIET': '1'}, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_upper_bounds_are_the_kernels_limits():
    """The most each kernel option takes, as the checks refuse a larger -S value
    at setup (harnesscore.plan), read from the kernels' sources: a limit changed
    in src/ alone let the value through to a run that exited with status 2."""
    from conftest import REPO
    from harnesscore import plan as P
    found = {
        P.MAX_MIN_TIME: ('common/kernel_common.c',
                         r'kc_opt_double\("min-time", text, 0\.0, 0, ([0-9.]+),'),
        P.SPMV_MAX_ITERS: ('spmv/spmv.h', r'#define SPMV_MAX_ITERS ([0-9]+)L'),
        P.MD_MAX_STEPS: ('md/md.h', r'#define MD_MAX_STEPS ([0-9]+)L'),
        P.RING_MAX_REPS: ('ring.c', r'kc_opt_long\("reps", arg, 1, ([0-9]+),'),
        P.RING_MAX_ITERS_SCALE: ('ring.c',
                                 r'kc_opt_double\("iters-scale", arg, 0\.0, 1, ([0-9.]+),'),
        P.STREAM_MAX_ITERS: ('stream.c', r'kc_opt_long\("iters", arg, 1, ([0-9]+),'),
    }
    for limit, (source, pattern) in found.items():
        seen = [float(m) for m in re.findall(pattern, (REPO / 'src' / source).read_text())]
        assert seen == [limit], (source, pattern, seen, limit)


@pytest.mark.parametrize('what,checks,opts,sees,status', BAD_VALUES,
                         ids=[case[0] for case in BAD_VALUES])
def test_bad_values_fail_naming_the_variable(tmp_path, stacks, what, checks, opts, sees,
                                             status):
    rc, text = dry_session(tmp_path / 'var', stacks[0], checks, *opts,
                           osu=str(fake_osu(tmp_path / 'osu')))
    assert re.search(sees, text), text[-5000:]
    assert (rc != 0) if status == 'fail' else (rc == 0), (rc, text[-5000:])
    assert 'skipping test' not in text and 'Traceback (most recent' not in text, text[-5000:]
    if 'sizes=' in ' '.join(opts):
        assert 'OSU' not in ''.join(ln for ln in text.splitlines() if 'Reason' in ln)


@pytest.mark.parametrize('folder', ['nonexistent', 'osu dir'])
def test_an_osu_prefix_that_does_not_exist_fails_naming_it(tmp_path, stacks, folder):
    """Unset, HARNESS_OSU_PREFIX skips the OSU checks; set to a folder that is not
    there (after {stack} is filled in), it fails them, naming the user's path
    (not the link ReFrame is given for a path with a space)."""
    stack = stacks[0]
    given = tmp_path / folder / '{stack}'
    rc, text = dry_session(tmp_path / 'var', stack, 'OsuLatencyCheck|RingOsuAccuracy',
                           osu=str(given))
    want = (f'HARNESS_OSU_PREFIX={given}: the OSU prefix {tmp_path / folder / stack} '
            f'of {stack} does not exist')
    assert rc != 0 and text.count(want) >= 2, text[-5000:]
    assert '.var-links' not in text and ' SKIP ' not in text, text[-5000:]
    rc, text = dry_session(tmp_path / 'var2', stack, 'OsuLatencyCheck', osu='')
    assert rc == 0 and 'SKIP' in text and 'not configured' in text, text[-5000:]


def test_the_record_names_an_osu_prefix_with_a_space_as_given(tmp_path, stacks):
    """ReFrame is given a link in .var-links for a prefix with a space; the
    records' build_spec names the user's folder, not that link."""
    stack = stacks[0]
    osu = fake_osu(tmp_path / 'osu dir' / stack)
    rc, text = dry_session(tmp_path / 'var', stack, 'OsuLatencyCheck|RingOsuAccuracy',
                           osu=str(tmp_path / 'osu dir' / '{stack}'))
    assert rc == 0, text[-5000:]
    for check in ('OsuLatencyCheck', 'RingOsuAccuracy'):
        rows = perflog(tmp_path / 'var' / 'perflogs' / 'local' / 'shm' / f'{check}.log')
        assert rows and all(r['build_spec'].endswith(f'osu-micro-benchmarks@? {osu}')
                            for r in rows), (check, [r['build_spec'] for r in rows])


# ---- osu_mbw_mr across two nodes: k ranks on each node ------------------------------

TEMPLATE = Path(__file__).resolve().parents[1] / 'config' / 'cluster_template.py'
#: Per stack of the template's 2-node ib partition (128 cores a node): how its
#: launches of osu_mbw_mr start ranks, and what says k per node on the line.
MBW_PLACEMENT = {
    'mvapich2': ('own', 'mpiexec -n {n} -ppn {k} '),        # Hydra's own mpiexec
    'mpich': ('srun', 'srun --cpus-per-task=1 --ntasks={n} --ntasks-per-node={k} '),
    'openmpi': ('own', 'mpirun -np {n} --map-by ppr:{k}:node '),  # Open MPI's mpirun
}


def mbw_mr_lines(tmp_path: Path, stack: str) -> dict[int, str]:
    """The launch line per k of OsuMbwMrCheck's mbw_mr.sh in a dry run on the
    template's 2-node ib partition (Open MPI made a stack with ``launch: own``)."""
    from conftest import run_reframe
    site = tmp_path / 'site_own.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    "CLUSTER['stacks']['openmpi'].update({'launch': 'own', "
                    "'launcher': 'mpirun'})\nCLUSTER['stacks']['openmpi'].pop('pmi', None)\n")
    fake_osu(tmp_path / 'osu' / stack)
    var = tmp_path / 'var'
    proc = run_reframe(var, '--system', 'example-hpc:ib', '-n', 'OsuMbwMrCheck', '-p', stack,
                       '--dry-run',
                       env={'HARNESS_CLUSTERS': str(site), 'HARNESS_MODULES_SYSTEM': 'nomod',
                            'HARNESS_BUDGET': '24h/part', 'HARNESS_QUIET': '1',
                            'HARNESS_OSU_PREFIX': str(tmp_path / 'osu' / '{stack}')},
                       timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    [script] = (var / 'example-hpc' / 'stage' / 'example-hpc' / 'ib' / stack).glob(
        'OsuMbwMrCheck*/mbw_mr.sh')
    lines = {int(m.group(1)): ln for ln in script.read_text().splitlines()
             if (m := re.search(r'> mbw_k(\d+)\.out', ln))}
    job = (script.parent / 'rfm_job.sh').read_text()
    assert '#SBATCH --ntasks=256\n' in job and '#SBATCH --ntasks-per-node=128\n' in job, job
    return lines


@pytest.mark.parametrize('stack', sorted(MBW_PLACEMENT))
def test_osu_mbw_mr_places_k_ranks_on_each_of_two_nodes(tmp_path, stack):
    """Each k of the sweep launches 2k ranks, k per node, named on the line: a
    stack's own launcher (Hydra, Open MPI's mpirun) would fill the first
    node's 128 slots first and put the pairs of every k < 128 on one node."""
    launch, want = MBW_PLACEMENT[stack]
    lines = mbw_mr_lines(tmp_path, stack)
    assert sorted(lines) == [1, 2, 4, 8, 16, 32, 64, 128], lines
    for k, line in lines.items():
        assert want.format(n=2 * k, k=k) in line, (k, line)


def fake_slurm_env(tmp_path: Path) -> dict[str, str]:
    """A 2-node allocation of 128 slots a node, as a launcher inside it sees it."""
    return mpi_env(SLURM_NODELIST='nodeA,nodeB', SLURM_JOB_NODELIST='nodeA,nodeB',
                   SLURM_TASKS_PER_NODE='128(x2)', SLURM_JOB_CPUS_PER_NODE='128(x2)',
                   SLURM_JOB_ID='1', SLURM_JOBID='1', SLURM_NNODES='2',
                   SLURM_JOB_NUM_NODES='2', HYDRA_BINDING='core',
                   OMPI_MCA_rmaps_base_mapping_policy='core',
                   OMPI_MCA_hwloc_base_binding_policy='core')


@pytest.mark.parametrize('stack, launcher', [('mvapich2', 'mpiexec.mpich'),
                                             ('openmpi', 'mpirun.openmpi')])
def test_the_launchers_place_osu_mbw_mr_pairs_across_the_nodes(tmp_path, stack, launcher):
    """The launchers' own dry display of the script's lines in a (fake) 2-node
    allocation: ranks 0..k-1 on the first node, k..2k-1 on the second, so that
    osu_mbw_mr's pairs (rank i and i + k) span the nodes.  Hydra (MPICH's, as
    MVAPICH2's) with -bootstrap fork -verbose; Open MPI with --display-map
    --do-not-launch on a synthetic 128-core node (hwloc's lstopo)."""
    tool = shutil.which(launcher)
    if tool is None or (stack == 'openmpi' and not shutil.which('lstopo-no-graphics')):
        pytest.skip(f'no {launcher} (or lstopo-no-graphics) here')
    env = fake_slurm_env(tmp_path)
    if stack == 'openmpi':
        topo = tmp_path / 'node128.xml'
        subprocess.run(['lstopo-no-graphics', '--input', 'pack:2 core:64 pu:1', '--of', 'xml',
                        str(topo)], check=True, capture_output=True, timeout=60)
        env['OMPI_MCA_hwloc_base_topo_file'] = str(topo)
    lines = mbw_mr_lines(tmp_path, stack)
    for k in (1, 4, 64):
        # The launcher's words between its name and the benchmark.
        words = shlex.split(lines[k].split(' > ')[0])
        name = MBW_PLACEMENT[stack][1].split()[0]
        args = words[words.index(name) + 1:next(
            i for i, w in enumerate(words) if w.endswith('/osu_mbw_mr'))]
        if stack == 'mvapich2':
            cmd = [tool, '-bootstrap', 'fork', '-verbose', *args, 'true']
        else:
            cmd = [tool, '--display-map', '--do-not-launch', *args, 'true']
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        text = out.stdout + out.stderr
        if stack == 'mvapich2':
            # Each proxy: its host and its first rank (--pmi-id-map 0,<first>).
            got = re.findall(r'--hostname (\S+) .*?--pmi-id-map 0,(\d+) .*?'
                             r'--exec-proc-count (\d+)', text)
            placed = {host: (int(first), int(count)) for host, first, count in got}
        else:
            placed, node = {}, ''
            for ln in text.splitlines():
                if (m := re.search(r'Data for node: (\S+)', ln)):
                    node = m.group(1)
                elif (m := re.search(r'Process rank: (\d+)', ln)):
                    first, count = placed.get(node, (int(m.group(1)), 0))
                    placed[node] = (first, count + 1)
        assert placed == {'nodeA': (0, k), 'nodeB': (k, k)}, (k, args, text[-3000:])


def test_the_ring_k_sweep_of_a_192_core_node_stays_within_the_kernels_k(tmp_path):
    """On 2 nodes of 192 cores RingCheck's k sweep launches ``--k`` only up to
    the kernel's RING_MAX_K (64; ``ring --k 96`` fails); the run at the
    largest k (192), the kernel's default, takes no ``--k``."""
    from conftest import run_reframe
    from harnesscore.plan import RING_MAX_K, divisors
    site = tmp_path / 'site_192.py'
    site.write_text(f'exec(open({str(TEMPLATE)!r}).read())\n'
                    "NODE.update({'num_cpus': 192, 'num_cpus_per_core': 1, "
                    "'num_sockets': 2, 'num_cpus_per_socket': 96})\n")
    var = tmp_path / 'var'
    proc = run_reframe(var, '--system', 'example-hpc:ib', '-n', 'RingCheck%layout=mpi_192x1',
                       '-p', 'mpich', '--dry-run',
                       env={'HARNESS_CLUSTERS': str(site), 'HARNESS_MODULES_SYSTEM': 'nomod',
                            'HARNESS_BUDGET': '24h/part', 'HARNESS_QUIET': '1'}, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    jobs = list((var / 'example-hpc' / 'stage' / 'example-hpc' / 'ib' / 'mpich').glob(
        'RingCheck*/rfm_job.sh'))
    assert jobs
    for job in jobs:
        text = job.read_text()
        ks = [int(k) for k in re.findall(r' --k (\d+)\b', text)]
        assert ks == [k for k in divisors(192) if k <= RING_MAX_K], (job, ks)
        # each sweep launch records its own exit status (the job's is the last's)
        statuses = [int(k) for k in re.findall(
            r' --k (\d+); echo "ring: k sweep launch exit status \1 \$\?"$', text, re.M)]
        assert statuses == ks, (job, text)


SWEEP_OUT = ('ring: k sweep launch exit status 1 0\n'
             'ring: k sweep launch exit status 2 {}\n')


def check_sweep_statuses(*args) -> None:
    """checks/kernels.py's ``check_sweep_statuses`` (a check file, not a module)."""
    from conftest import REPO
    from reframe.utility import import_module_from_file
    kernels = import_module_from_file(str(REPO / 'checks' / 'kernels.py'))
    kernels.check_sweep_statuses(*args)


@pytest.mark.parametrize('status, finalize_hung, verified, sees', [
    (0, False, True, None),
    (134, False, True, 'k=2 exited with status 134'),
    (3, False, False, 'k=2 exited with status 3'),
    (124, True, False, 'k=2 exited with status 124'),
    (124, True, True, None),
])
def test_a_failed_k_sweep_launch_fails_the_ring_sanity(status, finalize_hung, verified, sees):
    """A launch of the k sweep that exits nonzero after printing its RESULT
    lines fails RingCheck's sanity, unless only its MPI_Finalize hung after
    verified results (as the job's last launch)."""
    import reframe.utility.sanity as sn
    out = SWEEP_OUT.format(status)
    if sees is None:
        check_sweep_statuses([1, 2], out, finalize_hung, verified)
    else:
        with pytest.raises(sn.SanityError, match=sees):
            check_sweep_statuses([1, 2], out, finalize_hung, verified)


def test_a_k_sweep_launch_without_a_status_did_not_finish():
    import reframe.utility.sanity as sn
    with pytest.raises(sn.SanityError, match='k=2 did not finish'):
        check_sweep_statuses([1, 2], 'ring: k sweep launch exit status 1 0\n', False, True)


def _available_gib() -> float:
    with open('/proc/meminfo') as fp:
        kib = next((int(line.split()[1]) for line in fp if line.startswith('MemAvailable:')), 0)
    return kib / 2**20


@pytest.mark.integration
def test_a_masteronly_message_of_more_than_2_gib_is_sent_whole(builds):
    """A masteronly ring rank of 128 threads sends one message of 128 x 16 MiB
    = 2 GiB, more than an int count of bytes: on a 128-core node (one rank of
    128 threads per node) the MPI call was refused (a negative count).  The
    message goes as 128 units of 16 MiB, verified, its bytes all counted.
    128 threads on this machine's cores: a functional run, not a timing."""
    if _available_gib() < 12:
        pytest.skip('needs 12 GiB of free memory (two ranks with 2 x 2 GiB buffers each)')
    stack, ring, _ = builds
    launcher = shutil.which(STACKS[stack][1])
    proc = subprocess.run(
        [launcher, '-n', '2', str(ring), '--pattern', 'ring', '--mode', 'masteronly',
         '--sizes', '16M', '--rank-as-node', '--reps', '1', '--iters', '1', '--skip', '0'],
        env=mpi_env(OMP_NUM_THREADS='128'), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (res,) = kernel_results(proc.stdout)
    assert res['verified'] is True and res['size'] == 16 * 2**20, res
    assert res['threads'] == 128 and res['k'] == 128 and res['msg_bytes'] == 2**31, res
    assert res['bytes_sent_per_iter'] == 2 * 2**31, res
