"""``./harness site``: a centre's Slurm cluster as ``config/site_<name>.py``, what
docs/pages/cluster.md lists detected on a login node.  Every command runs as an
argument list with a timeout; an existing file is never replaced unless asked to
(``--overwrite``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import glob
import itertools
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

_HERE = os.path.dirname(os.path.abspath(__file__))
# config/ (slurm_systems, cluster_template); checks/ and reports/ for a Python outside the venv.
for _folder in (_HERE, *(os.path.join(os.path.dirname(_HERE), d) for d in ('checks', 'reports'))):
    if _folder not in sys.path:
        sys.path.append(_folder)
import cluster_template  # noqa: E402
import slurm_systems  # noqa: E402
from harnesscore import paths  # noqa: E402
from harnesscore.knobs import split_list  # noqa: E402
from harnesscore.stacks import STACK, STACKS, Stack, sysconfdir_in  # noqa: E402
from hybridverdict import atomic  # noqa: E402

#: Width of the written file (ruff's line length).
WIDTH = 100
#: Seconds a command may take (Slurm's clients, module commands, tools).
TIMEOUT = 30.0
#: Seconds the probe of one node may take, queueing included.
SRUN_TIMEOUT = 180.0
#: The most seconds ``--srun-timeout`` takes (an hour; ``--no-srun`` skips the probes).
SRUN_TIMEOUT_MAX = 3600.0
#: What the file says where something must be filled in.
FILL_IN = 'FILL IN'
#: Names of ReFrame systems and partitions (its configuration schema).
NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_-]*$')
#: The format of ``sinfo -o`` the parser reads (partition, availability,
#: nodes, CPUs, sockets, cores per socket, threads per core, memory, node list).
SINFO_FORMAT = '%R|%a|%D|%c|%X|%Y|%Z|%m|%N'
#: Usual install prefixes of a stack ({stack}: its name), with bin/mpicc:
#: RHEL's MPI packages, /opt, Mellanox OFED's MPI builds.
KNOWN_PREFIXES = ('/usr/lib64/{stack}', '/opt/{stack}*', '/usr/mpi/*/{stack}-*')
#: Where Lmod's back end usually is, when the shell names none (LMOD_CMD).
LMOD_PATHS = ('/usr/share/lmod/lmod/libexec/lmod', '/opt/lmod/lmod/libexec/lmod')
#: What the node probe prints in place of a tool it does not find.
MISSING = '(not found)'

#: The node probe (a fixed script, run by ``srun ... sh -c``): sections
#: ``@@name`` with each tool's output.
PROBE_SCRIPT = r'''
t() { if command -v timeout >/dev/null 2>&1; then timeout 30 "$@"; else "$@"; fi; }
tool() { name=$1; shift; echo "@@$name"
         if command -v "$1" >/dev/null 2>&1; then t "$@" 2>&1; else echo '(not found)'; fi; }
echo '@@host'; hostname
tool lscpu lscpu -p=CPU,CORE,SOCKET,NODE
tool ip ip -o -4 addr show
echo '@@net'
for d in /sys/class/net/*; do
    [ -e "$d" ] || continue
    if [ -e "$d/device" ]; then p=phys; else p=virt; fi
    printf '%s %s %s %s %s\n' "${d##*/}" "$(cat "$d/type" 2>/dev/null || echo -)" \
        "$(cat "$d/operstate" 2>/dev/null || echo -)" "$(cat "$d/speed" 2>/dev/null || echo -)" "$p"
done
tool ucx_info ucx_info -d
tool ibv_devinfo ibv_devinfo
tool fi_info fi_info
echo '@@end'
'''

#: Loads one module in a child shell and prints the environment it makes
#: ($1: the module command's back end, $2: the module).  What the load itself
#: prints (a modulefile's ``puts stdout "echo ..."``) goes to stderr: before
#: ``env -0`` on stdout it was read as part of the first variable's name.
LOAD_SCRIPT = ('code=$("$1" bash load "$2") || exit 3; eval "$code" >&2 || exit 3; '
               'env -0')


# ---- running commands ------------------------------------------------------------

@dataclasses.dataclass
class CmdResult:
    """What one command did."""

    argv: list[str]
    rc: int | None = None       # None: not run, or killed at its timeout
    out: str = ''
    err: str = ''
    problem: str = ''           # '' or why it gave nothing: not found, timed out...

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.problem

    def why(self) -> str:
        """Why it failed, in a few words (its first line of stderr)."""
        if self.problem:
            return self.problem
        first = next((ln.strip() for ln in (self.err + self.out).splitlines() if ln.strip()), '')
        return f'exit status {self.rc}' + (f': {first[:160]}' if first else '')


Runner = Callable[[Sequence[str], float, Mapping[str, str]], CmdResult]


def run(argv: Sequence[str], timeout: float = TIMEOUT,
        env: Mapping[str, str] | None = None) -> CmdResult:
    """Run `argv` (never through a shell) with a timeout; never raises."""
    args = [str(a) for a in argv]
    try:
        proc = subprocess.run(args, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=dict(env) if env else None)
    except subprocess.TimeoutExpired:
        return CmdResult(args, problem=f'{args[0]} timed out after {timeout:.0f}s')
    except FileNotFoundError:
        return CmdResult(args, problem=f'{args[0]} not found')
    except PermissionError:
        return CmdResult(args, problem=f'{args[0]}: permission denied')
    except OSError as err:
        return CmdResult(args, problem=f'{args[0]}: {err.strerror}')
    return CmdResult(args, proc.returncode, proc.stdout.decode(errors='replace'),
                     proc.stderr.decode(errors='replace'))


# ---- detectors: text in, facts out (each testable from recorded output) -----------

def _int(text: str | None) -> int | None:
    m = re.match(r'\s*(\d+)', text or '')
    return int(m.group(1)) if m else None


def _matches(text: str | Sequence[str], pattern: str) -> Iterator[re.Match[str]]:
    """The matches of `pattern` at the start of `text`'s lines (or of the lines given)."""
    lines = text.splitlines() if isinstance(text, str) else text
    return filter(None, (re.match(pattern, ln) for ln in lines))


def _groups(text: str, head: str) -> list[tuple[re.Match[str], list[str]]]:
    """`text`'s lines split at those matching `head`: each one's match and the
    lines after it (those before the first are dropped)."""
    groups: list[tuple[re.Match[str], list[str]]] = []
    for line in text.splitlines():
        if m := re.match(head, line):
            groups.append((m, []))
        elif groups:
            groups[-1][1].append(line)
    return groups


def parse_scontrol_records(text: str, name_key: str) -> list[dict[str, str]]:
    """Records of ``scontrol [-o] show partition|node`` that have `name_key`:
    one dictionary of ``Key=Value`` each (a value may hold spaces, ``OS=Linux
    6.1 #1 SMP``)."""
    out = []
    for head, rest in _groups(text, r'[A-Za-z]+Name=\S'):
        rec = ' '.join([head.string, *(ln.strip() for ln in rest if ln.strip())])
        keys = list(re.finditer(r'(?:^|\s)([A-Za-z][A-Za-z0-9_:/.]*)=', rec))
        ends = [k.start() for k in keys[1:]] + [len(rec)]
        fields = {k.group(1): rec[k.end():end].strip() for k, end in zip(keys, ends)}
        if fields.get(name_key):
            out.append(fields)
    return out


def parse_scontrol_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = Value`` lines."""
    return {m[1]: m[2] for m in _matches(text, r'^([A-Za-z][\w]*)\s*=\s*(.*?)\s*$')}


class SlurmPartition(NamedTuple):
    name: str
    nodes: str = ''             # Slurm's node list expression, e.g. node[1-2]
    total_nodes: int = 0
    up: bool = True
    default: bool = False
    max_time: str = ''
    max_nodes: int = 0          # MaxNodes, the most nodes a job may have (0: UNLIMITED)


def parse_partitions(text: str) -> list[SlurmPartition]:
    """``scontrol -o show partition``."""
    return [SlurmPartition(rec['PartitionName'], rec.get('Nodes', ''),
                           _int(rec.get('TotalNodes')) or 0,
                           rec.get('State', 'UP').upper() == 'UP',
                           rec.get('Default', 'NO').upper() == 'YES', rec.get('MaxTime', ''),
                           _int(rec.get('MaxNodes')) or 0)
            for rec in parse_scontrol_records(text, 'PartitionName')]


class NodeSize(NamedTuple):
    """One node's processor and memory as Slurm sees it."""

    cpus: int                   # CPUs jobs may use (CPUEfctv, else CPUTot)
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mib: int = 0
    cpus_total: int = 0         # CPUTot (more than cpus: specialised cores)

    @classmethod
    def of(cls, cpus: int | None, sockets: int | None, cores: int | None,
           threads: int | None, memory: int | None, total: int | None) -> NodeSize | None:
        """The size where Slurm gives every count, else None.  A memory of 1 MiB or
        less is none: Slurm's default RealMemory where slurm.conf gives none."""
        if not (cpus and sockets and cores and threads):
            return None
        return cls(cpus, sockets, cores, threads, memory if memory and memory > 1 else 0,
                   total or cpus)

    def key(self) -> tuple[int, int, int, int]:
        return (self.cpus, self.sockets, self.cores_per_socket, self.threads_per_core)

    def describe(self) -> str:
        spec = (f' ({self.cpus_total - self.cpus} of {self.cpus_total} set aside by '
                f'Slurm)' if self.cpus_total > self.cpus else '')
        mem = f', {self.memory_mib} MiB' if self.memory_mib else ''
        return (f'{self.cpus} CPUs{spec}: {self.sockets} socket(s) x '
                f'{self.cores_per_socket} cores x {self.threads_per_core} thread(s){mem}')


class SlurmNode(NamedTuple):
    name: str
    hostname: str
    addr: str
    size: NodeSize | None
    features: list[str]
    partitions: list[str]


def _list_field(text: str | None) -> list[str]:
    return [] if not text or text in ('(null)', 'N/A') else [x for x in text.split(',') if x]


def parse_nodes(text: str) -> list[SlurmNode]:
    """``scontrol -o show node``: each node's size, features and partitions."""
    nodes = []
    for rec in parse_scontrol_records(text, 'NodeName'):
        name, total = rec['NodeName'], _int(rec.get('CPUTot'))
        # Sockets is the node's total (not per board: Boards does not multiply it).
        size = NodeSize.of(_int(rec.get('CPUEfctv')) or total, _int(rec.get('Sockets')),
                           _int(rec.get('CoresPerSocket')), _int(rec.get('ThreadsPerCore')),
                           _int(rec.get('RealMemory')), total)
        nodes.append(SlurmNode(name, rec.get('NodeHostName', name), rec.get('NodeAddr', ''),
                               size, _list_field(rec.get('AvailableFeatures')),
                               _list_field(rec.get('Partitions'))))
    return nodes


class SinfoRow(NamedTuple):
    partition: str
    up: bool
    nodes: int
    size: NodeSize | None
    node_list: str


def parse_sinfo(text: str) -> list[SinfoRow]:
    """``sinfo -h -o SINFO_FORMAT``: one row per partition (and node size)."""
    rows = []
    for line in text.splitlines():
        cols = line.strip().split('|')
        if len(cols) == 9 and cols[0]:
            name, avail, count, *counts, mem, node_list = cols
            size = NodeSize.of(*(_int(x) for x in counts), _int(mem), None)
            rows.append(SinfoRow(name.rstrip('*'), avail.strip().lower() == 'up',
                                 _int(count) or 0, size, node_list))
    return rows


def partitions_of_sinfo(rows: Sequence[SinfoRow]) -> list[SlurmPartition]:
    """One partition per name of sinfo's rows (one per node size), their nodes merged."""
    merged: dict[str, list[SinfoRow]] = {}
    for row in rows:
        merged.setdefault(row.partition, []).append(row)
    return [SlurmPartition(name, ','.join(r.node_list for r in same if r.node_list),
                           sum(r.nodes for r in same), any(r.up for r in same))
            for name, same in merged.items()]


def parse_mpi_plugins(text: str) -> set[str]:
    """``srun --mpi=list``: the PMI plugins (``pmix_v4`` also counts as ``pmix``)."""
    found: set[str] = set()
    for line in text.splitlines():
        line = re.sub(r'^srun:\s*', '', line.strip())
        m = re.search(r'versions available:\s*(.*)$', line)
        if m:
            found.update(m.group(1).replace(',', ' ').split())
        elif re.fullmatch(r'[a-z][a-z0-9_]*', line):
            found.add(line)
    if any(w.startswith('pmix_') for w in found):
        found.add('pmix')
    return found


class CpuTopology(NamedTuple):
    """One node's CPUs from ``lscpu -p=CPU,CORE,SOCKET,NODE``."""

    cpus: int
    cores: int
    sockets: int
    numa_masks: list[str]       # one CPU mask per NUMA domain ([] if lscpu gave none)


def parse_lscpu(text: str) -> CpuTopology | None:
    rows = [ln.strip().split(',') for ln in text.splitlines()
            if ln.strip() and not ln.startswith('#')]
    if not rows or any(len(cols) != 4 or not cols[0].isdigit() for cols in rows):
        return None
    numa: dict[int, int] = {}
    for cpu, _core, _sock, node in rows:
        if node.isdigit():
            numa[int(node)] = numa.get(int(node), 0) | (1 << int(cpu))
    return CpuTopology(cpus=len(rows), cores=len({(r[2], r[1]) for r in rows}),
                       sockets=len({r[2] for r in rows}),
                       numa_masks=[hex(numa[n]) for n in sorted(numa)])


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """``ip -o -4 addr show``: the IPv4 addresses (CIDR) of each interface."""
    addrs: dict[str, list[str]] = {}
    for m in _matches(text, r'^\d+:\s+(\S+)\s+inet\s+(\S+)'):
        addrs.setdefault(m.group(1).split('@')[0], []).append(m.group(2))
    return addrs


class NetIface(NamedTuple):
    name: str
    arp_type: int               # /sys/class/net/*/type: 1 Ethernet, 32 InfiniBand
    up: bool
    speed_mbps: int             # 0: unknown
    physical: bool


def parse_sys_net(text: str) -> dict[str, NetIface]:
    """The probe's ``@@net`` lines: name, type, operstate, speed, phys|virt."""
    out = {}
    for cols in (line.split() for line in text.splitlines()):
        if len(cols) == 5 and cols[1].isdigit():
            out[cols[0]] = NetIface(cols[0], int(cols[1]), cols[2] in ('up', 'unknown'),
                                    int(cols[3]) if cols[3].isdigit() else 0, cols[4] == 'phys')
    return out


@dataclasses.dataclass
class UcxDevice:
    transport: str
    device: str
    kind: str                   # network, intra-node, loopback ('' in old UCX)


def parse_ucx_info(text: str) -> list[UcxDevice]:
    """``ucx_info -d``: every transport and its device."""
    out: list[UcxDevice] = []
    for transport, lines in _groups(text, r'#\s+Transport:\s*(\S+)'):
        for m in _matches(lines, r'#\s+(Device|Type):\s*(\S+)'):
            if m[1] == 'Device':
                out.append(UcxDevice(transport[1], m[2], ''))
            elif out:       # a Type line: the last device's
                out[-1].kind = m[2]
    return out


#: The PCI vendor of AWS's Elastic Fabric Adapter (its ports are no InfiniBand).
EFA_VENDOR_ID = '0x1d0f'


@dataclasses.dataclass
class IbPort:
    hca: str
    port: int
    active: bool
    link_layer: str             # InfiniBand or Ethernet (RoCE); EFA: Unspecified
    rate: str = ''              # e.g. "4X HDR" from active_width and active_speed
    vendor_id: str = ''         # the HCA's, e.g. 0x02c9 (Mellanox), 0x1d0f (EFA)

    @property
    def device(self) -> str:
        return f'{self.hca}:{self.port}'

    @property
    def efa(self) -> bool:
        """An AWS EFA device (libfabric's efa provider drives it, not UCX)."""
        return (self.vendor_id.lower() == EFA_VENDOR_ID
                or re.match(r'^(rdmap|efa)', self.hca) is not None)


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    """``ibv_devinfo``: every HCA port, its state and link layer."""
    ports: list[IbPort] = []
    width = ''
    for hca, lines in _groups(text, r'\s*hca_id:\s*(\S+)'):
        vendor = ''
        for s in (ln.strip() for ln in lines):
            if m := re.match(r'^vendor_id:\s*(\S+)', s):
                vendor = m.group(1)
            elif m := re.match(r'^port:\s*(\d+)', s):
                ports.append(IbPort(hca[1], int(m.group(1)), False, '', vendor_id=vendor))
                width = ''
            elif ports and (m := re.match(r'^state:\s*(\S+)', s)):
                ports[-1].active = m.group(1) == 'PORT_ACTIVE'
            elif ports and (m := re.match(r'^link_layer:\s*(\S+)', s)):
                ports[-1].link_layer = m.group(1)
            elif ports and (m := re.match(r'^active_width:\s*(\S+)', s)):
                width = m.group(1)
            elif ports and (m := re.match(r'^active_speed:\s*(.+?)\s*(\(\d+\))?$', s)):
                ports[-1].rate = f'{width} {m.group(1)}'.strip()
    return ports


#: libfabric providers of HPC fabrics (the others are TCP, shared memory or
#: utility layers): Slingshot, AWS EFA, Omni-Path.
OFI_FABRICS = {'cxi': 'HPE Slingshot', 'efa': 'AWS EFA', 'opx': 'Omni-Path',
               'psm2': 'Omni-Path', 'psm3': 'Intel Ethernet (PSM3)'}


def parse_fi_info(text: str) -> list[tuple[str, str]]:
    """``fi_info``: the (provider, domain) pairs it offers, each once."""
    pairs: dict[tuple[str, str], None] = {}
    for provider, lines in _groups(text, r'provider:\s*(\S+)'):
        for m in _matches(lines, r'\s+domain:\s*(\S+)'):
            pairs[provider[1], m[1]] = None
    return list(pairs)


class ModuleEntry(NamedTuple):
    name: str                   # e.g. openmpi/4.1.6
    directory: str = ''         # its MODULEPATH entry
    default: bool = False


def parse_module_avail(text: str) -> list[ModuleEntry]:
    """Terse ``module avail`` (Lmod ``--terse``, Environment Modules ``-t``):
    each folder of MODULEPATH (``/path:``), then its modules."""
    out = []
    directory = ''
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(('-', 'Use ', 'If ', 'Where', '"')):
            continue
        if s.endswith(':') and (s.startswith('/') or '$' in s):
            directory = s[:-1]
            continue
        m = re.fullmatch(r'([A-Za-z0-9_][\w.+/-]*?)/?(?:\s*\(([^)]*)\))?(?:\s*<[^>]*>)?', s)
        if not m or not directory:      # a module is listed under its folder
            continue
        tags = [t.strip() for t in (m.group(2) or '').replace(':', ',').split(',')]
        out.append(ModuleEntry(m.group(1), directory, 'default' in tags or 'D' in tags))
    return out


class SpackInstall(NamedTuple):
    name: str
    version: str
    prefix: str


#: ``spack find --format`` of the parser.
SPACK_FORMAT = '{name} {version} {prefix}'


def parse_spack_find(text: str) -> list[SpackInstall]:
    """``spack find --format SPACK_FORMAT``: its installs (not its ``==>`` lines)."""
    installs = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) == 3 and cols[2].startswith('/') and not line.startswith('=='):
            installs.append(SpackInstall(*cols))
    return installs


def module_stack(name: str) -> str | None:
    """The stack a module provides, from its name (``openmpi/4.1.6``,
    ``mpi/openmpi-x86_64``, ``mvapich2``), or None."""
    for part in name.lower().split('/'):
        for stack in STACKS:
            for alias in (stack.name, stack.name.replace('mpi', '-mpi')):
                if part == alias or re.match(rf'{re.escape(alias)}[-_.0-9]', part):
                    return stack.name
    return None


def _version_key(text: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r'(\d+)', text) if p]


def identify_stack(launcher_says: str, version_texts: Iterable[str] = ()) -> str | None:
    """Which stack a launcher's ``--version`` (and the stacks' version tools)
    show, by the registry's words and version patterns; None if none or unsure."""
    texts = [launcher_says, *version_texts]
    said = [s for s in STACKS if s.launcher_is_mine(launcher_says)]
    if len(said) == 1:
        return said[0].name
    versioned = [s for s in (said or STACKS) if any(s.version_re.search(t) for t in texts)]
    return versioned[0].name if len(versioned) == 1 else None


def stack_version(stack: Stack, texts: Iterable[str]) -> str:
    return next(filter(None, map(stack.version_in, texts)), '')


def hostname_pattern(host: str) -> str:
    """A regular expression of the login nodes from this one's name: each
    run of digits stands for any number (``login01`` -> ``login\\d+``)."""
    out = ''.join(r'\d+' if part.isdigit() else re.sub(r'([.^$*+?{}\[\]\\|()])', r'\\\1', part)
                  for part in re.split(r'(\d+)', host.split('.')[0]))
    return f'^{out}' + r'(\.|$)'


#: The node probe's time limit (srun --time), at most: it takes seconds.
PROBE_MINUTES = 5


def slurm_minutes(text: str) -> int | None:
    """A Slurm time (``30``, ``1:00:00``, ``2-00:00:00``) in minutes; None
    for UNLIMITED, INFINITE and what it cannot read."""
    m = re.fullmatch(r'(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?', text.strip())
    if not m:
        return None
    days, hms = m.group(1), [int(x) for x in m.group(2, 3, 4) if x]
    # minutes[:seconds], hours:minutes:seconds; after days: hours[:minutes[:seconds]]
    units = (3600, 60, 1) if days or len(hms) == 3 else (60, 1)
    return (int(days or 0) * 86400 + sum(u * x for u, x in zip(units, hms))) // 60


def probe_sections(text: str) -> dict[str, str]:
    """The node probe's output split at its ``@@name`` lines."""
    return {m[1]: '\n'.join(body) for m, body in _groups(text, r'\s*@@([a-z_]+)\s*\Z')}


# ---- links -------------------------------------------------------------------------

@dataclasses.dataclass
class Link:
    """One interconnect of a node, as the stacks are pinned to it."""

    kind: str                   # ib, roce, ofi, tcp
    device: str                 # mlx5_0:1, cxi, eth0
    descr: str
    iface: str = ''             # the network interface (tcp)
    addrs: list[str] = dataclasses.field(default_factory=list)   # its IPv4 addresses (CIDR)

    @property
    def high_speed(self) -> bool:
        return self.kind != 'tcp'

    def has_addr(self, addr: str) -> bool:
        return any(c.split('/')[0] == addr for c in self.addrs)

    def env(self, stack: Stack) -> dict[str, str] | None:
        """The registry's variables that pin `stack` to this link (None: unknown):
        on a high-speed link only for a stack the registry pins between nodes by
        Open MPI's MCA variables or by UCX's (MPICH's ch4:ucx)."""
        if self.kind == 'tcp':
            return stack.tcp_nodes(self.device)
        keys = set(stack.tcp_nodes_env)
        mca = any(k.startswith('OMPI_MCA_') for k in keys)
        if self.kind in ('ib', 'roce') and (mca or 'UCX_NET_DEVICES' in keys):
            return stack.ib(self.device)
        return stack.ofi(self.device) if self.kind == 'ofi' and mca else None


#: Interfaces that are never a node's link to the others.
_NOT_LINKS = re.compile(r'^(lo|docker\d*|virbr\d*|br-.*|veth.*|cni.*|flannel.*|cali.*|'
                        r'tun\d*|tap\d*|kube.*|podman\d*)$')


def _ucx_ports(ucx_info: str) -> list[IbPort]:
    """The ports of UCX's RDMA transports (rc, dc, ud), each once, none of EFA: a
    node's InfiniBand ports where ibv_devinfo gave none."""
    devices = dict.fromkeys(d.device for d in parse_ucx_info(ucx_info)
                            if re.match(r'^(rc|dc|ud)', d.transport) and ':' in d.device)
    ports = []
    for device in devices:
        hca, port = device.split(':')[:2]
        if port.isdigit():
            ports.append(IbPort(hca, int(port), True, 'InfiniBand'))
    return [p for p in ports if not p.efa]


def node_links(sections: Mapping[str, str]) -> list[Link]:
    """The links of a probed node: active InfiniBand/RoCE ports (ibv_devinfo,
    else ucx_info), libfabric's HPC fabrics (fi_info), then its Ethernet
    interfaces with an IPv4 address (ip, /sys/class/net)."""
    links: list[Link] = []
    # An InfiniBand or RoCE port, never an EFA device (link layer Unspecified, or
    # InfiniBand on older rdma-core): that one is libfabric's (fi_info's efa).
    ports = [p for p in parse_ibv_devinfo(sections.get('ibv_devinfo', ''))
             if p.active and p.link_layer in ('InfiniBand', 'Ethernet') and not p.efa]
    if not ports:
        ports = _ucx_ports(sections.get('ucx_info', ''))
    for p in ports:
        kind, what = ('roce', 'RoCE') if p.link_layer == 'Ethernet' else ('ib', 'InfiniBand')
        links.append(Link(kind, p.device, f'{what} {p.rate}'.strip() + f' port {p.device}'))
    for provider, domain in parse_fi_info(sections.get('fi_info', '')):
        base = provider.split(';')[0]
        if base in OFI_FABRICS and not any(x.device == base for x in links):
            links.append(Link('ofi', base, f'{OFI_FABRICS[base]} (libfabric {base}, '
                                           f'domain {domain})'))
    net = parse_sys_net(sections.get('net', ''))
    for iface, cidrs in parse_ip_addr(sections.get('ip', '')).items():
        info = net.get(iface)
        if _NOT_LINKS.match(iface) or (info and (info.arp_type != 1 or not info.up)):
            continue
        speed = f', {info.speed_mbps} Mb/s' if info and info.speed_mbps > 0 else ''
        virt = ' virtual' if info and not info.physical else ''
        links.append(Link('tcp', iface, f'TCP over{virt} Ethernet {iface} '
                                        f'({", ".join(cidrs)}{speed})', iface, list(cidrs)))
    return links


def _stem(name: str) -> str:
    return re.sub(r'[^a-z].*$', '', name.lower())


_KIND_WORDS = {'ib': ('ib', 'infiniband', 'hdr', 'edr', 'ndr'), 'roce': ('roce',),
               'tcp': ('eth', 'ethernet', 'tcp', 'gige'), 'ofi': ('ofi', 'fabric')}


def choose_links(partition: str, features: Sequence[str], links: Sequence[Link],
                 node_addr: str = '') -> tuple[list[Link], str]:
    """The links a partition measures, and why: the one it (or a feature of
    its nodes) is named after; else its high-speed links; else the interface
    Slurm reaches its nodes on (its NodeAddr), or its only interface."""
    for word in (partition, *features):
        stem = _stem(word)
        named = [x for x in links if stem and (
            _stem(x.device) == stem or _stem(x.iface) == stem or
            stem in _KIND_WORDS.get(x.kind, ()) or (x.kind == 'ofi' and x.device == stem))]
        if len(named) > 1 and any(x.kind == 'tcp' for x in named) and node_addr:
            named = [x for x in named if x.kind != 'tcp' or x.has_addr(node_addr)] or named
        if len(named) == 1:
            what = 'the partition' if word == partition else f'its nodes\' feature {word!r}'
            return named, f'{what} is named after it'
    fast = [x for x in links if x.high_speed]
    if fast:
        return fast, 'the high-speed link(s) of its nodes'
    tcp = [x for x in links if x.kind == 'tcp']
    if len(tcp) == 1:
        return tcp, 'its nodes\' only network interface'
    reach = [x for x in tcp if node_addr and x.has_addr(node_addr)]
    if reach:
        return reach[:1], f'Slurm reaches its nodes there (NodeAddr {node_addr})'
    return [], ''


# ---- the file: a dictionary with comments -----------------------------------------

@dataclasses.dataclass
class Item:
    """One key of the written dictionary, with the comment above it."""

    key: str
    value: Any                  # a plain value or a Block
    comment: list[str]
    commented_out: bool = False


@dataclasses.dataclass
class Block:
    items: list[Item] = dataclasses.field(default_factory=list)

    def add(self, key: str, value: Any, *comment: str, commented_out: bool = False) -> None:
        self.items.append(Item(key, value, [c for c in comment if c], commented_out))

    def plain(self) -> dict[str, Any]:
        return {i.key: i.value.plain() if isinstance(i.value, Block) else i.value
                for i in self.items if not i.commented_out}

    def fill_ins(self, path: str = '') -> list[str]:
        """Every ``FILL IN`` comment, with the key it stands above."""
        out = []
        for item in self.items:
            where = f'{path}.{item.key}' if path else item.key
            out += [f'{where}: {line[len(FILL_IN):].lstrip(": ")}' for line in item.comment
                    if line.startswith(FILL_IN)]
            if isinstance(item.value, Block):
                out += item.value.fill_ins(where)
        return out


def py_str(text: str) -> str:
    """A string literal; raw where that reads better (regular expressions)."""
    if '\\' in text and "'" not in text and not text.endswith('\\') and '\n' not in text:
        return f"r'{text}'"
    return repr(text)


def _long_str(text: str, col: int, width: int) -> str:
    """A string too long for its line: parenthesised pieces, one per line,
    each starting at `col` + 1 and ending by the margin."""
    room = max(20, width - col - 4)
    pieces: list[str] = []
    for word in re.split(r'(?<=[ /])', text):
        if pieces and len(repr(pieces[-1] + word)) <= room:
            pieces[-1] += word
        else:
            pieces.append(word)
    pad = '\n' + ' ' * (col + 1)
    return '(' + pad.join(py_str(p) for p in pieces) + ')'


def py_value(value: Any, indent: int, col: int, width: int = WIDTH) -> str:
    """`value` as Python source: its first line starts at column `col`, its
    other lines at `indent` (a container's items at `indent` + 4); one line
    where it fits the margin (with the comma after it)."""
    if isinstance(value, str):
        one = py_str(value)
        # Past the margin, and with a space or a slash to break at: in pieces.
        if col + len(one) + 1 > width and re.search(r'[ /]', value[:-1]):
            return _long_str(value, col, width)
        return one
    if value is None or isinstance(value, (int, float)):     # bool is an int
        return repr(value)
    if not isinstance(value, (dict, list, tuple)):
        raise TypeError(f'cannot write {type(value).__name__} into a site file')
    # (key text, item): a dictionary's items; a list's with no key text
    items = ([(f'{py_str(str(k))}: ', v) for k, v in value.items()]
             if isinstance(value, dict) else [('', v) for v in value])
    parts = [k + py_value(v, indent + 4, indent + 4 + len(k), width) for k, v in items]
    open_, close = ('{', '}') if isinstance(value, dict) else ('[', ']')
    one = open_ + ', '.join(parts) + close
    if col + len(one) + 1 <= width and '\n' not in one:
        return one
    inner = ' ' * (indent + 4)
    return open_ + '\n' + ''.join(f'{inner}{p},\n' for p in parts) + ' ' * indent + close


def render_block(block: Block, indent: int, width: int = WIDTH) -> list[str]:
    pad = ' ' * indent
    lines = []
    for item in block.items:
        if indent == 4 and isinstance(item.value, Block):
            lines.append('')        # the file's sections: partitions, stacks
        for text in item.comment:
            lines += textwrap.wrap(text, width, initial_indent=f'{pad}# ',
                                   subsequent_indent=f'{pad}# ', break_on_hyphens=False)
        key = f'{py_str(item.key)}: '
        # A commented-out line has 2 more columns ('# ').
        room = width - (2 if item.commented_out else 0)
        if isinstance(item.value, Block):
            body = [f'{pad}{key}{{', *render_block(item.value, indent + 4, room), f'{pad}}},']
        else:
            value = py_value(item.value, indent, indent + len(key), room)
            body = f'{pad}{key}{value},'.split('\n')
        if item.commented_out:
            body = [f'{pad}# {ln[indent:]}' if ln.strip() else ln for ln in body]
        # What cannot be split (a path without a slash to break at) stays whole.
        lines += [f'{ln}  # noqa: E501' if len(ln) > WIDTH else ln for ln in body]
    return lines


# ---- detection ---------------------------------------------------------------------

class ModuleTool(NamedTuple):
    kind: str                   # lmod, tmod4, tmod
    cmd: str                    # the back end: lmod, modulecmd.tcl, modulecmd
    version: str
    init: str                   # its bash set-up, for the job scripts ('' if unknown)


@dataclasses.dataclass
class FoundStack:
    """One MPI stack as the environments will have it."""

    name: str
    how: str                    # module, spack, prefix, debian, path
    where: str                  # the module's name or the install's prefix/tool
    version: str = ''
    cc: str = 'mpicc'
    modules: list[str] = dataclasses.field(default_factory=list)
    module_dir: str = ''
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    others: list[str] = dataclasses.field(default_factory=list)
    # Its system configuration folder (its sysconfdir_tool's answer), or why not.
    sysconfdir: str = ''
    sysconfdir_why: str = ''


@dataclasses.dataclass
class Detection:
    """Everything detected (or why not) before the file is made."""

    host: str
    config: dict[str, str] = dataclasses.field(default_factory=dict)
    partitions: list[SlurmPartition] = dataclasses.field(default_factory=list)
    nodes: list[SlurmNode] = dataclasses.field(default_factory=list)
    sinfo: list[SinfoRow] = dataclasses.field(default_factory=list)
    mpi_plugins: set[str] = dataclasses.field(default_factory=set)
    mpi_plugins_why: str = ''
    probes: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    probe_why: dict[str, str] = dataclasses.field(default_factory=dict)
    login_links: list[Link] = dataclasses.field(default_factory=list)
    module_tool: ModuleTool | None = None
    stacks: dict[str, FoundStack] = dataclasses.field(default_factory=dict)
    absent: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


class SiteError(Exception):
    """Input or a situation the generator cannot work with: one clear line."""


def find_module_tool(environ: Mapping[str, str], runner: Runner) -> ModuleTool | None:
    """Lmod, else Environment Modules, as this shell would use them."""
    lmod_dir = environ.get('LMOD_DIR')
    for cmd in (environ.get('LMOD_CMD', ''), os.path.join(lmod_dir, 'lmod') if lmod_dir else '',
                *LMOD_PATHS):
        if cmd and os.access(cmd, os.X_OK) and os.path.isfile(cmd):
            res = runner([cmd, '--version'], TIMEOUT, environ)
            m = re.search(r'Version\s+(\S+)', res.err + res.out)
            init = os.path.join(os.path.dirname(os.path.dirname(cmd)), 'init', 'bash')
            return ModuleTool('lmod', cmd, m.group(1) if m else '',
                              init if os.path.isfile(init) else '')
    for cmd in (environ.get('MODULES_CMD', ''),
                shutil.which('modulecmd', path=environ.get('PATH')) or ''):
        if cmd and os.access(cmd, os.X_OK):
            res = runner([cmd, 'bash', '--version'], TIMEOUT, environ)
            m = re.search(r'(?:Modules Release|VERSION=)\s*(\d[\w.]*)', res.err + res.out)
            version = m.group(1) if m else ''
            init = os.path.join(environ.get('MODULESHOME', '/usr/share/modules'), 'init', 'bash')
            # ReFrame 4.10 drives Environment Modules 4 and later ('envmod'; its
            # 'tmod4' is deprecated), not the 3.x C modulecmd.
            if not (version[:1].isdigit() and int(version.split('.')[0]) >= 4):
                return None
            return ModuleTool('envmod', cmd, version, init if os.path.isfile(init) else '')
    return None


def _ask(launcher: str, stacks: Sequence[Stack], env: Mapping[str, str], suffix: str,
         runner: Runner) -> tuple[str | None, str, str]:
    """Which stack `launcher` is, by its ``--version`` and the version tools
    of `stacks` on PATH in `env`: (its name or None, its version, what the
    launcher said)."""
    says = runner([launcher, '--version'], TIMEOUT, env)
    texts = [says.out + says.err]
    for stack in stacks:
        for tool in stack.version_tools:
            argv = [tool[0].replace('{suffix}', suffix), *tool[1:]]
            if shutil.which(argv[0], path=env.get('PATH')):
                res = runner(argv, TIMEOUT, env)
                texts.append(res.out + res.err)
    found = identify_stack(texts[0], texts[1:])
    return found, stack_version(STACK[found], texts) if found else '', texts[0]


def _check_tools(stack: Stack, env: Mapping[str, str], cc: str, suffix: str,
                 runner: Runner) -> tuple[str, str]:
    """(version, '') where `cc` and a launcher of `stack` are on PATH in
    `env` and the launcher is that stack's; ('', why not) otherwise."""
    path = env.get('PATH')
    if not shutil.which(cc, path=path):
        return '', f'no {cc} on its PATH'
    launcher = next((f'{n}{suffix}' for n in stack.launchers
                     if shutil.which(f'{n}{suffix}', path=path)), '')
    if not launcher:
        return '', f'no {" or ".join(stack.launchers)} on its PATH'
    found, version, said = _ask(launcher, [stack], env, suffix, runner)
    if found != stack.name:
        first = next((ln for ln in said.splitlines() if ln.strip()), '')
        return '', (f'its {launcher} is {STACK[found].descr}\'s' if found else
                    f'its {launcher} --version does not say {stack.descr} ({first[:80]!r})')
    return version or '?', ''


def _with_sysconfdir(found: FoundStack, stack: Stack, env: Mapping[str, str],
                     runner: Runner) -> FoundStack:
    """`found` with the folder its stack's ``sysconfdir_tool`` on PATH in `env` (its
    modules loaded) says, or why not (neither for a stack without that tool)."""
    if not stack.sysconfdir_tool:
        return found
    name, *args = stack.sysconfdir_tool
    tool = shutil.which(name, path=env.get('PATH'))
    if not tool:
        found.sysconfdir_why = f'no {name} on its PATH'
        return found
    res = runner([tool, *args], TIMEOUT, env)
    found.sysconfdir = sysconfdir_in(res.out) if res.ok else ''
    if found.sysconfdir:
        return found
    said = ' '.join(res.out.split())[:80]
    command = shlex.join([name, *args])
    if not res.ok:
        found.sysconfdir_why = f'{command}: {res.why()}'
    elif said:
        found.sysconfdir_why = f'{command} says {said!r}'
    else:
        found.sysconfdir_why = f'{command} says nothing'
    return found


def detect_module_stacks(tool: ModuleTool, environ: Mapping[str, str], runner: Runner,
                         det: Detection) -> None:
    flag = '--terse' if tool.kind == 'lmod' else '-t'
    res = runner([tool.cmd, 'bash', flag, 'avail'], TIMEOUT, environ)
    if not res.ok and not res.err.strip():
        det.notes.append(f'module avail: {res.why()}')
        return
    by_stack: dict[str, list[ModuleEntry]] = {}
    for entry in parse_module_avail(res.err + res.out):
        stack = module_stack(entry.name)
        if stack:
            by_stack.setdefault(stack, []).append(entry)
    for stack_name, entries in by_stack.items():
        # The default first, then the newest.
        ordered = sorted(sorted(entries, key=lambda e: _version_key(e.name), reverse=True),
                         key=lambda e: not e.default)
        reasons = []
        for entry in ordered:
            load = runner(['bash', '-c', LOAD_SCRIPT, 'load', tool.cmd, entry.name],
                          TIMEOUT, environ)
            if not load.ok:
                msg = ' '.join((load.err or load.out).split())
                msg = re.sub(r'^Lmod has detected the following error:\s*', '', msg)
                msg = msg.split(' While processing the following module')[0]
                reasons.append(f'module {entry.name} does not load ({msg[:200] or load.why()})')
                continue
            env = dict(x.split('=', 1) for x in load.out.split('\0') if '=' in x)
            version, why = _check_tools(STACK[stack_name], env, 'mpicc', '', runner)
            if why:
                reasons.append(f'module {entry.name}: {why}')
                continue
            det.stacks[stack_name] = _with_sysconfdir(FoundStack(
                stack_name, 'module', entry.name, version, 'mpicc', [entry.name],
                entry.directory, others=[e.name for e in ordered if e is not entry]),
                STACK[stack_name], env, runner)
            break
        else:
            det.absent[stack_name] = '; '.join(reasons)


def _install_candidates(stack: Stack, environ: Mapping[str, str],
                        spack: list[SpackInstall]) -> list[tuple[str, str, str]]:
    """Where `stack` may be, in the order tried: (how, where, install prefix; '' for
    Debian's suffixed tools on PATH)."""
    prefix = environ.get(stack.prefix_var, '').strip()
    candidates = [('prefix', f'{stack.prefix_var}={prefix}', prefix)] if prefix else []
    candidates += [('spack', f'spack {i.name}@{i.version} {i.prefix}', i.prefix) for i in
                   sorted((i for i in spack if i.name == stack.name),
                          key=lambda i: _version_key(i.version), reverse=True)]
    path = environ.get('PATH')
    if stack.suffixed_tools and all(shutil.which(t, path=path) for t in stack.suffixed_tools):
        candidates.append(('debian', ' + '.join(stack.suffixed_tools), ''))
    candidates += [('prefix', found, found) for pattern in KNOWN_PREFIXES for found in
                   sorted(glob.glob(pattern.format(stack=stack.name)), reverse=True)
                   if os.access(os.path.join(found, 'bin', 'mpicc'), os.X_OK)]
    return candidates


def detect_path_stacks(environ: Mapping[str, str], runner: Runner, det: Detection) -> None:
    """Stacks not provided by a module: the prefixes of the harness's knobs,
    Spack, Debian's suffixed tools, usual prefixes, plain wrappers on PATH."""
    path = environ.get('PATH')
    spack = None
    for stack in STACKS:
        if stack.name in det.stacks:
            continue
        if spack is None:
            res = runner(['spack', 'find', '--format', SPACK_FORMAT], TIMEOUT * 2, environ)
            spack = parse_spack_find(res.out) if res.ok else []
        reasons = []
        for how, where, install in _install_candidates(stack, environ, spack):
            if install:
                # its bin first on PATH
                bindir = os.path.join(install, 'bin')
                env = {**environ, 'PATH': f'{bindir}:{path or ""}'}
                cc = os.path.join(bindir, 'mpicc')
                suffix = ''
                stack_env = {'PATH': f'{bindir}:$PATH'}
            else:
                # Debian's suffixed tools, on PATH as it is
                env = environ
                cc = (stack.suffixed_tools or ('',))[0]
                suffix = stack.suffix or ''
                stack_env = {}
            version, why = _check_tools(stack, env, cc, suffix, runner)
            if why:
                reasons.append(f'{where}: {why}')
                continue
            det.stacks[stack.name] = _with_sysconfdir(FoundStack(
                stack.name, how, where, version, shutil.which(cc, path=env.get('PATH')) or cc,
                env=stack_env), stack, env, runner)
            break
        if stack.name not in det.stacks and reasons:
            det.absent[stack.name] = '; '.join(
                x for x in (det.absent.get(stack.name, ''), *reasons) if x)
    # Plain wrappers on PATH: whichever stack they are.
    names = sorted({n for s in STACKS for n in s.launchers})
    launcher = next((n for n in names if shutil.which(n, path=path)), '')
    if len(det.stacks) < len(STACKS) and shutil.which('mpicc', path=path) and launcher:
        name, version, _ = _ask(launcher, STACKS, environ, '', runner)
        if name and name not in det.stacks:
            real = os.path.dirname(shutil.which('mpicc', path=path) or '')
            det.stacks[name] = _with_sysconfdir(
                FoundStack(name, 'path', f'mpicc and {launcher} on PATH ({real})',
                           version or '?', os.path.join(real, 'mpicc'),
                           env={'PATH': f'{real}:$PATH'}), STACK[name], environ, runner)
            det.absent.pop(name, None)


def this_host() -> str:
    """This host's name, fully qualified where the resolver knows it."""
    host, fqdn = socket.gethostname(), socket.getfqdn()
    return fqdn if fqdn.startswith(f'{host}.') else host


def detect(args: argparse.Namespace, environ: Mapping[str, str], runner: Runner) -> Detection:
    """Ask Slurm, the nodes and this shell's tools."""
    det = Detection(host=this_host())
    conf = runner(['scontrol', 'show', 'config'], TIMEOUT, environ)
    parts = runner(['scontrol', '-o', 'show', 'partition'], TIMEOUT, environ)
    sinfo = runner(['sinfo', '-h', '-o', SINFO_FORMAT], TIMEOUT, environ)
    if not (conf.ok or parts.ok or sinfo.ok):
        raise SiteError(f'no Slurm here: scontrol: {parts.why()}; sinfo: {sinfo.why()} '
                        f'(run ./harness site on the cluster\'s login node, with Slurm\'s '
                        f'clients on PATH)')
    det.config = parse_scontrol_config(conf.out) if conf.ok else {}
    det.partitions = parse_partitions(parts.out) if parts.ok else []
    det.sinfo = parse_sinfo(sinfo.out) if sinfo.ok else []
    if not det.partitions and det.sinfo:
        det.partitions = partitions_of_sinfo(det.sinfo)
        det.notes.append(f'partitions from sinfo (scontrol show partition: {parts.why()})')
    if not det.partitions:
        raise SiteError('Slurm shows no partition (scontrol show partition: '
                        f'{parts.why() if not parts.ok else "none"}; sinfo: '
                        f'{sinfo.why() if not sinfo.ok else "none"})')
    nodes = runner(['scontrol', '-o', 'show', 'node'], TIMEOUT, environ)
    det.nodes = parse_nodes(nodes.out) if nodes.ok else []
    if not nodes.ok:
        det.notes.append(f'scontrol show node: {nodes.why()}')
    mpi = runner(['srun', '--mpi=list'], TIMEOUT, environ)
    det.mpi_plugins = parse_mpi_plugins(mpi.out + mpi.err) if mpi.ok else set()
    det.mpi_plugins_why = '' if det.mpi_plugins else f'srun --mpi=list: {mpi.why()}'
    _choose_partitions(det, args)
    _probe_partitions(det, args, environ, runner)
    # This host's interconnect (only for the summary: a login node's devices
    # need not be the compute nodes').
    texts = {}
    for argv in (['ucx_info', '-d'], ['ibv_devinfo'], ['fi_info']):
        res = runner(argv, TIMEOUT, environ)
        texts[argv[0]] = res.out if res.ok else ''
    det.login_links = [x for x in node_links(texts) if x.high_speed]

    det.module_tool = find_module_tool(environ, runner)
    if not det.module_tool and (environ.get('MODULES_CMD') or environ.get('MODULESHOME')):
        det.notes.append('modules: not Lmod nor Environment Modules 4 or later, which '
                         'ReFrame 4.10 drives: stacks from PATH only')
    if det.module_tool:
        detect_module_stacks(det.module_tool, environ, runner, det)
    detect_path_stacks(environ, runner, det)
    return det


def _choose_partitions(det: Detection, args: argparse.Namespace) -> None:
    """Keeps the partitions named by --partitions, else those UP with nodes."""
    names = [p.name for p in det.partitions]
    unknown = [p for p in args.partitions if p not in names]
    if unknown:
        raise SiteError(f'--partitions: no Slurm partition {", ".join(unknown)} '
                        f'(Slurm has: {", ".join(names)})')
    down = [p.name for p in det.partitions if not p.up]
    # A partition without nodes (Nodes=(null)) runs no job.
    empty = [p.name for p in det.partitions if p.up and not p.total_nodes
             and p.nodes in ('', '(null)')]
    for left_out, what in ((down, 'not UP'), (empty, 'without nodes')):
        if left_out and not args.partitions:
            det.notes.append(f'left out partition(s) {what}: {", ".join(left_out)} '
                             f'(--partitions names them all the same)')
    det.partitions = [p for p in det.partitions if p.name in args.partitions or (
        p.up and p.name not in empty and not args.partitions)]
    if not det.partitions:
        raise SiteError(f'no Slurm partition is UP with nodes ({", ".join(names)}); name '
                        f'the ones to use with --partitions')


def _probe_partitions(det: Detection, args: argparse.Namespace, environ: Mapping[str, str],
                      runner: Runner) -> None:
    """Probes a node of each partition with srun: one probe per set of nodes
    (partitions over the same nodes share it)."""
    for part in det.partitions:
        key = part.nodes or part.name
        if args.no_srun:
            det.probe_why[part.name] = 'not asked (--no-srun)'
        elif key not in det.probes:
            # 5 minutes, or the partition's MaxTime where less: a debug partition of
            # 2 minutes kept a probe of 5 pending (PartitionTimeLimit) until --immediate
            limit = slurm_minutes(part.max_time)
            minutes = PROBE_MINUTES if limit is None else max(1, min(PROBE_MINUTES, limit))
            res = runner(['srun', f'--partition={part.name}', '--nodes=1', '--ntasks=1',
                          '--immediate=60', f'--time={minutes}', '--job-name=harness-site',
                          '--quiet',
                          *args.access, 'sh', '-c', PROBE_SCRIPT], args.srun_timeout, environ)
            sections = probe_sections(res.out)
            if res.ok and 'end' in sections:
                det.probes[key] = sections
            else:
                det.probe_why[part.name] = f'srun on partition {part.name}: {res.why()}'


# ---- from what was detected to the file --------------------------------------------

_UCX_NOTE = 'Open MPI through UCX, MPICH built with ch4:ucx (Debian\'s)'
_TRANSPORT_NOTES = {'ib': _UCX_NOTE, 'roce': _UCX_NOTE,
                    'ofi': 'Open MPI through libfabric (the cm PML)'}
#: The template's partitions: their links' variables are the placeholder's examples.
_TEMPLATE = cluster_template.CLUSTER['partitions']


def _sanitize(name: str) -> str:
    clean = re.sub(r'[^A-Za-z0-9_-]', '_', name)
    return clean if re.match(r'[A-Za-z_]', clean) else f'c_{clean}'


def _node_size(det: Detection, part: SlurmPartition,
               nodes: list[SlurmNode]) -> tuple[NodeSize | None, str]:
    """The most common size of the partition's `nodes` (else of sinfo's rows, each
    weighed by its nodes), and a note if they differ."""
    weighed = [(n.size, 1) for n in nodes if n.size] or [
        (r.size, r.nodes or 1) for r in det.sinfo if r.partition == part.name and r.size]
    if not weighed:
        return None, ''
    counts: collections.Counter[tuple[int, int, int, int]] = collections.Counter()
    for s, n in weighed:
        counts[s.key()] += n
    commonest = counts.most_common(1)[0][0]
    same = [s for s, _ in weighed if s.key() == commonest]
    size = same[0]._replace(memory_mib=min(s.memory_mib for s in same))
    return size, '' if len(counts) == 1 else (
        f'its nodes differ ({len(counts)} sizes): the most common is written; give the others '
        f'a partition of their own (--constraint).')


def _processor(size: NodeSize, topo: CpuTopology | None, det: Detection,
               probed_on: str, no_probe: str) -> tuple[dict[str, Any], list[str]]:
    notes = [f'One node\'s processor, from scontrol show node: {size.describe()}.']
    # Slurm's sockets can be NUMA domains (numa_node_as_socket) or one per CPU (a
    # bare CPUs=N node line): lscpu's count wins where it saw the node's CPUs.
    counted = size.sockets
    if topo and topo.sockets and topo.cpus in (size.cpus, size.cpus_total) \
            and topo.sockets != size.sockets:
        counted = topo.sockets
        notes.append(f'Sockets from lscpu on {probed_on} ({topo.sockets}; Slurm says '
                     f'{size.sockets}).')
    sockets = counted if size.cpus % counted == 0 else 1
    if counted == size.sockets == size.cpus > 1 and size.cores_per_socket == 1 \
            and size.threads_per_core == 1:
        # A bare CPUs=N node line: Slurm makes each CPU a socket of one core.
        sockets = 1
        notes.append(f'{FILL_IN}: the sockets (Slurm says {size.cpus} socket(s) of one '
                     f'core: a node line with CPUs= alone; lscpu did not say): '
                     f'num_sockets and num_cpus_per_socket; one socket is written.')
    # A Slurm CPU is a core where Slurm schedules whole cores (CPUTot = sockets x
    # cores, the threads not counted): then one CPU per core, whatever ThreadsPerCore.
    per_core = size.threads_per_core
    if per_core > 1 and size.cpus_total == size.sockets * size.cores_per_socket:
        per_core = 1
        notes.append(f'Slurm counts cores as CPUs here ({size.cpus_total} = {size.sockets} '
                     f'socket(s) x {size.cores_per_socket} cores, the '
                     f'{size.threads_per_core} threads per core not counted): one CPU per '
                     f'core.')
    proc: dict[str, Any] = {
        'num_cpus': size.cpus,
        'num_cpus_per_core': per_core,
        'num_sockets': sockets,
        'num_cpus_per_socket': size.cpus // sockets,
    }
    numa_nodes, numa_note = _numa_nodes(size, topo, det, probed_on, no_probe)
    if numa_nodes:
        proc['topology'] = {'numa_nodes': numa_nodes}
    notes.append(numa_note)
    return proc, notes


def _numa_nodes(size: NodeSize, topo: CpuTopology | None, det: Detection, probed_on: str,
                no_probe: str) -> tuple[list[str], str]:
    """A node's NUMA domains, one CPU mask each ([] where unknown), and the note on them."""
    numa_as_socket = 'numa_node_as_socket' in det.config.get('SlurmdParameters', '')
    if topo and topo.numa_masks and topo.cpus == size.cpus:
        return topo.numa_masks, f'NUMA domains from lscpu on {probed_on}.'
    if numa_as_socket and size.threads_per_core == 1:
        # One hardware thread per core: Linux numbers the CPUs of a domain in a block.
        domains = size.sockets if size.cpus % size.sockets == 0 else 1
        per = size.cpus // domains
        return ([hex(((1 << per) - 1) << (i * per)) for i in range(domains)],
                'NUMA domains: Slurm counts them as sockets (SlurmdParameters='
                'numa_node_as_socket); their CPUs taken as numbered in blocks.')
    if topo:
        why = f'lscpu on {probed_on} saw {topo.cpus} CPUs'
    elif no_probe:
        why = f'lscpu on a node: {no_probe}'
    else:
        why = f'lscpu on {probed_on} said none'
    if numa_as_socket:
        # Linux numbers a core's second thread after all the first ones: no blocks.
        why += (f'; Slurm counts them as sockets (numa_node_as_socket), but with '
                f'{size.threads_per_core} threads per core their CPUs are not numbered '
                f'in blocks')
    return [], (f'{FILL_IN}: the NUMA domains ({why}): add \'topology\': '
                f'{{\'numa_nodes\': [<one CPU mask per domain>]}}, or leave it out '
                f'(one domain assumed).')


def keeps_accounting(storage_type: str) -> bool:
    """Whether Slurm's AccountingStorageType keeps an accounting database: not
    where it is empty, ``(null)`` (Slurm 23.02.5 and later print that for none) or
    ``accounting_storage/none``."""
    value = storage_type.strip()
    return value not in ('', '(null)') and not value.endswith('/none')


def build(det: Detection, args: argparse.Namespace) -> Block:
    """The site file's dictionary, with its comments."""
    cluster = Block()
    slurm_name = det.config.get('ClusterName', '')
    name = args.name or (_sanitize(slurm_name) if slurm_name else '')
    if not name:
        raise SiteError('Slurm gives no ClusterName: name the system with --name NAME')
    cluster.add('name', name, 'The system\'s name in ReFrame (--system NAME, perflog paths): '
                + ('given with --name.' if args.name else 'Slurm\'s ClusterName.'))
    cluster.add('descr', f'{slurm_name or name}: Slurm {det.config.get("SLURM_VERSION", "")} '
                f'cluster ({", ".join(p.name for p in det.partitions)})'.replace('  ', ' '))
    short = det.host.split('.')[0]
    cluster.add('hostnames', [hostname_pattern(det.host)],
                f'The login nodes\' hostnames, from this one ({det.host}), every number '
                'standing for any.  ReFrame picks the first system whose pattern matches '
                '(``local`` matches everything): use --system NAME.',
                '' if re.search(r'\d', short) else
                f'{FILL_IN}: the other login nodes\' names, if they are not {short!r}.')
    tool = det.module_tool
    if tool:
        product = 'Lmod' if tool.kind == 'lmod' else 'Environment Modules'
        cluster.add('modules_system', tool.kind, f'{product} {tool.version} ({tool.cmd}).')
    else:
        cluster.add('modules_system', 'nomod', 'No Lmod and no Environment Modules found.')
    acct = det.config.get('AccountingStorageType', '')
    if not det.config:
        cluster.add('scheduler', 'squeue', f'{FILL_IN}: \'slurm\' where Slurm keeps an '
                    f'accounting database (sacct), else \'squeue\' (scontrol show config '
                    f'gave nothing).')
    elif keeps_accounting(acct):
        cluster.add('scheduler', 'slurm', f'Slurm keeps accounting ({acct}): jobs are polled '
                    'with sacct.')
    else:
        cluster.add('scheduler', 'squeue', 'No accounting database (AccountingStorageType='
                    f'{acct or "none"}): jobs are polled with squeue and the job script '
                    'records its exit status.')
    enforce = det.config.get('AccountingStorageEnforce', '')
    if args.access:
        cluster.add('access', list(args.access), 'sbatch options every job needs (--access).')
    else:
        cluster.add('access', [], f'{FILL_IN}: sbatch options every job needs (account, QoS, '
                    f'...), e.g. \'--account=PROJECT\'' + (
                        f': Slurm enforces {enforce}, so an account is probably needed.'
                        if enforce not in ('', 'none', '0', '(null)') else '; none seemed needed.'))
    cluster.add('max_jobs', 8, 'How many jobs ReFrame keeps submitted at once (per partition).')
    limit = min([30, *filter(None, (slurm_minutes(p.max_time) for p in det.partitions))])
    cluster.add('time_limit', f'{limit}m', 'Default time limit of a job; every check also sets '
                'its own' + (' (the partitions\' MaxTime allows no more).' if limit < 30 else '.'))
    cluster.add('prefix', '/scratch/FILL_IN/harness', 'Where builds, stage, outputs and '
                'reports go (default $HARNESS_VAR_DIR/<name>); perflogs always go to '
                '$HARNESS_VAR_DIR/perflogs/<name>/<partition>/.', commented_out=True)

    stacks = _stack_entries(det)
    modular = [s for s in det.stacks.values() if s.how == 'module']
    prepare = [f'. {shlex.quote(tool.init)}'] if tool and tool.init and modular else []
    prepare += [f'module use {shlex.quote(d)}'
                for d in dict.fromkeys(s.module_dir for s in modular) if d]
    if prepare:
        cluster.add('prepare_cmds', prepare, 'Run first in every job script: the job\'s shell '
                    'gets the module command and the folders of the stacks\' modules (drop '
                    'them where your batch shells have both).')

    partitions = Block()
    for part in det.partitions:
        _add_partitions(partitions, det, part, args,
                        [i.key for i in stacks.items if not i.commented_out])
    cluster.add('partitions', partitions, 'One partition per interconnect: the sbatch options '
                'that select its nodes, the nodes per run, the node\'s processor and memory, '
                'and per stack the variables that pin its traffic to the link.')
    cluster.add('stacks', stacks, 'One environment per MPI stack (per partition): the modules '
                'that provide it, its compiler wrapper, and how ranks start (srun with the '
                'PMI Slurm offers, or the stack\'s own launcher inside the allocation).  See '
                'config/cluster_template.py for every key.')
    return cluster


def _add_partitions(out: Block, det: Detection, part: SlurmPartition,
                    args: argparse.Namespace, stacks: list[str]) -> None:
    """A Slurm partition's entries added to `out`: one per link it measures."""
    nodes = [n for n in det.nodes if part.name in n.partitions]
    count = part.total_nodes or len(nodes)
    # At most the partition's nodes, and its MaxNodes (a job of more never starts).
    most = min(filter(None, (count, part.max_nodes)), default=0)
    per_run = max(1, min(args.nodes, most or args.nodes))
    if per_run == args.nodes:
        fewer_nodes = ''
    elif most == count:
        fewer_nodes = f' The partition has only {count}.'
    else:
        fewer_nodes = f' The partition\'s MaxNodes is {most}.'
    size, size_note = _node_size(det, part, nodes)
    sections = det.probes.get(part.nodes or part.name, {})
    probed_on = (sections.get('host', '').strip() or 'a node') if sections else ''
    links: list[Link] = []
    link_why = ''
    if sections:
        host = _probed_node(nodes, probed_on)
        features = sorted({f for n in nodes for f in n.features})
        links, link_why = choose_links(part.name, features, node_links(sections),
                                       host.addr if host else '')
    # One entry per link, named after the partition (and, where it has several, each
    # link's device); without a link, one whose link is left to fill in.
    targets: list[tuple[str, Link | None]]
    if len(links) > 1:
        targets = [(f'{part.name}_{_sanitize(x.device)}', x) for x in links]
    elif links:
        targets = [(part.name, links[0])]
    else:
        targets = [(part.name, None)]
    for key, link in targets:
        entry = Block()
        entry.add('descr', link.descr if link else f'Slurm partition {part.name} (link not '
                  f'detected)')
        entry.add('access', [f'--partition={part.name}', '--exclusive'],
                  f'Slurm partition {part.name} ({count} node(s): {part.nodes or "?"}).',
                  'Whole nodes (--exclusive): runs that hold a few CPUs per node '
                  '(point-to-point, small collectives) must not share them.')
        entry.add('nodes', per_run, 'Nodes per run: the layouts are R ranks per node x T '
                  'threads on every node.' + fewer_nodes)
        if size:
            proc, notes = _processor(size, parse_lscpu(sections.get('lscpu', '')), det,
                                     probed_on, det.probe_why.get(part.name, ''))
            entry.add('processor', proc, *([f'{FILL_IN}: {size_note}'] if size_note else []),
                      *notes)
            if size.memory_mib:
                entry.add('extras', {'mem_per_node': f'{size.memory_mib}MiB'},
                          'The node\'s memory (Slurm\'s RealMemory): the plan sizes the runs '
                          'for it.')
            else:
                entry.add('extras', {'mem_per_node': '<memory>GiB'},
                          f'{FILL_IN}: the node\'s memory (Slurm gives no RealMemory, or its '
                          f'default of 1 MiB): the plan sizes the runs for it; left out, it '
                          f'assumes 2 GiB per core.', commented_out=True)
        else:
            entry.add('processor', {}, f'{FILL_IN}: one node\'s processor (Slurm gave no node '
                      'size), or leave it out and let ReFrame detect it on a compute node: '
                      'RFM_REMOTE_DETECT=1 reframe -C config/settings.py --system NAME --list.',
                      commented_out=True)
        _add_transport(entry, det, part, link, link_why, sections, stacks)
        # Slurm's gpu.a100 and gpu_a100 are both gpu_a100 here: the second gets a number.
        name = _sanitize(key)
        taken = {i.key for i in out.items}
        if name in taken:
            name = next(f'{name}_{n}' for n in itertools.count(2) if f'{name}_{n}' not in taken)
        out.add(name, entry)


def _probed_node(nodes: Sequence[SlurmNode], probed_on: str) -> SlurmNode | None:
    """The node the probe ran on, from what `hostname` said there: Slurm's name or
    hostname of a node, else their short name (one may be the full name, the other not)."""
    for node in nodes:
        if probed_on in (node.hostname, node.name):
            return node
    names = {probed_on, probed_on.split('.')[0]}
    for node in nodes:
        if names & {node.hostname, node.name, node.hostname.split('.')[0]}:
            return node
    return None


def _add_transport(entry: Block, det: Detection, part: SlurmPartition, link: Link | None,
                   link_why: str, sections: dict[str, str], stacks: list[str]) -> None:
    if link is None:
        if sections:
            found = ', '.join(x.descr for x in node_links(sections)) or 'none'
            why = f'none of its links could be told apart (found: {found})'
        else:
            why = det.probe_why.get(part.name, 'no node was probed')
        login = (f' This login node has {", ".join(x.descr for x in det.login_links)}.'
                 if det.login_links else '')
        # The template's example of its first stack (the registry's first).
        ex = STACKS[0].name
        entry.add('transport_env', {}, f'{FILL_IN}: the variables that pin each stack to this '
                  f'partition\'s link ({why}), e.g. InfiniBand: {ex!r}: '
                  f'{_TEMPLATE["ib"]["transport_env"][ex]}; Ethernet: {ex!r}: '
                  f'{_TEMPLATE["eth"]["transport_env"][ex]} (see '
                  f'config/cluster_template.py).{login}', commented_out=True)
        return
    pins = {name: link.env(STACK[name]) for name in stacks}
    unknown = [name for name, env in pins.items() if env is None]
    others = [x.descr for x in node_links(sections) if x.device != link.device]
    notes = [f'The link: {link.descr}, on {sections.get("host", "").strip()} ({link_why}).']
    if link.kind in _TRANSPORT_NOTES:
        notes.append(f'{FILL_IN}: check these suit your builds: they assume '
                     f'{_TRANSPORT_NOTES[link.kind]}.')
    if unknown:
        notes.append(f'{FILL_IN}: how to pin {", ".join(unknown)} to it (not known here).')
    if others:
        notes.append(f'Its nodes also have: {"; ".join(others)} (a partition per link: copy '
                     'this one under another name, with that link\'s variables).')
    entry.add('transport_env', {name: env for name, env in pins.items() if env}, *notes)


def _stack_entries(det: Detection) -> Block:
    """The stacks found, then the others as placeholders (commented out
    unless none was found: the file needs one)."""
    block = Block()
    for stack in STACKS:
        found = det.stacks.get(stack.name)
        if found is None:
            continue
        entry = Block()
        version = f' {found.version}' if found.version and found.version != '?' else ''
        how = {'module': 'module ', 'debian': 'Debian\'s '}.get(found.how, '') + found.where
        entry.add('descr', f'{stack.descr}{version} ({how})')
        if found.modules:
            others = (f' Also there: {", ".join(found.others)}.' if found.others else '')
            entry.add('modules', found.modules, f'Loaded, and its launcher checked.{others}')
        entry.add('cc', found.cc)
        launch, note = _launch(stack, found, det.mpi_plugins, det.mpi_plugins_why)
        for key, value in slurm_systems.launch_keys(stack, launch).items():
            entry.add(key, value, note if key == 'launch' else '')
        _sysconfdir_entry(entry, stack, found)
        env = {**found.env, **stack.root_env_here()}
        if env:
            entry.add('env', env, 'Variables the stack always needs' + (
                ' (the generator ran as root: Open MPI needs these to run as root).'
                if stack.root_env_here() else '.'))
        block.add(stack.name, entry)
    none_found = not block.items
    for stack in STACKS:
        if stack.name in det.stacks:
            continue
        placeholder = {'descr': stack.descr, 'modules': [f'FILL_IN/{stack.name}'], 'cc': 'mpicc',
                       **slurm_systems.launch_keys(stack, stack.slurm_launch)}
        entry = Block([Item(key, value, []) for key, value in placeholder.items()])
        why = det.absent.get(stack.name)
        if none_found:
            block.add(stack.name, entry, f'{FILL_IN}: no MPI stack was found ({stack.name}: '
                      f'{why or "not found"}): the modules that provide {stack.descr}, or leave '
                      'it out.')
        else:
            block.add(stack.name, entry, f'{FILL_IN}: {stack.name} not found ('
                      f'{why or "no module, install or wrapper of it"}); uncomment and fill in '
                      'to use it.', commented_out=True)
    return block


def _sysconfdir_entry(entry: Block, stack: Stack, found: FoundStack) -> None:
    """A stack's ``sysconfdir`` where its tool said it, else a FILL IN note."""
    if not stack.sysconfdir_tool:
        return
    tool = ' '.join(stack.sysconfdir_tool)
    if found.sysconfdir:
        entry.add('sysconfdir', found.sysconfdir,
                  f'What `{tool}` says: HARNESS_MPI_ENV=clean runs read only the MCA '
                  'parameter files there, not the user\'s own.')
    else:
        entry.add('sysconfdir', '/FILL_IN/etc',
                  f'{FILL_IN}: what `{tool}` says with its modules loaded ('
                  f'{found.sysconfdir_why or "it said nothing"}); without it, '
                  'HARNESS_MPI_ENV=clean runs read the user\'s own MCA parameter files too.',
                  commented_out=True)


def _launch(stack: Stack, found: FoundStack, plugins: set[str],
            plugins_why: str) -> tuple[str, str]:
    """How a found stack's ranks start ('srun' or 'own'), and the note on it."""
    if stack.slurm_launch == 'own':
        return 'own', f'{stack.descr} starts its ranks with its own launcher here.'
    if stack.srun_pmi in plugins:
        return 'srun', f'srun --mpi={stack.srun_pmi}: Slurm offers it (srun --mpi=list).'
    if found.how != 'debian':
        why = (f'Slurm does not offer --mpi={stack.srun_pmi}' if plugins else plugins_why)
        return 'own', (f'{FILL_IN}: its own launcher inside the allocation ({why}); launch '
                       '\'srun\' with \'pmi\' where srun can start it.')
    return 'srun', (f'{FILL_IN}: srun --mpi={stack.srun_pmi} assumed '
                    f'({plugins_why or "Slurm does not list it"}).')


# ---- the summary and the file ------------------------------------------------------

def summary(det: Detection, cluster: Block, target: str) -> str:
    plain = cluster.plain()
    lines = [f'./harness site: Slurm cluster {det.config.get("ClusterName", "?")} '
             f'(Slurm {det.config.get("SLURM_VERSION", "?")}), seen from {det.host}',
             'detected:']
    for key, part in plain['partitions'].items():
        proc = part.get('processor') or {}
        numa = len((proc.get('topology') or {}).get('numa_nodes', [])) or '?'
        mem = (part.get('extras') or {}).get('mem_per_node', '?')
        lines.append(f'  partition {key}: {" ".join(part["access"])}, {part["nodes"]} node(s) '
                     f'per run, {proc.get("num_cpus", "?")} CPUs, {proc.get("num_sockets", "?")}'
                     f' socket(s), {numa} NUMA domain(s), {mem}; link: {part["descr"]}')
    for key, stack in plain['stacks'].items():
        if any(str(m).startswith('FILL_IN') for m in stack.get('modules', [])):
            continue
        if stack['launch'] == 'srun':
            how = f'srun --mpi={stack["pmi"]}'
        else:
            how = f'its own {stack["launcher"]}'
        lines.append(f'  stack {key}: {stack["descr"]}, cc {stack["cc"]}, {how}')
    lines.append(f'  modules system: {plain["modules_system"]}; scheduler: {plain["scheduler"]}')
    if det.mpi_plugins:
        lines.append(f'  srun --mpi: {", ".join(sorted(det.mpi_plugins))}')
    if det.login_links:
        lines.append(f'  on this login node: {"; ".join(x.descr for x in det.login_links)}')
    fill = cluster.fill_ins()
    lines.append(f'not detected ({FILL_IN} in the file): {len(fill)}' if fill else
                 f'not detected: nothing (no {FILL_IN} in the file)')
    lines += [f'  {x}' for x in fill]
    lines += [f'  note: {n}' for n in det.notes]
    lines.append(target)
    return '\n'.join(lines) + '\n'


def render(cluster: Block, det: Detection, name: str) -> str:
    """The site file: its docstring, then CLUSTER."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    return f'''"""The harness on Slurm cluster {name}: written by ``./harness site``.

Detected on {det.host} at {when} (config/sitegen.py; the form is
config/cluster_template.py's, which says what every key means).  Each ``{FILL_IN}``
comment marks what could not be detected: check it, put the right value, and
delete the mark.  ``./harness site`` never replaces this file unless told.

Check the result, on the cluster's login node::

    reframe -C config/settings.py --system {name} --show-config systems
    reframe -C config/settings.py -c checks --system {name} --list
    reframe -C config/settings.py -c checks --system {name} -n StreamCheck --dry-run

then a real run of one check: ``reframe ... --system {name} -n StreamCheck -r``.
"""

CLUSTER = {{
''' + '\n'.join(render_block(cluster, 4)) + '\n}\n'


def validate(text: str, var_dir: str) -> dict[str, Any]:
    """The file's CLUSTER, checked by config/slurm_systems.py as settings.py loads it."""
    namespace: dict[str, Any] = {}
    exec(compile(text, '<site file>', 'exec'), namespace)  # the text made just above
    # No note on a missing sysconfdir: the file's FILL IN says it.
    slurm_systems.cluster_config(namespace['CLUSTER'], var_dir, origin='the generated file',
                                 note=lambda msg: None)
    return namespace['CLUSTER']


def numbered(path: str) -> str:
    """The first free ``PATH.N`` (N = 1, 2, ...)."""
    return next(f'{path}.{n}' for n in itertools.count(1) if not os.path.lexists(f'{path}.{n}'))


#: The options of ``./harness site``: argparse's keywords.
_OPTIONS: dict[str, dict[str, Any]] = {
    '--name': {'help': 'the system\'s name (default: Slurm\'s ClusterName)'},
    '--output': {'metavar': 'PATH',
                 'help': 'the file to write (default: config/site_<name>.py of this checkout)'},
    '--partitions': {'type': split_list, 'default': [], 'metavar': 'A,B',
                     'help': 'Slurm partitions to use (default: every partition that is UP and '
                             'has nodes)'},
    '--nodes': {'type': int, 'default': 2,
                'help': 'nodes per run (default 2, at most the partition\'s nodes and MaxNodes)'},
    '--access': {'action': 'append', 'default': [], 'metavar': 'OPT',
                 'help': 'an sbatch option every job needs, e.g. --access=--account=proj '
                         '(repeat it; also given to the srun probes)'},
    '--no-srun': {'action': 'store_true',
                  'help': 'do not probe a node of each partition with srun (NUMA domains and '
                          'links are then left to fill in)'},
    '--srun-timeout': {'type': float, 'default': SRUN_TIMEOUT, 'metavar': 'S',
                       'help': 'seconds a node probe may take, queueing included (default '
                               f'{SRUN_TIMEOUT:.0f}, at most {SRUN_TIMEOUT_MAX:.0f})'},
}
#: What to do where the file exists (one at most).
_MODES = {'--dry-run': 'print the file on stdout (the summary on stderr); write nothing',
          '--force': 'where the file exists, write the next numbered file beside it',
          '--overwrite': 'where the file exists, replace it'}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog='./harness site', description='Detect this Slurm cluster (run it on a login node) '
        'and write config/site_<name>.py for the harness, in the form of '
        'config/cluster_template.py: FILL IN marks what it could not detect.',
        epilog='An existing file is never replaced: it refuses, naming it.  --force writes '
               'the next numbered file beside it (PATH.1, PATH.2, ...: settings.py does not '
               'load it until you move it over the old one); --overwrite replaces the file.')
    for flag, options in _OPTIONS.items():
        ap.add_argument(flag, **options)
    mode = ap.add_mutually_exclusive_group()
    for flag, text in _MODES.items():
        mode.add_argument(flag, action='store_true', help=text)
    args = ap.parse_args(argv)
    if args.name is not None and not NAME_RE.fullmatch(args.name):
        ap.error(f'--name {args.name!r}: a ReFrame system name is letters, digits, _ and -, '
                 f'starting with a letter or _')
    if args.nodes < 1:
        ap.error(f'--nodes must be at least 1, got {args.nodes}')
    if not (math.isfinite(args.srun_timeout) and 0 < args.srun_timeout <= SRUN_TIMEOUT_MAX):
        ap.error(f'--srun-timeout must be a number of seconds above 0 and at most '
                 f'{SRUN_TIMEOUT_MAX:.0f}, got {args.srun_timeout}')
    for opt in args.access:
        if not opt.startswith('-') or '\n' in opt or '\0' in opt:
            ap.error(f'--access {opt!r}: an sbatch option, e.g. --access=--account=PROJECT')
    if args.output is not None:
        if not args.output.strip() or args.output.endswith(os.sep):
            ap.error(f'--output {args.output!r}: a file path')
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder):
            ap.error(f'--output {args.output}: no folder {folder}')
    return args


def _fail(message: str, code: int) -> int:
    print(f'harness site: error: {message}', file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None, runner: Runner = run,
         environ: Mapping[str, str] | None = None) -> int:
    args = parse_args(argv)
    env = dict(os.environ if environ is None else environ)
    # config/slurm_systems.py reads HARNESS_MODULES_SYSTEM (of this process) as it
    # checks the file made: a bad value, in the environment detected or there, is the
    # caller's, named before anything is asked.
    try:
        for environment in (env, os.environ):
            slurm_systems.modules_system_override(environment)
    except ValueError as err:
        return _fail(str(err), 2)
    try:
        det = detect(args, env, runner)
        cluster = build(det, args)
    except SiteError as err:
        return _fail(str(err), 2)
    name = cluster.plain()['name']
    text = render(cluster, det, name)
    try:
        loaded = validate(text, paths.var_dir())
    except (ValueError, SyntaxError, KeyError, TypeError) as err:
        return _fail(f'the file made does not pass config/slurm_systems.py ({err}); this is a '
                     'bug of the generator: please report it', 3)
    if loaded != cluster.plain():
        return _fail('the file made does not read back as what was detected (a bug of the '
                     'generator)', 3)
    path = args.output or os.path.join(_HERE, f'site_{name}.py')
    if args.dry_run:
        sys.stdout.write(text)
        sys.stderr.write(summary(det, cluster, f'dry run: {path} not written'))
        return 0
    exists = os.path.lexists(path)
    if exists and not (args.force or args.overwrite):
        return _fail(f'{path} exists: not replaced (--force writes the next numbered file '
                     'beside it, --overwrite replaces it, --dry-run prints it)', 1)
    target = numbered(path) if exists and args.force else path
    try:
        (atomic.write_replacing if exists and args.overwrite else atomic.write_new)(target, text)
    except OSError as err:
        return _fail(f'cannot write {target}: {err.strerror}', 1)
    note = (f'wrote {target} (beside the existing {os.path.basename(path)}: compare them, '
            f'then move it over to use it)' if target != path else f'wrote {target}')
    sys.stdout.write(summary(det, cluster, note))
    return 0


if __name__ == '__main__':
    sys.exit(main())
