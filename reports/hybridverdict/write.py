"""Writing a report's files: all new, each whole or not at all, none over an existing one.

The stem is ``verdict-<UTC time>``; if any file of that stem exists, ``-1``,
``-2``, ... is appended until none does.  Every file is written through a
temporary file in the same folder, fsynced, and given its name only if the name
is still free (``atomic.write_new``): a file that appears meanwhile is never
overwritten, and a failed write leaves no partial file.

The tidy table (one row per record x variable of the report's window) is written
as Parquet by default; CSV and JSON only on request (``tidy_formats``), as they
are about ten times larger.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import time
from collections.abc import Sequence

from . import html, plots, render, tidy
from .atomic import write_text
from .report import Report

#: output kind -> file name suffix
SUFFIXES = {'md': '.md', 'json': '.json', 'html': '.html', 'parquet': '-tidy.parquet',
            'csv': '-tidy.csv', 'tidy_json': '-tidy.json'}
#: tidy formats (``--tidy``) -> output kind
TIDY_KINDS = {'parquet': 'parquet', 'csv': 'csv', 'json': 'tidy_json'}
DEFAULT_TIDY = ('parquet',)


def unique_stem(directory: str, stem: str, suffixes: tuple[str, ...] | None = None) -> str:
    """`directory`/`stem`[-n] such that no file stem + suffix exists yet."""
    suffixes = tuple(SUFFIXES.values()) if suffixes is None else suffixes
    n = 0
    while True:
        base = os.path.join(directory, stem if n == 0 else f'{stem}-{n}')
        if not any(os.path.exists(base + s) for s in suffixes):
            return base
        n += 1


def write_all(rep: Report, out_dir: str, now: dt.datetime | None = None,
              timings: dict[str, float] | None = None,
              tidy_formats: Sequence[str] = DEFAULT_TIDY) -> dict[str, str]:
    """Write every output of `rep` into `out_dir`; their paths by kind.

    The figures are drawn by this process and a forked second one (where the system
    has fork and two cores) while polars writes the tidy files in a worker thread
    (outside the interpreter lock).  `timings`, if given, receives the seconds each
    step took.
    """
    unknown = set(tidy_formats) - set(TIDY_KINDS)
    if unknown:
        raise ValueError(f'unknown tidy format(s): {", ".join(sorted(unknown))} '
                         f'(known: {", ".join(TIDY_KINDS)})')
    clock = _Clock(timings)
    drawing = plots.Drawing(rep)      # first: a second process draws half the figures
    os.makedirs(out_dir, exist_ok=True)
    now = now or dt.datetime.now(dt.timezone.utc)
    base = unique_stem(out_dir, f'verdict-{now:%Y%m%dT%H%M%SZ}')
    kinds = ['md', 'json', 'html'] + [TIDY_KINDS[f] for f in dict.fromkeys(tidy_formats)]
    paths = {kind: base + SUFFIXES[kind] for kind in kinds}
    write_text(paths['md'], render.markdown(rep))
    write_text(paths['json'], render.verdict_json(rep))
    clock.lap('Markdown and verdict JSON')
    df = tidy.table(rep.records)
    meta = rep.meta.as_dict() | {'rows': df.height}
    clock.lap(f'tidy table ({df.height} rows)')

    def tidy_files() -> float:
        start = time.perf_counter()
        if 'parquet' in paths:
            tidy.write_parquet(df, paths['parquet'], meta)
        if 'csv' in paths:
            tidy.write_csv(df, paths['csv'])
        if 'tidy_json' in paths:
            tidy.write_json(df, paths['tidy_json'], meta)
        return time.perf_counter() - start

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        tidy_done = pool.submit(tidy_files)
        figures = drawing.result()
        clock.lap(f'figures ({sum(len(f) for f in figures.values())} PNG, in two processes)')
        write_text(paths['html'], html.page(rep, figures))
        clock.lap('HTML page')
        tidy_secs = tidy_done.result()
    clock.lap('waiting for the tidy files')
    if timings is not None:
        timings[f'  (tidy {", ".join(tidy_formats)}, in the worker thread)'] = tidy_secs
    return paths


class _Clock:
    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.timings is not None:
            self.timings[name] = now - self.last
        self.last = now
