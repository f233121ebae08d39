"""Template: the harness on a centre's Slurm cluster.

On the cluster's login node, ``./harness site`` writes ``config/site_<cluster>.py``
in this form, marking with ``FILL IN`` what it could not detect; or copy this file
there by hand and fill in every ``FILL IN`` (docs/pages/cluster.md).
``config/settings.py`` loads every ``config/site_*.py`` (or ``HARNESS_CLUSTERS``);
unknown or missing keys are errors that name the file and the key.

Check the result, on the cluster's login node (or anywhere with
``--system <name>``; ``HARNESS_MODULES_SYSTEM=nomod`` where the modules
system is absent)::

    reframe -C config/settings.py --system example-hpc --show-config systems
    reframe -C config/settings.py --system example-hpc --show-config environments
    reframe -C config/settings.py -c checks --system example-hpc --list
    reframe -C config/settings.py -c checks --system example-hpc -n StreamCheck --dry-run
    # then read the job scripts: $HARNESS_VAR_DIR/example-hpc/stage/.../rfm_job.sh
    # (#SBATCH lines, the modules, SLURM_MPI_TYPE and SLURM_CPU_BIND, the srun line)

``--list`` shows every layout R x T (R ranks per node, T threads per rank,
R*T = cores per node) the node's processor gives; ``--dry-run`` writes the job
scripts without submitting them.  Then a real run of one check:
``reframe ... --system example-hpc -n StreamCheck -r``.

This file is itself a working example: ``HARNESS_CLUSTERS=config/cluster_template.py``
loads it (the tests do, with ``--list`` and ``--dry-run``).
"""

# FILL IN: one node's processor (the layouts come from it), here the same in
# both partitions below; or leave a partition's 'processor' out and let ReFrame
# detect it on a compute node:
# RFM_REMOTE_DETECT=1 reframe -C config/settings.py --system NAME --list
# 'num_cpus' counts hardware threads, as Slurm counts CPUs; the harness asks for
# whole cores (docs/pages/cluster.md, hardware threads).  Where slurm.conf
# schedules cores (CPUs = cores), write 'num_cpus_per_core': 1.
NODE = {
    'num_cpus': 128,
    'num_cpus_per_core': 1,
    'num_sockets': 2,
    'num_cpus_per_socket': 64,
}

CLUSTER = {
    # FILL IN: the system's name in ReFrame (--system NAME, perflog paths).
    'name': 'example-hpc',
    'descr': 'Example cluster: InfiniBand and Ethernet partitions',
    # FILL IN: regular expressions of the login nodes' hostnames; ReFrame picks
    # the first system whose pattern matches (``local`` matches everything, so
    # until the lead puts site systems first, use --system NAME).
    'hostnames': [r'login\d+\.example\.org'],
    # FILL IN: 'lmod', 'envmod' (Environment Modules 4 and later) or 'spack'
    # (or 'nomod' with no modules): the modules systems ReFrame 4.10 drives.
    'modules_system': 'lmod',
    # 'slurm' polls jobs with sacct (needs Slurm's accounting database);
    # 'squeue' where there is none (then the job script records the exit status).
    'scheduler': 'slurm',
    # FILL IN: sbatch options every job needs (account, QoS, ...).
    'access': ['--account=FILL_IN_PROJECT'],
    # How many jobs ReFrame keeps submitted at once (per partition).
    'max_jobs': 16,
    # Default time limit of a job; every check also sets its own.
    'time_limit': '30m',
    # Where builds, stage, outputs and reports go (default $HARNESS_VAR_DIR/<name>;
    # $VAR and a leading ~ expand, e.g. '$SCRATCH/harness');
    # perflogs always go to $HARNESS_VAR_DIR/perflogs/<name>/<partition>/.
    # 'prefix': '/scratch/FILL_IN/harness',

    # One partition per interconnect.  For each: the sbatch options that
    # select its nodes, the nodes per run, and the node's processor.
    'partitions': {
        'ib': {
            'descr': 'InfiniBand HDR100, 2 nodes per run',
            # FILL IN: Slurm partition / constraint of the InfiniBand nodes.
            'access': ['--partition=compute', '--constraint=ib', '--exclusive'],
            # Nodes per run: the layouts are R ranks per node x T threads on
            # every node (docs/pages/cluster.md: how Slurm binds them).
            'nodes': 2,
            'processor': NODE,
            # Per stack: environment variables that select this interconnect
            # (every stack: one left out uses whatever link it picks, yet its
            # records name this partition's, and the configuration says so).
            'transport_env': {
                'openmpi': {'OMPI_MCA_pml': 'ucx', 'UCX_NET_DEVICES': 'mlx5_0:1'},
                'mpich': {'UCX_NET_DEVICES': 'mlx5_0:1'},
                # FILL IN: the HCA of an MVAPICH2 built for InfiniBand (OFA-IB-CH3).
                'mvapich2': {'MV2_IBA_HCA': 'mlx5_0'},
            },
        },
        'eth': {
            'descr': 'Ethernet (25 GbE), 2 nodes per run',
            'access': ['--partition=compute', '--constraint=eth', '--exclusive'],
            'nodes': 2,
            'processor': NODE,
            'transport_env': {
                'openmpi': {'OMPI_MCA_pml': 'ob1', 'OMPI_MCA_btl': 'self,vader,tcp',
                            'OMPI_MCA_btl_tcp_if_include': 'eth0'},
                'mpich': {'UCX_TLS': 'tcp,self,sm', 'UCX_NET_DEVICES': 'eth0'},
                # FILL IN: the interface hydra gives an MVAPICH2 built for TCP
                # (ch3:sock, ch3:nemesis:tcp); one built for InfiniBand only
                # reaches Ethernet over RoCE (MV2_USE_RoCE=1, MV2_IBA_HCA).
                'mvapich2': {'HYDRA_IFACE': 'eth0'},
            },
        },
    },

    # One environment per MPI stack (per partition).  For each: the modules
    # that provide it, its compiler wrapper, and how ranks start:
    #   'launch': 'srun'  with 'pmi' = what `srun --mpi=` this stack was built
    #                     for (`srun --mpi=list` shows what Slurm offers; left
    #                     out: its `srun_pmi` in checks/harnesscore/stacks.py),
    #                     set as SLURM_MPI_TYPE for ReFrame's srun
    #   'launch': 'own'   the stack's own launcher inside the allocation
    #                     ('launcher': 'mpirun' or 'mpiexec'), e.g. an Open MPI
    #                     built without Slurm's PMI
    # docs/pages/cluster.md says more of each key:
    # 'family' (default: the stack's name): one of checks/harnesscore/stacks.py's
    # stacks (openmpi, mpich, mvapich2), how it binds and what it must report.
    # 'env': variables the stack always needs, for the job script's `export K=V`
    # line (`$VAR` and `$(cmd)` expand: `'PATH': '/opt/mpi/bin:$PATH'`; a value
    # with spaces or quotes is put in double quotes, where `~` does not expand).
    # 'osu_prefix': the OSU Micro-Benchmarks built with this stack, as seen from
    # the nodes (default: HARNESS_OSU_PREFIX with {stack} replaced; none: OSU
    # checks skip).  'sysconfdir' (Open MPI only): what `ompi_info --path
    # sysconfdir` prints with its modules loaded; in HARNESS_MPI_ENV=clean (the
    # default) its runs then read only the MCA parameter files there, not the
    # user's own.  'spack_spec': the Spack spec that builds the kernels with this
    # stack (docs/pages/spack.md); without it CMake and 'cc' build them.
    # 'cflags': C flags of those CMake builds, e.g. ['-march=znver3'] where the
    # login node that builds has another CPU than the compute nodes.
    'stacks': {
        'openmpi': {
            'descr': 'Open MPI 4.1',
            'modules': ['FILL_IN/openmpi/4.1.6'],
            'cc': 'mpicc',
            'launch': 'srun',
            'pmi': 'pmix',
            # FILL IN: `ompi_info --path sysconfdir` with the module loaded.
            'sysconfdir': '/FILL_IN/openmpi/4.1.6/etc',
        },
        'mpich': {
            'descr': 'MPICH 4.1',
            'modules': ['FILL_IN/mpich/4.1.2'],
            'cc': 'mpicc',
            'launch': 'srun',
            'pmi': 'pmi2',
        },
        'mvapich2': {
            'descr': 'MVAPICH2 2.3.7 with its own launcher',
            'modules': ['FILL_IN/mvapich2/2.3.7'],
            'cc': 'mpicc',
            'launch': 'own',
            'launcher': 'mpiexec',
            # Hybrid runs: MVAPICH2 binds one core per rank unless told.
            'env': {'MV2_ENABLE_AFFINITY': '1'},
        },
    },
}
