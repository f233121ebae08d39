"""Layouts come from the partition's cores, never written in as 2."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from harnesslib import launch, placement


def load_checks():
    """The library's placement and launch modules under one name."""
    return SimpleNamespace(**{**vars(placement), **vars(launch)})


def test_every_divisor_layout_fills_the_node():
    checks = load_checks()
    lay = checks._divisor_layouts(128)
    assert (128, 1) in lay and (1, 128) in lay and (16, 8) in lay
    assert all(r * t == 128 for r, t in lay)
    assert len(lay) == 8
    assert checks._divisor_layouts(2) == [(2, 1), (1, 2)]
    assert checks._divisor_layouts(6) == [(6, 1), (3, 2), (2, 3), (1, 6)]


def test_launcher_binds_each_rank_to_its_threads_cores():
    """The binding each family's launcher reads from the environment: every
    rank on as many cores of its own as it has threads."""
    checks = load_checks()
    ompi = checks.binding_env('openmpi', 4)
    assert ompi['OMPI_MCA_rmaps_base_mapping_policy'] == 'slot:PE=4'
    assert ompi['OMPI_MCA_hwloc_base_binding_policy'] == 'core'
    assert checks.binding_env('openmpi', 1)['OMPI_MCA_rmaps_base_mapping_policy'] == 'core'
    assert checks.binding_env('mpich', 4)['HYDRA_BINDING'] == 'core:4'
    assert checks.binding_env('mpich', 1)['HYDRA_BINDING'] == 'core'
    # one-core: each rank on a single core whatever its threads.
    assert checks.binding_env('mpich', 4, 'one-core')['HYDRA_BINDING'] == 'core'
    assert checks.binding_env('openmpi', 4, 'one-core')[
        'OMPI_MCA_rmaps_base_mapping_policy'] == 'core'
    assert checks.binding_env('srun', 4)['SLURM_CPU_BIND'] == 'cores'
    assert all(checks.binding_env(f, 4)['OMP_NUM_THREADS'] == '4'
               for f in ('openmpi', 'mpich', 'mvapich2', 'srun'))
    # hydra binds MVAPICH2's ranks; its library affinity is off either way.
    assert checks.binding_env('mvapich2', 4)['HYDRA_BINDING'] == 'core:4'
    assert checks.binding_env('mvapich2', 4)['MV2_ENABLE_AFFINITY'] == '0'
    assert checks.binding_env('mvapich2', 4, 'one-core')['MV2_ENABLE_AFFINITY'] == '0'


def test_declared_node_launches_without_binding():
    # A declared node runs more ranks x threads than cores, on purpose: no
    # binding, and Open MPI allows the oversubscription.
    checks = load_checks()
    ompi = checks.binding_env('openmpi', 1, oversubscribe=True)
    assert ompi['OMPI_MCA_rmaps_base_oversubscribe'] == '1'
    assert ompi['OMPI_MCA_hwloc_base_binding_policy'] == 'none'
    assert 'OMP_PLACES' not in ompi
    assert checks.binding_env('mpich', 2, oversubscribe=True)['HYDRA_BINDING'] == 'none'
    # ...and never otherwise.
    assert checks.binding_env('openmpi', 1)['OMPI_MCA_hwloc_base_binding_policy'] == 'core'
    assert 'OMPI_MCA_rmaps_base_oversubscribe' not in checks.binding_env('openmpi', 2)


def test_layout_parameter_type_reads_names():
    checks = load_checks()
    assert checks.parse_layout('masteronly_4x32') == ('masteronly', 4, 32)
    assert checks.parse_layout('serial_2x1_decomp64') == ('serial', 2, 64)
    assert checks.parse_layout(('mpi', 2, 1)) == ('mpi', 2, 1)


def test_samples_are_registered_round_by_round_with_pairs_side_by_side():
    # interleave_samples reorders a check's variants: round by round, size by
    # size, each pure-MPI run between its hybrid runs, the order reversed in
    # every other round (ReFrame runs them in registration order).
    import sys

    import reframe as rfm
    from reframe.core.builtins import parameter

    mpi, master, funnel = ('mpi', 2, 1), ('masteronly', 1, 2), ('funneled', 1, 2)
    serial = ('serial', 1, 2)

    class Interleaved(rfm.RunOnlyRegressionTest):
        layout = parameter([mpi, master, funnel, serial])
        problem = parameter([16, 32])
        sample = parameter(range(2), type=int)

    Interleaved.__module__ = __name__
    placement.interleave_samples(rfm.simple_test(Interleaved))
    entries = sys.modules[__name__]._rfm_test_registry._tests[Interleaved]
    order = [Interleaved.get_variant_info(kw['variant_num'])['params'] for _a, kw in entries]
    got = [(p['sample'], p['problem'], p['layout'][0]) for p in order]
    assert got == [
        (0, 16, 'masteronly'), (0, 16, 'mpi'), (0, 16, 'funneled'), (0, 16, 'serial'),
        (0, 32, 'masteronly'), (0, 32, 'mpi'), (0, 32, 'funneled'), (0, 32, 'serial'),
        (1, 16, 'funneled'), (1, 16, 'mpi'), (1, 16, 'masteronly'), (1, 16, 'serial'),
        (1, 32, 'funneled'), (1, 32, 'mpi'), (1, 32, 'masteronly'), (1, 32, 'serial')]


def test_round_order_puts_every_hybrid_run_beside_a_pure_mpi_run():
    one = [('mpi', 4, 1), ('masteronly', 2, 2), ('masteronly', 1, 4)]
    assert placement.round_order(one, 0) == [('masteronly', 2, 2), ('mpi', 4, 1),
                                             ('masteronly', 1, 4)]
    assert placement.round_order(one, 1) == [('masteronly', 1, 4), ('mpi', 4, 1),
                                             ('masteronly', 2, 2)]
    # a core count without pure MPI has no block: its runs come last
    lone = [('masteronly', 1, 8), *one]
    assert placement.round_order(lone, 0)[-1] == ('masteronly', 1, 8)


def test_rounds_are_numbered_from_the_first_round(monkeypatch):
    monkeypatch.setenv('HARNESS_FIRST_ROUND', '5')
    monkeypatch.setenv('HARNESS_REPEAT', '2')
    assert list(placement.sample_parameter().values) == [5, 6]
    monkeypatch.setenv('HARNESS_FIRST_ROUND', '-1')
    with pytest.raises(ValueError, match='HARNESS_FIRST_ROUND'):
        placement.first_round()


def test_launch_line_is_the_partitions_launcher_with_a_layouts_binding():
    from reframe.core.backends import getlauncher

    checks = load_checks()
    mpirun = getlauncher('mpirun')()
    assert checks.launch_line(mpirun, 2) == 'mpirun -np 2'
    line = checks.launch_line(mpirun, 1, 2, checks.binding_env('mpich', 2))
    assert line.startswith('env OMP_NUM_THREADS=2 ') and line.endswith(' mpirun -np 1')
    assert 'HYDRA_BINDING=core:2' in line
    mpirun.modifier, mpirun.modifier_options = 'timeout', ['-k', '10', '90']
    assert checks.launch_line(mpirun, 2) == 'timeout -k 10 90 mpirun -np 2'


def test_a_stacks_link_folder_names_its_own_tools(tmp_path):
    checks = load_checks()
    prefix = tmp_path / 'stack' / 'bin'
    prefix.mkdir(parents=True)
    for exe in ('mpicc', 'mpicxx', 'mpiexec', 'hydra_pmi_proxy'):
        (prefix / exe).write_text('#!/bin/sh\n')
        (prefix / exe).chmod(0o755)
    bindir = checks.stack_bindir(str(tmp_path / 'links'), 'mvapich2', str(prefix / 'mpicc'),
                                 str(prefix / 'mpiexec'), 'mvapich2')
    links = {p.name: os.readlink(p) for p in Path(bindir).iterdir()}
    assert links == {'mpirun': str(prefix / 'mpiexec'), 'mpiexec': str(prefix / 'mpiexec'),
                     'mpicc': str(prefix / 'mpicc'), 'mpicxx': str(prefix / 'mpicxx'),
                     'hydra_pmi_proxy': str(prefix / 'hydra_pmi_proxy')}
    # The same stack again: the same folder; another prefix: another folder.
    assert checks.stack_bindir(str(tmp_path / 'links'), 'mvapich2', str(prefix / 'mpicc'),
                               str(prefix / 'mpiexec'), 'mvapich2') == bindir
    other = checks.stack_bindir(str(tmp_path / 'links'), 'mvapich2', '/usr/bin/mpicc.mpich',
                                '/usr/bin/mpiexec.mpich', 'mvapich2')
    assert other != bindir


def test_layouts_without_a_partition_count_physical_cores(monkeypatch, tmp_path):
    # No partition with a topology (imported outside ReFrame): the layouts of
    # this machine counted its hardware threads; on 1 core of 2 threads
    # mpi_2x1 and 1x2 bound two threads to the one core.
    from harnesscore import host
    from test_plan import ONE_CORE_TWO_THREADS, fake_host
    monkeypatch.setattr(host, 'SYS_ROOT', fake_host(tmp_path, ONE_CORE_TWO_THREADS),
                        raising=False)
    monkeypatch.setattr(os, 'sched_getaffinity', lambda _pid: {0, 1})
    monkeypatch.setattr(placement, '_partitions', lambda: [])
    assert placement.system_layouts() == [(1, 1)]


def test_the_session_budget_is_split_over_every_partition_and_stack(monkeypatch):
    # Two partitions, one with three stacks and one with none (declared or
    # selected with -p): nothing runs on the second, so the session's 40m is
    # shared by the 3 parts of the first.
    parts = [SimpleNamespace(environs=['a', 'b', 'c']), SimpleNamespace(environs=[])]
    monkeypatch.setattr(placement, '_partitions', lambda: parts)
    monkeypatch.setattr(placement._plan, 'Topology',
                        SimpleNamespace(from_partition=lambda part, nodes: 'topo'))
    seen = []
    monkeypatch.setattr(placement, '_cached_plan',
                        lambda topo, samples, budget_s, batch: seen.append(budget_s))
    monkeypatch.setenv('HARNESS_BUDGET', '40m')
    placement.partition_plan(parts[0])
    monkeypatch.setenv('HARNESS_BUDGET', '7m/part')
    placement.partition_plan(parts[1])
    assert seen == [800.0, 420.0]


@pytest.mark.parametrize('cores', [1, 4])
def test_a_point_to_point_pair_on_two_nodes_puts_one_rank_on_each(cores):
    part = SimpleNamespace(fullname='sys:two')
    assert placement.pt2pt_placement(part, cores, 2) == (1, 2, '')
    assert placement.pt2pt_placement(part, cores, 3) == (1, 2, '')


def test_a_point_to_point_pair_on_one_node_needs_two_cores():
    part = SimpleNamespace(fullname='sys:one')
    assert placement.pt2pt_placement(part, 4, 1) == (2, 1, '')
    assert placement.pt2pt_placement(part, 1, 1) == (
        0, 0, 'needs 2 cores per node, sys:one has 1')


def test_a_two_thread_open_mpi_rank_is_bound_to_two_cores_with_close_threads():
    # Open MPI's 'core' mapping gives a 2-thread rank one core: its threads would share it.
    ompi = load_checks().binding_env('openmpi', 2)
    assert ompi['OMPI_MCA_rmaps_base_mapping_policy'] == 'slot:PE=2'
    assert (ompi['OMP_PLACES'], ompi['OMP_PROC_BIND']) == ('cores', 'close')


def test_only_single_thread_layouts_run_pure_mpi_and_only_hybrid_ones_have_serial_runs(
        monkeypatch):
    monkeypatch.setattr(placement, 'system_layouts', lambda: [(4, 1), (2, 2), (1, 4)])
    assert placement.runs_for(('masteronly', 'funneled')) == [
        ('mpi', 4, 1), ('masteronly', 2, 2), ('funneled', 2, 2),
        ('masteronly', 1, 4), ('funneled', 1, 4)]
    assert placement.serial_runs() == [('serial', 2, 2), ('serial', 1, 4)]


def test_a_system_is_declared_only_where_every_partition_declares_its_topology(monkeypatch):
    declared = SimpleNamespace(extras={'declared_topology': True})
    real = SimpleNamespace(extras={})
    for parts, want in (([declared, declared], True), ([declared, real], False), ([], False)):
        monkeypatch.setattr(placement, '_partitions', lambda parts=parts: parts)
        assert placement.declared_system() is want


def test_a_launch_line_of_one_rank_per_node_places_it():
    from reframe.core.backends import getlauncher

    line = load_checks().launch_line(getlauncher('srun')(), 2, per_node=1)
    assert line.split()[-2:] == ['--ntasks=2', '--ntasks-per-node=1']


@pytest.mark.parametrize('mode, registered, launcher, want', [
    ('srun', 'srun', 'srun', 'srun'),
    ('own', 'srun', '/opt/mv2/bin/mpirun', 'mvapich2'),
    ('srun', 'mpirun', 'mpirun', 'mvapich2'),
])
def test_a_run_binds_with_the_variables_of_the_launcher_that_starts_it(mode, registered,
                                                                       launcher, want):
    part = SimpleNamespace(launcher_type=SimpleNamespace(registered_name=registered))
    environ = SimpleNamespace(extras={'launch': mode, 'launcher': launcher,
                                      'family': 'mvapich2'})
    assert launch.launcher_family(part, environ) == want
    assert launch.own_launcher(part, environ) == ('mpirun' if mode == 'own' else '')
