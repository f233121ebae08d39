"""``./harness site`` (config/sitegen.py): a Slurm cluster detected and
written as ``config/site_<name>.py``.

* every detector, from recorded outputs (tests/data/site/, README.md there says
  which are recorded and which written in the tools' formats), from a missing
  tool and from garbage;
* the whole generation from recorded outputs through a fake command runner:
  the test cluster (its links and stacks as ``slurm_systems.test_cluster_spec``
  has them) and an InfiniBand cluster (links, NUMA, modules, Spack, placeholders),
  the file readable, ruff clean and valid for config/slurm_systems.py;
* the rules of writing: an existing file is refused, ``--force`` writes a
  numbered file beside it, ``--overwrite`` replaces it, ``--dry-run`` writes none;
* for real (``integration``): ``./harness site`` on the 2-node test cluster of
  tests/slurm/cluster.sh, then its file as it is (``HARNESS_CLUSTERS``) running
  the four kernels (stream, ring, spmv, md) on 2 nodes for every stack and link.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from conftest import BIN, REPO, last_attempts, run_reframe

sys.path.insert(0, str(REPO / 'config'))
import sitegen as sg  # noqa: E402
import slurm_systems  # noqa: E402
import test_multinode as mn  # noqa: E402  (the multi-node test cluster's helpers)
from harnesscore.stacks import STACK  # noqa: E402

DATA = REPO / 'tests' / 'data' / 'site'
#: the masks of 128 CPUs in 8 NUMA domains of 16, numbered in blocks (the HPC node of
#: DATA's files, Slurm's 8 sockets of numa_node_as_socket)
EIGHT_NUMA_BLOCKS = [hex(0xffff << (16 * i)) for i in range(8)]
#: The multi-node test cluster of tests/test_multinode.py, 2 nodes started for
#: this module (pytest names a fixture after the attribute that holds it).
site_cluster = mn.cluster
LMOD_ERROR = ('Lmod has detected the following error: mvapich2: set HARNESS_MVAPICH2_PREFIX\n'
              'to the install prefix of MVAPICH2 \nWhile processing the following module(s):\n')


def data(name: str) -> str:
    """A recorded output; ``{repo}`` stands for the checkout it was recorded in."""
    return (DATA / name).read_text().replace('{repo}', str(REPO))


def garbage() -> str:
    return data('garbage.txt')


# ---- detectors -----------------------------------------------------------------------

def test_partitions_from_scontrol_and_sinfo():
    parts = sg.parse_partitions(data('testcluster_scontrol_partition.txt'))
    assert [(p.name, p.nodes, p.total_nodes, p.up, p.default) for p in parts] == [
        ('fast', 'node[1-2]', 2, True, True), ('slow', 'node[1-2]', 2, True, False)]
    hpc = sg.parse_partitions(data('hpc_scontrol_partition.txt'))
    assert [(p.name, p.up, p.max_time) for p in hpc] == [
        ('compute', True, '2-00:00:00'), ('debug', True, '00:20:00'), ('old', False, 'UNLIMITED')]
    rows = sg.parse_sinfo(data('testcluster_sinfo.txt'))
    assert [(r.partition, r.up, r.nodes, r.size and r.size.key(), r.size and r.size.memory_mib)
            for r in rows] == [('fast', True, 2, (2, 1, 2, 1), 24105),
                               ('slow', True, 2, (2, 1, 2, 1), 24105)]


def test_nodes_from_scontrol_one_line_and_multiline_agree():
    one = sg.parse_nodes(data('testcluster_scontrol_node.txt'))
    multi = sg.parse_nodes(data('testcluster_scontrol_node_multiline.txt'))
    assert one == multi
    assert [(n.name, n.addr, n.partitions, n.size and n.size.key()) for n in one] == [
        ('node1', '10.250.1.1', ['fast', 'slow'], (2, 1, 2, 1)),
        ('node2', '10.250.1.2', ['fast', 'slow'], (2, 1, 2, 1))]


def test_nodes_with_specialised_cores_features_and_a_down_node():
    nodes = {n.name: n for n in sg.parse_nodes(data('hpc_scontrol_node.txt'))}
    assert nodes['cn001'].size == sg.NodeSize(128, 2, 64, 1, 250000, 128)
    assert nodes['cn001'].features == ['rome', 'ib']
    # CPUEfctv: 2 cores set aside for the system
    assert nodes['cn003'].size == sg.NodeSize(126, 2, 64, 1, 250000, 128)
    assert 'set aside' in nodes['cn003'].size.describe()
    assert nodes['old01'].size == sg.NodeSize(16, 2, 8, 1, 64000, 16)
    assert nodes['old01'].partitions == ['old'] and nodes['old01'].features == []


def test_slurm_config_and_mpi_plugins():
    conf = sg.parse_scontrol_config(data('testcluster_scontrol_config.txt'))
    assert conf['AccountingStorageType'] == 'accounting_storage/none'
    assert conf['SLURM_VERSION'] == '22.05.8' and re.fullmatch(r'hc[0-9a-f]{6}',
                                                              conf['ClusterName'])
    assert sg.parse_mpi_plugins(data('testcluster_srun_mpi_list.txt')) == {
        'pmix', 'none', 'cray_shasta', 'pmi2', 'pmix_v4'}
    assert sg.parse_mpi_plugins(data('hpc_srun_mpi_list_slurm20.txt')) == {
        'cray_shasta', 'none', 'pmi2', 'pmix', 'pmix_v3'}


def test_node_probe_sections_cpus_and_interfaces():
    sections = sg.probe_sections(data('testcluster_probe.txt'))
    assert {'host', 'lscpu', 'ip', 'net', 'ucx_info', 'ibv_devinfo', 'fi_info', 'end'} <= set(
        sections)
    assert sections['host'].strip() == 'node1'
    topo = sg.parse_lscpu(sections['lscpu'])
    assert topo == sg.CpuTopology(cpus=2, cores=2, sockets=1, numa_masks=['0x3'])
    assert sg.parse_ip_addr(sections['ip']) == {'lo': ['127.0.0.1/8'], 'fast0': ['10.250.1.1/24'],
                                                'slow0': ['10.250.2.1/24']}
    net = sg.parse_sys_net(sections['net'])
    assert net['fast0'] == sg.NetIface('fast0', 1, True, 10000, False)
    assert net['lo'].arp_type == 772
    hpc = sg.parse_lscpu(data('hpc_lscpu_8numa.txt'))
    assert hpc is not None and (hpc.cpus, hpc.cores, hpc.sockets) == (128, 128, 2)
    assert hpc.numa_masks == EIGHT_NUMA_BLOCKS


def test_interconnect_tools():
    ucx = sg.parse_ucx_info(sg.probe_sections(data('testcluster_probe.txt'))['ucx_info'])
    assert {(d.transport, d.device) for d in ucx if d.kind == 'network'} == {
        ('tcp', 'fast0'), ('tcp', 'slow0'), ('tcp', 'lo')}
    ib = sg.parse_ucx_info(data('hpc_ucx_info_ib.txt'))
    assert {d.device for d in ib if d.transport.startswith(('rc', 'dc', 'ud'))} == {'mlx5_0:1'}
    ports = sg.parse_ibv_devinfo(data('hpc_ibv_devinfo_ib.txt'))
    assert [(p.device, p.active, p.link_layer, p.rate) for p in ports] == [
        ('mlx5_0:1', True, 'InfiniBand', '4X 50.0 Gbps'), ('mlx5_1:1', False, 'Ethernet', '')]
    # no HCA (recorded): nothing
    assert sg.parse_ibv_devinfo(sg.probe_sections(data('testcluster_probe.txt'))['ibv_devinfo']) \
        == []
    fi = sg.parse_fi_info(sg.probe_sections(data('testcluster_probe.txt'))['fi_info'])
    assert ('tcp;ofi_rxm', 'fast0') in fi and not [p for p, _ in fi if p in sg.OFI_FABRICS]
    assert sg.parse_fi_info(data('hpc_fi_info_cxi.txt'))[:2] == [('cxi', 'cxi0'), ('cxi', 'cxi1')]


def test_modules_and_spack():
    lmod = sg.parse_module_avail(data('testcluster_module_avail_lmod.txt'))
    assert [(m.name, m.directory) for m in lmod] == [
        (n, str(REPO / 'config' / 'modules' / 'files')) for n in ('mpich', 'mvapich2', 'openmpi')]
    tmod = sg.parse_module_avail(data('hpc_module_avail_tmod5.txt'))
    assert [(m.name, m.default) for m in tmod if sg.module_stack(m.name)] == [
        ('mpich/4.1.2', False), ('openmpi/4.1.5', False), ('openmpi/5.0.3', True),
        ('mpi/openmpi-x86_64', False)]
    assert sg.module_stack('gcc/12.2.0') is None and sg.module_stack('hpcx/2.17.1') is None
    assert sg.module_stack('mvapich2/2.3.7-gcc') == 'mvapich2'
    assert sg.module_stack('open-mpi/5.0') == 'openmpi'
    spack = sg.parse_spack_find(data('hpc_spack_find.txt'))
    assert [(s.name, s.version) for s in spack] == [('openmpi', '4.1.6'), ('mvapich2', '2.3.7'),
                                                    ('zlib', '1.3')]


def test_a_launcher_says_which_stack_it_is():
    ompi = data('openmpi_mpirun_version.txt')
    hydra = data('mpich_mpiexec_version.txt')
    assert sg.identify_stack(ompi, [data('openmpi_ompi_info_version.txt')]) == 'openmpi'
    assert sg.stack_version(STACK['openmpi'], [ompi, data('openmpi_ompi_info_version.txt')]) \
        == '4.1.4'
    # hydra is MPICH's and MVAPICH2's: mpichversion tells them apart
    assert sg.identify_stack(hydra) is None
    assert sg.identify_stack(hydra, [data('mpich_mpichversion.txt')]) == 'mpich'
    assert sg.identify_stack(hydra, ['MVAPICH2 Version:     \t2.3.7\n']) == 'mvapich2'
    assert sg.identify_stack(garbage(), [garbage()]) is None


def test_links_of_a_node_and_the_one_each_partition_takes():
    links = sg.node_links(sg.probe_sections(data('testcluster_probe.txt')))
    assert [(x.kind, x.device) for x in links] == [('tcp', 'fast0'), ('tcp', 'slow0')]
    for part in ('fast', 'slow'):
        chosen, why = sg.choose_links(part, [], links, '10.250.1.1')
        assert [x.device for x in chosen] == [f'{part}0'] and 'named after' in why
    # neither name nor feature: the interface Slurm reaches the nodes on
    chosen, why = sg.choose_links('batch', [], links, '10.250.1.1')
    assert [x.device for x in chosen] == ['fast0'] and 'NodeAddr' in why
    assert sg.choose_links('batch', [], links, '') == ([], '')
    ib = sg.node_links(sg.probe_sections(data('hpc_probe_ib.txt')))
    # the active HDR port, and the up Ethernet with an address (not ib0, docker0)
    assert [(x.kind, x.device) for x in ib] == [('ib', 'mlx5_0:1'), ('tcp', 'eno1')]
    chosen, why = sg.choose_links('compute', ['rome', 'ib'], ib)
    assert [x.device for x in chosen] == ['mlx5_0:1'] and "feature 'ib'" in why
    chosen, why = sg.choose_links('compute', [], ib)
    assert [x.device for x in chosen] == ['mlx5_0:1'] and 'high-speed' in why
    chosen, _ = sg.choose_links('eth', [], ib)
    assert [x.device for x in chosen] == ['eno1']
    # UCX alone (no ibv_devinfo) finds the port as well
    only_ucx = {'ucx_info': data('hpc_ucx_info_ib.txt')}
    assert [(x.kind, x.device) for x in sg.node_links(only_ucx)] == [('ib', 'mlx5_0:1')]
    cxi = sg.node_links({'fi_info': data('hpc_fi_info_cxi.txt')})
    assert [(x.kind, x.device) for x in cxi] == [('ofi', 'cxi')]
    assert cxi[0].env(STACK['openmpi']) == {'OMPI_MCA_pml': 'cm', 'OMPI_MCA_mtl': 'ofi',
                                            'FI_PROVIDER': 'cxi'}
    # MPICH as the registry has it is built with UCX: libfabric's provider says nothing to it
    assert cxi[0].env(STACK['mpich']) is None and ib[0].env(STACK['mvapich2']) is None
    assert ib[0].env(STACK['mpich']) == {'UCX_NET_DEVICES': 'mlx5_0:1'}
    assert ib[0].env(STACK['openmpi']) == {'OMPI_MCA_pml': 'ucx', 'UCX_NET_DEVICES': 'mlx5_0:1'}
    assert links[0].env(STACK['mpich']) == STACK['mpich'].tcp_nodes('fast0')


def test_a_node_without_the_interconnect_tools_still_shows_its_links():
    # recorded with ucx_info, ibv_devinfo and fi_info absent from the nodes
    sections = sg.probe_sections(data('testcluster_probe_notools.txt'))
    assert sections['ucx_info'] == sections['fi_info'] == sg.MISSING
    links = sg.node_links(sections)
    assert [(x.kind, x.device, x.addrs) for x in links] == [
        ('tcp', 'fast0', ['10.250.1.1/24']), ('tcp', 'slow0', ['10.250.2.1/24'])]
    assert [x.device for x in sg.choose_links('slow', [], links)[0]] == ['slow0']


def test_missing_tools_and_garbage_give_nothing():
    missing = {k: sg.MISSING for k in ('lscpu', 'ip', 'ucx_info', 'ibv_devinfo', 'fi_info')}
    assert sg.node_links(missing) == []
    assert sg.parse_lscpu(sg.MISSING) is None
    text = garbage()
    for parse in (sg.parse_partitions, sg.parse_nodes, sg.parse_sinfo, sg.parse_ip_addr,
                  sg.parse_sys_net, sg.parse_ucx_info, sg.parse_ibv_devinfo, sg.parse_fi_info,
                  sg.parse_spack_find, sg.parse_mpi_plugins):
        assert not parse(text), parse.__name__
    assert sg.parse_lscpu(text) is None
    assert sg.node_links(sg.probe_sections(text)) == []
    assert sg.probe_sections(text) == {}
    assert [m.name for m in sg.parse_module_avail(text)] == []
    assert sg.parse_scontrol_config(text) == {}


def test_small_helpers():
    pattern = sg.hostname_pattern('login03.hpc.example.org')
    assert pattern == r'^login\d+(\.|$)'
    for host, match in (('login03.hpc.example.org', True), ('login1', True),
                        ('loginx', False), ('mylogin1', False)):
        assert bool(re.match(pattern, host)) is match, host
    assert sg.hostname_pattern('a.b+c') == r'^a(\.|$)'
    assert sg.hostname_pattern('x+y1') == r'^x\+y\d+(\.|$)'
    assert [sg.slurm_minutes(t) for t in ('30', '1:00:00', '00:20:00', '2-00:00:00', '1-12',
                                          'UNLIMITED', 'INFINITE', '')] == [
        30, 60, 20, 2880, 2160, None, None, None]


def test_a_command_is_an_argument_list_with_a_timeout(tmp_path):
    res = sg.run(['sh', '-c', 'echo "$1"; exit 3', 'sh', 'a b; rm -rf /'], 10)
    assert (res.rc, res.out) == (3, 'a b; rm -rf /\n') and not res.ok
    assert sg.run(['/nonexistent/sinfo'], 10).why() == '/nonexistent/sinfo not found'
    slow = sg.run(['sleep', '5'], 0.2)
    assert slow.rc is None and 'timed out' in slow.why()


# ---- the whole generation from recorded outputs ------------------------------------

def ok(text: str = '', err: str = '') -> sg.CmdResult:
    return sg.CmdResult([], 0, text, err)


class FakeCluster:
    """A command runner answering from recorded outputs: `answers` maps an
    argv prefix to a result; module loads put a stub folder per stack first
    on PATH, whose tools answer with the stack's recorded texts (by the
    tool's name and its arguments, else by its name)."""

    def __init__(self, answers: dict[tuple[str, ...], sg.CmdResult],
                 modules: dict[str, Path], tool_texts: dict[Path, dict[str, str]]):
        self.answers = answers
        self.modules = modules
        self.tool_texts = tool_texts
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float,
                 env: Mapping[str, str]) -> sg.CmdResult:
        argv = list(argv)
        self.calls.append(argv)
        assert timeout > 0
        if argv[:3] == ['bash', '-c', sg.LOAD_SCRIPT]:
            module = argv[5]
            if module not in self.modules:
                return sg.CmdResult(argv, 1, 'false\n', LMOD_ERROR)
            env0 = {**env, 'PATH': f'{self.modules[module]}:{env.get("PATH", "")}'}
            return ok('\0'.join(f'{k}={v}' for k, v in env0.items()) + '\0')
        # A stub tool answers with its stack's text (found as the shell would).
        found = shutil.which(argv[0], path=env.get('PATH', ''))
        texts = self.tool_texts.get(Path(found).parent) if found else None
        name = os.path.basename(argv[0])
        for key in (' '.join([name, *argv[1:]]), name):
            if texts is not None and key in texts:
                return ok(texts[key])
        best = max((k for k in self.answers if tuple(argv[:len(k)]) == k), key=len,
                   default=None)
        if best is None:
            return sg.CmdResult(argv, problem=f'{argv[0]} not found')
        return self.answers[best]


def stub_stack(folder: Path, tools: Sequence[str]) -> Path:
    folder.mkdir(parents=True)
    for tool in tools:
        (folder / tool).write_text('#!/bin/sh\nexit 1\n')
        (folder / tool).chmod(0o755)
    return folder


def test_what_a_module_load_prints_is_not_read_as_its_environment(tmp_path):
    """A modulefile that prints (Tcl's ``puts stdout "echo ..."``, run by the load's
    eval) wrote before ``env -0``: its words were glued to the first variable's
    name, and that variable (PATH, where it came first) was lost."""
    back_end = tmp_path / 'modulecmd'
    back_end.write_text("#!/bin/sh\necho 'echo Loading openmpi/4.1; export LOADED=yes'\n")
    back_end.chmod(0o755)
    res = sg.run(['bash', '-c', sg.LOAD_SCRIPT, 'load', str(back_end), 'openmpi'], 20,
                 {'PATH': os.environ['PATH'], 'FIRST': '1'})
    assert res.ok, res.why()
    chunks = [c for c in res.out.split('\0') if c]
    assert all(re.match(r'[A-Za-z_][A-Za-z0-9_]*=', c) for c in chunks), chunks[:2]
    assert {'FIRST=1', 'LOADED=yes', f'PATH={os.environ["PATH"]}'} <= set(chunks)
    assert 'Loading openmpi/4.1' in res.err


def lmod_stub(tmp_path: Path) -> Path:
    cmd = stub_stack(tmp_path / 'lmod' / 'libexec', ['lmod']) / 'lmod'
    (tmp_path / 'lmod' / 'init').mkdir()
    (tmp_path / 'lmod' / 'init' / 'bash').write_text('# lmod init\n')
    return cmd


def generate(tmp_path: Path, runner: FakeCluster, environ: dict[str, str], *argv: str,
             ) -> tuple[int, str, str, dict]:
    out = tmp_path / 'site_out.py'
    code = sg.main(['--output', str(out), *argv], runner=runner, environ=environ)
    text = out.read_text() if out.exists() else ''
    namespace: dict = {}
    if text:
        exec(compile(text, str(out), 'exec'), namespace)
    return code, text, str(out), namespace.get('CLUSTER', {})


def comments(text: str) -> str:
    """The file's comments as one line (wrapped lines joined)."""
    return ' '.join(ln.strip()[1:].strip() for ln in text.splitlines()
                    if ln.strip().startswith('#'))


def fill_ins(summary: str) -> list[str]:
    """The keys the summary says were not detected."""
    return re.findall(r'^  (?!note:)(\S+): ', summary.split('\nnot detected')[1], re.M)


def assert_ruff_clean(path: str) -> None:
    ruff = BIN / 'ruff'
    if not ruff.exists():
        pytest.skip('ruff not installed in the venv')
    proc = subprocess.run([str(ruff), 'check', '--no-cache', '--isolated', '--line-length',
                           '100', '--select', 'E,F,W,I,UP,B', path], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def slurm_answers(prefix: str, config: str, sinfo: str,
                  mpi_list: str) -> dict[tuple[str, ...], sg.CmdResult]:
    """The fake runner's answers of Slurm's clients: `prefix`_scontrol_partition.txt
    and _node.txt, the files `config` and `mpi_list`, and `sinfo` as it is."""
    return {('scontrol', 'show', 'config'): ok(data(config)),
            ('scontrol', '-o', 'show', 'partition'): ok(data(f'{prefix}_scontrol_partition.txt')),
            ('scontrol', '-o', 'show', 'node'): ok(data(f'{prefix}_scontrol_node.txt')),
            ('sinfo',): ok(sinfo), ('srun', '--mpi=list'): ok(data(mpi_list))}


@pytest.fixture(autouse=True)
def nothing_of_this_machine(monkeypatch):
    """The fake clusters see nothing of this machine: no Lmod or install
    prefix found by path (a test names its own)."""
    monkeypatch.setattr(sg, 'KNOWN_PREFIXES', ())
    monkeypatch.setattr(sg, 'LMOD_PATHS', ())


#: What Debian's Open MPI 4.1's ``ompi_info --path sysconfdir`` prints.
OMPI_SYSCONFDIR = 'Sysconfdir: /etc/openmpi\n'


@pytest.fixture
def test_cluster_runner(tmp_path, monkeypatch) -> tuple[FakeCluster, dict[str, str]]:
    monkeypatch.setattr(sg, 'this_host', lambda: 'vm')
    monkeypatch.delenv('HARNESS_STACKS', raising=False)
    monkeypatch.delenv('HARNESS_MVAPICH2_PREFIX', raising=False)
    lmod = lmod_stub(tmp_path)
    ompi = stub_stack(tmp_path / 'bin' / 'openmpi', ['mpicc', 'mpirun', 'mpiexec', 'ompi_info'])
    mpich = stub_stack(tmp_path / 'bin' / 'mpich', ['mpicc', 'mpiexec', 'mpirun', 'mpichversion'])
    answers = {
        **slurm_answers('testcluster', 'testcluster_scontrol_config.txt',
                        data('testcluster_sinfo.txt'), 'testcluster_srun_mpi_list.txt'),
        ('srun', '--partition=fast'): ok(data('testcluster_probe.txt')),
        ('srun', '--partition=slow'): ok(data('testcluster_probe.txt')),
        (str(lmod), '--version'): ok(err='Modules based on Lua: Version 8.6.19  2022-04-16\n'),
        (str(lmod), 'bash', '--terse', 'avail'): ok(err=data('testcluster_module_avail_lmod.txt')),
    }
    texts = {ompi: {'mpirun': data('openmpi_mpirun_version.txt'),
                    'ompi_info': data('openmpi_ompi_info_version.txt'),
                    'ompi_info --path sysconfdir': OMPI_SYSCONFDIR},
             mpich: {'mpiexec': data('mpich_mpiexec_version.txt'),
                     'mpichversion': data('mpich_mpichversion.txt')}}
    runner = FakeCluster(answers, {'openmpi': ompi, 'mpich': mpich}, texts)
    return runner, {'PATH': str(tmp_path / 'nothing'), 'LMOD_CMD': str(lmod)}


def test_the_test_cluster_from_its_recorded_outputs(tmp_path, test_cluster_runner, capsys):
    runner, environ = test_cluster_runner
    code, text, path, cluster = generate(tmp_path, runner, environ)
    out = capsys.readouterr().out
    assert code == 0, out
    conf = sg.parse_scontrol_config(data('testcluster_scontrol_config.txt'))
    assert cluster['name'] == conf['ClusterName']
    assert cluster['modules_system'] == 'lmod' and cluster['scheduler'] == 'squeue'
    assert re.match(cluster['hostnames'][0], 'vm')
    assert cluster['prepare_cmds'] == [f'. {tmp_path}/lmod/init/bash',
                                       f'module use {REPO}/config/modules/files']
    # The links and stacks as the harness's own description of this cluster
    # has them (slurm_systems.test_cluster_spec, 2 CPUs per node).
    spec = slurm_systems.test_cluster_spec({'NODES': '2', 'SHARED_CORES': '0',
                                            'CPUS_PER_NODE': '2'})
    assert set(cluster['partitions']) == set(spec['partitions']) == {'fast', 'slow'}
    for name, part in cluster['partitions'].items():
        want = spec['partitions'][name]
        # whole nodes: the written file asks for them, as the template does
        # (the harness's own description of its test cluster does not)
        assert part['access'] == [*want['access'], '--exclusive']
        assert part['nodes'] == want['nodes'] == 2
        assert part['transport_env'] == want['transport_env'], name
        assert {k: v for k, v in part['processor'].items() if k != 'topology'} == \
            want['processor']
        assert part['processor']['topology'] == {'numa_nodes': ['0x3']}
        assert part['extras'] == {'mem_per_node': '24105MiB'}
    assert set(cluster['stacks']) == set(spec['stacks']) == {'openmpi', 'mpich'}
    for name, stack in cluster['stacks'].items():
        want = spec['stacks'][name]
        assert {k: stack.get(k) for k in ('modules', 'cc', 'launch', 'pmi')} == \
            {k: want.get(k) for k in ('modules', 'cc', 'launch', 'pmi')}
        assert stack.get('env', {}) == STACK[name].root_env_here()
    assert cluster['stacks']['openmpi']['descr'] == 'Open MPI 4.1.4 (module openmpi)'
    assert cluster['stacks']['mpich']['descr'] == 'MPICH 4.0.2 (module mpich)'
    # One probe for both partitions (the same nodes).
    assert len([c for c in runner.calls if c[0] == 'srun' and c[1] != '--mpi=list']) == 1
    # mvapich2's module does not load: left out, commented, its reason in the file.
    assert 'FILL IN: mvapich2 not found (module mvapich2 does not load (mvapich2: set ' \
        'HARNESS_MVAPICH2_PREFIX to the install prefix of MVAPICH2))' in comments(text), text
    assert "#     'launcher': 'mpiexec'," in text
    # valid, as settings.py would load it, and ruff clean
    slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)
    assert_ruff_clean(path)
    # the summary: what was detected, and every FILL IN
    assert re.search(r'partition fast: --partition=fast --exclusive, 2 node\(s\) per run, 2 CPUs, '
                     r'1 socket\(s\), 1 NUMA domain\(s\), 24105MiB; link: TCP over virtual '
                     r'Ethernet fast0', out), out
    assert 'stack openmpi: Open MPI 4.1.4 (module openmpi), cc mpicc, srun --mpi=pmix' in out
    fill = fill_ins(out)
    assert fill == ['hostnames', 'access', 'stacks.mvapich2'], out
    assert text.count('# FILL IN') == len(fill)
    assert out.rstrip().endswith(f'wrote {path}')


def test_the_probe_asks_for_no_more_time_than_a_partition_allows(tmp_path, test_cluster_runner):
    """A partition of MaxTime=2 (a debug one) kept the probe's --time=5 pending
    (PartitionTimeLimit) until srun's --immediate gave up: no probe of its nodes."""
    runner, environ = test_cluster_runner
    key = ('scontrol', '-o', 'show', 'partition')
    partitions = runner.answers[key].out
    # 2 minutes; at least 1 where MaxTime has only seconds; 5 where it has none
    for n, (limit, asked) in enumerate((('00:02:00', '2'), ('0:30', '1'), ('UNLIMITED', '5'))):
        runner.answers[key] = ok(partitions.replace('MaxTime=UNLIMITED', f'MaxTime={limit}', 1))
        runner.calls.clear()
        (tmp_path / str(n)).mkdir()
        generate(tmp_path / str(n), runner, environ, '--partitions', 'fast')
        probes = [c for c in runner.calls if c[0] == 'srun' and c[1] != '--mpi=list']
        assert [c[:2] + c[5:6] for c in probes] == [
            ['srun', '--partition=fast', f'--time={asked}']], probes


def test_stacks_without_modules_debians_tools_and_plain_wrappers(tmp_path, test_cluster_runner,
                                                                 capsys):
    runner, _ = test_cluster_runner
    debian = stub_stack(tmp_path / 'usr-bin', ['mpicc.mpich', 'mpiexec.mpich',
                                               'mpichversion.mpich'])
    plain = stub_stack(tmp_path / 'opt-bin', ['mpicc', 'mpirun', 'ompi_info'])
    runner.tool_texts = {
        debian: {'mpiexec.mpich': data('mpich_mpiexec_version.txt'),
                 'mpichversion.mpich': data('mpich_mpichversion.txt')},
        plain: {'mpirun': data('openmpi_mpirun_version.txt'),
                'ompi_info': data('openmpi_ompi_info_version.txt')}}
    # Debian's suffixed tools are looked for on PATH as it is; the plain
    # wrappers first on it are asked which stack they are.
    for first, rest in ((debian, plain), (plain, debian)):
        code, text, path, cluster = generate(tmp_path, runner, {'PATH': f'{first}:{rest}'},
                                             '--overwrite', '--no-srun')
        assert code == 0, capsys.readouterr()
        assert cluster['modules_system'] == 'nomod' and 'prepare_cmds' not in cluster
        stacks = cluster['stacks']
        assert stacks['mpich'] == {'descr': "MPICH 4.0.2 (Debian's mpicc.mpich + mpiexec.mpich)",
                                   'cc': f'{debian}/mpicc.mpich', 'launch': 'srun',
                                   'pmi': 'pmi2', **({'env': STACK['mpich'].root_env_here()}
                                                     if STACK['mpich'].root_env_here() else {})}
        assert stacks['openmpi']['cc'] == f'{plain}/mpicc'
        assert stacks['openmpi']['descr'] == f'Open MPI 4.1.4 (mpicc and mpirun on PATH ({plain}))'
        assert stacks['openmpi']['env']['PATH'] == f'{plain}:$PATH'
        slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)


@pytest.fixture
def hpc_runner(tmp_path, monkeypatch) -> tuple[FakeCluster, dict[str, str]]:
    monkeypatch.setattr(sg, 'this_host', lambda: 'login02.hpc.example.org')
    monkeypatch.setattr(sg, 'KNOWN_PREFIXES', ())
    tmod = stub_stack(tmp_path / 'modules' / 'libexec', ['modulecmd.tcl']) / 'modulecmd.tcl'
    ompi = stub_stack(tmp_path / 'bin' / 'openmpi', ['mpicc', 'mpirun', 'ompi_info'])
    mpich = stub_stack(tmp_path / 'bin' / 'mpich', ['mpicc', 'mpiexec', 'mpichversion'])
    mv2 = tmp_path / 'spack' / 'mvapich2-2.3.7-k2bdfux'
    mv2_bin = stub_stack(mv2 / 'bin', ['mpicc', 'mpiexec', 'mpichversion'])
    ompi_5 = ('mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/'
              'help/\n')
    answers = {
        **slurm_answers('hpc', 'hpc_scontrol_config_excerpt.txt', '',
                        'hpc_srun_mpi_list_slurm20.txt'),
        ('srun', '--partition=compute'): ok(data('hpc_probe_ib.txt')),
        ('srun', '--partition=debug'): sg.CmdResult(
            [], 1, '', 'srun: error: Unable to allocate resources: Requested node '
            'configuration is not available\n'),
        ('ucx_info', '-d'): ok(data('hpc_ucx_info_ib.txt')),
        (str(tmod), 'bash', '--version'): ok(err='Modules Release 5.3.1 (2023-06-27)\n'),
        (str(tmod), 'bash', '-t', 'avail'): ok(err=data('hpc_module_avail_tmod5.txt')),
        ('spack', 'find'): ok(f'==> In environment site\nmvapich2 2.3.7 {mv2}\n'),
    }
    texts = {ompi: {'mpirun': ompi_5,
                    'ompi_info --path sysconfdir': 'Sysconfdir: /opt/openmpi/5.0.3/etc\n'},
             mpich: {'mpiexec': data('mpich_mpiexec_version.txt'),
                     'mpichversion': data('mpich_mpichversion.txt')},
             mv2_bin: {'mpiexec': data('mpich_mpiexec_version.txt'),
                       'mpichversion': 'MVAPICH2 Version:     \t2.3.7\nMVAPICH2 Device:'
                                       '      \tch3:mrail\n'}}
    runner = FakeCluster(answers, {'openmpi/5.0.3': ompi, 'mpich/4.1.2': mpich}, texts)
    return runner, {'PATH': str(tmp_path / 'nothing'), 'MODULES_CMD': str(tmod),
                    'MODULESHOME': str(tmp_path / 'nothing')}


def test_an_infiniband_cluster_from_written_outputs(tmp_path, hpc_runner, capsys):
    runner, environ = hpc_runner
    code, text, path, cluster = generate(tmp_path, runner, environ, '--access=--account=proj1')
    out = capsys.readouterr().out
    assert code == 0, out
    assert cluster['name'] == 'hpc1' and cluster['scheduler'] == 'slurm'
    assert cluster['modules_system'] == 'envmod' and cluster['access'] == ['--account=proj1']
    assert cluster['hostnames'] == [r'^login\d+(\.|$)']
    # the debug partition's MaxTime is 20 minutes; the DOWN one is left out
    assert cluster['time_limit'] == '20m'
    assert set(cluster['partitions']) == {'compute', 'debug'}
    compute = cluster['partitions']['compute']
    assert compute['processor'] == {'num_cpus': 128, 'num_cpus_per_core': 1, 'num_sockets': 2,
                                    'num_cpus_per_socket': 64,
                                    'topology': {'numa_nodes': EIGHT_NUMA_BLOCKS}}
    # MVAPICH2's way onto a port is not in the registry: left to fill in
    assert compute['transport_env'] == {
        'openmpi': {'OMPI_MCA_pml': 'ucx', 'UCX_NET_DEVICES': 'mlx5_0:1'},
        'mpich': {'UCX_NET_DEVICES': 'mlx5_0:1'}}
    assert 'FILL IN: how to pin mvapich2 to it (not known here).' in comments(text)
    assert "InfiniBand 4X 50.0 Gbps port mlx5_0:1, on cn001 (its nodes' feature 'ib' is " \
        "named after it)" in comments(text)
    # its probe failed: no link pinned, the reason in the file
    debug = cluster['partitions']['debug']
    assert 'transport_env' not in debug and debug['nodes'] == 2
    assert 'Unable to allocate resources' in text
    stacks = cluster['stacks']
    assert stacks['openmpi']['modules'] == ['openmpi/5.0.3']        # the default
    assert stacks['openmpi']['descr'] == 'Open MPI 5.0.3 (module openmpi/5.0.3)'
    assert 'Also there: openmpi/4.1.5, mpi/openmpi-x86_64.' in comments(text)
    assert stacks['mpich']['modules'] == ['mpich/4.1.2'] and stacks['mpich']['pmi'] == 'pmi2'
    mv2 = f'{tmp_path}/spack/mvapich2-2.3.7-k2bdfux'
    assert stacks['mvapich2'] == {
        'descr': f'MVAPICH2 2.3.7 (spack mvapich2@2.3.7 {mv2})', 'cc': f'{mv2}/bin/mpicc',
        'launch': 'own', 'launcher': 'mpiexec', 'env': {'PATH': f'{mv2}/bin:$PATH'}}
    fill = fill_ins(out)
    assert fill == ['partitions.compute.processor', 'partitions.compute.transport_env',
                    'partitions.compute.transport_env', 'partitions.debug.processor',
                    'partitions.debug.transport_env'], out
    assert 'their nodes differ' in text or 'its nodes differ' in text
    assert 'note: left out partition(s) not UP: old' in out
    slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)
    assert_ruff_clean(path)


def test_an_open_mpi_stack_gets_the_sysconfdir_its_ompi_info_says(tmp_path, test_cluster_runner,
                                                                   capsys):
    runner, environ = test_cluster_runner
    code, text, path, cluster = generate(tmp_path, runner, environ)
    assert code == 0, capsys.readouterr()
    # asked of the module's own ompi_info (its module loaded)
    assert [str(tmp_path / 'bin' / 'openmpi' / 'ompi_info'), '--path', 'sysconfdir'] in \
        runner.calls
    stacks = cluster['stacks']
    assert stacks['openmpi']['sysconfdir'] == '/etc/openmpi'
    assert 'sysconfdir' not in stacks['mpich']       # Hydra: nothing to declare
    assert 'What `ompi_info --path sysconfdir` says: HARNESS_MPI_ENV=clean runs read only ' \
        'the MCA parameter files there' in comments(text)
    _, envs = slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path,
                                           mpi_env='clean')
    ompi = next(e for e in envs if e['name'] == 'openmpi')
    assert ['OMPI_MCA_mca_base_param_files', '/etc/openmpi/openmpi-mca-params.conf'] in \
        ompi['env_vars']


@pytest.mark.parametrize('answer', [None, '', 'Open MPI v5.0.3\n'],
                         ids=['fails', 'says-nothing', 'no-sysconfdir'])
def test_where_ompi_info_does_not_say_sysconfdir_is_left_to_fill_in(tmp_path, hpc_runner,
                                                                    capsys, answer):
    runner, environ = hpc_runner
    ompi = tmp_path / 'bin' / 'openmpi'
    del runner.tool_texts[ompi]['ompi_info --path sysconfdir']
    if answer is not None:
        runner.tool_texts[ompi]['ompi_info'] = answer
    code, text, path, cluster = generate(tmp_path, runner, environ)
    out = capsys.readouterr().out
    assert code == 0, out
    assert 'sysconfdir' not in cluster['stacks']['openmpi']
    assert 'stacks.openmpi.sysconfdir' in fill_ins(out)
    assert "            # 'sysconfdir': '/FILL_IN/etc',\n" in text
    assert 'FILL IN: what `ompi_info --path sysconfdir` says with its modules loaded (' \
        in comments(text)
    # the file still loads; its clean runs keep (and record) the user's files
    _, envs = slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path,
                                           mpi_env='clean', note=lambda msg: None)
    env = next(e for e in envs if e['name'] == 'openmpi')
    assert not any(k.endswith('_mca_base_param_files') for k, _ in env['env_vars'])
    assert_ruff_clean(path)


def test_nothing_found_but_slurm_gives_placeholders_that_still_load(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setattr(sg, 'this_host', lambda: 'login1')
    monkeypatch.setattr(sg, 'KNOWN_PREFIXES', ())
    runner = FakeCluster({('sinfo',): ok(data('testcluster_sinfo.txt'))}, {}, {})
    code, text, path, cluster = generate(tmp_path, runner, {'PATH': str(tmp_path)},
                                         '--name', 'mini', '--no-srun')
    out = capsys.readouterr().out
    assert code == 0, out
    assert cluster['name'] == 'mini' and cluster['modules_system'] == 'nomod'
    assert set(cluster['partitions']) == {'fast', 'slow'}
    # node sizes from sinfo; no probe: NUMA and link to fill in
    assert cluster['partitions']['fast']['processor']['num_cpus'] == 2
    assert 'not asked (--no-srun)' in text
    assert {s['modules'][0] for s in cluster['stacks'].values()} == {
        'FILL_IN/openmpi', 'FILL_IN/mpich', 'FILL_IN/mvapich2'}
    assert 'partitions from sinfo' in out and 'stacks.openmpi: no MPI stack was found' in out
    assert not [c for c in runner.calls if c[0] == 'srun' and c[1] != '--mpi=list']
    slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)


@pytest.mark.parametrize('answers, message', [
    ({}, 'no Slurm here: scontrol: scontrol not found; sinfo: sinfo not found'),
    ({('scontrol',): ok(garbage()), ('sinfo',): ok(garbage())}, 'Slurm shows no partition'),
    ({('scontrol', '-o', 'show', 'partition'): ok(data('hpc_scontrol_partition.txt'))},
     'Slurm gives no ClusterName: name the system with --name NAME'),
])
def test_what_it_cannot_work_with_is_one_clear_error(answers, message, tmp_path, capsys,
                                                     monkeypatch):
    monkeypatch.setattr(sg, 'KNOWN_PREFIXES', ())
    code = sg.main(['--output', str(tmp_path / 's.py'), '--no-srun'],
                   runner=FakeCluster(answers, {}, {}), environ={'PATH': str(tmp_path)})
    err = capsys.readouterr().err
    assert code == 2 and f'harness site: error: {message}' in err, err
    assert not (tmp_path / 's.py').exists()


def test_unknown_partitions_and_bad_options_are_refused(tmp_path, capsys, test_cluster_runner):
    runner, environ = test_cluster_runner
    code = sg.main(['--output', str(tmp_path / 's.py'), '--partitions', 'fast,gpu'],
                   runner=runner, environ=environ)
    assert code == 2
    assert "--partitions: no Slurm partition gpu (Slurm has: fast, slow)" in \
        capsys.readouterr().err
    for argv, message in ((['--name', 'bad name'], 'a ReFrame system name'),
                          (['--output', str(tmp_path / 'no' / 'x.py')], 'no folder'),
                          (['--name', 'x\n'], 'a ReFrame system name'),
                          (['--nodes', '0'], '--nodes must be at least 1'),
                          (['--srun-timeout', '0'], '--srun-timeout must be a number of seconds'),
                          (['--srun-timeout', '-1'], '--srun-timeout must be'),
                          (['--srun-timeout', 'inf'], '--srun-timeout must be'),
                          (['--srun-timeout', 'nan'], '--srun-timeout must be'),
                          (['--srun-timeout', '1e300'], 'at most 3600, got 1e+300'),
                          (['--srun-timeout', '3600.5'], '--srun-timeout must be'),
                          (['--access=--account=x\0'], 'an sbatch option'),
                          (['--access', 'account=x'], 'an sbatch option'),
                          (['--dry-run', '--force'], 'not allowed with')):
        with pytest.raises(SystemExit) as exc:
            sg.main(argv, runner=runner, environ=environ)
        assert exc.value.code == 2
        assert message in capsys.readouterr().err, argv


def test_an_existing_file_is_never_replaced_unless_told(tmp_path, test_cluster_runner, capsys):
    runner, environ = test_cluster_runner
    path = tmp_path / 'site_x.py'
    path.write_text('CLUSTER = {}  # the centre\'s own\n')
    args = ['--output', str(path)]
    assert sg.main(args, runner=runner, environ=environ) == 1
    err = capsys.readouterr().err
    assert f'{path} exists: not replaced' in err and '--force' in err
    assert path.read_text() == 'CLUSTER = {}  # the centre\'s own\n'
    # --force: the next numbered file beside it, never the file itself
    for n in (1, 2):
        assert sg.main([*args, '--force'], runner=runner, environ=environ) == 0
        assert f'wrote {path}.{n} (beside the existing site_x.py' in capsys.readouterr().out
        assert 'CLUSTER = {' in (tmp_path / f'site_x.py.{n}').read_text()
    assert path.read_text() == 'CLUSTER = {}  # the centre\'s own\n'
    # --dry-run: the file on stdout, nothing written
    assert sg.main([*args, '--dry-run'], runner=runner, environ=environ) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith('"""The harness on Slurm cluster') and 'dry run' in cap.err
    compile(cap.out, 'dry-run', 'exec')
    assert sorted(p.name for p in tmp_path.glob('site_x*')) == [
        'site_x.py', 'site_x.py.1', 'site_x.py.2']
    # --overwrite: replaced
    assert sg.main([*args, '--overwrite'], runner=runner, environ=environ) == 0
    assert path.read_text().startswith('"""The harness on Slurm cluster')
    assert not list(tmp_path.glob('.*'))        # no temporary file left


def test_the_generator_is_not_loaded_as_a_site_file(monkeypatch):
    # settings.py loads every config/site_*.py as a cluster
    monkeypatch.delenv('HARNESS_CLUSTERS', raising=False)
    assert os.path.abspath(sg.__file__) not in map(os.path.abspath, slurm_systems._site_files())


def test_the_default_file_is_config_site_name(tmp_path, test_cluster_runner, monkeypatch, capsys):
    runner, environ = test_cluster_runner
    monkeypatch.setattr(sg, '_HERE', str(tmp_path))
    assert sg.main(['--name', 'my-hpc'], runner=runner, environ=environ) == 0
    assert (tmp_path / 'site_my-hpc.py').exists()
    assert capsys.readouterr().out.rstrip().endswith(f'wrote {tmp_path}/site_my-hpc.py')


# ---- what real clusters print that the first version misread -------------------------

#: ``ibv_devinfo`` of an AWS EFA device (rdma-core 46): its link layer is Unspecified.
EFA_IBV_DEVINFO = '''hca_id:\trdmap16s27
\ttransport:\t\t\tunspecified (4)
\tfw_ver:\t\t\t\t0.0.0.0
\tnode_guid:\t\t\t0000:0000:0000:0000
\tsys_image_guid:\t\t\t0000:0000:0000:0000
\tvendor_id:\t\t\t0x1d0f
\tvendor_part_id:\t\t\t61344
\thw_ver:\t\t\t\t0xEFA0
\tphys_port_cnt:\t\t\t1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tport_lmc:\t\t0x01
\t\t\tlink_layer:\t\tUnspecified
'''
#: ``fi_info`` on that node: libfabric's efa provider.
EFA_FI_INFO = '''provider: efa
    fabric: efa
    domain: rdmap16s27-rdm
    version: 120.10
    type: FI_EP_RDM
    protocol: FI_PROTO_EFA
provider: shm
    fabric: shm
    domain: shm
    version: 200.0
    type: FI_EP_RDM
    protocol: FI_PROTO_SHM
'''


def lscpu_of(sockets: int, cores: int, threads: int, numa: int) -> str:
    """``lscpu -p=CPU,CORE,SOCKET,NODE`` as Linux numbers CPUs: every core's first
    thread, then every core's second (CPU N + cores is CPU N's sibling)."""
    total = sockets * cores
    rows = [f'{t * total + c},{c},{c // cores},{c // (total // numa)}'
            for t in range(threads) for c in range(total)]
    return '\n'.join(['# CPU,Core,Socket,Node', *rows]) + '\n'


def with_lscpu(probe: str, lscpu: str) -> str:
    """A recorded node probe with its lscpu section replaced."""
    return re.sub(r'(?s)@@lscpu\n.*?\n(?=@@)', lambda _: f'@@lscpu\n{lscpu}', probe)


def hpc_variant(tmp_path: Path, hpc_runner: tuple[FakeCluster, dict[str, str]], *argv: str,
                nodes: str = '', config: str = '', lscpu: str = '') -> tuple[str, dict]:
    """The InfiniBand cluster with its nodes, Slurm configuration or compute
    node's lscpu as given: the file and its CLUSTER (the file is replaced)."""
    runner, environ = hpc_runner
    if nodes:
        runner.answers[('scontrol', '-o', 'show', 'node')] = ok(nodes)
    if config:
        runner.answers[('scontrol', 'show', 'config')] = ok(config)
    if lscpu:
        runner.answers[('srun', '--partition=compute')] = ok(
            with_lscpu(data('hpc_probe_ib.txt'), lscpu))
    code, text, path, cluster = generate(tmp_path, runner, environ, '--overwrite',
                                         '--access=--account=proj1', *argv)
    assert code == 0
    slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)
    return text, cluster


def hpc_processor(tmp_path: Path, hpc_runner: tuple[FakeCluster, dict[str, str]], *argv: str,
                  **variant: str) -> tuple[str, dict]:
    """hpc_variant's file and the processor of its compute partition."""
    text, cluster = hpc_variant(tmp_path, hpc_runner, *argv, **variant)
    return text, cluster['partitions']['compute']['processor']


def numa_node_as_socket() -> tuple[str, str]:
    """Slurm's configuration with numa_node_as_socket and the InfiniBand cluster's
    nodes as Slurm then shows them: 8 sockets (the NUMA domains) of 16 cores."""
    conf = data('hpc_scontrol_config_excerpt.txt').replace(
        'SlurmdParameters        = (null)', 'SlurmdParameters        = numa_node_as_socket')
    nodes = data('hpc_scontrol_node.txt').replace('CoresPerSocket=64', 'CoresPerSocket=16').replace(
        'Sockets=2 Boards=1', 'Sockets=8 Boards=1')
    return conf, nodes


def test_no_accounting_as_newer_slurm_prints_it_is_polled_with_squeue(tmp_path, hpc_runner):
    # Slurm 23.02.5 and later print (null) where accounting_storage/none was
    conf = data('hpc_scontrol_config_excerpt.txt')
    for storage, scheduler in (('accounting_storage/slurmdbd', 'slurm'),
                               ('accounting_storage/none', 'squeue'), ('(null)', 'squeue')):
        text, cluster = hpc_variant(tmp_path, hpc_runner, '--no-srun', config=conf.replace(
            'accounting_storage/slurmdbd', storage))
        assert cluster['scheduler'] == scheduler, storage
    assert 'No accounting database (AccountingStorageType=(null)): jobs are polled with ' \
        'squeue' in comments(text)
    for storage, keeps in (('(null)', False), ('', False), ('accounting_storage/none', False),
                           ('accounting_storage/slurmdbd', True)):
        assert sg.keeps_accounting(storage) is keeps, storage


def test_slurm_cpus_that_are_cores_give_one_cpu_per_core(tmp_path, hpc_runner):
    from reframe.core.systems import ProcessorInfo
    # Slurm schedules whole cores: CPUTot=128 = 2 sockets x 64 cores, 2 threads each
    # (lscpu on the node sees the 256 hardware threads)
    nodes = data('hpc_scontrol_node.txt').replace('ThreadsPerCore=1', 'ThreadsPerCore=2')
    text, proc = hpc_processor(tmp_path, hpc_runner, nodes=nodes, lscpu=lscpu_of(2, 64, 2, 8))
    assert {k: v for k, v in proc.items() if k != 'topology'} == {
        'num_cpus': 128, 'num_cpus_per_core': 1, 'num_sockets': 2, 'num_cpus_per_socket': 64}
    assert ProcessorInfo(proc).num_cores == 128
    assert 'Slurm counts cores as CPUs here (128 = 2 socket(s) x 64 cores, the 2 threads per ' \
        'core not counted): one CPU per core.' in comments(text)
    # where Slurm counts the threads as CPUs, a CPU is a thread
    nodes = nodes.replace('CPUTot=128', 'CPUTot=256').replace('CPUEfctv=128', 'CPUEfctv=256')
    text, proc = hpc_processor(tmp_path, hpc_runner, nodes=nodes, lscpu=lscpu_of(2, 64, 2, 8))
    assert (proc['num_cpus'], proc['num_cpus_per_core'], proc['num_sockets']) == (256, 2, 2)
    assert ProcessorInfo(proc).num_cores == 128 and len(proc['topology']['numa_nodes']) == 8
    assert 'Slurm counts cores as CPUs' not in comments(text)


def test_the_sockets_are_the_nodes_not_slurms_boards_or_numa_domains(tmp_path, hpc_runner):
    plain = data('hpc_scontrol_node.txt')
    # scontrol's Sockets is the node's total already: Boards=2 does not double it
    _, proc = hpc_processor(tmp_path, hpc_runner, '--no-srun',
                            nodes=plain.replace('Sockets=2 Boards=1', 'Sockets=2 Boards=2'))
    assert (proc['num_sockets'], proc['num_cpus_per_socket']) == (2, 64)
    assert sg.parse_nodes(plain.replace('Boards=1', 'Boards=2'))[0].size.sockets == 2
    # numa_node_as_socket: Slurm's 8 sockets are the NUMA domains; lscpu says 2
    conf, numa = numa_node_as_socket()
    text, proc = hpc_processor(tmp_path, hpc_runner, nodes=numa, config=conf)
    assert (proc['num_sockets'], proc['num_cpus_per_socket']) == (2, 64)
    assert proc['topology']['numa_nodes'] == EIGHT_NUMA_BLOCKS
    assert 'Sockets from lscpu on cn001 (2; Slurm says 8).' in comments(text)
    # a bare "NodeName=... CPUs=128" line: Slurm takes every CPU for a socket
    bare = plain.replace('CoresPerSocket=64', 'CoresPerSocket=1').replace(
        'Sockets=2 Boards=1', 'Sockets=128 Boards=1')
    text, proc = hpc_processor(tmp_path, hpc_runner, nodes=bare)
    assert (proc['num_cpus'], proc['num_sockets'], proc['num_cpus_per_socket']) == (128, 2, 64)
    # lscpu saw other CPUs than Slurm's (not the node's), or did not run: not 128
    # sockets of one core (the per-socket and per-NUMA layouts would be pure MPI's)
    # but one, and a FILL IN
    for args, kw in (((), {'lscpu': lscpu_of(4, 16, 1, 4)}), (('--no-srun',), {})):
        text, proc = hpc_processor(tmp_path, hpc_runner, *args, nodes=bare, **kw)
        assert (proc['num_sockets'], proc['num_cpus_per_socket']) == (1, 128)
        assert 'Sockets from lscpu' not in comments(text)
        assert ('FILL IN: the sockets (Slurm says 128 socket(s) of one core: a node line '
                'with CPUs= alone; lscpu did not say)') in ' '.join(comments(text).split())


def test_slurms_default_memory_of_1_mib_is_no_memory(tmp_path, hpc_runner):
    """A node line without RealMemory shows Slurm's default, RealMemory=1: it was
    written as mem_per_node '1MiB', and the plan then ran nothing (every run over 80%
    of a node of 1 MiB). Now no memory (the plan assumes 2 GiB per core) and a FILL IN."""
    plain = data('hpc_scontrol_node.txt')
    text, cluster = hpc_variant(tmp_path, hpc_runner, '--no-srun',
                                nodes=plain.replace('RealMemory=250000', 'RealMemory=1'))
    assert 'extras' not in cluster['partitions']['compute']
    assert "FILL IN: the node's memory (Slurm gives no RealMemory, or its default of 1 MiB)" \
        in comments(text)
    assert sg.parse_sinfo('batch*|up|4|128|2|64|1|1|cn[001-004]')[0].size.memory_mib == 0


def test_numa_domains_as_sockets_are_blocks_only_with_one_thread_per_core(tmp_path, hpc_runner):
    conf, one = numa_node_as_socket()
    # one thread per core: each domain's CPUs are a block
    text, proc = hpc_processor(tmp_path, hpc_runner, '--no-srun', nodes=one, config=conf)
    assert proc['topology']['numa_nodes'] == EIGHT_NUMA_BLOCKS
    assert 'their CPUs taken as numbered in blocks' in comments(text)
    # two: Linux numbers CPU N's sibling N + 128, so no block is a domain: left to fill in
    two = one.replace('CoresPerSocket=16', 'CoresPerSocket=8').replace(
        'ThreadsPerCore=1', 'ThreadsPerCore=2')
    text, proc = hpc_processor(tmp_path, hpc_runner, '--no-srun', nodes=two, config=conf)
    assert 'topology' not in proc and proc['num_cpus_per_core'] == 2
    assert 'FILL IN: the NUMA domains (lscpu on a node: not asked (--no-srun); Slurm counts ' \
        'them as sockets (numa_node_as_socket), but with 2 threads per core their CPUs are ' \
        'not numbered in blocks)' in comments(text)
    # the node's lscpu, where it matches, gives the real masks
    _, proc = hpc_processor(tmp_path, hpc_runner, nodes=two, config=conf,
                            lscpu=lscpu_of(2, 32, 2, 8))
    masks = proc['topology']['numa_nodes']
    assert masks[0] == hex(0xff | 0xff << 64)


def test_an_efa_device_is_libfabrics_not_an_infiniband_port():
    tcp = {'ip': '2: ens5    inet 172.31.20.5/20 brd 172.31.31.255 scope global dynamic ens5\\'
                 '       valid_lft 3000sec\n',
           'net': 'ens5 1 up - phys\nlo 772 unknown - virt\n', 'fi_info': EFA_FI_INFO}
    # rdma-core 46 (link layer Unspecified); older rdma-core (InfiniBand, efa_0); its
    # vendor alone
    older = EFA_IBV_DEVINFO.replace('Unspecified', 'InfiniBand').replace('rdmap16s27', 'efa_0')
    for ibv in (EFA_IBV_DEVINFO, older, older.replace('efa_0', 'dev0')):
        links = sg.node_links({**tcp, 'ibv_devinfo': ibv})
        assert [(x.kind, x.device) for x in links] == [('ofi', 'efa'), ('tcp', 'ens5')], ibv
        chosen, _ = sg.choose_links('compute', [], links, '172.31.20.5')
        assert [x.env(STACK['openmpi']) for x in chosen] == [
            {'OMPI_MCA_pml': 'cm', 'OMPI_MCA_mtl': 'ofi', 'FI_PROVIDER': 'efa'}]
    port = sg.parse_ibv_devinfo(older)[0]
    assert (port.vendor_id, port.efa) == ('0x1d0f', True)
    # Mellanox's ports stay InfiniBand and RoCE
    ports = sg.parse_ibv_devinfo(data('hpc_ibv_devinfo_ib.txt'))
    assert [(p.vendor_id, p.efa) for p in ports] == [('0x02c9', False)] * 2


def test_sinfo_alone_gives_one_partition_of_mixed_nodes_sized_by_node_count(tmp_path,
                                                                            monkeypatch, capsys):
    monkeypatch.setattr(sg, 'this_host', lambda: 'login1')
    # no scontrol show partition/node (denied): sinfo's rows, one per node size
    sinfo = ('standard|up|2|128|2|64|1|256000|nid[020-021]\n'
             'standard|up|3|256|2|64|2|512000|nid[001-002,010]\n'
             'debug|up|2|256|2|64|2|512000|nid[001-002]\n')
    denied = sg.CmdResult([], 1, '', 'slurm_load_partitions: Access denied\n')
    runner = FakeCluster({('scontrol', 'show', 'config'): ok(data(
        'hpc_scontrol_config_excerpt.txt')), ('scontrol', '-o'): denied, ('sinfo',): ok(sinfo)},
        {}, {})
    code, text, path, cluster = generate(tmp_path, runner, {'PATH': str(tmp_path)}, '--no-srun')
    assert code == 0, capsys.readouterr()
    assert re.findall(r"^        '(\w+)': \{", text, re.M)[:3] == ['standard', 'debug',
                                                                 'openmpi']
    standard = cluster['partitions']['standard']
    assert standard['processor']['num_cpus'] == 256     # 3 nodes of 256 CPUs, 2 of 128
    assert standard['extras'] == {'mem_per_node': '512000MiB'}
    assert 'Slurm partition standard (5 node(s): nid[020-021],nid[001-002,010]).' in \
        comments(text)
    assert 'FILL IN: its nodes differ (2 sizes): the most common is written' in comments(text)
    assert [p.name for p in sg.partitions_of_sinfo(sg.parse_sinfo(sinfo))] == ['standard',
                                                                               'debug']
    # the most nodes, not the most rows
    det = sg.Detection(host='x')
    det.sinfo = sg.parse_sinfo('big|up|1|128|2|64|1|256000|nid001\n'
                               'big|up|40|256|2|64|2|512000|nid[002-041]\n')
    size, note = sg._node_size(det, sg.SlurmPartition('big'), [])
    assert size is not None and size.cpus == 256 and 'differ' in note
    slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)


def test_module_paths_with_spaces_reach_the_job_script_quoted():
    det = sg.Detection(host='login1', config={'ClusterName': 'c1'})
    det.partitions = [sg.SlurmPartition('p', 'n[1-2]', 2)]
    det.module_tool = sg.ModuleTool('lmod', '/opt/lmod 8/libexec/lmod', '8.7',
                                    '/opt/lmod 8/init/bash')
    det.stacks['openmpi'] = sg.FoundStack('openmpi', 'module', 'openmpi/5.0.3', '5.0.3', 'mpicc',
                                          ['openmpi/5.0.3'], '/opt/site modules/mpi')
    prepare = sg.build(det, sg.parse_args(['--no-srun'])).plain()['prepare_cmds']
    assert prepare == [". '/opt/lmod 8/init/bash'", "module use '/opt/site modules/mpi'"]
    assert shlex.split(prepare[1]) == ['module', 'use', '/opt/site modules/mpi']


def test_a_bad_harness_modules_system_is_one_clear_error(tmp_path, monkeypatch, capsys,
                                                         test_cluster_runner):
    runner, environ = test_cluster_runner
    monkeypatch.setenv('HARNESS_MODULES_SYSTEM', 'lmodd')
    assert sg.main(['--output', str(tmp_path / 's.py')], runner=runner, environ=environ) == 2
    err = capsys.readouterr().err
    known = ', '.join(slurm_systems.modules_systems())
    assert err == (f"harness site: error: HARNESS_MODULES_SYSTEM='lmodd': not a modules system "
                   f"ReFrame knows; known: {known}\n")
    assert not runner.calls and not (tmp_path / 's.py').exists()
    monkeypatch.setenv('HARNESS_MODULES_SYSTEM', 'nomod')
    assert sg.main(['--output', str(tmp_path / 's.py')], runner=runner, environ=environ) == 0
    # the environment given to main (the one detected), not only this process's
    monkeypatch.delenv('HARNESS_MODULES_SYSTEM')
    capsys.readouterr()
    calls = len(runner.calls)
    assert sg.main(['--output', str(tmp_path / 't.py')], runner=runner,
                   environ={**environ, 'HARNESS_MODULES_SYSTEM': 'bogus'}) == 2
    assert capsys.readouterr().err == (
        f"harness site: error: HARNESS_MODULES_SYSTEM='bogus': not a modules system "
        f"ReFrame knows; known: {known}\n")
    assert len(runner.calls) == calls and not (tmp_path / 't.py').exists()


# ---- for real: the test cluster --------------------------------------------------------

@pytest.mark.integration
def test_harness_site_on_the_test_cluster_runs_the_kernels_as_written(site_cluster, stacks,
                                                                     tmp_path):
    env = mn.client_env(site_cluster)
    env.pop('HARNESS_STACKS', None)
    site = tmp_path / 'site_test.py'
    proc = subprocess.run([str(REPO / 'harness'), 'site', '--output', str(site)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, mn.explain(proc)
    assert f'wrote {site}' in proc.stdout
    # The file as it is: what the harness itself says of this cluster.
    namespace: dict = {}
    exec(compile(site.read_text(), str(site), 'exec'), namespace)
    cluster = namespace['CLUSTER']
    rec = mn.record(site_cluster)
    spec = slurm_systems.test_cluster_spec(rec)
    name = rec['HUB_NAMESPACE'].rsplit('-', 1)[0]       # ClusterName hc<id>
    assert cluster['name'] == name
    assert set(cluster['partitions']) == {'fast', 'slow'}
    ours = [s for s in stacks if s in mn.PMI]
    assert set(cluster['stacks']) == set(ours) | (
        {'mvapich2'} if os.environ.get('HARNESS_MVAPICH2_PREFIX') else set())
    for part, pspec in cluster['partitions'].items():
        assert pspec['transport_env'] == {k: v for k, v in spec['partitions'][part][
            'transport_env'].items() if k in cluster['stacks']}, part
        assert pspec['processor']['num_cpus'] == int(rec['CPUS_PER_NODE'])
    for stack in ours:
        assert cluster['stacks'][stack]['modules'] == [stack]
        assert cluster['stacks'][stack]['pmi'] == mn.PMI[stack]
    slurm_systems.cluster_config(cluster, str(tmp_path / 'v'), origin=str(site))

    # The kernels on 2 nodes, every stack on every link, with the file as written.
    var = tmp_path / 'var'
    run = run_reframe(var, '--system', name, '-n', 'StreamCheck%layout=mpi_2x1',
                      '-n', 'RingCheck%layout=mpi_2x1', '-S', 'RingCheck.iters_scale=0.05',
                      '-n', 'SpmvCheck%layout=mpi_2x1%problem=16',
                      '-n', 'MdCheck%layout=mpi_2x1%problem=6',
                      '--max-retries', '1', '-r',
                      env={**env, 'HARNESS_CLUSTERS': str(site)}, timeout=900)
    assert run.returncode == 0, mn.explain(run)
    for stack in ours:
        for part in ('fast', 'slow'):
            iface = rec['SLOW_IFACE'] if part == 'slow' else rec['FAST_IFACE']
            for check in ('StreamCheck', 'RingCheck', 'SpmvCheck', 'MdCheck'):
                assert re.search(rf'OK \].*{check} %layout=mpi_2x1 .*@{name}:{part}\+{stack}\b',
                                 run.stdout), (check, part, stack)
                # each case's last attempt (a failed one is retried in <case>_retry1)
                jobs = last_attempts(var / name / 'output' / name / part / stack, f'{check}_*')
                assert jobs, (check, part, stack)
                for job in jobs:
                    script = (job / 'rfm_job.sh').read_text()
                    assert f'#SBATCH --partition={part}' in script
                    assert f'module load {stack}' in script
                    pin = 'OMPI_MCA_btl_tcp_if_include' if stack == 'openmpi' else \
                        'UCX_NET_DEVICES'
                    assert f'export {pin}={iface}' in script, script
                    results = [json.loads(ln[len('RESULT '):]) for ln in
                               (job / 'rfm_job.out').read_text().splitlines()
                               if ln.startswith('RESULT ')]
                    assert results, job
                    for res in results:
                        assert sorted(set(res['hosts'])) == ['node1', 'node2'], res
                        assert res['mpi_library'].startswith(mn.LIBRARY[stack]), res


def test_modules_systems_are_those_reframe_drives(tmp_path):
    # Environment Modules 4+ is ReFrame 4.10's 'envmod' ('tmod4' is deprecated);
    # the 3.x C modulecmd ('tmod') it refuses: no modules tool, stacks from PATH.
    from slurm_systems import modules_systems
    tool = stub_stack(tmp_path / 'libexec', ['modulecmd.tcl']) / 'modulecmd.tcl'
    environ = {'MODULES_CMD': str(tool), 'PATH': str(tmp_path / 'nothing')}
    for says, kind in (('Modules Release 5.3.1 (2023-06-27)', 'envmod'),
                       ('Modules Release 4.5.2', 'envmod'), ('VERSION=3.2.10', None)):
        found = sg.find_module_tool(environ, FakeCluster({(str(tool), 'bash', '--version'):
                                                          ok(err=says + '\n')}, {}, {}))
        assert (found.kind if found else None) == kind
        assert kind is None or kind in modules_systems()


def test_the_written_partitions_ask_for_whole_nodes(tmp_path, hpc_runner, capsys):
    runner, environ = hpc_runner
    code, text, path, cluster = generate(tmp_path, runner, environ, '--access=--account=proj1')
    assert code == 0, capsys.readouterr().out
    for name, part in cluster['partitions'].items():
        assert part['access'] == [f'--partition={name}', '--exclusive'], name
    assert comments(text).count('Whole nodes (--exclusive): runs that hold a few CPUs per '
                                'node (point-to-point, small collectives) must not share '
                                'them.') == len(cluster['partitions'])
    system, _ = slurm_systems.cluster_config(cluster, str(tmp_path / 'var'), origin=path)
    assert all(p['access'] == ['--account=proj1', f'--partition={p["name"]}', '--exclusive']
               for p in system['partitions'])


def test_a_spaced_install_prefix_reaches_the_job_scripts_path_whole():
    det = sg.Detection(host='login1', config={'ClusterName': 'c1'})
    det.partitions = [sg.SlurmPartition('p', 'n[1-2]', 2)]
    prefix = '/opt/my mpi/mvapich2 2.3.7'
    det.stacks['mvapich2'] = sg.FoundStack('mvapich2', 'prefix', prefix, '2.3.7',
                                           f'{prefix}/bin/mpicc',
                                           env={'PATH': f'{prefix}/bin:$PATH'})
    cluster = sg.build(det, sg.parse_args(['--no-srun'])).plain()
    assert cluster['stacks']['mvapich2']['env'] == {'PATH': f'{prefix}/bin:$PATH'}
    _, envs = slurm_systems.cluster_config(cluster, '/tmp/unused', origin='site_c1.py')
    for env in envs:
        path = dict(env['env_vars'])['PATH']
        proc = subprocess.run(['/bin/bash', '-c', f'export PATH={path}\nprintf %s "$PATH"'],
                              env={'PATH': '/usr/bin:/bin'}, capture_output=True, text=True,
                              timeout=30)
        assert proc.stdout == f'{prefix}/bin:/usr/bin:/bin', env['target_systems']


# ---- decisions pinned one by one (the mutation audit of config/sitegen.py) --------------

def test_a_named_partition_is_the_only_one_written(tmp_path, test_cluster_runner, capsys):
    runner, environ = test_cluster_runner
    code, _, _, cluster = generate(tmp_path, runner, environ, '--partitions', 'slow')
    assert code == 0, capsys.readouterr()
    assert set(cluster['partitions']) == {'slow'}


def test_a_partition_that_is_not_up_is_left_out():
    # Slurm's states: UP, DOWN, DRAIN (no new jobs) and INACTIVE (none at all)
    text = ''.join(f'PartitionName={s.lower()} Nodes=n1 TotalNodes=1 State={s}\n'
                   for s in ('UP', 'DOWN', 'DRAIN', 'INACTIVE'))
    assert [(p.name, p.up) for p in sg.parse_partitions(text)] == [
        ('up', True), ('down', False), ('drain', False), ('inactive', False)]


def test_scontrols_partitions_win_over_sinfos(tmp_path, hpc_runner):
    # sinfo answers too: the partitions (and their MaxTime) are still scontrol's
    runner, _ = hpc_runner
    runner.answers[('sinfo',)] = ok('compute|up|3|128|2|64|1|250000|cn[001-003]\n'
                                    'debug|up|2|128|2|64|1|250000|cn[001-002]\n')
    _, cluster = hpc_variant(tmp_path, hpc_runner, '--no-srun')
    assert cluster['time_limit'] == '20m'


def test_a_partition_of_fewer_nodes_than_asked_runs_on_the_ones_it_has():
    det = sg.Detection(host='login1', config={'ClusterName': 'c1'})
    det.partitions = [sg.SlurmPartition('small', 'n1', 1)]
    cluster = sg.build(det, sg.parse_args(['--no-srun', '--nodes', '2'])).plain()
    assert cluster['partitions']['small']['nodes'] == 1


def test_nodes_of_one_size_and_unequal_memory_are_written_with_the_least():
    # the plan sizes the runs for the memory: every node of the partition must have it
    big, small = (sg.NodeSize(128, 2, 64, 1, mem, 128) for mem in (512000, 256000))
    nodes = [sg.SlurmNode(f'n{i}', f'n{i}', '', s, [], ['p'])
             for i, s in enumerate((big, small, big))]
    size, note = sg._node_size(sg.Detection(host='x'), sg.SlurmPartition('p'), nodes)
    assert size is not None and size.memory_mib == 256000 and note == ''


def processor(size: sg.NodeSize, topo: sg.CpuTopology | None = None,
              config: dict[str, str] | None = None) -> tuple[dict, str]:
    """sg._processor of one node size: the processor and its notes as one line."""
    det = sg.Detection(host='login1', config=config or {})
    proc, notes = sg._processor(size, topo, det, 'cn001', 'not asked (--no-srun)')
    return proc, ' '.join(notes)


def test_cores_counted_as_cpus_give_one_cpu_per_core_with_cores_set_aside_or_from_sinfo():
    # CPUTot 128 = 2 x 64 cores (2 threads each), 2 of them set aside (CPUEfctv 126)
    proc, _ = processor(sg.NodeSize(126, 2, 64, 2, 0, 128))
    assert (proc['num_cpus'], proc['num_cpus_per_core']) == (126, 1)
    # sinfo alone (no CPUTot): its CPUs are the node's
    size = sg.parse_sinfo('p|up|2|128|2|64|2|256000|n[1-2]\n')[0].size
    assert size is not None
    assert processor(size)[0]['num_cpus_per_core'] == 1


def test_lscpus_sockets_count_on_a_node_with_cores_set_aside():
    # numa_node_as_socket: Slurm's 8 sockets; lscpu sees the node's 128 CPUs on 2
    proc, notes = processor(sg.NodeSize(126, 8, 16, 1, 0, 128), sg.CpuTopology(128, 128, 2, []))
    assert (proc['num_sockets'], proc['num_cpus_per_socket']) == (2, 63)
    assert 'Sockets from lscpu on cn001 (2; Slurm says 8).' in notes


def test_the_sockets_written_always_hold_every_cpu():
    # 127 CPUs (a core set aside) do not split over 2 sockets
    for size in (sg.NodeSize(127, 2, 64, 1, 0, 128), sg.NodeSize(126, 8, 16, 1, 0, 128)):
        proc, _ = processor(size)
        assert proc['num_sockets'] * proc['num_cpus_per_socket'] == proc['num_cpus'], size
    # NUMA domains as sockets that do not divide the CPUs: one domain of them all
    proc, _ = processor(sg.NodeSize(126, 8, 16, 1, 0, 128),
                        config={'SlurmdParameters': 'numa_node_as_socket'})
    assert proc['topology'] == {'numa_nodes': [hex((1 << 126) - 1)]}


def test_numa_masks_of_an_lscpu_that_saw_other_cpus_are_left_to_fill_in():
    proc, notes = processor(sg.NodeSize(128, 2, 64, 1, 0, 128),
                            sg.parse_lscpu(lscpu_of(4, 16, 1, 4)))
    assert 'topology' not in proc
    assert 'FILL IN: the NUMA domains (lscpu on cn001 saw 64 CPUs)' in notes


def test_a_partition_named_after_ethernet_takes_the_interface_slurm_reaches():
    ib = sg.Link('ib', 'mlx5_0:1', 'InfiniBand port mlx5_0:1')
    eth0, eth1 = (sg.Link('tcp', f'eth{i}', f'eth{i}', f'eth{i}', [f'10.{i}.0.1/24'])
                  for i in (0, 1))
    chosen, why = sg.choose_links('eth', [], [ib, eth0, eth1], '10.1.0.1')
    assert chosen == [eth1] and why == 'the partition is named after it'


def test_every_high_speed_link_of_a_node_gets_its_partition():
    ports = [sg.Link('ib', f'mlx5_{i}:1', f'InfiniBand port mlx5_{i}:1') for i in (0, 1)]
    eth = sg.Link('tcp', 'eno1', 'eno1', 'eno1', ['10.0.0.1/24'])
    chosen, _ = sg.choose_links('compute', [], [*ports, eth], '10.0.0.1')
    assert chosen == ports


def test_an_interface_that_is_down_is_no_link():
    sections = {'ip': '2: eth0    inet 10.0.0.1/24 brd 10.0.0.255 scope global eth0\n'
                      '3: eth1    inet 10.1.0.1/24 brd 10.1.0.255 scope global eth1\n',
                'net': 'eth0 1 up 10000 phys\neth1 1 down -1 phys\n'}
    assert [x.device for x in sg.node_links(sections)] == ['eth0']


def test_a_slurm_listing_only_pmix_versions_starts_open_mpi_with_srun():
    plugins = sg.parse_mpi_plugins('srun: MPI plugin types are...\nsrun: none\nsrun: pmix_v4\n')
    assert 'pmix' in plugins
    found = sg.FoundStack('openmpi', 'module', 'openmpi/5.0.3')
    assert sg._launch(STACK['openmpi'], found, plugins, '')[0] == 'srun'


def test_a_stack_slurm_cannot_start_uses_its_own_launcher_unless_debians():
    # Slurm offers pmix only: MPICH's pmi2 is not there
    module = sg.FoundStack('mpich', 'module', 'mpich/4.1.2')
    launch, note = sg._launch(STACK['mpich'], module, {'pmix'}, '')
    assert launch == 'own' and 'Slurm does not offer --mpi=pmi2' in note
    # Debian's MPICH: srun --mpi=pmi2 assumed, to fill in
    debian = sg.FoundStack('mpich', 'debian', 'mpicc.mpich + mpiexec.mpich')
    launch, note = sg._launch(STACK['mpich'], debian, {'pmix'}, '')
    assert launch == 'srun' and note.startswith('FILL IN: srun --mpi=pmi2 assumed')


def test_a_partitions_maxnodes_caps_the_nodes_per_run():
    # a job of more nodes than MaxNodes never starts (pending, PartitionNodeLimit)
    parts = sg.parse_partitions('PartitionName=debug Nodes=n[1-4] TotalNodes=4 MaxNodes=1 '
                                'State=UP\nPartitionName=big Nodes=n[1-4] TotalNodes=4 '
                                'MaxNodes=UNLIMITED State=UP\n')
    assert [(p.name, p.max_nodes) for p in parts] == [('debug', 1), ('big', 0)]
    det = sg.Detection(host='login1', config={'ClusterName': 'c1'}, partitions=parts)
    block = sg.build(det, sg.parse_args(['--no-srun', '--nodes', '2']))
    cluster = block.plain()
    assert {k: p['nodes'] for k, p in cluster['partitions'].items()} == {'debug': 1, 'big': 2}
    assert "The partition's MaxNodes is 1." in ' '.join(
        c for i in block.items for p in getattr(i.value, 'items', []) if p.key == 'debug'
        for n in p.value.items if n.key == 'nodes' for c in n.comment)


def test_a_partition_without_nodes_is_left_out(tmp_path, capsys):
    answers = {('scontrol', 'show', 'config'): ok('ClusterName = c1\n'),
               ('scontrol', '-o', 'show', 'partition'): ok(
                   'PartitionName=empty Nodes=(null) TotalNodes=0 State=UP\n'
                   'PartitionName=batch Nodes=n[1-2] TotalNodes=2 State=UP\n')}
    code, _, _, cluster = generate(tmp_path, FakeCluster(answers, {}, {}),
                                   {'PATH': str(tmp_path)}, '--no-srun')
    assert code == 0 and set(cluster['partitions']) == {'batch'}
    assert 'left out partition(s) without nodes: empty' in capsys.readouterr().out
    # named, it is written all the same
    code, _, _, cluster = generate(tmp_path, FakeCluster(answers, {}, {}),
                                   {'PATH': str(tmp_path)}, '--no-srun', '--overwrite',
                                   '--partitions', 'empty')
    assert code == 0 and set(cluster['partitions']) == {'empty'}


def test_partitions_whose_names_are_alike_in_reframe_are_each_written():
    # ReFrame's names have no dots: gpu.a100 is gpu_a100, as a partition of that name
    det = sg.Detection(host='login1', config={'ClusterName': 'c1'}, partitions=[
        sg.SlurmPartition('gpu.a100', 'g1', 1), sg.SlurmPartition('gpu_a100', 'g2', 1)])
    cluster = sg.build(det, sg.parse_args(['--no-srun'])).plain()
    assert {k: p['access'][0] for k, p in cluster['partitions'].items()} == {
        'gpu_a100': '--partition=gpu.a100', 'gpu_a100_2': '--partition=gpu_a100'}


def test_a_node_whose_hostname_is_its_full_name_is_still_reached_at_its_nodeaddr():
    # `hostname` on the node says node1.cluster.local, Slurm's NodeHostName is node1
    nodes = [n._replace(partitions=['batch'])
             for n in sg.parse_nodes(data('testcluster_scontrol_node.txt'))]
    for host in ('node1', 'node1.cluster.local'):
        det = sg.Detection(host='login1', config={'ClusterName': 'c1'}, nodes=nodes,
                           partitions=[sg.SlurmPartition('batch', 'node[1-2]', 2)])
        det.probes['node[1-2]'] = sg.probe_sections(
            data('testcluster_probe.txt').replace('@@host\nnode1\n', f'@@host\n{host}\n'))
        part = sg.build(det, sg.parse_args([])).plain()['partitions']['batch']
        assert part['descr'].startswith('TCP over virtual Ethernet fast0'), host
        assert part['transport_env']['mpich'] == STACK['mpich'].tcp_nodes('fast0')
