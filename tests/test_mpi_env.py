"""What a run claims is what it measured: the user's MPI and OpenMP tuning
variables and own MPI configuration files do not reach the runs unless kept,
each partition pins its transport, a run whose transport is not its partition's
fails, and every record says which variables (and user files) were in effect
(real ReFrame sessions of STREAM, one sample; the pure functions alone)."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import needs, run_reframe
from harnesscore.stacks import STACK
from harnesslib import base, launch
from harnesslib.launch import (
    binding_var_names,
    clean_files_env,
    clean_mpi_env,
    hold_node_lock,
    recorded_vars,
    stack_sysconfdir,
    user_config_files,
)
from hybridverdict.changes import _env as split_mpi_env
from hybridverdict.perflog import read_perflogs

integration = pytest.mark.integration

#: What a user's rc file may export: every Open MPI run over TCP, MPICH's too;
#: MPICH's aliases, Hydra's and mpiexec's, the OpenMP runtime's.
SHELL = {'OMPI_MCA_btl': 'tcp,self', 'OMPI_MCA_pml': 'ob1', 'UCX_TLS': 'tcp',
         'OMPI_MCA_btl_tcp_if_include': 'lo', 'UCX_NET_DEVICES': 'lo',
         'MPIR_PARAM_DEBUG_SUMMARY': '0', 'MPIEXEC_TIMEOUT': '600', 'GOMP_SPINCOUNT': '10000',
         'OMP_WAIT_POLICY': 'passive', 'KMP_BLOCKTIME': '0'}
PINNED = {'openmpi': {'OMPI_MCA_btl': 'self,vader', 'OMPI_MCA_pml': 'ob1'},
          'mpich': {'UCX_TLS': 'sm,self'}}
#: A user's own files: Hydra's puts every MPICH run over TCP (lat_8 0.3 -> 3.2 us).
HYDRA_CONF = '-genv UCX_TLS tcp,self\n'
MCA_CONF = 'mpi_show_mca_params = file\n'


def _mpi_env(rec) -> dict[str, str]:
    return dict(item.split('=', 1) for item in rec.mpi_env.split())


@pytest.fixture(scope='module')
def var(tmp_path_factory):
    return tmp_path_factory.mktemp('mpienv')


@pytest.fixture(scope='module')
def home(tmp_path_factory) -> Path:
    """A home with the user's own Hydra and Open MPI configuration files."""
    path = tmp_path_factory.mktemp('home')
    (path / '.mpiexec.hydra.conf').write_text(HYDRA_CONF)
    (path / '.openmpi').mkdir()
    (path / '.openmpi' / 'mca-params.conf').write_text(MCA_CONF)
    return path


def _session(var, *args, **env):
    proc = run_reframe(var, '--system', 'local:shm', '-n', 'StreamCheck%layout=mpi_', '-r',
                       *args, env={**SHELL, 'HARNESS_SNAPSHOTS': '0', **env})
    return proc


def _job_errors(var: Path, stack: str) -> str:
    return '\n'.join(p.read_text(errors='replace')
                     for p in (var / 'output' / 'local' / 'shm' / stack).rglob('rfm_*')
                     if p.suffix in ('.out', '.err'))


@pytest.fixture(scope='module')
def clean(var, home, stacks):
    """One clean session with the user's files in its home, a preloaded
    library and Open MPI told to show which files set its parameters: its
    output, records and each stack's job stderr."""
    proc = _session(var, '-S', 'env_vars=OMPI_MCA_mpi_show_mca_params:file',
                    HOME=str(home), LD_PRELOAD='libm.so.6')
    recs = read_perflogs([str(var / 'perflogs')])
    return proc, recs, {s: _job_errors(var, s) for s in stacks}


@integration
def test_the_shells_transport_does_not_reach_the_shm_runs(clean, stacks):
    proc, recs, _ = clean
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 'the runs do not inherit' in proc.stderr
    assert {r.stack for r in recs} == set(stacks)
    for rec in recs:
        env = _mpi_env(rec)
        assert PINNED[rec.stack].items() <= env.items(), (rec.stack, env)
        assert 'OMPI_MCA_btl_tcp_if_include' not in env and 'UCX_NET_DEVICES' not in env


@integration
def test_clean_runs_read_no_user_file_nor_alias_nor_openmp_variable(clean, stacks, home):
    proc, recs, errors = clean
    assert proc.returncode == 0, proc.stdout[-3000:]
    for name in ('MPIR_PARAM_DEBUG_SUMMARY', 'MPIEXEC_TIMEOUT', 'OMP_WAIT_POLICY',
                 'GOMP_SPINCOUNT', 'KMP_BLOCKTIME'):
        assert name in proc.stderr.split('do not inherit', 1)[1].split('from this shell')[0]
    for rec in recs:
        env = _mpi_env(rec)
        assert not {'MPIR_PARAM_DEBUG_SUMMARY', 'MPIEXEC_TIMEOUT', 'OMP_WAIT_POLICY',
                    'GOMP_SPINCOUNT', 'KMP_BLOCKTIME', 'user_config_files'} & set(env), env
        # the binding and the preloaded library are recorded, whatever the stack
        assert env['OMP_NUM_THREADS'] == '1' and env['LD_PRELOAD'] == 'libm.so.6', env
        if rec.stack == 'mpich':
            assert env['HYDRA_CONFIG_FILE'] == '/dev/null' and env['HYDRA_BINDING'] == 'core'
        if rec.stack == 'openmpi':
            sysconf = stack_sysconfdir(STACK['openmpi'], shutil.which('mpirun.openmpi') or '')
            system = os.path.join(sysconf, 'openmpi-mca-params.conf')
            assert env['OMPI_MCA_mca_base_param_files'] == system
    if 'openmpi' in stacks:
        # the ranks read the site's file, not the user's
        assert 'openmpi-mca-params.conf' in errors['openmpi']
        assert str(home) not in errors['openmpi']


@integration
def test_hydra_reads_no_user_file_where_the_run_says_dev_null(home):
    needs('mpich')
    env = {**os.environ, 'HOME': str(home)}
    env.pop('UCX_TLS', None)
    env.pop('HYDRA_CONFIG_FILE', None)

    def ranks_ucx_tls(**extra: str) -> str:
        return subprocess.run(['mpiexec.mpich', '-n', '1', 'printenv', 'UCX_TLS'],
                              env={**env, **extra}, capture_output=True, text=True,
                              timeout=60).stdout.strip()

    assert ranks_ucx_tls() == 'tcp,self'                       # the user's file
    assert ranks_ucx_tls(HYDRA_CONFIG_FILE='/dev/null') == ''   # clean: none


@pytest.fixture(scope='module')
def kept_home(tmp_path_factory) -> Path:
    """A home with the user's own files, the Hydra one setting no pinned variable."""
    path = tmp_path_factory.mktemp('kept_home')
    (path / '.mpiexec.hydra.conf').write_text('-genv UCX_LOG_LEVEL warn\n')
    (path / '.openmpi').mkdir()
    (path / '.openmpi' / 'mca-params.conf').write_text(MCA_CONF)
    return path


@integration
def test_kept_variables_are_recorded(var, stacks, kept_home):
    home = kept_home
    proc = _session(var, '-p', stacks[0], HARNESS_MPI_ENV='keep', HOME=str(home),
                    OMPI_MCA_coll_tuned_use_dynamic_rules='1', MPIR_CVAR_ASYNC_PROGRESS='0')
    assert proc.returncode == 0, proc.stdout[-3000:]
    recs = [r for r in read_perflogs([str(var / 'perflogs')])
            if 'MPIR_CVAR_ASYNC_PROGRESS' in r.mpi_env]
    assert recs
    user_file = {'mpich': home / '.mpiexec.hydra.conf',
                 'openmpi': home / '.openmpi' / 'mca-params.conf'}
    for rec in recs:
        env = _mpi_env(rec)
        # kept and recorded, the partition's pins still winning over the shell's
        assert env['OMPI_MCA_coll_tuned_use_dynamic_rules'] == '1'
        assert env['MPIR_CVAR_ASYNC_PROGRESS'] == '0'
        assert PINNED[rec.stack].items() <= env.items()
        # the aliases, the OpenMP runtime's and the user's own file too
        assert env['MPIEXEC_TIMEOUT'] == '600' and env['OMP_WAIT_POLICY'] == 'passive'
        assert env['user_config_files'] == str(user_file[rec.stack]), env
        assert 'HYDRA_CONFIG_FILE' not in env and 'OMPI_MCA_mca_base_param_files' not in env


@integration
def test_a_run_whose_transport_is_not_its_partitions_fails_naming_it(var):
    needs('openmpi')
    proc = _session(var, '-p', 'openmpi', '-S', 'env_vars=OMPI_MCA_btl:tcp')
    assert proc.returncode != 0
    assert ('local:shm claims shm for openmpi, but this run sets OMPI_MCA_btl=tcp (the '
            'partition pins self,vader)') in proc.stdout


@integration
def test_a_kept_hydra_file_that_changes_the_pinned_transport_fails_the_run(var, home):
    """Audit: in keep mode the user's ~/.mpiexec.hydra.conf (-genv UCX_TLS tcp,self)
    put local:shm's MPICH runs over TCP, and their records claimed shm."""
    needs('mpich')
    proc = _session(var, '-p', 'mpich', HARNESS_MPI_ENV='keep', HOME=str(home))
    assert proc.returncode != 0
    assert (f'local:shm claims shm for mpich, but this run sets UCX_TLS=tcp,self '
            f'({home / ".mpiexec.hydra.conf"}) (the partition pins sm,self)') in proc.stdout


# ---- the pure functions -----------------------------------------------------------------

def test_mpich_aliases_hydra_mpiexec_and_openmp_variables_are_the_shells_tuning():
    environ = {'MPICH_ASYNC_PROGRESS': '1', 'MPIR_PARAM_CH4_NETMOD': 'ofi',
               'HYDRA_CONFIG_FILE': '/h', 'MPIEXEC_TIMEOUT': '9', 'OMP_WAIT_POLICY': 'passive',
               'GOMP_SPINCOUNT': '0', 'KMP_BLOCKTIME': '0', 'UCX_TLS': 'tcp',
               'LD_PRELOAD': '/x.so', 'PATH': '/bin', 'HARNESS_MPICH_PREFIX': '/m'}
    removed = clean_mpi_env(environ)
    assert removed == sorted(['MPICH_ASYNC_PROGRESS', 'MPIR_PARAM_CH4_NETMOD',
                              'HYDRA_CONFIG_FILE', 'MPIEXEC_TIMEOUT', 'OMP_WAIT_POLICY',
                              'GOMP_SPINCOUNT', 'KMP_BLOCKTIME', 'UCX_TLS'])
    # a preloaded library is never taken out (it is recorded)
    assert environ == {'LD_PRELOAD': '/x.so', 'PATH': '/bin', 'HARNESS_MPICH_PREFIX': '/m'}


def test_the_libraries_under_mpi_are_the_shells_tuning_too():
    """Review: HCOLL's and SHARP's collectives, Omni-Path's PSM2/PSM3, UCC's and hwloc's
    variables (HWLOC_XMLFILE: another topology to bind by) reached the runs unrecorded
    and stayed in clean mode."""
    environ = {'HCOLL_ENABLE_MCAST_ALL': '0', 'SHARP_COLL_ENABLE_SAT': '1',
               'PSM2_MQ_EAGER_SDMA_SZ': '4096', 'PSM3_RDMA': '1', 'UCC_TLS': 'ucp',
               'HWLOC_XMLFILE': '/t.xml', 'PATH': '/bin'}
    tuning = {k: v for k, v in environ.items() if k != 'PATH'}
    assert launch.recorded_vars(environ) == tuning
    assert clean_mpi_env(environ) == sorted(tuning)
    assert environ == {'PATH': '/bin'}


def test_the_docs_name_every_prefix_of_the_shells_tuning():
    """configuration.md's row names the MPI prefixes clean mode takes out, checks.md's
    mpi_env row every prefix a run records: one list in the code, the docs checked."""
    docs = Path(__file__).resolve().parent.parent / 'docs/pages'
    config_row = next(line for line in (docs / 'configuration.md').read_text(
        encoding='utf-8').splitlines() if line.startswith('| MPI tuning variables:'))
    checks_row = next(line for line in (docs / 'checks.md').read_text(
        encoding='utf-8').splitlines() if line.startswith('  | `mpi_env` |'))
    for row, prefixes in ((config_row, launch.MPI_VAR_PREFIXES),
                          (checks_row, launch.TUNING_VAR_PREFIXES)):
        named = set(re.findall(r'`([A-Z0-9_]+_)\*`', row))
        assert named == set(prefixes), (sorted(named ^ set(prefixes)), row[:60])


def test_every_run_records_its_binding_and_a_preloaded_library():
    assert {'HYDRA_BINDING', 'SLURM_CPU_BIND', 'MV2_ENABLE_AFFINITY', 'OMP_PLACES',
            'OMPI_MCA_hwloc_base_binding_policy'} <= binding_var_names()
    env = {'HYDRA_BINDING': 'core:2', 'SLURM_CPU_BIND': 'cores', 'LD_PRELOAD': '/x.so',
           'OMP_NUM_THREADS': '2', 'OMP_WAIT_POLICY': 'PASSIVE', 'GOMP_SPINCOUNT': '0',
           'PATH': '/bin', 'HOME': '/h'}
    assert recorded_vars(env) == {k: v for k, v in env.items() if k not in ('PATH', 'HOME')}


def test_the_user_files_a_stack_reads_are_named(tmp_path):
    (tmp_path / '.mpiexec.hydra.conf').write_text(HYDRA_CONF)
    (tmp_path / '.openmpi').mkdir()
    (tmp_path / '.openmpi' / 'mca-params.conf').write_text(MCA_CONF)
    (tmp_path / '.pmix').mkdir()
    (tmp_path / '.pmix' / 'mca-params.conf').write_text('')
    home = str(tmp_path)
    assert user_config_files('mpich', {}, home) == [f'{home}/.mpiexec.hydra.conf']
    assert user_config_files('mvapich2', {}, home) == [f'{home}/.mpiexec.hydra.conf']
    # Hydra reads HYDRA_CONFIG_FILE instead (recorded as a variable)
    assert user_config_files('mpich', {'HYDRA_CONFIG_FILE': '/dev/null'}, home) == []
    assert user_config_files('openmpi', {}, home) == [f'{home}/.openmpi/mca-params.conf',
                                                      f'{home}/.pmix/mca-params.conf']
    # the files clean mode names instead: the system's
    clean = STACK['openmpi'].clean_files('/etc/o')
    assert user_config_files('openmpi', clean, home) == []
    assert user_config_files('srun', {}, home) == []
    # started by srun: Hydra (and PRRTE) do not run, the ranks' own libraries read theirs
    (tmp_path / '.prte').mkdir()
    (tmp_path / '.prte' / 'mca-params.conf').write_text('')
    assert user_config_files('mpich', {}, home, 'srun') == []
    assert user_config_files('mvapich2', {}, home, 'mvapich2') == [
        f'{home}/.mpiexec.hydra.conf']
    assert user_config_files('openmpi', {}, home, 'srun') == [
        f'{home}/.openmpi/mca-params.conf', f'{home}/.pmix/mca-params.conf']
    assert user_config_files('openmpi', {}, home, 'openmpi') == [
        f'{home}/.openmpi/mca-params.conf', f'{home}/.prte/mca-params.conf',
        f'{home}/.pmix/mca-params.conf']


def test_what_a_users_hydra_file_sets_for_the_ranks_is_read(tmp_path):
    (tmp_path / '.mpiexec.hydra.conf').write_text(
        '-genv UCX_TLS tcp,self -ppn 2\n-genv FI_PROVIDER "tcp;ofi_rxm" -genv UCX_TLS sm\n')
    home = str(tmp_path)
    path = f'{home}/.mpiexec.hydra.conf'
    assert launch.user_file_settings('mpich', {}, home) == {
        'UCX_TLS': ('sm', path), 'FI_PROVIDER': ('tcp;ofi_rxm', path)}
    assert launch.user_file_settings('mvapich2', {}, home) == \
        launch.user_file_settings('mpich', {}, home)
    # the file HYDRA_CONFIG_FILE names instead (clean mode: /dev/null, nothing)
    assert launch.user_file_settings('mpich', {'HYDRA_CONFIG_FILE': '/dev/null'}, home) == {}
    other = tmp_path / 'other.conf'
    other.write_text('-genv UCX_TLS tcp')
    assert launch.user_file_settings('mpich', {'HYDRA_CONFIG_FILE': str(other)}, home) == {
        'UCX_TLS': ('tcp', str(other))}
    # Open MPI's environment wins over its files; srun reads none of them
    assert launch.user_file_settings('openmpi', {}, home) == {}
    assert launch.user_file_settings('srun', {}, home) == {}
    assert launch.user_file_settings('mpich', {}, str(tmp_path / 'nohome')) == {}


@pytest.mark.parametrize('text', [
    '-genv UCX_TLS=tcp,self\n',          # NAME=VALUE: Hydra splits it itself
    '-genv UCX_TLS=tcp,self -ppn 2\n',
    '-env UCX_TLS tcp,self\n',           # -env in the file applies to every rank too
    '--genv UCX_TLS tcp,self\n',         # two dashes, as Hydra takes them
    '--env=UCX_TLS tcp,self\n',
])
def test_every_spelling_hydra_takes_in_a_users_file_is_read(tmp_path, text):
    """Hydra (MPICH 4.0.2's mpiexec, checked) gives the ranks UCX_TLS=tcp,self over
    the environment's for each of these lines: each must be seen, or a pinned
    transport changed by the file passes unnoticed."""
    (tmp_path / '.mpiexec.hydra.conf').write_text(text)
    path = f'{tmp_path}/.mpiexec.hydra.conf'
    assert launch.user_file_settings('mpich', {}, str(tmp_path)) == {
        'UCX_TLS': ('tcp,self', path)}


def test_clean_runs_read_only_the_sites_files(tmp_path):
    assert clean_files_env('mpich') == {'HYDRA_CONFIG_FILE': '/dev/null'}
    assert clean_files_env('mvapich2') == {'HYDRA_CONFIG_FILE': '/dev/null'}
    assert STACK['openmpi'].clean_files('/o/etc') == {
        'OMPI_MCA_mca_base_param_files': '/o/etc/openmpi-mca-params.conf',
        'PRTE_MCA_mca_base_param_files': '/o/etc/prte-mca-params.conf',
        'PMIX_MCA_mca_base_param_files': '/o/etc/pmix-mca-params.conf'}
    # an Open MPI with PMIx bundled (its file in the sysconfdir) and an external
    # PRRTE: PRRTE's variable stays unset, so the site's own prte-mca-params.conf
    # (PRRTE's folder) is read, and so is the user's, which the run records
    etc, bindir, home = tmp_path / 'etc', tmp_path / 'bin', tmp_path / 'home'
    for folder in (etc, bindir, home / '.prte'):
        folder.mkdir(parents=True)
    (bindir / 'ompi_info').write_text(f'#!/bin/sh\necho "  Sysconfdir: {etc}"\n')
    (bindir / 'ompi_info').chmod(0o755)
    (etc / 'pmix-mca-params.conf').write_text('')
    (home / '.prte/mca-params.conf').write_text('')
    clean = clean_files_env('openmpi', str(bindir / 'mpirun'))
    assert clean == {'OMPI_MCA_mca_base_param_files': f'{etc}/openmpi-mca-params.conf',
                     'PMIX_MCA_mca_base_param_files': f'{etc}/pmix-mca-params.conf'}
    assert user_config_files('openmpi', clean, str(home)) == [f'{home}/.prte/mca-params.conf']
    # Open MPI's own variable names its system file even where there is none
    (etc / 'pmix-mca-params.conf').unlink()
    assert clean_files_env('openmpi', str(bindir / 'mpirun')) == {
        'OMPI_MCA_mca_base_param_files': f'{etc}/openmpi-mca-params.conf'}
    launcher = shutil.which('mpirun.openmpi')
    if launcher:
        sysconf = stack_sysconfdir(STACK['openmpi'], launcher)
        assert os.path.isdir(sysconf)
        full = STACK['openmpi'].clean_files(sysconf)
        assert clean_files_env('openmpi', launcher) == {
            var: path for var, path in full.items()
            if var == 'OMPI_MCA_mca_base_param_files' or os.path.isfile(path)}
    with pytest.raises(ValueError, match='HARNESS_MPI_ENV=clean: no ompi_info beside /nowhere'):
        old_path = os.environ.get('PATH', '')
        try:
            os.environ['PATH'] = '/nonexistent'
            stack_sysconfdir(STACK['openmpi'], '/nowhere/mpirun')
        finally:
            os.environ['PATH'] = old_path


@pytest.mark.parametrize('value, want', [(None, 'clean'), (' ', 'clean'), (' keep ', 'keep')])
def test_the_users_mpi_variables_are_taken_out_unless_the_session_keeps_them(
        monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv('HARNESS_MPI_ENV', raising=False)
    else:
        monkeypatch.setenv('HARNESS_MPI_ENV', value)
    assert launch.mpi_env_mode() == want


def test_an_open_mpi_of_unknown_launcher_keeps_its_sites_files():
    # no launcher, no sysconfdir: naming a file of no folder would drop the site's
    assert clean_files_env('openmpi') == {}


def test_mpi_env_keeps_every_name_and_cuts_long_values_first():
    pinned = {'OMPI_MCA_btl': 'self,vader', 'OMPI_MCA_pml': 'ob1', 'OMP_NUM_THREADS': '2'}
    effective = {**pinned, 'FI_PROVIDER_PATH': '/opt/x/' * 200,
                 'OMPI_MCA_coll_tuned_use_dynamic_rules': '1', 'UCX_LOG_FILE': 'y' * 300}
    text = base.mpi_env_text(effective, pinned)
    assert len(text) <= base.MPI_ENV_LIMIT
    env = split_mpi_env(text)            # as the report's provenance_diff reads it
    assert env == {**pinned, 'FI_PROVIDER_PATH': '<cut:1400 chars>',
                   'OMPI_MCA_coll_tuned_use_dynamic_rules': '1',
                   'UCX_LOG_FILE': 'y' * 300}
    # nothing cut where it fits
    assert base.mpi_env_text(pinned) == 'OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMP_NUM_THREADS=2'
    # a protected value is never cut, nor dropped where the names alone do not fit
    many = {f'UCX_V{i:03}': 'v' * 20 for i in range(100)}
    text = base.mpi_env_text({**many, 'ZZ_PIN': 'p' * 30}, {'ZZ_PIN'})
    assert len(text) == base.MPI_ENV_LIMIT and text.startswith(f'ZZ_PIN={"p" * 30} ')


def test_mpi_env_quotes_a_value_with_a_space_or_an_equals_sign():
    """A value holding a space and a NAME= is one variable when read back."""
    env = {'OMPI_MCA_btl': 'self,vader', 'UCX_TLS': 'sm', 'EMPTY': '',
           'OMPI_MCA_plm_rsh_agent': 'ssh -o StrictHostKeyChecking=no', 'Q': "it's"}
    text = base.mpi_env_text(env)
    assert text == ("EMPTY= OMPI_MCA_btl=self,vader "
                    "OMPI_MCA_plm_rsh_agent='ssh -o StrictHostKeyChecking=no' "
                    "Q='it'\"'\"'s' UCX_TLS=sm")
    assert split_mpi_env(text) == env
    assert 'StrictHostKeyChecking' not in split_mpi_env(text)


def test_mpi_env_cuts_count_the_quoting():
    """The 1000 characters hold the quotes; a quoted value is cut whole to its
    marker (N: the value's own length), and the text reads back."""
    spaced = 'a b ' * 150                       # 600 characters, 602 quoted
    env = {'A_PIN': 'x', 'B_SPACED': spaced, 'C_PLAIN': 'c' * 395}
    text = base.mpi_env_text(env, {'A_PIN'})
    assert len(text) <= base.MPI_ENV_LIMIT
    assert split_mpi_env(text) == {'A_PIN': 'x', 'B_SPACED': '<cut:600 chars>',
                                   'C_PLAIN': 'c' * 395}
    # 1000 characters unquoted would fit; quoted (1002) they do not
    near = {'B': 'a ' * 499}
    assert len(f"B={near['B']}") == base.MPI_ENV_LIMIT
    assert split_mpi_env(base.mpi_env_text(near)) == {'B': '<cut:998 chars>'}
    fits = {'B': 'a ' * 498}                    # quoted: 1000
    assert len(base.mpi_env_text(fits)) == base.MPI_ENV_LIMIT
    assert split_mpi_env(base.mpi_env_text(fits)) == fits


def test_the_schema_says_what_mpi_env_holds():
    """The field's description matches docs/pages/checks.md's row."""
    from harnesscore.schema import RUN_FIELDS
    doc = next(f.doc for f in RUN_FIELDS if f.name == 'mpi_env')
    row = next(line for line in (Path(__file__).resolve().parent.parent / 'docs/pages/checks.md')
               .read_text(encoding='utf-8').splitlines() if line.startswith('  | `mpi_env` |'))
    for words in ('MPI and OpenMP tuning variables in effect', "binding's", 'LD_PRELOAD',
                  'user_config_files'):
        assert words in doc and words in row, words
    assert 'NAME=<cut:N chars>' in doc and '1000 characters' in doc


# ---- the node lock ----------------------------------------------------------------

LOCAL = SimpleNamespace(scheduler=SimpleNamespace(registered_name='local'))


def test_the_node_lock_is_the_machines_not_the_var_dirs(tmp_path, monkeypatch):
    # two sessions with two HARNESS_VAR_DIRs took two locks and shared the cores
    import reframe.core.runtime as rt
    lines = {}
    for var in ('a', 'b'):
        monkeypatch.setattr(rt, 'runtime', lambda var=var: SimpleNamespace(
            system=SimpleNamespace(prefix=str(tmp_path / var))))
        lines[var] = hold_node_lock(LOCAL)
    assert lines['a'] == lines['b']
    assert not any(str(tmp_path) in line for line in lines['a'])
    slurm = SimpleNamespace(scheduler=SimpleNamespace(registered_name='slurm'))
    assert hold_node_lock(slurm) == []


def test_a_slurm_partition_without_accounting_takes_no_node_lock():
    # local-slurm and the test cluster schedule with squeue: Slurm keeps their cores apart
    squeue = SimpleNamespace(scheduler=SimpleNamespace(registered_name='squeue'))
    assert hold_node_lock(squeue) == []


def node_lock_job(lines: list[str]) -> subprocess.Popen:
    return subprocess.Popen(['bash', '-c', '\n'.join([*lines, 'echo locked'])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_node_lock_waits_and_another_users_file_is_locked_read_only(tmp_path,
                                                                         monkeypatch):
    lock = tmp_path / 'node.lock'
    monkeypatch.setattr(launch, 'NODE_LOCK', str(lock))
    lines = hold_node_lock(LOCAL)
    job = node_lock_job(lines)                  # made if missing
    assert job.communicate(timeout=30) == ('locked\n', '') and lock.exists()
    lock.chmod(0o444)                           # another user's (we may be root: no
    with open(lock) as held:                    # denial, only a read-only open)
        fcntl.flock(held, fcntl.LOCK_EX)
        job = node_lock_job(lines)
        with pytest.raises(subprocess.TimeoutExpired):
            job.wait(timeout=1)                 # a second job waits for the first
    assert job.communicate(timeout=30) == ('locked\n', '')


def test_a_node_lock_that_cannot_be_opened_fails_the_job_naming_it(tmp_path, monkeypatch):
    lock = tmp_path / 'no-such-dir' / 'node.lock'
    monkeypatch.setattr(launch, 'NODE_LOCK', str(lock))
    job = node_lock_job(hold_node_lock(LOCAL))
    out, err = job.communicate(timeout=30)
    assert job.returncode == 1 and out == ''
    assert f'harness: cannot take the node lock {lock}' in err.splitlines()
