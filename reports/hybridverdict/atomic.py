"""Writes that never leave a half-written file.

Every file is written to a temporary file in the same folder, flushed and
``fsync``'d, then put in place in one step: ``os.replace`` where a file is
replaced (:func:`replaced_file`), a hard link where it must be new
(:func:`new_file`: fails if the name exists, as ``open(path, 'x')`` does).  On
any error (a full disk, an interrupt) the temporary file is removed and the
destination is as it was: absent, or its previous content.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO


@contextlib.contextmanager
def _staged(path: str) -> Iterator[tuple[BinaryIO, str]]:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f'.{os.path.basename(path)}.',
                               suffix='.tmp')
    try:
        with os.fdopen(fd, 'w+b') as fp:
            yield fp, tmp
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sync(fp: BinaryIO) -> None:
    fp.flush()
    os.fsync(fp.fileno())


def _sync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def new_file(path: str) -> Iterator[BinaryIO]:
    """A binary file to write `path` through; it appears, whole, when the
    block ends without error.  FileExistsError if `path` exists then."""
    with _staged(path) as (fp, tmp):
        yield fp
        _sync(fp)
        try:
            os.link(tmp, path)
        finally:
            os.unlink(tmp)
    _sync_dir(path)


@contextlib.contextmanager
def replaced_file(path: str) -> Iterator[BinaryIO]:
    """A binary file to write `path` through; it replaces `path`, whole, when
    the block ends without error (the old content stays otherwise)."""
    with _staged(path) as (fp, tmp):
        yield fp
        _sync(fp)
        os.replace(tmp, path)
    _sync_dir(path)


def write_new(path: str, data: bytes | str) -> None:
    """`data` as the new file `path` (FileExistsError if it exists)."""
    with new_file(path) as fp:
        fp.write(data.encode() if isinstance(data, str) else data)


def write_replacing(path: str, data: bytes | str) -> None:
    """`data` as `path`, replacing it whole or not at all."""
    with replaced_file(path) as fp:
        fp.write(data.encode() if isinstance(data, str) else data)


__all__ = ['new_file', 'replaced_file', 'write_new', 'write_replacing']
