"""``python -m harnesslib.plan``: the plan of every partition of a ReFrame
configuration (detected as ReFrame does, or declared), or of a declared node.

The plan itself is ReFrame-free (``harnesscore.plan``); this command line
loads the configuration and reads the partitions' topology with ReFrame.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

from harnesscore import selection
from harnesscore.paths import REPO_DIR
from harnesscore.plan import (
    DEFAULT_SESSION_BUDGET,
    MAX_SAMPLES,
    Topology,
    parse_memory,
    part_budget,
    samples_per_run,
    session_plan,
)
from harnesscore.stopping import fail, run_main

# ---- command line ----------------------------------------------------------------

#: Most cores, sockets, NUMA domains or nodes of a declared node (the plan
#: scans the divisors of the rank counts: far larger ones take minutes).
MAX_DECLARED = 4096


def _partition_topologies(config: str, system: str | None,
                          prgenvs: list[str] | None = None) -> list[Topology]:
    """The topology of every partition of the ReFrame configuration's system
    (detected as ReFrame does, or declared), each with its stacks
    (``Topology.stacks``): those `prgenvs` selects where given (ReFrame's
    ``-p``/``--prgenv`` patterns, applied as ReFrame applies them)."""
    import reframe.core.config as config_mod
    import reframe.core.runtime as runtime
    from reframe.core.exceptions import ConfigError
    from reframe.frontend import autodetect
    try:
        site = config_mod.load_config(config)
        site.select_subconfig(system)
        if prgenvs:
            # What reframe -p does: only the matching environments are the
            # partitions' (general/valid_env_names).
            site.add_sticky_option('general/valid_env_names', list(prgenvs))
        # the system's modules system is checked here (Lmod without LMOD_CMD)
        runtime.init_runtime(site)
        autodetect.detect_topology()
    except (ConfigError, OSError) as err:
        raise ValueError(f'configuration {config}: {err}') from None
    out, idle = [], []
    for part in runtime.runtime().system.partitions:
        try:
            topo = dataclasses.replace(Topology.from_partition(part),
                                       stacks=len(part.environs))
        except ValueError as err:
            print(f'plan: {part.fullname}: {err}', file=sys.stderr)
            continue
        if topo.stacks:
            out.append(topo)
        else:
            idle.append(topo)
    if not out:
        # No partition runs a selected stack: one part each, as before.
        return [dataclasses.replace(t, stacks=1) for t in idle]
    # A partition none of whose stacks is selected runs nothing: no part of
    # the budget (its share would be lost to the stacks that run).
    for topo in idle:
        print(f'plan: {topo.name}: no stack selected, nothing runs there', file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    """The plan (``_main``); Ctrl-C ends it with status 130 and one line, no
    traceback (./harness then says the session was stopped); SIGTERM and SIGHUP
    keep their action (by default the plan dies of them)."""
    return run_main(_main, argv, 'plan: interrupted (Ctrl-C)', signals=())


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog='python -m harnesslib.plan',
        description='The plan of a session: runs per partition, the runs left out and '
                    'why, estimated time against HARNESS_BUDGET (per stack and partition). '
                    'Exit status 1 where a plan is over its budget or runs nothing, 2 on '
                    'bad input.')
    ap.add_argument('-C', '--config', default=None,
                    help='ReFrame configuration (default: config/settings.py of the checkout)')
    ap.add_argument('--system', default=None,
                    help='system[:partition] (default: RFM_SYSTEM, else this host)')
    ap.add_argument('-p', '--prgenv', action='append', default=None, metavar='PATTERN',
                    help="only the stacks (environments) matching PATTERN, as reframe's "
                         '-p/--prgenv selects them (repeatable): the parts the budget is '
                         'split across; -n selections are not modelled')
    ap.add_argument('reframe_options', nargs='*', metavar='REFRAME-OPTION',
                    help="after --: reframe's options (./harness: HARNESS_REFRAME_OPTS and "
                         'its arguments): their -p/--prgenv select stacks as -p does, their '
                         '--system the system where --system is not given, in every '
                         "spelling reframe accepts (-pX, --prgenv=X, ...)")
    ap.add_argument('--cores', type=int, help='plan a declared node instead: cores per node')
    ap.add_argument('--sockets', type=int, default=None, help='with --cores (default 1)')
    ap.add_argument('--numa', type=int, default=None, help='with --cores (default 1)')
    ap.add_argument('--mem', default=None, help='with --cores: memory per node, e.g. 512GiB')
    ap.add_argument('--nodes', type=int, default=None, help='with --cores (default 1)')
    ap.add_argument('--samples', type=int, default=None, help='default: HARNESS_REPEAT or 3')
    ap.add_argument('--budget', default=None,
                    help=f'default: HARNESS_BUDGET or {DEFAULT_SESSION_BUDGET}')
    ap.add_argument('--stacks', type=int, default=None,
                    help='stacks a declared node runs (a configured partition: its own)')
    ap.add_argument('-q', '--quiet', action='store_true', help='one summary line each')
    ap.add_argument('--part-budget', action='store_true',
                    help='print only "SECONDS_PER_PART SESSION_SECONDS PARTS" (the split of '
                         'HARNESS_BUDGET across the partitions and stacks; ./harness exports '
                         'the first as HARNESS_BUDGET=<s>s/part for the checks)')
    return ap


def _bad_options(args: argparse.Namespace) -> str:
    """What is wrong with the options ('' if nothing)."""
    for name, top in (('cores', MAX_DECLARED), ('sockets', MAX_DECLARED),
                      ('numa', MAX_DECLARED), ('nodes', MAX_DECLARED),
                      ('samples', MAX_SAMPLES), ('stacks', None)):
        value = getattr(args, name)
        if value is not None and (value < 1 or (top and value > top)):
            allowed = f'1 to {top}' if top else '1 up'
            return f'--{name} must be an integer from {allowed}, got {value}'
    # a declared node's options: a configured partition has its own
    given = [n for n in ('sockets', 'numa', 'mem', 'nodes', 'stacks')
             if getattr(args, n) is not None]
    if given and not args.cores:
        return (f'--{given[0]} describes a declared node: give --cores too (a '
                'configured partition\'s topology is its configuration\'s)')
    for pattern in args.prgenv or ():
        try:
            re.compile(pattern)
        except re.error as err:
            return f'--prgenv {pattern!r} is not a regular expression: {err}'
    for name in ('sockets', 'numa'):
        count = getattr(args, name)
        if args.cores and count and args.cores % count:
            return f'--{name} {count} does not divide --cores {args.cores}'
    return ''


def _main(argv: list[str] | None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.reframe_options and '--' not in (sys.argv[1:] if argv is None else argv):
        ap.error(f'unrecognized arguments: {" ".join(args.reframe_options)} (reframe\'s '
                 'options go after --)')
    # reframe's own selection, parsed as the sequential rounds parse it
    args.prgenv = [*(args.prgenv or ()),
                   *selection.values(args.reframe_options, '--prgenv')] or None
    systems = selection.values(args.reframe_options, '--system')
    # then RFM_SYSTEM, as reframe takes it (and settings.py) where none is named
    args.system = (args.system or (systems[-1] if systems else None)
                   or os.environ.get('RFM_SYSTEM', '').strip() or None)
    error = _bad_options(args)
    if error:
        return fail('plan', error)
    try:
        samples = args.samples or samples_per_run()
        if args.cores:
            # sockets, NUMA domains, nodes and stacks not given: 1 each
            topos = [Topology(cores=args.cores, sockets=args.sockets or 1,
                              numa=args.numa or 1,
                              mem_bytes=parse_memory(args.mem) if args.mem else 0,
                              nodes=args.nodes or 1, name=f'declared {args.cores}-core node',
                              stacks=args.stacks or 1)]
        else:
            config = args.config or os.path.join(REPO_DIR, 'config', 'settings.py')
            topos = _partition_topologies(config, args.system, args.prgenv)
        parts = sum(t.stacks for t in topos)
        text = args.budget or os.environ.get('HARNESS_BUDGET', '').strip() or \
            DEFAULT_SESSION_BUDGET
        budget = part_budget(text, parts)
    except ValueError as err:
        return fail('plan', err)
    if args.part_budget:
        # whole seconds for the shell, never 0 (HARNESS_BUDGET=0s/part is refused)
        print(f'{max(1, round(budget))} {max(1, round(budget * parts))} {parts}')
        return 0
    over, total = False, 0.0
    for topo in topos:
        plan = session_plan(topo, samples, budget)
        print(plan.format(verbose=not args.quiet))
        if topo.stacks > 1:
            print(f'  {topo.stacks} stacks: estimated {plan.seconds * topo.stacks / 60:.1f} '
                  f'min on this partition')
        if not plan.runs:
            print(f'  plan {topo.name}: NOTHING runs within the budget', file=sys.stderr)
        over = over or plan.seconds > budget or not plan.runs
        total += plan.seconds * topo.stacks
    print(f'session: {parts} part(s) (partition x stack), estimated {total / 60:.1f} min '
          f'for the planned rounds, budget {budget * parts / 60:.1f} min '
          f'({budget / 60:.1f} min each; HARNESS_BUDGET={text}); the rest goes to more '
          f'rounds of the undecided pairs')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())
