"""Layouts come from the partition's cores, never written in as 2."""

from __future__ import annotations

from types import SimpleNamespace

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
    checks = load_checks()

    class Job:
        num_tasks = 4

    ompi = checks.StackLauncher('/usr/bin/mpirun.openmpi', 'openmpi', 2, 4)
    assert ompi.command(Job()) == ['/usr/bin/mpirun.openmpi', '-np', '4', '--map-by',
                                   'ppr:2:node:PE=4', '--bind-to', 'core']
    mpich = checks.StackLauncher('/usr/bin/mpiexec.mpich', 'mpich', 2, 4)
    assert mpich.command(Job()) == ['/usr/bin/mpiexec.mpich', '-n', '4', '-ppn', '2',
                                    '-bind-to', 'core:4']
    mv2 = checks.StackLauncher('/opt/mvapich2/bin/mpiexec', 'mvapich2', 2, 4)
    assert mv2.command(Job()) == ['/opt/mvapich2/bin/mpiexec', '-n', '4', '-ppn', '2',
                                  '-bind-to', 'core:4']
    # hydra binds MVAPICH2's ranks; its library affinity is off either way.
    assert checks.binding_env('mvapich2', 4)['MV2_ENABLE_AFFINITY'] == '0'
    assert checks.binding_env('mvapich2', 4, 'one-core')['MV2_ENABLE_AFFINITY'] == '0'


def test_declared_node_launches_without_binding():
    # A declared node runs more ranks x threads than cores, on purpose.
    checks = load_checks()

    class Job:
        num_tasks = 16

    ompi = checks.StackLauncher('/usr/bin/mpirun.openmpi', 'openmpi', 16, 1,
                                oversubscribe=True)
    assert ompi.command(Job()) == ['/usr/bin/mpirun.openmpi', '-np', '16', '--oversubscribe',
                                   '--bind-to', 'none']
    mpich = checks.StackLauncher('/usr/bin/mpiexec.mpich', 'mpich', 16, 1, oversubscribe=True)
    assert mpich.command(Job()) == ['/usr/bin/mpiexec.mpich', '-n', '16', '-bind-to', 'none']


def test_layout_parameter_type_reads_names():
    checks = load_checks()
    assert checks.parse_layout('masteronly_4x32') == ('masteronly', 4, 32)
    assert checks.parse_layout('serial_2x1_decomp64') == ('serial', 2, 64)
    assert checks.parse_layout(('mpi', 2, 1)) == ('mpi', 2, 1)


def test_samples_are_registered_sample_by_sample():
    # interleave_samples reorders a check's variants: every layout of sample
    # 0, then of sample 1, ... (ReFrame runs them in registration order).
    import sys

    import reframe as rfm
    from reframe.core.builtins import parameter

    class Interleaved(rfm.RunOnlyRegressionTest):
        layout = parameter(['a', 'b', 'c'])
        sample = parameter(range(2), type=int)

    Interleaved.__module__ = __name__
    placement.interleave_samples(rfm.simple_test(Interleaved))
    entries = sys.modules[__name__]._rfm_test_registry._tests[Interleaved]
    order = [Interleaved.get_variant_info(kw['variant_num'])['params'] for _a, kw in entries]
    assert [(p['sample'], p['layout']) for p in order] == [
        (0, 'a'), (0, 'b'), (0, 'c'), (1, 'a'), (1, 'b'), (1, 'c')]
