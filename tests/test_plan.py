"""The plan of a session on big nodes (harnesscore.plan), without a big node:
declared 16-, 64- and 128-core topologies, checked for feasibility, memory
per process and the estimated time against the default budget."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_reframe
from harnesscore import host as H
from harnesscore import plan as P
from harnesslib import plan as plan_cli

NODES = {
    16: P.Topology(cores=16, sockets=2, numa=2, mem_bytes=64 * 2**30, name='n16'),
    64: P.Topology(cores=64, sockets=2, numa=4, mem_bytes=256 * 2**30, name='n64'),
    128: P.Topology(cores=128, sockets=2, numa=4, mem_bytes=512 * 2**30, name='n128'),
}


def test_md_rule_is_the_kernels():
    # src/md.c: sub-boxes narrower than cutoff+skin (2.8) fail the run.
    # L = 3: box 5.04; one rank fits, two ranks (2x1x1) give 2.52.
    assert P.md_infeasible(3, 1) == ''
    assert 'sub-boxes 2.52 wide' in P.md_infeasible(3, 2)
    # The failure: L = 6 on 16 ranks (4x2x2).
    assert P.dims_create(16) == (4, 2, 2)
    assert P.md_infeasible(6, 16).startswith('md L=6 on 16 ranks (4x2x2)')
    assert P.md_infeasible(6, 8) == ''
    # The cutoff must not exceed half the box: L = 2 never runs.
    assert 'half the box' in P.md_infeasible(2, 1)
    assert P.md_min_cells(128) == 14 and P.md_min_cells(16) == 7


def test_md_rule_names_the_grid_whose_split_it_used():
    # 360 ranks: MPICH's balanced grid is 9x8x5 (sub-boxes 2.99 wide at L=16),
    # Open MPI's greedy one 10x6x6 (2.69): the narrower one decides and is named.
    assert P.dims_create(360) == (9, 8, 5) and P._dims_greedy(360) == (10, 6, 6)
    why = P.md_infeasible(16, 360)
    assert why.startswith('md L=16 on 360 ranks (10x6x6): sub-boxes 2.69 wide'), why
    assert why.endswith('needs L >= 17')
    assert P.md_min_cells(360) == 17
    assert P.md_infeasible(17, 360) == ''


@pytest.mark.parametrize('n', [1, 2, 6, 12, 16, 24, 36, 48, 64, 96, 128, 210])
def test_dims_create_is_balanced(n):
    dims = P.dims_create(n)
    assert dims[0] * dims[1] * dims[2] == n
    assert list(dims) == sorted(dims, reverse=True)
    # Open MPI's greedy factorisation is never more balanced.
    assert P._dims_greedy(n)[0] >= dims[0]


def test_on_two_cores_md_3_runs_as_1x2_not_2x1():
    two = P.Topology(cores=2, mem_bytes=8 * 2**30)
    assert P.infeasible('md', ('masteronly', 1, 2), 3, two) == ''
    assert 'sub-boxes' in P.infeasible('md', ('mpi', 2, 1), 3, two)
    plan = P.make_plan(two, samples=3, sizes={'md': (3,)}, kernels=['md'])
    assert plan.decision('md', ('mpi', 2, 1), 3).startswith('left out by the plan: infeasible')
    # Without its pure-MPI side the hybrid run has no verdict: left out too.
    assert 'no pure-MPI run' in plan.decision('md', ('masteronly', 1, 2), 3)


def test_two_core_plan_keeps_everything():
    # The 2-core Quick start: every layout and size runs, as before.
    two = P.Topology(cores=2, mem_bytes=16 * 2**30, name='local:shm')
    plan = P.make_plan(two, samples=3)
    assert not plan.left_out, plan.format()
    kinds = {(r.kernel, r.name) for r in plan.runs}
    assert ('spmv', 'serial_1x1_decomp2') in kinds and ('md', 'masteronly_1x2') in kinds
    assert plan.seconds <= P.DEFAULT_BUDGET_S


def test_layout_roles_on_a_dual_socket_node():
    roles = P.layout_roles(NODES[128])
    assert roles[(128, 1)] == 'mpi'
    assert roles[(2, 64)] == 'per-socket'
    assert roles[(4, 32)] == 'per-NUMA'
    assert roles[(1, 128)] == 'per-node'
    order = P.hybrid_layouts(NODES[128])
    assert order[:3] == [(2, 64), (4, 32), (1, 128)]
    assert sorted(order) == sorted((128 // t, t) for t in P.divisors(128) if t > 1)
    # One socket, one NUMA domain: the three names fall on one layout.
    assert P.layout_roles(P.Topology(cores=2))[(1, 2)] == 'per-socket/per-NUMA/per-node'


@pytest.mark.parametrize('cores', [16, 64, 128])
def test_big_node_plan_fits_the_default_budget(cores):
    topo = NODES[cores]
    plan = P.make_plan(topo, samples=3)
    assert plan.seconds <= P.DEFAULT_BUDGET_S, plan.format()
    assert plan.runs
    for run in plan.runs:
        # Feasible, and within the node's memory per process and per node.
        assert P.infeasible(run.kernel, run.layout, run.size, topo) == ''
        ranks = run.layout[1]
        assert run.mem_per_process * ranks <= P.MEM_FRACTION * topo.mem_bytes
        if run.layout[0] == 'serial':
            assert run.mem_per_process <= P.SERIAL_MEM_CAP
    # Every run left out says why.
    assert all(r.reason for r in plan.left_out)
    # The pure-MPI side of every verdict runs at every size it can.
    for kernel, sizes in P.SIZES.items():
        for size in sizes:
            if not P.infeasible(kernel, ('mpi', cores, 1), size, topo):
                assert plan.decision(kernel, ('mpi', cores, 1), size) == ''


@pytest.mark.parametrize('cores', [64, 128])
def test_socket_and_numa_layouts_and_e_mt_survive_the_budget(cores):
    topo = NODES[cores]
    plan = P.make_plan(topo, samples=3)
    ran = {(r.kernel, r.layout, str(r.size)) for r in plan.runs}
    for layout in ((2, cores // 2), (4, cores // 4)):
        assert ('spmv', ('masteronly', *layout), '16') in ran
        assert ('md', ('masteronly', *layout), '24') in ran
        # e_mt: the serial run of the layout, at the sizes under the cap.
        assert ('spmv', ('serial', *layout), '16') in ran
    # The serial run of a whole node at n = 128 would hold 92 GB in one
    # process: left out, with its reason.
    why = plan.decision('spmv', ('serial', 1, cores), 128)
    assert why and ('cap of serial runs' in why or '32-bit' in why)
    # md L = 6 cannot run on the node's ranks: left out, saying why.
    assert 'sub-boxes' in plan.decision('md', ('mpi', cores, 1), 6)


def test_128_core_plan_drops_divisors_for_the_budget_and_says_so():
    plan = P.make_plan(NODES[128], samples=3)
    budget = [r for r in plan.left_out if r.reason.startswith('budget')]
    assert budget, 'a 128-core node cannot run every divisor in 15 minutes'
    # Dropped layouts are the unnamed divisors (or serial runs), never the
    # pure-MPI, per-socket, per-NUMA or per-node layouts.
    assert all(r.role in ('', 'e_mt reference') for r in budget)
    assert {r.layout[1:] for r in budget}.isdisjoint({(128, 1), (2, 64), (4, 32), (1, 128)})
    assert plan.seconds <= P.DEFAULT_BUDGET_S
    # A bigger budget runs more.
    big = P.make_plan(NODES[128], samples=3, budget_s=3600)
    assert len(big.runs) > len(plan.runs)


def test_tiny_budget_leaves_out_with_reasons():
    plan = P.make_plan(NODES[16], samples=3, budget_s=120)
    assert plan.seconds <= 120
    assert any(r.reason.startswith('budget') for r in plan.left_out)


def test_estimates_follow_the_cost_model():
    topo = NODES[128]
    # Bigger problems cost more; min-time bounds the small ones from below.
    small = P.estimate('spmv', ('mpi', 128, 1), 16, topo)
    big = P.estimate('spmv', ('mpi', 128, 1), 128, topo)
    assert big > small > P.MIN_TIME
    # A serial run is slower than its hybrid run (one core does T's work).
    assert (P.estimate('spmv', ('serial', 8, 16), 64, topo) >
            P.estimate('spmv', ('masteronly', 8, 16), 64, topo))


@pytest.mark.parametrize('text,seconds', [('15m', 900), ('900s', 900), ('1h', 3600),
                                          ('1h30m', 5400), ('20', 1200), ('2.5m', 150)])
def test_budget_parsing(text, seconds):
    assert P.parse_budget(text) == seconds


@pytest.mark.parametrize('text', ['', 'soon', '15 minutes', '-5', '0', '15x'])
def test_budget_refuses_nonsense(text):
    with pytest.raises(ValueError, match='HARNESS_BUDGET'):
        P.parse_budget(text)


def test_memory_parsing_and_topology_validation():
    assert P.parse_memory('512GiB') == 512 * 2**30
    assert P.parse_memory('64GB') == 64 * 10**9
    with pytest.raises(ValueError, match='not a memory size'):
        P.parse_memory('lots')
    assert P.parse_memory('1MiB') == P.MIN_MEMORY
    with pytest.raises(ValueError, match='cores must be a positive integer'):
        P.Topology(cores=0)


@pytest.mark.parametrize('text', ['0.5', '0', '1000', '0.5KiB', '1000KB'])
def test_a_memory_below_1mib_is_refused_not_planned_as_unknown(text, capsys):
    # --mem 0.5 (meant as GiB) was 0 bytes, which the plan takes for a memory it
    # does not know: every size planned, and nothing said
    with pytest.raises(ValueError, match=f'not a memory size of a node: {re.escape(repr(text))}'):
        P.parse_memory(text)
    assert plan_cli.main(['--cores', '4', '--mem', text]) == 2
    assert 'below 1MiB (a number without a unit is bytes' in capsys.readouterr().err


def test_layout_names_round_trip():
    for lay in [('mpi', 2, 1), ('masteronly', 1, 2), ('funneled', 4, 32),
                ('serial', 1, 128)]:
        assert P.parse_layout(P.layout_name(lay)) == lay
    with pytest.raises(ValueError, match='not a layout name'):
        P.parse_layout('2x1')


def test_command_line_prints_the_plan(capsys):
    rc = plan_cli.main(['--cores', '128', '--sockets', '2', '--numa', '4', '--mem', '512GiB',
                 '--samples', '3', '--budget', '15m'])
    out = capsys.readouterr().out
    assert rc == 0
    assert 'per-socket' in out and 'left out:' in out and 'within the budget' in out
    assert plan_cli.main(['--cores', '16', '--budget', 'soon']) == 2


def test_ctrl_c_during_the_plan_is_130_and_one_line(capsys, monkeypatch):
    # Ctrl-C while the plan was made (reading the configuration with ReFrame, the
    # plan itself): a 31-line KeyboardInterrupt traceback.
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(plan_cli, 'session_plan', interrupted)
    assert plan_cli.main(['--cores', '16', '--budget', '30m']) == 130
    assert capsys.readouterr().err == 'plan: interrupted (Ctrl-C)\n'


def test_declared_node_bigger_than_the_machine():
    # spmv refuses more threads per rank than online CPUs: on a declared
    # 16-core node run on 2 CPUs, the plan leaves T > 2 out, saying why.
    topo = P.Topology(cores=16, sockets=2, numa=4, oversubscribed=True, online_cpus=2)
    plan = P.session_plan(topo, samples=2, budget_s=P.DEFAULT_BUDGET_S)
    assert plan.min_time == 0
    assert plan.decision('spmv', ('masteronly', 8, 2), 8) == ''
    assert 'refuses 4 threads' in plan.decision('spmv', ('masteronly', 4, 4), 8)
    assert plan.decision('md', ('masteronly', 1, 16), 7) == ''
    assert {str(r.size) for r in plan.runs} == {'8', '7', '8,4096', '65536'}


def test_md_sizes_follow_the_node():
    # The smallest box that runs on the node's ranks joins the sizes where
    # the smallest of SIZES cannot: a big node keeps a communication-heavy size.
    assert P.node_sizes('md', P.Topology(cores=2)) == P.SIZES['md']
    assert P.node_sizes('md', NODES[16]) == (6, 7, 12, 24)
    assert P.node_sizes('md', NODES[128]) == (6, 12, 14, 24)
    plan = P.make_plan(NODES[128], samples=3)
    assert plan.decision('md', ('mpi', 128, 1), 14) == ''
    assert plan.decision('md', ('masteronly', 2, 64), 14) == ''
    # A size of another partition's node is left out here, saying so; a size
    # nobody planned (-P problem=...) is judged on feasibility alone.
    two = P.make_plan(P.Topology(cores=2, name='local:shm'), samples=3)
    assert "another node's" in two.decision('md', ('mpi', 2, 1), 14, other_sizes=(6, 14))
    assert two.decision('md', ('mpi', 2, 1), 14) == ''


def test_the_ring_across_nodes_measures_every_k_and_the_plan_counts_them():
    """Rabenseifner's saturation curve: across nodes one launch per k (every
    divisor of the layout's largest k, largest last); on one node only the
    largest.  The plan's estimate grows with the launches."""
    assert P.ring_ks(('mpi', 4, 1), 2) == [1, 2, 4]
    assert P.ring_ks(('masteronly', 1, 4), 2) == [1, 2, 4]
    assert P.ring_ks(('multiple', 2, 6), 3) == [1, 2, 3, 6]
    assert P.ring_ks(('mpi', 4, 1), 1) == [4]
    one = P.Topology(cores=4, nodes=1)
    two = P.Topology(cores=4, nodes=2)
    single = P.estimate('ring', ('mpi', 4, 1), '8', one)
    across = P.estimate('ring', ('mpi', 4, 1), '8', two)
    assert across > 2.5 * single


def test_ring_max_k_is_the_kernels():
    """plan.RING_MAX_K states src/ring.c's RING_MAX_K (the largest --k)."""
    import re
    found = re.search(r'^#define RING_MAX_K (\d+)', (REPO / 'src' / 'ring.c').read_text(), re.M)
    assert found and int(found.group(1)) == P.RING_MAX_K


@pytest.mark.parametrize('cores', [144, 192, 256])
def test_the_ring_k_sweep_stays_within_the_kernels_k(cores, monkeypatch):
    """A node of more than 2 x RING_MAX_K cores: the swept k (each its own
    ``--k`` launch, all but the largest) stop at the kernel's limit; the
    largest, the kernel's default k, stays last; the plan counts those."""
    for layout in (('mpi', cores, 1), ('masteronly', 1, cores), ('multiple', 1, cores)):
        ks = P.ring_ks(layout, 2)
        assert ks[-1] == cores
        assert ks[:-1] and max(ks[:-1]) <= P.RING_MAX_K, ks
        assert ks[:-1] == [k for k in P.divisors(cores) if k <= P.RING_MAX_K]
    two = P.Topology(cores=cores, nodes=2)
    launches = len(P.ring_ks(('mpi', cores, 1), 2))
    swept = P.estimate('ring', ('mpi', cores, 1), '8', two)
    monkeypatch.setattr(P, 'ring_ks', lambda layout, nodes: [layout[1]])
    assert swept == pytest.approx(launches * P.estimate('ring', ('mpi', cores, 1), '8', two))
    monkeypatch.undo()
    # A node within the limit sweeps every divisor, as before.
    assert P.ring_ks(('mpi', 128, 1), 2) == P.divisors(128)


@pytest.mark.parametrize('option', [['--cores', '0'], ['--cores', '-4'], ['--sockets', '0'],
                                    ['--numa', '0'], ['--nodes', '0'], ['--samples', '0'],
                                    ['--samples', '101'], ['--stacks', '0']])
def test_command_line_refuses_out_of_range_numbers(option, capsys):
    # --cores 0 used to plan this host and exit 0
    assert plan_cli.main(option) == 2
    assert f'plan: error: {option[0]} must be an integer from 1' in capsys.readouterr().err


@pytest.mark.parametrize('option', [['--nodes', '4'], ['--mem', '1TiB'], ['--sockets', '2'],
                                    ['--numa', '8'], ['--stacks', '3']])
def test_a_declared_nodes_option_without_cores_is_refused_not_ignored(option, capsys,
                                                                     monkeypatch):
    # python -m harnesslib.plan --system X --nodes 4 planned X's own partitions
    # on one node each, saying nothing of --nodes
    monkeypatch.setattr(plan_cli, '_partition_topologies', lambda *a: pytest.fail(
        f'{option[0]} planned the configured partitions'))
    assert plan_cli.main(['--system', 'declared', *option, '-q']) == 2
    assert (f'plan: error: {option[0]} describes a declared node: give --cores too'
            in capsys.readouterr().err)
    assert plan_cli.main(['--cores', '16', *option, '--part-budget']) == 0


def test_the_session_budget_is_split_across_partitions_and_stacks():
    assert P.part_budget('30m', 4) == 450
    assert P.part_budget('10m/part', 4) == 600
    assert P.parse_session_budget('1h/part') == (3600, True)
    with pytest.raises(ValueError, match='HARNESS_BUDGET'):
        P.part_budget('soon/part', 2)
    # the error names the value given, not the duration cut from before '/part'
    for text in ('10m/part/part', '0s/part'):
        with pytest.raises(ValueError, match=f"got '{text}'$"):
            P.part_budget(text, 2)


def test_part_budget_line(capsys):
    assert plan_cli.main(['--cores', '16', '--stacks', '3', '--budget', '30m',
                          '--part-budget']) == 0
    assert capsys.readouterr().out.split() == ['600', '1800', '3']
    assert plan_cli.main(['--cores', '16', '--stacks', '3', '--budget', '30m', '-q']) == 0
    out = capsys.readouterr().out
    assert 'session: 3 part(s) (partition x stack)' in out and 'budget 30.0 min' in out


def test_help_names_the_budget_the_plan_takes(capsys, monkeypatch):
    # --help said 15m while the command planned 30m
    monkeypatch.delenv('HARNESS_BUDGET', raising=False)
    with pytest.raises(SystemExit):
        plan_cli.main(['--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert f'HARNESS_BUDGET or {P.DEFAULT_SESSION_BUDGET}' in text
    assert plan_cli.main(['--cores', '16', '--part-budget']) == 0
    seconds = float(capsys.readouterr().out.split()[0])
    assert seconds == P.parse_session_budget(P.DEFAULT_SESSION_BUDGET)[0]


def test_problem_sizes_below_one_are_refused_not_run():
    # -P problem=0 on SpmvCheck divided by zero in setup; -1 reached the kernel.
    two = P.Topology(cores=2, mem_bytes=8 * 2**30)
    plan = P.make_plan(two, samples=1)
    for kernel, size in (('spmv', 0), ('spmv', -1), ('stream', 0), ('stream', -1), ('md', 0)):
        why = plan.decision(kernel, ('mpi', 2, 1), size)
        assert why == f'infeasible: {kernel} problem size {size} must be a positive integer', why


@pytest.mark.parametrize('kernel, layout, modes', [
    ('stream', 'serial_1x1_decomp2', 'mpi, masteronly'),
    ('md', 'funneled_1x2', 'mpi, masteronly'),
    ('ring', 'hybrid_1x2', 'mpi, masteronly'),
    ('spmv', 'nosuch_2x1', 'mpi, masteronly, funneled, serial'),
])
def test_a_mode_the_kernel_lacks_is_refused_before_it_runs(kernel, layout, modes):
    # -P layout=serial_1x1_decomp2 on StreamCheck ran and failed with "stream
    # exited with status 2".
    two = P.Topology(cores=2, mem_bytes=8 * 2**30)
    plan = P.make_plan(two, samples=1)
    mode = layout.split('_')[0]
    assert plan.decision(kernel, layout, P.SIZES[kernel][0]) == (
        f'infeasible: mode {mode} is not a mode of {kernel} (its modes: {modes})')
    assert plan.decision(kernel, 'mpi_2x1', P.SIZES[kernel][0]) == ''


def _partition(extras: dict) -> object:
    from types import SimpleNamespace
    proc = SimpleNamespace(num_cores=128, num_cpus=128, num_cpus_per_core=1, num_sockets=2,
                           num_numa_nodes=8)
    return SimpleNamespace(processor=proc, extras=extras, fullname='declared:big',
                           scheduler=SimpleNamespace(registered_name='local'))


def test_spmv_memory_rule_counts_the_stream_run_the_check_runs(monkeypatch):
    # A declared 128-core node of 24 GiB: the check's STREAM run is the tiny
    # one, so spmv n=8 as mpi_128x1 fits (it was left out for a 28 GiB STREAM).
    monkeypatch.setattr(P.os, 'sched_getaffinity', lambda _pid: {0, 1})
    topo = P.Topology.from_partition(_partition({'declared_topology': True,
                                                 'mem_per_node': '24GiB'}))
    plan = P.session_plan(topo, samples=1, budget_s=P.DEFAULT_BUDGET_S)
    assert plan.decision('spmv', ('mpi', 128, 1), 8) == '', plan.format()
    assert topo.oversubscribed and P.spmv_stream_elements(topo) == P.TINY_STREAM_ELEMENTS
    # -S SpmvCheck.stream_elements=8388608: the check's STREAM size, judged anew.
    why = plan.decision('spmv', ('mpi', 128, 1), 8, stream_elements=P.SPMV_STREAM_ELEMENTS)
    assert why.startswith('infeasible: spmv 8 as mpi_128x1: 28 GiB per node, over 80%'), why
    # The same node undeclared (a real node of 24 GiB): the full STREAM run.
    real = P.Topology.from_partition(_partition({'mem_per_node': '24GiB'}))
    assert P.spmv_stream_elements(real) == P.SPMV_STREAM_ELEMENTS
    assert P.spmv_stream_elements(real, 1000) == 1000
    assert 'over 80%' in P.infeasible('spmv', ('mpi', 128, 1), 8, real)


def _node(cores: int, extras: dict, *, local: bool = True, sockets: int = 2,
          numa: int | None = 4, environs: int = 1) -> object:
    """A partition of `cores` one-CPU cores, as ReFrame gives it to the plan."""
    from types import SimpleNamespace
    proc = SimpleNamespace(num_cores=cores, num_cpus=cores, num_cpus_per_core=1,
                           num_sockets=sockets, num_numa_nodes=numa)
    return SimpleNamespace(processor=proc, extras=extras, fullname=f'site:cores{cores}',
                           environs=[f'env{i}' for i in range(environs)],
                           scheduler=SimpleNamespace(registered_name='local' if local
                                                     else 'slurm'))


def _cpus(monkeypatch, cpus: int) -> None:
    monkeypatch.setattr(P.os, 'sched_getaffinity', lambda _pid: set(range(cpus)))
    monkeypatch.setattr(P.os, 'cpu_count', lambda: cpus)
    # A /sys that says nothing of them: each CPU a core of its own (this
    # machine's hardware threads would change the count).
    monkeypatch.setattr(H, 'SYS_ROOT', '/nonexistent-sys-root', raising=False)


@pytest.mark.parametrize('cpus', [2, 16, 64])
def test_a_declared_partition_is_planned_at_the_sizes_the_checks_run(monkeypatch, tmp_path,
                                                                     cpus):
    # On a host of >= 16 CPUs declared:cores16 was planned at full sizes (not
    # oversubscribed) while the checks took the tiny ones: every run skipped
    # as "another node's" size.  One rule now: a declared partition, tiny sizes.
    from harnesslib import placement
    _cpus(monkeypatch, cpus)
    monkeypatch.setenv('HARNESS_PLAN_COSTS', str(tmp_path / 'none.json'))
    part = _node(16, {'declared_topology': True, 'mem_per_node': '64GiB'})
    monkeypatch.setattr(placement, '_partitions', lambda: [part])
    topo = P.Topology.from_partition(part)
    assert topo.oversubscribed == (cpus < 16)
    plan = P.session_plan(topo, samples=1, budget_s=P.DEFAULT_BUDGET_S)
    assert plan.sizes == {k: tuple(P.TINY_SIZES[k]) for k in P.KERNELS}
    assert plan.min_time == (0.0 if cpus < 16 else P.MIN_TIME)
    for kernel in P.KERNELS:
        sizes = placement.system_sizes(kernel)
        assert sizes == list(P.TINY_SIZES[kernel])
        for size in sizes:
            assert plan.decision(kernel, ('mpi', 16, 1), size, other_sizes=sizes) == '', \
                plan.format()
    # An undeclared partition keeps the node's sizes, and the checks SIZES.
    real = _node(16, {'mem_per_node': '64GiB'})
    monkeypatch.setattr(placement, '_partitions', lambda: [real])
    assert placement.system_sizes('md') == [6, 7, 12, 24]
    assert P.uses_tiny_sizes(topo) and not P.uses_tiny_sizes(P.Topology.from_partition(real))


def test_a_batch_of_the_sequential_rounds_runs_what_only_the_budget_left_out(monkeypatch,
                                                                            tmp_path):
    # site_six.py: with HARNESS_REPEAT=3 md masteronly_2x3 L=12 runs; a batch of
    # the sequential rounds (REPEAT=2, FIRST_ROUND=3, the same budget per part)
    # let another group in first, and the very run it was started for was
    # skipped "left out by the plan: budget".
    from harnesslib import placement
    monkeypatch.setenv('HARNESS_PLAN_COSTS', str(tmp_path / 'none.json'))
    monkeypatch.setenv('HARNESS_BUDGET', '225s/part')
    part = _node(6, {'mem_per_node': '16GiB'}, local=False, sockets=2, numa=2)
    monkeypatch.setattr(placement, '_partitions', lambda: [part])
    lay = ('masteronly', 2, 3)
    # The checks' plan: a batch where HARNESS_FIRST_ROUND > 0.
    monkeypatch.setenv('HARNESS_REPEAT', '3')
    monkeypatch.setenv('HARNESS_FIRST_ROUND', '0')
    assert placement.partition_plan(part).decision('md', lay, 12) == ''
    monkeypatch.setenv('HARNESS_REPEAT', '2')
    assert placement.partition_plan(part).decision('md', lay, 12).startswith(
        'left out by the plan: budget')
    monkeypatch.setenv('HARNESS_FIRST_ROUND', '3')
    assert placement.partition_plan(part).decision('md', lay, 12) == ''
    # Infeasible runs stay out of a batch, and so does a size of another node.
    batch = P.session_plan(P.Topology.from_partition(part), 2, 225.0, batch=True)
    assert batch.decision('md', lay, 12) == ''
    assert batch.decision('spmv', ('serial', 2, 3), 128).startswith(
        'left out by the plan: infeasible: serial run')
    assert "another node's" in batch.decision('md', lay, 7, other_sizes=(7,))


def test_the_plan_counts_a_ring_verdict_per_message_size():
    # The checks make one ring verdict per message size (kernels._pairs): on
    # two cores 8 spmv + 3 md + 3 ring + 1 stream = 15; the plan counted 13.
    from harnesscore.units import message_sizes
    plan = P.make_plan(P.Topology(cores=2, mem_bytes=16 * 2**30), samples=3)
    assert plan.verdicts == 15
    assert plan.seconds == P.T_BUILD + plan.run_seconds + 15 * P.T_VERDICT
    assert P.pair_verdicts('ring', '8,65536,1048576') == len(message_sizes('8,65536,1048576'))
    assert P.pair_verdicts('ring', '8,4096') == 2 and P.pair_verdicts('md', 12) == 1


def test_a_ring_size_range_includes_its_maximum():
    from harnesscore.units import message_sizes
    assert message_sizes('8:64') == [8, 16, 32, 64]
    assert message_sizes('1K:1K') == [1024]
    # a range of other sizes never reached its maximum (8:100 measured up to 64, and
    # the ring check named the run's size 100), as the kernel now refuses it
    for text in ('8:100', '3:64', '3:3'):
        with pytest.raises(ValueError, match=f"range '{text}' is not of powers of two"):
            message_sizes(text)
    assert message_sizes('8,100') == [8, 100]


def test_a_pairs_message_size_is_a_ring_size_or_its_label():
    # One grammar with the ring's --sizes (units.ring_size): parse_bytes had its
    # own, which took '+8', '8_0' and sizes the ring refuses.
    from harnesscore.units import parse_bytes
    assert [parse_bytes(t) for t in ('8', ' 64K', '1m', '8B', '64KiB', '1 MiB', '16M')] == [
        8, 65536, 2**20, 8, 65536, 2**20, 16 * 2**20]
    for text in ('+8', '8_0', '0', '17M', '8 K', '1G', ''):
        with pytest.raises(ValueError):
            parse_bytes(text)


@pytest.mark.parametrize('n, label', [
    (8, '8B'), (1024, '1KiB'), (1536, '1536B'), (65536, '64KiB'),
    (2**20, '1MiB'), (3 * 2**19, '1536KiB'), (2**20 + 1, '1048577B'),
])
def test_bytes_label_names_whole_kib_and_mib_only(n, label):
    from harnesscore.units import bytes_label
    assert bytes_label(n) == label


def test_an_unknown_numa_count_is_one_domain_per_socket():
    # ReFrame gave no NUMA count: a 2-socket node was planned with 1 NUMA
    # domain ("2 socket(s), 1 NUMA domain(s)").
    topo = P.Topology.from_partition(_node(16, {'mem_per_node': '64GiB'}, local=False,
                                           sockets=2, numa=None))
    assert (topo.sockets, topo.numa) == (2, 2)
    assert '2 socket(s), 2 NUMA domain(s)' in topo.describe()
    known = P.Topology.from_partition(_node(16, {'mem_per_node': '64GiB'}, local=False,
                                            sockets=2, numa=4))
    assert known.numa == 4
    # Sockets that do not divide the cores count as one, and so does NUMA.
    odd = P.Topology.from_partition(_node(6, {'mem_per_node': '64GiB'}, local=False,
                                          sockets=4, numa=None))
    assert (odd.sockets, odd.numa) == (1, 1)


def test_the_budget_split_counts_only_the_stacks_p_selects(tmp_path):
    # HARNESS_REFRAME_OPTS='-p openmpi' ran 2 of 4 parts, each with a quarter.
    cmd = [sys.executable, '-m', 'harnesslib.plan', '--system', 'declared', '--part-budget',
           '--budget', '30m']
    env = {**os.environ, 'HARNESS_BUDGET': ''}
    every = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    picked = subprocess.run([*cmd, '-p', '^nosuchstack$'], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert every.returncode == 0 and picked.returncode == 0, picked.stderr
    # Each of the two declared partitions keeps one part.
    assert picked.stdout.split() == ['900', '1800', '2']
    assert int(every.stdout.split()[2]) >= 2
    bad = subprocess.run([*cmd, '--prgenv', '('], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--prgenv '(' is not a regular expression" in bad.stderr
    # reframe's own words after --, as ./harness passes them, glued -p too
    words = subprocess.run([*cmd[:3], *cmd[5:], '--', '--system=declared', '-p^nosuchstack$'],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert words.stdout.split() == ['900', '1800', '2'], words.stderr


_TWO_PARTITIONS = """
proc = {'arch': 'x', 'num_cpus': 16, 'num_cpus_per_core': 1, 'num_sockets': 2}
site_configuration = {
    'systems': [{'name': 'mini', 'descr': 'x', 'hostnames': ['.*'], 'partitions': [
        {'name': 'a', 'scheduler': 'slurm', 'launcher': 'srun', 'processor': proc,
         'environs': ['openmpi', 'mpich'], 'extras': {'mem_per_node': '64GiB'}},
        {'name': 'b', 'scheduler': 'slurm', 'launcher': 'srun', 'processor': proc,
         'environs': ['openmpi'], 'extras': {'mem_per_node': '64GiB'}}]}],
    'environments': [{'name': 'openmpi'}, {'name': 'mpich'}],
}
"""


def test_a_partition_without_a_selected_stack_takes_no_part_of_the_budget(tmp_path,
                                                                          monkeypatch):
    # -p mpich on a system whose partition b has no mpich: b runs nothing, but
    # it kept a part, and a's mpich ran on half the session's budget (the plan
    # printed b's runs and counted them in the session's estimate).
    config = tmp_path / 'two.py'
    config.write_text(_TWO_PARTITIONS)
    cmd = [sys.executable, '-m', 'harnesslib.plan', '-C', str(config), '--system', 'mini',
           '--budget', '30m']
    env = {**os.environ, 'HARNESS_BUDGET': '', 'HARNESS_VAR_DIR': str(tmp_path / 'var')}
    split = subprocess.run([*cmd, '--part-budget', '-p', '^mpich$'], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
    assert split.stdout.split() == ['1800', '1800', '1'], split.stderr
    assert 'mini:b: no stack selected' in split.stderr
    every = subprocess.run([*cmd, '--part-budget'], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=120)
    assert every.stdout.split() == ['600', '1800', '3'], every.stderr
    # The checks split a plain HARNESS_BUDGET the same way.
    from harnesslib import placement
    monkeypatch.setenv('HARNESS_PLAN_COSTS', str(tmp_path / 'none.json'))
    monkeypatch.setenv('HARNESS_BUDGET', '30m')
    a = _node(16, {'mem_per_node': '64GiB'}, local=False, environs=1)
    b = _node(32, {'mem_per_node': '64GiB'}, local=False, environs=0)
    monkeypatch.setattr(placement, '_partitions', lambda: [a, b])
    assert placement.partition_plan(a).budget_s == 1800
    # where no partition has a selected stack, each counts once
    monkeypatch.setattr(placement, '_partitions', lambda: [b, b])
    assert placement.partition_plan(b).budget_s == 900


def test_a_system_whose_modules_system_is_missing_is_a_one_line_error(tmp_path):
    # A system on Lmod, planned where Lmod is not set up (no LMOD_CMD): ReFrame's
    # ConfigError reached the user as a 30-line traceback.
    config = tmp_path / 'lmod.py'
    config.write_text(_TWO_PARTITIONS.replace("'hostnames': ['.*'],",
                                              "'hostnames': ['.*'], 'modules_system': 'lmod',"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(('LMOD', 'HARNESS_'))}
    proc = subprocess.run([sys.executable, '-m', 'harnesslib.plan', '-C', str(config),
                           '--system', 'mini', '--part-budget'], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**env, 'HARNESS_VAR_DIR': str(tmp_path)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f'plan: error: configuration {config}: could not find a sane Lmod installation: '
        'environment variable LMOD_CMD is not defined'], proc.stderr


def test_harness_passes_the_stacks_p_selects_to_the_budget_split(tmp_path):
    # ./harness passes HARNESS_REFRAME_OPTS' words, then its arguments, to the
    # plan after --, quoted: the plan parses them (harnesscore.selection).  Its
    # arguments were not passed: ./harness nightly -p openmpi split the budget
    # across every stack.
    text = (REPO / 'harness').read_text()
    func = text[text.index('\nprint_plan() {\n'):]
    func = func[:func.index('\n}\n') + 3]
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    log = tmp_path / 'args'
    (venv / 'bin' / 'python').write_text(
        '#!/bin/bash\nfor a in "$@"; do printf "[%s]" "$a"; done >> "$ARGS_LOG"\n'
        'echo >> "$ARGS_LOG"\necho "900 1800 2"\n')
    (venv / 'bin' / 'python').chmod(0o755)
    script = (func + 'say() { :; }\nwarn() { :; }\ndie() { echo "$*" >&2; exit 3; }\n'
              # the words session splits HARNESS_REFRAME_OPTS into, as it does
              'read -ra REFRAME_OPTS <<<"$HARNESS_REFRAME_OPTS"\n'
              'print_plan -p "my stack" -x Md\necho "$HARNESS_BUDGET"\n')
    opts = '--system declared -p openmpi --prgenv=mpi.h -pgnu -n Spmv'
    proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=60,
                          env={'PATH': os.environ['PATH'], 'VENV': str(venv), 'ROOT': str(REPO),
                               'ARGS_LOG': str(log), 'HARNESS_REFRAME_OPTS': opts})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == '900s/part'
    words = ('[--][--system][declared][-p][openmpi][--prgenv=mpi.h][-pgnu][-n][Spmv]'
             '[-p][my stack][-x][Md]')
    split, shown = log.read_text().splitlines()[:2]
    assert split.endswith('[-q][--part-budget]' + words), split
    assert shown.endswith('[-q]' + words), shown


@pytest.mark.parametrize('words', [['-popenmpi', '--system=declared'],
                                   ['-p', 'openmpi', '--system', 'declared'],
                                   ['--prgenv=openmpi', '-p=mpich', '--system', 'x',
                                    '--system=declared']])
def test_the_plan_reads_reframes_selection_after_the_double_dash(monkeypatch, capsys, words):
    # The plan reads -p/--prgenv and --system from reframe's words, in every
    # spelling reframe accepts (harnesscore.selection, as the sequential
    # rounds read them); the other words are not the plan's.
    seen = []

    def topologies(config, system, prgenvs=None):
        seen.append((system, prgenvs))
        return [P.Topology(cores=2, mem_bytes=2**30, stacks=1)]

    monkeypatch.setattr(plan_cli, '_partition_topologies', topologies)
    argv = ['--part-budget', '--budget', '30m', '--', '-C', 'other.py', *words, '-nSpmv']
    assert plan_cli.main(argv) == 0
    stacks = ['openmpi'] + (['mpich'] if '-p=mpich' in words else [])
    assert seen == [('declared', stacks)]
    assert capsys.readouterr().out.split() == ['1800', '1800', '1']
    # --system before -- is the plan's own; a bad pattern is named, exit 2
    assert plan_cli.main(['--system', 'mine', '--part-budget', '--', *words]) == 0
    assert seen[-1][0] == 'mine'
    assert plan_cli.main(['--part-budget', '--', '-p(']) == 2
    assert "--prgenv '(' is not a regular expression" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        plan_cli.main(['--part-budget', 'declared'])
    assert "reframe's options go after --" in capsys.readouterr().err


@pytest.mark.parametrize('line', ['LMP_1 Loop time of 0 on 1 procs for 100 steps with 500 atoms',
                                  'MD_2x1 {"verified":true,"fom":0}'])
def test_rounds_refuse_a_zero_time_or_rate_naming_the_line(tmp_path, capsys, line):
    # harnesscore.rounds (its own tests are in test_noise.py): a zero time or
    # rate raised ZeroDivisionError, exit 1, which the job's loop reads as
    # "every band decided".
    from harnesscore import rounds
    out = tmp_path / 'md.out'
    out.write_text(line + '\n')
    with pytest.raises(rounds.RoundsError, match='no positive rate'):
        rounds.md_rates_by_tag(out.read_text())
    assert rounds.main(['md', str(out)]) == 2
    assert repr(line) in capsys.readouterr().err


# -- the order of a verdict's runs, selected by name (a dry run) --------------

def dry_run_order(var_dir, *names: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """A dry run of 3 samples on local:shm selecting `names` (-n each): the
    session and the spmv n=64 runs in the order it takes them
    ('masteronly_1x2/0': layout and sample)."""
    words = [w for name in names for w in ('-n', name)]
    proc = run_reframe(var_dir, *words, '--dry-run', '--system', 'local:shm',
                       env={'HARNESS_STACKS': 'mpich', 'HARNESS_REPEAT': '3'}, timeout=300)
    order = [f'{m[1]}/{m[2]}' for m in re.finditer(
        r'^\[\s*DRY\s*\] SpmvCheck %layout=(\S+) %problem=64 %sample=(\d+) ',
        proc.stdout, re.M)]
    return proc, order


def verdict_dry_run(var_dir, *names: str) -> tuple[str, list[str]]:
    """dry_run_order of a selection with verdicts in it, which exits 0 and judges
    nothing (no sanity error): its stdout and stderr, and the order of its runs."""
    proc, order = dry_run_order(var_dir, *names)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and 'sanity error' not in out, out[-4000:]
    return out, order


#: the runs of HybridVerdict%pair=spmv/64/masteronly_1x2 in round order (3 samples)
MASTERONLY_ROUNDS = ['masteronly_1x2/0', 'mpi_2x1/0', 'mpi_2x1/1', 'masteronly_1x2/1',
                     'masteronly_1x2/2', 'mpi_2x1/2']


@pytest.mark.integration
def test_a_verdict_selected_alone_runs_its_pair_in_round_order(tmp_path):
    # Its runs came in zip order, pure MPI first in every round (mpi_2x1/0,
    # masteronly_1x2/0, mpi_2x1/1, ...), not alternating as when they are
    # selected themselves; and the dry run failed (exit 1): "sanity error:
    # SpmvCheck ... logged no t_total".
    out, order = verdict_dry_run(tmp_path / 'alone', 'HybridVerdict%pair=spmv/64/masteronly_1x2')
    assert order == MASTERONLY_ROUNDS, out[-4000:]
    runs, selected = dry_run_order(tmp_path / 'runs', 'HybridVerdict%pair=spmv/64/masteronly_1x2',
                                   'SpmvCheck%layout=(mpi_2x1|masteronly_1x2)%problem=64%')
    assert runs.returncode == 0 and selected == order, runs.stdout[-4000:]


@pytest.mark.integration
def test_a_dry_run_of_verdicts_exits_0_and_the_runs_selected_too_pair_every_layout(tmp_path):
    # Every dry run with a verdict in it failed: the verdict judged in a dry run.
    out, order = verdict_dry_run(tmp_path / 'verdicts', 'HybridVerdict%pair=spmv/64/.*')
    assert re.search(r'PASSED.*Ran 12/12 test case', out), out[-4000:]
    # The first verdict takes the shared pure-MPI runs; the other layout's
    # runs follow them (docs/pages/statistics.md says so) ...
    assert order == [*MASTERONLY_ROUNDS,
                     'funneled_1x2/0', 'funneled_1x2/1', 'funneled_1x2/2'], out[-4000:]
    # ... and with the runs selected (as the docs say) every pair is side by side,
    # in plan.md's order.
    both, order = dry_run_order(tmp_path / 'both', 'SpmvCheck.*%problem=64%',
                                'HybridVerdict%pair=spmv/64/.*')
    assert both.returncode == 0, both.stdout[-4000:]
    assert order[:8] == ['masteronly_1x2/0', 'mpi_2x1/0', 'funneled_1x2/0',
                         'serial_1x1_decomp2/0', 'funneled_1x2/1', 'mpi_2x1/1',
                         'masteronly_1x2/1', 'serial_1x1_decomp2/1'], order


@pytest.mark.integration
def test_every_documented_name_pattern_selects_a_check(tmp_path):
    # statistics.md's -n 'SpmvCheck%problem=64' matched nothing: -n matches the
    # name without spaces, and %layout comes first in it.
    docs = [*(REPO / 'docs' / 'pages').glob('*.md'), REPO / 'README.md']
    patterns = {pat for page in docs
                for pat in re.findall(r"(?:-n|--name) '([^']+)'", page.read_text())}
    assert 'HybridVerdict%pair=md/24/masteronly_1x2' in patterns
    proc = run_reframe(tmp_path, '--list', '--system', 'local:shm',
                       env={'HARNESS_STACKS': 'mpich'}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    names = {m[1].replace(' ', '') for m in
             re.finditer(r'^\s*(?:- |\^)(\S.*?) /[0-9a-f]{8}\b', proc.stdout, re.M)}
    assert len(names) > 50, proc.stdout[-4000:]
    unmatched = sorted(pat for pat in patterns
                       if '...' not in pat and not any(re.search(pat, n) for n in names))
    assert not unmatched, f'documented -n patterns that select nothing: {unmatched}'


# ---- this machine's cores (/sys faked in a folder: H.SYS_ROOT) ----------------------

def fake_host(root: Path, cpus: dict[int, tuple[int, int, int]],
              dies: dict[int, int] | None = None) -> str:
    """A folder faking a host's /sys: each CPU's (package, core_id, NUMA node)
    and, where `dies` gives it, its die_id; all of them online."""
    nodes: dict[int, list[int]] = {}
    for cpu, (package, core, node) in cpus.items():
        topo = root / f'sys/devices/system/cpu/cpu{cpu}/topology'
        topo.mkdir(parents=True)
        (topo / 'physical_package_id').write_text(f'{package}\n')
        (topo / 'core_id').write_text(f'{core}\n')
        if dies is not None:
            (topo / 'die_id').write_text(f'{dies[cpu]}\n')
        nodes.setdefault(node, []).append(cpu)
    for node, members in nodes.items():
        folder = root / f'sys/devices/system/node/node{node}'
        folder.mkdir(parents=True)
        (folder / 'cpulist').write_text(','.join(map(str, members)) + '\n')
    (root / 'sys/devices/system/cpu/online').write_text(
        ','.join(map(str, sorted(cpus))) + '\n')
    return str(root)


#: 1 core of 2 hardware threads (the auditor's fake node).
ONE_CORE_TWO_THREADS = {0: (0, 0, 0), 1: (0, 0, 0)}
#: 8 cores of 2 hardware threads, Linux's numbering: CPU i and i + 8 share a core.
EIGHT_CORES_SIXTEEN_THREADS = {cpu: (0, cpu % 8, 0) for cpu in range(16)}
#: 2 sockets x 2 cores x 2 threads, 2 NUMA nodes per socket (one core each).
TWO_SOCKETS = {cpu: (cpu % 4 // 2, cpu % 2, cpu % 4) for cpu in range(8)}


def _on_host(monkeypatch, tmp_path, cpus: dict[int, tuple[int, int, int]]) -> None:
    monkeypatch.setattr(H, 'SYS_ROOT', fake_host(tmp_path / 'host', cpus), raising=False)
    monkeypatch.setattr(P.os, 'sched_getaffinity', lambda _pid: set(cpus))
    monkeypatch.setattr(P.os, 'cpu_count', lambda: len(cpus))


def _local_partition(processor: dict | None = None, extras: dict | None = None) -> object:
    from types import SimpleNamespace

    from reframe.core.systems import ProcessorInfo
    return SimpleNamespace(processor=ProcessorInfo(processor or {}), extras=extras or {},
                           fullname='local:shm', environs=['env'],
                           scheduler=SimpleNamespace(registered_name='local'))


def test_hardware_threads_of_one_core_are_one_core(monkeypatch, tmp_path):
    # A local partition without processor info counted the logical CPUs: on
    # 1 core of 2 threads mpi_2x1 ran, both ranks bound to the one core.
    _on_host(monkeypatch, tmp_path, ONE_CORE_TWO_THREADS)
    assert P.cores_per_node(_local_partition()) == 1
    # declared:cores16 on 8 cores of 16 threads: oversubscribed (it ran bound).
    _on_host(monkeypatch, tmp_path / 'big', EIGHT_CORES_SIXTEEN_THREADS)
    declared = P.Topology.from_partition(_local_partition(
        {'num_cpus': 16, 'num_cpus_per_core': 1}, {'declared_topology': True}))
    assert declared.cores == 16 and declared.oversubscribed
    assert H.host_cores() == 8


def test_host_processor_reads_cores_sockets_and_numa_from_sys(tmp_path):
    root = fake_host(tmp_path, TWO_SOCKETS)
    proc = H.host_processor(range(8), root)
    assert proc == {
        'num_cpus': 8, 'num_cpus_per_core': 2, 'num_sockets': 2, 'num_cpus_per_socket': 4,
        'topology': {'numa_nodes': ['0x11', '0x22', '0x44', '0x88'],
                     'sockets': ['0x33', '0xcc'],
                     'cores': ['0x11', '0x22', '0x44', '0x88']}}
    # The plan's node: 4 cores, 2 sockets, 4 NUMA domains (a local partition
    # had 1 socket and 1 NUMA domain whatever the machine).
    topo = P.Topology.from_partition(_local_partition(proc))
    assert (topo.cores, topo.sockets, topo.numa) == (4, 2, 4)
    # Only the CPUs asked for: one thread of each core; unequal threads per
    # core are described by their cores.
    assert H.host_processor([0, 1, 2, 3], root)['num_cpus_per_core'] == 1
    assert H.host_cores([0, 1, 2, 3, 4], root) == 4
    # Nothing in /sys: each CPU a core of its own, NUMA unknown.
    bare = H.host_processor([0, 1], str(tmp_path / 'none'))
    assert (bare['num_cpus'], bare['num_cpus_per_core'], bare['num_sockets']) == (2, 1, 1)
    assert 'numa_nodes' not in bare['topology']


def test_cores_of_two_dies_of_one_package_are_not_merged(tmp_path):
    # Linux before 6.9 numbers core_id within a die: one package of 2 dies of 4
    # cores each, no SMT, is 8 cores (as the kernels count them, by package, die
    # and core), not 4 cores of 2 threads.
    cpus = {cpu: (0, cpu % 4, 0) for cpu in range(8)}
    root = fake_host(tmp_path, cpus, dies={cpu: cpu // 4 for cpu in range(8)})
    proc = H.host_processor(range(8), root)
    assert (proc['num_cpus'], proc['num_cpus_per_core'], proc['num_sockets']) == (8, 1, 1)
    assert H.host_cores(range(8), root) == 8


def test_an_allocation_of_unequal_shares_is_not_described_by_its_shares(tmp_path):
    # SMT-4 cores of 4 and 2 CPUs among the allocation: 2 cores, never "3
    # threads per core" (a Slurm partition built from it asked 3 x T CPUs a rank)
    smt4 = fake_host(tmp_path / 'smt4', {cpu: (0, cpu // 4, 0) for cpu in range(8)})
    proc = H.host_processor(range(6), smt4)
    assert (proc['num_cpus'], proc['num_cpus_per_core']) == (2, 1)
    assert H.host_cores(range(6), smt4) == 2
    # 2 sockets of 8 cores, a NUMA domain each; CPUs 2-9 take 6 cores of one and
    # 2 of the other: no socket or NUMA role (a "per-socket" 2 x 4 had its second
    # rank on cores of both sockets, and was judged as Chorley's Hybrid 2)
    two = fake_host(tmp_path / 'two', {cpu: (cpu // 8, cpu % 8, cpu // 8) for cpu in range(16)})
    proc = H.host_processor(range(2, 10), two)
    assert (proc['num_cpus'], proc['num_sockets'], proc['num_cpus_per_socket']) == (8, 1, 8)
    assert proc['topology']['sockets'] == ['0x3fc'] and 'numa_nodes' not in proc['topology']
    topo = P.Topology.from_partition(_local_partition(proc))
    assert (topo.cores, topo.sockets, topo.numa) == (8, 1, 1)
    assert P.layout_roles(topo) == {(8, 1): 'mpi', (1, 8): 'per-socket/per-NUMA/per-node'}
    # equal shares of both (CPUs 4-11: 4 cores of each) keep them
    proc = H.host_processor(range(4, 12), two)
    assert (proc['num_sockets'], len(proc['topology']['numa_nodes'])) == (2, 2)
    assert P.layout_roles(P.Topology.from_partition(_local_partition(proc)))[(2, 4)] == \
        'per-socket/per-NUMA'


def _cgroup(root: Path, version: int, path: str, cpus: dict[str, str]) -> None:
    """A process in cgroup `path` of a v1 cpuset or a v2 hierarchy, with the
    cpuset files `cpus` (folder relative to the mount: CPU list)."""
    mount = '/sys/fs/cgroup/cpuset' if version == 1 else '/sys/fs/cgroup'
    (root / 'proc/self').mkdir(parents=True, exist_ok=True)
    (root / 'proc/self/cgroup').write_text(
        f'4:cpuset:{path}\n1:name=systemd:/\n' if version == 1 else f'0::{path}\n')
    kind = 'cgroup cgroup rw,cpuset' if version == 1 else 'cgroup2 cgroup2 rw'
    (root / 'proc/self/mountinfo').write_text(
        f'20 1 0:20 / / rw - ext4 /dev/root rw\n'
        f'31 20 0:28 / {mount} rw,relatime - {kind}\n')
    name = 'cpuset.effective_cpus' if version == 1 else 'cpuset.cpus.effective'
    for folder, text in cpus.items():
        where = root / mount.lstrip('/') / folder.lstrip('/')
        where.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text + '\n')


def test_an_affinity_narrower_than_the_launchers_cpus_is_named(tmp_path):
    # taskset -c 1: the plan and the quiet snapshot counted CPU 1 while hwloc
    # (both launchers) bound the rank to CPU 0: every CPU in the cgroup.
    root = tmp_path / 'v1'
    fake_host(root, {cpu: (0, cpu, 0) for cpu in range(4)})
    _cgroup(root, 1, '/', {'/': '0-3'})
    why = H.narrowed_affinity({1}, str(root))
    assert why.startswith('this process may only run on CPUs 1 (its affinity mask'), why
    assert 'bind ranks to any of CPUs 0-3' in why and 'run without taskset' in why
    assert '\n' not in why
    assert H.narrowed_affinity({0, 1, 2, 3}, str(root)) == ''
    # A Slurm job's cgroup (v2; its cpuset on the job's folder, the step's
    # inherits it): the launchers bind within it, as the mask says.
    root = tmp_path / 'v2'
    fake_host(root, {cpu: (0, cpu, 0) for cpu in range(4)})
    _cgroup(root, 2, '/slurm/job_7/step_0', {'/': '0-3', '/slurm/job_7': '2-3'})
    assert H.launcher_cpus(str(root)) == {2, 3}
    assert H.narrowed_affinity({2, 3}, str(root)) == ''
    assert 'CPUs 3 (its' in H.narrowed_affinity({3}, str(root))
    # No cgroup to read: the online CPUs.
    root = tmp_path / 'bare'
    fake_host(root, {cpu: (0, cpu, 0) for cpu in range(2)})
    assert H.launcher_cpus(str(root)) == {0, 1}
    assert H.cpu_list('0-2,5,7-8') == {0, 1, 2, 5, 7, 8}
    assert H.cpu_list_text({8, 0, 1, 2, 5, 7}) == '0-2,5,7-8'


def test_divisors_and_a_partition_of_many_nodes_are_planned_at_once():
    """divisors counted to n (and md's grid worked out again for every L tried): a
    declared partition of 4096 nodes of 4096 cores, within the bounds the plan takes,
    ran for minutes. The same divisors, and an answer (the guard is a hang's)."""
    assert all(P.divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
               for n in range(1, 3000))
    assert P.divisors(4096 * 4096) == [2 ** i for i in range(25)]
    proc = subprocess.run([sys.executable, '-m', 'harnesslib.plan', '--cores', '4096',
                           '--nodes', '4096', '-q'], capture_output=True, text=True,
                          timeout=60, env={**os.environ, 'HARNESS_BUDGET': '30m'})
    assert proc.returncode == 1 and 'NOTHING runs within the budget' in proc.stderr, (
        proc.stdout + proc.stderr)
