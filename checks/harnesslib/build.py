"""The build fixture of the kernels: CMake with the stack's own wrapper, or
Spack where the environment or the user asks for it."""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
import yaml  # ReFrame brings PyYAML
from harnesscore.knobs import env_flag
from harnesscore.osu_output import env_family
from harnesscore.paths import REPO_DIR, SRC_DIR, user_path
from harnesscore.stacks import STACK
from reframe.core.builtins import run_before, sanity_function, variable

from .launch import hold_node_lock

KERNELS = ('spmv', 'md', 'ring', 'stream')


# ---- build fixture --------------------------------------------------------------

class KernelBuild(rfm.CompileOnlyRegressionTest):
    """CMake build of every kernel with the environment's own MPI wrapper, in
    a tree under the system prefix (``var/build/<stack>-...``), not the stage
    directory: the partitions of a stack share it, a later session only
    rebuilds what changed."""

    descr = 'Build the kernels for one MPI stack'
    valid_systems = ['*']
    valid_prog_environs = ['+mpi']
    build_system = 'CustomBuild'
    sourcesdir = None
    #: A build that hangs fails; the session carries on.
    build_time_limit = '10m'
    fault_inject = variable(typ.Bool, value=False)
    #: Tests only: the ring's bw sender busy-waits this percent of every timed
    #: window (``-DKERNEL_FAULT_SLOW``), a known bandwidth regression that the
    #: accuracy check against OSU must fail.  0: off.
    fault_slow = variable(int, value=0)
    #: CMake build type (a name: it is part of the build folder's name).
    build_type = variable(typ.Str[r'[A-Za-z][A-Za-z0-9_]*'], value='Release')
    build_dir = variable(str, value='')
    #: What was built and how, for the perflog: the concretised Spack spec
    #: where Spack built it, otherwise the CMake build and its wrapper.
    build_spec = variable(str, value='')
    #: The compiler that built the kernels and its version ('gcc 12.2.0'):
    #: CMake's record of it, or the concretised Spack spec's ('' if unknown).
    compiler = variable(str, value='')
    #: The kernels' Spack hash (7 characters) where Spack built them, else ''.
    spack_hash = variable(str, value='')

    #: Spack path (see ``spack_spec``): the install prefix of the kernels and
    #: the environment directory that installed them.
    spack_prefix = variable(str, value='')
    spack_env = variable(str, value='')

    @run_before('compile')
    def configure(self):
        env = self.current_environ
        if not 0 <= self.fault_slow <= 1000:
            raise ValueError(f'KernelBuild.fault_slow must be a percent from 0 (off) to 1000, '
                             f'got {self.fault_slow}')
        spec = spack_spec(env, self.current_partition, self.build_type, self.fault_inject,
                          self.fault_slow)
        if spec:
            self.configure_spack(spec)
            return
        self.build_dir = os.path.join(self.current_system.prefix, 'build',
                                      build_tag(env, self.build_type, self.fault_inject,
                                                self.fault_slow))
        self.build_spec = self.cmake_build_spec()
        configure = cmake_configure(self.build_dir, self.build_type, env.cc,
                                    ' '.join(env.cflags), self.fault_inject, self.fault_slow,
                                    env.extras.get('launcher', ''))
        jobs = max(1, len(os.sched_getaffinity(0)))
        self.build_system.commands = [
            shlex.join(configure),
            f'cmake --build {shlex.quote(self.build_dir)} -j {jobs}',
        ]
        # The partitions of a stack share the build tree: one build at a time
        # (on a Slurm system the builds run side by side on the login node).
        self.prebuild_cmds = hold_node_lock(self.current_partition) + [
            f'mkdir -p {shlex.quote(os.path.dirname(self.build_dir))}',
            f'exec 8>>{shlex.quote(self.build_dir + ".lock")}', 'flock 8']

    def cmake_build_spec(self, cflags: str | None = None) -> str:
        """'cmake Debug mpich cc=/usr/bin/mpicc.mpich cflags=-g fault_inject':
        the CMake build, with the build type's C flags where given."""
        env = self.current_environ
        stack = env.extras.get('stack', env.name)
        flags = '' if cflags is None else f' cflags={shlex.quote(cflags)}'
        faults = (' fault_inject' if self.fault_inject else '') + (
            f' fault_slow={self.fault_slow}' if self.fault_slow else '')
        wrapper = ''.join(f' {setting}' for setting in wrapper_settings(env))
        # The perflog separates fields with '|': never let one into a field.
        return (f'cmake {self.build_type} {stack} cc={env.cc}{wrapper}{flags}'
                f'{faults}').replace('|', '/')

    def configure_spack(self, spec: str):
        """Install the kernels with Spack: a one-spec environment derived from
        the checkout's spack.yaml, into the persistent install tree
        (``<prefix>/spack/opt`` or ``HARNESS_SPACK_INSTALL_TREE``, a leading ~
        the home as for every path knob)."""
        system = os.environ.get('HARNESS_SPACK_SYSTEM') or self.current_system.name
        given = os.environ.get('HARNESS_SPACK_INSTALL_TREE', '').strip()
        tree = user_path(given) if given else os.path.abspath(os.path.join(
            self.current_system.prefix, 'spack', 'opt'))
        stack = self.current_environ.extras.get('stack', self.current_environ.name)
        self.spack_env = spack_env_dir(os.path.join(self.current_system.prefix, 'spack', 'envs'),
                                       stack, system, spec)
        write_spack_env(self.spack_env, spec, tree)
        self.build_spec = f'spack {spec}'
        self.build_system.commands = spack_build_commands(self.spack_env, system)
        self.prebuild_cmds = hold_node_lock(self.current_partition)

    @sanity_function
    def built(self):
        if self.spack_env:
            self.read_spack_result()
            self.compiler = spack_compiler(self.build_spec)
            self.spack_hash = spack_hash(self.build_spec)
        elif self.build_dir:
            self.compiler = cmake_compiler(self.build_dir)
            if self.build_type.upper() != 'RELEASE' or self.current_environ.cflags:
                # Release's flags are src/CMakeLists.txt's own (cmake_configure);
                # another type's come from CMake's defaults, and an environment's
                # cflags are added: record them.
                self.build_spec = self.cmake_build_spec(cmake_c_flags(self.build_dir))
        return sn.all(sn.path_exists(self.executable_path(k)) for k in KERNELS)

    def read_spack_result(self):
        """The install prefix and concretised spec the build wrote, or the
        failure with Spack's own error text."""
        out = os.path.join(self.stagedir, SPACK_RESULT)
        failed = sn.evaluate(sn.extractall(r'^harness: spack step failed: (.*)$',
                                           self.stderr, 1))
        if failed or not os.path.exists(out):
            stderr = sn.evaluate(sn.extractall(r'^(.*\S.*)$', self.stderr, 1))
            errors = [i for i, line in enumerate(stderr) if line.startswith('==> Error')]
            shown = stderr[errors[0]:] if errors else stderr[-12:]
            raise sn.SanityError(
                f'Spack build of the kernels failed ({self.build_spec}): '
                + ' / '.join(line.strip() for line in shown[:40]))
        with open(out, encoding='utf-8') as fh:
            lines = [line.strip() for line in fh if line.strip()]
        self.spack_prefix = lines[0]
        # The perflog separates fields with '|': never let one into a field.
        self.build_spec = 'spack ' + lines[1].replace('|', '/')

    def executable_path(self, kernel: str) -> str:
        if self.spack_env:
            return os.path.join(self.spack_prefix, 'bin', kernel)
        return os.path.join(self.build_dir, kernel)


# ---- provenance: the sources and the compiler ------------------------------------

#: CMake's compiler ids -> Spack's names of the compilers.
COMPILER_NAMES = {'GNU': 'gcc', 'Clang': 'clang', 'AppleClang': 'apple-clang',
                  'IntelLLVM': 'oneapi', 'Intel': 'intel', 'NVHPC': 'nvhpc', 'PGI': 'pgi',
                  'Cray': 'cce', 'CrayClang': 'cce', 'Fujitsu': 'fj', 'FujitsuClang': 'fj',
                  'ARMClang': 'arm', 'XL': 'xl', 'XLClang': 'xl'}


@functools.cache
def source_version(repo: str = REPO_DIR, src: str = SRC_DIR) -> str:
    """The kernel sources' version: ``git describe --always`` of `repo`, with
    ``-dirty-`` and 12 hex digits of the files git sees under `src` where they
    differ from HEAD (a change elsewhere is no change of the kernels); outside
    a checkout ``sha256:`` and 12 hex digits of `src`'s files.  Once per process."""
    rel = os.path.relpath(src, repo)
    if os.path.exists(os.path.join(repo, '.git')) and not rel.startswith(os.pardir):
        # GIT_OPTIONAL_LOCKS=0: no index refresh written into a checkout
        # that others may be using
        described = _git(repo, 'describe', '--always')
        changed = _git(repo, 'status', '--porcelain', '--', rel)
        if described and changed is not None:
            if not changed:
                return described
            files = _git(repo, 'ls-files', '-z', '--cached', '--others', '--exclude-standard',
                         '--', rel, strip=False)
            if files is not None:
                paths = sorted({os.path.join(repo, f) for f in files.split('\0') if f})
                return f'{described}-dirty-{tree_digest(src, paths)[:12]}'
    return 'sha256:' + tree_digest(src)[:12]


def _git(repo: str, *args: str, strip: bool = True) -> str | None:
    """The output of ``git -C repo ARGS``, None where it fails."""
    try:
        out = subprocess.run(['git', '-C', repo, *args], capture_output=True, text=True,
                             timeout=20, env={**os.environ, 'GIT_OPTIONAL_LOCKS': '0'})
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() if strip else out.stdout


def tree_digest(root: str, paths: list[str] | None = None) -> str:
    """sha256 of the files under `root`: each one's relative path and content,
    in sorted order (hidden files and folders left out); or of the files
    `paths` (under `root`; a missing one counts as unreadable)."""
    digest = hashlib.sha256()
    if paths is None:
        paths = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith('.') and d != '__pycache__']
            paths += [os.path.join(folder, f) for f in files if not f.startswith('.')]
    for path in sorted(paths):
        digest.update(os.path.relpath(path, root).encode() + b'\0')
        try:
            with open(path, 'rb') as fh:
                digest.update(hashlib.sha256(fh.read()).digest())
        except OSError:
            digest.update(b'unreadable')
    return digest.hexdigest()


def build_tag(env, build_type: str, fault_inject: bool, fault_slow: int) -> str:
    """The name of a CMake build tree: the stack, the build type, a hash of the
    wrapper, the variables it reads and the environment's cflags (none set:
    the wrapper's alone, as before), and the faults: builds of other flags apart."""
    stack = env.extras.get('stack', env.name)
    flags = [f'cflags={" ".join(env.cflags)}'] if env.cflags else []
    wrapper = hashlib.sha1(' '.join([env.cc, *wrapper_settings(env), *flags])
                           .encode()).hexdigest()[:8]
    return (f'{stack}-{build_type.lower()}-{wrapper}'
            + ('-fault-inject' if fault_inject else '')
            + (f'-fault-slow{fault_slow}' if fault_slow else ''))


def _read_text(path: str) -> str | None:
    """The text of the file `path`, None where it cannot be read."""
    try:
        with open(path, encoding='utf-8', errors='replace') as fh:
            return fh.read()
    except OSError:
        return None


def cmake_compiler(build_dir: str) -> str:
    """'gcc 12.2.0': the C compiler CMake found for `build_dir` (its
    ``CMakeFiles/<version>/CMakeCCompiler.cmake``, the newest), '' if none."""
    found = glob.glob(os.path.join(glob.escape(build_dir), 'CMakeFiles', '*',
                                   'CMakeCCompiler.cmake'))
    text = _read_text(max(found, key=os.path.getmtime)) if found else None
    if text is None:
        return ''
    ident = re.search(r'^set\(CMAKE_C_COMPILER_ID "([^"]*)"\)', text, re.M)
    version = re.search(r'^set\(CMAKE_C_COMPILER_VERSION "([^"]*)"\)', text, re.M)
    name = ident.group(1) if ident else ''
    return f'{COMPILER_NAMES.get(name, name.lower())} {version.group(1) if version else ""}' \
        .strip()


def cmake_c_flags(build_dir: str) -> str | None:
    """The C flags of `build_dir`'s build type as its last configure had them
    (``KERNEL_C_FLAGS`` of its CMakeCache.txt, which src/CMakeLists.txt
    writes), None if the cache does not say."""
    text = _read_text(os.path.join(build_dir, 'CMakeCache.txt')) or ''
    found = re.search(r'^KERNEL_C_FLAGS:INTERNAL=(.*)$', text, re.M)
    return ' '.join(found.group(1).split()) if found else None


def spack_compiler(spec: str) -> str:
    """'gcc 13.3.0' from a concretised spec's ``%gcc@13.3.0`` (Spack's
    ``%[virtuals=c] gcc@13.3.0`` too), '' if it names none."""
    m = re.search(r'%\s*(?:\[[^\]]*\]\s*)?([A-Za-z][\w.+-]*?)@=?([0-9][\w.-]*)', spec)
    return f'{m.group(1)} {m.group(2)}' if m else ''


def spack_hash(spec: str) -> str:
    """The hash of a concretised spec as ``SPACK_FORMAT`` shows it (``/abc1234``),
    '' if it has none."""
    found = re.findall(r'(?:^|\s)/([a-z0-9]{7,32})\b', spec)
    return found[-1] if found else ''


#: Where a run without a build of its own (OSU) writes its environment's
#: compiler: its predefined macros, then its ``--version``.
COMPILER_FILE = 'compiler.txt'
PROBE_SEPARATOR = '--harness-version--'


def compiler_probe(cc: str, path: str) -> str:
    """The job-script line that writes what `cc` is to `path` (read by
    ``compiler_from_probe``); it never fails the job."""
    q = shlex.quote(cc)
    return (f'{{ {q} -E -dM -x c /dev/null; echo {PROBE_SEPARATOR}; {q} --version; }} '
            f'> {shlex.quote(path)} 2>&1 || true')


_CLANG_VERSION = ('__clang_major__', '__clang_minor__', '__clang_patchlevel__')
#: The macros that name a compiler (all of them defined), its Spack name and
#: the macros of its version, the most specific first (clang and most others
#: define __GNUC__ as well).
COMPILER_MACROS = (
    (('__NVCOMPILER',), 'nvhpc',
     ('__NVCOMPILER_MAJOR__', '__NVCOMPILER_MINOR__', '__NVCOMPILER_PATCHLEVEL__')),
    (('_CRAYC',), 'cce', ('_RELEASE_MAJOR', '_RELEASE_MINOR')),
    (('__INTEL_LLVM_COMPILER',), 'oneapi', ('__INTEL_LLVM_COMPILER',)),
    (('__INTEL_COMPILER',), 'intel', ('__INTEL_COMPILER',)),
    (('__clang__', '__apple_build_version__'), 'apple-clang', _CLANG_VERSION),
    (('__clang__',), 'clang', _CLANG_VERSION),
    (('__GNUC__',), 'gcc', ('__GNUC__', '__GNUC_MINOR__', '__GNUC_PATCHLEVEL__')),
)


def compiler_from_probe(text: str) -> str:
    """'gcc 12.2.0' from a compiler's predefined macros (``-E -dM``), else the
    first line of its ``--version``; '' if neither says."""
    macros, _, version = text.partition(PROBE_SEPARATOR)
    defs = dict(re.findall(r'^#define (\w+) (.*)$', macros, re.M))
    for names, compiler, parts in COMPILER_MACROS:
        if all(n in defs for n in names):
            return f'{compiler} {".".join(defs[n].strip() for n in parts if n in defs)}'.strip()
    found = next((ln.strip() for ln in version.splitlines() if ln.strip()), '')
    # Nothing where the job's environment has no such compiler.
    return '' if 'not found' in found or 'No such file' in found else found


# ---- Spack ------------------------------------------------------------------------

SPACK_PACKAGE = 'hybrid-kernels'
#: Written by the Spack build into its stage directory: prefix, then spec.
SPACK_RESULT = 'spack-result.txt'
#: How the perflog shows a concretised spec (no '|' in it).
SPACK_FORMAT = ('{name}@{version}{%compiler.name}{@compiler.version}{variants}'
                '{arch=architecture} ^{^mpi.name}@{^mpi.version} /{hash:7}')


def cmake_configure(build_dir: str, build_type: str, cc: str, cflags: str = '',
                    fault_inject: bool = False, fault_slow: int = 0,
                    launcher: str = '') -> list[str]:
    """The CMake configure command of the kernels' build in `build_dir`, its C
    flags given (the environment's `cflags`): CMake takes the shell's CFLAGS on
    a folder's first configure and keeps it, so a build once run under
    CFLAGS=-pg kept -pg under a Release build_spec that could not say so."""
    return [
        'cmake', '-S', SRC_DIR, '-B', build_dir, f'-DCMAKE_BUILD_TYPE={build_type}',
        f'-DCMAKE_C_COMPILER={cc}', f'-DMPI_C_COMPILER={cc}', f'-DCMAKE_C_FLAGS={cflags}',
        f'-DKERNEL_FAULT_INJECT={"ON" if fault_inject else "OFF"}',
        f'-DKERNEL_FAULT_SLOW={int(fault_slow)}',
    ] + ([f'-DMPIEXEC_EXECUTABLE={launcher}'] if launcher else [])


def spack_spec(env, partition, build_type: str, fault_inject: bool,
               fault_slow: int = 0) -> str:
    """The Spack spec of the kernels for this environment, or '' for CMake:
    Spack builds where the environment names a spec (extras ``spack_spec``,
    used as it is: ``check_user_spec``), the environment or the partition says
    ``spack: true``, or the user sets ``HARNESS_SPACK=1`` and ``spack`` is on
    PATH.  The MPI dependency is the package of the environment's family."""
    family = env_family(env) or str(env.extras.get('stack', env.name))
    if env.extras.get('spack_spec'):
        spec = str(env.extras['spack_spec'])
        check_user_spec(spec, family, build_type, fault_inject, fault_slow)
        return spec
    wanted = bool(env.extras.get('spack') or partition.extras.get('spack'))
    if not wanted and not (env_flag('HARNESS_SPACK') and shutil.which('spack')):
        return ''
    package = env.extras.get('spack_stack') or (
        STACK[family].spack_package if family in STACK else family)
    slow = f' fault_slow={fault_slow}' if fault_slow else ''
    return (f'{SPACK_PACKAGE}@develop build_type={build_type} +openmp '
            f'{"+" if fault_inject else "~"}fault_inject{slow} ^{package}')


def wrapper_settings(env) -> list[str]:
    """'NAME=VALUE' (the value quoted) of each variable of the environment's
    compiler wrapper (``Stack.wrapper_vars``: OMPI_CFLAGS, MPICH_CC, ...) set for
    its build, by its ``env_vars`` or this session: an exported OMPI_CFLAGS=-pg
    must show in the build_spec and the build folder's name."""
    stack = STACK.get(env_family(env))
    if stack is None:
        return []
    given = {**os.environ, **{k: str(v) for k, v in env.env_vars.items()}}
    return [f'{name}={shlex.quote(given[name])}' for name in stack.wrapper_vars
            if given.get(name)]


def check_user_spec(spec: str, family: str, build_type: str, fault_inject: bool,
                    fault_slow: int) -> None:
    """A user's spec of the kernels states what the build asks beyond the
    normal build, or this says which variant it lacks (a spec without them
    would share the normal build and run it without its faults)."""
    root = spec.split('^', 1)[0]     # the kernels' own part, not a dependency's
    said = dict(re.findall(r'\b(build_type|fault_slow)\s*==?\s*(\S+)', root))
    wants = []
    if fault_inject and not re.search(r'(?:\+\s*fault_inject\b|\bfault_inject\s*==?\s*'
                                      r'(?:true|True)\b)', root):
        wants.append(('KernelBuild.fault_inject=1', '+fault_inject'))
    if fault_slow and said.get('fault_slow') != str(fault_slow):
        wants.append((f'KernelBuild.fault_slow={fault_slow}', f'fault_slow={fault_slow}'))
    if build_type.upper() != 'RELEASE' and said.get('build_type') != build_type:
        wants.append((f'KernelBuild.build_type={build_type}', f'build_type={build_type}'))
    if wants:
        knob = STACK[family].spack_spec_var if family in STACK else 'spack_spec'
        raise ValueError(
            f'{" and ".join(w[0] for w in wants)} with the Spack spec {spec!r} '
            f'({knob} or the environment\'s spack_spec): the spec must state '
            f'{" ".join(w[1] for w in wants)} (it is used as given)')


def spack_env_dir(envs: str, stack: str, system: str, spec: str, repo: str = REPO_DIR) -> str:
    """The one-spec environment of `spec` under `envs`: ``<stack>-<tag>``,
    the tag a digest of the system, the spec and what the solve reads from
    the checkout (spack.yaml, its includes and repos), so that a changed
    system gets a new solve and an unchanged one keeps its lock file."""
    digest = hashlib.sha1(f'{system} {spec}'.encode())
    manifest = os.path.join(repo, 'spack.yaml')
    try:
        with open(manifest, encoding='utf-8') as fh:
            text = fh.read()
    except OSError:
        text = ''
    digest.update(b'\0' + text.encode())
    conf = (yaml.safe_load(text) or {}).get('spack', {}) if text else {}
    for path in [*conf.get('include', []), *conf.get('repos', [])]:
        path = os.path.join(repo, str(path).replace('$HARNESS_SPACK_SYSTEM', system)
                            .replace('${HARNESS_SPACK_SYSTEM}', system))
        digest.update(b'\0' + path.encode() + b'\0')
        if os.path.isdir(path):
            digest.update(tree_digest(path).encode())
        elif os.path.isfile(path):
            digest.update(tree_digest(os.path.dirname(path), [path]).encode())
    return os.path.join(envs, f'{stack}-{digest.hexdigest()[:8]}')


def write_spack_env(envdir: str, spec: str, install_tree: str) -> None:
    """A one-spec copy of the checkout's spack.yaml (same includes, repos,
    develop source and concretizer), rewritten only when it changes so its
    lock file, and what Spack installed from it, stay valid."""
    with open(os.path.join(REPO_DIR, 'spack.yaml'), encoding='utf-8') as fh:
        manifest = yaml.safe_load(fh)
    conf = manifest['spack']
    # os.path.join keeps an absolute path as it is
    conf['include'] = [os.path.join(REPO_DIR, p) for p in conf.get('include', [])]
    conf['repos'] = [os.path.join(REPO_DIR, p) for p in conf.get('repos', [])]
    for dev in conf.get('develop', {}).values():
        dev['path'] = os.path.join(REPO_DIR, dev['path'])
    conf.pop('definitions', None)
    conf['specs'] = [spec]
    conf.setdefault('config', {})['install_tree'] = {'root': install_tree}
    conf['config']['develop_stage_link'] = os.path.join(envdir, '.spack-env',
                                                        'build-{arch}-{hash:7}')
    text = ('# Written by the harness (checks/harnesslib.py) from spack.yaml; '
            'do not edit.\n' + yaml.safe_dump(manifest, sort_keys=False))
    path = os.path.join(envdir, 'spack.yaml')
    os.makedirs(envdir, exist_ok=True)
    try:
        with open(path, encoding='utf-8') as fh:
            if fh.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path + '.tmp', 'w', encoding='utf-8') as fh:
        fh.write(text)
    os.replace(path + '.tmp', path)


def spack_build_commands(envdir: str, system: str) -> list[str]:
    """Concretise, install, then record the prefix and the concretised spec.
    A failing step ends the script with status 0 after a marker line, so that
    the fixture's sanity fails with Spack's own error text."""
    env = shlex.quote(envdir)
    fmt = shlex.quote(SPACK_FORMAT)
    return [
        f'export HARNESS_SPACK_SYSTEM={shlex.quote(system)}',
        'step() { echo "+ $*" >&2; "$@" || { echo "harness: spack step failed: $* '
        '(exit status $?)" >&2; exit 0; }; }',
        f'step spack -e {env} concretize',
        f'step spack -e {env} install --fail-fast',
        f'step spack -e {env} location -i {SPACK_PACKAGE} > {SPACK_RESULT}.tmp',
        f'step spack -e {env} find --format {fmt} {SPACK_PACKAGE} >> {SPACK_RESULT}.tmp',
        f'mv {SPACK_RESULT}.tmp {SPACK_RESULT}',
    ]
