"""``harness-spack-site``: the Spack configuration of one system, for spack.yaml.

Writes ``<config-dir>/<NAME>/`` (default ``config/spack/systems/local`` of the
checkout): ``packages.yaml`` (every MPI stack found as config/settings.py finds
them, cmake and gmake: non-buildable externals), ``compilers.yaml`` (the system's
gcc) and ``definitions.yaml`` (the list ``stacks``).  A stack given by its
suffixed wrapper (``mpicc.mpich``) gets a prefix of links of its own under
``--prefix-dir``: docs/pages/spack.md says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys

import yaml
from harnesscore.paths import REPO_DIR, user_path
from harnesscore.stacks import STACK, STACKS
from harnesscore.stopping import fail

WRAPPERS = ('mpicc', 'mpicxx', 'mpic++', 'mpifort', 'mpif90', 'mpif77')
LAUNCHERS = ('mpiexec', 'mpirun')
DEFAULT_PREFIX_DIR = '/opt/hybrid-harness/mpi'
#: Where system directories live: the checkout's, not the current directory's.
DEFAULT_CONFIG_DIR = os.path.join(REPO_DIR, 'config', 'spack', 'systems')


class SiteError(Exception):
    """Bad input or an unusable stack; the message says which."""


@dataclasses.dataclass
class Stack:
    name: str
    version: str
    #: The prefix Spack will use (a real install prefix, or a link farm).
    prefix: str
    #: Suffixed programs to link into a farm prefix (empty: real prefix).
    links: dict[str, str] = dataclasses.field(default_factory=dict)


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SiteError(f'cannot run {shlex.join(cmd)}: {err}') from None
    return proc.stdout + proc.stderr


def stack_version(name: str, bindir: str, suffix: str = '') -> str:
    """The stack's version from its own tools in ``bindir``."""
    tools = [[tool.replace('{suffix}', suffix), *args]
             for tool, *args in STACK[name].version_tools]
    for tool in tools:
        exe = os.path.join(bindir, tool[0])
        if not os.access(exe, os.X_OK):
            continue
        version = STACK[name].version_in(_run([exe, *tool[1:]]))
        if version:
            return version
    raise SiteError(f'{name}: cannot tell its version from the tools in {bindir} '
                    f'(tried {", ".join(t[0] for t in tools)}); '
                    f'give it as --stack {name}@VERSION=PATH')


def include_dir(mpicc: str) -> str:
    """The first -I directory of the wrapper's compile line, or ''."""
    out = _run([mpicc, '-show'])
    try:
        words = shlex.split(out)
    except ValueError:      # an unmatched quote (a message such as "can't"): no quoting
        words = out.split()
    for word in words:
        if word.startswith('-I') and os.path.isdir(word[2:]):
            return word[2:]
    return ''


def check_launcher(name: str, launcher: str, where: str) -> None:
    """`launcher` must be stack `name`'s own, as config/settings.py requires
    of a prefix: its ``--version`` says one of the registry's words for the
    stack (``launcher_says``).  Debian's /usr/bin/mpicc and mpiexec are
    whichever stack won update-alternatives."""
    spec = STACK[name]
    text = _run([launcher, '--version'])
    if not spec.launcher_is_mine(text):
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), '(nothing)')
        raise SiteError(f'{name}: {where}: {launcher} is not {spec.descr}\'s launcher '
                        f'(its --version says {first[:120]!r}): it holds another MPI stack')


def from_prefix(name: str, prefix: str, version: str = '') -> Stack:
    prefix = os.path.abspath(prefix)
    bindir = os.path.join(prefix, 'bin')
    if not os.access(os.path.join(bindir, 'mpicc'), os.X_OK):
        raise SiteError(f'{name}: {prefix} has no bin/mpicc')
    launcher = next((os.path.join(bindir, exe) for exe in STACK[name].launchers
                     if os.access(os.path.join(bindir, exe), os.X_OK)), None)
    if launcher is None:
        raise SiteError(f'{name}: {prefix} has no bin/{" or bin/".join(STACK[name].launchers)}'
                        f' (its launcher says which stack the prefix holds)')
    check_launcher(name, launcher, f'prefix {prefix}')
    return Stack(name, version or stack_version(name, bindir), prefix)


def from_wrapper(name: str, mpicc: str, prefix_dir: str, version: str = '') -> Stack:
    """A stack known by a suffixed wrapper such as /usr/bin/mpicc.mpich."""
    mpicc = os.path.abspath(mpicc)
    bindir, base = os.path.split(mpicc)
    if not base.startswith('mpicc') or not os.access(mpicc, os.X_OK):
        raise SiteError(f'{name}: {mpicc} is not an executable mpicc wrapper')
    suffix = base[len('mpicc'):]
    if os.path.isdir(mpicc) or not suffix:
        # An unsuffixed mpicc names its own prefix.
        return from_prefix(name, os.path.dirname(bindir), version)
    targets = {f'bin/{prog}': os.path.join(bindir, prog + suffix) for prog in WRAPPERS + LAUNCHERS}
    links = {rel: target for rel, target in targets.items() if os.access(target, os.X_OK)}
    if 'bin/mpic++' not in links and 'bin/mpicxx' in links:
        links['bin/mpic++'] = links['bin/mpicxx']
    if not any(f'bin/{launcher}' in links for launcher in LAUNCHERS):
        raise SiteError(f'{name}: no mpiexec{suffix} or mpirun{suffix} next to {mpicc}')
    launcher = next(links[f'bin/{exe}'] for exe in STACK[name].launchers + LAUNCHERS
                    if f'bin/{exe}' in links)
    check_launcher(name, launcher, f'wrapper {mpicc}')
    inc = include_dir(mpicc)
    if inc:
        links['include'] = inc
    return Stack(name, version or stack_version(name, bindir, suffix),
                 os.path.join(os.path.abspath(prefix_dir), name), links)


def detect_stacks(prefix_dir: str, environ: dict[str, str]) -> list[Stack]:
    """The stacks config/settings.py would use, in the same way."""
    found = []
    for stack in STACKS:
        prefix = environ.get(stack.prefix_var, '').strip()
        if prefix:
            # read as config/settings.py reads the knob: a leading ~ is the home
            found.append(from_prefix(stack.name, user_path(prefix)))
        elif stack.suffix is not None:
            mpicc = shutil.which(f'mpicc{stack.suffix}', path=environ.get('PATH'))
            if mpicc:
                found.append(from_wrapper(stack.name, mpicc, prefix_dir))
    return found


def parse_stack_arg(arg: str, prefix_dir: str) -> Stack:
    """``NAME[@VERSION]=PATH``: PATH is a prefix or a suffixed mpicc."""
    head, sep, path = arg.partition('=')
    name, _, version = head.partition('@')
    if not sep or name not in STACK or not path:
        raise SiteError(f'--stack {arg!r}: expected NAME[@VERSION]=PATH with NAME one of '
                        f'{", ".join(STACK)}')
    if os.path.isdir(path):
        return from_prefix(name, path, version)
    return from_wrapper(name, path, prefix_dir, version)


#: The links of a stack's link farm (relative to its prefix).
FARM_LINKS = tuple(f'bin/{prog}' for prog in WRAPPERS + LAUNCHERS) + ('include',)


def check_prefix(stack: Stack, force: bool) -> None:
    """A stack's existing link farm may be completed, but re-pointed to other
    programs (another system's stack of that name) only with `force`; never
    replaces a file that is not a link."""
    for rel, target in stack.links.items():
        link = os.path.join(stack.prefix, rel)
        if os.path.islink(link):
            # the same program by another path (/bin -> usr/bin) is no other stack's
            if os.path.realpath(link) != os.path.realpath(target) and not force:
                raise SiteError(f'{link} links to {os.readlink(link)}, not {target}: the '
                                f'prefix is another {stack.name}\'s; not re-pointing it '
                                f'(use --force, or another --prefix-dir)')
        elif os.path.lexists(link):
            raise SiteError(f'{link} exists and is not a link: not replacing it')


def make_prefix(stack: Stack, force: bool = False) -> None:
    """Create (or complete) the link farm of a stack (``check_prefix``
    first); with `force`, the farm's links that this stack lacks go."""
    check_prefix(stack, force)
    for rel, target in stack.links.items():
        link = os.path.join(stack.prefix, rel)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.islink(link):
            if os.readlink(link) == target:
                continue
            os.unlink(link)
        os.symlink(target, link)
    if force and stack.links:
        for rel in FARM_LINKS:
            link = os.path.join(stack.prefix, rel)
            if rel not in stack.links and os.path.islink(link):
                os.unlink(link)


#: Spack's (its ``distro``'s) names of some os-release IDs.
OS_IDS = {'ol': 'oracle', 'opensuse-leap': 'opensuse'}


def operating_system(os_release: str = '/etc/os-release') -> str:
    """Spack's name of the OS (``spack arch -o``) by Spack's rule
    (spack/operating_systems/linux_distro.py): the os-release ID and the first
    part of its VERSION_ID, the first two on Ubuntu; e.g. debian12,
    ubuntu22.04, rhel9, rocky9."""
    info: dict[str, str] = {}
    try:
        with open(os_release, encoding='utf-8') as fh:
            for line in fh:
                key, _, val = line.strip().partition('=')
                try:
                    info[key] = ''.join(shlex.split(val))
                except ValueError:
                    info[key] = val.strip('"\'')
    except OSError:
        pass
    distro = info.get('ID', '').lower().replace(' ', '_')
    distro = OS_IDS.get(distro, distro) or 'linux'
    parts = re.split(r'[^\w-]', info.get('VERSION_ID', ''))
    version = '.'.join(parts[:2]) if 'ubuntu' in distro else parts[0]
    return distro.replace('-', '_') + version.replace('-', '_')


def build_tools(path: str | None) -> dict[str, dict]:
    """cmake and gmake as externals (the ones on PATH)."""
    out = {}
    for pkg, exe, pattern in (('cmake', 'cmake', r'cmake version (\S+)'),
                              ('gmake', 'make', r'GNU Make (\S+)')):
        found = shutil.which(exe, path=path)
        if not found:
            raise SiteError(f'{exe} not found on PATH (the kernels need {pkg})')
        cmd = [found, '--version']
        version = re.search(pattern, _run(cmd))
        if not version:
            raise SiteError(f'cannot tell the version of {found} from {shlex.join(cmd)}')
        out[pkg] = {'buildable': False, 'externals': [
            {'spec': f'{pkg}@{version.group(1)}',
             'prefix': os.path.dirname(os.path.dirname(found))}]}
    return out


def compilers(path: str | None) -> list[dict]:
    gcc = shutil.which('gcc', path=path)
    if not gcc:
        raise SiteError('gcc not found on PATH')
    version = _run([gcc, '-dumpfullversion']).strip()
    gxx = shutil.which('g++', path=path)
    fc = shutil.which('gfortran', path=path)
    return [{'compiler': {
        'spec': f'gcc@={version}',
        'paths': {'cc': gcc, 'cxx': gxx, 'f77': fc, 'fc': fc},
        'flags': {}, 'operating_system': operating_system(),
        'target': platform.machine(), 'modules': [], 'environment': {},
        'extra_rpaths': []}}]


def site_files(stacks: list[Stack], tools: dict[str, dict],
               compiler_list: list[dict]) -> dict[str, dict]:
    """The three YAML documents of a system's directory."""
    packages: dict[str, dict] = {'mpi': {'buildable': False}}
    spack = {stack.name: STACK[stack.name].spack_package for stack in stacks}
    for stack in stacks:
        packages[spack[stack.name]] = {'buildable': False, 'externals': [
            {'spec': f'{spack[stack.name]}@{stack.version}', 'prefix': stack.prefix}]}
    packages.update(tools)
    return {
        'packages.yaml': {'packages': packages},
        'compilers.yaml': {'compilers': compiler_list},
        'definitions.yaml': {'definitions': [{'stacks': [f'^{spack[s.name]}'
                                                         for s in stacks]}]},
    }


HEADER = ('# Generated by: harness-spack-site{args}\n'
          '# Rerun it rather than editing by hand (docs/pages/spack.md).\n')


def write_site(outdir: str, files: dict[str, dict], args: str, force: bool) -> list[str]:
    existing = [f for f in files if os.path.exists(os.path.join(outdir, f))]
    if existing and not force:
        raise SiteError(f'{outdir} already holds {", ".join(existing)}: '
                        f'not overwriting (use --force)')
    os.makedirs(outdir, exist_ok=True)
    written = []
    for name, doc in files.items():
        path = os.path.join(outdir, name)
        with open(path + '.tmp', 'w', encoding='utf-8') as fh:
            # One comment line whatever the arguments: a line break would end the comment.
            fh.write(HEADER.format(args=f' {" ".join(args.splitlines())}' if args else ''))
            yaml.safe_dump(doc, fh, sort_keys=False, default_flow_style=False)
        os.replace(path + '.tmp', path)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog='harness-spack-site',
        description='Write the Spack configuration of one system (compilers, '
                    'MPI stacks with prefixes of their own, cmake, gmake) for spack.yaml.')
    parser.add_argument('--system', default='local',
                        help='system name: HARNESS_SPACK_SYSTEM selects it (default: local)')
    parser.add_argument('--config-dir', default=DEFAULT_CONFIG_DIR,
                        help='where system directories live (default: config/spack/systems '
                             f'of this checkout, {DEFAULT_CONFIG_DIR}, from any directory)')
    parser.add_argument('--prefix-dir', default=DEFAULT_PREFIX_DIR,
                        help='where stacks known only by suffixed wrappers get a prefix '
                             f'of their own (default: {DEFAULT_PREFIX_DIR})')
    parser.add_argument('--stack', action='append', default=[], metavar='NAME[@VER]=PATH',
                        help='a stack by prefix or suffixed mpicc (repeatable); '
                             'default: the stacks config/settings.py finds')
    parser.add_argument('--force', action='store_true',
                        help='replace the files of an existing system directory, and '
                             're-point a stack\'s existing prefix of links (dropping the '
                             'links the new stack lacks)')
    parser.add_argument('--prefixes-only', action='store_true',
                        help='only (re)create the stacks\' prefixes of links, e.g. for the '
                             'committed local configuration on a fresh machine')
    args = parser.parse_args(argv)
    if not re.fullmatch(r'[A-Za-z0-9][\w.-]*', args.system):
        parser.error(f'--system {args.system!r}: use letters, digits, ".", "_", "-"')
    # A line break (YAML's include \r, \x85, \u2028) would end the files' header
    # comment, and a NUL is in no path.
    for option, values in (('--config-dir', [args.config_dir]),
                           ('--prefix-dir', [args.prefix_dir]), ('--stack', args.stack)):
        for value in values:
            if '\0' in value or ''.join(value.splitlines()) != value:
                parser.error(f'{option} {value!r}: a line break or NUL cannot be in it')
    try:
        if args.stack:
            stacks = [parse_stack_arg(a, args.prefix_dir) for a in args.stack]
        else:
            stacks = detect_stacks(args.prefix_dir, dict(os.environ))
        if not stacks:
            packages = '/'.join(s.debian_packages[0] for s in STACKS if s.debian_packages)
            raise SiteError(f'no MPI stack found: install Debian\'s {packages}, '
                            f'set HARNESS_*_PREFIX or give --stack')
        names = [s.name for s in stacks]
        if len(set(names)) != len(names):
            raise SiteError(f'a stack is given twice: {", ".join(names)}')
        # The tools and the compiler first: a missing one writes nothing.
        files = {} if args.prefixes_only else site_files(stacks, build_tools(None),
                                                          compilers(None))
        # Every farm checked before any link changes.
        for stack in stacks:
            check_prefix(stack, args.force)
        for stack in stacks:
            make_prefix(stack, args.force)
        written = write_site(os.path.join(args.config_dir, args.system), files,
                             shlex.join(sys.argv[1:] if argv is None else argv),
                             args.force) if files else []
    except (SiteError, OSError) as err:
        return fail('harness-spack-site', err)
    for stack in stacks:
        kind = 'links to its suffixed programs' if stack.links else 'its own prefix'
        print(f'{stack.name}@{stack.version}: prefix {stack.prefix} ({kind})')
    for path in written:
        print(f'wrote {path}')
    return 0

