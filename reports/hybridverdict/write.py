"""Writing a report's files: all new, none over an existing one.

The stem is ``verdict-<UTC time>``; if any file of that stem exists, ``-1``,
``-2``, ... is appended until none does, and every file is opened in exclusive
mode, so a file that appears meanwhile is never overwritten either.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import time

from . import atomic, html, plots, render, tidy
from .report import Report

#: output kind -> file name suffix
SUFFIXES = {'md': '.md', 'json': '.json', 'html': '.html', 'csv': '-tidy.csv',
            'tidy_json': '-tidy.json'}


def unique_stem(directory: str, stem: str, suffixes: tuple[str, ...] | None = None) -> str:
    """`directory`/`stem`[-n] such that no file stem + suffix exists yet."""
    suffixes = tuple(SUFFIXES.values()) if suffixes is None else suffixes
    n = 0
    while True:
        base = os.path.join(directory, stem if n == 0 else f'{stem}-{n}')
        if not any(os.path.exists(base + s) for s in suffixes):
            return base
        n += 1


def unique_path(directory: str, stem: str, suffix: str) -> str:
    """A path `directory`/`stem`[-n]`suffix` that does not exist yet."""
    return unique_stem(directory, stem, (suffix,)) + suffix


def _write_text(path: str, text: str) -> None:
    atomic.write_new(path, text)   # whole or not at all, never over a file


def write_all(rep: Report, out_dir: str, now: dt.datetime | None = None,
              timings: dict[str, float] | None = None) -> dict[str, str]:
    """Write every output of `rep` into `out_dir`; their paths by kind.

    The figures are drawn by this process and a forked second one (where the system
    has fork and two cores) while polars writes the tidy CSV and JSON in a worker thread
    (outside the interpreter lock).  `timings`, if
    given, receives the seconds each step took.
    """
    clock = _Clock(timings)
    drawing = plots.Drawing(rep)      # first: a second process draws half the figures
    os.makedirs(out_dir, exist_ok=True)
    now = now or dt.datetime.now(dt.timezone.utc)
    base = unique_stem(out_dir, f'verdict-{now:%Y%m%dT%H%M%SZ}')
    paths = {kind: base + suffix for kind, suffix in SUFFIXES.items()}
    _write_text(paths['md'], render.markdown(rep))
    _write_text(paths['json'], render.verdict_json(rep))
    clock.lap('Markdown and verdict JSON')
    df = tidy.table(rep.records)
    meta = rep.meta.as_dict() | {'rows': df.height}
    clock.lap(f'tidy table ({df.height} rows)')

    def tidy_files() -> float:
        start = time.perf_counter()
        tidy.write_csv(df, paths['csv'])
        tidy.write_json(df, paths['tidy_json'], meta)
        return time.perf_counter() - start

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        tidy_done = pool.submit(tidy_files)
        figures = drawing.result()
        clock.lap(f'figures ({sum(len(f) for f in figures.values())} PNG, in two processes)')
        page = html.page(rep, figures)
        _write_text(paths['html'], page)
        clock.lap('HTML page')
        tidy_secs = tidy_done.result()
    clock.lap('waiting for the tidy CSV and JSON')
    if timings is not None:
        timings['  (tidy CSV and JSON, in the worker thread)'] = tidy_secs
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
