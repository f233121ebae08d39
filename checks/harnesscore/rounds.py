"""Alternating rounds of two tools, read back as per-round ratios.

``RingOsuAccuracy`` (ring against osu_latency/osu_bw) and
``MdLammpsBenchmark`` (md against LAMMPS, hybrid against MPI) run both sides
of every comparison in each round, so each round gives one ratio per compared
variable, and the one rule (``harnesscore.bands``) decides from them.  Their
job scripts' loop (``round_loop``) asks ``python -m harnesscore.rounds``
after each round whether a band is still undecided.  No ReFrame import.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import statistics
import sys
from collections.abc import Sequence

from .bands import band_bounds, more_rounds
from .kernel_output import RESULT, MalformedResult, results_with_lines
from .osu_output import OsuParseError, OsuTable, expected_sizes, parse_osu, rejected_options
from .units import MIB

#: the file in which the job script notes how many rounds it ran
ROUNDS_FILE = 'rounds_done.txt'
#: in the words of ``round_loop``'s question: the number of the round just run
ROUND = '{round}'


class RoundsError(ValueError):
    """A round whose output is missing or cannot be read."""


def _text(dirpath: str, name: str) -> str:
    path = os.path.join(dirpath, name)
    if not os.path.exists(path):
        raise RoundsError(f'{name} is missing: the round did not run')
    with open(path, encoding='utf-8', errors='replace') as fp:
        return fp.read()


def _results(text: str, name: str, tag: str = RESULT) -> list[tuple[str, dict]]:
    """The result lines of `text`, each with its object (a malformed one: RoundsError)."""
    try:
        return list(results_with_lines(text, tag))
    except MalformedResult as err:
        raise RoundsError(f'{name}: {err}') from None


def ring_results(text: str, name: str) -> dict[int, dict]:
    """The ring kernel's RESULT lines by message size (each must be verified)."""
    out = {}
    for _, res in _results(text, name):
        if res.get('verified') is not True:
            raise RoundsError(f'{name}: the ring kernel did not verify its result')
        out[int(res['size'])] = res
    if not out:
        raise RoundsError(f'{name}: the ring kernel printed no RESULT line')
    return out


def osu_table(text: str, name: str) -> OsuTable:
    why = rejected_options(text, name, [])
    if why:
        raise RoundsError(why)
    try:
        return parse_osu(text, name)
    except OsuParseError as err:
        raise RoundsError(str(err)) from None


def ring_osu_round(dirpath: str, r: int, bw_sizes: list[int]) -> dict:
    """Round r of RingOsuAccuracy: ring and OSU latency at 8 B, bandwidths,
    and the ring's RESULT lines of both launches (where their ranks ran)."""
    rl = ring_results(_text(dirpath, f'ring_lat_{r}.out'), f'ring_lat_{r}.out')
    lat_table = osu_table(_text(dirpath, f'osu_lat_{r}.out'), f'osu_lat_{r}.out')
    ol = lat_table.column(0)
    rb = ring_results(_text(dirpath, f'ring_bw_{r}.out'), f'ring_bw_{r}.out')
    ob = osu_table(_text(dirpath, f'osu_bw_{r}.out'), f'osu_bw_{r}.out').column(0)
    missing = [s for s in bw_sizes if s not in rb or s not in ob]
    if 8 not in rl or 8 not in ol or missing:
        raise RoundsError(f'round {r}: sizes missing ({missing or [8]})')
    return {
        'ring_lat': float(rl[8]['latency_us']), 'osu_lat': float(ol[8]),
        'lib': str(rl[8].get('mpi_library', '')), 'osu_version': lat_table.version,
        'ring_bw': {s: float(rb[s]['bandwidth_MBps']) for s in bw_sizes},
        'osu_bw': {s: float(ob[s]) for s in bw_sizes},
        'ring_results': [rl[8], rb[bw_sizes[0]]],
    }


def ring_osu_rounds(dirpath: str, rounds: int, bw_sizes: list[int]) -> list[dict]:
    return [ring_osu_round(dirpath, r, bw_sizes) for r in range(1, rounds + 1)]


def _ratio(ring: float, osu: float, what: str, r: int) -> float:
    """ring / osu of round `r`; an OSU figure that is not a positive number: RoundsError."""
    if not 0 < osu < math.inf:
        raise RoundsError(f'round {r}: OSU {what} is {osu:g}, no ratio to it')
    return ring / osu


def ring_osu_ratios(data: list[dict], bw_sizes: list[int]) -> dict[str, list[float]]:
    """Per-round ratios ring/OSU: latency_ratio_8B and bandwidth_ratio_<size>."""
    out = {'latency_ratio_8B': [_ratio(d['ring_lat'], d['osu_lat'], 'latency at 8 B', r)
                                for r, d in enumerate(data, 1)]}
    for s in bw_sizes:
        out[f'bandwidth_ratio_{s}'] = [
            _ratio(d['ring_bw'][s], d['osu_bw'][s], f'bandwidth at {s} B', r)
            for r, d in enumerate(data, 1)]
    return out


def latency_tolerance(osu_lat_us: float, tol: float, floor_us: float) -> float:
    """Within `tol` or `floor_us` (OSU prints 2 decimals), whichever is larger."""
    return max(tol, floor_us / osu_lat_us) if osu_lat_us > 0 else 1.0


def ring_osu_bands(data: list[dict], bw_sizes: list[int], lat_tol: float, lat_floor_us: float,
                   bw_tol: float) -> dict[str, tuple[float, float, float]]:
    """(ref, lower, upper) of each ratio: 1 within the tolerances."""
    lt = latency_tolerance(statistics.median(d['osu_lat'] for d in data), lat_tol,
                           lat_floor_us)
    return {'latency_ratio_8B': (1.0, -lt, lt),
            **{f'bandwidth_ratio_{s}': (1.0, -bw_tol, bw_tol) for s in bw_sizes}}


# -- md against LAMMPS --------------------------------------------------------------

#: the tags of MdLammpsBenchmark's script: md runs and lmp runs
MD_TAGS = ('MD_1x1', 'MD_2x1', 'MD_1x2')
LMP_TAGS = ('LMP_1', 'LMP_2')
#: the ratios it judges: name -> (numerator tag, denominator tag)
MD_RATIOS = {
    'md_over_lammps_1rank': ('MD_1x1', 'LMP_1'),
    'md_over_lammps_2ranks': ('MD_2x1', 'LMP_2'),
    'hybrid_over_mpi': ('MD_1x2', 'MD_2x1'),
}
#: their bands (ref, lower, upper): md at least as fast as LAMMPS, hybrid within 10% of MPI
MD_BANDS = {
    'md_over_lammps_1rank': (1.0, 0.0, None),
    'md_over_lammps_2ranks': (1.0, 0.0, None),
    'hybrid_over_mpi': (1.0, -0.10, None),
}


def _positive_rate(rate: float, tag: str, line: str) -> float:
    """`rate`, where it is a positive finite number; else a RoundsError naming
    the line (a ratio of it would divide by zero or mean nothing)."""
    if not 0 < rate < math.inf:
        raise RoundsError(f'{tag}: no positive rate (atom-steps per second) in the line '
                          f'{line.strip()!r}')
    return rate


def md_rates(text: str, tag: str) -> list[float]:
    """Atom-steps per second of every run with this tag, in order (a zero
    time or rate: RoundsError)."""
    out = []
    if tag in LMP_TAGS:
        patt = re.compile(rf'^{tag} Loop time of (\S+) on \d+ procs for (\d+) steps '
                          rf'with (\d+) atoms.*$', re.M)
        for m in patt.finditer(text):
            t, steps, atoms = m.groups()
            rate = int(steps) * int(atoms) / float(t) if float(t) > 0 else 0.0
            out.append(_positive_rate(rate, tag, m.group(0)))
        return out
    for line, res in _results(text, f'an md run ({tag})', tag):
        if res.get('verified') is not True:
            raise RoundsError(f'an md run ({tag}) did not verify its result')
        out.append(_positive_rate(float(res['fom']), tag, line))
    return out


def md_results(text: str, tag: str) -> list[dict]:
    """The RESULT objects of every md run with this tag (``MD_TAGS``), in order."""
    return [res for _, res in _results(text, f'an md run ({tag})', tag)]


def md_rates_by_tag(text: str) -> dict[str, list[float]]:
    """``md_rates`` of every tag: md's (``MD_TAGS``), then lmp's (``LMP_TAGS``)."""
    return {tag: md_rates(text, tag) for tag in MD_TAGS + LMP_TAGS}


def md_ratios(rates: dict[str, list[float]]) -> dict[str, list[float]]:
    """Per-round ratios of the complete rounds (both sides present) of
    ``md_rates_by_tag``."""
    return {name: [a / b for a, b in zip(rates[num], rates[den])]
            for name, (num, den) in MD_RATIOS.items()}


# -- the job script's question: more rounds? ----------------------------------------

def round_loop(counter: str, body: Sequence[str], rounds: int, max_rounds: int,
               budget_s: int, question: Sequence[str]) -> list[str]:
    """The job script's loop of rounds: `body` (lines, every word in them
    already quoted) once per round, its number in the shell variable
    `counter`; at least `rounds` rounds, then more while ``python -m
    harnesscore.rounds`` asked `question` (its words; ``ROUND`` stands for the
    round's number) finds a band undecided, up to `max_rounds` and while the
    next round, at the mean pace so far, ends within `budget_s` seconds; at
    the end the rounds run, into ``ROUNDS_FILE``."""
    ask = ' '.join(f'"${counter}"' if word == ROUND else shlex.quote(word)
                   for word in (sys.executable, '-m', 'harnesscore.rounds', *question))
    return [
        f'{counter}=0',
        'start=$SECONDS',
        'while :; do',
        f'  {counter}=$(({counter} + 1))',
        *(f'  {line}' for line in body),
        f'  [ "${counter}" -ge {int(max_rounds)} ] && break',
        f'  [ "${counter}" -lt {int(rounds)} ] && continue',
        f'  [ $(( (SECONDS - start) * ({counter} + 1) / {counter} )) -gt {int(budget_s)} ]'
        ' && break',
        f'  {ask} || break',
        'done',
        f'echo "${counter}" > {ROUNDS_FILE}',
    ]


def _bounds(bands: dict[str, tuple]) -> dict[str, tuple[float | None, float | None]]:
    return {var: band_bounds(*b[:3]) for var, b in bands.items()}


def undecided(kind: str, args: list[str]) -> list[str]:
    """The variables still undecided after the rounds so far."""
    if kind == 'ring':
        dirpath, rounds, bw_max = args[0], int(args[1]), int(args[2])
        lat_tol, lat_floor, bw_tol = float(args[3]), float(args[4]), float(args[5])
        sizes = bw_sizes(bw_max)
        data = ring_osu_rounds(dirpath, rounds, sizes)
        return more_rounds(ring_osu_ratios(data, sizes),
                           _bounds(ring_osu_bands(data, sizes, lat_tol, lat_floor, bw_tol)))
    if kind == 'md':
        with open(args[0], encoding='utf-8', errors='replace') as fp:
            ratios = md_ratios(md_rates_by_tag(fp.read()))
        return more_rounds(ratios, _bounds(MD_BANDS))
    raise RoundsError(f"unknown kind {kind!r} (ring or md)")


def bw_sizes(bw_max: int) -> list[int]:
    """1 MiB .. bw_max, doubling."""
    return expected_sizes(MIB, bw_max) if bw_max >= MIB else []


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when more rounds may decide a band still crossed, 1 when every
    band is decided, 2 on an error (the script then stops adding rounds)."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print('usage: python -m harnesscore.rounds ring DIR ROUNDS BW_MAX LAT_TOL '
              'LAT_FLOOR_US BW_TOL | md STDOUT', file=sys.stderr)
        return 2
    try:
        left = undecided(args[0], args[1:])
    except (RoundsError, OSError, ValueError, IndexError) as err:
        print(f'rounds: {err}', file=sys.stderr)
        return 2
    print(f'rounds: undecided: {", ".join(left) or "none"}', file=sys.stderr)
    return 0 if left else 1


if __name__ == '__main__':
    sys.exit(main())
