"""Writing a report's files: all new, each whole or not at all, none over an existing one.

The stem is ``verdict-<UTC time>``, with ``-1``, ``-2``, ... where a file of it
exists (``atomic.unique_stem``); each file is written by ``atomic.write_new``, and
where one cannot be (a full disk) those of the set written before it are removed.  The
tidy table is Parquet by default; CSV and JSON, about ten times larger, only on
request (``tidy_formats``).
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import time
from collections.abc import Sequence

from . import html, plots, render, tidy
from .atomic import remove_files, unique_stem, write_new
from .report import Report

#: output kind -> file name suffix
SUFFIXES = {'md': '.md', 'json': '.json', 'html': '.html', 'parquet': '-tidy.parquet',
            'csv': '-tidy.csv', 'tidy_json': '-tidy.json'}
#: tidy formats (``--tidy``) -> output kind
TIDY_KINDS = {'parquet': 'parquet', 'csv': 'csv', 'json': 'tidy_json'}
DEFAULT_TIDY = ('parquet',)
#: Names tried for a report set before giving up (each taken by another report
#: written into the same folder in the same second).
CLAIMS = 100


def write_all(rep: Report, out_dir: str, now: dt.datetime | None = None,
              timings: dict[str, float] | None = None,
              tidy_formats: Sequence[str] = DEFAULT_TIDY) -> dict[str, str]:
    """Write every output of `rep` into `out_dir`; their paths by kind.

    The figures are drawn by this process and a forked second one (where the system
    has fork and two cores) while polars writes the tidy files in a worker thread
    (outside the interpreter lock).  `timings`, if given, receives the seconds each
    step took.  Where any step fails, the files of the report this call wrote so far
    are removed (never another file): no partial report set is left.
    """
    unknown = set(tidy_formats) - set(TIDY_KINDS)
    if unknown:
        raise ValueError(f'unknown tidy format(s): {", ".join(sorted(unknown))} '
                         f'(known: {", ".join(TIDY_KINDS)})')
    clock = Clock(timings)
    os.makedirs(out_dir, exist_ok=True)   # an unwritable --out fails before the fork
    drawing = plots.Drawing(rep)      # then: a second process draws half the figures
    #: the files this call wrote (the worker thread's too), removed if a step fails
    written: list[str] = []
    try:
        now = now or dt.datetime.now(dt.timezone.utc)
        kinds = ['md', 'json', 'html'] + [TIDY_KINDS[f] for f in dict.fromkeys(tidy_formats)]
        text = render.markdown(rep)
        for _ in range(CLAIMS):
            # the .md claims the stem: a report written into the same folder in the
            # same second may take it between the look and the write (then the next)
            base = unique_stem(out_dir, f'verdict-{now:%Y%m%dT%H%M%SZ}', SUFFIXES.values())
            paths = {kind: base + SUFFIXES[kind] for kind in kinds}
            try:
                written.append(write_new(paths['md'], text))
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f'no free report name in {out_dir} after {CLAIMS} tries')
        written.append(write_new(paths['json'], render.verdict_json(rep)))
        clock.lap('Markdown and verdict JSON')
        df = tidy.table(rep.records)
        meta = rep.meta.as_dict() | {'rows': df.height}
        clock.lap(f'tidy table ({df.height} rows)')

        writers = {'parquet': lambda path: tidy.write_parquet(df, path, meta),
                   'csv': lambda path: tidy.write_csv(df, path),
                   'tidy_json': lambda path: tidy.write_json(df, path, meta)}

        def tidy_files() -> float:
            start = time.perf_counter()
            for kind, write in writers.items():
                if kind in paths:
                    write(paths[kind])
                    written.append(paths[kind])
            return time.perf_counter() - start

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            tidy_done = pool.submit(tidy_files)
            figures = drawing.result()
            clock.lap(f'figures ({sum(len(f) for f in figures.values())} PNG, in two processes)')
            written.append(write_new(paths['html'], html.page(rep, figures)))
            clock.lap('HTML page')
            tidy_secs = tidy_done.result()
        clock.lap('waiting for the tidy files')
        if timings is not None:
            timings[f'  (tidy {", ".join(tidy_formats)}, in the worker thread)'] = tidy_secs
    except BaseException:
        # the worker thread has ended (the pool's block waits for it): its files too
        remove_files(written)
        raise
    finally:
        _close(drawing)    # its process too when a write failed before ``result()``
    return paths


def _close(drawing: plots.Drawing) -> None:
    """End `drawing`'s second process, if any (again after ``result()``: harmless)."""
    if drawing.pool is not None:
        drawing.pool.terminate()
        drawing.pool.join()


class Clock:
    """The seconds each step took, into `timings` (if given)."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.timings is not None:
            self.timings[name] = now - self.last
        self.last = now
