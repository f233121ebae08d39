"""Writing a report's files: all new, none over an existing one.

The stem is ``verdict-<UTC time>``; if any file of that stem exists, ``-1``,
``-2``, ... is appended until none does, and every file is opened in exclusive
mode, so a file that appears meanwhile is never overwritten either.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os

from . import html, render, tidy
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
    with open(path, 'x', encoding='utf-8') as fp:
        fp.write(text)


def write_all(rep: Report, out_dir: str, now: dt.datetime | None = None) -> dict[str, str]:
    """Write every output of `rep` into `out_dir`; their paths by kind.

    The tidy CSV and JSON are serialised by polars outside the interpreter lock, in a
    worker thread, while this thread draws the figures of the HTML page.
    """
    os.makedirs(out_dir, exist_ok=True)
    now = now or dt.datetime.now(dt.timezone.utc)
    base = unique_stem(out_dir, f'verdict-{now:%Y%m%dT%H%M%SZ}')
    paths = {kind: base + suffix for kind, suffix in SUFFIXES.items()}
    _write_text(paths['md'], render.markdown(rep))
    _write_text(paths['json'], render.verdict_json(rep))
    df = tidy.table(rep.records)
    meta = rep.meta.as_dict() | {'rows': df.height}
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        csv_done = pool.submit(tidy.write_csv, df, paths['csv'])
        json_done = pool.submit(tidy.write_json, df, paths['tidy_json'], meta)
        page = html.page(rep)
        csv_done.result()
        json_done.result()
    _write_text(paths['html'], page)
    return paths
