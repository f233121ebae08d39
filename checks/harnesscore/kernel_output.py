"""Read the kernels' ``RESULT <json object>`` lines, the one contract between
the C kernels and everything that reads them (``src/common/kernel_common.h``).

Rank 0 of every kernel run prints one or more lines ``RESULT {...}``; the
benchmark rounds re-tag them with sed (``MD_1x1 {...}``).  One reader for all
of them, so the contract is read one way; each caller turns a malformed line
into its own error (a sanity error in a check, a `RoundsError` in the rounds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

#: The tag the kernels print.
RESULT = 'RESULT'


class MalformedResult(ValueError):
    """A result line whose ``{...}`` is not JSON."""


def result_lines(text: str, tag: str = RESULT, *,
                 skip_malformed: bool = False) -> list[dict]:
    """The JSON objects of the lines ``<tag> {...}`` of `text`, in order.

    Other lines, and a tag followed by anything but ``{``, are not result
    lines.  A ``{...}`` that is not JSON (one cut short too) raises
    `MalformedResult` naming the tag and the start of the line, or is passed
    over with `skip_malformed`.
    """
    return [res for _, res in results_with_lines(text, tag, skip_malformed=skip_malformed)]


def results_with_lines(text: str, tag: str = RESULT, *,
                       skip_malformed: bool = False) -> Iterator[tuple[str, dict]]:
    """As `result_lines`, each object with its line (for an error naming it)."""
    # a line cut short ('RESULT {"kernel":...' without its '}') is malformed too
    for m in re.finditer(rf'^{re.escape(tag)} (\{{.*?)[^\S\n]*$', text, re.M):
        try:
            res = json.loads(m.group(1))
        except json.JSONDecodeError as err:
            if skip_malformed:
                continue
            raise MalformedResult(
                f'malformed {tag} line ({err}): {m.group(1)[:200]}') from None
        yield m.group(0), res
