"""The MPI stacks the harness knows: one entry each, the only place their facts live.

=========  ==========================================  ============================
stack      found at (Debian's suffixed tools)           or at the prefix named by
=========  ==========================================  ============================
openmpi    ``mpicc.openmpi`` + ``mpirun.openmpi``       ``HARNESS_OPENMPI_PREFIX``
mpich      ``mpicc.mpich`` + ``mpiexec.mpich``          ``HARNESS_MPICH_PREFIX``
mvapich2   only where its prefix is given               ``HARNESS_MVAPICH2_PREFIX``
=========  ==========================================  ============================

A prefix means ``<prefix>/bin/mpicc`` and the first of the stack's
``launchers`` there.  A stack's name is also its environment's name, its
*family* (how its launcher binds ranks: ``family`` in a cluster's stack
defaults to the name) and its Spack package.

The configuration, the Slurm systems, the Spack site, the launch and the
OSU checks read the table.  Adding a stack is one ``Stack`` in ``STACKS``
(and its module file, ``config/modules/files/<name>.lua``, for the test
cluster); ``tests/test_stacks.py`` checks the entry, that no other source
names a stack, and that every reader makes one environment per entry.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
from collections.abc import Mapping
from typing import Literal

#: How a stack's own launcher is told to bind ranks: ``orte`` is Open MPI's
#: ``mpirun`` (ORTE, PRRTE from 5.0: MCA variables), ``hydra`` MPICH's
#: process manager (``HYDRA_*`` variables).
LauncherKind = Literal['orte', 'hydra']
#: How the harness's own Slurm systems start a stack's ranks inside the
#: allocation: ``srun --mpi=<srun_pmi>``, or the stack's ``own`` launcher.
SlurmLaunch = Literal['srun', 'own']

#: Placeholders of the link variables: the network interface
#: (``tcp_nodes_env``), the InfiniBand/RoCE port and its HCA (``ib_env``:
#: ``mlx5_0:1``, ``mlx5_0``), the libfabric provider (``ofi_env``: ``cxi``).
IFACE = '{iface}'
DEVICE = '{device}'
HCA = '{hca}'


def _env(**variables: str) -> Mapping[str, str]:
    """A read-only mapping of environment variables (the entries are shared)."""
    return types.MappingProxyType(dict(variables))


def _fill(env: Mapping[str, str], **values: str) -> dict[str, str]:
    """`env` with its ``{placeholder}`` words replaced by `values`."""
    out = {}
    for key, value in env.items():
        for name, text in values.items():
            value = value.replace(f'{{{name}}}', text)
        out[key] = value
    return out


@dataclasses.dataclass(frozen=True)
class Stack:
    """One MPI stack."""

    #: Environment name, family, Spack package; ``HARNESS_<NAME>_PREFIX``.
    name: str
    #: Its name in prose (``extras.descr``, messages).
    descr: str
    #: Debian's suffix of its tools (``mpicc.openmpi``), or None where it is
    #: found only at the prefix ``prefix_var`` names.
    suffix: str | None
    #: Debian's packages of the stack (empty where Debian has none).
    debian_packages: tuple[str, ...]
    #: Names of its launcher in ``<prefix>/bin``, the preferred first (with
    #: ``suffix``: the suffixed launcher is the first of them).
    launchers: tuple[str, ...]
    #: How its launcher binds ranks (``harnesslib.launch.rank_binding_env``).
    launcher_kind: LauncherKind
    #: Words one of which its launcher's ``--version`` prints (a prefix given
    #: for this stack must hold this stack's launcher).
    launcher_says: tuple[str, ...]
    #: The options of its launcher that place ``{k}`` ranks on each node of
    #: the allocation, in rank order (ranks 0..k-1 on the first node; ``{pe}``:
    #: ``:PE=<cores>`` for ranks of several cores, else ''): an own launcher
    #: fills the first node's slots first (``harnesslib.launch.launch_line``).
    per_node_options: tuple[str, ...]
    #: Programs its launcher starts by name from its own folder (linked into
    #: the stack's folder of generic names).
    launcher_helpers: tuple[str, ...]
    #: Variables that go with the launcher's rank binding, always.
    binding_env: Mapping[str, str]
    #: Variables it needs to run as root (CI machines are root).
    root_env: Mapping[str, str]
    #: What MPI_Get_library_version's first line starts with: how a run proves
    #: which library it linked.
    library_prefix: str
    #: What that line says for a version of it seen here (synthetic records,
    #: tests), or None.
    library_example: str | None
    #: The compiler wrapper's option that prints its link line.
    wrapper_link_flag: str
    #: Variables its compiler wrapper reads that change what it compiles (the
    #: compiler, its flags): a build under them names them and builds apart
    #: (``harnesslib.build.wrapper_settings``).
    wrapper_vars: tuple[str, ...]
    #: Its version in its tools' output (group: the version).
    version_re: re.Pattern[str]
    #: Tools that print it, tried in turn (``{suffix}``: the stack's suffix
    #: where it is found by its suffixed tools, else '').
    version_tools: tuple[tuple[str, ...], ...]
    #: Transport variables per link: ``shm``, one node's default;
    #: ``tcp``, TCP over the loopback interface (``local``, ``local-slurm``);
    #: ``tcp_nodes``, TCP between nodes over ``{iface}`` (the test cluster);
    #: ``ib``, InfiniBand or RoCE port ``{device}`` of HCA ``{hca}``;
    #: ``ofi``, libfabric provider ``{device}`` (None: not known for it).
    shm_env: Mapping[str, str]
    tcp_env: Mapping[str, str]
    tcp_nodes_env: Mapping[str, str]
    ib_env: Mapping[str, str] | None
    ofi_env: Mapping[str, str] | None
    #: Prefixes of its own tuning variables (its MCA parameters or CVARs and
    #: their aliases, its launcher's): ``HARNESS_MPI_ENV`` handles them.
    tuning_prefixes: tuple[str, ...]
    #: The user's own configuration files its launcher or library reads:
    #: (the variable that names other files instead, the file under $HOME).
    user_files: tuple[tuple[str, str], ...]
    #: The variables of those files that only its own launcher reads (Hydra's
    #: file, PRRTE's): under srun nothing reads them (``user_config_files``).
    launcher_files: tuple[str, ...]
    #: The options of those files that set a variable for the ranks over the
    #: environment's value (Hydra's ``-genv``, ``-env``): one that changes a
    #: partition's pinned transport fails the run (``harnesslib.launch.user_file_settings``).
    user_file_sets: tuple[str, ...]
    #: What keeps those files out of a run in ``HARNESS_MPI_ENV=clean`` mode,
    #: the site's own files kept (``{sysconfdir}``: the folder ``sysconfdir_tool``
    #: prints).
    clean_files_env: Mapping[str, str]
    #: The variables of ``clean_files_env`` set only where their file is in
    #: that folder (the others always: ``harnesslib.launch.clean_files_env``).
    clean_files_optional: tuple[str, ...]
    #: The tool and options that print its system configuration folder
    #: (``Sysconfdir: <path>``), where ``clean_files_env`` needs it; () if not.
    sysconfdir_tool: tuple[str, ...]
    #: What ``srun --mpi=`` it needs where a cluster says nothing.
    srun_pmi: str
    #: How the harness's own Slurm systems start its ranks.
    slurm_launch: SlurmLaunch

    @property
    def prefix_var(self) -> str:
        """The knob naming its install prefix."""
        return f'HARNESS_{self.name.upper()}_PREFIX'

    @property
    def spack_spec_var(self) -> str:
        """The knob giving the Spack spec of its kernel builds."""
        return f'HARNESS_{self.name.upper()}_SPACK_SPEC'

    @property
    def spack_package(self) -> str:
        return self.name

    @property
    def suffixed_tools(self) -> tuple[str, str] | None:
        """Its compiler wrapper and launcher under Debian's suffixed names."""
        if self.suffix is None:
            return None
        return f'mpicc{self.suffix}', f'{self.launchers[0]}{self.suffix}'

    def per_node(self, k: int, cores_per_rank: int = 1) -> list[str]:
        """``per_node_options`` for `k` ranks per node of `cores_per_rank` cores."""
        pe = f':PE={cores_per_rank}' if cores_per_rank > 1 else ''
        return [o.replace('{k}', str(k)).replace('{pe}', pe) for o in self.per_node_options]

    def tcp_nodes(self, iface: str) -> dict[str, str]:
        """``tcp_nodes_env`` over the network interface `iface`."""
        return _fill(self.tcp_nodes_env, iface=iface)

    def ib(self, device: str) -> dict[str, str] | None:
        """``ib_env`` over the port `device` (``mlx5_0:1``), or None."""
        if self.ib_env is None:
            return None
        return _fill(self.ib_env, device=device, hca=device.split(':')[0])

    def ofi(self, provider: str) -> dict[str, str] | None:
        """``ofi_env`` with the libfabric `provider`, or None."""
        return None if self.ofi_env is None else _fill(self.ofi_env, device=provider)

    def clean_files(self, sysconfdir: str = '') -> dict[str, str]:
        """``clean_files_env`` with its system configuration folder."""
        return _fill(self.clean_files_env, sysconfdir=sysconfdir)

    def clean_files_at(self, sysconfdir: str = '') -> dict[str, str]:
        """``clean_files`` of the system configuration folder `sysconfdir` as a
        run gets them: each of ``clean_files_optional`` only where its file is
        in that folder (``harnesslib.launch.clean_files_env`` says why)."""
        return {var: path for var, path in self.clean_files(sysconfdir).items()
                if var not in self.clean_files_optional or os.path.isfile(path)}

    def version_in(self, text: str) -> str:
        """The version ``version_re`` finds in a tool's `text`, '' where none."""
        m = self.version_re.search(text)
        return next(g for g in m.groups() if g) if m else ''

    def launcher_is_mine(self, version_text: str) -> bool:
        """Whether a launcher's ``--version`` text says it is this stack's
        (one of ``launcher_says``)."""
        return any(word in version_text for word in self.launcher_says)

    def root_env_here(self) -> dict[str, str]:
        """``root_env`` where this process runs as root, else nothing."""
        return dict(self.root_env) if hasattr(os, 'geteuid') and os.geteuid() == 0 else {}


#: MPICH's CVARs under their three names, hydra's and mpiexec's variables.
_MPICH_TUNING = ('MPIR_CVAR_', 'MPICH_', 'MPIR_PARAM_', 'HYDRA_', 'MPIEXEC_')

#: What MPICH and the stacks built on it share: MPICH's hydra launcher (and
#: the PMI-2 of ``srun`` its ranks take), its wrapper's and version tools.
_MPICH_FAMILY: dict = dict(
    launchers=('mpiexec', 'mpirun'),
    launcher_kind='hydra',
    launcher_says=('HYDRA',),
    # Hydra's -ppn: k ranks on each host of its list, in order (its binding
    # stays HYDRA_BINDING's).
    per_node_options=('-ppn', '{k}'),
    launcher_helpers=('hydra_pmi_proxy',),
    wrapper_link_flag='-show',
    # mpicc's compiler (MPICH_CC) and profiling library (MPICC_PROFILE)
    wrapper_vars=('MPICH_CC', 'MPICC_PROFILE'),
    version_tools=(('mpichversion{suffix}',), ('mpichversion',), ('mpiname', '-a')),
    # Hydra reads HYDRA_CONFIG_FILE, else ~/.mpiexec.hydra.conf (its -genv
    # and -env lines override a partition's pinned transport); /dev/null: no file.
    user_files=(('HYDRA_CONFIG_FILE', '.mpiexec.hydra.conf'),),
    launcher_files=('HYDRA_CONFIG_FILE',),
    user_file_sets=('-genv', '-env'),
    clean_files_env=_env(HYDRA_CONFIG_FILE='/dev/null'),
    clean_files_optional=(),
    sysconfdir_tool=(),
    srun_pmi='pmi2',
)

STACKS: tuple[Stack, ...] = (
    Stack(
        name='openmpi',
        descr='Open MPI',
        suffix='.openmpi',
        debian_packages=('openmpi-bin', 'libopenmpi-dev'),
        launchers=('mpirun', 'mpiexec'),
        launcher_kind='orte',
        launcher_says=('Open MPI', 'OpenRTE', 'PRRTE'),
        # Its mapping policy (the binding's OMPI_MCA_rmaps_base_mapping_policy
        # core, or slot:PE=t) becomes k per node; the binding policy stays.
        per_node_options=('--map-by', 'ppr:{k}:node{pe}'),
        launcher_helpers=(),
        binding_env=_env(),
        # Open MPI refuses to run as root unless told.
        root_env=_env(OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1'),
        library_prefix='Open MPI',
        library_example='Open MPI v4.1.4',
        wrapper_link_flag='-showme:link',
        # the opal wrapper's compiler and the flags it adds (help-opal-wrapper.txt)
        wrapper_vars=('OMPI_CC', 'OMPI_CPPFLAGS', 'OMPI_CFLAGS', 'OMPI_LDFLAGS', 'OMPI_LIBS'),
        version_re=re.compile(r'\(Open MPI\)\s+(\d[\w.]*)|Open MPI v(\d[\w.]*)'),
        version_tools=(('mpirun{suffix}', '--version'), ('ompi_info', '--version')),
        # The transport each partition claims, pinned (the ob1 PML: the BTLs
        # are the only transports; a UCX PML would ignore them).
        shm_env=_env(OMPI_MCA_pml='ob1', OMPI_MCA_btl='self,vader'),
        # Open MPI excludes the loopback interface by default.
        tcp_env=_env(OMPI_MCA_pml='ob1', OMPI_MCA_btl='self,tcp',
                     OMPI_MCA_btl_tcp_if_include='lo'),
        # Between nodes vader stays for the ranks of one node; the runtime's
        # own traffic (oob) takes the link as well.
        tcp_nodes_env=_env(OMPI_MCA_pml='ob1', OMPI_MCA_btl='self,vader,tcp',
                           OMPI_MCA_btl_tcp_if_include=IFACE,
                           OMPI_MCA_oob_tcp_if_include=IFACE),
        # Through UCX, or libfabric's MTL.
        ib_env=_env(OMPI_MCA_pml='ucx', UCX_NET_DEVICES=DEVICE),
        ofi_env=_env(OMPI_MCA_pml='cm', OMPI_MCA_mtl='ofi', FI_PROVIDER=DEVICE),
        tuning_prefixes=('OMPI_MCA_', 'PRTE_MCA_', 'PMIX_MCA_'),
        # Each reads the user's file unless its *_mca_base_param_files names
        # others; clean runs read only the system's (site's) files: Open MPI's
        # always, PRRTE's and PMIx's where they are in its sysconfdir (bundled,
        # Open MPI 5; an external one keeps its own site file and its user file,
        # recorded; Open MPI 4 ignores PRTE_).
        user_files=(('OMPI_MCA_mca_base_param_files', '.openmpi/mca-params.conf'),
                    ('PRTE_MCA_mca_base_param_files', '.prte/mca-params.conf'),
                    ('PMIX_MCA_mca_base_param_files', '.pmix/mca-params.conf')),
        # the library and the PMIx client read theirs in each rank, under any launcher
        launcher_files=('PRTE_MCA_mca_base_param_files',),
        # an exported OMPI_MCA_ variable wins over these files
        user_file_sets=(),
        clean_files_env=_env(
            OMPI_MCA_mca_base_param_files='{sysconfdir}/openmpi-mca-params.conf',
            PRTE_MCA_mca_base_param_files='{sysconfdir}/prte-mca-params.conf',
            PMIX_MCA_mca_base_param_files='{sysconfdir}/pmix-mca-params.conf'),
        clean_files_optional=('PRTE_MCA_mca_base_param_files',
                              'PMIX_MCA_mca_base_param_files'),
        sysconfdir_tool=('ompi_info', '--path', 'sysconfdir'),
        srun_pmi='pmix',
        slurm_launch='srun',
    ),
    Stack(
        name='mpich',
        descr='MPICH',
        suffix='.mpich',
        debian_packages=('mpich', 'libmpich-dev'),
        **_MPICH_FAMILY,
        binding_env=_env(),
        root_env=_env(),
        library_prefix='MPICH',
        library_example='MPICH Version: 4.0.2',
        version_re=re.compile(r'^MPICH Version:\s+(\d[\w.]*)', re.M),
        # Debian's MPICH is ch4:ucx: UCX's transports are its transports.
        shm_env=_env(UCX_TLS='sm,self'),
        tcp_env=_env(UCX_TLS='tcp,self', UCX_NET_DEVICES='lo'),
        tcp_nodes_env=_env(UCX_TLS='tcp,self', UCX_NET_DEVICES=IFACE),
        # Debian's ch4:ucx (or an OFI build): told the device.
        ib_env=_env(UCX_NET_DEVICES=DEVICE),
        ofi_env=_env(FI_PROVIDER=DEVICE),
        tuning_prefixes=_MPICH_TUNING,
        slurm_launch='srun',
    ),
    Stack(
        name='mvapich2',
        descr='MVAPICH2',
        suffix=None,
        debian_packages=(),
        # MVAPICH2 is built on MPICH: its launcher is MPICH's hydra.
        **_MPICH_FAMILY,
        # Its own library binding is off: built with ch3:sock (TCP only) it
        # cannot see which ranks share a node and binds them all to the same
        # core, and it would put a hybrid rank's threads on one core.
        binding_env=_env(MV2_ENABLE_AFFINITY='0'),
        root_env=_env(),
        library_prefix='MVAPICH2',
        library_example=None,
        version_re=re.compile(r'^MVAPICH2 Version:\s+(\d[\w.]*)', re.M),
        # Built with the TCP-only ch3:sock device here; on a cluster the site
        # configuration picks the device.  Nothing to force on one node (its
        # shm partition is TCP as well: ch3:sock has no shared memory);
        # between nodes hydra is told the interface of every rank.
        shm_env=_env(),
        tcp_env=_env(),
        tcp_nodes_env=_env(HYDRA_IFACE=IFACE),
        # Told its HCA.
        ib_env=_env(MV2_IBA_HCA=HCA),
        ofi_env=None,
        tuning_prefixes=(*_MPICH_TUNING, 'MV2_'),
        # An MVAPICH2 built here (hydra, ch3:sock) keeps its own mpiexec,
        # which starts its ranks inside the allocation.
        slurm_launch='own',
    ),
)

#: The stacks by name (a family is a stack's name).
STACK: Mapping[str, Stack] = types.MappingProxyType({s.name: s for s in STACKS})


def default_stacks(environ: Mapping[str, str]) -> list[str]:
    """The stacks a system takes where ``HARNESS_STACKS`` names none: Debian's
    (found by their suffixed tools), the others only where their prefix is
    given in `environ`."""
    return [s.name for s in STACKS
            if s.suffix is not None or environ.get(s.prefix_var, '').strip()]


def install_hint() -> str:
    """How to get a stack (a message's end): Debian's packages or a prefix."""
    packaged = ' or '.join('/'.join(s.debian_packages) for s in STACKS if s.debian_packages)
    prefixed = ' or '.join(s.prefix_var for s in STACKS if not s.debian_packages)
    return f"install Debian's {packaged}" + (f', or set {prefixed}' if prefixed else '')


def sysconfdir_in(text: str) -> str:
    """The folder a stack's ``sysconfdir_tool`` names in its `text`
    (``Sysconfdir: <path>``), '' where none."""
    found = re.search(r'Sysconfdir:\s*(\S+)', text)
    return found.group(1) if found else ''
