"""Spack: the per-system configuration, spack.yaml, and ReFrame on Spack's builds.

The generator's tests use Debian's real Open MPI and MPICH and need no Spack.
The rest needs ``spack`` on PATH (with a Python that imports clingo, see
docs/pages/spack.md) and skips without it.  Installs go to a persistent install
tree (``HARNESS_SPACK_INSTALL_TREE``, default ``var/spack/opt``) so a rerun
rebuilds nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import spack_site
import yaml
from conftest import REPO, mpi_env, run_reframe
from harnesslib import build

SPACK = shutil.which('spack')
_no_spack = pytest.mark.skipif(
    SPACK is None, reason='spack is not on PATH (Spack cannot be installed here: see '
                          'docs/pages/spack.md for running these tests with a Spack checkout)')


def needs_spack(test):
    """Spack builds and ReFrame sessions: integration tests, skipped without spack."""
    return pytest.mark.integration(_no_spack(test))


LIBRARY = {'openmpi': 'libmpi.so.40', 'mpich': 'libmpich.so'}
SYSTEM = os.environ.get('HARNESS_SPACK_SYSTEM', 'local')


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f'--- stdout ---\n{proc.stdout[-12000:]}\n--- stderr ---\n{proc.stderr[-6000:]}'


def failed_one_stack(proc: subprocess.CompletedProcess[str], error: str, good: str) -> list[str]:
    """Asserts that the session failed a Spack build of the kernels, saying `error`,
    and passed StreamCheck on `good` alone; its OK lines."""
    assert proc.returncode != 0
    assert 'Spack build of the kernels failed' in proc.stdout, explain(proc)
    assert error in proc.stdout, explain(proc)
    oks = [ln for ln in proc.stdout.splitlines() if '  OK ' in ln and 'StreamCheck' in ln]
    assert oks and all(f'+{good}' in ln for ln in oks), explain(proc)
    return oks


def ldd(path: str) -> str:
    return subprocess.run(['ldd', path], capture_output=True, text=True, check=True).stdout


# ---- the generator (no Spack needed) ------------------------------------------------------

def generate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-m', 'spack_site', '--config-dir', str(tmp_path / 'cfg'),
         '--prefix-dir', str(tmp_path / 'prefixes'), *args],
        capture_output=True, text=True, env=mpi_env())


def test_generator_gives_each_stack_a_prefix_with_its_own_wrappers(tmp_path, stacks):
    proc = generate(tmp_path, '--system', 'here')
    assert proc.returncode == 0, proc.stderr
    packages = yaml.safe_load((tmp_path / 'cfg/here/packages.yaml').read_text())['packages']
    defs = yaml.safe_load((tmp_path / 'cfg/here/definitions.yaml').read_text())
    assert defs['definitions'] == [{'stacks': [f'^{s}' for s in stacks]}]
    assert packages['mpi'] == {'buildable': False}
    for pkg in ('cmake', 'gmake'):
        assert packages[pkg]['buildable'] is False
    for stack in stacks:
        (ext,) = packages[stack]['externals']
        prefix = Path(ext['prefix'])
        assert prefix == tmp_path / 'prefixes' / stack
        assert ext['spec'].startswith(f'{stack}@')
        mpicc = prefix / 'bin' / 'mpicc'
        # The wrapper under the prefix is that stack's, never /usr/bin/mpicc.
        assert os.path.realpath(mpicc) == os.path.realpath(shutil.which(f'mpicc.{stack}'))
        # Proof by linking: a program built with it links that stack's library.
        src = tmp_path / 'hello.c'
        src.write_text('#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); '
                       'MPI_Finalize(); return 0; }\n')
        exe = tmp_path / f'hello-{stack}'
        subprocess.run([str(mpicc), str(src), '-o', str(exe)], check=True)
        libs = ldd(str(exe))
        assert LIBRARY[stack] in libs, libs
        for other, lib in LIBRARY.items():
            if other != stack:
                assert lib not in libs, libs
    compilers = yaml.safe_load((tmp_path / 'cfg/here/compilers.yaml').read_text())
    assert compilers['compilers'][0]['compiler']['spec'].startswith('gcc@=')


def test_committed_local_configuration_is_what_the_generator_writes(stacks):
    """config/spack/systems/local is the generator's output on a Debian 12 machine."""
    if stacks != ['openmpi', 'mpich'] or spack_site.operating_system() != 'debian12':
        pytest.skip('the local configuration describes Debian 12 with Open MPI and MPICH')
    environ = {k: v for k, v in os.environ.items() if not k.endswith('_PREFIX')}
    found = spack_site.detect_stacks(spack_site.DEFAULT_PREFIX_DIR, environ)
    want = spack_site.site_files(found, spack_site.build_tools(None),
                                 spack_site.compilers(None))
    for name, doc in want.items():
        committed = yaml.safe_load((REPO / 'config/spack/systems/local' / name).read_text())
        assert committed == doc, name


def test_generator_refuses_to_overwrite_and_names_bad_stacks(tmp_path, stacks):
    assert generate(tmp_path).returncode == 0
    before = (tmp_path / 'cfg/local/packages.yaml').read_text()
    again = generate(tmp_path)
    assert again.returncode == 2
    assert 'not overwriting (use --force)' in again.stderr
    assert (tmp_path / 'cfg/local/packages.yaml').read_text() == before
    shutil.rmtree(tmp_path / 'prefixes')
    links = generate(tmp_path, '--prefixes-only')
    assert links.returncode == 0, links.stderr
    assert (tmp_path / 'cfg/local/packages.yaml').read_text() == before
    for stack in stacks:
        assert (tmp_path / 'prefixes' / stack / 'bin' / 'mpicc').is_symlink()
    bad = generate(tmp_path, '--system', 'x', '--stack', 'lam=/usr')
    assert bad.returncode == 2 and "expected NAME[@VERSION]=PATH" in bad.stderr
    missing = generate(tmp_path, '--system', 'y', '--stack', f'mvapich2={tmp_path}')
    assert missing.returncode == 2 and 'has no bin/mpicc' in missing.stderr
    assert not (tmp_path / 'cfg/x').exists() and not (tmp_path / 'cfg/y').exists()


def test_generator_writes_the_checkouts_systems_from_any_directory(tmp_path, stacks,
                                                                   monkeypatch, capsys):
    """Without --config-dir it writes config/spack/systems/ of the checkout, never
    ./config/spack/systems/ of the directory it runs in."""
    written: list[str] = []
    monkeypatch.setattr(spack_site, 'write_site',
                        lambda outdir, files, args, force: written.append(outdir) or [])
    monkeypatch.chdir(tmp_path)
    assert spack_site.main(['--prefix-dir', str(tmp_path / 'prefixes')]) == 0
    assert written == [str(REPO / 'config' / 'spack' / 'systems' / 'local')]
    assert not (tmp_path / 'config').exists()
    with pytest.raises(SystemExit):
        spack_site.main(['--help'])
    assert str(REPO / 'config' / 'spack' / 'systems') in ' '.join(capsys.readouterr().out.split())


@pytest.mark.parametrize('option', ['--prefix-dir', '--config-dir', '--stack'])
@pytest.mark.parametrize('bad', ['pf\nevil: 1', 'pf\revil: 1', 'pf\u2028evil: 1', 'pf\0x'])
def test_generator_refuses_a_line_break_or_nul_in_an_argument(tmp_path, option, bad):
    """A line break would end the files' header comment: ``evil:`` a key of packages.yaml."""
    value = f'mpich={tmp_path / bad}' if option == '--stack' else str(tmp_path / bad)
    with pytest.raises(SystemExit) as exc:
        spack_site.main(['--config-dir', str(tmp_path / 'cfg'),
                         '--prefix-dir', str(tmp_path / 'prefixes'), option, value])
    assert exc.value.code == 2
    assert not (tmp_path / 'cfg').exists() and not (tmp_path / 'prefixes').exists()


def test_generator_refuses_a_newline_in_the_prefix_dir_and_writes_nothing(tmp_path, stacks):
    bad = generate(tmp_path, '--prefix-dir', str(tmp_path / 'pf\nevil: 1'))
    assert bad.returncode == 2, bad.stderr
    line = bad.stderr.splitlines()[-1]     # after argparse's usage line
    assert line.startswith('harness-spack-site: error: --prefix-dir ') and 'line break' in line
    assert not (tmp_path / 'cfg').exists()


def test_the_header_is_one_comment_line_whatever_the_arguments(tmp_path):
    files = {'packages.yaml': {'packages': {'mpi': {'buildable': False}}}}
    (path,) = spack_site.write_site(str(tmp_path), files, "--prefix-dir 'pf\nevil: 1'", False)
    text = Path(path).read_text()
    assert yaml.safe_load(text) == files['packages.yaml']
    assert text.splitlines()[0] == "# Generated by: harness-spack-site --prefix-dir 'pf evil: 1'"


@pytest.mark.integration
def test_demanded_spack_that_is_missing_fails_that_stack_only(tmp_path, stacks):
    """A stack whose environment names a Spack spec fails its build with the
    shell's own error when there is no spack; the other stacks carry on."""
    if len(stacks) < 2:
        pytest.skip('needs two MPI stacks')
    path = os.pathsep.join(d for d in os.environ['PATH'].split(os.pathsep)
                           if not (Path(d) / 'spack').exists())
    bad, good = stacks[0], stacks[1]
    proc = run_reframe(tmp_path, '-n', 'StreamCheck', '--system', 'local:shm', '-r',
                       env={'PATH': path, f'HARNESS_{bad.upper()}_SPACK_SPEC':
                            f'hybrid-kernels@develop ^{bad}', 'HARNESS_SPACK': '0'})
    failed_one_stack(proc, 'spack: command not found', good)


def test_the_install_tree_knob_is_read_as_every_path_knob(tmp_path, stacks):
    """HARNESS_SPACK_INSTALL_TREE=~/tree is the home's tree: os.path.abspath made
    it a folder '~' in the directory ReFrame ran from (no spack needed: the
    environment is written when the build is set up, in a dry run too)."""
    home = tmp_path / 'home'
    home.mkdir()
    proc = run_reframe(tmp_path / 'var', '-n', 'StreamCheck', '--system', 'local:shm',
                       '-p', stacks[0], '--dry-run',
                       env={'HOME': str(home), 'HARNESS_SPACK_INSTALL_TREE': '~/spack-tree',
                            f'HARNESS_{stacks[0].upper()}_SPACK_SPEC':
                            f'hybrid-kernels@develop ^{stacks[0]}'})
    assert proc.returncode == 0, explain(proc)
    written = list((tmp_path / 'var' / 'spack' / 'envs').glob('*/spack.yaml'))
    assert written, explain(proc)
    for path in written:
        conf = yaml.safe_load(path.read_text())['spack']['config']
        assert conf['install_tree']['root'] == str(home / 'spack-tree')


# ---- with Spack -------------------------------------------------------------------------------

def spack(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    env = mpi_env(HARNESS_SPACK_SYSTEM=SYSTEM)
    return subprocess.run([SPACK or 'spack', *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope='module')
def install_tree() -> str:
    return os.environ.get('HARNESS_SPACK_INSTALL_TREE', str(REPO / 'var' / 'spack' / 'opt'))


@pytest.fixture(scope='module')
def installed(install_tree, stacks) -> dict[str, str]:
    """Concretise spack.yaml, install its kernel specs; stack -> install prefix."""
    if SYSTEM == 'local':   # the prefixes of links the committed configuration names
        links = subprocess.run([sys.executable, '-m', 'spack_site',
                                '--prefixes-only'], capture_output=True, text=True)
        assert links.returncode == 0, links.stderr
    t0 = time.monotonic()
    conc = spack('-e', str(REPO), 'concretize', '-f')
    t_conc = time.monotonic() - t0
    assert conc.returncode == 0, explain(conc)
    for stack in stacks:
        assert f'^{stack}@' in conc.stdout, explain(conc)
    assert 'osu-micro-benchmarks' in conc.stdout
    t0 = time.monotonic()
    inst = spack('-c', f'config:install_tree:root:{install_tree}', '-e', str(REPO), 'install',
                 '--no-add', 'hybrid-kernels')
    t_inst = time.monotonic() - t0
    assert inst.returncode == 0, explain(inst)
    print(f'spack concretize: {t_conc:.0f} s, install of the kernels: {t_inst:.0f} s')
    prefixes = {}
    for stack in stacks:
        loc = spack('-c', f'config:install_tree:root:{install_tree}', '-e', str(REPO),
                    'location', '-i', f'hybrid-kernels ^{stack}')
        assert loc.returncode == 0, explain(loc)
        prefixes[stack] = loc.stdout.strip()
    return prefixes


@needs_spack
def test_kernels_installed_by_spack_link_their_own_stack(installed):
    for stack, prefix in installed.items():
        libs = ldd(os.path.join(prefix, 'bin', 'ring'))
        assert LIBRARY[stack] in libs, (stack, libs)
        for other, lib in LIBRARY.items():
            if other != stack:
                assert lib not in libs, (stack, libs)


@needs_spack
def test_kernels_installed_by_spack_are_built_for_the_specs_target(installed):
    """Spack's wrapper gives the spec's target (-march=<target>); the kernels'
    Release -march=native came after it (the CPU of the node that built)."""
    for stack, prefix in installed.items():
        caches = list(Path(prefix, '.spack').glob('**/CMakeCache.txt'))
        assert caches, f'{stack}: no CMakeCache.txt archived under {prefix}/.spack'
        for cache in caches:
            flags = build.cmake_c_flags(str(cache.parent))
            assert flags is not None and '-march=native' not in flags, (stack, cache, flags)


@needs_spack
def test_reframe_runs_what_spack_installed(installed, install_tree, tmp_path):
    proc = run_reframe(tmp_path, '-n', 'StreamCheck', '--system', 'local:shm', '-r',
                       env={'HARNESS_SPACK': '1', 'HARNESS_SPACK_SYSTEM': SYSTEM,
                            'HARNESS_SPACK_INSTALL_TREE': install_tree})
    assert proc.returncode == 0, explain(proc)
    log = (tmp_path / 'perflogs/local/shm/StreamCheck.log').read_text().splitlines()
    header = log[0].split('|')
    rows = [dict(zip(header, ln.split('|'))) for ln in log[1:]]
    assert {r['environ'] for r in rows} == set(installed)
    for r in rows:
        stack = r['environ']
        spec = r['build_spec']
        assert spec.startswith('spack hybrid-kernels@develop'), spec
        assert f'^{stack}@' in spec, spec
        assert r['result'] == 'pass' and r['verified'] == 'true'
    # The install tree already held the kernels: the builds installed nothing.
    builds = list(tmp_path.glob('output/local/shm/*/KernelBuild*/rfm_build.out'))
    assert len(builds) == len(installed), builds
    for out in builds:
        text = out.read_text()
        assert '[+] ' + install_tree in text, text
        assert 'Installing hybrid-kernels' not in text, text
    # The runs used the binaries under Spack's prefix.
    scripts = list(tmp_path.glob('output/local/shm/*/StreamCheck*/rfm_job.sh'))
    assert scripts
    for script in scripts:
        assert any(prefix + '/bin/stream' in script.read_text()
                   for prefix in installed.values()), script


@needs_spack
def test_spec_that_does_not_concretise_fails_with_spacks_error(stacks, installed,
                                                               install_tree, tmp_path):
    if len(stacks) < 2:
        pytest.skip('needs two MPI stacks')
    bad, good = stacks[-1], stacks[0]
    proc = run_reframe(tmp_path, '-n', 'StreamCheck', '--system', 'local:shm', '-r',
                       env={'HARNESS_SPACK': '1', 'HARNESS_SPACK_SYSTEM': SYSTEM,
                            'HARNESS_SPACK_INSTALL_TREE': install_tree,
                            f'HARNESS_{bad.upper()}_SPACK_SPEC':
                                f'hybrid-kernels@develop ^{bad}@0.0.1'})
    assert len(failed_one_stack(proc, '==> Error', good)) == 2, explain(proc)


# ---- a stack's prefix, its links and the OS (stub programs, no MPI needed) ----------------

def stub(path: Path, text: str) -> Path:
    """An executable that prints `text` whatever its arguments."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\n")
    path.chmod(0o755)
    return path


def fake_prefix(root: Path, launcher_says: str) -> Path:
    """A prefix like Debian's /usr: MPICH's mpichversion beside another stack's
    mpicc and mpiexec (update-alternatives)."""
    stub(root / 'bin' / 'mpicc', 'gcc -I/x -lmpi')
    stub(root / 'bin' / 'mpiexec', launcher_says)
    stub(root / 'bin' / 'mpichversion', 'MPICH Version:\t4.0.2')
    return root


@pytest.mark.parametrize('how', ['--stack', 'HARNESS_MPICH_PREFIX'])
def test_a_prefix_whose_launcher_is_another_stacks_is_refused(tmp_path, monkeypatch, capsys,
                                                              how):
    usr = fake_prefix(tmp_path / 'usr', 'mpiexec (OpenRTE) 4.1.4\nReport bugs to ...')
    monkeypatch.setattr(spack_site, 'build_tools', lambda path: {})
    monkeypatch.setattr(spack_site, 'compilers', lambda path: [])
    args = ['--config-dir', str(tmp_path / 'cfg'), '--prefix-dir', str(tmp_path / 'pf')]
    if how == '--stack':
        args += ['--stack', f'mpich={usr}']
    else:
        monkeypatch.setattr(spack_site, 'STACKS', (spack_site.STACK['mpich'],))
        monkeypatch.setenv('HARNESS_MPICH_PREFIX', str(usr))
    assert spack_site.main(args) == 2
    err = capsys.readouterr().err
    assert (f"mpich: prefix {usr}: {usr}/bin/mpiexec is not MPICH's launcher "
            f"(its --version says 'mpiexec (OpenRTE) 4.1.4')") in err, err
    assert not (tmp_path / 'cfg').exists()
    # MPICH's own launcher there: accepted, with the version of its tools
    stub(usr / 'bin' / 'mpiexec', 'HYDRA build details:\n    Version: 4.0.2')
    assert spack_site.parse_stack_arg(f'mpich={usr}', str(tmp_path / 'pf')) == \
        spack_site.Stack('mpich', '4.0.2', str(usr))
    # a suffixed wrapper whose launcher is another stack's: refused as well
    stub(usr / 'bin' / 'mpicc.mine', 'gcc')
    stub(usr / 'bin' / 'mpiexec.mine', 'mpiexec (Open MPI) 5.0.3')
    with pytest.raises(spack_site.SiteError, match="mpiexec.mine is not MPICH's launcher"):
        spack_site.parse_stack_arg(f'mpich={usr}/bin/mpicc.mine', str(tmp_path / 'pf'))


def test_a_prefix_knob_with_a_leading_tilde_is_the_homes(tmp_path, monkeypatch):
    # config/settings.py reads HARNESS_MPICH_PREFIX='~/mpich' as the home's
    # (user_path); the generator took it as a folder '~' of the current
    # directory: "mpich: <cwd>/~/mpich has no bin/mpicc"
    home = tmp_path / 'home'
    fake_prefix(home / 'mpich', 'HYDRA build details:\n    Version: 4.0.2')
    monkeypatch.setenv('HOME', str(home))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(spack_site, 'STACKS', (spack_site.STACK['mpich'],))
    found = spack_site.detect_stacks(str(tmp_path / 'pf'), {'HARNESS_MPICH_PREFIX': '~/mpich'})
    assert found == [spack_site.Stack('mpich', '4.0.2', str(home / 'mpich'))]


def test_a_prefix_of_links_is_not_re_pointed_to_another_stack_without_force(tmp_path):
    def wrappers(folder: str, *progs: str) -> Path:
        bindir = tmp_path / folder
        for prog in progs:
            stub(bindir / f'{prog}.mpich', 'HYDRA build details:')
        stub(bindir / 'mpichversion.mpich', 'MPICH Version:\t4.0.2')
        return bindir / 'mpicc.mpich'

    first = wrappers('a', 'mpicc', 'mpicxx', 'mpiexec')
    other = wrappers('b', 'mpicc', 'mpiexec')
    prefix_dir = str(tmp_path / 'pf')
    spack_site.make_prefix(spack_site.parse_stack_arg(f'mpich={first}', prefix_dir))
    farm = tmp_path / 'pf' / 'mpich' / 'bin'
    assert os.readlink(farm / 'mpicxx') == str(tmp_path / 'a' / 'mpicxx.mpich')
    second = spack_site.parse_stack_arg(f'mpich={other}', prefix_dir)
    with pytest.raises(spack_site.SiteError, match=r"links to .*/a/mpicc\.mpich, not "
                       r".*/b/mpicc\.mpich: the prefix is another mpich's; not re-pointing "
                       r"it \(use --force"):
        spack_site.make_prefix(second)
    assert os.readlink(farm / 'mpicc') == str(first)
    # the same stack again completes nothing and changes nothing
    spack_site.make_prefix(spack_site.parse_stack_arg(f'mpich={first}', prefix_dir))
    spack_site.make_prefix(second, force=True)
    assert os.readlink(farm / 'mpicc') == str(other)
    assert os.readlink(farm / 'mpiexec') == str(tmp_path / 'b' / 'mpiexec.mpich')
    # the old stack's mpicxx (and its mpic++ alias) are gone, not left behind
    assert not os.path.lexists(farm / 'mpicxx') and not os.path.lexists(farm / 'mpic++')
    # the same programs by another path (/bin -> usr/bin on merged-/usr systems)
    (tmp_path / 'alias').symlink_to(tmp_path / 'b')
    spack_site.make_prefix(spack_site.parse_stack_arg(
        f'mpich={tmp_path / "alias" / "mpicc.mpich"}', prefix_dir))
    assert os.path.realpath(farm / 'mpicc') == os.path.realpath(other)


OS_RELEASES = {
    'ubuntu22.04': 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
    'ubuntu24.04': 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nVERSION_ID="24.04"\nID=ubuntu\n',
    'debian12': 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n',
    'rhel9': 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\n'
             'VERSION_ID="9.4"\n',
    'rocky9': 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
              'VERSION_ID="9.3"\n',
    'opensuse15': 'NAME="openSUSE Leap"\nID="opensuse-leap"\nVERSION_ID="15.5"\n',
}


@pytest.mark.parametrize('want', sorted(OS_RELEASES))
def test_the_operating_system_is_named_as_spack_names_it(tmp_path, want):
    """Spack's rule (spack/operating_systems/linux_distro.py): Ubuntu keeps
    the minor version (ubuntu22.04), the others only the major one."""
    path = tmp_path / 'os-release'
    path.write_text(OS_RELEASES[want])
    assert spack_site.operating_system(str(path)) == want


# ---- KernelBuild's Spack spec and environment (no Spack needed) ----------------------------

def kernel_env(**extras: object) -> types.SimpleNamespace:
    return types.SimpleNamespace(name=str(extras.get('stack', 'mpich')), extras=extras)


NO_EXTRAS = types.SimpleNamespace(extras={})


def test_a_clusters_stack_is_built_against_its_familys_spack_package():
    """A cluster's stack named ``ompi5`` (family openmpi) depends on ``openmpi``."""
    env = kernel_env(stack='ompi5', family='openmpi', spack=True)
    spec = build.spack_spec(env, NO_EXTRAS, 'Release', False)
    assert spec.endswith(' ^openmpi') and 'ompi5' not in spec, spec
    # a stack named like its package, as before
    assert build.spack_spec(kernel_env(stack='mpich', family='mpich', spack=True), NO_EXTRAS,
                            'Release', False) == \
        'hybrid-kernels@develop build_type=Release +openmp ~fault_inject ^mpich'


@pytest.mark.parametrize(('build_type', 'fault_inject', 'fault_slow', 'lacks'), [
    ('Release', True, 0, 'KernelBuild.fault_inject=1 .* must state \\+fault_inject'),
    ('Release', False, 50, 'KernelBuild.fault_slow=50 .* must state fault_slow=50'),
    ('Debug', False, 0, 'KernelBuild.build_type=Debug .* must state build_type=Debug'),
])
def test_a_users_spack_spec_must_state_the_faults_and_build_type_asked(build_type, fault_inject,
                                                                       fault_slow, lacks):
    """A user's spec without them would share the normal build: a fault run
    without its fault."""
    user = 'hybrid-kernels@develop ^mpich +fault_inject fault_slow=50 build_type=Debug'
    env = kernel_env(stack='mpich', family='mpich', spack_spec=user)
    with pytest.raises(ValueError, match=lacks) as err:
        build.spack_spec(env, NO_EXTRAS, build_type, fault_inject, fault_slow)
    assert 'HARNESS_MPICH_SPACK_SPEC' in str(err.value) and repr(user) in str(err.value)
    # stated in the kernels' part of the spec: used as given
    stated = 'hybrid-kernels@develop +fault_inject fault_slow=50 build_type=Debug ^mpich'
    env = kernel_env(stack='mpich', family='mpich', spack_spec=stated)
    assert build.spack_spec(env, NO_EXTRAS, build_type, fault_inject, fault_slow) == stated
    # the normal build takes any user spec, as before
    env = kernel_env(stack='mpich', family='mpich', spack_spec=user)
    assert build.spack_spec(env, NO_EXTRAS, 'Release', False, 0) == user


def test_a_changed_system_configuration_gets_a_new_spack_environment(tmp_path):
    """After ``harness-spack-site --force`` (an MPI upgrade) the build solves
    again rather than reusing the old lock file and recording its spec."""
    repo = tmp_path / 'repo'
    (repo / 'config/spack/systems/here').mkdir(parents=True)
    (repo / 'config/spack/repo/packages/hybrid-kernels').mkdir(parents=True)
    (repo / 'spack.yaml').write_text(
        'spack:\n  include:\n  - config/spack/systems/$HARNESS_SPACK_SYSTEM\n'
        '  repos:\n  - config/spack/repo\n  specs: []\n')
    packages = repo / 'config/spack/systems/here/packages.yaml'
    packages.write_text('packages: {mpich: {externals: [{spec: mpich@4.0.2, prefix: /usr}]}}\n')
    recipe = repo / 'config/spack/repo/packages/hybrid-kernels/package.py'
    recipe.write_text('# v1\n')
    spec = 'hybrid-kernels@develop ^mpich'

    def envdir(system: str = 'here', spec: str = spec) -> str:
        return build.spack_env_dir(str(tmp_path / 'envs'), 'mpich', system, spec, str(repo))

    first = envdir()
    assert first == envdir()           # unchanged: the same environment, its lock kept
    assert os.path.dirname(first) == str(tmp_path / 'envs')
    assert os.path.basename(first).startswith('mpich-')
    assert len({first, envdir('there'), envdir(spec=spec + '@4.1')}) == 3
    packages.write_text('packages: {mpich: {externals: [{spec: mpich@4.1.2, prefix: /usr}]}}\n')
    upgraded = envdir()
    assert upgraded != first
    recipe.write_text('# v2\n')
    assert envdir() not in (first, upgraded)


def test_a_wrapper_whose_show_line_has_an_unmatched_quote_is_read(tmp_path):
    """``mpicc -show`` with a message holding an apostrophe (``can't``) beside its
    compile line: its -I directory, not shlex's traceback."""
    stub(tmp_path / 'bin' / 'mpicc.mpich', f"mpicc: can't find its config\n"
                                           f"gcc -I{tmp_path} -lmpich")
    stub(tmp_path / 'bin' / 'mpiexec.mpich', 'HYDRA build details:\n    Version: 4.0.2')
    stack = spack_site.parse_stack_arg(f'mpich@4.0.2={tmp_path}/bin/mpicc.mpich',
                                       str(tmp_path / 'pf'))
    assert stack.links['include'] == str(tmp_path)
