"""Text outputs of a report: the terminal summary, the Markdown summary and the
JSON of verdicts and analyses."""

from __future__ import annotations

import dataclasses
import json
import math
import re

from harnesscore import stats
from tabulate import tabulate

from . import glance, section
from .apart import Apart
from .records import one_line
from .report import Report
from .verdict import Verdict

COLUMNS = ('kernel', 'size', 'stack', 'partition', 'nodes', 'cores', 'mpi', 'hybrid',
           'T_mpi [s]', 'T_hybrid [s]', 'speedup', 'noise', 'samples', 'rounds',
           'stopped', 'gap [s]', 'verdict')

VERDICT_NOTE = ('Speedup = T_mpi / T_hybrid per node count: where the two sides ran side by '
                'side in rounds, the geometric mean of the per-round ratios with its '
                f'{stats.percent(stats.DECISION_CONFIDENCE)} paired Student t interval on the log '
                'ratios; otherwise the ratio of the medians with its '
                f'{stats.percent(stats.DECISION_CONFIDENCE)} interval (each side\'s median at '
                f'{stats.percent(math.sqrt(stats.DECISION_CONFIDENCE))}: order statistics or a '
                'seeded bootstrap) widened by the floor. The interval against the band '
                '[1 / (1 + floor), 1 + floor]: TIE inside it, WIN above, LOSS below, '
                'INCONCLUSIVE across an edge; noise = the interval\'s relative half-width; '
                'samples = pure-MPI/hybrid runs; rounds = the rounds paired (or the smaller '
                'side); stopped = why its rounds ended '
                f'(decided, cap = HARNESS_MAX_ROUNDS, default {stats.DEFAULT_MAX_ROUNDS}, or '
                'budget = the session ended first); gap = median seconds between the two '
                'runs of a round (- where they were not paired); * = confirmed (the same '
                'call in the last 3 sessions).')


def rows(found: list[Verdict]) -> list[list[object]]:
    """The verdict table; stack and partition name the build, MPI library and system
    where they differ (``apart.Apart``)."""
    apart = Apart.of(found)
    return [[v.kernel, v.size, apart.stack(v), apart.partition(v), v.nodes, v.cores,
             v.mpi_layout,
             f'{v.hybrid_mode} {v.hybrid_layout}', f'{v.t_mpi:.4g}', f'{v.t_hybrid:.4g}',
             f'{v.speedup:.3f}', f'±{100 * v.noise:.1f}%', f'{v.n_mpi}/{v.n_hybrid}',
             v.rounds, v.stopped or '-', '-' if v.gap is None else f'{v.gap:.0f}',
             v.verdict + ('*' if v.confirmed else '')] for v in found]


def _table(columns, body, fmt: str) -> str:
    if fmt == 'github':     # a '|' or a line break in a cell would split its row
        body = [[_md_cell(c) for c in row] for row in body]
    return tabulate(body, headers=columns, tablefmt=fmt, disable_numparse=True)


def _md_cell(value: object) -> object:
    """A Markdown table cell (or list item): '|' escaped, line breaks and tabs as
    blanks."""
    if not isinstance(value, str):
        return value
    return one_line(value).replace('|', '\\|')


def counts(found: list[Verdict]) -> str:
    confirmed = sum(v.confirmed for v in found)
    return (f'{len(found)} verdicts: {glance.calls_text(found)}'
            + (f'; {confirmed} confirmed' if confirmed else ''))


def leading(rep: Report) -> list:
    """The sections every output opens with (the morning page of a nightly)."""
    return [sec for sec in rep.sections if sec.key in section.LEADING and sec.rows]


def terminal(rep: Report) -> str:
    """The summary printed at the end of a run."""
    out = [*rep.meta.lines(), '']
    for sec in leading(rep):
        lines = [str(row[0]) for row in sec.rows]
        head = [] if lines[0].startswith(sec.title) else [f'{sec.title}:']
        out += [*head, *(f'  {ln}' if head else ln for ln in lines), '']
    if rep.verdicts:
        out += [f'Hybrid vs pure MPI at equal cores ({counts(rep.verdicts)})',
                _table(COLUMNS, rows(rep.verdicts), 'simple')]
    else:
        out.append('No pure-MPI/hybrid pair in these runs.')
    empty = [sec.title for sec in rep.sections if not sec.rows]
    for sec in rep.sections:
        if not sec.rows or sec.key in section.LEADING:
            continue
        if sec.key == section.HISTORY:
            out += ['', f'{sec.title}: {len(rep.history)} of {rep.history_total} series drawn '
                    'in the HTML report (table in the Markdown).']
            continue
        out += ['', sec.title, sec.note, _table(sec.columns, sec.rows, 'simple')]
    if empty:
        out += ['', f'No data in these runs for: {"; ".join(empty)}.']
    return '\n'.join(out)


#: What a Markdown renderer reads as the start of raw HTML (CommonMark: '<' and a
#: letter, '/', '!' or '?', after no backslash or an escaped one), outside code spans.
_HTML_START = re.compile(r'(`+)(.*?)\1|(?<!\\)((?:\\\\)*)<(?=[A-Za-z/!?])', re.S)


def no_html(text: str) -> str:
    """`text` with each '<' that would open raw HTML escaped (``\\<``): the report's
    own placeholders (``lat_<m>``, ``bw_<bytes>``) were dropped as unknown tags by
    GitHub's and GitLab's renderers, and a stack or system name could bring a
    ``<script>``.  Shown the same; code spans are left as they are."""
    return _HTML_START.sub(lambda m: m.group(0) if m.group(1) else m.group(3) + '\\<', text)


def markdown(rep: Report) -> str:
    """The Markdown summary (nightly mail, CI page), without raw HTML (``no_html``)."""
    m = rep.meta
    lines = [
        f'# Hybrid vs pure MPI at equal cores: {", ".join(m.systems) or "no system"}',
        '',
        f'Generated {m.generated:%Y-%m-%d %H:%M UTC} by hybridverdict {m.version} from '
        f'{m.records} records ({m.skipped} lines skipped) in {", ".join(m.inputs)}'
        + (f', runs since {m.since.isoformat()}' if m.since else '') + f'; runs {m.dates}.',
        '',
        *[f'> warning: {w}' for w in m.warnings],
        '',
        'MPI libraries:',
        *[f'- {stack}: {_md_cell("; ".join(libs)) or "unknown"}'
          for stack, libs in m.stacks.items()],
        '',
        VERDICT_NOTE,
        '',
    ]
    for sec in leading(rep):
        lines += [f'## {sec.title}', '', sec.note, '', *(f'- {row[0]}' for row in sec.rows), '']
    if rep.verdicts:
        lines += [f'**{counts(rep.verdicts)}**', '', '## Where hybrid wins and loses', '',
                  *[f'- {" ".join(text)}' for _, text in glance.sentences(rep.verdicts)], '',
                  '## Verdicts', '', _table(COLUMNS, rows(rep.verdicts), 'github'), '']
    else:
        lines += ['No pure-MPI/hybrid pair in these runs.', '']
    for sec in rep.sections:
        if sec.key in section.LEADING:
            continue
        body = ([sec.note, '', _table(sec.columns, sec.rows, 'github')] if sec.rows
                else [f'No data: needs {sec.needs}.'])
        lines += [f'## {sec.title}', '', *body, '']
    return no_html('\n'.join(lines))


def finite(data: object) -> object:
    """`data` with every non-finite float (inf, NaN) as None: JSON has no Infinity or
    NaN (the tidy JSON writes them as null too)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def verdict_json(rep: Report) -> str:
    """Verdicts and the data of every analysis, as JSON (strict: non-finite floats as
    null, so it never holds Infinity or NaN)."""
    return json.dumps(finite({
        'version': rep.meta.version, 'meta': rep.meta.as_dict(),
        'records': rep.meta.records, 'skipped': rep.meta.skipped,
        'verdicts': [dataclasses.asdict(v) for v in rep.verdicts],
        'sections': {sec.title: sec.data for sec in rep.sections if sec.data},
    }), indent=1, default=str, allow_nan=False)
