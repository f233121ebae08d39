"""This machine's CPUs, from what Linux says of them (/sys) and of this
process's cgroup (/proc): the processor of the local partitions
(config/settings.py) and of the test clusters on this machine
(config/slurm_systems.py), one function for both, and the cores the plan counts
where a partition declares none (``plan.cores_per_node``).  `root`: the folder
that holds /sys and /proc (None: ``SYS_ROOT``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sized

#: Where /sys and /proc are read from (a test points it at a folder faking them).
SYS_ROOT = '/'


def cpu_list(text: str) -> set[int]:
    """The CPUs of a Linux CPU list (``0-3,8``; blank: none)."""
    cpus: set[int] = set()
    for part in text.strip().split(','):
        if not part:
            continue
        first, _, last = part.partition('-')
        if not first.isdecimal() or not (last or first).isdecimal():
            raise ValueError(f'not a CPU list: {text.strip()!r}')
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def cpu_list_text(cpus: Iterable[int]) -> str:
    """`cpus` as a Linux CPU list, runs joined (``0-3,8``)."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ','.join(str(a) if a == b else f'{a}-{b}' for a, b in runs)


def _read_text(root: str | None, path: str) -> str | None:
    """The text of the file `path` under `root`, None where it cannot be read."""
    try:
        with open(os.path.join(root or SYS_ROOT, path.lstrip('/')),
                  encoding='utf-8') as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _read_cpus(root: str | None, path: str) -> set[int]:
    """The CPU list in the file `path` under `root` (none where unreadable)."""
    try:
        return cpu_list(_read_text(root, path) or '')
    except ValueError:
        return set()


def online_cpus(root: str | None = None) -> set[int]:
    """This machine's online CPUs (``/sys/devices/system/cpu/online``)."""
    return (_read_cpus(root, 'sys/devices/system/cpu/online')
            or set(range(os.cpu_count() or 1)))


def _unescape(path: str) -> str:
    """A path of /proc/self/mountinfo, its octal escapes (a space: ``\\040``) undone."""
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), path)


def cgroup_cpus(root: str | None = None) -> set[int]:
    """The CPUs of this process's cgroup cpuset, where it can be read (none
    where not): cgroup v1's ``cpuset.effective_cpus`` where the cpuset
    controller is v1's, else v2's ``cpuset.cpus.effective`` of the process's
    cgroup or of the nearest parent that has it (hwloc, and with it both MPI
    launchers, binds within this set)."""
    cgroup = _read_text(root, 'proc/self/cgroup') or ''
    mounts = _read_text(root, 'proc/self/mountinfo') or ''
    mine: dict[str, str] = {}       # file system type: the process's cgroup in it
    for line in cgroup.splitlines():
        hierarchy, _, rest = line.partition(':')
        controllers, _, path = rest.partition(':')
        if hierarchy == '0' and not controllers:
            mine['cgroup2'] = path
        elif 'cpuset' in controllers.split(','):
            mine['cgroup'] = path
    for fstype, name in (('cgroup', 'cpuset.effective_cpus'),
                         ('cgroup2', 'cpuset.cpus.effective')):
        for line in mounts.splitlines():
            left, sep, right = line.partition(' - ')
            fields, tail = left.split(), right.split()
            if (not sep or len(fields) < 5 or len(tail) < 3 or tail[0] != fstype
                    or fstype not in mine
                    or (fstype == 'cgroup' and 'cpuset' not in tail[2].split(','))):
                continue
            top = _unescape(fields[4])
            rel = os.path.relpath(mine[fstype], _unescape(fields[3]))
            if rel == '..' or rel.startswith('../'):
                continue        # the process's cgroup is not under this mount
            folder = os.path.normpath(os.path.join(top, rel))
            while True:
                cpus = _read_cpus(root, os.path.join(folder, name))
                if cpus:
                    return cpus
                if folder == top or folder == os.path.dirname(folder):
                    break
                folder = os.path.dirname(folder)
    return set()


def launcher_cpus(root: str | None = None) -> set[int]:
    """The CPUs the MPI launchers bind ranks to on this machine: the online
    CPUs within the cgroup's cpuset where it can be read.  hwloc (Open MPI's
    and hydra's binding) honours a cgroup cpuset (a Slurm job's), not the
    affinity mask of the process that starts them (taskset, numactl)."""
    online = online_cpus(root)
    return (online & cgroup_cpus(root)) or online


def narrowed_affinity(affinity: set[int] | None = None, root: str | None = None) -> str:
    """Why runs started from this process would leave its CPUs, or '': its
    affinity mask (`affinity`, default this process's) narrower than the CPUs
    the launchers bind ranks to (``launcher_cpus``).  The plan, the cores and
    the quiet snapshot would count the mask's CPUs while the ranks run on the
    others."""
    mine = set(os.sched_getaffinity(0) if affinity is None else affinity)
    wider = launcher_cpus(root)
    if not wider - mine:
        return ''
    return (f'this process may only run on CPUs {cpu_list_text(mine)} (its affinity mask: '
            f'taskset, numactl), but the MPI launchers bind ranks to any of CPUs '
            f'{cpu_list_text(wider)} (online, within its cgroup\'s cpuset): the runs would '
            f'leave the CPUs the harness plans and watches; run without taskset/numactl, '
            f'or inside a cgroup or Slurm allocation of the CPUs to use')


def _numa_nodes(root: str | None) -> dict[int, int]:
    """The NUMA node of each CPU (/sys/devices/system/node; none where unknown)."""
    base = os.path.join(root or SYS_ROOT, 'sys/devices/system/node')
    try:
        names = os.listdir(base)
    except OSError:
        return {}
    node_of: dict[int, int] = {}
    for name in names:
        if re.fullmatch(r'node[0-9]+', name):
            for cpu in _read_cpus(root, f'sys/devices/system/node/{name}/cpulist'):
                node_of[cpu] = int(name[4:])
    return node_of


def _mask(cpus: Iterable[int]) -> str:
    """`cpus` as ReFrame's topology writes a set of CPUs (a hex mask)."""
    return hex(sum(1 << cpu for cpu in set(cpus)))


def _even(groups: Iterable[Sized]) -> bool:
    """All of `groups` the same size."""
    return len({len(g) for g in groups}) <= 1


def host_processor(cpus: Iterable[int] | None = None, root: str | None = None) -> dict:
    """The processor of this machine in ReFrame's terms, for the CPUs `cpus`
    (default: this process's affinity mask), from /sys: its physical cores
    (the distinct (package, die, core_id) of the CPUs, as the kernels count
    them: hardware threads of one core are one core, and core_id counts within
    a die on a package of several), sockets (packages), NUMA nodes (``topology.numa_nodes``,
    where /sys has them) and hardware threads per core.  Where the cores have
    unequal numbers of threads among `cpus`, it declares one CPU per core (the
    harness counts cores: ``num_cpus // num_cpus_per_core``).  Where they take
    unequal numbers of cores of the sockets, or of the NUMA nodes, it declares
    one socket, or no NUMA nodes: no layout places a rank per socket or per
    domain on them."""
    chosen = sorted(set(os.sched_getaffinity(0) if cpus is None else cpus))
    if not chosen:
        raise ValueError('host_processor: no CPUs')
    cores: dict[tuple[str, str, str], list[int]] = {}
    sockets: dict[str, list[int]] = {}
    for cpu in chosen:
        topo = f'sys/devices/system/cpu/cpu{cpu}/topology'
        package = (_read_text(root, f'{topo}/physical_package_id') or '').strip()
        core = (_read_text(root, f'{topo}/core_id') or '').strip()
        die = (_read_text(root, f'{topo}/die_id') or '').strip() or '0'
        if not package or not core:
            package, core = '0', f'cpu{cpu}'    # unknown: a core of its own
        cores.setdefault((package, die, core), []).append(cpu)
        sockets.setdefault(package, []).append(cpu)
    # equal threads per core, not only a total they divide (SMT-4 cores of 4
    # and 2 CPUs are not 2 cores of 3)
    threads = len(chosen) // len(cores) if _even(cores.values()) else 1
    num_cpus = threads * len(cores)
    topology: dict[str, list[str]] = {}
    node_of = _numa_nodes(root)
    core_of = {cpu: key for key, members in cores.items() for cpu in members}
    if all(cpu in node_of for cpu in chosen):
        nodes: dict[int, list[int]] = {}
        for cpu in chosen:
            nodes.setdefault(node_of[cpu], []).append(cpu)
        if _even({core_of[c] for c in n} for n in nodes.values()):
            topology['numa_nodes'] = [_mask(nodes[n]) for n in sorted(nodes)]
    # CPUs that take unequal shares of the sockets (an allocation of 6 cores
    # of one and 2 of another) have no layout per socket: one socket
    if not _even({core_of[c] for c in s} for s in sockets.values()):
        sockets = {'0': chosen}
    topology['sockets'] = [_mask(c) for c in sockets.values()]
    topology['cores'] = [_mask(c) for c in cores.values()]
    return {
        'num_cpus': num_cpus,
        'num_cpus_per_core': threads,
        'num_sockets': len(sockets),
        'num_cpus_per_socket': max(1, num_cpus // len(sockets)),
        'topology': topology,
    }


def host_cores(cpus: Iterable[int] | None = None, root: str | None = None) -> int:
    """Physical cores of `cpus` (default: this process's affinity mask)."""
    proc = host_processor(cpus, root)
    return proc['num_cpus'] // proc['num_cpus_per_core']
